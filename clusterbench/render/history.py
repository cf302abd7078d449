"""Render a label's history: text lines (80 columns), JSON, and the static HTML site of ``history --html``.

The site: ``index.html`` with one section per label and metric (a trend plot, SVG inline, the steps marked
and linked, and a table of every change of build), and ``compare/<before>__<after>.html``, the compare of
the two results dirs of each step as ``clusterbench compare`` prints it.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Callable, Sequence

from clusterbench.compare.compare import Comparison
from clusterbench.compare.history import HistorySeries, HistoryStep
from clusterbench.io.history import HistoryPoint
from clusterbench.model import units as U
from clusterbench.render.compare import floors_json, render_compare_text, wrap

HISTORY_JSON_SCHEMA = "clusterbench.compare.history/1"  # history LABEL --json; version 1: the first
PAGE_METRICS = ("kernel_us", "h2d_us", "d2h_us", "roofline_us", "sustained_fps")


def metric_label(metric: str) -> str:
    unit = U.metric_unit(metric)
    return f"{metric} ({unit})" if unit else metric


def _value(v: float | None, metric: str) -> str:
    return U.metric(metric, v, unit=False)


def _build(p: HistoryPoint) -> str:
    return (p.git_rev or "?")[:8] + ("*" if p.git_dirty else "")


def _step_word(t: HistoryStep) -> str:
    d = t.delta
    pct = U.signed_pct(d.delta_pct, 1) if d.delta_pct is not None else ""
    word = {"NOT_COMPARABLE": "n/c", "SAME": "same", "MISSING": U.NOT_MEASURED}.get(d.verdict.value, d.verdict.value)
    return f"{word} {pct}".strip()


def render_history_json(s: HistorySeries) -> dict:
    by_after = {id(t.after): t for t in s.transitions}
    return {
        "schema": HISTORY_JSON_SCHEMA, "label": s.label, "metric": s.metric,
        "points": [{**p.to_json(), "change": by_after[id(p)].to_json() if id(p) in by_after else None}
                   for p in s.points],
        "steps": [t.to_json() for t in s.steps],
        "floors": [floors_json(fs) for fs in s.floors],
    }


def render_history_text(s: HistorySeries, width: int = 80) -> list[str]:
    out = wrap(f"clusterbench history: {s.label}, {metric_label(s.metric)}, {len(s.points)} point(s), "
               f"{', '.join(s.gpus)}", width)
    for fs in s.floors:
        out += wrap(f"floors: {fs.text}", width, "", "        ")
    by_after = {id(t.after): t for t in s.transitions}
    out += ["", f"  {'#':>2} {'results dir':<24} {'measured':<10} {'git':<9} {'value':>11}  change"]
    for i, p in enumerate(s.points, 1):
        t = by_after.get(id(p))
        mark = ("▶ " if t.is_step else "  ") + _step_word(t) if t is not None else ""
        name = p.dir_name if len(p.dir_name) <= 24 else p.dir_name[:23] + "…"
        out.append(f"  {i:>2} {name:<24} {(p.measured_utc or U.NOT_MEASURED)[:10]:<10} {_build(p):<9} "
                   f"{_value(p.value, s.metric):>11}  {mark}".rstrip())
    out.append("")
    if not s.transitions:
        out += wrap("No change of build between consecutive points: nothing to judge.", width)
    elif not s.steps:
        out += wrap(f"{len(s.transitions)} change(s) of build, none beyond the noise.", width)
    for t in s.steps:
        d = t.delta
        out += wrap(f"step {t.before.dir_name} → {t.after.dir_name} (git {_build(t.before)} → {_build(t.after)}): "
                    f"{_value(d.before, s.metric)} → {_value(d.after, s.metric)} {d.unit}, "
                    f"{U.signed_pct(d.delta_pct)} {d.verdict.value} ({d.code.value}): {d.reason}", width, "  - ", "    ")
    out += wrap("* a dirty tree. ▶ a step: the change of build moved the metric beyond the noise (the floor of "
                "the GPU model, or the drift bound for multi-stream transfers of two sessions); n/c: not "
                "comparable (see --json for the reason).", width)
    return out


# ----------------------------------------------------------------------------- the HTML site

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 62em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1em; margin-bottom: 0.2em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
td, th { padding: 0.2em 0.6em; border-bottom: 1px solid #eee; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.SLOWER { color: #c0392b; font-weight: bold; } .FASTER { color: #1e8449; font-weight: bold; }
.note { color: #666; font-size: 0.85em; } nav a { margin-right: 0.8em; }
pre { background: #f7f7f7; padding: 1em; overflow-x: auto; font-size: 0.8em; }
svg { max-width: 100%; height: auto; }
"""


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{html.escape(title)}"
            f"</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def compare_page_name(t: HistoryStep) -> str:
    """The file (under compare/) of the compare of a step's two results dirs."""
    return f"compare/{_slug(t.before.dir_name)}__{_slug(t.after.dir_name)}.html"


