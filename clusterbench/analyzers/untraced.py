"""The frame without the profiler (pure): the delay test's slopes and verdict, the untraced frame of an
injected run, the traced critical path's structure per frame, the untraced split and the causes of ``idle``.
docs/probe.md ("The untraced frame") and docs/analyze.md ("The untraced split") give the definitions; in
short:

- **slope** of a resource: (median frame of the processes delayed by k µs per frame − median frame of its
  baseline's) / k, spread (half the range of each side, added) / k. About 1: the frame grows by the delay,
  the resource **binds**; about 0: it has **slack**; between: **shared** (:data:`BINDS_AT`,
  :data:`SLACK_BELOW`);
- the **untraced frame** of an injected run: the marks past the warm-up, the loop's wall time over its
  frames; a marking thread's own time per frame: its wall time less its waits and the injected delays,
  scaled to the process's frame;
- the **untraced split**: every part of the traced critical path per frame, measured again without the
  profiler: each engine as traced (the profiler does not lengthen the GPU's own work); ``gpu_latency``
  (the path's idle gaps) as gaps × the unit's latency per gap from the latency program's chain of the
  frame's ops, untraced, at most the gaps' traced mean (:func:`gap_price`); ``launch``
  as the path's own launch time × the unit's launch latency untraced over
  the same under the profiler (:func:`launch_scale`); ``round_trip`` (the host waking from a synchronize,
  and the launch right after it) as the wakes × the latency program's untraced wake, and the launch after
  each priced as ``launch`` is;
  each thread's host part as the same share of its untraced own time (the injection library, less the
  time the GPU held its calls as traced) as the path held of its traced own time. No part is a
  remainder: the parts add up to the measured untraced frame or they do not
  (:data:`clusterbench.model.untraced.SPLIT_TOLERANCE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from clusterbench.analyzers import critical_path as path_mod
from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.records import BLOCK_CAUSES
from clusterbench.io.nsys import schema as S
from clusterbench.io.nsys.reader import base_api_name
from clusterbench.model import units as U
from clusterbench.model.stats import half_range, median
from clusterbench.model.untraced import (
    RESOURCES,
    SPLIT_TOLERANCE,
    HostFrame,
    IdleCauses,
    InjectReport,
    LatencyRun,
    PathHost,
    PathStructure,
    SlopeFit,
    SplitPart,
    ThreadBar,
    UntracedCosts,
    UntracedSplit,
)

# A slope at or above this binds: the frame grew by at least three quarters of the delay. At or below
# SLACK_BELOW the resource has slack. Both halfway between the ideal 1 and 0.5 and between 0.5 and 0, so
# that a resource shared by two in turn (0.5) reads shared on either side of the noise.
BINDS_AT = 0.75
SLACK_BELOW = 0.25
# A spread wider than the gap between two verdicts (0.25) leaves the verdict to chance: said in its note.
SPREAD_WARN = 0.25


# --------------------------------------------------------------------------- the delay test


def judge(slope: float) -> str:
    """binds, shared or slack for a slope (pure)."""
    if slope >= BINDS_AT:
        return "binds"
    if slope <= SLACK_BELOW:
        return "slack"
    return "shared"


def fit_slope(resource: str, k_us: float, base: Sequence[float], delayed: Sequence[float],
              why_not: str | None = None) -> SlopeFit:
    """The slope of ``resource`` from its baseline's frames and the delayed processes' frames (µs), delayed
    by ``k_us`` per frame (pure). ``why_not``: the resource could not be delayed (not tested)."""
    n = min(len(base), len(delayed))
    if why_not is not None or not base or not delayed or not k_us > 0:
        note = why_not or ("no delay" if not k_us > 0 else "no run gave a frame time")
        return SlopeFit(resource, k_us, None, None, median(base) if base else None,
                        median(delayed) if delayed else None, n, "not tested", note)
    b, d = median(base), median(delayed)
    slope = (d - b) / k_us
    spread = (half_range(base) + half_range(delayed)) / k_us
    note = None
    if spread > SPREAD_WARN:
        note = (f"the spread (± {spread:.2f}) is wider than the gap between two verdicts: run more processes "
                "(--delay-processes), a larger delay, or each process longer (more frames, where the program's "
                "command sets them: a loop's frame can wander within a run)")
    return SlopeFit(resource, k_us, slope, spread, b, d, n, judge(slope), note)


def binds_code(slopes: Sequence[SlopeFit]) -> str:
    """What binds, as one word for the row (pure): the binding resources joined by '+' (several bind when
    they take turns: each is on the path), else ``shared`` (some share it), ``none`` (every tested one has
    slack), ``untested``."""
    tested = [s for s in slopes if s.verdict != "not tested"]
    if not tested:
        return "untested"
    binding = [s.resource for s in tested if s.verdict == "binds"]
    if binding:
        return "+".join(r for r in RESOURCES if r in binding)
    if any(s.verdict == "shared" for s in tested):
        return "shared"
    return "none"


def within_spread(test: Sequence[SlopeFit], replayed: Sequence[SlopeFit]) -> bool | None:
    """Whether every replayed slope lies within the delay test's slope of its resource ± its spread (pure):
    where the two name other resources only because a slope lies near a verdict's edge, which a few processes
    cannot place. None where no resource has both slopes, or a spread is missing."""
    measured = {s.resource: s for s in test if s.slope is not None}
    pairs = [(measured[r.resource], r) for r in replayed if r.slope is not None and r.resource in measured]
    if not pairs or any(m.spread is None for m, _ in pairs):
        return None
    return all(abs(r.slope - m.slope) <= m.spread for m, r in pairs)  # type: ignore[operator]


def binds_words(code: str, slopes: Sequence[SlopeFit]) -> str:
    """What binds, in a sentence (pure)."""
    def one(s: SlopeFit) -> str:
        if s.slope is None:
            return f"{s.resource} not tested ({s.note})"
        return f"{s.resource} {s.slope:.2f} ± {s.spread:.2f}"
    listed = "; ".join(one(s) for s in slopes)
    if code == "untested":
        return f"nothing could be delayed: {listed}"
    if code == "none":
        return (f"no resource the test lengthened binds ({listed}): the frame is set by what it did not lengthen, "
                "such as the GPU's latency between dependent work or a synchronize's round trip")
    if code == "shared":
        return f"no one resource binds; they share the frame ({listed})"
    names = code.split("+")
    if len(names) == 1:
        return f"{names[0]} binds: the frame grows by about the delay ({listed})"
    return (f"{' and '.join(names)} bind: each lengthens the frame by about the delay, so they take turns and the "
            f"frame is their sum ({listed})")


# --------------------------------------------------------------------------- the injected run's frame


def host_frame(report: InjectReport) -> HostFrame | None:
    """The untraced frame of one injected run (pure): None when no thread marked more frames than its
    warm-up (the marking definition matched nothing in the loop)."""
    w = report.warmup
    marking = [t for t in report.threads
               if t.warm_mark is not None and t.last_mark is not None and t.marks_total - 1 - w > 0]
    if not marking:
        return None
    frames = sum(t.marks_total - 1 - w for t in marking)
    t0 = min(t.warm_mark.t_ns for t in marking)  # type: ignore[union-attr]
    t1 = max(t.last_mark.t_ns for t in marking)  # type: ignore[union-attr]
    period_us = (t1 - t0) / frames / 1e3
    bars = []
    for t in marking:
        a, b = t.warm_mark, t.last_mark
        assert a is not None and b is not None
        wall = b.t_ns - a.t_ns
        if wall <= 0:
            continue
        scale = period_us / wall  # the thread's ns over its wall, times the process's frame
        wait, delay, call = b.wait_ns - a.wait_ns, b.delay_ns - a.delay_ns, b.call_ns - a.call_ns
        busy = max(0, wall - wait - delay)
        syncs = [x for x in t.loop_apis if base_api_name(x.api) in SYNC_APIS]
        n_sync, sync_ns = sum(x.n for x in syncs), sum(x.total_ns for x in syncs)
        bars.append(ThreadBar(t.tid, t.name, t.marks_total - 1 - w, busy * scale, call * scale, wait * scale,
                              delay * scale, t.after_wait_ns / t.after_wait_n / 1e3 if t.after_wait_n else None,
                              n_sync / frames, sync_ns / n_sync / 1e3 if n_sync else None))
    if not bars:
        return None
    main = max(marking, key=lambda t: t.marks_total)
    kept = np.array([m.t_ns for m in main.marks[w:]], dtype=np.int64)
    p10 = p90 = None
    if kept.size >= 4:
        per = np.diff(kept) / 1e3 * ((main.marks_total - 1 - w) / frames)
        p10, p90 = float(np.percentile(per, 10)), float(np.percentile(per, 90))
    calls: dict[str, list[float]] = {}
    for t in marking:
        for a in t.loop_apis:
            c = calls.setdefault(a.api, [0.0, 0.0])
            c[0] += a.n
            c[1] += a.total_ns
    listed = tuple(sorted(((api, n / frames, tot / n / 1e3) for api, (n, tot) in calls.items() if n),
                          key=lambda x: -x[1] * x[2]))
    return HostFrame(frames, period_us, p10, p90, max(b.busy_us for b in bars), tuple(bars), report.sched, listed)


# The synchronizes: the calls that block the host until the GPU catches up, less the synchronous copies
# (a copy's time is its copy's too)
SYNC_APIS = S.HOST_SYNC_CALLS - S.SYNC_COPY_CALLS


@dataclass(frozen=True, slots=True)
class HostBar:
    """The untraced host bar (µs per frame): the busiest marking thread's own time, its synchronizes' own
    cost included. ``busy_us`` what the injection library counts as the thread's own (it leaves every wait
    out, since it cannot tell waiting from the call's own work); ``sync_us`` its synchronizes at the cost of
    one with nothing to wait for (the latency program's ``idle_sync_ns``, or the thread's own mean per
    synchronize where that is less; None where either was not measured: then the bar is ``busy_us``);
    ``tid`` the thread."""

    bar_us: float
    busy_us: float
    sync_us: float | None
    tid: int


def sync_own(t: ThreadBar, costs: UntracedCosts | None) -> float | None:
    """A thread's synchronizes' own cost per frame, untraced (pure): each at the latency program's
    synchronize with nothing to wait for, or at the thread's own mean synchronize where that is less;
    None where either was not measured (an older record, or no latency program run)."""
    idle_ns = None if costs is None else costs.untraced.idle_sync_ns
    if idle_ns is None or t.syncs is None:
        return None
    per = idle_ns / 1e3 if t.sync_us is None else min(idle_ns / 1e3, t.sync_us)
    return t.syncs * per


def host_bar(host: HostFrame, costs: UntracedCosts | None) -> HostBar:
    """What the host needs per frame with a GPU that kept up (pure): per marking thread its own time plus
    each of its synchronizes at a synchronize's own cost (:func:`sync_own`), the busiest thread's. A
    synchronize that finds its work done still costs the host its call (about 2 µs a frame on the H100s'
    DAQ-like loop at 4 streams, where every synchronize found its stream done), and a loop whose host
    binds pays it every frame."""
    best: HostBar | None = None
    for t in host.threads:
        part = sync_own(t, costs)
        bar = HostBar(t.busy_us + (part or 0.0), t.busy_us, part, t.tid)
        if best is None or bar.bar_us > best.bar_us:
            best = bar
    return best if best is not None else HostBar(host.host_us, host.host_us, None, -1)


def median_frame(frames: Sequence[HostFrame]) -> HostFrame | None:
    """The run of median period among several processes' (pure; the lower middle of an even count)."""
    if not frames:
        return None
    ordered = sorted(frames, key=lambda f: f.period_us)
    return ordered[(len(ordered) - 1) // 2]


# --------------------------------------------------------------------------- the traced path's structure

_KIND_ENGINE = {"memset": "memset", "h2d": "h2d", "d2h": "d2h", "kernel": "kernel"}
_ISSUE_CODES = np.array([S.API_CODE[c] for c in ("launch", "graph_launch", "copy")], dtype=np.int8)


def group_links(data: Any, group: Any) -> tuple[Any, Any, Any]:
    """``group``'s (a GroupAnalysis of ``data``, a TraceData) GroupTrace, its links and the calls the GPU held
    in its window: what the path's structure and the replay both read, built once for both."""
    from clusterbench.analyzers import held as held_mod
    from clusterbench.analyzers import links as links_mod
    from clusterbench.analyzers import model as model_mod

    g = model_mod.build(data, group.pid, group.device)
    links = links_mod.build(g)
    return g, links, held_mod.find(links, group.window.intervals, g.syncs, g.events)


def path_structure(data: Any, group: Any, built: tuple[Any, Any, Any] | None = None) -> PathStructure | None:
    """The traced critical path of ``group`` (a GroupAnalysis of ``data``, a TraceData) per frame, outside the
    set-up gaps; None without a path or frames. ``built``: :func:`group_links` of the same, when at hand."""
    from clusterbench.analyzers import host as host_mod

    frames = group.frames.count
    if group.critical_path is None or not frames:
        return None
    g, links, held = built if built is not None else group_links(data, group)
    window = group.window.intervals
    w = path_mod.walk(links, held, window, host_mod.launching_mask(g, group.host), g.syncs, g.events)
    ss, ee, rr, _ = w.segments()
    gp = group.gaps
    m = gp.setup_mask()
    setup = (gp.starts_ns[m], gp.starts_ns[m] + gp.lengths_ns[m])
    mid = (ss + ee) // 2
    keep = ~iv.points_inside(mid, setup) if setup[0].size else np.ones(ss.size, dtype=bool)
    return structure_of_segments(ss[keep], ee[keep], rr[keep], frames, links, held, g.api.threads,
                                 {t.thread.tid: t for t in group.host.threads}, window)


# held calls whose idle stretches are the host's own work (a pageable copy staging its chunks, a module load)
_HOST_WORK_CAUSES = np.array([BLOCK_CAUSES.index(c) for c in ("pageable", "module_load")], dtype=np.int8)
_PAGEABLE = BLOCK_CAUSES.index("pageable")
_GRAPH_LAUNCH = S.API_CODE["graph_launch"]
_H2D, _D2H = S.ENGINES.index("h2d"), S.ENGINES.index("d2h")


def _pageable_edges(links: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The starts of the pageable H2D rows, and the starts and ends of the pageable D2H rows (pure)."""
    pg = np.asarray(links.pageable, dtype=bool)
    eng = np.asarray(links.engine)
    h2d, d2h = pg & (eng == _H2D), pg & (eng == _D2H)
    return links.start[h2d], links.start[d2h], links.end[d2h]


def _staging(edges: tuple[np.ndarray, np.ndarray, np.ndarray], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Which idle stretches [a, b) inside held graph launches are the host staging a pageable copy node
    (pure; ``edges`` from :func:`_pageable_edges`): a stretch that ends where a pageable H2D row starts (the
    host copies into the staging buffer before each chunk goes), or that lies between two pageable D2H rows
    (the host copies each chunk out before the next one goes). The stretch before a pageable D2H's first
    chunk is the GPU's (the latency after the node before it)."""
    h2d_start, d2h_start, d2h_end = edges
    return np.isin(b, h2d_start) | (np.isin(b, d2h_start) & np.isin(a, d2h_end))


def held_idle(links: Any, held: Any, window: Any) -> dict[int, tuple[int, int, int, int]]:
    """Per thread (index into the trace's threads): the GPU's idle time inside the non-synchronizing calls
    the GPU held (a graph launch that returns once its graph has run), inside ``window`` (pure):
    (lead ns, leads, gap ns, gaps). A *lead* is an idle stretch from a call's start to the GPU's first
    work (its launch), a *gap* one between the GPU's work inside the call (the latency between dependent
    work). The host's own work inside a held call is left out: a module load's and a pageable copy call's
    whole hold (the host stages the copy while the GPU idles), and inside a graph launch held by a
    pageable copy node only that node's staging (:func:`_staging`): the graph's launch and the gaps
    between its other nodes are still the GPU's."""
    from clusterbench.analyzers import held as held_mod

    if not len(held) or not links.start.size:
        return {}
    graph_pageable = (held.cause == _PAGEABLE) & (links.ccat[held.call] == _GRAPH_LAUNCH)
    keep = ~held.wait & (~np.isin(held.cause, _HOST_WORK_CAUSES) | graph_pageable)
    keep[keep] = held.release[keep] > links.cstart[held.call[keep]]
    calls = held.call[keep]
    if not calls.size:
        return {}
    cs = links.cstart[calls].astype(np.int64)
    rel = held.release[keep].astype(np.int64)
    th = links.cthread[calls].astype(np.int64)
    staged = graph_pageable[keep]
    edges = _pageable_edges(links) if staged.any() else None
    order = np.argsort(cs, kind="stable")
    # the GPU's busy time inside the holds, as blocked time measures it (held.busy_prefix: cut to them)
    bs, be, _ = held_mod.busy_prefix(links, window, iv.union(cs[order], rel[order]))
    out = {}
    for ti in iv.distinct(th):
        m = th == ti
        order = np.argsort(cs[m], kind="stable")
        spans = iv.intersect(iv.union(cs[m][order], rel[m][order]), window)
        idle = iv.subtract(spans, (bs, be))
        length = (idle[1] - idle[0]).astype(np.int64)
        gpu = length > 0
        if edges is not None and staged[m].any():  # a stretch inside a graph launch held by a pageable node may be its staging
            gpu &= ~_staging(edges, idle[0], idle[1])
        lead = np.isin(idle[0], cs[m]) & gpu
        gap = ~lead & gpu
        out[int(ti)] = (int(length[lead].sum()), int(lead.sum()), int(length[gap].sum()), int(gap.sum()))
    return out


def structure_of_segments(ss: np.ndarray, ee: np.ndarray, rr: np.ndarray, frames: int, links: Any, held: Any,
                          threads: Sequence[Any], stats_by_tid: Mapping[int, Any], window: Any) -> PathStructure:
    """The path's structure from its segments in time order (start, end, resource code), the walk's links
    (its calls' ends, threads, rows' engines and times), the held calls and the trace's threads (pure)."""
    idle, launch, e0, h0 = path_mod.IDLE, path_mod.LAUNCH, path_mod.ENGINE0, path_mod.HOST0

    def pf(ns: float) -> float:  # ns over the frames, in µs per frame
        return U.us_per_frame_of(ns, frames) or 0.0

    length = (ee - ss).astype(np.int64)
    total = int(length.sum())
    engines = {S.ENGINES[c - e0]: int(length[rr == c].sum()) for c in np.unique(rr[(rr >= e0) & (rr < h0)]).tolist()}
    # the segment that follows each one (by start; the segments tile the path)
    nxt = np.append(rr[1:], -1)
    touching = np.append(ss[1:] == ee[:-1], False)
    prev = np.insert(rr[:-1], 0, -1)
    prev_touch = np.insert(ee[:-1] == ss[1:], 0, False)
    is_idle = rr == idle
    gaps = int((is_idle & touching & (nxt >= e0) & (nxt < h0)).sum())
    # the waits the GPU held, per thread: [release, the call's end] is the host waking up
    wake_s = held.release[held.wait].astype(np.int64) if len(held) else np.empty(0, np.int64)
    wake_call = held.call[held.wait] if len(held) else np.empty(0, np.int64)
    wake_e = links.cend[wake_call].astype(np.int64) if wake_call.size else np.empty(0, np.int64)
    wake_th = links.cthread[wake_call].astype(np.int64) if wake_call.size else np.empty(0, np.int64)
    idle_in_held = held_idle(links, held, window)
    hosts = []
    after_wake = np.zeros(ss.size, dtype=bool)  # host segments that hold a wake
    for code in np.unique(rr[rr >= h0]).tolist():
        ti = code - h0
        sel = np.flatnonzero(rr == code)
        mine = wake_th == ti
        ws, we = wake_s[mine], wake_e[mine]
        ok = we > ws
        order = np.argsort(ws[ok], kind="stable")
        wake_iv = iv.union(ws[ok][order], we[ok][order]) if ok.any() else iv.empty()
        host_iv = (ss[sel], ee[sel])
        both = iv.intersect(host_iv, wake_iv)
        wake_ns = iv.length(both)
        aw_ns, aw_n = 0, 0
        if both[0].size:
            # which host segments hold a wake: those an intersection piece starts inside
            k = np.searchsorted(ss[sel], both[0], side="right") - 1
            ok_k = k >= 0
            after_wake[sel[np.unique(k[ok_k])]] = True
            # a turn's own host part: from the wake's end to the segment's end, when no other call of the
            # thread that issues GPU work starts in between (the path goes on at the thread's next issue)
            seg_end = ee[sel][k[ok_k]]
            woke = both[1][ok_k]
            issue = np.flatnonzero((links.cthread == ti) & np.isin(links.ccat, _ISSUE_CODES))
            starts = np.sort(links.cstart[issue].astype(np.int64)) if issue.size else np.empty(0, np.int64)
            between = np.searchsorted(starts, seg_end, side="left") - np.searchsorted(starts, woke, side="right")
            turn = between == 0
            aw_ns, aw_n = int((seg_end - woke)[turn].sum()), int(turn.sum())
        t = threads[ti]
        st = stats_by_tid.get(t.tid)
        work = getattr(st, "work_us_per_frame", None) if st is not None else None
        held_ns = getattr(st, "blocked_ns", None) if st is not None else None
        blocked = U.us_per_frame_of(held_ns, st.frames) if held_ns is not None else None
        lead_ns, leads, gap_ns, n_gaps = idle_in_held.get(ti, (0, 0, 0, 0))
        hosts.append(PathHost(int(t.tid), getattr(t, "name", None), pf(int(length[sel].sum())), pf(wake_ns),
                              float(both[0].size) / frames, work, pf(aw_ns), aw_n / frames, blocked,
                              pf(lead_ns), leads / frames, pf(gap_ns), n_gaps / frames))
    is_launch = rr == launch
    launch_after = is_launch & prev_touch & (prev >= h0) & np.insert(after_wake[:-1], 0, False)
    # each engine's mean op duration over the window's rows
    inside = iv.points_inside(links.start, window) if links.start.size else np.zeros(0, dtype=bool)
    op_us = {}
    for code in np.unique(links.engine[inside]).tolist() if inside.any() else []:
        sel = inside & (links.engine == code)
        op_us[S.ENGINES[code]] = float((links.end[sel] - links.start[sel]).mean()) / 1e3
    return PathStructure(
        frames=frames, path_us=pf(total), engines_us={k: pf(v) for k, v in engines.items()},
        idle_us=pf(int(length[is_idle].sum())), idle_gaps=gaps / frames,
        launch_us=pf(int(length[is_launch].sum())), launches=int(is_launch.sum()) / frames,
        launches_after_wake=int(launch_after.sum()) / frames,
        hosts=tuple(sorted(hosts, key=lambda h: -h.path_us)), op_us=op_us,
        launch_after_wake_us=pf(int(length[launch_after].sum())))


# --------------------------------------------------------------------------- the frame's op sequence


def sequence_of(group: Any, host: HostFrame | None = None, max_each: int = 4) -> str:
    """The frame's work on one stream, as the latency program takes it (pure): per frame, in the order a DAQ
    loop issues them, the memsets, the H2D copies, half the event records, the kernels (each of the trace's
    mean kernel time), the other half of the event records and the D2H copies, each kind as often as the
    window holds it per frame (rounded; at most ``max_each``), copies of their mean size. Event records
    per frame come from the untraced run's calls (``host``), since a trace has no row for them."""
    frames = group.frames.count
    if not frames:
        return ""

    def per_frame(name: str) -> tuple[int, int]:
        st = group.busy.engines.get(name)
        if st is None or not st.count:
            return 0, 0
        n = min(max_each, int(round(st.count / frames)))
        size = int(round((st.bytes or 0) / st.count)) if st.bytes else 0
        return n, size

    ops: list[str] = []
    n, b = per_frame("memset")
    ops += [f"memset:{max(b, 1)}"] * n
    n, b = per_frame("h2d")
    ops += [f"h2d:{max(b, 1)}"] * n
    events = 0
    if host is not None:
        events = min(2 * max_each, int(round(sum(c[1] for c in host.calls
                                                 if c[0] in ("cudaEventRecord", "cuEventRecord", "cudaEventRecordWithFlags")))))
    ops += ["event"] * (events // 2)
    kst = group.busy.engines.get("kernel")
    nk, _ = per_frame("kernel")
    if nk:
        mean_us = kst.busy_ns / kst.count / 1e3
        ops += [f"kernel:{mean_us:.3g}"] * nk
    ops += ["event"] * (events - events // 2)
    n, b = per_frame("d2h")
    ops += [f"d2h:{max(b, 1)}"] * n
    return ",".join(ops)


def _seq_ops(seq: str) -> list[tuple[str, float]]:
    out = []
    for item in seq.split(","):
        kind, _, v = item.partition(":")
        out.append((kind, float(v) if v else 0.0))
    return out


def latency_per_gap(run: LatencyRun | None, op_us: Mapping[str, float]) -> float | None:
    """The GPU's latency per gap between dependent ops (µs) from the latency program's chain of the frame's
    sequence (pure): its time per sequence less the ops' own time (the program's traced op durations, or a
    kernel op's spin), over the ops a trace shows (events fold into the gap they stand in); None without
    a chain. Not clipped: a negative figure says the ops ran shorter there than in the program."""
    if run is None or run.sequence is None or run.sequence.period_ns is None:
        return None
    ops = _seq_ops(run.sequence.ops)
    visible = [k for k, _ in ops if k != "event"]
    if not visible:
        return None
    own = 0.0
    for kind, v in ops:
        if kind == "event":
            continue
        eng = _KIND_ENGINE.get(kind, kind)
        own += op_us.get(eng, v if kind == "kernel" else 0.0)
    return (run.sequence.period_ns / 1e3 - own) / len(visible)


# --------------------------------------------------------------------------- the split


def match_threads(hosts: Sequence[PathHost], bars: Sequence[ThreadBar]) -> dict[int, ThreadBar]:
    """The untraced run's thread for each traced path thread (by tid of the trace) (pure): by name where
    every name on both sides is distinct and they match, else by rank of their own time per frame."""
    if not hosts or not bars:
        return {}
    hn = [h.name for h in hosts]
    bn = [b.name for b in bars]
    if None not in hn and len(set(hn)) == len(hn) and len(set(bn)) == len(bn) and set(hn) <= set(bn):
        by = {b.name: b for b in bars}
        return {h.tid: by[h.name] for h in hosts}  # type: ignore[index]
    traced = sorted(hosts, key=lambda h: -(h.work_us or 0.0))
    untraced = sorted(bars, key=lambda b: -b.busy_us)
    return {h.tid: b for h, b in zip(traced, untraced)}


def gap_price(g_u: float, traced_us: float, gaps: float) -> tuple[float, bool]:
    """The untraced latency per gap of ``gaps`` gaps a frame that took ``traced_us`` as traced (pure): the
    unit's (``g_u``, not below 0), at most the traced mean per gap, since the profiler adds to a gap and
    never takes from it; and whether that bound applied. A program's gaps may be shorter than the latency
    program's chain (a graph's nodes follow each other on the GPU without a launch)."""
    per = max(g_u, 0.0)
    if gaps > 0 and traced_us / gaps < per:
        return traced_us / gaps, True
    return per, False


def held_idle_part(h: PathHost, gap_us: float | None, costs: UntracedCosts | None) -> tuple[float, float, str]:
    """The GPU's idle time inside the calls the GPU held (:func:`held_idle`), as traced and priced without
    the profiler, and how (pure): its gaps at the unit's untraced latency per gap (as traced where that
    was not measured), its leads as launches (:func:`launch_part`; as traced where no launch was
    measured). (0, 0, "") where the held calls held none."""
    if h.held_leads <= 0 and h.held_gaps <= 0:
        return 0.0, 0.0, ""
    traced = h.held_lead_us + h.held_gap_us
    words = []
    lead_u = 0.0
    if h.held_leads > 0:
        lead_u_m, _ = launch_part(h.held_leads, h.held_lead_us, costs)
        lead_u = h.held_lead_us if lead_u_m is None else lead_u_m
        words.append(f"{h.held_leads:.2f} launches" + (" (as traced: no launch measured)" if lead_u_m is None else ""))
    gap_u = 0.0
    if h.held_gaps > 0:
        per = None if gap_us is None else gap_price(gap_us, h.held_gap_us, h.held_gaps)[0]
        gap_u = h.held_gap_us if per is None else h.held_gaps * per
        words.append(f"{h.held_gaps:.2f} gaps" + (" (as traced: no latency measured)" if per is None
                                                  else f" × {U.us(per, 2)}"))
    if lead_u + gap_u < 0.005:  # taken off all the same, but too little to name at two decimals
        return traced, lead_u + gap_u, ""
    return traced, lead_u + gap_u, f"{U.us(lead_u + gap_u, 2)} the GPU idled inside them untraced ({', '.join(words)})"


def host_part(h: PathHost, bar: ThreadBar | None, gap_us: float | None = None,
              costs: UntracedCosts | None = None) -> tuple[float | None, str]:
    """A thread's host part of the path without the profiler, and how (pure). Its turns (a wait's return
    to its next issuing call, where the path goes on there) are ``after_waits`` × the injection library's
    untraced time from a wait's return to the next issuing call; the rest of its path time is the same
    share of its untraced own time (less those turns) as the path held of its traced own time. The
    untraced own time is the library's (which leaves every wait out) with the thread's synchronizes at
    their own cost (:func:`sync_own`), as the traced own time holds a synchronize's own part (only the
    time the GPU held it is blocked time).

    The traced own time leaves out the thread's time inside calls the GPU held while it ran their work
    (``blocked_us``); the library times every call from entry to exit, held or not, so that time is taken
    off its own time first, as traced (the GPU's work, which the profiler does not lengthen): else the
    host's part would count the GPU's work a second time. The GPU's idle stretches inside those calls
    (their launches and the gaps between their work) are the GPU's side too, which the split prices as
    launch and latency: they are taken off both own times, as traced from the traced one and priced
    untraced (:func:`held_idle_part`, ``gap_us`` the untraced latency per gap) from the library's."""
    if bar is None:
        return None, "not measured (no untraced run of this thread)"
    turns_u = 0.0
    words = []
    if h.after_waits > 0:
        if bar.after_wait_us is None:
            return None, "not measured (the untraced run made no wait to time the turns from)"
        turns_u = h.after_waits * bar.after_wait_us
        words.append(f"{h.after_waits:.2f} turns a frame × {U.us(bar.after_wait_us, 2)} from a wait's return to the "
                     "next issuing call (the injection library)")
    rest_t = max(0.0, h.path_us - h.wake_us - h.after_wait_us)
    rest_u = 0.0
    if rest_t > 0:
        if not h.work_us:
            return None, "not measured (the trace gives no own time for this thread)"
        idle_t, idle_u, idle_how = held_idle_part(h, gap_us, costs)
        work_rest = h.work_us - h.after_wait_us - idle_t
        share = min(1.0, max(0.0, rest_t / work_rest)) if work_rest > 0 else 1.0
        held = h.blocked_us or 0.0
        syncs = sync_own(bar, costs)
        own_u = max(0.0, bar.busy_us + (syncs or 0.0) - held - idle_u - turns_u)
        rest_u = share * own_u
        plus = f" with {U.us(syncs, 2)} its synchronizes' own cost" if syncs else ""
        if h.blocked_us is None:
            less = ", the time the GPU held its calls not recorded (an older record): taken whole"
        elif held > 0:
            less = f", less {U.us(held, 2)} the GPU held its calls, as traced" + (f", and {idle_how}" if idle_how else "")
        else:
            less = f", less {idle_how}" if idle_how else ""
        words.append(f"{U.pct(share, 0)} of the rest of its own time ({U.us(own_u, 2)} untraced, the injection "
                     f"library{plus}{less}), the share the path held as traced")
    return turns_u + rest_u, "; ".join(words) or "no host time on the path"


def launch_scale(costs: UntracedCosts | None) -> float | None:
    """The unit's launch latency without the profiler over the same under it (pure): the latency program's
    launch (a launch call's start to its kernel's start on an idle GPU) untraced, over its run under the
    profiler. None where either run is missing or gave no launch.

    A program's launches are not the latency program's: the path's launch after a wake (a memset or a
    copy issued into an empty queue) took 3.9 to 5.7 µs under nsys on the H100s measured, the latency
    program's kernel launch 7.7 to 10.5 µs. What carries from one to the other is what the profiler does
    to a launch, so the path's own launch time is scaled by it (docs/analyze.md, "The untraced split")."""
    if costs is None or costs.traced is None:
        return None
    u, t = costs.untraced.launch_ns, costs.traced.launch_ns
    if u is None or t is None or u <= 0 or t <= 0:
        return None
    return u / t


def launch_part(launches: float, traced_us: float, costs: UntracedCosts | None) -> tuple[float | None, str]:
    """The untraced µs per frame of ``launches`` launches a frame that took ``traced_us`` on the traced path,
    and how (pure): scaled by :func:`launch_scale` where the latency program ran both ways, else the
    latency program's untraced launch per launch (a kernel's, from an empty queue: an upper figure for a
    copy's or a memset's); None where neither was measured."""
    scale = launch_scale(costs)
    if scale is not None:  # both runs gave a launch (costs and costs.traced are there)
        u_ns, t_ns = costs.untraced.launch_ns, costs.traced.launch_ns  # type: ignore[union-attr]
        return traced_us * scale, (f"{launches:.2f} launches a frame, {U.us(traced_us, 2)} traced × {scale:.2f} (the "
                                   f"unit's launch untraced over under the profiler, {U.us(u_ns / 1e3, 2)} / "  # type: ignore[operator]
                                   f"{U.us(t_ns / 1e3, 2)})")  # type: ignore[operator]
    lat = costs.untraced if costs is not None else None
    if lat is None or lat.launch_ns is None:
        return None, "not measured (no latency program run)"
    launch_u = max(lat.launch_ns, 0.0) / 1e3
    return launches * launch_u, (f"{launches:.2f} launches a frame × {U.us(launch_u, 2)}: the unit's kernel launch "
                                 "from an empty queue, untraced (no run under the profiler to scale the path's own "
                                 "launches by)")


def host_waits(host: HostFrame, costs: UntracedCosts | None) -> tuple[float, float | None] | None:
    """Where one thread marked the frames untraced: its waits per frame beyond its synchronizes' own cost
    (µs; the injection library's wait time less :func:`sync_own`, the whole wait time where that was not
    measured), and that own cost (pure). None with several marking threads."""
    if len(host.threads) != 1:
        return None
    bar = host.threads[0]
    own = sync_own(bar, costs)
    return max(0.0, bar.wait_us - (own or 0.0)), own


def gpu_held_part(path: PathStructure, host: HostFrame | None, costs: UntracedCosts | None,
                  parts: Sequence[SplitPart]) -> SplitPart | None:
    """The GPU's time on the untraced path that the traced path's GPU parts fall short of (pure), or None.

    Where one thread issues all the work, its untraced frame is its own time and its waits: the time its
    synchronizes waited beyond their own cost (the injection library's wait time less :func:`sync_own`),
    with the GPU on the path all along. The path's host part is at most the thread's own time, so the
    path's GPU parts together are at least those waits. Where the traced path's GPU parts, priced untraced
    (``parts`` other than the host's), come to less, the difference is this part, measured by the library:
    the path the trace shows is not the untraced one (daq_loop at 2 streams on an H100, where the host
    slowed by the profiler issued late enough that the GPU kept up: the traced path all host, untraced
    3.1 µs a frame waited at the synchronize). Which of the GPU's resources held those waits the trace
    cannot say. None where the path has several threads, the untraced run marked several, a part was not
    measured, or the parts cover the waits."""
    if host is None or len(path.hosts) != 1:
        return None
    gpu = [p.untraced_us for p in parts if not p.resource.startswith("host:")]
    waits = host_waits(host, costs)
    if waits is None or any(u is None for u in gpu):
        return None
    waited, own = waits
    covered = float(sum(gpu))  # type: ignore[arg-type]
    if waited - covered < 0.005:  # covered, or too little to name at two decimals
        return None
    of = (f"its synchronizes' wait beyond their own cost ({U.us(own, 2)})" if own is not None
          else "its synchronizes' whole time (their own cost not measured)")
    return SplitPart("gpu_held", 0.0, waited - covered,
                     f"the one issuing thread waited {U.us(waited, 2)} a frame untraced ({of}, the injection "
                     f"library), the GPU's time on the path, less the {U.us(covered, 2)} the traced path's GPU "
                     "parts give untraced: the traced path holds less of the GPU than that, so it cannot say "
                     "which of the GPU's resources held the thread")


def untraced_split(path: PathStructure, host: HostFrame | None, costs: UntracedCosts | None) -> UntracedSplit:
    """The traced path's parts per frame, and each measured again without the profiler (pure)."""
    parts: list[SplitPart] = []
    for name, us in sorted(path.engines_us.items(), key=lambda kv: -kv[1]):
        parts.append(SplitPart(name, us, us, "as traced: the profiler does not lengthen the GPU's own work"))
    lat = costs.untraced if costs is not None else None
    g_u = latency_per_gap(lat, path.op_us)
    if path.idle_us > 0 or path.idle_gaps > 0:
        if g_u is None:
            parts.append(SplitPart("gpu_latency", path.idle_us, None, "not measured (no latency program run)"))
        else:
            per, capped = gap_price(g_u, path.idle_us, path.idle_gaps)
            parts.append(SplitPart("gpu_latency", path.idle_us, path.idle_gaps * per,
                                   f"{path.idle_gaps:.2f} gaps a frame × {U.us(per, 2)}: the unit's chain of "
                                   f"the frame's ops ({lat.sequence.ops}) untraced, less the ops' own time"  # type: ignore[union-attr]
                                   + (f" ({U.us(max(g_u, 0.0), 2)}), at most the gaps' traced mean (the profiler "
                                      "does not shorten the GPU's gaps)" if capped else "")))
    wake_u = None if lat is None or lat.wake_ns is None else max(lat.wake_ns, 0.0) / 1e3
    other_launches = path.launches - path.launches_after_wake
    other_launch_us = path.launch_us - path.launch_after_wake_us
    if other_launch_us > 0 or other_launches > 0:
        launch_u, how = launch_part(other_launches, other_launch_us, costs)
        parts.append(SplitPart("launch", other_launch_us, launch_u, how))
    wakes = sum(h.wakes for h in path.hosts)
    wake_t = sum(h.wake_us for h in path.hosts)
    if wakes > 0 or path.launches_after_wake > 0:
        rt_t = wake_t + path.launch_after_wake_us
        after_u, after_how = launch_part(path.launches_after_wake, path.launch_after_wake_us, costs)
        rt_u = None if wake_u is None or after_u is None else wakes * wake_u + after_u
        parts.append(SplitPart("round_trip", rt_t, rt_u,
                               "not measured (no latency program run)" if rt_u is None else
                               f"{wakes:.2f} wakes a frame × {U.us(wake_u, 2)} (the unit's synchronize round trip, "
                               f"untraced), and the launches after them: {after_how}"))
    matched = match_threads(path.hosts, host.threads if host is not None else ())
    for h in path.hosts:
        label = f"host:{h.tid}"
        traced = h.path_us - h.wake_us
        bar = matched.get(h.tid)
        untraced_us, how = host_part(h, bar, g_u, costs)
        parts.append(SplitPart(label, traced, untraced_us, how))
    held = gpu_held_part(path, host, costs, parts)
    if held is not None:
        parts.append(held)
    untraced = [p.untraced_us for p in parts]
    total_u = None if any(u is None for u in untraced) else float(sum(untraced))  # type: ignore[arg-type]
    frame = host.period_us if host is not None else None
    agrees = None if total_u is None or not frame else abs(total_u / frame - 1) <= SPLIT_TOLERANCE
    if total_u is None:
        note = "a part was not measured without the profiler: " + ", ".join(p.resource for p in parts if p.untraced_us is None)
    elif frame is None:
        note = "no untraced frame was measured to set the parts against"
    else:
        note = (f"the untraced parts add up to {U.us_per_frame(total_u, 2)}, {U.signed_pct((total_u / frame - 1) * 100, 1)} "
                f"of the untraced frame {U.us_per_frame(frame, 2)} (measured in the same processes)"
                + ("" if agrees else f": more than ±{U.pct(SPLIT_TOLERANCE, 0)} apart, so a part is mismeasured or "
                                     "the path's shape changes without the profiler"))
    return UntracedSplit(tuple(parts), path.path_us, total_u, frame, agrees, note)


def idle_causes(path: PathStructure, costs: UntracedCosts | None) -> IdleCauses:
    """``idle`` on the traced path by cause (pure): the GPU's own latency (gaps × the untraced latency per
    gap), the profiler's part (gaps × what the profiler adds per gap, the latency program under it) and
    what neither explains."""
    lat_u = costs.untraced if costs is not None else None
    lat_t = costs.traced if costs is not None else None
    g_u = latency_per_gap(lat_u, path.op_us)
    g_t = latency_per_gap(lat_t, path.op_us)
    rt = None if lat_u is None or lat_u.gap_ns is None else lat_u.gap_ns / 1e3
    n = path.idle_gaps
    per_u, bounded = (None, False) if g_u is None else gap_price(g_u, path.idle_us, n)
    own = None if per_u is None else n * per_u
    prof = None if g_u is None or g_t is None else n * (max(g_t, 0.0) - max(g_u, 0.0))
    if own is None:
        return IdleCauses(path.idle_us, n, None, None, None, rt, "not measured: the latency program did not run")
    unexplained = path.idle_us - own - (prof or 0.0)
    rt_words = ("" if rt is None else
                f"; the synchronize's round trip ({U.us(rt, 2)} untraced) is not idle on this path: the host's "
                "wake and the next launch hold it (round_trip)")
    note = (f"{n:.2f} gaps a frame: the GPU's own latency {U.us(max(g_u, 0.0), 2)} a gap (untraced"  # type: ignore[arg-type]
            + (f"; {U.us(path.idle_us / n, 2)} a gap here as traced, which bounds it"
               if n >= 0.005 and bounded else "")  # fewer than 0.01 a frame: not worth words
            + ")"
            + ("" if g_t is None else f", {U.us(max(g_t, 0.0), 2)} under the profiler")
            + ("" if prof is not None else "; the profiler's part is not told apart (the latency program did not "
                                           "run under it) and is in what is left")
            + rt_words)
    return IdleCauses(path.idle_us, n, own, prof, unexplained, rt, note)


def governor_of(names: Sequence[str]) -> str | None:
    """One governor name, or ``mixed: a, b`` (pure); None when none was read."""
    found = sorted(set(n.strip() for n in names if n and n.strip()))
    if not found:
        return None
    return found[0] if len(found) == 1 else "mixed: " + ", ".join(found)
