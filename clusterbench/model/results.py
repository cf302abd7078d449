"""The results of a results dir, one record per concept, shared by the probe that writes them, the store
that reads and writes the files (:mod:`clusterbench.io.results`), compare and the renderers.

- :class:`RowKey`: what a row is of: (config, gpu, role, variant). Its ``label`` is for display only.
- :class:`ResultRow`: one probes.csv row (the columns are its fields, with units in their names) and
  the measurements behind it (their raw samples).
- :class:`ConfigEntry` and :class:`EnvRecord`: env.json. Blocks this version does not know are kept
  verbatim (``EnvRecord.blocks``), never dropped.
- :class:`ResultSet`: a results dir, its env and its rows. :meth:`ResultSet.merge` is the one way two
  sets combine: a re-probe into a dir, a ``--gpus`` probe, a campaign merge.

The file formats and their versions are the store's; docs/results-format.md describes them.
Records reject impossible values when they are built (ValueError; the store turns it into an input
error naming the file). ``None`` means "not measured" (or "not recorded"). Pure: no I/O, no UI.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import numbers
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from clusterbench.model.engines import ENGINES
from clusterbench.model.jsontypes import check_json, json_types, json_value_words
from clusterbench.model.measurement import Measurement
from clusterbench.model.unit import UnitRecord

JsonValue = object  # a value json.dumps accepts

# A sustained FPS above the roofline of its own trace by more than this share (or its spread, if larger) cannot be
# right: no pipeline runs faster than its tallest bar (docs/probe.md, "The host bar without the profiler").
ROOFLINE_EXCESS = 0.02

KEY_SEPARATOR = "@"  # joins a key's parts in its display label; a config label or a variant never holds it
FORMAT_CLUSTERBENCH = "clusterbench"
# The original aare probe scripts' results dirs (2026-09 and before): probes.csv with the 11 contract
# columns, env.json with the stamp keys gpu, driver, pedestal_dtype, git_rev, dirty and no version.
FORMAT_LEGACY = "legacy aare-perf"
LEGACY_VERSION = 0  # the format version a legacy aare-perf dir reads as


# --------------------------------------------------------------------------- the row key


class RowRole(str, enum.Enum):
    """What a row of a ``--gpus`` probe measured. A row of one GPU probed alone has no role."""

    SOLO = "solo"  # one GPU alone, before the concurrent run
    CONCURRENT = "concurrent"  # one GPU while all the selected GPUs run
    AGGREGATE = "aggregate"  # the node: all selected GPUs summed

    def __str__(self) -> str:
        return self.value


def _name_problem(what: str, value: object) -> str | None:
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        return f"a row key's {what} must be a non-empty name without surrounding spaces, got {value!r}"
    if KEY_SEPARATOR in value or "," in value:
        return f"a row key's {what} may not hold {KEY_SEPARATOR!r} or ',', got {value!r}"
    return None


@dataclass(frozen=True, slots=True)
class RowKey:
    """What a row is of: its ``config`` (the configs.toml label), the ``gpu`` index it ran on and its
    ``role`` (rows of a ``--gpus`` probe; the aggregate row has a role and no GPU), and the ``variant``
    (the partition or GPU type of a campaign over several). A results dir holds one row per key."""

    config: str
    gpu: int | None = None
    role: RowRole | None = None
    variant: str | None = None

    def __post_init__(self) -> None:
        problem = _name_problem("config", self.config)
        if problem is None and self.variant is not None:
            problem = _name_problem("variant", self.variant)
        if problem:
            raise ValueError(problem)
        if self.role is not None and not isinstance(self.role, RowRole):
            try:
                object.__setattr__(self, "role", RowRole(self.role))
            except ValueError:
                raise ValueError(f"a row key's role must be one of {', '.join(r.value for r in RowRole)}, "
                                 f"got {self.role!r}") from None
        if self.gpu is not None and (type(self.gpu) is not int or self.gpu < 0):
            raise ValueError(f"a row key's gpu must be a GPU index >= 0, got {self.gpu!r}")
        per_gpu = self.role in (RowRole.SOLO, RowRole.CONCURRENT)
        if per_gpu != (self.gpu is not None):
            raise ValueError(f"a {self.role or 'plain'} row key {'needs' if per_gpu else 'has no'} gpu, "
                             f"got gpu {self.gpu!r}")

    @property
    def label(self) -> str:
        """``3x3_s4``, ``3x3_s4@gpu0.solo``, ``3x3_s4@gpu1``, ``3x3_s4@all``, ``3x3_s4@gpu1@h100``: for display."""
        out = self.config
        if self.gpu is not None:
            out += f"{KEY_SEPARATOR}gpu{self.gpu}" + (".solo" if self.role is RowRole.SOLO else "")
        elif self.role is RowRole.AGGREGATE:
            out += f"{KEY_SEPARATOR}all"
        if self.variant is not None:
            out += f"{KEY_SEPARATOR}{self.variant}"
        return out

    @property
    def config_key(self) -> "RowKey":
        """The key of the config run this row belongs to (its env.json ``configs`` entry): no GPU, no role."""
        return RowKey(self.config, variant=self.variant)

    def to_json(self) -> dict[str, JsonValue]:
        return {"config": self.config, "gpu": self.gpu, "role": None if self.role is None else self.role.value,
                "variant": self.variant}

    @classmethod
    def from_json(cls, doc: Mapping[str, JsonValue]) -> "RowKey":
        if not isinstance(doc, Mapping):
            raise ValueError(f"a row key must be a JSON object, got {type(doc).__name__}")
        return cls(doc.get("config"), doc.get("gpu"), doc.get("role"), doc.get("variant"))  # type: ignore[arg-type]

    @classmethod
    def from_label(cls, label: str, variant: str | None = None) -> "RowKey":
        """The key a label of an older probes.csv packs: ``config[@gpuN[.solo]|@all][@variant]``.
        ``variant``, when the row names it, is the label's last part."""
        parts = label.split(KEY_SEPARATOR)
        if variant is not None and len(parts) > 1 and parts[-1] == variant:
            parts = parts[:-1]
        config, gpu, role, rest = parts[0], None, None, parts[1:]
        if rest and rest[0] == "all":
            role, rest = RowRole.AGGREGATE, rest[1:]
        elif rest and rest[0].startswith("gpu"):
            index, _, solo = rest[0][3:].partition(".")
            if index.isdigit() and solo in ("", "solo"):
                gpu, role, rest = int(index), RowRole.SOLO if solo else RowRole.CONCURRENT, rest[1:]
        if len(rest) > 1 or (rest and variant is not None):
            raise ValueError(f"label {label!r} is not config[@gpuN[.solo]|@all][@variant]")
        return cls(config, gpu, role, rest[0] if rest else variant)


