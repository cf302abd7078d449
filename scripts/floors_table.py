"""A floors file as a Markdown table, one row per metric and stream class, one column per scope: the floor,
its pair count and the largest A/A difference it was made of (docs/compare.md shows one). Runs on any
machine (no GPU).

    python3 scripts/floors_table.py results/floors/NVIDIA_H200.json

A provisional floor (fewer pairs than a floor needs) is marked "provisional"; a scope the A/A dirs had no pair
of is "–" (compare then uses the nearest floor and says so); a floor the seed's rules give is "1 % (seed)".
Under the table: the machines and sessions the floors were made of, and the drift bound.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

METRICS = {"kernel_us": "kernel µs/frame", "h2d_us": "H2D µs/frame", "d2h_us": "D2H µs/frame",
           "roofline_us": "roofline µs/frame", "sustained_fps": "sustained FPS"}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="scripts/floors_table.py", description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", type=Path, metavar="FLOORS_FILE", help="a floors file (clusterbench floors writes them)")
    args = ap.parse_args(argv)

    from clusterbench.compare.floors import read_floors
    from clusterbench.compare.noise import COMPARED_METRICS, SCOPE_TEXT, SCOPES
    from clusterbench.errors import InputError
    from clusterbench.model import units

    try:
        fs = read_floors(args.file)
    except InputError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        print(f"Hint: {exc.hint or 'give a floors file, such as results/floors/NVIDIA_H200.json'}", file=sys.stderr)
        return 2
    print(f"Floors of {fs.gpu_name} (`{args.file.name}`, version {fs.version}, written {fs.created_utc or '?'}): "
          "the floor, the pairs it was made of, the largest A/A difference.")
    print()
    print("| metric | streams | " + " | ".join(SCOPE_TEXT[s] for s in SCOPES) + " |")
    print("|---|---|" + "---|" * len(SCOPES))
    for metric in COMPARED_METRICS:
        for multi in (False, True):
            cells = []
            for scope in SCOPES:
                f = fs.floor(metric, 4 if multi else 1, scope)
                if f is None:
                    cells.append(units.NOT_MEASURED)
                elif f.seed:
                    cells.append(f"{f.pct:g} % (seed)")
                else:
                    pairs = f"{f.pairs} pair{'' if f.pairs == 1 else 's'}" if f.pairs is not None else "pairs not recorded"
                    worst = units.pct_of(f.aa_max_diff_pct, 2) if f.aa_max_diff_pct is not None else units.NOT_MEASURED
                    cells.append(f"**{f.pct:g} %** ({pairs}; worst {worst}){', provisional' if f.provisional else ''}")
            if set(cells) == {units.NOT_MEASURED}:
                continue
            print(f"| {METRICS[metric]} | {'several' if multi else '1'} | " + " | ".join(cells) + " |")
    print()
    for m in fs.machines:
        print(f"- {m.gpu_uuid or 'unit unknown'} on {m.host or 'host unknown'}: {len(m.dirs)} dirs "
              f"({', '.join(m.dirs)}), {len(m.sessions)} sessions")
    print(f"- drift bound of multi-stream transfers across sessions: {fs.drift_bound_pct:g} % ({fs.drift_bound_source})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
