"""The noise model of compare: floors per GPU (as data), the cross-session drift bound, and the rule that
makes floors of A/A dirs.

A verdict must clear the **noise** of its metric: the larger of

* the metric's **floor**, a share of the before value measured as the spread of one build probed again and
  again (A/A), for pairs of one **scope**: in one session, in two sessions of one GPU unit, or on two units of
  the model (SCOPES), and
* the **within-session spread** of either side (``<metric>_spread``: half the min–max range over that
  side's repeats).

The within-session spread alone is not enough: on the H200, 3 sustained repeats of one sweep spread by as
little as ±0.04 % while two sweeps of the same build differed by up to +4.5 %.

Multi-stream transfer figures (and a roofline that binds on a transfer) of two different sessions are held
to the **drift bound** instead: H2D and D2H fight for the PCIe link, and on the RTX 4090 those columns drifted
by up to 20 % between sessions of one build. A change within the bound is not comparable; beyond it, it is
FASTER or SLOWER, marked cross-session.

Floors are data: a :class:`FloorSet` per GPU model, written by ``clusterbench floors`` from A/A dirs
(:mod:`clusterbench.compare.floors`). Without one, the **default bounds** apply
(:mod:`clusterbench.compare.bounds`: measured on the GPU models listed there, the largest over them for a
model not listed), each marked provisional, with the seed's 20 % drift bound for multi-stream transfers of
dirs that did not measure their unit's link. A verdict never needs a floors file.

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

# Where the two sides of a pair were measured, narrowest first: in one session (one probe run, or the probes
# given one --session), in two sessions on one GPU unit (its UUID: a reboot, a fresh machine on the same
# node), or on two units of one GPU model. A floor is measured per scope, from A/A pairs of that scope.
WITHIN_SESSION = "within_session"
SAME_UNIT = "same_unit"
ACROSS_UNITS = "across_units"
SCOPES: tuple[str, ...] = (WITHIN_SESSION, SAME_UNIT, ACROSS_UNITS)
SCOPE_TEXT = {WITHIN_SESSION: "within-session", SAME_UNIT: "same-unit", ACROSS_UNITS: "across-units"}
# What a scope's pairs are pairs of, and so what its pair count counts: two probes of one session, two
# sessions of one unit, two units of one model.
SCOPE_PAIRS = {WITHIN_SESSION: "probes of one session", SAME_UNIT: "sessions on one GPU unit",
               ACROSS_UNITS: "GPU units of the model"}
# A floor made of fewer pairs than this is provisional. The largest of n exchangeable A/A differences is
# exceeded by the next one with probability 1 / (n + 1): 4 pairs make that 1 in 5 before the 1.5 margin, and
# fewer let one lucky pair set a floor half the tail would break. 4 fresh machines give 6 pairs of units.
MIN_PAIRS = 4
# Where a floor of the built-in defaults comes from (compare/bounds.py); NoiseFloor.seed tells them apart.
SEED_SOURCE = "default bound"
SEED_DRIFT_SOURCE = ("the seed's reading rules (RTX 4090 reference campaign): multi-stream transfer columns drifted "
                     f"by up to {U.pct_of(SEED_DRIFT_BOUND_PCT, None)} between sessions of one build")
# The least change compare calls a change, % of the before value (--min-effect): the seed's 1-stream
# reproducibility of trace figures (about 1 %), and asv's and pyperf's sense that below a few % a change of
# one build is not worth a verdict. Every figure's noise is at least this.
DEFAULT_MIN_EFFECT_PCT = 1.0


@dataclass(frozen=True, slots=True)
class NoiseFloor:
    """The least relative change of ``metric`` that is not noise, on rows with one stream or (``multi_stream``)
    several, for pairs of one ``scope`` (SCOPES). ``aa_max_diff_pct``: the largest A/A difference it was made
    of; ``pairs``: how many pairs of that scope it saw (SCOPE_PAIRS; None when not recorded: a version 1 file or
    the seed's rules), ``differences`` how many A/A differences (pairs times configs); ``provisional``: made of
    fewer than MIN_PAIRS pairs."""

    metric: str
    multi_stream: bool
    pct: float  # % of the before value
    source: str  # where the figure comes from, in words
    aa_max_diff_pct: float | None = None
    scope: str = SAME_UNIT
    pairs: int | None = None
    differences: int | None = None
    provisional: bool = False

    def to_json(self) -> dict[str, object]:
        return {"metric": self.metric, "multi_stream": self.multi_stream, "scope": self.scope, "pct": self.pct,
                "pairs": self.pairs, "differences": self.differences, "provisional": self.provisional,
                "aa_max_diff_pct": self.aa_max_diff_pct, "source": self.source}

    @classmethod
    def from_json(cls, doc: Mapping[str, object], scoped: bool = True) -> NoiseFloor:
        """A floor of a floors file; ``scoped``: the file records scope, pairs and provisional (version 2),
        else the floor was measured across sessions of one unit (version 1)."""
        if not isinstance(doc, Mapping):
            raise ValueError(f"a floor must be a JSON object, got {type(doc).__name__}")
        pct = doc.get("pct")
        if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not math.isfinite(pct) or pct <= 0:
            raise ValueError(f"a floor's pct must be a number > 0, got {pct!r}")
        metric, multi = doc.get("metric"), doc.get("multi_stream")
        if metric not in COMPARED_METRICS or not isinstance(multi, bool):
            raise ValueError(f"a floor needs a compared metric and multi_stream true/false, got {metric!r}, {multi!r}")
        worst = doc.get("aa_max_diff_pct")
        if worst is not None and (isinstance(worst, bool) or not isinstance(worst, (int, float))):
            raise ValueError(f"a floor's aa_max_diff_pct must be a number, got {worst!r}")
        scope, pairs, diffs, provisional = SAME_UNIT, None, None, False
        if scoped:
            scope, pairs, diffs, provisional = (doc.get("scope"), doc.get("pairs"), doc.get("differences"),
                                                doc.get("provisional"))
            if scope not in SCOPES:
                raise ValueError(f"a floor's scope must be one of {', '.join(SCOPES)}, got {scope!r}")
            for name, v in (("pairs", pairs), ("differences", diffs)):
                if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                    raise ValueError(f"a floor's {name} must be an integer >= 1 or null, got {v!r}")
            if not isinstance(provisional, bool):
                raise ValueError(f"a floor's provisional must be true or false, got {provisional!r}")
        return cls(str(metric), multi, float(pct), str(doc.get("source") or ""),
                   None if worst is None else float(worst), str(scope), pairs, diffs, provisional)  # type: ignore[arg-type]

    @property
    def seed(self) -> bool:
        """A built-in default (compare/bounds.py, or the seed's 1 % where an A/A measured nothing), not a
        measurement of a floors file."""
        return self.source.startswith((SEED_SOURCE, "the seed's"))

    @property
    def text(self) -> str:
        """``1.5 % same-unit floor``, with ``provisional: 2 pairs`` when it is; a default bound says so."""
        if self.source.startswith(SEED_SOURCE):
            return f"{U.pct_of(self.pct, None)} {SCOPE_TEXT[self.scope]} default bound, provisional"
        if self.seed:
            return f"{U.pct_of(self.pct, None)} floor, the seed's rule"
        prov = f", provisional: {self.pairs} pair{'' if self.pairs == 1 else 's'}" if self.provisional else ""
        return f"{U.pct_of(self.pct, None)} {SCOPE_TEXT[self.scope]} floor{prov}"


@dataclass(frozen=True, slots=True)
class FloorUse:
    """The floor that judged a pair of ``scope``: ``floor`` (its ``pct`` the one applied), and when the
    floor of that scope was missing, which stood in: a broader one (``stand_in`` "broader": safe) or a
    narrower one ("narrower": it may be too low)."""

    floor: NoiseFloor
    scope: str  # the pair's scope
    stand_in: str | None = None  # None, "broader" or "narrower"

    @property
    def text(self) -> str:
        """``1.5 % same-unit floor``; a narrower floor standing in says so (a broader one is safe)."""
        if self.stand_in == "narrower":
            return f"{self.floor.text}, standing in for an {SCOPE_TEXT[self.scope]} one"
        return self.floor.text


@dataclass(frozen=True, slots=True)
class Machine:
    """One GPU unit (its UUID) on one host that measured A/A dirs: which dirs, in which sessions."""

    gpu_uuid: str | None
    host: str | None
    dirs: tuple[str, ...]
    sessions: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"gpu_uuid": self.gpu_uuid, "host": self.host, "dirs": list(self.dirs), "sessions": list(self.sessions)}

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> Machine:
        if not isinstance(doc, Mapping):
            raise ValueError(f"a machine must be a JSON object, got {type(doc).__name__}")
        return cls(_opt_str(doc.get("gpu_uuid")), _opt_str(doc.get("host")), _strs(doc.get("dirs"), "dirs"),
                   _strs(doc.get("sessions"), "sessions"))


def _opt_str(v: object) -> str | None:
    return None if v is None else str(v)


def _strs(v: object, what: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if not isinstance(v, list):
        raise ValueError(f"{what} must be a list, got {type(v).__name__}")
    return tuple(str(x) for x in v)


@dataclass(frozen=True, slots=True)
class AaSet:
    """One A/A set a floor file was made of: results dirs of one build (git rev), each its own session."""

    git_rev: str
    dirs: tuple[str, ...]  # the dirs' names, in the order given
    sessions: tuple[str, ...]
    units: tuple[str, ...] = ()  # each dir's GPU UUID ("" when it names none)

    def to_json(self) -> dict[str, object]:
        return {"git_rev": self.git_rev, "dirs": list(self.dirs), "sessions": list(self.sessions),
                "units": list(self.units)}

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> AaSet:
        if not isinstance(doc, Mapping):
            raise ValueError(f"an A/A set must be a JSON object, got {type(doc).__name__}")
        return cls(str(doc.get("git_rev")), _strs(doc.get("dirs"), "dirs"), _strs(doc.get("sessions"), "sessions"),
                   _strs(doc.get("units"), "units"))


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
    version: int | None = None  # the floors file's version it was read from
    machines: tuple[Machine, ...] = ()

    def floor(self, metric: str, streams: int | None, scope: str = SAME_UNIT) -> NoiseFloor | None:
        """The floor of ``metric`` measured for pairs of ``scope`` on rows with ``streams`` streams (unknown
        counts as several), or None. :meth:`use` is what compare applies."""
        multi = streams is None or streams > 1
        return next((f for f in self.floors if f.metric == metric and f.multi_stream == multi and f.scope == scope),
                    None)

    def use(self, metric: str, streams: int | None, scope: str) -> FloorUse | None:
        """The floor that judges ``metric`` of a pair of ``scope`` (None when there is none for the metric):

        * the floor of that scope; when it is missing, the nearest broader one (a pair of a narrower scope
          carries less noise, so it is safe), else the nearest narrower one, which stands in and may be too low;
        * never less than a narrower scope's floor: a pair of two units carries the noise of one unit's
          sessions too, and a broad floor of few pairs must not undercut a narrow one of many."""
        multi = streams is None or streams > 1
        have = {f.scope: f for f in self.floors if f.metric == metric and f.multi_stream == multi}
        if not have:
            return None
        k = SCOPES.index(scope)
        stand_in = None
        if scope in have:
            base = have[scope]
        elif broader := [have[s] for s in SCOPES[k + 1:] if s in have]:
            base, stand_in = broader[0], "broader"
        else:
            base, stand_in = next(have[s] for s in reversed(SCOPES[:k]) if s in have), "narrower"
        narrower = [have[s] for s in SCOPES[:SCOPES.index(base.scope)] if s in have]
        top = max([base, *narrower], key=lambda f: f.pct)
        return FloorUse(top, scope, stand_in)

    @property
    def text(self) -> str:
        """Where these floors come from, in words."""
        if self.seed:
            models = sorted({f.source.split("measured on ", 1)[1].split(":")[0] for f in self.floors
                             if "measured on " in f.source})
            return (f"no floors file{f' for {self.gpu_name}' if self.gpu_name else ''}: the default bounds "
                    f"(measured on {', '.join(models) or 'no GPU'}; verdicts they judge are provisional)")
        where = f" from {self.path}" if self.path else ""
        scopes = [sc for sc in SCOPES if any(f.scope == sc and not f.seed for f in self.floors)]
        if self.version == 1:
            what = "a version 1 file: same-unit floors, pair counts not recorded"
        else:
            what = ", ".join(SCOPE_TEXT[sc] for sc in scopes) or "no measured floor"
            if any(f.provisional for f in self.floors):
                what += "; some provisional"
        return f"floors of {self.gpu_name}{where} ({what})"


def _default_floors(gpu_name: str | None) -> FloorSet:
    """The default bounds (compare/bounds.py) of ``gpu_name`` as a floor set: provisional floors of every
    compared metric, stream class and scope, and the seed's drift bound."""
    from clusterbench.compare.bounds import default_bounds

    floors = tuple(NoiseFloor(b.metric, b.multi_stream, b.pct, b.source, b.worst_pct, b.scope, b.pairs, None, True)
                   for b in default_bounds(gpu_name))
    return FloorSet(gpu_name=gpu_name, floors=floors, drift_bound_pct=SEED_DRIFT_BOUND_PCT,
                    drift_bound_source=SEED_DRIFT_SOURCE, seed=True)


# What judges a GPU model without a floors file: the default bounds (the largest over the models measured).
SEED_FLOORS = _default_floors(None)


def seed_floors(gpu_name: str | None) -> FloorSet:
    """The default bounds of ``gpu_name`` (the GPU that has no floors file)."""
    return _default_floors(gpu_name)


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
