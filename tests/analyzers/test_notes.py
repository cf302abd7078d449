"""The "why" notes: which reading a trace gets. Windows and busy times are worked out by hand."""

from __future__ import annotations

from pathlib import Path

from clusterbench.analyzers import analyze_trace

from fake_nsys import Api, Copy, Kernel, Range, Trace, build


def _note(r, text: str) -> str:
    hits = [n for n in r.primary.notes if text in n]
    assert len(hits) == 1, r.primary.notes
    return hits[0]


def test_sync_that_drains_the_pipeline(tmp_path: Path) -> None:
    # window [0,1000): h2d [0,200), kernel [200,300), then the host syncs [100,600) and the GPU
    # sits idle [300,600) until the next h2d [600,800): idle 300+200 = 500 ns (50 %), sync 50 %.
    t = Trace(
        kernels=[Kernel(200, 300)],
        copies=[Copy(0, 200, kind=1, bytes=100), Copy(600, 800, kind=1, bytes=100)],
        api=[Api(100, 600, "cudaStreamSynchronize_v3020")],
        ranges=[Range(0, 1000, "clusterbench:pass frames=2")],
    )
    r = analyze_trace(build(tmp_path / "drain.sqlite", t))
    assert (r.primary.window.length_ns, r.primary.busy.idle_ns, r.primary.host.host_sync_ns) == (1000, 500, 500)
    n = _note(r, "the host waits in")
    assert "GPU is idle 50 %" in n and "drains the pipeline" in n


def test_sync_while_the_gpu_stays_busy_costs_nothing(tmp_path: Path) -> None:
    # an asynchronous pass with one synchronize at the end: the copies cover the whole window
    # [0,1000) back to back on two streams, the host waits [50,1000): sync 95 %, idle 0.
    t = Trace(
        kernels=[Kernel(400, 500, stream=8)],
        copies=[Copy(0, 500, kind=1, bytes=100, stream=7), Copy(500, 1000, kind=1, bytes=100, stream=8)],
        api=[Api(50, 1000, "cudaDeviceSynchronize_v3020")],
        ranges=[Range(0, 1000, "clusterbench:pass frames=2")],
    )
    r = analyze_trace(build(tmp_path / "ahead.sqlite", t))
    assert (r.primary.busy.idle_ns, r.primary.host.host_sync_ns) == (0, 950)
    n = _note(r, "the host waits in")
    assert "the GPU stays busy (idle 0.0 %" in n and "cost no throughput" in n
    assert not any("drains" in x for x in r.primary.notes)
