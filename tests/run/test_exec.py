"""A program probed as it is (workload "exec"): no NVTX ranges, no result record.

Only the outermost edges are stand-ins: NVML (tests/gpu_edges.py) and nsys (tests/exec_programs.py: it
runs the real program and leaves a real H200 export of the zoo, or one built in the test, as its trace).
The program is a real process whose output the probe reads. Expected values come from the zoo programs'
own ground truth (their ZOO lines) or are worked out by hand below.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import sys
from pathlib import Path

import pytest

from clusterbench.errors import ConfigError, EnvironmentFailure, InputError
from clusterbench.run.config import ExecOptions
from clusterbench.run.probe import ProbeRequest, plan_probe, require_no_failures, run_probe
from exec_programs import traces_env, write_fake_nsys, write_program
from fake_nsys import Copy, Kernel, Trace, build
from gpu_edges import FakeMachine

ZOO = Path(__file__).resolve().parents[1] / "data" / "zoo"


def zoo_truth(name: str) -> dict:
    """The ZOO ground-truth line of a zoo program's traced output."""
    line = next(ln for ln in (ZOO / f"zoo_{name}.stdout.txt").read_text().splitlines() if ln.startswith("ZOO "))
    return json.loads(line[4:])


def rows_of(results_dir: Path) -> dict[str, dict[str, str]]:
    with open(results_dir / "probes.csv", newline="") as fh:
        return {r["label"]: r for r in csv.DictReader(fh)}


class Edges(FakeMachine):
    def __init__(self, monkeypatch, tmp_path: Path, **traces: Path) -> None:
        super().__init__(monkeypatch, 1, versions={"nsys": "NVIDIA Nsight Systems version 2025.3.2.474"})
        self.nsys = write_fake_nsys(tmp_path)
        self.calls = tmp_path / "nsys_calls.jsonl"
        monkeypatch.setenv("FAKE_NSYS_TRACES", traces_env(**traces))
        monkeypatch.setenv("FAKE_NSYS_CALLS", str(self.calls))

    def nsys_calls(self) -> list[list[str]]:
        return [json.loads(ln) for ln in self.calls.read_text().splitlines()] if self.calls.exists() else []


def request(program: tuple[str, ...], results_root: Path, **kw) -> ProbeRequest:
    """A probe of a program as it is; the measuring options (rate=..., frames_spec=...) go to ExecOptions."""
    names = {f.name for f in dataclasses.fields(ExecOptions)}
    measure = ExecOptions(**{k: v for k, v in kw.items() if k in names})
    return ProbeRequest(program=program, results_root=results_root, argv=("clusterbench", "probe"), measure=measure,
                        **{k: v for k, v in kw.items() if k not in names})


def probe(tmp_path: Path, args: list[str], nsys: Path | None = None, **kw):
    prog = write_program(tmp_path / "prog")
    req = request((sys.executable, str(prog), *args), tmp_path / "results", **kw)
    plan = plan_probe(req)
    return plan, run_probe(plan, req, nsys=nsys)


# ----------------------------------------------------------------------------- --tracer none: the program's rate


