"""One verdict from both views: the tallest bar and the critical path (pure).

Two readings of what sets the frame time:
- the **tallest bar** (the roofline): the engine or launching thread with the most time. Right when the
  resources overlap (a pipeline): then the frame time is near the tallest bar, and shrinking any other bar
  changes nothing;
- the **critical path**: what each resource costs on the chain of waits that made the window as long as
  it is. Right when the resources take turns (one stream, a synchronize every frame): then the frame time
  is the sum of the parts, and shrinking any of them shortens it.

Where the measured frame time L (the window less its set-up gaps) lies between the tallest bar B and the
sum of the bars S (every GPU engine's busy time plus the busiest launching thread's work: the frame time
if nothing overlapped) says which: the overlap index x = (L - B) / (S - B) is 0 when everything overlaps
and 1 when everything takes turns (above 1: the GPU also idles between dependent work). The tallest bar
applies when it fills nearly all the loop (B >= ONE_RESOURCE of L), or when x <= OVERLAP_MAX and the bar's
resource holds most of the path; the path when x >= TURNS_MIN; both otherwise.
"""

from __future__ import annotations

from clusterbench.analyzers.records import Binding, CriticalPath, GroupAnalysis, PathPart
from clusterbench.model import units as U

ONE_RESOURCE = 0.90  # the tallest bar fills this share of the loop: it is the frame time
OVERLAP_MAX = 1 / 3  # the frame time lies within the first third from the tallest bar to the sum of the bars
TURNS_MIN = 2 / 3  # ... within the last third, or past the sum: the resources take turns
MOST = 0.5  # "most of the path"
SHOWN = 4  # parts named in the sentence
LISTED_SHARE = 0.01  # parts below this share of the loop are not named


def resource_of(g: GroupAnalysis) -> str | None:
    """The tallest bar's resource as the path names it (``host:<tid>`` for a launching thread)."""
    r = g.roofline
    if r.engine == "host":
        return f"host:{r.thread.tid}" if r.thread else "host"
    return r.engine


def part_label(p: PathPart, cp: CriticalPath) -> str:
    """A part as the sentence names it: ``host 57 % (thread 1684 feedA)``, ``kernel 31 %``."""
    text = f"{p.kind} {U.pct(cp.loop_share(p), 0)}"
    if p.thread is not None:
        text += f" (thread {p.thread.tid}" + (f" {p.thread.name})" if p.thread.name else ")")
    return text


def _bars(g: GroupAnalysis) -> tuple[int, int]:
    """(the tallest bar, the sum of the bars): GPU engines' busy time and the busiest thread's work."""
    gpu = sum(st.busy_ns for st in g.busy.engines.values())
    host = g.host.busiest.work_ns if g.host.busiest is not None else 0
    return g.roofline.busy_ns, gpu + host


def judge(g: GroupAnalysis) -> Binding | None:
    """The one verdict of ``g``: which view applies and what binds; None without a path or a roofline."""
    cp, r = g.critical_path, g.roofline
    if cp is None or r.engine is None or g.work_not_traced is not None or cp.loop_ns <= 0:
        return None
    loop = cp.loop_ns
    bar, total = _bars(g)
    x = (loop - bar) / (total - bar) if total > bar else float("inf")
    res = resource_of(g)
    on_path = sum(p.loop_ns for p in cp.parts if p.resource == res or (res == "host" and p.kind == "host")) / loop
    fill = bar / loop
    if fill >= ONE_RESOURCE or (x <= OVERLAP_MAX and on_path >= MOST):
        view, code = "tallest_bar", ("one_resource" if fill >= ONE_RESOURCE else "overlap")
    elif x >= TURNS_MIN:
        view, code = "critical_path", "turns"
    else:
        view, code = "both", "mixed"
    return Binding(view=view, code=code, overlap_index=x if x != float("inf") else None, bar_ns=bar, sum_ns=total,
                   loop_ns=loop, bar_share_of_path=on_path, message=sentence(g, view, code))  # fmt: skip


def shown_parts(cp: CriticalPath) -> list[PathPart]:
    return [p for p in cp.loop_parts() if cp.loop_share(p) >= LISTED_SHARE][:SHOWN]


def sentence(g: GroupAnalysis, view: str, code: str) -> str:
    """"critical path: host 57 % (thread 1684 feedA), kernel 31 %, d2h 12 %: host and GPU take turns every
    frame; a 2× faster kernel saves at most 16 %"."""
    cp = g.critical_path
    parts = shown_parts(cp)
    text = "critical path: " + ", ".join(part_label(p, cp) for p in parts)
    if g.gaps.setup_ns:
        text += " (set-up gaps left out)"
    kinds = {p.kind for p in cp.loop_parts() if cp.loop_share(p) >= 0.10}
    gpu = kinds - {"host", "idle", "launch"}
    if view == "tallest_bar":
        who = g.roofline.thread.label() if g.roofline.engine == "host" and g.roofline.thread else g.roofline.engine
        fill = U.pct(g.roofline.busy_ns / cp.loop_ns, 0)
        reading = (f"{who}, the tallest bar, fills {fill} of the loop: it sets the frame time" if code == "one_resource"
                   else f"the resources overlap, and {who}, the tallest bar ({fill} of the loop), sets the frame time")  # fmt: skip
    elif view == "critical_path":
        if "host" in kinds and gpu:
            reading = "host and GPU take turns every frame: the frame time is the sum of the parts"
        elif "idle" in kinds:
            reading = "the GPU's work takes turns, with idle gaps between dependent work: the frame time is the sum of the parts"
        else:
            reading = "the resources take turns: the frame time is the sum of the parts"
    else:
        reading = "the resources partly overlap: the frame time lies between the tallest bar and the sum of the parts"
    text += ": " + reading
    cut = next((p for p in cp.loop_parts() if p.kind not in ("idle", "launch")), None)
    if cut is not None and view != "tallest_bar":
        what = "host code" if cut.kind == "host" else cut.kind
        text += f"; a 2× faster {what} saves at most {U.pct(cp.loop_share(cut) / 2, 0)}"
    return text
