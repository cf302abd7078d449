"""Timeline lanes and the default span, worked out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.analyzers import analyze, load_trace
from clusterbench.analyzers.timeline import build_timeline
from clusterbench.errors import InputError

from fake_nsys import Copy, Kernel, Range, Trace, build


def batches(tmp_path: Path, streams: int = 1):
    # six batches, one every 1,000 ns: h2d [100,400) then kernel [400,900), on stream 7 + i % streams
    t = Trace(
        copies=[Copy(1000 * i + 100, 1000 * i + 400, kind=1, bytes=300, stream=7 + i % streams) for i in range(6)],
        kernels=[Kernel(1000 * i + 400, 1000 * i + 900, stream=7 + i % streams) for i in range(6)],
        ranges=[Range(0, 6000, "clusterbench:pass frames=6")],
    )
    data = load_trace(build(tmp_path / f"b{streams}.sqlite", t))
    return data, analyze(data)


def lanes(tl) -> dict:
    return {(ln.engine, ln.stream): list(zip(ln.starts_ns.tolist(), ln.ends_ns.tolist())) for ln in tl.lanes}


def test_default_span_shows_three_batches(tmp_path: Path) -> None:
    data, r = batches(tmp_path)
    tl = build_timeline(data, r.primary)
    # from the first activity (100) to the start of the 4th kernel (3400): 3 batches
    assert (tl.span_start_ns, tl.span_end_ns) == (100, 3400)
    assert "3 batches of 6" in tl.span_source
    assert lanes(tl) == {
        ("kernel", 7): [(400, 900), (1400, 1900), (2400, 2900)],
        ("h2d", 7): [(100, 400), (1100, 1400), (2100, 2400), (3100, 3400)],
    }


def test_more_streams_show_more_batches(tmp_path: Path) -> None:
    data, r = batches(tmp_path, streams=2)
    assert r.primary.busy.n_streams == 2
    tl = build_timeline(data, r.primary)
    assert (tl.span_start_ns, tl.span_end_ns) == (100, 4400)  # 2 x 2 streams = 4 batches
    assert set(lanes(tl)) == {("kernel", 7), ("kernel", 8), ("h2d", 7), ("h2d", 8)}


def test_asked_for_span(tmp_path: Path) -> None:
    data, r = batches(tmp_path)
    tl = build_timeline(data, r.primary, span_ms=0.0005, start_ms=0.001)  # [1000, 1500)
    assert (tl.span_start_ns, tl.span_end_ns) == (1000, 1500)
    assert lanes(tl) == {("kernel", 7): [(1400, 1500)], ("h2d", 7): [(1100, 1400)]}
    with pytest.raises(InputError, match="past the window"):
        build_timeline(data, r.primary, start_ms=1.0)
    with pytest.raises(InputError):
        build_timeline(data, r.primary, span_ms=-1.0)


def test_default_span_skips_a_long_wait_before_the_first_batch(tmp_path: Path) -> None:
    # one early h2d [0,100), then nothing until six batches from 10,000 ns, one per 1,000 ns:
    # h2d [10000+1000i, +300), kernel [+300, +800). The kernel has the fewest records (6), its
    # period is 1,000 ns, and the 9,900-ns gap before the first batch is longer: the span starts
    # at 10,000 and ends at the 4th kernel's start, 13,300.
    t = Trace(
        copies=[Copy(0, 100, kind=1, bytes=1)] + [Copy(10_000 + 1000 * i, 10_300 + 1000 * i, kind=1, bytes=1) for i in range(6)],
        kernels=[Kernel(10_300 + 1000 * i, 10_800 + 1000 * i) for i in range(6)],
        ranges=[Range(0, 20_000, "clusterbench:pass frames=6")],
    )
    data = load_trace(build(tmp_path / "wait.sqlite", t))
    tl = build_timeline(data, analyze(data).primary)
    assert (tl.span_start_ns, tl.span_end_ns) == (10_000, 13_300)
    assert "after an idle gap of 0.010 ms" in tl.span_source


def test_gaps_are_marked_and_the_span_can_start_at_the_longest(tmp_path: Path) -> None:
    # kernels [0,10 µs) and [5 ms, 5.01 ms), a cuModuleLoadData in between: one 4.99 ms module_load gap
    from fake_nsys import Api

    t = Trace(kernels=[Kernel(0, 10_000), Kernel(5_000_000, 5_010_000)],
              api=[Api(0, 100, "cudaLaunchKernel_v7000"), Api(4_800_000, 4_900_000, "cuModuleLoadData"),
                   Api(4_990_000, 4_991_000, "cudaLaunchKernel_v7000")])  # fmt: skip
    data = load_trace(build(tmp_path / "g.sqlite", t))
    r = analyze(data)
    tl = build_timeline(data, r.primary, at_longest_gap=True)
    # the gap [10,000, 5,000,000): the span starts a quarter of it earlier (clipped at 0) and runs 1.5
    # gaps long (clipped at the window's end, 5.01 ms)
    gap = 4_990_000
    assert (tl.span_start_ns, tl.span_end_ns) == (0, min(5_010_000, int(1.5 * gap)))
    assert [(m.start_ns, m.end_ns, m.cause) for m in tl.gaps] == [(10_000, 5_000_000, "module_load")]
    assert tl.span_source == "around the longest idle gap (4.990 ms, module_load)"
    with pytest.raises(InputError, match="no idle gap"):
        build_timeline(data, analyze(load_trace(build(tmp_path / "n.sqlite", Trace(kernels=[Kernel(0, 10)])))).primary,
                       at_longest_gap=True)  # fmt: skip


# --------------------------------------------------------------------------- the critical path and the host lanes

REAL = Path(__file__).resolve().parents[1] / "data" / "h200" / "dev_5x5_s2_b500.sqlite"


def test_the_timeline_carries_the_path_and_the_host_lanes(tmp_path: Path) -> None:
    # a pageable H2D [0,120] µs whose copy runs [10,110] (held: blocked 100 µs), then a launch [125,130]
    # of a kernel [135,175]: the host lane's blocked time is the copy's, and the band tiles the span
    from fake_nsys import Api

    U = 1000
    t = Trace(api=[Api(0, 120 * U, "cudaMemcpyAsync_v3020", corr=1), Api(125 * U, 130 * U, "cudaLaunchKernel_v7000", corr=2)],
              copies=[Copy(10 * U, 110 * U, kind=1, bytes=4_000_000, pageable=True, corr=1)], kernels=[Kernel(135 * U, 175 * U, corr=2)],
              ranges=[Range(10 * U, 175 * U, "clusterbench:pass frames=1")])  # fmt: skip
    data = load_trace(build(tmp_path / "p.sqlite", t))
    r = analyze(data)
    tl = build_timeline(data, r.primary, span_ms=0.165)
    (h,) = tl.hosts
    assert h.label == "thread 100 (python)"
    assert list(zip(h.blocked[0].tolist(), h.blocked[1].tolist())) == [(0, 100 * U)]  # [10,110] µs, from the window start
    assert list(zip(h.calls[0].tolist(), h.calls[1].tolist())) == [(0, 110 * U), (115 * U, 120 * U)]
    p = tl.path
    assert list(zip(p.starts_ns.tolist(), p.ends_ns.tolist(), p.resource)) == [
        (0, 100 * U, "h2d"), (100 * U, 115 * U, "host"), (115 * U, 125 * U, "launch"), (125 * U, 165 * U, "kernel")]


def test_the_picture_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from clusterbench.render.timeline import render_timeline_plot

    data = load_trace(REAL)
    r = analyze(data)
    tl = build_timeline(data, r.primary)
    assert tl.path is not None and tl.hosts
    out = render_timeline_plot(r, r.primary, tl, tmp_path / "t.png")
    assert out.stat().st_size > 10_000 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_trace_export_has_the_path_and_flows(tmp_path: Path) -> None:
    import json

    from clusterbench.analyzers.timeline import build_export
    from clusterbench.render.timeline import write_chrome_trace

    data = load_trace(REAL)
    r = analyze(data)
    doc = json.loads(write_chrome_trace(build_export(data, r.primary), tmp_path / "t.json").read_text())
    ev = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert set(procs.values()) == {"GPU", "host", "critical path"}
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    # the path's track tiles the window: its events add up to the window's length, in µs
    path = [e for e in ev if e["ph"] == "X" and procs[e["pid"]] == "critical path"]
    assert sum(e["dur"] for e in path) == pytest.approx(r.primary.window.length_ns / 1000)
    assert {e["name"] for e in path} <= {"host", "h2d", "d2h", "kernel", "launch", "idle"}
    # flows: every id has one start on a host track and one end (bp "e") on a GPU track, later in time
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    ends = {e["id"]: e for e in ev if e["ph"] == "f"}
    assert starts and set(starts) == set(ends) and len(starts) == len([e for e in ev if e["ph"] == "s"])
    assert doc["otherData"]["flows"] == doc["otherData"]["flows_shown"] == len(starts) and not doc["otherData"]["flows_cut"]
    xs = [e for e in ev if e["ph"] == "X"]
    for i, s in starts.items():
        f = ends[i]
        assert f["bp"] == "e" and procs[s["pid"]] == "host" and procs[f["pid"]] == "GPU"
        assert f["ts"] >= s["ts"]
        # each end lies on a slice of its track (the row it points to), each start on a call
        assert any(x["pid"] == f["pid"] and x["tid"] == f["tid"] and x["ts"] == f["ts"] for x in xs), tracks[(f["pid"], f["tid"])]
        assert any(x["pid"] == s["pid"] and x["tid"] == s["tid"] and x["ts"] == s["ts"] for x in xs)
    # µs: the window's first kernel starts where its event says, in µs from the window start
    w0 = r.primary.window.start_ns
    k = data.activity.start_ns[data.activity.section("kernel")]
    first = min(x["ts"] for x in xs if x["name"] == "scan" and x["ts"] >= 0)
    assert first == pytest.approx((int(k[k >= w0].min()) - w0) / 1000)


def test_flows_are_cut_and_the_file_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from clusterbench.analyzers import timeline as T
    from clusterbench.render import timeline as RT

    monkeypatch.setattr(T, "MAX_FLOWS", 5)
    monkeypatch.setattr(RT, "MAX_FLOWS", 5)
    data = load_trace(REAL)
    r = analyze(data)
    doc = json.loads(RT.write_chrome_trace(T.build_export(data, r.primary), tmp_path / "t.json").read_text())
    meta = doc["otherData"]
    assert meta["flows_shown"] == 5 < meta["flows"] and meta["flows_cut"] and "first 5" in meta["flows_note"]
    assert len([e for e in doc["traceEvents"] if e["ph"] == "s"]) == 5
