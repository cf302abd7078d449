"""Steady state for sustained runs (pure): warm-ups that do not count, runs long enough to average out short
jitter, and a stop rule that can say "not steady".

pyperf is the anchor: a value is one run of enough loops to last at least ``min_time`` (100 ms), and the
first runs of a worker are warm-ups, never counted. Here a *run* is one or more passes of a config's frames
back to back, its figure the frames over the passes' time; the first run (one pass) is a warm-up that
also calibrates how many passes a run takes (:func:`passes_per_run`). Runs then follow until the last
``counted`` ones agree: their range (max - min) over their median is at most ``spread``
(:func:`judge`). A run that comes before those is a warm-up. The loop ends there, or at a cap of runs or
of seconds (:func:`stop_reason`); a result at a cap is written all the same, marked unsteady.

A program run whole (a program probed as it is) follows the same rule over whole runs: no warm-up run
is forced (its own start-up is inside each run), and at most :data:`EXEC_EXTRA_RUNS` runs beyond the
counted ones are made.

Pure: no I/O, no GPU, no UI; the clock is the caller's (:func:`run_until_steady`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from clusterbench.model import units
from clusterbench.model.stats import median

# pyperf's min_time: a run lasts at least 100 ms, so that jitter shorter than that averages out inside it.
RUN_TARGET_S = 0.1
# pyperf's default warm-ups: the first run (which also calibrates the passes per run) never counts.
MIN_WARMUPS = 1
# The counted runs may span at most 1.5 % of their median. Measured on a freshly started H200 (tests/data/steady,
# runs of two 8,000-frame passes, last 5 runs): 3x3 on 1 stream spans at most 0.55 % from the first run on;
# 3x3 on 4 streams spans at most 1.5 % once the machine has settled (every window of its later series), but
# 1.5 % in only 6 % of the windows of its first 12 s on the fresh machine, when the link's throughput wanders
# (151k to 156k FPS, dips to 125k). 1 % would call the settled 4-stream runs unsteady a third of the time.
STEADY_SPREAD = 0.015
# Runs (warm-ups included) of one sustained measurement at most; with 100 ms runs the time cap binds first.
MAX_RUNS = 40
# Seconds of runs (warm-ups included) of one process at most, once the counted runs are there: make run's plan
# gives each of its four configs three processes of at most 0.8 s of runs each, about 6 runs of 110-135 ms
# (docs/probe.md, "Time to an answer"), so that four configs at their caps still answer within 30 s.
MAX_S = 0.8
# A run of one pass of the smallest config lasts about 50 µs per frame x frames: never more passes than this.
MAX_PASSES_PER_RUN = 1000
# A program run whole: the counted runs and at most this many more (each run is a whole program run, often
# seconds; a warm-up of seconds is inside each of them already).
EXEC_EXTRA_RUNS = 2
# A program run whole is noisier (its start-up, its own timer): its counted runs may span 2 %.
EXEC_STEADY_SPREAD = 0.02

REASONS = ("steady", "max_runs", "max_s", "fixed")


@dataclass(frozen=True, slots=True)
class SteadyRule:
    """When a sustained measurement stops: the last ``counted`` runs agree within ``spread`` (their range
    over their median), after at least ``min_warmups`` warm-up runs; or ``max_runs`` runs, or ``max_s``
    seconds of runs, were made. ``target_s``: how long a run should last. ``fixed``: make exactly
    ``min_warmups + counted`` runs, of ``passes`` passes each when given (the GPUs of a concurrent round run
    the same plan, so that they run together)."""

    counted: int = 5
    spread: float = STEADY_SPREAD
    min_warmups: int = MIN_WARMUPS
    max_runs: int = MAX_RUNS
    max_s: float | None = MAX_S  # None: no time cap
    target_s: float = RUN_TARGET_S
    fixed: bool = False
    passes: int | None = None

    def __post_init__(self) -> None:
        for name in ("counted", "max_runs"):
            v = getattr(self, name)
            if type(v) is not int or v < 1:
                raise ValueError(f"a steady rule's {name} must be an integer >= 1, got {v!r}")
        if type(self.min_warmups) is not int or self.min_warmups < 0:
            raise ValueError(f"a steady rule's min_warmups must be an integer >= 0, got {self.min_warmups!r}")
        for name in ("spread", "max_s", "target_s"):
            v = getattr(self, name)
            if v is None and name == "max_s":
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"a steady rule's {name} must be a number >= 0, got {v!r}")
        if self.passes is not None and (type(self.passes) is not int or self.passes < 1):
            raise ValueError(f"a steady rule's passes must be an integer >= 1 or None, got {self.passes!r}")

    @property
    def least_runs(self) -> int:
        return self.min_warmups + self.counted

    def to_json(self) -> dict[str, object]:
        return {"counted": self.counted, "spread": self.spread, "min_warmups": self.min_warmups,
                "max_runs": self.max_runs, "max_s": self.max_s, "target_s": self.target_s, "fixed": self.fixed,
                "passes": self.passes}

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> "SteadyRule":
        """ValueError names what is wrong."""
        if not isinstance(doc, Mapping):
            raise ValueError(f"a steady rule must be a JSON object, got {type(doc).__name__}")
        unknown = sorted(set(doc) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"a steady rule has unknown field(s) {', '.join(unknown)}")
        return cls(**doc)  # type: ignore[arg-type]


def whole_runs_rule(counted: int) -> SteadyRule:
    """The rule for a program run whole: no forced warm-up, at most EXEC_EXTRA_RUNS runs more."""
    return SteadyRule(counted=counted, spread=EXEC_STEADY_SPREAD, min_warmups=0, max_runs=counted + EXEC_EXTRA_RUNS,
                      max_s=None, target_s=0.0)


@dataclass(frozen=True, slots=True)
class Run:
    """One run: its figure (``value``: frames per second over its passes; a program run whole: the figure
    it gave), how long its passes took (``seconds``; None for a figure read from a program's output), its
    ``passes``, when it started (seconds after the first run started), and ``meta``: how its figure was
    read (JSON values: the line a program printed, the conversion of its unit ...)."""

    value: float
    seconds: float | None = None
    passes: int = 1
    started_s: float = 0.0
    meta: Mapping[str, object] = field(default_factory=dict)  # how the figure was read (a printed line ...)

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)) or not (
                math.isfinite(self.value) and self.value > 0):
            raise ValueError(f"a run's value must be a finite number > 0, got {self.value!r}")
        if self.seconds is not None and (isinstance(self.seconds, bool) or not isinstance(self.seconds, (int, float))
                                         or not (math.isfinite(self.seconds) and self.seconds > 0)):
            raise ValueError(f"a run's seconds must be > 0, got {self.seconds!r}")
        object.__setattr__(self, "meta", dict(self.meta))

    def to_json(self) -> dict[str, object]:
        out = {"value": self.value, "seconds": self.seconds, "passes": self.passes, "started_s": self.started_s}
        if self.meta:
            out["meta"] = dict(self.meta)
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> "Run":
        if not isinstance(doc, Mapping):
            raise ValueError(f"a run must be a JSON object, got {type(doc).__name__}")
        meta = doc.get("meta") or {}
        if not isinstance(meta, Mapping):
            raise ValueError(f"a run's meta must be a JSON object, got {meta!r:.60}")
        passes, started = doc.get("passes", 1), doc.get("started_s", 0.0)
        if type(passes) is not int or passes < 1:
            raise ValueError(f"a run's passes must be an integer >= 1, got {passes!r}")
        if isinstance(started, bool) or not isinstance(started, (int, float)):
            raise ValueError(f"a run's started_s must be a number, got {started!r}")
        return cls(doc.get("value"), doc.get("seconds"), passes, float(started), dict(meta))  # type: ignore[arg-type]


def spread_of(values: Sequence[float]) -> float:
    """The range of ``values`` over their median (0 for fewer than two)."""
    if len(values) < 2:
        return 0.0
    m = median(values)
    return (max(values) - min(values)) / m if m > 0 else math.inf


def passes_per_run(first_pass_s: float, rule: SteadyRule) -> int:
    """Passes per run so that a run lasts at least ``rule.target_s``, from the first (one-pass) run."""
    if rule.passes is not None:
        return rule.passes
    if not first_pass_s > 0 or rule.target_s <= first_pass_s:
        return 1
    return min(MAX_PASSES_PER_RUN, math.ceil(rule.target_s / first_pass_s))


def stop_reason(runs: Sequence[Run], elapsed_s: float, rule: SteadyRule) -> str | None:
    """Why to stop after ``runs`` (``elapsed_s`` seconds since the first began), or None to make another:
    ``steady`` (the last counted runs agree), ``max_runs``, ``max_s`` (another run like the last would pass
    the time cap) or ``fixed`` (a fixed plan is done). Never before ``min_warmups + counted`` runs."""
    n = len(runs)
    if n < rule.least_runs:
        return None
    if rule.fixed:
        return "fixed"
    if spread_of([r.value for r in runs[-rule.counted:]]) <= rule.spread:
        return "steady"
    if n >= rule.max_runs:
        return "max_runs"
    last = runs[-1].seconds or 0.0
    if rule.max_s is not None and elapsed_s + last > rule.max_s:
        return "max_s"
    return None


@dataclass(frozen=True, slots=True)
class Steadiness:
    """The verdict on a sustained measurement's runs: whether it was ``steady`` (the counted runs agree
    within the rule's spread; None: not judged, with one counted run), the counted runs' ``values``, the
    ``warmups`` before them and how long they took (``warmup_s``: from the first run's start to the first
    counted run's), the counted runs' ``spread``, why the runs stopped (``reason``), every run, and the
    rule."""

    steady: bool | None
    values: tuple[float, ...]
    warmups: int
    warmup_s: float
    spread: float
    reason: str
    runs: tuple[Run, ...]
    rule: SteadyRule = field(default_factory=SteadyRule)

    def to_json(self) -> dict[str, object]:
        return {"steady": self.steady, "warmups": self.warmups, "warmup_s": self.warmup_s, "spread": self.spread,
                "reason": self.reason, "rule": self.rule.to_json(), "runs": [r.to_json() for r in self.runs]}

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> "Steadiness":
        """A verdict as a workload wrote it: re-judged from its runs and rule, so that a record cannot claim
        a steadiness its runs do not show. ValueError names what is wrong."""
        if not isinstance(doc, Mapping):
            raise ValueError(f"a steadiness must be a JSON object, got {type(doc).__name__}")
        raw = doc.get("runs")
        if not isinstance(raw, list) or not raw:
            raise ValueError("a steadiness needs its runs (a non-empty list)")
        rule = SteadyRule.from_json(doc.get("rule") or {})  # type: ignore[arg-type]
        reason = doc.get("reason")
        if reason not in REASONS:
            raise ValueError(f"a steadiness's reason must be one of {', '.join(REASONS)}, got {reason!r}")
        return judge(tuple(Run.from_json(r) for r in raw), rule, str(reason))  # type: ignore[arg-type]

    def message(self, what: str) -> str:
        """One sentence on an unsteady measurement, with what to do."""
        why = {"max_runs": f"after {len(self.runs)} runs (the cap)",
               "max_s": f"after {units.seconds(sum(r.seconds or 0.0 for r in self.runs), 2)} of runs (the cap)"}
        return (f"{what} did not reach a steady state: its last {len(self.values)} runs spread "
                f"{units.pct(self.spread)} of their median, more than the {units.pct(self.rule.spread)} allowed, "
                f"{why.get(self.reason, '')}; the figure is written, marked unsteady")


STEADY_HINT = ("probe it again on a quieter machine (nothing else on its GPU or CPUs), with a longer run (more "
               "--frames) or more runs (--repeat)")


def judge(runs: Sequence[Run], rule: SteadyRule, reason: str | None = None) -> Steadiness:
    """The counted runs (the last ``rule.counted``), the warm-ups before them, and whether the counted
    ones agree (pure). ``reason``: why the runs stopped (default: :func:`stop_reason` at the end, or
    ``steady``/``max_runs`` by the verdict)."""
    runs = tuple(runs)
    if not runs:
        raise ValueError("a steadiness needs at least one run")
    k = min(rule.counted, len(runs))
    counted, warm = runs[-k:], runs[:-k]
    values = tuple(r.value for r in counted)
    spread = spread_of(values)
    agree = spread <= rule.spread and len(runs) >= rule.least_runs
    if reason is None:
        reason = "fixed" if rule.fixed else ("steady" if agree else "max_runs")
    # one counted run cannot show that runs agree: not judged
    steady = None if len(values) < 2 else agree
    # the warm-up's time: from the first run's start to the first counted run's (the gaps between runs too)
    warmup_s = 0.0
    if warm:
        warmup_s = counted[0].started_s - warm[0].started_s
        if not warmup_s > 0:
            warmup_s = sum(r.seconds or 0.0 for r in warm)
    return Steadiness(steady, values, len(warm), warmup_s, spread, reason, runs, rule)


def run_until_steady(run_passes: Callable[[int], float], frames: int, rule: SteadyRule,
                     clock: Callable[[], float]) -> Steadiness:
    """Runs until ``rule`` stops them: ``run_passes(n)`` runs ``n`` passes of ``frames`` frames back to back
    and returns their seconds (issue to last result, without what comes between passes); ``clock()`` is
    seconds on any monotonic clock. The first run is one pass (a warm-up that calibrates the passes per
    run); each run's figure is its frames over its passes' seconds."""
    t0 = clock()
    seconds = run_passes(1)
    runs = [Run(frames / seconds, seconds, 1, 0.0)]
    per_run = passes_per_run(seconds, rule)
    while (reason := stop_reason(runs, clock() - t0, rule)) is None:
        started = clock() - t0
        seconds = run_passes(per_run)
        runs.append(Run(per_run * frames / seconds, seconds, per_run, started))
    return judge(runs, rule, reason)
