"""run/processes.py and the process chain of run/sustained.py: a config's sustained FPS from several fresh
processes. The probe runs for real on the CPU with the machine's edges stood in (tests/gpu_edges.py) and toy
workload programs (tests/protocol_programs.py); every expected figure is worked out by hand in the comments."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from clusterbench.io.results import load_results
from clusterbench.model.processes import processes_of
from clusterbench.model.results import RowKey
from clusterbench.model.steady import SteadyRule
from clusterbench.run import machine
from clusterbench.run import sustained as sus
from clusterbench.run.probe import ProbeRequest, plan_probe, run_probe
from clusterbench.run.processes import EarlySustained, steady_plan, sustained_block
from gpu_edges import FAKE_LINK, FakeMachine
from protocol_programs import ONE_COMMAND_CONFIG, write_program


def test_the_early_sustained_process_starts_once_the_pass_is_recorded_and_runs_on_go(tmp_path: Path) -> None:
    import threading
    import time

    from clusterbench.workloads.cupy.run import wait_for_go

    result, go = tmp_path / "a.pass.json", tmp_path / "a.sustained.go"
    result.write_text("{}")  # an earlier probe's record: it must not start anything
    seen: dict = {}

    def start(go_file: Path) -> str:
        seen["started_before_go"] = not go_file.exists()
        seen["waited_s"] = wait_for_go(str(go_file), poll_s=0.001)
        return "measured"

    early = EarlySustained(start, result, go)
    time.sleep(0.05)
    assert "started_before_go" not in seen  # the stale record was removed, nothing started
    result.write_text("{}")  # the traced pass wrote its record
    deadline = time.monotonic() + 5
    while "started_before_go" not in seen and time.monotonic() < deadline:
        time.sleep(0.005)
    assert seen["started_before_go"] is True
    assert early.go() == "measured" and not go.exists()


def test_the_early_sustained_process_is_not_started_without_a_record_and_stops_when_told(tmp_path: Path) -> None:
    from clusterbench.errors import InputError
    from clusterbench.workloads.cupy.run import wait_for_go

    never = EarlySustained(lambda go: pytest.fail("started without a record"), tmp_path / "x.pass.json",
                                     tmp_path / "x.go")
    assert never.go() is None  # the caller runs it the ordinary way
    result = tmp_path / "b.pass.json"
    errors: list = []

    def start(go_file: Path) -> None:
        try:
            wait_for_go(str(go_file), poll_s=0.001)
        except InputError as exc:
            errors.append(str(exc))
            raise

    early = EarlySustained(start, result, tmp_path / "b.go")
    result.write_text("{}")
    import time

    time.sleep(0.05)
    early.stop("the trace failed")  # its error is dropped
    assert errors == ["the probe asked this process to stop before it measured (stop: the trace failed)"]
    assert not (tmp_path / "b.go").exists()


# ----------------------------------------------------------------------------- a probe in three processes


def test_a_probe_measures_sustained_fps_in_three_processes(monkeypatch, tmp_path: Path) -> None:
    # the toy's sustained passes run at 1000, 2000 and 3000 FPS x its process's own speed: 1, 1.02 and 0.99 in
    # its first, second and third sustained process (protocol_programs.py, behaviour "varies"). So the process
    # medians are 2000, 2040 and 1980 FPS; the figure is their median, 2000; the spread half their range, 30
    cfg = tmp_path / "configs.toml"
    cfg.write_text(ONE_COMMAND_CONFIG.replace("toy_ok.py", "toy_varies.py"))
    write_program(tmp_path, "varies")
    edges = FakeMachine(monkeypatch, 1)
    req = ProbeRequest(config_path=cfg, results_root=tmp_path / "results", repeat=3, processes=3, tracer="none",
                       argv=("clusterbench", "probe"))
    plan = plan_probe(req)
    outcome = run_probe(plan, req, nsys=None)
    row = load_results(plan.results_dir).row(RowKey("a"))
    m = row.measurement("sustained_fps")
    assert m.samples == pytest.approx((2000.0, 2040.0, 1980.0)) and row.sustained_fps == 2000.0
    assert row.sustained_fps_spread == pytest.approx(30.0)
    assert (row.sustained_processes, row.sustained_repeats) == (3, 9)  # 3 processes x 3 passes each
    procs = processes_of(m)
    assert [p.values for p in procs] == [pytest.approx(v) for v in ((1000.0, 2000.0, 3000.0), (1020.0, 2040.0, 3060.0),
                                                                    (990.0, 1980.0, 2970.0))]
    for name in ("a.sustained.gpu0.json", "a.sustained.p1.gpu0.json", "a.sustained.p2.gpu0.json"):
        assert (plan.results_dir / name).is_file(), name
    env = json.loads((plan.results_dir / "env.json").read_text())
    assert [p["median"] for p in env["configs"]["a"]["sustained"]["processes"]] == pytest.approx([2000.0, 2040.0, 1980.0])
    # the unit: measured once, after the guards, for the GPU the probe ran on; kept in env.json
    assert edges.unit.calls == [("go", "GPU-0000", "NVIDIA H200"), ("measure",), ("result",)]
    unit = env["unit"]
    assert unit["gpu_uuid"] == "GPU-0000" and unit["unit_id"] == "GPU-0000@fakehost#fake-boo"  # the boot id's first 8 characters
    assert (unit["link"]["duplex_d2h"]["gbps"], unit["link"]["h2d"]["gbps"]) == (FAKE_LINK[3], FAKE_LINK[0])
    assert (plan.results_dir / "unit.log").is_file() and outcome.rows[0].sustained_processes == 3


def test_a_refused_guard_stops_the_unit_child(monkeypatch, tmp_path: Path) -> None:
    from clusterbench.errors import CheckFailed

    cfg = tmp_path / "configs.toml"
    cfg.write_text(ONE_COMMAND_CONFIG)
    write_program(tmp_path, "ok")
    edges = FakeMachine(monkeypatch, 1, busy=(0,))
    req = ProbeRequest(config_path=cfg, results_root=tmp_path / "results", tracer="none")
    with pytest.raises(CheckFailed):
        run_probe(plan_probe(req), req, nsys=None)
    assert edges.unit.calls == [("stop", "the guards refused")]


def test_bad_process_counts_are_refused_before_any_gpu_work(tmp_path: Path) -> None:
    from clusterbench.errors import InputError

    cfg = tmp_path / "configs.toml"
    cfg.write_text(ONE_COMMAND_CONFIG)
    for bad in (0, 51, 2.5, True):
        with pytest.raises(InputError, match="--processes must be an integer from 1 to 50"):
            plan_probe(ProbeRequest(config_path=cfg, results_root=tmp_path / "r", processes=bad))


def test_the_plan_in_words() -> None:
    ours = sus.SustainedCommand(lambda g, r: [], SteadyRule(counted=3), "sustained", own_steady=True, go=True)
    text = steady_plan(ours, 3)
    assert text.startswith("in 3 fresh processes, one after the other: all set up at once, and each runs once the "
                           "one before has ended its runs; in each: 1 warm-up run")
    assert "until the last 3 agree within 1.5 %" in text and "0.8 s of runs" in text
    assert steady_plan(ours, 1).startswith("in one process; in each: 1 warm-up run")


# A stand-in for our finder's sustained process that logs, with the time, when it started, when its gate let it
# go (CLUSTERBENCH_GO_FILE, waited for before its GPU work or before its runs, as CLUSTERBENCH_GO_BEFORE says)
# and when it ended; its runs take 0.5 s (long enough for the next process to start on a busy 2-core machine).
GATED_CHILD = textwrap.dedent("""
    import json, os, sys, time
    result, log = sys.argv[1], sys.argv[2]
    def mark(what):
        with open(log, "a") as fh:
            fh.write(json.dumps([os.path.basename(result), what, time.time()]) + "\\n")
    mark("start")
    from clusterbench.workloads.cupy.run import wait_for_go
    before = os.environ.get("CLUSTERBENCH_GO_BEFORE") or "runs"
    gate = os.environ.get("CLUSTERBENCH_GO_FILE")
    if before == "gpu":
        wait_for_go(gate, 0.001)
    mark("gpu")
    if before == "runs":
        wait_for_go(gate, 0.001)
    mark("runs")
    time.sleep(0.5)
    if len(sys.argv) > 3 and sys.argv[3] == "fail":
        sys.exit(1)
    if len(sys.argv) > 3 and sys.argv[3] == "done":  # as our finder does: its runs ended, then its record and exit
        from clusterbench.workloads.cupy.run import signal_done
        mark("done")
        signal_done(gate)
        time.sleep(0.5)
    doc = {"schema": "clusterbench.workload-result", "version": 2, "mode": "sustained", "frames": 1000,
           "pass_s": [0.010, 0.011, 0.0105], "clusters_found": 7}
    json.dump(doc, open(result, "w"))
    mark("end")
