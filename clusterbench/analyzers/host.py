"""The host threads that feed the GPU, and where their time goes (pure).

A launching thread is one that issues GPU work in the window: a kernel or graph launch, an
asynchronous copy or memset, or a synchronous copy. For each, from the CUDA API rows:
- its time in CUDA calls, by kind: ``launch`` (kernel and graph launches), ``copy`` (issuing copies
  and memsets), ``wait`` (blocking: synchronize calls and synchronous copies; a union), ``other``
  (events, queries, stream set-up, allocations...), each clipped to the window less its set-up gaps
  (what the threads do in set-up is set-up, not a cost per frame);
- ``active``: the window from the start of its first CUDA call to the end of its last one;
- its time split three ways, over the active window less the set-up gaps:
  - ``wait``: in explicit waits (a union);
  - ``blocked``: inside non-synchronizing calls that the GPU held (analyzers.held: a launch into a
    full queue, a pageable copy, a graph launch that returns with its graph, a first launch that loads
    its module, an implicit synchronize in cudaFree or cudaProfilerStop), while the GPU ran the work
    they waited for;
  - ``work``: the rest, host code and CUDA calls while nothing of the GPU's holds them.
  ``busy`` is work + blocked (the active time less the waits). Its work per frame is the thread's
  bar: when it is taller than every engine's, the host binds.

The process's blocking calls, as a union over its threads, are ``host_sync_ns`` (as in version 1);
``drain_idle_ns`` is the GPU's idle time in the stretches where they end (each wait that returns to
an idle GPU drained the pipeline: the GPU waits for the host's next work).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.model import GroupTrace
from clusterbench.analyzers.held import CAUSES, Held
from clusterbench.analyzers.links import Links
from clusterbench.analyzers.records import BLOCK_CAUSES, BlockedCalls, Host, ThreadRef, ThreadStats
from clusterbench.io.nsys import schema as S

_KIND = {"launch": "launch", "graph_launch": "launch", "copy": "copy", "wait": "wait"}  # the rest: other
_KINDS = ("launch", "copy", "wait", "other")
_KIND_OF_CATEGORY = np.array([_KINDS.index(_KIND.get(c, "other")) for c in S.API_CATEGORIES], dtype=np.int64)
_ISSUE = np.array([c in S.ISSUE_CATEGORIES for c in S.API_CATEGORIES], dtype=bool)


CHUNK = iv.BLOCK  # API rows per step: bounds the memory of the clipped lengths


def measure(g: GroupTrace, window: iv.Intervals, setup_gaps: iv.Intervals, frames: int | None,
            links: Links | None = None, held: Held | None = None) -> Host:  # fmt: skip
    """The launching threads of ``g`` in ``window`` (less ``setup_gaps``); with the group's ``links`` and
    the calls the GPU ``held``, their blocked time (else none is known: work is busy)."""
    return with_blocked(calls(g, window, setup_gaps, frames), links, held)


@dataclass(frozen=True, slots=True, eq=False)
class Calls:
    """What :func:`calls` found from the calls alone: the Host record without the blocked time (its threads
    in ``index`` order, not yet sorted by work), which :func:`with_blocked` adds from the links and the
    held calls."""

    host: Host
    index: tuple[int, ...] = ()  # per thread of host.threads: its index in ApiCalls.threads
    steady: iv.Intervals | None = None  # the window less the set-up gaps
    issues: np.ndarray | None = None  # per thread of ApiCalls.threads: whether it issues GPU work in the window


def calls(g: GroupTrace, window: iv.Intervals, setup_gaps: iv.Intervals, frames: int | None) -> Calls:
    """:func:`measure`'s part that needs neither the links nor the held calls (nearly all of its work): a
    caller can have it made while the held calls are found."""
    api = g.api
    if not api.tables:
        return Calls(Host(False, (), 0, ()))
    steady = iv.subtract(window, setup_gaps)  # the calls' time per kind counts here
    n_threads = len(api.threads)
    tpid = api.thread_pid()
    mine = tpid == g.pid
    all_mine = bool(mine.all())
    sync_copy = np.array([n in S.SYNC_COPY_CALLS for n in api.names] + [False], dtype=bool)
    issue_of_name = _ISSUE[api.name_category] | sync_copy[: len(api.names)] if len(api.names) else np.zeros(0, dtype=bool)
    kind_of_name = _KIND_OF_CATEGORY[api.name_category] if len(api.names) else np.zeros(0, dtype=np.int64)
    nk = len(_KINDS)
    ns = np.zeros(n_threads * nk, dtype=np.float64)
    calls = np.zeros(n_threads * nk, dtype=np.int64)
    first = np.full(n_threads, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(n_threads, np.iinfo(np.int64).min, dtype=np.int64)
    issues = np.zeros(n_threads, dtype=bool)
    for c0 in range(0, len(api), CHUNK):
        sl = slice(c0, c0 + CHUNK)
        s, e, th, nm = api.start_ns[sl], api.end_ns[sl], api.thread[sl], api.name[sl]
        touch = iv.touching(s, e, iv.clipped_lengths(s, e, window), window)
        if not all_mine:
            touch &= mine[th]
        if not touch.any():
            continue
        t = th[touch].astype(np.int64)
        np.minimum.at(first, t, s[touch])
        np.maximum.at(last, t, e[touch])
        issues[t[issue_of_name[nm[touch]]]] = True
        ts, te = s[touch], e[touch]
        steady_len = iv.clipped_lengths(ts, te, steady)
        counted = iv.touching(ts, te, steady_len, steady)
        key = t[counted] * nk + kind_of_name[nm[touch][counted]]
        ns += np.bincount(key, weights=steady_len[counted], minlength=n_threads * nk)
        calls += np.bincount(key, minlength=n_threads * nk)
    # blocking waits: kept one by one (the reader keeps every wait call); unions per thread, and their
    # lengths inside the window, the steady window and each thread's busy stretch
    is_wait = kind_of_name == _KINDS.index("wait")
    wait_rows = np.flatnonzero(mine[api.thread] & is_wait[api.name]) if len(api) else np.empty(0, dtype=np.int64)
    w_s, w_e = api.start_ns[wait_rows], api.end_ns[wait_rows]  # kept calls come sorted by start
    wthread = api.thread[wait_rows]
    threads = []
    for t in np.flatnonzero(issues).tolist():
        m = wthread == t
        waits = iv.union(w_s, w_e) if bool(m.all()) else iv.union(w_s[m], w_e[m])
        del m
        active = iv.intersect(steady, (np.array([first[t]], dtype=np.int64), np.array([last[t]], dtype=np.int64)))
        busy_ns = iv.length(active) - int(iv.clipped_lengths(waits[0], waits[1], active).sum())
        row = ns[t * nk : (t + 1) * nk].astype(np.int64)
        row[_KINDS.index("wait")] = int(iv.clipped_lengths(waits[0], waits[1], steady).sum())
        del waits, active
        c = calls[t * nk : (t + 1) * nk]
        info = api.threads[t]
        window_active = iv.intersect(window, (np.array([first[t]], dtype=np.int64), np.array([last[t]], dtype=np.int64)))
        threads.append(ThreadStats(
            thread=ThreadRef(info.pid, info.tid, info.name),
            launch_ns=int(row[0]), launch_calls=int(c[0]), copy_ns=int(row[1]), copy_calls=int(c[1]),
            wait_ns=int(row[2]), wait_calls=int(c[2]), other_ns=int(row[3]), other_calls=int(c[3]),
            active_ns=iv.length(window_active), busy_ns=busy_ns, frames=frames,
        ))  # fmt: skip
    del wthread

    # the process's blocking calls (every thread), as in version 1: the union clipped to the window
    in_window = iv.touching(w_s, w_e, iv.clipped_lengths(w_s, w_e, window), window)
    every = iv.union(w_s, w_e)
    host_sync_ns = int(iv.clipped_lengths(every[0], every[1], window).sum())
    drain_ns = _drained(g, every[1][iv.points_inside(every[1], steady)], steady)
    del every, w_s, w_e
    touching = wait_rows[in_window]
    del wait_rows, in_window
    names_in = sorted({api.names[i] for i in np.flatnonzero(np.bincount(api.name[touching], minlength=len(api.names))).tolist()})
    copies = touching[sync_copy[api.name[touching]]]
    cu = iv.union(api.start_ns[copies], api.end_ns[copies])
    sync_copy_ns = int(iv.clipped_lengths(cu[0], cu[1], window).sum())
    sync_copy_names = tuple(sorted({api.names[i] for i in np.flatnonzero(np.bincount(api.name[copies], minlength=len(api.names))).tolist()}))
    host = Host(True, tuple(threads), host_sync_ns, tuple(names_in), sync_copy_ns, int(copies.size), sync_copy_names,
                drain_ns)  # fmt: skip
    return Calls(host, tuple(np.flatnonzero(issues).tolist()), steady, issues)


def with_blocked(found: Calls, links: Links | None = None, held: Held | None = None) -> Host:
    """The Host record of :func:`calls`' findings; with the group's ``links`` and the calls the GPU
    ``held``, the launching threads' blocked time (else none is known: work is busy)."""
    host = found.host
    if not host.known:
        return host
    threads = list(host.threads)
    blocked = None
    if links is not None and held is not None:
        blocked = _blocked(links, held, found.steady, found.issues)
        threads = [dataclasses.replace(ts, **blocked.thread(t, ts.busy_ns)) for t, ts in zip(found.index, threads)]
    threads.sort(key=lambda x: (-x.work_ns, x.thread.tid))
    return dataclasses.replace(host, threads=tuple(threads), blocked=blocked.groups if blocked is not None else (),
                               linked=blocked is not None)


