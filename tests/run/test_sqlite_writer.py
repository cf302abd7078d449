"""The CUPTI tracer's SQLite writer: nsys-shaped tables, read back by sqlite3 and by analyze."""

from __future__ import annotations

import sqlite3

import pytest

from clusterbench.errors import InputError
from clusterbench.io.nsys.writer import (
    ApiRecord,
    CopyRecord,
    GpuRecord,
    KernelRecord,
    MemsetRecord,
    RangeRecord,
    write_trace_sqlite,
)

PID, TID = 4242, 4243

# One pass of 10 frames over [1000, 11000] ns, and a pedestal range before it.
RANGES = [
    RangeRecord(0, 900, "clusterbench:pedestal", PID, TID),
    RangeRecord(1000, 11000, "clusterbench:pass frames=10", PID, TID),
]
KERNELS = [
    KernelRecord(2000, 4000, 0, 1, 13, 10, PID, "find_clusters_3x3"),
    KernelRecord(3000, 5000, 0, 1, 14, 11, PID, "find_clusters_3x3"),  # overlaps the first: counts once
    KernelRecord(20000, 21000, 0, 1, 13, 12, PID, "after_the_pass"),  # outside the pass window
]
COPIES = [
    CopyRecord(100, 600, 0, 1, 13, 1, PID, 99_000, 1),  # inside the pedestal range only
    CopyRecord(1000, 2000, 0, 1, 13, 2, PID, 50_000, 1),  # H2D: 50 000 B in 1000 ns = 50 GB/s
    CopyRecord(4500, 7000, 0, 1, 14, 3, PID, 25_000, 2),  # D2H: 25 000 B in 2500 ns = 10 GB/s
]
RUNTIME = [
    ApiRecord(1500, 1600, PID, TID, 2, "cudaMemcpyAsync_v3020"),
    ApiRecord(7000, 8000, PID, TID, 20, "cudaStreamSynchronize_v3020"),
    ApiRecord(1900, 1950, PID, TID, 10, "cuLaunchKernel", driver=True),
]


@pytest.fixture
def trace(tmp_path):
    return write_trace_sqlite(tmp_path / "t.sqlite", KERNELS, COPIES, [], RUNTIME, RANGES,
                              GpuRecord(0, "NVIDIA H200", "GPU-abc"))


def test_tables_and_columns_match_the_nsys_core(trace) -> None:
    con = sqlite3.connect(trace)
    rows = con.execute(
        "SELECT k.start, k.end, k.deviceId, k.contextId, k.streamId, k.correlationId, k.globalPid, s.value "
        "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName ORDER BY k.start"
    ).fetchall()
    assert rows[0] == (2000, 4000, 0, 1, 13, 10, PID << 24, "find_clusters_3x3")
    assert len(rows) == 3
    # docs/facts.md: pid = (globalPid >> 24) & 0xFFFFFF
    assert {(r[6] >> 24) & 0xFFFFFF for r in rows} == {PID}
    demangled = con.execute(
        "SELECT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName"
    ).fetchall()
    assert demangled[2] == ("after_the_pass",)
    copies = con.execute("SELECT bytes, copyKind, streamId FROM CUPTI_ACTIVITY_KIND_MEMCPY ORDER BY start").fetchall()
    assert copies == [(99_000, 1, 13), (50_000, 1, 13), (25_000, 2, 14)]
    api = con.execute(
        "SELECT r.eventClass, s.value, r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
        "JOIN StringIds s ON s.id = r.nameId ORDER BY r.start"
    ).fetchall()
    assert api[0] == (0, "cudaMemcpyAsync_v3020", (PID << 24) | TID)
    assert api[1][0] == 1 and api[1][1] == "cuLaunchKernel"
    nvtx = con.execute("SELECT start, end, eventType, text FROM NVTX_EVENTS ORDER BY start").fetchall()
    assert nvtx == [(0, 900, 59, "clusterbench:pedestal"), (1000, 11000, 59, "clusterbench:pass frames=10")]
    meta = dict(con.execute("SELECT name, value FROM META_DATA_EXPORT"))
    assert meta["EXPORT_PRODUCT_NAME"] == "clusterbench cupti tracer"
    assert con.execute("SELECT id, name, uuid FROM TARGET_INFO_GPU").fetchall() == [(0, "NVIDIA H200", "GPU-abc")]
    con.close()


