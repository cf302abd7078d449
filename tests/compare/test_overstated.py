"""A trace bar that overstates its cost (compare/overstated.py): the bar that binds a side whose sustained FPS
stands above it beyond the noise (and that side's roofline) is judged from as measured to that bar cut to
the untraced frame, the change nearest 0 %. Every expected value is worked out in the comments from the rule.

The figures are those of an A/A pair of make run's 3x3 4-stream config on one H100 unit (GPU-82ba4b92), two
minutes apart: H2D bar 7.25 -> 6.37 µs per frame, sustained FPS 153,961 -> 155,934.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.compare.compare import EndToEnd, Reason, Verdict, compare_metric, compare_results
from clusterbench.compare.floors import pair_diffs
from clusterbench.compare.noise import NoiseFloor
from clusterbench.compare.overstated import Overstated, judged_range, overstated
from clusterbench.io.results import load_results
from clusterbench.model.results import ResultRow, RowKey, RowRole
from clusterbench.render.compare import render_compare_json, render_compare_text

from results_data import unit, write

ENV = {"gpu_name": "NVIDIA H200", "driver": "580.65", "git_dirty": False, "git_rev": "abc1234"}


def _r(roof: float, fps: float | None, binds: str = "h2d", spread: float | None = None, role: RowRole | None = None,
       processes: int | None = None, d2h: float = 2.6) -> ResultRow:
    key = RowKey("3x3_s4", None, role, None)
    return ResultRow(key, cluster=3, cap=3000, streams=4, batch=200, frames=8000, kernel_us=0.45,
                     h2d_us=roof if binds == "h2d" else 1.0, d2h_us=d2h if binds != "d2h" else roof,
                     roofline_us=roof, binds=binds, sustained_fps=fps, sustained_fps_spread=spread,
                     processes=processes, pedestal_dtype="float32")


def test_the_excess_of_a_bar_by_hand() -> None:
    # 7.25 µs x 153,961 FPS / 1e6 = 1.11621725: the bar lasts 11.6 % longer than the untraced frame (6.4952 µs),
    # beyond the 2 % noise (the spread 1,644.6 FPS is 1.07 % of the FPS)
    assert _r(7.25, 153_961.0, spread=1_644.6).bar_excess() == pytest.approx(1.11621725)
    # 6.50 µs x 153,961 = 1.0007: within the noise
    assert _r(6.50, 153_961.0).bar_excess() is None
    # 6.60 x 153,961 = 1.01614: below 2 %; with 7.0 x 153,961 = 1.07773 beyond 2 %, but a spread of 20,000 FPS
    # (12.99 %) makes the noise 12.99 %
    assert _r(6.60, 153_961.0).bar_excess() is None
    assert _r(7.0, 153_961.0).bar_excess() == pytest.approx(1.077727)
    assert _r(7.0, 153_961.0, spread=20_000.0).bar_excess() is None
    # the host's bar is the profiler's to inflate; a node's aggregate and several processes sum other frames
    assert _r(7.25, 153_961.0, binds="host").bar_excess() is None
    assert _r(7.25, 153_961.0, role=RowRole.AGGREGATE).bar_excess() is None
    assert _r(7.25, 153_961.0, processes=2).bar_excess() is None
    assert _r(7.25, None).bar_excess() is None


def test_which_figures_the_excess_applies_to() -> None:
    before, after = _r(7.25, 153_961.0), _r(6.37, 155_934.0)  # after: 6.37 x 155,934 = 0.99330, not overstated
    for metric in ("h2d_us", "roofline_us"):
        o = overstated(metric, before, after)
        assert o is not None and (o.before, o.after) == (pytest.approx(1.11621725), 1.0)
    # the other bars and sustained FPS are judged as measured
    assert overstated("d2h_us", before, after) is None
    assert overstated("kernel_us", before, after) is None
    assert overstated("sustained_fps", before, after) is None
    # a side that binds on D2H: its D2H bar and its roofline
    d2h = _r(11.5, 89_507.0, binds="d2h")  # 11.5 x 89,507 = 1.02933: beyond 2 %
    assert overstated("d2h_us", d2h, _r(11.0, 89_611.0, binds="d2h")).before == pytest.approx(1.0293305)
    assert overstated("h2d_us", d2h, _r(11.0, 89_611.0, binds="d2h")) is None


def test_the_range_and_the_change_judged_by_hand() -> None:
    o = Overstated(1.11621725, 1.0)
    # before 7.25 overstated: 6.37 / 7.25 = 0.8786207 as measured; cut to its untraced frame 7.25 / 1.11621725 =
    # 6.49512: 6.37 / 6.49512 = 0.9807316 (= 6.37 x 153,961 / 1e6). Nearest 1: 0.9807316, -1.92684 %
    lo, hi, judged = judged_range(7.25, 6.37, None, o)
    assert (lo, hi, judged) == (pytest.approx(0.8786207), pytest.approx(0.9807316), pytest.approx(0.9807316))
    m = compare_metric("h2d_us", 7.25, 6.37, streams=4, floor=NoiseFloor("h2d_us", True, 11.0, "test"), scope="same_unit",
                       over=o)
    assert (m.verdict, m.code) == (Verdict.SAME, Reason.WITHIN_NOISE)
    assert m.delta_pct == pytest.approx(-12.1379, abs=1e-3) and m.change_pct == pytest.approx(-1.92684, abs=1e-4)
    assert "-12.14 % to -1.93 %, judged -1.93 % (the end nearest 0 %)" in m.reason
    # as measured the same pair is beyond the 11 % floor: FASTER
    m = compare_metric("h2d_us", 7.25, 6.37, streams=4, floor=NoiseFloor("h2d_us", True, 11.0, "test"), scope="same_unit")
    assert m.verdict is Verdict.FASTER
    # an overstated before never hides a slowdown: 7.25 -> 8.5 is 1.1724138 as measured, 1.3087 cut: judged
    # +17.24 % (the end nearest 0), SLOWER
    m = compare_metric("h2d_us", 7.25, 8.5, streams=4, floor=NoiseFloor("h2d_us", True, 11.0, "test"), scope="same_unit",
                       over=o)
    assert m.verdict is Verdict.SLOWER and m.change_pct == pytest.approx(17.24138, abs=1e-4)
    # an overstated after explains a slowdown away: 6.37 -> 7.25 is 1.1381476 as measured, / 1.11621725 =
    # 1.0196470 cut: +1.96 %, within a 5.5 % floor
    m = compare_metric("h2d_us", 6.37, 7.25, streams=4, floor=NoiseFloor("h2d_us", True, 5.5, "test"), scope="same_unit",
                       over=Overstated(1.0, 1.11621725))
    assert m.verdict is Verdict.SAME and m.change_pct == pytest.approx(1.96470, abs=1e-4)
    # a range that holds 0: before overstated by 1.2, 7.25 -> 6.37 runs 0.87862 to 1.05434: judged 0 %
    assert judged_range(7.25, 6.37, None, Overstated(1.2, 1.0))[2] == 1.0


def _row(h2d: float, procs: list) -> dict:
    return {"label": "3x3_s4", "cluster": 3, "cap": 3000, "streams": 4, "batch": 200, "frames": 8000,
            "kernel_us": 0.45, "h2d_us": h2d, "d2h_us": 2.6, "roofline_us": h2d, "binds": "h2d",
            "pedestal_dtype": "float32", "pedestal": "frozen", "transfer": "copy", "tracer": "nsys",
            "processes": procs}


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    # processes: medians 153,961 (range 4,700 = 3.05 %) and 155,934 (range 600): sustained +1.2814 %, within
    # 1.5 x 3.05 %
    b = write(tmp_path / "b", [_row(7.25, [[153_961.0], [149_500.0], [154_200.0]])],
              {**ENV, "session_id": "S1", "gpu_uuid": "GPU-1111", "unit": unit("GPU-1111")})
    a = write(tmp_path / "a", [_row(6.37, [[155_934.0], [155_500.0], [156_100.0]])],
              {**ENV, "session_id": "S2", "gpu_uuid": "GPU-1111", "unit": unit("GPU-1111")})
    return b, a


def test_an_aa_pair_whose_first_trace_ran_slow_reads_same(tmp_path: Path) -> None:
    b, a = _dirs(tmp_path)
    c = compare_results(load_results(b), load_results(a))
    row = c.rows[0]
    h2d, roof = row.metric("h2d_us"), row.metric("roofline_us")
    for m in (h2d, roof):
        # 6.37 x 153,961 / 1e6 - 1 = -1.92684 %, within any floor; as measured -12.14 %
        assert m.verdict is Verdict.SAME and m.change_pct == pytest.approx(-1.92684, abs=1e-4)
        assert m.overstated is not None and m.overstated.before == pytest.approx(1.11621725)
    assert row.metric("d2h_us").overstated is None and row.metric("sustained_fps").overstated is None
    assert row.end_to_end is EndToEnd.SAME
    lines = render_compare_text(c, 80)
    assert max(map(len, lines)) <= 80
    assert "the before side's H2D bar lasts 1.116 × its untraced frame (sustained 153,961 FPS)" in " ".join(
        " ".join(lines).split())
    doc = render_compare_json(c)
    h = doc["rows"][0]["metrics"]["h2d_us"]
    assert h["overstated"] == {"before_factor": pytest.approx(1.11621725), "after_factor": 1.0,
                               "engine_before": "h2d", "engine_after": "h2d"}
    assert h["judged_delta_pct"] == pytest.approx(-1.92684, abs=1e-4)
    assert doc["rows"][0]["metrics"]["d2h_us"]["overstated"] is None


def test_the_floors_count_the_change_compare_judges(tmp_path: Path) -> None:
    b, a = _dirs(tmp_path)
    diffs = {d.metric: d.diff_pct for d in pair_diffs([load_results(b), load_results(a)])}
    assert diffs["h2d_us"] == pytest.approx(-1.92684, abs=1e-4)
    assert diffs["roofline_us"] == pytest.approx(-1.92684, abs=1e-4)
    assert diffs["d2h_us"] == pytest.approx(0.0)
    assert diffs["kernel_us"] == pytest.approx(0.0)
