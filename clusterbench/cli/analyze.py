"""clusterbench analyze: per-engine GPU time per frame, the roofline, and why, from an nsys trace."""

from __future__ import annotations

from pathlib import Path

import typer

from clusterbench.cli.common import JSON, TRACE_FRAMES, TRACE_RANGE, TRACE_WINDOW, boundary, stderr_console, stdout_console, warn

HELP = (
    "Per-engine GPU time per frame, the roofline (engines and launching host threads), the idle gaps "
    "with what the host did in each, and why the pipeline falls short, from an nsys trace.\n\n"
    "TRACE is an nsys SQLite export (any version), or a .nsys-rep or older .qdrep report (exported with "
    "nsys when nsys is found). The window is --window (default auto: the probe's pass range "
    "'clusterbench:pass ...' or 'pass ...', else the GPU activity span with its leading and trailing "
    "set-up cut off). Frames come from FRAMES or --frames, else frames=N in the range text; without "
    "them only totals are shown. Busy time is an interval union per engine (kernel, graph, h2d, d2h, "
    "d2d, p2p, um_*, memset, other), per (process, device). Idle gaps of at least 0.1 ms get a cause "
    "(module_load, alloc, sync, host, profiler, unknown); set-up gaps are kept apart from the loop's. "
    "The trace is opened read-only; times are ns in JSON, ms or µs/frame in the table."
)


