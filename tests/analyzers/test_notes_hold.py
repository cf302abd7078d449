"""Every "why" note must hold for the trace it is printed on: on every real trace (tests/data/zoo,
tests/data/h200), each rule that fired is checked against what it claims, worked out again from the
raw rows (tests/oracle.py: plain sqlite3 and Python, no clusterbench code), and the threshold rules
are checked the other way too: when the raw rows meet a rule's condition, the rule fires. The numbers a
note prints are the numbers the analysis holds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

import path_oracle
from clusterbench.analyzers import analyze_trace
from oracle import (
    SYNC_COPIES,
    clip_set,
    drained,
    kind,
    minus,
    read_raw,
    ref_gaps,
    ref_threads,
    total,
    union,
)

DATA = Path(__file__).resolve().parents[1] / "data"
TRACES = (sorted((DATA / "zoo").glob("*.sqlite")) + sorted((DATA / "h200").glob("*.sqlite"))
          + sorted((DATA / "samples").glob("*.sqlite")))
GPU_ENGINES = ("kernel", "graph", "h2d", "d2h", "d2d", "p2p", "memset", "other")  # the order ties go by
TRANSFERS = ("h2d", "d2h", "d2d", "p2p")
CEILING = {"h2d": 1000, "d2h": 1000, "d2d": 10_000, "p2p": 10_000, "memset": 10_000, "other": 10_000}  # GB/s


def frames_spec(path: Path) -> str | None:
    """The zoo programs' frames (one launch of their kernel, or one graph execution); the H200 traces
    carry frames=N in their pass range; NVIDIA's samples have no frames (totals only)."""
    if path.parent.name != "zoo":
        return None
    if "device_graph" in path.name or path.stem.endswith("_graph"):
        return "graph"  # a graph-level trace: a frame is one graph execution
    if "queue_fill" in path.name:
        return "kernel:zoo_spin"
    return "kernel:zoo_calib_jit" if "no_nvtx" in path.name else "kernel:zoo_calib"


@dataclass
class Ref:
    """The reference reading of one group's window, from the raw rows."""

    window: list[tuple[int, int]]
    bars: dict[str, int]  # engine -> busy (union in the window)
    streams: dict[str, int]  # engine -> streams with >= 1 % of its time in the window
    n_streams: int
    any_busy: int
    overlap: int  # time with two or more engines busy
    setup: list[tuple[int, int]]
    loop_gaps: int
    gaps: list
    steady: int
    steady_idle: int
    threads: dict
    host_sync: int
    sync_copy: int
    drained: int  # GPU idle in the stretches where the waits end, without set-up gaps
    pageable: int  # pageable bytes in the window (a copy cut by the window: in proportion)
    copied: int
    implausible: int
    graph_rows: int
    blocked: dict  # tid -> cause -> blocked ns (launching threads, inside the window)
    work: dict  # tid -> work ns (busy less blocked)
    blocked_calls: list  # the held non-synchronizing calls (path_oracle.Held) of the launching threads, blocked in the window


def _two_or_more(sets: list[list[tuple[int, int]]]) -> int:
    ev = sorted([(s, 1) for u in sets for s, _ in u] + [(e, -1) for u in sets for _, e in u])
    out, active, last = 0, 0, None
    for t, d in ev:
        if active >= 2 and last is not None:
            out += t - last
        active += d
        last = t
    return out


