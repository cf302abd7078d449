"""The calls the GPU held, over time slabs (analyzers.stream_held): held.find run on a small context per
batch of calls gives, on the bundled traces that exercise it most, held.find's records over the
whole trace (the call, the row that held it, the release, the cause, the blocked time and the queue
depth), in 64-row chunks and 50-row slabs; a trace it does not take is refused with the reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clusterbench.analyzers import analysis as A
from clusterbench.analyzers import held as H
from clusterbench.analyzers import links as L
from clusterbench.analyzers import model as M
from clusterbench.analyzers import stream_held as SH
from clusterbench.io.nsys import reader as R
from clusterbench.io.nsys import slabs as B

DATA = Path(__file__).resolve().parent.parent / "data"
# the traces whose held calls and paths exercise the most (deep queues, graphs at node and graph level,
# pageable copies, several threads, default-stream orders, device-launched rows); every bundled trace's
# whole JSON is checked over slabs in test_streamed
NAMES = ("dev_5x5_s2_b500", "tracking_3x3_s1_b500_f2000_node", "sample_jacobiCudaGraphs_graph", "sample_simpleHyperQ",
         "sample_asyncAPI", "zoo_device_graph_graph", "zoo_device_graph_host_node", "zoo_graph_block_h2d_node", "zoo_pageable",
         "zoo_queue_fill", "zoo_two_threads", "zoo_turns", "zoo_threads_t2s2", "zoo_nvtx_domain")  # fmt: skip
TRACES = sorted(p for p in DATA.rglob("*.sqlite") if p.stem in NAMES)


def _whole(path: Path):  # noqa: ANN202
    req = A.request()
    cache: dict = {}
    data = A.load_trace(path, req=req, cache=cache)
    res = A.analyze(data, req=req, cache=cache)
    return data, res


def _records_whole(links: L.Links, held: H.Held) -> list[tuple]:
    c, r = held.call, held.row
    return sorted(zip(links.ccorr[c].tolist(), links.cstart[c].tolist(), links.engine[r].tolist(), links.start[r].tolist(),
                      links.end[r].tolist(), held.release.tolist(), held.wait.tolist(), held.cause.tolist(),
                      held.blocked_ns.tolist(), held.depth.tolist()))  # fmt: skip


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_held_over_slabs_equal_the_whole(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, res = _whole(path)
    for g in res.groups:
        gt = M.build(data, g.pid, g.device)
        links = L.build(gt)
        if not links.api_known:
            continue
        want = _records_whole(links, H.find(links, g.window.intervals, gt.syncs, gt.events))
        known = links.ccorr[links.ccorr > 0]
        corr_range = (int(known.min()), int(known.max())) if known.size else None
        region = None if data.api.plan.region is None else data.api.plan.region.get(g.pid)
        got: list = []
        with monkeypatch.context() as mp:
            mp.setattr(R, "ROWS_PER_CHUNK", 64)
            for lag in (2, 8, 32, 128, 512):
                got.clear()
                out: list = []
                it = B.iter_slabs(path, rows=50, reader_out=out)
                first = next(it)
                rd = out[-1]
                hs = SH.HeldStream(g.pid, g.device, g.window.intervals, region, data.event_records, g.pid,
                                   gt.stream_flags, corr_range, rd, got.append, lag=lag)  # fmt: skip
                try:
                    for slab in [first, *it]:
                        hs.add(slab, np.asarray(rd.threads_map.keys, dtype=np.int64) >> 24)
                    hs.finish()
                    break
                except SH.NotLocal as exc:
                    if not exc.lag_too_short:
                        assert links.by_device.any(), str(exc)  # only the traces with device-launched rows
                        got = None
                        break
            if got is None:
                continue
        rows = []
        for h in got:
            rows += list(zip(h.call.tolist(), h.cstart.tolist(), h.row_engine.tolist(), h.row_end.tolist(), h.release.tolist(),
                             h.wait.tolist(), h.cause.tolist(), h.blocked_ns.tolist(), h.depth.tolist()))  # fmt: skip
        # compare without the row start (the stream's records carry the row's end and engine)
        w = sorted((x[1], x[2], x[4], x[5], x[6], x[7], x[8], x[9]) for x in want)
        gsorted = sorted((x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8]) for x in rows)
        assert gsorted == w


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_host_with_blocked_time_over_slabs_equals_the_whole(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole Host record (blocked time by cause, held calls by name and cause) from the slabs: the
    host accumulator and the held calls summed as they come."""
    from clusterbench.analyzers import stream as ST

    data, res = _whole(path)
    for g in res.groups:
        gt = M.build(data, g.pid, g.device)
        links = L.build(gt)
        if not links.api_known or links.by_device.any():
            continue
        known = links.ccorr[links.ccorr > 0]
        region = None if data.api.plan.region is None else data.api.plan.region.get(g.pid)
        setup = g.gaps.setup_mask()
        setup_iv = (g.gaps.starts_ns[setup], g.gaps.starts_ns[setup] + g.gaps.lengths_ns[setup])
        with monkeypatch.context() as mp:
            mp.setattr(R, "ROWS_PER_CHUNK", 64)
            for lag in (2, 8, 32, 128, 512):
                out: list = []
                it = B.iter_slabs(path, rows=50, reader_out=out)
                first = next(it)
                rd = out[-1]
                host = ST.HostAccumulator(g.pid, g.device, g.window.intervals, setup_iv, g.frames.count)
                blocked = ST.BlockedAccumulator(host.steady)
                hs = SH.HeldStream(g.pid, g.device, g.window.intervals, region, data.event_records, g.pid, gt.stream_flags,
                                   (int(known.min()), int(known.max())), rd, blocked.add, lag=lag)  # fmt: skip
                try:
                    for slab in [first, *it]:
                        tp = np.asarray(rd.threads_map.keys, dtype=np.int64) >> 24
                        hs.add(slab, tp)
                        host.add(slab, tp, rd.names.categories, tuple(rd.names.names))
                    hs.finish()
                    break
                except SH.NotLocal as exc:
                    assert exc.lag_too_short, str(exc)
        threads = tuple(R.Thread(int(k) >> 24, int(k) & 0xFFFFFF, data.thread_names.get(int(k))) for k in rd.threads_map.keys)
        got = host.result(threads, tuple(rd.names.names), blocked)
        assert got == g.host


