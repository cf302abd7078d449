"""On the GPU: the injection library in the zoo's daq_loop, against the program's own ground truth (its ZOO
line: the calls it made of each kind, its own steady_clock time per call, its frames), the library's delays
(a GPU spin in the frame's stream lengthens a one-stream frame by about its time), and the latency
program's report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clusterbench.analyzers.untraced import host_frame
from clusterbench.model.untraced import LatencyRun
from clusterbench.run import inject

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")]
ZOO = Path(__file__).resolve().parents[1] / "zoo"


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    d = tmp_path_factory.mktemp("untraced")
    env = {**os.environ, inject.CACHE_ENV: str(d / "cache")}
    res = subprocess.run(["bash", str(ZOO / "build.sh"), str(d / "zoo"), "daq_loop"], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    return d, inject.build(inject.INJECT_LIB, environ=env), inject.build(inject.LATENCY_BIN, environ=env)


def _run(tools, *args: str, **delays):
    d, lib, _ = tools
    report = d / f"r{len(list(d.glob('r*.json')))}.json"
    env = {**os.environ, **inject.inject_env(lib, report, "kernel:zoo_calib", warmup=10, **delays)}
    res = subprocess.run([str(d / "zoo" / "daq_loop"), *args], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    zoo = json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("ZOO "))[4:])
    return inject.read_report(report), zoo


def test_the_library_counts_the_programs_calls_and_frames(tools) -> None:
    rep, zoo = _run(tools, "--frames", "3000", "--streams", "1")
    assert rep.error is None and rep.sched in ("auto", "spin", "yield", "blocking")
    (t,) = [t for t in rep.threads if t.marks_total]
    # every zoo_calib launch: the loop's frames and one warm-up launch a stream
    assert t.marks_total == zoo["launches"]["zoo_calib"] == 3001
    frame = host_frame(rep)
    assert frame is not None and frame.frames == 3001 - 1 - 10
    per = {api: n for api, n, _ in frame.calls}
    # per frame: two copies, a memset, two event records, a launch, a synchronize (the program's own counts)
    by_api = {}
    for k in zoo["calls"]:
        by_api[k["api"]] = by_api.get(k["api"], 0) + k["n"]
    for api in ("cudaMemcpyAsync", "cudaMemsetAsync", "cudaEventRecord", "cudaLaunchKernel", "cudaStreamSynchronize"):
        assert per[api] == pytest.approx(by_api[api] / 3000, rel=0.02), api
    # the library's untraced time per call against the program's own steady_clock around the same calls
    own = {k["label"]: k["total_ns"] / k["n"] / 1e3 for k in zoo["calls"]}
    lib_us = {api: us for api, _, us in frame.calls}
    assert lib_us["cudaStreamSynchronize"] == pytest.approx(own["sync"], rel=0.25, abs=1.0)
    assert lib_us["cudaLaunchKernel"] == pytest.approx(own["launch"], rel=0.5, abs=1.0)
    # the untraced frame against the program's own rate
    assert frame.period_us == pytest.approx(1e6 / zoo["reported"]["rate"], rel=0.05)


def test_a_gpu_spin_in_the_stream_lengthens_a_one_stream_frame(tools) -> None:
    base, _ = _run(tools, "--frames", "2000", "--streams", "1", gpu_us=0.0)
    slow, _ = _run(tools, "--frames", "2000", "--streams", "1", gpu_us=30.0)
    assert slow.gpu_applied == slow.marks_total and slow.not_tested is None
    f0, f1 = host_frame(base), host_frame(slow)
    assert (f1.period_us - f0.period_us) == pytest.approx(30.0, rel=0.25)  # one stream: the GPU is on the path


def test_a_host_spin_shows_as_delay_not_as_the_hosts_own_time(tools) -> None:
    rep, _ = _run(tools, "--frames", "2000", "--streams", "1", host_us=15.0)
    (bar,) = host_frame(rep).threads
    assert bar.delay_us == pytest.approx(15.0, rel=0.1)


def test_the_latency_program_reports(tools, tmp_path: Path) -> None:
    _, _, binary = tools
    out = tmp_path / "lat.json"
    res = subprocess.run([str(binary), "--out", str(out), "--round-trips", "200"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    run = LatencyRun.from_report(json.loads(out.read_text()), "none")
    seq = run.sequence
    assert seq is not None and seq.period_ns and seq.gate_timeouts == 0
    assert run.gap_ns is not None and run.gap_ns > 0
    # the round trip's three parts add up to its gap (one clock offset between them)
    assert run.wake_ns + run.host_ns + run.launch_ns == pytest.approx(run.gap_ns, rel=0.2, abs=500)
    assert run.chain("kernel:1").kernel_gap_ns is not None
    # a synchronize with nothing to wait for costs less than a launch and a synchronize that waits for it
    assert run.idle_sync_ns is not None and 0 < run.idle_sync_ns < run.sync_call_ns


def test_empty_callbacks_write_no_report_and_leave_the_program_as_it_is(tools) -> None:
    d, lib, _ = tools
    report = d / "empty.json"
    env = {**os.environ, **inject.inject_env(lib, report, "kernel:zoo_calib"), "CB_INJECT_EMPTY": "1"}
    res = subprocess.run([str(d / "zoo" / "daq_loop"), "--frames", "500", "--streams", "2"], capture_output=True,
                         text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    zoo = json.loads(next(ln for ln in res.stdout.splitlines() if ln.startswith("ZOO "))[4:])
    assert zoo["launches"]["zoo_calib"] == 502  # the loop's frames and one warm-up launch a stream
    assert not report.exists()  # the callbacks returned at once: nothing counted, nothing written


def test_callback_cost_measures_every_mode(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, str(root / "benchmarks" / "callback_cost.py"),
                          str(tmp_path), "--processes", "1", "--calls", "2000", "--kinds", "query", "launch",
                          "--frame-us", "14", "--calls-per-frame", "7"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads((tmp_path / "callback_cost.json").read_text())
    for kind in ("query", "launch"):
        k = doc["kinds"][kind]
        assert all(k[m]["n"] == 1 and k[m]["median_ns"] > 0 for m in ("bare", "empty", "every", "none", "both"))
        assert k["ours_ns"] == pytest.approx(k["every"]["median_ns"] - k["empty"]["median_ns"])
    assert "2 % allows 40 ns per call" in res.stdout  # 0.02 × 14 µs over 7 calls
