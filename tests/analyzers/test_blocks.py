"""The analyzers work over their rows and calls block by block (intervals.BLOCK at a time) so that their
temporaries stay small: with blocks of a few rows, every figure on the real traces is the one computed in
one block, and the block-wise searches agree with plain NumPy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clusterbench.analyzers import analysis as A
from clusterbench.analyzers import critical_path as P
from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers import links as L
from clusterbench.analyzers import model as M
from clusterbench.render.analyze import render_json

DATA = Path(__file__).resolve().parent.parent / "data"
# traces with several streams, threads, graphs, waits and held calls, each over a few thousand rows
NAMES = ("dev_7x7_s3_b250_async", "zoo_two_threads", "zoo_pageable", "zoo_queue_fill", "sample_simpleHyperQ",
         "zoo_device_graph_host_graph", "sample_jacobiCudaGraphs_graph")  # fmt: skip


def _path(name: str) -> Path:
    return next(DATA.rglob(f"{name}.sqlite"))


@pytest.mark.parametrize("name", NAMES)
def test_small_blocks_change_no_figure(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = render_json(A.analyze_trace(_path(name)))
    monkeypatch.setattr(iv, "BLOCK", 37)
    assert render_json(A.analyze_trace(_path(name))) == whole


def test_block_searches_agree_with_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    data = A.load_trace(_path("zoo_two_threads"))
    g = M.build(data, *M.groups_of(data)[0])
    links = L.build(g)
    ends = links.end[links.by_end]
    rng = np.random.default_rng(7)
    t = np.concatenate([rng.choice(links.end, 500), rng.integers(int(ends[0]) - 10, int(ends[-1]) + 10, 500)])
    launching = np.ones(len(data.api.threads), dtype=bool)
    cend = links.cend
    for block in (iv.BLOCK, 1, 5, 64):
        monkeypatch.setattr(iv, "BLOCK", block)
        assert np.array_equal(links.end_rank(t), np.searchsorted(ends, t, side="right"))
        # the latest-ending call by each time (ties: the later call), against a sort of every call
        got = P._last_call_ending_by(links, launching, t)
        o = np.argsort(cend, kind="stable")
        k = np.searchsorted(cend[o], t, side="right") - 1
        assert np.array_equal(got, np.where(k >= 0, o[np.maximum(k, 0)], -1))
        # the latest-ending row so far (ties: the later), against one running maximum
        rows = links.by_corr
        mask = links.engine[rows] == 0
        e = np.where(mask, links.end[rows], np.iinfo(np.int64).min)
        run = np.maximum.accumulate(e)
        want = np.maximum.accumulate(np.where((e == run) & mask, np.arange(rows.size), -1))
        assert np.array_equal(P.latest_so_far(links.end, rows, mask), want)


def _own_by_hand(links: L.Links, call: int, kind: str) -> int:
    """Links.own's definition, row by row: among the rows the call launched, the latest end (ties: the last
    row), counting for "done" only rows that ended by the call's end, for "started" only those that started
    before it."""
    best = -1
    for r in np.flatnonzero(links.launch == call).tolist():
        if kind == "done" and links.end[r] > links.cend[call]:
            continue
        if kind == "started" and links.start[r] >= links.cend[call]:
            continue
        if best < 0 or (links.end[r], r) >= (links.end[best], best):
            best = r
    return best


@pytest.mark.parametrize("name", ["zoo_graph_block_h2d_node", "zoo_device_graph_host_node", "zoo_two_threads"])
def test_a_calls_own_rows_follow_their_definition(name: str) -> None:
    data = A.load_trace(_path(name))
    g = M.build(data, *M.groups_of(data)[0])
    links = L.build(g)
    calls = np.arange(links.cend.size)
    assert links.n_rows and (links.own_row == L.MANY).any() == ("node" in name)  # node-level graph launches
    for kind in ("last", "done", "started"):
        got = links.own(calls, kind)
        assert got.tolist() == [_own_by_hand(links, c, kind) for c in calls.tolist()], kind


def test_own_rows_of_calls_whose_rows_interleave() -> None:
    # calls 0, 1 and 2; rows 10..13 in the order the correlation ids sort them: call 1's two rows lie apart
    # (another call shares their id), call 0 has one row, call 2 none
    got = L._own_rows(np.array([1, 0, 1]), np.array([10, 11, 12]), 3, np.int32)
    assert got.tolist() == [11, L.MANY, L.NONE]
