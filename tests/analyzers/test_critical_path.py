"""Blocked time and the critical path on hand-made traces (docs/analyze.md, "Blocked time and the
critical path"). Each trace is small enough to walk by hand: the comments give the walk step by step,
and the test asserts the exact segments (start, end, resource), the shares, and each launching thread's
work / blocked / wait split. Times are µs (U ns), so that HELD_MIN_NS and RETURN_NS (20 µs) apply as on
a real trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.analyzers import analysis as A
from clusterbench.analyzers import held as H
from clusterbench.analyzers import links as L
from clusterbench.analyzers.critical_path import ENGINE0, HOST0, IDLE, LAUNCH
from clusterbench.io.nsys import schema as S

from fake_nsys import Api, Copy, EventRecord, Graph, Kernel, Range, Sync, Trace, build

U = 1000  # ns per µs
PID = 100


def run(tmp_path: Path, t: Trace, **options):
    path = build(tmp_path / "t.sqlite", t)
    req = A.request(**options)
    cache: dict = {}
    data = A.load_trace(path, req=req, cache=cache)
    a = A.analyze(data, req=req, cache=cache)
    return data, a.primary


def segments(data, g) -> list[tuple[int, int, str]]:
    """The walk's segments as (start µs, end µs, resource), merged where one resource continues."""
    ws, we, wr, _ = A.critical_path_walk(data, g).segments()
    threads = data.api.threads
    out: list[tuple[int, int, str]] = []
    for s, e, r in zip(ws.tolist(), we.tolist(), wr.tolist()):
        name = ("idle" if r == IDLE else "launch" if r == LAUNCH else S.ENGINES[r - ENGINE0] if r < HOST0
                else f"host:{threads[r - HOST0].tid}")  # fmt: skip
        if out and out[-1][2] == name and out[-1][1] == s / U:
            out[-1] = (out[-1][0], e / U, name)
        else:
            out.append((s / U, e / U, name))
    return [(int(a) if a == int(a) else a, int(b) if b == int(b) else b, n) for a, b, n in out]


def shares(g) -> dict[str, float]:
    return g.critical_path.to_json()["shares"]


def ns(g) -> dict[str, int]:
    return g.critical_path.to_json()["ns"]


def thread(g, tid: int):
    return next(t for t in g.host.threads if t.thread.tid == tid)


def api(start: float, end: float, name: str, corr: int, tid: int | None = None) -> Api:
    return Api(int(start * U), int(end * U), name, tid=tid, corr=corr)


def kernel(start: float, end: float, corr: int, stream: int = 7, name: str = "k") -> Kernel:
    return Kernel(int(start * U), int(end * U), stream=stream, name=name, corr=corr)


def copy(start: float, end: float, kind: int, corr: int, stream: int = 7, pageable: bool = False, nbytes: int = 1_000_000) -> Copy:
    return Copy(int(start * U), int(end * U), kind, nbytes, stream=stream, pageable=pageable, corr=corr)


def stream_sync(start: float, end: float, corr: int, stream: int = 7, tid: int | None = None) -> tuple[Api, Sync]:
    return api(start, end, "cudaStreamSynchronize_v3020", corr, tid), Sync(int(start * U), int(end * U), stream=stream, corr=corr)


# --------------------------------------------------------------------------- a sync every frame, host work between


def _turns(ranges: bool = False) -> Trace:
    """Two frames, 100 µs apart, on stream 7: H2D, kernel, D2H issued at 0-15 µs, a stream sync until the
    D2H has ended (+6 µs), then 30 µs of host code. Rows: H2D [10,30], kernel [32,52], D2H [54,64]."""
    t = Trace()
    for f in range(2):
        o, c = 100 * f, 10 * f
        t.api += [api(o + 0, o + 5, "cudaMemcpyAsync_v3020", c + 1), api(o + 6, o + 10, "cudaLaunchKernel_v7000", c + 2),
                  api(o + 11, o + 15, "cudaMemcpyAsync_v3020", c + 3)]  # fmt: skip
        a, y = stream_sync(o + 16, o + 70, c + 4)
        t.api.append(a)
        t.syncs.append(y)
        t.copies += [copy(o + 10, o + 30, 1, c + 1), copy(o + 54, o + 64, 2, c + 3)]
        t.kernels.append(kernel(o + 32, o + 52, c + 2))
        if ranges:
            t.ranges.append(Range(int((o + 10) * U), int((o + 70) * U), "pass"))
    return t


