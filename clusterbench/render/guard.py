"""Render a :class:`~clusterbench.run.guards.GuardVerdict`: a rich table, or JSON.

Colour repeats the status word and never replaces it; every number in a message carries its
unit (%, MiB, MHz, s), put there by the check that made it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from clusterbench.run.guards import GuardVerdict, Status, VerdictStatus

if TYPE_CHECKING:
    from rich.table import Table

# ``clusterbench guard --json``: the schema name, then the verdict (its own version inside).
# History: 1: the single-GPU report; 2: the one verdict over 1..N GPUs (GuardVerdict.to_json).
GUARD_JSON_SCHEMA = "clusterbench.guard/2"

_STYLE = {Status.PASS: "green", Status.FAIL: "bold red", Status.WARN: "yellow", Status.SKIP: "dim"}
_VERDICT_STYLE = {VerdictStatus.PASS: "green", VerdictStatus.FORCED: "yellow", VerdictStatus.REFUSED: "bold red"}


def render_guard_json(verdict: GuardVerdict) -> str:
    """The verdict as JSON text (the same dict the probe stores under ``guard`` in env.json)."""
    return json.dumps({"schema": GUARD_JSON_SCHEMA, **verdict.to_json()}, indent=2, sort_keys=False)


def render_guard_title(verdict: GuardVerdict) -> str:
    if not verdict.gpus:
        return "clusterbench guard"
    gpus = "; ".join(f"GPU {g.index} {g.reading.name} ({g.reading.uuid})" for g in verdict.gpus)
    r = verdict.gpus[0].reading
    cuda = f", CUDA {r.cuda_driver_version}" if r.cuda_driver_version else ""
    return f"clusterbench guard: {gpus}; driver {r.driver_version}{cuda}"


def render_guard_verdict(verdict: GuardVerdict) -> str:
    """The caption: the status word, the reason code, how many checks warned, and the verdict's message."""
    n_warn = len(verdict.warnings)
    warned = f", {n_warn} warning{'s' if n_warn != 1 else ''}" if n_warn else ""
    return f"{verdict.status.value.upper()} ({verdict.reason}{warned}): {verdict.message}"


def render_guard_table(verdict: GuardVerdict) -> Table:
    """One row per check: status, check, the GPU it judged (``host`` for the host-wide ones), result."""
    from rich.markup import escape
    from rich.table import Table

    caption = f"[{_VERDICT_STYLE[verdict.status]}]{escape(render_guard_verdict(verdict))}[/]"
    table = Table(title=escape(render_guard_title(verdict)), title_justify="left", caption=caption,
                  caption_justify="left", show_lines=False)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("GPU", no_wrap=True)
    table.add_column("result")
    rows = [(str(g.index), c) for g in verdict.gpus for c in g.checks] + [("host", c) for c in verdict.host_checks]
    for where, c in rows:
        text = c.message + (f"\nhint: {c.hint}" if c.hint and c.status in (Status.FAIL, Status.WARN) else "")
        table.add_row(f"[{_STYLE[c.status]}]{c.status.value.upper()}[/]", escape(c.name), where, escape(text))
    return table
