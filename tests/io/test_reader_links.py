"""Calls linked to their GPU work: every CUDA API call kept with its correlation id and the stream it names,
every GPU record's correlation id, the synchronization rows and the CUDA event records, each checked
against plain SQL written here over the real exports (tests/data/h200, tests/data/zoo, tests/data/samples), and against
hand-built exports of every schema era and of the CUPTI tracer's writer."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from clusterbench.analyzers.analysis import api_plan, request
from clusterbench.io.nsys import read_trace
from clusterbench.io.nsys import schema as S
from clusterbench.io.nsys import writer as W

from fake_nsys import ERAS, Api, Copy, EventRecord, Graph, Kernel, Memset, Sync, Trace, build
from oracle import api_base

DATA = Path(__file__).resolve().parents[1] / "data"
REAL = sorted((DATA / "h200").glob("*.sqlite")) + sorted((DATA / "zoo").glob("*.sqlite")) + sorted((DATA / "samples").glob("*.sqlite"))
GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "CUPTI_ACTIVITY_KIND_MEMCPY",
              "CUPTI_ACTIVITY_KIND_MEMSET")  # fmt: skip
PID = "((globalPid >> 24) & 16777215)"


def _tables(con: sqlite3.Connection) -> set[str]:
    return {t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _sql_calls(path: Path, where: str = "") -> list[tuple]:
    """Every runtime and driver call as (start, end, pid, tid, base name, correlationId, stream): the stream of
    the call's GPU rows (the largest streamId), else of its SYNCHRONIZATION row, else of its CUDA_EVENT row,
    matched by correlationId within the process; -1 for none."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = _tables(con)
    gpu = " UNION ALL ".join(f"SELECT correlationId c, {PID} p, streamId s FROM {t}" for t in GPU_TABLES if t in tables)
    pid = "((r.globalTid >> 24) & 16777215)"

    def sub(table: str) -> str:
        if table not in tables:
            return "NULL"
        return (f"(SELECT CASE WHEN x.streamId = 4294967295 THEN -1 ELSE x.streamId END FROM {table} x "
                f"WHERE x.correlationId = r.correlationId AND ((x.globalPid >> 24) & 16777215) = {pid} LIMIT 1)")  # fmt: skip

    stream = (f"coalesce((SELECT max(g.s) FROM gpu g WHERE g.c = r.correlationId AND g.p = {pid}), "
              f"{sub('CUPTI_ACTIVITY_KIND_SYNCHRONIZATION')}, {sub('CUPTI_ACTIVITY_KIND_CUDA_EVENT')}, -1)")  # fmt: skip
    rows = []
    for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if table in tables:
            q = (f"WITH gpu AS ({gpu}) SELECT r.start, r.end, {pid}, r.globalTid & 16777215, s.value, r.correlationId, "
                 f"{stream} FROM {table} r JOIN StringIds s ON s.id = r.nameId {where}")  # fmt: skip
            rows += [(a, b, p, t, api_base(n), c, st) for a, b, p, t, n, c, st in con.execute(q)]
    con.close()
    return rows


def _ours(api) -> list[tuple]:
    return [(s, e, api.threads[t].pid, api.threads[t].tid, api.names[n], c, st) for s, e, t, n, c, st in zip(
        api.start_ns.tolist(), api.end_ns.tolist(), api.thread.tolist(), api.name.tolist(), api.correlation.tolist(),
        api.stream.tolist())]  # fmt: skip


@pytest.fixture(params=REAL, ids=[p.name for p in REAL])
def real(request: pytest.FixtureRequest) -> Path:
    return request.param


def test_every_call_is_kept_with_its_correlation_id_and_stream(real: Path) -> None:
    expected = _sql_calls(real)
    api = read_trace(real).api
    got = _ours(api)
    assert sorted(got) == sorted(expected)
    assert [g[0] for g in got] == sorted(g[0] for g in got)  # in start order
    assert api.correlation.dtype == np.int32 and api.stream.dtype == np.int16  # compact where the ids fit
    assert any(st >= 0 for *_, st in got)  # calls that name a stream are there: the test can fail


def test_every_gpu_record_carries_the_exports_correlation_id(real: Path) -> None:
    con = sqlite3.connect(f"file:{real}?mode=ro", uri=True)
    tables = _tables(con)
    expected = sorted(row for t in GPU_TABLES if t in tables
                      for row in con.execute(f"SELECT start, end, streamId, correlationId FROM {t}"))  # fmt: skip
    con.close()
    act = read_trace(real).activity
    got = sorted(zip(act.start_ns.tolist(), act.end_ns.tolist(), act.stream.tolist(), act.correlation.tolist()))
    assert got == expected
    assert act.correlation.dtype == np.int32


