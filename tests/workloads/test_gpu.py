"""GPU versus the NumPy reference, cluster for cluster and bit for bit (needs CuPy and a GPU)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from clusterbench.workloads.cupy import build
from clusterbench.model.params import WorkloadParams
from clusterbench.workloads.cupy.pipeline import FROZEN_KERNELS
from clusterbench.workloads.reference import find_clusters, pedestal_from_dark, scan_frame
from clusterbench.workloads.synth import FrameSet, synthetic_frames

pytestmark = pytest.mark.gpu
N_FRAMES = 200  # realistic 400x400 frames per comparison
KERNELS = FROZEN_KERNELS  # frozen mode runs with each kernel ("strip", "twophase", "slide")


@pytest.fixture(scope="module")
def realistic():
    return synthetic_frames(400, 400, 100, N_FRAMES, 130.0, seed=11)


@pytest.fixture(scope="module")
def coarse():
    """Small frames of coarse integer values: many ties, many total-rule clusters, negatives, caps."""
    rng = np.random.default_rng(5)
    dark = rng.integers(995, 1006, (50, 37, 53)).astype(np.uint16)
    pool = rng.integers(990, 1030, (40, 37, 53)).astype(np.uint16)
    pool[:, 10:13, 20:23] = 1025  # a flat bright plateau: every pixel of it ties for the max
    return FrameSet(dark=dark, pool=pool, source="coarse")


def gpu_run(params, frames, strip=None, kernel=None, tracking_kernel=None, track_tile_rows=None):
    from clusterbench.workloads.cupy.pipeline import Pipeline

    with Pipeline(params, frames, strip=strip, frozen_kernel=kernel, tracking_kernel=tracking_kernel,
                  track_tile_rows=track_tile_rows) as pipe:
        pipe.compute_pedestal()
        ped = pipe.pedestal_host()
        out = pipe.run_pass(params.frames, collect=True)
        end = pipe.pedestal_host()
    return ped, out, end


_REF_CACHE = {}


def reference(frames, params):
    """The reference clusters for these frames and params (cached: several tests share them)."""
    key = (id(frames), params.cluster, params.cap, params.pedestal_dtype, params.pedestal, params.frames, params.nsigma)
    if key not in _REF_CACHE:
        ref_ped = pedestal_from_dark(frames.dark, params.nsigma, params.pedestal_dtype)
        data = np.stack([frames.pool[g % len(frames.pool)] for g in range(params.frames)])
        ref, ref_end = find_clusters(data, ref_ped, params.cluster, params.cap, mode=params.pedestal)
        _REF_CACHE[key] = (ref_ped, ref, ref_end)
    return _REF_CACHE[key]


def assert_same(params, frames, strip=None, kernel=None, tracking_kernel=None, track_tile_rows=None):
    ped, out, end = gpu_run(params, frames, strip, kernel, tracking_kernel, track_tile_rows)
    ref_ped, ref, ref_end = reference(frames, params)
    assert np.array_equal(ped[0], ref_ped.sum) and np.array_equal(ped[1], ref_ped.sum2)
    assert np.array_equal(ped[2], ref_ped.mean), "pedestal mean differs"
    assert np.array_equal(ped[3], ref_ped.thr), "threshold differs"
    assert len(out.clusters) == len(ref) == params.frames
    for i, (g, r) in enumerate(zip(out.clusters, ref)):
        assert g.found == r.found, f"frame {i}: {g.found} clusters on the GPU, {r.found} in the reference"
        assert g.records.tobytes() == r.records.tobytes(), f"frame {i}: cluster records differ"
    assert out.clusters_found == sum(r.found for r in ref)
    assert out.clusters_dropped == sum(r.dropped for r in ref)
    if params.pedestal == "tracking":
        assert np.array_equal(end[0], ref_end.sum) and np.array_equal(end[1], ref_end.sum2)
        assert np.array_equal(end[2], ref_end.mean)
    return out


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k", [3, 5, 9])
def test_frozen_matches_reference_on_realistic_frames(realistic, k, dtype, kernel):
    p = WorkloadParams(cluster=k, cap=1700, pedestal_dtype=dtype, streams=2, batch=64, frames=N_FRAMES,
                       pool=N_FRAMES, pedestal_frames=100)
    out = assert_same(p, realistic, kernel=kernel)
    assert out.clusters_found > 50 * N_FRAMES  # realistic data: tens of clusters per frame


MODES_KERNELS = [("frozen", k) for k in KERNELS] + [("tracking", None)]


@pytest.mark.parametrize(("mode", "kernel"), MODES_KERNELS)
@pytest.mark.parametrize("k", [3, 9])
def test_zerocopy_matches_reference(realistic, k, mode, kernel):
    p = WorkloadParams(cluster=k, cap=1700, transfer="zerocopy", pedestal=mode, streams=2, batch=40,
                       frames=N_FRAMES, pool=N_FRAMES, pedestal_frames=100)
    assert_same(p, realistic, kernel=kernel)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("mode", "kernel"), MODES_KERNELS)
@pytest.mark.parametrize("k", [3, 5, 11])
def test_coarse_frames_ties_caps_and_strip_edges(coarse, k, mode, kernel, dtype):
    # pool reused cyclically (60 frames from a pool of 40), strips of 5 rows, a cap that bites;
    # two-phase: 37x53 is 2x2 classify tiles, the right and bottom ones partial
    p = WorkloadParams(rows=37, cols=53, cluster=k, cap=8, pedestal_dtype=dtype, pedestal=mode, streams=3,
                       batch=7, frames=60, pool=40, pedestal_frames=50, nsigma=1.0)
    out = assert_same(p, coarse, strip=5, kernel=kernel)
    assert out.clusters_dropped > 0


@pytest.fixture(scope="module")
def wide():
    """240x1024 coarse frames (4 data frames, 20 dark)."""
    rng = np.random.default_rng(8)
    dark = rng.integers(995, 1006, (20, 240, 1024)).astype(np.uint16)
    pool = rng.integers(990, 1030, (4, 240, 1024)).astype(np.uint16)
    return FrameSet(dark=dark, pool=pool, source="wide")


@pytest.mark.parametrize("kernel", KERNELS)
def test_wide_frames_cross_compact_chunks_and_list_windows(wide, kernel):
    """240x1024 frames: 7680 mask words per frame, more than one compact chunk; thousands of
    clusters per frame, so the stored ranks span several list windows, and a cap chosen from the
    reference so that it bites inside the second chunk of frame 0."""
    frames = wide
    rows, cols = frames.pool.shape[1:]
    ped = pedestal_from_dark(frames.dark, 1.0, "float32")
    emit0 = scan_frame(frames.pool[0], ped.mean, ped.thr, 3).emit
    wpr = -(-cols // build.CLASSIFY_TILE_COLS)
    chunk_rows = build.COMPACT_THREADS * build.COMPACT_WORDS_PER_THREAD // wpr  # rows in the first chunk
    assert chunk_rows < rows
    in_first_chunk = int(emit0[:chunk_rows].sum())
    assert in_first_chunk > 2 * build.COMPACT_LIST and int(emit0[chunk_rows:].sum()) > 600
    cap = in_first_chunk + 300  # frame 0 keeps 300 clusters of its second chunk and drops the rest
    p = WorkloadParams(rows=rows, cols=cols, cluster=3, cap=cap, streams=2, batch=2, frames=4, pool=4,
                       pedestal_frames=20, nsigma=1.0)
    out = assert_same(p, frames, kernel=kernel)
    assert out.clusters[0].dropped == int(emit0.sum()) - cap > 0
    assert int(out.clusters[0].records["y"].max()) >= chunk_rows


@pytest.mark.parametrize("kernel", KERNELS)
def test_one_stream_and_four_streams_agree(realistic, kernel):
    outs = []
    for streams in (1, 4):
        p = WorkloadParams(cluster=3, cap=1700, streams=streams, batch=25, frames=N_FRAMES, pool=N_FRAMES, pedestal_frames=100)
        outs.append(gpu_run(p, realistic, kernel=kernel)[1])
    assert outs[0].clusters_found == outs[1].clusters_found
    assert [c.records.tobytes() for c in outs[0].clusters] == [c.records.tobytes() for c in outs[1].clusters]


def test_run_config_ranges_and_result(realistic):
    from clusterbench.workloads.cupy.run import measure_sustained, run_config

    p = WorkloadParams(cluster=3, cap=1700, streams=2, batch=50, frames=N_FRAMES, pool=N_FRAMES, pedestal_frames=100)
    seen = []
    res = run_config(p, on_range=lambda kind, text: seen.append((kind, text)), frames=realistic)
    assert seen == [("push", "clusterbench:pedestal"), ("pop", "clusterbench:pedestal"),
                    ("push", f"clusterbench:pass frames={N_FRAMES}"), ("pop", f"clusterbench:pass frames={N_FRAMES}")]
    _, ref, _ = reference(realistic, p)
    assert res.clusters_found == sum(r.found for r in ref) and res.clusters_dropped == 0
    assert res.frames == N_FRAMES and res.mode == "pass" and res.fps[0] > 0
    assert "cluster_finder.cu" in res.kernel_sha256
    sus = measure_sustained(p, repeats=2, frames=realistic)
    assert len(sus.samples) == 2 and sus.min <= sus.median <= sus.max
    assert sus.input_gbps == pytest.approx(sus.median * 400 * 400 * 2 / 1e9)


def test_run_entry_point_writes_result_json(tmp_path):
    out = tmp_path / "r.json"
    params = {"rows": 64, "cols": 64, "pedestal_frames": 20, "frames": 100, "batch": 30, "streams": 2, "pool": 50}
    proc = subprocess.run([sys.executable, "-m", "clusterbench.workloads.cupy.run", "--params-json", json.dumps(params),
                           "--result-json", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    from clusterbench.model.workload import WorkloadResult

    doc = json.loads(out.read_text())
    res = WorkloadResult.from_json(doc)  # the workload protocol's result record, version 2
    assert res.frames == 100 and res.mode == "pass" and len(res.pass_s) == 1 and res.clusters_found > 0
    assert res.extra["params"]["rows"] == 64 and res.kernel_sha256
    proc = subprocess.run([sys.executable, "-m", "clusterbench.workloads.cupy.run", "--params-json", json.dumps(params),
                           "--mode", "sustained", "--repeat", "2", "--result", str(out)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    res = WorkloadResult.from_json(json.loads(out.read_text()))
    assert res.mode == "sustained" and len(res.pass_s) == 2


# -- tracking mode, every tracking kernel (issue 11) ------------------------------------------------------
TRACK_FRAMES = 300  # the issue asks for >= 300 realistic frames per comparison
TRACKING_KERNELS = ("graph", "coop", "flags")


@pytest.fixture(scope="module")
def realistic300():
    return synthetic_frames(400, 400, 100, TRACK_FRAMES, 130.0, seed=13)


@pytest.mark.parametrize("tkernel", TRACKING_KERNELS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k", [3, 5, 9, 11])
def test_tracking_kernels_match_reference_on_300_realistic_frames(realistic300, k, dtype, tkernel):
    # 3 streams, batches of 64: the mean crosses streams and batches (one partial batch of 44 frames);
    # assert_same also checks the final sum, sum2 and mean against the reference's
    p = WorkloadParams(cluster=k, cap=1700, pedestal_dtype=dtype, pedestal="tracking", streams=3, batch=64,
                       frames=TRACK_FRAMES, pool=TRACK_FRAMES, pedestal_frames=100)
    out = assert_same(p, realistic300, tracking_kernel=tkernel)
    assert out.clusters_found > 50 * TRACK_FRAMES


@pytest.mark.parametrize("rows", [16, 32, 40])
@pytest.mark.parametrize("tkernel", ["coop", "flags"])
def test_persistent_tracking_with_other_tile_heights_and_one_stream(realistic300, tkernel, rows):
    # the default is 20 rows of 10 warps; 16 rows are 8 warps (3 blocks per SM), 32 rows 16 warps, 40 rows
    # 20 warps (one block per SM)
    p = WorkloadParams(cluster=5, cap=1700, pedestal="tracking", streams=1, batch=100, frames=TRACK_FRAMES,
                       pool=TRACK_FRAMES, pedestal_frames=100)
    assert_same(p, realistic300, tracking_kernel=tkernel, track_tile_rows=rows)


@pytest.fixture(scope="module")
def coarse_tracking():
    """Coarse small frames for tracking: at nsigma 2, 86 % of pixels are pedestal-like (so the means
    move every frame; the `coarse` frames at nsigma 1 have none), next to plateaus of ties, hot pixels,
    total-rule clusters and caps that bite."""
    rng = np.random.default_rng(7)
    dark = rng.integers(995, 1006, (50, 37, 53)).astype(np.uint16)
    pool = rng.integers(996, 1006, (40, 37, 53)).astype(np.uint16)
    pool[:, 10:13, 20:23] = 1025
    pool[rng.random((40, 37, 53)) < 0.01] = 1040
    return FrameSet(dark=dark, pool=pool, source="coarse_tracking")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("tkernel", TRACKING_KERNELS)
@pytest.mark.parametrize("k", [3, 5, 11])
def test_tracking_coarse_ties_caps_edges_and_moving_means(coarse_tracking, k, tkernel, dtype):
    # 37x53 frames: 2 x 2 persistent tiles of 32 x 20, the right and bottom ones partial; ties,
    # total-rule clusters and pedestal-like pixels next to emitting ones; a cap that bites
    p = WorkloadParams(rows=37, cols=53, cluster=k, cap=8, pedestal_dtype=dtype, pedestal="tracking", streams=3,
                       batch=7, frames=60, pool=40, pedestal_frames=50, nsigma=2.0)
    out = assert_same(p, coarse_tracking, strip=5, tracking_kernel=tkernel)
    assert out.clusters_dropped > 0
    _, _, end = reference(coarse_tracking, p)
    ped0 = pedestal_from_dark(coarse_tracking.dark, p.nsigma, dtype)
    assert (end.mean != ped0.mean).mean() > 0.5  # the means did move


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("tkernel", ["coop", "flags"])
@pytest.mark.parametrize("k", [3, 5, 11])
def test_persistent_tracking_coarse_ties_caps_edges(coarse, k, tkernel, dtype):
    # the frozen tests' coarse frames (nsigma 1: many ties and total-rule clusters, no pedestal-like pixel)
    p = WorkloadParams(rows=37, cols=53, cluster=k, cap=8, pedestal_dtype=dtype, pedestal="tracking", streams=3,
                       batch=7, frames=60, pool=40, pedestal_frames=50, nsigma=1.0)
    out = assert_same(p, coarse, tracking_kernel=tkernel)
    assert out.clusters_dropped > 0


@pytest.mark.parametrize("tkernel", ["coop", "flags"])
def test_persistent_tracking_zerocopy_and_repeated_passes(realistic300, tkernel):
    """zerocopy slots, and a second pass after reset_pedestal() gives the same clusters (flags keep growing)."""
    from clusterbench.workloads.cupy.pipeline import Pipeline

    p = WorkloadParams(cluster=3, cap=1700, pedestal="tracking", transfer="zerocopy", streams=2, batch=50,
                       frames=TRACK_FRAMES, pool=TRACK_FRAMES, pedestal_frames=100)
    _, ref, _ = reference(realistic300, p)
    with Pipeline(p, realistic300, tracking_kernel=tkernel) as pipe:
        pipe.compute_pedestal()
        for _ in range(2):
            out = pipe.run_pass(TRACK_FRAMES, collect=True)
            assert [c.records.tobytes() for c in out.clusters] == [r.records.tobytes() for r in ref]
            assert [c.found for c in out.clusters] == [r.found for r in ref]
            pipe.reset_pedestal()
        assert pipe.time_kernel(100, repeats=2) > 0
