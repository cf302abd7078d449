"""Every kernel file compiles for Hopper (sm_90) with the options the pipeline passes (needs nvcc;
skips without it). The exactness of the kernels is checked on the GPU (test_gpu.py)."""

import re
import shutil
import subprocess

import pytest

from clusterbench.workloads.cupy import build, pipeline

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found")


def _nvcc(tmp_path, src, options, rdc=False):
    out = tmp_path / "k.cubin"
    cmd = [NVCC, "-arch=sm_90", "-cubin", "-Xptxas", "-v", "-o", str(out), *options, str(src)]
    if rdc:
        cmd.insert(1, "-rdc=true")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


@pytest.mark.parametrize(("dtype", "k", "frame"), [("float32", 3, None), ("float64", 11, None),
                                                  ("float32", 9, (400, 400)), ("float64", 9, (400, 401))])
def test_cluster_finder_compiles(tmp_path, dtype, k, frame):
    log = _nvcc(tmp_path, build.kernel_dir() / build.KERNEL_FILE, pipeline.main_compile_options(dtype, k, frame=frame))
    for name in ("frozen_slide", "frozen_classify", "frozen_compact", "find_tracking"):
        assert f"Compiling entry function '{name}'" in log
    assert "too much shared data" not in log


@pytest.mark.parametrize(("dtype", "k", "rows", "min_blocks"), [("float32", 3, 20, 2), ("float64", 9, 20, 2),
                                                               ("float64", 11, 32, 2), ("float32", 9, 40, 1)])
def test_tracking_persistent_compiles(tmp_path, dtype, k, rows, min_blocks):
    log = _nvcc(tmp_path, build.kernel_dir() / pipeline.TRACK_KERNEL_FILE,
                pipeline.persistent_compile_options(dtype, k, rows, min_blocks), rdc=True)
    assert "Compiling entry function 'track_persistent'" in log
    assert "bytes spill stores" in log and "too much shared data" not in log
    # ptxas's static shared memory is the pipeline's own count (its check before compiling)
    smem = re.search(r"(\d+) bytes smem", log[log.index("Compiling entry function 'track_persistent'"):])
    assert smem and int(smem.group(1)) == pipeline.persistent_shared_bytes(dtype, k, rows)


def test_spin_delay_compiles_and_touches_no_memory(tmp_path):
    log = _nvcc(tmp_path, build.kernel_dir() / pipeline.SPIN_KERNEL_FILE, ())
    assert "Compiling entry function 'spin_delay'" in log
    # no global loads or stores: the finder's output cannot change
    ptx = tmp_path / "k.ptx"
    proc = subprocess.run([NVCC, "-arch=sm_90", "-ptx", "-o", str(ptx), str(build.kernel_dir() / pipeline.SPIN_KERNEL_FILE)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = ptx.read_text()
    assert "%globaltimer" in text and "st.global" not in text and "ld.global" not in text
