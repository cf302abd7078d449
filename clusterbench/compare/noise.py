"""The noise model of compare: floors per GPU (as data), the cross-session drift bound, and the rule that
makes floors of A/A dirs.

A verdict must clear the **noise** of its metric: the larger of

* the metric's **floor**, a share of the before value measured as the session-to-session spread of one
  build (A/A: several full sweeps of one build, one after the other), and
* the **within-session spread** of either side (``<metric>_spread``: half the min–max range over that
  side's repeats).

The within-session spread alone is not enough: on the H200, 3 sustained repeats of one sweep spread by as
little as ±0.04 % while two sweeps of the same build differed by up to +4.5 %.

Multi-stream transfer figures (and a roofline that binds on a transfer) of two different sessions are held
to the **drift bound** instead: H2D and D2H fight for the PCIe link, and on the RTX 4090 those columns drifted
by up to 20 % between sessions of one build. A change within the bound is not comparable; beyond it, it is
FASTER or SLOWER, marked cross-session.

Floors are data: a :class:`FloorSet` per GPU model, written by ``clusterbench floors`` from A/A dirs
(:mod:`clusterbench.compare.floors`). Without one, :data:`SEED_FLOORS` applies: the seed's reading rules
(1 % for trace figures, the 20 % drift bound; no floor for sustained FPS across sessions).

Pure records and functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from clusterbench.model import units as U

# The metrics compare judges; all but sustained_fps are trace figures (µs per frame, from a trace).
COMPARED_METRICS: tuple[str, ...] = ("kernel_us", "h2d_us", "d2h_us", "roofline_us", "sustained_fps")
TRACE_METRICS = frozenset({"kernel_us", "h2d_us", "d2h_us", "roofline_us"})
TRANSFER_METRICS = frozenset({"h2d_us", "d2h_us"})
# On several streams H2D and D2H share one link, and a roofline that binds on a transfer is a transfer bar:
# their floors take the worst A/A figure of the three.
SHARED_LINK_METRICS = ("h2d_us", "d2h_us", "roofline_us")

# Floor rule (docs/compare.md, "Noise floors"): 1.5 x the largest A/A difference seen, rounded up to the
# next FLOOR_STEP_PCT, at least FLOOR_MIN_PCT; trace figures at least TRACE_FLOOR_MIN_PCT.
# 1.5: three sessions give three pairwise differences, and the largest of three understates the tail.
FLOOR_MARGIN = 1.5
FLOOR_STEP_PCT = 0.5
FLOOR_MIN_PCT = 0.5
# The seed's reading rules (the RTX 4090 reference campaign): 1-stream kernel and transfer trace figures
# reproduce across sessions to about 1 %; the H200 A/A agrees (0.1-0.4 %), so 1 % stays the least a
# trace figure must clear. Multi-stream transfer columns drift by up to 20 % between sessions.
TRACE_FLOOR_MIN_PCT = 1.0
SEED_DRIFT_BOUND_PCT = 20.0
SEED_SOURCE = "the seed's reading rules (RTX 4090 reference campaign)"
SEED_DRIFT_SOURCE = (f"{SEED_SOURCE}: multi-stream transfer columns drifted by up to "
                     f"{U.pct_of(SEED_DRIFT_BOUND_PCT, None)} between sessions of one build")


@dataclass(frozen=True, slots=True)
class NoiseFloor:
    """The least relative change of ``metric`` that is not session-to-session noise, on rows with one
    stream or (``multi_stream``) several. ``aa_max_diff_pct``: the largest A/A difference it was made of."""

    metric: str
    multi_stream: bool
    pct: float  # % of the before value
    source: str  # where the figure comes from, in words
    aa_max_diff_pct: float | None = None

    def to_json(self) -> dict[str, object]:
        return {"metric": self.metric, "multi_stream": self.multi_stream, "pct": self.pct, "source": self.source,
                "aa_max_diff_pct": self.aa_max_diff_pct}

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> NoiseFloor:
        pct = doc.get("pct")
        if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not math.isfinite(pct) or pct <= 0:
            raise ValueError(f"a floor's pct must be a number > 0, got {pct!r}")
        metric, multi = doc.get("metric"), doc.get("multi_stream")
        if metric not in COMPARED_METRICS or not isinstance(multi, bool):
            raise ValueError(f"a floor needs a compared metric and multi_stream true/false, got {metric!r}, {multi!r}")
        worst = doc.get("aa_max_diff_pct")
        return cls(str(metric), multi, float(pct), str(doc.get("source") or ""),
                   None if worst is None else float(worst))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class AaSet:
    """One A/A set a floor file was made of: results dirs of one build (git rev), each its own session."""

    git_rev: str
    dirs: tuple[str, ...]  # the dirs' names, in the order given
    sessions: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"git_rev": self.git_rev, "dirs": list(self.dirs), "sessions": list(self.sessions)}

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> AaSet:
        return cls(str(doc.get("git_rev")), tuple(doc.get("dirs") or ()), tuple(doc.get("sessions") or ()))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class FloorSet:
    """The floors of one GPU model and its drift bound. ``path``: the file it was read from (None: made in
    memory, or the seed's rules, ``seed``)."""

    gpu_name: str | None
    floors: tuple[NoiseFloor, ...]
    drift_bound_pct: float
    drift_bound_source: str
    seed: bool = False
    path: str | None = None
    sets: tuple[AaSet, ...] = ()
    created_utc: str | None = None
    tool_version: str | None = None

    def floor(self, metric: str, streams: int | None) -> NoiseFloor | None:
        """The floor of ``metric`` for a row with ``streams`` streams (unknown counts as several)."""
        multi = streams is None or streams > 1
        return next((f for f in self.floors if f.metric == metric and f.multi_stream == multi), None)

    @property
    def text(self) -> str:
        """Where these floors come from, in words."""
        if self.seed:
            return (f"no floors file{f' for {self.gpu_name}' if self.gpu_name else ''}: {SEED_SOURCE}: "
                    f"trace figures {U.pct_of(TRACE_FLOOR_MIN_PCT, None)}, multi-stream transfers across sessions a "
                    f"{U.pct_of(self.drift_bound_pct, None)} drift bound; sustained FPS has no floor, so it is judged within "
                    "one session only")
        where = f" from {self.path}" if self.path else ""
        return f"floors of {self.gpu_name}{where}"


SEED_FLOORS = FloorSet(
    gpu_name=None,
    floors=tuple(NoiseFloor(m, multi, TRACE_FLOOR_MIN_PCT, SEED_SOURCE) for m in sorted(TRACE_METRICS)
                 for multi in (False, True)),
    drift_bound_pct=SEED_DRIFT_BOUND_PCT, drift_bound_source=SEED_DRIFT_SOURCE, seed=True)


def seed_floors(gpu_name: str | None) -> FloorSet:
    """The seed's reading rules, said of ``gpu_name`` (the GPU that has no floors file)."""
    from dataclasses import replace

    return replace(SEED_FLOORS, gpu_name=gpu_name)


def noise_of(before: float, floor_pct: float | None, spreads: Sequence[float | None]) -> tuple[float | None, str]:
    """The noise a change of a metric must clear, in its unit, and which term set it ("floor" or "spread").

    The larger of ``floor_pct`` % of ``|before|`` and every known spread. Returns (None, "") when neither
    a floor nor a spread is known."""
    best: float | None = None
    which = ""
    if floor_pct is not None:
        best = abs(before) * floor_pct / 100.0
        which = "floor"
    for s in spreads:
        if s is not None and (best is None or s > best):
            best, which = s, "spread"
    return best, which


# ----------------------------------------------------------------------------- the floor rule


def suggest_floor_pct(metric: str, max_diff_pct: float) -> float:
    """The floor rule applied to the largest A/A difference of a metric (see the constants)."""
    raw = max(FLOOR_MARGIN * max_diff_pct, FLOOR_MIN_PCT)
    if metric in TRACE_METRICS:
        raw = max(raw, TRACE_FLOOR_MIN_PCT)
    steps = math.ceil(round(raw / FLOOR_STEP_PCT, 9))
    return steps * FLOOR_STEP_PCT


def drift_bound_pct(multi_stream_transfer_max_diff_pct: float | None) -> float:
    """The seed's 20 % bound, or the floor rule of the largest multi-stream transfer A/A difference when
    that is larger: A/A sweeps of one sitting show less drift than sessions days apart."""
    if multi_stream_transfer_max_diff_pct is None:
        return SEED_DRIFT_BOUND_PCT
    return max(SEED_DRIFT_BOUND_PCT, suggest_floor_pct("h2d_us", multi_stream_transfer_max_diff_pct))
