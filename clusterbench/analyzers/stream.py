"""The engines' figures over time slabs (io.nsys.slabs), with state that does not grow with the trace (pure).

Each accumulator takes the slabs in time order and gives the record the whole-array analyzer gives
(busy.measure, kernels.by_name, kernels.copy_classes), exactly:
- a union's length (an engine's busy time, the time any or two engines are busy, a kernel name's or a
  copy class's busy time) is summed slab by slab over the window cut to the slab's span, [t0, t1), from
  the slab's records and the records of earlier slabs still running at t0 (the carry: at most the rows
  running at one instant);
- what is counted per record (records in the window, bytes, streams, pageable copies, implausible rates)
  is counted in the slab the record starts in, against the whole window;
- bytes of records cut by a window edge are summed at the end, in record order, as the whole analyzer
  does (its float sum in one piece: the same digits);
- the median duration of a kernel name comes from its durations' value counts (exact; memory grows with
  the distinct durations, not the records).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.busy import engine_stats, working_streams
from clusterbench.analyzers.kernels import SIZE_CLASSES
from clusterbench.analyzers.model import EngineRecords, GroupTrace, split_engines
from clusterbench.analyzers.records import Busy, CopyClass, KernelStats
from clusterbench.io.nsys import schema as S
from clusterbench.io.nsys.slabs import Slab
from clusterbench.model import units as U
from clusterbench.model.engines import RATE_CEILING_GBPS

_LOW, _HIGH = np.iinfo(np.int64).min, np.iinfo(np.int64).max


class ValueCounts:
    """Integer values as their sorted distinct values and counts, merged as more come (exact order
    statistics in memory that grows with the distinct values)."""

    def __init__(self) -> None:
        self.values = np.empty(0, dtype=np.int64)
        self.counts = np.empty(0, dtype=np.int64)

    def add(self, x: np.ndarray) -> None:
        if x.size == 0:
            return
        v, c = np.unique(np.asarray(x, dtype=np.int64), return_counts=True)
        if self.values.size:
            v = np.concatenate([self.values, v])
            c = np.concatenate([self.counts, c])
            v, inv = np.unique(v, return_inverse=True)
            c = np.bincount(inv.reshape(-1), weights=c, minlength=v.size).astype(np.int64)
        self.values, self.counts = v, c

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    def at(self, rank: int) -> int:
        """The value of 0-based ``rank`` in sorted order."""
        return int(self.values[int(np.searchsorted(np.cumsum(self.counts), rank, side="right"))])

    def median(self) -> float:
        """As kernels.by_name takes it: the middle value, or the mean of the two middle ones."""
        n = self.n
        mid = n // 2
        return float(self.at(mid)) if n % 2 else (float(self.at(mid - 1)) + float(self.at(mid))) / 2


def _span_window(window: iv.Intervals, t0: int | None, t1: int | None) -> iv.Intervals:
    """The window cut to [t0, t1) (None: unbounded)."""
    lo = _LOW if t0 is None else t0
    hi = _HIGH if t1 is None else t1
    return iv.intersect(window, (np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64)))


def _inside(s: np.ndarray, e: np.ndarray, window: iv.Intervals) -> tuple[np.ndarray, np.ndarray]:
    """Per record: its length inside the window, and whether it counts as inside (a part inside, or a
    zero-length record on a point of it), as busy.clip_records decides."""
    clipped = iv.clipped_lengths(s, e, window)
    inside = clipped > 0
    zero = np.flatnonzero(e <= s)
    if zero.size:
        inside[zero] |= iv.points_inside(s[zero], window)
    return clipped, inside


def _cat(a: EngineRecords | None, b: EngineRecords | None) -> EngineRecords | None:
    if a is None or len(a) == 0:
        return b
    if b is None or len(b) == 0:
        return a

    def c(x, y):  # noqa: ANN001, ANN202
        return None if x is None or y is None else np.concatenate([x, y])

    return EngineRecords(a.engine, c(a.start_ns, b.start_ns), c(a.end_ns, b.end_ns), c(a.bytes, b.bytes), c(a.stream, b.stream),
                         c(a.pageable, b.pageable), c(a.name, b.name), c(a.correlation, b.correlation))  # fmt: skip


class _Engine:
    """One engine's sums so far."""

    def __init__(self) -> None:
        self.busy = 0
        self.count = 0
        self.full_bytes = 0
        self.part_bytes: list[np.ndarray] = []  # per slab: bytes x share inside, of the records cut by the window
        self.stream_ns: dict[int, float] = {}
        self.stream_seen: set[int] = set()
        self.rows = 0


class BusyAccumulator:
    """busy.measure over slabs (without the per-stream tables of --by-stream)."""

    def __init__(self, pid: int, device: int, window: iv.Intervals, frames: int | None, srckind_read: bool) -> None:
        self.pid, self.device, self.window, self.frames, self.srckind_read = pid, device, window, frames, srckind_read
        self.open: dict[str, EngineRecords] = {}
        self.eng: dict[str, _Engine] = {}
        self.any_busy = 0
        self.overlap = 0
        self.implausible: dict[str, list] = {}  # engine -> [count, bytes, max gbps]
        self.pageable_count = 0
        self.pageable_bytes = 0

    def add(self, slab: Slab) -> None:
        engines, bad = split_engines(slab.activity, self.pid, self.device)
        part = _span_window(self.window, slab.t0, slab.t1)
        lists, names = [], []
        for name in S.ENGINES:
            rows = _cat(self.open.get(name), engines.get(name))
            if rows is None or len(rows) == 0:
                continue
            names.append(name)
            lists.append((rows.start_ns, rows.end_ns))
            # what runs past the slab's end is carried into the next one
            if slab.t1 is not None:
                keep = rows.end_ns > slab.t1
                self.open[name] = rows.select(keep)
        if lists and part[0].size:
            per, (any_b, over) = iv.coverage_in_window(lists, part, 2)
            self.any_busy += any_b
            self.overlap += over
            for name, b in zip(names, per):
                self.eng.setdefault(name, _Engine()).busy += b
        for name, r in engines.items():
            st = self.eng.setdefault(name, _Engine())
            st.rows += len(r)
            clipped, inside = _inside(r.start_ns, r.end_ns, self.window)
            st.count += int(inside.sum())
            dur = r.end_ns - r.start_ns
            whole = clipped == dur
            if r.bytes is not None:
                full = inside & whole
                zero = np.flatnonzero(r.end_ns <= r.start_ns)
                if zero.size:
                    full[zero] = inside[zero]
                cut = inside & ~full
                st.full_bytes += int(r.bytes[full].sum())
                if cut.any():
                    pi = np.flatnonzero(cut)
                    st.part_bytes.append(r.bytes[pi] * (clipped[pi] / (r.end_ns[pi] - r.start_ns[pi])))
            ids = r.stream[inside].astype(np.int64)
            if ids.size:
                u, inv = np.unique(ids, return_inverse=True)
                t = np.bincount(inv.reshape(-1), weights=clipped[inside], minlength=u.size)
                for sid, x in zip(u.tolist(), t.tolist()):
                    st.stream_ns[sid] = st.stream_ns.get(sid, 0.0) + x
                    st.stream_seen.add(sid)
            if r.pageable is not None and r.pageable.any():
                pm = r.pageable & inside
                self.pageable_count += int(pm.sum())
                self.pageable_bytes += int(r.bytes[pm].sum())
        for name, r in bad.items():
            clipped, _ = _inside(r.start_ns, r.end_ns, self.window)
            inside = (clipped > 0) | iv.points_inside(r.start_ns, self.window)
            if not inside.any():
                continue
            dur = np.maximum(r.end_ns[inside] - r.start_ns[inside], 1)
            top = float((r.bytes[inside] / dur).max())
            acc = self.implausible.setdefault(name, [0, 0, 0.0])
            acc[0] += int(inside.sum())
            acc[1] += int(r.bytes[inside].sum())
            acc[2] = max(acc[2], top)

    def nbytes(self, name: str) -> int:
        st = self.eng[name]
        part = np.concatenate(st.part_bytes) if st.part_bytes else None
        return st.full_bytes + (int(round(float(part.sum()))) if part is not None and part.size else 0)

    def result(self) -> Busy:
        import dataclasses

        window_ns = iv.length(self.window)
        stats = {}
        used: dict[str, np.ndarray] = {}
        for name in S.ENGINES:
            st = self.eng.get(name)
            if st is None or st.rows == 0:
                if name in S.ALWAYS_REPORTED:
                    stats[name] = engine_stats(name, 0, 0, 0, window_ns, self.frames)
                continue
            if st.count == 0 and name not in S.ALWAYS_REPORTED:
                continue
            n_streams = 0
            if st.count:
                ids = sorted(st.stream_seen)
                used[name] = (np.array(ids, dtype=np.int64), np.array([st.stream_ns[i] for i in ids], dtype=np.float64))
                n_streams = working_streams(used[name][1])
            stats[name] = engine_stats(name, st.busy, st.count, self.nbytes(name) if name in S.BYTE_ENGINES else None,
                                       window_ns, self.frames, n_streams)  # fmt: skip
        for name, (count, nbytes, top) in self.implausible.items():
            base = stats.get(name) or engine_stats(name, 0, 0, 0, window_ns, self.frames)
            stats[name] = dataclasses.replace(base, implausible_count=count, implausible_bytes=nbytes, implausible_max_gbps=top,
                                              implausible_limit_gbps=RATE_CEILING_GBPS[name])  # fmt: skip
        stats = {n: stats[n] for n in S.ENGINES if n in stats}
        total = sum(st.busy_ns for st in stats.values())
        per_stream: dict[int, float] = {}
        for sids, per in used.values():
            for sid, t in zip(sids.tolist(), per.tolist()):
                per_stream[sid] = per_stream.get(sid, 0.0) + t
        return Busy(
            engines=stats, any_busy_ns=self.any_busy, idle_ns=window_ns - self.any_busy, overlap_ns=self.overlap,
            serialization=(total / self.any_busy) if self.any_busy > 0 else None,
            n_streams=working_streams(np.array(list(per_stream.values()), dtype=np.float64)) if per_stream else 0,
            engine_streams={n: working_streams(per) for n, (_, per) in used.items()}, streams=None,
            pageable_count=self.pageable_count, pageable_bytes=self.pageable_bytes, pageable_known=self.srckind_read,
        )  # fmt: skip


