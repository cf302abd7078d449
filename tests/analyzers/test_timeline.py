"""Timeline lanes and the default span, worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.analyzers import analyze, load_trace
from clusterbench.analyzers.timeline import build_timeline
from clusterbench.errors import InputError

from fake_nsys import Copy, Kernel, Range, Trace, build


def batches(tmp_path: Path, streams: int = 1):
    # six batches, one every 1,000 ns: h2d [100,400) then kernel [400,900), on stream 7 + i % streams
    t = Trace(
        copies=[Copy(1000 * i + 100, 1000 * i + 400, kind=1, bytes=300, stream=7 + i % streams) for i in range(6)],
        kernels=[Kernel(1000 * i + 400, 1000 * i + 900, stream=7 + i % streams) for i in range(6)],
        ranges=[Range(0, 6000, "clusterbench:pass frames=6")],
    )
    data = load_trace(build(tmp_path / f"b{streams}.sqlite", t))
    return data, analyze(data)


def lanes(tl) -> dict:
    return {(ln.engine, ln.stream): list(zip(ln.starts_ns.tolist(), ln.ends_ns.tolist())) for ln in tl.lanes}


def test_default_span_shows_three_batches(tmp_path: Path) -> None:
    data, r = batches(tmp_path)
    tl = build_timeline(data, r.primary)
    # from the first activity (100) to the start of the 4th kernel (3400): 3 batches
    assert (tl.span_start_ns, tl.span_end_ns) == (100, 3400)
    assert "3 batches of 6" in tl.span_source
    assert lanes(tl) == {
        ("kernel", 7): [(400, 900), (1400, 1900), (2400, 2900)],
        ("h2d", 7): [(100, 400), (1100, 1400), (2100, 2400), (3100, 3400)],
    }


def test_more_streams_show_more_batches(tmp_path: Path) -> None:
    data, r = batches(tmp_path, streams=2)
    assert r.primary.busy.n_streams == 2
    tl = build_timeline(data, r.primary)
    assert (tl.span_start_ns, tl.span_end_ns) == (100, 4400)  # 2 x 2 streams = 4 batches
    assert set(lanes(tl)) == {("kernel", 7), ("kernel", 8), ("h2d", 7), ("h2d", 8)}


def test_asked_for_span(tmp_path: Path) -> None:
    data, r = batches(tmp_path)
    tl = build_timeline(data, r.primary, span_ms=0.0005, start_ms=0.001)  # [1000, 1500)
    assert (tl.span_start_ns, tl.span_end_ns) == (1000, 1500)
    assert lanes(tl) == {("kernel", 7): [(1400, 1500)], ("h2d", 7): [(1100, 1400)]}
    with pytest.raises(InputError, match="past the window"):
        build_timeline(data, r.primary, start_ms=1.0)
    with pytest.raises(InputError):
        build_timeline(data, r.primary, span_ms=-1.0)


def test_default_span_skips_a_long_wait_before_the_first_batch(tmp_path: Path) -> None:
    # one early h2d [0,100), then nothing until six batches from 10,000 ns, one per 1,000 ns:
    # h2d [10000+1000i, +300), kernel [+300, +800). The kernel has the fewest records (6), its
    # period is 1,000 ns, and the 9,900-ns gap before the first batch is longer: the span starts
    # at 10,000 and ends at the 4th kernel's start, 13,300.
    t = Trace(
        copies=[Copy(0, 100, kind=1, bytes=1)] + [Copy(10_000 + 1000 * i, 10_300 + 1000 * i, kind=1, bytes=1) for i in range(6)],
        kernels=[Kernel(10_300 + 1000 * i, 10_800 + 1000 * i) for i in range(6)],
        ranges=[Range(0, 20_000, "clusterbench:pass frames=6")],
    )
    data = load_trace(build(tmp_path / "wait.sqlite", t))
    tl = build_timeline(data, analyze(data).primary)
    assert (tl.span_start_ns, tl.span_end_ns) == (10_000, 13_300)
    assert "after an idle gap of 0.010 ms" in tl.span_source


def test_gaps_are_marked_and_the_span_can_start_at_the_longest(tmp_path: Path) -> None:
    # kernels [0,10 µs) and [5 ms, 5.01 ms), a cuModuleLoadData in between: one 4.99 ms module_load gap
    from fake_nsys import Api

    t = Trace(kernels=[Kernel(0, 10_000), Kernel(5_000_000, 5_010_000)],
              api=[Api(0, 100, "cudaLaunchKernel_v7000"), Api(4_800_000, 4_900_000, "cuModuleLoadData"),
                   Api(4_990_000, 4_991_000, "cudaLaunchKernel_v7000")])  # fmt: skip
    data = load_trace(build(tmp_path / "g.sqlite", t))
    r = analyze(data)
    tl = build_timeline(data, r.primary, at_longest_gap=True)
    # the gap [10,000, 5,000,000): the span starts a quarter of it earlier (clipped at 0) and runs 1.5
    # gaps long (clipped at the window's end, 5.01 ms)
    gap = 4_990_000
    assert (tl.span_start_ns, tl.span_end_ns) == (0, min(5_010_000, int(1.5 * gap)))
    assert [(m.start_ns, m.end_ns, m.cause) for m in tl.gaps] == [(10_000, 5_000_000, "module_load")]
    assert tl.span_source == "around the longest idle gap (4.990 ms, module_load)"
    with pytest.raises(InputError, match="no idle gap"):
        build_timeline(data, analyze(load_trace(build(tmp_path / "n.sqlite", Trace(kernels=[Kernel(0, 10)])))).primary,
                       at_longest_gap=True)  # fmt: skip
