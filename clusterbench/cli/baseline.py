"""clusterbench baseline: name the rows of a results dir, to compare against later (compare baseline:NAME DIR)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from clusterbench.cli import options
from clusterbench.cli.common import EXIT_CODES_HELP, boundary, stdout_console
from clusterbench.io.history import default_db
from clusterbench.run.probe import DEFAULT_RESULTS_ROOT

HELP = (
    "Named baselines in the history database (results/history.db, or --db PATH). "
    "clusterbench baseline set NAME DIR records DIR and pins its rows as they are now under NAME (setting a "
    "name again moves it); clusterbench compare baseline:NAME DIR then compares against them, even after "
    "DIR was probed again or moved. clusterbench baseline list shows them."
)

app = typer.Typer(name="baseline", help=HELP, epilog=EXIT_CODES_HELP, no_args_is_help=True, add_completion=False)


@app.command("set", help="Pin the rows DIR holds now as baseline NAME. " + EXIT_CODES_HELP)
@boundary
def set_(name: str = typer.Argument(..., metavar="NAME", show_default=False),
         directory: Path = typer.Argument(..., metavar="DIR", show_default=False),
         db: Optional[Path] = options.DB) -> None:
    db = default_db(Path(DEFAULT_RESULTS_ROOT)) if db is None else db
    from clusterbench.io.history import set_baseline
    from clusterbench.io.outputs import refuse_stdout_as_input

    refuse_stdout_as_input([("DIR", directory), ("--db", db)], "the output")

    b = set_baseline(db, name, directory)
    stdout_console().print(f"baseline {b.name}: {len(b.labels)} row(s) of {b.dir_name} ({', '.join(b.labels)}), "
                           f"in {db}", markup=False)


@app.command("list", help="The named baselines. " + EXIT_CODES_HELP)
@boundary
def list_(db: Optional[Path] = options.DB, as_json: bool = options.JSON) -> None:
    db = default_db(Path(DEFAULT_RESULTS_ROOT)) if db is None else db
    import json

    from clusterbench.io.outputs import refuse_stdout_as_input

    refuse_stdout_as_input([("--db", db)], "--json" if as_json else "the list")

    from clusterbench.io.history import baselines

    found = baselines(db)
    if as_json:
        typer.echo(json.dumps({"baselines": [b.to_json() for b in found]}, indent=2))
        return
    con = stdout_console()
    if not found:
        con.print(f"no baselines in {db}", markup=False)
    for b in found:
        con.print(f"{b.name}: {b.dir_name}, set {b.set_utc}, {len(b.labels)} row(s)", markup=False)
