"""The records that cross a seam: one per concept, shared by both sides.

- :class:`WorkloadResult`: what any workload process (ours or a command) writes to ``{result}``
  and the probe reads back. Versioned JSON (``schema``, ``version``); docs/workloads.md.
- :class:`SustainedFps`: the untraced FPS of one config, summarised from a sustained result.
- :class:`ProbeRecord`: one probes.csv row; the probes.csv columns are its fields, in order.
- :class:`ConfigEntry` and :class:`EnvRecord`: env.json, versioned (``schema_version``).

Records reject impossible values when they are built. ``None`` means "not measured".
Pure: no I/O, no GPU, no UI.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import typing
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from clusterbench.errors import InputError, WorkloadProtocolError

JsonValue = object  # a value json.dumps accepts

# --------------------------------------------------------------------------- the workload result

RESULT_SCHEMA = "clusterbench.workload-result"
# The workload result record's version. History:
#   1 (clusterbench 0.1): the CuPy child's own JSON, "kind" pass|sustained, wall_s / fps lists; no schema key.
#   2: one record for every workload (schema, version, mode, frames, pass_s, clusters_found,
#      clusters_dropped, pedestal_s, finder, kernel_sha256, data_source, extra).
RESULT_VERSION = 2
RESULT_MODES = ("pass", "sustained")
RESULT_REQUIRED = ("schema", "version", "mode", "frames", "pass_s", "clusters_found")


def _is_int(x: object) -> bool:
    return type(x) is int


def _is_number(x: object) -> bool:
    return type(x) in (int, float) and math.isfinite(x)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class WorkloadResult:
    """One workload run: ``frames`` per timed pass and each pass's seconds (one in ``pass`` mode).

    ``clusters_found``/``clusters_dropped`` are of the last timed pass; ``clusters_dropped`` is None
    when the finder cannot tell (aare drops clusters beyond its cap silently)."""

    mode: str
    frames: int
    pass_s: tuple[float, ...]
    clusters_found: int
    clusters_dropped: int | None = None
    pedestal_s: float | None = None
    finder: str | None = None
    kernel_sha256: Mapping[str, str] | None = None
    data_source: str | None = None
    extra: Mapping[str, JsonValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problem = _result_problem(self)
        if problem:
            raise WorkloadProtocolError(f"result record: {problem}",
                                        hint="docs/workloads.md lists the result record's fields")

    @property
    def fps(self) -> tuple[float, ...]:
        """Frames per second of each timed pass."""
        return tuple(self.frames / s for s in self.pass_s)

    def to_json(self) -> dict[str, JsonValue]:
        return {"schema": RESULT_SCHEMA, "version": RESULT_VERSION, "mode": self.mode, "frames": self.frames,
                "pass_s": list(self.pass_s), "clusters_found": self.clusters_found,
                "clusters_dropped": self.clusters_dropped, "pedestal_s": self.pedestal_s, "finder": self.finder,
                "kernel_sha256": None if self.kernel_sha256 is None else dict(self.kernel_sha256),
                "data_source": self.data_source, "extra": dict(self.extra)}

    @classmethod
    def from_json(cls, doc: object) -> "WorkloadResult":
        """Parse a result record; WorkloadProtocolError names the first missing or bad field."""
        def bad(problem: str) -> WorkloadProtocolError:
            return WorkloadProtocolError(f"result record: {problem}",
                                         hint="docs/workloads.md lists the result record's fields")

        if not isinstance(doc, Mapping):
            raise bad(f"must be a JSON object, got {type(doc).__name__}")
        missing = [k for k in RESULT_REQUIRED if k not in doc]
        if missing:
            raise bad(f"missing field{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}")
        if doc["schema"] != RESULT_SCHEMA:
            raise bad(f"field 'schema' must be {RESULT_SCHEMA!r}, got {doc['schema']!r}")
        if doc["version"] != RESULT_VERSION:
            raise bad(f"field 'version' is {doc['version']!r}; this clusterbench reads version {RESULT_VERSION}")
        unknown = sorted(set(doc) - {f.name for f in dataclasses.fields(cls)} - {"schema", "version"})
        if unknown:
            raise bad(f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                      "(put your own values under 'extra')")
        pass_s = doc["pass_s"]
        if not isinstance(pass_s, list):
            raise bad(f"field 'pass_s' must be a list of seconds, got {pass_s!r:.60}")
        sha = doc.get("kernel_sha256")
        if sha is not None and not (isinstance(sha, Mapping) and all(isinstance(v, str) for v in sha.values())):
            raise bad(f"field 'kernel_sha256' must map file names to sha256 strings, got {sha!r:.60}")
        extra = doc.get("extra") or {}
        if not isinstance(extra, Mapping):
            raise bad(f"field 'extra' must be an object, got {extra!r:.60}")
        return cls(mode=doc["mode"], frames=doc["frames"], pass_s=tuple(pass_s),  # type: ignore[arg-type]
                   clusters_found=doc["clusters_found"], clusters_dropped=doc.get("clusters_dropped"),  # type: ignore[arg-type]
                   pedestal_s=doc.get("pedestal_s"), finder=doc.get("finder"),  # type: ignore[arg-type]
                   kernel_sha256=None if sha is None else {str(k): str(v) for k, v in sha.items()},
                   data_source=doc.get("data_source"), extra=dict(extra))  # type: ignore[arg-type]


def _result_problem(r: WorkloadResult) -> str | None:
    if r.mode not in RESULT_MODES:
        return f"field 'mode' must be 'pass' or 'sustained', got {r.mode!r}"
    if not _is_int(r.frames) or r.frames < 1:
        return f"field 'frames' must be an integer >= 1, got {r.frames!r}"
    if not r.pass_s or not all(_is_number(s) and s > 0 for s in r.pass_s):
        return f"field 'pass_s' must list one or more pass times in seconds > 0, got {list(r.pass_s)!r:.80}"
    if r.mode == "pass" and len(r.pass_s) != 1:
        return f"field 'pass_s' must hold exactly one time in 'pass' mode, got {len(r.pass_s)}"
    if not _is_int(r.clusters_found) or r.clusters_found < 0:
        return f"field 'clusters_found' must be an integer >= 0, got {r.clusters_found!r}"
    if r.clusters_dropped is not None and (not _is_int(r.clusters_dropped) or r.clusters_dropped < 0):
        return f"field 'clusters_dropped' must be an integer >= 0 or null, got {r.clusters_dropped!r}"
    if r.pedestal_s is not None and not (_is_number(r.pedestal_s) and r.pedestal_s >= 0):
        return f"field 'pedestal_s' must be seconds >= 0 or null, got {r.pedestal_s!r}"
    for name in ("finder", "data_source"):
        v = getattr(r, name)
        if v is not None and not isinstance(v, str):
            return f"field {name!r} must be a string or null, got {v!r:.60}"
    return None


@dataclass(frozen=True, slots=True)
class SustainedFps:
    """Untraced FPS over R timed passes: median, spread = half the min-max range, input rate."""

    fps: tuple[float, ...]
    median_fps: float
    spread_fps: float
    min_fps: float
    max_fps: float
    repeats: int
    input_gbps: float | None  # median FPS x input bytes per frame / 1e9

    @classmethod
    def from_fps(cls, fps: Sequence[float], input_bytes_per_frame: int | None = None) -> "SustainedFps":
        values = tuple(float(v) for v in fps)
        if not values:
            raise WorkloadProtocolError("the sustained run reported no timed pass",
                                        hint="a sustained result lists one pass_s per timed pass")
        med = float(statistics.median(values))
        gbps = med * input_bytes_per_frame / 1e9 if input_bytes_per_frame else None
        return cls(values, med, (max(values) - min(values)) / 2.0, min(values), max(values), len(values), gbps)


# --------------------------------------------------------------------------- probes.csv rows

# probes.csv version, recorded in env.json as probes_csv_version. History:
#   1 (clusterbench 0.1): 38 columns, label .. timestamp (no version recorded: read as 1).
#   2: adds workload (cupy | command) and finder (what the workload's result record names) after transfer.
PROBES_CSV_VERSION = 2


@dataclass(frozen=True, slots=True)
class ProbeRecord:
    """One probes.csv row. The first 11 fields are the contract every row carries. All ``*_us`` are
    µs per frame; ``*_duty`` fractions 0..1; ``*_gbps`` GB/s (1e9 B/s); ``*_spread`` half the min-max
    range over repeats, in the metric's unit; ``*_fps`` frames per second."""

    label: str
    cluster: int
    cap: int
    streams: int
    batch: int
    frames: int
    kernel_us: float | None = None
    h2d_us: float | None = None
    d2h_us: float | None = None
    roofline_us: float | None = None
    binds: str | None = None
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
    efficiency: float | None = None
    sustained_fps: float | None = None
    sustained_fps_spread: float | None = None
    sustained_repeats: int | None = None
    sustained_gbps: float | None = None
    fps_efficiency: float | None = None
    profiler_overhead: float | None = None
    clusters_per_frame: float | None = None
    dropped_clusters: int | None = None
    pedestal_dtype: str = "float32"
    pedestal: str = "frozen"
    transfer: str = "copy"
    workload: str = "cupy"
    finder: str | None = None
    tracer: str = "none"
    trace: str | None = None
    session: str = ""
    timestamp: str = ""

    def __post_init__(self) -> None:
        for name, kind in _COLUMN_KINDS.items():
            v = getattr(self, name)
            if v is None:
                if not _COLUMN_OPTIONAL[name]:
                    raise ValueError(f"probe row column {name} may not be empty")
                continue
            ok = (type(v) is int if kind is int else isinstance(v, str) if kind is str
                  else type(v) in (int, float) and math.isfinite(v))
            if not ok:
                raise ValueError(f"probe row column {name} must be {kind.__name__}, got {v!r}")
            if kind is float and type(v) is int:
                object.__setattr__(self, name, float(v))
        if not self.label:
            raise ValueError("a probe row needs a non-empty label")

    def to_json(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in PROBE_COLUMNS}

    @classmethod
    def from_json(cls, values: Mapping[str, object]) -> "ProbeRecord":
        """From typed values (a loaded row); columns a version-1 file lacks take their defaults."""
        known = {k: v for k, v in values.items() if k in _COLUMN_KINDS}
        if known.get("workload") is None:
            known.pop("workload", None)
        return cls(**known)  # type: ignore[arg-type]


