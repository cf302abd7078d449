"""The ways to get an export's columns into NumPy, measured on one export (docs/analyze.md, "Columnar
reads"): CPU and wall seconds per table for the columns the reader needs.

    python benchmarks/bench_columnar.py benchmarks/out/big_1000000.sqlite [--threads 2]

- ``scan``: SQLite steps through the rows and sums the columns (no value leaves SQLite): the floor;
- ``group_concat``: the columns as comma-joined text per rowid chunk, parsed by NumPy;
- ``sqlite3 rows``: Python's sqlite3 cursor, one tuple per row, into NumPy;
- ``adbc``: adbc-driver-sqlite's Arrow batches (pyarrow), into NumPy without a Python object per value;
- ``adbc xN``: the same in N threads over rowid ranges, one connection each (wall time shows whether
  the driver lets the threads run at once).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

TABLES = {
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end", "globalTid", "nameId", "correlationId"),
    "CUPTI_ACTIVITY_KIND_KERNEL": ("start", "end", "streamId", "shortName", "correlationId"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("start", "end", "streamId", "copyKind", "srcKind", "dstKind", "bytes", "correlationId"),
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": ("start", "end", "streamId", "correlationId", "syncType", "eventId", "globalPid"),
}
CHUNK = 25_000


def _uri(path: Path) -> str:
    return f"file:{path.resolve()}?mode=ro"


def _span(con: sqlite3.Connection, t: str) -> tuple[int, int]:
    return con.execute(f"SELECT (SELECT min(rowid) FROM {t}), (SELECT max(rowid) FROM {t})").fetchone()


def scan(path: Path, t: str, cols: tuple[str, ...]) -> int:
    con = sqlite3.connect(_uri(path), uri=True)
    return int(con.execute(f"SELECT count(*), {', '.join(f'total({c})' for c in cols)} FROM {t}").fetchone()[0])


def group_concat(path: Path, t: str, cols: tuple[str, ...]) -> int:
    con = sqlite3.connect(_uri(path), uri=True)
    con.text_factory = bytes
    lo, hi = _span(con, t)
    q = f"SELECT {', '.join(f'group_concat({c})' for c in cols)} FROM {t} WHERE rowid >= ? AND rowid < ?"
    n = 0
    for a in range(lo, hi + 1, CHUNK):
        row = con.execute(q, (a, a + CHUNK)).fetchone()
        arrays = [np.fromstring(v, dtype=np.int64, sep=",") for v in row]
        n += arrays[0].size
    return n


def rows(path: Path, t: str, cols: tuple[str, ...]) -> int:
    con = sqlite3.connect(_uri(path), uri=True)
    lo, hi = _span(con, t)
    q = f"SELECT {', '.join(cols)} FROM {t} WHERE rowid >= ? AND rowid < ?"
    n = 0
    for a in range(lo, hi + 1, 4 * CHUNK):
        got = con.execute(q, (a, a + 4 * CHUNK)).fetchall()
        arr = np.array(got, dtype=np.int64) if got else np.empty((0, len(cols)), np.int64)
        n += arr.shape[0]
    return n


def adbc(path: Path, t: str, cols: tuple[str, ...], lo: int | None = None, hi: int | None = None) -> int:
    import adbc_driver_sqlite.dbapi as dbapi

    con = dbapi.connect(_uri(path))
    cur = con.cursor()
    where = "" if lo is None else f" WHERE rowid >= {int(lo)} AND rowid < {int(hi)}"
    cur.execute(f"SELECT {', '.join(cols)} FROM {t}{where}")
    n = 0
    for batch in cur.fetch_record_batch():
        arrays = [batch.column(i).to_numpy(zero_copy_only=False) for i in range(batch.num_columns)]
        n += arrays[0].size
    cur.close()
    con.close()
    return n


def adbc_threads(path: Path, t: str, cols: tuple[str, ...], threads: int) -> int:
    con = sqlite3.connect(_uri(path), uri=True)
    lo, hi = _span(con, t)
    edges = np.linspace(lo, hi + 1, threads * 4 + 1).astype(np.int64).tolist()
    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(lambda ab: adbc(path, t, cols, *ab), zip(edges[:-1], edges[1:])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", type=Path)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-rows", action="store_true", help="leave out the sqlite3 row-object way (the slowest)")
    args = ap.parse_args()
    con = sqlite3.connect(_uri(args.trace), uri=True)
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    ways = [("scan", scan), ("group_concat", group_concat)] + ([] if args.skip_rows else [("sqlite3 rows", rows)]) + \
        [("adbc", adbc), (f"adbc x{args.threads}", lambda p, t, c: adbc_threads(p, t, c, args.threads))]  # fmt: skip
    totals: dict[str, list[float]] = {w: [0.0, 0.0] for w, _ in ways}
    print(f"{'table':<38} {'rows':>10}  " + "  ".join(f"{w:>16}" for w, _ in ways))
    for t, cols in TABLES.items():
        if t not in have:
            continue
        cols = tuple(c for c in cols if c in {r[1] for r in con.execute(f"PRAGMA table_info({t})")})
        cells = []
        n = 0
        for w, fn in ways:
            c0, w0 = time.process_time(), time.perf_counter()
            n = fn(args.trace, t, cols)
            dc, dw = time.process_time() - c0, time.perf_counter() - w0
            totals[w][0] += dc
            totals[w][1] += dw
            cells.append(f"{dc:6.2f} / {dw:5.2f} s")
        print(f"{t:<38} {n:>10,}  " + "  ".join(f"{c:>16}" for c in cells), flush=True)
    print(f"{'total (CPU / wall)':<38} {'':>10}  " + "  ".join(f"{totals[w][0]:6.2f} / {totals[w][1]:5.2f} s" for w, _ in ways))


if __name__ == "__main__":
    sys.exit(main())