def test_an_exec_program_under_tracer_none_gives_its_own_rate(monkeypatch, tmp_path: Path) -> None:
    FakeMachine(monkeypatch, 1)
    counter = tmp_path / "runs"
    plan, outcome = probe(tmp_path, ["--rates", f"1000,3000,2000:{counter}"], tracer="none",
                          rate=r"rate: ([0-9.]+)", label="toy", processes=3)
    require_no_failures(outcome)
    (row,) = outcome.rows
    # each untraced run is a fresh process; they print 1000, 3000, 2000, 1000, 3000 frames/s: the last three never
    # agree within 2 %, so after 3 + 2 runs (the cap for a program run whole) the last three count: 2000, 1000, 3000,
    # three processes of one figure each
    assert row.sustained_fps == 2000.0 and row.sustained_fps_spread == 1000.0 and row.sustained_repeats == 3
    assert row.sustained_source == "rate" and row.workload == "exec" and row.tracer == "none"
    assert row.kernel_us is None and row.cluster is None and row.streams is None and row.error is None
    assert (row.sustained_steady, row.sustained_warmups) == (False, 2) and row.sustained_warmup_s > 0
    assert plan.results_dir.name.endswith("_exec")
    m = row.measurements[0]
    assert m.samples == (2000.0, 1000.0, 3000.0) and m.metadata["source"] == "rate"
    assert row.sustained_processes == 3 and [p["values"] for p in m.metadata["processes"]] == [[2000.0], [1000.0],
                                                                                                [3000.0]]
    runs = m.metadata["steady"]["runs"]
    assert [r["value"] for r in runs] == [1000.0, 3000.0, 2000.0, 1000.0, 3000.0]
    assert runs[0]["meta"] == {"line": "rate: 1000 frames/s", "value": 1000.0, "unit": "frames/s"}
    assert m.metadata["steady"]["reason"] == "max_runs"
    assert any("toy: its sustained FPS did not reach a steady state: its last 3 runs spread 100.0 % of their "
               "median, more than the 2.0 % allowed, after 5 runs (the cap)" in w for w in outcome.warnings)
    env = json.loads((plan.results_dir / "env.json").read_text())
    assert env["configs"]["toy"]["sustained"]["source"] == "rate"
    assert env["configs"]["toy"]["workload"] == "exec" and env["workloads"] == "exec"
    assert rows_of(plan.results_dir)["toy"]["sustained_source"] == "rate"


@pytest.mark.parametrize("printed, unit, metric, value", [
    ("0.5 ms/frame", None, "sustained_fps", 2000.0),  # 1000 / 0.5 ms
    ("250 us/frame", None, "sustained_fps", 4000.0),  # 10^6 / 250 µs
    ("12.5", "GB/s", "sustained_gbps", 12.5),  # GB/s stays GB/s: no frame size to turn it into frames
    ("80 Hz", None, "sustained_fps", 80.0),
    ("71.87 kHz", None, "sustained_fps", 71_870.0),  # the LCLS DAQ's line: 71.87 x 1000
    ("1.5 k frames/s", None, "sustained_fps", 1_500.0),
    ("420 MB/s", None, "sustained_gbps", 0.42),  # 420 x 10^6 B/s
    ("2", "GiB/s", "sustained_gbps", 2.147483648),  # 2 x 2^30 B/s
])
def test_each_rate_unit(monkeypatch, tmp_path: Path, printed: str, unit, metric: str, value: float) -> None:
    FakeMachine(monkeypatch, 1)
    out = tmp_path / "untraced.txt"
    out.write_text(f"rate: {printed}\n")
    _plan, outcome = probe(tmp_path, ["--untraced", str(out)], tracer="none", rate=r"rate: ([0-9.]+)",
                           rate_unit=unit, processes=1)
    require_no_failures(outcome)
    (row,) = outcome.rows
    assert row.measurements[0].metric == metric and row.measurements[0].samples == (value,)
    assert (row.sustained_fps if metric == "sustained_fps" else row.sustained_gbps) == value


def test_wall_between_markers_and_over_the_whole_run(monkeypatch, tmp_path: Path) -> None:
    FakeMachine(monkeypatch, 1)
    # 100 frames over the 0.3 s between 'loop start' and 'loop end': about 333 FPS
    _plan, outcome = probe(tmp_path, ["--marked-sleep", "0.3"], tracer="none", sustained="wall", frames=100,
                           wall_start="^loop start", wall_end="^loop end", processes=2, label="marked")
    require_no_failures(outcome)
    (row,) = outcome.rows
    assert row.sustained_source == "wall" and 100 / 0.45 < row.sustained_fps <= 100 / 0.3
    # over the whole run: the start-up (the interpreter) is in it, so it reads lower than between the markers
    _plan, outcome = probe(tmp_path, ["--marked-sleep", "0.3"], tracer="none", sustained="wall", frames=100,
                           processes=1, label="whole")
    (row,) = outcome.rows
    assert row.sustained_source == "wall-run" and row.sustained_fps < 100 / 0.3
    assert row.measurements[0].metadata["includes"] == "the whole run, start-up included"


