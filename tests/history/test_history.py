"""The history database and its commands: import (twice), the series and its steps, named baselines, the
HTML site, and several processes writing at once. A real SQLite file through sqlite-utils; results dirs
written by the real store; every expected value worked out here."""

from __future__ import annotations

import json
import multiprocessing
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
import sqlite_utils
from typer.testing import CliRunner

from clusterbench.cli import app
from clusterbench.compare.compare import Reason, Verdict
from clusterbench.compare.history import history_series
from clusterbench.errors import InputError
from clusterbench.io.history import baseline_results, import_dirs, series, set_baseline

from results_data import write

ROOT = Path(__file__).resolve().parents[2]
H200_FLOORS = ROOT / "tests" / "data" / "results" / "floors" / "NVIDIA_H200.json"
runner = CliRunner()

# (dir, git rev, measured at, kernel µs/frame of 3x3_s1, D2H µs/frame of 3x3_s4): d1 and d2 are one build (A/A);
# d3 a slower kernel (+29.48 % against d2), d4 within 1 % of d3, d5 back to 1.00; 3x3_s4's D2H doubles at d3
SERIES = [("2026-12-01_f32_d1", "r1", "2026-12-01T10:00:00Z", 1.000, 10.0),
          ("2026-12-01_f32_d2", "r1", "2026-12-01T11:00:00Z", 1.004, 10.2),
          ("2026-12-02_f32_d3", "r2", "2026-12-02T10:00:00Z", 1.300, 20.0),
          ("2026-12-03_f32_d4", "r3", "2026-12-03T10:00:00Z", 1.305, 21.0),
          ("2026-12-04_f32_d5", "r4", "2026-12-04T10:00:00Z", 1.000, 10.1)]


def _rows(kernel: float, d2h4: float, ts: str, session: str) -> list[dict]:
    base = {"cap": 3000, "batch": 2000, "frames": 20000, "pedestal_dtype": "float32", "pedestal": "frozen",
            "transfer": "copy", "tracer": "nsys", "timestamp": ts, "session": session}
    return [{**base, "label": "3x3_s1", "cluster": 3, "streams": 1, "kernel_us": kernel, "h2d_us": 5.0,
             "d2h_us": 2.0, "roofline_us": 5.0, "binds": "h2d", "sustained_fps": 100_000.0,
             "samples": {"sustained_fps": [99_950.0, 100_000.0, 100_050.0]}},
            {**base, "label": "3x3_s4", "cluster": 3, "streams": 4, "kernel_us": kernel, "h2d_us": 6.0,
             "d2h_us": d2h4, "roofline_us": max(6.0, d2h4), "binds": "h2d" if d2h4 < 6.0 else "d2h"}]


def _dirs(root: Path) -> list[Path]:
    out = []
    for name, rev, ts, kernel, d2h in SERIES:
        out.append(write(root / name, _rows(kernel, d2h, ts, session=name),
                         {"gpu_name": "NVIDIA H200", "git_rev": rev, "git_dirty": False, "session_id": name,
                          "created_utc": ts, "host": "node1", "driver": "580.65"}))
    return out


def test_import_twice_adds_nothing_the_second_time(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path / "results")
    db = tmp_path / "results" / "history.db"
    first = import_dirs(db, dirs)
    assert [d.rows_added for d in first] == [2] * 5
    again = import_dirs(db, dirs)
    assert [d.rows_added for d in again] == [0] * 5
    con = sqlite_utils.Database(db)
    assert con["rows"].count == 10 and con["dirs"].count == 5
    # every numeric column, with the raw samples of the sustained FPS
    m = {r["metric"]: r for r in con.query("SELECT m.* FROM metrics m JOIN rows r ON r.id = m.row_id "
                                           "JOIN dirs d ON d.id = r.dir_id WHERE d.name = ? AND r.label = ?",
                                           [SERIES[0][0], "3x3_s1"])}
    assert m["kernel_us"]["value"] == 1.0 and m["streams"]["value"] == 1.0
    assert json.loads(m["sustained_fps"]["samples_json"]) == [99_950.0, 100_000.0, 100_050.0]
    row = next(con.query("SELECT * FROM rows WHERE label = '3x3_s4' ORDER BY id LIMIT 1"))
    assert (row["git_rev"], row["git_dirty"], row["gpu_name"], row["host"], row["streams"]) == \
        ("r1", 0, "NVIDIA H200", "node1", 4)
    assert {r["key"]: r["value"] for r in con.query("SELECT * FROM meta")} == {"schema": "clusterbench.io.history",
                                                                              "version": "1"}
    # a re-probe of one row of d5 adds that row's new version, and the series shows it
    write(dirs[4], [{**_rows(1.01, 10.1, "2026-12-04T12:00:00Z", "again")[0]}])
    assert [d.rows_added for d in import_dirs(db, dirs)] == [0, 0, 0, 0, 1]
    assert series(db, "3x3_s1", "kernel_us")[-1].value == 1.01


