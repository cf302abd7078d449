"""Build small synthetic nsys SQLite exports, one schema era at a time (sqlite-utils).

The eras follow docs/facts.md, "nsys SQLite exports across versions": the metadata table (none / EXPORT_META_DATA /
META_DATA_EXPORT), ENUM tables missing before 2022.4, mangledName from 2022.1,
greenContextId in 2024.x, copyCount in 2025.x, the GPU name in TARGET_INFO_CUDA_GPU for
2020.x, tables created only when they have rows, names through StringIds, NVTX text
inline or through textId.

The host side is written as nsys writes it (the columns of the bundled H200 exports): CUDA API calls
in CUPTI_ACTIVITY_KIND_RUNTIME (eventClass 0 for the runtime API, 1 for the driver API; or the driver
calls in a CUPTI_ACTIVITY_KIND_DRIVER table of the same columns), each with its thread's globalTid and
a correlationId that the GPU records it launched share; PROFILER_OVERHEAD; NVTX_EVENTS with domainId
and the domain's own row (eventType 75, the domain name as its text); ThreadNames;
CUPTI_ACTIVITY_KIND_SYNCHRONIZATION and CUPTI_ACTIVITY_KIND_CUDA_EVENT.

Correlation ids: a record or call with ``corr`` set gets that id (to link a call to its GPU rows, its
synchronization row or its event record); the others get fresh ids counting from 1, so explicit ids
are best taken large (10,000 and up). ``Trace(correlation=False)`` writes no correlationId column at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import sqlite_utils

ERAS = ("2020.3", "2022.1", "2023.3", "2024.2", "2025.3")
SCHEMA_VERSION = {"2022.1": "2.6.0", "2023.3": "3.11.1", "2024.2": "3.14.0", "2025.3": "3.20.3"}


def gpid(pid: int, hw: int = 1) -> int:
    """globalPid as nsys packs it: pid in bits 24..47."""
    return (hw << 48) | (pid << 24)


def gtid(pid: int, tid: int | None = None, hw: int = 1) -> int:
    return gpid(pid, hw) | (tid if tid is not None else pid)


@dataclass
class Kernel:
    start: int
    end: int
    stream: int = 7
    pid: int = 100
    device: int = 0
    name: str = "find_clusters"
    graph_node: int | None = None  # graphNodeId: set for kernel nodes of a node-level graph trace
    corr: int | None = None  # correlationId, when it must be shared (the nodes of one graph launch); else a fresh one


@dataclass
class Copy:
    start: int
    end: int
    kind: int  # CUPTI copyKind: 1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, 11-13 UM
    bytes: int
    stream: int = 7
    pid: int = 100
    device: int = 0
    pageable: bool = False  # host side pageable (memory kind 0) instead of pinned (1)
    corr: int | None = None


@dataclass
class Memset:
    start: int
    end: int
    bytes: int
    stream: int = 7
    pid: int = 100
    device: int = 0
    corr: int | None = None


@dataclass
class Graph:
    """One graph execution on one stream (CUPTI_ACTIVITY_KIND_GRAPH_TRACE, graph-level tracing)."""

    start: int
    end: int
    stream: int = 7
    pid: int = 100
    device: int = 0
    graph_id: int = 1
    corr: int | None = None


@dataclass
class Api:
    start: int
    end: int
    name: str  # e.g. cudaStreamSynchronize_v3020
    pid: int = 100
    tid: int | None = None  # the OS thread id (default: the pid, the main thread)
    corr: int | None = None


@dataclass
class Range:
    start: int
    end: int | None
    text: str
    pid: int = 100
    by_id: bool = False  # text through textId into StringIds instead of inline (a registered string)
    event_type: int = 59  # 59 push/pop, 60 start/end, 34 mark
    domain: str | None = None  # an NVTX domain (nvtxDomainCreateA); None: the default domain
    tid: int | None = None


@dataclass
class Overhead:
    """A PROFILER_OVERHEAD row: time nsys spent on a thread."""

    start: int
    end: int
    name: str = "CUPTI Buffer flush"
    pid: int = 100
    tid: int | None = None


@dataclass
class Sync:
    """A CUPTI_ACTIVITY_KIND_SYNCHRONIZATION row. syncType as CUPTI numbers it: 1 event synchronize, 2 stream
    wait event, 3 stream synchronize, 4 context synchronize; nsys 2025.3 writes 2 for cudaStreamSynchronize,
    with no event (the default here, as in the real exports)."""

    start: int
    end: int
    stream: int = 7  # 4294967295: none
    sync_type: int = 2
    pid: int = 100
    device: int = 0
    corr: int | None = None
    event: int = 4294967295  # none


@dataclass
class EventRecord:
    """A CUPTI_ACTIVITY_KIND_CUDA_EVENT row: one cudaEventRecord (its call's correlation id)."""

    stream: int
    event: int
    corr: int | None = None
    pid: int = 100
    device: int = 0


@dataclass
class Trace:
    kernels: list[Kernel] = field(default_factory=list)
    copies: list[Copy] = field(default_factory=list)
    memsets: list[Memset] = field(default_factory=list)
    api: list[Api] = field(default_factory=list)
    ranges: list[Range] = field(default_factory=list)
    graphs: list[Graph] = field(default_factory=list)
    graph_nodes: bool = False  # write CUDA_GRAPH_NODE_EVENTS (a node-level graph trace)
    gpu_name: str | None = "NVIDIA H200"  # None: no TARGET_INFO_GPU table
    overhead: list[Overhead] = field(default_factory=list)
    syncs: list[Sync] = field(default_factory=list)
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)  # (pid, tid) -> name
    driver_table: bool = False  # driver API calls (cu*) in CUPTI_ACTIVITY_KIND_DRIVER, not in the runtime table
    events: list[EventRecord] = field(default_factory=list)
    correlation: bool = True  # False: no correlationId column in any table


