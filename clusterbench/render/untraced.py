"""What binds without the profiler, as text (pure): the delay test's slopes, the untraced frame and host bar,
the split by resource traced and untraced, the causes of ``idle`` and the unit's latencies
(docs/probe.md, "The untraced frame")."""

from __future__ import annotations

import textwrap

from clusterbench.analyzers.untraced import binds_code, binds_words, host_bar, within_spread
from clusterbench.model import units as U
from clusterbench.model.untraced import (DelayTest, IdleCauses, UntracedCosts, UntracedRecord, UntracedSplit,
                                         cost_frames)


def _wrap(text: str, width: int, indent: str = "  ") -> list[str]:
    return textwrap.wrap(text, max(40, width), initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False) or [indent]


def _us(v: float | None) -> str:
    return U.us(v, 2, unit=False) if v is not None else U.NOT_MEASURED


def render_delay(record: UntracedRecord, width: int) -> list[str]:
    d = record.delay
    if d is None:
        return []
    lines = [f"  {'resource':<9}{'slope':>7}{'±':>7}  {'verdict':<11}{'frame µs: base → delayed':>26}"]
    for s in d.slopes:
        if s.slope is None:
            lines.append(f"  {s.resource:<9}{U.NOT_MEASURED:>7}{'':>7}  not tested")
            lines += _wrap(str(s.note), width, "      ")
            continue
        moved = f"{_us(s.base_us)} → {_us(s.delayed_us)}"
        lines.append(f"  {s.resource:<9}{s.slope:>7.2f}{s.spread:>7.2f}  {s.verdict:<11}{moved:>26}")
        if s.note:
            lines += _wrap(s.note, width, "      ")
    lines += _wrap(binds_words(d.binds, d.slopes), width)
    if d.link_bytes is not None:
        lines += _wrap(f"the link's delay: {U.size(d.link_bytes)} more H2D a frame at {U.gbps(d.link_gbps)} "
                       + ("(the unit's pinned H2D rate)" if d.link_rate_from == "unit" else "(the trace's H2D rate)"),
                       width)
    return lines


def render_replay(record: UntracedRecord, width: int) -> list[str]:
    """The delay test replayed on the trace, beside the test's own verdict (pure)."""
    if not record.replay:
        return []
    parts = [f"{r.resource} {r.slope:.2f} {r.verdict}" if r.slope is not None else f"{r.resource} not tested ({r.note})"
             for r in record.replay]
    code = binds_code(record.replay)
    text = f"the trace, the same delays replayed on it: {'; '.join(parts)}: {code}"
    d = record.delay
    if d is not None and code == d.binds:
        text += ", as the delay test found"
    elif d is not None:
        text += (f"; the delay test found {d.binds}, " + ("with every slope within its spread (a slope near a "
                 "verdict's edge)" if within_spread(d.slopes, record.replay) else "beyond its spread (the trace's "
                 "slack is the traced run's: docs/probe.md)"))
    return _wrap(text, width)


def render_frame(record: UntracedRecord, width: int) -> list[str]:
    h, d = record.host, record.delay
    if h is None:
        return []
    hb = host_bar(h, record.costs)
    busiest = next((t for t in h.threads if t.tid == hb.tid), None) or max(h.threads, key=lambda t: t.busy_us)
    spread = ("" if h.period_p10_us is None else
              f" (single frames {_us(h.period_p10_us)} to {_us(h.period_p90_us)} µs, 10th to 90th percentile)")
    sync = ("" if hb.sync_us is None else
            f" and {U.us(hb.sync_us, 2)} its synchronizes' own cost (each as one with nothing to wait for)")
    text = (f"untraced frame {U.us_per_frame(h.period_us, 2)}{spread}; host bar {U.us_per_frame(hb.bar_us, 2)} "
            f"(thread {busiest.name or busiest.tid}: {U.us(hb.busy_us, 2)} outside waits{sync}; "
            f"{U.us(busiest.call_us, 2)} in CUDA calls per frame, {U.us(busiest.wait_us, 2)} of it in waits)")
    if h.sched:
        text += f"; its synchronizes {h.sched}"
    if d is not None and d.cost is not None:
        text += (f"; the injection library's own cost {U.signed_pct(d.cost * 100, 1)} (by the program's own rate; "
                 f"{U.us_per_frame(d.bare_us, 2)} without it)")
        text += _cost_spread(d)
    elif d is not None:
        text += "; the injection library's own cost not measured (the program prints no rate: give --rate)"
    return _wrap(text, width)


