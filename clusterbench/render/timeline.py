"""The analyze picture and the trace export.

The picture: a timeline of part of the window, one lane per (engine, stream), one per launching
thread (its CUDA calls, its waits, and its blocked time in its own shade), the critical path as a band
under the lanes coloured by resource, the idle gaps shaded by cause, and beside it the per-engine bars
(µs per frame, or ms busy without frames) with the binding bar marked. PNG, SVG or PDF by the file's
extension. matplotlib is the optional ``plot`` extra; it is imported only here, through its object API
(no pyplot, no global backend, no display).

The export: the window in the Chrome trace-event format (JSON; ui.perfetto.dev and chrome://tracing
open it), written event by event.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from clusterbench.errors import InputError
from clusterbench.io.outputs import atomic_write
from clusterbench.model import units as U
from clusterbench.model.engines import COLOURS
from clusterbench.render.plot import check_plot_path as _check_plot_path
from clusterbench.render.plot import load_matplotlib, save_figure

from clusterbench.analyzers.timeline import MAX_FLOWS

if TYPE_CHECKING:
    from clusterbench.analyzers.records import GroupAnalysis, TraceAnalysis
    from clusterbench.analyzers.timeline import Timeline, TraceExport

MIN_BAR_FRACTION = 1 / 600  # busy stretches are drawn at least this share of the span wide (~1.5 px)
# idle gaps by cause: set-up causes in greys, the loop's in warm colours
GAP_COLOURS = {"module_load": "#9E9E9E", "alloc": "#BDBDBD", "profiler": "#D7CCC8", "sync": "#EF9A9A",
               "host": "#FFCC80", "unknown": "#E0E0E0"}  # fmt: skip
_EXPORT_HINT = "pass --export-trace FILE.json in a writable directory"
# the host lanes: CUDA calls, explicit waits, and blocked time (calls the GPU held) in its own shade
HOST_COLOURS = {"call": "#B0B0B0", "wait": "#EF9A9A", "blocked": "#BA68C8"}
# the critical path's band: engines in their own colours, then these
PATH_COLOURS = {"host": "#616161", "launch": "#FFB300", "idle": "#E0E0E0"}


def check_plot_path(path: str | Path) -> tuple[Path, str]:
    """The path and format of ``--plot``, checked before anything else runs (one check for analyze
    and compare: :func:`clusterbench.render.plot.check_plot_path`)."""
    p = Path(path)
    return p, _check_plot_path(p)


def require_matplotlib():
    """(Figure, FigureCanvasAgg), or EnvironmentFailure with the install hint when matplotlib is missing."""
    figure, canvas, _patch = load_matplotlib()
    return figure, canvas


def _time_unit(span_ns: int) -> tuple[float, str]:
    if span_ns >= 5_000_000:
        return 1e6, "ms"
    if span_ns >= 5_000:
        return 1e3, "µs"
    return 1.0, "ns"


def render_timeline_plot(a: TraceAnalysis, g: GroupAnalysis, tl: Timeline, path: str | Path) -> Path:
    """Draw ``tl`` and ``g``'s bars into ``path``; raise InputError if it cannot be written."""
    path, fmt = check_plot_path(path)
    Figure, FigureCanvasAgg = require_matplotlib()
    from matplotlib.patches import Patch

    lanes = sorted(tl.lanes, key=lambda ln: (list(COLOURS).index(ln.engine) if ln.engine in COLOURS else 99, ln.stream))
    hosts = list(tl.hosts)
    band = tl.path is not None
    n = max(1, len(lanes) + len(hosts) + (1 if band else 0))
    fig = Figure(figsize=(12.0, max(4.0, 2.0 + 0.42 * n)), dpi=110)
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(1, 2, width_ratios=(3.2, 1.0), wspace=0.28)
    ax = fig.add_subplot(grid[0, 0])
    bx = fig.add_subplot(grid[0, 1])

    span_ns = max(1, tl.span_end_ns - tl.span_start_ns)
    scale, unit = _time_unit(span_ns)
    min_w = span_ns * MIN_BAR_FRACTION  # so that a 1 µs memset in a 100 ms span still shows
    for mark in tl.gaps:
        ax.axvspan(mark.start_ns / scale, max(mark.end_ns - mark.start_ns, min_w) / scale + mark.start_ns / scale,
                   color=GAP_COLOURS.get(mark.cause, "#E0E0E0"), alpha=0.45, lw=0, zorder=0)  # fmt: skip

    def bars(starts, ends, y, colour, height=0.76):  # noqa: ANN001, ANN202
        xs = [(float(a) / scale, float(max(b - a, min_w)) / scale) for a, b in zip(starts.tolist(), ends.tolist())]
        if xs:
            ax.broken_barh(xs, (y - height / 2, height), facecolors=colour, edgecolor="none")

    labels = []
    for i, ln in enumerate(lanes):
        bars(ln.starts_ns, ln.ends_ns, n - 1 - i, COLOURS.get(ln.engine, "#333333"))
        labels.append(f"{ln.engine} · stream {ln.stream}")
    for j, h in enumerate(hosts):
        y = n - 1 - len(lanes) - j
        bars(h.calls[0], h.calls[1], y, HOST_COLOURS["call"], 0.5)
        bars(h.waits[0], h.waits[1], y, HOST_COLOURS["wait"], 0.5)
        bars(h.blocked[0], h.blocked[1], y, HOST_COLOURS["blocked"], 0.76)
        labels.append(h.label)
    path_res: list[str] = []
    if band:
        p = tl.path
        y = 0
        by: dict[str, list[int]] = {}
        for k, r in enumerate(p.resource):
            by.setdefault(r, []).append(k)
        for r, idx in by.items():
            colour = COLOURS.get(r) or PATH_COLOURS.get(r, "#333333")
            bars(p.starts_ns[idx], p.ends_ns[idx], y, colour, 0.9)
        path_res = list(by)
        labels.append("critical path")
        ax.axhline(0.55, color="#9E9E9E", lw=0.6)
    ax.set_yticks(range(n))
    ax.set_yticklabels(list(reversed(labels)) if labels else [""], fontsize=8)
    ax.set_ylim(-0.6, n - 0.4)
    margin = 0.01 * span_ns  # so that a stretch at either end of the span is not hidden by the frame
    ax.set_xlim((tl.span_start_ns - margin) / scale, (tl.span_end_ns + margin) / scale)
    ax.set_xlabel(f"time since the window start ({unit})")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(f"timeline: {tl.span_source}", fontsize=9)
    if not lanes:
        ax.text(0.5, 0.5, "no GPU activity in this span", ha="center", va="center", transform=ax.transAxes)

    engines = g.busy.engines
    names = [n_ for n_, st in engines.items() if st.busy_ns > 0] or list(engines)
    per_frame = g.frames.count is not None
    vals = [(engines[n_].us_per_frame or 0.0) if per_frame else engines[n_].busy_ns / 1e6 for n_ in names]
    colours = [COLOURS.get(n_, "#333333") for n_ in names]
    busiest = g.host.busiest
    if busiest is not None:  # the host bar is the busiest thread's work
        names.append("host")
        vals.append((busiest.work_us_per_frame or 0.0) if per_frame else busiest.work_ns / 1e6)
        colours.append("#7F7F7F")
    binds = g.roofline.engine
    view = g.binding.view if g.binding is not None else "tallest_bar"
    star = "binds" if view == "tallest_bar" else "tallest"
    bars = bx.bar(range(len(names)), vals, color=colours)
    for rect, n_, v in zip(bars, names, vals):
        if n_ == binds:
            rect.set_edgecolor("black")
            rect.set_linewidth(2.0)
            bx.annotate(f"★ {star}\n{v:.2f}", (rect.get_x() + rect.get_width() / 2, v), xytext=(0, 3),
                        textcoords="offset points", ha="center", va="bottom", fontsize=8, fontweight="bold")  # fmt: skip
        else:
            bx.annotate(f"{v:.2f}", (rect.get_x() + rect.get_width() / 2, v), xytext=(0, 3),
                        textcoords="offset points", ha="center", va="bottom", fontsize=8)  # fmt: skip
    bx.set_xticks(range(len(names)))
    bx.set_xticklabels(names, fontsize=8, rotation=30)
    top = max(vals) if vals else 0.0
    bx.set_ylim(0, top * 1.35 if top > 0 else 1.0)
    bx.set_ylabel("µs per frame" if per_frame else "busy ms in the window")
    fps = f"\n{U.fps(g.roofline.fps)}" if g.roofline.fps else ""
    if view == "tallest_bar":
        bx.set_title(f"per-engine bars; ★ binds: {binds or 'nothing'}{fps}", fontsize=9)
    else:
        loop = U.us_per_frame_of(g.critical_path.loop_ns, g.frames.count) if g.critical_path else None
        rate = f": {U.fps(U.fps_of_us(loop))}" if loop else ""
        what = "the sum binds (turns)" if view == "critical_path" else "between bar and sum"
        bx.set_title(f"per-engine bars; ★ tallest: {binds}\n{what}{rate}", fontsize=9)
    bx.grid(axis="y", alpha=0.3)

    present = [e for e in COLOURS if any(ln.engine == e for ln in lanes) or e in path_res]
    causes = [c for c in GAP_COLOURS if any(m.cause == c for m in tl.gaps)]
    handles = [Patch(facecolor=COLOURS[e], label=e) for e in present]
    if hosts:
        handles += [Patch(facecolor=HOST_COLOURS["call"], label="CUDA call"), Patch(facecolor=HOST_COLOURS["wait"], label="wait"),
                    Patch(facecolor=HOST_COLOURS["blocked"], label="blocked")]  # fmt: skip
    handles += [Patch(facecolor=PATH_COLOURS[r], label=f"path: {r}") for r in PATH_COLOURS if r in path_res]
    handles += [Patch(facecolor=GAP_COLOURS[c], alpha=0.45, label=f"idle: {c}") for c in causes]
    if handles:
        ax.legend(handles=handles, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16),
                  ncol=min(len(handles), 6), frameon=False)  # fmt: skip
    if any(ln.engine == "graph" for ln in lanes):
        fig.text(0.5, 0.01, "graph = whole CUDA graph executions, including their copy and memset nodes and the gaps "
                 "between nodes; per-engine figures need nsys profile --cuda-graph-trace=node",
                 ha="center", va="bottom", fontsize=8, color="#8172B3")  # fmt: skip
    frames = f", {g.frames.count:,} frames" if g.frames.count else ""
    fig.suptitle(
        f"{Path(a.trace).name}: pid {g.pid}, device {g.device}\n"
        f"window {U.ms(g.window.length_ns)} from {g.window.source}{frames}; "
        f"showing {U.ms(tl.span_start_ns, unit=False)}–{U.ms(tl.span_end_ns)}",
        fontsize=9,
    )
    fig.subplots_adjust(left=0.13, right=0.98, top=0.80, bottom=0.24)
    return save_figure(fig, path, fmt)


