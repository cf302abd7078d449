"""Speed and memory benchmark: `clusterbench analyze --json` on real exports inflated to N records.

The limits (docs/analyze.md, "Speed and memory"), written before the code that meets them:
- speed: at 1M kernel and copy records, at most 1.2 s of wall time (required), and the goal of at most
  0.5x the wall time of `nsys stats --report cuda_gpu_sum` on the same export (measured only where nsys
  is found; reported, not a failure);
- memory: at 5M and at 10M records, at most 400 MB peak resident memory of the whole process tree of
  analyze (start-up included), with the read threads of the machine and with 16 read threads
  (--memory-threads);
- linear: the wall time per record at 10M records at most 1.2x the wall time per record at 1M.

Two shapes of trace, each built by copying a real H200 export and replicating every table the reader
reads (kernels, memcpys, memsets, runtime and driver API calls, synchronization rows, CUDA event
records, NVTX ranges; not the profiler's overhead rows, which do not grow with the records) with time
and correlation-id shifts, so that the API, sync and event rows grow as the activity does:
- the device-bound pipeline (tests/data/h200/dev_5x5_s2_b500.sqlite, 2.4 API rows per record, one NVTX
  pass range per copy: the window is 15,385 ranges at 1M): the whole export per copy, laid end to end;
- with --host-bound N ..., the host-bound DAQ-like loop (tests/data/zoo/zoo_host_bound.sqlite: 19 kHz,
  one kernel and two copies per frame, 1.35 API calls per record, no NVTX range: the window is the
  whole activity span, every call kept): the export once, then its loop again and again (the rows
  from the first call in flight when the loop's first GPU row starts), one frame period apart, as a
  longer run of the same loop.
The copies are made by doubling (INSERT ... SELECT of the rows so far), so that building 10M records
takes one statement per table per doubling; a size that is a whole multiple of a smaller one of the
same shape and run is built from it (10M = 2 x 5M, 5M = 5 x 1M).

Each measurement is a fresh process, as a user runs it: `python -m clusterbench analyze BIG --json`
(start-up included, CLUSTERBENCH_ANALYZE_PATH set by --path: by default auto, which reads whole up to
analyze's row limit and in time slabs past it; analyze's notes on stderr say which it took, and the table
says it); its CPU time comes from os.wait4, its peak RSS is the larger of os.wait4's (where it is above
this process's own peak: a child's ru_maxrss starts from its parent's) and the peak of the sum of the
high-water marks (VmHWM) of the process and its descendants sampled every 10 ms from /proc; the traces
are built in a process of their own. When nsys is
found (PATH, $CLUSTERBENCH_NSYS, NVIDIA's install folders), `nsys stats --report cuda_gpu_sum --format
csv --output - BIG` is timed the same way on the same file (after one warm-up run of each).

The last lines printed are a table (per shape and size: records, API rows, how it was read, analyze wall
s (median), CPU s, peak MB, nsys stats wall s and the ratio, wall µs per record) and one line per limit; the table
and the figures also go to OUT/bench_analyze.txt and OUT/bench_analyze.json. The exit code is 3 when
a required limit is missed (the lines say which), 0 when every limit measured is met.

    python benchmarks/bench_analyze.py [--records 1000000 5000000 10000000] [--host-bound 1000000 10000000]
        [--runs 3] [--threads N] [--memory-threads 16] [--out benchmarks/out] [--no-nsys] [--rebuild]
        [--path auto|whole|slabs]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "h200" / "dev_5x5_s2_b500.sqlite"
HOST_BOUND_SOURCE = ROOT / "tests" / "data" / "zoo" / "zoo_host_bound.sqlite"
# every table the reader reads rows from (the others are copied once, as they are)
REPLICATED = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_DRIVER",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
    "NVTX_EVENTS",
)
# PROFILER_OVERHEAD is copied once: its rows are the profiler's set-up and its buffer flushes, about 25 per
# process whatever the records (22 rows for 3,000 records and 27 for 100 in the bundled exports)
ACTIVITY = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "CUPTI_ACTIVITY_KIND_MEMCPY",
            "CUPTI_ACTIVITY_KIND_MEMSET")  # fmt: skip
API = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")
LIMIT_SECONDS = 1.2  # at SPEED_AT records: required
LIMIT_NSYS_RATIO = 0.5  # at SPEED_AT records: the goal
LIMIT_MB = 400  # at MEMORY_AT records and more
LIMIT_LINEAR = 1.2  # per-record wall time at the largest size over that at the smallest
SPEED_AT, MEMORY_AT = 1_000_000, (5_000_000, 10_000_000)
THREADS_ENV = "CLUSTERBENCH_READ_THREADS"  # the reader's read threads per pool (clusterbench.io.nsys.reader)
PATH_ENV = "CLUSTERBENCH_ANALYZE_PATH"  # how analyze reads: auto, whole or slabs (clusterbench.analyzers.analysis)
BUILD_VERSION = 3  # bump when build() changes what it writes: older traces are rebuilt


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _count(con: sqlite3.Connection, tables: tuple[str, ...]) -> int:
    have = _tables(con)
    return sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables if t in have)


def build(source: Path, out: Path, records: int) -> tuple[int, int]:
    """Write the big trace; return (activity records, copies of the source).

    Copy k of the source is shifted by k * span in time and k * (max correlation id + 1) in correlation
    id. Doubling: with c copies written, copies c..2c-1 are the rows of copies 0..c-1 shifted by c
    copies (the last step takes only as many as are still needed)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".building")
    shutil.copyfile(source, tmp)
    tmp.chmod(0o644)
    con = sqlite3.connect(tmp)
    con.execute("PRAGMA journal_mode = OFF")
    con.execute("PRAGMA synchronous = OFF")
    con.execute("PRAGMA cache_size = -262144")  # 256 MiB: the doubling reads back what it just wrote
    tables = _tables(con)
    per_copy = _count(con, ACTIVITY)
    bounds = [con.execute(f"SELECT min(start), max(end) FROM {t}").fetchone() for t in ACTIVITY + API if t in tables]
    t0 = min(b[0] for b in bounds if b[0] is not None)
    t1 = max(b[1] for b in bounds if b[1] is not None)
    span = (t1 - t0) + 1_000_000  # ns; copies never touch each other
    max_corr = max(con.execute(f"SELECT ifnull(max(correlationId), 0) FROM {t}").fetchone()[0]
                   for t in REPLICATED if t in tables and "correlationId" in _columns(con, t))  # fmt: skip
    copies = max(1, round(records / per_copy))
    rows0 = {t: con.execute(f"SELECT max(rowid) FROM {t}").fetchone()[0] or 0 for t in REPLICATED if t in tables}
    done = 1
    while done < copies:
        step = min(done, copies - done)  # copies added now: those of copies 0..step-1, shifted by `done` copies
        for table in REPLICATED:
            if table not in tables or not rows0[table]:
                continue
            cols = _columns(con, table)
            exprs = []
            for c in cols:
                if c in ("start", "end"):
                    exprs.append(f"[{c}] + {done * span}")
                elif c == "correlationId":
                    exprs.append(f"[{c}] + {done * (max_corr + 1)}")
                else:
                    exprs.append(f"[{c}]")
            col_list = ", ".join(f"[{c}]" for c in cols)
            # the source's rows are rowids 1..rows0 of copy 0; copy k's rows follow in rowid order
            con.execute(f"INSERT INTO {table} ({col_list}) SELECT {', '.join(exprs)} FROM {table} "
                        f"WHERE rowid <= {step * rows0[table]} ORDER BY rowid")  # fmt: skip
        done += step
    con.execute(f"PRAGMA user_version = {BUILD_VERSION}")
    con.commit()
    total = _count(con, ACTIVITY)
    con.close()
    tmp.replace(out)
    return total, copies


