"""Render what ``clusterbench floors`` made: the A/A spreads, the floors and where they were written.

Lines fit ``width`` columns (prose wraps at word boundaries, never between a number and its unit); every
figure carries its unit (% of the before value).
"""

from __future__ import annotations

from pathlib import Path

from clusterbench.compare.floors import FloorsOutcome, floors_to_json
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
            within = f"±{sp.within_pct:.2f} %" if sp.within_pct is not None else "-"
            out.append(f"  {sp.label[:24]:<24} {sp.metric:<14} {sp.streams if sp.streams is not None else '?':>7} "
                       f"{sp.max_diff_pct:>11.2f} % {within:>9}")
    out += ["", f"  {'metric':<18} {'streams':<7} {'worst A/A':>10} {'floor':>8} {'was':>8}"]
    for f in fs.floors:
        was = previous.floor(f.metric, 4 if f.multi_stream else 1) if previous is not None else None
        worst = f"{f.aa_max_diff_pct:.2f} %" if f.aa_max_diff_pct is not None else "-"
        out.append(f"  {METRIC_NAMES.get(f.metric, f.metric):<18} {'s>1' if f.multi_stream else 's1':<7} "
                   f"{worst:>10} {f'{f.pct:g} %':>8} {(f'{was.pct:g} %' if was else '-'):>8}")
    out.append("")
    out += wrap(f"floor = {FLOOR_MARGIN:g} x the worst A/A difference, rounded up to the next {FLOOR_STEP_PCT:g} %, "
                f"at least {FLOOR_MIN_PCT:g} % (trace figures {TRACE_FLOOR_MIN_PCT:g} %); on several streams H2D, "
                "D2H and the roofline take the worst of the three (one shared link).", width)
    out += wrap(f"drift bound of multi-stream transfers across sessions: {fs.drift_bound_pct:g} % "
                f"({fs.drift_bound_source}).", width)
    if path is not None:
        out += wrap(f"Wrote {path}", width)
    return out
