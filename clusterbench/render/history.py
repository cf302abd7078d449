"""Render a label's history: text lines (80 columns), JSON, and the static HTML site of ``history --html``.

The site: ``index.html`` with one section per label and metric (a trend plot, SVG inline, the steps marked
and linked, and a table of every change of build or config), and ``compare/<before>__<after>.html``, the
compare of the two results dirs of each step as ``clusterbench compare`` prints it.

Results dirs are called by their name, with as many parent folders as it takes to tell two dirs of one
name apart (:func:`dir_names`); in the text table a name too long for its column is cut from the middle,
at a place that keeps distinct dirs distinct (:func:`cut_names`).
"""

from __future__ import annotations

import html
import re
from collections import Counter
from pathlib import Path
from typing import Callable, Mapping, Sequence

from clusterbench.compare.compare import Comparison
from clusterbench.compare.history import HistorySeries, HistoryStep
from clusterbench.io.history import HistoryPoint
from clusterbench.model import units as U
from clusterbench.render.compare import floors_json, render_compare_text, wrap

HISTORY_JSON_SCHEMA = "clusterbench.compare.history/1"  # history LABEL --json; version 1: the first
PAGE_METRICS = ("kernel_us", "h2d_us", "d2h_us", "roofline_us", "sustained_fps")
CONFIG_CHANGED_WORD = "config_changed"
LEGEND = ("* a dirty tree. ▶ a step: the change of build moved the metric beyond the noise (the floor of the GPU "
          "model, or the drift bound for multi-stream transfers of two sessions); n/c: not comparable (see --json "
          "for the reason). Each point is judged against the nearest earlier point of its config (vs #N where that "
          "is not the previous one).")
CONFIG_LEGEND = ("config_changed: the two points ran different configs (named, before→after): the value moved "
                 "with the config, so it is not judged as a change of the build.")


def metric_label(metric: str) -> str:
    unit = U.metric_unit(metric)
    return f"{metric} ({unit})" if unit else metric


def _value(v: float | None, metric: str) -> str:
    return U.metric(metric, v, unit=False)


def _build(p: HistoryPoint) -> str:
    return (p.git_rev or "?")[:8] + ("*" if p.git_dirty else "")


def _step_word(t: HistoryStep) -> str:
    """The change column of a change of build: ``▶ SLOWER +29.5 %``, ``  same +0.4 %``, ``  n/c +3.3 %``."""
    d = t.delta
    pct = U.signed_pct(d.delta_pct, 1) if d.delta_pct is not None else ""
    word = {"NOT_COMPARABLE": "n/c", "SAME": "same", "MISSING": U.NOT_MEASURED}.get(d.verdict.value, d.verdict.value)
    return ("▶ " if t.is_step else "  ") + f"{word} {pct}".strip()


# ----------------------------------------------------------------------------- names of results dirs


def dir_names(points: Sequence[HistoryPoint]) -> dict[str, str]:
    """A name per results dir (by its path) that tells the dirs apart: its folder name, with as many parent
    folders as it takes where dirs of one name sit in different folders (``a/2026-12-01_f32``)."""
    paths = list(dict.fromkeys(p.dir_path for p in points))
    parts = {p: Path(p).parts or (p,) for p in paths}
    depth = dict.fromkeys(paths, 1)
    while True:
        names = {p: "/".join(parts[p][-depth[p]:]) for p in paths}
        counts = Counter(names.values())
        clash = [p for p in paths if counts[names[p]] > 1 and depth[p] < len(parts[p])]
        if not clash:
            return names
        for p in clash:
            depth[p] += 1


def _cut(name: str, width: int, head: int) -> str:
    return name if len(name) <= width else name[:head] + "…" + name[len(name) - (width - 1 - head):]


def cut_names(names: Sequence[str], width: int) -> tuple[dict[str, str], frozenset[str]]:
    """Each name cut to ``width`` columns from the middle (``2026-12-01_…racking_coop2``). The cut (how much
    of the head it keeps) is the one nearest the middle that keeps distinct names distinct; where none does
    (two names differ only deeper inside than any cut shows), the middle cut, and the names that then read
    alike are returned too, for a footnote."""
    width = max(width, 3)
    distinct = set(names)
    if all(len(n) <= width for n in distinct):
        return {n: n for n in distinct}, frozenset()
    middle = width // 2  # the head keeps the odd column: dates and dtypes lead a dir's name
    for head in sorted(range(1, width - 1), key=lambda h: (abs(h - middle), -h)):
        shown = {n: _cut(n, width, head) for n in distinct}
        if len(set(shown.values())) == len(distinct):
            return shown, frozenset()
    shown = {n: _cut(n, width, middle) for n in distinct}
    counts = Counter(shown.values())
    return shown, frozenset(n for n in distinct if counts[shown[n]] > 1)


# ----------------------------------------------------------------------------- JSON and text


