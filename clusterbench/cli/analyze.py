"""clusterbench analyze: per-engine GPU time per frame and the roofline from an nsys trace."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from clusterbench.cli.common import boundary, stdout_console, warn

HELP = (
    "Per-engine GPU time per frame, the roofline and why engines do not overlap, from an nsys trace.\n\n"
    "TRACE is an nsys SQLite export (any version) or a .nsys-rep (exported with nsys when nsys is found). "
    "The window is every NVTX range starting with --range NAME; by default the probe's pass range "
    "('clusterbench:pass ...', else 'pass ...'), else the span of GPU activity. FRAMES comes from the "
    "argument, else frames=N in the range text; without it only totals are shown. Busy time is an interval "
    "union per engine (kernel, h2d, d2h, d2d, p2p, um_*, memset, other), per (process, device). "
    "The trace is opened read-only."
)


@boundary
def analyze(
    trace: Path = typer.Argument(..., help="nsys SQLite export (.sqlite) or report (.nsys-rep).", show_default=False),
    frames: Optional[int] = typer.Argument(None, help="Frames processed inside the window (default: frames=N in the range text).", show_default=False),
    range_name: Optional[str] = typer.Option(None, "--range", help="Use every NVTX range whose text starts with NAME as the window.", metavar="NAME"),
    device: Optional[int] = typer.Option(None, "--device", help="Only this CUDA device id."),
    pid: Optional[int] = typer.Option(None, "--pid", help="Only this process id."),
    by_stream: bool = typer.Option(False, "--by-stream", help="Add a per-stream breakdown."),
    as_json: bool = typer.Option(False, "--json", help="Print only JSON to stdout."),
    as_csv: bool = typer.Option(False, "--csv", help="Print CSV to stdout (one row per group and engine)."),
) -> None:
    from clusterbench.analysis import analyze_trace
    from clusterbench.errors import InputError

    if as_json and as_csv:
        raise InputError("--json and --csv cannot be combined", hint="pick one output format")
    result = analyze_trace(trace, frames=frames, range_name=range_name, device=device, pid=pid, by_stream=by_stream)

    from clusterbench.render import analyze as render

    for message in result.warnings:
        warn(message)
    if as_json:
        typer.echo(render.render_json(result))
    elif as_csv:
        typer.echo(render.render_csv(result), nl=False)
    else:
        con = stdout_console()
        for item in render.render_analysis(result):
            con.print(item)
