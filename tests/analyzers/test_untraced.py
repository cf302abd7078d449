"""The untraced frame's pure pieces, each against values worked out by hand: the injected run's frame, the
slope and its verdict, the path's structure (a hand-drawn path, then the zoo's turns trace against its own
critical path and ZOO line), the latency per gap, the untraced split and the causes of idle."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from clusterbench.analyzers import critical_path as cp
from clusterbench.analyzers.untraced import (
    BINDS_AT,
    SLACK_BELOW,
    binds_code,
    binds_words,
    fit_slope,
    governor_of,
    host_bar,
    host_frame,
    held_idle,
    host_part,
    idle_causes,
    judge,
    latency_per_gap,
    match_threads,
    median_frame,
    path_structure,
    sequence_of,
    structure_of_segments,
    untraced_split,
)
from clusterbench.analyzers.records import BLOCK_CAUSES
from clusterbench.io.nsys import schema as S
from clusterbench.model.untraced import (
    SPLIT_TOLERANCE,
    HostFrame,
    InjectReport,
    LatencyRun,
    PathHost,
    PathStructure,
    SlopeFit,
    ThreadBar,
    UntracedCosts,
)
from conftest import DATA

HERE = DATA / "untraced"


def _report(name: str) -> InjectReport:
    return InjectReport.from_json(json.loads((HERE / name).read_text()))


def _latency(name: str, under: str) -> LatencyRun:
    return LatencyRun.from_report(json.loads((HERE / name).read_text()), under)


# --------------------------------------------------------------------------- the injected run's frame


def test_one_thread_frame_from_its_marks() -> None:
    # marks 1..4 (warm-up 1): 3 frames over 60,000 ns; waits 18,000, delays 6,000, calls 24,000 in them
    f = host_frame(_report("inject_one_thread.json"))
    assert f is not None
    assert f.frames == 3 and f.period_us == pytest.approx(20.0)
    (t,) = f.threads
    assert t.busy_us == pytest.approx(12.0)  # (60,000 - 18,000 - 6,000) / 3
    assert (t.call_us, t.wait_us, t.delay_us) == (pytest.approx(8.0), pytest.approx(6.0), pytest.approx(2.0))
    assert t.after_wait_us == pytest.approx(3.0)  # 9,000 ns over 3 waits
    assert f.host_us == pytest.approx(12.0) and f.sched == "blocking"
    assert (f.period_p10_us, f.period_p90_us) == (pytest.approx(20.0), pytest.approx(20.0))
    # per frame of the loop: 3 syncs of 6 µs, 6 copies of 2 µs, 3 launches of 2 µs: by time a frame
    assert f.calls == (("cudaStreamSynchronize", 1.0, 6.0), ("cudaMemcpyAsync", 2.0, 2.0), ("cudaLaunchKernel", 1.0, 2.0))
    # its synchronizes: 3 in the loop of 3 frames, 18,000 ns in all
    assert (t.syncs, t.sync_us) == (pytest.approx(1.0), pytest.approx(6.0))


def test_two_threads_share_the_process_frame() -> None:
    # thread 2: 2 frames, wall 40,000, busy 30,000; thread 3: 1 frame, wall 40,000, busy 20,000;
    # the process: 3 frames from 0 to 50,000 ns, 16.667 µs each; a thread's bar is its busy share of that
    f = host_frame(_report("inject_two_threads.json"))
    assert f is not None and f.frames == 3
    assert f.period_us == pytest.approx(50.0 / 3)
    bars = {t.tid: t for t in f.threads}
    assert set(bars) == {2, 3}  # the main thread marked nothing
    assert bars[2].busy_us == pytest.approx(30000 / 40000 * 50 / 3)
    assert bars[3].busy_us == pytest.approx(20000 / 40000 * 50 / 3)
    assert bars[3].wait_us == pytest.approx(20000 / 40000 * 50 / 3)
    assert f.host_us == pytest.approx(12.5)
    assert f.period_p10_us is None  # two marks kept: too few for percentiles
    assert f.calls == (("cudaLaunchKernel", 1.0, pytest.approx(7 / 3)),)
    assert all(t.syncs == 0.0 and t.sync_us is None for t in f.threads)  # launches only: no synchronize


def _idle_costs(idle_ns: float | None) -> UntracedCosts:
    import dataclasses

    run = dataclasses.replace(_latency("latency_untraced.json", "none"), idle_sync_ns=idle_ns)
    return UntracedCosts(run, None, "auto", None)


def test_the_host_bar_counts_each_synchronize_at_its_own_cost() -> None:
    f = host_frame(_report("inject_one_thread.json"))  # busy 12 µs a frame, one synchronize of 6 µs a frame
    assert f is not None
    hb = host_bar(f, _idle_costs(2000.0))  # a synchronize with nothing to wait for: 2 µs
    assert (hb.bar_us, hb.busy_us, hb.sync_us) == (pytest.approx(14.0), pytest.approx(12.0), pytest.approx(2.0))
    # a synchronize never counts for more than the thread's own mean one (6 µs here)
    assert host_bar(f, _idle_costs(8000.0)).sync_us == pytest.approx(6.0)
    # not measured: the library's bar as it is, and no synchronizes' part
    for costs in (None, _idle_costs(None)):
        hb = host_bar(f, costs)
        assert (hb.bar_us, hb.sync_us) == (pytest.approx(12.0), None)


def test_the_host_bar_is_the_busiest_thread_with_its_synchronizes() -> None:
    a = ThreadBar(1, "a", 100, 15.0, 5.0, 0.0, 0.0, None, 0.0, None)  # no synchronize
    b = ThreadBar(2, "b", 100, 14.0, 9.0, 6.0, 0.0, 0.5, 2.0, 3.0)  # two of 3 µs a frame
    old = ThreadBar(3, "old", 100, 10.0, 5.0, 5.0, 0.0, None)  # a record from before: syncs unknown
    f = HostFrame(100, 20.0, None, None, 15.0, (a, b, old), "auto")
    hb = host_bar(f, _idle_costs(1500.0))
    assert (hb.tid, hb.bar_us, hb.sync_us) == (2, pytest.approx(14.0 + 2 * 1.5), pytest.approx(3.0))
    assert host_bar(f, None).tid == 1 and host_bar(f, None).bar_us == pytest.approx(15.0)


def test_no_frame_past_the_warm_up_gives_none() -> None:
    r = _report("inject_one_thread.json")
    import dataclasses

    assert host_frame(dataclasses.replace(r, warmup=4)) is None  # 5 marks, warm-up 4: no frame between two marks


def test_the_median_frame_is_the_middle_process() -> None:
    fr = [HostFrame(10, p, None, None, 1.0, (), None) for p in (30.0, 10.0, 20.0, 40.0)]
    assert median_frame(fr).period_us == 20.0  # the lower middle of four
    assert median_frame([]) is None


# --------------------------------------------------------------------------- slopes


def test_a_slope_from_medians_and_its_spread() -> None:
    s = fit_slope("host", 18.0, [36.0, 36.4, 36.2], [54.1, 54.5, 54.3])
    assert s.slope == pytest.approx((54.3 - 36.2) / 18)
    assert s.spread == pytest.approx((0.2 + 0.2) / 18)
    assert (s.verdict, s.base_us, s.delayed_us, s.processes, s.note) == ("binds", 36.2, 54.3, 3, None)


def test_a_noisy_slope_says_so() -> None:
    s = fit_slope("gpu", 4.0, [30.0, 32.0], [30.5, 33.0])
    assert s.spread == pytest.approx((1.0 + 1.25) / 4) and s.verdict == "slack"
    assert "spread" in s.note and "--delay-processes" in s.note and "more frames" in s.note


def test_not_tested_keeps_why() -> None:
    s = fit_slope("link", 10.0, [20.0], [30.0], why_not="no H2D")
    assert (s.slope, s.verdict, s.note) == (None, "not tested", "no H2D")
    assert fit_slope("gpu", 10.0, [], [1.0]).verdict == "not tested"


@pytest.mark.parametrize("slope,verdict", [(1.0, "binds"), (BINDS_AT, "binds"), (0.74, "shared"), (0.5, "shared"),
                                           (0.26, "shared"), (SLACK_BELOW, "slack"), (0.0, "slack"), (-0.1, "slack")])
def test_the_verdict_thresholds(slope, verdict) -> None:
    assert judge(slope) == verdict


def _s(resource: str, verdict: str) -> SlopeFit:
    slope = {"binds": 1.0, "shared": 0.5, "slack": 0.0}.get(verdict)
    return SlopeFit(resource, 10.0, slope, 0.0 if slope is not None else None, 1.0, 1.0, 3, verdict,
                    None if slope is not None else "why")


@pytest.mark.parametrize("verdicts,code", [
    (("binds", "slack", "slack"), "host"),
    (("binds", "binds", "slack"), "host+gpu"),
    (("slack", "binds", "binds"), "gpu+link"),
    (("shared", "slack", "slack"), "shared"),
    (("slack", "slack", "not tested"), "none"),
    (("not tested", "not tested", "not tested"), "untested"),
])
def test_what_binds_in_one_word(verdicts, code) -> None:
    slopes = [_s(r, v) for r, v in zip(("host", "gpu", "link"), verdicts)]
    assert binds_code(slopes) == code
    words = binds_words(code, slopes)
    assert ("take turns" in words) == ("+" in code)


def test_governors() -> None:
    assert governor_of(["performance\n", "performance"]) == "performance"
    assert governor_of(["powersave", "performance"]) == "mixed: performance, powersave"
    assert governor_of([]) is None


# --------------------------------------------------------------------------- the path's structure

_E0, _H0 = cp.ENGINE0, cp.HOST0
_H2D, _KERNEL = _E0 + S.ENGINE_CODE["h2d"], _E0 + S.ENGINE_CODE["kernel"]


def test_a_hand_drawn_path() -> None:
    # two frames of one thread: host (holding a wake), launch, h2d, idle, kernel; times in ns
    segs = [(0, 100, _H0), (100, 110, cp.LAUNCH), (110, 150, _H2D), (150, 160, cp.IDLE), (160, 200, _KERNEL),
            (200, 300, _H0), (300, 305, cp.LAUNCH), (305, 345, _H2D), (345, 360, cp.IDLE), (360, 400, _KERNEL)]
    ss, ee, rr = (np.array(x, dtype=np.int64) for x in zip(*segs))
    # calls of thread 0: a sync (released at 0, returns at 20), a launch at 100, a sync (released at 200,
    # returns at 230), a copy at 250 (so the second host part is not one turn), a launch at 300
    wait, launch, copy = S.API_CODE["wait"], S.API_CODE["launch"], S.API_CODE["copy"]
    links = SimpleNamespace(
        cstart=np.array([-50, 100, 170, 250, 300]), cend=np.array([20, 105, 230, 255, 304]),
        cthread=np.zeros(5, dtype=np.int64), ccat=np.array([wait, launch, wait, copy, launch], dtype=np.int8),
        start=np.array([110, 160, 305, 360]), end=np.array([150, 200, 345, 400]),
        engine=np.array([S.ENGINE_CODE[e] for e in ("h2d", "kernel", "h2d", "kernel")], dtype=np.int8))

    class HeldStub:
        call = np.array([0, 2])
        release = np.array([0, 200])
        wait = np.array([True, True])
        cause = np.array([-1, -1], dtype=np.int8)

        def __len__(self) -> int:
            return 2

    threads = [SimpleNamespace(tid=7, name="daq")]
    stats = {7: SimpleNamespace(work_us_per_frame=0.15, blocked_ns=30, frames=2)}
    p = structure_of_segments(ss, ee, rr, 2, links, HeldStub(), threads, stats, (np.array([0]), np.array([400])))
    assert p.path_us == pytest.approx(0.2)  # 400 ns over 2 frames
    assert p.engines_us == {"h2d": pytest.approx(0.04), "kernel": pytest.approx(0.04)}
    assert (p.idle_us, p.idle_gaps) == (pytest.approx(0.0125), 1.0)  # 25 ns, two gaps each before a kernel
    assert (p.launch_us, p.launches) == (pytest.approx(0.0075), 1.0)
    assert (p.launches_after_wake, p.launch_after_wake_us) == (1.0, pytest.approx(0.0075))
    (h,) = p.hosts
    assert (h.tid, h.name, h.path_us, h.wake_us, h.wakes) == (7, "daq", pytest.approx(0.1), pytest.approx(0.025), 1.0)
    # one turn: from the first wake's return (20) to the launch at 100; the second part holds a copy call
    assert (h.after_wait_us, h.after_waits) == (pytest.approx(0.04), 0.5)
    assert h.work_us == 0.15 and h.blocked_us == pytest.approx(0.015)  # 30 ns held over 2 frames
    assert p.op_us == {"h2d": pytest.approx(0.04), "kernel": pytest.approx(0.04)}


@pytest.fixture(scope="module")
def turns():
    from clusterbench.analyzers.analysis import analyze, load_trace, request

    req = request(window="range:loop", frames_spec="kernel:zoo_calib")
    cache: dict = {}
    data = load_trace(DATA / "zoo" / "zoo_turns.sqlite", req=req, cache=cache)
    return data, analyze(data, req=req, cache=cache)


def test_the_turns_trace_structure_matches_its_critical_path(turns) -> None:
    data, a = turns
    g = a.primary
    p = path_structure(data, g)
    assert p is not None and p.frames == 600
    path = g.critical_path
    per = {part.resource: part.loop_ns / 1e3 / 600 for part in path.loop_parts()}
    assert p.path_us == pytest.approx(path.loop_ns / 1e3 / 600)
    assert p.idle_us == pytest.approx(per["idle"]) and p.launch_us == pytest.approx(per["launch"])
    for e in ("kernel", "h2d", "d2h"):
        assert p.engines_us[e] == pytest.approx(per[e])
    (h,) = p.hosts
    assert h.path_us == pytest.approx(per[f"host:{h.tid}"])
    # the program synchronizes once a frame (its ZOO line: stream_syncs = frames + 1, one in the warm-up),
    # and each of those syncs waits for the frame's D2H: about one wake and one turn a frame on the path
    zoo = json.loads(next(line for line in (DATA / "zoo" / "zoo_turns.stdout.txt").read_text().splitlines()
                          if line.startswith("ZOO "))[4:])
    assert zoo["stream_syncs"] == 601
    assert h.wakes == pytest.approx(1.0, abs=0.01) and h.after_waits == pytest.approx(1.0, abs=0.01)
    # the host's turn holds its spin of 30 µs (ZOO spin.us_asked) and the calls before its first copy
    assert zoo["spin"]["us_asked"] == 30.0
    assert 30.0 < h.after_wait_us / h.after_waits < 40.0
    # three dependent gaps a frame between its four rows (h2d, zoo_calib, zoo_spin, d2h)
    assert p.idle_gaps == pytest.approx(3.0, abs=0.02)


def test_the_turns_sequence(turns) -> None:
    _, a = turns
    host = HostFrame(600, 80.0, None, None, 40.0, (), "auto", (("cudaEventRecord", 2.0, 1.0),))
    seq = sequence_of(a.primary, host)
    ops = seq.split(",")
    # per frame: one H2D of 320,000 bytes, two kernels (zoo_calib, zoo_spin), one D2H of 1,024 bytes
    # (ZOO h2d_bytes_per_frame, d2h_bytes_per_frame, kernels_per_frame); the events split around the kernels
    assert ops[0] == "h2d:320000" and ops[1] == "event" and ops[-1] == "d2h:1024" and ops[-2] == "event"
    assert [o.split(":")[0] for o in ops[2:4]] == ["kernel", "kernel"]
    assert sequence_of(a.primary, None).count("event") == 0


# --------------------------------------------------------------------------- latency, split, idle


def test_latency_per_gap_from_the_sequence_chain() -> None:
    run = _latency("latency_untraced.json", "none")
    # the chain of memset, h2d, event, kernel, event, d2h takes 40 µs; the ops themselves 1.5 + 13 + 1.2 + 5.3
    # = 21 µs (the events fold into the gaps they stand in): 19 µs over 4 visible gaps
    op_us = {"memset": 1.5, "h2d": 13.0, "kernel": 1.2, "d2h": 5.3}
    assert latency_per_gap(run, op_us) == pytest.approx(4.75)
    # without the program's durations a kernel op is its own spin (1 µs) and the copies count as nothing
    assert latency_per_gap(run, {}) == pytest.approx((40.0 - 1.0) / 4)
    assert latency_per_gap(None, op_us) is None


def _path(**kw) -> PathStructure:
    base = dict(frames=100, path_us=60.0, engines_us={"h2d": 13.0, "d2h": 5.3, "kernel": 1.2, "memset": 1.5},
                idle_us=20.0, idle_gaps=3.0, launch_us=6.0, launches=1.0, launches_after_wake=1.0,
                hosts=(PathHost(7, "daq", 13.0, 5.0, 1.0, 20.0, 8.0, 1.0),),
                op_us={"memset": 1.5, "h2d": 13.0, "kernel": 1.2, "d2h": 5.3}, launch_after_wake_us=6.0)
    base.update(kw)
    return PathStructure(**base)  # type: ignore[arg-type]


def _costs(traced: bool = True) -> UntracedCosts:
    return UntracedCosts(_latency("latency_untraced.json", "none"),
                         _latency("latency_nsys.json", "nsys") if traced else None, "blocking", "performance")


def _host(period: float) -> HostFrame:
    return HostFrame(100, period, None, None, 15.0, (ThreadBar(100, "daq", 100, 15.0, 9.0, 25.0, 0.0, 5.5),), "blocking")


def test_a_host_bound_path_whose_thread_waits_untraced_gets_the_wait_as_the_gpus() -> None:
    # traced: the host issues slowly enough that the GPU keeps up: the path is the thread's 28 µs and 0.1 µs
    # of H2D a frame. Untraced the thread's own time is 14 µs and one synchronize a frame waits 5 µs, of
    # which 2 µs is a synchronize's own cost (the latency program's): the frame is 14 + 5 = 19 µs, the host's
    # 14 + 2, and the GPU held the thread 3 µs, of which the traced path's GPU parts give 0.1
    path = _path(path_us=28.1, engines_us={"h2d": 0.1}, idle_us=0.0, idle_gaps=0.0, launch_us=0.0, launches=0.0,
                 launches_after_wake=0.0, launch_after_wake_us=0.0, op_us={"h2d": 40.0},
                 hosts=(PathHost(7, "daq", 28.0, 0.0, 0.0, 28.0, blocked_us=0.0),))
    bar = ThreadBar(100, "daq", 100, 14.0, 8.0, 5.0, 0.0, None, 1.0, 5.0)
    split = untraced_split(path, HostFrame(100, 19.0, None, None, 14.0, (bar,), "auto"), _idle_costs(2000.0))
    parts = {p.resource: p for p in split.parts}
    assert set(parts) == {"h2d", "host:7", "gpu_held"}
    assert parts["host:7"].untraced_us == pytest.approx(16.0)
    assert parts["gpu_held"].traced_us == 0.0 and parts["gpu_held"].untraced_us == pytest.approx(2.9)
    assert parts["gpu_held"].profiler_us == pytest.approx(-2.9)  # the profiler took the wait away
    assert "3.00 µs" in parts["gpu_held"].how and "0.10 µs" in parts["gpu_held"].how
    assert split.untraced_sum_us == pytest.approx(19.0) and split.miss == pytest.approx(0.0)
    # a synchronize's own cost not measured: the whole wait is the GPU's, the host its library time alone
    bare = {p.resource: p for p in untraced_split(path, HostFrame(100, 19.0, None, None, 14.0, (bar,), "auto"),
                                                   _idle_costs(None)).parts}
    assert bare["host:7"].untraced_us == pytest.approx(14.0) and bare["gpu_held"].untraced_us == pytest.approx(4.9)
    assert "not measured" in bare["gpu_held"].how
    # the traced path's GPU parts cover the wait: no such part
    busy = _path(path_us=28.1, engines_us={"h2d": 3.5}, idle_us=0.0, idle_gaps=0.0, launch_us=0.0, launches=0.0,
                 launches_after_wake=0.0, launch_after_wake_us=0.0, op_us={"h2d": 40.0},
                 hosts=(PathHost(7, "daq", 24.6, 0.0, 0.0, 28.0, blocked_us=0.0),))
    assert "gpu_held" not in {p.resource for p in untraced_split(busy, HostFrame(100, 19.0, None, None, 14.0, (bar,),
                                                                                    "auto"), _idle_costs(2000.0)).parts}
    # two threads marked untraced: one thread's waits no longer bound the frame's GPU time
    other = ThreadBar(101, "feed", 100, 10.0, 2.0, 0.0, 0.0, None, 0.0, None)
    two = untraced_split(path, HostFrame(100, 19.0, None, None, 14.0, (bar, other), "auto"), _idle_costs(2000.0))
    assert "gpu_held" not in {p.resource for p in two.parts}


def test_the_untraced_split_by_hand() -> None:
    split = untraced_split(_path(), _host(50.0), _costs())
    parts = {p.resource: p for p in split.parts}
    assert set(parts) == {"h2d", "d2h", "kernel", "memset", "gpu_latency", "round_trip", "host:7"}  # no other launch
    for e in ("h2d", "d2h", "kernel", "memset"):
        assert parts[e].untraced_us == parts[e].traced_us
    assert parts["gpu_latency"].untraced_us == pytest.approx(3 * 4.75)  # 3 gaps a frame × 4.75 µs
    assert parts["round_trip"].traced_us == pytest.approx(5.0 + 6.0)  # the wake and the launch after it
    # the wake at the latency program's 4.0 µs untraced; the path's own launch after it (6.0 µs traced) scaled
    # by what the profiler does to a launch: the latency program's launch median 5.4 µs untraced, 9.0 under nsys
    assert parts["round_trip"].untraced_us == pytest.approx(1 * 4.0 + 6.0 * 5.4 / 9.0)
    assert "× 0.60" in parts["round_trip"].how
    assert parts["host:7"].traced_us == pytest.approx(8.0)  # 13 on the path less its 5 µs of wake
    assert parts["host:7"].untraced_us == pytest.approx(5.5)  # one turn a frame × 5.5 µs, nothing else
    assert split.traced_us == 60.0
    assert split.untraced_sum_us == pytest.approx(21.0 + 14.25 + 7.6 + 5.5)
    assert split.profiler_us == pytest.approx(60.0 - 48.35)
    assert sum(p.profiler_us for p in split.parts) == pytest.approx(split.profiler_us)
    assert split.frame_us == 50.0 and split.agrees is True and split.miss == pytest.approx(48.35 / 50 - 1)
    far = untraced_split(_path(), _host(40.0), _costs())
    assert far.agrees is False and f"±{int(SPLIT_TOLERANCE * 100)} %" in far.note
    # a launch not after a wake is scaled the same way; without the latency program's run under the profiler
    # each launch is its kernel launch from an empty queue, untraced (5.4 µs)
    other = untraced_split(_path(launches=3.0, launch_us=10.0), _host(50.0), _costs())
    assert {p.resource: p for p in other.parts}["launch"].untraced_us == pytest.approx((10.0 - 6.0) * 5.4 / 9.0)
    alone = {p.resource: p for p in untraced_split(_path(launches=3.0, launch_us=10.0), _host(50.0),
                                                    _costs(traced=False)).parts}
    assert alone["launch"].untraced_us == pytest.approx(2 * 5.4) and "no run under the profiler" in alone["launch"].how
    assert alone["round_trip"].untraced_us == pytest.approx(4.0 + 1 * 5.4)


def test_a_gap_is_never_priced_above_its_traced_length() -> None:
    # the unit's latency is 4.75 µs a gap (above); a program whose 2 gaps a frame took 3.0 µs in all as traced
    # (a graph's nodes, one after the other on the GPU) is priced at its traced 1.5 µs a gap: the profiler
    # adds to a gap and never takes from it
    split = untraced_split(_path(idle_us=3.0, idle_gaps=2.0), _host(50.0), _costs())
    gl = {p.resource: p for p in split.parts}["gpu_latency"]
    assert gl.untraced_us == pytest.approx(3.0) and gl.profiler_us == pytest.approx(0.0)
    assert "1.50 µs" in gl.how and "at most the gaps' traced mean" in gl.how and "(4.75 µs)" in gl.how
    causes = idle_causes(_path(idle_us=3.0, idle_gaps=2.0), _costs())
    assert causes.gpu_own_us == pytest.approx(3.0) and "which bounds it" in causes.note
    # gaps longer than the unit's latency are priced at the unit's, and say nothing of a bound
    long = {p.resource: p for p in untraced_split(_path(), _host(50.0), _costs()).parts}["gpu_latency"]
    assert long.untraced_us == pytest.approx(3 * 4.75) and "at most" not in long.how


def test_stored_records_are_priced_again_by_the_script(tmp_path) -> None:
    import subprocess
    import sys
    from pathlib import Path

    from clusterbench.model.untraced import UntracedRecord

    # a record as probe --what-binds stores it, with the split it was stored with (50.15 µs: the launch after the
    # wake at the latency program's 5.4 µs); priced now, that launch is its 6.0 µs traced × 5.4 / 9.0: 48.35 µs
    doc = UntracedRecord(_host(50.0), None, _costs(), _path()).to_json()
    doc["split"] = {"untraced_sum_us": 50.15, "frame_us": 50.0}
    folder = tmp_path / "2026-12-07_h100-one-unit" / "results" / "2026-12-07_exec_daq"
    folder.mkdir(parents=True)
    (folder / "daq.untraced.json").write_text(json.dumps(doc))
    (folder / "other.untraced.json").write_text("{not json")
    (folder / "text.untraced.json").write_text(json.dumps({**doc, "split": {"untraced_sum_us": "50", "frame_us": 50.0}}))
    root = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, str(root / "benchmarks" / "resplit_records.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    (line,) = [ln for ln in res.stdout.splitlines() if ln.strip().startswith("daq ")]
    assert line.split()[1:] == ["50.00", "50.15", "+0.3%", "48.35", "-3.3%"]
    assert "2026-12-07_h100-one-unit" in res.stdout and "1 of 1 as stored, 1 of 1" in res.stdout
    assert "other.untraced.json: left out" in res.stderr
    assert "text.untraced.json: left out (split.untraced_sum_us and split.frame_us must be numbers" in res.stderr
    empty = subprocess.run([sys.executable, str(root / "benchmarks" / "resplit_records.py"), str(folder.parent)],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert empty.returncode == 0
    (folder / "daq.untraced.json").unlink()
    (folder / "text.untraced.json").unlink()
    none = subprocess.run([sys.executable, str(root / "benchmarks" / "resplit_records.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert none.returncode == 2 and "no record with an untraced split" in none.stderr


def test_the_scripts_what_if_puts_the_paths_launch_and_gaps_inside_the_holds() -> None:
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "resplit_records", Path(__file__).resolve().parents[2] / "benchmarks" / "resplit_records.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    # a graph launch the GPU held through the path's 21 µs of GPU work, stored with no idle inside its holds:
    # the path's launch (6 µs, one) and its 3 gaps (20 µs) become the holds'
    held = PathHost(7, "daq", 13.0, 5.0, 1.0, 20.0, 8.0, 1.0, 21.0)
    out = mod.held_idle_as_path(_path(hosts=(held,)))
    (h,) = out.hosts
    assert (h.held_lead_us, h.held_leads, h.held_gap_us, h.held_gaps) == (6.0, 1.0, 20.0, 3.0)
    # held for less than 90 % of the GPU's work on the path (a DAQ loop's launches, held now and then): as is
    light = _path(hosts=(PathHost(7, "daq", 13.0, 5.0, 1.0, 20.0, 8.0, 1.0, 18.0),))
    assert mod.held_idle_as_path(light) is light
    # as much idle already stored inside the holds, or two threads: as is
    stored = _path(hosts=(PathHost(7, "daq", 13.0, 5.0, 1.0, 20.0, 8.0, 1.0, 21.0, 6.0, 1.0, 20.0, 3.0),))
    assert mod.held_idle_as_path(stored) is stored
    two = _path(hosts=(held, PathHost(8, "b", 1.0, 0.0, 0.0, 2.0, 0.0, 0.0, 21.0)))
    assert mod.held_idle_as_path(two) is two


def test_a_split_with_a_part_not_measured_adds_up_to_nothing() -> None:
    split = untraced_split(_path(), _host(50.0), None)
    assert split.untraced_sum_us is None and split.agrees is None
    assert "gpu_latency" in split.note and "round_trip" in split.note


def test_the_host_part_of_a_host_bound_thread() -> None:
    # no turns: 50.9 of its 51.5 µs of own time are on the path; that share of 40 µs untraced
    h = PathHost(1, "t", 51.0, 0.1, 0.03, 51.5, 0.0, 0.0)
    bar = ThreadBar(1, "t", 1000, 40.0, 10.0, 0.0, 0.0, None)
    us, how = host_part(h, bar)
    assert us == pytest.approx(50.9 / 51.5 * 40.0) and "the share the path held" in how
    assert host_part(h, None)[0] is None
    turns_without_waits = PathHost(1, "t", 40.0, 2.0, 1.0, 45.0, 35.0, 1.0)
    assert host_part(turns_without_waits, bar)[0] is None  # turns on the path, and no wait timed untraced


def test_the_host_part_counts_the_synchronizes_own_cost() -> None:
    # the DAQ-like loop at 4 streams: the path holds all 26 µs of its own time as traced (a synchronize's own
    # part included: it waited for nothing); the library's 13.87 µs leave its one synchronize a frame out,
    # which the latency program prices at 1.71 µs (the thread's own mean, 1.87 µs, is more)
    h = PathHost(1, "t", 26.0, 0.0, 0.0, 26.0, 0.0, 0.0, 0.0)
    bar = ThreadBar(1, "t", 1000, 13.87, 16.0, 1.87, 0.0, None, 1.0, 1.87)
    us, how = host_part(h, bar, None, _idle_costs(1710.0))
    assert us == pytest.approx(13.87 + 1.71) and "with 1.71 µs its synchronizes' own cost" in how
    # the latency program's idle synchronize not measured (an older record): the library's time as it is
    us, how = host_part(h, bar, None, _idle_costs(None))
    assert us == pytest.approx(13.87) and "synchronizes" not in how
    # a thread whose own synchronizes are cheaper than the latency program's: its own mean
    cheap = ThreadBar(1, "t", 1000, 13.87, 16.0, 1.0, 0.0, None, 2.0, 0.5)
    assert host_part(h, cheap, None, _idle_costs(1710.0))[0] == pytest.approx(13.87 + 2 * 0.5)


def test_the_host_part_leaves_out_the_calls_the_gpu_held() -> None:
    # a graph launch that returns once its graph has run: the trace's own time (12.5 µs a frame) leaves out
    # the 10.5 µs the GPU held the call, the library's 22.6 µs hold them; the path holds 6 of the 12.5 µs
    held = PathHost(1, "t", 6.0, 0.0, 0.0, 12.5, 0.0, 0.0, 10.5)
    bar = ThreadBar(1, "t", 1000, 22.6, 2.0, 0.0, 0.0, None)
    us, how = host_part(held, bar)
    assert us == pytest.approx(6.0 / 12.5 * (22.6 - 10.5)) and "less 10.50 µs the GPU held its calls" in how
    # a record written before the held time was kept: the library's own time whole, as before
    unknown = PathHost(1, "t", 6.0, 0.0, 0.0, 12.5, 0.0, 0.0)
    us, how = host_part(unknown, bar)
    assert us == pytest.approx(6.0 / 12.5 * 22.6) and "not recorded" in how
    # held longer than the library's own time (the profiler lengthened the held part): no negative time
    assert host_part(PathHost(1, "t", 6.0, 0.0, 0.0, 12.5, 0.0, 0.0, 30.0), bar)[0] == 0.0


class _HeldRecord:
    """The fields of analyzers.held.Held that held_idle reads."""

    def __init__(self, calls: list[int], release: list[int], wait: list[bool], cause: list[str | None]) -> None:
        self.call, self.release, self.wait = np.array(calls), np.array(release), np.array(wait)
        self.cause = np.array([-1 if c is None else BLOCK_CAUSES.index(c) for c in cause], dtype=np.int8)

    def __len__(self) -> int:
        return int(self.call.size)


_GRAPH_CAT, _COPY_CAT, _WAIT_CAT = (S.API_CODE[c] for c in ("graph_launch", "copy", "wait"))
_KERNEL_E, _H2D_E, _D2H_E, _MEMSET_E = (S.ENGINES.index(e) for e in ("kernel", "h2d", "d2h", "memset"))


def test_the_gpu_idle_inside_held_calls_by_hand() -> None:
    # thread 0: a graph launch [100, 300] held until its last row ends (280): memset 130-150, kernel 160-200,
    # d2h 210-280, so idle 100-130 (its launch), 150-160 and 200-210 (gaps); a launch [400, 500] held by
    # earlier work (gpu_behind), the GPU busy 390-450 and 460-480: one gap 450-460, no launch; a synchronize
    # (never counted). Thread 1: a pageable copy [300, 390] whose idle stretches are its own staging: left out.
    links = SimpleNamespace(cstart=np.array([100, 400, 500, 300]), cthread=np.array([0, 0, 0, 1]),
                            ccat=np.array([_GRAPH_CAT, S.API_CODE["launch"], _WAIT_CAT, _COPY_CAT]),
                            start=np.array([20, 130, 160, 210, 350, 390, 460]),
                            end=np.array([60, 150, 200, 280, 380, 450, 480]),
                            engine=np.array([_KERNEL_E, _MEMSET_E, _KERNEL_E, _D2H_E, _H2D_E, _KERNEL_E, _KERNEL_E]),
                            pageable=np.array([False, False, False, False, True, False, False]),
                            n_rows=7, engine_lo=np.array([0]), engine_hi=np.array([7]))  # one engine, start order
    held = _HeldRecord([0, 1, 2, 3], [280, 480, 480, 380], [False, False, True, False],
                 ["graph", "gpu_behind", None, "pageable"])
    assert held_idle(links, held, (np.array([0]), np.array([600]))) == {0: (30, 1, 30, 3)}
    # the window cuts the graph launch at 205: its last gap is 200-205, and the later launch is outside
    assert held_idle(links, held, (np.array([0]), np.array([205]))) == {0: (30, 1, 15, 2)}
    assert held_idle(links, _HeldRecord([3], [380], [False], ["pageable"]), (np.array([0]), np.array([600]))) == {}


def _graph_links(engines: list[int], pageable: list[bool], start: list[int], end: list[int]) -> SimpleNamespace:
    """One graph launch [100, 400] on thread 0 and its nodes' rows (one engine order: start order)."""
    return SimpleNamespace(cstart=np.array([100]), cthread=np.array([0]), ccat=np.array([_GRAPH_CAT]),
                           start=np.array(start), end=np.array(end), engine=np.array(engines),
                           pageable=np.array(pageable), n_rows=len(start), engine_lo=np.array([0]),
                           engine_hi=np.array([len(start)]))


