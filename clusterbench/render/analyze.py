"""Render a TraceAnalysis: a rich table (default), JSON (the contract in docs/facts.md) or CSV.

Every number carries its unit, in the header or next to it.
"""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING

from clusterbench.model import units as U
from clusterbench.render import jsontext

if TYPE_CHECKING:
    from rich.console import RenderableType

    from clusterbench.analyzers.records import EngineStats, GroupAnalysis, TraceAnalysis

CSV_COLUMNS = (
    "trace",
    "pid",
    "device",
    "stream",
    "engine",
    "busy_ns",
    "count",
    "us_per_frame",
    "duty",
    "bytes",
    "gbps",
    "headroom",
    "headroom_factor",
    "headroom_us_per_frame",
    "streams",
    "implausible_count",
    "window_ns",
    "frames",
    "binds",
)


def render_json(a: TraceAnalysis) -> str:
    return jsontext.dumps(a.to_json())


def render_csv(a: TraceAnalysis) -> str:
    """One row per (group, engine), per (group, stream, engine) with --by-stream, and an ``any`` row."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for g in a.groups:
        base = {"trace": a.trace, "pid": g.pid, "device": g.device, "window_ns": g.window.length_ns, "frames": g.frames.count,
                "binds": g.roofline.engine}  # fmt: skip
        rows = [("", st) for st in g.busy.engines.values()]
        if g.busy.streams:
            rows += [(s.stream, st) for s in g.busy.streams for st in s.engines.values()]
        for stream, st in rows:
            w.writerow({**base, "stream": stream, **_csv_engine(st)})
        w.writerow({**base, "stream": "", "engine": "any", "busy_ns": g.busy.any_busy_ns})
    return buf.getvalue()


def _csv_engine(st: EngineStats) -> dict:
    return {
        "engine": st.engine,
        "busy_ns": st.busy_ns,
        "count": st.count,
        "us_per_frame": _g(st.us_per_frame),
        "duty": _g(st.duty),
        "bytes": "" if st.bytes is None else st.bytes,
        "gbps": _g(st.gbps),
        "headroom": _g(st.headroom),
        "headroom_factor": _g(st.headroom_factor),
        "headroom_us_per_frame": _g(st.headroom_us_per_frame),
        "streams": st.streams,
        "implausible_count": st.implausible_count,
    }


def _g(x: float | None) -> str:
    return "" if x is None else f"{x:.6g}"


HEADROOM_LEGEND = "headroom × = roofline busy / busy: how far an engine could grow before it binds"


def _headroom(st: EngineStats, g: GroupAnalysis) -> str:
    """One notation for every row: the factor roofline busy / busy (×1.00 = binds too)."""
    if st.engine == g.roofline.engine:
        return "binds"
    return U.factor(st.headroom_factor)


class _Bullets:
    """A titled list whose items wrap at word boundaries with a hanging indent (no trailing spaces), never
    between a number and its unit."""

    INDENT = 4
    KEEP = "\ue000"  # holds a number to its unit while rich wraps (rich breaks at any space, a no-break one too)

    def __init__(self, title: str, items: list[str]) -> None:
        self.title = title
        self.items = items

    def __rich_console__(self, console, options):
        from rich.text import Text

        yield Text(self.title, style="bold")
        width = max(20, options.max_width - self.INDENT)
        for item in self.items:
            for n, line in enumerate(Text(U.UNIT_GAP.sub(self.KEEP, item)).wrap(console, width)):
                line.rstrip()
                yield Text("  • " if n == 0 else " " * self.INDENT) + Text(line.plain.replace(self.KEEP, " "))


def _bullets(title: str, items: list[str]) -> RenderableType:
    return _Bullets(title, items)


def _head(a: TraceAnalysis, g: GroupAnalysis) -> RenderableType:
    from rich.text import Text

    head = Text()
    head.append(f"trace: {a.trace}\n")
    nsys = f"nsys {a.nsys_version}" if a.nsys_version else "nsys version not recorded"
    schema = f", export schema {a.schema_version}" if a.schema_version else ""
    head.append(f"GPU: {g.gpu_name or 'name not in trace'} (device {g.device}), process {g.pid}; {nsys}{schema}\n")
    w = g.window
    head.append(f"window: {U.ms(w.length_ns)} from {w.source}")
    if w.cut_note:
        head.append(f"; cut off {w.cut_note}")
    head.append("\n")
    f = g.frames
    if f.count is not None:
        head.append(f"frames: {f.count:,} (from {f.source})")
    else:
        head.append("frames: unknown, so only totals are shown (pass FRAMES or --frames"
                    + (f"; {f.hint})" if f.hint else ", e.g. --frames kernel:NAME)"))
    if g.graph_trace == "node":
        head.append("\nCUDA graphs: traced per node (--cuda-graph-trace=node): graph kernels count as kernels")
    return head


def _grid(columns: list[str], title: str | None = None, left: int = 1, first_width: int | None = None):
    """A table in the one style of this output (80 columns: short headers, units on the next line):
    the first ``left`` columns left-aligned (the first at most ``first_width`` wide), the rest right-aligned."""
    from rich import box
    from rich.table import Table

    t = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0), title_justify="left")
    for i, name in enumerate(columns):
        if i == 0 and first_width:
            t.add_column(name, no_wrap=True, max_width=first_width, overflow="ellipsis")
        else:
            t.add_column(name, justify="left" if i < left else "right", no_wrap=True)
    return t


PER_FRAME_US = "per\nframe\nµs"
SMALL_PART = 0.005  # critical-path parts below this share (of the window and of the loop) share one row


def _engine_table(g: GroupAnalysis) -> RenderableType:
    per_frame = g.frames.count is not None
    t = _grid(["engine", "busy\nms", "count"] + ([PER_FRAME_US] if per_frame else [])
              + ["duty\n%", "bytes", "rate\nGB/s", "streams", "head-\nroom\n×"])  # fmt: skip
    for st in g.busy.engines.values():
        row = [st.engine, U.ms(st.busy_ns, unit=False), U.count(st.count)]
        if per_frame:
            row.append(U.us_per_frame(st.us_per_frame, unit=False))
        row += [
            U.pct(st.duty, unit=False),
            U.size(st.bytes),
            U.gbps(st.gbps, unit=False),
            str(st.streams) if st.count else U.NOT_MEASURED,
            _headroom(st, g),
        ]
        t.add_row(*row, style="bold" if st.engine == g.roofline.engine else None)
    return t


def _gap_text(g: GroupAnalysis, i: int) -> str:
    from clusterbench.analyzers.rules import gap_where

    return gap_where(g, i)


def _binds_line(g: GroupAnalysis) -> str:
    """What binds, from both views (analyzers.verdict): the tallest bar, the critical path's sum, or both."""
    r = g.roofline
    who = f"host, {r.thread.label()}" if r.engine == "host" and r.thread else r.engine
    if r.us_per_frame is not None and r.fps is not None:
        bar = f"{who} at {U.us_per_frame(r.us_per_frame)} → {U.fps(r.fps)}"
    else:
        bar = f"{who} ({U.ms(r.busy_ns)} busy; FPS needs FRAMES)"
    b, cp = g.binding, g.critical_path
    if b is None or b.view == "tallest_bar" or cp is None:
        return f"binds: {bar}"
    loop = U.us_per_frame_of(cp.loop_ns, g.frames.count)
    path = (f"{U.us_per_frame(loop)} → {U.fps(U.fps_of_us(loop))}" if loop is not None
            else f"{U.ms(cp.loop_ns)}")  # fmt: skip
    if b.view == "critical_path":
        return f"binds: the sum of the critical path, {path} (the resources take turns; the tallest bar is {bar})"
    return f"binds: between the tallest bar, {bar}, and the critical path's sum, {path}"


