"""The export in time slabs (io.nsys.slabs): every row of the activity, API and synchronization tables
exactly once, each slab holding the rows that start in its span, whatever the chunk and slab sizes; the
same rows as the whole read (reader.read_trace); a table stored out of start order is refused, and read
whole and sorted with ordered=False to the same rows."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from clusterbench.io.nsys import reader as R
from clusterbench.io.nsys import schema as S
from clusterbench.io.nsys import slabs as B

DATA = Path(__file__).resolve().parents[1] / "data"
TRACES = sorted(DATA.rglob("*.sqlite"))


def _slabs(path: Path, rows: int, disordered=frozenset()) -> tuple[list[B.Slab], B.SlabReader]:  # noqa: ANN001
    out: list = []
    got = list(B.iter_slabs(path, rows=rows, disordered=disordered, reader_out=out))
    return got, out[-1]


def _check_against_whole(path: Path, slabs: list[B.Slab], rd: B.SlabReader) -> None:
    data = R.read_trace(path, api_plan=R.KEEP_ALL)
    act, api, syncs = B.as_whole(slabs, rd)
    w = data.activity
    assert act.sections == w.sections
    for f in ("start_ns", "end_ns", "engine", "stream", "pageable", "correlation"):
        assert np.array_equal(getattr(act, f), getattr(w, f)), f
    assert np.array_equal(act.pid, np.asarray(w.pid)) and np.array_equal(act.device, np.asarray(w.device))
    nb = np.asarray(w.bytes)
    assert np.array_equal(act.bytes, nb)
    lo, hi = w.sections[S.ENGINE_CODE["kernel"]]
    assert [act.kernel_names[i] for i in act.kernel_name.tolist()] == [w.kernel_names[i] for i in w.kernel_name.tolist()]
    a = data.api
    assert np.array_equal(api["start"], a.start_ns) and np.array_equal(api["end"], a.end_ns)
    assert np.array_equal(api["corr"], a.correlation)
    assert [rd.api_names[i] for i in api["name"].tolist()] == [a.names[i] for i in a.name.tolist()]
    keys = rd.threads_map.keys
    assert [keys[i] for i in api["thread"].tolist()] == [(a.threads[i].pid << 24) | a.threads[i].tid for i in a.thread.tolist()]
    for f in ("start_ns", "end_ns", "pid", "device", "stream", "correlation", "sync_type", "event"):
        assert np.array_equal(np.asarray(getattr(syncs, f), dtype=np.int64), np.asarray(getattr(data.syncs, f), dtype=np.int64)), f


def _check_spans(slabs: list[B.Slab]) -> None:
    assert slabs[0].t0 is None and slabs[-1].t1 is None
    for k, s in enumerate(slabs):
        assert s.index == k
        if k:
            assert s.t0 == slabs[k - 1].t1
        for starts in (s.activity.start_ns, s.api["start"], s.syncs.start_ns):
            if starts.size:
                assert s.t0 is None or int(starts.min()) >= s.t0
                assert s.t1 is None or int(starts.max()) < s.t1


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_slabs_hold_every_row_once_in_time_order(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 64)
    slabs, rd = _slabs(path, rows=50)
    assert len(slabs) >= sum(s.rows for s in slabs) // 200  # many slabs: none holds far more than asked
    _check_spans(slabs)
    _check_against_whole(path, slabs, rd)


def test_one_slab_when_it_is_large(monkeypatch: pytest.MonkeyPatch) -> None:
    path = DATA / "h200" / "dev_7x7_s3_b250_async.sqlite"
    slabs, rd = _slabs(path, rows=10**9)
    assert len(slabs) == 1
    _check_against_whole(path, slabs, rd)


def test_rows_out_of_start_order_are_refused_then_merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = DATA / "zoo" / "zoo_two_threads.sqlite"
    dst = tmp_path / "shuffled.sqlite"
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    top = con.execute("SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY (rowid * 7919) % 1009, rowid")
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE rowid <= ?", (top,))
    con.commit()
    con.close()
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 64)
    with pytest.raises(B.Disordered) as err:
        _slabs(dst, rows=200)
    assert err.value.table == S.RUNTIME_TABLE
    slabs, rd = _slabs(dst, rows=200, disordered={S.RUNTIME_TABLE})
    _check_spans(slabs)
    _check_against_whole(dst, slabs, rd)
    slabs, rd = _slabs(dst, rows=200, disordered=True)  # every table read as out of order: the same rows
    _check_spans(slabs)
    _check_against_whole(dst, slabs, rd)
    out: list = []
    tries: list[int] = []

    def consume(it):  # noqa: ANN001, ANN202
        tries.append(1)
        return list(it)

    slabs = B.run(dst, consume, rows=200, reader_out=out)  # refused once, then read as out of order
    assert len(tries) == 2
    _check_spans(slabs)
    _check_against_whole(dst, slabs, out[-1])


def test_a_tear_down_stored_first_waits_in_the_buffer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's host-bound shape stores its program's tear-down calls first (low rowids, the
    latest starts): read as out of order, the buffer holds those few rows and the chunk being merged,
    never the table."""
    import importlib.util

    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_analyze.py"
    spec = importlib.util.spec_from_file_location("bench_analyze", bench)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    dst = tmp_path / "hb.sqlite"
    mod.build_loop(DATA / "zoo" / "zoo_host_bound.sqlite", dst, 3002 + 4 * 3001)
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 64)
    out: list = []
    most = [0]

    def consume(it):  # noqa: ANN001, ANN202
        got = []
        for slab in it:
            got.append(slab)
            most[0] = max(most[0], max((c.buf["start"].size if c.buf is not None else 0) for c in out[-1].cursors))
        return got

    slabs = B.run(dst, consume, rows=200, reader_out=out)
    _check_spans(slabs)
    _check_against_whole(dst, slabs, out[-1])
    assert most[0] < 64 * 3 + 20  # a few chunks and the tear-down's rows


