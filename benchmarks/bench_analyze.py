"""Speed and memory benchmark: `clusterbench analyze --json` on real exports inflated to N records.

The limits (docs/analyze.md, "Speed and memory"), written before the code that meets them:
- memory: at most 400 MB peak resident memory (the analyze process, start-up included) at 5M kernel
  and copy records;
- time: growing linearly with the records (5M takes at most about 5x what 1M takes);
- speed: where nsys runs, at most 0.5x the wall time of `nsys stats --report cuda_gpu_sum` on the
  same export.

The trace is built by copying a real H200 export (tests/data/h200/dev_5x5_s2_b500.sqlite) and
replicating its kernel, memcpy, runtime-API, synchronization and NVTX rows with time shifts (one
copy per "pass", laid end to end). Each measurement is a fresh process, as a user runs it:
`python -m clusterbench analyze BIG --json` (start-up included); its peak RSS and CPU time come from
os.wait4. When nsys is found (PATH, $CLUSTERBENCH_NSYS, NVIDIA's install folders), `nsys stats
--report cuda_gpu_sum --format csv --output - BIG` is timed the same way on the same file (after one
warm-up run of each). The last lines printed are a table: per size, records, analyze wall s (median),
CPU s, peak MB, and nsys stats wall s and the ratio.

    python benchmarks/bench_analyze.py [--records 1000000 5000000] [--runs 5] [--out benchmarks/out] [--no-nsys]
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "h200" / "dev_5x5_s2_b500.sqlite"
REPLICATED = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "NVTX_EVENTS",
)
ACTIVITY = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
LIMIT_MB_AT_5M = 400
LIMIT_NSYS_RATIO = 0.5


def build(source: Path, out: Path, records: int) -> tuple[int, int]:
    """Write the big trace; return (activity records, replicas)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".building")
    shutil.copyfile(source, tmp)
    tmp.chmod(0o644)
    con = sqlite3.connect(tmp)
    con.execute("PRAGMA journal_mode = OFF")
    con.execute("PRAGMA synchronous = OFF")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    per_copy = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ACTIVITY if t in tables)
    t0, t1 = con.execute(
        "SELECT min(s), max(e) FROM (SELECT min(start) s, max(end) e FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "UNION ALL SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
        "UNION ALL SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME)"
    ).fetchone()
    span = (t1 - t0) + 1_000_000  # ns; copies never touch each other
    replicas = max(1, round(records / per_copy))
    max_corr = con.execute("SELECT max(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0] or 0
    con.execute("CREATE TEMP TABLE n(i INTEGER PRIMARY KEY)")
    con.executemany("INSERT INTO n VALUES (?)", ((i,) for i in range(1, replicas)))
    for table in REPLICATED:
        if table not in tables:
            continue
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        exprs = []
        for c in cols:
            if c in ("start", "end"):
                exprs.append(f"t.[{c}] + n.i * {span}")
            elif c == "correlationId":
                exprs.append(f"t.[{c}] + n.i * {max_corr + 1}")
            else:
                exprs.append(f"t.[{c}]")
        col_list = ", ".join(f"[{c}]" for c in cols)
        con.execute(f"CREATE TEMP TABLE base AS SELECT * FROM {table}")
        con.execute(f"INSERT INTO {table} ({col_list}) SELECT {', '.join(exprs)} FROM base t CROSS JOIN n")
        con.execute("DROP TABLE base")
    con.commit()
    total = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ACTIVITY if t in tables)
    con.close()
    tmp.replace(out)
    return total, replicas


def measure(cmd: list[str], runs: int) -> tuple[list[float], list[float], float, str]:
    """Walls and CPU seconds of ``runs`` fresh runs (after one warm-up run), and the peak RSS in MB."""
    _one(cmd)  # warm the page cache
    walls, cpus, peak, out = [], [], 0.0, ""
    for _ in range(runs):
        w, c, rss, out = _one(cmd)
        walls.append(w)
        cpus.append(c)
        peak = max(peak, rss)
    return walls, cpus, peak, out


def _one(cmd: list[str]) -> tuple[float, float, float, str]:
    """(wall s, CPU s (user + system), peak RSS MB, stdout) of one fresh process, from its own
    rusage (os.wait4 on its pid)."""
    # As installed: bytecode caching on (a shell with PYTHONDONTWRITEBYTECODE=1 would
    # otherwise recompile every clusterbench module on each start).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT, env=env)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed (exit {proc.returncode})")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.decode(errors="replace")


