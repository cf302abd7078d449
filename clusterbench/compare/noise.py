"""The noise model of compare: per-metric floors measured across sessions, and the A/A spread.

A verdict must clear the **noise** of its metric: the larger of

* the metric's **floor**, a share of the before value measured as the session-to-session
  spread of one build (A/A: several full sweeps of one build, one after the other), and
* the **within-session spread** of either side (``<metric>_spread``: half the min–max range
  over that side's repeats).

The within-session spread alone is not enough: on the H200, 3 sustained repeats of one sweep
spread by as little as ±0.04 % while two sweeps of the same build differed by up to +4.5 %.

Pure functions and records; :func:`session_spreads` reads only loaded ResultSet records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from clusterbench.model.results import ResultSet

# The metrics compare judges; all but sustained_fps are trace figures (µs per frame, from a trace).
COMPARED_METRICS: tuple[str, ...] = ("kernel_us", "h2d_us", "d2h_us", "roofline_us", "sustained_fps")
TRACE_METRICS = frozenset({"kernel_us", "h2d_us", "d2h_us", "roofline_us"})

# Floor rule (docs/compare.md, "Noise floors"): 1.5 x the largest A/A difference seen, rounded up
# to the next FLOOR_STEP_PCT, at least FLOOR_MIN_PCT; trace figures at least TRACE_FLOOR_MIN_PCT.
# 1.5: three sessions give three pairwise differences, and the largest of three understates the tail.
FLOOR_MARGIN = 1.5
FLOOR_STEP_PCT = 0.5
FLOOR_MIN_PCT = 0.5
# The RTX 4090 reference campaign: 1-stream kernel and transfer numbers reproduce across sessions to
# about 1 %; the H200 A/A agrees (0.1-0.4 %), so 1 % stays the least a trace figure must clear.
TRACE_FLOOR_MIN_PCT = 1.0


@dataclass(frozen=True, slots=True)
class NoiseFloor:
    """The least relative change of ``metric`` that is not session-to-session noise."""

    metric: str
    multi_stream: bool  # the floor of rows with more than one stream (they share the PCIe link)
    pct: float  # % of the before value
    source: str  # where the figure comes from, in words


# The A/A evidence (docs/compare.md, "Noise floors"), H200, one build per A/A set:
#   pair (two sweeps, the first A/A of issue 10): trace figures within 0.1-0.4 %, 4-stream H2D up to 2.5 %,
#     sustained FPS +4.55 % (3x3 s4) and +0.08 to +0.3 % elsewhere;
#   triple (2026-12-01_f32_aa1..aa3, `python scripts/aa_spread.py results/2026-12-01_f32_aa1
#     results/2026-12-01_f32_aa2 results/2026-12-01_f32_aa3`): trace figures s1 <= 0.12 %, kernel s4
#     0.27 %, H2D s4 1.54 %, D2H s4 0.43 %, roofline s4 0.87 %; sustained s1 0.05 %, s4 0.68 %;
#   slide pair (2026-12-01_f32_slide, _slide_aa: two probes of one build in one device call on the
#     two-columns-per-lane frozen kernel, `python scripts/aa_spread.py results/2026-12-01_f32_slide
#     results/2026-12-01_f32_slide_aa`): trace figures s1 <= 0.46 %, kernel s4 0.11 %, H2D s4 2.97 %,
#     D2H s4 0.32 %, roofline s4 0.34 %; sustained s1 0.07 %, s4 0.37 %.
# Each floor is the floor rule applied to the largest of the three. The 4-stream D2H and roofline take
# the H2D figure: both directions share the link, and a 4-stream roofline is a transfer bar.
_PAIR = "A/A pair (H200, 2026-12-01): "
_SLIDE = "A/A slide pair (H200, 2026-12-01): "
FLOORS: dict[tuple[str, bool], NoiseFloor] = {
    (m, multi): NoiseFloor(m, multi, pct, src)
    for (m, multi), (pct, src) in {
        ("kernel_us", False): (1.0, _PAIR + "0.4 % at most -> 1 % (the least for a trace figure)"),
        ("kernel_us", True): (1.0, _PAIR + "0.4 % at most -> 1 % (the least for a trace figure)"),
        ("h2d_us", False): (1.0, _PAIR + "0.4 % at most -> 1 % (the least for a trace figure)"),
        ("h2d_us", True): (4.5, _SLIDE + "4-stream H2D 2.97 % -> 1.5 x 2.97 = 4.46 -> 4.5 %"),
        ("d2h_us", False): (1.0, _PAIR + "0.4 % at most -> 1 % (the least for a trace figure)"),
        ("d2h_us", True): (4.5, _SLIDE + "as 4-stream H2D (one shared link): 4.5 %"),
        ("roofline_us", False): (1.0, _PAIR + "0.4 % at most -> 1 % (the least for a trace figure)"),
        ("roofline_us", True): (4.5, _SLIDE + "as 4-stream H2D (a 4-stream roofline is a transfer bar): 4.5 %"),
        ("sustained_fps", False): (0.5, _PAIR + "+0.3 % at most -> 1.5 x 0.3 = 0.45 -> 0.5 %"),
        ("sustained_fps", True): (7.0, _PAIR + "3x3 s4 +4.55 % -> 1.5 x 4.55 = 6.8 -> 7 %"),
    }.items()
}


def floor_for(metric: str, streams: int | None) -> NoiseFloor | None:
    """The floor of ``metric`` for a row with ``streams`` streams (unknown counts as several)."""
    multi = streams is None or streams > 1
    return FLOORS.get((metric, multi))


def noise_of(before: float, floor: NoiseFloor | None, spreads: Sequence[float | None]) -> tuple[float | None, str]:
    """The noise a change of a metric must clear, in its unit, and which term set it.

    The larger of ``floor.pct`` % of ``|before|`` and every known spread. Returns (None, "") when
    neither a floor nor a spread is known.
    """
    best: float | None = None
    which = ""
    if floor is not None:
        best = abs(before) * floor.pct / 100.0
        which = "floor"
    for s in spreads:
        if s is not None and (best is None or s > best):
            best, which = s, "spread"
    return best, which


# ----------------------------------------------------------------------------- A/A spread


@dataclass(frozen=True, slots=True)
class SessionSpread:
    """One metric of one config label across several sessions (results dirs) of one build."""

    label: str
    metric: str
    streams: int | None
    dirs: tuple[str, ...]
    values: tuple[float, ...]  # one per dir, in the given order (sustained: the median of the repeats)
    max_diff_pct: float  # the largest |v_j - v_i| / v_i * 100 over pairs i < j
    within_pct: float | None  # the largest within-session half-range / median * 100 (repeats), or None


def pair_diffs_pct(values: Sequence[float]) -> tuple[float, ...]:
    """(v_j - v_i) / v_i * 100 for every pair i < j, in order (a later session against an earlier)."""
    return tuple(
        (values[j] - values[i]) / values[i] * 100.0 for i in range(len(values)) for j in range(i + 1, len(values))
    )


def session_spreads(dirs: Sequence[ResultSet], metrics: Sequence[str] = COMPARED_METRICS) -> tuple[SessionSpread, ...]:
    """The session-to-session spread of every metric of every row (by key) found in all ``dirs``."""
    if len(dirs) < 2:
        raise ValueError("the session spread needs at least two results dirs")
    out: list[SessionSpread] = []
    for key in dirs[0].keys:
        rows = [d.row(key) for d in dirs]
        if any(r is None for r in rows):
            continue
        streams = rows[0].streams  # type: ignore[union-attr]
        for m in metrics:
            vals = [r.number(m) for r in rows]  # type: ignore[union-attr]
            if any(v is None for v in vals):
                continue
            values = tuple(float(v) for v in vals)  # type: ignore[arg-type]
            within: float | None = None
            for r in rows:
                measured = r.measurement(m)  # type: ignore[union-attr]
                if measured is not None and measured.repeats > 1:
                    w = measured.spread / measured.median * 100.0
                    within = w if within is None else max(within, w)
            diffs = pair_diffs_pct(values)
            out.append(SessionSpread(key.label, m, streams, tuple(d.name for d in dirs), values,
                                     max(abs(x) for x in diffs), within))  # fmt: skip
    return tuple(out)


def suggest_floor_pct(metric: str, max_diff_pct: float) -> float:
    """The floor rule applied to the largest A/A difference of a metric (see the constants)."""
    raw = max(FLOOR_MARGIN * max_diff_pct, FLOOR_MIN_PCT)
    if metric in TRACE_METRICS:
        raw = max(raw, TRACE_FLOOR_MIN_PCT)
    steps = math.ceil(round(raw / FLOOR_STEP_PCT, 9))
    return steps * FLOOR_STEP_PCT


def suggest_floors(spreads: Sequence[SessionSpread]) -> dict[tuple[str, bool], tuple[float, float]]:
    """(metric, multi_stream) -> (largest A/A difference %, suggested floor %)."""
    worst: dict[tuple[str, bool], float] = {}
    for s in spreads:
        key = (s.metric, s.streams is None or s.streams > 1)
        worst[key] = max(worst.get(key, 0.0), s.max_diff_pct)
    return {k: (v, suggest_floor_pct(k[0], v)) for k, v in worst.items()}
