"""Steps of scripts/device_untraced.sh that are not a probe: the injection library's own cost, the delay
test through a program's own flags, and the summary table of every result.

usage: python3 scripts/untraced_steps.py cost ZOO_DIR OUT [--processes P]
       python3 scripts/untraced_steps.py callbacks ZOO_DIR OUT [--processes P]
       python3 scripts/untraced_steps.py own-flags ZOO_DIR OUT [--processes P] [--k-us K]
       python3 scripts/untraced_steps.py summary OUT

  cost       the zoo's daq_loop (built in ZOO_DIR) at 1 and 4 streams (20,000 and 80,000 frames: about a
             second a run, as a 20,000-frame run at 4 streams, 0.3 s, spread by a third from run to run), bare
             and with the injection library
             (no delay; every CUDA callback domain, then the runtime's alone), P processes each, interleaved:
             the frame by the program's own rate, and the library's cost against the bare runs (limit: 2 %).
             Writes OUT/cost.json. Needs a GPU and nvcc (the library is built here).
  callbacks  which of the library's callbacks costs the frame: the zoo's daq_loop at 2 and 4 streams, 80,000
             frames a process (longer runs narrow the program's own spread), bare and with the library on the
             runtime domain with every callback, none (subscribed only), cudaLaunchKernel alone and
             cudaStreamSynchronize alone (CB_INJECT_ONLY), P processes a mode (4 by default here), the modes
             in turn: each mode's median frame by the program's own rate against the bare one's. Writes
             OUT/callbacks.json. Needs a GPU and nvcc.
  own-flags  the delay test through the daq_loop's own flags at 1 stream (--spin-us K: the host, --delay-us
             K: the GPU, --h2d-bytes: the link), P processes a point: each slope by the program's own rate, to
             set against the injection library's. Keeps each run's ZOO line (its own time per call). Writes
             OUT/own_flags.json. Needs a GPU.
  summary    reads OUT/results/*/ (probes.csv, <label>.untraced.json), OUT/cost.json and OUT/own_flags.json and
             writes OUT/summary.md: per config the traced and untraced split, the delay slopes, the untraced
             frame against the program's own rate, the host bar, and what binds. Needs no GPU.
"""

from __future__ import annotations

import csv
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RATE = re.compile(r"rate: ([0-9.]+) frames/s")
COST_LIMIT = 0.02  # the library's own cost must keep the frame within 2 % of a bare run


def _usage(code: int = 2, why: str | None = None) -> None:
    if why:
        print(f"Error: {why}", file=sys.stderr)
        print("Hint: python3 scripts/untraced_steps.py --help", file=sys.stderr)
    else:
        print(__doc__.split("\n\n", 1)[1])
    sys.exit(code)


def _gpu_or_exit(what: str) -> None:
    import shutil

    if shutil.which("nvidia-smi") is None or subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode != 0:
        print(f"Error: untraced_steps.py {what} needs an NVIDIA GPU (nvidia-smi -L failed)", file=sys.stderr)
        print("Hint: run it on the GPU machine (scripts/device_untraced.sh runs the cost and own-flags steps)", file=sys.stderr)
        sys.exit(1)


def _run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 120) -> tuple[float | None, str]:
    """The frame (µs) by the program's own rate, and its output."""
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    out = res.stdout + res.stderr
    rates = RATE.findall(res.stdout)
    if res.returncode != 0 or not rates:
        return None, out
    return 1e6 / float(rates[-1]), out


def _zoo_line(out: str) -> dict | None:
    line = next((ln for ln in out.splitlines() if ln.startswith("ZOO ")), None)
    return None if line is None else json.loads(line[4:])


def _stats(values: list[float]) -> dict:
    v = [x for x in values if x is not None]
    if not v:
        return {"n": 0, "median_us": None, "half_range_us": None, "values_us": []}
    return {"n": len(v), "median_us": statistics.median(v), "half_range_us": (max(v) - min(v)) / 2, "values_us": v}


