"""analysis.compare: deltas, the noise model, reason codes, mismatches, sessions, end to end, the gate.

The RTX 4090 reference (docs/compare.md): kernel µs/frame before -> after 4.32 -> 4.65 (3x3 s1),
5.00 -> 5.64 (3x3 s4), 23.80 -> 15.29 (9x9 s1), 24.72 -> 15.59 (9x9 s4); roofline after and
binds after 13.13 H2D, 16.35 H2D, 22.00 D2H, 25.39 D2H. The table gives no transfer figures,
so tests/data/compare/ chooses them, identical before and after (the change touched the
kernel only): h2d/d2h = 13.13/6.20, 16.35/7.80, 13.40/22.00, 16.60/25.39 µs/frame. Hence the
before rooflines: 13.13 H2D, 16.35 H2D, 23.80 *kernel* (23.80 > 22.00 D2H), 25.39 D2H.
The same figures exist twice: as current-format dirs and as legacy aare-perf dirs.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from clusterbench.compare.compare import (
    EndToEnd,
    Presence,
    Reason,
    Verdict,
    compare_metric,
    compare_results,
    judge_gate,
)
from clusterbench.compare.floors import read_floors
from clusterbench.compare.noise import SEED_FLOORS, NoiseFloor
from clusterbench.errors import EnvironmentFailure, InputError
from clusterbench.io.results import load_results

from results_data import write

DATA = Path(__file__).resolve().parents[1] / "data" / "compare"
BEFORE = DATA / "2026-09-10_f32_before"
AFTER = DATA / "2026-09-10_f32_after"
LEGACY_BEFORE = DATA / "legacy_2026-09-10_before"
LEGACY_AFTER = DATA / "legacy_2026-09-10_after"
RESULTS = Path(__file__).resolve().parents[1] / "data" / "results"
# the H200 floors file as clusterbench floors wrote it from the committed A/A dirs (a copy of results/floors/)
H200_FLOORS = read_floors(RESULTS / "floors" / "NVIDIA_H200.json")

RTX_KERNEL = {  # label: (before, after, delta % worked out by hand)
    "3x3_s1_uncontended": (4.32, 4.65, 0.33 / 4.32 * 100),  # +7.64 %
    "3x3_s4": (5.00, 5.64, 0.64 / 5.00 * 100),  # +12.80 %
    "9x9_s1_uncontended": (23.80, 15.29, -8.51 / 23.80 * 100),  # -35.76 %
    "9x9_s4": (24.72, 15.59, -9.13 / 24.72 * 100),  # -36.93 %
}
RTX_ROOF_BINDS = {  # label: (roofline before, after, binds before, after)
    "3x3_s1_uncontended": (13.13, 13.13, "h2d", "h2d"),
    "3x3_s4": (16.35, 16.35, "h2d", "h2d"),
    "9x9_s1_uncontended": (23.80, 22.00, "kernel", "d2h"),
    "9x9_s4": (25.39, 25.39, "d2h", "d2h"),
}


@pytest.fixture(scope="module")
def rtx_current():
    return compare_results(load_results(BEFORE), load_results(AFTER))


@pytest.fixture(scope="module", params=["current", "legacy"])
def rtx(request):
    if request.param == "current":
        return compare_results(load_results(BEFORE), load_results(AFTER))
    return compare_results(load_results(LEGACY_BEFORE), load_results(LEGACY_AFTER))


# ----------------------------------------------------------------------------- RTX 4090 reference


def test_rtx4090_table_is_reproduced(rtx) -> None:
    assert [r.label for r in rtx.rows] == list(RTX_KERNEL)
    for label, (b, a, pct) in RTX_KERNEL.items():
        r = rtx.row(label)
        k = r.metric("kernel_us")
        assert (k.before, k.after) == (b, a)
        assert k.delta_pct == pytest.approx(pct, abs=1e-9)
        rb, ra, bb, ba = RTX_ROOF_BINDS[label]
        roof = r.metric("roofline_us")
        assert (roof.before, roof.after, r.binds_before, r.binds_after) == (rb, ra, bb, ba)
    assert round(rtx.row("3x3_s1_uncontended").metric("kernel_us").delta_pct, 2) == 7.64
    assert round(rtx.row("9x9_s4").metric("kernel_us").delta_pct, 2) == -36.93


def test_rtx4090_verdicts_without_repeats_use_the_default_bound(rtx) -> None:
    k = rtx.row("3x3_s1_uncontended").metric("kernel_us")
    # no floors file for the RTX 4090, no repeats: the default bound judges. No GPU UUID in these dirs and two
    # sessions: the pair counts as two units. The 1-stream kernel's across-units bound measured on the H200 (the
    # only model measured: compare/bounds.py) is 2 %; the RTX 4090 has no A/A runs of its own, so twice that,
    # 4 %: 0.04 * 4.32 = 0.1728 µs; +0.33 µs is beyond it
    assert k.verdict is Verdict.SLOWER and k.code is Reason.BEYOND_NOISE and k.noise == pytest.approx(0.1728)
    assert k.floor_pct == 4.0 and "4 % across-units default bound, provisional" in k.reason and k.provisional
    assert (k.pair_scope, k.floor_scope, k.floor_stand_in) == ("across_units", "across_units", None)
    assert rtx.row("9x9_s1_uncontended").metric("kernel_us").verdict is Verdict.FASTER
    h2d = rtx.row("3x3_s1_uncontended").metric("h2d_us")
    assert (h2d.verdict, h2d.code) == (Verdict.SAME, Reason.IDENTICAL)


def test_rtx4090_end_to_end(rtx) -> None:
    r = rtx.row("9x9_s1_uncontended")
    assert r.binds_changed
    roof = r.metric("roofline_us")
    assert roof.delta_pct == pytest.approx((22.00 - 23.80) / 23.80 * 100)  # -7.56 %
    assert roof.verdict is Verdict.FASTER
    assert r.end_to_end is EndToEnd.FASTER and not r.kernel_invisible
    assert "roofline -7.56 % FASTER" in r.end_to_end_reason
    assert any("kernel -> D2H" in n for n in r.notes)
    # 3x3: the kernel moved beyond noise, the roofline did not (sustained not measured): the real "invisible"
    s1 = rtx.row("3x3_s1_uncontended")
    assert s1.kernel_invisible and s1.end_to_end is EndToEnd.SAME
    assert "kernel change +7.64 % SLOWER invisible end to end (binds: H2D)" in s1.end_to_end_reason
    # s4 rows: the D2H bar and so the roofline are the same figures before and after (25.39 µs/frame): identical,
    # SAME, whatever the drift bound says of two sessions; so the kernel change is invisible there too
    s4 = rtx.row("9x9_s4")
    assert s4.metric("roofline_us").code is Reason.IDENTICAL
    assert s4.kernel_invisible and s4.end_to_end is EndToEnd.SAME
    assert "kernel change -36.93 % FASTER invisible end to end (binds: D2H)" in s4.end_to_end_reason


def test_rtx4090_multi_stream_rows_across_sessions(rtx) -> None:
    # no floors file for the RTX 4090: the default bounds judge, and the seed's 20 % drift bound holds the 4-stream
    # transfers of two sessions whose links were not measured; but these transfers are the same figures before
    # and after (the change touched the kernel only): identical values are SAME, before any bound
    assert not rtx.same_session
    assert [fs.seed for fs in rtx.floors] == [True] and rtx.floors[0].gpu_name == "NVIDIA GeForce RTX 4090"
    assert any(w.message.startswith("no floors file for NVIDIA GeForce RTX 4090") for w in rtx.warnings)
    s4 = rtx.row("3x3_s4")
    for name in ("h2d_us", "d2h_us", "roofline_us"):
        m = s4.metric(name)
        assert (m.verdict, m.code, m.bound_pct, m.delta_pct) == (Verdict.SAME, Reason.IDENTICAL, None, 0.0)
    assert s4.metric("kernel_us").verdict is Verdict.SLOWER
    assert "quote kernel changes from the 1-stream row (3x3_s1_uncontended)" in s4.metric("kernel_us").note
    assert not any("NOT COMPARABLE" in w.message for w in rtx.warnings)
    gate = judge_gate(rtx, 5.0)
    # the RTX dirs measured no sustained FPS: the gate judged the rooflines alone, and says so; every roofline
    # is identical but 9x9 s1's (-7.56 %, FASTER), so nothing failed and nothing was left unjudged
    assert gate.metrics == ("roofline_us",) and gate.not_measured == ("sustained_fps",)
    assert gate.not_checked == () and gate.too_coarse == ()
    assert [lb for lb, _ in gate.judged] == list(RTX_KERNEL)
    assert gate.passed


def test_drift_is_a_bound_not_a_veto(tmp_path: Path) -> None:
    # 4 streams, two sessions: D2H 10 -> 11.9 (+19 %) is within the 20 % bound (2.0 µs/frame): NOT COMPARABLE;
    # 10 -> 12.1 (+21 %) is beyond it: SLOWER, marked cross-session, the bound named; the roofline binds on D2H
    def rows(d2h: float) -> list[dict]:
        return [_row("s4", 1.0, 6.0, d2h, streams=4)]

    within = _cmp(tmp_path / "w", rows(10.0), rows(11.9), env_b={"session_id": "T"}, floors=FLOORS)
    m = within.row("s4").metric("d2h_us")
    assert (m.verdict, m.code, m.noise, m.bound_pct) == (Verdict.NOT_COMPARABLE, Reason.SESSION_DRIFT,
                                                         pytest.approx(2.0), 20.0)
    beyond = _cmp(tmp_path / "b", rows(10.0), rows(12.1), env_b={"session_id": "T"}, floors=FLOORS)
    r = beyond.row("s4")
    for name in ("d2h_us", "roofline_us"):
        m = r.metric(name)
        assert (m.verdict, m.code, m.cross_session) == (Verdict.SLOWER, Reason.BEYOND_DRIFT, True)
        assert (m.noise, m.bound_pct, m.floor_pct) == (pytest.approx(2.0), 20.0, None)
        assert m.delta_pct == pytest.approx(21.0)
        assert m.reason == ("beyond the 20 % cross-session drift bound of multi-stream transfers (±2 µs/frame), "
                            "across two sessions")
    assert r.metric("h2d_us").code is Reason.IDENTICAL  # 6.0 -> 6.0: identical, whatever the bound
    assert r.end_to_end is EndToEnd.SLOWER
    assert [f.label for f in judge_gate(beyond, 5.0).failures] == ["s4"]  # a real regression fails the gate
    # one session: the 4.5 % multi-stream floor of the H200 file judges instead (0.45 µs/frame of 10)
    same = _cmp(tmp_path / "s", rows(10.0), rows(10.6), floors=FLOORS)
    m = same.row("s4").metric("d2h_us")
    assert (m.verdict, m.code, m.floor_pct, m.bound_pct) == (Verdict.SLOWER, Reason.BEYOND_NOISE, 4.5, None)
    assert m.noise == pytest.approx(0.45) and "4.5 % same-unit floor" in m.reason
    # one session, and the version 1 file holds same-unit floors only: the broader floor judges (safe), not marked
    assert (m.pair_scope, m.floor_scope, m.floor_stand_in) == ("within_session", "same_unit", "broader")
    assert not any("stand in" in w.message for w in same.warnings)


def test_legacy_dirs_warn_once_each() -> None:
    c = compare_results(load_results(LEGACY_BEFORE), load_results(LEGACY_AFTER))
    legacy = [w for w in c.warnings if "legacy aare-perf" in w.message]
    assert len(legacy) == 2
    assert legacy[0].message.startswith("legacy_2026-09-10_before is a legacy aare-perf results dir")
    assert c.before.gpu_name == "NVIDIA GeForce RTX 4090" and c.before.format == "legacy aare-perf"
    assert c.before.git_dirty is False and c.before.git_rev == "1a2b3c4"


def test_legacy_dir_against_an_h200_dir_is_refused() -> None:
    with pytest.raises(InputError, match="different GPUs: 'NVIDIA GeForce RTX 4090' .* 'NVIDIA H200'"):
        compare_results(load_results(LEGACY_BEFORE), load_results(RESULTS / "2026-11-29_f32"))
    c = compare_results(load_results(LEGACY_BEFORE), load_results(RESULTS / "2026-11-29_f32"),
                        allow_different_gpu=True)  # fmt: skip
    assert any("different GPUs" in w.message for w in c.warnings)


# ----------------------------------------------------------------------------- one metric


@pytest.mark.parametrize(
    ("before", "after", "sb", "sa", "verdict", "code"),
    [
        (10.0, 10.25, 0.1, 0.3, Verdict.SAME, Reason.WITHIN_NOISE),  # |0.25| <= max(1 % = 0.1, 0.1, 0.3)
        (10.0, 10.3, 0.1, 0.3, Verdict.SAME, Reason.WITHIN_NOISE),  # boundary: equal to the noise is within it
        (10.0, 10.5, 0.1, 0.3, Verdict.SLOWER, Reason.BEYOND_NOISE),
        (10.0, 9.5, 0.1, 0.3, Verdict.FASTER, Reason.BEYOND_NOISE),
        (10.0, 9.75, None, 0.05, Verdict.SAME, Reason.WITHIN_NOISE),  # 0.25 <= max(0.3 bound, 0.05)
        (10.0, 9.65, None, 0.05, Verdict.FASTER, Reason.BEYOND_NOISE),  # 0.35 > max(0.3 bound, 0.05)
        (10.0, 9.8, None, 0.05, Verdict.SAME, Reason.WITHIN_NOISE),  # 0.2 <= the 0.3 bound
        (10.0, 10.0, None, None, Verdict.SAME, Reason.IDENTICAL),
    ],
)  # fmt: skip
def test_time_metric_verdicts(before, after, sb, sa, verdict, code) -> None:
    m = compare_metric("kernel_us", before, after, streams=1, spread_before=sb, spread_after=sa)
    assert (m.verdict, m.code) == (verdict, code)
    assert m.delta_pct == pytest.approx((after - before) / before * 100)
    assert m.reason.endswith(")") or code is Reason.IDENTICAL


def test_never_faster_or_slower_from_the_sign_alone() -> None:
    # +0.4 % sustained FPS (1 stream) without repeats: the H200's 0.5 % floor (0.5 FPS of 100), and above it the
    # 1 % minimum effect (1 FPS), decide, not the sign
    m = compare_metric("sustained_fps", 100.0, 100.4, streams=1, floors=H200_FLOORS)
    assert (m.verdict, m.code, m.noise, m.floor_pct) == (Verdict.SAME, Reason.WITHIN_NOISE, pytest.approx(1.0), 0.5)
    assert m.noise_from == "min_effect" and "the 1 % minimum effect" in m.reason
    # +1.2 % on 4 streams is within the 1.5 % floor of several streams (1.5 FPS of 100)
    m = compare_metric("sustained_fps", 100.0, 101.2, streams=4, floors=H200_FLOORS)
    assert (m.verdict, m.noise) == (Verdict.SAME, pytest.approx(1.5))
    # without a floors file the default bound judges two sessions of one unit: on several streams the largest
    # A/A difference within one session or across sessions of one H200 unit made 1 % and 3 %, so 3 %, and twice
    # that on a model named by no A/A runs (SEED_FLOORS: no model): 6 % (6 FPS); +6.5 % is beyond it, provisional
    m = compare_metric("sustained_fps", 100.0, 106.5, streams=4, floors=SEED_FLOORS)
    assert (m.verdict, m.code, m.noise, m.floor_pct) == (Verdict.FASTER, Reason.BEYOND_NOISE, pytest.approx(6.0), 6.0)
    assert m.provisional and "6 % within-session default bound" not in m.reason
    # +6 % is not (equal to the noise is within it)
    assert compare_metric("sustained_fps", 100.0, 106.0, streams=4, floors=SEED_FLOORS).verdict is Verdict.SAME
    # with no floor at all one session still can: the spread of the repeats is its noise (half the range of
    # [99, 100, 101] = 1 FPS, which the 1 % minimum effect equals)
    m = compare_metric("sustained_fps", 100.0, 106.0, streams=4, floor=None, same_session=True,
                       samples_before=[99.0, 100.0, 101.0], samples_after=[105.0, 106.0, 107.0])
    assert (m.verdict, m.code, m.noise, m.noise_from) == (Verdict.FASTER, Reason.SIGNIFICANT, 1.0, "spread")
    assert m.floor_pct is None and "one session, no floor" in m.reason
    # a metric no floors file knows is never judged across sessions
    assert compare_metric("efficiency", 0.5, 0.6, streams=1).code is Reason.NO_FLOOR


def test_aa_false_faster_of_the_issue_is_same() -> None:
    # The issue's A/A: 3x3_s4 sustained +4.55 % called FASTER "beyond noise ±4.37e+03". Before: median
    # 150,000, half-range 4,350 (±2.9 %); after: median 156,825 (+4.55 %), every repeat above every
    # before repeat, so the 95 % bootstrap interval (3 vs 3: [min(after) / max(before), max(after) /
    # min(before)] = [156,600 / 154,700, 157,000 / 146,000] = [1.0123, 1.0753]) excludes 1. The
    # noise is max(7 % of 150,000 = 10,500, 4,350) FPS and 6,825 < 10,500: SAME, small effect. (7 %: the floor
    # that A/A pair makes by the floor rule, 1.5 x 4.55 = 6.8 -> 7 %; its dirs were not kept, so the H200 file made
    # of the committed A/A dirs holds 1.5 %.)
    before, after = [146_000.0, 150_000.0, 154_700.0], [156_600.0, 156_825.0, 157_000.0]
    pair = NoiseFloor("sustained_fps", True, 7.0, "the first A/A pair: 1.5 x 4.55 % -> 7 %")
    m = compare_metric("sustained_fps", 150_000.0, 156_825.0, streams=4, spread_before=4_350.0, spread_after=200.0,
                       samples_before=before, samples_after=after, floor=pair)  # fmt: skip
    assert m.delta_pct == pytest.approx(4.55)
    assert (m.verdict, m.code) == (Verdict.SAME, Reason.SMALL_EFFECT)
    assert m.interval.low == pytest.approx(156_600 / 154_700) and m.interval.high == pytest.approx(157_000 / 146_000)
    assert m.noise == pytest.approx(10_500.0)
    assert (m.n_before, m.n_after) == (3, 3)
    # 3x3_s1 +0.08 % "beyond noise ±40.9 FPS": the 0.5 % floor is 556.415 FPS, the 1 % minimum effect 1,112.83
    m1 = compare_metric("sustained_fps", 111_283.0, 111_372.0, streams=1, spread_before=40.9, spread_after=10.0,
                        floors=H200_FLOORS, samples_before=[111_250.0, 111_283.0, 111_331.8], samples_after=[111_360.0, 111_372.0, 111_380.0])  # fmt: skip
    assert (m1.verdict, m1.code) == (Verdict.SAME, Reason.SMALL_EFFECT)
    assert m1.noise == pytest.approx(1_112.83)


def test_repeats_need_significance_and_effect() -> None:
    # after [90, 140, 170] vs before [100, 130, 160]: the 95 % interval of the ratio of medians is
    # [90 / 160, 170 / 100] = [0.5625, 1.7], which holds 1. The medians differ by 10 FPS, far beyond the 0.5 % floor
    # (0.65 FPS), yet the samples overlap: SAME, not significant
    m = compare_metric("sustained_fps", 130.0, 140.0, streams=1, floors=H200_FLOORS, samples_before=[100.0, 130.0, 160.0],
                       samples_after=[90.0, 140.0, 170.0])  # fmt: skip
    assert (m.verdict, m.code) == (Verdict.SAME, Reason.NOT_SIGNIFICANT)
    assert (m.interval.low, m.interval.high) == (90 / 160, 170 / 100)
    assert ("the 95 % bootstrap interval of the change of the medians, -43.75 % to +70.00 % (3 vs 3 repeats), "
            "holds 0 %") in m.reason
    # separated and beyond the floor: 100 -> 120 FPS (+20 %): [119 / 101, 121 / 99] = [1.178, 1.222] excludes 1
    m = compare_metric("sustained_fps", 100.0, 120.0, streams=1, floors=H200_FLOORS, samples_before=[99.0, 100.0, 101.0],
                       samples_after=[119.0, 120.0, 121.0])  # fmt: skip
    assert (m.verdict, m.code) == (Verdict.FASTER, Reason.SIGNIFICANT)
    assert m.interval.low == pytest.approx(119 / 101) and m.interval.high == pytest.approx(121 / 99)
    # one repeat of each side overlapping the other's range: [99, 100, 110] against [105, 111, 112] gives
    # [105 / 110, 112 / 99] = [0.955, 1.131], which holds 1, though the medians moved +11 %: not significant
    m = compare_metric("sustained_fps", 100.0, 111.0, streams=1, floors=H200_FLOORS, samples_before=[99.0, 100.0, 110.0],
                       samples_after=[105.0, 111.0, 112.0])  # fmt: skip
    assert (m.verdict, m.code) == (Verdict.SAME, Reason.NOT_SIGNIFICANT)
    # 5 repeats a side close in on the medians: the same kind of overlap ([99, 100, 100.5, 101, 110] against
    # [105, 110.5, 111, 111.5, 112]) now excludes 1: its corners hold only (0.058)^2 of the resamples
    m = compare_metric("sustained_fps", 100.5, 111.0, streams=1, floors=H200_FLOORS,
                       samples_before=[99.0, 100.0, 100.5, 101.0, 110.0],
                       samples_after=[105.0, 110.5, 111.0, 111.5, 112.0])  # fmt: skip
    assert (m.verdict, m.code) == (Verdict.FASTER, Reason.SIGNIFICANT) and m.interval.low > 1.0


def test_fps_higher_is_better() -> None:
    fl = NoiseFloor("sustained_fps", False, 1.0, "test")
    assert compare_metric("sustained_fps", 61400.0, 65000.0, floor=fl).verdict is Verdict.FASTER
    assert compare_metric("sustained_fps", 61400.0, 60000.0, floor=fl, spread_after=500.0).verdict is Verdict.SLOWER
    # 400 FPS is within max(614, 500)
    assert compare_metric("sustained_fps", 61400.0, 61000.0, floor=fl, spread_after=500.0).verdict is Verdict.SAME


def test_missing() -> None:
    m = compare_metric("h2d_us", None, 3.0)
    assert (m.verdict, m.code, m.reason, m.delta_pct) == (Verdict.MISSING, Reason.NOT_MEASURED, "not measured in before", None)


# ----------------------------------------------------------------------------- built dirs


def _row(label: str, kernel: float, h2d: float, d2h: float, *, streams: int = 1, cluster: int = 3,
         frames: int = 20000, **extra: object) -> dict:
    roof = max(kernel, h2d, d2h)
    binds = "kernel" if roof == kernel else ("h2d" if roof == h2d else "d2h")
    return {"label": label, "cluster": cluster, "cap": 3000, "streams": streams, "batch": 2000, "frames": frames,
            "kernel_us": kernel, "h2d_us": h2d, "d2h_us": d2h, "roofline_us": roof, "binds": binds,
            "pedestal_dtype": "float32", "pedestal": "frozen", "transfer": "copy", "tracer": "nsys",
            **extra}  # fmt: skip


def _make(path: Path, rows: list[dict], **env: object) -> Path:
    base = {"gpu_name": "NVIDIA H200", "driver": "580.65", "session_id": "S", "git_dirty": False,
            "git_rev": "abc1234", "pedestal_dtype": "float32", "pedestal": "frozen"}  # fmt: skip
    base.update(env)
    return write(path, rows, base)


FLOORS = {"NVIDIA H200": H200_FLOORS}


def _cmp(tmp_path: Path, rows_a: list[dict], rows_b: list[dict], env_a: dict | None = None,
         env_b: dict | None = None, **kw):
    """Two hand-made H200 dirs compared with the H200 floors file (as compare finds it for results/)."""
    a = _make(tmp_path / "a", rows_a, **(env_a or {}))
    b = _make(tmp_path / "b", rows_b, **(env_b or {}))
    kw.setdefault("floors", FLOORS)
    return compare_results(load_results(a), load_results(b), **kw)


def test_same_session_multi_stream_transfers_are_compared(tmp_path: Path) -> None:
    c = _cmp(tmp_path, [_row("s4", 5.0, 10.0, 4.0, streams=4)], [_row("s4", 5.0, 12.0, 4.0, streams=4)])
    m = c.row("s4").metric("h2d_us")
    # +20 % beyond the 4.5 % multi-stream floor of the H200 file (0.45 µs)
    assert c.same_session and m.verdict is Verdict.SLOWER and m.delta_pct == pytest.approx(20.0)
    assert m.noise == pytest.approx(0.45)


def test_row_session_column_overrides_env(tmp_path: Path) -> None:
    c = _cmp(tmp_path, [_row("s4", 5.0, 10.0, 4.0, streams=4, session="S")],
             [_row("s4", 5.0, 12.0, 4.0, streams=4, session="T")])  # fmt: skip
    assert c.row("s4").metric("h2d_us").code is Reason.SESSION_DRIFT


def test_one_sided_labels_are_kept(tmp_path: Path) -> None:
    c = _cmp(tmp_path, [_row("both", 4.0, 10.0, 3.0), _row("old", 4.0, 10.0, 3.0)],
             [_row("new", 5.0, 9.0, 3.0), _row("both", 4.0, 10.0, 3.0)])  # fmt: skip
    assert [(r.label, r.presence) for r in c.rows] == [
        ("both", Presence.BOTH), ("old", Presence.BEFORE_ONLY), ("new", Presence.AFTER_ONLY),
    ]  # fmt: skip
    old = c.row("old").metric("kernel_us")
    assert (old.before, old.after, old.verdict, old.code) == (4.0, None, Verdict.MISSING, Reason.ONE_SIDED)
    assert c.row("new").metric("h2d_us").reason == "only in after (b)"
    assert any("old, new" in w.message for w in c.warnings)


def test_tracer_difference_on_one_row_is_named_and_not_comparable(tmp_path: Path) -> None:
    # the issue: only the tracer changed, and H2D/roofline were called SLOWER (+1.34 %) without a word
    c = _cmp(tmp_path, [_row("x", 1.0, 5.7638, 2.17, sustained_fps=111_283.0), _row("y", 1.0, 5.0, 2.0)],
             [_row("x", 1.0, 5.8411, 2.18, tracer="cupti", sustained_fps=111_581.0), _row("y", 1.0, 5.0, 2.0)])  # fmt: skip
    x = c.row("x")
    assert [mm.text for mm in x.mismatches] == ["tracer differs: nsys → cupti"]
    for n in ("kernel_us", "h2d_us", "d2h_us", "roofline_us"):
        m = x.metric(n)
        assert (m.verdict, m.code, m.reason) == (Verdict.NOT_COMPARABLE, Reason.CONFIG_DIFFERS, "tracer differs: nsys → cupti")
    # sustained FPS runs untraced: the tracer does not touch it; +0.27 % is within its 0.5 % floor
    assert x.metric("sustained_fps").verdict is Verdict.SAME and not x.metric("sustained_fps").across
    assert c.row("y").mismatches == () and c.across == ()
    w = [w for w in c.warnings if w.message.startswith("tracer differs")]
    assert w and w[0].message == "tracer differs: nsys → cupti (x): trace figures NOT COMPARABLE"
    assert "--across tracer" in w[0].hint
    # the gate judged y only
    gate = judge_gate(c, 1.0)
    # x's roofline is across the tracer, but its sustained FPS (untraced) is like for like and gated
    assert gate.judged == (("x", "sustained_fps"), ("y", "roofline_us"))
    assert ("x", "roofline_us", "config_differs") in gate.not_checked
    # on purpose: --across tracer shows the deltas, labelled, and the gate still does not judge them
    c2 = compare_results(load_results(tmp_path / "a"), load_results(tmp_path / "b"), across=["tracer"], floors=FLOORS)
    h2d = c2.row("x").metric("h2d_us")
    assert h2d.verdict is Verdict.SLOWER and h2d.across == ("tracer",)
    assert h2d.delta_pct == pytest.approx((5.8411 - 5.7638) / 5.7638 * 100)  # +1.34 %
    assert c2.across == ("tracer",)
    assert judge_gate(c2, 1.0).judged == (("x", "sustained_fps"), ("y", "roofline_us"))


def test_whole_dir_difference_is_compared_across_automatically(tmp_path: Path) -> None:
    # copy against zerocopy under the same labels: D2H 2.34 -> 0.0001 µs (-99.996 %), labelled across transfer
    c = _cmp(tmp_path, [_row("a", 1.0, 6.26, 2.34, streams=4), _row("b", 1.6, 6.9, 10.7, streams=4)],
             [_row("a", 1.2, 5.94, 0.0001, streams=4, transfer="zerocopy"),
              _row("b", 2.3, 6.3, 0.0001, streams=4, transfer="zerocopy")])  # fmt: skip
    assert c.across == ("transfer",)
    d2h = c.row("a").metric("d2h_us")
    assert d2h.across == ("transfer",) and d2h.verdict is Verdict.FASTER
    assert d2h.delta_pct == pytest.approx((0.0001 - 2.34) / 2.34 * 100)
    assert any(w.message.startswith("comparing across transfer: copy → zerocopy (every row)") for w in c.warnings)
    assert judge_gate(c, 5.0).nothing_comparable


def test_workload_column_defaults_to_cupy(tmp_path: Path) -> None:
    c = _cmp(tmp_path, [_row("a", 1.0, 6.0, 2.0), _row("b", 1.0, 6.0, 2.0)],
             [_row("a", 1.0, 6.0, 2.0, workload="aare"), _row("b", 1.0, 6.0, 2.0)])  # fmt: skip
    assert [mm.text for mm in c.row("a").mismatches] == ["workload differs: cupy → aare"]
    assert c.row("a").metric("kernel_us").code is Reason.CONFIG_DIFFERS
    assert c.row("b").metric("kernel_us").code is Reason.IDENTICAL


def test_frames_and_shape_differences_are_not_compared_across_automatically(tmp_path: Path) -> None:
    c = _cmp(tmp_path, [_row("a", 4.0, 10.0, 3.0, frames=2000)], [_row("a", 4.0, 10.0, 3.0, frames=20000)])
    assert c.across == ()
    m = c.row("a").metric("kernel_us")
    assert (m.verdict, m.reason) == (Verdict.NOT_COMPARABLE, "frames differs: 2000 → 20000")
    w = next(w for w in c.warnings if w.message.startswith("frames differs"))
    assert "clocks" in w.hint
    c2 = compare_results(load_results(tmp_path / "a"), load_results(tmp_path / "b"), across=("frames",))
    assert c2.row("a").metric("kernel_us").verdict is Verdict.SAME and c2.across == ("frames",)
    # asking to compare across a column that does not differ changes nothing
    c3 = compare_results(load_results(tmp_path / "a"), load_results(tmp_path / "b"), across=("tracer",))
    assert c3.across == () and c3.row("a").metric("kernel_us").code is Reason.CONFIG_DIFFERS
    with pytest.raises(InputError, match="--across colour: not a config column"):
        compare_results(load_results(tmp_path / "a"), load_results(tmp_path / "b"), across=("colour",))


def test_pedestal_dtype_from_env_when_rows_lack_it(tmp_path: Path) -> None:
    ra, rb = _row("a", 1.0, 6.0, 2.0), _row("a", 1.2, 6.0, 4.0)
    for r in (ra, rb):
        del r["pedestal_dtype"]
    c = _cmp(tmp_path, [ra], [rb], env_b={"pedestal_dtype": "float64"})
    assert c.across == ("pedestal_dtype",)
    assert c.row("a").metric("kernel_us").across == ("pedestal_dtype",)


def test_kernel_change_within_noise(tmp_path: Path) -> None:
    c = _cmp(tmp_path, [_row("a", 20.0, 10.0, 3.0, kernel_us_spread=0.5)], [_row("a", 20.3, 10.0, 3.0)])
    k = c.row("a").metric("kernel_us")
    assert k.verdict is Verdict.SAME and k.noise == 0.5  # 0.5 spread beats the 0.2 floor
    assert not c.row("a").kernel_invisible


def test_invisible_only_when_roofline_and_sustained_did_not_move(tmp_path: Path) -> None:
    # kernel 1.0 -> 1.5 (beyond 1 %), roofline 6.26 -> 6.27 (+0.16 %, within 1 %), sustained +0.2 % (within 0.5 %)
    c = _cmp(tmp_path, [_row("a", 1.0, 6.26, 2.0, sustained_fps=150_000.0)],
             [_row("a", 1.5, 6.27, 2.0, sustained_fps=150_300.0)])  # fmt: skip
    r = c.row("a")
    assert r.kernel_invisible and r.end_to_end is EndToEnd.SAME
    assert "kernel change +50.00 % SLOWER invisible end to end (binds: H2D)" in r.end_to_end_reason
    # sustained fell 5 %: the kernel change is not called invisible any more
    c2 = _cmp(tmp_path / "2", [_row("a", 1.0, 6.26, 2.0, sustained_fps=150_000.0)],
              [_row("a", 1.5, 6.27, 2.0, sustained_fps=142_500.0)])  # fmt: skip
    r2 = c2.row("a")
    assert not r2.kernel_invisible and r2.end_to_end is EndToEnd.SLOWER
    assert "sustained -5.00 % SLOWER" in r2.end_to_end_reason


def _host_row(label: str, kernel: float, host: float, **extra: object) -> dict:
    """A row whose roofline binds on the host bar (a program as it is, the host-bound kind: its bars from a trace
    of the zoo's turn-taking program on an H200)."""
    r = _row(label, kernel, 8.42, 1.51, **extra)
    r.update(roofline_us=host, binds="host")
    return r


def test_a_roofline_on_the_host_bar_is_not_judged_and_sustained_judges_the_frame(tmp_path: Path) -> None:
    # the host bar moved +12.86 % (53.44 -> 60.31 µs, as rounded) between two A/A sessions of one H200 unit, sustained FPS
    # -0.47 % (12,214 -> 12,156): within its 1.5 % floor, the roofline not judged, end to end SAME
    c = _cmp(tmp_path, [_host_row("turns", 22.10, 53.44, sustained_fps=12_214.0)],
             [_host_row("turns", 22.10, 60.31, sustained_fps=12_156.0)])  # fmt: skip
    r = c.row("turns")
    roof = r.metric("roofline_us")
    assert roof.verdict is Verdict.NOT_COMPARABLE and roof.code is Reason.HOST_BOUND
    assert roof.delta_pct == pytest.approx((60.31 - 53.44) / 53.44 * 100.0)
    assert r.metric("sustained_fps").verdict is Verdict.SAME
    assert r.end_to_end is EndToEnd.SAME
    assert "roofline +12.86 % not judged (binds on the host" in r.end_to_end_reason  # 6.87 / 53.44
    gate = judge_gate(c, 3.0)
    assert not gate.failures and ("turns", "roofline_us", "host_bound") in gate.unjudged
    assert not judge_gate(c, 3.0, metrics=("sustained_fps",)).unjudged


def test_a_host_bound_frame_that_slowed_reads_slower_by_sustained_fps(tmp_path: Path) -> None:
    # sustained 12,214 -> 11,603 FPS is -5.00 %, beyond the floor: SLOWER end to end, whatever the host bar did
    c = _cmp(tmp_path, [_host_row("turns", 22.10, 53.44, sustained_fps=12_214.0)],
             [_host_row("turns", 26.20, 50.75, sustained_fps=11_603.3)])  # fmt: skip
    r = c.row("turns")
    assert r.metric("roofline_us").code is Reason.HOST_BOUND
    assert r.end_to_end is EndToEnd.SLOWER and not r.kernel_invisible
    assert [f.metric for f in judge_gate(c, 3.0).failures] == ["sustained_fps"]


def test_a_kernel_change_under_a_host_bound_frame_is_invisible_end_to_end(tmp_path: Path) -> None:
    # kernel 22.10 -> 26.20 µs (+18.6 %), sustained 12,214 -> 12,196 (-0.15 %): the host binds, the kernel is hidden
    c = _cmp(tmp_path, [_host_row("turns", 22.10, 53.44, sustained_fps=12_214.0)],
             [_host_row("turns", 26.20, 50.75, sustained_fps=12_196.0)])  # fmt: skip
    r = c.row("turns")
    assert r.metric("kernel_us").verdict is Verdict.SLOWER and r.end_to_end is EndToEnd.SAME
    assert r.kernel_invisible and "invisible end to end (binds: host)" in r.end_to_end_reason


def test_a_host_bound_roofline_on_one_side_or_without_sustained_fps(tmp_path: Path) -> None:
    # the binder moved from the host to H2D: the before roofline is a host bar, so the pair is not judged either
    after = _row("turns", 22.10, 55.0, 1.51, sustained_fps=12_214.0)
    c = _cmp(tmp_path, [_host_row("turns", 22.10, 53.44, sustained_fps=12_214.0)], [after])
    assert c.row("turns").metric("roofline_us").code is Reason.HOST_BOUND
    assert c.row("turns").end_to_end is EndToEnd.SAME
    # no sustained FPS to judge the frame: nothing judges it, so end to end is NOT COMPARABLE, never SAME
    c2 = _cmp(tmp_path / "2", [_host_row("turns", 22.10, 53.44)], [_host_row("turns", 22.10, 60.31)])
    assert c2.row("turns").metric("roofline_us").code is Reason.HOST_BOUND
    assert c2.row("turns").end_to_end is EndToEnd.NOT_COMPARABLE
    # equal values stay identical: a dir against itself reads SAME on every figure
    c3 = _cmp(tmp_path / "3", [_host_row("turns", 22.10, 53.44, sustained_fps=12_214.0)],
              [_host_row("turns", 22.10, 53.44, sustained_fps=12_214.0)])  # fmt: skip
    assert c3.row("turns").metric("roofline_us").code is Reason.IDENTICAL


def _csv_rows(d: Path) -> dict[str, dict[str, str]]:
    with open(d / "probes.csv", newline="") as fh:
        return {r["label"]: r for r in csv.DictReader(fh)}


def test_f32_against_f64_end_to_end_is_not_invisible() -> None:
    # the issue: "end to end: invisible" on 9x9 f32 -> f64, where the roofline doubled and sustained FPS fell
    b, a = RESULTS / "2026-11-29_f32", RESULTS / "2026-11-29_f64"
    c = compare_results(load_results(b), load_results(a), floors=FLOORS)
    assert c.across == ("pedestal_dtype",)
    rb, ra = _csv_rows(b)["9x9_s1_uncontended"], _csv_rows(a)["9x9_s1_uncontended"]
    roof = (float(ra["roofline_us"]) - float(rb["roofline_us"])) / float(rb["roofline_us"]) * 100
    sust = (float(ra["sustained_fps"]) - float(rb["sustained_fps"])) / float(rb["sustained_fps"]) * 100
    assert roof > 95 and sust < -35  # 10.09 -> 20.13 µs/frame, 57,104 -> 35,260 FPS
    r = c.row("9x9_s1_uncontended")
    assert not r.kernel_invisible and r.end_to_end is EndToEnd.SLOWER
    assert f"roofline {roof:+.2f} % SLOWER across pedestal_dtype" in r.end_to_end_reason
    assert f"sustained {sust:+.2f} % SLOWER across pedestal_dtype" in r.end_to_end_reason
    assert "invisible" not in r.end_to_end_reason
    r4 = c.row("9x9_s4")  # sustained fell 47 %; the 4-stream roofline doubled, beyond the 20 % drift bound
    assert r4.end_to_end is EndToEnd.SLOWER and not r4.kernel_invisible
    d2h = r4.metric("d2h_us")
    worked = (float(ra4 := _csv_rows(a)["9x9_s4"]["d2h_us"]) - float(_csv_rows(b)["9x9_s4"]["d2h_us"])) \
        / float(_csv_rows(b)["9x9_s4"]["d2h_us"]) * 100
    assert worked > 20 and ra4  # 10.73 -> 20.98 µs/frame, +95.5 %
    assert (d2h.verdict, d2h.code, d2h.cross_session, d2h.across) == (Verdict.SLOWER, Reason.BEYOND_DRIFT, True,
                                                                        ("pedestal_dtype",))
    assert d2h.delta_pct == pytest.approx(worked) and d2h.bound_pct == 20.0 and d2h.floor_pct is None


def test_nsys_against_cupti_dirs() -> None:
    c = compare_results(load_results(RESULTS / "2026-11-29_f32"), load_results(RESULTS / "2026-11-29_f32_cupti"))
    assert c.across == ("tracer",)
    r = c.row("3x3_s1_uncontended")
    assert r.metric("h2d_us").across == ("tracer",) and r.metric("sustained_fps").across == ()
    # the trace figures are across the tracer (not gated); sustained FPS of two sessions on one unit is judged
    # by the default bound, 2 % on 1 stream (compare/bounds.py), above a 1 % gate: nothing could be judged at 1 %
    gate = judge_gate(c, 1.0)
    assert not gate.nothing_comparable and not gate.passed and gate.failures == ()
    assert sorted(gate.too_coarse) == [("3x3_s1_uncontended", "sustained_fps", "noise ±2.00 % above the gate's 1 %"),
                                       ("9x9_s1_uncontended", "sustained_fps", "noise ±2.00 % above the gate's 1 %")]
    assert judge_gate(c, 2.0, unjudged_pass=True).passed  # the rooflines across the tracer stay unjudged


def test_gpu_mismatch_refused_unless_allowed(tmp_path: Path) -> None:
    rows = [_row("a", 4.0, 10.0, 3.0)]
    with pytest.raises(InputError, match="different GPUs: 'NVIDIA H200' .* 'NVIDIA GeForce RTX 4090'") as exc:
        _cmp(tmp_path, rows, rows, env_b={"gpu_name": "NVIDIA GeForce RTX 4090"})
    assert "--allow-different-gpu" in exc.value.hint
    c = compare_results(load_results(tmp_path / "a"), load_results(tmp_path / "b"), allow_different_gpu=True)
    assert any("different GPUs" in w.message for w in c.warnings)


def test_versioned_env_with_a_gpu_key_is_checked_too(tmp_path: Path) -> None:
    # the issue: schema_version added by hand to a legacy env.json; its gpu key must still be read
    rows = [_row("a", 4.0, 10.0, 3.0)]
    a = _make(tmp_path / "a", rows)
    b = tmp_path / "b"
    b.mkdir()
    (b / "probes.csv").write_text((a / "probes.csv").read_text())
    (b / "env.json").write_text(json.dumps({"schema_version": 1, "gpu": "NVIDIA GeForce RTX 4090",
                                            "driver": "580.65", "git_rev": "abc1234", "dirty": False}))
    with pytest.raises(InputError, match="different GPUs"):
        compare_results(load_results(a), load_results(b))


def test_environment_warnings(tmp_path: Path) -> None:
    c = _cmp(tmp_path, [_row("a", 4.0, 10.0, 3.0)], [_row("a", 4.0, 10.0, 3.0)],
             env_b={"driver": "590.1", "git_dirty": True})  # fmt: skip
    text = "\n".join(w.message for w in c.warnings)
    assert "driver differs: 580.65 before, 590.1 after" in text
    assert "b was measured from a dirty tree at abc1234" in text


def test_no_warnings_for_a_clean_same_session_pair(tmp_path: Path) -> None:
    c = _cmp(tmp_path, [_row("a", 4.0, 10.0, 3.0)], [_row("a", 4.1, 10.0, 3.0)])
    assert c.warnings == ()
    # without a floors file the seed's rules judge, and compare says so
    c = _cmp(tmp_path / "2", [_row("a", 4.0, 10.0, 3.0)], [_row("a", 4.1, 10.0, 3.0)], floors={})
    assert [w.message.split(":")[0] for w in c.warnings] == ["no floors file for NVIDIA H200"]


def test_gate(tmp_path: Path) -> None:
    # roofline 10.0 -> 11.0 (+10 %), 10.0 -> 10.4 (+4 %); both beyond the 1 % floor (0.1 µs)
    c = _cmp(tmp_path, [_row("a", 4.0, 10.0, 3.0), _row("b", 4.0, 10.0, 3.0)],
             [_row("a", 4.0, 11.0, 3.0), _row("b", 4.0, 10.4, 3.0)])  # fmt: skip
    fails = judge_gate(c, 5.0).failures
    assert [(f.label, f.metric, f.before, f.after) for f in fails] == [("a", "roofline_us", 10.0, 11.0)]
    assert fails[0].delta_pct == pytest.approx(10.0) and fails[0].worse_pct == pytest.approx(10.0)
    assert [f.label for f in judge_gate(c, 3.0).failures] == ["a", "b"]
    assert judge_gate(c, 10.0).failures == () and judge_gate(c, 10.0).passed  # exactly 10 % does not trip


def test_gate_respects_the_noise(tmp_path: Path) -> None:
    # +0.8 % is above a 0.5 % gate but within the 1 % floor: SAME, not a failure
    c = _cmp(tmp_path, [_row("a", 4.0, 10.0, 3.0)], [_row("a", 4.0, 10.08, 3.0)])
    assert c.row("a").metric("roofline_us").verdict is Verdict.SAME
    assert judge_gate(c, 0.5).failures == () and judge_gate(c, 0.5).passed
    # +10 % with a roofline spread of 1.5 µs/frame: within the noise (±15 %), so not a failure; but a 5 % gate
    # cannot see a 5 % regression through ±15 %: that figure is not judged at 5 % (exit 4), unless told to pass
    c = _cmp(tmp_path / "2", [_row("a", 4.0, 10.0, 3.0, roofline_us_spread=1.5)], [_row("a", 4.0, 11.0, 3.0)])
    g = judge_gate(c, 5.0)
    assert g.failures == () and not g.passed and g.judged == (("a", "roofline_us"),)
    assert g.too_coarse == (("a", "roofline_us", "noise ±15.00 % above the gate's 5 %"),)
    assert judge_gate(c, 5.0, unjudged_pass=True).passed and judge_gate(c, 15.0).passed


def test_gate_with_no_label_in_common_judged_nothing(tmp_path: Path) -> None:
    c = _cmp(tmp_path, [_row("a", 4.0, 10.0, 3.0)], [_row("b", 4.0, 10.0, 3.0)])
    g = judge_gate(c, 5.0)
    assert g.nothing_comparable and not g.passed and g.judged == ()
    assert g.not_checked == (("a", "roofline_us", "only in before (a)"), ("b", "roofline_us", "only in after (b)"))


def test_sustained_fps_with_repeats_from_the_dirs(tmp_path: Path) -> None:
    a = _make(tmp_path / "a", [_row("a", 4.0, 10.0, 3.0, sustained_fps=100.0,
                                    samples={"sustained_fps": [99.0, 100.0, 101.0]})])
    b = _make(tmp_path / "b", [_row("a", 4.0, 10.0, 3.0, sustained_fps=120.0,
                                    samples={"sustained_fps": [121.0, 119.0, 120.0]})])
    m = compare_results(load_results(a), load_results(b), floors=FLOORS).row("a").metric("sustained_fps")
    assert (m.verdict, m.code, m.n_before, m.n_after) == (Verdict.FASTER, Reason.SIGNIFICANT, 3, 3)
    assert m.interval.low == pytest.approx(119 / 101) and m.interval.excludes_one


# ----------------------------------------------------------------------------- render


def test_markdown_reference_layout(rtx) -> None:
    from clusterbench.render.compare import render_compare_markdown

    md = render_compare_markdown(rtx)
    assert "| config | kernel before (µs/frame) | kernel after (µs/frame) | kernel delta |" in md
    assert "| 3x3, 1 stream | 4.32 | 4.65 | +7.64 % | 13.13 | 13.13 | H2D |" in md
    assert "| 3x3, 4 streams | 5.00 | 5.64 | +12.80 % | 16.35 | 16.35 | H2D |" in md
    assert "| 9x9, 1 stream | 23.80 | 15.29 | -35.76 % | 23.80 | 22.00 | kernel -> D2H |" in md
    assert "| 9x9, 4 streams | 24.72 | 15.59 | -36.93 % | 25.39 | 25.39 | D2H |" in md


def test_text_layout_fits_and_keeps_verdicts(rtx) -> None:
    from clusterbench.render.compare import render_compare_text

    for width in (80, 72):
        lines = render_compare_text(rtx, width)
        assert max(len(ln) for ln in lines) <= width
    lines = render_compare_text(rtx, 80)
    kernel = next(ln for ln in lines if ln.startswith("  kernel µs") and "4.65" in ln)
    assert kernel.split()[-2:] == ["SLOWER†", "beyond_noise"]  # † provisional: no floors file for the RTX 4090
    # the 4-stream transfers are the same figures before and after: SAME, identical (not provisional: no bound judged)
    assert any(ln.startswith("  H2D µs") and "16.35" in ln and ln.split()[-2:] == ["SAME", "identical"]
               for ln in lines)


def test_json_shape(rtx) -> None:
    from clusterbench.render.compare import COMPARE_JSON_SCHEMA, render_compare_json

    doc = json.loads(json.dumps(render_compare_json(rtx, judge_gate(rtx, 5.0))))
    assert doc["schema"] == COMPARE_JSON_SCHEMA == "clusterbench.compare/5"
    assert doc["floors"][0]["seed"] is True and doc["floors"][0]["drift_bound_pct"] == 20.0
    assert doc["session"].startswith("a session is one sitting")
    row = doc["rows"][2]
    assert row["label"] == "9x9_s1_uncontended"
    k = row["metrics"]["kernel_us"]
    assert (k["before"], k["after"], k["verdict"], k["reason_code"]) == (23.80, 15.29, "FASTER", "beyond_noise")
    # no floors file, two units (no UUID, two sessions): the H200's 2 % across-units bound, twice on a model
    # without A/A runs of its own: 4 %, provisional
    assert k["floor_pct"] == 4.0 and k["test"] is None and k["across"] == [] and k["provisional"] is True
    assert (k["min_effect_pct"], k["processes"], k["link"]) == (1.0, False, None) and doc["min_effect_pct"] == 1.0
    assert row["binds"] == {"before": "kernel", "after": "d2h", "changed": True}
    assert row["end_to_end"]["verdict"] == "faster" and row["end_to_end"]["kernel_invisible"] is False
    h2d = doc["rows"][1]["metrics"]["h2d_us"]
    assert h2d["reason_code"] == "identical" and (h2d["bound_pct"], h2d["floor_pct"]) == (None, None)
    assert h2d["noise"] == 0.0 and h2d["provisional"] is False
    assert doc["gate"]["passed"] is True and doc["gate"]["judged"] == [
        {"label": lb, "metric": "roofline_us"} for lb in RTX_KERNEL]
    assert doc["gate"]["metrics"] == ["roofline_us"] and doc["gate"]["not_measured"] == ["sustained_fps"]
    assert (doc["gate"]["unjudged"], doc["gate"]["too_coarse"], doc["gate"]["unjudged_pass"]) == ([], [], False)
    assert doc["rows"][0]["units"] == {"before": None, "after": None}


def test_plot_writes_by_extension(rtx_current, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from clusterbench.render.plot import render_compare_plot

    assert render_compare_plot(rtx_current, tmp_path / "cmp.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "cmp.svg")
    render_compare_plot(rtx_current, svg)
    head = svg.read_text()[:400]
    assert head.startswith("<?xml") and "<svg" in head
    pdf = tmp_path / "cmp.pdf"
    render_compare_plot(rtx_current, pdf)
    assert pdf.read_bytes()[:5] == b"%PDF-"
    with pytest.raises(InputError, match=r"--plot writes .png, .svg or .pdf, not .jpg"):
        render_compare_plot(rtx_current, tmp_path / "cmp.jpg")


def test_plot_without_matplotlib_says_so(rtx_current, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clusterbench.render.plot import render_compare_plot

    for mod in list(sys.modules):
        if mod == "matplotlib" or mod.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(EnvironmentFailure, match="needs matplotlib") as exc:
        render_compare_plot(rtx_current, tmp_path / "x.png")
    assert "clusterbench[plot]" in exc.value.hint
    assert not (tmp_path / "x.png").exists()


# ----------------------------------------------------------------------------- merged multi-host dirs
#
# Hand-made dirs as executors.merge_task_dirs writes them: every row carries host, gpu_name,
# gpu_uuid (and task, source_dir); --gpus rows are keyed <label>@gpu<N>[.solo] and <label>@all;
# env.json's gpu_name is the distinct names comma-joined, with hosts and per-config entries.

H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"


def _on(row: dict, host: str, gpu: str, uuid: str, **extra: object) -> dict:
    return {**row, "host": host, "gpu_name": gpu, "gpu_uuid": uuid, "task": 0, "source_dir": "tasks/x", **extra}


def _merged(path: Path, rows: list[dict]) -> Path:
    names = list(dict.fromkeys(str(r["gpu_name"]) for r in rows))
    hosts = sorted({str(r["host"]) for r in rows})
    return _make(path, rows, gpu_name=",".join(names), hosts=hosts, host=",".join(hosts),
                 configs={r["label"]: {"session": "S", "host": r["host"], "gpu_name": r["gpu_name"]} for r in rows})


def _node_rows(fps: float, solo: float, host: str = "n1") -> list[dict]:
    """One config on two H200s of one node: plain, solo, per GPU and aggregate (sustained FPS only)."""
    base = _row("3x3_s1", 1.0, 5.0, 2.0, tracer="none")
    per = {k: None for k in ("kernel_us", "h2d_us", "d2h_us", "roofline_us", "binds")}
    return [
        _on({**base, "sustained_fps": solo}, host, H200, "GPU-aaaa0000"),
        _on({**base, "label": "3x3_s1@gpu0.solo", "sustained_fps": solo, "role": "solo"}, host, H200, "GPU-aaaa0000"),
        _on({**base, "label": "3x3_s1@gpu0", "sustained_fps": fps / 2, "role": "concurrent"}, host, H200,
            "GPU-aaaa0000"),
        _on({**base, "label": "3x3_s1@gpu1", "sustained_fps": fps / 2, "role": "concurrent"}, host, H200,
            "GPU-bbbb1111"),
        _on({**base, **per, "label": "3x3_s1@all", "sustained_fps": fps, "sustained_fps_spread": 40.0,
             "role": "aggregate", "gpus": 2, "scaling_efficiency": fps / (2 * solo)}, host, H200, ""),
    ]


def test_merged_dirs_pair_rows_by_gpu_key_and_judge_the_aggregate(tmp_path: Path) -> None:
    # before: 2 x 2000 FPS summed; after: 2 x 2200 = 4400 FPS: +10 %, beyond the summed spread (40 FPS) and,
    # without a floors file, the within-session default bound of 1-stream sustained FPS (1.5 % of 4000 = 60 FPS;
    # the rows' GPUs name no UUID for the aggregate, and the one session "S" makes it within-session): FASTER
    a = _merged(tmp_path / "a", _node_rows(4000.0, 2000.0))
    b = _merged(tmp_path / "b", _node_rows(4400.0, 2200.0))
    c = compare_results(load_results(a), load_results(b))
    assert [r.label for r in c.rows] == ["3x3_s1", "3x3_s1@gpu0.solo", "3x3_s1@gpu0", "3x3_s1@gpu1", "3x3_s1@all"]
    agg = c.row("3x3_s1@all").metric("sustained_fps")
    assert agg.verdict is Verdict.FASTER and agg.delta_pct == pytest.approx(10.0) and agg.noise == pytest.approx(60.0)
    assert agg.floor_pct == 1.5 and agg.provisional
    assert c.row("3x3_s1@all").metric("kernel_us").verdict is Verdict.MISSING  # per-GPU quantity, empty
    assert c.row("3x3_s1@gpu1").gpu_before.uuid == "GPU-bbbb1111"
    assert c.row("3x3_s1@gpu1").gpu_before.source == "row" and not c.row("3x3_s1@gpu1").gpu_differs
    assert not any("different GPUs" in w.message for w in c.warnings) and "gpu" not in c.across


def test_a_row_pair_from_two_gpu_models_is_refused_naming_the_rows(tmp_path: Path) -> None:
    h200 = _on(_row("9x9_s1", 1.6, 5.8, 10.1, cluster=9), "n2", H200, "GPU-cccc2222")
    h100 = _on(_row("9x9_s1", 2.4, 5.9, 10.3, cluster=9), "n7", H100, "GPU-dddd3333")
    same = _on(_row("3x3_s1", 1.0, 5.8, 2.2), "n1", H200, "GPU-aaaa0000")
    a = _merged(tmp_path / "a", [same, h200])
    b = _merged(tmp_path / "b", [same, h100])
    with pytest.raises(InputError) as err:
        compare_results(load_results(a), load_results(b))
    msg = str(err.value)
    assert msg == (f"1 row pair(s) come from different GPUs: 9x9_s1: {H200} (GPU-cccc2222, host n2) before, "
                   f"{H100} (GPU-dddd3333, host n7) after")
    assert "--allow-different-gpu" in (err.value.hint or "")


def test_allow_different_gpu_compares_such_rows_across_gpu_and_says_so_per_row(tmp_path: Path) -> None:
    h200 = _on(_row("9x9_s1", 1.6, 5.8, 10.1, cluster=9), "n2", H200, "GPU-cccc2222")
    h100 = _on(_row("9x9_s1", 2.4, 5.9, 10.3, cluster=9), "n7", H100, "GPU-dddd3333")
    same = _on(_row("3x3_s1", 1.0, 5.8, 2.2), "n1", H200, "GPU-aaaa0000")
    a = _merged(tmp_path / "a", [same, h200])
    b = _merged(tmp_path / "b", [_on(_row("3x3_s1", 1.0, 6.5, 2.2), "n1", H200, "GPU-aaaa0000"), h100])
    c = compare_results(load_results(a), load_results(b), allow_different_gpu=True)
    row = c.row("9x9_s1")
    assert row.gpu_differs and (row.gpu_before.name, row.gpu_after.name) == (H200, H100)
    # kernel 1.6 -> 2.4: +50 %, beyond the 1 % floor: SLOWER, kept, and marked across gpu
    k = row.metric("kernel_us")
    assert k.verdict is Verdict.SLOWER and k.across == ("gpu",) and k.delta_pct == pytest.approx(50.0)
    assert [mm.column for mm in row.mismatches] == ["gpu"]
    assert any(n.startswith(f"different GPUs: {H200} (GPU-cccc2222, host n2) before, {H100} (GPU-dddd3333, "
                            "host n7) after") for n in row.notes)
    # the other row is like for like: not marked; the gate judges it and leaves the GPU pair out
    assert c.row("3x3_s1").metric("h2d_us").across == () and not c.row("3x3_s1").gpu_differs
    assert "gpu" in c.across
    gate = judge_gate(c, 5.0)
    assert gate.judged == (("3x3_s1", "roofline_us"),)
    assert ("9x9_s1", "roofline_us", "across gpu") in gate.not_checked
    assert [f.label for f in gate.failures] == ["3x3_s1"]  # 5.8 -> 6.5: +12.07 % > 5 %
    assert any(w.message.startswith("different GPUs: 1 row pair(s)") for w in c.warnings)


def test_same_model_on_another_host_is_stated_not_refused(tmp_path: Path) -> None:
    a = _merged(tmp_path / "a", [_on(_row("3x3_s1", 1.0, 5.8, 2.2), "n1", H200, "GPU-aaaa0000")])
    b = _merged(tmp_path / "b", [_on(_row("3x3_s1", 1.0, 5.8, 2.2), "n4", H200, "GPU-eeee4444")])
    c = compare_results(load_results(a), load_results(b))
    row = c.row("3x3_s1")
    assert not row.gpu_differs and row.metric("kernel_us").across == ()
    assert f"same GPU model, another unit: {H200} (GPU-aaaa0000, host n1) before, {H200} (GPU-eeee4444, " \
           "host n4) after" in row.notes


def test_a_merged_dir_against_a_plain_dir_judges_gpus_per_row(tmp_path: Path) -> None:
    # the merged dir spans two models (env.json gpu_name "H200,H100"); its H200 row pairs with a plain
    # H200 dir: no refusal, where the dirs' gpu_name alone would differ
    merged = _merged(tmp_path / "a", [_on(_row("3x3_s1", 1.0, 5.8, 2.2), "n1", H200, "GPU-aaaa0000"),
                                      _on(_row("9x9_s1", 2.4, 5.9, 10.3, cluster=9), "n7", H100, "GPU-dddd3333")])
    plain = _make(tmp_path / "b", [_row("3x3_s1", 1.0, 5.8, 2.2)], gpu_name=H200, gpu_uuid="GPU-aaaa0000",
                  host="n1")
    c = compare_results(load_results(merged), load_results(plain))
    assert load_results(merged).env.gpu_name == f"{H200},{H100}"
    row = c.row("3x3_s1")
    assert row.gpu_after.source == "dir" and row.gpu_after.name == H200 and not row.gpu_differs
    assert row.notes == () or not any("GPU" in n for n in row.notes)  # same unit: GPU-aaaa0000 both sides
    assert c.before.hosts == ("n1", "n7")
    # the plain dir of another model: its one common row is refused
    other = _make(tmp_path / "c", [_row("3x3_s1", 1.0, 5.8, 2.2)], gpu_name=H100)
    with pytest.raises(InputError, match=r"3x3_s1: NVIDIA H200 \(GPU-aaaa0000, host n1\) before, NVIDIA H100"):
        compare_results(load_results(merged), load_results(other))


def test_whole_dirs_of_two_gpus_are_marked_across_gpu_per_row_when_allowed(tmp_path: Path) -> None:
    rows = [_row("3x3_s1", 4.0, 10.0, 3.0)]
    c = _cmp(tmp_path, rows, rows, env_b={"gpu_name": H100}, allow_different_gpu=True)
    row = c.row("3x3_s1")
    assert row.gpu_differs and row.metric("roofline_us").across == ("gpu",)
    assert row.metric("roofline_us").verdict is Verdict.SAME  # identical values: the verdict is kept
    assert any("different GPUs: 'NVIDIA H200' before" in w.message for w in c.warnings)  # the dir-level warning


def test_rows_of_a_program_probed_as_it_is_compare_without_a_stream_count(tmp_path) -> None:
    """An exec row has no streams unless its config gives them: compare judges it by the multi-stream rule."""
    from clusterbench.compare.compare import compare_results
    from clusterbench.io.results import load_results, merge_results
    from clusterbench.model.results import EnvRecord, ResultRow, ResultSet, RowKey

    def row(kernel_us: float, session: str) -> ResultRow:
        return ResultRow(key=RowKey("smc"), cluster=None, cap=None, streams=None, batch=None, frames=1000,
                         kernel_us=kernel_us, h2d_us=6.0, d2h_us=1.0, roofline_us=6.0, binds="h2d", workload="exec",
                         session=session, tracer="nsys")

    for name, k in (("a", 2.0), ("b", 1.0)):
        merge_results(tmp_path / name, ResultSet(EnvRecord(session_id=name, gpu_name="NVIDIA H200"), (row(k, name),)))
    cmp = compare_results(load_results(tmp_path / "a"), load_results(tmp_path / "b"))
    (r,) = cmp.rows
    kernel = r.metric("kernel_us")
    # 2.0 -> 1.0 µs: far beyond any floor, and read with the multi-stream (unknown stream count) floor
    assert r.streams is None and kernel.verdict.value == "FASTER"


# ----------------------------------------------------------------------------- unsteady sustained runs


def _fps_row(samples: list[float], **cols: object) -> dict:
    return _row("s1", 4.0, 10.0, 3.0, sustained_fps=sorted(samples)[1], samples={"sustained_fps": samples}, **cols)


@pytest.mark.parametrize(("steady_before", "steady_after", "unsteady"), [
    (None, None, False),  # rows written before the column: not known, so not unsteady
    (True, True, False),
    (True, None, False),
    (False, True, True),
    (True, False, True),
    (False, False, True),
])  # fmt: skip
def test_an_unsteady_side_makes_sustained_fps_not_comparable(tmp_path: Path, steady_before, steady_after,
                                                             unsteady) -> None:
    # 100,000 -> 80,000 FPS (-20 %), separated, one session: a change by every other rule
    kb = {} if steady_before is None else {"sustained_steady": steady_before}
    ka = {} if steady_after is None else {"sustained_steady": steady_after}
    c = _cmp(tmp_path, [_fps_row([99_000.0, 100_000.0, 101_000.0], **kb)],
             [_fps_row([79_000.0, 80_000.0, 81_000.0], **ka)])
    r = c.row("s1")
    m = r.metric("sustained_fps")
    assert m.delta_pct == pytest.approx(-20.0)
    if unsteady:
        assert (m.verdict, m.code) == (Verdict.NOT_COMPARABLE, Reason.UNSTEADY)
        sides = [t for t, s in (("before (a)", steady_before), ("after (b)", steady_after)) if s is False]
        assert m.reason.startswith(f"the sustained runs of {' and '.join(sides)} did not reach steady state")
        # the roofline alone was judged (10 -> 10): end to end cannot read SAME while sustained FPS is unjudged
        assert r.end_to_end is EndToEnd.NOT_COMPARABLE
        assert "not SAME: sustained unsteady could not be judged" in r.end_to_end_reason
        assert any(w.message.startswith("s1: sustained FPS NOT COMPARABLE (unsteady)") for w in c.warnings)
        gate = judge_gate(c, 5.0)
        assert not gate.passed and not gate.failures and ("s1", "sustained_fps", "unsteady") in gate.not_checked
        assert judge_gate(c, 5.0, unjudged_pass=True).passed
    else:
        assert (m.verdict, m.code) == (Verdict.SLOWER, Reason.SIGNIFICANT)
        assert r.end_to_end is EndToEnd.SLOWER
        assert [f.metric for f in judge_gate(c, 5.0).failures] == ["sustained_fps"]
    # the trace figures are not touched by the sustained runs' state
    assert r.metric("roofline_us").code is Reason.IDENTICAL
