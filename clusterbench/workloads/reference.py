"""The NumPy reference cluster finder: the oracle for the GPU kernels, written for clarity.

It follows docs/facts.md, "The cluster finder", operation for operation, so that the GPU must match it
bit for bit in float32 and in float64:

* Pedestal (always float64): sum and sum2 of N dark frames (exact: integers below 2**53);
  ``inv = 1.0 / N``; ``mean = sum * inv``; ``std = sqrt(max(fma(-mean, mean, sum2 * inv), 0))``;
  ``thr = std * nsigma``. The fused multiply-add is emulated exactly (:func:`exact_fma`).
* "float32 pedestal" means: ``mean`` and ``thr`` are computed in float64 as above and then rounded
  once to float32; from there on every per-frame quantity (corrected values, the window total,
  ``k * thr``, the cluster values) is float32 arithmetic. The tracking state ``sum``/``sum2`` stays
  float64 in both types, and the stored mean is re-rounded from ``sum * inv`` after each update.
* Per frame: ``v = T(frame) - mean_T`` for every pixel first. For each pixel with ``v >= -thr``: the
  k x k window's max and its total (sum in row-major order from 0, out-of-image neighbours skipped);
  it emits when ``v == max`` and (``max > thr`` or ``total > T(k) * thr``); it is pedestal-like when
  ``max <= thr`` and ``total <= T(k) * thr``. Clusters come out in row-major order of their centre.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from clusterbench.model.layout import FrameClusters, cluster_dtype, value_dtype

_SPLIT = 134217729.0  # 2**27 + 1, Veltkamp's splitter for float64 (53-bit significand)


def exact_fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``a*b + c`` rounded once to float64, as the GPU's ``fma()`` computes it.

    Fast path: Dekker's exact product ``a*b = p + e`` and Knuth's two-sum ``p + c = s + t``; when
    ``t == 0`` the result is ``s + e`` with a single rounding, which is exact (this is the case for the
    pedestal, where ``c`` and ``-p`` are within a factor of 2, by Sterbenz's lemma). Any element where
    that does not hold is computed with exact rational arithmetic instead.
    """
    a, b, c = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(c, np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        p = a * b
        ca = _SPLIT * a
        ahi = ca - (ca - a)
        alo = a - ahi
        cb = _SPLIT * b
        bhi = cb - (cb - b)
        blo = b - bhi
        e = ((ahi * bhi - p) + ahi * blo + alo * bhi) + alo * blo
        s = p + c
        bb = s - p
        t = (p - (s - bb)) + (c - bb)
        out = s + e
    # Splitting is exact only away from overflow/underflow; be strict about when the fast path is trusted.
    safe = (t == 0) & np.isfinite(out) & np.isfinite(e) & ((np.abs(a) < 1e150) & (np.abs(b) < 1e150))
    safe &= (p == 0) | (np.abs(p) > 1e-250)
    out = np.array(out, dtype=np.float64, copy=True)
    for idx in zip(*np.nonzero(~safe)):
        av, bv, cv = float(a[idx]), float(b[idx]), float(c[idx])
        if not all(np.isfinite((av, bv, cv))):
            out[idx] = av * bv + cv
        else:
            out[idx] = float(Fraction(av) * Fraction(bv) + Fraction(cv))
    return out


@dataclass(frozen=True, slots=True)
class Pedestal:
    """Pedestal state. ``sum``/``sum2`` are float64; ``mean``/``thr`` are in the pedestal type."""

    n: int
    sum: np.ndarray
    sum2: np.ndarray
    mean: np.ndarray
    thr: np.ndarray


def accumulate_dark(dark: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel sum and sum of squares of dark frames (N, rows, cols) uint16, in float64 (exact)."""
    dark = np.asarray(dark)
    total = np.zeros(dark.shape[1:], np.float64)
    total2 = np.zeros(dark.shape[1:], np.float64)
    for frame in dark:
        val = frame.astype(np.float64)
        total += val
        total2 += val * val
    return total, total2


def pedestal_from_sums(total: np.ndarray, total2: np.ndarray, n: int, nsigma: float, pedestal_dtype: str) -> Pedestal:
    t = value_dtype(pedestal_dtype)
    inv = np.float64(1.0) / np.float64(n)
    mean64 = total * inv
    var = exact_fma(-mean64, mean64, total2 * inv)
    std = np.sqrt(np.maximum(var, 0.0))
    thr64 = std * np.float64(nsigma)
    return Pedestal(n=n, sum=total.copy(), sum2=total2.copy(), mean=mean64.astype(t), thr=thr64.astype(t))


def pedestal_from_dark(dark: np.ndarray, nsigma: float, pedestal_dtype: str) -> Pedestal:
    total, total2 = accumulate_dark(dark)
    return pedestal_from_sums(total, total2, len(dark), nsigma, pedestal_dtype)


@dataclass(frozen=True, slots=True)
class FrameScan:
    """Per-pixel outcome of one frame's scan (all arrays rows x cols)."""

    corrected: np.ndarray
    emit: np.ndarray  # bool: a cluster is centred here
    pedestal_like: np.ndarray  # bool: the tracking mode folds this pixel into its pedestal


def scan_frame(frame: np.ndarray, mean: np.ndarray, thr: np.ndarray, cluster: int) -> FrameScan:
    """The per-frame rules, vectorised over pixels; each pixel sees the same operations in the same order."""
    t = mean.dtype.type
    rows, cols = frame.shape
    h = cluster // 2
    v = frame.astype(t) - mean  # step 1: corrected values, all pixels first
    zeros = np.zeros((rows + 2 * h, cols + 2 * h), t)  # out-of-image neighbours add nothing to the total
    zeros[h:h + rows, h:h + cols] = v
    ninf = np.full((rows + 2 * h, cols + 2 * h), -np.inf, t)  # ... and never win the max
    ninf[h:h + rows, h:h + cols] = v
    total = np.zeros((rows, cols), t)
    wmax = np.full((rows, cols), -np.inf, t)
    for dy in range(-h, h + 1):  # row-major order, the sum starting at 0
        for dx in range(-h, h + 1):
            total = total + zeros[h + dy:h + dy + rows, h + dx:h + dx + cols]
            wmax = np.maximum(wmax, ninf[h + dy:h + dy + rows, h + dx:h + dx + cols])
    considered = ~(v < -thr)
    kthr = t(cluster) * thr
    above = wmax > thr
    by_total = total > kthr
    emit = considered & (v == wmax) & (above | by_total)
    pedestal_like = considered & ~above & ~by_total
    return FrameScan(corrected=v, emit=emit, pedestal_like=pedestal_like)


def cluster_records(corrected: np.ndarray, emit: np.ndarray, cluster: int, cap: int) -> FrameClusters:
    """Records for the emitting pixels in row-major order; the first ``cap`` are kept."""
    t = corrected.dtype
    rows, cols = corrected.shape
    h = cluster // 2
    padded = np.zeros((rows + 2 * h, cols + 2 * h), t)
    padded[h:h + rows, h:h + cols] = corrected
    ys, xs = np.nonzero(emit)  # row-major
    found = len(ys)
    ys, xs = ys[:cap], xs[:cap]
    rec = np.zeros(len(ys), cluster_dtype(cluster, "float32" if t == np.float32 else "float64"))
    rec["x"] = xs
    rec["y"] = ys
    for j, (dy, dx) in enumerate((dy, dx) for dy in range(-h, h + 1) for dx in range(-h, h + 1)):
        rec["data"][:, j] = padded[ys + h + dy, xs + h + dx]
    return FrameClusters(found=found, records=rec)


def track_update(ped: Pedestal, frame: np.ndarray, pedestal_like: np.ndarray) -> Pedestal:
    """aare's running update for pedestal-like pixels (float64): sum += val - sum*inv, likewise sum2."""
    inv = np.float64(1.0) / np.float64(ped.n)
    val = frame.astype(np.float64)
    new_sum = ped.sum + (val - ped.sum * inv)
    new_sum2 = ped.sum2 + (val * val - ped.sum2 * inv)
    total = np.where(pedestal_like, new_sum, ped.sum)
    total2 = np.where(pedestal_like, new_sum2, ped.sum2)
    mean = np.where(pedestal_like, (new_sum * inv).astype(ped.mean.dtype), ped.mean)
    return Pedestal(n=ped.n, sum=total, sum2=total2, mean=mean, thr=ped.thr)  # thr is never refreshed


def find_clusters(frames: np.ndarray, ped: Pedestal, cluster: int, cap: int, mode: str = "frozen"
                  ) -> tuple[tuple[FrameClusters, ...], Pedestal]:
    """Run the finder over frames (F, rows, cols) uint16. Returns the per-frame clusters and the final
    pedestal (unchanged in ``frozen`` mode; in ``tracking`` mode each frame's update applies from the next)."""
    if mode not in ("frozen", "tracking"):
        raise ValueError(f"mode must be frozen or tracking, got {mode!r}")
    out = []
    for frame in np.asarray(frames).reshape(-1, *np.shape(frames)[-2:]):
        scan = scan_frame(frame, ped.mean, ped.thr, cluster)
        out.append(cluster_records(scan.corrected, scan.emit, cluster, cap))
        if mode == "tracking":
            ped = track_update(ped, frame, scan.pedestal_like)
    return tuple(out), ped


def find_clusters_loop(frame: np.ndarray, mean: np.ndarray, thr: np.ndarray, cluster: int) -> list[tuple[int, int]]:
    """A literal pixel-by-pixel transcription of the rules (slow; for small test frames only).

    Returns the (x, y) centres in emission order. Used to cross-check :func:`scan_frame`."""
    t = mean.dtype.type
    rows, cols = frame.shape
    h = cluster // 2
    corrected = [[t(t(frame[y, x]) - mean[y, x]) for x in range(cols)] for y in range(rows)]
    found = []
    for y in range(rows):
        for x in range(cols):
            v, th = corrected[y][x], thr[y, x]
            if v < -th:
                continue
            total, wmax = t(0), None
            for dy in range(-h, h + 1):
                for dx in range(-h, h + 1):
                    yy, xx = y + dy, x + dx
                    if 0 <= yy < rows and 0 <= xx < cols:
                        val = corrected[yy][xx]
                        total = t(total + val)
                        wmax = val if wmax is None or val > wmax else wmax
            if wmax > th:
                if v == wmax:
                    found.append((x, y))
            elif total > t(t(cluster) * th):
                if v == wmax:
                    found.append((x, y))
    return found
