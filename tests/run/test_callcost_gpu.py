"""nsys's cost per call, measured on the GPU machine (needs CuPy, a GPU and nsys)."""

from __future__ import annotations

import shutil
import time

import pytest

from clusterbench.run import callcost

pytestmark = pytest.mark.gpu


def test_the_calls_loop_times_every_kind_in_chunks() -> None:
    from clusterbench.workloads.cupy.calls import time_calls

    doc = time_calls(600, 3)
    assert doc["calls"] == 600 and set(doc["us_per_call"]) == set(callcost.KINDS)
    for kind, chunks in doc["us_per_call"].items():
        assert len(chunks) == 3 and all(0 < us < 1000 for us in chunks), (kind, chunks)


@pytest.mark.skipif(shutil.which("nsys") is None, reason="nsys not on PATH")
def test_the_calibration_finds_the_profiler_costs_every_call(tmp_path) -> None:
    t0 = time.monotonic()
    cost = callcost.calibrate(shutil.which("nsys"), callcost.machine_key("GPU-test", None, None))
    took = time.monotonic() - t0
    for kind in callcost.KINDS:
        # under nsys each call records an activity: slower, and by more than the chunks' own spread
        assert cost.traced_us[kind] > cost.untraced_us[kind], cost.summary()
        assert cost.cost_us[kind] > cost.spread_us[kind], cost.summary()
    assert took < 20, f"the calibration took {took:.1f} s"
