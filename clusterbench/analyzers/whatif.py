"""What-if: the frame time as if one engine, or the host, were faster or slower (pure), two ways.

``--what-if kernel=0.5`` (or ``kernel=0.5x``) scales the kernel's busy time by 0.5; ``--what-if
h2d_gbps=375`` sets the h2d bar to its bytes over 375 GB/s; ``--what-if host=0.5`` halves the launching
threads' work (host code and CUDA calls; waits and blocked time left out).

- **by the tallest bar**: the bars scale independently and their overlap is kept, so the roofline is
  still the tallest bar. Right where the resources overlap.
- **along the critical path**: scaling resource X by f changes the path's length by (1 - f) times X's
  time on it (the set-up gaps left out), the rest of the path kept as it is: the frame time is at least
  that (another chain may become the longest). Right where the resources take turns.

Both are floors under the new frame time; which one applies follows the one verdict (analyzers.verdict):
the tallest bar where the resources overlap, the path where they take turns, both in between.
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
PATH_ASSUMPTION = (
    "along the critical path the other parts stay as they are, so the frame time is at least the path less what "
    "the change saves; another chain may then be the longest"
)
HOST = "host"  # the launching threads' work (the busiest thread's is the host bar)
_SPEC_HINT = (
    "use ENGINE=FACTOR (e.g. kernel=0.5 or kernel=0.5x: the kernel takes half its time; host=0.5: the launching "
    "threads' work takes half its time) or COPY_gbps=RATE (e.g. h2d_gbps=375: h2d moves its bytes at 375 GB/s); "
    "factors from 0.001 to 1000, rates from 0.001 to 10,000 GB/s; engines: " + ", ".join(S.ENGINES) + ", " + HOST
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
class PathChange:
    """One change along the critical path: the resource's time on the path (set-up gaps left out), the
    factor it scales by, and what that saves (negative: costs)."""

    resource: str
    path_ns: int
    factor: float
    saved_ns: int

    def to_json(self) -> dict:
        return {"resource": self.resource, "path_ns": self.path_ns, "factor": self.factor, "saved_ns": self.saved_ns}


@dataclass(frozen=True, slots=True)
class PathWhatIf:
    """The frame time along the critical path with the changes applied."""

    loop_ns: int  # the path's length, set-up gaps left out (the loop)
    new_loop_ns: int
    changes: tuple[PathChange, ...]
    frames: int | None

    @property
    def us_per_frame(self) -> float | None:
        return U.us_per_frame_of(self.loop_ns, self.frames)

    @property
    def new_us_per_frame(self) -> float | None:
        return U.us_per_frame_of(self.new_loop_ns, self.frames)

    @property
    def fps(self) -> float | None:
        return U.fps_of_us(self.new_us_per_frame)

    def to_json(self) -> dict:
        return {"loop_ns": self.loop_ns, "new_loop_ns": self.new_loop_ns, "us_per_frame": self.us_per_frame,
                "new_us_per_frame": self.new_us_per_frame, "fps": self.fps, "changes": [c.to_json() for c in self.changes],
                "assumption": PATH_ASSUMPTION}  # fmt: skip


_APPLIES = {
    "tallest_bar": "the tallest bar applies: the resources overlap",
    "critical_path": "the critical path applies: the resources take turns",
    "both": "both are floors: the resources partly overlap, so the frame time is at least the larger",
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
    path: PathWhatIf | None = None  # along the critical path (None without one)
    applies: str | None = None  # "tallest_bar", "critical_path" or "both" (the one verdict's view)

    @property
    def floor_us_per_frame(self) -> float | None:
        """The new frame time is at least this: the larger of the two estimates (each is a floor)."""
        vals = [v for v in (self.us_per_frame, self.path.new_us_per_frame if self.path else None) if v is not None]
        return max(vals) if vals else None

    @property
    def estimate_us_per_frame(self) -> float | None:
        """The estimate that applies: the tallest bar's, the path's, or (both) the larger."""
        if self.applies == "critical_path" and self.path is not None:
            return self.path.new_us_per_frame
        if self.applies == "both":
            return self.floor_us_per_frame
        return self.us_per_frame

    def path_summary(self) -> str | None:
        p = self.path
        if p is None:
            return None
        def amount(ns: int) -> str:
            return U.us_per_frame(U.us_per_frame_of(ns, p.frames)) if p.frames else U.duration(ns)

        parts = "; ".join(
            f"{c.resource} holds {amount(c.path_ns)} of it, ×{c.factor:.3g} "
            + (f"saves {amount(c.saved_ns)}" if c.saved_ns >= 0 else f"adds {amount(-c.saved_ns)}")
            for c in p.changes
        )
        if p.frames:
            at = f"at least {U.us_per_frame(p.new_us_per_frame)} (now {U.us_per_frame(p.us_per_frame)}) → {U.fps(p.fps)}"
        else:
            at = f"at least {U.ms(p.new_loop_ns)} (now {U.ms(p.loop_ns)})"
        text = f"along the critical path: {at}" + (f" ({parts})" if parts else "")
        if self.applies:
            text += f"; {_APPLIES[self.applies]}"
        return text

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
            "path": None if self.path is None else self.path.to_json(),
            "path_summary": self.path_summary(),
            "applies": self.applies,
            "estimate_us_per_frame": self.estimate_us_per_frame,
            "floor_us_per_frame": self.floor_us_per_frame,
        }


# The --what-if values that mean something: a factor from 1/1000 to 1000 (an engine 1000 times faster or
# slower), a copy rate from 0.001 GB/s to 10,000 GB/s (beyond any link or memory). Outside them the
# arithmetic runs away (1e308 overflows to infinity) and the answer means nothing.
FACTOR_RANGE = (1e-3, 1e3)
RATE_RANGE_GBPS = (1e-3, 1e4)


def parse_changes(specs: list[str] | tuple[str, ...]) -> tuple[Change, ...]:
    """Parse ``--what-if`` values; raise InputError on a bad one."""
    out: list[Change] = []
    seen: set[str] = set()
    for spec in specs:
        key, sep, value = spec.partition("=")
        key = key.strip()
        value = value.strip()
        if value[-1:] in ("x", "×", "X") and not key.endswith("_gbps"):  # kernel=0.5x: a factor
            value = value[:-1]
        if not sep or not key or not value.strip():
            raise InputError(f"--what-if {spec!r} is not NAME=VALUE", hint=_SPEC_HINT)
        try:
            number = float(value)
        except ValueError:
            raise InputError(f"--what-if {spec!r}: {value.strip()!r} is not a number", hint=_SPEC_HINT) from None
        if not math.isfinite(number) or number <= 0:
            raise InputError(f"--what-if {spec!r}: the value must be a positive number, got {value.strip()}", hint=_SPEC_HINT)
        lo, hi, what = (*RATE_RANGE_GBPS, "the rate (GB/s)") if key.endswith("_gbps") else (*FACTOR_RANGE, "the factor")
        if not lo <= number <= hi:
            raise InputError(f"--what-if {spec!r}: {what} must be from {lo:,g} to {hi:,g}, got {value.strip()}",
                             hint=_SPEC_HINT)
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
        measured.append((HOST, busiest.work_ns, busiest.work_us_per_frame, None))
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
    path = _along_path(g, changes, {b.engine: b for b in bars})
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
        path=path,
        applies=g.binding.view if (g.binding is not None and path is not None) else None,
    )


def _along_path(g: GroupAnalysis, changes: tuple[Change, ...], bars: dict[str, Bar]) -> PathWhatIf | None:
    """The path's length with each changed resource's time on it scaled (its factor, or for a rate the
    ratio of its new bar to its bar)."""
    cp = g.critical_path
    if cp is None or g.work_not_traced is not None:
        return None
    out = []
    for c in changes:
        f = c.factor
        if f is None:
            b = bars.get(c.engine)
            f = (b.new_busy_ns / b.busy_ns) if (b is not None and b.busy_ns > 0) else 1.0
        on = sum(p.loop_ns for p in cp.parts if p.kind == c.engine)
        out.append(PathChange(c.engine, on, f, int(round((1 - f) * on))))
    new = cp.loop_ns - sum(c.saved_ns for c in out)
    return PathWhatIf(cp.loop_ns, new, tuple(out), g.frames.count)
