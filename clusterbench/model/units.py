"""One formatter for numbers with units (pure): every µs, ms, FPS, GB/s, byte count and percentage that
clusterbench prints goes through here.

One function per kind, as pyperf's ``_formatter`` does. Each takes the value in the unit its name says
(``fps`` takes frames per second, ``duration`` nanoseconds, ``pct`` a fraction, ``pct_of`` a percentage)
and returns text with the unit, or the bare number with ``unit=False`` for a table cell whose header
names the unit. ``None`` is "not measured", shown as :data:`NOT_MEASURED` everywhere, never as "-" or "0".
Conversions that were written inline (``ns / 1000 / frames``) are functions here too, so that a figure
is derived one way only.
"""

from __future__ import annotations

import math
import re
from typing import Callable

# The one glyph for "not measured" (an en dash), in tables, notes and messages alike.
NOT_MEASURED = "–"

# The space between a number and its unit ("20 %", "1.02 µs/frame"): text wrapped for a terminal never
# breaks a line there.
UNIT_GAP = re.compile(r"(?<=\d) (?=(?:%|µs|FPS|GB/s|GB\b|MB|kB|MiB|ms|ns|s\b|x\b|frames\b|repeats\b|streams?\b))")

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


def _missing(v: float | None) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _with(text: str, unit_text: str, unit: bool) -> str:
    return f"{text} {unit_text}" if unit and unit_text else text


def _fixed(v: float, digits: int | None) -> str:
    """``digits`` decimals with thousands separators; ``None``: as few digits as the value needs (a setting
    as the user gave it: ``5``, ``0.5``)."""
    return f"{v:g}" if digits is None else f"{v:,.{digits}f}"


# --------------------------------------------------------------------------- conversions


def us_per_frame_of(ns: float | None, frames: int | None) -> float | None:
    """Nanoseconds over ``frames`` frames, in µs per frame; None when either is unknown or frames is 0."""
    if ns is None or not frames:
        return None
    return ns / NS_PER_US / frames


def fps_of_us(us_per_frame: float | None) -> float | None:
    """The frame rate a per-frame time allows: 1e6 / µs; None for an unknown or non-positive time."""
    if _missing(us_per_frame) or us_per_frame <= 0:  # type: ignore[operator]
        return None
    return 1e6 / us_per_frame  # type: ignore[operator]


# --------------------------------------------------------------------------- times


def us(v: float | None, digits: int = 3, *, unit: bool = True) -> str:
    """Microseconds: ``1.482 µs``."""
    if _missing(v):
        return NOT_MEASURED
    return _with(f"{v:,.{digits}f}", "µs", unit)


def us_per_frame(v: float | None, digits: int = 3, *, unit: bool = True) -> str:
    """Microseconds per frame: ``5.792 µs/frame``."""
    if _missing(v):
        return NOT_MEASURED
    return _with(f"{v:,.{digits}f}", "µs/frame", unit)


def ms(ns: float | None, digits: int | None = 3, *, unit: bool = True) -> str:
    """Nanoseconds shown in milliseconds: ``80.665 ms`` (``digits=None``: a setting, ``0.1 ms``)."""
    if _missing(ns):
        return NOT_MEASURED
    return _with(_fixed(ns / NS_PER_MS, digits), "ms", unit)  # type: ignore[operator]


def seconds(s: float | None, digits: int = 1, *, unit: bool = True) -> str:
    """Seconds: ``28.1 s``."""
    if _missing(s):
        return NOT_MEASURED
    return _with(f"{s:,.{digits}f}", "s", unit)


def duration(ns: float | None) -> str:
    """A duration in nanoseconds in the unit that reads best, three significant digits at least:
    ``850 ns``, ``12.3 µs``, ``80.7 ms``, ``1.23 s`` (pyperf's format_timedelta); below 100 ns three
    significant digits, ``2.5 ns``, ``0.0001 ns``."""
    if _missing(ns):
        return NOT_MEASURED
    a = abs(ns)  # type: ignore[arg-type]
    for scale, name in ((NS_PER_S, "s"), (NS_PER_MS, "ms"), (NS_PER_US, "µs")):
        if a >= scale:
            return f"{_sig(ns / scale)} {name}"  # type: ignore[operator]
    return f"{ns:,.0f} ns" if a >= 100 else f"{ns:.3g} ns"


def long_span(s: float | None) -> str:
    """A span of seconds that may run to years, in the unit that reads best: ``45.0 s``, ``12.5 min``,
    ``3.2 h``, ``4.0 days``, ``1.98e+05 years`` (estimated run times)."""
    if _missing(s):
        return NOT_MEASURED
    for limit, scale, name in ((120, 1, "s"), (7200, 60, "min"), (2 * 86400, 3600, "h"),
                               (2 * 365 * 86400, 86400, "days")):
        if abs(s) < limit:  # type: ignore[operator]
            return f"{s / scale:,.1f} {name}"  # type: ignore[operator]
    return f"{s / (365 * 86400):,.3g} years"  # type: ignore[operator]


def _sig(x: float) -> str:
    a = abs(x)
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


# --------------------------------------------------------------------------- rates


def fps(v: float | None, *, unit: bool = True) -> str:
    """Frames per second: ``172,650 FPS`` (three significant digits below 100: ``12.3 FPS``)."""
    if _missing(v):
        return NOT_MEASURED
    text = f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"  # type: ignore[arg-type]
    return _with(text, "FPS", unit)


