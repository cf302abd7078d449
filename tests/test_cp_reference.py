"""The critical-path reference (tests/cp_reference.py) on tiny hand-built traces (tests/cp_tiny.py), each
figure worked out by hand in the test from the definitions (docs/analyze.md, the critical path), then on
the real zoo exports the invariants that hold for any trace: the path tiles the window, the shares sum to 1,
every held call obeys its rule.

Times in the scenarios are µs (written as ns); RETURN_NS and HELD_MIN_NS are 20 µs."""

from __future__ import annotations

from pathlib import Path

import pytest

import cp_reference as C
from cp_tiny import US, Call, Row, Tiny, build
from oracle import union

ZOO = Path(__file__).resolve().parent / "data" / "zoo"

LAUNCH, SYNC, COPY = "cudaLaunchKernel_v7000", "cudaStreamSynchronize_v3020", "cudaMemcpyAsync_v3020"


def ref(tmp_path: Path, t: Tiny, window_us: tuple[float, float], setup_us=(), depth: int = C.QUEUE_FULL_DEPTH):
    path = build(tmp_path / "t.sqlite", t)
    w = [(int(window_us[0] * US), int(window_us[1] * US))]
    setup = [(int(a * US), int(b * US)) for a, b in setup_us]
    return C.reference(path, w, setup, queue_full_depth=depth)


def us(d: dict) -> dict:
    """ns figures as µs (the scenarios are whole µs)."""
    return {k: v / US for k, v in d.items() if v}


def held_by(r: C.Reference, corr: int):
    h = [x for x in r.held.values() if x.call.corr == corr]
    return h[0] if h else None


def tiles(r: C.Reference) -> bool:
    segs = sorted(r.path.segments, key=lambda s: (s.start, s.end))
    (w0, w1), = r.window
    return segs[0].start == w0 and segs[-1].end == w1 and all(a.end == b.start for a, b in zip(segs, segs[1:]))


def test_turns_host_and_gpu_take_turns(tmp_path: Path) -> None:
    # launch, stream sync, 15 µs of host code, launch, stream sync: the path runs through both
    t = Tiny(calls=[Call(LAUNCH, 0, 5, 1), Call(SYNC, 6, 45, 2, stream=7), Call(LAUNCH, 60, 64, 3),
                    Call(SYNC, 65, 95, 4, stream=7)],
             rows=[Row("kernel", 10, 40, 1), Row("kernel", 70, 90, 3)])  # fmt: skip
    r = ref(tmp_path, t, (0, 100))
    # from 100: the last node is the sync ending at 95 (after the kernel's 90): idle 95..100; the sync is
    # held by the kernel (65 <= 90 <= 95): host 90..95; kernel 70..90; its launch call (60) is the latest
    # dependency: launch 60..70; on the thread at 60 the last call is the first sync, held by the first
    # kernel (40): host 40..60; kernel 10..40; its launch call at 0: launch 0..10
    assert us(r.path.by_resource) == {"idle": 5, "host:100": 5 + 20, "kernel": 20 + 30, "launch": 10 + 10}
    assert r.path.shares_json() == pytest.approx({"idle": 0.05, "host": 0.25, "kernel": 0.5, "launch": 0.2})
    assert tiles(r) and r.path.total_ns == 100 * US
    # the thread: active 0..95, waits 6..45 and 65..95 (69), no blocked call (the launches are short)
    (s,) = r.threads.values()
    assert (s.active_ns, s.wait_ns, s.blocked_ns, s.work_ns) == (95 * US, 69 * US, 0, 26 * US)
    assert held_by(r, 2).row.start == 10 * US and held_by(r, 4).row.start == 70 * US and held_by(r, 1) is None


def _queue(depth_calls_end: float) -> Tiny:
    return Tiny(calls=[Call(LAUNCH, 0, 2, 1), Call(LAUNCH, 3, 5, 2), Call(LAUNCH, 6, 8, 3),
                       Call(LAUNCH, 9, depth_calls_end, 4), Call(LAUNCH, 38, 40, 5), Call(SYNC, 41, 158, 6, stream=7)],
                rows=[Row("kernel", 5, 35, 1), Row("kernel", 35, 65, 2), Row("kernel", 65, 95, 3),
                      Row("kernel", 95, 125, 4), Row("kernel", 125, 155, 5)])  # fmt: skip


