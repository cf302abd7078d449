"""The probe orchestration on the CPU: planning, row and env assembly, and whole runs.

Only the outermost edges are stand-ins: NVML (the GPU list, the guards' reading and the GPU check),
the child that asks CuPy and nsys their versions, and nsys itself (tests/protocol_programs.py: it runs the real workload
process and writes a fixed SQLite trace that the real analyze code reads). The workload is a
real command-workload program, so the rows' figures are checked against values worked out by hand.
"""

from __future__ import annotations

import csv
import datetime
import json
from pathlib import Path
from types import SimpleNamespace

import numpy
import pytest

import clusterbench.run.guards as guards
import clusterbench.run.probe as probe_mod
from gpu_edges import FakeMachine
from clusterbench.run.config import ProbeConfig
from clusterbench.errors import CheckFailed, ConfigError, EnvironmentFailure, InputError
from clusterbench.run.dryrun import dry_run
from clusterbench.run.probe import ProbeInterrupted, ProbeRequest, plan_probe, run_probe
from clusterbench.run.rows import build_env, build_row
from clusterbench.io.results import load_results
from clusterbench.model.measurement import SUSTAINED_FPS, Measurement
from clusterbench.model.results import COLUMNS, ConfigEntry, EnvRecord, RowKey
from clusterbench.model.workload import WorkloadResult
from clusterbench.model.params import WorkloadParams
from protocol_programs import ONE_COMMAND_CONFIG, write_fake_nsys, write_program

CONFIGS = ONE_COMMAND_CONFIG + """
[[config]]
label = "b"
cluster = 9
cap = 50
streams = 4
batch = 10
frames = 20
"""


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    p = tmp_path / "configs.toml"
    p.write_text(CONFIGS)
    write_program(tmp_path, "ok")
    return p


def request(config_path: Path, tmp_path: Path, **kw) -> ProbeRequest:
    kw.setdefault("repeat", 3)  # the toy's sustained passes run at 1000, 2000, 3000 FPS: worked out for three
    kw.setdefault("processes", 1)  # one sustained process unless a test asks for more (figures worked out for one)
    return ProbeRequest(config_path=config_path, results_root=tmp_path / "results", argv=("clusterbench", "probe"),
                        **kw)


# ----------------------------------------------------------------------------- plan


def test_plan_applies_frames_and_names_the_dir(config_path: Path, tmp_path: Path) -> None:
    plan = plan_probe(request(config_path, tmp_path, frames=5, tag="smoke"), today=datetime.date(2026, 9, 10))
    assert [c.label for c in plan.configs] == ["a", "b"]
    assert [(c.params.frames, c.params.batch) for c in plan.configs] == [(5, 5), (5, 5)]  # batch clipped
    assert plan.results_dir == tmp_path / "results" / "2026-09-10_f32_smoke"
    assert plan.tracer == "nsys" and plan.repeat == 3 and probe_mod.DEFAULT_REPEAT == 3
    assert plan.processes == 1 and probe_mod.DEFAULT_PROCESSES == 3


def test_plan_only_selects_in_file_order(config_path: Path, tmp_path: Path) -> None:
    plan = plan_probe(request(config_path, tmp_path, only=("b",)))
    assert [c.label for c in plan.configs] == ["b"]


@pytest.mark.parametrize(
    ("kw", "err", "text"),
    [
        ({"tracer": "perf"}, InputError, "--tracer must be nsys, cupti or none, got 'perf'"),
        ({"repeat": 0}, InputError, "--repeat must be an integer from 1 to 100, got 0"),
        ({"only": ("c",)}, ConfigError, "no config has that label"),
        ({"frames": 0}, ConfigError, "--frames must be a positive integer"),
        ({"tag": "a/b"}, InputError, "results tag"),
    ],
)
def test_plan_rejects_bad_options(config_path: Path, tmp_path: Path, kw, err, text) -> None:
    with pytest.raises(err, match=text.replace("(", r"\(").replace(")", r"\)")):
        plan_probe(request(config_path, tmp_path, **kw))


# ----------------------------------------------------------------------------- build_row


def cfg(label: str = "9x9_s1", **kw) -> ProbeConfig:
    base = dict(cluster=9, cap=1700, streams=1, batch=2000, frames=20000)
    base.update(kw)
    return ProbeConfig(label=label, params=WorkloadParams(**base))