def find_nsys() -> str | None:
    sys.path.insert(0, str(ROOT))
    from clusterbench.io.nsys.export import find_nsys as _find

    p = _find()
    return str(p) if p else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, nargs="+", default=[1_000_000, 5_000_000], help="activity records per trace (default 1M and 5M)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per size (default 5)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out", help="where the big traces go")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the big traces even if present")
    ap.add_argument("--no-nsys", action="store_true", help="do not time nsys stats even when nsys is found")
    args = ap.parse_args()

    nsys = None if args.no_nsys else find_nsys()
    print(f"nsys: {nsys or 'not found (no nsys stats comparison)'}; python {sys.version.split()[0]}; "
          f"{os.cpu_count()} CPUs", file=sys.stderr)  # fmt: skip
    rows = []
    for records in args.records:
        big = args.out / f"big_{records}.sqlite"
        if args.rebuild or not big.exists() or big.stat().st_mtime < SOURCE.stat().st_mtime:
            t = time.perf_counter()
            total, replicas = build(SOURCE, big, records)
            print(f"built {big.name}: {total:,} activity records ({replicas:,} copies of {SOURCE.name}) in "
                  f"{time.perf_counter() - t:.1f} s, {big.stat().st_size / 1e6:,.0f} MB", file=sys.stderr)  # fmt: skip
        con = sqlite3.connect(f"file:{big}?mode=ro", uri=True)
        total = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ACTIVITY[:2])
        runtime = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
        con.close()
        walls, cpus, peak, out = measure([sys.executable, "-m", "clusterbench", "analyze", str(big), "--json"], args.runs)
        json.loads(out)  # the output is valid JSON
        row = {"records": total, "runtime_rows": runtime, "wall": statistics.median(walls), "wall_min": min(walls),
               "cpu": statistics.median(cpus), "peak_mb": peak, "nsys": None}  # fmt: skip
        print(f"analyze --json, {total:,} kernel and copy records (+{runtime:,} runtime API rows): wall median "
              f"{row['wall']:.3f} s (min {row['wall_min']:.3f}, max {max(walls):.3f}) over {len(walls)} runs; CPU median "
              f"{row['cpu']:.3f} s; peak RSS {peak:,.0f} MB", file=sys.stderr)  # fmt: skip
        if nsys:
            nw, ncpu, _, _ = measure([nsys, "stats", "--report", "cuda_gpu_sum", "--format", "csv", "--output", "-",
                                          str(big)], args.runs)  # fmt: skip
            row["nsys"] = statistics.median(nw)
            print(f"nsys stats --report cuda_gpu_sum: wall median {row['nsys']:.3f} s (min {min(nw):.3f}) over "
                  f"{len(nw)} runs; CPU median {statistics.median(ncpu):.3f} s", file=sys.stderr)  # fmt: skip
        rows.append(row)

    print()
    head = f"{'records':>11}  {'analyze s':>9}  {'CPU s':>7}  {'peak MB':>7}  {'nsys stats s':>12}  {'ratio':>6}"
    print(head)
    print("-" * len(head))
    for r in rows:
        ns = "–" if r["nsys"] is None else f"{r['nsys']:.3f}"
        ratio = "–" if r["nsys"] is None else f"{r['wall'] / r['nsys']:.2f}"
        print(f"{r['records']:>11,}  {r['wall']:>9.3f}  {r['cpu']:>7.3f}  {r['peak_mb']:>7.0f}  {ns:>12}  {ratio:>6}")
    big5 = [r for r in rows if r["records"] >= 4_900_000]
    if big5:
        ok = "within" if big5[0]["peak_mb"] <= LIMIT_MB_AT_5M else "OVER"
        print(f"memory at {big5[0]['records']:,} records: {big5[0]['peak_mb']:.0f} MB, {ok} the {LIMIT_MB_AT_5M} MB limit")
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        print(f"time: {b['records'] / a['records']:.1f}x the records took {b['wall'] / a['wall']:.1f}x the wall time "
              f"({b['cpu'] / a['cpu']:.1f}x the CPU time)")  # fmt: skip
    with_nsys = [r for r in rows if r["nsys"]]
    if with_nsys:
        worst = max(r["wall"] / r["nsys"] for r in with_nsys)
        print(f"speed: analyze / nsys stats at most {worst:.2f} (limit {LIMIT_NSYS_RATIO})")


if __name__ == "__main__":
    main()
