"""The host threads that feed the GPU (pure).

A launching thread is one that issues GPU work in the window: a kernel or graph launch, an
asynchronous copy or memset, or a synchronous copy. For each, from the CUDA API rows:
- its time in CUDA calls, by kind: ``launch`` (kernel and graph launches), ``copy`` (issuing copies
  and memsets), ``wait`` (blocking: synchronize calls and synchronous copies; a union), ``other``
  (events, queries, stream set-up, allocations...), each clipped to the window less its set-up gaps
  (what the threads do in set-up is set-up, not a cost per frame);
- ``active``: the window from the start of its first CUDA call to the end of its last one;
- ``busy``: its active time minus its blocking waits and the window's set-up gaps. A thread is never
  idle by this measure except while it waits on the GPU: host code and CUDA calls both keep it
  busy. Its busy time per frame is its bar: when it is taller than every engine's, the host binds.

The process's blocking calls, as a union over its threads, are ``host_sync_ns`` (as in version 1);
``drain_idle_ns`` is the GPU's idle time in the stretches where they end (each wait that returns to
an idle GPU drained the pipeline: the GPU waits for the host's next work).
"""

from __future__ import annotations

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.model import GroupTrace
from clusterbench.analyzers.records import Host, ThreadRef, ThreadStats
from clusterbench.io.nsys import schema as S

_KIND = {"launch": "launch", "graph_launch": "launch", "copy": "copy", "wait": "wait"}  # the rest: other
_KINDS = ("launch", "copy", "wait", "other")
_KIND_OF_CATEGORY = np.array([_KINDS.index(_KIND.get(c, "other")) for c in S.API_CATEGORIES], dtype=np.int64)
_ISSUE = np.array([c in S.ISSUE_CATEGORIES for c in S.API_CATEGORIES], dtype=bool)


CHUNK = iv.BLOCK  # API rows per step: bounds the memory of the clipped lengths


def measure(g: GroupTrace, window: iv.Intervals, setup_gaps: iv.Intervals, frames: int | None) -> Host:
    api = g.api
    if not api.tables:
        return Host(False, (), 0, ())
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
    tot = api.totals
    for t, c, n_ns, n_calls, a, b in zip(tot.thread.tolist(), tot.category.tolist(), tot.ns.tolist(), tot.calls.tolist(),
                                         tot.first_ns.tolist(), tot.last_ns.tolist()):  # fmt: skip
        if not mine[t]:
            continue
        k = int(_KIND_OF_CATEGORY[c])
        ns[t * nk + k] += n_ns
        calls[t * nk + k] += n_calls
        first[t], last[t] = min(first[t], a), max(last[t], b)
        issues[t] |= bool(_ISSUE[c]) and n_calls > 0

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
    threads.sort(key=lambda x: (-x.busy_ns, x.thread.tid))
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
    return Host(True, tuple(threads), host_sync_ns, tuple(names_in), sync_copy_ns, int(copies.size), sync_copy_names, drain_ns)


def _drained(g: GroupTrace, wait_ends: np.ndarray, steady: iv.Intervals) -> int:
    """The GPU's idle time in the stretches where the waits end (from the GPU's last record before the
    wait returned to its next one after), inside ``steady``: what the waits cost when each one drains
    the pipeline. Each stretch counts once, however many waits end in it."""
    if wait_ends.size == 0 or not g.engines:
        return 0
    lists = [(r.start_ns, r.end_ns) if iv.is_sorted(r.start_ns) else iv.union(r.start_ns, r.end_ns) for r in g.engines.values()]
    lo, hi = iv.idle_around(lists, np.sort(wait_ends))
    keep = hi > lo
    pairs = np.unique(np.stack([lo[keep], hi[keep]], axis=1), axis=0)
    if pairs.size == 0:
        return 0
    return int(iv.clipped_lengths(pairs[:, 0], pairs[:, 1], steady).sum())
