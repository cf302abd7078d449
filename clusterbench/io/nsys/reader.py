"""Read an nsys SQLite export (any version) into engine intervals, read-only.

Speed: exports hold millions of rows. Tables are read in rowid chunks, each returning its
columns as comma-joined strings (``group_concat``) that NumPy parses: no Python object per
row. The chunks run on two threads (sqlite3 releases the GIL while it steps), one read-only
connection each. The host-sync API calls are read in the background and waited for on
first use, so they overlap with the analysis of the activity.
"""

from __future__ import annotations

import os
import re
import sqlite3
import struct
import threading
import urllib.parse
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clusterbench.errors import TraceError
from clusterbench.io.nsys import schema as S

SQLITE_MAGIC = b"SQLite format 3\x00"
SQLITE_HEADER_BYTES = 100
MMAP_BYTES = 0  # no mmap: faulting in a mapped 100 MB+ file cost more than pread copies (measured)

# Default window: the probe's own pass range, else the dev traces' bare "pass" range.
DEFAULT_PASS_PREFIXES = ("clusterbench:pass", "pass")

TRACE_CUDA_HINT = (
    "trace CUDA with: nsys profile -t cuda,nvtx -o run python your_pipeline.py, "
    "then: nsys export --type sqlite -o run.sqlite run.nsys-rep"
)

READ_THREADS = 2
ROWS_PER_CHUNK = 25_000  # rowids per read job: balances two threads; small strings reuse freed memory

_PACK_DEVICE = 1 << 24  # key = pid + 2**24*device (pid < 2**24)
_PACK_PAGEABLE = 128  # memcpy code = kind + 128*pageable + 256*stream (kind < 128)
_PACK_STREAM = 256  # = 1 << 8


@dataclass(frozen=True, slots=True, eq=False)
class Activity:
    """GPU activity records, one array element per record (same length; pid and device may
    be read-only broadcasts of one value when every record shares it)."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    pid: np.ndarray
    device: np.ndarray
    engine: np.ndarray  # int8 index into schema.ENGINES
    bytes: np.ndarray  # 0 for kernels and graphs
    stream: np.ndarray  # streamId, keyed inside its (pid, device)
    pageable: np.ndarray  # bool: a memcpy with pageable host memory on either side (srcKind/dstKind 0)

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])


@dataclass(frozen=True, slots=True, eq=False)
class NvtxRanges:
    """NVTX ranges (push/pop or start/end) as arrays; ``texts[text_index[i]]`` is range i's text."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    pid: np.ndarray
    text_index: np.ndarray
    texts: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.start_ns.shape[0])

    def select(self, mask: np.ndarray) -> NvtxRanges:
        return NvtxRanges(self.start_ns[mask], self.end_ns[mask], self.pid[mask], self.text_index[mask], self.texts)

    def text_of(self, i: int) -> str:
        return self.texts[int(self.text_index[i])]


def no_ranges() -> NvtxRanges:
    e = np.empty(0, dtype=np.int64)
    return NvtxRanges(e, e, e, e, ())


