"""Render what ``clusterbench floors`` made: the machines and sessions, the A/A spreads, the floors per scope
with their pair counts, and where they were written.

Lines fit ``width`` columns (prose wraps at word boundaries, never between a number and its unit); every
figure carries its unit (% of the before value).
"""

from __future__ import annotations

from pathlib import Path

from clusterbench.compare.floors import FloorsOutcome, floors_to_json
from clusterbench.compare.noise import (FLOOR_MARGIN, FLOOR_MIN_PCT, FLOOR_STEP_PCT, MIN_PAIRS, SCOPE_PAIRS,
                                        SCOPE_TEXT, SCOPES, TRACE_FLOOR_MIN_PCT, FloorSet)
from clusterbench.model import units as U
from clusterbench.render.compare import wrap

METRIC_NAMES = {"kernel_us": "kernel µs/frame", "h2d_us": "H2D µs/frame", "d2h_us": "D2H µs/frame",
                "roofline_us": "roofline µs/frame", "sustained_fps": "sustained FPS"}


def short_of_pairs(outcome: FloorsOutcome) -> str:
    """Why floors refuses to write: every floor is made of fewer than MIN_PAIRS pairs."""
    fs = outcome.floors
    most = {sc: max((f.pairs or 0 for f in fs.floors if f.scope == sc and f.pairs is not None), default=0)
            for sc in SCOPES}
    said = ", ".join(f"{n} pair{'' if n == 1 else 's'} of {SCOPE_PAIRS[sc]}" for sc, n in most.items() if n)
    return (f"every floor would be provisional: these A/A dirs make {said or 'no pair'}, and a floor needs "
            f"{MIN_PAIRS} pairs of its scope (the largest of n A/A differences is exceeded by the next one 1 time "
            "in n + 1)")


def render_floors_json(outcome: FloorsOutcome, path: Path | None, previous: FloorSet | None,
                       target: Path | None = None, replaced: bool = False) -> dict:
    return {"path": None if path is None else str(path), "target": None if target is None else str(target),
            "replaced": replaced, "provisional": outcome.provisional,
            "floors_file": floors_to_json(outcome.floors),
            "spreads": [s.to_json() for s in outcome.spreads],
            "differences": [d.to_json() for d in outcome.diffs],
            "previous": None if previous is None else floors_to_json(previous),
            "warnings": list(outcome.warnings)}


def _pct(v: float | None) -> str:
    return U.pct_of(v, 2)


def render_floors_text(outcome: FloorsOutcome, path: Path | None, previous: FloorSet | None,
                       width: int = 80, target: Path | None = None, replaced: bool = False,
                       refused: bool = False) -> list[str]:
    """The floors as text; ``refused``: every floor is provisional and --provisional was not given (a
    --dry-run then says it would not write)."""
    fs = outcome.floors
    out = [f"clusterbench floors: {fs.gpu_name}"]
    if fs.machines:
        out += [""] + wrap(f"machines (GPU unit, host): {len(fs.machines)}", width)
        for m in fs.machines:
            out += wrap(f"{(m.gpu_uuid or 'unit unknown')[:12]} on {m.host or 'host unknown'}: "
                        f"{U.count(len(m.dirs))} dir{'' if len(m.dirs) == 1 else 's'} "
                        f"({', '.join(m.dirs)}), {U.count(len(m.sessions))} "
                        f"session{'' if len(m.sessions) == 1 else 's'}", width, "  ", "    ")
    for s in fs.sets:
        out += [""] + wrap(f"A/A of git {s.git_rev[:12]}: {' / '.join(s.dirs)}", width)
        out.append(f"  {'label':<24} {'metric':<14} {'streams':>7} {'max A/A diff':>13} {'within':>9}")
        for sp in outcome.spreads:
            if sp.dirs != s.dirs:
                continue
            within = f"±{_pct(sp.within_pct)}" if sp.within_pct is not None else U.NOT_MEASURED
            out.append(f"  {sp.label[:24]:<24} {sp.metric:<14} {sp.streams if sp.streams is not None else '?':>7} "
                       f"{_pct(sp.max_diff_pct):>13} {within:>9}")
    out += ["", f"  {'metric':<18} {'strm':<4} {'scope':<14} {'pairs':>5} {'worst A/A':>9} {'floor':>11} "
                f"{'was':>7}"]
    for f in fs.floors:
        was = previous.floor(f.metric, 4 if f.multi_stream else 1, f.scope) if previous is not None else None
        worst = _pct(f.aa_max_diff_pct) if f.aa_max_diff_pct is not None else U.NOT_MEASURED
        pairs = U.count(f.pairs) if f.pairs is not None else U.NOT_MEASURED
        floor = U.pct_of(f.pct, None) + (" prov." if f.provisional else "")
        scope = "seed's rule" if f.seed else SCOPE_TEXT[f.scope]
        out.append(f"  {METRIC_NAMES.get(f.metric, f.metric):<18} {'s>1' if f.multi_stream else 's1':<4} "
                   f"{scope:<14} {pairs:>5} {worst:>9} {floor:>11} "
                   f"{U.pct_of(was.pct if was else None, None):>7}")
    out.append("")
    out += wrap(f"floor = {FLOOR_MARGIN:g} x the worst A/A difference, rounded up to the next "
                f"{U.pct_of(FLOOR_STEP_PCT, None)}, at least {U.pct_of(FLOOR_MIN_PCT, None)} (trace figures "
                f"{U.pct_of(TRACE_FLOOR_MIN_PCT, None)}); on several streams H2D, "
                "D2H and the roofline take the worst of the three (one shared link).", width)
    out += wrap("scopes: within-session (pairs of probes of one session), same-unit (pairs of sessions on one GPU "
                "unit), across-units (pairs of GPU units of the model); pairs counts those. A floor of fewer than "
                f"{MIN_PAIRS} pairs is provisional (prov.).", width)
    out += wrap(f"drift bound of multi-stream transfers across sessions: {U.pct_of(fs.drift_bound_pct, None)} "
                f"({fs.drift_bound_source}).", width)
    if path is not None:
        out += wrap(f"{'Replaced' if replaced else 'Wrote'} {path}", width)
    elif target is not None and refused:
        out += wrap(f"--dry-run: would not write {target}: every floor is provisional (--provisional writes them)",
                    width)
    elif target is not None:
        out += wrap(f"--dry-run: would write {target}{' (it exists: needs --force)' if target.exists() else ''}",
                    width)
    return out
