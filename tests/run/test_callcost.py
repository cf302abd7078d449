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
