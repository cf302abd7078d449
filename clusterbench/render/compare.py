"""Render a :class:`~clusterbench.compare.compare.Comparison`: text lines, JSON, Markdown, a wide table.

The default text layout gives one line per metric, so it fits 80 columns: every line is at
most ``width`` characters and verdicts are never cut. Every number carries its unit:
µs/frame or FPS in the metric name, % on deltas.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import asdict

from clusterbench.model import units as U
from clusterbench.model.engines import display_name as display_engine
from clusterbench.compare.noise import SCOPE_TEXT, SCOPES, TRACE_FLOOR_MIN_PCT, FloorSet
from clusterbench.compare.traces import TraceComparison, TraceSide
from clusterbench.compare.compare import (
    GPU_COLUMN,
    SESSION_DEFINITION,
    Comparison,
    GpuIdentity,
    GateOutcome,
    MetricDelta,
    Presence,
    Reason,
    RowComparison,
    Verdict,
)

# The compare JSON's schema. History:
#   clusterbench.compare/1: metrics with verdict and reason text.
#   clusterbench.compare/2: reason codes, across, the Mann–Whitney test, mismatches per row,
#     end to end from the roofline and sustained FPS, gate.nothing_comparable. Additive since:
#     rows[].gpu (each side's GPU model, UUID and host, and whether the models differ), before/after
#     .hosts, and the mismatch column "gpu" for row pairs compared across GPUs.
#   clusterbench.compare/3: the drift bound judges multi-stream transfers across sessions (reason codes
#     beyond_drift, no_floor); per metric bound_pct, noise_pct, noise_from and cross_session, floor_pct only
#     where the floor judged; "floors" (which floors file, or the seed's rules, per GPU model); "session"
#     (what a session is); "kind" ("dirs", or "traces" for two traces compared directly).
#   clusterbench.compare/4: the bootstrap interval of the ratio of medians replaces the Mann–Whitney test
#     (metric "test": {name "bootstrap-ratio-of-medians", ratio, low, high, level, resamples, seed,
#     excludes_one, n_before, n_after}; top-level "level" replaces "alpha"); reason code "unsteady"; the gate
#     judges the roofline and sustained FPS ("gate": metrics, judged and not_checked per label and metric,
#     failures with metric, unit and worse_pct, not_measured).
#   clusterbench.compare/5: a verdict on every GPU: the default bounds judge a model without a floors file
#     (floors[].seed), provisional verdicts ("provisional" per metric); sustained FPS from several processes
#     ("processes" per metric, noise_from "processes", "unsettled" or "min_effect"; top-level
#     "min_effect_pct"); link-bound figures across units as shares of each unit's link ("link": {direction,
#     duplex, before_gbps, after_gbps, alone_before_gbps, alone_after_gbps, measured: the change as measured in
#     the range too, two sessions of one unit}, "judged_delta_pct"); a bar that overstates its cost judged over
#     its range ("overstated": {before_factor, after_factor, engine_before, engine_after}, null where as
#     measured; "judged_delta_pct" then too); per row
#     "units" (each side's unit record or
#     null); gate "too_coarse", "unjudged" and "unjudged_pass", and exit 4 when it could not judge.
COMPARE_JSON_SCHEMA = "clusterbench.compare/5"

_SHORT = {"kernel_us": "kernel", "h2d_us": "h2d", "d2h_us": "d2h", "roofline_us": "roofline", "sustained_fps": "sustained"}
_NAME = {"kernel_us": "kernel µs", "h2d_us": "H2D µs", "d2h_us": "D2H µs", "roofline_us": "roofline µs",
         "sustained_fps": "sustained FPS"}  # fmt: skip
_VERDICT_TEXT = {
    Verdict.SAME: "SAME",
    Verdict.FASTER: "FASTER",
    Verdict.SLOWER: "SLOWER",
    Verdict.NOT_COMPARABLE: "NOT COMPARABLE",
    Verdict.MISSING: U.NOT_MEASURED,
}
_VERDICT_STYLE = {Verdict.FASTER: "green", Verdict.SLOWER: "red", Verdict.NOT_COMPARABLE: "yellow"}
ACROSS_MARK = "*"
CROSS_SESSION_MARK = "~"  # judged beyond the drift bound, across two sessions


# ----------------------------------------------------------------------------- JSON


def _metric_json(m: MetricDelta) -> dict:
    test = None
    ci = m.interval
    if ci is not None:
        test = {"name": "bootstrap-ratio-of-medians", "ratio": ci.ratio, "low": ci.low, "high": ci.high,
                "level": ci.level, "resamples": ci.resamples, "seed": ci.seed, "excludes_one": ci.excludes_one,
                "n_before": ci.n_before, "n_after": ci.n_after}  # fmt: skip
    return {
        "before": m.before,
        "after": m.after,
        "delta_pct": m.delta_pct,
        "unit": m.unit,
        "noise": m.noise,
        "noise_pct": m.noise_pct,
        "noise_from": m.noise_from,
        "floor_pct": m.floor_pct,
        "bound_pct": m.bound_pct,
        "cross_session": m.cross_session,
        "verdict": m.verdict.value,
        "reason_code": m.code.value,
        "reason": m.reason,
        "across": list(m.across),
        "pair_scope": m.pair_scope,
        "floor_scope": m.floor_scope,
        "floor_stand_in": m.floor_stand_in,
        "floor_provisional": m.floor_provisional,
        "test": test,
        "note": m.note,
        "provisional": m.provisional,
        "min_effect_pct": m.min_effect_pct,
        "processes": m.processes,
        "link": None if m.link is None else {"direction": m.link.direction, "duplex": m.link.duplex,
                                             "before_gbps": m.link.before_gbps, "after_gbps": m.link.after_gbps,
                                             "alone_before_gbps": m.link.alone_before_gbps,
                                             "alone_after_gbps": m.link.alone_after_gbps,
                                             "measured": m.link.measured},
        "judged_delta_pct": m.judged_delta_pct,
        "overstated": None if m.overstated is None else {
            "before_factor": m.overstated.before, "after_factor": m.overstated.after,
            "engine_before": m.overstated.engine_before, "engine_after": m.overstated.engine_after},
    }


def floors_json(fs: FloorSet) -> dict:
    """Which floors judged: the GPU model, the file (or the seed's rules), the drift bound."""
    return {"gpu_name": fs.gpu_name, "seed": fs.seed, "path": fs.path, "text": fs.text,
            "drift_bound_pct": fs.drift_bound_pct, "drift_bound_source": fs.drift_bound_source,
            "floors": [f.to_json() for f in fs.floors]}


def _gpu_json(g: GpuIdentity | None) -> dict | None:
    return None if g is None else {"name": g.name, "uuid": g.uuid, "host": g.host, "source": g.source}


_GATE_NAME = {"kernel_us": "kernel", "h2d_us": "H2D", "d2h_us": "D2H", "roofline_us": "roofline",
              "sustained_fps": "sustained FPS"}


def gate_figure_name(metric: str) -> str:
    """A gated figure in words: ``roofline``, ``sustained FPS``."""
    return _GATE_NAME.get(metric, metric)


def render_gate_json(gate: GateOutcome) -> dict:
    return {
        "pct": gate.pct,
        "metrics": list(gate.metrics),
        "passed": gate.passed,
        "nothing_comparable": gate.nothing_comparable,
        "judged": [{"label": lb, "metric": m} for lb, m in gate.judged],
        "failures": [asdict(f) for f in gate.failures],
        "not_checked": [{"label": lb, "metric": m, "why": why} for lb, m, why in gate.not_checked],
        "not_measured": list(gate.not_measured),
        "too_coarse": [{"label": lb, "metric": m, "why": why} for lb, m, why in gate.too_coarse],
        "unjudged": [{"label": lb, "metric": m, "why": why} for lb, m, why in gate.unjudged],
        "unjudged_pass": gate.unjudged_pass,
    }


def render_compare_json(cmp: Comparison, gate: GateOutcome | None = None) -> dict:
    """A JSON-ready dict (schema COMPARE_JSON_SCHEMA); with a gate, its outcome under "gate"."""
    out: dict = {
        "schema": COMPARE_JSON_SCHEMA,
        "kind": "dirs",
        "before": asdict(cmp.before),
        "after": asdict(cmp.after),
        "same_session": cmp.same_session,
        "session": SESSION_DEFINITION,
        "floors": [floors_json(fs) for fs in cmp.floors],
        "across": list(cmp.across),
        "level": cmp.level,
        "min_effect_pct": cmp.min_effect_pct,
        "rows": [
            {
                "label": r.label,
                "presence": r.presence.value,
                "streams": r.streams,
                "same_session": r.same_session,
                "scope": r.scope,
                "scope_text": r.scope_text,
                "metrics": {m.name: _metric_json(m) for m in r.metrics},
                "mismatches": [
                    {"column": mm.column, "before": mm.before, "after": mm.after, "affects": list(mm.affects),
                     "across": mm.across}
                    for mm in r.mismatches
                ],  # fmt: skip
                "binds": {"before": r.binds_before, "after": r.binds_after, "changed": r.binds_changed},
                "gpu": {"before": _gpu_json(r.gpu_before), "after": _gpu_json(r.gpu_after),
                        "differs": r.gpu_differs},
                "units": {"before": None if r.unit_before is None else r.unit_before.to_json(),
                          "after": None if r.unit_after is None else r.unit_after.to_json()},
                "end_to_end": {"verdict": r.end_to_end.value, "reason": r.end_to_end_reason,
                               "kernel_invisible": r.kernel_invisible},  # fmt: skip
                "notes": list(r.notes),
            }
            for r in cmp.rows
        ],
        "warnings": [{"message": w.message, "hint": w.hint} for w in cmp.warnings],
    }
    if gate is not None:
        out["gate"] = render_gate_json(gate)
    return out


# ----------------------------------------------------------------------------- text helpers


def _num(v: float | None, unit: str = "µs/frame") -> str:
    """A metric's value without its unit (the header or the line says it): FPS, or µs/frame to 2 decimals."""
    return U.fps(v, unit=False) if unit == "FPS" else U.us_per_frame(v, 2, unit=False)


def config_name(row: RowComparison, rows: tuple[RowComparison, ...]) -> str:
    """'3x3, 1 stream' as in the RTX 4090 reference table (docs/compare.md), or the label when that is ambiguous."""
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


PROVISIONAL_MARK = "†"  # judged by a default bound (no floors file) or a floor of too few pairs


def _verdict_cell(m: MetricDelta) -> str:
    text = _VERDICT_TEXT[m.verdict]
    return (text + (ACROSS_MARK if m.across and m.judged else "") + (CROSS_SESSION_MARK if m.cross_session else "")
            + (PROVISIONAL_MARK if m.provisional else ""))


_QUIET = (Reason.IDENTICAL, Reason.WITHIN_NOISE)


def row_notes(r: RowComparison) -> list[str]:
    """The reasons behind one row's verdicts, one sentence each; shared reasons said once.
    Quiet verdicts (identical, within the noise) are left to the reason code."""
    if r.presence is not Presence.BOTH:
        return [r.end_to_end_reason]
    lines: list[str] = []
    grouped: dict[tuple[str, str], list[str]] = {}
    for m in r.metrics:
        if m.verdict is Verdict.MISSING or (m.verdict is Verdict.SAME and m.code in _QUIET):
            continue
        grouped.setdefault((_VERDICT_TEXT[m.verdict], m.reason), []).append(_SHORT.get(m.name, m.name))
    for (verdict, reason), names in grouped.items():
        lines.append(f"{', '.join(names)} {verdict}: {reason}")
    for mm in r.mismatches:
        if mm.across and mm.column != GPU_COLUMN:  # the GPU difference has a plain note of its own
            lines.append(f"{ACROSS_MARK} across {mm.column}: {mm.before} → {mm.after}")
    lines.extend(f"{_SHORT.get(m.name, m.name)}: {m.note}" for m in r.metrics if m.note)
    lines.extend(f"{ACROSS_MARK} {n}" if r.gpu_differs and n.startswith("different GPUs") else n for n in r.notes)
    return lines


def render_compare_notes(cmp: Comparison) -> list[str]:
    """Every row's notes, each prefixed with its label, then the end-to-end reasons."""
    lines: list[str] = []
    for r in cmp.rows:
        lines.extend(f"{r.label}: {n}" for n in row_notes(r))
        if r.presence is Presence.BOTH:
            lines.append(f"{r.label}: end to end: {r.end_to_end_reason}")
    return lines


def _scope_floors(rows) -> str:  # noqa: ANN001
    """Which floors judge pairs of these rows' scope: ``same-unit floors`` (what stood in, when one did)."""
    pair = {r.scope for r in rows if r.scope}
    used = {m.floor_scope for r in rows for m in r.metrics if m.floor_scope}
    if not pair:
        return "no floor judged"
    want = SCOPE_TEXT[next(iter(pair))]
    if not used:
        return f"{want} floors (none judged here)"
    if used == pair:
        return f"{want} floors"
    return f"{' and '.join(SCOPE_TEXT[s] for s in SCOPES if s in used)} floors, for want of {want} ones"


def _side_line(tag: str, side) -> str:
    gpu = side.gpu_name or "GPU unknown"
    bits = [gpu.replace(",", ", ") if len(side.hosts) > 1 else gpu]  # a merged dir's distinct GPU names
    if len(side.hosts) > 1:
        bits.append(f"hosts {', '.join(side.hosts)}")
    if side.git_rev:
        bits.append(f"git {side.git_rev[:12]}{' dirty' if side.git_dirty else ''}")
    if side.session_id:
        sid = side.session_id
        generated = len(sid) == 32 and all(c in "0123456789abcdef" for c in sid)  # a probe's own id: its head
        bits.append(f"session {sid[:8] if generated else sid}")
    if side.format != "clusterbench":
        bits.append(side.format)
    return f"{tag} {side.name} ({', '.join(bits)})"


# A space between a number and its unit: wrap() never breaks a line there ("20 %", "1.02 µs/frame").
_KEEP = "\u00a0"  # textwrap does not break at a no-break space


def wrap(text: str, width: int, indent: str = "", cont: str | None = None) -> list[str]:
    """``text`` wrapped at word boundaries to ``width`` columns, never between a number and its unit;
    ``indent`` starts the first line, ``cont`` (default: indent + two spaces) the others."""
    follow = cont if cont is not None else indent + "  "
    lines = textwrap.wrap(U.UNIT_GAP.sub(_KEEP, text), width=width, initial_indent=indent, subsequent_indent=follow,
                          break_long_words=True, break_on_hyphens=False)  # fmt: skip
    return [ln.replace(_KEEP, " ") for ln in lines] or [indent.rstrip()]




# Column widths of the text layout: 2 + 13 + 1 + 9 + 3 + 9 + 1 + 9 + 1 + 15 + 1 + 15 = 79 columns.
_W_NAME, _W_VAL, _W_DELTA, _W_VERDICT, _W_CODE = 13, 9, 9, 15, 15
TEXT_MIN_WIDTH = 2 + _W_NAME + 1 + _W_VAL + 3 + _W_VAL + 1 + _W_DELTA + 1 + _W_VERDICT  # without the code column


def _grid(name: str, before: str, after: str, delta: str, verdict: str, code: str, with_code: bool) -> str:
    line = (f"  {name:<{_W_NAME}} {before:>{_W_VAL}} {'→' if before.strip() else ' '} {after:>{_W_VAL}} "
            f"{delta:>{_W_DELTA}} {verdict:<{_W_VERDICT}}")  # fmt: skip
    if with_code:
        line += f" {code}"
    return line.rstrip()


def render_compare_text(cmp: Comparison, width: int = 80) -> list[str]:
    """The default layout: per config a heading, one line per metric (before → after, delta,
    verdict, reason code), the end-to-end line and the notes. No line is longer than ``width``
    (at least TEXT_MIN_WIDTH; the reason-code column is dropped below 80)."""
    width = max(width, TEXT_MIN_WIDTH)
    with_code = width >= 80
    out: list[str] = []
    out += wrap(f"clusterbench compare: {cmp.before.name} → {cmp.after.name}", width)
    out += wrap(_side_line("before:", cmp.before), width, "", "        ")
    out += wrap(_side_line("after: ", cmp.after), width, "", "        ")
    if cmp.across:
        out += wrap(f"across: {', '.join(cmp.across)} (compared on purpose: verdicts marked {ACROSS_MARK})", width)
    for fs in cmp.floors:
        out += wrap(f"floors: {fs.text}", width, "", "        ")
    scopes = {r.scope_text for r in cmp.rows if r.presence is Presence.BOTH}
    if len(scopes) == 1:
        out += wrap(f"pairs: {scopes.pop()}: {_scope_floors(cmp.rows)}", width, "", "       ")
    for r in cmp.rows:
        out.append("")
        name = config_name(r, cmp.rows)
        head = f"{r.label}{'' if name == r.label else f' ({name})'}, binds {_binds_text(r)}"
        if r.presence is not Presence.BOTH:
            side = "before" if r.presence is Presence.BEFORE_ONLY else "after"
            vals = [f"{_SHORT.get(m.name, m.name)} {_num(m.before if side == 'before' else m.after, m.unit)}"
                    for m in r.metrics]  # fmt: skip
            out += wrap(f"{head}: only in {side}: {', '.join(vals)} (µs/frame; sustained FPS)", width)
            continue
        out += wrap(head, width)
        if len({x.scope_text for x in cmp.rows if x.presence is Presence.BOTH}) > 1:
            out += wrap(f"pair: {r.scope_text}: {_scope_floors((r,))}", width, "  ", "    ")
        out.append(_grid("metric", "before", "after", "delta", "verdict", "reason", with_code).replace("→", " "))
        for m in r.metrics:
            if m.before is None and m.after is None:
                continue
            verdict = _verdict_cell(m)
            out.append(_grid(_NAME.get(m.name, m.name), _num(m.before, m.unit), _num(m.after, m.unit),
                             U.signed_pct(m.delta_pct), verdict, m.code.value, with_code))  # fmt: skip
        out += wrap(f"end to end: {r.end_to_end.value.replace('_', ' ').upper()}: {r.end_to_end_reason}", width,
                     "  ", "    ")  # fmt: skip
        for n in row_notes(r):
            out += wrap(n, width, "  - ", "    ")
    out.append("")
    out += wrap(
        f"µs/frame from the traces; FPS untraced, the median of its processes' medians. A verdict must clear "
        f"the noise: at least the {U.pct_of(cmp.min_effect_pct, None)} minimum effect; sustained FPS of "
        f"several processes on both sides: 1.5 × the larger spread of their medians (and on two units the "
        f"across-units floor); else the metric's floor for where the two rows were measured and the spread of "
        f"the repeats, and with repeats on both sides the {U.pct(cmp.level, 0)} bootstrap interval of the "
        f"ratio of medians must exclude 1 as well. On two units, link-bound figures are judged as shares of "
        f"each unit's link; in two sessions of one unit, multi-stream sustained FPS bound by the link may be "
        f"explained by the link's drift (the change nearest 0 % between as measured and as shares). Multi-stream transfers of two sessions whose links were not measured are held to "
        f"the drift bound instead ({CROSS_SESSION_MARK}: beyond it). {PROVISIONAL_MARK}: provisional, judged by a default bound (no "
        f"floors file). Sessions: {SESSION_DEFINITION}. Reason codes: docs/compare.md.",
        width,
        "",
        "",
    )
    return out


# ----------------------------------------------------------------------------- Markdown


def render_compare_markdown(cmp: Comparison) -> str:
    """The RTX 4090 reference-table layout (docs/compare.md) (config, kernel before/after, roofline after,
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
            f"| {cfg} | {_num(k.before)} | {_num(k.after)} | {U.signed_pct(k.delta_pct)} | "
            f"{_num(roof.before)} | {_num(roof.after)} | {_binds_text(r)} |"
        )
    notes = render_compare_notes(cmp)
    if notes or cmp.warnings:
        lines += ["", "Notes:", ""]
        lines += [f"- {n}" for n in notes]
        lines += [f"- Warning: {w.message}" for w in cmp.warnings]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- wide rich table


def _cell(m: MetricDelta) -> str:
    if m.before is None and m.after is None:
        return U.NOT_MEASURED
    head = f"{_num(m.before, m.unit)}\n→ {_num(m.after, m.unit)}"
    if m.verdict is Verdict.MISSING:
        return head
    style = _VERDICT_STYLE.get(m.verdict)
    verdict = "NOT\nCOMPARABLE" if m.verdict is Verdict.NOT_COMPARABLE else _verdict_cell(m)
    verdict = f"[{style}]{verdict}[/]" if style else verdict
    return f"{head}\n{U.signed_pct(m.delta_pct)}\n{verdict}\n{m.code.value}"


def _plain_width(text: str) -> int:
    return max((len(re.sub(r"\[/?[a-z ]*\]", "", ln)) for ln in text.split("\n")), default=0)


def render_compare_wide(cmp: Comparison, width: int = 120) -> list[str]:
    """``--wide``: one table row per config label, one column per metric, then binds and end to end. When
    the columns do not fit ``width``, several tables follow one another, each starting with the config
    column: no row is left unlabelled and no cell is cut. Then the notes, wrapped."""
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table

    labels = []
    for r in cmp.rows:
        labels.append(r.label + ("" if r.presence is Presence.BOTH else f"\n({r.presence.value.replace('_', ' ')})"))
    columns: list[tuple[str, list[str], str]] = []
    for i, n in enumerate(cmp.metric_names):
        unit = U.metric_unit(n)
        columns.append((f"{_SHORT.get(n, n)}\n{unit}", [_cell(r.metrics[i]) for r in cmp.rows], "right"))
    columns.append(("binds", [_binds_text(r).replace(" -> ", "\n→ ") for r in cmp.rows], "left"))
    e2e = []
    for r in cmp.rows:
        cell = r.end_to_end.value.replace("_", "\n") if r.presence is Presence.BOTH else U.NOT_MEASURED
        e2e.append(cell + ("\nkernel\ninvisible" if r.kernel_invisible else ""))
    columns.append(("end to end", e2e, "left"))
    label_w = max([_plain_width(x) for x in labels] + [len("config")])
    widths = [max([_plain_width(h)] + [_plain_width(c) for c in cells]) for h, cells, _ in columns]
    chunks: list[list[int]] = [[]]
    used = label_w
    for i, w in enumerate(widths):
        if chunks[-1] and used + w + 2 > width:
            chunks.append([])
            used = label_w
        chunks[-1].append(i)
        used += w + 2
    out: list[str] = []
    for part, idx in enumerate(chunks):
        table = Table(title=None if part else f"clusterbench compare: {cmp.before.name} → {cmp.after.name}",
                      box=box.SIMPLE_HEAD, show_lines=True, pad_edge=False, collapse_padding=True)  # fmt: skip
        table.add_column("config", no_wrap=True, min_width=label_w)
        for i in idx:
            table.add_column(columns[i][0], justify=columns[i][2], no_wrap=True, min_width=widths[i])  # type: ignore[arg-type]
        for ri, lab in enumerate(labels):
            table.add_row(lab, *(columns[i][1][ri] for i in idx))
        buf = io.StringIO()
        Console(file=buf, width=max(width, label_w + sum(widths[i] + 2 for i in idx) + 2), color_system=None,
                highlight=False).print(table)
        out += [ln.rstrip() for ln in buf.getvalue().split("\n")]
        while out and not out[-1]:
            out.pop()
    out.append("")
    for n in render_compare_notes(cmp):
        out += wrap(n, width, "", "  ")
    return out


# ----------------------------------------------------------------------------- two traces


def render_trace_compare_json(tc: TraceComparison) -> dict:
    """The JSON of ``compare TRACE_A TRACE_B`` (schema COMPARE_JSON_SCHEMA, kind "traces")."""
    return {
        "schema": COMPARE_JSON_SCHEMA,
        "kind": "traces",
        "before": tc.before.to_json(),
        "after": tc.after.to_json(),
        "binds": {"before": tc.before.binds, "after": tc.after.binds, "changed": tc.binds_changed},
        "floors": floors_json(tc.floors),
        "engines": {m.name: _metric_json(m) for m in tc.engines},
        "kernels": [{"name": m.name, **_metric_json(m)} for m in tc.kernels],
        "warnings": [{"message": w, "hint": None} for w in tc.warnings],
    }


def _trace_side_line(tag: str, s: TraceSide) -> str:
    bits = [s.gpu_name or "GPU unknown", f"{s.frames:,} frames" + (f" ({s.frames_source})" if s.frames_source else ""),
            f"window: {s.window_source}", f"{s.streams} stream{'' if s.streams == 1 else 's'}"]
    return f"{tag} {s.path} ({', '.join(bits)})"


def render_trace_compare_text(tc: TraceComparison, width: int = 80) -> list[str]:
    """Per engine, then per kernel name: before → after µs/frame, delta, verdict (and reason code from 80
    columns); the binding engine before and after; the reasons. No line is longer than ``width``."""
    width = max(width, TEXT_MIN_WIDTH)
    with_code = width >= 80
    out = wrap(f"clusterbench compare: {tc.before.name} → {tc.after.name} (two traces)", width)
    out += wrap(_trace_side_line("before:", tc.before), width, "", "        ")
    out += wrap(_trace_side_line("after: ", tc.after), width, "", "        ")
    binds = (f"{display_engine(tc.before.binds)} -> {display_engine(tc.after.binds)}" if tc.binds_changed
             else display_engine(tc.after.binds or tc.before.binds))
    out += ["", f"engines (µs/frame), binds {binds}"]
    out.append(_grid("engine", "before", "after", "delta", "verdict", "reason", with_code).replace("→", " "))
    for m in tc.engines:
        name = "roofline" if m.name == "roofline_us" else display_engine(m.name[:-3])
        out.append(_grid(name[:_W_NAME], _num(m.before), _num(m.after), U.signed_pct(m.delta_pct), _verdict_cell(m),
                         m.code.value, with_code))  # fmt: skip
    if tc.kernels:
        out += ["", "kernels by name (µs/frame of each name's busy time)"]
        out.append(_grid("kernel", "before", "after", "delta", "verdict", "reason", with_code).replace("→", " "))
        for m in tc.kernels:
            name = m.name if len(m.name) <= _W_NAME else m.name[: _W_NAME - 1] + "…"
            out.append(_grid(name, _num(m.before), _num(m.after), U.signed_pct(m.delta_pct), _verdict_cell(m),
                             m.code.value, with_code))  # fmt: skip
        long = [m.name for m in tc.kernels if len(m.name) > _W_NAME]
        if long:
            out += wrap("full names: " + "; ".join(long), width, "  - ", "    ")
    grouped: dict[tuple[str, str], list[str]] = {}
    for m in (*tc.engines, *tc.kernels):
        if m.verdict is Verdict.MISSING or (m.verdict is Verdict.SAME and m.code in _QUIET):
            continue
        label = m.name[:-3] if m in tc.engines else m.name
        grouped.setdefault((_VERDICT_TEXT[m.verdict], m.reason), []).append(label)
    if grouped:
        out.append("")
    for (verdict, reason), names in grouped.items():
        out += wrap(f"{', '.join(names)} {verdict}: {reason}", width, "  - ", "    ")
    out.append("")
    out += wrap(f"µs per frame inside each trace's window. Noise: {U.pct_of(TRACE_FLOOR_MIN_PCT, None)} "
                "of the before value (trace figures reproduce to about 1 %); with several streams the transfer "
                f"engines of two traces are held to the {U.pct_of(tc.floors.drift_bound_pct, None)} drift bound "
                f"({CROSS_SESSION_MARK}: beyond it, across two sessions).", width, "", "")
    return out
