"""Compare two results dirs: before and after, with a noise model that survives A/A.

Pure functions over loaded :class:`~clusterbench.model.results.ResultSet` records; no printing.
Rows pair by their key (config, gpu, role, variant); the label is what the rows are called.
The rules (also in ``clusterbench compare --help`` and docs/compare.md):

* ``delta_pct = (after - before) / before * 100`` per metric.
* **Noise** is the larger of the metric's floor (a share of the before value, measured on A/A pairs of one
  build as far apart as the row pair: in one session, in two sessions of one GPU unit, or on two units, its
  **scope** (:func:`scope_of`); the :class:`~clusterbench.compare.noise.FloorSet` of the row's GPU model, from
  its floors file, else the seed's reading rules; ``FloorSet.use`` picks the floor and says when another
  stands in) and either side's within-session spread (``<metric>_spread``).
* **With repeats on both sides** (sustained FPS: the samples of the row's measurement), the seeded
  bootstrap interval of the ratio of medians (after / before, at LEVEL) must exclude 1 AND the change of
  the medians must exceed the noise; otherwise SAME. **Without**, the noise alone decides:
  ``|after - before| <= noise`` is SAME. Never FASTER or SLOWER from the sign alone. A metric without a
  floor (sustained FPS under the seed's rules) is judged within one session only (``no_floor``).
* **Mismatches**: the config columns of each row pair (CONFIG_COLUMNS). A difference makes
  the metrics it affects NOT_COMPARABLE (reason code ``config_differs``), unless the pair is
  compared across that column on purpose: ``across=`` names it, or every row pair differs in
  it the same way (AUTO_ACROSS_COLUMNS). Such deltas keep their verdict and say ``across``.
* **Sessions** (SESSION_DEFINITION): rows with several streams from different (or unknown) sessions are held
  to the drift bound on h2d and d2h, and on the roofline when it binds on either: a change within the
  bound is NOT_COMPARABLE (``session_drift``); beyond it, FASTER or SLOWER (``beyond_drift``), marked
  ``cross_session``.
* **GPUs**: each row's GPU is its own ``gpu_name`` (rows of a ``--gpus`` probe or a merged
  multi-host campaign carry ``host``, ``gpu_name``, ``gpu_uuid``), else the dir's ``gpu_name``. A row pair from two GPU models is refused (InputError)
  unless ``allow_different_gpu``; then the pair is compared across ``gpu`` (a Mismatch with
  column GPU_COLUMN, verdicts kept and marked, never gated) and the row says which GPUs. The
  same model on another unit or host is stated, not refused.
* **End to end** reports the roofline and sustained FPS verdicts. "kernel change invisible end
  to end" is said only when the kernel moved beyond noise and neither of them did.
* Every verdict carries a :class:`Reason` code and a sentence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Iterable, Mapping, Sequence

from clusterbench.compare.link import LinkShare, link_share
from clusterbench.compare.overstated import Overstated, judged_range, overstated
from clusterbench.compare.noise import (ACROSS_UNITS, COMPARED_METRICS, DEFAULT_MIN_EFFECT_PCT, MIN_PAIRS, SAME_UNIT,
                                        SCOPE_TEXT, SEED_FLOORS, TRACE_METRICS, TRANSFER_METRICS, WITHIN_SESSION,
                                        FloorSet, FloorUse, NoiseFloor, noise_of, seed_floors)
from clusterbench.model.processes import ProcessSpread, process_spread, processes_of
from clusterbench.model.unit import UnitRecord
from clusterbench.model.stats import BOOTSTRAP_LEVEL, RatioInterval, bootstrap_ratio_of_medians, half_range
from clusterbench.errors import InputError
from clusterbench.model.engines import TRANSFER_ENGINES
from clusterbench.model import units as U
from clusterbench.model.engines import display_name as display_engine
from clusterbench.model.results import HOST_BINDER, SPREAD_SUFFIX, ResultRow, ResultSet, RowKey

# Confidence level of the bootstrap interval of the ratio of medians (model/stats.py says why 95 %).
LEVEL = BOOTSTRAP_LEVEL
# Sustained FPS from several processes: a change must exceed this many times the larger side's spread of process
# medians (max - min over their median). With 3 processes a side and normal process-to-process noise, two
# probes of one build then differ by more than that 1.6 % of the time where the spread, not the minimum effect,
# sets the noise (1.0 x: 6.2 %; 2.0 x: 0.5 %); benchmarks/process_noise.py simulates it, and its power at a 5 %
# change, and docs/compare.md gives the figures.
PROCESS_SPREAD_FACTOR = 1.5

# What a session is, as the output and docs/compare.md say it.
SESSION_DEFINITION = (
    "a session is one sitting of the GPU: one clusterbench probe run (its session id), or every probe given "
    "one --session NAME, or one campaign (probe --executor); a row's session is its session column, else "
    "its dir's env.json session_id"
)

TIME_METRICS: tuple[str, ...] = ("kernel_us", "h2d_us", "d2h_us", "roofline_us")
# sustained_fps joins the comparison when either dir measured it (higher is better).
OPTIONAL_METRICS: tuple[str, ...] = ("sustained_fps",)
HIGHER_IS_BETTER = frozenset({"sustained_fps"})

# The config columns of a row pair that must agree for a like-for-like comparison, in report order.
CONFIG_COLUMNS: tuple[str, ...] = (
    "tracer", "transfer", "pedestal", "pedestal_dtype", "workload", "cluster", "cap", "streams", "batch", "frames",
)  # fmt: skip
# What a difference affects: the tracer only what the trace measures (sustained FPS runs untraced);
# everything else changes the work itself.
AFFECTS: dict[str, frozenset[str]] = {c: frozenset(COMPARED_METRICS) for c in CONFIG_COLUMNS}
AFFECTS["tracer"] = frozenset(TRACE_METRICS)
# Columns compared across automatically when every row pair differs in them the same way (the whole
# dir was measured so): f32 against f64, nsys against cupti, copy against zerocopy, one workload
# against another. cluster/cap/streams/batch/frames differences are label mistakes or short runs:
# only --across compares across them.
AUTO_ACROSS_COLUMNS = frozenset({"tracer", "transfer", "pedestal", "pedestal_dtype", "workload"})
# The pseudo-column of a row pair measured on two GPU models (--allow-different-gpu): a Mismatch
# with this column marks every metric of the pair "across gpu".
GPU_COLUMN = "gpu"
# How many differing row pairs the refusal names before "and N more".
_NAMED_ROWS = 3


class Verdict(str, Enum):
    SAME = "SAME"
    FASTER = "FASTER"
    SLOWER = "SLOWER"
    NOT_COMPARABLE = "NOT_COMPARABLE"
    MISSING = "MISSING"  # not measured on one side (or the label is on one side only)


class Reason(str, Enum):
    """Why a verdict is what it is (after nvbench's DecisionReason)."""

    IDENTICAL = "identical"  # equal values
    WITHIN_NOISE = "within_noise"  # no repeats on both sides: |change| <= noise
    BEYOND_NOISE = "beyond_noise"  # no repeats on both sides: |change| > noise
    NOT_SIGNIFICANT = "not_significant"  # repeats on both sides: the interval of the ratio of medians holds 1
    SMALL_EFFECT = "small_effect"  # the interval excludes 1, but the change of the medians is within the noise
    SIGNIFICANT = "significant"  # the interval excludes 1 and the change is beyond the noise
    CONFIG_DIFFERS = "config_differs"  # a config column differs and the pair is not compared across it
    SESSION_DRIFT = "session_drift"  # several streams, other sessions, a transfer figure: within the drift bound
    BEYOND_DRIFT = "beyond_drift"  # several streams, other sessions, a transfer figure: beyond the drift bound
    NO_FLOOR = "no_floor"  # no session-to-session floor for the metric (seed rules) and not one session
    UNSTEADY = "unsteady"  # sustained FPS of a side whose sustained runs did not reach steady state
    HOST_BOUND = "host_bound"  # the roofline binds on the host bar (a traced CPU figure) on a side: not judged
    NOT_MEASURED = "not_measured"  # empty on one side
    ONE_SIDED = "one_sided"  # the label is in one dir only


class Presence(str, Enum):
    BOTH = "both"
    BEFORE_ONLY = "before_only"
    AFTER_ONLY = "after_only"


class EndToEnd(str, Enum):
    """What happened end to end: the roofline and sustained FPS verdicts, together."""

    FASTER = "faster"
    SLOWER = "slower"
    SAME = "same"
    MIXED = "mixed"  # one got faster, the other slower
    NOT_COMPARABLE = "not_comparable"
    UNKNOWN = "unknown"  # neither measured on both sides


@dataclass(frozen=True, slots=True)
class MetricDelta:
    name: str
    unit: str
    before: float | None
    after: float | None
    delta_pct: float | None
    noise: float | None  # in the metric's unit: the change a verdict must clear
    verdict: Verdict
    reason: str
    code: Reason
    note: str | None = None
    across: tuple[str, ...] = ()  # config columns this delta is across (compared on purpose)
    floor_pct: float | None = None  # the session-to-session floor the noise was judged with, when it was
    interval: RatioInterval | None = None  # the bootstrap interval of the ratio of medians, when both sides have repeats
    n_before: int | None = None  # repeats behind the before value, when known
    n_after: int | None = None
    bound_pct: float | None = None  # the cross-session drift bound, when it judged this delta
    noise_from: str | None = None  # "floor", "spread" or "drift_bound": the term that set ``noise``
    cross_session: bool = False  # judged beyond the drift bound, across two sessions
    pair_scope: str | None = None  # where the two sides were measured (noise.SCOPES)
    floor_scope: str | None = None  # the scope of the floor that judged, when a floor judged
    floor_stand_in: str | None = None  # "broader" or "narrower": that floor stood in for the pair's scope's
    floor_provisional: bool = False  # that floor was made of fewer than MIN_PAIRS pairs, or is a default bound
    min_effect_pct: float | None = None  # the least change called a change (--min-effect)
    link: LinkShare | None = None  # judged as shares of each unit's link (two units)
    judged_delta_pct: float | None = None  # the change judged (with ``link`` or ``overstated``): nearest 0 %
    processes: bool = False  # judged by the spread of both sides' process medians
    floor_default: bool = False  # the floor that judged is a default bound (no floors file for it)
    overstated: Overstated | None = None  # a side's bar overstates its cost: judged over a range (overstated.py)

    @property
    def noise_pct(self) -> float | None:
        """The noise as a share of the before value, %."""
        if self.noise is None or not self.before:
            return None
        return self.noise / abs(self.before) * 100.0

    @property
    def judged(self) -> bool:
        return self.verdict in (Verdict.SAME, Verdict.FASTER, Verdict.SLOWER)

    @property
    def provisional(self) -> bool:
        """Judged, with a default bound or a floor of too few pairs among what judged it."""
        return self.judged and self.floor_provisional and self.code is not Reason.IDENTICAL

    @property
    def change_pct(self) -> float | None:
        """The change the verdict judged: over the range of the links or of an overstated bar where it was
        (the change nearest 0 %), else delta_pct."""
        return self.judged_delta_pct if self.link is not None or self.overstated is not None else self.delta_pct


@dataclass(frozen=True, slots=True)
class Mismatch:
    """A config column that differs between the two rows of one label."""

    column: str
    before: str
    after: str
    affects: tuple[str, ...]  # the compared metrics it touches
    across: bool  # compared across it on purpose: deltas shown, labelled

    @property
    def text(self) -> str:
        return f"{self.column} differs: {self.before} → {self.after}"


@dataclass(frozen=True, slots=True)
class GpuIdentity:
    """Which GPU measured one row: its model, unit (UUID) and host, each None when unknown.
    ``source``: ``row`` (the row's own columns), ``dir`` (the dir's env.json) or ``unknown``."""

    name: str | None
    uuid: str | None = None
    host: str | None = None
    source: str = "unknown"

    @property
    def text(self) -> str:
        """``NVIDIA H200 (GPU-8c1f2a3b, host node7)``: the model, then the unit (the UUID's first 12
        characters) and the host, where known."""
        where = [b for b in ((self.uuid[:12] if self.uuid else None), (f"host {self.host}" if self.host else None))
                 if b]
        return (self.name or "GPU unknown") + (f" ({', '.join(where)})" if where else "")

    def same_unit(self, other: "GpuIdentity") -> bool | None:
        """One physical GPU (UUID), else one host; None when neither side says."""
        if self.uuid and other.uuid:
            return self.uuid == other.uuid
        if self.host and other.host:
            return self.host == other.host
        return None


@dataclass(frozen=True, slots=True)
class RowComparison:
    label: str
    presence: Presence
    streams: int | None
    cluster: int | None
    same_session: bool
    metrics: tuple[MetricDelta, ...]
    binds_before: str | None  # lower-case engine name: kernel, h2d, d2h, ...
    binds_after: str | None
    end_to_end: EndToEnd
    end_to_end_reason: str
    kernel_invisible: bool = False  # kernel moved beyond noise; roofline and sustained FPS did not
    mismatches: tuple[Mismatch, ...] = ()
    notes: tuple[str, ...] = ()
    gpu_before: GpuIdentity | None = None
    gpu_after: GpuIdentity | None = None
    scope: str | None = None  # where the two rows were measured (noise.SCOPES); None for a one-sided row
    scope_text: str | None = None  # the same in words
    unit_before: UnitRecord | None = None  # the unit each row was measured on, where its dir recorded it
    unit_after: UnitRecord | None = None

    @property
    def gpu_differs(self) -> bool:
        """The two rows come from two GPU models (both known)."""
        return gpus_differ(self.gpu_before, self.gpu_after)

    @property
    def binds_changed(self) -> bool:
        return self.binds_before is not None and self.binds_after is not None and self.binds_before != self.binds_after

    def metric(self, name: str) -> MetricDelta:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class CompareWarning:
    message: str
    hint: str | None = None


@dataclass(frozen=True, slots=True)
class SideInfo:
    path: str
    name: str
    format: str
    gpu_name: str | None
    driver: str | None
    session_id: str | None
    git_rev: str | None
    git_dirty: bool | None
    hosts: tuple[str, ...] = ()  # a merged multi-host dir's hosts (env.json ``hosts``), else its host


@dataclass(frozen=True, slots=True)
class Comparison:
    before: SideInfo
    after: SideInfo
    metric_names: tuple[str, ...]
    rows: tuple[RowComparison, ...]
    warnings: tuple[CompareWarning, ...]
    across: tuple[str, ...] = ()  # columns compared across, on request or because the whole dir differs
    level: float = LEVEL  # the confidence level of the bootstrap intervals
    floors: tuple[FloorSet, ...] = ()  # the floors used, one per GPU model compared
    min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT  # the least change called a change (--min-effect)

    @property
    def same_session(self) -> bool:
        return self.before.session_id is not None and self.before.session_id == self.after.session_id

    def row(self, label: str) -> RowComparison:
        for r in self.rows:
            if r.label == label:
                return r
        raise KeyError(label)


@dataclass(frozen=True, slots=True)
class GateFailure:
    """One figure of one row that got worse than ``--gate PCT`` allows. ``worse_pct``: how much worse, in
    percent of the before value (a time that grew, a rate that fell); ``noise`` what the change cleared."""

    label: str
    metric: str
    before: float
    after: float
    unit: str
    delta_pct: float
    worse_pct: float
    noise: float | None


@dataclass(frozen=True, slots=True)
class GateOutcome:
    """What ``--gate PCT`` found over the figures it gates (``metrics``, compared metric names): each
    like-for-like figure of each row is judged; the rest are ``not_checked`` with why."""

    pct: float
    metrics: tuple[str, ...]  # the gated figures either dir measured
    failures: tuple[GateFailure, ...]
    judged: tuple[tuple[str, str], ...]  # (label, metric) of every figure it judged
    not_checked: tuple[tuple[str, str, str], ...]  # (label, metric, why) for the figures it could not judge
    not_measured: tuple[str, ...] = ()  # gated figures neither dir measured (sustained FPS of trace-only dirs)
    # (label, metric, why): figures judged SAME with a noise above the gate's percentage (and the minimum
    # effect): a regression of that size could not have been seen
    too_coarse: tuple[tuple[str, str, str], ...] = ()
    unjudged_pass: bool = False  # --gate-unjudged pass: figures it could not judge do not fail the gate

    @property
    def nothing_comparable(self) -> bool:
        return not self.judged

    @property
    def unjudged(self) -> tuple[tuple[str, str, str], ...]:
        """Every gated figure it could not judge at its percentage: not comparable, measured on one side only,
        across a difference, or too coarse."""
        return self.not_checked + self.too_coarse

    @property
    def passed(self) -> bool:
        if self.failures:
            return False
        if self.unjudged_pass:
            return not self.nothing_comparable
        return not self.unjudged and not self.nothing_comparable


# The figures --gate judges unless --gate-metric picks some: what the user cares about end to end.
GATE_METRICS: dict[str, str] = {"roofline": "roofline_us", "sustained": "sustained_fps", "kernel": "kernel_us",
                                "h2d": "h2d_us", "d2h": "d2h_us"}
DEFAULT_GATE_METRICS: tuple[str, ...] = ("roofline_us", "sustained_fps")


def gate_metric(name: str) -> str:
    """The compared metric a ``--gate-metric NAME`` picks (``roofline``, ``sustained``, ``kernel``, ``h2d``,
    ``d2h``; the column names ``roofline_us``... too). InputError for any other name."""
    key = name.strip().lower()
    if key in GATE_METRICS:
        return GATE_METRICS[key]
    if key in GATE_METRICS.values():
        return key
    raise InputError(f"--gate-metric {name}: not a figure compare judges",
                     hint=f"pick one of {', '.join(GATE_METRICS)}")


# ----------------------------------------------------------------------------- one metric


_USE_TABLE = object()


def compare_metric(
    name: str,
    before: float | None,
    after: float | None,
    *,
    streams: int | None = 1,
    floors: FloorSet = SEED_FLOORS,
    floor: NoiseFloor | None | object = _USE_TABLE,
    drift_bound_pct: float | None = None,
    same_session: bool = False,
    spread_before: float | None = None,
    spread_after: float | None = None,
    samples_before: Sequence[float] = (),
    samples_after: Sequence[float] = (),
    not_comparable: tuple[Reason, str] | None = None,
    across: tuple[str, ...] = (),
    note: str | None = None,
    level: float = LEVEL,
    scope: str | None = None,
    min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT,
    processes_before: ProcessSpread | None = None,
    processes_after: ProcessSpread | None = None,
    link: LinkShare | None = None,
    bound_note: str | None = None,
    over: Overstated | None = None,
) -> MetricDelta:
    """One metric's delta and verdict (see the module docstring for the rules).

    ``floor`` defaults to the floor ``floors`` gives ``name`` for a pair of ``scope`` (noise.SCOPES: one
    session, two sessions of one GPU unit, two units; None, not known: judged as two sessions of one unit, the
    floors' meaning before they had scopes) on ``streams`` streams (FloorSet.use), else the default bound of
    the GPU model. ``drift_bound_pct``: the pair is a multi-stream transfer figure of two sessions whose units'
    links were not measured, held to that bound instead of the floor. ``processes_before`` and
    ``processes_after``: the spread of each side's process medians (sustained FPS from several processes);
    with both, the change must clear the process rule (module docstring). ``link``: the figure is judged as
    a share of each unit's link. ``min_effect_pct``: the least change called a change. ``bound_note``: why a
    bound judged rather than the processes (a side without process spread), said in the reason. ``over``: a
    side's bar overstates its cost; the change judged is the one nearest 0 from as measured to that bar cut to
    the untraced frame (compare/overstated.py)."""
    unit = U.metric_unit(name)
    if floor is _USE_TABLE:
        use = floors.use(name, streams, scope or SAME_UNIT)
        if use is None and not floors.seed:  # a floors file without this figure: the default bound judges it
            use = seed_floors(floors.gpu_name).use(name, streams, scope or SAME_UNIT)
    else:
        use = None if floor is None else FloorUse(floor, scope or SAME_UNIT)  # type: ignore[arg-type]
    fl = use.floor if use is not None else None
    procs = processes_before is not None and processes_after is not None
    nb = (processes_before.n if procs else len(samples_before)) or None  # type: ignore[union-attr]
    na = (processes_after.n if procs else len(samples_after)) or None  # type: ignore[union-attr]

    def md(verdict: Verdict, code: Reason, reason: str, delta_pct: float | None, noise: float | None,
           p: RatioInterval | None = None, *, floor_pct: float | None = None, bound: float | None = None,
           noise_from: str | None = None, cross: bool = False, judged_pct: float | None = None) -> MetricDelta:  # fmt: skip
        judged_by = use if floor_pct is not None else None
        return MetricDelta(name, unit, before, after, delta_pct, noise, verdict, reason, code, note, across,
                           floor_pct, p, nb, na, bound, noise_from, cross, scope,
                           judged_by.floor.scope if judged_by else None, judged_by.stand_in if judged_by else None,
                           judged_by.floor.provisional if judged_by else False, min_effect_pct, link,
                           judged_pct if link is not None or over is not None else None, procs,
                           judged_by.floor.seed if judged_by else False, over)  # fmt: skip

    if before is None or after is None:
        side = "either dir" if before is None and after is None else ("before" if before is None else "after")
        return md(Verdict.MISSING, Reason.NOT_MEASURED, f"not measured in {side}", None, None)
    delta_pct = (after - before) / before * 100.0 if before != 0 else None
    if not_comparable is not None:
        return md(Verdict.NOT_COMPARABLE, not_comparable[0], not_comparable[1], delta_pct, None)
    if before == after and tuple(samples_before) == tuple(samples_after):
        return md(Verdict.SAME, Reason.IDENTICAL, "identical values" + (f" (and repeats)" if samples_before else ""),
                  delta_pct, 0.0, judged_pct=0.0)
    measured = after / before if before != 0 else math.nan
    if not math.isfinite(measured) or measured <= 0:
        return md(Verdict.NOT_COMPARABLE, Reason.NOT_MEASURED, "the before value is 0: no relative change", None, None)
    lo, hi, ratio = judged_range(before, after, link, over)  # the change nearest 0 % over the range
    judged_pct = (ratio - 1.0) * 100.0
    better = ratio > 1 if name in HIGHER_IS_BETTER else ratio < 1
    moved = Verdict.FASTER if better else Verdict.SLOWER
    shared = ""
    if link is not None:
        shared = f", {link.text}: {link.range_text(before, after)}"
    if over is not None:
        shared += f", {over.text}: {U.signed_pct((lo - 1.0) * 100.0)} to {U.signed_pct((hi - 1.0) * 100.0)}"
    if lo != hi:
        shared += (f", judged {U.signed_pct(judged_pct)}" + (" (the range holds 0 %)" if lo <= 1.0 <= hi else
                                                            " (the end nearest 0 %)"))
    base = abs(before)

    def clears(frac: float) -> bool:
        # a relative 1e-9 absorbs float rounding of decimal inputs (10.3 - 10.0 > 0.3 in binary)
        return abs(ratio - 1.0) > frac + 1e-9

    if drift_bound_pct is not None:
        frac = drift_bound_pct / 100.0
        noise = base * frac
        bound_txt = (f"the {U.pct_of(drift_bound_pct, None)} cross-session drift bound of multi-stream transfers "
                     f"({U.plus_minus(noise, unit)})")
        if not clears(frac):
            return md(Verdict.NOT_COMPARABLE, Reason.SESSION_DRIFT,
                      f"within {bound_txt}: two sessions, and drift that large is not a change{shared}", delta_pct,
                      noise, bound=drift_bound_pct, noise_from="drift_bound", judged_pct=judged_pct)  # fmt: skip
        return md(moved, Reason.BEYOND_DRIFT, f"beyond {bound_txt}, across two sessions{shared}", delta_pct, noise,
                  bound=drift_bound_pct, noise_from="drift_bound", cross=True, judged_pct=judged_pct)  # fmt: skip
    min_frac = max(min_effect_pct, 0.0) / 100.0
    if procs:
        pb, pa = processes_before, processes_after
        assert pb is not None and pa is not None
        terms = [("min_effect", min_frac, f"the {U.pct_of(min_effect_pct, None)} minimum effect"),
                 ("processes", PROCESS_SPREAD_FACTOR * max(pb.spread, pa.spread),
                  f"{PROCESS_SPREAD_FACTOR:g} × the larger spread of the process medians ({pb.n} processes "
                  f"before, spread {U.pct(pb.spread, 2)}; {pa.n} after, {U.pct(pa.spread, 2)})")]
        if max(pb.unsettled_spread, pa.unsettled_spread) > 0:
            terms.append(("unsettled", max(pb.unsettled_spread, pa.unsettled_spread),
                          "the spread of the runs a median stands on, in a process that did not settle"))
        floor_pct = None
        if scope == ACROSS_UNITS and fl is not None:
            floor_pct = fl.pct
            terms.append(("floor", fl.pct / 100.0, use.text))  # type: ignore[union-attr]
        which, frac, why = max(terms, key=lambda t: t[1])
        noise = base * frac
        where = ("two GPU units: " if scope == ACROSS_UNITS else "")
        txt = (f"the noise {U.plus_minus(noise, unit)} ({U.pct(frac, 2)}: {where}{why}){shared}; the medians of "
               f"the process medians")
        if not clears(frac):
            return md(Verdict.SAME, Reason.WITHIN_NOISE, f"within {txt}", delta_pct, noise, floor_pct=floor_pct,
                      noise_from=which, judged_pct=judged_pct)
        return md(moved, Reason.BEYOND_NOISE, f"beyond {txt}", delta_pct, noise, floor_pct=floor_pct,
                  noise_from=which, judged_pct=judged_pct)
    floor_pct = fl.pct if fl is not None else None
    spreads = (spread_before, spread_after)
    if floor_pct is None and same_session and all(s is None for s in spreads):
        spreads = tuple(half_range(s) if len(s) >= 2 else None for s in (samples_before, samples_after))
    noise, which = noise_of(before, floor_pct, spreads)
    if noise is None and not same_session:
        where = f" on {floors.gpu_name}" if floors.gpu_name else ""
        return md(Verdict.NOT_COMPARABLE, Reason.NO_FLOOR,
                  f"no floor for {name}{where} ({'no floors file' if floors.seed else 'not in its floors file'})"
                  ", and the two rows are of different sessions", delta_pct, None)  # fmt: skip
    if noise is None or noise < base * min_frac:
        noise, which = base * min_frac, "min_effect"
    extra = f"; {bound_note}" if bound_note else ""
    if which == "floor":
        noise_txt = f"{U.plus_minus(noise, unit)} ({use.text}{extra})"  # type: ignore[union-attr]
    elif which == "min_effect":
        noise_txt = f"{U.plus_minus(noise, unit)} (the {U.pct_of(min_effect_pct, None)} minimum effect{extra})"
    elif floor_pct is not None:
        noise_txt = f"{U.plus_minus(noise, unit)} (the spread of the repeats, above the {use.text}{extra})"  # type: ignore[union-attr]
    else:
        noise_txt = f"{U.plus_minus(noise, unit)} (the spread of the repeats; one session, no floor{extra})"
    noise_txt += shared
    frac = noise / base if base else math.inf
    kw = {"floor_pct": floor_pct, "noise_from": which, "judged_pct": judged_pct}
    within = not clears(frac)
    if len(samples_before) >= 2 and len(samples_after) >= 2:
        ci = bootstrap_ratio_of_medians(samples_before, samples_after, level=level)
        if link is not None or over is not None:  # the repeats scale as the medians were judged
            f = ratio / measured
            ci = RatioInterval(ci.ratio * f, ci.low * f, ci.high * f, ci.level, ci.resamples, ci.seed, ci.n_before,
                               ci.n_after)
        test = (f"the {U.pct(level, 0)} bootstrap interval of the change of the medians, "
                f"{U.signed_pct((ci.low - 1) * 100)} to {U.signed_pct((ci.high - 1) * 100)} "
                f"({len(samples_before)} vs {len(samples_after)} repeats),")
        if not ci.excludes_one:
            return md(Verdict.SAME, Reason.NOT_SIGNIFICANT, f"not significant: {test} holds 0 %{extra}{shared}",
                      delta_pct, noise, ci, **kw)  # fmt: skip
        if within:
            return md(Verdict.SAME, Reason.SMALL_EFFECT,
                      f"{test} excludes 0 %, but the change is within the noise {noise_txt}", delta_pct, noise,
                      ci, **kw)  # fmt: skip
        return md(moved, Reason.SIGNIFICANT, f"{test} excludes 0 %, and the change is beyond the noise "
                  f"{noise_txt}", delta_pct, noise, ci, **kw)  # fmt: skip
    if within:
        return md(Verdict.SAME, Reason.WITHIN_NOISE, f"within the noise {noise_txt}", delta_pct, noise, **kw)
    return md(moved, Reason.BEYOND_NOISE, f"beyond the noise {noise_txt}", delta_pct, noise, **kw)


# ----------------------------------------------------------------------------- the stamps


def side_info(res: ResultSet) -> SideInfo:
    """The stamp of one side, from its env.json."""
    env = res.env
    assert env is not None  # a loaded results dir has one
    return SideInfo(path=str(res.path), name=res.name, format=res.format, gpu_name=env.gpu_name, driver=env.driver,
                    session_id=env.session_id, git_rev=env.git_rev, git_dirty=env.git_dirty, hosts=_hosts(res))


def _hosts(res: ResultSet) -> tuple[str, ...]:
    env = res.env
    if env is None:
        return ()
    return env.hosts or ((env.host,) if env.host else ())


def row_gpu(res: ResultSet, row: ResultRow) -> GpuIdentity:
    """The GPU that measured ``row``: its own ``gpu_name``/``gpu_uuid``/``host`` (a ``--gpus`` or
    merged row), else the dir's env.json (pure)."""
    if row.gpu_name is not None:
        return GpuIdentity(row.gpu_name, row.gpu_uuid, row.host, "row")
    hosts = _hosts(res)
    host = row.host or (hosts[0] if len(hosts) == 1 else None)
    name = res.env.gpu_name if res.env is not None else None
    if name is None:
        return GpuIdentity(None, None, host, "unknown")
    return GpuIdentity(name, res.env.gpu_uuid if res.env is not None else None, host, "dir")


def row_unit(res: ResultSet, row: ResultRow) -> UnitRecord | None:
    """The unit that measured ``row`` (pure): its dir's env.json ``unit``, where the row is of the probe that
    recorded it (the row's session is the dir's session, or names none) and of its GPU (the UUIDs agree, or
    the row names none); None otherwise (a row an earlier probe left in the dir, or a dir made before units
    were recorded)."""
    env = res.env
    if env is None or env.unit is None:
        return None
    if row.session is not None and env.session_id is not None and row.session != env.session_id:
        return None
    uuid = row.gpu_uuid or env.gpu_uuid
    if uuid and env.unit.gpu_uuid and uuid != env.unit.gpu_uuid:
        return None
    return env.unit


def gpus_differ(a: GpuIdentity | None, b: GpuIdentity | None) -> bool:
    """Two GPU models, both known (pure)."""
    return a is not None and b is not None and a.name is not None and b.name is not None and a.name != b.name


# ----------------------------------------------------------------------------- rows


def row_session(row: ResultRow, side: SideInfo) -> str | None:
    """The session of ``row`` (SESSION_DEFINITION): its session column, else its dir's session id."""
    return row.session if row.session is not None else side.session_id


def scope_of(session_a: str | None, session_b: str | None, unit_a: str | None, unit_b: str | None) -> str:
    """Where two rows were measured (noise.SCOPES): on two GPU units when both UUIDs are known and differ
    (even within one campaign session), else in one session, else in two sessions of one unit; two sessions
    whose unit is unknown on a side count as two units (the broadest floor judges them)."""
    if unit_a and unit_b and unit_a != unit_b:
        return ACROSS_UNITS
    if session_a is not None and session_a == session_b:
        return WITHIN_SESSION
    if unit_a and unit_a == unit_b:
        return SAME_UNIT
    return ACROSS_UNITS


def scope_text(scope: str, gpu_a: GpuIdentity, gpu_b: GpuIdentity, unit_a: UnitRecord | None = None,
               unit_b: UnitRecord | None = None) -> str:
    """The scope of a row pair in words: ``two sessions on one GPU unit (GPU-a209f1f8)``; with both units'
    records, each unit's GPU, host and boot."""
    if scope == WITHIN_SESSION:
        return "one session"
    if unit_a is not None and unit_b is not None:
        if scope == SAME_UNIT:
            return f"two sessions on one GPU unit ({unit_a.short})"
        return f"two GPU units ({unit_a.short}, {unit_b.short})"
    if scope == SAME_UNIT:
        return f"two sessions on one GPU unit ({str(gpu_a.uuid)[:12]})"
    if gpu_a.uuid and gpu_b.uuid:
        return f"two GPU units ({gpu_a.uuid[:12]}, {gpu_b.uuid[:12]})"
    return "two sessions, GPU unit unknown"


def config_value(row: ResultRow, column: str) -> object:
    """A row's config column; None when unknown (legacy dirs record no tracer, transfer, pedestal mode
    or workload). Older dirs kept some of these in env.json only: the store fills them in."""
    return row.value(column)


def params_differences(a: ResultSet, b: ResultSet) -> tuple[str, ...]:
    """The workload parameters (env.json ``configs.<label>.params``) that differ between two dirs, per config
    both ran: ``"3x3_s1: delay_us_per_frame – → 0.43"``. Two dirs of one git rev whose params differ did not
    run the same work (a deliberate delay, another occupancy or seed): they are not an A/A pair."""
    out = []
    in_b = {r.key.config_key for r in b.rows}
    for key in dict.fromkeys(r.key.config_key for r in a.rows if r.key.config_key in in_b):
        ea = a.env.entry(key) if a.env is not None else None
        eb = b.env.entry(key) if b.env is not None else None
        if ea is None or eb is None:
            continue
        pa, pb = dict(ea.params), dict(eb.params)
        for name in sorted(set(pa) | set(pb)):
            if pa.get(name) != pb.get(name):
                va, vb = pa.get(name), pb.get(name)
                out.append(f"{key.config}: {name} {U.NOT_MEASURED if va is None else va} → "
                           f"{U.NOT_MEASURED if vb is None else vb}")
    return tuple(out)


def row_steady(row: ResultRow) -> bool | None:
    """Whether the row's sustained runs reached steady state (its ``sustained_steady`` column); None when
    not known (rows written before the column, or a value that reads as neither)."""
    v = row.value("sustained_steady")
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, (int, float)):
        return {1: True, 0: False}.get(v)  # type: ignore[call-overload]
    return {"true": True, "false": False, "yes": True, "no": False}.get(str(v).strip().lower())


