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
from clusterbench.analyzers.records import Busy, EngineStats, Roofline, StreamStats, ThreadStats
from clusterbench.io.nsys import schema as S
from clusterbench.model.engines import RATE_CEILING_GBPS

STREAM_SHARE = 0.01  # a stream counts as carrying work when it has this share of the GPU time


def _stream_time(ids: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct stream ids of some records, and each one's summed length (ns)."""
    lo, hi = int(ids.min()), int(ids.max())
    if lo == hi:
        return np.array([lo], dtype=np.int64), np.array([float(w.sum())])
    if hi - lo < 1 << 16:
        rel = ids.astype(np.int64) - lo
        per = np.bincount(rel, weights=w)
        # an id without time has no records, or only zero-length ones (still a used stream):
        # count records only then (the per-id array is small, the recount rare)
        used = np.arange(per.size) if per.all() else np.flatnonzero(np.bincount(rel))
        return used + lo, per[used]
    used, inverse = np.unique(ids, return_inverse=True)
    return used, np.bincount(inverse.reshape(-1), weights=w, minlength=used.size)


def working_streams(per_stream_ns: np.ndarray) -> int:
    """Streams that carry at least STREAM_SHARE of the time (all of them when the time is 0)."""
    total = float(per_stream_ns.sum())
    if total <= 0:
        return int(per_stream_ns.size)
    return int((per_stream_ns >= STREAM_SHARE * total).sum())


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Clipped:
    """One engine's records against the window: the busy set, which records overlap it and how
    much of each lies inside (None: every record lies wholly inside), and the bytes inside."""

    busy: iv.Intervals
    inside: np.ndarray | None
    lengths: np.ndarray | None
    nbytes: int | None

    def count(self, n: int) -> int:
        return n if self.inside is None else int(self.inside.sum())


def clip_records(s: np.ndarray, e: np.ndarray, b: np.ndarray | None, window: iv.Intervals) -> Clipped:
    ps, pe, owner = iv.clip(s, e, window)
    busy = iv.union(ps, pe)  # = union(records) ∩ window
    if owner is None:  # every record lies wholly inside the window
        return Clipped(busy, None, None, int(b.sum()) if b is not None else None)
    n = s.size
    dur = e - s
    clipped = np.bincount(owner, weights=(pe - ps), minlength=n).astype(np.int64)
    inside = clipped > 0
    zero = dur <= 0
    if zero.any():
        inside = inside | (zero & iv.points_inside(s, window))
    nbytes = None
    if b is not None:
        full = inside & ((clipped == dur) | zero)
        part = inside & ~full
        nbytes = int(b[full].sum())
        if part.any():
            nbytes += int(round(float((b[part] * (clipped[part] / dur[part])).sum())))
    return Clipped(busy, inside, clipped, nbytes)


def engine_stats(name: str, busy_ns: int, count: int, nbytes: int | None, window_ns: int, frames: int | None,
                 streams: int = 0) -> EngineStats:  # fmt: skip
    has_bytes = name in S.BYTE_ENGINES
    return EngineStats(
        engine=name,
        busy_ns=busy_ns,
        count=count,
        duty=(busy_ns / window_ns) if window_ns > 0 else None,
        us_per_frame=(busy_ns / 1000.0 / frames) if frames else None,
        bytes=(nbytes or 0) if has_bytes else None,
        gbps=((nbytes or 0) / busy_ns if busy_ns > 0 else None) if has_bytes else None,
        streams=streams,
    )


def _table(engines: dict[str, EngineRecords], window: iv.Intervals, frames: int | None, per_stream: bool
           ) -> tuple[dict[str, EngineStats], list[iv.Intervals], dict[str, tuple[np.ndarray, np.ndarray]]]:  # fmt: skip
    """Per engine: its figures, its busy set, and (with ``per_stream``) the streams it used in the
    window with each one's time (the sum of its records' lengths inside the window)."""
    window_ns = iv.length(window)
    stats: dict[str, EngineStats] = {}
    sets: list[iv.Intervals] = []
    used: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in S.ENGINES:
        r = engines.get(name)
        if r is None:
            if name in S.ALWAYS_REPORTED:
                stats[name] = engine_stats(name, 0, 0, 0, window_ns, frames)
            continue
        c = clip_records(r.start_ns, r.end_ns, r.bytes, window)
        count = c.count(len(r))
        if count == 0 and name not in S.ALWAYS_REPORTED:
            continue
        n_streams = 0
        if per_stream and count:
            ids, w = r.stream, (r.end_ns - r.start_ns) if c.lengths is None else c.lengths
            if c.inside is not None:
                ids, w = ids[c.inside], w[c.inside]
            used[name] = _stream_time(ids, w)
            n_streams = working_streams(used[name][1])
        sets.append(c.busy)
        stats[name] = engine_stats(name, iv.length(c.busy), count, c.nbytes, window_ns, frames, n_streams)
    return stats, sets, used


def measure(g: GroupTrace, window: iv.Intervals, frames: int | None, by_stream: bool = False) -> tuple[Busy, list[iv.Intervals]]:
    """The engines of ``g`` over ``window``; also each engine's busy set (for the gaps)."""
    window_ns = iv.length(window)
    stats, sets, used = _table(g.engines, window, frames, per_stream=True)
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
    any_busy_ns, overlap_ns = iv.coverage_lengths(sets, 2)
    total = sum(st.busy_ns for st in stats.values())

    streams = None
    if by_stream:
        out = []
        ids = np.unique(np.concatenate([r.stream for r in g.engines.values()])) if g.engines else np.empty(0, dtype=np.int64)
        for sid in ids.tolist():
            sub = {n: r.select(r.stream == sid) for n, r in g.engines.items()}
            sub = {n: r for n, r in sub.items() if len(r)}
            sstats, ssets, _ = _table(sub, window, frames, per_stream=False)
            sstats = {k: v for k, v in sstats.items() if v.count > 0}
            if sstats:  # else the stream has no activity inside the window
                out.append(StreamStats(int(sid), sstats, iv.coverage_lengths(ssets, 1)[0]))
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
        overlap_ns=overlap_ns,
        serialization=(total / any_busy_ns) if any_busy_ns > 0 else None,
        n_streams=working_streams(np.array(list(per_stream.values()), dtype=np.float64)) if per_stream else 0,
        engine_streams={n: working_streams(per) for n, (_, per) in used.items()},
        streams=streams,
        pageable_count=pageable_count,
        pageable_bytes=pageable_bytes,
        pageable_known=g.srckind_read,
    )
    return busy, sets


