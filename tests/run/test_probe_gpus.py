"""probe --gpus end to end on CPU (docs/scaling.md).

The edges are faked as in tests/run/test_probe.py (tests/gpu_edges.py): NVML (the GPU list and each
GPU's reading), the child that asks CuPy and nsys their versions, and nsys (a stand-in that runs the
program and writes a trace). The workload is the toy protocol program: in sustained mode its passes
run at 1000, 2000 and 3000 FPS, so every GPU's median is 2000 FPS, alone or not.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from pathlib import Path

import pytest

from clusterbench.errors import CheckFailed, EnvironmentFailure, InputError
from clusterbench.run.probe import ProbeRequest, plan_probe, require_no_failures, run_probe
from clusterbench.io.results import load_results
from clusterbench.model.measurement import SUSTAINED_FPS
from clusterbench.model.results import RowKey, RowRole
from clusterbench.run import merge, tasks

from gpu_edges import FakeMachine
from protocol_programs import ONE_COMMAND_CONFIG, write_fake_nsys, write_program

CONFIGS = ONE_COMMAND_CONFIG


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    p = tmp_path / "configs.toml"
    p.write_text(CONFIGS)
    write_program(tmp_path, "ok")
    return p


def edges(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, busy: tuple[int, ...] = (),
          sampled: list[int] | None = None) -> Path:
    """Two idle H200s (those in ``busy`` at 80 %), and nsys. ``sampled`` gets every GPU index read."""
    machine_edges = FakeMachine(monkeypatch, 2, busy=busy)
    if sampled is not None:
        machine_edges.sampled = sampled
    return write_fake_nsys(tmp_path)


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="") as fh:
        return {r["label"]: r for r in csv.DictReader(fh)}


def test_gpus_all_writes_solo_per_gpu_and_aggregate_rows(monkeypatch, config_path: Path, tmp_path: Path) -> None:
    nsys = edges(monkeypatch, tmp_path)
    req = ProbeRequest(config_path=config_path, results_root=tmp_path / "results", repeat=3, processes=1, argv=("clusterbench", "probe"),
                       gpus="all")
    plan = plan_probe(req)
    run_probe(plan, req, nsys=nsys)
    rows = _rows(plan.results_dir / "probes.csv")
    assert set(rows) == {"a", "a@gpu0.solo", "a@gpu0", "a@gpu1", "a@all"}
    assert float(rows["a"]["kernel_us"]) == pytest.approx(0.3)  # the solo GPU's trace, as a plain probe
    assert float(rows["a"]["sustained_fps"]) == 2000.0  # the solo figure
    assert (rows["a@gpu1"]["config"], rows["a@gpu1"]["gpu"], rows["a@gpu1"]["role"]) == ("a", "1", "concurrent")
    assert rows["a@gpu1"]["gpu_uuid"] == "GPU-0001" and rows["a@all"]["role"] == "aggregate"
    agg = rows["a@all"]
    assert float(agg["sustained_fps"]) == 4000.0 and float(agg["gpu_min_fps"]) == 2000.0
    assert float(agg["scaling_efficiency"]) == pytest.approx(1.0) and agg["gpus"] == "2"
    env = json.loads((plan.results_dir / "env.json").read_text())
    assert env["guard"]["run"] == [0, 1] and env["guard"]["status"] == "pass"
    assert "guard" not in env["multi_gpu"]  # one verdict, in env.json's guard block
    assert env["multi_gpu"]["configs"]["a"]["total_fps"] == 4000.0
    assert env["multi_gpu"]["gpus"][0]["pinning"]["method"] in ("numactl", "sched_setaffinity")


def test_a_busy_gpu_refuses_unless_forced_then_only_itself(monkeypatch, config_path: Path, tmp_path: Path) -> None:
    nsys = edges(monkeypatch, tmp_path, busy=(1,))
    req = ProbeRequest(config_path=config_path, results_root=tmp_path / "results", repeat=3, processes=1, gpus="all")
    with pytest.raises(CheckFailed, match=r"guard refused: GPU 1 \(NVIDIA H200\) is busy: utilization max 80 %"):
        run_probe(plan_probe(req), req, nsys=nsys)
    forced = dataclasses.replace(req, force=True)
    plan = plan_probe(forced)
    run_probe(plan, forced, nsys=nsys)
    rows = _rows(plan.results_dir / "probes.csv")
    assert "a@gpu1" not in rows and rows["a@all"]["gpus"] == "1"
    env = json.loads((plan.results_dir / "env.json").read_text())
    assert (env["guard"]["refused"], env["guard"]["run"], env["guard"]["reason"]) == ([1], [0], "forced_dropped")


def test_gpus_0_runs_the_same_path_with_n_1(monkeypatch, config_path: Path, tmp_path: Path) -> None:
    sampled: list[int] = []
    nsys = edges(monkeypatch, tmp_path, sampled=sampled)
    req = ProbeRequest(config_path=config_path, results_root=tmp_path / "results", repeat=3, processes=1, gpus="0")
    plan = plan_probe(req)
    outcome = run_probe(plan, req, nsys=nsys)
    assert sampled == [0]  # each selected GPU is sampled once, for its own guard and the report
    rows = _rows(plan.results_dir / "probes.csv")
    assert list(rows) == ["a", "a@gpu0.solo", "a@gpu0", "a@all"]
    # the toy's passes run at 1000, 2000, 3000 FPS: median 2000 in the one round, which is both the GPU
    # alone and every GPU at once
    assert [float(rows[k]["sustained_fps"]) for k in rows] == [2000.0, 2000.0, 2000.0, 2000.0]
    assert (plan.results_dir / "a.sustained.gpu0.json").is_file()
    assert not (plan.results_dir / "a.solo.gpu0.json").exists()  # one round, not two
    agg = rows["a@all"]
    assert agg["gpus"] == "1" and float(agg["scaling_efficiency"]) == 1.0  # 2000 / (1 x 2000)
    assert agg["kernel_us"] == "" and agg["roofline_us"] == ""  # per-GPU quantities: not summed
    assert rows["a@gpu0"]["role"] == "concurrent" and rows["a@gpu0.solo"]["role"] == "solo"
    assert float(rows["a@gpu0"]["kernel_us"]) == pytest.approx(0.3)  # 3000 ns of kernel / 10 frames
    # the outcome (the CLI's table and --json) carries every row written, the plain row first
    assert [r.label for r in outcome.rows] == ["a", "a@gpu0.solo", "a@gpu0", "a@all"]
    env = json.loads((plan.results_dir / "env.json").read_text())
    assert env["multi_gpu"]["selection"] == "0" and env["guard"]["reason"] == "pass"
    assert env["gpu_uuid"] == "GPU-0000"
    # each row keeps its own repeats: the plain and solo rows the solo GPU's, the concurrent row its own
    samples = {r.label: r.measurement(SUSTAINED_FPS) for r in load_results(plan.results_dir).rows}
    assert samples["a"].samples == samples["a@gpu0.solo"].samples == (1000.0, 2000.0, 3000.0)
    assert samples["a@gpu0"].samples == (1000.0, 2000.0, 3000.0) and samples["a@all"] is None  # a sum: no samples


ENV_PROGRAM = """
import argparse, json, os
ap = argparse.ArgumentParser()
ap.add_argument("--result"); ap.add_argument("--mode", default="pass"); ap.add_argument("--repeat", type=int, default=1)
ap.add_argument("--frames", type=int); ap.add_argument("--cluster", type=int)
a = ap.parse_args()
seen = os.environ.get("CUDA_VISIBLE_DEVICES")
if a.mode == "sustained" and seen == os.environ.get("TOY_FAIL_ON"):
    raise SystemExit("toy: CUDA error on " + str(seen))
