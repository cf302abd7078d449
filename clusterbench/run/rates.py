"""A program's own figures, read from what it prints (pure).

A program probed as it is (``workload = "exec"``) writes no result record; what it says about its
speed is a line of its output. ``rate = "REGEX"`` names that line: the number is the regex's group
``value``, else its first group, else the whole match. Its unit is ``rate_unit`` when given, else the
word printed right after the number. The last matching line of a run counts (a program that prints a
rate per batch ends with its overall figure). ``kernel_time = "REGEX"`` reads a per-frame kernel time
the same way.

Units, and what each becomes: ``fps``, ``frames/s`` and ``Hz`` are frames per second; ``ms/frame`` and
``us/frame`` (``µs/frame``) become frames per second (1000 / ms, 10⁶ / µs); ``GB/s`` stays GB/s (10⁹
bytes per second): without the bytes of one frame it says nothing about frames.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

from clusterbench.errors import InputError

# canonical unit -> the spellings a program may print (matched case-insensitively)
UNIT_SPELLINGS: dict[str, tuple[str, ...]] = {
    "fps": ("fps", "frames/s", "frames/sec", "frame/s", "hz", "events/s"),
    "GB/s": ("gb/s",),
    "ms/frame": ("ms/frame", "ms/event"),
    "us/frame": ("us/frame", "µs/frame", "μs/frame", "us/event", "µs/event"),
}
RATE_UNITS: tuple[str, ...] = ("fps", "Hz", "GB/s", "ms/frame", "us/frame")  # what --rate-unit takes
TIME_UNITS: tuple[str, ...] = ("ms/frame", "us/frame")  # what --kernel-time's unit may be
_SPELLING = {s: canon for canon, spellings in UNIT_SPELLINGS.items() for s in spellings}
_UNIT_AFTER = re.compile(r"\s*(" + "|".join(sorted(map(re.escape, _SPELLING), key=len, reverse=True)) + r")(?![\w/])",
                         re.IGNORECASE)
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
UNIT_HINT = "give the unit: --rate-unit fps|Hz|GB/s|ms/frame|us/frame (or rate_unit = ... in configs.toml)"


def canonical_unit(text: str) -> str | None:
    """``'frames/s'`` -> ``'fps'``, ``'µs/frame'`` -> ``'us/frame'``, ``'Hz'`` -> ``'fps'``; None when unknown."""
    return _SPELLING.get(text.strip().lower())


def compile_pattern(pattern: str, option: str) -> re.Pattern[str]:
    """A regex for ``option`` (``--rate``, ``--kernel-time``, ``--wall-start`` ...). InputError (exit 2)
    when it does not compile or cannot match anything."""
    if not isinstance(pattern, str) or not pattern:
        raise InputError(f"{option} needs a regular expression, got {pattern!r}",
                         hint=r"e.g. 'rate: ([0-9.]+) frames/s' (Python re syntax; the first group is the number)")
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise InputError(f"{option} {pattern!r} is not a regular expression: {exc}",
                         hint=r"Python re syntax, e.g. 'rate: ([0-9.]+) frames/s'") from None
    if rx.fullmatch(""):
        raise InputError(f"{option} {pattern!r} matches an empty line: it would match every line",
                         hint="anchor it on the words the program prints beside the number")
    return rx


@dataclass(frozen=True, slots=True)
class Reading:
    """One figure a program printed: the number as printed, its unit (canonical), and the line."""

    value: float
    unit: str
    line: str

    @property
    def metric(self) -> str:
        """``fps`` or ``GB/s``: what :attr:`converted` is in."""
        return "GB/s" if self.unit == "GB/s" else "fps"

    @property
    def converted(self) -> float:
        """Frames per second (or GB/s for a GB/s figure)."""
        return convert(self.value, self.unit)

    @property
    def us_per_frame(self) -> float:
        """A time per frame in µs (``ms/frame`` or ``us/frame`` figures)."""
        if self.unit == "ms/frame":
            return self.value * 1000.0
        if self.unit == "us/frame":
            return self.value
        raise ValueError(f"{self.unit} is not a time per frame")

    def to_json(self) -> dict[str, object]:
        return {"value": self.value, "unit": self.unit, "line": self.line}


def convert(value: float, unit: str) -> float:
    """A printed figure in frames per second (GB/s stays GB/s)."""
    if unit in ("fps", "GB/s"):
        return value
    if unit == "ms/frame":
        return 1000.0 / value
    if unit == "us/frame":
        return 1e6 / value
    raise ValueError(f"unknown unit {unit!r}")


def _number_span(m: re.Match[str]) -> tuple[int, int]:
    if "value" in m.re.groupindex and m.group("value") is not None:
        return m.span("value")
    if m.re.groups >= 1 and m.group(1) is not None:
        return m.span(1)
    return m.span(0)


def read_figure(text: str, pattern: re.Pattern[str], unit: str | None = None) -> Reading | None:
    """The last line of ``text`` that ``pattern`` matches, as a :class:`Reading`; None when no line
    matches. ValueError (a message for the user) when the matched text holds no number, the number is not
    > 0, or no unit is given and none follows the number."""
    found = None
    for line in text.splitlines():
        m = pattern.search(line)
        if m is not None:
            found = (line, m)
    if found is None:
        return None
    line, m = found
    a, b = _number_span(m)
    num = _NUMBER.search(line[a:b])
    if num is None:
        raise ValueError(f"the line {line.strip()!r} matches, but its match {line[a:b]!r} holds no number")
    value = float(num.group(0))
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"the line {line.strip()!r} gives {value:g}: a rate or time must be a number > 0")
    canon = canonical_unit(unit) if unit is not None else None
    if unit is not None and canon is None:
        raise ValueError(f"unknown unit {unit!r}")
    if canon is None:
        after = _UNIT_AFTER.match(line, a + num.end())
        if after is None:
            raise ValueError(f"the line {line.strip()!r} prints no unit after {num.group(0)}")
        canon = canonical_unit(after.group(1))
    assert canon is not None
    return Reading(value, canon, line.strip())


def check_unit(unit: str | None, option: str, allowed: Sequence[str] = RATE_UNITS) -> str | None:
    """The canonical unit of ``--rate-unit`` (None stays None); InputError for one not in ``allowed``."""
    if unit is None:
        return None
    canon = canonical_unit(unit)
    if canon is None or canon not in {canonical_unit(u) for u in allowed}:
        raise InputError(f"{option} must be one of {', '.join(allowed)}, got {unit!r}", hint=UNIT_HINT)
    return canon


# --------------------------------------------------------------------------- output markers


def first_after(times: Sequence[float], after: float | None = None) -> float | None:
    """The first time in ``times`` at or after ``after`` (None: the first), or None."""
    for t in times:
        if after is None or t >= after:
            return t
    return None


def wall_between(start_times: Sequence[float], end_times: Sequence[float]) -> float | None:
    """Seconds from the first start marker to the first end marker after it; None when either is missing
    or they coincide."""
    t0 = first_after(start_times)
    if t0 is None:
        return None
    t1 = first_after(end_times, t0)
    if t1 is None or t1 <= t0:
        return None
    return t1 - t0
