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
from clusterbench.analyzers.busy import clip_records
from clusterbench.analyzers.model import GroupTrace
from clusterbench.analyzers.records import CopyClass, KernelStats
from clusterbench.io.nsys import schema as S

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
    idx = np.arange(len(r)) if c.inside is None else np.flatnonzero(c.inside)
    if idx.size == 0:
        return ()
    names = r.name[idx]
    order = np.argsort(names, kind="stable")
    idx, names = idx[order], names[order]
    cuts = np.flatnonzero(np.diff(names)) + 1
    out = []
    for part in np.split(idx, cuts):
        s, e = r.start_ns[part], r.end_ns[part]
        busy = iv.length(iv.intersect(iv.union(s, e), window))
        dur = e - s
        out.append(KernelStats(
            name=g.kernel_names[int(r.name[part[0]])],
            launches=int(part.size),
            busy_ns=busy,
            us_per_frame=(busy / 1000.0 / frames) if frames else None,
            share=(busy / kernel_busy_ns) if kernel_busy_ns > 0 else None,
            min_ns=int(dur.min()),
            median_ns=float(np.median(dur)),
            max_ns=int(dur.max()),
        ))  # fmt: skip
    out.sort(key=lambda k: (-k.busy_ns, k.name))
    return tuple(out)


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
            c = clip_records(r.start_ns[m], r.end_ns[m], r.bytes[m], window)
            count = c.count(int(m.sum()))
            if count == 0:
                continue
            busy = iv.length(c.busy)
            nbytes = int(c.nbytes or 0)
            out.append(CopyClass(
                engine=name, size_class=label, min_bytes=lo, max_bytes=hi, count=count, bytes=nbytes, busy_ns=busy,
                gbps=(nbytes / busy) if busy > 0 else None, us_per_frame=(busy / 1000.0 / frames) if frames else None,
            ))  # fmt: skip
    return tuple(out)
