"""The real H200 exports: every figure against an independent computation in this file.

The reference reads the rows with plain sqlite3 and computes unions with a sorted sweep in
Python (tests/oracle.py), sharing no code with clusterbench.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from clusterbench.analyzers import analyze_trace
from oracle import clip, minus, total
from oracle import union as sweep_union

H200 = sorted((Path(__file__).resolve().parents[1] / "data" / "h200").glob("*.sqlite"))
DEV_5X5 = H200[0].with_name("dev_5x5_s2_b500.sqlite")
KIND = {1: "h2d", 2: "d2h"}


@pytest.fixture(params=H200, ids=[p.name for p in H200])
def real(request: pytest.FixtureRequest) -> Path:
    return request.param


def test_real_export_matches_independent_sweep(real: Path) -> None:
    con = sqlite3.connect(f"file:{real}?mode=ro", uri=True)
    (lo, hi, text), = con.execute("SELECT start, end, text FROM NVTX_EVENTS WHERE text LIKE 'pass%' OR text LIKE 'clusterbench:pass%'").fetchall()
    frames = int(re.search(r"frames=(\d+)", text).group(1))
    rows: dict[str, list[tuple[int, int, int]]] = {"kernel": [], "h2d": [], "d2h": []}
    for s, e in con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL"):
        rows["kernel"].append((s, e, 0))
    for s, e, kind, nbytes in con.execute("SELECT start, end, copyKind, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY"):
        rows[KIND[kind]].append((s, e, nbytes))
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:  # the probe's traces zero their 16-byte totals once
        rows["memset"] = [(s, e, b) for s, e, b in con.execute("SELECT start, end, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET")]
    if "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" in tables:  # a graph-level trace: whole graph executions
        rows["graph"] = [(s, e, 0) for s, e in con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE")]
    sync_names = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")
    sync = [
        (s, e)
        for s, e, name in con.execute(
            "SELECT r.start, r.end, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId"
        )
        if name.split("_v")[0] in sync_names
    ]
    con.close()

    r = analyze_trace(real)
    assert r.primary.window.length_ns == hi - lo
    assert r.primary.frames.count == frames
    assert r.primary.gpu_name == "NVIDIA H200"
    unions = {}
    for engine, recs in rows.items():
        u = clip(sweep_union([(s, e) for s, e, _ in recs]), lo, hi)
        unions[engine] = u
        inside = [(s, e, b) for s, e, b in recs if min(e, hi) > max(s, lo)]
        st = r.primary.busy.engines[engine]
        assert st.busy_ns == total(u), engine
        assert st.count == len(inside), engine
        assert st.us_per_frame == pytest.approx(total(u) / 1000 / frames)
        if engine not in ("kernel", "graph"):
            # copies in these traces lie wholly inside or outside the pass range
            assert all(lo <= s and e <= hi for s, e, _ in inside)
            assert st.bytes == sum(b for _, _, b in inside)
            assert st.gbps == pytest.approx(st.bytes / total(u))
    any_busy = sweep_union([iv for u in unions.values() for iv in u])
    assert r.primary.busy.any_busy_ns == total(any_busy)
    assert r.primary.busy.idle_ns == (hi - lo) - total(any_busy)
    # overlap: time covered by two or more engines, counted segment by segment between all edges
    assert r.primary.busy.overlap_ns == _covered_by_two_or_more(list(unions.values()))
    assert r.primary.host.host_sync_ns == total(clip(sweep_union(sync), lo, hi))
    roof = max(unions, key=lambda k: total(unions[k]))
    assert r.primary.roofline.engine == roof
    assert r.primary.roofline.fps == pytest.approx(1e9 * frames / total(unions[roof]))


def _covered_by_two_or_more(unions: list[list[tuple[int, int]]]) -> int:
    """Length of time inside at least two of the (disjoint-within-themselves) unions."""
    edges = sorted({t for u in unions for iv in u for t in iv})
    out = 0
    for a, b in zip(edges, edges[1:]):
        n = sum(any(s <= a and b <= e for s, e in u) for u in unions)
        out += (b - a) if n >= 2 else 0
    return out


def test_real_export_5x5_reads_as_transfer_bound() -> None:
    """The bundled make-run trace: H2D binds near the H200 link limit (docs/facts.md: ~5.8 µs/frame)."""
    r = analyze_trace(DEV_5X5)
    assert r.primary.roofline.engine == "h2d"
    assert 5.0 < r.primary.roofline.us_per_frame < 6.5
    assert 45 < r.primary.busy.engines["h2d"].gbps < 60  # PCIe Gen5 x16 with pinned buffers: ~54 GB/s


def test_replicated_export_scales_exactly(tmp_path: Path) -> None:
    """The benchmark's replicated trace (3 time-shifted copies): every total is 3x one copy's."""
    import importlib.util

    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_analyze.py"
    spec = importlib.util.spec_from_file_location("bench_analyze", bench)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    one = analyze_trace(DEV_5X5)
    per_copy = 24 + 41  # kernels + memcpys in dev_5x5_s2_b500
    total, copies = mod.build(DEV_5X5, tmp_path / "x3.sqlite", 3 * per_copy)
    assert (total, copies) == (3 * per_copy, 3)
    three = analyze_trace(tmp_path / "x3.sqlite")
    assert three.primary.window.length_ns == 3 * one.primary.window.length_ns and three.primary.frames.count == 3 * one.primary.frames.count
    for name, st in one.primary.busy.engines.items():
        assert (three.primary.busy.engines[name].busy_ns, three.primary.busy.engines[name].count) == (3 * st.busy_ns, 3 * st.count)
    assert (three.primary.busy.any_busy_ns, three.primary.host.host_sync_ns) == (3 * one.primary.busy.any_busy_ns, 3 * one.primary.host.host_sync_ns)


def test_replicated_loop_scales_exactly(tmp_path: Path) -> None:
    """The benchmark's host-bound shape: zoo_host_bound's loop (every kernel, its copies and calls after
    the module load) run 3 more times, one loop period apart: the kernels' count and busy time are 4x
    one run's, the API rows grow by 3 loops' calls, and the tear-down calls keep their early rowids
    (stored out of time order)."""
    import importlib.util
    import sqlite3

    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_analyze.py"
    spec = importlib.util.spec_from_file_location("bench_analyze", bench)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src = Path(__file__).resolve().parents[1] / "data" / "zoo" / "zoo_host_bound.sqlite"
    one = analyze_trace(src, frames_spec="kernel:zoo_calib")
    base = 1001 + 2001  # kernels + memcpys of zoo_host_bound; its loop: every kernel and 2,000 copies
    total, copies = mod.build_loop(src, tmp_path / "hb.sqlite", base + 3 * 3001)
    assert (total, copies) == (base + 3 * 3001, 3)
    four = analyze_trace(tmp_path / "hb.sqlite", frames_spec="kernel:zoo_calib")
    k1, k4 = one.primary.busy.engines["kernel"], four.primary.busy.engines["kernel"]
    assert (k4.count, k4.busy_ns) == (4 * k1.count, 4 * k1.busy_ns)
    assert four.primary.frames.count == 4 * one.primary.frames.count
    con = sqlite3.connect(f"file:{tmp_path / 'hb.sqlite'}?mode=ro", uri=True)
    orig = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    q = "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME"
    first_gpu = orig.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    last_gpu = max(orig.execute(f"SELECT max(end) FROM {t}").fetchone()[0] for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"))
    # the loop's calls: from the call in flight at the first kernel (its launch) to the last GPU row's end
    l0 = orig.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE start <= ? AND end >= ?", (first_gpu, first_gpu)).fetchone()[0]
    loop_calls = orig.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE start >= ? AND start <= ?", (l0, last_gpu)).fetchone()[0]
    assert con.execute(q).fetchone()[0] == orig.execute(q).fetchone()[0] + 3 * loop_calls
    starts = [r[0] for r in con.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY rowid")]
    assert any(b < a for a, b in zip(starts, starts[1:]))


def test_probe_trace_carries_exactly_the_frames_and_slots() -> None:
    """A trace clusterbench probe wrote on the H200 (9x9, cap 1700, 1 stream, 20,000 frames, f32).

    By hand: each frame goes in once, 400*400*2 = 320,000 B; each frame's whole slot comes out,
    4 + 1700*(4 + 4*81) = 557,604 B; plus the two uint64 cluster totals read back once (16 B).
    """
    r = analyze_trace(H200[0].with_name("probe_9x9_s1_uncontended_2026-11-29.sqlite"))
    assert r.primary.frames.count == 20000 and r.primary.window.source == "NVTX range 'clusterbench:pass frames=20000'"
    assert r.primary.busy.engines["h2d"].bytes == 20000 * 320_000
    assert r.primary.busy.engines["d2h"].bytes == 20000 * 557_604 + 16
    assert r.primary.roofline.engine == "d2h"
    assert r.primary.busy.serialization == 1.0 and r.primary.busy.overlap_ns == 0  # one stream: the engines take turns


TRACKING = H200[0].with_name("tracking_3x3_s1_b500_f2000_graph.sqlite")
TRACKING_NODE = H200[0].with_name("tracking_3x3_s1_b500_f2000_node.sqlite")


def test_real_graph_level_trace_binds_on_the_graph_union() -> None:
    """The tracking pipeline (3x3, 1 stream, batch 500, 2,000 frames) traced with nsys's default
    --cuda-graph-trace=graph on the H200: its kernels exist only as graph-trace rows.

    The reference reads the graph rows and the pass range with plain sqlite3 and takes their
    union by a sorted sweep, clipped to the range.
    """
    con = sqlite3.connect(f"file:{TRACKING}?mode=ro", uri=True)
    (lo, hi), = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text LIKE 'clusterbench:pass%'").fetchall()
    graphs = con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE").fetchall()
    kernels_outside_graphs = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.close()
    union = clip(sweep_union(graphs), lo, hi)
    r = analyze_trace(TRACKING)
    assert r.primary.frames.count == 2000
    g = r.primary.busy.engines["graph"]
    assert g.busy_ns == total(union)
    assert g.count == sum(1 for s, e in graphs if min(e, hi) > max(s, lo))
    assert r.primary.roofline.engine == "graph"
    assert r.primary.roofline.us_per_frame == pytest.approx(total(union) / 1000 / 2000)
    # the kernel table holds only the few kernels launched outside graphs (none inside the pass)
    assert r.primary.busy.engines["kernel"].busy_ns < g.busy_ns / 100 and kernels_outside_graphs < 100
    # the warning, once: in the warnings, and as the graph rule's note
    assert sum("--cuda-graph-trace=node" in w for w in r.warnings) == 1
    assert [f.code for f in r.primary.findings].count("graph_level") == 1
    assert any("copy and memset nodes" in n and "gaps between its nodes" in n for n in r.primary.notes)


def test_real_node_level_trace_reads_graph_kernels_as_kernels() -> None:
    """The same pipeline traced with --cuda-graph-trace=node: one kernel row per graph kernel node
    (batch 500, one kernel per frame: 2,000 in the pass), no graph-trace table, no warning."""
    con = sqlite3.connect(f"file:{TRACKING_NODE}?mode=ro", uri=True)
    (lo, hi), = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text LIKE 'clusterbench:pass%'").fetchall()
    kernels = con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    in_graphs = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId IS NOT NULL").fetchone()[0]
    con.close()
    r = analyze_trace(TRACKING_NODE)
    k = r.primary.busy.engines["kernel"]
    assert in_graphs >= 2000
    assert k.busy_ns == total(clip(sweep_union(kernels), lo, hi))
    assert k.count == sum(1 for s, e in kernels if min(e, hi) > max(s, lo))
    assert "graph" not in r.primary.busy.engines and r.primary.roofline.engine == "kernel"
    assert not any("cuda-graph-trace" in w for w in r.warnings)
    assert r.to_json()["graph_trace"] == "node"
    # the two traces are two runs of one config: the kernel bar and the graph bar agree within 2 %
    assert k.us_per_frame == pytest.approx(analyze_trace(TRACKING).primary.busy.engines["graph"].us_per_frame, rel=0.02)


def _gpu_rows(con: sqlite3.Connection) -> list[tuple[int, int]]:
    tables = {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    rows = []
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
        if t in tables:
            rows += con.execute(f"SELECT start, end FROM {t}").fetchall()
    return rows


def test_real_export_gaps_match_an_independent_sweep(real: Path) -> None:
    """Every idle gap of at least 0.1 ms in the pass range, from the raw rows; and the calls of the one
    thread that made CUDA calls during each one, from the runtime rows."""
    con = sqlite3.connect(f"file:{real}?mode=ro", uri=True)
    (lo, hi), = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text LIKE 'pass%' OR text LIKE 'clusterbench:pass%'").fetchall()
    busy = sweep_union(_gpu_rows(con))
    idle = [(s, e) for s, e in minus([(lo, hi)], busy) if e - s >= 100_000]
    calls = con.execute("SELECT r.start, r.end, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId").fetchall()
    con.close()
    g = analyze_trace(real).primary
    got = list(zip(g.gaps.starts_ns.tolist(), (g.gaps.starts_ns + g.gaps.lengths_ns).tolist()))
    assert got == idle
    for i, (s, e) in enumerate(idle):
        inside = {name.split("_v")[0] for a, b, name in calls if min(b, e) > max(a, s)}
        cause = g.gaps.cause_of(i)
        if "cuModuleLoadData" in inside:
            assert (cause, g.gaps.api[i]) == ("module_load", "cuModuleLoadData")
        else:
            assert cause in ("host", "sync"), (cause, inside)
            assert g.gaps.api[i] is None or g.gaps.api[i] in inside


@pytest.mark.parametrize("name, steady_efficiency", [("dev_5x5_s2_b500.sqlite", 0.48), ("dev_7x7_s3_b250_async.sqlite", 0.95)])
def test_bundled_dev_traces_read_their_module_load_gap_as_set_up(name: str, steady_efficiency: float) -> None:
    """make run analyzes dev_5x5: the 80.7 ms gap is CuPy compiling and loading a kernel, once (the
    7x7 trace: 53.8 ms); without it the GPU is idle about 1 % and the pipeline runs at about 48 %
    (7x7: 95 %) of its roofline; no starvation advice."""
    g = analyze_trace(DEV_5X5.with_name(name)).primary
    i = g.gaps.longest()
    assert (g.gaps.cause_of(i), g.gaps.api[i]) == ("module_load", "cuModuleLoadData")
    codes = [f.code for f in g.findings]
    assert "setup_gaps" in codes and "gpu_starvation" not in codes and "low_utilization" not in codes
    steady = g.window.length_ns - int(g.gaps.lengths_ns[i])
    assert g.throughput.steady_ns == steady
    assert g.throughput.steady_efficiency == pytest.approx(g.roofline.busy_ns / steady)
    assert round(g.throughput.steady_efficiency, 2) == steady_efficiency
    assert g.throughput.steady_idle_ns / steady < 0.02