with open(a.result + ".nvtx", "a") as fh:
    fh.write("clusterbench:pedestal\\n" + f"clusterbench:pass frames={a.frames}\\n")
passes = a.repeat if a.mode == "sustained" else 1
json.dump({"schema": "clusterbench.workload-result", "version": 2, "mode": a.mode, "frames": a.frames,
           "pass_s": [a.frames / 500.0] * passes, "clusters_found": 3 * a.frames, "clusters_dropped": 0,
           "finder": "env toy", "extra": {"cuda_visible_devices": seen,
                                          "cuda_device_order": os.environ.get("CUDA_DEVICE_ORDER")}},
          open(a.result, "w"))
"""


@pytest.fixture
def env_config(tmp_path: Path) -> Path:
    (tmp_path / "toy_env.py").write_text(ENV_PROGRAM)
    p = tmp_path / "env.toml"
    p.write_text(CONFIGS.replace("toy_ok.py", "toy_env.py"))
    return p


def test_each_child_sees_only_its_gpu_by_uuid_and_the_trace_only_the_solo_gpu(monkeypatch, env_config: Path,
                                                                              tmp_path: Path) -> None:
    nsys = edges(monkeypatch, tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-0000,GPU-0001")  # a Slurm allocation of both GPUs
    req = ProbeRequest(config_path=env_config, results_root=tmp_path / "results", repeat=3, processes=1, gpus="all")
    plan = plan_probe(req)
    run_probe(plan, req, nsys=nsys)
    out = plan.results_dir

    def seen(name: str) -> tuple[str, str]:
        extra = json.loads((out / name).read_text())["extra"]
        return extra["cuda_visible_devices"], extra["cuda_device_order"]

    assert seen("a.pass.json") == ("GPU-0000", "PCI_BUS_ID")  # the traced child: the solo GPU alone
    assert seen("a.solo.gpu0.json") == ("GPU-0000", "PCI_BUS_ID")
    assert seen("a.concurrent.gpu0.json") == ("GPU-0000", "PCI_BUS_ID")
    assert seen("a.concurrent.gpu1.json") == ("GPU-0001", "PCI_BUS_ID")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "GPU-0000,GPU-0001"  # restored after the trace
    rows = _rows(out / "probes.csv")
    assert float(rows["a@all"]["sustained_fps"]) == 1000.0  # 2 GPUs x 10 frames / 0.02 s
    assert float(rows["a@gpu1"]["clusters_per_frame"]) == 3.0


def test_a_failing_gpu_child_is_exit_1_naming_it_and_keeps_the_traced_row(monkeypatch, env_config: Path,
                                                                          tmp_path: Path) -> None:
    nsys = edges(monkeypatch, tmp_path)
    monkeypatch.setenv("TOY_FAIL_ON", "GPU-0001")
    req = ProbeRequest(config_path=env_config, results_root=tmp_path / "results", repeat=3, processes=1, gpus="all")
    plan = plan_probe(req)
    outcome = run_probe(plan, req, nsys=nsys)  # the config fails; its row says so
    assert [f.label for f in outcome.failures] == ["a"] and outcome.failures[0].phase == "sustained"
    with pytest.raises(EnvironmentFailure) as err:
        require_no_failures(outcome)
    assert str(err.value).startswith("the concurrent sustained-FPS run of config 'a': 1 of 2 GPU processes failed:\n"
                                     "GPU 1 failed with exit status 1; last lines of a.concurrent.gpu1.log:\n")
    assert "toy: CUDA error on GPU-0001" in str(err.value)
    assert str(plan.results_dir / "a.concurrent.gpu1.log") in err.value.hint
    rows = _rows(plan.results_dir / "probes.csv")
    assert list(rows) == ["a"] and rows["a"]["sustained_fps"] == ""  # traced figures kept, nothing summed
    assert rows["a"]["kernel_us"] != "" and rows["a"]["error"].startswith(
        "sustained: the concurrent sustained-FPS run of config 'a': 1 of 2 GPU processes failed:")


def test_tracer_none_with_gpus(monkeypatch, config_path: Path, tmp_path: Path) -> None:
    edges(monkeypatch, tmp_path)
    req = ProbeRequest(config_path=config_path, results_root=tmp_path / "results", repeat=3, processes=1, gpus="1,0", tracer="none")
    plan = plan_probe(req)
    run_probe(plan, req, nsys=None)
    rows = _rows(plan.results_dir / "probes.csv")
    # the order asked decides the solo GPU: GPU 1 here
    assert set(rows) == {"a", "a@gpu1.solo", "a@gpu0", "a@gpu1", "a@all"}
    assert rows["a"]["kernel_us"] == "" and rows["a"]["trace"] == ""
    assert float(rows["a@all"]["sustained_fps"]) == 4000.0 and rows["a@all"]["solo_gpu"] == "1"
    assert float(rows["a"]["clusters_per_frame"]) == 7.0  # from the solo GPU's last sustained record


PASS_ONLY = CONFIGS.replace(', "--mode", "{mode}", "--repeat", "{repeat}"', '').replace(',\n           "--mode", "{mode}", "--repeat", "{repeat}"', '')
assert PASS_ONLY != CONFIGS


def test_a_program_without_mode_runs_one_pass_a_process_in_p_processes(monkeypatch, tmp_path: Path) -> None:
    nsys = edges(monkeypatch, tmp_path)
    write_program(tmp_path, "ok")
    cfg = tmp_path / "pass_only.toml"
    cfg.write_text(PASS_ONLY)
    req = ProbeRequest(config_path=cfg, results_root=tmp_path / "results", gpus="all", processes=2)
    plan = plan_probe(req)
    run_probe(plan, req, nsys=nsys)
    rows = _rows(plan.results_dir / "probes.csv")
    # one pass per run (a fresh process each) at 1000 FPS (10 frames in 0.01 s), 2 rounds (--processes 2): median
    # 1000 per GPU, 2000 summed
    assert float(rows["a@gpu1"]["sustained_fps"]) == 1000.0 and rows["a@gpu1"]["sustained_repeats"] == "2"
    assert float(rows["a@all"]["sustained_fps"]) == 2000.0
    assert (plan.results_dir / "a.concurrent.r1.gpu1.json").is_file()


def test_an_index_nvml_does_not_list_is_exit_2_and_writes_nothing(monkeypatch, config_path: Path,
                                                                  tmp_path: Path) -> None:
    nsys = edges(monkeypatch, tmp_path)
    req = ProbeRequest(config_path=config_path, results_root=tmp_path / "results", repeat=3, processes=1, gpus="0,3")
    with pytest.raises(InputError, match=r"GPU 3 does not exist; NVML lists 0, 1") as err:
        run_probe(plan_probe(req), req, nsys=nsys)
    assert err.value.exit_code == 2
    assert not (tmp_path / "results").exists()


def test_bad_gpus_text_is_refused_by_the_plan() -> None:
    for text, words in (("", "empty"), ("0,a", "not a GPU index"), ("1,1", "twice"), ("-2", "negative")):
        with pytest.raises(InputError, match=words):
            plan_probe(ProbeRequest(config_path=Path("configs.toml"), gpus=text))


def test_a_stale_build_refuses_every_gpu_unless_forced(monkeypatch, tmp_path: Path) -> None:
    # an external build older than its source: the host check fails, for every GPU at once
    write_program(tmp_path, "ok")
    (tmp_path / "finder").write_text("built")
    (tmp_path / "finder.cu").write_text("changed since")
    os.utime(tmp_path / "finder", (1_000, 1_000))
    os.utime(tmp_path / "finder.cu", (2_000, 2_000))
    cfg = tmp_path / "stale.toml"
    cfg.write_text(CONFIGS + '\n[build]\nartifact = "finder"\nsources = ["finder.cu"]\n')
    nsys = edges(monkeypatch, tmp_path)
    req = ProbeRequest(config_path=cfg, results_root=tmp_path / "results", repeat=3, processes=1, gpus="all")
    with pytest.raises(CheckFailed, match="build artifact finder is older than 1 of its 1 sources") as err:
        run_probe(plan_probe(req), req, nsys=nsys)
    assert err.value.hint.startswith("Rebuild the artifact, then re-run.")
    forced = dataclasses.replace(req, force=True)
    plan = plan_probe(forced)
    run_probe(plan, forced, nsys=nsys)
    guard = json.loads((plan.results_dir / "env.json").read_text())["guard"]
    assert guard["reason"] == "host_forced" and guard["run"] == [0, 1] and guard["host_forced"] is True
    assert guard["status"] == "forced" and [g["status"] for g in guard["gpus"]] == ["pass", "pass"]
    assert [c["name"] for c in guard["host_checks"]] == ["import_location", "kernel_sources", "git",
                                                         "external_build"]


TWO = CONFIGS + """
[[config]]
label = "b"
cluster = 9
cap = 50
streams = 1
batch = 10
frames = 10
"""


def _two_configs(tmp_path: Path) -> Path:
    write_program(tmp_path, "ok")
    cfg = tmp_path / "two.toml"
    cfg.write_text(TWO)
    return cfg


def _gpus_dir(monkeypatch, tmp_path: Path):
    """Configs a and b probed with --gpus all into a results dir: (nsys, configs, request, plan)."""
    nsys = edges(monkeypatch, tmp_path)
    cfg = _two_configs(tmp_path)
    req = ProbeRequest(config_path=cfg, results_root=tmp_path / "results", repeat=3, processes=1, gpus="all")
    plan = plan_probe(req)
    run_probe(plan, req, nsys=nsys)
    return nsys, cfg, req, plan


def test_rerunning_one_config_keeps_the_others_rows_and_summary(monkeypatch, tmp_path: Path) -> None:
    nsys, _, req, plan = _gpus_dir(monkeypatch, tmp_path)
    again = dataclasses.replace(req, only=("b",))
    run_probe(plan_probe(again), again, nsys=nsys)
    rows = _rows(plan.results_dir / "probes.csv")
    assert {"a", "a@all", "b", "b@all"} <= set(rows)
    env = json.loads((plan.results_dir / "env.json").read_text())
    assert set(env["multi_gpu"]["configs"]) == {"a", "b"}
    assert set(env["configs"]) == {"a", "b"}


def test_without_gpus_the_probe_runs_on_the_first_gpu_cuda_visible_devices_allows(monkeypatch, env_config: Path,
                                                                                  tmp_path: Path) -> None:
    sampled: list[int] = []
    nsys = edges(monkeypatch, tmp_path, sampled=sampled)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # e.g. a Slurm allocation of GPU 1
    req = ProbeRequest(config_path=env_config, results_root=tmp_path / "results", repeat=3)
    plan = plan_probe(req)
    outcome = run_probe(plan, req, nsys=nsys)
    assert sampled == [1]  # the guards read the GPU that runs, not NVML's GPU 0
    out = plan.results_dir
    for name in ("a.pass.json", "a.sustained.gpu1.json"):  # the trace and the one sustained round
        extra = json.loads((out / name).read_text())["extra"]
        assert extra["cuda_visible_devices"] == "GPU-0001", name
    assert [r.label for r in outcome.rows] == ["a"]  # the plain row only
    env = json.loads((out / "env.json").read_text())
    assert env["gpu_uuid"] == "GPU-0001" and env["guard"]["run"] == [1] and env.get("multi_gpu") is None


# ----------------------------------------------------------------------------- a re-probe keeps what it does not own


def _snapshot(d: Path) -> tuple[dict, object]:
    return json.loads((d / "env.json").read_text()), load_results(d)


def _keeps_every_block_and_row(before_env: dict, before, after_env: dict, after, rerun: RowKey) -> None:
    """Every env.json key and config entry of ``before`` is in ``after``, every row of ``before`` but the
    re-run one is there unchanged (figures and samples), in its place."""
    assert set(before_env) <= set(after_env), set(before_env) - set(after_env)
    assert set(before_env["configs"]) <= set(after_env["configs"])
    for label, entry in before_env["configs"].items():
        if label != rerun.label:
            assert after_env["configs"][label] == entry, label
    assert after.labels[:len(before.labels)] == before.labels
    for r in before.rows:
        if r.key != rerun:
            assert after.row(r.key) == r, r.label


def test_a_plain_reprobe_into_a_gpus_dir_keeps_every_block_and_row(monkeypatch, tmp_path: Path) -> None:
    nsys, cfg, _, plan = _gpus_dir(monkeypatch, tmp_path)
    before_env, before = _snapshot(plan.results_dir)
    assert {"multi_gpu", "configs", "guard"} <= set(before_env)
    plain = ProbeRequest(config_path=cfg, results_root=tmp_path / "results", repeat=3, processes=1, only=("a",))
    outcome = run_probe(plan_probe(plain), plain, nsys=nsys)
    after_env, after = _snapshot(plan.results_dir)
    _keeps_every_block_and_row(before_env, before, after_env, after, RowKey("a"))
    assert after_env["multi_gpu"] == before_env["multi_gpu"]  # the --gpus run's block, whole
    assert after.labels == before.labels  # a's plain row replaced in place, its per-GPU rows kept
    assert after.row("a").session == outcome.session_id != before.row("a").session
    assert after.row("a@gpu1") == before.row("a@gpu1") and after.row("a@all").gpus == 2
    assert after_env["configs"]["a"]["session"] == outcome.session_id


def test_a_reprobe_into_a_campaign_merged_dir_keeps_every_block_and_row(monkeypatch, tmp_path: Path) -> None:
    nsys = edges(monkeypatch, tmp_path)
    cfg = _two_configs(tmp_path)
    # a campaign over two partitions, one task per config and partition, each a --gpus probe into its own dir
    specs, results = [], {}
    for i, (label, part) in enumerate([("a", "h100"), ("b", "h100"), ("a", "a100"), ("b", "a100")]):
        spec = tasks.TaskSpec(i, label, str(tmp_path / "campaign" / f"{i:03d}-{label}@{part}"), (), part, part)
        req = ProbeRequest(config_path=cfg, results_root=Path(spec.task_dir), only=(label,), gpus="all")
        run_probe(plan_probe(req), req, nsys=nsys)
        specs.append(spec)
        results[i] = tasks.TaskResult(i, label, tasks.TaskState.DONE, host=f"node-{part}", variant=part)
    plain = ProbeRequest(config_path=cfg, results_root=tmp_path / "merged", only=("a",))
    target = plan_probe(plain).results_dir
    merge.merge_task_dirs(target, specs, results, campaign={"campaign_id": "c1", "argv": ["clusterbench", "probe"],
                                                             "executor": {"kind": "slurm"}})
    before_env, before = _snapshot(target)
    assert {"campaign", "hosts", "configs"} <= set(before_env)
    assert before.row(RowKey("a", variant="h100")).host == "node-h100"  # the task's host where the row names none
    assert before.row(RowKey("a", 0, RowRole.SOLO, "h100")).gpu_uuid == "GPU-0000"
    assert before.row("b@gpu1@a100").task == 3 and len(before.rows) == 4 * 5
    outcome = run_probe(plan_probe(plain), plain, nsys=nsys)
    after_env, after = _snapshot(target)
    _keeps_every_block_and_row(before_env, before, after_env, after, RowKey("a"))
    assert after_env["campaign"] == before_env["campaign"]
    assert set(before_env["hosts"]) <= set(after_env["hosts"])
    assert after.labels == before.labels + ("a",)  # the plain row is a key of its own: nothing else replaced
    assert after.row("a").session == outcome.session_id and after.row("a").task is None
