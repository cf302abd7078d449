"""Check a results dir's probes.csv against `clusterbench analyze` run by hand on its traces.

    python scripts/verify_probes.py results/<date>_f32

For every row with a trace, runs `python -m clusterbench analyze TRACE FRAMES --range
clusterbench:pass --json` in a fresh process (for a program probed as it is, `--window W
--frames F` as env.json's configs.<label>.analysis says) and compares kernel_us, h2d_us,
d2h_us, roofline_us and binds with the row. A row that adds up several processes is skipped. Needs the traces that probe wrote beside probes.csv
(*.sqlite): run it on a dir a probe has just filled, since committed results dirs keep no
traces. No GPU needed. Exits 1 on any mismatch beyond float round-off, 2 when the dir has no
probes.csv or lacks a trace.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
import sys
from pathlib import Path

FIELDS = {"kernel_us": ("engines", "kernel"), "h2d_us": ("engines", "h2d"), "d2h_us": ("engines", "d2h")}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="scripts/verify_probes.py", description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("results_dir", type=Path, help="a results dir with probes.csv and its traces")
    rdir = ap.parse_args(argv).results_dir
    try:
        rows = list(csv.DictReader((rdir / "probes.csv").open(newline="")))
    except OSError as exc:
        print(f"Error: cannot read {rdir / 'probes.csv'}: {exc.strerror}", file=sys.stderr)
        print("Hint: give a results dir that probe wrote, such as results/<date>_f32", file=sys.stderr)
        return 2
    missing = [row["trace"] for row in rows if row.get("trace") and not (rdir / row["trace"]).is_file()]
    if missing:
        print(f"Error: {rdir} lacks the traces its rows name: {', '.join(missing)}", file=sys.stderr)
        print("Hint: run this in a results dir that a probe just wrote; committed results dirs keep only probes.csv "
              "and env.json", file=sys.stderr)
        return 2
    try:
        configs = json.loads((rdir / "env.json").read_text()).get("configs") or {}
    except (OSError, ValueError):
        configs = {}
    bad = 0
    for row in rows:
        trace = row.get("trace")
        if not trace:
            print(f"{row['label']}: no trace (tracer {row.get('tracer')}), skipped")
            continue
        if int(row.get("processes") or 1) > 1:
            print(f"{row['label']}: {row['processes']} processes added up, skipped (analyze shows them under 'groups')")
            continue
        cmd = [sys.executable, "-m", "clusterbench", "analyze", str(rdir / trace), "--json"]
        analysis = (configs.get(row.get("config") or row["label"]) or {}).get("analysis") or {}
        if row.get("workload") == "exec":
            cmd += ["--window", analysis.get("window_spec") or "auto"]
            cmd += ["--frames", analysis["frames_spec"]] if analysis.get("frames_spec") else []
        else:
            cmd += ["--frames", row["frames"], "--range", "clusterbench:pass"]
        res = subprocess.run(cmd, capture_output=True, text=True)  # in a fresh process
        if res.returncode != 0:
            print(f"{row['label']}: analyze failed ({res.returncode}): {res.stderr.strip()}")
            bad += 1
            continue
        js = json.loads(res.stdout)
        got = {k: js["engines"].get(eng, {}).get("us_per_frame") for k, (_, eng) in FIELDS.items()}
        got["roofline_us"] = js["roofline"]["us_per_frame"]
        line = []
        for key, value in got.items():
            csv_value = float(row[key]) if row.get(key) else None
            same = (value is None and csv_value is None) or (
                value is not None and csv_value is not None and math.isclose(value, csv_value, rel_tol=1e-9))
            bad += not same
            line.append(f"{key} csv={csv_value} analyze={value}{'' if same else '  <-- MISMATCH'}")
        same_binds = js["roofline"]["engine"] == row["binds"]
        bad += not same_binds
        line.append(f"binds csv={row['binds']} analyze={js['roofline']['engine']}{'' if same_binds else '  <-- MISMATCH'}")
        print(f"{row['label']}:\n  " + "\n  ".join(line))
    print(f"verify_probes: {len(rows)} rows, {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