def engine(us, duty, gbps=None, frames=20000):
    busy = int(us * 1000 * frames)
    return SimpleNamespace(us_per_frame=us, duty=duty, gbps=gbps, busy_ns=busy,
                           bytes=None if gbps is None else int(gbps * busy))


def group(engines, frames=20000, window_ns=500_000_000, roof_us=15.0, binds="kernel", start_ns=0):
    """One (process, device) group of an analysis, as analyze's records hold it."""
    return SimpleNamespace(
        frames=SimpleNamespace(count=frames), window=SimpleNamespace(length_ns=window_ns, start_ns=start_ns,
                                                                      end_ns=start_ns + window_ns),
        busy=SimpleNamespace(engines=engines, idle_ns=40_000_000, overlap_ns=100_000_000, serialization=1.3,
                             any_busy_ns=window_ns - 40_000_000),
        roofline=SimpleNamespace(engine=binds, us_per_frame=roof_us, fps=1e6 / roof_us),
        host=SimpleNamespace(host_sync_ns=2_000_000, known=True, busiest=SimpleNamespace(us_per_frame=3.0, work_us_per_frame=3.0)),
        throughput=SimpleNamespace(measured_us_per_frame=window_ns / 1000 / frames, efficiency=0.6))


def test_build_row_by_hand() -> None:
    engines = {"kernel": engine(15.0, 0.6, None), "h2d": engine(6.0, 0.24, 53.3), "d2h": engine(10.0, 0.4, 55.8)}
    primary = group(engines)  # a 500 ms window of 20000 frames: 25 µs per frame
    analysis = SimpleNamespace(primary=primary, groups=(primary,))
    sustained = Measurement(SUSTAINED_FPS, (50_000.0, 60_000.0, 55_000.0), 17_600 * 20)
    passed = WorkloadResult(mode="pass", frames=20000, pass_s=(0.5,), clusters_found=2_600_000, clusters_dropped=12,
                            finder="toy")
    record = build_row(cfg(), analysis, sustained, passed, "nsys", "9x9_s1.sqlite", "s1", "2026-09-10T00:00:00Z")
    assert record.key == RowKey("9x9_s1") and record.measurements == (sustained,)  # the samples go with the row
    row = record.cells()
    assert (row["label"], row["cluster"], row["cap"], row["streams"], row["batch"], row["frames"]) == (
        "9x9_s1", 9, 1700, 1, 2000, 20000)
    assert (row["kernel_us"], row["h2d_us"], row["d2h_us"], row["roofline_us"], row["binds"]) == (
        15.0, 6.0, 10.0, 15.0, "kernel")
    assert row["roofline_fps"] == pytest.approx(66_666.67, rel=1e-6)
    assert row["idle_us"] == pytest.approx(2.0)  # 40 ms / 20000 frames
    assert row["overlap_us"] == pytest.approx(5.0)
    assert row["host_sync_us"] == pytest.approx(0.1)
    assert row["sustained_fps"] == 55_000.0 and row["sustained_fps_spread"] == 5_000.0
    assert row["sustained_repeats"] == 3 and row["sustained_gbps"] == pytest.approx(55_000 * 352_000 / 1e9)
    assert row["fps_efficiency"] == pytest.approx(55_000 / 66_666.67, rel=1e-6)  # 0.825
    assert row["profiler_overhead"] == pytest.approx(55_000 / 40_000)  # traced fps = 1e6 / 25 us
    assert row["serial_us"] == pytest.approx(31.0)  # the bars added up: 15 + 6 + 10
    assert row["efficiency"] == pytest.approx(15.0 / 25.0) and row["processes"] == 1
    assert row["sustained_source"] == "result" and row["error"] is None
    assert row["clusters_per_frame"] == pytest.approx(130.0)
    assert row["dropped_clusters"] == 12
    assert (row["workload"], row["finder"]) == ("cupy", "toy")
    assert (row["tracer"], row["trace"], row["session"], row["timestamp"]) == (
        "nsys", "9x9_s1.sqlite", "s1", "2026-09-10T00:00:00Z")
    assert tuple(row) == COLUMNS


