"""What every subcommand shares: the error boundary, the consoles, and the one message formatter.

Core modules never print or exit; a command body parses, calls the core, renders, and
picks the exit code. User mistakes (ClusterbenchError) become an ``Error:`` message plus a
``Hint:`` on stderr and an exit code; bugs keep their traceback. Every ``Error:``, ``Warning:``
and ``Hint:`` of every command goes through :func:`print_message`: on stderr, wrapped at the
output width, never between a number and its unit and never inside a word.
"""

from __future__ import annotations

import errno
import functools
import re
import textwrap
from typing import Any, Callable, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from clusterbench.errors import ClusterbenchError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 environment failure (no GPU, nsys failed); "
    "2 usage error or bad input (bad trace, bad config); 3 a check ran and failed "
    "(guard refused, compare gate); 4 compare --gate could not judge a gated figure."
)


JSON = typer.Option(False, "--json", help="Print only JSON to stdout (warnings and errors still go to stderr).")

TRACE_WINDOW = typer.Option(
    None, "--window", metavar="SPEC",
    help="The part of the trace to measure: auto (default: the probe's pass range, else the GPU activity span with "
         "its leading and trailing set-up cut off), span (first to last GPU record), range:NAME\\[@DOMAIN]\\[#N] "
         "(NVTX ranges whose text starts with NAME, in DOMAIN; #N: the N-th), or ms:A-B (A to B ms on nsys's "
         "timeline). probe: for a program probed as it is; compare: for two traces.")

TRACE_FRAMES = typer.Option(
    None, "--frames", metavar="SPEC",
    help="Frames in the window: N, kernel:REGEX (launches of matching kernels starting in the window), "
         "range:NAME\\[@DOMAIN] (NVTX ranges lying mostly in it), graph (CUDA graph executions), or h2d-bytes:N "
         "(H2D bytes / N bytes per frame).")

TRACE_RANGE = typer.Option(None, "--range", metavar="NAME", help="Same as --window range:NAME.")


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


# The labels of the message lines, and their colours on a terminal (the word is always there).
ERROR, WARNING, HINT = "Error:", "Warning:", "Hint:"
_LABEL_STYLE = {ERROR: "bold red", WARNING: "yellow", HINT: "dim"}
# Units that stay on the line of their number ("20 %", "5.8 µs", "1,980 MHz"), longest first.
UNITS = ("GB/s", "MB/s", "GiB", "MiB", "KiB", "GHz", "MHz", "FPS", "µs", "ms", "ns", "GB", "MB", "kB", "%", "×",
         "s", "B")
_NUMBER_UNIT = re.compile(r"(?<![\w.,])([-+]?\d[\d,]*(?:\.\d+)?) +(" + "|".join(map(re.escape, UNITS)) + r")(?![\w/])")
_NBSP = "\u00a0"  # textwrap breaks only at ASCII white space: a no-break space holds a pair together


def format_message(label: str, message: str, width: int) -> list[str]:
    """``label`` (``Error:``, ``Warning:``, ``Hint:``) and ``message`` as lines of at most ``width``
    columns (pure). Each line of the message wraps on its own at spaces, never between a number and
    its unit nor inside a word (a word longer than the width overflows); wrapped and following lines
    are indented under the message."""
    indent = " " * (len(label) + 1)
    width = max(width, len(indent) + 20)
    out: list[str] = []
    for k, line in enumerate(message.splitlines() or [""]):
        wrapper = textwrap.TextWrapper(width=width, initial_indent=f"{label} " if k == 0 else indent,
                                       subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)
        joined = _NUMBER_UNIT.sub(lambda m: m.group(1) + _NBSP + m.group(2), line)
        out.extend(w.replace(_NBSP, " ") for w in (wrapper.wrap(joined) or [wrapper.initial_indent.rstrip()]))
    return out


