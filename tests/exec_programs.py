"""Programs probed as they are, for the CPU tests: a tiny program written into the test's tmp dir
that prints what a real one prints (its own rate, markers, a kernel time), and a stand-in nsys that runs
it and leaves a given SQLite export as its trace.

The stand-in nsys is the outermost edge: it runs the real program (its output lands in the probe's log
as nsys's would), writes a report, and for the trace copies the export the test names in
``$FAKE_NSYS_TRACES`` (JSON: ``{"node": path, "graph": path}``, chosen by ``--cuda-graph-trace``;
``"default"`` for either) to ``-o``'s ``.sqlite`` when asked with ``--export=sqlite`` (else ``nsys export``
makes it). The probe's analysis then reads that export for real. It sets ``FAKE_NSYS_TRACED=1`` for the
program, so a program can print what it printed under the profiler.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import protocol_programs

FAKE_NSYS = textwrap.dedent('''\
    #!{python}
    """A stand-in for nsys (tests/exec_programs.py)."""
    import json, os, shutil, subprocess, sys
    args = sys.argv[1:]
    out = args[args.index("-o") + 1]
    traces = json.loads(os.environ.get("FAKE_NSYS_TRACES", "{{}}"))
    if args[0] == "profile":
        child = args[args.index("-o") + 2:]
        mode = "node" if "--cuda-graph-trace=node" in args else "graph"
        trace = traces.get(mode) or traces.get("default")
        with open(os.environ.get("FAKE_NSYS_CALLS", os.devnull), "a") as fh:
            fh.write(json.dumps(args) + "\\n")
        rc = subprocess.call(child, env={{**os.environ, "FAKE_NSYS_TRACED": "1"}})
        print("Generating '/tmp/nsys-report-0000.qdstrm'")
        open(out + ".nsys-rep", "w").write(json.dumps({{"trace": trace}}))
        if "--export=sqlite" in args and trace:
            shutil.copyfile(trace, out + ".sqlite")
        sys.exit(rc)
    elif args[0] == "export":
        trace = json.load(open(args[-1]))["trace"]
        shutil.copyfile(trace, out)
''')

PROGRAM = textwrap.dedent('''\
    """A program probed as it is: prints what it is told to, no NVTX, no result record."""
    import argparse, os, sys, time
    ap = argparse.ArgumentParser()
    ap.add_argument("--traced", help="print this file's text under the profiler")
    ap.add_argument("--untraced", help="print this file's text untraced")
    ap.add_argument("--rates", help="untraced: the n-th run prints rate: <n-th value> frames/s (a counter file)")
    ap.add_argument("--streams", type=int)
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--marked-sleep", type=float, help="print 'loop start', sleep, print 'loop end'")
    ap.add_argument("--exit", type=int, default=0)
    a = ap.parse_args()
    traced = os.environ.get("FAKE_NSYS_TRACED") == "1"
    print("toy program: starting", flush=True)
    if a.traced and traced:
        print(open(a.traced).read(), end="", flush=True)
    if a.untraced and not traced:
        print(open(a.untraced).read(), end="", flush=True)
    if a.rates and not traced:
        values, counter = a.rates.split(":")
        n = int(open(counter).read()) if os.path.exists(counter) else 0
        open(counter, "w").write(str(n + 1))
        print(f"rate: {values.split(',')[n % len(values.split(','))]} frames/s", flush=True)
    if a.streams is not None:
        print(f"rate: {1000 * a.streams} frames/s", flush=True)
    if a.marked_sleep is not None:
        print("loop start", flush=True)
        time.sleep(a.marked_sleep)
        print("loop end", flush=True)
    if a.sleep:
        print("toy program: working", flush=True)
        time.sleep(a.sleep)
    sys.exit(a.exit)
''')


def write_fake_nsys(folder: Path) -> Path:
    return protocol_programs.write_fake_nsys(folder, FAKE_NSYS)


def write_program(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "toy_exec.py"
    path.write_text(PROGRAM)
    return path


def traces_env(**traces: Path) -> str:
    """``$FAKE_NSYS_TRACES`` for the stand-in nsys: node=, graph= or default= export paths."""
    return json.dumps({k: str(v) for k, v in traces.items()})