def test_a_host_bound_row_sets_its_untraced_fps_against_the_untraced_host_bar() -> None:
    from clusterbench.run.callcost import HostEstimate

    # GPU bars of 2, 3 and 1 µs per frame; the launching thread's bar 12 µs traced, 8 µs without the profiler
    engines = {"kernel": engine(2.0, 0.1), "h2d": engine(3.0, 0.15, 20.0), "d2h": engine(1.0, 0.05, 5.0)}
    primary = group(engines, roof_us=12.0, binds="host")
    primary.host.busiest = SimpleNamespace(us_per_frame=12.0, work_us_per_frame=12.0)
    analysis = SimpleNamespace(primary=primary, groups=(primary,))
    sustained = Measurement(SUSTAINED_FPS, (120_000.0, 121_000.0, 119_000.0))  # 8.33 µs per frame
    host = HostEstimate(12.0, 8.0, 7.8, 8.2, "calibrated", {"launch": 2.0}, "calibrated: ...")
    row = build_row(cfg(), analysis, sustained, None, "nsys", "t.sqlite", "s", host=host)
    assert (row.host_us, row.host_untraced_us, row.host_estimate) == (12.0, 8.0, "calibrated")
    assert row.roofline_untraced_us == 8.0 and row.roofline_us == 12.0 and row.binds == "host"  # traced: analyze's
    # 120,000 FPS against the untraced bound of 125,000 FPS: 96 %, not 144 % of the traced 83,333
    assert row.fps_efficiency == pytest.approx(120_000 / 125_000)
    # without an estimate, the bound is the traced bar (the row says how its host bar was made: not at all)
    bare = build_row(cfg(), analysis, sustained, None, "nsys", "t.sqlite", "s")
    assert bare.host_untraced_us is None and bare.host_estimate is None and bare.roofline_untraced_us == 12.0
    # an estimate below the tallest GPU bar: the GPU bar binds the untraced roofline
    low = HostEstimate(12.0, 2.5, 2.4, 2.6, "calibrated", {}, "")
    assert build_row(cfg(), analysis, sustained, None, "nsys", "t.sqlite", "s", host=low).roofline_untraced_us == 3.0


def test_build_row_without_trace_or_sustained_is_not_measured() -> None:
    row = build_row(cfg(), None, None, None, "none", None, "s").cells()
    for key in ("kernel_us", "roofline_us", "binds", "idle_us", "sustained_fps", "fps_efficiency",
                "profiler_overhead", "clusters_per_frame", "finder"):
        assert row[key] is None, key
    assert row["tracer"] == "none" and row["frames"] == 20000


# ----------------------------------------------------------------------------- build_env


def test_env_of_a_probe_names_the_provenance_and_merges_keeping_other_configs() -> None:
    configs = (cfg(label="a"),)
    env = build_env(session_id="new", argv=("clusterbench", "probe"), configs=configs, tracer="nsys",
                    gpu={"name": "NVIDIA H200", "uuid": "GPU-1", "driver": "580", "cuda_driver": "13.0"},
                    versions={"cupy": "13.6.0", "cuda_runtime": "13.0", "nsys": "2025.3.2"},
                    git={"git_rev": "deadbeef", "git_dirty": False}, guard={"ok": True, "forced": False},
                    per_config={"a": ConfigEntry(session="new", clocks={"median_mhz": 1900.0},
                                                 kernel_sha256={"k.cu": "k1"})},
                    created_utc="2026-09-10T00:00:00Z", host="h")
    assert set(env.configs) == {RowKey("a")}
    previous = EnvRecord(session_id="old", configs={RowKey("b"): ConfigEntry(session="old"),
                                                    RowKey("a"): ConfigEntry(session="old")})
    doc = previous.merge(env).to_json()
    assert doc["configs"]["a"]["session"] == "new" and doc["configs"]["b"]["session"] == "old"
    assert doc["configs"]["a"]["clocks"] == {"median_mhz": 1900.0}
    assert (doc["gpu_name"], doc["gpu_uuid"], doc["driver"], doc["cupy"], doc["nsys_version"]) == (
        "NVIDIA H200", "GPU-1", "580", "13.6.0", "2025.3.2")
    assert (doc["git_rev"], doc["git_dirty"], doc["session_id"], doc["pedestal_dtype"]) == (
        "deadbeef", False, "new", "float32")
    assert doc["kernel_sha256"] == {"k.cu": "k1"} and doc["guard"]["forced"] is False
    assert doc["workloads"] == "cupy" and doc["nsys_cuda_graph_trace"] == "node"
    json.dumps(doc, allow_nan=False)


# ----------------------------------------------------------------------------- run_probe with fakes

