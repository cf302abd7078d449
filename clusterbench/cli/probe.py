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
    "--force). Ctrl-C keeps finished rows (exit 130)."
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
) -> None:
    from clusterbench.probe import ProbeRequest, plan_probe, preflight, run_probe
    from clusterbench.render.probe import ProbeProgress, outcome_json, render_footer, render_summary

    request = ProbeRequest(
        config_path=config, only=tuple(only or ()), frames=frames, tag=tag, tracer=tracer, repeat=repeat,
        results_root=results_dir, max_util_pct=max_util, require_clean=require_clean, force=force, data=data,
        argv=tuple(["clusterbench", *sys.argv[1:]]),
    )
    plan = plan_probe(request)  # step 1: config errors exit 2 before any GPU call
    nsys = preflight(plan)  # no GPU or no nsys: exit 1, before any progress is drawn
    err = stderr_console()
    with ProbeProgress(err, [c.label for c in plan.configs]) as progress:
        outcome = run_probe(plan, request, on_event=progress, nsys=nsys)
    if as_json:
        typer.echo(json.dumps(outcome_json(outcome), indent=2, allow_nan=False))
        return
    out = stdout_console()
    out.print(render_summary(outcome.rows, title=f"clusterbench probe: {plan.results_dir}"))
    err.print(render_footer(outcome))
