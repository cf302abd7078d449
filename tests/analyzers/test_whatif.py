"""--what-if: parsing, and the bars and roofline recomputed by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.analyzers import analyze_trace
from clusterbench.analyzers.whatif import ASSUMPTION, Change, parse_changes
from clusterbench.errors import InputError

from fake_nsys import Copy, Kernel, Range, Trace, build


def test_parse() -> None:
    assert parse_changes(["kernel=0.5", "h2d_gbps=375"]) == (Change("kernel", factor=0.5), Change("h2d", gbps=375.0))


@pytest.mark.parametrize(
    "spec, message",
    [
        ("kernel", "not NAME=VALUE"),
        ("kernel=", "not NAME=VALUE"),
        ("kernel=fast", "is not a number"),
        ("kernel=0", "positive"),
        ("kernel=-2", "positive"),
        ("kernel=nan", "positive"),
        ("gpu=2", "unknown engine 'gpu'"),
        ("kernel_gbps=3", "needs a copy engine"),
    ],
)
def test_parse_errors(spec: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        parse_changes([spec])
    assert info.value.hint


def test_same_engine_twice() -> None:
    with pytest.raises(InputError, match="twice"):
        parse_changes(["h2d=0.5", "h2d_gbps=100"])


def test_link_rate_moves_the_roofline_to_the_kernel(tmp_path: Path) -> None:
    # 10 frames: h2d 3,200,000 B in 60,000 ns (53.3 GB/s) binds at 6 µs/frame; kernel 10,000 ns
    # (1 µs/frame). At 375 GB/s the h2d bar is 3,200,000 / 375 = 8,533 ns (0.853 µs/frame), so
    # the kernel (1 µs/frame) would bind at 1e9 * 10 / 10,000 = 1,000,000 FPS.
    t = Trace(
        copies=[Copy(0, 60_000, kind=1, bytes=3_200_000)],
        kernels=[Kernel(60_000, 70_000)],
        ranges=[Range(0, 70_000, "clusterbench:pass frames=10")],
    )
    r = analyze_trace(build(tmp_path / "w.sqlite", t), what_if=parse_changes(["h2d_gbps=375"]))
    wi = r.what_if
    bars = {b.engine: b for b in wi.bars}
    assert bars["h2d"].new_busy_ns == round(3_200_000 / 375) and bars["h2d"].changed
    assert bars["kernel"].new_busy_ns == 10_000 and not bars["kernel"].changed
    assert wi.engine == "kernel" and wi.was_engine == "h2d"
    assert wi.us_per_frame == pytest.approx(1.0) and wi.fps == pytest.approx(1_000_000)
    assert "would bind on kernel at 1.000 µs/frame" in wi.summary()
    js = r.to_json()["what_if"]
    assert js["roofline"]["engine"] == "kernel" and js["assumption"] == ASSUMPTION
    assert "independently" in ASSUMPTION and "overlap is kept" in ASSUMPTION


def test_factor_and_ties(tmp_path: Path) -> None:
    # kernel 400 ns, h2d 200 ns: kernel x0.5 = 200 ties with h2d; ties go to the earlier engine
    t = Trace(kernels=[Kernel(0, 400)], copies=[Copy(400, 600, kind=1, bytes=10)])
    r = analyze_trace(build(tmp_path / "t.sqlite", t), what_if=parse_changes(["kernel=0.5"]))
    assert [b.new_busy_ns for b in r.what_if.bars] == [200, 200, 0]
    assert r.what_if.engine == "kernel" and r.what_if.fps is None  # no frames: no FPS
    r2 = analyze_trace(tmp_path / "t.sqlite", what_if=parse_changes(["kernel=0.25", "h2d=3"]))
    assert r2.what_if.engine == "h2d" and r2.what_if.busy_ns == 600


def test_change_on_an_idle_engine_says_so(tmp_path: Path) -> None:
    t = Trace(copies=[Copy(0, 100, kind=1, bytes=10)])
    r = analyze_trace(build(tmp_path / "i.sqlite", t), what_if=parse_changes(["kernel=0.5"]))
    assert r.what_if.notes and "no busy time" in r.what_if.notes[0]
