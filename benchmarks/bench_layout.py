"""The data-layout prototypes of docs/analyze.md ("The layout"): the same work in SQL in SQLite (one
connection, one core) and in NumPy over the arrays the reader returns, on one export.

    python benchmarks/bench_layout.py benchmarks/out/big_1000000.sqlite

Prints the CPU time of each: a scan of the runtime table (SQLite's floor for any SQL over it), each
call's kernel stream by a join on correlationId, and each thread's running maximum of call end times
(a window function); then the join and the running maximum in NumPy.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clusterbench.io.nsys import read_trace  # noqa: E402


def main(path: str) -> None:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)

    def sql(what: str, q: str) -> None:
        c, w = time.process_time(), time.perf_counter()
        con.execute(q).fetchall()
        print(f"{what:>45}: CPU {time.process_time() - c:.3f} s, wall {time.perf_counter() - w:.3f} s", flush=True)

    sql("SQLite: scan of the runtime table", "SELECT count(*), sum(end - start) FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    sql("SQLite: each call's kernel stream (join)",
        "SELECT count(*), sum(k.streamId) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
        "LEFT JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId")  # fmt: skip
    sql("SQLite: running max(end) per thread (window)",
        "SELECT count(m), max(m) FROM (SELECT max(end) OVER (PARTITION BY globalTid ORDER BY start "
        "ROWS UNBOUNDED PRECEDING) m FROM CUPTI_ACTIVITY_KIND_RUNTIME)")  # fmt: skip
    con.close()
    data = read_trace(path)
    api, act = data.api, data.activity
    c = time.process_time()
    kc = act.correlation[act.section("kernel")]
    ks = kc[np.argsort(kc, kind="stable")]
    i = np.minimum(np.searchsorted(ks, api.correlation), ks.size - 1)
    _ = ks[i] == api.correlation
    print(f"{'NumPy: each call kernel stream (sort, search)':>45}: CPU {time.process_time() - c:.3f} s", flush=True)
    c = time.process_time()
    for th in np.unique(api.thread).tolist():
        np.maximum.accumulate(api.end_ns[api.thread == th])
    print(f"{'NumPy: running max(end) per thread':>45}: CPU {time.process_time() - c:.3f} s", flush=True)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="an nsys SQLite export (e.g. benchmarks/out/big_1000000.sqlite)")
    args = ap.parse_args()
    if not Path(args.trace).is_file():
        sys.exit(f"Error: no such file: {args.trace}")
    main(args.trace)