def _figures(g: GroupAnalysis) -> RenderableType:
    from rich.text import Text

    r, t, b, gp = g.roofline, g.throughput, g.busy, g.gaps
    hidden = g.work_not_traced is not None
    lines = Text()
    lines.append(HEADROOM_LEGEND + "\n", style="dim")
    if r.engine is None:
        lines.append("binds: nothing (no GPU activity in the window)\n")
    elif hidden:
        lines.append("binds: not shown: the GPU's work is not in the trace\n", style="bold")
    else:
        lines.append(_binds_line(g) + "\n", style="bold")
    w = g.window.length_ns or 1
    setup = gp.setup_ns
    if t.measured_us_per_frame is not None:
        eff = "" if t.efficiency is None else f"; efficiency (roofline / measured) {U.pct(t.efficiency)}"
        lines.append(f"measured: {U.us_per_frame(t.measured_us_per_frame)} over the window → "
                     f"{U.fps(U.fps_of_us(t.measured_us_per_frame))}{eff}\n")
        if setup and t.steady_us_per_frame:
            eff = "" if t.steady_efficiency is None else f"; efficiency {U.pct(t.steady_efficiency)}"
            lines.append(f"without set-up gaps: {U.us_per_frame(t.steady_us_per_frame)} → "
                         f"{U.fps(U.fps_of_us(t.steady_us_per_frame))}{eff}\n")
    elif t.efficiency is not None:
        lines.append(f"efficiency (roofline busy / window): {U.pct(t.efficiency)}\n")
    if hidden:
        lines.append("GPU busy and idle: not shown: the GPU's work is not in the trace (see why)\n")
    else:
        lines.append(f"GPU busy (any engine): {U.ms(b.any_busy_ns)} ({U.pct(b.any_busy_ns / w)}); idle: {U.ms(b.idle_ns)} ({U.pct(b.idle_ns / w)})\n")
        if setup:
            lines.append(f"idle without set-up gaps: {U.ms(t.steady_idle_ns)} ({U.pct(t.steady_idle_ns / (t.steady_ns or 1))} of "
                         f"{U.ms(t.steady_ns)})\n")  # fmt: skip
    ser = U.times(b.serialization)
    lines.append(f"overlap (2+ engines busy): {U.ms(b.overlap_ns)}; serialization (sum busy / any busy): {ser}\n")
    h = g.host
    calls = f" in {', '.join(h.host_sync_calls)}" if h.host_sync_calls else ""
    lines.append(f"host sync{calls}: {U.ms(h.host_sync_ns)} ({U.pct(h.host_sync_ns / w)} of the window)\n")
    if len(gp):
        by = gp.by_cause()
        setup_part = ", ".join(f"{c} {n:,}" for c, (n, _) in by.items() if c in ("module_load", "alloc", "profiler"))
        loop_part = ", ".join(f"{c} {n:,}" for c, (n, _) in by.items() if c not in ("module_load", "alloc", "profiler"))
        n_setup = int(gp.setup_mask().sum())
        lines.append(
            f"idle gaps ≥ {U.ms(gp.threshold_ns, None)}: {len(gp):,} ({U.ms(int(gp.lengths_ns.sum()))}); set-up {n_setup:,} "
            f"({U.ms(gp.setup_ns)}{': ' + setup_part if setup_part else ''}); loop {len(gp) - n_setup:,} "
            f"({U.ms(gp.loop_ns)}{': ' + loop_part if loop_part else ''})\n"
        )
        lines.append(f"longest gap: {_gap_text(g, gp.longest())}\n")
        ll = gp.longest(setup=False)
        if ll is not None and ll != gp.longest():
            lines.append(f"longest loop gap: {_gap_text(g, ll)}\n")
    else:
        lines.append(f"idle gaps ≥ {U.ms(gp.threshold_ns, None)}: none\n")
    if g.pacing is not None:
        p = g.pacing
        per = p.frames_per_event
        each = "" if per == 1 else f", {per:,.4g} frames each"
        stall = ("the GPU was busy all through it" if p.stall_cause == "busy"
                 else f"an idle gap, {p.stall_cause}" + (f" ({p.stall_api})" if p.stall_api else ""))  # fmt: skip

        def upf(ns: int) -> str:
            return U.us_per_frame(U.us_per_frame_of(ns, per), unit=False)

        lines.append(
            f"pacing (completions: {p.events:,} {p.source}{each}): median {upf(p.median_ns)}, p99 {upf(p.p99_ns)}, "
            f"max {U.us_per_frame(U.us_per_frame_of(p.max_ns, per))}; the longest interval, {U.ms(p.max_ns)} at "
            f"{U.ms(p.stall_start_ns - p.window_start_ns)}: {stall}\n"
        )
    elif g.pacing_note:
        lines.append(f"pacing: not measured: {g.pacing_note}\n", style="dim")
    lines.rstrip()
    return lines


