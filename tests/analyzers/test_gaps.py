"""Idle gaps and their causes, worked out by hand on small traces.

Every trace below has one idle gap: kernels at [B, B + 10 µs) and [B + 5 ms, B + 5.01 ms), the gap
[B + 10 µs, B + 5 ms) = 4,990,000 ns; the main thread launches both kernels (its issuing span
covers the gap). What else the host does in the gap decides the cause.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.analyzers import analyze_trace
from clusterbench.analyzers.records import GAP_CAUSES

from fake_nsys import Api, Kernel, Overhead, Trace, build

US, MS = 1_000, 1_000_000
B = 10 * MS
GAP = (B + 10 * US, B + 5 * MS)
GAP_NS = GAP[1] - GAP[0]


def one_gap(tmp_path: Path, api=(), overhead=(), name: str = "g", **kw):
    launches = [Api(B - 5 * US, B - 3 * US, "cudaLaunchKernel_v7000"), Api(B + 5 * MS - 4 * US, B + 5 * MS - 2 * US, "cudaLaunchKernel_v7000")]
    t = Trace(kernels=[Kernel(B, B + 10 * US), Kernel(B + 5 * MS, B + 5 * MS + 10 * US)], api=launches + list(api),
              overhead=list(overhead), **kw)  # fmt: skip
    r = analyze_trace(build(tmp_path / f"{name}.sqlite", t), window="span")
    gp = r.primary.gaps
    assert len(gp) == 1 and (int(gp.starts_ns[0]), int(gp.lengths_ns[0])) == (GAP[0], GAP_NS)
    return r, gp


def parts(gp) -> dict:
    return {c: int(gp.parts_ns[0, k]) for k, c in enumerate(GAP_CAUSES) if gp.parts_ns[0, k]}


def test_module_load_in_the_gap_makes_it_set_up(tmp_path: Path) -> None:
    # 4.7 ms of host code (an untraced compile), then cuModuleLoadData for 100 µs
    r, gp = one_gap(tmp_path, [Api(B + 4_800 * US, B + 4_900 * US, "cuModuleLoadData")])
    assert (gp.cause_of(0), gp.api[0]) == ("module_load", "cuModuleLoadData")
    # the thread: 100 µs in the load, 2 µs in the second launch (host), the rest host code
    assert parts(gp) == {"module_load": 100 * US, "host": GAP_NS - 100 * US}
    assert gp.setup_ns == GAP_NS and gp.loop_ns == 0
    js = r.to_json()["gaps"][0]
    # from the window start (the span starts at B)
    assert (js["start_ns"], js["length_ns"], js["cause"], js["api"], js["setup"]) == (10 * US, GAP_NS, "module_load", "cuModuleLoadData", True)
    assert "setup_gaps" in [f.code for f in r.primary.findings]
    assert "gpu_starvation" not in [f.code for f in r.primary.findings]


def test_a_module_load_wins_over_a_longer_allocation(tmp_path: Path) -> None:
    # cudaMalloc 3 ms, then a 0.1 ms load: a module load in the gap makes it module_load
    _, gp = one_gap(tmp_path, [Api(B + 100 * US, B + 3_100 * US, "cudaMalloc_v3020"),
                              Api(B + 4_000 * US, B + 4_100 * US, "cuModuleLoadData")])  # fmt: skip
    assert gp.cause_of(0) == "module_load"
    assert parts(gp) == {"module_load": 100 * US, "alloc": 3 * MS, "host": GAP_NS - 3_100 * US}


def test_allocation(tmp_path: Path) -> None:
    # cudaMalloc 3 ms of the 4.99 ms gap: more than the 1.99 ms of host code
    _, gp = one_gap(tmp_path, [Api(B + 100 * US, B + 3_100 * US, "cudaMalloc_v3020")])
    assert (gp.cause_of(0), gp.api[0]) == ("alloc", "cudaMalloc")
    assert gp.setup_mask().tolist() == [True]


def test_host_code_names_the_longest_cuda_call(tmp_path: Path) -> None:
    # no call but a 50 µs cudaEventRecord and the 2 µs launch at the end: host
    _, gp = one_gap(tmp_path, [Api(B + 1 * MS, B + 1 * MS + 50 * US, "cudaEventRecord_v3020")])
    assert (gp.cause_of(0), gp.api[0]) == ("host", "cudaEventRecord")
    assert parts(gp) == {"host": GAP_NS}
    assert gp.setup_mask().tolist() == [False]


def test_waiting_through_the_gap_means_the_work_is_not_in_the_trace(tmp_path: Path) -> None:
    # the thread waits in cudaStreamSynchronize from B + 20 µs to B + 4.99 ms: 4.97 ms of 4.99 ms; the
    # window is the span, 5.01 ms: the wait covers 99 % of the window, far past 10 %
    r, gp = one_gap(tmp_path, [Api(B + 20 * US, B + 4_990 * US, "cudaStreamSynchronize_v3020")])
    assert (gp.cause_of(0), gp.api[0]) == ("sync", "cudaStreamSynchronize")
    g = r.primary
    assert g.work_not_traced is not None and g.work_not_traced.waited_ns == GAP_NS
    assert [f.code for f in g.findings] == ["work_not_traced"]  # no idle figures, no advice
    js = r.to_json()
    assert js["efficiency"] is None and js["roofline"]["fps"] is None and js["work_not_traced"]["calls"] == ["cudaStreamSynchronize"]
    assert "another process" in js["work_not_traced"]["why"]  # no graphs, no capture here


def test_a_short_wait_is_a_loop_gap_not_missing_work(tmp_path: Path) -> None:
    # the same wait, but the gap is 0.5 ms (< 1 ms): a synchronize with nothing queued, no more
    t = Trace(kernels=[Kernel(B, B + 10 * US), Kernel(B + 500 * US, B + 510 * US)],
              api=[Api(B - 5 * US, B - 3 * US, "cudaLaunchKernel_v7000"), Api(B + 12 * US, B + 480 * US, "cudaStreamSynchronize_v3020"),
                   Api(B + 490 * US, B + 492 * US, "cudaLaunchKernel_v7000")])  # fmt: skip
    g = analyze_trace(build(tmp_path / "s.sqlite", t), window="span").primary
    assert g.gaps.cause_of(0) == "sync" and g.work_not_traced is None


def test_profiler_overhead_on_the_launching_thread(tmp_path: Path) -> None:
    # a 4.4 ms CUPTI flush on the main thread; the same row on another thread (not launching) is not its cause
    _, gp = one_gap(tmp_path, overhead=[Overhead(B + 100 * US, B + 4_500 * US, "CUPTI Buffer flush")])
    assert (gp.cause_of(0), gp.api[0]) == ("profiler", "CUPTI Buffer flush")
    assert gp.setup_mask().tolist() == [True]
    _, gp2 = one_gap(tmp_path, overhead=[Overhead(B + 100 * US, B + 4_500 * US, tid=555)], name="other")
    assert gp2.cause_of(0) == "host"


def test_no_api_table_means_unknown(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(B, B + 10 * US), Kernel(B + 5 * MS, B + 5 * MS + 10 * US)])
    g = analyze_trace(build(tmp_path / "u.sqlite", t), window="span").primary
    assert g.gaps.cause_of(0) == "unknown" and g.host.known is False
    assert "gpu_starvation" in [f.code for f in g.findings]  # unknown counts as the loop's own


def test_driver_calls_in_their_own_table(tmp_path: Path) -> None:
    _, gp = one_gap(tmp_path, [Api(B + 4_800 * US, B + 4_900 * US, "cuModuleLoadData")], driver_table=True)
    assert gp.cause_of(0) == "module_load"


def test_only_the_threads_that_feed_the_loop_count(tmp_path: Path) -> None:
    # the worker (tid 101) launches both kernels and waits through the gap; the main thread launched
    # once long before (its issuing span ends at B - 1 ms + 2 µs) and then only joins: not counted
    t = Trace(
        kernels=[Kernel(B, B + 10 * US), Kernel(B + 5 * MS, B + 5 * MS + 10 * US)],
        api=[Api(B - 1 * MS, B - 1 * MS + 2 * US, "cudaLaunchKernel_v7000"),
             Api(B - 5 * US, B - 3 * US, "cudaLaunchKernel_v7000", tid=101),
             Api(B + 20 * US, B + 200 * US, "cudaStreamSynchronize_v3020", tid=101),
             Api(B + 5 * MS - 4 * US, B + 5 * MS - 2 * US, "cudaLaunchKernel_v7000", tid=101)],
    )  # fmt: skip
    g = analyze_trace(build(tmp_path / "t.sqlite", t), window="span").primary
    gp = g.gaps
    # the worker: 180 µs waiting, the rest host code (the launch at the end is host too)
    assert gp.cause_of(0) == "host" and parts(gp) == {"sync": 180 * US, "host": GAP_NS - 180 * US}
    t2 = Trace(kernels=t.kernels, api=t.api[:3] + [Api(B + 200 * US, B + 4_990 * US, "cudaStreamSynchronize_v3020", tid=101),
                                                   t.api[3]])  # fmt: skip
    gp2 = analyze_trace(build(tmp_path / "t2.sqlite", t2), window="span").primary.gaps
    assert gp2.cause_of(0) == "sync"  # 4.97 ms waiting on the one thread that counts


@pytest.mark.parametrize("length, listed", [(99_999, 0), (100_000, 1)])
def test_the_gap_threshold_is_0_1_ms(tmp_path: Path, length: int, listed: int) -> None:
    t = Trace(kernels=[Kernel(0, 10), Kernel(10 + length, 20 + length)])
    g = analyze_trace(build(tmp_path / f"t{length}.sqlite", t), window="span").primary
    assert len(g.gaps) == listed and g.busy.idle_ns == length


def test_a_hand_over_between_threads_is_set_up(tmp_path: Path) -> None:
    # the main thread launches the warm-up kernel and issues nothing more; a worker starts issuing
    # 3 ms later: when the gap began no thread was feeding the GPU, so it is not the loop's own gap
    t = Trace(
        kernels=[Kernel(B, B + 10 * US), Kernel(B + 5 * MS, B + 5 * MS + 10 * US)],
        api=[Api(B - 5 * US, B - 3 * US, "cudaLaunchKernel_v7000"),
             Api(B + 3 * MS, B + 3 * MS + 10 * US, "cudaSetDevice_v3020", tid=101),
             Api(B + 5 * MS - 4 * US, B + 5 * MS - 2 * US, "cudaLaunchKernel_v7000", tid=101)],
    )  # fmt: skip
    r = analyze_trace(build(tmp_path / "h.sqlite", t), window="span")
    gp = r.primary.gaps
    assert gp.cause_of(0) == "host" and gp.between.tolist() == [True] and gp.setup_mask().tolist() == [True]
    js = r.to_json()["gaps"][0]
    assert js["setup"] is True and js["between_threads"] is True
    assert "gpu_starvation" not in [f.code for f in r.primary.findings]


def test_issuing_spans_count_calls_outside_the_window(tmp_path: Path) -> None:
    # the window is the span [B, B + 5.01 ms); the launch of its first kernel comes before B: the thread
    # was feeding the GPU when the gap began, though the reader kept no call of it from before the window
    _, gp = one_gap(tmp_path)
    assert gp.between is None


@pytest.mark.parametrize("block", [None, 2])
def test_idle_stretches_cut_to_a_window_of_several_ranges(monkeypatch: pytest.MonkeyPatch, block) -> None:
    # gaps.idle by hand, in units of u = 10 µs (a hole of 10 u is the 100 µs the model keeps): window ranges
    # [0, 100), [200, 300), [400, 500); records from 10 to 480 with holes (20, 30), (50, 220), (250, 260),
    # (290, 410), (450, 470). Idle: [0, 10), the holes, [480, 500); cut to the ranges: [0, 10), [20, 30),
    # [50, 100), [200, 220), [250, 260), [290, 300), [400, 410), [450, 470), [480, 500). The holes are taken
    # in blocks (block 2: four blocks) against the window; the answer is the same.
    import types

    import numpy as np

    from clusterbench.analyzers import gaps as G
    from clusterbench.analyzers import intervals as iv
    from clusterbench.analyzers.model import HOLE_NS

    if block is not None:
        monkeypatch.setattr(iv, "BLOCK", block)
    u = HOLE_NS // 10
    a = lambda *x: np.array(x, dtype=np.int64) * u  # noqa: E731
    g = types.SimpleNamespace(first_ns=10 * u, last_ns=480 * u, holes=(a(20, 50, 250, 290, 450), a(30, 220, 260, 410, 470)))
    window = (a(0, 200, 400), a(100, 300, 500))
    s, e = G.idle(g, window, HOLE_NS)
    assert (s // u).tolist() == [0, 20, 50, 200, 250, 290, 400, 450, 480]
    assert (e // u).tolist() == [10, 30, 100, 220, 260, 300, 410, 470, 500]
    s, e = G.idle(g, window, 2 * HOLE_NS)  # at least 20 u
    assert list(zip((s // u).tolist(), (e // u).tolist())) == [(50, 100), (200, 220), (450, 470), (480, 500)]