def _warmup_text(row: ResultRow) -> str:
    runs, secs = row.number("sustained_warmups"), row.number("sustained_warmup_s")
    bits = [b for b in ((f"{U.count(int(runs))} warm-up run{'' if runs == 1 else 's'}" if runs is not None
                         else None), (U.seconds(secs) if secs is not None else None)) if b]
    return f" after {', '.join(bits)}" if bits else ""


def sustained_judged(ra: ResultRow, rb: ResultRow) -> bool:
    """Whether compare judges the sustained FPS of this pair of rows: always when both sides carry their
    processes' medians (the spread judges, steady or not), else only when neither side's runs are known to be
    unsteady. One rule for compare's verdicts and for the floors made from A/A pairs."""
    if processes_of(ra.measurement("sustained_fps")) and processes_of(rb.measurement("sustained_fps")):
        return True
    return row_steady(ra) is not False and row_steady(rb) is not False


def unsteady_text(rb: ResultRow, ra: ResultRow, sides: tuple[SideInfo, SideInfo]) -> str | None:
    """Why the sustained FPS of a row pair is not comparable because a side did not reach steady state
    (``sustained_steady`` False), or None when neither side is known to be unsteady (None is not unsteady)."""
    bad = [f"{tag} ({side.name}{_warmup_text(row)})" for tag, row, side in (("before", rb, sides[0]),
                                                                             ("after", ra, sides[1]))
           if row_steady(row) is False]
    if not bad:
        return None
    return (f"the sustained runs of {' and '.join(bad)} did not reach steady state: the figure was still moving, "
            "and a moving figure is not a change")