class Edges(FakeMachine):
    """The machine's edges (tests/gpu_edges.py: one H200, busy when asked) and nsys."""

    def __init__(self, monkeypatch, tmp_path: Path, *, guard_fail: bool = False):
        super().__init__(monkeypatch, 1, busy=(0,) if guard_fail else (),
                         versions={"cupy": "13.6.0", "nsys": "NVIDIA Nsight Systems version 2025.3.2.474"})
        self.nsys = write_fake_nsys(tmp_path)


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def phases_of(events: list) -> list[tuple[str, str | None, str | None]]:
    return [(e.kind, e.label, e.phase) for e in events if e.kind != "warning"]


def test_run_probe_writes_rows_env_and_events(monkeypatch, config_path: Path, tmp_path: Path) -> None:
    edges = Edges(monkeypatch, tmp_path)
    req = request(config_path, tmp_path)
    plan = plan_probe(req)
    events: list = []
    outcome = run_probe(plan, req, on_event=events.append, nsys=edges.nsys)
    assert edges.sampled == [0]  # the one GPU is read once
    rows = read_csv(plan.results_dir / "probes.csv")
    assert [r["label"] for r in rows] == ["a", "b"]
    a = rows[0]
    # by hand, a: 10 frames over the fake trace's 10 000 ns window
    assert float(a["kernel_us"]) == pytest.approx(0.3)  # 3000 ns / 10
    assert float(a["h2d_us"]) == pytest.approx(0.1)
    assert float(a["d2h_us"]) == pytest.approx(0.1)
    assert a["binds"] == "kernel" and float(a["roofline_fps"]) == pytest.approx(1e6 / 0.3)
    assert float(a["h2d_gbps"]) == pytest.approx(50.0) and float(a["d2h_gbps"]) == pytest.approx(10.0)
    assert float(a["idle_us"]) == pytest.approx(0.5)  # window 10 000 - busy [1000, 6000]
    assert float(a["serialization"]) == pytest.approx(1.0)
    assert float(a["measured_us"]) == pytest.approx(1.0)
    # the toy program's sustained mode: 3 passes at 1000, 2000 and 3000 FPS -> median 2000, spread 1000
    assert float(a["sustained_fps"]) == 2000.0 and float(a["sustained_fps_spread"]) == 1000.0
    assert a["sustained_repeats"] == "3"
    assert float(a["sustained_gbps"]) == pytest.approx(2000 * 320_000 / 1e9)
    assert float(a["fps_efficiency"]) == pytest.approx(2000 * 0.3 / 1e6)
    assert float(a["profiler_overhead"]) == pytest.approx(2000 / 1e6)  # traced: 1 µs per frame = 1e6 FPS
    assert float(a["clusters_per_frame"]) == 7.0  # the toy finds 7 per frame
    assert (a["workload"], a["finder"], a["dropped_clusters"]) == ("command", "toy finder", "")
    b = rows[1]
    assert float(b["kernel_us"]) == pytest.approx(0.15)  # same 3000 ns over 20 frames
    assert a["session"] == b["session"] == outcome.session_id
    env = json.loads((plan.results_dir / "env.json").read_text())
    assert env["session_id"] == outcome.session_id and env["tracer"] == "nsys"
    assert set(env["configs"]) == {"a", "b"} and env["guard"]["status"] == "pass"
    assert env["guard"]["run"] == [0] and env["gpu_uuid"] == "GPU-0000"
    assert env.get("multi_gpu") is None  # without --gpus: the plain row only
    # the sustained run: one round on the one GPU, which alone was visible to it
    assert (plan.results_dir / "a.sustained.gpu0.json").is_file()
    assert "CUDA_VISIBLE_DEVICES" not in __import__("os").environ
    assert env["cupy"] == "13.6.0" and env["argv"] == ["clusterbench", "probe"]
    assert env["workloads"] == "command" and (env["schema"], env["version"]) == ("clusterbench.results", 5)
    assert env["configs"]["a"]["workload"] == "command"
    assert env["configs"]["a"]["command"][:2] == ["{python}", "toy_ok.py"]  # as configs.toml gives it
    assert env["configs"]["a"]["finder"] == "toy finder"
    # the repeats behind the row's median, with the row, in samples.json
    measured = load_results(plan.results_dir).row(RowKey("a")).measurement(SUSTAINED_FPS)
    assert measured.samples == (1000.0, 2000.0, 3000.0) and measured.input_bytes_per_frame == 320_000
    assert [r.label for r in outcome.rows] == ["a", "b"] and outcome.rows[0].measurements == (measured,)
    kinds = phases_of(events)
    assert kinds[0] == ("phase", None, "guard")
    # b's 20 frames cannot fill 4 streams of batch 10: the config's own warning comes through
    assert any(e.kind == "warning" and "'b'" in e.message for e in events)
    assert ("phase", "a", "analyze") in kinds and ("row", "b", None) in kinds
    assert kinds.index(("phase", "a", "trace")) < kinds.index(("phase", "a", "analyze")) < kinds.index(
        ("phase", "a", "sustained"))


