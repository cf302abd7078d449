"""The engines' figures over time slabs (analyzers.stream) are the whole analyzers' (busy.measure,
kernels.by_name, kernels.copy_classes) on every bundled trace, over the window analyze uses, with
64-row read chunks and slabs of 50 rows (records running across many slab edges); and the value counts
give the order statistics of a sort."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clusterbench.analyzers import analysis as A
from clusterbench.analyzers import stream as ST
from clusterbench.io.nsys import reader as R
from clusterbench.io.nsys import slabs as B

DATA = Path(__file__).resolve().parent.parent / "data"
TRACES = sorted(DATA.rglob("*.sqlite"))


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_engines_over_slabs_equal_the_whole(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = A.analyze_trace(path)
    data = A.load_trace(path)
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
    whole = A.analyze_trace(path, window=window)
    data = A.load_trace(path, req=req)
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
