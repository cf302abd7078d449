"""analysis.noise: the floor rule, the noise a change must clear, and the A/A session spread."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.compare.noise import (
    COMPARED_METRICS,
    FLOORS,
    NoiseFloor,
    floor_for,
    noise_of,
    pair_diffs_pct,
    session_spreads,
    suggest_floor_pct,
    suggest_floors,
)
from clusterbench.io.results import load_results

from results_data import write


def test_every_compared_metric_has_a_floor_for_both_stream_classes() -> None:
    for m in COMPARED_METRICS:
        for multi in (False, True):
            f = FLOORS[(m, multi)]
            assert f.pct > 0 and f.source
    assert floor_for("h2d_us", 1) is FLOORS[("h2d_us", False)]
    assert floor_for("h2d_us", 4) is FLOORS[("h2d_us", True)]
    assert floor_for("h2d_us", None) is FLOORS[("h2d_us", True)]  # unknown counts as several streams
    assert floor_for("efficiency", 1) is None


def test_trace_floors_are_at_least_the_1pct_reproducibility() -> None:
    for m in ("kernel_us", "h2d_us", "d2h_us", "roofline_us"):
        assert FLOORS[(m, False)].pct >= 1.0 and FLOORS[(m, True)].pct >= 1.0


def test_noise_is_the_larger_of_floor_and_spreads() -> None:
    f = NoiseFloor("sustained_fps", True, 7.0, "test")
    # 7 % of 150,000 = 10,500 FPS beats a 4,350 FPS spread
    assert noise_of(150_000.0, f, (4_350.0, 200.0)) == (pytest.approx(10_500.0), "floor")
    # a spread of 12,000 FPS beats the floor
    assert noise_of(150_000.0, f, (None, 12_000.0)) == (12_000.0, "spread")
    assert noise_of(10.0, None, (None, None)) == (None, "")
    assert noise_of(10.0, None, (0.3, None)) == (0.3, "spread")


@pytest.mark.parametrize(
    ("metric", "worst", "floor"),
    [
        ("sustained_fps", 4.55, 7.0),  # 1.5 x 4.55 = 6.825 -> next 0.5: 7.0
        ("sustained_fps", 0.30, 0.5),  # 0.45 -> at least 0.5
        ("sustained_fps", 1.00, 1.5),  # 1.5 exactly stays 1.5
        ("kernel_us", 0.40, 1.0),  # 0.6, but a trace figure clears at least 1 %
        ("h2d_us", 2.50, 4.0),  # 3.75 -> 4.0
    ],
)  # fmt: skip
def test_floor_rule(metric: str, worst: float, floor: float) -> None:
    assert suggest_floor_pct(metric, worst) == floor


def test_pair_diffs() -> None:
    # 100 -> 104: +4 %; 100 -> 101: +1 %; 104 -> 101: -3/104
    assert pair_diffs_pct([100.0, 104.0, 101.0]) == pytest.approx((4.0, 1.0, -3 / 104 * 100))


def _dir(path: Path, kernel: float, fps: float, reps: list[float], streams: int = 1) -> Path:
    return write(path, [{"label": "a", "cluster": 3, "cap": 3000, "streams": streams, "batch": 2000,
                         "frames": 20000, "kernel_us": kernel, "h2d_us": 5.0, "d2h_us": 2.0, "roofline_us": 5.0,
                         "binds": "h2d", "sustained_fps": fps, "samples": {"sustained_fps": reps}}],
                 {"gpu_name": "G"})


def test_session_spreads_of_three_sessions(tmp_path: Path) -> None:
    dirs = [
        load_results(_dir(tmp_path / "s1", 1.000, 100.0, [99.0, 100.0, 101.0])),
        load_results(_dir(tmp_path / "s2", 1.004, 104.0, [103.0, 104.0, 104.5])),
        load_results(_dir(tmp_path / "s3", 1.002, 101.0, [101.0, 101.0, 101.0])),
    ]
    by = {s.metric: s for s in session_spreads(dirs)}
    assert set(by) == set(COMPARED_METRICS)
    fps = by["sustained_fps"]
    assert fps.values == (100.0, 104.0, 101.0) and fps.max_diff_pct == pytest.approx(4.0)
    # within: s1 half-range 1 / median 100 = 1 %; s2 0.75 / 104 = 0.72 %; s3 0
    assert fps.within_pct == pytest.approx(1.0)
    k = by["kernel_us"]
    assert k.max_diff_pct == pytest.approx(0.4) and k.within_pct is None
    assert by["h2d_us"].max_diff_pct == 0.0
    floors = suggest_floors(session_spreads(dirs))
    assert floors[("sustained_fps", False)] == (pytest.approx(4.0), 6.0)  # 1.5 x 4 = 6.0
    assert floors[("kernel_us", False)] == (pytest.approx(0.4), 1.0)
    with pytest.raises(ValueError):
        session_spreads(dirs[:1])