def render_history_json(s: HistorySeries) -> dict:
    by_after = {id(t.after): t for t in s.transitions}
    names = dir_names(s.points)
    return {
        "schema": HISTORY_JSON_SCHEMA, "label": s.label, "metric": s.metric,
        "points": [{**p.to_json(), "name": names[p.dir_path],
                    "change": by_after[id(p)].to_json() if id(p) in by_after else None} for p in s.points],
        "steps": [t.to_json() for t in s.steps],
        "config_changes": [t.to_json() for t in s.config_changes],
        "floors": [floors_json(fs) for fs in s.floors],
    }


def render_history_text(s: HistorySeries, width: int = 80) -> list[str]:
    """The series as a table of at most ``width`` columns (a longer change of config continues on the next
    line), the steps under it, and the legend."""
    out = wrap(f"clusterbench history: {s.label}, {metric_label(s.metric)}, {len(s.points)} point(s), "
               f"{', '.join(s.gpus)}", width)
    for fs in s.floors:
        out += wrap(f"floors: {fs.text}", width, "", "        ")
    by_after = {id(t.after): t for t in s.transitions}
    full = dir_names(s.points)
    values = {id(p): _value(p.value, s.metric) for p in s.points}
    index = {id(p): i for i, p in enumerate(s.points, 1)}
    # a change of build judged against an earlier point than the previous one names it (the nearest of its config)
    cells = {id(t.after): (f"{CONFIG_CHANGED_WORD}:" if t.config else _step_word(t)
                           + (f" vs #{index[id(t.before)]}" if t.skipped else "")) for t in s.transitions}
    value_w = max([5, *map(len, values.values())])
    git_w = max([3, *(len(_build(p)) for p in s.points)])
    change_w = max([6, *map(len, cells.values())])
    fixed = 2 + 2 + 1 + 1 + 10 + 1 + git_w + 1 + value_w + 2
    longest = max([11, *map(len, full.values())])
    name_w = max(12, min(longest, width - fixed - change_w))
    shown, alike = cut_names(list(full.values()), name_w)
    out += ["", f"  {'#':>2} {'results dir':<{name_w}} {'measured':<10} {'git':<{git_w}} {'value':>{value_w}}  change"]
    start = fixed + name_w  # where the change column starts
    footnotes = []
    for i, p in enumerate(s.points, 1):
        t = by_after.get(id(p))
        name = full[p.dir_path]
        cell = cells.get(id(p), "")
        more: list[str] = []
        if t is not None and t.config:
            inline = f"{CONFIG_CHANGED_WORD}: {t.config_text}"
            if start + len(inline) <= width:
                cell = inline
            else:
                more = wrap(t.config_text, width, " " * 5, " " * 7)
        out.append(f"  {i:>2} {shown[name]:<{name_w}} {(p.measured_utc or U.NOT_MEASURED)[:10]:<10} "
                   f"{_build(p):<{git_w}} {values[id(p)]:>{value_w}}  {cell}".rstrip())
        out += more
        if name in alike:
            footnotes += wrap(f"#{i} {name}", width, "  ", "     ")  # one a line (broken only past the width)
    if footnotes:
        out += ["results dirs whose cut names read alike, in full:", *footnotes]
    out.append("")
    builds, configs = s.build_changes, s.config_changes
    if not s.transitions:
        out += wrap("No change of build or config between consecutive points: nothing to judge.", width)
    else:
        said = [f"{len(builds)} change(s) of build, " + (f"{len(s.steps)} beyond the noise (▶)" if s.steps
                                                           else "none beyond the noise")]
        if configs:
            said.append(f"{len(configs)} change(s) of config, named and not judged")
        out += wrap("; ".join(said) + ".", width)
    for t in s.steps:
        d = t.delta
        out += wrap(f"step {full[t.before.dir_path]} → {full[t.after.dir_path]} (git {_build(t.before)} → "
                    f"{_build(t.after)}): {_value(d.before, s.metric)} → {_value(d.after, s.metric)} {d.unit}, "
                    f"{U.signed_pct(d.delta_pct)} {d.verdict.value} ({d.code.value}): {d.reason}", width, "  - ",
                    "    ")
    out += wrap(LEGEND, width)
    if configs:
        out += wrap(CONFIG_LEGEND, width)
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
.config_changed { color: #555; font-style: italic; }
.note { color: #666; font-size: 0.85em; } nav a { margin-right: 0.8em; }
pre { background: #f7f7f7; padding: 1em; overflow-x: auto; font-size: 0.8em; }
svg { max-width: 100%; height: auto; }
"""


def _page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{html.escape(title)}"
            f"</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def compare_page_name(t: HistoryStep, names: Mapping[str, str] | None = None) -> str:
    """The file (under compare/) of the compare of a step's two results dirs; ``names``: the dirs' names by
    path (:func:`dir_names`), so that two dirs of one name in different folders get their own pages."""
    b, a = ((names[t.before.dir_path], names[t.after.dir_path]) if names is not None
            else (t.before.dir_name, t.after.dir_name))
    return f"compare/{_slug(b)}__{_slug(a)}.html"


def render_compare_page(cmp: Comparison) -> str:
    text = "\n".join(render_compare_text(cmp, 100))
    body = (f"<h1>compare {html.escape(cmp.before.name)} → {html.escape(cmp.after.name)}</h1>\n"
            "<p><a href=\"../index.html\">back to the history</a></p>\n"
            f"<pre>{html.escape(text)}</pre>\n"
            + "".join(f"<p class=\"note\">Warning: {html.escape(w.message)}</p>\n" for w in cmp.warnings))
    return _page(f"compare {cmp.before.name} → {cmp.after.name}", body)


def _transition_row(t: HistoryStep, metric: str, names: Mapping[str, str]) -> str:
    d = t.delta
    if t.config:
        verdict = f"<td class=\"{CONFIG_CHANGED_WORD}\">{CONFIG_CHANGED_WORD}</td>"
        reason = f"<td>{html.escape(t.config_text)}: not judged (the value moved with the config)</td>"
    else:
        verdict = f"<td class=\"{d.verdict.value}\">{d.verdict.value}</td>"
        reason = f"<td>{html.escape(d.code.value)}: {html.escape(d.reason)}</td>"
    link = f"<a class=\"step\" href=\"{compare_page_name(t, names)}\">compare</a>" if t.is_step else ""
    kind = "step" if t.is_step else (CONFIG_CHANGED_WORD if t.config else "change")
    return (f"<tr class=\"{kind}\"><td>{html.escape(names[t.before.dir_path])} → "
            f"{html.escape(names[t.after.dir_path])}</td><td>{html.escape(_build(t.before))} → "
            f"{html.escape(_build(t.after))}</td><td class=\"num\">{_value(d.before, metric)} → "
            f"{_value(d.after, metric)}</td><td class=\"num\">{U.signed_pct(d.delta_pct)}</td>"
            f"{verdict}{reason}<td>{link}</td></tr>")


def render_history_site(series: Sequence[HistorySeries], db_name: str, generated_utc: str,
                        svg_of: Callable[[HistorySeries, Sequence[str | None], Mapping[str, str]], str]) -> str:
    """index.html: one section per series (label and metric), its trend (``svg_of`` draws it, the steps
    linking to their compare pages, the dirs called by ``names``) and the table of its changes of build and
    config."""
    labels = list(dict.fromkeys(s.label for s in series))
    names = dir_names([p for s in series for p in s.points])
    intro = (f"<h1>clusterbench history</h1>\n<p class=\"note\">{len(labels)} label(s) from {html.escape(db_name)}, "
             f"generated {html.escape(generated_utc)}. A <b>step</b> is a change of build between a results dir and "
             "the nearest earlier one of the same config that moved the metric beyond the noise (the GPU model's floor, or the drift bound "
             "for multi-stream transfers of two sessions); each links to the compare of its two dirs. A "
             f"<b>{CONFIG_CHANGED_WORD}</b> row is a pair of consecutive results dirs that ran different configs "
             "(pedestal, finder, workload, dtype, tracer, streams, transfer, cluster, cap, batch, frames; named "
             "before→after, a dotted line in the plot): the value moved with the config, so it is never judged "
             "as a change of the build.</p>")
    parts = [intro,
             "<nav>" + "".join(f"<a href=\"#{_slug(lb)}\">{html.escape(lb)}</a>" for lb in labels) + "</nav>"]
    for lb in labels:
        parts.append(f"<h2 id=\"{_slug(lb)}\">{html.escape(lb)}</h2>")
        for s in (x for x in series if x.label == lb):
            urls = [compare_page_name(t, names) for t in s.steps]
            parts.append(f"<section class=\"series\" id=\"{_slug(lb)}-{s.metric}\" data-label=\"{html.escape(lb)}\" "
                         f"data-metric=\"{s.metric}\" data-steps=\"{len(s.steps)}\" "
                         f"data-config-changes=\"{len(s.config_changes)}\">")
            parts.append(f"<h3>{html.escape(metric_label(s.metric))}</h3>")
            parts.append(svg_of(s, urls, names))
            rows = [_transition_row(t, s.metric, names) for t in s.transitions]
            if rows:
                parts.append("<table><tr><th>results dirs</th><th>git</th><th>value</th><th>delta</th>"
                             "<th>verdict</th><th>reason</th><th></th></tr>" + "".join(rows) + "</table>")
            else:
                parts.append("<p class=\"note\">no change of build or config between consecutive points</p>")
            parts.append("</section>")
    return _page("clusterbench history", "\n".join(parts))


# The file that marks a folder as a history site clusterbench wrote: history --html writes only into a new or
# empty folder, or one holding this file (a second run updates it).
SITE_MARKER = ".clusterbench-history-site"


def write_text(path: Path, text: str) -> None:
    """A page of the site, written whole or not at all (a temporary file renamed over the old page)."""
    from clusterbench.io.outputs import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text, "the history site page")
