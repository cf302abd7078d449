"""The engines' figures over time slabs (analyzers.stream) are the whole analyzers' (busy.measure,
kernels.by_name, kernels.copy_classes) on the bundled traces that exercise them most, over the window analyze uses, with
64-row read chunks and slabs of 50 rows (records running across many slab edges); and the value counts
give the order statistics of a sort."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterbench.analyzers import analysis as A
from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers import stream as ST
from clusterbench.io.nsys import reader as R
from clusterbench.io.nsys import slabs as B

DATA = Path(__file__).resolve().parent.parent / "data"
# the accumulators one by one on the traces that exercise them most (graphs at node and graph level, no kernel
# table, pageable copies, NVTX domains, set-up gaps, a host-bound loop, several threads, a probe's own trace);
# test_streamed checks the whole analysis over slabs on every bundled trace
NAMES = ("dev_5x5_s2_b500", "dev_7x7_s3_b250_async", "tracking_3x3_s1_b500_f2000_node", "sample_simpleHyperQ",
         "sample_simpleMultiCopy", "sample_simpleCudaGraphs_graph", "sample_jacobiCudaGraphs_graph", "zoo_host_bound", "zoo_pageable",
         "zoo_nvtx_domain", "zoo_no_nvtx", "zoo_queue_fill", "zoo_graph_block_h2d_node", "zoo_multi_kernel", "zoo_two_threads",
         "probe_9x9_s1_uncontended_2026-11-29")  # fmt: skip
TRACES = sorted(p for p in DATA.rglob("*.sqlite") if p.stem in NAMES)


def _read(path: Path, **options):  # noqa: ANN003, ANN202
    """The trace read once and analysed whole (the reference)."""
    req = A.request(**options)
    cache: dict = {}
    data = A.load_trace(path, req=req, cache=cache)
    return data, A.analyze(data, req=req, cache=cache)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_engines_over_slabs_equal_the_whole(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, whole = _read(path)
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 64)
    for g in whole.groups:
        busy, kernels, copies = ST.engines_over(B.iter_slabs(path, rows=50), g.pid, g.device, g.window.intervals,
                                                g.frames.count, data.srckind_read)  # fmt: skip
        roof, busy = A.busy_mod.roofline(busy, g.host.threads, g.frames.count)
        want = g.busy
        assert busy.engines == want.engines
        for f in ("any_busy_ns", "idle_ns", "overlap_ns", "serialization", "n_streams", "engine_streams", "pageable_count",
                  "pageable_bytes", "pageable_known"):  # fmt: skip
            assert getattr(busy, f) == getattr(want, f), f
        assert roof == g.roofline
        assert kernels == g.kernels
        assert copies == g.copies


def test_value_counts_give_a_sort_s_order_statistics() -> None:
    rng = np.random.default_rng(3)
    vc = ST.ValueCounts()
    parts = [rng.integers(0, 50, rng.integers(0, 40)) for _ in range(30)]
    for p in parts:
        vc.add(p)
    allv = np.sort(np.concatenate(parts))
    assert vc.n == allv.size
    assert [vc.at(k) for k in range(allv.size)] == allv.tolist()
    for n in (1, 2, 7, 8):
        one = ST.ValueCounts()
        x = rng.integers(-5, 5, n)
        one.add(x[: n // 2])
        one.add(x[n // 2 :])
        assert one.median() == float(np.median(x))


def _same_window(a, b) -> None:  # noqa: ANN001
    for f in ("mode", "source", "ranges", "span_start_ns", "span_end_ns", "cut_before_ns", "cut_after_ns", "cut_note"):
        assert getattr(a, f) == getattr(b, f), f
    assert np.array_equal(a.starts_ns, b.starts_ns) and np.array_equal(a.ends_ns, b.ends_ns)


def _same_gaps(a, b) -> None:  # noqa: ANN001
    for f in ("threshold_ns", "api", "window_start_ns", "listed"):
        assert getattr(a, f) == getattr(b, f), f
    for f in ("starts_ns", "lengths_ns", "cause", "parts_ns"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert (a.between is None) == (b.between is None) and (a.between is None or np.array_equal(a.between, b.between))


WINDOWS = (None, "span")


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_window_and_gaps_over_slabs_equal_the_whole(path: Path, window: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    req = A.request(window=window)
    data, whole = _read(path, window=window)
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 64)
    for g in whole.groups:
        def consume(slabs):  # noqa: ANN001, ANN202
            out: list = []
            it = B.iter_slabs(path, rows=50, reader_out=out, disordered=slabs)
            first = next(it, None)
            rd = out[-1]
            chain = ([first] if first is not None else []) + list(it)
            return ST.window_and_gaps(chain, rd, g.pid, g.device, req.window, data.ranges, data.overhead, data.graph_trace,
                                      data.srckind_read, req.gap_ns, data.thread_names)  # fmt: skip

        w, gp, _ = consume(frozenset())
        _same_window(w, g.window)
        _same_gaps(gp, g.gaps)


FRAMES = {
    "zoo_device_graph_graph": "graph", "zoo_device_graph_host_graph": "graph", "zoo_device_graph_host_node": "graph",
    "zoo_device_graph_node": "graph", "zoo_graph_block_h2d_graph": "graph", "zoo_queue_fill": "kernel:zoo_spin",
    "zoo_no_nvtx": "kernel:zoo_calib_jit",
}  # fmt: skip


def _specs(path: Path) -> list[str | None]:
    """The frames the tests use for the trace, none, and a plain number (the whole analysis's count, so
    that pacing picks its events among the kernels)."""
    name = path.stem
    own = FRAMES.get(name, "kernel:zoo_calib" if name.startswith("zoo_") else None)
    out = [None] + ([own] if own else [])
    n = _read(path, frames_spec=own)[1].primary.frames.count if own else None
    return out + ([str(n)] if n else []) + ["h2d-bytes:65536"]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_frames_and_pacing_over_slabs_equal_the_whole(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clusterbench.errors import InputError

    for frames_spec in _specs(path):
        req = A.request(frames_spec=frames_spec)
        try:
            data, whole = _read(path, frames_spec=frames_spec)
        except InputError as exc:
            whole = exc
            data = A.load_trace(path, req=req)
        with monkeypatch.context() as mp:
            mp.setattr(R, "ROWS_PER_CHUNK", 64)
            groups = whole.groups if not isinstance(whole, InputError) else [None]
            for g in groups:
                pid, dev = (g.pid, g.device) if g is not None else A.model_mod.groups_of(data)[0]
                w, gp, used = _pass_a(path, req, data, pid, dev)
                out: list = []
                slabs = B.iter_slabs(path, rows=50, reader_out=out)
                first = next(slabs)
                rd = out[-1]
                busy = ST.BusyAccumulator(pid, dev, w.intervals, None, data.srckind_read)
                ev = ST.EventAccumulator(pid, dev, w, req.frames.pattern if req.frames is not None and req.frames.kind == "kernel" else None,
                                         A.busy_mod.S.API_CODE["graph_launch"])  # fmt: skip
                for slab in [first, *slabs]:
                    busy.add(slab)
                    ev.add(slab, np.asarray(rd.threads_map.keys, dtype=np.int64) >> 24, rd.names.categories)
                h2d = busy.nbytes("h2d") if "h2d" in busy.eng and busy.eng["h2d"].rows else None
                warnings: list[str] = []
                try:
                    fr = ST.frames_over(ev, req.frames, w, used, data.ranges, pid, h2d, warnings, data.graph_runs)
                except InputError as exc:
                    assert isinstance(whole, InputError) and str(exc) == str(whole) and exc.hint == whole.hint
                    continue
                assert g is not None, whole
                for f in ("count", "source", "definition", "events_source", "frames_per_event", "hint"):
                    assert getattr(fr, f) == getattr(g.frames, f), (frames_spec, f)
                pacing, note = ST.pacing_over(ev, fr, w, gp)
                assert (pacing, note) == (g.pacing, g.pacing_note), frames_spec


def _pass_a(path: Path, req, data, pid: int, dev: int):  # noqa: ANN001, ANN202
    out: list = []
    it = B.iter_slabs(path, rows=50, reader_out=out)
    first = next(it)
    return ST.window_and_gaps([first, *it], out[-1], pid, dev, req.window, data.ranges, data.overhead, data.graph_trace,
                              data.srckind_read, req.gap_ns, data.thread_names)  # fmt: skip


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_host_over_slabs_equals_the_whole_without_blocked_time(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """host.measure without the held calls (its blocked time comes with them): the threads' calls by kind,
    waits, busy time, the process's blocking calls, synchronous copies and the drained idle time."""
    from clusterbench.analyzers import host as H
    from clusterbench.analyzers import model as M

    spec = FRAMES.get(path.stem, "kernel:zoo_calib" if path.stem.startswith("zoo_") else None)
    data, whole = _read(path, frames_spec=spec)
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 64)
    for g in whole.groups:
        gt = M.build(data, g.pid, g.device)
        setup = g.gaps.setup_mask()
        setup_iv = (g.gaps.starts_ns[setup], g.gaps.starts_ns[setup] + g.gaps.lengths_ns[setup])
        want = H.measure(gt, g.window.intervals, setup_iv, g.frames.count)
        out: list = []
        it = B.iter_slabs(path, rows=50, reader_out=out)
        first = next(it)
        rd = out[-1]
        acc = ST.HostAccumulator(g.pid, g.device, g.window.intervals, setup_iv, g.frames.count)
        for slab in [first, *it]:
            acc.add(slab, np.asarray(rd.threads_map.keys, dtype=np.int64) >> 24, rd.names.categories, tuple(rd.names.names))
        threads = tuple(data.api.threads[0].__class__(int(k) >> 24, int(k) & 0xFFFFFF, data.thread_names.get(int(k)))
                        for k in rd.threads_map.keys)  # fmt: skip
        got = acc.result(threads, tuple(rd.names.names))
        assert got == want


