"""Per-engine busy time over a window, their overlap, the streams, and the roofline (pure).

Busy time is the length of the union of an engine's records clipped to the window, never the sum.
``count`` is the number of records that overlap the window; a copy cut by a window edge counts its
bytes in proportion to the part inside, so GB/s stays bytes over busy time. kernel, h2d and d2h are
always reported (zeros when absent); other engines appear only with activity in the window.
The roofline is the tallest bar among the engines and the launching host threads (host.py).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.model import EngineRecords, GroupTrace
from clusterbench.analyzers.records import (
    Busy,
    EngineStats,
    Roofline,
    StreamStats,
    ThreadStats,
)
from clusterbench.io.nsys import schema as S
from clusterbench.model import units as U
from clusterbench.model.engines import RATE_CEILING_GBPS

STREAM_SHARE = 0.01  # a stream counts as carrying work when it has this share of the GPU time


def _stream_time(ids: np.ndarray, s: np.ndarray, e: np.ndarray, lengths: np.ndarray | None, inside: np.ndarray | None
                 ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The distinct stream ids of the records ``inside`` selects (all when None), and each one's summed
    length inside the window (``lengths``, or the whole record when None), block by block."""
    lo, hi = int(ids.min()), int(ids.max())
    if hi - lo >= 1 << 16:  # sparse ids: one pass with a sort
        m = slice(None) if inside is None else inside
        w = (e - s) if lengths is None else lengths
        used, inverse = np.unique(ids[m], return_inverse=True)
        return used, np.bincount(inverse.reshape(-1), weights=w[m], minlength=used.size)
    per = np.zeros(hi - lo + 1, dtype=np.float64)
    seen = np.zeros(hi - lo + 1, dtype=np.int64)  # a stream with records but no time still counts
    for b0 in range(0, ids.size, iv.BLOCK):
        sl = slice(b0, b0 + iv.BLOCK)
        rel = ids[sl].astype(np.int64) - lo
        w = (e[sl] - s[sl]) if lengths is None else lengths[sl]
        if inside is not None:
            rel, w = rel[inside[sl]], w[inside[sl]]
        per += np.bincount(rel, weights=w, minlength=per.size)
        seen += np.bincount(rel, minlength=per.size)
    used = np.flatnonzero(seen)
    return used + lo, per[used]


def working_streams(per_stream_ns: np.ndarray) -> int:
    """Streams that carry at least STREAM_SHARE of the time (all of them when the time is 0)."""
    total = float(per_stream_ns.sum())
    if total <= 0:
        return int(per_stream_ns.size)
    return int((per_stream_ns >= STREAM_SHARE * total).sum())


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Clipped:
    """One engine's records against the window: its busy time there (the union's length), which
    records overlap it and how much of each lies inside (None: every record lies wholly inside),
    and the bytes inside."""

    busy_ns: int
    inside: np.ndarray | None
    lengths: np.ndarray | None
    nbytes: int | None

    def count(self, n: int) -> int:
        return n if self.inside is None else int(self.inside.sum())


def busy_length(s: np.ndarray, e: np.ndarray, window: iv.Intervals) -> int:
    """The length of the union of some records inside the window (block by block; no set is built)."""
    lists = [(s, e) if iv.is_sorted(s) else iv.union(s, e)]
    return iv.coverage_in_window(lists, window, 0)[0][0]


