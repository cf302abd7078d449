"""Charts (matplotlib, the optional ``plot`` extra, imported only when a chart is asked for).

Uses matplotlib's object API with the Agg canvas directly: no pyplot, no global backend
switch, no display needed. The format follows the file's extension: .png, .svg or .pdf.
:func:`check_plot_path` says, before anything is printed, whether the chart can be written.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Mapping, Sequence

from clusterbench.compare.compare import Comparison, Presence
from clusterbench.compare.history import HistorySeries
from clusterbench.model import units as U
from clusterbench.model.engines import COLOURS
from clusterbench.model.engines import display_name as display_engine
from clusterbench.errors import EnvironmentFailure, InputError
from clusterbench.io.outputs import atomic_write

ENGINES: tuple[str, ...] = ("kernel", "h2d", "d2h")
# extension -> matplotlib format name
PLOT_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
_PLOT_HINT = "pass --plot FILE.png, FILE.svg or FILE.pdf in a writable directory"


def load_matplotlib():  # noqa: ANN201
    """(Figure, FigureCanvasAgg, Patch), or EnvironmentFailure with the install hint."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch
    except ImportError:
        raise EnvironmentFailure(
            "--plot needs matplotlib, which is not installed",
            hint="pip install 'clusterbench[plot]' (or pip install matplotlib), or drop --plot",
        ) from None
    return Figure, FigureCanvasAgg, Patch


def plot_format(path: Path) -> str:
    """The matplotlib format for ``path``'s extension; InputError for any other extension."""
    fmt = PLOT_FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        suffix = Path(path).suffix or "no extension"
        raise InputError(f"--plot writes .png, .svg or .pdf, not {suffix}: {path}", hint=_PLOT_HINT)
    return fmt


