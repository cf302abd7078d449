"""A program's own figures, read from what it prints (pure).

A program probed as it is (``workload = "exec"``) writes no result record; what it says about its
speed is a line of its output. ``rate = "REGEX"`` names that line: the number is the regex's group
``value``, else its first group, else the whole match. Its unit is ``rate_unit`` when given, else the
word printed right after the number. The last matching line of a run counts (a program that prints a
rate per batch ends with its overall figure). ``kernel_time = "REGEX"`` reads a per-frame kernel time
the same way.

Units (:data:`UNITS`), and what each becomes in a row: frame rates (``fps``, ``frames/s``,
``events/s``, ``Hz``, each with a ``k`` or ``M`` prefix: ``kfps``, ``k frames/s``, ``kHz``, ``MHz``)
are frames per second (71.87 kHz is 71,870 FPS); byte rates (``B/s``, ``kB/s``, ``MB/s``, ``GB/s``,
``TB/s``, ``KiB/s``, ``MiB/s``, ``GiB/s``) become GB/s (10⁹ bytes per second: 1 GiB/s is 1.073741824
GB/s); without the bytes of one frame they say nothing about frames. Times per frame (``ms/frame``,
``us/frame``, ``µs/frame``) become frames per second (1000 / ms, 10⁶ / µs). The prefix's case counts
(``M`` is mega, a lowercase ``m`` would be milli: not a rate probe knows), and so does the byte's
(``B``; ``Gb/s`` is gigabits); the word after it does not (``FPS``, ``hz``, ``Frames/s``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

from clusterbench.errors import InputError
from clusterbench.model import units

FPS, GBPS, TIME = "fps", "GB/s", "time"  # what a unit measures: frames per second, bytes per second, time per frame


@dataclass(frozen=True, slots=True)
class RateUnit:
    """A unit a program may print its figure in: its canonical ``name``, what it measures (``kind``: FPS,
    GBPS or TIME) and ``factor``: a frame or byte rate times it is frames per second or GB/s; a time per
    frame times it is µs per frame."""

    name: str
    kind: str
    factor: float

    @property
    def metric(self) -> str:
        """``fps`` or ``GB/s``: what a figure in this unit becomes (a time per frame becomes FPS)."""
        return GBPS if self.kind == GBPS else FPS

    def convert(self, value: float) -> float:
        """A figure in this unit in frames per second (a byte rate: in GB/s)."""
        if self.kind == TIME:
            return 1e6 / (value * self.factor)
        return value * self.factor

    def conversion(self, value: float) -> str:
        """How a figure was converted, in words: ``71.87 kHz = 71,870 FPS``; empty where nothing changed."""
        if self.kind != TIME and self.factor == 1:
            return ""
        converted = self.convert(value)
        shown = units.gbps(converted) if self.kind == GBPS else units.fps(converted)
        how = f"10⁶ / {value * self.factor:g} µs" if self.kind == TIME else f"× {self.factor:g}"
        return f"{value:g} {self.name} = {shown} ({how})"


_PREFIXES = (("", 1.0), ("k", 1e3), ("M", 1e6))
_FRAME_WORDS = ("fps", "frames/s", "events/s", "Hz")
_BYTE_UNITS = (("B/s", 1e-9), ("kB/s", 1e-6), ("MB/s", 1e-3), ("GB/s", 1.0), ("TB/s", 1e3),
               ("KiB/s", 2**10 / 1e9), ("MiB/s", 2**20 / 1e9), ("GiB/s", 2**30 / 1e9))


def _frame_name(prefix: str, word: str) -> str:
    return f"{prefix} {word}" if prefix and "/" in word else prefix + word  # "k frames/s", "kfps", "kHz"


# Every unit probe knows, by canonical name (the order --help and messages list them in).
UNITS: dict[str, RateUnit] = {
    **{_frame_name(p, w): RateUnit(_frame_name(p, w), FPS, f) for w in _FRAME_WORDS for p, f in _PREFIXES},
    **{n: RateUnit(n, GBPS, f) for n, f in _BYTE_UNITS},
    "ms/frame": RateUnit("ms/frame", TIME, 1000.0),
    "us/frame": RateUnit("us/frame", TIME, 1.0),
}
TIME_UNITS: tuple[str, ...] = ("ms/frame", "us/frame")  # what --kernel-time's unit may be
RATE_UNITS: tuple[str, ...] = tuple(UNITS)  # what --rate-unit takes
KNOWN_UNITS_TEXT = ("fps, frames/s, events/s or Hz with an optional k or M prefix (kfps, k frames/s, kHz, MHz); "
                    "B/s, kB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s; ms/frame, us/frame")
UNIT_HINT = ("give the unit: --rate-unit UNIT (or rate_unit = \"UNIT\" in configs.toml), UNIT one of "
             + KNOWN_UNITS_TEXT)

# The spellings after a number. A frame rate: an optional prefix (k, K or M), an optional space, and a word
# in any case (fps, frames/s, frames/sec, frame/s, events/s, event/s, Hz). A byte rate: the prefix as
# written (k, K, M, G, T, with i for binary) and B/s, B/sec. A time: ms or us/µs per frame or event.
_FRAME_RX = (r"(?P<fp>[kKM]?)(?P<fsp> ?)(?P<fw>(?i:fps|frames?/s(?:ec)?|events?/s(?:ec)?|hz))")
_BYTE_RX = r"(?P<bp>[kKMGT]i?|)B/s(?:ec)?"
_TIME_RX = r"(?P<tp>(?i:ms|us|µs|μs))/(?i:frame|event)"
_UNIT_RX = re.compile(rf"(?:{_FRAME_RX}|{_BYTE_RX}|{_TIME_RX})(?![\w/])")
_WORD_AFTER = re.compile(r"\s*([^\s,;:()\[\]]+)")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _from_match(m: re.Match[str]) -> RateUnit | None:
    if m.group("fw") is not None:
        word = m.group("fw").lower()
        base = ("Hz" if word == "hz" else "fps" if word == "fps" else "events/s" if word.startswith("event")
                else "frames/s")
        prefix = {"K": "k"}.get(m.group("fp"), m.group("fp"))
        if m.group("fsp") and not prefix:
            return None
        return UNITS.get(_frame_name(prefix, base))
    if m.group("tp") is not None:
        return UNITS["ms/frame" if m.group("tp").lower() == "ms" else "us/frame"]
    prefix = m.group("bp")
    prefix = {"K": "k", "k": "k", "Ki": "Ki", "ki": "Ki"}.get(prefix, prefix)
    return UNITS.get(f"{prefix}B/s")


def parse_unit(text: str) -> RateUnit | None:
    """The unit a spelling names: ``'kHz'``, ``'k frames/s'``, ``'FPS'``, ``'GiB/s'``, ``'µs/frame'``; None
    when probe does not know it."""
    m = _UNIT_RX.fullmatch(text.strip())
    return None if m is None else _from_match(m)


def canonical_unit(text: str) -> str | None:
    """``'frames/sec'`` -> ``'frames/s'``, ``'µs/frame'`` -> ``'us/frame'``, ``'KHz'`` -> ``'kHz'``; None when
    unknown."""
    unit = parse_unit(text)
    return None if unit is None else unit.name


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
    """One figure a program printed: the number as printed, its unit (a canonical name of :data:`UNITS`),
    and the line."""

    value: float
    unit: str
    line: str

    @property
    def rate_unit(self) -> RateUnit:
        return UNITS[self.unit]

    @property
    def metric(self) -> str:
        """``fps`` or ``GB/s``: what :attr:`converted` is in."""
        return self.rate_unit.metric

    @property
    def converted(self) -> float:
        """Frames per second (or GB/s for a byte rate)."""
        return self.rate_unit.convert(self.value)

    @property
    def conversion(self) -> str:
        """How the printed figure became the row's (``71.87 kHz = 71,870 FPS (× 1000)``); empty when it is
        the same number in the same unit."""
        return self.rate_unit.conversion(self.value)

    @property
    def us_per_frame(self) -> float:
        """A time per frame in µs (``ms/frame`` or ``us/frame`` figures)."""
        unit = self.rate_unit
        if unit.kind != TIME:
            raise ValueError(f"{self.unit} is not a time per frame")
        return self.value * unit.factor

    def to_json(self) -> dict[str, object]:
        return {"value": self.value, "unit": self.unit, "line": self.line, "converted": self.converted,
                "metric": self.metric, "conversion": self.conversion or None}


def convert(value: float, unit: str) -> float:
    """A printed figure in frames per second (a byte rate in GB/s). ValueError for an unknown unit."""
    u = parse_unit(unit)
    if u is None:
        raise ValueError(f"unknown unit {unit!r}")
    return u.convert(value)


def _number_span(m: re.Match[str]) -> tuple[int, int]:
    if "value" in m.re.groupindex and m.group("value") is not None:
        return m.span("value")
    if m.re.groups >= 1 and m.group(1) is not None:
        return m.span(1)
    return m.span(0)


def read_figure(text: str, pattern: re.Pattern[str], unit: str | None = None) -> Reading | None:
    """The last line of ``text`` that ``pattern`` matches, as a :class:`Reading`; None when no line
    matches. ValueError (a message for the user) when the matched text holds no number, the number is not
    > 0, the given unit is unknown, or no unit is given and the number is followed by none, or by a word
    that is not a unit probe knows."""
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
    if unit is not None:
        given = parse_unit(unit)
        if given is None:
            raise ValueError(f"unknown unit {unit!r}; known: {KNOWN_UNITS_TEXT}")
        return Reading(value, given.name, line.strip())
    at = a + num.end()
    after = re.compile(r"\s*").match(line, at)
    start = after.end() if after is not None else at
    m_unit = _UNIT_RX.match(line, start)
    found_unit = _from_match(m_unit) if m_unit is not None else None
    if found_unit is None:
        word = _WORD_AFTER.match(line, at)
        if word is None or not re.match(r"[^\W\d_]|[µμ]", word.group(1)):
            raise ValueError(f"the line {line.strip()!r} prints no unit after {num.group(0)}: give it with "
                             "--rate-unit UNIT (rate_unit = in configs.toml)")
        raise ValueError(f"the line {line.strip()!r} prints {word.group(1)!r} after {num.group(0)}, a unit probe "
                         f"does not know (it knows {KNOWN_UNITS_TEXT}): give the number's unit with --rate-unit "
                         "UNIT (rate_unit = in configs.toml)")
    return Reading(value, found_unit.name, line.strip())


def check_unit(unit: str | None, option: str, allowed: Sequence[str] = RATE_UNITS) -> str | None:
    """The canonical unit of ``--rate-unit`` (None stays None); InputError for one not in ``allowed``."""
    if unit is None:
        return None
    canon = canonical_unit(unit) if isinstance(unit, str) else None
    if canon is None or canon not in allowed:
        known = KNOWN_UNITS_TEXT if tuple(allowed) == RATE_UNITS else ", ".join(allowed)
        raise InputError(f"{option} must be one of {known}; got {unit!r}",
                         hint=UNIT_HINT if tuple(allowed) == RATE_UNITS else f"use {option} {allowed[0]}")
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