def test_rerunning_one_config_replaces_only_its_row(monkeypatch, config_path: Path, tmp_path: Path) -> None:
    edges = Edges(monkeypatch, tmp_path)
    req = request(config_path, tmp_path, tracer="none")
    first = run_probe(plan_probe(req), req, nsys=None)
    req_b = request(config_path, tmp_path, only=("b",), frames=40, tracer="none")
    second = run_probe(plan_probe(req_b), req_b, nsys=None)
    rows = {r["label"]: r for r in read_csv(first.results_dir / "probes.csv")}
    assert rows["a"]["session"] == first.session_id and rows["a"]["frames"] == "10"
    assert rows["b"]["session"] == second.session_id and rows["b"]["frames"] == "40"
    env = json.loads((first.results_dir / "env.json").read_text())
    assert env["configs"]["a"]["session"] == first.session_id
    assert env["configs"]["b"]["session"] == second.session_id
    assert edges.sampled == [0, 0]  # one reading per probe


def test_a_probe_into_a_dir_with_rows_says_which_it_replaces_before_any_gpu_work(monkeypatch, config_path: Path,
                                                                              tmp_path: Path) -> None:
    edges = Edges(monkeypatch, tmp_path)
    req = request(config_path, tmp_path, tracer="none")
    assert plan_probe(req).existing is None  # a new dir: nothing to say
    first = run_probe(plan_probe(req), req, nsys=None)
    stamps = {r.label: r.timestamp for r in first.rows}
    req_b = request(config_path, tmp_path, only=("b",), tracer="none")
    plan = plan_probe(req_b)
    assert plan.existing is not None and plan.existing.rows == 2
    assert [(r.key, r.timestamp, r.session) for r in plan.existing.replaced] == [
        (RowKey("b"), stamps["b"], first.session_id)]
    notice = probe_mod.replace_notice(plan)
    assert notice == (f"results dir {plan.results_dir} exists and holds 2 row(s): this probe replaces 1 of them: "
                      f"b (measured {stamps['b']}); the other 1 are kept")
    # the notice is the first thing the probe says, before the GPU is asked (no NVML reading yet)
    seen_before: list = []

    def on_event(e) -> None:
        if e.kind == "warning" and e.message == notice:
            seen_before.append(list(edges.sampled))

    second = run_probe(plan, req_b, on_event=on_event, nsys=None)
    assert seen_before == [[0]] and notice in second.warnings  # one reading so far: the first probe's
    dry = dry_run(plan_probe(req_b), req_b)
    assert dry.to_json()["results_dir_exists"] is True
    assert [r["label"] for r in dry.to_json()["existing"]["replaced"]] == ["b"]


def test_which_rows_a_probe_replaces_with_and_without_gpus() -> None:
    from clusterbench.model.results import RowRole
    from clusterbench.run.machine import parse_gpu_selection

    labels = frozenset({"a"})
    plain, solo2 = RowKey("a"), RowKey("a", 2, RowRole.SOLO)
    conc0, agg = RowKey("a", 0, RowRole.CONCURRENT), RowKey("a", role=RowRole.AGGREGATE)
    assert probe_mod.replaces(plain, labels, None) and not probe_mod.replaces(RowKey("b"), labels, None)
    assert not probe_mod.replaces(conc0, labels, None) and not probe_mod.replaces(agg, labels, None)
    assert not probe_mod.replaces(RowKey("a", variant="h100"), labels, None)  # a campaign's variant row
    two = parse_gpu_selection("2,3")
    assert probe_mod.replaces(solo2, labels, two) and probe_mod.replaces(agg, labels, two)
    assert not probe_mod.replaces(conc0, labels, two)
    assert probe_mod.replaces(conc0, labels, parse_gpu_selection("all"))


