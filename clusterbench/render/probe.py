"""Rendering for ``clusterbench probe``: the progress display (stderr) and the summary table (stdout)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from rich.box import SIMPLE_HEAD
from rich.console import Console, Group, RenderableType
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from clusterbench.model import units as U
from clusterbench.model.engines import display_name
from clusterbench.model.results import ResultRow, RowRole
from clusterbench.run.dryrun import DryRun
from clusterbench.run.probe import PHASES, ProbeEvent, ProbeOutcome
from clusterbench.run.scan import Scan, ScanPoint


# Below this many columns the one-table layout (about 115 columns for the reference labels) is
# split in two: the trace figures, then the throughput figures, each keyed by the config label.
WIDE_MIN_WIDTH = 120
_GAP = 2  # spaces between columns (rich: padding 0 1, no edge padding)

CAPTION = ("µs per frame from the trace; FPS untraced: median of the counted runs ± half their range (~: not "
           "steady); roofline FPS without the profiler (the GPU bars as traced, the host bar estimated untraced); "
           "profiler overhead = untraced FPS / traced FPS; *: above a roofline, said below")


def _cells(r: ResultRow) -> dict[str, str]:
    """Every figure of a row as text, with the units left to the headers (pure)."""
    sustained = U.fps(r.sustained_fps, unit=False)
    if r.sustained_fps is not None and r.sustained_fps_spread is not None:
        sustained += f" ± {U.fps(r.sustained_fps_spread, unit=False)}"
    eff = r.fps_efficiency
    if r.sustained_fps is None and r.sustained_gbps is not None and r.sustained_source not in (None, "result"):
        sustained = U.gbps(r.sustained_gbps)  # a program that reports GB/s only
    if r.sustained_steady is False:
        sustained += " ~"  # not steady: the legend and a note say so
    # an untraced FPS is set against the roofline without the profiler (the host bar estimated untraced)
    roof_fps = U.fps_of_us(r.roofline_untraced_us) or r.roofline_fps
    efficiency = U.pct(eff, 0, unit=False)
    if r.roofline_note and eff is not None:
        efficiency += "*"  # above a roofline: a note says why
    return {
        "config": r.label,
        "frames": U.count(r.frames),
        "kernel": U.us_per_frame(r.kernel_us, 2, unit=False),
        "h2d": U.us_per_frame(r.h2d_us, 2, unit=False),
        "d2h": U.us_per_frame(r.d2h_us, 2, unit=False),
        "roofline": U.us_per_frame(r.roofline_us, 2, unit=False),
        "binds": display_name(r.binds) if r.binds else U.NOT_MEASURED,
        "roofline_fps": U.fps(roof_fps, unit=False),
        "sustained": sustained,
        "efficiency": efficiency,
        "overhead": U.times(r.profiler_overhead, unit=False),
        "source": "failed" if r.error else (r.sustained_source or U.NOT_MEASURED),
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
    "source": ("sustained\nfrom", False),
}
# the narrow layout's throughput table: shorter headers, spelled out in NARROW_CAPTION
_NARROW_HEADERS: dict[str, tuple[str, bool]] = {
    "efficiency": ("% of\nroofline", True),
    "overhead": ("profiler\n×", True),
    "source": ("from", False),
}
NARROW_CAPTION = ("µs per frame from the trace; FPS untraced: median of the counted runs ± half their range (~: "
                  "not steady); roofline FPS without the profiler (the GPU bars as traced, the host bar estimated "
                  "untraced); % of roofline = sustained FPS / roofline FPS (*: above it, said below); profiler × = "
                  "untraced FPS / traced FPS (the profiler's overhead)")
TRACE_KEYS = ("config", "frames", "kernel", "h2d", "d2h", "roofline", "binds")
FPS_KEYS = ("config", "roofline_fps", "sustained", "efficiency", "overhead")
WIDE_KEYS = tuple(k for k in _COLUMNS if k != "source")
# the sustained figure's source, spelled out under the table when a row's is not the result records'
SOURCE_CAPTION = ("from: result = the workload's result records (untraced); rate = the program's own printed rate "
                  "(untraced); wall = frames over its wall time between its markers; wall-run = over its whole run, "
                  "start-up included; trace = frames over the traced window, under the profiler")


def _with_source(keys: tuple[str, ...], rows: Sequence[ResultRow]) -> tuple[str, ...]:
    """The sustained figure's source gets a column when any row's is not the result records'."""
    if any((r.sustained_source or "result") != "result" or r.error for r in rows):
        return (*keys, "source")
    return keys


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
            parts.append(f"solo {U.fps(r.solo_fps)} on GPU {r.solo_gpu}")
        if r.gpu_min_fps is not None:
            parts.append(f"slowest GPU {r.gpu_min_index}: {U.fps(r.gpu_min_fps)}")
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
    notes = scaling_notes(rows) + row_notes(rows)
    wide_keys, fps_keys = _with_source(WIDE_KEYS, rows), _with_source(FPS_KEYS, rows)
    if wide is None:
        wide = width is None or (width >= WIDE_MIN_WIDTH and table_width(wide_keys, cells) <= width)
    # the legend follows the tables as text, wrapped at the output's width rather than the table's
    if wide:
        parts: list[RenderableType] = [_table(wide_keys, cells, title, None), Text(CAPTION)]
    else:
        parts = [_table(TRACE_KEYS, cells, title, None, narrow=True), Text(""),
                 _table(fps_keys, cells, None, None, narrow=True), Text(NARROW_CAPTION)]
    if "source" in fps_keys:
        parts.append(Text(SOURCE_CAPTION))
    parts.extend(Text(n) for n in notes)
    return Group(*parts)


