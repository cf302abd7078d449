"""Scans: one config over a grid of placeholder values (``--scan NAME=V1,V2,...``), pure.

Each ``--scan`` names a placeholder (a parameter of our finder, e.g. ``streams``, ``batch``) and its
values; several scans make a grid (every combination). Each point is its own config, labelled
``<label>.<name><value>[.<name><value>...]`` (e.g. ``multi_kernel.streams4``), so that its row, trace
and logs are its own. A scan must reach the program: our CuPy finder takes every parameter; a command
(or exec) workload only those its command uses (``{name}``, or for a protocol command
``{params_json}``). A scan of a placeholder the command lacks is refused: it would probe one program N
times under N labels.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from clusterbench.errors import ConfigError, InputError
from clusterbench.model import units as U
from clusterbench.model.params import FIELD_NAMES, WorkloadParams
from clusterbench.model.results import ResultRow
from clusterbench.model.untraced import RESOURCES
from clusterbench.run.config import ProbeConfig
from clusterbench.workloads.protocol import template_fields

SCAN_HINT = "write --scan NAME=V1,V2,... with NAME a placeholder, e.g. --scan streams=1,2,4 --scan batch=200,2000"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_POINTS = 1000
# A point "beats" a bound when its sustained FPS is above it by more than this (or its runs' spread): the
# probe's own floor for a figure above its roofline (run/above.py ROOFLINE_EXCESS).
ABOVE_NOISE = 0.02


@dataclass(frozen=True, slots=True)
class Scan:
    """One placeholder and the values it takes, as given."""

    name: str
    values: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "values": list(self.values)}


def parse_scan(text: str) -> Scan:
    """``NAME=V1,V2,...`` -> Scan; InputError (exit 2) naming what is wrong."""
    name, sep, rest = str(text).partition("=")
    name = name.strip()
    if not sep or not name:
        raise InputError(f"--scan {text!r}: expected NAME=V1,V2,...", hint=SCAN_HINT)
    if name not in FIELD_NAMES:
        import difflib

        close = difflib.get_close_matches(name, FIELD_NAMES, n=1, cutoff=0.6)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        raise InputError(f"--scan {text!r}: {name!r} is not a placeholder{guess}; one of {', '.join(FIELD_NAMES)}",
                         hint=SCAN_HINT)
    values = tuple(v.strip() for v in rest.split(","))
    if not values or any(not v for v in values):
        raise InputError(f"--scan {text!r}: every value must be non-empty", hint=SCAN_HINT)
    if len(set(values)) != len(values):
        dup = next(v for v in values if values.count(v) > 1)
        raise InputError(f"--scan {text!r}: {dup!r} is given twice", hint=SCAN_HINT)
    return Scan(name, values)


def parse_scans(texts: Sequence[str]) -> tuple[Scan, ...]:
    scans = tuple(parse_scan(t) for t in texts)
    names = [s.name for s in scans]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise InputError(f"--scan {dup} is given twice", hint="give each placeholder's values in one --scan")
    points = 1
    for s in scans:
        points *= len(s.values)
    if points > MAX_POINTS:
        raise InputError(f"the scans make {points:,} points per config, more than {MAX_POINTS:,}",
                         hint="scan fewer values")
    return scans


def _typed(name: str, text: str) -> Any:
    """A scan value as its parameter's type (int, float or text)."""
    default = WorkloadParams.__dataclass_fields__[name].default
    if isinstance(default, bool) or default is None or isinstance(default, str):
        return text
    try:
        return int(text) if isinstance(default, int) else float(text)
    except ValueError:
        kind = "an integer" if isinstance(default, int) else "a number"
        raise InputError(f"--scan {name}: {text!r} is not {kind}", hint=SCAN_HINT) from None


