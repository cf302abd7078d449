"""compare with sustained FPS from several processes, and across units whose links were measured.

Hand-made dirs written through the real store (results_data: the process medians are the measurement's
samples, every process under metadata.processes; env.json's unit block). Every expected value is worked out
in the comments from the rule (docs/compare.md):

- process spread on both sides of one unit: noise = max(the 1 % minimum effect, 1.5 x the larger side's range of
  process medians over its median, the run spread of a process that did not settle);
- two units: also the across-units floor (a default bound without a floors file, marked provisional), and
  link-bound figures judged as shares of each unit's link.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterbench.compare.compare import EndToEnd, Reason, Verdict, compare_metric, compare_results, judge_gate
from clusterbench.io.results import load_results
from clusterbench.model.processes import ProcessSpread

from results_data import unit, write

ENV = {"gpu_name": "NVIDIA H200", "driver": "580.65", "git_dirty": False, "git_rev": "abc1234"}


def _row(label: str = "3x3_s1", *, streams: int = 1, h2d: float = 5.8, d2h: float = 2.2, kernel: float = 0.45,
         procs: list | None = None, **cols: object) -> dict:
    roof = max(h2d, d2h, kernel)
    binds = "h2d" if roof == h2d else "d2h" if roof == d2h else "kernel"
    return {"label": label, "cluster": 3, "cap": 3000, "streams": streams, "batch": 200, "frames": 8000,
            "kernel_us": kernel, "h2d_us": h2d, "d2h_us": d2h, "roofline_us": roof, "binds": binds,
            "pedestal_dtype": "float32", "pedestal": "frozen", "transfer": "copy", "tracer": "nsys",
            "processes": procs, **cols}


def _pair(tmp_path: Path, before: list[dict], after: list[dict], env_b: dict, env_a: dict, **kw):
    b = write(tmp_path / "b", before, {**ENV, **env_b})
    a = write(tmp_path / "a", after, {**ENV, **env_a})
    return compare_results(load_results(b), load_results(a), **kw)


ONE_UNIT_B = {"session_id": "S1", "gpu_uuid": "GPU-1111", "unit": unit("GPU-1111")}
ONE_UNIT_A = {"session_id": "S2", "gpu_uuid": "GPU-1111", "unit": unit("GPU-1111")}


def test_the_process_rule_by_hand() -> None:
    # before medians 100.0, 100.4, 99.8: median 100.0, range 0.6 % of it; after 95.0, 95.3, 94.9: range 0.4/95.0.
    # noise = max(1 %, 1.5 x 0.6 % = 0.9 %) = 1 % = 1.0 FPS; -5 % is beyond it: SLOWER, the minimum effect set it
    pb, pa = ProcessSpread(3, 100.0, 0.006, 0.0, 0), ProcessSpread(3, 95.0, 0.4 / 95.0, 0.0, 0)
    m = compare_metric("sustained_fps", 100.0, 95.0, streams=1, processes_before=pb, processes_after=pa,
                       scope="same_unit")
    assert (m.verdict, m.code, m.noise_from, m.processes) == (Verdict.SLOWER, Reason.BEYOND_NOISE, "min_effect", True)
    assert m.noise == pytest.approx(1.0) and (m.n_before, m.n_after) == (3, 3) and not m.provisional
    # after 100.5, 99.2, 100.9: range 1.7 / 100.5 = 1.6915 %; 1.5 x that = 2.537 % beats 1 %: +0.5 % is within it
    pa = ProcessSpread(3, 100.5, 1.7 / 100.5, 0.0, 0)
    m = compare_metric("sustained_fps", 100.0, 100.5, streams=1, processes_before=pb, processes_after=pa,
                       scope="same_unit")
    assert (m.verdict, m.code, m.noise_from) == (Verdict.SAME, Reason.WITHIN_NOISE, "processes")
    assert m.noise == pytest.approx(1.5 * 1.7 / 100.5 * 100.0)
    assert "1.5 × the larger spread of the process medians" in m.reason
    # a process whose runs did not settle: its runs spread 4 %, which beats both: a 3 % change is within it
    pu = ProcessSpread(3, 97.0, 0.002, 0.04, 1)
    m = compare_metric("sustained_fps", 100.0, 97.0, streams=4, processes_before=pb, processes_after=pu,
                       scope="same_unit")
    assert (m.verdict, m.noise_from, m.noise) == (Verdict.SAME, "unsettled", pytest.approx(4.0))
    # --min-effect 6: a 5 % change is within it
    pa = ProcessSpread(3, 95.0, 0.4 / 95.0, 0.0, 0)
    m = compare_metric("sustained_fps", 100.0, 95.0, streams=1, processes_before=pb, processes_after=pa,
                       scope="same_unit", min_effect_pct=6.0)
    assert (m.verdict, m.noise) == (Verdict.SAME, pytest.approx(6.0))


def test_one_unit_with_process_spread_reads_a_5_pct_delay(tmp_path: Path) -> None:
    # 1-stream sustained FPS (the H100 figures): 117,292 -> 111,764 (-4.71 %). Processes before 117,292,
    # 117,500, 117,100 (median 117,292, range 400 = 0.341 %), after 111,764, 111,900, 111,650 (range 250):
    # noise = max(1 %, 1.5 x 0.341 % = 0.512 %) = 1 % = 1,172.92 FPS: SLOWER, not provisional (no bound judged)
    c = _pair(tmp_path, [_row(procs=[[117_292.0], [117_500.0], [117_100.0]])],
              [_row(procs=[[111_764.0], [111_900.0], [111_650.0]])], ONE_UNIT_B, ONE_UNIT_A, floors={})
    r = c.row("3x3_s1")
    m = r.metric("sustained_fps")
    assert r.scope == "same_unit" and r.unit_before is not None and r.unit_before.unit_id == "GPU-1111@node1#boot-a"
    assert (m.verdict, m.code, m.processes, m.provisional) == (Verdict.SLOWER, Reason.BEYOND_NOISE, True, False)
    assert m.delta_pct == pytest.approx((111_764 - 117_292) / 117_292 * 100)
    assert m.noise == pytest.approx(1_172.92)
    assert r.end_to_end is EndToEnd.SLOWER
    gate = judge_gate(c, 3.0)
    assert [(f.label, f.metric) for f in gate.failures] == [("3x3_s1", "sustained_fps")]


def test_a_wide_process_spread_reads_same_but_cannot_pass_a_tighter_gate(tmp_path: Path) -> None:
    # before medians 100,000, 103,000, 98,000 (median 100,000, range 5 %): noise 1.5 x 5 % = 7.5 %; after 97,000,
    # 97,500, 96,800 (-3 %) reads SAME. A 5 % gate cannot see a 5 % regression through ±7.5 %: unjudged, exit 4
    c = _pair(tmp_path, [_row(procs=[[100_000.0], [103_000.0], [98_000.0]])],
              [_row(procs=[[97_000.0], [97_500.0], [96_800.0]])], ONE_UNIT_B, ONE_UNIT_A, floors={})
    m = c.row("3x3_s1").metric("sustained_fps")
    assert (m.verdict, m.noise_from) == (Verdict.SAME, "processes") and m.noise_pct == pytest.approx(7.5)
    gate = judge_gate(c, 5.0)
    assert not gate.passed and gate.failures == ()
    assert gate.too_coarse == (("3x3_s1", "sustained_fps", "noise ±7.50 % above the gate's 5 %"),)
    assert judge_gate(c, 8.0).passed and judge_gate(c, 5.0, unjudged_pass=True).passed


def test_a_dir_without_process_spread_is_judged_by_the_across_process_bound(tmp_path: Path) -> None:
    # before: a dir made before several processes (3 runs of one process, 117,292 +- 50); after: 3 processes.
    # One unit, two sessions, no floors file: the same-unit default bound of 1-stream sustained FPS, 2 %
    # (compare/bounds.py), judges: -1.5 % reads SAME, and the reason says why no process spread judged
    before = _row(sustained_fps=117_292.0, samples={"sustained_fps": [117_242.0, 117_292.0, 117_342.0]})
    c = _pair(tmp_path, [before], [_row(procs=[[115_533.0], [115_600.0], [115_500.0]])], ONE_UNIT_B, ONE_UNIT_A,
              floors={})
    m = c.row("3x3_s1").metric("sustained_fps")
    assert (m.verdict, m.floor_pct, m.provisional, m.processes) == (Verdict.SAME, 2.0, True, False)
    assert "no process spread on the before side" in m.reason and "across-process bound" in m.reason


H100 = "NVIDIA H100 80GB HBM3"


def test_two_units_whose_duplex_links_differ_by_a_fifth_read_same_as_shares_of_their_links(tmp_path: Path) -> None:
    # the 9x9 4-stream figures: 89,298 FPS on a unit whose D2H ran 50.7 GB/s with both directions at once,
    # 70,183 FPS on one at 40.0 GB/s. Raw: -21.41 %. As frames per GB/s of duplex D2H: 89,298 / 50.7 = 1,761.30,
    # 70,183 / 40.0 = 1,754.58: -0.382 %, within the across-units default bound of multi-stream sustained FPS
    # (the H200's 3.5 %, twice on the H100, which has no A/A rows of its own: 7 %, provisional). D2H 11.10 -> 14.10
    # µs/frame: x 50.7 = 562.77, x 40.0 = 564.0: +0.22 %, within the multi-stream link bound (17.5 %, twice: 35 %),
    # not held to the drift bound (both units' links were measured)
    env_b = {"session_id": "S1", "gpu_uuid": "GPU-aaaa", "gpu_name": H100,
             "unit": {**unit("GPU-aaaa", "h1", "b1", duplex_d2h=50.7), "gpu_name": H100}}
    env_a = {"session_id": "S2", "gpu_uuid": "GPU-bbbb", "gpu_name": H100,
             "unit": {**unit("GPU-bbbb", "h2", "b2", duplex_d2h=40.0), "gpu_name": H100}}
    b = _row("9x9_s4", streams=4, h2d=6.6, d2h=11.10, kernel=0.87, procs=[[89_298.0], [89_400.0], [89_150.0]])
    a = _row("9x9_s4", streams=4, h2d=6.7, d2h=14.10, kernel=0.87, procs=[[70_183.0], [70_300.0], [70_100.0]])
    c = _pair(tmp_path, [b], [a], env_b, env_a, floors={})
    r = c.row("9x9_s4")
    assert r.scope == "across_units"
    fps = r.metric("sustained_fps")
    assert fps.delta_pct == pytest.approx((70_183 - 89_298) / 89_298 * 100)  # -21.41 %
    assert fps.judged_delta_pct == pytest.approx(((70_183 / 40.0) / (89_298 / 50.7) - 1) * 100)  # -0.382 %
    assert (fps.verdict, fps.floor_pct, fps.provisional) == (Verdict.SAME, 7.0, True)
    assert (fps.link.direction, fps.link.duplex, fps.link.before_gbps, fps.link.after_gbps) == ("d2h", True, 50.7, 40.0)
    # on several streams the range runs to the rates alone (55 -> 55 GB/s): -21.41 % there; the end nearest 0 %
    assert (fps.link.alone_before_gbps, fps.link.alone_after_gbps) == (55.0, 55.0)
    assert ("as shares of each unit's link (D2H with both at once 50.70 → 40.00 GB/s to alone 55.00 → 55.00 GB/s): "
            "-21.41 % to -0.38 %, judged -0.38 % (the end nearest 0 %)") in fps.reason
    d2h = r.metric("d2h_us")
    assert d2h.judged_delta_pct == pytest.approx((14.10 * 40.0 / (11.10 * 50.7) - 1) * 100)
    assert (d2h.verdict, d2h.code, d2h.bound_pct, d2h.floor_pct) == (Verdict.SAME, Reason.WITHIN_NOISE, None, 35.0)
    assert r.metric("roofline_us").verdict is Verdict.SAME  # binds on D2H both sides: the same share
    assert r.end_to_end is EndToEnd.SAME
    note = next(n for n in r.notes if n.startswith("same GPU model, another unit"))
    assert "link D2H with both at once 50.70 → 40.00 GB/s (-21.10 %)" in note
    # the same pair without the units' links: the 4-stream transfers are held to the drift bound, and the sustained
    # FPS drop of 21.4 % reads SLOWER against the 7 % bound: the slower host would read as a slower build
    c2 = _pair(tmp_path / "nolink", [b], [a], {**env_b, "unit": None}, {**env_a, "unit": None}, floors={})
    assert c2.row("9x9_s4").metric("sustained_fps").verdict is Verdict.SLOWER
    assert c2.row("9x9_s4").metric("d2h_us").code is Reason.BEYOND_DRIFT  # +27.0 % is beyond 20 %


def test_a_20_pct_delay_on_another_unit_reads_slower_against_a_bound_under_10_pct(tmp_path: Path) -> None:
    # 1 stream (the link is only part of the frame: judged as measured): 117,292 -> 97,855 (-16.57 %) on two
    # units, no floors file: the across-units default bound of 1-stream sustained FPS is 2 %, marked provisional
    env_b = {"session_id": "S1", "gpu_uuid": "GPU-aaaa", "unit": unit("GPU-aaaa", "h1", "b1")}
    env_a = {"session_id": "S2", "gpu_uuid": "GPU-bbbb", "unit": unit("GPU-bbbb", "h2", "b2", d2h=54.0)}
    c = _pair(tmp_path, [_row(procs=[[117_292.0], [117_400.0], [117_200.0]])],
              [_row(procs=[[97_855.0], [97_900.0], [97_800.0]])], env_b, env_a, floors={})
    m = c.row("3x3_s1").metric("sustained_fps")
    assert (m.verdict, m.floor_pct, m.provisional, m.link) == (Verdict.SLOWER, 2.0, True, None)
    assert "2 % across-units default bound, provisional" in m.reason
    assert judge_gate(c, 3.0).failures[0].metric == "sustained_fps"
    # the 1-stream H2D bar is link-bound: judged as a share of each unit's H2D alone (55.0 both: as measured)
    assert c.row("3x3_s1").metric("h2d_us").link.duplex is False


def test_a_reboot_is_another_unit(tmp_path: Path) -> None:
    env_b = {"session_id": "S1", "gpu_uuid": "GPU-1111", "unit": unit("GPU-1111", boot="boot-a")}
    env_a = {"session_id": "S2", "gpu_uuid": "GPU-1111", "unit": unit("GPU-1111", boot="boot-b")}
    c = _pair(tmp_path, [_row(procs=[[100.0], [100.2], [99.9]])], [_row(procs=[[100.1], [100.0], [99.8]])],
              env_b, env_a, floors={})
    r = c.row("3x3_s1")
    assert r.scope == "across_units" and "two GPU units" in r.scope_text and "boot boot-b" in r.scope_text


def _measured_link_pair(tmp_path: Path, after_procs: list[list[float]]):  # noqa: ANN202
    """The 9x9 4-stream row of two measured H100 units (GPU-43210852: D2H 55.33 GB/s alone, 50.51 with both at
    once; GPU-819bb6ab: 54.85 and 34.44), compared: before its measured 89,559 FPS, after ``after_procs``."""
    env_b = {"session_id": "S1", "gpu_uuid": "GPU-aaaa", "gpu_name": H100,
             "unit": {**unit("GPU-aaaa", "h1", "b1", d2h=55.33, duplex_d2h=50.51), "gpu_name": H100}}
    env_a = {"session_id": "S2", "gpu_uuid": "GPU-bbbb", "gpu_name": H100,
             "unit": {**unit("GPU-bbbb", "h2", "b2", d2h=54.85, duplex_d2h=34.44), "gpu_name": H100}}
    b = _row("9x9_s4", streams=4, h2d=6.45, d2h=10.97, kernel=0.87, procs=[[89_559.0], [89_600.0], [89_500.0]])
    a = _row("9x9_s4", streams=4, h2d=7.73, d2h=14.24, kernel=0.87, procs=after_procs)
    return _pair(tmp_path, [b], [a], env_b, env_a, floors={})


def test_an_aa_pair_of_units_whose_duplex_links_differ_by_a_third_is_no_change_either_way(tmp_path: Path) -> None:
    # measured on two H100 units (docs/compare.md): make run's 9x9 4-stream config at 89,559 FPS on a unit with
    # D2H 55.33 GB/s alone and 50.51 with both at once, at 68,847 FPS on one with 54.85 and 34.44. As shares of
    # the rates alone: (68,847 / 54.85) / (89,559 / 55.33) = 1,255.2 / 1,618.6 = 0.7755 (-22.45 %); of the duplex
    # rates: (68,847 / 34.44) / (89,559 / 50.51) = 1,999.0 / 1,773.1 = 1.1274 (+12.74 %). Which rate the
    # config's copies met lies between: the range holds 0 %, so the pair is judged 0 %: SAME (it read FASTER
    # as shares of the duplex rates alone)
    c = _measured_link_pair(tmp_path, [[68_847.0], [68_900.0], [68_800.0]])
    fps = c.row("9x9_s4").metric("sustained_fps")
    lo, hi = fps.link.ratio_range(89_559.0, 68_847.0)
    assert (lo - 1) * 100 == pytest.approx(-22.45, abs=0.01) and (hi - 1) * 100 == pytest.approx(12.74, abs=0.01)
    assert fps.judged_delta_pct == 0.0
    assert (fps.verdict, fps.code) == (Verdict.SAME, Reason.WITHIN_NOISE)
    assert "-22.45 % to +12.74 %, judged +0.00 % (the range holds 0 %)" in fps.reason
    # D2H 10.97 -> 14.24 µs/frame: x 55.33 -> x 54.85 is +28.68 %, x 50.51 -> x 34.44 is -11.49 %: 0 % too
    d2h = c.row("9x9_s4").metric("d2h_us")
    assert (d2h.judged_delta_pct, d2h.verdict) == (0.0, Verdict.SAME)


def test_a_real_change_across_units_reads_beyond_both_ends_of_the_link_range(tmp_path: Path) -> None:
    # the same two units' links, and an after 30 % slower than the A/A above: 48,193 FPS. Alone: (48,193 / 54.85)
    # / (89,559 / 55.33) = 878.6 / 1,618.6 = 0.5428 (-45.72 %); duplex: (48,193 / 34.44) / 1,773.1 = 1,399.3 /
    # 1,773.1 = 0.7892 (-21.08 %): both ends slower, beyond the 7 % bound: SLOWER, judged -21.08 %
    c = _measured_link_pair(tmp_path, [[48_193.0], [48_200.0], [48_150.0]])
    fps = c.row("9x9_s4").metric("sustained_fps")
    assert fps.judged_delta_pct == pytest.approx(-21.08, abs=0.01)
    assert fps.verdict is Verdict.SLOWER


def _one_unit_fps(tmp_path: Path, before: tuple, after: tuple):  # noqa: ANN202
    """compare of one 3x3 4-stream row (binds H2D) in two sessions of one unit. Each side: (process medians,
    H2D alone GB/s, H2D with both at once GB/s). Returns the comparison and its sustained FPS metric."""
    rows, envs = [], []
    for session, (procs, h2d, duplex_h2d) in (("S1", before), ("S2", after)):
        rows.append(_row("3x3_s4", streams=4, h2d=7.28, d2h=4.40, procs=[[v] for v in procs]))
        envs.append({"session_id": session, "gpu_uuid": "GPU-1111", "unit": unit("GPU-1111", h2d=h2d, duplex_h2d=duplex_h2d)})
    c = _pair(tmp_path, [rows[0]], [rows[1]], *envs, floors={})
    return c, next(x for x in c.rows[0].metrics if x.name == "sustained_fps")


def test_one_unit_two_sessions_the_links_drift_explains_a_multi_stream_change(tmp_path: Path) -> None:
    # GPU-137660c0's A/A pair (H100, make run's 3x3 on 4 streams, binds H2D), one unit, two sessions:
    # before: processes 144,072, 145,066, 142,257 -> median 144,072, spread (145,066 - 142,257) / 144,072 = 1.950 %
    # after:  135,211, 134,390, 133,479 -> median 134,390, spread 1,732 / 134,390 = 1.289 %; noise 1.5 x 1.950 = 2.92 %
    # as measured 134,390 / 144,072 - 1 = -6.720 %; the link: H2D alone 54.85 -> 52.98, both at once 46.81 -> 44.14
    # as shares (FPS over GB/s): both at once -6.720 % x ... = 0.932798 x 46.81 / 44.14 - 1 = -1.078 %;
    # alone 0.932798 x 54.85 / 52.98 - 1 = -3.428 %. The range [-6.720, -1.078] -> judged -1.078 %: SAME
    c, m = _one_unit_fps(tmp_path, ((144_072.0, 145_066.0, 142_257.0), 54.85, 46.81),
                         ((135_211.0, 134_390.0, 133_479.0), 52.98, 44.14))
    assert m.delta_pct == pytest.approx(-6.720, abs=0.001) and m.change_pct == pytest.approx(-1.078, abs=0.001)
    assert (m.verdict, c.rows[0].scope) == (Verdict.SAME, "same_unit") and m.noise_pct == pytest.approx(2.924, abs=0.001)
    assert "as shares of the unit's link as each probe measured it" in m.reason and "and as measured" in m.reason
    from clusterbench.render.compare import render_compare_json

    js = json.loads(json.dumps(render_compare_json(c)))
    link = next(r for r in js["rows"] if r["label"] == "3x3_s4")["metrics"]["sustained_fps"]["link"]
    assert (link["measured"], link["before_gbps"], link["after_gbps"]) == (True, 46.81, 44.14)


def test_one_unit_a_low_link_reading_never_makes_a_change(tmp_path: Path) -> None:
    # GPU-24707a35's pair: FPS 155,113 -> 154,126 (-0.636 %) while its link read H2D alone 54.75 -> 46.72 and
    # both at once 50.24 -> 38.31: as shares +16.44 % and +30.31 %; with the measured change in the range
    # [-0.636, +30.31], which holds 0: judged 0 %, SAME (as shares alone it would read FASTER)
    _, m = _one_unit_fps(tmp_path, ((155_113.0, 155_300.0, 154_900.0), 54.75, 50.24),
                         ((154_126.0, 154_300.0, 153_900.0), 46.72, 38.31))
    assert m.change_pct == 0.0 and m.verdict is Verdict.SAME


def test_one_unit_a_change_with_a_steady_link_is_called(tmp_path: Path) -> None:
    # the same link both times: the range is one point, -5 % as measured, beyond 1.5 x 0.2 % and the 1 % minimum
    _, m = _one_unit_fps(tmp_path, ((100_000.0, 100_100.0, 99_900.0), 54.85, 46.81),
                         ((95_000.0, 95_100.0, 94_900.0), 54.85, 46.81))
    assert m.change_pct == pytest.approx(-5.0) and m.verdict is Verdict.SLOWER
