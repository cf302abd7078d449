"""aare's ClusterFinderCUDA against clusterbench's NumPy reference, on the same frames (GPU).

Skips cleanly without CuPy and a GPU (conftest), or when aare is not importable (``make aare-cuda``
builds it into build/aare-cuda; $CLUSTERBENCH_AARE_PYTHON names another build).

The frames: clusterbench's synthetic generator, 1000 dark frames (aare's pedestal keeps exactly
1000 samples) and 300 data frames, 400x400, 5 sigma. aare runs with one stream, so that one
device pedestal copy sees every frame in order, and without any warm-up, so that its pedestal
starts from the dark frames alone. Its pedestal always tracks, in float32 on the device, after
each whole frame; the reference's tracking mode does the same rule in float64 sums with a
float32 mean and threshold. Neither side is tuned.

Stated tolerances: positions, (frame, x, y), agree for at least 99 % of the clusters of each
side; the values of matched clusters agree within 0.5 ADU (a photon is about 250 ADU, pixel
noise 8 to 20 ADU), for at least 99 % of matched clusters. The full comparison (counts, which
centres only one side found, the largest and 99th-percentile value differences, and the same
against the reference's frozen mode) is printed and, with $CLUSTERBENCH_CHECK_OUT set, written
there as aare_cluster_check_<k>x<k>.json.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

from clusterbench.workload.params import WorkloadParams
from clusterbench.workload.reference import find_clusters, pedestal_from_dark
from clusterbench.workload.synth import build_frames
from clusterbench.workloads.clusters import match_clusters

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parent.parent
DATA_FRAMES = 300
TOLERANCE_ADU = 0.5
POSITION_AGREEMENT = 0.99


def _aare():
    spec = importlib.util.spec_from_file_location("aare_cuda_probe", ROOT / "probes" / "aare_cuda.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    try:
        return probe.import_aare()
    except ImportError as exc:
        pytest.skip(f"aare not importable: {exc} (make aare-cuda)")


@pytest.mark.parametrize("k, cap", [(3, 3000), (9, 1700)])
def test_aare_cuda_clusters_match_the_reference(k: int, cap: int) -> None:
    aare = _aare()
    p = WorkloadParams(cluster=k, cap=cap, streams=1, batch=DATA_FRAMES, frames=DATA_FRAMES, pool=DATA_FRAMES,
                       pedestal="tracking", pedestal_frames=1000)
    fs = build_frames(p)
    cf = aare.ClusterFinderCUDA((p.rows, p.cols), cluster_size=(k, k), n_sigma=p.nsigma, dtype=np.float32,
                                max_clusters_per_frame=cap, n_streams=1)
    for frame in fs.dark:
        cf.push_pedestal_frame(np.ascontiguousarray(frame))
    theirs = [np.asarray(cv) for cv in cf.find_clusters_batched(np.ascontiguousarray(fs.pool), first_frame=0)]
    ped = pedestal_from_dark(fs.dark, p.nsigma, "float32")
    tracking, _ = find_clusters(fs.pool, ped, k, cap, mode="tracking")
    frozen, _ = find_clusters(fs.pool, ped, k, cap, mode="frozen")
    m = match_clusters([c.records for c in tracking], theirs, TOLERANCE_ADU)
    m_frozen = match_clusters([c.records for c in frozen], theirs, TOLERANCE_ADU)
    host_mean = np.asarray(cf.pedestal)
    report = {
        "cluster": k, "cap": cap, "frames": DATA_FRAMES, "data": fs.source,
        "a": "clusterbench NumPy reference, tracking mode, float32", "b": type(cf).__name__ + ", n_streams 1",
        "vs_reference_tracking": m.to_json(), "vs_reference_frozen": m_frozen.to_json(),
        "aare_frames_at_cap": int(sum(len(t) >= cap for t in theirs)),
        "host_pedestal_max_abs_diff_adu": float(np.abs(host_mean - ped.sum / ped.n).max()),
    }
    text = json.dumps(report, indent=2)
    print(f"\naare cluster check {k}x{k}:\n{text}")
    out = os.environ.get("CLUSTERBENCH_CHECK_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"aare_cluster_check_{k}x{k}.json").write_text(text + "\n")
    assert m.a_clusters > 50 * DATA_FRAMES  # the frames hold photons (about 95 clusters per frame at 3x3)
    assert m.a_found_in_b >= POSITION_AGREEMENT and m.b_found_in_a >= POSITION_AGREEMENT, text
    assert m.values_over_tolerance <= (1 - POSITION_AGREEMENT) * m.matched, text