def roofline(busy: Busy, threads: tuple[ThreadStats, ...], frames: int | None) -> tuple[Roofline, Busy]:
    """The tallest bar among the engines (ties go to the engine listed first) and the launching
    threads (a thread binds only when it is strictly taller than every engine), and the engines
    with their headroom against it."""
    name, top = None, 0
    for n, st in busy.engines.items():  # dict order is ENGINES order: ties go to the earlier engine
        if st.busy_ns > top:
            name, top = n, st.busy_ns
    thread = None
    for t in threads:
        if t.busy_ns > top:
            name, top, thread = "host", t.busy_ns, t.thread
    roof = Roofline(
        engine=name,
        busy_ns=top,
        us_per_frame=(top / 1000.0 / frames) if (frames and name) else None,
        fps=(1e9 * frames / top) if (frames and top > 0) else None,
        thread=thread,
    )
    out = {}
    for n, st in busy.engines.items():
        if roof.engine is None or n == roof.engine or st.busy_ns == 0:
            out[n] = st
            continue
        gap = roof.busy_ns - st.busy_ns
        out[n] = dataclasses.replace(st, headroom=gap / st.busy_ns,
                                     headroom_us_per_frame=(gap / 1000.0 / frames) if frames else None)  # fmt: skip
    return roof, dataclasses.replace(busy, engines=out)