def test_a_sync_every_frame_with_host_work_between(tmp_path: Path) -> None:
    # window: the span [10, 164]. From the last D2H [154,164] back: its stream predecessor (the kernel,
    # ended 152) released after its launch call (111): idle [152,154]; the kernel [132,152] after the
    # H2D (130): idle [130,132]; the H2D [110,130] waited for its launch call at 100 (the D2H before it
    # ended at 64): launch [100,110]; thread 100 at 100: its last held call is frame 0's sync, released
    # by the D2H at 64: host [64,100]; then frame 0 the same way down to the window start.
    data, g = run(tmp_path, _turns(), window="span", frames=2)
    assert segments(data, g) == [
        (10, 30, "h2d"), (30, 32, "idle"), (32, 52, "kernel"), (52, 54, "idle"), (54, 64, "d2h"), (64, 100, "host:100"),
        (100, 110, "launch"), (110, 130, "h2d"), (130, 132, "idle"), (132, 152, "kernel"), (152, 154, "idle"), (154, 164, "d2h"),
    ]  # fmt: skip
    assert ns(g) == {"h2d": 40 * U, "kernel": 40 * U, "host": 36 * U, "d2h": 20 * U, "launch": 10 * U, "idle": 8 * U}
    assert sum(shares(g).values()) == pytest.approx(1.0) and g.critical_path.total_ns == 154 * U
    # the thread: active [10,164] (its first call touching the window is the launch at 6-10: it ends at 10
    # and touches nothing; the D2H issue at 11 is the first inside), waits [16,70] and [116,164]
    t = thread(g, PID)
    assert (t.wait_ns, t.blocked_ns) == ((54 + 48) * U, 0)
    assert t.work_ns + t.blocked_ns + t.wait_ns == t.active_ns


def test_a_window_of_two_intervals(tmp_path: Path) -> None:
    # two pass ranges [10,70] and [110,170]: each walked on its own. Interval 1 ends at 70, where the
    # sync returns (a launching thread's call ends last): host [64,70] back to the D2H that released it,
    # then the frame's rows to 10 (the H2D's launch delay [0,10] lies before the window). Interval 2 likewise.
    data, g = run(tmp_path, _turns(ranges=True), window="range:pass", frames=2)
    assert segments(data, g) == [
        (10, 30, "h2d"), (30, 32, "idle"), (32, 52, "kernel"), (52, 54, "idle"), (54, 64, "d2h"), (64, 70, "host:100"),
        (110, 130, "h2d"), (130, 132, "idle"), (132, 152, "kernel"), (152, 154, "idle"), (154, 164, "d2h"), (164, 170, "host:100"),
    ]  # fmt: skip
    assert ns(g) == {"h2d": 40 * U, "kernel": 40 * U, "d2h": 20 * U, "host": 12 * U, "idle": 8 * U}
    assert g.critical_path.total_ns == g.window.length_ns == 120 * U


# --------------------------------------------------------------------------- a launch into a full queue