@dataclass(frozen=True, slots=True, eq=False)
class HostSyncCalls:
    """Runtime/driver API calls that block the host (see schema.HOST_SYNC_CALLS)."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    pid: np.ndarray
    names: tuple[str, ...]  # the distinct base names found
    # per call, its index into ``names``; when every name is of one kind (all synchronous copies,
    # or none), the reader does not fetch names and every call points at names[0]
    name_index: np.ndarray | None = None

    def is_call(self, wanted: frozenset[str]) -> np.ndarray:
        """Per call, whether its base name is in ``wanted``."""
        lut = np.array([n in wanted for n in self.names] + [False], dtype=bool)
        if self.name_index is None:
            return np.zeros(self.start_ns.shape, dtype=bool)
        return lut[self.name_index]


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
    _host_sync: _Deferred
    # How CUDA graphs were traced: "graph" (graph-level rows in CUPTI_ACTIVITY_KIND_GRAPH_TRACE),
    # "node" (CUDA_GRAPH_NODE_EVENTS present: graph kernels are kernel rows), or None (no graphs seen).
    graph_trace: str | None = None
    srckind_read: bool = True  # the memcpy table has srcKind/dstKind (pageable copies can be seen)

    @property
    def host_sync(self) -> HostSyncCalls:
        """Host-sync API calls (read on background threads; waits for them on first use)."""
        return self._host_sync.get()

    def gpu_name(self, device: int) -> str | None:
        names = dict(self.gpu_names)
        if device in names:
            return names[device]
        return self.gpu_names[0][1] if len(self.gpu_names) == 1 else None


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


def connect_read_only(path: Path) -> sqlite3.Connection:
    """Open ``path`` read-only: no journal or WAL is created and nothing is written."""
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        conn.execute("PRAGMA query_only = 1")
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
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


def _ints(text: str | None) -> np.ndarray:
    if not text:
        return np.empty(0, dtype=np.int64)
    return np.fromstring(text, dtype=np.int64, sep=",")


def _pid_sql(column: str) -> str:
    return f"((ifnull({column}, 0) >> {S.PID_SHIFT}) & {S.PID_MASK})"


def _activity_sql(table: str, cols: frozenset[str], uniform: tuple | None) -> tuple[str, tuple[str, ...]]:
    """One rowid chunk of an activity table: the SQL and the names of its columns.

    With ``uniform=(pid, device)`` the pid and device are not fetched per row; the query
    instead counts the rows that differ (``mismatch``), and a non-zero count makes the
    caller read again with the full key. Most traces hold one process on one device.

    The stream is always read (the rules look at how many streams carried work). For
    memcpys it shares one number with the copy kind and the pageable flag:
    ``kind + 128 * pageable + 256 * stream`` (``code``); one column costs less than three.
    CUPTI's copy kinds are below 32; kinds 32..127 decode as `other`.
    """
    names = ["start", "dur"]
    exprs = ["group_concat(start)", "group_concat(end - start)"]
    if table == S.MEMCPY_TABLE:
        # pageable when either side is (memory kind 0); `IS 1` keeps a NULL kind from nulling the code
        pageable = "((srcKind * dstKind = 0) IS 1)" if {"srcKind", "dstKind"} <= cols else "0"
        code = f"(copyKind + {_PACK_PAGEABLE} * {pageable} + {_PACK_STREAM} * streamId)"
        names.append("code")
        exprs.append(f"group_concat({code})")
    else:
        names.append("stream")
        exprs.append("group_concat(streamId)")
    if uniform is None:
        names.append("key")
        exprs.append(f"group_concat({_pid_sql('globalPid')} + {_PACK_DEVICE} * deviceId)")
    if table in (S.MEMCPY_TABLE, S.MEMSET_TABLE):
        names.append("bytes")
        exprs.append("group_concat(bytes)")  # NOT NULL in every version; a NULL shows as a length mismatch
    if uniform is not None:
        names.append("mismatch")
        raw = uniform[2] if len(uniform) > 2 else None
        if raw is not None:
            # the first record's raw globalPid: cheaper than unpacking the pid per row. A record
            # of the same pid whose globalPid differs only in its other bits reads as a mismatch,
            # which costs a second read with full keys, never a wrong answer.
            exprs.append(f"count(*) - count(CASE WHEN globalPid = {int(raw)} AND deviceId = {int(uniform[1])} THEN 1 END)")
        else:
            exprs.append(f"total({_pid_sql('globalPid')} != {int(uniform[0])} OR deviceId != {int(uniform[1])})")
    sql = f"SELECT {', '.join(exprs)} FROM [{table}] WHERE rowid > ? AND rowid <= ?"
    return sql, tuple(names)


def _chunks(lo: int, hi: int) -> list[tuple[int, int]]:
    """Split rowids lo..hi into (exclusive, inclusive] ranges of about ROWS_PER_CHUNK."""
    n = max(1, -(-(hi - lo + 1) // ROWS_PER_CHUNK))
    edges = np.linspace(lo - 1, hi, n + 1).astype(np.int64).tolist()
    return list(zip(edges[:-1], edges[1:]))


_local = threading.local()


def _job(path: Path, sql: str, lo: int, hi: int) -> list:
    conn = getattr(_local, "conn", None)
    if conn is None or getattr(_local, "path", None) != path:
        conn = connect_read_only(path)
        conn.text_factory = bytes  # group_concat strings go straight to NumPy, undecoded
        _local.conn, _local.path = conn, path
    row = conn.execute(sql, (lo, hi)).fetchone()
    return [v if isinstance(v, (int, float)) else _ints(v) for v in row]


def _start_jobs(path: Path, jobs: list[tuple[str, int, int]]) -> list[Future]:
    """Start (sql, lo, hi) read jobs on READ_THREADS threads, one read-only connection each.

    sqlite3 releases the GIL while it steps, so two threads use two cores; a connection is
    opened once per thread (one per job costs more than it saves). The threads end, and
    their connections close, once the queue is drained.
    """
    pool = ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="clusterbench-read")
    try:
        return [pool.submit(_job, path, sql, lo, hi) for sql, lo, hi in jobs]
    finally:
        pool.shutdown(wait=False)


def _collect(path: Path, futures: list[Future]) -> list[list]:
    try:
        return [f.result() for f in futures]
    except sqlite3.DatabaseError as exc:
        for f in futures:
            f.cancel()
        raise _corrupt(path, exc) from None


def _run_jobs(path: Path, jobs: list[tuple[str, int, int]]) -> list[list]:
    return _collect(path, _start_jobs(path, jobs))


class _Deferred:
    """A value computed in the background (host-sync calls read while activity is analyzed)."""

    __slots__ = ("_fn", "_value", "_lock")

    def __init__(self, fn: Callable[[], HostSyncCalls]) -> None:
        self._fn: Callable[[], HostSyncCalls] | None = fn
        self._value: HostSyncCalls | None = None
        self._lock = threading.Lock()

    def get(self) -> HostSyncCalls:
        with self._lock:
            if self._fn is not None:
                self._value, self._fn = self._fn(), None
            assert self._value is not None
            return self._value


_KIND_TO_ENGINE = np.asarray(S.copy_kind_to_engine_code(), dtype=np.int8)


def _build_activity(path: Path, pieces: dict[str, dict[str, list]], uniform: tuple | None) -> Activity:
    """Turn the parsed chunks of every activity table into one Activity (one copy per column)."""
    out: dict[str, list[np.ndarray]] = {k: [] for k in ("start", "end", "engine", "bytes", "key", "stream", "pageable")}
    for table, cols in pieces.items():
        for j, start in enumerate(cols["start"]):
            n = start.shape[0]
            chunk = {k: v[j] for k, v in cols.items() if k != "mismatch"}
            if any(a.shape[0] != n for a in chunk.values()):
                raise TraceError(f"{table} has NULL values in core columns: {path}", hint="re-export the trace with a current nsys")
            out["start"].append(start)
            out["end"].append(start + chunk["dur"])
            if uniform is None:
                out["key"].append(chunk["key"])
            if table == S.MEMCPY_TABLE:
                code = chunk["code"]  # bit operations: the same as % and // here, negative streams included
                kinds = code & (_PACK_PAGEABLE - 1)
                if kinds.size and int(kinds.max()) > S.MAX_COPY_KIND:
                    kinds = np.where(kinds <= S.MAX_COPY_KIND, kinds, 0)  # unknown kinds -> other
                out["engine"].append(_KIND_TO_ENGINE[kinds])
                out["pageable"].append((code & _PACK_PAGEABLE) != 0)
                out["stream"].append(code >> 8)
            else:
                name = {S.KERNEL_TABLE: "kernel", S.GRAPH_TRACE_TABLE: "graph"}.get(table, "memset")
                out["engine"].append(np.full(n, S.ENGINE_CODE[name], dtype=np.int8))
                out["pageable"].append(np.zeros(n, dtype=bool))
                out["stream"].append(chunk["stream"])
            out["bytes"].append(chunk["bytes"] if "bytes" in chunk else np.zeros(n, dtype=np.int64))
    cat = {k: np.concatenate(v) if v else None for k, v in out.items()}
    total = cat["start"].shape[0] if cat["start"] is not None else 0
    if uniform is None:
        key = cat["key"]
        pid = key % _PACK_DEVICE
        device = key // _PACK_DEVICE
    else:  # one value for every record: no memory per record
        pid = np.broadcast_to(np.int64(uniform[0]), (total,))
        device = np.broadcast_to(np.int64(uniform[1]), (total,))
    return Activity(
        start_ns=cat["start"],
        end_ns=cat["end"],
        pid=pid,
        device=device,
        engine=cat["engine"],
        bytes=cat["bytes"],
        stream=cat["stream"],
        pageable=cat["pageable"],
    )


_SUFFIX = re.compile(r"(?:_v\d+|_ptds|_ptsz)+$")


def base_api_name(name: str) -> str:
    """cudaStreamSynchronize_v3020 -> cudaStreamSynchronize; cuStreamSynchronize_ptsz_v7000 -> cuStreamSynchronize."""
    return _SUFFIX.sub("", name, count=1)


def _host_sync_ids(conn: sqlite3.Connection, path: Path, tables: frozenset[str]) -> tuple[dict[int, int], tuple[str, ...]]:
    """StringIds ids of the host-sync API names present (id -> index into the names), and their base names."""
    if S.RUNTIME_TABLE not in tables or S.STRINGS_TABLE not in tables:
        return {}, ()
    _require(conn, path, S.RUNTIME_TABLE)
    found: list[tuple[int, str]] = []
    likes = " OR ".join("value LIKE ?" for _ in S.HOST_SYNC_CALLS)
    for sid, value in conn.execute(f"SELECT id, value FROM {S.STRINGS_TABLE} WHERE {likes}", [f"{n}%" for n in sorted(S.HOST_SYNC_CALLS)]):
        base = base_api_name(value or "")
        if base in S.HOST_SYNC_CALLS:
            found.append((int(sid), base))
    names = tuple(sorted({b for _, b in found}))
    return {sid: names.index(b) for sid, b in found}, names


def _host_sync_sql(ids: dict[int, int], pid: int | None, names: bool, key: int | None = None) -> tuple[str, tuple[str, ...]]:
    """Host-sync calls in a rowid range. With ``pid`` the calls of other processes are only
    counted (``mismatch``), not fetched; a non-zero count makes the caller fetch pids. The
    name of each call is fetched only when ``names`` (the rules need it only when synchronous
    copies and other sync calls are both present). ``key``, the first activity record's
    globalPid >> 24 (the pid with the hardware bits above it), makes the check cheaper."""
    where = f"rowid > ? AND rowid <= ? AND nameId IN ({','.join(str(i) for i in sorted(ids))})"
    cols, out = ["group_concat(start)", "group_concat(end - start)"], ["start", "dur"]
    if names:
        cols.append("group_concat(nameId)")
        out.append("name")
    if pid is None:
        cols.append(f"group_concat({_pid_sql('globalTid')})")
        out.append("pid")
    elif key is not None:
        # globalTid >> 24 is the pid with the hardware bits above it, as globalPid >> 24 is; a
        # call of the same pid under other hardware bits reads as a mismatch: a second read, not an error
        cols.append(f"count(*) - count(CASE WHEN globalTid >> {S.PID_SHIFT} = {int(key)} THEN 1 END)")
        out.append("mismatch")
    else:
        cols.append(f"total({_pid_sql('globalTid')} != {int(pid)})")
        out.append("mismatch")
    return f"SELECT {', '.join(cols)} FROM {S.RUNTIME_TABLE} WHERE {where}", tuple(out)


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
    match = " OR ".join(f"substr({text}, 1, {len(p)}) = ?" for p in prefixes)
    sql = (
        f"SELECT n.start, n.end, {text}, {tid} FROM {S.NVTX_TABLE} n {join} "
        f"WHERE n.end IS NOT NULL AND n.end >= n.start AND ({match}) ORDER BY n.start"
    )
    rows = conn.execute(sql, prefixes).fetchall()
    if not rows:
        return no_ranges()
    starts, ends, texts, pids = zip(*rows)
    uniq, index = np.unique(np.array(texts, dtype=object), return_inverse=True)
    return NvtxRanges(
        start_ns=np.array(starts, dtype=np.int64),
        end_ns=np.array(ends, dtype=np.int64),
        pid=np.array(pids, dtype=np.int64),
        text_index=index.astype(np.int64).reshape(-1),
        texts=tuple(str(t) for t in uniq),
    )


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


def _rowid_span(conn: sqlite3.Connection, table: str) -> tuple[int, int]:
    # two subqueries: SQLite answers a lone min() or max() of the rowid from the b-tree,
    # but scans the whole table for min() and max() together
    lo, hi = conn.execute(f"SELECT (SELECT min(rowid) FROM [{table}]), (SELECT max(rowid) FROM [{table}])").fetchone()
    return (int(lo), int(hi)) if lo is not None else (1, 0)


def _table_has_rows(conn: sqlite3.Connection, table: str) -> bool:
    return conn.execute(f"SELECT 1 FROM [{table}] LIMIT 1").fetchone() is not None


def _no_gpu_work(conn: sqlite3.Connection, path: Path, tables: frozenset[str]) -> TraceError:
    """The error for an export with no GPU activity records, saying what it does hold."""
    cuda = sorted(t for t in tables if t.startswith("CUPTI_"))
    runtime_calls = 0
    if S.RUNTIME_TABLE in tables:
        runtime_calls = int(conn.execute(f"SELECT count(*) FROM [{S.RUNTIME_TABLE}]").fetchone()[0])
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


def read_trace(
    path: str | os.PathLike[str],
    *,
    range_prefixes: tuple[str, ...] = DEFAULT_PASS_PREFIXES,
    by_stream: bool = False,
) -> TraceData:
    """Read an nsys SQLite export; raise TraceError when it is not a usable one.

    Returns the GPU activity (kernels, graph executions, copies, memsets) as arrays, the
    NVTX ranges whose text starts with one of ``range_prefixes`` (inline text or through
    textId), the host-sync API calls, the GPU names and the export's schema version.
    Streams are always read; ``by_stream`` is kept for callers and changes nothing.
    """
    del by_stream
    path = Path(path)
    check_sqlite_file(path)
    conn = connect_read_only(path)
    try:
        try:
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
            rowid_spans = {}
            columns = {}
            for table in present:
                columns[table] = _require(conn, path, table)
                rowid_spans[table] = _rowid_span(conn, table)
            sync_ids, sync_names = _host_sync_ids(conn, path, tables)
            runtime_span = _rowid_span(conn, S.RUNTIME_TABLE) if sync_ids else (0, 0)
            first = conn.execute(f"SELECT {_pid_sql('globalPid')}, deviceId, globalPid FROM [{present[0]}] LIMIT 1").fetchone()
            # Each table is read in rowid chunks on two threads (sqlite3 releases the GIL
            # while it steps). First assume one (pid, device) -- the first record's -- and
            # read again with per-row keys if that proves wrong. The small tables are read
            # here meanwhile.
            uniform: tuple | None = (int(first[0]), int(first[1]), None if first[2] is None else int(first[2]))
            small: dict = {}

            def read_small() -> None:
                small["meta"] = _read_meta(conn, tables)
                small["gpu_names"] = _read_gpu_names(conn, tables)
                small["ranges"] = _read_ranges(conn, path, tables, tuple(range_prefixes))

            activity, host_sync = _read_rows(
                path, rowid_spans, columns, sync_ids, sync_names, runtime_span, uniform, read_small
            )
            if activity is None:
                activity, host_sync = _read_rows(path, rowid_spans, columns, sync_ids, sync_names, runtime_span, None)
            assert activity is not None and host_sync is not None
            meta, gpu_names, ranges = small["meta"], small["gpu_names"], small["ranges"]
        except sqlite3.DatabaseError as exc:
            raise _corrupt(path, exc) from None
    finally:
        conn.close()

    if S.GRAPH_TRACE_TABLE in present:
        graph_trace = "graph"
    elif S.GRAPH_NODE_EVENTS_TABLE in tables:
        graph_trace = "node"
    else:
        graph_trace = None
    memcpy_cols = columns.get(S.MEMCPY_TABLE)
    return TraceData(
        path=path,
        tables=tables,
        schema_version=meta.get("EXPORT_SCHEMA_VERSION"),
        nsys_version=meta.get("EXPORT_PRODUCT_VERSION"),
        activity=activity,
        ranges=ranges,
        range_prefixes=tuple(range_prefixes),
        _host_sync=host_sync,
        gpu_names=gpu_names,
        graph_trace=graph_trace,
        srckind_read=memcpy_cols is None or {"srcKind", "dstKind"} <= memcpy_cols,
    )


def _read_rows(
    path: Path,
    rowid_spans: dict[str, tuple[int, int]],
    columns: dict[str, frozenset[str]],
    sync_ids: dict[int, int],
    sync_names: tuple[str, ...],
    runtime_span: tuple[int, int],
    uniform: tuple | None,
    meanwhile: Callable[[], None] | None = None,
) -> tuple[Activity | None, _Deferred | None]:
    """Read activity rows; start reading host-sync rows in the background.

    Returns (None, None) when ``uniform`` proved wrong (several processes or devices).
    """
    owners: list[tuple[str, tuple[str, ...]]] = []
    jobs: list[tuple[str, int, int]] = []
    for table, (lo, hi) in rowid_spans.items():
        sql, names = _activity_sql(table, columns[table], uniform)
        for a, b in _chunks(lo, hi):
            owners.append((table, names))
            jobs.append((sql, a, b))
    sync_pid = uniform[0] if uniform is not None else None
    n_activity = len(jobs)
    kinds = {n in S.SYNC_COPY_CALLS for n in sync_names}
    per_call_names = len(kinds) > 1  # one kind of call only: its name follows from the kind
    if sync_ids:
        raw = uniform[2] if uniform is not None and len(uniform) > 2 else None
        key = (raw >> S.PID_SHIFT) if raw is not None else None
        sql, sync_cols = _host_sync_sql(sync_ids, sync_pid, per_call_names, key)
        jobs += [(sql, a, b) for a, b in _chunks(*runtime_span)]
    futures = _start_jobs(path, jobs)
    if meanwhile is not None:
        try:
            meanwhile()
        except BaseException:
            for f in futures:
                f.cancel()
            raise
    results = _collect(path, futures[:n_activity])
    pieces: dict[str, dict[str, list]] = {}
    for (table, names), row in zip(owners, results):
        cols = pieces.setdefault(table, {n: [] for n in names})
        for n, v in zip(names, row):
            cols[n].append(v)
    if any(sum(cols.get("mismatch", [0])) for cols in pieces.values()):
        for f in futures[n_activity:]:
            f.cancel()
        return None, None
    activity = _build_activity(path, pieces, uniform)
    sync_futures = futures[n_activity:]

    def host_sync() -> HostSyncCalls:
        empty = np.empty(0, dtype=np.int64)
        if not sync_ids:
            return HostSyncCalls(empty, empty, empty, (), empty)
        rows = _collect(path, sync_futures)
        cols = {n: [r[i] for r in rows] for i, n in enumerate(sync_cols)}
        pid_known = sync_pid
        if pid_known is not None and sum(cols["mismatch"]):
            # other processes call sync functions too: fetch the pid of every call
            sql, names = _host_sync_sql(sync_ids, None, per_call_names)
            rows = _run_jobs(path, [(sql, a, b) for a, b in _chunks(*runtime_span)])
            cols = {n: [r[i] for r in rows] for i, n in enumerate(names)}
            pid_known = None
        start = np.concatenate(cols["start"])
        dur = np.concatenate(cols["dur"])
        if per_call_names:
            lut = np.zeros(max(sync_ids) + 1, dtype=np.int64)
            lut[np.array(list(sync_ids), dtype=np.int64)] = np.array(list(sync_ids.values()), dtype=np.int64)
            name_index = lut[np.concatenate(cols["name"])]
        else:  # every call is of one kind: the first name stands for all (is_call asks by kind)
            name_index = np.zeros(start.size, dtype=np.int64)
        pid = np.concatenate(cols["pid"]) if pid_known is None else np.full(start.size, pid_known, dtype=np.int64)
        return HostSyncCalls(start, start + dur, pid, sync_names, name_index)

    return activity, _Deferred(host_sync)
