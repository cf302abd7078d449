"""WorkloadParams: one validated, frozen description of a cluster-finder run.

``to_json()`` gives a dict of plain values; ``from_json()`` rebuilds and re-validates it.
Invalid values raise :class:`clusterbench.errors.InputError` (exit 2), never a traceback.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

from clusterbench.errors import InputError
from clusterbench.workload import layout

PEDESTAL_DTYPES = ("float32", "float64")
PEDESTAL_MODES = ("frozen", "tracking")
TRANSFER_MODES = ("copy", "zerocopy")
CLUSTER_SIZES = (3, 5, 7, 9, 11)


@dataclass(frozen=True, slots=True)
class WorkloadParams:
    """Everything that defines one cluster-finder run (see docs/workload.md)."""

    rows: int = 400
    cols: int = 400
    pedestal_frames: int = 1000
    nsigma: float = 5.0
    pedestal_dtype: str = "float32"
    pedestal: str = "frozen"
    transfer: str = "copy"
    cluster: int = 3
    cap: int = 3000
    streams: int = 4
    batch: int = 2000
    frames: int = 20000
    seed: int = 0
    occupancy: float = 130.0  # mean photons per data frame (DESIGN.md: 100 to 160 on MOENCH-like data)
    data: str | None = None  # a .npy file (frames, rows, cols) uint16; first pedestal_frames are dark
    pool: int = 1000  # distinct data frames kept in pinned host memory, reused cyclically

    def __post_init__(self) -> None:
        for name in ("rows", "cols", "pedestal_frames", "cap", "streams", "batch", "frames", "pool"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InputError(
                    f"workload parameter {name} must be a positive integer, got {value!r}",
                    hint=f"set {name} to a whole number of at least 1",
                )
        if self.rows > 65535 or self.cols > 65535:
            raise InputError(
                f"detector {self.rows}x{self.cols} is too large: cluster x and y are uint16",
                hint="use at most 65535 rows and columns",
            )
        if isinstance(self.cluster, bool) or not isinstance(self.cluster, int) or self.cluster not in CLUSTER_SIZES:
            raise InputError(
                f"cluster size must be odd, 3 to 11, got {self.cluster!r}",
                hint="use one of 3, 5, 7, 9, 11",
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise InputError(f"seed must be a non-negative integer, got {self.seed!r}", hint="use e.g. seed = 0")
        for name in ("nsigma", "occupancy"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InputError(f"{name} must be a finite number, got {value!r}", hint=f"set {name} to a number")
        if self.nsigma <= 0:
            raise InputError(f"nsigma must be positive, got {self.nsigma!r}", hint="the usual value is 5.0")
        if self.occupancy < 0:
            raise InputError(
                f"occupancy (photons per frame) must be >= 0, got {self.occupancy!r}",
                hint="MOENCH-like data has about 100 to 160 photons per frame",
            )
        _check_enum("pedestal_dtype", self.pedestal_dtype, PEDESTAL_DTYPES)
        _check_enum("pedestal", self.pedestal, PEDESTAL_MODES)
        _check_enum("transfer", self.transfer, TRANSFER_MODES)
        if self.data is not None and (not isinstance(self.data, str) or not self.data):
            raise InputError(f"data must be a path to a .npy file, got {self.data!r}", hint="pass --data PATH.npy")
        # Keep the float fields floats, so that to_json()/from_json() round-trips exactly.
        object.__setattr__(self, "nsigma", float(self.nsigma))
        object.__setattr__(self, "occupancy", float(self.occupancy))

    @property
    def halo(self) -> int:
        return self.cluster // 2

    @property
    def itemsize(self) -> int:
        """Bytes of one corrected value: 4 for a float32 pedestal, 8 for float64."""
        return layout.itemsize(self.pedestal_dtype)

    @property
    def cluster_bytes(self) -> int:
        """sizeof(cluster) (layout.cluster_bytes)."""
        return layout.cluster_bytes(self.cluster, self.pedestal_dtype)

    @property
    def slot_bytes(self) -> int:
        """The per-frame D2H slot (layout.slot_bytes)."""
        return layout.slot_bytes(self.cap, self.cluster, self.pedestal_dtype)

    @property
    def frame_bytes(self) -> int:
        return layout.frame_bytes(self.rows, self.cols)

    def replace(self, **changes: Any) -> "WorkloadParams":
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "WorkloadParams":
        if not isinstance(doc, Mapping):
            raise InputError(f"workload params must be a JSON object, got {type(doc).__name__}",
                             hint='pass e.g. {"cluster": 3, "frames": 2000}')
        values = dict(doc)
        if "detector" in values:  # tolerate configs.toml's [rows, cols] spelling
            detector = values.pop("detector")
            if not isinstance(detector, (list, tuple)) or len(detector) != 2:
                raise InputError(f"detector must be [rows, cols], got {detector!r}", hint="e.g. detector = [400, 400]")
            values["rows"], values["cols"] = detector
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InputError(
                f"unknown workload parameter(s): {', '.join(unknown)}",
                hint=f"known parameters: {', '.join(sorted(known))}",
            )
        return cls(**values)


def _check_enum(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise InputError(f"{name} must be one of {', '.join(allowed)}, got {value!r}",
                         hint=f"set {name} = \"{allowed[0]}\"")
