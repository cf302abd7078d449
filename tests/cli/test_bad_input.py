"""Every block of env.json, probes.csv and samples.json given a wrong type, through every command that reads a
results dir (compare, history import, floors, baseline set, and probe into a dir that already exists): one
``Error:`` line naming the file and the block, one ``Hint:`` line, exit 2, no traceback.

The blocks and their wrong values are listed here by hand (not taken from the records' own tables), and
the lists are checked to cover every field the records know, so that a block added later is not missed."""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.cli import app
from clusterbench.model.measurement import Measurement
from clusterbench.model.results import COLUMN_KINDS, ConfigEntry, EnvRecord

from exec_programs import write_program
from results_data import write

runner = CliRunner()

# env.json blocks of the current version (EnvRecord's fields), each with values of a wrong type
ENV_BLOCKS = [
    ("tool_version", 1), ("session_id", 5), ("created_utc", 20261201), ("argv", "clusterbench probe"),
    ("argv", ["clusterbench", 5]), ("host", ["node1"]), ("hosts", "node1"), ("git_rev", 123), ("git_dirty", "no"),
    ("gpu_name", 7), ("gpu_uuid", {"id": 1}), ("driver", 580.65), ("cuda_driver", 13.0), ("max_sm_clock_mhz", "1980"),
    ("max_sm_clock_mhz", 1980.5), ("cuda_runtime", 13.2), ("cupy", 14), ("nsys_version", 2025),
    ("nsys_cuda_graph_trace", True), ("python", 3.12), ("pedestal_dtype", 32), ("pedestal", False),
    ("tracer", ["nsys"]), ("workloads", ["cupy"]), ("kernel_sha256", "1de3"), ("kernel_sha256", [1]),
    ("kernel_sha256", {"a.cu": 5}), ("kernel_sources", ["a.cu"]), ("kernel_sources", {"a.cu": 5}),
    ("guard", ["passed"]), ("guard", "passed"), ("configs", "3x3_s1"), ("configs", ["3x3_s1"]),
    ("configs", {"3x3_s1": "frozen"}), ("multi_gpu", 2), ("campaign", "c1"), ("unit", "GPU-0000"),
    ("unit", {"schema": "clusterbench.unit", "version": 7}),
    ("unit", {"schema": "clusterbench.unit", "version": 1, "gpu_uuid": "GPU-1", "link": {"h2d": 55}}),
]  # fmt: skip
# the blocks of a config entry (configs.<label>: ConfigEntry's fields and the key's parts)
ENTRY_BLOCKS = [
    ("session", 5), ("tracer", 1), ("frames", "20000"), ("frames", 2.5), ("params", ["cluster", 3]), ("workload", 1),
    ("command", "python run.py"), ("command", ["python", 3]), ("finder", 2), ("trace", 1), ("clocks", "1980 MHz"),
    ("kernel_sha256", ["a.cu"]), ("analysis", "x"), ("sustained", 5), ("checks", []), ("error", "boom"),
    ("phase_s", [1.0]), ("phase_s", {"trace": "2 s"}), ("config", 5), ("variant", 5),
]  # fmt: skip
# a legacy aare-perf stamp (no version) and versions 1 and 2: the blocks only they have
LEGACY_BLOCKS = [("gpu", 4090), ("driver", 595.71), ("pedestal_dtype", 32), ("git_rev", 1234567), ("dirty", [False]),
                 ("guard", ["x"])]
V2_BLOCKS = [("gpu", 5), ("dirty", "no"), ("probes_csv_version", "2"), ("clocks", [1]), ("configs", "3x3_s1"),
             ("configs", ["3x3_s1"]), ("configs.3x3_s1.sustained_fps", "100,101"),
             ("configs.3x3_s1.sustained_fps", [100.0, "x"]), ("configs.3x3_s1.frames", "20000"), ("guard", [1])]
