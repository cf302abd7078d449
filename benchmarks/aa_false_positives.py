"""The false-positive rate of clusterbench compare on A/A pairs: every pair of results dirs of one build (the
same git rev, a clean tree) on one GPU model, each way round, judged as compare judges them. Runs on any
machine (no GPU).

    python3 benchmarks/aa_false_positives.py [ROOT ...] [--floors FILE | --seed-rules] [--markdown]

ROOT: folders of results dirs, or results dirs (default: results and tests/data/results). Copies of one dir
(the same session and rows) count once. Only like-for-like figures count (a figure across a config
difference, f32 against f64, is left out and counted as such). For each pair: how many figures compare
judged, how many read SAME, how many NOT COMPARABLE (with the reason codes) and which read FASTER or
SLOWER; then the totals and the false-positive rate, FASTER or SLOWER among the figures judged SAME, FASTER
or SLOWER. The floors are those compare would use (the floors file of the GPU model beside the dirs or in
results/floors/), or --floors FILE, or none (--seed-rules: the default bounds), or, out of sample, floors made only of the
A/A dirs measured on other GPU units than each pair's (--held-out): floors made of a pair's own
differences clear it by construction.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_ROOTS = ("results", "tests/data/results")


def _fail(message: str, hint: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    print(f"Hint: {hint}", file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/aa_false_positives.py", description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("roots", nargs="*", type=Path, metavar="ROOT",
                    help=f"folders of results dirs, or results dirs (default: {' '.join(DEFAULT_ROOTS)})")
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--floors", type=Path, metavar="FILE", help="judge with this floors file")
    how.add_argument("--seed-rules", action="store_true",
                     help="judge with no floors file (the default bounds of compare/bounds.py)")
    how.add_argument("--held-out", action="store_true",
                     help="judge each pair with floors made only of the A/A dirs of other GPU units (out of sample)")
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables (for docs/compare.md)")
    args = ap.parse_args(argv)

    from clusterbench.compare.aa import find_results_dirs, held_out_floors, judge_aa, load_dirs
    from clusterbench.compare.floors import floors_for, read_floors
    from clusterbench.errors import InputError
    from clusterbench.model import units

    roots = args.roots or [Path(r) for r in DEFAULT_ROOTS]
    try:
        paths, skipped = find_results_dirs(roots)
        explicit = read_floors(args.floors) if args.floors is not None else None
    except InputError as exc:
        return _fail(str(exc), exc.hint or "give folders of results dirs and a floors file that exists")
    results, unreadable = load_dirs(paths)

    held = held_out_floors(results) if args.held_out else None

    def floors_of(before, after):  # noqa: ANN001, ANN202
        if held is not None:
            return held(before, after)
        if args.seed_rules:
            return {}
        if explicit is not None:
            return {str(explicit.gpu_name): explicit}
        return floors_for((before, after), roots=(Path("results"),))

    summary = judge_aa(results, floors_of)
    md = args.markdown
    rows = []
    for j in summary.judged:
        nc = ", ".join(f"{n} {code}" for code, n in j.not_comparable) or "0"
        moved = "; ".join(f"{m.label} {m.metric} {m.verdict} {units.signed_pct(m.delta_pct)}" for m in j.moved)
        rows.append((f"{j.before} → {j.after}", j.git_rev[:12], str(j.verdicts), str(j.same), nc,
                     moved or "none", str(j.not_like_for_like)))
    head = ("pair (before → after)", "git", "verdicts", "SAME", "NOT COMPARABLE", "FASTER/SLOWER", "not like for like")
    if md:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        for r in rows:
            print(f"{r[0]} (git {r[1]}): {r[2]} verdicts, {r[3]} SAME, NOT COMPARABLE {r[4]}, FASTER/SLOWER: "
                  f"{r[5]}; {r[6]} figures not like for like")
    pairs = len(summary.judged) // 2
    rate = summary.false_positive_rate
    print()
    print(f"{'**Total**: ' if md else 'total: '}{pairs} A/A pairs, each way round ({len(summary.judged)} comparisons): "
          f"{summary.verdicts} like-for-like verdicts, {summary.same} SAME, {summary.not_comparable} NOT COMPARABLE, "
          f"{summary.moved} FASTER or SLOWER; {summary.verdicts - summary.same} not SAME. False-positive rate "
          f"(FASTER or SLOWER among the {summary.same + summary.moved} figures judged): "
          f"{units.pct(rate, 1) if rate is not None else units.NOT_MEASURED}.")
    floors = sorted({t for j in summary.judged for t in j.floors if j.verdicts})
    print(f"{'**Floors**: ' if md else 'floors: '}{'; '.join(floors) or 'none'}")
    left = (*skipped, *unreadable, *summary.left_out)
    if left:
        print()
        print("**Left out**:" if md else "left out:")
        for what, why in left:
            print(f"- {what}: {why}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
