"""Error classes shared by the whole package.

The text of an error is the message shown to the user; ``hint`` says what to do next.
The CLI's error boundary turns these into ``Error: ...`` / ``Hint: ...`` and an exit code;
everything else (a bug) keeps its traceback.

Exit codes (documented in ``clusterbench --help``):
  0 success; 1 environment failure (no GPU, nsys failed); 2 usage error or bad input
  (a bad trace, a bad config); 3 a check ran and failed (guard refused, compare gate);
  4 a check could not judge what it was asked to (compare --gate: a gated figure not comparable);
  130 interrupted (Ctrl-C during probe or a campaign: finished rows are kept).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ENVIRONMENT = 1
EXIT_INPUT = 2
EXIT_CHECK = 3
EXIT_UNJUDGED = 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C


class ClusterbenchError(Exception):
    """Base class: a failure the user can act on. ``str(err)`` is the message."""

    exit_code = EXIT_INPUT

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class InputError(ClusterbenchError):
    """Bad input from the user: a bad trace, a bad config, a missing file (exit 2)."""

    exit_code = EXIT_INPUT


class TraceError(InputError):
    """A trace file that cannot be read as an nsys SQLite export (exit 2)."""


class ConfigError(InputError):
    """A configs.toml that fails validation (exit 2)."""


class EnvironmentFailure(ClusterbenchError):
    """The machine lacks something the command needs: no GPU, no nsys, nsys failed (exit 1)."""

    exit_code = EXIT_ENVIRONMENT


class CheckFailed(ClusterbenchError):
    """A check ran and said no: a guard refused, a compare gate tripped (exit 3)."""

    exit_code = EXIT_CHECK


class CheckUnjudged(ClusterbenchError):
    """A check could not judge what it was asked to: a gated figure that compare could not judge (exit 4)."""

    exit_code = EXIT_UNJUDGED


class WorkloadProtocolError(EnvironmentFailure):
    """A workload program broke the protocol (docs/workloads.md): no pass range, no result record,
    or a malformed one (exit 1, like any child that failed)."""


class CampaignInterrupted(ClusterbenchError):
    """Ctrl-C while a campaign's tasks ran (``probe --executor``): what finished is merged (exit 130)."""

    exit_code = EXIT_INTERRUPTED
