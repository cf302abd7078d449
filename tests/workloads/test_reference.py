"""The NumPy reference on hand-made frames; every expected value is worked out here by hand."""

import math
from fractions import Fraction

import numpy as np
import pytest

from clusterbench.workloads.reference import (
    Pedestal, exact_fma, find_clusters, find_clusters_loop, pedestal_from_dark, scan_frame, track_update,
)

ROWS, COLS = 9, 11
BASE = 1000  # pedestal mean of every pixel in the hand-made frames
THR = 10.0   # threshold of every pixel: k*thr = 30 at 3x3


def flat_pedestal(dtype=np.float32, n=4):
    mean = np.full((ROWS, COLS), BASE, dtype)
    thr = np.full((ROWS, COLS), THR, dtype)
    total = np.full((ROWS, COLS), BASE * n, np.float64)
    total2 = np.full((ROWS, COLS), BASE * BASE * n, np.float64)
    return Pedestal(n=n, sum=total, sum2=total2, mean=mean, thr=thr)


def frame_with(values):
    """A frame at the pedestal with the given {(y, x): corrected value} set on top."""
    f = np.full((ROWS, COLS), BASE, np.int64)
    for (y, x), v in values.items():
        f[y, x] = BASE + v
    return f.astype(np.uint16)


def run(frame, dtype=np.float32, cap=100, k=3):
    (res,), _ = find_clusters(frame[None], flat_pedestal(dtype), k, cap)
    return res


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lone_photon(dtype):
    res = run(frame_with({(4, 5): 50, (4, 6): 7, (5, 5): -3}), dtype)
    assert res.found == 1
    (rec,) = res.records
    assert (rec["x"], rec["y"]) == (5, 4)
    # row-major 3x3 around (y=4, x=5): rows 3, 4, 5; columns 4, 5, 6
    assert list(rec["data"]) == [0, 0, 0, 0, 50, 7, 0, -3, 0]
    assert rec["data"].dtype == dtype


def test_photon_at_a_corner_sees_zeros_outside():
    res = run(frame_with({(0, 0): 40, (0, 1): 12, (1, 1): 5}))
    assert res.found == 1
    rec = res.records[0]
    assert (rec["x"], rec["y"]) == (0, 0)
    assert list(rec["data"]) == [0, 0, 0, 0, 40, 12, 0, 0, 5]
    # the far corner with a 5x5 window: two rows and columns fall outside
    res5 = run(frame_with({(ROWS - 1, COLS - 1): 40}), k=5)
    rec5 = res5.records[0]
    assert (rec5["x"], rec5["y"]) == (COLS - 1, ROWS - 1)
    expected = np.zeros(25)
    expected[12] = 40
    assert np.array_equal(rec5["data"], expected)


def test_two_equal_adjacent_maxima_both_emit_in_row_major_order():
    res = run(frame_with({(4, 5): 60, (4, 4): 60, (3, 4): 1}))
    assert res.found == 2
    assert [(int(r["x"]), int(r["y"])) for r in res.records] == [(4, 4), (5, 4)]
    assert list(res.records[0]["data"]) == [0, 1, 0, 0, 60, 60, 0, 0, 0]


def test_cluster_found_only_by_the_total_rule():
    # centre 9 <= thr 10, eight neighbours 6: total 9 + 48 = 57 > 3 * 10; the max rule cannot fire
    values = {(4 + dy, 5 + dx): 6 for dy in (-1, 0, 1) for dx in (-1, 0, 1)}
    values[(4, 5)] = 9
    res = run(frame_with(values))
    assert res.found == 1
    assert (res.records[0]["x"], res.records[0]["y"]) == (5, 4)
    # the same shape at 3 instead of 6: total 9 + 24 = 33 > 30 still; at 2: 9 + 16 = 25, nothing
    values2 = {k: (2 if v == 6 else v) for k, v in values.items()}
    assert run(frame_with(values2)).found == 0
    scan = scan_frame(frame_with(values), flat_pedestal().mean, flat_pedestal().thr, 3)
    assert not scan.pedestal_like[4, 5] and not scan.pedestal_like[4, 4]  # total 48+9 > 30 around both
    assert scan.pedestal_like[0, 0]


def test_the_comparisons_are_strict():
    assert run(frame_with({(4, 5): 10})).found == 0  # max == thr: not above
    assert run(frame_with({(4, 5): 11})).found == 1
    # total exactly k*thr = 30 (10 + 20 spread over a 3x3 window with max 10): not above
    vals = {(4, 5): 10, (4, 4): 10, (4, 6): 10}
    assert run(frame_with(vals)).found == 0


def test_negative_pixels_are_recorded_but_never_pedestal_like():
    frame = frame_with({(4, 5): 50, (4, 4): -15, (0, 0): -11, (0, 10): -10})
    res = run(frame)
    assert res.found == 1
    assert list(res.records[0]["data"]) == [0, 0, 0, -15, 50, 0, 0, 0, 0]
    scan = scan_frame(frame, flat_pedestal().mean, flat_pedestal().thr, 3)
    assert not scan.pedestal_like[0, 0]  # -11 < -10: skipped, so never folded into the pedestal
    assert scan.pedestal_like[0, 10]  # -10 is not below -10
    assert not scan.emit[0, 0]


