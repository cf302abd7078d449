"""The delay test read off the trace: how far each frame would move if one resource took k µs longer at
the frame's marking call, worked out by replaying the traced schedule with the delay added (pure).

The delay test (run.delay) measures this without the profiler; this module gives what the trace says of
the same experiment, so that the two can be set side by side point by point. The trace's schedule is
kept, each dependency with the slack it had: a delay pushes what depends on the delayed work only by what
that slack does not absorb. Every event (a call's start and end, a row's start) gets a *shift*, how much
later it happens, in time order:

- **a call's start** on thread T: T's shift so far (host code between calls runs in series). The host
  point adds k at each marking call's entry, before the call runs, as the injection library spins there;
- **a row's start**: the largest of its dependencies' shifts less their slack, at least 0. Its
  dependencies are the ones the critical path weighs (critical_path): the earlier row on its stream, the
  earlier row of its engine, the event it waits for, and its launch call (from the call's start). A
  dependency's slack is the row's traced start less the dependency's release and less the least lag of
  its kind seen anywhere in the trace (the GPU's latency between dependent work, the launch's from a
  call's start): what the row waited beyond what it had to. A row's end moves with its start;
- **a call's end**: a call the GPU held (a synchronize, a blocked copy or launch) ends when its releasing
  row ends, plus the wake: its shift is the row's less the wake's slack, or, where the call started late
  enough to pass that, its own start's shift less the time it waited beyond the least that a call of its
  name the GPU did not hold took (0 where the GPU held every one). Any other call ends as late as its start. The thread goes on from there;
- **the GPU point** puts a kernel of k µs in the marking call's stream ahead of the frame's work (its
  first row): it starts after the stream's earlier row and the call's launch (each with its least lag),
  and the frame's row after it; **the link point** puts an H2D copy of k µs there, which also holds the
  H2D engine: the next H2D row of any stream waits for it. Each is set against the same op of 0 µs, as the
  delay test sets its GPU and link points against their +0 points.

A resource's slope is its frames' growth per frame (the shift of the last marking call less the first's,
over the frames between them) less its +0 point's, over k. Where the dependencies the trace records are
what the program waits for, a resource on the path every frame gets about 1, and one with k of slack 0.

What the replay cannot see: waits outside CUDA (a lock, a queue between threads: such a thread's calls move
only with its own shift), work the trace does not hold, and the profiler's own costs, which it keeps as
traced (the traced calls are slower and the GPU's latencies longer than untraced, so the trace's slack is
that of the traced run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from clusterbench.analyzers import critical_path as P
from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.held import Held, _names_mask
from clusterbench.analyzers.links import NONE, Links
from clusterbench.io.nsys import schema as S
from clusterbench.model.untraced import SlopeFit

RESOURCES = ("host", "gpu", "link")
_H2D = S.ENGINES.index("h2d") if "h2d" in S.ENGINES else None
# event kinds, in the order they are taken at one instant: a call's end frees its thread before the next
# call starts; a call starts before the rows it launches
_CALL_END, _CALL_START, _ROW_START = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Lags:
    """The lags an op put into the schedule waits for (ns), each the median over the rows it bound in the
    trace: after the earlier row of its stream (the GPU's latency between dependent work), and after its
    launch call's start (the launch, from an idle stream), and after the earlier copy of its engine (the copy engine's turn from one
    stream's copy to another's; no longer than the stream's, which it is where no copy waited for its engine
    alone: a row that seems to have waited long for its engine waited for something the trace does not
    hold)."""

    stream: int
    launch: int
    engine: int


class Schedule:
    """The traced schedule of one group as the replay reads it: per row its dependencies, per call its
    thread, whether the GPU held it (and by which row), and the least lags."""

    def __init__(self, links: Links, held: Held, syncs=None, records=None) -> None:  # noqa: ANN001
        self.links = links
        n = links.n_rows
        s, e = links.start, links.end
        # the earlier row on the row's stream (stream order), when it started by the row's start
        sp = np.full(n, NONE, dtype=np.int64)
        bs = links.by_stream
        for r in range(links.seg_lo.size):
            seg = bs[int(links.seg_lo[r]):int(links.seg_hi[r])]
            if seg.size > 1:
                sp[seg[1:]] = seg[:-1]
        ok = sp >= 0
        ok[ok] &= s[sp[ok]] <= s[ok]
        sp[~ok] = NONE
        self.stream_pred = sp
        ep = P._engine_predecessors(links).astype(np.int64)
        self.engine_pred = ep
        xp = P._event_edges(links, syncs, records)[0].astype(np.int64)
        ok = xp >= 0
        ok[ok] &= e[xp[ok]] <= s[ok]
        xp[~ok] = NONE
        self.event_pred = xp
        lc = links.launch.astype(np.int64).copy()
        ok = lc >= 0
        ok[ok] &= links.cstart[lc[ok]] <= s[ok]
        lc[~ok] = NONE
        self.launch = lc
        # the calls the GPU held: their releasing row
        self.held_row = np.full(links.n_calls, NONE, dtype=np.int64)
        self.held_row[held.call] = held.row
        low = np.iinfo(np.int64).min
        rel_s = np.where(sp >= 0, np.minimum(e[np.maximum(sp, 0)], s), low)
        rel_l = np.where(lc >= 0, links.cstart[np.maximum(lc, 0)] if links.n_calls else 0, low)
        rel_e = np.where(ep >= 0, e[np.maximum(ep, 0)], low)
        rel_o = np.maximum(rel_e, np.where(xp >= 0, e[np.maximum(xp, 0)], low))
        # each lag over the rows whose dependency of that kind released last (it bound the row)
        stream_lag = _median_lag(s, rel_s, (sp >= 0) & (rel_s >= rel_l) & (rel_s >= rel_o))
        self.lags = Lags(stream=stream_lag,
                         launch=_median_lag(s, rel_l, (lc >= 0) & (rel_l > rel_s) & (rel_l > rel_o)),
                         engine=min(stream_lag, _median_lag(s, rel_e, (ep >= 0) & (rel_e > rel_s) & (rel_e > rel_l), stream_lag)))
        # per call name: the least time any of its calls the GPU did not hold took (0 where every one was
        # held: its wait is then the GPU's alone)
        self.least_call = np.zeros(len(links.names) + 1, dtype=np.int64)
        free = np.flatnonzero(self.held_row < 0)
        if free.size:
            big = np.iinfo(np.int64).max
            least = np.full(len(links.names) + 1, big, dtype=np.int64)
            np.minimum.at(least, links.cname[free].astype(np.int64), (links.cend - links.cstart)[free])
            least[least == big] = 0
            self.least_call = least
        # every event, in time order (ties: call ends, call starts, row starts; then by index)
        t = np.concatenate([links.cend, links.cstart, s])
        kind = np.concatenate([np.full(links.n_calls, _CALL_END), np.full(links.n_calls, _CALL_START),
                               np.full(n, _ROW_START)]).astype(np.int8)
        idx = np.concatenate([np.arange(links.n_calls), np.arange(links.n_calls), np.arange(n)])
        o = np.lexsort((idx, kind, t))
        self.order_t = t[o]
        self.order_kind = kind[o]
        self.order_idx = idx[o]
        # per call, its first own row (the row the GPU and link points put their op ahead of)
        first = np.full(links.n_calls, NONE, dtype=np.int64)
        if n:
            rows = np.flatnonzero(lc >= 0)
            rows = rows[np.lexsort((s[rows], lc[rows]))]
            calls = lc[rows]
            head = np.ones(rows.size, dtype=bool)
            head[1:] = calls[1:] != calls[:-1]
            first[calls[head]] = rows[head]
        self.first_row = first


def _median_lag(t: np.ndarray, release: np.ndarray, mask: np.ndarray, none: int | None = 0) -> int | None:
    """The median of t - release where mask holds, at least 0 (``none`` where none)."""
    if not mask.any():
        return none
    return max(0, int(np.median(t[mask] - release[mask])))


def marking_calls(links: Links, mark: str) -> np.ndarray:
    """The calls the injection library marks frames at, in start order: for ``kernel:REGEX`` the calls that
    launch a kernel whose name matches (re.search, as analyze's --frames kernel: counts them); for
    ``api:NAME|NAME`` the calls of those functions (their base names)."""
    if mark.startswith("kernel:"):
        rx = re.compile(mark[len("kernel:"):])
        ok = np.array([bool(rx.search(n)) for n in links.kernel_names] + [False], dtype=bool)
        rows = np.flatnonzero((links.kname >= 0) & ok[links.kname] & (links.launch >= 0))
        calls = np.unique(links.launch[rows].astype(np.int64))
    elif mark.startswith("api:"):
        calls = np.flatnonzero(_names_mask(links, frozenset(mark[len("api:"):].split("|"))))
    else:
        raise ValueError(f"not a frame mark: {mark!r}")
    return calls[np.argsort(links.cstart[calls], kind="stable")]


def growth(sch: Schedule, marks: np.ndarray, resource: str, k_ns: int, frame_marks: np.ndarray) -> float:
    """The shift of the last of ``frame_marks`` less the first's, over the frames between them (ns a
    frame), with an op of ``k_ns`` at each of ``marks`` on ``resource`` (host, gpu or link)."""
    links = sch.links
    s, e = links.start.tolist(), links.end.tolist()
    cs, ce = links.cstart.tolist(), links.cend.tolist()
    th = links.cthread.tolist()
    cname = links.cname.tolist()
    sp, ep, xp, lc = sch.stream_pred.tolist(), sch.engine_pred.tolist(), sch.event_pred.tolist(), sch.launch.tolist()
    held_row = sch.held_row.tolist()
    least = sch.least_call.tolist()
    lag = sch.lags
    n_calls = links.n_calls
    is_mark = np.zeros(n_calls, dtype=bool)
    is_mark[marks] = True
    mk = is_mark.tolist()
    # the GPU and link points: per marked call's first row, the op put ahead of it
    ahead: dict[int, int] = {}
    if resource in ("gpu", "link"):
        for c in marks.tolist():
            r = int(sch.first_row[c])
            if r >= 0:
                ahead[r] = c
    h2d_rows = None  # the H2D engine's rows (lo, hi): the link's copy takes its turn among them
    if resource == "link" and _H2D is not None:
        h2d_rows = (int(links.engine_lo[_H2D]), int(links.engine_hi[_H2D]))
    h2d_busy = 0  # the shifted end of the H2D engine's latest copy
    pending_h2d: list[tuple[int, int]] = []  # (traced start from which the copy holds the engine, its shifted end)
    cur: dict[int, int] = {}
    dstart = [0] * n_calls
    drow = [0] * links.n_rows
    last_held_end: dict[int, int] = {}
    # before the first mark nothing has moved; after the last, nothing is read
    lo = int(np.searchsorted(sch.order_t, links.cstart[frame_marks[0]], side="left")) if frame_marks.size else 0
    hi = int(np.searchsorted(sch.order_t, links.cstart[frame_marks[-1]], side="right")) if frame_marks.size else 0
    for kind, i in zip(sch.order_kind[lo:hi].tolist(), sch.order_idx[lo:hi].tolist()):
        if kind == _CALL_START:
            t = th[i]
            d = cur.get(t, 0)
            if mk[i] and resource == "host":
                d += k_ns
            dstart[i] = d
            cur[t] = d
        elif kind == _CALL_END:
            t = th[i]
            d = cur.get(t, dstart[i])
            r = held_row[i]
            if r >= 0 and last_held_end.get(t, -1) < cs[i]:
                # it ended at the later of its own least time from its start and its row's end: that one
                # keeps its traced wake; the other gains on it only by the difference
                own = cs[i] + least[cname[i]]
                bind = max(own, e[r])
                d = max(0, d - (bind - own), drow[r] - (bind - e[r]))
                last_held_end[t] = ce[i]
            cur[t] = d
        else:
            st = s[i]
            # the dependencies: (release, shift); the latest release bound the row and keeps its traced
            # lag, an earlier one overtakes it only by more than the difference
            deps = []
            p = sp[i]
            if p >= 0:
                deps.append((min(e[p], st), drow[p]))
            p = ep[i]
            if p >= 0:
                deps.append((e[p], drow[p]))
            p = xp[i]
            if p >= 0:
                deps.append((e[p], drow[p]))
            c = lc[i]
            if c >= 0:
                deps.append((cs[c], dstart[c]))
            d = 0
            if deps:
                bind = max(rel for rel, _ in deps)
                for rel, dd in deps:
                    d = max(d, dd - (bind - rel))
            c = ahead.get(i, NONE)
            if c >= 0:
                # the op ahead: after the stream's earlier row and its own launch, each with the lag of its
                # kind (the link's copy also after the H2D engine's copy under way), and the frame's row after it
                p = sp[i]
                tv = max(cs[c] + dstart[c] + lag.launch, (e[p] + drow[p] + lag.stream) if p >= 0 else 0)
                if h2d_rows is not None:
                    tv = max(tv, h2d_busy)
                end_v = tv + k_ns
                d = max(d, end_v + lag.stream - st)
                if h2d_rows is not None:
                    pending_h2d.append((tv, end_v))
                    h2d_busy = max(h2d_busy, end_v)
            if h2d_rows is not None and h2d_rows[0] <= i < h2d_rows[1]:
                # an H2D row waits for the copies put on the engine before it started
                while pending_h2d and pending_h2d[0][0] <= st + d:
                    _, end_v = pending_h2d.pop(0)
                    d = max(d, end_v + lag.engine - st)
                h2d_busy = max(h2d_busy, e[i] + d)
            drow[i] = d
    if frame_marks.size < 2:
        return float("nan")
    first, last = int(frame_marks[0]), int(frame_marks[-1])
    # the mark's shift before its own delay: the frames' period as the marks' times give it
    own = k_ns if resource == "host" else 0
    return ((dstart[last] - own) - (dstart[first] - own)) / (frame_marks.size - 1)


REPLAY_NOTE = "replayed from the trace"
# frames replayed at most (from the window's first): each resource replays twice, one Python step per call
# start, call end and row, so a long trace's replay is bounded (about 1 s for 5,000 frames of 7 calls)
MAX_FRAMES = 5_000


def replay(links: Links, held: Held, mark: str, k_us: float, window: tuple[np.ndarray, np.ndarray] | None = None,
           syncs=None, records=None, resources: tuple[str, ...] = RESOURCES) -> tuple[SlopeFit, ...]:  # noqa: ANN001
    """Each resource's slope as the trace gives it (a SlopeFit of ``processes`` 0, without a spread): the
    marked frames' period in the trace, with the shift per frame of an op of 0 µs (``base_us``) and of
    ``k_us`` (``delayed_us``) at every marking call of ``mark`` (kernel:REGEX or api:NAMES), over the
    frames marked in ``window`` (None: every one). A resource whose op has nowhere to go (no marking call
    launches a row), or a trace with fewer than two marked frames, is ``not tested``, with why."""
    from clusterbench.analyzers.untraced import judge

    sch = Schedule(links, held, syncs, records)
    marks = marking_calls(links, mark)
    frame_marks = marks if window is None else marks[iv.points_inside(links.cstart[marks], window)]
    if frame_marks.size > MAX_FRAMES:  # the slope settles within a few hundred frames: a long trace's first ones
        frame_marks = frame_marks[:MAX_FRAMES]
    if frame_marks.size < 2 or not k_us > 0:
        why = "no delay" if not k_us > 0 else f"{frame_marks.size} marked frame(s) in the trace's window ({mark})"
        return tuple(SlopeFit(r, k_us, None, None, None, None, 0, "not tested", why) for r in resources)
    cs = links.cstart[frame_marks]
    period = float(cs[-1] - cs[0]) / (frame_marks.size - 1)
    k_ns = int(round(k_us * 1e3))
    out = []
    for res in resources:
        if res in ("gpu", "link") and not (sch.first_row[marks] >= 0).any():
            out.append(SlopeFit(res, k_us, None, None, None, None, 0, "not tested",
                                f"no marking call ({mark}) launches work on a stream in the trace"))
            continue
        base = 0.0 if res == "host" else growth(sch, marks, res, 0, frame_marks)
        delayed = growth(sch, marks, res, k_ns, frame_marks)
        slope = (delayed - base) / k_ns
        out.append(SlopeFit(res, k_us, slope, None, (period + base) / 1e3, (period + delayed) / 1e3, 0, judge(slope),
                            REPLAY_NOTE))
    return tuple(out)


def replay_group(data, group, mark: str, k_us: float, built=None) -> tuple[SlopeFit, ...]:  # noqa: ANN001
    """:func:`replay` of ``group`` (a GroupAnalysis of ``data``, a TraceData) over its window. ``built``:
    untraced.group_links of the same, when at hand."""
    from clusterbench.analyzers.untraced import group_links

    g, links, held = built if built is not None else group_links(data, group)
    return replay(links, held, mark, k_us, group.window.intervals, g.syncs, g.events)
