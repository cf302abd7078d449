"""Deliberate delays (configs/smoke_delay5.toml, smoke_delay20.toml: 0.43 and 1.7 µs of GPU spin per frame on
the 1-stream 3x3 config, 5 % and 20 % of its 8.5 µs frame) probed on freshly started H200 machines, judged
with the committed floors (results/floors/NVIDIA_H200.json). Worked out from the dirs' probes.csv:
- within one session (aa_m2): sustained 117,543 -> 112,101 (-4.63 %) and -> 97,999 (-16.63 %) against the
  1.5 % within-session floor; the kernel bar 0.45 -> 0.88 and 2.15 µs/frame against 1 %;
- across two units (aa_m4 -> m2, aa_m5 -> m3): -4.72 %, -16.71 %, -4.74 %, -16.69 % against the 2 %
  across-units floor; the kernel bar against 1.5 %;
- the roofline (H2D, 5.78-5.83 µs/frame) moves -0.25 to -0.85 %: inside every floor, SAME."""

from pathlib import Path

import pytest

from clusterbench.compare.compare import Verdict, compare_results
from clusterbench.compare.floors import read_floors
from clusterbench.io.results import load_results

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
FLOORS = {"NVIDIA H200": read_floors(RESULTS / "floors" / "NVIDIA_H200.json")}
LABEL = "3x3_s1_uncontended"


@pytest.mark.parametrize("before, after, scope", [
    ("aa_m2_1", "delay5_m2", "within_session"),
    ("aa_m2_1", "delay20_m2", "within_session"),
    ("aa_m4_1", "delay5_m2", "across_units"),
    ("aa_m4_1", "delay20_m2", "across_units"),
    ("aa_m5_2", "delay5_m3", "across_units"),
    ("aa_m5_2", "delay20_m3", "across_units"),
])
def test_a_delay_of_5_and_20_percent_reads_slower(before, after, scope) -> None:
    b = load_results(RESULTS / f"2026-12-02_f32_{before}")
    a = load_results(RESULTS / f"2026-12-02_f32_{after}")
    row = compare_results(b, a, floors=FLOORS).row(LABEL)
    assert row.metric("kernel_us").verdict is Verdict.SLOWER
    assert row.metric("sustained_fps").verdict is Verdict.SLOWER
    assert row.metric("roofline_us").verdict is Verdict.SAME
    assert row.metric("sustained_fps").pair_scope == scope
    small = "delay5" in after
    assert (-5.0 < row.metric("sustained_fps").delta_pct < -4.5) if small else (-17.0 < row.metric("sustained_fps").delta_pct < -16.5)