# samples.json's blocks
SAMPLES_BLOCKS = [
    ("schema", 5), ("version", "4"), ("rows", {"a": 1}), ("rows", "x"), ("rows[0]", "x"), ("rows[0].key", "3x3_s1"),
    ("rows[0].key.config", 5), ("rows[0].key.gpu", "0"), ("rows[0].key.role", 5), ("rows[0].key.variant", 5),
    ("rows[0].session", 5), ("rows[0].timestamp", ["t1"]), ("rows[0].measurements", {"sustained_fps": [1.0]}),
    ("rows[0].measurements[0]", "sustained_fps"), ("rows[0].measurements[0].metric", 5),
    ("rows[0].measurements[0].samples", "1,2,3"), ("rows[0].measurements[0].samples", [99.0, "100"]),
    ("rows[0].measurements[0].samples", [[99.0]]), ("rows[0].measurements[0].input_bytes_per_frame", "8"),
    ("rows[0].measurements[0].metadata", ["x"]),
]  # fmt: skip
# probes.csv: every column that holds a number (or true/false) given text
CSV_COLUMNS = [c for c, k in COLUMN_KINDS.items() if k is not str]

ROW = {"label": "3x3_s1", "cluster": 3, "cap": 3000, "streams": 1, "batch": 2000, "frames": 20000, "kernel_us": 4.32,
       "h2d_us": 13.13, "d2h_us": 6.2, "roofline_us": 13.13, "binds": "h2d", "sustained_fps": 100.0,
       "session": "s1", "timestamp": "2026-12-01T10:00:00Z", "samples": {"sustained_fps": [99.0, 100.0, 101.0]}}
ENV = {"gpu_name": "NVIDIA H200", "git_rev": "r1", "git_dirty": False, "session_id": "s1", "host": "node1",
       "configs": {"3x3_s1": {"session": "s1", "frames": 20000, "tracer": "nsys"}}}
LEGACY_ENV = {"gpu": "NVIDIA H200", "driver": "580.65", "pedestal_dtype": "float32", "git_rev": "1a2b3c4",
              "dirty": False}
HEADER = "label,cluster,cap,streams,batch,frames,kernel_us,h2d_us,d2h_us,roofline_us,binds"
GOOD_CSV = "3x3_s1,3,3000,1,2000,20000,4.32,13.13,6.2,13.13,h2d"


def test_the_lists_cover_every_block() -> None:
    env_fields = {f.name for f in dataclasses.fields(EnvRecord)} - {"blocks"}
    assert {b for b, _ in ENV_BLOCKS} == env_fields
    entry_fields = {f.name for f in dataclasses.fields(ConfigEntry)} - {"extra"}
    assert {b for b, _ in ENTRY_BLOCKS} == entry_fields | {"config", "variant"}
    assert {b for b, _ in LEGACY_BLOCKS} >= {"gpu", "driver", "pedestal_dtype", "git_rev", "dirty"}
    m_fields = {f"rows[0].measurements[0].{f.name}" for f in dataclasses.fields(Measurement)}
    assert m_fields <= {b for b, _ in SAMPLES_BLOCKS}
    assert {"sustained_fps", "cluster", "gpu", "kernel_us", "dropped_clusters"} <= set(CSV_COLUMNS)


def _set(doc: object, path: str, value: object) -> None:
    """Set the block ``path`` (``configs.3x3_s1.frames``, ``rows[0].key``) of a parsed JSON document."""
    parts = [int(i) if i else k for k, i in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path)]
    for p in parts[:-1]:
        doc = doc[p]  # type: ignore[index]
    doc[parts[-1]] = value  # type: ignore[index]


def _bad_dir(root: Path) -> Path:
    """Where the probe below writes (<today>_exec_bad under ``root``), so that every command reads the same dir."""
    return root / f"{datetime.date.today().isoformat()}_exec_bad"


def _good(path: Path) -> Path:
    return write(path, [ROW], ENV)