def _threads_table(g: GroupAnalysis) -> RenderableType | None:
    h = g.host
    if not h.threads:
        return None
    per_frame = g.frames.count is not None
    unit = "µs/frame" if per_frame else "ms"
    from rich.console import Group
    from rich.text import Text

    head = Text(f"launching threads, {unit} (set-up gaps left out; blocked: the GPU held it):" if h.linked
                else f"launching threads, {unit} (set-up gaps left out):")  # fmt: skip
    t = _grid(["thread", "work", "blocked", "wait", "calls"], first_width=28)

    def v(ns: int) -> str:
        return U.us_per_frame(U.us_per_frame_of(ns, g.frames.count), unit=False) if per_frame else U.ms(ns, unit=False)

    for th in h.threads[:8]:
        label = f"{th.thread.tid}" + (f" {th.thread.name}" if th.thread.name else "")
        binds = g.roofline.engine == "host" and g.roofline.thread == th.thread
        t.add_row(label, v(th.work_ns), v(th.blocked_ns) if h.linked else U.NOT_MEASURED, v(th.wait_ns),
                  U.count(th.calls), style="bold" if binds else None)  # fmt: skip
    if len(h.threads) > 8:
        t.caption = f"and {len(h.threads) - 8} more (--json lists all)"
    return Group(head, t)


