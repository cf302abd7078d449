"""Speed benchmark: `clusterbench analyze --json` on a ~1M-activity-record trace.

Builds the trace by copying a real H200 export and replicating its kernel, memcpy,
runtime-API, synchronization and NVTX rows with time shifts (one copy per "pass", laid
end to end), then times the CLI as a user runs it: a fresh `python -m clusterbench
analyze BIG --json`, start-up included. Target: at most 1 s wall for 1M records on a
2-core machine.

    python benchmarks/bench_analyze.py [--records 1000000] [--runs 5] [--out benchmarks/out]
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


def time_cli(trace: Path | None, runs: int) -> list[float]:
    """Wall seconds of `clusterbench analyze TRACE --json` (or `--version` when trace is None)."""
    # As installed: bytecode caching on (a shell with PYTHONDONTWRITEBYTECODE=1 would
    # otherwise recompile every clusterbench module on each start).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    walls = []
    for _ in range(runs):
        t = time.perf_counter()
        args = ["--version"] if trace is None else ["analyze", str(trace), "--json"]
        proc = subprocess.run(
            [sys.executable, "-m", "clusterbench", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            check=False,
        )
        walls.append(time.perf_counter() - t)
        if proc.returncode != 0:
            sys.exit(f"analyze failed ({proc.returncode}):\n{proc.stderr}")
    if trace is not None:
        json.loads(proc.stdout)  # the output is valid JSON
    return walls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000, help="activity records to build (default 1M)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs (default 5)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out", help="where the big trace goes")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the big trace even if present")
    args = ap.parse_args()

    big = args.out / f"big_{args.records}.sqlite"
    if args.rebuild or not big.exists() or big.stat().st_mtime < SOURCE.stat().st_mtime:
        t = time.perf_counter()
        total, replicas = build(SOURCE, big, args.records)
        print(f"built {big.name}: {total:,} activity records ({replicas:,} copies of {SOURCE.name}) in "
              f"{time.perf_counter() - t:.1f} s, {big.stat().st_size / 1e6:,.0f} MB", file=sys.stderr)
    con = sqlite3.connect(f"file:{big}?mode=ro", uri=True)
    total = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"))
    runtime = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    con.close()
    time_cli(big, 1)  # warm the page cache
    walls = time_cli(big, args.runs)
    floor = time_cli(None, args.runs)
    print(
        f"clusterbench analyze --json on {total:,} activity records (+{runtime:,} runtime API rows): "
        f"median {statistics.median(walls):.3f} s wall, min {min(walls):.3f} s, max {max(walls):.3f} s "
        f"over {len(walls)} runs (start-up included; `clusterbench --version` alone: median "
        f"{statistics.median(floor):.3f} s)"
    )


if __name__ == "__main__":
    main()