class KernelAccumulator:
    """kernels.by_name over slabs."""

    def __init__(self, pid: int, device: int, window: iv.Intervals, frames: int | None) -> None:
        self.pid, self.device, self.window, self.frames = pid, device, window, frames
        self.open: EngineRecords | None = None
        self.launches: dict[int, int] = {}
        self.busy: dict[int, int] = {}
        self.durations: dict[int, ValueCounts] = {}
        self.names: tuple[str, ...] = ()

    def add(self, slab: Slab) -> None:
        engines, _ = split_engines(slab.activity, self.pid, self.device)
        self.names = slab.activity.kernel_names
        r = engines.get("kernel")
        rows = _cat(self.open, r)
        if rows is not None and len(rows):
            part = _span_window(self.window, slab.t0, slab.t1)
            if part[0].size:
                for name in iv.distinct(rows.name):
                    m = rows.name == name
                    b = iv.coverage_in_window([(rows.start_ns[m], rows.end_ns[m])], part, 1)[0][0]
                    self.busy[name] = self.busy.get(name, 0) + b
            self.open = rows.select(rows.end_ns > slab.t1) if slab.t1 is not None else None
        if r is None or len(r) == 0:
            return
        _, inside = _inside(r.start_ns, r.end_ns, self.window)
        if not inside.any():
            return
        nm = r.name[inside]
        d = (r.end_ns - r.start_ns)[inside]
        for name in iv.distinct(nm):
            m = nm == name
            self.launches[name] = self.launches.get(name, 0) + int(m.sum())
            self.durations.setdefault(name, ValueCounts()).add(d[m])

    def result(self, kernel_busy_ns: int) -> tuple[KernelStats, ...]:
        out = []
        for name, n in self.launches.items():
            vc = self.durations[name]
            busy = self.busy.get(name, 0)
            out.append(KernelStats(
                name=self.names[name], launches=n, busy_ns=busy, us_per_frame=U.us_per_frame_of(busy, self.frames),
                share=(busy / kernel_busy_ns) if kernel_busy_ns > 0 else None,
                min_ns=int(vc.values[0]), median_ns=vc.median(), max_ns=int(vc.values[-1]),
            ))  # fmt: skip
        out.sort(key=lambda k: (-k.busy_ns, k.name))
        return tuple(out)


def _class_mask(b: np.ndarray, lo: int, hi: int | None) -> np.ndarray:
    return (b >= lo) if hi is None else ((b >= lo) & (b < hi))


class CopyAccumulator:
    """kernels.copy_classes over slabs."""

    def __init__(self, pid: int, device: int, window: iv.Intervals, frames: int | None) -> None:
        self.pid, self.device, self.window, self.frames = pid, device, window, frames
        self.open: dict[str, EngineRecords] = {}
        self.cls: dict[tuple[str, int], _Engine] = {}

    def add(self, slab: Slab) -> None:
        engines, _ = split_engines(slab.activity, self.pid, self.device)
        part = _span_window(self.window, slab.t0, slab.t1)
        for name in S.ENGINES:
            if name not in S.BYTE_ENGINES:
                continue
            rows = _cat(self.open.get(name), engines.get(name))
            if rows is None or len(rows) == 0:
                continue
            for k, (lo, hi, _) in enumerate(SIZE_CLASSES):
                m = _class_mask(rows.bytes, lo, hi)
                if m.any() and part[0].size:
                    b = iv.coverage_in_window([(rows.start_ns[m], rows.end_ns[m])], part, 1)[0][0]
                    self.cls.setdefault((name, k), _Engine()).busy += b
            if slab.t1 is not None:
                self.open[name] = rows.select(rows.end_ns > slab.t1)
        for name, r in engines.items():
            if r.bytes is None:
                continue
            clipped, inside = _inside(r.start_ns, r.end_ns, self.window)
            dur = r.end_ns - r.start_ns
            whole = clipped == dur
            for k, (lo, hi, _) in enumerate(SIZE_CLASSES):
                m = _class_mask(r.bytes, lo, hi)
                if not m.any():
                    continue
                st = self.cls.setdefault((name, k), _Engine())
                st.rows += int(m.sum())
                ins = inside & m
                st.count += int(ins.sum())
                full = ins & whole
                zero = np.flatnonzero((r.end_ns <= r.start_ns) & m)
                if zero.size:
                    full[zero] = ins[zero]
                cut = ins & ~full
                st.full_bytes += int(r.bytes[full].sum())
                if cut.any():
                    pi = np.flatnonzero(cut)
                    st.part_bytes.append(r.bytes[pi] * (clipped[pi] / (r.end_ns[pi] - r.start_ns[pi])))

    def result(self) -> tuple[CopyClass, ...]:
        out = []
        for name in S.ENGINES:
            for k, (lo, hi, label) in enumerate(SIZE_CLASSES):
                st = self.cls.get((name, k))
                if st is None or st.rows == 0 or st.count == 0:
                    continue
                part = np.concatenate(st.part_bytes) if st.part_bytes else None
                nbytes = st.full_bytes + (int(round(float(part.sum()))) if part is not None and part.size else 0)
                busy = st.busy
                out.append(CopyClass(
                    engine=name, size_class=label, min_bytes=lo, max_bytes=hi, count=st.count, bytes=nbytes, busy_ns=busy,
                    gbps=(nbytes / busy) if busy > 0 else None, us_per_frame=U.us_per_frame_of(busy, self.frames),
                ))  # fmt: skip
        return tuple(out)


def engines_over(slabs: Iterable[Slab], pid: int, device: int, window: iv.Intervals, frames: int | None,
                 srckind_read: bool = True) -> tuple[Busy, tuple[KernelStats, ...], tuple[CopyClass, ...]]:  # fmt: skip
    """Busy time, kernels by name and copies by size class of group (pid, device) over ``window``, from
    the slabs in time order (each slab read once, dropped after)."""
    busy = BusyAccumulator(pid, device, window, frames, srckind_read)
    kern = KernelAccumulator(pid, device, window, frames)
    copies = CopyAccumulator(pid, device, window, frames)
    for slab in slabs:
        busy.add(slab)
        kern.add(slab)
        copies.add(slab)
    b = busy.result()
    kb = b.engines["kernel"].busy_ns if "kernel" in b.engines else 0
    return b, kern.result(kb), copies.result()


_SUMS_DTYPE = np.dtype([("key", np.int64), ("ns", np.int64), ("blen", np.int64), ("blabel", np.int32),
                        ("bseq", np.int64)])


class _SumsFile:
    """The holes' sums, appended as they close and read back in blocks: a temporary file in the system's
    temporary folder (nothing is written beside the trace), gone once closed or collected."""

    def __init__(self) -> None:
        import tempfile

        self.f = tempfile.TemporaryFile(prefix="clusterbench-sums-")
        self.n = 0

    def append(self, rows: np.ndarray) -> None:
        self.f.seek(0, 2)
        self.f.write(rows.tobytes())
        self.n += int(rows.size)

    def blocks(self, step: int):  # noqa: ANN201
        size = _SUMS_DTYPE.itemsize
        for b0 in range(0, self.n, step):
            self.f.seek(b0 * size)
            count = min(step, self.n - b0)
            yield np.frombuffer(self.f.read(count * size), dtype=_SUMS_DTYPE, count=count)

    def close(self) -> None:
        self.f.close()


def _hole_pieces(s: np.ndarray, e: np.ndarray, ha: np.ndarray, hb: np.ndarray) -> tuple[np.ndarray, ...]:
    """The non-empty pieces of the intervals [s, e) inside the disjoint, sorted holes [ha, hb): each piece's
    start, end, interval and hole (intervals.clip's pieces, with the hole named; most calls meet no hole,
    so only the two searches that find none are made for them)."""
    i0 = np.searchsorted(hb, s, side="right")  # the first hole ending after the interval starts
    i1 = np.searchsorted(ha, e, side="left")  # past the last one starting before it ends
    n = i1 - i0
    hit = np.flatnonzero(n > 0)
    if hit.size == 0:
        e0 = np.empty(0, dtype=np.int64)
        return e0, e0, e0, e0
    n = n[hit]
    rep = np.repeat(hit, n)
    j = i0[rep] + (np.arange(rep.size) - np.repeat(np.cumsum(n) - n, n))
    ps = np.maximum(s[rep], ha[j])
    pe = np.minimum(e[rep], hb[j])
    keep = pe > ps
    return ps[keep], pe[keep], rep[keep], j[keep]