# --------------------------------------------------------------------------- probes.csv rows


class RowValueError(ValueError):
    """An impossible value in a row; ``hint`` says how to mend it."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True, slots=True)
class ResultRow:
    """One probes.csv row. All ``*_us`` are µs per frame; ``*_duty`` fractions 0..1; ``*_gbps`` GB/s
    (1e9 B/s); ``*_spread`` half the min-max range over repeats, in the metric's unit; ``*_fps`` frames
    per second. ``extra``: columns this version does not know, kept as they are. ``measurements``: the
    raw samples behind figures of the row (the median of a ``sustained_fps`` measurement is the row's
    ``sustained_fps``)."""

    key: RowKey
    cluster: int
    cap: int
    streams: int
    batch: int
    frames: int
    kernel_us: float | None = None
    h2d_us: float | None = None
    d2h_us: float | None = None
    roofline_us: float | None = None
    binds: str | None = None  # the engine with the largest busy time: kernel, h2d, d2h, ...
    roofline_fps: float | None = None
    kernel_duty: float | None = None
    h2d_duty: float | None = None
    d2h_duty: float | None = None
    h2d_gbps: float | None = None
    d2h_gbps: float | None = None
    idle_us: float | None = None
    overlap_us: float | None = None
    host_sync_us: float | None = None
    serialization: float | None = None
    measured_us: float | None = None
    # the sum of the GPU engines' bars (µs per frame): what a pipeline whose engines take turns pays per frame
    # (one stream); the roofline (the tallest bar) is what overlapping streams pay
    serial_us: float | None = None
    efficiency: float | None = None
    sustained_fps: float | None = None
    sustained_fps_spread: float | None = None
    sustained_repeats: int | None = None
    # how many fresh processes the sustained figure came from (its samples are their medians); None: one
    # process, in a dir made before several (its samples are that process's repeats)
    sustained_processes: int | None = None
    sustained_gbps: float | None = None
    # where the sustained figure came from: result (the workload's result records), rate (the program's own
    # printed rate, untraced), wall (frames over the program's wall time between two printed markers),
    # wall-run (frames over its whole run, start-up included), trace (frames over the traced window, under
    # the profiler)
    sustained_source: str | None = None
    # whether the sustained runs reached a steady state (the counted runs agreed within the noise; None: not
    # known, an older row or one counted run), the warm-up runs before the counted ones and their seconds
    sustained_steady: bool | None = None
    sustained_warmups: int | None = None
    sustained_warmup_s: float | None = None
    fps_efficiency: float | None = None  # sustained_fps over the roofline without the profiler (roofline_untraced_us)
    profiler_overhead: float | None = None
    # the busiest launching thread's bar per frame as traced (under the profiler), its estimate without the
    # profiler and how that was made (calibrated: nsys's cost per call on this machine; rate-scaled: the
    # program's own untraced / traced rate); None: not estimated
    host_us: float | None = None
    host_untraced_us: float | None = None
    host_estimate: str | None = None
    # the roofline an untraced FPS is set against: the GPU bars as traced and the host bar without the
    # profiler (where it was estimated, else as traced), µs per frame; and why a sustained FPS stands above
    # a roofline, where it does beyond the noise
    roofline_untraced_us: float | None = None
    roofline_note: str | None = None
    # the program's own figures set against the trace (clusterbench.run.checks): agree, disagree or unchecked
    rate_check: str | None = None
    kernel_check: str | None = None
    clusters_per_frame: float | None = None
    dropped_clusters: int | None = None
    pedestal_dtype: str | None = None
    pedestal: str | None = None
    transfer: str | None = None
    workload: str | None = None
    processes: int | None = None  # (process, device) groups of the trace the figures aggregate
    finder: str | None = None
    tracer: str | None = None
    trace: str | None = None
    session: str | None = None
    timestamp: str | None = None
    error: str | None = None  # the config failed (a time limit, an exit status, a broken protocol): why, in one line
    # where the row was measured (rows of a --gpus probe or a campaign merge)
    gpu_name: str | None = None
    gpu_uuid: str | None = None
    host: str | None = None
    pinning: str | None = None  # how the GPU's child was pinned to its CPUs: numactl, sched_setaffinity, none
    # the aggregate row of a --gpus probe
    gpus: int | None = None  # how many GPUs ran at once
    gpu_min_fps: float | None = None
    gpu_min_index: int | None = None
    solo_gpu: int | None = None
    solo_fps: float | None = None
    scaling_efficiency: float | None = None  # summed FPS / (GPUs x solo FPS)
    # a campaign merge: the task that measured the row and its results dir, relative to the merged dir
    task: int | None = None
    source_dir: str | None = None
    # probe --what-binds (docs/probe.md, "The untraced frame"), measured without the profiler: the frame and the
    # busiest thread's own time per frame (the injection library's baseline processes), the untraced split's
    # sum, what binds by the delay test and each resource's slope (frame µs per µs of delay), and the
    # injection library's own cost (its baseline frame over the bare one, less 1)
    untraced_frame_us: float | None = None
    untraced_host_us: float | None = None
    untraced_split_us: float | None = None
    delay_binds: str | None = None
    delay_slope_host: float | None = None
    delay_slope_gpu: float | None = None
    delay_slope_link: float | None = None
    inject_cost: float | None = None
    extra: Mapping[str, object] = field(default_factory=dict)
    measurements: tuple[Measurement, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.key, RowKey):
            raise ValueError(f"a row's key must be a RowKey, got {self.key!r}")
        for name, kind in VALUE_KINDS.items():
            v = getattr(self, name)
            if v is None:
                if name in REQUIRED_FIELDS and self.workload != EXEC_WORKLOAD:
                    raise RowValueError(f"column {name} may not be empty")
                continue
            if kind is str:
                ok = isinstance(v, str)
            elif kind is bool:
                ok = isinstance(v, bool)
            elif isinstance(v, bool):
                ok = False
            elif kind is int:
                ok = isinstance(v, numbers.Integral)
            else:
                ok = isinstance(v, numbers.Real) and math.isfinite(v)
            if not ok:
                raise RowValueError(f"column {name} must be {kind.__name__}, got {v!r}")
            if kind not in (str, bool) and type(v) is not kind:  # an int where a float goes, a NumPy scalar
                object.__setattr__(self, name, kind(v))
        object.__setattr__(self, "extra", {k: v for k, v in self.extra.items() if v is not None})  # empty: absent
        object.__setattr__(self, "measurements", tuple(self.measurements))
        _check_values(self)

    @property
    def label(self) -> str:
        """The row's display label (from its key)."""
        return self.key.label

    def bar_excess(self) -> float | None:
        """How many times the untraced frame (1 / sustained FPS) the trace's tallest bar lasts, where that is
        beyond the noise (ROOFLINE_EXCESS, or the spread of the sustained figure if larger), else None. No
        pipeline runs faster than its tallest bar, so such a bar overstates its cost by at least this factor:
        the traced pass ran slower than the untraced runs. None as well where the row binds on the host (the
        profiler's own inflation, estimated apart: run/callcost), is a node's aggregate, or aggregates
        several processes."""
        if (self.binds is None or self.binds == HOST_BINDER or self.roofline_us is None or not self.sustained_fps
                or self.key.role is RowRole.AGGREGATE or (self.processes or 1) > 1):
            return None
        x = self.roofline_us * self.sustained_fps / 1e6
        noise = max(ROOFLINE_EXCESS, (self.sustained_fps_spread or 0.0) / self.sustained_fps)
        return x if x > 1.0 + noise else None

    def value(self, column: str) -> object:
        """The value of any probes.csv column (the key's too), or of an extra column; None when absent."""
        if column == "label":
            return self.label
        if column in KEY_COLUMNS:
            v = getattr(self.key, column)
            return v.value if isinstance(v, RowRole) else v
        if column in VALUE_KINDS:
            return getattr(self, column)
        return self.extra.get(column)

    def number(self, column: str) -> float | None:
        """A numeric column as float, or None when absent or not measured."""
        v = self.value(column)
        return None if v is None or isinstance(v, (str, bool)) else float(v)  # type: ignore[arg-type]

    def measurement(self, metric: str) -> Measurement | None:
        return next((m for m in self.measurements if m.metric == metric), None)

    def cells(self) -> dict[str, object]:
        """The probes.csv cells, in column order, then the extra columns: typed values, None for empty."""
        out = {c: self.value(c) for c in COLUMNS}
        out.update(self.extra)
        return out

    def to_json(self) -> dict[str, object]:
        out = self.cells()
        out["measurements"] = [m.to_json() for m in self.measurements]
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> "ResultRow":
        """From typed cell values (``config``, ``gpu``, ``role``, ``variant`` give the key; ``label`` is
        derived and ignored) and an optional ``measurements`` list; other keys become ``extra``."""
        key = RowKey(doc.get("config"), doc.get("gpu"), doc.get("role"), doc.get("variant"))  # type: ignore[arg-type]
        values = {k: v for k, v in doc.items() if k in VALUE_KINDS}
        extra = {k: v for k, v in doc.items() if k not in VALUE_KINDS and k not in KEY_COLUMNS
                 and k not in ("label", "measurements")}
        raw = doc.get("measurements") or []
        if not isinstance(raw, list):
            raise ValueError(f"a row's measurements must be a list, got {raw!r:.60}")
        return cls(key=key, **values, extra=extra,  # type: ignore[arg-type]
                   measurements=tuple(Measurement.from_json(m) for m in raw))  # type: ignore[arg-type]


