"""Read an nsys SQLite export (any version) into arrays, read-only, in bounded memory.

What comes back (:class:`TraceData`):
- the GPU activity (kernels, graph executions, copies, memsets) as one set of arrays, grouped by
  engine (:class:`Activity`), with each kernel's name and each record's CUPTI correlation id;
- the NVTX ranges whose text starts with one of the prefixes asked for, from every domain;
- the CUDA API calls (runtime and driver tables) of every thread that touch the analysis region
  (:class:`ApiPlan`), one by one (:class:`ApiCalls`), each with its correlation id and the stream it
  names (from its GPU rows, its synchronization row or its CUDA event row);
- what each synchronizing call waited on (:class:`SyncEvents`) and every cudaEventRecord
  (:class:`EventRecords`);
- the profiler's own overhead rows, thread names, GPU names and the export's versions.

Exports without a correlationId column (none of the versions seen has one missing, but the column
is not in the stable core) read correlation 0 everywhere, and then no call names a stream (-1).

Speed: exports hold millions of rows. Tables are read in rowid chunks, each returning its columns
as comma-joined strings (``group_concat``) that NumPy parses: no Python object per row. The chunks
run on several threads (sqlite3 releases the GIL while it steps), one read-only connection each.
The API tables are read and parsed while the activity is being read and the plan made (which needs the
activity), up to API_AHEAD_ROWS rows ahead; once the plan and the correlation-to-stream index are
made, each read chunk is cut down to the region the plan keeps, on the read threads, and copied into
place in order.
"""

from __future__ import annotations

import collections
import os
import re
import sqlite3
import struct
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any
from concurrent.futures import Future, ThreadPoolExecutor
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from clusterbench.errors import TraceError
from clusterbench.io.nsys import schema as S

SQLITE_MAGIC = b"SQLite format 3\x00"
SQLITE_HEADER_BYTES = 100
MMAP_BYTES = 0  # no mmap: faulting in a mapped 100 MB+ file cost more than pread copies (measured)
# SQLite's page cache per connection, in KiB: a rowid-range scan reads each page once and needs only the
# b-tree's few inner pages again. SQLite's default of 2,000 KiB, times one connection per read thread
# (32 on 16 cores), took 60 MB at 5M records; 128 KiB costs no CPU time (measured).
CACHE_KIB = 128

# Default window: the probe's own pass range, else the dev traces' bare "pass" range.
DEFAULT_PASS_PREFIXES = ("clusterbench:pass", "pass")

TRACE_CUDA_HINT = (
    "trace CUDA with: nsys profile -t cuda,nvtx -o run python your_pipeline.py, "
    "then: nsys export --type sqlite -o run.sqlite run.nsys-rep"
)


def _cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 2


# Read threads per pool: SQLite decodes rows on one core per connection; more threads than cores only
# wait. Up to 8: on a 16-core H100 host the 1M-record export (40 activity and 96 API chunks) was analyzed in
# 1.51 s with 8 read threads, 1.68 s with 4 and 1.71 s with 16 (the chunks' Python steps contend for the GIL).
# CLUSTERBENCH_READ_THREADS sets it (the benchmark simulates a 16-core machine's memory with it).
THREADS_ENV = "CLUSTERBENCH_READ_THREADS"


def _read_threads() -> int:
    try:
        asked = int(os.environ.get(THREADS_ENV, ""))
    except ValueError:
        asked = 0
    return asked if asked > 0 else max(2, min(8, _cores()))


READ_THREADS = _read_threads()
# Rows per chunk, read and analysed: CLUSTERBENCH_CHUNK_ROWS sets it for the reader's rowid chunks and the
# analyzers' blocks alike (the tests force it down to 64 rows, so that the bundled traces cross many chunk
# edges and every answer must come out the same as in one piece).
CHUNK_ENV = "CLUSTERBENCH_CHUNK_ROWS"


def chunk_rows_setting() -> int | None:
    """CLUSTERBENCH_CHUNK_ROWS when it is set to a whole number of at least 1; None otherwise."""
    try:
        asked = int(os.environ.get(CHUNK_ENV, ""))
    except ValueError:
        return None
    return asked if asked > 0 else None


# Rowids per read job when a trace is read whole, whatever the threads. Each running job holds its chunk's
# text and arrays (about 2.5 MB at 25,000 API rows); how many jobs are read ahead bounds what the chunks
# hold together (AHEAD_ROWS). Every job takes the GIL back a few dozen times (the query, each column's
# parse, the NumPy steps over its rows), so smaller chunks cost CPU: at 16 read threads, 6,250-row chunks
# read the 1M-record trace in 2.7 to 2.9 s of CPU, 25,000-row chunks in 2.2 to 2.4 s (2 cores).
WHOLE_ROWS_DEFAULT = 25_000
ROWS_PER_CHUNK = chunk_rows_setting() or WHOLE_ROWS_DEFAULT
# Rowids per read job over time slabs by default (a slab holds two chunks' worth). Every slab costs each
# accumulator of the second pass its fixed Python steps (the held calls' context and pruning, the lanes'
# hand-overs), so fewer, larger slabs cost less: the 10M-record benchmark trace went from 60 to 64 s to 46 to
# 49 s on the 2-core machine with 50,000 rows against 25,000, for 275 to 284 MB of peak against 229 to 232
# (docs/analyze.md, "Larger slabs"); 100,000 gave nothing more, at 360 MB.
SLAB_ROWS_DEFAULT = 50_000


# Read threads over time slabs (io.nsys.slabs): at most 4. The slab path reads the largest traces, where
# memory is the limit, and its slabs are analysed one after another on the main thread and its lanes, so
# reading ahead faster does not pay: on a 16-core H100 host, 8 read threads (with 12,500-row chunks, to hold
# what 4 threads hold) took 49.7 s and 113 s of CPU for the 10M-record benchmark trace, where 2 threads
# with 25,000-row chunks take 41 to 42 s and 55 s of CPU on a 2-core machine (the GIL, and twice the slabs).
SLAB_THREADS_MOST = 4


def slab_threads() -> int:
    """Read threads over time slabs: READ_THREADS, at most SLAB_THREADS_MOST."""
    return min(READ_THREADS, SLAB_THREADS_MOST)


def slab_chunk_rows() -> int:
    """Rowids per read job over time slabs (io.nsys.slabs; a slab holds two chunks' worth), read on
    slab_threads() threads: SLAB_ROWS_DEFAULT, or ROWS_PER_CHUNK where that was set (CLUSTERBENCH_CHUNK_ROWS,
    or the module's value changed, as the tests do to cross chunk edges)."""
    if chunk_rows_setting() is not None or ROWS_PER_CHUNK != WHOLE_ROWS_DEFAULT:
        return ROWS_PER_CHUNK
    return SLAB_ROWS_DEFAULT

_PACK_DEVICE = 1 << 24  # key = pid + 2**24*device (pid < 2**24)
_PACK_PAGEABLE = 128  # memcpy code = kind + 128*pageable + 256*stream (kind < 128)
_PACK_STREAM = 256  # = 1 << 8
_TID48 = (1 << 48) - 1  # globalTid & _TID48 = pid << 24 | tid

Intervals = tuple[np.ndarray, np.ndarray]


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True, eq=False)
class Activity:
    """GPU activity records, one array element per record, grouped by engine: the records of engine
    code ``c`` are ``sections[c]`` = [lo, hi), in start order (stable: ties keep the export's order). pid and
    device may be read-only broadcasts of one value when every record shares it."""

    start_ns: np.ndarray  # int64, in start order within each engine
    end_ns: np.ndarray  # int64
    pid: np.ndarray
    device: np.ndarray
    engine: np.ndarray  # int8 index into schema.ENGINES
    bytes: np.ndarray  # int32, or int64 when a record needs it; 0 for kernels and graphs
    stream: np.ndarray  # streamId (int16, or int32 or int64 when one needs it), keyed inside its (pid, device)
    pageable: np.ndarray  # bool: a memcpy with pageable host memory on either side (srcKind/dstKind 0)
    # int32 (int64 when an id needs it): the CUPTI correlationId, the id of the API call that launched the
    # record (a node-level graph's kernel rows carry their cudaGraphLaunch's); device-launched work carries
    # an id that matches no call (0 in the exports seen); 0 where the export has no correlationId column
    correlation: np.ndarray
    sections: tuple[tuple[int, int], ...]  # per engine code
    kernel_name: np.ndarray  # int16 (int32 past 32,767 names) per kernel record (the kernel section comes first): index into kernel_names
    kernel_names: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    def section(self, engine: str) -> slice:
        lo, hi = self.sections[S.ENGINE_CODE[engine]]
        return slice(lo, hi)


@dataclass(frozen=True, slots=True, eq=False)
class NvtxRanges:
    """NVTX ranges (push/pop or start/end) as arrays; ``texts[text_index[i]]`` is range i's text and
    ``domains.get(domain[i])`` its domain's name (domain 0 is the default domain, unnamed)."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    pid: np.ndarray
    text_index: np.ndarray
    texts: tuple[str, ...]
    domain: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    domains: dict[int, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    def select(self, mask: np.ndarray) -> NvtxRanges:
        return NvtxRanges(self.start_ns[mask], self.end_ns[mask], self.pid[mask], self.text_index[mask], self.texts,
                          self.domain[mask], self.domains)  # fmt: skip

    def text_of(self, i: int) -> str:
        return self.texts[int(self.text_index[i])]

    def domain_of(self, i: int) -> str | None:
        return self.domains.get(int(self.domain[i]))


def no_ranges() -> NvtxRanges:
    e = np.empty(0, dtype=np.int64)
    return NvtxRanges(e, e, e, e, ())


@dataclass(frozen=True, slots=True)
class Thread:
    """A host thread: its process, its OS thread id and its name where the trace has one."""

    pid: int
    tid: int
    name: str | None


@dataclass(frozen=True, slots=True, eq=False)
class ApiPlan:
    """Which CUDA API calls to keep: for process ``pid``, every call that touches an interval of
    ``region[pid]`` (closed intervals: a call touching an interval's edge is kept), one by one; a
    process missing from ``region`` keeps nothing. ``region=None`` keeps every call of every process."""

    region: dict[int, Intervals] | None


KEEP_ALL = ApiPlan(region=None)
# the whole trace, as a region
EVERYTHING: Intervals = (np.array([np.iinfo(np.int64).min], dtype=np.int64), np.array([np.iinfo(np.int64).max], dtype=np.int64))


@dataclass(frozen=True, slots=True, eq=False)
class ApiTotals:
    """Calls summed per (thread, category). The reader keeps every call one by one now, so this is
    always empty; it stays for the analyzers that still add it in."""

    thread: np.ndarray  # int32 index into ApiCalls.threads
    category: np.ndarray  # int8 index into schema.API_CATEGORIES
    ns: np.ndarray
    calls: np.ndarray
    first_ns: np.ndarray
    last_ns: np.ndarray


@dataclass(frozen=True, slots=True, eq=False)
class ApiCalls:
    """Every CUDA API call (runtime and driver tables) that touches the plan's region, one by one, in
    start order (stable: ties keep the tables' order, runtime before driver). ``tables`` is empty when
    the export has no API table."""

    start_ns: np.ndarray  # int64
    end_ns: np.ndarray  # int64
    thread: np.ndarray  # int16 (int32 past 32,767 threads) index into threads
    name: np.ndarray  # int16 (int32 past 32,767 names) index into names
    # int32 (int64 when an id needs it): the call's CUPTI correlationId (0 where the export has none)
    correlation: np.ndarray
    # int16 (int32 or int64 when a stream id needs it): the stream the call names, matched by correlation id
    # within its process: the stream of its GPU rows (the largest streamId when they are on several), else
    # of its SYNCHRONIZATION row, else of its CUDA_EVENT row; -1 where it names none (no such row, or the
    # row's stream is none)
    stream: np.ndarray
    names: tuple[str, ...]  # base names (cudaStreamSynchronize, not cudaStreamSynchronize_v3020)
    name_category: np.ndarray  # int8 per name: index into schema.API_CATEGORIES
    threads: tuple[Thread, ...]
    totals: ApiTotals  # always empty
    plan: ApiPlan
    tables: tuple[str, ...]
    # per thread, over every call of the tables whatever the plan kept: the start of its first and the
    # start of its last call that issues GPU work (a launch, an asynchronous or synchronous copy, a
    # memset); -1 for a thread that issues none
    issue_first_ns: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    issue_last_ns: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    @property
    def category(self) -> np.ndarray:
        """Per kept call, its category code."""
        return self.name_category[self.name] if self.name.size else np.empty(0, dtype=np.int8)

    def thread_pid(self) -> np.ndarray:
        """Per thread, its pid."""
        return np.array([t.pid for t in self.threads], dtype=np.int64)


@dataclass(frozen=True, slots=True, eq=False)
class ProfilerOverhead:
    """Rows of PROFILER_OVERHEAD: time nsys spent on a thread (flushes, initialisation)."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    name: tuple[str, ...]  # per row

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])


