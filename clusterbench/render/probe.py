"""Rendering for ``clusterbench probe``: the progress display (stderr) and the summary table (stdout)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.markup import escape
from rich.table import Table

from clusterbench.probe import PHASES, ProbeEvent, ProbeOutcome

ENGINE_NAMES = {"kernel": "kernel", "h2d": "H2D", "d2h": "D2H"}


def _num(value: Any, fmt: str, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:{fmt}}{unit}"


def _fps(value: Any) -> str:
    return "-" if value is None else f"{value:,.0f} FPS"


def render_summary(rows: Sequence[Mapping[str, object]], title: str | None = None) -> Table:
    """One line per config: per-engine µs per frame, the roofline and the engine that binds,
    sustained FPS with its spread, and how close it comes to the roofline."""
    table = Table(title=title, title_justify="left", header_style="bold",
                  caption="µs per frame from the trace; FPS untraced: median of the repeats ± half their range; "
                          "profiler overhead = untraced FPS / traced FPS", caption_justify="left")
    table.add_column("config")
    table.add_column("frames", justify="right")
    table.add_column("kernel\nµs", justify="right")
    table.add_column("H2D\nµs", justify="right")
    table.add_column("D2H\nµs", justify="right")
    table.add_column("roofline\nµs", justify="right")
    table.add_column("binds")
    table.add_column("roofline\nFPS", justify="right")
    table.add_column("sustained\nFPS", justify="right")
    table.add_column("sustained/\nroofline %", justify="right")
    table.add_column("profiler\noverhead ×", justify="right")
    for r in rows:
        binds = r.get("binds")
        spread = r.get("sustained_fps_spread")
        sustained = _num(r.get("sustained_fps"), ",.0f")
        if r.get("sustained_fps") is not None and spread is not None:
            sustained += f" ± {spread:,.0f}"
        table.add_row(
            str(r.get("label")),
            _num(r.get("frames"), ",d"),
            _num(r.get("kernel_us"), ".2f"),
            _num(r.get("h2d_us"), ".2f"),
            _num(r.get("d2h_us"), ".2f"),
            _num(r.get("roofline_us"), ".2f"),
            ENGINE_NAMES.get(str(binds), str(binds)) if binds else "-",
            _num(r.get("roofline_fps"), ",.0f"),
            sustained,
            _num(None if r.get("fps_efficiency") is None else 100 * float(r["fps_efficiency"]), ".0f"),
            _num(r.get("profiler_overhead"), ".2f"),
        )
    return table


def render_footer(outcome: ProbeOutcome) -> str:
    finders = sorted({str(r.get("finder")) for r in outcome.rows if r.get("finder")})
    ran = f"; finder: {', '.join(finders)}" if finders else ""
    return (f"Results: {outcome.results_dir} ({len(outcome.rows)} row(s) written{ran}; "
            f"session {outcome.session_id})")


def outcome_json(outcome: ProbeOutcome) -> dict[str, object]:
    """``--json``: the rows as written to probes.csv, plus where they went."""
    return {
        "results_dir": str(outcome.results_dir),
        "session": outcome.session_id,
        "rows": [dict(r) for r in outcome.rows],
        "warnings": list(outcome.warnings),
    }


class ProbeProgress:
    """A rich progress display on stderr: one bar per config, advancing through its phases.

    Call it with each :class:`ProbeEvent`; warnings print above the bars.
    """

    def __init__(self, console: Console, labels: Sequence[str], phases: Sequence[str] = PHASES[1:]) -> None:
        self.console = console
        self.phases = tuple(phases)
        self.progress = Progress(
            TextColumn("{task.fields[label]:<24}"),
            BarColumn(bar_width=24),
            TextColumn("{task.fields[phase]:<10}"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.tasks = {label: self.progress.add_task("", total=len(self.phases), label=label, phase="waiting")
                      for label in labels}
        self.guard_task = None

    def __enter__(self) -> "ProbeProgress":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def __call__(self, event: ProbeEvent) -> None:
        if event.kind == "warning":
            self.progress.console.print(f"[yellow]Warning:[/] {escape(str(event.message))}", markup=True,
                                        highlight=False)
            if event.hint:
                self.progress.console.print(f"  [dim]Hint:[/] {escape(event.hint)}", markup=True, highlight=False)
            return
        if event.kind == "phase" and event.label is None:
            self.guard_task = self.progress.add_task("", total=1, label="guards", phase=event.phase or "")
            return
        if self.guard_task is not None:
            self.progress.update(self.guard_task, completed=1, phase="passed")
            self.guard_task = None
        task = self.tasks.get(event.label or "")
        if task is None:
            return
        if event.kind == "phase" and event.phase in self.phases:
            self.progress.update(task, completed=self.phases.index(event.phase), phase=event.phase)
        elif event.kind == "row":
            self.progress.update(task, completed=len(self.phases), phase="done")
