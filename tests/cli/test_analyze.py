"""clusterbench analyze through the CLI: output formats, exit codes, one-line errors."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli_output import messages
from clusterbench.cli import app

from fake_nsys import Copy, Kernel, Range, Trace, build  # noqa: E402

REAL = Path(__file__).resolve().parents[1] / "data" / "h200" / "dev_5x5_s2_b500.sqlite"


def run(*args: str):
    return CliRunner().invoke(app, ["analyze", *args])


def test_table_on_the_bundled_trace() -> None:
    res = run(str(REAL))
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "GPU: NVIDIA H200 (device 0), process 462" in out
    assert "window: 202.403 ms from NVTX range 'pass frames=10000'" in out
    assert "frames: 10,000 (from NVTX range text 'pass frames=10000')" in out
    # the engines take turns there: the critical path's sum binds, the tallest bar is named beside it
    flat = " ".join(out.split())
    assert "binds: the sum of the critical path, 12.174 µs/frame → 82,144 FPS" in flat
    assert "the tallest bar is h2d at 5.792 µs/frame → 172,650 FPS" in flat
    for unit in ("ms", "µs", "GB/s", "%"):
        assert unit in out
    assert "host sync in cudaDeviceSynchronize, cudaStreamSynchronize" in out
    assert "why:" in out and "engines take turns" in out


def test_json_output_is_only_json() -> None:
    res = run(str(REAL), "--json")
    assert res.exit_code == 0
    js = json.loads(res.stdout)
    assert js["frames"] == 10000 and js["roofline"]["engine"] == "h2d"
    assert js["engines"]["h2d"]["bytes"] == 3_200_000_000  # 20 copies of 160 MB inside the pass range


def test_csv_output(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(0, 10, stream=1), Kernel(5, 20, stream=2)], copies=[Copy(20, 30, 1, 100, stream=1)])
    res = run(str(build(tmp_path / "c.sqlite", t)), "4", "--csv", "--by-stream")
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    whole = {r["engine"]: r for r in rows if r["stream"] == ""}
    assert whole["kernel"]["busy_ns"] == "20" and whole["kernel"]["us_per_frame"] == "0.005"
    assert whole["h2d"]["gbps"] == "10" and whole["any"]["busy_ns"] == "30"
    per_stream = {(r["stream"], r["engine"]): r["busy_ns"] for r in rows if r["stream"]}
    assert per_stream == {("1", "kernel"): "10", ("2", "kernel"): "15", ("1", "h2d"): "10"}


def test_frames_argument_and_range_option(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(0, 100)], ranges=[Range(0, 40, "warm"), Range(40, 100, "pass frames=3")])
    p = str(build(tmp_path / "r.sqlite", t))
    js = json.loads(run(p, "--range", "warm", "8", "--json").stdout)
    assert (js["window_ns"], js["frames"], js["frames_source"]) == (40, 8, "FRAMES argument")
    assert js["engines"]["kernel"]["us_per_frame"] == pytest.approx(40 / 1000 / 8)


def test_several_groups_warn_on_stderr(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(0, 10, pid=1), Kernel(0, 30, pid=2)])
    res = run(str(build(tmp_path / "g.sqlite", t)), "--json")
    assert res.exit_code == 0
    js = json.loads(res.stdout)
    assert js["pid"] == 2 and len(js["groups"]) == 2
    assert "Warning:" in res.stderr and "2 (process, device) groups" in res.stderr
    assert json.loads(run(str(tmp_path / "g.sqlite"), "--pid", "1", "--json").stdout)["engines"]["kernel"]["busy_ns"] == 10


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: d / "missing.sqlite", "trace not found"),
        (lambda d: d, "is a directory"),
        (lambda d: _write(d / "empty.sqlite", b""), "empty file"),
        (lambda d: _write(d / "t.sqlite", b"hello, not a database\n"), "not an SQLite database"),
        (lambda d: _write(d / "cut.sqlite", REAL.read_bytes()[:100_000]), "truncated"),
        (lambda d: build(d / "cpu.sqlite", Trace(ranges=[Range(0, 1, "x")])), "no GPU activity"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, make, message: str) -> None:
    res = run(str(make(tmp_path)), "--json")
    assert res.exit_code == 2
    assert res.stdout == ""
    lines = messages(res.stderr)
    assert lines[0].startswith("Error: ") and message in lines[0]
    assert lines[1].startswith("Hint: ") and len(lines) == 2
    assert "Traceback" not in res.stderr


def test_json_and_csv_together_is_a_usage_error() -> None:
    res = run(str(REAL), "--json", "--csv")
    assert res.exit_code == 2 and "cannot be combined" in res.stderr


def test_help_documents_exit_codes() -> None:
    res = CliRunner().invoke(app, ["analyze", "--help"])
    assert res.exit_code == 0
    for word in ("--range", "--by-stream", "--json", "--csv", "--device", "--pid", "Exit codes"):
        assert word in res.stdout


def test_analysis_imports_no_cli_or_gpu_libraries() -> None:
    code = (
        "import sys, clusterbench.analyzers as a, clusterbench.io.nsys\n"
        "a.analyze_trace\n"
        "bad = [m for m in ('typer', 'rich', 'cupy') if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_nsys_rep_without_nsys_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clusterbench.io.nsys import export as nsys_export

    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv(nsys_export.NSYS_ENV, raising=False)
    monkeypatch.setattr(nsys_export, "NSYS_GLOBS", ())
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"report")
    res = run(str(rep))
    assert res.exit_code == 2
    assert "nsys was not found" in res.stderr and "Hint: " in res.stderr and "nsys export --type sqlite" in res.stderr


# --------------------------------------------------------------------------- 80 columns, help, graphs, what-if

H200_DIR = REAL.parent
GRAPH = H200_DIR / "tracking_3x3_s1_b500_f2000_graph.sqlite"


@pytest.mark.parametrize("trace", sorted(H200_DIR.glob("*.sqlite")), ids=lambda p: p.name)
def test_table_fits_80_columns_when_piped(trace: Path) -> None:
    res = CliRunner().invoke(app, ["analyze", str(trace), "--by-stream", "--by-kernel", "--what-if", "h2d_gbps=375"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 80, max(lines, key=len)
    assert all(ln == ln.rstrip() for ln in lines)  # piped: no padding at line ends
    wide = CliRunner().invoke(app, ["analyze", str(trace)], env={"COLUMNS": "120"})
    assert max(len(ln) for ln in wide.stdout.splitlines()) > 80  # prose uses the width COLUMNS gives


def test_prose_wraps_at_word_boundaries() -> None:
    res = CliRunner().invoke(app, ["analyze", str(REAL)], env={"COLUMNS": "60"})
    words = set(" ".join(res.stdout.split()).split(" "))
    notes = " ".join(CliRunner().invoke(app, ["analyze", str(REAL)], env={"COLUMNS": "200"}).stdout.split())
    for w in ("pipeline's", "roofline.", "cudaDeviceSynchronize,", "(cuModuleLoadData;"):
        assert w in words and w in notes  # no word is cut in two by the wrap


@pytest.mark.parametrize("command", ["analyze", "probe", "compare", "guard"])
def test_help_shows_no_bool_metavar(command: str) -> None:
    res = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "80"})
    assert res.exit_code == 0
    assert "<bool>" not in res.stdout and "--help" in res.stdout


def test_graph_warning_shown_once_in_the_table() -> None:
    res = run(str(GRAPH))
    assert res.exit_code == 0
    assert res.stdout.count("Warning: graph-level CUDA graph trace") == 1
    assert "cuda-graph-trace" not in res.stderr  # not repeated on stderr
    assert "[graph_level]" in res.stdout and "the tallest bar is graph at" in " ".join(res.stdout.split())
    js = json.loads(run(str(GRAPH), "--json").stdout)
    assert sum("cuda-graph-trace=node" in w for w in js["warnings"]) == 1
    assert js["roofline"]["engine"] == "graph" and js["version"] == 4


def test_what_if_in_table_and_json() -> None:
    res = run(str(REAL), "--what-if", "h2d_gbps=375", "--what-if", "d2h_gbps=375")
    assert res.exit_code == 0, res.output
    assert "what if h2d at 375 GB/s, d2h at 375 GB/s: would bind on kernel" in " ".join(res.stdout.split())
    assert "assumption: engines scale independently" in res.stdout
    js = json.loads(run(str(REAL), "--what-if", "kernel=2", "--json").stdout)["what_if"]
    assert js["changes"] == [{"engine": "kernel", "factor": 2.0, "gbps": None}]
    assert js["engines"]["kernel"]["new_busy_ns"] == 2 * js["engines"]["kernel"]["busy_ns"]
    bad = run(str(REAL), "--what-if", "warp=2")
    assert bad.exit_code == 2 and bad.stderr.startswith("Error: --what-if 'warp=2': unknown engine") and bad.stdout == ""


# --------------------------------------------------------------------------- windows, frames, gaps, host, export

DEV_7X7 = H200_DIR / "dev_7x7_s3_b250_async.sqlite"


def test_make_run_names_the_module_load_gap_and_advises_no_starvation() -> None:
    for trace in (REAL, DEV_7X7):
        res = CliRunner().invoke(app, ["analyze", str(trace)], env={"COLUMNS": "80"})
        assert res.exit_code == 0, res.output
        text = " ".join(res.stdout.split())
        assert "longest gap:" in text and "the host loaded GPU code (cuModuleLoadData;" in text
        assert "[setup_gaps]" in text and "without set-up gaps:" in text
        assert "[gpu_starvation]" not in text and "[low_utilization]" not in text and "starves" not in text


def test_json_version_3_keys() -> None:
    js = json.loads(run(str(REAL), "--json").stdout)
    assert js["version"] == 4
    for key in ("window", "frames_definition", "gaps", "gap_summary", "steady", "kernels", "copies", "host", "pacing", "work_not_traced"):
        assert key in js, key
    gap = js["gaps"][0]
    assert set(gap) == {"start_ns", "length_ns", "cause", "api", "setup", "between_threads", "parts_ns"}
    assert js["window"]["mode"] == "pass-range" and js["frames_definition"] == "range-text"
    assert [k["name"] for k in js["kernels"]] == ["scan"] and js["kernels"][0]["launches"] == 20
    assert js["host"]["threads"][0]["tid"] == 462 and js["host"]["threads"][0]["name"] == "python3"
    assert js["pacing"]["events"] == 20 and js["pacing"]["frames_per_event"] == 500


def test_window_and_frames_options(tmp_path: Path) -> None:
    js = json.loads(run(str(REAL), "--window", "span", "--frames", "kernel:^scan$", "--json").stdout)
    assert js["window"]["mode"] == "span" and js["frames"] == 20 and js["frames_definition"] == "kernel:^scan$"
    res = run(str(REAL), "--window", "range:pass", "--by-kernel")
    assert res.exit_code == 0 and "kernels by name" in res.stdout and "copies and memsets by size" in res.stdout


@pytest.mark.parametrize("args, message", [
    (["--window", "bogus"], "--window 'bogus' is not a window"),
    (["--frames", "kernel:("], "not a regular expression"),
    (["--plot-start", "soon"], "--plot-start 'soon' is neither"),
    (["--window", "range:nothere"], "no NVTX range starts with 'nothere'"),
    (["--frames", "5", "5"], "cannot be combined"),
])  # fmt: skip
def test_bad_options_are_one_error_line(args: list[str], message: str) -> None:
    res = run(str(REAL), *args)
    assert res.exit_code == 2, res.output
    lines = messages(res.stderr)  # each message with its wrapped lines joined
    assert len(lines) == 2 and lines[0].startswith("Error: ") and message in lines[0] and lines[1].startswith("Hint: ")
    assert "Traceback" not in res.stderr and res.stdout == ""


def test_unknown_range_lists_the_ranges_there_are() -> None:
    res = run(str(REAL), "--range", "nothere")
    assert "pass frames=10000" in res.stderr and "pedestal" in res.stderr


def test_export_trace_writes_chrome_trace_events(tmp_path: Path) -> None:
    out = tmp_path / "w.json"
    res = run(str(REAL), "--export-trace", str(out), "--json")
    assert res.exit_code == 0, res.output
    json.loads(res.stdout)  # stdout stays JSON only; the note goes to stderr
    assert "trace: wrote" in res.stderr
    doc = json.loads(out.read_text())
    ev = doc["traceEvents"]
    procs = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert procs == {"GPU", "host", "critical path"}
    assert {"kernel · stream 13", "H2D · stream 14", "thread 462 (python3)", "idle gaps ≥ 0.1 ms"} <= threads
    path_pid = next(e["pid"] for e in ev if e["ph"] == "M" and e["name"] == "process_name" and e["args"]["name"] == "critical path")
    path = [e for e in ev if e["ph"] == "X" and e["pid"] == path_pid]
    assert sum(e["dur"] for e in path) == pytest.approx(202_403.066)  # the path tiles the window (µs)
    xs = [e for e in ev if e["ph"] == "X" and e["pid"] != path_pid]
    con = sqlite3.connect(f"file:{REAL}?mode=ro", uri=True)
    (lo, hi), = con.execute("SELECT start, end FROM NVTX_EVENTS WHERE text LIKE 'pass%'").fetchall()
    n_gpu = sum(con.execute(f"SELECT count(*) FROM {t} WHERE end > ? AND start < ?", (lo, hi)).fetchone()[0]
                for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"))  # fmt: skip
    n_api = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE end >= ? AND start <= ?", (lo, hi)).fetchone()[0]
    con.close()
    n_gaps = len(json.loads(run(str(REAL), "--json").stdout)["gaps"])
    assert len(xs) == n_gpu + n_api + n_gaps
    assert any(e["name"] == "idle: module_load (cuModuleLoadData)" for e in xs)
    assert any(e["name"] == "scan" for e in xs) and any(e["name"] == "H2D 160.00 MB" for e in xs)
    assert min(e["ts"] for e in xs if e["name"] == "scan") >= 0  # µs from the window start


def test_plot_can_start_at_the_longest_gap(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "g.png"
    res = run(str(REAL), "--plot", str(out), "--plot-start", "longest-gap")
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 0 and "around the longest idle gap (80.665 ms, module_load)" in res.stdout


def test_help_explains_the_new_options() -> None:
    res = CliRunner().invoke(app, ["analyze", "--help"], env={"COLUMNS": "200"})
    text = " ".join(res.stdout.split())
    for word in ("--window", "range:NAME[@DOMAIN][#N]", "ms:A-B", "--frames", "kernel:REGEX", "h2d-bytes:N", "--by-kernel",
                 "--mangled", "--export-trace", "longest-gap", "host=0.5", "Exit codes"):  # fmt: skip
        assert word in text, word


def _export_rows(path: Path) -> int:
    """The activity, CUDA API and synchronization rows of an export, counted with SQL alone."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        want = [t for t in tables if t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                                           "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME",
                                           "CUPTI_ACTIVITY_KIND_DRIVER", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
                                           "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")]
        return sum(con.execute(f"SELECT count(*) FROM [{t}]").fetchone()[0] for t in want)
    finally:
        con.close()