def gbps(v: float | None, *, unit: bool = True) -> str:
    """GB/s (10^9 bytes per second) with two decimals, or three significant digits below 1
    (a 4-byte copy moves 0.004 GB/s)."""
    if _missing(v):
        return NOT_MEASURED
    text = f"{v:,.2f}" if abs(v) >= 1 else f"{v:.3g}"  # type: ignore[arg-type]
    return _with(text, "GB/s", unit)


def hz(v: float | None, *, unit: bool = True) -> str:
    """A rate in Hz with an SI prefix: ``15.0 kHz``, ``1.20 MHz``, ``850 Hz``."""
    if _missing(v):
        return NOT_MEASURED
    for scale, name in ((1e9, "GHz"), (1e6, "MHz"), (1e3, "kHz")):
        if abs(v) >= scale:  # type: ignore[arg-type]
            return _with(_sig(v / scale), name, unit)  # type: ignore[operator]
    return _with(_sig(v), "Hz", unit)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- sizes and counts


def size(n: float | None, *, unit: bool = True) -> str:
    """Bytes in decimal units: ``3.20 GB``, ``320.00 kB``, ``4 B``."""
    if _missing(n):
        return NOT_MEASURED
    for scale, name in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if abs(n) >= scale:  # type: ignore[arg-type]
            return _with(f"{n / scale:,.2f}", name, unit)  # type: ignore[operator]
    return _with(f"{n:,.0f}", "B", unit)


def mib(n: float | None, *, unit: bool = True) -> str:
    """Bytes in MiB, one decimal: ``472.3 MiB`` (memory footprints)."""
    if _missing(n):
        return NOT_MEASURED
    return _with(f"{n / 2**20:,.1f}", "MiB", unit)


def count(n: int | float | None) -> str:
    """A count with thousands separators: ``10,000``."""
    if _missing(n):
        return NOT_MEASURED
    return f"{n:,.0f}"


# --------------------------------------------------------------------------- shares and ratios


def pct(fraction: float | None, digits: int = 1, *, unit: bool = True) -> str:
    """A fraction shown as a percentage: 0.286 → ``28.6 %``."""
    if _missing(fraction):
        return NOT_MEASURED
    return _with(f"{100 * fraction:,.{digits}f}", "%", unit)  # type: ignore[operator]


def pct_of(percent: float | None, digits: int | None = 1, *, unit: bool = True) -> str:
    """A value already in percent: 28.6 → ``28.6 %`` (``digits=None``: a setting or a floor, ``5 %``)."""
    if _missing(percent):
        return NOT_MEASURED
    return _with(_fixed(percent, digits), "%", unit)  # type: ignore[arg-type]


def signed_pct(percent: float | None, digits: int = 2, *, unit: bool = True) -> str:
    """A change in percent with its sign: ``+1.22 %``, ``-8.09 %`` (no decimals from 1000 % on)."""
    if _missing(percent):
        return NOT_MEASURED
    text = f"{percent:+.{digits}f}" if abs(percent) < 1000 else f"{percent:+,.0f}"  # type: ignore[arg-type]
    return _with(text, "%", unit)


def factor(x: float | None, *, unit: bool = True) -> str:
    """A ratio as a factor: ``×3.91`` (no decimals from ×100 on)."""
    if _missing(x):
        return NOT_MEASURED
    text = f"{x:,.2f}" if abs(x) < 100 else f"{x:,.0f}"  # type: ignore[arg-type]
    return f"×{text}" if unit else text


def times(x: float | None, *, unit: bool = True) -> str:
    """A ratio written after the number: ``1.13×`` (slow-downs, speed-ups)."""
    if _missing(x):
        return NOT_MEASURED
    return f"{x:,.2f}×" if unit else f"{x:,.2f}"


def plus_minus(v: float | None, unit_text: str = "") -> str:
    """A noise band or bound in the unit of its metric, given as text (a compared metric's unit): three
    significant digits, whole numbers from 100 on, as FPS are shown: ``±0.0292 µs/frame``, ``±1,540 FPS``."""
    if _missing(v):
        return NOT_MEASURED
    text = f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"  # type: ignore[arg-type]
    return "±" + _with(text, unit_text, True)


# --------------------------------------------------------------------------- metrics by name


def metric_unit(name: str) -> str:
    """The unit of a result metric from its name's suffix: ``*_us`` µs/frame, ``*_fps`` FPS, ``*_gbps``
    GB/s, ``*_pct`` %, ``*_ns`` ns; "" when the name says none."""
    for suffix, unit_text in (("_us", "µs/frame"), ("_fps", "FPS"), ("_gbps", "GB/s"), ("_pct", "%"), ("_ns", "ns")):
        if name.endswith(suffix):
            return unit_text
    return ""


_BY_UNIT: dict[str, Callable[..., str]] = {"µs/frame": us_per_frame, "FPS": fps, "GB/s": gbps, "%": pct_of}


def metric(name: str, v: float | None, *, unit: bool = True) -> str:
    """A result metric's value in the unit its name says (:func:`metric_unit`)."""
    if _missing(v):
        return NOT_MEASURED
    u = metric_unit(name)
    if u == "ns":
        return duration(v) if unit else f"{v:,.0f}"
    f = _BY_UNIT.get(u)
    if f is None:
        return f"{v:.4g}"
    return f(v, unit=unit)
