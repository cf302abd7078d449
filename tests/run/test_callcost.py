"""nsys's cost per CUDA call and the host bar without the profiler (pure parts, and the cache), with values
worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from clusterbench.run import callcost


def record(launch, copy, event, calls=3000) -> dict:
    return {"schema": "clusterbench.call-costs", "version": 1, "calls": calls, "chunks": len(launch),
            "us_per_call": {"launch": launch, "copy": copy, "event": event}}


def test_the_cost_per_call_is_the_traced_median_less_the_untraced_one() -> None:
    untraced = record([5.0, 5.2, 5.1], [3.0, 3.1, 2.9], [1.0, 1.0, 1.2])
    traced = record([7.0, 7.4, 7.1], [4.0, 4.2, 4.0], [1.5, 1.6, 1.5])
    cost = callcost.cost_from_chunks(untraced, traced, {"host": "h"})
    # medians: launch 7.1 - 5.1 = 2.0; copy 4.0 - 3.0 = 1.0; event 1.5 - 1.0 = 0.5
    assert cost.cost_us == pytest.approx({"launch": 2.0, "copy": 1.0, "event": 0.5})
    # spreads: half ranges added: launch 0.2 + 0.1, copy 0.1 + 0.1, event 0.05 + 0.1
    assert cost.spread_us == pytest.approx({"launch": 0.3, "copy": 0.2, "event": 0.15})
    assert callcost.CallCost.from_json(json.loads(json.dumps(cost.to_json()))) == cost
    with pytest.raises(ValueError, match="us_per_call.copy"):
        callcost.cost_from_chunks(untraced, record([7.0], [], [1.5]), {})


def test_the_untraced_bar_is_the_traced_one_less_each_calls_cost() -> None:
    cost = callcost.CallCost({"launch": 2.0, "copy": 1.0, "event": 0.5}, {"launch": 0.3, "copy": 0.2, "event": 0.1},
                             {k: 1.0 for k in callcost.KINDS}, {k: 2.0 for k in callcost.KINDS}, 3000)
    # a thread with, over 1000 frames, 2000 launches, 2000 copies, 1000 event calls and 500 waits
    thread = SimpleNamespace(launch_calls=2000, copy_calls=2000, other_calls=1000, wait_calls=500)
    per_frame = callcost.calls_per_frame(thread, 1000)
    assert per_frame == {"launch": 2.0, "copy": 2.0, "event": 1.5}
    est = callcost.estimate_calibrated(30.0, per_frame, cost)
    # 30 - (2 x 2.0 + 2 x 1.0 + 1.5 x 0.5) = 30 - 6.75 = 23.25; band 2 x 0.3 + 2 x 0.2 + 1.5 x 0.1 = 1.15
    assert est.untraced_us == pytest.approx(23.25) and est.method == "calibrated"
    assert (est.low_us, est.high_us) == pytest.approx((22.1, 24.4))
    assert "5.5 CUDA calls per frame" in est.note and "6.750 µs/frame less, ± 1.150 µs/frame" in est.note
    assert callcost.estimate_calibrated(5.0, per_frame, cost) is None  # more than the whole bar: cannot be right


def test_rate_scaled_shrinks_the_bar_by_the_programs_own_slow_down() -> None:
    est = callcost.estimate_rate_scaled(40.0, 1.25, spread=0.02)
    assert est.untraced_us == pytest.approx(32.0) and est.method == "rate-scaled"
    assert (est.low_us, est.high_us) == pytest.approx((31.36, 32.64))
    assert callcost.estimate_rate_scaled(40.0, 0.0) is None


def test_the_cache_keeps_one_calibration_per_machine(tmp_path: Path) -> None:
    path = tmp_path / "c" / "nsys-call-cost.json"
    key_a = callcost.machine_key("GPU-a", "580.1", "2025.3", host="n1")
    key_b = callcost.machine_key("GPU-b", "580.1", "2025.3", host="n1")
    assert callcost.cached(key_a, path) is None
    base = callcost.cost_from_chunks(record([5.0, 5.0], [3.0, 3.0], [1.0, 1.0]), record([7.0, 7.0], [4.0, 4.0],
                                     [1.5, 1.5]), key_a)
    assert callcost.save(base, path) == path
    other = callcost.CallCost(base.cost_us, base.spread_us, base.untraced_us, base.traced_us, 10, key_b)
    callcost.save(other, path)
    again = callcost.CallCost(base.cost_us, base.spread_us, base.untraced_us, base.traced_us, 99, key_a)
    callcost.save(again, path)  # replaces a's entry, keeps b's
    assert callcost.cached(key_a, path).calls == 99 and callcost.cached(key_b, path).calls == 10
    assert len(json.loads(path.read_text())["entries"]) == 2
    path.write_text("{not json")
    assert callcost.cached(key_a, path) is None  # a broken cache is no calibration, not an error
    assert callcost.cache_path({"CLUSTERBENCH_CACHE_DIR": str(tmp_path)}) == tmp_path / "nsys-call-cost.json"
    assert callcost.cache_path({"XDG_CACHE_HOME": "/x"}) == Path("/x/clusterbench/nsys-call-cost.json")


def test_the_calibration_runs_the_calls_untraced_and_under_the_probes_nsys_options(tmp_path: Path) -> None:
    untraced, traced = callcost.calibration_commands("nsys", tmp_path / "calls", python="py")
    assert untraced == ["py", "-m", "clusterbench.workloads.cupy.calls"]
    assert traced[:7] == ["nsys", "profile", "-t", "cuda,nvtx", "-s", "none", "--cpuctxsw=none"]
    assert traced[-3:] == untraced and "--export=sqlite" not in traced


def _runs(monkeypatch: pytest.MonkeyPatch, docs: list[dict]) -> list[list[str]]:
    """subprocess.run of the calibration answers with ``docs`` in turn (untraced, traced, untraced, ...)."""
    seen: list[list[str]] = []

    def run(cmd, **kw):
        seen.append(cmd)
        return SimpleNamespace(returncode=0, stdout="calls\n" + json.dumps(docs[len(seen) - 1]) + "\n", stderr="")

    monkeypatch.setattr(callcost.subprocess, "run", run)
    return seen


STEADY = record([1.0, 1.0, 1.0], [2.0, 2.0, 2.0], [0.5, 0.5, 0.5])


def test_a_calibration_that_does_not_settle_runs_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # attempt 1: launch untraced [5, 5, 9] (median 5, half range 2), traced [6, 6, 6]: cost 1.0 µs, spread 2.0
    # (not settled); attempt 2: launch [5, 5.1, 5] and [6, 6, 6.1]: cost 1.0, spread 0.05 + 0.05 = 0.1
    noisy_u = record([5.0, 5.0, 9.0], [1.0, 1.0, 1.0], [0.5, 0.5, 0.5])
    calm_u = record([5.0, 5.1, 5.0], [1.0, 1.0, 1.0], [0.5, 0.5, 0.5])
    traced = record([6.0, 6.0, 6.0], [2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    seen = _runs(monkeypatch, [noisy_u, traced, calm_u, record([6.0, 6.0, 6.1], [2.0, 2.0, 2.0], [1.0, 1.0, 1.0])])
    cost = callcost.calibrate("nsys", {"host": "h"})
    assert len(seen) == 4  # two attempts of two children; the second settled
    assert cost.settled and cost.cost_us["launch"] == pytest.approx(1.0)
    assert cost.spread_us["launch"] == pytest.approx(0.1)


def test_a_calibration_that_never_settles_keeps_the_least_noisy_and_is_not_cached(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # launch cost 1.0 µs in every attempt, spreads 2.0, 1.5 and 3.0 (untraced half ranges): the second kept
    traced = record([6.0, 6.0, 6.0], [2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    docs = []
    for worst in (9.0, 8.0, 11.0):
        docs += [record([5.0, 5.0, worst], [1.0, 1.0, 1.0], [0.5, 0.5, 0.5]), traced]
    seen = _runs(monkeypatch, docs)
    path = tmp_path / "cost.json"
    costs = callcost.CallCosts("nsys", {"host": "h"}, {}, True, path)
    cost = costs.get(need=True)
    assert len(seen) == 6 and not cost.settled
    assert cost.spread_us["launch"] == pytest.approx(1.5) and cost.noise() == pytest.approx(1.5)
    assert not path.exists()  # a noisy calibration serves this probe only
    est = callcost.estimate_calibrated(30.0, {"launch": 2.0, "copy": 0.0, "event": 0.0}, cost)
    assert est.untraced_us == pytest.approx(28.0) and (est.low_us, est.high_us) == pytest.approx((25.0, 31.0))
    assert "did not settle" in est.note


def test_a_settled_calibration_is_cached(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen = _runs(monkeypatch, [STEADY, record([2.0, 2.0, 2.0], [3.0, 3.0, 3.0], [1.0, 1.0, 1.0])])
    path = tmp_path / "cost.json"
    cost = callcost.CallCosts("nsys", {"host": "h"}, {}, True, path).get(need=True)
    assert len(seen) == 2 and cost.settled and cost.cost_us == pytest.approx({"launch": 1.0, "copy": 1.0, "event": 0.5})
    assert callcost.cached({"host": "h"}, path) == cost
