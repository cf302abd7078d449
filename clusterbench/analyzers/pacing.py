"""Pacing: the intervals between consecutive frame completions in the window (pure).

The completions are the ends of the frame events when the frames were counted from events
(``kernel:``, ``range:``, graph-level ``graph``). When frames are a plain number (FRAMES, ``frames=N``
in the range text, ``h2d-bytes:``), the completions are those of the kernel name (or the graph
executions of a graph-level trace) with the most launches in the window whose count divides the
frames (one launch per batch of frames), if there is one. The median, the 99th percentile (nearest rank) and the maximum of the intervals
are given, also per frame (divided by the frames per event).

The longest interval is the longest stall. Its cause: the cause of the longest idle gap inside it
when the idle gaps inside it make up at least STALL_GAP_SHARE of its excess over the median;
otherwise ``busy`` (the GPU worked through it: the work itself took longer).
"""

from __future__ import annotations

import math

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.model import GroupTrace
from clusterbench.analyzers.records import Frames, Gaps, Pacing

STALL_GAP_SHARE = 0.5


def _completions(g: GroupTrace, frames: Frames, window: iv.Intervals) -> tuple[np.ndarray | None, str | None, float, str | None]:
    """(completion times, what they are, frames per event, why there are none)."""
    if frames.count is None:
        return None, None, 1.0, "frames are unknown"
    if frames.completions_ns is not None:
        return frames.completions_ns, frames.events_source, frames.frames_per_event or 1.0, None
    ws, we = window

    def starting(starts: np.ndarray) -> np.ndarray:
        i = iv.search(ws, starts, side="right") - 1
        return (i >= 0) & (starts < we[np.maximum(i, 0)])

    # the candidates: each kernel name, and the graph executions of a graph-level trace
    candidates: list[tuple[int, str, np.ndarray]] = []
    r = g.engines.get("kernel")
    if r is not None:
        m = starting(r.start_ns)
        counts = np.bincount(r.name[m])
        ids = np.flatnonzero(counts)
        for i, c in zip(ids.tolist(), counts[ids].tolist()):
            candidates.append((int(c), f"launches of {g.kernel_names[i]}", m & (r.name == i)))
    gr = g.engines.get("graph")
    if gr is not None:
        m = starting(gr.start_ns)
        if m.any():
            candidates.append((int(m.sum()), "CUDA graph executions", m))
    if not candidates:
        return None, None, 1.0, f"frames come from {frames.definition}, which has no completion times, and no kernel or graph starts in the window"
    candidates.sort(key=lambda x: -x[0])
    for c, source, m in candidates:
        if c >= 2 and frames.count % c == 0:
            rec = r if source.startswith("launches") else gr
            return np.sort(rec.end_ns[m]), source, frames.count / c, None
    c, source, _ = candidates[0]
    return None, None, 1.0, (
        f"frames ({frames.count:,}, from {frames.definition}) are not a multiple of the {source} in the window "
        f"(the most: {c:,}); count frames with --frames kernel:REGEX to see the pacing"
    )


def measure(g: GroupTrace, frames: Frames, window: iv.Intervals, gaps: Gaps) -> tuple[Pacing | None, str | None]:
    ends, source, per_event, why = _completions(g, frames, window)
    if ends is None:
        return None, why
    if ends.size < 3:
        return None, f"{ends.size} frame completion(s) in the window: too few for intervals"
    d = np.diff(ends)
    srt = np.sort(d)
    median = float(np.median(srt))  # of the sorted intervals: no second partition
    p99 = float(srt[max(0, math.ceil(0.99 * srt.size) - 1)])
    k = int(np.argmax(d))
    a, b = int(ends[k]), int(ends[k + 1])
    cause, api = "busy", None
    if len(gaps):
        gs, gl = gaps.starts_ns, gaps.lengths_ns
        inside = np.flatnonzero((gs < b) & (gs + gl > a))
        if inside.size:
            clipped = np.minimum(gs[inside] + gl[inside], b) - np.maximum(gs[inside], a)
            if clipped.sum() >= STALL_GAP_SHARE * max(0.0, (b - a) - median):
                top = int(inside[np.argmax(clipped)])
                cause, api = gaps.cause_of(top), gaps.api[top]
    return Pacing(source or "frame events", int(ends.size), float(per_event), median, p99, int(d[k]), a, cause, api,
                  int(window[0][0])), None  # fmt: skip
