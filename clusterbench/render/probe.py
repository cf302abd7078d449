"""Rendering for ``clusterbench probe``: the progress display (stderr) and the summary table (stdout)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from rich.box import SIMPLE_HEAD
from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from clusterbench.model.engines import display_name
from clusterbench.model.results import ResultRow, RowRole
from clusterbench.run.probe import PHASES, ProbeEvent, ProbeOutcome



def _num(value: Any, fmt: str, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:{fmt}}{unit}"


def _fps(value: Any) -> str:
    return "-" if value is None else f"{value:,.0f} FPS"


# Below this many columns the one-table layout (about 115 columns for the reference labels) is
# split in two: the trace figures, then the throughput figures, each keyed by the config label.
WIDE_MIN_WIDTH = 120
_GAP = 2  # spaces between columns (rich: padding 0 1, no edge padding)

CAPTION = ("µs per frame from the trace; FPS untraced: median of the repeats ± half their range; "
           "profiler overhead = untraced FPS / traced FPS")


def _cells(r: ResultRow) -> dict[str, str]:
    """Every figure of a row as text, with the units left to the headers (pure)."""
    sustained = _num(r.sustained_fps, ",.0f")
    if r.sustained_fps is not None and r.sustained_fps_spread is not None:
        sustained += f" ± {r.sustained_fps_spread:,.0f}"
    eff = r.fps_efficiency
    return {
        "config": r.label,
        "frames": _num(r.frames, ",d"),
        "kernel": _num(r.kernel_us, ".2f"),
        "h2d": _num(r.h2d_us, ".2f"),
        "d2h": _num(r.d2h_us, ".2f"),
        "roofline": _num(r.roofline_us, ".2f"),
        "binds": display_name(r.binds) if r.binds else "-",
        "roofline_fps": _num(r.roofline_fps, ",.0f"),
        "sustained": sustained,
        "efficiency": _num(None if eff is None else 100 * eff, ".0f"),
        "overhead": _num(r.profiler_overhead, ".2f"),
    }


# (key, header, right-justified): the header carries the unit
_COLUMNS: dict[str, tuple[str, bool]] = {
    "config": ("config", False),
    "frames": ("frames", True),
    "kernel": ("kernel\nµs", True),
    "h2d": ("H2D\nµs", True),
    "d2h": ("D2H\nµs", True),
    "roofline": ("roofline\nµs", True),
    "binds": ("binds", False),
    "roofline_fps": ("roofline\nFPS", True),
    "sustained": ("sustained\nFPS", True),
    "efficiency": ("sustained/\nroofline %", True),
    "overhead": ("profiler\noverhead ×", True),
}
# the narrow layout's throughput table: shorter headers, spelled out in NARROW_CAPTION
_NARROW_HEADERS: dict[str, tuple[str, bool]] = {
    "efficiency": ("% of\nroofline", True),
    "overhead": ("profiler\n×", True),
}
NARROW_CAPTION = ("µs per frame from the trace; FPS untraced: median of the repeats ± half their range; "
                  "% of roofline = sustained FPS / roofline FPS; profiler × = untraced FPS / traced FPS "
                  "(the profiler's overhead)")
TRACE_KEYS = ("config", "frames", "kernel", "h2d", "d2h", "roofline", "binds")
FPS_KEYS = ("config", "roofline_fps", "sustained", "efficiency", "overhead")
WIDE_KEYS = tuple(_COLUMNS)


def _table(keys: Sequence[str], cells: Sequence[Mapping[str, str]], title: str | None,
           caption: str | None, narrow: bool = False) -> Table:
    # SIMPLE_HEAD: a rule under the header, a space between columns; with one space of right
    # padding that makes the _GAP of two
    table = Table(title=title, title_justify="left", header_style="bold", box=SIMPLE_HEAD, padding=(0, 1, 0, 0),
                  pad_edge=False, show_edge=False, caption=caption, caption_justify="left")
    for k in keys:
        header, right = (_NARROW_HEADERS.get(k) or _COLUMNS[k]) if narrow else _COLUMNS[k]
        # fold, never "…": a cell too wide for its column wraps onto a second line and keeps every digit
        table.add_column(header, justify="right" if right else "left", overflow="fold")
    for c in cells:
        table.add_row(*(c[k] for k in keys))
    return table


def table_width(keys: Sequence[str], cells: Sequence[Mapping[str, str]], narrow: bool = False) -> int:
    """The columns a one-line-per-row table of these columns needs (pure): the widest cell or
    header line of each column, plus the gaps between them."""
    widths = []
    for k in keys:
        header = ((_NARROW_HEADERS.get(k) or _COLUMNS[k]) if narrow else _COLUMNS[k])[0].split("\n")
        widths.append(max([len(h) for h in header] + [len(c[k]) for c in cells]))
    return sum(widths) + _GAP * (len(widths) - 1)


def scaling_notes(rows: Sequence[ResultRow]) -> list[str]:
    """One line per --gpus aggregate row: the node's figures that have no column (pure)."""
    out = []
    for r in rows:
        if r.key.role is not RowRole.AGGREGATE:
            continue
        parts = [f"{r.label}: {r.gpus} GPU(s) at once"]
        if r.scaling_efficiency is not None:
            parts.append(f"scaling efficiency {r.scaling_efficiency:.2f} (summed FPS / (GPUs × solo FPS))")
        if r.solo_fps is not None:
            parts.append(f"solo {r.solo_fps:,.0f} FPS on GPU {r.solo_gpu}")
        if r.gpu_min_fps is not None:
            parts.append(f"slowest GPU {r.gpu_min_index}: {r.gpu_min_fps:,.0f} FPS")
        out.append("; ".join(parts))
    return out