def _path_table(g: GroupAnalysis) -> RenderableType | None:
    """The critical path by resource: time per frame (or ms), its share of the window, and its share
    without the set-up gaps; the kernels by name under the kernel row."""
    from rich.console import Group
    from rich.text import Text

    cp = g.critical_path
    if cp is None or g.work_not_traced is not None:
        return None
    per_frame = g.frames.count is not None
    setup = g.gaps.setup_ns > 0
    unit = "µs/frame" if per_frame else "ms"
    head = Text(f"critical path, {unit}" + (" (loop %: set-up gaps left out):" if setup else ":"))
    t = _grid(["resource", "µs/\nframe" if per_frame else "ms", "share\n%"] + (["loop\n%"] if setup else []),
              first_width=30)  # fmt: skip

    def v(ns: int) -> str:
        return U.us_per_frame(U.us_per_frame_of(ns, g.frames.count), unit=False) if per_frame else U.ms(ns, unit=False)

    small = [p for p in cp.parts if p.share < SMALL_PART and cp.loop_share(p) < SMALL_PART]
    for p in cp.parts:
        if p in small and len(small) > 1:
            continue
        label = p.kind + (f" {p.thread.tid}" + (f" {p.thread.name}" if p.thread.name else "") if p.thread else "")
        row = [label, v(p.ns), U.pct(p.share, unit=False)] + ([U.pct(cp.loop_share(p), unit=False)] if setup else [])
        t.add_row(*row)
        if p.resource == "kernel" and len(cp.kernels) > 1:
            for name, ns in cp.kernels[:4]:
                t.add_row(f"  {name}", v(ns), U.pct(ns / cp.total_ns, unit=False), *([""] if setup else []))
    if len(small) > 1:
        ns = sum(p.ns for p in small)
        loop = sum(p.loop_ns for p in small) / cp.loop_ns if cp.loop_ns else 0.0
        t.add_row(", ".join(p.kind for p in small), v(ns), U.pct(ns / cp.total_ns, unit=False),
                  *([U.pct(loop, unit=False)] if setup else []))  # fmt: skip
    return Group(head, t)


def _kernels_tables(g: GroupAnalysis) -> list[RenderableType]:

    per_frame = g.frames.count is not None
    out: list[RenderableType] = []
    if g.kernels:
        t = _grid(["kernel", "launches", "busy\nms"] + ([PER_FRAME_US] if per_frame else [])
                  + ["share\n%", "min\nµs", "median\nµs", "max\nµs"], "kernels by name (share: of the kernel bar)",
                  first_width=26)  # fmt: skip
        for k in g.kernels:
            row = [k.name, U.count(k.launches), U.ms(k.busy_ns, unit=False)]
            if per_frame:
                row.append(U.us_per_frame(k.us_per_frame, unit=False))
            row += [U.pct(k.share, unit=False)] + [U.us(ns / U.NS_PER_US, 1, unit=False) for ns in (k.min_ns, k.median_ns, k.max_ns)]
            t.add_row(*row)
        out.append(t)
    if g.copies:
        t = _grid(["engine", "size", "count", "bytes", "busy\nms"] + ([PER_FRAME_US] if per_frame else []) + ["rate\nGB/s"],
                  "copies and memsets by size", left=2)  # fmt: skip
        for c in g.copies:
            row = [c.engine, c.size_class, U.count(c.count), U.size(c.bytes), U.ms(c.busy_ns, unit=False)]
            if per_frame:
                row.append(U.us_per_frame(c.us_per_frame, unit=False))
            row.append(U.gbps(c.gbps, unit=False))
            t.add_row(*row)
        out.append(t)
    return out


