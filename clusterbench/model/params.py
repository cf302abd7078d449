"""WorkloadParams: the one parameter record of a cluster-finder run, and its one validator.

configs.toml (clusterbench.run.config) and every workload process use this record and
:func:`param_problems`, so that a value one side accepts the other accepts too.
``to_json()`` gives a dict of plain values; ``from_json()`` rebuilds and re-validates it.
Invalid values raise :class:`clusterbench.errors.ConfigError` (an InputError, exit 2).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass
from typing import Any, Mapping

from clusterbench.errors import ConfigError
from clusterbench.model import layout

PEDESTAL_DTYPES = ("float32", "float64")
PEDESTAL_MODES = ("frozen", "tracking")
TRANSFER_MODES = ("copy", "zerocopy")
# The CuPy finder's kernels (docs/workload.md). None picks the pipeline's default for the mode.
FROZEN_KERNELS = ("strip", "twophase", "slide")
TRACKING_KERNELS = ("graph", "coop", "flags")
CLUSTER_MIN = 3
CLUSTER_MAX = 11
# Cluster x and y are uint16, so pixel indices run to 65535: no detector side may exceed 2**16 pixels.
DETECTOR_SIDE_MAX = 65536
# The pedestal std of one dark frame is 0 (every pixel would fire); two is the least that means anything.
PEDESTAL_FRAMES_MIN = 2
# Integers the kernels take as 32-bit ints (a batch's frame count, the cap, the pixel count, ...) must fit one;
# frames and seed are 64-bit. A larger value would overflow on the GPU, so it is refused in the file.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
INT_BOUNDS = {"cap": INT32_MAX, "streams": INT32_MAX, "batch": INT32_MAX, "pool": INT32_MAX,
              "pedestal_frames": INT32_MAX, "frames": INT64_MAX, "seed": INT64_MAX}
# delay_us_per_frame is a test tool: a batch of 2000 frames at 1000 µs each spins for 2 s, enough for any test.
DELAY_MAX_US = 1000.0


@dataclass(frozen=True, slots=True)
class WorkloadParams:
    """Everything that defines one cluster-finder run (see docs/workload.md and docs/guards.md)."""

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
    occupancy: float = 130.0  # mean photons per data frame (MOENCH-like data: 100 to 160)
    data: str | None = None  # a .npy file (frames, rows, cols) uint16; first pedestal_frames are dark
    pool: int = 1000  # distinct data frames kept in pinned host memory, reused cyclically
    frozen_kernel: str | None = None  # FROZEN_KERNELS; None = the pipeline's default
    tracking_kernel: str | None = None  # TRACKING_KERNELS; None = the pipeline's default
    # a fixed GPU delay per frame after each batch's kernels (a spin on the GPU's clock): a deliberate
    # slow-down for testing compare's sensitivity; 0 = none (docs/workload.md, "A deliberate delay")
    delay_us_per_frame: float = 0.0

    def __post_init__(self) -> None:
        problems = param_problems(self.to_json())
        if problems:
            key, problem = problems[0]
            raise ConfigError(f"workload parameter {key!r}: {problem}", hint=key_hint(key))
        # Keep the float fields floats, so that to_json()/from_json() round-trips exactly.
        object.__setattr__(self, "nsigma", float(self.nsigma))
        object.__setattr__(self, "occupancy", float(self.occupancy))
        object.__setattr__(self, "delay_us_per_frame", float(self.delay_us_per_frame))

    @property
    def detector(self) -> tuple[int, int]:
        return (self.rows, self.cols)

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
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if not out["delay_us_per_frame"]:
            del out["delay_us_per_frame"]  # a test tool: absent when unused, so that every other record reads as before
        return out

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "WorkloadParams":
        if not isinstance(doc, Mapping):
            raise ConfigError(f"workload params must be a JSON object, got {type(doc).__name__}",
                              hint='pass e.g. {"cluster": 3, "frames": 2000}')
        values = dict(doc)
        if "detector" in values:  # configs.toml's [rows, cols] spelling
            detector = values.pop("detector")
            problem = value_problem("detector", detector)
            if problem:
                raise ConfigError(f"workload parameter 'detector': {problem}", hint=key_hint("detector"))
            values["rows"], values["cols"] = detector
        unknown = sorted(set(values) - set(FIELD_NAMES))
        if unknown:
            raise ConfigError(f"unknown workload parameter(s): {', '.join(unknown)}",
                              hint=f"known parameters: {', '.join(sorted(FIELD_NAMES))}")
        return cls(**values)


FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(WorkloadParams))
# The keys as configs.toml spells them: detector = [rows, cols] instead of rows and cols.
PARAM_KEYS: tuple[str, ...] = ("detector",) + tuple(n for n in FIELD_NAMES if n not in ("rows", "cols"))
PARAM_DEFAULTS: dict[str, Any] = {
    **{f.name: f.default for f in dataclasses.fields(WorkloadParams) if f.name not in ("rows", "cols")},
    "detector": [WorkloadParams.rows, WorkloadParams.cols],  # type: ignore[list-item]
}


# --------------------------------------------------------------------------- the validator


def _is_int(x: Any) -> bool:
    return type(x) is int  # bool is not an int here


def _type_name(x: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a float", str: "a string",
            list: "an array", tuple: "an array", dict: "a table"}.get(type(x), type(x).__name__)


def show(x: Any) -> str:
    """A value as the user wrote it in TOML."""
    return repr(x) if isinstance(x, str) else str(x).lower() if isinstance(x, bool) else str(x)


def choice_problem(value: Any, choices: tuple[str, ...]) -> str | None:
    if not isinstance(value, str):
        return f"must be one of {', '.join(map(repr, choices))}, got {_type_name(value)} {show(value)}"
    if value in choices:
        return None
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.5)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    return f"must be one of {', '.join(map(repr, choices))}, got {value!r}{guess}"


def _int_problem(value: Any, minimum: int = 1, maximum: int = INT64_MAX) -> str | None:
    if not _is_int(value):
        return f"must be an integer, got {_type_name(value)} {show(value)}"
    if value < minimum:
        return f"must be >= {minimum}, got {value}"
    if value > maximum:
        width = "32" if maximum == INT32_MAX else "64"
        return f"must be at most {maximum:,} (a {width}-bit integer), got {value:,}"
    return None


def _side_problem(rows: Any, cols: Any) -> str | None:
    if not (_is_int(rows) and _is_int(cols)):
        return f"must be [rows, cols], two integers, got [{show(rows)}, {show(cols)}]"
    if not (1 <= rows <= DETECTOR_SIDE_MAX and 1 <= cols <= DETECTOR_SIDE_MAX):
        return (f"rows and cols must be between 1 and {DETECTOR_SIDE_MAX} "
                f"(clusters store x, y as uint16), got [{rows}, {cols}]")
    return None


def value_problem(key: str, value: Any) -> str | None:
    """What is wrong with one parameter's value on its own, or None. ``key`` is a PARAM_KEYS name."""
    if key == "cluster":
        if not _is_int(value):
            return f"must be an integer, got {_type_name(value)} {show(value)}"
        if value % 2 == 0:
            return f"must be odd (the window is centred on a pixel), got {value}"
        if not CLUSTER_MIN <= value <= CLUSTER_MAX:
            return f"must be between {CLUSTER_MIN} and {CLUSTER_MAX}, got {value}"
        return None
    if key in ("cap", "streams", "batch", "frames", "pool"):
        return _int_problem(value, 1, INT_BOUNDS[key])
    if key == "pedestal_frames":
        return _int_problem(value, PEDESTAL_FRAMES_MIN, INT_BOUNDS[key])
    if key == "seed":
        return _int_problem(value, 0, INT_BOUNDS[key])
    if key in ("nsigma", "occupancy", "delay_us_per_frame"):
        if type(value) not in (int, float):
            return f"must be a number, got {_type_name(value)} {show(value)}"
        if not math.isfinite(value) or (value <= 0 if key == "nsigma" else value < 0):
            return f"must be a finite number {'> 0' if key == 'nsigma' else '>= 0'}, got {value}"
        if key == "delay_us_per_frame" and value > DELAY_MAX_US:
            return f"must be at most {DELAY_MAX_US:g} µs per frame (a test delay, not a workload), got {value}"
        return None
    if key == "detector":
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            return f"must be [rows, cols], two integers, got {show(value)}"
        return _side_problem(*value)
    if key == "pedestal_dtype":
        return choice_problem(value, PEDESTAL_DTYPES)
    if key == "pedestal":
        return choice_problem(value, PEDESTAL_MODES)
    if key == "transfer":
        return choice_problem(value, TRANSFER_MODES)
    if key in ("frozen_kernel", "tracking_kernel"):
        if value is None:
            return None
        return choice_problem(value, FROZEN_KERNELS if key == "frozen_kernel" else TRACKING_KERNELS)
    if key == "data":
        if value is not None and (not isinstance(value, str) or not value):
            return f"must be a path to a .npy file, got {show(value)}"
        return None
    raise AssertionError(f"no check for parameter {key!r}")  # a bug: every key has a check


