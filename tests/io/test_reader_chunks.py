"""The API calls read in many small chunks on several threads equal a plain Python pass over the rows:
the calls kept one by one, the sums per (thread, category), each thread's issuing span, and the
thread index (a thread's order of first sight) whatever the chunking (reader._Threads, _min_max_by)."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import numpy as np
import pytest

from clusterbench.io.nsys import ApiPlan, read_trace
from clusterbench.io.nsys import reader as R
from clusterbench.io.nsys import schema as S

from fake_nsys import Api, Kernel, Trace, build

NAMES = ("cudaLaunchKernel_v7000", "cudaMemcpyAsync_v3020", "cudaStreamSynchronize_v3020", "cudaEventRecord_v3020",
         "cudaMalloc_v3020", "cudaMemcpy_v3020", "cuLaunchKernel", "cudaEventQuery_v3020")  # fmt: skip


def _iv(*pairs: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    return np.array([a for a, _ in pairs], dtype=np.int64), np.array([b for _, b in pairs], dtype=np.int64)


def _trace(seed: int) -> Trace:
    rng = random.Random(seed)
    calls = []
    for _ in range(3000):
        start = rng.randrange(0, 100_000)
        calls.append(Api(start, start + rng.choice((0, 1, 5, 40, 300)), rng.choice(NAMES), pid=rng.choice((100, 200)),
                         tid=rng.choice((None, 11, 12))))  # fmt: skip
    kernels = [Kernel(0, 10, device=0, pid=100), Kernel(0, 10, device=1, pid=200), Kernel(5, 20, device=1, pid=100)]
    return Trace(kernels=kernels, api=calls)


def _touches(s: int, e: int, pairs: list[tuple[int, int]]) -> bool:
    return any(s <= b and e >= a for a, b in pairs)


def _inside(s: int, e: int, pairs: list[tuple[int, int]]) -> bool:
    return any(a <= s and e <= b for a, b in pairs)


def _expected(t: Trace, region: dict, keep: dict, agg: dict):
    """The plan applied row by row (ApiPlan's docstring), in plain Python."""
    kept, totals, spans = [], {}, {}
    for c in t.api:
        tid = c.pid if c.tid is None else c.tid
        base = R.base_api_name(c.name)
        cat = S.api_category(base)
        if cat in S.ISSUE_CATEGORIES or base in S.SYNC_COPY_CALLS:
            # the span a thread issues in: from the start of its first issuing call to the start of its last
            a, b = spans.get((c.pid, tid), (c.start, c.start))
            spans[(c.pid, tid)] = (min(a, c.start), max(b, c.start))
        if c.pid not in region or not _touches(c.start, c.end, region[c.pid]):
            continue
        one_by_one = cat in R.KEEP_ALL.keep_categories or _touches(c.start, c.end, keep.get(c.pid, []))
        if not one_by_one and _inside(c.start, c.end, agg.get(c.pid, [])):
            n, k, a, b = totals.get((c.pid, tid, cat), (0, 0, c.start, c.end))
            totals[(c.pid, tid, cat)] = (n + c.end - c.start, k + 1, min(a, c.start), max(b, c.end))
        else:
            kept.append((c.start, c.end, c.pid, tid, base))
    kept.sort(key=lambda x: x[0])  # the reader sorts by start, stably (ties keep the rows' order)
    return kept, totals, spans


@pytest.mark.parametrize("seed", [1, 2])
def test_small_chunks_on_several_threads_equal_a_plain_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 97)  # about 31 chunks
    monkeypatch.setattr(R, "READ_THREADS", 4)
    t = _trace(seed)
    region = {100: [(0, 60_000)], 200: [(20_000, 100_000)]}
    keep = {100: [(1_000, 1_500), (30_000, 30_100)], 200: [(50_000, 52_000)]}
    agg = {100: [(5_000, 25_000), (26_000, 55_000)], 200: [(21_000, 90_000)]}
    plan = ApiPlan(region={p: _iv(*v) for p, v in region.items()}, keep={p: _iv(*v) for p, v in keep.items()},
                   aggregate={p: _iv(*v) for p, v in agg.items()})  # fmt: skip
    api = read_trace(build(tmp_path / "t.sqlite", t), api_plan=plan).api
    kept, totals, spans = _expected(t, region, keep, agg)

    who = [(th.pid, th.tid) for th in api.threads]
    got = [(s, e, *who[k], api.names[n]) for s, e, k, n in zip(api.start_ns.tolist(), api.end_ns.tolist(),
                                                               api.thread.tolist(), api.name.tolist())]  # fmt: skip
    assert sorted(got) == sorted(kept) and [g[0] for g in got] == [k[0] for k in kept]
    tot = api.totals
    got_totals = {(*who[k], S.API_CATEGORIES[c]): (n, m, a, b) for k, c, n, m, a, b in zip(
        tot.thread.tolist(), tot.category.tolist(), tot.ns.tolist(), tot.calls.tolist(), tot.first_ns.tolist(),
        tot.last_ns.tolist())}  # fmt: skip
    assert got_totals == totals and totals  # several threads and categories summed
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