def _path_groups(path: Path):  # noqa: ANN202
    """The whole read of ``path``, then each of its groups with a critical path and host-launched rows alone:
    (data, group, its GroupTrace, its calls' known correlation ids, the process's API region)."""
    data, res = _whole(path)
    for g in res.groups:
        gt = M.build(data, g.pid, g.device)
        links = L.build(gt)
        if not links.api_known or links.by_device.any() or g.critical_path is None:
            continue
        known = links.ccorr[links.ccorr > 0]
        region = None if data.api.plan.region is None else data.api.plan.region.get(g.pid)
        yield data, g, gt, known, region


@pytest.mark.parametrize("mode", ["sizes", "tiny_batches", "together", "together_capped"])
@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_critical_path_over_slabs_equals_the_whole(path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The critical path from the slabs (every row's predecessor in the held calls' contexts, the walk read
    back from the nodes written per engine) is the whole analysis's: shares, ns, kernels, steps. With tiny
    batches, the walk's sums are flushed every few nodes (in the middle of walks), and its chunks hold a
    few nodes. Together: every walk steps in NumPy, a few intervals a block, down to the last walk still
    going; capped, the nodes held for that are so few that walks are left to the plain loop part way."""
    from clusterbench.analyzers import stream_path as SP

    if mode == "tiny_batches":
        monkeypatch.setattr(SP, "BATCH", 5)
        monkeypatch.setattr(SP, "CHUNK", 20)
    elif mode.startswith("together"):
        monkeypatch.setattr(SP, "FRONTIER_MIN", 1)
        monkeypatch.setattr(SP, "INTERVAL_BLOCK", 3 if mode == "together" else 7)
        if mode == "together_capped":
            monkeypatch.setattr(SP, "RANGE_CAP", 40)
            monkeypatch.setattr(SP, "BATCH", 5)
            monkeypatch.setattr(SP, "CHUNK", 20)
    for data, g, gt, known, region in _path_groups(path):
        setup = g.gaps.setup_mask()
        setup_iv = (g.gaps.starts_ns[setup], g.gaps.starts_ns[setup] + g.gaps.lengths_ns[setup])
        with monkeypatch.context() as mp:
            mp.setattr(R, "ROWS_PER_CHUNK", 64)
            for lag in (2, 8, 32, 128, 512):
                out: list = []
                it = B.iter_slabs(path, rows=50, reader_out=out)
                first = next(it)
                rd = out[-1]
                ps = SP.PathStream(g.window.intervals)
                hs = SH.HeldStream(g.pid, g.device, g.window.intervals, region, data.event_records, g.pid, gt.stream_flags,
                                   (int(known.min()), int(known.max())), rd, lambda h: None, lag=lag, path=ps)  # fmt: skip
                try:
                    for slab in [first, *it]:
                        hs.add(slab, np.asarray(rd.threads_map.keys, dtype=np.int64) >> 24)
                    hs.finish()
                    break
                except SH.NotLocal as exc:
                    assert exc.lag_too_short, str(exc)
        threads = tuple(R.Thread(int(k) >> 24, int(k) & 0xFFFFFF, data.thread_names.get(int(k))) for k in rd.threads_map.keys)
        want_threads = {(t.thread.pid, t.thread.tid) for t in g.host.threads}
        launching = {i for i, t in enumerate(threads) if (t.pid, t.tid) in want_threads}
        got = SP.measure(ps, launching, g.window.intervals, setup_iv, g.frames.count, threads, tuple(rd.kernel_names))
        assert got == g.critical_path


def test_the_traces_named_are_bundled() -> None:
    assert len(TRACES) == len(NAMES)


@pytest.mark.parametrize("name", ["dev_5x5_s2_b500", "zoo_queue_fill", "sample_simpleHyperQ", "zoo_two_threads"])
def test_inside_sums_is_the_walks_inside(name: str) -> None:
    """stream_path.inside_sums (the slab walk's time inside the set-up gaps, per resource, in integers) gives
    critical_path.Walk.inside on the whole read's walk: against the set-up gaps, every gap, and zones that
    cut the segments anywhere."""
    from clusterbench.analyzers import stream_path as SP
    from clusterbench.analyzers.critical_path import HOST0

    path = next(p for p in TRACES if p.stem == name)
    data, res = _whole(path)
    checked = 0
    for g in res.groups:
        w = A.critical_path_walk(data, g)
        if w is None:
            continue
        size = HOST0 + len(data.api.threads)
        setup = g.gaps.setup_mask()
        ss, se = w.segments()[:2]
        lo, hi = int(ss.min()), int(se.max())
        step = max((hi - lo) // 97, 1)
        zones = [(g.gaps.starts_ns[setup], g.gaps.starts_ns[setup] + g.gaps.lengths_ns[setup]),
                 (g.gaps.starts_ns, g.gaps.starts_ns + g.gaps.lengths_ns),
                 (np.arange(lo, hi, step, dtype=np.int64), np.arange(lo, hi, step, dtype=np.int64) + step // 3 + 1)]  # fmt: skip
        for zone in zones:
            want = w.inside(zone, size)
            got = np.zeros(size, dtype=np.int64)
            for s, e, r, _ in w.parts:
                SP.inside_sums(s.astype(np.int64), e.astype(np.int64), r.astype(np.int64), zone, got)
            assert got.tolist() == want.tolist()
            checked += int(want.any())
    assert checked


def _run(path: Path, g, gt, data, region, corr_range, lag: int, full: bool, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN001, ANN202
    """The held calls (every field) and the critical path of one group over 50-row slabs, with the look-ahead
    _lookahead leaves (``full``: every row and call of the look-ahead slabs, as before it), and how many
    rows and calls the batches' contexts held; None where the lag is too short."""
    from clusterbench.analyzers import stream_path as SP

    got: list = []
    sizes = [0, 0]
    with monkeypatch.context() as mp:
        mp.setattr(R, "ROWS_PER_CHUNK", 64)
        if full:
            mp.setattr(SH.HeldStream, "_lookahead", lambda self, c_lo, c_hi, t1: (None, None))
        context = SH.HeldStream._context

        def counted(self, keep=None, keep_c=None):  # noqa: ANN001, ANN202
            g_, gids, seq = context(self, keep, keep_c)
            sizes[0] += sum(x.size for x in gids.values())
            sizes[1] += seq.size
            return g_, gids, seq

        mp.setattr(SH.HeldStream, "_context", counted)
        out: list = []
        it = B.iter_slabs(path, rows=50, reader_out=out)
        first = next(it)
        rd = out[-1]
        ps = SP.PathStream(g.window.intervals)
        hs = SH.HeldStream(g.pid, g.device, g.window.intervals, region, data.event_records, g.pid, gt.stream_flags, corr_range,
                           rd, got.append, lag=lag, path=ps)  # fmt: skip
        try:
            for slab in [first, *it]:
                hs.add(slab, np.asarray(rd.threads_map.keys, dtype=np.int64) >> 24)
            hs.finish()
        except SH.NotLocal as exc:
            assert exc.lag_too_short, str(exc)
            return None
    fields = [f for f in SH.HeldCalls.__dataclass_fields__]
    held = sorted(tuple(x) for h in got for x in zip(*(getattr(h, f).tolist() for f in fields)))
    threads = tuple(R.Thread(int(k) >> 24, int(k) & 0xFFFFFF, data.thread_names.get(int(k))) for k in rd.threads_map.keys)
    want_threads = {(t.thread.pid, t.thread.tid) for t in g.host.threads}
    launching = {i for i, t in enumerate(threads) if (t.pid, t.tid) in want_threads}
    setup = g.gaps.setup_mask()
    setup_iv = (g.gaps.starts_ns[setup], g.gaps.starts_ns[setup] + g.gaps.lengths_ns[setup])
    path_ = SP.measure(ps, launching, g.window.intervals, setup_iv, g.frames.count, threads, tuple(rd.kernel_names))
    return held, path_, sizes


_LEFT_OUT: list[int] = []


@pytest.mark.parametrize("lag", [1, 2])
@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_lookahead_left_out_changes_nothing(path: Path, lag: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The contexts without the look-ahead rows and calls _lookahead leaves out give every held call's record
    (call, row, release, cause, blocked time, depth, ...) and the critical path that the whole look-ahead
    gives, and the whole analysis's critical path; on these traces it does leave rows out."""
    for data, g, gt, known, region in _path_groups(path):
        corr_range = (int(known.min()), int(known.max()))
        full = _run(path, g, gt, data, region, corr_range, lag, True, monkeypatch)
        if full is None:
            continue
        got = _run(path, g, gt, data, region, corr_range, lag, False, monkeypatch)
        assert got is not None
        assert got[0] == full[0]
        assert got[1] == full[1] == g.critical_path
        assert got[2][0] <= full[2][0] and got[2][1] <= full[2][1]
        _LEFT_OUT.append(full[2][0] - got[2][0])


def test_lookahead_leaves_rows_out() -> None:
    """(after the test above) the look-ahead left rows out of the contexts of some trace."""
    if not _LEFT_OUT:
        pytest.skip("run with test_lookahead_left_out_changes_nothing")
    assert max(_LEFT_OUT) > 0


def _walk_case(seed: int, n_intervals: int, nodes_per_engine: int, no_pred: float):  # noqa: ANN202
    """Nodes on 3 engines, each with a predecessor that starts no later (or none), window intervals over
    them, and per interval a first-node candidate row and call: what PathStream.walk reads."""
    rng = np.random.default_rng(seed)
    n_eng = 3
    starts = {e: np.sort(rng.integers(0, 100_000, nodes_per_engine)).astype(np.int64) for e in range(n_eng)}
    every = sorted((int(s), e, g) for e in range(n_eng) for g, s in enumerate(starts[e].tolist()))
    cols = {e: {k: np.zeros(nodes_per_engine, np.int64) for k in ("start", "kname", "peng", "pgid", "rel", "vstart", "vthread")}
            for e in range(n_eng)}  # fmt: skip
    for k, (s, e, g) in enumerate(every):
        c = cols[e]
        c["start"][g] = s
        c["kname"][g] = int(rng.integers(-1, 4))
        if k == 0 or rng.random() < no_pred:
            c["peng"][g], c["pgid"][g], c["rel"][g] = -1, -1, np.iinfo(np.int64).min // 4
        else:
            ps, pe, pg = every[int(rng.integers(max(0, k - 40), k))]  # an earlier node
            c["peng"][g], c["pgid"][g] = pe, pg
            c["rel"][g] = int(rng.integers(ps, s + 1))
        has_via = rng.random() < 0.5
        c["vthread"][g] = int(rng.integers(0, 2)) if has_via else -1
        c["vstart"][g] = int(rng.integers(max(0, s - 500), s + 1)) if has_via else 0
    edges = np.sort(rng.choice(np.arange(1, 100_000), 2 * n_intervals, replace=False)).astype(np.int64)
    ws, we = edges[0::2], edges[1::2]
    sr, sc = [], []
    for i in range(n_intervals):
        if rng.random() < 0.9:
            e = int(rng.integers(0, n_eng))
            g = int(np.searchsorted(starts[e], we[i], side="right")) - 1
            if g >= 0:
                sr.append([i, e, g, int(we[i]) - int(rng.integers(0, 300))])
        if rng.random() < 0.4:
            e = int(rng.integers(0, n_eng))
            g = int(np.searchsorted(starts[e], we[i], side="right")) - 1
            end = int(we[i]) - int(rng.integers(0, 300))
            sc.append([i, int(rng.integers(0, 2)), end, i, e if g >= 0 else -1, g, end - int(rng.integers(0, 2000))])
    setup = (np.array([20_000, 60_000], np.int64), np.array([30_000, 61_000], np.int64))
    return cols, (ws, we), np.array(sr, np.int64).reshape(-1, 4), np.array(sc, np.int64).reshape(-1, 7), setup


@pytest.mark.parametrize("seed", range(6))
def test_walks_stepped_together_are_the_plain_loops(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """PathStream.walk with the walks stepping together in NumPy (every block, down to one walk; with room
    for few nodes, so that walks are left to the plain loop part way) sums what the plain loop alone sums:
    per resource, per kernel name, inside the set-up gaps, and the nodes walked."""
    from clusterbench.analyzers import stream_path as SP

    cols, window, sr, sc, setup = _walk_case(seed, n_intervals=60 + 20 * seed, nodes_per_engine=300, no_pred=0.05 * (seed % 3))

    def run() -> tuple:
        ps = SP.PathStream(window)
        for e, c in cols.items():
            ps._write(e, c)
        ps.start_rows, ps.start_calls = [sr.copy()], [sc.copy()]
        got = ps.walk({0, 1}, setup, 2, 4)
        return got.per.tolist(), got.kern.tolist(), got.inset.tolist(), got.steps, got.complete

    with monkeypatch.context() as mp:
        mp.setattr(SP, "FRONTIER_MIN", 1 << 40)
        plain = run()
    assert plain[3] > 0
    for block, cap in ((1 << 10, 1 << 18), (7, 1 << 18), (16, 50)):
        with monkeypatch.context() as mp:
            mp.setattr(SP, "FRONTIER_MIN", 1)
            mp.setattr(SP, "INTERVAL_BLOCK", block)
            mp.setattr(SP, "RANGE_CAP", cap)
            assert run() == plain, (block, cap)