def reference(raw, g, export=None) -> Ref:
    pid = g.pid
    window = list(zip(g.window.starts_ns.tolist(), g.window.ends_ns.tolist()))
    recs = [r for r in raw.recs if r.pid == pid]
    unions = {}
    streams = {}
    per_stream_all: dict[int, int] = {}
    for e in GPU_ENGINES:
        rows = [r for r in recs if r.engine == e]
        ok = []
        for r in rows:
            dur = max(r.end - r.start, 1)
            if e in CEILING and r.bytes > CEILING[e] * dur:
                continue
            ok.append(r)
        inside = [r for r in ok if sum(max(0, min(r.end, b) - max(r.start, a)) for a, b in window) > 0]
        if not inside:
            continue
        unions[e] = clip_set(union([(r.start, r.end) for r in inside]), window)
        per: dict[int, int] = {}
        for r in inside:
            ln = sum(max(0, min(r.end, b) - max(r.start, a)) for a, b in window)
            per[r.stream] = per.get(r.stream, 0) + ln
            per_stream_all[r.stream] = per_stream_all.get(r.stream, 0) + ln
        streams[e] = sum(1 for v in per.values() if v >= 0.01 * sum(per.values()))
    bars = {e: total(u) for e, u in unions.items()}
    busy_all = union([iv for u in unions.values() for iv in u])
    gaps = [x for a, b in window for x in ref_gaps(raw, pid, a, b)]
    setup = [(x.start, x.end) for x in gaps if x.setup]
    steady = minus(window, setup)
    steady_len = total(steady)
    steady_idle = steady_len - total(clip_set(busy_all, steady))
    threads = ref_threads(raw, pid, window, setup)
    waits = union([(c.start, c.end) for c in raw.calls if c.pid == pid and kind(c.name) == "wait"])
    sync_copies = union([(c.start, c.end) for c in raw.calls if c.pid == pid and c.name in SYNC_COPIES])
    pageable = copied = 0
    implausible = 0
    for r in recs:
        if r.engine not in CEILING:
            continue
        dur = max(r.end - r.start, 1)
        ln = sum(max(0, min(r.end, b) - max(r.start, a)) for a, b in window)
        touch = ln > 0 or (r.end <= r.start and any(a <= r.start <= b for a, b in window))
        if not touch:
            continue
        if r.bytes > CEILING[r.engine] * dur:
            implausible += 1
            continue
        part = r.bytes if ln == r.end - r.start or r.end <= r.start else r.bytes * ln / (r.end - r.start)
        if r.engine != "memset":
            copied += part
            if r.pageable:
                pageable += r.bytes
    held = path_oracle.held_calls(export, pid, g.device, window) if export is not None else []
    blocked = path_oracle.blocked_by_thread(held, set(threads))
    work = {t: r.busy - min(r.busy, sum(blocked[t].values())) for t, r in threads.items()}
    blocked_calls = [h for h in held if not h.wait and h.blocked > 0 and h.call.tid in threads]
    return Ref(window, bars, streams, sum(1 for v in per_stream_all.values() if v >= 0.01 * sum(per_stream_all.values())),
               total(busy_all), _two_or_more(list(unions.values())), setup, sum(x.end - x.start for x in gaps if not x.setup),
               gaps, steady_len, steady_idle, threads, total(clip_set(waits, window)), total(clip_set(sync_copies, window)),
               drained(raw, pid, steady), pageable, round(copied), implausible,
               sum(1 for r in recs if r.engine == "graph" and any(min(r.end, b) > max(r.start, a) for a, b in window)),
               blocked, work, blocked_calls)  # fmt: skip


_RAW: dict = {}


def raw_calls(g, tid: int) -> list:
    """The raw calls of thread ``tid`` of the group's process (read once per trace)."""
    return [c for c in _RAW["raw"].calls if c.pid == g.pid and c.tid == tid]


def per_frame(g, ns: float) -> str:
    return f"{ns / 1000 / g.frames.count:,.2f} µs/frame" if g.frames.count else f"{ns / 1e6:,.3f} ms"


@pytest.fixture(params=[(p, w) for p in TRACES for w in ("auto", "span")], ids=lambda x: f"{x[0].parent.name}/{x[0].stem}-{x[1]}")
def traced(request: pytest.FixtureRequest):
    path, window = request.param
    g = analyze_trace(path, frames_spec=frames_spec(path), window=window).primary
    raw = read_raw(path)
    _RAW["raw"] = raw
    return g, reference(raw, g, path_oracle.read(path))


