"""CUDA graphs: graph-level traces (whole graph executions) and node-level ones (kernel rows).

Every expected value is worked out by hand in the comments, from the fixture's numbers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.analyzers import analyze_trace

from fake_nsys import Copy, Graph, Kernel, Memset, Range, Trace, build


def graph_level() -> Trace:
    # window [1000, 5000): 4,000 ns, frames=4
    return Trace(
        graphs=[
            Graph(500, 1800, stream=7),  # straddles the window start: [1000, 1800) inside, 800 ns
            Graph(2500, 3500, stream=7),  # 1000 ns
            Graph(4600, 5400, stream=7),  # straddles the window end: [4600, 5000), 400 ns
        ],
        copies=[
            Copy(1500, 2700, kind=1, bytes=2400, stream=8),  # overlaps G1 [1500,1800) and G2 [2500,2700)
            Copy(3000, 4000, kind=2, bytes=1000, stream=9),  # overlaps G2 [3000,3500)
        ],
        kernels=[Kernel(4000, 4200, stream=7)],  # a kernel launched outside any graph
        memsets=[Memset(100, 200, bytes=16)],  # before the window
        ranges=[Range(1000, 5000, "clusterbench:pass frames=4")],
    )


def test_graph_level_trace_is_its_own_engine(tmp_path: Path) -> None:
    r = analyze_trace(build(tmp_path / "graph.sqlite", graph_level()))
    g, h2d, d2h, k = (r.primary.busy.engines[n] for n in ("graph", "h2d", "d2h", "kernel"))
    assert r.primary.window.length_ns == 4000 and r.primary.frames.count == 4
    assert (g.busy_ns, g.count) == (800 + 1000 + 400, 3)
    assert g.bytes is None and g.gbps is None  # a graph execution carries no byte count
    assert (h2d.busy_ns, h2d.bytes, h2d.gbps) == (1200, 2400, pytest.approx(2.0))
    assert (d2h.busy_ns, k.busy_ns) == (1000, 200)
    assert "memset" not in r.primary.busy.engines  # only outside the window
    # any busy: [1000,4200) (the graphs, copies and kernel chain up) + [4600,5000) = 3200 + 400
    assert r.primary.busy.any_busy_ns == 3600 and r.primary.busy.idle_ns == 400
    # two engines at once: graph+h2d [1500,1800) and [2500,2700), graph+d2h [3000,3500)
    assert r.primary.busy.overlap_ns == 300 + 200 + 500
    assert r.primary.busy.serialization == pytest.approx((2200 + 1200 + 1000 + 200) / 3600)
    # the graph is the tallest bar: 2200 ns over 4 frames
    assert r.primary.roofline.engine == "graph"
    assert r.primary.roofline.us_per_frame == pytest.approx(2200 / 1000 / 4)
    assert r.primary.roofline.fps == pytest.approx(1e9 * 4 / 2200)
    assert h2d.headroom_factor == pytest.approx(2200 / 1200) and k.headroom_factor == pytest.approx(11.0)
    # stream 7 (graphs and the kernel), 8 (h2d), 9 (d2h)
    assert r.primary.busy.n_streams == 3 and g.streams == 1
    codes = [f.code for f in r.primary.findings]
    assert "graph_level" in codes and "overlap" in codes and "compute_binds" in codes
    assert not any(c.startswith("serialized") for c in codes)


def test_graph_warning_once_in_warnings_notes_and_json(tmp_path: Path) -> None:
    r = analyze_trace(build(tmp_path / "graph.sqlite", graph_level()))
    hits = [w for w in r.warnings if "cuda-graph-trace=node" in w]
    assert len(hits) == 1 and r.graph_warning == hits[0]
    w = hits[0]
    assert "copy and memset nodes" in w and "gaps between its nodes" in w
    assert "nsys profile --cuda-graph-trace=node" in w
    assert sum("--cuda-graph-trace=node" in n for n in r.primary.notes) == 1
    js = r.to_json()
    assert js["graph_trace"] == "graph" and "graph" in js["engines"]
    assert [x["code"] for x in js["rules"]].count("graph_level") == 1
    assert sum("cuda-graph-trace=node" in x for x in js["warnings"]) == 1


def test_node_level_trace_needs_nothing_new(tmp_path: Path) -> None:
    # the same work traced per node: the graphs' kernels are kernel rows with a graph node id
    t = Trace(
        kernels=[
            Kernel(500, 900, stream=7, graph_node=1),  # [1000,...): outside the window
            Kernel(1000, 1800, stream=7, graph_node=2),  # 800
            Kernel(2500, 3000, stream=7, graph_node=1),  # 500
            Kernel(3000, 3500, stream=7, graph_node=2),  # 500 (touches the previous one)
            Kernel(4600, 5400, stream=7, graph_node=1),  # 400 inside
        ],
        copies=[Copy(1500, 2700, kind=1, bytes=2400, stream=8)],
        graph_nodes=True,
        ranges=[Range(1000, 5000, "clusterbench:pass frames=4")],
    )
    r = analyze_trace(build(tmp_path / "node.sqlite", t))
    k = r.primary.busy.engines["kernel"]
    assert (k.busy_ns, k.count) == (800 + 500 + 500 + 400, 4)
    assert "graph" not in r.primary.busy.engines and r.primary.roofline.engine == "kernel"
    assert r.graph_warning is None and not any("cuda-graph-trace" in w for w in r.warnings)
    assert r.to_json()["graph_trace"] == "node"
    assert "graph_level" not in [f.code for f in r.primary.findings]
