"""The separable filter of the persistent tracking kernel's window total (CB_PSEP), as arithmetic.

The kernel must decide ``total > k*thr`` exactly as the reference does, with ``total`` summed in
row-major order from 0. It first sums the window row by row (each row left to right, then the row
sums top to bottom) together with the sum of absolute values A, and trusts that separable total
only where it lies farther from k*thr than 2*K*K*u*A (u the unit roundoff); elsewhere it sums in
row-major order. This checks the bound independently of the kernel, in NumPy's IEEE arithmetic, on
windows built to sit on the threshold: wherever the filter decides, it must decide as the
row-major sum does; and without the margin it must decide wrongly somewhere (so the margin is
needed, and this test can fail).
"""

import numpy as np
import pytest


def _row_major(w):
    acc = np.zeros(w.shape[0], w.dtype)
    for i in range(w.shape[1] * w.shape[2]):
        acc = acc + w[:, i // w.shape[2], i % w.shape[2]]
    return acc


def _separable(w):
    k = w.shape[1]
    rows = []
    for dy in range(k):
        rs = np.zeros(w.shape[0], w.dtype)
        ra = np.zeros(w.shape[0], w.dtype)
        for dx in range(k):
            rs = rs + w[:, dy, dx]
            ra = ra + np.abs(w[:, dy, dx])
        rows.append((rs, ra))
    cs = np.zeros(w.shape[0], w.dtype)
    ca = np.zeros(w.shape[0], w.dtype)
    for rs, ra in rows:
        cs = cs + rs
        ca = ca + ra
    return cs, ca


def _windows(rng, n, k, dtype):
    """Corrected values as the kernel sees them: mostly noise, some photons, some very negative
    neighbours, mixed magnitudes so that the two orders round differently; some out-of-image zeros."""
    w = rng.normal(0.0, 3.0, (n, k, k))
    w += rng.choice([0.0, 0.0, 0.0, 250.0, -180.0, 4000.0], (n, k, k)) * (rng.random((n, k, k)) < 0.2)
    w *= np.exp2(rng.integers(-8, 9, (n, 1, 1)))
    w[rng.random((n, k, k)) < 0.05] = 0.0
    return w.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [3, 5, 9, 11])
def test_the_filter_decides_as_the_row_major_sum(k, dtype):
    rng = np.random.default_rng(k)
    w = _windows(rng, 200_000 if k <= 5 else 60_000, k, dtype)
    exact = _row_major(w)
    # half the thresholds on the row-major or the separable total, up to 3 ulps either side
    cs, ca = _separable(w)
    steps = rng.integers(-3, 4, w.shape[0])
    t0 = np.where(rng.random(w.shape[0]) < 0.5, exact, cs)
    for _ in range(3):
        t0 = np.where(steps > 0, np.nextafter(t0, np.inf), np.where(steps < 0, np.nextafter(t0, -np.inf), t0))
        steps = steps - np.sign(steps)
    u = np.finfo(dtype).eps / 2
    tiny = np.finfo(dtype).tiny
    # the other half: thresholds spread over three margins either side of the row-major total
    margin = ca.astype(np.float64) * 2 * k * k * u
    spread = (exact + rng.uniform(-3, 3, w.shape[0]) * margin).astype(dtype)
    t0 = np.where(rng.random(w.shape[0]) < 0.5, t0, spread)
    truth = exact > t0

    def decide(slack):
        ee = np.maximum(ca * dtype(slack * k * k * u), dtype(tiny))
        dd = cs - t0
        fast = (dd > ee) | (dd < -ee)
        return fast, dd > ee

    fast, decision = decide(2)
    assert fast.mean() > 0.2  # the windows sit at the threshold, yet the filter decides many of them
    assert np.array_equal(decision[fast], truth[fast])
    # without the margin the separable total decides wrongly somewhere: the margin is needed
    fast0, decision0 = decide(0)
    assert not np.array_equal(decision0[fast0], truth[fast0])


def test_the_filter_takes_the_fast_path_on_realistic_totals():
    # away from the threshold (photon frames: thr is about 5 sigma, most totals are noise) nearly every
    # pixel is decided by the separable sum
    rng = np.random.default_rng(1)
    w = rng.normal(0.0, 3.0, (100_000, 9, 9)).astype(np.float32)
    cs, ca = _separable(w)
    t0 = np.float32(9 * 15.0)
    ee = np.maximum(ca * np.float32(2 * 81 * np.finfo(np.float32).eps / 2), np.finfo(np.float32).tiny)
    assert ((cs - t0 > ee) | (cs - t0 < -ee)).mean() > 0.999
