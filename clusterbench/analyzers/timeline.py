"""The lanes of a timeline, and the window as trace events (pure, apart from one read of API calls).

``build_timeline(data, group, span)`` cuts the group's records to a span of the window and merges
each (engine, stream) lane's records into a union, so that a renderer draws one bar per busy
stretch; the window's idle gaps in the span come with their causes. The default span shows a few
batches: N = max(3, 2 x streams) of them, a batch being one record of the engine with the fewest
records (among kernel, graph, h2d, d2h), since a batched pipeline issues about one of each per
batch. It starts at the first GPU activity in the window, or after an idle gap longer than a batch
period that precedes the first batch (see default_span). ``at_longest_gap`` starts it just before
the window's longest idle gap instead.

``build_export(data, group)`` is the whole window as tracks of events: one per (engine, stream)
with each record, one per launching host thread with each CUDA call (read again from the trace for
the window), and one of idle gaps named by cause.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers import model as model_mod
from clusterbench.analyzers.records import GroupAnalysis
from clusterbench.errors import InputError
from clusterbench.io.nsys.reader import TraceData, read_api_window
from clusterbench.model.engines import display_name
from clusterbench.model import units as U

DEFAULT_BATCHES = 3  # the default span shows this many batches (twice the stream count, if more)
BATCH_ENGINES = ("kernel", "graph", "h2d", "d2h")
GAP_LEAD = 0.25  # --plot-start longest-gap: start this share of the gap before it


@dataclass(frozen=True, slots=True, eq=False)
class Lane:
    engine: str
    stream: int
    starts_ns: np.ndarray  # disjoint, relative to the window start
    ends_ns: np.ndarray

    @property
    def busy_ns(self) -> int:
        return int((self.ends_ns - self.starts_ns).sum())


@dataclass(frozen=True, slots=True)
class GapMark:
    start_ns: int  # relative to the window start, clipped to the span
    end_ns: int
    cause: str


@dataclass(frozen=True, slots=True, eq=False)
class Timeline:
    window_start_ns: int  # absolute, the time 0 of the lanes
    window_ns: int
    span_start_ns: int  # relative to the window start
    span_end_ns: int
    span_source: str  # how the span was chosen
    lanes: tuple[Lane, ...]
    gaps: tuple[GapMark, ...] = ()


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
        how = f"after an idle gap of {U.ms(gap_e[k] - gap_s[k])}"
    first = int(np.searchsorted(st, a, side="left"))
    if first + batches >= st.size:
        return a, w1, f"the last {st.size - first} of {st.size} batches (one {name} record each), {how}"
    b = int(st[first + batches])
    return a, b, f"{batches} batches of {st.size} (one {name} record each), {how}"


def build_timeline(
    data: TraceData,
    group: GroupAnalysis,
    span_ms: float | None = None,
    start_ms: float = 0.0,
    at_longest_gap: bool = False,
) -> Timeline:
    """Lanes of ``group`` (a GroupAnalysis of ``data``) in a span of its window.

    ``span_ms``/``start_ms`` pick the span in ms from the window start; ``at_longest_gap`` starts it
    just before the longest idle gap; by default it shows a few batches (see the module docstring).
    """
    window = group.window.intervals
    ws, we = window
    w0, w1 = int(ws[0]), int(we[-1])
    g = model_mod.build(data, group.pid, group.device)
    extent = w1 - w0
    if start_ms < 0 or (span_ms is not None and span_ms <= 0):
        raise InputError(
            f"--plot-start must be 0 or more and --plot-span more than 0 ms (got {start_ms:g} and {span_ms})",
            hint="give both in ms from the window start",
        )
    gp = group.gaps
    if at_longest_gap:
        i = gp.longest()
        if i is None:
            raise InputError("--plot-start longest-gap: the window has no idle gap of at least "
                             f"{U.ms(gp.threshold_ns, None)}", hint="give --plot-start in ms instead")  # fmt: skip
        gs, gl = int(gp.starts_ns[i]) - w0, int(gp.lengths_ns[i])
        a = max(0, gs - int(GAP_LEAD * gl))
        b = min(extent, a + (int(round(span_ms * 1e6)) if span_ms is not None else int((1 + 2 * GAP_LEAD) * gl)))
        how = f"around the longest idle gap ({U.ms(gl)}, {gp.cause_of(i)})"
    elif span_ms is None and start_ms == 0:
        starts: dict[str, np.ndarray] = {}
        pieces_s, pieces_e = [], []
        for name, r in g.engines.items():
            inside = iv.points_inside(r.start_ns, window) | (iv.clipped_lengths(r.start_ns, r.end_ns, window) > 0)
            if inside.any():
                starts[name] = np.sort(np.maximum(r.start_ns[inside], w0))
            ps, pe, _ = iv.clip(r.start_ns, r.end_ns, window)
            pieces_s.append(ps)
            pieces_e.append(pe)
        busy = iv.union(np.concatenate(pieces_s), np.concatenate(pieces_e)) if pieces_s else iv.empty()
        batches = max(DEFAULT_BATCHES, 2 * max(1, group.busy.n_streams))
        a_abs, b_abs, how = default_span(window, starts, busy, batches)
        a, b = a_abs - w0, b_abs - w0
    else:
        a = int(round(start_ms * 1e6))
        if a >= extent:
            raise InputError(
                f"--plot-start {start_ms:g} ms lies past the window's end ({U.ms(extent)})",
                hint="pick a start inside the window",
            )
        b = extent if span_ms is None else min(extent, a + int(round(span_ms * 1e6)))
        how = f"{U.ms(a, None, unit=False)} to {U.ms(b, None)} (asked for)"
    lo, hi = w0 + a, w0 + b
    span = iv.intersect(window, (np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64)))
    lanes: list[Lane] = []
    for name, r in g.engines.items():
        for sid in np.unique(r.stream).tolist():
            mm = r.stream == sid
            ps, pe, _ = iv.clip(r.start_ns[mm], r.end_ns[mm], span)
            u_s, u_e = iv.union(ps, pe)
            if u_s.size:
                lanes.append(Lane(name, int(sid), u_s - w0, u_e - w0))
    marks = []
    if len(gp):
        ge = gp.starts_ns + gp.lengths_ns
        for i in np.flatnonzero((gp.starts_ns < hi) & (ge > lo)).tolist():
            marks.append(GapMark(max(lo, int(gp.starts_ns[i])) - w0, min(hi, int(ge[i])) - w0, gp.cause_of(i)))
    return Timeline(w0, extent, a, b, how, tuple(lanes), tuple(marks))


# --------------------------------------------------------------------------- the window as trace events


@dataclass(frozen=True, slots=True, eq=False)
class Track:
    """One track of events: ``group`` is the process row it sits in ("GPU" or "host"), ``name`` its
    own label; events are absolute ns with one label each (an index into ``labels``)."""

    group: str
    name: str
    starts_ns: np.ndarray
    ends_ns: np.ndarray
    label: np.ndarray
    labels: tuple[str, ...]


@dataclass(frozen=True, slots=True, eq=False)
class TraceExport:
    title: str
    window_start_ns: int
    tracks: tuple[Track, ...]

    @property
    def event_count(self) -> int:
        return sum(int(t.starts_ns.size) for t in self.tracks)


def _copy_label(engine: str, nbytes: int) -> str:
    return f"{display_name(engine)} {U.size(nbytes)}"


def build_export(data: TraceData, group: GroupAnalysis) -> TraceExport:
    """The window of ``group`` as tracks: its GPU records, its launching threads' CUDA calls, its gaps."""
    window = group.window.intervals
    w0, w1 = group.window.start_ns, group.window.end_ns
    g = model_mod.build(data, group.pid, group.device)
    tracks: list[Track] = []
    for name, r in g.engines.items():
        inside = (iv.clipped_lengths(r.start_ns, r.end_ns, window) > 0) | iv.points_inside(r.start_ns, window)
        for sid in np.unique(r.stream[inside]).tolist():
            m = inside & (r.stream == sid)
            if name == "kernel":
                used = np.unique(r.name[m])
                labels = tuple(g.kernel_names[i] for i in used.tolist())
                label = np.searchsorted(used, r.name[m])
            elif r.bytes is not None:
                text = [_copy_label(name, int(b)) for b in r.bytes[m].tolist()]
                labels = tuple(dict.fromkeys(text))
                index = {t: i for i, t in enumerate(labels)}
                label = np.array([index[t] for t in text], dtype=np.int64)
            else:
                labels, label = (display_name(name),), np.zeros(int(m.sum()), dtype=np.int64)
            tracks.append(Track("GPU", f"{display_name(name)} · stream {sid}", r.start_ns[m], r.end_ns[m], label, labels))
    launching = {(t.thread.pid, t.thread.tid): t for t in group.host.threads}
    if launching and data.api.tables:
        calls = read_api_window(data.path, group.pid, w0, w1)
        for k, info in enumerate(calls.threads):
            t = launching.get((info.pid, info.tid))
            if t is None:
                continue
            m = calls.thread == k
            tracks.append(Track("host", t.thread.label(), calls.start_ns[m], calls.end_ns[m], calls.name[m].astype(np.int64),
                                calls.names))  # fmt: skip
    gp = group.gaps
    if len(gp):
        labels = tuple(f"idle: {gp.cause_of(i)}" + (f" ({gp.api[i]})" if gp.api[i] else "") for i in range(len(gp)))
        uniq = tuple(dict.fromkeys(labels))
        index = {t: i for i, t in enumerate(uniq)}
        tracks.append(Track("GPU", f"idle gaps ≥ {U.ms(gp.threshold_ns, None)}", gp.starts_ns, gp.starts_ns + gp.lengths_ns,
                            np.array([index[t] for t in labels], dtype=np.int64), uniq))  # fmt: skip
    title = f"pid {group.pid} device {group.device}: {group.window.source}"
    return TraceExport(title, w0, tuple(tracks))