def test_series_and_steps(tmp_path: Path) -> None:
    dirs = _dirs(tmp_path / "results")
    db = tmp_path / "results" / "history.db"
    import_dirs(db, dirs)
    pts = series(db, "3x3_s1", "kernel_us")
    assert [p.dir_name for p in pts] == [s[0] for s in SERIES]
    assert [p.value for p in pts] == [s[3] for s in SERIES]
    # no floors file: the default bound; two sessions and no GPU UUID in these dirs make every pair two units, and
    # the 1-stream kernel's across-units default bound is 2 % (compare/bounds.py)
    s = history_series("3x3_s1", "kernel_us", pts)
    # d1 -> d2 is one build: no transition. d2 -> d3, d3 -> d4, d4 -> d5 are.
    assert [(t.before.dir_name[-2:], t.after.dir_name[-2:]) for t in s.transitions] == [("d2", "d3"), ("d3", "d4"),
                                                                                      ("d4", "d5")]
    up, flat, down = s.transitions
    assert (up.delta.verdict, up.delta.code) == (Verdict.SLOWER, Reason.BEYOND_NOISE)
    assert up.delta.delta_pct == pytest.approx((1.300 - 1.004) / 1.004 * 100)  # +29.48 %
    assert up.delta.noise == pytest.approx(0.02008) and up.delta.provisional  # 2 % of 1.004
    assert flat.delta.verdict is Verdict.SAME  # +0.38 % < 2 %
    assert down.delta.verdict is Verdict.FASTER and down.delta.delta_pct == pytest.approx((1.0 - 1.305) / 1.305 * 100)
    assert [t.after.dir_name[-2:] for t in s.steps] == ["d3", "d5"]
    # 4 streams, two sessions: D2H 10.2 -> 20.0 (+96 %) is beyond the 20 % drift bound; 20.0 -> 21.0 (+5 %) within
    s4 = history_series("3x3_s4", "d2h_us", series(db, "3x3_s4", "d2h_us"))
    codes = [(t.delta.verdict, t.delta.code) for t in s4.transitions]
    assert codes == [(Verdict.SLOWER, Reason.BEYOND_DRIFT), (Verdict.NOT_COMPARABLE, Reason.SESSION_DRIFT),
                     (Verdict.FASTER, Reason.BEYOND_DRIFT)]
    assert s4.steps[0].delta.cross_session and s4.steps[0].delta.bound_pct == 20.0
    # filters
    assert [p.dir_name[-2:] for p in series(db, "3x3_s1", "kernel_us", since="2026-12-03")] == ["d4", "d5"]
    assert series(db, "3x3_s1", "kernel_us", gpu="h100") == ()
    assert len(series(db, "3x3_s1", "kernel_us", gpu="h200")) == 5


