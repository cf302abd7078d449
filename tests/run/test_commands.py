"""Command lines the probe starts: built by pure functions, checked word by word."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from clusterbench.run.commands import (
    child_env,
    cupti_command,
    nsys_graph_trace_mode,
    nsys_profile_command,
    parse_nsys_version,
    package_root,
)


def test_nsys_profile_traces_cuda_and_nvtx_without_sampling(tmp_path: Path) -> None:
    child = ["py", "-m", "clusterbench.workloads.cupy.run", "--params-json", "{}"]
    cmd = nsys_profile_command("/x/nsys", tmp_path / "3x3_s4.partial", child)
    assert cmd == ["/x/nsys", "profile", "-t", "cuda,nvtx", "-s", "none", "--cpuctxsw=none",
                   "--cuda-graph-trace=node",
                   "--force-overwrite=true", "-o", str(tmp_path / "3x3_s4.partial"), *child]
    old = nsys_profile_command("/x/nsys", tmp_path / "3x3_s4.partial", child, graph_trace="graph")
    assert "--cuda-graph-trace=node" not in old and old[:7] == cmd[:7]
    with pytest.raises(ValueError):
        nsys_profile_command("/x/nsys", tmp_path / "a", child, graph_trace="nodes")


@pytest.mark.parametrize("text, version, mode", [
    ("NVIDIA Nsight Systems version 2025.3.2.474-253236389321v0", (2025, 3, 2), "node"),
    ("NVIDIA Nsight Systems version 2023.3.1.92-233133147223v0", (2023, 3, 1), "node"),
    ("NVIDIA Nsight Systems version 2023.2.3.1001-32894139v0", (2023, 2, 3), "graph"),
    ("NVIDIA Nsight Systems version 2022.4.2.1-df9881f", (2022, 4, 2), "graph"),
    ("2024.1", (2024, 1), "node"),
    ("no version here", None, "graph"),
    (None, None, "graph"),
])
def test_graph_trace_mode_follows_the_nsys_version(text, version, mode) -> None:
    # --cuda-graph-trace exists from nsys 2023.3 on (its release notes); older ones get no flag
    assert parse_nsys_version(text) == version
    assert nsys_graph_trace_mode(text) == mode


def test_nsys_export_writes_sqlite(tmp_path: Path) -> None:
    from clusterbench.io.nsys.export import nsys_export_command

    rep, out = tmp_path / "a.nsys-rep", tmp_path / "a.sqlite"
    assert nsys_export_command("nsys", rep, out) == [
        "nsys", "export", "--type", "sqlite", "--force-overwrite=true", "-o", str(out), str(rep)]


def test_the_cupy_workload_argv_uses_this_interpreter(tmp_path: Path) -> None:
    from clusterbench.model.params import WorkloadParams
    from clusterbench.workloads.protocol import CupyWorkload

    res = tmp_path / "r.json"
    p = WorkloadParams(frames=5, batch=5)
    argv = CupyWorkload().argv("a", p, res, "pass")
    assert argv[:3] == (sys.executable, "-m", "clusterbench.workloads.cupy.run")
    assert argv[3] == "--params-json" and json.loads(argv[4]) == p.to_json()
    assert argv[5:] == ("--result", str(res), "--mode", "pass", "--repeat", "1")
    assert CupyWorkload().argv("a", p, res, "sustained", 3)[-4:] == ("--mode", "sustained", "--repeat", "3")
    assert cupti_command("{}", tmp_path / "t.sqlite", res)[:3] == [sys.executable, "-m", "clusterbench.run.cupti_run"]


def test_child_env_puts_this_checkout_first_once() -> None:
    root = package_root()
    assert (root / "clusterbench" / "__init__.py").is_file()
    env = child_env({"PYTHONPATH": os.pathsep.join(["/elsewhere", str(root)]), "HOME": "/h"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(root), "/elsewhere"]
    assert env["HOME"] == "/h" and env["PYTHONUNBUFFERED"] == "1"
    assert child_env({})["PYTHONPATH"] == str(root)




def test_nsys_capture_ranges_and_the_export_at_the_end_of_the_profile(tmp_path: Path) -> None:
    from clusterbench.run.commands import nsys_capture_env
    from clusterbench.run.config import parse_capture

    child = ["./daq"]
    nvtx = parse_capture("nvtx:event loop@zoo_daq")
    cmd = nsys_profile_command("nsys", tmp_path / "a.partial", child, "node", capture=nvtx, export_sqlite=True)
    assert cmd[7:13] == ["--cuda-graph-trace=node", "--capture-range=nvtx", "--nvtx-capture=event loop@zoo_daq",
                         "--capture-range-end=stop", "--export=sqlite", "--force-overwrite=true"]
    assert nsys_capture_env(nvtx) == {"NSYS_NVTX_PROFILER_REGISTER_ONLY": "0"}  # unregistered strings seen too
    api = parse_capture("cudaProfilerApi")
    cmd = nsys_profile_command("nsys", tmp_path / "a.partial", child, "graph", capture=api)
    assert "--capture-range=cudaProfilerApi" in cmd and "--nvtx-capture" not in " ".join(cmd)
    assert "--export=sqlite" not in cmd and nsys_capture_env(api) == {} and nsys_capture_env(None) == {}
    for bad in ("nvtx", "nvtx:", "profiler"):
        with pytest.raises(ValueError):
            parse_capture(bad)
