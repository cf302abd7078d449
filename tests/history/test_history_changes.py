"""History that names what changed: steps between two configs are labelled with the difference and never
judged as a change of the build (table, JSON, site, legend); `history import` of folders, naming what it
skipped; a fresh clone's first `history LABEL`; results dirs that stay distinguishable when their names are
cut. Results dirs written by the real store; every expected value worked out here by hand."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.cli import app
from clusterbench.compare.compare import Reason, Verdict
from clusterbench.compare.history import STEP_CONFIG_COLUMNS, history_series
from clusterbench.io.history import import_dirs, series
from clusterbench.render.history import cut_names, render_history_text

from results_data import write

runner = CliRunner()
H200_FLOORS = Path(__file__).resolve().parents[1] / "data" / "results" / "floors" / "NVIDIA_H200.json"

BASE = {"label": "3x3_s1", "cluster": 3, "cap": 3000, "streams": 1, "batch": 2000, "frames": 20000,
        "pedestal_dtype": "float32", "pedestal": "frozen", "transfer": "copy", "tracer": "nsys", "workload": "cupy",
        "finder": "clusterbench CuPy (twophase)", "kernel_us": 1.0, "h2d_us": 5.0, "d2h_us": 2.0,
        "roofline_us": 5.0, "binds": "h2d", "sustained_fps": 100_000.0,
        "samples": {"sustained_fps": [99_950.0, 100_000.0, 100_050.0]}}
# a value of every config column that differs from BASE's
OTHER = {"pedestal": "tracking", "finder": "aare ClusterFinderCUDA", "workload": "command",
         "pedestal_dtype": "float64", "tracer": "cupti", "streams": 4, "transfer": "zerocopy", "cluster": 5,
         "cap": 4000, "batch": 200, "frames": 8000}


def _dir(root: Path, name: str, rev: str, day: int, params: dict | None = None, **cells: object) -> Path:
    """A results dir of one row (BASE with ``cells``); ``params``: its config entry's workload parameters."""
    ts = f"2026-12-{day:02d}T10:00:00Z"
    row = {**BASE, "timestamp": ts, "session": name, **cells}
    env = {"gpu_name": "NVIDIA H200", "git_rev": rev, "git_dirty": False, "session_id": name, "created_utc": ts,
           "host": "node1"}
    if params is not None:
        env["configs"] = {"3x3_s1": {"session": name, "params": params}}
    return write(root / name, [row], env)


def test_every_config_column_is_named_in_a_step() -> None:
    assert set(OTHER) == set(STEP_CONFIG_COLUMNS)


@pytest.mark.parametrize("column", [c for c in STEP_CONFIG_COLUMNS if c != "finder"])
def test_a_step_between_two_configs_is_named_not_judged(tmp_path: Path, column: str) -> None:
    # r1 -> r2 changes the build and one config column; the kernel goes 1.0 -> 2.5 (+150 %, far beyond any
    # floor): as a change of build alone this would read SLOWER. It must read config_changed.
    a = _dir(tmp_path, "2026-12-01_f32_a", "r1", 1)
    b = _dir(tmp_path, "2026-12-02_f32_b", "r2", 2, kernel_us=2.5, **{column: OTHER[column]})
    db = tmp_path / "h.db"
    import_dirs(db, [a, b])
    s = history_series("3x3_s1", "kernel_us", series(db, "3x3_s1", "kernel_us"))
    (t,) = s.transitions
    assert [(c.column, c.before, c.after) for c in t.config] == [(column, str(BASE[column]), str(OTHER[column]))]
    assert (t.delta.verdict, t.delta.code) == (Verdict.NOT_COMPARABLE, Reason.CONFIG_DIFFERS)
    assert t.delta.delta_pct == pytest.approx(150.0) and not t.is_step and s.steps == ()
    lines = render_history_text(s, 120)
    assert _change(lines, 2) == f"config_changed: {column} {BASE[column]}→{OTHER[column]}"
    assert not any("▶" in ln or "SLOWER" in ln for ln in _rows(lines).values())
    assert all(len(ln) <= 80 for ln in render_history_text(s, 80))


