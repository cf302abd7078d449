"""A/A: three full sweeps of one build on the H200 (2026-12-01, `clusterbench probe --tag aa1|aa2|aa3`,
every config at 20,000 frames, 3 sustained repeats each). Kept as tests/data/compare/aa/ (probes.csv
and env.json only). Every metric of every row of every pair must read SAME, or NOT COMPARABLE where
the rules say so (multi-stream transfer figures across sessions)."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import pytest

from clusterbench.compare.compare import Reason, Verdict, compare_results, judge_gate
from clusterbench.compare.floors import aa_floors, read_floors
from clusterbench.compare.noise import SEED_FLOORS
from clusterbench.io.results import load_results

ROOT = Path(__file__).resolve().parents[2]
AA = ROOT / "tests" / "data" / "compare" / "aa"
DIRS = [AA / f"2026-12-01_f32_aa{i}" for i in (1, 2, 3)]
# A second A/A pair, on the two-columns-per-lane frozen kernel (2026-12-01, `clusterbench probe --config
# configs.toml --tag slide|slide_aa`, one device call, git efa5d09): the same rules must hold on a kernel
# three times faster than the one the floors were measured on.
AA_SLIDE = [ROOT / "tests" / "data" / "compare" / "aa_slide" / f"2026-12-01_f32_{t}" for t in ("slide", "slide_aa")]
PAIRS = [(DIRS[i], DIRS[j]) for i, j in itertools.combinations(range(3), 2)] + [tuple(AA_SLIDE)]
METRICS = ("kernel_us", "h2d_us", "d2h_us", "roofline_us", "sustained_fps")
# The H200 floors file: `clusterbench floors` of the five A/A dirs above (results/floors/NVIDIA_H200.json; a copy)
H200_FILE = ROOT / "tests" / "data" / "results" / "floors" / "NVIDIA_H200.json"
H200 = read_floors(H200_FILE)
# Pairs the floors were not computed in: each pair the other way round (the later session as "before").
REVERSED = [(b, a) for a, b in PAIRS]


def _csv(d: Path) -> dict[str, dict[str, str]]:
    with open(d / "probes.csv", newline="") as fh:
        return {r["label"]: r for r in csv.DictReader(fh)}


def _repeats(d: Path, label: str) -> list[float]:
    return json.loads((d / "env.json").read_text())["configs"][label]["sustained_fps"]


@pytest.mark.parametrize("floors", ["h200", "seed"])
@pytest.mark.parametrize(("before", "after"), PAIRS + REVERSED, ids=[f"{a.name}-{b.name}" for a, b in PAIRS + REVERSED])
def test_aa_pairs_read_same_or_not_comparable(before: Path, after: Path, floors: str) -> None:
    fmap = {"NVIDIA H200": H200} if floors == "h200" else {}
    c = compare_results(load_results(before), load_results(after), floors=fmap)
    assert [fs.seed for fs in c.floors] == [floors == "seed"]
    assert c.across == () and len(c.rows) == 4
    for r in c.rows:
        assert r.mismatches == ()
        for m in r.metrics:
            assert m.name in METRICS
            if m.verdict is Verdict.NOT_COMPARABLE:
                # the one rule that applies: several streams, different sessions whose units' links were not
                # measured (dirs made before that), a transfer figure within the drift bound
                assert r.streams == 4 and m.code is Reason.SESSION_DRIFT
                assert m.name in ("h2d_us", "d2h_us", "roofline_us") and m.bound_pct == 20.0
            else:
                assert m.verdict is Verdict.SAME, (r.label, m)
                # without a floors file the default bounds judge, and say so; the file's floors are measured
                assert m.provisional is (floors == "seed"), (r.label, m)
        assert r.metric("sustained_fps").n_before == 3 and r.metric("sustained_fps").n_after == 3
        # a 4-stream row's roofline binds on a transfer and cannot be judged across these sessions: end to end
        # NOT COMPARABLE, never SAME; a 1-stream row's roofline and sustained FPS both read SAME
        assert r.end_to_end.value == ("not_comparable" if r.streams == 4 else "same"), r.label
        assert not r.kernel_invisible
    roofs = [(lb, "roofline_us") for lb in ("3x3_s1_uncontended", "9x9_s1_uncontended")]
    fps = [(r.label, "sustained_fps") for r in c.rows]  # a floor or a default bound judges sustained FPS
    gate = judge_gate(c, 0.0, unjudged_pass=True)  # even a 0 % gate passes: nothing got worse beyond the noise
    assert gate.passed and sorted(gate.judged) == sorted(roofs + fps) and not gate.failures
    # without --gate-unjudged pass the gate cannot pass: the 4-stream rooflines could not be judged
    strict = judge_gate(c, 5.0)
    assert not strict.passed and not strict.failures
    assert sorted(gate.not_checked) == sorted(strict.not_checked) == [
        ("3x3_s4", "roofline_us", "session_drift"), ("9x9_s4", "roofline_us", "session_drift")]


def test_the_within_session_spread_alone_would_have_invented_a_difference() -> None:
    # aa1 -> aa3, 3x3_s1_uncontended: medians 111,583.45 -> 111,523.24 FPS (-60.2 FPS), spreads 27.4 and
    # 4.8 FPS. The old rule (noise = the larger spread) called that a change; the 0.5 % floor (558 FPS) does not,
    # and the 1 % minimum effect above it (1,116 FPS) sets the noise.
    b, a = _csv(DIRS[0])["3x3_s1_uncontended"], _csv(DIRS[2])["3x3_s1_uncontended"]
    diff = float(a["sustained_fps"]) - float(b["sustained_fps"])
    spread = max(float(b["sustained_fps_spread"]), float(a["sustained_fps_spread"]))
    assert abs(diff) > spread
    rb, ra = _repeats(DIRS[0], "3x3_s1_uncontended"), _repeats(DIRS[2], "3x3_s1_uncontended")
    assert min(rb) > max(ra)  # every aa1 repeat above every aa3 repeat: the bootstrap interval excludes 1
    c = compare_results(load_results(DIRS[0]), load_results(DIRS[2]), floors={"NVIDIA H200": H200})
    m = c.row("3x3_s1_uncontended").metric("sustained_fps")
    assert (m.verdict, m.code) == (Verdict.SAME, Reason.SMALL_EFFECT)
    assert m.interval.high == pytest.approx(max(ra) / min(rb)) and m.interval.excludes_one
    assert m.noise == pytest.approx(0.01 * float(b["sustained_fps"])) and m.noise_from == "min_effect"


def test_floors_cover_the_measured_aa_spread() -> None:
    # the largest A/A difference per metric and stream class, worked out here from the CSVs
    rows = [_csv(d) for d in DIRS]
    for label in rows[0]:
        streams = int(rows[0][label]["streams"])
        for m in METRICS:
            vals = [float(r[label][m]) for r in rows]
            worst = max(abs(vals[q] - vals[p]) / vals[p] * 100 for p, q in itertools.combinations(range(3), 2))
            assert worst < H200.floor(m, streams).pct, (label, m, worst)


def _worst(dirs: list[Path], metric: str, multi: bool) -> float:
    rows = [_csv(d) for d in dirs]
    out = 0.0
    for label in rows[0]:
        if (int(rows[0][label]["streams"]) > 1) != multi:
            continue
        vals = [float(r[label][metric]) for r in rows]
        out = max(out, max(abs(vals[q] - vals[p]) / vals[p] * 100
                           for p, q in itertools.combinations(range(len(vals)), 2)))
    return out


def test_floors_command_reproduces_the_h200_floors() -> None:
    # The floors compare/noise.py held as constants (measured on the H200, pasted by hand):
    # trace figures 1 % (1 stream and several), multi-stream H2D, D2H and roofline 4.5 %, sustained FPS 0.5 %
    # on 1 stream and 7 % on several. The 7 % came from the first A/A pair (3x3 s4 +4.55 %), whose dirs were
    # not kept; from the committed dirs the rule gives 1.5 % there. Every other floor is reproduced exactly.
    constants = {("kernel_us", False): 1.0, ("kernel_us", True): 1.0, ("h2d_us", False): 1.0, ("h2d_us", True): 4.5,
                 ("d2h_us", False): 1.0, ("d2h_us", True): 4.5, ("roofline_us", False): 1.0,
                 ("roofline_us", True): 4.5, ("sustained_fps", False): 0.5, ("sustained_fps", True): 7.0}
    out = aa_floors([load_results(d) for d in DIRS + AA_SLIDE])
    fs = out.floors
    assert out.warnings == () and fs.gpu_name == "NVIDIA H200"
    got = {(f.metric, f.multi_stream): f.pct for f in fs.floors}
    assert {k: v for k, v in got.items() if k != ("sustained_fps", True)} == \
        {k: v for k, v in constants.items() if k != ("sustained_fps", True)}
    assert got[("sustained_fps", True)] == 1.5
    # the rule by hand: worst A/A difference of either set, x 1.5, up to the next 0.5 %, at least 0.5 % (1 % traces)
    worst_h2d = max(_worst(DIRS, "h2d_us", True), _worst(AA_SLIDE, "h2d_us", True))  # 2.97 % (slide pair, 9x9 s4)
    assert fs.floor("h2d_us", 4).aa_max_diff_pct == pytest.approx(worst_h2d)
    assert 2.9 < worst_h2d < 3.0 and fs.floor("h2d_us", 4).pct == 4.5  # 1.5 x 2.97 = 4.46 -> 4.5
    worst_fps4 = max(_worst(DIRS, "sustained_fps", True), _worst(AA_SLIDE, "sustained_fps", True))  # 0.68 %
    assert fs.floor("sustained_fps", 4).aa_max_diff_pct == pytest.approx(worst_fps4)  # 1.5 x 0.68 = 1.02 -> 1.5
    # every pair of these dirs is two sessions on one GPU unit: the triple on one unit (3 pairs of sessions), the
    # slide pair on another (1 pair): 4 pairs, each floor same-unit, and not provisional (4 is the minimum)
    assert {f.scope for f in fs.floors} == {"same_unit"}
    assert {(f.pairs, f.provisional) for f in fs.floors} == {(4, False)}
    # 1 stream: 2 labels x (3 + 1) dir pairs = 8 differences; several streams, H2D/D2H/roofline on one link: x 3
    assert fs.floor("kernel_us", 1).differences == 8 and fs.floor("h2d_us", 4).differences == 24
    assert [(m.gpu_uuid[:12], len(m.dirs), len(m.sessions)) for m in fs.machines] == [("GPU-a209f1f8", 3, 3),
                                                                                       ("GPU-84db8b66", 2, 2)]
    # the version 1 file (kept under tests/data) is what the command made of these dirs before floors had scopes:
    # read as same-unit floors without pair counts, every figure the same
    assert H200.version == 1
    assert [(f.metric, f.multi_stream, f.pct, f.aa_max_diff_pct) for f in H200.floors] == \
        [(f.metric, f.multi_stream, f.pct, f.aa_max_diff_pct) for f in fs.floors]
    assert {(f.scope, f.pairs) for f in H200.floors} == {("same_unit", None)}
    assert H200.drift_bound_pct == fs.drift_bound_pct == SEED_FLOORS.drift_bound_pct
    assert [s.dirs for s in H200.sets] == [s.dirs for s in fs.sets]
