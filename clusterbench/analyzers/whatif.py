"""What-if: the per-engine bars and the roofline as if one engine were faster or slower (pure).

``--what-if kernel=0.5`` scales the kernel's busy time by 0.5; ``--what-if h2d_gbps=375`` sets
the h2d bar to its bytes over 375 GB/s; ``--what-if host=0.5`` halves the busiest launching
thread's bar (its busy time: host code and CUDA calls, waits left out). The simplification is
stated with every result: the engines scale independently, and the overlap between them is kept as
it is, so the roofline is still the tallest bar (HTA's critical-path what-if makes the same cut at
the level of engines).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from clusterbench.analyzers.records import GroupAnalysis
from clusterbench.errors import InputError
from clusterbench.io.nsys import schema as S
from clusterbench.model import units as U

ASSUMPTION = (
    "engines scale independently and their overlap is kept, so the tallest bar still binds; "
    "dependencies between engines are not modelled"
)
HOST = "host"  # the busiest launching thread's bar
_SPEC_HINT = (
    "use ENGINE=FACTOR (e.g. kernel=0.5: the kernel takes half its time; host=0.5: the busiest launching thread "
    "takes half its time) or COPY_gbps=RATE (e.g. h2d_gbps=375: h2d moves its bytes at 375 GB/s); engines: "
    + ", ".join(S.ENGINES) + ", " + HOST
)


@dataclass(frozen=True, slots=True)
class Change:
    engine: str
    factor: float | None = None  # busy time times this
    gbps: float | None = None  # busy time = bytes / this rate

    def describe(self) -> str:
        if self.gbps is not None:
            return f"{self.engine} at {self.gbps:g} GB/s"
        return f"{self.engine} ×{self.factor:g}"

    def to_json(self) -> dict:
        return {"engine": self.engine, "factor": self.factor, "gbps": self.gbps}


@dataclass(frozen=True, slots=True)
class Bar:
    engine: str
    busy_ns: int  # as measured
    new_busy_ns: int  # as if changed
    us_per_frame: float | None
    new_us_per_frame: float | None
    changed: bool

    def to_json(self) -> dict:
        return {
            "busy_ns": self.busy_ns,
            "new_busy_ns": self.new_busy_ns,
            "us_per_frame": self.us_per_frame,
            "new_us_per_frame": self.new_us_per_frame,
            "changed": self.changed,
        }


@dataclass(frozen=True, slots=True)
class WhatIf:
    changes: tuple[Change, ...]
    bars: tuple[Bar, ...]
    engine: str | None  # the engine that would bind
    busy_ns: int
    us_per_frame: float | None
    fps: float | None
    was_engine: str | None  # the engine that binds now
    was_fps: float | None
    assumption: str = ASSUMPTION
    notes: tuple[str, ...] = ()  # changes that do nothing on this trace, and why

    def summary(self) -> str:
        what = ", ".join(c.describe() for c in self.changes)
        if self.engine is None:
            return f"what if {what}: nothing would bind (no GPU activity)"
        if self.us_per_frame is not None and self.fps is not None:
            at = f"{U.us_per_frame(self.us_per_frame)} → {U.fps(self.fps)}"
        else:
            at = f"{U.ms(self.busy_ns)} busy"
        now = f"now {self.was_engine}" + (f" at {U.fps(self.was_fps)}" if self.was_fps else "")
        return f"what if {what}: would bind on {self.engine} at {at} ({now})"

    def to_json(self) -> dict:
        return {
            "changes": [c.to_json() for c in self.changes],
            "engines": {b.engine: b.to_json() for b in self.bars},
            "roofline": {"engine": self.engine, "busy_ns": self.busy_ns, "us_per_frame": self.us_per_frame, "fps": self.fps},
            "was": {"engine": self.was_engine, "fps": self.was_fps},
            "summary": self.summary(),
            "assumption": self.assumption,
            "notes": list(self.notes),
        }


def parse_changes(specs: list[str] | tuple[str, ...]) -> tuple[Change, ...]:
    """Parse ``--what-if`` values; raise InputError on a bad one."""
    out: list[Change] = []
    seen: set[str] = set()
    for spec in specs:
        key, sep, value = spec.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise InputError(f"--what-if {spec!r} is not NAME=VALUE", hint=_SPEC_HINT)
        try:
            number = float(value)
        except ValueError:
            raise InputError(f"--what-if {spec!r}: {value.strip()!r} is not a number", hint=_SPEC_HINT) from None
        if not math.isfinite(number) or number <= 0:
            raise InputError(f"--what-if {spec!r}: the value must be a positive number, got {value.strip()}", hint=_SPEC_HINT)
        if key.endswith("_gbps"):
            engine = key[: -len("_gbps")]
            if engine not in S.COPY_ENGINES:
                raise InputError(
                    f"--what-if {spec!r}: a rate needs a copy engine, not {engine!r}",
                    hint="copy engines: " + ", ".join(e for e in S.ENGINES if e in S.COPY_ENGINES),
                )
            change = Change(engine, gbps=number)
        else:
            engine = key
            if engine not in S.ENGINES and engine != HOST:
                raise InputError(f"--what-if {spec!r}: unknown engine {engine!r}", hint=_SPEC_HINT)
            change = Change(engine, factor=number)
        if engine in seen:
            raise InputError(f"--what-if names {engine} twice", hint="give one change per engine")
        seen.add(engine)
        out.append(change)
    return tuple(out)


def what_if(g: GroupAnalysis, changes: tuple[Change, ...]) -> WhatIf:
    """The bars and the roofline of ``g`` with ``changes`` applied (engines in display order, then
    the busiest launching thread as ``host``)."""
    by_engine = {c.engine: c for c in changes}
    frames = g.frames.count
    measured = [(name, st.busy_ns, st.us_per_frame, st.bytes) for name, st in g.busy.engines.items()]
    busiest = g.host.busiest
    if busiest is not None:
        measured.append((HOST, busiest.busy_ns, busiest.us_per_frame, None))
    bars: list[Bar] = []
    for name, busy_ns, us, nbytes in measured:
        c = by_engine.get(name)
        new = busy_ns
        if c is not None and c.factor is not None:
            new = int(round(busy_ns * c.factor))
        elif c is not None and c.gbps is not None:
            new = int(round((nbytes or 0) / c.gbps))  # GB/s = bytes per ns
        bars.append(Bar(engine=name, busy_ns=busy_ns, new_busy_ns=new, us_per_frame=us,
                        new_us_per_frame=U.us_per_frame_of(new, frames), changed=c is not None))  # fmt: skip
    notes = []
    have = {b.engine: b for b in bars}
    for c in changes:
        b = have.get(c.engine)
        if b is None or b.busy_ns == 0:
            what = "no launching thread in the window" if c.engine == HOST else "no busy time in the window"
            why = f"{c.engine} has {what}, so {c.describe()} changes nothing"
            if c.engine == "kernel" and "graph" in g.busy.engines:
                why += " (its kernels run inside CUDA graphs here: try graph=FACTOR)"
            notes.append(why)
    top, top_busy = None, 0
    for b in bars:  # ties go to the earlier engine, as in the roofline
        if b.new_busy_ns > top_busy:
            top, top_busy = b.engine, b.new_busy_ns
    us_per_frame = U.us_per_frame_of(top_busy, frames) if top else None
    return WhatIf(
        changes=changes,
        bars=tuple(bars),
        engine=top,
        busy_ns=top_busy,
        us_per_frame=us_per_frame,
        fps=U.fps_of_us(us_per_frame),
        was_engine=g.roofline.engine,
        was_fps=g.roofline.fps,
        notes=tuple(notes),
    )