def _column_kinds() -> tuple[dict[str, type], dict[str, bool]]:
    hints = typing.get_type_hints(ProbeRecord)
    kinds: dict[str, type] = {}
    optional: dict[str, bool] = {}
    for f in dataclasses.fields(ProbeRecord):
        args = typing.get_args(hints[f.name]) or (hints[f.name],)
        kinds[f.name] = next(a for a in args if a is not type(None))
        optional[f.name] = type(None) in args
    return kinds, optional


_COLUMN_KINDS, _COLUMN_OPTIONAL = _column_kinds()
PROBE_COLUMNS: tuple[str, ...] = tuple(_COLUMN_KINDS)
INT_COLUMNS = frozenset(k for k, t in _COLUMN_KINDS.items() if t is int)
TEXT_COLUMNS = frozenset(k for k, t in _COLUMN_KINDS.items() if t is str)
REQUIRED_COLUMNS: tuple[str, ...] = PROBE_COLUMNS[:11]


# --------------------------------------------------------------------------- env.json

# env.json format version. History:
#   1 (clusterbench 0.1.0): first version.
#   2: adds probes_csv_version and workloads at the top, and per config workload, command and finder
#      (configs.<label>); every version-1 key is kept with its meaning. Version 1 still loads.
ENV_SCHEMA_VERSION = 2
ENV_VERSIONS_READ = (1, 2)


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """env.json ``configs.<label>``: what one config's last run was."""

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
    sustained_fps: tuple[float, ...] | None = None
    extra: Mapping[str, JsonValue] = field(default_factory=dict)  # keys of other versions, kept as they are

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = dict(self.extra)
        out.update({"session": self.session, "tracer": self.tracer, "frames": self.frames,
                    "params": dict(self.params), "workload": self.workload,
                    "command": None if self.command is None else list(self.command), "finder": self.finder,
                    "trace": self.trace, "clocks": None if self.clocks is None else dict(self.clocks),
                    "kernel_sha256": None if self.kernel_sha256 is None else dict(self.kernel_sha256),
                    "sustained_fps": None if self.sustained_fps is None else list(self.sustained_fps)})
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, JsonValue]) -> "ConfigEntry":
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        command = doc.get("command")
        sustained = doc.get("sustained_fps")
        sha = doc.get("kernel_sha256")
        return cls(
            session=doc.get("session"), tracer=doc.get("tracer"), frames=doc.get("frames"),  # type: ignore[arg-type]
            params=dict(doc.get("params") or {}),  # type: ignore[call-overload]
            workload=str(doc.get("workload") or "cupy"),
            command=tuple(command) if isinstance(command, list) else None,
            finder=doc.get("finder"), trace=doc.get("trace"),  # type: ignore[arg-type]
            clocks=dict(doc["clocks"]) if isinstance(doc.get("clocks"), Mapping) else None,  # type: ignore[call-overload]
            kernel_sha256=dict(sha) if isinstance(sha, Mapping) else None,
            sustained_fps=tuple(float(v) for v in sustained) if isinstance(sustained, list) else None,  # type: ignore[arg-type]
            extra={k: v for k, v in doc.items() if k not in names})


