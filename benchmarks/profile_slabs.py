"""Where the slab path's time goes: the wall time of each accumulator's ``add`` per slab (pass 1's span, pass
2's busy time, kernels, copies, events, host, held calls and the critical path's batches), summed over the
run and over its first and last tenth of slabs, and each pass's wall and CPU time.

    python benchmarks/profile_slabs.py benchmarks/out/big_10000000.sqlite

A cost per slab that grows with the trace (the last tenth dearer than the first, or the same slab costing
more in a longer trace) makes the slab path superlinear; one that stays flat keeps it linear. The methods
are wrapped where the classes define them, so the figures are those of ``streamed.analyze_slabs`` as
``clusterbench analyze`` runs it past the whole-read limit (any size here: the slabs are forced). A held
call's ``add`` includes the critical path's batch it feeds (``path.batch``). No GPU needed.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", type=Path, help="an nsys SQLite export (bench_analyze.py builds big ones)")
    args = ap.parse_args()
    from clusterbench.analyzers import assembly as A
    from clusterbench.analyzers import stream as ST
    from clusterbench.analyzers import stream_held as SH
    from clusterbench.analyzers import stream_path as SP
    from clusterbench.analyzers import streamed
    from clusterbench.errors import ClusterbenchError
    from clusterbench.io.nsys import check_sqlite_file
    from clusterbench.io.nsys import slabs as B

    try:
        check_sqlite_file(args.trace)
    except ClusterbenchError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    spent: dict[str, list[float]] = collections.defaultdict(list)

    def wrap(cls: type, name: str, label: str) -> None:
        f = getattr(cls, name)

        def timed(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
            t = time.perf_counter()
            try:
                return f(self, *a, **k)
            finally:
                spent[label].append(time.perf_counter() - t)

        setattr(cls, name, timed)

    for cls, label in ((ST.SpanAccumulator, "pass 1: span"), (ST.BusyAccumulator, "busy"), (ST.KernelAccumulator, "kernels"),
                       (ST.CopyAccumulator, "copies"), (ST.EventAccumulator, "events"), (ST.HostAccumulator, "host"),
                       (SH.HeldStream, "held calls")):  # fmt: skip
        wrap(cls, "add", label)
    wrap(SP.PathStream, "batch", "path.batch")
    wrap(SP.PathStream, "walk", "path.walk")
    passes: list[tuple[float, float]] = []
    run = B.run

    def timed_run(*a, **k):  # noqa: ANN002, ANN003, ANN202
        t, c = time.perf_counter(), time.process_time()
        try:
            return run(*a, **k)
        finally:
            passes.append((time.perf_counter() - t, time.process_time() - c))

    B.run = timed_run
    t0 = time.perf_counter()
    try:
        streamed.analyze_slabs(args.trace, A.request(), str(args.trace))
    except streamed.Fallback as exc:
        print(f"Error: the slab path does not apply to this trace: {exc}", file=sys.stderr)
        return 2
    total = time.perf_counter() - t0
    print(f"{args.trace}: {total:.2f} s in all; passes (wall, CPU s): "
          + ", ".join(f"({w:.2f}, {c:.2f})" for w, c in passes))  # fmt: skip
    print(f"{'step':<14} {'wall s':>8} {'calls':>6} {'first tenth s':>14} {'last tenth s':>13}")
    for label, xs in sorted(spent.items(), key=lambda kv: -sum(kv[1])):
        q = max(1, len(xs) // 10)
        print(f"{label:<14} {sum(xs):>8.2f} {len(xs):>6} {sum(xs[:q]):>14.3f} {sum(xs[-q:]):>13.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
