"""What every subcommand shares: the error boundary, the stderr console, shared options.

Core modules never print or exit; a command body parses, calls the core, renders, and
picks the exit code. User mistakes (ClusterbenchError) become one ``Error:`` line plus a
``Hint:`` line on stderr and an exit code; bugs keep their traceback.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from clusterbench.errors import ClusterbenchError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 environment failure (no GPU, nsys failed); "
    "2 usage error or bad input (bad trace, bad config); 3 a check ran and failed "
    "(guard refused, compare gate)."
)


def hide_flag_metavars() -> None:
    """Show no metavar after on/off flags in ``--help`` (typer's rich help prints ``<bool>``).

    Applied once, for every command, by clusterbench.cli.
    """
    try:
        from typer.core import TyperOption
    except ImportError:  # a typer without this layer prints no <bool>
        return
    original = getattr(TyperOption, "display_type_rich", None)
    if original is None or getattr(original, "_clusterbench", False):
        return  # older typer versions have no such hook (and no <bool> to hide)

    def display_type_rich(self: TyperOption, ctx: typer.Context):  # noqa: ANN202
        if self.is_flag and self.metavar is None:
            return None
        return original(self, ctx)

    display_type_rich._clusterbench = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


def stderr_console() -> Console:
    """Progress, warnings and errors go to stderr; tables and JSON go to stdout."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


# Width of piped output when COLUMNS does not say: the 80 columns of a standard terminal, so a log
# or a pager shows what a terminal would. Tables are laid out to fit it.
PIPE_WIDTH = 80


def output_width(is_terminal: bool, terminal_width: int, environ: dict[str, str] | None = None) -> int:
    """The width to lay output out at (pure): a terminal's own width; for a pipe, COLUMNS when it
    holds a positive whole number, else PIPE_WIDTH."""
    import os

    env = os.environ if environ is None else environ
    if is_terminal:
        return terminal_width
    cols = env.get("COLUMNS", "").strip()
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    return PIPE_WIDTH


def stdout_console() -> Console:
    """Tables and prose for stdout. Prose wraps at word boundaries at the output width."""
    con = Console(highlight=False)
    width = output_width(con.is_terminal, con.width)
    if width != con.width:
        con = Console(highlight=False, width=width)
    return con


def report_error(err: ClusterbenchError) -> None:
    # messages quote user input ("[defaults]", "[[config]]"): escape it so rich shows it verbatim
    con = stderr_console()
    con.print(f"[bold red]Error:[/] {escape(str(err))}", markup=True)
    if err.hint:
        con.print(f"[yellow]Hint:[/] {escape(err.hint)}", markup=True)


def warn(message: str, hint: str | None = None) -> None:
    con = stderr_console()
    con.print(f"[yellow]Warning:[/] {escape(message)}", markup=True)
    if hint:
        con.print(f"  [dim]Hint:[/] {escape(hint)}", markup=True)


def boundary(func: F) -> F:
    """Turn ClusterbenchError into ``Error: ...`` + exit code; let bugs raise."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ClusterbenchError as err:
            report_error(err)
            raise typer.Exit(code=err.exit_code) from None

    return wrapper  # type: ignore[return-value]