def test_a_rate_the_output_lacks_fails_the_config_naming_the_regex(monkeypatch, tmp_path: Path) -> None:
    FakeMachine(monkeypatch, 1)
    plan, outcome = probe(tmp_path, [], tracer="none", rate=r"throughput: ([0-9.]+)", processes=1, label="quiet")
    (failure,) = outcome.failures
    assert "no line of its output matches --rate 'throughput: ([0-9.]+)'" in failure.message
    assert "toy program: starting" in failure.message  # the program's output tail
    assert rows_of(plan.results_dir)["quiet"]["error"].startswith("sustained: ")
    with pytest.raises(EnvironmentFailure):
        require_no_failures(outcome)


# ----------------------------------------------------------------------------- traced: the zoo as it is


def _stdout(tmp_path: Path, name: str, untraced: bool = False) -> Path:
    """The program's own lines of a zoo output (nsys's progress lines left out)."""
    src = ZOO / f"zoo_{name}{'.untraced' if untraced else ''}.stdout.txt"
    out = tmp_path / src.name
    out.write_text("".join(ln for ln in src.read_text().splitlines(keepends=True)
                           if ln.startswith(("rate:", "throughput:", "ZOO "))))
    return out


def test_a_zoo_program_as_it_is_gives_frames_bars_and_its_rate_agrees(monkeypatch, tmp_path: Path) -> None:
    edges = Edges(monkeypatch, tmp_path, default=ZOO / "zoo_multi_kernel.sqlite")
    truth = zoo_truth("multi_kernel")
    plan, outcome = probe(tmp_path, ["--traced", str(_stdout(tmp_path, "multi_kernel")),
                                     "--untraced", str(_stdout(tmp_path, "multi_kernel", True))],
                          nsys=edges.nsys, label="multi_kernel", frames_spec="kernel:zoo_calib",
                          rate=r"rate: ([0-9.]+)", repeat=1)
    require_no_failures(outcome)
    (row,) = outcome.rows
    # frames from its kernel launches: the 600 frames of its loop and its one warm-up frame
    assert row.frames == truth["frames"] + truth["warmup_launches"]["zoo_calib"] == 601
    assert row.h2d_us is not None and row.kernel_us is not None and row.binds is not None
    assert row.processes == 1 and row.trace == "multi_kernel.sqlite" and row.sustained_source == "rate"
    untraced = zoo_truth_from(tmp_path / "zoo_multi_kernel.untraced.stdout.txt")
    assert row.sustained_fps == pytest.approx(untraced["reported"]["rate"], rel=1e-5)  # as printed, 0.1 frames/s
    # the program's own traced rate against the trace: its loop of 600 frames in loop_s seconds, the window's
    # 601 frames over about that time: within a per cent or two, so they agree
    (check,) = outcome.checks["multi_kernel"]
    assert check.status == "agree" and check.reason == "within_tolerance" and row.rate_check == "agree"
    assert check.program == pytest.approx(truth["reported"]["rate"], rel=1e-5)
    assert check.trace == pytest.approx(truth["true_rate"], rel=0.02)
    assert check.profiler_overhead == pytest.approx(untraced["reported"]["rate"] / truth["reported"]["rate"], rel=1e-4)
    assert "the program's own rate agrees with the trace" in check.message
    # one nsys run: profile with the export at its end, node-level graphs, the program as given
    (call,) = edges.nsys_calls()
    assert call[0] == "profile" and "--export=sqlite" in call and "--cuda-graph-trace=node" in call
    assert call[-2:] == ["--untraced", str(tmp_path / "zoo_multi_kernel.untraced.stdout.txt")]
    env = json.loads((plan.results_dir / "env.json").read_text())["configs"]["multi_kernel"]
    assert env["analysis"]["frames"]["frames_definition"] == "kernel:zoo_calib"
    assert env["checks"]["rate"]["status"] == "agree" and set(env["phase_s"]) >= {"trace", "analyze", "sustained"}