def _tallest_transfer(row: ResultRow) -> tuple[str, float] | None:
    bars = [(e, v) for e, v in (("h2d", row.h2d_us), ("d2h", row.d2h_us)) if v is not None]
    return max(bars, key=lambda ev: ev[1]) if bars else None


def _one_stream_sibling(key: RowKey, row: ResultRow, before: ResultSet, after: ResultSet) -> str | None:
    """The label of a 1-stream row with the same cluster and cap, present in both dirs."""
    for cand in before.rows:
        if cand.key == key or cand.streams != 1:
            continue
        if (cand.cluster, cand.cap) == (row.cluster, row.cap) and after.row(cand.key) is not None:
            return cand.label
    return None


def _verdict_word(m: MetricDelta) -> str:
    return "NOT COMPARABLE" if m.verdict is Verdict.NOT_COMPARABLE else m.verdict.value


# Why a roofline that binds on the host is not judged (Reason.HOST_BOUND; docs/compare.md, "Verdicts and reason
# codes"): the host bar is the launching thread's time under the profiler (its untraced estimate), and the floors'
# A/A pairs measured rooflines that bind on a GPU engine; the host bar of one program moved 12.9 % between two A/A
# sessions of one H200 unit.
HOST_BOUND_WHY = ("the roofline binds on the host (before: {before}, after: {after}): the host bar is CPU time under "
                  "the profiler, whose noise from one session to the next no A/A of the floors measured")
