"""Where the slab path's memory peaks: `clusterbench analyze TRACE --json` over time slabs, with the peak
resident memory of each step (pass 1, the window, the idle stretches, the gaps' causes, pass 2, the
groups' records, the JSON) and the resident memory at its start and end.

    python benchmarks/mem_steps.py benchmarks/out/big_10000000.sqlite

Linux only: each step's peak is the process's VmHWM (/proc/self/status) after the peak was reset to the
resident memory at the step's start (writing 5 to /proc/self/clear_refs). "before STEP" lines give the
peak between two steps (what ran between them: the idle stretches run between the window and the
causes). The analysis itself is unchanged (the steps are wrapped, not altered); the JSON is discarded.
Exit codes: 0 done; 2 bad input (no such trace, not Linux).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _status(field: str) -> float:
    """A VmHWM or VmRSS line of /proc/self/status, in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _wrap(owner: object, name: str, label: str) -> None:
    fn = getattr(owner, name)

    def wrapped(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        print(f"  before {label}: peak since the last step {_status('VmHWM'):7.1f} MB", file=sys.stderr)
        _reset_peak()
        start, t0 = _status("VmRSS"), time.perf_counter()
        out = fn(*args, **kwargs)
        print(f"{label:22s} start {start:7.1f} MB  peak {_status('VmHWM'):7.1f} MB  end {_status('VmRSS'):7.1f} MB  "
              f"{time.perf_counter() - t0:7.2f} s", file=sys.stderr)
        _reset_peak()
        return out

    setattr(owner, name, wrapped)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", type=Path, help="an nsys SQLite export")
    args = ap.parse_args()
    if not args.trace.is_file():
        print(f"mem_steps: no such trace: {args.trace}", file=sys.stderr)
        return 2
    if not Path("/proc/self/clear_refs").exists():
        print("mem_steps: needs Linux (/proc/self/clear_refs)", file=sys.stderr)
        return 2
    os.environ["CLUSTERBENCH_ANALYZE_PATH"] = "slabs"
    from clusterbench.analyzers import stream, streamed
    from clusterbench.render import analyze as render

    for owner, name, label in ((streamed, "_pass_a", "pass 1"), (streamed, "_window", "the window"),
                               (stream.SpanAccumulator, "classify", "the gaps' causes"),
                               (streamed, "_pass_b", "pass 2"), (streamed, "_group", "the groups' records"),
                               (render, "render_json", "the JSON")):
        _wrap(owner, name, label)
    from clusterbench.cli import main as cli

    sys.argv = ["clusterbench", "analyze", str(args.trace), "--json"]
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            cli()
        except SystemExit as exc:
            if exc.code not in (0, None):
                print(f"mem_steps: analyze exited {exc.code}", file=sys.stderr)
                return int(exc.code) if isinstance(exc.code, int) else 1
    print(f"  at the end: peak since the last step {_status('VmHWM'):7.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
