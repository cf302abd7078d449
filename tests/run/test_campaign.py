"""Campaigns through submitit, end to end on the local executor: several tasks, each its own dir,
merged through the store; concurrent writers; a failed and a lost task with their rows kept.

The outermost edge is a stand-in for ``clusterbench probe --request FILE`` written here: it reads the
task's request record (its one config and its results root), writes its rows and env.json with the real
store, as the probe does, and can fail on purpose."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import socket
import textwrap
import time
from pathlib import Path

import pytest

from clusterbench.run import campaign as ex
from clusterbench.run import merge
from clusterbench.run import tasks
from clusterbench.errors import EnvironmentFailure, InputError
from clusterbench.io.results import load_results
from clusterbench.model.results import RowKey
from clusterbench.run.config import ExecOptions
from clusterbench.run.probe import ProbeRequest

from results_data import write

pytest.importorskip("submitit")

FAKE_PROBE = textwrap.dedent("""
    import dataclasses, json, os, sys, time
    from pathlib import Path
    from clusterbench.io.results import merge_results
    from clusterbench.model.measurement import Measurement
    from clusterbench.model.results import ConfigEntry, EnvRecord, ResultRow, ResultSet, RowKey
    from clusterbench.run.probe import ProbeRequest
    request = ProbeRequest.from_json(json.loads(Path(sys.argv[1]).read_text()))
    (label,), root = request.only, request.results_root
    mode = json.loads(sys.argv[2]).get(label, "ok")
    t0 = time.time()
    out = Path(root) / "2026-12-01_f32"
    fps = {"a": 1000.0, "b": 2000.0, "c": 3000.0}.get(label, 500.0)
    row = ResultRow(key=RowKey(label), cluster=3, cap=3000, streams=1, batch=100, frames=1000, kernel_us=1.5,
                    tracer="none", session="s-" + label, timestamp="2026-12-01T00:00:00Z")
    merge_results(out, ResultSet(EnvRecord(
        tool_version="0.1.0", session_id="s-" + label, host="ignored-env-host", gpu_name="Fake GPU " + label,
        gpu_uuid="GPU-" + label, driver="580.1", git_rev="abc123", git_dirty=False, pedestal_dtype="float32",
        configs={RowKey(label): ConfigEntry(session="s-" + label)})))
    merge_results(out, ResultSet(rows=(row,)))  # the traced row first, as the probe does
    if mode == "fail":
        print("the sustained run failed on purpose", flush=True)
        sys.exit(3)
    if mode == "kill-worker":
        import signal
        os.kill(os.getppid(), signal.SIGKILL)  # the submitit worker running this task dies
        sys.exit(0)
    if mode != "quick":
        time.sleep(0.3)  # long enough that a task started alongside would overlap it
    merge_results(out, ResultSet(rows=(dataclasses.replace(row, sustained_fps=fps, sustained_repeats=1,
                                                           measurements=(Measurement("sustained_fps", (fps,)),)),)))
    (Path(root) / "times.json").write_text(json.dumps([t0, time.time()]))
""")


@pytest.fixture
def fake_probe(tmp_path: Path) -> Path:
    p = tmp_path / "fake_probe.py"
    p.write_text(FAKE_PROBE)
    return p


REQUEST = ProbeRequest(config_path=Path("configs.toml"), tracer="none", repeat=2, argv=("clusterbench", "probe"))


def _command(fake: Path, modes: dict[str, str]) -> tuple[str, ...]:
    """The stand-in probe, given its request file and how each config's task behaves (default ok)."""
    return (tasks.PYTHON, str(fake), ex.REQUEST, json.dumps(modes))


def _plan(labels: list[str], opts: tasks.ExecutorOptions, campaign_dir: Path, command: tuple[str, ...]):
    return ex.plan_campaign(REQUEST, labels, opts, campaign_dir, command=command)


def _local(tmp_path: Path, k: int | None = None) -> tasks.ExecutorOptions:
    return tasks.ExecutorOptions(kind="local", folder=tmp_path / "campaign", gpus_per_task=0, array_parallelism=k,
                              timeout_min=2)


# ----------------------------------------------------------------------------- pure


