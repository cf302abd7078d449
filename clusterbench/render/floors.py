"""Render what ``clusterbench floors`` made: the A/A spreads, the floors and where they were written.

Lines fit ``width`` columns (prose wraps at word boundaries, never between a number and its unit); every
figure carries its unit (% of the before value).
"""

from __future__ import annotations

from pathlib import Path

from clusterbench.compare.floors import FloorsOutcome, floors_to_json
from clusterbench.model import units as U
from clusterbench.compare.noise import FLOOR_MARGIN, FLOOR_MIN_PCT, FLOOR_STEP_PCT, TRACE_FLOOR_MIN_PCT, FloorSet
from clusterbench.render.compare import wrap

METRIC_NAMES = {"kernel_us": "kernel µs/frame", "h2d_us": "H2D µs/frame", "d2h_us": "D2H µs/frame",
                "roofline_us": "roofline µs/frame", "sustained_fps": "sustained FPS"}


def render_floors_json(outcome: FloorsOutcome, path: Path | None, previous: FloorSet | None) -> dict:
    return {"path": None if path is None else str(path), "floors_file": floors_to_json(outcome.floors),
            "spreads": [s.to_json() for s in outcome.spreads],
            "previous": None if previous is None else floors_to_json(previous),
            "warnings": list(outcome.warnings)}


def render_floors_text(outcome: FloorsOutcome, path: Path | None, previous: FloorSet | None,
                       width: int = 80) -> list[str]:
    fs = outcome.floors
    out = [f"clusterbench floors: {fs.gpu_name}"]
    for s in fs.sets:
        out += [""] + wrap(f"A/A of git {s.git_rev[:12]}: {' / '.join(s.dirs)}", width)
        out.append(f"  {'label':<24} {'metric':<14} {'streams':>7} {'max A/A diff':>13} {'within':>9}")
        for sp in outcome.spreads:
            if sp.dirs != s.dirs:
                continue
            within = f"±{U.pct_of(sp.within_pct, 2)}" if sp.within_pct is not None else U.NOT_MEASURED
            out.append(f"  {sp.label[:24]:<24} {sp.metric:<14} {sp.streams if sp.streams is not None else '?':>7} "
                       f"{U.pct_of(sp.max_diff_pct, 2):>13} {within:>9}")
    out += ["", f"  {'metric':<18} {'streams':<7} {'worst A/A':>10} {'floor':>8} {'was':>8}"]
    for f in fs.floors:
        was = previous.floor(f.metric, 4 if f.multi_stream else 1) if previous is not None else None
        worst = U.pct_of(f.aa_max_diff_pct, 2)
        out.append(f"  {METRIC_NAMES.get(f.metric, f.metric):<18} {'s>1' if f.multi_stream else 's1':<7} "
                   f"{worst:>10} {U.pct_of(f.pct, None):>8} {U.pct_of(was.pct if was else None, None):>8}")
    out.append("")
    out += wrap(f"floor = {FLOOR_MARGIN:g} x the worst A/A difference, rounded up to the next "
                f"{U.pct_of(FLOOR_STEP_PCT, None)}, at least {U.pct_of(FLOOR_MIN_PCT, None)} (trace figures "
                f"{U.pct_of(TRACE_FLOOR_MIN_PCT, None)}); on several streams H2D, "
                "D2H and the roofline take the worst of the three (one shared link).", width)
    out += wrap(f"drift bound of multi-stream transfers across sessions: {U.pct_of(fs.drift_bound_pct, None)} "
                f"({fs.drift_bound_source}).", width)
    if path is not None:
        out += wrap(f"Wrote {path}", width)
    return out
