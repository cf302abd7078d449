"""Independent reference computations for the tests: plain Python over raw rows (a fake_nsys Trace, or
rows read with sqlite3), sharing no code with clusterbench. Intervals are (start, end) pairs in ns."""

from __future__ import annotations

Interval = tuple[int, int]


def union(intervals) -> list[Interval]:
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def clip(intervals, lo: int, hi: int) -> list[Interval]:
    return [(max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)]


def total(intervals) -> int:
    return sum(e - s for s, e in intervals)


def minus(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """The parts of the disjoint sorted set a outside the set b."""
    out = []
    b = union(b)
    for s, e in a:
        cur = s
        for bs, be in b:
            if be <= cur or bs >= e:
                continue
            if bs > cur:
                out.append((cur, bs))
            cur = max(cur, be)
        if cur < e:
            out.append((cur, e))
    return out


def idle_gaps(busy, lo: int, hi: int, threshold: int = 100_000) -> list[Interval]:
    """Maximal stretches of [lo, hi) outside every busy interval, at least ``threshold`` long."""
    return [(s, e) for s, e in minus([(lo, hi)], list(busy)) if e - s >= threshold]


def gpu_intervals(trace) -> list[Interval]:
    """Every GPU record of a fake_nsys Trace."""
    return [(r.start, r.end) for r in list(trace.kernels) + list(trace.copies) + list(trace.memsets) + list(trace.graphs)]


def base(name: str) -> str:
    for suffix in ("_v3020", "_v7000", "_v5000", "_v10000", "_v11040", "_v11010"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def calls_in(trace, lo: int, hi: int, tid: int = 100) -> list[tuple[str, int]]:
    """(base name, overlap with [lo, hi)) of a thread's calls that overlap it."""
    out = []
    for a in trace.api:
        t = a.tid if a.tid is not None else a.pid
        if t != tid:
            continue
        ov = min(a.end, hi) - max(a.start, lo)
        if ov > 0:
            out.append((base(a.name), ov))
    return out