@pytest.mark.parametrize("opts, words", [
    (dict(kind="pbs"), "--executor must be local or slurm"),
    (dict(kind="slurm"), "needs --partition"),
    (dict(kind="local", partitions=("gpu",)), "applies to --executor slurm only"),
    (dict(kind="slurm", partitions=("a", "a")), "twice"),
    (dict(kind="slurm", partitions=("a@b",)), "not a partition name"),
    (dict(kind="slurm", partitions=("gpu",), gpus_per_task=0), "--gpus-per-task must be an integer >= 1"),
    (dict(kind="slurm", partitions=("gpu",), array_parallelism=0), "--array-parallelism must be"),
])
def test_bad_executor_options_are_input_errors(tmp_path: Path, opts: dict, words: str) -> None:
    with pytest.raises(InputError) as err:
        ex.check_executor_options(tasks.ExecutorOptions(folder=tmp_path, **opts))
    assert err.value.exit_code == 2 and words in str(err.value)


def test_one_task_per_config_or_per_config_and_partition(tmp_path: Path) -> None:
    one = _plan(["a", "b"], tasks.ExecutorOptions("slurm", tmp_path, ("gpu",)), tmp_path, ("x", ex.REQUEST))
    assert [(s.index, s.label, s.partition, s.variant) for s in one] == [(0, "a", "gpu", None), (1, "b", "gpu", None)]
    assert one[1].task_dir == str(tmp_path.resolve() / "tasks" / "001-b")
    two = _plan(["a", "b"], tasks.ExecutorOptions("slurm", tmp_path, ("h100", "a100")), tmp_path, ("x", ex.REQUEST))
    assert [(s.label, s.variant) for s in two] == [("a", "h100"), ("b", "h100"), ("a", "a100"), ("b", "a100")]
    assert Path(two[2].task_dir).name == "002-a@a100"
    assert len({s.task_dir for s in two}) == 4  # every task its own dir
    assert two[2].argv == ("x", str(Path(two[2].task_dir) / "request.json"))  # its own request file


def test_task_spec_is_small_frozen_and_picklable(tmp_path: Path) -> None:
    spec = tasks.TaskSpec(0, "a", str(tmp_path), ("x",), "gpu", None, (("K", "V"),), request=REQUEST)
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert tasks.TaskSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    with pytest.raises(AttributeError):
        spec.label = "b"  # type: ignore[misc]