HOST_BOUND_TEXT = HOST_BOUND_WHY + "; sustained FPS, measured untraced, judges the frame"


def _delta_txt(m: MetricDelta) -> str:
    return f"{U.signed_pct(m.delta_pct)} " if m.delta_pct is not None else ""


def _end_to_end(kernel: MetricDelta | None, roof: MetricDelta | None, sust: MetricDelta | None,
                binds_after: str | None) -> tuple[EndToEnd, str, bool]:  # fmt: skip
    """The roofline and sustained FPS together: a change of either (FASTER, SLOWER, or both ways: MIXED) is what
    happened end to end; else, when either could not be judged (NOT COMPARABLE, or measured on one side only),
    NOT_COMPARABLE with why, never SAME; else SAME; UNKNOWN when neither was measured. A roofline that binds on
    the host (``host_bound``) is the traced frame of what sustained FPS measures untraced: where sustained FPS
    is judged, it judges the frame alone."""
    parts: list[str] = []
    judged: list[MetricDelta] = []
    unjudged: list[str] = []
    host_roof = roof is not None and roof.code is Reason.HOST_BOUND and sust is not None and sust.judged
    figures: list[tuple[str, MetricDelta | None]] = [("sustained", sust)]
    if host_roof:
        assert roof is not None
        parts.append(f"roofline {_delta_txt(roof)}not judged (binds on the host: sustained FPS judges the frame)")
    else:
        figures.insert(0, ("roofline", roof))
    for what, m in figures:
        if m is None or m.verdict is Verdict.MISSING and m.before is None and m.after is None:
            parts.append(f"{what} not measured")
            continue
        if m.verdict is Verdict.MISSING:
            parts.append(f"{what} {m.reason}")
            unjudged.append(f"{what} {m.reason}")
            continue
        across = f" across {', '.join(m.across)}" if m.across and m.judged else ""
        prov = " (provisional)" if m.provisional else ""
        parts.append(f"{what} {_delta_txt(m)}{_verdict_word(m)}{prov}{across}")
        if m.verdict is Verdict.NOT_COMPARABLE:
            unjudged.append(f"{what} {m.code.value}")
        else:
            judged.append(m)
    moved = {m.verdict for m in judged} - {Verdict.SAME}
    if moved == {Verdict.FASTER, Verdict.SLOWER}:
        verdict = EndToEnd.MIXED
    elif moved:
        verdict = EndToEnd.FASTER if Verdict.FASTER in moved else EndToEnd.SLOWER
    elif unjudged:
        verdict = EndToEnd.NOT_COMPARABLE
    elif judged:
        verdict = EndToEnd.SAME
    else:
        verdict = EndToEnd.UNKNOWN
    reason = ", ".join(parts)
    if verdict is EndToEnd.NOT_COMPARABLE and judged:
        reason += (f"; not SAME: {' and '.join(unjudged)} could not be judged, and a change there would not "
                   "show in the other")
    invisible = (
        kernel is not None and kernel.verdict in (Verdict.FASTER, Verdict.SLOWER)
        and (roof is not None and roof.verdict is Verdict.SAME or host_roof)
        and (sust is None or sust.verdict is Verdict.SAME
             or sust.verdict is Verdict.MISSING and sust.before is None and sust.after is None)
    )  # fmt: skip
    if invisible:
        assert kernel is not None
        reason += (f"; kernel change {_delta_txt(kernel)}{kernel.verdict.value} invisible end to end "
                   f"(binds: {display_engine(binds_after)})")  # fmt: skip
    return verdict, reason, invisible


