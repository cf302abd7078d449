#!/usr/bin/env python3
"""The session-to-session spread of one build (A/A), from two or more results dirs.

    python scripts/aa_spread.py results/2026-12-01_f32_aa1 results/2026-12-01_f32_aa2 results/2026-12-01_f32_aa3

Per config label and metric (kernel, H2D, D2H, roofline in µs/frame from the traces; sustained
FPS untraced, the median of each dir's repeats): the value of each dir, the largest difference
between two dirs (later against earlier, %), and the largest within-dir spread of the repeats
(half the min-max range over the median, %). Then, per metric and stream class, the largest
A/A difference and the floor the rule in clusterbench/compare/noise.py makes of it; those are
the figures docs/compare.md quotes and compare.noise.FLOORS holds. ``--json`` prints JSON.
Runs on any machine (no GPU): it reads probes.csv and env.json only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path, help="results dirs of one build, in the order they were run")
    ap.add_argument("--json", action="store_true", help="print JSON only")
    args = ap.parse_args(argv)
    from clusterbench.compare.noise import FLOORS, pair_diffs_pct, session_spreads, suggest_floors
    from clusterbench.errors import ClusterbenchError
    from clusterbench.io.results import load_results

    if len(args.dirs) < 2:
        print("Error: give at least two results dirs", file=sys.stderr)
        return 2
    try:
        dirs = [load_results(d) for d in args.dirs]
    except ClusterbenchError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    from clusterbench.compare.compare import CONFIG_COLUMNS, config_value

    for label in dirs[0].labels:
        for col in CONFIG_COLUMNS:
            vals = {str(config_value(r, col)) for d in dirs if (r := d.row(label)) is not None}
            if len(vals) > 1:
                print(f"Warning: not one build's A/A: {label} {col} differs ({', '.join(sorted(vals))})",
                      file=sys.stderr)  # fmt: skip
    spreads = session_spreads(dirs)
    floors = suggest_floors(spreads)
    if args.json:
        print(json.dumps({
            "dirs": [d.name for d in dirs],
            "spreads": [{"label": s.label, "metric": s.metric, "streams": s.streams, "values": list(s.values),
                         "pair_diffs_pct": list(pair_diffs_pct(s.values)), "max_diff_pct": s.max_diff_pct,
                         "within_pct": s.within_pct} for s in spreads],
            "floors": [{"metric": m, "multi_stream": multi, "max_diff_pct": worst, "suggested_floor_pct": fl,
                        "floor_pct_in_use": FLOORS[(m, multi)].pct if (m, multi) in FLOORS else None}
                       for (m, multi), (worst, fl) in sorted(floors.items())],
        }, indent=2))  # fmt: skip
        return 0
    print("A/A: " + " / ".join(d.name for d in dirs))
    print(f"{'label':<20} {'metric':<14} {'values (per dir)':<34} {'max diff':>9} {'within':>8}")
    for s in spreads:
        unit = "FPS" if s.metric.endswith("_fps") else "µs"
        vals = " / ".join(f"{v:,.0f}" if unit == "FPS" else f"{v:.4f}" for v in s.values)
        within = f"±{s.within_pct:.2f} %" if s.within_pct is not None else "-"
        print(f"{s.label:<20} {s.metric:<14} {vals:<34} {s.max_diff_pct:>7.2f} % {within:>8}")
    print()
    print(f"{'metric':<14} {'streams':<8} {'max A/A diff':>12} {'floor rule':>11} {'in use':>8}")
    for (m, multi), (worst, fl) in sorted(floors.items()):
        used = FLOORS.get((m, multi))
        print(f"{m:<14} {'s>1' if multi else 's1':<8} {worst:>10.2f} % {fl:>9.1f} % "
              f"{(f'{used.pct:.1f} %' if used else '-'):>8}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
