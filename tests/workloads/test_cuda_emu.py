"""The new kernels (frozen_slide, track_persistent, frozen_compact) run on the CPU, byte for byte
against the NumPy reference (needs g++ with C++20; skips without it).

tests/workload/cuda_emu/ emulates the few CUDA features the kernels use: a std::thread per CUDA
thread, barriers for __syncthreads and for warp shuffles and ballots, one forked process per block
for the persistent kernel (so that each block has its own shared memory while all of them run at
once), a process-shared barrier for grid.sync(), global memory in one shared mapping. It checks the
kernels' logic (geometry, halos, edges, ties, caps, the order of updates, the mean ping-pong and the
flags across batches), not the GPU's memory model or speed: the GPU tests (test_gpu.py) do that.
Small frames only: every pixel is a thread.
"""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from clusterbench.workloads.cupy import build, pipeline
from clusterbench.model.layout import read_slots
from clusterbench.workloads.reference import find_clusters, pedestal_from_dark
from clusterbench.workloads.synth import synthetic_frames

CXX = shutil.which("g++")
EMU = Path(__file__).resolve().parent / "cuda_emu"
pytestmark = pytest.mark.skipif(CXX is None or not hasattr(os, "fork"), reason="needs g++ and fork()")


def _defines(options):
    return [o for o in options if o.startswith("-D")]


