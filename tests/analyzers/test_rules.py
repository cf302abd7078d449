"""The rules behind the "why" notes: each fires only when the trace shows what its text claims.

Windows and busy times are worked out by hand in the comments.
"""

from __future__ import annotations

import re
from pathlib import Path

from clusterbench.analyzers import analyze_trace
from clusterbench.analyzers.rules import GAP_NS, RULES

from fake_nsys import Api, Copy, Kernel, Range, Trace, build

DOCS = Path(__file__).resolve().parents[2] / "docs" / "analyze.md"


def codes(r) -> list[str]:
    return [f.code for f in r.primary.findings]


def test_turns_on_two_streams_never_advise_several_streams(tmp_path: Path) -> None:
    # window [0,1000): batch A on stream 1 and batch B on stream 2, strictly one after the other:
    # h2d A [0,200), kernel A [200,300), h2d B [300,500), kernel B [500,600), d2h A [600,700),
    # d2h B [700,800). Nothing overlaps (serialization 1.0), yet the kernels ran on 2 streams.
    t = Trace(
        copies=[
            Copy(0, 200, 1, 1000, stream=1), Copy(300, 500, 1, 1000, stream=2),
            Copy(600, 700, 2, 500, stream=1), Copy(700, 800, 2, 500, stream=2),
        ],
        kernels=[Kernel(200, 300, stream=1), Kernel(500, 600, stream=2)],
        ranges=[Range(0, 1000, "clusterbench:pass frames=2")],
    )  # fmt: skip
    r = analyze_trace(build(tmp_path / "two.sqlite", t))
    assert r.primary.busy.serialization == 1.0 and r.primary.busy.n_streams == 2
    assert r.primary.busy.engine_streams == {"kernel": 2, "h2d": 2, "d2h": 2}
    assert "serialized_streams" in codes(r) and "serialized_one_stream" not in codes(r)
    note = next(f.message for f in r.primary.findings if f.code == "serialized_streams")
    assert "ran on 2 streams" in note
    for n in r.primary.notes:
        assert "one stream" not in n and "several streams" not in n and "Spread the batches" not in n


def test_turns_on_one_stream(tmp_path: Path) -> None:
    # the same work on one stream; a 10 ns memset on stream 0 carries 10 / 810 < 1 % of the GPU
    # time, so it does not count as a second working stream
    t = Trace(
        copies=[Copy(0, 200, 1, 1000), Copy(600, 700, 2, 500)],
        kernels=[Kernel(200, 300), Kernel(300, 600)],
        ranges=[Range(0, 1000, "clusterbench:pass frames=2")],
    )
    r = analyze_trace(build(tmp_path / "one.sqlite", t))
    assert r.primary.busy.n_streams == 1
    note = next(f.message for f in r.primary.findings if f.code == "serialized_one_stream")
    # the sum of the bars: (200 + 100 + 400) ns / 2 frames = 0.35 µs/frame
    assert "all GPU work ran on one stream" in note and "(0.35 µs/frame)" in note
    assert "serialized_streams" not in codes(r)


def test_a_tiny_second_stream_does_not_count(tmp_path: Path) -> None:
    from fake_nsys import Memset

    t = Trace(
        copies=[Copy(0, 500, 1, 1000, stream=7)],
        kernels=[Kernel(500, 1000, stream=7)],
        memsets=[Memset(1000, 1005, 16, stream=0)],  # 5 ns of 1005: under 1 %
        ranges=[Range(0, 1005, "clusterbench:pass frames=1")],
    )
    r = analyze_trace(build(tmp_path / "tiny.sqlite", t))
    assert r.primary.busy.n_streams == 1 and r.primary.busy.engines["memset"].streams == 1
    assert "serialized_one_stream" in codes(r)


def test_synchronous_copies(tmp_path: Path) -> None:
    # window [0,1000); cudaMemcpy calls [100,150) and [400,460): 110 ns = 11 % of the window
    t = Trace(
        copies=[Copy(100, 150, 1, 100), Copy(400, 460, 2, 100)],
        api=[Api(100, 150, "cudaMemcpy_v3020"), Api(400, 460, "cudaMemcpy_v3020"), Api(500, 600, "cudaMemcpyAsync_v3020")],
        ranges=[Range(0, 1000, "clusterbench:pass frames=1")],
    )
    r = analyze_trace(build(tmp_path / "sync.sqlite", t))
    assert (r.primary.host.sync_copy_ns, r.primary.host.sync_copy_calls) == (110, 2)
    f = next(f for f in r.primary.findings if f.code == "sync_memcpy")
    assert f.anchor == "cuda_memcpy_sync" and f.value == 0.11
    assert "2 synchronous copy calls (cudaMemcpy)" in f.message and "cudaMemcpyAsync" in f.message
    # asynchronous copies alone never fire it
    t2 = Trace(copies=t.copies, api=[Api(100, 150, "cudaMemcpyAsync_v3020")], ranges=t.ranges)
    assert "sync_memcpy" not in codes(analyze_trace(build(tmp_path / "async.sqlite", t2)))