def reaches(cfg: ProbeConfig, name: str) -> bool:
    """Does ``cfg``'s program get placeholder ``name``? Our finder gets every parameter; a command only
    the placeholders it uses (a protocol command also through ``{params_json}``)."""
    if cfg.workload.command is None:
        return True  # the CuPy finder: its template passes {params_json}
    used = {f for arg in cfg.workload.command for f in template_fields(arg)}
    return name in used or (cfg.exec is None and "params_json" in used)


def point_label(label: str, point: Sequence[tuple[str, str]]) -> str:
    return ".".join([label, *(f"{name}{_SAFE.sub('-', value)}" for name, value in point)])


def expand(configs: Sequence[ProbeConfig], scans: Sequence[Scan]) -> tuple[ProbeConfig, ...]:
    """Every config at every point of the grid, in config order then grid order; ConfigError (exit 2)
    for a placeholder a config's command does not use, or a value its parameters refuse."""
    if not scans:
        return tuple(configs)
    out: list[ProbeConfig] = []
    for cfg in configs:
        for s in scans:
            if not reaches(cfg, s.name):
                raise ConfigError(
                    f"--scan {s.name}: config {cfg.label!r} runs {' '.join(cfg.workload.command or ())!r}, which never "
                    f"uses {{{s.name}}}: each point would run the same program",
                    hint=f"put {{{s.name}}} in the command where the program takes it, or drop the scan")
        for combo in itertools.product(*[[(s.name, v) for v in s.values] for s in scans]):
            label = point_label(cfg.label, combo)
            values = {name: _typed(name, v) for name, v in combo}
            try:
                if cfg.exec is not None:
                    spec = cfg.exec
                    frames = values.pop("frames", spec.frames)
                    spec = dataclasses.replace(spec, values={**spec.values, **values}, frames=frames)
                    out.append(dataclasses.replace(cfg, label=label, exec=spec, scanned_from=cfg.label, point=combo))
                else:
                    assert cfg.params is not None
                    params = cfg.params.replace(**values)
                    if "frames" in values and "batch" not in values:
                        params = params.replace(batch=min(params.batch, params.frames))
                    out.append(dataclasses.replace(cfg, label=label, params=params, scanned_from=cfg.label,
                                                   point=combo))
            except ConfigError as exc:
                raise ConfigError(f"--scan: config {cfg.label!r} at {', '.join(f'{n}={v}' for n, v in combo)}: {exc}",
                                  hint=exc.hint) from None
    labels = [c.label for c in out]
    dup = next((x for x in labels if labels.count(x) > 1), None)
    if dup is not None:
        raise ConfigError(f"--scan: two points are both labelled {dup!r}", hint="scan values that differ in letters "
                          "or digits, not only in other characters")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ScanPoint:
    """One point of a scan as the summary shows it: its values, its sustained FPS (and where from), the
    roofline (the tallest bar: what streams that overlap pay) and the one-stream bound (the sum of the
    bars: what engines that take turns pay), both in FPS, and the engine that binds; or why it failed."""

    config: str
    label: str
    values: tuple[tuple[str, str], ...]
    sustained_fps: float | None
    source: str | None
    roofline_fps: float | None
    serial_fps: float | None
    binds: str | None
    error: str | None = None
    note: str | None = None  # why the sustained FPS stands above a roofline (the row's roofline_note)
    spread: float = 0.0  # the sustained runs' half range over their median
    # probe --what-binds: what binds by the delay test without the profiler, and the slope of each resource
    # (in RESOURCES' order, host, gpu, link: frame µs per µs of delay; None where not tested)
    delay_binds: str | None = None
    delay_slopes: tuple[float | None, float | None, float | None] = (None, None, None)
    # the same delays replayed on the trace (analyzers.replay): what binds by it, and each slope
    trace_binds: str | None = None
    trace_slopes: tuple[float | None, float | None, float | None] = (None, None, None)
    # where the two name other resources: whether every replayed slope lies within the test's spread
    # (analyzers.untraced.within_spread; None where not judged)
    within_spread: bool | None = None

    @property
    def agree(self) -> bool | None:
        """Whether the delay test and the trace replayed name the same binding resources (None: one is missing)."""
        if self.delay_binds is None or self.trace_binds is None:
            return None
        return self.delay_binds == self.trace_binds

    @property
    def above_both(self) -> bool:
        """The sustained FPS beats both bounds beyond the noise (ABOVE_NOISE, or the runs' spread)."""
        if not (self.sustained_fps and self.roofline_fps and self.serial_fps):
            return False
        noise = max(ABOVE_NOISE, self.spread)
        return self.sustained_fps > max(self.roofline_fps, self.serial_fps) * (1 + noise)

    @property
    def nearer(self) -> str | None:
        """``roofline`` or ``sum``: the bound the sustained FPS is nearer (by ratio); ``above both`` when it beats
        both beyond the noise (then :attr:`note` says why); None when unknown."""
        import math

        if not (self.sustained_fps and self.roofline_fps and self.serial_fps):
            return None
        if self.above_both:
            return "above both"
        to_roof = abs(math.log(self.sustained_fps / self.roofline_fps))
        to_sum = abs(math.log(self.sustained_fps / self.serial_fps))
        return "roofline" if to_roof <= to_sum else "sum"

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config, "label": self.label, "values": dict(self.values),
                "sustained_fps": self.sustained_fps, "sustained_source": self.source,
                "roofline_fps": self.roofline_fps, "serial_fps": self.serial_fps, "binds": self.binds,
                "nearer": self.nearer, "note": self.note, "error": self.error, "delay_binds": self.delay_binds,
                "delay_slopes": dict(zip(RESOURCES, self.delay_slopes)), "trace_binds": self.trace_binds,
                "trace_slopes": dict(zip(RESOURCES, self.trace_slopes)), "agree": self.agree,
                "within_spread": self.within_spread}


