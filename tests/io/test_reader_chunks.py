"""The API calls read in many small chunks on several threads equal a plain Python pass over the rows:
the calls kept (those touching the plan's region), each with its correlation id and the stream it names,
each thread's issuing span, and the thread index (a thread's order of first sight) whatever the chunking
(reader._Threads, _min_max_by)."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import numpy as np
import pytest

from clusterbench.io.nsys import ApiPlan, read_trace
from clusterbench.io.nsys import reader as R
from clusterbench.io.nsys import schema as S

from fake_nsys import Api, Copy, EventRecord, Kernel, Sync, Trace, build

NAMES = ("cudaLaunchKernel_v7000", "cudaMemcpyAsync_v3020", "cudaStreamSynchronize_v3020", "cudaEventRecord_v3020",
         "cudaMalloc_v3020", "cudaMemcpy_v3020", "cuLaunchKernel", "cudaEventQuery_v3020")  # fmt: skip
NONE = 4294967295


def _iv(*pairs: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    return np.array([a for a, _ in pairs], dtype=np.int64), np.array([b for _, b in pairs], dtype=np.int64)


def _trace(seed: int) -> Trace:
    """3,000 calls of two processes; launches and copies get GPU rows (a launch sometimes two, on two
    streams), syncs a synchronization row, event records an event row, all by correlation id."""
    rng = random.Random(seed)
    calls, kernels, copies, syncs, events = [], [], [], [], []
    for i in range(3000):
        start = rng.randrange(0, 100_000)
        name, pid = rng.choice(NAMES), rng.choice((100, 200))
        corr = 10_000 + i
        calls.append(Api(start, start + rng.choice((0, 1, 5, 40, 300)), name, pid=pid, tid=rng.choice((None, 11, 12)),
                         corr=corr))  # fmt: skip
        dev = 0 if pid == 100 else 1
        if "Launch" in name and rng.random() < 0.8:
            kernels.append(Kernel(start + 2, start + 9, stream=rng.choice((7, 13, 14)), pid=pid, device=dev, corr=corr))
            if rng.random() < 0.1:  # a second row on another stream: the call names the larger stream id
                kernels.append(Kernel(start + 3, start + 9, stream=rng.choice((15, 16)), pid=pid, device=dev, corr=corr))
        elif "Memcpy" in name and rng.random() < 0.8:
            copies.append(Copy(start + 1, start + 4, kind=1, bytes=64, stream=rng.choice((7, 13)), pid=pid, device=dev, corr=corr))
        elif "Synchronize" in name and rng.random() < 0.8:
            syncs.append(Sync(start, start + 1, stream=rng.choice((7, 13, NONE)), pid=pid, device=dev, corr=corr))
        elif "EventRecord" in name and rng.random() < 0.8:
            events.append(EventRecord(stream=rng.choice((7, 14)), event=rng.randrange(1, 5), pid=pid, device=dev, corr=corr))
    kernels += [Kernel(0, 10, device=0, pid=100), Kernel(0, 10, device=1, pid=200), Kernel(5, 20, device=1, pid=100)]
    return Trace(kernels=kernels, copies=copies, api=calls, syncs=syncs, events=events)


def _touches(s: int, e: int, pairs: list[tuple[int, int]]) -> bool:
    return any(s <= b and e >= a for a, b in pairs)


def _expected(t: Trace, region: dict | None):
    """The plan applied row by row (ApiPlan's docstring) and each call's stream (ApiCalls.stream), in plain Python."""
    gpu: dict[tuple[int, int], list[int]] = {}
    for r in list(t.kernels) + list(t.copies):
        if r.corr is not None:
            gpu.setdefault((r.pid, r.corr), []).append(r.stream)
    sync = {(y.pid, y.corr): y.stream for y in t.syncs}
    event = {(e.pid, e.corr): e.stream for e in t.events}

    def stream(pid: int, corr: int) -> int:
        if (pid, corr) in gpu:
            return max(gpu[(pid, corr)])
        for table in (sync, event):
            if (pid, corr) in table:
                return -1 if table[(pid, corr)] == NONE else table[(pid, corr)]
        return -1

    kept, spans = [], {}
    for c in t.api:
        tid = c.pid if c.tid is None else c.tid
        base = R.base_api_name(c.name)
        cat = S.api_category(base)
        if cat in S.ISSUE_CATEGORIES or base in S.SYNC_COPY_CALLS:
            # the span a thread issues in: from the start of its first issuing call to the start of its last
            a, b = spans.get((c.pid, tid), (c.start, c.start))
            spans[(c.pid, tid)] = (min(a, c.start), max(b, c.start))
        if region is not None and (c.pid not in region or not _touches(c.start, c.end, region[c.pid])):
            continue
        kept.append((c.start, c.end, c.pid, tid, base, c.corr, stream(c.pid, c.corr)))
    kept.sort(key=lambda x: x[0])  # the reader sorts by start, stably (ties keep the rows' order)
    return kept, spans


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_small_chunks_on_several_threads_equal_a_plain_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 97)  # about 31 chunks
    monkeypatch.setattr(R, "READ_THREADS", 4)
    t = _trace(seed)
    path = build(tmp_path / "t.sqlite", t)
    for region in ({100: [(0, 60_000)], 200: [(20_000, 40_000), (50_000, 100_000)]}, None):
        plan = ApiPlan(region={p: _iv(*v) for p, v in region.items()}) if region is not None else R.KEEP_ALL
        api = read_trace(path, api_plan=plan).api
        kept, spans = _expected(t, region)
        who = [(th.pid, th.tid) for th in api.threads]
        got = [(s, e, *who[k], api.names[n], c, st) for s, e, k, n, c, st in zip(
            api.start_ns.tolist(), api.end_ns.tolist(), api.thread.tolist(), api.name.tolist(), api.correlation.tolist(),
            api.stream.tolist())]  # fmt: skip
        assert sorted(got) == sorted(kept) and [g[0] for g in got] == [k[0] for k in kept]
        assert len({g[-1] for g in got}) >= 5  # -1 and several streams: the test can fail
        assert api.correlation.dtype == np.int32 and api.stream.dtype == np.int16
        got_spans = {who[k]: (a, b) for k, (a, b) in enumerate(zip(api.issue_first_ns.tolist(), api.issue_last_ns.tolist())) if b >= 0}
        assert got_spans == spans and len(spans) == 6  # 2 processes x 3 threads


def test_threads_keep_their_order_of_first_sight_across_chunks_and_threads() -> None:
    th = R._Threads()
    assert th.map(np.array([30, 10, 30], dtype=np.int64)).tolist() == [1, 0, 1]  # new keys of a chunk in key order
    assert th.map(np.array([20, 30, 40, 10], dtype=np.int64)).tolist() == [2, 1, 3, 0]
    assert th.keys == [10, 30, 20, 40]
    assert th.map(np.empty(0, dtype=np.int64)).tolist() == []

    shared = R._Threads()
    keys = np.arange(200, dtype=np.int64) * 7919 % 1013  # distinct keys, not sorted
    out: list[np.ndarray] = []

    def work(part: np.ndarray) -> None:
        for _ in range(20):
            out.append((part, shared.map(part)))

    jobs = [threading.Thread(target=work, args=(keys[i::4],)) for i in range(4)]
    for j in jobs:
        j.start()
    for j in jobs:
        j.join()
    assert sorted(shared.keys) == sorted(keys.tolist())
    for part, idx in out:  # every lookup, whenever it ran, names the same thread as the final table
        assert [shared.keys[i] for i in idx.tolist()] == part.tolist()


def test_min_max_by() -> None:
    key = np.array([3, 0, 3, 5, 0], dtype=np.int64)
    lo = np.array([10, 4, 2, 7, 9], dtype=np.int64)
    hi = np.array([11, 6, 3, 8, 12], dtype=np.int64)
    present, rows, first, last = R._min_max_by(key, lo, hi)
    assert present.tolist() == [0, 3, 5] and rows.tolist() == [2, 2, 1]
    assert first.tolist() == [4, 2, 7] and last.tolist() == [12, 11, 8]


def _api_window(w: R._Window) -> bool:
    return bool(w.pending) and w.pending[0][0] in S.API_TABLES


def test_read_jobs_run_at_most_a_window_ahead_and_report_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunks are read at most AHEAD_PER_THREAD x READ_THREADS ahead of the main thread (so a pool of many
    threads holds a bounded number of finished chunks), the API chunks API_AHEAD_PER_THREAD x READ_THREADS (they
    are read while the plan is made), and progress counts every chunk of each table group."""
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 50)
    monkeypatch.setattr(R, "READ_THREADS", 3)
    monkeypatch.setattr(R, "AHEAD_PER_THREAD", 2)
    monkeypatch.setattr(R, "API_AHEAD_PER_THREAD", 5)
    most, most_api = [0], [0]
    submit = R._Window._fill

    def fill(self) -> None:
        submit(self)
        held = most_api if _api_window(self) else most
        held[0] = max(held[0], len(self.pending))

    monkeypatch.setattr(R._Window, "_fill", fill)
    seen: dict[str, list[tuple[int, int]]] = {}
    lock = threading.Lock()

    def progress(what: str, done: int, total: int) -> None:
        with lock:
            seen.setdefault(what, []).append((done, total))

    t = _trace(4)
    data = read_trace(build(tmp_path / "w.sqlite", t), on_progress=progress)
    assert len(data.api) == len(t.api) and len(data.activity) == len(t.kernels) + len(t.copies)
    assert most[0] == 6  # 2 x 3 threads, never more
    assert most_api[0] == 15  # 5 x 3 threads
    for what in ("GPU activity (per process)", "CUDA API calls"):  # two processes: the activity is read with per-row keys
        ticks = sorted(seen[what])
        total = ticks[0][1]
        assert total > 6 and ticks == [(i, total) for i in range(1, total + 1)]


