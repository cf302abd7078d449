"""What the injection library costs one CUDA runtime call, and how much of it is CUPTI's own dispatch: the
limit behind the library's cost on a program's frame (docs/probe.md, "What a callback costs").

    python3 benchmarks/callback_cost.py OUT [--processes P] [--calls N] [--kinds query record launch]

benchmarks/call_cost.cu (built here with the toolkit's nvcc, into OUT) times 5 blocks of N calls of one
kind in a tight loop (N 100,000 by default; each block's ns per call): cudaStreamQuery on an idle stream,
cudaEventRecord, or the launch of an empty kernel (a synchronize after every 64, counted as a call). Each
kind runs in P processes (5 by default) of each mode, the modes in turn:

    bare      no library
    empty     the library subscribed to the runtime domain, every callback returning at once
              (CB_INJECT_EMPTY=1): CUPTI's own dispatch
    every     the library as probe --what-binds runs it on a runtime-API program: the runtime domain, each
              call timed, launches of cc_empty marking frames
    none      the library subscribed, no callback enabled (CB_INJECT_ONLY=none)
    both      the runtime and the driver domains (as for a program that calls the driver API itself)

A process's figure is the median of its blocks; a mode's is the median over its processes, with their
range. Each mode's cost per call is its figure less bare's, and "ours" is every's less empty's: this
library's own work per call (two callbacks: entry and exit). Writes OUT/callback_cost.json (after each
kind, so that a run cut short keeps the kinds done) and prints a table. With --frame-us F and
--calls-per-frame C, it also prints the cost a frame of F µs holding C calls would carry, every's cost per
call times C, over F (the 2 % budget is 0.02 F / C per call).

GPU only. Exit codes: 0 done; 1 no GPU, no toolkit, or a build or run failed; 2 a bad argument.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

KINDS = ("query", "record", "launch")
MODES: dict[str, dict[str, str] | None] = {
    "bare": None,
    "empty": {"CB_INJECT_DOMAINS": "runtime", "CB_INJECT_EMPTY": "1"},
    "every": {"CB_INJECT_DOMAINS": "runtime"},
    "none": {"CB_INJECT_DOMAINS": "runtime", "CB_INJECT_ONLY": "none"},
    "both": {"CB_INJECT_DOMAINS": "runtime,driver"},
}


def summarize(per_mode: dict[str, list[float]]) -> dict[str, dict]:
    """Per mode (pure): the median over its processes' figures (ns per call), their range, and the cost per
    call against bare; "ours" is every's figure less empty's."""
    out: dict[str, dict] = {}
    bare = statistics.median(per_mode["bare"]) if per_mode.get("bare") else None
    for mode, xs in per_mode.items():
        if not xs:
            out[mode] = {"n": 0, "median_ns": None, "min_ns": None, "max_ns": None, "cost_ns": None}
            continue
        m = statistics.median(xs)
        out[mode] = {"n": len(xs), "median_ns": m, "min_ns": min(xs), "max_ns": max(xs),
                     "cost_ns": None if bare is None or mode == "bare" else m - bare}  # fmt: skip
    if out.get("every", {}).get("median_ns") is not None and out.get("empty", {}).get("median_ns") is not None:
        out["ours_ns"] = out["every"]["median_ns"] - out["empty"]["median_ns"]
    return out


def frame_share(cost_ns: float, calls_per_frame: float, frame_us: float) -> float:
    """The share of a frame of ``frame_us`` µs that ``calls_per_frame`` calls at ``cost_ns`` each add (pure)."""
    return cost_ns * calls_per_frame / (frame_us * 1000.0)


def _gpu_or_exit() -> None:
    import shutil

    if shutil.which("nvidia-smi") is None or subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode != 0:
        print("Error: callback_cost.py needs an NVIDIA GPU (nvidia-smi -L failed)", file=sys.stderr)
        print("Hint: run it on the GPU machine", file=sys.stderr)
        sys.exit(1)


def _build(out: Path) -> tuple[Path, Path]:
    from clusterbench.errors import ClusterbenchError
    from clusterbench.run import inject

    try:
        tk = inject.find_toolkit()
        lib = inject.build(inject.INJECT_LIB, tk)
    except ClusterbenchError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        sys.exit(1)
    exe = out / "call_cost"
    src = Path(__file__).resolve().parent / "call_cost.cu"
    arch = inject.gpu_arch(None)
    res = subprocess.run([str(tk.nvcc), "-O2", "-std=c++17", f"-arch={arch}", str(src), "-o", str(exe)],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    if res.returncode != 0:
        print(f"Error: building call_cost failed:\n{(res.stderr or res.stdout)[-2000:]}", file=sys.stderr)
        sys.exit(1)
    return lib, exe


def _one(exe: Path, kind: str, calls: int, env: dict[str, str]) -> float:
    res = subprocess.run([str(exe), "--kind", kind, "--calls", str(calls)], capture_output=True, text=True,
                         timeout=300, env=env)  # fmt: skip
    try:
        doc = json.loads(res.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        doc = None
    if res.returncode != 0 or doc is None:
        print(f"Error: call_cost --kind {kind} failed (exit {res.returncode}): {(res.stderr or res.stdout)[-500:]}",
              file=sys.stderr)
        sys.exit(1)
    return statistics.median(doc["ns_per_call"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="a folder for the program, the reports and callback_cost.json")
    ap.add_argument("--processes", type=int, default=5, help="processes per mode and kind (default 5)")
    ap.add_argument("--calls", type=int, default=100_000, help="calls per timed block (default 100,000)")
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS, help="the kinds of call")
    ap.add_argument("--frame-us", type=float, help="a frame time (µs) to price every's cost against")
    ap.add_argument("--calls-per-frame", type=float, help="the runtime calls in that frame")
    args = ap.parse_args(argv)
    if args.processes < 1 or args.calls < 1:
        ap.error("--processes and --calls take counts of 1 or more")
    if (args.frame_us is None) != (args.calls_per_frame is None):
        ap.error("--frame-us and --calls-per-frame go together")
    if args.frame_us is not None and (args.frame_us <= 0 or args.calls_per_frame <= 0):
        ap.error("--frame-us and --calls-per-frame take positive numbers")
    if args.out.exists() and not args.out.is_dir():
        ap.error(f"OUT must be a folder, and {args.out} is a file")
    _gpu_or_exit()
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        ap.error(f"cannot make the folder {args.out}: {exc.strerror}")
    out = args.out.resolve()
    lib, exe = _build(out)
    from clusterbench.run import inject

    doc: dict = {"schema": "clusterbench.callback-cost", "version": 1, "calls": args.calls,
                 "processes": args.processes, "modes": MODES, "kinds": {}}  # fmt: skip
    for kind in args.kinds:
        per_mode: dict[str, list[float]] = {m: [] for m in MODES}
        for p in range(args.processes):
            for mode, extra in MODES.items():
                env = dict(os.environ)
                if extra is not None:
                    env.update(inject.inject_env(lib, out / f"{kind}.{mode}.p{p}.json", "kernel:cc_empty", warmup=100,
                                                 domains=extra["CB_INJECT_DOMAINS"]))  # fmt: skip
                    env.update(extra)
                print(f"callback_cost: {kind} {mode}, process {p + 1} of {args.processes}", file=sys.stderr, flush=True)
                per_mode[mode].append(_one(exe, kind, args.calls, env))
        doc["kinds"][kind] = {"per_process_ns": per_mode, **summarize(per_mode)}
        (out / "callback_cost.json").write_text(json.dumps(doc, indent=2) + "\n")  # after each kind
    print(f"ns per call, median of {args.processes} processes (range); cost against bare")
    print(f"{'kind':<8} {'mode':<6} {'ns/call':>9} {'range':>19} {'cost ns':>8}")
    for kind, k in doc["kinds"].items():
        for mode in MODES:
            m = k[mode]
            cost = "" if m["cost_ns"] is None else f"{m['cost_ns']:+.1f}"
            print(f"{kind:<8} {mode:<6} {m['median_ns']:>9.1f} {m['min_ns']:>9.1f}-{m['max_ns']:<9.1f} {cost:>8}")
        if "ours_ns" in k:
            print(f"{kind:<8} this library's own work (every less empty): {k['ours_ns']:+.1f} ns per call")
    if args.frame_us is not None:
        for kind, k in doc["kinds"].items():
            c = k["every"]["cost_ns"]
            if c is not None:
                print(f"a {args.frame_us:g} µs frame of {args.calls_per_frame:g} calls at {kind}'s cost: "
                      f"{100 * frame_share(c, args.calls_per_frame, args.frame_us):+.1f} % "
                      f"(2 % allows {20 * args.frame_us / args.calls_per_frame:.0f} ns per call)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
