"""probe --gpus end to end on CPU, once it is wired into clusterbench.probe (docs/scaling.md).

The edges are faked as in tests/test_probe.py: NVML (the GPU list and each GPU's reading), the
version probe, and nsys (a stand-in that runs the program and writes a trace). The workload is the
toy protocol program: in sustained mode its passes run at 1000, 2000 and 3000 FPS, so every GPU's
median is 2000 FPS, alone or not. Skipped until ProbeRequest has a ``gpus`` field.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from pathlib import Path

import pytest

from clusterbench import guards
from clusterbench import multigpu as mg
from clusterbench import probe as probe_mod
from clusterbench.errors import CheckFailed
from clusterbench.probe import ProbeRequest, plan_probe, run_probe

from protocol_programs import write_fake_nsys, write_program

pytestmark = pytest.mark.skipif("gpus" not in {f.name for f in dataclasses.fields(ProbeRequest)},
                                reason="--gpus is not wired into clusterbench.probe yet")

CONFIGS = """
[defaults]
detector = [400, 400]
pedestal_frames = 100
workload = "command"
command = ["{python}", "toy_ok.py", "--cluster", "{cluster}", "--frames", "{frames}", "--result", "{result}",
           "--mode", "{mode}", "--repeat", "{repeat}"]

[[config]]
label = "a"
cluster = 3
cap = 100
streams = 1
batch = 10
frames = 10
"""


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    p = tmp_path / "configs.toml"
    p.write_text(CONFIGS)
    write_program(tmp_path, "ok")
    return p


def _reading(index: int, util: float) -> guards.NvmlReading:
    return guards.NvmlReading(index=index, name="NVIDIA H200", uuid=f"GPU-{index:04d}", driver_version="580.1",
                              cuda_driver_version="13.0", util_pct=(util,), memory_used_bytes=0,
                              memory_total_bytes=1, sm_clock_mhz=345, max_sm_clock_mhz=1980, throttle_reasons=(),
                              compute_processes=())


def edges(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, busy: tuple[int, ...] = ()) -> Path:
    allowed = tuple(sorted(os.sched_getaffinity(0)))
    topology = tuple(mg.GpuInfo(i, f"GPU-{i:04d}", "NVIDIA H200", cpus=allowed, mem_nodes=(0,),
                                cpu_source=mg.AffinitySource.NVML, mem_source=mg.AffinitySource.NVML)
                     for i in range(2))
    monkeypatch.setattr(mg, "read_gpu_topology", lambda: topology)
    monkeypatch.setattr(guards, "read_nvml", lambda device_index, window_s: _reading(device_index,
                                                                                     80.0 if device_index in busy
                                                                                     else 0.0))
    monkeypatch.setattr(guards, "gpu_present", lambda: True)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def run_guards(config_file, *, max_util_pct, require_clean, force, device_index=0, **kw):
        return guards.make_report([guards.GuardCheck("git", guards.Status.PASS, "clean")], force=force,
                                  reading=_reading(device_index, 0.0))

    monkeypatch.setattr(guards, "run_guards", run_guards)
    monkeypatch.setattr(probe_mod, "read_child_versions", lambda nsys: {"cupy": "13.6.0", "nsys": "2025.3.2"})
    return write_fake_nsys(tmp_path)


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="") as fh:
        return {r["label"]: r for r in csv.DictReader(fh)}


def test_gpus_all_writes_solo_per_gpu_and_aggregate_rows(monkeypatch, config_path: Path, tmp_path: Path) -> None:
    nsys = edges(monkeypatch, tmp_path)
    req = ProbeRequest(config_path=config_path, results_root=tmp_path / "results", argv=("clusterbench", "probe"),
                       gpus="all")
    plan = plan_probe(req)
    run_probe(plan, req, nsys=nsys)
    rows = _rows(plan.results_dir / "probes.csv")
    assert set(rows) == {"a", "a@gpu0.solo", "a@gpu0", "a@gpu1", "a@all"}
    assert float(rows["a"]["kernel_us"]) == pytest.approx(0.3)  # the solo GPU's trace, as a plain probe
    assert float(rows["a"]["sustained_fps"]) == 2000.0  # the solo figure
    assert rows["a@gpu1"]["gpu"] == "1:GPU-0001" and rows["a@gpu1"]["role"] == "concurrent"
    agg = rows["a@all"]
    assert float(agg["sustained_fps"]) == 4000.0 and float(agg["gpu_min_fps"]) == 2000.0
    assert float(agg["scaling_efficiency"]) == pytest.approx(1.0) and agg["gpus"] == "2"
    env = json.loads((plan.results_dir / "env.json").read_text())
    assert env["multi_gpu"]["guard"]["run"] == [0, 1]
    assert env["multi_gpu"]["configs"]["a"]["total_fps"] == 4000.0
    assert env["multi_gpu"]["gpus"][0]["pinning"]["method"] in ("numactl", "sched_setaffinity")


def test_a_busy_gpu_refuses_unless_forced_then_only_itself(monkeypatch, config_path: Path, tmp_path: Path) -> None:
    nsys = edges(monkeypatch, tmp_path, busy=(1,))
    req = ProbeRequest(config_path=config_path, results_root=tmp_path / "results", gpus="all")
    with pytest.raises(CheckFailed, match="GPU 1"):
        run_probe(plan_probe(req), req, nsys=nsys)
    forced = dataclasses.replace(req, force=True)
    plan = plan_probe(forced)
    run_probe(plan, forced, nsys=nsys)
    rows = _rows(plan.results_dir / "probes.csv")
    assert "a@gpu1" not in rows and rows["a@all"]["gpus"] == "1"
    env = json.loads((plan.results_dir / "env.json").read_text())
    assert env["multi_gpu"]["guard"]["refused"] == [1]
