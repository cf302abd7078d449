"""clusterbench's native tools: the injection library and the latency program compile here with the CUDA
toolkit's nvcc (skipped without it), into the cache keyed by their source; the library exports
InitializeInjection and its spin kernel's PTX assembles; a missing toolkit is an Error with a Hint; the
frame mark follows analyze's frames definitions; a report file that is not one says so."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from clusterbench.errors import EnvironmentFailure, InputError
from clusterbench.run import inject
from conftest import DATA

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found")


@pytest.mark.parametrize("spec,mark", [("kernel:zoo_calib", "kernel:zoo_calib"), ("graph", inject.GRAPH_MARK),
                                       (" kernel:^find_ ", "kernel:^find_")])
def test_the_mark_of_a_frames_definition(spec, mark) -> None:
    assert inject.mark_of(spec) == (mark, None)


@pytest.mark.parametrize("spec", [None, "1000", "range:loop", "h2d-bytes:320000", "kernel:"])
def test_frames_that_no_call_marks(spec) -> None:
    mark, why = inject.mark_of(spec)
    assert mark is None and "--frames kernel:REGEX" in why


def test_the_environment_of_an_injected_run(tmp_path: Path) -> None:
    env = inject.inject_env(tmp_path / "lib.so", tmp_path / "r.json", "kernel:k", warmup=5, host_us=2.5, gpu_us=0.0,
                            link_bytes=4096)
    assert env[inject.INJECTION_ENV] == str(tmp_path / "lib.so")
    assert (env["CB_INJECT_OUT"], env["CB_INJECT_MARK"], env["CB_INJECT_WARMUP"]) == (str(tmp_path / "r.json"), "kernel:k", "5")
    assert (env["CB_INJECT_HOST_US"], env["CB_INJECT_GPU_US"], env["CB_INJECT_LINK_BYTES"]) == ("2.5", "0", "4096")
    plain = inject.inject_env(tmp_path / "lib.so", tmp_path / "r.json", "kernel:k")
    assert not {"CB_INJECT_HOST_US", "CB_INJECT_GPU_US", "CB_INJECT_LINK_BYTES"} & set(plain)


def test_no_nvcc_is_an_error_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentFailure) as err:
        inject.find_toolkit({"PATH": str(tmp_path), "CUDA_HOME": str(tmp_path / "none"),
                             "CLUSTERBENCH_NVCC": str(tmp_path / "no")}, default=tmp_path / "cuda")
    assert "no nvcc was found" in str(err.value) and "CLUSTERBENCH_NVCC" in err.value.hint


def test_no_cupti_is_an_error_with_a_hint(tmp_path: Path) -> None:
    fake = tmp_path / "cuda" / "bin"
    fake.mkdir(parents=True)
    nvcc = fake / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 99.0'\n")
    nvcc.chmod(0o755)
    with pytest.raises(EnvironmentFailure) as err:
        inject.find_toolkit({"PATH": str(fake), "CLUSTERBENCH_NVCC": str(nvcc), "CUDA_HOME": str(tmp_path / "cuda")},
                            default=tmp_path / "none")
    assert "cupti.h was not found" in str(err.value) and "CLUSTERBENCH_CUPTI_DIR" in err.value.hint


def test_the_build_commands() -> None:
    tk = inject.Toolkit(Path("/cuda/bin/nvcc"), "release 13.0", Path("/cupti/include"), Path("/cupti/lib64"))
    lib = inject.build_command(inject.INJECT_LIB, tk, Path("/out/lib.so"))
    assert lib[:2] == ["/cuda/bin/nvcc", "-O2"] and "-shared" in lib and "-lcupti" in lib and "-I/cupti/include" in lib
    assert "-rpath=/cupti/lib64" in lib and lib[lib.index("-o") + 1] == "/out/lib.so"
    assert not any(a.startswith("-lcuda") for a in lib)  # the driver API is reached through dlsym
    lat = inject.build_command(inject.LATENCY_BIN, tk, Path("/out/cb_latency"), "sm_80")
    assert "-arch=sm_80" in lat and str(inject.native_dir() / inject.LATENCY_SOURCE) in lat
    k1 = inject.build_key(inject.LATENCY_BIN, tk, "sm_80")
    assert k1 != inject.build_key(inject.LATENCY_BIN, tk, "sm_90")  # the target is in the key
    assert inject.build_key(inject.INJECT_LIB, tk, "sm_80") == inject.build_key(inject.INJECT_LIB, tk, "sm_90")


def test_a_report_that_is_not_one(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read the injection report"):
        inject.read_report(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(InputError, match="not JSON"):
        inject.read_report(bad)
    bad.write_text(json.dumps({"schema": "clusterbench.inject-report", "version": 7}))
    with pytest.raises(InputError, match="version 7"):
        inject.read_report(bad)
    assert inject.read_report(DATA / "untraced" / "inject_one_thread.json").pid == 4242


@needs_nvcc
def test_both_tools_build_here_and_are_cached(tmp_path: Path) -> None:
    env = {**os.environ, inject.CACHE_ENV: str(tmp_path), inject.ARCH_ENV: "sm_90"}
    lib = inject.build(inject.INJECT_LIB, environ=env)
    assert lib.is_file() and lib.parent.parent == tmp_path / "native"
    syms = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    assert re.search(r"\bT InitializeInjection\b", syms), syms[:500]
    mtime = lib.stat().st_mtime_ns
    assert inject.build(inject.INJECT_LIB, environ=env) == lib and lib.stat().st_mtime_ns == mtime  # from the cache
    lat = inject.build(inject.LATENCY_BIN, environ=env)
    assert lat.is_file() and os.access(lat, os.X_OK)
    usage = subprocess.run([str(lat), "--help"], capture_output=True, text=True, timeout=30)
    assert usage.returncode == 0 and "--seq OPS" in usage.stdout
    bad = subprocess.run([str(lat), "--out", str(tmp_path / "x.json"), "--seq", "h2d:0"], capture_output=True,
                         text=True, timeout=30)
    assert bad.returncode == 2 and "bad op: h2d:0" in bad.stderr  # checked before any CUDA call


@needs_nvcc
def test_the_spin_kernels_ptx_assembles(tmp_path: Path) -> None:
    src = (inject.native_dir() / inject.INJECT_SOURCE).read_text()
    block = re.search(r"const char kSpinPtx\[\] =\n(.*?);\n", src, re.S)
    assert block is not None
    ptx = "".join(json.loads(line.strip()) for line in block.group(1).splitlines())
    (tmp_path / "spin.ptx").write_text(ptx)
    ptxas = Path(NVCC).parent / "ptxas"  # type: ignore[arg-type]
    for arch in ("sm_75", "sm_90"):  # CUDA 13 assembles sm_75 and later
        res = subprocess.run([str(ptxas), f"-arch={arch}", str(tmp_path / "spin.ptx"), "-o", str(tmp_path / f"{arch}.cubin")],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr


@needs_nvcc
def test_the_daq_loop_compiles(tmp_path: Path) -> None:
    zoo = Path(__file__).resolve().parents[1] / "zoo"
    res = subprocess.run([NVCC, "-O2", "-arch=sm_90", "-std=c++17", f"-I{zoo}", str(zoo / "daq_loop.cu"), "-c",  # type: ignore[list-item]
                          "-o", str(tmp_path / "daq_loop.o")], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr


def _callback_cost():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "callback_cost.py"
    spec = importlib.util.spec_from_file_location("callback_cost", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_callback_costs_are_medians_against_bare() -> None:
    cc = _callback_cost()
    s = cc.summarize({"bare": [100.0, 104.0, 102.0], "empty": [150.0, 149.0, 160.0], "every": [180.0, 170.0, 175.0],
                      "none": [101.0], "both": []})
    # medians: bare 102, empty 150, every 175; costs against bare 48 and 73; ours 175 - 150
    assert s["bare"]["median_ns"] == 102.0 and s["bare"]["cost_ns"] is None
    assert s["empty"]["cost_ns"] == 48.0 and (s["empty"]["min_ns"], s["empty"]["max_ns"]) == (149.0, 160.0)
    assert s["every"]["cost_ns"] == 73.0 and s["ours_ns"] == 25.0
    assert s["none"]["cost_ns"] == -1.0 and s["both"] == {"n": 0, "median_ns": None, "min_ns": None, "max_ns": None,
                                                         "cost_ns": None}
    # 7 calls at 40 ns in a 14 µs frame: 280 ns of 14,000, 2 %
    assert cc.frame_share(40.0, 7, 14.0) == pytest.approx(0.02)
