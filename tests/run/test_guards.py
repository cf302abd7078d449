"""Guard decisions on hand-made NVML readings and files (the one judge over 1..N GPUs and the host), and
NVML reading through a fake pynvml."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import clusterbench
from clusterbench.errors import (
    EXIT_CHECK,
    EXIT_ENVIRONMENT,
    CheckFailed,
    EnvironmentFailure,
    InputError,
)
from clusterbench.run.config import parse_configs
from clusterbench.run.guards import (
    GpuStatus,
    GuardCheck,
    GuardVerdict,
    NvmlReading,
    Status,
    VerdictStatus,
    check_clocks,
    check_external_build,
    check_git,
    check_idle_gpu,
    check_import_location,
    check_kernel_sources,
    find_checkout,
    gpu_present,
    judge,
    no_gpu_failure,
    read_nvml,
    require_guard_pass,
    run_guards,
)

MIB = 1024 * 1024
# sha256(b"abc"), the FIPS 180-2 test vector
SHA_ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def reading(util: tuple[float, ...] = (0.0, 1.0, 0.0), procs: tuple = (), reasons: tuple[str, ...] = ("gpu_idle",),
            sm: int | None = 345, sm_max: int | None = 1980, used: int = 512 * MIB, index: int = 0) -> NvmlReading:
    return NvmlReading(
        index=index, name="NVIDIA H200", uuid=f"GPU-{1234 + index}", driver_version="580.65.06", cuda_driver_version="13.0",
        util_pct=util, memory_used_bytes=used, memory_total_bytes=143_771 * MIB, sm_clock_mhz=sm,
        max_sm_clock_mhz=sm_max, throttle_reasons=reasons, compute_processes=procs, window_s=1.0,
    )


# ----------------------------------------------------------------------------- idle GPU


def test_six_percent_over_a_five_percent_limit_fails_and_shows_the_values() -> None:
    c = check_idle_gpu(reading(util=(0.0, 6.0, 2.0)), max_util_pct=5.0)
    assert c.status is Status.FAIL
    assert "utilization max 6 %" in c.message and "limit 5 %" in c.message
    assert "1 of 3 samples over the limit" in c.message
    assert "memory used 512.0 MiB of 143,771.0 MiB" in c.message
    assert c.hint
    assert c.details["util_max_pct"] == 6.0 and c.details["samples_over"] == 1


def test_exactly_at_the_limit_passes() -> None:
    c = check_idle_gpu(reading(util=(5.0, 5.0)), max_util_pct=5.0)
    assert c.status is Status.PASS
    assert "is idle" in c.message and "mean 5.0 %" in c.message


def test_the_limit_is_configurable() -> None:
    assert check_idle_gpu(reading(util=(20.0,)), max_util_pct=25.0).status is Status.PASS
    assert check_idle_gpu(reading(util=(1.0,)), max_util_pct=0.0).status is Status.FAIL


def test_another_process_holding_a_context_fails_even_at_zero_utilization() -> None:
    c = check_idle_gpu(reading(util=(0.0,), procs=((4242, "python", 300 * MIB),)), own_pid=1)
    assert c.status is Status.FAIL
    assert "1 other process holds a compute context: pid 4242 python (300.0 MiB)" in c.message
    assert c.details["other_processes"] == [{"pid": 4242, "name": "python", "used_bytes": 300 * MIB}]


def test_own_process_is_not_competition() -> None:
    c = check_idle_gpu(reading(procs=((77, "clusterbench", None),)), own_pid=77)
    assert c.status is Status.PASS


def test_unknown_process_memory_shows_not_measured() -> None:
    c = check_idle_gpu(reading(procs=((5, "x", None), (6, "y", 2 * MIB))), own_pid=None)
    assert c.status is Status.FAIL
    assert "2 other processes hold a compute context: pid 5 x (–); pid 6 y (2.0 MiB)" in c.message


def test_busy_and_contended_report_both() -> None:
    c = check_idle_gpu(reading(util=(50.0,), procs=((5, "x", None),)))
    assert "utilization max 50 %" in c.message and "pid 5 x" in c.message


def test_reading_rejects_impossible_values() -> None:
    with pytest.raises(ValueError, match="0..100"):
        reading(util=(101.0,))
    with pytest.raises(ValueError, match="at least one"):
        reading(util=())


# ----------------------------------------------------------------------------- clocks


def test_idle_clocks_pass_with_mhz() -> None:
    c = check_clocks(reading())
    assert c.status is Status.PASS
    assert "SM clock 345 MHz of 1980 MHz max; throttle reasons: gpu_idle" in c.message


def test_thermal_throttle_warns() -> None:
    c = check_clocks(reading(reasons=("hw_thermal_slowdown", "sw_power_cap"), sm=1200))
    assert c.status is Status.WARN
    assert "SM clock 1200 MHz" in c.message and "hw_thermal_slowdown, sw_power_cap" in c.message
    assert c.hint


def test_unreadable_clock() -> None:
    c = check_clocks(reading(sm=None, sm_max=None, reasons=()))
    assert c.status is Status.PASS and "SM clock not readable; throttle reasons: none" in c.message


# ----------------------------------------------------------------------------- kernel sources


def test_hash_kernel_sources(tmp_path: Path) -> None:
    from clusterbench.workloads.cupy.build import hash_kernel_sources as hash_sources

    (tmp_path / "a.cu").write_bytes(b"abc")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.cuh").write_bytes(b"")
    (tmp_path / "notes.txt").write_bytes(b"abc")
    got = hash_sources(tmp_path)
    # sha256 of the empty string, the other FIPS 180-2 vector
    assert got == {"a.cu": SHA_ABC, "sub/b.cuh": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}
    assert hash_sources(tmp_path / "absent") == {}


def test_one_kernel_hasher_serves_the_guard_and_the_workload() -> None:
    # the guard's "what the run compiles" is the workload's own hasher, reached by a real import
    from clusterbench.run.guards import compiled_kernel_sources
    from clusterbench.workloads.cupy.build import kernel_sources

    assert compiled_kernel_sources() == kernel_sources() != {}


def test_kernel_sources_match() -> None:
    c = check_kernel_sources({"a.cu": "1"}, {"a.cu": "1"})
    assert c.status is Status.PASS and "1 kernel source match the checkout" in c.message
    assert c.details["sha256"] == {"a.cu": "1"}


def test_kernel_sources_differ_missing_and_extra() -> None:
    c = check_kernel_sources({"a.cu": "1", "b.cu": "2"}, {"a.cu": "X", "c.cuh": "3"})
    assert c.status is Status.FAIL
    assert "differ: a.cu" in c.message
    assert "only in the checkout: b.cu" in c.message
    assert "only in the imported copy: c.cuh" in c.message


def test_kernel_sources_without_a_checkout_are_recorded() -> None:
    c = check_kernel_sources(None, {"a.cu": "1", "b.cu": "2"})
    assert c.status is Status.PASS and "2 kernel sources hashed" in c.message


def test_no_kernel_sources_fails() -> None:
    assert check_kernel_sources({}, {}).status is Status.FAIL


# ----------------------------------------------------------------------------- import location


def test_import_location(tmp_path: Path) -> None:
    (tmp_path / "clusterbench").mkdir()
    inside = tmp_path / "clusterbench" / "__init__.py"
    assert check_import_location(inside, tmp_path).status is Status.PASS
    stale = tmp_path / "venv" / "lib" / "site-packages" / "clusterbench" / "__init__.py"
    c = check_import_location(stale, tmp_path)
    assert c.status is Status.FAIL
    assert "site-packages" in c.message and "pip install -e ." in c.hint
    assert check_import_location(stale, None).status is Status.SKIP


def test_this_test_run_imports_this_checkout() -> None:
    repo = Path(__file__).resolve().parents[2]
    assert find_checkout(Path(__file__).parent) == repo
    assert check_import_location(clusterbench.__file__, repo).status is Status.PASS


def test_find_checkout_outside(tmp_path: Path) -> None:
    assert find_checkout(tmp_path) is None


# ----------------------------------------------------------------------------- external build


def _touch(p: Path, mtime: float) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("x")
    os.utime(p, (mtime, mtime))
    return p


def test_fresh_artifact_passes(tmp_path: Path) -> None:
    art = _touch(tmp_path / "build" / "finder", 2_000_000)
    _touch(tmp_path / "src" / "a.cu", 1_000_000)
    _touch(tmp_path / "src" / "b.cu", 1_999_999)
    c = check_external_build(art, [tmp_path / "src" / "*.cu"])
    assert c.status is Status.PASS and "newer than all 2 sources" in c.message


def test_stale_artifact_fails_and_names_the_newest_source(tmp_path: Path) -> None:
    art = _touch(tmp_path / "finder", 2_000_000)
    _touch(tmp_path / "src" / "a.cu", 2_000_010)
    b = _touch(tmp_path / "src" / "b.cu", 2_000_100)
    _touch(tmp_path / "src" / "c.cu", 1_000_000)
    c = check_external_build(art, [tmp_path / "src" / "*.cu"])
    assert c.status is Status.FAIL
    assert f"older than 2 of its 3 sources (newest: {b}, 100.0 s newer)" in c.message
    assert c.hint == "Rebuild the artifact, then re-run."


def test_an_artifact_pattern_checks_the_newest_match(tmp_path: Path) -> None:
    # a Python extension's name carries its ABI tag (_aare_cuda.cpython-312-x86_64-linux-gnu.so)
    _touch(tmp_path / "pkg" / "_ext.cpython-311.so", 1_000_000)
    new = _touch(tmp_path / "pkg" / "_ext.cpython-312.so", 3_000_000)
    _touch(tmp_path / "src" / "a.tar.gz", 2_000_000)
    c = check_external_build(tmp_path / "pkg" / "_ext*.so", [tmp_path / "src" / "*.tar.gz"])
    assert c.status is Status.PASS and c.details["artifact"] == str(new)
    os.utime(new, (1_500_000, 1_500_000))  # now every build is older than the source
    c = check_external_build(tmp_path / "pkg" / "_ext*.so", [tmp_path / "src" / "*.tar.gz"])
    assert c.status is Status.FAIL and "older than 1 of its 1 sources" in c.message
    c = check_external_build(tmp_path / "none" / "_ext*.so", [tmp_path / "src" / "*.tar.gz"])
    assert c.status is Status.FAIL and "build artifact not found" in c.message and "Build it first" in c.hint


def test_missing_artifact_and_missing_sources(tmp_path: Path) -> None:
    c = check_external_build(tmp_path / "nope", [])
    assert c.status is Status.FAIL and "build artifact not found" in c.message
    art = _touch(tmp_path / "finder", 1)
    c = check_external_build(art, [tmp_path / "src" / "*.cu", tmp_path / "k.cu"])
    assert c.status is Status.FAIL and "build sources not found" in c.message and "k.cu" in c.message


# ----------------------------------------------------------------------------- git


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_git_clean_dirty_and_require_clean(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("1\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "commit", "-q", "-m", "one")
    head = _git(tmp_path, "rev-parse", "HEAD")

    c = check_git(tmp_path)
    assert c.status is Status.PASS and c.details["rev"] == head and c.details["dirty"] is False
    assert f"git {head[:12]}, clean" == c.message

    (tmp_path / "results.csv").write_text("untracked\n")  # untracked files do not make it dirty
    c = check_git(tmp_path)
    assert c.details["dirty"] is False and c.details["untracked_count"] == 1

    (tmp_path / "a.py").write_text("2\n")
    c = check_git(tmp_path)
    assert c.status is Status.WARN and c.details["dirty"] is True
    assert "dirty: 1 modified file (a.py)" in c.message
    c = check_git(tmp_path, require_clean=True)
    assert c.status is Status.FAIL and "--require-clean refuses a dirty tree" in c.message

    _git(tmp_path, "add", "a.py")  # staged counts as dirty too
    assert check_git(tmp_path).details["dirty"] is True


def test_not_a_git_checkout_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLUSTERBENCH_GIT_REV", raising=False)  # set where a copy without .git runs the suite
    c = check_git(tmp_path)
    assert c.status is Status.WARN and c.details["rev"] is None
    assert check_git(None).status is Status.WARN


# ----------------------------------------------------------------------------- judging


def _c(status: Status, name: str = "x") -> GuardCheck:
    return GuardCheck(name, status, f"{name} {status.value}", hint="do this")


IDLE, BUSY = (0.0, 1.0), (80.0, 90.0)  # utilization samples, %: under and over the 5 % limit


def test_one_idle_gpu_and_passing_host_checks_pass() -> None:
    v = judge([reading(util=IDLE)], [_c(Status.PASS, "git"), _c(Status.WARN, "kernel_sources")], max_util_pct=5.0)
    assert (v.status, v.reason, v.run_indices, v.refused_indices, v.forced_indices) == (
        VerdictStatus.PASS, "pass", (0,), (), ())
    assert v.message == "every check passed on GPU 0" and v.hint is None
    assert v.ok and not v.forced and [c.name for c in v.warnings] == ["kernel_sources"]
    assert [c.name for c in v.checks] == ["idle_gpu", "clocks", "git", "kernel_sources"]
    require_guard_pass(v)  # no exception


def test_a_busy_gpu_refuses_the_run_with_its_values_and_what_to_do() -> None:
    v = judge([reading(util=BUSY)], max_util_pct=5.0)
    assert (v.status, v.reason, v.run_indices, v.refused_indices) == (VerdictStatus.REFUSED, "gpu_failed", (), (0,))
    assert v.message.startswith("GPU 0 (NVIDIA H200) is busy: utilization max 90 % (mean 85.0 %")
    with pytest.raises(CheckFailed) as info:
        require_guard_pass(v)
    assert info.value.exit_code == EXIT_CHECK == 3
    assert str(info.value) == "guard refused: " + v.message
    assert info.value.hint.startswith("Wait for the other work to finish") and "--force" in info.value.hint


def test_two_failures_are_named_with_their_gpu() -> None:
    v = judge([reading(util=BUSY, index=0), reading(util=BUSY, index=1)], [_c(Status.FAIL, "git")], max_util_pct=5.0)
    assert v.message.endswith("(and 2 more failed check(s): idle_gpu on GPU 1, git)")
    assert v.reason == "gpu_failed" and v.refused_indices == (0, 1)


def test_one_busy_gpu_of_two_refuses_the_whole_run_without_force() -> None:
    v = judge([reading(index=0, util=IDLE), reading(index=1, util=BUSY)], max_util_pct=5.0)
    assert v.refused and v.reason == "gpu_failed" and v.refused_indices == (1,) and v.run_indices == ()
    assert v.gpus[1].reason == "idle_gpu" and v.gpus[0].status is GpuStatus.PASS and v.gpus[0].reason == "idle"
    assert v.message.startswith("GPU 1 (NVIDIA H200) is busy")


def test_another_process_on_a_gpu_fails_it_but_our_own_pid_does_not() -> None:
    busy = reading(index=1, procs=((4242, "python3", 900 * MIB),))
    assert judge([reading(), busy], max_util_pct=5.0, own_pid=1).refused_indices == (1,)
    assert judge([reading(), busy], max_util_pct=5.0, own_pid=4242).refused_indices == ()


def test_force_leaves_out_only_the_busy_gpu_and_records_it() -> None:
    v = judge([reading(index=0), reading(index=1, util=(50.0,)), reading(index=2)], max_util_pct=5.0, force=True)
    assert (v.status, v.reason) == (VerdictStatus.FORCED, "forced_dropped")
    assert v.run_indices == (0, 2) and v.refused_indices == (1,) and v.forced_indices == ()
    assert v.message.startswith("--force leaves out GPU 1 (GPU 1 (NVIDIA H200) is busy: utilization max 50 %")
    assert v.message.endswith("; the run goes on on GPU 0, 2")
    assert v.reading.index == 0  # the solo GPU's reading names the run's GPU in env.json
    data = v.to_json()
    assert data["refused"] == [1] and data["run"] == [0, 2] and data["gpus"][1]["status"] == "refused"


def test_force_with_every_gpu_busy_runs_them_all_as_forced() -> None:
    v = judge([reading(util=(60.0,))], max_util_pct=5.0, force=True)  # one GPU: plain --force
    assert (v.reason, v.run_indices, v.forced_indices, v.forced) == ("forced_all", (0,), (0,), True)
    assert v.message.startswith("--force overrides the failed guard of every GPU (0): GPU 0 (NVIDIA H200) is busy")
    assert "do not quote" in v.message and "env.json" in v.hint
    require_guard_pass(v)  # --force proceeds


def test_a_failed_host_check_refuses_every_gpu_or_is_forced() -> None:
    stale = GuardCheck("kernel_sources", Status.FAIL, "the kernels differ", hint="pip install -e .")
    fine = GuardCheck("git", Status.PASS, "clean")
    v = judge([reading(index=0), reading(index=1)], [stale, fine], max_util_pct=5.0)
    assert v.refused and v.reason == "host_failed" and v.message == "the kernels differ"
    with pytest.raises(CheckFailed) as err:
        require_guard_pass(v)
    assert err.value.hint.startswith("pip install -e .")
    forced = judge([reading()], [stale], max_util_pct=5.0, force=True)
    assert forced.host_forced and forced.reason == "host_forced" and forced.run_indices == (0,)
    assert forced.message.startswith("--force overrides kernel_sources (the kernels differ)")
    assert [g.status for g in forced.gpus] == [GpuStatus.PASS]


def test_force_with_nothing_to_override_records_no_override() -> None:
    v = judge([reading()], [_c(Status.PASS)], force=True)
    assert v.status is VerdictStatus.PASS and not v.forced and v.settings["force"] is True


def test_the_verdict_round_trips_through_json() -> None:
    v = judge([reading(index=0), reading(index=1, util=(50.0,), procs=((7, "x", None),))],
              [_c(Status.FAIL, "git"), GuardCheck("kernel_sources", Status.PASS, "ok", details={"sha256": {"a": "1"}})],
              max_util_pct=5.0, force=True, settings={"window_s": 1.0})
    doc = json.loads(json.dumps(v.to_json(), allow_nan=False))
    assert doc["version"] == 1 and doc["status"] == "forced" and doc["reason"] == "forced_dropped"
    assert GuardVerdict.from_json(doc) == v
    with pytest.raises(InputError, match="guard verdict: version 9"):
        GuardVerdict.from_json({**doc, "version": 9})


def test_run_guards_with_an_injected_busy_reading(tmp_path: Path) -> None:
    v = run_guards(None, max_util_pct=5.0, readings=[reading(util=(6.0,))])
    assert v.check("idle_gpu").status is Status.FAIL
    assert v.refused and not v.forced
    assert v.reading.uuid == "GPU-1234"
    names = [c.name for c in v.checks]
    assert names == ["idle_gpu", "clocks", "import_location", "kernel_sources", "git"]
    js = v.to_json()
    assert js["gpus"][0]["reading"]["util_pct"] == [6.0] and js["settings"]["max_util_pct"] == 5.0
    assert js["settings"]["gpus"] == [0]

    forced = run_guards(None, readings=[reading(util=(6.0,))], force=True)
    assert forced.forced and forced.to_json()["settings"]["force"] is True


def test_run_guards_reads_each_gpu_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from clusterbench.run import guards

    asked: list[tuple[int, float]] = []

    def read(device_index: int, window_s: float) -> NvmlReading:  # the NVML edge
        asked.append((device_index, window_s))
        return reading(index=device_index)

    monkeypatch.setattr(guards, "read_nvml", read)
    v = run_guards(None, [2, 0], window_s=0.25)
    assert asked == [(2, 0.25), (0, 0.25)] and [g.index for g in v.gpus] == [2, 0]


def test_run_guards_from_this_checkout_finds_its_kernels_fresh() -> None:
    # run from the checkout: the kernels the imported package compiles are the checkout's own
    v = run_guards(None, readings=[reading()], repo_root=Path(clusterbench.__file__).resolve().parents[1])
    check = v.check("kernel_sources")
    assert check.status is Status.PASS and "match the checkout" in check.message
    assert check.details["expected_sha256"] == check.details["sha256"]


def test_run_guards_records_the_kernel_hashes_it_would_compile() -> None:
    report = run_guards(None, readings=[reading()])
    pkg_kernels = Path(clusterbench.__file__).resolve().parent / "workloads" / "cupy" / "kernels"
    expected = {p.relative_to(pkg_kernels).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in pkg_kernels.rglob("*") if p.suffix in (".cu", ".cuh")}
    assert report.kernel_sources == expected


def test_run_guards_checks_the_configs_external_build(tmp_path: Path) -> None:
    art = _touch(tmp_path / "finder", 1_000)
    _touch(tmp_path / "k.cu", 2_000)
    cf = parse_configs('[[config]]\nlabel = "a"\ncluster = 3\ncap = 1\nstreams = 1\nbatch = 1\nframes = 1\n'
                       '[build]\nartifact = "finder"\nsources = ["k.cu"]\n', tmp_path / "c.toml")
    report = run_guards(cf, readings=[reading()])
    assert report.check("external_build").status is Status.FAIL
    assert report.check("external_build").details["artifact"] == str(art.resolve())
    assert report.reason == "host_failed"


def test_run_guards_rejects_bad_limits() -> None:
    with pytest.raises(InputError, match="--max-util must be between 0 and 100 %, got 150 %"):
        run_guards(None, max_util_pct=150, readings=[reading()])


# ----------------------------------------------------------------------------- NVML through a fake pynvml


class FakeNVMLError(Exception):
    pass


def fake_pynvml(util: tuple[int, ...] = (0,), count: int = 1, init_error: Exception | None = None,
                procs: tuple = (), reason_mask: int = 0x1, cuda: int = 13000) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.NVMLError = FakeNVMLError
    m.NVML_CLOCK_SM = 1
    m.calls = []
    it = iter(util)
    last = [util[-1]]

    def init() -> None:
        m.calls.append("init")
        if init_error is not None:
            raise init_error

    def utilization(h: Any) -> Any:
        last[0] = next(it, last[0])
        return types.SimpleNamespace(gpu=last[0], memory=0)

    m.nvmlInit = init
    m.nvmlShutdown = lambda: m.calls.append("shutdown")
    m.nvmlDeviceGetCount = lambda: count
    m.nvmlDeviceGetHandleByIndex = lambda i: ("h", i)
    m.nvmlDeviceGetName = lambda h: b"NVIDIA H200"  # old bindings return bytes
    m.nvmlDeviceGetUUID = lambda h: "GPU-abcd"
    m.nvmlSystemGetDriverVersion = lambda: "580.65.06"
    m.nvmlSystemGetCudaDriverVersion = lambda: cuda
    m.nvmlDeviceGetUtilizationRates = utilization
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=600 * MIB, total=143_771 * MIB, free=0)
    m.nvmlDeviceGetClockInfo = lambda h, t: 345
    m.nvmlDeviceGetMaxClockInfo = lambda h, t: 1980
    m.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: reason_mask
    m.nvmlDeviceGetComputeRunningProcesses = lambda h: [types.SimpleNamespace(pid=p, usedGpuMemory=u)
                                                        for p, u in procs]

    def pname(pid: int) -> str:
        if pid == 999:
            raise FakeNVMLError("Insufficient Permissions")
        return b"python3"

    m.nvmlSystemGetProcessName = pname
    return m


def test_read_nvml_converts_every_field(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_pynvml(util=(0, 3, 1), procs=((123, 2**64 - 1), (999, 5 * MIB)), reason_mask=0x1 | 0x40,
                       cuda=12040)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    r = read_nvml(0, window_s=0.05, interval_s=0.01)
    assert r.name == "NVIDIA H200" and r.uuid == "GPU-abcd" and r.driver_version == "580.65.06"
    assert r.cuda_driver_version == "12.4"
    assert r.util_pct[:3] == (0.0, 3.0, 1.0) and len(r.util_pct) >= 3
    assert set(r.util_pct[3:]) <= {1.0}
    assert (r.memory_used_bytes, r.memory_total_bytes) == (600 * MIB, 143_771 * MIB)
    assert (r.sm_clock_mhz, r.max_sm_clock_mhz) == (345, 1980)
    assert r.throttle_reasons == ("gpu_idle", "hw_thermal_slowdown")
    assert r.compute_processes[0] == (123, "python3", None)  # NVML_VALUE_NOT_AVAILABLE -> None
    assert r.compute_processes[1][0] == 999 and r.compute_processes[1][2] == 5 * MIB
    assert fake.calls[0] == "init" and fake.calls[-1] == "shutdown"


def test_read_nvml_prefers_clock_event_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_pynvml()
    fake.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0x4
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert read_nvml(window_s=0.01).throttle_reasons == ("sw_power_cap",)


def test_no_driver_is_one_clear_environment_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_error=FakeNVMLError("Driver Not Loaded")))
    with pytest.raises(EnvironmentFailure) as info:
        read_nvml(window_s=0.01)
    assert info.value.exit_code == EXIT_ENVIRONMENT == 1
    assert str(info.value).startswith("no NVIDIA GPU/driver found: NVML did not initialise (Driver Not Loaded)")
    assert "\n" not in str(info.value)


def test_zero_devices_and_a_bad_index(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(count=0))
    with pytest.raises(EnvironmentFailure, match="no NVIDIA GPU/driver found: NVML sees 0 devices"):
        read_nvml(window_s=0.01)
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(count=2))
    with pytest.raises(EnvironmentFailure, match="GPU index 5 does not exist: NVML sees 2 devices"):
        read_nvml(5, window_s=0.01)


def test_missing_bindings_without_nvidia_smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    with pytest.raises(EnvironmentFailure) as info:
        read_nvml(window_s=0.01)
    assert str(info.value) == ("the NVML Python bindings are missing (module pynvml, package nvidia-ml-py), and "
                               "nvidia-smi is not installed either")
    assert "pip install -e '.[gpu]'" in info.value.hint
    assert gpu_present() is False
    # probe's own check names the same cause and fix
    failure = no_gpu_failure("probe")
    assert str(failure) == str(info.value) and failure.hint == info.value.hint and failure.exit_code == 1


def test_missing_bindings_with_a_gpu_says_install_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-abcd)'\n")
    smi.chmod(0o755)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentFailure) as info:
        read_nvml(window_s=0.01)
    assert "NVML Python bindings are missing" in str(info.value) and "sees 1 GPU" in str(info.value)
    assert "nvidia-ml-py" in info.value.hint and "pip install -e '.[gpu]'" in info.value.hint
    assert gpu_present() is True


class _NvmlError(Exception):
    pass


@pytest.mark.parametrize("init_error, count, words", [
    ("Driver Not Loaded", None, "no NVIDIA driver: NVML did not initialise (Driver Not Loaded): probe needs"),
    (None, 0, "no NVIDIA GPU: the driver is loaded but NVML sees 0 devices: probe needs one"),
])
def test_no_gpu_names_the_driver_or_the_device(monkeypatch: pytest.MonkeyPatch, init_error, count, words) -> None:
    import types

    def init() -> None:
        if init_error:
            raise _NvmlError(init_error)

    fake = types.SimpleNamespace(nvmlInit=init, nvmlDeviceGetCount=lambda: count, nvmlShutdown=lambda: None)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    failure = no_gpu_failure("probe")
    assert str(failure).startswith(words) and failure.exit_code == 1
    assert ("driver" in failure.hint) if init_error else ("nvidia-smi -L" in failure.hint)


def test_gpu_present_through_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(count=2))
    assert gpu_present() is True
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(count=0))
    monkeypatch.setenv("PATH", "")
    assert gpu_present() is False


def test_window_must_be_positive() -> None:
    with pytest.raises(InputError, match="--sample-window must be in"):
        read_nvml(window_s=0)


def test_run_guards_without_a_gpu_raises_environment_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_error=FakeNVMLError("NVML Shared Library Not Found")))
    with pytest.raises(EnvironmentFailure, match="no NVIDIA GPU/driver found"):
        run_guards(None, window_s=0.01)


def test_copy_without_git_takes_the_rev_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a working tree copied without .git (the GPU machine) states its revision in CLUSTERBENCH_GIT_REV
    sha = "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setenv("CLUSTERBENCH_GIT_REV", sha)
    c = check_git(tmp_path)
    assert c.status is Status.PASS and (c.details["rev"], c.details["dirty"]) == (sha, False)
    assert "CLUSTERBENCH_GIT_REV" in c.message
    monkeypatch.setenv("CLUSTERBENCH_GIT_REV", sha[:12] + "-dirty")
    c = check_git(tmp_path)
    assert c.status is Status.WARN and (c.details["rev"], c.details["dirty"]) == (sha[:12], True)
    assert check_git(tmp_path, require_clean=True).status is Status.FAIL
    monkeypatch.setenv("CLUSTERBENCH_GIT_REV", "not a sha")
    c = check_git(tmp_path)
    assert c.status is Status.WARN and c.details["rev"] is None and "ignored" in c.message
