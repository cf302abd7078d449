"""clusterbench compare: two results dirs side by side (a thin layer over analysis.compare)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from clusterbench.cli import options
from clusterbench.cli.common import boundary, stderr_console, stdout_console, warn
from clusterbench.errors import CheckFailed, InputError

HELP = (
    "Did my change make things better? Put two results dirs side by side: DIR_A (before) and "
    "DIR_B (after). Per config label and metric (kernel, H2D, D2H and roofline in µs per frame "
    "from the traces; sustained FPS untraced): before, after, delta %, a verdict and its reason "
    "code; the binding engine; end to end (the roofline and sustained FPS verdicts).\n\n"
    "Verdicts: SAME, FASTER, SLOWER, NOT COMPARABLE. A change must clear the noise: the larger "
    "of the metric's session-to-session floor (measured A/A on the H200; docs/compare.md) and the "
    "spread of either side's repeats. With repeats on both sides, a Mann-Whitney U test must also "
    "find the samples different (p <= 0.1). Never FASTER or SLOWER from the sign alone.\n\n"
    "NOT COMPARABLE: a config column differs (tracer, transfer, pedestal, pedestal_dtype, "
    "workload, cluster, cap, streams, batch, frames), or a multi-stream transfer figure comes "
    "from another session. Columns in which the whole dir differs (f32 against f64, nsys against "
    "cupti) are compared across on purpose, and so is any column named with --across; those "
    "verdicts are marked *.\n\n"
    "Refuses runs from different GPUs unless --allow-different-gpu: whole dirs, and in a merged "
    "multi-host dir (probe --executor, --gpus) each row pair, by the row's own gpu_name; allowed, "
    "such rows are marked * across gpu, say which GPUs, and --gate leaves them out. Reads legacy aare-perf dirs "
    "(env.json without a version) with a warning.\n\n"
    "--gate PCT exits 3 when a like-for-like roofline is SLOWER by more than PCT % (and beyond "
    "the noise), and also when no roofline was comparable at all."
)


@boundary
def compare(
    dir_a: Path = typer.Argument(..., metavar="DIR_A", help="The 'before' results dir."),
    dir_b: Path = typer.Argument(..., metavar="DIR_B", help="The 'after' results dir."),
    json_out: bool = options.JSON,
    markdown: bool = typer.Option(False, "--markdown", help="Print a Markdown table for a docs page."),
    wide: bool = typer.Option(False, "--wide", help="One table row per config (about 120 columns)."),
    plot: Optional[Path] = typer.Option(
        None, "--plot", metavar="FILE", help="Also write a bar chart: .png, .svg or .pdf (needs matplotlib)."
    ),
    gate: Optional[float] = typer.Option(
        None, "--gate", metavar="PCT", min=0.0, help="Exit 3 if a roofline got worse by more than PCT %."
    ),
    across: Optional[List[str]] = typer.Option(
        None, "--across", metavar="COLUMN", help="Compare across this config column on purpose (repeatable)."
    ),
    allow_different_gpu: bool = typer.Option(
        False, "--allow-different-gpu",
        help="Compare runs from different GPU models: whole dirs, or row pairs of merged multi-host dirs (each "
             "row's gpu_name). Such rows keep their verdicts, marked * across gpu, name both GPUs and hosts, and "
             "are left out of --gate."),
) -> None:
    if sum((json_out, markdown, wide)) > 1:
        raise InputError("--json, --markdown and --wide cannot be combined", hint="pick one output format")
    import json

    from clusterbench.compare.compare import compare_results, judge_gate
    from clusterbench.render.compare import (
        render_compare_json,
        render_compare_markdown,
        render_compare_notes,
        render_compare_table,
        render_compare_text,
    )
    from clusterbench.io.results import load_results

    before, after = load_results(dir_a), load_results(dir_b)
    cmp = compare_results(before, after, allow_different_gpu=allow_different_gpu, across=tuple(across or ()))
    if plot is not None:
        from clusterbench.render.plot import check_plot_path

        check_plot_path(plot)  # before anything is printed
    outcome = judge_gate(cmp, gate) if gate is not None else None
    for w in cmp.warnings:
        warn(w.message, w.hint)

    if json_out:
        typer.echo(json.dumps(render_compare_json(cmp, outcome), indent=2))
    elif markdown:
        typer.echo(render_compare_markdown(cmp), nl=False)
    elif wide:
        con = stdout_console()
        con.print(render_compare_table(cmp))
        for line in render_compare_notes(cmp):
            con.print(line, markup=False)
    else:
        con = stdout_console()
        for line in render_compare_text(cmp, con.width):
            con.print(line, markup=False, highlight=False, soft_wrap=True)
    if plot is not None:
        from clusterbench.render.plot import render_compare_plot

        render_compare_plot(cmp, plot)
        stderr_console().print(f"Wrote {plot}", markup=False)
    if outcome is not None:
        if outcome.not_checked and not outcome.nothing_comparable:
            skipped = ", ".join(f"{lb} ({why})" for lb, why in outcome.not_checked)
            warn(f"--gate did not judge the roofline of: {skipped}", "compare multi-stream rows within one session")
        if outcome.nothing_comparable:
            skipped = ", ".join(f"{lb} ({why})" for lb, why in outcome.not_checked) or "no rows"
            raise CheckFailed(
                f"--gate {gate:g} judged nothing: no roofline was comparable like for like: {skipped}",
                hint="a gate that judged nothing does not pass; compare dirs of one config, tracer and session",
            )
        if outcome.failures:
            worst = ", ".join(
                f"{f.label} {f.before_us:.2f} -> {f.after_us:.2f} µs/frame ({f.delta_pct:+.2f} %)" for f in outcome.failures
            )
            raise CheckFailed(
                f"roofline got worse by more than {gate:g} %: {worst}",
                hint="look at the binding engine of those rows; re-run with repeats to measure the noise",
            )
