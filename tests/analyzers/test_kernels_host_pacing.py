"""Kernels by name, copies by size class, the launching threads, and the pacing.

Expected values are worked out by hand, or from plain-Python unions (tests/oracle.py) over the fake
trace's own rows.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

import zoo_fakes as Z
from clusterbench.analyzers import analyze_trace
from clusterbench.analyzers.kernels import size_class
from clusterbench.analyzers.whatif import parse_changes

from fake_nsys import Api, Copy, Kernel, Memset, Trace, build
from oracle import base, clip, minus, total, union


def test_kernels_by_name_by_hand(tmp_path: Path) -> None:
    # calib: [0,10) [5,25) [40,44) (union 25+4 = 29 ns), durations 10, 20, 4 -> median 10;
    # reduce: [30,36) [50,52) durations 6, 2 -> median 4 (even count: the mean of the middle two)
    t = Trace(kernels=[Kernel(0, 10, name="calib"), Kernel(5, 25, stream=8, name="calib"), Kernel(30, 36, name="reduce"),
                       Kernel(40, 44, name="calib"), Kernel(50, 52, name="reduce")])  # fmt: skip
    r = analyze_trace(build(tmp_path / "k.sqlite", t), frames=2)
    got = {k.name: (k.launches, k.busy_ns, k.min_ns, k.median_ns, k.max_ns) for k in r.primary.kernels}
    assert got == {"calib": (3, 29, 4, 10.0, 20), "reduce": (2, 8, 2, 4.0, 6)}
    calib = r.primary.kernels[0]
    kernel_bar = r.primary.busy.engines["kernel"].busy_ns  # [0,25) [30,36) [40,44) [50,52) = 37
    assert kernel_bar == 37 and calib.share == pytest.approx(29 / 37) and calib.us_per_frame == pytest.approx(29 / 1000 / 2)
    mangled = analyze_trace(tmp_path / "k.sqlite", mangled=True).primary.kernels
    assert {k.name for k in mangled} == {"_Zcalib", "_Zreduce"}  # fake_nsys writes mangledName as _Z + name


def test_size_classes() -> None:
    assert [size_class(n) for n in (0, 3_999, 4_000, 63_999, 64_000, 320_000, 999_999, 1_000_000, 15_999_999, 16_000_000)] == [
        "< 4 kB", "< 4 kB", "4-64 kB", "4-64 kB", "64 kB-1 MB", "64 kB-1 MB", "64 kB-1 MB", "1-16 MB", "1-16 MB", ">= 16 MB"]  # fmt: skip


def test_copies_by_direction_and_size(tmp_path: Path) -> None:
    # two 320 kB H2D at 24.6 GB/s (13,000 ns), one 64 MB H2D at 54 GB/s (1,185,185 ns), a 4-byte D2H
    t = Trace(copies=[Copy(0, 13_000, 1, 320_000), Copy(20_000, 33_000, 1, 320_000), Copy(40_000, 1_225_185, 1, 64_000_000),
                      Copy(1_300_000, 1_301_000, 2, 4)], memsets=[Memset(1_400_000, 1_400_500, 4)])  # fmt: skip
    cls = {(c.engine, c.size_class): c for c in analyze_trace(build(tmp_path / "c.sqlite", t)).primary.copies}
    small, big = cls[("h2d", "64 kB-1 MB")], cls[("h2d", ">= 16 MB")]
    assert (small.count, small.bytes, small.busy_ns) == (2, 640_000, 26_000)
    assert small.gbps == pytest.approx(640_000 / 26_000)  # 24.6 GB/s
    assert (big.count, big.busy_ns) == (1, 1_185_185) and big.gbps == pytest.approx(54.0, rel=1e-6)
    assert (cls[("d2h", "< 4 kB")].bytes, cls[("memset", "< 4 kB")].count) == (4, 1)


def _calls(trace, tid: int, lo: int, hi: int) -> dict[str, list[tuple[int, int]]]:
    kinds = {"cudaMemcpyAsync": "copy", "cudaLaunchKernel": "launch", "cuLaunchKernel": "launch", "cudaStreamSynchronize": "wait",
             "cudaMemsetAsync": "copy"}  # fmt: skip
    out: dict[str, list] = {"launch": [], "copy": [], "wait": [], "other": []}
    for a in trace.api:
        if (a.tid if a.tid is not None else a.pid) == tid:
            out[kinds.get(base(a.name), "other")].append((a.start, a.end))
    return {k: clip(union(v) if k == "wait" else v, lo, hi) for k, v in out.items()}


def test_two_threads_each_feeding_a_stream(tmp_path: Path) -> None:
    p = Z.threads(frames=400)
    r = analyze_trace(build(tmp_path / "t.sqlite", p.trace), frames_spec="kernel:zoo_calib")
    g = r.primary
    lo, hi = g.window.start_ns, g.window.end_ns
    by = {t.thread.tid: t for t in g.host.threads}
    # the main thread's warm-up is cut off: when the GPU went idle after it, no thread was feeding it
    # (the main thread had stopped, the workers had not started), so that gap is set-up and separates it
    assert set(by) == {101, 102} and g.frames.count == p.facts["frames"]
    first_h2d = min(c.start for c in p.trace.copies if c.kind == 1 and c.start >= p.facts["go"])
    assert lo == first_h2d and "1 separating gap (1 hand-over) and 2 GPU records" in g.window.cut_note
    for tid in (101, 102):
        t = by[tid]
        calls = _calls(p.trace, tid, lo, hi)
        assert t.thread.name == f"zoo-feed-{tid - 101}"
        assert (t.launch_ns, t.copy_ns, t.wait_ns) == (total(calls["launch"]), total(calls["copy"]), total(calls["wait"]))
        assert t.launch_calls == len(calls["launch"]) == p.facts["per_thread"][tid - 101]
        mine = [(a.start, a.end) for a in p.trace.api if a.tid == tid and a.end > lo and a.start < hi]
        first, last = min(s for s, _ in mine), max(e for _, e in mine)
        assert t.active_ns == min(last, hi) - max(first, lo)
        assert t.busy_ns == total(minus([(max(first, lo), min(last, hi))], calls["wait"]))  # no set-up gap in this window
    assert g.roofline.engine == "h2d"  # 2 threads feed faster than the link moves the frames


def test_a_host_bound_loop_binds_on_the_host(tmp_path: Path) -> None:
    p = Z.host_bound()
    r = analyze_trace(build(tmp_path / "h.sqlite", p.trace), frames_spec="kernel:zoo_calib",
                      what_if=parse_changes(["host=0.5"]))  # fmt: skip
    g = r.primary
    lo, hi = g.window.start_ns, g.window.end_ns
    t = g.host.busiest
    calls = _calls(p.trace, 100, lo, hi)
    mine = [(a.start, a.end) for a in p.trace.api if a.end > lo and a.start < hi]
    busy = total(minus([(max(min(s for s, _ in mine), lo), min(max(e for _, e in mine), hi))], calls["wait"]))
    assert t.busy_ns == busy and g.roofline.engine == "host" and g.roofline.busy_ns == busy
    assert g.roofline.thread.tid == 100 and g.roofline.fps == pytest.approx(1e9 * g.frames.count / busy)
    codes = [f.code for f in g.findings]
    assert "host_binds" in codes and "serialized_one_stream" not in codes  # the frame time is not the sum of the GPU bars
    note = next(f.message for f in g.findings if f.code == "host_binds")
    assert "the host code between them" in note and "above the tallest GPU bar (h2d" in note
    wi = r.what_if
    assert wi.engine == "host" and [b.new_busy_ns for b in wi.bars if b.engine == "host"] == [round(busy * 0.5)]


def test_pacing_from_kernel_completions(tmp_path: Path) -> None:
    # 6 frames end at 100, 200, 300, 1,000,300, 1,000,400, 1,000,500: intervals 100, 100, 1,000,000, 100, 100
    ends = [100, 200, 300, 1_000_300, 1_000_400, 1_000_500]
    k = [Kernel(e - 50, e, name="calib") for e in ends]
    api = [Api(0, 10, "cudaLaunchKernel_v7000"), Api(400_000, 500_000, "cuModuleLoadData"), Api(1_000_200, 1_000_210, "cudaLaunchKernel_v7000")]
    g = analyze_trace(build(tmp_path / "p.sqlite", Trace(kernels=k, api=api)), window="span", frames_spec="kernel:calib").primary
    p = g.pacing
    d = [b - a for a, b in zip(ends, ends[1:])]
    assert (p.events, p.median_ns, p.max_ns) == (6, statistics.median(d), 1_000_000)
    assert p.p99_ns == 1_000_000  # nearest rank of 5 intervals: the largest
    # the stall [300, 1,000,300) holds the idle gap [300, 1,000,250): a module load
    assert (p.stall_start_ns, p.stall_cause, p.stall_api) == (300, "module_load", "cuModuleLoadData")


def test_pacing_from_a_frame_count_uses_a_kernel_that_divides_it(tmp_path: Path) -> None:
    # 10 frames, 5 launches of scan: 2 frames per completion
    k = [Kernel(i * 1000, i * 1000 + 500, name="scan") for i in range(5)] + [Kernel(4600, 4700, name="other")]
    g = analyze_trace(build(tmp_path / "c.sqlite", Trace(kernels=k)), frames=10).primary
    assert (g.pacing.source, g.pacing.events, g.pacing.frames_per_event) == ("launches of scan", 5, 2.0)
    assert g.pacing.median_ns == 1000 and g.pacing.stall_cause == "busy"
    g2 = analyze_trace(tmp_path / "c.sqlite", frames=7).primary
    assert g2.pacing is None and "not a multiple" in g2.pacing_note
    g3 = analyze_trace(tmp_path / "c.sqlite").primary
    assert g3.pacing is None and g3.pacing_note == "frames are unknown"