def _first_loads_by_definition(cand, c_cat, issuing, loads, ha, hb):  # noqa: ANN001, ANN202
    """gaps.first_launch_loads' reading, call by call: per hole the earliest-starting load that overlaps it
    (ties: the first read), and the issuing calls of its thread in [its end, the hole's end), in read order."""
    first: dict[int, int] = {}
    for f in loads.tolist():
        for h in range(ha.size):
            if ha[h] < cand["end"][f] and hb[h] > cand["start"][f]:
                if h not in first or cand["start"][f] < cand["start"][first[h]]:
                    first[h] = f
    rows = []
    for h in sorted(first):
        f = first[h]
        th, fe = int(cand["thread"][f]), int(cand["end"][f])
        after = [i for i in np.argsort(cand["seq"], kind="stable").tolist()
                 if issuing[i] and cand["thread"][i] == th and fe <= cand["start"][i] < hb[h]]  # fmt: skip
        rows.append((h, int(cand["start"][f]), fe, th, len(after), int(c_cat[after[0]]) if after else -1))
    return np.array(rows, dtype=np.int64).reshape(-1, 6)


@pytest.mark.parametrize("in_order", [True, False])
def test_first_loads_match_their_definition(in_order: bool) -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        start = np.sort(rng.integers(0, 200, n)) if in_order else rng.integers(0, 200, n)
        cand = {"start": start.astype(np.int64), "end": (start + rng.integers(0, 30, n)).astype(np.int64),
                "thread": rng.integers(0, 3, n).astype(np.int64), "seq": np.arange(n, dtype=np.int64) * 2 + 5}  # fmt: skip
        c_cat = rng.integers(0, 4, n).astype(np.int64)
        issuing = rng.random(n) < 0.6
        loads = np.flatnonzero(c_cat == 3)
        edges = np.unique(rng.integers(0, 240, 2 * int(rng.integers(0, 8))))
        edges = edges[: edges.size - edges.size % 2]
        ha, hb = edges[0::2].astype(np.int64), edges[1::2].astype(np.int64)
        got = ST._first_loads(cand, c_cat, issuing, loads, ha, hb)
        assert np.array_equal(got, _first_loads_by_definition(cand, c_cat, issuing, loads, ha, hb))


