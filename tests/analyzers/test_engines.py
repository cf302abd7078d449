"""analyze_trace on small synthetic traces; every expected value is worked out by hand here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterbench.analyzers import analyze_trace
from clusterbench.errors import InputError, TraceError

from fake_nsys import Api, Copy, Kernel, Memset, Range, Trace, build


def test_overlapping_kernels_on_two_streams_count_once(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(1000, 1300, stream=7), Kernel(1200, 1500, stream=13)])
    r = analyze_trace(build(tmp_path / "k.sqlite", t), by_stream=True)
    k = r.primary.busy.engines["kernel"]
    assert k.busy_ns == 500  # union [1000,1500), not the sum 600
    assert k.count == 2
    assert r.primary.window.length_ns == 500 and "GPU activity span" in r.primary.window.source  # no NVTX: first to last record
    assert k.duty == 1.0
    assert r.primary.frames.count is None and k.us_per_frame is None and r.primary.roofline.fps is None
    assert r.primary.busy.overlap_ns == 0  # one engine cannot overlap itself
    assert r.primary.busy.serialization == 1.0
    assert {s.stream: s.engines["kernel"].busy_ns for s in r.primary.busy.streams} == {7: 300, 13: 300}
    assert set(r.primary.busy.engines) == {"kernel", "h2d", "d2h"}  # kernel/h2d/d2h always, zeros when absent
    assert r.primary.busy.engines["h2d"].busy_ns == 0 and r.primary.busy.engines["h2d"].gbps is None


def test_h2d_and_d2h_overlap(tmp_path: Path) -> None:
    t = Trace(
        kernels=[Kernel(150, 170)],
        copies=[Copy(0, 100, kind=1, bytes=1000, stream=1), Copy(50, 150, kind=2, bytes=2000, stream=2)],
    )
    r = analyze_trace(build(tmp_path / "o.sqlite", t), frames=10)
    e = r.primary.busy.engines
    assert (e["h2d"].busy_ns, e["d2h"].busy_ns, e["kernel"].busy_ns) == (100, 100, 20)
    assert r.primary.window.length_ns == 170
    assert r.primary.busy.any_busy_ns == 170 and r.primary.busy.idle_ns == 0
    assert r.primary.busy.overlap_ns == 50  # [50,100): h2d and d2h together
    assert r.primary.busy.serialization == pytest.approx(220 / 170)
    assert e["h2d"].gbps == pytest.approx(1000 / 100) and e["d2h"].gbps == pytest.approx(2000 / 100)
    # h2d and d2h tie at 100 ns; the tie goes to the earlier engine in display order
    assert r.primary.roofline.engine == "h2d"
    assert r.primary.roofline.us_per_frame == pytest.approx(100 / 1000 / 10)
    assert r.primary.roofline.fps == pytest.approx(1e9 * 10 / 100)
    assert e["d2h"].headroom == 0.0
    assert e["kernel"].headroom == pytest.approx((100 - 20) / 20)
    assert e["kernel"].headroom_us_per_frame == pytest.approx(80 / 1000 / 10)
    assert r.primary.throughput.measured_us_per_frame == pytest.approx(170 / 1000 / 10)
    assert r.primary.throughput.efficiency == pytest.approx(100 / 170)
    assert r.primary.frames.source == "FRAMES argument"


def test_activity_cut_by_window_edges_and_host_sync(tmp_path: Path) -> None:
    t = Trace(
        kernels=[Kernel(300, 500)],
        copies=[Copy(100, 200, kind=1, bytes=1000), Copy(400, 450, kind=2, bytes=99)],
        memsets=[Memset(0, 10, bytes=64)],
        api=[
            Api(120, 170, "cudaStreamSynchronize_v3020"),
            Api(160, 220, "cudaMemcpy_v3020"),  # synchronous copy: a host sync
            Api(200, 300, "cudaMemcpyAsync_v3020"),  # not a sync
            Api(150, 350, "cudaDeviceSynchronize_v3020", pid=200),  # another process
        ],
        ranges=[Range(0, 100, "pedestal"), Range(150, 350, "pass frames=4")],
    )
    r = analyze_trace(build(tmp_path / "w.sqlite", t))
    assert r.primary.window.length_ns == 200 and r.primary.window.source == "NVTX range 'pass frames=4'"
    assert r.primary.frames.count == 4 and r.primary.frames.source == "NVTX range text 'pass frames=4'"
    h2d, d2h, k = r.primary.busy.engines["h2d"], r.primary.busy.engines["d2h"], r.primary.busy.engines["kernel"]
    assert (h2d.busy_ns, h2d.count, h2d.bytes) == (50, 1, 500)  # half the copy is inside: half its bytes
    assert h2d.gbps == pytest.approx(500 / 50)
    assert h2d.duty == pytest.approx(50 / 200)
    assert h2d.us_per_frame == pytest.approx(50 / 1000 / 4)
    assert (k.busy_ns, k.count) == (50, 1)  # [300,350)
    assert (d2h.busy_ns, d2h.count, d2h.bytes) == (0, 0, 0)  # wholly outside
    assert "memset" not in r.primary.busy.engines  # only outside the window
    assert r.primary.busy.any_busy_ns == 100 and r.primary.busy.idle_ns == 100
    # sync calls of this process: [120,170) ∪ [160,220) = [120,220); inside the window: [150,220)
    assert r.primary.host.host_sync_ns == 70
    # the pedestal range selects its own window
    p = analyze_trace(tmp_path / "w.sqlite", range_name="ped")
    assert p.primary.window.length_ns == 100 and p.primary.frames.count is None
    assert p.primary.busy.engines["h2d"].busy_ns == 0 and p.primary.busy.engines["memset"].busy_ns == 10


def test_two_devices_and_two_processes(tmp_path: Path) -> None:
    t = Trace(
        kernels=[Kernel(0, 100, pid=100, device=0), Kernel(0, 300, pid=100, device=1)],
        copies=[Copy(50, 250, kind=1, bytes=200, pid=200, device=0)],
    )
    p = build(tmp_path / "g.sqlite", t)
    r = analyze_trace(p)
    assert [(g.pid, g.device) for g in r.groups] == [(100, 0), (100, 1), (200, 0)]
    assert (r.primary.pid, r.primary.device) == (100, 1)  # the group with most GPU busy time (300 ns)
    assert r.primary.busy.engines["kernel"].busy_ns == 300
    assert "3 (process, device) groups" in r.warnings[0]
    js = r.to_json()
    assert len(js["groups"]) == 3 and js["pid"] == 100 and js["device"] == 1
    assert [g["engines"]["kernel"]["busy_ns"] for g in js["groups"]] == [100, 300, 0]
    assert [g["engines"]["h2d"]["busy_ns"] for g in js["groups"]] == [0, 0, 200]

    d0 = analyze_trace(p, device=0)
    assert [(g.pid, g.device) for g in d0.groups] == [(100, 0), (200, 0)]
    assert (d0.primary.pid, d0.primary.busy.engines["h2d"].busy_ns) == (200, 200)
    one = analyze_trace(p, device=0, pid=100)
    assert len(one.groups) == 1 and one.warnings == () and "groups" not in one.to_json()
    assert one.primary.busy.engines["kernel"].busy_ns == 100 and one.primary.window.length_ns == 100
    with pytest.raises(InputError, match="--device 5.*pid 100 device 0; pid 100 device 1; pid 200 device 0"):
        analyze_trace(p, device=5)


def test_nvtx_inline_and_textid_give_the_same_answer(tmp_path: Path) -> None:
    def trace(by_id: bool) -> Trace:
        return Trace(
            kernels=[Kernel(50, 250)],
            ranges=[Range(0, 100, "pass frames=3", by_id=by_id), Range(200, 300, "pass frames=5", by_id=not by_id)],
        )

    a = analyze_trace(build(tmp_path / "a.sqlite", trace(False))).to_json()
    b = analyze_trace(build(tmp_path / "b.sqlite", trace(True))).to_json()
    for js in (a, b):
        assert js["window_ns"] == 200  # both occurrences of the range
        assert js["engines"]["kernel"]["busy_ns"] == 100  # [50,100) + [200,250)
        assert js["frames"] == 8  # 3 + 5, one per occurrence
        assert js["window_ranges"] == 2
        assert "sum of frames=" in js["frames_source"]
    a.pop("trace"), b.pop("trace")
    assert a == b


def test_default_window_prefers_clusterbench_pass(tmp_path: Path) -> None:
    t = Trace(
        kernels=[Kernel(0, 1000)],
        ranges=[
            Range(0, 1000, "passive frames=99"),
            Range(0, 100, "pass frames=2"),
            Range(100, 200, "clusterbench:pass frames=3"),
        ],
    )
    p = build(tmp_path / "d.sqlite", t)
    r = analyze_trace(p)
    assert (r.primary.window.length_ns, r.primary.frames.count) == (100, 3)
    assert r.primary.window.source == "NVTX range 'clusterbench:pass frames=3'"
    # --range NAME is a plain prefix: it takes "passive" and "pass"
    q = analyze_trace(p, range_name="pass")
    assert (q.primary.window.length_ns, q.primary.frames.count) == (1000, 101)
    # FRAMES wins over the range text
    assert analyze_trace(p, frames=50).primary.frames.count == 50


def test_bare_pass_range_and_word_boundary(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(0, 1000)], ranges=[Range(0, 1000, "passive"), Range(10, 30, "pass")])
    r = analyze_trace(build(tmp_path / "p.sqlite", t))
    assert r.primary.window.length_ns == 20 and r.primary.frames.count is None and r.primary.frames.source is None


def test_range_of_another_process(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(0, 100, pid=100)], ranges=[Range(0, 50, "pass frames=7", pid=300)])
    r = analyze_trace(build(tmp_path / "x.sqlite", t))
    assert r.primary.window.length_ns == 50 and r.primary.frames.count == 7
    assert "other processes" in r.primary.window.source


def test_frames_missing_from_some_ranges(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(0, 100)], ranges=[Range(0, 10, "pass frames=7"), Range(20, 30, "pass")])
    r = analyze_trace(build(tmp_path / "f.sqlite", t))
    assert r.primary.frames.count is None
    assert any("only 1 of 2 NVTX ranges carry frames=N" in w for w in r.warnings)


def test_unknown_range_and_bad_frames(tmp_path: Path) -> None:
    p = build(tmp_path / "u.sqlite", Trace(kernels=[Kernel(0, 100)], ranges=[Range(0, 10, "pedestal")]))
    with pytest.raises(TraceError, match="no NVTX range starts with 'warmup'"):
        analyze_trace(p, range_name="warmup")
    with pytest.raises(InputError, match="positive"):
        analyze_trace(p, frames=0)


def test_unified_memory_p2p_and_other_stay_separate(tmp_path: Path) -> None:
    t = Trace(
        copies=[
            Copy(0, 10, kind=11, bytes=1),
            Copy(10, 30, kind=12, bytes=2),
            Copy(30, 60, kind=13, bytes=3),
            Copy(60, 100, kind=10, bytes=4),
            Copy(100, 150, kind=8, bytes=5),
            Copy(150, 210, kind=9, bytes=6),
        ]
    )
    r = analyze_trace(build(tmp_path / "um.sqlite", t), frames=1)
    busy = {k: v.busy_ns for k, v in r.primary.busy.engines.items()}
    assert busy == {"kernel": 0, "h2d": 0, "d2h": 0, "d2d": 50, "p2p": 40, "um_h2d": 10, "um_d2h": 20, "um_d2d": 30, "other": 60}
    assert r.primary.roofline.engine == "other" and r.primary.roofline.fps == pytest.approx(1e9 / 60)
    assert json.loads(json.dumps(r.to_json()))["engines"]["um_d2d"]["bytes"] == 3


def test_json_contract_keys(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(0, 10)], copies=[Copy(10, 20, kind=1, bytes=5)], ranges=[Range(0, 20, "pass frames=2")])
    js = analyze_trace(build(tmp_path / "j.sqlite", t)).to_json()
    for key, kind in {
        "trace": str,
        "frames": int,
        "window_ns": int,
        "engines": dict,
        "roofline": dict,
        "any_busy_ns": int,
        "idle_ns": int,
        "overlap_ns": int,
        "host_sync_ns": int,
    }.items():
        assert isinstance(js[key], kind), key
    assert set(js["engines"]["h2d"]) >= {"busy_ns", "count", "us_per_frame", "duty", "bytes", "gbps"}
    assert set(js["roofline"]) >= {"engine", "us_per_frame", "fps"}
    assert js["engines"]["h2d"]["bytes"] == 5 and js["engines"]["h2d"]["gbps"] == pytest.approx(0.5)


# --------------------------------------------------------------------------- figures that cannot be right


def test_implausible_copy_rate_is_flagged_and_kept_out_of_the_roofline(tmp_path: Path) -> None:
    # the public export's case: 4 GB in 1,120 ns = 3,571,429 GB/s, far above any host link
    # (ceiling 1,000 GB/s); the genuine kernel [0, 5000) and d2h [6000, 7000) stay.
    t = Trace(
        kernels=[Kernel(0, 5000)],
        copies=[Copy(5000, 6120, kind=1, bytes=4_000_000_000), Copy(6000, 7000, kind=2, bytes=50_000)],
        ranges=[Range(0, 8000, "clusterbench:pass frames=10")],
    )
    r = analyze_trace(build(tmp_path / "bad.sqlite", t))
    h2d = r.primary.busy.engines["h2d"]
    assert (h2d.busy_ns, h2d.count, h2d.bytes, h2d.gbps) == (0, 0, 0, None)
    assert (h2d.implausible_count, h2d.implausible_bytes) == (1, 4_000_000_000)
    assert h2d.implausible_max_gbps == pytest.approx(4e9 / 1120)
    assert h2d.implausible_limit_gbps == 1000.0
    assert r.primary.roofline.engine == "kernel" and r.primary.roofline.busy_ns == 5000
    assert r.primary.busy.any_busy_ns == 5000 + 1000  # the bad record is out of every figure
    (w,) = [w for w in r.warnings if "h2d" in w]
    assert "3,571,428.57 GB/s" in w and "1,000.00 GB/s" in w and "left out" in w
    assert "implausible_rate" in [f.code for f in r.primary.findings]
    js = r.to_json()["engines"]["h2d"]
    assert js["implausible_count"] == 1 and js["implausible_limit_gbps"] == 1000.0


def test_device_side_ceiling_is_higher(tmp_path: Path) -> None:
    # a 4.8 TB/s-class memset (4,800 B/ns) is plausible on device memory (ceiling 10,000 GB/s),
    # while the same rate on an h2d copy is not (ceiling 1,000 GB/s)
    t = Trace(memsets=[Memset(0, 1000, bytes=4_800_000)], copies=[Copy(1000, 2000, kind=1, bytes=4_800_000)])
    r = analyze_trace(build(tmp_path / "dev.sqlite", t))
    assert r.primary.busy.engines["memset"].implausible_count == 0 and r.primary.busy.engines["memset"].gbps == pytest.approx(4800)
    assert r.primary.busy.engines["h2d"].implausible_count == 1


def test_frames_argument_contradicting_the_range_text_warns(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(0, 1000)], ranges=[Range(0, 1000, "clusterbench:pass frames=20")])
    p = build(tmp_path / "f.sqlite", t)
    r = analyze_trace(p, frames=50)
    assert r.primary.frames.count == 50 and r.primary.frames.source == "FRAMES argument"
    (w,) = r.warnings
    assert "FRAMES argument (50) contradicts frames=20" in w and "used the FRAMES argument (50)" in w
    assert analyze_trace(p, frames=20).warnings == ()  # agreeing values say nothing
    assert analyze_trace(p).warnings == ()


def test_absurd_per_frame_time_warns(tmp_path: Path) -> None:
    # 1,000 ns of kernel over 10,000,000 frames = 0.1 ps per frame: below 1 ns
    t = Trace(kernels=[Kernel(0, 1000)])
    r = analyze_trace(build(tmp_path / "a.sqlite", t), frames=10_000_000)
    (w,) = r.warnings
    assert "absurd" in w and "0.0001 ns per frame" in w and "10,000,000" in w
    assert analyze_trace(tmp_path / "a.sqlite", frames=1000).warnings == ()  # 1 ns per frame is fine


def test_headroom_is_one_notation(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(0, 100)], copies=[Copy(100, 500, kind=1, bytes=8)], memsets=[Memset(500, 501, 1)])
    r = analyze_trace(build(tmp_path / "h.sqlite", t))
    assert r.primary.busy.engines["kernel"].headroom_factor == pytest.approx(400 / 100)
    assert r.primary.busy.engines["memset"].headroom_factor == pytest.approx(400 / 1)
    assert r.primary.busy.engines["h2d"].headroom_factor is None  # it binds
    from clusterbench.render.analyze import _headroom

    assert [_headroom(st, r.primary) for st in r.primary.busy.engines.values()] == ["×4.00", "binds", "–", "×400"]