@boundary
def analyze(
    trace: Path = typer.Argument(..., help="nsys SQLite export (.sqlite) or report (.nsys-rep, .qdrep).", show_default=False),
    frames: int | None = typer.Argument(None, help="Frames processed inside the window (a count; see --frames for other ways).", show_default=False),
    window: str | None = TRACE_WINDOW,
    range_name: str | None = TRACE_RANGE,
    frames_spec: str | None = TRACE_FRAMES,
    device: int | None = typer.Option(None, "--device", help="Only this CUDA device id."),
    pid: int | None = typer.Option(None, "--pid", help="Only this process id."),
    by_stream: bool = typer.Option(False, "--by-stream", help="Add a per-stream breakdown. Reads the trace whole (memory grows with it)."),
    by_kernel: bool = typer.Option(False, "--by-kernel", help="Add kernels by name (launches, busy ms, µs/frame, share, min/median/max µs) and copies by size class (GB/s). --json always has both."),
    mangled: bool = typer.Option(False, "--mangled", help="Kernel names in full (mangled) instead of base names."),
    what_if: list[str] | None = typer.Option(
        None, "--what-if", metavar="SPEC",
        help="ENGINE=FACTOR or COPY_gbps=RATE: recompute the bars and the roofline as if ENGINE's busy time were "
        "times FACTOR (kernel=0.5; host=0.5 for the busiest launching thread), or a copy engine moved its bytes "
        "at RATE GB/s (h2d_gbps=375). Repeatable. Engines scale independently; overlap is kept.",
    ),  # fmt: skip
    plot: Path | None = typer.Option(
        None, "--plot", metavar="FILE",
        help="Draw a timeline (one lane per engine and stream, idle gaps marked by cause) and the per-engine "
        "bars into FILE (.png, .svg or .pdf; needs matplotlib: pip install 'clusterbench\\[plot]'). Reads the trace whole "
        "(memory grows with it).",
    ),  # fmt: skip
    plot_span: float | None = typer.Option(
        None, "--plot-span", metavar="MS", help="Timeline length in ms (default: about 3 batches)."
    ),
    plot_start: str | None = typer.Option(
        None, "--plot-start", metavar="MS|longest-gap",
        help="Timeline start, in ms from the window start, or longest-gap (just before the longest idle gap).",
    ),
    export_trace: Path | None = typer.Option(
        None, "--export-trace", metavar="FILE",
        help="Write the window as a Chrome trace-event JSON file (opens in ui.perfetto.dev): one track per engine "
        "and stream, one per launching host thread, idle gaps labelled by cause. Reads the trace whole (memory grows "
        "with it).",
    ),  # fmt: skip
    untraced_file: Path | None = typer.Option(
        None, "--untraced", metavar="FILE",
        help="The <label>.untraced.json of clusterbench probe --what-binds: split this trace's critical path again "
        "without the profiler (each part measured on its own: the untraced frame and host time of the injection "
        "library's runs, the unit's latency and round trip) and name the causes of its idle (docs/analyze.md, "
        "\"The untraced split\"). Reads the trace whole (memory grows with it).",
    ),  # fmt: skip
    as_json: bool = JSON,
    as_csv: bool = typer.Option(False, "--csv", help="Print CSV to stdout (one row per group and engine)."),
) -> None:
    from clusterbench.analyzers import analysis as core
    from clusterbench.analyzers.whatif import parse_changes
    from clusterbench.errors import InputError

    from clusterbench.io.outputs import refuse_inputs_as_outputs, refuse_stdout_as_input

    if as_json and as_csv:
        raise InputError("--json and --csv cannot be combined", hint="pick one output format")
    # before anything is read or written: no output is the trace (by path or by inode)
    inputs = [("TRACE", trace), ("--untraced", untraced_file)] + _report_exports(trace)
    refuse_stdout_as_input(inputs, "--json" if as_json else "--csv" if as_csv else "the table")
    refuse_inputs_as_outputs([("--plot", plot), ("--export-trace", export_trace)], inputs)
    req = core.request(frames, range_name, device, pid, by_stream, parse_changes(what_if or []), window, frames_spec, mangled)
    start_ms, at_longest_gap = _plot_start(plot_start)
    _check_plot_span(plot_span)
    if plot is not None:  # before any output: a bad name or a missing matplotlib costs nothing
        from clusterbench.render.timeline import check_plot_path, require_matplotlib

        check_plot_path(plot)
        require_matplotlib()
    if export_trace is not None:
        from clusterbench.render.timeline import check_export_path

        check_export_path(export_trace)
    measured = None
    if untraced_file is not None and as_csv:
        raise InputError("--untraced adds the untraced split to the table and to --json; --csv has no place for it",
                         hint="drop --csv, or drop --untraced")
    if untraced_file is not None:  # a bad file costs nothing: read before the trace
        from clusterbench.io.untraced import load_untraced

        measured = load_untraced(untraced_file)
    cache: dict = {}
    data = None
    # the picture, the trace export and the untraced split need the rows at hand, and the per-stream tables are
    # made from them: they read the trace whole
    whole_options = [name for name, given in (("--plot", plot is not None), ("--export-trace", export_trace is not None),
                                              ("--untraced", measured is not None), ("--by-stream", by_stream)) if given]
    rows_needed = bool(whole_options)
    whole_note = _whole_read_check(trace, req, whole_options)
    progress = _progress(trace)
    with progress as on_progress:
        if whole_note:
            progress.note(whole_note)
        if not rows_needed:
            result = core.analyze_file(trace, req, on_progress, trace_label=str(trace), on_note=progress.note)
        else:
            data = core.load_trace(trace, req=req, on_progress=on_progress, cache=cache)
            result = core.analyze(data, trace_label=str(trace), req=req, cache=cache, on_progress=on_progress)

    from clusterbench.render import analyze as render

    untraced = None
    if measured is not None:
        untraced = _untraced(data, result, measured)
    table = not (as_json or as_csv)
    for message in result.warnings:
        if table and message == result.graph_warning:
            continue  # the table shows it in place, once
        warn(message)
    if as_json:
        typer.echo(render.render_json(result) if untraced is None else _with_untraced(render.render_json(result), untraced))
    elif as_csv:
        typer.echo(render.render_csv(result), nl=False)
    else:
        con = stdout_console()
        with con.capture() as captured:
            for item in render.render_analysis(result, by_kernel=by_kernel):
                con.print(item)
            if untraced is not None:
                from clusterbench.render.untraced import render_untraced

                con.print(render_untraced(Path(trace).name, untraced, con.width), markup=False, highlight=False,
                          soft_wrap=True)
        text = captured.get()
        if not con.is_terminal:  # piped: no padding at line ends (tables and wrapped prose pad them)
            text = "\n".join(line.rstrip() for line in text.split("\n"))
        typer.echo(text, nl=False)
    notes = []
    if plot is not None:
        from clusterbench.analyzers.timeline import build_timeline
        from clusterbench.render.timeline import render_timeline_plot

        tl = build_timeline(data, result.primary, span_ms=plot_span, start_ms=start_ms, at_longest_gap=at_longest_gap)
        out = render_timeline_plot(result, result.primary, tl, plot)
        notes.append(f"plot: wrote {out} ({tl.span_source})")
    if export_trace is not None:
        from clusterbench.analyzers.timeline import build_export
        from clusterbench.render.timeline import write_chrome_trace

        ex = build_export(data, result.primary)
        out = write_chrome_trace(ex, export_trace)
        notes.append(f"trace: wrote {out} ({ex.event_count:,} events; open it in ui.perfetto.dev)")
    for note in notes:
        typer.echo(note, err=not table)  # with --json or --csv, stdout holds only that


def _untraced(data: object, result: object, measured: object) -> object:
    """The measured record with this trace's path, untraced split and idle causes, and its delay test replayed on
    this trace (frames counted at kernel launches or graph launches: the calls the library marks)."""
    import dataclasses

    from clusterbench.analyzers.replay import replay_group
    from clusterbench.analyzers.untraced import group_links, idle_causes, path_structure, untraced_split
    from clusterbench.run.inject import mark_of

    built = group_links(data, result.primary)  # type: ignore[attr-defined]
    path = path_structure(data, result.primary, built)  # type: ignore[attr-defined]
    if path is None:
        warn("--untraced: the trace has no critical path with frames (no CUDA API rows, or frames unknown): no "
             "untraced split", "give the frames (FRAMES or --frames) and a trace with CUDA API calls")
        return dataclasses.replace(measured, path=None, split=None, idle=None)  # type: ignore[type-var]
    replayed: tuple = ()
    delay = measured.delay  # type: ignore[attr-defined]
    mark, _ = mark_of(result.primary.frames.definition)  # type: ignore[attr-defined]
    if delay is not None and mark is not None:  # the record's delays replayed on this trace, at its frames' calls
        replayed = replay_group(data, result.primary, mark, delay.k_us, built)  # type: ignore[attr-defined]
    return dataclasses.replace(measured, path=path, split=untraced_split(path, measured.host, measured.costs),  # type: ignore[type-var,attr-defined]
                               idle=idle_causes(path, measured.costs), replay=replayed)  # type: ignore[attr-defined]


