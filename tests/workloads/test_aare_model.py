"""The NumPy model of aare's ClusterFinderCUDA on tiny hand-made frames (CPU).

Every frame sits on a pedestal built from 1000 dark frames alternating 98 and 102 ADU, so that
by hand: mean = 100, sum = 100,000, sum2 = 500 * (98^2 + 102^2) = 10,004,000 (all exact in
float32), variance = 10,004 - 100^2 = 4, and at 5 sigma the squared threshold is 25 * 4 = 100
(threshold 10 ADU). Corrected values below are raw - 100. For 3x3 the total test is
total^2 > 9 * 100, i.e. total > 30.
"""

from __future__ import annotations

import numpy as np
import pytest

from clusterbench.workloads.reference import scan_frame as reference_scan
from clusterbench.workloads.aare import model as am

F32 = np.float32
SIZE = 5


def dark(shape=(SIZE, SIZE)) -> np.ndarray:
    d = np.empty((1000,) + shape, np.uint16)
    d[0::2], d[1::2] = 98, 102
    return d


def frame(pixels: dict[tuple[int, int], int], base: int = 100) -> np.ndarray:
    """A SIZE x SIZE frame at ``base`` ADU with ``{(x, y): raw}`` set."""
    f = np.full((SIZE, SIZE), base, np.uint16)
    for (x, y), raw in pixels.items():
        f[y, x] = raw
    return f


def found(scan: am.DeviceScan) -> dict[tuple[int, int], str]:
    """{(x, y): "max" | "total-at-max" | "spread"} of the emitting pixels."""
    out = {}
    for y, x in zip(*np.nonzero(scan.emit)):
        out[(int(x), int(y))] = "max" if scan.by_max[y, x] else ("spread" if scan.spread[y, x] else "total-at-max")
    return out


@pytest.fixture
def ped() -> am.DevicePedestal:
    return am.device_pedestal(dark())


def test_pedestal_as_uploaded(ped: am.DevicePedestal) -> None:
    assert ped.n == 1000
    assert (ped.mean == F32(100)).all() and ped.mean.dtype == F32
    assert (ped.sum == F32(100_000)).all() and (ped.sum2 == F32(10_004_000)).all()
    assert (am.threshold_sq(ped, 5.0) == F32(100)).all()


def test_a_very_negative_total_emits_nothing(ped: am.DevicePedestal) -> None:
    # every pixel 9 below the pedestal: interior totals are -81, |total| > 30 but total < 0
    # (0, 0) at -11 is below -threshold (skipped, not updated); (4, 4) at exactly -10 is not
    f = frame({(0, 0): 89, (4, 4): 90}, base=91)
    scan = am.scan_frame(f, ped, 5.0, 3)
    assert found(scan) == {}
    expected_update = np.ones((SIZE, SIZE), bool)
    expected_update[0, 0] = False
    assert (scan.update == expected_update).all()
    new = am.update_pedestal(ped, f, scan.update)
    # a pixel at 91: sum += 91 - 100 -> 99,991; sum2 += 91^2 - 10,004 = -1,723 -> 10,002,277; mean 99.991
    assert new.sum[2, 2] == F32(99_991) and new.sum2[2, 2] == F32(10_002_277)
    assert new.mean[2, 2] == F32(99.991)
    assert new.sum[0, 0] == F32(100_000) and new.mean[0, 0] == F32(100)  # not updated


def test_a_diffuse_photon_emits_every_pixel_whose_window_total_passes(ped: am.DevicePedestal) -> None:
    # a 3x3 block at x, y in 1..3: +8, the centre +9. No pixel exceeds the threshold (9^2 = 81 <= 100).
    # Window totals: centre 73, block edges 49, block corners 8 + 8 + 8 + 9 = 33 (all > 30); outside
    # the block at most 8 + 8 + 8 = 24. So all nine block pixels emit; only the centre is its window's max.
    f = frame({(x, y): 108 for x in (1, 2, 3) for y in (1, 2, 3)} | {(2, 2): 109})
    scan = am.scan_frame(f, ped, 5.0, 3)
    expected = {(x, y): "spread" for x in (1, 2, 3) for y in (1, 2, 3)} | {(2, 2): "total-at-max"}
    assert found(scan) == expected
    block = np.zeros((SIZE, SIZE), bool)
    block[1:4, 1:4] = True
    assert (scan.update == ~block).all()  # emitting pixels keep their pedestal
    fc = am.cluster_records(scan.corrected, scan.emit, 3, cap=100)
    rec = fc.records[(fc.records["x"] == 1) & (fc.records["y"] == 1)][0]
    assert rec["data"].tolist() == [0, 0, 0, 0, 8, 8, 0, 8, 9]
    # the CPU rule (clusterbench's reference) emits the centre only
    ref = reference_scan(f, np.full((SIZE, SIZE), 100, F32), np.full((SIZE, SIZE), 10, F32), 3)
    assert [(int(x), int(y)) for y, x in zip(*np.nonzero(ref.emit))] == [(2, 2)]
    # with the CPU's local-max check on test 3 the model emits the centre only too
    cpu = am.scan_frame(f, ped, 5.0, 3, local_max_on_total=True)
    assert found(cpu) == {(2, 2): "total-at-max"}


def test_the_cap_keeps_the_count(ped: am.DevicePedestal) -> None:
    f = frame({(x, y): 108 for x in (1, 2, 3) for y in (1, 2, 3)} | {(2, 2): 109})
    scan = am.scan_frame(f, ped, 5.0, 3)
    fc = am.cluster_records(scan.corrected, scan.emit, 3, cap=4)
    assert fc.found == 9 and len(fc.records) == 4


