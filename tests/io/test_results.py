"""results.py: the results-dir layout, atomic locked merges, env.json, loading errors."""

from __future__ import annotations

import csv
import datetime
import fcntl
import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from clusterbench.errors import InputError
from clusterbench.io import results
from clusterbench.io.results import load_results, merge_results, results_dir_for
from clusterbench.model.results import COLUMNS, REQUIRED_COLUMNS, EnvRecord, ResultSet

from results_data import write

_FORK = multiprocessing.get_context("fork")


def _row(label: str, **over: object) -> dict[str, object]:
    row: dict[str, object] = {
        "label": label, "cluster": 3, "cap": 3000, "streams": 1, "batch": 2000, "frames": 20000,
        "kernel_us": 4.32, "h2d_us": 13.13, "d2h_us": 6.2, "roofline_us": 13.13, "binds": "h2d",
    }  # fmt: skip
    row.update(over)
    return row


def _env(**over: object) -> dict[str, object]:
    env: dict[str, object] = {"gpu_name": "NVIDIA H200", "driver": "580.1", "session_id": "s1", "git_dirty": False}
    env.update(over)
    return env


def upsert(directory: Path, row: dict[str, object]) -> None:
    write(directory, [row])


def save_env(directory: Path, env: dict[str, object]) -> None:
    write(directory, env_values=env)


def _header(path: Path) -> list[str]:
    with open(path, newline="") as fh:
        return next(csv.reader(fh))


def _labels(path: Path) -> list[str]:
    with open(path, newline="") as fh:
        return [r["label"] for r in csv.DictReader(fh)]


# ----------------------------------------------------------------------------- layout


def test_results_dir_for_names_date_dtype_and_tag(tmp_path: Path) -> None:
    d = datetime.date(2026, 9, 10)
    assert results_dir_for(tmp_path, d, "f32", None) == tmp_path / "2026-09-10_f32"
    assert results_dir_for(tmp_path, d, "float64", "after-unroll.v2") == tmp_path / "2026-09-10_f64_after-unroll.v2"


@pytest.mark.parametrize("tag", ["a/b", "x y", "", "..", "naïve", "a;b"])
def test_results_dir_for_rejects_bad_tags(tmp_path: Path, tag: str) -> None:
    with pytest.raises(InputError) as exc:
        results_dir_for(tmp_path, datetime.date(2026, 1, 2), "f32", tag)
    assert repr(tag) in str(exc.value)
    assert exc.value.hint


def test_results_dir_for_rejects_bad_dtype(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="f16"):
        results_dir_for(tmp_path, datetime.date(2026, 1, 2), "f16", None)


def test_probe_columns_start_with_the_design_contract() -> None:
    assert REQUIRED_COLUMNS == (
        "label", "cluster", "cap", "streams", "batch", "frames",
        "kernel_us", "h2d_us", "d2h_us", "roofline_us", "binds",
    )  # fmt: skip
    # version 3: the key right after the contract, every column of version 2 and its per-GPU and campaign
    # columns, without the ones the key replaced (config_label, gpu_index; gpu is now an index)
    assert COLUMNS[11:15] == ("config", "gpu", "role", "variant")
    # version 4 adds serial_us, sustained_source, rate_check, kernel_check, processes and error; then the
    # steady runs (sustained_steady, sustained_warmups, sustained_warmup_s) and the host bar without the
    # profiler (host_us, host_untraced_us, host_estimate, roofline_untraced_us, roofline_note); version 5 adds
    # sustained_processes (after sustained_repeats) and probe --what-binds's 8 (untraced_frame_us ...
    # inject_cost), after the campaign's columns
    assert len(set(COLUMNS)) == len(COLUMNS) == 40 + 4 + 12 + 6 + 8 + 1 + 8
    assert COLUMNS[COLUMNS.index("sustained_repeats") + 1] == "sustained_processes"
    assert COLUMNS[-8:] == ("untraced_frame_us", "untraced_host_us", "untraced_split_us", "delay_binds",
                            "delay_slope_host", "delay_slope_gpu", "delay_slope_link", "inject_cost")
    assert COLUMNS[50:59] == ("transfer", "workload", "processes", "finder", "tracer", "trace", "session",
                              "timestamp", "error")
    assert {"serial_us", "sustained_source", "rate_check", "kernel_check", "sustained_steady", "host_untraced_us",
            "roofline_untraced_us"} <= set(COLUMNS)
    assert COLUMNS[-10:-8] == ("task", "source_dir")


