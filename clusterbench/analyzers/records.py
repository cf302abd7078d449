"""The records of a trace analysis: per-engine figures, the roofline, one (process, device) group,
the whole trace, and the rule findings. Frozen and JSON-serialisable; every analyzer module and
renderer reads these, and none of them imports another analyzer to get a record (pure).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterbench import __version__

# history: 1 = first release (the JSON contract of docs/facts.md plus extra keys);
#          2 = adds the `graph` engine, `rules` (fired rules with codes), per-engine
#              `headroom_factor`, `streams`/`implausible_*`, group `n_streams`, `engine_streams`,
#              `sync_copy_*`, `pageable_*`, `idle_gap*`, `graph_trace`, and top-level `what_if`.
JSON_VERSION = 2


@dataclass(frozen=True, slots=True)
class Finding:
    """A rule that fired on one group."""

    code: str
    title: str
    anchor: str | None  # the nsys expert-system rule it mirrors, if any
    threshold: float | None
    value: float | None  # the trace's figure compared against the threshold
    message: str  # the note, as printed under "why:"

    def to_json(self) -> dict:
        return {
            "code": self.code,
            "title": self.title,
            "anchor": self.anchor,
            "threshold": self.threshold,
            "value": self.value,
            "message": self.message,
        }



@dataclass(frozen=True, slots=True)
class EngineStats:
    engine: str
    busy_ns: int
    count: int
    duty: float | None  # busy / window; None when the window is empty
    us_per_frame: float | None  # None when frames are unknown
    bytes: int | None = None  # copies and memsets only
    gbps: float | None = None  # bytes / busy_ns = GB/s (1e9 bytes/s)
    headroom: float | None = None  # (roofline busy - busy) / busy; None for the roofline engine
    headroom_us_per_frame: float | None = None
    streams: int = 0  # distinct streams with a record of this engine inside the window
    implausible_count: int = 0  # records left out: bytes / duration above the engine's ceiling
    implausible_bytes: int = 0
    implausible_max_gbps: float | None = None
    implausible_limit_gbps: float | None = None

    @property
    def headroom_factor(self) -> float | None:
        """roofline busy / busy: how many times its busy time this engine could take before it binds."""
        return None if self.headroom is None else 1.0 + self.headroom

    def to_json(self) -> dict:
        out: dict = {"busy_ns": self.busy_ns, "count": self.count, "us_per_frame": self.us_per_frame, "duty": self.duty}
        if self.bytes is not None:
            out["bytes"] = self.bytes
            out["gbps"] = self.gbps
        out["headroom"] = self.headroom
        out["headroom_factor"] = self.headroom_factor
        out["headroom_us_per_frame"] = self.headroom_us_per_frame
        out["streams"] = self.streams
        if self.implausible_count:
            out["implausible_count"] = self.implausible_count
            out["implausible_bytes"] = self.implausible_bytes
            out["implausible_max_gbps"] = self.implausible_max_gbps
            out["implausible_limit_gbps"] = self.implausible_limit_gbps
        return out


@dataclass(frozen=True, slots=True)
class Roofline:
    engine: str | None  # None when nothing ran inside the window
    busy_ns: int
    us_per_frame: float | None
    fps: float | None

    def to_json(self) -> dict:
        return {"engine": self.engine, "busy_ns": self.busy_ns, "us_per_frame": self.us_per_frame, "fps": self.fps}


@dataclass(frozen=True, slots=True)
class StreamStats:
    stream: int
    engines: dict[str, EngineStats]
    any_busy_ns: int

    def to_json(self) -> dict:
        return {
            "stream": self.stream,
            "any_busy_ns": self.any_busy_ns,
            "engines": {k: v.to_json() for k, v in self.engines.items()},
        }


@dataclass(frozen=True, slots=True)
class GroupAnalysis:
    """Everything measured for one (process, device) group."""

    pid: int
    device: int
    gpu_name: str | None
    frames: int | None
    frames_source: str | None
    window_ns: int
    window_source: str
    window_ranges: int  # NVTX ranges used (0 = activity span)
    engines: dict[str, EngineStats]
    roofline: Roofline
    any_busy_ns: int
    idle_ns: int
    overlap_ns: int
    host_sync_ns: int
    host_sync_calls: tuple[str, ...]
    serialization: float | None  # sum of engine busy / any busy; 1.0 = nothing overlapped
    measured_us_per_frame: float | None  # window / frames
    efficiency: float | None  # roofline us_per_frame / measured us_per_frame
    streams: tuple[StreamStats, ...] | None = None
    notes: tuple[str, ...] = ()
    n_streams: int = 0  # distinct streams with GPU work inside the window
    engine_streams: dict[str, int] = field(default_factory=dict)  # per engine with work, its stream count
    sync_copy_ns: int = 0  # union of synchronous copy calls (cudaMemcpy, cuMemcpy*), clipped to the window
    sync_copy_calls: int = 0
    sync_copy_names: tuple[str, ...] = ()
    pageable_count: int = 0  # copies inside the window with pageable host memory
    pageable_bytes: int = 0
    pageable_known: bool = True  # the export has srcKind/dstKind
    idle_gap_count: int = 0  # idle gaps of at least rules.GAP_NS
    idle_gap_ns: int = 0
    longest_idle_ns: int = 0
    graph_trace: str | None = None  # "graph", "node" or None (see TraceData.graph_trace)
    findings: tuple[Finding, ...] = ()
    window_intervals: tuple = field(default=(), compare=False, repr=False)  # the window as (starts, ends) ns

    def to_json(self) -> dict:
        out = {
            "pid": self.pid,
            "device": self.device,
            "gpu_name": self.gpu_name,
            "frames": self.frames,
            "frames_source": self.frames_source,
            "window_ns": self.window_ns,
            "window_source": self.window_source,
            "window_ranges": self.window_ranges,
            "engines": {k: v.to_json() for k, v in self.engines.items()},
            "roofline": self.roofline.to_json(),
            "any_busy_ns": self.any_busy_ns,
            "idle_ns": self.idle_ns,
            "overlap_ns": self.overlap_ns,
            "host_sync_ns": self.host_sync_ns,
            "host_sync_calls": list(self.host_sync_calls),
            "serialization": self.serialization,
            "measured_us_per_frame": self.measured_us_per_frame,
            "efficiency": self.efficiency,
            "n_streams": self.n_streams,
            "engine_streams": dict(self.engine_streams),
            "sync_copy_ns": self.sync_copy_ns,
            "sync_copy_calls": self.sync_copy_calls,
            "pageable_count": self.pageable_count if self.pageable_known else None,
            "pageable_bytes": self.pageable_bytes if self.pageable_known else None,
            "idle_gap_count": self.idle_gap_count,
            "idle_gap_ns": self.idle_gap_ns,
            "longest_idle_ns": self.longest_idle_ns,
            "graph_trace": self.graph_trace,
            "notes": list(self.notes),
            "rules": [f.to_json() for f in self.findings],
        }
        if self.streams is not None:
            out["streams"] = [s.to_json() for s in self.streams]
        return out


@dataclass(frozen=True, slots=True)
class TraceAnalysis:
    """The analysis of one trace. Attributes below ``primary`` describe the primary group."""

    trace: str
    nsys_version: str | None
    schema_version: str | None
    groups: tuple[GroupAnalysis, ...]
    primary: GroupAnalysis
    warnings: tuple[str, ...] = field(default=())
    graph_warning: str | None = None  # also in warnings; the table shows it in place
    what_if: Any = None  # a whatif.WhatIf for the primary group, when asked for

    # The primary group's figures, for callers that want one group (the probe).
    @property
    def pid(self) -> int:
        return self.primary.pid

    @property
    def device(self) -> int:
        return self.primary.device

    @property
    def gpu_name(self) -> str | None:
        return self.primary.gpu_name

    @property
    def frames(self) -> int | None:
        return self.primary.frames

    @property
    def frames_source(self) -> str | None:
        return self.primary.frames_source

    @property
    def window_ns(self) -> int:
        return self.primary.window_ns

    @property
    def window_source(self) -> str:
        return self.primary.window_source

    @property
    def engines(self) -> dict[str, EngineStats]:
        return self.primary.engines

    @property
    def roofline(self) -> Roofline:
        return self.primary.roofline

    @property
    def any_busy_ns(self) -> int:
        return self.primary.any_busy_ns

    @property
    def idle_ns(self) -> int:
        return self.primary.idle_ns

    @property
    def overlap_ns(self) -> int:
        return self.primary.overlap_ns

    @property
    def host_sync_ns(self) -> int:
        return self.primary.host_sync_ns

    @property
    def serialization(self) -> float | None:
        return self.primary.serialization

    @property
    def measured_us_per_frame(self) -> float | None:
        return self.primary.measured_us_per_frame

    @property
    def efficiency(self) -> float | None:
        return self.primary.efficiency

    @property
    def streams(self) -> tuple[StreamStats, ...] | None:
        return self.primary.streams

    @property
    def notes(self) -> tuple[str, ...]:
        return self.primary.notes

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.primary.findings

    def to_json(self) -> dict:
        out = {
            "version": JSON_VERSION,
            "tool": f"clusterbench {__version__}",
            "trace": self.trace,
            "nsys_version": self.nsys_version,
            "export_schema_version": self.schema_version,
        }
        out.update(self.primary.to_json())
        if len(self.groups) > 1:
            out["groups"] = [g.to_json() for g in self.groups]
        if self.what_if is not None:
            out["what_if"] = self.what_if.to_json()
        out["warnings"] = list(self.warnings)
        return out
