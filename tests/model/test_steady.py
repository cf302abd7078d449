"""Steady sustained runs: warm-ups, runs of at least a target time, and a stop rule that can say no.

Every expected value is worked out by hand from the pass times the fake runner gives."""

from __future__ import annotations

import math

import pytest

from clusterbench.model.steady import (MAX_PASSES_PER_RUN, Run, Steadiness, SteadyRule, judge, passes_per_run,
                                       run_until_steady, spread_of, stop_reason, whole_runs_rule)


class FakeRunner:
    """Passes whose times come from ``times(k)`` (k: the pass's number from 1); a clock that moves by the
    passes' time plus ``gap_s`` per run (what lies between runs: the pedestal's reset, Python)."""

    def __init__(self, times, gap_s: float = 0.0) -> None:
        self.times, self.gap_s = times, gap_s
        self.passes = 0
        self.now = 0.0
        self.calls: list[int] = []

    def run_passes(self, n: int) -> float:
        self.calls.append(n)
        seconds = 0.0
        for _ in range(n):
            self.passes += 1
            seconds += self.times(self.passes)
        self.now += seconds + self.gap_s
        return seconds

    def clock(self) -> float:
        return self.now


def test_spread_is_the_range_over_the_median() -> None:
    assert spread_of([100.0, 101.0, 99.0]) == pytest.approx(2 / 100)
    assert spread_of([5.0]) == 0.0 and spread_of([]) == 0.0
    assert spread_of([90.0, 100.0, 110.0, 200.0]) == pytest.approx(110 / 105)  # median of four: (100 + 110) / 2


def test_passes_per_run_reach_the_target_time() -> None:
    rule = SteadyRule(target_s=0.1)
    assert passes_per_run(0.055, rule) == 2  # 0.1 / 0.055 = 1.82 -> 2 passes, 110 ms
    assert passes_per_run(0.135, rule) == 1  # one pass is long enough
    assert passes_per_run(0.02, rule) == 5
    assert passes_per_run(1e-9, rule) == MAX_PASSES_PER_RUN
    assert passes_per_run(0.02, SteadyRule(passes=3)) == 3  # a fixed plan's passes win


def test_a_slow_start_is_warm_up_and_the_steady_runs_count() -> None:
    # 1000 frames a pass; the first four passes take 11 ms (slow), the others 10 ms.
    fake = FakeRunner(lambda k: 0.011 if k <= 4 else 0.010)
    rule = SteadyRule(counted=3, spread=0.01, min_warmups=1, target_s=0.02, max_runs=40, max_s=10.0)
    v = run_until_steady(fake.run_passes, 1000, rule, fake.clock)
    # run 1: pass 1 (11 ms) -> 90,909 FPS; 0.02 / 0.011 -> 2 passes a run
    # run 2: passes 2-3, 22 ms -> 90,909; run 3: passes 4-5, 21 ms -> 95,238; run 4: 20 ms -> 100,000
    #   after run 4 the last three span (100,000 - 90,909) / 95,238 = 9.5 %: go on
    # run 5: 100,000 (last three span 4.8 %); run 6: 100,000: the last three agree
    assert fake.calls == [1, 2, 2, 2, 2, 2]
    assert [round(r.value) for r in v.runs] == [90909, 90909, 95238, 100000, 100000, 100000]
    assert v.steady is True and v.reason == "steady" and v.values == (100_000.0,) * 3
    assert v.warmups == 3 and v.spread == 0.0
    assert v.warmup_s == pytest.approx(0.011 + 0.022 + 0.021)  # from run 1's start to run 4's
    assert [r.started_s for r in v.runs[:3]] == pytest.approx([0.0, 0.011, 0.033])


def test_runs_that_never_agree_stop_at_the_caps_and_say_so() -> None:
    # passes alternate 10 and 12 ms: runs of one pass alternate 100,000 and 83,333 FPS
    alternating = (lambda k: 0.010 if k % 2 else 0.012)
    fake = FakeRunner(alternating)
    v = run_until_steady(fake.run_passes, 1000, SteadyRule(counted=3, target_s=0.0, max_runs=7, max_s=100.0),
                         fake.clock)
    assert len(v.runs) == 7 and v.reason == "max_runs" and v.steady is False and v.warmups == 4
    # the last three: passes 5, 6, 7 at 100,000, 83,333 and 100,000 FPS: median 100,000
    assert v.spread == pytest.approx((100_000 - 1000 / 0.012) / 100_000)
    # the time cap: after each run, another as long as the last would pass 0.05 s
    fake = FakeRunner(alternating, gap_s=0.001)
    v = run_until_steady(fake.run_passes, 1000, SteadyRule(counted=3, target_s=0.0, max_runs=40, max_s=0.05),
                         fake.clock)
    # runs end at 11, 24, 35, 48 ms ...: after run 4 (48 ms), another of 12 ms passes 50 ms
    assert len(v.runs) == 4 and v.reason == "max_s" and v.steady is False
    msg = v.message("its sustained FPS")
    assert msg.startswith("its sustained FPS did not reach a steady state: its last 3 runs spread 20.0 % of their "
                          "median, more than the 1.5 % allowed, after 0.04 s of runs (the cap)")