@pytest.mark.parametrize("name", ["dev_5x5_s2_b500", "zoo_two_threads"])
def test_span_only_reads_the_rows_the_window_needs(name: str) -> None:
    # the slab path's first pass: every activity row with its times, engine, stream, bytes and group, every
    # API row whole, but no kernel names, no correlation ids on the activity rows and no synchronization rows
    path = next(p for p in TRACES if p.stem == name)
    full, rd = _slabs(path, 300)
    out: list = []
    narrow = list(B.iter_slabs(path, rows=300, reader_out=out, span_only=True))
    _check_spans(narrow)
    act, api, syncs = B.as_whole(full, rd)
    nact, napi, nsyncs = B.as_whole(narrow, out[-1])
    assert syncs.start_ns.size > 0 and nsyncs.start_ns.size == 0
    assert act.correlation.any() and not nact.correlation.any()
    assert set(nact.kernel_names[i] for i in nact.kernel_name.tolist()) == {"(no name)"}
    assert nact.sections == act.sections
    for f in ("start_ns", "end_ns", "engine", "stream", "pageable", "bytes", "pid", "device"):
        assert np.array_equal(np.asarray(getattr(nact, f)), np.asarray(getattr(act, f))), f
    for k in ("start", "end", "corr"):
        assert np.array_equal(napi[k], api[k]), k


def test_a_pass_is_closed_as_it_ends_not_by_the_garbage_collector() -> None:
    # run() closes each pass's slabs on its own thread as the pass returns or raises: the read pool's threads
    # are gone and the connection closed before the caller goes on. With the collector off, a pass left open
    # keeps its pool's threads alive (a pass abandoned mid-way, then closed by a collection inside a thread
    # that was starting up, once deadlocked the next pass)
    import gc
    import threading

    path = next(p for p in TRACES if p.stem == "zoo_queue_fill")

    def pool_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("clusterbench-slab") and t.is_alive()}

    before = pool_threads()
    seen: list = []

    def gives_up(slabs) -> None:  # noqa: ANN001
        seen.append(next(slabs))  # the pool is reading ahead now
        try:
            raise RuntimeError("a look-ahead too short")
        except RuntimeError as exc:
            held = exc  # noqa: F841 - the frame holds its own exception: a cycle only the collector breaks
            raise

    def takes_one(slabs) -> int:  # noqa: ANN001
        return len(next(slabs).api["start"])

    gc.disable()
    try:
        with pytest.raises(RuntimeError, match="look-ahead"):
            B.run(path, gives_up, rows=50)
        assert seen and pool_threads() <= before
        assert B.run(path, takes_one, rows=50) >= 0
        assert pool_threads() <= before
    finally:
        gc.enable()


