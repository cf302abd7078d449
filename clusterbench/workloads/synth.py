"""Frames for the workload: deterministic synthetic MOENCH-like data, or real data from a .npy file.

Synthetic data (docs/facts.md, "Synthetic MOENCH-like data"), NumPy only, deterministic for a seed:
per-pixel pedestal ~ N(2000, 100) ADU and noise sigma ~ U(8, 20) ADU; dark frames are pedestal plus
Gaussian noise; data frames add Poisson(occupancy) photons of 250 ADU each, the charge spread by a
2-D Gaussian (sigma 0.6 px) around a uniform sub-pixel position, integrated over each pixel of a
5 x 5 footprint. Values are rounded and clipped to uint16. Frame i of a kind is drawn from its own
generator seeded with (seed, kind, i), so any frame can be rebuilt alone, anywhere.

The pass reuses a pool of distinct data frames cyclically: global frame g is ``pool[g % len(pool)]``.
Every frame still crosses PCIe on its own; only host memory and generation time are saved.

A probe runs our finder in one process per traced pass and per sustained run, each needing the same
frames: it names a folder in ``$CLUSTERBENCH_FRAME_CACHE`` (FRAME_CACHE_ENV), where the first process
leaves the frames it built (two .npy files, written whole and renamed into place) and the others load
them. The frames are the same either way (each is drawn from its own generator); only the time differs.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from clusterbench.errors import InputError
from clusterbench.model.params import WorkloadParams

PEDESTAL_ADU = (2000.0, 100.0)  # mean, sd of the per-pixel pedestal (docs/facts.md)
NOISE_ADU = (8.0, 20.0)  # per-pixel noise sigma, uniform range (docs/facts.md)
PHOTON_ADU = 250.0  # charge of one photon (docs/facts.md: about 250 ADU)
SPREAD_PX = 0.6  # sigma of the charge cloud (docs/facts.md: about 0.6 px)
FOOTPRINT = 2  # the charge is integrated over +-2 pixels around the hit (over 99.9 % at 0.6 px)
_KIND_DARK, _KIND_DATA, _KIND_MAPS = 1, 2, 0
# Frames are drawn on this many threads at most: NumPy's generators and ufuncs release the GIL on
# whole arrays, and every frame has its own generator, so the frames are the same on any count.
MAX_THREADS = 16
FRAME_CACHE_ENV = "CLUSTERBENCH_FRAME_CACHE"  # a folder the processes of one probe share their frames in
# The cached frames' format; change it with the generator, so that a cache never serves other frames.
CACHE_VERSION = 1


@dataclass(frozen=True, slots=True)
class DetectorModel:
    pedestal_adu: np.ndarray  # float64 (rows, cols)
    noise_adu: np.ndarray  # float64 (rows, cols)


@dataclass(frozen=True, slots=True)
class FrameSet:
    """Dark frames for the pedestal and a pool of data frames (both (n, rows, cols) uint16)."""

    dark: np.ndarray
    pool: np.ndarray
    source: str  # "synthetic(seed=..., occupancy=...)" or the .npy path


def detector_model(rows: int, cols: int, seed: int) -> DetectorModel:
    rng = np.random.default_rng([seed, _KIND_MAPS])
    ped = rng.normal(PEDESTAL_ADU[0], PEDESTAL_ADU[1], size=(rows, cols))
    noise = rng.uniform(NOISE_ADU[0], NOISE_ADU[1], size=(rows, cols))
    return DetectorModel(pedestal_adu=ped, noise_adu=noise)


def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): plenty for synthetic charge sharing."""
    s = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return s * (1.0 - poly * np.exp(-x * x))


