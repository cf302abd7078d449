"""The history of the committed results: 3x3_s1_uncontended's kernel, 34 points over 9 builds, shows the kernel's
steps as changes of the build, though every change of build in these dirs came with a change of config between
consecutive points.

Worked out by hand from the committed dirs' env.json (git rev, dirty flag, time) and probes.csv (the config
columns, the finder, kernel_us), in the order measured. Each point is set against the nearest earlier point of
its config (every config column but the finder, and the same workload parameters). 9 git revs:

- 2026-12-01_f32_aa1 (fb200a5) against 2026-11-29_f32 (cb597a5): 1.016 -> 1.017 µs, SAME;
- 2026-12-01_f32 (30b726a) against 2026-12-01_f32_aa3: SAME;
- 2026-12-01_f32_gpus_all (d5b1ab9) against 2026-12-01_f32: SAME;
- 2026-12-01_f32_tracking_coop2 (e568532) against tracking_coop (d5b1ab9), the tracking coop kernel: 3.728 ->
  2.967 µs (-20.4 %), FASTER;
- 2026-12-01_f32_slide (efa5d09) against gpus_all (d5b1ab9): the same 20,000-frame frozen config (the smoke dir
  between them ran 8,000 frames), the build choosing the slide kernel over the two-phase one: 1.016 -> 0.363 µs
  (-64.2 %), FASTER;
- 2026-12-02_f32_aa_m2_1 (2991d03) against 2026-12-01_f32_smoke (4dfa5e3), the 8,000-frame smoke config: SAME.

Every other point is of a build already seen in its config, or of a config no earlier point ran (named as a
change of config against the previous point).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from clusterbench.compare.compare import Verdict
from clusterbench.compare.floors import read_floors
from clusterbench.compare.history import history_series
from clusterbench.io.history import import_dirs, series

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
LABEL = "3x3_s1_uncontended"
BUILD_CHANGES = [  # (before dir, after dir, verdict)
    ("2026-11-29_f32", "2026-12-01_f32_aa1", "SAME"),
    ("2026-12-01_f32_aa3", "2026-12-01_f32", "SAME"),
    ("2026-12-01_f32", "2026-12-01_f32_gpus_all", "SAME"),
    ("2026-12-01_f32_tracking_coop", "2026-12-01_f32_tracking_coop2", "FASTER"),
    ("2026-12-01_f32_gpus_all", "2026-12-01_f32_slide", "FASTER"),
    ("2026-12-01_f32_smoke", "2026-12-02_f32_aa_m2_1", "SAME"),
]


def _kernel(name: str) -> float:
    with open(RESULTS / name / "probes.csv", newline="") as fh:
        return next(float(r["kernel_us"]) for r in csv.DictReader(fh) if r["label"] == LABEL)


@pytest.fixture(scope="module")
def kernel_series(tmp_path_factory: pytest.TempPathFactory):
    db = tmp_path_factory.mktemp("history") / "history.db"
    import_dirs(db, sorted(p for p in RESULTS.iterdir() if (p / "probes.csv").is_file()))
    pts = series(db, LABEL, "kernel_us")
    return history_series(LABEL, "kernel_us", pts, {"NVIDIA H200": read_floors(RESULTS / "floors" / "NVIDIA_H200.json")})


def test_the_kernel_steps_show_as_changes_of_the_build(kernel_series) -> None:
    s = kernel_series
    assert len(s.points) == 34 and len({p.git_rev for p in s.points}) == 9  # 2db9fec (a dirty tree) among them
    builds = [(t.before.dir_name, t.after.dir_name, t.delta.verdict.value) for t in s.build_changes]
    assert builds == BUILD_CHANGES
    for t in s.build_changes:
        assert (t.delta.before, t.delta.after) == (_kernel(t.before.dir_name), _kernel(t.after.dir_name))
    steps = [(t.before.dir_name, t.after.dir_name) for t in s.steps]
    assert steps == [("2026-12-01_f32_tracking_coop", "2026-12-01_f32_tracking_coop2"),
                     ("2026-12-01_f32_gpus_all", "2026-12-01_f32_slide")]
    slide = s.steps[1]
    assert slide.delta.delta_pct == pytest.approx((0.363 - 1.016) / 1.016 * 100, abs=0.1)  # -64.2 %
    assert slide.delta.verdict is Verdict.FASTER and slide.skipped == 2  # tracking_coop2 and smoke between
    assert [c.column for c in slide.chose] == ["finder"] and "slide" in slide.chose[0].after


def test_the_text_says_which_earlier_point_judged(kernel_series) -> None:
    from clusterbench.render.history import render_history_text

    lines = render_history_text(kernel_series, 80)
    row15 = next(ln for ln in lines if ln.startswith("  15 "))
    assert row15.endswith("▶ FASTER -64.2 % vs #12") and all(len(ln) <= 80 for ln in lines)
    assert any(ln.startswith("6 change(s) of build, 2 beyond the noise") for ln in lines)