def check_plot_path(path: Path) -> str:
    """Check, before any output, that a chart can be written to ``path``: a known extension, not
    a directory, an existing parent directory, and a file that can be opened for writing (tried
    for real, then removed again if it did not exist). Returns the format; InputError otherwise;
    EnvironmentFailure when matplotlib is missing."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"cannot write the plot: {path} is a directory", hint=_PLOT_HINT)
    fmt = plot_format(path)
    parent = path.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise InputError(f"cannot write the plot {path}: directory {parent} {what}", hint=_PLOT_HINT)
    existed = path.exists()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.close(fd)
    except OSError as exc:
        raise InputError(f"cannot write the plot {path}: {exc.strerror or exc}", hint=_PLOT_HINT) from None
    if not existed:
        with contextlib.suppress(OSError):
            os.unlink(path)
    load_matplotlib()
    return fmt


def save_figure(fig, path: Path, fmt: str) -> Path:  # noqa: ANN001 - a matplotlib Figure
    """Write the figure to ``path`` through a temporary file renamed at the end (nothing half written);
    InputError when it cannot be written."""
    return atomic_write(Path(path), lambda tmp: fig.savefig(tmp, format=fmt), "the plot", hint=_PLOT_HINT)


def _save(fig, path: Path, fmt: str) -> Path:  # noqa: ANN001 - a matplotlib Figure
    """Lay the figure out and write it; InputError when it cannot be written."""
    fig.tight_layout()
    return save_figure(fig, path, fmt)


def render_compare_plot(cmp: Comparison, path: Path) -> Path:
    """Grouped bars per config label: kernel/h2d/d2h before (light, hatched) and after (solid),
    in µs per frame; the tallest (binding) bar of each side is marked. Writes PNG, SVG or PDF by
    the extension of ``path``; returns path. Every failure to write is an InputError."""
    path = Path(path)
    fmt = check_plot_path(path)
    Figure, FigureCanvasAgg, Patch = load_matplotlib()

    rows = cmp.rows
    n_bars = 2 * len(ENGINES)
    width = 0.8 / n_bars
    fig = Figure(figsize=(max(6.0, 2.2 * len(rows) + 2.0), 5.0), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ymax = 0.0
    for i, r in enumerate(rows):
        for side_idx, side in enumerate(("before", "after")):
            present = r.presence is Presence.BOTH or (side == "before") == (r.presence is Presence.BEFORE_ONLY)
            if not present:
                continue
            vals = {}
            for e in ENGINES:
                m = r.metric(f"{e}_us")
                v = m.before if side == "before" else m.after
                if v is not None:
                    vals[e] = v
            tallest = max(vals, key=vals.__getitem__) if vals else None
            for e_idx, e in enumerate(ENGINES):
                if e not in vals:
                    continue
                x = i - 0.4 + width * (e_idx * 2 + side_idx) + width / 2
                v = vals[e]
                ymax = max(ymax, v)
                ax.bar(
                    x, v, width,
                    color=COLOURS[e], alpha=0.45 if side == "before" else 1.0,
                    hatch="//" if side == "before" else None,
                    edgecolor="black" if e == tallest else COLOURS[e],
                    linewidth=1.6 if e == tallest else 0.5,
                )  # fmt: skip
                if e == tallest:
                    ax.annotate(
                        f"★ {U.us_per_frame(v, 2, unit=False)}", (x, v), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", fontsize=7, fontweight="bold", rotation=90,
                    )  # fmt: skip
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(
        [r.label + ("" if r.presence is Presence.BOTH else f"\n({r.presence.value.replace('_', ' ')})") for r in rows],
        fontsize=8,
    )
    ax.set_ylabel("µs per frame")
    ax.set_ylim(0, ymax * 1.3 if ymax > 0 else 1.0)
    ax.set_title(f"{cmp.before.name} (before, hatched) vs {cmp.after.name} (after, solid)", fontsize=10)
    handles = [Patch(facecolor=COLOURS[e], label=display_engine(e)) for e in ENGINES]
    handles += [
        Patch(facecolor="white", edgecolor="grey", hatch="//", label="before"),
        Patch(facecolor="grey", label="after"),
        Patch(facecolor="white", edgecolor="black", linewidth=1.6, label="★ tallest bar (binds)"),
    ]
    ax.legend(handles=handles, fontsize=8, ncol=3, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path, fmt)


def render_scan_plot(points, scans, path: Path) -> Path:  # noqa: ANN001 - run.scan's ScanPoint and Scan
    """FPS against the first scanned parameter: per config (and per value of any other scan) the sustained
    FPS (solid, dots), the roofline FPS (dashed: the tallest bar) and the one-stream bound (dotted: the sum
    of the bars). Writes PNG, SVG or PDF by the extension of ``path``; returns path."""
    path = Path(path)
    fmt = check_plot_path(path)
    Figure, FigureCanvasAgg, _Patch = load_matplotlib()
    x_name = scans[0].name
    order = {v: i for i, v in enumerate(scans[0].values)}
    numeric = all(_is_number(v) for v in scans[0].values)
    series: dict[str, list] = {}
    for p in points:
        values = dict(p.values)
        rest = ", ".join(f"{n}={v}" for n, v in p.values if n != x_name)
        series.setdefault(p.config + (f" ({rest})" if rest else ""), []).append((values[x_name], p))
    fig = Figure(figsize=(7.5, 4.8), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for k, (name, pts) in enumerate(series.items()):
        pts.sort(key=lambda vp: float(vp[0]) if numeric else order[vp[0]])
        xs = [float(v) if numeric else order[v] for v, _ in pts]
        colour = f"C{k % 10}"
        for attr, style, what in (("sustained_fps", "o-", "sustained"), ("roofline_fps", "--", "roofline (tallest bar)"),
                                  ("serial_fps", ":", "sum of the bars (one stream)")):
            ys = [getattr(p, attr) for _, p in pts]
            keep = [(x, y) for x, y in zip(xs, ys) if y]
            if keep:
                ax.plot([x for x, _ in keep], [y for _, y in keep], style, color=colour, label=f"{name}: {what}")
    if not numeric:
        ax.set_xticks(range(len(scans[0].values)))
        ax.set_xticklabels(list(scans[0].values))
    ax.set_xlabel(x_name)
    ax.set_ylabel("frames per second")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    ax.set_title(f"FPS against {x_name}: sustained, the roofline and the one-stream bound", fontsize=10)
    return _save(fig, path, fmt)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# ----------------------------------------------------------------------------- history trend


def trend_figure(series: HistorySeries, step_urls: Sequence[str | None] = (), width_in: float = 7.5,  # noqa: ANN201
                 names: Mapping[str, str] | None = None):
    """A label's metric over its results dirs, in the order measured: one line per GPU model, every point
    a dot, each step (a change of build beyond the noise) a triangle at its later point: red SLOWER, green
    FASTER; each change of config a dotted grey line before its later point (not judged). ``step_urls``
    (one per step) make the triangles links in an SVG; ``names`` (by dir path) label the dirs. Returns the
    Figure."""
    Figure, FigureCanvasAgg, _ = load_matplotlib()
    fig = Figure(figsize=(width_in, 3.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    index = {id(p): i for i, p in enumerate(series.points)}
    for gpu in series.gpus:
        pts = [p for p in series.points if (p.gpu_name or "GPU unknown") == gpu and p.value is not None]
        ax.plot([index[id(p)] for p in pts], [p.value for p in pts], marker="o", markersize=4, linewidth=1.2,
                label=gpu)
    steps = series.steps
    urls = list(step_urls) + [None] * (len(steps) - len(step_urls))
    for colour, verdict, marker in (("#c0392b", "SLOWER", "^"), ("#1e8449", "FASTER", "v")):
        chosen = [(s, u) for s, u in zip(steps, urls) if s.delta.verdict.value == verdict]
        if not chosen:
            continue
        sc = ax.scatter([index[id(s.after)] for s, _ in chosen], [s.after.value for s, _ in chosen], s=90,
                        marker=marker, color=colour, zorder=3, label=f"step: {verdict}")
        sc.set_urls([u for _, u in chosen])
    for k, t in enumerate(series.config_changes):
        ax.axvline(index[id(t.after)] - 0.5, color="#888888", linestyle=":", linewidth=1.2,
                   label="config changed (not judged)" if k == 0 else None)
    unit = "µs per frame" if series.metric.endswith("_us") else ("FPS" if series.metric.endswith("_fps") else "")
    ax.set_ylabel(f"{series.metric} ({unit})" if unit else series.metric, fontsize=8)
    ax.set_xticks(range(len(series.points)))
    ax.set_xticklabels([(names or {}).get(p.dir_path, p.dir_name) for p in series.points], rotation=20, ha="right",
                       fontsize=7)
    ax.set_title(f"{series.label}: {series.metric}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def render_trend_plot(series: HistorySeries, path: Path) -> Path:
    """``history --plot FILE``: the trend figure as .png, .svg or .pdf (by the extension)."""
    path = Path(path)
    fmt = check_plot_path(path)
    return save_figure(trend_figure(series), path, fmt)


def trend_svg(series: HistorySeries, step_urls: Sequence[str | None], names: Mapping[str, str] | None = None) -> str:
    """The trend figure as SVG text for a page (no XML header), steps linking to ``step_urls``, the dirs
    called by ``names``."""
    import io

    buf = io.StringIO()
    trend_figure(series, step_urls, names=names).savefig(buf, format="svg")
    text = buf.getvalue()
    return text[text.index("<svg"):]