def _commands(tmp_path: Path, bad: Path) -> list[list[str]]:
    good = _good(tmp_path / "good")
    prog = write_program(tmp_path / "prog")
    db = str(tmp_path / "history.db")
    return [["compare", str(bad), str(good)],
            ["history", "import", str(bad), "--db", db],
            ["floors", str(good), str(bad), "--dry-run"],
            ["baseline", "set", "base", str(bad), "--db", db],
            ["probe", "--dry-run", "--results-dir", str(bad.parent), "--tag", "bad", "--", sys.executable, str(prog)]]


def _check(tmp_path: Path, bad: Path, file: str, names: str) -> None:
    for args in _commands(tmp_path, bad):
        r = runner.invoke(app, args, env={"COLUMNS": "100"})
        what = f"{args[:2]} on {file} {names}: {r.output}"
        assert r.exit_code == 2, what
        assert "Traceback" not in r.output and (r.exception is None or isinstance(r.exception, SystemExit)), what
        lines = r.stderr.splitlines()
        assert sum(ln.startswith("Error: ") for ln in lines) == 1 and sum(ln.startswith("Hint: ") for ln in lines) == 1
        text = " ".join(r.stderr.split())
        assert str(bad / file) in text and names in text, what
        assert r.stdout == "", what


@pytest.mark.parametrize(("block", "value"), ENV_BLOCKS + [(f"configs.3x3_s1.{b}", v) for b, v in ENTRY_BLOCKS])
def test_env_json_block_of_a_wrong_type(tmp_path: Path, block: str, value: object) -> None:
    bad = _good(_bad_dir(tmp_path / "results"))
    doc = json.loads((bad / "env.json").read_text())
    _set(doc, block, value)
    (bad / "env.json").write_text(json.dumps(doc))
    _check(tmp_path, bad, "env.json", f"env.json block '{block}")


def _old_dir(bad: Path, env: dict) -> Path:
    bad.mkdir(parents=True)
    (bad / "probes.csv").write_text(f"{HEADER},sustained_fps\n{GOOD_CSV},100.0\n")
    (bad / "env.json").write_text(json.dumps(env))
    return bad


@pytest.mark.parametrize(("block", "value"), LEGACY_BLOCKS)
def test_legacy_env_json_block_of_a_wrong_type(tmp_path: Path, block: str, value: object) -> None:
    bad = _old_dir(_bad_dir(tmp_path / "results"), {**LEGACY_ENV, block: value})
    _check(tmp_path, bad, "env.json", f"env.json block '{block}")


@pytest.mark.parametrize(("block", "value"), V2_BLOCKS)
def test_version_2_env_json_block_of_a_wrong_type(tmp_path: Path, block: str, value: object) -> None:
    doc = {"schema_version": 2, "probes_csv_version": 2, "gpu_name": "NVIDIA H200",
           "configs": {"3x3_s1": {"frames": 20000, "sustained_fps": [99.0, 100.0, 101.0]}}}
    _set(doc, block, value)
    bad = _old_dir(_bad_dir(tmp_path / "results"), doc)
    _check(tmp_path, bad, "env.json", f"env.json block '{block}")


@pytest.mark.parametrize(("block", "value"), SAMPLES_BLOCKS)
def test_samples_json_block_of_a_wrong_type(tmp_path: Path, block: str, value: object) -> None:
    bad = _good(_bad_dir(tmp_path / "results"))
    doc = json.loads((bad / "samples.json").read_text())
    _set(doc, block, value)
    (bad / "samples.json").write_text(json.dumps(doc))
    top = block.split(".")[0].split("[")[0]
    names = f"samples.json block '{block}" if top == "rows" else f"samples.json blocks 'schema' and 'version'"
    _check(tmp_path, bad, "samples.json", names)


@pytest.mark.parametrize("column", CSV_COLUMNS)
def test_probes_csv_column_holding_text(tmp_path: Path, column: str) -> None:
    bad = _good(_bad_dir(tmp_path / "results"))
    lines = (bad / "probes.csv").read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[1].split(",")
    cells[header.index(column)] = "fast"
    (bad / "probes.csv").write_text("\n".join([lines[0], ",".join(cells)]) + "\n")
    _check(tmp_path, bad, "probes.csv", f"column {column}: expected")