def test_a_launch_into_a_full_queue_is_blocked_until_a_kernel_ends(tmp_path: Path) -> None:
    # four launches queue four 30 µs kernels; the fourth call lasts 9..37 and returns 2 µs after the
    # first kernel ends (35): held by it, blocked over 9..35 (the GPU busy from 5), 26 µs
    r = ref(tmp_path, _queue(37), (0, 160), depth=3)
    h = held_by(r, 4)
    assert h.row.corr == 1 and not h.wait and sum(b - a for a, b in h.blocked) == 26 * US
    assert h.cause == "queue_full"  # 3 rows issued before it had not ended at 9 µs (depth 3)
    assert ref(tmp_path, _queue(37), (0, 160)).blocked_by_cause == {"gpu_behind": 26 * US}  # depth 512
    (s,) = r.threads.values()
    # active 0..158; the sync 41..158 waits 117; blocked 26; work 15
    assert (s.active_ns, s.wait_ns, s.blocked_ns, s.work_ns) == (158 * US, 117 * US, 26 * US, 15 * US)
    assert s.blocked_by_cause == {"queue_full": 26 * US}
    # the path: idle 158..160, host 155..158 (the sync held by the last kernel), the kernels back to
    # back 5..155 (each one's stream predecessor ends as it starts), the first launch's delay 0..5
    assert us(r.path.by_resource) == {"idle": 2, "host:100": 3, "kernel": 150, "launch": 5}
    assert tiles(r)


def test_a_long_call_that_returns_late_is_not_held(tmp_path: Path) -> None:
    # the same call lasting 9..60: the first kernel ended 25 µs before it returned (more than RETURN_NS),
    # the second ends after it: nothing held it
    r = ref(tmp_path, _queue(60), (0, 160))
    assert held_by(r, 4) is None and r.blocked_by_cause == {}


def test_a_pageable_copy_holds_the_thread_for_its_copy(tmp_path: Path) -> None:
    t = Tiny(calls=[Call(COPY, 0, 50, 1), Call(LAUNCH, 51, 53, 2), Call(SYNC, 54, 67, 3, stream=7)],
             rows=[Row("h2d", 5, 48, 1, pageable=True), Row("kernel", 55, 65, 2)])  # fmt: skip
    r = ref(tmp_path, t, (0, 70))
    h = held_by(r, 1)  # its own row ends (48) before it returns (50)
    assert h.row.corr == 1 and h.cause == "pageable" and h.blocked == [(5 * US, 48 * US)]
    # path: idle 67..70; host 65..67; kernel 55..65; launch 51..55 (the launch call is the latest
    # dependency); on the thread at 51: the copy call is held by its row: host 48..51; h2d 5..48; launch 0..5
    assert us(r.path.by_resource) == {"idle": 3, "host:100": 5, "kernel": 10, "launch": 9, "h2d": 43}
    (s,) = r.threads.values()
    assert (s.active_ns, s.wait_ns, s.blocked_ns, s.work_ns) == (67 * US, 13 * US, 43 * US, 11 * US)
    # the same copy from pinned memory returning with its row is held too, but the cause is the GPU
    t.rows[0].pageable = False
    assert held_by(ref(tmp_path, t, (0, 70)), 1).cause == "gpu_behind"


def test_an_event_edge_between_two_streams(tmp_path: Path) -> None:
    # H2D on stream 1, cudaEventRecord(E9) on stream 1, cudaStreamWaitEvent(stream 2, E9), a kernel on
    # stream 2 that starts 2 µs after the copy ends; cudaDeviceSynchronize (no SYNCHRONIZATION row)
    t = Tiny(calls=[Call(COPY, 0, 3, 1), Call("cudaEventRecord_v3020", 4, 5, 2, event=9, record_stream=1),
                    Call("cudaStreamWaitEvent_v3020", 6, 7, 3, stream=2, event=9), Call(LAUNCH, 8, 10, 4),
                    Call("cudaDeviceSynchronize_v3020", 11, 72, 5)],
             rows=[Row("h2d", 10, 50, 1, stream=1), Row("kernel", 52, 70, 4, stream=2)])  # fmt: skip
    r = ref(tmp_path, t, (0, 75))
    # the kernel's dependencies: its launch call (8) and the event source, the copy (50): the copy is the
    # latest, the gap 50..52 is idle; then the copy, its launch delay 0..10
    assert us(r.path.by_resource) == {"idle": 3 + 2, "host:100": 2, "kernel": 18, "h2d": 40, "launch": 10}
    assert held_by(r, 5).row.corr == 4  # the device sync waits for every row issued before it
    # without the stream wait, the kernel would follow its launch call: a 44 µs launch gap
    t.calls[2] = Call("cudaStreamWaitEvent_v3020", 6, 7, 3, stream=2, event=8)  # an event never recorded
    assert us(ref(tmp_path, t, (0, 75)).path.by_resource) == {"idle": 3, "host:100": 2 + 8, "kernel": 18, "launch": 44}


