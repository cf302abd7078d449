"""clusterbench compare (placeholder until its issue lands)."""

from __future__ import annotations

import typer

from clusterbench.cli.common import boundary
from clusterbench.errors import EnvironmentFailure

HELP = "compare: not built yet."


@boundary
def compare() -> None:
    raise EnvironmentFailure("clusterbench compare is not built yet")