def _kinds() -> dict[str, type]:
    hints = typing.get_type_hints(ResultRow)
    kinds: dict[str, type] = {}
    for f in dataclasses.fields(ResultRow):
        if f.name in ("key", "extra", "measurements"):
            continue
        args = typing.get_args(hints[f.name]) or (hints[f.name],)
        kinds[f.name] = next(a for a in args if a is not type(None))
    return kinds


# Every value field of a row and its kind (int, float or str); the columns of probes.csv in order;
# those every row carries (the contract: any probes.csv has at least these, label first).
VALUE_KINDS: dict[str, type] = _kinds()
# A row of an exec workload (a program probed as it is) may leave them empty: they are our finder's
# parameters, which such a program has only where its command takes them as placeholders.
REQUIRED_FIELDS = frozenset({"cluster", "cap", "streams", "batch", "frames"})
EXEC_WORKLOAD = "exec"
KEY_COLUMNS: tuple[str, ...] = ("config", "gpu", "role", "variant")
_CONTRACT_FIELDS = ("cluster", "cap", "streams", "batch", "frames", "kernel_us", "h2d_us", "d2h_us", "roofline_us",
                    "binds")
COLUMNS: tuple[str, ...] = ("label", *_CONTRACT_FIELDS, *KEY_COLUMNS,
                            *(f for f in VALUE_KINDS if f not in _CONTRACT_FIELDS))
