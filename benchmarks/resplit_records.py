"""The untraced split of stored records, priced again by the code as it is: every `<label>.untraced.json`
under the folders given (or the files themselves), its traced path, untraced frame and unit costs as
`probe --what-binds` measured and stored them, split again by `clusterbench.analyzers.untraced.untraced_split`
beside the split the record stores. Runs on any machine (no GPU, no trace).

    python3 benchmarks/resplit_records.py docs/measurements [MORE ...]

One line per record that holds a split with a sum: its folder, label, the untraced frame (µs), the stored
split's sum and miss, and the split priced now with its miss; then how many of them lie within the ±10 %
the split is held to, before and now. A record that cannot be read is named on stderr and left out.

``--held-idle-as-path``, a what-if (the last line says so): for each record whose path holds one thread,
which the GPU held through the path's GPU work (``blocked_us``), with less idle stored inside those holds
than the path's launch and gaps, those are priced as lying inside the holds: what a graph launch held by
its pageable copy node shows on a trace (the zoo's graph_block --pageable d2h, where the two agree within
1 %), for records stored before such holds kept their idle stretches.

Exit status: 0; 2 when no record with a split was found or a path does not exist.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusterbench.analyzers.untraced import untraced_split  # noqa: E402
from clusterbench.model.untraced import SPLIT_TOLERANCE, PathStructure, UntracedRecord  # noqa: E402


def records(paths: list[Path]) -> list[tuple[str, Path]]:
    """Each record with a name for where it lies: the first folder under the path given (the measurement's)."""
    found: list[tuple[str, Path]] = []
    for p in paths:
        if p.is_file():
            found.append((p.parent.name, p))
            continue
        for f in sorted(p.rglob("*.untraced.json")):
            parts = f.relative_to(p).parts
            found.append((parts[0] if len(parts) > 1 else p.name, f))
    return found


def held_idle_as_path(path: PathStructure) -> PathStructure:
    """``path`` with its one launching thread's holds taken to hold the path's launch and idle gaps, where the
    GPU held the thread through the path's GPU work (``blocked_us`` at least 90 % of the engines' time on the
    path: a launch that returns once its work has run) and less idle inside the holds was stored (pure);
    else as is."""
    if len(path.hosts) != 1:
        return path
    (h,) = path.hosts
    gpu = sum(path.engines_us.values())
    if not h.blocked_us or h.blocked_us < 0.9 * gpu or h.held_lead_us + h.held_gap_us >= path.launch_us + path.idle_us:
        return path
    return replace(path, hosts=(replace(h, held_lead_us=path.launch_us, held_leads=path.launches,
                                        held_gap_us=path.idle_us, held_gaps=path.idle_gaps),))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("paths", nargs="+", type=Path, help="folders searched for *.untraced.json, or such files")
    ap.add_argument("--held-idle-as-path", action="store_true",
                    help="price held threads with no idle stretch inside their holds as holding the path's launch and gaps")
    args = ap.parse_args(argv)
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        print(f"Error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    rows = []
    for where, f in records(args.paths):
        try:
            doc = json.loads(f.read_text(encoding="utf-8"))
            if not isinstance(doc, dict) or not isinstance(doc.get("split") or {}, dict):
                raise ValueError("not an untraced record (a JSON object with a split object)")
            stored = doc.get("split") or {}
            if stored.get("untraced_sum_us") is None or not stored.get("frame_us"):
                continue
            sum_us, frame_us = (stored[k] for k in ("untraced_sum_us", "frame_us"))
            if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (sum_us, frame_us)):
                raise ValueError(f"split.untraced_sum_us and split.frame_us must be numbers, got {sum_us!r:.20}, "
                                 f"{frame_us!r:.20}")
            rec = UntracedRecord.from_json(doc)
        except (OSError, ValueError) as exc:
            print(f"Warning: {f}: left out ({exc})", file=sys.stderr)
            continue
        if rec.path is None:
            continue
        path = held_idle_as_path(rec.path) if args.held_idle_as_path else rec.path
        now = untraced_split(path, rec.host, rec.costs)
        label = f.name.removesuffix(".untraced.json")
        if f.parent.name != where and not f.parent.name[:1].isdigit():
            label = f"{f.parent.name}/{label}"  # a measurement's own sub-folder (its results dirs start with a date)
        rows.append((where, label, frame_us, sum_us,
                     sum_us / frame_us - 1, now.untraced_sum_us, now.miss))
    if not rows:
        print("Error: no record with an untraced split found under " + ", ".join(map(str, args.paths)), file=sys.stderr)
        return 2
    print(f"  {'label':31s} {'frame':>8s} {'stored':>8s} {'miss':>8s} {'now':>8s} {'miss':>8s}")
    last = None
    for folder, label, frame, before, miss_b, now_us, miss_n in rows:
        if folder != last:
            print(folder)
            last = folder
        now_s = "–" if now_us is None else f"{now_us:8.2f}"
        miss_s = "–" if miss_n is None else f"{miss_n * 100:+7.1f}%"
        print(f"  {label[:31]:31s} {frame:8.2f} {before:8.2f} {miss_b * 100:+7.1f}% {now_s:>8s} {miss_s:>8s}")
    print("frame: the untraced frame; stored, now: the split's sum (µs a frame);\n"
          "miss: the sum against the frame")
    within_b = sum(abs(r[4]) <= SPLIT_TOLERANCE for r in rows)
    within_n = sum(r[6] is not None and abs(r[6]) <= SPLIT_TOLERANCE for r in rows)
    print(f"within ±{SPLIT_TOLERANCE * 100:.0f} % of the untraced frame: {within_b} of {len(rows)} as stored, "
          f"{within_n} of {len(rows)}\npriced now" + (" (held threads' idle as the path's: a what-if)" if args.held_idle_as_path else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
