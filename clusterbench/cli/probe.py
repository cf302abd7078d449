"""clusterbench probe: trace each config under a profiler, analyze it, and measure sustained FPS."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, List, Mapping, Optional, Sequence

import typer
from rich.text import Text

from clusterbench.cli import options
from clusterbench.cli.common import boundary, stderr_console, stdout_console, warn
from clusterbench.run.probe import DEFAULT_TIMEOUT_S

if TYPE_CHECKING:
    from clusterbench.run.probe import ProbeEvent, ProbePlan, ProbeRequest
    from clusterbench.run.tasks import ExecutorOptions

HELP = (
    "Trace every config of configs.toml on the GPU and write results/<date>_<f32|f64|exec>[_tag]/; or probe "
    "one program as it is: clusterbench probe \\[options] -- PROGRAM ARGS...\n\n"
    "Per config: one workload process (pedestal, one batched pass, exit) traced with nsys (or the "
    "in-process CUPTI tracer): clusterbench's CuPy finder, or with workload = \"command\" any program "
    "that speaks the protocol of docs/workloads.md. Its SQLite export is analyzed over the pass range into per-engine µs per frame and "
    "the roofline, then sustained FPS measured without any profiler in --processes fresh processes (default 3; "
    "the median of their medians, and their spread), shown against the roofline with the profiler overhead. "
    "Once after the guards, the unit is measured: the GPU's pinned link (H2D alone, D2H alone, both at once), "
    "PCIe, NUMA, CPU model and clocks (env.json's unit block), so that compare can tell a slower host from a "
    "slower build. probes.csv keeps one row per "
    "config: re-running one config replaces its row only. The config is validated before any GPU "
    "call; the idle-GPU and fresh-build guards run before tracing (exit 3 when they refuse, unless "
    "--force). Ctrl-C keeps finished rows (exit 130). A config that fails (its --timeout, an exit "
    "status) gets a row marked failed and the others go on (exit 1 at the end).\n\n"
    "A program as it is (workload = \"exec\", or after --) needs no NVTX range and no result record: it is "
    "traced whole (or inside --capture), analyzed over --window with --frames as analyze takes them, and "
    "its sustained figure comes from its own printed rate (--rate REGEX), its wall time (--sustained wall, "
    "with --frames N) or the traced window (--sustained trace, the default without --rate, under the "
    "profiler). Its own rate (--rate) and kernel time (--kernel-time) are set against the trace. A program "
    "whose device-launched CUDA graphs a node-level trace loses is traced again at graph level. --scan "
    "NAME=V1,V2 runs every config at every value of a placeholder its command takes. --dry-run prints "
    "every command line and exits 0, with or without a GPU (docs/probe.md).\n\n"
    "--gpus all|0,2 runs each config on several GPUs of this node at once: every GPU gets its own guard "
    "(a busy one refuses the run, or with --force is left out) and its own process, named by UUID and "
    "pinned to the GPU's nearest CPU cores and memory node; per config the trace runs on the first GPU, "
    "sustained FPS on it alone (solo), then on every GPU at once, adding the rows <label>@gpuN.solo, "
    "<label>@gpuN and <label>@all (summed FPS, slowest GPU, scaling efficiency). --executor slurm|local "
    "submits one task per config through submitit and merges their dirs (docs/scaling.md).\n\n"
    "Every row written also lands in the history database (results/history.db, or --db PATH; "
    "clusterbench history). --session NAME joins this probe to a named session, so that probes of one "
    "sitting (before and after in one allocation) compare as one session; a campaign is one session."
)

# The options --request replaces: a request file says all of them.
_REQUEST_REPLACES = ("frames", "only", "tag", "config", "tracer", "repeat", "processes", "results_dir", "max_util",
                     "require_clean", "force", "data", "gpus", "executor", "partition", "gpus_per_task",
                     "array_parallelism", "label", "window", "capture", "rate", "rate_unit", "kernel_time",
                     "kernel_time_unit", "sustained", "wall_start", "wall_end", "timeout", "scan", "program",
                     "what_binds", "delay_processes", "delay_us")


@boundary
def probe(
    ctx: typer.Context,
    frames: Optional[str] = typer.Option(
        None, "--frames", metavar="N|DEFINITION",
        help="Data frames per config, overriding configs.toml (2000 for a smoke run). For a program as it is, "
             "also how the analysis counts the window's frames, as analyze takes it: kernel:REGEX, "
             "range:NAME\\[@DOMAIN], graph or h2d-bytes:N."),
    only: Optional[List[str]] = typer.Option(None, "--only", help="Probe only this config label; repeat for more."),
    tag: Optional[str] = typer.Option(None, "--tag", help="Suffix for the results dir: results/<date>_<f32|f64>_TAG."),
    config: Optional[Path] = options.CONFIG,
    tracer: str = options.TRACER,
    repeat: int = options.REPEAT,
    processes: int = options.PROCESSES,
    results_dir: Path = options.RESULTS_DIR,
    max_util: float = options.MAX_UTIL,
    require_clean: bool = options.REQUIRE_CLEAN,
    force: bool = options.FORCE,
    data: Optional[Path] = typer.Option(
        None, "--data", help="Frames from this .npy (uint16 frames x rows x cols, dark frames first) for every "
                             "config, instead of the synthetic generator."),
    as_json: bool = options.JSON,
    wide: bool = typer.Option(
        False, "--wide",
        help="One summary row per config (about 115-130 columns). Without it the table is one row per config "
             "when the output is at least 120 columns wide and the table fits, else two tables that fit 80 "
             "columns: the trace figures, then the FPS figures. Every figure is in both layouts."),
    gpus: Optional[str] = options.GPUS,
    executor: Optional[str] = typer.Option(
        None, "--executor", metavar="slurm|local",
        help="Do not probe here: submit one task per config through submitit (pip install 'clusterbench\\[slurm]'). "
             "slurm: a job array per --partition, from a Slurm login node; local: the same tasks on this machine, "
             "--array-parallelism at a time. Each task runs clusterbench probe --request FILE (this probe's "
             "request for its one config) into its own dir under <results dir>.campaign/tasks/, and this process "
             "merges them into the results dir, each row with its host and GPU. A failed or lost task is exit 1 "
             "after the merge; its finished rows are kept."),
    partition: Optional[List[str]] = typer.Option(
        None, "--partition",
        help="With --executor slurm (required there): the Slurm partition to submit to. Repeat it, one partition "
             "per GPU type, to run every config once on each; rows are then keyed <label>@<partition>."),
    gpus_per_task: Optional[int] = typer.Option(
        None, "--gpus-per-task",
        help="With --executor: GPUs each task asks for (default 1; Slurm: --gpus-per-task). Give more, with "
             "--gpus all, to probe every GPU of each task's node at once."),
    db: Optional[Path] = options.DB,
    session: Optional[str] = typer.Option(
        None, "--session", metavar="NAME",
        help="The session id of this probe's rows (default: a fresh one). Probes given one NAME compare as one "
             "session: their multi-stream transfers are judged by the floor, not the cross-session drift bound."),
    array_parallelism: Optional[int] = typer.Option(
        None, "--array-parallelism",
        help="With --executor: at most this many tasks at once (Slurm: --array=0-N%K; default: as many as Slurm "
             "allows). Local tasks share this machine's GPUs, so they run 1 at a time unless this says more."),
    request_file: Optional[Path] = typer.Option(
        None, "--request", metavar="FILE",
        help="Run the probe a request file describes (JSON, as a campaign writes for each of its tasks: "
             "<task dir>/request.json) instead of one given by options; only --json and --wide go with it."),
    label: Optional[str] = typer.Option(
        None, "--label", help="The label of a program given after -- (default: the program's file name)."),
    window: Optional[str] = options.TRACE_WINDOW,
    capture: Optional[str] = typer.Option(
        None, "--capture", metavar="nvtx:NAME[@DOMAIN]|cudaProfilerApi",
        help="A program as it is: trace only inside this NVTX range (any domain; strings need not be registered) "
             "or between its cudaProfilerStart and Stop; the program then runs on to its end."),
    rate: Optional[str] = typer.Option(
        None, "--rate", metavar="REGEX",
        help="A program as it is: the line where it prints its own rate; the number is the regex's group "
             "'value' or first group, its unit --rate-unit or the word after it (fps, frames/s, events/s or Hz, "
             "each with an optional k or M prefix: kHz is 1,000 FPS; MB/s, GB/s, GiB/s..., made GB/s; ms/frame, "
             "us/frame). The sustained figure then comes from it (the last match of each untraced run), and it "
             "is set against the trace."),
    rate_unit: Optional[str] = typer.Option(
        None, "--rate-unit", metavar="UNIT",
        help="The unit of --rate's number, where the program prints none after it: fps, frames/s, events/s, Hz "
             "(each with an optional k or M prefix: kfps, k frames/s, kHz, MHz), B/s, kB/s, MB/s, GB/s, TB/s, "
             "KiB/s, MiB/s, GiB/s, ms/frame or us/frame. Frame rates become FPS, byte rates GB/s."),
    kernel_time: Optional[str] = typer.Option(
        None, "--kernel-time", metavar="REGEX",
        help="A program as it is: the line where it prints its per-frame kernel time (ms/frame or us/frame), set "
             "against the trace's kernel bar."),
    kernel_time_unit: Optional[str] = typer.Option(
        None, "--kernel-time-unit", metavar="ms/frame|us/frame", help="The unit of --kernel-time's number."),
    sustained: Optional[str] = typer.Option(
        None, "--sustained", metavar="rate|wall|trace",
        help="A program as it is: where the sustained figure comes from: rate (its own printed rate, --rate; the "
             "default with --rate), wall (--frames N over its wall time between --wall-start and --wall-end, or "
             "over its whole run, start-up included) or trace (the traced window's frames over its length, under "
             "the profiler; the default without --rate)."),
    wall_start: Optional[str] = typer.Option(
        None, "--wall-start", metavar="REGEX", help="With --sustained wall: the line the timed part starts at."),
    wall_end: Optional[str] = typer.Option(
        None, "--wall-end", metavar="REGEX", help="With --sustained wall: the line the timed part ends at."),
    timeout: float = typer.Option(
        DEFAULT_TIMEOUT_S, "--timeout", metavar="S",
        help="Seconds each run of a config's program may take (traced or not); past it its process group is "
             "ended, its row marked failed with the program's last lines, and the other configs go on."),
    scan: Optional[List[str]] = typer.Option(
        None, "--scan", metavar="NAME=V1,V2,...",
        help="Run every config at each value of placeholder NAME (streams, batch, ...; repeat for a grid); a "
             "command must use {NAME}. The summary adds each point's sustained FPS against its roofline (the "
             "tallest bar) and its one-stream bound (the sum of the bars)."),
    plot: Optional[Path] = typer.Option(
        None, "--plot", metavar="FILE",
        help="With --scan: draw FPS against the first scanned placeholder to FILE (.png, .svg or .pdf; needs "
             "matplotlib)."),
    what_binds: bool = typer.Option(
        False, "--what-binds",
        help="A program as it is (frames: --frames kernel:REGEX or graph): after its sustained runs, what binds "
             "it without the profiler. The delay test adds k µs per frame to the host (a spin at its marking "
             "call), the GPU (a spin kernel in its stream) and the link (an H2D copy of k µs) one at a time "
             "through clusterbench's injection library (CUPTI callbacks, built here with nvcc), in "
             "--delay-processes processes each, and reports each slope (frame µs per µs of delay: about 1 "
             "binds, about 0 slack); the same runs give the untraced frame and host bar; a latency program "
             "measures the GPU's latency between dependent work and a synchronize's round trip with and without "
             "nsys; the trace's critical path is split again without the profiler (docs/probe.md, \"The "
             "untraced frame\")."),
    delay_processes: int = typer.Option(
        3, "--delay-processes", metavar="P", help="With --what-binds: fresh processes per point of the delay test."),
    delay_us: Optional[float] = typer.Option(
        None, "--delay-us", metavar="K",
        help="With --what-binds: the delay per frame in µs (default: half the untraced frame, or of the program's own printed frame where the marks give no period; at least 2 µs)."),
    dry_run: bool = typer.Option(
        False, "--dry-run",
        help="Print the plan (every command line, nsys options, placeholders filled in, the guards) and exit 0, "
             "with or without a GPU."),
    program: Optional[List[str]] = typer.Argument(
        None, metavar="-- PROGRAM ARGS",
        help="A program to probe as it is (after --), instead of configs.toml."),
) -> None:
    from clusterbench.errors import InputError
    from clusterbench.io.history import check_session_name, default_db
    from clusterbench.render.probe import (ProbeProgress, outcome_json, render_checks, render_dry_run, render_footer,
                                           render_unit)
    from clusterbench.run.campaign import executor_options_for
    from clusterbench.run.config import DEFAULT_CONFIG_FILE, ExecOptions
    from clusterbench.run.dryrun import dry_run as plan_dry_run
    from clusterbench.run.probe import (REPLACE_HINT, ProbeRequest, plan_probe, preflight, replace_notice,
                                        require_no_failures, run_probe)

    argv = tuple(["clusterbench", *sys.argv[1:]])
    if as_json and wide:
        raise InputError("--json and --wide cannot go together: --wide lays out the table, --json prints no table",
                         hint="drop one of them")
    if request_file is not None:
        request = _read_request(ctx, request_file, argv)
    else:
        if program and config is not None:
            raise InputError("give a program after -- or --config, not both",
                             hint="clusterbench probe [options] -- PROGRAM ARGS..., or clusterbench probe --config FILE")
        count, spec = _frames_option(frames)
        request = ProbeRequest(
            config_path=Path(DEFAULT_CONFIG_FILE) if config is None else config, only=tuple(only or ()),
            frames=count, tag=tag, tracer=tracer, repeat=repeat, processes=processes, results_root=results_dir,
            max_util_pct=max_util,
            require_clean=require_clean, force=force, data=data, argv=argv, gpus=gpus,
            session=None if session is None else check_session_name(session),
            history_db=default_db(results_dir) if db is None else db,
            program=tuple(program or ()), label=label, timeout_s=timeout, scan=tuple(scan or ()),
            what_binds=what_binds, delay_processes=delay_processes, delay_us=delay_us,
            measure=ExecOptions(frames_spec=spec, window=window, capture=capture, rate=rate, rate_unit=rate_unit,
                                kernel_time=kernel_time, kernel_time_unit=kernel_time_unit, sustained=sustained,
                                wall_start=wall_start, wall_end=wall_end),
        )
    plan = plan_probe(request)  # step 1: config and option errors exit 2 before any GPU call
    _check_outputs(request, plan, request_file, plot, as_json)  # no output over an input; the dirs writable
    _check_memory(plan, host=not dry_run and executor is None)  # the GPU's memory, where NVML can tell
    if plot is not None:
        from clusterbench.render.plot import check_plot_path

        if not plan.scans:
            raise InputError("--plot draws FPS against a scanned placeholder: give --scan NAME=V1,V2,...",
                             hint="add --scan (e.g. --scan streams=1,2,4), or drop --plot")
        check_plot_path(plot)
    campaign_dir = plan.results_dir.with_name(plan.results_dir.name + ".campaign")
    opts = executor_options_for(executor, campaign_dir, tuple(partition or ()), gpus_per_task, array_parallelism)
    if dry_run:
        if opts is not None:
            raise InputError("--dry-run shows what this machine would run; a campaign's tasks run elsewhere",
                             hint="drop --executor to see one task's plan")
        from clusterbench.run.config import no_gpu_bounds

        dry = plan_dry_run(plan, request)
        if as_json:
            typer.echo(json.dumps({**dry.to_json(), "bounds": no_gpu_bounds()}, indent=2, allow_nan=False))
        else:
            con = stdout_console()
            con.print(render_dry_run(dry, con.width), markup=False, highlight=False, soft_wrap=True)
            import textwrap

            con.print(textwrap.fill(f"bounds checked, with or without a GPU: {no_gpu_bounds()}", width=con.width,
                                    subsequent_indent="  ", break_on_hyphens=False), markup=False, highlight=False)
        return
    notice = replace_notice(plan)  # which rows this probe replaces, said before any GPU work
    if notice is not None:
        warn(notice, REPLACE_HINT)
    if opts is not None:  # the parent of a campaign touches no GPU: the tasks probe on their nodes
        _campaign(request, plan, opts, as_json, wide)
        return
    nsys = preflight(plan)  # no GPU or no nsys: exit 1, before any progress is drawn
    err = stderr_console()
    from clusterbench.run.probe import PHASES
    from clusterbench.run.whatbinds import PHASE as WHAT_BINDS

    phases = PHASES[1:] + ((WHAT_BINDS,) if plan.what_binds is not None else ())
    with ProbeProgress(err, [c.label for c in plan.configs], phases) as progress:
        def on_event(event: ProbeEvent) -> None:
            if event.kind == "warning" and event.message == notice:
                return  # said above, before the GPU was asked
            if event.kind == "warning":  # above the bars, through the one message formatter
                warn(str(event.message), event.hint, console=progress.console)
            else:
                progress(event)

        outcome = run_probe(plan, request, on_event=on_event, nsys=nsys)
    if plot is not None:
        _plot_scan(outcome, plan, plot)
    if as_json:
        typer.echo(json.dumps(outcome_json(outcome), indent=2, allow_nan=False))
    else:
        _print_summary(outcome.rows, f"clusterbench probe: {plan.results_dir}", wide)
        if plan.scans:
            _print_scan(outcome, plan)
        if outcome.untraced:
            from clusterbench.render.untraced import render_untraced

            out = stdout_console()
            for label, record in outcome.untraced.items():
                out.print(render_untraced(label, record, out.width), markup=False, highlight=False, soft_wrap=True)
        for line in render_checks(outcome.checks):  # wrapped at stderr's width, like every message
            err.print(Text(line), highlight=False, soft_wrap=False)
        unit_line = render_unit(outcome.unit)
        if unit_line is not None:
            err.print(unit_line, markup=False, highlight=False)
        err.print(render_footer(outcome), markup=False, highlight=False)
    require_no_failures(outcome)  # a config failed: exit 1 now that every config ran and its row is written


def _check_outputs(request: ProbeRequest, plan: ProbePlan, request_file: Optional[Path], plot: Optional[Path],
                   as_json: bool) -> None:
    """Before any GPU call (and in --dry-run too): standard output, --db, --plot and the results dir are none
    of the probe's inputs (the config, --data, --request); the results dir can be written; --db is a
    history database or a new file."""
    from clusterbench.io.history import check_history_file
    from clusterbench.io.outputs import check_writable_dir, refuse_inputs_as_outputs, refuse_stdout_as_input

    inputs = [("--config", request.config_path), ("--data", request.data), ("--request", request_file)]
    refuse_stdout_as_input(inputs, "--json" if as_json else "the output")
    refuse_inputs_as_outputs([("--db", request.history_db), ("--plot", plot)], inputs,
                             folders=[("the results dir", plan.results_dir)])
    check_writable_dir(plan.results_dir, "--results-dir")
    if request.history_db is not None:
        check_history_file(request.history_db)
        check_writable_dir(Path(request.history_db).parent, "--db")


def _check_memory(plan: ProbePlan, host: bool) -> None:
    """Configs that need more device memory than the largest GPU here has (when NVML can tell; plan_probe
    checked the bound without a GPU), or (``host``: on the machine that runs them) more host memory than
    this machine has: ConfigError (exit 2) with the numbers, before any GPU work."""
    import os

    from clusterbench.errors import ConfigError
    from clusterbench.run.config import resource_problems
    from clusterbench.run.guards import gpu_memory_totals
    from clusterbench.run.probe import RESOURCE_HINT

    totals = gpu_memory_totals()
    host_bytes = None
    if host:
        try:
            host_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            host_bytes = None
    if not totals and host_bytes is None:
        return
    problems = resource_problems(plan.configs, plan.timeout_s, max(totals) if totals else None, host_bytes)
    if problems:
        raise ConfigError("\n".join(problems), hint=RESOURCE_HINT)


def _frames_option(text: Optional[str]) -> tuple[Optional[int], Optional[str]]:
    """--frames: a count (data frames, or an exec program's frame count), or a frames definition."""
    from clusterbench.errors import InputError

    if text is None:
        return None, None
    from clusterbench.model.params import INT64_MAX

    t = text.strip()
    hint = "use e.g. --frames 2000, or --frames kernel:REGEX for a program as it is"
    if re.fullmatch(r"[+-]?\d+", t):
        n = int(t)
        if n < 1:
            raise InputError(f"--frames must be a positive integer or a frames definition, got {text!r}", hint=hint)
        if n > INT64_MAX:
            raise InputError(f"--frames {n:,} is more than a 64-bit integer holds ({INT64_MAX:,})", hint=hint)
        return n, None
    try:
        value = float(t)
    except ValueError:
        return None, t
    raise InputError(f"--frames takes a whole number of frames, got {text!r}, a {'float' if value == value else 'NaN'}"
                     + (f" ({value:,.0f})" if value == value and abs(value) != float("inf") and abs(value) >= 1e6 else ""),
                     hint=hint)


def _print_scan(outcome: object, plan: object) -> None:
    from clusterbench.render.probe import render_scan
    from clusterbench.run.scan import scan_points

    out = stdout_console()
    out.print(render_scan(scan_points(outcome.rows, plan.configs, outcome.untraced), plan.scans, out.width))  # type: ignore[attr-defined]


def _plot_scan(outcome: object, plan: object, path: Path) -> None:
    from clusterbench.render.plot import render_scan_plot
    from clusterbench.run.scan import scan_points

    render_scan_plot(scan_points(outcome.rows, plan.configs, outcome.untraced), plan.scans, path)  # type: ignore[attr-defined]


def _read_request(ctx: typer.Context, path: Path, argv: tuple[str, ...]) -> ProbeRequest:
    """The request a file holds (a campaign task's), with this command line as its argv. InputError (exit 2)
    for an unreadable file, or for options the file already says."""
    import dataclasses

    from clusterbench.errors import InputError
    from clusterbench.run.probe import ProbeRequest

    def given_here(name: str) -> bool:  # on the command line (or in the environment), not a default
        source = ctx.get_parameter_source(name)
        return source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT", "PROMPT")

    given = [name for name in _REQUEST_REPLACES if given_here(name)]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise InputError(f"--request {path} says every probe option; {flags} cannot go with it",
                         hint="drop those options, or drop --request and give the options alone")
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"--request {path}: no such file", hint="give the request.json of a campaign task") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"--request {path} is not readable JSON: {exc}",
                         hint="give the request.json of a campaign task") from None
    return dataclasses.replace(ProbeRequest.from_json(doc, str(path)), argv=argv)


