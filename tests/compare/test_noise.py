"""compare.noise and compare.floors: the floor rule, the noise a change must clear, the A/A session spread,
the floors file and where compare finds it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterbench.compare.floors import (aa_floors, find_floors, floors_file, floors_for, pair_diffs_pct, read_floors,
                                         session_spreads, write_floors)
from clusterbench.compare.noise import (COMPARED_METRICS, SEED_FLOORS, seed_floors, TRACE_METRICS, NoiseFloor, drift_bound_pct,
                                        noise_of, suggest_floor_pct)
from clusterbench.errors import InputError
from clusterbench.io.results import load_results

from results_data import write


def test_the_default_bounds() -> None:
    # without a floors file and without a model (SEED_FLOORS): the H200's A/A bounds (compare/bounds.py), twice
    # over (rounded up to 0.5 %: a model without A/A runs of its own), for every compared metric, stream class and
    # scope, each provisional, and the seed's 20 % drift bound; unknown streams count as several. The H200's own:
    # (within, same unit, across) sustained 1 stream 1.5 / 2 / 2, several 1 / 3 / 3.5, H2D several 10.5 / 6 / 17.5,
    # kernel 1 stream 1 / 1.5 / 2
    for scope, fps1, fps4, h2d4, k1 in (("within_session", 3.0, 2.0, 21.0, 2.0), ("same_unit", 4.0, 6.0, 12.0, 3.0),
                                        ("across_units", 4.0, 7.0, 35.0, 4.0)):
        assert SEED_FLOORS.floor("sustained_fps", 1, scope).pct == fps1
        assert SEED_FLOORS.floor("sustained_fps", 4, scope).pct == fps4
        assert SEED_FLOORS.floor("h2d_us", 4, scope).pct == h2d4 and SEED_FLOORS.floor("kernel_us", 1, scope).pct == k1
    assert all(f.provisional and f.seed for f in SEED_FLOORS.floors) and len(SEED_FLOORS.floors) == 30
    assert SEED_FLOORS.drift_bound_pct == 20.0 and SEED_FLOORS.floor("h2d_us", None).multi_stream is True
    assert SEED_FLOORS.seed and "no floors file" in SEED_FLOORS.text and "NVIDIA H200" in SEED_FLOORS.text
    # a pair of two sessions on one unit takes the larger of its own and the within-session bound: 1-stream H2D
    # moved 1.11 % within one session (2 %, twice: 4 %) and 0.85 % across sessions (1.5 %, twice: 3 %): 4 %
    assert SEED_FLOORS.use("h2d_us", 1, "same_unit").floor.pct == 4.0
    # the H200 itself is judged by its own bounds, not widened
    h200 = seed_floors("NVIDIA H200")
    assert h200.floor("h2d_us", 1, "same_unit").pct == 1.5 and h200.floor("kernel_us", 1, "across_units").pct == 2.0
    assert "times 2" not in h200.floor("kernel_us", 1, "across_units").source
    assert "times 2 on a model without A/A runs of its own" in SEED_FLOORS.floor("kernel_us", 1, "across_units").source


def test_default_bounds_are_the_largest_over_the_models_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    from clusterbench.compare import bounds

    rows = (("kernel_us", False, "across_units", 4.0, 6, 2.5), ("sustained_fps", True, "same_unit", 1.0, 6, 0.6))
    monkeypatch.setitem(bounds.MEASURED, "GPU X", rows)
    other = {(b.metric, b.multi_stream, b.scope): b for b in bounds.default_bounds("GPU Y")}
    # GPU X's 4 % beats the H200's 2 % for the 1-stream kernel across units, twice on GPU Y (no A/A runs of its
    # own): 8 %; GPU X's 1 % loses to the H200's 3 %: 6 %
    assert (other[("kernel_us", False, "across_units")].pct, other[("kernel_us", False, "across_units")].gpu_name) == \
        (8.0, "GPU X")
    assert other[("sustained_fps", True, "same_unit")].pct == 6.0
    # a model measured gets its own rows only
    own = bounds.default_bounds("GPU X")
    assert [(b.metric, b.pct) for b in own] == [("kernel_us", 4.0), ("sustained_fps", 1.0)]
    assert own[0].source == ("default bound, measured on GPU X: 6 pairs of GPU units, largest A/A difference 2.50 %")


def test_noise_is_the_larger_of_floor_and_spreads() -> None:
    # 7 % of 150,000 = 10,500 FPS beats a 4,350 FPS spread
    assert noise_of(150_000.0, 7.0, (4_350.0, 200.0)) == (pytest.approx(10_500.0), "floor")
    # a spread of 12,000 FPS beats the floor
    assert noise_of(150_000.0, 7.0, (None, 12_000.0)) == (12_000.0, "spread")
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


def test_drift_bound_rule() -> None:
    assert drift_bound_pct(None) == 20.0 and drift_bound_pct(2.97) == 20.0
    assert drift_bound_pct(16.0) == 24.0  # 1.5 x 16 = 24: an A/A that drifts more than the seed's bound lifts it


def test_pair_diffs() -> None:
    # 100 -> 104: +4 %; 100 -> 101: +1 %; 104 -> 101: -3/104
    assert pair_diffs_pct([100.0, 104.0, 101.0]) == pytest.approx((4.0, 1.0, -3 / 104 * 100))


def _dir(path: Path, kernel: float, fps: float, reps: list[float], streams: int = 1, rev: str = "r1",
         session: str | None = None, gpu: str = "G", uuid: str | None = "GPU-u1", **env: object) -> Path:
    return write(path, [{"label": "a", "cluster": 3, "cap": 3000, "streams": streams, "batch": 2000,
                         "frames": 20000, "kernel_us": kernel, "h2d_us": 5.0, "d2h_us": 2.0, "roofline_us": 5.0,
                         "binds": "h2d", "sustained_fps": fps, "samples": {"sustained_fps": reps}}],
                 {"gpu_name": gpu, "git_rev": rev, "git_dirty": False, "session_id": session or path.name,
                  **({"gpu_uuid": uuid} if uuid else {}), **env})


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
    out = aa_floors(dirs, now=lambda: "2026-12-02T00:00:00Z")
    fs = out.floors
    assert fs.gpu_name == "G" and [s.dirs for s in fs.sets] == [("s1", "s2", "s3")]
    assert fs.floor("sustained_fps", 1).pct == 6.0  # 1.5 x 4 = 6.0
    assert fs.floor("sustained_fps", 1).aa_max_diff_pct == pytest.approx(4.0)
    assert fs.floor("kernel_us", 1).pct == 1.0  # 1.5 x 0.4 = 0.6 -> the 1 % least of a trace figure
    # no multi-stream rows: trace figures keep the seed's 1 %, sustained FPS gets no floor
    assert fs.floor("h2d_us", 4).pct == 1.0 and "no multi-stream" in fs.floor("h2d_us", 4).source
    assert fs.floor("sustained_fps", 4) is None and fs.drift_bound_pct == 20.0
    # three sessions on one unit: 3 pairs of sessions, fewer than 4: provisional, and said so
    assert (fs.floor("sustained_fps", 1).pairs, fs.floor("sustained_fps", 1).provisional) == (3, True)
    assert out.provisional and any(w.startswith("provisional floors (fewer than 4 pairs): same-unit (3 pairs")
                                   for w in out.warnings)
    with pytest.raises(ValueError):
        session_spreads(dirs[:1])


def test_floors_group_dirs_by_build_and_share_the_link(tmp_path: Path) -> None:
    # build r1: sustained 100 -> 103 (+3 %); build r2: 200 -> 201 (+0.5 %); across builds never compared
    # (100 -> 200 would be +100 %). 4 streams: H2D, D2H and roofline take the worst of the three.
    d = [_dir(tmp_path / "a1", 1.0, 100.0, [100.0], streams=4), _dir(tmp_path / "a2", 1.0, 103.0, [103.0], streams=4),
         _dir(tmp_path / "b1", 1.0, 200.0, [200.0], streams=4, rev="r2"),
         _dir(tmp_path / "b2", 1.0, 201.0, [201.0], streams=4, rev="r2")]
    fs = aa_floors([load_results(p) for p in d]).floors
    assert [s.git_rev for s in fs.sets] == ["r1", "r2"]
    assert fs.floor("sustained_fps", 4).pct == 4.5  # 1.5 x 3 = 4.5, a whole step of 0.5
    w = write(tmp_path / "c1", [{"label": "a", "cluster": 3, "cap": 3000, "streams": 4, "batch": 2000, "frames": 20000,
                                 "kernel_us": 1.0, "h2d_us": 5.0, "d2h_us": 2.0, "roofline_us": 5.0, "binds": "h2d"}],
              {"gpu_name": "G", "git_rev": "r3", "git_dirty": False, "session_id": "x", "gpu_uuid": "GPU-u1"})
    w2 = write(tmp_path / "c2", [{"label": "a", "cluster": 3, "cap": 3000, "streams": 4, "batch": 2000, "frames": 20000,
                                  "kernel_us": 1.0, "h2d_us": 5.2, "d2h_us": 2.0, "roofline_us": 5.2, "binds": "h2d"}],
               {"gpu_name": "G", "git_rev": "r3", "git_dirty": False, "session_id": "y", "gpu_uuid": "GPU-u1"})
    fs = aa_floors([load_results(w), load_results(w2)]).floors
    # H2D 5.0 -> 5.2: +4 % -> 1.5 x 4 = 6 %; D2H (0 %) and the roofline take it too: one shared link
    for m in ("h2d_us", "d2h_us", "roofline_us"):
        assert fs.floor(m, 4).pct == 6.0 and fs.floor(m, 4).aa_max_diff_pct == pytest.approx(4.0)
    assert fs.floor("d2h_us", 4).source.startswith("as h2d_us (one shared link)")


@pytest.mark.parametrize(("dirs", "message"), [
    (lambda t: [_dir(t / "x", 1.0, 100.0, [100.0])], "floors needs two or more"),
    (lambda t: [_dir(t / "x", 1.0, 100.0, [100.0]), _dir(t / "y", 1.0, 100.0, [100.0], rev="r2")], "no A/A partner"),
    (lambda t: [_dir(t / "x", 1.0, 100.0, [100.0]), _dir(t / "y", 1.0, 100.0, [100.0], gpu="H")], "not of one"),
    (lambda t: [_dir(t / "x", 1.0, 100.0, [100.0]), _dir(t / "y", 1.0, 100.0, [100.0], git_dirty=True)], "dirty tree"),
])  # fmt: skip
def test_floors_refuse_what_is_not_an_aa(tmp_path: Path, dirs, message: str) -> None:
    with pytest.raises(InputError, match=message):
        aa_floors([load_results(p) for p in dirs(tmp_path)])


def test_two_probes_of_one_session_make_a_within_session_floor(tmp_path: Path) -> None:
    out = aa_floors([load_results(_dir(tmp_path / "x", 1.0, 100.0, [100.0], session="S")),
                     load_results(_dir(tmp_path / "y", 1.0, 101.0, [101.0], session="S"))])
    f = out.floors.floor("sustained_fps", 1, "within_session")
    assert (f.pct, f.pairs, f.differences, f.provisional) == (1.5, 1, 1, True)  # +1 % -> 1.5 %
    assert out.floors.floor("sustained_fps", 1, "same_unit") is None
    assert out.floors.floor("sustained_fps", 1, "across_units") is None


def test_the_file_round_trips_and_is_found_by_gpu(tmp_path: Path) -> None:
    dirs = [load_results(_dir(tmp_path / "r" / f"s{i}", 1.0 + i / 1000, 100.0 + i, [100.0 + i])) for i in range(2)]
    fs = aa_floors(dirs, now=lambda: "2026-12-02T00:00:00Z").floors
    path = floors_file(tmp_path / "r", "G")
    assert path == tmp_path / "r" / "floors" / "G.json"
    write_floors(fs, path)
    doc = json.loads(path.read_text())
    assert (doc["schema"], doc["version"], doc["gpu_name"]) == ("clusterbench.compare.floors", 2, "G")
    assert doc["rule"]["min_pairs"] == 4 and doc["machines"][0]["gpu_uuid"] == "GPU-u1"
    back = read_floors(path)
    assert back.floors == fs.floors and back.sets == fs.sets and back.path == str(path)
    assert back.machines == fs.machines and back.version == 2
    # a new file only: the same path again is refused, and replaced only when asked
    with pytest.raises(InputError, match="exists: floors writes a new file and never replaces one without --force"):
        write_floors(fs, path)
    assert write_floors(fs, path, replace=True) == path
    # compare finds it beside the results dirs; another GPU model gets the seed's rules
    assert find_floors("G", [tmp_path / "r"]).path == str(path)
    assert find_floors("NVIDIA GeForce RTX 4090", [tmp_path / "r"]).seed
    assert floors_for(dirs)["G"].path == str(path)
    assert floors_for(dirs, explicit=path)["G"].path == str(path)
    other = write_floors(fs.__class__("H", fs.floors, 20.0, "x"), tmp_path / "h.json")
    assert not list(tmp_path.glob(".floors.*"))  # no temp file left behind
    with pytest.raises(InputError, match="holds the floors of H"):
        floors_for(dirs, explicit=other)
    assert floors_file(tmp_path, "NVIDIA GeForce RTX 4090").name == "NVIDIA_GeForce_RTX_4090.json"


def _v(version: int, floor: str = '{"metric": "kernel_us", "multi_stream": false, "pct": 1}', **extra: str) -> str:
    more = "".join(f', "{k}": {v}' for k, v in extra.items())
    return ('{"schema": "clusterbench.compare.floors", "version": %d, "gpu_name": "G", "drift_bound_pct": 20, '
            '"floors": [%s]%s}' % (version, floor, more))


BAD_FLOORS = [
    "{", "[]", '{"schema": "clusterbench.compare.floors", "version": 9}', '{"schema": "x", "version": 2}',
    _v(1, '{"metric": "kernel_us", "multi_stream": false, "pct": -1}'),
    _v(2),  # version 2 floors name their scope
    _v(2, '{"metric": "kernel_us", "multi_stream": false, "pct": 1, "scope": "galaxy", "provisional": false}'),
    _v(2, '{"metric": "kernel_us", "multi_stream": false, "pct": 1, "scope": "same_unit", "pairs": 0, '
          '"provisional": false}'),
    _v(2, '{"metric": "kernel_us", "multi_stream": false, "pct": 1, "scope": "same_unit", "provisional": "no"}'),
    _v(2, '"kernel"'), _v(2, floor="1", sets='"x"'), _v(2, machines='[3]'), _v(1, floor="1", sets="[3]"),
    '{"schema": "clusterbench.compare.floors", "version": 2, "gpu_name": "G", "drift_bound_pct": 20, "floors": 3}',
]


def test_both_versions_are_read_and_nothing_else(tmp_path: Path) -> None:
    p = tmp_path / "f.json"
    p.write_text(_v(1))
    assert read_floors(p).version == 1 and read_floors(p).floors[0].scope == "same_unit"
    p.write_text(_v(2, '{"metric": "kernel_us", "multi_stream": false, "pct": 1, "scope": "across_units", '
                       '"pairs": 6, "provisional": false}'))
    fs = read_floors(p)
    assert fs.version == 2 and (fs.floors[0].scope, fs.floors[0].pairs) == ("across_units", 6)
    p.write_text(_v(3))
    with pytest.raises(InputError, match=r"not a 'clusterbench.compare.floors' file of version 1, 2 \(got"):
        read_floors(p)


@pytest.mark.parametrize("text", BAD_FLOORS)
def test_a_bad_floors_file_is_an_input_error(tmp_path: Path, text: str) -> None:
    p = tmp_path / "f.json"
    p.write_text(text)
    with pytest.raises(InputError):
        read_floors(p)


def test_a_floor_record_round_trips() -> None:
    f = NoiseFloor("h2d_us", True, 4.5, "src", 2.97, "across_units", 6, 24, False)
    assert NoiseFloor.from_json(f.to_json()) == f
    # version 1 records name no scope: read as same-unit floors without pair counts
    v1 = {"metric": "h2d_us", "multi_stream": True, "pct": 4.5, "source": "src", "aa_max_diff_pct": 2.97}
    assert NoiseFloor.from_json(v1, scoped=False) == NoiseFloor("h2d_us", True, 4.5, "src", 2.97)