def test_a_graph_launch_held_by_its_pageable_copy_node_keeps_the_gpu_idle() -> None:
    # jacobiCudaGraphs' shape: memset 130-140, kernel 150-250, then a D2H node into pageable memory 262-270
    # holds the launch until it lands (the cause is "pageable"); the launch 100-130 and the two gaps
    # 140-150 and 250-262 are the GPU's, not the host staging a copy
    links = _graph_links([_MEMSET_E, _KERNEL_E, _D2H_E], [False, False, True], [130, 150, 262], [140, 250, 270])
    held = _HeldRecord([0], [270], [False], ["pageable"])
    assert held_idle(links, held, (np.array([0]), np.array([1000]))) == {0: (30, 1, 22, 2)}
    # a pageable D2H node in two chunks (262-270, 300-310): the stretch between them is the host copying the
    # first chunk out, so it is left out; the one before the first chunk stays a gap
    links = _graph_links([_MEMSET_E, _KERNEL_E, _D2H_E, _D2H_E], [False, False, True, True],
                         [130, 150, 262, 300], [140, 250, 270, 310])
    assert held_idle(links, _HeldRecord([0], [310], [False], ["pageable"]),
                     (np.array([0]), np.array([1000]))) == {0: (30, 1, 22, 2)}
    # a pageable H2D node first (200-240, after the host staged it from 100): that stretch is staging, and
    # the gap 240-250 before the kernel is the GPU's
    links = _graph_links([_H2D_E, _KERNEL_E], [True, False], [200, 250], [240, 300])
    assert held_idle(links, _HeldRecord([0], [240], [False], ["pageable"]),
                     (np.array([0]), np.array([1000]))) == {0: (0, 0, 0, 0)}
    assert held_idle(links, _HeldRecord([0], [300], [False], ["pageable"]),
                     (np.array([0]), np.array([1000]))) == {0: (0, 0, 10, 1)}


