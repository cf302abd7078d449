"""clusterbench guard (placeholder until its issue lands)."""

from __future__ import annotations

import typer

from clusterbench.cli.common import boundary
from clusterbench.errors import EnvironmentFailure

HELP = "guard: not built yet."


@boundary
def guard() -> None:
    raise EnvironmentFailure("clusterbench guard is not built yet")