def test_the_holes_sums_come_back_from_their_file_in_blocks() -> None:
    # three appends of 2, 0 and 3 rows, read back in blocks of 2: [r0, r1], [r2, r3], [r4], in the order kept
    import numpy as np

    from clusterbench.analyzers.stream import _SUMS_DTYPE, _SumsFile

    f = _SumsFile()
    rows = np.zeros(5, dtype=_SUMS_DTYPE)
    rows["key"] = [8, 16, 24, 32, 40]
    rows["ns"] = [1, 2, 3, 4, 5]
    rows["blen"] = [1, 2, 3, 4, 5 * 10**12]
    rows["blabel"] = [-1, 0, 7, 2**31 - 1, 3]
    rows["bseq"] = [10, 11, 12, 13, 2**40]
    f.append(rows[:2])
    f.append(rows[2:2])
    f.append(rows[2:])
    blocks = list(f.blocks(2))
    assert [b.size for b in blocks] == [2, 2, 1]
    back = np.concatenate(blocks)
    for name in _SUMS_DTYPE.names:
        assert back[name].tolist() == rows[name].tolist()
    f.close()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 400), st.integers(-5, 120)), max_size=60),
       st.lists(st.integers(0, 500), max_size=30, unique=True))  # fmt: skip
def test_hole_pieces_are_the_clipped_pieces_with_their_hole(calls: list, edges: list) -> None:
    """stream._hole_pieces (the calls' pieces in the holes, as the gaps' causes sum them) gives the pieces
    intervals.clip cuts, each with the hole a binary search of its start names, as a set: zero-length and
    reversed calls, calls over several holes, calls touching a hole's edge."""
    from clusterbench.analyzers.stream import _hole_pieces

    s = np.array([a for a, _ in calls], dtype=np.int64)
    e = np.array([a + d for a, d in calls], dtype=np.int64)
    edges = sorted(edges)
    edges = edges[: len(edges) // 2 * 2]
    ha, hb = np.array(edges[0::2], dtype=np.int64), np.array(edges[1::2], dtype=np.int64)
    ps, pe, rows, j = _hole_pieces(s, e, ha, hb)
    cs, ce, owner = iv.clip(s, e, (ha, hb))
    owner = np.arange(s.size) if owner is None else owner
    hole = np.searchsorted(ha, cs, side="right") - 1 if cs.size else cs
    want = sorted(zip(cs.tolist(), ce.tolist(), owner.tolist(), hole.tolist()))
    assert sorted(zip(ps.tolist(), pe.tolist(), rows.tolist(), j.tolist())) == want
