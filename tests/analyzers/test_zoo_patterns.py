"""Each pattern of the zoo (tests/zoo/*.cu), as a synthetic trace: the reading analyze gives, and
that every "why" note holds for the trace it is printed on."""

from __future__ import annotations

from pathlib import Path

import zoo_fakes as Z
from clusterbench.analyzers import analyze_trace

from fake_nsys import build
from oracle import clip, gpu_intervals, idle_gaps, total, union


def codes(g) -> list[str]:
    return [f.code for f in g.findings]


def test_no_nvtx_reads_its_jit_and_allocation_as_set_up(tmp_path: Path) -> None:
    p = Z.no_nvtx()
    g = analyze_trace(build(tmp_path / "n.sqlite", p.trace), frames_spec="kernel:zoo_calib").primary
    lo, hi = g.window.start_ns, g.window.end_ns
    busy = clip(union(gpu_intervals(p.trace)), lo, hi)
    gaps = idle_gaps(busy, lo, hi)
    assert len(gaps) == 1 and gaps[0] == (int(g.gaps.starts_ns[0]), int(g.gaps.starts_ns[0] + g.gaps.lengths_ns[0]))
    assert g.frames.count == p.facts["frames"] and {k.name: k.launches for k in g.kernels} == {"zoo_calib_jit": 20, "zoo_calib_jit2": 20}
    assert "setup_gaps" in codes(g) and "gpu_starvation" not in codes(g) and "low_utilization" not in codes(g)
    # without the set-up gap: the window less the gap, idle the rest
    steady = (hi - lo) - (gaps[0][1] - gaps[0][0])
    assert g.throughput.steady_ns == steady and g.throughput.steady_idle_ns == (hi - lo) - total(busy) - (gaps[0][1] - gaps[0][0])
    assert g.pacing.stall_cause == "module_load"  # the longest stall is the mid-loop compile


def test_multi_kernel_on_four_streams(tmp_path: Path) -> None:
    p = Z.multi_kernel()
    g = analyze_trace(build(tmp_path / "m.sqlite", p.trace), frames_spec="kernel:zoo_calib", by_stream=True).primary
    assert {k.name for k in g.kernels} == {"zoo_calib", "zoo_reduce"}
    assert g.busy.engine_streams == {"kernel": 4, "h2d": 4, "d2h": 4, "memset": 4} and g.busy.n_streams == 4
    assert g.roofline.engine == "h2d"  # one H2D engine: back to back at 13 µs a frame
    assert "overlap" in codes(g) and "serialized_streams" not in codes(g) and len(g.gaps) == 0
    assert [t.thread.tid for t in g.host.threads] == [100]


def test_threads_one_thread_feeding_four_streams(tmp_path: Path) -> None:
    p = Z.threads(frames=400, n_threads=1, n_streams=4)
    g = analyze_trace(build(tmp_path / "t.sqlite", p.trace), frames_spec="kernel:zoo_calib").primary
    feeders = [t for t in g.host.threads if t.thread.tid == 101]
    assert len(feeders) == 1 and feeders[0].thread.name == "zoo-feed-0"
    assert g.busy.engine_streams["h2d"] == 4


def test_device_graph_at_node_level_says_the_work_is_missing(tmp_path: Path) -> None:
    p = Z.device_graph(node_level=True)
    r = analyze_trace(build(tmp_path / "n.sqlite", p.trace))
    g = r.primary
    assert codes(g) == ["work_not_traced"]
    w = g.work_not_traced
    # the host waited in cudaStreamSynchronize while the device relaunched the graph: the gap runs
    # from the last of the 3 kernel rows to the read-back, and it is at least 10 % of the window
    lo, hi = g.window.start_ns, g.window.end_ns
    longest = max(idle_gaps(clip(union(gpu_intervals(p.trace)), lo, hi), lo, hi), key=lambda x: x[1] - x[0])
    assert w.waited_ns == longest[1] - longest[0] and w.calls == ("cudaStreamSynchronize",)
    assert "node-level" in w.why and "--cuda-graph-trace=graph" in w.hint
    js = r.to_json()
    assert js["efficiency"] is None and js["roofline"]["fps"] is None
    assert js["work_not_traced"]["share"] == (longest[1] - longest[0]) / (hi - lo)


def test_device_graph_at_graph_level_is_busy(tmp_path: Path) -> None:
    p = Z.device_graph(node_level=False, events=2000)
    g = analyze_trace(build(tmp_path / "g.sqlite", p.trace), frames_spec="graph").primary
    assert g.roofline.engine == "graph" and g.frames.count == 2000 and g.work_not_traced is None
    lo, hi = g.window.start_ns, g.window.end_ns
    assert g.busy.idle_ns == (hi - lo) - total(clip(union(gpu_intervals(p.trace)), lo, hi))
    assert g.busy.idle_ns < 0.05 * (hi - lo)  # 100 ns between executions and the set-up: busy all along
    assert "graph_level" in codes(g) and "gpu_starvation" not in codes(g)
    assert "serialized_one_stream" not in codes(g)  # the set-up copies are too small for turns to matter


def test_host_bound_loop(tmp_path: Path) -> None:
    p = Z.host_bound()
    g = analyze_trace(build(tmp_path / "h.sqlite", p.trace), frames_spec="kernel:zoo_calib").primary
    assert g.roofline.engine == "host" and "host_binds" in codes(g)
    # host code between the calls: each frame spins 40 µs
    assert g.host.busiest.busy_ns - (g.host.busiest.launch_ns + g.host.busiest.copy_ns + g.host.busiest.other_ns) >= 64 * 40_000


def test_every_note_holds_on_every_pattern(tmp_path: Path) -> None:
    """The claims the notes make, checked against the figures of the trace they are printed on."""
    traces = {"no_nvtx": Z.no_nvtx(), "nvtx_domain": Z.nvtx_domain(), "capture": Z.nvtx_domain(capture=True),
              "multi_kernel": Z.multi_kernel(), "threads": Z.threads(frames=400), "threads1": Z.threads(frames=400, n_threads=1, n_streams=4),
              "graph_node": Z.device_graph(), "graph": Z.device_graph(node_level=False, events=2000), "host_bound": Z.host_bound()}  # fmt: skip
    for name, p in traces.items():
        g = analyze_trace(build(tmp_path / f"{name}.sqlite", p.trace), frames_spec="kernel:zoo" if p.trace.kernels else None).primary
        c = codes(g)
        gp, t = g.gaps, g.throughput
        if "setup_gaps" in c:
            assert gp.setup_ns >= 0.01 * g.window.length_ns, name
        if "gpu_starvation" in c:
            assert gp.loop_ns >= 0.05 * t.steady_ns, name
        if "low_utilization" in c:
            assert t.steady_idle_ns >= 0.10 * t.steady_ns, name
        if "host_binds" in c:
            assert g.roofline.engine == "host" and all(g.host.busiest.busy_ns > st.busy_ns for st in g.busy.engines.values()), name
        if "serialized_one_stream" in c or "serialized_streams" in c:
            assert g.roofline.engine not in ("host", None) and g.busy.serialization < 1.05, name
        if "work_not_traced" in c:
            assert c == ["work_not_traced"] or set(c) <= {"work_not_traced", "graph_level", "implausible_rate"}, name
        if g.work_not_traced is None:
            assert "work_not_traced" not in c, name
