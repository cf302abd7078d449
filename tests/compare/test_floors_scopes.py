"""Floors from fresh machines: A/A dirs grouped by machine (GPU UUID, host) and session, a floor per scope
(within one session, two sessions of one GPU unit, two units) with its pair count, and compare judging each
pair with the floor that fits it, saying which.

The A/A set below is the shape the H200 campaign takes: four fresh machines (units A, B, C, D), two probes each
in one session (``--session``), and a fifth machine that came up on unit A again (another host, a new session).
Sustained FPS of the one config, by hand:

    A: a1 100.0, a2 100.4 (session SA)      B: b1 102.0, b2 101.5 (SB)      C: c1 99.0, c2 99.3 (SC)
    D: d1 101.0, d2 100.2 (SD)              A again: e1 100.9 (SE)

- within one session: a1/a2 +0.400 %, b1/b2 -0.490 %, c1/c2 +0.303 %, d1/d2 -0.792 %: 4 pairs, worst 0.792 %
  -> 1.5 x 0.792 = 1.19 -> 1.5 %;
- two sessions of unit A: a1/e1 +0.900 %, a2/e1 +0.498 %: 1 pair of sessions (SA, SE), worst 0.900 % -> 1.35 ->
  1.5 %, provisional;
- two units: the other 30 dir pairs, over 6 pairs of units; worst b1/c1 (99 - 102) / 102 = -2.941 % -> 4.41 -> 4.5 %.
The trace figures do not move (0 %): 1 % everywhere, the least a trace figure clears.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterbench.compare.compare import Verdict, compare_results
from clusterbench.compare.floors import aa_floors, pair_diffs, read_floors, write_floors
from clusterbench.compare.noise import FloorSet, NoiseFloor
from clusterbench.io.results import load_results
from clusterbench.render.compare import render_compare_json, render_compare_text

from results_data import unit, write

FRESH = [("a1", "GPU-A", "a", "SA", 100.0), ("a2", "GPU-A", "a", "SA", 100.4), ("b1", "GPU-B", "b", "SB", 102.0),
         ("b2", "GPU-B", "b", "SB", 101.5), ("c1", "GPU-C", "c", "SC", 99.0), ("c2", "GPU-C", "c", "SC", 99.3),
         ("d1", "GPU-D", "d", "SD", 101.0), ("d2", "GPU-D", "d", "SD", 100.2), ("e1", "GPU-A", "e", "SE", 100.9)]


def _probe(root: Path, name: str, uuid: str, host: str, session: str, fps: float, rev: str = "r1") -> Path:
    return write(root / name, [{"label": "3x3_s1", "cluster": 3, "cap": 3000, "streams": 1, "batch": 200,
                                "frames": 8000, "kernel_us": 1.0, "h2d_us": 5.0, "d2h_us": 2.0, "roofline_us": 5.0,
                                "binds": "h2d", "sustained_fps": fps}],
                 {"gpu_name": "NVIDIA H200", "gpu_uuid": uuid, "host": host, "session_id": session, "git_rev": rev,
                  "git_dirty": False})


@pytest.fixture()
def fresh(tmp_path: Path):
    return [load_results(_probe(tmp_path, *spec)) for spec in FRESH]


def test_floors_per_scope_with_their_pair_counts(fresh) -> None:
    out = aa_floors(fresh)
    fs = out.floors
    w = fs.floor("sustained_fps", 1, "within_session")
    assert (w.pct, w.pairs, w.differences, w.provisional) == (1.5, 4, 4, False)
    assert w.aa_max_diff_pct == pytest.approx(0.8 / 101.0 * 100)  # d1 101.0 -> d2 100.2
    u = fs.floor("sustained_fps", 1, "same_unit")
    assert (u.pct, u.pairs, u.differences, u.provisional) == (1.5, 1, 2, True)
    assert u.aa_max_diff_pct == pytest.approx(0.9)  # a1 100.0 -> e1 100.9
    x = fs.floor("sustained_fps", 1, "across_units")
    assert (x.pct, x.pairs, x.differences, x.provisional) == (4.5, 6, 30, False)
    assert x.aa_max_diff_pct == pytest.approx(3.0 / 102.0 * 100)  # b1 102.0 -> c1 99.0
    assert "b1 / c1" in x.source and "6 pairs of GPU units of the model, 30 differences" in x.source
    for scope in ("within_session", "same_unit", "across_units"):
        assert fs.floor("h2d_us", 1, scope).pct == 1.0 and fs.floor("h2d_us", 1, scope).aa_max_diff_pct == 0.0
    # grouped by machine (GPU UUID, host): unit A on two hosts is two machines, one unit
    assert [(m.gpu_uuid, m.host, m.dirs, m.sessions) for m in fs.machines] == [
        ("GPU-A", "a", ("a1", "a2"), ("SA",)), ("GPU-B", "b", ("b1", "b2"), ("SB",)),
        ("GPU-C", "c", ("c1", "c2"), ("SC",)), ("GPU-D", "d", ("d1", "d2"), ("SD",)),
        ("GPU-A", "e", ("e1",), ("SE",))]
    assert not out.provisional  # some floors have enough pairs: the file may be written
    assert any(wn.startswith("provisional floors (fewer than 4 pairs): same-unit (1 pair of sessions on one GPU unit)")
               for wn in out.warnings)


def test_compare_uses_the_floor_that_fits_and_says_which(fresh, tmp_path: Path) -> None:
    path = write_floors(aa_floors(fresh).floors, tmp_path / "floors.json")
    fs = read_floors(path)
    fmap = {"NVIDIA H200": fs}
    # a real change of +2 % sustained FPS: 100 -> 102
    base = _probe(tmp_path / "x", "base", "GPU-A", "a", "SA", 100.0, rev="r2")
    cases = {  # the after side, the scope, the floor (% and scope) and the verdict, by hand
        "one session": (("GPU-A", "a", "SA"), "within_session", 1.5, "within_session", Verdict.FASTER),
        "same unit": (("GPU-A", "e", "SE"), "same_unit", 1.5, "same_unit", Verdict.FASTER),
        "two units": (("GPU-B", "b", "SB"), "across_units", 4.5, "across_units", Verdict.SAME),
    }
    for name, ((uuid, host, session), scope, pct, floor_scope, verdict) in cases.items():
        after = _probe(tmp_path / "y", name.replace(" ", "_"), uuid, host, session, 102.0, rev="r3")
        c = compare_results(load_results(base), load_results(after), floors=fmap)
        r = c.row("3x3_s1")
        m = r.metric("sustained_fps")
        assert (r.scope, m.pair_scope, m.floor_scope, m.floor_pct, m.verdict) == (scope, scope, floor_scope, pct,
                                                                                 verdict), name
        assert m.noise == pytest.approx(pct)  # % of 100 FPS
        doc = json.loads(json.dumps(render_compare_json(c)))
        js = doc["rows"][0]["metrics"]["sustained_fps"]
        assert (doc["rows"][0]["scope"], js["pair_scope"], js["floor_scope"]) == (scope, scope, floor_scope)
        text = " ".join(render_compare_text(c, 80))
        said = {"within_session": "pairs: one session: within-session floors",
                "same_unit": "pairs: two sessions on one GPU unit (GPU-A): same-unit floors",
                "across_units": "pairs: two GPU units (GPU-A, GPU-B): across-units floors"}[scope]
        assert said in text, text
        if scope == "same_unit":  # made of 1 pair: provisional, and said so
            assert m.floor_provisional and "provisional: 1 pair" in m.reason
            assert any(w.message.startswith("provisional floors judged (same-unit") for w in c.warnings)


def _set(*floors: tuple[str, float]) -> FloorSet:
    return FloorSet("G", tuple(NoiseFloor("sustained_fps", False, pct, "test", 0.1, scope, 5, 5, False)
                               for scope, pct in floors), 20.0, "test", version=2)


@pytest.mark.parametrize(("floors", "scope", "pct", "used", "stand_in"), [
    # the floor of the pair's scope
    ((("within_session", 1.0), ("same_unit", 2.0), ("across_units", 3.0)), "same_unit", 2.0, "same_unit", None),
    # never below a narrower scope's floor: a pair of two units carries one unit's noise too
    ((("within_session", 1.0), ("same_unit", 2.0), ("across_units", 1.5)), "across_units", 2.0, "same_unit", None),
    # a missing scope: the nearest broader floor judges (safe) ...
    ((("same_unit", 2.0), ("across_units", 3.0)), "within_session", 2.0, "same_unit", "broader"),
    # ... else the nearest narrower one stands in, and says so
    ((("within_session", 1.0), ("same_unit", 2.0)), "across_units", 2.0, "same_unit", "narrower"),
    ((("within_session", 1.0),), "across_units", 1.0, "within_session", "narrower"),
])  # fmt: skip
def test_which_floor_judges_a_pair(floors, scope: str, pct: float, used: str, stand_in: str | None) -> None:
    use = _set(*floors).use("sustained_fps", 1, scope)
    assert (use.floor.pct, use.floor.scope, use.stand_in) == (pct, used, stand_in)
    assert _set(*floors).use("kernel_us", 1, scope) is None


def test_an_unsteady_sustained_figure_makes_no_floor(tmp_path: Path) -> None:
    # b2's sustained runs never settled: its pairs give no sustained difference (compare never judges such a
    # figure), so the within-session worst is d1/d2's 0.792 % over 3 pairs, and a warning names it
    dirs = []
    for name, uuid, host, session, fps in FRESH:
        path = _probe(tmp_path, name, uuid, host, session, fps)
        if name == "b2":
            path = write(tmp_path / "b2u", [{"label": "3x3_s1", "cluster": 3, "cap": 3000, "streams": 1,
                                             "batch": 200, "frames": 8000, "kernel_us": 1.0, "h2d_us": 5.0,
                                             "d2h_us": 2.0, "roofline_us": 5.0, "binds": "h2d",
                                             "sustained_fps": 150.0, "sustained_steady": False}],
                         {"gpu_name": "NVIDIA H200", "gpu_uuid": uuid, "host": host, "session_id": session,
                          "git_rev": "r1", "git_dirty": False})
        dirs.append(load_results(path))
    out = aa_floors(dirs)
    w = out.floors.floor("sustained_fps", 1, "within_session")
    assert (w.pairs, w.aa_max_diff_pct) == (3, pytest.approx(0.8 / 101.0 * 100))
    # 150 FPS would have made a 47 % across-units difference; without it the worst is b1/c1's 2.941 % again
    assert out.floors.floor("sustained_fps", 1, "across_units").aa_max_diff_pct == pytest.approx(3.0 / 102.0 * 100)
    assert "sustained FPS not steady, left out of the floors: b2u 3x3_s1" in out.warnings
    assert out.floors.floor("h2d_us", 1, "within_session").pairs == 4  # the trace figures still count


def test_an_unsteady_figure_with_its_processes_makes_a_floor(tmp_path: Path) -> None:
    # compare judges sustained FPS by the process medians whenever both sides carry them, steady or not, so the
    # floors count those pairs too. Two units, one probe each; u2's third process did not settle.
    #   u1: processes 100.0, 100.4, 99.8 -> median 100.0      u2: 103.0, 102.6, {102.9, unsettled} -> median 102.9
    # across units: (102.9 - 100.0) / 100.0 = +2.9 %; floor 1.5 x 2.9 = 4.35 -> 4.5 %, 1 pair (provisional)
    dirs = []
    for name, uuid, procs in (("u1", "GPU-1", [[100.0], [100.4], [99.8]]),
                              ("u2", "GPU-2", [[103.0], [102.6], {"values": [102.9, 99.0, 104.0], "settled": False}])):
        path = write(tmp_path / name, [{"label": "3x3_s1", "cluster": 3, "cap": 3000, "streams": 1, "batch": 200,
                                        "frames": 8000, "kernel_us": 1.0, "h2d_us": 5.0, "d2h_us": 2.0,
                                        "roofline_us": 5.0, "binds": "h2d", "processes": procs,
                                        "sustained_steady": name == "u1"}],
                     {"gpu_name": "NVIDIA H200", "gpu_uuid": uuid, "host": name, "session_id": f"S{name}",
                      "git_rev": "r1", "git_dirty": False})
        dirs.append(load_results(path))
    assert dirs[1].rows[0].sustained_fps == pytest.approx(102.9)
    out = aa_floors(dirs)
    f = out.floors.floor("sustained_fps", 1, "across_units")
    assert (f.pairs, f.aa_max_diff_pct, f.pct, f.provisional) == (1, pytest.approx(2.9), 4.5, True)
    assert not any("not steady" in w for w in out.warnings)
    # and compare judges that pair (no NOT COMPARABLE unsteady)
    row = compare_results(dirs[0], dirs[1], floors={}).rows[0]
    m = next(x for x in row.metrics if x.name == "sustained_fps")
    assert m.verdict is not Verdict.NOT_COMPARABLE


H100 = "NVIDIA H100 80GB HBM3"


def _linked_probe(root: Path, name: str, uuid: str, duplex_d2h: float, d2h: float, h2d: float, fps: float,
                  with_unit: bool = True) -> Path:
    env = {"gpu_name": H100, "gpu_uuid": uuid, "host": name, "session_id": f"S-{name}", "git_rev": "r1",
           "git_dirty": False}
    if with_unit:
        env["unit"] = {**unit(uuid, name, f"boot-{name}", duplex_d2h=duplex_d2h), "gpu_name": H100}
    return write(root / name, [{"label": "9x9_s4", "cluster": 9, "cap": 3000, "streams": 4, "batch": 200,
                                "frames": 8000, "kernel_us": 0.87, "h2d_us": h2d, "d2h_us": d2h, "roofline_us": d2h,
                                "binds": "d2h", "sustained_fps": fps}], env)


@pytest.mark.parametrize("with_unit", [True, False])
def test_across_units_the_link_bound_figures_are_differences_of_link_shares(tmp_path: Path, with_unit: bool) -> None:
    # Two units of one build whose D2H with both directions at once ran 50.7 and 40.0 GB/s (alone 55.0 on both;
    # H2D 40.0 at once and 55.0 alone on both), a 4-stream row bound by D2H. The floor of two units is made of
    # the change compare judges across them (compare/link.py): on several streams the change nearest 0 between
    # the shares of the duplex rates and those of the rates alone. By hand:
    #   sustained FPS 89,298 -> 70,183: duplex (70,183 / 40.0) / (89,298 / 50.7) = 0.996181, alone 0.785942:
    #     -0.3819 %;
    #   D2H (and the roofline, bound by D2H) 11.10 -> 14.10 µs: duplex (14.10 x 40.0) / (11.10 x 50.7) = 1.002186,
    #     alone 14.10 / 11.10 = 1.270270: +0.2186 %;
    #   H2D 6.60 -> 6.70 µs: both units' H2D rates agree, so +1.5152 % either way; the kernel 0 %.
    # Without the units' links the figures are as measured: sustained -21.41 %, D2H +27.03 %.
    a = load_results(_linked_probe(tmp_path, "a", "GPU-aaaa", 50.7, 11.10, 6.60, 89_298.0, with_unit))
    b = load_results(_linked_probe(tmp_path, "b", "GPU-bbbb", 40.0, 14.10, 6.70, 70_183.0, with_unit))
    got = {d.metric: d for d in pair_diffs([a, b])}
    assert {d.scope for d in got.values()} == {"across_units"}
    if with_unit:
        want = {"sustained_fps": (70_183 / 40.0) / (89_298 / 50.7) - 1, "d2h_us": (14.10 * 40.0) / (11.10 * 50.7) - 1,
                "roofline_us": (14.10 * 40.0) / (11.10 * 50.7) - 1, "h2d_us": 6.70 / 6.60 - 1, "kernel_us": 0.0}
        assert want["sustained_fps"] * 100 == pytest.approx(-0.3819, abs=1e-4)
        assert want["d2h_us"] * 100 == pytest.approx(0.2186, abs=1e-4)
        linked = {"sustained_fps", "d2h_us", "roofline_us", "h2d_us"}
    else:
        want = {"sustained_fps": 70_183 / 89_298 - 1, "d2h_us": 14.10 / 11.10 - 1, "roofline_us": 14.10 / 11.10 - 1,
                "h2d_us": 6.70 / 6.60 - 1, "kernel_us": 0.0}
        linked = set()
    for m, w in want.items():
        assert got[m].diff_pct == pytest.approx(w * 100, abs=1e-9), m
        assert got[m].linked == (m in linked), m
    fs = aa_floors([a, b], min_pairs=1).floors
    fps = fs.floor("sustained_fps", 4, "across_units")
    assert fps.aa_max_diff_pct == pytest.approx(abs(want["sustained_fps"]) * 100)
    assert ("as shares of each unit's link" in fps.source) == with_unit