def against_bare(frames: dict[str, list[float | None]]) -> dict:
    """Per variant (pure): its frames' stats and, but for the bare one, its median's change against the bare
    variant's median (``cost``)."""
    point = {k: _stats(v) for k, v in frames.items()}  # type: ignore[arg-type]
    bare = point.get("bare", {}).get("median_us")
    for k, p in point.items():
        if k != "bare":
            p["cost"] = None if not bare or p["median_us"] is None else p["median_us"] / bare - 1
    return point


def _interleaved(step: str, argv: list[str], variants: dict[str, dict[str, str] | None], processes: int, out: Path,
                 tag: str) -> dict[str, list[float | None]]:  # fmt: skip
    """The frame (µs, by the program's own rate) of each variant in ``processes`` runs, the variants in turn.
    A variant is None (no library) or the injection library's settings: ``domains`` and, optionally,
    ``only`` (CB_INJECT_ONLY); each run's report goes to OUT/<step>.<tag>.<variant>.p<i>.json."""
    from clusterbench.run import inject

    lib = inject.build(inject.INJECT_LIB)
    frames: dict[str, list[float | None]] = {k: [] for k in variants}
    for p in range(processes):
        for name, lib_set in variants.items():
            env = dict(os.environ)
            if lib_set is not None:
                env.update(inject.inject_env(lib, out / f"{step}.{tag}.{name}.p{p}.json", "kernel:zoo_calib", warmup=100,
                                             domains=lib_set["domains"]))  # fmt: skip
                if lib_set.get("only"):
                    env["CB_INJECT_ONLY"] = lib_set["only"]
            print(f"{step}: {tag} {name}, process {p + 1} of {processes}", file=sys.stderr, flush=True)
            f, text = _run(argv, env)
            if f is None:
                print(f"{step}: {name} {tag} p{p} failed:\n{text[-2000:]}", file=sys.stderr)
            frames[name].append(f)
    return frames


# frames a run per stream count: about a second each (daq_loop's frame is about 36 µs at 1 stream and 14 µs at 4
# on an H100)
COST_FRAMES = {1: 20000, 4: 80000}


def cost(zoo: Path, out: Path, processes: int) -> int:
    prog = str(zoo / "daq_loop")
    doc: dict = {"limit": COST_LIMIT, "program": prog, "points": {}}
    variants = {"bare": None, "inject_all": {"domains": "runtime,driver"}, "inject_runtime": {"domains": "runtime"}}
    doc["frames"] = COST_FRAMES
    for streams, frames in COST_FRAMES.items():
        argv = [prog, "--frames", str(frames), "--streams", str(streams), "--no-timing"]
        point = against_bare(_interleaved("cost", argv, variants, processes, out, f"s{streams}"))  # type: ignore[arg-type]
        bare = point["bare"]["median_us"]
        for k in ("inject_all", "inject_runtime"):
            point[k]["within_limit"] = None if point[k]["cost"] is None else point[k]["cost"] <= COST_LIMIT
        doc["points"][f"streams{streams}"] = point
        print(f"cost at {streams} stream(s): bare {_fmt(bare)} µs; with the library (all domains) "
              f"{_fmt(point['inject_all']['median_us'])} µs ({_pct(point['inject_all']['cost'])}); runtime only "
              f"{_fmt(point['inject_runtime']['median_us'])} µs ({_pct(point['inject_runtime']['cost'])})")
    (out / "cost.json").write_text(json.dumps(doc, indent=2) + "\n")
    return 0


# the library's callbacks measured apart, on the runtime domain: CB_INJECT_ONLY per variant (bare: no library)
CALLBACK_MODES: dict[str, dict[str, str] | None] = {
    "bare": None, "every": {"domains": "runtime"}, "none": {"domains": "runtime", "only": "none"},
    "launch": {"domains": "runtime", "only": "cudaLaunchKernel"}, "sync": {"domains": "runtime", "only": "cudaStreamSynchronize"},
}  # fmt: skip
CALLBACK_FRAMES = 80000  # frames a run: longer runs narrow the program's own spread