def _with_untraced(text: str, record: object) -> str:
    import json

    doc = json.loads(text)
    doc["untraced"] = record.to_json()  # type: ignore[attr-defined]
    return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False)


def _report_exports(trace: Path) -> list[tuple[str, Path]]:
    """A report's SQLite exports (beside it, and in the cache folder), which analyze reads in its place."""
    from clusterbench.io.nsys.export import CACHE_DIR, REP_SUFFIXES

    suffix = next((s for s in REP_SUFFIXES if trace.name.endswith(s)), None)
    if suffix is None:
        return []
    sibling = trace.with_name(trace.name[: -len(suffix)] + ".sqlite")
    return [("the export of TRACE", sibling), ("the cached export of TRACE", trace.parent / CACHE_DIR / sibling.name)]


def _plot_start(text: str | None) -> tuple[float, bool]:
    from clusterbench.errors import InputError

    if text is None:
        return 0.0, False
    if text.strip() == "longest-gap":
        return 0.0, True
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"--plot-start {text!r} is neither a number of ms nor longest-gap", hint="e.g. --plot-start 12.5 or --plot-start longest-gap") from None
    if not 0 <= value <= MAX_PLOT_MS:  # NaN fails too
        raise InputError(f"--plot-start takes ms from 0 to {MAX_PLOT_MS:g} (from the window's start), got {text}",
                         hint="e.g. --plot-start 12.5 or --plot-start longest-gap")
    return value, False


# --plot-start and --plot-span in ms: at most 10^12 ms (31 years), far past any trace, far below where
# nanoseconds overflow 64 bits
MAX_PLOT_MS = 1e12


def _check_plot_span(span: float | None) -> None:
    from clusterbench.errors import InputError

    if span is not None and not 0 < span <= MAX_PLOT_MS:  # NaN fails too
        raise InputError(f"--plot-span takes ms above 0 and at most {MAX_PLOT_MS:g}, got {span:g}",
                         hint="e.g. --plot-span 5 (a few batches)")


class _progress:
    """A progress bar on stderr while the trace is read (chunks) and analysed (steps), when stderr is a
    terminal (big traces take seconds); nothing otherwise. ``note`` prints a line about how the trace is
    read (``analyze: ...`` on stderr, above the bar when there is one)."""

    def __init__(self, trace: Path) -> None:
        self.trace = trace
        self.bar = None
        self.tasks: dict[str, object] = {}

    def note(self, message: str) -> None:
        from clusterbench.cli.common import print_message

        print_message("analyze:", message, self.bar.console if self.bar is not None else None)

    def __enter__(self):
        con = stderr_console()
        if not con.is_terminal:
            return None
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                            TimeElapsedColumn(), console=con, transient=True)  # fmt: skip
        self.bar.start()
        return self.update

    def update(self, what: str, done: int, total: int) -> None:
        task = self.tasks.get(what)
        if task is None:
            label = f"analysing {self.trace.name}" if what == "analysis" else f"reading {self.trace.name}: {what}"
            task = self.tasks[what] = self.bar.add_task(label, total=total)
        self.bar.update(task, completed=done, total=total)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()


def _whole_read_check(trace: Path, req, options: list[str]) -> str | None:  # noqa: ANN001
    """Before the read: where ``options`` (those that read the trace whole) are given for a trace past the
    rows a whole read takes within the memory limit, the note that says what the read will take; an
    InputError where it would take more memory than the system has available (unless
    CLUSTERBENCH_ANALYZE_PATH=whole asks for the whole read all the same). None otherwise."""
    if not options:
        return None
    from clusterbench.analyzers import analysis as core
    from clusterbench.errors import InputError

    need = core.whole_read(trace, req=req)
    if not need.over_limit and need.fits:
        return None
    named = " and ".join([", ".join(options[:-1]), options[-1]] if len(options) > 1 else options)
    what = f"{named} read{'' if len(options) > 1 else 's'} the trace whole: {need.words()}"
    if need.refused:
        way = f"without {named} analyze reads a trace this size in time slabs, in bounded memory; or " if need.over_limit else ""
        raise InputError(f"{what}, {need.beyond()}",
                         hint=f"{way}run it where more memory is free ({core.PATH_ENV}=whole reads it whole all the same)")
    rest = "" if need.fits else f", {need.beyond()} (as asked: {core.PATH_ENV}=whole)"
    return (f"{what}{rest}; without {named} a trace of more than {need.limit:,} rows is read in time slabs, "
            "in bounded memory")
