"""Write plain activity records into an SQLite file shaped like an nsys export.

The CUPTI tracer (``--tracer cupti``) collects kernels, copies, memsets, API calls and the
probe's own ranges in-process, then calls :func:`write_trace_sqlite`. The file carries the
tables and columns ``clusterbench analyze`` reads from a real nsys export (the stable core
named in docs/facts.md, "nsys SQLite exports across versions"), so one reader serves both tracers.

Everything here is pure Python over frozen records: it runs and is tested without a GPU.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from clusterbench.errors import InputError
from clusterbench.io.nsys.schema import PID_MASK, PID_SHIFT

# nsys packs a process id into globalPid as pid << PID_SHIFT (the reader's own constants, so the
# packing is written once); globalTid adds the thread id in the low 24 bits.
ID_MASK = PID_MASK

# NVTX_EVENTS.eventType for a push/pop range (docs/facts.md, "nsys SQLite exports across versions").
NVTX_PUSH_POP = 59

# CUPTI_ACTIVITY_KIND_RUNTIME.eventClass as nsys writes it: 0 runtime API, 1 driver API
# (seen in the bundled H200 exports: cudaMemcpyAsync_v3020 has 0, cuLaunchKernel has 1).
EVENT_CLASS_RUNTIME = 0
EVENT_CLASS_DRIVER = 1

EXPORTER_NAME = "clusterbench cupti tracer"


def global_pid(pid: int) -> int:
    return (pid & ID_MASK) << PID_SHIFT


def global_tid(pid: int, tid: int) -> int:
    return global_pid(pid) | (tid & ID_MASK)


@dataclass(frozen=True, slots=True)
class KernelRecord:
    start: int  # ns, tracer clock
    end: int
    device_id: int
    context_id: int
    stream_id: int
    correlation_id: int
    pid: int
    name: str


@dataclass(frozen=True, slots=True)
class CopyRecord:
    start: int
    end: int
    device_id: int
    context_id: int
    stream_id: int
    correlation_id: int
    pid: int
    bytes: int
    copy_kind: int  # CUPTI/nsys numbering: 1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, ...


@dataclass(frozen=True, slots=True)
class MemsetRecord:
    start: int
    end: int
    device_id: int
    context_id: int
    stream_id: int
    correlation_id: int
    pid: int
    bytes: int
    value: int = 0


@dataclass(frozen=True, slots=True)
class ApiRecord:
    """One runtime- or driver-API call on the host."""

    start: int
    end: int
    pid: int
    tid: int
    correlation_id: int
    name: str
    return_value: int = 0
    driver: bool = False


@dataclass(frozen=True, slots=True)
class RangeRecord:
    """One push/pop range (the probe's ``clusterbench:pedestal`` and ``clusterbench:pass frames=N``)."""

    start: int
    end: int
    text: str
    pid: int
    tid: int


@dataclass(frozen=True, slots=True)
class GpuRecord:
    id: int
    name: str
    uuid: str | None = None


_SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE TARGET_INFO_GPU (id INTEGER NOT NULL, name TEXT, uuid TEXT, cuDevice INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL,
    streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
    value INTEGER NOT NULL, bytes INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
    start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER,
    correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL);
CREATE TABLE NVTX_EVENTS (
    start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT, globalTid INTEGER,
    endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
"""


class _Strings:
    """Interns strings into StringIds, as nsys does for names."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def id(self, value: str) -> int:
        found = self.ids.get(value)
        if found is None:
            found = self.ids[value] = len(self.ids)
        return found


def _check_interval(kind: str, start: int, end: int) -> None:
    if end < start:
        raise InputError(
            f"{kind} record ends before it starts: start={start} ns, end={end} ns",
            hint="this is a tracer bug: report it with the .cupti.log next to the trace",
        )


def write_trace_sqlite(
    path: Path | str,
    kernels: Iterable[KernelRecord] = (),
    memcpys: Iterable[CopyRecord] = (),
    memsets: Iterable[MemsetRecord] = (),
    runtime: Iterable[ApiRecord] = (),
    ranges: Iterable[RangeRecord] = (),
    gpu: Sequence[GpuRecord] | GpuRecord | None = None,
    *,
    meta: dict[str, str] | None = None,
) -> Path:
    """Write the records to ``path`` (replaced if present) and return the path.

    The file is written under ``<path>.tmp`` and renamed at the end, so a crash never
    leaves a complete-looking but truncated trace.
    """
    out = Path(path)
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        tmp.unlink()
    strings = _Strings()

    kernel_rows = []
    for k in kernels:
        _check_interval("kernel", k.start, k.end)
        name_id = strings.id(k.name)
        kernel_rows.append(
            (k.start, k.end, k.device_id, k.context_id, k.stream_id, k.correlation_id,
             global_pid(k.pid), name_id, name_id, name_id)
        )
    copy_rows = []
    for c in memcpys:
        _check_interval("memcpy", c.start, c.end)
        copy_rows.append(
            (c.start, c.end, c.device_id, c.context_id, c.stream_id, c.correlation_id,
             global_pid(c.pid), c.bytes, c.copy_kind)
        )
    memset_rows = []
    for m in memsets:
        _check_interval("memset", m.start, m.end)
        memset_rows.append(
            (m.start, m.end, m.device_id, m.context_id, m.stream_id, m.correlation_id,
             global_pid(m.pid), m.value, m.bytes)
        )
    api_rows = []
    for a in runtime:
        _check_interval("API", a.start, a.end)
        api_rows.append(
            (a.start, a.end, EVENT_CLASS_DRIVER if a.driver else EVENT_CLASS_RUNTIME,
             global_tid(a.pid, a.tid), a.correlation_id, strings.id(a.name), a.return_value)
        )
    range_rows = []
    for r in ranges:
        _check_interval("range", r.start, r.end)
        tid = global_tid(r.pid, r.tid)
        range_rows.append((r.start, r.end, NVTX_PUSH_POP, r.text, tid, tid, None, 0))

    if gpu is None:
        gpus: tuple[GpuRecord, ...] = ()
    elif isinstance(gpu, GpuRecord):
        gpus = (gpu,)
    else:
        gpus = tuple(gpu)
    from clusterbench import __version__

    metadata = {"EXPORT_PRODUCT_NAME": EXPORTER_NAME, "EXPORT_PRODUCT_VERSION": __version__}
    metadata.update(meta or {})

    con = sqlite3.connect(tmp)
    try:
        con.executescript(_SCHEMA)
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?,?,?)", kernel_rows)
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?,?,?,?,?,?,?,?,?)", copy_rows)
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,?,?,?,?,?,?)", memset_rows)
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?)", api_rows)
        con.executemany("INSERT INTO NVTX_EVENTS VALUES (?,?,?,?,?,?,?,?)", range_rows)
        con.executemany("INSERT INTO StringIds VALUES (?,?)", [(i, v) for v, i in strings.ids.items()])
        con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?,?)", list(metadata.items()))
        con.executemany(
            "INSERT INTO TARGET_INFO_GPU VALUES (?,?,?,?)", [(g.id, g.name, g.uuid, g.id) for g in gpus]
        )
        con.commit()
    finally:
        con.close()
    os.replace(tmp, out)
    return out