def test_another_finder_is_what_the_build_chose_and_is_judged(tmp_path: Path) -> None:
    # r1 -> r2 changes the build and with it the finder (the kernel its default picks): one config on two builds.
    # The kernel 1.0 -> 2.5 (+150 %) is judged, SLOWER, and the step names what the build chose
    a = _dir(tmp_path, "2026-12-01_f32_a", "r1", 1)
    b = _dir(tmp_path, "2026-12-02_f32_b", "r2", 2, kernel_us=2.5, finder=OTHER["finder"])
    db = tmp_path / "h.db"
    import_dirs(db, [a, b])
    s = history_series("3x3_s1", "kernel_us", series(db, "3x3_s1", "kernel_us"))
    (t,) = s.transitions
    assert t.config == () and t.is_step and t.delta.verdict is Verdict.SLOWER
    assert [(c.column, c.before, c.after) for c in t.chose] == [("finder", BASE["finder"], OTHER["finder"])]
    assert t.to_json()["build_chose"] == [{"column": "finder", "before": BASE["finder"], "after": OTHER["finder"]}]


_ROW = re.compile(r"^  ( \d|\d\d) ")  # a row of the table: "   3 2026-12-..."


def _rows(lines: list[str]) -> dict[str, str]:
    return {ln[:5].strip(): ln for ln in lines if _ROW.match(ln)}


def _change(lines: list[str], i: int) -> str:
    """The change column of row ``i`` of a history table, with the lines it continues on."""
    row = _rows(lines)[str(i)]
    n = lines.index(row)
    at = row.find("config_changed")
    text = row[at:] if at >= 0 else row[row.rindex("  ") + 2:]
    for ln in lines[n + 1:]:
        if not ln.startswith("     ") or _ROW.match(ln) or not ln.strip():
            break
        text += " " + ln.strip()
    return text