def build_loop(source: Path, out: Path, records: int) -> tuple[int, int]:
    """Write the big trace of a looping program: the source once, then its loop again and again; return
    (activity records, copies of the loop added).

    The loop is what follows the GPU activity's longest idle gap (the module load or the warm-up before
    the loop): its rows are those starting at or after the start of the first API call still running
    when the loop's first GPU row starts (so its first launch comes with it), and in the tables without
    times (CUDA event records), the rows from the loop's first correlation id on. Copy k of the loop is
    shifted by k loop periods (the loop's span plus its median interval between kernel starts) in time
    and k * (max correlation id + 1) in correlation id. Doubling: with copies 1..c of the loop written
    (after the source's rows, in rowid order), copies c+1..2c are copies 1..c shifted by c periods."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".building")
    shutil.copyfile(source, tmp)
    tmp.chmod(0o644)
    con = sqlite3.connect(tmp)
    con.execute("PRAGMA journal_mode = OFF")
    con.execute("PRAGMA synchronous = OFF")
    con.execute("PRAGMA cache_size = -262144")
    tables = _tables(con)
    acts = [t for t in ACTIVITY if t in tables]
    rows = sorted(r for t in acts for r in con.execute(f"SELECT start, end FROM {t}"))
    ends = [e for _, e in rows]
    run, gap_at, longest = ends[0], 1, -1
    for i in range(1, len(rows)):  # the longest idle stretch between the activity's rows
        if rows[i][0] - run > longest:
            longest, gap_at = rows[i][0] - run, i
        run = max(run, ends[i])
    first_row = rows[gap_at][0]
    api = [t for t in API if t in tables]
    in_flight = [con.execute(f"SELECT min(start) FROM {t} WHERE start <= ? AND end >= ?", (first_row, first_row)).fetchone()[0]
                 for t in api]  # fmt: skip
    l0 = min([first_row] + [x for x in in_flight if x is not None])
    last = max(ends)  # the loop's last GPU row ends: what starts later is the program's tear-down
    l1 = max(con.execute(f"SELECT ifnull(max(end), 0) FROM {t} WHERE start >= ? AND start <= ?", (l0, last)).fetchone()[0]
             for t in acts + api)  # fmt: skip
    kstarts = [r[0] for r in con.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start >= ? ORDER BY start", (l0,))]
    steps = sorted(b - a for a, b in zip(kstarts, kstarts[1:])) or [1_000]
    period = (l1 - l0) + steps[len(steps) // 2]
    corr_cols = {t: "correlationId" in _columns(con, t) for t in REPLICATED if t in tables}
    max_corr = max(con.execute(f"SELECT ifnull(max(correlationId), 0) FROM {t}").fetchone()[0] for t, has in corr_cols.items() if has)
    c0 = min(x for x in (con.execute(f"SELECT min(correlationId) FROM {t} WHERE start >= ?", (l0,)).fetchone()[0] for t in api)
             if x is not None)  # fmt: skip
    base = _count(con, ACTIVITY)
    per_loop = sum(con.execute(f"SELECT count(*) FROM {t} WHERE start >= ? AND start <= ?", (l0, last)).fetchone()[0] for t in acts)
    copies = max(0, round((records - base) / per_loop))
    rows0 = {t: con.execute(f"SELECT ifnull(max(rowid), 0) FROM {t}").fetchone()[0] for t in REPLICATED if t in tables}

    def select(table: str, shift: int) -> tuple[str, str]:
        cols = _columns(con, table)
        exprs = [f"[{c}] + {shift * period}" if c in ("start", "end") else
                 f"[{c}] + {shift * (max_corr + 1)}" if c == "correlationId" else f"[{c}]" for c in cols]  # fmt: skip
        return ", ".join(f"[{c}]" for c in cols), ", ".join(exprs)

    loop_rows: dict[str, int] = {}
    for table in REPLICATED:  # copy 1: the loop's rows of the source, one period on
        if table not in tables or not rows0[table] or not copies:
            continue
        cols = _columns(con, table)
        if "start" in cols:
            where = f"start >= {l0} AND start <= {last}"
        elif corr_cols[table]:
            where = f"correlationId >= {c0}"
        else:
            continue
        col_list, exprs = select(table, 1)
        con.execute(f"INSERT INTO {table} ({col_list}) SELECT {exprs} FROM {table} WHERE {where} ORDER BY rowid")
        loop_rows[table] = con.execute(f"SELECT ifnull(max(rowid), 0) FROM {table}").fetchone()[0] - rows0[table]
    done = 1 if copies else 0
    while done < copies:
        step = min(done, copies - done)  # copies 1..step of the loop, shifted by `done` more periods
        for table, m in loop_rows.items():
            col_list, exprs = select(table, done)
            con.execute(f"INSERT INTO {table} ({col_list}) SELECT {exprs} FROM {table} "
                        f"WHERE rowid > {rows0[table]} AND rowid <= {rows0[table] + step * m} ORDER BY rowid")  # fmt: skip
        done += step
    for table in REPLICATED:  # the tear-down after the last copy (its rows keep their rowids: out of time order)
        if table in tables and copies and "start" in _columns(con, table):
            sets = f"start = start + {copies * period}, [end] = [end] + {copies * period}"
            if corr_cols[table]:
                sets += f", correlationId = correlationId + {copies * (max_corr + 1)}"
            con.execute(f"UPDATE {table} SET {sets} WHERE rowid <= {rows0[table]} AND start > {last}")
    con.execute(f"PRAGMA user_version = {BUILD_VERSION}")
    con.commit()
    total = _count(con, ACTIVITY)
    con.close()
    tmp.replace(out)
    return total, copies


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA table_info({table})")]


def measure(cmd: list[str], runs: int, env: dict[str, str] | None = None) -> tuple[list[float], list[float], float, str, str]:
    """Walls and CPU seconds of ``runs`` fresh runs (after one warm-up run), the peak RSS in MB, and the
    last run's stdout and stderr."""
    _one(cmd, env)  # warm the page cache
    walls, cpus, peak, out, err = [], [], 0.0, "", ""
    for _ in range(runs):
        w, c, rss, out, err = _one(cmd, env)
        walls.append(w)
        cpus.append(c)
        peak = max(peak, rss)
    return walls, cpus, peak, out, err