def row_notes(rows: Sequence[ResultRow]) -> list[str]:
    """One line per row that failed, aggregates several processes, or whose program's figures were set
    against the trace (pure)."""
    out = []
    for r in rows:
        if r.error:
            out.append(f"{r.label}: FAILED in {r.error}")
        if r.processes and r.processes > 1:
            out.append(f"{r.label}: {r.processes} (process, device) groups in the trace: frames and busy times "
                       "added up, roofline FPS summed over them")
        for what, status in (("rate", r.rate_check), ("kernel time", r.kernel_check)):
            if status is not None:
                out.append(f"{r.label}: the program's own {what} {_STATUS_WORDS[status]} the trace")
        if r.sustained_steady is False:
            out.append(f"{r.label}: its sustained runs did not reach a steady state (after "
                       f"{r.sustained_warmups or 0} warm-up runs): the figure is marked ~")
        if r.host_us is not None and (r.binds == "host" or r.roofline_note):
            out.append(f"{r.label}: {host_line(r)}")
        if r.roofline_note:
            out.append(f"{r.label}: * {r.roofline_note}")
        if r.sustained_source == "trace":
            out.append(f"{r.label}: sustained FPS from the traced window, under the profiler")
        elif r.sustained_source == "wall-run":
            out.append(f"{r.label}: sustained FPS over the program's whole run, start-up included")
    return out


# the host bar and the untraced frame this close (a fraction) read as one: the host's own work is the frame
HOST_FRAME_TOLERANCE = 0.10


def host_line(r: ResultRow) -> str:
    """The launching thread's bar traced and without the profiler, set against the untraced rate (pure)."""
    traced = f"host bar {U.us_per_frame(r.host_us, 2)} under nsys"
    if r.host_untraced_us is None:
        return traced + ", not estimated without the profiler"
    line = f"{traced}, {U.us_per_frame(r.host_untraced_us, 2)} without it ({r.host_estimate})"
    frame_us = U.fps_of_us(r.sustained_fps)  # 10^6 / FPS: the untraced frame time in µs
    if not frame_us:
        return line
    off = r.host_untraced_us / frame_us - 1
    line += f"; the untraced rate is {U.us_per_frame(frame_us, 2)}: the host bar is {U.signed_pct(100 * off, 1)} from it"
    if off > HOST_FRAME_TOLERANCE:
        # one thread's own work per frame cannot take longer than the frame it repeats in
        what = "the measured" if r.host_estimate == "measured" else "the estimated"
        return line + f", longer than the frame, which cannot be: {what} bar overstates the host's own time"
    if off < -HOST_FRAME_TOLERANCE:
        # every GPU bar is shorter than the host's (it binds the traced roofline), and the frame is longer still
        return line + (": the frame is longer than every bar, so the resources take turns, at least in part, "
                       "or wait on each other")
    return line + ": the host's own work is the frame"


_STATUS_WORDS = {"agree": "agrees with", "disagree": "DISAGREES with", "unchecked": "could not be checked against"}


def render_checks(checks: Mapping[str, Sequence[Any]]) -> list[str]:
    """The program's own figures against the trace that agreed or could not be checked, one message per
    check with its figures (pure); a disagreement was a warning when it was found."""
    return [f"{label}: {c.message}" for label, cs in checks.items() for c in cs if c.status != "disagree"]