def test_the_gpu_idle_inside_graph_launches_held_by_a_pageable_node_on_a_real_trace() -> None:
    # the zoo's graph_block --pageable d2h (H200, nodes traced): each cudaGraphLaunch returns once the graph's
    # D2H into pageable memory has landed. Worked out from the export with SQL alone: per launch in the
    # NVTX "loop" range, [its start, min(its D2H row's end, its end)] less every GPU row of the process
    import sqlite3

    from clusterbench.analyzers import untraced as U
    from clusterbench.analyzers.analysis import analyze, load_trace

    path = DATA / "zoo" / "zoo_graph_block_d2h_node.sqlite"
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    lo, hi = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text = 'loop'").fetchone()
    rows = sorted(con.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL "
                              "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL "
                              "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMSET"))
    holds = con.execute(
        "SELECT r.start, min(m.end, r.end) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
        "JOIN CUPTI_ACTIVITY_KIND_MEMCPY m ON m.correlationId = r.correlationId AND m.copyKind = 2 "
        "WHERE s.value LIKE 'cudaGraphLaunch%' AND m.dstKind = 0").fetchall()
    con.close()
    lead_ns = leads = gap_ns = gaps = 0
    for cs, rel in holds:
        a, b = max(cs, lo), min(rel, hi)
        if b <= a:
            continue
        t = a  # walk the GPU rows through the hold: what no row covers is idle
        for s, e in rows:
            if e <= t or s >= b:
                continue
            if s > t:
                if t == cs:
                    lead_ns, leads = lead_ns + s - t, leads + 1
                else:
                    gap_ns, gaps = gap_ns + s - t, gaps + 1
            t = max(t, e)
        if t < b:
            gap_ns, gaps = gap_ns + b - t, gaps + 1
    assert leads >= 150 and gaps >= 2 * leads  # the launch and the gaps between the graph's nodes, every frame
    data = load_trace(path)
    _, links, held = U.group_links(data, analyze(data).primary)
    assert held_idle(links, held, (np.array([lo]), np.array([hi]))) == {0: (lead_ns, leads, gap_ns, gaps)}
    # the critical path (walked apart from the holds) puts its launch and its idle gaps inside them: the split's
    # launch and gpu_latency parts are the same stretches the host part now takes off the library's own time
    from clusterbench.analyzers.analysis import request

    req = request(window="range:loop", frames_spec="kernel:zoo_calib")
    cache: dict = {}
    data = load_trace(path, req=req, cache=cache)
    ps = U.path_structure(data, analyze(data, req=req, cache=cache).primary)
    (h,) = ps.hosts
    assert (h.held_leads, h.held_gaps) == (pytest.approx(ps.launches), pytest.approx(ps.idle_gaps))
    assert h.held_lead_us == pytest.approx(ps.launch_us, rel=0.01) and h.held_gap_us == pytest.approx(ps.idle_us, rel=0.01)


