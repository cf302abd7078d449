"""A user's files are never changed or lost, and every mistake is refused with one Error line and exit 2.

Each case of the bad-input survey of a fresh clone, and the same kinds of mistake on every output option of
every command: an output that is an input (the same path, written another way, or the same file through a
link), standard output redirected into an input, a database that is not a history, a site folder that is
not the site's, a write that fails half way, a full disk or a closed pipe on standard output. The expected
outcome of each is stated by hand: exit 2, the input's bytes unchanged (SHA-256 before and after), and the
Error naming what was wrong.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.cli import app
from cli_output import messages
from results_data import write

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "tests" / "data" / "h200" / "dev_5x5_s2_b500.sqlite"
runner = CliRunner()

ROW = {"label": "3x3_s1", "cluster": 3, "cap": 3000, "streams": 1, "batch": 2000, "frames": 20000,
       "kernel_us": 4.32, "h2d_us": 13.13, "d2h_us": 6.2, "roofline_us": 13.13, "binds": "h2d",
       "sustained_fps": 100.0, "session": "s1", "timestamp": "2026-12-01T10:00:00Z",
       "samples": {"sustained_fps": [99.0, 100.0, 101.0]}}
ENV = {"gpu_name": "NVIDIA H200", "git_rev": "r1", "git_dirty": False, "session_id": "s1", "host": "node1",
       "configs": {"3x3_s1": {"session": "s1", "frames": 20000, "tracer": "nsys"}}}


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): sha(p) for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def refused(args: list[str], *names: str, cwd: Path | None = None) -> str:
    """Run the command; it must exit 2 with one Error line (no traceback) that holds every one of ``names``.
    Returns the Error line (wrapped lines joined)."""
    old = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        r = runner.invoke(app, args, env={"COLUMNS": "100"})
    finally:
        os.chdir(old)
    what = f"clusterbench {' '.join(args)}: exit {r.exit_code}\n{r.output}"
    assert r.exit_code == 2, what
    assert r.exception is None or isinstance(r.exception, SystemExit), what
    errors = [m for m in messages(r.stderr) if m.startswith("Error:")]
    assert len(errors) == 1 and "Traceback" not in r.output, what
    for n in names:
        assert n in errors[0], (n, what)
    return errors[0]


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    p = tmp_path / "T.sqlite"
    shutil.copyfile(TRACE, p)
    return p


def results(tmp_path: Path, name: str = "2026-12-01_f32") -> Path:
    return write(tmp_path / "results" / name, [ROW], ENV)


# ----------------------------------------------------------------------------- an output that is an input

@pytest.mark.parametrize("option", ["--export-trace", "--plot"])
def test_analyze_refuses_to_write_over_its_trace_by_any_name(trace: Path, tmp_path: Path, option: str) -> None:
    before = sha(trace)
    (tmp_path / "a").mkdir()
    link = tmp_path / "T.link.png"
    os.link(trace, link)  # a hard link: another name, the same inode
    sym = tmp_path / "sym.png"
    sym.symlink_to(trace)
    for out in (str(trace), f"{tmp_path}/a/../T.sqlite", str(link), str(sym)):
        refused(["analyze", str(trace), option, out], option, "TRACE", "destroy")
    refused(["analyze", "T.sqlite", option, "./T.sqlite"], option, cwd=tmp_path)  # ./T.sqlite against T.sqlite
    assert sha(trace) == before and sorted(p.name for p in tmp_path.iterdir()) == ["T.link.png", "T.sqlite", "a",
                                                                                   "sym.png"]


def test_analyze_refuses_a_picture_named_as_its_trace(trace: Path, tmp_path: Path) -> None:
    pic = tmp_path / "T.png"  # the issue's `analyze T.png --plot T.png`: a trace that happens to end in .png
    trace.rename(pic)
    before = sha(pic)
    refused(["analyze", str(pic), "--plot", str(pic)], "--plot", str(pic))
    assert sha(pic) == before


def test_two_outputs_that_name_one_file_are_refused(trace: Path, tmp_path: Path) -> None:
    refused(["analyze", str(trace), "--plot", str(tmp_path / "x.png"), "--export-trace", str(tmp_path / "x.png")],
            "--plot and --export-trace name one file")
    assert not (tmp_path / "x.png").exists()


def test_compare_plot_over_an_input_file_is_refused(tmp_path: Path) -> None:
    a, b = results(tmp_path, "2026-12-01_f32_a"), results(tmp_path, "2026-12-01_f32_b")
    floors = tmp_path / "floors.png"
    floors.write_text("{}")
    before = tree(tmp_path)
    refused(["compare", str(a), str(b), "--plot", str(a / "probes.csv")], "--plot", "DIR_A")
    refused(["compare", str(a), str(b), "--plot", f"{b}/../{b.name}/samples.json"], "--plot", "DIR_B")
    refused(["compare", str(a), str(b), "--floors", str(floors), "--plot", str(floors)], "--plot", "--floors")
    assert tree(tmp_path) == before


def test_floors_out_that_is_a_file_of_an_input_dir_is_refused_even_with_force(tmp_path: Path) -> None:
    a, b = results(tmp_path, "2026-12-01_f32_aa1"), results(tmp_path, "2026-12-01_f32_aa2")
    before = tree(tmp_path)
    refused(["floors", str(a), str(b), "--out", str(a / "env.json"), "--force"], "--out", "env.json")
    assert tree(tmp_path) == before


def test_history_plot_over_the_database_is_refused(tmp_path: Path) -> None:
    d = results(tmp_path)
    db = tmp_path / "h.db"
    assert runner.invoke(app, ["history", "import", str(d), "--db", str(db)]).exit_code == 0
    before = sha(db)
    link = tmp_path / "h.svg"
    os.link(db, link)
    refused(["history", "3x3_s1", "--db", str(db), "--plot", str(link)], "--plot", "--db")
    assert sha(db) == before


def test_probe_outputs_over_its_inputs_are_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[config]]\nlabel = "a"\ncluster = 3\ncap = 100\nstreams = 1\nbatch = 10\nframes = 100\n')
    before = sha(cfg)
    refused(["probe", "--config", str(cfg), "--dry-run", "--results-dir", str(tmp_path / "r"), "--db", str(cfg)],
            "--db", "--config")
    refused(["probe", "--config", str(cfg), "--dry-run", "--results-dir", str(tmp_path / "r"), "--scan",
             "streams=1,2", "--plot", f"{tmp_path}/./c.toml"], "c.toml")
    assert sha(cfg) == before


def test_two_inputs_may_be_one_file(trace: Path) -> None:
    r = runner.invoke(app, ["compare", str(trace), str(trace), "--json"])
    assert r.exit_code == 0, r.output


# ----------------------------------------------------------------------------- standard output into an input

def _shell(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("flag", ["--json", "--csv", ""])
def test_analyze_into_its_own_trace_says_what_the_shell_did(trace: Path, flag: str) -> None:
    p = _shell(f"{sys.executable} -m clusterbench analyze T.sqlite {flag} > T.sqlite", trace.parent)
    assert p.returncode == 2, p.stderr
    err = [m for m in messages(p.stderr) if m.startswith("Error:")]
    assert len(err) == 1 and "standard output is redirected into the input TRACE" in err[0], p.stderr
    assert "emptied it before clusterbench started" in err[0] and "Traceback" not in p.stderr
    assert trace.stat().st_size == 0  # the shell did it; clusterbench says so (nothing could be saved)


def test_appending_into_the_trace_is_refused_and_changes_nothing(trace: Path) -> None:
    before = sha(trace)
    p = _shell(f"{sys.executable} -m clusterbench analyze T.sqlite --json >> T.sqlite", trace.parent)
    assert p.returncode == 2 and "would be appended to it" in " ".join(p.stderr.split()), p.stderr
    assert sha(trace) == before


def test_compare_into_a_file_of_an_input_dir_is_refused(tmp_path: Path) -> None:
    a, b = results(tmp_path, "2026-12-01_f32_a"), results(tmp_path, "2026-12-01_f32_b")
    p = _shell(f"{sys.executable} -m clusterbench compare {a} {b} --json >> {b}/env.json", tmp_path)
    assert p.returncode == 2 and "standard output is redirected into the input DIR_B" in " ".join(p.stderr.split())


# ----------------------------------------------------------------------------- --db and --html

def _export_db(tmp_path: Path) -> Path:
    db = tmp_path / "EXPORT.sqlite"
    shutil.copyfile(TRACE, db)
    return db


def _other_db(tmp_path: Path) -> Path:
    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE rows (name TEXT, qty INTEGER)")
    con.execute("INSERT INTO rows VALUES ('bolts', 12)")
    con.commit()
    con.close()
    return db


@pytest.mark.parametrize("make", [_export_db, _other_db])
def test_a_database_that_is_not_a_history_is_refused_and_left_as_it_was(tmp_path: Path, make) -> None:  # noqa: ANN001
    db = make(tmp_path)
    d = results(tmp_path)
    before = sha(db)
    names = ("--db", str(db), "not a clusterbench history database")
    refused(["history", "--db", str(db), "import", str(d)], *names)
    refused(["history", "--db", str(db), "3x3_s1"], *names)
    refused(["baseline", "set", "base", str(d), "--db", str(db)], *names)
    refused(["baseline", "list", "--db", str(db)], *names)
    refused(["compare", f"baseline:base", str(d), "--db", str(db)], *names)
    refused(["probe", "--dry-run", "--db", str(db), "--results-dir", str(tmp_path / "r"), "--", sys.executable, "-c",
             "pass"], *names)
    assert sha(db) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([db.name, "results"])  # no journal, no WAL
    if make is _export_db:
        assert "(it is an nsys export)" in refused(["history", "--db", str(db), "import", str(d)])


def test_a_text_file_as_db_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "notes.txt"
    db.write_text("my notes\n")
    refused(["history", "--db", str(db), "import", str(results(tmp_path))], "not an SQLite file")
    assert db.read_text() == "my notes\n"


def test_html_refuses_a_results_dir_and_a_folder_it_did_not_make(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    d = results(tmp_path)
    db = tmp_path / "h.db"
    assert runner.invoke(app, ["history", "import", str(d), "--db", str(db)]).exit_code == 0
    before = tree(tmp_path)
    refused(["history", "--db", str(db), "--html", str(d)], "--html", "is a results dir")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "index.html").write_text("<p>my own page</p>")
    before_mine = tree(tmp_path)
    refused(["history", "--db", str(db), "--html", str(mine)], "--html", "did not write", "index.html")
    refused(["history", "--db", str(db), "--html", str(tmp_path)], "--html")  # holds the db and the results
    assert tree(tmp_path) == before_mine and {k: v for k, v in before_mine.items() if k in before} == before


def test_html_writes_a_new_folder_and_updates_its_own(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    d = results(tmp_path)
    db = tmp_path / "h.db"
    assert runner.invoke(app, ["history", "import", str(d), "--db", str(db)]).exit_code == 0
    site = tmp_path / "site"
    for _ in range(2):  # the second run updates the site it made
        r = runner.invoke(app, ["history", "--db", str(db), "--html", str(site)])
        assert r.exit_code == 0, r.output
        assert (site / "index.html").is_file() and (site / ".clusterbench-history-site").is_file()
    assert not [p for p in site.rglob("*") if "clusterbench-tmp" in p.name]


# ----------------------------------------------------------------------------- writes that fail

def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(trace: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import clusterbench.render.timeline as tl

    out = tmp_path / "out.json"
    out.write_text('{"the": "previous export"}')
    real_dumps = tl.json.dumps
    calls = {"n": 0}

    def full_disk(*a, **k):  # noqa: ANN002, ANN003, ANN202
        calls["n"] += 1
        if calls["n"] > 50:  # half way through the events
            raise OSError(28, "No space left on device")
        return real_dumps(*a, **k)

    monkeypatch.setattr(tl.json, "dumps", full_disk)
    refused(["analyze", str(trace), "--export-trace", str(out)], "cannot write the trace export", str(out),
            "No space left on device")
    assert out.read_text() == '{"the": "previous export"}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["T.sqlite", "out.json"]


def test_outputs_keep_the_usual_permissions(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    assert runner.invoke(app, ["analyze", str(trace), "--export-trace", str(out)]).exit_code == 0
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("args", [["analyze", "{trace}", "--json"], ["analyze", "{trace}", "--csv"],
                                  ["analyze", "{trace}"], ["compare", "{trace}", "{trace}", "--json"], ["--help"],
                                  ["analyze", "--help"]])
def test_a_full_disk_on_standard_output_is_an_error_line(trace: Path, args: list[str]) -> None:
    cmd = " ".join(a.replace("{trace}", str(trace)) for a in args)
    p = _shell(f"{sys.executable} -m clusterbench {cmd} > /dev/full", trace.parent)
    assert p.returncode == 2, p.stderr
    errors = [m for m in messages(p.stderr) if m.startswith("Error:")]
    assert errors == ["Error: cannot write to standard output: No space left on device"], p.stderr
    assert "Traceback" not in p.stderr and "Exception ignored" not in p.stderr


def test_a_closed_pipe_is_an_error_line(trace: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    p = subprocess.Popen([sys.executable, "-m", "clusterbench", "analyze", str(trace), "--by-kernel", "--by-stream"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    p.stdout.close()  # the reader went away before the first line
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 2, err
    assert messages(err)[0].startswith("Error: cannot write to standard output: the pipe was closed"), err
    assert "Traceback" not in err and "Exception ignored" not in err


# ----------------------------------------------------------------------------- bad values in a trace

def test_text_in_a_time_column_names_the_table_and_column(trace: Path) -> None:
    con = sqlite3.connect(trace)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'abc' WHERE rowid = "
                "(SELECT rowid FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid LIMIT 1 OFFSET 3)")
    con.commit()
    con.close()
    before = sha(trace)
    refused(["analyze", str(trace)], "CUPTI_ACTIVITY_KIND_KERNEL.start", "'abc'", str(trace))
    refused(["analyze", str(trace), "--json"], "CUPTI_ACTIVITY_KIND_KERNEL.start")
    assert sha(trace) == before


@pytest.mark.parametrize(("table", "column", "value"), [("NVTX_EVENTS", "end", ""), ("CUPTI_ACTIVITY_KIND_MEMCPY",
                                                                                    "end", 1.5)])
def test_other_bad_values_name_their_table_and_column(trace: Path, table: str, column: str, value: object) -> None:
    con = sqlite3.connect(trace)
    con.execute(f"UPDATE {table} SET [{column}] = ? WHERE rowid = (SELECT rowid FROM {table} ORDER BY rowid "
                "LIMIT 1 OFFSET 1)", (value,))
    con.commit()
    con.close()
    refused(["analyze", str(trace)], f"{table}.{column}")


def test_an_export_without_a_kernel_table_says_so(trace: Path) -> None:
    con = sqlite3.connect(trace)
    con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    con.commit()
    con.close()
    for args in (["analyze", str(trace)], ["analyze", str(trace), "--json"]):
        r = runner.invoke(app, args, env={"COLUMNS": "100"})
        assert r.exit_code == 0, r.output
        warns = [m for m in messages(r.stderr) if m.startswith("Warning:")]
        assert any("no CUPTI_ACTIVITY_KIND_KERNEL table" in w and "no kernel was traced" in w for w in warns), r.stderr


@pytest.mark.parametrize(("spec", "said"), [("kernel=1e308", "the factor must be from 0.001 to 1,000"),
                                            ("kernel=1e-9", "the factor must be from 0.001 to 1,000"),
                                            ("h2d_gbps=1e300", "the rate (GB/s) must be from 0.001 to 10,000"),
                                            ("kernel=nan", "positive number"), ("kernel=inf", "positive number")])
def test_what_if_factors_are_finite_and_sane(trace: Path, spec: str, said: str) -> None:
    refused(["analyze", str(trace), "--what-if", spec], "--what-if", said)


def test_frames_option_names_itself_in_the_warning(trace: Path) -> None:
    r = runner.invoke(app, ["analyze", str(trace), "--frames", "5000"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    warns = [m for m in messages(r.stderr) if m.startswith("Warning:")]
    assert warns == ["Warning: --frames (5,000) contradicts frames=10,000 in the NVTX range text 'pass frames=10000'; "
                     "used --frames (5,000). Leave --frames out to use the range text."]
    r = runner.invoke(app, ["analyze", str(trace), "5000"], env={"COLUMNS": "200"})
    assert "the FRAMES argument (5,000) contradicts" in r.stderr


# ----------------------------------------------------------------------------- probe: validate before the GPU

def _config(tmp_path: Path, **keys: object) -> Path:
    values = {"label": '"big"', "cluster": 3, "cap": 3000, "streams": 4, "batch": 2000, "frames": 20000}
    values.update({k: v for k, v in keys.items()})
    p = tmp_path / "c.toml"
    p.write_text("[[config]]\n" + "".join(f"{k} = {v}\n" for k, v in values.items()))
    return p


def _dry(tmp_path: Path, cfg: Path, *more: str) -> list[str]:
    return ["probe", "--config", str(cfg), "--dry-run", "--results-dir", str(tmp_path / "r"), *more]


@pytest.mark.parametrize(("frames", "said"), [("1e20", "--frames takes a whole number of frames, got '1e20'"),
                                              ("2000.5", "a float"),
                                              ("100000000000000000000", "more than a 64-bit integer holds")])
def test_probe_frames_option_that_is_not_a_whole_number(tmp_path: Path, frames: str, said: str) -> None:
    refused(_dry(tmp_path, _config(tmp_path), "--frames", frames), said)


def test_probe_refuses_what_cannot_run_with_the_numbers(tmp_path: Path) -> None:
    # the TOML: batch = 2000000000 and frames = 1e17 (a float)
    refused(_dry(tmp_path, _config(tmp_path, batch=2000000000, frames="1e17")), "key 'frames'",
            "must be an integer, got a float")
    # as integers: 4 streams x 2e9 frames x 320,000 B = 2,560,000 GB of frames in flight, more than any GPU
    # (288 GB); and 1e17 frames of 320,000 B at 64 GB/s: 5.0e11 s, 15,855 years, beyond --timeout
    err = refused(_dry(tmp_path, _config(tmp_path, batch=2000000000, frames=100000000000000000)),
                  "device memory", "more than 288.00 GB, the most any GPU has", "longer than --timeout 1,800 s")
    need = 4 * 2_000_000_000 * 320_000 + 4 * 2_000_000_000 * (4 + 3000 * 40) + 4 * 2_000_000_000 * 4 * 400 * 13
    assert f"needs {need / 1e9:,.2f} GB" in err
    assert "1.59e+04 years" in err
    refused(_dry(tmp_path, _config(tmp_path, batch=2**31)), "key 'batch'", "at most 2,147,483,647 (a 32-bit integer)")
    refused(_dry(tmp_path, _config(tmp_path, frames=2**64)), "key 'frames'", "a 64-bit integer")
    refused(_dry(tmp_path, _config(tmp_path, detector="[65536, 65536]")), "key 'detector'", "32-bit")


def test_probe_checks_memory_against_the_gpu_it_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import clusterbench.run.guards as guards

    # 4 streams x 70,000 frames x 320,000 B = 89.6 GB in flight: under 288 GB, over an 80 GB GPU
    cfg = _config(tmp_path, cap=10, batch=70000, frames=70000)
    monkeypatch.setattr(guards, "gpu_memory_totals", lambda: ())
    assert runner.invoke(app, _dry(tmp_path, cfg)).exit_code == 0
    monkeypatch.setattr(guards, "gpu_memory_totals", lambda: (80 * 10**9,))
    refused(_dry(tmp_path, cfg), "device memory", "more than 80.00 GB, this GPU's memory")
    monkeypatch.setattr(guards, "gpu_memory_totals", lambda: (80 * 10**9, 141 * 10**9))  # the largest GPU counts
    assert runner.invoke(app, _dry(tmp_path, cfg)).exit_code == 0


def test_probe_warns_of_a_long_run_with_an_estimate(tmp_path: Path) -> None:
    # 100,000,000 frames of 320,000 B at 64 GB/s: 500 s per pass; three passes: 1,500 s = 25.0 min
    r = runner.invoke(app, _dry(tmp_path, _config(tmp_path, frames=100000000)), env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "the probe takes at least 25.0 min" in " ".join(r.output.split())
    assert "bounds checked, with or without a GPU" in r.stdout


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="no /proc")
def test_a_results_dir_that_cannot_be_written_is_refused_in_a_dry_run(tmp_path: Path) -> None:
    refused(_dry(tmp_path, _config(tmp_path))[:-2] + ["--results-dir", "/proc/res"], "--results-dir", "/proc/res",
            "cannot be written")
    f = tmp_path / "file"
    f.write_text("x")
    refused(_dry(tmp_path, _config(tmp_path))[:-2] + ["--results-dir", str(f)], "--results-dir")


# ----------------------------------------------------------------------------- history import goes on

def test_history_import_skips_a_corrupt_dir_names_it_and_imports_the_others(tmp_path: Path) -> None:
    good = results(tmp_path, "2026-12-01_f32_good")
    bad = results(tmp_path, "2026-12-01_f32_bad")
    text = (bad / "probes.csv").read_text()
    assert "\n3x3_s1,3,3000," in text
    (bad / "probes.csv").write_text(text.replace("\n3x3_s1,3,3000,", "\n3x3_s1,three,3000,"))
    db = tmp_path / "h.db"
    r = runner.invoke(app, ["history", "import", str(tmp_path / "results"), "--db", str(db)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    warns = [m for m in messages(r.stderr) if m.startswith("Warning:")]
    assert len(warns) == 1 and warns[0].startswith(f"Warning: skipped {bad}: cannot be read:"), r.stderr
    assert "column cluster: expected an integer, got 'three'" in warns[0]
    assert "(1 row(s) added from 1 results dir(s))" in " ".join(r.stdout.split())
    con = sqlite3.connect(db)
    assert [row[0] for row in con.execute("SELECT name FROM dirs")] == [good.name]
    con.close()


def test_other_files_beside_the_inputs_may_be_written(tmp_path: Path) -> None:
    """Only the data of an input folder is protected: a plot of an earlier run beside it is written again."""
    pytest.importorskip("matplotlib")
    a, b = results(tmp_path, "2026-12-01_f32_a"), results(tmp_path, "2026-12-01_f32_b")
    for _ in range(2):
        r = runner.invoke(app, ["compare", str(a), str(b), "--plot", str(a / "cmp.png")])
        assert r.exit_code == 0, r.output
    p = _shell(f"{sys.executable} -m clusterbench compare {a} {b} --json > {a}/cmp.json", tmp_path)
    assert p.returncode == 0, p.stderr
    assert (a / "cmp.json").stat().st_size > 0


@pytest.mark.parametrize(("option", "value", "said"), [("--plot-start", "nan", "--plot-start takes ms from 0"),
                                                       ("--plot-start", "1e308", "--plot-start takes ms from 0"),
                                                       ("--plot-start", "-5", "--plot-start takes ms from 0"),
                                                       ("--plot-span", "inf", "--plot-span takes ms above 0"),
                                                       ("--plot-span", "1e308", "--plot-span takes ms above 0"),
                                                       ("--plot-span", "0", "--plot-span takes ms above 0")])
def test_plot_times_are_finite_and_sane(trace: Path, tmp_path: Path, option: str, value: str, said: str) -> None:
    refused(["analyze", str(trace), "--plot", str(tmp_path / "p.png"), option, value], said)
    assert not (tmp_path / "p.png").exists()


def test_probe_refuses_a_config_data_file_that_is_not_frames(tmp_path: Path) -> None:
    refused(_dry(tmp_path, _config(tmp_path, data='"nope.npy"')), "key 'data'", "nope.npy: no such file")
    (tmp_path / "t.npy").write_text("not numpy")
    refused(_dry(tmp_path, _config(tmp_path, data='"t.npy"')), "key 'data'", "not a .npy file")


def test_probe_refuses_dark_frames_no_machine_holds(tmp_path: Path) -> None:
    # 2,147,483,647 dark frames of 320,000 B (687,194.77 GB), the pool twice (2 x 1,000 frames: 0.64 GB) and the
    # pinned slots (4 streams x 2,000 frames x (4 + 3,000 x 40 B): 0.96 GB): more than any machine (32 TB)
    need = (2**31 - 1) * 320_000 + 2 * 1000 * 320_000 + 4 * 2000 * (4 + 3000 * 40)
    refused(_dry(tmp_path, _config(tmp_path, pedestal_frames=2**31 - 1)), f"needs {need / 1e9:,.2f} GB of host memory",
            "more than any machine has (32,000.00 GB)")


def test_a_toml_nested_too_deep_is_an_error(tmp_path: Path) -> None:
    cfg = tmp_path / "deep.toml"
    cfg.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    refused(_dry(tmp_path, cfg), "nested too deep")
    refused(["guard", "--config", str(cfg)], "nested too deep")


def test_an_output_through_a_link_or_into_a_fifo_is_written_not_replaced(trace: Path, tmp_path: Path) -> None:
    import stat as st
    import threading

    from clusterbench.io.outputs import atomic_write_text

    target = tmp_path / "exports" / "t.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "t.json"
    link.symlink_to(target)
    assert runner.invoke(app, ["analyze", str(trace), "--export-trace", str(link)]).exit_code == 0
    assert link.is_symlink() and target.read_text().startswith('{"displayTimeUnit"')
    fifo = tmp_path / "pipe.json"  # as /dev/null or /dev/stdout would be: written into, never replaced
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    atomic_write_text(fifo, "through the pipe", "the test output")
    reader.join(timeout=60)
    assert got == [b"through the pipe"] and st.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["T.sqlite", "exports", "pipe.json", "t.json"]


def test_the_export_of_a_report_is_an_input_too(trace: Path, tmp_path: Path) -> None:
    rep = tmp_path / "T.nsys-rep"  # analyze reads T.sqlite beside a report in its place
    rep.write_bytes(b"a report")
    before = sha(trace)
    refused(["analyze", str(rep), "--export-trace", str(trace)], "--export-trace", "the export of TRACE")
    assert sha(trace) == before
