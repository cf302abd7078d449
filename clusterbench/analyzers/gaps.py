"""Idle gaps and their causes (pure).

An idle gap is a stretch of the window in which no engine is busy, at least GAP_NS long. Its cause
is what the process's launching threads (the threads that issue GPU work: launches, copies,
memsets) were doing during it, from the CUDA API rows and PROFILER_OVERHEAD:

- ``module_load``: a module or library load (cuModuleLoadData, cuLibraryLoad*, cuLink*) lies in the
  gap: the host-side compile before it (NVRTC, the PTX JIT) is not traced, so the gap is set-up;
- otherwise the state the threads spent most of the gap in, summed over the threads:
  ``alloc`` (device or pinned allocation, host registration, free), ``profiler`` (nsys's own
  overhead on the thread), ``sync`` (blocked in a synchronize or a synchronous copy while nothing
  was queued), ``host`` (running host code, or CUDA calls that only issue or query work);
- ``unknown``: the trace has no API rows for the process's launching threads.

A thread counts for a gap when the gap begins between the starts of its first and its last issuing
call (the threads that were feeding the loop: each issues more work after the gap began), or, when
no thread was, every launching thread of the process.
module_load, alloc and profiler gaps are set-up: not the pipeline's own loop; so is a gap that began
while no thread was feeding (``between``: a hand-over between threads, a warm-up thread that stopped
before the workers start).
"""

from __future__ import annotations

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.model import HOLE_NS, GroupTrace
from clusterbench.analyzers.records import GAP_CAUSES, Gaps, WorkNotTraced
from clusterbench.io.nsys import schema as S

GAP_NS = HOLE_NS  # an idle gap this long (0.1 ms) counts: ~10 frames at 10 µs/frame
HIDDEN_GAP_NS = 1_000_000  # a wait this long with the GPU idle is not a synchronize's wake-up latency
HIDDEN_SHARE = 0.10  # such waits over this share of the window: the GPU's work is not in the trace

_ML, _ALLOC, _SYNC, _HOST, _PROF, _UNKNOWN = (GAP_CAUSES.index(c) for c in GAP_CAUSES)
_STATE_OF_CATEGORY = np.full(len(S.API_CATEGORIES), _HOST, dtype=np.int64)
_STATE_OF_CATEGORY[S.API_CODE["module_load"]] = _ML
_STATE_OF_CATEGORY[S.API_CODE["alloc"]] = _ALLOC
_STATE_OF_CATEGORY[S.API_CODE["wait"]] = _SYNC
# a cause is picked by the most time; ties go to the earlier of these
_PICK_ORDER = (_ALLOC, _PROF, _SYNC, _HOST)


def idle(g: GroupTrace, window: iv.Intervals, threshold: int = GAP_NS) -> iv.Intervals:
    """The idle stretches of ``window`` (no engine of ``g`` busy) at least ``threshold`` long."""
    if threshold < HOLE_NS:
        raise ValueError(f"gap threshold {threshold} ns is below the {HOLE_NS} ns the model keeps holes of")
    ws, we = window
    if ws.size == 0:
        return ws, we
    lo, hi = min(int(ws[0]), g.first_ns), max(int(we[-1]), g.last_ns)
    # before the first record, the holes, after the last one (clipping to the window only shortens them)
    hs = np.concatenate([[lo], g.holes[0], [g.last_ns]])
    he = np.concatenate([[g.first_ns], g.holes[1], [hi]])
    keep = he > hs
    if not keep.all():
        hs, he = hs[keep], he[keep]
    # the holes taken in blocks against the window (one set or the other first gives the same set), each
    # block's stretches kept only when long enough: a window of many ranges, each holding many holes, would
    # otherwise make temporaries the size of all the holes at once
    out_s, out_e = [], []
    for b0 in range(0, hs.size, iv.BLOCK):
        s, e = iv.intersect((hs[b0 : b0 + iv.BLOCK], he[b0 : b0 + iv.BLOCK]), window)
        keep = (e - s) >= threshold
        out_s.append(s[keep])
        out_e.append(e[keep])
    if not out_s:
        return iv.empty()
    if len(out_s) == 1:
        return out_s[0], out_e[0]
    return np.concatenate(out_s), np.concatenate(out_e)


