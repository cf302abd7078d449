"""configs.toml validation: every rejection names the file, line, config label and key."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from clusterbench.run.config import (
    ConfigFile,
    ProbeConfig,
    WorkloadSpec,
    config_warnings,
    load_configs,
    parse_configs,
    select,
    with_frames,
)
from clusterbench.errors import ConfigError, EXIT_INPUT
from clusterbench.model.params import WorkloadParams

REPO = Path(__file__).resolve().parents[2]

GOOD = """\
[defaults]
detector = [400, 400]
pedestal_frames = 1000
nsigma = 5.0
pedestal_dtype = "float32"
pedestal = "frozen"
transfer = "copy"

[[config]]
label = "3x3_s4"
cluster = 3
cap = 3000
streams = 4
batch = 2000
frames = 20000

[[config]]
label = "9x9_s1"
cluster = 9
cap = 1700
streams = 1
batch = 2000
frames = 20000
"""

ONE = """\
[[config]]
label = "a"
cluster = 3
cap = 10
streams = 1
batch = 10
frames = 100
"""


def _error(text: str, path: str = "cfg.toml") -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_configs(text, Path(path))
    assert info.value.exit_code == EXIT_INPUT
    return info.value


def _replace_line(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


# ----------------------------------------------------------------------------- the good path


def test_repo_configs_toml_is_the_reference_campaign() -> None:
    cf = load_configs(REPO / "configs.toml")
    got = [(c.label, c.params.cluster, c.params.cap, c.params.streams, c.params.batch, c.params.frames)
           for c in cf.configs]
    assert got == [
        ("3x3_s4", 3, 3000, 4, 2000, 20000),
        ("3x3_s1_uncontended", 3, 3000, 1, 2000, 20000),
        ("9x9_s4", 9, 1700, 4, 2000, 20000),
        ("9x9_s1_uncontended", 9, 1700, 1, 2000, 20000),
    ]
    assert cf.build is None
    assert {c.workload.kind for c in cf.configs} == {"cupy"}


def test_defaults_are_inherited_and_sizes_follow_the_design() -> None:
    cf = parse_configs(GOOD)
    a, b = (c.params for c in cf.configs)
    assert (a.rows, a.cols, a.pedestal_frames, a.nsigma) == (400, 400, 1000, 5.0)
    assert (a.pedestal_dtype, a.pedestal, a.transfer, cf.configs[0].dtype_tag) == ("float32", "frozen", "copy", "f32")
    # sizeof(cluster) = 4 + 4*k*k for f32: 40 bytes at 3x3, 328 at 9x9 (docs/facts.md, "The cluster finder")
    assert a.cluster_bytes == 40 and b.cluster_bytes == 328
    # the 9x9 cap-1700 D2H slot is 557.6 KB: 4 + 1700*328
    assert b.slot_bytes == 4 + 1700 * 328 == 557_604
    assert a.frame_bytes == 400 * 400 * 2


def test_float64_doubles_the_values_and_tags_f64() -> None:
    cf = parse_configs(ONE + 'pedestal_dtype = "float64"\n')
    (c,) = cf.configs
    assert c.dtype_tag == "f64"
    assert c.params.cluster_bytes == 4 + 8 * 9 == 76


def test_config_overrides_defaults() -> None:
    text = "[defaults]\nnsigma = 4.0\nframes = 100\n" + ONE.replace("frames = 100\n", "") + "nsigma = 3\n"
    (c,) = parse_configs(text).configs
    assert c.params.nsigma == 3.0 and isinstance(c.params.nsigma, float)
    assert c.params.frames == 100


def test_build_paths_resolve_against_the_config_folder(tmp_path: Path) -> None:
    p = tmp_path / "sub" / "c.toml"
    p.parent.mkdir()
    p.write_text(ONE + '\n[build]\nartifact = "out/finder"\nsources = ["src/*.cu"]\n')
    cf = load_configs(p)
    assert cf.build is not None
    assert cf.build.artifact == (tmp_path / "sub" / "out" / "finder").resolve()
    assert cf.build.sources == ((tmp_path / "sub" / "src" / "*.cu").resolve(),)


# ----------------------------------------------------------------------------- rejections


def test_missing_file_is_exit_2_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_configs(tmp_path / "nope.toml")
    assert "config file not found" in str(info.value) and "nope.toml" in str(info.value)
    assert "--config" in info.value.hint


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a file"):
        load_configs(tmp_path)


def test_toml_syntax_error_names_the_line() -> None:
    text = _replace_line(GOOD, 'label = "9x9_s1"', "label = 9x9_s1")
    err = _error(text)
    line = GOOD.splitlines().index('label = "9x9_s1"') + 1  # 1-based
    assert str(err).startswith(f"cfg.toml:{line}: TOML syntax error")
    assert "label = 9x9_s1" in str(err)


def test_duplicate_key_is_a_syntax_error_with_line() -> None:
    err = _error(ONE + "cap = 20\n")
    assert "cfg.toml:8: TOML syntax error" in str(err)


def test_unknown_key_suggests_the_closest() -> None:
    text = _replace_line(GOOD, "streams = 1", "streems = 1")
    err = _error(text)
    line = text.splitlines().index("streems = 1") + 1
    msg = str(err)
    assert f"cfg.toml:{line}: config '9x9_s1': key 'streems': unknown key 'streems' (did you mean 'streams'?)" in msg


def test_unknown_key_in_defaults_and_top_level() -> None:
    err = _error("[defautls]\nnsigma = 5.0\n" + ONE)
    assert "cfg.toml:1: top level: key 'defautls': unknown key 'defautls' (did you mean 'defaults'?)" in str(err)
    err = _error("[defaults]\nnsgima = 5.0\n" + ONE)
    assert "cfg.toml:2: [defaults]: key 'nsgima'" in str(err) and "did you mean 'nsigma'?" in str(err)


def test_label_in_defaults_is_rejected() -> None:
    err = _error('[defaults]\nlabel = "x"\n' + ONE)
    assert "[defaults]: key 'label': unknown key" in str(err)


@pytest.mark.parametrize(
    ("line", "bad", "expect"),
    [
        ("cluster = 3", "cluster = 4", "key 'cluster': must be odd (the window is centred on a pixel), got 4"),
        ("cluster = 3", "cluster = 13", "key 'cluster': must be between 3 and 11, got 13"),
        ("cluster = 3", "cluster = 1", "key 'cluster': must be between 3 and 11, got 1"),
        ("cluster = 3", "cluster = 3.0", "key 'cluster': must be an integer, got a float 3.0"),
        ("cluster = 3", 'cluster = "3"', "key 'cluster': must be an integer, got a string '3'"),
        ("frames = 100", "frames = 0", "key 'frames': must be >= 1, got 0"),
        ("frames = 100", "frames = -5", "key 'frames': must be >= 1, got -5"),
        ("cap = 10", "cap = 0", "key 'cap': must be >= 1, got 0"),
        ("streams = 1", "streams = 0", "key 'streams': must be >= 1, got 0"),
        ("batch = 10", "batch = -1", "key 'batch': must be >= 1, got -1"),
        ("batch = 10", "batch = true", "key 'batch': must be an integer, got a boolean true"),
        ("streams = 1", "streams = 1.5", "key 'streams': must be an integer, got a float 1.5"),
        ('label = "a"', 'label = "a b"', "key 'label': must be letters, digits"),
        ('label = "a"', 'label = "../x"', "key 'label': must be letters, digits"),
    ],
)
def test_bad_values_name_label_key_and_line(line: str, bad: str, expect: str) -> None:
    text = _replace_line(ONE, line, bad)
    err = _error(text)
    lineno = text.splitlines().index(bad) + 1
    label = "a" if not bad.startswith("label") else None
    prefix = f"cfg.toml:{lineno}: " + (f"config '{label}': " if label else "")
    assert f"{prefix}" in str(err)
    assert expect in str(err)
    assert err.hint  # every rejection says what to do


@pytest.mark.parametrize(
    ("bad", "expect"),
    [
        ("pedestal_frames = 1", "key 'pedestal_frames': must be >= 2, got 1"),
        ("nsigma = 0", "key 'nsigma': must be a finite number > 0, got 0"),
        ("nsigma = -1.5", "key 'nsigma': must be a finite number > 0, got -1.5"),
        ("nsigma = nan", "key 'nsigma': must be a finite number > 0, got nan"),
        ("nsigma = true", "key 'nsigma': must be a number, got a boolean true"),
        ("detector = [400]", "key 'detector': must be [rows, cols], two integers, got [400]"),
        ("detector = [0, 400]", "key 'detector': rows and cols must be between 1 and 65536"),
        ("detector = [400, 70000]", "got [400, 70000]"),
        ('pedestal_dtype = "float16"', "key 'pedestal_dtype': must be one of 'float32', 'float64', got 'float16'"),
        ('pedestal = "froze"', "got 'froze' (did you mean 'frozen'?)"),
        ('transfer = "zero-copy"', "got 'zero-copy' (did you mean 'zerocopy'?)"),
        ('tracking_kernel = "cop"', "key 'tracking_kernel': must be one of 'graph', 'coop', 'flags', got 'cop' "
                                    "(did you mean 'coop'?)"),
        ('frozen_kernel = "slid"', "got 'slid' (did you mean 'slide'?)"),
        ("frozen_kernel = 2", "key 'frozen_kernel': must be one of 'strip', 'twophase', 'slide', got an integer 2"),
    ],
)
def test_bad_defaults_name_defaults_key_and_line(bad: str, expect: str) -> None:
    text = f"[defaults]\n{bad}\n" + ONE
    err = _error(text)
    key = bad.split(" =")[0]
    assert f"cfg.toml:2: [defaults]: key '{key}': " in str(err)
    assert expect in str(err)


def test_missing_required_key_points_at_the_table() -> None:
    text = ONE.replace("cap = 10\n", "")
    err = _error(text)
    assert "cfg.toml:1: config 'a': missing key 'cap' (set it here or in [defaults])" in str(err)


def test_config_without_label() -> None:
    text = ONE + "\n" + ONE.replace('label = "a"\n', "")
    err = _error(text)
    assert "cfg.toml:9: [[config]] #2 (no label): missing key 'label'" in str(err)


def test_duplicate_labels() -> None:
    err = _error(ONE + "\n" + ONE)
    assert "cfg.toml:10: config 'a': key 'label': duplicate label 'a': [[config]] #1 has it too" in str(err)


def test_batch_larger_than_frames_is_rejected() -> None:
    text = _replace_line(ONE, "batch = 10", "batch = 500")
    err = _error(text)
    assert "cfg.toml:6: config 'a': key 'batch': batch 500 exceeds frames 100" in str(err)


def test_batch_from_defaults_larger_than_frames_points_at_defaults() -> None:
    text = "[defaults]\nbatch = 500\n" + ONE.replace("batch = 10\n", "")
    err = _error(text)
    assert "cfg.toml:2: config 'a' (from [defaults]): key 'batch': batch 500 exceeds frames 100" in str(err)


def test_cap_larger_than_the_detector_is_rejected() -> None:
    text = "[defaults]\ndetector = [4, 5]\n" + ONE.replace("batch = 10", "batch = 10").replace("cap = 10", "cap = 21")
    err = _error(text)
    assert "key 'cap': cap 21 exceeds the 4x5 = 20 pixels per frame" in str(err)


def test_every_problem_is_reported_at_once() -> None:
    text = ONE.replace("cluster = 3", "cluster = 4").replace("streams = 1", "streams = 0")
    err = _error(text)
    msg = str(err)
    assert "key 'cluster'" in msg and "key 'streams'" in msg and "(1 more problem:)" in msg


def test_config_must_be_an_array_of_tables() -> None:
    err = _error('[config]\nlabel = "a"\n')
    assert "cfg.toml:1: top level: config must be an array of tables: write [[config]], not [config]" in str(err)


def test_no_configs() -> None:
    err = _error("[defaults]\nnsigma = 5.0\n")
    assert "no [[config]] tables" in str(err)


def test_build_table_checks() -> None:
    err = _error(ONE + '[build]\nartifact = ""\nsources = []\n')
    assert "[build]: key 'artifact': must be a non-empty string" in str(err)
    assert "[build]: key 'sources': must be a non-empty array of strings" in str(err)
    err = _error(ONE + '[build]\nartefact = "x"\nsources = ["a"]\n')
    assert "key 'artefact': unknown key 'artefact' (did you mean 'artifact'?)" in str(err)
    assert "missing key 'artifact'" in str(err)


def test_non_utf8_file(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_bytes(b'[[config]]\nlabel = "\xff"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_configs(p)


# ----------------------------------------------------------------------------- records


def test_probe_config_rejects_impossible_values_when_built() -> None:
    with pytest.raises(ConfigError, match="'cluster': must be odd"):
        ProbeConfig(label="x", params=WorkloadParams(cluster=4, cap=1, streams=1, batch=1, frames=1))
    with pytest.raises(ConfigError, match="'frames': must be >= 1"):
        ProbeConfig(label="x", params=WorkloadParams(cluster=3, cap=1, streams=1, batch=1, frames=0))
    with pytest.raises(ConfigError, match="key 'label': must be letters"):
        ProbeConfig(label="a b", params=WorkloadParams())
    with pytest.raises(ConfigError, match="key 'workload': must be one of 'cupy', 'command'"):
        WorkloadSpec("docker")
    c = ProbeConfig(label="x", params=WorkloadParams(cluster=3, cap=1, streams=1, batch=1, frames=1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.label = "y"  # type: ignore[misc]


# ----------------------------------------------------------------------------- select, --frames


def test_select_keeps_file_order_and_rejects_unknown_labels() -> None:
    cf = parse_configs(GOOD)
    assert [c.label for c in select(cf, [])] == ["3x3_s4", "9x9_s1"]
    assert [c.label for c in select(cf, ["9x9_s1", "3x3_s4"])] == ["3x3_s4", "9x9_s1"]
    with pytest.raises(ConfigError) as info:
        select(cf, ["3x3_s5"])
    assert "--only '3x3_s5': no config has that label (did you mean '3x3_s4'?)" in str(info.value)
    assert "3x3_s4, 9x9_s1" in info.value.hint


def test_one_file_may_mix_dtypes_but_one_run_may_not() -> None:
    text = GOOD + '\n[[config]]\nlabel = "3x3_f64"\ncluster = 3\ncap = 3000\nstreams = 1\nbatch = 2000\nframes = 20000\npedestal_dtype = "float64"\n'
    cf = parse_configs(text)
    assert len(cf.configs) == 3
    with pytest.raises(ConfigError, match="mix pedestal_dtype float32 and float64"):
        select(cf, [])
    assert [c.label for c in select(cf, ["3x3_f64"])] == ["3x3_f64"]
    assert select(cf, ["3x3_f64"])[0].dtype_tag == "f64"


def test_with_frames_clips_batch_and_rejects_nonpositive() -> None:
    (c,) = parse_configs(GOOD).configs[:1]
    short = with_frames(c, 500).params
    assert (short.frames, short.batch) == (500, 500)
    longer = with_frames(c, 5000).params
    assert (longer.frames, longer.batch) == (5000, 2000)
    with pytest.raises(ConfigError, match="--frames must be a positive integer, got 0"):
        with_frames(c, 0)


def test_config_warnings_for_partial_launches_and_idle_streams() -> None:
    (c,) = parse_configs(GOOD).configs[:1]  # batch 2000, 4 streams
    assert config_warnings(c) == ()  # 20000 frames: 10 full launches
    w = config_warnings(with_frames(c, 5000))
    assert w[:2] == ("config '3x3_s4': frames 5000 is not a multiple of batch 2000: the last of 3 launches carries "
                     "1000 frames",
                     "config '3x3_s4': 5000 frames make 3 launches of batch 2000 for 4 streams: 1 stream stays idle")
    # 3 launches on the 3 busy streams: one each, so nothing overlaps a stream's copy in or its result out
    assert w[2].startswith("config '3x3_s4': the pass is 3 launches of batch 2000 on 3 streams (1 per stream): "
                           "the first copy in and the last result out overlap nothing")
    assert w[2].endswith("(frames >= 12,000, or a smaller batch)") and len(w) == 3  # 2 x 3 streams x 2000
    # make run's smoke configs (8,000 frames, batch 200: 40 launches, 10 per stream at 4 streams) are not warned
    assert config_warnings(with_frames(dataclasses.replace(c, params=c.params.replace(batch=200)), 8000)) == ()


def test_config_file_labels() -> None:
    cf = parse_configs(GOOD)
    assert isinstance(cf, ConfigFile)
    assert cf.labels == ("3x3_s4", "9x9_s1")


def test_kernel_choice_reaches_the_params_record() -> None:
    # the kernel keys are workload parameters: unset means the pipeline's default (None), set is carried
    (c,) = parse_configs(ONE).configs
    assert c.params.frozen_kernel is None and c.params.tracking_kernel is None
    (c,) = parse_configs('[defaults]\npedestal = "tracking"\ntracking_kernel = "flags"\n' + ONE).configs
    assert c.params.tracking_kernel == "flags"
    assert c.params.to_json()["tracking_kernel"] == "flags"


# ----------------------------------------------------------------------------- a program as it is (exec)

EXEC = '''\
[defaults]
streams = 4

[[config]]
label = "smc"
workload = "exec"
command = ["/bin/echo", "--streams", "{streams}", "{label}"]
frames = "kernel:calib"
window = "range:event loop@daq"
rate = 'rate: ([0-9.]+) frames/s'
'''


def test_an_exec_config_needs_only_a_label_and_a_command() -> None:
    (c,) = parse_configs('[[config]]\nlabel = "p"\nworkload = "exec"\ncommand = ["/bin/true"]\n').configs
    assert c.params is None and c.exec is not None and c.dtype_tag == "exec" and c.frames is None
    assert c.exec.source == "trace" and c.exec.values == {}  # no rate: the traced window gives the figure


def test_an_exec_configs_keys_and_placeholder_values() -> None:
    (c,) = parse_configs(EXEC).configs
    spec = c.exec
    assert spec.values == {"streams": 4}  # from [defaults]; our finder's other keys stay unset
    assert (spec.frames, spec.frames_spec, spec.window) == (None, "kernel:calib", "range:event loop@daq")
    assert spec.source == "rate" and spec.analysis_frames == "kernel:calib"
    assert c.workload.kind == "exec" and c.workload.command == ("/bin/echo", "--streams", "{streams}", "{label}")
    counted = parse_configs(EXEC.replace('frames = "kernel:calib"', "frames = 1000")).configs[0]
    assert counted.exec.frames == 1000 and counted.exec.analysis_frames == "1000" and counted.frames == 1000


@pytest.mark.parametrize("line, words", [
    ('frames = "kernel:("', "key 'frames': --frames 'kernel:(': not a regular expression"),
    ('window = "range:"', "key 'window'"),
    ('capture = "nvtx"', "key 'capture': 'nvtx' is not a capture range"),
    ('sustained = "wall"', "give a frame count, frames = N"),
    ('rate_unit = "furlongs"', "--rate-unit must be one of"),
    ('wall_end = "end"', "give both markers"),
    ('streams = 0', "key 'streams': must be >= 1, got 0"),
])
def test_an_exec_configs_bad_keys_are_named(line: str, words: str) -> None:
    key = line.split(" =")[0]
    text = "\n".join(ln for ln in EXEC.splitlines() if not ln.startswith(key + " ="))  # one value per key
    err = _error(text.replace("rate = ", line + "\nrate = "))
    assert "config 'smc'" in str(err) and words in str(err), str(err)


def test_an_exec_command_takes_no_protocol_placeholder_and_its_keys_stay_on_exec() -> None:
    err = _error(EXEC.replace('"{label}"]', '"{result}"]'))
    assert "{result} in '{result}' belongs to the result-record protocol" in str(err)
    err = _error(GOOD.replace("[[config]]", "[[config]]\nrate = 'x ([0-9]+)'", 1))
    assert "rate = 'x ([0-9]+)' is for a program probed as it is (workload = \"exec\")" in str(err)


def test_a_scan_point_gets_its_value_and_refuses_what_the_finder_refuses() -> None:
    from clusterbench.run.scan import expand, parse_scans

    configs = parse_configs(GOOD).configs[:1]  # 3x3_s4: our finder takes every parameter
    points = expand(configs, parse_scans(["streams=1,2", "batch=1000,2000"]))
    assert [p.label for p in points] == ["3x3_s4.streams1.batch1000", "3x3_s4.streams1.batch2000",
                                         "3x3_s4.streams2.batch1000", "3x3_s4.streams2.batch2000"]
    assert [(p.params.streams, p.params.batch) for p in points] == [(1, 1000), (1, 2000), (2, 1000), (2, 2000)]
    assert points[0].scanned_from == "3x3_s4" and points[0].point == (("streams", "1"), ("batch", "1000"))
    with pytest.raises(ConfigError, match=r"--scan: config '3x3_s4' at cluster=4: workload parameter 'cluster': "
                                          "must be odd"):
        expand(configs, parse_scans(["cluster=3,4"]))
