"""clusterbench probe (placeholder until its issue lands)."""

from __future__ import annotations

import typer

from clusterbench.cli.common import boundary
from clusterbench.errors import EnvironmentFailure

HELP = "probe: not built yet."


@boundary
def probe() -> None:
    raise EnvironmentFailure("clusterbench probe is not built yet")
