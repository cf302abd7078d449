"""The records of a trace analysis, one per concept: the window, the frames, per-engine figures and
the roofline, the idle gaps and their causes, kernels by name, copies by size, the host threads,
the pacing, one (process, device) group, the whole trace, and the rule findings.

Frozen and JSON-serialisable (``to_json`` is written once, here); every analyzer module and renderer
reads these, and none of them imports another analyzer to get a record. ``None`` means "not
measured" (no frames, no API table, ...), never zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clusterbench import __version__
from clusterbench.model import units as U

# history: 1 = first release (the JSON contract of docs/facts.md plus extra keys);
#          2 = adds the `graph` engine, `rules` (fired rules with codes), per-engine
#              `headroom_factor`, `streams`/`implausible_*`, group `n_streams`, `engine_streams`,
#              `sync_copy_*`, `pageable_*`, `idle_gap*`, `graph_trace`, and top-level `what_if`;
#          3 = adds `window` (mode, bounds, what was cut), `frames_definition`, `gaps` (every idle gap
#              with its cause), `gap_summary`, `steady` (figures without set-up gaps), `kernels`, `copies`,
#              `host` (launching threads), `pacing`, `work_not_traced`; `roofline.engine` may be
#              "host" (with `roofline.thread`); `idle_gap_*` count every gap of at least the threshold;
#          4 = adds `critical_path` (its length split by resource, with and without set-up gaps, by thread and
#              kernel name) and `binding` (the one verdict from the tallest bar and the path); per thread
#              `work_*`, `blocked_*`, `blocked` (by cause) and `held_calls`; `host.blocked`, `host.blocked_ns`,
#              `host.linked`; the path in `what_if`. The roofline's host bar is the thread's work.
JSON_VERSION = 4

GAP_CAUSES = ("module_load", "alloc", "sync", "host", "profiler", "unknown")
SETUP_CAUSES = frozenset({"module_load", "alloc", "profiler"})  # not the pipeline's own loop


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


# --------------------------------------------------------------------------- window and frames


@dataclass(frozen=True, slots=True, eq=False)
class Window:
    """The part of the trace the figures cover: one or more disjoint intervals (absolute ns)."""

    mode: str  # "pass-range", "range", "ms", "span", "trimmed-span"
    source: str  # how it reads in the output ("NVTX range 'pass frames=10000'")
    starts_ns: np.ndarray
    ends_ns: np.ndarray
    ranges: int = 0  # NVTX ranges used (0: not a range window)
    span_start_ns: int | None = None  # the group's GPU activity span, for what was cut
    span_end_ns: int | None = None
    cut_before_ns: int = 0  # of the span, cut off before the window (trimmed-span only)
    cut_after_ns: int = 0
    cut_note: str | None = None  # what was cut ("20.121 ms before: 1 separating gap (1 module_load) and 1 GPU record")

    @property
    def start_ns(self) -> int:
        return int(self.starts_ns[0]) if self.starts_ns.size else 0

    @property
    def end_ns(self) -> int:
        return int(self.ends_ns[-1]) if self.ends_ns.size else 0

    @property
    def length_ns(self) -> int:
        return int((self.ends_ns - self.starts_ns).sum())

    @property
    def intervals(self) -> tuple[np.ndarray, np.ndarray]:
        return self.starts_ns, self.ends_ns

    def to_json(self) -> dict:
        return {
            "mode": self.mode,
            "source": self.source,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "length_ns": self.length_ns,
            "intervals": int(self.starts_ns.size),
            "ranges": self.ranges,
            "cut_before_ns": self.cut_before_ns,
            "cut_after_ns": self.cut_after_ns,
            "cut": self.cut_note,
        }


@dataclass(frozen=True, slots=True, eq=False)
class Frames:
    """How many frames the window holds, and where that number came from."""

    count: int | None
    source: str | None  # "FRAMES argument", "1,000 launches of kernels matching 'zoo_calib' ..."
    definition: str | None  # "argument", "range-text", "kernel:REGEX", "range:NAME", "graph", "h2d-bytes:N"
    # the frame events, when the definition counts events: their completion times (absolute ns, sorted)
    completions_ns: np.ndarray | None = None
    events_source: str | None = None  # what the events are ("launches of zoo_calib")
    frames_per_event: float | None = None
    hint: str | None = None  # frames unknown: a definition that would count them

    def to_json(self) -> dict:
        return {"frames": self.count, "frames_source": self.source, "frames_definition": self.definition}


# --------------------------------------------------------------------------- engines


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
class Busy:
    """The GPU engines over the window: per-engine figures, their union, overlap and streams."""

    engines: dict[str, EngineStats]
    any_busy_ns: int
    idle_ns: int
    overlap_ns: int
    serialization: float | None  # sum of engine busy / any busy; 1.0 = nothing overlapped
    n_streams: int = 0  # distinct streams with GPU work inside the window
    engine_streams: dict[str, int] = field(default_factory=dict)  # per engine with work, its stream count
    streams: tuple[StreamStats, ...] | None = None  # with --by-stream
    pageable_count: int = 0  # copies inside the window with pageable host memory
    pageable_bytes: int = 0
    pageable_known: bool = True  # the export has srcKind/dstKind

    def to_json(self) -> dict:
        out = {
            "engines": {k: v.to_json() for k, v in self.engines.items()},
            "any_busy_ns": self.any_busy_ns,
            "idle_ns": self.idle_ns,
            "overlap_ns": self.overlap_ns,
            "serialization": self.serialization,
            "n_streams": self.n_streams,
            "engine_streams": dict(self.engine_streams),
            "pageable_count": self.pageable_count if self.pageable_known else None,
            "pageable_bytes": self.pageable_bytes if self.pageable_known else None,
        }
        if self.streams is not None:
            out["streams"] = [s.to_json() for s in self.streams]
        return out


@dataclass(frozen=True, slots=True)
class ThreadRef:
    pid: int
    tid: int
    name: str | None

    def label(self) -> str:
        return f"thread {self.tid}" + (f" ({self.name})" if self.name else "")

    def to_json(self) -> dict:
        return {"pid": self.pid, "tid": self.tid, "name": self.name}


@dataclass(frozen=True, slots=True)
class Roofline:
    engine: str | None  # None when nothing ran inside the window; "host" when a launching thread binds
    busy_ns: int
    us_per_frame: float | None
    fps: float | None
    thread: ThreadRef | None = None  # the binding thread, when engine == "host"

    def to_json(self) -> dict:
        out = {"engine": self.engine, "busy_ns": self.busy_ns, "us_per_frame": self.us_per_frame, "fps": self.fps}
        if self.thread is not None:
            out["thread"] = self.thread.to_json()
        return out


# --------------------------------------------------------------------------- gaps


@dataclass(frozen=True, slots=True, eq=False)
class Gaps:
    """Every idle gap of the window (no engine busy) of at least ``threshold_ns``, with its cause:
    arrays in time order. ``parts_ns[i, k]`` is the time the launching threads spent in state k
    (GAP_CAUSES order, averaged over the threads) during gap i."""

    threshold_ns: int
    starts_ns: np.ndarray
    lengths_ns: np.ndarray
    cause: np.ndarray  # int8 index into GAP_CAUSES
    api: tuple[str | None, ...]  # per gap: the call that names the cause, if any
    parts_ns: np.ndarray  # (n, len(GAP_CAUSES)) int64
    window_start_ns: int
    # per gap: no launching thread's issuing span overlaps it (a hand-over between threads, or before the
    # first launch): not the loop's own gap whatever its cause; None: no such gap
    between: np.ndarray | None = None
    listed: int = 10_000  # --json lists at most this many gaps (the longest), in time order

    def __len__(self) -> int:
        return int(self.starts_ns.size)

    def setup_mask(self) -> np.ndarray:
        """Set-up gaps: a set-up cause, or no launching thread feeding the GPU around them."""
        m = np.isin(self.cause, [GAP_CAUSES.index(c) for c in SETUP_CAUSES])
        return m if self.between is None else m | self.between

    def cause_of(self, i: int) -> str:
        return GAP_CAUSES[int(self.cause[i])]

    @property
    def setup_ns(self) -> int:
        return int(self.lengths_ns[self.setup_mask()].sum())

    @property
    def loop_ns(self) -> int:
        return int(self.lengths_ns[~self.setup_mask()].sum())

    def longest(self, setup: bool | None = None) -> int | None:
        """Index of the longest gap (of the set-up gaps, of the loop's gaps, or of all); None if none."""
        if not len(self):
            return None
        m = np.ones(len(self), dtype=bool) if setup is None else (self.setup_mask() if setup else ~self.setup_mask())
        if not m.any():
            return None
        idx = np.flatnonzero(m)
        return int(idx[np.argmax(self.lengths_ns[idx])])

    def by_cause(self) -> dict[str, tuple[int, int]]:
        """cause -> (gaps, ns), causes present only."""
        out = {}
        for k, c in enumerate(GAP_CAUSES):
            m = self.cause == k
            if m.any():
                out[c] = (int(m.sum()), int(self.lengths_ns[m].sum()))
        return out

    def gap_json(self, i: int) -> dict:
        return self.gaps_json([i])[0]

    def gaps_json(self, idx: np.ndarray | list[int]) -> list[dict]:
        """The gaps ``idx`` as JSON, the arrays read once for all of them (not once per gap)."""
        idx = np.asarray(idx, dtype=np.int64)
        setup = self.setup_mask()[idx].tolist()
        between = self.between[idx].tolist() if self.between is not None else [False] * idx.size
        parts = self.parts_ns[idx].tolist()
        columns = zip(idx.tolist(), self.starts_ns[idx].tolist(), self.lengths_ns[idx].tolist(), self.cause[idx].tolist(),
                      setup, between, parts)  # fmt: skip
        return [
            {
                "start_ns": s - self.window_start_ns,
                "length_ns": n,
                "cause": GAP_CAUSES[c],
                "api": self.api[i],
                "setup": su,
                "between_threads": bt,
                "parts_ns": {cause: p for cause, p in zip(GAP_CAUSES, row) if p},
            }
            for i, s, n, c, su, bt, row in columns
        ]

    def to_json(self) -> list[dict]:
        n = len(self)
        if n <= self.listed:
            return self.gaps_json(np.arange(n))
        return self.gaps_json(np.sort(np.argsort(-self.lengths_ns, kind="stable")[: self.listed]))

    def summary_json(self) -> dict:
        lg, ls, ll = self.longest(), self.longest(True), self.longest(False)
        return {
            "threshold_ns": self.threshold_ns,
            "count": len(self),
            "listed": min(len(self), self.listed),
            "setup_count": int(self.setup_mask().sum()),
            "setup_ns": self.setup_ns,
            "loop_count": int((~self.setup_mask()).sum()),
            "loop_ns": self.loop_ns,
            "by_cause": {c: {"count": n, "ns": ns} for c, (n, ns) in self.by_cause().items()},
            "longest": None if lg is None else self.gap_json(lg),
            "longest_setup": None if ls is None else self.gap_json(ls),
            "longest_loop": None if ll is None else self.gap_json(ll),
        }


@dataclass(frozen=True, slots=True)
class WorkNotTraced:
    """The GPU reads idle while the launching threads wait on it: its work is not in the trace."""

    waited_ns: int  # gaps of at least 1 ms in which the launching threads waited in a synchronize
    share: float  # of the window
    calls: tuple[str, ...]  # the wait calls
    why: str  # the likely reason
    hint: str  # how to trace it

    def to_json(self) -> dict:
        return {"waited_ns": self.waited_ns, "share": self.share, "calls": list(self.calls), "why": self.why, "hint": self.hint}


# --------------------------------------------------------------------------- kernels and copies


@dataclass(frozen=True, slots=True)
class KernelStats:
    name: str
    launches: int  # records that overlap the window
    busy_ns: int  # union of this name's intervals, clipped to the window
    us_per_frame: float | None
    share: float | None  # busy / the kernel bar's busy (names can overlap: shares can add up past 1)
    min_ns: int  # record durations (whole records)
    median_ns: float
    max_ns: int

    def to_json(self) -> dict:
        return {"name": self.name, "launches": self.launches, "busy_ns": self.busy_ns, "us_per_frame": self.us_per_frame,
                "share": self.share, "min_ns": self.min_ns, "median_ns": self.median_ns, "max_ns": self.max_ns}  # fmt: skip


@dataclass(frozen=True, slots=True)
class CopyClass:
    """Copies (or memsets) of one engine in one size class."""

    engine: str
    size_class: str  # "64 kB-1 MB"
    min_bytes: int  # the class's bounds: min_bytes <= size < max_bytes (None: no upper bound)
    max_bytes: int | None
    count: int
    bytes: int
    busy_ns: int
    gbps: float | None
    us_per_frame: float | None

    def to_json(self) -> dict:
        return {"engine": self.engine, "size_class": self.size_class, "min_bytes": self.min_bytes, "max_bytes": self.max_bytes,
                "count": self.count, "bytes": self.bytes, "busy_ns": self.busy_ns, "gbps": self.gbps,
                "us_per_frame": self.us_per_frame}  # fmt: skip


# --------------------------------------------------------------------------- host


BLOCK_CAUSES = ("module_load", "implicit_sync", "pageable", "graph", "queue_full", "gpu_behind")


@dataclass(frozen=True, slots=True)
class ThreadStats:
    """One thread that issues CUDA work in the window: its time in CUDA calls by kind, and its time
    split into work (host code, and CUDA calls while nothing of the GPU's holds them), blocked (inside a
    non-synchronizing call while the GPU runs work the call waits for) and wait (explicit waits)."""

    thread: ThreadRef
    launch_ns: int  # kernel and graph launches
    launch_calls: int
    copy_ns: int  # issuing copies and memsets (asynchronous calls)
    copy_calls: int
    wait_ns: int  # blocking waits (synchronize, synchronous copies), as a union
    wait_calls: int
    other_ns: int  # every other CUDA call (events, queries, stream set-up, ...)
    other_calls: int
    active_ns: int  # from its first to its last CUDA call in the window
    busy_ns: int  # active_ns minus its waits and the set-up gaps (work + blocked)
    frames: int | None
    blocked_ns: int = 0  # inside held non-synchronizing calls while the GPU ran work they waited for
    blocked_by_cause: tuple[tuple[str, int], ...] = ()  # (cause, ns) for the causes present, BLOCK_CAUSES order
    held_calls: int = 0  # non-synchronizing calls the GPU held

    @property
    def work_ns(self) -> int:
        """Host code, and CUDA calls while nothing of the GPU's holds them: the thread's bar."""
        return self.busy_ns - self.blocked_ns

    @property
    def us_per_frame(self) -> float | None:
        return U.us_per_frame_of(self.busy_ns, self.frames)

    @property
    def work_us_per_frame(self) -> float | None:
        return U.us_per_frame_of(self.work_ns, self.frames)

    @property
    def calls(self) -> int:
        return self.launch_calls + self.copy_calls + self.wait_calls + self.other_calls

    def to_json(self) -> dict:
        f = self.frames
        return {
            **self.thread.to_json(),
            "busy_ns": self.busy_ns, "us_per_frame": self.us_per_frame, "active_ns": self.active_ns,
            "work_ns": self.work_ns, "work_us_per_frame": self.work_us_per_frame,
            "blocked_ns": self.blocked_ns, "blocked_us_per_frame": U.us_per_frame_of(self.blocked_ns, f),
            "blocked": dict(self.blocked_by_cause), "held_calls": self.held_calls,
            "launch_ns": self.launch_ns, "launch_calls": self.launch_calls, "launch_us_per_frame": U.us_per_frame_of(self.launch_ns, f),
            "copy_ns": self.copy_ns, "copy_calls": self.copy_calls, "copy_us_per_frame": U.us_per_frame_of(self.copy_ns, f),
            "wait_ns": self.wait_ns, "wait_calls": self.wait_calls, "wait_us_per_frame": U.us_per_frame_of(self.wait_ns, f),
            "other_ns": self.other_ns, "other_calls": self.other_calls, "other_us_per_frame": U.us_per_frame_of(self.other_ns, f),
        }  # fmt: skip


@dataclass(frozen=True, slots=True)
class BlockedCalls:
    """The held non-synchronizing calls of one name and cause on the launching threads, inside the window
    less its set-up gaps: how many, their blocked time, their calls' time, the bytes of their copies."""

    name: str  # the call's base name (cudaLaunchKernel, cudaMemcpyAsync, ...)
    cause: str  # one of BLOCK_CAUSES
    calls: int
    blocked_ns: int
    call_ns: int  # the calls' whole time
    bytes: int  # bytes of the releasing copies (pageable copies), 0 for the others
    max_depth: int | None = None  # launches: the most rows issued and not ended on the device as one started

    def to_json(self) -> dict:
        return {"name": self.name, "cause": self.cause, "calls": self.calls, "blocked_ns": self.blocked_ns,
                "call_ns": self.call_ns, "bytes": self.bytes, "max_depth": self.max_depth}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Host:
    """The host side: the launching threads, and the process's blocking calls."""

    known: bool  # the trace has CUDA API rows
    threads: tuple[ThreadStats, ...]  # the most work first
    host_sync_ns: int  # union of the process's blocking calls, clipped to the window
    host_sync_calls: tuple[str, ...]
    sync_copy_ns: int = 0  # union of synchronous copy calls (cudaMemcpy, cuMemcpy*), clipped to the window
    sync_copy_calls: int = 0
    sync_copy_names: tuple[str, ...] = ()
    # the GPU's idle time, without set-up gaps, in the idle stretches where the process's blocking waits end
    drain_idle_ns: int = 0
    blocked: tuple[BlockedCalls, ...] = ()  # the held calls of the launching threads, by name and cause
    linked: bool = False  # the calls were linked to their GPU work (correlation ids): blocked time is known

    @property
    def busiest(self) -> ThreadStats | None:
        return self.threads[0] if self.threads else None

    @property
    def blocked_ns(self) -> int:
        return sum(b.blocked_ns for b in self.blocked)

    def to_json(self) -> dict:
        return {"known": self.known, "linked": self.linked, "threads": [t.to_json() for t in self.threads],
                "drain_idle_ns": self.drain_idle_ns, "blocked_ns": self.blocked_ns,
                "blocked": [b.to_json() for b in self.blocked]}  # fmt: skip


# --------------------------------------------------------------------------- the critical path

PATH_RESOURCES = ("host", "launch", "kernel", "graph", "h2d", "d2h", "d2d", "p2p", "um_h2d", "um_d2h", "um_d2d",
                  "memset", "other", "idle")  # the order parts are listed in when their time ties  # fmt: skip


@dataclass(frozen=True, slots=True)
class PathPart:
    """One resource's time on the critical path: ``host:<tid>`` (a launching thread), an engine, ``launch``
    (a launch delay: the row waited for its launch call with its stream's queue empty) or ``idle``."""

    resource: str
    ns: int
    share: float  # of the path's length
    thread: ThreadRef | None = None  # for host:<tid>
    steady_ns: int | None = None  # outside the set-up gaps (None: as ns)

    @property
    def loop_ns(self) -> int:
        return self.ns if self.steady_ns is None else self.steady_ns

    @property
    def kind(self) -> str:
        """``host`` for every launching thread, else the resource."""
        return "host" if self.thread is not None else self.resource


@dataclass(frozen=True, slots=True)
class CriticalPath:
    """The window's critical path (a backward last-arrival walk over the rows and the launching threads'
    calls, docs/analyze.md): its length (the window's), split by resource, largest first."""

    total_ns: int
    parts: tuple[PathPart, ...]
    kernels: tuple[tuple[str, int], ...]  # (kernel name, ns on the path), largest first
    frames: int | None
    steps: int  # nodes the walk visited
    complete: bool  # False when a walk stopped early (correlation ids out of issue order)
    steady_total_ns: int | None = None  # the path's length outside the set-up gaps (None: total_ns)

    @property
    def loop_ns(self) -> int:
        """The path's length without the set-up gaps (the pipeline's own loop)."""
        return self.total_ns if self.steady_total_ns is None else self.steady_total_ns

    def loop_share(self, p: PathPart) -> float:
        return p.loop_ns / self.loop_ns if self.loop_ns > 0 else 0.0

    def loop_parts(self) -> tuple[PathPart, ...]:
        """The parts by their time outside the set-up gaps, largest first."""
        order = {r: i for i, r in enumerate(PATH_RESOURCES)}
        return tuple(sorted((p for p in self.parts if p.loop_ns > 0), key=lambda p: (-p.loop_ns, order.get(p.kind, 99), p.resource)))

    def ns_of(self, resource: str) -> int:
        """Time on the path of a resource; ``host`` sums every launching thread."""
        return sum(p.ns for p in self.parts if p.resource == resource or p.kind == resource)

    def share_of(self, resource: str) -> float:
        return self.ns_of(resource) / self.total_ns if self.total_ns > 0 else 0.0

    def key(self, p: PathPart) -> str:
        """The JSON name of a part: ``host`` alone when one thread has all the host time."""
        if p.thread is None:
            return p.resource
        return "host" if sum(1 for q in self.parts if q.thread is not None) == 1 else p.resource

    def to_json(self) -> dict:
        f = self.frames
        return {
            "total_ns": self.total_ns,
            "shares": {self.key(p): p.share for p in self.parts},
            "ns": {self.key(p): p.ns for p in self.parts},
            "us_per_frame": {self.key(p): U.us_per_frame_of(p.ns, f) for p in self.parts} if f else None,
            "threads": [{**p.thread.to_json(), "ns": p.ns, "share": p.share} for p in self.parts if p.thread is not None],
            "kernels": [{"name": k, "ns": ns, "share": ns / self.total_ns if self.total_ns else 0.0,
                         "us_per_frame": U.us_per_frame_of(ns, f)} for k, ns in self.kernels],  # fmt: skip
            "steady_total_ns": self.loop_ns,
            "steady_shares": {self.key(p): self.loop_share(p) for p in self.parts},
            "steps": self.steps,
            "complete": self.complete,
        }


@dataclass(frozen=True, slots=True)
class Binding:
    """One verdict from both views (analyzers.verdict): which view applies (``view``: "tallest_bar",
    "critical_path" or "both"), why (``code``: "one_resource", "overlap", "turns", "mixed"), and the
    sentence that says it."""

    view: str
    code: str
    overlap_index: float | None  # (loop - tallest bar) / (sum of the bars - tallest bar); None when they are equal
    bar_ns: int  # the tallest bar
    sum_ns: int  # every GPU engine's busy time plus the busiest launching thread's work
    loop_ns: int  # the window less its set-up gaps
    bar_share_of_path: float  # the tallest bar's resource's share of the path (set-up gaps left out)
    message: str

    def to_json(self) -> dict:
        return {"view": self.view, "code": self.code, "overlap_index": self.overlap_index, "bar_ns": self.bar_ns,
                "sum_ns": self.sum_ns, "loop_ns": self.loop_ns, "bar_share_of_path": self.bar_share_of_path,
                "message": self.message}  # fmt: skip


# --------------------------------------------------------------------------- pacing


@dataclass(frozen=True, slots=True)
class Pacing:
    """Intervals between consecutive frame completions in the window."""

    source: str  # what completes ("launches of zoo_calib", "NVTX ranges 'batch'")
    events: int  # completions in the window
    frames_per_event: float
    median_ns: float
    p99_ns: float
    max_ns: int
    stall_start_ns: int  # the longest interval, absolute
    stall_cause: str  # a gap cause, or "busy" (no idle gap explains it: the work itself took longer)
    stall_api: str | None
    window_start_ns: int

    def to_json(self) -> dict:
        per = self.frames_per_event
        return {
            "source": self.source, "events": self.events, "frames_per_event": per,
            "median_ns": self.median_ns, "p99_ns": self.p99_ns, "max_ns": self.max_ns,
            "median_us_per_frame": U.us_per_frame_of(self.median_ns, per),
            "p99_us_per_frame": U.us_per_frame_of(self.p99_ns, per), "max_us_per_frame": U.us_per_frame_of(self.max_ns, per),
            "longest_stall": {"start_ns": self.stall_start_ns - self.window_start_ns, "length_ns": self.max_ns,
                              "cause": self.stall_cause, "api": self.stall_api},
        }  # fmt: skip


# --------------------------------------------------------------------------- a group, a trace


@dataclass(frozen=True, slots=True)
class Throughput:
    """The window against the roofline, with and without the set-up gaps."""

    measured_us_per_frame: float | None  # window / frames
    efficiency: float | None  # roofline busy / window
    steady_ns: int  # the window minus its set-up gaps
    steady_idle_ns: int  # idle time outside set-up gaps
    steady_us_per_frame: float | None
    steady_efficiency: float | None

    def to_json(self) -> dict:
        return {"window_ns": self.steady_ns, "idle_ns": self.steady_idle_ns, "us_per_frame": self.steady_us_per_frame,
                "efficiency": self.steady_efficiency}  # fmt: skip


@dataclass(frozen=True, slots=True)
class GroupAnalysis:
    """Everything measured for one (process, device) group."""

    pid: int
    device: int
    gpu_name: str | None
    window: Window
    frames: Frames
    busy: Busy
    roofline: Roofline
    gaps: Gaps
    host: Host
    throughput: Throughput
    kernels: tuple[KernelStats, ...] = ()
    copies: tuple[CopyClass, ...] = ()
    pacing: Pacing | None = None
    pacing_note: str | None = None  # why there is no pacing
    work_not_traced: WorkNotTraced | None = None
    graph_trace: str | None = None  # "graph", "node" or None (see TraceData.graph_trace)
    critical_path: CriticalPath | None = None  # None: no CUDA API rows, or no launching thread
    binding: Binding | None = None  # the one verdict from the tallest bar and the critical path
    findings: tuple[Finding, ...] = ()

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(f.message for f in self.findings)

    def to_json(self) -> dict:
        gp, h, t = self.gaps, self.host, self.throughput
        busy = self.busy.to_json()  # engines, any_busy_ns, idle_ns, overlap_ns, serialization, streams, pageable_*
        streams = busy.pop("streams", None)
        out = {
            "pid": self.pid,
            "device": self.device,
            "gpu_name": self.gpu_name,
            **self.frames.to_json(),
            "window_ns": self.window.length_ns,
            "window_source": self.window.source,
            "window_ranges": self.window.ranges,
            "window": self.window.to_json(),
            **busy,
            "roofline": self.roofline.to_json(),
            "host_sync_ns": h.host_sync_ns,
            "host_sync_calls": list(h.host_sync_calls),
            "measured_us_per_frame": t.measured_us_per_frame,
            "efficiency": t.efficiency,
            "steady": t.to_json(),
            "sync_copy_ns": h.sync_copy_ns,
            "sync_copy_calls": h.sync_copy_calls,
            "idle_gap_count": len(gp),
            "idle_gap_ns": int(gp.lengths_ns.sum()),
            "longest_idle_ns": int(gp.lengths_ns.max()) if len(gp) else 0,
            "gap_summary": gp.summary_json(),
            "gaps": gp.to_json(),
            "kernels": [k.to_json() for k in self.kernels],
            "copies": [c.to_json() for c in self.copies],
            "host": h.to_json(),
            "pacing": None if self.pacing is None else self.pacing.to_json(),
            "pacing_note": self.pacing_note,
            "work_not_traced": None if self.work_not_traced is None else self.work_not_traced.to_json(),
            "graph_trace": self.graph_trace,
            "critical_path": None if self.critical_path is None else self.critical_path.to_json(),
            "binding": None if self.binding is None else self.binding.to_json(),
            "notes": list(self.notes),
            "rules": [f.to_json() for f in self.findings],
        }
        if streams is not None:
            out["streams"] = streams
        return out


@dataclass(frozen=True, slots=True)
class TraceAnalysis:
    """The analysis of one trace: every (process, device) group, and the primary one (most GPU busy time)."""

    trace: str
    nsys_version: str | None
    schema_version: str | None
    groups: tuple[GroupAnalysis, ...]
    primary: GroupAnalysis
    warnings: tuple[str, ...] = field(default=())
    graph_warning: str | None = None  # also in warnings; the table shows it in place
    what_if: Any = None  # a whatif.WhatIf for the primary group, when asked for

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