def test_sync_rows_and_event_records_match_the_tables(real: Path) -> None:
    con = sqlite3.connect(f"file:{real}?mode=ro", uri=True)
    tables = _tables(con)
    none = "4294967295"
    syncs, events, names = [], [], {}
    if "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION" in tables:
        # nsys 2025.3 writes syncType 2 (stream wait event) for cudaStreamSynchronize: read as 3 when no event is named
        syncs = con.execute(
            f"SELECT start, end, {PID}, deviceId, CASE WHEN streamId = {none} THEN -1 ELSE streamId END, correlationId, "
            f"CASE WHEN syncType = 2 AND eventId = {none} AND streamId != {none} THEN 3 ELSE syncType END, "
            f"CASE WHEN eventId = {none} THEN -1 ELSE eventId END FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
        ).fetchall()
        names = {c: api_base(n) for c, n in con.execute(
            "SELECT r.correlationId, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId")}  # fmt: skip
    if "CUPTI_ACTIVITY_KIND_CUDA_EVENT" in tables:
        events = con.execute(
            f"SELECT {PID}, deviceId, CASE WHEN streamId = {none} THEN -1 ELSE streamId END, correlationId, "
            f"CASE WHEN eventId = {none} THEN -1 ELSE eventId END FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT"
        ).fetchall()
    con.close()
    data = read_trace(real)
    y, ev = data.syncs, data.event_records
    got = list(zip(y.start_ns.tolist(), y.end_ns.tolist(), y.pid.tolist(), y.device.tolist(), y.stream.tolist(),
                   y.correlation.tolist(), y.sync_type.tolist(), y.event.tolist()))  # fmt: skip
    assert sorted(got) == sorted(syncs) and [g[0] for g in got] == sorted(g[0] for g in got)
    assert sorted(zip(ev.pid.tolist(), ev.device.tolist(), ev.stream.tolist(), ev.correlation.tolist(), ev.event.tolist())) == sorted(events)
    assert y.sync_type.dtype == np.int8
    # what each type means, by the call that made the row
    kinds = {"cudaStreamSynchronize": S.SYNC_STREAM, "cudaStreamWaitEvent": S.SYNC_STREAM_WAIT_EVENT,
             "cudaEventSynchronize": S.SYNC_EVENT, "cudaDeviceSynchronize": S.SYNC_CONTEXT}  # fmt: skip
    for c, t, st, e in zip(y.correlation.tolist(), y.sync_type.tolist(), y.stream.tolist(), y.event.tolist()):
        if names.get(c) in kinds:
            assert t == kinds[names[c]], (names[c], t)
        if t == S.SYNC_STREAM:
            assert st >= 0
        if t == S.SYNC_STREAM_WAIT_EVENT:
            assert st >= 0 and e >= 0


def test_the_analysis_keeps_the_calls_touching_its_window() -> None:
    """A pass range: the calls touching it, every one; no range: every call of the trace."""
    dev = DATA / "h200" / "dev_5x5_s2_b500.sqlite"
    con = sqlite3.connect(f"file:{dev}?mode=ro", uri=True)
    (lo, hi), = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text LIKE 'pass%'").fetchall()
    con.close()
    req = request()
    api = read_trace(dev, api_plan=api_plan(req)).api
    expected = _sql_calls(dev, f"WHERE r.end >= {lo} AND r.start <= {hi}")
    assert sorted(_ours(api)) == sorted(expected) and 0 < len(expected) < len(_sql_calls(dev))
    bare = DATA / "zoo" / "zoo_no_nvtx.sqlite"
    assert sorted(_ours(read_trace(bare, api_plan=api_plan(req)).api)) == sorted(_sql_calls(bare))


def _linked() -> Trace:
    """One call of each kind, linked by correlation id to its GPU rows, its sync row or its event record."""
    return Trace(
        kernels=[Kernel(100, 200, stream=13, corr=10_001), Kernel(150, 260, stream=14, corr=10_001),  # two rows, two streams
                 Kernel(300, 400, stream=7, corr=0)],  # device-launched: matches no call
        copies=[Copy(50, 90, kind=1, bytes=64, stream=13, corr=10_002)],
        memsets=[Memset(40, 45, bytes=16, stream=15, corr=10_003)],
        graphs=[Graph(500, 600, stream=16, corr=10_004)],
        api=[Api(10, 20, "cudaLaunchKernel_v7000", corr=10_001), Api(21, 30, "cudaMemcpyAsync_v3020", corr=10_002),
             Api(31, 35, "cudaMemsetAsync_v3020", corr=10_003), Api(36, 40, "cudaGraphLaunch_v10000", corr=10_004),
             Api(41, 42, "cudaEventRecord_v3020", corr=10_005), Api(43, 44, "cudaStreamWaitEvent_v3020", corr=10_006),
             Api(45, 700, "cudaStreamSynchronize_v3020", corr=10_007), Api(701, 800, "cudaEventSynchronize_v3020", corr=10_008),
             Api(801, 900, "cudaDeviceSynchronize_v3020", corr=10_009), Api(901, 902, "cudaGetDevice_v3020", corr=10_010)],
        syncs=[Sync(43, 44, stream=14, sync_type=2, event=3, corr=10_006), Sync(45, 700, stream=16, sync_type=2, corr=10_007),
               Sync(701, 800, stream=4294967295, sync_type=1, event=3, corr=10_008),
               Sync(801, 900, stream=4294967295, sync_type=4, corr=10_009)],
        events=[EventRecord(stream=13, event=3, corr=10_005)],
    )  # fmt: skip


