"""Where the time of `make run` goes: the whole command timed, then each config's phases and its processes.

The limit, written before the changes that meet it: `make run` (the four smoke configs of
configs/smoke.toml, 8,000 frames each) answers in at most LIMIT_S = 30 s on the H200, with the same
figures as before within their noise. It took 75 s cold and 69 s warm there (2026-12-01, before).

This runs the command as a user does (``make run``, or with ``--probe-only`` the probe alone), timing
it whole, then reads what the probe recorded in its results dir: per config the wall seconds of each
phase (env.json ``configs.<label>.phase_s``: trace, export, analyze, sustained) and, per workload
process, where its own time went (``extra.timings_s`` of its result records: interpreter and imports,
CuPy, frames, pipeline set-up, warm-up, pedestal, passes). What no phase holds (start-up, the guards, the
env.json writes) is the rest. It prints the breakdown and the verdict against the limit.

usage: python3 benchmarks/bench_probe_time.py [--probe-only] [--json FILE] [--limit S]

GPU only: needs an NVIDIA GPU and Nsight Systems (nsys on PATH). Exit codes: 0 within the limit; 1 no
GPU or nsys, or the command failed; 3 over the limit. docs/probe.md, "Time to an answer", keeps the
figures and the prediction.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LIMIT_S = 30.0
SMOKE_CONFIG = "configs/smoke.toml"
SMOKE_TAG = "smoke"
PHASES = ("trace", "export", "analyze", "sustained")
PROCESS_PARTS = ("imports", "import_cupy", "frames", "pipeline", "warm_up", "wait_go", "pedestal", "pass", "passes")


def _gpu_problem() -> str | None:
    smi = shutil.which("nvidia-smi")
    if smi is None or subprocess.run([smi, "-L"], capture_output=True).returncode != 0:
        return "no NVIDIA GPU or driver (nvidia-smi -L failed)"
    from clusterbench.io.nsys.export import find_nsys

    if find_nsys() is None:
        return "nsys is not on PATH"
    return None


def _results_dir(after: float) -> Path | None:
    """The smoke results dir the command just wrote (today's, touched after ``after``)."""
    d = ROOT / "results" / f"{datetime.date.today().isoformat()}_f32_{SMOKE_TAG}"
    env = d / "env.json"
    return d if env.is_file() and env.stat().st_mtime >= after else None


def _timings(path: Path) -> dict[str, float]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in ((doc.get("extra") or {}).get("timings_s") or {}).items()}


def breakdown(results_dir: Path) -> dict[str, object]:
    """Per config: its phases (s) and its two processes' parts (s), from the results dir (pure I/O)."""
    env = json.loads((results_dir / "env.json").read_text())
    session = env.get("session_id")
    configs = {}
    for label, entry in (env.get("configs") or {}).items():
        if entry.get("session") != session:
            continue
        sustained = sorted(results_dir.glob(f"{label}.sustained*.gpu*.json"))
        configs[label] = {"phase_s": entry.get("phase_s") or {},
                          "traced_process_s": _timings(results_dir / f"{label}.pass.json"),
                          "sustained_process_s": _timings(sustained[0]) if sustained else {}}
    return {"results_dir": str(results_dir.relative_to(ROOT)), "configs": configs}


def _table(total_s: float, doc: dict) -> str:
    configs = doc["configs"]
    lines = [f"{'config':<20}" + "".join(f"{p:>10}" for p in PHASES) + f"{'sum':>9}"]
    phase_sum = 0.0
    for label, c in configs.items():
        ph = c["phase_s"]
        s = sum(float(ph.get(p, 0.0)) for p in PHASES)
        phase_sum += s
        lines.append(f"{label:<20}" + "".join(f"{float(ph.get(p, 0.0)):>10.2f}" for p in PHASES) + f"{s:>9.2f}")
    lines.append(f"{'the rest (start-up, guards, writes)':<60}{total_s - phase_sum:>9.2f}")
    lines.append("")
    lines.append("inside each process (s): " + ", ".join(PROCESS_PARTS))
    for label, c in configs.items():
        for kind in ("traced_process_s", "sustained_process_s"):
            t = c[kind]
            if t:
                lines.append(f"  {label:<20} {kind.split('_')[0]:<9} " + "  ".join(
                    f"{k} {t[k]:.2f}" for k in PROCESS_PARTS if k in t))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 benchmarks/bench_probe_time.py",
                                 description=__doc__.split("\n\n")[0] + " GPU only: needs an NVIDIA GPU and Nsight "
                                             "Systems.",
                                 epilog="Exit codes: 0 within the limit; 1 no GPU or nsys, or the command failed; "
                                        "3 over the limit.")
    ap.add_argument("--probe-only", action="store_true",
                    help=f"time `clusterbench probe --config {SMOKE_CONFIG} --tag {SMOKE_TAG}` instead of `make run` "
                         "(which adds its set-up and GPU check)")
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--limit", type=float, default=LIMIT_S, metavar="S", help=f"the limit in seconds ({LIMIT_S:g})")
    args = ap.parse_args(argv)
    problem = _gpu_problem()
    if problem:
        print(f"Error: bench_probe_time.py needs an NVIDIA GPU and Nsight Systems: {problem}", file=sys.stderr)
        print("Hint: run it on the GPU machine with nsys on PATH", file=sys.stderr)
        return 1
    if args.probe_only:
        cmd = [sys.executable, "-m", "clusterbench", "probe", "--config", SMOKE_CONFIG, "--tag", SMOKE_TAG]
    else:
        cmd = ["make", "run"]
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    print("$ " + " ".join(cmd), flush=True)
    started = time.time()
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env)
    total = time.monotonic() - t0
    if proc.returncode != 0:
        print(f"Error: {' '.join(cmd)} failed with exit status {proc.returncode} after {total:.1f} s", file=sys.stderr)
        print("Hint: read its output above", file=sys.stderr)
        return 1
    results = _results_dir(started)
    doc: dict[str, object] = {"command": cmd, "total_s": round(total, 2), "limit_s": args.limit,
                              "within_limit": total <= args.limit}
    if results is not None:
        doc.update(breakdown(results))
        print(_table(total, doc))
    print(f"{' '.join(cmd)}: {total:.1f} s, limit {args.limit:g} s: {'within' if total <= args.limit else 'OVER'}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if total <= args.limit else 3


if __name__ == "__main__":
    sys.exit(main())
