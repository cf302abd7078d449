"""clusterbench probe through the CLI: exit codes, stdout/stderr split, --json."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import re
import sys
from pathlib import Path

import numpy
import pytest
from cli_output import messages
from typer.testing import CliRunner

import clusterbench.run.guards as guards
from clusterbench.cli import app
from clusterbench.run import probe as probe_mod
from clusterbench.run import tasks

from results_data import row as result_row

GOOD = """
[[config]]
label = "3x3_s1"
cluster = 3
cap = 3000
streams = 1
batch = 2000
frames = 20000
"""


def runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 always keeps stderr apart
        return CliRunner()


@pytest.fixture
def good(tmp_path: Path) -> Path:
    p = tmp_path / "configs.toml"
    p.write_text(GOOD)
    return p


def test_bad_config_is_exit_2_before_any_gpu_call(monkeypatch, tmp_path: Path) -> None:
    def no_gpu_calls():
        raise AssertionError("the config must be validated before any GPU call")

    monkeypatch.setattr(guards, "gpu_present", no_gpu_calls)
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace("cluster = 3", "cluster = 4"))
    res = runner().invoke(app, ["probe", "--config", str(bad)])
    assert res.exit_code == 2, res.output
    assert "Error:" in res.stderr and "must be odd" in res.stderr and "got 4" in res.stderr
    assert res.stdout == ""


def test_unknown_label_and_bad_tracer_are_exit_2(good: Path) -> None:
    res = runner().invoke(app, ["probe", "--config", str(good), "--only", "3x3_s4"])
    assert res.exit_code == 2 and "no config has that label" in messages(res.stderr)[0]
    res = runner().invoke(app, ["probe", "--config", str(good), "--tracer", "perf"])
    assert res.exit_code == 2 and "--tracer must be nsys, cupti or none" in messages(res.stderr)[0]
    res = runner().invoke(app, ["probe", "--config", str(good), "--max-util", "101"])
    assert res.exit_code == 2 and "--max-util must be between 0 and 100 %, got 101 %" in messages(res.stderr)[0]


def test_valid_config_without_gpu_is_exit_1_with_one_clear_line(monkeypatch, good: Path, tmp_path: Path) -> None:
    monkeypatch.setattr(guards, "gpu_present", lambda: False)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # a machine without the NVML bindings ...
    monkeypatch.setenv("PATH", str(tmp_path))  # ... and without nvidia-smi
    res = runner().invoke(app, ["probe", "--config", str(good), "--results-dir", str(tmp_path / "r")])
    assert res.exit_code == 1
    lines = messages(res.stderr)
    assert lines[0] == ("Error: the NVML Python bindings are missing (module pynvml, package nvidia-ml-py), and "
                        "nvidia-smi is not installed either")
    assert lines[1].startswith("Hint:") and "pip install -e '.[gpu]'" in lines[1] and len(lines) == 2
    assert res.stdout == ""
    assert not (tmp_path / "r").exists()


ROW = result_row({"label": "3x3_s1", "cluster": 3, "cap": 3000, "streams": 1, "batch": 2000, "frames": 20000,
                  "kernel_us": 4.65, "h2d_us": 13.13, "d2h_us": 2.5, "roofline_us": 13.13, "binds": "h2d",
                  "roofline_fps": 76161.5, "sustained_fps": 61400.0, "sustained_fps_spread": 300.0,
                  "fps_efficiency": 0.806, "profiler_overhead": 1.5})


def fake_run(monkeypatch, seen: dict) -> None:
    def run_probe(plan, request, on_event=None, nsys=None):
        seen["request"], seen["nsys"] = request, nsys
        on_event(probe_mod.ProbeEvent("warning", message="3x3_s1: the pass lasted only 12.0 ms", hint="raise --frames"))
        on_event(probe_mod.ProbeEvent("row", label="3x3_s1", index=0, total=1, row=ROW))
        return probe_mod.ProbeOutcome(plan.results_dir, "sess", (ROW,), ("w",), None)

    monkeypatch.setattr(probe_mod, "preflight", lambda plan: Path("/fake/nsys"))
    monkeypatch.setattr(probe_mod, "run_probe", run_probe)


def test_options_reach_the_core_and_json_is_only_json(monkeypatch, good: Path, tmp_path: Path) -> None:
    seen: dict = {}
    fake_run(monkeypatch, seen)
    res = runner().invoke(app, ["probe", "--config", str(good), "--frames", "2000", "--only", "3x3_s1", "--tag", "t",
                                "--repeat", "5", "--results-dir", str(tmp_path), "--max-util", "2.5", "--force",
                                "--require-clean", "--json"])
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["rows"] == [ROW.to_json()] and doc["session"] == "sess"
    assert doc["rows"][0]["label"] == "3x3_s1" and doc["rows"][0]["kernel_us"] == 4.65
    assert Path(doc["results_dir"]).name.endswith("_f32_t")
    req = seen["request"]
    assert (req.frames, req.only, req.tag, req.repeat, req.max_util_pct, req.force, req.require_clean) == (
        2000, ("3x3_s1",), "t", 5, 2.5, True, True)
    assert seen["nsys"] == Path("/fake/nsys")
    assert "the pass lasted only 12.0 ms" in res.stderr


def test_summary_table_goes_to_stdout_with_units(monkeypatch, good: Path, tmp_path: Path) -> None:
    fake_run(monkeypatch, {})
    res = runner().invoke(app, ["probe", "--config", str(good), "--results-dir", str(tmp_path)],
                          env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    assert "3x3_s1" in out and "H2D" in out
    # units live in the headers (µs per frame, FPS, %, ×); the cells carry the numbers
    assert "µs" in out and "FPS" in out and "roofline %" in out and "overhead ×" in out
    assert " 13.13 " in out and " 4.65 " in out
    assert " 76,162 " in out and "61,400 ± 300" in out
    assert re.search(r" 81\s", out) and re.search(r" 1\.50(\s|$)", out, re.M)
    assert "Results:" in res.stderr and "Warning:" in res.stderr


def test_data_must_exist_and_reaches_every_config(monkeypatch, good: Path, tmp_path: Path) -> None:
    res = runner().invoke(app, ["probe", "--config", str(good), "--data", str(tmp_path / "none.npy")])
    assert res.exit_code == 2 and messages(res.stderr)[0].startswith(f"Error: --data {tmp_path / 'none.npy'}: no such file")
    text = tmp_path / "frames.txt"
    text.write_text("not frames\n")
    res = runner().invoke(app, ["probe", "--config", str(good), "--data", str(text)])
    assert res.exit_code == 2 and messages(res.stderr)[0].startswith(f"Error: --data {text}: not a .npy file")
    npy = tmp_path / "frames.npy"
    numpy.save(npy, numpy.zeros((3, 2, 2), numpy.float32))
    res = runner().invoke(app, ["probe", "--config", str(good), "--data", str(npy)])
    assert res.exit_code == 2 and messages(res.stderr)[0] == (
        f"Error: --data {npy}: holds float32 with shape (3, 2, 2), not uint16 (frames, rows, cols)")
    numpy.save(npy, numpy.zeros((3, 2, 2), numpy.uint16))  # the header is all the plan reads
    seen: dict = {}
    fake_run(monkeypatch, seen)
    res = runner().invoke(app, ["probe", "--config", str(good), "--data", str(npy), "--results-dir", str(tmp_path)])
    assert res.exit_code == 0, res.stderr
    assert seen["request"].data == npy
    plan = probe_mod.plan_probe(seen["request"])
    assert {c.params.data for c in plan.configs} == {str(npy.resolve())}


# ----------------------------------------------------------------------------- --gpus, --executor: bad input


def _no_gpu_calls(monkeypatch) -> None:
    import clusterbench.run.machine as machine

    def refuse(*a, **k):
        raise AssertionError("bad options must be refused before any GPU or NVML call")

    for name in ("gpu_present", "read_nvml", "run_guards"):
        monkeypatch.setattr(guards, name, refuse)
    monkeypatch.setattr(machine, "read_gpu_topology", refuse)
    monkeypatch.setattr(probe_mod, "preflight", refuse)
    monkeypatch.setattr(probe_mod, "run_probe", refuse)


@pytest.mark.parametrize("args, words", [
    (["--gpus", ""], "--gpus is empty"),
    (["--gpus", "0,,1"], "has an empty entry"),
    (["--gpus", "x"], "'x' is not a GPU index"),
    (["--gpus", "-1"], "'-1' is negative"),
    (["--gpus", "0,2,0"], "names GPU 0 twice"),
    (["--executor", "pbs"], "--executor must be local or slurm, got 'pbs'"),
    (["--executor", "slurm"], "--executor slurm needs --partition P"),
    (["--executor", "local", "--partition", "gpu"], "--partition gpu applies to --executor slurm only"),
    (["--executor", "slurm", "--partition", "a", "--partition", "a"], "names a partition twice"),
    (["--executor", "slurm", "--partition", "a@b"], "'a@b' is not a partition name"),
    (["--executor", "slurm", "--partition", "gpu", "--gpus-per-task", "0"], "--gpus-per-task must be an integer >= 1"),
    (["--executor", "local", "--gpus-per-task", "-1"], "--gpus-per-task must be an integer >= 0"),
    (["--executor", "local", "--array-parallelism", "0"], "--array-parallelism must be an integer >= 1, got 0"),
    (["--partition", "gpu"], "--partition applies to a campaign only"),
    (["--gpus-per-task", "2"], "--gpus-per-task applies to a campaign only"),
    (["--array-parallelism", "4"], "--array-parallelism applies to a campaign only"),
    (["--gpus", "all", "--executor", "slurm"], "needs --partition"),
])
def test_bad_gpus_and_executor_options_are_exit_2_before_any_gpu_call(monkeypatch, good: Path, tmp_path: Path,
                                                                      args: list[str], words: str) -> None:
    _no_gpu_calls(monkeypatch)
    res = runner().invoke(app, ["probe", "--config", str(good), "--results-dir", str(tmp_path / "r"), *args])
    assert res.exit_code == 2, (res.stdout, res.stderr)
    lines = messages(res.stderr)
    assert lines[0].startswith("Error: ") and words in lines[0], lines
    assert lines[1].startswith("Hint: ") if len(lines) > 1 else True
    assert res.stdout == "" and "Traceback" not in res.stderr
    assert not (tmp_path / "r").exists()  # nothing written


def test_gpus_reaches_the_plan(monkeypatch, good: Path, tmp_path: Path) -> None:
    seen: dict = {}
    fake_run(monkeypatch, seen)
    res = runner().invoke(app, ["probe", "--config", str(good), "--results-dir", str(tmp_path), "--gpus", "0, 2"])
    assert res.exit_code == 0, res.stderr
    assert seen["request"].gpus == "0, 2"
    plan = probe_mod.plan_probe(seen["request"])
    assert plan.gpus is not None and plan.gpus.indices == (0, 2) and not plan.gpus.all


def test_executor_needs_submitit_and_slurm_needs_sbatch_exit_1(monkeypatch, good: Path, tmp_path: Path) -> None:
    _no_gpu_calls(monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no sbatch, no srun: not a submit host
    res = runner().invoke(app, ["probe", "--config", str(good), "--results-dir", str(tmp_path / "r"),
                                "--executor", "slurm", "--partition", "gpu"])
    assert res.exit_code == 1, res.stderr
    assert "sbatch/srun not found on PATH" in messages(res.stderr)[0]
    assert not (tmp_path / "r").exists()


FAKE_TASK_PROBE = """
import json, sys
from pathlib import Path
from clusterbench.io.results import merge_results
from clusterbench.model.results import EnvRecord, ResultRow, ResultSet, RowKey
from clusterbench.run.probe import ProbeRequest
request = ProbeRequest.from_json(json.loads(Path(sys.argv[1]).read_text()))
(label,), root = request.only, request.results_root
(root / "request.seen.json").write_text(json.dumps(request.to_json()))  # what the task was asked for
out = Path(root) / "2026-12-01_f32"
merge_results(out, ResultSet(
    EnvRecord(tool_version="0.1.0", session_id="s", gpu_name="NVIDIA H200", gpu_uuid="GPU-" + label, driver="580.1",
              git_rev="abc", git_dirty=False, pedestal_dtype="float32"),
    (ResultRow(key=RowKey(label), cluster=3, cap=3000, streams=1, batch=2000, frames=20000, kernel_us=1.25,
               sustained_fps=1000.0, tracer="none"),)))