def _build(tmp: Path, dtype: str, k: int, track_rows: int, extra: tuple[str, ...] = (),
           frame: tuple[int, int] | None = None) -> Path:
    # the sources as the pipeline compiles them (build.kernel_source: the shared header spliced in)
    cf = build.kernel_source(build.KERNEL_FILE).replace(
        "extern __shared__ __align__(16) u8 smem[];", "alignas(16) static u8 smem[16];")  # strip kernels: not run
    (tmp / "cf.cu").write_text(cf)
    (tmp / "tp.cu").write_text(build.kernel_source(pipeline.TRACK_KERNEL_FILE))
    (tmp / "kernels.inc").write_text(
        '#include <cooperative_groups.h>\nnamespace cfk {\n#include "cf.cu"\n}\nnamespace tpk {\n#include "tp.cu"\n}\n'
        "using namespace cfk;\nusing tpk::track_persistent;\nstatic constexpr int PTH = tpk::PTH, PBY = tpk::PBY;\n")
    exe = tmp / "harness"
    defs = sorted(set(_defines(pipeline.main_compile_options(dtype, k, frame=frame))
                      + _defines(pipeline.persistent_compile_options(dtype, k, track_rows)))) + list(extra)
    cmd = [CXX, "-std=c++20", "-O1", "-ffp-contract=off", "-pthread", "-w", f"-I{EMU / 'inc'}", f"-I{EMU}", f"-I{tmp}", *defs,
           "-o", str(exe), str(EMU / "harness.cpp")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return exe


def _coarse_tracking():
    rng = np.random.default_rng(7)  # as test_gpu.py's coarse_tracking: 86 % pedestal-like at nsigma 2
    dark = rng.integers(995, 1006, (50, 37, 53)).astype(np.uint16)
    pool = rng.integers(996, 1006, (40, 37, 53)).astype(np.uint16)
    pool[:, 10:13, 20:23] = 1025
    pool[rng.random((40, 37, 53)) < 0.01] = 1040
    return dark, pool, 2.0, 8


def _coarse_wide(cols=128):
    # 40 rows: frozen_slide's second row of tiles (rows 16..31) lies with its halo inside the image, and
    # from 116 columns (9x9) or 122 (3x3) so does its second column of tiles: the path with no bounds tests
    rng = np.random.default_rng(9)
    dark = rng.integers(995, 1006, (50, 40, cols)).astype(np.uint16)
    pool = rng.integers(996, 1006, (20, 40, cols)).astype(np.uint16)
    pool[:, 20:23, 70:73] = 1025  # a plateau of ties inside an interior tile
    pool[rng.random((20, 40, cols)) < 0.01] = 1040
    return dark, pool, 2.0, 12


def _coarse():
    rng = np.random.default_rng(5)  # as test_gpu.py's coarse: ties, total-rule clusters, caps
    dark = rng.integers(995, 1006, (50, 37, 53)).astype(np.uint16)
    pool = rng.integers(990, 1030, (40, 37, 53)).astype(np.uint16)
    pool[:, 10:13, 20:23] = 1025
    return dark, pool, 1.0, 8


def _photons():
    fs = synthetic_frames(40, 72, 100, 24, 2.4, seed=3)  # about 7 photons per 40x72 frame
    return fs.dark, fs.pool, 5.0, 50


def _run(tmp_path, kernel, dtype, k, data, n_frames, batch, track_rows=pipeline.TRACK_TILE_ROWS, fpb=3, extra=(),
         frame_known=True):
    dark, pool, nsigma, cap = data
    frames = np.stack([pool[g % len(pool)] for g in range(n_frames)])
    t = np.float32 if dtype == "float32" else np.float64
    ped = pedestal_from_dark(dark, nsigma, dtype)
    d = tmp_path / "io"
    d.mkdir()
    frames.tofile(d / "frames.bin")
    ped.mean.astype(t).tofile(d / "mean.bin")
    ped.thr.astype(t).tofile(d / "thr.bin")
    ped.sum.tofile(d / "sum.bin")
    ped.sum2.tofile(d / "sum2.bin")
    rows, cols = frames.shape[1:]
    exe = _build(tmp_path, dtype, k, track_rows, extra, (rows, cols) if frame_known else None)
    args = [str(exe), str(d), kernel, str(rows), str(cols), str(n_frames), str(batch), str(cap),
            repr(1.0 / len(dark)), str(fpb)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ref, end = find_clusters(frames, ped, k, cap, mode="frozen" if kernel == "slide" else "tracking")
    got = read_slots(np.fromfile(d / "slots.bin", np.uint8), n_frames, k, cap, dtype)
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.found == r.found, f"frame {i}: {g.found} found, reference {r.found}"
        assert g.records.tobytes() == r.records.tobytes(), f"frame {i}: records differ"
    totals = np.fromfile(d / "totals.bin", np.uint64)
    assert int(totals[0]) == sum(r.found for r in ref) and int(totals[1]) == sum(r.dropped for r in ref)
    if kernel != "slide":
        shape = (rows, cols)
        assert np.array_equal(np.fromfile(d / "sum_out.bin", np.float64).reshape(shape), end.sum)
        assert np.array_equal(np.fromfile(d / "sum2_out.bin", np.float64).reshape(shape), end.sum2)
        assert np.array_equal(np.fromfile(d / "mean_out.bin", t).reshape(shape), end.mean)
    return ref


@pytest.mark.parametrize(("dtype", "k", "frame_known"), [("float32", 3, True), ("float64", 11, True),
                                                       ("float32", 3, False)])
def test_frozen_slide_on_coarse_frames(tmp_path, dtype, k, frame_known):
    # 37 x 53: an odd width, so each lane loads its two columns one by one; frame_known=False: the
    # frame's shape from the kernel arguments, not from the compile options
    ref = _run(tmp_path, "slide", dtype, k, _coarse(), 8, 5, frame_known=frame_known)
    assert sum(r.dropped for r in ref) > 0


@pytest.mark.parametrize(("dtype", "k", "cols"), [("float32", 3, 128), ("float64", 9, 128), ("float32", 5, 125)])
def test_frozen_slide_interior_tiles(tmp_path, dtype, k, cols):
    ref = _run(tmp_path, "slide", dtype, k, _coarse_wide(cols), 8, 4)
    assert sum(r.dropped for r in ref) > 0


def test_frozen_slide_on_photons_9x9(tmp_path):
    _run(tmp_path, "slide", "float32", 9, _photons(), 6, 4)


@pytest.mark.parametrize(("kernel", "dtype", "k"), [("flags", "float32", 3), ("coop", "float64", 5),
                                                     ("flags", "float64", 11)])
def test_track_persistent_with_moving_means(tmp_path, kernel, dtype, k):
    ref = _run(tmp_path, kernel, dtype, k, _coarse_tracking(), 21, 7)
    assert sum(r.dropped for r in ref) > 0


def test_track_persistent_32_row_tiles_on_photons(tmp_path):
    _run(tmp_path, "coop", "float32", 9, _photons(), 12, 5, track_rows=32)


# The window total by the separable filter (CB_PSEP, the default from 5x5 up): the separable sum decides
# only where it lies farther from k*thr than the rounding bound, the exact row-major sum elsewhere. Both
# paths, each alone, must give the reference's clusters and state: the filter on at 3x3 (default off),
# off at 11x11 (default on), and a margin so large that every pixel takes the exact path.
@pytest.mark.parametrize(("kernel", "dtype", "k", "extra"), [
    ("coop", "float32", 3, ("-DCB_PSEP=1",)),
    ("flags", "float64", 11, ("-DCB_PSEP=0",)),
    ("coop", "float32", 9, ("-DCB_PSEP=1", "-DCB_PSEP_SLACK=1000000000")),
])
def test_track_persistent_total_paths(tmp_path, kernel, dtype, k, extra):
    _run(tmp_path, kernel, dtype, k, _coarse_tracking(), 14, 7, extra=extra)


def test_track_persistent_16_row_tiles_of_8_warps(tmp_path):
    # the default is 20 rows of 10 warps (37 rows are 20 + 17); 16-row tiles of 8 warps make 37 = 16 + 16 + 5
    assert pipeline.TRACK_TILE_ROWS == 20
    _run(tmp_path, "flags", "float32", 5, _coarse_tracking(), 14, 7, track_rows=16)