def test_the_history_names_config_changes_and_still_judges_builds(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "results"
    # d1 -> d2: same build, f32 -> f64 (config); d2 -> d3: new build and frozen -> tracking (config, not judged,
    # though the kernel goes 1.2 -> 3.0); d3 -> d4: new build, same config, kernel 3.0 -> 3.3 (+10 %: SLOWER
    # beyond the 1 % floor); d4 -> d5: the tracer changes with the build: for the kernel a config change, for
    # the untraced sustained FPS not (AFFECTS), so there the build is judged: 100,000 -> 80,000 FPS
    _dir(root, "2026-12-01_f32_d1", "r1", 1)
    _dir(root, "2026-12-01_f64_d2", "r1", 2, pedestal_dtype="float64", kernel_us=1.2)
    _dir(root, "2026-12-03_f64_d3", "r2", 3, pedestal_dtype="float64", pedestal="tracking", kernel_us=3.0)
    _dir(root, "2026-12-04_f64_d4", "r3", 4, pedestal_dtype="float64", pedestal="tracking", kernel_us=3.3)
    _dir(root, "2026-12-05_f64_d5", "r4", 5, pedestal_dtype="float64", pedestal="tracking", kernel_us=3.3,
         tracer="cupti", sustained_fps=80_000.0, samples={"sustained_fps": [79_950.0, 80_000.0, 80_050.0]})
    (root / "floors").mkdir()
    shutil.copy(H200_FLOORS, root / "floors")  # sustained FPS is judged across sessions with a floor only
    assert runner.invoke(app, ["history", "import", "results"]).exit_code == 0
    r = runner.invoke(app, ["history", "3x3_s1", "--metric", "kernel_us"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert all(len(ln) <= 80 for ln in lines), lines
    rows = _rows(lines)
    assert _change(lines, 2) == "config_changed: pedestal_dtype float32→float64"
    # a change that does not fit on its row at 80 columns is named on the next line, under the dir column
    assert rows["3"].endswith("config_changed:")
    assert lines[lines.index(rows["3"]) + 1] == "     pedestal frozen→tracking"
    assert rows["4"].split()[-4:] == ["▶", "SLOWER", "+10.0", "%"]
    assert _change(lines, 5) == "config_changed: tracer nsys→cupti"
    assert not any("▶" in rows[k] for k in "1235")
    text = " ".join(r.stdout.split())
    assert "1 change(s) of build, 1 beyond the noise (▶); 3 change(s) of config, named and not judged." in text
    assert "config_changed: the two points ran different configs" in text  # the legend says what it is
    assert "step 2026-12-03_f64_d3 → 2026-12-04_f64_d4" in text and "step 2026-12-01" not in text
    doc = json.loads(runner.invoke(app, ["history", "3x3_s1", "--metric", "kernel_us", "--json"]).stdout)
    changes = [p["change"] for p in doc["points"]]
    assert changes[0] is None
    assert [c["change"] for c in changes[1:]] == ["config_changed", "config_changed", "build_changed",
                                                  "config_changed"]
    assert changes[2]["config_changed"] == [{"column": "pedestal", "before": "frozen", "after": "tracking"}]
    assert (changes[2]["verdict"], changes[2]["reason_code"], changes[2]["is_step"]) == \
        ("NOT_COMPARABLE", "config_differs", False)
    assert changes[2]["delta_pct"] == pytest.approx(150.0)  # 1.2 -> 3.0, said but not judged
    assert [s["to"] for s in doc["steps"]] == ["2026-12-04_f64_d4"]
    assert [c["to"] for c in doc["config_changes"]] == ["2026-12-01_f64_d2", "2026-12-03_f64_d3",
                                                        "2026-12-05_f64_d5"]
    # sustained FPS: the tracer does not touch it, so d4 -> d5 is a change of build, judged: -20 %, SLOWER
    doc = json.loads(runner.invoke(app, ["history", "3x3_s1", "--metric", "sustained_fps", "--json"]).stdout)
    last = doc["points"][-1]["change"]
    assert (last["change"], last["verdict"]) == ("build_changed", "SLOWER")
    assert last["delta_pct"] == pytest.approx(-20.0)


def test_a_workload_parameter_that_changed_is_named_too(tmp_path: Path) -> None:
    # one build, the kernel given a delay by a workload parameter (no probes.csv column says so): 1.0 -> 1.2
    # µs/frame would otherwise go unremarked (one build is not judged); a parameter only one side records is
    # shown as not recorded there, and the parameters that repeat a column (batch) are named once, as the column
    base = {"cluster": 3, "batch": 2000, "seed": 0}
    a = _dir(tmp_path, "2026-12-01_f32_aa", "r1", 1, params=base)
    b = _dir(tmp_path, "2026-12-01_f32_delay", "r1", 2, params={**base, "delay_us_per_frame": 1.7}, kernel_us=1.2)
    c = _dir(tmp_path, "2026-12-01_f32_delay_b", "r1", 3, params={**base, "delay_us_per_frame": 1.7, "batch": 200},
             kernel_us=1.2, batch=200)
    d = _dir(tmp_path, "2026-12-01_f32_aa2", "r1", 4, params={**base, "batch": 200}, batch=200)
    db = tmp_path / "h.db"
    import_dirs(db, [a, b, c, d])
    s = history_series("3x3_s1", "kernel_us", series(db, "3x3_s1", "kernel_us"))
    assert [t.config_text for t in s.transitions] == ["delay_us_per_frame –→1.7", "batch 2000→200",
                                                      "delay_us_per_frame 1.7→–"]
    assert s.steps == () and all(t.delta.code is Reason.CONFIG_DIFFERS for t in s.transitions)


class _Rows(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sections: list[dict] = []
        self.rows: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:  # noqa: ANN001
        a = dict(attrs)
        if tag == "section":
            self.sections.append(a)
        if tag == "tr" and a.get("class"):
            self.rows.append(a["class"])
        if tag == "a" and a.get("class") == "step":
            self.links.append(a["href"])


def test_the_site_names_config_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "results"
    _dir(root, "2026-12-01_f32_d1", "r1", 1)
    _dir(root, "2026-12-02_f32_d2", "r2", 2, pedestal="tracking", kernel_us=3.0)
    _dir(root, "2026-12-03_f32_d3", "r3", 3, pedestal="tracking", kernel_us=3.6)
    assert runner.invoke(app, ["history", "import", "results"]).exit_code == 0
    r = runner.invoke(app, ["history", "--html", "site"])
    assert r.exit_code == 0, r.output
    page = (tmp_path / "site" / "index.html").read_text()
    p = _Rows()
    p.feed(page)
    kernel = next(s for s in p.sections if s["data-metric"] == "kernel_us")
    assert (kernel["data-steps"], kernel["data-config-changes"]) == ("1", "1")
    assert p.rows.count("config_changed") == len(p.sections)  # one per metric: d1 -> d2
    assert "pedestal frozen→tracking: not judged" in page and "config_changed</b> row" in page
    assert p.links and all("d2__" in h and "d3" in h for h in p.links)  # the only step: d2 -> d3


# ----------------------------------------------------------------------------- import of folders


def _tree(tmp_path: Path) -> Path:
    """results/ as a user has it: three results dirs (one a level down), the floors folder, an empty folder, a
    hidden one, a campaign's folder, a folder that cannot be read (with _unreadable)."""
    root = tmp_path / "results"
    _dir(root, "2026-12-01_f32", "r1", 1)
    _dir(root, "2026-12-02_f32_x", "r2", 2)
    _dir(root / "node7", "2026-12-03_f32", "r3", 3)
    (root / "floors").mkdir()
    (root / "floors" / "NVIDIA_H200.json").write_text("{}")
    (root / "empty").mkdir()
    (root / ".cache").mkdir()
    camp = root / "2026-12-04_f32.campaign"
    _dir(camp / "tasks" / "0-3x3_s1", "2026-12-04_f32", "r4", 4)
    (camp / "campaign.json").write_text("{}")
    (root / "locked").mkdir()
    return root


def _broken(root: Path) -> Path:
    bad = _dir(root, "2026-12-05_f32_bad", "r5", 5)
    doc = json.loads((bad / "env.json").read_text())
    (bad / "env.json").write_text(json.dumps({**doc, "configs": "3x3_s1"}))
    return bad


def _unreadable(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    real = os.scandir

    def scandir(path):  # noqa: ANN001, ANN202
        if Path(path).name == name:
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


def test_import_of_a_folder_names_what_it_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    _unreadable(monkeypatch, "locked")
    r = runner.invoke(app, ["history", "import", "results"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == ["results/2026-12-01_f32: 1 row(s) added of 1",
                                     "results/2026-12-02_f32_x: 1 row(s) added of 1",
                                     "results/node7/2026-12-03_f32: 1 row(s) added of 1",
                                     "history: results/history.db (3 row(s) added from 3 results dir(s))"]
    skipped = {ln.split(": ", 2)[1].removeprefix("skipped "): ln.split(": ", 2)[2]
               for ln in r.stderr.splitlines() if ln.startswith("Warning: skipped ")}
    assert set(skipped) == {"results/.cache", "results/2026-12-04_f32.campaign", "results/empty", "results/floors",
                            "results/locked"}
    assert skipped["results/floors"] == "no probes.csv in it or below (it holds NVIDIA_H200.json)"
    assert skipped["results/empty"] == "empty"
    assert skipped["results/locked"] == "cannot be read (Permission denied)"
    assert skipped["results/.cache"] == "a hidden folder, not searched"
    assert skipped["results/2026-12-04_f32.campaign"].startswith("a campaign's folder")
    # as the shell expands results/*: the database file is named too, and nothing is recorded twice
    r = runner.invoke(app, ["history", "import", *sorted(glob.glob("results/*"))], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "history: results/history.db (0 row(s) added from 3 results dir(s))" in r.stdout
    assert "Warning: skipped results/history.db: a file, not a folder" in r.stderr
    doc = json.loads(runner.invoke(app, ["history", "import", "results", "--json"]).stdout)
    assert len(doc["dirs"]) == 3 and len(doc["skipped"]) == 5
    # a results dir that cannot be read, found in the folder or named: skipped and named with its file and
    # block, as --help promises; the others are imported (nothing new here: they were before)
    _broken(tmp_path / "results")
    for args in (["results"], sorted(glob.glob("results/*"))):
        r = runner.invoke(app, ["history", "import", *args], env={"COLUMNS": "200"})
        assert r.exit_code == 0 and "Traceback" not in r.output, r.output
        said = " ".join(r.stderr.split())
        assert "Warning: skipped results/2026-12-05_f32_bad: cannot be read: env.json block 'configs' must be an " \
               "object" in said
        assert "results/2026-12-05_f32_bad/env.json" in said
        assert "history: results/history.db (0 row(s) added from 3 results dir(s))" in r.stdout
    # only the broken one: nothing to import, bad input (exit 2), its problem named
    r = runner.invoke(app, ["history", "import", "results/2026-12-05_f32_bad"])
    assert r.exit_code == 2 and "env.json block 'configs' must be an object" in " ".join(r.stderr.split())


@pytest.mark.parametrize(("args", "words"), [
    (["results/floors"], "no results dir to import in results/floors (results/floors: no probes.csv in it or below"),
    (["results/empty", "results/.cache"], "results/empty: empty; results/.cache: empty"),  # named: searched
    (["results/nope"], "no such file or folder: results/nope"),
])
def test_import_of_nothing_importable_is_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list,
                                                   words: str) -> None:
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path)
    r = runner.invoke(app, ["history", "import", *args])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert words in " ".join(r.stderr.split()) and "Hint: " in r.stderr
    assert not (tmp_path / "results" / "history.db").exists()  # nothing written


def test_a_fresh_clone_imports_results_first_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _dir(tmp_path / "results", "2026-12-01_f32_a", "r1", 1)
    _dir(tmp_path / "results", "2026-12-02_f32_b", "r2", 2, kernel_us=1.5)
    r = runner.invoke(app, ["history", "3x3_s1", "--metric", "kernel_us"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    said = " ".join(r.stderr.split())
    assert ("history: no database at results/history.db yet: importing the 2 results dir(s) under results/ first "
            "(clusterbench history import results)") in said
    assert "history: 2 row(s) from 2 results dir(s) recorded in results/history.db" in said
    row = _rows(r.stdout.splitlines())["2"]
    assert row.split()[-4:] == ["▶", "SLOWER", "+50.0", "%"]  # 1.0 -> 1.5 µs/frame, beyond the 1 % floor
    r = runner.invoke(app, ["history", "3x3_s1", "--metric", "kernel_us"])
    assert r.exit_code == 0 and "importing" not in r.stderr


def test_a_fresh_clone_without_results_says_how_to_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for args in (["history", "3x3_s1"], ["history", "--html", "site"]):
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and "Traceback" not in r.output
        said = " ".join(r.stderr.split())
        assert "no history database at results/history.db yet, and no results dir under results/" in said
        assert "clusterbench history import FOLDER adds" in said
    _dir(tmp_path / "results", "2026-12-01_f32_a", "r1", 1)
    r = runner.invoke(app, ["history", "3x3_s1", "--db", "other.db"])  # a database named on purpose is not made up
    assert r.exit_code == 2 and "no history database at other.db" in r.stderr


# ----------------------------------------------------------------------------- names that fit


def test_names_cut_from_the_middle_stay_distinct() -> None:
    a, b = "2026-12-01_f32_tracking_coop_with_a_long_tag_one", "2026-12-01_f32_tracking_coop_with_a_long_tag_two"
    shown, alike = cut_names([a, b, "short"], 20)
    assert shown["short"] == "short" and not alike
    assert all(len(v) == 20 and "…" in v for k, v in shown.items() if k != "short")
    assert shown[a] != shown[b] and shown[a].startswith("2026-12-01") and shown[a].endswith("_one")
    # two names that differ only deeper inside than any 12-column cut can show: the footnote names them
    c, d = "x" * 10 + "A" + "y" * 10, "x" * 10 + "B" + "y" * 10
    shown, alike = cut_names([c, d], 12)
    assert alike == {c, d} and shown[c] == shown[d]


def test_long_dir_names_and_dirs_of_one_name_stay_distinguishable_at_80_columns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "results"
    long_a = "2026-12-01_f32_tracking_cooperative_groups_attempt_one"
    long_b = "2026-12-01_f32_tracking_cooperative_groups_attempt_two"
    _dir(root, long_a, "r1", 1)
    _dir(root, long_b, "r2", 2, kernel_us=1.004)
    _dir(root / "nodeA", "2026-12-03_f32", "r3", 3, kernel_us=1.008)
    _dir(root / "nodeB", "2026-12-03_f32", "r4", 4, kernel_us=1.012)
    assert runner.invoke(app, ["history", "import", "results"]).exit_code == 0
    r = runner.invoke(app, ["history", "3x3_s1", "--metric", "kernel_us"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    rows = list(_rows(lines).values())
    assert len(rows) == 4 and all(len(ln) <= 80 for ln in lines)
    header = next(ln for ln in lines if "results dir" in ln)
    end = header.index("measured") - 1  # the results dir column: from column 5 to here
    names = [ln[5:end].strip() for ln in rows]
    assert len(set(names)) == 4, names
    assert "nodeA/2026-12-03_f32" in r.stdout and "nodeB/2026-12-03_f32" in r.stdout
    assert any(n.endswith("one") for n in names) and any(n.endswith("two") for n in names)


def test_names_no_cut_tells_apart_are_given_in_full_under_the_table(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # 71 characters that differ at the 36th only: the name column is 36 wide here (80 less the other columns
    # and the widest change, "▶ SLOWER +50.0 %"), so no cut shows that character (a head of at most 34, a
    # tail of at most 34 from the end)
    a, b = "2026-12-01_" + "x" * 24 + "A" + "y" * 35, "2026-12-01_" + "x" * 24 + "B" + "y" * 35
    _dir(tmp_path / "results", a, "r1", 1)
    _dir(tmp_path / "results", b, "r2", 2, kernel_us=1.5)
    assert runner.invoke(app, ["history", "import", "results"]).exit_code == 0
    r = runner.invoke(app, ["history", "3x3_s1", "--metric", "kernel_us"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    rows = _rows(lines)
    assert rows["1"][5:30] == rows["2"][5:30]  # the cut names read alike...
    at = lines.index("results dirs whose cut names read alike, in full:")
    assert lines[at + 1:at + 3] == [f"  #1 {a}", f"  #2 {b}"]  # ...so they are given in full
    assert all(len(ln) <= 80 for ln in lines)