def test_a_launch_into_a_full_queue(tmp_path: Path) -> None:
    # 601 launches, one a µs (0.5 µs each), of 10 µs kernels that run back to back from 100 µs: kernel j
    # runs [100+10j, 110+10j]. Launch 600 starts at 600 µs with kernels 50..599 issued and not ended (550
    # >= QUEUE_FULL_DEPTH) and returns at 1,115 µs, 5 µs after kernel 100 ended (1,110): held by it,
    # blocked for the GPU's busy time in [600, 1110] = 510 µs: queue_full.
    t = Trace()
    for j in range(601):
        end = 600 + 515 if j == 600 else j + 0.5
        t.api.append(api(j, end, "cudaLaunchKernel_v7000", 1 + j))
        t.kernels.append(kernel(100 + 10 * j, 110 + 10 * j, 1 + j))
    data, g = run(tmp_path, t, window="span", frames=601)
    x = thread(g, PID)
    assert x.blocked_ns == 510 * U and x.blocked_by_cause == (("queue_full", 510 * U),) and x.held_calls == 1
    (b,) = g.host.blocked
    assert (b.name, b.cause, b.calls, b.blocked_ns, b.max_depth) == ("cudaLaunchKernel", "queue_full", 1, 510 * U, 550)
    links = L.build(A.model_mod.build(data, PID, 0))
    # the calls read are those touching the window (from 100 µs): launch 600, and launch 199 at 199 µs,
    # when kernels 0..198 were issued and the 9 of them ending by 199 (110 + 10j <= 199) had ended
    at = {int(c): k for k, c in enumerate(links.ccorr.tolist())}
    ctx, own = links.queue_depth([at[601], at[200]])
    assert ctx.tolist() == own.tolist() == [550, 190]
    # work: the thread's active time in the window [100, 1115] less the blocked time
    assert x.work_ns == (1115 - 100 - 510) * U and x.work_ns + x.blocked_ns + x.wait_ns == x.active_ns
    # the path: every kernel back to back from 100 to 6,110 µs
    assert segments(data, g) == [(100, 6110, "kernel")] and shares(g) == {"kernel": 1.0}
    assert "blocked_launch" in [f.code for f in g.findings]


# --------------------------------------------------------------------------- a pageable copy


def test_a_pageable_copy_holds_the_thread(tmp_path: Path) -> None:
    # a pageable H2D issued at 0 returns at 120, 10 µs after its copy [10,110] ended: held by its own
    # row, blocked 100 µs (the GPU's busy time in [0,110]): pageable. Then a launch [125,130] of a
    # kernel [135,175]. Path from the kernel: its launch (125) came after the copy ended (110): launch
    # [125,135]; thread at 125: its last held call is the copy, released at 110: host [110,125]; the
    # copy [10,110] (its launch delay [0,10] lies before the window).
    t = Trace(api=[api(0, 120, "cudaMemcpyAsync_v3020", 1), api(125, 130, "cudaLaunchKernel_v7000", 2)],
              copies=[copy(10, 110, 1, 1, pageable=True, nbytes=4_000_000)], kernels=[kernel(135, 175, 2)])  # fmt: skip
    data, g = run(tmp_path, t, window="span", frames=1)
    assert segments(data, g) == [(10, 110, "h2d"), (110, 125, "host:100"), (125, 135, "launch"), (135, 175, "kernel")]
    x = thread(g, PID)
    assert (x.active_ns, x.blocked_ns, x.work_ns, x.wait_ns) == (120 * U, 100 * U, 20 * U, 0)
    (b,) = g.host.blocked
    assert (b.name, b.cause, b.bytes, b.blocked_ns, b.call_ns) == ("cudaMemcpyAsync", "pageable", 4_000_000, 100 * U, 110 * U)
    note = next(f.message for f in g.findings if f.code == "pageable_blocks")
    assert "4.00 MB" in note and "for 100 µs (61 % of the window)" in note


# --------------------------------------------------------------------------- a graph launch that returns with its graph


def test_a_graph_launch_that_returns_with_its_graph(tmp_path: Path) -> None:
    # graph-level: cudaGraphLaunch [0,60] and its execution [5,55]; cudaGraphLaunch [65,125] and [70,120].
    # Each launch is held by its own graph (blocked 50 µs each: graph). Path: graph 2 [70,120] after its
    # launch at 65 (graph 1 ended at 55): launch [65,70]; thread at 65: the last held call is launch 1,
    # released by graph 1 at 55: host [55,65]; graph 1 [5,55].
    t = Trace(api=[api(0, 60, "cudaGraphLaunch_v10000", 1), api(65, 125, "cudaGraphLaunch_v10000", 2)],
              graphs=[Graph(5 * U, 55 * U, corr=1), Graph(70 * U, 120 * U, corr=2)])  # fmt: skip
    data, g = run(tmp_path, t, window="span", frames=2)
    assert segments(data, g) == [(5, 55, "graph"), (55, 65, "host:100"), (65, 70, "launch"), (70, 120, "graph")]
    x = thread(g, PID)
    assert x.blocked_by_cause == (("graph", 100 * U),)
    assert x.active_ns == 115 * U and x.work_ns == 15 * U  # [5,120] less the two graphs' 50 µs each
    # the host bar is work (15 µs): the graph (100 µs) binds
    assert g.roofline.engine == "graph"


