"""clusterbench probe through the CLI: exit codes, stdout/stderr split, --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import clusterbench.guards as guards
import clusterbench.probe as probe_mod
from clusterbench.cli import app

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
    assert res.exit_code == 2 and "no config has that label" in res.stderr
    res = runner().invoke(app, ["probe", "--config", str(good), "--tracer", "perf"])
    assert res.exit_code == 2 and "--tracer must be nsys, cupti or none" in res.stderr


def test_valid_config_without_gpu_is_exit_1_with_one_clear_line(monkeypatch, good: Path, tmp_path: Path) -> None:
    monkeypatch.setattr(guards, "gpu_present", lambda: False)
    res = runner().invoke(app, ["probe", "--config", str(good), "--results-dir", str(tmp_path / "r")])
    assert res.exit_code == 1
    lines = res.stderr.strip().splitlines()
    assert lines[0] == "Error: no NVIDIA GPU found (NVML reports no usable device): probe needs one"
    assert lines[1].startswith("Hint:") and len(lines) == 2
    assert res.stdout == ""
    assert not (tmp_path / "r").exists()


ROW = {"label": "3x3_s1", "cluster": 3, "cap": 3000, "streams": 1, "batch": 2000, "frames": 20000,
       "kernel_us": 4.65, "h2d_us": 13.13, "d2h_us": 2.5, "roofline_us": 13.13, "binds": "h2d",
       "roofline_fps": 76161.5, "sustained_fps": 61400.0, "sustained_fps_spread": 300.0,
       "fps_efficiency": 0.806, "profiler_overhead": 1.5}


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
    assert doc["rows"] == [ROW] and doc["session"] == "sess"
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
    assert " 81 " in out and " 1.50 " in out
    assert "Results:" in res.stderr and "Warning:" in res.stderr


def test_data_must_exist_and_reaches_every_config(monkeypatch, good: Path, tmp_path: Path) -> None:
    res = runner().invoke(app, ["probe", "--config", str(good), "--data", str(tmp_path / "none.npy")])
    assert res.exit_code == 2 and f"Error: --data {tmp_path / 'none.npy'}: no such file" in res.stderr
    npy = tmp_path / "frames.npy"
    npy.write_bytes(b"")  # validated by the workload when it loads it; the plan only needs the path
    seen: dict = {}
    fake_run(monkeypatch, seen)
    res = runner().invoke(app, ["probe", "--config", str(good), "--data", str(npy), "--results-dir", str(tmp_path)])
    assert res.exit_code == 0, res.stderr
    assert seen["request"].data == npy
    plan = probe_mod.plan_probe(seen["request"])
    assert {c.params.data for c in plan.configs} == {str(npy.resolve())}
