import pytest

from clusterbench.errors import ConfigError, InputError
from clusterbench.model.params import WorkloadParams


def test_defaults_match_the_reference_campaign():
    p = WorkloadParams()
    assert (p.rows, p.cols, p.pedestal_frames, p.nsigma) == (400, 400, 1000, 5.0)
    assert (p.pedestal_dtype, p.pedestal, p.transfer) == ("float32", "frozen", "copy")
    assert (p.cluster, p.cap, p.streams, p.batch, p.frames) == (3, 3000, 4, 2000, 20000)
    assert p.data is None


def test_sizes_follow_design():
    # sizeof(cluster) = 4 + 4*k*k for float32: 40 B at 3x3, 328 B at 9x9; slot = 4 + cap*sizeof
    assert WorkloadParams(cluster=3).cluster_bytes == 40
    assert WorkloadParams(cluster=9, cap=1700).slot_bytes == 4 + 1700 * 328  # 557,604 B (docs/facts.md: 557.6 KB)
    assert WorkloadParams(cluster=3, pedestal_dtype="float64").cluster_bytes == 4 + 8 * 9
    assert WorkloadParams().frame_bytes == 400 * 400 * 2


def test_json_round_trip():
    p = WorkloadParams(cluster=9, cap=1700, streams=1, pedestal_dtype="float64", pedestal="tracking",
                       transfer="zerocopy", occupancy=100, data="x.npy")
    doc = p.to_json()
    assert all(isinstance(v, (int, float, str, type(None))) for v in doc.values())
    assert WorkloadParams.from_json(doc) == p
    assert WorkloadParams.from_json({"detector": [10, 20], "cap": 200}).rows == 10


@pytest.mark.parametrize("changes, fragment", [
    ({"cluster": 4}, "odd"), ({"cluster": 13}, "between 3 and 11"), ({"cluster": 1}, "between 3 and 11"),
    ({"frames": 0}, "frames"), ({"batch": -1}, "batch"), ({"streams": 1.5}, "streams"), ({"cap": True}, "cap"),
    ({"pedestal_dtype": "float16"}, "pedestal_dtype"), ({"pedestal": "rolling"}, "pedestal"),
    ({"transfer": "dma"}, "transfer"), ({"nsigma": 0}, "nsigma"), ({"nsigma": float("nan")}, "nsigma"),
    ({"occupancy": -1}, "occupancy"), ({"rows": 70000}, "uint16"), ({"batch": 30000}, "exceeds frames"),
    ({"rows": 10, "cols": 10}, "exceeds the 10x10 = 100 pixels"), ({"seed": -2}, "seed"),
])
def test_invalid_values_raise_input_error(changes, fragment):
    with pytest.raises(InputError) as exc:
        WorkloadParams(**changes)
    assert fragment in str(exc.value)
    assert exc.value.hint


def test_unknown_key_is_refused():
    with pytest.raises(InputError, match="unknown workload parameter"):
        WorkloadParams.from_json({"clustre": 3})


def test_the_one_validator_accepts_the_largest_detector_config_accepts() -> None:
    # x and y are uint16: indices 0..65535, so a 65536-row detector is the largest legal one,
    # for configs.toml and the workload alike (the same param_problems)
    from clusterbench.run.config import parse_configs

    assert WorkloadParams(rows=65536, cols=1, cap=1, batch=1, frames=1).rows == 65536
    text = "[[config]]\nlabel='a'\ncluster=3\ncap=1\nstreams=1\nbatch=1\nframes=1\ndetector=[65536, 1]\n"
    assert parse_configs(text).configs[0].params.rows == 65536
    with pytest.raises(InputError, match="between 1 and 65536"):
        WorkloadParams(rows=65537, cols=1, cap=1)


def test_the_deliberate_delay_is_a_number_of_microseconds_per_frame() -> None:
    from clusterbench.run.config import parse_configs

    assert WorkloadParams().delay_us_per_frame == 0.0  # none by default
    p = WorkloadParams(delay_us_per_frame=2)
    assert p.delay_us_per_frame == 2.0 and isinstance(p.delay_us_per_frame, float)
    assert WorkloadParams.from_json(p.to_json()) == p and p.to_json()["delay_us_per_frame"] == 2.0
    assert "delay_us_per_frame" not in WorkloadParams().to_json()  # unused: every other record reads as before
    for bad, words in ((-0.1, ">= 0"), (1001.0, "at most 1000"), ("1", "must be a number"), (float("nan"), "finite")):
        with pytest.raises(ConfigError, match=words):
            WorkloadParams(delay_us_per_frame=bad)
    cfg = parse_configs('[[config]]\nlabel = "a"\ncluster = 3\ncap = 10\nstreams = 1\nbatch = 10\nframes = 10\n'
                        'delay_us_per_frame = 0.43\n').configs[0]
    assert cfg.params.delay_us_per_frame == 0.43
    with pytest.raises(ConfigError, match="delay_us_per_frame"):
        parse_configs('[[config]]\nlabel = "a"\ncluster = 3\ncap = 10\nstreams = 1\nbatch = 10\nframes = 10\n'
                      'delay_us_per_frame = -1\n')
