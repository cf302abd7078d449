"""The typer layer: one module per subcommand, each a thin shell over the core library."""

from __future__ import annotations

import typer

from clusterbench import __version__
from clusterbench.cli.common import EXIT_CODES_HELP, hide_flag_metavars

hide_flag_metavars()

# each in the module of its name (clusterbench.cli.analyze...), imported only when the command is built
COMMANDS = ("analyze", "probe", "compare", "guard", "floors", "history", "baseline")
HELP = (
    "What does your GPU photon cluster-finder pipeline really cost?\n\n"
    "probe traces the CuPy cluster finder under Nsight Systems; analyze turns an nsys "
    "SQLite export into per-engine GPU time per frame and the roofline; compare puts two "
    "result dirs (or two traces) side by side; guard runs the idle-GPU and fresh-build checks alone; "
    "floors measures compare's noise floors from A/A dirs; history and baseline keep every probe row.\n\n"
    + EXIT_CODES_HELP
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"clusterbench {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Root options."""


def build_app(only: str | None = None) -> typer.Typer:
    """The clusterbench app with every command, or with command ``only`` alone: the modules of the
    other commands (the probe's, history's, the guards') are then never imported, which saves a
    fresh ``clusterbench analyze`` their start-up time."""
    import importlib

    app = typer.Typer(name="clusterbench", help=HELP, no_args_is_help=True, add_completion=False,
                      pretty_exceptions_show_locals=False)  # fmt: skip
    app.callback()(_root)
    for name in COMMANDS if only is None else (only,):
        mod = importlib.import_module(f"clusterbench.cli.{name}")
        if name == "baseline":
            app.add_typer(mod.app, name="baseline")
        else:
            app.command(name, help=mod.HELP, epilog=EXIT_CODES_HELP)(getattr(mod, name))
    return app


def __getattr__(name: str) -> typer.Typer:
    """``clusterbench.cli.app``: the app with every command, built on first use."""
    if name == "app":
        app = build_app()
        globals()["app"] = app
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """The console script: the command named on the command line alone, when it names one."""
    import sys

    from clusterbench.cli.common import exit_for_stream_error, stream_error

    word = sys.argv[1] if len(sys.argv) > 1 else None
    try:
        build_app(word if word in COMMANDS else None)()
    except OSError as exc:  # --help or a usage message into a full disk or a closed pipe
        if stream_error(exc) is None:
            raise
        raise SystemExit(exit_for_stream_error(exc).exit_code) from None