# analyze's notes on stderr (clusterbench.analyzers.analysis.analyze_file) say how it read the trace
SLABS_NOTE, WHOLE_AFTER_ALL_NOTE = "reading in time slabs", "the time slabs do not apply"


def path_taken(stderr: str) -> str:
    """How analyze read the trace, from its notes on stderr: "slabs" or "whole"."""
    text = " ".join(stderr.split())  # the notes wrap at the output width
    return "slabs" if SLABS_NOTE in text and WHOLE_AFTER_ALL_NOTE not in text else "whole"


def _tree_rss(pid: int) -> int:
    """The peak resident bytes of process ``pid`` and of all its descendants, each since it was started
    (its VmHWM: the kernel's high-water mark of the program's own memory, which starts afresh at exec), summed;
    0 once it is gone."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as fh:
                total += next((int(line.split()[1]) for line in fh if line.startswith("VmHWM:")), 0) * 1024  # none: exiting
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(x) for x in fh.read().split()]
        except (OSError, ValueError):
            continue
    return total


class _TreePeak:
    """The largest _tree_rss(pid), sampled every 10 ms by a thread until stop()."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.done = pid, 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, _tree_rss(self.pid))
            self.done.wait(0.01)

    def stop(self) -> int:
        self.done.set()
        self.thread.join()
        return self.peak


