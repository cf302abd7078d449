"""Render a TraceAnalysis: a rich table (default), JSON (the DESIGN.md contract) or CSV.

Every number carries its unit, in the header or next to it.
"""

from __future__ import annotations

import csv
import io
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import RenderableType

    from clusterbench.analysis.engines import EngineStats, GroupAnalysis, TraceAnalysis

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
    "headroom_us_per_frame",
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
        "headroom_us_per_frame": _g(st.headroom_us_per_frame),
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


def _headroom(st: EngineStats, g: GroupAnalysis) -> str:
    if st.engine == g.roofline.engine:
        return "binds"
    if st.headroom is None:
        return "–"
    # past +1000 % a percentage stops reading well (a 16-byte memset beside 6 GB of copies): say "x N"
    txt = f"+{100 * st.headroom:,.0f} %" if st.headroom < 10 else f"×{1 + st.headroom:,.0f}"
    if st.headroom_us_per_frame is not None:
        txt += f" / +{st.headroom_us_per_frame:.2f}"
    return txt


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
    out.append(head)

    per_frame = g.frames is not None
    t = Table(title=None, show_edge=False, pad_edge=False)
    t.add_column("engine")
    t.add_column("busy\nms", justify="right")
    t.add_column("count", justify="right")
    if per_frame:
        t.add_column("per frame\nµs", justify="right")
    t.add_column("duty\n%", justify="right")
    t.add_column("bytes", justify="right")
    t.add_column("rate\nGB/s", justify="right")
    t.add_column("headroom\n% / µs/frame", justify="right")
    for st in g.engines.values():
        row = [st.engine, f"{st.busy_ns / 1e6:,.3f}", f"{st.count:,}"]
        if per_frame:
            row.append("–" if st.us_per_frame is None else f"{st.us_per_frame:.3f}")
        row += [
            "–" if st.duty is None else f"{100 * st.duty:.1f}",
            _bytes(st.bytes),
            "–" if st.gbps is None else f"{st.gbps:.2f}",
            _headroom(st, g),
        ]
        style = "bold" if st.engine == g.roofline.engine else None
        t.add_row(*row, style=style)
    out.append(t)

    r = g.roofline
    lines = Text()
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
    lines.append(f"overlap (≥2 engines busy): {_ms(g.overlap_ns)}; serialization (sum of busy / any busy): {ser}\n")
    calls = f" in {', '.join(g.host_sync_calls)}" if g.host_sync_calls else ""
    lines.append(f"host sync{calls}: {_ms(g.host_sync_ns)} ({_pct(g.host_sync_ns / w)} of the window)")
    out.append(lines)

    if g.streams:
        st_t = Table(title="per stream", show_edge=False, pad_edge=False)
        st_t.add_column("stream", justify="right")
        st_t.add_column("engine")
        st_t.add_column("busy\nms", justify="right")
        st_t.add_column("count", justify="right")
        if per_frame:
            st_t.add_column("µs/frame", justify="right")
        st_t.add_column("rate\nGB/s", justify="right")
        for s in g.streams:
            for st in s.engines.values():
                row = [str(s.stream), st.engine, _ms(st.busy_ns), f"{st.count:,}"]
                if per_frame:
                    row.append("–" if st.us_per_frame is None else f"{st.us_per_frame:.3f} µs")
                row.append("–" if st.gbps is None else f"{st.gbps:.2f} GB/s")
                st_t.add_row(*row)
        out.append(st_t)

    if g.notes:
        notes = Text("why:\n", style="bold")
        for n in g.notes:
            notes.append(f"  • {n}\n", style="")
        out.append(notes)
    return out


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