def test_what_a_whole_read_takes_is_counted_before_it(tmp_path: Path) -> None:
    from clusterbench.analyzers import analysis as core

    rows = _export_rows(REAL)
    need = core.whole_read(REAL, environ={})
    assert need.rows == rows and need.setting == "auto" and not need.over_limit
    assert need.peak_bytes == 63_000_000 + 66 * rows  # docs/analyze.md: 63 MB + 66 bytes a row, both shapes measured
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24684196 kB\nMemFree:         1000 kB\nMemAvailable:   2048 kB\n")
    assert core.available_memory(meminfo) == 2048 * 1024
    none = tmp_path / "none"
    assert core.available_memory(meminfo, none, none) == 2048 * 1024
    meminfo.write_text("MemTotal: 1 kB\n")
    assert core.available_memory(meminfo, none, none) is None and core.available_memory(none, none, none) is None


def _cgroup_files(folder: Path, *files: tuple[str, str]) -> Path:
    """A cgroup folder as the kernel shows it: each (name, text) a file, one value a line."""
    folder.mkdir(parents=True)
    for name, text in files:
        (folder / name).write_text(text + "\n")
    return folder


def test_a_containers_memory_limit_bounds_what_is_available(tmp_path: Path) -> None:
    from clusterbench.analyzers import analysis as core

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemAvailable:   8000000 kB\n")  # the host's: 8.192 GB
    # cgroup v2, as a container sees it: its own cgroup at the mount's root ("0::/"); 2 GB limit, 1.5 GB used
    # of which 0.5 GB is inactive file cache (given back before a kill): the working set is 1 GB, 1 GB room
    v2 = _cgroup_files(tmp_path / "v2", ("memory.max", "2000000000"), ("memory.current", "1500000000"),
                       ("memory.stat", "anon 900000000\nfile 600000000\ninactive_file 500000000\nactive_file 100000000"))
    cg = tmp_path / "cgroup_v2"
    cg.write_text("0::/\n")
    assert core.cgroup_room(cg, v2) == 2_000_000_000 - (1_500_000_000 - 500_000_000)
    assert core.available_memory(meminfo, cg, v2) == 1_000_000_000  # the less of the two
    (v2 / "memory.max").write_text("max\n")  # no limit: the host's figure
    assert core.cgroup_room(cg, v2) is None and core.available_memory(meminfo, cg, v2) == 8_192_000_000
    # cgroup v1, the process in a nested cgroup: that cgroup's files, 4 GB limit, 3 GB used, 1 GB inactive cache
    v1 = tmp_path / "v1"
    own = _cgroup_files(v1 / "memory" / "jobs" / "42", ("memory.limit_in_bytes", "4000000000"),
                        ("memory.usage_in_bytes", "3000000000"),
                        ("memory.stat", "cache 1200000000\ntotal_inactive_file 1000000000"))
    cg1 = tmp_path / "cgroup_v1"
    cg1.write_text("4:memory:/jobs/42\n3:cpuset:/\n0::/\n")
    assert core.cgroup_room(cg1, v1) == 4_000_000_000 - (3_000_000_000 - 1_000_000_000)
    (own / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "no limit"
    assert core.cgroup_room(cg1, v1) is None
    # unreadable or malformed: no figure, never an error
    (cg1).write_text("garbage\n")
    assert core.cgroup_room(cg1, v1) is None and core.cgroup_room(tmp_path / "missing", v1) is None


def test_a_limit_on_a_cgroup_above_the_process_bounds_what_is_available(tmp_path: Path) -> None:
    from clusterbench.analyzers import analysis as core

    # cgroup v2 under a batch system: the limit on the job's cgroup, none on the step's and task's below it
    # (Slurm's layout). The job: 3 GB limit, 2.5 GB used, 0.5 GB inactive cache: 1 GB room
    root = tmp_path / "v2"
    job = _cgroup_files(root / "system.slice" / "job_7", ("memory.max", "3000000000"), ("memory.current", "2500000000"),
                        ("memory.stat", "anon 2000000000\ninactive_file 500000000"))
    task = _cgroup_files(job / "step_0" / "task_0", ("memory.max", "max"), ("memory.current", "2400000000"))
    cg = tmp_path / "cgroup"
    cg.write_text("0::/system.slice/job_7/step_0/task_0\n")
    assert core.cgroup_room(cg, root) == 3_000_000_000 - (2_500_000_000 - 500_000_000)
    # a tighter limit on the task itself: the less of the two rooms (0.3 GB limit, 0.2 GB used, no cache)
    (task / "memory.max").write_text("300000000\n")
    (task / "memory.current").write_text("200000000\n")
    assert core.cgroup_room(cg, root) == 100_000_000


def test_the_options_that_read_whole_say_what_it_takes_past_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clusterbench.analyzers import analysis as core

    rows = _export_rows(REAL)
    monkeypatch.delenv(core.PATH_ENV, raising=False)
    # within the limit: nothing said
    res = run(str(REAL), "--export-trace", str(tmp_path / "a.json"))
    assert res.exit_code == 0, res.output
    assert "read the trace whole" not in res.stderr and "reads the trace whole" not in res.stderr
    # past it (the limit set below this trace's rows): the note, on stderr, before the analysis
    monkeypatch.setattr(core, "WHOLE_ROWS_LIMIT", rows - 1)
    res = run(str(REAL), "--export-trace", str(tmp_path / "b.json"), "--json")
    assert res.exit_code == 0, res.output
    json.loads(res.stdout)
    said = " ".join(res.stderr.split())
    peak = (63_000_000 + 66 * rows) / 1e6
    assert f"--export-trace reads the trace whole: {rows:,} activity, API and synchronization rows, about {peak:.2f} MB" in said
    assert f"a trace of more than {rows - 1:,} rows is read in time slabs" in said
    # --by-stream reads whole too: the same note, and no word of slabs it would not read
    res = run(str(REAL), "--by-stream", "--json")
    assert res.exit_code == 0, res.output
    said = " ".join(res.stderr.split())
    assert "--by-stream reads the trace whole" in said and "reading in time slabs" not in said
    assert "do not apply" not in said
    # more than the machine has available: refused before the read (exit 2), with the way out
    monkeypatch.setattr(core, "available_memory", lambda meminfo="/proc/meminfo": 1_000_000)
    res = run(str(REAL), "--export-trace", str(tmp_path / "c.json"), "--plot", str(tmp_path / "c.png"))
    assert res.exit_code == 2 and not (tmp_path / "c.json").exists() and not (tmp_path / "c.png").exists()
    said = " ".join(res.stderr.split())
    assert "--plot and --export-trace read the trace whole" in said and "more than the 1.00 MB this machine has available" in said
    assert "without --plot and --export-trace analyze reads a trace this size in time slabs" in said
    assert "Traceback" not in res.output
    # a range name the trace does not hold is named first, before the trace's size
    res = run(str(REAL), "--export-trace", str(tmp_path / "r.json"), "--range", "nosuchrange")
    assert res.exit_code == 2 and "nosuchrange" in res.stderr and "this machine has available" not in res.stderr
    # within the limit but more than the machine has: refused, without a word of slabs it would not read
    monkeypatch.setattr(core, "WHOLE_ROWS_LIMIT", rows)
    res = run(str(REAL), "--export-trace", str(tmp_path / "e.json"))
    said = " ".join(res.stderr.split())
    assert res.exit_code == 2 and "this machine has available" in said and "time slabs" not in said
    monkeypatch.setattr(core, "WHOLE_ROWS_LIMIT", rows - 1)
    # asked for all the same: read whole, and said so
    monkeypatch.setenv(core.PATH_ENV, "whole")
    res = run(str(REAL), "--export-trace", str(tmp_path / "d.json"))
    assert res.exit_code == 0, res.output
    assert "as asked: CLUSTERBENCH_ANALYZE_PATH=whole" in " ".join(res.stderr.split())
