"""Steps in a label's history: where a metric moved between builds of one config beyond the noise.

A series is one point per results dir holding the label (:func:`clusterbench.io.history.series`). Points
are taken in the order measured, per GPU model. Each point is set against:

- the **nearest earlier point of the same config** (the same STEP_CONFIG_COLUMNS but the finder, which
  names what the build chose, such as its kernel; and the same workload parameters of their env.json
  entries), where that point is of another build (git rev and dirty flag): the two rows are compared exactly
  as ``clusterbench compare`` compares two dirs (:func:`~clusterbench.compare.compare.compare_results`), a
  **change of build**. The nearest such point, not only the previous one: a history whose build changes
  came with config changes (a shorter smoke run, a probe with a delay in between) still judges each build
  against the last point of its own config;
- else, where the previous point ran a different config (a column that does not affect the metric, as
  compare's AFFECTS says, left out; any other workload parameter that differs, such as a delay added to the
  kernel), a **config change**: named (``pedestal frozen→tracking``), never judged, so never a step.

Both are **transitions**. A transition of the build whose verdict is FASTER or SLOWER is a **step**.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from clusterbench.compare.compare import (AFFECTS, COMPARED_METRICS, MetricDelta, Reason, Verdict, compare_metric,
                                         compare_results)
from clusterbench.compare.noise import FloorSet, seed_floors
from clusterbench.io.history import HistoryPoint
from clusterbench.model import units as U
from clusterbench.model.results import ResultRow, ResultSet

# The columns of what a point ran, in the order a config change names them. A step between rows that differ
# in one of them measures the config as much as the build: it is named, not judged.
STEP_CONFIG_COLUMNS: tuple[str, ...] = ("pedestal", "finder", "workload", "pedestal_dtype", "tracer", "streams",
                                        "transfer", "cluster", "cap", "batch", "frames")
CONFIG_CHANGED = "config_changed"  # the kind of a transition between two configs
BUILD_CHANGED = "build_changed"  # the kind of a transition between two builds of one config


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """A config column whose value differs between two consecutive points."""

    column: str
    before: str
    after: str

    @property
    def text(self) -> str:
        """``pedestal frozen→tracking``."""
        return f"{self.column} {self.before}→{self.after}"

    def to_json(self) -> dict[str, str]:
        return {"column": self.column, "before": self.before, "after": self.after}


# The columns that name what a build chose rather than what was asked of it: the finder (the kernel the build's
# default picks). Two points that differ only there ran one config on two builds.
BUILD_COLUMNS = frozenset({"finder"})


def config_changes(before: ResultRow, after: ResultRow, metric: str, params_before: Mapping[str, object] | None = None,
                   params_after: Mapping[str, object] | None = None, *,
                   skip: frozenset[str] = frozenset()) -> tuple[ConfigChange, ...]:
    """What two rows ran differently: the STEP_CONFIG_COLUMNS in which they differ, where both say (a column
    one side does not record is not a difference), leaving out a column that does not affect ``metric``
    (compare's AFFECTS: the tracer does not touch the untraced sustained FPS); then, where both rows' config
    entries are known (env.json ``configs.<label>.params``), every other workload parameter that differs,
    one side's missing parameter shown as not recorded (a delay added to the kernel: ``delay_us_per_frame
    –→1.7``)."""
    out = []
    for column in STEP_CONFIG_COLUMNS:
        if column in skip or metric in COMPARED_METRICS and column in AFFECTS and metric not in AFFECTS[column]:
            continue
        vb, va = before.value(column), after.value(column)
        if vb is None or va is None or vb == va:
            continue
        out.append(ConfigChange(column, str(vb), str(va)))
    if params_before is not None and params_after is not None:
        for name in sorted(set(params_before) | set(params_after)):
            vb, va = params_before.get(name), params_after.get(name)
            if name in STEP_CONFIG_COLUMNS or vb == va:
                continue
            out.append(ConfigChange(name, U.NOT_MEASURED if vb is None else str(vb),
                                    U.NOT_MEASURED if va is None else str(va)))
    return tuple(out)


def _params(p: HistoryPoint) -> Mapping[str, object] | None:
    """The workload parameters the point's config ran with (its env.json entry), None when not recorded."""
    entry = p.env.entry(p.row.key) if p.env is not None else None
    return None if entry is None else entry.params