# --------------------------------------------------------------------------- two threads, one per stream


def test_two_threads_one_per_stream(tmp_path: Path) -> None:
    # thread 101 (B, stream 8): launch [0,2] of B0 [5,15]; sync [3,18] (held by B0); host; launch [20,25]
    # of B1 [30,80]; sync [26,85]. Thread 102 (A, stream 7): cudaDeviceSynchronize [40,84], held by B1
    # (the latest-ending row issued before it); host; launch [100,105] of A1 [110,150]; sync [106,155].
    # Path from A1 [110,150]: launch [100,110]; thread A at 100: its device sync, released by B1 at 80:
    # host:102 [80,100]; B1 [30,80]; its launch at 20 (B0 ended at 15): launch [20,30]; thread B at 20:
    # its sync released by B0 at 15: host:101 [15,20]; B0 [5,15].
    A_, B_ = 102, 101
    s1, y1 = stream_sync(3, 18, 2, stream=8, tid=B_)
    s2, y2 = stream_sync(26, 85, 4, stream=8, tid=B_)
    s3, y3 = stream_sync(106, 155, 7, stream=7, tid=A_)
    t = Trace(api=[api(0, 2, "cudaLaunchKernel_v7000", 1, B_), s1, api(20, 25, "cudaLaunchKernel_v7000", 3, B_), s2,
                   api(40, 84, "cudaDeviceSynchronize_v3020", 5, A_), api(100, 105, "cudaLaunchKernel_v7000", 6, A_), s3],
              syncs=[y1, y2, y3],
              kernels=[kernel(5, 15, 1, stream=8), kernel(30, 80, 3, stream=8), kernel(110, 150, 6, stream=7)],
              thread_names={(PID, A_): "feedA", (PID, B_): "feedB"})  # fmt: skip
    data, g = run(tmp_path, t, window="span", frames=3)
    assert segments(data, g) == [(5, 15, "kernel"), (15, 20, f"host:{B_}"), (20, 30, "launch"), (30, 80, "kernel"),
                                 (80, 100, f"host:{A_}"), (100, 110, "launch"), (110, 150, "kernel")]  # fmt: skip
    assert ns(g) == {"kernel": 100 * U, f"host:{A_}": 20 * U, "launch": 20 * U, f"host:{B_}": 5 * U}
    assert sum(shares(g).values()) == pytest.approx(1.0)
    threads = g.critical_path.to_json()["threads"]
    assert {(x["tid"], x["name"], x["ns"]) for x in threads} == {(A_, "feedA", 20 * U), (B_, "feedB", 5 * U)}
    a, b = thread(g, A_), thread(g, B_)
    assert (a.wait_ns, a.blocked_ns) == ((84 - 40 + 150 - 106) * U, 0)  # the window ends at 150
    assert (b.wait_ns, b.blocked_ns) == ((18 - 5 + 85 - 26) * U, 0)


# --------------------------------------------------------------------------- an event between streams


