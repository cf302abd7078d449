"""clusterbench analyze (placeholder until its issue lands)."""

from __future__ import annotations

import typer

from clusterbench.cli.common import boundary
from clusterbench.errors import EnvironmentFailure

HELP = "analyze: not built yet."


@boundary
def analyze() -> None:
    raise EnvironmentFailure("clusterbench analyze is not built yet")
