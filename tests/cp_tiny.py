"""Tiny nsys-shaped SQLite exports for blocked time and the critical path: every row and call given by
hand, with the correlation ids, SYNCHRONIZATION rows and CUDA_EVENT rows that link them, in the tables and
columns nsys 2025.3 writes (the bundled H200 exports). Times are given in µs and written in ns.

Nothing here calls clusterbench: the tests that use it work their expected values out by hand."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

US = 1_000
PID = 100
NO_ID = 4294967295


def gpid(pid: int = PID) -> int:
    return (1 << 48) | (pid << 24)


def gtid(tid: int, pid: int = PID) -> int:
    return gpid(pid) | tid


@dataclass
class Call:
    """A CUDA API call on thread ``tid``; ``corr`` is its correlation id (issue order)."""

    name: str  # e.g. cudaLaunchKernel_v7000
    start: float  # µs
    end: float
    corr: int
    tid: int = PID
    stream: int | None = None  # a synchronizing call's SYNCHRONIZATION row (stream sync, stream wait event)
    event: int | None = None  # ... its event (event sync, stream wait event); a cudaEventRecord's CUDA_EVENT row
    record_stream: int | None = None  # a cudaEventRecord's stream


@dataclass
class Row:
    """A GPU record: kind kernel, h2d, d2h, memset or graph."""

    kind: str
    start: float
    end: float
    corr: int
    stream: int = 7
    name: str = "k"
    pageable: bool = False
    bytes: int = 1024
    device: int = 0
    graph_node: int | None = None


@dataclass
class Tiny:
    calls: list[Call] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    thread_names: dict[int, str] = field(default_factory=dict)
    ranges: list[tuple[str, float, float]] = field(default_factory=list)  # NVTX push/pop ranges (text, start, end)


SCHEMA = """
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, id INTEGER NOT NULL, name TEXT, cuDevice INTEGER);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
    gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER, graphNodeId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER,
    graphNodeId INTEGER, copyCount INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, graphId INTEGER NOT NULL, graphExecId INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
    globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, deprecatedSyncType INTEGER, syncType INTEGER NOT NULL, eventId INTEGER NOT NULL,
    eventSyncId INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
    category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
    domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
    int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_CUDA_EVENT (deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
    greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    eventId INTEGER NOT NULL, eventSyncId INTEGER);
"""

# nsys 2025.3 writes syncType 2 for cudaStreamSynchronize and cudaStreamWaitEvent, 1 for the event calls, 4
# for a context-wide wait (its ENUM table names 2 "stream wait event": the reference goes by the call's name)
SYNC_TYPE = {"cudaStreamSynchronize": 2, "cudaStreamWaitEvent": 2, "cudaEventSynchronize": 1, "cudaEventQuery": 1}


def ns(us: float) -> int:
    return int(round(us * US))


def build(path: Path, t: Tiny) -> Path:
    """Write ``t`` at ``path`` (replaced if present)."""
    path = Path(path)
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    strings: dict[str, int] = {}

    def sid(s: str) -> int:
        if s not in strings:
            strings[s] = len(strings) + 1
        return strings[s]

    for r in t.rows:
        common = (ns(r.start), ns(r.end), r.device, 1, None, r.stream, r.corr, gpid())
        if r.kind == "kernel":
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        common + (sid(r.name), sid(r.name), sid("_Z" + r.name), 1, 1, 1, 32, 1, 1, r.graph_node))
        elif r.kind in ("h2d", "d2h"):
            kind, host = (1, "src") if r.kind == "h2d" else (2, "dst")
            mem = 0 if r.pageable else 1
            src, dst = (mem, 2) if host == "src" else (2, mem)
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        common + (r.bytes, kind, src, dst, r.graph_node, 1))
        elif r.kind == "memset":
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                        common + (0, r.bytes, r.graph_node, 2))
        elif r.kind == "graph":
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE VALUES (?,?,?,?,?,?,?,?,?,?)", common + (1, 1))
        else:
            raise ValueError(r.kind)
    for c in t.calls:
        driver = c.name.startswith("cu") and not c.name.startswith("cuda")
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?,?)",
                    (ns(c.start), ns(c.end), 1 if driver else 0, gtid(c.tid), c.corr, sid(c.name), 0, None))
        plain = c.name.split("_v")[0]
        if plain in ("cudaEventRecord",):
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_CUDA_EVENT VALUES (?,?,?,?,?,?,?,?)",
                        (0, 1, None, c.record_stream, c.corr, gpid(), c.event, c.event))
        elif c.stream is not None or c.event is not None:
            con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                        (ns(c.start), ns(c.end), 0, 1, None, c.stream if c.stream is not None else NO_ID, c.corr, gpid(),
                         None, SYNC_TYPE.get(plain, 0), c.event if c.event is not None else NO_ID,
                         c.event if c.event is not None else NO_ID))  # fmt: skip
    for text, a, b in t.ranges:
        con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, endGlobalTid, domainId) "
                    "VALUES (?,?,?,?,?,?,?)", (ns(a), ns(b), 59, text, gtid(PID), gtid(PID), 0))
    for tid, name in t.thread_names.items():
        con.execute("INSERT INTO ThreadNames VALUES (?,?,?)", (sid(name), 10, gtid(tid)))
    con.executemany("INSERT INTO StringIds VALUES (?,?)", [(i, s) for s, i in strings.items()])
    con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?,?)",
                    [("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"), ("EXPORT_PRODUCT_VERSION", "2025.3.1.90"),
                     ("EXPORT_SCHEMA_VERSION", "3.20.3")])  # fmt: skip
    con.execute("INSERT INTO TARGET_INFO_GPU VALUES (?,?,?,?)", (1 << 48, 0, "NVIDIA H200", 0))
    con.commit()
    con.close()
    return path