REQUIRED_COLUMNS: tuple[str, ...] = COLUMNS[:11]
COLUMN_KINDS: dict[str, type] = {"label": str, "config": str, "gpu": int, "role": str, "variant": str, **VALUE_KINDS}
SPREAD_SUFFIX = "_spread"
# Columns that hold a measured time, rate or count: a value must be > 0 (an engine not measured is an
# empty cell, never 0). Every other numeric column (duty, idle, overlap, spreads, counts) must be >= 0.
POSITIVE_COLUMNS = frozenset({"kernel_us", "h2d_us", "d2h_us", "roofline_us", "measured_us", "roofline_fps",
                              "sustained_fps", "cluster", "cap", "streams", "batch", "frames", "gpus", "gpu_min_fps",
                              "solo_fps", "serial_us", "processes", "host_us", "host_untraced_us",
                              "roofline_untraced_us", "untraced_frame_us", "untraced_host_us", "untraced_split_us"})
# Columns that may be negative: a slope (noise around 0 reads below it) and a cost (a run with the library
# may come out faster than one without, within the noise).
SIGNED_COLUMNS = frozenset({"delay_slope_host", "delay_slope_gpu", "delay_slope_link", "inject_cost"})
# delay_binds: the resources that bind joined by '+', or shared, none, untested
DELAY_BINDS = re.compile(r"^(?:(?:host|gpu|link)(?:\+(?:gpu|link))*|shared|none|untested)$")
CHECK_STATUSES = ("agree", "disagree", "unchecked")
HOST_ESTIMATES = ("calibrated", "rate-scaled", "measured")  # how host_untraced_us was made
# What may bind: a GPU engine, or the host (a launching thread whose busy time per frame is the tallest bar)
HOST_BINDER = "host"  # a row whose roofline binds on the launching host thread's bar, not on a GPU engine
BINDERS: tuple[str, ...] = (*ENGINES, HOST_BINDER)


