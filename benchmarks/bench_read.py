"""Where the whole read's CPU goes (docs/analyze.md, "Where the read's CPU goes"), on one export.

    python benchmarks/bench_read.py benchmarks/out/big_1000000.sqlite [--runs 2] [--encodings] [--gil]
    CLUSTERBENCH_READ_THREADS=16 python benchmarks/bench_read.py benchmarks/out/big_1000000.sqlite

- the read as analyze makes it (``load_trace``: the reader, with the analysis's plan for the API calls),
  its CPU and wall seconds and, per kind of read job (activity, API, the API chunks cut down to the plan
  once it is made, synchronization and event tables),
  the thread CPU seconds in SQLite (the query: stepping the rows and building the ``group_concat`` text),
  in NumPy's parse of the text, and in the rest of the job (its NumPy steps), and the main thread's;
- ``--encodings``: SQLite's CPU seconds (one thread, best of 3) for the runtime API table's five columns
  as the reader asks for them and in other encodings (``printf`` hex, one concatenated text per row,
  ``char()``), and the scans that bring no value out (the floor);
- ``--gil``: whether the query and the parse hold the GIL: each runs on a thread while the main thread
  counts in a pure-Python loop; a step that gives the GIL up leaves the count's rate as it was.
"""

from __future__ import annotations

import argparse
import collections
import sqlite3
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusterbench.io.nsys import reader as R  # noqa: E402

RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
API_COLS = ("start", "end - start", "ifnull(globalTid, 0) & 281474976710655", "nameId", "ifnull(correlationId, 0)")


def breakdown(path: Path, runs: int) -> None:
    acc: dict[tuple[str, str], float] = collections.defaultdict(float)
    jobs: collections.Counter = collections.Counter()
    lock, local = threading.Lock(), threading.local()

    def add(key: tuple[str, str], d: float) -> None:
        with lock:
            acc[key] += d

    ints = R._ints

    def timed_ints(v):  # noqa: ANN001, ANN202
        t0 = time.thread_time()
        out = ints(v)
        add((getattr(local, "job", "main"), "parse"), time.thread_time() - t0)
        return out

    def sql_fetch(p: Path, sql: str, lo: int, hi: int) -> list:
        conn = R._thread_conn(p)
        t0 = time.thread_time()
        row = conn.execute(sql, (lo, hi)).fetchone()
        add((getattr(local, "job", "main"), "sqlite"), time.thread_time() - t0)
        try:
            return [v if isinstance(v, (int, float)) else R._ints(v) for v in row]
        except ValueError:
            raise R._not_integer(conn, p, sql, lo, hi) from None

    def job(name: str, fn):  # noqa: ANN001, ANN202
        def run(*a, **k):  # noqa: ANN002, ANN003, ANN202
            local.job = name
            t0 = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                add((name, "total"), time.thread_time() - t0)
                with lock:
                    jobs[name] += 1
                local.job = "main"
        return run

    R._ints, R._fetch = timed_ints, sql_fetch
    R._activity_job = job("activity", R._activity_job)
    R._api_job = job("API", R._api_job)
    R._api_keep = job("API cut", R._api_keep)
    R._columns_job = job("sync+event", R._columns_job)
    from clusterbench.analyzers.analysis import load_trace

    for _ in range(runs):
        acc.clear()
        jobs.clear()
        c0, w0, m0 = time.process_time(), time.perf_counter(), time.thread_time()
        data = load_trace(path)
        main = time.thread_time() - m0
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        print(f"read threads {R.READ_THREADS}, whole-read chunks of {R.ROWS_PER_CHUNK:,} rows: CPU {cpu:.2f} s, "
              f"wall {wall:.2f} s, main thread {main:.2f} s of CPU")
        del data
    print(f"  {'jobs':<11}{'n':>5} {'SQLite':>8} {'parse':>7} {'rest':>7} {'total':>7}  (thread CPU s, last run)")
    for name in ("activity", "API", "API cut", "sync+event"):
        s, p, t = acc[(name, "sqlite")], acc[(name, "parse")], acc[(name, "total")]
        print(f"  {name:<11}{jobs[name]:>5} {s:8.2f} {p:7.2f} {t - s - p:7.2f} {t:7.2f}")


def _connect(path: Path) -> sqlite3.Connection:
    conn = R.connect_read_only(path)
    conn.text_factory = bytes
    return conn


def _chunks(conn: sqlite3.Connection) -> list[tuple[int, int]]:
    lo, hi = R._rowid_span(conn, RUNTIME)
    return R._chunks(lo, hi, 25_000)