@dataclass(frozen=True, slots=True, eq=False)
class SyncEvents:
    """Rows of CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: what each synchronizing API call waited on, in start
    order. Empty when the export has no such table."""

    # start and end int64; the others int32, or int64 when a value needs it
    start_ns: np.ndarray
    end_ns: np.ndarray
    pid: np.ndarray
    device: np.ndarray
    stream: np.ndarray  # the stream synchronized or made to wait; -1 for none (the export's 4294967295)
    correlation: np.ndarray  # the synchronizing API call's correlationId (0 where the export has none)
    # int8, schema.SYNC_*: 0 unknown, 1 event synchronize, 2 stream wait event, 3 stream synchronize, 4 context
    # synchronize; from syncType (deprecatedSyncType in older exports). nsys 2025.3 writes 2 for a
    # cudaStreamSynchronize too: a stream wait names an event, so a type-2 row on a stream with no event reads 3.
    sync_type: np.ndarray
    event: np.ndarray  # eventId, -1 for none

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])


@dataclass(frozen=True, slots=True, eq=False)
class EventRecords:
    """Rows of CUPTI_ACTIVITY_KIND_CUDA_EVENT, one per cudaEventRecord, in the export's order (the
    table has no times: the record call's time is its API row's, by correlation id). Empty when absent."""

    # int32 each, or int64 when a value needs it
    pid: np.ndarray
    device: np.ndarray
    stream: np.ndarray  # the stream the event was recorded on (-1 for none)
    correlation: np.ndarray  # the cudaEventRecord call's correlationId (0 where the export has none)
    event: np.ndarray  # eventId (-1 for none)
    _by_event: dict = field(default_factory=dict, repr=False)  # by_event's answers, per (pid, device)

    def __len__(self) -> int:
        return int(self.correlation.shape[0])

    def by_event(self, pid: int, device: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The records of one process and device sorted by event id, then correlation id, as int64: (event,
        correlation, stream, event << 32 | correlation). Sorted once per (pid, device) and kept with the
        records: the held calls look them up once per batch of the time slabs."""
        key = (int(pid), int(device))
        if key not in self._by_event:
            m = (self.pid == pid) & (self.device == device)
            ev, corr, stream = (np.asarray(x)[m].astype(np.int64) for x in (self.event, self.correlation, self.stream))
            o = np.lexsort((corr, ev))
            ev, corr, stream = ev[o], corr[o], stream[o]
            self._by_event[key] = (ev, corr, stream, (ev << 32) | np.clip(corr, 0, (1 << 32) - 1))
        return self._by_event[key]


def no_syncs() -> SyncEvents:
    e, i = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int32)
    return SyncEvents(e, e, i, i, i, i, np.empty(0, dtype=np.int8), i)


def no_event_records() -> EventRecords:
    i = np.empty(0, dtype=np.int32)
    return EventRecords(i, i, i, i, i)


@dataclass(frozen=True, slots=True, eq=False)
class GraphRuns:
    """The executions of CUDA graphs in a node-level trace, one per cudaGraphLaunch whose kernel nodes
    have rows (the rows share that launch's correlationId), in start order: the first node's start
    and the last node's end."""

    pid: np.ndarray
    device: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])


@dataclass(frozen=True, slots=True, eq=False)
class TraceData:
    path: Path
    tables: frozenset[str]
    schema_version: str | None  # EXPORT_SCHEMA_VERSION, when the export has a metadata table
    nsys_version: str | None  # EXPORT_PRODUCT_VERSION
    activity: Activity
    ranges: NvtxRanges  # NVTX ranges whose text starts with one of range_prefixes
    range_prefixes: tuple[str, ...]
    gpu_names: tuple[tuple[int, str], ...]  # (device id, name)
    api: ApiCalls
    overhead: ProfilerOverhead
    # How CUDA graphs were traced: "graph" (graph-level rows in CUPTI_ACTIVITY_KIND_GRAPH_TRACE),
    # "node" (CUDA_GRAPH_NODE_EVENTS present: graph kernels are kernel rows), or None (no graphs seen).
    graph_trace: str | None = None
    srckind_read: bool = True  # the memcpy table has srcKind/dstKind (pageable copies can be seen)
    thread_names: dict[int, str] = field(default_factory=dict)  # globalTid & 2**48-1 -> name
    kernel_name_kind: str = "short"  # "short" (base names) or "mangled"
    graph_runs: GraphRuns | None = None  # node-level graph executions, when asked for (graph_runs())
    # TARGET_INFO_CUDA_STREAM: (pid, streamId) -> CUPTI's stream flag (1 a blocking stream, 2 non-blocking,
    # 3 the legacy default stream, which waits for the blocking streams' work and they for its); empty when absent
    stream_flags: dict[tuple[int, int], int] = field(default_factory=dict)
    syncs: SyncEvents = field(default_factory=no_syncs)
    event_records: EventRecords = field(default_factory=no_event_records)

    def gpu_name(self, device: int) -> str | None:
        names = dict(self.gpu_names)
        if device in names:
            return names[device]
        return self.gpu_names[0][1] if len(self.gpu_names) == 1 else None


# --------------------------------------------------------------------------- opening


def check_sqlite_file(path: Path) -> None:
    """Raise TraceError unless ``path`` is a complete SQLite file (cheap header checks)."""
    if not path.exists():
        raise TraceError(f"trace not found: {path}", hint="check the path; analyze takes an nsys .sqlite export or a .nsys-rep")
    if path.is_dir():
        raise TraceError(
            f"trace is a directory, not a file: {path}",
            hint="pass one .sqlite or .nsys-rep file inside it",
        )
    size = path.stat().st_size
    if size == 0:
        raise TraceError(f"trace is an empty file (0 bytes): {path}", hint="re-export it: nsys export --type sqlite -o OUT.sqlite REPORT.nsys-rep")
    try:
        with path.open("rb") as fh:
            header = fh.read(SQLITE_HEADER_BYTES)
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc.strerror}", hint="check the file's permissions") from None
    if not header.startswith(SQLITE_MAGIC):
        raise TraceError(
            f"not an SQLite database (no SQLite header): {path}",
            hint="analyze needs an nsys SQLite export: nsys export --type sqlite -o OUT.sqlite REPORT.nsys-rep",
        )
    if len(header) < SQLITE_HEADER_BYTES:
        raise TraceError(f"trace is truncated ({size} bytes, shorter than an SQLite header): {path}", hint="re-export or copy it again")
    page_size = struct.unpack(">H", header[16:18])[0]
    page_size = 65536 if page_size == 1 else page_size
    change_counter, n_pages = struct.unpack(">II", header[24:32])
    valid_for = struct.unpack(">I", header[92:96])[0]
    if n_pages and valid_for == change_counter and size < page_size * n_pages:
        raise TraceError(
            f"trace is truncated: {size} bytes on disk, its header says {page_size * n_pages} bytes: {path}",
            hint="the copy or export was cut short; copy or re-export it",
        )


# File systems on which SQLite's file locks are slow, unsupported or unsafe: a trace there is opened with
# immutable=1 (SQLite then takes no lock and never checks for changes: an export is written once).
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "fuse.glusterfs", "lustre", "gpfs",
    "beegfs", "fuse.sshfs", "sshfs", "fuse.s3fs", "fuse.rclone", "davfs", "fuse.davfs2", "fuse.gcsfuse", "fuse.juicefs",
})  # fmt: skip
# CLUSTERBENCH_IMMUTABLE=1 opens every trace with immutable=1, =0 none; unset: those on a network file system
IMMUTABLE_ENV = "CLUSTERBENCH_IMMUTABLE"