def check_export_path(path: str | Path) -> Path:
    """Check, before anything is read, that the trace export can be written to ``path``."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"cannot write the trace export: {p} is a directory", hint=_EXPORT_HINT)
    if not p.parent.is_dir():
        raise InputError(f"cannot write the trace export {p}: directory {p.parent} does not exist", hint=_EXPORT_HINT)
    existed = p.exists()
    try:
        os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
    except OSError as exc:
        raise InputError(f"cannot write the trace export {p}: {exc.strerror or exc}", hint=_EXPORT_HINT) from None
    if not existed:
        with contextlib.suppress(OSError):
            os.unlink(p)
    return p


def write_chrome_trace(ex: TraceExport, path: str | Path) -> Path:
    """Write ``ex`` as Chrome trace events ("X" events, times in µs from the window start; one
    process row per track group, one thread row per track), with flow arrows ("s" at the launch call,
    "f" with ``bp: "e"`` at the GPU row, one id each) from each launch to its GPU work. Returns the path."""
    p = Path(path)
    pids = {grp: i + 1 for i, grp in enumerate(dict.fromkeys(t.group for t in ex.tracks))}
    flows = ex.flows
    shown = len(flows) if flows is not None else 0
    meta = {"title": ex.title, "flows": ex.flows_total, "flows_shown": shown, "flows_cut": shown < ex.flows_total}
    if shown < ex.flows_total:
        meta["flows_note"] = (f"flow arrows from launch calls to their GPU work: the first {shown:,} in time of "
                              f"{ex.flows_total:,} (at most {MAX_FLOWS:,} are written)")  # fmt: skip

    def write(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write('{"displayTimeUnit": "ns", "otherData": ' + json.dumps(meta) + ', "traceEvents": [\n')
            first = True

            def emit(event: dict) -> None:
                nonlocal first
                fh.write(("" if first else ",\n") + json.dumps(event, ensure_ascii=False))
                first = False

            for grp, pid in pids.items():
                emit({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": grp}})
            for tid, t in enumerate(ex.tracks, start=1):
                pid = pids[t.group]
                emit({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": t.name}})
                emit({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
                for s, e, k in zip(t.starts_ns.tolist(), t.ends_ns.tolist(), t.label.tolist()):
                    emit({"ph": "X", "name": t.labels[k], "pid": pid, "tid": tid, "ts": (s - ex.window_start_ns) / U.NS_PER_US,
                          "dur": (e - s) / U.NS_PER_US})  # fmt: skip
            if flows is not None:
                w0 = ex.window_start_ns
                for i, (ct, cs, rt, rs) in enumerate(zip(flows.call_track.tolist(), flows.call_ns.tolist(),
                                                         flows.row_track.tolist(), flows.row_ns.tolist()), start=1):  # fmt: skip
                    emit({"ph": "s", "id": i, "name": "launch", "cat": "launch", "pid": pids[ex.tracks[ct].group],
                          "tid": ct + 1, "ts": (cs - w0) / U.NS_PER_US})  # fmt: skip
                    emit({"ph": "f", "bp": "e", "id": i, "name": "launch", "cat": "launch", "pid": pids[ex.tracks[rt].group],
                          "tid": rt + 1, "ts": (rs - w0) / U.NS_PER_US})  # fmt: skip
            fh.write("\n]}\n")

    return atomic_write(p, write, "the trace export", hint=_EXPORT_HINT)
