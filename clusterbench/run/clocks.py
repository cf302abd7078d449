"""SM clocks during a traced pass: sample them with NVML, then judge whether they ramped.

A pass whose SM clock stays below its steady value reads slow. The verdict (:func:`judge_clocks`) is
a pure function over the samples: it warns only when the clock NVML read over the pass (or, for a pass
shorter than one sample period, just before it) sits below RAMPED_FRACTION of the maximum. A short pass
at full clock is not warned about here: what makes a short pass read slow is that it holds few launches
per stream, whose fill and drain nothing overlaps, and the config's own warning says so
(:func:`clusterbench.run.config.config_warnings`). The sampler is I/O.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass

# A pass whose median SM clock is below this fraction of the maximum SM clock ran before the
# clocks settled (H200: 1980 MHz max; a ramping GPU sits hundreds of MHz below it).
RAMPED_FRACTION = 0.90
# NVML sampling period while the child runs.
SAMPLE_INTERVAL_S = 0.02


@dataclass(frozen=True, slots=True)
class ClockSample:
    t_s: float  # time.time() seconds
    sm_mhz: int
    throttle: int | None = None  # NVML's clock throttle reasons at that time (a bit mask), None: not read


@dataclass(frozen=True, slots=True)
class ClockVerdict:
    """SM clocks seen during one pass, and whether they can be trusted."""

    samples: int
    min_mhz: int | None
    median_mhz: float | None
    max_mhz: int | None
    max_clock_mhz: int | None
    pass_s: float | None
    frames: int | None
    ramped: bool | None  # None: not measured
    warning: str | None
    hint: str | None

    def to_json(self) -> dict:
        return {
            "samples": self.samples, "min_mhz": self.min_mhz, "median_mhz": self.median_mhz,
            "max_mhz": self.max_mhz, "max_clock_mhz": self.max_clock_mhz, "pass_s": self.pass_s,
            "frames": self.frames, "ramped": self.ramped, "warning": self.warning,
        }


_HINT = ("quote figures from full-length runs (make sweep), or warm the GPU up before the pass; raise --frames "
         "until this warning goes away")


def judge_clocks(
    samples: tuple[ClockSample, ...],
    pass_start_s: float | None,
    pass_end_s: float | None,
    max_clock_mhz: int | None,
    frames: int | None = None,
) -> ClockVerdict:
    """Judge the SM clocks over the pass window [pass_start_s, pass_end_s].

    Ramped means: the median SM clock over the pass (for a pass shorter than one sample period, the
    last sample before its end) reached RAMPED_FRACTION of the maximum (the device's max SM clock, else
    the highest seen).
    """
    if pass_start_s is not None and pass_end_s is not None:
        window = tuple(s for s in samples if pass_start_s <= s.t_s <= pass_end_s)
        pass_s: float | None = max(pass_end_s - pass_start_s, 0.0)
    else:
        window, pass_s = (), None
    # fall back to the last sample before the window when the pass was shorter than one period
    inside = bool(window)
    if not window and pass_end_s is not None:
        before = [s for s in samples if s.t_s <= pass_end_s]
        window = (before[-1],) if before else ()
    mhz = [s.sm_mhz for s in window]
    lo = min(mhz) if mhz else None
    hi = max(mhz) if mhz else None
    med = float(statistics.median(mhz)) if mhz else None
    reference = max_clock_mhz or (max(s.sm_mhz for s in samples) if samples else None)
    frames_txt = f" with --frames {frames}" if frames else ""

    if pass_s is None and med is None:
        return ClockVerdict(0, None, None, None, max_clock_mhz, None, frames, None, None, None)
    if med is not None and reference and med < RAMPED_FRACTION * reference:
        if inside:
            warning = (f"SM clock reached only {med:.0f} MHz (median) of {reference} MHz max during the "
                       f"pass{frames_txt}; the kernel reads slow until the clocks ramp")
        else:
            ms = (pass_s or 0.0) * 1e3
            warning = (f"the SM clock read {med:.0f} of {reference} MHz max just before the pass{frames_txt}, which "
                       f"lasted {ms:.1f} ms, less than NVML's {SAMPLE_INTERVAL_S * 1e3:.0f} ms clock sample: the "
                       "clock was not read during it, and may not have ramped")
        return ClockVerdict(len(mhz), lo, med, hi, max_clock_mhz, pass_s, frames, False, warning, _HINT)
    ramped = None if med is None or not reference else True
    return ClockVerdict(len(mhz), lo, med, hi, max_clock_mhz, pass_s, frames, ramped, None, None)


def clock_summary(samples: tuple[ClockSample, ...], start_s: float | None, end_s: float | None,
                  max_clock_mhz: int | None) -> ClockVerdict:
    """The SM clock over a whole run [start_s, end_s], without a verdict (``ramped`` None, no warning): a
    program probed as it is has no pass of its own to judge, and its start-up and host phases leave the
    GPU idle, where its clock reads low by design."""
    window = tuple(s for s in samples if start_s is None or end_s is None or start_s <= s.t_s <= end_s)
    mhz = [s.sm_mhz for s in window]
    run_s = None if start_s is None or end_s is None else max(end_s - start_s, 0.0)
    if not mhz:
        return ClockVerdict(0, None, None, None, max_clock_mhz, run_s, None, None, None, None)
    return ClockVerdict(len(mhz), min(mhz), float(statistics.median(mhz)), max(mhz), max_clock_mhz, run_s, None, None,
                        None, None)


class ClockSampler:
    """Samples the SM clock of one GPU every SAMPLE_INTERVAL_S in a background thread.

    Use as a context manager around a child process. Without NVML it records nothing
    (``available`` is False) rather than failing the probe: clocks are provenance, not the
    measurement.
    """

    def __init__(self, device_index: int = 0, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.device_index = device_index
        self.interval_s = interval_s
        self.samples: list[ClockSample] = []
        self.max_clock_mhz: int | None = None
        self.available = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml = None
        self._handle = None

    def __enter__(self) -> "ClockSampler":
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.device_index)
            self.max_clock_mhz = int(pynvml.nvmlDeviceGetMaxClockInfo(self._handle, pynvml.NVML_CLOCK_SM))
            self.available = True
        except Exception:  # NVML missing or no GPU: clocks stay "not measured"
            self.available = False
            return self
        self._thread = threading.Thread(target=self._loop, name="clusterbench-clocks", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        nvml, handle = self._nvml, self._handle
        reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        while not self._stop.is_set():
            try:
                mhz = int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))
            except Exception:
                break
            mask = None
            if reasons is not None:
                try:
                    mask = int(reasons(handle))
                except Exception:
                    reasons = None
            self.samples.append(ClockSample(time.time(), mhz, mask))
            self._stop.wait(self.interval_s)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass

    def snapshot(self) -> tuple[ClockSample, ...]:
        return tuple(self.samples)
