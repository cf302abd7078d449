"""Trace bars that overstate their cost, and how compare judges them (pure).

A row's bars come from one traced pass; its sustained FPS from untraced processes. No pipeline runs faster
than its tallest bar, so a sustained FPS above the tallest GPU bar beyond the noise proves that the traced
pass ran slower than the untraced runs and that the bar overstates its cost, by at least the factor
bar × FPS (:meth:`~clusterbench.model.results.ResultRow.bar_excess`; the probe warns of it as it happens).

A fresh H100 unit (GPU-82ba4b92) ran make run's 3x3 4-stream config twice, two minutes apart, on one build:
sustained FPS 153,961 and 155,934 (+1.28 %), links alike (duplex H2D 50.48 and 50.65 GB/s), but the first
traced pass's H2D bar read 7.25 µs per frame against 6.37 (−12.22 %): the first pass's copies ran at
44 GB/s, the second's at 50, and the first row's sustained FPS stood 11.7 % above its H2D bar. Judged as
measured, that A/A pair read H2D and roofline FASTER, beyond the 11 % same-unit floor.

So the bar that binds a side whose bar overstates it (and that side's roofline) is judged over a range: from
the change as measured to the change with that side's bar cut to the untraced frame (bar / factor), the least
it overstates by; the change judged is the one nearest 0 over the range (0 where the range holds 0). An
overstated bar can only explain a change away, never make one. The other bars and sustained FPS are judged
as measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.compare.link import LinkShare
from clusterbench.model import units as U
from clusterbench.model.engines import display_name
from clusterbench.model.results import ResultRow


@dataclass(frozen=True, slots=True)
class Overstated:
    """A time figure (µs per frame) whose bar overstates its cost on one side or both: each side's factor
    (1.0: as measured), the engine whose bar it is and the sustained FPS that shows it."""

    before: float
    after: float
    engine_before: str | None = None
    engine_after: str | None = None
    fps_before: float | None = None
    fps_after: float | None = None

    def widen(self, lo: float, hi: float) -> tuple[float, float]:
        """A range of after / before widened by the sides' bars cut to their untraced frames: a smaller before
        raises the ratio, a smaller after lowers it."""
        return lo / self.after, hi * self.before

    @property
    def text(self) -> str:
        """``the before side's H2D bar lasts 1.117 × its untraced frame (sustained 153,961 FPS): a trace's bar
        cut to the untraced frame`` (the range's name in a reason)."""
        return self.sides_text + ": a trace's bar cut to the untraced frame"

    @property
    def sides_text(self) -> str:
        """``the before side's H2D bar lasts 1.117 × its untraced frame (sustained 153,961 FPS)``, per side."""
        parts = []
        for side, f, engine, fps in (("before", self.before, self.engine_before, self.fps_before),
                                     ("after", self.after, self.engine_after, self.fps_after)):
            if f > 1.0:
                parts.append(f"the {side} side's {display_name(engine or '?')} bar lasts {f:.3f} × its untraced "
                             f"frame (sustained {U.fps(fps)})")
        return "; ".join(parts)

    @property
    def note(self) -> str:
        """The row's note: which side's bar overstates it, and which figures were judged over the range."""
        engines = " and ".join(dict.fromkeys(display_name(e) for f, e in ((self.before, self.engine_before),
                                                                          (self.after, self.engine_after)) if f > 1.0))
        return (f"{self.sides_text}: a bar cannot outlast the frame, so that traced pass ran slower than the "
                f"untraced runs; its {engines} bar and the roofline judged from as measured to that bar cut to the "
                "untraced frame (the change nearest 0 %)")


def overstated(metric: str, before: ResultRow, after: ResultRow) -> Overstated | None:
    """How ``metric`` of a row pair is judged for bars that overstate their cost, or None: as measured (a
    figure no side's excess applies to, or neither side's bar overstates beyond the noise)."""
    factors: list[float] = []
    for row in (before, after):
        x = row.bar_excess()
        # a side's excess applies to its roofline and to the bar of the engine it binds on
        applies = x is not None and metric in ("roofline_us", f"{row.binds}_us")
        factors.append(x if applies else 1.0)  # type: ignore[arg-type]
    if factors == [1.0, 1.0]:
        return None
    return Overstated(factors[0], factors[1], before.binds, after.binds, before.sustained_fps, after.sustained_fps)


def judged_range(before: float, after: float, link: LinkShare | None, over: Overstated | None
                 ) -> tuple[float, float, float]:
    """The lowest and highest after / before (``before`` > 0) over the range of the links (as shares of each
    unit's link) and of an overstated bar, and the ratio judged: the one nearest 1 over that range, and 1
    where the range holds 1. Compare's verdicts and the floors made of A/A pairs both judge by it."""
    lo, hi = link.ratio_range(before, after) if link is not None else (after / before, after / before)
    if over is not None:
        lo, hi = over.widen(lo, hi)
    return lo, hi, 1.0 if lo <= 1.0 <= hi else (lo if lo > 1.0 else hi)