def encodings(path: Path) -> None:
    conn = _connect(path)
    chunks = _chunks(conn)
    where = f"FROM {RUNTIME} WHERE rowid > ? AND rowid <= ?"
    ways = {
        "count(*): stepping, no column": "count(*)",
        "one max() of the five columns summed": "max(" + " + ".join(f"({c})" for c in API_COLS) + ")",
        "a max() per column": ", ".join(f"max({c})" for c in API_COLS),
        "group_concat per column (the reader)": ", ".join(f"group_concat({c})" for c in API_COLS),
        "group_concat of start*65536 + nameId (2 columns)": "group_concat(start * 65536 + nameId)",
        "group_concat of start, of nameId": "group_concat(start), group_concat(nameId)",
        "one text per row (a || ',' || b ...)": "group_concat(" + " || ',' || ".join(f"({c})" for c in API_COLS) + ")",
        "printf('%016x') per column, no separator": ", ".join(f"group_concat(printf('%016x', {c}), '')" for c in API_COLS),
        "one printf of the five as hex": "group_concat(printf('" + "%016x" * len(API_COLS) + "', " + ", ".join(API_COLS) + "), '')",
        "char(nameId + 65536) (one column)": "group_concat(char(nameId + 65536), '')",
    }
    print(f"{RUNTIME}, {len(chunks)} chunks of 25,000 rows; SQLite's CPU s (one thread, best of 3), text out MB")
    for label, sel in ways.items():
        q = f"SELECT {sel} {where}"
        best, size = float("inf"), 0
        for _ in range(3):
            c0, size = time.process_time(), 0
            for ab in chunks:
                size += sum(len(v) for v in conn.execute(q, ab).fetchone() if isinstance(v, bytes))
            best = min(best, time.process_time() - c0)
        print(f"  {label:<52} {best:6.3f} s {size / 1e6:7.1f} MB", flush=True)


def gil(path: Path) -> None:
    conn = _connect(path)
    chunks = _chunks(conn)
    q = f"SELECT {', '.join(f'group_concat({c})' for c in API_COLS)} FROM {RUNTIME} WHERE rowid > ? AND rowid <= ?"
    rows = [conn.execute(q, ab).fetchone() for ab in chunks]

    def count(stop: threading.Event | None, seconds: float = 0.3) -> float:
        n, t0 = 0, time.perf_counter()
        while (not stop.is_set()) if stop is not None else (time.perf_counter() - t0 < seconds):
            for _ in range(1000):
                n += 1
        return n / (time.perf_counter() - t0)

    base = count(None)
    other = _connect(path)
    steps = {
        "the query (SQLite)": lambda: [other.execute(q, ab).fetchone() for ab in chunks],
        "np.fromstring parse": lambda: [[np.fromstring(v, dtype=np.int64, sep=",") for v in r] for r in rows],
        "np.array(text.split(b',')) parse, 10 chunks": lambda: [[np.array(v.split(b","), dtype=np.int64) for v in r] for r in rows[:10]],
    }
    for label, fn in steps.items():
        stop, out = threading.Event(), {}

        def work(fn=fn, stop=stop, out=out) -> None:  # noqa: ANN001
            t0 = time.thread_time()
            fn()
            out["cpu"] = time.thread_time() - t0
            stop.set()

        th = threading.Thread(target=work)
        th.start()
        rate = count(stop)
        th.join()
        print(f"  {label:<46} CPU {out['cpu']:6.3f} s; the Python count beside it at {rate / base:4.0%} of its rate alone")


def main() -> int:
    from clusterbench.errors import ClusterbenchError

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Exit codes: 0 measured; 2 bad input (a trace analyze refuses).")
    ap.add_argument("trace", type=Path, help="an nsys SQLite export (benchmarks/bench_analyze.py builds big ones)")
    ap.add_argument("--runs", type=int, default=2, help="reads of the whole trace (default 2)")
    ap.add_argument("--encodings", action="store_true", help="SQLite's CPU per encoding of the runtime API columns")
    ap.add_argument("--gil", action="store_true", help="whether the query and the parse give the GIL up")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error(f"--runs must be at least 1, got {args.runs}")
    try:
        R.check_sqlite_file(args.trace)
        breakdown(args.trace, args.runs)
        if args.encodings:
            encodings(args.trace)
        if args.gil:
            gil(args.trace)
    except ClusterbenchError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        if getattr(exc, "hint", None):
            print(f"Hint: {exc.hint}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
