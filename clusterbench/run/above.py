"""Figures that cannot be right: a sustained FPS above the roofline of its own trace, beyond the noise
(docs/probe.md, "The host bar without the profiler"). Pure: no I/O, no GPU, no UI.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from clusterbench.model import units as U
from clusterbench.model.engines import display_name
from clusterbench.model.measurement import Measurement
from clusterbench.model.results import ROOFLINE_EXCESS, ResultRow


@dataclass(frozen=True, slots=True)
class AboveRoofline:
    """A sustained FPS above a roofline beyond the noise: why (``note``, the row's ``roofline_note``), and
    whether it stands above the roofline without the profiler too (``impossible``: no pipeline runs faster
    than its tallest bar, so a bar of the trace overstates its cost; warned about)."""

    note: str
    impossible: bool


def _untraced_binder(row: ResultRow, host: Any) -> str:
    if host is not None and row.roofline_untraced_us is not None and math.isclose(row.roofline_untraced_us,
                                                                                     host.untraced_us):
        return "host"
    if row.binds and row.binds != "host":
        return row.binds
    bars = {n: getattr(row, f"{n}_us") for n in ("kernel", "h2d", "d2h") if getattr(row, f"{n}_us")}
    return max(bars, key=bars.get) if bars else "host"  # type: ignore[arg-type]


def above_roofline(row: ResultRow, sustained: Measurement | None, host: Any = None) -> AboveRoofline | None:
    """Why the row's sustained FPS stands above a roofline beyond the noise, or None (pure).

    The noise: the larger of ROOFLINE_EXCESS and the runs' spread over their median, plus, where the host
    binds without the profiler, the estimate's own band. Above the roofline without the profiler
    (``roofline_untraced_us``: the GPU bars as traced, the host bar estimated untraced): impossible, a bar of
    the trace overstates its cost (the traced pass ran slower). Above the traced roofline only: the
    profiler's inflation of the host bar, which the estimate takes off."""
    fps = row.sustained_fps
    if fps is None or sustained is None:
        return None
    noise = max(ROOFLINE_EXCESS, sustained.spread / fps)
    traced = row.roofline_fps
    untraced = U.fps_of_us(row.roofline_untraced_us) or traced
    if untraced is None:
        return None
    binder = _untraced_binder(row, host)
    band = 0.0
    if binder == "host" and host is not None and host.untraced_us > 0:
        band = (host.untraced_us - host.low_us) / host.untraced_us
    if fps > untraced * (1 + noise + band):
        what = (f"the host bar {U.us_per_frame(row.roofline_untraced_us, 2)} without the profiler "
                f"({host.method})" if binder == "host" and host is not None else
                f"{display_name(binder)} the tallest bar" if binder != "host" else
                f"the host bar {U.us_per_frame(row.host_us, 2)} as traced (not estimated without the profiler)")
        why = ("the traced pass ran slower than the untraced runs (the profiler's overhead, or other work "
               "during the trace) and the trace's bars overstate the costs")
        if binder == "host":
            why += ("; or the profiler cost the host more than the estimate takes off" if host is not None else
                    ": the profiler's inflation of the host bar, which no estimate took off")
        return AboveRoofline(
            f"sustained {U.fps(fps)} is {U.pct(fps / untraced - 1)} above the roofline without the "
            f"profiler ({U.fps(untraced)}, {what}), beyond the ±{U.pct(noise + band)} noise: no pipeline "
            f"runs faster than its tallest bar, so {why}", True)
    if traced is not None and fps > traced * (1 + noise) and host is not None:
        where = ("within the roofline without the profiler" if fps <= untraced else
                 f"{U.pct(fps / untraced - 1)} above the roofline without the profiler, inside its "
                 f"±{U.pct(noise + band)} noise,")
        return AboveRoofline(
            f"sustained {U.fps(fps)} is {U.pct(fps / traced - 1)} above the traced roofline "
            f"({U.fps(traced)}: the host bar {U.us_per_frame(host.traced_us, 2)} under nsys) and {where} "
            f"({U.fps(untraced)}: the host bar {U.us_per_frame(host.untraced_us, 2)}, {host.method}): the "
            "profiler's inflation of the host bar", False)
    return None