def test_guard_refusal_is_exit_3_unless_forced(monkeypatch, config_path: Path, tmp_path: Path) -> None:
    Edges(monkeypatch, tmp_path, guard_fail=True)
    req = request(config_path, tmp_path, tracer="none", repeat=1)
    with pytest.raises(CheckFailed, match=r"guard refused: GPU 0 \(NVIDIA H200\) is busy: utilization max 80 %") \
            as err:
        run_probe(plan_probe(req), req, nsys=None)
    assert err.value.exit_code == 3 and "--force" in err.value.hint
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("probes.csv"))
    forced = request(config_path, tmp_path, force=True, tracer="none", repeat=1)
    outcome = run_probe(plan_probe(forced), forced, nsys=None)
    assert len(outcome.rows) == 2
    assert any(w.startswith("--force overrides the failed guard of every GPU (0)") and "80 %" in w
               for w in outcome.warnings)
    guard = json.loads((outcome.results_dir / "env.json").read_text())["guard"]
    assert (guard["status"], guard["reason"], guard["forced"], guard["run"]) == ("forced", "forced_all", [0], [0])


def _interrupt_at(label: str, phase: str, partial: Path | None = None):
    """An event callback that presses Ctrl-C when ``label`` reaches ``phase`` (the user's edge)."""
    def on_event(event) -> None:
        if event.kind == "phase" and event.label == label and event.phase == phase:
            if partial is not None:
                partial.write_text("half")  # what nsys had written when the interrupt came
            raise KeyboardInterrupt
    return on_event


def test_ctrl_c_keeps_finished_rows_and_drops_the_partial_trace(monkeypatch, config_path: Path,
                                                               tmp_path: Path) -> None:
    edges = Edges(monkeypatch, tmp_path)
    req = request(config_path, tmp_path, repeat=1)
    plan = plan_probe(req)
    partial = plan.results_dir / "b.partial.nsys-rep"
    with pytest.raises(ProbeInterrupted) as err:
        run_probe(plan, req, on_event=_interrupt_at("b", "trace", partial), nsys=edges.nsys)
    assert err.value.exit_code == 130
    assert "interrupted during trace of 'b': kept 1 finished row(s)" in str(err.value)
    assert "b.partial.nsys-rep" in str(err.value)
    assert [r["label"] for r in read_csv(plan.results_dir / "probes.csv")] == ["a"]
    names = sorted(p.name for p in plan.results_dir.iterdir())
    assert not any("partial" in n or n.endswith(".tmp") for n in names), names
    assert "env.json" in names


def test_no_gpu_is_an_environment_failure_naming_its_cause(monkeypatch, config_path: Path, tmp_path: Path) -> None:
    import sys

    monkeypatch.setattr(guards, "gpu_present", lambda: False)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # this machine: no NVML bindings
    monkeypatch.setenv("PATH", str(tmp_path))  # and no nvidia-smi
    with pytest.raises(EnvironmentFailure, match="the NVML Python bindings are missing") as err:
        probe_mod.preflight(plan_probe(request(config_path, tmp_path)))
    assert "pip install -e '.[gpu]'" in err.value.hint and err.value.exit_code == 1


def test_missing_nsys_suggests_cupti(monkeypatch, config_path: Path, tmp_path: Path) -> None:
    import clusterbench.io.nsys.export as nsys_export

    monkeypatch.setattr(guards, "gpu_present", lambda: True)
    monkeypatch.setattr(nsys_export, "find_nsys", lambda: None)
    with pytest.raises(EnvironmentFailure, match="nsys not found") as err:
        probe_mod.preflight(plan_probe(request(config_path, tmp_path)))
    assert "--tracer cupti" in err.value.hint
    assert probe_mod.preflight(plan_probe(request(config_path, tmp_path, tracer="none"))) is None


def test_ctrl_c_during_sustained_keeps_the_traced_row(monkeypatch, config_path: Path, tmp_path: Path) -> None:
    edges = Edges(monkeypatch, tmp_path)
    req = request(config_path, tmp_path, repeat=1, only=("b",))
    plan = plan_probe(req)
    with pytest.raises(ProbeInterrupted, match="b's traced row is kept without sustained FPS"):
        run_probe(plan, req, on_event=_interrupt_at("b", "sustained"), nsys=edges.nsys)
    rows = read_csv(plan.results_dir / "probes.csv")
    assert [r["label"] for r in rows] == ["b"]
    assert rows[0]["sustained_fps"] == ""  # empty: not measured
    assert float(rows[0]["kernel_us"]) == pytest.approx(0.15)


