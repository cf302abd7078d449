"""Speed and memory benchmark: `clusterbench analyze --json` on real exports inflated to N records.

The limits (docs/analyze.md, "Speed and memory"), written before the code that meets them:
- speed: at 1M kernel and copy records, at most 0.5x the wall time of `nsys stats --report
  cuda_gpu_sum` on the same export (measured only where nsys is found);
- memory: at 5M records, at most 400 MB peak resident memory (the analyze process, start-up
  included), with the read threads of the machine and with 16 read threads (--memory-threads);
- linear: the wall time per record at 10M records at most 1.2x the wall time per record at 1M.

The trace is built by copying a real H200 export (tests/data/h200/dev_5x5_s2_b500.sqlite) and
replicating every table the reader reads (kernels, memcpys, memsets, runtime and driver API calls,
synchronization rows, CUDA event records, NVTX ranges; not the profiler's overhead rows, which do not
grow with the records) with time and correlation-id shifts (one copy per "pass", laid end to end): the API, sync and event rows grow as
the activity does. The copies are made by doubling (INSERT ... SELECT of the rows so far), so that
building 10M records takes one statement per table per doubling; a size that is a whole multiple of
a smaller one of the same run is built from it (10M = 2 x 5M, 5M = 5 x 1M).

Each measurement is a fresh process, as a user runs it: `python -m clusterbench analyze BIG --json`
(start-up included); its peak RSS and CPU time come from os.wait4. When nsys is found (PATH,
$CLUSTERBENCH_NSYS, NVIDIA's install folders), `nsys stats --report cuda_gpu_sum --format csv
--output - BIG` is timed the same way on the same file (after one warm-up run of each).

The last lines printed are a table (per size: records, API rows, analyze wall s (median), CPU s,
peak MB, nsys stats wall s and the ratio, wall µs per record) and one line per limit; the table
and the figures also go to OUT/bench_analyze.txt and OUT/bench_analyze.json. The exit code is 3 when
a limit is missed, 0 when every limit measured is met.

    python benchmarks/bench_analyze.py [--records 1000000 5000000 10000000] [--runs 3] [--threads N]
        [--memory-threads 16] [--out benchmarks/out] [--no-nsys] [--rebuild]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "h200" / "dev_5x5_s2_b500.sqlite"
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
LIMIT_NSYS_RATIO = 0.5  # at SPEED_AT records
LIMIT_MB = 400  # at MEMORY_AT records
LIMIT_LINEAR = 1.2  # per-record wall time at the largest size over that at the smallest
SPEED_AT, MEMORY_AT = 1_000_000, 5_000_000
THREADS_ENV = "CLUSTERBENCH_READ_THREADS"  # the reader's read threads per pool (clusterbench.io.nsys.reader)
BUILD_VERSION = 2  # bump when build() changes what it writes: older traces are rebuilt


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


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA table_info({table})")]


def measure(cmd: list[str], runs: int, env: dict[str, str] | None = None) -> tuple[list[float], list[float], float, str]:
    """Walls and CPU seconds of ``runs`` fresh runs (after one warm-up run), and the peak RSS in MB."""
    _one(cmd, env)  # warm the page cache
    walls, cpus, peak, out = [], [], 0.0, ""
    for _ in range(runs):
        w, c, rss, out = _one(cmd, env)
        walls.append(w)
        cpus.append(c)
        peak = max(peak, rss)
    return walls, cpus, peak, out


def _one(cmd: list[str], extra: dict[str, str] | None = None) -> tuple[float, float, float, str]:
    """(wall s, CPU s (user + system), peak RSS MB, stdout) of one fresh process, from its own
    rusage (os.wait4 on its pid)."""
    # As installed: bytecode caching on (a shell with PYTHONDONTWRITEBYTECODE=1 would
    # otherwise recompile every clusterbench module on each start).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    with tempfile.TemporaryFile() as errf:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errf, cwd=ROOT, env=env)
        out = proc.stdout.read() if proc.stdout else b""
        _, status, usage = os.wait4(proc.pid, 0)  # its own rusage (Popen must not reap it first)
        wall = time.perf_counter() - t
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code != 0:
            errf.seek(0)
            sys.exit(f"{' '.join(cmd)} failed (exit {code}): {errf.read().decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.decode(errors="replace")


def find_nsys() -> str | None:
    sys.path.insert(0, str(ROOT))
    from clusterbench.io.nsys.export import find_nsys as _find

    p = _find()
    return str(p) if p else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, nargs="+", default=[1_000_000, 5_000_000, 10_000_000],
                    help="kernel and copy records per trace (default 1M, 5M and 10M)")  # fmt: skip
    ap.add_argument("--runs", type=int, default=3, help="timed runs per size (default 3, after one warm-up run)")
    ap.add_argument("--threads", type=int, default=None, help=f"read threads per pool for analyze (sets {THREADS_ENV}; "
                    "default: the reader's own choice, the cores up to 16)")  # fmt: skip
    ap.add_argument("--memory-threads", type=int, default=16, help="at 5M records, also measure the peak memory with this "
                    "many read threads (default 16, the H200 machine's cores; 0: skip)")  # fmt: skip
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out", help="where the big traces and the results go")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the big traces even if present")
    ap.add_argument("--no-nsys", action="store_true", help="do not time nsys stats even when nsys is found")
    args = ap.parse_args()

    nsys = None if args.no_nsys else find_nsys()
    env = {THREADS_ENV: str(args.threads)} if args.threads else {}
    print(f"nsys: {nsys or 'not found (nsys stats not measured)'}; python {sys.version.split()[0]}; "
          f"{os.cpu_count()} CPUs; read threads: {args.threads or 'default'}", file=sys.stderr)  # fmt: skip
    rows = []
    built: list[tuple[int, Path]] = []  # (activity records, trace) of the sizes done so far
    for records in sorted(args.records):
        big = args.out / f"big_{records}.sqlite"
        if args.rebuild or not big.exists() or big.stat().st_mtime < SOURCE.stat().st_mtime or _version(big) != BUILD_VERSION:
            # a smaller trace of this run whose size divides this one is copied instead of the source: 10M
            # records are 2 copies of the 5M trace (one doubling), 5M are 5 copies of the 1M one
            src = next((p for n, p in reversed(built) if records >= 2 * n and abs(records / n - round(records / n)) < 0.001),
                       SOURCE)  # fmt: skip
            t = time.perf_counter()
            total, copies = build(src, big, records)
            print(f"built {big.name}: {total:,} activity records ({copies:,} copies of {src.name}) in "
                  f"{time.perf_counter() - t:.1f} s, {big.stat().st_size / 1e6:,.0f} MB", file=sys.stderr)  # fmt: skip
        con = sqlite3.connect(f"file:{big}?mode=ro", uri=True)
        total, api_rows = _count(con, ACTIVITY), _count(con, API)
        con.close()
        built.append((total, big))
        walls, cpus, peak, out = measure([sys.executable, "-m", "clusterbench", "analyze", str(big), "--json"], args.runs, env)
        json.loads(out)  # the output is valid JSON
        row = {"records": total, "api_rows": api_rows, "wall": statistics.median(walls), "wall_min": min(walls),
               "wall_max": max(walls), "cpu": statistics.median(cpus), "peak_mb": peak, "nsys": None,
               "threads": args.threads, "peak_mb_threads": None}  # fmt: skip
        print(f"analyze --json, {total:,} kernel and copy records (+{api_rows:,} API rows): wall median "
              f"{row['wall']:.3f} s (min {row['wall_min']:.3f}, max {row['wall_max']:.3f}) over {len(walls)} runs; "
              f"CPU median {row['cpu']:.3f} s; peak RSS {peak:,.0f} MB", file=sys.stderr)  # fmt: skip
        if args.memory_threads and abs(total - MEMORY_AT) <= MEMORY_AT // 100:
            _, _, peak_t, _ = measure([sys.executable, "-m", "clusterbench", "analyze", str(big), "--json"], 1,
                                      {THREADS_ENV: str(args.memory_threads)})  # fmt: skip
            row["peak_mb_threads"] = (args.memory_threads, peak_t)
            print(f"  with {args.memory_threads} read threads: peak RSS {peak_t:,.0f} MB", file=sys.stderr)
        if nsys:
            nw, ncpu, _, _ = measure([nsys, "stats", "--report", "cuda_gpu_sum", "--format", "csv", "--output", "-",
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
    return 3 if missed else 0


def _version(path: Path) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(con.execute("PRAGMA user_version").fetchone()[0])
    finally:
        con.close()


def report(rows: list[dict], have_nsys: bool) -> tuple[list[str], list[str]]:
    """The table and one line per limit; and the limits missed."""
    head = (f"{'records':>11}  {'API rows':>11}  {'analyze s':>9}  {'CPU s':>7}  {'peak MB':>7}  {'nsys stats s':>12}  "
            f"{'ratio':>6}  {'µs/record':>9}")  # fmt: skip
    lines = [head, "-" * len(head)]
    for r in rows:
        ns = "–" if r["nsys"] is None else f"{r['nsys']:.3f}"
        ratio = "–" if r["nsys"] is None else f"{r['wall'] / r['nsys']:.2f}"
        per = r["wall"] / r["records"] * 1e6  # µs per record
        lines.append(f"{r['records']:>11,}  {r['api_rows']:>11,}  {r['wall']:>9.3f}  {r['cpu']:>7.3f}  {r['peak_mb']:>7.0f}  "
                     f"{ns:>12}  {ratio:>6}  {per:>9.3f}")  # fmt: skip
    missed: list[str] = []

    def near(target: int) -> dict | None:
        return next((r for r in rows if abs(r["records"] - target) <= target // 100), None)

    r1 = near(SPEED_AT)
    if r1 is None:
        lines.append(f"speed at {SPEED_AT:,} records: not measured (no such size)")
    elif not have_nsys or r1["nsys"] is None:
        lines.append(f"speed at {r1['records']:,} records: not measured (no nsys here); limit {LIMIT_NSYS_RATIO}x nsys stats")
    else:
        ratio = r1["wall"] / r1["nsys"]
        ok = ratio <= LIMIT_NSYS_RATIO
        lines.append(f"speed at {r1['records']:,} records: {ratio:.2f}x nsys stats ({r1['wall']:.3f} s against "
                     f"{r1['nsys']:.3f} s), {'within' if ok else 'OVER'} the {LIMIT_NSYS_RATIO}x limit")  # fmt: skip
        if not ok:
            missed.append("speed")
    r5 = near(MEMORY_AT)
    if r5 is None:
        lines.append(f"memory at {MEMORY_AT:,} records: not measured (no such size)")
    else:
        peaks = [(r5["threads"] or "default", r5["peak_mb"])] + ([r5["peak_mb_threads"]] if r5["peak_mb_threads"] else [])
        worst = max(p for _, p in peaks)
        ok = worst <= LIMIT_MB
        shown = ", ".join(f"{p:.0f} MB with {t} read threads" for t, p in peaks)
        lines.append(f"memory at {r5['records']:,} records: {shown}; {'within' if ok else 'OVER'} the {LIMIT_MB} MB limit")
        if not ok:
            missed.append("memory")
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        growth = (b["wall"] / b["records"]) / (a["wall"] / a["records"])
        ok = growth <= LIMIT_LINEAR
        lines.append(f"linear: {b['records'] / a['records']:.1f}x the records took {b['wall'] / a['wall']:.1f}x the wall "
                     f"time ({b['cpu'] / a['cpu']:.1f}x the CPU time); per record {growth:.2f}x, "
                     f"{'within' if ok else 'OVER'} the {LIMIT_LINEAR}x limit")  # fmt: skip
        if not ok:
            missed.append("linear")
    else:
        lines.append("linear: not measured (one size)")
    lines.append("limits missed: " + (", ".join(missed) if missed else "none"))
    return lines, missed


if __name__ == "__main__":
    sys.exit(main())