# ----------------------------------------------------------------------------- upsert


def test_upsert_replaces_its_own_row_and_keeps_the_others_in_order(tmp_path: Path) -> None:
    for lb in ("a", "b", "c"):
        upsert(tmp_path, _row(lb))
    upsert(tmp_path, _row("b", kernel_us=9.5))
    upsert(tmp_path, _row("d"))
    assert _labels(tmp_path / "probes.csv") == ["a", "b", "c", "d"]
    res = load_results_no_env(tmp_path)
    assert [r.kernel_us for r in res] == [4.32, 9.5, 4.32, 4.32]


def load_results_no_env(directory: Path) -> list:
    save_env(directory, _env())
    return list(load_results(directory).rows)


def test_upsert_header_is_probe_columns_then_extras(tmp_path: Path) -> None:
    upsert(tmp_path, _row("a", kernel_us_spread=0.02))
    upsert(tmp_path, _row("b", zeta_note="x"))
    header = _header(tmp_path / "probes.csv")
    assert tuple(header[: len(COLUMNS)]) == COLUMNS
    assert header[len(COLUMNS):] == ["kernel_us_spread", "zeta_note"]
    rows = load_results_no_env(tmp_path)
    assert rows[0].value("kernel_us_spread") == 0.02 and rows[0].value("zeta_note") is None
    assert rows[1].value("kernel_us_spread") is None and rows[1].value("zeta_note") == "x"


def test_values_round_trip_exactly(tmp_path: Path) -> None:
    tricky = {
        "kernel_us": 0.1 + 0.2,  # 0.30000000000000004: .6g would lose it
        "h2d_us": 13.13,
        "d2h_us": 1e-7,
        "roofline_us": 123456.78901234567,
        "sustained_fps": 61400.0,
        "h2d_gbps": 2 / 3,
        "dropped_clusters": 0,
        "idle_us": None,
        "trace": "run, with comma \"and quotes\".sqlite",
        "binds": "h2d",
    }
    upsert(tmp_path, _row("a", **tricky))
    row = load_results_no_env(tmp_path)[0]
    for k, v in tricky.items():
        assert row.value(k) == v, k
        assert type(row.value(k)) is type(v), k
    assert row.frames == 20000 and isinstance(row.frames, int)
    assert row.pedestal is None  # never written: not recorded


def test_numpy_scalars_are_written_as_plain_numbers(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    upsert(tmp_path, _row("a", kernel_us=np.float64(4.65), frames=np.int64(2000)))
    r = load_results_no_env(tmp_path)[0]
    assert (type(r.kernel_us), type(r.frames)) == (float, int)
    text = (tmp_path / "probes.csv").read_text()
    assert ",4.65," in text and ",2000," in text and "np." not in text


def test_non_finite_values_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="column kernel_us must be float, got nan"):
        upsert(tmp_path, _row("a", kernel_us=float("nan")))
    assert not (tmp_path / "probes.csv").exists()


def test_a_row_needs_a_config(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="config must be a non-empty name"):
        upsert(tmp_path, _row(""))


# ----------------------------------------------------------------------------- atomicity


def _crash_between_temp_and_rename(directory: str) -> None:
    """Child process: write probes.csv's temp file, then die (no cleanup, no rename)."""
    replace = os.replace
    os.replace = lambda src, dst: os._exit(17) if str(dst).endswith("probes.csv") else replace(src, dst)  # type: ignore[assignment]
    upsert(Path(directory), _row("new", kernel_us=99.0))