def photon_signal(rows: int, cols: int, n_photons: int, rng: np.random.Generator) -> np.ndarray:
    """Charge (ADU, float64) of n photons at uniform sub-pixel positions, shared by a Gaussian cloud."""
    image = np.zeros((rows, cols), np.float64)
    if n_photons == 0:
        return image
    px = rng.uniform(0.0, cols, n_photons)
    py = rng.uniform(0.0, rows, n_photons)
    offs = np.arange(-FOOTPRINT, FOOTPRINT + 1)
    ix = np.floor(px).astype(np.int64)[:, None] + offs  # (n, 5) pixel columns
    iy = np.floor(py).astype(np.int64)[:, None] + offs
    scale = 1.0 / (SPREAD_PX * np.sqrt(2.0))
    fx = 0.5 * (_erf((ix + 1 - px[:, None]) * scale) - _erf((ix - px[:, None]) * scale))
    fy = 0.5 * (_erf((iy + 1 - py[:, None]) * scale) - _erf((iy - py[:, None]) * scale))
    charge = PHOTON_ADU * fy[:, :, None] * fx[:, None, :]  # (n, 5, 5)
    yy = np.broadcast_to(iy[:, :, None], charge.shape)
    xx = np.broadcast_to(ix[:, None, :], charge.shape)
    inside = (yy >= 0) & (yy < rows) & (xx >= 0) & (xx < cols)  # charge outside the sensor is lost
    np.add.at(image, (yy[inside], xx[inside]), charge[inside])
    return image


def _to_adu(values: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(values), 0, 65535).astype(np.uint16)


def dark_frame(model: DetectorModel, seed: int, index: int) -> np.ndarray:
    rng = np.random.default_rng([seed, _KIND_DARK, index])
    return _to_adu(model.pedestal_adu + model.noise_adu * rng.standard_normal(model.pedestal_adu.shape))


def data_frame(model: DetectorModel, seed: int, index: int, occupancy: float) -> np.ndarray:
    rng = np.random.default_rng([seed, _KIND_DATA, index])
    rows, cols = model.pedestal_adu.shape
    noise = model.noise_adu * rng.standard_normal((rows, cols))
    signal = photon_signal(rows, cols, int(rng.poisson(occupancy)), rng)
    return _to_adu(model.pedestal_adu + noise + signal)


def cache_key(rows: int, cols: int, n_dark: int, n_data: int, occupancy: float, seed: int) -> str:
    """The name of one set of synthetic frames in a frame cache (pure)."""
    doc = {"version": CACHE_VERSION, "rows": rows, "cols": cols, "dark": n_dark, "data": n_data,
           "occupancy": float(occupancy), "seed": seed}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:24]


def _cached(cache_dir: Path, key: str, shape: tuple[int, int, int]) -> np.ndarray | None:
    path = cache_dir / f"{key}.npy"
    try:
        arr = np.load(path, mmap_mode="r")
    except (OSError, ValueError):
        return None
    return arr if arr.shape == shape and arr.dtype == np.uint16 else None