def render_group(a: TraceAnalysis, g: GroupAnalysis, by_kernel: bool = False) -> list[RenderableType]:
    from rich.text import Text

    out: list[RenderableType] = [_head(a, g)]
    if a.graph_warning and "graph" in g.busy.engines:
        out.append(Text(f"Warning: {a.graph_warning}", style="yellow"))
    if g.work_not_traced is not None:
        out.append(Text(f"Warning: the GPU's work is not in the trace. {g.work_not_traced.hint}", style="yellow"))
    out.append(_engine_table(g))
    out.append(_figures(g))
    threads = _threads_table(g)
    if threads is not None:
        out.append(threads)
    path = _path_table(g)
    if path is not None:
        out.append(path)
    if by_kernel:
        out.extend(_kernels_tables(g))

    per_frame = g.frames.count is not None
    if g.busy.streams:
        st_t = _grid(["stream", "engine", "busy\nms", "count"] + ([PER_FRAME_US] if per_frame else []) + ["rate\nGB/s"],
                     "per stream", left=2)  # fmt: skip
        for s in g.busy.streams:
            for st in s.engines.values():
                row = [str(s.stream), st.engine, U.ms(st.busy_ns, unit=False), U.count(st.count)]
                if per_frame:
                    row.append(U.us_per_frame(st.us_per_frame, unit=False))
                row.append(U.gbps(st.gbps, unit=False))
                st_t.add_row(*row)
        out.append(st_t)

    if a.what_if is not None and g is a.primary:
        out.append(render_what_if(a.what_if))

    if g.findings:
        out.append(_bullets("why:", [f"[{f.code}] {f.message}" for f in g.findings]))
    return out


def render_what_if(wi) -> RenderableType:
    from rich.console import Group
    from rich.text import Text

    per_frame = any(b.us_per_frame is not None for b in wi.bars)
    unit = "µs/frame" if per_frame else "ms"
    t = _grid(["engine", f"now\n{unit}", f"what if\n{unit}", ""])
    for b in wi.bars:
        if per_frame:
            now, new = U.us_per_frame(b.us_per_frame, unit=False), U.us_per_frame(b.new_us_per_frame, unit=False)
        else:
            now, new = U.ms(b.busy_ns, unit=False), U.ms(b.new_busy_ns, unit=False)
        mark = "binds" if b.engine == wi.engine else ("changed" if b.changed else "")
        t.add_row(b.engine, now, new, mark, style="bold" if b.engine == wi.engine else None)
    head = Text("by the tallest bar: " + wi.summary(), style="bold")
    note = Text(f"assumption: {wi.assumption}", style="dim")
    extra = [Text(f"note: {n}", style="yellow") for n in wi.notes]
    path = []
    if wi.path is not None:
        from clusterbench.analyzers.whatif import PATH_ASSUMPTION

        path = [Text(wi.path_summary(), style="bold"), Text(f"assumption: {PATH_ASSUMPTION}", style="dim")]
    return Group(head, t, note, *path, *extra)


def render_analysis(a: TraceAnalysis, by_kernel: bool = False) -> list[RenderableType]:
    """Every group, primary first (``by_kernel``: with the kernels-by-name and copies-by-size tables)."""
    from rich.rule import Rule

    out: list[RenderableType] = []
    ordered = [a.primary] + [g for g in a.groups if g is not a.primary]
    for i, g in enumerate(ordered):
        if len(ordered) > 1:
            out.append(Rule(f"pid {g.pid} device {g.device}" + (" (primary)" if i == 0 else "")))
        out.extend(render_group(a, g, by_kernel))
    return out