def launching_mask(g: GroupTrace, host: Host) -> np.ndarray:
    """Per thread of the trace's ApiCalls.threads, whether it is one of ``host``'s launching threads."""
    want = {(t.thread.pid, t.thread.tid) for t in host.threads}
    return np.array([(t.pid, t.tid) in want for t in g.api.threads], dtype=bool)


class _Blocked:
    """The held non-synchronizing calls of the launching threads that were blocked inside the window."""

    def __init__(self, links: Links, held: Held, steady: iv.Intervals, launching: np.ndarray, names: tuple[str, ...]) -> None:
        nb = ~held.wait & (held.blocked_ns > 0)
        c = held.call[nb]
        th = links.cthread[c].astype(np.int64)
        keep = launching[th]
        c, th = c[keep], th[keep]
        self.call, self.thread_of = c, th
        self.ns = held.blocked_ns[nb][keep]
        self.cause = held.cause[nb][keep].astype(np.int64)
        self.row = held.row[nb][keep]
        self.depth = held.depth[nb][keep]
        self.links = links
        nc = len(CAUSES)
        n_threads = launching.size
        self.per = np.bincount(th * nc + self.cause, weights=self.ns, minlength=n_threads * nc).astype(np.int64).reshape(n_threads, nc)
        self.count = np.bincount(th, minlength=n_threads)
        # by (name, cause)
        name = links.cname[c].astype(np.int64)
        key = name * nc + self.cause
        uniq, inv = np.unique(key, return_inverse=True)
        inv = inv.reshape(-1)
        call_ns = iv.clipped_lengths(links.cstart[c], links.cend[c], steady)
        own = links.launch[self.row] == c
        nbytes = np.where(own, links.nbytes[self.row], 0)
        groups = []
        for k, u in enumerate(uniq.tolist()):
            m = inv == k
            d = self.depth[m]
            groups.append(BlockedCalls(
                name=names[u // nc], cause=CAUSES[u % nc], calls=int(m.sum()), blocked_ns=int(self.ns[m].sum()),
                call_ns=int(call_ns[m].sum()), bytes=int(nbytes[m].sum()), max_depth=int(d.max()) if (d >= 0).any() else None,
            ))  # fmt: skip
        groups.sort(key=lambda b: (-b.blocked_ns, b.name, b.cause))
        self.groups = tuple(groups)

    def thread(self, t: int, busy_ns: int) -> dict:
        row = self.per[t]
        by = tuple((c, int(row[CAUSES.index(c)])) for c in BLOCK_CAUSES if row[CAUSES.index(c)] > 0)
        return {"blocked_ns": min(int(row.sum()), busy_ns), "blocked_by_cause": by, "held_calls": int(self.count[t])}


def _blocked(links: Links, held: Held, steady: iv.Intervals, launching: np.ndarray) -> _Blocked:
    return _Blocked(links, held, steady, launching, links.names)


def _drained(g: GroupTrace, wait_ends: np.ndarray, steady: iv.Intervals) -> int:
    """The GPU's idle time in the stretches where the waits end (from the GPU's last record before the
    wait returned to its next one after), inside ``steady``: what the waits cost when each one drains
    the pipeline. Each stretch counts once, however many waits end in it."""
    if wait_ends.size == 0 or not g.engines:
        return 0
    lists = [(r.start_ns, r.end_ns) if iv.is_sorted(r.start_ns) else iv.union(r.start_ns, r.end_ns) for r in g.engines.values()]
    t = wait_ends if iv.is_sorted(wait_ends) else np.sort(wait_ends)
    lo, hi = iv.idle_around(lists, t)
    keep = hi > lo
    lo, hi = lo[keep], hi[keep]
    if lo.size == 0:
        return 0
    # for points in time order the stretches come in order (both ends never decrease), so that the points of
    # one stretch are next to each other: each stretch once is where it differs from the one before
    first = np.empty(lo.size, dtype=bool)
    first[0] = True
    first[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
    return int(iv.clipped_lengths(lo[first], hi[first], steady).sum())
