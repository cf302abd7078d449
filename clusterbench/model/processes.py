"""Sustained FPS from several fresh processes: each process's figure, runs, verdict and clocks (pure).

One process's repeats agree more closely than two processes do: on the H200, runs inside one process
agreed within about 1 % while separate processes of one unit differed by up to 14.6 % on 3x3 at 4 streams
(before steady runs). pyperf spawns worker processes for this reason, asv runs two. So a sustained figure
comes from P fresh processes, each with its warm-ups and its steady runs (:mod:`clusterbench.model.steady`).
The row keeps every process (:class:`ProcessRun`: its counted runs, its median, its verdict, its SM clock and
throttle reasons over its runs) in its sustained measurement's ``metadata["processes"]``, and the
measurement's samples are the process medians: the figure is their median, and compare's noise for two
probes is the spread between them (:func:`process_spread`).

Pure: no I/O, no GPU, no UI.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from clusterbench.model import units
from clusterbench.model.measurement import Measurement
from clusterbench.model.stats import median
from clusterbench.model.steady import Steadiness, spread_of

PROCESSES_KEY = "processes"  # the key of a measurement's metadata that holds its processes
# ProcessRun.to_json's version. History: 1: first version.
PROCESS_VERSION = 1

# NVML's clock throttle (clock event) reasons, bit by bit (nvml.h, nvmlClocksEventReason*), as names.
THROTTLE_BITS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"), (0x8, "hw_slowdown"),
    (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"), (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"), (0x100, "display_clock_setting"),
)
# Reasons that do not slow a busy GPU down: it was idle, or a clock was set on purpose.
BENIGN_THROTTLE = frozenset({"gpu_idle", "applications_clocks_setting", "display_clock_setting"})


def throttle_reasons(mask: int) -> tuple[str, ...]:
    """The names of the reasons set in an NVML throttle mask (pure); a bit NVML may add later is named
    ``bit_0x...``."""
    if isinstance(mask, bool) or not isinstance(mask, int) or mask < 0:
        raise ValueError(f"a throttle mask must be an integer >= 0, got {mask!r}")
    names = [name for bit, name in THROTTLE_BITS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_BITS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"bit_{bit:#x}")
            rest &= ~bit
        bit <<= 1
    return tuple(names)


@dataclass(frozen=True, slots=True)
class ProcessClock:
    """The SM clock NVML read while one process ran its runs (``samples`` reads; MHz), and every throttle
    reason seen in that time (names, :func:`throttle_reasons`)."""

    samples: int
    median_mhz: float | None
    min_mhz: int | None
    max_mhz: int | None
    throttle: tuple[str, ...] = ()

    @property
    def slowed(self) -> tuple[str, ...]:
        """The reasons that slow a busy GPU (power, thermal, hardware slowdown)."""
        return tuple(r for r in self.throttle if r not in BENIGN_THROTTLE)

    def to_json(self) -> dict[str, object]:
        return {"samples": self.samples, "median_mhz": self.median_mhz, "min_mhz": self.min_mhz,
                "max_mhz": self.max_mhz, "throttle": list(self.throttle)}

    @classmethod
    def from_json(cls, doc: object) -> "ProcessClock":
        if not isinstance(doc, Mapping):
            raise ValueError(f"a process's clock must be a JSON object, got {type(doc).__name__}")
        thr = doc.get("throttle") or []
        if not isinstance(thr, list) or not all(isinstance(t, str) for t in thr):
            raise ValueError(f"a process's throttle reasons must be a list of names, got {thr!r:.40}")
        n = doc.get("samples", 0)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"a process's clock samples must be an integer >= 0, got {n!r}")
        med = doc.get("median_mhz")
        lo, hi = doc.get("min_mhz"), doc.get("max_mhz")
        for name, v in (("median_mhz", med), ("min_mhz", lo), ("max_mhz", hi)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ValueError(f"a process's clock {name} must be a number or null, got {v!r}")
        return cls(n, None if med is None else float(med), None if lo is None else int(lo),  # type: ignore[arg-type]
                   None if hi is None else int(hi), tuple(thr))  # type: ignore[arg-type]


def process_clock(samples: Sequence[tuple[float, int, int | None]], start_s: float, end_s: float) -> ProcessClock:
    """The clock of one process from the sampler's reads (``(time, SM MHz, throttle mask or None)``) that fall
    within ``[start_s, end_s]`` (pure)."""
    inside = [s for s in samples if start_s <= s[0] <= end_s]
    mhz = sorted(s[1] for s in inside)
    masks = 0
    for s in inside:
        if s[2] is not None:
            masks |= int(s[2])
    return ProcessClock(len(inside), median(mhz) if mhz else None, mhz[0] if mhz else None, mhz[-1] if mhz else None,
                        throttle_reasons(masks))


@dataclass(frozen=True, slots=True)
class ProcessRun:
    """One fresh process's part of a sustained figure: its ``index`` (0 first), its counted runs'
    figures (``values``; a program run whole: its one figure), their ``median`` (the process's figure), its
    steady verdict (``steady``: every run, warm-ups included; None for a program run whole), when its runs
    began and how long the process lasted (seconds since the first process started), and its ``clock``."""

    index: int
    values: tuple[float, ...]
    steady: Steadiness | None = None
    started_s: float | None = None
    seconds: float | None = None
    clock: ProcessClock | None = None

    def __post_init__(self) -> None:
        if type(self.index) is not int or self.index < 0:
            raise ValueError(f"a process's index must be an integer >= 0, got {self.index!r}")
        values = tuple(self.values)
        if not values:
            raise ValueError("a process needs at least one figure")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"a process's figures must be finite numbers > 0, got {v!r}")
        object.__setattr__(self, "values", tuple(float(v) for v in values))

    @property
    def median(self) -> float:
        return median(self.values)

    @property
    def settled(self) -> bool | None:
        """Its runs reached a steady state (None: not judged: one counted run, or a program run whole)."""
        return None if self.steady is None else self.steady.steady

    @property
    def run_spread(self) -> float:
        """Its counted runs' range over their median (0 for one run)."""
        return spread_of(self.values)

    @property
    def median_spread(self) -> float:
        """How far its median could move: of three or more counted runs, the range of those left when the one
        farthest from their median is set aside, over the median (the median stands on them: one run held up
        by a hiccup of the host moves the range, not the median); of fewer, :attr:`run_spread`."""
        if len(self.values) < 3:
            return self.run_spread
        m = median(self.values)
        far = max(range(len(self.values)), key=lambda i: (abs(self.values[i] - m), i))
        rest = [v for i, v in enumerate(self.values) if i != far]
        return (max(rest) - min(rest)) / m if m else 0.0

    def to_json(self) -> dict[str, object]:
        return {"version": PROCESS_VERSION, "index": self.index, "median": self.median, "values": list(self.values),
                "started_s": self.started_s, "seconds": self.seconds,
                "clock": None if self.clock is None else self.clock.to_json(),
                "steady": None if self.steady is None else self.steady.to_json()}

    @classmethod
    def from_json(cls, doc: object) -> "ProcessRun":
        """ValueError names what is wrong; a steady verdict is judged again from its runs."""
        if not isinstance(doc, Mapping):
            raise ValueError(f"a process must be a JSON object, got {type(doc).__name__}")
        if doc.get("version") != PROCESS_VERSION:
            raise ValueError(f"a process record of version {doc.get('version')!r}; this clusterbench reads "
                             f"version {PROCESS_VERSION}")
        values = doc.get("values")
        if not isinstance(values, list):
            raise ValueError(f"a process's values must be a list of numbers, got {values!r:.40}")
        for name in ("started_s", "seconds"):
            v = doc.get(name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ValueError(f"a process's {name} must be a number or null, got {v!r}")
        steady = doc.get("steady")
        clock = doc.get("clock")
        return cls(doc.get("index"), tuple(values),  # type: ignore[arg-type]
                   None if steady is None else Steadiness.from_json(steady),  # type: ignore[arg-type]
                   doc.get("started_s"), doc.get("seconds"),  # type: ignore[arg-type]
                   None if clock is None else ProcessClock.from_json(clock))


def processes_of(m: Measurement | None) -> tuple[ProcessRun, ...] | None:
    """The processes behind a sustained measurement, or None when it records none (a dir made before
    sustained FPS came from several processes) or they cannot be read. ValueError is not raised: a figure
    whose processes are unreadable is judged as one without them."""
    if m is None:
        return None
    raw = m.metadata.get(PROCESSES_KEY)
    if not isinstance(raw, list) or not raw:
        return None
    try:
        procs = tuple(ProcessRun.from_json(p) for p in raw)
    except (ValueError, TypeError):
        return None
    if len(procs) != m.repeats or any(not math.isclose(p.median, s, rel_tol=1e-9) for p, s in zip(procs, m.samples)):
        return None  # the samples must be the process medians, written together
    return procs


def process_measurement(metric: str, procs: Sequence[ProcessRun], input_bytes_per_frame: int | None = None,
                        metadata: Mapping[str, object] | None = None) -> Measurement:
    """The measurement of several processes (pure): its samples are the process medians (in process
    order), its metadata holds every process."""
    if not procs:
        raise ValueError("a measurement of processes needs at least one process")
    meta = {**dict(metadata or {}), PROCESSES_KEY: [p.to_json() for p in procs]}
    return Measurement(metric, tuple(p.median for p in procs), input_bytes_per_frame, meta)


@dataclass(frozen=True, slots=True)
class ProcessSpread:
    """The processes of one side of a comparison: how many, their medians' median, their range over that
    median (``spread``), and the largest :attr:`ProcessRun.median_spread` of a process whose runs did not
    settle (``unsettled_spread``; 0 when every process settled or was not judged)."""

    n: int
    median: float
    spread: float
    unsettled_spread: float
    unsettled: int

    @property
    def text(self) -> str:
        """``3 processes spread 0.41 %``."""
        return f"{self.n} process{'' if self.n == 1 else 'es'} spread {units.pct(self.spread, 2)}"


def process_spread(procs: Sequence[ProcessRun]) -> ProcessSpread:
    """The spread of one side's processes (pure)."""
    medians = [p.median for p in procs]
    unsettled = [p for p in procs if p.settled is False]
    return ProcessSpread(len(procs), median(medians), spread_of(medians),
                         max((p.median_spread for p in unsettled), default=0.0), len(unsettled))


def steady_summary(procs: Sequence[ProcessRun]) -> dict[str, object]:
    """The row's steady columns of several processes (pure): ``steady`` False when any process's runs did not
    settle, True when every one did, else None (not judged); ``warmups`` and ``warmup_s`` summed over them."""
    settled = [p.settled for p in procs]
    steady = False if False in settled else (True if settled and all(s is True for s in settled) else None)
    verdicts = [p.steady for p in procs if p.steady is not None]
    return {"steady": steady, "warmups": sum(v.warmups for v in verdicts) if verdicts else None,
            "warmup_s": round(sum(v.warmup_s for v in verdicts), 6) if verdicts else None}
