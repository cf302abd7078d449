"""probe --what-binds end to end on this machine: only the outermost edges are stand-ins (NVML, nsys that
leaves the zoo's turns trace, a program that writes what the injection library would, a latency program
that writes a hand-written report: tests/untraced_programs.py). The probe runs the delay test, the latency
program untraced and under the stand-in nsys, splits the real trace's critical path again, and writes the
row's columns, <label>.untraced.json and env.json's unit block. The stand-in program's frame is 20 µs plus
the host's delay (its slope 1), so what binds is known before the run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from clusterbench.run import inject
from clusterbench.run.probe import ProbeRequest, plan_probe, require_no_failures, run_probe
from untraced_programs import write_fake_latency, write_fake_program

ZOO = Path(__file__).resolve().parents[1] / "data" / "zoo"


@pytest.fixture
def edges(monkeypatch, tmp_path: Path):
    from exec_programs import traces_env, write_fake_nsys
    from gpu_edges import FakeMachine

    e = FakeMachine(monkeypatch, 1, versions={"nsys": "NVIDIA Nsight Systems version 2025.3.2.474"})
    e.nsys = write_fake_nsys(tmp_path)
    monkeypatch.setenv("FAKE_NSYS_TRACES", traces_env(default=ZOO / "zoo_turns.sqlite"))
    latency = write_fake_latency(tmp_path / "tools")

    def fake_build(tool, tk=None, environ=None, timeout_s=0.0):
        return tmp_path / "tools" / "libcb_inject.so" if tool == inject.INJECT_LIB else latency

    monkeypatch.setattr(inject, "build", fake_build)
    monkeypatch.setenv("FAKE_MARKS", "200")
    return e


def _request(tmp_path: Path, **kw) -> ProbeRequest:
    from clusterbench.run.config import ExecOptions

    prog = write_fake_program(tmp_path / "prog")
    return ProbeRequest(program=(sys.executable, str(prog)), label="turns", results_root=tmp_path / "results",
                        argv=("clusterbench", "probe", "--what-binds"), repeat=1, what_binds=True, delay_processes=2,
                        delay_us=8.0,
                        measure=ExecOptions(frames_spec="kernel:zoo_calib", window="range:loop",
                                            rate=r"rate: ([0-9.]+) frames/s"), **kw)


def test_what_binds_writes_its_columns_record_and_unit_block(edges, tmp_path: Path) -> None:
    req = _request(tmp_path)
    plan = plan_probe(req)
    outcome = run_probe(plan, req, nsys=edges.nsys)
    require_no_failures(outcome)
    (row,) = outcome.rows
    assert row.delay_binds == "host"
    assert row.delay_slope_host == pytest.approx(1.0, abs=1e-3)
    assert row.delay_slope_gpu == pytest.approx(0.0, abs=1e-3) and row.delay_slope_link == pytest.approx(0.0, abs=1e-3)
    assert row.untraced_frame_us == pytest.approx(20.0, abs=1e-3)
    assert row.inject_cost == pytest.approx(20.0 / 19.9 - 1, abs=1e-4)
    # the measured host bar takes the estimate's place; the traced roofline stays the trace's
    assert row.host_estimate == "measured" and row.host_untraced_us == row.untraced_host_us == pytest.approx(20.0, abs=1e-3)
    assert row.binds == "host" and row.roofline_us == pytest.approx(row.host_us)  # the traced bar, as traced
    record = outcome.untraced["turns"]
    # the split of the real trace: its parts as traced add up to the path per frame, and every part was
    # measured untraced (the stand-ins' figures), so the untraced parts have a sum
    split = record.split
    assert split is not None and split.traced_us == pytest.approx(sum(p.traced_us for p in split.parts))
    assert split.untraced_sum_us == pytest.approx(row.untraced_split_us)
    assert {p.resource for p in split.parts} >= {"kernel", "h2d", "d2h", "gpu_latency", "round_trip"}
    # the latency program ran untraced and under nsys, on the trace's op sequence, with the program's flag
    costs = record.costs
    assert costs is not None and costs.traced is not None and costs.sched == "spin"  # ctx_flags 1 in the stand-in
    assert costs.untraced.seq.startswith("h2d:320000") and costs.untraced.sched == "spin"
    assert record.idle is not None and record.idle.profiler_us is not None
    doc = json.loads((plan.results_dir / "turns.untraced.json").read_text())
    assert doc["schema"] == "clusterbench.untraced-record" and doc["delay_test"]["binds"] == "host"
    env = json.loads((plan.results_dir / "env.json").read_text())
    assert env["unit"]["untraced"]["schema"] == "clusterbench.untraced-costs"
    assert "untraced" not in env  # one block per unit: the costs live in it
    assert env["configs"]["turns"]["analysis"]["untraced"]["split"]["traced_us"] == pytest.approx(split.traced_us)
    assert "what-binds" in env["configs"]["turns"]["phase_s"]
    # two processes at each of none, host, gpu0, gpu, link0, link and bare
    assert len(list(plan.results_dir.glob("turns.delay.*.log"))) == 14
    from clusterbench.render.untraced import render_untraced

    text = render_untraced("turns", record, 80)
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "host binds" in text and "untraced frame 20.00 µs/frame" in text
    # the same delays replayed on the program's real trace (the zoo's turns: the host's 30 µs spin and the GPU's
    # frame take turns, so an 8 µs delay of the GPU lands on the path every frame)
    assert [(s.resource, s.processes) for s in record.replay] == [("host", 0), ("gpu", 0), ("link", 0)]
    assert record.replay[1].verdict == "binds" and doc["replay"][1]["slope"] == pytest.approx(record.replay[1].slope)
    assert "the trace, the same delays replayed on it" in text
    # the device script's summary reads the dir back
    import shutil
    import subprocess

    out = tmp_path / "out"
    shutil.copytree(plan.results_dir, out / "results" / plan.results_dir.name)
    res = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[2] / "scripts" / "untraced_steps.py"),
                          "summary", str(out)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    table = (out / "summary.md").read_text()
    row_line = next(ln for ln in table.splitlines() if ln.startswith("| turns |"))
    cells = [c.strip() for c in row_line.strip("|").split("|")]
    assert cells[2] == "20.00" and cells[5] == "1.00" and cells[8] == "host" and cells[11] == "+0.5 %"
    assert "| gpu_latency |" in table and "- slope host: 1.00 ± 0.00 binds" in table


def test_what_binds_is_refused_where_it_cannot_mark_frames(edges, tmp_path: Path) -> None:
    from clusterbench.errors import ConfigError, InputError
    from clusterbench.run.config import ExecOptions

    req = _request(tmp_path)
    import dataclasses

    with pytest.raises(ConfigError, match="marks a frame at a call"):
        plan_probe(dataclasses.replace(req, frames=1000, measure=ExecOptions(rate=r"rate: ([0-9.]+)")))
    with pytest.raises(InputError, match="--delay-processes must be an integer from 2"):
        plan_probe(dataclasses.replace(req, delay_processes=1))
    with pytest.raises(InputError, match="--delay-us must be a number"):
        plan_probe(dataclasses.replace(req, delay_us=0.0))
    with pytest.raises(InputError, match="only --what-binds runs"):
        plan_probe(dataclasses.replace(req, what_binds=False))
    with pytest.raises(InputError, match="--what-binds runs on one GPU"):
        plan_probe(dataclasses.replace(req, gpus="all"))
    back = ProbeRequest.from_json(json.loads(json.dumps(req.to_json())))
    assert (back.what_binds, back.delay_processes, back.delay_us) == (True, 2, 8.0)


def test_the_callbacks_step_prices_each_mode_against_the_bare_runs() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("untraced_steps", Path(__file__).resolve().parents[2] / "scripts" / "untraced_steps.py")
    steps = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(steps)  # type: ignore[union-attr]
    got = steps.against_bare({"bare": [10.0, 12.0, 11.0], "every": [11.0, 13.2, 12.1], "none": [None, 11.0, 11.0],
                                "launch": [None, None, None]})  # fmt: skip
    assert got["bare"]["median_us"] == 11.0 and "cost" not in got["bare"]
    assert got["every"]["median_us"] == 12.1 and abs(got["every"]["cost"] - 0.1) < 1e-12  # 12.1 / 11 - 1
    assert got["none"]["n"] == 2 and got["none"]["cost"] == 0.0  # a failed process left out
    assert got["launch"]["median_us"] is None and got["launch"]["cost"] is None
    assert set(steps.CALLBACK_MODES) == {"bare", "every", "none", "launch", "sync"}


def test_the_steps_refuse_no_processes(tmp_path: Path) -> None:
    import subprocess

    script = Path(__file__).resolve().parents[2] / "scripts" / "untraced_steps.py"
    res = subprocess.run([sys.executable, str(script), "callbacks", str(tmp_path), str(tmp_path / "out"), "--processes", "0"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "--processes takes a count of 1 or more" in res.stderr
    assert not (tmp_path / "out").exists()  # refused before anything is made


def test_the_host_bar_counts_each_synchronize_at_the_units_idle_one(edges, tmp_path: Path, monkeypatch) -> None:
    """The stand-in makes one synchronize a frame of 3 µs, in its waits (its own time 17 of its 20 µs); the
    stand-in latency program's synchronize with nothing to wait for costs 1.5 µs: the bar is 17 + 1.5 µs."""
    monkeypatch.setenv("FAKE_SYNC_NS", "3000")
    monkeypatch.setenv("FAKE_IDLE_SYNC_NS", "1500")
    req = _request(tmp_path)
    plan = plan_probe(req)
    outcome = run_probe(plan, req, nsys=edges.nsys)
    require_no_failures(outcome)
    (row,) = outcome.rows
    assert row.untraced_frame_us == pytest.approx(20.0, abs=1e-3)
    assert row.untraced_host_us == pytest.approx(17.0 + 1.5, abs=1e-3) == row.host_untraced_us
    record = outcome.untraced["turns"]
    assert record.costs is not None and record.costs.untraced.idle_sync_ns == 1500.0
    (t,) = record.host.threads
    assert (t.busy_us, t.syncs, t.sync_us) == (pytest.approx(17.0, abs=1e-3), pytest.approx(1.0), pytest.approx(3.0))
    from clusterbench.render.untraced import render_untraced

    text = " ".join(render_untraced("turns", record, 80).split())
    assert "host bar 18.50 µs/frame" in text and "1.50 µs its synchronizes' own cost" in text
    assert "a synchronize with nothing to wait for 1.50 / 1.50 under nsys µs" in text  # both runs of the stand-in
