"""The byte layout shared by the kernels, the pipeline and the reference.

A cluster record is packed: ``x`` (column) and ``y`` (row) as uint16, then the k*k corrected values
in row-major order as float32 or float64 (the pedestal type), 0 outside the image.
sizeof(cluster) = 4 + itemsize*k*k: 40 B at 3x3 f32, 328 B at 9x9 f32, 76 B at 3x3 f64.

A per-frame slot is a 4-byte little-endian uint32 ``count`` followed by ``cap`` records. ``count`` is
the number of clusters the frame *found*; only the first ``min(count, cap)`` records (in row-major
order of their centre pixel) are stored, and ``max(count - cap, 0)`` were dropped over the cap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SLOT_HEADER_BYTES = 4


FRAME_PIXEL_BYTES = 2  # raw detector pixels are uint16


def itemsize(pedestal_dtype: str) -> int:
    """Bytes of one corrected value: 4 for a float32 pedestal, 8 for float64."""
    return 4 if pedestal_dtype == "float32" else 8


def cluster_bytes(cluster: int, pedestal_dtype: str) -> int:
    """sizeof(cluster): x, y as uint16, then k*k values, packed (40 B at 3x3 f32, 328 B at 9x9 f32)."""
    return 4 + itemsize(pedestal_dtype) * cluster * cluster


def slot_bytes(cap: int, cluster: int, pedestal_dtype: str) -> int:
    """The per-frame D2H slot, copied whole: the 4-byte count, then cap clusters."""
    return SLOT_HEADER_BYTES + cap * cluster_bytes(cluster, pedestal_dtype)


def frame_bytes(rows: int, cols: int) -> int:
    """One raw detector frame: the per-frame H2D copy."""
    return FRAME_PIXEL_BYTES * rows * cols


def value_dtype(pedestal_dtype: str) -> np.dtype:
    return np.dtype(np.float32 if pedestal_dtype == "float32" else np.float64)


def cluster_dtype(cluster: int, pedestal_dtype: str) -> np.dtype:
    """The packed record dtype (numpy structured dtypes are packed unless align=True)."""
    return np.dtype([("x", "<u2"), ("y", "<u2"), ("data", value_dtype(pedestal_dtype), (cluster * cluster,))])


@dataclass(frozen=True, slots=True)
class FrameClusters:
    """The clusters of one frame: ``found`` counts all of them, ``records`` holds the stored ones."""

    found: int
    records: np.ndarray  # structured, cluster_dtype; len == min(found, cap)

    @property
    def dropped(self) -> int:
        return self.found - len(self.records)


def read_slots(buf: np.ndarray, n_frames: int, cluster: int, cap: int, pedestal_dtype: str) -> tuple[FrameClusters, ...]:
    """Parse ``n_frames`` consecutive slots from a uint8 buffer (copies the stored records)."""
    rec = cluster_dtype(cluster, pedestal_dtype)
    slot_bytes = SLOT_HEADER_BYTES + cap * rec.itemsize
    raw = np.asarray(buf).view(np.uint8).reshape(-1)
    if raw.size < n_frames * slot_bytes:
        raise ValueError(f"buffer holds {raw.size} bytes, {n_frames} slots need {n_frames * slot_bytes}")
    out = []
    for i in range(n_frames):
        base = i * slot_bytes
        found = int(raw[base:base + 4].view("<u4")[0])
        kept = min(found, cap)
        body = raw[base + 4: base + 4 + kept * rec.itemsize]
        out.append(FrameClusters(found=found, records=body.view(rec).copy()))
    return tuple(out)
