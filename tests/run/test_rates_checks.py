"""A program's own figures: read from what it prints, and set against the trace (pure)."""

from __future__ import annotations

import re

import pytest

from clusterbench.errors import InputError
from clusterbench.run.checks import TraceRate, check_kernel_time, check_rate
from clusterbench.run.rates import (TIME_UNITS, Reading, canonical_unit, check_unit, compile_pattern, parse_unit,
                                    read_figure, wall_between)

OUTPUT = """starting
rate: 1000.0 frames/s
batch 2 done
rate: 2,500 frames/s (ignored: the comma ends the number)
rate: 81242.0 frames/s
throughput: 25.997 GB/s
GPU(async pipeline):  0.022 ms/frame (submit/collect, batch=2000, streams=5)
kernel 12.5 µs/frame
"""


def test_the_last_matching_line_and_its_unit_after_the_number() -> None:
    r = read_figure(OUTPUT, re.compile(r"rate: ([0-9.,]+)"))
    assert r == Reading(81242.0, "frames/s", "rate: 81242.0 frames/s") and r.converted == 81242.0
    gbps = read_figure(OUTPUT, re.compile(r"throughput: ([0-9.]+)"))
    assert (gbps.unit, gbps.metric, gbps.converted) == ("GB/s", "GB/s", 25.997)
    ms = read_figure(OUTPUT, re.compile(r"GPU\(async pipeline\):\s+([0-9.]+) ms/frame"))
    assert ms.unit == "ms/frame" and ms.converted == pytest.approx(1000 / 0.022)  # 45,455 frames/s
    us = read_figure(OUTPUT, re.compile(r"kernel (?P<value>[0-9.]+)"))
    assert us.unit == "us/frame" and us.us_per_frame == 12.5 and us.converted == pytest.approx(80_000.0)
    assert read_figure(OUTPUT, re.compile(r"latency: ([0-9.]+)")) is None


def test_a_given_unit_wins_and_a_missing_one_is_said() -> None:
    assert read_figure("took 4 per frame\n", re.compile(r"took ([0-9]+)"), "ms/frame").converted == 250.0
    with pytest.raises(ValueError, match="prints 'per' after 4, a unit probe does not know .*--rate-unit"):
        read_figure("took 4 per frame\n", re.compile(r"took ([0-9]+)"))
    with pytest.raises(ValueError, match="prints no unit after 4: give it with --rate-unit"):
        read_figure("took 4\n", re.compile(r"took ([0-9]+)"))
    with pytest.raises(ValueError, match="gives 0: a rate or time must be a number > 0"):
        read_figure("rate: 0 fps\n", re.compile(r"rate: ([0-9]+)"))
    with pytest.raises(ValueError, match="holds no number"):
        read_figure("rate: fast\n", re.compile(r"rate: (\w+)"))


def test_units_and_patterns_are_checked_before_any_run() -> None:
    assert [canonical_unit(u) for u in ("Hz", "frames/sec", "µs/frame", "GB/s", "KHz")] == [
        "Hz", "frames/s", "us/frame", "GB/s", "kHz"]
    assert check_unit("hz", "--rate-unit") == "Hz" and check_unit(None, "--rate-unit") is None
    with pytest.raises(InputError, match="--rate-unit must be one of fps, frames/s, events/s or Hz") as err:
        check_unit("furlongs", "--rate-unit")
    assert "--rate-unit UNIT" in (err.value.hint or "")
    with pytest.raises(InputError, match="--kernel-time-unit must be one of ms/frame, us/frame"):
        check_unit("kHz", "--kernel-time-unit", TIME_UNITS)
    with pytest.raises(InputError, match="matches an empty line"):
        compile_pattern("(x)?", "--rate")
    with pytest.raises(InputError, match="is not a regular expression"):
        compile_pattern("([0-9", "--rate")