def _print_summary(rows: Sequence[Mapping[str, object]], title: str, wide: bool) -> None:
    from rich.console import Console

    from clusterbench.render.probe import render_summary, wide_width

    out = stdout_console()
    if wide and wide_width(rows) > out.width:  # asked for: laid out at its own width, never folded
        out = Console(highlight=False, width=wide_width(rows))
    out.print(render_summary(rows, title=title, width=out.width, wide=wide or None))


def _campaign(request: ProbeRequest, plan: ProbePlan, opts: ExecutorOptions, as_json: bool, wide: bool) -> None:
    from clusterbench.io.results import load_results
    from clusterbench.render.probe import render_campaign_progress
    import dataclasses
    import uuid

    from clusterbench.run import campaign as ex

    # a campaign is one session: every task probes with its id
    request = dataclasses.replace(request, session=request.session or uuid.uuid4().hex)
    specs = ex.plan_campaign(request, [c.label for c in plan.configs], opts, opts.folder)
    err = stderr_console()
    outcome = ex.run_campaign(specs, opts, plan.results_dir, opts.folder, argv=request.argv,
                              on_progress=lambda p: err.print(render_campaign_progress(p), markup=False))
    for problem in outcome.merge.problems:
        warn(problem)
    rows = load_results(plan.results_dir).rows if outcome.merge.labels else ()
    if rows:
        from clusterbench.io.history import record_probe

        problem = record_probe(request.history_db, plan.results_dir)  # the merged dir, from this process
        if problem is not None:
            warn(problem)
    if as_json:
        typer.echo(json.dumps({"results_dir": str(plan.results_dir), "campaign_dir": str(opts.folder),
                               "tasks": [r.to_json() for r in outcome.results],
                               "rows": [r.to_json() for r in rows]}, indent=2,
                              allow_nan=False))
    elif rows:
        _print_summary(rows, f"clusterbench probe: {plan.results_dir}", bool(wide))
    ex.require_all_tasks_ok(outcome)  # exit 1 naming each failed task; the merged rows are kept