def _store(cache_dir: Path, key: str, arr: np.ndarray) -> None:
    """Write ``arr`` whole, then rename it into place: a reader never sees half a file. A cache that
    cannot be written (a full disk) is only a cache: the run goes on."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=cache_dir)
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, arr)
        os.replace(tmp, cache_dir / f"{key}.npy")
    except OSError:
        try:
            os.unlink(tmp)
        except (OSError, UnboundLocalError):
            pass


def synthetic_frames(rows: int, cols: int, n_dark: int, n_data: int, occupancy: float, seed: int,
                     out_pool: np.ndarray | None = None, cache_dir: Path | str | None = None) -> FrameSet:
    """Build n_dark dark frames and n_data data frames; ``out_pool`` (e.g. pinned) receives the data.
    ``cache_dir``: load them from there when an earlier process left them, else leave them there."""
    source = f"synthetic(seed={seed}, occupancy={occupancy:g} photons/frame)"
    key = cache_key(rows, cols, n_dark, n_data, occupancy, seed) if cache_dir is not None else None
    if key is not None:
        cache = Path(cache_dir)  # type: ignore[arg-type]
        dark_c = _cached(cache, key + ".dark", (n_dark, rows, cols))
        pool_c = _cached(cache, key + ".pool", (n_data, rows, cols))
        if dark_c is not None and pool_c is not None:
            pool = out_pool if out_pool is not None else np.empty((n_data, rows, cols), np.uint16)
            pool[:] = pool_c
            return FrameSet(dark=np.asarray(dark_c), pool=pool, source=source)
    model = detector_model(rows, cols, seed)
    dark = np.empty((n_dark, rows, cols), np.uint16)
    pool = out_pool if out_pool is not None else np.empty((n_data, rows, cols), np.uint16)

    def fill(job: tuple[bool, int]) -> None:
        is_dark, i = job
        if is_dark:
            dark[i] = dark_frame(model, seed, i)
        else:
            pool[i] = data_frame(model, seed, i, occupancy)

    jobs = [(True, i) for i in range(n_dark)] + [(False, i) for i in range(n_data)]
    threads = max(1, min(MAX_THREADS, os.cpu_count() or 1, len(jobs)))
    if threads == 1:
        for job in jobs:
            fill(job)
    else:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="clusterbench-synth") as ex:
            for _ in ex.map(fill, jobs, chunksize=8):
                pass
    if key is not None:
        _store(Path(cache_dir), key + ".pool", pool)  # type: ignore[arg-type]
        _store(Path(cache_dir), key + ".dark", dark)  # type: ignore[arg-type]
    return FrameSet(dark=dark, pool=pool, source=source)


def load_npy_frames(path: str, rows: int, cols: int, n_dark: int, n_pool: int) -> FrameSet:
    """Real data: a (frames, rows, cols) uint16 .npy, memory-mapped; the first n_dark frames are dark."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"data file not found: {path}", hint="pass --data with an existing .npy file")
    try:
        arr = np.load(p, mmap_mode="r")
    except Exception as exc:  # a corrupt or non-.npy file
        raise InputError(f"cannot read {path} as .npy: {exc}", hint="save frames with numpy.save") from None
    if arr.ndim != 3 or arr.dtype != np.uint16:
        raise InputError(
            f"{path} holds {arr.dtype} with shape {arr.shape}; expected uint16 (frames, rows, cols)",
            hint="convert with numpy: np.save(path, frames.astype(np.uint16))",
        )
    if arr.shape[1:] != (rows, cols):
        raise InputError(
            f"{path} frames are {arr.shape[1]}x{arr.shape[2]}, the params say {rows}x{cols}",
            hint=f"set rows = {arr.shape[1]} and cols = {arr.shape[2]}",
        )
    if arr.shape[0] <= n_dark:
        raise InputError(
            f"{path} has {arr.shape[0]} frames; {n_dark} are needed for the pedestal plus at least one data frame",
            hint="lower pedestal_frames or pass a longer file",
        )
    data = arr[n_dark:n_dark + n_pool]
    return FrameSet(dark=arr[:n_dark], pool=data, source=str(path))


def pool_size(params: WorkloadParams) -> int:
    return min(params.pool, params.frames)


def build_frames(params: WorkloadParams, out_pool: np.ndarray | None = None,
                 cache_dir: Path | str | None = None) -> FrameSet:
    """The frames a run uses: real data when ``params.data`` is set, else synthetic (through the frame
    cache ``cache_dir``, by default the folder $CLUSTERBENCH_FRAME_CACHE names, when it names one)."""
    if params.data is not None:
        fs = load_npy_frames(params.data, params.rows, params.cols, params.pedestal_frames, pool_size(params))
        if out_pool is not None:
            out_pool[: len(fs.pool)] = fs.pool
            return FrameSet(dark=fs.dark, pool=out_pool[: len(fs.pool)], source=fs.source)
        return fs
    if cache_dir is None:
        cache_dir = os.environ.get(FRAME_CACHE_ENV) or None
    if cache_dir is not None and not Path(cache_dir).is_dir():
        cache_dir = None
    return synthetic_frames(params.rows, params.cols, params.pedestal_frames, pool_size(params),
                            params.occupancy, params.seed, out_pool=out_pool, cache_dir=cache_dir)