def _one(cmd: list[str], extra: dict[str, str] | None = None) -> tuple[float, float, float, str, str]:
    """(wall s, CPU s (user + system), peak RSS MB, stdout, stderr) of one fresh process: CPU from its own rusage
    (os.wait4 on its pid), the peak RSS the larger of its rusage's and of the process tree's high-water marks
    sampled as it runs. On Linux a child's ru_maxrss starts from the peak resident size of the process it was
    started from, whatever its own program uses after exec: it counts only when it is above this benchmark's
    own peak (which stays small: the traces are built in a process of their own)."""
    # As installed: bytecode caching on (a shell with PYTHONDONTWRITEBYTECODE=1 would
    # otherwise recompile every clusterbench module on each start).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    with tempfile.TemporaryFile() as errf, tempfile.TemporaryFile() as outf:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=outf, stderr=errf, cwd=ROOT, env=env)
        sampler = _TreePeak(proc.pid)
        _, status, usage = os.wait4(proc.pid, 0)  # its own rusage (Popen must not reap it first)
        wall = time.perf_counter() - t
        tree = sampler.stop()
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            errf.seek(0)
            sys.exit(f"{' '.join(cmd)} failed (exit {code}): {errf.read().decode(errors='replace')[-2000:]}")
        outf.seek(0)
        out = outf.read()
        errf.seek(0)
        err = errf.read()
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB, as ru_maxrss
    child = usage.ru_maxrss if usage.ru_maxrss > own else 0
    peak = max(child * 1024, tree) / 2**20  # MB here is 2**20 bytes, as always in these figures
    return wall, usage.ru_utime + usage.ru_stime, peak, out.decode(errors="replace"), err.decode(errors="replace")


