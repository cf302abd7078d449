"""results.py, the read side: BOM, impossible values, binds, env.json versions, legacy aare-perf dirs,
sustained repeats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterbench.errors import InputError
from clusterbench.io.results import (
    FORMAT_CLUSTERBENCH,
    FORMAT_LEGACY,
    REQUIRED_COLUMNS,
    load_env,
    load_results,
    save_env,
)

HEADER = ",".join(REQUIRED_COLUMNS)
GOOD = "3x3_s1,3,3000,1,2000,20000,4.32,13.13,6.2,13.13,h2d"
LEGACY_ENV = {"gpu": "NVIDIA GeForce RTX 4090", "driver": "595.71.05", "pedestal_dtype": "float32",
              "git_rev": "1a2b3c4", "dirty": False}  # fmt: skip


def _dir(tmp_path: Path, csv_text: str, env: dict | None = None, raw_env: dict | None = None) -> Path:
    d = tmp_path / "r"
    d.mkdir(parents=True, exist_ok=True)
    (d / "probes.csv").write_bytes(csv_text.encode("utf-8"))
    if raw_env is not None:
        (d / "env.json").write_text(json.dumps(raw_env))
    else:
        save_env(d, env or {"gpu_name": "NVIDIA H200"})
    return d


def test_a_bom_is_read_not_refused(tmp_path: Path) -> None:
    d = _dir(tmp_path, "\ufeff" + f"{HEADER}\n{GOOD}\n")
    res = load_results(d)
    assert res.labels == ("3x3_s1",) and res.rows[0]["kernel_us"] == 4.32
    assert "label" in res.columns and "\ufefflabel" not in res.columns


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (",4.32,", ",-1.0,", "row '3x3_s1' column kernel_us: a time must be > 0, got -1.0 µs/frame"),
        (",4.32,", ",0,", "row '3x3_s1' column kernel_us: a time must be > 0, got 0.0 µs/frame"),
        (",13.13,h2d", ",0.0,h2d", "row '3x3_s1' column roofline_us: a time must be > 0"),
        (",3000,", ",0,", "row '3x3_s1' column cap: a value must be > 0, got 0"),
        (",h2d", ",banana", "row '3x3_s1' column binds: 'banana' is not an engine (one of kernel, "),
    ],
)  # fmt: skip
def test_impossible_values_are_bad_input(tmp_path: Path, old: str, new: str, message: str) -> None:
    d = _dir(tmp_path, f"{HEADER}\n{GOOD.replace(old, new, 1)}\n")
    with pytest.raises(InputError) as exc:
        load_results(d)
    assert str(exc.value).startswith(f"probes.csv {message}")
    assert "\n" not in str(exc.value)


def test_negative_extra_columns_and_spreads_are_refused(tmp_path: Path) -> None:
    d = _dir(tmp_path, f"{HEADER},sustained_fps_spread\n{GOOD},-3.0\n")
    with pytest.raises(InputError, match="column sustained_fps_spread: must be >= 0, got -3.0"):
        load_results(d)
    d = _dir(tmp_path, f"{HEADER},overlap_us\n{GOOD},0.0\n")  # a 1-stream row overlaps 0 µs: fine
    assert load_results(d).rows[0]["overlap_us"] == 0.0


def test_binds_read_case_insensitively(tmp_path: Path) -> None:
    d = _dir(tmp_path, f"{HEADER}\n{GOOD.replace(',h2d', ',H2D')}\n")
    assert load_results(d).rows[0]["binds"] == "h2d"


def test_added_columns_are_tolerated(tmp_path: Path) -> None:
    d = _dir(tmp_path, f"{HEADER},workload,new_metric_us\n{GOOD},aare,1.5\n")
    r = load_results(d).rows[0]
    assert r["workload"] == "aare" and r["new_metric_us"] == 1.5


@pytest.mark.parametrize("version", [1, 2])
def test_env_versions_1_and_2_are_read(tmp_path: Path, version: int) -> None:
    d = _dir(tmp_path, f"{HEADER}\n{GOOD}\n", raw_env={"schema_version": version, "gpu_name": "NVIDIA H200",
                                                       "workload": "cupy"})  # fmt: skip
    res = load_results(d)
    assert res.format == FORMAT_CLUSTERBENCH and not res.legacy
    assert load_env(d)["schema_version"] == version


@pytest.mark.parametrize("version", [3, 0, "1", True, None])
def test_other_versions_are_refused_by_name(tmp_path: Path, version: object) -> None:
    d = _dir(tmp_path, f"{HEADER}\n{GOOD}\n", raw_env={"schema_version": version, "gpu_name": "NVIDIA H200"})
    with pytest.raises(InputError, match=rf"env.json has schema_version {version!r}; this clusterbench reads 1 and 2"):
        load_results(d)


def test_legacy_aare_perf_dir(tmp_path: Path) -> None:
    d = _dir(tmp_path, f"{HEADER}\n{GOOD}\n", raw_env=LEGACY_ENV)
    res = load_results(d)
    assert res.format == FORMAT_LEGACY and res.legacy
    assert res.env["gpu"] == "NVIDIA GeForce RTX 4090"


def test_unversioned_env_that_is_not_legacy_names_what_is_missing(tmp_path: Path) -> None:
    env = {k: v for k, v in LEGACY_ENV.items() if k not in ("dirty", "git_rev")}
    d = _dir(tmp_path, f"{HEADER}\n{GOOD}\n", raw_env=env)
    with pytest.raises(InputError) as exc:
        load_results(d)
    msg = str(exc.value)
    assert msg.startswith("env.json has no schema_version and is not a legacy aare-perf stamp either")
    assert "it lacks git_rev, dirty" in msg
    d2 = _dir(tmp_path / "x", f"{HEADER}\n{GOOD}\n", raw_env={"gpu_name": "NVIDIA H200"})
    with pytest.raises(InputError, match="it lacks gpu, driver, pedestal_dtype, git_rev, dirty"):
        load_results(d2)


def _with_fps(tmp_path: Path, median: float, env_reps: list | None, file_reps: list | None) -> Path:
    d = _dir(tmp_path, f"{HEADER},sustained_fps\n{GOOD},{median!r}\n",
             env={"gpu_name": "G", **({"configs": {"3x3_s1": {"sustained_fps": env_reps}}} if env_reps else {})})  # fmt: skip
    if file_reps is not None:
        (d / "3x3_s1.sustained.json").write_text(json.dumps({"version": 1, "kind": "sustained", "fps": file_reps}))
    return d


def test_sustained_repeats_from_env_or_file(tmp_path: Path) -> None:
    res = load_results(_with_fps(tmp_path / "a", 100.0, [101.0, 100.0, 99.0], None))
    assert res.samples["3x3_s1"]["sustained_fps"] == (101.0, 100.0, 99.0)
    res = load_results(_with_fps(tmp_path / "b", 100.0, None, [99.5, 100.0, 100.5]))
    assert res.samples["3x3_s1"]["sustained_fps"] == (99.5, 100.0, 100.5)
    # four repeats: the median is the mean of the middle two, (100 + 101) / 2
    res = load_results(_with_fps(tmp_path / "c", 100.5, [99.0, 100.0, 101.0, 102.0], None))
    assert len(res.samples["3x3_s1"]["sustained_fps"]) == 4


def test_repeats_that_do_not_match_the_row_are_ignored_with_a_note(tmp_path: Path) -> None:
    res = load_results(_with_fps(tmp_path, 100.0, [90.0, 91.0, 92.0], [1.0, "x"]))
    assert "3x3_s1" not in res.samples
    assert len(res.notes) == 1 and "do not have its probes.csv median 100.0" in res.notes[0]
