"""Link-bound figures as shares of each unit's measured link (pure).

Three H100 units ran make run's 9x9 4-stream config at 89,298, 70,183 and 72,887 FPS: their one-direction
links agreed (H2D and D2H 54.7 to 55.1 GB/s), but with both directions at once D2H ran at 50.7 GB/s on one
and at 40.0 and 41.1 GB/s on the others. Divided by each unit's duplex D2H rate the three figures agree within
1.1 % (1,760, 1,756 and 1,773 frames per GB/s). So across two units, a figure the link binds is judged as a
share of that unit's link:

- H2D or D2H µs per frame (and a roofline that binds on one): times the rate of that direction, in GB/s,
  which gives the bytes the bar is worth at that rate; one direction alone on 1 stream (nothing overlaps),
  both at once on several (the copies of one stream run under the other's);
- sustained FPS of a row with several streams whose roofline binds on a transfer, before and after: over the
  duplex rate of that direction (frames per GB/s). On 1 stream the bars add up, the link is only part of the
  frame, and its FPS is judged as it is.

Within one unit, figures are judged as measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterbench.model import units as U
from clusterbench.model.engines import TRANSFER_ENGINES
from clusterbench.model.unit import UnitRecord

TRANSFER_FIGURES = {"h2d_us": "h2d", "d2h_us": "d2h"}


@dataclass(frozen=True, slots=True)
class LinkShare:
    """How one figure is set against the two units' links: the ``direction`` (h2d, d2h), whether with both
    directions at once (``duplex``), each unit's rate (GB/s), and whether the figure is a time (µs per frame:
    times the rate) or a rate (FPS: over it)."""

    direction: str
    duplex: bool
    before_gbps: float
    after_gbps: float
    time: bool

    def ratio(self, before: float, after: float) -> float:
        """after / before as shares of each unit's link."""
        if self.time:
            return (after * self.after_gbps) / (before * self.before_gbps)
        return (after / self.after_gbps) / (before / self.before_gbps)

    @property
    def text(self) -> str:
        """``as shares of each unit's link (D2H with both at once 50.7 → 40.0 GB/s)``."""
        both = " with both at once" if self.duplex else " alone"
        return (f"as shares of each unit's link ({self.direction.upper()}{both} "
                f"{U.gbps(self.before_gbps, unit=False)} → {U.gbps(self.after_gbps)})")


def link_share(metric: str, streams: int | None, binds_before: str | None, binds_after: str | None,
               unit_before: UnitRecord | None, unit_after: UnitRecord | None) -> LinkShare | None:
    """How ``metric`` of a row pair on two units is set against their links, or None when it is judged as
    measured: not a link-bound figure, or a unit's link not measured (pure; see the module docstring)."""
    if unit_before is None or unit_after is None or unit_before.link is None or unit_after.link is None:
        return None
    multi = streams is None or streams > 1
    direction = TRANSFER_FIGURES.get(metric)
    binds = binds_before if binds_before == binds_after and binds_before in TRANSFER_ENGINES else None
    if metric == "roofline_us" and binds is not None:
        direction = binds
    time = True
    if metric == "sustained_fps":
        if not multi or binds is None:
            return None
        direction, time = binds, False
    if direction is None:
        return None
    rb, ra = unit_before.link.rate(direction, multi), unit_after.link.rate(direction, multi)
    return LinkShare(direction, multi, rb.gbps, ra.gbps, time)