def test_an_event_record_and_wait_between_streams(tmp_path: Path) -> None:
    # stream 7: an H2D [10,50] (issued [0,5]); cudaEventRecord(E1) on stream 7 after it; cudaStreamWaitEvent
    # (stream 8, E1); a kernel on stream 8 issued at [12,15] runs [52,90]. The kernel's event source (the
    # H2D, released at 50) comes after its launch (12): idle [50,52], then the H2D.
    rec = api(6, 8, "cudaEventRecord_v3020", 2)
    wait = api(9, 11, "cudaStreamWaitEvent_v3020", 3)
    t = Trace(api=[api(0, 5, "cudaMemcpyAsync_v3020", 1), rec, wait, api(12, 15, "cudaLaunchKernel_v7000", 4),
                   api(16, 95, "cudaDeviceSynchronize_v3020", 5)],
              copies=[copy(10, 50, 1, 1)], kernels=[kernel(52, 90, 4, stream=8)],
              events=[EventRecord(stream=7, event=1, corr=2)],
              syncs=[Sync(9 * U, 11 * U, stream=8, sync_type=2, corr=3, event=1)])  # fmt: skip
    data, g = run(tmp_path, t, window="span", frames=1)
    assert segments(data, g) == [(10, 50, "h2d"), (50, 52, "idle"), (52, 90, "kernel")]
    # without the wait, the kernel follows its launch call: launch [12,52], then the thread back to the
    # window start (it made no held call): host [10,12]; the H2D is off the path
    t.syncs, t.api = [], [a for a in t.api if a is not wait]
    (tmp_path / "t.sqlite").unlink()
    data, g = run(tmp_path, t, window="span", frames=1)
    assert segments(data, g) == [(10, 12, "host:100"), (12, 52, "launch"), (52, 90, "kernel")]


def test_an_event_synchronize_waits_for_the_recorded_stream(tmp_path: Path) -> None:
    # cudaEventSynchronize(E1) [20,70] after cudaEventRecord(E1) on stream 8 behind a kernel [10,60]:
    # held by that kernel (ends 60 inside the wait); a later kernel on stream 7 [30,65] is not awaited.
    t = Trace(api=[api(0, 5, "cudaLaunchKernel_v7000", 1), api(6, 8, "cudaEventRecord_v3020", 2),
                   api(9, 12, "cudaLaunchKernel_v7000", 3), api(20, 70, "cudaEventSynchronize_v3020", 4)],
              kernels=[kernel(10, 60, 1, stream=8), kernel(30, 65, 3, stream=7)],
              events=[EventRecord(stream=8, event=1, corr=2)],
              syncs=[Sync(20 * U, 70 * U, stream=4294967295, sync_type=1, corr=4, event=1)])  # fmt: skip
    data, g = run(tmp_path, t, window="span", frames=1)
    links = L.build(A.model_mod.build(data, PID, 0))
    held = H.find(links, g.window.intervals, data.syncs, data.event_records)
    (i,) = [k for k, c in enumerate(held.call.tolist()) if links.names[links.cname[c]] == "cudaEventSynchronize"]
    assert links.corr[held.row[i]] == 1 and bool(held.wait[i])


# --------------------------------------------------------------------------- device-launched work


def test_a_device_launched_row_has_no_launch_call(tmp_path: Path) -> None:
    # graph-level: the host launches a graph [0,5] -> G1 [10,30] on stream 7; it relaunches itself from
    # the device: G2 [30,50] and G3 [50,70] on the device's own stream (99), correlation id 0. The host's
    # stream sync [6,75] returns when G3 ends: device-launched rows that end during a wait are awaited,
    # so it is held by G3. Then a synchronous D2H cudaMemcpy [76,90] of a copy [80,85].
    # Path from the D2H [80,85]: its launch (76) after the graph ended: launch [76,80]; thread at 76: the
    # sync, released by G3 at 70: host [70,76]; G3 [50,70] after G2 on its stream; G2 [30,50], the first
    # row of its stream with no launch call: the GPU's latest row ending by its start, G1 (30); G1 [10,30].
    s, y = stream_sync(6, 75, 2)
    t = Trace(api=[api(0, 5, "cudaGraphLaunch_v10000", 1), s, api(76, 90, "cudaMemcpy_v3020", 3)], syncs=[y],
              graphs=[Graph(10 * U, 30 * U, corr=1), Graph(30 * U, 50 * U, stream=99, corr=0), Graph(50 * U, 70 * U, stream=99, corr=0)],
              copies=[copy(80, 85, 2, 3)])  # fmt: skip
    data, g = run(tmp_path, t, window="span", frames=3)
    assert segments(data, g) == [(10, 70, "graph"), (70, 76, "host:100"), (76, 80, "launch"), (80, 85, "d2h")]
    links = L.build(A.model_mod.build(data, PID, 0))
    assert int(links.device_launched.sum()) == 2