@dataclass(frozen=True, slots=True)
class HistoryStep:
    """Two points of different builds of one config, or two consecutive points of different configs, and the
    verdict of ``metric`` between them. ``config``: what the two configs differ in (then the verdict is
    NOT_COMPARABLE, ``config_differs``); ``chose``: for a change of build, what the build chose differently
    (the finder: ``finder a→b``); ``skipped``: how many points lie between the two (other configs)."""

    before: HistoryPoint
    after: HistoryPoint
    delta: MetricDelta
    config: tuple[ConfigChange, ...] = ()
    chose: tuple[ConfigChange, ...] = ()
    skipped: int = 0

    @property
    def kind(self) -> str:
        """CONFIG_CHANGED or BUILD_CHANGED."""
        return CONFIG_CHANGED if self.config else BUILD_CHANGED

    @property
    def config_text(self) -> str:
        """``pedestal frozen→tracking, finder a→b``; "" for a change of build."""
        return ", ".join(c.text for c in self.config)

    @property
    def is_step(self) -> bool:
        """A change of build that cleared the noise: FASTER or SLOWER. A change of config never is."""
        return not self.config and self.delta.verdict in (Verdict.FASTER, Verdict.SLOWER)

    def to_json(self) -> dict[str, object]:
        d = self.delta
        return {"from": self.before.dir_name, "to": self.after.dir_name, "from_path": self.before.dir_path,
                "to_path": self.after.dir_path, "from_git_rev": self.before.git_rev, "to_git_rev": self.after.git_rev,
                "change": self.kind, "config_changed": [c.to_json() for c in self.config],
                "before": d.before, "after": d.after, "delta_pct": d.delta_pct, "unit": d.unit,
                "verdict": d.verdict.value, "reason_code": d.code.value, "reason": d.reason, "noise": d.noise,
                "noise_pct": d.noise_pct, "floor_pct": d.floor_pct, "bound_pct": d.bound_pct,
                "cross_session": d.cross_session, "across": list(d.across), "is_step": self.is_step,
                "build_chose": [c.to_json() for c in self.chose], "points_between": self.skipped}


@dataclass(frozen=True, slots=True)
class HistorySeries:
    label: str
    metric: str
    points: tuple[HistoryPoint, ...]
    transitions: tuple[HistoryStep, ...]  # every change of build or config between consecutive points of one GPU
    floors: tuple[FloorSet, ...]

    @property
    def steps(self) -> tuple[HistoryStep, ...]:
        return tuple(t for t in self.transitions if t.is_step)

    @property
    def config_changes(self) -> tuple[HistoryStep, ...]:
        return tuple(t for t in self.transitions if t.config)

    @property
    def build_changes(self) -> tuple[HistoryStep, ...]:
        return tuple(t for t in self.transitions if not t.config)

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.gpu_name or "GPU unknown" for p in self.points))


def _as_set(p: HistoryPoint) -> ResultSet:
    return ResultSet(p.env, (p.row,), Path(p.dir_path))


def judge_pair(before: HistoryPoint, after: HistoryPoint, metric: str, floors: FloorSet) -> MetricDelta:
    """``metric`` of two points, as compare judges it."""
    fmap = {} if floors.seed or floors.gpu_name is None else {floors.gpu_name: floors}
    if metric in COMPARED_METRICS:
        c = compare_results(_as_set(before), _as_set(after), floors=fmap)
        if metric in c.metric_names:
            return c.rows[0].metric(metric)
    same = before.session is not None and before.session == after.session
    return compare_metric(metric, before.value, after.value, streams=max(before.row.streams, after.row.streams),
                          floors=floors, same_session=same, spread_before=before.row.number(metric + "_spread"),
                          spread_after=after.row.number(metric + "_spread"), samples_before=before.samples,
                          samples_after=after.samples)