def test_history_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    dirs = _dirs(tmp_path / "results")
    (tmp_path / "results" / "floors").mkdir()
    shutil.copy(H200_FLOORS, tmp_path / "results" / "floors")
    r = runner.invoke(app, ["history", "import", *map(str, dirs)], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert "history: results/history.db (10 row(s) added from 5 results dir(s))" in r.stdout
    r = runner.invoke(app, ["history", "import", *map(str, dirs)], env={"COLUMNS": "80"})
    assert "(0 row(s) added from 5 results dir(s))" in r.stdout
    r = runner.invoke(app, ["history", "3x3_s1", "--metric", "kernel_us"], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert all(len(ln) <= 80 for ln in lines)
    assert "floors: floors of NVIDIA H200 from results/floors/NVIDIA_H200.json" in r.stdout
    d3 = next(ln for ln in lines if "2026-12-02_f32_d3" in ln and ln.startswith("   3"))
    assert d3.split()[-3:] == ["SLOWER", "+29.5", "%"] and "▶" in d3
    d4 = next(ln for ln in lines if ln.startswith("   4"))
    assert d4.split()[-3:] == ["same", "+0.4", "%"]
    doc = json.loads(runner.invoke(app, ["history", "3x3_s1", "--metric", "kernel_us", "--json"]).stdout)
    assert [p["dir"] for p in doc["points"]] == [s[0] for s in SERIES]
    assert [p["value"] for p in doc["points"]] == [s[3] for s in SERIES]
    assert doc["points"][0]["change"] is None and doc["points"][2]["change"]["verdict"] == "SLOWER"
    assert [(s["from"], s["to"], s["verdict"]) for s in doc["steps"]] == [
        ("2026-12-01_f32_d2", "2026-12-02_f32_d3", "SLOWER"), ("2026-12-03_f32_d4", "2026-12-04_f32_d5", "FASTER")]
    assert doc["floors"][0]["path"] == "results/floors/NVIDIA_H200.json"
    # sustained FPS with its repeats: d2 -> d3 is a change of build whose figure and repeats are the same numbers:
    # SAME, identical
    doc = json.loads(runner.invoke(app, ["history", "3x3_s1", "--metric", "sustained_fps", "--json"]).stdout)
    assert doc["steps"] == [] and doc["points"][2]["change"]["reason_code"] == "identical"
    assert doc["points"][0]["samples"] == [99_950.0, 100_000.0, 100_050.0]
    # mistakes: one Error line, exit 2
    for args, text in ((["history", "nope"], "no rows of 'nope'"),
                       (["history", "3x3_s1", "--since", "yesterday"], "--since takes a date"),
                       (["history", "3x3_s1", "--metric", "colour"], "has no colour"),
                       (["history", "import"], "needs one or more results dirs"),
                       (["history", "3x3_s1", "--db", str(tmp_path / "none.db")], "no history database"),
                       (["history", "a", "b"], "history takes one LABEL")):
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and text in r.stderr and "Traceback" not in r.output, (args, r.output)


def test_plot_of_a_series(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    import_dirs(tmp_path / "results" / "history.db", _dirs(tmp_path / "results"))
    out = tmp_path / "trend.png"
    r = runner.invoke(app, ["history", "3x3_s1", "--metric", "kernel_us", "--plot", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_bytes()[:4] == b"\x89PNG" and f"Wrote {out}" in r.stderr


def test_baselines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    dirs = _dirs(tmp_path / "results")
    r = runner.invoke(app, ["baseline", "set", "release-1", str(dirs[0])])
    assert r.exit_code == 0, r.output
    assert "baseline release-1: 2 row(s) of 2026-12-01_f32_d1 (3x3_s1, 3x3_s4)" in r.stdout
    # d1 is probed again (its 3x3_s1 kernel now 1.5); the baseline still holds 1.0
    write(dirs[0], [_rows(1.5, 10.0, "2026-12-05T10:00:00Z", "later")[0]])
    base = baseline_results(tmp_path / "results" / "history.db", "release-1")
    assert base.row("3x3_s1").kernel_us == 1.0 and base.name == "2026-12-01_f32_d1"
    r = runner.invoke(app, ["compare", "baseline:release-1", str(dirs[0]), "--json"])
    assert r.exit_code == 0, r.output
    k = {row["label"]: row for row in json.loads(r.stdout)["rows"]}["3x3_s1"]["metrics"]["kernel_us"]
    assert (k["before"], k["after"], k["verdict"]) == (1.0, 1.5, "SLOWER")
    assert k["delta_pct"] == pytest.approx(50.0)
    doc = json.loads(runner.invoke(app, ["baseline", "list", "--json"]).stdout)
    assert [b["name"] for b in doc["baselines"]] == ["release-1"]
    # setting the name again moves it
    set_baseline(tmp_path / "results" / "history.db", "release-1", dirs[4])
    assert baseline_results(tmp_path / "results" / "history.db", "release-1").name == "2026-12-04_f32_d5"
    r = runner.invoke(app, ["compare", "baseline:nope", str(dirs[0])])
    assert r.exit_code == 2 and "no baseline named 'nope'" in r.stderr and "release-1" in r.stderr
    with pytest.raises(InputError, match="a baseline name"):
        set_baseline(tmp_path / "results" / "history.db", "bad name", dirs[0])


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sections: list[dict] = []
        self.step_links: list[str] = []
        self.svg_links: list[str] = []
        self.svgs = 0
        self._in_svg = False

    def handle_starttag(self, tag: str, attrs) -> None:  # noqa: ANN001
        a = dict(attrs)
        if tag == "section":
            self.sections.append(a)
        if tag == "svg":
            self.svgs += 1
        if tag == "a" and a.get("class") == "step":
            self.step_links.append(a["href"])
        if tag == "a" and "xlink:href" in a:
            self.svg_links.append(a["xlink:href"])


def test_html_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    import_dirs(tmp_path / "results" / "history.db", _dirs(tmp_path / "results"))
    site = tmp_path / "site"
    r = runner.invoke(app, ["history", "--html", str(site)])
    assert r.exit_code == 0, r.output
    page = _Page()
    page.feed((site / "index.html").read_text())
    got = {(s["data-label"], s["data-metric"]): int(s["data-steps"]) for s in page.sections}
    # kernel: d2 -> d3 SLOWER, d4 -> d5 FASTER (1 % rule); 3x3_s4 D2H: beyond the 20 % bound twice; its
    # roofline follows D2H (binds on it); H2D and sustained never moved
    assert got[("3x3_s1", "kernel_us")] == 2 and got[("3x3_s4", "d2h_us")] == 2
    assert got[("3x3_s4", "roofline_us")] == 2 and got[("3x3_s1", "h2d_us")] == 0
    assert got[("3x3_s1", "sustained_fps")] == 0
    assert page.svgs == len(got)  # one trend plot per label and metric
    assert set(page.svg_links) == set(page.step_links)  # the markers link where the table does
    assert "compare/2026-12-01_f32_d2__2026-12-02_f32_d3.html" in page.step_links
    for href in set(page.step_links):
        text = (site / href).read_text()
        assert "compare 2026-" in text and "kernel µs" in text and "../index.html" in text
    cmp = (site / "compare/2026-12-01_f32_d2__2026-12-02_f32_d3.html").read_text()
    assert "+29.48 % SLOWER" in cmp
    # 9 series; steps: 3x3_s1 kernel 2, 3x3_s4 kernel 2 (the same kernels), D2H 2, roofline 2
    assert f"Wrote {site / 'index.html'}: {len(got)} series, 8 step(s)" in " ".join(r.stdout.split())


def _writer(db: str, dirs: list[str], barrier) -> None:  # noqa: ANN001
    barrier.wait()
    import_dirs(Path(db), [Path(d) for d in dirs])


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    # 6 processes, 4 results dirs each of 2 rows, all released at once into one database
    procs_n, per = 6, 4
    dirs = [[write(tmp_path / f"w{p}_{i}", _rows(1.0 + p / 100 + i / 1000, 10.0, f"2026-12-01T0{p}:0{i}:00Z", f"s{p}{i}"),
                   {"gpu_name": "NVIDIA H200", "git_rev": f"r{p}", "git_dirty": False, "session_id": f"s{p}{i}"})
             for i in range(per)] for p in range(procs_n)]
    db = tmp_path / "history.db"
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(procs_n)
    procs = [ctx.Process(target=_writer, args=(str(db), [str(d) for d in ds], barrier)) for ds in dirs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * procs_n
    con = sqlite_utils.Database(db)
    assert con["dirs"].count == procs_n * per and con["rows"].count == procs_n * per * 2
    assert next(con.query("SELECT count(DISTINCT row_id) AS n FROM metrics"))["n"] == procs_n * per * 2
    assert len(series(db, "3x3_s1", "kernel_us")) == procs_n * per