def clip_records(s: np.ndarray, e: np.ndarray, b: np.ndarray | None, window: iv.Intervals, busy_ns: int | None = None) -> Clipped:
    """One engine's records against the window (a per-record length: no copy of the records);
    ``busy_ns``: their busy time in the window when the caller has it already."""
    if busy_ns is None:
        busy_ns = busy_length(s, e, window)
    clipped = iv.clipped_lengths(s, e, window)
    whole = np.empty(s.shape, dtype=bool)
    for b0 in range(0, s.size, iv.BLOCK):  # in blocks: no full-size duration array
        sl = slice(b0, b0 + iv.BLOCK)
        np.equal(clipped[sl], e[sl] - s[sl], out=whole[sl])
    if bool(whole.all()) and bool((clipped > 0).all()):  # every record lies wholly inside the window
        return Clipped(busy_ns, None, None, int(b.sum()) if b is not None else None)
    inside = clipped > 0
    zero = np.flatnonzero(e <= s)
    if zero.size:
        inside[zero] |= iv.points_inside(s[zero], window)
    nbytes = None
    if b is not None:
        full = inside & whole
        if zero.size:
            full[zero] = inside[zero]
        part = inside & ~full
        nbytes = int(b[full].sum())
        del full
        if part.any():
            pi = np.flatnonzero(part)
            nbytes += int(round(float((b[pi] * (clipped[pi] / (e[pi] - s[pi]))).sum())))
    return Clipped(busy_ns, inside, clipped, nbytes)


def engine_stats(name: str, busy_ns: int, count: int, nbytes: int | None, window_ns: int, frames: int | None,
                 streams: int = 0) -> EngineStats:  # fmt: skip
    has_bytes = name in S.BYTE_ENGINES
    return EngineStats(
        engine=name,
        busy_ns=busy_ns,
        count=count,
        duty=(busy_ns / window_ns) if window_ns > 0 else None,
        us_per_frame=U.us_per_frame_of(busy_ns, frames),
        bytes=(nbytes or 0) if has_bytes else None,
        gbps=((nbytes or 0) / busy_ns if busy_ns > 0 else None) if has_bytes else None,
        streams=streams,
    )


def _lists(engines: dict[str, EngineRecords]) -> list[iv.Intervals]:
    """Each engine's records as a list sorted by start (a union where they come unsorted)."""
    return [(r.start_ns, r.end_ns) if iv.is_sorted(r.start_ns) else iv.union(r.start_ns, r.end_ns) for r in engines.values()]


def _table(engines: dict[str, EngineRecords], window: iv.Intervals, frames: int | None, per_stream: bool,
           busy: dict[str, int] | None = None) -> tuple[dict[str, EngineStats], dict[str, tuple[np.ndarray, np.ndarray]]]:  # fmt: skip
    """Per engine: its figures, and (with ``per_stream``) the streams it used in the window with each
    one's time (the sum of its records' lengths inside the window)."""
    window_ns = iv.length(window)
    stats: dict[str, EngineStats] = {}
    used: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in S.ENGINES:
        r = engines.get(name)
        if r is None:
            if name in S.ALWAYS_REPORTED:
                stats[name] = engine_stats(name, 0, 0, 0, window_ns, frames)
            continue
        c = clip_records(r.start_ns, r.end_ns, r.bytes, window, None if busy is None else busy[name])
        count = c.count(len(r))
        if count == 0 and name not in S.ALWAYS_REPORTED:
            continue
        n_streams = 0
        if per_stream and count:
            used[name] = _stream_time(r.stream, r.start_ns, r.end_ns, c.lengths, c.inside)
            n_streams = working_streams(used[name][1])
        stats[name] = engine_stats(name, c.busy_ns, count, c.nbytes, window_ns, frames, n_streams)
        del c
    return stats, used