def issue_spans(g: GroupTrace) -> dict[int, tuple[int, int]]:
    """The launching threads of the group's process: thread index -> (first issuing call's start,
    last issuing call's start), over every call of the trace. A thread whose last launch returns
    after the GPU ran out of work (the warm-up kernel ends while its launch call is returning) issues
    nothing after the gap begins: it is not feeding the GPU then."""
    api = g.api
    if not len(api.threads):
        return {}
    tpid = api.thread_pid()
    return {t: (int(api.issue_first_ns[t]), int(api.issue_last_ns[t])) for t in range(len(api.threads))
            if tpid[t] == g.pid and api.issue_last_ns[t] >= 0}  # fmt: skip


CHUNK = 1 << 18  # API rows per pass step: bounds the memory of the pieces cut out of the gaps


def _outermost(s: np.ndarray, e: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Each row's start moved past the ends of the earlier rows of the same key (a row inside another
    ends up empty): nsys writes its overhead as rows inside rows ("Unknown" holding "CUDA profiling
    memory allocation" holding "TLS allocation"), and the time counts once, in the outermost row."""
    out = s.copy()
    for k in np.unique(key).tolist():
        rows = np.flatnonzero(key == k)
        rows = rows[np.argsort(s[rows], kind="stable")]
        before = np.maximum.accumulate(e[rows])[:-1]
        out[rows[1:]] = np.minimum(np.maximum(s[rows[1:]], before), e[rows[1:]])
    return out


def _pieces(g: GroupTrace, gaps: iv.Intervals, threads: np.ndarray, relevant: np.ndarray):
    """Chunk by chunk: (piece length, gap index, state, label) of the kept API calls and the profiler
    rows that fall in the gaps, on threads that count for the gap. Labels index api.names, then the
    profiler rows' names after them."""
    gs = gaps[0]
    api = g.api
    for c0 in range(0, len(api), CHUNK):
        sl = slice(c0, c0 + CHUNK)
        on = np.flatnonzero(np.isin(api.thread[sl], threads)) + c0
        if on.size == 0:
            continue
        ps, pe, owner = iv.clip(api.start_ns[on], api.end_ns[on], gaps)
        rows = on if owner is None else on[owner]
        j = np.searchsorted(gs, ps, side="right") - 1
        k = np.searchsorted(threads, api.thread[rows])
        ok = relevant[j, k]
        rows = rows[ok]
        yield (pe - ps)[ok], j[ok], _STATE_OF_CATEGORY[api.name_category[api.name[rows]]], api.name[rows].astype(np.int64)
    ov = g.overhead
    if len(ov):
        key = {(t.pid, t.tid): i for i, t in enumerate(api.threads)}
        th = np.array([key.get((int(p), int(t)), -1) for p, t in zip(ov.pid.tolist(), ov.tid.tolist())], dtype=np.int64)
        idx = np.flatnonzero(np.isin(th, threads))
        if idx.size:
            s0 = _outermost(ov.start_ns[idx], ov.end_ns[idx], th[idx])
            keep = ov.end_ns[idx] > s0
            idx, s0 = idx[keep], s0[keep]
            e0 = ov.end_ns[idx]
            ps, pe, owner = iv.clip(s0, e0, gaps)
            rows = idx if owner is None else idx[owner]
            j = np.searchsorted(gs, ps, side="right") - 1
            ok = relevant[j, np.searchsorted(threads, th[rows])]
            rows = rows[ok]
            yield (pe - ps)[ok], j[ok], np.full(rows.size, _PROF, dtype=np.int64), len(api.names) + rows.astype(np.int64)


def _longest(plen: np.ndarray, key: np.ndarray, lab: np.ndarray, best_len: np.ndarray, best_label: np.ndarray) -> None:
    """Per key of one chunk of pieces, its longest piece (of equal ones, the last), kept in
    ``best_len``/``best_label`` where it is longer than the longest of the chunks before."""
    want = np.flatnonzero(plen > 0)
    if want.size == 0:
        return
    srt = want[np.lexsort((plen[want], key[want]))]
    top = srt[np.flatnonzero(np.append(key[srt][1:] != key[srt][:-1], True))]
    better = top[plen[top] > best_len[key[top]]]
    best_len[key[better]] = plen[better]
    best_label[key[better]] = lab[better]


def classify(g: GroupTrace, gaps: iv.Intervals, window_start_ns: int, threshold: int = GAP_NS) -> Gaps:
    """Each gap of ``gaps`` (disjoint, in time order) with its cause; see the module docstring."""
    gs, ge = gaps
    n = int(gs.size)
    lengths = ge - gs
    ns = len(GAP_CAUSES)
    parts = np.zeros((n, ns), dtype=np.int64)
    cause = np.full(n, _UNKNOWN, dtype=np.int8)
    spans = issue_spans(g)
    if n == 0 or not spans:
        parts[:, _UNKNOWN] = lengths
        return Gaps(threshold, gs, lengths, cause, (None,) * n, parts, window_start_ns)

    threads = np.array(sorted(spans), dtype=np.int64)
    first = np.array([spans[t][0] for t in threads.tolist()], dtype=np.int64)
    last = np.array([spans[t][1] for t in threads.tolist()], dtype=np.int64)
    # relevant[j, k]: thread k was feeding the GPU when gap j began (its issuing span holds the gap's
    # start); a gap no thread was feeding at takes every thread, and is a hand-over ("between")
    relevant = (first[None, :] <= gs[:, None]) & (last[None, :] >= gs[:, None])
    between = ~relevant.any(axis=1)
    relevant[between, :] = True
    n_rel = relevant.sum(axis=1)

    # one pass over the pieces: per (gap, state), the time summed over the threads that count, and the
    # longest piece with its label (the call that names the cause, once the cause is known)
    per = np.zeros(n * ns, dtype=np.float64)
    best_len = np.zeros(n * ns, dtype=np.int64)
    best_label = np.full(n * ns, -1, dtype=np.int32)
    for plen, j, st, lab in _pieces(g, gaps, threads, relevant):
        if plen.size:
            key = j * ns + st
            base = int(key.min())
            per[base : int(key.max()) + 1] += np.bincount(key - base, weights=plen)
            _longest(plen, key, lab, best_len, best_label)
    per = per.reshape(n, ns).astype(np.int64)
    # host: the threads' time in the gap that no other state takes (CUDA calls that issue or query
    # work count as host: the thread was not blocked)
    blocked = per[:, _ML] + per[:, _ALLOC] + per[:, _SYNC] + per[:, _PROF]
    per[:, _HOST] = np.maximum(lengths * n_rel - blocked, 0)
    order = np.array(_PICK_ORDER)
    picked = order[np.argmax(per[:, order], axis=1)]  # argmax takes the first of equal maxima
    cause = np.where(per[:, _ML] > 0, _ML, picked).astype(np.int8)
    # the call that names the cause: the longest piece in that state (for host, the longest CUDA call)
    best_label = best_label[np.arange(n) * ns + cause]
    del best_len
    parts = np.rint(per / n_rel[:, None]).astype(np.int64)
    labels = list(g.api.names) + list(g.overhead.name)
    api_name = tuple(labels[i] if i >= 0 else None for i in best_label.tolist())
    return Gaps(threshold, gs, lengths, cause, api_name, parts, window_start_ns, between=between if between.any() else None)


LAZY_LEAD = 0.10  # a first-launch load begins within this share of its gap from the gap's start


def first_launch_loads(g: GroupTrace, gaps: Gaps) -> np.ndarray:
    """Per gap, whether it is a module_load gap that only a kernel's first launch made: the runtime
    loading the kernel's module as it launches it (CUDA's lazy loading, the default since CUDA 12.2).
    Such a gap begins with the load (within LAZY_LEAD of its length: no compile or other set-up comes
    first), and after the load the thread issues one call before the gap ends, a kernel launch: the
    launch whose kernel ends the gap. Still set-up, but no boundary between phases of the program."""
    out = np.zeros(len(gaps), dtype=bool)
    cand = np.flatnonzero(gaps.cause == _ML)
    api = g.api
    if cand.size == 0 or not len(api):
        return out
    mine = api.thread_pid()[api.thread] == g.pid
    cat = api.category
    load = np.flatnonzero(mine & (cat == S.API_CODE["module_load"]))
    issue_cat = np.array([c in S.ISSUE_CATEGORIES for c in S.API_CATEGORIES], dtype=bool)
    sync_copy = np.array([n in S.SYNC_COPY_CALLS for n in api.names], dtype=bool)
    issue = np.flatnonzero(mine & (issue_cat[cat] | sync_copy[api.name]))
    for j in cand.tolist():
        gs = int(gaps.starts_ns[j])
        ge = gs + int(gaps.lengths_ns[j])
        loads = load[(api.start_ns[load] < ge) & (api.end_ns[load] > gs)]
        if loads.size == 0:
            continue
        first = loads[np.argmin(api.start_ns[loads])]
        if int(api.start_ns[first]) - gs > LAZY_LEAD * (ge - gs):
            continue
        after = issue[(api.thread[issue] == api.thread[first]) & (api.start_ns[issue] >= api.end_ns[first])
                      & (api.start_ns[issue] < ge)]  # fmt: skip
        out[j] = after.size == 1 and int(cat[after[0]]) == S.API_CODE["launch"]
    return out


def work_not_traced(g: GroupTrace, gaps: Gaps, window_ns: int) -> WorkNotTraced | None:
    """The GPU's work is missing from the trace when the launching threads wait in a synchronize
    through idle gaps of at least HIDDEN_GAP_NS that add up to HIDDEN_SHARE of the window."""
    m = (gaps.cause == GAP_CAUSES.index("sync")) & (gaps.lengths_ns >= HIDDEN_GAP_NS)
    waited = int(gaps.lengths_ns[m].sum())
    if window_ns <= 0 or waited < HIDDEN_SHARE * window_ns:
        return None
    calls = tuple(sorted({gaps.api[i] for i in np.flatnonzero(m).tolist() if gaps.api[i]}))
    names = set(g.api.names)
    graphs = bool(names & S.GRAPH_LAUNCH_CALLS)
    capture = bool(names & {"cudaProfilerStart", "cudaProfilerStop", "cuProfilerStart", "cuProfilerStop"})
    if g.graph_trace == "node" or (graphs and g.graph_trace is None):
        why = (
            "the process launches CUDA graphs and the trace is node-level (--cuda-graph-trace=node): graphs launched "
            "from the device (cudaGraphInstantiateFlagDeviceLaunch, tail launches that relaunch themselves) leave no "
            "rows at node level"
        )
        hint = "trace the graphs at graph level: nsys profile --cuda-graph-trace=graph (the default), then analyze again"
    elif capture:
        why = ("the capture (cudaProfilerStart/Stop, --capture-range) may have stopped before the GPU finished, or started "
               "after the work was queued")  # fmt: skip
        hint = "widen the capture: call cudaProfilerStop after the last synchronize, or profile the whole run"
    else:
        why = (
            "the work runs where the trace does not follow it: another process or an MPS client, a device or context "
            "that was not traced, or a library that launches without CUPTI"
        )
        hint = "trace every process and device the pipeline uses (nsys profile --trace=cuda, --gpuctxsw, or MPS off)"
    return WorkNotTraced(waited, waited / window_ns, calls, why, hint)