def zoo_truth_from(path: Path) -> dict:
    line = next(ln for ln in path.read_text().splitlines() if ln.startswith("ZOO "))
    return json.loads(line[4:])


def test_a_wrong_self_reported_rate_is_flagged_against_the_trace(monkeypatch, tmp_path: Path) -> None:
    """multi_kernel --rate-bug prints 10x its true H2D GB/s: the check says so, with both figures."""
    edges = Edges(monkeypatch, tmp_path, default=ZOO / "zoo_multi_kernel_ratebug.sqlite")
    truth = zoo_truth("multi_kernel_ratebug")
    assert truth["rate_bug"] is True and truth["rate_bug_factor"] == 10
    warnings: list[str] = []
    prog = write_program(tmp_path / "prog")
    req = request((sys.executable, str(prog), "--traced", str(_stdout(tmp_path, "multi_kernel_ratebug"))),
                  tmp_path / "results", label="ratebug", frames_spec="kernel:zoo_calib", rate=r"throughput: ([0-9.]+)",
                  sustained="trace")
    outcome = run_probe(plan_probe(req), req, on_event=lambda e: warnings.append(e.message or ""), nsys=edges.nsys)
    require_no_failures(outcome)
    (row,) = outcome.rows
    (check,) = outcome.checks["ratebug"]
    assert check.status == "disagree" and check.reason == "program_higher" and check.unit == "GB/s"
    assert check.program == pytest.approx(truth["reported"]["throughput_gbps"], rel=1e-5)
    assert check.trace == pytest.approx(truth["true_throughput_gbps"], rel=0.02)  # what its loop really moved
    assert 9.5 < check.ratio < 10.5
    # the message states both figures (the program's as printed; the trace's as measured, checked above)
    assert check.message.startswith(f"the program reports {truth['reported']['throughput_gbps']:.2f} GB/s; "
                                    f"the trace moved {check.trace:.2f} GB/s of H2D over its window")
    assert any(f"the program reports {truth['reported']['throughput_gbps']:.2f} GB/s" in w for w in warnings)  # said while the probe runs, too
    assert row.rate_check == "disagree"
    # the sustained figure from the trace: frames over the window, under the profiler
    assert row.sustained_source == "trace" and row.profiler_overhead is None
    assert row.sustained_fps == pytest.approx(truth["true_rate"], rel=0.02)


def test_device_launched_graphs_are_traced_again_at_graph_level(monkeypatch, tmp_path: Path) -> None:
    """At node level nsys 2025.3 leaves a device-launched graph's work out; at graph level each execution is a row."""
    edges = Edges(monkeypatch, tmp_path, node=ZOO / "zoo_device_graph_node.sqlite",
                  graph=ZOO / "zoo_device_graph_graph.sqlite")
    truth = zoo_truth("device_graph_graph")
    warnings: list[str] = []
    prog = write_program(tmp_path / "prog")
    req = request((sys.executable, str(prog), "--traced", str(_stdout(tmp_path, "device_graph_graph"))),
                  tmp_path / "results", label="dgraph", frames_spec="graph", rate=r"rate: ([0-9.]+)", sustained="trace")
    plan = plan_probe(req)
    outcome = run_probe(plan, req, on_event=lambda e: warnings.append(e.message or ""), nsys=edges.nsys)
    require_no_failures(outcome)
    (row,) = outcome.rows
    calls = edges.nsys_calls()
    assert ["--cuda-graph-trace=node" in c for c in calls] == [True, False]  # node level first, then graph level
    assert row.trace == "dgraph.graph.sqlite" and row.frames == truth["events"] == 2000
    assert row.binds == "graph" and row.sustained_fps == pytest.approx(truth["true_rate"], rel=0.02)
    assert (plan.results_dir / "dgraph.sqlite").is_file() and (plan.results_dir / "dgraph.graph.sqlite").is_file()
    assert any("Tracing it again at graph level" in w for w in warnings)
    assert any("used the graph-level trace dgraph.graph.sqlite" in w for w in warnings)
    analysis = json.loads((plan.results_dir / "env.json").read_text())["configs"]["dgraph"]["analysis"]
    assert analysis["graph_trace"] == "graph" and "left the GPU's work out" in analysis["graph_trace_reason"]
    assert outcome.checks["dgraph"][0].status == "agree"


