"""The lanes of a timeline, and the window as trace events (pure, apart from one read of API calls).

``build_timeline(data, group, span)`` cuts the group's records to a span of the window and merges
each (engine, stream) lane's records into a union, so that a renderer draws one bar per busy
stretch; the window's idle gaps in the span come with their causes. The default span shows a few
batches: N = max(3, 2 x streams) of them, a batch being one record of the engine with the fewest
records (among kernel, graph, h2d, d2h), since a batched pipeline issues about one of each per
batch. It starts at the first GPU activity in the window, or after an idle gap longer than a batch
period that precedes the first batch (see default_span). ``at_longest_gap`` starts it just before
the window's longest idle gap instead.

The timeline also carries, for the span, one lane per launching thread (its CUDA calls, its waits, and
its blocked time: the GPU-busy part of each call the GPU held before it released it), and the critical
path as a band of segments coloured by resource.

``build_export(data, group)`` is the whole window as tracks of events: one per (engine, stream)
with each record, one per launching host thread with each CUDA call (read again from the trace for
the window), one of idle gaps named by cause, and one of the critical path; flow arrows run from each
launch call to its GPU rows (the first MAX_FLOWS of them in time, the file's metadata says when cut).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clusterbench.analyzers import critical_path as path_mod
from clusterbench.analyzers import held as held_mod
from clusterbench.analyzers import host as host_mod
from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers import links as links_mod
from clusterbench.analyzers import model as model_mod
from clusterbench.analyzers.records import GroupAnalysis
from clusterbench.errors import InputError
from clusterbench.io.nsys import schema as S
from clusterbench.io.nsys.reader import TraceData, read_api_window
from clusterbench.model.engines import display_name
from clusterbench.model import units as U

DEFAULT_BATCHES = 3  # the default span shows this many batches (twice the stream count, if more)
BATCH_ENGINES = ("kernel", "graph", "h2d", "d2h")
GAP_LEAD = 0.25  # --plot-start longest-gap: start this share of the gap before it
MAX_FLOWS = 20_000  # flow arrows (launch call -> GPU row) in a trace export: the first ones in time


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
class HostLane:
    """One launching thread in the span (relative to the window start): its CUDA calls, its explicit
    waits, and its blocked time (the GPU-busy part of each call the GPU held, before its release)."""

    label: str
    calls: iv.Intervals
    waits: iv.Intervals
    blocked: iv.Intervals


@dataclass(frozen=True, slots=True, eq=False)
class PathBand:
    """The critical path in the span (relative to the window start): segments and their resources
    ("host", an engine, "launch", "idle")."""

    starts_ns: np.ndarray
    ends_ns: np.ndarray
    resource: tuple[str, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Timeline:
    window_start_ns: int  # absolute, the time 0 of the lanes
    window_ns: int
    span_start_ns: int  # relative to the window start
    span_end_ns: int
    span_source: str  # how the span was chosen
    lanes: tuple[Lane, ...]
    gaps: tuple[GapMark, ...] = ()
    hosts: tuple[HostLane, ...] = ()
    path: PathBand | None = None


class _Linked:
    """A group's calls linked to its rows, the calls the GPU held and the critical path's walk, once."""

    def __init__(self, data: TraceData, group: GroupAnalysis) -> None:
        self.g = model_mod.build(data, group.pid, group.device)
        self.links = links_mod.build(self.g)
        self.held = held_mod.find(self.links, group.window.intervals, self.g.syncs, self.g.events)
        self.launching = host_mod.launching_mask(self.g, group.host) if data.api.tables else np.zeros(0, dtype=bool)
        self.walk = None
        if group.critical_path is not None:
            self.walk = path_mod.walk(self.links, self.held, group.window.intervals, self.launching, self.g.syncs, self.g.events)

    def resource_name(self, code: int) -> str:
        if code == path_mod.IDLE:
            return "idle"
        if code == path_mod.LAUNCH:
            return "launch"
        if code < path_mod.HOST0:
            return S.ENGINES[code - path_mod.ENGINE0]
        return "host"

    def blocked(self, span: iv.Intervals) -> dict[int, iv.Intervals]:
        """Per thread index: its blocked time in ``span``, as intervals."""
        links, held = self.links, self.held
        nb = ~held.wait & (held.blocked_ns > 0)
        c, rel = held.call[nb], held.release[nb]
        out: dict[int, iv.Intervals] = {}
        if c.size == 0:
            return out
        busy = held_mod.busy_prefix(links, span, iv.union(links.cstart[c], np.maximum(links.cstart[c], rel)))
        for t in np.unique(links.cthread[c]).tolist():
            m = links.cthread[c] == t
            held_iv = iv.union(links.cstart[c[m]], rel[m])
            out[int(t)] = iv.intersect(held_iv, (busy[0], busy[1]))
        return out


def _host_lanes(lk: _Linked, group: GroupAnalysis, span: iv.Intervals, w0: int) -> tuple[HostLane, ...]:
    links = lk.links
    if not links.n_calls or not lk.launching.any():
        return ()
    blocked = lk.blocked(span)
    lanes = []
    threads = lk.g.api.threads
    for t in np.flatnonzero(lk.launching).tolist():
        m = links.cthread == t
        cs, ce = links.cstart[m], links.cend[m]
        waits = links.ccat[m] == links_mod.WAIT
        calls = iv.clip(cs, ce, span)
        w = iv.clip(cs[waits], ce[waits], span)
        b = blocked.get(t, iv.empty())
        info = threads[t]
        label = f"thread {info.tid}" + (f" ({info.name})" if info.name else "")
        shift = np.int64(w0)
        lanes.append(HostLane(label, (calls[0] - shift, calls[1] - shift), (w[0] - shift, w[1] - shift),
                              (b[0] - shift, b[1] - shift)))  # fmt: skip
    return tuple(lanes)


def _path_band(lk: _Linked, span: iv.Intervals, w0: int) -> PathBand | None:
    w = lk.walk
    if w is None:
        return None
    ws, we, wr, _ = w.segments()
    s, e, owner = iv.clip(ws, we, span)
    res = wr if owner is None else wr[owner]
    return PathBand(s - w0, e - w0, tuple(lk.resource_name(int(r)) for r in res.tolist()))


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
    lk = _Linked(data, group)
    return Timeline(w0, extent, a, b, how, tuple(lanes), tuple(marks), _host_lanes(lk, group, span, w0), _path_band(lk, span, w0))


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
class Flow:
    """Arrows from a launch call (on a host track) to its GPU rows (on GPU tracks), absolute ns."""

    call_track: np.ndarray  # index into TraceExport.tracks
    call_ns: np.ndarray
    row_track: np.ndarray
    row_ns: np.ndarray

    def __len__(self) -> int:
        return int(self.call_ns.size)


@dataclass(frozen=True, slots=True, eq=False)
class TraceExport:
    title: str
    window_start_ns: int
    tracks: tuple[Track, ...]
    flows: Flow | None = None
    flows_total: int = 0  # launch-to-row arrows in the window, before the cut at MAX_FLOWS

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
    row_track: dict[tuple[str, int], int] = {}  # (engine, stream) -> its track
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
            row_track[(name, int(sid))] = len(tracks)
            tracks.append(Track("GPU", f"{display_name(name)} · stream {sid}", r.start_ns[m], r.end_ns[m], label, labels))
    launching = {(t.thread.pid, t.thread.tid): t for t in group.host.threads}
    host_track: dict[tuple[int, int], int] = {}
    if launching and data.api.tables:
        calls = read_api_window(data.path, group.pid, w0, w1)
        for k, info in enumerate(calls.threads):
            t = launching.get((info.pid, info.tid))
            if t is None:
                continue
            m = calls.thread == k
            host_track[(info.pid, info.tid)] = len(tracks)
            tracks.append(Track("host", t.thread.label(), calls.start_ns[m], calls.end_ns[m], calls.name[m].astype(np.int64),
                                calls.names))  # fmt: skip
    flows, total = None, 0
    lk = _Linked(data, group) if data.api.tables else None
    if lk is not None and host_track:
        flows, total = _flows(lk, window, row_track, host_track)
    if lk is not None and lk.walk is not None:
        ps, pe, pr, _ = lk.walk.segments()
        codes = np.unique(pr)
        names = tuple(dict.fromkeys(lk.resource_name(int(r)) for r in codes.tolist()))
        index = {n: i for i, n in enumerate(names)}
        lut = np.zeros(int(codes.max()) + 1 if codes.size else 1, dtype=np.int64)
        for c in codes.tolist():
            lut[c] = index[lk.resource_name(int(c))]
        tracks.append(Track("critical path", "critical path", ps, pe, lut[pr], names))
    gp = group.gaps
    if len(gp):
        labels = tuple(f"idle: {gp.cause_of(i)}" + (f" ({gp.api[i]})" if gp.api[i] else "") for i in range(len(gp)))
        uniq = tuple(dict.fromkeys(labels))
        index = {t: i for i, t in enumerate(uniq)}
        tracks.append(Track("GPU", f"idle gaps ≥ {U.ms(gp.threshold_ns, None)}", gp.starts_ns, gp.starts_ns + gp.lengths_ns,
                            np.array([index[t] for t in labels], dtype=np.int64), uniq))  # fmt: skip
    title = f"pid {group.pid} device {group.device}: {group.window.source}"
    return TraceExport(title, w0, tuple(tracks), flows, total)


def _flows(lk: _Linked, window: iv.Intervals, row_track: dict[tuple[str, int], int],
           host_track: dict[tuple[int, int], int]) -> tuple[Flow | None, int]:  # fmt: skip
    """Launch call -> GPU row arrows for the rows that start in the window, whose launch call is on a
    host track; the first MAX_FLOWS in time."""
    links = lk.links
    rows = np.flatnonzero((links.launch >= 0) & iv.points_inside(links.start, window)) if links.n_rows else np.empty(0, np.int64)
    if rows.size == 0:
        return None, 0
    threads = lk.g.api.threads
    call = links.launch[rows]
    th_track = np.array([host_track.get((t.pid, t.tid), -1) for t in threads] + [-1], dtype=np.int64)
    ct = th_track[links.cthread[call]]
    ns = max(1, links.streams.size)
    lut = np.full(len(S.ENGINES) * ns, -1, dtype=np.int64)
    for (name, sid), k in row_track.items():
        r = int(np.searchsorted(links.streams, sid))
        if r < links.streams.size and links.streams[r] == sid:
            lut[S.ENGINE_CODE[name] * ns + r] = k
    rt = lut[links.engine[rows].astype(np.int64) * ns + links.srank[rows].astype(np.int64)]
    ok = (ct >= 0) & (rt >= 0) & (links.cstart[call] >= window[0][0])
    rows, call, ct, rt = rows[ok], call[ok], ct[ok], rt[ok]
    total = int(rows.size)
    order = np.argsort(links.cstart[call], kind="stable")[:MAX_FLOWS]
    return Flow(ct[order], links.cstart[call][order], rt[order], links.start[rows][order]), total

