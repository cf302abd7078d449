"""clusterbench analyze: per-engine GPU time per frame and the roofline from an nsys trace."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from clusterbench.cli import options
from clusterbench.cli.common import boundary, stdout_console, warn

HELP = (
    "Per-engine GPU time per frame, the roofline and why engines do not overlap, from an nsys trace.\n\n"
    "TRACE is an nsys SQLite export (any version), or a .nsys-rep or older .qdrep report (exported with "
    "nsys when nsys is found). The window is every NVTX range starting with --range NAME; by default the "
    "probe's pass range ('clusterbench:pass ...', else 'pass ...'), else the span of GPU activity. FRAMES "
    "comes from the argument, else frames=N in the range text; without it only totals are shown. Busy time "
    "is an interval union per engine (kernel, graph, h2d, d2h, d2d, p2p, um_*, memset, other), per "
    "(process, device). `graph` is whole CUDA graph executions in a graph-level trace. "
    "The trace is opened read-only."
)


@boundary
def analyze(
    trace: Path = typer.Argument(..., help="nsys SQLite export (.sqlite) or report (.nsys-rep, .qdrep).", show_default=False),
    frames: Optional[int] = typer.Argument(None, help="Frames processed inside the window (default: frames=N in the range text).", show_default=False),
    range_name: Optional[str] = typer.Option(None, "--range", help="Use every NVTX range whose text starts with NAME as the window.", metavar="NAME"),
    device: Optional[int] = typer.Option(None, "--device", help="Only this CUDA device id."),
    pid: Optional[int] = typer.Option(None, "--pid", help="Only this process id."),
    by_stream: bool = typer.Option(False, "--by-stream", help="Add a per-stream breakdown."),
    what_if: Optional[List[str]] = typer.Option(
        None, "--what-if", metavar="SPEC",
        help="ENGINE=FACTOR or COPY_gbps=RATE: recompute the bars and the roofline as if ENGINE's busy time were "
        "times FACTOR (kernel=0.5), or a copy engine moved its bytes at RATE GB/s (h2d_gbps=375). Repeatable. Engines scale independently; "
        "overlap is kept.",
    ),  # fmt: skip
    plot: Optional[Path] = typer.Option(
        None, "--plot", metavar="FILE",
        help="Draw a timeline (one lane per engine and stream) and the per-engine bars into FILE "
        "(.png, .svg or .pdf; needs matplotlib: pip install 'clusterbench\\[plot]').",
    ),  # fmt: skip
    plot_span: Optional[float] = typer.Option(
        None, "--plot-span", metavar="MS", help="Timeline length in ms (default: about 3 batches)."
    ),
    plot_start: float = typer.Option(0.0, "--plot-start", metavar="MS", help="Timeline start, in ms from the window start."),
    as_json: bool = options.JSON,
    as_csv: bool = typer.Option(False, "--csv", help="Print CSV to stdout (one row per group and engine)."),
) -> None:
    from clusterbench.analyzers import analysis as core
    from clusterbench.analyzers.whatif import parse_changes
    from clusterbench.errors import InputError

    if as_json and as_csv:
        raise InputError("--json and --csv cannot be combined", hint="pick one output format")
    changes = parse_changes(what_if or [])
    if plot is not None:  # before any output: a bad name or a missing matplotlib costs nothing
        from clusterbench.render.timeline import check_plot_path, require_matplotlib

        check_plot_path(plot)
        require_matplotlib()
    data = core.load_trace(trace, range_name)
    result = core.analyze(data, frames, range_name, device, pid, by_stream, trace_label=str(trace), what_if=changes)

    from clusterbench.render import analyze as render

    table = not (as_json or as_csv)
    for message in result.warnings:
        if table and message == result.graph_warning:
            continue  # the table shows it in place, once
        warn(message)
    if as_json:
        typer.echo(render.render_json(result))
    elif as_csv:
        typer.echo(render.render_csv(result), nl=False)
    else:
        con = stdout_console()
        with con.capture() as captured:
            for item in render.render_analysis(result):
                con.print(item)
        text = captured.get()
        if not con.is_terminal:  # piped: no padding at line ends (tables and wrapped prose pad them)
            text = "\n".join(line.rstrip() for line in text.split("\n"))
        typer.echo(text, nl=False)
    if plot is not None:
        from clusterbench.analyzers.timeline import build_timeline
        from clusterbench.render.timeline import render_timeline_plot

        tl = build_timeline(data, result.primary, span_ms=plot_span, start_ms=plot_start)
        out = render_timeline_plot(result, result.primary, tl, plot)
        note = f"plot: wrote {out} ({tl.span_source})"
        if table:
            typer.echo(note)
        else:  # stdout holds only JSON or CSV
            typer.echo(note, err=True)
