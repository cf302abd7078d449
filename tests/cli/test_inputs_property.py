"""Generated bad values into every reader of user files, through the commands that read them (Hypothesis).

For nsys exports (real ones from tests/data and a synthetic one of an older schema era), env.json, probes.csv,
samples.json and configs.toml, each example takes a good file and breaks it: a value of another type (text, a
real, an integer of any size, NULL, bytes, any JSON value) put into a table column, a JSON block or a CSV cell;
a table, column or key dropped; rows emptied; or text generated whole. The command that reads the file then
runs (analyze, compare, history import, probe --dry-run), and every example must:

- end in exit 0 (the value was harmless), 2 (refused: one ``Error:`` line naming what was wrong) or 3 (compare
  judged), never with an exception, a traceback or the catch-all exit 1;
- leave every input file byte for byte as it was, and add no file beside it (no journal, no WAL).

The examples are derandomized and bounded (the "ci" profile; about 30 s in all on a 2-core machine), so that
``make test`` runs the same examples every time. ``HYPOTHESIS_PROFILE=deep`` runs many more, at random.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from clusterbench.cli import build_app  # noqa: E402

import fake_nsys as F  # noqa: E402
from results_data import write  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
_COMMON = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", derandomize=True, max_examples=100, **_COMMON)
settings.register_profile("deep", max_examples=2000, **_COMMON)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
LIMIT = settings.get_profile(PROFILE).max_examples

APP = build_app()
RUNNER = CliRunner()

REAL_EXPORTS = (DATA / "h200" / "dev_5x5_s2_b500.sqlite", DATA / "samples" / "sample_simpleMultiCopy.sqlite",
                DATA / "zoo" / "zoo_graph_block_d2h_node.sqlite")


def _fake_export(path: Path) -> Path:
    """A small synthetic export of the 2022.1 era: a pass range with frames=N, kernels, copies, a memset,
    API calls with their correlation ids, a synchronize and profiler overhead."""
    t = F.Trace()
    t.ranges.append(F.Range(0, 100_000, "pass frames=4"))
    for i in range(4):
        a = 1_000 + i * 20_000
        t.api.append(F.Api(a, a + 500, "cudaMemcpyAsync_v3020", corr=10_000 + 3 * i))
        t.copies.append(F.Copy(a + 1_000, a + 4_000, 1, 320_000, corr=10_000 + 3 * i))
        t.api.append(F.Api(a + 600, a + 900, "cudaLaunchKernel_v7000", corr=10_001 + 3 * i))
        t.kernels.append(F.Kernel(a + 4_500, a + 9_000, corr=10_001 + 3 * i))
        t.api.append(F.Api(a + 1_000, a + 1_300, "cudaMemcpyAsync_v3020", corr=10_002 + 3 * i))
        t.copies.append(F.Copy(a + 9_500, a + 11_000, 2, 40_000, corr=10_002 + 3 * i))
    t.memsets.append(F.Memset(500, 700, 4))
    t.api.append(F.Api(90_000, 99_000, "cudaStreamSynchronize_v3020", corr=20_000))
    t.syncs.append(F.Sync(90_100, 98_900, corr=20_000))
    t.overhead.append(F.Overhead(60_000, 61_000))
    return F.build(path, t, era="2022.1")


def _digest(folder: Path) -> dict[str, str]:
    """Every file under ``folder``, by relative path, with the SHA-256 of its bytes."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _run(args: list[str], inputs: Path, outputs: tuple[str, ...] = ()) -> None:
    """Run the command; check the exit, the messages and that nothing under ``inputs`` changed (besides
    ``outputs``, paths relative to it that the command may write)."""
    before = _digest(inputs)
    r = RUNNER.invoke(APP, args, env={"COLUMNS": "100"})
    what = f"clusterbench {' '.join(args)}: exit {r.exit_code}\n{r.output}"
    assert r.exception is None or isinstance(r.exception, SystemExit), what + f"\n{r.exception!r}"
    assert "Traceback" not in r.output, what
    assert r.exit_code in (0, 2, 3), what
    if r.exit_code == 2:
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("Error: ")]
        assert len(errors) == 1, what
        assert "internal error" not in r.stderr.lower(), what
    after = {k: v for k, v in _digest(inputs).items() if not k.startswith(outputs) or not outputs}
    assert after == {k: v for k, v in before.items() if not k.startswith(outputs) or not outputs}, what