STREAMS = [14, 13, 15, 16, 13, 14, 16, -1, -1, -1]  # per call of _linked(), in order
CORRS = list(range(10_001, 10_011))


@pytest.mark.parametrize("era", ERAS)
def test_links_in_every_schema_era(tmp_path: Path, era: str) -> None:
    data = read_trace(build(tmp_path / f"l{era}.sqlite", _linked(), era))
    api = data.api
    assert api.correlation.tolist() == CORRS and api.stream.tolist() == STREAMS
    act = data.activity
    assert sorted(zip(act.start_ns.tolist(), act.correlation.tolist())) == [
        (40, 10_003), (50, 10_002), (100, 10_001), (150, 10_001), (300, 0), (500, 10_004)]
    y = data.syncs
    assert list(zip(y.correlation.tolist(), y.stream.tolist(), y.sync_type.tolist(), y.event.tolist())) == [
        (10_006, 14, S.SYNC_STREAM_WAIT_EVENT, 3), (10_007, 16, S.SYNC_STREAM, -1), (10_008, -1, S.SYNC_EVENT, 3),
        (10_009, -1, S.SYNC_CONTEXT, -1)]  # fmt: skip
    assert (y.start_ns.tolist(), y.end_ns.tolist(), y.pid.tolist(), y.device.tolist()) == (
        [43, 45, 701, 801], [44, 700, 800, 900], [100] * 4, [0] * 4)
    ev = data.event_records
    assert (ev.pid.tolist(), ev.device.tolist(), ev.stream.tolist(), ev.correlation.tolist(), ev.event.tolist()) == (
        [100], [0], [13], [10_005], [3])


@pytest.mark.parametrize("era", ("2020.3", "2025.3"))
def test_exports_without_correlation_ids_read_zero_and_no_stream(tmp_path: Path, era: str) -> None:
    t = _linked()
    t.correlation = False
    data = read_trace(build(tmp_path / "n.sqlite", t, era))
    assert data.api.correlation.tolist() == [0] * 10 and data.api.stream.tolist() == [-1] * 10
    assert data.activity.correlation.tolist() == [0] * 6
    assert data.syncs.correlation.tolist() == [0] * 4 and data.syncs.stream.tolist() == [14, 16, -1, -1]
    assert data.event_records.correlation.tolist() == [0] and data.event_records.stream.tolist() == [13]


def test_no_sync_or_event_tables_give_empty_records(tmp_path: Path) -> None:
    data = read_trace(build(tmp_path / "k.sqlite", Trace(kernels=[Kernel(0, 10)], api=[Api(0, 5, "cudaLaunchKernel_v7000")])))
    assert len(data.syncs) == 0 and len(data.event_records) == 0
    assert data.syncs.sync_type.dtype == np.int8 and data.api.stream.tolist() == [-1]


def test_the_cupti_tracers_export_links_calls_to_their_records(tmp_path: Path) -> None:
    path = W.write_trace_sqlite(
        tmp_path / "w.sqlite",
        kernels=[W.KernelRecord(100, 200, 0, 1, 7, 501, 42, "k")],
        memcpys=[W.CopyRecord(210, 260, 0, 1, 9, 502, 42, 4096, 2)],
        runtime=[W.ApiRecord(90, 95, 42, 42, 501, "cudaLaunchKernel_v7000"), W.ApiRecord(96, 99, 42, 42, 502, "cudaMemcpyAsync_v3020"),
                 W.ApiRecord(270, 280, 42, 42, 503, "cudaStreamSynchronize_v3020")],
    )  # fmt: skip
    data = read_trace(path)
    assert data.api.correlation.tolist() == [501, 502, 503] and data.api.stream.tolist() == [7, 9, -1]
    assert sorted(data.activity.correlation.tolist()) == [501, 502]
    assert len(data.syncs) == 0 and len(data.event_records) == 0


def test_ids_too_large_for_the_compact_columns_widen_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Correlation ids past 2**31 and stream ids past 2**15, first met in a later chunk: the columns widen
    and every value is kept (the rows read before the widening too)."""
    from clusterbench.io.nsys import reader as R

    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 3)
    big, wide = 3_000_000_000, 70_000
    kernels = [Kernel(10 * i, 10 * i + 5, stream=7, corr=10_000 + i) for i in range(8)]
    kernels.append(Kernel(100, 105, stream=wide, corr=big))
    calls = [Api(10 * i, 10 * i + 1, "cudaLaunchKernel_v7000", corr=10_000 + i) for i in range(8)]
    calls.append(Api(99, 100, "cudaLaunchKernel_v7000", corr=big))
    data = read_trace(build(tmp_path / "w.sqlite", Trace(kernels=kernels, api=calls)))
    assert data.activity.correlation.dtype == np.int64 and data.activity.stream.dtype == np.int32
    assert data.activity.correlation.tolist() == [10_000 + i for i in range(8)] + [big]
    assert data.api.correlation.dtype == np.int64 and data.api.stream.dtype == np.int32
    assert data.api.correlation.tolist() == [10_000 + i for i in range(8)] + [big]
    assert data.api.stream.tolist() == [7] * 8 + [wide]
