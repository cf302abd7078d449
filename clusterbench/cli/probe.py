"""clusterbench probe: trace each config under a profiler, analyze it, and measure sustained FPS."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from clusterbench.cli.common import boundary, stderr_console, stdout_console

HELP = (
    "Trace every config of configs.toml on the GPU and write results/<date>_<f32|f64>[_tag]/.\n\n"
    "Per config: one workload process (pedestal, one batched pass, exit) traced with nsys (or the "
    "in-process CUPTI tracer): clusterbench's CuPy finder, or with workload = \"command\" any program "
    "that speaks the protocol of docs/workloads.md. Its SQLite export is analyzed over the pass range into per-engine µs per frame and "
    "the roofline, then sustained FPS measured without any profiler (median and spread over --repeat "
    "runs), shown against the roofline with the profiler overhead. probes.csv keeps one row per "
    "config: re-running one config replaces its row only. The config is validated before any GPU "
    "call; the idle-GPU and fresh-build guards run before tracing (exit 3 when they refuse, unless "
    "--force). Ctrl-C keeps finished rows (exit 130).\n\n"
    "--gpus all|0,2 runs each config on several GPUs of this node at once (per-GPU and aggregate rows); "
    "--executor slurm|local submits one task per config through submitit and merges their dirs "
    "(docs/scaling.md).\n\n"
    "Every row written also lands in the history database (RESULTS_DIR/history.db, or --db PATH; "
    "clusterbench history). --session NAME joins this probe to a named session, so that probes of one "
    "sitting (before and after in one allocation) compare as one session; a campaign is one session."
)


@boundary
def probe(
    frames: Optional[int] = typer.Option(
        None, "--frames", help="Data frames per config, overriding configs.toml (2000 for a smoke run)."),
    only: Optional[List[str]] = typer.Option(None, "--only", help="Probe only this config label; repeat for more."),
    tag: Optional[str] = typer.Option(None, "--tag", help="Suffix for the results dir: results/<date>_<f32|f64>_TAG."),
    config: Path = typer.Option(Path("configs.toml"), "--config", help="The configs file."),
    tracer: str = typer.Option(
        "nsys", "--tracer",
        help="nsys (Nsight Systems), cupti (in-process, no nsys needed) or none (sustained FPS only)."),
    repeat: int = typer.Option(3, "--repeat", help="Untraced sustained-FPS runs per config (median and spread)."),
    results_dir: Path = typer.Option(Path("results"), "--results-dir", help="Where results/<date>_... dirs go."),
    max_util: float = typer.Option(5.0, "--max-util", help="Guard: refuse when GPU utilization exceeds this (%)."),
    require_clean: bool = typer.Option(False, "--require-clean", help="Guard: refuse on a dirty git checkout."),
    force: bool = typer.Option(False, "--force", help="Probe even when a guard refuses (recorded in env.json)."),
    data: Optional[Path] = typer.Option(
        None, "--data", help="Frames from this .npy (uint16 frames x rows x cols, dark frames first) for every "
                             "config, instead of the synthetic generator."),
    as_json: bool = typer.Option(False, "--json", help="Print only the written rows as JSON on stdout."),
    wide: bool = typer.Option(
        False, "--wide",
        help="One summary row per config (about 115-130 columns). Without it the table is one row per config "
             "when the output is at least 120 columns wide and the table fits, else two tables that fit 80 "
             "columns: the trace figures, then the FPS figures. Every figure is in both layouts."),
    gpus: Optional[str] = typer.Option(
        None, "--gpus", metavar="all|0,2,...",
        help="Run each config on several GPUs of this node at once: 'all' (inside a Slurm allocation: the GPUs "
             "it grants), or NVML indices as nvidia-smi -L lists them, e.g. 0,2. Every GPU gets its own guard "
             "(a busy one refuses the run, or with --force is left out) and its own process, named by UUID and "
             "pinned to the GPU's nearest CPU cores and memory node. Per config: the trace on the first GPU, "
             "sustained FPS on it alone (solo), then on every GPU at once. Adds rows <label>@gpuN.solo, "
             "<label>@gpuN and <label>@all (summed FPS, slowest GPU, scaling efficiency); 'all' on a one-GPU "
             "machine runs the same path with N = 1. See docs/scaling.md."),
    executor: Optional[str] = typer.Option(
        None, "--executor", metavar="slurm|local",
        help="Do not probe here: submit one task per config through submitit (pip install 'clusterbench\\[slurm]'). "
             "slurm: a job array per --partition, from a Slurm login node; local: the same tasks on this machine, "
             "--array-parallelism at a time. Each task runs clusterbench probe --only LABEL into its own dir under "
             "<results dir>.campaign/tasks/, and this process merges them into the results dir, each row with its "
             "host and GPU. A failed or lost task is exit 1 after the merge; its finished rows are kept."),
    partition: Optional[List[str]] = typer.Option(
        None, "--partition",
        help="With --executor slurm (required there): the Slurm partition to submit to. Repeat it, one partition "
             "per GPU type, to run every config once on each; rows are then keyed <label>@<partition>."),
    gpus_per_task: Optional[int] = typer.Option(
        None, "--gpus-per-task",
        help="With --executor: GPUs each task asks for (default 1; Slurm: --gpus-per-task). Give more, with "
             "--gpus all, to probe every GPU of each task's node at once."),
    db: Optional[Path] = typer.Option(
        None, "--db", metavar="PATH", help="Record every row in this history database (default: RESULTS_DIR/history.db)."),
    session: Optional[str] = typer.Option(
        None, "--session", metavar="NAME",
        help="The session id of this probe's rows (default: a fresh one). Probes given one NAME compare as one "
             "session: their multi-stream transfers are judged by the floor, not the cross-session drift bound."),
    array_parallelism: Optional[int] = typer.Option(
        None, "--array-parallelism",
        help="With --executor: at most this many tasks at once (Slurm: --array=0-N%K; default: as many as Slurm "
             "allows). Local tasks share this machine's GPUs, so they run 1 at a time unless this says more."),
) -> None:
    from clusterbench.io.history import DEFAULT_DB_NAME, check_session_name
    from clusterbench.run.campaign import executor_options_for
    from clusterbench.run.probe import ProbeRequest, plan_probe, preflight, run_probe
    from clusterbench.render.probe import ProbeProgress, outcome_json, render_footer

    request = ProbeRequest(
        config_path=config, only=tuple(only or ()), frames=frames, tag=tag, tracer=tracer, repeat=repeat,
        results_root=results_dir, max_util_pct=max_util, require_clean=require_clean, force=force, data=data,
        argv=tuple(["clusterbench", *sys.argv[1:]]), gpus=gpus,
        session=None if session is None else check_session_name(session),
        history_db=db if db is not None else results_dir / DEFAULT_DB_NAME,
    )
    plan = plan_probe(request)  # step 1: config and option errors exit 2 before any GPU call
    campaign_dir = plan.results_dir.with_name(plan.results_dir.name + ".campaign")
    opts = executor_options_for(executor, campaign_dir, tuple(partition or ()), gpus_per_task, array_parallelism)
    if opts is not None:  # the parent of a campaign touches no GPU: the tasks probe on their nodes
        _campaign(request, plan, opts, as_json, wide)
        return
    nsys = preflight(plan)  # no GPU or no nsys: exit 1, before any progress is drawn
    err = stderr_console()
    with ProbeProgress(err, [c.label for c in plan.configs]) as progress:
        outcome = run_probe(plan, request, on_event=progress, nsys=nsys)
    if as_json:
        typer.echo(json.dumps(outcome_json(outcome), indent=2, allow_nan=False))
        return
    _print_summary(outcome.rows, f"clusterbench probe: {plan.results_dir}", wide)
    err.print(render_footer(outcome))


def _print_summary(rows, title: str, wide: bool) -> None:  # noqa: ANN001
    from rich.console import Console

    from clusterbench.render.probe import render_summary, wide_width

    out = stdout_console()
    if wide and wide_width(rows) > out.width:  # asked for: laid out at its own width, never folded
        out = Console(highlight=False, width=wide_width(rows))
    out.print(render_summary(rows, title=title, width=out.width, wide=wide or None))


def _campaign(request, plan, opts, as_json: bool, wide: bool) -> None:  # noqa: ANN001
    from clusterbench.run import campaign as ex
    from clusterbench.render.probe import render_campaign_progress
    from clusterbench.io.results import load_results

    import uuid

    session = request.session or uuid.uuid4().hex  # a campaign is one session: every task probes with it
    specs = ex.plan_campaign([c.label for c in plan.configs], opts, opts.folder, lambda label, root: (*ex.probe_task_argv(
        label, root, config=request.config_path, frames=request.frames, tag=request.tag, tracer=request.tracer,
        repeat=request.repeat, max_util=request.max_util_pct, require_clean=request.require_clean,
        force=request.force, data=request.data, gpus=request.gpus), "--session", session))
    err = stderr_console()
    outcome = ex.run_campaign(specs, opts, plan.results_dir, opts.folder, argv=request.argv,
                              on_progress=lambda p: err.print(render_campaign_progress(p), markup=False))
    for problem in outcome.merge.problems:
        err.print(f"Warning: {problem}", markup=False)
    rows = load_results(plan.results_dir).rows if outcome.merge.labels else ()
    if rows:
        from clusterbench.io.history import record_probe

        problem = record_probe(request.history_db, plan.results_dir)  # the merged dir, from this process
        if problem is not None:
            err.print(f"Warning: {problem}", markup=False)
    if as_json:
        typer.echo(json.dumps({"results_dir": str(plan.results_dir), "campaign_dir": str(opts.folder),
                               "tasks": [r.to_json() for r in outcome.results],
                               "rows": [r.to_json() for r in rows]}, indent=2,
                              allow_nan=False))
    elif rows:
        _print_summary(rows, f"clusterbench probe: {plan.results_dir}", bool(wide))
    ex.require_all_tasks_ok(outcome)  # exit 1 naming each failed task; the merged rows are kept
