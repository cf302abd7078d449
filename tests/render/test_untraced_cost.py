"""The injection library's cost as probe prints it: the medians' difference with the processes behind it."""

from __future__ import annotations

from clusterbench.model.untraced import DelayRun, DelayTest
from clusterbench.render.untraced import _cost_spread


def _test(bare: list[float], with_lib: list[float]) -> DelayTest:
    runs = tuple(DelayRun("bare", 0.0, i, f, own_us=f) for i, f in enumerate(bare))
    runs += tuple(DelayRun("none", 0.0, i, f, own_us=f) for i, f in enumerate(with_lib))
    runs += (DelayRun("host", 8.0, 0, 30.0, own_us=30.0),)  # a delayed run: not the library's cost
    return DelayTest(len(bare), 8.0, None, None, runs, (), "host", bare_us=sorted(bare)[len(bare) // 2],
                     cost=sorted(with_lib)[len(with_lib) // 2] / sorted(bare)[len(bare) // 2] - 1)


def test_overlapping_processes_are_said_so() -> None:
    # an H100's stored cost run at 4 streams: bare 13.82, 14.00, 15.98; with the library 20.52, 19.81, 15.26
    text = _cost_spread(_test([13.82, 14.00, 15.98], [20.52, 19.81, 15.26]))
    assert text == ("; its processes 15.26 to 20.52 µs/frame with the library, 13.82 to 15.98 without "
                    "(its fastest with the library ran faster than the slowest without)")


def test_apart_processes_give_the_ranges_alone() -> None:
    text = _cost_spread(_test([13.80, 14.00], [14.20, 14.50]))
    assert text == "; its processes 14.20 to 14.50 µs/frame with the library, 13.80 to 14.00 without"


def test_one_process_a_side_has_no_range() -> None:
    assert _cost_spread(_test([13.8], [14.2])) == ""