def _check_values(row: ResultRow) -> None:
    """Impossible values: RowValueError naming the column, with a hint."""
    label = row.label
    numeric = [(c, row.value(c)) for c, k in VALUE_KINDS.items() if k in (int, float)]
    numeric += [(c, v) for c, v in row.extra.items() if c.endswith(SPREAD_SUFFIX)]
    for column, v in numeric:
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise RowValueError(f"column {column}: expected a finite number, got {v!r}",
                                hint=f"fix the value by hand, or re-run clusterbench probe --only {row.key.config}")
        if column in POSITIVE_COLUMNS and v <= 0:  # type: ignore[operator]
            unit = " µs/frame" if column.endswith("_us") else (" FPS" if column.endswith("_fps") else "")
            what = "a time" if column.endswith("_us") else "a value"
            raise RowValueError(f"column {column}: {what} must be > 0, got {v!r}{unit}",
                                hint="an engine that was not measured is an empty cell; fix the value or re-run "
                                     f"clusterbench probe --only {row.key.config}")
        if v < 0 and column not in SIGNED_COLUMNS:
            raise RowValueError(f"column {column}: must be >= 0, got {v!r}",
                                hint=f"fix the value, or re-run clusterbench probe --only {row.key.config}")
    for column in ("rate_check", "kernel_check"):
        v = getattr(row, column)
        if v is not None and v not in CHECK_STATUSES:
            raise RowValueError(f"column {column}: must be one of {', '.join(CHECK_STATUSES)}, got {v!r}",
                                hint=f"re-run clusterbench probe --only {row.key.config}")
    if row.host_estimate is not None and row.host_estimate not in HOST_ESTIMATES:
        raise RowValueError(f"column host_estimate: must be one of {', '.join(HOST_ESTIMATES)}, got {row.host_estimate!r}",
                            hint=f"re-run clusterbench probe --only {row.key.config}")
    if row.delay_binds is not None and not DELAY_BINDS.match(row.delay_binds):
        raise RowValueError(f"column delay_binds: {row.delay_binds!r} is not host, gpu, link (joined by +), shared, "
                            "none or untested", hint=f"re-run clusterbench probe --what-binds --only {row.key.config}")
    if row.binds is not None and row.binds not in BINDERS:
        raise RowValueError(f"column binds: {row.binds!r} is not an engine (one of {', '.join(BINDERS)})",
                            hint="binds names the engine with the largest busy time; fix it or re-run "
                                 f"clusterbench probe --only {row.key.config}")
    metrics = [m.metric for m in row.measurements]
    if len(set(metrics)) != len(metrics):
        raise RowValueError(f"row {label!r} has two measurements of one metric: {', '.join(metrics)}")
    for m in row.measurements:
        if m.metric in VALUE_KINDS:
            v = getattr(row, m.metric)
            if v is None or not math.isclose(v, m.median, rel_tol=1e-9):
                raise RowValueError(f"column {m.metric}: {v!r} is not the median {m.median!r} of its samples")