def render_scan(points: Sequence[ScanPoint], scans: Sequence[Scan], width: int | None = None) -> RenderableType:
    """The scan: per point its values, sustained FPS against the roofline (the tallest bar) and against the
    one-stream bound (the sum of the bars), and which of the two it is nearer (pure)."""
    names = [s.name for s in scans]
    table = Table(title="scan", title_justify="left", header_style="bold", box=SIMPLE_HEAD, padding=(0, 1, 0, 0),
                  pad_edge=False, show_edge=False)
    table.add_column("config", overflow="fold")
    for n in names:
        table.add_column(n, justify="right")
    for header in ("sustained\nFPS", "roofline\nFPS", "sum of\nbars FPS"):
        table.add_column(header, justify="right")
    table.add_column("binds")
    table.add_column("nearer")
    notes = []
    for p in points:
        values = dict(p.values)
        sustained = U.fps(p.sustained_fps, unit=False) + ("" if p.source in (None, "result") else f" ({p.source})")
        nearer = p.nearer or U.NOT_MEASURED
        if p.note:
            nearer += "*"
            notes.append(Text(f"{p.label}: * {p.note}"))
        table.add_row(p.config, *(values.get(n, U.NOT_MEASURED) for n in names), "failed" if p.error else sustained,
                      U.fps(p.roofline_fps, unit=False), U.fps(p.serial_fps, unit=False),
                      display_name(p.binds) if p.binds else U.NOT_MEASURED, nearer)
    caption = Text("roofline FPS: the tallest bar without the profiler (the GPU bars as traced, the host bar "
                   "estimated untraced), what streams that overlap pay; sum of bars FPS: the bars added up, what one "
                   "stream (engines taking turns) pays; nearer: the bound the sustained FPS is closer to, or above "
                   "both; *: said below")
    if not any(p.delay_binds for p in points):
        return Group(table, caption, *notes)
    return Group(table, caption, *notes, Text(""), *_binds_side_by_side(points, names))


def _binds_side_by_side(points: Sequence[ScanPoint], names: Sequence[str]) -> tuple[RenderableType, ...]:
    """What binds at each point of a probe --what-binds scan, by the trace and by the delay test, side by side
    (pure): the two are measured differently and may disagree, so neither is folded into the other."""
    table = Table(title="what binds, point by point: the trace, and the delay test without the profiler",
                  title_justify="left", header_style="bold", box=SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False,
                  show_edge=False)
    # the config folds, but never below 8 characters; whether the resources overlap or take turns is the
    # scan's table above (nearer), so that this one fits 80 columns with the longest verdicts (host+gpu+link)
    table.add_column("config", overflow="fold", min_width=min(8, max(len(p.config) for p in points)))
    for n in names:
        table.add_column(n, justify="right", min_width=len(n))
    replayed = any(p.trace_binds for p in points)
    for header in ("tallest\nbar", "delay\ntest") + (("trace\nreplayed",) if replayed else ()):
        table.add_column(header, no_wrap=True)
    for header in ("host", "GPU", "link"):
        table.add_column(header, justify="right", no_wrap=True, min_width=6 if replayed else None)

    def slope(measured: float | None, trace: float | None) -> str:
        cell = U.NOT_MEASURED if measured is None else f"{measured:.2f}"
        return cell + (f"\n({trace:.2f})" if replayed and trace is not None else "")

    for p in points:
        values = dict(p.values)
        mark = "" if p.agree is not False else (" ≈" if p.within_spread else " ≠")
        trace = U.NOT_MEASURED if p.trace_binds is None else p.trace_binds + mark
        table.add_row(p.config, *(values.get(n, U.NOT_MEASURED) for n in names),
                      display_name(p.binds) if p.binds else U.NOT_MEASURED, p.delay_binds or U.NOT_MEASURED,
                      *((trace,) if replayed else ()),
                      *(slope(s, t) for s, t in zip(p.delay_slopes, p.trace_slopes)))
    caption = Text("tallest bar: the trace's (under the profiler); delay test: the resources "
                   "whose delay of k µs a frame lengthened the untraced frame by at least 0.75 k (binds), else "
                   "shared or none; host, GPU, link: each one's slope, frame µs per µs of delay"
                   + ("; trace replayed: the same delays replayed on the trace's schedule, each dependency keeping "
                      "its traced slack (its slopes in brackets); ≈: it names other resources than the delay test, with every "
                      "slope within the test's spread; ≠: beyond it"
                      if replayed else ""))
    return table, caption


