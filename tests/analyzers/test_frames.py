"""Frames counted from the program's own work; expected counts come from the fakes' own rows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import zoo_fakes as Z
from clusterbench.analyzers import analyze_trace
from clusterbench.analyzers.frames import parse
from clusterbench.errors import InputError

from fake_nsys import Copy, Kernel, Range, Trace, build


@pytest.mark.parametrize("spec", ["0", "kernel:", "kernel:(", "range:", "h2d-bytes:0", "h2d-bytes:x", "graphs", "-3"])
def test_bad_frame_specs_are_input_errors(spec: str) -> None:
    with pytest.raises(InputError) as info:
        parse(spec)
    assert info.value.hint


def test_frames_argument_and_option_are_one_or_the_other() -> None:
    with pytest.raises(InputError, match="cannot be combined"):
        parse("10", frames_arg=10)
    assert parse(None, frames_arg=7).count == 7 and parse(None) is None


def _starting_in(recs, lo: int, hi: int) -> int:
    return sum(1 for r in recs if lo <= r.start < hi)


def test_kernel_frames_count_matching_launches_in_the_window(tmp_path: Path) -> None:
    p = Z.multi_kernel()
    path = build(tmp_path / "m.sqlite", p.trace)
    r = analyze_trace(path, frames_spec="kernel:zoo_calib")
    w = r.primary.window
    want = _starting_in([k for k in p.trace.kernels if k.name == "zoo_calib"], w.start_ns, w.end_ns)
    assert want == p.facts["frames"] + 1  # the warm-up frame is not separated from the loop by a gap
    f = r.primary.frames
    assert (f.count, f.definition) == (want, "kernel:zoo_calib")
    assert f.source == f"{want:,} launches of zoo_calib starting in the window (kernel:zoo_calib)"
    assert analyze_trace(path, frames_spec="kernel:^zoo_reduce$").primary.frames.count == want
    assert analyze_trace(path, frames_spec="kernel:zoo_").primary.frames.count == 2 * want  # both names match
    with pytest.raises(InputError, match="no kernel launch in the window matches") as info:
        analyze_trace(path, frames_spec="kernel:nothing")
    assert f"zoo_calib ({want:,})" in info.value.hint


def test_h2d_bytes_frames(tmp_path: Path) -> None:
    p = Z.multi_kernel()
    r = analyze_trace(build(tmp_path / "m.sqlite", p.trace), frames_spec="h2d-bytes:320000")
    n_h2d = sum(1 for c in p.trace.copies if c.kind == 1)
    assert r.primary.frames.count == n_h2d and r.primary.frames.definition == "h2d-bytes:320000"
    # 1000 bytes in the window over 300 per frame: 3.33 rounds to 3, and says so
    t = Trace(copies=[Copy(0, 100, 1, 1000)])
    f = analyze_trace(build(tmp_path / "h.sqlite", t), frames_spec="h2d-bytes:300").primary.frames
    assert f.count == 3 and "(rounded from 3.33)" in f.source


def test_range_frames_in_a_domain(tmp_path: Path) -> None:
    p = Z.nvtx_domain()
    path = build(tmp_path / "d.sqlite", p.trace)
    r = analyze_trace(path, window="range:event loop@zoo_daq", frames_spec="range:batch@zoo_daq")
    assert r.primary.frames.count == len(p.facts["batches"]) == 3
    # completions are the ranges' ends: the pacing is measured between them
    assert r.primary.pacing is not None and r.primary.pacing.events == 3


def test_graph_frames_graph_level_and_node_level(tmp_path: Path) -> None:
    g = Z.device_graph(node_level=False)
    r = analyze_trace(build(tmp_path / "g.sqlite", g.trace), frames_spec="graph")
    w = r.primary.window
    assert r.primary.frames.count == _starting_in(g.trace.graphs, w.start_ns, w.end_ns) == g.facts["events"]
    n = Z.device_graph(node_level=True)
    rn = analyze_trace(build(tmp_path / "n.sqlite", n.trace), frames_spec="graph")
    assert rn.primary.frames.count == 1  # one cudaGraphLaunch: the relaunches happen on the device
    assert "cudaGraphLaunch" in rn.primary.frames.source
    with pytest.raises(InputError, match="no CUDA graph launch"):
        analyze_trace(build(tmp_path / "k.sqlite", Trace(kernels=[Kernel(0, 10)])), frames_spec="graph")


def test_frames_from_the_range_text_and_a_hint_without(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(0, 10, name="scan"), Kernel(20, 30, name="scan")], ranges=[Range(0, 40, "pass frames=500")])
    f = analyze_trace(build(tmp_path / "t.sqlite", t)).primary.frames
    assert (f.count, f.definition) == (500, "range-text")
    t2 = Trace(kernels=t.kernels)
    f2 = analyze_trace(build(tmp_path / "n.sqlite", t2)).primary.frames
    assert f2.count is None and f2.hint == "the window holds 2 launches of scan: --frames kernel:" + re.escape("scan")