def cross_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Problems between parameters that are each valid on their own."""
    out: list[tuple[str, str]] = []
    if values["batch"] > values["frames"]:
        out.append(("batch", f"batch {values['batch']} exceeds frames {values['frames']}: "
                             "that launch could never happen"))
    rows, cols = values["detector"]
    if rows * cols > INT32_MAX:
        out.append(("detector", f"{rows}x{cols} = {rows * cols:,} pixels per frame: the kernels count pixels in a "
                                f"32-bit integer (at most {INT32_MAX:,})"))
    if values["cap"] > rows * cols:
        out.append(("cap", f"cap {values['cap']} exceeds the {rows}x{cols} = {rows * cols} pixels "
                           "per frame: the D2H slot would carry clusters that cannot exist"))
    return out


def param_problems(values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every (key, problem) of a full set of parameters (``rows``/``cols`` or ``detector``)."""
    merged = dict(values)
    if "detector" not in merged:
        merged["detector"] = [merged.pop("rows", None), merged.pop("cols", None)]
    out = [(k, p) for k in PARAM_KEYS if (p := value_problem(k, merged.get(k, PARAM_DEFAULTS[k])))]
    if out:
        return out
    return cross_problems({k: merged.get(k, PARAM_DEFAULTS[k]) for k in PARAM_KEYS})


