"""clusterbench history: the series of a label across results dirs, its steps, and the history site."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional

import typer

from clusterbench.cli import options
from clusterbench.cli.common import boundary, stderr_console, stdout_console, warn
from clusterbench.io.history import default_db
from clusterbench.run.probe import DEFAULT_RESULTS_ROOT

HELP = (
    "When did LABEL get slower? Every probe records its rows in a history database (results/history.db, "
    "or --db PATH): the git rev and dirty flag, GPU, host, config, every metric and its raw samples, and "
    "the results dir.\n\n"
    "clusterbench history import FOLDER... adds every results dir in each FOLDER, at any depth (a FOLDER may be a "
    "results dir itself: history import results, or results/*); it names on stderr what it skipped and why "
    "(results/floors, empty or unreadable folders). Importing twice adds nothing. With no database yet, "
    "clusterbench history LABEL imports results/ first and says so.\n\n"
    "clusterbench history LABEL prints the series of one metric (--metric, default roofline_us; any numeric "
    "probes.csv column: kernel_us, h2d_us, d2h_us in µs per frame, sustained_fps in FPS ...), one point per "
    "results dir holding LABEL in the order measured, and marks each step: where the build (git rev) "
    "changed between consecutive points and the metric moved beyond the noise, judged as compare judges "
    "(the GPU model's floors from results/floors/, else the seed's rules; the drift bound for multi-stream "
    "transfers of two sessions), with its verdict and reason. Two consecutive points that ran different "
    "configs (pedestal, finder, workload, dtype, tracer, streams, transfer, cluster, cap, batch, frames, or "
    "another workload parameter of env.json) are labelled config_changed with the difference (pedestal "
    "frozen→tracking), never judged as a change of the build. --json prints {\"points\": [...], \"steps\": [...], \"config_changes\": [...]}; --plot FILE draws "
    "the trend (.png, .svg, .pdf; needs matplotlib).\n\n"
    "clusterbench history --html DIR writes a static site: one trend plot per label and metric, the steps "
    "marked, each linking to the compare of its two results dirs."
)

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
DEFAULT_METRIC = "roofline_us"


def _roots(db: Path) -> list[Path]:
    return list(dict.fromkeys([db.parent, Path("results")]))


@boundary
def history(
    args: Optional[List[str]] = typer.Argument(None, metavar="LABEL | import FOLDER...",
                                               help="A config label, or 'import' and results dirs or folders "
                                                    "holding them.",
                                               show_default=False),
    metric: str = typer.Option(DEFAULT_METRIC, "--metric", metavar="M", help="The metric of the series."),
    gpu: Optional[str] = typer.Option(None, "--gpu", metavar="G", help="Only rows of a GPU whose name holds G."),
    since: Optional[str] = typer.Option(None, "--since", metavar="YYYY-MM-DD", help="Only rows measured since."),
    db: Optional[Path] = options.DB,
    as_json: bool = options.JSON,
    plot: Optional[Path] = typer.Option(None, "--plot", metavar="FILE", help="Draw the series (.png, .svg, .pdf)."),
    html_dir: Optional[Path] = typer.Option(None, "--html", metavar="DIR", help="Write the static history site."),
) -> None:
    explicit_db = db is not None
    db = default_db(Path(DEFAULT_RESULTS_ROOT)) if db is None else db
    import json

    from clusterbench.errors import InputError

    from clusterbench.io.outputs import refuse_stdout_as_input

    words = list(args or [])
    reading = [("--db", db)] + ([(f"FOLDER {w}", Path(w)) for w in words[1:]] if words[:1] == ["import"] else [])
    refuse_stdout_as_input(reading, "--json" if as_json else "the output")
    if since is not None and not _DATE.match(since):
        raise InputError(f"--since takes a date YYYY-MM-DD, got {since!r}", hint="e.g. --since 2026-12-01")
    if words and words[0] == "import":
        if len(words) < 2:
            raise InputError("history import needs one or more results dirs, or folders that hold them",
                             hint="clusterbench history import results")
        _import(db, [Path(w) for w in words[1:]], as_json)
        return
    fresh = not explicit_db and not db.exists()  # a fresh clone: results/ is imported first, once checked
    if html_dir is not None:
        if words:
            raise InputError("--html writes every label: give no LABEL with it", hint="clusterbench history --html site/")
        _site(db, html_dir, gpu, since, fresh)
        return
    if len(words) != 1:
        raise InputError("history takes one LABEL (or: import FOLDER..., or --html DIR)",
                         hint="e.g. clusterbench history 3x3_s4 --metric sustained_fps")
    if plot is not None:
        from clusterbench.io.outputs import refuse_inputs_as_outputs
        from clusterbench.render.plot import check_plot_path

        refuse_inputs_as_outputs([("--plot", plot)], [("--db", db)])
        check_plot_path(plot)
    if fresh:
        _start(db)
    from clusterbench.cli.compare import print_lines
    from clusterbench.compare.history import floors_by_gpu, history_series
    from clusterbench.io.history import labels, series
    from clusterbench.render.history import render_history_json, render_history_text

    label = words[0]
    points = series(db, label, metric, gpu, since)
    if not points:
        known = [lb for lb, _ in labels(db)]
        raise InputError(f"no rows of {label!r} in {db}" + (" with those filters" if gpu or since else ""),
                         hint=f"labels recorded: {', '.join(known[:8])}{' ...' if len(known) > 8 else ''}" if known
                         else "clusterbench history import FOLDER adds results dirs")
    if all(p.value is None for p in points):
        raise InputError(f"{label} has no {metric} in any of its {len(points)} point(s)",
                         hint="pick a measured metric, e.g. --metric kernel_us or --metric sustained_fps")
    s = history_series(label, metric, points, floors_by_gpu(points, _roots(db)))
    if as_json:
        typer.echo(json.dumps(render_history_json(s), indent=2))
    else:
        print_lines(lambda width: render_history_text(s, width))
    if plot is not None:
        from clusterbench.render.plot import render_trend_plot

        render_trend_plot(s, plot)
        stderr_console().print(f"Wrote {plot}", markup=False)


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working folder where it is inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _import(db: Path, paths: list[Path], as_json: bool) -> None:
    import json

    from clusterbench.io.history import ImportedDir, import_folders

    con = stdout_console()

    def said(d: ImportedDir) -> None:  # each dir as it is recorded: the progress of a long import
        con.print(f"{_shown(Path(d.path))}: {d.rows_added} row(s) added of {d.rows_seen}", markup=False,
                  soft_wrap=True)

    outcome = import_folders(db, paths, None if as_json else said)
    for s in outcome.skipped:
        warn(f"skipped {s.path}: {s.reason}")
    if as_json:
        typer.echo(json.dumps({"db": str(db), "dirs": [d.to_json() for d in outcome.imported],
                               "skipped": [s.to_json() for s in outcome.skipped]}, indent=2))
        return
    con.print(f"history: {db} ({outcome.rows_added} row(s) added from {len(outcome.imported)} results dir(s))",
              markup=False, soft_wrap=True)


def _start(db: Path) -> None:
    """No database at the default place (a fresh clone): import the results dirs under the results root,
    saying so, or say how to start when there are none."""
    from clusterbench.errors import InputError
    from clusterbench.io.history import import_folders
    from clusterbench.io.results import find_results_dirs

    root = Path(DEFAULT_RESULTS_ROOT)
    found = find_results_dirs([root]).dirs if root.is_dir() else ()
    if not found:
        raise InputError(f"no history database at {db} yet, and no results dir under {root}/ to start it from",
                         hint="clusterbench probe records every row it writes there; clusterbench history import "
                              "FOLDER adds results dirs you already have")
    stderr_console().print(f"history: no database at {db} yet: importing the {len(found)} results dir(s) under "
                           f"{root}/ first (clusterbench history import {root})", markup=False)
    outcome = import_folders(db, [root])
    for s in outcome.skipped:
        warn(f"skipped {s.path}: {s.reason}")
    stderr_console().print(f"history: {outcome.rows_added} row(s) from {len(outcome.imported)} results dir(s) "
                           f"recorded in {db}", markup=False)


def _site(db: Path, out_dir: Path, gpu: str | None, since: str | None, fresh: bool = False) -> None:
    import datetime

    from clusterbench.compare.history import site_series, step_comparisons
    from clusterbench.errors import InputError
    from clusterbench.io.outputs import claim_output_folder, refuse_inputs_as_outputs
    from clusterbench.io.results import ENV_JSON, PROBES_CSV, SAMPLES_JSON
    from clusterbench.render.history import (SITE_MARKER, compare_page_name, dir_names, render_compare_page,
                                             render_history_site, write_text)

    RESULTS_FILES = (PROBES_CSV, ENV_JSON, SAMPLES_JSON)
    from clusterbench.render.plot import load_matplotlib, trend_svg

    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--html needs a directory, and {out_dir} is a file", hint="pass --html DIR")
    load_matplotlib()  # before any work: the plots need it
    refuse_inputs_as_outputs([], [("--db", db)], folders=[("--html", out_dir)])
    claim_output_folder(out_dir, SITE_MARKER, "--html", "the history site", refused_markers=RESULTS_FILES)
    if fresh:
        _start(db)
    err = stderr_console()
    all_series = site_series(db, _roots(db), gpu, since)
    if not all_series:
        raise InputError(f"no rows in {db}" + (" with those filters" if gpu or since else ""),
                         hint="clusterbench history import FOLDER adds results dirs")
    err.print(f"history: {len(all_series)} series; comparing the dirs of each step ...", markup=False)
    comparisons = step_comparisons(db, all_series, _roots(db))
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    try:
        write_text(out_dir / "index.html", render_history_site(all_series, db.name, now, trend_svg))
        names = dir_names([p for s in all_series for p in s.points])
        for s in all_series:
            for t in s.steps:
                page = out_dir / compare_page_name(t, names)
                if not page.exists() or page.stat().st_mtime < (out_dir / "index.html").stat().st_mtime:
                    write_text(page, render_compare_page(comparisons[(t.before.dir_path, t.after.dir_path)]))
    except OSError as exc:
        raise InputError(f"cannot write the history site {out_dir}: {exc.strerror or exc}",
                         hint="pass --html DIR in a writable place") from None
    steps = sum(len(s.steps) for s in all_series)
    stdout_console().print(f"Wrote {out_dir / 'index.html'}: {len(all_series)} series, {steps} step(s)", markup=False)
