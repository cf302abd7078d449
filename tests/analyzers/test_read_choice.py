"""Which way analyze reads a trace (analysis.read_choice): whole up to WHOLE_ROWS_LIMIT activity, CUDA API
and synchronization rows, in time slabs past it; CLUSTERBENCH_ANALYZE_PATH=whole|slabs|auto decides
instead, and any other value is bad input (exit 2). The rows are counted from the tables' largest rowids
and checked here against count(*). Both ways give the same JSON; the CLI says on stderr when it reads in
slabs (and when the slabs do not apply after all), and the benchmark reads that to report the way taken."""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.analyzers import analysis as A
from clusterbench.cli import app
from clusterbench.errors import InputError
from clusterbench.io.nsys import reader as R

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
DEV = DATA / "h200" / "dev_7x7_s3_b250_async.sqlite"
DEVICE_ROWS = DATA / "zoo" / "zoo_device_graph_graph.sqlite"  # rows the device launched: the slabs do not apply
COUNTED = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "CUPTI_ACTIVITY_KIND_MEMCPY",
           "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER",
           "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")  # fmt: skip


def _count(path: Path) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    n = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in COUNTED if t in have)
    con.close()
    return n


@pytest.mark.parametrize("name", ["dev_7x7_s3_b250_async", "zoo_device_graph_graph", "sample_simpleHyperQ", "zoo_pageable"])
def test_rows_are_the_tables_rows(name: str) -> None:
    path = next(DATA.rglob(f"{name}.sqlite"))
    choice = A.read_choice(path, environ={})
    assert choice.rows == _count(path) > 0
    assert (choice.path, choice.setting, choice.limit) == ("whole", "auto", A.WHOLE_ROWS_LIMIT)


def test_auto_reads_in_slabs_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    n = _count(DEV)
    monkeypatch.setattr(A, "WHOLE_ROWS_LIMIT", n)
    assert A.read_choice(DEV, environ={}).path == "whole"  # at the limit: whole
    monkeypatch.setattr(A, "WHOLE_ROWS_LIMIT", n - 1)
    assert A.read_choice(DEV, environ={}).path == "slabs"
    assert A.read_choice(DEV, environ={A.PATH_ENV: "whole"}).path == "whole"  # the setting wins
    monkeypatch.setattr(A, "WHOLE_ROWS_LIMIT", 10**12)
    assert A.read_choice(DEV, environ={A.PATH_ENV: " Slabs "}).path == "slabs"
    assert A.read_choice(DEV, environ={A.PATH_ENV: "auto"}).path == "whole"
    assert A.read_choice(DEV, environ={A.PATH_ENV: ""}).setting == "auto"


def test_a_bad_setting_is_bad_input() -> None:
    with pytest.raises(InputError, match="CLUSTERBENCH_ANALYZE_PATH='fast' is not one of auto, whole, slabs"):
        A.path_setting({A.PATH_ENV: "fast"})
    res = CliRunner().invoke(app, ["analyze", str(DEV), "--json"], env={A.PATH_ENV: "fast"})
    assert res.exit_code == 2
    assert res.stderr.startswith("Error: CLUSTERBENCH_ANALYZE_PATH='fast'") and "Hint:" in res.stderr
    assert res.stdout == ""


