"""Render a :class:`~clusterbench.run.guards.GuardReport`: a rich table, or JSON.

Colour repeats the status word and never replaces it; every number in a message carries its
unit (%, MiB, MHz, s), put there by the check that made it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from clusterbench.run.guards import GuardReport, Status

if TYPE_CHECKING:
    from rich.table import Table

GUARD_JSON_SCHEMA = "clusterbench.guard/1"

_STYLE = {Status.PASS: "green", Status.FAIL: "bold red", Status.WARN: "yellow", Status.SKIP: "dim"}


def render_guard_json(report: GuardReport) -> str:
    """The report as JSON text (the same dict the probe stores under ``guard`` in env.json)."""
    return json.dumps({"schema": GUARD_JSON_SCHEMA, **report.to_json()}, indent=2, sort_keys=False)


def render_guard_title(report: GuardReport) -> str:
    r = report.reading
    if r is None:
        return "clusterbench guard"
    cuda = f", CUDA {r.cuda_driver_version}" if r.cuda_driver_version else ""
    return f"clusterbench guard: GPU {r.index} {r.name} ({r.uuid}), driver {r.driver_version}{cuda}"


def render_guard_verdict(report: GuardReport) -> str:
    if report.ok:
        n_warn = len(report.warnings)
        return "all checks passed" + (f" ({n_warn} warning{'s' if n_warn != 1 else ''})" if n_warn else "")
    names = ", ".join(c.name for c in report.failed)
    if report.forced:
        return f"FORCED: failed checks overridden by --force ({names}); the override is recorded"
    return f"REFUSED: failed checks: {names}"


def render_guard_table(report: GuardReport) -> Table:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(render_guard_title(report)), title_justify="left", caption=escape(render_guard_verdict(report)),
                  caption_justify="left", show_lines=False)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("result")
    for c in report.checks:
        text = c.message + (f"\nhint: {c.hint}" if c.hint and c.status in (Status.FAIL, Status.WARN) else "")
        table.add_row(f"[{_STYLE[c.status]}]{c.status.value.upper()}[/]", escape(c.name), escape(text))
    return table
