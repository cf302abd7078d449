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
