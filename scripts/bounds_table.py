"""The default bounds of one GPU model, recomputed from A/A results dirs, in the form compare/bounds.py holds them.

    python3 scripts/bounds_table.py DIR DIR [DIR ...] [--markdown]

The dirs are A/A probes of one GPU model (probes of one build, again and again: on several freshly started
machines, two probes each; scripts/device_verdicts.sh makes them). The floor rule of ``clusterbench floors``
(compare/floors.py: 1.5 x the largest A/A difference of each metric, stream class and scope, rounded up to the
next 0.5 %, at least 0.5 %, trace figures at least 1 %) is applied to them, and each floor is printed as a row
of compare/bounds.py: (metric, several streams, scope, pct, pairs, largest A/A difference %). Paste the rows into
the model's entry there (``_H100_ROWS`` for the H100), so that a model without a floors file is judged by bounds
measured on it. ``--markdown``: the same as a table for docs/compare.md.

No GPU needed. Exit 2 for dirs that are not an A/A of one GPU model (the floors command's own checks).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusterbench.compare.floors import aa_floors  # noqa: E402
from clusterbench.compare.noise import SCOPE_TEXT, SCOPES  # noqa: E402
from clusterbench.errors import ClusterbenchError  # noqa: E402
from clusterbench.io.results import load_results  # noqa: E402
from clusterbench.model import units as U  # noqa: E402

METRIC_NAMES = {"kernel_us": "kernel µs/frame", "h2d_us": "H2D µs/frame", "d2h_us": "D2H µs/frame",
                "roofline_us": "roofline µs/frame", "sustained_fps": "sustained FPS"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path, metavar="DIR", help="A/A results dirs of one GPU model")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table instead of the Python rows")
    args = ap.parse_args(argv)
    try:
        outcome = aa_floors([load_results(d) for d in args.dirs], min_pairs=1)
    except ClusterbenchError as err:
        print(f"Error: {err}", file=sys.stderr)
        if err.hint:
            print(f"Hint: {err.hint}", file=sys.stderr)
        return err.exit_code
    fs = outcome.floors
    measured = [f for f in fs.floors if f.pairs is not None]
    for w in outcome.warnings:
        print(f"Warning: {w}", file=sys.stderr)
    if args.markdown:
        print(f"{fs.gpu_name}, from {len(args.dirs)} A/A dirs:\n")
        print("| metric | streams | " + " | ".join(SCOPE_TEXT[s] for s in SCOPES) + " |")
        print("|---|---|" + "---|" * len(SCOPES))
        for metric, name in METRIC_NAMES.items():
            for multi in (False, True):
                cells = []
                for s in SCOPES:
                    f = next((x for x in measured if (x.metric, x.multi_stream, x.scope) == (metric, multi, s)), None)
                    cells.append("–" if f is None else f"**{U.pct_of(f.pct, None)}** ({f.pairs} pairs; worst "
                                 f"{U.pct_of(f.aa_max_diff_pct, 2)})")
                print(f"| {name} | {'several' if multi else '1'} | " + " | ".join(cells) + " |")
        return 0
    print(f"# {fs.gpu_name}: the floor rule of {len(args.dirs)} A/A dirs ({', '.join(d.name for d in args.dirs)})")
    print("_ROWS = (")
    for f in measured:
        print(f"    ({f.metric!r}, {f.multi_stream}, {f.scope!r}, {f.pct}, {f.pairs}, {round(f.aa_max_diff_pct, 3)}),")
    print(")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