def test_the_counted_runs_come_first_however_short_the_cap() -> None:
    fake = FakeRunner(lambda k: 0.010)
    v = run_until_steady(fake.run_passes, 1000, SteadyRule(counted=5, target_s=0.0, max_s=0.0), fake.clock)
    assert len(v.runs) == 6 and v.steady is True and v.warmups == 1  # 1 warm-up + 5 counted, whatever the cap


def test_one_counted_run_cannot_be_judged_steady() -> None:
    v = judge([Run(100.0, 0.01), Run(90.0, 0.01)], SteadyRule(counted=1))
    assert v.steady is None and v.values == (90.0,) and v.warmups == 1


def test_a_fixed_plan_runs_its_count_and_is_still_judged() -> None:
    rule = SteadyRule(counted=2, min_warmups=2, fixed=True, passes=3, target_s=0.1)
    fake = FakeRunner(lambda k: 0.010 if k <= 3 else 0.020)
    v = run_until_steady(fake.run_passes, 1000, rule, fake.clock)
    assert fake.calls == [1, 3, 3, 3] and v.reason == "fixed"
    # runs 3 and 4 (3 passes of 20 ms each): 50,000 FPS both
    assert v.values == (50_000.0, 50_000.0) and v.steady is True and v.warmups == 2


def test_stop_reason_never_stops_before_the_least_runs() -> None:
    rule = SteadyRule(counted=3, min_warmups=1)
    runs = [Run(100.0, 0.1)] * 3
    assert stop_reason(runs, 99.0, rule) is None  # 3 < 1 + 3, whatever the time
    assert stop_reason(runs + [Run(100.0, 0.1)], 0.0, rule) == "steady"


def test_a_program_run_whole_gets_two_runs_more_at_most_and_no_warm_up() -> None:
    rule = whole_runs_rule(3)
    assert (rule.min_warmups, rule.max_runs, rule.spread, rule.max_s) == (0, 5, 0.02, None)
    assert stop_reason([Run(100.0), Run(101.0), Run(101.5)], 1e9, rule) == "steady"  # 1.5 / 101 = 1.49 %
    assert stop_reason([Run(100.0), Run(110.0), Run(101.5)], 1e9, rule) is None
    assert stop_reason([Run(100.0), Run(110.0), Run(101.5), Run(90.0), Run(120.0)], 1e9, rule) == "max_runs"


def test_a_verdict_read_back_is_judged_again_from_its_runs() -> None:
    runs = (Run(100.0, 0.1, 1, 0.0), Run(50.0, 0.1, 1, 0.1), Run(100.0, 0.1, 1, 0.2), Run(100.0, 0.1, 1, 0.3))
    doc = judge(runs, SteadyRule(counted=2)).to_json()
    assert doc["steady"] is True and doc["warmups"] == 2 and doc["warmup_s"] == pytest.approx(0.2)
    forged = {**doc, "steady": True, "runs": [r.to_json() for r in (runs[0], runs[1], runs[2])]}
    again = Steadiness.from_json(forged)  # its last two runs are 50 and 100: not steady, whatever it says
    assert again.steady is False and again.values == (50.0, 100.0)
    with pytest.raises(ValueError, match="reason"):
        Steadiness.from_json({**doc, "reason": "because"})
    with pytest.raises(ValueError, match="runs"):
        Steadiness.from_json({**doc, "runs": []})
    with pytest.raises(ValueError, match="value"):
        Steadiness.from_json({**doc, "runs": [{"value": -1}]})


@pytest.mark.parametrize("kw", [{"counted": 0}, {"max_runs": 0}, {"min_warmups": -1}, {"spread": math.nan},
                                {"max_s": -1.0}, {"passes": 0}, {"counted": True}])
def test_a_bad_rule_is_refused(kw) -> None:
    with pytest.raises(ValueError):
        SteadyRule(**kw)


def test_a_rule_round_trips_through_json() -> None:
    rule = SteadyRule(counted=4, spread=0.02, min_warmups=2, max_runs=9, max_s=None, fixed=True, passes=3)
    assert SteadyRule.from_json(rule.to_json()) == rule
    with pytest.raises(ValueError, match="unknown"):
        SteadyRule.from_json({"counted": 3, "loops": 2})
