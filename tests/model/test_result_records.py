"""The records of a results dir: round trips of every record, the row key, merging, and every older
format (probes.csv and env.json of versions 1 and 2, legacy aare-perf) still loading.

Expected values come from the fixture files themselves (read here with csv and json) or by hand."""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from clusterbench.errors import InputError
from clusterbench.io.results import load_results, merge_results
from clusterbench.model.measurement import SUSTAINED_FPS, Measurement
from clusterbench.model.results import (
    COLUMNS,
    REQUIRED_COLUMNS,
    ConfigEntry,
    EnvRecord,
    ResultRow,
    ResultSet,
    RowKey,
    RowRole,
    RowValueError,
)
from clusterbench.model.workload import WorkloadResult

DATA = Path(__file__).resolve().parents[1] / "data"
V1_DIR = DATA / "results" / "2026-11-29_f32"  # clusterbench 0.1: env.json schema_version 1, probes.csv of 38 columns
V2_DIR = DATA / "compare" / "kernel_change" / "2026-12-01_f32_slide"  # schema_version 2, 40 columns
V2_GPUS_DIR = DATA / "results" / "2026-12-01_f32_gpus_all"  # version 2 of a --gpus probe: keys packed in labels
LEGACY_DIR = DATA / "compare" / "legacy_2026-09-10_before"