def _mismatches(rb: ResultRow, ra: ResultRow, across: frozenset[str]) -> tuple[Mismatch, ...]:
    out = []
    for col in CONFIG_COLUMNS:
        vb, va = config_value(rb, col), config_value(ra, col)
        if vb is None or va is None or vb == va:
            continue
        out.append(Mismatch(col, str(vb), str(va), tuple(m for m in COMPARED_METRICS if m in AFFECTS[col]),
                            col in across))  # fmt: skip
    return tuple(out)


def _compare_row(
    key: RowKey,
    rb: ResultRow | None,
    ra: ResultRow | None,
    before: ResultSet,
    after: ResultSet,
    sides: tuple[SideInfo, SideInfo],
    metric_names: tuple[str, ...],
    across: frozenset[str],
    level: float,
    allow_different_gpu: bool = False,
    floors: FloorSet = SEED_FLOORS,
    min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT,
) -> RowComparison:
    presence = Presence.BOTH if rb is not None and ra is not None else (
        Presence.BEFORE_ONLY if rb is not None else Presence.AFTER_ONLY
    )
    label = key.label
    either = rb if rb is not None else ra
    assert either is not None
    streams, cluster = either.streams, either.cluster
    binds_before, binds_after = (rb.binds if rb else None), (ra.binds if ra else None)
    if presence is not Presence.BOTH:
        where = "before" if presence is Presence.BEFORE_ONLY else "after"
        gone = f"only in {where} ({(sides[0] if rb is not None else sides[1]).name})"
        metrics = tuple(
            MetricDelta(n, U.metric_unit(n), rb.number(n) if rb else None, ra.number(n) if ra else None,
                        None, None, Verdict.MISSING, gone, Reason.ONE_SIDED)
            for n in metric_names
        )  # fmt: skip
        return RowComparison(label, presence, streams, cluster, False, metrics, binds_before, binds_after,
                             EndToEnd.UNKNOWN, gone, notes=(gone,),
                             gpu_before=row_gpu(before, rb) if rb is not None else None,
                             gpu_after=row_gpu(after, ra) if ra is not None else None)  # fmt: skip
    assert rb is not None and ra is not None
    gpu_b, gpu_a = row_gpu(before, rb), row_gpu(after, ra)
    sb, sa = row_session(rb, sides[0]), row_session(ra, sides[1])
    same_session = sb is not None and sb == sa
    unit_b, unit_a = row_unit(before, rb), row_unit(after, ra)
    both_units = unit_b is not None and unit_a is not None and unit_b.unit_id is not None and unit_a.unit_id is not None
    scope = (scope_of(sb, sa, unit_b.unit_id, unit_a.unit_id) if both_units  # type: ignore[union-attr]
             else scope_of(sb, sa, gpu_b.uuid, gpu_a.uuid))
    # both units' links measured: multi-stream transfers are judged by their floor (as shares of each unit's
    # link across units), not held to the drift bound of dirs that could not tell a slower host from drift
    linked = both_units and unit_b.link is not None and unit_a.link is not None  # type: ignore[union-attr]
    # a row without a stream count (a program probed as it is) is judged as multi-stream, as noise.py does
    multi = any(s is None or s > 1 for s in (streams, ra.streams))
    mismatches = _mismatches(rb, ra, across)
    notes: list[str] = []
    if gpus_differ(gpu_b, gpu_a):
        if not allow_different_gpu:  # compare_results refuses first; a caller of _compare_row alone is told too
            raise InputError(f"row {label!r} pairs two GPUs: {gpu_b.text} before, {gpu_a.text} after",
                             hint="pass --allow-different-gpu to compare them anyway")
        # compared across the GPU on purpose: every metric keeps its verdict, marked, never gated
        mismatches = mismatches + (Mismatch(GPU_COLUMN, gpu_b.text, gpu_a.text, tuple(COMPARED_METRICS), True),)
        notes.append(f"different GPUs: {gpu_b.text} before, {gpu_a.text} after (--allow-different-gpu): "
                     "the deltas measure the GPUs as much as the change, and --gate leaves this row out")
    elif gpu_b.name is not None and gpu_b.name == gpu_a.name and scope == ACROSS_UNITS and (
            gpu_b.same_unit(gpu_a) is False or both_units):
        if both_units:
            notes.append(f"same GPU model, another unit: {unit_b.short} before, {unit_a.short} after"  # type: ignore[union-attr]
                         + (f"; they differ in: {'; '.join(unit_b.differences(unit_a))}"  # type: ignore[union-attr]
                            if unit_b.differences(unit_a) else "; their links agree"))  # type: ignore[union-attr]
        else:
            notes.append(f"same GPU model, another unit: {gpu_b.text} before, {gpu_a.text} after")
    kernel_note = None
    if multi:
        sib = _one_stream_sibling(key, rb, before, after)
        kernel_note = f"{streams} streams: quote kernel changes from the 1-stream row" + (f" ({sib})" if sib else "")
    procs_b, procs_a = processes_of(rb.measurement("sustained_fps")), processes_of(ra.measurement("sustained_fps"))
    spread_b = process_spread(procs_b) if procs_b else None
    spread_a = process_spread(procs_a) if procs_a else None
    with_procs = spread_b is not None and spread_a is not None
    # a side without process spread (a dir made before several processes) is judged by a bound, and its
    # unsteady runs still make the figure not comparable; with process spread both, the spread judges
    unsteady = None if sustained_judged(rb, ra) else unsteady_text(rb, ra, sides)
    one_process = [tag for tag, sp in (("before", spread_b), ("after", spread_a)) if sp is None]
    bound_note = (f"no process spread on the {' and '.join(one_process)} side{'' if len(one_process) == 1 else 's'} "
                  "(a dir made before sustained FPS came from several processes): judged by the across-process "
                  "bound") if one_process and rb.sustained_fps is not None and ra.sustained_fps is not None else None
    metrics: list[MetricDelta] = []
    for n in metric_names:
        ncr: tuple[Reason, str] | None = None
        bound: float | None = None
        blocking = [mm for mm in mismatches if n in mm.affects and not mm.across]
        if blocking:
            ncr = (Reason.CONFIG_DIFFERS, "; ".join(mm.text for mm in blocking))
        elif n == "sustained_fps" and unsteady is not None:
            ncr = (Reason.UNSTEADY, unsteady)
        elif n == "roofline_us" and HOST_BINDER in (binds_before, binds_after) and rb.number(n) != ra.number(n):
            ncr = (Reason.HOST_BOUND, HOST_BOUND_TEXT.format(before=display_engine(binds_before or "?"),
                                                             after=display_engine(binds_after or "?")))
        elif multi and not same_session and not linked and (
                n in TRANSFER_METRICS
                or n == "roofline_us" and (binds_before in TRANSFER_ENGINES or binds_after in TRANSFER_ENGINES)):
            bound = floors.drift_bound_pct
        m_across = tuple(mm.column for mm in mismatches if n in mm.affects and mm.across)
        share = link_share(n, None if streams is None or ra.streams is None else max(streams, ra.streams),
                           binds_before, binds_after, unit_b, unit_a, same_unit=scope == SAME_UNIT
                           ) if scope in (ACROSS_UNITS, SAME_UNIT) else None
        metrics.append(
            compare_metric(
                n, rb.number(n), ra.number(n),
                streams=None if streams is None or ra.streams is None else max(streams, ra.streams),
                floors=floors, drift_bound_pct=bound, same_session=same_session,
                spread_before=rb.number(n + SPREAD_SUFFIX), spread_after=ra.number(n + SPREAD_SUFFIX),
                samples_before=_samples(rb, n), samples_after=_samples(ra, n),
                not_comparable=ncr, across=m_across, note=kernel_note if n == "kernel_us" else None, level=level,
                scope=scope, min_effect_pct=min_effect_pct,
                processes_before=spread_b if n == "sustained_fps" and with_procs else None,
                processes_after=spread_a if n == "sustained_fps" and with_procs else None,
                link=share, bound_note=bound_note if n == "sustained_fps" else None, over=overstated(n, rb, ra),
            )
        )  # fmt: skip
    mt = tuple(metrics)
    by_name = {m.name: m for m in mt}
    if binds_before is not None and binds_after is not None and binds_before != binds_after:
        notes.append(f"binding engine changed: {display_engine(binds_before)} -> {display_engine(binds_after)}")
    kernel = by_name.get("kernel_us")
    e2e, why, invisible = _end_to_end(kernel, by_name.get("roofline_us"), by_name.get("sustained_fps"), binds_after)
    tb, ta = _tallest_transfer(rb), _tallest_transfer(ra)
    if (not invisible and kernel is not None and kernel.verdict in (Verdict.FASTER, Verdict.SLOWER) and tb and ta
            and kernel.before is not None and kernel.after is not None
            and kernel.before < tb[1] and kernel.after < ta[1]):  # fmt: skip
        notes.append(
            f"kernel below the tallest transfer bar before ({U.us_per_frame(kernel.before, 2, unit=False)} < "
            f"{display_engine(tb[0])} {U.us_per_frame(tb[1], 2)}) and after ({U.us_per_frame(kernel.after, 2, unit=False)} "
            f"< {display_engine(ta[0])} {U.us_per_frame(ta[1], 2, unit=False)}): "
            "the kernel change cannot move this roofline"
        )
    over = next((m.overstated for m in mt if m.overstated is not None), None)
    if over is not None:
        notes.append(over.note)
    for tag, procs in (("before", procs_b), ("after", procs_a)):
        slowed = [f"process {p.index + 1}: {', '.join(p.clock.slowed)}" for p in procs or ()
                  if p.clock is not None and p.clock.slowed]
        if slowed:
            notes.append(f"the GPU was slowed while the {tag} processes ran ({'; '.join(slowed)}): NVML's "
                         "throttle reasons")
    return RowComparison(label, presence, streams, cluster, same_session, mt, binds_before, binds_after, e2e, why,
                         invisible, mismatches, tuple(notes), gpu_b, gpu_a, scope,
                         scope_text(scope, gpu_b, gpu_a, unit_b if both_units else None,
                                    unit_a if both_units else None), unit_b, unit_a)  # fmt: skip


