"""Render a :class:`~clusterbench.analysis.compare.Comparison`: JSON, Markdown, a rich table.

Every number carries its unit: µs/frame in the headers, % on deltas, FPS for sustained FPS.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from clusterbench.analysis.compare import (
    NO_NOISE_REASON,
    Comparison,
    GateFailure,
    MetricDelta,
    Presence,
    RowComparison,
    Verdict,
    display_engine,
)

if TYPE_CHECKING:
    from rich.table import Table

COMPARE_JSON_SCHEMA = "clusterbench.compare/1"

_SHORT = {"kernel_us": "kernel", "h2d_us": "h2d", "d2h_us": "d2h", "roofline_us": "roofline", "sustained_fps": "sustained"}
_VERDICT_TEXT = {
    Verdict.SAME: "SAME",
    Verdict.FASTER: "FASTER",
    Verdict.SLOWER: "SLOWER",
    Verdict.NOT_COMPARABLE: "NOT COMPARABLE",
    Verdict.MISSING: "-",
}
_VERDICT_STYLE = {Verdict.FASTER: "green", Verdict.SLOWER: "red", Verdict.NOT_COMPARABLE: "yellow"}


# ----------------------------------------------------------------------------- JSON


def _metric_json(m: MetricDelta) -> dict:
    return {
        "before": m.before,
        "after": m.after,
        "delta_pct": m.delta_pct,
        "unit": m.unit,
        "noise": m.noise,
        "verdict": m.verdict.value,
        "reason": m.reason,
        "note": m.note,
    }


def render_compare_json(
    cmp: Comparison,
    gate_pct: float | None = None,
    failures: tuple[GateFailure, ...] = (),
    not_checked: tuple[str, ...] = (),
) -> dict:
    """A JSON-ready dict: rows with label, metrics {name: {before, after, delta_pct, ...}},
    binds {before, after, changed}, end_to_end, plus warnings and, with a gate, its outcome."""
    out: dict = {
        "schema": COMPARE_JSON_SCHEMA,
        "before": asdict(cmp.before),
        "after": asdict(cmp.after),
        "same_session": cmp.same_session,
        "rows": [
            {
                "label": r.label,
                "presence": r.presence.value,
                "streams": r.streams,
                "same_session": r.same_session,
                "metrics": {m.name: _metric_json(m) for m in r.metrics},
                "binds": {"before": r.binds_before, "after": r.binds_after, "changed": r.binds_changed},
                "end_to_end": {"verdict": r.end_to_end.value, "reason": r.end_to_end_reason},
                "notes": list(r.notes),
            }
            for r in cmp.rows
        ],
        "warnings": [{"message": w.message, "hint": w.hint} for w in cmp.warnings],
    }
    if gate_pct is not None:
        out["gate"] = {
            "pct": gate_pct,
            "passed": not failures,
            "failures": [asdict(f) for f in failures],
            "not_checked": list(not_checked),
        }
    return out


# ----------------------------------------------------------------------------- text helpers


def _num(v: float | None, unit: str = "") -> str:
    if v is None:
        return "-"
    if unit == "FPS":
        return f"{v:,.0f}"
    return f"{v:.2f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.2f} %"


def config_name(row: RowComparison, rows: tuple[RowComparison, ...]) -> str:
    """'3x3, 1 stream' as in the DESIGN.md reference table, or the label when that is ambiguous."""
    if row.cluster is None or row.streams is None:
        return row.label
    twins = [r for r in rows if (r.cluster, r.streams) == (row.cluster, row.streams)]
    if len(twins) > 1:
        return row.label
    return f"{row.cluster}x{row.cluster}, {row.streams} stream{'' if row.streams == 1 else 's'}"


def _binds_text(r: RowComparison) -> str:
    if r.binds_changed:
        return f"{display_engine(r.binds_before)} -> {display_engine(r.binds_after)}"
    if r.presence is Presence.BEFORE_ONLY:
        return display_engine(r.binds_before)
    return display_engine(r.binds_after if r.binds_after is not None else r.binds_before)


def all_noise_unknown(cmp: Comparison) -> bool:
    ms = [m for r in cmp.rows for m in r.metrics if m.verdict in (Verdict.FASTER, Verdict.SLOWER, Verdict.SAME)]
    return bool(ms) and all(m.noise is None for m in ms)


def render_compare_notes(cmp: Comparison) -> list[str]:
    """Per-row reasons behind the verdicts, one line each; shared reasons said once."""
    lines: list[str] = []
    quiet_no_noise = all_noise_unknown(cmp)
    if quiet_no_noise:
        lines.append(
            f"All verdicts: {NO_NOISE_REASON} (no `*_spread` columns): FASTER/SLOWER say only the sign of the "
            "change. Repeat the probe to measure the noise."
        )
    for r in cmp.rows:
        name = r.label
        if r.presence is not Presence.BOTH:
            lines.append(f"{name}: {r.end_to_end_reason}")
            continue
        grouped: dict[tuple[str, str], list[str]] = {}
        for m in r.metrics:
            if m.verdict is Verdict.NOT_COMPARABLE or (
                m.verdict in (Verdict.SAME, Verdict.FASTER, Verdict.SLOWER)
                and not (quiet_no_noise and m.reason == NO_NOISE_REASON)
                and m.reason != "identical values"
            ):
                grouped.setdefault((_VERDICT_TEXT[m.verdict], m.reason), []).append(_SHORT.get(m.name, m.name))
        for (verdict, reason), names in grouped.items():
            lines.append(f"{name}: {', '.join(names)} {verdict}: {reason}")
        lines.extend(f"{name}: {_SHORT.get(m.name, m.name)}: {m.note}" for m in r.metrics if m.note)
        lines.append(f"{name}: {r.end_to_end_reason}")
        lines.extend(f"{name}: {n}" for n in r.notes)
    return lines


# ----------------------------------------------------------------------------- Markdown


def render_compare_markdown(cmp: Comparison) -> str:
    """The DESIGN.md reference-table layout (config, kernel before/after, roofline after,
    binds) plus the kernel delta, then the notes as a list. Ready for a docs page."""
    lines = [
        f"Kernel µs per frame. before: `{cmp.before.name}`, after: `{cmp.after.name}`.",
        "",
        "| config | kernel before (µs/frame) | kernel after (µs/frame) | kernel delta | "
        "roofline before (µs/frame) | roofline after (µs/frame) | binds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in cmp.rows:
        k, roof = r.metric("kernel_us"), r.metric("roofline_us")
        cfg = config_name(r, cmp.rows)
        if r.presence is Presence.BEFORE_ONLY:
            cfg += " (before only)"
        elif r.presence is Presence.AFTER_ONLY:
            cfg += " (after only)"
        lines.append(
            f"| {cfg} | {_num(k.before)} | {_num(k.after)} | {_pct(k.delta_pct)} | "
            f"{_num(roof.before)} | {_num(roof.after)} | {_binds_text(r)} |"
        )
    notes = render_compare_notes(cmp)
    if notes or cmp.warnings:
        lines += ["", "Notes:", ""]
        lines += [f"- {n}" for n in notes]
        lines += [f"- Warning: {w.message}" for w in cmp.warnings]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- rich table


def _cell(m: MetricDelta) -> str:
    if m.before is None and m.after is None:
        return "-"
    head = f"{_num(m.before, m.unit)}\n→ {_num(m.after, m.unit)}"
    if m.verdict is Verdict.MISSING:
        return head
    style = _VERDICT_STYLE.get(m.verdict)
    verdict = "NOT\nCOMPARABLE" if m.verdict is Verdict.NOT_COMPARABLE else _VERDICT_TEXT[m.verdict]
    verdict = f"[{style}]{verdict}[/]" if style else verdict
    return f"{head}\n{_pct(m.delta_pct)}\n{verdict}"


def render_compare_table(cmp: Comparison) -> Table:
    """One row per config label: before→after, delta % and verdict per metric; binds; end to end."""
    from rich import box
    from rich.table import Table

    table = Table(
        title=f"clusterbench compare: {cmp.before.name} → {cmp.after.name}",
        box=box.SIMPLE_HEAD, show_lines=True, pad_edge=False, collapse_padding=True,
    )  # fmt: skip
    table.add_column("config", overflow="fold", min_width=12)
    for n in cmp.metric_names:
        unit = "FPS" if n.endswith("_fps") else "µs/frame"
        table.add_column(f"{_SHORT.get(n, n)}\n{unit}", justify="right", min_width=9 if unit == "FPS" else None)
    table.add_column("binds", no_wrap=True)
    table.add_column("end to\nend", no_wrap=True)
    for r in cmp.rows:
        label = r.label
        if r.presence is Presence.BEFORE_ONLY:
            label += "\n(before only)"
        elif r.presence is Presence.AFTER_ONLY:
            label += "\n(after only)"
        e2e = r.end_to_end.value.replace("_", "\n") if r.presence is Presence.BOTH else "-"
        binds = _binds_text(r).replace(" -> ", "\n→ ")
        table.add_row(label, *(_cell(m) for m in r.metrics), binds, e2e)
    return table