def _wrap_command(head: str, words: Sequence[str], width: int) -> list[str]:
    """A command line at ``width``: broken only between words, each broken line ending in `` \\`` and
    the next indented under the first word, so that the lines copy back into a shell as one command;
    a word longer than the width stays whole on its own line."""
    indent = " " * len(head)
    lines, line = [], head
    for w in words:
        if line.strip() and line != head and len(line) + 1 + len(w) + 2 > width:
            lines.append(line + " \\")
            line = indent + w
        else:
            line = line + (" " if line != head else "") + w
    lines.append(line)
    return lines


def render_dry_run(dry: DryRun, width: int = 80) -> str:
    """``probe --dry-run``: every command line with its placeholders filled in, and the guards (pure);
    prose wrapped at ``width`` between words, command lines broken shell-style (`` \\``)."""
    import os
    import shlex
    import textwrap

    here = os.getcwd().rstrip("/") + "/"

    def words(argv: Sequence[str]) -> list[str]:  # paths under the current folder, relative to it
        return [shlex.quote(a.replace(here, "") if here in a else a) for a in argv]

    out: list[str] = []

    def prose(text: str, indent: str = "") -> None:
        out.extend(textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  ",
                                 break_long_words=False, break_on_hyphens=False) or [""])

    def command(head: str, argv_words: Sequence[str]) -> None:
        out.extend(_wrap_command(head, argv_words, width))

    prose("clusterbench probe --dry-run: nothing runs; this is the plan (paths relative to this folder)")
    if dry.existing is None:
        prose(f"results dir: {dry.results_dir} (new)")
    else:
        prose(f"results dir: {dry.results_dir}")
        prose(dry.existing.notice(dry_run=True), "  ")
    prose(f"tracer: {dry.tracer}" + (f" ({dry.nsys})" if dry.nsys else " (nsys is not found here: the GPU machine "
                                                                        "needs it on PATH)" if dry.tracer == "nsys"
                                                                        else ""))
    prose(f"every run: at most {dry.timeout_s:g} s (--timeout), then its process group is ended")
    prose(f"GPUs: {dry.gpus or 'the first this process may use'}")
    prose("guards, before any config runs:")
    for g in dry.guards:
        prose(f"- {g}", "  ")
    for c in dry.configs:
        out.append("")
        where = "" if not c.cwd else (", run in this folder" if c.cwd + "/" == here else f", run in {c.cwd}")
        prose(f"config {c.label} ({c.workload}){where}")
        if c.placeholders:
            shown = ", ".join(f"{k}={v}" for k, v in c.placeholders.items() if v is not None)
            prose(f"placeholders: {shown}", "  ")
        if c.trace is not None:
            env = [f"{k}={v}" for k, v in c.trace_env.items()]
            command("  trace:    ", [*env, *words(c.trace)])
        if c.export is not None:
            command("  export:   ", words(c.export))
            prose("(the export runs only where the profile wrote no .sqlite)", " " * 12)
        if c.analysis is not None:
            prose(f"analyze:  {c.analysis}", "  ")
        for argv in c.sustained:
            command("  untraced: ", words(argv))
        prose(f"sustained FPS ({c.sustained_source}): {c.sustained_note}", "  ")
        if c.what_binds is not None:
            prose(f"what binds: {c.what_binds}", "  ")
    for w in dry.warnings:
        prose(f"warning: {w}")
    lines = out
    return "\n".join(lines)


def render_unit(unit: Any) -> str | None:
    """The unit a probe ran on, in one line: ``unit: GPU-... (host n, boot b): link H2D 54.70, D2H 54.50 GB/s;
    both at once H2D 33.90 + D2H 40.00 GB/s; PCIe Gen5 x16 (max Gen5 x16); GPU on node 0, pinned buffers on
    node 0`` (pure); None without one."""
    if unit is None:
        return None
    link = unit.link.text if unit.link is not None else f"link not measured ({unit.link_problem})"
    bits = [link] + [x.text for x in (unit.pcie, unit.numa) if x is not None]
    return f"unit: {unit.short}: " + "; ".join(bits)


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
        "failures": [f.to_json() for f in outcome.failures],
        "unit": None if outcome.unit is None else outcome.unit.to_json(),
        "checks": {label: [c.to_json() for c in cs] for label, cs in outcome.checks.items() if cs},
        **({"untraced": {label: r.to_json() for label, r in outcome.untraced.items()}} if outcome.untraced else {}),
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
        elif event.kind == "failed":
            self.progress.update(task, phase="failed")