# Every unit, worked by hand: (what the program prints after the number, the number, the row's figure, its metric).
UNIT_CASES = [
    ("fps", 1500.0, 1500.0, "fps"), ("FPS", 1500.0, 1500.0, "fps"),
    ("kfps", 1.5, 1500.0, "fps"), ("k fps", 1.5, 1500.0, "fps"), ("Mfps", 0.25, 250_000.0, "fps"),
    ("frames/s", 81242.0, 81242.0, "fps"), ("frames/sec", 10.0, 10.0, "fps"), ("frame/s", 10.0, 10.0, "fps"),
    ("k frames/s", 12.5, 12_500.0, "fps"), ("kframes/s", 12.5, 12_500.0, "fps"),
    ("M frames/s", 0.2, 200_000.0, "fps"),
    ("events/s", 980.0, 980.0, "fps"), ("k events/s", 15.0, 15_000.0, "fps"), ("M events/s", 1.2, 1_200_000.0, "fps"),
    ("Hz", 120.0, 120.0, "fps"), ("hz", 120.0, 120.0, "fps"),
    ("kHz", 71.87, 71_870.0, "fps"), ("KHz", 15.0, 15_000.0, "fps"), ("MHz", 1.2, 1_200_000.0, "fps"),
    ("B/s", 2_000_000_000.0, 2.0, "GB/s"), ("kB/s", 500_000.0, 0.5, "GB/s"), ("MB/s", 420.0, 0.42, "GB/s"),
    ("GB/s", 25.997, 25.997, "GB/s"), ("TB/s", 1.5, 1500.0, "GB/s"),
    ("KiB/s", 1000.0, 1.024e-3, "GB/s"),  # 1000 x 1024 B/s
    ("MiB/s", 1000.0, 1.048576, "GB/s"),  # 1000 x 1,048,576 B/s
    ("GiB/s", 2.0, 2.147483648, "GB/s"),  # 2 x 1,073,741,824 B/s
    ("ms/frame", 0.022, 1000 / 0.022, "fps"), ("us/frame", 12.5, 80_000.0, "fps"),
    ("µs/frame", 8.0, 125_000.0, "fps"), ("ms/event", 4.0, 250.0, "fps"),
]


@pytest.mark.parametrize(("unit", "value", "expected", "metric"), UNIT_CASES)
def test_every_unit_after_the_number(unit: str, value: float, expected: float, metric: str) -> None:
    line = f"rate: {value:g} {unit} (overall)"
    r = read_figure(f"warming up\n{line}\n", re.compile(r"rate: ([0-9.e+]+)"))
    assert r is not None and r.value == value and r.metric == metric
    assert r.converted == pytest.approx(expected, rel=1e-12)
    # the same as --rate-unit, where the program prints no unit
    given = read_figure(f"rate: {value:g}\n", re.compile(r"rate: ([0-9.e+]+)"), unit)
    assert given.converted == pytest.approx(expected, rel=1e-12) and given.unit == r.unit


def test_the_lcls_daq_rate_in_khz() -> None:
    """The DAQ prints `rate: 71.87 kHz`; a regex that spells the unit itself must give 71,870 FPS."""
    r = read_figure("evt 1\nrate: 71.87 kHz\n", re.compile(r"rate: ([0-9.]+) kHz"))
    assert r == Reading(71.87, "kHz", "rate: 71.87 kHz")
    assert r.converted == pytest.approx(71_870.0) and r.metric == "fps"
    assert r.conversion == "71.87 kHz = 71,870 FPS (× 1000)"
    assert read_figure("rate: 2 GiB/s\n", re.compile(r"rate: ([0-9]+)")).conversion == "2 GiB/s = 2.15 GB/s (× 1.07374)"
    assert read_figure("rate: 2 frames/s\n", re.compile(r"rate: ([0-9]+)")).conversion == ""  # nothing converted


@pytest.mark.parametrize("printed", ["mHz", "Gb/s", "gb/s", "frames", "furlongs/s", "mfps"])
def test_an_unknown_unit_lists_the_known_ones_and_suggests_rate_unit(printed: str) -> None:
    with pytest.raises(ValueError) as err:
        read_figure(f"rate: 71.87 {printed}\n", re.compile(r"rate: ([0-9.]+)"))
    msg = str(err.value)
    assert f"prints {printed!r} after 71.87, a unit probe does not know" in msg
    assert "kHz" in msg and "GiB/s" in msg and "ms/frame" in msg and "--rate-unit" in msg
    assert parse_unit(printed) is None


def test_a_unit_is_not_read_out_of_a_longer_word() -> None:
    with pytest.raises(ValueError, match="'fpsx'"):
        read_figure("rate: 3 fpsx\n", re.compile(r"rate: ([0-9]+)"))
    with pytest.raises(ValueError, match="prints no unit after 3"):
        read_figure("rate: 3 (avg)\n", re.compile(r"rate: ([0-9]+)"))


def test_wall_between_markers() -> None:
    assert wall_between((1.0, 5.0), (0.5, 3.5, 9.0)) == 2.5  # the first end after the first start
    assert wall_between((), (1.0,)) is None and wall_between((2.0,), (1.0,)) is None


# ----------------------------------------------------------------------------- the rate check