# ----------------------------------------------------------------------------- the whole


def _env_warnings(a: SideInfo, b: SideInfo, allow_different_gpu: bool, per_row: bool = False
                  ) -> list[CompareWarning]:
    """The stamps' warnings. ``per_row``: rows carry their own GPU (a --gpus or merged dir), so the
    GPUs are judged per row pair (:func:`_gpu_pair_warnings`), not from the dirs' gpu_name."""
    out: list[CompareWarning] = []
    if not per_row and a.gpu_name is not None and b.gpu_name is not None and a.gpu_name != b.gpu_name:
        if not allow_different_gpu:
            raise InputError(
                f"the two results dirs come from different GPUs: {a.gpu_name!r} ({a.name}) vs {b.gpu_name!r} ({b.name})",
                hint="pass --allow-different-gpu to compare them anyway",
            )
        out.append(CompareWarning(f"different GPUs: {a.gpu_name!r} before, {b.gpu_name!r} after",
                                  "per-engine times of different GPUs measure the GPUs as much as the change"))  # fmt: skip
    for side in (a, b):
        if side.gpu_name is None and not per_row:
            out.append(CompareWarning(f"env.json of {side.name} names no GPU (gpu_name): cannot check it matches"))
    if a.driver is not None and b.driver is not None and a.driver != b.driver:
        out.append(CompareWarning(f"driver differs: {a.driver} before, {b.driver} after",
                                  "re-run both on one driver to compare the code alone"))  # fmt: skip
    for side in (a, b):
        if side.git_dirty:
            rev = f" at {side.git_rev}" if side.git_rev else ""
            out.append(CompareWarning(f"{side.name} was measured from a dirty tree{rev}: the code is not exactly known",
                                      "commit, then re-run clusterbench probe"))  # fmt: skip
    return out