def test_every_note_holds(traced) -> None:
    g, ref = traced
    notes = {f.code: f.message for f in g.findings}
    length = sum(b - a for a, b in ref.window)
    top_gpu = max(ref.bars.values())
    host = max(ref.threads.values(), key=lambda t: ref.work[t.tid], default=None)
    host_work = ref.work[host.tid] if host else 0
    tallest = max(top_gpu, host_work)
    hidden = [x for x in ref.gaps if x.cause == "sync" and x.end - x.start >= 1_000_000]
    waited = sum(x.end - x.start for x in hidden)

    # the GPU's work is not in the trace: the threads waited through idle gaps of >= 1 ms, >= 10 % of the window
    assert ("work_not_traced" in notes) == (waited >= 0.10 * length)
    if "work_not_traced" in notes:
        assert f"for {waited / 1e6:,.3f} ms ({100 * (waited / length):.0f} % of the window)" in notes["work_not_traced"]
        assert set(notes) <= {"work_not_traced", "graph_level", "implausible_rate"}
        return

    assert ("graph_level" in notes) == (ref.graph_rows > 0)
    setup = sum(b - a for a, b in ref.setup)
    assert ("setup_gaps" in notes) == (setup >= 0.01 * length and setup > 0)
    if "setup_gaps" in notes:
        n = len(ref.setup)
        assert f"{n:,} set-up gap{'s' if n != 1 else ''} ({setup / 1e6:,.3f} ms" in notes["setup_gaps"]
        longest = max((x for x in ref.gaps if x.setup), key=lambda x: x.end - x.start)
        assert f"the longest is {(longest.end - longest.start) / 1e6:,.3f} ms" in notes["setup_gaps"]
        phrase = {"module_load": "loaded GPU code", "alloc": "allocated or freed", "profiler": "profiler's own overhead",
                  "sync": "waited in", "host": "ran host code"}[longest.cause]  # fmt: skip
        assert phrase in notes["setup_gaps"]

    # the tallest bar: the GPU engines' busy time, and the launching threads' work (busy less blocked)
    setup_iv = [(x.start, x.end) for x in ref.gaps if x.setup]
    for tid, t in ref.threads.items():
        x = next(y for y in g.host.threads if y.thread.tid == tid)
        # work + blocked + wait = the thread's active time (first to last call in the window) less set-up gaps
        mine = [c for c in raw_calls(g, tid) if any(min(c.end, b) > max(c.start, a) or (c.start == c.end and a <= c.start <= b)
                                                     for a, b in ref.window)]  # fmt: skip
        span = [(min(c.start for c in mine), max(c.end for c in mine))]
        active_steady = total(clip_set(span, minus(ref.window, setup_iv)))
        assert x.work_ns + x.blocked_ns + x.wait_ns == active_steady
        assert (x.busy_ns, x.blocked_ns, x.work_ns) == (t.busy, min(t.busy, sum(ref.blocked[tid].values())), ref.work[tid])
        assert dict(x.blocked_by_cause) == {k: v for k, v in ref.blocked[tid].items() if v}
    view = g.binding.view if g.binding is not None else "tallest_bar"
    # where the critical path binds, its note says so and `binds` gives way
    assert ("binds" in notes) == (view != "critical_path")
    if host is not None and host_work > top_gpu:
        assert g.roofline.engine == "host" and g.roofline.thread.tid == host.tid
        if "binds" in notes:
            assert f"is the tallest bar at {per_frame(g, host_work)}" in notes["binds"]
    else:
        engine = min((e for e, v in ref.bars.items() if v == top_gpu), key=GPU_ENGINES.index)
        assert g.roofline.engine == engine
        said = {"tallest_bar": f"{engine} binds: the tallest bar at", "both": f"{engine} is the tallest bar at"}.get(view)
        if said is not None:
            assert f"{said} {per_frame(g, top_gpu)}" in notes["binds"]
        if view == "both":
            assert "(see critical_path)" in notes["binds"]
    assert ("host_binds" in notes) == (g.roofline.engine == "host")
    if "host_binds" in notes:
        t = ref.threads[g.roofline.thread.tid]
        work, blocked = ref.work[t.tid], t.busy - ref.work[t.tid]
        assert all(work > v for v in ref.bars.values())  # strictly above every GPU bar
        share = (t.ns["wait"] + blocked) / (t.busy + t.ns["wait"])
        assert f"waits for the GPU {per_frame(g, t.ns['wait'] + blocked)} ({100 * share:.0f} %" in notes["host_binds"] or (
            f"It waits for the GPU {100 * share:.0f} % of its time" in notes["host_binds"] and share < 0.10)
        assert f"works {per_frame(g, work)}" in notes["host_binds"]

    # the one verdict: where the loop lies between the tallest bar and the sum of the bars
    assert ("critical_path" in notes) == (g.critical_path is not None)
    if g.critical_path is not None:
        cp = g.critical_path
        loop = ref.steady
        assert cp.total_ns == length and cp.loop_ns == loop and sum(cp.to_json()["shares"].values()) == pytest.approx(1.0)
        bars_sum = sum(ref.bars.values()) + host_work
        x = (loop - tallest) / (bars_sum - tallest) if bars_sum > tallest else float("inf")
        res = f"host:{host.tid}" if tallest == host_work and host_work > top_gpu else g.roofline.engine
        on_path = sum(q.loop_ns for q in cp.parts if q.resource == res) / loop
        want = ("tallest_bar" if tallest >= 0.9 * loop or (x <= 1 / 3 and on_path >= 0.5)
                else "critical_path" if x >= 2 / 3 else "both")  # fmt: skip
        assert view == want
        for q in cp.loop_parts()[:4]:
            if cp.loop_share(q) >= 0.01:
                assert f"{q.kind} {100 * cp.loop_share(q):.0f} %" in notes["critical_path"]

    # blocked calls
    launches = sum(h.blocked for h in ref.blocked_calls if kind(h.call.name) == "launch")
    assert ("blocked_launch" in notes) == (launches >= 0.01 * length and launches > 0)
    pageable_held = sum(h.blocked for h in ref.blocked_calls if h.cause == "pageable")
    assert ("pageable_blocks" in notes) == (pageable_held >= 0.01 * length and pageable_held > 0)
    transfers = [ref.bars[e] for e in TRANSFERS if e in ref.bars]
    kernel_hidden = ref.bars.get("kernel", 0) > 0 and g.roofline.engine in TRANSFERS and view == "tallest_bar"
    assert ("kernel_hidden" in notes) == kernel_hidden
    if kernel_hidden:
        assert ref.bars["kernel"] < max(transfers) == tallest
    assert ("compute_binds" in notes) == (g.roofline.engine in ("kernel", "graph"))
    if "compute_binds" in notes:
        assert max(ref.bars.get("kernel", 0), ref.bars.get("graph", 0)) == tallest

    # serialization: the sum of the bars over the union of all of them
    active = [v for v in ref.bars.values() if v > 0]
    ser = sum(ref.bars.values()) / ref.any_busy
    turns = len(active) >= 2 and ser < 1.05 and sum(ref.bars.values()) - tallest >= 0.05 * tallest
    assert ("serialized_one_stream" in notes) == (turns and ref.n_streams == 1)
    assert ("serialized_streams" in notes) == (turns and ref.n_streams >= 2)
    for code in ("serialized_one_stream", "serialized_streams"):
        if code in notes:
            assert f"at least the sum of the bars ({per_frame(g, sum(ref.bars.values()))}" in notes[code]
            if code == "serialized_streams":
                assert ", ".join(f"{e} on {n}" for e, n in ref.streams.items() if n) in notes[code]
    assert ("overlap" in notes) == (len(active) >= 2 and ser >= 1.05 and g.roofline.engine != "host")
    if "overlap" in notes:
        assert f"engines overlap for {ref.overlap / 1e6:,.3f} ms (serialization {ser:.2f}×)" in notes["overlap"]

    # the host's waits
    sync = ref.host_sync / length
    idle = ref.steady_idle / ref.steady
    drained = ref.drained / ref.steady
    assert ("sync_drains" in notes) == (sync >= 0.20 and idle >= 0.10 and drained >= 0.5 * idle)
    assert ("sync_ahead" in notes) == (sync >= 0.20 and idle < 0.10)
    for code in ("sync_drains", "sync_ahead"):
        if code in notes:
            assert f"for {100 * sync:.0f} % of the window" in notes[code]
    if "sync_drains" in notes:
        assert f"{100 * drained:.0f} % of it where the waits end" in notes["sync_drains"]
    assert ("sync_memcpy" in notes) == (ref.sync_copy >= 0.01 * length and ref.sync_copy > 0)
    assert ("pageable_memcpy" in notes) == (ref.pageable > 0 and ref.copied > 0 and ref.pageable >= 0.01 * ref.copied)
    if "pageable_memcpy" in notes:
        assert f"({ref.pageable:,} bytes)" in notes["pageable_memcpy"]

    # idle time of the loop
    loop = [x for x in ref.gaps if not x.setup]
    assert ("gpu_starvation" in notes) == (bool(loop) and ref.loop_gaps >= 0.05 * ref.steady)
    assert ("low_utilization" in notes) == (idle >= 0.10)
    if "low_utilization" in notes:
        assert f"the GPU is idle {100 * idle:.0f} % of the window without set-up gaps" in notes["low_utilization"]
    assert ("implausible_rate" in notes) == (ref.implausible > 0)
    if "efficiency" in notes:
        assert f"measured {length / 1000 / g.frames.count:,.2f} µs/frame" in notes["efficiency"]
        assert f"against a roofline of {tallest / 1000 / g.frames.count:,.2f} µs/frame" in notes["efficiency"]
