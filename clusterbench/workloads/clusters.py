"""Two finders' clusters on the same frames, matched by (frame, x, y) (pure NumPy).

Used by the aare cluster check (tests/test_aare_cuda_gpu.py): every cluster is keyed by its
frame and centre; matched clusters are compared value by value. Nothing is tuned: the record
says how many matched, which were found by one side only (with examples), and how far the
values of matched clusters are apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

EXAMPLES = 10  # clusters listed per kind of difference


@dataclass(frozen=True, slots=True)
class ClusterMatch:
    """``a`` and ``b`` are the two finders; positions are (frame, x, y), x the column."""

    frames: int
    a_clusters: int
    b_clusters: int
    matched: int
    only_a: tuple[tuple[int, int, int], ...]  # the first EXAMPLES of them
    only_b: tuple[tuple[int, int, int], ...]
    only_a_count: int
    only_b_count: int
    max_abs_diff: float | None  # over every value of every matched cluster, in ADU; None when none matched
    p99_abs_diff: float | None
    values_over_tolerance: int  # matched clusters with any value further apart than the tolerance
    tolerance: float

    @property
    def a_found_in_b(self) -> float:
        return self.matched / self.a_clusters if self.a_clusters else 1.0

    @property
    def b_found_in_a(self) -> float:
        return self.matched / self.b_clusters if self.b_clusters else 1.0

    def to_json(self) -> dict[str, object]:
        return {"frames": self.frames, "a_clusters": self.a_clusters, "b_clusters": self.b_clusters,
                "matched": self.matched, "only_a_count": self.only_a_count, "only_b_count": self.only_b_count,
                "only_a_examples": [list(t) for t in self.only_a], "only_b_examples": [list(t) for t in self.only_b],
                "max_abs_diff_adu": self.max_abs_diff, "p99_abs_diff_adu": self.p99_abs_diff,
                "values_over_tolerance": self.values_over_tolerance, "tolerance_adu": self.tolerance,
                "a_found_in_b": self.a_found_in_b, "b_found_in_a": self.b_found_in_a}


def _flatten(per_frame: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(keys (n, 3) int64 frame, x, y; values (n, k*k) float64) of per-frame structured arrays."""
    keys, values = [], []
    for f, rec in enumerate(per_frame):
        rec = np.asarray(rec)
        n = len(rec)
        keys.append(np.stack([np.full(n, f, np.int64), rec["x"].astype(np.int64), rec["y"].astype(np.int64)], axis=1))
        width = int(np.prod(rec.dtype["data"].shape))  # k*k, whether stored flat or (k, k)
        values.append(np.asarray(rec["data"], np.float64).reshape(n, width))
    if not keys:
        return np.zeros((0, 3), np.int64), np.zeros((0, 0))
    return np.concatenate(keys), np.concatenate(values)


def match_clusters(a: Sequence[np.ndarray], b: Sequence[np.ndarray], tolerance: float) -> ClusterMatch:
    """Match two finders' per-frame cluster arrays (fields x, y, data) of the same frames."""
    if len(a) != len(b):
        raise ValueError(f"the two finders saw {len(a)} and {len(b)} frames")
    ka, va = _flatten(a)
    kb, vb = _flatten(b)
    if va.size and vb.size and va.shape[1] != vb.shape[1]:
        raise ValueError(f"cluster sizes differ: {va.shape[1]} and {vb.shape[1]} values")
    base = max(int(ka[:, 1:].max(initial=0)), int(kb[:, 1:].max(initial=0))) + 1
    code_a = (ka[:, 0] * base + ka[:, 2]) * base + ka[:, 1]
    code_b = (kb[:, 0] * base + kb[:, 2]) * base + kb[:, 1]
    if len(np.unique(code_a)) != len(code_a) or len(np.unique(code_b)) != len(code_b):
        raise ValueError("a finder reported one centre twice in a frame")
    common, ia, ib = np.intersect1d(code_a, code_b, assume_unique=True, return_indices=True)
    only_a = np.setdiff1d(np.arange(len(code_a)), ia)
    only_b = np.setdiff1d(np.arange(len(code_b)), ib)
    order_a = only_a[np.argsort(code_a[only_a], kind="stable")]
    order_b = only_b[np.argsort(code_b[only_b], kind="stable")]
    if len(common):
        diff = np.abs(va[ia] - vb[ib])
        max_diff, p99 = float(diff.max()), float(np.percentile(diff, 99))
        over = int((diff.max(axis=1) > tolerance).sum())
    else:
        max_diff = p99 = None
        over = 0
    return ClusterMatch(
        frames=len(a), a_clusters=len(code_a), b_clusters=len(code_b), matched=len(common),
        only_a=tuple(tuple(int(v) for v in ka[i]) for i in order_a[:EXAMPLES]),
        only_b=tuple(tuple(int(v) for v in kb[i]) for i in order_b[:EXAMPLES]),
        only_a_count=len(only_a), only_b_count=len(only_b), max_abs_diff=max_diff, p99_abs_diff=p99,
        values_over_tolerance=over, tolerance=tolerance)


def centre_set(per_frame: Sequence[np.ndarray]) -> frozenset[tuple[int, int, int]]:
    """Every cluster's (frame, x, y) of per-frame structured arrays (fields x, y), as a set."""
    out: set[tuple[int, int, int]] = set()
    for f, rec in enumerate(per_frame):
        rec = np.asarray(rec)
        out.update(zip([f] * len(rec), rec["x"].astype(int).tolist(), rec["y"].astype(int).tolist()))
    return frozenset(out)


def select(per_frame: Sequence[np.ndarray], keep: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The records of each frame where the frame's boolean mask ``keep`` is true."""
    if len(per_frame) != len(keep):
        raise ValueError(f"{len(per_frame)} frames of records and {len(keep)} masks")
    return [np.asarray(rec)[np.asarray(mask, bool)] for rec, mask in zip(per_frame, keep)]