@dataclass(frozen=True, slots=True)
class EnvRecord:
    """env.json: where, on what and with what the results dir was made."""

    tool_version: str
    session_id: str
    created_utc: str
    argv: tuple[str, ...] = ()
    host: str | None = None
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
    configs: Mapping[str, ConfigEntry] = field(default_factory=dict)
    probes_csv_version: int = PROBES_CSV_VERSION
    schema_version: int = ENV_SCHEMA_VERSION

    @property
    def clocks(self) -> dict[str, JsonValue]:
        return {label: None if e.clocks is None else dict(e.clocks) for label, e in self.configs.items()}

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "configs":
                v = {label: e.to_json() for label, e in v.items()}
            elif f.name == "argv":
                v = list(v)
            elif isinstance(v, Mapping):
                v = dict(v)
            out[f.name] = v
        out["clocks"] = self.clocks
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, JsonValue]) -> "EnvRecord":
        """Read env.json of version 1 or 2. InputError for any other version."""
        version = doc.get("schema_version")
        if version not in ENV_VERSIONS_READ:
            raise InputError(f"env.json has schema_version {version!r}; this clusterbench reads "
                             f"{', '.join(map(str, ENV_VERSIONS_READ))}",
                             hint="use the clusterbench version that wrote it, or re-run clusterbench probe")
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in doc.items() if k in names and k not in ("configs", "argv")}
        raw_configs = doc.get("configs") or {}
        configs = {str(label): ConfigEntry.from_json(e) for label, e in raw_configs.items()  # type: ignore[union-attr]
                   if isinstance(e, Mapping)}
        values["probes_csv_version"] = doc.get("probes_csv_version", 1)  # version 1 dirs did not say
        values.setdefault("tool_version", "")
        values.setdefault("session_id", "")
        values.setdefault("created_utc", "")
        return cls(argv=tuple(doc.get("argv") or ()), configs=configs, **values)  # type: ignore[arg-type]
