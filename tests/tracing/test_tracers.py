"""Tracer plumbing on the CPU: result parsing, logs, partial files, and trace_nsys against a fake nsys."""

from __future__ import annotations

import json
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from clusterbench.errors import EnvironmentFailure
from clusterbench.tracing.process import run_logged
from clusterbench.tracing.tracers import (
    discard_partials,
    partial_paths,
    read_pass_result,
    read_sustained,
    trace_nsys,
)


def test_sustained_median_spread_and_input_rate() -> None:
    s = read_sustained({"fps": [90_000.0, 100_000.0, 96_000.0], "median_fps": 1.0}, input_bytes_per_frame=320_000)
    assert s.median_fps == 96_000.0  # recomputed from the list, not trusted from the child
    assert s.spread_fps == 5_000.0  # (100000 - 90000) / 2
    assert s.repeats == 3
    assert s.input_gbps == pytest.approx(96_000 * 320_000 / 1e9)  # 30.72 GB/s
    assert read_sustained({"fps": [1.0]}).input_gbps is None


def test_sustained_without_values_is_an_environment_failure() -> None:
    with pytest.raises(EnvironmentFailure, match="no FPS values"):
        read_sustained({"fps": []})


def test_pass_result_fields() -> None:
    p = read_pass_result({"frames": 2000, "clusters_found": 260000, "clusters_dropped": 0, "wall_s": 0.03,
                          "fps": 66666.7, "kernel_sha256": "ab"})
    assert (p.frames, p.clusters_found, p.clusters_dropped, p.kernel_sha256) == (2000, 260000, 0, "ab")
    assert read_pass_result({"frames": "7"}).wall_s is None
    with pytest.raises(EnvironmentFailure, match="no frames count"):
        read_pass_result({"fps": 1.0})


def test_run_logged_failure_shows_the_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    code = "import sys\nfor i in range(30): print('line', i)\nsys.exit(4)"
    with pytest.raises(EnvironmentFailure) as err:
        run_logged([sys.executable, "-c", code], log, what="the child")
    msg = str(err.value)
    assert "the child failed with exit status 4" in msg
    assert "line 29" in msg and "line 10" not in msg  # the last 15 lines only
    assert log.read_text().startswith("$ ")


def test_discard_partials_removes_only_partial_files(tmp_path: Path) -> None:
    for p in partial_paths(tmp_path, "a")[:2]:
        p.write_text("half")
    (tmp_path / "a.sqlite").write_text("complete")
    removed = discard_partials(tmp_path, "a")
    assert sorted(p.name for p in removed) == ["a.partial.nsys-rep", "a.partial.sqlite"]
    assert [p.name for p in tmp_path.iterdir()] == ["a.sqlite"]


FAKE_NSYS = textwrap.dedent('''\
    #!{python}
    """A stand-in for nsys: 'profile' writes the report and the child's result; 'export' writes a trace."""
    import json, sys
    args = sys.argv[1:]
    out = args[args.index("-o") + 1]
    if args[0] == "profile":
        if "--fail" in args:
            print("nsys: CUDA driver not found", file=sys.stderr)
            sys.exit(1)
        open(out + ".nsys-rep", "w").write("rep")
        res = args[args.index("--result-json") + 1]
        params = json.loads(args[args.index("--params-json") + 1])
        json.dump({{"frames": params["frames"], "clusters_found": 10, "clusters_dropped": 0,
                   "wall_s": 0.5, "fps": 1.0, "kernel_sha256": "k"}}, open(res, "w"))
    elif args[0] == "export":
        from clusterbench.tracing.sqlite_writer import write_trace_sqlite
        write_trace_sqlite(out)
''')


@pytest.fixture
def fake_nsys(tmp_path: Path) -> Path:
    exe = tmp_path / "bin" / "nsys"
    exe.parent.mkdir()
    exe.write_text(FAKE_NSYS.format(python=sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_trace_nsys_renames_complete_files_and_reports_phases(tmp_path: Path, fake_nsys: Path) -> None:
    out = tmp_path / "res"
    phases: list[str] = []
    run = trace_nsys(fake_nsys, json.dumps({"frames": 2000}), out, "3x3_s1", phases.append)
    assert phases == ["trace", "export"]
    assert run.sqlite == out / "3x3_s1.sqlite" and run.sqlite.is_file()
    assert run.report == out / "3x3_s1.nsys-rep" and run.report.read_text() == "rep"
    assert run.passed.frames == 2000 and run.passed.wall_s == 0.5
    assert not any(".partial" in p.name for p in out.iterdir())
    log = (out / "3x3_s1.nsys.log").read_text()
    assert "profile -t cuda,nvtx" in log and " export --type sqlite" in log


def test_trace_nsys_failure_is_an_environment_failure_with_the_log(monkeypatch, tmp_path: Path,
                                                                   fake_nsys: Path) -> None:
    import clusterbench.tracing.tracers as tracers

    real = tracers.workload_command
    monkeypatch.setattr(tracers, "workload_command", lambda *a, **k: real(*a, **k) + ["--fail"])
    with pytest.raises(EnvironmentFailure, match="nsys profile failed with exit status 1") as err:
        trace_nsys(fake_nsys, json.dumps({"frames": 10}), tmp_path, "x")
    assert "CUDA driver not found" in str(err.value)
    assert not (tmp_path / "x.sqlite").exists()


def test_pass_result_keeps_the_kernel_hashes_as_a_mapping() -> None:
    # the workload child reports {file: sha256}; env.json must keep it as JSON, not as a Python repr
    p = read_pass_result({"frames": 10, "kernel_sha256": {"cluster_finder.cu": "1de3"}})
    assert p.kernel_sha256 == {"cluster_finder.cu": "1de3"}