def _gpu_pair_warnings(pairs: Sequence[tuple[str, GpuIdentity, GpuIdentity]], allow_different_gpu: bool
                       ) -> list[CompareWarning]:
    """Per row pair: two GPU models are refused (InputError, exit 2) unless ``allow_different_gpu``,
    which names them in a warning instead; a pair whose GPU is unknown on a side is named too."""
    differ = [(lb, gb, ga) for lb, gb, ga in pairs if gpus_differ(gb, ga)]
    out: list[CompareWarning] = []
    if differ:
        named = "; ".join(f"{lb}: {gb.text} before, {ga.text} after" for lb, gb, ga in differ[:_NAMED_ROWS])
        more = f"; and {len(differ) - _NAMED_ROWS} more" if len(differ) > _NAMED_ROWS else ""
        what = f"{len(differ)} row pair(s) come from different GPUs: {named}{more}"
        if not allow_different_gpu:
            raise InputError(what, hint="pass --allow-different-gpu to compare them anyway (each such row is then "
                                        "marked '* across gpu' and left out of --gate), or compare rows of one GPU")
        out.append(CompareWarning(f"different GPUs: {what}",
                                  "per-engine times of different GPUs measure the GPUs as much as the change"))
    unknown = [lb for lb, gb, ga in pairs if gb.name is None or ga.name is None]
    if unknown:
        out.append(CompareWarning(f"no GPU recorded for {', '.join(unknown)} on one side (row gpu_name, env.json "
                                  "gpu_name): cannot check they match"))
    return out


def _samples(row: ResultRow, metric: str) -> tuple[float, ...]:
    m = row.measurement(metric)
    return () if m is None else m.samples


def _auto_across(pairs: list[tuple[ResultRow, ResultRow]]) -> set[str]:
    """AUTO_ACROSS_COLUMNS in which every row pair differs, from one value to one other value."""
    out: set[str] = set()
    if not pairs:
        return out
    for col in AUTO_ACROSS_COLUMNS:
        vals = {(config_value(rb, col), config_value(ra, col)) for rb, ra in pairs}
        if len(vals) == 1:
            vb, va = next(iter(vals))
            if vb is not None and va is not None and vb != va:
                out.add(col)
    return out


