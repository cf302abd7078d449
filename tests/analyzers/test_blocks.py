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
