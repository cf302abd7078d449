"""clusterbench guard through CliRunner: config errors (exit 2), no GPU (exit 1), refusal (exit 3), --force, --json.

The GPU is replaced at the outermost edge only: the ``pynvml`` module in sys.modules.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from cli_output import messages
from typer.testing import CliRunner

from clusterbench.cli import app

MIB = 1024 * 1024


class FakeNVMLError(Exception):
    pass


def fake_pynvml(util: int = 0, init_error: Exception | None = None) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.NVMLError = FakeNVMLError
    m.calls = []

    def init() -> None:
        m.calls.append("init")
        if init_error is not None:
            raise init_error

    m.nvmlInit = init
    m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetCount = lambda: 1
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetName = lambda h: "NVIDIA H200"
    m.nvmlDeviceGetUUID = lambda h: "GPU-abcd"
    m.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=b"00000000:17:00.0")
    m.nvmlDeviceGetCpuAffinity = lambda h, words: [0b1] + [0] * (words - 1)  # core 0
    m.nvmlSystemGetDriverVersion = lambda: "580.65.06"
    m.nvmlSystemGetCudaDriverVersion = lambda: 13000
    m.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=util, memory=0)
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=1024 * MIB, total=143_771 * MIB)
    m.nvmlDeviceGetClockInfo = lambda h, t: 345
    m.nvmlDeviceGetMaxClockInfo = lambda h, t: 1980
    m.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: 0x1
    m.nvmlDeviceGetComputeRunningProcesses = lambda h: []
    m.nvmlSystemGetProcessName = lambda pid: "x"
    return m


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run from a folder that is no checkout and has no configs.toml."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _install(monkeypatch: pytest.MonkeyPatch, module: Any) -> Any:
    monkeypatch.setitem(sys.modules, "pynvml", module)
    return module


def test_no_gpu_is_one_error_line_and_exit_1(runner: CliRunner, outside: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _install(monkeypatch, fake_pynvml(init_error=FakeNVMLError("NVML Shared Library Not Found")))
    res = runner.invoke(app, ["guard", "--sample-window", "0.01"])
    assert res.exit_code == 1
    assert res.stdout == ""
    lines = messages(res.stderr)
    assert lines[0] == "Error: no NVIDIA GPU/driver found: NVML did not initialise (NVML Shared Library Not Found); is the NVIDIA driver loaded?"
    assert lines[1].startswith("Hint: ") and len(lines) == 2
    assert max(len(ln) for ln in res.stderr.splitlines()) <= 80  # piped, COLUMNS unset: 80 columns
    assert "Traceback" not in res.output


def test_no_bindings_no_smi_exit_1(runner: CliRunner, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install(monkeypatch, None)
    monkeypatch.setenv("PATH", str(outside))
    res = runner.invoke(app, ["guard"])
    assert res.exit_code == 1
    assert res.stderr.startswith("Error: the NVML Python bindings are missing (module pynvml, package")
    assert "pip install -e '.[gpu]'" in res.stderr  # the fix, as probe names it too


def test_broken_config_is_exit_2_before_any_nvml_call(runner: CliRunner, outside: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _install(monkeypatch, fake_pynvml())
    (outside / "configs.toml").write_text(
        '[[config]]\nlabel = "a"\ncluster = 4\ncap = 1\nstreams = 1\nbatch = 1\nframes = 1\n')
    res = runner.invoke(app, ["guard"])  # ./configs.toml is read by default
    assert res.exit_code == 2
    assert "Error: configs.toml:3: config 'a': key 'cluster': must be odd" in res.stderr
    assert fake.calls == []  # NVML never touched


def test_explicit_missing_config_is_exit_2(runner: CliRunner, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _install(monkeypatch, fake_pynvml())
    res = runner.invoke(app, ["guard", "--config", "missing.toml"])
    assert res.exit_code == 2
    assert "Error: config file not found: missing.toml" in res.stderr
    assert fake.calls == []


def test_busy_gpu_is_refused_with_exit_3(runner: CliRunner, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install(monkeypatch, fake_pynvml(util=37))
    res = runner.invoke(app, ["guard", "--sample-window", "0.01"], env={"COLUMNS": "250"})
    assert res.exit_code == 3
    out = res.stdout
    assert "GPU 0 NVIDIA H200 (GPU-abcd)" in out
    assert "FAIL" in out and "idle_gpu" in out and "utilization max 37 %" in out
    assert "SM clock 345 MHz of 1980 MHz max" in out
    assert "REFUSED (gpu_failed, 1 warning): GPU 0 (NVIDIA H200) is busy" in out
    error, hint = messages(res.stderr)
    assert error.startswith("Error: guard refused: GPU 0 (NVIDIA H200) is busy: utilization max 37 %")
    assert hint.startswith("Hint: Wait for the other work") and "--force" in hint


def test_force_proceeds_and_says_so(runner: CliRunner, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install(monkeypatch, fake_pynvml(util=37))
    res = runner.invoke(app, ["guard", "--sample-window", "0.01", "--force"], env={"COLUMNS": "250"})
    assert res.exit_code == 0
    assert "FORCED (forced_all, 1 warning): --force overrides the failed guard of every GPU (0)" in res.stdout
    warning, hint = messages(res.stderr)
    assert warning.startswith("Warning: --force overrides the failed guard of every GPU (0): GPU 0 (NVIDIA H200) "
                              "is busy: utilization max 37 %")
    assert hint.startswith("Hint: a probe records the override in env.json")


def test_max_util_option_moves_the_limit(runner: CliRunner, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install(monkeypatch, fake_pynvml(util=37))
    res = runner.invoke(app, ["guard", "--sample-window", "0.01", "--max-util", "40", "--json"])
    data = json.loads(res.stdout)
    idle = next(c for c in data["gpus"][0]["checks"] if c["name"] == "idle_gpu")
    assert idle["status"] == "pass" and idle["details"]["max_util_pct"] == 40.0
    assert data["status"] == "pass" and data["settings"]["max_util_pct"] == 40.0


def test_json_is_only_json_on_stdout(runner: CliRunner, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install(monkeypatch, fake_pynvml(util=6))
    res = runner.invoke(app, ["guard", "--sample-window", "0.01", "--json"])
    assert res.exit_code == 3
    data = json.loads(res.stdout)
    assert data["schema"] == "clusterbench.guard/2" and data["version"] == 1
    assert (data["status"], data["reason"], data["run"], data["refused"], data["forced"]) == (
        "refused", "gpu_failed", [], [0], [])
    (gpu,) = data["gpus"]
    assert gpu["uuid"] == "GPU-abcd" and gpu["reading"]["util_max_pct"] == 6.0 and gpu["reason"] == "idle_gpu"
    assert gpu["reading"]["memory_used_bytes"] == 1024 * MIB
    statuses = {c["name"]: c["status"] for c in gpu["checks"] + data["host_checks"]}
    assert statuses["idle_gpu"] == "fail"
    assert statuses["import_location"] == "skip"  # not run from a checkout
    assert statuses["git"] == "warn"


def test_bad_max_util_is_exit_2(runner: CliRunner, outside: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install(monkeypatch, fake_pynvml())
    res = runner.invoke(app, ["guard", "--max-util", "-1"])
    assert res.exit_code == 2
    assert "--max-util must be between 0 and 100 %, got -1 %" in messages(res.stderr)[0]


def test_gpus_judges_every_gpu_named_once_in_one_verdict(runner: CliRunner, outside: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _install(monkeypatch, fake_pynvml(util=0))
    fake.nvmlDeviceGetCount = lambda: 2
    fake.nvmlDeviceGetUUID = lambda h: f"GPU-{h}"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    res = runner.invoke(app, ["guard", "--sample-window", "0.01", "--gpus", "1,0", "--json"])
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    assert [g["index"] for g in data["gpus"]] == [1, 0] and data["run"] == [1, 0]
    assert [g["uuid"] for g in data["gpus"]] == ["GPU-1", "GPU-0"]
    assert data["status"] == "pass" and data["message"] == "every check passed on GPU 1, 0"


def test_bad_gpus_is_exit_2_before_any_nvml_call(runner: CliRunner, outside: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _install(monkeypatch, fake_pynvml())
    res = runner.invoke(app, ["guard", "--gpus", "0,0"])
    assert res.exit_code == 2 and "--gpus '0,0' names GPU 0 twice" in messages(res.stderr)[0]
    assert fake.calls == []
