"""The clock verdict: did the SM clocks reach their steady value during the pass?"""

from __future__ import annotations

import pytest

from clusterbench.run.clocks import ClockSample, judge_clocks


def samples(start: float, mhz: list[int], step: float = 0.02) -> tuple[ClockSample, ...]:
    return tuple(ClockSample(start + i * step, m) for i, m in enumerate(mhz))


def test_ramped_pass_has_no_warning() -> None:
    # 0.5 s pass at t = [10.0, 10.5]; idle clocks before it are ignored
    s = samples(9.0, [345] * 10) + samples(10.0, [1980, 1965, 1980, 1980, 1950])
    v = judge_clocks(s, 10.0, 10.5, 1980, frames=20000)
    assert v.ramped is True and v.warning is None
    assert (v.samples, v.min_mhz, v.max_mhz, v.median_mhz) == (5, 1950, 1980, 1980.0)
    assert v.pass_s == pytest.approx(0.5)


def test_low_median_warns_with_the_numbers() -> None:
    s = samples(10.0, [900, 1200, 1500, 1700, 1980])  # median 1500 < 0.9 * 1980 = 1782
    v = judge_clocks(s, 10.0, 10.5, 1980, frames=20000)
    assert v.ramped is False
    assert "1500 MHz (median) of 1980 MHz max" in v.warning
    assert "--frames 20000" in v.warning and v.hint


def test_a_short_pass_at_full_clock_is_not_warned_about() -> None:
    # make run's 3x3_s4 on the H200: a 51.5 ms pass, SM clock 1980 of 1980 MHz throughout: the clocks
    # had settled, so no clock warning (its few launches per stream are the config's own warning)
    s = samples(10.0, [1980, 1980, 1980])
    v = judge_clocks(s, 10.0, 10.0515, 1980, frames=8000)
    assert v.ramped is True and v.warning is None and v.samples == 3


def test_a_pass_shorter_than_a_sample_at_low_clock_names_the_pass_length() -> None:
    # no sample inside the 12 ms pass; the one just before it read 900 of 1980 MHz
    s = (ClockSample(9.99, 900), ClockSample(10.03, 1980))
    v = judge_clocks(s, 10.0, 10.012, 1980, frames=2000)
    assert v.ramped is False and v.samples == 1
    assert "read 900 of 1980 MHz max just before the pass with --frames 2000" in v.warning
    assert "lasted 12.0 ms, less than NVML's 20 ms clock sample" in v.warning


def test_pass_between_samples_uses_the_last_sample_before_its_end() -> None:
    s = (ClockSample(1.0, 800), ClockSample(2.0, 1900))
    v = judge_clocks(s, 1.2, 1.25, 1980)
    assert v.samples == 1 and v.median_mhz == 800.0


def test_without_max_clock_the_highest_sample_is_the_reference() -> None:
    s = samples(0.0, [1000, 1000, 1000, 2000])
    v = judge_clocks(s, 0.0, 0.041, None)  # window holds the three 1000 MHz samples
    v2 = judge_clocks(s, 0.0, 0.5, None)
    assert v.ramped is False and v2.samples == 4
    assert v2.ramped is False and "1000 MHz (median) of 2000 MHz max" in v2.warning


def test_nothing_measured_is_none_not_a_verdict() -> None:
    v = judge_clocks((), None, None, None)
    assert v.ramped is None and v.warning is None and v.samples == 0
    assert v.to_json()["ramped"] is None
