"""Tracer plumbing on the CPU: result parsing, logs, partial files, and trace_nsys against a fake nsys."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from clusterbench.errors import EnvironmentFailure, WorkloadProtocolError
from clusterbench.model.workload import WorkloadResult
from clusterbench.run.supervisor import ChildSpec, require_ok, run_child
from clusterbench.run.tracers import (
    TRACERS,
    NsysTracer,
    TracerSetup,
    WorkloadJob,
    discard_partials,
    partial_paths,
    read_result,
)
from clusterbench.model.params import WorkloadParams
from clusterbench.workloads.protocol import CommandWorkload, CupyWorkload
from protocol_programs import write_fake_nsys, write_program


def test_the_registry_holds_nsys_cupti_and_none() -> None:
    assert list(TRACERS) == ["nsys", "cupti", "none"]
    assert TRACERS["cupti"].check_workload(CupyWorkload()) is None
    problem = TRACERS["cupti"].check_workload(CommandWorkload(("prog",)))
    assert "cannot host it" in problem
    assert TRACERS["nsys"].check_workload(CommandWorkload(("prog",))) is None
    with pytest.raises(EnvironmentFailure, match="nsys not found"):
        NsysTracer(TracerSetup(nsys=None))


def test_a_failed_child_shows_the_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    code = 'import sys\nfor i in range(30): print("line", i)\nsys.exit(4)'
    outcome = run_child(ChildSpec((sys.executable, "-c", code), log, header="the child of this test"))
    assert (outcome.returncode, outcome.ok, outcome.timed_out, outcome.status_text) == (4, False, False,
                                                                                        "exit status 4")
    with pytest.raises(EnvironmentFailure) as err:
        require_ok(outcome, "the child")
    msg = str(err.value)
    assert msg.startswith("the child failed with exit status 4; last lines of x.log:\nline 15\n")
    assert "line 29" in msg and "line 14" not in msg  # the last 15 lines only
    assert err.value.hint == f"read the whole log: {log}"
    # the log: the header, the command line as a shell takes it back (the code single-quoted), the output
    assert log.read_text().startswith(f"# the child of this test\n$ {sys.executable} -c '{code}'\nline 0\n")


def test_discard_partials_removes_only_partial_files(tmp_path: Path) -> None:
    for p in partial_paths(tmp_path, "a")[:2]:
        p.write_text("half")
    (tmp_path / "a.sqlite").write_text("complete")
    removed = discard_partials(tmp_path, "a")
    assert sorted(p.name for p in removed) == ["a.partial.nsys-rep", "a.partial.sqlite"]
    assert [p.name for p in tmp_path.iterdir()] == ["a.sqlite"]


def _job(tmp_path: Path, behaviour: str = "ok", frames: int = 2000) -> WorkloadJob:
    prog = write_program(tmp_path / "prog", behaviour)
    template = ("{python}", prog.name, "--frames", "{frames}", "--result", "{result}", "--mode", "{mode}")
    return WorkloadJob("3x3_s1", WorkloadParams(frames=frames, batch=min(2000, frames)),
                       CommandWorkload(template, prog.parent), tmp_path / "res")


def test_trace_nsys_renames_complete_files_and_reports_phases(tmp_path: Path) -> None:
    nsys = write_fake_nsys(tmp_path)
    phases: list[str] = []
    run = NsysTracer(TracerSetup(nsys, "2025.3.2")).trace(_job(tmp_path), phases.append)
    out = tmp_path / "res"
    assert phases == ["trace", "export"]
    assert run.sqlite == out / "3x3_s1.sqlite" and run.sqlite.is_file()
    assert run.report == out / "3x3_s1.nsys-rep"
    # the toy program's one pass: 2000 frames in 2000 / 1000 s
    assert run.result.frames == 2000 and run.result.pass_s == (2.0,) and run.result.finder == "toy finder"
    assert not any(".partial" in p.name for p in out.iterdir())
    log = (out / "3x3_s1.nsys.log").read_text()
    assert "profile -t cuda,nvtx" in log and " export --type sqlite" in log and "--cuda-graph-trace=node" in log
    assert "toy finder: cluster" in log  # the program's own stderr lands in the log


def test_trace_nsys_failure_is_an_environment_failure_with_the_log(tmp_path: Path) -> None:
    nsys = write_fake_nsys(tmp_path)
    with pytest.raises(EnvironmentFailure, match="nsys profile of config '3x3_s1' failed with exit status 3") as err:
        NsysTracer(TracerSetup(nsys, "2025.3.2")).trace(_job(tmp_path, "crash"), lambda p: None)
    assert "CUDA error: out of memory" in str(err.value)
    assert not (tmp_path / "res" / "3x3_s1.sqlite").exists()


def _record(**changes) -> dict:
    doc = {"schema": "clusterbench.workload-result", "version": 2, "mode": "pass", "frames": 10,
           "pass_s": [0.5], "clusters_found": 70}
    doc.update(changes)
    return {k: v for k, v in doc.items() if v is not ...}


def test_result_record_round_trip() -> None:
    r = WorkloadResult(mode="sustained", frames=100, pass_s=(0.5, 0.25), clusters_found=9, clusters_dropped=0,
                       pedestal_s=1.5, finder="x", kernel_sha256={"a.cu": "ab"}, data_source="d.npy",
                       extra={"k": [1, 2]})
    assert WorkloadResult.from_json(json.loads(json.dumps(r.to_json()))) == r
    assert r.fps == (200.0, 400.0)  # 100 frames in 0.5 s and 0.25 s


@pytest.mark.parametrize("changes, text", [
    ({"frames": ...}, "missing field 'frames'"),
    ({"schema": "x"}, "field 'schema' must be 'clusterbench.workload-result'"),
    ({"version": 1}, "field 'version' is 1; this clusterbench reads version 2"),
    ({"pass_s": []}, "field 'pass_s' must list one or more"),
    ({"pass_s": [0.1, 0.2]}, "exactly one time in 'pass' mode"),
    ({"frames": 0}, "field 'frames' must be an integer >= 1"),
    ({"clusters_found": -1}, "field 'clusters_found' must be an integer >= 0"),
    ({"mode": "fast"}, "field 'mode' must be 'pass' or 'sustained'"),
    ({"fps": 3.0}, "unknown field 'fps'"),
])
def test_result_record_rejects_each_broken_field(changes, text) -> None:
    with pytest.raises(WorkloadProtocolError, match=re.escape(text)):
        WorkloadResult.from_json(_record(**changes))


def test_read_result_names_what_is_missing_with_the_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("$ prog\nprog: wrote nothing\n")
    with pytest.raises(WorkloadProtocolError, match="config 'a': the workload wrote no result record r.json") as err:
        read_result(tmp_path / "r.json", "a", log, "pass")
    assert "prog: wrote nothing" in str(err.value)
    (tmp_path / "r.json").write_text(json.dumps(_record()))
    with pytest.raises(WorkloadProtocolError, match="field 'mode' is 'pass', the probe asked for 'sustained'"):
        read_result(tmp_path / "r.json", "a", log, "sustained")
    assert read_result(tmp_path / "r.json", "a", log, "pass")[0].clusters_found == 70
