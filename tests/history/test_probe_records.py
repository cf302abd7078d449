"""The probe records every row it writes in the history database, and --session names its session.

The run is the one of tests/run/test_probe.py (a real command-workload program, a fake nsys writing a fixed
trace, NVML stood in for): only the outermost edges are fakes; the database is a real SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlite_utils

from clusterbench.errors import InputError
from clusterbench.io.history import check_session_name, series
from clusterbench.run.probe import plan_probe, run_probe

from run.test_probe import Edges, config_path, request  # noqa: F401  (the probe's own CPU harness and fixture)


def test_every_probe_row_lands_in_the_history(monkeypatch, config_path: Path, tmp_path: Path) -> None:  # noqa: F811
    edges = Edges(monkeypatch, tmp_path)
    db = tmp_path / "results" / "history.db"
    req = request(config_path, tmp_path, history_db=db, session="alloc-1")
    outcome = run_probe(plan_probe(req), req, nsys=edges.nsys)
    assert outcome.session_id == "alloc-1"
    rows = list(sqlite_utils.Database(db).query("SELECT label, session, git_rev, gpu_name, host, streams, row_json "
                                                "FROM rows ORDER BY label"))
    assert [(r["label"], r["session"], r["streams"]) for r in rows] == [("a", "alloc-1", 1), ("b", "alloc-1", 4)]
    # the toy program's sustained passes, 1000, 2000 and 3000 FPS, with their median (the row's figure)
    metrics = {r["metric"]: r for r in sqlite_utils.Database(db).query(
        "SELECT metrics.* FROM metrics JOIN rows ON rows.id = metrics.row_id WHERE rows.label = 'a'")}
    assert metrics["sustained_fps"]["value"] == 2000.0
    assert json.loads(metrics["sustained_fps"]["samples_json"]) == [1000.0, 2000.0, 3000.0]
    assert metrics["kernel_us"]["value"] == pytest.approx(0.3)  # 3000 ns over 10 frames, as the dir says
    dirs = list(sqlite_utils.Database(db).query("SELECT path, name FROM dirs"))
    assert [d["name"] for d in dirs] == [outcome.results_dir.name]
    pts = series(db, "a", "kernel_us")
    assert len(pts) == 1 and pts[0].session == "alloc-1" and pts[0].value == pytest.approx(0.3)


def test_a_history_that_cannot_be_written_is_a_warning_not_a_lost_probe(monkeypatch, config_path: Path,  # noqa: F811
                                                                         tmp_path: Path) -> None:
    edges = Edges(monkeypatch, tmp_path)
    bad = tmp_path / "not-a-db"
    bad.write_text("this is no SQLite database")
    events: list = []
    req = request(config_path, tmp_path, history_db=bad)
    outcome = run_probe(plan_probe(req), req, on_event=events.append, nsys=edges.nsys)
    assert [r.label for r in outcome.rows] == ["a", "b"]
    warned = [e.message for e in events if e.kind == "warning" and "history database" in (e.message or "")]
    assert len(warned) == 2 and "but not in the history database" in warned[0]


@pytest.mark.parametrize("name", ["", " x", "a b", "x" * 65, "a/b"])
def test_session_names_are_checked(name: str) -> None:
    with pytest.raises(InputError, match="--session takes"):
        check_session_name(name)
    assert check_session_name("alloc-2026-12-01:a") == "alloc-2026-12-01:a"