def test_many_intervals_walk_each_on_its_own(tmp_path: Path) -> None:
    # 40 frames of the sync-every-frame loop, one NVTX range each: the walks of all 40 intervals step
    # together; each interval's parts equal those of a window of that range alone (walked alone)
    t = Trace()
    for f in range(40):
        o, c = 100 * f, 10 * f
        t.api += [api(o + 0, o + 5, "cudaMemcpyAsync_v3020", c + 1), api(o + 6, o + 10, "cudaLaunchKernel_v7000", c + 2),
                  api(o + 11, o + 15, "cudaMemcpyAsync_v3020", c + 3)]  # fmt: skip
        a, y = stream_sync(o + 16, o + 70 + f % 3, c + 4)
        t.api.append(a)
        t.syncs.append(y)
        t.copies += [copy(o + 10, o + 30 + f % 5, 1, c + 1), copy(o + 54 + f % 5, o + 64 + f % 5, 2, c + 3)]
        t.kernels.append(kernel(o + 32 + f % 5, o + 52 + f % 5, c + 2))
        t.ranges.append(Range(int((o + 8) * U), int((o + 72) * U), "pass"))
    path = build(tmp_path / "m.sqlite", t)
    whole = A.analyze_trace(path, window="range:pass", frames=40).primary
    assert whole.window.starts_ns.size == 40
    summed: dict[str, int] = {}
    for n in range(1, 41):
        one = A.analyze_trace(path, window=f"range:pass#{n}", frames=1).primary
        for key, v in one.critical_path.to_json()["ns"].items():
            summed[key] = summed.get(key, 0) + v
    assert ns(whole) == summed and sum(shares(whole).values()) == pytest.approx(1.0)


@pytest.mark.parametrize("k", [1, 5, 100])
def test_follow_matches_a_plain_walk(k: int) -> None:
    # random forests whose predecessors point to earlier rows, with releases below each row's own time;
    # each interval's walk: from its start row, on while the release lies after the interval's start
    import numpy as np

    from clusterbench.analyzers.critical_path import follow

    rng = np.random.default_rng(k)
    n = 3000
    t = np.sort(rng.integers(0, 10**6, n))
    pred = np.array([rng.integers(0, i) if i and rng.random() > 0.01 else -1 for i in range(n)], dtype=np.int64)
    rel = np.where(pred >= 0, t[np.maximum(pred, 0)], -(1 << 60))
    ws = np.sort(rng.integers(0, 10**6, k))
    start = rng.integers(-1, n, k)
    top0 = np.where(start >= 0, t[np.maximum(start, 0)], 0)
    nodes, bounds, complete = follow(pred, rel, ws, start, top0)
    assert complete and bounds.size == k + 1
    for j in range(k):
        want = []
        i = int(start[j])
        if i >= 0 and top0[j] > ws[j]:
            while True:
                want.append(i)
                if rel[i] <= ws[j]:
                    break
                i = int(pred[i])
        assert nodes[bounds[j]:bounds[j + 1]].tolist() == want