def _cost_spread(d: DelayTest) -> str:
    """The processes behind the library's cost (pure): each side's range and, where the fastest process with
    the library ran faster than the slowest without it, that fact, since the cost is then a difference of
    medians inside the program's own spread from process to process."""
    with_lib, bare = cost_frames(d.runs)
    if len(with_lib) < 2 or len(bare) < 2:
        return ""
    text = (f"; its processes {_us(min(with_lib))} to {_us(max(with_lib))} µs/frame with the library, "
            f"{_us(min(bare))} to {_us(max(bare))} without")
    if min(with_lib) < max(bare):
        text += " (its fastest with the library ran faster than the slowest without)"
    return text


def render_split(split: UntracedSplit, width: int) -> list[str]:
    lines = [f"  {'part (µs/frame)':<18}{'traced':>9}{'untraced':>10}{'profiler':>10}"]
    for p in split.parts:
        lines.append(f"  {p.resource:<18}{_us(p.traced_us):>9}{_us(p.untraced_us):>10}{_us(p.profiler_us):>10}")
    lines.append(f"  {'sum':<18}{_us(split.traced_us):>9}{_us(split.untraced_sum_us):>10}{_us(split.profiler_us):>10}")
    lines += _wrap(split.note, width)
    return lines


def render_idle(idle: IdleCauses, width: int) -> list[str]:
    if idle.idle_us <= 0:
        return []
    parts = [f"idle on the path {U.us_per_frame(idle.idle_us, 2)} ({idle.gaps:.2f} gaps a frame)"]
    if idle.gpu_own_us is not None:
        parts.append(f"the GPU's own latency {U.us(idle.gpu_own_us, 2)}")
    if idle.profiler_us is not None:
        parts.append(f"the profiler's {U.us(idle.profiler_us, 2)}")
    if idle.unexplained_us is not None:
        parts.append(f"unexplained {U.us(idle.unexplained_us, 2)}")
    return _wrap(": ".join([parts[0], ", ".join(parts[1:])]) if len(parts) > 1 else parts[0], width) + \
        _wrap(idle.note, width, "    ")


def render_costs(costs: UntracedCosts, width: int) -> list[str]:
    u, t = costs.untraced, costs.traced

    def pair(a: float | None, b: float | None) -> str:
        return f"{_us(None if a is None else a / 1e3)}" + ("" if b is None else f" / {_us(b / 1e3)} under nsys")

    seq = u.sequence
    text = (f"the unit: the frame's ops ({u.seq}) chained on one stream take "
            f"{pair(seq.period_ns if seq else None, t.sequence.period_ns if t and t.sequence else None)} µs; "
            f"a synchronize's round trip {pair(u.gap_ns, t.gap_ns if t else None)} µs (wake {_us(None if u.wake_ns is None else u.wake_ns / 1e3)}, "
            f"host {_us(None if u.host_ns is None else u.host_ns / 1e3)}, launch {_us(None if u.launch_ns is None else u.launch_ns / 1e3)} µs "
            f"untraced); a one-stream loop of them that synchronizes every frame {pair(u.sync_loop_ns, t.sync_loop_ns if t else None)} µs a frame; "
            + ("" if u.idle_sync_ns is None else
               f"a synchronize with nothing to wait for {pair(u.idle_sync_ns, t.idle_sync_ns if t else None)} µs; ")
            + f"schedule flag {u.sched}; CPU governor {costs.governor or U.NOT_MEASURED}; the GPU clock's step {u.globaltimer_step_ns} ns")
    return _wrap(text, width)


def render_untraced(label: str, record: UntracedRecord, width: int = 80) -> str:
    """The --what-binds report of one config."""
    d = record.delay
    head = f"what binds {label} without the profiler"
    if d is not None:
        head += f" (delay test: {d.processes} processes a point, {U.us(d.k_us, 1)} a frame)"
    lines = _wrap(head, width, "")
    lines += render_delay(record, width)
    lines += render_replay(record, width)
    lines += render_frame(record, width)
    if record.split is not None:
        lines.append("  the frame split by resource, on the traced critical path:")
        lines += render_split(record.split, width)
    if record.idle is not None:
        lines += render_idle(record.idle, width)
    if record.costs is not None:
        lines += render_costs(record.costs, width)
    for n in record.notes:
        lines += _wrap(f"note: {n}", width)
    return "\n".join(lines)