def test_each_task_runs_the_parents_request_for_its_config_alone(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    request = ProbeRequest(config_path=Path("configs.toml"), only=("a", "b"), frames=2000, tag="t", tracer="cupti",
                           repeat=5, results_root=Path("results"), max_util_pct=7.5, force=True,
                           data=Path("frames.npy"), argv=("clusterbench", "probe", "--executor", "local"), gpus="all")
    (spec,) = ex.plan_campaign(request, ["b"], tasks.ExecutorOptions("local", tmp_path), tmp_path / "c")
    task_dir = tmp_path.resolve() / "c" / "tasks" / "000-b"
    assert spec.argv == (tasks.PYTHON, "-m", "clusterbench", "probe", "--request", str(task_dir / "request.json"))
    # the parent's options, for this config alone, into the task's own dir, with absolute paths
    assert spec.request == ProbeRequest(config_path=tmp_path.resolve() / "configs.toml", only=("b",), frames=2000,
                                        tag="t", tracer="cupti", repeat=5, results_root=task_dir, max_util_pct=7.5,
                                        force=True, data=tmp_path.resolve() / "frames.npy",
                                        argv=("clusterbench", "probe", "--executor", "local"), gpus="all")


def test_a_probe_request_round_trips_and_names_a_bad_field(tmp_path: Path) -> None:
    request = ProbeRequest(config_path=tmp_path / "c.toml", only=("a",), frames=10, repeat=4, processes=5, gpus="0,2",
                           data=tmp_path / "f.npy", argv=("clusterbench", "probe"), timeout_s=30, scan=("streams=1,2",),
                           measure=ExecOptions(window="range:loop@daq", frames_spec="kernel:calib",
                                               rate="rate: ([0-9.]+)"))
    doc = json.loads(json.dumps(request.to_json()))
    assert doc["schema"] == "clusterbench.probe-request" and doc["version"] == 3 and doc["processes"] == 5
    assert ProbeRequest.from_json(doc) == request
    program = ProbeRequest(program=("./prog", "--streams", "{streams}"), label="p",
                           measure=ExecOptions(sustained="wall"))
    assert ProbeRequest.from_json(json.loads(json.dumps(program.to_json()))) == program
    for changes, words in (({"repeat": "4"}, "field 'repeat' must be int, got '4'"),
                           ({"version": 2}, "not a version-3 clusterbench.probe-request"),
                           ({"processes": "3"}, "field 'processes' must be int, got '3'"),
                           ({"timeout_s": "30"}, "field 'timeout_s' must be a number, got '30'"),
                           ({"measure": {"rate": 3}}, "field 'measure' must be an object with the keys frames_spec"),
                           ({"speed": 1}, "unknown field 'speed'"),
                           ({"only": "a"}, "field 'only' must be a list of strings, got 'a'")):
        with pytest.raises(InputError, match=words.replace("(", r"\(")) as err:
            ProbeRequest.from_json({**doc, **changes}, "request.json")
        assert err.value.exit_code == 2 and str(err.value).startswith("request.json: ")
    with pytest.raises(InputError, match="missing field 'gpus'"):
        ProbeRequest.from_json({k: v for k, v in doc.items() if k != "gpus"})


def test_run_task_writes_its_request_and_records_host_and_a_failure(tmp_path: Path, fake_probe: Path) -> None:
    opts = _local(tmp_path)
    ok_spec, bad_spec = _plan(["a", "b"], opts, tmp_path / "c", _command(fake_probe, {"b": "fail"}))
    ok = ex.run_task(ok_spec)
    assert ok.state is tasks.TaskState.DONE and ok.returncode == 0 and ok.host == socket.gethostname()
    assert tasks.TaskResult.from_json(json.loads((Path(ok_spec.task_dir) / "task.json").read_text())) == ok
    written = ProbeRequest.from_json(json.loads(ok_spec.request_path.read_text()))
    assert written == ok_spec.request and written.only == ("a",)
    log = (Path(ok_spec.task_dir) / "task.log").read_text().splitlines()
    assert log[0].startswith(f"# task 0 (a) on {socket.gethostname()}, ") and log[1].startswith("$ ")
    bad = ex.run_task(bad_spec)
    assert bad.state is tasks.TaskState.FAILED and bad.returncode == 3
    assert bad.message.splitlines()[0] == "exit status 3: the sustained run failed on purpose"
    gone = ex.run_task(tasks.TaskSpec(2, "c", str(tmp_path / "t2"), (str(tmp_path / "nope"),)))
    assert gone.state is tasks.TaskState.FAILED and gone.message.startswith(f"cannot start {tmp_path / 'nope'}")


def test_a_task_past_its_time_limit_is_ended_with_its_children(tmp_path: Path) -> None:
    prog = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(60)'])"
    spec = tasks.TaskSpec(0, "a", str(tmp_path / "t"), (tasks.PYTHON, "-c", prog), timeout_s=1.0)
    started = time.monotonic()
    res = ex.run_task(spec)
    assert time.monotonic() - started < 30  # not the grandchild's 60 s
    assert res.state is tasks.TaskState.FAILED and res.message.startswith("stopped at its time limit of 1 s")


def test_the_last_error_joins_the_wrapped_lines_of_the_probes_message(tmp_path: Path) -> None:
    log = tmp_path / "task.log"
    log.write_text("progress\nError: guard refused: GPU 0 (NVIDIA H200) is busy:\n       utilization max 80 %\n"
                   "Hint: wait\n")
    assert ex._last_error(log) == "Error: guard refused: GPU 0 (NVIDIA H200) is busy: utilization max 80 %"


# ----------------------------------------------------------------------------- end to end, local executor


def test_local_campaign_end_to_end_merges_every_task_and_keeps_a_failed_tasks_rows(tmp_path: Path,
                                                                                   fake_probe: Path) -> None:
    opts = _local(tmp_path, k=2)
    specs = _plan(["a", "b", "c"], opts, tmp_path / "campaign", _command(fake_probe, {"b": "fail"}))
    target = tmp_path / "merged" / "2026-12-01_f32"
    events: list[ex.CampaignProgress] = []
    outcome = ex.run_campaign(specs, opts, target, tmp_path / "campaign", argv=("clusterbench", "probe"),
                              on_progress=events.append, poll_s=0.05)
    assert [e.kind for e in events] == ["submitted", "task", "task", "task", "merged"]
    assert [e.done for e in events if e.kind == "task"] == [1, 2, 3]
    assert [r.state for r in outcome.results] == [tasks.TaskState.DONE, tasks.TaskState.FAILED, tasks.TaskState.DONE]
    assert all(r.job_id for r in outcome.results)
    # each task wrote its own dir
    for s in specs:
        assert (Path(s.task_dir) / "2026-12-01_f32" / "probes.csv").is_file()
    # waves of 2: task c started only after a and b had finished
    a, c = (json.loads((Path(specs[i].task_dir) / "times.json").read_text()) for i in (0, 2))
    b_end = json.loads((Path(specs[1].task_dir) / "task.json").read_text())  # b failed: no times.json
    assert b_end["state"] == "failed"
    assert c[0] >= a[1]
    merged = load_results(target)
    assert merged.labels == ("a", "b", "c")
    assert merged.row("a").number("sustained_fps") == 1000.0 and merged.row("c").number("sustained_fps") == 3000.0
    b = merged.row("b")  # the failed task's traced row is kept, without sustained FPS
    assert b.number("kernel_us") == 1.5 and b.number("sustained_fps") is None
    host = socket.gethostname()
    assert {r.host for r in merged.rows} == {host}  # the task's host, not the env's "ignored-env-host"
    assert [r.gpu_name for r in merged.rows] == ["Fake GPU a", "Fake GPU b", "Fake GPU c"]
    assert [r.task for r in merged.rows] == [0, 1, 2]
    assert merged.row("c").source_dir == os.path.relpath(Path(specs[2].task_dir) / "2026-12-01_f32", target)
    env = merged.env
    assert env.hosts == (host,) and env.gpu_name == "Fake GPU a,Fake GPU b,Fake GPU c"
    assert env.git_rev == "abc123" and env.git_dirty is False
    assert env.configs[RowKey("c")].session == "s-c"
    assert merged.row("c").measurement("sustained_fps").samples == (3000.0,)  # the repeats travel with the row
    task_docs = env.campaign["tasks"]
    assert [t["result"]["state"] for t in task_docs] == ["done", "failed", "done"]
    assert "flock" in env.campaign["merge"] and env.campaign["schema"] == "clusterbench.campaign-merge"
    with pytest.raises(EnvironmentFailure) as err:
        ex.require_all_tasks_ok(outcome)
    assert "task 1 (b) failed on " + host + ": exit status 3: the sustained run failed on purpose" in str(err.value)
    assert "finished rows are kept" in str(err.value)
    # a later merge from campaign.json alone gives the same rows
    again = merge.merge_campaign(tmp_path / "campaign", tmp_path / "again")
    assert again.labels == ("a", "b", "c")
    assert load_results(tmp_path / "again").row("b").number("kernel_us") == 1.5


def test_a_lost_task_is_reported_and_its_finished_rows_kept(tmp_path: Path, fake_probe: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import submitit.core.core as core

    # submitit waits 15 s for a dead job's result pickle to appear (NFS latency); there is none to wait for here
    monkeypatch.setattr(core.Job, "_results_timeout_s", 1)
    opts = _local(tmp_path, k=2)
    specs = _plan(["a", "d"], opts, tmp_path / "campaign", _command(fake_probe, {"d": "kill-worker"}))
    outcome = ex.run_campaign(specs, opts, tmp_path / "merged", tmp_path / "campaign", poll_s=0.05)
    done, lost = outcome.results
    assert done.state is tasks.TaskState.DONE
    assert lost.state is tasks.TaskState.LOST and "did not finish" in lost.message
    merged = load_results(tmp_path / "merged")
    assert merged.labels == ("a", "d") and merged.row("d").number("kernel_us") == 1.5
    with pytest.raises(EnvironmentFailure, match="task 1 \\(d\\) lost"):
        ex.require_all_tasks_ok(outcome)


def test_several_partitions_key_rows_by_label_and_partition(tmp_path: Path, fake_probe: Path) -> None:
    opts = tasks.ExecutorOptions("slurm", tmp_path / "c", ("h100", "a100"))
    specs = _plan(["a"], opts, tmp_path / "c", _command(fake_probe, {}))
    results = {s.index: ex.run_task(s) for s in specs}  # as the array tasks would, without a cluster
    report = merge.merge_task_dirs(tmp_path / "m", specs, results)
    assert report.labels == ("a@h100", "a@a100")
    merged = load_results(tmp_path / "m")
    assert [(r.key.config, r.key.variant) for r in merged.rows] == [("a", "h100"), ("a", "a100")]
    assert set(merged.env.configs) == {RowKey("a", variant="h100"), RowKey("a", variant="a100")}


def test_a_task_without_results_is_a_reported_problem(tmp_path: Path) -> None:
    spec = tasks.TaskSpec(0, "a", str(tmp_path / "empty"), ("true",))
    report = merge.merge_task_dirs(tmp_path / "m", [spec])
    assert report.labels == () and "no results dir" in report.problems[0]


# ----------------------------------------------------------------------------- concurrent writers


def _upsert_many(directory: str, worker: int, n: int) -> None:
    for i in range(n):
        write(Path(directory), [{"label": f"w{worker}_{i}", "cluster": 3, "cap": 1, "streams": 1,
                                 "batch": 1, "frames": 1, "sustained_fps": float(worker * 100 + i + 1)}])


def _merge_some(target: str, specs: list) -> None:
    merge.merge_task_dirs(Path(target), specs)


def test_concurrent_upserts_on_one_dir_lose_no_row(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_upsert_many, args=(str(tmp_path), w, 12)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    write(tmp_path, env_values={"tool_version": "t"})
    rows = load_results(tmp_path).rows
    assert len(rows) == 48
    assert sorted(r.number("sustained_fps") for r in rows) == sorted(float(w * 100 + i + 1) for w in range(4)
                                                                    for i in range(12))


def test_concurrent_merges_into_one_dir_keep_every_row(tmp_path: Path, fake_probe: Path) -> None:
    labels = [f"x{i}" for i in range(6)]
    quick = _command(fake_probe, dict.fromkeys(labels, "quick"))
    specs = _plan(labels, _local(tmp_path), tmp_path / "c", quick)
    for s in specs:
        ex.run_task(s)
    ctx = multiprocessing.get_context("fork")
    target = tmp_path / "m"
    procs = [ctx.Process(target=_merge_some, args=(str(target), list(specs[k::3]))) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    merged = load_results(target)
    assert sorted(merged.labels) == labels  # probes.csv: locked read-modify-write, nothing lost
    # env.json: merged under the same lock: every task's config entry is there
    assert sorted(k.config for k in load_results(target).env.configs) == labels


# ----------------------------------------------------------------------------- slurm parameters


@pytest.fixture
def fake_slurm_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """srun and sbatch on PATH that do nothing: submitit's SlurmExecutor looks for them (the outermost edge)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("srun", "sbatch"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def test_slurm_executor_gets_partition_gpus_and_array_parallelism(tmp_path: Path, fake_slurm_bin: Path) -> None:
    opts = tasks.ExecutorOptions("slurm", tmp_path, ("gpu-h100",), gpus_per_task=2, array_parallelism=3,
                              timeout_min=30, cpus_per_task=16)
    slurm = ex.make_executor(opts, "gpu-h100")._executor
    assert slurm.parameters["array_parallelism"] == 3
    text = slurm._make_submission_file_text("cmd", "uid")
    for line in ("#SBATCH --partition=gpu-h100", "#SBATCH --gpus-per-task=2", "#SBATCH --time=30",
                 "#SBATCH --cpus-per-task=16"):
        assert line in text


def test_slurm_without_sbatch_is_an_environment_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentFailure) as err:
        ex.make_executor(tasks.ExecutorOptions("slurm", tmp_path, ("gpu",)), "gpu")
    assert err.value.exit_code == 1 and "not a Slurm submit host" in str(err.value)


def test_a_campaign_without_sbatch_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    opts = tasks.ExecutorOptions("slurm", tmp_path / "campaign", ("gpu",))
    specs = _plan(["a"], opts, tmp_path / "campaign", ("x",))
    with pytest.raises(EnvironmentFailure):
        ex.run_campaign(specs, opts, tmp_path / "merged", tmp_path / "campaign")
    assert not (tmp_path / "campaign").exists() and not (tmp_path / "merged").exists()


def test_campaign_interrupted_lives_in_errors_with_exit_130() -> None:
    from clusterbench import errors

    assert ex.CampaignInterrupted is errors.CampaignInterrupted  # the old import path still works
    assert issubclass(errors.CampaignInterrupted, errors.ClusterbenchError)
    assert errors.CampaignInterrupted("x").exit_code == 130 == errors.EXIT_INTERRUPTED


def test_executor_options_for_the_probe_flags(tmp_path: Path) -> None:
    assert ex.executor_options_for(None, tmp_path) is None  # no campaign: probe runs here
    for flags, name in (({"partitions": ("gpu",)}, "--partition"), ({"gpus_per_task": 2}, "--gpus-per-task"),
                        ({"array_parallelism": 3}, "--array-parallelism")):
        with pytest.raises(InputError, match=f"{name} applies to a campaign only"):
            ex.executor_options_for(None, tmp_path, **flags)
    opts = ex.executor_options_for("slurm", tmp_path, ("a", "b"), None, 4)
    assert (opts.kind, opts.partitions, opts.gpus_per_task, opts.array_parallelism) == ("slurm", ("a", "b"), 1, 4)
    assert opts.folder == tmp_path
    with pytest.raises(InputError, match="needs --partition"):
        ex.executor_options_for("slurm", tmp_path)
    assert ex.executor_options_for("local", tmp_path, gpus_per_task=0).gpus_per_task == 0
