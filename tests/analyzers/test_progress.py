"""Long analyses report progress through the callback (the CLI renders it on stderr): the read's chunks
per table, then each analysis step of each group, ending at its total."""

from __future__ import annotations

from pathlib import Path

from clusterbench.analyzers import analysis as A

DATA = Path(__file__).resolve().parent.parent / "data"


def test_read_and_analysis_report_progress_to_the_end() -> None:
    seen: list[tuple[str, int, int]] = []
    req = A.request()
    cache: dict = {}
    trace = DATA / "h200" / "dev_7x7_s3_b250_async.sqlite"
    data = A.load_trace(trace, req=req, on_progress=lambda *x: seen.append(x), cache=cache)
    A.analyze(data, req=req, cache=cache, on_progress=lambda *x: seen.append(x))
    whats = {w for w, _, _ in seen}
    assert {"GPU activity", "CUDA API calls", "analysis"} <= whats
    steps = [(d, t) for w, d, t in seen if w == "analysis"]
    assert steps == [(k, A.ANALYSIS_STEPS) for k in range(1, A.ANALYSIS_STEPS + 1)]  # one group: each step once
    for what in whats - {"analysis"}:
        done = sorted(d for w, d, _ in seen if w == what)
        total = {t for w, _, t in seen if w == what}
        assert len(total) == 1 and done == list(range(1, total.pop() + 1))
