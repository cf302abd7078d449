"""The workload interface: command validation (exit 2, before any GPU call) and the protocol
(tiny programs written in the test that break it one way each, run through probe).

The only stand-ins are the machine's edges (tests/gpu_edges.py): NVML's GPU list, the GPU check and
the guards' NVML reading, the child that asks CuPy and nsys their versions; and (for the pass-range
case) nsys (tests/protocol_programs.py).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import clusterbench.run.guards as guards
from clusterbench.cli import app
from clusterbench.run.config import load_configs, parse_configs
from clusterbench.errors import ConfigError, EnvironmentFailure, WorkloadProtocolError
from clusterbench.run.probe import ProbeRequest, plan_probe, require_no_failures, run_probe
from clusterbench.model.params import WorkloadParams
from clusterbench.workloads.protocol import PLACEHOLDERS, CommandWorkload, CupyWorkload, expand, placeholder_values
from cli_output import messages
from gpu_edges import FakeMachine
from protocol_programs import command_config, write_fake_nsys, write_program

BASE = """\
[[config]]
label = "toy"
cluster = 3
cap = 10
streams = 1
batch = 10
frames = 10
"""


def runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 always keeps stderr apart
        return CliRunner()


def problem_of(text: str, tmp_path: Path) -> str:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_configs(path)
    assert err.value.exit_code == 2
    return str(err.value)


# ----------------------------------------------------------------------------- validation


def test_unknown_workload_names_config_and_key(tmp_path: Path) -> None:
    msg = problem_of(BASE + 'workload = "comand"\n', tmp_path)
    assert "config 'toy': key 'workload': must be one of 'cupy', 'command', 'exec', got 'comand'" in msg
    assert "(did you mean 'command'?)" in msg and "c.toml:8:" in msg


def test_command_workload_without_a_command(tmp_path: Path) -> None:
    msg = problem_of(BASE + 'workload = "command"\n', tmp_path)
    assert "config 'toy': key 'command': workload = \"command\" needs a command" in msg


@pytest.mark.parametrize("command, text", [
    ('"prog --result {result}"', "must be an array of strings"),
    ("[]", "must name a program: the array is empty"),
    ('["prog", 3]', "3 is not a string"),
])
def test_command_must_be_a_list_of_strings(tmp_path: Path, command: str, text: str) -> None:
    msg = problem_of(BASE + f'workload = "command"\ncommand = {command}\n', tmp_path)
    assert "config 'toy': key 'command':" in msg and text in msg


def test_unknown_placeholder_suggests_the_closest(tmp_path: Path) -> None:
    msg = problem_of(BASE + 'workload = "command"\ncommand = ["{python}", "-c", "", "{clustr}", "{result}"]\n',
                     tmp_path)
    assert "config 'toy': key 'command': unknown placeholder {clustr} in '{clustr}' (did you mean {cluster}?)" in msg
    assert "{pedestal_frames}" in msg  # the known ones are listed


def test_a_format_spec_is_no_placeholder(tmp_path: Path) -> None:
    msg = problem_of(BASE + 'workload = "command"\ncommand = ["{python}", "{nsigma:.1f}"]\n', tmp_path)
    assert "takes no format spec" in msg


def test_program_not_found(tmp_path: Path) -> None:
    msg = problem_of(BASE + 'workload = "command"\ncommand = ["no-such-finder-xyz", "{result}"]\n', tmp_path)
    assert "config 'toy': key 'command': program not found: 'no-such-finder-xyz' is not on PATH" in msg
    msg = problem_of(BASE + 'workload = "command"\ncommand = ["./bin/finder", "{result}"]\n', tmp_path)
    assert f"program not found: './bin/finder' (looked at {tmp_path / 'bin' / 'finder'})" in msg
    msg = problem_of(BASE + 'workload = "command"\ncommand = ["{python}", "probes/missing.py"]\n', tmp_path)
    assert "program not found: script 'probes/missing.py'" in msg


def test_a_command_on_a_cupy_workload_is_refused(tmp_path: Path) -> None:
    msg = problem_of(BASE + 'command = ["{python}", "x.py"]\n', tmp_path)
    assert "key 'command': a command is only for workload = \"command\"" in msg


def test_bad_command_is_exit_2_through_the_cli_before_any_gpu_call(monkeypatch, tmp_path: Path) -> None:
    def no_gpu_calls():
        raise AssertionError("the config must be validated before any GPU call")

    monkeypatch.setattr(guards, "gpu_present", no_gpu_calls)
    path = tmp_path / "c.toml"
    path.write_text(BASE + 'workload = "command"\ncommand = ["{python}", "{cluster}", "{reslt}"]\n')
    res = runner().invoke(app, ["probe", "--config", str(path), "--tracer", "none"])
    assert res.exit_code == 2
    lines = messages(res.stderr)
    assert lines[0].startswith("Error: ") and "config 'toy': key 'command': unknown placeholder {reslt}" in lines[0]
    assert lines[-1].startswith("Hint: ") and "Traceback" not in res.stderr


def test_cupti_cannot_host_a_command_workload(tmp_path: Path) -> None:
    prog = write_program(tmp_path)
    path = tmp_path / "c.toml"
    path.write_text(command_config(prog))
    with pytest.raises(ConfigError, match="config 'toy': key 'workload': --tracer cupti traces in-process") as err:
        plan_probe(ProbeRequest(config_path=path, tracer="cupti", results_root=tmp_path / "r"))
    assert "--tracer nsys" in err.value.hint


def test_a_valid_command_config_keeps_its_template_and_folder(tmp_path: Path) -> None:
    prog = write_program(tmp_path)
    (c,) = parse_configs(command_config(prog), tmp_path / "c.toml").configs
    assert c.workload.kind == "command" and c.workload.base_dir == tmp_path.resolve()
    assert c.workload.command[:2] == ("{python}", "toy_ok.py")
    assert c.params.frames == 10 and c.params.pedestal_frames == 100


# ----------------------------------------------------------------------------- placeholders


def test_every_parameter_is_a_placeholder() -> None:
    for name in WorkloadParams.__dataclass_fields__:
        assert name in PLACEHOLDERS
    values = placeholder_values("a", WorkloadParams(cluster=9, cap=1700), Path("/r/a.json"), "pass", 1)
    argv = expand(("{python}", "--k", "{cluster}", "--cap", "{cap}", "--data", "{data}", "{{lit}}", "{result}"),
                  values)
    assert argv == (sys.executable, "--k", "9", "--cap", "1700", "--data", "", "{lit}", "/r/a.json")


def test_the_cupy_workload_is_the_protocols_first_implementation() -> None:
    w = CupyWorkload()
    assert w.kind == "cupy" and w.cupti_hostable and w.runs_sustained
    assert not CommandWorkload(("prog", "{result}")).runs_sustained  # no {mode}: one process per repeat


# ----------------------------------------------------------------------------- the protocol, through probe


class Edges(FakeMachine):
    def __init__(self, monkeypatch) -> None:
        super().__init__(monkeypatch, 1, versions={})


def _probe(tmp_path: Path, behaviour: str, tracer: str = "none", repeat: int = 2, nsys: Path | None = None,
           config: str | None = None, processes: int = 1):
    prog = write_program(tmp_path, behaviour)
    path = tmp_path / "c.toml"
    path.write_text(config or command_config(prog))
    req = ProbeRequest(config_path=path, tracer=tracer, repeat=repeat, results_root=tmp_path / "results",
                       processes=processes)
    plan = plan_probe(req)
    outcome = run_probe(plan, req, nsys=nsys)
    require_no_failures(outcome)  # a config that failed: its own error, once every config has run
    return plan, outcome


def test_a_program_that_keeps_the_protocol_gives_a_row(monkeypatch, tmp_path: Path) -> None:
    Edges(monkeypatch)
    plan, outcome = _probe(tmp_path, "ok")
    (row,) = outcome.rows
    # sustained mode, 2 timed passes of 10 frames in 0.01 s and 0.005 s: 1000 and 2000 FPS
    assert row.sustained_fps == 1500.0 and row.sustained_fps_spread == 500.0
    assert row.workload == "command" and row.finder == "toy finder" and row.kernel_us is None
    assert row.clusters_per_frame == 7.0  # from the sustained result, since nothing was traced


@pytest.mark.parametrize("behaviour, text", [
    ("no_result", "config 'toy': the workload wrote no result record toy.sustained.gpu0.json"),
    ("not_json", "config 'toy': the result record toy.sustained.gpu0.json is not JSON"),
    ("missing_frames", "config 'toy': malformed toy.sustained.gpu0.json: result record: missing field 'frames'"),
    ("bad_version", "result record: field 'version' is 1; this clusterbench reads version 2"),
])
def test_each_broken_result_names_what_is_missing_with_the_stderr_tail(monkeypatch, tmp_path: Path,
                                                                      behaviour: str, text: str) -> None:
    Edges(monkeypatch)
    with pytest.raises(WorkloadProtocolError) as err:
        _probe(tmp_path, behaviour)
    msg = str(err.value)
    assert text in msg
    assert "toy finder: cluster 3, 10 frames, mode sustained" in msg  # the program's stderr tail
    assert err.value.exit_code == 1 and "docs/workloads.md" in err.value.hint


def test_a_crashing_program_shows_its_exit_status_and_stderr(monkeypatch, tmp_path: Path) -> None:
    Edges(monkeypatch)
    with pytest.raises(EnvironmentFailure) as err:
        _probe(tmp_path, "crash")
    msg = str(err.value)
    assert msg.startswith("the sustained-FPS run of config 'toy' on GPU 0 failed with exit status 3; last lines of "
                          "toy.sustained.gpu0.log:\n")
    assert "toy finder: CUDA error: out of memory" in msg


def test_no_pass_range_in_the_trace_is_named(monkeypatch, tmp_path: Path) -> None:
    Edges(monkeypatch)
    nsys = write_fake_nsys(tmp_path)
    with pytest.raises(WorkloadProtocolError) as err:
        _probe(tmp_path, "no_range", tracer="nsys", nsys=nsys)
    msg = str(err.value)
    assert ("config 'toy': the workload's trace toy.sqlite has no NVTX pass range: no range starts with "
            "'clusterbench:pass' (expected 'clusterbench:pass frames=10')") in msg
    assert "toy finder: cluster 3" in msg
    assert "clusterbench:pass frames=N" in err.value.hint


def test_the_pass_range_and_result_give_a_traced_row(monkeypatch, tmp_path: Path) -> None:
    Edges(monkeypatch)
    nsys = write_fake_nsys(tmp_path)
    plan, outcome = _probe(tmp_path, "ok", tracer="nsys", nsys=nsys, repeat=1)
    (row,) = outcome.rows
    assert row.kernel_us == pytest.approx(0.3)  # the stand-in trace's 3000 ns kernel over 10 frames
    assert row.trace == "toy.sqlite" and row.tracer == "nsys"
    with open(plan.results_dir / "probes.csv", newline="") as fh:
        assert next(csv.DictReader(fh))["workload"] == "command"


def test_a_command_without_mode_runs_once_per_process(monkeypatch, tmp_path: Path) -> None:
    Edges(monkeypatch)
    prog = write_program(tmp_path, "ok")
    config = command_config(prog).replace(', "--mode", "{mode}", "--repeat", "{repeat}"', "")
    plan, outcome = _probe(tmp_path, "ok", config=config, processes=3)
    (row,) = outcome.rows
    # three processes (--processes 3) in pass mode, one pass each of 10 frames in 0.01 s: 1000 FPS each
    assert row.sustained_fps == 1000.0 and (row.sustained_repeats, row.sustained_processes) == (3, 3)
    assert row.measurement("sustained_fps").samples == (1000.0, 1000.0, 1000.0)  # one per process
    env = json.loads((plan.results_dir / "env.json").read_text())
    assert "--mode" not in env["configs"]["toy"]["command"]


# ----------------------------------------------------------------------------- the repo's own command configs

REPO = Path(__file__).resolve().parents[2]


def test_the_aare_config_holds_the_four_reference_configs() -> None:
    ours = {c.label: c.params for c in load_configs(REPO / "configs.toml").configs}
    cf = load_configs(REPO / "configs" / "aare_cuda.toml")
    assert [c.label for c in cf.configs] == list(ours)
    for c in cf.configs:
        mine = ours[c.label]
        # the same finder settings and the same frames (seed, occupancy, pool) as configs.toml ...
        for key in ("cluster", "cap", "streams", "batch", "frames", "rows", "cols", "nsigma", "pedestal_frames",
                    "seed", "occupancy", "pool", "pedestal_dtype", "transfer"):
            assert getattr(c.params, key) == getattr(mine, key), (c.label, key)
        # ... but aare's pedestal always tracks, and it runs as its own program
        assert c.params.pedestal == "tracking" and c.workload.kind == "command"
        assert c.workload.command[:2] == ("{python}", "../probes/aare_cuda.py")
    assert cf.build is None  # aare is the user's own install: no build of it for the guards to check


def test_the_minimal_example_config_is_valid() -> None:
    (c,) = load_configs(REPO / "examples" / "minimal_workload.toml").configs
    assert c.workload.kind == "command" and c.workload.base_dir == (REPO / "examples").resolve()


def test_the_aare_probe_refuses_what_aare_cannot_do(tmp_path: Path, capsys) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("aare_cuda_probe", REPO / "probes" / "aare_cuda.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    result = str(tmp_path / "r.json")
    params = json.dumps(WorkloadParams(cluster=11, cap=10, frames=10, batch=10, pedestal="tracking").to_json())
    assert probe.main(["--params-json", params, "--result", result]) == 2
    assert "cluster 11: aare's ClusterFinderCUDA has 3, 5, 7, 9 only" in capsys.readouterr().err
    params = json.dumps(WorkloadParams(cluster=3, cap=10, frames=10, batch=10).to_json())  # frozen
    assert probe.main(["--params-json", params, "--result", result]) == 2
    assert "aare's CUDA pedestal always tracks" in capsys.readouterr().err
    params = json.dumps(WorkloadParams(cluster=3, cap=10, frames=10, batch=10, pedestal="tracking",
                                       pedestal_frames=100).to_json())
    assert probe.main(["--params-json", params, "--result", result]) == 2
    assert "pedestal_frames 100: aare's pedestal keeps exactly 1000 samples" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()
