"""The deliberate delay (delay_us_per_frame): the same clusters bit for bit, and its time in every frame of a
one-stream pass and in the trace's kernel bar (needs CuPy and a GPU; the trace test needs nsys too)."""

from __future__ import annotations

import shutil
import statistics

import numpy as np
import pytest

from clusterbench.model.params import WorkloadParams
from clusterbench.workloads.synth import synthetic_frames

pytestmark = pytest.mark.gpu
FRAMES = 200


@pytest.fixture(scope="module")
def frames():
    return synthetic_frames(400, 400, 100, FRAMES, 130.0, seed=17)


def _pass(params: WorkloadParams, frames, repeats: int = 1, collect: bool = False):
    from clusterbench.workloads.cupy.pipeline import Pipeline

    with Pipeline(params, frames) as pipe:
        pipe.compute_pedestal()
        pipe.run_pass(params.frames)  # warm-up: compiles, first launches
        outs = []
        for _ in range(repeats):
            pipe.reset_pedestal()
            outs.append(pipe.run_pass(params.frames, collect=collect))
    return outs


@pytest.mark.parametrize("mode, kernel", [("frozen", None), ("tracking", "coop")])
def test_the_delay_leaves_every_cluster_bit_identical(frames, mode: str, kernel) -> None:
    base = WorkloadParams(cluster=3, cap=1700, streams=2, batch=25, frames=FRAMES, pool=FRAMES, pedestal_frames=100,
                          pedestal=mode, tracking_kernel=kernel)
    (plain,) = _pass(base, frames, collect=True)
    (slow,) = _pass(base.replace(delay_us_per_frame=5.0), frames, collect=True)
    assert plain.clusters_found == slow.clusters_found and plain.clusters_dropped == slow.clusters_dropped
    assert [c.records.tobytes() for c in plain.clusters] == [c.records.tobytes() for c in slow.clusters]


def test_the_delay_adds_its_time_to_every_frame_of_a_one_stream_pass(frames) -> None:
    base = WorkloadParams(cluster=3, cap=1700, streams=1, batch=25, frames=FRAMES, pool=FRAMES, pedestal_frames=100)
    delay_us = 50.0
    plain = statistics.median(o.wall_s for o in _pass(base, frames, repeats=5))
    slow = statistics.median(o.wall_s for o in _pass(base.replace(delay_us_per_frame=delay_us), frames, repeats=5))
    added = FRAMES * delay_us * 1e-6  # 200 frames x 50 µs = 10 ms of spins, one after another on one stream
    # The pass issues every batch and waits once, so the host's enqueueing (at most the plain pass's wall)
    # can hide up to that much of the spins, never more: the one stream runs all of them, so the slow pass
    # lasts at least `added` (10 % below for timer granularity). Launching a spin costs a few µs per batch
    # (8 batches): at most 1 ms above.
    assert 0.9 * added <= slow and slow - plain <= added + 1e-3, (plain, slow)
    assert plain < 0.5 * added, (plain, slow)  # else the host could hide most of the spins and this tests little


@pytest.mark.skipif(shutil.which("nsys") is None, reason="nsys not on PATH")
def test_the_delay_shows_in_the_traces_kernel_bar(tmp_path) -> None:
    """Probe 3x3, one stream, with no delay and with 2 µs per frame: the kernel bar grows by 2 µs per frame
    (a spin_delay kernel per batch), and sustained FPS falls as one stream's frame time grows by 2 µs."""
    from clusterbench.run.probe import ProbeRequest, plan_probe, require_no_failures, run_probe

    config = tmp_path / "delay.toml"
    config.write_text('[defaults]\npool = 200\n\n[[config]]\nlabel = "d"\ncluster = 3\ncap = 3000\nstreams = 1\n'
                      'batch = 200\nframes = 8000\n')
    req = ProbeRequest(config_path=config, results_root=tmp_path / "r", scan=("delay_us_per_frame=0,2",), repeat=3,
                       force=True)
    plan = plan_probe(req)
    outcome = run_probe(plan, req)
    require_no_failures(outcome)
    rows = {r.label: r for r in outcome.rows}
    plain, slow = rows["d.delay_us_per_frame0"], rows["d.delay_us_per_frame2"]
    assert slow.kernel_us - plain.kernel_us == pytest.approx(2.0, abs=0.2)
    frame_us = 1e6 / plain.sustained_fps
    assert 1e6 / slow.sustained_fps - frame_us == pytest.approx(2.0, abs=0.5)
    assert np.isfinite(plain.h2d_us) and slow.h2d_us == pytest.approx(plain.h2d_us, rel=0.1)
