"""Independent reference computations for the tests: plain Python over raw rows (a fake_nsys Trace, or
rows read with sqlite3), sharing no code with clusterbench. Intervals are (start, end) pairs in ns."""

from __future__ import annotations

import json
import math
import re
import sqlite3
from dataclasses import dataclass, field

Interval = tuple[int, int]


def union(intervals) -> list[Interval]:
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def clip(intervals, lo: int, hi: int) -> list[Interval]:
    return [(max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)]


def total(intervals) -> int:
    return sum(e - s for s, e in intervals)


def minus(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """The parts of the disjoint sorted set a outside the set b."""
    out = []
    b = union(b)
    for s, e in a:
        cur = s
        for bs, be in b:
            if be <= cur or bs >= e:
                continue
            if bs > cur:
                out.append((cur, bs))
            cur = max(cur, be)
        if cur < e:
            out.append((cur, e))
    return out


def idle_gaps(busy, lo: int, hi: int, threshold: int = 100_000) -> list[Interval]:
    """Maximal stretches of [lo, hi) outside every busy interval, at least ``threshold`` long."""
    return [(s, e) for s, e in minus([(lo, hi)], list(busy)) if e - s >= threshold]


def gpu_intervals(trace) -> list[Interval]:
    """Every GPU record of a fake_nsys Trace."""
    return [(r.start, r.end) for r in list(trace.kernels) + list(trace.copies) + list(trace.memsets) + list(trace.graphs)]


def base(name: str) -> str:
    for suffix in ("_v3020", "_v7000", "_v5000", "_v10000", "_v11040", "_v11010"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def calls_in(trace, lo: int, hi: int, tid: int = 100) -> list[tuple[str, int]]:
    """(base name, overlap with [lo, hi)) of a thread's calls that overlap it."""
    out = []
    for a in trace.api:
        t = a.tid if a.tid is not None else a.pid
        if t != tid:
            continue
        ov = min(a.end, hi) - max(a.start, lo)
        if ov > 0:
            out.append((base(a.name), ov))
    return out


# --------------------------------------------------------------------------- raw rows of a real export

COPY_KINDS = {1: "h2d", 2: "d2h", 8: "d2d", 10: "p2p"}


def api_base(name: str) -> str:
    """cudaStreamSynchronize_v3020 -> cudaStreamSynchronize (every version suffix, _ptsz, _ptds)."""
    return re.sub(r"(?:_v\d+|_ptds|_ptsz)+$", "", name)


@dataclass
class Rec:
    """One GPU record: engine ("kernel", "graph", "h2d", "d2h", "memset", ...), times, stream, bytes, name."""

    engine: str
    start: int
    end: int
    stream: int
    bytes: int = 0
    name: str = ""
    pid: int = 0
    pageable: bool = False
    corr: int | None = None
    graph_node: int | None = None


@dataclass
class Call:
    """One CUDA API call: base name, times, pid, tid."""

    name: str
    start: int
    end: int
    pid: int
    tid: int


@dataclass
class Raw:
    """The rows of an nsys SQLite export, read with plain sqlite3 (no clusterbench code)."""

    recs: list[Rec]
    calls: list[Call]
    overhead: list[tuple[int, int, int, str]]  # start, end, tid, name
    ranges: list[tuple[str, str | None, int, int]]  # text, domain name, start, end
    thread_names: dict[int, str]  # tid -> name (the highest priority)
    tables: set[str] = field(default_factory=set)

    def of(self, *engines: str) -> list[Rec]:
        return [r for r in self.recs if r.engine in engines]

    def intervals(self, *engines: str) -> list[Interval]:
        return [(r.start, r.end) for r in self.recs if not engines or r.engine in engines]


def read_raw(path) -> Raw:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    strings = dict(con.execute("SELECT id, value FROM StringIds"))
    recs: list[Rec] = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        for s, e, st, sn, gp, corr, node in con.execute(
            "SELECT start, end, streamId, shortName, globalPid, correlationId, graphNodeId FROM CUPTI_ACTIVITY_KIND_KERNEL"
        ):
            recs.append(Rec("kernel", s, e, st, 0, strings[sn], (gp >> 24) & 0xFFFFFF, corr=corr, graph_node=node))
    if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in tables:
        for s, e, st, gp in con.execute("SELECT start, end, streamId, globalPid FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
            recs.append(Rec("graph", s, e, st, 0, "", (gp >> 24) & 0xFFFFFF))
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        for s, e, st, kind, b, gp, sk, dk in con.execute(
            "SELECT start, end, streamId, copyKind, bytes, globalPid, srcKind, dstKind FROM CUPTI_ACTIVITY_KIND_MEMCPY"
        ):
            recs.append(Rec(COPY_KINDS.get(kind, "other"), s, e, st, b, "", (gp >> 24) & 0xFFFFFF, pageable=0 in (sk, dk)))
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        for s, e, st, b, gp in con.execute("SELECT start, end, streamId, bytes, globalPid FROM CUPTI_ACTIVITY_KIND_MEMSET"):
            recs.append(Rec("memset", s, e, st, b, "", (gp >> 24) & 0xFFFFFF))
    recs.sort(key=lambda r: (r.start, r.end))
    calls = []
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if table in tables:
            for s, e, gt, nid in con.execute(f"SELECT start, end, globalTid, nameId FROM {table}"):
                calls.append(Call(api_base(strings[nid]), s, e, (gt >> 24) & 0xFFFFFF, gt & 0xFFFFFF))
    calls.sort(key=lambda c: (c.start, c.end))
    overhead = []
    if "PROFILER_OVERHEAD" in tables:
        overhead = [(s, e, gt & 0xFFFFFF, strings.get(n, "")) for s, e, gt, n in
                    con.execute("SELECT start, end, globalTid, nameId FROM PROFILER_OVERHEAD")]  # fmt: skip
    ranges = []
    if "NVTX_EVENTS" in tables:
        domains = {d: t for d, t in con.execute("SELECT domainId, text FROM NVTX_EVENTS WHERE eventType = 75")}
        for text, tid, s, e, d in con.execute(
            "SELECT text, textId, start, end, domainId FROM NVTX_EVENTS WHERE eventType IN (59, 60) AND end IS NOT NULL"
        ):
            ranges.append((text if text is not None else strings.get(tid, ""), domains.get(d), s, e))
    names: dict[int, tuple[int, str]] = {}
    if "ThreadNames" in tables:
        for gt, nid, prio in con.execute("SELECT globalTid, nameId, priority FROM ThreadNames"):
            tid = gt & 0xFFFFFF
            if tid not in names or (prio or 0) >= names[tid][0]:
                names[tid] = (prio or 0, strings[nid])
    con.close()
    return Raw(recs, calls, overhead, sorted(ranges, key=lambda r: r[2]), {t: n for t, (_, n) in names.items()}, tables)


def zoo_truth(stdout_path) -> dict:
    """The ZOO ground-truth line a zoo program printed (tests/zoo/README.md), as a dict."""
    with open(stdout_path, encoding="utf-8", errors="replace") as fh:
        lines = [ln for ln in fh.read().splitlines() if ln.startswith("ZOO {")]
    assert len(lines) == 1, f"{stdout_path}: {len(lines)} ZOO lines"
    return json.loads(lines[0][4:])


def nearest_rank(values: list[int], q: float) -> int:
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def median(values: list[int]) -> float:
    s = sorted(values)
    n = len(s)
    return float(s[n // 2]) if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


# --------------------------------------------------------------------------- a reference reading of raw rows
# What docs/analyze.md says analyze measures, written again in plain Python over Raw rows: the CUDA API
# categories by name, the threads that feed the GPU, every idle gap's cause, each launching thread's time.

SYNC_CALLS = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaThreadSynchronize",
              "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cuStreamSynchronize", "cuCtxSynchronize",
              "cuEventSynchronize", "cuMemcpy", "cuMemcpyHtoD", "cuMemcpyDtoH"}  # fmt: skip
SYNC_COPIES = {"cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cuMemcpy", "cuMemcpyHtoD", "cuMemcpyDtoH"}
GAP_NS = 100_000


def kind(name: str) -> str:
    """launch, copy, wait, alloc, module_load or other, by a call's base name."""
    if name in SYNC_CALLS:
        return "wait"
    if name.startswith(("cudaLaunch", "cuLaunch", "cudaGraphLaunch", "cuGraphLaunch")):
        return "launch"
    if name.startswith(("cudaMemcpy", "cuMemcpy", "cudaMemset", "cuMemset", "cudaMemPrefetch", "cuMemPrefetch")):
        return "copy"
    if name.startswith(("cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaHostRegister", "cudaHostUnregister", "cuMemAlloc",
                        "cuMemFree", "cuMemHostAlloc", "cuMemHostRegister", "cuMemHostUnregister", "cuMemCreate",
                        "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemAddressReserve", "cuMemAddressFree")):  # fmt: skip
        return "alloc"
    if name.startswith(("cuModuleLoad", "cuLibraryLoad", "cudaLibraryLoad", "cuLink")):
        return "module_load"
    return "other"


def issues(call: Call) -> bool:
    return kind(call.name) in ("launch", "copy") or call.name in SYNC_COPIES


def feeding_spans(raw: Raw, pid: int) -> dict[int, tuple[int, int]]:
    """tid -> (start of its first, start of its last call that issues GPU work), over the whole trace."""
    out: dict[int, tuple[int, int]] = {}
    for c in raw.calls:
        if c.pid == pid and issues(c):
            a, b = out.get(c.tid, (c.start, c.start))
            out[c.tid] = (min(a, c.start), max(b, c.start))
    return out


def overlap(s: int, e: int, lo: int, hi: int) -> int:
    return max(0, min(e, hi) - max(s, lo))


@dataclass
class RefGap:
    start: int
    end: int
    cause: str
    setup: bool
    between: bool
    parts: dict[str, int]  # summed over the threads that count
    threads: int  # how many threads count


def outermost(rows: list[tuple[int, int]]) -> list[Interval]:
    """Profiler rows of one thread as the time they cover (nested rows count once)."""
    return union(rows)


def ref_gaps(raw: Raw, pid: int, lo: int, hi: int) -> list[RefGap]:
    """The idle gaps of [lo, hi) (no GPU record of pid active) of at least 0.1 ms, each with its cause."""
    busy = union([(r.start, r.end) for r in raw.recs if r.pid == pid])
    spans = feeding_spans(raw, pid)
    out = []
    for gs, ge in idle_gaps(busy, lo, hi, GAP_NS):
        counted = [t for t, (a, b) in spans.items() if a <= gs <= b]
        between = not counted
        if between:
            counted = list(spans)
        parts = {"module_load": 0, "alloc": 0, "sync": 0, "profiler": 0}
        for c in raw.calls:
            if c.pid == pid and c.tid in counted and kind(c.name) in ("module_load", "alloc", "wait"):
                parts[{"wait": "sync"}.get(kind(c.name), kind(c.name))] += overlap(c.start, c.end, gs, ge)
        for t in counted:
            for s, e in outermost([(s, e) for s, e, tid, _ in raw.overhead if tid == t]):
                parts["profiler"] += overlap(s, e, gs, ge)
        parts["host"] = max(0, (ge - gs) * len(counted) - sum(parts.values()))
        if parts["module_load"] > 0:
            cause = "module_load"
        else:
            cause = max(("alloc", "profiler", "sync", "host"), key=lambda k: (parts[k], -("alloc", "profiler", "sync", "host").index(k)))
        out.append(RefGap(gs, ge, cause, cause in ("module_load", "alloc", "profiler") or between, between, parts, len(counted)))
    return out


@dataclass
class RefThread:
    tid: int
    calls: dict[str, int]  # launch, copy, wait, other -> calls counted in the window less its set-up gaps
    ns: dict[str, int]
    busy: int
    active: int


def ref_threads(raw: Raw, pid: int, window: list[Interval], setup: list[Interval]) -> dict[int, RefThread]:
    """The launching threads of the window: those with a call that issues GPU work touching it."""
    steady = minus(window, setup)
    out = {}
    for tid in sorted({c.tid for c in raw.calls if c.pid == pid}):
        mine = [c for c in raw.calls if c.pid == pid and c.tid == tid and
                (sum(overlap(c.start, c.end, a, b) for a, b in window) > 0 or
                 (c.end == c.start and any(a <= c.start <= b for a, b in window)))]  # fmt: skip
        if not any(issues(c) for c in mine):
            continue
        first, last = min(c.start for c in mine), max(c.end for c in mine)
        calls = {"launch": 0, "copy": 0, "wait": 0, "other": 0}
        ns = dict(calls)
        for c in mine:
            k = kind(c.name) if kind(c.name) in calls else "other"
            inside = sum(overlap(c.start, c.end, a, b) for a, b in steady)
            if inside > 0 or (c.end == c.start and any(a <= c.start <= b for a, b in steady)):
                calls[k] += 1
                if k != "wait":
                    ns[k] += inside
        waits = union([(c.start, c.end) for c in raw.calls if c.pid == pid and c.tid == tid and kind(c.name) == "wait"])
        ns["wait"] = total(clip_set(waits, steady))
        active = clip_set([(first, last)], steady)
        busy = total(active) - total(clip_set(waits, active))
        out[tid] = RefThread(tid, calls, ns, busy, total(clip_set([(first, last)], window)))
    return out


def clip_set(intervals, window) -> list[Interval]:
    """Disjoint intervals cut to a disjoint window set."""
    return [iv for a, b in window for iv in clip(intervals, a, b)]


def idle_stretch(busy: list[Interval], t: int) -> Interval | None:
    """The idle stretch of the disjoint sorted ``busy`` that holds ``t`` or ends at it (None when busy
    through t; open ends far out)."""
    prev, nxt = None, None
    for s, e in busy:
        if s < t < e:
            return None
        if e <= t:
            prev = e
        elif s >= t and nxt is None:
            nxt = s
    return (prev if prev is not None else -(1 << 62), nxt if nxt is not None else 1 << 62)


def drained(raw: Raw, pid: int, steady: list[Interval]) -> int:
    """The GPU's idle time, inside ``steady``, in the idle stretches where the process's waits end."""
    busy = union([(r.start, r.end) for r in raw.recs if r.pid == pid])  # the whole trace: a stretch may reach past the window
    waits = union([(c.start, c.end) for c in raw.calls if c.pid == pid and kind(c.name) == "wait"])
    stretches = {st for _, e in waits if any(a <= e <= b for a, b in steady) and (st := idle_stretch(busy, e)) is not None}
    return total(clip_set(sorted(stretches), steady))


# --------------------------------------------------------------------------- plain-SQL figures of one thread
# Each is one SQL statement over the export (no Python reading of rows), for the tests that check the
# programs of tests/zoo (their own timers) and blocked time: what a thread spent in each CUDA call, call
# by call or summed, inside a window.


def _con(path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _api_tables(con: sqlite3.Connection) -> list[str]:
    have = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return [t for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER") if t in have]


def _api_union(con: sqlite3.Connection) -> str:
    """The runtime and driver calls as one SQL relation (start, end, globalTid, correlationId, nameId)."""
    return " UNION ALL ".join(f"SELECT start, end, globalTid, correlationId, nameId FROM {t}" for t in _api_tables(con))


def nvtx_range(path, text: str) -> tuple[int, int]:
    """(start, end) of the one NVTX push/pop or start/end range with this text (inline or registered)."""
    con = _con(path)
    rows = con.execute(
        "SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
        "WHERE e.eventType IN (59, 60) AND e.end IS NOT NULL AND COALESCE(e.text, s.value) = ?", (text,)
    ).fetchall()
    con.close()
    assert len(rows) == 1, f"{path}: {len(rows)} NVTX ranges {text!r}"
    return rows[0]


def call_time_by_name(path, tid: int, lo: int, hi: int) -> dict[str, tuple[int, int]]:
    """Base name -> (calls, ns inside [lo, hi]) of thread ``tid``'s CUDA calls that overlap [lo, hi]."""
    con = _con(path)
    rows = con.execute(
        f"SELECT s.value, COUNT(*), SUM(MIN(a.end, :hi) - MAX(a.start, :lo)) FROM ({_api_union(con)}) a "
        "JOIN StringIds s ON s.id = a.nameId WHERE (a.globalTid & 16777215) = :tid AND a.end > :lo AND a.start < :hi "
        "GROUP BY s.value", {"tid": tid, "lo": lo, "hi": hi},
    ).fetchall()  # fmt: skip
    con.close()
    out: dict[str, tuple[int, int]] = {}
    for name, n, ns in rows:
        k = api_base(name)
        a, b = out.get(k, (0, 0))
        out[k] = (a + n, b + ns)
    return out


def call_durations(path, tid: int, name: str, lo: int, hi: int, copy_kind: int | None = None) -> list[int]:
    """end - start of each call of base name ``name`` by thread ``tid`` starting inside [lo, hi], in start
    order; copy_kind (1 H2D, 2 D2H) keeps only the calls whose copy row has that kind (by correlation id)."""
    return [e - s for s, e in call_intervals(path, tid, name, lo, hi, copy_kind)]


def thread_wait_ns(path, tid: int, lo: int, hi: int) -> int:
    """The union of thread ``tid``'s explicit waits (SYNC_CALLS) clipped to [lo, hi]: SQL picks the calls,
    the union is the one line below (a thread's waits do not overlap, but the union is taken anyway)."""
    con = _con(path)
    rows = con.execute(
        f"SELECT a.start, a.end, s.value FROM ({_api_union(con)}) a JOIN StringIds s ON s.id = a.nameId "
        "WHERE (a.globalTid & 16777215) = :tid AND a.end > :lo AND a.start < :hi", {"tid": tid, "lo": lo, "hi": hi},
    ).fetchall()  # fmt: skip
    con.close()
    return total(clip(union([(s, e) for s, e, n in rows if api_base(n) in SYNC_CALLS]), lo, hi))


def gpu_time_by_engine(path, pid: int, lo: int, hi: int) -> dict[str, int]:
    """Engine -> the summed duration (not the union) of the process's GPU rows inside [lo, hi], clipped."""
    con = _con(path)
    have = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    out: dict[str, int] = {}
    q = "SELECT {eng}, SUM(MIN(end, :hi) - MAX(start, :lo)) FROM {t} WHERE ((globalPid >> 24) & 16777215) = :pid " \
        "AND end > :lo AND start < :hi GROUP BY 1"  # fmt: skip
    parts = [("'kernel'", "CUPTI_ACTIVITY_KIND_KERNEL"), ("'memset'", "CUPTI_ACTIVITY_KIND_MEMSET"),
             ("'graph'", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"),
             ("CASE copyKind WHEN 1 THEN 'h2d' WHEN 2 THEN 'd2h' WHEN 8 THEN 'd2d' WHEN 10 THEN 'p2p' ELSE 'other' END",
              "CUPTI_ACTIVITY_KIND_MEMCPY")]  # fmt: skip
    for eng, t in parts:
        if t in have:
            for k, v in con.execute(q.format(eng=eng, t=t), {"pid": pid, "lo": lo, "hi": hi}):
                out[k] = out.get(k, 0) + v
    con.close()
    return out


def call_intervals(path, tid: int, name: str, lo: int, hi: int, copy_kind: int | None = None) -> list[Interval]:
    """(start, end) of each call of base name ``name`` by thread ``tid`` starting inside [lo, hi], in start
    order; copy_kind as in call_durations."""
    con = _con(path)
    join, where = "", ""
    if copy_kind is not None:
        join = "JOIN CUPTI_ACTIVITY_KIND_MEMCPY m ON m.correlationId = a.correlationId"
        where = f"AND m.copyKind = {int(copy_kind)}"
    rows = con.execute(
        f"SELECT s.value, a.start, a.end FROM ({_api_union(con)}) a JOIN StringIds s ON s.id = a.nameId {join} "
        f"WHERE (a.globalTid & 16777215) = :tid AND a.start >= :lo AND a.start <= :hi {where} ORDER BY a.start",
        {"tid": tid, "lo": lo, "hi": hi},
    ).fetchall()  # fmt: skip
    con.close()
    return [(s, e) for n, s, e in rows if api_base(n) == name]


def gpu_busy_inside(path, pid: int, intervals) -> int:
    """The time inside ``intervals`` during which any GPU row of the process ran (the union of its rows,
    read by SQL, intersected with each interval, summed)."""
    con = _con(path)
    have = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    rows = []
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
              "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):  # fmt: skip
        if t in have:
            rows += con.execute(f"SELECT start, end FROM {t} WHERE ((globalPid >> 24) & 16777215) = ?", (pid,)).fetchall()
    con.close()
    busy = union(rows)
    return sum(total(clip(busy, a, b)) for a, b in intervals if b > a)
