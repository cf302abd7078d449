"""Kernels by name, and copies by direction and size class (pure).

Per kernel name: its launches (records that overlap the window), its busy time (the union of that
name's records clipped to the window), µs per frame, its share of the kernel bar (names can run at
the same time, so shares can add up to more than 1), and the min, median and max duration of its
records (whole records).

Per copy engine (and memset) and size class: the records that overlap the window, their bytes (a
record cut by a window edge in proportion), the union of their intervals, and bytes over that
union as GB/s. Classes by the record's whole size, in decimal units (kB = 1,000 bytes).
"""

from __future__ import annotations

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.busy import busy_length, clip_records
from clusterbench.analyzers.model import GroupTrace
from clusterbench.analyzers.records import CopyClass, KernelStats
from clusterbench.io.nsys import schema as S
from clusterbench.model import units as U

SIZE_CLASSES: tuple[tuple[int, int | None, str], ...] = (
    (0, 4_000, "< 4 kB"),
    (4_000, 64_000, "4-64 kB"),
    (64_000, 1_000_000, "64 kB-1 MB"),
    (1_000_000, 16_000_000, "1-16 MB"),
    (16_000_000, None, ">= 16 MB"),
)


def by_name(g: GroupTrace, window: iv.Intervals, frames: int | None, kernel_busy_ns: int) -> tuple[KernelStats, ...]:
    """One row per kernel name with a record in the window, most busy time first."""
    r = g.engines.get("kernel")
    if r is None:
        return ()
    c = clip_records(r.start_ns, r.end_ns, None, window)
    inside = c.inside
    del c
    counts = np.zeros(len(g.kernel_names), dtype=np.int64)
    for b0 in range(0, len(r), iv.BLOCK):  # launches per name, in blocks
        nm = r.name[b0 : b0 + iv.BLOCK]
        counts += np.bincount(nm if inside is None else nm[inside[b0 : b0 + iv.BLOCK]], minlength=counts.size)
    present = np.flatnonzero(counts)
    if present.size == 0:
        return ()
    out = []
    for name in present.tolist():
        if present.size == 1 and r.name.size and bool((r.name == name).all()):
            s, e = r.start_ns, r.end_ns  # one name: its records are the engine's (no copy)
        else:
            m = r.name == name
            s, e = r.start_ns[m], r.end_ns[m]
        # the records of this name outside the window add nothing once intersected with it
        busy = busy_length(s, e, window)
        inside_name = inside if inside is None or s is r.start_ns else inside[r.name == name]
        dur = _durations(s, e, inside_name)
        del s, e
        n = int(dur.size)
        lo, hi = int(dur.min()), int(dur.max())
        mid = n // 2  # the median, with the array partitioned in place (no sorted copy)
        dur.partition(mid)
        median = float(dur[mid]) if n % 2 else (float(dur[:mid].max()) + float(dur[mid])) / 2
        del dur
        out.append(KernelStats(
            name=g.kernel_names[name], launches=n, busy_ns=busy,
            us_per_frame=U.us_per_frame_of(busy, frames),
            share=(busy / kernel_busy_ns) if kernel_busy_ns > 0 else None,
            min_ns=lo, median_ns=median, max_ns=hi,
        ))  # fmt: skip
    out.sort(key=lambda k: (-k.busy_ns, k.name))
    return tuple(out)


def _durations(s: np.ndarray, e: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    """end - start of the records ``keep`` selects (all when None), block by block."""
    n = s.size if keep is None else int(keep.sum())
    out = np.empty(n, dtype=np.int64)
    pos = 0
    for b0 in range(0, s.size, iv.BLOCK):
        d = e[b0 : b0 + iv.BLOCK] - s[b0 : b0 + iv.BLOCK]
        if keep is not None:
            d = d[keep[b0 : b0 + iv.BLOCK]]
        out[pos : pos + d.size] = d
        pos += d.size
    return out


def size_class(nbytes: int) -> str:
    for lo, hi, label in SIZE_CLASSES:
        if nbytes >= lo and (hi is None or nbytes < hi):
            return label
    return SIZE_CLASSES[-1][2]


def copy_classes(g: GroupTrace, window: iv.Intervals, frames: int | None) -> tuple[CopyClass, ...]:
    """Per copy engine and memset, per size class with records in the window."""
    out = []
    for name in S.ENGINES:
        r = g.engines.get(name)
        if r is None or r.bytes is None:
            continue
        for lo, hi, label in SIZE_CLASSES:
            m = (r.bytes >= lo) if hi is None else ((r.bytes >= lo) & (r.bytes < hi))
            if not m.any():
                continue
            if m.all():  # one class: no copy
                c = clip_records(r.start_ns, r.end_ns, r.bytes, window)
            else:
                c = clip_records(r.start_ns[m], r.end_ns[m], r.bytes[m], window)
            count = c.count(int(m.sum()))
            del m
            if count == 0:
                continue
            busy = c.busy_ns
            nbytes = int(c.nbytes or 0)
            out.append(CopyClass(
                engine=name, size_class=label, min_bytes=lo, max_bytes=hi, count=count, bytes=nbytes, busy_ns=busy,
                gbps=(nbytes / busy) if busy > 0 else None, us_per_frame=U.us_per_frame_of(busy, frames),
            ))  # fmt: skip
    return tuple(out)