# --------------------------------------------------------------------------- env.json


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """env.json ``configs``: what one config's last run was (per config and variant)."""

    session: str | None = None
    tracer: str | None = None
    frames: int | None = None
    params: Mapping[str, JsonValue] = field(default_factory=dict)
    workload: str = "cupy"
    command: tuple[str, ...] | None = None  # the command as configs.toml gives it, placeholders unexpanded
    finder: str | None = None
    trace: str | None = None
    clocks: Mapping[str, JsonValue] | None = None
    kernel_sha256: Mapping[str, str] | None = None
    # an exec workload (or any traced one): the window and frames the figures cover, the trace's CUDA-graph
    # mode and why, and every (process, device) group's own figures
    analysis: Mapping[str, JsonValue] | None = None
    sustained: Mapping[str, JsonValue] | None = None  # where the sustained figure came from, and how
    checks: Mapping[str, JsonValue] | None = None  # the program's own figures against the trace: verdicts
    error: Mapping[str, JsonValue] | None = None  # the config failed: message, hint, the output's tail, log
    phase_s: Mapping[str, float] | None = None  # wall seconds of each phase (trace, export, analyze, sustained)
    extra: Mapping[str, JsonValue] = field(default_factory=dict)  # keys this version does not know, kept

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = dict(self.extra)
        out.update({"session": self.session, "tracer": self.tracer, "frames": self.frames,
                    "params": dict(self.params), "workload": self.workload,
                    "command": None if self.command is None else list(self.command), "finder": self.finder,
                    "trace": self.trace, "clocks": None if self.clocks is None else dict(self.clocks),
                    "kernel_sha256": None if self.kernel_sha256 is None else dict(self.kernel_sha256)})
        for name in _ENTRY_BLOCKS:
            v = getattr(self, name)
            out[name] = None if v is None else dict(v)
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, JsonValue], block: str = "configs.<label>") -> "ConfigEntry":
        """From an env.json ``configs`` entry, the block ``block`` (``configs.3x3_s1``, named in errors).
        ValueError for a block of the wrong type."""
        if not isinstance(doc, Mapping):
            raise ValueError(f"env.json block '{block}' must be an object, got {json_value_words(doc)}")
        for name, hint in _ENTRY_JSON.items():
            if name in doc:
                check_json("env.json", f"{block}.{name}", doc[name], hint)
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        command = doc.get("command")
        sha = doc.get("kernel_sha256")
        return cls(
            session=doc.get("session"), tracer=doc.get("tracer"), frames=doc.get("frames"),  # type: ignore[arg-type]
            params=dict(doc.get("params") or {}),  # type: ignore[call-overload]
            workload=str(doc.get("workload") or "cupy"),
            command=tuple(command) if isinstance(command, list) else None,
            finder=doc.get("finder"), trace=doc.get("trace"),  # type: ignore[arg-type]
            clocks=dict(doc["clocks"]) if isinstance(doc.get("clocks"), Mapping) else None,  # type: ignore[call-overload]
            kernel_sha256=dict(sha) if isinstance(sha, Mapping) else None,
            **{name: dict(doc[name]) if isinstance(doc.get(name), Mapping) else None  # type: ignore[call-overload]
               for name in _ENTRY_BLOCKS},
            extra={k: v for k, v in doc.items() if k not in names and k not in KEY_COLUMNS})


# ConfigEntry's blocks that are JSON objects kept as they are (written once, in to_json and from_json)
_ENTRY_BLOCKS = ("analysis", "sustained", "checks", "error", "phase_s")
# The JSON type of each block of a config entry: its field's, and the key's parts
_ENTRY_JSON: dict[str, object] = {**json_types(ConfigEntry, skip=("extra",)), "config": str, "variant": str}