def test_a_graph_launch_that_returns_after_its_copy(tmp_path: Path) -> None:
    # cudaGraphLaunch 0..40; its nodes (same correlation id): H2D 5..30, kernel 31..45
    t = Tiny(calls=[Call("cudaGraphLaunch_v10000", 0, 40, 1), Call(SYNC, 41, 47, 2, stream=7)],
             rows=[Row("h2d", 5, 30, 1, graph_node=1), Row("kernel", 31, 45, 1, graph_node=2)])  # fmt: skip
    r = ref(tmp_path, t, (0, 50))
    h = held_by(r, 1)
    # the launch lasted 40 µs (HELD_MIN_NS or more): its own kernel, started at 31 before it returned,
    # releases it last, at the call's end (40), later than the copy (30)
    assert h.row.resource == "kernel" and h.row.corr == 1 and h.release == 40 * US
    assert (h.cause, sum(b - a for a, b in h.blocked)) == ("graph", (25 + 9) * US)
    # idle 47..50, host 45..47 (the sync held by the kernel), kernel 31..45, idle 30..31 (the stream
    # predecessor, the copy, is the latest dependency), h2d 5..30, launch 0..5
    assert us(r.path.by_resource) == {"idle": 4, "host:100": 2, "kernel": 14, "h2d": 25, "launch": 5}
    (s,) = r.threads.values()
    assert (s.active_ns, s.wait_ns, s.blocked_ns, s.work_ns) == (47 * US, 6 * US, 34 * US, 7 * US)