def _bench():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("bench_analyze", ROOT / "benchmarks" / "bench_analyze.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_both_ways_give_the_same_json_and_the_cli_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = _bench()
    out = {}
    for setting in ("whole", "slabs", "auto"):
        res = CliRunner().invoke(app, ["analyze", str(DEV), "--json"], env={A.PATH_ENV: setting, "COLUMNS": "80"})
        assert res.exit_code == 0, res.output
        out[setting] = (res.stdout, res.stderr, bench.path_taken(res.stderr))
    assert out["whole"][0] == out["slabs"][0] == out["auto"][0]
    assert (out["whole"][1], out["auto"][1]) == ("", "")  # reading whole says nothing
    assert out["slabs"][1].startswith("analyze: CLUSTERBENCH_ANALYZE_PATH=slabs: reading in time slabs")
    assert all(len(line) <= 80 for line in out["slabs"][1].splitlines())
    assert [out[s][2] for s in ("whole", "slabs", "auto")] == ["whole", "slabs", "whole"]
    # past the limit, auto says how many rows and the limit (in this process: the limit patched)
    n = _count(DEV)
    monkeypatch.setattr(A, "WHOLE_ROWS_LIMIT", n - 1)
    res = CliRunner().invoke(app, ["analyze", str(DEV), "--json"], env={A.PATH_ENV: "auto", "COLUMNS": "200"})
    assert res.exit_code == 0 and res.stdout == out["whole"][0]
    assert res.stderr == (f"analyze: {n:,} activity, API and synchronization rows, over the {n - 1:,} read whole "
                          "within the memory limit: reading in time slabs (bounded memory; slower than reading whole)\n")
    assert bench.path_taken(res.stderr) == "slabs"


def test_where_the_slabs_do_not_apply_it_reads_whole_and_says_so() -> None:
    bench = _bench()
    whole = CliRunner().invoke(app, ["analyze", str(DEVICE_ROWS), "--json"], env={A.PATH_ENV: "whole"})
    res = CliRunner().invoke(app, ["analyze", str(DEVICE_ROWS), "--json"], env={A.PATH_ENV: "slabs", "COLUMNS": "200"})
    assert res.exit_code == whole.exit_code == 0 and res.stdout == whole.stdout
    notes = [line for line in res.stderr.splitlines() if line.startswith("analyze:")]
    assert len(notes) == 2 and notes[1].startswith("analyze: the time slabs do not apply (a row without a correlation id")
    n = _count(DEVICE_ROWS)
    said = " ".join(res.stderr.split())
    assert (f"reading whole, {n:,} activity, API and synchronization rows, about {(63_000_000 + 66 * n) / 1e6:,.2f} MB of "
            "memory at the peak (63 MB + 66 bytes a row); memory grows with the trace") in said
    assert bench.path_taken(res.stderr) == "whole"


def test_where_the_slabs_do_not_apply_and_a_whole_read_would_not_fit_it_refuses(monkeypatch) -> None:
    monkeypatch.setattr(A, "available_memory", lambda meminfo="/proc/meminfo": 2_000_000)
    res = CliRunner().invoke(app, ["analyze", str(DEVICE_ROWS), "--json"], env={A.PATH_ENV: "slabs", "COLUMNS": "200"})
    assert res.exit_code == 2 and res.stdout == ""
    said = " ".join(res.stderr.split())
    assert "the time slabs do not apply (a row without a correlation id" in said
    assert "more than the 2.00 MB this machine has available" in said and "CLUSTERBENCH_ANALYZE_PATH=whole" in said
    assert "Traceback" not in res.output


def test_the_count_reads_no_table_through(tmp_path: Path) -> None:
    """The count is the largest rowid: rows deleted below it still count (never fewer than the rows)."""
    dst = tmp_path / "gapped.sqlite"
    dst.write_bytes(DEV.read_bytes())
    con = sqlite3.connect(dst)
    gone = con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE rowid % 2 = 0 AND rowid < 100").rowcount
    con.commit()
    con.close()
    assert gone > 0
    assert sum(R.table_rows(dst).values()) == _count(DEV) == _count(dst) + gone


# (table, column, SQL value, the error's words): a value of the wrong type or size in a column analyze reads
BROKEN = [
    ("CUPTI_ACTIVITY_KIND_KERNEL", "start", "'abc'", "holds text 'abc' at rowid {rowid}, where nsys writes an integer"),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", "end", "2.5", "holds real 2.5 at rowid {rowid}, where nsys writes an integer"),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "start", "'t0'", "holds text 't0' at rowid {rowid}, where nsys writes an integer"),
    ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "start", "'later'", "holds text 'later' at rowid {rowid}, where nsys writes an integer"),
    ("CUPTI_ACTIVITY_KIND_KERNEL", "end", str(2**62 + 5), "holds 4,611,686,018,427,387,909 at rowid {rowid}, beyond what nsys writes"),
]  # fmt: skip


@pytest.mark.parametrize(("table", "column", "value", "words"), BROKEN, ids=lambda x: str(x)[:12])
def test_a_value_of_the_wrong_type_is_named_on_both_ways(table: str, column: str, value: str, words: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A value nsys never writes, in a row past the first slabs (64-row chunks: the slabs before it are analysed
    first): exit 2 and one Error naming TABLE.column, its row and value, read whole and in time slabs alike."""
    src = DATA / "zoo" / "zoo_pipeline.sqlite"  # 801 to 4,119 rows in each of these tables
    dst = tmp_path / "broken.sqlite"
    dst.write_bytes(src.read_bytes())
    con = sqlite3.connect(dst)
    rowid = con.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] * 2 // 3  # well past the first chunks
    assert rowid > 3 * 64
    con.execute(f"UPDATE {table} SET [{column}] = {value} WHERE rowid = ?", (rowid,))
    con.commit()
    con.close()
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 64)
    want = f"Error: {table}.{column} {words.format(rowid=rowid)}"
    for way in ("whole", "slabs"):
        res = CliRunner().invoke(app, ["analyze", str(dst), "--json"], env={A.PATH_ENV: way, "COLUMNS": "300"})
        assert res.exit_code == 2, (way, res.output)
        errors = [line for line in res.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and errors[0].startswith(want), (way, res.stderr)
        assert "Traceback" not in res.output and res.stdout == ""
        assert ("reading in time slabs" in res.stderr) == (way == "slabs")
