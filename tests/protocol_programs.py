"""Tiny workload programs for the CPU tests, written into the test's tmp dir, that speak the
workload protocol (docs/workloads.md) or break it in one named way; and a stand-in nsys that
runs the program and turns the NVTX ranges it "pushed" into an SQLite trace.

A program "pushes" an NVTX range by appending its text to ``<result>.nvtx`` (the stand-in nsys
reads that file; no GPU, no NVTX library). Kernel, H2D and D2H activity in the trace is fixed:
per pass of N frames, kernel 3000 ns, H2D 1000 ns (50 kB), D2H 1000 ns (10 kB), in a 10 000 ns
pass window, as worked out in the tests. A sustained process runs its passes at 1000, 2000, 3000 ... FPS;
behaviour "varies" scales them by 1, 1.02 and 0.99 in its first, second and third sustained process (then
again), as separate processes of one config run at speeds of their own.
"""

from __future__ import annotations

import stat
import sys
import textwrap
from pathlib import Path

PROGRAM = textwrap.dedent('''\
    import argparse, json, sys
    BEHAVIOUR = {behaviour!r}
    ap = argparse.ArgumentParser()
    ap.add_argument("--result"); ap.add_argument("--mode", default="pass"); ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--frames", type=int); ap.add_argument("--cluster", type=int)
    a = ap.parse_args()
    print(f"toy finder: cluster {{a.cluster}}, {{a.frames}} frames, mode {{a.mode}}", file=sys.stderr)
    if BEHAVIOUR == "crash":
        print("toy finder: CUDA error: out of memory", file=sys.stderr)
        sys.exit(3)
    with open(a.result + ".nvtx", "a") as fh:
        fh.write("clusterbench:pedestal\\n")
        if BEHAVIOUR != "no_range":
            fh.write(f"clusterbench:pass frames={{a.frames}}\\n")
    if BEHAVIOUR == "no_result":
        sys.exit(0)
    passes = a.repeat if a.mode == "sustained" else 1
    scale = 1.0
    if BEHAVIOUR == "varies" and a.mode == "sustained":  # each sustained process runs at its own speed
        import os
        counter = os.path.join(os.path.dirname(os.path.abspath(__file__)), "toy_processes")
        k = int(open(counter).read()) if os.path.exists(counter) else 0
        open(counter, "w").write(str(k + 1))
        scale = (1.0, 1.02, 0.99)[k % 3]
    rec = {{"schema": "clusterbench.workload-result", "version": 2, "mode": a.mode, "frames": a.frames,
           "pass_s": [a.frames / (1000.0 * (i + 1) * scale) for i in range(passes)], "clusters_found": 7 * a.frames,
           "clusters_dropped": None, "finder": "toy finder"}}
    if BEHAVIOUR == "missing_frames":
        del rec["frames"]
    if BEHAVIOUR == "bad_version":
        rec["version"] = 1
    text = "{{not json" if BEHAVIOUR == "not_json" else json.dumps(rec)
    open(a.result, "w").write(text)
''')

FAKE_NSYS = textwrap.dedent('''\
    #!{python}
    """A stand-in for nsys: 'profile' runs the child and writes a report; 'export' writes the trace."""
    import os, subprocess, sys
    args = sys.argv[1:]
    out = args[args.index("-o") + 1]
    if args[0] == "profile":
        child = args[args.index("-o") + 2:]
        result = child[child.index("--result") + 1] if "--result" in child else None
        rc = subprocess.call(child)
        open(out + ".nsys-rep", "w").write(str(result))
        sys.exit(rc)
    elif args[0] == "export":
        from clusterbench.io.nsys.writer import CopyRecord, KernelRecord, RangeRecord, write_trace_sqlite
        result = open(args[-1]).read()
        texts = open(result + ".nvtx").read().split("\\n") if os.path.exists(result + ".nvtx") else []
        ranges = [RangeRecord(0, 500, t, 99, 99) if t == "clusterbench:pedestal" else RangeRecord(1000, 11000, t, 99, 99)
                  for t in texts if t]
        write_trace_sqlite(out, [KernelRecord(2000, 5000, 0, 1, 7, 1, 99, "k")],
                           [CopyRecord(1000, 2000, 0, 1, 7, 2, 99, 50_000, 1),
                            CopyRecord(5000, 6000, 0, 1, 7, 3, 99, 10_000, 2)], [], [], ranges)
''')


def write_program(folder: Path, behaviour: str = "ok") -> Path:
    """A toy workload program at ``folder/toy_<behaviour>.py``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"toy_{behaviour}.py"
    path.write_text(PROGRAM.format(behaviour=behaviour))
    return path


def write_fake_nsys(folder: Path, text: str = FAKE_NSYS) -> Path:
    """A stand-in nsys at ``folder/bin/nsys``: ``text`` with ``{python}`` this interpreter."""
    exe = folder / "bin" / "nsys"
    exe.parent.mkdir(parents=True, exist_ok=True)
    exe.write_text(text.format(python=sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def command_config(program: Path, frames: int = 10, batch: int = 10, extra: str = "") -> str:
    """configs.toml text with one command-workload config 'toy' running ``program``."""
    return textwrap.dedent(f'''\
        [defaults]
        pedestal_frames = 100
        workload = "command"
        command = ["{{python}}", "{program.name}", "--cluster", "{{cluster}}", "--frames", "{{frames}}",
                   "--result", "{{result}}", "--mode", "{{mode}}", "--repeat", "{{repeat}}"]

        [[config]]
        label = "toy"
        cluster = 3
        cap = 100
        streams = 1
        batch = {batch}
        frames = {frames}
        {extra}
        ''')


# One command-workload config (label "a") running toy_ok.py, shared by the probe tests.
ONE_COMMAND_CONFIG = """
[defaults]
detector = [400, 400]
pedestal_frames = 100
workload = "command"
command = ["{python}", "toy_ok.py", "--cluster", "{cluster}", "--frames", "{frames}", "--result", "{result}",
           "--mode", "{mode}", "--repeat", "{repeat}"]

[[config]]
label = "a"
cluster = 3
cap = 100
streams = 1
batch = 10
frames = 10
"""
