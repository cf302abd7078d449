"""A NumPy model of aare's ClusterFinderCUDA (branch feature/cuda_clusterfinder, commit 5922c73).

Read from aare's sources at 5922c73 (include/aare/clusterfinder_kernel.cuh, kernel
``find_clusters_in_single_frame``; include/aare/ClusterFinderCUDA.hpp; include/aare/Pedestal.hpp),
and from the PTX nvcc 13.0 emits for the 3x3 float kernel (-O3, sm_90, no fast math). Everything
below is float32 arithmetic, as on the device; docs/aare-cuda.md, "How aare's CUDA clusters differ
from the CPU finder's", sets it beside clusterbench's reference (clusterbench/workload/reference.py).

Pedestal (host, then device)
    The host ``Pedestal<double>`` sums the dark frames exactly (sum, sum2 in float64) and caches
    ``mean = sum / cur_samples`` (a division). On the first submit the host mean, sum and sum2 are
    each rounded to float32 and copied to the device. The kernel always divides by
    ``n_samples = 1000`` (the Pedestal's capacity), whatever the number of dark frames pushed.

Per frame, per pixel (one thread each), with ``n = float(1000)``:
    1. ``v = float(raw) - mean`` for the pixel and its window (a tile in shared memory; neighbours
       outside the image are 0.0 in the tile, so they add 0 to the total and take part in the max
       as 0).
    2. ``q = sum2 / n``; ``var = fmaf(-mean, mean, q)`` (PTX ``mul.f32`` + ``sub.f32`` with no
       rounding modifier, which ptxas contracts under nvcc's default ``--fmad=true``);
       ``rms2 = fmaxf(var, 0)``; ``s2 = (nsigma * nsigma) * rms2``. The noise is recomputed every
       frame from the *tracked* sum2 and mean: the threshold follows the pedestal.
    3. Negative exit: ``v < 0 and v*v > s2``: nothing, and no pedestal update.
    4. ``total`` = the window summed in row-major order from 0.0; ``max`` = fmaxf over the window.
    5. Test 1: ``max > 0 and max*max > s2``: the pixel emits when ``v == max`` (ties: every pixel
       equal to the max emits), otherwise nothing and no update.
    6. Test 3 (only when test 1 failed): ``total > 0 and total*total > float(k*k) * s2``: the pixel
       emits, **with no local-maximum check**: every pixel of a diffuse photon whose own window
       total passes emits its own cluster.
    7. Otherwise the pixel is pedestal-like and updates its own device state in place:
       ``sum += raw - sum/n``; ``sum2 += fmaf(raw, raw, -q)``; ``mean = sum / n`` (float32). The
       pixel's own later reads in this frame are done by then, so the update shows from the next
       frame. (Other blocks read this pixel's mean as their halo with no ordering: see
       :data:`HALO_RACE`.)
    Each emitted record holds x (column), y (row) and the k*k tile values in row-major order; a
    frame's records are written through an atomic counter (order arbitrary), and those past
    ``max_clusters_per_frame`` are dropped and not counted on the host (``collect`` clips the
    count to the cap).

Compared with aare's CPU ``ClusterFinder`` (and clusterbench's reference), which emits on the
total test only when ``v == max`` and keeps ``total > c3 * nsigma * rms`` linear, the decisive
difference is step 6. The squared comparisons are guarded by ``> 0`` tests, so a very negative
total does **not** emit (an earlier reading, ``|total| > k*thr``, is wrong for this commit).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from clusterbench.model.layout import FrameClusters, cluster_dtype

F32 = np.float32
AARE_PEDESTAL_SAMPLES = 1000  # Pedestal(rows, cols, n_samples = 1000); the kernel divides by it

HALO_RACE = ("a block reads its halo pixels' means from global memory while neighbouring blocks may "
             "already have updated them in the same frame; the model reads the pre-frame means")


def fmaf(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """float32 ``a*b + c`` rounded once, as the GPU's FFMA computes it.

    The product of two float32 values is exact in float64 (48 significand bits); when the float64
    sum with ``c`` is exact too (checked with Knuth's two-sum), rounding it to float32 is the single
    rounding of the fused operation. Elements where it is not exact are done in rationals."""
    a, b, c = np.broadcast_arrays(np.asarray(a, F32), np.asarray(b, F32), np.asarray(c, F32))
    if a.ndim == 0:
        return fmaf(a.reshape(1), b.reshape(1), c.reshape(1))[0]
    p = a.astype(np.float64) * b.astype(np.float64)
    c64 = c.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        s = p + c64
        bb = s - p
        err = (p - (s - bb)) + (c64 - bb)
    out = s.astype(F32)
    bad = (err != 0) | ~np.isfinite(s)
    for idx in zip(*np.nonzero(bad)):
        av, bv, cv = float(a[idx]), float(b[idx]), float(c[idx])
        if not all(np.isfinite((av, bv, cv))):
            out[idx] = F32(av * bv + cv)
            continue
        exact = Fraction(av) * Fraction(bv) + Fraction(cv)
        out[idx] = _round_fraction_to_f32(exact)
    return out


def _round_fraction_to_f32(x: Fraction) -> np.float32:
    """Round a rational to the nearest float32 (ties to even), without a float64 step."""
    if x == 0:
        return F32(0.0)
    lo = F32(float(x))  # within one float32 ulp of the answer
    cands = [np.nextafter(lo, F32(-np.inf)), lo, np.nextafter(lo, F32(np.inf))]
    cands = [c for c in cands if np.isfinite(c)]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - x), int(np.asarray(c).view(np.uint32)) & 1))
    return F32(best)


@dataclass(frozen=True, slots=True)
class DevicePedestal:
    """One stream's device pedestal: float32 mean, sum and sum2; ``n`` is the kernel's divisor."""

    n: int
    mean: np.ndarray
    sum: np.ndarray
    sum2: np.ndarray


def host_pedestal(dark: np.ndarray, n_samples: int = AARE_PEDESTAL_SAMPLES
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """aare's host ``Pedestal<double>`` after pushing ``dark`` frames: (mean, sum, sum2) in float64.

    The first ``n_samples`` pushes add exactly; later ones do ``sum += val - sum/n_samples``. The
    cached mean is ``sum / cur_samples`` (a division)."""
    dark = np.asarray(dark)
    total = np.zeros(dark.shape[1:], np.float64)
    total2 = np.zeros(dark.shape[1:], np.float64)
    for i, frame in enumerate(dark):
        val = frame.astype(np.float64)
        if i < n_samples:
            total += val
            total2 += val * val
        else:
            total += val - total / n_samples
            total2 += val * val - total2 / n_samples
    cur = min(len(dark), n_samples)
    mean = total / cur if cur else np.zeros_like(total)
    return mean, total, total2


def device_pedestal(dark: np.ndarray, n_samples: int = AARE_PEDESTAL_SAMPLES) -> DevicePedestal:
    """What ``sync_pedestal_to_device`` uploads: the host mean, sum and sum2, each rounded to float32."""
    mean, total, total2 = host_pedestal(dark, n_samples)
    return DevicePedestal(n=n_samples, mean=mean.astype(F32), sum=total.astype(F32), sum2=total2.astype(F32))


@dataclass(frozen=True, slots=True)
class DeviceScan:
    """Per-pixel outcome of one frame in the kernel (rows x cols arrays)."""

    corrected: np.ndarray  # float32 v
    emit: np.ndarray  # bool: a record is written for this pixel
    by_max: np.ndarray  # bool: emitted by test 1 (the pixel is its window's max)
    by_total: np.ndarray  # bool: emitted by test 3 (no local-max check)
    spread: np.ndarray  # bool: emitted by test 3 while not its window's max (the CPU rule never emits it)
    update: np.ndarray  # bool: the pixel's device pedestal is updated


def _window_sum_max(v: np.ndarray, cluster: int) -> tuple[np.ndarray, np.ndarray]:
    """The tile's total (row-major order from 0.0, float32) and fmaxf over the window, with the
    out-of-image neighbours 0.0 as in the zero-filled shared-memory tile."""
    rows, cols = v.shape
    h = cluster // 2
    tile = np.zeros((rows + 2 * h, cols + 2 * h), F32)
    tile[h:h + rows, h:h + cols] = v
    total = np.zeros((rows, cols), F32)
    for dy in range(cluster):  # row-major, each step rounded to float32
        for dx in range(cluster):
            total = total + tile[dy:dy + rows, dx:dx + cols]
    rowmax = tile[:, 0:cols].copy()  # max is order-free: do it separably
    for dx in range(1, cluster):
        np.maximum(rowmax, tile[:, dx:dx + cols], out=rowmax)
    wmax = rowmax[0:rows].copy()
    for dy in range(1, cluster):
        np.maximum(wmax, rowmax[dy:dy + rows], out=wmax)
    return total, wmax


def threshold_sq(ped: DevicePedestal, nsigma: float, fused_variance: bool = True) -> np.ndarray:
    """The kernel's squared threshold ``(nsigma*nsigma) * fmaxf(fmaf(-mean, mean, sum2/n), 0)``."""
    q = ped.sum2 / F32(ped.n)
    var = fmaf(-ped.mean, ped.mean, q) if fused_variance else q - ped.mean * ped.mean
    return (F32(nsigma) * F32(nsigma)) * np.maximum(var, F32(0.0))


def scan_frame(frame: np.ndarray, ped: DevicePedestal, nsigma: float, cluster: int, *,
               fused_variance: bool = True, local_max_on_total: bool = False,
               s2: np.ndarray | None = None) -> DeviceScan:
    """The kernel's decisions for one frame.

    Not aare's rule, for attributing differences only: ``local_max_on_total=True`` adds the CPU
    finder's ``v == max`` condition to test 3; ``fused_variance=False`` computes ``q - mean*mean``
    with two roundings instead of one FFMA; ``s2`` replaces the squared threshold (e.g. frozen at
    the dark frames' value)."""
    v = frame.astype(F32) - ped.mean
    total, wmax = _window_sum_max(v, cluster)
    if s2 is None:
        s2 = threshold_sq(ped, nsigma, fused_variance)
    negative = (v < 0) & (v * v > s2)
    above = (wmax > 0) & (wmax * wmax > s2)
    significant = (total > 0) & (total * total > F32(cluster * cluster) * s2)
    by_max = ~negative & above & ~(v < wmax)
    by_total = ~negative & ~above & significant
    if local_max_on_total:
        by_total &= ~(v < wmax)
    update = ~negative & ~above & ~significant
    return DeviceScan(corrected=v, emit=by_max | by_total, by_max=by_max, by_total=by_total,
                      spread=by_total & (v < wmax), update=update)


def update_pedestal(ped: DevicePedestal, frame: np.ndarray, update: np.ndarray) -> DevicePedestal:
    """The kernel's in-place float32 update of the pedestal-like pixels."""
    n = F32(ped.n)
    raw = frame.astype(F32)
    new_sum = ped.sum + (raw - ped.sum / n)
    new_sum2 = ped.sum2 + fmaf(raw, raw, -(ped.sum2 / n))
    new_mean = new_sum / n
    return DevicePedestal(n=ped.n, mean=np.where(update, new_mean, ped.mean),
                          sum=np.where(update, new_sum, ped.sum), sum2=np.where(update, new_sum2, ped.sum2))


def cluster_records(corrected: np.ndarray, emit: np.ndarray, cluster: int, cap: int) -> FrameClusters:
    """float32 records of the emitting pixels, row-major (aare's order is arbitrary). ``found`` is
    the device counter; only ``cap`` records exist when it is larger (which ones is not defined)."""
    rows, cols = corrected.shape
    h = cluster // 2
    tile = np.zeros((rows + 2 * h, cols + 2 * h), F32)
    tile[h:h + rows, h:h + cols] = corrected
    ys, xs = np.nonzero(emit)
    found = len(ys)
    ys, xs = ys[:cap], xs[:cap]
    rec = np.zeros(len(ys), cluster_dtype(cluster, "float32"))
    rec["x"], rec["y"] = xs, ys
    for j, (dy, dx) in enumerate((dy, dx) for dy in range(cluster) for dx in range(cluster)):
        rec["data"][:, j] = tile[ys + dy, xs + dx]
    return FrameClusters(found=found, records=rec)


KIND_MAX = 1  # test 1: the pixel is its window's max, above threshold (the CPU rule agrees)
KIND_TOTAL_AT_MAX = 2  # test 3 at the window's max (the CPU rule agrees)
KIND_TOTAL_SPREAD = 3  # test 3 at a pixel that is not its window's max: the CPU rule never emits it


@dataclass(frozen=True, slots=True)
class ModelFrame:
    """One frame of the model: its clusters, and for each record which test emitted it."""

    clusters: FrameClusters
    kind: np.ndarray  # uint8 per record (KIND_*), aligned with clusters.records
    mean_step_max: float  # the largest |change| of a device mean this frame's update made (ADU)

    @property
    def n_by_max(self) -> int:
        return int((self.kind == KIND_MAX).sum())

    @property
    def n_by_total(self) -> int:
        return int((self.kind != KIND_MAX).sum())


def record_kinds(scan: DeviceScan, cap: int) -> np.ndarray:
    """KIND_* of each emitted pixel, row-major like :func:`cluster_records`."""
    ys, xs = np.nonzero(scan.emit)
    ys, xs = ys[:cap], xs[:cap]
    kind = np.full(len(ys), KIND_TOTAL_AT_MAX, np.uint8)
    kind[scan.by_max[ys, xs]] = KIND_MAX
    kind[scan.spread[ys, xs]] = KIND_TOTAL_SPREAD
    return kind


def find_clusters(frames: np.ndarray, ped: DevicePedestal, nsigma: float, cluster: int, cap: int, *,
                  fused_variance: bool = True, local_max_on_total: bool = False, freeze_threshold: bool = False,
                  ) -> tuple[tuple[ModelFrame, ...], DevicePedestal]:
    """aare's CUDA finder on one stream over ``frames`` (F, rows, cols) uint16, in order: the
    frames' clusters and the final device pedestal. With ``n_streams = s`` stream i sees frames
    i, i + s, ...: run this on ``frames[i::s]`` for each.

    The keywords other than the defaults depart from aare, to attribute differences (see
    :func:`scan_frame`); ``freeze_threshold=True`` keeps the squared threshold of the starting
    pedestal for the whole pass, as clusterbench's reference keeps its threshold."""
    out = []
    s2 = threshold_sq(ped, nsigma, fused_variance) if freeze_threshold else None
    for frame in np.asarray(frames).reshape(-1, *np.shape(frames)[-2:]):
        scan = scan_frame(frame, ped, nsigma, cluster, fused_variance=fused_variance,
                          local_max_on_total=local_max_on_total, s2=s2)
        new = update_pedestal(ped, frame, scan.update)
        step = np.abs(new.mean.astype(np.float64) - ped.mean.astype(np.float64)).max(initial=0.0)
        out.append(ModelFrame(clusters=cluster_records(scan.corrected, scan.emit, cluster, cap),
                              kind=record_kinds(scan, cap), mean_step_max=float(step)))
        ped = new
    return tuple(out), ped


def find_clusters_loop(frame: np.ndarray, ped: DevicePedestal, nsigma: float, cluster: int
                       ) -> list[tuple[int, int, str]]:
    """A literal per-pixel transcription of the kernel for one frame (slow; tiny frames only).

    Returns (x, y, "max" | "total") in row-major order. Cross-checks :func:`scan_frame`."""
    rows, cols = frame.shape
    h = cluster // 2
    n = F32(ped.n)
    corr = [[F32(F32(frame[y, x]) - ped.mean[y, x]) for x in range(cols)] for y in range(rows)]
    found = []
    for y in range(rows):
        for x in range(cols):
            mean = ped.mean[y, x]
            var = fmaf(np.array([-mean]), np.array([mean]), np.array([F32(ped.sum2[y, x] / n)]))[0]
            s2 = F32(F32(F32(nsigma) * F32(nsigma)) * max(var, F32(0.0)))
            val = corr[y][x]
            if val < 0 and F32(val * val) > s2:
                continue
            total, wmax = F32(0.0), F32(-np.inf)
            for dy in range(-h, h + 1):
                for dx in range(-h, h + 1):
                    yy, xx = y + dy, x + dx
                    t = corr[yy][xx] if 0 <= yy < rows and 0 <= xx < cols else F32(0.0)
                    total = F32(total + t)
                    wmax = max(wmax, t)
            if wmax > 0 and F32(wmax * wmax) > s2:
                if not val < wmax:
                    found.append((x, y, "max"))
            elif total > 0 and F32(total * total) > F32(F32(cluster * cluster) * s2):
                found.append((x, y, "total"))
    return found
