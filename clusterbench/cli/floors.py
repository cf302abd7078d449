"""clusterbench floors: the noise floors of one GPU model, from A/A results dirs, written as data."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from clusterbench.cli import options
from clusterbench.cli.common import boundary, stderr_console, warn
from clusterbench.compare.noise import MIN_PAIRS

HELP = (
    "Measure the noise floors compare judges with, on this GPU model, from A/A results dirs: probes of one "
    "build (git rev) taken again and again, in one session, in several sessions of one machine, and on "
    "several machines of the model (clusterbench probe --tag aa1, then --tag aa2, ...). Any number of dirs, of "
    "several builds too: differences are taken only between dirs of one build, and each build needs two or "
    "more.\n\n"
    "The dirs are grouped by machine (GPU UUID, host) and by session. Every pair of rows of one config in two "
    "dirs of one build is a pair of one scope: within one session (probes given one --session), two sessions "
    "on one GPU unit (a reboot, a fresh machine on the same node), or two units of the model. Per metric "
    "(kernel, H2D, D2H, roofline in µs per frame; sustained FPS), stream class (1 stream, several) and scope: "
    "the largest A/A difference, the number of pairs it saw, and the floor = 1.5 x that difference, rounded up "
    "to the next 0.5 %, at least 0.5 % (trace figures 1 %). On several streams H2D, D2H and the roofline share "
    "one link and take the worst of the three. The drift bound of multi-stream transfers across sessions stays "
    "20 % unless the A/A shows more.\n\n"
    f"A floor of fewer than {MIN_PAIRS} pairs (of probes in one session, of sessions on one unit, of units) is "
    f"provisional: the largest of n A/A differences is exceeded by the next one 1 time in n + 1. When every "
    f"floor would be provisional, floors refuses to write unless --provisional; provisional floors are marked in "
    "the file and compare names them.\n\n"
    "Writes a new file, RESULTS_DIR/floors/<GPU model>.json (e.g. results/floors/NVIDIA_H200.json) or --out "
    "FILE, and says where; an existing file is never replaced without --force (compare reads it). compare "
    "looks for the file of the GPU it compares in the floors/ folder beside each results dir, then in "
    "results/floors/; it judges each pair with the floor of its scope and says which; without a file it uses "
    "the seed's reading rules and says so."
)


@boundary
def floors(
    dirs: List[Path] = typer.Argument(..., metavar="DIR DIR [DIR...]", help="A/A results dirs of one GPU model.",
                                      show_default=False),
    out: Optional[Path] = typer.Option(None, "--out", metavar="FILE",
                                       help="Write the floors here instead of RESULTS_DIR/floors/<GPU model>.json."),
    results_dir: Path = options.RESULTS_DIR,
    force: bool = typer.Option(False, "--force", help="Replace the floors file if it exists (never without)."),
    provisional: bool = typer.Option(
        False, "--provisional", help=f"Write floors even when every one is provisional (fewer than {MIN_PAIRS} pairs)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the floors and the file; write nothing."),
    as_json: bool = options.JSON,
) -> None:
    import json

    from clusterbench.cli.compare import print_lines
    from clusterbench.compare.floors import aa_floors, floors_file, read_floors, write_floors
    from clusterbench.errors import InputError
    from clusterbench.io.results import load_results
    from clusterbench.render.floors import render_floors_json, render_floors_text, short_of_pairs

    if len(dirs) < 2:
        raise InputError("floors needs two or more A/A results dirs of one build",
                         hint="clusterbench floors results/DATE_f32_aa1 results/DATE_f32_aa2 [...]")
    from clusterbench.io.outputs import refuse_inputs_as_outputs, refuse_stdout_as_input

    inputs = [(f"DIR {d}", d) for d in dirs]
    refuse_stdout_as_input(inputs, "--json" if as_json else "the table")
    refuse_inputs_as_outputs([("--out", out)], inputs)
    if out is not None and out.exists() and not force and not dry_run:  # before any dir is read
        raise InputError(f"{out} exists: floors writes a new file and never replaces one without --force",
                         hint="pass --out with a new file name, or --force to replace it")
    outcome = aa_floors([load_results(d) for d in dirs])
    target = out if out is not None else floors_file(results_dir, str(outcome.floors.gpu_name))
    refuse_inputs_as_outputs([("--out" if out is not None else "the floors file", target)], inputs)
    previous = None
    if target.is_file():
        try:
            previous = read_floors(target)
        except InputError as exc:
            if not force:
                raise
            warn(f"{exc}: --force replaces it")
    if previous is not None and previous.gpu_name != outcome.floors.gpu_name:
        raise InputError(f"{target} holds the floors of {previous.gpu_name}, not {outcome.floors.gpu_name}",
                         hint="pass --out FILE for another file")
    if target.exists() and not force and not dry_run:
        raise InputError(f"{target} exists: floors writes a new file and never replaces one without --force",
                         hint=f"pass --out FILE for a new file, or --force to replace it ({target} is what compare "
                              f"reads for {outcome.floors.gpu_name}: the text output shows what it held as 'was')")
    refused = outcome.provisional and not provisional
    if refused and not dry_run:
        raise InputError(short_of_pairs(outcome),
                         hint="probe more A/A dirs (more probes, sessions or machines of the model), or pass "
                              "--provisional to write these floors marked provisional")
    for w in outcome.warnings:
        warn(w)
    if refused:
        warn(f"{short_of_pairs(outcome)}: without --provisional, floors would not write them")
    replaced = target.exists()
    written = None if dry_run else write_floors(outcome.floors, target, replace=force)
    if as_json:
        typer.echo(json.dumps(render_floors_json(outcome, written, previous, target, replaced and written is not None),
                              indent=2))
        if written is not None:  # the text layout says it on stdout; with --json, stdout is JSON only
            stderr_console().print(f"{'Replaced' if replaced else 'Wrote'} {written}", markup=False, soft_wrap=True)
    else:
        print_lines(lambda width: render_floors_text(outcome, written, previous, width, target,
                                                     replaced and written is not None, refused))