def wide_width(rows: Sequence[ResultRow]) -> int:
    """The columns the one-row-per-config layout needs for these rows (pure)."""
    return table_width(WIDE_KEYS, [_cells(r) for r in rows])


def render_summary(rows: Sequence[ResultRow], title: str | None = None, width: int | None = None,
                   wide: bool | None = None) -> RenderableType:
    """Per config: per-engine µs per frame, the roofline and the engine that binds, roofline and
    sustained FPS (with its spread), sustained/roofline and the profiler overhead.

    ``wide``: True, one row per config; False, two tables (the trace figures, then the FPS
    figures), each keyed by the config, which fit 80 columns; None (the default) picks wide when
    it fits ``width`` and ``width`` is at least WIDE_MIN_WIDTH. No figure is left out either way.
    """
    cells = [_cells(r) for r in rows]
    notes = scaling_notes(rows)
    if wide is None:
        wide = width is None or (width >= WIDE_MIN_WIDTH and table_width(WIDE_KEYS, cells) <= width)
    # the legend follows the tables as text, wrapped at the output's width rather than the table's
    if wide:
        parts: list[RenderableType] = [_table(WIDE_KEYS, cells, title, None), Text(CAPTION)]
    else:
        parts = [_table(TRACE_KEYS, cells, title, None, narrow=True), Text(""),
                 _table(FPS_KEYS, cells, None, None, narrow=True), Text(NARROW_CAPTION)]
    parts.extend(Text(n) for n in notes)
    return Group(*parts)


def render_footer(outcome: ProbeOutcome) -> str:
    finders = sorted({r.finder for r in outcome.rows if r.finder})
    ran = f"; finder: {', '.join(finders)}" if finders else ""
    return (f"Results: {outcome.results_dir} ({len(outcome.rows)} row(s) written{ran}; "
            f"session {outcome.session_id})")


def render_campaign_progress(p: Any) -> str:
    """One stderr line per campaign event (``executors.CampaignProgress``)."""
    if p.task is None:
        return p.message
    t = p.task
    line = f"[{p.done}/{p.total}] task {t.index} {t.label}: {t.state.value} on {t.host or 'an unknown host'}"
    if t.message and not t.ok:
        line += f" ({t.message.splitlines()[0]})"
    return line


def outcome_json(outcome: ProbeOutcome) -> dict[str, object]:
    """``--json``: the rows as written to probes.csv (with their measurements), plus where they went."""
    return {
        "results_dir": str(outcome.results_dir),
        "session": outcome.session_id,
        "rows": [r.to_json() for r in outcome.rows],
        "warnings": list(outcome.warnings),
    }


class ProbeProgress:
    """A rich progress display on stderr: one bar per config, advancing through its phases (the
    sustained phase names its round when several GPUs run: solo, concurrent).

    Call it with each :class:`ProbeEvent` but warnings, which the CLI prints above the bars through
    its message formatter on :attr:`console` (the console the bars are drawn on).
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
            self.progress.update(task, completed=self.phases.index(event.phase), phase=event.message or event.phase)
        elif event.kind == "row":
            self.progress.update(task, completed=len(self.phases), phase="done")