""")


def test_every_process_sets_up_at_once_and_each_runs_after_the_one_before(tmp_path: Path) -> None:
    child = tmp_path / "gated.py"
    child.write_text(GATED_CHILD)
    log = tmp_path / "events.log"
    command = sus.SustainedCommand(lambda g, r: [sys.executable, str(child), str(r), str(log)],
                                   SteadyRule(counted=3, min_warmups=0, max_runs=3), "sustained", go=True,
                                   metadata={"source": "result"})
    gpu = machine.GpuInfo(0, "GPU-0000", "NVIDIA H200")
    run = sus.measure_sustained((gpu,), machine.PinTools(None, True, tuple(sorted(os.sched_getaffinity(0)))),
                                command, tmp_path, "c", base_env=dict(os.environ), timeout_s=60, processes=3)
    events = {}
    for line in log.read_text().splitlines():
        name, what, t = json.loads(line)
        events[(name.split(".gpu")[0], what)] = t
    p0, p1, p2 = "c.sustained", "c.sustained.p1", "c.sustained.p2"
    # every process set up (its "gpu" mark: past its set-up, at its gate) before the first one's runs began
    assert max(events[(p, "gpu")] for p in (p0, p1, p2)) < events[(p0, "runs")]
    # and each ran only once the one before it had ended
    assert events[(p0, "end")] < events[(p1, "runs")] and events[(p1, "end")] < events[(p2, "runs")]
    # the passes 10, 11 and 10.5 ms of 1000 frames: 100,000, 90,909 and 95,238 FPS, median 95,238 each process
    assert run.figures.solo.samples == pytest.approx((95_238.095,) * 3)
    assert not list(tmp_path.glob("*.go")) and not list(tmp_path.glob("*.ready"))  # the gates are gone


def _gated_run(tmp_path: Path, mode: str) -> tuple[dict, object]:
    child = tmp_path / "gated.py"
    child.write_text(GATED_CHILD)
    log = tmp_path / "events.log"
    command = sus.SustainedCommand(lambda g, r: [sys.executable, str(child), str(r), str(log), mode],
                                   SteadyRule(counted=3, min_warmups=0, max_runs=3), "sustained", go=True,
                                   metadata={"source": "result"})
    gpu = machine.GpuInfo(0, "GPU-0000", "NVIDIA H200")
    run = None
    try:
        run = sus.measure_sustained((gpu,), machine.PinTools(None, True, tuple(sorted(os.sched_getaffinity(0)))),
                                    command, tmp_path, "c", base_env=dict(os.environ), timeout_s=60, processes=3)
    finally:
        events = {}
        for line in log.read_text().splitlines():
            name, what, t = json.loads(line)
            events[(name.split(".gpu")[0], what)] = t
    return events, run


def test_the_next_process_runs_once_the_one_before_says_its_runs_ended(tmp_path: Path) -> None:
    events, run = _gated_run(tmp_path, "done")
    p0, p1, p2 = "c.sustained", "c.sustained.p1", "c.sustained.p2"
    for before, after in ((p0, p1), (p1, p2)):
        # its go came after the one before closed its pipeline, while that one still wrote its record (0.5 s)
        assert events[(before, "done")] < events[(after, "runs")] < events[(before, "end")]
    assert run.figures.solo.samples == pytest.approx((95_238.095,) * 3)
    assert not [p for p in tmp_path.iterdir() if p.suffix in (".go", ".ready", ".done")]


def test_a_process_that_fails_stops_the_chain_before_the_next_runs(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="c"):
        _gated_run(tmp_path, "fail")
    marks = [tuple(json.loads(ln)[:2]) for ln in (tmp_path / "events.log").read_text().splitlines()]
    assert ("c.sustained.gpu0.json", "runs") in marks
    assert not any(what == "runs" and not name.startswith("c.sustained.gpu0") for name, what in marks)


def test_a_stop_before_the_runs_stops_every_process(tmp_path: Path) -> None:
    child = tmp_path / "gated.py"
    child.write_text(GATED_CHILD)
    go = tmp_path / "c.sustained.go"
    go.write_text("stop: the trace failed\n")  # the probe's trace failed: no process may measure
    command = sus.SustainedCommand(lambda g, r: [sys.executable, str(child), str(r), str(tmp_path / "e.log")],
                                   SteadyRule(counted=3, min_warmups=0, max_runs=3), "sustained", go=True)
    gpu = machine.GpuInfo(0, "GPU-0000", "NVIDIA H200")
    with pytest.raises(Exception, match="asked this process to stop before it measured"):
        sus.measure_sustained((gpu,), machine.PinTools(None, True, tuple(sorted(os.sched_getaffinity(0)))), command,
                              tmp_path, "c", base_env=dict(os.environ), timeout_s=60, processes=3, go_file=go)
    marks = [json.loads(ln)[1] for ln in (tmp_path / "e.log").read_text().splitlines()]
    assert "runs" not in marks and marks.count("start") == 3


def test_sustained_block_names_each_process_without_its_runs() -> None:
    from results_data import processes

    m = processes([{"values": [100.0, 100.5, 99.8], "settled": True}, {"values": [90.0, 95.0, 99.0], "settled": False}])
    block = sustained_block(m)
    assert [(p["median"], p["counted"], p["steady"]) for p in block["processes"]] == [(100.0, 3, True), (95.0, 3, False)]
    assert "runs" not in json.dumps(block["processes"])
