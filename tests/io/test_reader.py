"""read_trace across schema eras, and every kind of bad input (one clear TraceError each)."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import sqlite_utils

from clusterbench.errors import TraceError
from clusterbench.io.nsys import read_trace
from clusterbench.io.nsys.reader import base_api_name
from clusterbench.io.nsys import schema as S
from clusterbench.io.nsys.schema import ENGINES

from fake_nsys import ERAS, SCHEMA_VERSION, Api, Copy, Graph, Kernel, Memset, Range, Trace, build

H200 = Path(__file__).resolve().parents[1] / "data" / "h200"
REAL = H200 / "dev_5x5_s2_b500.sqlite"


def sample() -> Trace:
    return Trace(
        kernels=[Kernel(1000, 1300, stream=7), Kernel(1200, 1500, stream=13)],
        copies=[
            Copy(100, 400, kind=1, bytes=3000),
            Copy(500, 600, kind=2, bytes=1000),
            Copy(700, 710, kind=8, bytes=10),
            Copy(720, 730, kind=10, bytes=20),
            Copy(740, 750, kind=11, bytes=30),
            Copy(760, 770, kind=12, bytes=40),
            Copy(780, 790, kind=13, bytes=50),
            Copy(800, 810, kind=3, bytes=60),  # HtoA -> other
            Copy(820, 830, kind=99, bytes=70),  # unknown future kind -> other
        ],
        memsets=[Memset(50, 60, bytes=4096)],
        api=[Api(0, 40, "cudaStreamSynchronize_v3020"), Api(45, 48, "cudaMemcpyAsync_v3020")],
        ranges=[Range(0, 2000, "pass frames=5"), Range(10, 20, "mark", event_type=34, by_id=True)],
    )


@pytest.mark.parametrize("era", ERAS)
def test_every_schema_era_reads_the_same_records(tmp_path: Path, era: str) -> None:
    data = read_trace(build(tmp_path / f"t{era}.sqlite", sample(), era))
    act = data.activity
    assert len(act) == 2 + 9 + 1
    engines = sorted(ENGINES[c] for c in act.engine.tolist())
    expected = sorted(["kernel", "kernel", "h2d", "d2h", "d2d", "p2p", "um_h2d", "um_d2h", "um_d2d", "other", "other", "memset"])
    assert engines == expected
    assert set(act.pid.tolist()) == {100}
    assert set(act.device.tolist()) == {0}
    h2d = act.engine == ENGINES.index("h2d")
    assert act.start_ns[h2d].tolist() == [100] and act.end_ns[h2d].tolist() == [400] and act.bytes[h2d].tolist() == [3000]
    assert data.schema_version == SCHEMA_VERSION.get(era)  # None where the era has no metadata table
    assert data.gpu_name(0) == "NVIDIA H200"  # TARGET_INFO_CUDA_GPU in 2020.3, TARGET_INFO_GPU after
    assert len(data.ranges) == 1 and data.ranges.text_of(0) == "pass frames=5"  # the mark has no end
    api = data.api  # every call kept (no plan): the sync [0,40) and the async copy [45,48)
    assert [api.names[i] for i in api.name.tolist()] == ["cudaStreamSynchronize", "cudaMemcpyAsync"]
    assert api.start_ns.tolist() == [0, 45] and api.end_ns.tolist() == [40, 48]
    assert [S.API_CATEGORIES[c] for c in api.category.tolist()] == ["wait", "copy"]
    assert [(t.pid, t.tid, t.name) for t in api.threads] == [(100, 100, "python")]


def test_kernels_without_memcpy_table(tmp_path: Path) -> None:
    data = read_trace(build(tmp_path / "k.sqlite", Trace(kernels=[Kernel(0, 10), Kernel(20, 25)]), "2023.3"))
    assert "CUPTI_ACTIVITY_KIND_MEMCPY" not in data.tables
    assert data.activity.engine.tolist() == [0, 0]
    assert len(data.api) == 0 and data.api.tables == ()


def test_several_processes_and_devices_keep_their_keys(tmp_path: Path) -> None:
    t = Trace(
        kernels=[Kernel(0, 10, pid=100, device=0), Kernel(0, 10, pid=4_000_000, device=1)],
        copies=[Copy(0, 5, kind=2, bytes=1, pid=4_000_000, device=3)],
        api=[Api(0, 1, "cudaDeviceSynchronize_v3020", pid=100), Api(2, 3, "cuCtxSynchronize", pid=4_000_000)],
    )
    data = read_trace(build(tmp_path / "m.sqlite", t))
    got = sorted(zip(data.activity.pid.tolist(), data.activity.device.tolist(), data.activity.engine.tolist()))
    k, d2h = ENGINES.index("kernel"), ENGINES.index("d2h")
    assert got == [(100, 0, k), (4_000_000, 1, k), (4_000_000, 3, d2h)]
    assert sorted(t.pid for t in data.api.threads) == [100, 4_000_000]


def test_nvtx_text_inline_and_through_textid(tmp_path: Path) -> None:
    t = Trace(
        kernels=[Kernel(0, 10)],
        ranges=[Range(0, 5, "pass frames=1"), Range(6, 9, "pass frames=2", by_id=True), Range(1, 2, "pedestal")],
    )
    data = read_trace(build(tmp_path / "n.sqlite", t))
    texts = [data.ranges.text_of(i) for i in range(len(data.ranges))]
    assert texts == ["pass frames=1", "pass frames=2"]  # only the pass prefixes were asked for
    data2 = read_trace(tmp_path / "n.sqlite", range_prefixes=("ped",))
    assert [data2.ranges.text_of(i) for i in range(len(data2.ranges))] == ["pedestal"]


def test_base_api_name() -> None:
    assert base_api_name("cudaStreamSynchronize_v3020") == "cudaStreamSynchronize"
    assert base_api_name("cuMemcpyHtoD_v2") == "cuMemcpyHtoD"
    assert base_api_name("cudaStreamSynchronize_ptsz_v7000") == "cudaStreamSynchronize"
    assert base_api_name("cudaMemcpyAsync_v3020") == "cudaMemcpyAsync"
    assert base_api_name("cudaMemcpy_v3020") == "cudaMemcpy"


def test_missing_core_column_is_named(tmp_path: Path) -> None:
    p = build(tmp_path / "c.sqlite", Trace(kernels=[Kernel(0, 10)]))
    db = sqlite_utils.Database(p)
    db["CUPTI_ACTIVITY_KIND_KERNEL"].transform(rename={"streamId": "streamIdx"})
    db.close()
    with pytest.raises(TraceError, match="CUPTI_ACTIVITY_KIND_KERNEL lacks column 'streamId'"):
        read_trace(p)


# --------------------------------------------------------------------------- bad input


def _err(path: Path) -> TraceError:
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert info.value.hint  # every error says what to do next
    return info.value


def test_missing_file(tmp_path: Path) -> None:
    assert "trace not found" in str(_err(tmp_path / "nope.sqlite"))


def test_directory(tmp_path: Path) -> None:
    assert "is a directory" in str(_err(tmp_path))


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.sqlite"
    p.write_bytes(b"")
    assert "empty file" in str(_err(p))


def test_text_file(tmp_path: Path) -> None:
    p = tmp_path / "notes.sqlite"
    p.write_text("start,end\n1,2\n")
    assert "not an SQLite database" in str(_err(p))


def test_truncated_real_export(tmp_path: Path) -> None:
    p = tmp_path / "cut.sqlite"
    p.write_bytes(REAL.read_bytes()[: 40 * 4096])
    assert "truncated" in str(_err(p))


def test_truncated_inside_header(tmp_path: Path) -> None:
    p = tmp_path / "cut.sqlite"
    p.write_bytes(REAL.read_bytes()[:60])
    assert "truncated" in str(_err(p))


def test_corrupt_pages(tmp_path: Path) -> None:
    raw = bytearray(REAL.read_bytes())
    page = int.from_bytes(raw[16:18], "big")
    for off in range(page, len(raw), 2 * page):  # scribble over every other page after the schema page
        raw[off : off + page] = b"\xa5" * page
    p = tmp_path / "bad.sqlite"
    p.write_bytes(bytes(raw))
    assert "corrupt" in str(_err(p))


def test_sqlite_but_not_nsys(tmp_path: Path) -> None:
    p = tmp_path / "other.sqlite"
    sqlite_utils.Database(p)["dogs"].insert({"name": "Cleo"})
    err = _err(p)
    assert "not an nsys export" in str(err) and "dogs" in str(err)


def test_cpu_only_trace(tmp_path: Path) -> None:
    p = build(tmp_path / "cpu.sqlite", Trace(ranges=[Range(0, 10, "work")], gpu_name=None))
    err = _err(p)
    assert "no GPU activity" in str(err) and "CPU-only" in str(err)
    assert "nsys profile -t cuda" in (err.hint or "")


def test_gpu_listed_but_no_cuda_tables_is_not_called_cpu_only(tmp_path: Path) -> None:
    p = build(tmp_path / "nocuda.sqlite", Trace(ranges=[Range(0, 10, "work")]))  # TARGET_INFO_GPU: NVIDIA H200
    err = _err(p)
    assert "CPU-only" not in str(err)
    assert "lists a GPU (NVIDIA H200 (device 0))" in str(err) and "no CUDA tables" in str(err)
    assert "nsys profile -t cuda" in (err.hint or "")


def test_cuda_traced_but_no_gpu_work(tmp_path: Path) -> None:
    p = build(tmp_path / "api.sqlite", Trace(api=[Api(0, 1, "cudaMalloc_v3020"), Api(2, 3, "cudaFree_v3020")]))
    err = _err(p)
    text = f"{err} {err.hint}"
    assert "no GPU work was captured" in str(err) and "2 CUDA API calls" in str(err)
    assert "CUPTI_ACTIVITY_KIND_RUNTIME" in str(err)
    assert "capture" in str(err) and "flushed" in str(err)  # likely causes are named
    assert "-t cuda" not in text and "trace CUDA" not in text  # CUDA was traced: never advise tracing it


def test_graph_trace_rows_are_the_graph_engine(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(0, 10)], graphs=[Graph(100, 400, stream=9), Graph(500, 520, stream=9, pid=100)])
    data = read_trace(build(tmp_path / "g.sqlite", t))
    g = data.activity.engine == ENGINES.index("graph")
    assert data.activity.start_ns[g].tolist() == [100, 500] and data.activity.end_ns[g].tolist() == [400, 520]
    assert data.activity.stream[g].tolist() == [9, 9] and data.activity.bytes[g].tolist() == [0, 0]
    assert data.graph_trace == "graph"
    node = read_trace(build(tmp_path / "n.sqlite", Trace(kernels=[Kernel(0, 10, graph_node=5)], graph_nodes=True)))
    assert node.graph_trace == "node" and node.activity.engine.tolist() == [ENGINES.index("kernel")]
    assert read_trace(build(tmp_path / "p.sqlite", Trace(kernels=[Kernel(0, 10)]))).graph_trace is None


def test_streams_and_pageable_flags_are_read(tmp_path: Path) -> None:
    t = Trace(
        kernels=[Kernel(0, 10, stream=3)],
        copies=[Copy(10, 20, 1, 100, stream=4, pageable=True), Copy(20, 30, 2, 50, stream=5), Copy(30, 40, 99, 7, stream=6)],
        memsets=[Memset(40, 50, 8, stream=0)],
    )
    for path in (build(tmp_path / "one.sqlite", t), build(tmp_path / "two.sqlite", Trace(kernels=t.kernels + [Kernel(0, 1, pid=7)], copies=t.copies, memsets=t.memsets))):
        act = read_trace(path).activity
        rows = {(int(a), int(st)): (ENGINES[int(en)], bool(pg), int(b)) for a, st, en, pg, b in zip(act.start_ns, act.stream, act.engine, act.pageable, act.bytes)}
        assert rows[(0, 3)] == ("kernel", False, 0)
        assert rows[(10, 4)] == ("h2d", True, 100)  # pageable host source (srcKind 0)
        assert rows[(20, 5)] == ("d2h", False, 50)
        assert rows[(30, 6)] == ("other", False, 7)  # unknown copy kind 99 -> other
        assert rows[(40, 0)] == ("memset", False, 8)


def test_api_calls_keep_their_base_names_and_categories(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(0, 10)], api=[Api(0, 5, "cudaMemcpy_v3020"), Api(6, 8, "cudaStreamSynchronize_v3020"),
                                            Api(9, 9, "cudaMemcpyAsync_v3020"), Api(10, 12, "cuModuleLoadData"),
                                            Api(13, 14, "cudaMallocHost_v3020"), Api(15, 16, "cudaGraphLaunch_v10000"),
                                            Api(17, 18, "cudaLaunchKernel_v7000"), Api(19, 20, "cudaEventRecord_v3020")])
    api = read_trace(build(tmp_path / "h.sqlite", t)).api
    got = [(api.names[n], S.API_CATEGORIES[c]) for n, c in zip(api.name.tolist(), api.category.tolist())]
    assert got == [("cudaMemcpy", "wait"), ("cudaStreamSynchronize", "wait"), ("cudaMemcpyAsync", "copy"),
                   ("cuModuleLoadData", "module_load"), ("cudaMallocHost", "alloc"), ("cudaGraphLaunch", "graph_launch"),
                   ("cudaLaunchKernel", "launch"), ("cudaEventRecord", "other")]


def test_empty_activity_table_means_absent(tmp_path: Path) -> None:
    p = build(tmp_path / "e.sqlite", Trace(kernels=[Kernel(0, 10)], copies=[Copy(0, 5, 1, 8)]))
    with sqlite3.connect(p) as con:
        con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    data = read_trace(p)
    assert data.activity.engine.tolist() == [0]


# --------------------------------------------------------------------------- read-only


def test_trace_is_never_modified(tmp_path: Path) -> None:
    from clusterbench.analyzers import analyze_trace

    p = tmp_path / "copy.sqlite"
    shutil.copyfile(REAL, p)
    os.chmod(p, 0o644)  # writable on purpose
    before = (p.read_bytes(), p.stat().st_mtime_ns)
    analyze_trace(p, by_stream=True)
    analyze_trace(p, range_name="pedestal")
    assert (p.read_bytes(), p.stat().st_mtime_ns) == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["copy.sqlite"]  # no -journal, -wal or -shm


def test_path_with_uri_characters(tmp_path: Path) -> None:
    d = tmp_path / "a dir?mode=rw#x"
    d.mkdir()
    p = d / "t%20.sqlite"
    shutil.copyfile(REAL, p)
    data = read_trace(p)
    assert len(data.activity) == int(np.int64(24 + 41))


# --------------------------------------------------------------------------- the host side and NVTX domains


def test_domains_threads_overhead_and_driver_table(tmp_path: Path) -> None:
    from fake_nsys import Overhead

    t = Trace(
        kernels=[Kernel(0, 10, name="zoo_calib")],
        api=[Api(0, 5, "cudaLaunchKernel_v7000", tid=101), Api(6, 8, "cuModuleLoadData", tid=101)],
        ranges=[Range(0, 50, "event loop", domain="zoo_daq"), Range(10, 20, "batch", domain="zoo_daq", event_type=60, by_id=True),
                Range(0, 60, "pass frames=2")],
        overhead=[Overhead(30, 40, "CUPTI Buffer flush", tid=999)],
        thread_names={(100, 101): "zoo-feed-0"},
        driver_table=True,
    )  # fmt: skip
    path = build(tmp_path / "d.sqlite", t)
    data = read_trace(path, range_prefixes=("event", "batch", "pass"))
    assert data.ranges.domains == {1: "zoo_daq"}
    got = sorted((data.ranges.text_of(i), data.ranges.domain_of(i)) for i in range(len(data.ranges)))
    assert got == [("batch", "zoo_daq"), ("event loop", "zoo_daq"), ("pass frames=2", None)]
    api = data.api
    assert set(api.tables) == {"CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"}
    assert sorted(api.names[i] for i in api.name.tolist()) == ["cuModuleLoadData", "cudaLaunchKernel"]
    assert [(th.pid, th.tid, th.name) for th in api.threads] == [(100, 101, "zoo-feed-0")]
    ov = data.overhead
    assert (ov.start_ns.tolist(), ov.tid.tolist(), ov.name) == ([30], [999], ("CUPTI Buffer flush",))
    assert data.activity.kernel_names == ("zoo_calib",)
    assert read_trace(path, kernel_names="mangled").activity.kernel_names == ("_Zzoo_calib",)


def test_api_plan_keeps_every_call_touching_the_region(tmp_path: Path) -> None:
    from clusterbench.io.nsys import ApiPlan

    iv = lambda *p: (np.array([a for a, _ in p], dtype=np.int64), np.array([b for _, b in p], dtype=np.int64))
    t = Trace(kernels=[Kernel(0, 10)], api=[
        Api(80, 90, "cudaLaunchKernel_v7000"),         # ends on the region's start: kept (closed intervals)
        Api(100, 110, "cudaLaunchKernel_v7000"),       # inside: kept, one by one
        Api(120, 125, "cudaMemcpyAsync_v3020"),        # kept
        Api(130, 140, "cudaStreamSynchronize_v3020"),  # kept
        Api(395, 405, "cudaLaunchKernel_v7000"),       # crosses the region's end: kept
        Api(401, 410, "cudaLaunchKernel_v7000"),       # just after the region [90, 400]: dropped
        Api(500, 510, "cudaLaunchKernel_v7000"),       # dropped
        Api(120, 130, "cudaLaunchKernel_v7000", pid=7),  # another process, not in the plan: dropped
    ])  # fmt: skip
    plan = ApiPlan(region={100: iv((90, 400))})
    api = read_trace(build(tmp_path / "p.sqlite", t), api_plan=plan).api
    assert list(zip(api.start_ns.tolist(), (api.names[i] for i in api.name.tolist()))) == [
        (80, "cudaLaunchKernel"), (100, "cudaLaunchKernel"), (120, "cudaMemcpyAsync"), (130, "cudaStreamSynchronize"),
        (395, "cudaLaunchKernel")]  # fmt: skip
    assert len(api.totals.ns) == 0  # nothing is summed any more