def build(path: Path, trace: Trace, era: str = "2025.3") -> Path:
    """Write ``trace`` as an nsys export of ``era`` at ``path``."""
    assert era in ERAS, era
    db = sqlite_utils.Database(path)
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        if text not in strings:
            strings[text] = len(strings) + 1
        return strings[text]

    year = float(era)
    corr = iter(range(1, 1_000_000))

    # metadata
    if era == "2022.1":
        db["EXPORT_META_DATA"].insert_all(
            [{"name": "EXPORT_SCHEMA_VERSION", "value": SCHEMA_VERSION[era]}, {"name": "EXPORT_PRODUCT_VERSION", "value": "2022.1.1.61"}]
        )
    elif year >= 2023.3:
        db["META_DATA_EXPORT"].insert_all(
            [
                {"name": "EXPORT_PRODUCT_NAME", "value": "NVIDIA Nsight Systems"},
                {"name": "EXPORT_PRODUCT_VERSION", "value": f"{era}.1.0"},
                {"name": "EXPORT_SCHEMA_VERSION", "value": SCHEMA_VERSION[era]},
            ]
        )
    if year >= 2023.3:
        db["ENUM_CUDA_MEMCPY_OPER"].insert_all([{"id": 1, "name": "CUDA_MEMCPY_KIND_HTOD", "label": "Host-to-Device"}])

    # GPU info
    if trace.gpu_name is None:
        pass
    elif era == "2020.3":
        db["TARGET_INFO_CUDA_GPU"].insert({"id": 0, "name": trace.gpu_name, "busLocation": "0000:00:06.0"})
    else:
        db["TARGET_INFO_GPU"].insert({"vmId": 1 << 48, "id": 0, "name": trace.gpu_name, "cuDevice": 0})
    db["TARGET_INFO_SESSION_START_TIME"].insert({"utcEpochNs": 1, "utcTime": "2026-01-01T00:00:00"})

    def cid(explicit: int | None) -> int:
        return next(corr) if explicit is None else explicit

    def common(start: int, end: int, device: int, stream: int, pid: int, explicit: int | None = None) -> dict:
        row = {"start": start, "end": end, "deviceId": device, "contextId": 1}
        if year >= 2024.2:
            row["greenContextId"] = None
        row.update({"streamId": stream, "correlationId": cid(explicit), "globalPid": gpid(pid)})
        return row

    if trace.kernels:
        rows = []
        for k in trace.kernels:
            row = common(k.start, k.end, k.device, k.stream, k.pid)
            if k.corr is not None:
                row["correlationId"] = k.corr
            row.update({"demangledName": sid(k.name), "shortName": sid(k.name)})
            if year >= 2022.1:
                row["mangledName"] = sid("_Z" + k.name)
            row.update({"gridX": 100, "gridY": 1, "gridZ": 1, "blockX": 128, "blockY": 1, "blockZ": 1})
            row["graphNodeId"] = k.graph_node
            rows.append(row)
        db["CUPTI_ACTIVITY_KIND_KERNEL"].insert_all(rows)
    if trace.copies:
        rows = []
        for c in trace.copies:
            row = common(c.start, c.end, c.device, c.stream, c.pid, c.corr)
            host = 0 if c.pageable else 1
            src, dst = {1: (host, 2), 2: (2, host)}.get(c.kind, (2, 2))
            row.update({"bytes": c.bytes, "copyKind": c.kind, "srcKind": src, "dstKind": dst})
            if year >= 2025.3:
                row["copyCount"] = 1
            rows.append(row)
        db["CUPTI_ACTIVITY_KIND_MEMCPY"].insert_all(rows)
    if trace.memsets:
        rows = []
        for m in trace.memsets:
            row = common(m.start, m.end, m.device, m.stream, m.pid, m.corr)
            row.update({"value": 0, "bytes": m.bytes, "memKind": 2})
            rows.append(row)
        db["CUPTI_ACTIVITY_KIND_MEMSET"].insert_all(rows)
    if trace.graphs:
        rows = []
        for g in trace.graphs:
            row = common(g.start, g.end, g.device, g.stream, g.pid, g.corr)
            row["graphId"] = g.graph_id
            row["graphExecId"] = g.graph_id
            rows.append(row)
        db["CUPTI_ACTIVITY_KIND_GRAPH_TRACE"].insert_all(rows)
    if trace.graphs or trace.graph_nodes:
        db["CUDA_GRAPH_EVENTS"].insert({"start": 0, "end": 0, "globalTid": gtid(100), "graphId": 1, "originalGraphId": None})
    if trace.graph_nodes:
        db["CUDA_GRAPH_NODE_EVENTS"].insert_all(
            [{"start": 0, "end": 0, "globalTid": gtid(100), "graphNodeId": k.graph_node, "originalGraphNodeId": None, "graphId": 1}
             for k in trace.kernels if k.graph_node is not None] or [{"start": 0, "end": 0, "globalTid": gtid(100), "graphNodeId": 1, "originalGraphNodeId": None, "graphId": 1}]
        )
    if trace.api:
        runtime, driver = [], []
        for a in trace.api:
            is_driver = a.name.startswith("cu") and not a.name.startswith("cuda")
            row = {
                "start": a.start,
                "end": a.end,
                "eventClass": 1 if is_driver else 0,
                "globalTid": gtid(a.pid, a.tid),
                "correlationId": cid(a.corr),
                "nameId": sid(a.name),
                "returnValue": 0,
                "callchainId": None,
            }
            (driver if is_driver and trace.driver_table else runtime).append(row)
        if runtime:
            db["CUPTI_ACTIVITY_KIND_RUNTIME"].insert_all(runtime)
        if driver:
            db["CUPTI_ACTIVITY_KIND_DRIVER"].insert_all(driver)
    if trace.ranges:
        rows = []
        domains: dict[str, int] = {}
        for r in trace.ranges:
            if r.domain is not None and r.domain not in domains:
                domains[r.domain] = len(domains) + 1
                first = min(x.start for x in trace.ranges if x.domain == r.domain)
                rows.append({"start": first - 1, "end": None, "eventType": 75, "rangeId": None, "category": None,
                             "color": None, "text": r.domain, "globalTid": gtid(r.pid, r.tid), "endGlobalTid": None,
                             "textId": None, "domainId": domains[r.domain]})  # fmt: skip
            row = {"start": r.start, "end": r.end, "eventType": r.event_type, "rangeId": None, "category": None, "color": None}
            row["text"] = None if r.by_id else r.text
            row["globalTid"] = gtid(r.pid, r.tid)
            row["endGlobalTid"] = gtid(r.pid, r.tid) if r.event_type == 60 else None
            row["textId"] = sid(r.text) if r.by_id else None
            row["domainId"] = domains.get(r.domain, 0) if r.domain is not None else 0
            rows.append(row)
        db["NVTX_EVENTS"].insert_all(rows)
    if trace.overhead:
        db["PROFILER_OVERHEAD"].insert_all(
            [{"start": o.start, "end": o.end, "globalTid": gtid(o.pid, o.tid), "nameId": sid(o.name), "returnValue": 0}
             for o in trace.overhead]  # fmt: skip
        )
    if trace.syncs:
        rows = []
        for y in trace.syncs:
            row = {"start": y.start, "end": y.end, "deviceId": y.device, "contextId": 1, "greenContextId": None,
                   "streamId": y.stream, "correlationId": cid(y.corr), "globalPid": gpid(y.pid), "deprecatedSyncType": None,
                   "syncType": y.sync_type, "eventId": y.event, "eventSyncId": 4294967295}  # fmt: skip
            if year < 2024.2:  # older exports: the type in its first column, no eventSyncId
                row.update({"deprecatedSyncType": y.sync_type, "eventSyncId": None})
                del row["syncType"]
            rows.append(row)
        db["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"].insert_all(rows)
    if trace.events:
        db["CUPTI_ACTIVITY_KIND_CUDA_EVENT"].insert_all(
            [{"deviceId": e.device, "contextId": 1, "greenContextId": None, "streamId": e.stream, "correlationId": cid(e.corr),
              "globalPid": gpid(e.pid), "eventId": e.event, "eventSyncId": None} for e in trace.events]  # fmt: skip
        )
    if not trace.correlation:
        for t in db.table_names():
            if "correlationId" in db[t].columns_dict:
                db[t].transform(drop={"correlationId"})
    names = {(100, 100): "python", **trace.thread_names}
    db["ThreadNames"].insert_all([{"nameId": sid(n), "priority": 10, "globalTid": gtid(p, t)} for (p, t), n in names.items()])
    db["StringIds"].insert_all([{"id": i, "value": v} for v, i in strings.items()], pk="id")
    db.close()
    return path
