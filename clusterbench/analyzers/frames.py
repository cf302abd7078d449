"""Frames: how many the window holds, counted from the program's own work (pure).

``FRAMES`` (the positional argument) or ``--frames``:
- ``N``: a number;
- ``kernel:REGEX``: launches of the kernels whose name matches REGEX (Python ``re.search``; base
  names, or full names with ``--mangled``) that start in the window;
- ``range:NAME[@DOMAIN]``: NVTX ranges whose text starts with NAME (in DOMAIN) that lie mostly in the
  window (their midpoint inside it): a range is host time, and a batch's range opens before its GPU
  work does, so a window cut at the GPU's first record would miss it by its start;
- ``graph``: CUDA graph executions starting in the window: graph-level rows, or in a node-level trace
  the executions of the process's ``cudaGraphLaunch`` calls (their kernel nodes' rows), else the
  ``cudaGraphLaunch`` calls themselves;
- ``h2d-bytes:N``: the H2D bytes moved in the window divided by N (bytes per frame), rounded.
Without either, ``frames=N`` in the text of the window's NVTX ranges (summed over the ranges, when
every one carries it); else frames are unknown and per-frame figures are left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from clusterbench.analyzers.model import GroupTrace
from clusterbench.analyzers.records import Frames, Window
from clusterbench.analyzers.window import select_ranges
from clusterbench.errors import InputError
from clusterbench.io.nsys import schema as S
from clusterbench.io.nsys.reader import GraphRuns, NvtxRanges

_FRAMES_RE = re.compile(r"(?:^|[\s,;:(])frames\s*=\s*(\d+)")
FRAMES_HINT = "use N, kernel:REGEX, range:NAME[@DOMAIN], graph or h2d-bytes:N (e.g. 10000, kernel:zoo_calib, graph, h2d-bytes:320000)"


@dataclass(frozen=True, slots=True)
class FramesSpec:
    kind: str  # "count", "kernel", "range", "graph", "h2d-bytes"
    count: int | None = None
    pattern: str | None = None  # kernel: the regex; range: the name
    domain: str | None = None
    bytes_per_frame: int | None = None
    given: str = "FRAMES argument"  # how the user gave a count: the FRAMES argument or --frames

    def describe(self) -> str:
        if self.kind == "kernel":
            return f"kernel:{self.pattern}"
        if self.kind == "range":
            return f"range:{self.pattern}" + (f"@{self.domain}" if self.domain else "")
        if self.kind == "h2d-bytes":
            return f"h2d-bytes:{self.bytes_per_frame}"
        return self.kind


def parse(text: str | None, frames_arg: int | None = None) -> FramesSpec | None:
    """``--frames`` and the FRAMES argument (one of them); InputError when malformed."""
    if frames_arg is not None:
        if text is not None:
            raise InputError("FRAMES and --frames cannot be combined", hint="give the frames once")
        if frames_arg <= 0:
            raise InputError(f"FRAMES must be a positive number of frames, got {frames_arg}", hint="pass the frames the traced pass processed, e.g. 10000")
        return FramesSpec("count", count=frames_arg)
    if text is None:
        return None
    t = text.strip()
    if t.isdigit():
        if int(t) <= 0:
            raise InputError(f"--frames must be a positive number of frames, got {t}", hint=FRAMES_HINT)
        return FramesSpec("count", count=int(t), given="--frames")
    if t == "graph":
        return FramesSpec("graph")
    kind, sep, rest = t.partition(":")
    if sep and kind == "kernel":
        if not rest:
            raise InputError("--frames kernel: needs a regular expression", hint=FRAMES_HINT)
        try:
            re.compile(rest)
        except re.error as exc:
            raise InputError(f"--frames {text!r}: not a regular expression ({exc})", hint=FRAMES_HINT) from None
        return FramesSpec("kernel", pattern=rest)
    if sep and kind == "range":
        name, _, domain = rest.rpartition("@") if "@" in rest else (rest, "", "")
        if not name:
            raise InputError(f"--frames {text!r}: range:NAME needs a range name", hint=FRAMES_HINT)
        return FramesSpec("range", pattern=name, domain=domain or None)
    if sep and kind == "h2d-bytes":
        if not rest.isdigit() or int(rest) <= 0:
            raise InputError(f"--frames {text!r}: h2d-bytes:N needs a positive number of bytes per frame", hint=FRAMES_HINT)
        return FramesSpec("h2d-bytes", bytes_per_frame=int(rest))
    raise InputError(f"--frames {text!r} is not a frame count or definition", hint=FRAMES_HINT)


def range_prefixes(spec: FramesSpec | None) -> tuple[str, ...]:
    return (spec.pattern,) if spec is not None and spec.kind == "range" and spec.pattern else ()


def _from_text(used: NvtxRanges) -> tuple[int | None, str | None, str | None]:
    """(frames, source, warning) from ``frames=N`` in the range texts."""
    per_text = []
    for t in used.texts:
        m = _FRAMES_RE.search(t)
        per_text.append(int(m.group(1)) if m else -1)
    values = np.array(per_text, dtype=np.int64)[used.text_index]
    n_found = int((values >= 0).sum())
    if n_found == 0:
        return None, None, None
    if n_found < len(used):
        return None, None, f"only {n_found} of {len(used)} NVTX ranges carry frames=N, so frames are unknown; pass FRAMES"
    texts = sorted({used.texts[i] for i in np.unique(used.text_index).tolist()})
    shown = f"'{texts[0]}'" + (f" and {len(texts) - 1} other text(s)" if len(texts) > 1 else "")
    if len(used) == 1:
        return int(values[0]), f"NVTX range text {shown}", None
    return int(values.sum()), f"sum of frames= over {len(used)} NVTX ranges ({shown})", None


def _starting_in(starts: np.ndarray, window: Window) -> np.ndarray:
    """Which start times lie in the window (a start at the window's end does not)."""
    ws, we = window.intervals
    i = np.searchsorted(ws, starts, side="right") - 1
    return (i >= 0) & (starts < we[np.maximum(i, 0)])


def _midpoint_in(starts: np.ndarray, ends: np.ndarray, window: Window) -> np.ndarray:
    """Which intervals lie mostly in the window: their midpoint inside it (a midpoint at its end does not)."""
    return _starting_in(starts + (ends - starts) // 2, window)


def count(g: GroupTrace, spec: FramesSpec | None, window: Window, window_ranges: NvtxRanges | None, ranges: NvtxRanges,
          h2d_bytes: int | None, warnings: list[str], graph_runs: GraphRuns | None = None) -> Frames:  # fmt: skip
    """The frames of the window (``window_ranges``: the NVTX ranges that form it, if any; ``graph_runs``:
    a node-level trace's graph executions, for ``graph``); warnings (a FRAMES that contradicts the range
    text) go to ``warnings``."""
    text = _from_text(window_ranges) if window_ranges is not None and len(window_ranges) else None
    if spec is None:
        if text is None or text[0] is None:
            if text is not None and text[2]:
                warnings.append(text[2])
            return Frames(None, None, None, hint=_hint(g, window))
        return Frames(text[0], text[1], "range-text")
    if spec.kind == "count":
        if text is not None and text[0] is not None and text[0] != spec.count:
            what = "the FRAMES argument" if spec.given == "FRAMES argument" else spec.given
            warnings.append(
                f"{what} ({spec.count:,}) contradicts frames={text[0]:,} in the {text[1]}; "
                f"used {what} ({spec.count:,}). Leave {'FRAMES' if what == 'the FRAMES argument' else what} out to use "
                "the range text."
            )
        return Frames(spec.count, spec.given, "argument")
    if spec.kind == "kernel":
        r = g.engines.get("kernel")
        rx = re.compile(spec.pattern)
        if r is None:
            ends = np.empty(0, dtype=np.int64)
            names: list[str] = []
        else:
            ok = np.array([bool(rx.search(n)) for n in g.kernel_names] + [False], dtype=bool)
            m = ok[r.name] & _starting_in(r.start_ns, window)
            ends = np.sort(r.end_ns[m])
            names = sorted({g.kernel_names[i] for i in np.unique(r.name[m]).tolist()})
        if ends.size == 0:
            raise InputError(
                f"--frames kernel:{spec.pattern}: no kernel launch in the window matches",
                hint="kernel names in the window: " + (", ".join(f"{n} ({c:,})" for n, c in _kernel_names_in(g, window)[:8]) or "none"),
            )
        what = ", ".join(names[:3]) + (f" and {len(names) - 3} more kernels" if len(names) > 3 else "")
        return Frames(int(ends.size), f"{ends.size:,} launches of {what} starting in the window (kernel:{spec.pattern})",
                      spec.describe(), ends, f"launches of {what}", 1.0)  # fmt: skip
    if spec.kind == "range":
        used, _ = select_ranges(ranges, g.pid, lambda t: t.startswith(spec.pattern), spec.domain)
        m = _midpoint_in(used.start_ns, used.end_ns, window) if len(used) else np.zeros(0, dtype=bool)
        if not m.any():
            dom = f" in domain {spec.domain}" if spec.domain else ""
            raise InputError(f"--frames {spec.describe()}: no NVTX range starting with {spec.pattern!r}{dom} lies in the window",
                             hint="check the name and the window (--window)")  # fmt: skip
        ends = np.sort(used.end_ns[m])
        return Frames(int(ends.size), f"{ends.size:,} NVTX ranges '{spec.pattern}' in the window ({spec.describe()})",
                      spec.describe(), ends, f"NVTX ranges '{spec.pattern}'", 1.0)  # fmt: skip
    if spec.kind == "graph":
        r = g.engines.get("graph")
        if r is not None:
            m = _starting_in(r.start_ns, window)
            ends = np.sort(r.end_ns[m])
            if ends.size:
                return Frames(int(ends.size), f"{ends.size:,} CUDA graph executions starting in the window (graph-level rows)",
                              "graph", ends, "CUDA graph executions", 1.0)  # fmt: skip
        if graph_runs is not None and len(graph_runs):
            mine = (graph_runs.pid == g.pid) & (graph_runs.device == g.device)
            m = mine & _starting_in(graph_runs.start_ns, window)
            if m.any():
                ends = np.sort(graph_runs.end_ns[m])
                return Frames(int(ends.size), f"{ends.size:,} CUDA graph executions starting in the window (node-level: "
                              "the kernel nodes of each cudaGraphLaunch)", "graph", ends, "CUDA graph executions", 1.0)  # fmt: skip
        launches = _graph_launches(g, window)
        if launches == 0:
            raise InputError("--frames graph: no CUDA graph launch in the window (no graph-level row, no cudaGraphLaunch call)",
                             hint="count frames another way: kernel:REGEX, range:NAME or a number")  # fmt: skip
        return Frames(launches, f"{launches:,} cudaGraphLaunch calls starting in the window (node-level trace)", "graph")
    # h2d-bytes
    nbytes = h2d_bytes or 0
    frames = int(round(nbytes / spec.bytes_per_frame))
    if frames <= 0:
        raise InputError(f"--frames {spec.describe()}: the window moves {nbytes:,} H2D bytes, less than one frame",
                         hint="check the bytes per frame, or count frames another way")  # fmt: skip
    exact = "" if nbytes == frames * spec.bytes_per_frame else f" (rounded from {nbytes / spec.bytes_per_frame:,.2f})"
    return Frames(frames, f"{nbytes:,} H2D bytes in the window / {spec.bytes_per_frame:,} per frame{exact}", spec.describe())


def _hint(g: GroupTrace, window: Window) -> str | None:
    """A frame definition for a window whose frames are unknown: the kernel with the most launches, and
    what ``kernel:NAME`` would count (a regex: it matches every name that contains NAME)."""
    return hint_from(_kernel_names_in(g, window))


def hint_from(top: list[tuple[str, int]]) -> str | None:
    """_hint from (name, launches starting in the window), most launches first."""
    if not top:
        return None
    name = top[0][0]
    rx = re.compile(re.escape(name))
    hits = [(n, c) for n, c in top if rx.search(n)]
    n = sum(c for _, c in hits)
    what = name if len(hits) == 1 else f"kernels matching {name} ({', '.join(h for h, _ in hits)})"
    return f"the window holds {n:,} launches of {what}: --frames kernel:{re.escape(name)}"


def _kernel_names_in(g: GroupTrace, window: Window) -> list[tuple[str, int]]:
    """(name, launches starting in the window), most launches first."""
    r = g.engines.get("kernel")
    if r is None:
        return []
    m = _starting_in(r.start_ns, window)
    ids, counts = np.unique(r.name[m], return_counts=True)
    return names_by_launches(ids, counts, g.kernel_names)


def names_by_launches(ids: np.ndarray, counts: np.ndarray, names: tuple[str, ...]) -> list[tuple[str, int]]:
    """(name, launches) of kernel name ids (ascending) with their counts, most launches first (ties: by id)."""
    order = np.argsort(-counts, kind="stable")
    return [(names[ids[i]], int(counts[i])) for i in order.tolist()]


def _graph_launches(g: GroupTrace, window: Window) -> int:
    api = g.api
    if not len(api):
        return 0
    tpid = api.thread_pid()
    m = (api.category == S.API_CODE["graph_launch"]) & (tpid[api.thread] == g.pid)
    return int(_starting_in(api.start_ns[m], window).sum())