def test_many_threads_read_whole_in_full_chunks_and_fewer_ahead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past 4 read threads a trace read whole keeps its chunk size (every job costs a few dozen calls that take the
    GIL back) and reads at most AHEAD_ROWS rows ahead per pool; the slab path keeps its chunks whole too (twice a
    whole read's by default: fewer slabs) and reads on at most 4 threads, whatever the read threads."""
    monkeypatch.delenv(R.CHUNK_ENV, raising=False)
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 100)
    monkeypatch.setattr(R, "READ_THREADS", 16)
    monkeypatch.setattr(R, "AHEAD_ROWS", 400)
    assert R.slab_chunk_rows() == 100
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 25_000)
    assert R.slab_chunk_rows() == 50_000  # nothing set: the slabs' own default
    monkeypatch.setenv(R.CHUNK_ENV, "25000")
    assert R.slab_chunk_rows() == 25_000  # asked for: both reads take it
    monkeypatch.delenv(R.CHUNK_ENV)
    assert R.slab_threads() == 4  # of the 16 read threads
    monkeypatch.setattr(R, "READ_THREADS", 2)
    assert R.slab_threads() == 2
    monkeypatch.setattr(R, "READ_THREADS", 16)
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 100)
    monkeypatch.setattr(R, "API_AHEAD_ROWS", 1_000)
    most, most_api, rows = [0], [0], []
    submit = R._Window._fill
    fetch = R._fetch

    def fill(self) -> None:
        submit(self)
        held = most_api if _api_window(self) else most
        held[0] = max(held[0], len(self.pending))

    def counted(path: Path, sql: str, lo: int, hi: int) -> list:
        rows.append(hi - lo)
        return fetch(path, sql, lo, hi)

    monkeypatch.setattr(R._Window, "_fill", fill)
    monkeypatch.setattr(R, "_fetch", counted)
    t = _trace(5)
    data = read_trace(build(tmp_path / "w.sqlite", t))
    assert len(data.api) == len(t.api) and len(data.activity) == len(t.kernels) + len(t.copies)
    assert most[0] == 4  # 400 rows of 100-row chunks, not 2 x 16
    assert most_api[0] == 10  # 1,000 API rows of 100-row chunks, not 6 x 16
    assert max(rows) == 100 and len(rows) > 30