def test_a_host_launched_graph_stays_at_node_level(monkeypatch, tmp_path: Path) -> None:
    edges = Edges(monkeypatch, tmp_path, node=ZOO / "zoo_device_graph_host_node.sqlite",
                  graph=ZOO / "zoo_device_graph_host_graph.sqlite")
    _plan, outcome = probe(tmp_path, [], nsys=edges.nsys, label="hgraph", frames_spec="kernel:zoo_calib",
                           sustained="trace")
    require_no_failures(outcome)
    assert len(edges.nsys_calls()) == 1 and outcome.rows[0].trace == "hgraph.sqlite"
    assert outcome.rows[0].frames == zoo_truth("device_graph_host_node")["events"]


# ----------------------------------------------------------------------------- built traces: by hand


def _calib_trace(path: Path, pids: tuple[int, ...] = (100,), frames: int = 100) -> Path:
    """Per frame and process: an H2D of 100 kB (2 µs), then the kernel 'calib' (3 µs), 10 µs apart."""
    t = Trace()
    for pid in pids:
        for i in range(frames):
            t0 = 1_000_000 + 10_000 * i
            t.copies.append(Copy(t0, t0 + 2_000, kind=1, bytes=100_000, pid=pid))
            t.kernels.append(Kernel(t0 + 2_000, t0 + 5_000, pid=pid, name="calib"))
    return build(path, t)  # no CUDA API rows: the host's side is unknown, the GPU engines are the bars


@pytest.mark.parametrize("printed, status, reason", [
    ("kernel: 3.1 us/frame", "agree", "within_tolerance"),
    ("kernel: 0.0045 ms/frame", "disagree", "events_longer"),  # 4.5 µs against the 3 µs bar
    ("kernel: 1.5 us/frame", "disagree", "events_shorter"),
])
def test_a_printed_kernel_time_is_set_against_the_kernel_bar(monkeypatch, tmp_path: Path, printed, status,
                                                              reason) -> None:
    edges = Edges(monkeypatch, tmp_path, default=_calib_trace(tmp_path / "calib.sqlite"))
    traced = tmp_path / "traced.txt"
    traced.write_text(printed + "\n")
    _plan, outcome = probe(tmp_path, ["--traced", str(traced)], nsys=edges.nsys, label="k",
                           frames_spec="kernel:calib", kernel_time=r"kernel: ([0-9.]+)", sustained="trace")
    (row,) = outcome.rows
    assert row.kernel_us == pytest.approx(3.0)  # 100 launches of 3 µs over 100 frames
    (check,) = outcome.checks["k"]
    assert (check.status, check.reason, row.kernel_check) == (status, reason, status)
    assert check.trace == pytest.approx(3.0)
    if reason == "events_longer":
        assert "believe the kernel bar" in check.message and "waited" in check.message