def compare_results(
    before: ResultSet,
    after: ResultSet,
    *,
    allow_different_gpu: bool = False,
    across: Iterable[str] = (),
    level: float = LEVEL,
    floors: Mapping[str, FloorSet] | None = None,
    min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT,
) -> Comparison:
    """Compare every row of two results dirs, pairing rows by key.

    ``across`` names config columns the pair is compared across on purpose (see the module
    docstring); columns in which the whole dir differs are added automatically. ``floors``: the floor
    sets by GPU model; a row pair is judged with those of its before GPU, and a model without one with
    the default bounds. ``min_effect_pct``: the least change called a change. Raises InputError for
    different GPUs unless ``allow_different_gpu``, for an unknown column and for a minimum effect that is
    not a number >= 0."""
    if isinstance(min_effect_pct, bool) or not isinstance(min_effect_pct, (int, float)) or not (
            math.isfinite(min_effect_pct) and min_effect_pct >= 0):
        raise InputError(f"--min-effect must be a percentage >= 0, got {min_effect_pct!r}",
                         hint=f"use --min-effect {DEFAULT_MIN_EFFECT_PCT:g} (the default)")
    wanted = tuple(across)
    unknown = [c for c in wanted if c not in CONFIG_COLUMNS]
    if unknown:
        raise InputError(f"--across {unknown[0]}: not a config column",
                         hint=f"pick from {', '.join(CONFIG_COLUMNS)}")  # fmt: skip
    a, b = side_info(before), side_info(after)
    keys = list(before.keys) + [k for k in after.keys if before.row(k) is None]
    pairs = [(rb, ra) for k in keys if (rb := before.row(k)) is not None and (ra := after.row(k)) is not None]
    per_row = any(r.gpu_name is not None for res in (before, after) for r in res.rows)
    warnings = _env_warnings(a, b, allow_different_gpu, per_row)
    if per_row:  # before anything else is judged: a refusal comes first
        warnings += _gpu_pair_warnings([(rb.label, row_gpu(before, rb), row_gpu(after, ra)) for rb, ra in pairs],
                                       allow_different_gpu)
    for res in (before, after):
        if res.legacy:
            warnings.append(CompareWarning(
                f"{res.name} is a legacy aare-perf results dir (env.json without a version): gpu read as "
                "the GPU name; it records no sessions, tracer, transfer, pedestal mode, workload or repeats",
                "those are not checked; its multi-stream transfer figures are not comparable",
            ))  # fmt: skip
        warnings.extend(CompareWarning(n) for n in res.notes)
    optional = tuple(
        n for n in OPTIONAL_METRICS if any(r.number(n) is not None for res in (before, after) for r in res.rows)
    )
    metric_names = TIME_METRICS + optional
    auto = _auto_across(pairs)
    across_all = frozenset(wanted) | frozenset(auto)
    used: dict[str | None, FloorSet] = {}

    def floors_of(k: RowKey) -> FloorSet:
        rb = before.row(k)
        if rb is None or after.row(k) is None:
            return SEED_FLOORS  # a one-sided row judges nothing: no floors used, none reported
        name = row_gpu(before, rb).name
        if name not in used:
            used[name] = (floors or {}).get(name or "") or seed_floors(name)
        return used[name]

    rows = tuple(
        _compare_row(k, before.row(k), after.row(k), before, after, (a, b), metric_names, across_all, level,
                     allow_different_gpu, floors_of(k), float(min_effect_pct))
        for k in keys
    )  # fmt: skip
    if same_dirs(before, after):
        warnings.insert(0, CompareWarning(
            f"{a.name} and {b.name} are one results dir (the same {'path' if _same_path(before, after) else 'rows'}): "
            "every figure is identical", "compare the dir against another probe of the build"))
    for fs in used.values():
        if fs.seed and any(m.provisional for r in rows for m in r.metrics):
            warnings.append(CompareWarning(
                f"{fs.text}", "clusterbench floors DIR DIR [...] makes a GPU's floors from A/A dirs of one build"))
    by_col: dict[tuple[str, str, str, bool], list[str]] = {}
    for r in rows:
        for mm in r.mismatches:
            by_col.setdefault((mm.column, mm.before, mm.after, mm.across), []).append(r.label)
    for (col, vb, va, is_across), labs in by_col.items():
        if col == GPU_COLUMN:
            continue  # said once, per row pair, by the GPU warnings
        where = "every row" if len(labs) == len(pairs) else ", ".join(labs)
        affected = "trace figures" if AFFECTS[col] == frozenset(TRACE_METRICS) else "every metric"
        if is_across:
            how = "on request (--across)" if col in wanted else "because the whole dir differs in it"
            warnings.append(CompareWarning(
                f"comparing across {col}: {vb} → {va} ({where}), {how}; those deltas are labelled 'across {col}'",
                "they measure that difference as well as any change of the code",
            ))  # fmt: skip
        else:
            hint = f"pass --across {col} to see the deltas across that difference"
            if col == "frames":
                hint += "; short runs (about 2000 frames) do not let the clocks ramp: the kernel reads about 7 % slow"
            warnings.append(CompareWarning(f"{col} differs: {vb} → {va} ({where}): {affected} NOT COMPARABLE", hint))
    drifting = [r.label for r in rows if any(m.code is Reason.SESSION_DRIFT for m in r.metrics)]
    beyond = [r.label for r in rows if any(m.cross_session for m in r.metrics)]
    if drifting or beyond:
        bounds = sorted({m.bound_pct for r in rows for m in r.metrics if m.bound_pct is not None})
        ids = f"{a.session_id or 'unknown'} vs {b.session_id or 'unknown'}"
        said = []
        if drifting:
            said.append(f"{', '.join(drifting)}: multi-stream transfer deltas within the drift bound are NOT "
                        "COMPARABLE")
        if beyond:
            said.append(f"{', '.join(beyond)}: beyond it, judged and marked cross-session")
        warnings.append(CompareWarning(
            f"{'; '.join(said)} (sessions {ids}; drift bound {', '.join(U.pct_of(x, None) for x in bounds)}); "
            f"{SESSION_DEFINITION}",
            "probe both sides in one session (--session NAME) to judge multi-stream transfers by their floor",
        ))  # fmt: skip
    standing = [(r.label, m) for r in rows for m in r.metrics if m.floor_stand_in == "narrower"]
    if standing:
        labels = ", ".join(dict.fromkeys(lb for lb, _ in standing))
        scopes = " and ".join(dict.fromkeys(SCOPE_TEXT[m.pair_scope] for _, m in standing if m.pair_scope))
        used_scopes = " and ".join(dict.fromkeys(SCOPE_TEXT[m.floor_scope] for _, m in standing if m.floor_scope))
        warnings.append(CompareWarning(
            f"no {scopes} floors for {labels}: the {used_scopes} floors stand in, and they may be too low for pairs "
            "measured further apart",
            "measure floors from A/A dirs of several machines of the model: clusterbench floors DIR DIR [...] "
            "(docs/compare.md, 'Floors')"))
    provisional = sorted({m.floor_scope for r in rows for m in r.metrics
                          if m.floor_provisional and m.floor_scope and not m.floor_default})
    if provisional:
        warnings.append(CompareWarning(
            f"provisional floors judged ({', '.join(SCOPE_TEXT[s] for s in provisional)}: made of fewer than "
            f"{MIN_PAIRS} A/A pairs): a verdict near them is weak", "probe more A/A dirs and run clusterbench floors"))
    unsteady = [r.label for r in rows if any(m.code is Reason.UNSTEADY for m in r.metrics)]
    if unsteady:
        warnings.append(CompareWarning(
            f"{', '.join(unsteady)}: sustained FPS NOT COMPARABLE (unsteady): a side's sustained runs did not reach "
            "steady state", "probe those configs again on an idle GPU (clusterbench probe --only LABEL)"))
    one_sided = [r.label for r in rows if r.presence is not Presence.BOTH]
    if one_sided:
        warnings.append(CompareWarning(f"labels found in one dir only: {', '.join(one_sided)}"))
    differing = {mm.column for r in rows for mm in r.mismatches if mm.across}
    across_used = tuple(c for c in (*CONFIG_COLUMNS, GPU_COLUMN) if c in differing)
    return Comparison(a, b, metric_names, rows, tuple(warnings), across_used, level, tuple(used.values()),
                      float(min_effect_pct))


def _same_path(a: ResultSet, b: ResultSet) -> bool:
    if a.path is None or b.path is None:
        return False
    try:
        return a.path.resolve() == b.path.resolve()
    except OSError:
        return False


def same_dirs(a: ResultSet, b: ResultSet) -> bool:
    """Two loaded results dirs that are one (pure but for resolving paths): the same path, or a copy (the same
    session and the same rows, every figure and sample equal)."""
    if _same_path(a, b):
        return True
    sa = a.env.session_id if a.env is not None else None
    sb = b.env.session_id if b.env is not None else None
    return sa is not None and sa == sb and bool(a.rows) and a.rows == b.rows


def judge_gate(comparison: Comparison, pct: float, metrics: Sequence[str] = DEFAULT_GATE_METRICS,
               unjudged_pass: bool = False) -> GateOutcome:
    """``--gate PCT``: figures that got worse by more than ``pct`` percent and beyond the noise, and those that
    could not be judged.

    Judges each of ``metrics`` (compared metric names; by default the end-to-end figures, the roofline and
    sustained FPS) of each row, like for like: a SLOWER verdict (beyond the noise, or beyond the drift bound)
    that is worse by more than ``pct`` % fails (as shares of each unit's link where the verdict judged it so);
    SAME never does, provisional or not. A figure it cannot judge is ``not_checked`` with why: NOT_COMPARABLE
    (another session's drift, an unsteady side, a config difference), measured on one side only, a row in one
    dir only, or a figure across a difference; so is (``too_coarse``) a SAME whose noise is above both ``pct``
    and the minimum effect: a regression of ``pct`` % would have read SAME. A gated metric neither dir measured
    is left out and named in ``not_measured``. ``unjudged_pass``: what it could not judge does not fail it
    (``--gate-unjudged pass``)."""
    failures: list[GateFailure] = []
    judged: list[tuple[str, str]] = []
    skipped: list[tuple[str, str, str]] = []
    coarse: list[tuple[str, str, str]] = []
    measured = tuple(n for n in metrics if n in comparison.metric_names)
    resolution = max(pct, comparison.min_effect_pct)
    for r in comparison.rows:
        for name in measured:
            m = r.metric(name)
            if m.before is None and m.after is None:
                continue  # neither side has the figure (an aggregate row's trace columns): nothing to judge
            if not m.judged:
                why = m.code.value if m.code is not Reason.ONE_SIDED else m.reason
                skipped.append((r.label, name, why))
                continue
            if m.across:
                skipped.append((r.label, name, f"across {', '.join(m.across)}"))
                continue
            judged.append((r.label, name))
            change = m.change_pct
            if m.verdict is Verdict.SLOWER and change is not None:
                worse = -change if name in HIGHER_IS_BETTER else change
                if worse > pct:
                    assert m.before is not None and m.after is not None
                    failures.append(GateFailure(r.label, name, m.before, m.after, m.unit, change, worse, m.noise))
                    continue
            if m.verdict is Verdict.SAME and m.code is not Reason.IDENTICAL and m.noise_pct is not None and (
                    m.noise_pct > resolution + 1e-9):
                coarse.append((r.label, name, f"noise ±{U.pct_of(m.noise_pct, 2)} above the gate's "
                                              f"{U.pct_of(pct, None)}"))
    return GateOutcome(pct, measured, tuple(failures), tuple(judged), tuple(skipped),
                       tuple(n for n in metrics if n not in measured), tuple(coarse), unjudged_pass)