def test_pageable_copies(tmp_path: Path) -> None:
    # 3,000 of 4,000 copied bytes come from pageable memory: 75 % >= 1 %
    t = Trace(
        copies=[Copy(0, 100, 1, 3000, pageable=True), Copy(100, 200, 1, 1000)],
        ranges=[Range(0, 200, "clusterbench:pass frames=1")],
    )
    r = analyze_trace(build(tmp_path / "pg.sqlite", t))
    assert (r.primary.busy.pageable_count, r.primary.busy.pageable_bytes) == (1, 3000)
    f = next(f for f in r.primary.findings if f.code == "pageable_memcpy")
    assert f.anchor == "cuda_memcpy_async" and f.value == 0.75 and "pinned" in f.message
    # 16 pageable bytes beside 1,000,000 pinned ones: under 1 %, no note
    t2 = Trace(copies=[Copy(0, 100_000, 1, 1_000_000), Copy(100_000, 100_010, 2, 16, pageable=True)],
               ranges=[Range(0, 100_010, "clusterbench:pass frames=1")])
    r2 = analyze_trace(build(tmp_path / "pg2.sqlite", t2))
    assert r2.primary.busy.pageable_count == 1 and "pageable_memcpy" not in codes(r2)


def test_starvation_gaps_and_low_utilization(tmp_path: Path) -> None:
    # window [0, 1,000,000): busy [0,100000), [300000,400000), [900000,1000000); idle gaps of
    # 200,000 and 500,000 ns (both >= GAP_NS), 700,000 ns = 70 % of the window
    assert GAP_NS == 100_000
    t = Trace(
        kernels=[Kernel(0, 100_000), Kernel(300_000, 400_000), Kernel(900_000, 1_000_000)],
        ranges=[Range(0, 1_000_000, "clusterbench:pass frames=10")],
    )
    r = analyze_trace(build(tmp_path / "gap.sqlite", t))
    g = r.primary
    assert (len(g.gaps), int(g.gaps.lengths_ns.sum()), int(g.gaps.lengths_ns.max())) == (2, 700_000, 500_000)
    assert "gpu_starvation" in codes(r) and "low_utilization" in codes(r)
    f = next(f for f in r.primary.findings if f.code == "gpu_starvation")
    assert f.anchor == "gpu_gaps" and "2 idle gaps" in f.message and "the longest: 0.500 ms at 0.400 ms" in f.message
    # many short gaps: idle 50 % in 99,999-ns gaps, none long enough to be starvation
    short = Trace(
        kernels=[Kernel(i * 200_000, i * 200_000 + 100_001) for i in range(5)],
        ranges=[Range(0, 1_000_000, "clusterbench:pass frames=10")],
    )
    r2 = analyze_trace(build(tmp_path / "short.sqlite", short))
    assert len(r2.primary.gaps) == 0 and "gpu_starvation" not in codes(r2) and "low_utilization" in codes(r2)


def test_busy_gpu_fires_no_idle_rules(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(0, 1000)], ranges=[Range(0, 1000, "clusterbench:pass frames=1")])
    r = analyze_trace(build(tmp_path / "busy.sqlite", t))
    assert codes(r) == ["binds", "compute_binds", "efficiency"]


def test_json_carries_every_fired_rule_with_its_code(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(0, 100_000), Kernel(300_000, 400_000)], ranges=[Range(0, 400_000, "pass frames=1")])
    r = analyze_trace(build(tmp_path / "j.sqlite", t))
    js = r.to_json()
    assert [x["code"] for x in js["rules"]] == codes(r)
    assert [x["message"] for x in js["rules"]] == js["notes"]
    assert all(set(x) >= {"code", "title", "anchor", "threshold", "value", "message"} for x in js["rules"])


def test_docs_list_every_rule_with_its_threshold() -> None:
    text = DOCS.read_text()
    for rule in RULES:
        row = [ln for ln in text.splitlines() if re.match(rf"\|\s*`{rule.code}`\s*\|", ln)]
        assert len(row) == 1, f"docs/analyze.md has no table row for rule {rule.code}"
        assert rule.threshold_text in row[0], rule.code
        if rule.anchor:
            assert rule.anchor in row[0], rule.code


def test_sync_drain_text_follows_the_engines_present(tmp_path: Path) -> None:
    # kernels only: [0,200) and [700,900) in [0,1000); the host syncs [200,700): 50 %, idle 60 %
    t = Trace(
        kernels=[Kernel(0, 200), Kernel(700, 900)],
        api=[Api(200, 700, "cudaDeviceSynchronize_v3020")],
        ranges=[Range(0, 1000, "clusterbench:pass frames=2")],
    )
    r = analyze_trace(build(tmp_path / "k.sqlite", t))
    note = next(f.message for f in r.primary.findings if f.code == "sync_drains")
    assert "waits for the host's next launch" in note and "copy" not in note
