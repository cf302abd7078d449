"""Render a TraceAnalysis: a rich table (default), JSON (the contract in docs/facts.md) or CSV.

Every number carries its unit, in the header or next to it.
"""

from __future__ import annotations

import csv
import io
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import RenderableType

    from clusterbench.analyzers.analysis import EngineStats, GroupAnalysis, TraceAnalysis

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
    return json.dumps(a.to_json(), indent=2, ensure_ascii=False)


def render_csv(a: TraceAnalysis) -> str:
    """One row per (group, engine), per (group, stream, engine) with --by-stream, and an ``any`` row."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    for g in a.groups:
        base = {"trace": a.trace, "pid": g.pid, "device": g.device, "window_ns": g.window_ns, "frames": g.frames, "binds": g.roofline.engine}
        rows = [("", st) for st in g.engines.values()]
        if g.streams:
            rows += [(s.stream, st) for s in g.streams for st in s.engines.values()]
        for stream, st in rows:
            w.writerow({**base, "stream": stream, **_csv_engine(st)})
        w.writerow({**base, "stream": "", "engine": "any", "busy_ns": g.any_busy_ns})
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


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.3f} ms"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def _bytes(n: int | None) -> str:
    if n is None:
        return "–"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{n} B"


HEADROOM_LEGEND = "headroom × = roofline busy / busy: how far an engine could grow before it binds"


def _headroom(st: EngineStats, g: GroupAnalysis) -> str:
    """One notation for every row: the factor roofline busy / busy (×1.00 = binds too)."""
    if st.engine == g.roofline.engine:
        return "binds"
    f = st.headroom_factor
    if f is None:
        return "–"
    return f"×{f:,.2f}" if f < 100 else f"×{f:,.0f}"


class _Bullets:
    """A titled list whose items wrap at word boundaries with a hanging indent (no trailing spaces)."""

    INDENT = 4

    def __init__(self, title: str, items: list[str]) -> None:
        self.title = title
        self.items = items

    def __rich_console__(self, console, options):  # noqa: ANN001, ANN204 (rich protocol)
        from rich.text import Text

        yield Text(self.title, style="bold")
        width = max(20, options.max_width - self.INDENT)
        for item in self.items:
            for n, line in enumerate(Text(item).wrap(console, width)):
                line.rstrip()
                yield Text("  • " if n == 0 else " " * self.INDENT) + line


def _bullets(title: str, items: list[str]) -> RenderableType:
    return _Bullets(title, items)


def render_group(a: TraceAnalysis, g: GroupAnalysis) -> list[RenderableType]:
    from rich.table import Table
    from rich.text import Text

    out: list[RenderableType] = []
    head = Text()
    head.append(f"trace: {a.trace}\n")
    nsys = f"nsys {a.nsys_version}" if a.nsys_version else "nsys version not recorded"
    schema = f", export schema {a.schema_version}" if a.schema_version else ""
    head.append(f"GPU: {g.gpu_name or 'name not in trace'} (device {g.device}), process {g.pid}; {nsys}{schema}\n")
    head.append(f"window: {_ms(g.window_ns)} from {g.window_source}\n")
    if g.frames is not None:
        head.append(f"frames: {g.frames:,} (from {g.frames_source})")
    else:
        head.append("frames: unknown, so only totals are shown (pass FRAMES, or put frames=N in the NVTX range text)")
    if g.graph_trace == "node":
        head.append("\nCUDA graphs: traced per node (--cuda-graph-trace=node): graph kernels count as kernels")
    out.append(head)
    if a.graph_warning and "graph" in g.engines:
        out.append(Text(f"Warning: {a.graph_warning}", style="yellow"))

    per_frame = g.frames is not None
    # Laid out to fit 80 columns: short headers, units on the second line.
    from rich import box

    t = Table(title=None, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    t.add_column("engine", no_wrap=True)
    t.add_column("busy\nms", justify="right", no_wrap=True)
    t.add_column("count", justify="right", no_wrap=True)
    if per_frame:
        t.add_column("per\nframe\nµs", justify="right", no_wrap=True)
    t.add_column("duty\n%", justify="right", no_wrap=True)
    t.add_column("bytes", justify="right", no_wrap=True)
    t.add_column("rate\nGB/s", justify="right", no_wrap=True)
    t.add_column("streams", justify="right", no_wrap=True)
    t.add_column("head-\nroom\n×", justify="right", no_wrap=True)
    for st in g.engines.values():
        row = [st.engine, f"{st.busy_ns / 1e6:,.3f}", f"{st.count:,}"]
        if per_frame:
            row.append("–" if st.us_per_frame is None else f"{st.us_per_frame:.3f}")
        row += [
            "–" if st.duty is None else f"{100 * st.duty:.1f}",
            _bytes(st.bytes),
            "–" if st.gbps is None else f"{st.gbps:,.2f}",
            str(st.streams) if st.count else "–",
            _headroom(st, g),
        ]
        style = "bold" if st.engine == g.roofline.engine else None
        t.add_row(*row, style=style)
    out.append(t)

    r = g.roofline
    lines = Text()
    lines.append(HEADROOM_LEGEND + "\n", style="dim")
    if r.engine is None:
        lines.append("binds: nothing (no GPU activity in the window)\n")
    elif r.us_per_frame is not None and r.fps is not None:
        lines.append(f"binds: {r.engine} at {r.us_per_frame:.3f} µs/frame → {r.fps:,.0f} FPS\n", style="bold")
    else:
        lines.append(f"binds: {r.engine} ({_ms(r.busy_ns)} busy; FPS needs FRAMES)\n", style="bold")
    if g.measured_us_per_frame is not None:
        lines.append(
            f"measured: {g.measured_us_per_frame:.3f} µs/frame over the window → {1e6 / g.measured_us_per_frame:,.0f} FPS; "
            f"efficiency (roofline / measured) {_pct(g.efficiency)}\n"
        )
    elif g.efficiency is not None:
        lines.append(f"efficiency (roofline busy / window): {_pct(g.efficiency)}\n")
    w = g.window_ns or 1
    lines.append(f"GPU busy (any engine): {_ms(g.any_busy_ns)} ({_pct(g.any_busy_ns / w)}); idle: {_ms(g.idle_ns)} ({_pct(g.idle_ns / w)})\n")
    ser = "–" if g.serialization is None else f"{g.serialization:.2f}×"
    lines.append(f"overlap (2+ engines busy): {_ms(g.overlap_ns)}; serialization (sum busy / any busy): {ser}\n")
    calls = f" in {', '.join(g.host_sync_calls)}" if g.host_sync_calls else ""
    lines.append(f"host sync{calls}: {_ms(g.host_sync_ns)} ({_pct(g.host_sync_ns / w)} of the window)")
    out.append(lines)

    if g.streams:
        st_t = Table(title="per stream", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
        st_t.add_column("stream", justify="right")
        st_t.add_column("engine")
        st_t.add_column("busy\nms", justify="right")
        st_t.add_column("count", justify="right")
        if per_frame:
            st_t.add_column("per frame\nµs", justify="right")
        st_t.add_column("rate\nGB/s", justify="right")
        for s in g.streams:
            for st in s.engines.values():
                row = [str(s.stream), st.engine, f"{st.busy_ns / 1e6:,.3f}", f"{st.count:,}"]
                if per_frame:
                    row.append("–" if st.us_per_frame is None else f"{st.us_per_frame:.3f}")
                row.append("–" if st.gbps is None else f"{st.gbps:,.2f}")
                st_t.add_row(*row)
        out.append(st_t)

    if a.what_if is not None and g is a.primary:
        out.append(render_what_if(a.what_if))

    if g.findings:
        out.append(_bullets("why:", [f"[{f.code}] {f.message}" for f in g.findings]))
    return out


def render_what_if(wi) -> RenderableType:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from rich import box

    per_frame = any(b.us_per_frame is not None for b in wi.bars)
    unit = "µs/frame" if per_frame else "ms"
    t = Table(title=None, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    t.add_column("engine")
    t.add_column(f"now\n{unit}", justify="right")
    t.add_column(f"what if\n{unit}", justify="right")
    t.add_column("", justify="left")
    for b in wi.bars:
        if per_frame:
            now = "–" if b.us_per_frame is None else f"{b.us_per_frame:.3f}"
            new = "–" if b.new_us_per_frame is None else f"{b.new_us_per_frame:.3f}"
        else:
            now, new = f"{b.busy_ns / 1e6:,.3f}", f"{b.new_busy_ns / 1e6:,.3f}"
        mark = "binds" if b.engine == wi.engine else ("changed" if b.changed else "")
        t.add_row(b.engine, now, new, mark, style="bold" if b.engine == wi.engine else None)
    head = Text(wi.summary(), style="bold")
    note = Text(f"assumption: {wi.assumption}", style="dim")
    extra = [Text(f"note: {n}", style="yellow") for n in wi.notes]
    return Group(head, t, note, *extra)


def render_analysis(a: TraceAnalysis) -> list[RenderableType]:
    """Every group, primary first."""
    from rich.rule import Rule

    out: list[RenderableType] = []
    ordered = [a.primary] + [g for g in a.groups if g is not a.primary]
    for i, g in enumerate(ordered):
        if len(ordered) > 1:
            out.append(Rule(f"pid {g.pid} device {g.device}" + (" (primary)" if i == 0 else "")))
        out.extend(render_group(a, g))
    return out
