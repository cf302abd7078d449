"""The trace model the analyzers read: one (process, device) group's records, engine by engine.

``build(data)`` splits a :class:`~clusterbench.io.nsys.TraceData` into :class:`GroupTrace` records:
per engine the start, end, bytes, stream (and kernel name) of its records, as views into the read
arrays when the trace holds one group. Records whose bytes over duration exceed any physical rate
(RATE_CEILING_GBPS) are set apart here, so that no figure uses them; the busy analyzer reports them.
Over the union of every engine's records, computed once per group and block by block (never
built whole): the GPU activity span and the idle holes of at least HOLE_NS (the gaps analyzer reads them).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.io.nsys import schema as S
from clusterbench.io.nsys.reader import ApiCalls, ProfilerOverhead, TraceData
from clusterbench.model.engines import RATE_CEILING_GBPS

HOLE_NS = 100_000  # the shortest idle hole kept: the gap threshold (gaps.GAP_NS) cannot go below it

# per engine code; inf where records carry no bytes (kernel, graph)
_CEILING = np.array([RATE_CEILING_GBPS.get(e, np.inf) for e in S.ENGINES], dtype=np.float64)


@dataclass(frozen=True, slots=True, eq=False)
class EngineRecords:
    """The records of one engine in one group, in start order."""

    engine: str
    start_ns: np.ndarray
    end_ns: np.ndarray
    bytes: np.ndarray | None  # copies and memsets
    stream: np.ndarray
    pageable: np.ndarray | None  # copies
    name: np.ndarray | None  # kernels: index into GroupTrace.kernel_names
    correlation: np.ndarray | None = None  # the CUPTI correlation id of each record (its launch call's)

    def __len__(self) -> int:
        return int(self.start_ns.size)

    def select(self, m: np.ndarray) -> EngineRecords:
        def pick(a):
            return None if a is None else a[m]

        return EngineRecords(self.engine, self.start_ns[m], self.end_ns[m], pick(self.bytes), self.stream[m],
                             pick(self.pageable), pick(self.name), pick(self.correlation))  # fmt: skip


@dataclass(frozen=True, slots=True, eq=False)
class GroupTrace:
    """One (process, device) group: its engines' records, the process's API calls, and the trace facts."""

    pid: int
    device: int
    gpu_name: str | None
    engines: dict[str, EngineRecords]  # engines with at least one plausible record, in ENGINES order
    implausible: dict[str, EngineRecords]  # records set apart: bytes over duration above the ceiling
    kernel_names: tuple[str, ...]
    first_ns: int  # the GPU activity span: first record start, last record end
    last_ns: int
    holes: iv.Intervals  # idle stretches between them (no engine busy) of at least HOLE_NS
    api: ApiCalls
    overhead: ProfilerOverhead
    graph_trace: str | None
    srckind_read: bool
    syncs: object = None  # the trace's SyncEvents (what each synchronizing call waited on), when read
    stream_flags: dict = dataclasses.field(default_factory=dict)  # streamId -> CUPTI stream flag (this process)
    events: object = None  # the trace's EventRecords (one per cudaEventRecord), when read

    @property
    def n_records(self) -> int:
        return sum(len(r) for r in self.engines.values())

    @property
    def span(self) -> tuple[int, int]:
        """First record start to last record end (the GPU activity span)."""
        return self.first_ns, self.last_ns

    def all_starts(self) -> np.ndarray:
        return np.concatenate([r.start_ns for r in self.engines.values()]) if self.engines else np.empty(0, dtype=np.int64)


def groups_of(data: TraceData) -> list[tuple[int, int]]:
    """The (pid, device) groups of a trace, sorted."""
    act = data.activity
    if len(act) == 0:
        return []
    if act.pid.strides == (0,) and act.device.strides == (0,):  # broadcast: one group
        return [(int(act.pid[0]), int(act.device[0]))]
    uniq = np.unique(act.pid * (1 << 32) + act.device)
    return [(int(k >> 32), int(k & 0xFFFFFFFF)) for k in uniq.tolist()]


def split_engines(act, pid: int, device: int) -> tuple[dict[str, EngineRecords], dict[str, EngineRecords]]:  # noqa: ANN001
    """The records of group (pid, device) of an Activity, per engine with a record (ENGINES order): the
    plausible ones, and those set apart (bytes over duration above the ceiling)."""
    one_group = act.pid.strides == (0,) and act.device.strides == (0,)
    engines: dict[str, EngineRecords] = {}
    bad: dict[str, EngineRecords] = {}
    corr = getattr(act, "correlation", None)
    for code, name in enumerate(S.ENGINES):
        lo, hi = act.sections[code]
        if hi == lo:
            continue
        sl = slice(lo, hi)
        s, e = act.start_ns[sl], act.end_ns[sl]
        if not one_group:
            m = (act.pid[sl] == pid) & (act.device[sl] == device)
            if not m.any():
                continue
        else:
            m = None
        has_bytes = name in S.BYTE_ENGINES
        rec = EngineRecords(
            name, s, e, act.bytes[sl] if has_bytes else None, act.stream[sl],
            act.pageable[sl] if name in S.COPY_ENGINES else None,
            act.kernel_name[sl] if name == "kernel" else None,
            corr[sl] if corr is not None else None,
        )  # fmt: skip
        if m is not None:
            rec = rec.select(m)
        if has_bytes:
            dur = np.maximum(rec.end_ns - rec.start_ns, 1)  # a zero-length record is taken as 1 ns, the timer's resolution
            over = rec.bytes > _CEILING[code] * dur
            if over.any():
                bad[name] = rec.select(over)
                rec = rec.select(~over)
        if len(rec):
            engines[name] = rec
    return engines, bad


def build(data: TraceData, pid: int, device: int, cache: dict | None = None) -> GroupTrace:
    """The group (pid, device) of ``data`` as a GroupTrace. ``cache`` (a dict the caller keeps) holds the
    groups already built from the same activity, so that reading and analysis build each one once."""
    key = (id(data.activity), pid, device)
    if cache is not None and key in cache:
        return dataclasses.replace(cache[key], api=data.api, overhead=data.overhead, syncs=getattr(data, "syncs", None),
                                   events=getattr(data, "event_records", None))  # fmt: skip
    engines, bad = split_engines(data.activity, pid, device)
    # records sorted by start merge as they are; an engine whose records are not is made a union first
    first, last, _, holes = iv.union_stats(
        [(r.start_ns, r.end_ns) if iv.is_sorted(r.start_ns) else iv.union(r.start_ns, r.end_ns) for r in engines.values()],
        hole_ns=HOLE_NS,
    )  # fmt: skip
    out = GroupTrace(
        pid=pid, device=device, gpu_name=data.gpu_name(device), engines=engines, implausible=bad,
        kernel_names=data.activity.kernel_names, first_ns=first, last_ns=last, holes=holes, api=data.api, overhead=data.overhead, graph_trace=data.graph_trace,
        srckind_read=data.srckind_read, syncs=getattr(data, "syncs", None), events=getattr(data, "event_records", None),
        stream_flags={sid: f for (p, sid), f in getattr(data, "stream_flags", {}).items() if p == pid},
    )  # fmt: skip
    if cache is not None:
        cache[key] = out
    return out
