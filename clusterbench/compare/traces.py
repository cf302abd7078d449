"""Compare two traces directly: ``clusterbench compare TRACE_A TRACE_B``.

Each trace (an nsys SQLite export, or a report that analyze exports) is analyzed as ``clusterbench analyze``
would (:func:`clusterbench.analyzers.analysis.analyze_trace`: the probe's pass range, ``--range NAME``, the
frames of the range text or ``--frames``); then per engine (µs per frame), the roofline, and per kernel name
(µs per frame of that kernel's busy time inside the window), before → after, with a verdict.

Identical figures read SAME (a trace compared with itself reads SAME everywhere). Otherwise the noise is the
1-stream reproducibility rule: trace figures reproduce across sessions to about 1 %, so a change within 1 % of
the before value is SAME. Two traces are two sessions, so on a trace with several
streams the transfer engines (and a roofline that binds on one) are held to the drift bound instead: within
it NOT COMPARABLE, beyond it FASTER or SLOWER, marked cross-session.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from clusterbench.compare.compare import HOST_BOUND_WHY, MetricDelta, Reason, Verdict, compare_metric
from clusterbench.compare.noise import SEED_FLOORS, TRACE_FLOOR_MIN_PCT, FloorSet, NoiseFloor
from clusterbench.errors import InputError
from clusterbench.model.engines import TRANSFER_ENGINES
from clusterbench.model.engines import display_name as display_engine
from clusterbench.model.results import HOST_BINDER
from clusterbench.model import units as U

if TYPE_CHECKING:
    from clusterbench.analyzers.records import GroupAnalysis, TraceAnalysis

TRACE_SUFFIXES = (".sqlite", ".nsys-rep", ".qdrep")
REPRODUCIBILITY_SOURCE = f"the 1-stream reproducibility rule: trace figures reproduce to about {U.pct_of(TRACE_FLOOR_MIN_PCT, None)}"


def is_trace(path: str | os.PathLike[str]) -> bool:
    """A path that names a trace (by its extension), not a results dir."""
    p = Path(path)
    return p.suffix.lower() in TRACE_SUFFIXES and not p.is_dir()


@dataclass(frozen=True, slots=True)
class TraceSide:
    """One trace: where it is, on which GPU, over which window and how many frames."""

    path: str
    name: str
    gpu_name: str | None
    frames: int | None
    frames_source: str | None
    window_source: str
    streams: int
    binds: str | None  # the roofline engine
    nsys_version: str | None

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class TraceComparison:
    """Two traces side by side: per engine and per kernel name. ``kernels`` holds one delta per kernel name
    seen in either trace (MetricDelta.name is the kernel's name), the busiest first."""

    before: TraceSide
    after: TraceSide
    engines: tuple[MetricDelta, ...]  # names "<engine>_us"; "roofline_us" last
    kernels: tuple[MetricDelta, ...]
    floors: FloorSet
    warnings: tuple[str, ...] = ()

    @property
    def binds_changed(self) -> bool:
        return self.before.binds is not None and self.after.binds is not None and self.before.binds != self.after.binds


def analyze_for_compare(path: Path, frames: str | None = None, range_name: str | None = None,
                        window: str | None = None) -> TraceAnalysis:
    """Analyze one trace as ``analyze`` does; ``frames`` and ``window`` are the options' text (``--frames
    N|kernel:REGEX|...``, ``--window auto|span|range:NAME|ms:A-B``), with analyze's definitions."""
    from clusterbench.analyzers.analysis import analyze_trace

    return analyze_trace(path, range_name=range_name, window=window, frames_spec=frames)


def kernel_times(group: GroupAnalysis) -> dict[str, float]:
    """µs per frame of each kernel name's busy time (the union of its launches inside the window), from
    the analysis's kernels by name; empty when the frames are unknown."""
    return {k.name: k.us_per_frame for k in group.kernels if k.us_per_frame is not None and k.busy_ns > 0}


def _side(a: TraceAnalysis) -> TraceSide:
    g = a.primary
    return TraceSide(path=a.trace, name=Path(a.trace).name, gpu_name=g.gpu_name, frames=g.frames.count,
                     frames_source=g.frames.source, window_source=g.window.source, streams=g.busy.n_streams,
                     binds=g.roofline.engine, nsys_version=a.nsys_version)


def _engine_us(g: GroupAnalysis) -> dict[str, float]:
    return {e: s.us_per_frame for e, s in g.busy.engines.items() if s.us_per_frame is not None and s.busy_ns > 0}


def compare_traces(a: TraceAnalysis, b: TraceAnalysis, kernels_a: Mapping[str, float] | None = None,
                   kernels_b: Mapping[str, float] | None = None, *, allow_different_gpu: bool = False,
                   floors: FloorSet = SEED_FLOORS) -> TraceComparison:
    """Per engine, the roofline and per kernel name, before (``a``) → after (``b``): see the module docstring.
    InputError when a side has no frames, or for two GPU models unless ``allow_different_gpu``."""
    before, after = _side(a), _side(b)
    for side in (before, after):
        if not side.frames:
            raise InputError(f"{side.name}: frames unknown, so no µs per frame to compare",
                             hint="pass --frames N (the frames of the traced window), or a trace whose range "
                                  "text says frames=N")
    warnings: list[str] = []
    try:
        itself = Path(before.path).resolve() == Path(after.path).resolve()
    except OSError:
        itself = False
    if itself:
        warnings.append(f"{before.name} is compared with itself: every figure is identical")
    if before.gpu_name and after.gpu_name and before.gpu_name != after.gpu_name:
        if not allow_different_gpu:
            raise InputError(f"the two traces come from different GPUs: {before.gpu_name} ({before.name}) vs "
                             f"{after.gpu_name} ({after.name})", hint="pass --allow-different-gpu to compare them anyway")
        warnings.append(f"different GPUs: {before.gpu_name} before, {after.gpu_name} after: the deltas measure "
                        "the GPUs as much as the change")
    multi = max(before.streams, after.streams) > 1
    streams = max(before.streams, after.streams, 1)
    eb, ea = _engine_us(a.primary), _engine_us(b.primary)
    engines: list[MetricDelta] = []

    def one(metric: str, vb: float | None, va: float | None, transfer: bool,
            not_comparable: tuple[Reason, str] | None = None) -> MetricDelta:  # fmt: skip
        fl = NoiseFloor(metric, multi, TRACE_FLOOR_MIN_PCT, REPRODUCIBILITY_SOURCE)
        return compare_metric(metric, vb, va, streams=streams, floors=floors, floor=fl,
                              drift_bound_pct=floors.drift_bound_pct if multi and transfer else None,
                              not_comparable=not_comparable)

    for e in [e for e in (*eb, *ea) if e in eb or e in ea]:
        if any(m.name == f"{e}_us" for m in engines):
            continue
        engines.append(one(f"{e}_us", eb.get(e), ea.get(e), e in TRANSFER_ENGINES))
    on_transfer = before.binds in TRANSFER_ENGINES or after.binds in TRANSFER_ENGINES
    rb, ra = a.primary.roofline.us_per_frame, b.primary.roofline.us_per_frame
    # a roofline on the host bar is not judged (compare.Reason.HOST_BOUND); two traces have no sustained FPS
    host = (Reason.HOST_BOUND, HOST_BOUND_WHY.format(before=display_engine(before.binds), after=display_engine(after.binds))
            + "; the frame of a program the host binds is judged by sustained FPS (clusterbench probe, then compare "
              "DIR_A DIR_B)") if HOST_BINDER in (before.binds, after.binds) and rb != ra else None  # fmt: skip
    engines.append(one("roofline_us", rb, ra, on_transfer, host))
    kb, ka = dict(kernels_a or {}), dict(kernels_b or {})
    names = sorted(set(kb) | set(ka), key=lambda n: -max(kb.get(n, 0.0), ka.get(n, 0.0)))
    kernels = []
    for n in names:
        m = one("kernel_us", kb.get(n), ka.get(n), False)
        if m.verdict is Verdict.MISSING:
            where = "before" if n not in ka else "after"
            m = dataclasses.replace(m, reason=f"only in {where}", code=Reason.ONE_SIDED)
        kernels.append(dataclasses.replace(m, name=n))
    if multi and not itself:
        warnings.append(f"{streams} streams: the transfer engines of two traces (two sessions) are judged against "
                        f"the {U.pct_of(floors.drift_bound_pct, None)} drift bound, not the {U.pct_of(TRACE_FLOOR_MIN_PCT, None)} rule")
    return TraceComparison(before, after, tuple(engines), tuple(kernels), floors, tuple(warnings))