# ----------------------------------------------------------------------------- values

SQL_VALUES = st.one_of(
    st.text(max_size=12), st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**63, 2**63 - 1),
    st.integers(min_value=2**63, max_value=2**70).map(str), st.none(), st.binary(max_size=8),
    st.sampled_from(["", "abc", "1.5", "1e308", "-1", "0x10", " 12 ", "NaN", "9" * 30]))
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)
CELLS = st.one_of(
    st.text(max_size=10), st.sampled_from(["", "nan", "inf", "-inf", "1e400", "-5", "0", "1.5", "true", "x,y",
                                            '"', "9" * 40]),
    st.integers(-2**70, 2**70).map(str), st.floats(allow_nan=True).map(repr))


# ----------------------------------------------------------------------------- nsys exports

@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    base = tmp_path_factory.mktemp("exports")
    return [*REAL_EXPORTS, _fake_export(base / "fake_2022.sqlite")]


# the columns analyze reads (most examples break one of them)
READ_COLUMNS = frozenset({"start", "end", "streamId", "deviceId", "globalPid", "globalTid", "correlationId", "bytes",
                          "copyKind", "srcKind", "dstKind", "shortName", "demangledName", "mangledName", "nameId",
                          "text", "textId", "eventType", "domainId", "id", "value", "name", "syncType",
                          "deprecatedSyncType", "eventId", "graphNodeId", "graphId", "graphExecId", "cuDevice",
                          "vmId", "busLocation", "endGlobalTid", "contextId"})


def _tables(path: Path) -> dict[str, list[str]]:
    con = sqlite3.connect(path)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: [c[1] for c in con.execute(f"PRAGMA table_info([{t}])")] for t in sorted(names)}
    finally:
        con.close()


@st.composite
def broken_export(draw: st.DrawFn, exports: list[Path]) -> tuple[Path, list[tuple]]:
    """A base export and the changes to make to a copy of it: (kind, table, column, rows, value)."""
    base = draw(st.sampled_from(exports))
    tables = _tables(base)
    # the tables analyze reads first, so that most examples land where they matter
    read = [t for t in tables if t.startswith(("CUPTI_ACTIVITY_KIND_", "NVTX", "StringIds", "TARGET_INFO", "META",
                                               "ThreadNames", "PROFILER", "CUDA_GRAPH", "EXPORT", "ENUM"))]
    changes = []
    for _ in range(draw(st.integers(1, 3))):
        table = draw(st.sampled_from(read or sorted(tables)))
        kind = draw(st.sampled_from(["set", "set", "set", "set_all", "drop_column", "drop_table", "empty"]))
        read_cols = [c for c in tables[table] if c in READ_COLUMNS]
        column = draw(st.sampled_from(read_cols) if read_cols and draw(st.integers(0, 3)) else
                      st.sampled_from(tables[table])) if tables[table] else None
        changes.append((kind, table, column, draw(st.integers(0, 40)), draw(SQL_VALUES)))
    return base, changes


def _apply(path: Path, changes: list[tuple]) -> None:
    con = sqlite3.connect(path)
    for kind, table, column, row, value in changes:
        try:
            if kind == "set" and column:
                con.execute(f"UPDATE [{table}] SET [{column}] = ? WHERE rowid = (SELECT rowid FROM [{table}] "
                            f"ORDER BY rowid LIMIT 1 OFFSET ?)", (value, row))
            elif kind == "set_all" and column:
                con.execute(f"UPDATE [{table}] SET [{column}] = ?", (value,))
            elif kind == "drop_column" and column:
                con.execute(f"ALTER TABLE [{table}] DROP COLUMN [{column}]")
            elif kind == "drop_table":
                con.execute(f"DROP TABLE [{table}]")
            elif kind == "empty":
                con.execute(f"DELETE FROM [{table}]")
            con.commit()
        except sqlite3.Error:  # a NOT NULL or key the schema keeps: that change is not made
            con.rollback()
    con.close()