def same_config_before(points: Sequence[HistoryPoint], p: HistoryPoint, metric: str) -> tuple[HistoryPoint, int] | None:
    """The nearest of ``points`` (earlier ones, in order) that ran ``p``'s config and measured ``metric``, and how
    many points lie between them; None when there is none (pure). The finder is what a build chose, not the
    config: it does not tell two configs apart."""
    for k, q in enumerate(reversed(points)):
        if q.value is None:
            continue
        if not config_changes(q.row, p.row, metric, _params(q), _params(p), skip=BUILD_COLUMNS):
            return q, k
    return None


def history_series(label: str, metric: str, points: Sequence[HistoryPoint],
                   floors: Mapping[str, FloorSet] | None = None) -> HistorySeries:
    """The transitions and steps of ``points`` (one label, one metric), per GPU model (see the module
    docstring): each point against the nearest earlier point of its config where the build differs (judged
    with that model's floors, else the default bounds), else against the previous point where the config
    differs (named, never judged)."""
    used: dict[str | None, FloorSet] = {}
    earlier: dict[str | None, list[HistoryPoint]] = {}
    transitions: list[HistoryStep] = []
    for p in points:
        gpu = p.gpu_name
        fs = used.setdefault(gpu, (floors or {}).get(gpu or "") or seed_floors(gpu))
        seen = earlier.setdefault(gpu, [])
        prev = seen[-1] if seen else None
        same = same_config_before(seen, p, metric) if p.value is not None else None
        seen.append(p)
        if prev is None or prev.value is None and p.value is None:
            continue
        if same is not None and (same[0].build != p.build or p.git_dirty):
            q, between = same
            chose = config_changes(q.row, p.row, metric, skip=frozenset(STEP_CONFIG_COLUMNS) - BUILD_COLUMNS)
            transitions.append(HistoryStep(q, p, judge_pair(q, p, metric, fs), chose=chose, skipped=between))
            continue
        changed = config_changes(prev.row, p.row, metric, _params(prev), _params(p))
        if changed:
            why = (f"the config changed ({', '.join(c.text for c in changed)}): the value moved with it, not "
                   "judged as a change of the build")
            delta = compare_metric(metric, prev.value, p.value, not_comparable=(Reason.CONFIG_DIFFERS, why))
            transitions.append(HistoryStep(prev, p, delta, changed))
    return HistorySeries(label, metric, tuple(points), tuple(transitions), tuple(used.values()))


def floors_by_gpu(points: Sequence[HistoryPoint], roots: Sequence[Path]) -> dict[str, FloorSet]:
    """The floors file of each GPU model of ``points``, found under ``roots`` (see compare.floors)."""
    from clusterbench.compare.floors import find_floors

    out: dict[str, FloorSet] = {}
    for name in dict.fromkeys(p.gpu_name for p in points if p.gpu_name):
        fs = find_floors(name, roots)
        if not fs.seed:
            out[str(name)] = fs
    return out


def site_series(db_path: Path, roots: Sequence[Path], gpu: str | None = None, since: str | None = None,
                metrics: Sequence[str] = ("kernel_us", "h2d_us", "d2h_us", "roofline_us", "sustained_fps"),
                ) -> tuple[HistorySeries, ...]:
    """Every label of the history and every one of ``metrics`` measured for it, as series with their steps."""
    from clusterbench.io.history import labels, series

    out = []
    for label, measured in labels(db_path):
        for metric in (m for m in metrics if m in measured):
            pts = series(db_path, label, metric, gpu, since)
            if pts:
                out.append(history_series(label, metric, pts, floors_by_gpu(pts, roots)))
    return tuple(out)


def step_comparisons(db_path: Path, all_series: Sequence[HistorySeries], roots: Sequence[Path]
                     ) -> dict[tuple[str, str], object]:
    """The compare of the two results dirs of every step (as the history recorded them), by (before path,
    after path)."""
    from clusterbench.io.history import dir_results

    out: dict[tuple[str, str], object] = {}
    for s in all_series:
        for t in s.steps:
            k = (t.before.dir_path, t.after.dir_path)
            if k in out:
                continue
            before, after = dir_results(db_path, k[0]), dir_results(db_path, k[1])
            out[k] = compare_results(before, after, floors=floors_by_gpu((t.before, t.after), roots))
    return out