def test_env_json_names_the_checkout_not_a_machine_path() -> None:
    from clusterbench.run.probe import _without_prefix

    guard = {"checks": [{"message": "clusterbench imported from this checkout (/srv/a/cb/clusterbench)",
                         "details": {"repo_root": "/srv/a/cb", "n": 3, "list": ["/srv/a/cb/x.cu"]}}]}
    out = _without_prefix(guard, "/srv/a/cb", "<checkout>")
    assert out == {"checks": [{"message": "clusterbench imported from this checkout (<checkout>/clusterbench)",
                               "details": {"repo_root": "<checkout>", "n": 3, "list": ["<checkout>/x.cu"]}}]}


def test_env_json_keeps_one_kernel_hash_set_as_a_mapping() -> None:
    same = {"cluster_finder.cu": "1de3"}
    env = build_env(session_id="s", argv=(), configs=(), tracer="nsys", gpu={}, versions={}, git={}, guard=None,
                    per_config={"a": ConfigEntry(kernel_sha256=dict(same)),
                                "b": ConfigEntry(kernel_sha256=dict(same))}).to_json()
    assert env["kernel_sha256"] == same
    assert json.loads(json.dumps(env))["configs"]["a"]["kernel_sha256"] == same


@pytest.mark.parametrize("overlap", [False, True])
def test_the_analysis_beside_the_sustained_runs_gives_the_same_rows(monkeypatch, config_path: Path, tmp_path: Path,
                                                                    overlap: bool) -> None:
    edges = Edges(monkeypatch, tmp_path)
    monkeypatch.setattr(probe_mod, "OVERLAP_MIN_CPUS", 1 if overlap else 10_000)
    req = request(config_path, tmp_path, only=("a",))
    plan = plan_probe(req)
    events: list = []
    outcome = run_probe(plan, req, on_event=events.append, nsys=edges.nsys)
    (row,) = outcome.rows
    assert row.kernel_us == pytest.approx(0.3) and row.sustained_fps == 2000.0 and row.serial_us == pytest.approx(0.5)
    phases = [e.phase for e in events if e.kind == "phase" and e.label == "a" and e.phase != "export"]
    phases = [p for k, p in enumerate(phases) if k == 0 or p != phases[k - 1]]  # a round repeats its phase
    # beside: the analysis starts before the sustained runs and is joined after them
    assert phases[:3] == ["trace", "analyze", "sustained"] and (phases[3:] == ["analyze"]) == overlap
    env = json.loads((plan.results_dir / "env.json").read_text())["configs"]["a"]
    assert set(env["phase_s"]) >= {"trace", "analyze", "sustained"} and env["analysis"]["processes"] == 1


def test_ctrl_c_during_sustained_keeps_the_traced_row_when_the_analysis_runs_beside(monkeypatch, config_path: Path,
                                                                                     tmp_path: Path) -> None:
    edges = Edges(monkeypatch, tmp_path)
    monkeypatch.setattr(probe_mod, "OVERLAP_MIN_CPUS", 1)
    req = request(config_path, tmp_path, repeat=1, only=("b",))
    plan = plan_probe(req)
    with pytest.raises(ProbeInterrupted, match="b's traced row is kept without sustained FPS"):
        run_probe(plan, req, on_event=_interrupt_at("b", "sustained"), nsys=edges.nsys)
    rows = read_csv(plan.results_dir / "probes.csv")
    assert rows[0]["sustained_fps"] == "" and float(rows[0]["kernel_us"]) == pytest.approx(0.15)


def test_the_frames_of_our_finder_are_drawn_once_into_the_cache_its_processes_read(monkeypatch, tmp_path) -> None:
    """Our finder's configs get their frames drawn while the guards sample; the cache is the children's
    (CLUSTERBENCH_FRAME_CACHE), the same frames, and it is gone when the probe ends."""
    from clusterbench.run.config import parse_configs
    from clusterbench.workloads import synth

    cfg = parse_configs('[defaults]\ndetector = [20, 24]\npedestal_frames = 4\npool = 3\n'
                        '[[config]]\nlabel = "a"\ncluster = 3\ncap = 10\nstreams = 1\nbatch = 5\nframes = 10\n'
                        '[[config]]\nlabel = "b"\ncluster = 5\ncap = 10\nstreams = 2\nbatch = 5\nframes = 10\n')
    plan = probe_mod.ProbePlan(cfg, cfg.configs, tmp_path / "r", "none", 1, ())
    cache = probe_mod._frame_cache(plan)
    probe_mod._build_frames(plan, cache)
    files = sorted(p.name for p in cache.iterdir())
    assert len(files) == 2 and files[0].endswith(".dark.npy")  # one set: a and b draw the same frames
    drawn = synth.synthetic_frames(20, 24, 4, 3, 130.0, 0)
    served = synth.build_frames(cfg.configs[1].params, cache_dir=cache)
    assert numpy.array_equal(served.dark, drawn.dark) and numpy.array_equal(served.pool, drawn.pool)
    assert probe_mod._child_env(cache)[synth.FRAME_CACHE_ENV] == str(cache)