@pytest.mark.parametrize("way", ["whole", "slabs"])
def test_broken_nsys_exports(exports: list[Path], way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read whole (analyze's way below its row limit) and in time slabs (past it; CLUSTERBENCH_ANALYZE_PATH
    sends these small exports that way): a quarter as many generated examples over the slabs, to keep the
    suite's time (every explicit example runs both ways)."""
    options = [[], ["--json", "--by-kernel"], ["--by-stream", "--csv"], ["--window", "span", "--frames", "kernel:."]]
    monkeypatch.setenv("CLUSTERBENCH_ANALYZE_PATH", way)

    dev = REAL_EXPORTS[0]

    @settings(settings.get_profile(PROFILE), max_examples=2 * LIMIT if way == "whole" else LIMIT // 2)
    @given(broken=broken_export(exports), opts=st.sampled_from(options))
    # what earlier runs found, kept: text in a kernel's start, an empty NVTX end, an empty overhead end, a
    # stream flag beyond CUPTI's, a nameId no string has (a lookup table of 10^16 entries), -2^63 in a start
    @example(broken=(dev, [("set", "CUPTI_ACTIVITY_KIND_KERNEL", "start", 3, "abc")]), opts=[])
    @example(broken=(dev, [("set", "NVTX_EVENTS", "end", 1, "")]), opts=[])
    @example(broken=(dev, [("set", "PROFILER_OVERHEAD", "end", 0, "")]), opts=[])
    @example(broken=(dev, [("set", "TARGET_INFO_CUDA_STREAM", "flag", 0, 128.0)]), opts=[])
    @example(broken=(dev, [("set", "CUPTI_ACTIVITY_KIND_RUNTIME", "nameId", 17, 3.6159096401043864e16)]),
             opts=["--by-stream", "--csv"])
    @example(broken=(dev, [("set", "CUPTI_ACTIVITY_KIND_MEMCPY", "start", 0, -2**63)]), opts=["--json"])
    @example(broken=(dev, [("drop_table", "CUPTI_ACTIVITY_KIND_KERNEL", None, 0, None)]), opts=[])
    @example(broken=(dev, [("set", "CUPTI_ACTIVITY_KIND_MEMCPY", "end", 0, 2**63 - 1)]), opts=["--by-stream", "--csv"])
    def check(broken: tuple[Path, list[tuple]], opts: list[str]) -> None:
        base, changes = broken
        with tempfile.TemporaryDirectory() as tmp:
            trace = Path(tmp) / "in" / base.name
            trace.parent.mkdir()
            shutil.copyfile(base, trace)
            _apply(trace, changes)
            _run(["analyze", str(trace), *opts], trace.parent)

    check()


# ----------------------------------------------------------------------------- results dirs

ROW = {"label": "3x3_s1", "cluster": 3, "cap": 3000, "streams": 1, "batch": 2000, "frames": 20000,
       "kernel_us": 4.32, "h2d_us": 13.13, "d2h_us": 6.2, "roofline_us": 13.13, "binds": "h2d",
       "sustained_fps": 100.0, "session": "s1", "timestamp": "2026-12-01T10:00:00Z",
       "samples": {"sustained_fps": [99.0, 100.0, 101.0]}}
ENV = {"gpu_name": "NVIDIA H200", "git_rev": "r1", "git_dirty": False, "session_id": "s1", "host": "node1",
       "configs": {"3x3_s1": {"session": "s1", "frames": 20000, "tracer": "nsys"}}}


def _paths(doc: object, prefix: tuple = ()) -> list[tuple]:
    """Every path into a JSON document (keys and list indices), the root included."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


def _replace(doc: object, path: tuple, value: object, drop: bool) -> object:
    if not path:
        return value
    parent = doc
    for k in path[:-1]:
        parent = parent[k]  # type: ignore[index]
    if drop:
        del parent[path[-1]]  # type: ignore[union-attr]
    else:
        parent[path[-1]] = value  # type: ignore[index]
    return doc


def _results_commands(bad: Path, good: Path, tmp: Path) -> list[list[str]]:
    return [["compare", str(good), str(bad)], ["compare", str(bad), str(bad), "--json"],
            ["history", "import", str(bad.parent), "--db", str(tmp / "h.db")],
            ["floors", str(good), str(bad), "--dry-run"]]


@pytest.mark.parametrize("name", ["env.json", "samples.json"])
def test_broken_json_files_of_a_results_dir(name: str) -> None:
    template = tempfile.mkdtemp()
    try:
        base = write(Path(template) / "d", [ROW], ENV)
        doc = json.loads((base / name).read_text())
        paths = _paths(doc)
    finally:
        shutil.rmtree(template)

    @settings(settings.get_profile(PROFILE), max_examples=LIMIT // 2)
    @given(where=st.sampled_from(paths), value=JSON_VALUES, drop=st.booleans(), command=st.integers(0, 3),
           raw=st.one_of(st.none(), st.text(max_size=30), st.binary(max_size=30)))
    @example(where=("version",), value={}, drop=False, command=0, raw=None)  # found: a version that is an object
    def check(where: tuple, value: object, drop: bool, command: int, raw: object) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            good = write(t / "good" / "2026-12-01_f32", [ROW], ENV)
            bad = write(t / "in" / "2026-12-01_f32_bad", [ROW], ENV)
            d = json.loads((bad / name).read_text())
            if raw is None:
                text = json.dumps(_replace(d, where, value, drop and bool(where)))
                (bad / name).write_text(text)
            elif isinstance(raw, bytes):
                (bad / name).write_bytes(raw)
            else:
                (bad / name).write_text(raw)
            _run(_results_commands(bad, good, t)[command], t / "in")
            _run(_results_commands(bad, good, t)[command], t / "good")

    check()


def test_broken_probes_csv() -> None:
    @settings(settings.get_profile(PROFILE), max_examples=LIMIT // 2)
    @given(data=st.data(), command=st.integers(0, 3))
    def check(data: st.DataObject, command: int) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            good = write(t / "good" / "2026-12-01_f32", [ROW], ENV)
            bad = write(t / "in" / "2026-12-01_f32_bad", [ROW], ENV)
            lines = (bad / "probes.csv").read_text().splitlines()
            header, cells = lines[0].split(","), lines[1].split(",")
            how = data.draw(st.sampled_from(["cell", "cell", "header", "extra", "raw", "bytes"]))
            if how == "cell":
                for _ in range(data.draw(st.integers(1, 3))):
                    cells[data.draw(st.integers(0, len(cells) - 1))] = data.draw(CELLS)
            elif how == "header":
                header[data.draw(st.integers(0, len(header) - 1))] = data.draw(CELLS)
            elif how == "extra":
                cells.append(data.draw(CELLS))
            text = ",".join(header) + "\n" + ",".join(cells) + "\n"
            if how == "raw":
                text = data.draw(st.text(max_size=80))
            if how == "bytes":
                (bad / "probes.csv").write_bytes(data.draw(st.binary(max_size=80)))
            else:
                (bad / "probes.csv").write_text(text)
            _run(_results_commands(bad, good, t)[command], t / "in")

    check()


# ----------------------------------------------------------------------------- configs.toml

TOML_KEYS = ["label", "cluster", "cap", "streams", "batch", "frames", "detector", "pedestal_frames", "nsigma",
             "pedestal_dtype", "pedestal", "transfer", "workload", "command", "seed", "occupancy", "pool", "data",
             "window", "rate", "sustained", "frozen_kernel", "tracking_kernel", "delay_us_per_frame", "bogus"]
GOOD_CONFIG = {"label": "3x3_s1", "cluster": 3, "cap": 3000, "streams": 1, "batch": 2000, "frames": 20000}


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        text = repr(v)
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(text, text)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(x)}" for k, x in v.items()) + "}"
    return '""'


TOML_VALUES = st.recursive(
    st.booleans() | st.integers(-2**70, 2**70).filter(lambda i: -2**63 <= i < 2**63) | st.integers(2**31 - 2, 2**31 + 2)
    | st.floats() | st.text(max_size=8) | st.sampled_from(["{python}", "{result}", "3x3", "exec", "command"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=2),
    max_leaves=4)


def test_broken_configs_toml() -> None:
    @settings(settings.get_profile(PROFILE), max_examples=LIMIT)
    @given(changes=st.dictionaries(st.sampled_from(TOML_KEYS), TOML_VALUES, max_size=3),
           in_defaults=st.booleans(), raw=st.one_of(st.none(), st.text(max_size=60)), dry_json=st.booleans())
    def check(changes: dict, in_defaults: bool, raw: str | None, dry_json: bool) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            (t / "in").mkdir()
            config = {**GOOD_CONFIG, **({} if in_defaults else changes)}
            text = ""
            if in_defaults:
                text += "[defaults]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in changes.items())
            text += "[[config]]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in config.items())
            (t / "in" / "c.toml").write_text(text if raw is None else raw)
            _run(["probe", "--config", str(t / "in" / "c.toml"), "--dry-run", "--results-dir", str(t / "out")]
                 + (["--json"] if dry_json else []), t / "in")

    check()