def test_rewrite_replaces_and_leaves_no_temp(trace) -> None:
    write_trace_sqlite(trace, [KERNELS[0]], [], [MemsetRecord(10, 20, 0, 1, 13, 5, PID, 64)], [], [])
    con = sqlite3.connect(trace)
    assert con.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone() == (1,)
    assert con.execute("SELECT start, end, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET").fetchall() == [(10, 20, 64)]
    con.close()
    assert [p.name for p in trace.parent.iterdir()] == ["t.sqlite"]


def test_inverted_interval_is_refused(tmp_path) -> None:
    with pytest.raises(InputError, match="ends before it starts: start=50 ns, end=40 ns"):
        write_trace_sqlite(tmp_path / "bad.sqlite", [KernelRecord(50, 40, 0, 1, 1, 1, PID, "k")])
    assert not (tmp_path / "bad.sqlite").exists()


def test_analyze_reads_the_cupti_file_back(trace) -> None:
    analysis_mod = pytest.importorskip("clusterbench.analyzers")
    if not hasattr(analysis_mod, "analyze_trace"):
        pytest.skip("clusterbench.analyzers.analyze_trace not built yet")
    a = analysis_mod.analyze_trace(trace, frames=10, range_name="clusterbench:pass")
    # Worked by hand over the pass window [1000, 11000] ns, 10 frames:
    assert a.primary.window.length_ns == 10_000
    k, h2d, d2h = a.primary.busy.engines["kernel"], a.primary.busy.engines["h2d"], a.primary.busy.engines["d2h"]
    assert k.busy_ns == 3000 and k.count == 2  # union of [2000,4000] and [3000,5000]; [20000,21000] outside
    assert h2d.busy_ns == 1000 and h2d.count == 1  # the pedestal-time copy is outside the window
    assert d2h.busy_ns == 2500
    assert k.us_per_frame == pytest.approx(0.3)
    assert h2d.us_per_frame == pytest.approx(0.1)
    assert d2h.us_per_frame == pytest.approx(0.25)
    assert k.duty == pytest.approx(0.3)
    assert h2d.gbps == pytest.approx(50.0)
    assert d2h.gbps == pytest.approx(10.0)
    # the launching thread: first call 1500, last call ends 8000, less its wait [7000,8000): busy 5,500 ns,
    # taller than the kernel's 3,000: the host binds
    assert a.primary.roofline.engine == "host" and a.primary.roofline.busy_ns == 5500
    assert a.primary.roofline.thread.tid == TID
    assert max(a.primary.busy.engines.values(), key=lambda st: st.busy_ns).engine == "kernel"
    assert a.primary.busy.any_busy_ns == 6000  # [1000, 7000] without a gap
    assert a.primary.busy.idle_ns == 4000
    assert a.primary.busy.overlap_ns == 500  # kernel and D2H share [4500, 5000]
    assert a.primary.busy.serialization == pytest.approx((3000 + 1000 + 2500) / 6000)
    assert a.primary.host.host_sync_ns == 1000  # cudaStreamSynchronize only; cudaMemcpyAsync is not a sync
    assert a.primary.throughput.measured_us_per_frame == pytest.approx(1.0)
    assert a.primary.throughput.efficiency == pytest.approx(0.55)
    # without arguments analyze finds the probe's pass range and its frames=10
    b = analysis_mod.analyze_trace(trace)
    assert b.primary.frames.count == 10 and b.primary.window.length_ns == 10_000