def _csv(d: Path) -> list[dict[str, str]]:
    with open(d / "probes.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def full_row(**changes) -> ResultRow:
    values = dict(key=RowKey("9x9_s1"), cluster=9, cap=1700, streams=1, batch=2000, frames=20000,
                  kernel_us=1.59, h2d_us=5.79, d2h_us=10.09, roofline_us=10.09, binds="d2h", roofline_fps=99_108.0,
                  kernel_duty=0.1, h2d_duty=0.4, d2h_duty=0.7, h2d_gbps=55.2, d2h_gbps=55.3, idle_us=0.25,
                  overlap_us=0.0, host_sync_us=17.4, serialization=1.0, measured_us=17.5, efficiency=0.576,
                  sustained_fps=57_104.0, sustained_fps_spread=150.0, sustained_repeats=3, sustained_gbps=18.27,
                  fps_efficiency=0.576, profiler_overhead=1.0, clusters_per_frame=79.1, dropped_clusters=0,
                  pedestal_dtype="float32", pedestal="frozen", transfer="copy", workload="command",
                  finder="aare ClusterFinderCUDA", tracer="nsys", trace="9x9_s1.sqlite", session="s",
                  timestamp="2026-12-01T00:00:00Z", gpu_name="NVIDIA H200", gpu_uuid="GPU-1", host="n1",
                  pinning="numactl", task=3, source_dir="tasks/003-9x9_s1/2026-12-01_f32",
                  extra={"kernel_us_spread": 0.01, "note": "by hand"},
                  measurements=(Measurement(SUSTAINED_FPS, (56_954.0, 57_104.0, 57_254.0), 320_000,
                                            {"frames_per_pass": 20000}),))
    values.update(changes)
    return ResultRow(**values)


def full_env(**changes) -> EnvRecord:
    values = dict(tool_version="0.2", session_id="s", created_utc="2026-12-01T00:00:00Z", argv=("clusterbench",),
                  host="n1", git_rev="abc", git_dirty=False, gpu_name="NVIDIA H200", workloads="command",
                  tracer="nsys", nsys_cuda_graph_trace="node", kernel_sha256={"k.cu": "1"}, guard={"forced": False},
                  configs={RowKey("a"): ConfigEntry(session="s", workload="command", command=("{python}", "p.py"),
                                                    finder="aare", clocks={"median_mhz": 1980.0},
                                                    params={"cluster": 3}, extra={"future": 1}),
                           RowKey("a", variant="h100"): ConfigEntry(session="t")},
                  multi_gpu={"version": 1, "selection": "all", "configs": {"a": {"total_fps": 4000.0}}},
                  campaign={"schema": "clusterbench.campaign-merge", "version": 2, "tasks": []},
                  hosts=("n1", "n2"), blocks={"git_rev_note": "from the tarball", "zeta": {"x": [1]}})
    values.update(changes)
    return EnvRecord(**values)


# ----------------------------------------------------------------------------- round trips


def test_every_record_round_trips_through_json() -> None:
    key = RowKey("3x3_s4", 1, RowRole.SOLO, "h100")
    assert RowKey.from_json(json.loads(json.dumps(key.to_json()))) == key
    m = full_row().measurements[0]
    assert Measurement.from_json(json.loads(json.dumps(m.to_json()))) == m
    row = full_row()
    assert ResultRow.from_json(json.loads(json.dumps(row.to_json()))) == row
    entry = full_env().configs[RowKey("a")]
    assert ConfigEntry.from_json(json.loads(json.dumps(entry.to_json()))) == entry
    env = full_env()
    assert EnvRecord.from_json(json.loads(json.dumps(env.to_json()))) == env
    result = WorkloadResult(mode="sustained", frames=10, pass_s=(0.5, 0.25), clusters_found=3, clusters_dropped=0,
                            finder="toy", kernel_sha256={"k.cu": "1"}, extra={"x": 1})
    assert WorkloadResult.from_json(json.loads(json.dumps(result.to_json()))) == result


def test_a_result_set_round_trips_through_the_store(tmp_path: Path) -> None:
    rows = (full_row(), full_row(key=RowKey("9x9_s1", 0, RowRole.CONCURRENT), extra={}),
            full_row(key=RowKey("9x9_s1", role=RowRole.AGGREGATE, variant="h100"), measurements=(), extra={}))
    written = ResultSet(full_env(), rows)
    merge_results(tmp_path, written)
    loaded = load_results(tmp_path)
    assert loaded.rows == rows and loaded.env == written.env
    assert (loaded.version_read, loaded.notes, loaded.path) == (5, (), tmp_path)
    header = next(csv.reader(open(tmp_path / "probes.csv", newline="")))
    assert tuple(header) == COLUMNS + ("kernel_us_spread", "note")
    cells = {r["label"]: r for r in _csv(tmp_path)}
    assert set(cells) == {"9x9_s1", "9x9_s1@gpu0", "9x9_s1@all@h100"}  # the label: derived, for display
    assert (cells["9x9_s1@gpu0"]["config"], cells["9x9_s1@gpu0"]["gpu"], cells["9x9_s1@gpu0"]["role"]) == (
        "9x9_s1", "0", "concurrent")


def test_the_measurement_derives_its_summary_from_the_samples() -> None:
    m = Measurement(SUSTAINED_FPS, (90_000.0, 100_000.0, 96_000.0), input_bytes_per_frame=320_000)
    assert m.median == 96_000.0
    assert m.spread == 5_000.0  # (100000 - 90000) / 2
    assert (m.repeats, m.min, m.max) == (3, 90_000.0, 100_000.0)
    assert m.input_gbps == pytest.approx(96_000 * 320_000 / 1e9)  # 30.72 GB/s
    assert Measurement(SUSTAINED_FPS, (1.0, 3.0, 2.0, 10.0)).median == 2.5  # (2 + 3) / 2
    assert Measurement(SUSTAINED_FPS, (1.0,)).input_gbps is None
    for bad in ((), (1.0, float("nan")), (0.0,), (True,)):
        with pytest.raises(ValueError):
            Measurement(SUSTAINED_FPS, bad)


# ----------------------------------------------------------------------------- the key and the row


@pytest.mark.parametrize(("key", "label"), [
    (RowKey("3x3_s4"), "3x3_s4"),
    (RowKey("3x3_s4", 0, RowRole.SOLO), "3x3_s4@gpu0.solo"),
    (RowKey("3x3_s4", 1, RowRole.CONCURRENT), "3x3_s4@gpu1"),
    (RowKey("3x3_s4", role=RowRole.AGGREGATE), "3x3_s4@all"),
    (RowKey("3x3_s4", variant="h100"), "3x3_s4@h100"),
    (RowKey("3x3_s4", 0, RowRole.SOLO, "h100"), "3x3_s4@gpu0.solo@h100"),
])
def test_the_label_shows_the_key_and_an_older_label_reads_back_into_it(key: RowKey, label: str) -> None:
    assert key.label == label
    assert RowKey.from_label(label) == key
    assert RowKey.from_label(label, key.variant) == key


def test_a_key_refuses_what_cannot_be() -> None:
    for args, words in (((""), "config"), (("a@b",), "may not hold"), (("a", 0), "plain row key has no gpu"),
                        (("a", None, "solo"), "needs gpu"), (("a", 0, "aggregate"), "has no gpu"),
                        (("a", -1, "solo"), "GPU index"), (("a", None, "banana"), "role must be one of"),
                        (("a", None, None, "x,y"), "may not hold")):
        with pytest.raises(ValueError, match=words):
            RowKey(*args) if isinstance(args, tuple) else RowKey(args)
    with pytest.raises(ValueError, match="is not config"):
        RowKey.from_label("a@gpu0@h100@x")


def test_a_row_rejects_impossible_values() -> None:
    with pytest.raises(RowValueError, match="column cluster must be int"):
        full_row(cluster=9.0)
    with pytest.raises(RowValueError, match="column kernel_us must be float"):
        full_row(kernel_us=float("nan"))
    with pytest.raises(RowValueError, match="column kernel_us: a time must be > 0, got -1.0 µs/frame"):
        full_row(kernel_us=-1.0)
    with pytest.raises(RowValueError, match="column binds: 'pcie' is not an engine"):
        full_row(binds="pcie")
    with pytest.raises(RowValueError, match="column kernel_us_spread: must be >= 0"):
        full_row(extra={"kernel_us_spread": -0.5})
    with pytest.raises(RowValueError, match="57000.0 is not the median 57104.0 of its samples"):
        full_row(sustained_fps=57_000.0)
    assert full_row(kernel_us=2).kernel_us == 2.0 and isinstance(full_row(kernel_us=2).kernel_us, float)


def test_the_contract_columns_come_first() -> None:
    assert REQUIRED_COLUMNS == ("label", "cluster", "cap", "streams", "batch", "frames", "kernel_us", "h2d_us",
                                "d2h_us", "roofline_us", "binds")
    # every field of the row is a column, the key spelled out after the contract
    fields = {f.name for f in dataclasses.fields(ResultRow)} - {"key", "extra", "measurements"}
    assert set(COLUMNS) == fields | {"label", "config", "gpu", "role", "variant"}


# ----------------------------------------------------------------------------- merging


def _row(label: str, fps: float, **kw) -> ResultRow:
    return ResultRow(key=RowKey.from_label(label), cluster=3, cap=30, streams=1, batch=10, frames=100,
                     sustained_fps=fps, **kw)


def test_merge_replaces_rows_by_key_in_place_and_keeps_the_others() -> None:
    old = ResultSet(None, (_row("a", 1.0), _row("a@gpu0", 2.0), _row("b", 3.0)))
    new = ResultSet(None, (_row("c", 9.0), _row("a", 5.0)))
    merged = old.merge(new)
    assert [(r.label, r.sustained_fps) for r in merged.rows] == [("a", 5.0), ("a@gpu0", 2.0), ("b", 3.0),
                                                                 ("c", 9.0)]


def test_merge_of_envs_keeps_every_block_and_entry_it_does_not_own() -> None:
    old = full_env()
    new = EnvRecord(session_id="new", host="n3", gpu_name="NVIDIA H100",
                    configs={RowKey("a"): ConfigEntry(session="new"), RowKey("b"): ConfigEntry(session="new")},
                    multi_gpu={"version": 1, "selection": "0", "configs": {"b": {"total_fps": 10.0}}},
                    blocks={"zeta": "replaced"})
    env = old.merge(new)
    assert (env.session_id, env.gpu_name, env.tool_version, env.guard) == ("new", "NVIDIA H100", None, None)
    assert {k.label: e.session for k, e in env.configs.items()} == {"a": "new", "a@h100": "t", "b": "new"}
    assert env.hosts == ("n1", "n2", "n3")
    assert env.multi_gpu == {"version": 1, "selection": "0", "configs": {"a": {"total_fps": 4000.0},
                                                                         "b": {"total_fps": 10.0}}}
    assert env.campaign == old.campaign  # the newer env has no campaign block: the older one stays
    assert env.blocks == {"git_rev_note": "from the tarball", "zeta": "replaced"}
    # an env without multi_gpu, hosts or campaign merged into one with none keeps none
    plain = EnvRecord(host="n1").merge(EnvRecord(host="n1"))
    assert (plain.hosts, plain.multi_gpu, plain.campaign) == ((), None, None)


# ----------------------------------------------------------------------------- older formats


def test_version_1_loads_with_its_repeats_as_samples(tmp_path: Path) -> None:
    raw_env, cells = _json(V1_DIR / "env.json"), _csv(V1_DIR)
    assert raw_env["schema_version"] == 1 and "workload" not in cells[0]
    res = load_results(V1_DIR)
    assert res.version_read == 1 and res.notes == ()
    assert res.keys == tuple(RowKey(c["label"]) for c in cells)
    env = res.env
    assert (env.gpu_name, env.session_id, env.git_rev) == (raw_env["gpu_name"], raw_env["session_id"],
                                                           raw_env["git_rev"])
    assert "clocks" not in env.blocks and "schema_version" not in env.blocks
    for c, r in zip(cells, res.rows):
        assert r.kernel_us == float(c["kernel_us"]) and r.sustained_fps == float(c["sustained_fps"])
        assert r.workload == "cupy" and r.finder is None  # columns version 1 lacks: it ran the CuPy workload
        assert r.measurement(SUSTAINED_FPS).samples == tuple(raw_env["configs"][c["label"]]["sustained_fps"])
        assert env.entry(r.key).params == raw_env["configs"][c["label"]]["params"]


def test_version_2_loads(tmp_path: Path) -> None:
    raw_env, cells = _json(V2_DIR / "env.json"), _csv(V2_DIR)
    assert raw_env["schema_version"] == 2 and cells[0]["workload"] == "cupy"
    res = load_results(V2_DIR)
    assert res.version_read == 2 and res.labels == tuple(c["label"] for c in cells)
    for c, r in zip(cells, res.rows):
        assert (r.finder, r.roofline_us) == (c["finder"] or None, float(c["roofline_us"]))
        assert r.measurement(SUSTAINED_FPS).samples == tuple(raw_env["configs"][c["label"]]["sustained_fps"])
    assert res.env.workloads == raw_env["workloads"]


def test_version_2_rows_of_a_gpus_probe_load_into_structured_keys() -> None:
    cells = {c["label"]: c for c in _csv(V2_GPUS_DIR)}
    raw_env = _json(V2_GPUS_DIR / "env.json")
    res = load_results(V2_GPUS_DIR)
    c = "3x3_s1_uncontended"
    assert res.keys == (RowKey(c), RowKey(c, 0, RowRole.SOLO), RowKey(c, 0, RowRole.CONCURRENT),
                        RowKey(c, role=RowRole.AGGREGATE))
    solo = res.row(RowKey(c, 0, RowRole.SOLO))
    s = cells[f"{c}@gpu0.solo"]
    assert (solo.gpu_uuid, solo.gpu_name, solo.host, solo.pinning) == (s["gpu_uuid"], s["gpu_name"], s["host"],
                                                                       s["pinning"])
    assert "config_label" not in solo.extra and "gpu_index" not in solo.extra  # the key holds them
    agg, a = res.row(f"{c}@all"), cells[f"{c}@all"]
    assert (agg.gpus, agg.scaling_efficiency, agg.solo_fps) == (int(a["gpus"]), float(a["scaling_efficiency"]),
                                                                float(a["solo_fps"]))
    assert res.env.multi_gpu == raw_env["multi_gpu"]  # a block of version 2: kept as it is
    # the plain row's repeats are in env.json; the per-GPU rows' were not recorded: said once
    assert res.row(c).measurement(SUSTAINED_FPS).samples == tuple(raw_env["configs"][c]["sustained_fps"])
    assert res.notes == (f"{V2_GPUS_DIR.name}: format version 2 recorded no per-repeat sustained FPS for "
                         f"{c}@gpu0.solo, {c}@gpu0: the noise floor alone judges their sustained FPS",)


def test_a_legacy_aare_perf_dir_loads() -> None:
    raw_env, cells = _json(LEGACY_DIR / "env.json"), _csv(LEGACY_DIR)
    res = load_results(LEGACY_DIR)
    assert res.legacy and res.version_read == 0
    assert (res.env.gpu_name, res.env.git_dirty) == (raw_env["gpu"], raw_env["dirty"])
    for c, r in zip(cells, res.rows):
        assert r.key == RowKey(c["label"]) and r.binds == c["binds"].lower()
        assert (r.workload, r.tracer, r.session, r.measurements) == (None, None, None, ())


def test_a_write_into_an_older_dir_migrates_it_whole(tmp_path: Path) -> None:
    v1 = tmp_path / "v1"
    shutil.copytree(V1_DIR, v1)
    before = load_results(v1)
    merge_results(v1, ResultSet(None, (full_row(key=RowKey("aare_3x3")),)))
    after = load_results(v1)
    assert after.version_read == 5 and _json(v1 / "env.json")["version"] == 5
    assert after.rows[:-1] == before.rows and after.rows[-1].key == RowKey("aare_3x3")  # samples kept too
    assert after.env == before.env
    raw = _json(V1_DIR / "env.json")
    assert set(after.env.blocks) == set(raw) - {f.name for f in dataclasses.fields(EnvRecord)} - {
        "schema_version", "clocks"}


def test_an_unknown_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "probes.csv").write_text(",".join(REQUIRED_COLUMNS) + "\n")
    (tmp_path / "env.json").write_text(json.dumps({"schema": "clusterbench.results", "version": 9}))
    with pytest.raises(InputError, match="version 9; this clusterbench reads 'clusterbench.results' versions 5, 4, 3, 2 "
                                         r"and 1 \(and legacy aare-perf dirs, which have none\)"):
        load_results(tmp_path)