def find_nsys() -> str | None:
    sys.path.insert(0, str(ROOT))
    from clusterbench.io.nsys.export import find_nsys as _find

    p = _find()
    return str(p) if p else None


def _apart(func, *args):  # noqa: ANN001, ANN002, ANN202
    """``func(*args)`` in a fresh process: building a trace takes 300 MB of SQLite cache, which would otherwise
    stay this process's peak and show in every later child's ru_maxrss (see _one)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(func, *args).result()


def _trace_for(shape: str, records: int, out: Path, built: list[tuple[int, Path]], rebuild: bool) -> Path:
    """The big trace of ``shape`` ("dev" or "host-bound") at ``records``, built when missing or stale."""
    source = SOURCE if shape == "dev" else HOST_BOUND_SOURCE
    big = out / (f"big_{records}.sqlite" if shape == "dev" else f"big_hostbound_{records}.sqlite")
    if rebuild or not big.exists() or big.stat().st_mtime < source.stat().st_mtime or _version(big) != BUILD_VERSION:
        t = time.perf_counter()
        if shape == "dev":
            # a smaller trace of this run whose size divides this one is copied instead of the source: 10M
            # records are 2 copies of the 5M trace (one doubling), 5M are 5 copies of the 1M one
            src = next((p for n, p in reversed(built) if records >= 2 * n and abs(records / n - round(records / n)) < 0.001),
                       SOURCE)  # fmt: skip
            total, copies = _apart(build, src, big, records)
            what = f"{copies:,} copies of {src.name}"
        else:
            total, copies = _apart(build_loop, source, big, records)
            what = f"{source.name} and {copies:,} more runs of its loop"
        print(f"built {big.name}: {total:,} activity records ({what}) in {time.perf_counter() - t:.1f} s, "
              f"{big.stat().st_size / 1e6:,.0f} MB", file=sys.stderr)  # fmt: skip
    return big


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, nargs="*", default=[1_000_000, 5_000_000, 10_000_000],
                    help="kernel and copy records per trace of the device-bound shape (default 1M, 5M and 10M)")  # fmt: skip
    ap.add_argument("--host-bound", type=int, nargs="*", default=[1_000_000, 10_000_000], metavar="RECORDS",
                    help="records per trace of the host-bound loop shape (default 1M and 10M; none: skip it); "
                    "one timed run each")  # fmt: skip
    ap.add_argument("--runs", type=int, default=3, help="timed runs per size of the device-bound shape (default 3, "
                    "after one warm-up run)")  # fmt: skip
    ap.add_argument("--threads", type=int, default=None, help=f"read threads per pool for analyze (sets {THREADS_ENV}; "
                    "default: the reader's own choice, the cores up to 8)")  # fmt: skip
    ap.add_argument("--memory-threads", type=int, default=16, help="at 5M and 10M records, also measure the peak memory "
                    "with this many read threads (default 16, the GPU machine's cores; 0: skip)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out", help="where the big traces and the results go")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the big traces even if present")
    ap.add_argument("--no-nsys", action="store_true", help="do not time nsys stats even when nsys is found")
    ap.add_argument("--path", choices=("auto", "whole", "slabs"), default="auto", help=f"how analyze reads each trace "
                    f"(sets {PATH_ENV}): auto (default) reads whole up to its row limit and in time slabs past it; "
                    "whole or slabs for every size")  # fmt: skip
    args = ap.parse_args()
    if any(r < 1 for r in args.records + args.host_bound) or args.runs < 1:
        print("Error: --records, --host-bound and --runs take whole numbers of at least 1", file=sys.stderr)
        return 2

    nsys = None if args.no_nsys else find_nsys()
    env = {THREADS_ENV: str(args.threads)} if args.threads else {}
    env[PATH_ENV] = args.path
    print(f"nsys: {nsys or 'not found (nsys stats not measured)'}; python {sys.version.split()[0]}; "
          f"{os.cpu_count()} CPUs; read threads: {args.threads or 'default'}; {PATH_ENV}={args.path}", file=sys.stderr)  # fmt: skip
    rows = []
    built: list[tuple[int, Path]] = []  # (activity records, trace) of the device-bound sizes done so far
    todo = [("dev", r) for r in sorted(args.records)] + [("host-bound", r) for r in sorted(args.host_bound)]
    for shape, records in todo:
        big = _trace_for(shape, records, args.out, built, args.rebuild)
        con = sqlite3.connect(f"file:{big}?mode=ro", uri=True)
        total, api_rows = _count(con, ACTIVITY), _count(con, API)
        con.close()
        if shape == "dev":
            built.append((total, big))
        runs = args.runs if shape == "dev" else 1
        cmd = [sys.executable, "-m", "clusterbench", "analyze", str(big), "--json"]
        walls, cpus, peak, out, err = measure(cmd, runs, env)
        json.loads(out)  # the output is valid JSON
        row = {"shape": shape, "records": total, "api_rows": api_rows, "wall": statistics.median(walls),
               "wall_min": min(walls), "wall_max": max(walls), "cpu": statistics.median(cpus), "peak_mb": peak, "nsys": None,
               "threads": args.threads, "peak_mb_threads": None, "path": path_taken(err), "path_setting": args.path}  # fmt: skip
        print(f"analyze --json, {shape}, {total:,} kernel and copy records (+{api_rows:,} API rows), read "
              f"{row['path']}: wall median {row['wall']:.3f} s (min {row['wall_min']:.3f}, max {row['wall_max']:.3f}) "
              f"over {len(walls)} runs; CPU median {row['cpu']:.3f} s; peak RSS {peak:,.0f} MB", file=sys.stderr)  # fmt: skip
        if args.memory_threads and _memory_size(total) and args.memory_threads != args.threads:
            _, _, peak_t, _, _ = measure(cmd, 1, {THREADS_ENV: str(args.memory_threads), PATH_ENV: args.path})
            row["peak_mb_threads"] = (args.memory_threads, peak_t)
            print(f"  with {args.memory_threads} read threads: peak RSS {peak_t:,.0f} MB", file=sys.stderr)
        if nsys and shape == "dev":
            nw, ncpu, _, _, _ = measure([nsys, "stats", "--report", "cuda_gpu_sum", "--format", "csv", "--output", "-",
                                      str(big)], args.runs)  # fmt: skip
            row["nsys"] = statistics.median(nw)
            print(f"nsys stats --report cuda_gpu_sum: wall median {row['nsys']:.3f} s (min {min(nw):.3f}) over "
                  f"{len(nw)} runs; CPU median {statistics.median(ncpu):.3f} s", file=sys.stderr)  # fmt: skip
        rows.append(row)

    lines, missed = report(rows, nsys is not None)
    print()
    print("\n".join(lines))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_analyze.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (args.out / "bench_analyze.json").write_text(json.dumps({"rows": rows, "missed": missed, "cpus": os.cpu_count(),
                                                             "nsys": nsys}, indent=2) + "\n", encoding="utf-8")  # fmt: skip
    if missed:
        print(f"bench_analyze: limits missed: {', '.join(missed)}", file=sys.stderr)
    return 3 if missed else 0


def _memory_size(records: int) -> bool:
    """Whether the memory limit applies at this many records (5M and more, 1 % below included)."""
    return records >= min(MEMORY_AT) - min(MEMORY_AT) // 100


def _version(path: Path) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(con.execute("PRAGMA user_version").fetchone()[0])
    finally:
        con.close()


def report(rows: list[dict], have_nsys: bool) -> tuple[list[str], list[str]]:
    """The table and one line per limit; and the required limits missed."""
    head = (f"{'shape':<10}  {'records':>11}  {'API rows':>11}  {'read':>6}  {'analyze s':>9}  {'CPU s':>7}  "
            f"{'peak MB':>7}  {'nsys stats s':>12}  {'ratio':>6}  {'µs/record':>9}")  # fmt: skip
    lines = [head, "-" * len(head)]
    for r in rows:
        ns = "–" if r["nsys"] is None else f"{r['nsys']:.3f}"
        ratio = "–" if r["nsys"] is None else f"{r['wall'] / r['nsys']:.2f}"
        per = r["wall"] / r["records"] * 1e6  # µs per record
        peak = max([r["peak_mb"]] + ([r["peak_mb_threads"][1]] if r["peak_mb_threads"] else []))
        lines.append(f"{r.get('shape', 'dev'):<10}  {r['records']:>11,}  {r['api_rows']:>11,}  {r.get('path', '–'):>6}  "
                     f"{r['wall']:>9.3f}  {r['cpu']:>7.3f}  {peak:>7.0f}  {ns:>12}  {ratio:>6}  {per:>9.3f}")  # fmt: skip
    missed: list[str] = []

    def near(shape: str, target: int) -> dict | None:
        return next((r for r in rows if r.get("shape", "dev") == shape and abs(r["records"] - target) <= target // 100), None)

    r1 = near("dev", SPEED_AT)
    if r1 is None:
        lines.append(f"speed at {SPEED_AT:,} records: not measured (no such size)")
    else:
        ok = r1["wall"] <= LIMIT_SECONDS
        lines.append(f"speed at {r1['records']:,} records (read {r1.get('path', '?')}): {r1['wall']:.3f} s, "
                     f"{'within' if ok else 'OVER'} the required {LIMIT_SECONDS} s")  # fmt: skip
        if not ok:
            missed.append(f"speed ({r1['wall']:.2f} s > {LIMIT_SECONDS} s at 1M)")
        if not have_nsys or r1["nsys"] is None:
            lines.append(f"  goal {LIMIT_NSYS_RATIO}x nsys stats: not measured (no nsys here)")
        else:
            ratio = r1["wall"] / r1["nsys"]
            lines.append(f"  goal: {ratio:.2f}x nsys stats ({r1['wall']:.3f} s against {r1['nsys']:.3f} s), "
                         f"{'met' if ratio <= LIMIT_NSYS_RATIO else 'not met'} (goal {LIMIT_NSYS_RATIO}x)")  # fmt: skip
    for shape in ("dev", "host-bound"):
        mem = [r for r in rows if r.get("shape", "dev") == shape and _memory_size(r["records"])]
        for r in mem:
            peaks = [(r["threads"] or "default", r["peak_mb"])] + ([tuple(r["peak_mb_threads"])] if r["peak_mb_threads"] else [])
            worst = max(p for _, p in peaks)
            ok = worst <= LIMIT_MB
            shown = ", ".join(f"{p:,.0f} MB with {t} read threads" for t, p in peaks)
            lines.append(f"memory, {shape}, at {r['records']:,} records (read {r.get('path', '?')}): {shown}; "
                         f"{'within' if ok else 'OVER'} the {LIMIT_MB} MB limit")  # fmt: skip
            if not ok:
                missed.append(f"memory ({shape}: {worst:,.0f} MB > {LIMIT_MB} MB at {r['records'] / 1e6:.1f}M)")
        if shape == "dev":
            for target in MEMORY_AT:
                if near("dev", target) is None:
                    lines.append(f"memory at {target:,} records: not measured (no such size)")
        sized = [r for r in rows if r.get("shape", "dev") == shape]
        if len(sized) >= 2:
            a, b = sized[0], sized[-1]
            growth = (b["wall"] / b["records"]) / (a["wall"] / a["records"])
            ok = growth <= LIMIT_LINEAR
            lines.append(f"linear, {shape}: {b['records'] / a['records']:.1f}x the records took {b['wall'] / a['wall']:.1f}x "
                         f"the wall time ({b['cpu'] / a['cpu']:.1f}x the CPU time); per record {growth:.2f}x, "
                         f"{'within' if ok else 'OVER'} the {LIMIT_LINEAR}x limit")  # fmt: skip
            if not ok:
                missed.append(f"linear ({shape}: {growth:.2f}x per record)")
        elif sized:
            lines.append(f"linear, {shape}: not measured (one size)")
    lines.append("limits missed: " + ("; ".join(missed) if missed else "none"))
    return lines, missed


if __name__ == "__main__":
    sys.exit(main())
