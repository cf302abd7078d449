"""The records of the untraced frame: the injection library's and the latency program's reports read from
hand-written files (every figure below worked out by hand from those files), and the records that cross to
env.json and <label>.untraced.json read back as they were written."""

from __future__ import annotations

import dataclasses

import copy
import json

import pytest

from clusterbench.model.untraced import (
    DelayRun,
    DelayTest,
    InjectReport,
    LatencyRun,
    PathHost,
    PathStructure,
    SlopeFit,
    UntracedCosts,
    UntracedRecord,
    sched_name,
)
from conftest import DATA

HERE = DATA / "untraced"


def _doc(name: str) -> dict:
    return json.loads((HERE / name).read_text())


def test_an_inject_report_reads_as_written() -> None:
    r = InjectReport.from_json(_doc("inject_one_thread.json"))
    assert (r.pid, r.mark, r.warmup, r.host_us, r.gpu_us, r.link_bytes) == (4242, "kernel:zoo_calib", 1, 0.0, None, None)
    assert r.sched == "blocking"  # ctx_flags 4: CU_CTX_SCHED_BLOCKING_SYNC
    (t,) = r.threads
    assert (t.tid, t.name, t.marks_total, len(t.marks)) == (100, "daq_loop", 5, 5)
    assert t.warm_mark is not None and t.warm_mark.t_ns == 21000 and t.warm_mark.wait_ns == 6000
    assert t.last_mark is not None and t.last_mark.delay_ns == 8000
    assert [m.t_ns for m in t.marks] == [1000, 21000, 41000, 61000, 81000]
    assert {a.api: (a.n, a.total_ns) for a in t.loop_apis} == {"cudaMemcpyAsync": (6, 12000),
                                                               "cudaStreamSynchronize": (3, 18000),
                                                               "cudaLaunchKernel": (3, 6000)}
    assert t.apis[0].mean_us == pytest.approx(2.1)  # 21,000 ns over 10 calls
    assert r.marks_total == 5


@pytest.mark.parametrize("flags,name", [(0, "auto"), (1, "spin"), (2, "yield"), (4, "blocking"), (4 | 8, "blocking"),
                                        (None, None)])
def test_the_schedule_flag_is_the_low_three_bits(flags, name) -> None:
    assert sched_name(flags) == name


@pytest.mark.parametrize("change,words", [
    (lambda d: d.update(schema="x"), "not a clusterbench.inject-report"),
    (lambda d: d.update(version=2), "version 2"),
    (lambda d: d["threads"][0].update(marks_total=2), "5 marks kept but marks_total is 2"),
    (lambda d: d["threads"][0]["marks"]["t_ns"].pop(), "columns differ"),
    (lambda d: d["threads"][0].update(last_mark=None), "no last_mark"),
    (lambda d: d["threads"][0]["apis"][0].update(domain="kernel"), "domain must be runtime or driver"),
    (lambda d: d["threads"][0]["apis"][0].update(n=0), "n must be an integer >= 1"),
    (lambda d: d["settings"].update(host_us="fast"), "host_us must be a number"),
    (lambda d: d.update(argv="./prog"), "argv must be a list"),
])
def test_a_bad_inject_report_says_what_is_wrong(change, words) -> None:
    doc = copy.deepcopy(_doc("inject_one_thread.json"))
    change(doc)
    with pytest.raises(ValueError, match=words):
        InjectReport.from_json(doc)


def test_the_latency_report_reads_as_its_medians() -> None:
    run = LatencyRun.from_report(_doc("latency_untraced.json"), "none")
    assert (run.under, run.sched, run.globaltimer_step_ns) == ("none", "blocking", 32)
    memset = run.chain("memset:4")
    assert memset is not None and (memset.period_ns, memset.spread_ns) == (2000.0, 100.0)  # of 2000, 2100, 1900
    kernel = run.chain("kernel:1")
    assert kernel is not None and kernel.period_ns == 3050.0 and kernel.kernel_gap_ns == 1600.0 and kernel.gate_timeouts == 1
    seq = run.sequence
    assert seq is not None and seq.whole and seq.period_ns == 40000.0 and seq.spread_ns == 1000.0
    assert (run.gap_ns, run.wake_ns, run.host_ns, run.launch_ns) == (10000.0, 4000.0, 600.0, 5400.0)
    assert run.sync_call_ns == 12650.0  # the median of 12000, 12500, 13000, 12800
    assert run.sync_loop_ns == 45250.0  # of 45000, 46000, 44000, 45500
    assert LatencyRun.from_json(run.to_json()) == run


def test_a_version_2_latency_report_gives_its_idle_synchronize() -> None:
    doc = _doc("latency_untraced.json")
    assert LatencyRun.from_report(doc, "none").idle_sync_ns is None  # version 1 did not measure it
    doc.update(version=2, idle_sync={"call_ns": [2100, 1900, 5000, 2000, 1800]})
    run = LatencyRun.from_report(doc, "none")
    assert run.idle_sync_ns == 2000.0  # the median of the five
    assert LatencyRun.from_json(json.loads(json.dumps(run.to_json()))) == run
    old = {k: v for k, v in run.to_json().items() if k != "idle_sync_ns"}  # a record stored before the key
    assert LatencyRun.from_json(old).idle_sync_ns is None
    with pytest.raises(ValueError, match="idle_sync must be"):
        LatencyRun.from_report({**doc, "idle_sync": None}, "none")
    with pytest.raises(ValueError, match="version 3; this clusterbench reads versions 1, 2"):
        LatencyRun.from_report({**doc, "version": 3}, "none")