def render_compare_page(cmp: Comparison) -> str:
    text = "\n".join(render_compare_text(cmp, 100))
    body = (f"<h1>compare {html.escape(cmp.before.name)} → {html.escape(cmp.after.name)}</h1>\n"
            "<p><a href=\"../index.html\">back to the history</a></p>\n"
            f"<pre>{html.escape(text)}</pre>\n"
            + "".join(f"<p class=\"note\">Warning: {html.escape(w.message)}</p>\n" for w in cmp.warnings))
    return _page(f"compare {cmp.before.name} → {cmp.after.name}", body)


def render_history_site(series: Sequence[HistorySeries], db_name: str, generated_utc: str,
                        svg_of: Callable[[HistorySeries, Sequence[str | None]], str]) -> str:
    """index.html: one section per series (label and metric), its trend (``svg_of`` draws it, the steps
    linking to their compare pages) and the table of its changes of build."""
    labels = list(dict.fromkeys(s.label for s in series))
    intro = (f"<h1>clusterbench history</h1>\n<p class=\"note\">{len(labels)} label(s) from {html.escape(db_name)}, "
             f"generated {html.escape(generated_utc)}. A <b>step</b> is a change of build between consecutive "
             "results dirs that moved the metric beyond the noise (the GPU model's floor, or the drift bound "
             "for multi-stream transfers of two sessions); each links to the compare of its two dirs.</p>")
    parts = [intro,
             "<nav>" + "".join(f"<a href=\"#{_slug(lb)}\">{html.escape(lb)}</a>" for lb in labels) + "</nav>"]
    for lb in labels:
        parts.append(f"<h2 id=\"{_slug(lb)}\">{html.escape(lb)}</h2>")
        for s in (x for x in series if x.label == lb):
            urls = [compare_page_name(t) for t in s.steps]
            parts.append(f"<section class=\"series\" id=\"{_slug(lb)}-{s.metric}\" data-label=\"{html.escape(lb)}\" "
                         f"data-metric=\"{s.metric}\" data-steps=\"{len(s.steps)}\">")
            parts.append(f"<h3>{html.escape(metric_label(s.metric))}</h3>")
            parts.append(svg_of(s, urls))
            rows = []
            for t in s.transitions:
                d = t.delta
                link = (f"<a class=\"step\" href=\"{compare_page_name(t)}\">compare</a>" if t.is_step else "")
                rows.append(
                    f"<tr class=\"{'step' if t.is_step else 'change'}\"><td>{html.escape(t.before.dir_name)} → "
                    f"{html.escape(t.after.dir_name)}</td><td>{html.escape(_build(t.before))} → "
                    f"{html.escape(_build(t.after))}</td><td class=\"num\">{_value(d.before, s.metric)} → "
                    f"{_value(d.after, s.metric)}</td><td class=\"num\">"
                    f"{U.signed_pct(d.delta_pct)}</td>"
                    f"<td class=\"{d.verdict.value}\">{d.verdict.value}</td><td>{html.escape(d.code.value)}: "
                    f"{html.escape(d.reason)}</td><td>{link}</td></tr>")
            if rows:
                parts.append("<table><tr><th>results dirs</th><th>git</th><th>value</th><th>delta</th>"
                             "<th>verdict</th><th>reason</th><th></th></tr>" + "".join(rows) + "</table>")
            else:
                parts.append("<p class=\"note\">no change of build between consecutive points</p>")
            parts.append("</section>")
    return _page("clusterbench history", "\n".join(parts))


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
