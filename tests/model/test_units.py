"""The one formatter: each kind's text worked out by hand."""

import math

import pytest

from clusterbench.model import units as U


def test_not_measured_is_one_glyph_for_every_kind():
    for f in (U.us, U.us_per_frame, U.ms, U.seconds, U.duration, U.fps, U.gbps, U.hz, U.size, U.mib, U.count,
              U.pct, U.pct_of, U.signed_pct, U.factor, U.times, U.plus_minus):
        assert f(None) == "–"
        assert f(float("nan")) == "–"
    assert U.metric("kernel_us", None) == "–"


def test_conversions():
    # 14,821,000 ns over 10,000 frames = 1.4821 µs/frame
    assert U.us_per_frame_of(14_821_000, 10_000) == pytest.approx(1.4821)
    assert U.us_per_frame_of(100, 0) is None and U.us_per_frame_of(None, 5) is None
    assert U.fps_of_us(5.792) == pytest.approx(172_651.93, rel=1e-6)
    assert U.fps_of_us(0) is None and U.fps_of_us(None) is None


def test_times():
    assert U.us(1.4821) == "1.482 µs"
    assert U.us_per_frame(5.7921) == "5.792 µs/frame"
    assert U.us_per_frame(5.7921, unit=False) == "5.792"
    assert U.ms(80_665_000) == "80.665 ms"
    assert U.ms(1_234_567_890) == "1,234.568 ms"
    assert U.ms(100_000, None) == "0.1 ms"  # a setting (a gap threshold) as given
    assert U.ms(5_000_000, None) == "5 ms"
    assert U.seconds(28.14) == "28.1 s"
    assert U.duration(850) == "850 ns"
    assert U.duration(2.5) == "2.5 ns"
    assert U.duration(0.0001) == "0.0001 ns"  # 1,000 ns over 10,000,000 frames
    assert U.duration(1) == "1 ns"
    assert U.duration(12_345) == "12.3 µs"
    assert U.duration(80_665_000) == "80.7 ms"
    assert U.duration(1_234_000_000) == "1.23 s"
    assert U.duration(456_000) == "456 µs"


def test_rates():
    assert U.fps(172_650.4) == "172,650 FPS"
    assert U.fps(12.345) == "12.3 FPS"
    assert U.fps(49_406, unit=False) == "49,406"
    assert U.gbps(55.246) == "55.25 GB/s"
    assert U.gbps(0.00412) == "0.00412 GB/s"
    assert U.hz(15_000) == "15.0 kHz"
    assert U.hz(71_870) == "71.9 kHz"
    assert U.hz(1_200_000) == "1.20 MHz"
    assert U.hz(850) == "850 Hz"


def test_sizes_and_counts():
    assert U.size(3_200_000_000) == "3.20 GB"
    assert U.size(320_000) == "320.00 kB"
    assert U.size(4) == "4 B"
    assert U.mib(472 * 2**20) == "472.0 MiB"
    assert U.count(10_000) == "10,000"


def test_shares_and_ratios():
    assert U.pct(0.286) == "28.6 %"
    assert U.pct(0.286, unit=False) == "28.6"
    assert U.pct_of(57.04) == "57.0 %"
    assert U.pct_of(5.0, None) == "5 %"  # a floor as written in the floors file
    assert U.pct_of(0.5, None) == "0.5 %"
    assert U.pct_of(None, None) == "–"
    assert U.signed_pct(-8.094) == "-8.09 %"
    assert U.signed_pct(1.2249) == "+1.22 %"
    assert U.signed_pct(918.6) == "+918.60 %"
    assert U.signed_pct(1234.4) == "+1,234 %"
    assert U.factor(3.906) == "×3.91"
    assert U.factor(250.2) == "×250"
    assert U.times(1.134) == "1.13×"
    # a noise band: 3 significant digits, whole numbers from 100 on
    assert U.plus_minus(0.029214, "µs/frame") == "±0.0292 µs/frame"
    assert U.plus_minus(1540.4, "FPS") == "±1,540 FPS"
    assert U.plus_minus(12.345, "FPS") == "±12.3 FPS"
    assert U.plus_minus(1234.5, "µs/frame") == "±1,234 µs/frame"  # not 1.23e+03
    assert U.plus_minus(0.5) == "±0.5"
    assert U.plus_minus(None, "FPS") == "–"


def test_metric_by_name():
    assert U.metric_unit("kernel_us") == "µs/frame"
    assert U.metric_unit("sustained_fps") == "FPS"
    assert U.metric_unit("h2d_gbps") == "GB/s"
    assert U.metric_unit("label") == ""
    assert U.metric("roofline_us", 5.7921) == "5.792 µs/frame"
    assert U.metric("sustained_fps", 153_852.2) == "153,852 FPS"
    assert U.metric("sustained_fps", 153_852.2, unit=False) == "153,852"
    assert U.metric("idle_pct", 1.62) == "1.6 %"
    assert not math.isnan(U.fps_of_us(1.0))