"""


def test_executor_local_runs_one_task_per_config_and_merges(monkeypatch, tmp_path: Path) -> None:
    pytest.importorskip("submitit")
    import clusterbench.run.campaign as ex

    _no_gpu_calls(monkeypatch)  # the parent of a campaign touches no GPU
    cfg = tmp_path / "configs.toml"
    cfg.write_text(GOOD + GOOD.replace("3x3_s1", "9x9_s1").replace("cluster = 3", "cluster = 9"))
    fake = tmp_path / "fake_probe.py"
    fake.write_text(FAKE_TASK_PROBE)
    monkeypatch.setattr(ex, "TASK_COMMAND", (tasks.PYTHON, str(fake), ex.REQUEST))
    res = runner().invoke(app, ["probe", "--config", str(cfg), "--results-dir", str(tmp_path / "r"), "--tag", "c",
                                "--executor", "local", "--gpus-per-task", "0", "--array-parallelism", "2",
                                "--gpus", "all", "--repeat", "2", "--json"])
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [r["label"] for r in doc["rows"]] == ["3x3_s1", "9x9_s1"]
    assert {r["host"] for r in doc["rows"]} == {__import__("socket").gethostname()}
    assert [r["gpu_uuid"] for r in doc["rows"]] == ["GPU-3x3_s1", "GPU-9x9_s1"]
    assert [t["state"] for t in doc["tasks"]] == ["done", "done"]
    assert Path(doc["campaign_dir"]).name.endswith("_f32_c.campaign")
    seen = [json.loads(p.read_text()) for p in sorted(Path(doc["campaign_dir"]).glob("tasks/*/request.seen.json"))]
    assert [(r["only"], r["gpus"], r["repeat"], r["tag"], r["config_path"]) for r in seen] == [
        (["3x3_s1"], "all", 2, "c", str(cfg.resolve())), (["9x9_s1"], "all", 2, "c", str(cfg.resolve()))]
    assert "2 task(s) submitted" not in res.stdout and "[2/2]" in res.stderr


# ----------------------------------------------------------------------------- the summary table at 80 columns

H200 = [  # the reference campaign's rows (README), with --gpus rows of the same config
    ("3x3_s4", 1.02, 6.26, 2.34, 6.26, "h2d", 159854.0, 154650.0, 404.0, 0.967, 1.02),
    ("3x3_s1_uncontended", 1.02, 5.76, 2.17, 5.76, "h2d", 173496.0, 111283.0, 110.0, 0.641, 1.00),
    ("9x9_s4", 1.58, 6.93, 10.73, 10.73, "d2h", 93170.0, 87599.0, 172.0, 0.940, 1.01),
    ("9x9_s1_uncontended", 1.59, 5.79, 10.09, 10.09, "d2h", 99145.0, 57104.0, 150.0, 0.576, 1.00),
    ("9x9_s1_uncontended@gpu0.solo", 1.59, 5.79, 10.09, 10.09, "d2h", 99145.0, 57104.0, 150.0, 0.576, 1.00),
]


def _h200_rows() -> list:
    keys = ("label", "kernel_us", "h2d_us", "d2h_us", "roofline_us", "binds", "roofline_fps", "sustained_fps",
            "sustained_fps_spread", "fps_efficiency", "profiler_overhead")
    shape = {"cluster": 3, "cap": 3000, "streams": 1, "batch": 2000, "frames": 20000}
    rows = [{**dict(zip(keys, r)), **shape} for r in H200]
    # 8 GPUs at once: 8 x 160,000 FPS summed, spreads summed (8 x 2,300); trace columns empty
    rows.append({"label": "9x9_s1_uncontended@all", **shape, "gpus": 8,
                 "sustained_fps": 1280000.0, "sustained_fps_spread": 18400.0, "scaling_efficiency": 0.98,
                 "solo_fps": 163265.0, "solo_gpu": 0, "gpu_min_fps": 150000.0, "gpu_min_index": 3})
    return [result_row(r) for r in rows]


def fake_rows(monkeypatch, rows: list) -> None:
    def run_probe(plan, request, on_event=None, nsys=None):
        return probe_mod.ProbeOutcome(plan.results_dir, "sess", tuple(rows), (), None)

    monkeypatch.setattr(probe_mod, "preflight", lambda plan: Path("/fake/nsys"))
    monkeypatch.setattr(probe_mod, "run_probe", run_probe)


def test_summary_fits_80_columns_without_truncating_any_figure(monkeypatch, good: Path, tmp_path: Path) -> None:
    fake_rows(monkeypatch, _h200_rows())
    res = runner().invoke(app, ["probe", "--config", str(good), "--results-dir", str(tmp_path / "results")],
                          env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80
    lines = out.splitlines()
    # every figure of every row, whole, on the line of its config (labels are never folded)
    for label, kernel, h2d, d2h, roof, binds, roof_fps, fps, spread, eff, over in H200:
        trace = [ln for ln in lines if ln.startswith(label + " ") and "20,000" in ln]
        assert len(trace) == 1, (label, out)
        assert trace[0].split()[1:] == ["20,000", f"{kernel:.2f}", f"{h2d:.2f}", f"{d2h:.2f}", f"{roof:.2f}",
                                        binds.upper()]
        fps_line = [ln for ln in lines if ln.startswith(label + " ") and "20,000" not in ln]
        assert len(fps_line) == 1, (label, out)
        assert fps_line[0].split()[1:] == [f"{roof_fps:,.0f}", f"{fps:,.0f}", "±", f"{spread:,.0f}",
                                           f"{100 * eff:.0f}", f"{over:.2f}"]
    agg = [ln for ln in lines if ln.startswith("9x9_s1_uncontended@all ")]
    assert agg[1].split()[1:] == ["–", "1,280,000", "±", "18,400", "–", "–"]  # not measured: the one glyph
    text = " ".join(out.split())
    assert "scaling efficiency 0.98" in text and "slowest GPU 3: 150,000 FPS" in text and "8 GPU(s)" in text
    # the units: in the headers and the legend
    assert "µs" in out and "% of roofline = sustained FPS / roofline FPS" in text
    assert "profiler × = untraced FPS / traced FPS" in text


def test_summary_is_one_row_per_config_when_wide_enough_or_asked(monkeypatch, good: Path, tmp_path: Path) -> None:
    fake_rows(monkeypatch, _h200_rows()[:4])
    res = runner().invoke(app, ["probe", "--config", str(good), "--results-dir", str(tmp_path / "results")],
                          env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.stderr
    row = [ln for ln in res.stdout.splitlines() if ln.startswith("9x9_s4 ")]
    assert len(row) == 1 and row[0].split()[1:] == ["20,000", "1.58", "6.93", "10.73", "10.73", "D2H", "93,170",
                                                     "87,599", "±", "172", "94", "1.01"]
    assert "sustained/" in res.stdout and "…" not in res.stdout
    # at 80 columns the default is the narrow layout; --wide still gives one row per config, at its own
    # width (wider than 80), neither folded nor truncated
    res = runner().invoke(app, ["probe", "--config", str(good), "--results-dir", str(tmp_path / "results"),
                                "--wide"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.stderr
    row = [ln for ln in res.stdout.splitlines() if ln.startswith("9x9_s4 ")]
    assert len(row) == 1 and row[0].split()[-5:] == ["87,599", "±", "172", "94", "1.01"]
    assert "…" not in res.stdout and max(len(ln) for ln in res.stdout.splitlines()) > 80


def test_request_runs_the_probe_a_file_describes(monkeypatch, good: Path, tmp_path: Path) -> None:
    seen: dict = {}
    fake_run(monkeypatch, seen)
    asked = probe_mod.ProbeRequest(config_path=good, only=("3x3_s1",), frames=2000, repeat=4, results_root=tmp_path,
                                   max_util_pct=7.5, gpus="0", argv=("clusterbench", "probe", "--executor", "local"))
    path = tmp_path / "request.json"
    path.write_text(json.dumps(asked.to_json()))
    res = runner().invoke(app, ["probe", "--request", str(path), "--json"])
    assert res.exit_code == 0, res.stderr
    got = seen["request"]
    assert dataclasses.replace(got, argv=asked.argv) == asked
    assert got.argv == ("clusterbench", *sys.argv[1:])  # env.json records the command that ran, not the parent's


@pytest.mark.parametrize("args, words", [
    (["--frames", "10"], "--frames cannot go with it"),
    (["--only", "a", "--gpus", "all"], "--only, --gpus cannot go with it"),
])
def test_request_refuses_the_options_it_already_says(good: Path, tmp_path: Path, args: list[str], words: str) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(probe_mod.ProbeRequest(config_path=good).to_json()))
    res = runner().invoke(app, ["probe", "--request", str(path), *args])
    assert res.exit_code == 2 and words in messages(res.stderr)[0]


def test_a_bad_request_file_is_exit_2(tmp_path: Path) -> None:
    res = runner().invoke(app, ["probe", "--request", str(tmp_path / "missing.json")])
    assert res.exit_code == 2 and messages(res.stderr)[0] == f"Error: --request {tmp_path / 'missing.json'}: no such file"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "clusterbench.probe-request", "version": probe_mod.REQUEST_VERSION}))
    res = runner().invoke(app, ["probe", "--request", str(bad)])
    assert res.exit_code == 2 and messages(res.stderr)[0].startswith(f"Error: {bad}: missing field ")


# ----------------------------------------------------------------------------- a program as it is, checks first


def _refuse_gpu_calls(monkeypatch) -> None:
    """Any GPU or NVML call fails the test: what is checked here is checked before them."""
    import clusterbench.run.machine as machine

    def refuse(*a, **k):
        raise AssertionError("a GPU or NVML call before the options were checked")

    monkeypatch.setattr(guards, "gpu_present", refuse)
    monkeypatch.setattr(guards, "read_nvml", refuse)
    monkeypatch.setattr(machine, "read_gpu_topology", refuse)


def test_dry_run_prints_every_command_without_a_gpu(monkeypatch, good: Path, tmp_path: Path) -> None:
    from exec_programs import write_program

    _refuse_gpu_calls(monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nsys here either
    prog = write_program(tmp_path / "prog")
    res = runner().invoke(app, ["probe", "--dry-run", "--results-dir", str(tmp_path / "r"), "--frames", "kernel:calib",
                                "--rate", "rate: ([0-9.]+)", "--scan", "streams=1,4", "--capture", "nvtx:loop@daq",
                                "--", sys.executable, str(prog), "--streams", "{streams}"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.stderr
    out = re.sub(r" \\\n\s+", " ", res.stdout)  # long command lines come back whole (shell-style " \\")
    assert "nothing runs" in out and "nsys is not found here" in out
    assert "config toy_exec.py.streams1 (exec)" in out and "config toy_exec.py.streams4 (exec)" in out
    assert "placeholders: streams=4" in out
    # the traced command: nsys with the capture range and the program, its placeholders filled in
    trace = next(ln for ln in out.splitlines() if ln.strip().startswith("trace:") and "streams4" in ln)
    assert "NSYS_NVTX_PROFILER_REGISTER_ONLY=0 nsys profile -t cuda,nvtx" in trace
    assert "--capture-range=nvtx --nvtx-capture=loop@daq --capture-range-end=stop --export=sqlite" in trace
    assert trace.endswith(f"{prog} --streams 4")
    assert "analyze:  analyze_trace(toy_exec.py.streams4.sqlite, window='auto', frames='kernel:calib')" in out
    # paths inside the working folder are shown relative to it ("paths relative to this folder")
    here = str(Path.cwd()) + os.sep
    python = sys.executable[len(here):] if sys.executable.startswith(here) else sys.executable
    # each untraced run is a fresh process: --processes 3 (the default) runs, and 2 more at most
    assert out.count(f"untraced: {python} {prog} --streams 4") == 3
    assert "idle GPU: every selected GPU's utilization over 1 s at most 5 %" in out
    assert not (tmp_path / "r").exists()  # nothing written
    res = runner().invoke(app, ["probe", "--dry-run", "--json", "--config", str(good), "--results-dir",
                                str(tmp_path / "r")])
    doc = json.loads(res.stdout)
    assert doc["dry_run"] is True and doc["configs"][0]["label"] == "3x3_s1"
    # --repeat 3 (the default) counted runs in each of the 3 processes (--processes, the default)
    assert doc["configs"][0]["sustained"][0][-4:] == ["--mode", "sustained", "--repeat", "3"]
    assert len(doc["configs"][0]["sustained"]) == 3 and doc["processes"] == 3


def test_a_probe_says_which_rows_it_replaces_before_any_gpu_call(monkeypatch, good: Path, tmp_path: Path) -> None:
    import datetime

    from results_data import write

    day = datetime.date.today().isoformat()
    target = tmp_path / "r" / f"{day}_f32"
    stamp = "2026-11-30T09:15:00Z"
    write(target, [dict(ROW.to_json(), timestamp=stamp, session="s1"),
                   dict(ROW.to_json(), label="9x9_s1", config="9x9_s1", timestamp=stamp)],
          {"session_id": "s1"})
    _refuse_gpu_calls(monkeypatch)  # the notice comes first; then the GPU check refuses (the test's guard)
    res = runner().invoke(app, ["probe", "--config", str(good), "--results-dir", str(tmp_path / "r")],
                          env={"COLUMNS": "300"})
    lines = messages(res.stderr)
    assert lines[0] == (f"Warning: results dir {target} exists and holds 2 row(s): this probe replaces 1 of them: "
                        f"3x3_s1 (measured {stamp}); the other 1 are kept")
    assert lines[1].startswith("Hint: give --tag T")
    res = runner().invoke(app, ["probe", "--dry-run", "--config", str(good), "--results-dir", str(tmp_path / "r")],
                          env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.stderr
    assert f"results dir: {target}\n" in res.stdout
    assert f"this probe would replace 1 of them: 3x3_s1 (measured {stamp})" in res.stdout
    res = runner().invoke(app, ["probe", "--dry-run", "--config", str(good), "--results-dir", str(tmp_path / "new")],
                          env={"COLUMNS": "300"})
    assert "results dir: " in res.stdout and "(new)" in res.stdout


@pytest.mark.parametrize("args, words", [
    (["--max-util", "-5"], "--max-util must be between 0 and 100 %, got -5 %"),
    (["--results-dir", "{file}"], "is a file, not a folder"),
    (["--data", "{file}"], "not a .npy file"),
    (["--json", "--wide"], "--json and --wide cannot go together"),
    (["--timeout", "0"], "--timeout must be a number of seconds > 0, got 0.0"),
    (["--repeat", "0"], "--repeat must be an integer from 1 to 100"),
    (["--scan", "streams"], "--scan 'streams': expected NAME=V1,V2,..."),
    (["--scan", "streams=1,1"], "'1' is given twice"),
    (["--frames", "kernel:x"], "--frames is for a program probed as it is"),
    (["--window", "span"], "--window is for a program probed as it is"),
    (["--rate", "x ([0-9]+)"], "--rate is for a program probed as it is"),
    (["--label", "x"], "--label names a program given on the command line"),
    (["--plot", "{tmp}/p.png"], "--plot draws FPS against a scanned placeholder"),
    (["--frames", "0"], "--frames must be a positive integer or a frames definition"),
])
def test_every_flag_is_refused_before_the_gpu_check(monkeypatch, good: Path, tmp_path: Path, args, words) -> None:
    _refuse_gpu_calls(monkeypatch)
    afile = tmp_path / "afile.txt"
    afile.write_text("text\n")
    args = [a.replace("{file}", str(afile)).replace("{tmp}", str(tmp_path)) for a in args]
    res = runner().invoke(app, ["probe", "--config", str(good), *args])
    assert res.exit_code == 2, res.stderr
    assert words in messages(res.stderr)[0] and res.stdout == ""


@pytest.mark.parametrize("args, words", [
    (["--rate", "([0-9"], "--rate: --rate '([0-9' is not a regular expression"),
    (["--rate", "r ([0-9.]+)", "--rate-unit", "furlongs"], "--rate-unit must be one of fps, frames/s, events/s or Hz with an optional k or M prefix"),
    (["--sustained", "wall"], "sustained = \"wall\" divides frames by the program's wall time: give a frame count"),
    (["--sustained", "rate"], "sustained = \"rate\" reads the program's own rate: give rate = REGEX"),
    (["--window", "bogus"], "--window: --window 'bogus' is not a window"),
    (["--frames", "kernel:("], "not a regular expression"),
    (["--capture", "nvtx:"], "nvtx:NAME[@DOMAIN] needs a range name"),
    (["--wall-start", "a"], "give both markers"),
    (["--tracer", "none"], "--tracer none traces nothing, and this program's sustained figure would come from its trace"),
    (["--tracer", "cupti"], "the CUPTI tracer cannot host it"),
    (["--config", "{good}"], "give a program after -- or --config, not both"),
    (["--only", "a"], "--only picks configs of configs.toml"),
])
def test_a_programs_flags_are_refused_before_the_gpu_check(monkeypatch, good: Path, tmp_path: Path, args,
                                                            words) -> None:
    _refuse_gpu_calls(monkeypatch)
    args = [a.replace("{good}", str(good)) for a in args]
    res = runner().invoke(app, ["probe", *args, "--", sys.executable, "-c", "print('rate: 1 fps')"])
    assert res.exit_code == 2, res.stderr
    assert words in messages(res.stderr)[0], messages(res.stderr)


def test_a_program_missing_or_with_a_protocol_placeholder_is_refused(monkeypatch, tmp_path: Path) -> None:
    _refuse_gpu_calls(monkeypatch)
    res = runner().invoke(app, ["probe", "--", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "program not found" in messages(res.stderr)[0]
    res = runner().invoke(app, ["probe", "--", sys.executable, "--result", "{result}"])
    assert res.exit_code == 2 and "{result} in '{result}' belongs to the result-record protocol" in messages(res.stderr)[0]


def test_a_program_through_the_cli_with_tracer_none(monkeypatch, tmp_path: Path) -> None:
    from exec_programs import write_program
    from gpu_edges import FakeMachine

    FakeMachine(monkeypatch, 1)  # the GPU check and NVML, injected
    prog = write_program(tmp_path / "prog")
    res = runner().invoke(app, ["probe", "--tracer", "none", "--repeat", "2", "--results-dir", str(tmp_path / "r"),
                                "--rate", r"rate: ([0-9.]+)", "--scan", "streams=1,3", "--",
                                sys.executable, str(prog), "--streams", "{streams}"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.stderr
    out = res.stdout
    assert "toy_exec.py.streams1" in out and "toy_exec.py.streams3" in out
    assert "3,000" in out and "rate" in out  # the sustained figure and where it came from
    assert "from: result = the workload's result records" in out  # the legend of the source column
    scan = out[out.index("scan"):]
    assert "streams" in scan and "sum of" in scan and "nearer" in scan
    assert all(len(line) <= 80 for line in out.splitlines()), max(out.splitlines(), key=len)
    rows = {r["label"]: r for r in csv.DictReader(open(next((tmp_path / "r").glob("*_exec")) / "probes.csv"))}
    assert float(rows["toy_exec.py.streams3"]["sustained_fps"]) == 3000.0


def test_a_failed_config_prints_its_row_and_exits_1(monkeypatch, tmp_path: Path) -> None:
    from exec_programs import write_program
    from gpu_edges import FakeMachine

    FakeMachine(monkeypatch, 1)
    prog = write_program(tmp_path / "prog")
    res = runner().invoke(app, ["probe", "--tracer", "none", "--repeat", "1", "--results-dir", str(tmp_path / "r"),
                                "--rate", r"rate: ([0-9.]+)", "--timeout", "1", "--",
                                sys.executable, str(prog), "--sleep", "30"], env={"COLUMNS": "80"})
    assert res.exit_code == 1
    assert "toy_exec.py: FAILED in sustained: the sustained-FPS run of config" in " ".join(res.stdout.split())
    assert "time limit of 1 s" in messages(res.stderr)[0]


def test_dry_run_at_80_columns_wraps_prose_between_words_and_commands_shell_style(monkeypatch, tmp_path: Path) -> None:
    from exec_programs import write_program

    _refuse_gpu_calls(monkeypatch)
    monkeypatch.setenv("PATH", str(tmp_path))
    prog = write_program(tmp_path / "prog")
    res = runner().invoke(app, ["probe", "--dry-run", "--results-dir", str(tmp_path / "r"), "--frames", "kernel:calib",
                                "--rate", "rate: ([0-9.]+)", "--", sys.executable, str(prog), "--streams", "4"],
                          env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    for line in lines:  # at most 80 columns, unless one word alone is longer (a long path is not cut)
        assert len(line) <= 80 or len(line.strip().split()) == 1 or len(line.strip().rstrip(" \\").split()) == 1, line
    # a broken command line ends in " \\" and its next line is indented: joined, it is the command again
    joined = re.sub(r" \\\n\s+", " ", res.stdout)
    untraced = [ln.strip() for ln in joined.splitlines() if ln.strip().startswith("untraced:")]
    assert untraced and all(ln.endswith(f"{prog} --streams 4") for ln in untraced)
    assert any(ln.endswith(" \\") for ln in lines)  # the nsys line is longer than 80 columns: it was broken
