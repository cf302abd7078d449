"""The typer layer: one module per subcommand, each a thin shell over the core library."""

from __future__ import annotations

import typer

from clusterbench import __version__
from clusterbench.cli.common import EXIT_CODES_HELP, hide_flag_metavars

hide_flag_metavars()

app = typer.Typer(
    name="clusterbench",
    help=(
        "What does your GPU photon cluster-finder pipeline really cost?\n\n"
        "probe traces the CuPy cluster finder under Nsight Systems; analyze turns an nsys "
        "SQLite export into per-engine GPU time per frame and the roofline; compare puts two "
        "result dirs (or two traces) side by side; guard runs the idle-GPU and fresh-build checks alone; "
        "floors measures compare's noise floors from A/A dirs; history and baseline keep every probe row.\n\n"
        + EXIT_CODES_HELP
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"clusterbench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Root options."""


from clusterbench.cli import analyze as _analyze  # noqa: E402
from clusterbench.cli import compare as _compare  # noqa: E402
from clusterbench.cli import baseline as _baseline  # noqa: E402
from clusterbench.cli import floors as _floors  # noqa: E402
from clusterbench.cli import history as _history  # noqa: E402
from clusterbench.cli import guard as _guard  # noqa: E402
from clusterbench.cli import probe as _probe  # noqa: E402

app.command("analyze", help=_analyze.HELP, epilog=EXIT_CODES_HELP)(_analyze.analyze)
app.command("probe", help=_probe.HELP, epilog=EXIT_CODES_HELP)(_probe.probe)
app.command("compare", help=_compare.HELP, epilog=EXIT_CODES_HELP)(_compare.compare)
app.command("guard", help=_guard.HELP, epilog=EXIT_CODES_HELP)(_guard.guard)
app.command("floors", help=_floors.HELP, epilog=EXIT_CODES_HELP)(_floors.floors)
app.command("history", help=_history.HELP, epilog=EXIT_CODES_HELP)(_history.history)
app.add_typer(_baseline.app, name="baseline")


def main() -> None:
    app()