_KEY_HINTS = {
    "cluster": f"Use an odd cluster size from {CLUSTER_MIN} to {CLUSTER_MAX}, e.g. cluster = 3.",
    "cap": "cap is the clusters kept per frame, e.g. cap = 3000 at 3x3, 1700 at 9x9.",
    "streams": "streams is the number of CUDA streams, e.g. streams = 4.",
    "batch": "batch is frames per launch and may not exceed frames, e.g. batch = 2000.",
    "frames": "frames is the data frames per probe, e.g. frames = 20000.",
    "detector": "Write detector = [rows, cols], e.g. detector = [400, 400].",
    "rows": "Write detector = [rows, cols], e.g. detector = [400, 400].",
    "cols": "Write detector = [rows, cols], e.g. detector = [400, 400].",
    "pedestal_frames": f"Use at least {PEDESTAL_FRAMES_MIN} dark frames, e.g. pedestal_frames = 1000.",
    "nsigma": "nsigma is the threshold in pedestal sigmas, e.g. nsigma = 5.0.",
    "pedestal_dtype": 'Write pedestal_dtype = "float32" or "float64".',
    "pedestal": 'Write pedestal = "frozen" or "tracking".',
    "transfer": 'Write transfer = "copy" or "zerocopy".',
    "seed": "seed picks the synthetic frames, e.g. seed = 0.",
    "occupancy": "occupancy is mean photons per synthetic frame, e.g. occupancy = 130.",
    "data": 'Write data = "frames.npy": uint16 (frames, rows, cols), dark frames first.',
    "pool": "pool is the distinct data frames reused cyclically, e.g. pool = 1000.",
    "frozen_kernel": f"Write frozen_kernel = one of {', '.join(map(repr, FROZEN_KERNELS))} (docs/workload.md).",
    "tracking_kernel": f"Write tracking_kernel = one of {', '.join(map(repr, TRACKING_KERNELS))} (docs/workload.md).",
    "delay_us_per_frame": "delay_us_per_frame is a deliberate GPU delay per frame in µs for testing compare, e.g. "
                          "delay_us_per_frame = 0.3; 0 (the default) adds none.",
}


def key_hint(key: str) -> str | None:
    return _KEY_HINTS.get(key)
