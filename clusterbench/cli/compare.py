"""clusterbench compare: two results dirs side by side (a thin layer over analysis.compare)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional

import typer

from clusterbench.cli import options
from clusterbench.cli.common import boundary, stderr_console, stdout_console, warn
from clusterbench.compare.compare import GATE_METRICS, gate_metric
from clusterbench.compare.noise import DEFAULT_MIN_EFFECT_PCT
from clusterbench.model import units
from clusterbench.model.stats import BOOTSTRAP_LEVEL, BOOTSTRAP_RESAMPLES
from clusterbench.errors import CheckFailed, CheckUnjudged, InputError
from clusterbench.io.history import default_db
from clusterbench.model import units as U
from clusterbench.run.probe import DEFAULT_RESULTS_ROOT

# --gate-metric's names, as --help lists them
GATE_NAMES = tuple(GATE_METRICS)

HELP = (
    "Did my change make things better? Put two results dirs side by side: DIR_A (before) and DIR_B "
    "(after); either may be baseline:NAME, a baseline set with clusterbench baseline set. Per config label "
    "and metric (kernel, H2D, D2H and roofline in µs per frame from the traces; sustained FPS untraced): "
    "before, after, delta %, a verdict and its reason code; the binding engine; end to end (the roofline "
    "and sustained FPS verdicts).\n\n"
    "Verdicts: SAME, FASTER, SLOWER, NOT COMPARABLE. A change must clear the noise: the larger of the "
    "metric's session-to-session floor and the spread of either side's repeats. The floors are those of "
    "the GPU model compared, from floors/<GPU model>.json beside the results dirs or in results/floors/ "
    "(written by clusterbench floors; --floors FILE picks one); without one, the seed's reading rules "
    "(trace figures 1 %, no floor for sustained FPS across sessions), and compare says which. With repeats "
    f"on both sides, the bootstrap {units.pct(BOOTSTRAP_LEVEL, 0)} interval of the ratio of medians (after / "
    f"before; {units.count(BOOTSTRAP_RESAMPLES)} resamples, seeded, so the verdict is reproducible) must also "
    "exclude 1. Never FASTER "
    "or SLOWER from the sign alone.\n\n"
    "Sessions: a session is one probe run, or the probes given one --session NAME, or one campaign. "
    "Multi-stream transfer figures (and a roofline binding on one) of two sessions are held to the drift "
    "bound (20 %): within it NOT COMPARABLE, beyond it SLOWER or FASTER, marked ~ (cross-session).\n\n"
    "NOT COMPARABLE also: a config column differs (tracer, transfer, pedestal, pedestal_dtype, "
    "workload, cluster, cap, streams, batch, frames). Columns in which the whole dir differs (f32 against "
    "f64, nsys against cupti) are compared across on purpose, and so is any column named with --across; "
    "those verdicts are marked *.\n\n"
    "Two traces (TRACE_A TRACE_B: nsys SQLite exports or .nsys-rep reports, with --frames, --range and "
    "--window as analyze takes them): per engine and per kernel name µs per frame, the binding engine "
    "before and after, judged by the 1-stream reproducibility rule (1 %) and, for transfers of "
    "multi-stream traces, the drift bound.\n\n"
    "Refuses runs from different GPUs unless --allow-different-gpu: whole dirs, and in a merged "
    "multi-host dir (probe --executor, --gpus) each row pair, by the row's own gpu_name; allowed, "
    "such rows are marked * across gpu, say which GPUs, and --gate leaves them out. Reads legacy aare-perf dirs "
    "(env.json without a version) with a warning.\n\n"
    "--gate PCT exits 3 when a like-for-like end-to-end figure got worse by more than PCT %: the roofline "
    "(µs per frame) SLOWER, or sustained FPS SLOWER (lower), beyond the noise, or beyond the drift bound across "
    "sessions. It exits 4 when a gated figure could not be judged, naming which and why: NOT COMPARABLE, "
    "measured on one side only, a row in one dir only, across a config difference, or judged SAME with a noise "
    "above PCT % (a regression of PCT % would not have shown); --gate-unjudged pass only warns about those (exit 3 "
    "still when nothing at all was judged). --gate-metric NAME gates that figure only (repeatable): "
    + ", ".join(GATE_NAMES) + ".\n\n"
    "Sustained FPS comes from several fresh processes (probe --processes): with process spread on both sides of "
    "one GPU unit, a change must exceed the larger of --min-effect (default 1 %) and 1.5 x the larger side's "
    "spread of the process medians; on two units of one model, also the across-units floor or default bound, "
    "with link-bound figures judged as shares of each unit's measured link. Without a floors file the default "
    "bounds judge, and those verdicts are marked provisional (prov.)."
)


def print_lines(render: Callable[[int], list[str]]) -> None:
    """Print the lines ``render`` lays out for the output width (a terminal's, else COLUMNS, else 80)."""
    con = stdout_console()
    for line in render(con.width):
        con.print(line, markup=False, highlight=False, soft_wrap=True)


def _load_side(arg: str, db: Path):  # noqa: ANN202
    from clusterbench.io.history import BASELINE_PREFIX, baseline_results
    from clusterbench.io.results import load_results

    if arg.startswith(BASELINE_PREFIX):
        return baseline_results(db, arg[len(BASELINE_PREFIX):])
    return load_results(Path(arg))


@boundary
def compare(
    dir_a: str = typer.Argument(..., metavar="DIR_A", help="'Before': a results dir, baseline:NAME, or a trace.",
                                show_default=False),
    dir_b: str = typer.Argument(..., metavar="DIR_B", help="'After': a results dir, baseline:NAME, or a trace.",
                                show_default=False),
    json_out: bool = options.JSON,
    markdown: bool = typer.Option(False, "--markdown", help="Print a Markdown table for a docs page."),
    wide: bool = typer.Option(False, "--wide", help="One table row per config (at 80 columns: several tables, "
                                                    "each keeping the config column)."),
    plot: Optional[Path] = typer.Option(
        None, "--plot", metavar="FILE", help="Also write a bar chart: .png, .svg or .pdf (needs matplotlib)."
    ),
    gate: Optional[float] = typer.Option(
        None, "--gate", metavar="PCT", min=0.0,
        help="Exit 3 if the roofline or sustained FPS got worse by more than PCT % (beyond the noise)."),
    gate_metrics: Optional[List[str]] = typer.Option(
        None, "--gate-metric", metavar="NAME",
        help=f"Gate this figure only (repeatable): {', '.join(GATE_NAMES)}. Default: roofline and sustained."),
    across: Optional[List[str]] = typer.Option(
        None, "--across", metavar="COLUMN", help="Compare across this config column on purpose (repeatable)."
    ),
    allow_different_gpu: bool = typer.Option(
        False, "--allow-different-gpu",
        help="Compare runs from different GPU models: whole dirs, or row pairs of merged multi-host dirs (each "
             "row's gpu_name). Such rows keep their verdicts, marked * across gpu, name both GPUs and hosts, and "
             "are left out of --gate."),
    floors_file: Optional[Path] = typer.Option(
        None, "--floors", metavar="FILE", help="Judge with this floors file (clusterbench floors writes them)."),
    min_effect: float = typer.Option(
        DEFAULT_MIN_EFFECT_PCT, "--min-effect", metavar="PCT",
        help="The least change called a change, % of the before value (every figure's noise is at least this)."),
    gate_unjudged: str = typer.Option(
        "fail", "--gate-unjudged", metavar="fail|pass",
        help="What --gate does with a gated figure it could not judge: fail (exit 4, the default) or pass (warn)."),
    db: Optional[Path] = options.DB,
    frames: Optional[str] = options.TRACE_FRAMES,
    range_name: Optional[str] = options.TRACE_RANGE,
    window: Optional[str] = options.TRACE_WINDOW,
) -> None:
    db = default_db(Path(DEFAULT_RESULTS_ROOT)) if db is None else db
    if gate_unjudged not in ("fail", "pass"):
        raise InputError(f"--gate-unjudged must be fail or pass, got {gate_unjudged!r}",
                         hint="--gate-unjudged pass keeps a gate that could not judge a figure from failing")
    if not (min_effect >= 0 and min_effect < 1e6):
        raise InputError(f"--min-effect must be a percentage >= 0, got {min_effect!r}",
                         hint=f"use --min-effect {DEFAULT_MIN_EFFECT_PCT:g} (the default)")
    gated = tuple(dict.fromkeys(gate_metric(n) for n in gate_metrics or ()))  # bad names refused before any work
    if gated and gate is None:
        raise InputError("--gate-metric picks the figure --gate judges; it needs --gate PCT",
                         hint="clusterbench compare DIR_A DIR_B --gate 5 --gate-metric sustained")
    if sum((json_out, markdown, wide)) > 1:
        raise InputError("--json, --markdown and --wide cannot be combined", hint="pick one output format")
    import json

    from clusterbench.compare.traces import is_trace
    from clusterbench.io.history import BASELINE_PREFIX
    from clusterbench.io.outputs import refuse_inputs_as_outputs, refuse_stdout_as_input

    # before anything is read or written: no output is an input (two inputs may be one: compare T T)
    inputs = [("--db" if arg.startswith(BASELINE_PREFIX) else name, db if arg.startswith(BASELINE_PREFIX) else Path(arg))
              for name, arg in (("DIR_A", dir_a), ("DIR_B", dir_b))] + [("--floors", floors_file)]
    refuse_stdout_as_input(inputs, "--json" if json_out else "the table")
    refuse_inputs_as_outputs([("--plot", plot)], inputs)
    traces = (is_trace(dir_a), is_trace(dir_b))
    if any(traces):
        if not all(traces):
            raise InputError("compare takes two traces or two results dirs, not one of each",
                             hint="analyze the trace alone with clusterbench analyze, or pass two traces")
        _compare_traces(Path(dir_a), Path(dir_b), json_out, markdown or wide or plot is not None or gate is not None,
                        allow_different_gpu, frames, range_name, window)
        return
    if frames is not None or range_name is not None or window is not None:
        raise InputError("--frames, --range and --window apply to two traces, not results dirs",
                         hint="a results dir's rows already hold per-frame figures")
    from clusterbench.compare.compare import DEFAULT_GATE_METRICS, compare_results, judge_gate
    from clusterbench.compare.floors import floors_for
    from clusterbench.render.compare import (
        render_compare_json,
        render_compare_markdown,
        render_compare_text,
        render_compare_wide,
    )

    before, after = _load_side(dir_a, db), _load_side(dir_b, db)
    floors = floors_for((before, after), floors_file, roots=(Path("results"),))
    cmp = compare_results(before, after, allow_different_gpu=allow_different_gpu, across=tuple(across or ()),
                          floors=floors, min_effect_pct=min_effect)
    if plot is not None:
        from clusterbench.render.plot import check_plot_path

        check_plot_path(plot)  # before anything is printed
    outcome = (judge_gate(cmp, gate, gated or DEFAULT_GATE_METRICS, unjudged_pass=gate_unjudged == "pass")
               if gate is not None else None)
    for w in cmp.warnings:
        warn(w.message, w.hint)

    if json_out:
        typer.echo(json.dumps(render_compare_json(cmp, outcome), indent=2))
    elif markdown:
        typer.echo(render_compare_markdown(cmp), nl=False)
    elif wide:
        print_lines(lambda width: render_compare_wide(cmp, width))
    else:
        print_lines(lambda width: render_compare_text(cmp, width))
    if plot is not None:
        from clusterbench.render.plot import render_compare_plot

        render_compare_plot(cmp, plot)
        stderr_console().print(f"Wrote {plot}", markup=False)
    if outcome is not None:
        _gate_exit(outcome)


def _gate_exit(outcome) -> None:  # noqa: ANN001
    """Exit 3 (CheckFailed) when the gate failed, else 4 (CheckUnjudged) when a gated figure could not be judged
    (unless --gate-unjudged pass: then a warning, and exit 3 only when nothing at all was judged)."""
    from clusterbench.render.compare import gate_figure_name

    gated = " or ".join(gate_figure_name(m) for m in outcome.metrics) or "gated figure"
    if outcome.not_measured:
        warn(f"--gate: {' and '.join(gate_figure_name(m) for m in outcome.not_measured)} not measured in either "
             "dir: not gated")
    unjudged = ", ".join(f"{lb} {gate_figure_name(m)} ({why})" for lb, m, why in outcome.unjudged)
    whys = " ".join(why for _, _, why in outcome.unjudged)
    hints = [h for code, h in (("session_drift", "compare multi-stream rows within one session (--session NAME) or "
                                                 "on units whose links were measured"),
                               ("unsteady", "probe the unsteady configs again"),
                               ("host_bound", "gate a program the host binds on sustained FPS: --gate-metric sustained"),
                               ("no_floor", "measure floors: clusterbench floors DIR DIR [...]"),
                               ("above the gate", f"gate at a larger percentage, or probe with more --processes"),
                               ("only in", "probe the same configs on both sides"),
                               ("across", "compare dirs of one config")) if code in whys]
    if outcome.failures:
        if outcome.unjudged:
            warn(f"--gate could not judge: {unjudged}")
        names = " and ".join(dict.fromkeys(gate_figure_name(f.metric) for f in outcome.failures))
        worst = ", ".join(
            f"{f.label} {gate_figure_name(f.metric)} {U.metric(f.metric, f.before, unit=False)} -> "
            f"{U.metric(f.metric, f.after)} ({U.signed_pct(f.delta_pct)})" for f in outcome.failures)
        raise CheckFailed(
            f"{names} got worse by more than {U.pct_of(outcome.pct, None)}: {worst}",
            hint="look at the binding engine of those rows; re-run with repeats to measure the noise",
        )
    if outcome.nothing_comparable:
        message = (f"--gate {outcome.pct:g} judged nothing: no {gated} was comparable like for like: "
                   f"{unjudged or 'no rows'}")
        hint = "a gate that judged nothing does not pass; compare dirs of one config, tracer and session"
        if outcome.unjudged_pass:
            raise CheckFailed(message, hint=hint)
        raise CheckUnjudged(message, hint=hint)
    if outcome.unjudged:
        if outcome.unjudged_pass:
            warn(f"--gate did not judge: {unjudged}", "; ".join(hints) or None)
            return
        raise CheckUnjudged(
            f"--gate {outcome.pct:g} could not judge {len(outcome.unjudged)} gated figure"
            f"{'' if len(outcome.unjudged) == 1 else 's'}: {unjudged}",
            hint="; ".join(hints + ["--gate-unjudged pass judges only what it can"]))


def _compare_traces(a: Path, b: Path, json_out: bool, other_format: bool, allow_different_gpu: bool,
                    frames: Optional[str], range_name: Optional[str], window: Optional[str]) -> None:
    import json

    from clusterbench.compare.traces import analyze_for_compare, compare_traces, kernel_times
    from clusterbench.render.compare import render_trace_compare_json, render_trace_compare_text

    if other_format:
        raise InputError("two traces take --json or the text layout only (no --markdown, --wide, --plot, --gate)",
                         hint="compare results dirs for those; clusterbench analyze --plot draws one trace")
    for p in (a, b):
        if not p.is_file():
            raise InputError(f"trace does not exist: {p}", hint="pass two nsys SQLite exports or .nsys-rep reports")
    err = stderr_console()
    err.print(f"analyzing {a.name} and {b.name} ...", markup=False)
    ta = analyze_for_compare(a, frames, range_name, window)
    tb = analyze_for_compare(b, frames, range_name, window)
    tc = compare_traces(ta, tb, kernel_times(ta.primary), kernel_times(tb.primary),
                        allow_different_gpu=allow_different_gpu)
    for w in (*ta.warnings, *tb.warnings, *tc.warnings):
        warn(w)
    if json_out:
        typer.echo(json.dumps(render_trace_compare_json(tc), indent=2))
        return
    print_lines(lambda width: render_trace_compare_text(tc, width))