def test_every_process_is_analyzed_and_the_row_adds_them_up(monkeypatch, tmp_path: Path) -> None:
    edges = Edges(monkeypatch, tmp_path, default=_calib_trace(tmp_path / "ranks.sqlite", pids=(100, 200)))
    _plan, outcome = probe(tmp_path, [], nsys=edges.nsys, label="ranks", frames_spec="kernel:calib",
                           sustained="trace")
    require_no_failures(outcome)
    (row,) = outcome.rows
    # two ranks side by side, each 100 frames of a 3 µs kernel and a 2 µs H2D of 100 kB
    assert row.processes == 2 and row.frames == 200
    assert row.kernel_us == pytest.approx(3.0) and row.h2d_us == pytest.approx(2.0)
    assert row.h2d_gbps == pytest.approx(100_000 / 2_000)  # 50 GB/s
    assert row.serial_us == pytest.approx(5.0)  # kernel + H2D: they take turns on each rank
    # each rank's own roofline FPS, added: the kernel binds each at 3 µs per frame
    assert row.binds == "kernel" and row.roofline_fps == pytest.approx(2 * 1e6 / 3.0)


# ----------------------------------------------------------------------------- a program that hangs


def test_a_hanging_program_is_stopped_its_row_failed_and_the_others_go_on(monkeypatch, tmp_path: Path) -> None:
    FakeMachine(monkeypatch, 1)
    prog = write_program(tmp_path / "prog")
    config = tmp_path / "c.toml"
    config.write_text(f'''
[defaults]
workload = "exec"
rate = 'rate: ([0-9.]+)'

[[config]]
label = "hangs"
command = ["{{python}}", "{prog}", "--sleep", "60"]

[[config]]
label = "fine"
command = ["{{python}}", "{prog}", "--streams", "{{streams}}"]
streams = 2
''')
    req = ProbeRequest(config_path=config, tracer="none", repeat=1, timeout_s=1.0, results_root=tmp_path / "r")
    plan = plan_probe(req)
    outcome = run_probe(plan, req)
    (failure,) = outcome.failures
    assert failure.label == "hangs" and failure.phase == "sustained"
    assert "was still running at its time limit of 1 s: its process group was ended" in failure.message
    assert "toy program: working" in failure.message  # its output's last lines
    rows = rows_of(plan.results_dir)
    assert rows["hangs"]["error"].startswith("sustained: the sustained-FPS run of config 'hangs' (run 1) on GPU 0 was still "
                                             "running at its time limit of 1 s")
    assert float(rows["fine"]["sustained_fps"]) == 2000.0 and rows["fine"]["error"] == ""  # the next one ran
    assert rows["fine"]["streams"] == "2"  # a placeholder value the config gives
    env = json.loads((plan.results_dir / "env.json").read_text())["configs"]["hangs"]["error"]
    assert env["phase"] == "sustained" and "toy program: working" in env["tail"]


def test_a_hanging_traced_run_is_stopped_too(monkeypatch, tmp_path: Path) -> None:
    edges = Edges(monkeypatch, tmp_path, default=_calib_trace(tmp_path / "calib.sqlite"))
    plan, outcome = probe(tmp_path, ["--sleep", "60"], nsys=edges.nsys, label="hangs", timeout_s=1.0,
                          frames_spec="kernel:calib")
    (failure,) = outcome.failures
    assert failure.phase == "trace" and "time limit of 1 s" in failure.message
    assert "--timeout 1 s" in failure.error.hint
    assert rows_of(plan.results_dir)["hangs"]["error"].startswith("trace: nsys profile of config 'hangs' was still")


# ----------------------------------------------------------------------------- scans


def test_a_scan_runs_each_point_with_its_value(monkeypatch, tmp_path: Path) -> None:
    FakeMachine(monkeypatch, 1)
    plan, outcome = probe(tmp_path, ["--streams", "{streams}"], tracer="none", rate=r"rate: ([0-9.]+)", repeat=1,
                          label="mk", scan=("streams=1,2,4",))
    require_no_failures(outcome)
    assert [c.label for c in plan.configs] == ["mk.streams1", "mk.streams2", "mk.streams4"]
    # the program prints 1000 x streams frames/s: each point got its own value
    assert [r.sustained_fps for r in outcome.rows] == [1000.0, 2000.0, 4000.0]
    assert [r.streams for r in outcome.rows] == [1, 2, 4]