def _mount_type(path: Path, mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """The file-system type of the mount that holds ``path`` (the longest mount point above it), from
    /proc/self/mountinfo; None where that cannot be read (not Linux)."""
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    target = str(path)
    best, kind = -1, None
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right:
            continue
        point = fields[4].encode().decode("unicode_escape")  # \040 for a space
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, kind = len(point), right.split()[0]
    return kind


def immutable(path: Path) -> bool:
    """Whether ``path`` is opened with immutable=1: CLUSTERBENCH_IMMUTABLE=1 or 0 decides; unset, when the
    file lies on a network file system (NETWORK_FILESYSTEMS)."""
    asked = os.environ.get(IMMUTABLE_ENV, "").strip()
    if asked in ("0", "1"):
        return asked == "1"
    return _mount_type(path) in NETWORK_FILESYSTEMS


def connect_read_only(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only: no journal or WAL is created and nothing is written; with immutable=1
    on a network file system (:func:`immutable`)."""
    resolved = path.resolve()
    uri = f"file:{urllib.parse.quote(str(resolved))}?mode=ro" + ("&immutable=1" if immutable(resolved) else "")
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        conn.execute("PRAGMA query_only = 1")
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    except sqlite3.Error as exc:
        raise TraceError(f"cannot open trace as SQLite ({exc}): {path}", hint="check that it is an nsys SQLite export") from None
    return conn


def _corrupt(path: Path, exc: Exception) -> TraceError:
    return TraceError(
        f"trace is corrupt or truncated ({exc}): {path}",
        hint="re-export it: nsys export --type sqlite --force-overwrite true -o OUT.sqlite REPORT.nsys-rep",
    )


def _columns(conn: sqlite3.Connection, table: str) -> frozenset[str]:
    return frozenset(row[1] for row in conn.execute(f"PRAGMA table_info([{table}])"))


def _require(conn: sqlite3.Connection, path: Path, table: str) -> frozenset[str]:
    cols = _columns(conn, table)
    missing = [c for c in S.CORE_COLUMNS[table] if c not in cols]
    if missing:
        raise TraceError(
            f"{table} lacks column {missing[0]!r} (has: {', '.join(sorted(cols))}): {path}",
            hint="this nsys export version is not supported yet; please report it with `nsys --version`",
        )
    return cols


def _ints(text: str | bytes | None) -> np.ndarray:
    if not text:
        return np.empty(0, dtype=np.int64)
    return np.fromstring(text, dtype=np.int64, sep=",")


def _widened(col: np.ndarray, n: int, v: np.ndarray) -> np.ndarray:
    """``col`` (an integer column whose first ``n`` entries are filled), or a wider copy of it (int16 ->
    int32 -> int64, the same length, only the filled part copied: the rest stays untouched memory) when
    ``v`` holds a value its type cannot."""
    if v.size == 0 or col.dtype == np.int64:
        return col
    lo, hi = int(v.min()), int(v.max())
    info = np.iinfo(col.dtype)
    if info.min <= lo and hi <= info.max:
        return col
    wide = np.int32 if col.dtype == np.int16 and np.iinfo(np.int32).min <= lo and hi <= np.iinfo(np.int32).max else np.int64
    out = np.empty(col.shape[0], dtype=wide)
    out[:n] = col[:n]
    return out


def _compact(a: np.ndarray, dtype: type = np.int32) -> np.ndarray:
    """``a`` as ``dtype`` when every value fits (int64 otherwise)."""
    if a.size == 0:
        return a.astype(dtype)
    info = np.iinfo(dtype)
    return a.astype(dtype) if info.min <= int(a.min()) and int(a.max()) <= info.max else a.astype(np.int64, copy=False)


def _pid_sql(column: str) -> str:
    return f"((ifnull({column}, 0) >> {S.PID_SHIFT}) & {S.PID_MASK})"


_SUFFIX = re.compile(r"(?:_v\d+|_ptds|_ptsz)+$")


def base_api_name(name: str) -> str:
    """cudaStreamSynchronize_v3020 -> cudaStreamSynchronize; cuStreamSynchronize_ptsz_v7000 -> cuStreamSynchronize."""
    return _SUFFIX.sub("", name, count=1)


# --------------------------------------------------------------------------- read jobs


def _chunks(lo: int, hi: int, rows: int | None = None) -> list[tuple[int, int]]:
    """Split rowids lo..hi into (exclusive, inclusive] ranges of about ``rows`` (ROWS_PER_CHUNK by default)."""
    n = max(1, -(-(hi - lo + 1) // (rows or ROWS_PER_CHUNK)))
    edges = np.linspace(lo - 1, hi, n + 1).astype(np.int64).tolist()
    return list(zip(edges[:-1], edges[1:]))


_local = threading.local()


def _thread_conn(path: Path) -> sqlite3.Connection:
    conn = getattr(_local, "conn", None)
    if conn is None or getattr(_local, "path", None) != path:
        conn = connect_read_only(path)
        conn.text_factory = bytes  # group_concat strings go straight to NumPy, undecoded
        _local.conn, _local.path = conn, path
    return conn


def _fetch(path: Path, sql: str, lo: int, hi: int) -> list:
    conn = _thread_conn(path)
    row = conn.execute(sql, (lo, hi)).fetchone()
    # numbers pass; a group_concat string is parsed (NULL, a chunk with no rows, is empty)
    try:
        return [v if isinstance(v, (int, float)) else _ints(v) for v in row]
    except ValueError:  # a value that is not an integer (text, a real): say which table.column holds it
        raise _not_integer(conn, path, sql, lo, hi) from None


# StringIds ids index lookup tables (one entry per id up to the largest seen); nsys numbers its strings from 0,
# so an id this large names no string (a trace of 16M distinct strings would be another matter).
_TABLE_IDS = 1 << 24
# Every integer nsys writes (ns times, packed process and thread ids, byte counts) stays far below 2^62 in
# magnitude; a larger one makes sums and differences overflow 64 bits.
_INT_SANE = 2**62
_REEXPORT = "re-export it: nsys export --type sqlite --force-overwrite true -o OUT.sqlite REPORT.nsys-rep"


def _not_integer(conn: sqlite3.Connection, path: Path, sql: str, lo: int | None = None,
                 hi: int | None = None) -> TraceError:
    """The error for a query whose integer columns hold something else (a chunk ``lo``..``hi`` of rowids, or the
    whole table): the first column of the query's table, among those it reads, with a value that is neither an
    integer nor NULL, naming ``table.column``, the row and the value."""
    m = re.search(r"FROM \[?(\w+)\]?", sql)
    table = m.group(1) if m else "a table"
    names = (c.decode() if isinstance(c, bytes) else c for c in _columns(conn, table)) if m else ()  # bytes here
    chunk = "" if lo is None else f"rowid > {int(lo)} AND rowid <= {int(hi or 0)} AND "
    for col in sorted(names):
        if not re.search(rf"(?<![\w]){re.escape(col)}(?!\w)", sql.split(" FROM ")[0]):
            continue
        bad = conn.execute(f"SELECT rowid, [{col}], typeof([{col}]) FROM [{table}] WHERE {chunk}"
                           f"typeof([{col}]) NOT IN ('integer', 'null') LIMIT 1").fetchone()
        if bad is not None:
            value, kind = (v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in bad[1:])
            return TraceError(f"{table}.{col} holds {kind} {value!r} at rowid {bad[0]}, where nsys writes an "
                              f"integer: {path}", hint="the export was changed after nsys wrote it; " + _REEXPORT)
        huge = conn.execute(f"SELECT rowid, [{col}] FROM [{table}] WHERE {chunk}typeof([{col}]) = 'integer' AND "
                            f"([{col}] >= {_INT_SANE} OR [{col}] <= -{_INT_SANE}) LIMIT 1").fetchone()
        if huge is not None:  # a difference or sum of it overflowed 64 bits in SQLite (a real)
            return TraceError(f"{table}.{col} holds {huge[1]:,} at rowid {huge[0]}, beyond what nsys writes (times, "
                              f"ids and sizes below 2^62): {path}",
                              hint="the export was changed after nsys wrote it; " + _REEXPORT)
    return TraceError(f"{table} holds a value that is not an integer (or an empty one) in a column nsys writes "
                      f"integers into: {path}", hint=_REEXPORT)


def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="clusterbench-read")


def _results(path: Path, futures: list[Future]) -> list:
    try:
        return [f.result() for f in futures]
    except sqlite3.DatabaseError as exc:
        for f in futures:
            f.cancel()
        raise _corrupt(path, exc) from None


def _read_small(conn: sqlite3.Connection, path: Path, tables: frozenset[str], prefixes: tuple[str, ...]) -> tuple:
    return (_read_meta(conn, tables), _read_gpu_names(conn, tables), _read_ranges(conn, path, tables, prefixes),
            _read_thread_names(conn, tables), _read_overhead(conn, path, tables))  # fmt: skip


# Read jobs in flight per pool, ahead of the one the main thread takes next: a finished chunk waits in
# its future until the main thread copies it into place, so this bounds the chunks held (not the threads).
AHEAD_PER_THREAD = 2
# Rows read ahead per pool when a trace is read whole, at most: what 4 threads hold with 2 chunks of 25,000
# rows each. Past 4 threads the jobs ahead stop growing with the threads: 8 chunks keep 8 threads of each
# pool busy, and more running at once added CPU time without reading sooner (2 cores, 16 threads: above).
AHEAD_ROWS = 200_000
# API chunks read ahead per read thread, and API rows at most, when a trace is read whole: they are read
# and parsed while the main thread copies the activity in and makes the plan, which they do not wait for
# (the plan cuts them down after). Measured on a 16-core H200 host (1M-record export, 96 API chunks, 8
# read threads): with a window of 8 chunks, each blocking its thread until the plan, the plan was ready
# 0.47 s in and the last API chunk ended 0.27 to 0.30 s after it (docs/analyze.md, "The API read ahead of the
# plan"). 48 chunks of 25,000 rows hold about 50 MB of parsed columns at most, beside the read.
API_AHEAD_PER_THREAD = 6
API_AHEAD_ROWS = 1_200_000


class _Window:
    """Read jobs submitted in order, at most ``ahead`` of them not yet taken: the main thread takes the
    futures in order (``take``), and each taken one lets the next job start. Without the bound a pool
    of 16 threads runs ahead of the main thread and every finished chunk waits in memory."""

    def __init__(self, pool: ThreadPoolExecutor, jobs: list[tuple[str, Callable, tuple]], ahead: int,
                 on_done: Callable[[Future], None] | None = None) -> None:  # fmt: skip
        self.pool, self.ahead, self.on_done = pool, max(1, ahead), on_done
        self.jobs = list(reversed(jobs))  # popped from the end, in order
        self.total = len(jobs)
        self.pending: list[tuple[str, Future]] = []  # submitted, in order
        self._fill()

    def _fill(self) -> None:
        while self.jobs and len(self.pending) < self.ahead:
            tag, fn, args = self.jobs.pop()
            f = self.pool.submit(fn, *args)
            if self.on_done is not None:
                f.add_done_callback(self.on_done)
            self.pending.append((tag, f))

    def __bool__(self) -> bool:
        return bool(self.pending or self.jobs)

    def take(self) -> tuple[str, Future]:
        tag, f = self.pending.pop(0)
        self._fill()
        return tag, f

    def next(self, path: Path) -> tuple[str, Any]:
        """Take the next job and wait for its result (the jobs not yet taken cancelled when it failed)."""
        tag, f = self.take()
        try:
            return tag, _results(path, [f])[0]
        except BaseException:
            self.cancel()
            raise

    def cancel(self) -> None:
        self.jobs.clear()
        for _, f in self.pending:
            f.cancel()
        self.pending.clear()


def _window(pool: ThreadPoolExecutor, jobs: list[tuple[str, Callable, tuple]],
            on_progress: Callable[[str, int, int], None] | None, what: str, ahead: int | None = None) -> _Window:  # fmt: skip
    """A _Window over ``jobs`` on ``pool`` (``ahead`` jobs, by default AHEAD_PER_THREAD per read thread and at
    most AHEAD_ROWS rows), calling ``on_progress(what, done, total)`` as each job finishes."""
    tick = None
    if on_progress is not None and jobs:
        lock = threading.Lock()
        done = [0]
        total = len(jobs)

        def tick(_: Future) -> None:
            with lock:
                done[0] += 1
                n = done[0]
            on_progress(what, n, total)

    return _Window(pool, jobs, _usual_ahead() if ahead is None else ahead, tick)


def _usual_ahead() -> int:
    """Read jobs in flight ahead of the main thread for every table but the API's: AHEAD_PER_THREAD per read
    thread, at most AHEAD_ROWS rows."""
    return min(AHEAD_PER_THREAD * READ_THREADS, max(1, AHEAD_ROWS // ROWS_PER_CHUNK))


def api_ahead() -> int:
    """API read jobs in flight ahead of the main thread (pure in the module's settings): API_AHEAD_PER_THREAD
    per read thread, at most API_AHEAD_ROWS rows, and never fewer than the other tables' window."""
    return max(_usual_ahead(), min(API_AHEAD_PER_THREAD * READ_THREADS, API_AHEAD_ROWS // ROWS_PER_CHUNK))


def _consume(path: Path, jobs: _Window, sink: _ActivitySink) -> _ActivitySink | None:
    """Copy the activity chunks into ``sink`` in order, dropping each once copied (a future keeps its
    result while it lives); None (and the rest cancelled) when a chunk holds records of another process
    or device than the first record's."""
    while jobs:
        table, chunk = jobs.next(path)
        if chunk["mismatch"]:
            jobs.cancel()
            return None
        sink.add(table, chunk)
    return sink


def _rowid_span(conn: sqlite3.Connection, table: str) -> tuple[int, int]:
    # two subqueries: SQLite answers a lone min() or max() of the rowid from the b-tree,
    # but scans the whole table for min() and max() together
    lo, hi = conn.execute(f"SELECT (SELECT min(rowid) FROM [{table}]), (SELECT max(rowid) FROM [{table}])").fetchone()
    return (int(lo), int(hi)) if lo is not None else (1, 0)


def _table_has_rows(conn: sqlite3.Connection, table: str) -> bool:
    return conn.execute(f"SELECT 1 FROM [{table}] LIMIT 1").fetchone() is not None


# --------------------------------------------------------------------------- activity


_KIND_TO_ENGINE = np.asarray(S.copy_kind_to_engine_code(), dtype=np.int8)


def _activity_sql(table: str, cols: frozenset[str], uniform: tuple | None, name_col: str | None) -> tuple[str, tuple[str, ...]]:
    """One rowid chunk of an activity table: the SQL and the names of its columns.

    With ``uniform=(pid, device, raw globalPid)`` the pid and device are not fetched per row; the
    query instead counts the rows that differ (``mismatch``), and a non-zero count makes the caller
    read again with the full key. Most traces hold one process on one device.

    For memcpys the stream shares one number with the copy kind and the pageable flag:
    ``kind + 128 * pageable + 256 * stream`` (``code``); one column costs less than three.
    CUPTI's copy kinds are below 32; kinds 32..127 decode as `other`.
    """
    names = ["start", "dur"]
    exprs = ["group_concat(start)", "group_concat(end - start)"]
    if table == S.MEMCPY_TABLE:
        # pageable when either side is (memory kind 0); `IS 1` keeps a NULL kind from nulling the code
        pageable = "((srcKind * dstKind = 0) IS 1)" if {"srcKind", "dstKind"} <= cols else "0"
        names.append("code")
        exprs.append(f"group_concat(copyKind + {_PACK_PAGEABLE} * {pageable} + {_PACK_STREAM} * streamId)")
    else:
        names.append("stream")
        exprs.append("group_concat(streamId)")
    if name_col is not None:
        names.append("name")
        exprs.append(f"group_concat(ifnull({name_col}, -1))")
    if "correlationId" in cols:
        names.append("corr")
        exprs.append("group_concat(ifnull(correlationId, 0))")
    if uniform is None:
        names.append("key")
        exprs.append(f"group_concat({_pid_sql('globalPid')} + {_PACK_DEVICE} * deviceId)")
    if table in (S.MEMCPY_TABLE, S.MEMSET_TABLE):
        names.append("bytes")
        exprs.append("group_concat(bytes)")  # NOT NULL in every version; a NULL shows as a length mismatch
    if uniform is not None:
        names.append("mismatch")
        raw = uniform[2]
        if raw is not None:
            # the first record's raw globalPid: cheaper than unpacking the pid per row. A record
            # of the same pid whose globalPid differs only in its other bits reads as a mismatch,
            # which costs a second read with full keys, never a wrong answer.
            exprs.append(f"count(*) - count(CASE WHEN globalPid = {int(raw)} AND deviceId = {int(uniform[1])} THEN 1 END)")
        else:
            exprs.append(f"total({_pid_sql('globalPid')} != {int(uniform[0])} OR deviceId != {int(uniform[1])})")
    sql = f"SELECT {', '.join(exprs)} FROM [{table}] WHERE rowid > ? AND rowid <= ?"
    return sql, tuple(names)


def _activity_job(path: Path, table: str, sql: str, names: tuple[str, ...], lo: int, hi: int) -> dict:
    """Read one chunk and turn it into compact columns (int64 times, int8 engine, int32 stream)."""
    row = dict(zip(names, _fetch(path, sql, lo, hi)))
    start = row["start"]
    n = start.shape[0]
    if any(isinstance(v, np.ndarray) and v.shape[0] != n for k, v in row.items() if k != "mismatch"):
        raise TraceError(f"{table} has NULL values in core columns: {path}", hint="re-export the trace with a current nsys")
    out: dict = {"start": start, "end": start + row["dur"], "mismatch": row.get("mismatch") or 0}
    if table == S.MEMCPY_TABLE:
        code = row["code"]  # bit operations: the same as % and // here, negative streams included
        kinds = code & (_PACK_PAGEABLE - 1)
        if kinds.size and int(kinds.max()) > S.MAX_COPY_KIND:
            kinds = np.where(kinds <= S.MAX_COPY_KIND, kinds, 0)  # unknown kinds -> other
        out["engine"] = _KIND_TO_ENGINE[kinds]
        out["pageable"] = (code & _PACK_PAGEABLE) != 0
        out["stream"] = code >> 8
    else:
        engine = {S.KERNEL_TABLE: "kernel", S.GRAPH_TRACE_TABLE: "graph"}.get(table, "memset")
        out["engine"] = np.full(n, S.ENGINE_CODE[engine], dtype=np.int8)
        out["stream"] = row["stream"]
    if "bytes" in row:
        out["bytes"] = row["bytes"]
    if "name" in row:
        out["name"] = row["name"]
    if "corr" in row:
        out["corr"] = row["corr"]
    if "key" in row:
        out["key"] = row["key"]
    return out


class _ActivitySink:
    """The activity arrays, filled chunk by chunk as the read threads hand them over (in the order of
    the tables: kernels, graphs, copies, memsets), each chunk dropped once copied. The arrays are
    allocated for every rowid of the tables; pages never written (rowid holes) take no memory."""

    # bytes and correlation ids are int32 and streams int16 until a record needs more (then the column is
    # widened once)
    COLUMNS = (("start", np.int64), ("end", np.int64), ("engine", np.int8), ("bytes", np.int32), ("stream", np.int16),
               ("pageable", bool), ("corr", np.int32))  # fmt: skip
    WIDER = ("bytes", "stream", "corr")

    def __init__(self, capacity: int, kernel_capacity: int, with_key: bool) -> None:
        self.cols = {k: np.empty(capacity, dtype=dt) for k, dt in self.COLUMNS}
        if with_key:
            self.cols["key"] = np.empty(capacity, dtype=np.int64)
        self.kernel_ids = np.empty(kernel_capacity, dtype=np.int64)
        self.n = 0
        self.n_kernel = 0
        self.first_byte_record: int | None = None

    def add(self, table: str, chunk: dict) -> None:
        m = chunk["start"].shape[0]
        if table in (S.MEMCPY_TABLE, S.MEMSET_TABLE) and self.first_byte_record is None:
            self.first_byte_record = self.n
        sl = slice(self.n, self.n + m)
        for k in self.WIDER:
            v = chunk.get(k)
            if v is not None:
                self.cols[k] = _widened(self.cols[k], self.n, v)
        for k, col in self.cols.items():
            v = chunk.get(k)
            col[sl] = 0 if v is None else v
        if table == S.KERNEL_TABLE:
            self.kernel_ids[self.n_kernel : self.n_kernel + m] = chunk.get("name", -1)
            self.n_kernel += m
        self.n += m

    def finish(self, uniform: tuple | None, kernel_index: np.ndarray, kernel_names: tuple[str, ...]) -> Activity:
        n = self.n
        cols = {k: v[:n] for k, v in self.cols.items()}
        # copies and memsets come after kernels and graphs: order them by engine code (a stable sort,
        # so each engine keeps the export's order), one column at a time
        first = self.first_byte_record
        if first is not None:
            tail = cols["engine"][first:]
            if tail.size > 1 and bool((tail[1:] < tail[:-1]).any()):
                perm = np.argsort(tail, kind="stable")
                for v in cols.values():
                    v[first:] = v[first:][perm]
                del perm
        counts = np.bincount(cols["engine"], minlength=len(S.ENGINES)) if n else np.zeros(len(S.ENGINES), dtype=np.int64)
        edges = np.concatenate([[0], np.cumsum(counts)]).tolist()
        sections = tuple((int(edges[i]), int(edges[i + 1])) for i in range(len(S.ENGINES)))
        # each engine's records in start order (exports are written nearly so: usually nothing to do)
        for code, (lo, hi) in enumerate(sections):
            start = cols["start"][lo:hi]
            if hi - lo > 1 and bool((start[1:] < start[:-1]).any()):
                order = np.argsort(start, kind="stable")
                for v in cols.values():
                    v[lo:hi] = v[lo:hi][order]
                if code == S.ENGINE_CODE["kernel"]:
                    kernel_index = kernel_index[order]
                del order
        if uniform is None:
            key = cols.pop("key")
            pid, device = key % _PACK_DEVICE, key // _PACK_DEVICE
        else:  # one value for every record: no memory per record
            pid = np.broadcast_to(np.int64(uniform[0]), (n,))
            device = np.broadcast_to(np.int64(uniform[1]), (n,))
        return Activity(
            start_ns=cols["start"], end_ns=cols["end"], pid=pid, device=device, engine=cols["engine"],
            bytes=cols["bytes"], stream=cols["stream"], pageable=cols["pageable"], correlation=cols["corr"], sections=sections,
            kernel_name=kernel_index, kernel_names=kernel_names,
        )  # fmt: skip


def _kernel_name_column(cols: frozenset[str], kind: str) -> str | None:
    if kind == "mangled":
        for c in ("mangledName", "demangledName", "shortName"):
            if c in cols:
                return c
    for c in ("shortName", "demangledName", "mangledName"):
        if c in cols:
            return c
    return None


def _resolve_kernel_names(conn: sqlite3.Connection, tables: frozenset[str], ids: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    """StringIds ids of kernel names (-1: none) -> (per record index into names, the names)."""
    if ids.size == 0:
        return ids.astype(np.int32), ()
    shifted = ids + 1  # -1 (no name) -> 0; ids are small non-negative integers
    if int(shifted.min()) < 0 or int(shifted.max()) >= _TABLE_IDS:  # not a StringIds id: no table over them
        present, inverse = np.unique(shifted, return_inverse=True)
        lut, shifted = None, inverse.reshape(-1)
    else:
        present = np.flatnonzero(np.bincount(shifted))
        lut = np.zeros(present[-1] + 1, dtype=np.int32)
        lut[present] = np.arange(present.size, dtype=np.int32)
    found: dict[int, str] = {}
    wanted = [int(i) - 1 for i in present.tolist() if i > 0]
    if S.STRINGS_TABLE in tables:
        for k in range(0, len(wanted), 900):  # SQLite's limit on bound parameters
            part = wanted[k : k + 900]
            q = f"SELECT id, value FROM {S.STRINGS_TABLE} WHERE id IN ({','.join('?' * len(part))})"
            found.update({int(i): str(v) for i, v in conn.execute(q, part)})
    names = tuple(found.get(int(i) - 1, f"(kernel name id {int(i) - 1})") if i > 0 else "(no name)" for i in present.tolist())
    index = shifted if lut is None else lut[shifted]
    return index.astype(np.int16 if present.size < np.iinfo(np.int16).max else np.int32), names


# --------------------------------------------------------------------------- API calls


class _Names:
    """StringIds ids of API calls -> index of their base name (and its category), resolved as the
    chunks meet new ids."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lut = np.full(0, -1, dtype=np.int32)
        self.names: list[str] = []
        self.categories = np.empty(0, dtype=np.int8)
        self.issues = np.empty(0, dtype=bool)  # per name: the call issues GPU work
        self.index: dict[str, int] = {}

    def map(self, path: Path, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(name index, category code, issues GPU work) per call."""
        if ids.size and int(ids.min()) < 0:
            raise TraceError(f"a CUDA API row has a negative nameId: {path}", hint="re-export the trace with a current nsys")
        with self.lock:
            if ids.size:
                top = int(ids.max())
                if top >= _TABLE_IDS:  # a table over the ids would not fit: no StringIds id is that large
                    raise TraceError(f"a CUDA API row (CUPTI_ACTIVITY_KIND_RUNTIME or _DRIVER) has nameId {top:,}, "
                                     f"beyond any {S.STRINGS_TABLE} id: {path}", hint=_REEXPORT)
                if top >= self.lut.size:
                    grown = np.full(top + 1, -1, dtype=np.int32)
                    grown[: self.lut.size] = self.lut
                    self.lut = grown
                present = np.flatnonzero(np.bincount(ids, minlength=1))
                missing = [int(i) for i in present[self.lut[present] < 0].tolist()]
                if missing:
                    self._add(path, missing)
            lut, cats, issues = self.lut, self.categories, self.issues
        name = lut[ids] if ids.size else ids.astype(np.int32)
        return name, cats[name], issues[name]

    def _add(self, path: Path, ids: list[int]) -> None:
        values: dict[int, str] = {}
        conn = _thread_conn(path)
        for k in range(0, len(ids), 900):  # SQLite's limit on bound parameters
            part = ids[k : k + 900]
            q = f"SELECT id, value FROM {S.STRINGS_TABLE} WHERE id IN ({','.join('?' * len(part))})"
            for i, v in conn.execute(q, part):
                values[int(i)] = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
        added = []
        for i in ids:
            base = base_api_name(values.get(i, f"(API name id {i})"))
            j = self.index.get(base)
            if j is None:
                j = self.index[base] = len(self.names)
                self.names.append(base)
                added.append(base)
            self.lut[i] = j
        if added:
            cats = [S.API_CODE[S.api_category(b)] for b in added]
            self.categories = np.concatenate([self.categories, np.asarray(cats, dtype=np.int8)])
            issues = [S.api_category(b) in S.ISSUE_CATEGORIES or b in S.SYNC_COPY_CALLS for b in added]
            self.issues = np.concatenate([self.issues, np.asarray(issues, dtype=bool)])


class _Threads:
    """globalTid & 2**48-1 -> thread index, shared by the read threads. A thread's index is its order of
    first sight; the keys seen so far are also kept sorted, so that a chunk's keys are looked up with
    one binary search over the few threads (no sort of the chunk)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.index: dict[int, int] = {}
        self.keys: list[int] = []
        # the keys seen, sorted, and their thread indices: one tuple, replaced whole (read without the lock)
        self.sorted: tuple[np.ndarray, np.ndarray] = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int32))

    def map(self, keys: np.ndarray) -> np.ndarray:
        if keys.size == 0:
            return keys.astype(np.int32)
        known, index = self.sorted
        if known.size:
            pos = np.minimum(np.searchsorted(known, keys), known.size - 1)
            hit = known[pos] == keys
            if bool(hit.all()):
                return index[pos]
            new = np.unique(keys[~hit])
        else:
            new = np.unique(keys)
        with self.lock:
            for k in new.tolist():  # in key order, as they come first in this chunk
                if k not in self.index:
                    self.index[k] = len(self.keys)
                    self.keys.append(k)
            seen = np.asarray(self.keys, dtype=np.int64)
            order = np.argsort(seen)
            self.sorted = (seen[order], order.astype(np.int32))
        return self.map(keys)


def _touches(s: np.ndarray, e: np.ndarray, iv: Intervals) -> np.ndarray:
    """Per call [s, e] (closed), whether it touches a disjoint sorted interval set (closed)."""
    ws, we = iv
    if ws.size == 0:
        return np.zeros(s.shape, dtype=bool)
    i = np.searchsorted(ws, e, side="right") - 1  # the last interval starting at or before the call's end
    return (i >= 0) & (we[np.maximum(i, 0)] >= s)


def _api_job(path: Path, sql: str, lo: int, hi: int, names: _Names, threads: _Threads) -> dict:
    """Read one chunk of an API table (before the plan is made): its calls as read, with their names
    mapped, and every thread's first and last issuing call (whatever the plan will keep)."""
    start, dur, key, name_id, corr = _fetch(path, sql, lo, hi)
    n = start.shape[0]
    if dur.shape[0] != n or key.shape[0] != n or name_id.shape[0] != n or corr.shape[0] != n:
        raise TraceError(f"a CUDA API table has NULL values in core columns: {path}", hint="re-export the trace with a current nsys")
    name, _, issues = names.map(path, name_id)
    del name_id
    out: dict = {"start": start, "dur": dur, "key": key, "name": name, "corr": corr}
    ii = np.flatnonzero(issues)
    if ii.size:
        # a thread feeds the GPU from the start of its first issuing call to the start of its last one
        u, _, first, last = _min_max_by(threads.map(key[ii]), start[ii], start[ii])
        out["i_thread"], out["i_first"], out["i_last"] = u, first, last
    return out


def _api_keep(part: dict, plan: ApiPlan, streams: _StreamIndex | None, threads: _Threads) -> dict:
    """One read chunk (``_api_job``'s) cut down to the calls that touch ``plan``'s region, with their
    threads and streams (``streams``: the correlation-to-stream index; None: every stream -1); the issuing
    spans (``i_*``) go on as they are."""
    start, dur, key, name, corr = (part.pop(k) for k in ("start", "dur", "key", "name", "corr"))
    n = start.shape[0]
    if n == 0:
        return part
    end = start + dur
    del dur
    pid = key >> 24
    if plan.region is None:
        ki: np.ndarray | slice = slice(None)
    else:
        keep = np.zeros(n, dtype=bool)
        one = int(pid.min()) == int(pid.max())  # most chunks hold one process: no sort
        for p in [int(pid[0])] if one else np.unique(pid).tolist():
            region = plan.region.get(int(p))
            if region is None:
                continue
            if one:
                keep = _touches(start, end, region)
            else:
                m = np.flatnonzero(pid == p)
                keep[m] = _touches(start[m], end[m], region)
        ki = np.flatnonzero(keep)
        del keep
    part["start"], part["end"] = start[ki], end[ki]
    part["thread"] = threads.map(key[ki])
    part["name"] = name[ki]
    part["corr"] = corr[ki]
    part["stream"] = streams.lookup(pid[ki], part["corr"]) if streams is not None else np.full(part["corr"].shape[0], -1, dtype=np.int64)
    return part


def _min_max_by(key: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For small non-negative keys (a thread index, or thread and category): the keys present, and per
    key its rows, the least ``lo`` and the greatest ``hi`` (bins over the key range: no sort)."""
    size = int(key.max()) + 1
    rows = np.bincount(key, minlength=size)
    first = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(size, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(first, key, lo)
    np.maximum.at(last, key, hi)
    present = np.flatnonzero(rows)
    return present, rows[present], first[present], last[present]


def _start_api(path: Path, conn: sqlite3.Connection, tables: frozenset[str], pool: ThreadPoolExecutor,
               on_progress: Callable[[str, int, int], None] | None = None,
               ) -> tuple[_Window | None, _Names, _Threads, tuple[str, ...], int]:  # fmt: skip
    """Start reading every API table in chunks on ``pool`` (api_ahead() jobs ahead; none waits for the plan). Also
    returns the number of rowids the tables span (at least their rows)."""
    api_tables = tuple(t for t in S.API_TABLES if t in tables and _table_has_rows(conn, t))
    names, threads = _Names(), _Threads()
    jobs: list[tuple[str, Callable, tuple]] = []
    capacity = 0
    for t in api_tables:
        cols = _require(conn, path, t)
        corr = "group_concat(ifnull(correlationId, 0))" if "correlationId" in cols else "group_concat(0)"
        q = (f"SELECT group_concat(start), group_concat(end - start), group_concat(ifnull(globalTid, 0) & {_TID48}), "
             f"group_concat(nameId), {corr} FROM [{t}] WHERE rowid > ? AND rowid <= ?")  # fmt: skip
        lo, hi = _rowid_span(conn, t)
        capacity += hi - lo + 1
        jobs += [(t, _api_job, (path, q, a, b, names, threads)) for a, b in _chunks(lo, hi)]
    window = _window(pool, jobs, on_progress, "CUDA API calls", api_ahead()) if jobs else None
    return window, names, threads, api_tables, capacity


_EMPTY_IV: Intervals = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))


def _empty_totals() -> ApiTotals:
    e = np.empty(0, dtype=np.int64)
    return ApiTotals(e.astype(np.int32), e.astype(np.int8), e, e, e, e)


def _build_api(path: Path, futures: _Window | None, plan: ApiPlan, names: _Names, threads: _Threads,
               thread_names: dict[int, str], tables: tuple[str, ...], capacity: int = 0,
               streams: _StreamIndex | None = None, pool: ThreadPoolExecutor | None = None) -> ApiCalls:  # fmt: skip
    """The kept calls of every chunk, in order, into one set of arrays (each chunk dropped once copied).
    Each read chunk is cut down to ``plan``'s region (``_api_keep``, with ``streams``) on ``pool`` (the
    read's own, needed with ``futures``), at most
    READ_THREADS of them at once ahead of the copy. The arrays are allocated for every row of the API
    tables (``capacity``); the pages past the calls kept are never written and take no memory."""
    cap = max(1, capacity)
    # thread and name indices are int16 until one needs more (then the column is widened once)
    # (correlation ids int32, streams int16: the same)
    cols = {k: np.empty(cap, dtype=dt) for k, dt in (("start", np.int64), ("end", np.int64), ("thread", np.int16),
                                                     ("name", np.int16), ("corr", np.int32), ("stream", np.int16))}  # fmt: skip
    n = 0
    ispans: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    cut: collections.deque[Future] = collections.deque()  # chunks being cut down, in order

    def kept() -> Iterator[dict]:
        while futures or cut:
            if futures and len(cut) < READ_THREADS:
                _, read = futures.next(path)
                cut.append(pool.submit(_api_keep, read, plan, streams, threads))
                del read
                continue
            f = cut.popleft()
            try:
                part = _results(path, [f])[0]
            except BaseException:
                if futures:
                    futures.cancel()
                raise
            del f
            yield part

    for part in kept():
        if "i_thread" in part:
            ispans.append((part.pop("i_thread"), part.pop("i_first"), part.pop("i_last")))
        if "start" not in part:
            continue
        m = part["start"].shape[0]
        if n + m > cap:  # rows past the rowid span: cannot happen in SQLite, but never write past the end
            cap = max(2 * cap, n + m)
            for k, v in cols.items():
                grown = np.empty(cap, dtype=v.dtype)
                grown[:n] = v[:n]
                cols[k] = grown
        for k in list(cols):
            v = part.pop(k)
            cols[k] = _widened(cols[k], n, v)
            cols[k][n : n + m] = v
        n += m
    cols = {k: v[:n] for k, v in cols.items()}
    if n > 1 and bool((cols["start"][1:] < cols["start"][:-1]).any()):
        order = np.argsort(cols["start"], kind="stable")
        for k in cols:  # one column at a time: one extra column alive, not a second set
            cols[k] = cols[k][order]
        del order
    thread_records = tuple(Thread(int(k) >> 24, int(k) & 0xFFFFFF, thread_names.get(int(k))) for k in threads.keys)
    name_category = names.categories.copy()
    ifirst = np.full(len(thread_records), np.iinfo(np.int64).max, dtype=np.int64)
    ilast = np.full(len(thread_records), np.iinfo(np.int64).min, dtype=np.int64)
    for th, a, b in ispans:
        np.minimum.at(ifirst, th.astype(np.int64), a)
        np.maximum.at(ilast, th.astype(np.int64), b)
    none = ilast < ifirst
    ifirst[none] = ilast[none] = -1
    return ApiCalls(
        start_ns=cols["start"], end_ns=cols["end"], thread=cols["thread"], name=cols["name"], correlation=cols["corr"],
        stream=cols["stream"], names=tuple(names.names), name_category=name_category, threads=thread_records,
        totals=_empty_totals(), plan=plan, tables=tables, issue_first_ns=ifirst, issue_last_ns=ilast,
    )  # fmt: skip


# --------------------------------------------------------------------------- synchronization and CUDA events


def _id_sql(column: str, cols: frozenset[str], none: int) -> str | None:
    """group_concat of an id column, ``none`` for NULL; None when the table has no such column."""
    return f"group_concat(ifnull([{column}], {none}))" if column in cols else None


def _sync_sql(cols: frozenset[str]) -> tuple[str, tuple[str, ...]]:
    # syncType; deprecatedSyncType where it is NULL or 0 (exports made from older reports keep it there)
    if {"syncType", "deprecatedSyncType"} <= cols:
        type_sql = "group_concat(CASE WHEN ifnull(syncType, 0) != 0 THEN syncType ELSE ifnull(deprecatedSyncType, 0) END)"
    elif cols & {"syncType", "deprecatedSyncType"}:
        type_sql = f"group_concat(ifnull([{min(cols & {'syncType', 'deprecatedSyncType'})}], 0))"
    else:
        type_sql = None
    parts = {
        "start": "group_concat(start)",
        "dur": "group_concat(end - start)",
        "device": "group_concat(ifnull(deviceId, 0))",
        "stream": _id_sql("streamId", cols, S.NO_ID),
        "corr": _id_sql("correlationId", cols, 0),
        "pid": f"group_concat({_pid_sql('globalPid')})" if "globalPid" in cols else None,
        "type": type_sql,
        "event": _id_sql("eventId", cols, S.NO_ID),
    }
    return _table_sql(S.SYNC_TABLE, parts)


def _event_sql(cols: frozenset[str]) -> tuple[str, tuple[str, ...]]:
    parts = {
        "device": "group_concat(ifnull(deviceId, 0))",
        "stream": _id_sql("streamId", cols, S.NO_ID),
        "corr": _id_sql("correlationId", cols, 0),
        "pid": f"group_concat({_pid_sql('globalPid')})" if "globalPid" in cols else None,
        "event": _id_sql("eventId", cols, S.NO_ID),
    }
    return _table_sql(S.CUDA_EVENT_TABLE, parts)


def _table_sql(table: str, parts: dict[str, str | None]) -> tuple[str, tuple[str, ...]]:
    names = tuple(k for k, v in parts.items() if v is not None)
    return f"SELECT {', '.join(parts[k] for k in names)} FROM [{table}] WHERE rowid > ? AND rowid <= ?", names


def _columns_job(path: Path, table: str, sql: str, names: tuple[str, ...], lo: int, hi: int) -> dict:
    row = dict(zip(names, _fetch(path, sql, lo, hi)))
    sizes = {v.shape[0] for v in row.values()}
    if len(sizes) > 1:
        raise TraceError(f"{table} has NULL values in core columns: {path}", hint="re-export the trace with a current nsys")
    return row


def _start_table(conn: sqlite3.Connection, path: Path, tables: frozenset[str], table: str, pool: ThreadPoolExecutor,
                 sql_of: Callable[[frozenset[str]], tuple[str, tuple[str, ...]]]) -> list[Future]:  # fmt: skip
    if table not in tables or not _table_has_rows(conn, table):
        return []
    sql, names = sql_of(_require(conn, path, table))
    return [pool.submit(_columns_job, path, table, sql, names, a, b) for a, b in _chunks(*_rowid_span(conn, table))]


def _gather(path: Path, futures: list[Future]) -> dict[str, np.ndarray] | None:
    """The chunks' columns, concatenated (None when there are none)."""
    parts = _results(path, futures)
    futures.clear()
    if not parts:
        return None
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _none_to_minus_one(a: np.ndarray) -> np.ndarray:
    a[a == S.NO_ID] = -1
    return a


def _finish_syncs(path: Path, futures: list[Future]) -> SyncEvents:
    cols = _gather(path, futures)
    if cols is None or cols["start"].size == 0:
        return no_syncs()
    n = cols["start"].shape[0]
    order = np.argsort(cols["start"], kind="stable")

    def col(k: str, default: int) -> np.ndarray:
        v = cols.get(k)
        return np.full(n, default, dtype=np.int64) if v is None else v[order]

    start = cols["start"][order]
    stream = _none_to_minus_one(col("stream", S.NO_ID))
    event = _none_to_minus_one(col("event", S.NO_ID))
    kind = col("type", S.SYNC_UNKNOWN)
    # nsys 2025.3 writes 2 (stream wait event) for cudaStreamSynchronize; a wait names its event
    kind[(kind == S.SYNC_STREAM_WAIT_EVENT) & (event < 0) & (stream >= 0)] = S.SYNC_STREAM
    return SyncEvents(start_ns=start, end_ns=start + cols["dur"][order], pid=_compact(col("pid", 0)),
                      device=_compact(col("device", 0)), stream=_compact(stream), correlation=_compact(col("corr", 0)),
                      sync_type=kind.astype(np.int8), event=_compact(event))  # fmt: skip


def _finish_events(path: Path, futures: list[Future]) -> EventRecords:
    cols = _gather(path, futures)
    if cols is None or cols["device"].size == 0:
        return no_event_records()
    n = cols["device"].shape[0]

    def col(k: str, default: int) -> np.ndarray:
        v = cols.get(k)
        return np.full(n, default, dtype=np.int64) if v is None else v

    return EventRecords(pid=_compact(col("pid", 0)), device=_compact(col("device", 0)),
                        stream=_compact(_none_to_minus_one(col("stream", S.NO_ID))), correlation=_compact(col("corr", 0)),
                        event=_compact(_none_to_minus_one(col("event", S.NO_ID))))  # fmt: skip


class _StreamIndex:
    """(pid, correlation id) -> the stream a call names: its GPU rows' stream (the largest when they are on
    several), else its SYNCHRONIZATION row's, else its CUDA_EVENT row's; -1 for none. Correlation id 0
    (device-launched work, exports without the column) names nothing.

    Per process, the ids that name a stream, sorted, and their streams; a call's id is looked up by binary
    search. (A table indexed by the id would cost the largest id in entries: CUPTI numbers calls it does
    not report too, 3.4 ids per reported call in the bundled dev export.) The sorts are stable sorts of
    nearly sorted ids (rows come in issue order per stream), which take about linear time."""

    def __init__(self) -> None:
        self.ids: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def build(cls, activity: Activity, syncs: SyncEvents, events: EventRecords) -> _StreamIndex:
        out = cls()
        # in priority order, highest first
        sources = [(activity.pid, activity.correlation, activity.stream), (syncs.pid, syncs.correlation, syncs.stream),
                   (events.pid, events.correlation, events.stream)]  # fmt: skip
        pids: set[int] = set()
        for p, _, _ in sources:
            if p.size:
                pids.update([int(p[0])] if p.strides == (0,) else np.unique(p).tolist())
        for pid in sorted(pids):
            parts = []
            for k, (p, c, st) in enumerate(sources):
                m = (c > 0) & (st >= 0)
                if p.size and not (p.strides == (0,) and int(p[0]) == pid):
                    m &= p == pid
                c, st = (c, st) if bool(m.all()) else (c[m], st[m])
                st = _compact(st, np.int16) if st.size else st  # stream ids are small: 2 bytes while sorting
                if k == 0 and c.size:  # GPU rows: one entry per id, its largest stream
                    order = np.argsort(c, kind="stable")
                    c, st = c[order], st[order]
                    del order
                    runs = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
                    if runs.size < c.size:
                        st = np.maximum.reduceat(st, runs)
                        c = c[runs]
                parts.append((c, st))
            c = np.concatenate([c for c, _ in parts])
            if c.size == 0:
                continue
            st = np.concatenate([s for _, s in parts])
            del parts
            if c.size > 1 and bool((c[1:] < c[:-1]).any()):
                order = np.argsort(c, kind="stable")  # ties keep the sources' priority order
                c, st = c[order], st[order]
                del order
            first = np.r_[True, c[1:] != c[:-1]]
            if not bool(first.all()):
                c, st = c[first], st[first]
            # compact: ids int32 and streams int16 where they fit (6 bytes an id instead of 16)
            if c[-1] <= np.iinfo(np.int32).max:
                c = c.astype(np.int32, copy=False)
            out.ids[pid] = (c, st)
        return out

    def lookup(self, pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
        out = np.full(corr.shape[0], -1, dtype=np.int64)
        if corr.size == 0:
            return out
        one = int(pid.min()) == int(pid.max())
        for p in [int(pid[0])] if one else np.unique(pid).tolist():
            if p not in self.ids:
                continue
            keys, vals = self.ids[p]
            sel = slice(None) if one else np.flatnonzero(pid == p)
            c = corr[sel]
            i = np.minimum(np.searchsorted(keys, c.astype(keys.dtype) if c.max() <= np.iinfo(keys.dtype).max else c), keys.size - 1)
            out[sel] = np.where((keys[i] == c) & (c > 0), vals[i], -1)
        return out


# --------------------------------------------------------------------------- small tables


def _read_ranges(conn: sqlite3.Connection, path: Path, tables: frozenset[str], prefixes: tuple[str, ...]) -> NvtxRanges:
    if S.NVTX_TABLE not in tables or not prefixes:
        return no_ranges()
    cols = _require(conn, path, S.NVTX_TABLE)
    if "text" in cols and "textId" in cols and S.STRINGS_TABLE in tables:
        text = "coalesce(n.text, s.value)"
        join = f"LEFT JOIN {S.STRINGS_TABLE} s ON s.id = n.textId"
    elif "text" in cols:
        text, join = "n.text", ""
    elif "textId" in cols and S.STRINGS_TABLE in tables:
        text, join = "s.value", f"LEFT JOIN {S.STRINGS_TABLE} s ON s.id = n.textId"
    else:
        return no_ranges()
    tid = _pid_sql("n.globalTid") if "globalTid" in cols else "0"
    dom = "ifnull(n.domainId, 0)" if "domainId" in cols else "0"
    kind = f"n.eventType IN ({','.join(str(t) for t in S.NVTX_RANGE_TYPES)}) AND " if "eventType" in cols else ""
    match = " OR ".join(f"substr({text}, 1, {len(p)}) = ?" for p in prefixes)
    # one row per distinct text, its ranges' columns joined: no Python object per range
    sql = (
        f"SELECT {text}, group_concat(n.start), group_concat(n.end), group_concat({tid}), group_concat({dom}) "
        f"FROM {S.NVTX_TABLE} n {join} WHERE {kind}n.end IS NOT NULL AND n.end >= n.start AND ({match}) GROUP BY 1"
    )
    groups = conn.execute(sql, prefixes).fetchall()
    domains: dict[int, str] = {}
    if "eventType" in cols and "domainId" in cols:
        q = f"SELECT n.domainId, {text} FROM {S.NVTX_TABLE} n {join} WHERE n.eventType = {S.NVTX_DOMAIN_CREATE}"
        domains = {int(d): str(t) for d, t in conn.execute(q) if d is not None and t is not None}
    if not groups:
        return no_ranges()
    texts = tuple(str(g[0]) for g in groups)
    try:
        cols_ = [[_ints(g[k].encode() if isinstance(g[k], str) else g[k]) for g in groups] for k in range(1, 5)]
    except ValueError:
        raise _not_integer(conn, path, sql) from None
    if any(len({c[i].size for c in cols_}) > 1 for i in range(len(groups))):  # an empty value drops out
        raise _not_integer(conn, path, sql)
    index = np.concatenate([np.full(c.size, i, dtype=np.int64) for i, c in enumerate(cols_[0])])
    start, end, pid, domain = (np.concatenate(c) for c in cols_)
    order = np.argsort(start, kind="stable")
    return NvtxRanges(start_ns=start[order], end_ns=end[order], pid=pid[order], text_index=index[order], texts=texts,
                      domain=domain[order], domains=domains)  # fmt: skip


def nvtx_ranges(path: str | os.PathLike[str], prefixes: tuple[str, ...]) -> NvtxRanges:
    """The NVTX ranges of an export whose text starts with one of ``prefixes`` (a quick read: no activity)."""
    conn = connect_read_only(Path(path))
    try:
        tables = frozenset(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"))
        return _read_ranges(conn, Path(path), tables, prefixes)
    except sqlite3.DatabaseError as exc:
        raise _corrupt(Path(path), exc) from None
    finally:
        conn.close()


def graph_runs(path: str | os.PathLike[str]) -> GraphRuns | None:
    """The node-level graph executions of an export (a quick read: one query over the kernel rows that
    are graph nodes); None when it has no such rows (no kernel table, no graphNodeId, or none set)."""
    conn = connect_read_only(Path(path))
    try:
        tables = frozenset(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"))
        if S.KERNEL_TABLE not in tables or not {"graphNodeId", "correlationId"} <= _columns(conn, S.KERNEL_TABLE):
            return None
        rows = conn.execute(
            f"SELECT {_pid_sql('globalPid')}, deviceId, min(start), max(end) FROM {S.KERNEL_TABLE} "
            "WHERE graphNodeId IS NOT NULL AND correlationId IS NOT NULL GROUP BY 1, 2, correlationId ORDER BY 3"
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        raise _corrupt(Path(path), exc) from None
    finally:
        conn.close()
    if not rows:
        return None
    pid, dev, start, end = (np.array(c, dtype=np.int64) for c in zip(*rows))
    return GraphRuns(pid, dev, start, end)


def range_texts(path: str | os.PathLike[str], limit: int = 12) -> tuple[str, ...]:
    """Up to ``limit`` distinct NVTX range texts of an export (with their domain: 'text@domain'),
    for a message that lists what there is."""
    ranges = nvtx_ranges(path, ("",))
    seen: list[str] = []
    for i in np.argsort(ranges.start_ns, kind="stable").tolist():
        d = ranges.domain_of(i)
        t = ranges.text_of(i) + (f"@{d}" if d else "")
        if t not in seen:
            seen.append(t)
        if len(seen) >= limit:
            break
    return tuple(seen)


def _read_meta(conn: sqlite3.Connection, tables: frozenset[str]) -> dict[str, str]:
    for table in S.META_TABLES:
        if table not in tables:
            continue
        cols = [row[1] for row in conn.execute(f"PRAGMA table_info([{table}])")]
        if len(cols) < 2:
            continue
        key = "name" if "name" in cols else cols[0]
        val = "value" if "value" in cols else [c for c in cols if c != key][0]
        return {str(k): str(v) for k, v in conn.execute(f"SELECT [{key}], [{val}] FROM [{table}]") if k is not None}
    return {}


def _read_gpu_names(conn: sqlite3.Connection, tables: frozenset[str]) -> tuple[tuple[int, str], ...]:
    for table in S.GPU_INFO_TABLES:
        if table not in tables:
            continue
        cols = _columns(conn, table)
        if "name" not in cols:
            continue
        dev = next((c for c in ("cuDevice", "cudaId", "id", "deviceId") if c in cols), None)
        dev_sql = f"[{dev}]" if dev else "rowid - 1"
        rows = conn.execute(f"SELECT {dev_sql}, name FROM [{table}] WHERE name IS NOT NULL AND name != ''").fetchall()
        if rows:
            return tuple((int(d) if d is not None else i, str(n)) for i, (d, n) in enumerate(rows))
    return ()


def _read_stream_flags(conn: sqlite3.Connection, tables: frozenset[str]) -> dict[tuple[int, int], int]:
    """(pid, streamId) -> the stream's CUPTI create flag, from TARGET_INFO_CUDA_STREAM (a small table)."""
    if S.STREAM_INFO_TABLE not in tables or not {"processId", "streamId", "flag"} <= _columns(conn, S.STREAM_INFO_TABLE):
        return {}
    q = f"SELECT processId, streamId, flag FROM {S.STREAM_INFO_TABLE}"
    # CUPTI's flags are 1, 2 and 3; any other value is an unknown flag (left out: 0)
    return {(int(p), int(sid)): int(f) for p, sid, f in conn.execute(q)
            if p is not None and sid is not None and f in (1, 2, 3)}


def _read_thread_names(conn: sqlite3.Connection, tables: frozenset[str]) -> dict[int, str]:
    if S.THREAD_NAMES_TABLE not in tables or S.STRINGS_TABLE not in tables:
        return {}
    cols = _columns(conn, S.THREAD_NAMES_TABLE)
    if not {"nameId", "globalTid"} <= cols:
        return {}
    order = " ORDER BY t.priority" if "priority" in cols else ""
    q = f"SELECT t.globalTid & {_TID48}, s.value FROM {S.THREAD_NAMES_TABLE} t JOIN {S.STRINGS_TABLE} s ON s.id = t.nameId{order}"
    return {int(k): str(v) for k, v in conn.execute(q) if k is not None and v}


def _read_overhead(conn: sqlite3.Connection, path: Path, tables: frozenset[str]) -> ProfilerOverhead:
    e = np.empty(0, dtype=np.int64)
    if S.PROFILER_OVERHEAD_TABLE not in tables:
        return ProfilerOverhead(e, e, e, e, ())
    cols = _require(conn, path, S.PROFILER_OVERHEAD_TABLE)
    if "nameId" in cols and S.STRINGS_TABLE in tables:
        q = (f"SELECT p.start, p.end, ifnull(p.globalTid, 0) & {_TID48}, ifnull(s.value, '') FROM {S.PROFILER_OVERHEAD_TABLE} p "
             f"LEFT JOIN {S.STRINGS_TABLE} s ON s.id = p.nameId WHERE p.end >= p.start ORDER BY p.start")  # fmt: skip
    else:
        q = f"SELECT start, end, ifnull(globalTid, 0) & {_TID48}, '' FROM {S.PROFILER_OVERHEAD_TABLE} WHERE end >= start ORDER BY start"
    rows = conn.execute(q).fetchall()
    if not rows:
        return ProfilerOverhead(e, e, e, e, ())
    s, en, k, nm = zip(*rows)
    key = np.array(k, dtype=np.int64)
    return ProfilerOverhead(np.array(s, dtype=np.int64), np.array(en, dtype=np.int64), key >> 24, key & 0xFFFFFF, tuple(str(x) for x in nm))


def _no_gpu_work(conn: sqlite3.Connection, path: Path, tables: frozenset[str]) -> TraceError:
    """The error for an export with no GPU activity records, saying what it does hold."""
    cuda = sorted(t for t in tables if t.startswith("CUPTI_"))
    runtime_calls = 0
    for table in S.API_TABLES:
        if table in tables:
            runtime_calls += int(conn.execute(f"SELECT count(*) FROM [{table}]").fetchone()[0])
    gpus = _read_gpu_names(conn, tables)
    if runtime_calls:
        # CUDA was traced: the API calls are there, the GPU side is not.
        return TraceError(
            f"no GPU work was captured: the trace holds {runtime_calls:,} CUDA API calls but no kernel, graph, "
            f"memcpy or memset records (CUDA tables: {', '.join(cuda)}): {path}. Likely causes: the program "
            "launched no kernels or copies (it failed or exited early); the GPU work ran outside the capture "
            "(--capture-range, --duration or --delay); or the process ended before CUPTI flushed its activity "
            "buffers (killed, os._exit, or no synchronize before exit)",
            hint="check that the program ran to the end; synchronize the device and exit normally; profile the "
            "whole run (drop --duration/--capture-range), then re-export",
        )
    if cuda:
        return TraceError(
            f"trace has no GPU activity: no kernel, graph, memcpy or memset records (CUDA tables present: "
            f"{', '.join(cuda)}): {path}",
            hint=TRACE_CUDA_HINT,
        )
    if gpus:
        shown = ", ".join(f"{n} (device {d})" for d, n in gpus)
        return TraceError(
            f"trace has no GPU activity: it lists a GPU ({shown}) but holds no CUDA tables, so CUDA tracing "
            f"was off for this capture (nsys -t without cuda) or the program never used CUDA: {path}",
            hint=TRACE_CUDA_HINT,
        )
    return TraceError(
        f"trace has no GPU activity: no CUDA tables and no GPU listed (a CPU-only trace): {path}",
        hint=TRACE_CUDA_HINT,
    )


# --------------------------------------------------------------------------- the read


def _glibc():  # noqa: ANN202
    """glibc, loaded once (its malloc's settings below); None where the C library is another."""
    global _LIBC
    if _LIBC is None:
        try:
            import ctypes

            lib = ctypes.CDLL("libc.so.6")
            _LIBC = lib if hasattr(lib, "mallopt") and hasattr(lib, "malloc_trim") else False
        except OSError:
            _LIBC = False
    return _LIBC or None


_LIBC = None
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters


def _fixed_mmap_threshold() -> None:
    """Large arrays come and go while a big export is read and analyzed; glibc's malloc raises its
    mmap threshold after each large free, and the memory of the arrays of a few MB after that stays
    with the process. A fixed threshold of 1 MiB gives every such array back when it is freed. A no-op
    where the C library is not glibc."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, 1 << 20)  # fixing it also stops the dynamic adjustment


ANALYSIS_HEAP_MB = 16


def analysis_heap() -> None:
    """For the analysis of a trace read whole: arrays of up to ANALYSIS_HEAP_MB MiB come from the heap and go
    back to it (glibc's M_MMAP_THRESHOLD and M_TRIM_THRESHOLD), where the read's 1 MiB threshold maps and
    unmaps each of the analysis's temporaries (one per column and step, 1 to 16 MB at 1M records): every one
    of them page-faulted in again, and with threads running, every unmap interrupts their cores. On the 1M
    trace this took 0.2 to 0.6 s of wall off analyze and added 35 to 55 MB to its peak (docs/analyze.md, "The
    heap during the analysis"). A no-op where the C library is not glibc."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, ANALYSIS_HEAP_MB << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, ANALYSIS_HEAP_MB << 20)


def heap_trim() -> None:
    """Give the heap's free memory back to the system (glibc's malloc_trim; a no-op elsewhere): the time
    slabs' small arrays come and go by the thousand and would otherwise leave the heap fragmented and
    resident."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def read_trace(
    path: str | os.PathLike[str],
    *,
    range_prefixes: tuple[str, ...] = DEFAULT_PASS_PREFIXES,
    kernel_names: str = "short",
    api_plan: Callable[[TraceData], ApiPlan] | ApiPlan = KEEP_ALL,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> TraceData:
    """Read an nsys SQLite export; raise TraceError when it is not a usable one.

    ``range_prefixes``: the NVTX ranges to read (text starts with one of them, any domain).
    ``kernel_names``: "short" (base names) or "mangled" (full names where the export has them).
    ``api_plan``: what to keep of the CUDA API calls, or a function that decides it from the trace
    read so far (activity, ranges; its ``api`` is empty then). The default keeps every call.
    ``on_progress(what, done, total)`` is called from the read threads as chunks finish ("GPU
    activity", "CUDA API calls").
    """
    if kernel_names not in ("short", "mangled"):
        raise ValueError(f"kernel_names must be 'short' or 'mangled', not {kernel_names!r}")
    path = Path(path)
    check_sqlite_file(path)
    _fixed_mmap_threshold()
    conn = connect_read_only(path)
    # two pools: the activity, which the plan needs first, is not queued behind the API chunks read ahead
    pool, api_pool = _pool(), _pool()
    try:
        try:
            data = _read(conn, path, pool, api_pool, tuple(range_prefixes), kernel_names, api_plan, on_progress)
            if not _times_in_range(data):  # times no clock gives: the arithmetic on them would overflow
                problem = _typed_problem(conn, path)
                if problem is not None:
                    raise problem
            return data
        except sqlite3.DatabaseError as exc:
            raise _corrupt(path, exc) from None
        except VALUE_ERRORS as exc:
            # a value of the wrong type that a reader did not check where it read it: name it, else a bug
            problem = _typed_problem(conn, path)
            if problem is None:
                raise
            raise problem from exc
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        api_pool.shutdown(wait=True, cancel_futures=True)
        conn.close()


def _times_in_range(data: TraceData) -> bool:
    """Whether every start and end time read lies within +-2^62 ns (min and max of each array: cheap)."""
    return values_in_range(*(a for rec in (data.activity, data.api, data.ranges, data.overhead, data.syncs)
                             for a in (rec.start_ns, rec.end_ns)))  # fmt: skip


def values_in_range(*arrays: np.ndarray) -> bool:
    """Whether every value of ``arrays`` lies within +-2^62, as every time nsys writes does (min and max of each
    array: cheap); a larger one makes sums and differences overflow 64 bits."""
    return not any(a.size and (int(a.min()) <= -_INT_SANE or int(a.max()) >= _INT_SANE) for a in arrays)


# What a reader raises on a value of the wrong type that it did not check where it read it
VALUE_ERRORS = (ValueError, TypeError, IndexError, OverflowError, KeyError, UnicodeDecodeError)


def typed_problem(path: str | os.PathLike[str]) -> TraceError | None:
    """The first value of the wrong type or size in the export at ``path`` (see :func:`_typed_problem`), on a
    connection of its own; None when there is none. For the readers that hold no connection at hand when a
    value turns out wrong (io.nsys.slabs and the analysis over its slabs)."""
    path = Path(path)
    conn = connect_read_only(path)
    try:
        return _typed_problem(conn, path)
    finally:
        conn.close()


def _typed_problem(conn: sqlite3.Connection, path: Path) -> TraceError | None:
    """The first value of the wrong type in the export: in a column declared INTEGER, a value that is neither an
    integer nor NULL (text, an empty string, a real, a blob), as TraceError naming ``table.column``, its row and
    value; None when every such column holds integers (a full scan, on the failure path only)."""
    conn.text_factory = str
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        for table in tables:
            for _cid, col, decl, *_ in conn.execute(f"PRAGMA table_info([{table}])").fetchall():
                if "INT" not in str(decl).upper():
                    continue
                bad = conn.execute(f"SELECT rowid, [{col}], typeof([{col}]) FROM [{table}] "
                                   f"WHERE typeof([{col}]) NOT IN ('integer', 'null') LIMIT 1").fetchone()
                if bad is not None:
                    value = bad[1].hex() if isinstance(bad[1], bytes) else bad[1]
                    return TraceError(f"{table}.{col} holds {bad[2]} {value!r} at rowid {bad[0]}, where nsys writes "
                                      f"an integer: {path}", hint="the export was changed after nsys wrote it; " + _REEXPORT)
                huge = conn.execute(f"SELECT rowid, [{col}] FROM [{table}] WHERE typeof([{col}]) = 'integer' AND "
                                    f"([{col}] >= {_INT_SANE} OR [{col}] <= -{_INT_SANE}) LIMIT 1").fetchone()
                if huge is not None:
                    return TraceError(f"{table}.{col} holds {huge[1]:,} at rowid {huge[0]}, beyond what nsys writes "
                                      f"(times, ids and sizes below 2^62): {path}",
                                      hint="the export was changed after nsys wrote it; " + _REEXPORT)
    except sqlite3.DatabaseError as exc:
        return _corrupt(path, exc)
    return None


def _read(conn: sqlite3.Connection, path: Path, pool: ThreadPoolExecutor, api_pool: ThreadPoolExecutor,
          prefixes: tuple[str, ...], kernel_name_kind: str, api_plan: Callable[[TraceData], ApiPlan] | ApiPlan,
          on_progress: Callable[[str, int, int], None] | None) -> TraceData:  # fmt: skip
    tables = frozenset(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"))
    if not (tables & S.NSYS_MARKER_TABLES or any(t.startswith("CUPTI_") or t == S.NVTX_TABLE for t in tables)):
        shown = ", ".join(sorted(tables)[:8]) or "none"
        raise TraceError(
            f"SQLite file is not an nsys export (tables: {shown}): {path}",
            hint="export a report with: nsys export --type sqlite -o OUT.sqlite REPORT.nsys-rep",
        )
    present = [t for t in S.ACTIVITY_TABLES if t in tables and _table_has_rows(conn, t)]
    if not present:
        raise _no_gpu_work(conn, path, tables)
    columns = {t: _require(conn, path, t) for t in present}
    spans = {t: _rowid_span(conn, t) for t in present}
    name_col = _kernel_name_column(columns[S.KERNEL_TABLE], kernel_name_kind) if S.KERNEL_TABLE in columns else None
    first = conn.execute(f"SELECT {_pid_sql('globalPid')}, deviceId, globalPid FROM [{present[0]}] LIMIT 1").fetchone()
    uniform: tuple | None = (int(first[0]), int(first[1]), None if first[2] is None else int(first[2]))

    def submit_activity(uni: tuple | None, what: str) -> _Window:
        jobs: list[tuple[str, Callable, tuple]] = []
        for table in present:
            sql, names = _activity_sql(table, columns[table], uni, name_col if table == S.KERNEL_TABLE else None)
            jobs += [(table, _activity_job, (path, table, sql, names, a, b)) for a, b in _chunks(*spans[table])]
        return _window(pool, jobs, on_progress, what)

    # The activity and the API tables read on their pools; the small tables on the activity pool
    # too (on this thread's connection, which this thread leaves alone meanwhile); this thread
    # copies the activity chunks into place as they come.
    act_jobs = submit_activity(uniform, "GPU activity")
    api_jobs, names, threads, api_tables, api_capacity = _start_api(path, conn, tables, api_pool, on_progress)
    sync_jobs = _start_table(conn, path, tables, S.SYNC_TABLE, pool, _sync_sql)
    event_jobs = _start_table(conn, path, tables, S.CUDA_EVENT_TABLE, pool, _event_sql)
    small = pool.submit(_read_small, conn, path, tables, prefixes)
    capacity = sum(hi - lo + 1 for lo, hi in spans.values())
    kernel_capacity = spans[S.KERNEL_TABLE][1] - spans[S.KERNEL_TABLE][0] + 1 if S.KERNEL_TABLE in spans else 0
    sink = _consume(path, act_jobs, _ActivitySink(capacity, kernel_capacity, with_key=False))
    if sink is None:  # several processes or devices: read again with per-row keys
        uniform = None
        act_jobs = submit_activity(None, "GPU activity (per process)")
        sink = _consume(path, act_jobs, _ActivitySink(capacity, kernel_capacity, with_key=True))
        assert sink is not None
    meta, gpu_names, ranges, thread_names, overhead = _results(path, [small])[0]
    if name_col is not None:
        kernel_index, kernel_name_list = _resolve_kernel_names(conn, tables, sink.kernel_ids[: sink.n_kernel])
    else:
        kernel_index = np.zeros(sink.n_kernel, dtype=np.int32)
        kernel_name_list = ("(no name)",) if sink.n_kernel else ()
    activity = sink.finish(uniform, kernel_index, kernel_name_list)
    del sink
    syncs = _finish_syncs(path, sync_jobs)
    event_records = _finish_events(path, event_jobs)

    if S.GRAPH_TRACE_TABLE in present:
        graph_trace = "graph"
    elif S.GRAPH_NODE_EVENTS_TABLE in tables:
        graph_trace = "node"
    else:
        graph_trace = None
    memcpy_cols = columns.get(S.MEMCPY_TABLE)
    empty_api = _build_api(path, None, KEEP_ALL, _Names(), _Threads(), thread_names, ())
    data = TraceData(
        path=path, tables=tables, schema_version=meta.get("EXPORT_SCHEMA_VERSION"),
        nsys_version=meta.get("EXPORT_PRODUCT_VERSION"), activity=activity, ranges=ranges, range_prefixes=prefixes,
        gpu_names=gpu_names, api=empty_api, overhead=overhead, graph_trace=graph_trace,
        srckind_read=memcpy_cols is None or {"srcKind", "dstKind"} <= memcpy_cols, thread_names=thread_names,
        kernel_name_kind=kernel_name_kind, syncs=syncs, event_records=event_records,
        stream_flags=_read_stream_flags(conn, tables),
    )  # fmt: skip
    plan = api_plan(data) if callable(api_plan) else api_plan
    streams = _StreamIndex.build(activity, syncs, event_records) if api_jobs else None
    api = _build_api(path, api_jobs, plan, names, threads, thread_names, api_tables, api_capacity, streams, api_pool)
    return dataclasses.replace(data, api=api)


def read_api_window(path: str | os.PathLike[str], pid: int, start_ns: int, end_ns: int,
                    data: TraceData | None = None) -> ApiCalls:  # fmt: skip
    """Every CUDA API call of process ``pid`` that touches [start_ns, end_ns], one by one (for a
    picture of a short span: one more pass over the API tables). Their streams come from ``data`` (the
    same export read with read_trace: its activity, syncs and event records); without it every
    call's stream is -1."""
    path = Path(path)
    region = (np.array([start_ns], dtype=np.int64), np.array([end_ns], dtype=np.int64))
    plan = ApiPlan(region={pid: region})
    conn = connect_read_only(path)
    pool = _pool()
    streams = _StreamIndex.build(data.activity, data.syncs, data.event_records) if data is not None else None
    try:
        tables = frozenset(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"))
        futures, names, threads, api_tables, capacity = _start_api(path, conn, tables, pool)
        return _build_api(path, futures, plan, names, threads, _read_thread_names(conn, tables), api_tables, capacity,
                          streams, pool)  # fmt: skip
    except sqlite3.DatabaseError as exc:
        raise _corrupt(path, exc) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        conn.close()


def table_rows(path: str | os.PathLike[str]) -> dict[str, int]:
    """The rows of each activity, CUDA API and synchronization table the export holds (S.ACTIVITY_TABLES,
    S.API_TABLES, S.SYNC_TABLE: the tables whose rows analyze keeps one by one when it reads whole), by
    table: its largest rowid, which SQLite reads from the table's b-tree without a scan (nsys numbers the rows
    from 1; a deleted row leaves the largest as it was, so this is never fewer than the rows). TraceError for a
    file SQLite cannot read."""
    path = Path(path)
    conn = connect_read_only(path)
    try:
        tables = frozenset(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        return {t: max(0, int(conn.execute(f"SELECT ifnull(max(rowid), 0) FROM [{t}]").fetchone()[0]))
                for t in (*S.ACTIVITY_TABLES, *S.API_TABLES, S.SYNC_TABLE) if t in tables}  # fmt: skip
    except sqlite3.DatabaseError as exc:
        raise _corrupt(path, exc) from None
    finally:
        conn.close()


def read_shell(path: str | os.PathLike[str], *, range_prefixes: tuple[str, ...] = DEFAULT_PASS_PREFIXES,
               kernel_names: str = "short") -> TraceData:  # fmt: skip
    """What read_trace reads but the big tables, checked as it checks them: the export's versions, GPU
    names, NVTX ranges, thread names, profiler overhead, stream flags, CUDA event records, how graphs were
    traced; the activity, the API calls and the synchronization rows are empty (io.nsys.slabs reads them
    in time slabs). TraceError as read_trace raises it for an export that is not a usable one."""
    if kernel_names not in ("short", "mangled"):
        raise ValueError(f"kernel_names must be 'short' or 'mangled', not {kernel_names!r}")
    path = Path(path)
    check_sqlite_file(path)
    conn = connect_read_only(path)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clusterbench-read")
    try:
        tables = frozenset(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"))
        if not (tables & S.NSYS_MARKER_TABLES or any(t.startswith("CUPTI_") or t == S.NVTX_TABLE for t in tables)):
            shown = ", ".join(sorted(tables)[:8]) or "none"
            raise TraceError(f"SQLite file is not an nsys export (tables: {shown}): {path}",
                             hint="export a report with: nsys export --type sqlite -o OUT.sqlite REPORT.nsys-rep")  # fmt: skip
        present = [t for t in S.ACTIVITY_TABLES if t in tables and _table_has_rows(conn, t)]
        if not present:
            raise _no_gpu_work(conn, path, tables)
        columns = {t: _require(conn, path, t) for t in present}
        for t in S.API_TABLES:
            if t in tables and _table_has_rows(conn, t):
                _require(conn, path, t)
        event_jobs = _start_table(conn, path, tables, S.CUDA_EVENT_TABLE, pool, _event_sql)
        meta, gpu_names, ranges, thread_names, overhead = _read_small(conn, path, tables, tuple(range_prefixes))
        event_records = _finish_events(path, event_jobs)
        if S.GRAPH_TRACE_TABLE in present:
            graph_trace = "graph"
        elif S.GRAPH_NODE_EVENTS_TABLE in tables:
            graph_trace = "node"
        else:
            graph_trace = None
        memcpy_cols = columns.get(S.MEMCPY_TABLE)
        e64 = np.empty(0, dtype=np.int64)
        activity = Activity(e64, e64, e64, e64, np.empty(0, np.int8), e64, e64, np.empty(0, bool), e64,
                            tuple((0, 0) for _ in S.ENGINES), np.empty(0, np.int32), ())  # fmt: skip
        api_tables = tuple(t for t in S.API_TABLES if t in tables and _table_has_rows(conn, t))
        api = _build_api(path, None, KEEP_ALL, _Names(), _Threads(), thread_names, api_tables)
        if not values_in_range(ranges.start_ns, ranges.end_ns, overhead.start_ns, overhead.end_ns):
            problem = _typed_problem(conn, path)  # times no clock gives: the arithmetic on them would overflow
            if problem is not None:
                raise problem
        return TraceData(
            path=path, tables=tables, schema_version=meta.get("EXPORT_SCHEMA_VERSION"),
            nsys_version=meta.get("EXPORT_PRODUCT_VERSION"), activity=activity, ranges=ranges, range_prefixes=tuple(range_prefixes),
            gpu_names=gpu_names, api=api, overhead=overhead, graph_trace=graph_trace,
            srckind_read=memcpy_cols is None or {"srcKind", "dstKind"} <= memcpy_cols, thread_names=thread_names,
            kernel_name_kind=kernel_names, event_records=event_records, stream_flags=_read_stream_flags(conn, tables),
        )  # fmt: skip
    except sqlite3.DatabaseError as exc:
        raise _corrupt(path, exc) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        conn.close()
