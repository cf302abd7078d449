"""The program's own figures set against the trace (pure): its rate, and its per-frame kernel time.

A program that reports its own speed can be wrong about it (the LCLS DAQ's throughput was off by a
factor nobody noticed; aare's driver times its kernel with CUDA-event pairs). Where the trace gives the
same figure, probe compares the two and says whether they agree, and if not which to believe.

The rate. The figure compared is the line the program printed in the traced run itself: it ran under
the same profiler over the same work, so the profiler's overhead cancels. Against it, the trace's
figure over its window: frames per second (the frames counted in the window over the window's length)
for a rate in frames, or H2D GB/s (the H2D bytes the window holds over its length) for a rate in GB/s.
Where the traced run printed no such line, the untraced runs' median is compared instead, with up to
PROFILER_ALLOWANCE more speed allowed for the profiler's overhead. The two agree within
``max(TOLERANCE, NOISE_FACTOR x the untraced runs' relative spread)``: the program's timer and the
window need not start and end on the same record (a warm-up frame, the first copy before the first
kernel), which costs a few per cent on a short loop; a wrong calculation is off by far more.

The kernel time. A per-frame kernel time the program prints (or writes to its result record as
``extra.kernel_us_per_frame``) is set against the trace's kernel bar (the union of every kernel's
execution, per frame), within ``max(TOLERANCE x the bar, KERNEL_FLOOR_US)``. CUDA-event pairs time
everything between the two events on the stream, so a figure above the bar counts waiting as kernel
time: believe the bar. A figure below the bar times less than the frame's kernels: believe the bar too,
for what the GPU spends per frame.

Every verdict is one :class:`FigureCheck`: status (agree, disagree, unchecked), a reason code, a
message with the figures and their units, and the figures themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from clusterbench.model.stats import half_range, median
from clusterbench.model import units as U
from clusterbench.run.rates import Reading

TOLERANCE = 0.10  # relative: timer edges against window edges, frames counted by launches
NOISE_FACTOR = 2.0  # x the untraced runs' relative spread (half their min-max range over the median)
PROFILER_ALLOWANCE = 0.5  # an untraced figure may be up to this much faster than the traced window
KERNEL_FLOOR_US = 0.5  # CUDA events resolve about 0.5 µs: closer than that is agreement
IDLE_CAVEAT = 0.5  # above this idle share of the window, say that the program may time only part of it

# FigureCheck.to_json. History: 1: first version.
CHECK_VERSION = 1
STATUSES = ("agree", "disagree", "unchecked")


@dataclass(frozen=True, slots=True)
class FigureCheck:
    """One of the program's figures against the trace's: ``what`` (``rate`` or ``kernel_time``), the
    verdict (``status``, ``reason`` code, ``message``) and the figures, in ``unit`` (``fps``, ``GB/s`` or
    ``us/frame``): ``program`` (its traced run's line), ``program_untraced`` (the median of its untraced
    runs), ``trace`` (over the window), ``ratio`` = compared program figure / trace, ``tolerance`` the
    relative band of agreement, ``profiler_overhead`` = untraced / traced program figure."""

    what: str
    status: str
    reason: str
    message: str
    unit: str | None = None
    program: float | None = None
    program_untraced: float | None = None
    trace: float | None = None
    ratio: float | None = None
    tolerance: float | None = None
    profiler_overhead: float | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"a check's status must be one of {', '.join(STATUSES)}, got {self.status!r}")

    def to_json(self) -> dict[str, Any]:
        return {"version": CHECK_VERSION, "what": self.what, "status": self.status, "reason": self.reason,
                "message": self.message, "unit": self.unit, "program": self.program,
                "program_untraced": self.program_untraced, "trace": self.trace, "ratio": self.ratio,
                "tolerance": self.tolerance, "profiler_overhead": self.profiler_overhead}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "FigureCheck":
        if doc.get("version") != CHECK_VERSION:
            raise ValueError(f"a figure check of version {doc.get('version')!r}; this clusterbench reads "
                             f"version {CHECK_VERSION}")
        return cls(**{k: doc.get(k) for k in ("what", "status", "reason", "message", "unit", "program",
                                             "program_untraced", "trace", "ratio", "tolerance",
                                             "profiler_overhead")})


@dataclass(frozen=True, slots=True)
class TraceRate:
    """What the trace says over its window: the frames it holds (None: unknown) and where they came
    from, the window's length and what it is, its H2D bytes, its idle share, and how many (process,
    device) groups the figures cover."""

    frames: int | None
    frames_source: str | None
    window_ns: int
    window_source: str
    h2d_bytes: int | None
    idle_share: float | None
    groups: int = 1

    @property
    def fps(self) -> float | None:
        return self.frames / (self.window_ns / 1e9) if self.frames and self.window_ns > 0 else None

    @property
    def h2d_gbps(self) -> float | None:
        return self.h2d_bytes / self.window_ns if self.h2d_bytes and self.window_ns > 0 else None


def _show(value: float, unit: str) -> str:
    """A checked figure in its unit (``GB/s``, ``us/frame``, else frames per second)."""
    if unit == "GB/s":
        return U.gbps(value)
    if unit == "us/frame":
        return U.us_per_frame(value)
    return U.fps(value)


def relative_noise(samples: Sequence[float]) -> float:
    """Half the min-max range over the median (0 for fewer than two samples)."""
    if len(samples) < 2:
        return 0.0
    m = median(samples)
    return half_range(samples) / m if m > 0 else 0.0


def check_rate(printed: Reading | None, untraced: Sequence[float], metric: str, trace: TraceRate | None) -> FigureCheck:
    """The program's rate against the trace's (see the module docstring). ``printed``: the traced run's
    own line (None: it printed none); ``untraced``: the untraced runs' figures, converted (frames/s, or
    GB/s); ``metric``: ``fps`` or ``GB/s``."""
    u_med = median(untraced) if untraced else None
    overhead = (u_med / printed.converted) if (printed is not None and u_med) else None
    base = dict(what="rate", unit=metric, program=None if printed is None else printed.converted,
                program_untraced=u_med, profiler_overhead=overhead)
    if trace is None:
        return FigureCheck(status="unchecked", reason="no_trace", message="the rate was not checked: nothing was "
                           "traced (--tracer none)", **base)
    if trace.groups > 1:
        return FigureCheck(status="unchecked", reason="several_processes",
                           message=f"the rate was not checked: the trace has {trace.groups} (process, device) groups, "
                                   "and one printed rate cannot be told apart per process", **base)
    t = trace.fps if metric == "fps" else trace.h2d_gbps
    if t is None:
        why = ("the window's frames are unknown (give --frames)" if metric == "fps"
               else "the window holds no H2D bytes")
        return FigureCheck(status="unchecked", reason="no_trace_figure",
                           message=f"the rate was not checked: {why}", **base)
    if printed is None and u_med is None:
        return FigureCheck(status="unchecked", reason="no_program_figure",
                           message="the rate was not checked: the program printed no line that --rate matches",
                           trace=t, **base)
    tol = max(TOLERANCE, NOISE_FACTOR * relative_noise(untraced))
    frames_txt = (f"{trace.frames:,} frames ({trace.frames_source}) over its {U.ms(trace.window_ns)} window"
                  if metric == "fps" else
                  f"{U.size(trace.h2d_bytes)} of H2D over its {U.ms(trace.window_ns)} window")
    where = f"{trace.window_source}"
    if printed is not None:
        p = printed.converted
        ratio = p / t
        ok = 1 / (1 + tol) <= ratio <= 1 + tol
        said = (f"it prints {_show(p, metric)} ({printed.conversion or f'{printed.value:g} {printed.unit}'}) in the "
                "traced run")
        untraced_txt = (f"; untraced it prints {_show(u_med, metric)}, so the profiler slowed it "
                        f"{U.times(overhead)}" if overhead is not None else "")
    else:
        assert u_med is not None
        p = u_med
        ratio = p / t
        ok = 1 / (1 + tol) <= ratio <= (1 + tol) * (1 + PROFILER_ALLOWANCE)
        said = (f"it prints {_show(p, metric)} untraced (the traced run printed no such line; up to "
                f"{U.pct(PROFILER_ALLOWANCE, 0)} more is allowed for the profiler's overhead)")
        untraced_txt = ""
    figs = dict(trace=t, ratio=ratio, tolerance=tol)
    trace_txt = (f"the trace {'counts' if metric == 'fps' else 'moved'} {frames_txt} ({where}): "
                 f"{_show(t, metric)}")
    if ok:
        return FigureCheck(status="agree", reason="within_tolerance",
                           message=f"the program's own rate agrees with the trace: {said}; {trace_txt} "
                                   f"({U.signed_pct(100 * (ratio - 1), 1)}, within ±{U.pct(tol, 0)}){untraced_txt}", **figs, **base)
    caveat = ""
    if trace.idle_share is not None and trace.idle_share > IDLE_CAVEAT:
        caveat = (f" The GPU is idle {U.pct(trace.idle_share, 0)} of the window: if the program times only part of "
                  "the run, pick that part with --window.")
    if metric == "GB/s":
        head = (f"the program reports {_show(p, metric)}; the trace moved {_show(t, metric)} of H2D over its "
                f"window ({U.ms(trace.window_ns)}, {where})")
    else:
        head = (f"the program reports {_show(p, metric)}; the trace counts {frames_txt} ({where}): "
                f"{_show(t, metric)}")
    reason = "program_higher" if ratio > 1 else "program_lower"
    return FigureCheck(status="disagree", reason=reason,
                       message=f"{head}: the program's figure is {U.times(ratio)} the trace's, beyond ±{U.pct(tol, 0)}"
                               f"{' (and the profiler allowance)' if printed is None else ''}. Check what the "
                               f"program's rate counts and over which time{untraced_txt}.{caveat}",
                       **figs, **base)


def check_kernel_time(program_us: float | None, source: str, kernel_us: float | None) -> FigureCheck:
    """A per-frame kernel time the program reports (``source`` says where: a printed line, its result
    record) against the trace's kernel bar (µs per frame; None: no kernel or no frames)."""
    base = dict(what="kernel_time", unit="us/frame", program=program_us)
    if program_us is None:
        return FigureCheck(status="unchecked", reason="no_program_figure",
                           message=f"the kernel time was not checked: {source} gave none", trace=kernel_us, **base)
    if kernel_us is None or not math.isfinite(kernel_us) or kernel_us <= 0:
        return FigureCheck(status="unchecked", reason="no_kernel_bar",
                           message="the kernel time was not checked: the trace has no kernel bar per frame "
                                   "(no kernels in the window, or its frames are unknown)", **base)
    band = max(TOLERANCE * kernel_us, KERNEL_FLOOR_US)
    ratio = program_us / kernel_us
    figs = dict(trace=kernel_us, ratio=ratio, tolerance=band / kernel_us)
    said = (f"the program times its kernel at {U.us_per_frame(program_us)} ({source}); the trace's kernel bar is "
            f"{U.us_per_frame(kernel_us)}")
    if abs(program_us - kernel_us) <= band:
        return FigureCheck(status="agree", reason="within_tolerance",
                           message=f"{said}: they agree (within ±{U.us(band)})", **figs, **base)
    if program_us > kernel_us:
        return FigureCheck(status="disagree", reason="events_longer",
                           message=f"{said} ({U.times(ratio)}): believe the kernel bar. Timing a kernel with a pair "
                                   "of CUDA events counts everything between the two events on its stream: the "
                                   "time the GPU waited for the host to launch it, or for work queued before it.",
                           **figs, **base)
    return FigureCheck(status="disagree", reason="events_shorter",
                       message=f"{said} ({U.times(ratio)}): believe the kernel bar for what the GPU spends per frame: "
                               "it is the union of every kernel of the window over its frames, and the program's "
                               "figure covers less (one kernel of several, or other frames).", **figs, **base)