def _same_slab(a: B.Slab, b: B.Slab) -> None:
    assert (a.index, a.t0, a.t1) == (b.index, b.t0, b.t1)
    for f in dataclasses.fields(R.Activity):
        x, y = getattr(a.activity, f.name), getattr(b.activity, f.name)
        assert np.array_equal(np.asarray(x), np.asarray(y)) if isinstance(x, np.ndarray) else x == y, f.name
    assert a.api.keys() == b.api.keys() and all(np.array_equal(a.api[k], b.api[k]) for k in a.api)
    for f in dataclasses.fields(R.SyncEvents):
        assert np.array_equal(np.asarray(getattr(a.syncs, f.name)), np.asarray(getattr(b.syncs, f.name))), f.name


@pytest.mark.parametrize("name", ["dev_5x5_s2_b500", "zoo_two_threads"])
def test_a_spill_hands_out_the_slabs_of_a_second_read(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the slabs kept by a pass and handed out again are those a second read of the export gives, every time
    # they are replayed; the file is unlinked from the start (nothing left in the temporary directory)
    monkeypatch.setattr(B.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 64)
    path = next(p for p in TRACES if p.stem == name)
    spill = B.Spill(path, enabled=True)
    first = list(spill.tee(B.iter_slabs(path, rows=50)))
    assert spill.usable and spill.slabs == len(first) > 1
    assert list(tmp_path.iterdir()) == []
    again, _ = _slabs(path, 50)
    for _ in range(2):
        kept = list(spill.replay())
        assert len(kept) == len(again)
        for a, b in zip(kept, again):
            _same_slab(a, b)
    # a pass started again (a table out of order, a new group) drops what the last one kept
    it = spill.tee(B.iter_slabs(path, rows=50))
    next(it)
    assert not spill.usable and spill.slabs == 1
    it.close()
    spill.close()
    assert not spill.usable


def test_a_spill_that_cannot_be_written_keeps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 64)
    path = next(p for p in TRACES if p.stem == "zoo_two_threads")
    # too little room beside the export: no file at all
    monkeypatch.setattr(B, "SPILL_MARGIN", 1 << 62)
    spill = B.Spill(path, enabled=True)
    assert not spill.enabled  # known before the first pass, which then reads only what it needs
    n = sum(1 for _ in spill.tee(B.iter_slabs(path, rows=50)))
    assert n > 1 and not spill.usable and "free in the temporary directory" in spill.reason
    monkeypatch.setattr(B, "SPILL_MARGIN", 0)
    # a write that fails part-way (a full disk): the pass goes on, every slab still handed out, none kept
    real = B.pickle.dump
    calls = []

    def fails_third(obj, fh, protocol=None) -> None:  # noqa: ANN001
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(obj, fh, protocol=protocol)

    monkeypatch.setattr(B.pickle, "dump", fails_third)
    spill = B.Spill(path, enabled=True)
    assert sum(1 for _ in spill.tee(B.iter_slabs(path, rows=50))) == n
    assert not spill.usable and "No space left" in spill.reason and len(calls) == 3
    with pytest.raises(RuntimeError):
        next(spill.replay())
    off = B.Spill(path, enabled=False)
    assert not off.enabled and off.reason == "CLUSTERBENCH_SLAB_SPILL=0"


def test_no_spill_in_a_temporary_directory_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a mount table: / on a disk, /tmp on tmpfs, a folder with a space in its name on a disk again
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/vda1 / ext4 rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n/dev/vdb1 /tmp/big\\040disk xfs rw 0 0\n")
    assert B.filesystem_type("/tmp/x/y", str(mounts)) == "tmpfs"
    assert B.filesystem_type("/tmp", str(mounts)) == "tmpfs"
    assert B.filesystem_type("/tmpfoo", str(mounts)) == "ext4"
    assert B.filesystem_type("/tmp/big disk/z", str(mounts)) == "xfs"
    assert B.filesystem_type("/x", str(tmp_path / "no such table")) is None
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 64)
    monkeypatch.setattr(B, "filesystem_type", lambda path: "tmpfs")
    path = next(p for p in TRACES if p.stem == "zoo_two_threads")
    spill = B.Spill(path, enabled=True)
    assert sum(1 for _ in spill.tee(B.iter_slabs(path, rows=50))) > 1
    assert not spill.enabled and not spill.usable and spill.reason == "the temporary directory is in memory (tmpfs)"