@dataclass(frozen=True, slots=True)
class EnvRecord:
    """env.json: where, on what and with what the results dir was made. ``configs``: per config (and
    variant) what its last run was. ``multi_gpu``: the last ``--gpus`` probe (its ``configs`` per config
    label); ``campaign``: the last campaign merge; ``hosts``: every host whose rows the dir holds, where
    more than one. ``blocks``: keys this version does not know, kept verbatim."""

    tool_version: str | None = None
    session_id: str | None = None
    created_utc: str | None = None
    argv: tuple[str, ...] = ()
    host: str | None = None
    hosts: tuple[str, ...] = ()
    git_rev: str | None = None
    git_dirty: bool | None = None
    gpu_name: str | None = None
    gpu_uuid: str | None = None
    driver: str | None = None
    cuda_driver: str | None = None
    max_sm_clock_mhz: int | None = None
    cuda_runtime: str | None = None
    cupy: str | None = None
    nsys_version: str | None = None
    # nsys's CUDA-graph trace mode for this dir's traces: 'node' or 'graph'; None when nsys did not trace
    nsys_cuda_graph_trace: str | None = None
    python: str | None = None
    pedestal_dtype: str | None = None  # comma-joined when a dir holds several (it should not)
    pedestal: str | None = None
    tracer: str | None = None
    workloads: str | None = None  # comma-joined workload kinds of this dir's configs
    kernel_sha256: JsonValue = None  # one {file: sha256} mapping, or a list of them, or None
    kernel_sources: Mapping[str, str] | None = None
    guard: Mapping[str, JsonValue] | None = None
    configs: Mapping[RowKey, ConfigEntry] = field(default_factory=dict)
    multi_gpu: Mapping[str, JsonValue] | None = None
    campaign: Mapping[str, JsonValue] | None = None
    # the unit the last probe ran on (its GPU on its host and boot, its link, PCIe, NUMA, CPU, clocks)
    unit: UnitRecord | None = None
    blocks: Mapping[str, JsonValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "argv", tuple(self.argv))
        if self.unit is not None and not isinstance(self.unit, UnitRecord):
            raise ValueError(f"env.json unit must be a unit record, got {type(self.unit).__name__}")
        object.__setattr__(self, "hosts", tuple(self.hosts))
        for name, kind in _ENV_SCALARS.items():
            v = getattr(self, name)
            if v is not None and (type(v) is not kind if kind is not str else not isinstance(v, str)):
                raise ValueError(f"env.json {name} must be {_KIND_WORDS[kind]} or null, got {v!r:.60}")
        for name in ("argv", "hosts"):
            if not all(isinstance(x, str) for x in getattr(self, name)):
                raise ValueError(f"env.json {name} must be a list of strings, got {list(getattr(self, name))!r:.60}")
        for key in self.configs:
            if not isinstance(key, RowKey) or key != key.config_key:
                raise ValueError(f"an env.json config entry is keyed by config and variant only, got {key!r}")
        clash = sorted(set(self.blocks) & set(_ENV_FIELDS))
        if clash:
            raise ValueError(f"env.json blocks may not reuse the known keys {', '.join(clash)}")

    def entry(self, key: RowKey) -> ConfigEntry | None:
        """The config entry of a row's config run."""
        return self.configs.get(key.config_key)

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = dict(self.blocks)
        for name in _ENV_FIELDS:
            v = getattr(self, name)
            if name == "configs":
                v = {k.label: {"config": k.config, "variant": k.variant, **e.to_json()} for k, e in v.items()}
            elif name == "unit":
                v = None if v is None else v.to_json()
            elif isinstance(v, tuple):
                v = list(v)
            elif isinstance(v, Mapping):
                v = dict(v)
            out[name] = v
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, JsonValue]) -> "EnvRecord":
        """From the current env.json shape (the store upgrades older versions first); unknown keys
        become ``blocks``."""
        for name, hint in _ENV_JSON.items():
            if name in doc:
                check_json("env.json", name, doc[name], hint)
        values: dict[str, object] = {k: v for k, v in doc.items() if k in _ENV_FIELDS}
        configs: dict[RowKey, ConfigEntry] = {}
        raw = doc.get("configs")
        if raw is not None and not isinstance(raw, Mapping):
            raise ValueError("env.json block 'configs' must be an object (config label: entry) or null, got "
                             + json_value_words(raw))
        for label, entry in (raw or {}).items():
            e = ConfigEntry.from_json(entry, f"configs.{label}")
            key = RowKey(entry.get("config"), variant=entry.get("variant"))  # type: ignore[arg-type]
            if key.label != label:
                raise ValueError(f"env.json configs.{label} names config {key.label!r}")
            configs[key] = e
        values["configs"] = configs
        unit = doc.get("unit")
        if unit is not None:
            try:
                values["unit"] = UnitRecord.from_json(unit)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"env.json block 'unit': {exc}") from None
        for name in ("argv", "hosts"):
            values[name] = tuple(doc.get(name) or ())  # type: ignore[arg-type]
        return cls(**values, blocks={k: v for k, v in doc.items() if k not in _ENV_FIELDS})  # type: ignore[arg-type]

    def merge(self, newer: "EnvRecord") -> "EnvRecord":
        """This env with ``newer`` written over it: newer's stamps (session, GPU, versions, guard ...),
        every config entry (newer's win), every host, the multi_gpu block's per-config summaries (newer's
        win) under newer's run description, newer's campaign block where it has one, every other block."""
        stamps = {name: getattr(newer, name) for name in _ENV_FIELDS
                  if name not in ("configs", "hosts", "multi_gpu", "campaign")}
        hosts = set(self.hosts or ((self.host,) if self.host else ())) | set(
            newer.hosts or ((newer.host,) if newer.host else ()))
        multi = newer.multi_gpu if self.multi_gpu is None else self.multi_gpu if newer.multi_gpu is None else {
            **newer.multi_gpu, "configs": {**_mapping(self.multi_gpu.get("configs")),
                                           **_mapping(newer.multi_gpu.get("configs"))}}
        return EnvRecord(**stamps,  # type: ignore[arg-type]
                         configs={**self.configs, **newer.configs},
                         hosts=tuple(sorted(hosts)) if self.hosts or newer.hosts or len(hosts) > 1 else (),
                         multi_gpu=multi, campaign=newer.campaign if newer.campaign is not None else self.campaign,
                         blocks={**self.blocks, **newer.blocks})


