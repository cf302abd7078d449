"""clusterbench compare: two results dirs side by side (a thin layer over analysis.compare)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from clusterbench.cli.common import boundary, stderr_console, stdout_console, warn
from clusterbench.errors import CheckFailed, InputError

HELP = (
    "Did my change make things better? Put two results dirs side by side: DIR_A (before) and "
    "DIR_B (after). One row per config label with before, after and delta % for kernel_us, "
    "h2d_us, d2h_us and roofline_us (all µs per frame), the binding engine before and after, and "
    "the end-to-end verdict. Labels found in one dir only are shown as such.\n\n"
    "Verdicts: delta % = (after - before) / before x 100. Noise is the larger of the two "
    "<metric>_spread values in probes.csv (half the min-max range over repeats). |after - before| "
    "<= noise is SAME; beyond it FASTER or SLOWER. Without spreads, trace figures (*_us) take "
    "+-1 % as noise (they reproduce to about 1 % across sessions); other metrics say 'no repeats: "
    "noise unknown' and the verdict gives only the sign. Multi-stream rows from different sessions: h2d, d2h (and "
    "a roofline binding on them) are NOT COMPARABLE, as those columns drift up to 20 % between "
    "sessions. Quote kernel changes from 1-stream rows. A kernel change is invisible end to end "
    "when the kernel stays below the tallest transfer bar, or the roofline did not move.\n\n"
    "Refuses runs from different GPUs unless --allow-different-gpu; warns on driver, pedestal, "
    "frames or config differences and on dirty trees.\n\n"
    "--gate PCT exits 3 when any roofline_us is SLOWER by more than PCT % (beyond noise when the "
    "noise is known; not-comparable rooflines are not gated)."
)


@boundary
def compare(
    dir_a: Path = typer.Argument(..., metavar="DIR_A", help="The 'before' results dir."),
    dir_b: Path = typer.Argument(..., metavar="DIR_B", help="The 'after' results dir."),
    json_out: bool = typer.Option(False, "--json", help="Print only JSON to stdout."),
    markdown: bool = typer.Option(False, "--markdown", help="Print a Markdown table for a docs page."),
    plot: Optional[Path] = typer.Option(None, "--plot", metavar="FILE.png", help="Also write a bar chart (needs matplotlib)."),
    gate: Optional[float] = typer.Option(None, "--gate", metavar="PCT", min=0.0, help="Exit 3 if a roofline got worse by more than PCT %."),
    allow_different_gpu: bool = typer.Option(False, "--allow-different-gpu", help="Compare runs from different GPUs."),
) -> None:
    if json_out and markdown:
        raise InputError("--json and --markdown cannot be combined", hint="pick one output format")
    import json

    from clusterbench.analysis.compare import compare_results, gate_failures, gate_not_checked
    from clusterbench.render.compare import (
        render_compare_json,
        render_compare_markdown,
        render_compare_notes,
        render_compare_table,
    )
    from clusterbench.results import load_results

    before, after = load_results(dir_a), load_results(dir_b)
    cmp = compare_results(before, after, allow_different_gpu=allow_different_gpu)
    for w in cmp.warnings:
        warn(w.message, w.hint)
    failures = gate_failures(cmp, gate) if gate is not None else ()
    not_checked = gate_not_checked(cmp) if gate is not None else ()

    if json_out:
        typer.echo(json.dumps(render_compare_json(cmp, gate, failures, not_checked), indent=2))
    elif markdown:
        typer.echo(render_compare_markdown(cmp), nl=False)
    else:
        con = stdout_console()
        con.print(render_compare_table(cmp))
        for line in render_compare_notes(cmp):
            con.print(line, markup=False)
    if plot is not None:
        from clusterbench.render.plot import render_compare_plot

        render_compare_plot(cmp, plot)
        stderr_console().print(f"Wrote {plot}", markup=False)
    if gate is not None:
        if not_checked:
            warn(f"--gate did not judge the roofline of: {', '.join(not_checked)}",
                 "compare multi-stream rows within one session")  # fmt: skip
        if failures:
            worst = ", ".join(f"{f.label} {f.before_us:.2f} -> {f.after_us:.2f} µs/frame ({f.delta_pct:+.2f} %)" for f in failures)
            raise CheckFailed(
                f"roofline got worse by more than {gate:g} %: {worst}",
                hint="look at the binding engine of those rows; re-run with repeats to measure the noise",
            )
