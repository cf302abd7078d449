"""The NumPy model of aare's ClusterFinderCUDA against aare's own outputs on the GPU (CPU; no aare needed).

On 2026-12-01 the aare cluster check (tests/workloads/test_aare_cuda_gpu.py) ran aare's ClusterFinderCUDA on an
H200, one stream, on clusterbench's synthetic frames (seed 0, 130 photons per frame, 1000 dark and 300 data
frames, 400x400, 5 sigma), and compared its clusters with clusterbench's reference, in tracking and in frozen
mode. The comparisons it wrote are committed (docs/measurements/2026-12-01_aare-cuda-side-by-side/
aare_cluster_check_<k>x<k>.json): among them the first ten (frame, x, y) centres, in (frame, y, x) order, that
only the reference found and the first ten that only aare found.

Here the model stands in for aare on the same frames, and the reference is compared with it exactly as it was
with aare: every one of those committed centres must come out the same. The first ten of each kind lie in
frames 0 to 32 (both cluster sizes, both modes), and a frame's clusters depend only on the frames before it,
so the first 33 data frames decide them: the check runs on those, in seconds, instead of on all 300.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clusterbench.model.params import WorkloadParams
from clusterbench.workloads.aare import model as aare_model
from clusterbench.workloads.clusters import match_clusters
from clusterbench.workloads.reference import find_clusters, pedestal_from_dark
from clusterbench.workloads.synth import synthetic_frames

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ROOT / "docs" / "measurements" / "2026-12-01_aare-cuda-side-by-side"
FRAMES = 33  # frames 0..32 hold every committed example (checked below)
TOLERANCE_ADU = 0.5  # the committed comparisons' value tolerance (no effect on which centres match)


@pytest.fixture(scope="module")
def frames():  # noqa: ANN201
    p = WorkloadParams()  # 400x400, seed 0, 130 photons per frame, 1000 dark frames: the check's frames
    return synthetic_frames(p.rows, p.cols, p.pedestal_frames, FRAMES, p.occupancy, p.seed)


@pytest.mark.parametrize(("k", "cap"), [(3, 3000), (9, 1700)])
def test_the_model_gives_the_centres_aare_gave_on_the_gpu(frames, k: int, cap: int) -> None:  # noqa: ANN001
    doc = json.loads((CHECKS / f"aare_cluster_check_{k}x{k}.json").read_text())
    assert (doc["cluster"], doc["cap"], doc["frames"]) == (k, cap, 300)
    assert doc["data"] == "synthetic(seed=0, occupancy=130 photons/frame)" and doc["aare_frames_at_cap"] == 0
    model_frames, _ = aare_model.find_clusters(frames.pool, aare_model.device_pedestal(frames.dark), 5.0, k, cap)
    aare = [f.clusters.records for f in model_frames]
    ped = pedestal_from_dark(frames.dark, 5.0, "float32")
    for mode in ("tracking", "frozen"):
        committed = doc[f"vs_reference_{mode}"]
        examples = committed["only_a_examples"] + committed["only_b_examples"]
        assert max(f for f, _x, _y in examples) < FRAMES  # the premise: the first frames decide them
        ours, _ = find_clusters(frames.pool, ped, k, cap, mode=mode)
        m = match_clusters([c.records for c in ours], aare, TOLERANCE_ADU)
        assert [list(c) for c in m.only_a] == committed["only_a_examples"], (k, mode)
        assert [list(c) for c in m.only_b] == committed["only_b_examples"], (k, mode)
    assert all(np.asarray(r).size <= cap for r in aare)