def test_sustained_fps_above_the_roofline_is_said_to_be_impossible() -> None:
    from clusterbench.model.results import ResultRow
    from clusterbench.run.above import above_roofline

    def row(fps: float, roof: float | None) -> ResultRow:
        return ResultRow(key=RowKey("a"), cluster=3, cap=10, streams=4, batch=200, frames=8000, roofline_fps=roof,
                         roofline_untraced_us=None if roof is None else 1e6 / roof, binds="h2d", sustained_fps=fps)

    # by hand: 145,000 FPS against a 138,000 FPS roofline is 5.07 % above it; the repeats 144,000 and
    # 146,000 spread ±1,000 FPS (0.69 %), so the noise is the 2 % floor and the excess is beyond it
    tight = Measurement(SUSTAINED_FPS, (144_000.0, 146_000.0))
    above = above_roofline(row(145_000.0, 138_000.0), tight)
    assert above is not None and above.impossible
    assert "5.1 % above the roofline without the profiler" in above.note and "±2.0 % noise" in above.note
    assert "H2D the tallest bar" in above.note and "the traced pass ran slower" in above.note
    # 1.5 % above it is within the 2 % floor: nothing to say
    assert above_roofline(row(140_070.0, 138_000.0), tight) is None
    # repeats spread ±6 % (136,300 and 153,700 around 145,000): 5 % above the roofline is within that noise
    wide = Measurement(SUSTAINED_FPS, (136_300.0, 153_700.0))
    assert above_roofline(row(145_000.0, 138_000.0), wide) is None
    # below the roofline, or without one, nothing to say
    assert above_roofline(row(120_000.0, 138_000.0), tight) is None
    assert above_roofline(row(145_000.0, None), tight) is None


def test_above_the_traced_host_bar_but_not_the_untraced_one_is_the_profilers_inflation() -> None:
    from clusterbench.model.results import ResultRow
    from clusterbench.run.callcost import HostEstimate
    from clusterbench.run.above import above_roofline

    # the host bar: 12 µs per frame traced (83,333 FPS), 8 µs without the profiler (125,000 FPS), ± 0.2 µs
    host = HostEstimate(12.0, 8.0, 7.8, 8.2, "calibrated", {}, "")

    def row(fps: float, untraced_us: float = 8.0) -> ResultRow:
        return ResultRow(key=RowKey("a"), cluster=3, cap=10, streams=4, batch=1, frames=8000, roofline_fps=1e6 / 12,
                         roofline_us=12.0, binds="host", host_us=12.0, host_untraced_us=8.0,
                         host_estimate="calibrated", roofline_untraced_us=untraced_us, sustained_fps=fps, h2d_us=3.0)

    runs = Measurement(SUSTAINED_FPS, (120_000.0, 120_000.0))
    above = above_roofline(row(120_000.0), runs, host)  # 44 % above 83,333, 4 % below 125,000
    assert above is not None and not above.impossible
    assert above.note == ("sustained 120,000 FPS is 44.0 % above the traced roofline (83,333 FPS: the host bar "
                          "12.00 µs/frame under nsys) and within the roofline without the profiler (125,000 FPS: the "
                          "host bar 8.00 µs/frame, calibrated): the profiler's inflation of the host bar")
    # 131,000 FPS is 4.8 % above 125,000: beyond the 2 % floor plus the estimate's 2.5 % band (0.2 / 8)
    faster = Measurement(SUSTAINED_FPS, (131_000.0, 131_000.0))
    above = above_roofline(row(131_000.0), faster, host)
    assert above.impossible and "the host bar 8.00 µs/frame without the profiler (calibrated)" in above.note
    assert "±4.5 % noise" in above.note and "the profiler cost the host more than the estimate takes off" in above.note
    # 129,000 FPS is 3.2 % above: within the noise and the band, and said to be above, not "within"
    inside = above_roofline(row(129_000.0), Measurement(SUSTAINED_FPS, (129_000.0,)), host)
    assert not inside.impossible
    assert ("and 3.2 % above the roofline without the profiler, inside its ±4.5 % noise, (125,000 FPS: the host "
            "bar 8.00 µs/frame, calibrated)") in inside.note