def callbacks(zoo: Path, out: Path, processes: int) -> int:
    prog = str(zoo / "daq_loop")
    doc: dict = {"program": prog, "frames": CALLBACK_FRAMES, "modes": CALLBACK_MODES, "points": {}}
    for streams in (2, 4):
        argv = [prog, "--frames", str(CALLBACK_FRAMES), "--streams", str(streams), "--no-timing"]
        point = against_bare(_interleaved("callbacks", argv, CALLBACK_MODES, processes, out, f"s{streams}"))
        doc["points"][f"streams{streams}"] = point
        print(f"{streams} stream(s): bare {_fmt(point['bare']['median_us'])} µs; " + "; ".join(
            f"{k} {_fmt(v['median_us'])} µs ({_pct(v['cost'])})" for k, v in point.items() if k != "bare"))
    (out / "callbacks.json").write_text(json.dumps(doc, indent=2) + "\n")
    return 0


def own_flags(zoo: Path, out: Path, processes: int, k_us: float) -> int:
    prog = str(zoo / "daq_loop")
    base = [prog, "--frames", "10000", "--streams", "1"]
    link_bytes = 320000 + int(k_us * 25e3)  # k µs at 25 GB/s more per H2D (a nominal rate: the slope's unit)
    points = {"base": [], "host": ["--spin-us", f"{k_us:g}"], "gpu": ["--delay-us", f"{k_us:g}"],
              "link": ["--h2d-bytes", str(link_bytes)]}
    frames: dict[str, list[float]] = {k: [] for k in points}
    zoo_lines: dict[str, list[dict]] = {k: [] for k in points}
    for p in range(processes):
        for name, extra in points.items():
            f, text = _run(base + extra)
            frames[name].append(f)  # type: ignore[arg-type]
            z = _zoo_line(text)
            if z is not None:
                zoo_lines[name].append({"calls": z.get("calls"), "budget": z.get("budget"), "gpu": z.get("gpu")})
            if f is None:
                print(f"own-flags: {name} p{p} failed:\n{text[-2000:]}", file=sys.stderr)
    st = {k: _stats(v) for k, v in frames.items()}
    b = st["base"]["median_us"]
    slopes = {}
    for name in ("host", "gpu", "link"):
        d = st[name]["median_us"]
        slopes[name] = None if b is None or d is None else (d - b) / k_us
    doc = {"k_us": k_us, "link_bytes": link_bytes, "link_gbps_nominal": 25.0, "frames": st, "slopes": slopes,
           "zoo": zoo_lines}
    (out / "own_flags.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(f"own flags (k {k_us:g} µs): base {b} µs; slopes {slopes}")
    return 0


def _fmt(v: float | None, digits: int = 2) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def _pct(fraction: float | None) -> str:
    return "–" if fraction is None else f"{fraction * 100:+.1f} %"


def summary(out: Path) -> int:
    from clusterbench.model.untraced import UntracedRecord

    lines = ["# What binds without the profiler: device run", ""]
    rows = []
    for probes in sorted((out / "results").glob("*/probes.csv")):
        with open(probes, newline="") as fh:
            for r in csv.DictReader(fh):
                rec_path = probes.parent / f"{r['label']}.untraced.json"
                doc = json.loads(rec_path.read_text()) if rec_path.is_file() else None
                rows.append((probes.parent.name, r, doc))
    lines += ["| config | traced frame µs | untraced frame µs (library) | program's own µs | host bar µs | "
              "slope host | gpu | link | binds | split untraced µs (miss) | profiler's µs | lib cost |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    details = []
    for d, r, doc in rows:
        def num(k: str) -> float | None:
            try:
                return float(r[k]) if r.get(k) not in (None, "") else None
            except ValueError:
                return None
        own = 1e6 / num("sustained_fps") if num("sustained_fps") else None
        split = (doc or {}).get("split") or {}
        miss = split.get("miss")
        lines.append(f"| {r['label']} | {_fmt(num('measured_us'))} | {_fmt(num('untraced_frame_us'))} | {_fmt(own)} | "
                     f"{_fmt(num('untraced_host_us'))} | {_fmt(num('delay_slope_host'))} | {_fmt(num('delay_slope_gpu'))} | "
                     f"{_fmt(num('delay_slope_link'))} | {r.get('delay_binds') or '–'} | "
                     f"{_fmt(split.get('untraced_sum_us'))} ({_pct(miss)}) | "
                     f"{_fmt(split.get('profiler_us'))} | "
                     f"{_pct(num('inject_cost'))} |")
        if doc is not None:
            try:
                UntracedRecord.from_json(doc)
            except ValueError as exc:
                details.append(f"- {r['label']}: its record does not read back: {exc}")
            parts = split.get("parts") or []
            details.append(f"\n## {r['label']} ({d})\n")
            details.append("| part | traced µs | untraced µs | profiler µs | how |")
            details.append("|---|---|---|---|---|")
            for p in parts:
                details.append(f"| {p['resource']} | {_fmt(p['traced_us'])} | {_fmt(p['untraced_us'])} | "
                               f"{_fmt(p['profiler_us'])} | {p['how']} |")
            idle = doc.get("idle") or {}
            if idle:
                details.append(f"\nidle {_fmt(idle.get('idle_us'))} µs/frame ({_fmt(idle.get('gaps'))} gaps): GPU's own "
                               f"{_fmt(idle.get('gpu_own_us'))}, profiler's {_fmt(idle.get('profiler_us'))}, unexplained "
                               f"{_fmt(idle.get('unexplained_us'))}; {idle.get('note')}")
            dt = doc.get("delay_test") or {}
            for s in dt.get("slopes") or []:
                details.append(f"- slope {s['resource']}: {_fmt(s['slope'])} ± {_fmt(s['spread'])} {s['verdict']}"
                               f" (base {_fmt(s['base_us'])} → {_fmt(s['delayed_us'])} µs){'; ' + s['note'] if s.get('note') else ''}")
            replayed = {x["resource"]: x for x in doc.get("replay") or []}
            if replayed:
                details.append("- the trace, the same delays replayed on it: " + ", ".join(
                    f"{res} {_fmt(x['slope'])} {x['verdict']}" for res, x in replayed.items()))
            host = doc.get("host") or {}
            if host:
                details.append(f"- untraced frame {_fmt(host.get('period_us'))} µs (p10 {_fmt(host.get('period_p10_us'))}, "
                               f"p90 {_fmt(host.get('period_p90_us'))}); sched {host.get('sched')}; calls per frame: "
                               + ", ".join(f"{c['api']} {c['per_frame']:.2f} × {c['us_per_call']:.2f} µs"
                                           for c in (host.get('calls') or [])[:8]))
            for n in doc.get("notes") or []:
                details.append(f"- note: {n}")
    lines += details
    for name in ("cost.json", "own_flags.json"):
        p = out / name
        if p.is_file():
            lines += ["", f"## {name}", "", "```", json.dumps(json.loads(p.read_text()), indent=1)[:6000], "```"]
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    print(text)
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        _usage(0 if argv else 2, None if argv else "no step given")
    step, rest = argv[0], argv[1:]
    opts = {"--processes": "3", "--k-us": "10"}
    pos = []
    i = 0
    while i < len(rest):
        if rest[i] in opts and i + 1 < len(rest):
            opts[rest[i]] = rest[i + 1]
            i += 2
        else:
            pos.append(rest[i])
            i += 1
    try:
        processes, k_us = int(opts["--processes"]), float(opts["--k-us"])
    except ValueError:
        _usage(2, "--processes takes an integer and --k-us a number")
    if processes < 1:
        _usage(2, f"--processes takes a count of 1 or more, got {processes}")
    if step == "summary" and len(pos) == 1:
        return summary(Path(pos[0]))
    if step == "callbacks" and "--processes" not in rest:
        processes = 4
    if step in ("cost", "callbacks", "own-flags") and len(pos) == 2:
        zoo, out = Path(pos[0]), Path(pos[1])
        if not (zoo / "daq_loop").is_file():
            _usage(2, f"{zoo}/daq_loop is not there: build it first (bash tests/zoo/build.sh {zoo} daq_loop)")
        _gpu_or_exit(step)  # before OUT is made
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        if step == "cost":
            rc = cost(zoo, out, processes)
        elif step == "callbacks":
            rc = callbacks(zoo, out, processes)
        else:
            rc = own_flags(zoo, out, processes, k_us)
        print(f"{step}: {time.monotonic() - t0:.1f} s")
        return rc
    _usage(2, f"unknown step or arguments: {' '.join(argv)}")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
