import numpy as np
import pytest

from clusterbench.errors import InputError
from clusterbench.model.params import WorkloadParams
from clusterbench.workloads.synth import (
    PHOTON_ADU, build_frames, detector_model, load_npy_frames, photon_signal, synthetic_frames,
)


def test_deterministic_for_a_seed():
    a = synthetic_frames(20, 30, 3, 4, 5.0, seed=7)
    b = synthetic_frames(20, 30, 3, 4, 5.0, seed=7)
    c = synthetic_frames(20, 30, 3, 4, 5.0, seed=8)
    assert np.array_equal(a.dark, b.dark) and np.array_equal(a.pool, b.pool)
    assert not np.array_equal(a.pool, c.pool)
    assert a.dark.dtype == np.uint16 and a.pool.shape == (4, 20, 30)


def test_maps_follow_the_design_distributions():
    m = detector_model(200, 200, seed=1)
    assert abs(m.pedestal_adu.mean() - 2000) < 2 and abs(m.pedestal_adu.std() - 100) < 2
    assert m.noise_adu.min() >= 8 and m.noise_adu.max() <= 20 and abs(m.noise_adu.mean() - 14) < 0.1


def test_dark_frames_scatter_around_the_pedestal():
    fs = synthetic_frames(50, 50, 200, 1, 0.0, seed=2)
    m = detector_model(50, 50, seed=2)
    resid = fs.dark.astype(np.float64) - m.pedestal_adu
    # per-pixel sd estimates the noise map (sd of 200 samples: about 5 % relative error)
    ratio = resid.std(axis=0) / m.noise_adu
    assert abs(np.median(ratio) - 1.0) < 0.03


def test_photon_charge_is_conserved_away_from_edges():
    rng = np.random.default_rng(0)
    img = photon_signal(60, 60, 1, rng)
    total = img.sum()
    y, x = np.unravel_index(np.argmax(img), img.shape)
    if 3 <= y < 57 and 3 <= x < 57:
        assert abs(total - PHOTON_ADU) < 0.5  # 5x5 footprint holds > 99.9 % of a 0.6 px cloud
    assert img.max() > 0.25 * PHOTON_ADU  # the central pixel gets a good share


def test_occupancy_sets_the_photon_count():
    fs = synthetic_frames(100, 100, 0, 20, 50.0, seed=3)
    m = detector_model(100, 100, seed=3)
    excess = (fs.pool.astype(np.float64) - m.pedestal_adu).sum(axis=(1, 2)) / PHOTON_ADU
    # photons per frame ~ Poisson(50); noise adds about +-0.9 photon-equivalents per frame
    assert abs(excess.mean() - 50) < 5


def test_npy_data_is_split_into_dark_and_pool(tmp_path):
    arr = np.arange(6 * 4 * 5, dtype=np.uint16).reshape(6, 4, 5)
    path = tmp_path / "run.npy"
    np.save(path, arr)
    fs = load_npy_frames(str(path), 4, 5, n_dark=2, n_pool=3)
    assert np.array_equal(fs.dark, arr[:2]) and np.array_equal(fs.pool, arr[2:5])
    p = WorkloadParams(rows=4, cols=5, pedestal_frames=2, frames=10, batch=10, cap=20, pool=100, data=str(path))
    assert build_frames(p).pool.shape == (4, 4, 5)


@pytest.mark.parametrize("arr, rows, fragment", [
    (np.zeros((3, 4, 5), np.float32), 4, "uint16"),
    (np.zeros((3, 4, 5), np.uint16), 5, "4x5"),
    (np.zeros((2, 4, 5), np.uint16), 4, "pedestal"),
])
def test_bad_npy_data_is_an_input_error(tmp_path, arr, rows, fragment):
    path = tmp_path / "bad.npy"
    np.save(path, arr)
    with pytest.raises(InputError, match=fragment):
        load_npy_frames(str(path), rows, 5, n_dark=2, n_pool=10)
    with pytest.raises(InputError, match="not found"):
        load_npy_frames(str(tmp_path / "missing.npy"), 4, 5, 2, 10)


def test_threaded_generation_gives_each_frame_from_its_own_generator(monkeypatch):
    # frames are drawn on several threads; each must equal the frame drawn alone from its own
    # (seed, kind, index) generator, in its own slot, whatever the thread count
    from clusterbench.workloads import synth

    monkeypatch.setattr(synth.os, "cpu_count", lambda: 4)
    fs = synthetic_frames(24, 32, 19, 13, 6.0, seed=5)
    m = detector_model(24, 32, seed=5)
    for i in range(19):
        assert np.array_equal(fs.dark[i], synth.dark_frame(m, 5, i)), i
    for i in range(13):
        assert np.array_equal(fs.pool[i], synth.data_frame(m, 5, i, 6.0)), i
    monkeypatch.setattr(synth.os, "cpu_count", lambda: 1)
    one = synthetic_frames(24, 32, 19, 13, 6.0, seed=5)
    assert np.array_equal(one.dark, fs.dark) and np.array_equal(one.pool, fs.pool)


def test_the_frame_cache_serves_the_same_frames_to_the_next_process(tmp_path, monkeypatch) -> None:
    from clusterbench.workloads import synth

    cache = tmp_path / "frames"
    cache.mkdir()
    first = synth.synthetic_frames(24, 20, 3, 5, 130.0, 7, cache_dir=cache)
    assert sorted(p.name.split(".", 1)[1] for p in cache.iterdir()) == ["dark.npy", "pool.npy"]
    # the next process: no generator call at all, the same bytes
    monkeypatch.setattr(synth, "data_frame", lambda *a: (_ for _ in ()).throw(AssertionError("generated again")))
    monkeypatch.setattr(synth, "dark_frame", lambda *a: (_ for _ in ()).throw(AssertionError("generated again")))
    again = synth.synthetic_frames(24, 20, 3, 5, 130.0, 7, cache_dir=cache)
    assert np.array_equal(again.dark, first.dark) and np.array_equal(again.pool, first.pool)
    assert again.source == first.source
    monkeypatch.undo()
    # other frames (another seed) are other files; a file of another shape is not served
    synth.synthetic_frames(24, 20, 3, 5, 130.0, 8, cache_dir=cache)
    assert len(list(cache.iterdir())) == 4
    key = synth.cache_key(24, 20, 3, 5, 130.0, 7)
    np.save(cache / f"{key}.pool.npy", np.zeros((2, 2, 2), np.uint16))
    fresh = synth.synthetic_frames(24, 20, 3, 5, 130.0, 7, cache_dir=cache)
    assert np.array_equal(fresh.pool, first.pool)
