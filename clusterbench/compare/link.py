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

On several streams the copies of one direction run partly alone and partly under the other's, so the rate
a config meets lies between the unit's rate alone and its rate with both at once, and where in between is not
known. A third H100 unit (duplex D2H 34.4 GB/s against 50.5, alone 54.9 against 55.3) ran make run's 9x9
4-stream config at 68,847 FPS against 89,559: −23 % as measured, −22 % as shares of the rates alone, +12.7 %
as shares of the duplex rates, which read FASTER on an A/A pair. So each figure on several streams is set
against both ends: the change judged is the one nearest 0 over the range between them, and 0 where the range
holds 0 (the pair is then no evidence of a change: the link's difference explains it either way).

Within one unit, figures are judged as measured, but for one: sustained FPS on several streams whose
roofline binds on a transfer, between two sessions of the unit whose probes both measured the link. A fourth
H100 unit (GPU-137660c0) ran make run's 3x3 4-stream config at 144,072 FPS, and two minutes later at 134,390
(−6.72 %), each probe's three processes within 2 % of each other, while its link read 5.7 % slower with both
directions at once (H2D 46.81 → 44.14 GB/s) and 3.4 % slower alone: the host's link, not the build, had
moved. So within a unit the range runs from the change as measured to the changes as shares of the link
(duplex and alone), and the change judged is the one nearest 0 over it: a link reading can only explain a
change away, never make one (another H100 unit's second probe read its link 24 % low while its sustained FPS
held within 0.64 %; judged as shares alone, that would have read +16 % FASTER). The trace figures within a
unit stay as measured (several streams: the drift bound of multi-stream transfers).
"""

from __future__ import annotations

import dataclasses
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
    alone_before_gbps: float | None = None  # with ``duplex``: each unit's rate of that direction alone, the
    alone_after_gbps: float | None = None   # other end of the range the config's copies meet
    measured: bool = False  # the change as measured is in the range too (two sessions of one unit)

    def _ratio(self, before: float, after: float, rb: float, ra: float) -> float:
        if self.time:
            return (after * ra) / (before * rb)
        return (after / ra) / (before / rb)

    def ratio_range(self, before: float, after: float) -> tuple[float, float]:
        """The lowest and highest after / before as shares of each unit's link, over its range of rates."""
        ends = [self._ratio(before, after, self.before_gbps, self.after_gbps)]
        if self.duplex and self.alone_before_gbps is not None and self.alone_after_gbps is not None:
            ends.append(self._ratio(before, after, self.alone_before_gbps, self.alone_after_gbps))
        if self.measured:
            ends.append(after / before)
        return min(ends), max(ends)

    @property
    def text(self) -> str:
        """``as shares of each unit's link (D2H with both at once 50.7 → 40.0 GB/s)``, and the rates alone
        where the range runs to them."""
        both = " with both at once" if self.duplex else " alone"
        whose = "the unit's link as each probe measured it" if self.measured else "each unit's link"
        out = (f"as shares of {whose} ({self.direction.upper()}{both} "
               f"{U.gbps(self.before_gbps, unit=False)} → {U.gbps(self.after_gbps)}")
        if self.duplex and self.alone_before_gbps is not None and self.alone_after_gbps is not None:
            out += (f" to alone {U.gbps(self.alone_before_gbps, unit=False)} → "
                    f"{U.gbps(self.alone_after_gbps)}")
        return out + ")" + (" and as measured" if self.measured else "")

    def range_text(self, before: float, after: float) -> str:
        """The change over the range of rates, e.g. ``-22.40 % to +12.73 %``, or one change without a range."""
        lo, hi = self.ratio_range(before, after)
        if lo == hi:
            return U.signed_pct((lo - 1.0) * 100.0)
        return f"{U.signed_pct((lo - 1.0) * 100.0)} to {U.signed_pct((hi - 1.0) * 100.0)}"


def link_share(metric: str, streams: int | None, binds_before: str | None, binds_after: str | None,
               unit_before: UnitRecord | None, unit_after: UnitRecord | None, same_unit: bool = False
               ) -> LinkShare | None:
    """How ``metric`` of a row pair on two units (``same_unit``: two sessions of one unit) is set against their
    links, or None when it is judged as measured: not a link-bound figure, or a unit's link not measured (pure;
    see the module docstring). Within one unit only sustained FPS on several streams is, with the change as
    measured in its range."""
    if unit_before is None or unit_after is None or unit_before.link is None or unit_after.link is None:
        return None
    if same_unit:
        share = link_share(metric, streams, binds_before, binds_after, unit_before, unit_after)
        if share is None or metric != "sustained_fps":
            return None
        return dataclasses.replace(share, measured=True)
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
    if not multi:
        return LinkShare(direction, False, rb.gbps, ra.gbps, time)
    ab, aa = unit_before.link.rate(direction, False), unit_after.link.rate(direction, False)
    return LinkShare(direction, True, rb.gbps, ra.gbps, time, ab.gbps, aa.gbps)
