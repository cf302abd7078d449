"""A real kernel change, before and after (H200, 2026-12-01): the reference configs on the two-phase frozen
kernel (`results/2026-12-01_f32`, git 30b726a) and on the two-columns-per-lane sliding window
(`clusterbench probe --config configs.toml --tag slide`, git efa5d09), two sessions on two units of the
same GPU model. Kept as tests/data/compare/kernel_change/ (probes.csv and env.json only).

What compare must say, worked out here from the CSVs: the kernel is FASTER in every row, by more than
half; on 4 streams the sustained FPS moves by under 1 %, inside the H200 file's 1.5 % floor, so it reads SAME,
and the transfer figures come from two sessions whose units' links were not measured (dirs made before that) and
move far less than the 20 % drift bound, so they read NOT COMPARABLE, and so end to end cannot read SAME there;
the kernel bar lies under the transfer bar on both sides, so the kernel change cannot move the roofline."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from clusterbench.compare.compare import Reason, Verdict, compare_results
from clusterbench.compare.floors import read_floors
from clusterbench.io.results import load_results

DATA = Path(__file__).resolve().parents[1] / "data" / "compare" / "kernel_change"
BEFORE, AFTER = DATA / "2026-12-01_f32_twophase", DATA / "2026-12-01_f32_slide"
H200 = read_floors(Path(__file__).resolve().parents[1] / "data" / "results" / "floors" / "NVIDIA_H200.json")


def _csv(d: Path) -> dict[str, dict[str, str]]:
    with open(d / "probes.csv", newline="") as fh:
        return {r["label"]: r for r in csv.DictReader(fh)}


def test_the_faster_kernel_reads_faster_in_every_row_and_the_link_bound_rows_stay_same() -> None:
    b, a = _csv(BEFORE), _csv(AFTER)
    c = compare_results(load_results(BEFORE), load_results(AFTER), floors={"NVIDIA H200": H200})
    assert {r.label for r in c.rows} == set(b) == set(a)
    for r in c.rows:
        kb, ka = float(b[r.label]["kernel_us"]), float(a[r.label]["kernel_us"])
        k = r.metric("kernel_us")
        assert (k.verdict, k.code) == (Verdict.FASTER, Reason.BEYOND_NOISE)
        assert k.delta_pct == pytest.approx((ka - kb) / kb * 100) and k.delta_pct < -50
        # the kernel stays under the tallest transfer bar on both sides
        assert kb < float(b[r.label]["roofline_us"]) and ka < float(a[r.label]["roofline_us"])
        if r.streams == 4:
            fb, fa = float(b[r.label]["sustained_fps"]), float(a[r.label]["sustained_fps"])
            assert abs(fa - fb) / fb < 0.01
            assert r.metric("sustained_fps").verdict is Verdict.SAME
            for name in ("h2d_us", "d2h_us", "roofline_us"):
                m = r.metric(name)
                vb, va = float(b[r.label][name]), float(a[r.label][name])
                assert abs(va - vb) / vb < 0.20  # worked out from the CSVs: within the drift bound
                assert (m.verdict, m.code) == (Verdict.NOT_COMPARABLE, Reason.SESSION_DRIFT)
            # the roofline could not be judged: end to end NOT COMPARABLE (never SAME), saying why
            assert r.end_to_end.value == "not_comparable"
            assert "roofline session_drift could not be judged" in r.end_to_end_reason