def test_the_walk_jumps_from_a_blocked_launch_to_the_row_that_released_it(tmp_path: Path) -> None:
    # the second launch (2..32) returns 2 µs after the first kernel ends (30): held by it; then 28 µs of
    # host code, a third launch and a sync
    t = Tiny(calls=[Call(LAUNCH, 0, 2, 1), Call(LAUNCH, 2, 32, 2), Call(LAUNCH, 60, 62, 3),
                    Call(SYNC, 62, 72, 4, stream=7)],
             rows=[Row("kernel", 3, 30, 1), Row("kernel", 32, 40, 2), Row("kernel", 63, 70, 3)])  # fmt: skip
    r = ref(tmp_path, t, (0, 75))
    # idle 72..75, host 70..72, kernel 63..70, launch 60..63; on the thread at 60 the last call is the
    # held launch: host 30..60, then the first kernel 3..30 and its launch delay 0..3
    assert us(r.path.by_resource) == {"idle": 3, "host:100": 32, "kernel": 34, "launch": 6}
    assert [(s.start // US, s.end // US) for s in r.path.segments if s.resource == "kernel"] == [(63, 70), (3, 30)]
    h = held_by(r, 2)
    assert h.cause == "gpu_behind" and h.blocked == [(3 * US, 30 * US)]
    (s,) = r.threads.values()
    assert (s.active_ns, s.wait_ns, s.blocked_ns, s.work_ns) == (72 * US, 10 * US, 27 * US, 35 * US)


def test_a_first_launch_that_loads_its_module(tmp_path: Path) -> None:
    t = Tiny(calls=[Call(LAUNCH, 0, 50, 1), Call(LAUNCH, 51, 80, 2), Call(SYNC, 81, 90, 3, stream=7)],
             rows=[Row("kernel", 40, 45, 1, name="a"), Row("kernel", 60, 62, 2, name="a")])  # fmt: skip
    r = ref(tmp_path, t, (0, 100))
    assert held_by(r, 1).cause == "module_load" and held_by(r, 1).blocked == [(40 * US, 45 * US)]
    # the second launch of "a" (51..80) is held by its own row (62 <= 80): the GPU was behind, not a load
    assert held_by(r, 2).cause == "gpu_behind" and held_by(r, 2).blocked == [(60 * US, 62 * US)]
    assert r.blocked_by_cause == {"module_load": 5 * US, "gpu_behind": 2 * US}


def test_implicit_syncs_event_syncs_and_waits_that_did_not_wait(tmp_path: Path) -> None:
    t = Tiny(calls=[Call(LAUNCH, 0, 2, 1), Call("cudaEventRecord_v3020", 3, 4, 2, event=5, record_stream=7),
                    Call(LAUNCH, 5, 7, 3), Call("cudaEventSynchronize_v3020", 8, 31, 4, event=5),
                    Call("cudaFree_v3020", 32, 60, 5), Call(SYNC, 70, 72, 6, stream=7),
                    Call("cudaMemcpy_v3020", 73, 90, 7)],
             rows=[Row("kernel", 10, 30, 1), Row("kernel", 30, 55, 3), Row("d2h", 80, 88, 7)])  # fmt: skip
    r = ref(tmp_path, t, (0, 95))
    # the event sync waits for the rows on stream 7 issued before the record (the first kernel, 30)
    assert held_by(r, 4).row.corr == 1 and held_by(r, 4).wait
    # cudaFree (32..60) returns 5 µs after the second kernel ends: an implicit sync, blocked 32..55
    assert held_by(r, 5).cause == "implicit_sync" and held_by(r, 5).blocked == [(32 * US, 55 * US)]
    # the stream sync at 70 finds the GPU done (55): it did not wait, nothing held it
    assert held_by(r, 6) is None
    # the synchronous copy waits for its own row (88 in 73..90)
    assert held_by(r, 7).row.corr == 7 and held_by(r, 7).wait
    (s,) = r.threads.values()
    # waits: the event sync 8..31, the stream sync 70..72, the copy 73..90 (the stream sync is a wait
    # even though it did not wait for the GPU); blocked: 32..55
    assert (s.active_ns, s.wait_ns, s.blocked_ns) == (90 * US, (23 + 2 + 17) * US, 23 * US)
    assert s.work_ns == (90 - 42 - 23) * US


def test_two_threads_an_event_between_them_and_a_set_up_gap(tmp_path: Path) -> None:
    t = Tiny(calls=[Call(LAUNCH, 3, 4, 1, tid=10), Call("cudaEventRecord_v3020", 5, 6, 2, tid=10, event=9, record_stream=1),
                    Call(SYNC, 7, 16, 3, tid=10, stream=1),
                    Call("cudaStreamWaitEvent_v3020", 6, 7, 4, tid=11, stream=2, event=9), Call(LAUNCH, 8, 10, 5, tid=11),
                    Call(SYNC, 11, 31, 6, tid=11, stream=2)],
             rows=[Row("kernel", 6, 15, 1, stream=1), Row("kernel", 18, 30, 5, stream=2)],
             thread_names={10: "feedA"})  # fmt: skip
    r = ref(tmp_path, t, (0, 32), setup_us=[(16, 18)])
    # idle 31..32; host:11 30..31; kernel 18..30; its event source, the first kernel (15), is later than
    # its launch call (8): idle 15..18; kernel 6..15; its launch at 3 on feedA: launch 3..6; feedA has no
    # call before 3: host:feedA 0..3
    assert us(r.path.by_resource) == {"idle": 4, "host:11": 1, "kernel": 21, "launch": 3, "host:feedA": 3}
    assert set(r.path.shares_json()) == {"idle", "host:11", "kernel", "launch", "host:feedA"}
    assert sum(r.path.shares.values()) == pytest.approx(1.0)
    a, b = r.threads[10], r.threads[11]
    assert a.name == "feedA" and b.name is None
    # feedA: active 3..16 (13), its sync 7..16 (9); thread 11: active 6..31 less the set-up gap 16..18 (23),
    # its sync 11..31 less the gap (18)
    assert (a.active_ns, a.wait_ns, a.work_ns) == (13 * US, 9 * US, 4 * US)
    assert (b.active_ns, b.wait_ns, b.work_ns) == (23 * US, 18 * US, 5 * US)


def test_several_window_intervals_are_walked_one_by_one(tmp_path: Path) -> None:
    t = Tiny(calls=[Call(LAUNCH, 0, 5, 1), Call(SYNC, 6, 45, 2, stream=7), Call(LAUNCH, 60, 64, 3),
                    Call(SYNC, 65, 95, 4, stream=7)],
             rows=[Row("kernel", 10, 40, 1), Row("kernel", 70, 90, 3)])  # fmt: skip
    path = build(tmp_path / "t.sqlite", t)
    r = C.reference(path, [(0, 50 * US), (55 * US, 100 * US)])
    # [0, 50]: idle 45..50, host 40..45, kernel 10..40, launch 0..10; [55, 100]: as in the turns case
    # but cut at 55 (host 55..60 instead of 40..60)
    assert us(r.path.by_resource) == {"idle": 5 + 5, "host:100": 5 + 5 + 5, "kernel": 30 + 20, "launch": 10 + 10}
    assert r.path.total_ns == 95 * US


# --------------------------------------------------------------------------- invariants on real exports

REAL = sorted(p.stem[len("zoo_"):] for p in ZOO.glob("zoo_*.sqlite"))


@pytest.mark.parametrize("name", REAL)
def test_on_real_exports_the_path_tiles_the_window_and_each_held_call_obeys_its_rule(name: str) -> None:
    tr = C.read(ZOO / f"zoo_{name}.sqlite")
    pid = max({r.pid for r in tr.rows}, key=lambda p: sum(r.end - r.start for r in tr.rows if r.pid == p))
    rows = [r for r in tr.rows if r.pid == pid]
    w = (min(r.start for r in rows), max(r.end for r in rows))
    r = C.reference(tr, [w])
    assert tiles(r) and r.path.total_ns == w[1] - w[0]
    assert sum(r.path.by_resource.values()) == w[1] - w[0] and all(s.end >= s.start for s in r.path.segments)
    assert sum(r.path.shares.values()) == pytest.approx(1.0)
    busy = union([(x.start, x.end) for x in rows])
    for h in r.held.values():
        c, R = h.call, h.row
        assert h.release == min(R.end, c.end)
        if h.wait:
            assert c.cat == "wait" and c.start <= R.end <= c.end
        else:
            long = c.end - c.start >= C.HELD_MIN_NS
            synced = c.cat == "implicit" and c.corr in tr.sync_of and c.start <= R.end <= c.end
            own = R.corr == c.corr and R.end <= c.end
            began = R.corr == c.corr and R.start < c.end and long
            late = (R.by_device or R.corr < c.corr) and c.start < R.end <= c.end and c.end - R.end <= C.RETURN_NS and long
            assert synced or own or began or late, (name, c, R)
            assert sum(b - a for a, b in h.blocked) == sum(max(0, min(b, h.release) - max(a, c.start)) for a, b in busy)
    for s in r.threads.values():
        assert s.work_ns + s.blocked_ns + s.wait_ns == s.active_ns and min(s.work_ns, s.blocked_ns, s.wait_ns) >= 0


def test_a_short_call_is_held_only_by_its_own_rows(tmp_path: Path) -> None:
    # a 3 µs launch (28..31) returning 1 µs after an earlier kernel ends (30) is not held (it lasted less
    # than HELD_MIN_NS); a 3 µs copy whose own row ends inside it (33..34.5) is, and its blocked time is
    # all of 32..34.5: the GPU is busy there (the second kernel runs 31..50), not only its own copy
    t = Tiny(calls=[Call(LAUNCH, 0, 2, 1), Call(LAUNCH, 28, 31, 2), Call(COPY, 32, 35, 3), Call(SYNC, 36, 60, 4, stream=7)],
             rows=[Row("kernel", 5, 30, 1), Row("kernel", 31, 50, 2), Row("d2h", 33, 34.5, 3, stream=8)])  # fmt: skip
    r = ref(tmp_path, t, (0, 60))
    assert held_by(r, 2) is None
    assert held_by(r, 3).row.corr == 3 and held_by(r, 3).blocked == [(32 * US, 34_500)]


def test_blocked_time_inside_a_wait_counts_as_wait(tmp_path: Path) -> None:
    # a driver sync nested in a held launch (as a runtime call that synchronizes inside would show): the
    # thread's blocked time is the launch's blocked time less the wait
    t = Tiny(calls=[Call(LAUNCH, 0, 40, 1), Call("cuCtxSynchronize", 10, 20, 2)],
             rows=[Row("kernel", 5, 38, 1)])  # fmt: skip
    r = ref(tmp_path, t, (0, 40))
    assert held_by(r, 1).blocked == [(5 * US, 38 * US)]
    (s,) = r.threads.values()
    assert (s.active_ns, s.wait_ns, s.blocked_ns, s.work_ns) == (40 * US, 10 * US, 23 * US, 7 * US)