def test_pixels_over_the_cap_are_counted_not_stored():
    photons = {(1, 1): 30, (1, 5): 31, (4, 2): 32, (7, 8): 33, (7, 1): 34}
    res = run(frame_with(photons), cap=3)
    assert res.found == 5 and len(res.records) == 3 and res.dropped == 2
    assert [(int(r["x"]), int(r["y"])) for r in res.records] == [(1, 1), (5, 1), (2, 4)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [3, 5])
def test_vectorised_reference_matches_the_literal_loop(dtype, k):
    rng = np.random.default_rng(k)
    mean = rng.normal(1000, 3, (12, 13)).astype(dtype)
    thr = rng.uniform(0, 6, (12, 13)).astype(dtype)
    for _ in range(3):
        frame = rng.integers(990, 1012, (12, 13)).astype(np.uint16)  # coarse values: many ties
        scan = scan_frame(frame, mean, thr, k)
        ys, xs = np.nonzero(scan.emit)
        assert list(zip(xs.tolist(), ys.tolist())) == find_clusters_loop(frame, mean, thr, k)


def test_pedestal_by_hand():
    dark = np.array([1, 2, 3, 4], np.uint16).reshape(4, 1, 1)
    ped = pedestal_from_dark(dark, 5.0, "float64")
    assert ped.sum[0, 0] == 10 and ped.sum2[0, 0] == 30
    assert ped.mean[0, 0] == 2.5  # 10 * 0.25
    assert ped.thr[0, 0] == math.sqrt(30 * 0.25 - 6.25) * 5.0  # var 1.25, all exact here
    ped32 = pedestal_from_dark(dark, 5.0, "float32")
    assert ped32.mean.dtype == np.float32 and ped32.thr[0, 0] == np.float32(math.sqrt(1.25) * 5.0)
    # a constant pixel has zero spread: threshold 0
    assert pedestal_from_dark(np.full((3, 1, 1), 7, np.uint16), 5.0, "float64").thr[0, 0] == 0.0


def test_pedestal_uses_a_single_rounding_fma():
    # N = 3 dark frames: 1/3 is inexact, so mean*mean loses bits and the fused form can differ
    rng = np.random.default_rng(3)
    dark = rng.integers(1500, 2500, (3, 40, 40)).astype(np.uint16)
    ped = pedestal_from_dark(dark, 1.0, "float64")
    inv = 1.0 / 3.0
    for y, x in [(0, 0), (5, 7), (39, 39), (20, 1)]:
        s = float(dark[:, y, x].astype(np.float64).sum())
        s2 = float((dark[:, y, x].astype(np.float64) ** 2).sum())
        m = s * inv
        fused = float(Fraction(-m) * Fraction(m) + Fraction(s2 * inv))  # one rounding, by exact arithmetic
        assert ped.thr[y, x] == math.sqrt(max(fused, 0.0))


def test_exact_fma_against_exact_arithmetic():
    rng = np.random.default_rng(0)
    a = rng.normal(size=2000) * 10.0 ** rng.integers(-5, 6, 2000)
    b = rng.normal(size=2000) * 10.0 ** rng.integers(-5, 6, 2000)
    c = rng.normal(size=2000) * 10.0 ** rng.integers(-5, 6, 2000)
    c[:500] = -(a[:500] * b[:500])  # cancellation: the fused result is the product's rounding error
    out = exact_fma(a, b, c)
    expected = [float(Fraction(x) * Fraction(y) + Fraction(z)) for x, y, z in zip(a, b, c)]
    assert out.tolist() == expected
    assert np.any(out[:500] != 0.0)  # a non-fused a*b+c would give exactly 0 there


def test_tracking_update_by_hand_applies_from_the_next_frame():
    ped = flat_pedestal(np.float64, n=4)  # sum 4000, sum2 4e6 per pixel, mean 1000
    frame = frame_with({(4, 4): 6})  # a pedestal-like pixel 6 above its mean
    scan = scan_frame(frame, ped.mean, ped.thr, 3)
    assert scan.pedestal_like[4, 4]
    new = track_update(ped, frame, scan.pedestal_like)
    # sum + (val - sum*inv) = 4000 + (1006 - 1000) = 4006; sum2 + (val^2 - sum2/4) = 4e6 + 1012036 - 1e6
    assert new.sum[4, 4] == 4006 and new.sum2[4, 4] == 4_012_036
    assert new.mean[4, 4] == 1001.5 and new.thr[4, 4] == THR
    assert new.sum[0, 0] == 4000 and new.mean[0, 0] == 1000  # 1000 - 4000/4 = 0: unchanged
    # frame 2 is corrected with the updated mean: pixel (4, 4) reads 1006 - 1001.5 in (5, 5)'s window
    photon = frame_with({(4, 4): 6, (5, 5): 40})
    res, final = find_clusters(np.stack([frame, photon]), ped, 3, 10, mode="tracking")
    assert res[1].found == 1 and res[1].records[0]["data"][0] == 4.5
    assert final.mean[5, 5] == 1000 and final.sum[5, 5] == 4000  # the photon pixel was not pedestal-like
    assert final.mean[4, 4] == 1001.5  # nor was (4, 4) in frame 2: its window max 40 > thr
    frozen, same = find_clusters(np.stack([frame, photon]), ped, 3, 10, mode="frozen")
    assert same is ped and frozen[1].records[0]["data"][0] == 6