def test_a_pageable_copy_that_returns_before_its_last_chunk_lands(tmp_path: Path) -> None:
    # a pageable H2D issued [0,100] whose copy runs [30,120]: it returns while its last chunk is on the
    # link (it lasted 20 µs or more, and its own copy started before it returned): held by the copy,
    # released at its return (100); blocked = the GPU's busy time in [0,100] = 70 µs: pageable.
    # Then a launch [105,108] of a kernel [125,145]. Path from the kernel: its stream predecessor (the copy,
    # ended 120) came after its launch (105): idle [120,125]; the copy [30,120], entered at its end; its
    # launch call at 0 (window start 30).
    t = Trace(api=[api(0, 100, "cudaMemcpyAsync_v3020", 1), api(105, 108, "cudaLaunchKernel_v7000", 2)],
              copies=[copy(30, 120, 1, 1, pageable=True)], kernels=[kernel(125, 145, 2)])  # fmt: skip
    data, g = run(tmp_path, t, window="span", frames=1)
    x = thread(g, PID)
    assert x.blocked_by_cause == (("pageable", 70 * U),) and x.work_ns == (108 - 30 - 70) * U
    assert segments(data, g) == [(30, 120, "h2d"), (120, 125, "idle"), (125, 145, "kernel")]


def test_an_implicit_synchronize_with_a_synchronization_row_waits(tmp_path: Path) -> None:
    # a kernel [10,60] launched [0,5]; cudaProfilerStop [20,200] with a SYNCHRONIZATION row (a context
    # synchronize): it awaits the kernel however long it goes on after it ends (the profiler's flush),
    # so it is held by the kernel, blocked for the GPU's busy time in [20,60] = 40 µs: implicit_sync.
    # Without the row it would need to return within 20 µs of the kernel's end: not held.
    stop = api(20, 200, "cudaProfilerStop_v4000", 2)
    t = Trace(api=[api(0, 5, "cudaLaunchKernel_v7000", 1), stop], kernels=[kernel(10, 60, 1)],
              syncs=[Sync(22 * U, 61 * U, stream=4294967295, sync_type=4, corr=2)])  # fmt: skip
    data, g = run(tmp_path, t, window="ms:0-0.2", frames=1)
    assert thread(g, PID).blocked_by_cause == (("implicit_sync", 40 * U),)
    t.syncs = []
    (tmp_path / "t.sqlite").unlink()
    data, g = run(tmp_path, t, window="ms:0-0.2", frames=1)
    assert thread(g, PID).blocked_ns == 0


def test_the_legacy_default_stream_waits_for_the_blocking_streams(tmp_path: Path) -> None:
    # a kernel on blocking stream 13 [10,50] and an H2D on blocking stream 14 [10,80], issued at 0-2; then a
    # kernel on the legacy default stream (7) issued at 3, running [85,95]: it waited for both (the latest
    # ends at 80), though the kernel before it on the SMs ended at 50. The stream table says which stream
    # is which (flag 3: the legacy default stream, 1: blocking).
    import sqlite3

    t = Trace(api=[api(0, 1, "cudaLaunchKernel_v7000", 1), api(1, 2, "cudaMemcpyAsync_v3020", 2),
                   api(3, 4, "cudaLaunchKernel_v7000", 3)],
              kernels=[kernel(10, 50, 1, stream=13), kernel(85, 95, 3, stream=7)], copies=[copy(10, 80, 1, 2, stream=14)])  # fmt: skip
    path = build(tmp_path / "t.sqlite", t)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE TARGET_INFO_CUDA_STREAM (streamId INTEGER, hwId INTEGER, vmId INTEGER, processId INTEGER, "
                "contextId INTEGER, priority INTEGER, flag INTEGER)")  # fmt: skip
    con.executemany("INSERT INTO TARGET_INFO_CUDA_STREAM VALUES (?, 0, 1, 100, 1, 0, ?)", [(7, 3), (13, 1), (14, 1)])
    con.commit()
    con.close()
    req = A.request(window="ms:0-0.095", frames=1)
    cache: dict = {}
    data = A.load_trace(path, req=req, cache=cache)
    g = A.analyze(data, req=req, cache=cache).primary
    # from the default stream's kernel back to the blocking streams' row that ended last (the H2D, 80), not
    # to the kernel before it on the SMs (50) nor its launch at 3; the H2D's issue at 1: launch [1,10]; the
    # thread's calls before it: host [0,1]
    assert segments(data, g) == [(0, 1, "host:100"), (1, 10, "launch"), (10, 80, "h2d"), (80, 85, "idle"),
                                 (85, 95, "kernel")]  # fmt: skip
