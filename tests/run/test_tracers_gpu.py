"""The real tracers on the GPU: the copies in the pass window are exactly the frames in and the slots out.

Skipped without CuPy and a GPU (conftest), and per tracer without cupti-python or nsys.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from clusterbench.model.params import WorkloadParams

pytestmark = pytest.mark.gpu

PARAMS = WorkloadParams(rows=400, cols=400, pedestal_frames=50, cluster=3, cap=500, streams=2, batch=100,
                        frames=400)


def check_bytes(sqlite: Path) -> None:
    from clusterbench.analyzers import analyze_trace

    a = analyze_trace(sqlite, range_name="clusterbench:pass").primary
    e = a.busy.engines
    assert a.frames.count == 400  # from the range text "clusterbench:pass frames=400"
    # by hand: every frame goes in once (400*400 uint16) and its whole D2H slot comes out (4 + 500*40 B),
    # one copy per batch of 100; at the end of the pass the two uint64 cluster totals (found, dropped)
    # come back once: 16 B in a fifth D2H copy.
    assert e["h2d"].bytes == 400 * 400 * 400 * 2
    assert e["d2h"].bytes == 400 * (4 + 500 * (4 + 4 * 9)) + 2 * 8
    assert e["d2h"].count == 400 // 100 + 1
    assert e["kernel"].busy_ns > 0 and a.roofline.engine in ("kernel", "h2d", "d2h")


def _job(tmp_path: Path, label: str):
    from clusterbench.run.tracers import WorkloadJob
    from clusterbench.workloads.protocol import CupyWorkload

    return WorkloadJob(label, PARAMS, CupyWorkload(), tmp_path)


def test_cupti_tracer_writes_an_analyzable_trace(tmp_path: Path) -> None:
    if importlib.util.find_spec("cupti") is None:
        pytest.skip("cupti-python not installed")
    from clusterbench.run.tracers import CuptiTracer, TracerSetup

    run = CuptiTracer(TracerSetup()).trace(_job(tmp_path, "cupti_smoke"), lambda phase: None)
    assert run.result.frames == 400 and run.result.mode == "pass"
    check_bytes(run.sqlite)


def test_nsys_tracer_writes_an_analyzable_trace(tmp_path: Path) -> None:
    import subprocess

    from clusterbench.io.nsys import find_nsys
    from clusterbench.run.tracers import NsysTracer, TracerSetup

    nsys = find_nsys()
    if nsys is None:
        pytest.skip("nsys not found")
    version = subprocess.run([str(nsys), "--version"], capture_output=True, text=True).stdout
    run = NsysTracer(TracerSetup(nsys, version)).trace(_job(tmp_path, "nsys_smoke"), lambda phase: None)
    assert run.report.is_file() and run.result.frames == 400
    check_bytes(run.sqlite)


def test_cupy_sustained_mode_speaks_the_protocol(tmp_path: Path) -> None:
    # the one sustained-FPS runner, on the first GPU NVML lists, with our finder's sustained mode:
    # one process runs both timed passes and writes one result record of mode "sustained"
    from clusterbench.run.machine import find_pin_tools, read_gpu_topology
    from clusterbench.run.sustained import measure_sustained, workload_command
    from clusterbench.workloads.protocol import CupyWorkload

    gpu = read_gpu_topology()[0]
    run = measure_sustained((gpu,), find_pin_tools(), workload_command(CupyWorkload(), "sustained_smoke", PARAMS, 2),
                            tmp_path, "sustained_smoke", input_bytes_per_frame=PARAMS.frame_bytes)
    solo = run.figures.solo
    assert solo.repeats == 2 and solo.median > 0
    assert run.last_result.mode == "sustained" and run.last_result.frames == PARAMS.frames
    assert len(run.last_result.pass_s) == 2


def test_our_finders_processes_set_up_at_once_and_run_one_after_another(tmp_path: Path) -> None:
    # three fresh processes of our finder's sustained mode on one GPU: each waits at its gate once set up (its
    # .ready file), the first runs once all are ready, each later one once the one before ended; every process
    # keeps its runs, verdict and SM clock; the gates are gone afterwards
    from clusterbench.model.processes import processes_of
    from clusterbench.run.machine import find_pin_tools, read_gpu_topology
    from clusterbench.run.sustained import measure_sustained, workload_command
    from clusterbench.workloads.protocol import CupyWorkload

    gpu = read_gpu_topology()[0]
    run = measure_sustained((gpu,), find_pin_tools(), workload_command(CupyWorkload(), "procs", PARAMS, 3),
                            tmp_path, "procs", input_bytes_per_frame=PARAMS.frame_bytes, processes=3)
    solo = run.figures.solo
    procs = processes_of(solo)
    assert procs is not None and len(procs) == 3 and solo.samples == tuple(p.median for p in procs)
    assert all(p.steady is not None and len(p.values) == 3 for p in procs)
    assert all(p.clock is not None and p.clock.samples >= 1 for p in procs)
    for k in (1, 2):
        assert (tmp_path / f"procs.sustained.p{k}.gpu{gpu.index}.json").is_file()
    assert not list(tmp_path.glob("*.go")) and not list(tmp_path.glob("*.ready"))