def test_the_host_part_leaves_out_the_gpu_idle_inside_held_calls() -> None:
    # 20 µs of own time as traced, of which a held graph launch's launch (4 µs, one a frame) and two gaps
    # (5 µs) are the GPU's; untraced the launch is scaled by the latency program's 5.4 / 9.0 µs (2.4 µs) and the
    # gaps are 2 × 2.0 µs; the library's 25 µs less 10 µs the GPU worked, less those 6.4 µs, is 8.6 µs, of which
    # the path holds the share it held as traced: 6 of the 20 - 9 = 11 µs
    h = PathHost(1, "t", 6.0, 0.0, 0.0, 20.0, 0.0, 0.0, 10.0, 4.0, 1.0, 5.0, 2.0)
    bar = ThreadBar(1, "t", 1000, 25.0, 20.0, 0.0, 0.0, None)
    us, how = host_part(h, bar, 2.0, _costs())
    assert us == pytest.approx(6.0 / 11.0 * (25.0 - 10.0 - 4.0 * 5.4 / 9.0 - 2 * 2.0))
    assert "6.40 µs the GPU idled inside them untraced (1.00 launches, 2.00 gaps × 2.00 µs)" in how
    # no latency measured: the gaps as traced; no launch measured either: the launch as traced
    us, how = host_part(h, bar, None, None)
    assert us == pytest.approx(6.0 / 11.0 * (25.0 - 10.0 - 4.0 - 5.0)) and "as traced: no latency measured" in how
    # a trace with next to none (jacobiCudaGraphs traced node by node: 0.0004 µs a frame) is not named in the words
    tiny = PathHost(1, "t", 6.0, 0.0, 0.0, 20.0, 0.0, 0.0, 10.0, 0.0004, 0.0003, 0.0, 0.0)
    us, how = host_part(tiny, bar, 2.0, _costs())
    assert us == pytest.approx(6.0 / (20.0 - 0.0004) * (25.0 - 10.0 - 0.0004 * 5.4 / 9.0)) and "idled" not in how
    # a record written before these were kept reads them as none: the host part as before
    old = PathHost.from_json({k: v for k, v in h.to_json().items() if not k.startswith("held_")})
    assert host_part(old, bar, 2.0, _costs())[0] == pytest.approx(6.0 / 20.0 * (25.0 - 10.0))
    assert PathHost.from_json(h.to_json()) == h


