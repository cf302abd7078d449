"""results.py, the read side: BOM, impossible values, binds, env.json versions, legacy aare-perf dirs,
sustained repeats (samples.json; matched by median in versions 1 and 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterbench.errors import InputError
from clusterbench.io.results import load_results
from clusterbench.model.results import FORMAT_CLUSTERBENCH, FORMAT_LEGACY, REQUIRED_COLUMNS

from results_data import write

HEADER = ",".join(REQUIRED_COLUMNS)
GOOD = "3x3_s1,3,3000,1,2000,20000,4.32,13.13,6.2,13.13,h2d"
LEGACY_ENV = {"gpu": "NVIDIA GeForce RTX 4090", "driver": "595.71.05", "pedestal_dtype": "float32",
              "git_rev": "1a2b3c4", "dirty": False}  # fmt: skip


def _dir(tmp_path: Path, csv_text: str, env: dict | None = None, raw_env: dict | None = None) -> Path:
    d = tmp_path / "r"
    d.mkdir(parents=True, exist_ok=True)
    (d / "probes.csv").write_bytes(csv_text.encode("utf-8"))
    doc = raw_env if raw_env is not None else {"schema": "clusterbench.results", "version": 3,
                                                **(env or {"gpu_name": "NVIDIA H200"})}
    (d / "env.json").write_text(json.dumps(doc))
    return d


def test_a_bom_is_read_not_refused(tmp_path: Path) -> None:
    d = _dir(tmp_path, "\ufeff" + f"{HEADER}\n{GOOD}\n")
    res = load_results(d)
    assert res.labels == ("3x3_s1",) and res.rows[0].kernel_us == 4.32
    assert res.rows[0].extra == {}  # the first column read as label, not as an unknown "\ufefflabel"


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
    assert load_results(d).rows[0].overlap_us == 0.0


def test_binds_read_case_insensitively(tmp_path: Path) -> None:
    d = _dir(tmp_path, f"{HEADER}\n{GOOD.replace(',h2d', ',H2D')}\n")
    assert load_results(d).rows[0].binds == "h2d"


def test_added_columns_are_tolerated(tmp_path: Path) -> None:
    d = _dir(tmp_path, f"{HEADER},workload,new_metric_us\n{GOOD},aare,1.5\n")
    r = load_results(d).rows[0]
    assert r.workload == "aare" and r.value("new_metric_us") == 1.5 and r.extra == {"new_metric_us": 1.5}


@pytest.mark.parametrize("version", [1, 2])
def test_env_versions_1_and_2_are_read(tmp_path: Path, version: int) -> None:
    d = _dir(tmp_path, f"{HEADER}\n{GOOD}\n", raw_env={"schema_version": version, "gpu_name": "NVIDIA H200",
                                                       "workload": "cupy"})  # fmt: skip
    res = load_results(d)
    assert res.format == FORMAT_CLUSTERBENCH and not res.legacy
    assert res.version_read == version and res.env.gpu_name == "NVIDIA H200"
    assert res.rows[0].workload == "cupy"  # a clusterbench dir that names no workload ran the CuPy one


@pytest.mark.parametrize("version", [3, 0, "1", True, None])
def test_other_versions_are_refused_by_name(tmp_path: Path, version: object) -> None:
    d = _dir(tmp_path, f"{HEADER}\n{GOOD}\n", raw_env={"schema_version": version, "gpu_name": "NVIDIA H200"})
    with pytest.raises(InputError, match=rf"env.json has schema_version {version!r}; this clusterbench reads "
                                         r"versions 5, 4, 3, 2 and 1 \(and legacy aare-perf dirs"):
        load_results(d)


@pytest.mark.parametrize(("env", "message"), [
    ({"gpu_name": 7}, "env.json block 'gpu_name' must be text or null, got the number 7"),
    ({"git_dirty": "yes"}, "env.json block 'git_dirty' must be true or false or null, got text 'yes'"),
    ({"argv": "clusterbench probe"}, "env.json block 'argv' must be a list of text or null"),
    ({"configs": {"a": {"config": "b"}}}, "env.json configs.a names config 'b'"),
])
def test_env_values_that_cannot_be_are_bad_input(tmp_path: Path, env: dict, message: str) -> None:
    d = _dir(tmp_path, f"{HEADER}\n{GOOD}\n", raw_env={"schema": "clusterbench.results", "version": 3, **env})
    with pytest.raises(InputError, match=message):
        load_results(d)


def test_legacy_aare_perf_dir(tmp_path: Path) -> None:
    d = _dir(tmp_path, f"{HEADER}\n{GOOD}\n", raw_env=LEGACY_ENV)
    res = load_results(d)
    assert res.format == FORMAT_LEGACY and res.legacy and res.version_read == 0
    assert (res.env.gpu_name, res.env.git_rev, res.env.git_dirty) == ("NVIDIA GeForce RTX 4090", "1a2b3c4", False)
    assert res.rows[0].workload is None and res.rows[0].pedestal_dtype == "float32"  # from the stamp


def test_unversioned_env_that_is_not_legacy_names_what_is_missing(tmp_path: Path) -> None:
    env = {k: v for k, v in LEGACY_ENV.items() if k not in ("dirty", "git_rev")}
    d = _dir(tmp_path, f"{HEADER}\n{GOOD}\n", raw_env=env)
    with pytest.raises(InputError) as exc:
        load_results(d)
    msg = str(exc.value)
    assert msg.startswith("env.json has no version and is not a legacy aare-perf stamp either")
    assert "it lacks git_rev, dirty" in msg
    d2 = _dir(tmp_path / "x", f"{HEADER}\n{GOOD}\n", raw_env={"gpu_name": "NVIDIA H200"})
    with pytest.raises(InputError, match="it lacks gpu, driver, pedestal_dtype, git_rev, dirty"):
        load_results(d2)


def _with_fps(tmp_path: Path, median: float, env_reps: list | None, file_reps: list | None) -> Path:
    """A version-2 dir: the repeats in env.json configs.<label>.sustained_fps and <label>.sustained.json."""
    configs = {"3x3_s1": {"sustained_fps": env_reps}} if env_reps else {}
    d = _dir(tmp_path, f"{HEADER},sustained_fps\n{GOOD},{median!r}\n",
             raw_env={"schema_version": 2, "probes_csv_version": 2, "gpu_name": "G", "configs": configs})
    if file_reps is not None:
        (d / "3x3_s1.sustained.json").write_text(json.dumps({"version": 1, "kind": "sustained", "fps": file_reps}))
    return d


def _samples(res) -> tuple[float, ...] | None:
    m = res.rows[0].measurement("sustained_fps")
    return None if m is None else m.samples


def test_version_2_repeats_from_env_or_file(tmp_path: Path) -> None:
    res = load_results(_with_fps(tmp_path / "a", 100.0, [101.0, 100.0, 99.0], None))
    assert _samples(res) == (101.0, 100.0, 99.0) and res.notes == ()
    res = load_results(_with_fps(tmp_path / "b", 100.0, None, [99.5, 100.0, 100.5]))
    assert _samples(res) == (99.5, 100.0, 100.5)
    # four repeats: the median is the mean of the middle two, (100 + 101) / 2
    res = load_results(_with_fps(tmp_path / "c", 100.5, [99.0, 100.0, 101.0, 102.0], None))
    assert len(_samples(res)) == 4


def test_version_2_repeats_that_do_not_match_the_row_are_ignored_with_a_note(tmp_path: Path) -> None:
    res = load_results(_with_fps(tmp_path, 100.0, [90.0, 91.0, 92.0], [1.0, "x"]))
    assert _samples(res) is None
    assert len(res.notes) == 2 and "do not have its probes.csv median 100.0" in res.notes[0]
    assert "recorded no per-repeat sustained FPS for 3x3_s1" in res.notes[1]


def test_version_3_samples_go_with_their_row_only(tmp_path: Path) -> None:
    base = {"label": "a", "cluster": 3, "cap": 30, "streams": 1, "batch": 10, "frames": 100, "session": "s1",
            "timestamp": "t1"}
    write(tmp_path, [{**base, "sustained_fps": 100.0, "samples": {"sustained_fps": [99.0, 100.0, 103.0]}}],
          {"gpu_name": "G"})
    doc = json.loads((tmp_path / "samples.json").read_text())
    assert (doc["schema"], doc["version"]) == ("clusterbench.samples", 5)
    assert doc["rows"][0]["key"] == {"config": "a", "gpu": None, "role": None, "variant": None}
    assert _samples(load_results(tmp_path)) == (99.0, 100.0, 103.0)
    # a samples entry of another run of the row (written before a crash kept the new probes.csv) is not used
    doc["rows"][0]["timestamp"] = "t0"
    (tmp_path / "samples.json").write_text(json.dumps(doc))
    res = load_results(tmp_path)
    assert _samples(res) is None and "belong to another run of it" in res.notes[0]
    # re-measured without samples: the old ones go
    write(tmp_path, [{**base, "sustained_fps": 90.0, "timestamp": "t2"}])
    assert _samples(load_results(tmp_path)) is None
    assert json.loads((tmp_path / "samples.json").read_text())["rows"] == []


def test_samples_that_do_not_have_the_rows_median_are_bad_input(tmp_path: Path) -> None:
    base = {"label": "a", "cluster": 3, "cap": 30, "streams": 1, "batch": 10, "frames": 100}
    write(tmp_path, [{**base, "sustained_fps": 100.0, "samples": {"sustained_fps": [99.0, 100.0, 103.0]}}],
          {"gpu_name": "G"})
    text = (tmp_path / "probes.csv").read_text().replace(",100.0,", ",101.0,")
    (tmp_path / "probes.csv").write_text(text)
    with pytest.raises(InputError, match=r"row 'a' column sustained_fps: 101.0 is not the median 100.0 of its samples"):
        load_results(tmp_path)
    (tmp_path / "samples.json").write_text(json.dumps({"schema": "clusterbench.samples", "version": 2, "rows": []}))
    with pytest.raises(InputError, match=r"samples.json blocks 'schema' and 'version' must be 'clusterbench.samples' "
                                         r"and 5 \(or 3 to 4\), got text 'clusterbench.samples' and the number 2"):
        load_results(tmp_path)


def test_a_version_3_dir_reads_its_samples_json_of_version_3(tmp_path: Path) -> None:
    base = {"label": "a", "cluster": 3, "cap": 30, "streams": 1, "batch": 10, "frames": 100, "session": "s1",
            "timestamp": "t1"}
    write(tmp_path, [{**base, "sustained_fps": 100.0, "samples": {"sustained_fps": [99.0, 100.0, 103.0]}}],
          {"gpu_name": "G"})
    for name in ("env.json", "samples.json"):  # as a version-3 writer left them
        doc = json.loads((tmp_path / name).read_text())
        (tmp_path / name).write_text(json.dumps({**doc, "version": 3}))
    res = load_results(tmp_path)
    assert res.version_read == 3 and _samples(res) == (99.0, 100.0, 103.0)


def test_version_1_kernel_digests_written_as_text_are_read_as_the_mapping(tmp_path: Path) -> None:
    sha = {"cluster_finder.cu": "1de3de48"}
    d = _dir(tmp_path, f"{HEADER}\n{GOOD}\n", raw_env={
        "schema_version": 1, "gpu_name": "G", "kernel_sha256": str(sha),
        "configs": {"3x3_s1": {"kernel_sha256": str(sha), "frames": 20000}}})
    env = load_results(d).env
    assert env.kernel_sha256 == sha and next(iter(env.configs.values())).kernel_sha256 == sha
    # text that holds no such mapping: not recorded
    d = _dir(tmp_path / "b", f"{HEADER}\n{GOOD}\n", raw_env={"schema_version": 1, "gpu_name": "G",
                                                              "kernel_sha256": "__import__('os')"})
    assert load_results(d).env.kernel_sha256 is None


@pytest.mark.parametrize(("text", "value"), [("true", True), ("False", False), ("", None)])
def test_a_true_or_false_cell(text: str, value: object) -> None:
    from clusterbench.io.results import _parse_cell

    assert _parse_cell(text, bool, "steady", "a", Path("p")) is value
    with pytest.raises(InputError, match="row 'a' column steady: expected true or false, got 'yes'"):
        _parse_cell("yes", bool, "steady", "a", Path("p"))