def measure(g: GroupTrace, window: iv.Intervals, frames: int | None, by_stream: bool = False) -> Busy:
    """The engines of ``g`` over ``window``."""
    window_ns = iv.length(window)
    # every engine's union, one or more at once: block by block in time
    per, (any_busy_ns, overlap) = iv.coverage_in_window(_lists(g.engines), window, 2)
    stats, used = _table(g.engines, window, frames, per_stream=True, busy=dict(zip(g.engines, per)))
    for name, r in g.implausible.items():
        inside = (iv.clipped_lengths(r.start_ns, r.end_ns, window) > 0) | iv.points_inside(r.start_ns, window)
        if not inside.any():
            continue
        dur = np.maximum(r.end_ns[inside] - r.start_ns[inside], 1)
        top = float((r.bytes[inside] / dur).max())
        base = stats.get(name) or engine_stats(name, 0, 0, 0, window_ns, frames)
        stats[name] = dataclasses.replace(
            base, implausible_count=int(inside.sum()), implausible_bytes=int(r.bytes[inside].sum()),
            implausible_max_gbps=top, implausible_limit_gbps=RATE_CEILING_GBPS[name],
        )  # fmt: skip
    stats = {n: stats[n] for n in S.ENGINES if n in stats}  # display order, also for added engines
    total = sum(st.busy_ns for st in stats.values())

    streams = None
    if by_stream:
        out = []
        ids = np.unique(np.concatenate([r.stream for r in g.engines.values()])) if g.engines else np.empty(0, dtype=np.int64)
        for sid in ids.tolist():
            sub = {n: r.select(r.stream == sid) for n, r in g.engines.items()}
            sub = {n: r for n, r in sub.items() if len(r)}
            sper, (sany,) = iv.coverage_in_window(_lists(sub), window, 1)
            sstats, _ = _table(sub, window, frames, per_stream=False, busy=dict(zip(sub, sper)))
            sstats = {k: v for k, v in sstats.items() if v.count > 0}
            if sstats:  # else the stream has no activity inside the window
                out.append(StreamStats(int(sid), sstats, sany))
        streams = tuple(out)

    per_stream: dict[int, float] = {}
    for sids, per in used.values():
        for sid, t in zip(sids.tolist(), per.tolist()):
            per_stream[sid] = per_stream.get(sid, 0.0) + t
    pageable_count = pageable_bytes = 0
    for r in g.engines.values():
        if r.pageable is None or not r.pageable.any():
            continue
        pi = np.flatnonzero(r.pageable)
        inside = (iv.clipped_lengths(r.start_ns[pi], r.end_ns[pi], window) > 0) | iv.points_inside(r.start_ns[pi], window)
        pageable_count += int(inside.sum())
        pageable_bytes += int(r.bytes[pi][inside].sum())
    busy = Busy(
        engines=stats,
        any_busy_ns=any_busy_ns,
        idle_ns=window_ns - any_busy_ns,
        overlap_ns=overlap,
        serialization=(total / any_busy_ns) if any_busy_ns > 0 else None,
        n_streams=working_streams(np.array(list(per_stream.values()), dtype=np.float64)) if per_stream else 0,
        engine_streams={n: working_streams(per) for n, (_, per) in used.items()},
        streams=streams,
        pageable_count=pageable_count,
        pageable_bytes=pageable_bytes,
        pageable_known=g.srckind_read,
    )
    return busy


def roofline(busy: Busy, threads: tuple[ThreadStats, ...], frames: int | None) -> tuple[Roofline, Busy]:
    """The tallest bar among the engines (ties go to the engine listed first) and the launching
    threads (a thread binds only when it is strictly taller than every engine), and the engines
    with their headroom against it."""
    name, top = None, 0
    for n, st in busy.engines.items():  # dict order is ENGINES order: ties go to the earlier engine
        if st.busy_ns > top:
            name, top = n, st.busy_ns
    thread = None
    for t in threads:  # a thread's bar is its work: host code, and CUDA calls while the GPU holds none of them
        if t.work_ns > top:
            name, top, thread = "host", t.work_ns, t.thread
    roof = Roofline(
        engine=name,
        busy_ns=top,
        us_per_frame=U.us_per_frame_of(top, frames) if name else None,
        fps=U.fps_of_us(U.us_per_frame_of(top, frames)),
        thread=thread,
    )
    out = {}
    for n, st in busy.engines.items():
        if roof.engine is None or n == roof.engine or st.busy_ns == 0:
            out[n] = st
            continue
        gap = roof.busy_ns - st.busy_ns
        out[n] = dataclasses.replace(st, headroom=gap / st.busy_ns,
                                     headroom_us_per_frame=U.us_per_frame_of(gap, frames))  # fmt: skip
    return roof, dataclasses.replace(busy, engines=out)
