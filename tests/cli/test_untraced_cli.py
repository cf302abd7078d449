"""The CLI of the untraced frame: analyze --untraced splits a real trace again from a hand-written record
(its figures worked out by hand in the comments), refuses a bad record before reading the trace, and probe
refuses --what-binds where it cannot run, before any GPU call."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_output import messages
from typer.testing import CliRunner

from clusterbench.cli import app
from conftest import DATA

TURNS = DATA / "zoo" / "zoo_turns.sqlite"
RECORD = DATA / "untraced" / "turns.untraced.json"


def runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def test_analyze_untraced_splits_the_trace_again(tmp_path: Path) -> None:
    res = runner().invoke(app, ["analyze", str(TURNS), "--window", "range:loop", "--frames", "kernel:zoo_calib",
                                "--untraced", str(RECORD), "--json"])
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    un = doc["untraced"]
    parts = {p["resource"]: p for p in un["split"]["parts"]}
    path = un["path"]
    for e in ("kernel", "h2d", "d2h"):
        assert parts[e]["untraced_us"] == parts[e]["traced_us"] == pytest.approx(path["engines_us"][e])
    # the record's chain of h2d, event, kernel, event, d2h takes 30 µs; the trace's mean op times are its own
    # (h2d, kernel, d2h): the rest over the 3 ops a trace shows is the latency per gap
    op = path["op_us"]
    g_u = (30.0 - op["h2d"] - op["kernel"] - op["d2h"]) / 3
    assert parts["gpu_latency"]["untraced_us"] == pytest.approx(path["idle_gaps"] * g_u)
    # the round trip: each wake at 3.5 µs and each launch after it at 5.0 µs (the record's latency run)
    assert parts["round_trip"]["untraced_us"] == pytest.approx(sum(h["wakes"] for h in path["hosts"]) * 3.5
                                                              + path["launches_after_wake"] * 5.0)
    (host,) = [p for r, p in parts.items() if r.startswith("host:")]
    (h,) = path["hosts"]
    turns_u = h["after_waits"] * 30.5  # the record's thread: 30.5 µs from a wait's return to its next issue
    assert turns_u <= host["untraced_us"] <= turns_u + (40.0 - turns_u)
    assert un["split"]["frame_us"] == 80.0
    assert un["split"]["traced_us"] == pytest.approx(sum(p["traced_us"] for p in parts.values()))
    assert un["idle"]["gpu_own_us"] == pytest.approx(path["idle_gaps"] * g_u)
    assert un["idle"]["profiler_us"] is None  # the record's latency program did not run under the profiler
    # the traced figures are analyze's own, unchanged
    plain = json.loads(runner().invoke(app, ["analyze", str(TURNS), "--window", "range:loop", "--frames",
                                             "kernel:zoo_calib", "--json"]).stdout)
    assert {k: v for k, v in doc.items() if k != "untraced"} == plain


def test_analyze_untraced_replays_the_records_delay_test_on_the_trace(tmp_path: Path) -> None:
    from clusterbench.analyzers.untraced import fit_slope
    from clusterbench.model.untraced import DelayTest

    # a delay test of k 40 µs in which all three moved the frame by k (turns: the host's spin and the GPU's
    # frame take turns, as the zoo's program says of itself); the replay on its trace must name the same
    slopes = tuple(fit_slope(r, 40.0, [80.0, 80.0], [120.0, 120.0]) for r in ("host", "gpu", "link"))
    test = DelayTest(2, 40.0, 1_280_000, 32.0, (), slopes, "host+gpu+link")
    doc = json.loads(RECORD.read_text())
    doc["delay_test"] = test.to_json()
    rec = tmp_path / "turns.untraced.json"
    rec.write_text(json.dumps(doc))
    res = runner().invoke(app, ["analyze", str(TURNS), "--window", "range:loop", "--frames", "kernel:zoo_calib",
                                "--untraced", str(rec)], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.stderr
    assert "the trace, the same delays replayed on it" in res.stdout and "as the delay test found" in res.stdout
    js = runner().invoke(app, ["analyze", str(TURNS), "--window", "range:loop", "--frames", "kernel:zoo_calib",
                               "--untraced", str(rec), "--json"])
    replay = json.loads(js.stdout)["untraced"]["replay"]
    assert [(r["resource"], r["verdict"], r["k_us"]) for r in replay] == [
        ("host", "binds", 40.0), ("gpu", "binds", 40.0), ("link", "binds", 40.0)]


def test_analyze_untraced_table_fits_80_columns() -> None:
    res = runner().invoke(app, ["analyze", str(TURNS), "--window", "range:loop", "--frames", "kernel:zoo_calib",
                                "--untraced", str(RECORD)], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.stderr
    tail = res.stdout[res.stdout.index("what binds zoo_turns.sqlite"):]
    assert "the frame split by resource" in tail and "gpu_latency" in tail and "round_trip" in tail
    assert all(len(line) <= 80 for line in tail.splitlines()), tail


@pytest.mark.parametrize("content,words", [
    (None, "no such file"),
    ("{", "not JSON"),
    (json.dumps({"schema": "clusterbench.untraced-record", "version": 99}), "version 99"),
    (json.dumps({"schema": "other"}), "not a clusterbench.untraced-record record"),
])
def test_analyze_refuses_a_bad_record_before_the_trace(tmp_path: Path, content, words) -> None:
    f = tmp_path / "r.json"
    if content is not None:
        f.write_text(content)
    res = runner().invoke(app, ["analyze", str(tmp_path / "missing.sqlite"), "--untraced", str(f)])
    assert res.exit_code == 2, res.stderr
    assert words in messages(res.stderr)[0] and "Hint:" in res.stderr
    res = runner().invoke(app, ["analyze", str(TURNS), "--untraced", str(RECORD), "--csv"])
    assert res.exit_code == 2 and "--csv has no place for it" in messages(res.stderr)[0]


def test_probe_refuses_what_binds_where_it_cannot_run(tmp_path: Path) -> None:
    toml = tmp_path / "c.toml"
    toml.write_text('[[config]]\nlabel = "a"\ncluster = 3\ncap = 10\nstreams = 1\nbatch = 10\nframes = 100\n')
    res = runner().invoke(app, ["probe", "--what-binds", "--config", str(toml), "--dry-run"])
    assert res.exit_code == 2 and "runs a program as it is" in messages(res.stderr)[0]
    res = runner().invoke(app, ["probe", "--what-binds", "--frames", "100", "--dry-run", "--", sys.executable, "-c", "1"])
    assert res.exit_code == 2 and "marks a frame at a call" in messages(res.stderr)[0]
    res = runner().invoke(app, ["probe", "--delay-us", "5", "--dry-run", "--", sys.executable, "-c", "1"])
    assert res.exit_code == 2 and "only --what-binds runs" in messages(res.stderr)[0]
    res = runner().invoke(app, ["probe", "--what-binds", "--frames", "kernel:k", "--rate", r"rate: ([0-9.]+)",
                                "--dry-run", "--results-dir", str(tmp_path / "r"), "--", sys.executable, "-c", "1"],
                          env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.stderr
    line = " ".join(ln.strip() for ln in res.stdout.splitlines())
    assert "what binds: the program again with CUDA_INJECTION64_PATH" in line and "frames marked at kernel:k" in line
    assert "3 processes at each point" in line and "and without it" in line