def trace(frames=1000, window_ms=10.0, h2d_bytes=320_000_000, idle=0.1, groups=1) -> TraceRate:
    return TraceRate(frames, "1,000 launches of calib", int(window_ms * 1e6), "GPU activity span", h2d_bytes, idle,
                     groups)


def test_a_traced_rate_within_ten_per_cent_agrees() -> None:
    # 1000 frames over 10 ms: 100,000 frames/s; the program printed 104,000 in that same traced run
    c = check_rate(Reading(104_000.0, "fps", "rate: 104000 frames/s"), (125_000.0,), "fps", trace())
    assert (c.status, c.reason) == ("agree", "within_tolerance")
    assert c.trace == pytest.approx(100_000.0) and c.ratio == pytest.approx(1.04) and c.tolerance == 0.10
    assert c.profiler_overhead == pytest.approx(125_000 / 104_000)  # its own untraced over traced
    assert "+4.0 %, within ±10 %" in c.message and "so the profiler slowed it 1.20×" in c.message


def test_a_rate_ten_times_the_link_disagrees_with_both_figures_named() -> None:
    # 320 MB of H2D in 10 ms is 32 GB/s; the program says 320 GB/s
    c = check_rate(Reading(320.0, "GB/s", "throughput: 320 GB/s"), (), "GB/s", trace())
    assert (c.status, c.reason) == ("disagree", "program_higher") and c.ratio == pytest.approx(10.0)
    assert c.message.startswith("the program reports 320.00 GB/s; the trace moved 32.00 GB/s of H2D over its window")
    assert "10.00× the trace's, beyond ±10 %" in c.message


def test_noise_widens_the_band_and_an_idle_window_gets_the_caveat() -> None:
    # untraced runs of 80,000 to 120,000 (half range 20 % of the median): the band is 2 x 20 % = 40 %
    c = check_rate(Reading(130_000.0, "fps", "r"), (80_000.0, 100_000.0, 120_000.0), "fps", trace())
    assert c.status == "agree" and c.tolerance == pytest.approx(0.4)
    far = check_rate(Reading(300_000.0, "fps", "r"), (), "fps", trace(idle=0.8))
    assert far.status == "disagree" and "The GPU is idle 80 % of the window" in far.message


def test_without_a_traced_line_the_untraced_rate_may_run_faster_by_the_allowance() -> None:
    # untraced 140,000 against 100,000 in the trace: within +10 % and the 50 % profiler allowance
    assert check_rate(None, (140_000.0,), "fps", trace()).status == "agree"
    assert check_rate(None, (200_000.0,), "fps", trace()).status == "disagree"  # 2.0 > 1.1 x 1.5
    assert check_rate(None, (85_000.0,), "fps", trace()).status == "disagree"  # below 1 / 1.1


@pytest.mark.parametrize("args, reason", [
    ((Reading(1.0, "fps", "r"), (), "fps", None), "no_trace"),
    ((Reading(1.0, "fps", "r"), (), "fps", trace(groups=2)), "several_processes"),
    ((Reading(1.0, "fps", "r"), (), "fps", trace(frames=None)), "no_trace_figure"),
    ((None, (), "fps", trace()), "no_program_figure"),
])
def test_what_cannot_be_checked_says_why(args, reason) -> None:
    c = check_rate(*args)
    assert (c.status, c.reason) == ("unchecked", reason) and c.message.startswith("the rate was not checked")


def test_the_kernel_time_band_is_ten_per_cent_or_half_a_microsecond() -> None:
    assert check_kernel_time(3.4, "its line", 3.0).status == "agree"  # within 0.5 µs (10 % is 0.3)
    assert check_kernel_time(33.0, "its line", 30.0).status == "agree"  # within 10 % = 3 µs
    assert check_kernel_time(34.0, "its line", 30.0).reason == "events_longer"
    assert check_kernel_time(2.0, "its line", 3.0).reason == "events_shorter"
    assert check_kernel_time(None, "its output", 3.0).reason == "no_program_figure"
    assert check_kernel_time(2.0, "its line", None).reason == "no_kernel_bar"


def test_a_check_round_trips_and_refuses_another_version() -> None:
    from clusterbench.run.checks import FigureCheck

    c = check_rate(Reading(104_000.0, "fps", "r"), (125_000.0,), "fps", trace())
    assert FigureCheck.from_json(c.to_json()) == c
    with pytest.raises(ValueError, match="version 2"):
        FigureCheck.from_json({**c.to_json(), "version": 2})
