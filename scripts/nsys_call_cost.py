"""nsys's cost per CUDA call on this machine: the calibration probe uses to estimate a host bar without the
profiler (clusterbench.run.callcost), run REPEAT times so that its own spread shows.

    python scripts/nsys_call_cost.py [--repeat N] [--json FILE] [--save]

Each calibration runs clusterbench.workloads.cupy.calls untraced, then under nsys with the probe's tracing
options, and prints per kind of call (an empty kernel launch, a 4-byte async copy, an event record) the µs per
call untraced and traced, the cost (their difference) and its spread (half the range of each run's chunks),
with the seconds it took. --save keeps the last one in the cache probe reads (one per host, GPU, driver and
nsys version).

GPU only (CuPy, a GPU, nsys on PATH). Exit codes: 0 success, 1 no GPU or nsys, or a calibration failed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _gpu_identity() -> tuple[str | None, str | None]:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=uuid,driver_version", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=30).stdout.strip().split(", ")
        return out[0] or None, out[1] if len(out) > 1 else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None, None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/nsys_call_cost.py",
                                 description=__doc__.split("\n\n")[0] + " GPU only: needs CuPy, a GPU and nsys.")
    ap.add_argument("--repeat", type=int, default=3, help="calibrations (default 3)")
    ap.add_argument("--json", type=Path, help="write every calibration's record here")
    ap.add_argument("--save", action="store_true", help="keep the last calibration in probe's cache")
    args = ap.parse_args(argv)
    import importlib.util
    import shutil

    from clusterbench.errors import ClusterbenchError
    from clusterbench.io.nsys.export import find_nsys
    from clusterbench.run import callcost

    nsys = find_nsys()
    if nsys is None or importlib.util.find_spec("cupy") is None or shutil.which("nvidia-smi") is None:
        missing = "nsys is not on PATH" if nsys is None else "CuPy is not importable, or nvidia-smi is not on PATH"
        print(f"Error: nsys_call_cost.py needs an NVIDIA GPU, CuPy and Nsight Systems ({missing})", file=sys.stderr)
        print("Hint: run it on the GPU machine with nsys on PATH (source .device/env.sh)", file=sys.stderr)
        return 1
    version = subprocess.run([str(nsys), "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    uuid, driver = _gpu_identity()
    key = callcost.machine_key(uuid, driver, version[-1] if version else None)
    costs, seconds = [], []
    for k in range(args.repeat):
        t0 = time.monotonic()
        try:
            cost = callcost.calibrate(nsys, key)
        except ClusterbenchError as exc:
            print(f"Error: {exc}", file=sys.stderr)
            return 1
        seconds.append(time.monotonic() - t0)
        costs.append(cost)
        print(f"calibration {k + 1}: {seconds[-1]:.1f} s", file=sys.stderr, flush=True)
    print(f"{'kind':<8}" + "".join(f"{'run ' + str(k + 1):>26}" for k in range(len(costs))))
    for kind in callcost.KINDS:
        cells = [f"{c.untraced_us[kind]:.2f}->{c.traced_us[kind]:.2f}: {c.cost_us[kind]:+.2f}±{c.spread_us[kind]:.2f}"
                 for c in costs]
        print(f"{kind:<8}" + "".join(f"{cell:>26}" for cell in cells))
    print("µs per call untraced -> under nsys: the cost per call ± its spread; seconds per calibration: "
          + ", ".join(f"{s:.1f}" for s in seconds))
    for kind in callcost.KINDS:
        vals = [c.cost_us[kind] for c in costs]
        print(f"{kind}: cost {min(vals):.2f} to {max(vals):.2f} µs per call over {len(vals)} calibrations")
    if args.json:
        args.json.write_text(json.dumps({"seconds": seconds, "calibrations": [c.to_json() for c in costs]}, indent=1))
    if args.save and costs:
        path = callcost.save(costs[-1])
        print(f"saved to {path}" if path else "could not write the cache", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
