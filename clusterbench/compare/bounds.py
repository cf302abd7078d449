"""The default bounds: what compare judges with on a GPU model that has no floors file.

A verdict never needs a floors file. Where a GPU model has none, each figure is judged against a default
bound: the share of the before value that A/A pairs of one build moved by, measured on the GPU models listed
here, for pairs of one scope (``within_session``, ``same_unit``, ``across_units``) and one stream class. The
number of a figure is the model's own where it was measured; a model not listed gets twice the largest seen
on any (UNMEASURED_FACTOR, with why),
and every verdict it judges is marked provisional, since it was not measured on the model judged.
A floors file (``clusterbench floors``) measured on the model replaces these.

Each number is the floor rule (compare/noise.py: 1.5 x the largest A/A difference, rounded up to the next
0.5 %, at least 0.5 %, trace figures at least 1 %) applied to A/A pairs of committed results dirs;
``scripts/bounds_table.py DIR DIR ...`` recomputes a model's rows from result dirs and prints them in this
form. Multi-stream transfer figures (H2D, D2H and a roofline that binds on one) across units come from dirs
made before the probe measured each unit's link, so they hold the link differences between units as well:
with the link measured, compare judges those figures as shares of each unit's link, and the bound is an upper
bound there.

Pure data and one pure function.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from clusterbench.model import units as U


@dataclass(frozen=True, slots=True)
class DefaultBound:
    """One default bound: ``metric`` (a compared metric), ``multi_stream``, ``scope``, ``pct`` (% of the before
    value), measured on ``gpu_name`` from ``pairs`` pairs of that scope whose largest difference was
    ``worst_pct``."""

    metric: str
    multi_stream: bool
    scope: str
    pct: float
    gpu_name: str
    pairs: int
    worst_pct: float
    widened: float = 1.0  # > 1: the bound of another model, times this (the model judged was not measured)

    @property
    def source(self) -> str:
        """``default bound, measured on NVIDIA H200: 10 pairs of units, largest A/A difference 1.06 %``."""
        what = {"within_session": "probes of one session", "same_unit": "sessions on one GPU unit",
                "across_units": "GPU units"}[self.scope]
        text = (f"default bound, measured on {self.gpu_name}: {self.pairs} pairs of {what}, largest A/A "
                f"difference {U.pct_of(self.worst_pct, 2)}")
        if self.widened != 1.0:
            text += f"; times {self.widened:g} on a model without A/A runs of its own"
        return text


# The H200 (PCIe Gen5 x16, driver 580.159.04): the A/A dirs of results/floors/NVIDIA_H200.json, made by
#   clusterbench floors results/2026-12-02_f32_aa_m* results/2026-12-01_f32_aa1 results/2026-12-01_f32_aa2 \
#       results/2026-12-01_f32_aa3 results/2026-12-01_f32_slide results/2026-12-01_f32_slide_aa
# (five freshly started units probed twice in one session, one of them in two more sittings; a triple and a
# pair of sessions on two more units; git 2991d03, fb200a5d, efa5d09). Each row: metric, several streams,
# scope, pct, pairs, largest A/A difference %. Recomputed by: python3 scripts/bounds_table.py <those dirs>.
_H200 = "NVIDIA H200"
_H200_ROWS: tuple[tuple[str, bool, str, float, int, float], ...] = (
    ("kernel_us", False, "within_session", 1.0, 6, 0.470), ("kernel_us", False, "same_unit", 1.5, 10, 0.695),
    ("kernel_us", False, "across_units", 2.0, 10, 1.128), ("kernel_us", True, "within_session", 1.0, 6, 0.536),
    ("kernel_us", True, "same_unit", 1.5, 10, 0.841), ("kernel_us", True, "across_units", 2.0, 10, 1.237),
    ("h2d_us", False, "within_session", 2.0, 6, 1.113), ("h2d_us", False, "same_unit", 1.5, 10, 0.845),
    ("h2d_us", False, "across_units", 2.5, 10, 1.480), ("h2d_us", True, "within_session", 10.5, 6, 6.836),
    ("h2d_us", True, "same_unit", 6.0, 10, 3.918), ("h2d_us", True, "across_units", 17.5, 10, 11.509),
    ("d2h_us", False, "within_session", 1.0, 6, 0.626), ("d2h_us", False, "same_unit", 1.0, 10, 0.338),
    ("d2h_us", False, "across_units", 1.0, 10, 0.583), ("d2h_us", True, "within_session", 10.5, 6, 6.836),
    ("d2h_us", True, "same_unit", 6.0, 10, 3.918), ("d2h_us", True, "across_units", 17.5, 10, 11.509),
    ("roofline_us", False, "within_session", 2.0, 6, 1.113), ("roofline_us", False, "same_unit", 1.5, 10, 0.710),
    ("roofline_us", False, "across_units", 2.5, 10, 1.480), ("roofline_us", True, "within_session", 10.5, 6, 6.836),
    ("roofline_us", True, "same_unit", 6.0, 10, 3.918), ("roofline_us", True, "across_units", 17.5, 10, 11.509),
    ("sustained_fps", False, "within_session", 1.5, 6, 0.786), ("sustained_fps", False, "same_unit", 2.0, 10, 1.130),
    ("sustained_fps", False, "across_units", 2.0, 10, 1.056), ("sustained_fps", True, "within_session", 1.0, 6, 0.355),
    ("sustained_fps", True, "same_unit", 3.0, 10, 1.741), ("sustained_fps", True, "across_units", 3.5, 10, 2.181),
)

# The H100 (NVIDIA H100 80GB HBM3): rows of the same form from A/A dirs of freshly started H100 machines
# (scripts/device_verdicts.sh makes them; python3 scripts/bounds_table.py DIRS prints the rows). Empty until
# those are measured: the H100 is judged by the largest bound measured on any model meanwhile.
_H100 = "NVIDIA H100 80GB HBM3"
_H100_ROWS: tuple[tuple[str, bool, str, float, int, float], ...] = ()

MEASURED: dict[str, tuple[tuple[str, bool, str, float, int, float], ...]] = {_H200: _H200_ROWS, _H100: _H100_ROWS}

# A model without A/A rows of its own is judged by twice the largest bound measured on any model: bounds do not
# carry from one model to another. The one H100 unit probed twice (results/2026-12-06_f32_h100_aa1 and _aa2,
# a freshly started machine's first two probes, 2026-12-06) moved by up to 3.96 % on the 1-stream H2D and
# 2.07 % on the 1-stream roofline, where the H200's largest bounds of those figures are 2.5 % and 2.5 %
# (its largest differences 1.48 %): about twice. The factor was chosen after seeing that pair (it is not an
# out-of-sample check), and sustained FPS of several processes is judged by its own process spread anyway.
UNMEASURED_FACTOR = 2.0


def _widened(pct: float) -> float:
    """``pct`` times UNMEASURED_FACTOR, rounded up to the next 0.5 % (the floor rule's step)."""
    return math.ceil(pct * UNMEASURED_FACTOR * 2 - 1e-9) / 2


def default_bounds(gpu_name: str | None = None) -> tuple[DefaultBound, ...]:
    """The default bound of every (metric, stream class, scope) (pure): the model's own where it was measured,
    else UNMEASURED_FACTOR times the largest over the models measured (ties: the first model listed)."""
    own = MEASURED.get(gpu_name or "") or ()
    if own:
        return tuple(DefaultBound(m, multi, sc, pct, str(gpu_name), n, worst) for m, multi, sc, pct, n, worst in own)
    best: dict[tuple[str, bool, str], DefaultBound] = {}
    for model, rows in MEASURED.items():
        for m, multi, sc, pct, n, worst in rows:
            key = (m, multi, sc)
            if key not in best or pct > best[key].pct:
                best[key] = DefaultBound(m, multi, sc, pct, model, n, worst)
    return tuple(dataclasses.replace(b, pct=_widened(b.pct), widened=UNMEASURED_FACTOR) for b in best.values())
