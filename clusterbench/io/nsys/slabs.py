"""An export's rows in time order, a bounded slab at a time: the input of an analysis whose memory does
not grow with the trace.

Every table of the nsys exports seen stores its rows in start order (``start`` never decreases with the
rowid), so the rowid chunks the reader reads are time chunks, and the tables merge by start without a
sort of any whole table: each table's rows read so far wait in a buffer, and a slab takes, from every
table, the rows that start before the smallest of the tables' *watermarks* (the start of the last row
read; past the table's end, no limit). No row read later can start before it, so every slab holds
exactly the rows of its time span, [t0, t1), whatever the chunk size.

Each chunk's order is checked as it is read (its starts do not decrease, and its first is not before
the previous chunk's last). A table out of order raises :class:`Disordered`: a row of it may belong to
a slab already handed out, so the pass starts again (:func:`run`) with that table read the other way:
one range scan per chunk first gives each chunk's least start, the watermark is the least start of
the chunks still to read, and rows read early wait in the buffer until their time (a program's
tear-down stored before its loop holds only those few rows). The memory then grows only with how far
out of place the rows lie.

What a slab holds (:class:`Slab`): the GPU activity of its span as an :class:`~reader.Activity` (every
process and device; kernel name indices into the names met so far, which only grow), the CUDA API
calls that start in it (every call of every thread, in start order, runtime before driver on a tie;
their ``stream`` is -1: the stream a call names comes from GPU rows that may start in a later slab),
and the synchronization rows that start in it. The CUDA event records (no times) are read whole by
:func:`iter_slabs`'s caller when needed (one per cudaEventRecord: few).
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import shutil
import sqlite3
import tempfile
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clusterbench.errors import TraceError
from clusterbench.io.nsys import reader as R
from clusterbench.io.nsys import schema as S

_INF = np.iinfo(np.int64).max
# a pass's slabs kept in a temporary file for the next pass (Spill); CLUSTERBENCH_SLAB_SPILL=0 reads the export again
SPILL = os.environ.get("CLUSTERBENCH_SLAB_SPILL", "1") != "0"
SPILL_MARGIN = 1 << 30  # free bytes left beside a spill the size of the export, else none is kept


class Disordered(TraceError):
    """A table whose rows are not stored in start order (rowid order)."""

    def __init__(self, table: str, path: Path) -> None:
        super().__init__(f"{table} does not store its rows in start order: {path}",
                         hint="read it with iter_slabs(..., disordered={table}), as slabs.run does")  # fmt: skip
        self.table = table


@dataclass(frozen=True, slots=True, eq=False)
class Slab:
    """The rows of every table that start in [t0, t1) (t0 None: from the first row; t1 None: to the last)."""

    index: int
    t0: int | None
    t1: int | None
    activity: R.Activity  # pid and device per row (never broadcast); kernel_names: the names met so far
    api: dict[str, np.ndarray]  # start, end, thread (index into SlabReader.threads), name (into .api_names), corr
    syncs: R.SyncEvents

    @property
    def rows(self) -> int:
        return len(self.activity) + int(self.api["start"].size) + len(self.syncs)


class _Cursor:
    """One table read in rowid chunks: the rows read and not yet handed out (in start order), and the
    watermark: no row still to be read starts before it (_INF once the table is read to its end).

    In order (the exports seen), the watermark is the start of the last row read, and each chunk is
    checked to keep the order (Disordered otherwise). Out of order (``mins``: per chunk, the least start
    of its rows, from one range scan per chunk), the watermark is the least start of the chunks not yet
    read, and each chunk's rows are merged into the buffer: rows far out of place wait there until
    their time comes (a program's tear-down stored first holds its few rows to the end)."""

    def __init__(self, path: Path, table: str, read: Callable[[int, int], dict], span: tuple[int, int],
                 pool: ThreadPoolExecutor | None = None, ahead: int = 0, mins: list[int] | None = None) -> None:  # fmt: skip
        self.path, self.table, self.read_chunk = path, table, read
        self.chunks = R._chunks(*span, R.slab_chunk_rows())[::-1]  # popped from the end, in rowid order
        self.buf: dict[str, np.ndarray] | None = None
        self.last = -_INF
        # out of order: the least start of the chunks from k on (suffix minima), per chunk k in rowid order
        self.suffix: list[int] | None = None
        if mins is not None:
            run, suffix = _INF, []
            for m in reversed(mins):
                run = min(run, m)
                suffix.append(run)
            self.suffix = suffix[::-1] + [_INF]
        self.done = 0  # chunks taken
        self.watermark = (self.suffix[0] if self.suffix is not None else -_INF) if self.chunks else _INF
        # chunks read ahead on the pool (in rowid order), at most ``ahead`` of them
        self.pool, self.ahead = pool, ahead
        self.pending: deque[Future] = deque()
        self._fill()

    def _fill(self) -> None:
        if self.pool is None:
            return
        while self.chunks and len(self.pending) < self.ahead:
            a, b = self.chunks.pop()
            self.pending.append(self.pool.submit(self.read_chunk, a, b))

    def cancel(self) -> None:
        for f in self.pending:
            f.cancel()
        self.pending.clear()

    def step(self) -> None:
        """Read one more chunk."""
        if self.pending:
            got = self.pending.popleft().result()
            self._fill()
        else:
            a, b = self.chunks.pop()
            got = self.read_chunk(a, b)
        self.done += 1
        s = got["start"]
        if self.suffix is not None:
            if s.size:
                if self.buf is not None and self.buf["start"].size:
                    got = {k: np.concatenate([self.buf[k], v]) for k, v in got.items()}
                    self.buf = None
                order = np.argsort(got["start"], kind="stable")  # ties: rowid order
                self._append({k: v[order] for k, v in got.items()})
            self.watermark = self.suffix[self.done]
            return
        if s.size:
            if int(s[0]) < self.last or (s.size > 1 and bool((s[1:] < s[:-1]).any())):
                raise Disordered(self.table, self.path)
            self.last = int(s[-1])
            self._append(got)
            self.watermark = self.last
        if not self.chunks and not self.pending:
            self.watermark = _INF

    def _append(self, got: dict[str, np.ndarray]) -> None:
        if self.buf is None or self.buf["start"].size == 0:
            self.buf = got
        else:
            self.buf = {k: np.concatenate([self.buf[k], got[k]]) for k in self.buf}

    def ready(self, t: int) -> int:
        """Rows buffered that start before ``t``."""
        return 0 if self.buf is None else int(np.searchsorted(self.buf["start"], t, side="left"))

    def take(self, t: int) -> dict[str, np.ndarray] | None:
        """Hand out the buffered rows that start before ``t``."""
        k = self.ready(t)
        if self.buf is None or k == 0:
            return None
        out = {key: v[:k] for key, v in self.buf.items()}
        self.buf = {key: v[k:].copy() for key, v in self.buf.items()}  # a copy: the handed-out part can go
        return out


class SlabReader:
    """The state shared by the slabs of one export: API names and threads, kernel names, met as they come."""

    def __init__(self, path: Path, conn: sqlite3.Connection, tables: frozenset[str], kernel_names: str) -> None:
        self.path, self.conn, self.tables = path, conn, tables
        self.names = R._Names()
        self.threads_map = R._Threads()
        self.kernel_kind = kernel_names
        self._klut = np.full(0, -1, dtype=np.int32)
        self.kernel_names: list[str] = []
        self._kindex: dict[str, int] = {}
        self.cursors: list[_Cursor] = []  # the tables being read (their buffers: what the slabs hold back)

    @property
    def api_names(self) -> tuple[str, ...]:
        return tuple(self.names.names)

    def name_snapshot(self) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
        """The API names met so far, with each one's category and whether it issues GPU work, taken
        together (the read threads add names as their chunks come)."""
        with self.names.lock:
            n = len(self.names.names)
            return tuple(self.names.names[:n]), self.names.categories[:n].copy(), self.names.issues[:n].copy()

    def kernel_index(self, ids: np.ndarray) -> np.ndarray:
        """StringIds ids of kernel names (-1: none) -> index into kernel_names (each name once)."""
        if ids.size == 0:
            return ids.astype(np.int32)
        top = int(ids.max())
        if top + 2 > self._klut.size:
            grown = np.full(top + 2, -1, dtype=np.int32)
            grown[: self._klut.size] = self._klut
            self._klut = grown
        shifted = ids + 1  # -1 (no name) -> 0
        present = np.flatnonzero(np.bincount(shifted))
        missing = [int(i) for i in present.tolist() if self._klut[i] < 0]
        if missing:
            wanted = [i - 1 for i in missing if i > 0]
            found: dict[int, str] = {}
            if S.STRINGS_TABLE in self.tables:
                for k in range(0, len(wanted), 900):
                    part = wanted[k : k + 900]
                    q = f"SELECT id, value FROM {S.STRINGS_TABLE} WHERE id IN ({','.join('?' * len(part))})"
                    found.update({int(i): str(v) for i, v in self.conn.execute(q, part)})
            for i in missing:
                name = found.get(i - 1, f"(kernel name id {i - 1})") if i > 0 else "(no name)"
                j = self._kindex.get(name)
                if j is None:
                    j = self._kindex[name] = len(self.kernel_names)
                    self.kernel_names.append(name)
                self._klut[i] = j
        return self._klut[shifted]


def _activity_reader(path: Path, table: str, cols: frozenset[str], name_col: str | None) -> Callable[[int, int], dict]:
    sql, names = R._activity_sql(table, cols, None, name_col if table == S.KERNEL_TABLE else None)

    def read(lo: int, hi: int) -> dict:
        out = R._activity_job(path, table, sql, names, lo, hi)
        out.pop("mismatch", None)
        n = out["start"].size
        out.setdefault("bytes", np.zeros(n, dtype=np.int64))
        out.setdefault("corr", np.zeros(n, dtype=np.int64))
        out.setdefault("pageable", np.zeros(n, dtype=bool))
        out.setdefault("name", np.full(n, -1, dtype=np.int64))
        if table != S.KERNEL_TABLE:
            out["name"] = np.full(n, -2, dtype=np.int64)  # not a kernel row
        return out

    return read


def _api_reader(path: Path, table: str, cols: frozenset[str], rd: SlabReader) -> Callable[[int, int], dict]:
    corr = "group_concat(ifnull(correlationId, 0))" if "correlationId" in cols else "group_concat(0)"
    q = (f"SELECT group_concat(start), group_concat(end - start), group_concat(ifnull(globalTid, 0) & {R._TID48}), "
         f"group_concat(nameId), {corr} FROM [{table}] WHERE rowid > ? AND rowid <= ?")  # fmt: skip

    def read(lo: int, hi: int) -> dict:
        start, dur, key, name_id, c = R._fetch(path, q, lo, hi)
        n = start.shape[0]
        if dur.shape[0] != n or key.shape[0] != n or name_id.shape[0] != n or c.shape[0] != n:
            raise TraceError(f"a CUDA API table has NULL values in core columns: {path}", hint="re-export the trace with a current nsys")
        name, _, _ = rd.names.map(path, name_id)
        return {"start": start, "end": start + dur, "thread": rd.threads_map.map(key), "name": name, "corr": c}

    return read


def _sync_reader(path: Path, cols: frozenset[str]) -> Callable[[int, int], dict]:
    sql, names = R._sync_sql(cols)

    def read(lo: int, hi: int) -> dict:
        row = R._columns_job(path, S.SYNC_TABLE, sql, names, lo, hi)
        n = row["start"].size
        out = {"start": row["start"], "end": row["start"] + row["dur"]}
        for k, default in (("pid", 0), ("device", 0), ("stream", S.NO_ID), ("corr", 0), ("type", S.SYNC_UNKNOWN),
                           ("event", S.NO_ID)):  # fmt: skip
            out[k] = row[k] if k in row else np.full(n, default, dtype=np.int64)
        return out

    return read


def _activity(cols: dict[str, np.ndarray] | None, rd: SlabReader) -> R.Activity:
    """A slab's rows of every activity table as an Activity: grouped by engine, each engine's rows in start
    order (a stable sort: ties keep the tables' order)."""
    e64 = np.empty(0, dtype=np.int64)
    if cols is None or cols["start"].size == 0:
        return R.Activity(e64, e64, e64, e64, np.empty(0, np.int8), e64, e64, np.empty(0, bool), e64,
                          tuple((0, 0) for _ in S.ENGINES), np.empty(0, np.int32), tuple(rd.kernel_names))  # fmt: skip
    order = np.lexsort((cols["start"], cols["engine"]))
    c = {k: v[order] for k, v in cols.items()}
    counts = np.bincount(c["engine"], minlength=len(S.ENGINES))
    edges = np.concatenate([[0], np.cumsum(counts)]).tolist()
    sections = tuple((int(edges[i]), int(edges[i + 1])) for i in range(len(S.ENGINES)))
    klo, khi = sections[S.ENGINE_CODE["kernel"]]
    kname = rd.kernel_index(c["name"][klo:khi])
    key = c["key"]
    return R.Activity(start_ns=c["start"], end_ns=c["end"], pid=key % R._PACK_DEVICE, device=key // R._PACK_DEVICE,
                      engine=c["engine"].astype(np.int8), bytes=c["bytes"], stream=c["stream"], pageable=c["pageable"],
                      correlation=c["corr"], sections=sections, kernel_name=kname, kernel_names=tuple(rd.kernel_names))  # fmt: skip


def _syncs(cols: dict[str, np.ndarray] | None) -> R.SyncEvents:
    if cols is None or cols["start"].size == 0:
        return R.no_syncs()
    stream = R._none_to_minus_one(cols["stream"].copy())
    event = R._none_to_minus_one(cols["event"].copy())
    kind = cols["type"].copy()
    kind[(kind == S.SYNC_STREAM_WAIT_EVENT) & (event < 0) & (stream >= 0)] = S.SYNC_STREAM
    return R.SyncEvents(start_ns=cols["start"], end_ns=cols["end"], pid=cols["pid"], device=cols["device"], stream=stream,
                        correlation=cols["corr"], sync_type=kind.astype(np.int8), event=event)  # fmt: skip


def _merge(parts: list[dict[str, np.ndarray] | None]) -> dict[str, np.ndarray] | None:
    """The parts of several tables of one kind, in start order (stable: ties keep the tables' order)."""
    got = [p for p in parts if p is not None and p["start"].size]
    if not got:
        return None
    if len(got) == 1:
        return got[0]
    keys = [k for k in got[0] if all(k in p for p in got)]
    cols = {k: np.concatenate([p[k] for p in got]) for k in keys}
    order = np.argsort(cols["start"], kind="stable")
    return {k: v[order] for k, v in cols.items()}


def iter_slabs(path: str | os.PathLike[str], *, rows: int | None = None, disordered: frozenset[str] | bool = frozenset(),
               kernel_names: str = "short", reader_out: list | None = None, threads: bool = True,
               span_only: bool = False) -> Iterator[Slab]:  # fmt: skip
    """The export's rows in time slabs of about ``rows`` rows each (all tables together; default 2
    read chunks' worth), read in rowid chunks of ``reader.slab_chunk_rows()`` rows. ``disordered``: the tables
    to read as stored out of start order (True: every table), after one range scan per chunk for its
    least start (see :class:`_Cursor`); a table found out of order otherwise raises :class:`Disordered`
    (the slabs handed out before it may be wrong: start again with that table named, as :func:`run`
    does).
    ``reader_out``, when given, receives the :class:`SlabReader` (names and threads met so far).
    ``threads``: read the tables' next chunks ahead on a pool of reader.slab_threads() threads.
    ``span_only``: what the window and its gaps need, no more: the activity rows without their kernel names
    and correlation ids (their slabs' kernel names read "(no name)", their ids 0), and no synchronization
    rows (the slab path's first pass)."""
    path = Path(path)
    R.check_sqlite_file(path)
    target = rows if rows is not None else 2 * R.slab_chunk_rows()
    conn = R.connect_read_only(path)
    # the tables' next chunks are read ahead on a pool (each table at most AHEAD_PER_THREAD x threads / tables)
    pool = ThreadPoolExecutor(max_workers=R.slab_threads(), thread_name_prefix="clusterbench-slab") if threads else None
    cursors: list[_Cursor] = []
    try:
        tables = frozenset(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"))
        rd = SlabReader(path, conn, tables, kernel_names)
        ahead = max(1, R.AHEAD_PER_THREAD * R.slab_threads() // 3)
        if reader_out is not None:
            reader_out.append(rd)
        acts, apis, syncs = [], [], []
        kcols = R._require(conn, path, S.KERNEL_TABLE) if S.KERNEL_TABLE in tables else frozenset()
        name_col = R._kernel_name_column(kcols, kernel_names) if kcols else None

        def cursor(t: str, read: Callable[[int, int], dict]) -> _Cursor:
            span = R._rowid_span(conn, t)
            mins = None
            if disordered is True or (disordered and t in disordered):
                q = f"SELECT min(start) FROM [{t}] WHERE rowid > ? AND rowid <= ?"
                mins = [_INF if m is None else int(m) for m in (conn.execute(q, ab).fetchone()[0] for ab in R._chunks(*span, R.slab_chunk_rows()))]
            return _Cursor(path, t, read, span, pool, ahead, mins)

        for t in S.ACTIVITY_TABLES:
            if t in tables and R._table_has_rows(conn, t):
                cols = R._require(conn, path, t)
                if span_only:
                    cols = cols - {"correlationId"}
                acts.append(cursor(t, _activity_reader(path, t, cols, None if span_only else name_col)))
        for t in S.API_TABLES:
            if t in tables and R._table_has_rows(conn, t):
                apis.append(cursor(t, _api_reader(path, t, R._require(conn, path, t), rd)))
        if not span_only and S.SYNC_TABLE in tables and R._table_has_rows(conn, S.SYNC_TABLE):
            syncs.append(cursor(S.SYNC_TABLE, _sync_reader(path, R._require(conn, path, S.SYNC_TABLE))))
        cursors = acts + apis + syncs
        rd.cursors = cursors
        t0: int | None = None
        index = 0
        while cursors:
            # read where the watermark is lowest until the slab is big enough or every table is read
            while True:
                mark = min(c.watermark for c in cursors)
                if mark == _INF or sum(c.ready(mark) for c in cursors) >= target:
                    break
                min(cursors, key=lambda c: c.watermark).step()
            act = _merge([c.take(mark) for c in acts])
            api = _merge([c.take(mark) for c in apis])
            sy = _merge([c.take(mark) for c in syncs])
            api = api if api is not None else {k: np.empty(0, np.int64) for k in ("start", "end", "thread", "name", "corr")}
            slab = Slab(index, t0, None if mark == _INF else int(mark), _activity(act, rd), api, _syncs(sy))
            if not R.values_in_range(slab.activity.start_ns, slab.activity.end_ns, api["start"], api["end"],
                                     slab.syncs.start_ns, slab.syncs.end_ns):  # fmt: skip
                problem = R._typed_problem(conn, path)  # times no clock gives: the arithmetic on them would overflow
                if problem is not None:
                    raise problem
            yield slab
            index += 1
            if mark == _INF:
                break
            t0 = int(mark)
    except sqlite3.DatabaseError as exc:
        raise R._corrupt(path, exc) from None
    finally:
        for c in cursors:
            c.cancel()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        conn.close()


def run(path: str | os.PathLike[str], consume: Callable[[Iterator[Slab]], object], **options) -> object:  # noqa: ANN003
    """``consume(iter_slabs(path, **options))``, started again with a table named as out of order each time
    one turns out to be (``consume`` must start from nothing each time it is called).

    Each pass's slabs are closed here, on this thread, as ``consume`` returns or raises: their read pool
    shut down and their connection closed before the caller goes on. Left to the garbage collector, an
    abandoned pass (a look-ahead too short, a table out of order) was closed wherever a collection ran,
    once inside a thread starting up for the next pass's pool, which then waited on the old pool's threads
    while the main thread waited on it to start: a deadlock (tests/io/test_slabs.py)."""
    disordered: frozenset[str] = frozenset(options.pop("disordered", frozenset()) or ())
    while True:
        slabs = iter_slabs(path, disordered=disordered, **options)
        try:
            return consume(slabs)
        except Disordered as exc:
            if exc.table in disordered:
                raise
            disordered = disordered | {exc.table}
        finally:
            slabs.close()


def as_whole(slabs: list[Slab], rd: SlabReader) -> tuple[R.Activity, dict[str, np.ndarray], R.SyncEvents]:
    """The slabs joined back into whole arrays (for tests: the slabs hold every row exactly once)."""
    acts = [s.activity for s in slabs]
    parts = []
    for code in range(len(S.ENGINES)):
        for a in acts:
            lo, hi = a.sections[code]
            if hi > lo:
                parts.append((code, a, lo, hi))

    def cat(get) -> np.ndarray:  # noqa: ANN001
        return np.concatenate([get(a)[lo:hi] for _, a, lo, hi in parts]) if parts else np.empty(0, np.int64)

    counts = [sum(hi - lo for c, _, lo, hi in parts if c == code) for code in range(len(S.ENGINES))]
    edges = np.concatenate([[0], np.cumsum(counts)]).tolist()
    kparts = [a.kernel_name for a in acts]
    activity = R.Activity(cat(lambda a: a.start_ns), cat(lambda a: a.end_ns), cat(lambda a: a.pid), cat(lambda a: a.device),
                          cat(lambda a: a.engine), cat(lambda a: a.bytes), cat(lambda a: a.stream), cat(lambda a: a.pageable),
                          cat(lambda a: a.correlation), tuple((int(edges[i]), int(edges[i + 1])) for i in range(len(S.ENGINES))),
                          np.concatenate(kparts) if kparts else np.empty(0, np.int32), tuple(rd.kernel_names))  # fmt: skip
    api = {k: np.concatenate([s.api[k] for s in slabs]) for k in ("start", "end", "thread", "name", "corr")}
    sy = [s.syncs for s in slabs if len(s.syncs)]
    syncs = R.SyncEvents(*(np.concatenate([getattr(x, f.name) for x in sy]) for f in dataclasses.fields(R.SyncEvents))) if sy else R.no_syncs()
    return activity, api, syncs


IN_MEMORY = frozenset({"tmpfs", "ramfs"})  # filesystems whose files live in memory


def filesystem_type(path: str | os.PathLike[str], mounts: str = "/proc/self/mounts") -> str | None:
    """The type of the filesystem ``path`` lies on (the longest mount point above it in ``mounts``), None
    where the mount table cannot be read (not Linux)."""
    try:
        with open(mounts, encoding="utf-8", errors="replace") as fh:
            table = [line.split() for line in fh]
    except OSError:
        return None
    real = os.path.realpath(path)
    best, kind = -1, None
    for f in table:
        if len(f) < 3:
            continue
        point = f[1].replace("\\040", " ")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, kind = len(point), f[2]
    return kind


class Spill:
    """The slabs of one pass kept in a temporary file as they are handed out (:meth:`tee`), to be handed out
    again, the same slabs in the same order, without reading the export again (:meth:`replay`). Reading
    an export decodes every value from SQLite's records; reading a slab back is a copy of its arrays.

    The file lives in the system's temporary directory (``TMPDIR``), is unlinked from the start (nothing
    stays behind, whatever ends the process) and is about the size of the export's activity and API
    tables. Where that directory is in memory (tmpfs: the file would take the memory the slabs keep
    free), has less free space than the export's size and a margin, or a write fails, no slab is kept
    (:attr:`usable` false, :attr:`reason` says why) and the caller reads the export again."""

    def __init__(self, path: str | os.PathLike[str], enabled: bool | None = None) -> None:
        self._fh = None
        self.slabs = 0
        self.complete = False
        self.reason: str | None = None if (SPILL if enabled is None else enabled) else "CLUSTERBENCH_SLAB_SPILL=0"
        if self.reason is None:
            self.reason = self._no_room(Path(path).stat().st_size)
        # whether a pass tee'd will be kept (a write may still fail): the first pass reads what the second needs
        self.enabled = self.reason is None

    @staticmethod
    def _no_room(size: int) -> str | None:
        """Why the temporary directory cannot take a file of about ``size`` bytes, or None."""
        try:
            where = tempfile.gettempdir()
            kind = filesystem_type(where)
            if kind in IN_MEMORY:  # the file would take the memory the slabs keep free
                return f"the temporary directory is in memory ({kind})"
            free = shutil.disk_usage(where).free
        except OSError as exc:
            return f"no temporary directory: {exc}"
        if free < size + SPILL_MARGIN:
            return f"{free / 1e9:.1f} GB free in the temporary directory"
        return None

    @property
    def usable(self) -> bool:
        """Every slab of the last tee'd pass is kept, to its end."""
        return self._fh is not None and self.complete

    def _open(self) -> None:
        self.close()
        self.slabs, self.complete = 0, False
        if not self.enabled:
            return
        try:
            self._fh = tempfile.TemporaryFile(prefix="clusterbench-slabs-")
        except OSError as exc:
            self.reason = f"no temporary file: {exc}"

    def tee(self, slabs: Iterator[Slab]) -> Iterator[Slab]:
        """The slabs as they come, each kept first (any earlier pass's kept slabs are dropped)."""
        self._open()
        for slab in slabs:
            if self._fh is not None:
                try:
                    pickle.dump(slab, self._fh, protocol=pickle.HIGHEST_PROTOCOL)
                    self.slabs += 1
                except OSError as exc:  # a full disk: go on without
                    self.reason = f"writing the temporary file: {exc}"
                    self.close()
            yield slab
        if self._fh is not None:
            try:
                self._fh.flush()
                self.complete = True
            except OSError as exc:
                self.reason = f"writing the temporary file: {exc}"
                self.close()

    def replay(self) -> Iterator[Slab]:
        """The kept slabs again, from the first (only where :attr:`usable`)."""
        if not self.usable:
            raise RuntimeError("no complete pass is kept")
        fh = self._fh
        fh.seek(0)
        for _ in range(self.slabs):
            yield pickle.load(fh)

    def close(self) -> None:
        if self._fh is not None:
            try:
                self._fh.close()
            finally:
                self._fh = None
                self.complete = False
