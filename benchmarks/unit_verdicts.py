"""The verdicts of `clusterbench compare` on the pairs a verification unit makes: within each unit and across
every two of them, as a user would compare them, with the floors compare would use. Runs on any machine (no
GPU).

    python3 benchmarks/unit_verdicts.py UNIT_RESULTS [UNIT_RESULTS ...] [--floors FILE] [--gate PCT]

UNIT_RESULTS: a folder of the results dirs that scripts/device_verdicts.sh left on one freshly started GPU
unit (its `results` folder): dirs named `<date>_<kind>_<step>_<GPU-id>`, the steps `aa1` and `aa2` (make
run's probe twice), `base5`/`delay5` and `base20`/`delay20` (the 5 % and 20 % delays right after their
baseline), `f64` (make run's configs in float64), `zoo_a`/`zoo_b`/`zoo_delay5` (a zoo program probed as it
is, twice, then with a 5 % delay of its own). A step a unit did not run is left out.

The pairs, and what each must read:
- within a unit: aa1 -> aa2 (A/A: SAME), base5 -> delay5 and base20 -> delay20 (sustained SLOWER, exit 3),
  aa2 -> f64 (kernel SLOWER; sustained SLOWER on the 1-stream rows), zoo_a -> zoo_b (SAME), zoo_a ->
  zoo_delay5 (sustained SLOWER);
- across units, each way round: aa1 -> aa1 (A/A across units: SAME or provisional SAME) and base20 ->
  delay20 (the 20 % delay on another unit: SLOWER).
Each line gives per row the verdict on the kernel, the roofline and sustained FPS with the change judged
(%), `†` where provisional, the end-to-end verdict, and `compare --gate PCT`'s exit code (default 3). The
last lines count the A/A verdicts that read FASTER or SLOWER (which must be none) and the delays that did
not read SLOWER on sustained FPS.
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusterbench.compare.compare import Verdict, compare_results, judge_gate  # noqa: E402
from clusterbench.compare.floors import floors_for  # noqa: E402
from clusterbench.errors import ClusterbenchError  # noqa: E402
from clusterbench.io.results import load_results  # noqa: E402

_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}_(?:f32|f64|exec)_(?P<step>[a-z0-9_]+?)_(?P<unit>GPU-[0-9a-f]+)$")
WITHIN = (("aa1", "aa2", "A/A"), ("base5", "delay5", "delay 5 %"), ("base20", "delay20", "delay 20 %"),
          ("aa2", "f64", "f32 -> f64"), ("zoo_a", "zoo_b", "zoo A/A"), ("zoo_a", "zoo_delay5", "zoo delay 5 %"))
ACROSS = (("aa1", "aa1", "A/A across units"), ("base20", "delay20", "delay 20 % across units"))
SHOWN = (("kernel_us", "kernel"), ("roofline_us", "roofline"), ("sustained_fps", "sustained"))


def unit_dirs(folder: Path) -> tuple[str | None, dict[str, Path]]:
    """The unit id and its dirs by step, from the names device_verdicts.sh gives them."""
    steps: dict[str, Path] = {}
    unit = None
    for d in sorted(p for p in folder.iterdir() if p.is_dir()):
        m = _NAME.match(d.name)
        if m is None or not (d / "probes.csv").is_file():
            continue
        steps[m["step"]] = d
        unit = m["unit"]
    return unit, steps


def _figure(m) -> str:
    if m is None:
        return "–"
    pct = m.change_pct
    mark = "†" if m.provisional else ""
    word = {Verdict.NOT_COMPARABLE: "N/C"}.get(m.verdict, m.verdict.value)
    return f"{word}{mark} {pct:+.2f} %" if pct is not None else word


def judge(before: Path, after: Path, gate: float, floors_file: Path | None) -> tuple[list[str], int, list, list]:
    """Lines per row, the gate's exit code, and the metric verdicts (label, metric, verdict) and rows."""
    b, a = load_results(before), load_results(after)
    floors = floors_for([b, a], floors_file, roots=(Path("results"),))
    c = compare_results(b, a, floors=floors, allow_different_gpu=False)
    g = judge_gate(c, gate)
    code = 0 if g.passed else (3 if g.failures else 4)
    lines, verdicts = [], []
    for r in c.rows:
        if r.presence.value != "both":
            continue
        cells = "  ".join(f"{short} {_figure(r.metric(n)):<14}" for n, short in SHOWN)
        lines.append(f"  {r.label:<20} {cells}  end to end {r.end_to_end.value}")
        verdicts.extend((r.label, n, r.metric(n).verdict, r.streams) for n, _ in SHOWN if r.metric(n) is not None)
    return lines, code, verdicts, c.rows


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/unit_verdicts.py", description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("units", nargs="+", type=Path, metavar="UNIT_RESULTS",
                    help="one unit's folder of results dirs (scripts/device_verdicts.sh's results)")
    ap.add_argument("--floors", type=Path, default=None, help="a floors file (default: the one compare finds: beside the dirs, else in results/floors/)")
    ap.add_argument("--gate", type=float, default=3.0, help="the --gate PCT whose exit code is shown (default 3)")
    args = ap.parse_args(argv)
    units: dict[str, dict[str, Path]] = {}
    for folder in args.units:
        if not folder.is_dir():
            print(f"Error: {folder} is not a folder", file=sys.stderr)
            print("Hint: give each unit's results folder (scripts/device_verdicts.sh OUT leaves OUT/results)",
                  file=sys.stderr)
            return 2
        unit, steps = unit_dirs(folder)
        if unit is None:
            print(f"Error: {folder} holds no results dir named <date>_<kind>_<step>_<GPU-id>", file=sys.stderr)
            print("Hint: give the results folder of scripts/device_verdicts.sh", file=sys.stderr)
            return 2
        units[unit] = steps
    aa_moved: list[str] = []
    missed: list[str] = []
    pairs = [(u, u, s1, s2, what) for u in units for s1, s2, what in WITHIN]
    pairs += [(u1, u2, s1, s2, what) for u1, u2 in itertools.permutations(units, 2) for s1, s2, what in ACROSS]
    for u1, u2, s1, s2, what in pairs:
        before, after = units[u1].get(s1), units[u2].get(s2)
        if before is None or after is None:
            continue
        where = u1 if u1 == u2 else f"{u1} -> {u2}"
        try:
            lines, code, verdicts, _rows = judge(before, after, args.gate, args.floors)
        except ClusterbenchError as e:
            print(f"{what}, {where}: {e}")
            continue
        print(f"{what}, {where} ({s1} -> {s2}): --gate {args.gate:g} exit {code}")
        print("\n".join(lines))
        if "A/A" in what:
            aa_moved += [f"{what}, {where}: {label} {n} {v.value}" for label, n, v, _s in verdicts
                         if v in (Verdict.FASTER, Verdict.SLOWER)]
        elif "delay" in what:
            if not any(n == "sustained_fps" and v is Verdict.SLOWER for _l, n, v, _s in verdicts) or code != 3:
                missed.append(f"{what}, {where}: sustained not SLOWER or --gate exit {code}")
    print()
    print(f"A/A figures that read FASTER or SLOWER: {len(aa_moved)}" + "".join(f"\n  {x}" for x in aa_moved))
    print(f"delays that did not read SLOWER on sustained FPS with --gate exit 3: {len(missed)}"
          + "".join(f"\n  {x}" for x in missed))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