def test_a_bad_latency_report_is_refused() -> None:
    doc = _doc("latency_untraced.json")
    doc["round_trip"]["gap_ns"] = [1.5]
    with pytest.raises(ValueError, match="round_trip.gap_ns must hold integers"):
        LatencyRun.from_report(doc, "none")
    with pytest.raises(ValueError, match="not a clusterbench.latency-report"):
        LatencyRun.from_report({"schema": "x"}, "none")


def test_the_unit_costs_and_the_record_round_trip() -> None:
    u = LatencyRun.from_report(_doc("latency_untraced.json"), "none")
    t = LatencyRun.from_report(_doc("latency_nsys.json"), "nsys")
    costs = UntracedCosts(u, t, "blocking", "performance", {"cudaLaunchKernel": 2.0})
    assert UntracedCosts.from_json(json.loads(json.dumps(costs.to_json()))) == costs
    slope = SlopeFit("host", 10.0, 0.98, 0.02, 20.0, 29.8, 3, "binds")
    test = DelayTest(3, 10.0, None, None, (DelayRun("none", 0.0, 0, 20.0, 12.0),), (slope,), "host", 19.9, 0.005)
    rec = UntracedRecord(None, test, costs, notes=("a note",))
    back = UntracedRecord.from_json(json.loads(json.dumps(rec.to_json())))
    assert back.delay == test and back.costs == costs and back.notes == ("a note",)
    # the link's rate: the unit's where it was measured; a record written before the key reads "trace"
    unit_test = dataclasses.replace(test, link_bytes=1_000_000, link_gbps=54.75, link_rate_from="unit")
    assert DelayTest.from_json(json.loads(json.dumps(unit_test.to_json()))) == unit_test
    old = {k: v for k, v in test.to_json().items() if k != "link_rate_from"}
    assert DelayTest.from_json(old).link_rate_from == "trace"
    with pytest.raises(ValueError, match="version 9"):
        UntracedRecord.from_json({**rec.to_json(), "version": 9})
    with pytest.raises(ValueError, match="verdict must be one of"):
        SlopeFit.from_json({**slope.to_json(), "verdict": "maybe"})


def test_the_path_comes_back_with_the_record() -> None:
    path = PathStructure(100, 60.0, {"h2d": 13.0, "kernel": 1.2}, 20.0, 3.0, 6.0, 1.0, 1.0,
                         (PathHost(7, "daq", 13.0, 5.0, 1.0, 20.0, 8.0, 1.0, 2.5), PathHost(8, None, 1.0, 0.0, 0.0, None)),
                         {"h2d": 13.0, "kernel": 1.2}, 6.0)
    rec = UntracedRecord(None, None, None, path)
    back = UntracedRecord.from_json(json.loads(json.dumps(rec.to_json())))
    assert back.path == path and back.split is None
    doc = rec.to_json()
    doc["path"] = {**path.to_json(), "hosts": [{**path.hosts[0].to_json(), "wakes": "one"}]}  # type: ignore[dict-item]
    with pytest.raises(ValueError, match=r"path.hosts\[0\].wakes must be a number"):
        UntracedRecord.from_json(doc)
    # a record written before a path kept its turns and the launches after a wake reads them as none
    older = {k: v for k, v in path.to_json().items() if k != "launch_after_wake_us"}
    older["hosts"] = [{k: v for k, v in h.to_json().items() if k not in ("after_wait_us", "after_waits", "blocked_us")}
                      for h in path.hosts]
    old = PathStructure.from_json(older)
    assert old.launch_after_wake_us == 0.0 and old.hosts[0].after_waits == 0.0 and old.hosts[0].wakes == 1.0
    assert path.hosts[0].blocked_us == 2.5 and old.hosts[0].blocked_us is None


def _row(**kw):
    from results_data import row

    return row({"label": "daq", "cluster": 3, "cap": 10, "streams": 1, "batch": 1, "frames": 100, **kw})


def test_the_rows_untraced_columns_go_through_the_store(tmp_path) -> None:
    from clusterbench.io.results import load_results
    from results_data import write

    values = {"untraced_frame_us": 36.4, "untraced_host_us": 12.1, "untraced_split_us": 35.0, "delay_binds": "host+gpu",
              "delay_slope_host": 0.97, "delay_slope_gpu": 0.9, "delay_slope_link": -0.03, "inject_cost": -0.004}
    write(tmp_path, [{"label": "daq", "cluster": 3, "cap": 10, "streams": 1, "batch": 1, "frames": 100, **values}],
          {"session_id": "s"})
    (back,) = load_results(tmp_path).rows
    assert {k: back.value(k) for k in values} == values  # a slope and a cost may be below 0 (noise)


@pytest.mark.parametrize("column,value,words", [
    ("delay_binds", "cpu", "column delay_binds"),
    ("untraced_frame_us", 0.0, "a time must be > 0"),
    ("untraced_host_us", -1.0, "a time must be > 0"),
])
def test_impossible_untraced_columns_are_refused(column, value, words) -> None:
    with pytest.raises(ValueError, match=words):
        _row(**{column: value})
