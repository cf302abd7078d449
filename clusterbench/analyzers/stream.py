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

from collections.abc import Iterable

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.busy import engine_stats, working_streams
from clusterbench.analyzers.kernels import SIZE_CLASSES
from clusterbench.analyzers.model import EngineRecords, split_engines
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
                for name in np.unique(rows.name).tolist():
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
        for name in np.unique(nm).tolist():
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
