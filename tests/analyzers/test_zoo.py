"""The zoo's real traces (tests/zoo/*.cu on an H200, nsys 2025.3.1; tests/data/zoo): what analyze
reads on each, against values worked out in this file, never by the code under test: from the
program's own ground truth (its ZOO line: launches, copies, frames, threads, phases) and from the raw
rows of the export read with plain sqlite3 and measured in plain Python (tests/oracle.py). Times are
compared exactly, in ns.

Where the reading is a judgement, the expected answer is decided here (EXPECT, and the tests below):
- the window `auto` picks: the GPU activity span with the set-up before the loop cut off where a
  separating gap sets it apart: a compile and module load (no_nvtx), a long host pause (nvtx_domain's
  50 ms sleep after its warm-up), a hand-over between threads (threads: the main thread's warm-up,
  then the workers), the graph's creation (device_graph: capture, instantiate, upload). A warm-up
  frame that runs straight into the loop stays in the window (multi_kernel, host_bound), though
  CUDA's lazy loading puts a module-load gap inside it at its first kernel launch: cutting there
  would keep half a frame. nsys's own overhead on a worker's first call (a profiler gap) is set-up
  inside the window, not a place to cut. A capture holds only the loop: nothing to cut. In
  device_graph_node the set-up holds 3 of the 7 records the trace shows, too many to cut (10 % rule).
- frames: one launch of a kernel matching the regex (re.search: `zoo_calib_jit` matches zoo_calib_jit
  and zoo_calib_jit2, one frame each), one NVTX range lying mostly in the window, or one graph
  execution (graph-level rows, or at node level the kernel nodes of one cudaGraphLaunch).
- a thread not in ThreadNames has no name: nsys took the names at the start of the process, before
  the workers named themselves (zoo-feed-N in the ZOO line); the tid alone is right.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import path_oracle
from clusterbench.analyzers import analyze_trace
from oracle import (
    RefGap,
    clip,
    clip_set,
    drained,
    median,
    minus,
    nearest_rank,
    read_raw,
    ref_gaps,
    ref_threads,
    total,
    union,
    zoo_truth,
)

ZOO = Path(__file__).resolve().parents[1] / "data" / "zoo"


@dataclass(frozen=True)
class Expect:
    frames: str  # the frame definition the test passes (--frames)
    cut: object  # truth -> how many records of the span come before the window (the set-up cut off)
    warm_up: bool = False  # the warm-up frame is in the window (it is in the trace and nothing cut it)


def _setup_copies(t: dict) -> int:  # device_graph: the ring upload and the counters' memsets
    return t["copies"]["h2d"] + t["copies"]["memset"]


def _warm_up(t: dict) -> int:  # an H2D per loop frame: the H2D rows over the frames, and the warm-up's kernels
    return t["copies"]["h2d"] - t["frames"] + sum((t.get("warmup_launches") or {}).values())


EXPECT = {
    "no_nvtx": Expect("kernel:zoo_calib_jit", _warm_up),  # the set-up H2D before the first compile
    "nvtx_domain": Expect("kernel:zoo_calib", _warm_up),  # warm-up H2D + zoo_calib, then the 50 ms sleep
    "nvtx_domain_profilerapi": Expect("kernel:zoo_calib", lambda t: 0),
    "nvtx_domain_nvtxrange": Expect("kernel:zoo_calib", lambda t: 0),
    "multi_kernel": Expect("kernel:zoo_calib", lambda t: 0, warm_up=True),
    "multi_kernel_ratebug": Expect("kernel:zoo_calib", lambda t: 0, warm_up=True),
    "threads_t2s2": Expect("kernel:zoo_calib", _warm_up),
    "threads_t1s4": Expect("kernel:zoo_calib", _warm_up),
    "host_bound": Expect("kernel:zoo_calib", lambda t: 0, warm_up=True),
    "device_graph_node": Expect("graph", lambda t: 0),
    "device_graph_graph": Expect("graph", _setup_copies),
    "device_graph_host_node": Expect("graph", _setup_copies),
    "device_graph_host_graph": Expect("graph", _setup_copies),
}


@dataclass
class Case:
    name: str
    raw: object
    truth: dict
    g: object  # the primary group analyze read, with EXPECT's frames
    lo: int  # the expected window
    hi: int
    gaps: list[RefGap]


_CACHE: dict[str, Case] = {}


def case(name: str) -> Case:
    if name not in _CACHE:
        raw = read_raw(ZOO / f"zoo_{name}.sqlite")
        truth = zoo_truth(ZOO / f"zoo_{name}.stdout.txt")
        g = analyze_trace(ZOO / f"zoo_{name}.sqlite", frames_spec=EXPECT[name].frames).primary
        recs = [r for r in raw.recs if r.pid == truth["pid"]]
        k = EXPECT[name].cut(truth)
        lo, hi = recs[k].start, max(r.end for r in recs)
        _CACHE[name] = Case(name, raw, truth, g, lo, hi, ref_gaps(raw, truth["pid"], lo, hi))
    return _CACHE[name]


def codes(g) -> list[str]:
    return [f.code for f in g.findings]


def frame_events(c: Case) -> list[tuple[int, int]]:
    """(start, end) of the frame events that the definition counts in the expected window."""
    spec = EXPECT[c.name].frames
    pid = c.truth["pid"]
    if spec.startswith("kernel:"):
        rx = re.compile(spec[len("kernel:"):])
        ev = [(r.start, r.end) for r in c.raw.of("kernel") if r.pid == pid and rx.search(r.name)]
    elif c.raw.of("graph"):
        ev = [(r.start, r.end) for r in c.raw.of("graph") if r.pid == pid]
    else:  # node level: the kernel nodes of one cudaGraphLaunch share its correlationId
        runs: dict[int, list[int]] = {}
        for r in c.raw.of("kernel"):
            if r.pid == pid and r.graph_node is not None:
                a = runs.setdefault(r.corr, [r.start, r.end])
                a[0], a[1] = min(a[0], r.start), max(a[1], r.end)
        ev = [(a, b) for a, b in runs.values()]
    return sorted((s, e) for s, e in ev if c.lo <= s < c.hi)


# --------------------------------------------------------------------------- what the real traces showed


def _span(name: str):
    raw = read_raw(ZOO / f"zoo_{name}.sqlite")
    truth = zoo_truth(ZOO / f"zoo_{name}.stdout.txt")
    g = analyze_trace(ZOO / f"zoo_{name}.sqlite", window="span").primary
    return raw, truth, g, ref_gaps(raw, truth["pid"], g.window.start_ns, g.window.end_ns)


def test_a_warm_up_kernel_that_ends_inside_its_launch_call_leaves_a_hand_over() -> None:
    # threads_t1s4: the main thread's warm-up zoo_calib ends while its cudaLaunchKernel is returning;
    # then no thread issues anything until the worker's first cudaMemcpyAsync 0.3 ms later
    raw, truth, g, ref = _span("threads_t1s4")
    (hand,) = [x for x in ref if x.between]
    main = [x for x in raw.calls if x.tid == truth["main_tid"] and x.name == "cudaLaunchKernel"]
    assert main[-1].start < hand.start < main[-1].end  # still in its last launch call when the GPU ran out
    i = int(np.flatnonzero(g.gaps.starts_ns == hand.start)[0])
    assert bool(g.gaps.between[i]) and bool(g.gaps.setup_mask()[i]) and g.gaps.cause_of(i) == hand.cause


def test_nested_profiler_rows_count_once() -> None:
    # nsys's overhead on the worker's first call: "Unknown" holding "CUDA profiling memory allocation"
    # holding "TLS allocation"; the gap's profiler part is the time they cover, not their sum
    raw, truth, g, ref = _span("threads_t1s4")
    (prof,) = [x for x in ref if x.cause == "profiler"]
    worker = truth["per_thread"][0]["tid"]
    rows = [(s, e) for s, e, tid, _ in raw.overhead if tid == worker and s < prof.end and e > prof.start]
    assert len(rows) >= 3 and sum(min(e, prof.end) - max(s, prof.start) for s, e in rows) > prof.end - prof.start
    i = int(np.flatnonzero(g.gaps.starts_ns == prof.start)[0])
    assert g.gaps.gap_json(i)["parts_ns"]["profiler"] == total(clip(union(rows), prof.start, prof.end)) == prof.parts["profiler"]


def test_the_frames_hint_counts_what_its_regex_matches() -> None:
    # no_nvtx without frames: the most launched kernel is zoo_calib_jit (500), but kernel:zoo_calib_jit
    # matches zoo_calib_jit2 too and counts 1,000: the hint says so
    raw = read_raw(ZOO / "zoo_no_nvtx.sqlite")
    hint = analyze_trace(ZOO / "zoo_no_nvtx.sqlite").primary.frames.hint
    n = len([r for r in raw.of("kernel") if re.search("zoo_calib_jit", r.name)])
    assert n == 1000 and hint == (f"the window holds {n:,} launches of kernels matching zoo_calib_jit (zoo_calib_jit, "
                                  "zoo_calib_jit2): --frames kernel:zoo_calib_jit")  # fmt: skip


@pytest.mark.parametrize("name", ["no_nvtx", "nvtx_domain", "threads_t2s2", "device_graph_host_node", "device_graph_host_graph"])
def test_waits_that_do_not_drain_the_gpu_earn_no_drain_note(name: str) -> None:
    # the host waits 20 % of the window or more and the GPU idles 10 % or more, but the GPU idles between
    # queued work (one stream's turns, graph launches), not where the waits end
    raw = read_raw(ZOO / f"zoo_{name}.sqlite")
    g = analyze_trace(ZOO / f"zoo_{name}.sqlite").primary
    setup = [(int(s), int(s + n)) for s, n, m in zip(g.gaps.starts_ns, g.gaps.lengths_ns, g.gaps.setup_mask()) if m]
    steady = minus([(g.window.start_ns, g.window.end_ns)], setup)
    assert g.host.drain_idle_ns == drained(raw, g.pid, steady)
    assert g.host.host_sync_ns >= 0.2 * g.window.length_ns and g.throughput.steady_idle_ns >= 0.1 * g.throughput.steady_ns
    assert g.host.drain_idle_ns < 0.5 * g.throughput.steady_idle_ns and "sync_drains" not in codes(g)


def test_a_binding_thread_that_waits_for_the_gpu_says_so() -> None:
    # no_nvtx: the host thread is the tallest bar (10.76 µs/frame) but waits for the GPU 60 % of its
    # time: one stream's turns (11.33 µs/frame of bars, plus the GPU's latency between them) set the pace
    g = analyze_trace(ZOO / "zoo_no_nvtx.sqlite", frames_spec="kernel:zoo_calib_jit").primary
    t = g.host.busiest
    assert g.roofline.engine == "host" and t.wait_ns > t.busy_ns
    note = next(f.message for f in g.findings if f.code == "host_binds")
    assert "the GPU is behind it and sets the rate measured" in note and "does not raise throughput" not in note
    assert f"({100 * (t.wait_ns + t.blocked_ns) / (t.busy_ns + t.wait_ns):.0f} % of its time" in note
    turns = next(f.message for f in g.findings if f.code == "serialized_one_stream")
    bars = sum(st.busy_ns for st in g.busy.engines.values())
    assert bars >= 1.05 * t.busy_ns and f"at least the sum of the bars ({bars / 1000 / g.frames.count:.2f} µs/frame" in turns
    # host_bound: the thread hardly waits, and then a faster GPU would not help
    hb = analyze_trace(ZOO / "zoo_host_bound.sqlite", frames_spec="kernel:zoo_calib").primary
    x = hb.host.busiest
    assert x.wait_ns < 0.1 * (x.busy_ns + x.wait_ns)
    assert "a faster GPU, kernel or link does not raise throughput" in next(f.message for f in hb.findings if f.code == "host_binds")


NAMES = sorted(EXPECT)


@pytest.mark.parametrize("name", NAMES)
def test_the_window_auto_picks(name: str) -> None:
    c = case(name)
    w = c.g.window
    assert c.g.pid == c.truth["pid"]
    assert (w.start_ns, w.end_ns, w.length_ns) == (c.lo, c.hi, c.hi - c.lo)
    first = min(r.start for r in c.raw.recs if r.pid == c.truth["pid"])
    assert w.cut_before_ns == c.lo - first and w.cut_after_ns == 0


@pytest.mark.parametrize("name", NAMES)
def test_frames_and_kernels_by_name(name: str) -> None:
    c = case(name)
    g, t, pid = c.g, c.truth, c.truth["pid"]
    events = frame_events(c)
    assert g.frames.count == len(events)
    # the ground truth: the loop's frames, and the warm-up's when the window keeps it
    kept_warm_up = EXPECT[name].warm_up
    if name == "device_graph_node":
        assert g.frames.count == 1 < t["graph"]["executions"]  # nsys wrote only the first execution's rows
    elif EXPECT[name].frames == "graph":
        assert g.frames.count == t["graph"]["executions"] == t["events"]
    else:
        assert g.frames.count == t["frames"] + (1 if kept_warm_up else 0)
    inside = [r for r in c.raw.of("kernel") if r.pid == pid and min(r.end, c.hi) > max(r.start, c.lo)]
    expect = {}
    for n in {r.name for r in inside}:
        rows = [(r.start, r.end) for r in inside if r.name == n]
        expect[n] = (len(rows), total(clip(union(rows), c.lo, c.hi)))
    assert {k.name: (k.launches, k.busy_ns) for k in g.kernels} == expect
    if EXPECT[name].frames != "graph":
        warm = t.get("warmup_launches") or {}
        assert {n: v[0] for n, v in expect.items()} == {n: k - (0 if kept_warm_up else warm.get(n, 0)) for n, k in t["launches"].items()}


@pytest.mark.parametrize("name", NAMES)
def test_every_gap_and_its_cause(name: str) -> None:
    c = case(name)
    gp = c.g.gaps
    got = [(int(gp.starts_ns[i]), int(gp.starts_ns[i] + gp.lengths_ns[i]), gp.cause_of(i), bool(gp.setup_mask()[i]),
            bool(gp.between[i]) if gp.between is not None else False) for i in range(len(gp))]  # fmt: skip
    assert got == [(x.start, x.end, x.cause, x.setup, x.between) for x in c.gaps]
    for i, x in enumerate(c.gaps):  # the time per state, averaged over the threads that count (rounded to the ns)
        parts = {k: v for k, v in gp.gap_json(i)["parts_ns"].items()}
        assert parts == {k: round(v / x.threads) for k, v in x.parts.items() if round(v / x.threads)}, (name, i)
        assert sum(parts.values()) <= x.end - x.start + len(parts), (name, i)


@pytest.mark.parametrize("name", NAMES)
def test_launching_threads(name: str) -> None:
    c = case(name)
    setup = [(x.start, x.end) for x in c.gaps if x.setup]
    ref = ref_threads(c.raw, c.truth["pid"], [(c.lo, c.hi)], setup)
    got = {t.thread.tid: t for t in c.g.host.threads}
    assert set(got) == set(ref)
    for tid, r in ref.items():
        t = got[tid]
        assert t.thread.name == c.raw.thread_names.get(tid)
        assert (t.launch_calls, t.copy_calls, t.wait_calls, t.other_calls) == (r.calls["launch"], r.calls["copy"], r.calls["wait"], r.calls["other"])
        assert (t.launch_ns, t.copy_ns, t.wait_ns, t.other_ns) == (r.ns["launch"], r.ns["copy"], r.ns["wait"], r.ns["other"])
        assert (t.busy_ns, t.active_ns) == (r.busy, r.active)


@pytest.mark.parametrize("name", NAMES)
def test_pacing(name: str) -> None:
    c = case(name)
    ends = sorted(e for _, e in frame_events(c))
    if len(ends) < 3:
        assert c.g.pacing is None
        return
    d = [b - a for a, b in zip(ends, ends[1:])]
    p = c.g.pacing
    assert (p.events, p.median_ns, p.p99_ns, p.max_ns) == (len(ends), median(d), nearest_rank(d, 0.99), max(d))


@pytest.mark.parametrize("name", NAMES)
def test_what_binds(name: str) -> None:
    c = case(name)
    pid = c.truth["pid"]
    bars = {e: total(clip(union(c.raw.intervals(e)), c.lo, c.hi))
            for e in {r.engine for r in c.raw.recs if r.pid == pid}}  # fmt: skip
    setup = [(x.start, x.end) for x in c.gaps if x.setup]
    threads = ref_threads(c.raw, pid, [(c.lo, c.hi)], setup)
    # a thread's bar is its work: its busy time less the time the GPU held its launches and copies
    held = path_oracle.held_calls(path_oracle.read(ZOO / f"zoo_{name}.sqlite"), pid, c.g.device, [(c.lo, c.hi)])
    blocked = path_oracle.blocked_by_thread(held, set(threads))
    work = {t: x.busy - min(x.busy, sum(blocked[t].values())) for t, x in threads.items()}
    top = max(bars.values())
    host = max(threads.values(), key=lambda x: work[x.tid])
    r = c.g.roofline
    if name == "device_graph_node":  # the work is not in the trace: no rate is given
        assert r.fps is None and r.us_per_frame is None
    if work[host.tid] > top:
        assert (r.engine, r.thread.tid, r.busy_ns) == ("host", host.tid, work[host.tid])
    else:
        order = ["kernel", "graph", "h2d", "d2h", "d2d", "p2p", "memset"]  # ties go to the engine listed first
        assert (r.engine, r.busy_ns) == (min((e for e, v in bars.items() if v == top), key=order.index), top)


# --------------------------------------------------------------------------- each trace's own points


def test_no_nvtx_mid_loop_gap_is_one_module_load_with_its_allocation() -> None:
    c = case("no_nvtx")
    g, t = c.g, c.truth
    # one gap in the window: at frame 500, between the last zoo_calib_jit and the first zoo_calib_jit2
    jit = [r for r in c.raw.of("kernel") if r.name == "zoo_calib_jit"]
    jit2 = [r for r in c.raw.of("kernel") if r.name == "zoo_calib_jit2"]
    assert len(jit) == len(jit2) == t["switch_frame"] == 500
    (gap,) = c.gaps
    assert max(r.end for r in jit) <= gap.start < gap.end <= min(r.start for r in jit2)
    assert len(g.gaps) == 1 and g.gaps.cause_of(0) == "module_load" and g.gaps.api[0] == "cuModuleLoadData"
    assert bool(g.gaps.setup_mask()[0])
    # its alloc part: the 2 GiB cudaMalloc and cudaFree the program made there (ZOO big_alloc_free)
    alloc = [x for x in c.raw.calls if x.name in ("cudaMalloc", "cudaFree") and gap.start < x.end and x.start < gap.end]
    assert [x.name for x in alloc] == ["cudaMalloc", "cudaFree"] and t["big_alloc_bytes"] == 2 << 30
    assert g.gaps.gap_json(0)["parts_ns"]["alloc"] == sum(min(x.end, gap.end) - max(x.start, gap.start) for x in alloc)
    # the window starts at the loop's first H2D: the set-up H2D and the first compile are cut off
    h2d = c.raw.of("h2d")
    assert g.window.start_ns == h2d[1].start and "1 separating gap (1 module_load) and 1 GPU record" in g.window.cut_note
    assert g.frames.count == t["frames"] and "zoo_calib_jit, zoo_calib_jit2" in g.frames.source
    c_ = codes(g)
    assert "setup_gaps" in c_ and "serialized_one_stream" in c_ and "gpu_starvation" not in c_
    assert g.pacing.stall_cause == "module_load" and g.pacing.stall_api == "cuModuleLoadData"


def _range(c: Case, text: str, n: int | None = None) -> tuple[int, int]:
    rows = [(s, e) for tx, dom, s, e in c.raw.ranges if tx == text and dom == "zoo_daq"]
    return rows[n - 1] if n else rows[0]


def test_nvtx_domain_windows_and_batches() -> None:
    c = case("nvtx_domain")
    t = c.truth
    # auto: the warm-up (H2D + zoo_calib) is cut off at the 50 ms host sleep
    assert "1 separating gap (1 host) and 2 GPU records" in c.g.window.cut_note
    sleep = next(p for p in t["phases"] if p["what"] == "sleep")
    gap = max(ref_gaps(c.raw, t["pid"], min(r.start for r in c.raw.recs), c.hi), key=lambda x: x.end - x.start)
    assert gap.end == c.lo and gap.cause == "host"
    assert (sleep["end_ns"] - sleep["start_ns"]) / 1e6 == pytest.approx(t["sleep_ms"], rel=0.01)
    assert gap.end - gap.start >= sleep["end_ns"] - sleep["start_ns"]  # the GPU idles through the whole sleep
    path = ZOO / "zoo_nvtx_domain.sqlite"
    loop = analyze_trace(path, window="range:event loop@zoo_daq", frames_spec="kernel:zoo_calib").primary
    assert (loop.window.start_ns, loop.window.end_ns) == _range(c, "event loop") and loop.frames.count == t["frames"]
    b3 = analyze_trace(path, window="range:batch@zoo_daq#3", frames_spec="kernel:zoo_calib").primary
    s3, e3 = _range(c, "batch", 3)
    assert (b3.window.start_ns, b3.window.end_ns) == (s3, e3)
    assert b3.frames.count == t["batch"] == len([r for r in c.raw.of("kernel") if s3 <= r.start < e3])
    # ten batches: the frames and the pacing's events, with the intervals between the batches' ends
    batches = analyze_trace(path, frames_spec="range:batch@zoo_daq").primary
    ends = sorted(e for tx, dom, _, e in c.raw.ranges if tx == "batch")
    assert batches.frames.count == batches.pacing.events == t["batches"] == len(ends) == 10
    d = [b - a for a, b in zip(ends, ends[1:])]
    assert (batches.pacing.median_ns, batches.pacing.max_ns) == (median(d), max(d))


@pytest.mark.parametrize("name", ["nvtx_domain_profilerapi", "nvtx_domain_nvtxrange"])
def test_a_capture_holds_the_loop_without_set_up(name: str) -> None:
    c = case(name)
    t = c.truth
    assert c.g.window.cut_note is None and len(c.gaps) == len(c.g.gaps) == 0
    kernels = c.raw.of("kernel")
    assert len(kernels) == t["in_profiler_range"]["launches"]["zoo_calib"] == c.g.frames.count
    assert len(c.raw.of("h2d")) == t["in_profiler_range"]["h2d"] and len(c.raw.of("d2h")) == t["in_profiler_range"]["d2h"]
    assert "setup_gaps" not in codes(c.g)
    batches = analyze_trace(ZOO / f"zoo_{name}.sqlite", frames_spec="range:batch@zoo_daq").primary
    assert batches.frames.count == t["batches"]


@pytest.mark.parametrize("name", ["multi_kernel", "multi_kernel_ratebug"])
def test_multi_kernel_four_streams_and_its_warm_up_frame(name: str) -> None:
    c = case(name)
    g, t = c.g, c.truth
    assert {k.name: k.launches for k in g.kernels} == t["launches"] == {"zoo_calib": 601, "zoo_reduce": 601}
    got = {(x.engine, x.size_class): x.count for x in g.copies}
    assert got == {("h2d", "64 kB-1 MB"): t["copies"]["h2d"], ("d2h", "< 4 kB"): t["copies"]["d2h"],
                   ("memset", "< 4 kB"): t["copies"]["memset"]}  # fmt: skip
    assert t["copies"] == {"h2d": 601, "d2h": 600, "memset": 601}
    # streams: each carries 1 % or more of every engine's time in the window (raw rows, by stream)
    for engine in ("kernel", "h2d", "d2h", "memset"):
        per: dict[int, int] = {}
        for r in c.raw.of(engine):
            per[r.stream] = per.get(r.stream, 0) + r.end - r.start
        working = [s for s, v in per.items() if v >= 0.01 * sum(per.values())]
        assert g.busy.engine_streams[engine] == len(working) == t["streams"], engine
    assert g.busy.n_streams == t["streams"] == 4
    assert [x.thread.tid for x in g.host.threads] == [t["pid"]]  # one launching thread: the main one
    # the lazy load at the warm-up's first launch is a set-up gap inside the window
    (gap,) = c.gaps
    assert gap.cause == "module_load" and gap.setup
    assert any(x.name == "cuLibraryLoadData" and x.start < gap.end and x.end > gap.start for x in c.raw.calls)


def test_threads_two_threads_two_streams() -> None:
    c = case("threads_t2s2")
    g, t = c.g, c.truth
    per = {p["tid"]: p for p in t["per_thread"]}
    got = {x.thread.tid: x for x in g.host.threads}
    assert set(got) == set(per)  # the main thread launches nothing in the loop
    for tid, x in got.items():
        assert x.launch_calls == per[tid]["frames"] == 500
        assert x.copy_calls == 2 * per[tid]["frames"]  # an H2D and a D2H per frame
        assert x.wait_calls == per[tid]["stream_syncs"]
        assert x.thread.name is None and tid not in c.raw.thread_names  # named after nsys read the names
    # the hand-over (the main thread's warm-up stopped, the workers not started yet) cuts the warm-up
    assert "1 separating gap (1 hand-over) and 2 GPU records" in g.window.cut_note
    assert g.busy.engines["h2d"].count == t["copies"]["h2d"] - 1


def test_threads_one_thread_four_streams() -> None:
    c = case("threads_t1s4")
    g, t = c.g, c.truth
    (worker,) = t["per_thread"]
    (x,) = g.host.threads
    assert x.thread.tid == worker["tid"] == 1684 and x.thread.name is None and 1684 not in c.raw.thread_names
    assert (x.launch_calls, x.copy_calls, x.wait_calls) == (worker["frames"], 2 * worker["frames"], worker["stream_syncs"])
    assert (x.launch_calls, x.copy_calls, x.wait_calls) == (1000, 2000, 40)
    # the main thread's warm-up kernel ends while its launch call returns: the GPU idles after the
    # warm-up with no thread feeding it (a hand-over), though the main thread was still in its call
    assert "1 separating gap (1 hand-over) and 2 GPU records" in g.window.cut_note
    assert g.busy.engine_streams["h2d"] == t["streams"] == 4
    # nsys's own overhead on the worker's first call: a profiler gap, set-up, inside the window
    (gap,) = c.gaps
    assert gap.cause == "profiler" and gap.setup
    prof = union([(s, e) for s, e, tid, _ in c.raw.overhead if tid == worker["tid"]])
    assert c.g.gaps.gap_json(0)["parts_ns"]["profiler"] == total(clip(prof, gap.start, gap.end)) <= gap.end - gap.start


def test_device_graph_at_node_level_says_the_work_is_not_traced() -> None:
    c = case("device_graph_node")
    g = c.g
    assert codes(g) == ["work_not_traced"]
    assert g.throughput.efficiency is None and g.roofline.fps is None
    longest = max(c.gaps, key=lambda x: x.end - x.start)
    i = g.gaps.longest()
    assert g.gaps.cause_of(i) == longest.cause == "sync" and g.gaps.api[i] == "cudaStreamSynchronize"
    # the host waited in one cudaStreamSynchronize while the device relaunched the graph 1,999 times
    waits = [x for x in c.raw.calls if x.name == "cudaStreamSynchronize" and x.start < longest.end and x.end > longest.start]
    (w,) = waits
    waited = min(w.end, longest.end) - max(w.start, longest.start)
    assert w.start <= longest.start and waited >= 0.99 * (longest.end - longest.start)  # then the read-back's cudaMemcpy
    copies = [x for x in c.raw.calls if x.name == "cudaMemcpy" and x.start < longest.end and x.end > longest.start]
    read_back = sum(min(x.end, longest.end) - max(x.start, longest.start) for x in copies)
    assert g.gaps.gap_json(i)["parts_ns"]["sync"] == waited + read_back  # a synchronous copy waits too
    assert g.work_not_traced.waited_ns == longest.end - longest.start
    assert c.truth["graph"]["device_graph_launches"] == c.truth["events"] - 1


def test_device_graph_at_graph_level_binds_on_the_graph() -> None:
    c = case("device_graph_graph")
    g = c.g
    graph = total(clip(union(c.raw.intervals("graph")), c.lo, c.hi))
    assert g.roofline.engine == "graph" and g.busy.engines["graph"].busy_ns == graph
    assert graph / (c.hi - c.lo) > 0.99  # busy all along: the device relaunches without the host
    assert "graph_level" in codes(g) and "compute_binds" in codes(g)
    assert g.frames.count == len(c.raw.of("graph")) == c.truth["graph"]["executions"]


def test_device_graph_host_launched_frames_are_the_graph_launches() -> None:
    for name in ("device_graph_host_node", "device_graph_host_graph"):
        c = case(name)
        launches = [x for x in c.raw.calls if x.name == "cudaGraphLaunch"]
        assert c.g.frames.count == len(launches) == c.truth["graph"]["host_graph_launches"] == 2000, name
    node = case("device_graph_host_node").g
    assert node.roofline.engine == "kernel" and node.pacing.events == 2000


def test_host_bound_binds_on_the_host() -> None:
    c = case("host_bound")
    g, t = c.g, c.truth
    assert g.roofline.engine == "host" and g.roofline.thread.tid == t["pid"] and t["binds"] == "host"
    c_ = codes(g)
    assert "host_binds" in c_ and "low_utilization" in c_
    assert not {"serialized_one_stream", "serialized_streams", "overlap"} & set(c_)
    x = g.host.busiest
    # the host code between the CUDA calls holds at least the program's spin: 40 µs a frame
    assert x.busy_ns - (x.launch_ns + x.copy_ns + x.other_ns) >= t["frames"] * t["host_spin_us_per_frame"] * 1000
    assert "It waits for the GPU 1 % of its time" in next(f.message for f in g.findings if f.code == "host_binds")


def test_zoo_ground_truth_matches_the_rows() -> None:
    """The ZOO lines against the traces: the counts the programs made are the rows nsys wrote (but
    for the device-launched graph at node level, whose relaunches nsys does not write)."""
    for name in NAMES:
        c = case(name)
        t = c.truth
        if name in ("nvtx_domain_profilerapi", "nvtx_domain_nvtxrange"):
            want = dict(t["in_profiler_range"]["launches"])
        elif c.raw.of("graph") or name == "device_graph_node":
            want = {}
        else:
            want = dict(t["launches"])
        got: dict[str, int] = {}
        for r in c.raw.of("kernel"):
            got[r.name] = got.get(r.name, 0) + 1
        if name == "device_graph_node":
            assert sum(got.values()) < 2 * t["events"]
        else:
            assert got == want, name
        if c.raw.of("graph"):
            assert len(c.raw.of("graph")) == t["graph"]["executions"]


def test_clip_set_and_the_window_figures_agree() -> None:
    # the window's idle time is its length less the union of every record in it
    for name in NAMES:
        c = case(name)
        busy = union([(r.start, r.end) for r in c.raw.recs if r.pid == c.truth["pid"]])
        assert c.g.busy.any_busy_ns == total(clip_set(busy, [(c.lo, c.hi)])), name
        assert c.g.busy.idle_ns == (c.hi - c.lo) - c.g.busy.any_busy_ns


def test_a_wrong_self_reported_rate_shows_against_the_trace() -> None:
    """multi_kernel --rate-bug prints 10x its true H2D GB/s. The trace's H2D bytes over the window agree
    with the true figure within 5 % (the window runs from the warm-up's first record to the last D2H,
    the program times its loop alone with std::chrono), and are a tenth of the reported one."""
    c = case("multi_kernel_ratebug")
    t = c.truth
    h2d = c.g.busy.engines["h2d"]
    assert h2d.bytes == sum(r.bytes for r in c.raw.of("h2d")) == t["copies"]["h2d"] * t["h2d_bytes_per_frame"]
    gbps = h2d.bytes / c.g.window.length_ns
    assert gbps == pytest.approx(t["true_throughput_gbps"], rel=0.05)
    assert t["reported"]["throughput_gbps"] / gbps == pytest.approx(t["rate_bug_factor"], rel=0.05)
