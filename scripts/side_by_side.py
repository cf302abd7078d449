"""A side-by-side Markdown table of several results dirs of the same configs, one row per
(config, dir), from their probes.csv and env.json (docs/results.md shows one). Runs on any
machine (no GPU).

    python scripts/side_by_side.py results/2026-12-01_f32 results/2026-12-01_f32_aare-cuda ...

Columns: kernel, H2D and D2H µs per frame (nsys, over the pass range), the roofline (µs per frame)
and the engine it binds on, sustained FPS (untraced, median ± half the range of the repeats),
clusters per frame (from the traced pass's result record), and which finder and pedestal mode ran.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path


def _f(value: str, fmt: str) -> str:
    return "–" if value in ("", None) else format(float(value), fmt)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="scripts/side_by_side.py", description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("dirs", nargs="+", type=Path, help="results dirs (each with probes.csv and env.json)")
    dirs = ap.parse_args(argv).dirs
    tables = {}
    for d in dirs:
        try:
            rows = list(csv.DictReader((d / "probes.csv").open(newline="")))
            env = json.loads((d / "env.json").read_text())
        except (OSError, ValueError) as exc:
            print(f"Error: cannot read the results dir {d}: {exc}", file=sys.stderr)
            print("Hint: give results dirs that hold probes.csv and env.json, such as results/2026-12-01_f32",
                  file=sys.stderr)
            return 2
        tables[d] = ({r["label"]: r for r in rows}, env)
    labels = list(dict.fromkeys(label for rows, _ in tables.values() for label in rows))
    print("| config | finder | pedestal | kernel µs | H2D µs | D2H µs | roofline µs | binds | sustained FPS "
          "| clusters/frame |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label in labels:
        for d, (rows, env) in tables.items():
            r = rows.get(label)
            if r is None:
                continue
            finder = r.get("finder") or (env.get("configs", {}).get(label, {}).get("finder")) or "clusterbench CuPy"
            fps = _f(r["sustained_fps"], ",.0f")
            if r.get("sustained_fps_spread"):
                fps += f" ± {float(r['sustained_fps_spread']):,.0f}"
            print(f"| {label} | {finder} | {r.get('pedestal', '')} | {_f(r['kernel_us'], '.2f')} | "
                  f"{_f(r['h2d_us'], '.2f')} | {_f(r['d2h_us'], '.2f')} | {_f(r['roofline_us'], '.2f')} | "
                  f"{(r.get('binds') or '–').upper()} | {fps} | {_f(r.get('clusters_per_frame', ''), '.1f')} |")
    print()
    for d, (_, env) in tables.items():
        print(f"- `{d}`: {env.get('gpu_name')}, driver {env.get('driver')}, nsys {env.get('nsys_version')}, "
              f"git {str(env.get('git_rev'))[:12]}{' (dirty)' if env.get('git_dirty') else ''}, "
              f"session {str(env.get('session_id'))[:8]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