def print_message(label: str, message: str, console: Console | None = None) -> None:
    """One message on stderr (or ``console``, e.g. a progress display's), laid out by :func:`format_message`
    at the output width (a terminal's own; piped: COLUMNS, else PIPE_WIDTH)."""
    con = console or stderr_console()
    for i, line in enumerate(format_message(label, message, output_width(con.is_terminal, con.width))):
        text = Text(line)
        if i == 0:
            text.stylize(_LABEL_STYLE.get(label, ""), 0, len(label))
        con.print(text, soft_wrap=True, highlight=False)


def report_error(err: ClusterbenchError) -> None:
    print_message(ERROR, str(err))
    if err.hint:
        print_message(HINT, err.hint)


def warn(message: str, hint: str | None = None, console: Console | None = None) -> None:
    print_message(WARNING, message, console)
    if hint:
        print_message(HINT, hint, console)


# Errors of writing to a stream that the user gave us: a closed pipe (``| head``), a full disk or quota
# (``> /dev/full``), a file too large, an I/O error. Raised by a write or flush of stdout or stderr, they
# carry no file name (an output file's errors are InputErrors naming it: clusterbench.io.outputs).
_STREAM_ERRNOS = frozenset({errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.ECONNRESET})


# Where a write to standard output or error happens: the echo of typer (click), rich's consoles, and our
# flush at the end of a command (_flush_stdout).
_STREAM_WRITERS = ("click", "typer", "rich")


def _raised_writing_a_stream(exc: BaseException) -> bool:
    """Whether ``exc`` was raised inside a write to stdout or stderr (by the frames it passed through)."""
    import traceback

    for frame in traceback.extract_tb(exc.__traceback__):
        where = frame.filename.replace("\\", "/")
        if frame.name == "_flush_stdout" or any(f"/{m}/" in where for m in _STREAM_WRITERS):
            return True
    return False


def stream_error(exc: BaseException) -> ClusterbenchError | None:
    """The Error for an OSError that writing to standard output (or error) raised, else None (a bug,
    which keeps its traceback)."""
    if not isinstance(exc, OSError) or exc.errno not in _STREAM_ERRNOS or getattr(exc, "filename", None):
        return None
    if not _raised_writing_a_stream(exc):
        return None
    if exc.errno in (errno.EPIPE, errno.ECONNRESET):
        return ClusterbenchError("cannot write to standard output: the pipe was closed before all output was "
                                 "written (the program reading it ended)",
                                 hint="read the whole output, or write it to a file (> out.txt)")
    return ClusterbenchError(f"cannot write to standard output: {exc.strerror or exc}",
                             hint="free space on the device standard output goes to, or redirect it to another file")


def _silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null, so that what is still buffered for a broken stdout does not
    fail again when the interpreter exits (which would print a second, raw error and exit 120)."""
    import os
    import sys

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a test runner's captured stream
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass


def _flush_stdout() -> None:
    import sys

    if sys.stdout is not None:
        sys.stdout.flush()


def _report_quietly(err: ClusterbenchError) -> None:
    """report_error, when stderr can take it (with stderr gone too, the exit code alone says it)."""
    try:
        report_error(err)
    except OSError:
        pass


def exit_for_stream_error(exc: OSError) -> typer.Exit:
    """Report a stream error (see :func:`stream_error`) and return the Exit (code 2) to raise."""
    err = stream_error(exc)
    assert err is not None
    _silence_stdout()
    _report_quietly(err)
    return typer.Exit(code=err.exit_code)


def boundary(func: F) -> F:
    """Turn ClusterbenchError into ``Error: ...`` + exit code, and a failed write to standard output (a
    closed pipe, a full disk) into an Error and exit 2; let bugs raise. Standard output is flushed here,
    inside the boundary, so that its errors are caught too."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            try:
                result = func(*args, **kwargs)
            finally:
                _flush_stdout()
            return result
        except ClusterbenchError as err:
            _report_quietly(err)
            raise typer.Exit(code=err.exit_code) from None
        except OSError as exc:
            if stream_error(exc) is None:
                raise
            raise exit_for_stream_error(exc) from None

    return wrapper  # type: ignore[return-value]
