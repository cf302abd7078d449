"""The lanes of a timeline: one per (engine, stream), inside a span of the window (pure).

``build_timeline(data, group, span)`` cuts the group's records to the span and merges each
lane's records into a union, so that a renderer draws one bar per busy stretch. The default
span shows a few batches: N = max(3, 2 x streams) of them, a batch being one record of the
engine with the fewest records (among kernel, graph, h2d, d2h), since a batched pipeline issues
about one of each per batch. It starts at the first GPU activity in the window, or after an idle
gap longer than a batch period that precedes the first batch (see default_span).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.errors import InputError
from clusterbench.io.nsys import schema as S
from clusterbench.io.nsys.reader import TraceData

DEFAULT_BATCHES = 3  # the default span shows this many batches (twice the stream count, if more)
BATCH_ENGINES = ("kernel", "graph", "h2d", "d2h")


@dataclass(frozen=True, slots=True, eq=False)
class Lane:
    engine: str
    stream: int
    starts_ns: np.ndarray  # disjoint, relative to the window start
    ends_ns: np.ndarray

    @property
    def busy_ns(self) -> int:
        return int((self.ends_ns - self.starts_ns).sum())


@dataclass(frozen=True, slots=True, eq=False)
class Timeline:
    window_start_ns: int  # absolute, the time 0 of the lanes
    window_ns: int
    span_start_ns: int  # relative to the window start
    span_end_ns: int
    span_source: str  # how the span was chosen
    lanes: tuple[Lane, ...]


def default_span(
    window: iv.Intervals, starts: dict[str, np.ndarray], busy: iv.Intervals, batches: int
) -> tuple[int, int, str]:
    """(start, end, how) of the default span, absolute ns.

    ``starts`` holds, per engine, the sorted start times of its records inside the window;
    ``busy`` is the union of all records inside the window. A batch is one record of the
    engine with the fewest records. The span starts at the first GPU activity, or after the
    last idle gap longer than a batch period that comes before the first batch (a long wait at
    the start would squeeze the batches into a corner), and ends where batch ``batches + 1``
    starts.
    """
    w0, w1 = int(window[0][0]), int(window[1][-1])
    have = {e: starts[e] for e in BATCH_ENGINES if e in starts and starts[e].size}
    if not have or busy[0].size == 0:
        return w0, w1, "the whole window"
    name = min(have, key=lambda e: have[e].size)
    st = have[name]
    if st.size <= batches:
        return w0, w1, f"the whole window ({st.size} {name} records: {batches} or fewer batches)"
    a = max(w0, int(busy[0][0]))
    how = "from the first GPU activity"
    period = (int(st[-1]) - int(st[0])) / (st.size - 1)
    gap_s, gap_e = busy[1][:-1], busy[0][1:]
    long_before = (gap_e <= st[0]) & (gap_e - gap_s > period)
    if long_before.any():
        k = int(np.flatnonzero(long_before)[-1])
        a = int(gap_e[k])
        how = f"after an idle gap of {(gap_e[k] - gap_s[k]) / 1e6:,.3f} ms"
    first = int(np.searchsorted(st, a, side="left"))
    if first + batches >= st.size:
        return a, w1, f"the last {st.size - first} of {st.size} batches (one {name} record each), {how}"
    b = int(st[first + batches])
    return a, b, f"{batches} batches of {st.size} (one {name} record each), {how}"


def build_timeline(
    data: TraceData,
    group,  # GroupAnalysis  # noqa: ANN001
    span_ms: float | None = None,
    start_ms: float = 0.0,
) -> Timeline:
    """Lanes of ``group`` (a GroupAnalysis of ``data``) in a span of its window.

    ``span_ms``/``start_ms`` pick the span in ms from the window start; by default it shows
    a few batches (see the module docstring).
    """
    window = group.window_intervals
    ws, we = window
    w0, w1 = int(ws[0]), int(we[-1])
    act = data.activity
    sel = (act.pid == group.pid) & (act.device == group.device)
    s, e, eng, st = act.start_ns[sel], act.end_ns[sel], act.engine[sel], act.stream[sel]
    extent = w1 - w0
    if start_ms < 0 or (span_ms is not None and span_ms <= 0):
        raise InputError(
            f"--plot-start must be 0 or more and --plot-span more than 0 ms (got {start_ms:g} and {span_ms})",
            hint="give both in ms from the window start",
        )
    if span_ms is None and start_ms == 0:
        inside = iv.points_inside(s, window) | (iv.clipped_lengths(s, e, window) > 0)
        starts = {S.ENGINES[c]: np.sort(np.maximum(s[inside & (eng == c)], w0)) for c in np.unique(eng[inside]).tolist()}
        ps, pe, _ = iv.clip(s, e, window)
        batches = max(DEFAULT_BATCHES, 2 * max(1, group.n_streams))
        a_abs, b_abs, how = default_span(window, starts, iv.union(ps, pe), batches)
        a, b = a_abs - w0, b_abs - w0
    else:
        a = int(round(start_ms * 1e6))
        if a >= extent:
            raise InputError(
                f"--plot-start {start_ms:g} ms lies past the window's end ({extent / 1e6:.3f} ms)",
                hint="pick a start inside the window",
            )
        b = extent if span_ms is None else min(extent, a + int(round(span_ms * 1e6)))
        how = f"{a / 1e6:g} to {b / 1e6:g} ms (asked for)"
    lo, hi = w0 + a, w0 + b
    span = iv.intersect(window, (np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64)))
    lanes: list[Lane] = []
    for code, name in enumerate(S.ENGINES):
        m = eng == code
        if not m.any():
            continue
        for sid in np.unique(st[m]).tolist():
            mm = m & (st == sid)
            ps, pe, _ = iv.clip(s[mm], e[mm], span)
            u_s, u_e = iv.union(ps, pe)
            if u_s.size:
                lanes.append(Lane(name, int(sid), u_s - w0, u_e - w0))
    return Timeline(w0, extent, a, b, how, tuple(lanes))
