"""compare.aa: the A/A pairs among the committed results dirs and what compare calls them.

Worked out by hand from the dirs' env.json (git rev, dirty flag, session) and probes.csv (labels, config
columns): of one build and a clean tree there are
- git fb200a5: 2026-12-01_f32_aa1, aa2, aa3 (3 pairs; 4 rows alike: 3x3 and 9x9, 1 and 4 streams);
- git efa5d09: 2026-12-01_f32_slide and slide_aa (1 pair, 4 rows alike);
- git cb597a5: 2026-11-29_f32, f32_cupti, f32_zerocopy, f64. Only f32 / f32_cupti shares like-for-like figures:
  its 2 rows in common (3x3_s1, 9x9_s1) differ in the tracer, which touches the 4 trace figures only, so their
  sustained FPS is an A/A figure; f64 differs in pedestal_dtype on every row; zerocopy shares no label;
- git 30b726a: 2026-12-01_f32 and aare-cuda differ in workload and pedestal on every row;
- git d5b1ab9: gpus_all and tracking_coop share one label, whose pedestal differs.
Left out: the tracking dirs (dirty tree), smoke and tracking_coop2 (alone of their build), and the copies
under tests/data/results (the same session and rows as their originals).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.compare.aa import aa_groups, find_results_dirs, judge_aa, load_dirs
from clusterbench.compare.floors import read_floors
from clusterbench.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
H200 = read_floors(ROOT / "tests" / "data" / "results" / "floors" / "NVIDIA_H200.json")


@pytest.fixture(scope="module")
def committed():
    paths, skipped = find_results_dirs([ROOT / "results", ROOT / "tests" / "data" / "results"])
    assert {Path(p).name for p, _ in skipped} == {"floors"}
    results, unreadable = load_dirs(paths)
    assert unreadable == ()
    return results


def test_the_a_a_groups_of_the_committed_dirs(committed) -> None:
    groups, left = aa_groups(committed)
    names = sorted(tuple(sorted(r.name for r in g)) for g in groups)
    assert names == sorted([
        ("2026-11-29_f32", "2026-11-29_f32_cupti", "2026-11-29_f32_zerocopy", "2026-11-29_f64"),
        ("2026-12-01_f32", "2026-12-01_f32_aare-cuda"),
        ("2026-12-01_f32_aa1", "2026-12-01_f32_aa2", "2026-12-01_f32_aa3"),
        ("2026-12-01_f32_gpus_all", "2026-12-01_f32_tracking_coop"),
        ("2026-12-01_f32_slide", "2026-12-01_f32_slide_aa"),
        # probes of one build on freshly started machines (m3 is a second sitting of m2's unit), with the
        # deliberate delays of one config probed in two of their sessions
        tuple(sorted([f"2026-12-02_f32_aa_m{m}_{i}" for m, n in ((2, 3), (3, 3), (4, 2), (5, 2), (6, 2), (7, 2)) for i in range(1, n + 1)]
                     + [f"2026-12-02_f32_delay{d}_m{m}" for d in (5, 20) for m in (2, 3)])),
    ])  # fmt: skip
    why = {Path(p).name if "/" in p else p: w for p, w in left}
    assert why["2026-12-01_f32_tracking"].startswith("dirty tree at 2db9fec09c3f")
    assert "no A/A partner" in why["2026-12-01_f32_smoke"] and "no A/A partner" in why["2026-12-01_f32_tracking_coop2"]
    copies = [p for p, w in left if w.startswith("a copy of")]
    assert sorted(Path(p).parent.name for p in copies) == ["results"] * 4  # the four under tests/data/results


@pytest.mark.parametrize("floors", ["h200", "seed"])
def test_every_committed_a_a_pair_reads_same_or_not_comparable(committed, floors) -> None:
    fmap = {"NVIDIA H200": H200} if floors == "h200" else {}
    older = [r for r in committed if not r.name.startswith("2026-12-02")]  # the fresh-machine dirs: below
    summary = judge_aa(older, lambda b, a: fmap)
    pairs = sorted({tuple(sorted((j.before, j.after))) for j in summary.judged})
    assert pairs == [("2026-11-29_f32", "2026-11-29_f32_cupti"),
                     ("2026-12-01_f32_aa1", "2026-12-01_f32_aa2"), ("2026-12-01_f32_aa1", "2026-12-01_f32_aa3"),
                     ("2026-12-01_f32_aa2", "2026-12-01_f32_aa3"), ("2026-12-01_f32_slide", "2026-12-01_f32_slide_aa")]
    assert len(summary.judged) == 10  # each way round
    assert summary.moved == 0 and summary.false_positive_rate == 0.0
    for j in summary.judged:
        if "cupti" in j.before + j.after:
            # 2 rows in common: sustained FPS like for like (2 verdicts), the 4 trace figures across the tracer (8)
            assert (j.verdicts, j.not_like_for_like) == (2, 8)
            assert j.same == 2  # a floor, or without a file the default bound, judges sustained FPS
        else:
            # 4 rows x 5 figures; the two 4-stream rows' H2D, D2H and roofline (binding on H2D or D2H) are of two
            # sessions, within the 20 % drift bound
            assert (j.verdicts, j.not_like_for_like) == (20, 0)
            nc = dict(j.not_comparable)
            assert nc == {"session_drift": 6}  # no floors file needed: the default bounds judge the rest
            assert j.same == 20 - 6


def test_no_committed_a_a_pair_moves_with_the_committed_floors_file(committed) -> None:
    # results/floors/NVIDIA_H200.json, whatever A/A runs it was last made of: no pair reads FASTER or SLOWER
    fs = read_floors(ROOT / "results" / "floors" / "NVIDIA_H200.json")
    summary = judge_aa(committed, lambda b, a: {"NVIDIA H200": fs})
    # 5 older pairs, and C(14, 2) = 91 pairs of the 14 fresh-machine A/A dirs plus the 2 pairs of the delayed
    # dirs of one delay (delay5_m2/delay5_m3, delay20_m2/delay20_m3); each way round
    assert len(summary.judged) == 2 * (5 + 91 + 2)
    assert summary.moved == 0, [(j.before, j.after, j.moved) for j in summary.judged if j.moved]


def test_no_committed_a_a_pair_moves_without_a_floors_file(committed) -> None:
    # no floors file at all: the default bounds (compare/bounds.py) judge every pair, marked provisional,
    # and every figure of every committed A/A pair reads SAME or NOT COMPARABLE, never FASTER or SLOWER
    summary = judge_aa(committed, lambda b, a: {})
    assert len(summary.judged) == 2 * (5 + 91 + 2)
    assert summary.moved == 0, [(j.before, j.after, j.moved) for j in summary.judged if j.moved]
    assert {code for j in summary.judged for code, _ in j.not_comparable} <= {"session_drift", "unsteady"}


def test_a_delay_is_never_an_a_a_partner(committed) -> None:
    summary = judge_aa(committed, lambda b, a: {})
    delayed = [(p, w) for p, w in summary.left_out if "delay" in p and "aa_m" in p]
    assert len(delayed) == 14 * 4  # every fresh-machine A/A dir against each of the four delayed dirs
    assert all("delay_us_per_frame" in w and "not an A/A pair" in w for _, w in delayed)


def test_floors_of_one_sitting_misjudge_fresh_machines(committed) -> None:
    # tests/data's copy of the floors made of pairs of one machine in one sitting (0.5-1 % for sustained FPS)
    # calls some fresh-machine A/A pairs FASTER or SLOWER: why floors must come from fresh machines
    fresh = [r for r in committed if r.name.startswith("2026-12-02_f32_aa_m")]
    summary = judge_aa(fresh, lambda b, a: {"NVIDIA H200": H200})
    assert summary.moved > 0
    # sustained FPS above all (1-stream floors of 0.5 % against units that differ by about 1 %)
    assert "sustained_fps" in {m.metric for j in summary.judged for m in j.moved}


def test_find_results_dirs_refuses_a_root_that_is_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a folder"):
        find_results_dirs([tmp_path / "nowhere"])


def test_floors_refuse_dirs_that_ran_different_work(committed) -> None:
    from clusterbench.compare.floors import aa_floors

    by = {r.name: r for r in committed}
    dirs = [by["2026-12-02_f32_aa_m2_1"], by["2026-12-02_f32_aa_m2_2"], by["2026-12-02_f32_delay5_m2"]]
    with pytest.raises(InputError, match=r"ran different work \(3x3_s1_uncontended: delay_us_per_frame – → 0\.43\)"):
        aa_floors(dirs)