def test_crash_before_rename_keeps_old_file_and_temp_is_never_results(tmp_path: Path) -> None:
    upsert(tmp_path, _row("a"))
    upsert(tmp_path, _row("b"))
    save_env(tmp_path, _env())
    before = (tmp_path / "probes.csv").read_bytes()

    p = _FORK.Process(target=_crash_between_temp_and_rename, args=(str(tmp_path),))
    p.start()
    p.join(20)
    assert p.exitcode == 17  # it died where we wanted: after the temp file, before the rename
    temps = list(tmp_path.glob(".probes.csv.*.tmp"))
    assert len(temps) == 1 and b"new" in temps[0].read_bytes()  # the half-done write exists...
    assert (tmp_path / "probes.csv").read_bytes() == before  # ...but the results are the old ones
    assert load_results(tmp_path).labels == ("a", "b")

    upsert(tmp_path, _row("c"))  # the next writer cleans the leftover up
    assert not list(tmp_path.glob("*.tmp"))
    assert load_results(tmp_path).labels == ("a", "b", "c")


def test_interrupt_during_rename_leaves_no_temp_and_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    upsert(tmp_path, _row("a"))
    before = (tmp_path / "probes.csv").read_bytes()

    def ctrl_c(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(results.os, "replace", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        upsert(tmp_path, _row("b"))
    monkeypatch.undo()
    assert (tmp_path / "probes.csv").read_bytes() == before
    assert not list(tmp_path.glob("*.tmp"))


# ----------------------------------------------------------------------------- locking


def _writer(directory: str, who: int, n: int) -> None:
    for i in range(n):
        upsert(Path(directory), _row(f"w{who}_{i:03d}", kernel_us=float(i + 1)))  # a time is > 0


def test_two_concurrent_writers_lose_no_row(tmp_path: Path) -> None:
    n = 60
    procs = [_FORK.Process(target=_writer, args=(str(tmp_path), w, n)) for w in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    labels = _labels(tmp_path / "probes.csv")
    assert sorted(labels) == sorted(f"w{w}_{i:03d}" for w in (0, 1) for i in range(n))
    save_env(tmp_path, _env())
    rows = load_results(tmp_path).rows  # valid CSV, typed
    assert all(r.kernel_us == float(r.label.split("_")[1]) + 1 for r in rows)


def test_writer_waits_for_the_lock(tmp_path: Path) -> None:
    upsert(tmp_path, _row("a"))
    fd = os.open(tmp_path / ".probes.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    p = _FORK.Process(target=_writer, args=(str(tmp_path), 9, 1))
    try:
        p.start()
        time.sleep(0.4)
        assert p.is_alive()  # blocked on our lock
        assert _labels(tmp_path / "probes.csv") == ["a"]
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    p.join(20)
    assert p.exitcode == 0
    assert _labels(tmp_path / "probes.csv") == ["a", "w9_000"]


# ----------------------------------------------------------------------------- env.json


def test_env_json_is_versioned_sorted_and_keeps_blocks_it_does_not_know(tmp_path: Path) -> None:
    upsert(tmp_path, _row("a"))
    save_env(tmp_path, {"zeta": {"any": [1, 2]}, "gpu_name": "NVIDIA H200", "driver": "580.1"})
    text = (tmp_path / "env.json").read_text()
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert (data["schema"], data["version"]) == ("clusterbench.results", 5)
    assert "schema_version" not in data and "clocks" not in data  # version 3 dropped them
    env = load_results(tmp_path).env
    assert (env.gpu_name, env.driver, dict(env.blocks)) == ("NVIDIA H200", "580.1", {"zeta": {"any": [1, 2]}})
    # a later write of the env keeps the block it does not know
    merge_results(tmp_path, ResultSet(EnvRecord(session_id="s2")))
    assert json.loads((tmp_path / "env.json").read_text())["zeta"] == {"any": [1, 2]}


def test_env_errors(tmp_path: Path) -> None:
    (tmp_path / "probes.csv").write_text(f"{_HEADER}\n{_GOOD}\n")
    with pytest.raises(InputError, match="no env.json"):
        load_results(tmp_path)
    (tmp_path / "env.json").write_text('{\n  "a": 1,\n  "b": \n}\n')
    with pytest.raises(InputError, match="not valid JSON: .* line 4 column 1"):
        load_results(tmp_path)
    (tmp_path / "env.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="JSON object"):
        load_results(tmp_path)
    (tmp_path / "env.json").write_text('{"schema_version": 99}')
    with pytest.raises(InputError, match="schema_version 99"):
        load_results(tmp_path)
    (tmp_path / "env.json").write_text('{"schema": "clusterbench.results", "version": 6}')
    with pytest.raises(InputError, match="version 6; this clusterbench reads 'clusterbench.results' versions 5, 4, 3, 2"):
        load_results(tmp_path)


# ----------------------------------------------------------------------------- load errors

_HEADER = ",".join(REQUIRED_COLUMNS)
_GOOD = "3x3_s1,3,3000,1,2000,20000,4.32,13.13,6.2,13.13,h2d"


def _dir_with(tmp_path: Path, csv_text: str | None, env: bool = True) -> Path:
    d = tmp_path / "r"
    d.mkdir()
    if csv_text is not None:
        (d / "probes.csv").write_text(csv_text)
    if env:  # hand-written too: a write through the store would read (and refuse) the bad probes.csv
        (d / "env.json").write_text(json.dumps({"schema": "clusterbench.results", "version": 3, **_env()}))
    return d


def test_load_hand_written_minimal_dir(tmp_path: Path) -> None:
    d = _dir_with(tmp_path, f"{_HEADER}\n{_GOOD}\n\n")
    res = load_results(d)
    assert res.labels == ("3x3_s1",)
    r = res.rows[0]
    assert (r.cluster, r.kernel_us, r.binds) == (3, 4.32, "h2d")
    assert r.sustained_fps is None and r.key.config == "3x3_s1"
    assert res.env.gpu_name == "NVIDIA H200"


@pytest.mark.parametrize(
    ("csv_text", "pattern"),
    [
        ("", "empty"),
        (f"{_HEADER}\n{_GOOD},extra\n", "data row 2: 12 fields, header has 11"),
        (f'{_HEADER}\n"3x3_s1"x,3,3000,1,2000,20000,4.32,13.13,6.2,13.13,h2d\n', "malformed: .* line 2"),
        ("label,cluster,cap,streams,batch,frames,kernel_us,h2d_us\nx,3,3000,1,2000,20000,4.32,13.13\n",
         "lacks required column\\(s\\) d2h_us, roofline_us, binds"),
        (f"{_HEADER}\n{_GOOD.replace('4.32', 'fast')}\n", "row '3x3_s1' column kernel_us: expected a finite number, got 'fast'"),
        (f"{_HEADER}\n{_GOOD.replace(',1,2000', ',one,2000')}\n", "row '3x3_s1' column streams: expected an integer"),
        (f"{_HEADER}\n{_GOOD.replace('4.32', 'nan')}\n", "column kernel_us: expected a finite number, got 'nan'"),
        (f"{_HEADER}\n{_GOOD}\n{_GOOD}\n", "label '3x3_s1' twice"),
    ],
)  # fmt: skip
def test_load_bad_probes_csv(tmp_path: Path, csv_text: str, pattern: str) -> None:
    d = _dir_with(tmp_path, csv_text)
    with pytest.raises(InputError, match=pattern) as exc:
        load_results(d)
    assert "\n" not in str(exc.value)


def test_load_spread_column_must_be_numeric(tmp_path: Path) -> None:
    d = _dir_with(tmp_path, f"{_HEADER},kernel_us_spread,comment\n{_GOOD},lots,hello\n")
    with pytest.raises(InputError, match="column kernel_us_spread"):
        load_results(d)
    (d / "probes.csv").write_text(f"{_HEADER},kernel_us_spread,comment\n{_GOOD},0.05,hello\n")
    r = load_results(d).rows[0]
    assert r.value("kernel_us_spread") == 0.05 and r.value("comment") == "hello"


def test_load_missing_things(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="results dir does not exist"):
        load_results(tmp_path / "nope")
    f = tmp_path / "file.txt"
    f.write_text("x")
    with pytest.raises(InputError, match="not a directory"):
        load_results(f)
    d = _dir_with(tmp_path, None)
    with pytest.raises(InputError, match="no probes.csv"):
        load_results(d)
    (d / "probes.csv").write_text(f"{_HEADER}\n{_GOOD}\n")
    (d / "env.json").unlink()
    with pytest.raises(InputError, match="no env.json"):
        load_results(d)