def test_a_scan_of_a_placeholder_the_command_lacks_is_refused(monkeypatch, tmp_path: Path) -> None:
    prog = write_program(tmp_path / "prog")
    req = request((sys.executable, str(prog), "--streams", "{streams}"), tmp_path / "r", tracer="none",
                  rate="rate: ([0-9.]+)", scan=("streams=1,2", "batch=200,2000"))
    with pytest.raises(ConfigError, match=r"--scan batch: config 'toy_exec.py' runs .* which never uses \{batch\}"):
        plan_probe(req)
    with pytest.raises(InputError, match="--scan 'strems=1,2': 'strems' is not a placeholder \\(did you mean 'streams'"):
        plan_probe(dataclasses.replace(req, scan=("strems=1,2",)))


def test_aares_event_kernel_time_against_its_kernel_bar_on_the_h200() -> None:
    """probes/aare_cuda.py's result records on the H200 (2026-12-01) carry aare's own kernel time per frame
    from its CUDA events; the trace's kernel bar of the same pass is in probes.csv. At 3x3 on one stream
    aare's events read 9.60 µs/frame against a 3.62 µs bar: 2.65x, so the check says believe the bar."""
    from clusterbench.run.checks import check_kernel_time

    d = Path(__file__).resolve().parents[2] / "results" / "2026-12-01_f32_aare-cuda"
    record = json.loads((d / "3x3_s1_uncontended.pass.json").read_text())
    events_us = record["extra"]["avg_kernel_us_per_frame_cuda_events"]  # the key's name in that version
    bar_us = float(rows_of(d)["3x3_s1_uncontended"]["kernel_us"])
    assert round(events_us, 2) == 9.60 and round(bar_us, 2) == 3.62
    check = check_kernel_time(events_us, "its result record's extra.kernel_us_per_frame", bar_us)
    assert (check.status, check.reason) == ("disagree", "events_longer")
    assert check.ratio == pytest.approx(9.5966 / 3.6189, rel=1e-3)
    assert "believe the kernel bar" in check.message


def test_only_picks_points_of_a_scan_as_a_campaign_task_does(tmp_path: Path) -> None:
    prog = write_program(tmp_path / "prog")
    req = request((sys.executable, str(prog), "--streams", "{streams}"), tmp_path / "r", tracer="none",
                  rate="rate: ([0-9.]+)", scan=("streams=1,2,4",), label="mk")
    assert [c.label for c in plan_probe(req).configs] == ["mk.streams1", "mk.streams2", "mk.streams4"]
    task = dataclasses.replace(req, only=("mk.streams2",))  # what a campaign's task for one point asks
    assert [c.label for c in plan_probe(task).configs] == ["mk.streams2"]
    assert len(plan_probe(dataclasses.replace(req, only=("mk",))).configs) == 3
    with pytest.raises(ConfigError, match="--only 'mk.streams3': no point of the scan has that label"):
        plan_probe(dataclasses.replace(req, only=("mk.streams3",)))
    with pytest.raises(InputError, match="--only picks configs of configs.toml"):
        plan_probe(dataclasses.replace(req, only=("other",)))


def test_verify_probes_reads_a_program_as_it_is_the_way_its_row_was_made(monkeypatch, tmp_path: Path) -> None:
    import subprocess

    edges = Edges(monkeypatch, tmp_path, default=ZOO / "zoo_nvtx_domain.sqlite")
    plan, outcome = probe(tmp_path, [], nsys=edges.nsys, label="daq", frames_spec="kernel:zoo_calib",
                          window="range:event loop@zoo_daq", sustained="trace")
    require_no_failures(outcome)
    assert outcome.rows[0].frames == zoo_truth("nvtx_domain")["frames"]  # 1,000 launches inside 'event loop'
    script = Path(__file__).resolve().parents[2] / "scripts" / "verify_probes.py"
    res = subprocess.run([sys.executable, str(script), str(plan.results_dir)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "verify_probes: 1 rows, 0 mismatches" in res.stdout
