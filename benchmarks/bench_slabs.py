"""The time-slab path on a big export: the engines' figures (analyzers.stream: busy time, kernels by name,
copies by size class) from the slabs of io.nsys.slabs, with their time and peak memory, against the
whole-array analyzers' figures on the same window (--check, which reads the whole trace too).

    python benchmarks/bench_slabs.py benchmarks/out/big_1000000.sqlite [--rows 200000] [--check]

The window is the trace's pass ranges (NVTX text 'pass...', as analyze's auto window takes them) or,
without any, the GPU activity span. Prints wall and CPU seconds, the slabs, and the peak RSS (sampled
every 5 ms from /proc/self/statm, start-up included).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profile_analyze import Rss  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", type=Path)
    ap.add_argument("--rows", type=int, default=None, help="rows per slab (default: 4 read chunks)")
    ap.add_argument("--check", action="store_true", help="also run the whole analysis and compare")
    args = ap.parse_args()
    rss = Rss()
    from clusterbench.analyzers import intervals as iv
    from clusterbench.analyzers import stream as ST
    from clusterbench.io.nsys import reader as R
    from clusterbench.io.nsys import slabs as B

    ranges = R.nvtx_ranges(args.trace, ("pass",))
    if len(ranges):
        window = iv.union(ranges.start_ns, ranges.end_ns)
    else:
        con = R.connect_read_only(args.trace)
        lo = min(con.execute(f"SELECT min(start) FROM {t}").fetchone()[0] or 2**62 for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"))
        hi = max(con.execute(f"SELECT max(end) FROM {t}").fetchone()[0] or 0 for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"))
        window = (np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64))
    con = R.connect_read_only(args.trace)
    pid, dev = con.execute("SELECT (globalPid >> 24) & 16777215, deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()
    con.close()
    n = {"slabs": 0, "rows": 0, "tries": 0}

    def consume(slabs):  # noqa: ANN001, ANN202
        n.update(slabs=0, rows=0, tries=n["tries"] + 1)

        def counted():  # noqa: ANN202
            for s in slabs:
                n["slabs"] += 1
                n["rows"] += s.rows
                yield s

        return ST.engines_over(counted(), pid, dev, window, None)

    c0, w0 = time.process_time(), time.perf_counter()
    out: list = []
    busy, kernels, copies = B.run(args.trace, consume, rows=args.rows, reader_out=out)
    late = sorted(c.table for c in out[-1].cursors if c.suffix is not None)
    dc, dw = time.process_time() - c0, time.perf_counter() - w0
    print(f"{args.trace.name}: {n['rows']:,} rows in {n['slabs']:,} slabs; window {window[0].size:,} intervals; "
          f"{dw:.2f} s wall, {dc:.2f} s CPU; peak RSS {rss.peak / 2**20:,.0f} MB"
          + (f"; read {n['tries']} times, out of start order: {', '.join(late)}" if late else ""))  # fmt: skip
    print(f"  busy: " + ", ".join(f"{k} {v.busy_ns:,} ns ({v.count:,})" for k, v in busy.engines.items()))
    if args.check:
        from clusterbench.analyzers import busy as busy_mod
        from clusterbench.analyzers import kernels as kernels_mod
        from clusterbench.analyzers import model as model_mod

        data = R.read_trace(args.trace)
        g = model_mod.build(data, pid, dev)
        want = busy_mod.measure(g, window, None)
        kb = want.engines["kernel"].busy_ns
        same = (want.engines == busy.engines and want.any_busy_ns == busy.any_busy_ns and want.overlap_ns == busy.overlap_ns
                and kernels_mod.by_name(g, window, None, kb) == kernels and kernels_mod.copy_classes(g, window, None) == copies)  # fmt: skip
        print(f"  the whole analyzers: {'the same' if same else 'DIFFERENT'}; peak RSS with them {rss.peak / 2**20:,.0f} MB")
        if not same:
            sys.exit(3)


if __name__ == "__main__":
    threading.stack_size(1 << 20)
    main()