def test_a_graph_launch_the_gpu_held_is_kept_apart_on_the_path() -> None:
    from clusterbench.analyzers.analysis import analyze, load_trace, request

    req = request(frames_spec="graph")
    cache: dict = {}
    data = load_trace(DATA / "samples" / "sample_jacobiCudaGraphs_graph.sqlite", req=req, cache=cache)
    g = analyze(data, req=req, cache=cache).primary
    p = path_structure(data, g)
    (h,) = p.hosts
    (t,) = g.host.threads
    # jacobiCudaGraphs' cudaGraphLaunch returns once its graph has run: most of its own time is held
    assert t.blocked_ns > 0.4 * t.busy_ns
    assert h.blocked_us == pytest.approx(t.blocked_ns / 1e3 / t.frames) and h.work_us == pytest.approx(t.work_us_per_frame)
    # traced as whole graphs (one row a launch): inside a held launch the GPU idles only before its graph starts
    assert h.held_gaps == 0.0 and 0.0 < h.held_leads <= 1.0 and h.held_lead_us > 0.0
    assert h.held_lead_us < h.work_us - h.path_us  # off the path's host part: the launch, not the host


def test_idle_by_cause() -> None:
    idle = idle_causes(_path(), _costs())
    # 3 gaps a frame: 4.75 µs each untraced, 7.75 under nsys ((52 - 21) / 4)
    assert idle.gpu_own_us == pytest.approx(14.25)
    assert idle.profiler_us == pytest.approx(9.0)
    assert idle.unexplained_us == pytest.approx(20.0 - 14.25 - 9.0)
    assert idle.round_trip_us == pytest.approx(10.0) and "round_trip" in idle.note
    alone = idle_causes(_path(), _costs(traced=False))
    assert alone.profiler_us is None and alone.unexplained_us == pytest.approx(20.0 - 14.25)
    assert "not told apart" in alone.note
    assert idle_causes(_path(), None).gpu_own_us is None


def test_threads_match_by_name_else_by_rank() -> None:
    hosts = (PathHost(11, "feed-0", 1.0, 0.0, 0.0, 20.0), PathHost(12, "feed-1", 1.0, 0.0, 0.0, 30.0))
    bars = (ThreadBar(901, "feed-1", 10, 25.0, 0, 0, 0, None), ThreadBar(900, "feed-0", 10, 15.0, 0, 0, 0, None))
    assert {k: v.tid for k, v in match_threads(hosts, bars).items()} == {11: 900, 12: 901}
    unnamed = (PathHost(11, None, 1.0, 0.0, 0.0, 20.0), PathHost(12, None, 1.0, 0.0, 0.0, 30.0))
    assert {k: v.tid for k, v in match_threads(unnamed, bars).items()} == {12: 901, 11: 900}