def test_ties_above_threshold_both_emit_and_neighbours_are_suppressed(ped: am.DevicePedestal) -> None:
    # two adjacent pixels at +20 (400 > 100): both are their windows' max. Every pixel whose window
    # holds one of them is neither emitted nor updated; only rows 0 and 4 and the column x = 4
    # (rows 1..3) see no bright pixel: 10 + 3 = 13 updated pixels, their totals 0.
    f = frame({(1, 2): 120, (2, 2): 120})
    scan = am.scan_frame(f, ped, 5.0, 3)
    assert found(scan) == {(1, 2): "max", (2, 2): "max"}
    expected_update = np.zeros((SIZE, SIZE), bool)
    expected_update[0, :] = expected_update[4, :] = True
    expected_update[1:4, 4] = True
    assert (scan.update == expected_update).all() and scan.update.sum() == 13


def test_edges_count_zero_and_the_threshold_is_strict(ped: am.DevicePedestal) -> None:
    # the corner (0, 0) at +10, exactly the threshold: 10^2 > 100 is false, so test 1 fails; its
    # in-image neighbours (1, 0), (0, 1), (1, 1) at +9. Out-of-image pixels count 0: the corner's
    # total is 37, and the three neighbours' windows hold the same four pixels (37 > 30); the next
    # ring sees two of them (18). Four clusters; only the corner is its window's max.
    f = frame({(0, 0): 110, (1, 0): 109, (0, 1): 109, (1, 1): 109})
    scan = am.scan_frame(f, ped, 5.0, 3)
    assert found(scan) == {(0, 0): "total-at-max", (1, 0): "spread", (0, 1): "spread", (1, 1): "spread"}
    fc = am.cluster_records(scan.corrected, scan.emit, 3, cap=100)
    corner = fc.records[(fc.records["x"] == 0) & (fc.records["y"] == 0)][0]
    assert corner["data"].tolist() == [0, 0, 0, 0, 10, 9, 0, 9, 9]
    # one ADU more (121 > 100): test 1 fires, the corner alone emits and its neighbours are suppressed
    scan = am.scan_frame(frame({(0, 0): 111, (1, 0): 109, (0, 1): 109, (1, 1): 109}), ped, 5.0, 3)
    assert found(scan) == {(0, 0): "max"}


def test_the_threshold_follows_the_tracked_pedestal(ped: am.DevicePedestal) -> None:
    # frame 1: every pixel at 91 is pedestal-like: mean 99.991, sum2 10,002,277 (see above), so the
    # variance becomes 10,002.277 - 99.991^2 = 10,002.277 - 9,998.200081 = 4.076919: squared
    # threshold about 101.92. Frame 2: one pixel at 110 reads 10.009, 10.009^2 = 100.18 < 101.92: no
    # cluster, where the starting threshold (100) would give one. The rest of frame 2 is at 100 (0.009),
    # so no total reaches 30.
    # (float32 rounding of the mean, ulp 2^-17, and of sum2/1000, ulp 2^-10, moves it by < 0.002 in
    # the variance, < 0.05 in the squared threshold.)
    frames = np.stack([frame({}, base=91), frame({(2, 2): 110})])
    out, _ = am.find_clusters(frames, ped, 5.0, 3, cap=100)
    assert [f.clusters.found for f in out] == [0, 0]
    _, after_one = am.find_clusters(frames[:1], ped, 5.0, 3, cap=100)
    assert abs(float(am.threshold_sq(after_one, 5.0)[2, 2]) - 25 * 4.076919) < 0.05
    frozen, _ = am.find_clusters(frames, ped, 5.0, 3, cap=100, freeze_threshold=True)
    assert [f.clusters.found for f in frozen] == [0, 1]
    assert frozen[1].kind.tolist() == [am.KIND_MAX]


def test_fmaf_rounds_once() -> None:
    a = F32(1 + 2.0 ** -12)  # a*a = 1 + 2^-11 + 2^-24: the last bit is lost when rounded alone
    assert am.fmaf(a, a, F32(-1)) == F32(2.0 ** -11 + 2.0 ** -24)
    assert F32(a * a) - F32(1) == F32(2.0 ** -11)
    # 24929 * 673 = 2^24 + 1, a float32 tie; + 2^-60 rounds it up (float64 alone would lose the 2^-60)
    assert am.fmaf(F32(24929), F32(673), F32(2.0 ** -60)) == F32(2.0 ** 24 + 2)


def test_the_vectorised_scan_is_the_per_pixel_transcription() -> None:
    rng = np.random.default_rng(7)
    d = (2000 + rng.normal(0, 1, (1000, 12, 14)) * rng.uniform(8, 20, (12, 14))).round().astype(np.uint16)
    ped = am.device_pedestal(d)
    for k in (3, 5):
        for i in range(4):
            f = (2000 + rng.normal(0, 15, (12, 14))).round()
            f[rng.integers(0, 12, 3), rng.integers(0, 14, 3)] += rng.uniform(30, 250, 3)
            f = f.astype(np.uint16)
            scan = am.scan_frame(f, ped, 5.0, k)
            expected = {(x, y): ("max" if how == "max" else "spread-or-total") for x, y, how in
                        am.find_clusters_loop(f, ped, 5.0, k)}
            got = {xy: ("max" if how == "max" else "spread-or-total") for xy, how in found(scan).items()}
            assert got == expected
