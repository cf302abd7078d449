"""clusterbench floors: the noise floors of one GPU model, from A/A results dirs, written as data."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from clusterbench.cli import options
from clusterbench.cli.common import boundary, warn

HELP = (
    "Measure the noise floors compare judges with, on this GPU model, from two or more A/A results dirs: "
    "full sweeps of one build (git rev), one after the other (clusterbench probe --tag aa1, then --tag aa2, "
    "...). Dirs of several builds may be given: differences are taken only between dirs of one build, and "
    "each build needs two or more.\n\n"
    "Per metric (kernel, H2D, D2H, roofline in µs per frame; sustained FPS) and stream class (1 stream, "
    "several): the largest A/A difference, and the floor = 1.5 x that, rounded up to the next 0.5 %, at "
    "least 0.5 % (trace figures 1 %). On several streams H2D, D2H and the roofline share one link and take "
    "the worst of the three. The drift bound of multi-stream transfers across sessions stays 20 % unless "
    "the A/A shows more.\n\n"
    "Writes RESULTS_DIR/floors/<GPU model>.json (e.g. results/floors/NVIDIA_H200.json), or --out FILE. "
    "compare looks for the file of the GPU it compares in the floors/ folder beside each results dir, "
    "then in results/floors/; without one it uses the seed's reading rules and says so."
)


@boundary
def floors(
    dirs: List[Path] = typer.Argument(..., metavar="DIR DIR [DIR...]", help="A/A results dirs of one GPU model.",
                                      show_default=False),
    out: Optional[Path] = typer.Option(None, "--out", metavar="FILE",
                                       help="Write the floors here instead of RESULTS_DIR/floors/<GPU model>.json."),
    results_dir: Path = options.RESULTS_DIR,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the floors; write nothing."),
    as_json: bool = options.JSON,
) -> None:
    import json

    from clusterbench.cli.compare import print_lines
    from clusterbench.compare.floors import aa_floors, floors_file, read_floors, write_floors
    from clusterbench.errors import InputError
    from clusterbench.io.results import load_results
    from clusterbench.render.floors import render_floors_json, render_floors_text

    if len(dirs) < 2:
        raise InputError("floors needs two or more A/A results dirs of one build",
                         hint="clusterbench floors results/DATE_f32_aa1 results/DATE_f32_aa2 [...]")
    outcome = aa_floors([load_results(d) for d in dirs])
    target = out if out is not None else floors_file(results_dir, str(outcome.floors.gpu_name))
    previous = None
    if target.is_file():
        try:
            previous = read_floors(target)
        except InputError as exc:
            if dry_run:
                raise
            warn(f"{exc}: it is replaced")
    if previous is not None and previous.gpu_name != outcome.floors.gpu_name:
        raise InputError(f"{target} holds the floors of {previous.gpu_name}, not {outcome.floors.gpu_name}",
                         hint="pass --out FILE for another file")
    for w in outcome.warnings:
        warn(w)
    written = None if dry_run else write_floors(outcome.floors, target)
    if as_json:
        typer.echo(json.dumps(render_floors_json(outcome, written, previous), indent=2))
        return
    print_lines(lambda width: render_floors_text(outcome, written, previous, width))