class SpanAccumulator:
    """What the window and the idle gaps need, over slabs: the union of the group's records as it grows
    (the open run carried from slab to slab, as intervals._runs carries it from block to block), its
    first start, last end and holes of at least HOLE_NS; the records starting before each hole (for the
    trim's segments); every launching thread's first and last issuing call; and, per hole, what the gaps'
    causes read of the calls in it, summed as the hole closes: per thread and state the time, and the
    longest call (gaps.classify), and the first module load with the calls after it (gaps.first_launch_loads).
    The calls still running where the union ends are carried, since the next hole begins there. Memory:
    a few numbers per hole (their sums in a temporary file, read back in blocks), none per call."""

    def __init__(self, pid: int, device: int, issues: Callable[[], np.ndarray], hole_ns: int,
                 names: Callable[[], tuple] | None = None, window: iv.Intervals | None = None) -> None:  # fmt: skip
        self.pid, self.device, self.issues, self.hole_ns = pid, device, issues, hole_ns
        # a window fixed before the read: the gaps are the holes cut to it, with the stretches before the
        # first record and after the last (gaps.idle); else (the span, trimmed or not) the holes themselves
        self.window = window
        self.agg_starts: list[np.ndarray] = []  # the gaps' starts, in the order of their ids in the sums
        self.names = names  # () -> (names, categories, issues): the API names met so far
        self.carry_s: int | None = None  # the open run of the union
        self.carry_e: int | None = None
        self.first: int | None = None
        self.hs: list[np.ndarray] = []
        self.he: list[np.ndarray] = []
        self.before_hole: list[np.ndarray] = []  # per hole: the records (of positive length) starting before it
        self.n_holes = 0
        self.rows = 0  # records of positive length so far
        self.zero_starts: list[np.ndarray] = []  # records of zero length: their starts (they may lie in a hole)
        # per (hole, thread, state): the time of the calls' pieces in the hole, and the longest piece (its length,
        # the call's name, the call's place in the read order: the later wins a tie, as in gaps._longest)
        # kept in a temporary file (the system's temporary folder, removed when closed): they grow with the holes
        self._sums: _SumsFile | None = None
        self.n_agg = 0
        # per hole with a module load: [gap id, first load's start, end, thread, calls after it, first after's category]
        self.loads: list[np.ndarray] = []
        self.pending: dict[str, np.ndarray] | None = None  # calls that may overlap the next hole
        self.ifirst: dict[int, int] = {}
        self.ilast: dict[int, int] = {}
        self.seen = 0  # calls read so far (their order)
        self.n_threads = 1 << 20

    def add(self, slab: Slab, thread_pid: np.ndarray) -> None:
        engines, _ = split_engines(slab.activity, self.pid, self.device)
        if engines:
            s = np.concatenate([r.start_ns for r in engines.values()])
            e = np.concatenate([r.end_ns for r in engines.values()])
            zero = e <= s
            if zero.any():
                self.zero_starts.append(s[zero])
                s, e = s[~zero], e[~zero]
            o = np.argsort(s, kind="stable")
            s, e = s[o], e[o]
        else:
            s = e = np.empty(0, dtype=np.int64)
        ha = hb = np.empty(0, dtype=np.int64)
        first_was = self.first
        if s.size:
            reach = np.maximum.accumulate(e)
            if self.carry_e is not None:
                np.maximum(reach, self.carry_e, out=reach)
            new = np.empty(s.size, dtype=bool)
            new[0] = self.carry_e is None or bool(s[0] > self.carry_e)
            np.greater(s[1:], reach[:-1], out=new[1:])
            idx = np.flatnonzero(new)
            if self.first is None:
                self.first = int(s[0])
            # runs starting in this slab: the one before each closes; a hole where the gap is long enough
            prev_end = np.where(idx > 0, reach[np.maximum(idx - 1, 0)], self.carry_e if self.carry_e is not None else _LOW)
            valid = (idx > 0) | (self.carry_e is not None)
            hole = valid & ((s[idx] - prev_end) >= self.hole_ns)
            hi_ = np.flatnonzero(hole)
            if hi_.size:
                ha, hb = prev_end[hi_].astype(np.int64), s[idx[hi_]].astype(np.int64)
                self.hs.append(ha)
                self.he.append(hb)
                self.before_hole.append((self.rows + idx[hi_]).astype(np.int64 if self.rows + s.size >= 1 << 31 else np.int32))
                self.n_holes += int(ha.size)
            if idx.size:
                self.carry_s = int(s[idx[-1]])
            self.carry_e = int(reach[-1])
            self.rows += int(s.size)
        # calls: each thread's issuing span, and the calls in the holes found now
        api = slab.api
        mine = thread_pid[api["thread"]] == self.pid if api["start"].size else np.zeros(0, dtype=bool)
        iss = np.flatnonzero(mine & self.issues()[api["name"]]) if api["start"].size else np.empty(0, dtype=np.int64)
        for t in iv.distinct(api["thread"][iss]):
            st = api["start"][iss][api["thread"][iss] == t]
            self.ifirst[t] = min(self.ifirst.get(t, _HIGH), int(st.min()))
            self.ilast[t] = max(self.ilast.get(t, _LOW), int(st.max()))
        n = api["start"].size
        cols = {k: api[k][mine] for k in ("start", "end", "thread", "name")}
        cols["seq"] = np.arange(self.seen, self.seen + n, dtype=np.int64)[mine]
        self.seen += n
        cand = cols if self.pending is None else {k: np.concatenate([self.pending[k], v]) for k, v in cols.items()}
        if self.window is not None and self.first is not None and first_was is None:
            # the stretch before the first record, inside the window
            self._gaps_of(cand, np.array([_LOW], dtype=np.int64), np.array([self.first], dtype=np.int64))
        if ha.size and cand["start"].size:
            self._gaps_of(cand, ha, hb)
        if cand["start"].size:
            keep = cand["end"] > (self.carry_e if self.carry_e is not None else _LOW)
            self.pending = {key: v[keep] for key, v in cand.items()}

    def _gaps_of(self, cand: dict[str, np.ndarray], ha: np.ndarray, hb: np.ndarray) -> None:
        """Sum the calls' pieces in the holes [ha, hb) (cut to the window when it is fixed)."""
        if self.window is not None:
            ha, hb = iv.intersect(self.window, (ha, hb))
        if ha.size == 0:
            return
        first_id = self.n_agg
        self.agg_starts.append(np.asarray(ha, dtype=np.int64))
        self.n_agg += int(ha.size)
        if cand["start"].size:
            self._pieces(cand, ha, hb, first_id)

    def _agg_id(self, starts: np.ndarray) -> np.ndarray:
        """Per gap start, the id of its sums (-1 for none)."""
        if len(self.agg_starts) != 1:
            self.agg_starts = [np.concatenate(self.agg_starts) if self.agg_starts else np.empty(0, dtype=np.int64)]
        a = self.agg_starts[0]
        o = np.argsort(a, kind="stable")
        k = np.searchsorted(a[o], starts)
        ok = (k < a.size) & (a[o][np.minimum(k, max(a.size - 1, 0))] == starts) if a.size else np.zeros(starts.size, bool)
        return np.where(ok, o[np.minimum(k, max(a.size - 1, 0))] if a.size else -1, -1)

    def finish(self) -> None:
        """After the last slab: the stretch after the last record, inside a fixed window."""
        if self.window is not None and self.carry_e is not None and self.pending is not None:
            self._gaps_of(self.pending, np.array([self.carry_e], dtype=np.int64), np.array([_HIGH], dtype=np.int64))

    def _pieces(self, cand: dict[str, np.ndarray], ha: np.ndarray, hb: np.ndarray, first_hole: int) -> None:
        from clusterbench.analyzers.gaps import _STATE_OF_CATEGORY

        names, cats, issues = self.names()
        ps, pe, rows, j = _hole_pieces(cand["start"], cand["end"], ha, hb)
        if ps.size == 0:
            return
        hole = first_hole + j
        st = _STATE_OF_CATEGORY[cats[cand["name"][rows]]]
        key = (hole.astype(np.int64) * self.n_threads + cand["thread"][rows].astype(np.int64)) * 8 + st
        self._merge(key, pe - ps, cand["name"][rows].astype(np.int64), cand["seq"][rows])
        # module loads: per hole the first one (gaps.first_launch_loads) and the calls after it on its thread
        ml = S.API_CODE["module_load"]
        sync_copy = np.array([x in S.SYNC_COPY_CALLS for x in names] + [False], dtype=bool)
        issue_cat = np.array([c in S.ISSUE_CATEGORIES for c in S.API_CATEGORIES], dtype=bool)
        c_cat = cats[cand["name"]]
        loads = np.flatnonzero(c_cat == ml)
        if loads.size == 0:
            return
        issuing = issue_cat[c_cat] | sync_copy[cand["name"]]
        rows = _first_loads(cand, c_cat, issuing, loads, ha, hb)
        if rows.shape[0]:
            rows[:, 0] += first_hole
            self.loads.append(rows)

    def _merge(self, key: np.ndarray, plen: np.ndarray, label: np.ndarray, seq: np.ndarray) -> None:
        """Sum the pieces of holes that close now (a hole closes once: its keys are new) and keep them."""
        o = np.lexsort((seq, plen, key))  # per key, the longest last (ties: the later call)
        k, ns, lb, sq = key[o], plen[o], label[o], seq[o]
        last = np.flatnonzero(np.append(k[1:] != k[:-1], True))
        first = np.concatenate([[0], last[:-1] + 1])
        out = np.empty(last.size, dtype=_SUMS_DTYPE)
        out["key"], out["ns"], out["blen"], out["blabel"], out["bseq"] = k[last], np.add.reduceat(ns, first), ns[last], lb[last], sq[last]
        if self._sums is None:
            self._sums = _SumsFile()
        self._sums.append(out)

    def drop_holes(self) -> None:
        """Let the holes go (their starts and ends, the records before each): once the window and its gaps are
        known, only the holes' sums are still needed, by :meth:`classify`."""
        self.hs, self.he, self.before_hole, self.zero_starts = [], [], [], []

    def compact(self) -> None:
        """The per-slab pieces of the holes, joined into one array each (the sums are in their file)."""
        for name in ("hs", "he", "before_hole", "agg_starts", "loads"):
            parts = getattr(self, name)
            if len(parts) > 1:
                setattr(self, name, [np.concatenate(parts)])

    def sums(self, step: int):  # noqa: ANN201
        """The holes' sums in blocks of ``step`` (structured arrays of _SUMS_DTYPE), in the order kept."""
        if self._sums is not None:
            yield from self._sums.blocks(step)

    def close(self) -> None:
        """Remove the sums' temporary file (classify cannot run after)."""
        if self._sums is not None:
            self._sums.close()
            self._sums = None

    @property
    def span(self) -> tuple[int, int]:
        return (self.first or 0, self.carry_e or 0)

    @property
    def holes(self) -> iv.Intervals:
        if not self.hs:
            return iv.empty()
        return np.concatenate(self.hs), np.concatenate(self.he)

    def records_before(self, t: np.ndarray) -> np.ndarray:
        """Per time (each a hole's start, or past every record): the records that start before it."""
        hs = self.holes[0]
        k = np.searchsorted(hs, t, side="left")
        pos = np.concatenate([x.astype(np.int64) for x in self.before_hole] + [np.array([self.rows], dtype=np.int64)])
        out = np.where(k < hs.size, pos[np.minimum(k, hs.size)], self.rows)
        exact = (k < hs.size) & (hs[np.minimum(k, max(hs.size - 1, 0))] == t) if hs.size else np.zeros(t.size, bool)
        if not bool((exact | (t >= (self.carry_e or 0))).all()):
            raise ValueError("records_before takes the holes' starts")
        z = np.sort(np.concatenate(self.zero_starts)) if self.zero_starts else np.empty(0, dtype=np.int64)
        return out + np.searchsorted(z, t, side="left")

    def classify(self, g, gaps: iv.Intervals, window_start_ns: int, threshold: int):  # noqa: ANN001, ANN201
        """gaps.classify of ``gaps`` (each one of the holes), from the sums per hole."""
        from clusterbench.analyzers import gaps as G
        from clusterbench.analyzers.records import GAP_CAUSES, Gaps

        gs, ge = gaps
        n = int(gs.size)
        lengths = ge - gs
        ns_ = len(GAP_CAUSES)
        cause = np.full(n, G._UNKNOWN, dtype=np.int8)
        spans = G.issue_spans(g)
        if n == 0 or not spans:
            parts = np.zeros((n, ns_), dtype=np.int64)
            parts[:, G._UNKNOWN] = lengths
            return Gaps(threshold, gs, lengths, cause, (None,) * n, parts, window_start_ns)
        threads = np.array(sorted(spans), dtype=np.int64)
        first = np.array([spans[t][0] for t in threads.tolist()], dtype=np.int64)
        last = np.array([spans[t][1] for t in threads.tolist()], dtype=np.int64)
        relevant = (first[None, :] <= gs[:, None]) & (last[None, :] >= gs[:, None])
        between = ~relevant.any(axis=1)
        relevant[between, :] = True
        n_rel = relevant.sum(axis=1)
        per = np.zeros(n * ns_, dtype=np.int64)
        hole_of = self._agg_id(gs)  # the sums each gap has (each gap is a hole, cut to a fixed window)
        o_h = np.argsort(hole_of, kind="stable")
        srt = hole_of[o_h]
        step = 1 << 16

        def entries(blk: np.ndarray):  # noqa: ANN202
            """A block of the sums: (its rows that count, their gap, their state)."""
            key = blk["key"]
            hole = key // (self.n_threads * 8)
            th = (key // 8) % self.n_threads
            st = key % 8
            jj = np.searchsorted(srt, hole)
            ok = (jj < n) & (srt[np.minimum(jj, n - 1)] == hole)
            jg = o_h[np.minimum(jj, n - 1)]
            k = np.searchsorted(threads, th)
            ok &= (k < threads.size) & (threads[np.minimum(k, threads.size - 1)] == th)
            ok[ok] &= relevant[jg[ok], k[ok]]
            sel = np.flatnonzero(ok)
            return sel, jg[sel], st[sel]

        for blk in self.sums(step):
            sel, jg, st = entries(blk)
            np.add.at(per, jg * ns_ + st, blk["ns"][sel])
        # nsys's own overhead rows (a small table): as gaps._pieces reads them, after every call
        empty = R_empty_api(g)
        g0 = GroupTrace(pid=g.pid, device=g.device, gpu_name=g.gpu_name, engines={}, implausible={}, kernel_names=g.kernel_names,
                        first_ns=g.first_ns, last_ns=g.last_ns, holes=g.holes, api=empty, overhead=g.overhead,
                        graph_trace=g.graph_trace, srckind_read=g.srckind_read)  # fmt: skip
        prof = list(G._pieces(g0, gaps, threads, relevant))
        for plen, jj_, stt, lab in prof:
            np.add.at(per, jj_ * ns_ + stt, plen)
        per = per.reshape(n, ns_)
        blocked = per[:, G._ML] + per[:, G._ALLOC] + per[:, G._SYNC] + per[:, G._PROF]
        per[:, G._HOST] = np.maximum(lengths * n_rel - blocked, 0)
        del blocked
        order = np.array(G._PICK_ORDER)
        cause = np.empty(n, dtype=np.int8)
        for b0 in range(0, n, step):  # in blocks: the columns picked from would be a copy of n x 4 values at once
            blk = per[b0 : b0 + step]
            picked = order[np.argmax(blk[:, order], axis=1)]
            cause[b0 : b0 + step] = np.where(blk[:, G._ML] > 0, G._ML, picked)
        # the call that names the cause: the longest piece in that state (ties: the later; nsys's rows come last)
        best_len = np.zeros(n, dtype=np.int64)
        best_seq = np.full(n, -1, dtype=np.int64)
        best_label = np.full(n, -1, dtype=np.int64)
        for blk in self.sums(step):
            sel, jg, st = entries(blk)
            m = st == cause[jg]
            sel, jg = sel[m], jg[m]
            if sel.size == 0:
                continue
            bl, bs = blk["blen"][sel], blk["bseq"][sel]
            o = np.lexsort((bs, bl, jg))
            last = o[np.flatnonzero(np.append(jg[o][1:] != jg[o][:-1], True))]
            jw = jg[last]
            better = (bl[last] > best_len[jw]) | ((bl[last] == best_len[jw]) & (bs[last] > best_seq[jw]))
            jw, last = jw[better], last[better]
            best_len[jw], best_seq[jw], best_label[jw] = bl[last], bs[last], blk["blabel"][sel][last]
        for plen, jj_, stt, lab in prof:
            for q in np.flatnonzero((stt == cause[jj_]) & (plen > 0)).tolist():
                j0 = int(jj_[q])
                if int(plen[q]) >= best_len[j0]:
                    best_len[j0], best_seq[j0], best_label[j0] = int(plen[q]), _HIGH, int(lab[q])
        per_done = per
        per = per_done
        if bool((n_rel == 1).all()):  # one thread counts for every gap: its time is the average (no temporary)
            parts = per
        else:
            parts = np.empty_like(per)
            for b0 in range(0, n, 1 << 16):
                parts[b0 : b0 + (1 << 16)] = np.rint(per[b0 : b0 + (1 << 16)] / n_rel[b0 : b0 + (1 << 16), None]).astype(np.int64)
        labels = list(g.api.names) + list(g.overhead.name)
        api_name = tuple(labels[i] if i >= 0 else None for i in best_label.tolist())
        return Gaps(threshold, gs, lengths, cause, api_name, parts, window_start_ns, between=between if between.any() else None)

    def first_launch_loads(self, gaps) -> np.ndarray:  # noqa: ANN001
        """gaps.first_launch_loads from the first module load kept per hole."""
        from clusterbench.analyzers.gaps import LAZY_LEAD, _ML

        out = np.zeros(len(gaps), dtype=bool)
        ml = np.flatnonzero(gaps.cause == _ML)
        ids = self._agg_id(gaps.starts_ns[ml].astype(np.int64)) if ml.size else ml
        loads = np.concatenate(self.loads) if self.loads else np.empty((0, 6), dtype=np.int64)
        o = np.argsort(loads[:, 0], kind="stable")
        loads = loads[o]
        for j, h in zip(ml.tolist(), ids.tolist()):
            gs = int(gaps.starts_ns[j])
            ge = gs + int(gaps.lengths_ns[j])
            k = int(np.searchsorted(loads[:, 0], h))
            if h < 0 or k >= loads.shape[0] or int(loads[k, 0]) != h:
                continue
            _, start, _, _, n_after, cat = loads[k].tolist()
            if start - gs > LAZY_LEAD * (ge - gs):
                continue
            out[j] = n_after == 1 and cat == S.API_CODE["launch"]
        return out


def _first_loads(cand: dict[str, np.ndarray], c_cat: np.ndarray, issuing: np.ndarray, loads: np.ndarray, ha: np.ndarray,
                 hb: np.ndarray) -> np.ndarray:  # fmt: skip
    """Per hole [ha, hb) (sorted, disjoint) that a module load of ``loads`` (indices into ``cand``, the calls
    in read order) overlaps, as gaps.first_launch_loads reads it: a row (hole's index, the load's start,
    end and thread, the issuing calls of its thread that start at or after its end and before the hole's
    end, the category of the first of them in read order, -1 for none). The hole's load is the
    earliest-starting one (ties: the first in read order). Rows in hole order."""
    e = np.empty((0, 6), dtype=np.int64)
    if loads.size == 0 or ha.size == 0:
        return e
    cs, ce, ct, seq = cand["start"], cand["end"], cand["thread"], cand["seq"]
    ls, le = cs[loads], ce[loads]
    h0 = np.searchsorted(hb, ls, side="right")  # the first hole ending after the load starts
    h1 = np.searchsorted(ha, le, side="left")  # past the last hole starting before the load ends
    n = np.maximum(h1 - h0, 0)
    total = int(n.sum())
    if total == 0:
        return e
    li = np.repeat(np.arange(loads.size), n)
    hh = np.repeat(h0, n) + (np.arange(total) - np.repeat(np.cumsum(n) - n, n))
    o = np.lexsort((li, ls[li], hh))  # per hole: the earliest start, then the first load read
    hh, li = hh[o], li[o]
    win = np.flatnonzero(np.append(True, hh[1:] != hh[:-1]))
    hole, f = hh[win], loads[li[win]]
    th, fs, fe, b = ct[f].astype(np.int64), cs[f], ce[f], hb[hole]
    count = np.zeros(hole.size, dtype=np.int64)
    cat = np.full(hole.size, -1, dtype=np.int64)
    in_order = cs.size < 2 or (bool((cs[1:] >= cs[:-1]).all()) and bool((seq[1:] > seq[:-1]).all()))
    iss = np.flatnonzero(issuing)
    it = ct[iss]
    for t in iv.distinct(th):
        q = np.flatnonzero(th == t)
        mine = iss[it == t]  # in read order
        if in_order:  # the calls in start order too: those in [fe, b) are a run, its first the first read
            st = cs[mine]
            lo = np.searchsorted(st, fe[q], side="left")
            hi = np.searchsorted(st, b[q], side="left")
            count[q] = np.maximum(hi - lo, 0)
            has = count[q] > 0
            cat[q[has]] = c_cat[mine[lo[has]]]
            continue
        for j in q.tolist():
            after = mine[(cs[mine] >= fe[j]) & (cs[mine] < b[j])]
            after = after[np.argsort(seq[after], kind="stable")]
            count[j] = after.size
            cat[j] = int(c_cat[after[0]]) if after.size else -1
    return np.stack([hole.astype(np.int64), fs, fe, th, count, cat], axis=1).astype(np.int64)


def R_empty_api(g):  # noqa: ANN001, ANN201, N802
    """g's API calls with none of the calls: the threads, names and spans only."""
    from clusterbench.io.nsys import reader as R

    a = g.api
    e = np.empty(0, dtype=np.int64)
    return R.ApiCalls(start_ns=e, end_ns=e, thread=e, name=e, correlation=e, stream=e, names=a.names, name_category=a.name_category,
                      threads=a.threads, totals=a.totals, plan=a.plan, tables=a.tables, issue_first_ns=a.issue_first_ns,
                      issue_last_ns=a.issue_last_ns)  # fmt: skip


def window_and_gaps(slabs: Iterable[Slab], rd, pid: int, device: int, spec, ranges, overhead,  # noqa: ANN001
                    graph_trace: str | None, srckind_read: bool, gap_ns: int, thread_names: dict[int, str]):  # noqa: ANN201
    """The window (analyzers.window: fixed, the span, or the span trimmed) and its idle gaps with their
    causes (analyzers.gaps), of group (pid, device), from the slabs of ``rd`` (a slabs.SlabReader) in one
    pass (SpanAccumulator). Returns (Window, Gaps, the NVTX ranges of the window)."""
    from clusterbench.analyzers import gaps as gaps_mod
    from clusterbench.analyzers import window as window_mod
    from clusterbench.analyzers.model import HOLE_NS
    from clusterbench.errors import InputError
    from clusterbench.io.nsys import reader as R

    region = None
    if spec.kind == "ms":
        region = (np.array([int(round(spec.start_ms * 1e6))], dtype=np.int64), np.array([int(round(spec.end_ms * 1e6))], dtype=np.int64))
    elif spec.kind != "span":
        stub = GroupTrace(pid=pid, device=device, gpu_name=None, engines={}, implausible={}, kernel_names=(), first_ns=0, last_ns=1,
                          holes=iv.empty(), api=None, overhead=overhead, graph_trace=None, srckind_read=True)  # fmt: skip
        try:
            fx = window_mod.fixed(stub, ranges, spec)
        except InputError:
            fx = None
        region = None if fx is None else fx[0].intervals
    acc = SpanAccumulator(pid, device, lambda: rd.name_snapshot()[2], HOLE_NS, rd.name_snapshot, region)
    for slab in slabs:
        acc.add(slab, np.asarray(rd.threads_map.keys, dtype=np.int64) >> 24)
    acc.finish()
    keys = list(rd.threads_map.keys)
    threads = tuple(R.Thread(int(k) >> 24, int(k) & 0xFFFFFF, thread_names.get(int(k))) for k in keys)
    first = np.array([acc.ifirst.get(t, -1) for t in range(len(keys))], dtype=np.int64)
    last = np.array([acc.ilast.get(t, -1) for t in range(len(keys))], dtype=np.int64)
    tables = tuple(c.table for c in rd.cursors if c.table in S.API_TABLES)
    names, cats, _ = rd.name_snapshot()
    e = np.empty(0, dtype=np.int64)
    api = R.ApiCalls(start_ns=e, end_ns=e, thread=e, name=e, correlation=e, stream=e, names=names, name_category=cats,
                     threads=threads, totals=R._empty_totals(), plan=R.KEEP_ALL, tables=tables, issue_first_ns=first,
                     issue_last_ns=last)  # fmt: skip
    s0, s1 = acc.span
    g = GroupTrace(pid=pid, device=device, gpu_name=None, engines={}, implausible={}, kernel_names=tuple(rd.kernel_names),
                   first_ns=s0, last_ns=s1, holes=acc.holes, api=api, overhead=overhead, graph_trace=graph_trace,
                   srckind_read=srckind_read)  # fmt: skip
    fx = window_mod.fixed(g, ranges, spec)
    used = None
    if fx is not None:
        w, used = fx
    else:
        w = window_mod.span(g)
        if spec.kind == "auto":
            span_gaps = acc.classify(g, gaps_mod.idle(g, w.intervals, gap_ns), w.start_ns, gap_ns)
            w = window_mod.trim(g, span_gaps, acc.records_before, acc.first_launch_loads(span_gaps))
    gp = acc.classify(g, gaps_mod.idle(g, w.intervals, gap_ns), w.start_ns, gap_ns)
    acc.close()
    return w, gp, used

class _Completions:
    """Completion times (the ends of frame events) that come with their events in start order, put in
    time order through a buffer (an event that starts at or after t ends at or after it, so the ends
    before the next slab's start are final), and the intervals between consecutive ones summed up as
    pacing.measure reads them: their value counts (median, 99th percentile), and the first longest."""

    def __init__(self) -> None:
        self.buf = np.empty(0, dtype=np.int64)
        self.last: int | None = None
        self.n = 0
        self.intervals = ValueCounts()
        self.max_d = -1
        self.at: tuple[int, int] | None = None

    def add(self, ends: np.ndarray, settled: int | None) -> None:
        """``ends`` of new events; every event still to come ends at or after ``settled`` (None: none comes)."""
        buf = np.concatenate([self.buf, ends]) if ends.size else self.buf
        if settled is None:
            out, self.buf = np.sort(buf), np.empty(0, dtype=np.int64)
        else:
            m = buf < settled
            out, self.buf = np.sort(buf[m]), buf[~m]
        if out.size == 0:
            return
        seq = out if self.last is None else np.concatenate([[self.last], out])
        d = np.diff(seq)
        if d.size:
            self.intervals.add(d)
            k = int(np.argmax(d))  # the first of equal maxima
            if int(d[k]) > self.max_d:
                self.max_d, self.at = int(d[k]), (int(seq[k]), int(seq[k + 1]))
        self.n += int(out.size)
        self.last = int(out[-1])


class EventAccumulator:
    """What frames.count and pacing.measure read from the records and calls, over slabs: per kernel name
    and for graph rows, the events starting in the window (their count and completions), the kernels a
    ``kernel:`` regex matches, and the process's cudaGraphLaunch calls starting in the window."""

    def __init__(self, pid: int, device: int, window, regex: str | None, graph_launch_code: int) -> None:  # noqa: ANN001
        import re

        self.pid, self.device, self.window = pid, device, window
        self.rx = re.compile(regex) if regex is not None else None
        self.graph_launch_code = graph_launch_code
        self.by_name: dict[int, _Completions] = {}
        self.graph = _Completions()
        self.graph_count = 0
        self.matched = _Completions()
        self.matched_names: set[int] = set()
        self.graph_launches = 0
        self.names: tuple[str, ...] = ()
        self._ok: dict[int, bool] = {}

    def add(self, slab: Slab, thread_pid: np.ndarray, name_category: np.ndarray) -> None:
        from clusterbench.analyzers.frames import _starting_in

        engines, _ = split_engines(slab.activity, self.pid, self.device)
        self.names = slab.activity.kernel_names
        settled = slab.t1
        r = engines.get("kernel")
        seen = set()
        if r is not None and len(r):
            m = _starting_in(r.start_ns, self.window)
            nm, ends = r.name[m], r.end_ns[m]
            for i in iv.distinct(nm):
                seen.add(i)
                self.by_name.setdefault(i, _Completions()).add(ends[nm == i], settled)
            if self.rx is not None:
                ok = np.array([self._match(i) for i in range(len(self.names))] + [False], dtype=bool)
                hit = ok[nm]
                self.matched_names.update(iv.distinct(nm[hit]))
                self.matched.add(ends[hit], settled)
        for i, c in self.by_name.items():  # names with no event in this slab: their buffers may settle now
            if i not in seen:
                c.add(np.empty(0, dtype=np.int64), settled)
        if self.rx is not None and (r is None or not len(r)):
            self.matched.add(np.empty(0, dtype=np.int64), settled)
        gr = engines.get("graph")
        ends = gr.end_ns[_starting_in(gr.start_ns, self.window)] if gr is not None and len(gr) else np.empty(0, dtype=np.int64)
        self.graph.add(ends, settled)
        api = slab.api
        if api["start"].size:
            m = (thread_pid[api["thread"]] == self.pid) & (name_category[api["name"]] == self.graph_launch_code)
            if m.any():
                self.graph_launches += int(_starting_in(api["start"][m], self.window).sum())

    def _match(self, i: int) -> bool:
        got = self._ok.get(i)
        if got is None:
            got = self._ok[i] = bool(self.rx.search(self.names[i]))
        return got

    def top_names(self) -> list[tuple[str, int]]:
        from clusterbench.analyzers.frames import names_by_launches

        ids = np.array(sorted(i for i, c in self.by_name.items() if c.n), dtype=np.int64)
        counts = np.array([self.by_name[i].n for i in ids.tolist()], dtype=np.int64)
        return names_by_launches(ids, counts, self.names)


def frames_over(ev: EventAccumulator, spec, window, window_ranges, ranges, pid: int, h2d_bytes: int | None,  # noqa: ANN001
                warnings: list[str], graph_runs=None):  # noqa: ANN001, ANN201
    """frames.count from an EventAccumulator (the Frames record without its completion times: pacing_over
    reads them from the accumulator)."""
    from clusterbench.analyzers import frames as F
    from clusterbench.analyzers.model import GroupTrace
    from clusterbench.analyzers.records import Frames
    from clusterbench.errors import InputError

    if spec is None or spec.kind in ("count", "range", "h2d-bytes"):
        g = GroupTrace(pid=pid, device=0, gpu_name=None, engines={}, implausible={}, kernel_names=ev.names, first_ns=0,
                       last_ns=0, holes=iv.empty(), api=None, overhead=None, graph_trace=None, srckind_read=True)  # fmt: skip
        if spec is None:
            text = F._from_text(window_ranges) if window_ranges is not None and len(window_ranges) else None
            if text is None or text[0] is None:
                if text is not None and text[2]:
                    warnings.append(text[2])
                return Frames(None, None, None, hint=F.hint_from(ev.top_names()))
            return Frames(text[0], text[1], "range-text")
        out = F.count(g, spec, window, window_ranges, ranges, h2d_bytes, warnings, graph_runs)
        return out
    if spec.kind == "kernel":
        n = ev.matched.n
        names = sorted(ev.names[i] for i in ev.matched_names)
        if n == 0:
            raise InputError(
                f"--frames kernel:{spec.pattern}: no kernel launch in the window matches",
                hint="kernel names in the window: " + (", ".join(f"{a} ({c:,})" for a, c in ev.top_names()[:8]) or "none"),
            )
        what = ", ".join(names[:3]) + (f" and {len(names) - 3} more kernels" if len(names) > 3 else "")
        return Frames(n, f"{n:,} launches of {what} starting in the window (kernel:{spec.pattern})", spec.describe(), None,
                      f"launches of {what}", 1.0)  # fmt: skip
    # graph
    if ev.graph.n:
        return Frames(ev.graph.n, f"{ev.graph.n:,} CUDA graph executions starting in the window (graph-level rows)", "graph",
                      None, "CUDA graph executions", 1.0)  # fmt: skip
    g = GroupTrace(pid=pid, device=0, gpu_name=None, engines={}, implausible={}, kernel_names=ev.names, first_ns=0, last_ns=0,
                   holes=iv.empty(), api=None, overhead=None, graph_trace=None, srckind_read=True)  # fmt: skip
    if graph_runs is not None and len(graph_runs):
        mine = (graph_runs.pid == pid) & (graph_runs.device == ev.device)
        m = mine & F._starting_in(graph_runs.start_ns, window)
        if m.any():
            return F.count(g, spec, window, window_ranges, ranges, h2d_bytes, warnings, graph_runs)
    if ev.graph_launches == 0:
        raise InputError("--frames graph: no CUDA graph launch in the window (no graph-level row, no cudaGraphLaunch call)",
                         hint="count frames another way: kernel:REGEX, range:NAME or a number")  # fmt: skip
    return Frames(ev.graph_launches, f"{ev.graph_launches:,} cudaGraphLaunch calls starting in the window (node-level trace)", "graph")


def pacing_over(ev: EventAccumulator, frames, window, gaps):  # noqa: ANN001, ANN201
    """pacing.measure from an EventAccumulator (and, for events not from the records, the frames' own
    completion times)."""
    import math

    from clusterbench.analyzers import pacing as P
    from clusterbench.analyzers.records import Pacing

    if frames.count is None:
        return None, "frames are unknown"
    if frames.completions_ns is not None:  # NVTX ranges, node-level graph runs: their times are at hand
        return P.measure(_NoRecords(), frames, window.intervals if hasattr(window, "intervals") else window, gaps)
    c: _Completions | None = None
    source, per_event = frames.events_source, frames.frames_per_event or 1.0
    if frames.definition is not None and frames.definition.startswith("kernel:"):
        c = ev.matched
    elif frames.definition == "graph" and frames.events_source is not None:
        c = ev.graph
    else:
        cands: list[tuple[int, str, _Completions]] = [(ev.by_name[i].n, f"launches of {ev.names[i]}", ev.by_name[i])
                                                      for i in sorted(ev.by_name) if ev.by_name[i].n]  # fmt: skip
        if ev.graph.n:
            cands.append((ev.graph.n, "CUDA graph executions", ev.graph))
        if not cands:
            return None, f"frames come from {frames.definition}, which has no completion times, and no kernel or graph starts in the window"
        cands.sort(key=lambda x: -x[0])
        for n, src, comp in cands:
            if n >= 2 and frames.count % n == 0:
                c, source, per_event = comp, src, frames.count / n
                break
        else:
            n, src, _ = cands[0]
            return None, (
                f"frames ({frames.count:,}, from {frames.definition}) are not a multiple of the {src} in the window "
                f"(the most: {n:,}); count frames with --frames kernel:REGEX to see the pacing"
            )
    if c.n < 3:
        return None, f"{c.n} frame completion(s) in the window: too few for intervals"
    vc = c.intervals
    median = vc.median() if vc.n % 2 else (float(vc.at(vc.n // 2 - 1)) + float(vc.at(vc.n // 2))) / 2
    p99 = float(vc.at(max(0, math.ceil(0.99 * vc.n) - 1)))
    a, b = c.at
    cause, api = "busy", None
    if len(gaps):
        gs, gl = gaps.starts_ns, gaps.lengths_ns
        inside = np.flatnonzero((gs < b) & (gs + gl > a))
        if inside.size:
            clipped = np.minimum(gs[inside] + gl[inside], b) - np.maximum(gs[inside], a)
            if clipped.sum() >= P.STALL_GAP_SHARE * max(0.0, (b - a) - median):
                top = int(inside[np.argmax(clipped)])
                cause, api = gaps.cause_of(top), gaps.api[top]
    ws = window.intervals if hasattr(window, "intervals") else window
    return Pacing(source or "frame events", int(c.n), float(per_event), median, p99, int(c.max_d), a, cause, api,
                  int(ws[0][0])), None  # fmt: skip


class _NoRecords:
    """A group with no records (pacing.measure on completion times at hand)."""

    engines: dict = {}
    kernel_names: tuple = ()


class _RunningUnion:
    """The union of intervals that come in start order, a batch at a time (as intervals._runs merges
    blocks): each batch gives the merged intervals it completes; the last one stays open."""

    def __init__(self) -> None:
        self.s: int | None = None
        self.e: int | None = None

    def add(self, sb: np.ndarray, eb: np.ndarray) -> iv.Intervals:
        keep = eb > sb  # zero-length intervals are left out, as intervals.union leaves them
        if not keep.all():
            sb, eb = sb[keep], eb[keep]
        if sb.size == 0:
            return iv.empty()
        if self.e is not None:  # the open interval first: it starts before every one of the batch
            sb = np.concatenate([[self.s], sb])
            eb = np.concatenate([[self.e], eb])
        reach = np.maximum.accumulate(eb)
        new = np.empty(sb.size, dtype=bool)
        new[0] = True
        np.greater(sb[1:], reach[:-1], out=new[1:])  # touching intervals merge
        idx = np.flatnonzero(new)
        starts = sb[idx]
        ends = np.append(reach[idx[1:] - 1], reach[-1])
        self.s, self.e = int(starts[-1]), int(ends[-1])
        return starts[:-1], ends[:-1]

    def close(self) -> iv.Intervals:
        if self.e is None:
            return iv.empty()
        out = np.array([self.s], dtype=np.int64), np.array([self.e], dtype=np.int64)
        self.s = self.e = None
        return out


class _Points:
    """The ends of the process's wait intervals still to measure, in order, as arrays: each one's end, the
    latest end of the rows starting before it, and the first start at or after it (``known`` False: not
    yet seen, the value is then a placeholder)."""

    def __init__(self) -> None:
        e = np.empty(0, dtype=np.int64)
        self.t, self.prev, self.nxt, self.known = e, e, e, np.empty(0, dtype=bool)

    def __len__(self) -> int:
        return int(self.t.size)

    def fill_next(self, start: int) -> None:
        """Every point whose next start is not yet seen gets ``start``."""
        if self.known.size and not self.known.all():
            self.nxt = np.where(self.known, self.nxt, start)
            self.known = np.ones(self.t.size, dtype=bool)

    def append(self, t: np.ndarray, prev: np.ndarray, nxt: np.ndarray, known: np.ndarray) -> None:
        if t.size == 0:
            return
        if self.t.size == 0:
            self.t, self.prev, self.nxt, self.known = (np.asarray(t, dtype=np.int64), np.asarray(prev, dtype=np.int64),
                                                       np.asarray(nxt, dtype=np.int64), np.asarray(known, dtype=bool))  # fmt: skip
            return
        self.t, self.prev = np.concatenate([self.t, t]), np.concatenate([self.prev, prev])
        self.nxt, self.known = np.concatenate([self.nxt, nxt]), np.concatenate([self.known, known])

    def take(self, final: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The leading points whose next start is known (``final``: every point, _HIGH for a next not seen),
        removed: (end, prev, next)."""
        if final:
            k = self.t.size
        else:
            unknown = np.flatnonzero(~self.known)
            k = int(unknown[0]) if unknown.size else self.t.size
        t, prev, nxt = self.t[:k], self.prev[:k], np.where(self.known[:k], self.nxt[:k], _HIGH)
        self.t, self.prev, self.nxt, self.known = self.t[k:], self.prev[k:], self.nxt[k:], self.known[k:]
        return t, prev, nxt


class HostAccumulator:
    """host.measure over slabs, without the blocked time (which needs the held calls): per launching
    thread its calls' time by kind inside the window less its set-up gaps, its waits as a union, its
    first and last call; the process's blocking calls as a union (host_sync_ns), its synchronous copies,
    and the GPU's idle time where the waits end (drain_idle_ns). The unions are carried open from slab
    to slab; each merged interval is measured once it is complete."""

    _KINDS = ("launch", "copy", "wait", "other")

    def __init__(self, pid: int, device: int, window: iv.Intervals, setup: iv.Intervals, frames: int | None) -> None:
        self.pid, self.device, self.window, self.frames = pid, device, window, frames
        self.steady = iv.subtract(window, setup)
        self.ns: dict[tuple[int, int], int] = {}
        self.calls: dict[tuple[int, int], int] = {}
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.issues: set[int] = set()
        self.waits: dict[int, _RunningUnion] = {}
        self.wait_ns: dict[int, int] = {}
        self.every = _RunningUnion()
        self.host_sync = 0
        self.names_in: set[int] = set()
        self.copies = _RunningUnion()
        self.copy_ns = 0
        self.copy_calls = 0
        self.copy_names: set[int] = set()
        # the GPU around the waits' ends: the latest end of the rows so far, and for the process's open
        # wait interval, the latest end of the rows starting before its end and the first start at or after
        self.runmax = _LOW
        self.open_prev = _LOW
        self.open_next: int | None = None
        self.points = _Points()  # (end, prev, next; next not yet seen where not known)
        self.drain = 0
        self.last_stretch: tuple[int, int] | None = None

    def add(self, slab: Slab, thread_pid: np.ndarray, name_category: np.ndarray, names: tuple[str, ...]) -> None:
        from clusterbench.analyzers.host import _ISSUE, _KIND_OF_CATEGORY

        engines, _ = split_engines(slab.activity, self.pid, self.device)
        if engines:
            gs = np.concatenate([r.start_ns for r in engines.values()])
            ge = np.concatenate([r.end_ns for r in engines.values()])
            o = np.argsort(gs, kind="stable")
            gs, ge = gs[o], ge[o]
        else:
            gs = ge = np.empty(0, dtype=np.int64)
        pm = np.maximum.accumulate(ge) if ge.size else ge
        before = self.runmax
        # the points waiting for the GPU's next start: this slab's first row is the next (every row starts after them)
        if gs.size:
            self.points.fill_next(int(gs[0]))
        self._settle()

        api = slab.api
        n_api = api["start"].size
        sync_copy = np.array([n in S.SYNC_COPY_CALLS for n in names] + [False], dtype=bool)
        kind = _KIND_OF_CATEGORY[name_category] if len(names) else np.zeros(0, dtype=np.int64)
        issue = (_ISSUE[name_category] | sync_copy[: len(names)]) if len(names) else np.zeros(0, dtype=bool)
        if n_api:
            s, e, th, nm = api["start"], api["end"], api["thread"], api["name"]
            mine = thread_pid[th] == self.pid
            touch = iv.touching(s, e, iv.clipped_lengths(s, e, self.window), self.window) & mine
            if touch.any():
                t = th[touch].astype(np.int64)
                ts, te, tn = s[touch], e[touch], nm[touch]
                for k in iv.distinct(t):
                    m = t == k
                    self.first[k] = min(self.first.get(k, _HIGH), int(ts[m].min()))
                    self.last[k] = max(self.last.get(k, _LOW), int(te[m].max()))
                self.issues.update(iv.distinct(t[issue[tn]]))
                steady_len = iv.clipped_lengths(ts, te, self.steady)
                counted = iv.touching(ts, te, steady_len, self.steady)
                key = t[counted] * 4 + kind[tn[counted]]
                if key.size:
                    u, inv = np.unique(key, return_inverse=True)
                    inv = inv.reshape(-1)
                    w = np.bincount(inv, weights=steady_len[counted], minlength=u.size)
                    c = np.bincount(inv, minlength=u.size)
                    for k, v, n in zip(u.tolist(), w.tolist(), c.tolist()):
                        self.ns[(k // 4, k % 4)] = self.ns.get((k // 4, k % 4), 0) + int(v)
                        self.calls[(k // 4, k % 4)] = self.calls.get((k // 4, k % 4), 0) + int(n)
            wm = mine & (kind[nm] == self._KINDS.index("wait"))
            ws, we, wt, wn = s[wm], e[wm], th[wm], nm[wm]
        else:
            ws = we = wt = wn = np.empty(0, dtype=np.int64)
        for k in iv.distinct(wt):  # each thread's waits, as a union inside the steady window
            m = wt == k
            done = self.waits.setdefault(k, _RunningUnion()).add(ws[m], we[m])
            self.wait_ns[k] = self.wait_ns.get(k, 0) + int(iv.clipped_lengths(done[0], done[1], self.steady).sum())
        if ws.size:
            inside = iv.touching(ws, we, iv.clipped_lengths(ws, we, self.window), self.window)
            self.names_in.update(iv.distinct(wn[inside]))
            cm = inside & sync_copy[wn]
            self.copy_calls += int(cm.sum())
            self.copy_names.update(iv.distinct(wn[cm]))
            done = self.copies.add(ws[cm], we[cm])
            self.copy_ns += int(iv.clipped_lengths(done[0], done[1], self.window).sum())
        # the process's waits as one union: each complete interval's length in the window, and its end
        t0 = _LOW if slab.t0 is None else slab.t0
        done = self.every.add(ws, we)
        self.host_sync += int(iv.clipped_lengths(done[0], done[1], self.window).sum())
        ends = done[1]
        if ends.size:
            # an end before the slab's start is the interval left open by the slab before, closed unchanged
            k = np.searchsorted(gs, ends, side="left")
            prev = np.where(k > 0, np.maximum(before, pm[np.maximum(k - 1, 0)] if pm.size else before), before)
            nxt = np.where(k < gs.size, gs[np.minimum(k, max(gs.size - 1, 0))] if gs.size else -1, -1)
            known = k < gs.size
            for j in np.flatnonzero(ends < t0).tolist():  # the interval left open before (at most one)
                p_, n_ = self._update_open(int(ends[j]), gs, pm)
                prev[j], nxt[j], known[j] = p_, -1 if n_ is None else n_, n_ is not None
            self.points.append(ends, prev, nxt, known)
        self._settle()
        # the interval still open: what is known of the GPU around its end so far
        if self.every.e is not None:
            if self.every.e < t0:
                self.open_prev, self.open_next = self._update_open(self.every.e, gs, pm)
            else:
                self.open_prev, self.open_next = self._around(self.every.e, gs, pm, before)
        if ge.size:
            self.runmax = max(self.runmax, int(pm[-1]))

    def _around(self, t: int, gs: np.ndarray, pm: np.ndarray, before: int) -> tuple[int, int | None]:
        """For a time t at or after this slab's start: the latest end of the rows starting before it, and
        the first start at or after it (None: not in this slab)."""
        k = int(np.searchsorted(gs, t, side="left"))
        prev = max(before, int(pm[k - 1])) if k > 0 else before
        return prev, (int(gs[k]) if k < gs.size else None)

    def _update_open(self, t: int, gs: np.ndarray, pm: np.ndarray) -> tuple[int, int | None]:
        """The open interval's end t (from an earlier slab): its prev and next, with this slab's rows."""
        prev, nxt = self.open_prev, self.open_next
        if nxt is None and gs.size:
            k = int(np.searchsorted(gs, t, side="left"))
            if k > 0:
                prev = max(prev, int(pm[k - 1]))
            if k < gs.size:
                nxt = int(gs[k])
        return prev, nxt

    def _settle(self, final: bool = False) -> None:
        """Measure the drain stretches of the points whose next GPU start is known (in order)."""
        t, prev, nxt = self.points.take(final)
        if t.size == 0:
            return
        m = iv.points_inside(t, self.steady)
        t, prev, nxt = t[m], prev[m], nxt[m]
        busy = prev > t
        lo, hi = np.where(busy, t, prev), np.where(busy, t, nxt)
        keep = hi > lo
        lo, hi = lo[keep], hi[keep]
        if lo.size == 0:
            return
        first = np.ones(lo.size, dtype=bool)
        first[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
        if self.last_stretch == (int(lo[0]), int(hi[0])):
            first[0] = False
        self.last_stretch = (int(lo[-1]), int(hi[-1]))
        self.drain += int(iv.clipped_lengths(lo[first], hi[first], self.steady).sum())

    def result(self, api_threads: tuple, names: tuple[str, ...], blocked: BlockedAccumulator | None = None):  # noqa: ANN201
        """The Host record; with ``blocked`` (the held calls summed), its blocked time as host.measure gives it
        with the links and the held calls."""
        from clusterbench.analyzers.records import Host, ThreadRef, ThreadStats

        for k, u in self.waits.items():
            done = u.close()
            self.wait_ns[k] = self.wait_ns.get(k, 0) + int(iv.clipped_lengths(done[0], done[1], self.steady).sum())
        done = self.every.close()
        self.host_sync += int(iv.clipped_lengths(done[0], done[1], self.window).sum())
        if done[1].size:
            nx = self.open_next
            self.points.append(done[1][:1], np.array([self.open_prev], dtype=np.int64),
                               np.array([-1 if nx is None else nx], dtype=np.int64), np.array([nx is not None]))
        self._settle(final=True)
        done = self.copies.close()
        self.copy_ns += int(iv.clipped_lengths(done[0], done[1], self.window).sum())
        threads = []
        for t in sorted(self.issues):
            span = (np.array([self.first[t]], dtype=np.int64), np.array([self.last[t]], dtype=np.int64))
            active = iv.intersect(self.steady, span)
            wait = self.wait_ns.get(t, 0)
            busy_ns = iv.length(active) - wait
            row = [self.ns.get((t, k), 0) for k in range(4)]
            c = [self.calls.get((t, k), 0) for k in range(4)]
            info = api_threads[t]
            threads.append(ThreadStats(
                thread=ThreadRef(info.pid, info.tid, info.name), launch_ns=row[0], launch_calls=c[0], copy_ns=row[1],
                copy_calls=c[1], wait_ns=wait, wait_calls=c[2], other_ns=row[3], other_calls=c[3],
                active_ns=iv.length(iv.intersect(self.window, span)), busy_ns=busy_ns, frames=self.frames,
                **(blocked.thread_fields(t, busy_ns) if blocked is not None else {}),
            ))  # fmt: skip
        threads.sort(key=lambda x: (-x.work_ns, x.thread.tid))
        groups = blocked.groups_for(self.issues, names) if blocked is not None else ()
        return Host(True, tuple(threads), self.host_sync, tuple(sorted(names[i] for i in self.names_in)), self.copy_ns,
                    self.copy_calls, tuple(sorted(names[i] for i in self.copy_names)), self.drain, groups, blocked is not None)  # fmt: skip


def _group_sum(inv: np.ndarray, x: np.ndarray, k: int) -> np.ndarray:
    """Per group 0..k-1 the sum of ``x`` over the elements ``inv`` puts in it, in int64 (exact)."""
    out = np.zeros(k, dtype=np.int64)
    np.add.at(out, inv, np.asarray(x, dtype=np.int64))
    return out


class BlockedAccumulator:
    """host._Blocked over the held calls as they come (stream_held.HeldCalls batches): per thread and
    cause the blocked time, per thread the held calls, per (thread, name, cause) the calls, blocked time,
    the calls' time in the steady window, the bytes of their own rows and the deepest queue; the
    launching threads are picked at the end."""

    def __init__(self, steady: iv.Intervals) -> None:
        self.steady = steady
        self.per: dict[tuple[int, int], int] = {}
        self.count: dict[int, int] = {}
        self.groups: dict[tuple[int, int, int], list] = {}

    def add(self, h) -> None:  # noqa: ANN001
        nb = ~h.wait & (h.blocked_ns > 0)
        if not nb.any():
            return
        th, cause, ns = h.thread[nb], h.cause[nb].astype(np.int64), h.blocked_ns[nb]
        name, own, nbytes, depth = h.name[nb], h.own[nb], h.row_bytes[nb], h.depth[nb]
        call_ns = iv.clipped_lengths(h.cstart[nb], h.cend[nb], self.steady)
        # per (thread, name, cause) of this batch, summed in NumPy; then one Python step per group, not per call
        key = np.stack([th.astype(np.int64), name.astype(np.int64), cause])
        uk, inv = np.unique(key, axis=1, return_inverse=True)
        inv = inv.reshape(-1)
        k = uk.shape[1]
        calls = np.bincount(inv, minlength=k)
        sums = [_group_sum(inv, x, k) for x in (ns, call_ns, np.where(own, nbytes, 0))]
        has_depth = depth >= 0
        deep = np.full(k, -1, dtype=np.int64)
        np.maximum.at(deep, inv[has_depth], depth[has_depth].astype(np.int64))
        any_depth = np.bincount(inv[has_depth], minlength=k) > 0
        for j, (t, n, c) in enumerate(uk.T.tolist()):
            b = int(sums[0][j])
            self.per[(t, c)] = self.per.get((t, c), 0) + b
            self.count[t] = self.count.get(t, 0) + int(calls[j])
            g = self.groups.setdefault((t, n, c), [0, 0, 0, 0, -1, False])
            g[0] += int(calls[j])
            g[1] += b
            g[2] += int(sums[1][j])
            g[3] += int(sums[2][j])
            if bool(any_depth[j]):
                g[4] = max(g[4], int(deep[j]))
                g[5] = True

    def groups_for(self, launching: set[int], names: tuple[str, ...]) -> tuple:
        """The held calls of the launching threads by (name, cause), most blocked time first."""
        from clusterbench.analyzers.held import CAUSES
        from clusterbench.analyzers.records import BlockedCalls

        merged: dict[tuple[int, int], list] = {}
        for (t, n, c), g in self.groups.items():
            if t not in launching:
                continue
            m = merged.setdefault((n, c), [0, 0, 0, 0, -1, False])
            for k in range(4):
                m[k] += g[k]
            m[4] = max(m[4], g[4])
            m[5] |= g[5]
        groups = [BlockedCalls(name=names[n], cause=CAUSES[c], calls=g[0], blocked_ns=g[1], call_ns=g[2], bytes=g[3],
                               max_depth=g[4] if g[5] else None) for (n, c), g in merged.items()]  # fmt: skip
        groups.sort(key=lambda b: (-b.blocked_ns, b.name, b.cause))
        return tuple(groups)

    def thread_fields(self, t: int, busy_ns: int) -> dict:
        from clusterbench.analyzers.held import CAUSES
        from clusterbench.analyzers.records import BLOCK_CAUSES

        row = [self.per.get((t, CAUSES.index(c)), 0) for c in BLOCK_CAUSES]
        by = tuple((c, v) for c, v in zip(BLOCK_CAUSES, row) if v > 0)
        return {"blocked_ns": min(sum(self.per.get((t, k), 0) for k in range(len(CAUSES))), busy_ns), "blocked_by_cause": by,
                "held_calls": int(self.count.get(t, 0))}  # fmt: skip