def _mapping(v: object) -> Mapping[str, JsonValue]:
    return v if isinstance(v, Mapping) else {}


_ENV_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(EnvRecord) if f.name != "blocks")
_KIND_WORDS = {str: "text", int: "an integer", bool: "true or false"}


def _env_scalars() -> dict[str, type]:
    """The fields of EnvRecord that hold one str, int or bool (or None)."""
    hints = typing.get_type_hints(EnvRecord)
    out = {}
    for name in _ENV_FIELDS:
        args = set(typing.get_args(hints[name])) - {type(None)}
        if len(args) == 1 and (kind := args.pop()) in _KIND_WORDS:
            out[name] = kind
    return out


_ENV_SCALARS = _env_scalars()
# The JSON type of each env.json block EnvRecord knows (configs is checked entry by entry)
_ENV_JSON: dict[str, object] = {**json_types(EnvRecord, skip=("blocks", "configs", "unit")),
                                "kernel_sha256": Mapping[str, str] | tuple[Mapping[str, str], ...]}


# --------------------------------------------------------------------------- a results dir


@dataclass(frozen=True, slots=True)
class ResultSet:
    """A results dir: its env.json and its probes.csv rows (with their measurements), in row order.

    ``path``, ``version_read`` and ``notes`` say where and from which format version a set was read,
    and what was noticed doing it (for warnings); a set built in memory has none."""

    env: EnvRecord | None = None
    rows: tuple[ResultRow, ...] = ()
    path: Path | None = None
    version_read: int | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", tuple(self.rows))
        seen: set[RowKey] = set()
        for r in self.rows:
            if r.key in seen:
                raise ValueError(f"a results set holds row {r.label!r} twice")
            seen.add(r.key)

    @property
    def name(self) -> str:
        return self.path.name if self.path is not None else ""

    @property
    def legacy(self) -> bool:
        return self.version_read == LEGACY_VERSION

    @property
    def format(self) -> str:
        return FORMAT_LEGACY if self.legacy else FORMAT_CLUSTERBENCH

    @property
    def keys(self) -> tuple[RowKey, ...]:
        return tuple(r.key for r in self.rows)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(r.label for r in self.rows)

    def row(self, key: RowKey | str) -> ResultRow | None:
        """The row of ``key`` (or of a display label)."""
        return next((r for r in self.rows if (r.key if isinstance(key, RowKey) else r.label) == key), None)

    def merge(self, newer: "ResultSet") -> "ResultSet":
        """The one way results combine: ``newer``'s rows replace this set's rows of the same key (in
        place) and the others stay; rows of new keys follow. The env is :meth:`EnvRecord.merge`'s."""
        by_key = {r.key: r for r in newer.rows}
        rows = [by_key.pop(r.key, r) for r in self.rows]
        rows.extend(r for r in newer.rows if r.key in by_key)
        env = newer.env if self.env is None else self.env if newer.env is None else self.env.merge(newer.env)
        return ResultSet(env, tuple(rows), self.path)