def scan_points(rows: Sequence[ResultRow], configs: Sequence[ProbeConfig],
                untraced: Mapping[str, Any] | None = None) -> tuple[ScanPoint, ...]:
    """The points of the scanned configs, in plan order, from their plain rows and (``untraced``: per config
    label, its model.untraced.UntracedRecord) the delay test replayed on each trace (pure)."""
    by_label = {r.key.config: r for r in rows if r.key.gpu is None and r.key.role is None}
    out = []
    for c in configs:
        if c.scanned_from is None or c.label not in by_label:
            continue
        r = by_label[c.label]
        # like with like: an untraced FPS against the roofline without the profiler (the host bar estimated
        # untraced), and against the bars added up, which can be no faster than the tallest of them
        roof_us = r.roofline_untraced_us or r.roofline_us
        serial_us = max(r.serial_us, roof_us or 0.0) if r.serial_us else None
        m = next((m for m in r.measurements if m.metric == "sustained_fps"), None)
        spread = m.spread / m.median if m is not None and len(m.samples) > 1 else 0.0
        note = r.roofline_note
        point = ScanPoint(c.scanned_from, c.label, c.point, r.sustained_fps, r.sustained_source,
                          U.fps_of_us(roof_us) or r.roofline_fps, U.fps_of_us(serial_us),
                          r.binds, r.error, note, spread, r.delay_binds,
                          (r.delay_slope_host, r.delay_slope_gpu, r.delay_slope_link))
        record = (untraced or {}).get(c.label)
        if record is not None and record.replay:
            from clusterbench.analyzers.untraced import binds_code, within_spread  # numpy only where used

            by = {s.resource: s.slope for s in record.replay}
            point = dataclasses.replace(point, trace_binds=binds_code(record.replay),
                                        trace_slopes=tuple(by.get(r) for r in RESOURCES),  # type: ignore[arg-type]
                                        within_spread=None if record.delay is None
                                        else within_spread(record.delay.slopes, record.replay))
        if point.above_both and note is None:
            note = ("faster than both bounds, though no roofline note was made: a bar of the trace overstates its "
                    "cost (the traced pass ran slower than the untraced runs)")
            point = dataclasses.replace(point, note=note)
        out.append(point)
    return tuple(out)
