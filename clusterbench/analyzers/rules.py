"""The "why" notes as data: each is a rule with a code, a threshold and an advice text (pure).

A rule looks at one (process, device) group's figures and either stays silent or fires with a
message built from the trace's own numbers. Every rule checks what its text claims: a rule that
says "work ran on one stream" fires only when it did; the starvation and utilization rules count
only the gaps the pipeline's own loop makes (set-up gaps are reported as set-up). ``evaluate(group)``
returns the fired rules as :class:`Finding` records, in the order of :data:`RULES`; the notes
printed under "why:" are their texts. docs/analyze.md lists every rule with its threshold; a test
checks that it does. When the GPU's work is not in the trace, only that note (and the data
checks) is given: idle figures and advice would mislead.

The anchor is the expert-system rules of ``nsys analyze`` (GPU gaps, GPU utilization, synchronous
memcpy, pageable memcpy, synchronization APIs), cut down to what an export can show.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from clusterbench.analyzers.gaps import GAP_NS
from clusterbench.analyzers.records import GAP_CAUSES, Finding, GroupAnalysis, ThreadStats
from clusterbench.model import units as U

# Thresholds (judgement calls; each is printed in the docs table and in the finding).
NO_OVERLAP_SERIALIZATION = 1.05  # serialization below this: the engines practically take turns
TURNS_GAIN = 0.05  # taking turns matters when the other bars add at least this share of the tallest one
HOST_SYNC_FRACTION = 0.20  # host in synchronize calls for at least this share of the window
IDLE_FRACTION = 0.10  # no engine busy for at least this share of the window (set-up gaps left out)
GAP_FRACTION = 0.05  # the loop's idle gaps adding up to at least this share of the window
SETUP_FRACTION = 0.01  # set-up gaps taking at least this share of the window
SYNC_COPY_FRACTION = 0.01  # synchronous copy calls blocking the host this share of the window
PAGEABLE_BYTES_FRACTION = 0.01  # pageable copies carry at least this share of the copied bytes
DRAIN_SHARE = 0.5  # the idle stretches where the waits end hold at least this share of the idle time
HOST_WAIT_FRACTION = 0.10  # a binding thread that waits less than this share of its time is not held up by the GPU
BLOCKED_FRACTION = 0.01  # launches, or pageable copies, held by the GPU for at least this share of the window

GRAPH_WARNING = (
    "graph-level CUDA graph trace: the `graph` engine is the GPU time of whole graph executions "
    "(CUPTI_ACTIVITY_KIND_GRAPH_TRACE), which includes any copy and memset nodes of the graph and the "
    "gaps between its nodes; the kernel, h2d, d2h and memset bars leave out the work inside graphs. "
    "Per-engine figures need: nsys profile --cuda-graph-trace=node"
)



def cause_phrase(cause: str, api: str | None) -> str:
    """What the launching threads did in a gap, as it reads in a sentence."""
    call = api or "a CUDA call"
    return {
        "module_load": f"the host loaded GPU code ({call}; a compile before it, if any, is not traced)",
        "alloc": f"the host allocated or freed memory ({call})",
        "sync": f"the launching threads waited in {api or 'a synchronize'} with nothing queued",
        "host": "the launching threads ran host code" + (f" (longest CUDA call: {api})" if api else ""),
        "profiler": f"the profiler's own overhead ({call})",
        "unknown": "cause unknown (no CUDA API rows for the launching threads)",
    }[cause]


Check = Callable[["GroupAnalysis"], "tuple[str, float | None] | None"]


@dataclass(frozen=True, slots=True)
class Rule:
    code: str
    title: str
    anchor: str | None
    threshold: float | None
    threshold_text: str  # how the threshold reads in the docs table
    advice: str  # appended to the message when the rule fires ("" for a plain reading)
    check: Check  # (message, value) when the rule fires, else None

    def fire(self, g: GroupAnalysis) -> Finding | None:
        hit = self.check(g)
        if hit is None:
            return None
        message, value = hit
        text = f"{message} {self.advice}".strip() if self.advice else message
        return Finding(self.code, self.title, self.anchor, self.threshold, value, text)


# --------------------------------------------------------------------------- helpers


def _per_frame(g: GroupAnalysis, ns: int) -> str:
    if g.frames.count:
        return U.us_per_frame(U.us_per_frame_of(ns, g.frames.count), 2)
    return U.ms(ns)


def _bar(g: GroupAnalysis, name: str) -> str:
    return _per_frame(g, g.busy.engines[name].busy_ns)


def _active(g: GroupAnalysis) -> list[str]:
    return [n for n, st in g.busy.engines.items() if st.busy_ns > 0]


def _frac(ns: int, g: GroupAnalysis) -> float:
    return ns / g.window.length_ns if g.window.length_ns > 0 else 0.0


def _steady_idle(g: GroupAnalysis) -> float:
    t = g.throughput
    return t.steady_idle_ns / t.steady_ns if t.steady_ns > 0 else 0.0


def _sum_of_bars(g: GroupAnalysis) -> str:
    return _per_frame(g, sum(st.busy_ns for st in g.busy.engines.values()))


def gap_where(g: GroupAnalysis, i: int) -> str:
    """Gap i of ``g``: how long, where, and what the host did."""
    gp = g.gaps
    return (f"{U.ms(gp.lengths_ns[i])} at {U.ms(int(gp.starts_ns[i]) - g.window.start_ns)} from the "
            f"window start: {cause_phrase(gp.cause_of(i), gp.api[i])}")  # fmt: skip


def _tallest_engine(g: GroupAnalysis) -> str | None:
    best, top = None, 0
    for n, st in g.busy.engines.items():
        if st.busy_ns > top:
            best, top = n, st.busy_ns
    return best


# --------------------------------------------------------------------------- checks


def _no_activity(g: GroupAnalysis):
    return ("no GPU activity inside the window.", None) if g.roofline.engine is None else None


def _work_not_traced(g: GroupAnalysis):
    w = g.work_not_traced
    if w is None:
        return None
    calls = ", ".join(w.calls) or "synchronize calls"
    return (
        f"the GPU's work is not in the trace: for {U.ms(w.waited_ns)} ({U.pct(w.share, 0)} of the window) the launching "
        f"threads waited in {calls} while the trace shows no GPU activity. Likely: {w.why}. The idle figures, the "
        f"roofline and the advice would mislead, so they are left out. To see the work: {w.hint}.",
        w.share,
    )


def _graph_level(g: GroupAnalysis):
    st = g.busy.engines.get("graph")
    if st is None or st.count == 0:
        return None
    return GRAPH_WARNING + ".", float(st.busy_ns)


def _setup_gaps(g: GroupAnalysis):
    gp, t = g.gaps, g.throughput
    setup = gp.setup_ns
    if setup <= 0 or _frac(setup, g) < SETUP_FRACTION:
        return None
    n = int(gp.setup_mask().sum())
    i = gp.longest(setup=True)
    without = f"without them the GPU is idle {U.pct(_steady_idle(g))} of the window"
    if t.steady_efficiency is not None:
        without += f" and the pipeline runs at {U.pct(t.steady_efficiency, 0)} of its roofline"
    return (
        f"set-up inside the window: {n:,} set-up gap{'s' if n != 1 else ''} ({U.ms(setup)}, {U.pct(_frac(setup, g), 0)} of the "
        f"window); the longest is {gap_where(g, i)}. They are not the pipeline's loop: {without}.",
        _frac(setup, g),
    )


def _binds(g: GroupAnalysis):
    r = g.roofline
    if r.engine is None:
        return None
    if r.engine == "host":
        view = g.binding.view if g.binding is not None else "tallest_bar"
        who = r.thread.label() if r.thread else "a launching thread"
        if view == "critical_path":  # the critical_path note says what binds
            return None
        return (f"the host binds: {who} is the tallest bar at "
                f"{_per_frame(g, r.busy_ns)} ({U.pct(_frac(r.busy_ns, g), 0)} of the window).", _frac(r.busy_ns, g))  # fmt: skip
    duty = g.busy.engines[r.engine].duty or 0.0
    view = g.binding.view if g.binding is not None else "tallest_bar"
    if view == "critical_path":  # the critical_path note says what binds
        return None
    if view == "both":
        return (f"{r.engine} is the tallest bar at {_bar(g, r.engine)} ({U.pct(duty, 0)} of the window): with the resources "
                "partly overlapping it is a floor under the frame time, not the frame time (see critical_path).",
                duty)  # fmt: skip
    return f"{r.engine} binds: the tallest bar at {_bar(g, r.engine)} ({U.pct(duty, 0)} of the window).", duty


def _host_binds(g: GroupAnalysis):
    r = g.roofline
    if r.engine != "host" or g.host.busiest is None:
        return None
    t = g.host.busiest
    gpu = _tallest_engine(g)
    above = f"above the tallest GPU bar ({gpu} at {_bar(g, gpu)})" if gpu else "and the GPU has no busy time"
    calls = max(0, t.launch_ns + t.copy_ns + t.other_ns - t.blocked_ns)  # the calls' time the GPU held none of
    waited = _waited(t)
    held = _held_part(g, t)
    if waited < HOST_WAIT_FRACTION:
        then = (f"It waits for the GPU {U.pct(waited, 0)} of its time{held}: a faster GPU, kernel or link does not raise "
                "throughput.")  # fmt: skip
    else:
        then = (f"It also waits for the GPU {_per_frame(g, t.wait_ns + t.blocked_ns)} ({U.pct(waited, 0)} of its time{held}): as "
                "the work is ordered now, the GPU is behind it and sets the rate measured; this bar is the limit once the GPU "
                "keeps up.")  # fmt: skip
    blocked = f", blocked time {_per_frame(g, t.blocked_ns)}" if t.blocked_ns else ""
    return (
        f"{t.thread.label()} works {_per_frame(g, t.work_ns)} (its waits{blocked} and the set-up gaps left out), {above}: of "
        f"that, CUDA calls take {_per_frame(g, calls)} (launch {_per_frame(g, t.launch_ns)}, copy issue {_per_frame(g, t.copy_ns)}, "
        f"other {_per_frame(g, t.other_ns)}, less the time the GPU held them) and the host code between them "
        f"{_per_frame(g, max(0, t.work_ns - calls))}. " + then,
        t.work_ns / r.busy_ns if r.busy_ns else None,
    )


def _held_part(g: GroupAnalysis, t: ThreadStats) -> str:
    """How much of a thread's waiting was blocked calls (held launches, copies, frees), if any."""
    if not t.blocked_ns:
        return ""
    return f", of which {_per_frame(g, t.blocked_ns)} blocked in launches, copies or frees the GPU held"


def _waited(t: ThreadStats) -> float:
    """The share of a thread's time (set-up gaps left out) that the GPU held it: its explicit waits and its
    blocked calls."""
    total = t.busy_ns + t.wait_ns
    return (t.wait_ns + t.blocked_ns) / total if total > 0 else 0.0


def _kernel_hidden(g: GroupAnalysis):
    r = g.roofline
    k = g.busy.engines.get("kernel")
    if r.engine is None or r.engine in ("kernel", "graph", "host") or k is None or k.busy_ns == 0:
        return None
    if g.binding is not None and g.binding.view != "tallest_bar":  # taking turns, the kernel's time counts
        return None
    return (
        f"the kernel ({_bar(g, 'kernel')}) sits below the {r.engine} bar: a faster kernel does not raise "
        f"throughput until it is the tallest bar; shrink the {r.engine} traffic instead.",
        k.busy_ns / r.busy_ns,
    )


def _compute_binds(g: GroupAnalysis):
    r = g.roofline
    if r.engine == "kernel":
        return "the kernel is the tallest bar: kernel speed-ups pay off end to end.", None
    if r.engine == "graph":
        return (
            "the graph executions are the tallest bar: faster work inside the graphs (their kernels, fewer "
            "copy or memset nodes, shorter gaps between nodes) pays off end to end.",
            None,
        )
    return None


def _gpu_binds(g: GroupAnalysis) -> bool:
    return g.roofline.engine not in (None, "host")


def _serialized(g: GroupAnalysis) -> bool:
    """The engines take turns, and the sum of the GPU's bars (the frame time when they take turns) is
    at least TURNS_GAIN above the tallest bar: with a GPU engine binding, the other bars add at least
    that share of it (else taking turns costs little); with a launching thread binding, the GPU's turns
    take longer than the thread's bar, so they, not the host, set the pace."""
    b = g.busy
    if g.roofline.engine is None or len(_active(g)) < 2 or b.serialization is None or b.serialization >= NO_OVERLAP_SERIALIZATION:
        return False
    total = sum(st.busy_ns for st in b.engines.values())
    return total - g.roofline.busy_ns >= TURNS_GAIN * g.roofline.busy_ns


def _above_host(g: GroupAnalysis) -> str:
    r = g.roofline
    if r.engine != "host":
        return ""
    who = r.thread.label() if r.thread else "the busiest launching thread"
    return f", above the tallest bar ({who} at {_per_frame(g, r.busy_ns)})"


def _one_stream(g: GroupAnalysis):
    b = g.busy
    if not _serialized(g) or b.n_streams != 1:
        return None
    return (
        f"engines take turns (serialization {U.times(b.serialization)}, overlap {U.ms(b.overlap_ns)}): all GPU "
        "work ran on one stream, and one stream runs its work in order, so the frame time is at least the sum of the "
        f"bars ({_sum_of_bars(g)}{_above_host(g)}), not the tallest one.",
        b.serialization,
    )


def _streams_serialized(g: GroupAnalysis):
    b = g.busy
    if not _serialized(g) or b.n_streams < 2:
        return None
    per = ", ".join(f"{n} on {c}" for n, c in b.engine_streams.items() if c)
    return (
        f"engines take turns (serialization {U.times(b.serialization)}, overlap {U.ms(b.overlap_ns)}) although "
        f"GPU work ran on {b.n_streams} streams ({per}): something orders the streams, so the frame time is at least "
        f"the sum of the bars ({_sum_of_bars(g)}{_above_host(g)}).",
        b.serialization,
    )


def _overlap(g: GroupAnalysis):
    b = g.busy
    if not _gpu_binds(g) or len(_active(g)) < 2 or b.serialization is None or b.serialization < NO_OVERLAP_SERIALIZATION:
        return None
    return (
        f"engines overlap for {U.ms(b.overlap_ns)} (serialization {U.times(b.serialization)}): part of the "
        "shorter bars hides behind the others.",
        b.serialization,
    )


def _calls(g: GroupAnalysis) -> str:
    return ", ".join(g.host.host_sync_calls) or "synchronize calls"


def _sync_drains(g: GroupAnalysis):
    sync, idle, t = _frac(g.host.host_sync_ns, g), _steady_idle(g), g.throughput
    drained = g.host.drain_idle_ns / t.steady_ns if t.steady_ns > 0 else 0.0
    if g.roofline.engine is None or sync < HOST_SYNC_FRACTION or idle < IDLE_FRACTION or drained < DRAIN_SHARE * idle:
        return None
    e = g.busy.engines
    copies = any(st.busy_ns > 0 for n, st in e.items() if n in ("h2d", "d2h", "um_h2d", "um_d2h"))
    computes = any(e[n].busy_ns > 0 for n in ("kernel", "graph") if n in e)
    effect = (
        "so the next copy cannot start under the current kernel" if copies and computes
        else "so the GPU waits for the host's next launch"
    )
    return (
        f"the host waits in {_calls(g)} for {U.pct(sync, 0)} of the window and the GPU is idle {U.pct(idle, 0)} of it (set-up gaps "
        f"left out), {U.pct(drained, 0)} of it where the waits end: each wait drains the pipeline, {effect}.",
        sync,
    )


def _sync_ahead(g: GroupAnalysis):
    sync, idle = _frac(g.host.host_sync_ns, g), _steady_idle(g)
    if g.roofline.engine is None or sync < HOST_SYNC_FRACTION or idle >= IDLE_FRACTION:
        return None
    # A host that waits while the engines stay busy is only ahead of the GPU (for example one
    # synchronize at the end of an asynchronous pass): the wait costs nothing.
    return (
        f"the host waits in {_calls(g)} for {U.pct(sync, 0)} of the window, but the GPU stays busy (idle {U.pct(idle)}, set-up "
        "gaps left out): the host is ahead of the GPU, and the waits cost no throughput.",
        sync,
    )


def _critical_path(g: GroupAnalysis):
    b = g.binding
    if b is None:
        return None
    return b.message + ".", b.overlap_index


_CAUSE_WORDS = {
    "queue_full": "the launch queue was full",
    "gpu_behind": "the GPU was behind (each returned as earlier work ended)",
    "graph": "each returned only when its graph had run",
    "module_load": "a first launch loaded its kernel's module",
    "implicit_sync": "an implicit synchronize",
    "pageable": "a pageable copy",
}


def _blocked_launch(g: GroupAnalysis):
    groups = [b for b in g.host.blocked if b.name in _LAUNCH_NAMES(g) and b.blocked_ns > 0]
    ns = sum(b.blocked_ns for b in groups)
    frac = _frac(ns, g)
    if not groups or frac < BLOCKED_FRACTION:
        return None
    parts = []
    for b in groups:
        why = _CAUSE_WORDS[b.cause]
        if b.cause == "queue_full" and b.max_depth is not None:
            why += f" (up to {U.count(b.max_depth)} rows issued and not ended on the device)"
        parts.append(f"{U.count(b.calls)} {b.name} ({U.duration(b.blocked_ns)}: {why})")
    causes = dict.fromkeys(b.cause for b in sorted(groups, key=lambda b: -b.blocked_ns))
    advice = " ".join(_BLOCKED_ADVICE[c] for c in causes if _BLOCKED_ADVICE.get(c))
    return (
        f"launches were held by the GPU for {U.duration(ns)} ({U.pct(frac, 0)} of the window): " + "; ".join(parts) + ". "
        "That time is the GPU's, not host work, and the host bar leaves it out." + (f" {advice}" if advice else ""),
        frac,
    )


# What to do about launches held for each cause (pageable: the pageable_blocks note says it).
_BLOCKED_ADVICE = {
    "queue_full": "The host is ahead of the GPU: launch no further ahead than the GPU can run (fewer batches in flight "
                  "per launch queue), or issue fewer, larger launches (a CUDA graph per batch).",
    "gpu_behind": "The host is ahead of the GPU: each launch waited for earlier work; fewer, larger launches (a CUDA "
                  "graph per batch) cost the thread less.",
    "graph": "A graph launch that returns with its graph keeps the thread from queueing the next one: look for "
             "pageable copy nodes or host nodes in the graph.",
    "module_load": "A first launch that loads its module waits for the GPU: that is set-up, not the loop. Warm up "
                   "before the part you measure (launch every kernel once, or CUDA_MODULE_LOADING=EAGER).",
    "implicit_sync": "Keep calls that synchronize implicitly (cudaFree, cudaFreeHost, cudaProfilerStop) out of the loop.",
}


def _LAUNCH_NAMES(g: GroupAnalysis) -> set[str]:  # noqa: N802
    from clusterbench.io.nsys import schema as S

    return {b.name for b in g.host.blocked if S.api_category(b.name) in ("launch", "graph_launch")}


def _pageable_blocks(g: GroupAnalysis):
    groups = [b for b in g.host.blocked if b.cause == "pageable"]
    ns = sum(b.blocked_ns for b in groups)
    frac = _frac(ns, g)
    if not groups or frac < BLOCKED_FRACTION:
        return None
    calls = sum(b.calls for b in groups)
    nbytes = sum(b.bytes for b in groups)
    names = ", ".join(sorted({b.name for b in groups}))
    return (
        f"{U.count(calls)} cop{'ies' if calls != 1 else 'y'} from pageable host memory ({names}, {U.size(nbytes)}) held "
        f"the launching thread for {U.duration(ns)} ({U.pct(frac, 0)} of the window): a copy of pageable memory returns only "
        "once the driver has staged it, so the thread cannot queue the next work meanwhile.",
        frac,
    )


def _sync_copies(g: GroupAnalysis):
    h = g.host
    frac = _frac(h.sync_copy_ns, g)
    if h.sync_copy_calls == 0 or frac < SYNC_COPY_FRACTION:
        return None
    return (
        f"{h.sync_copy_calls:,} synchronous copy call{'s' if h.sync_copy_calls != 1 else ''} ({', '.join(h.sync_copy_names)}) block the host for "
        f"{U.ms(h.sync_copy_ns)} ({U.pct(frac, 0)} of the window): while one runs, the host queues no other work.",
        frac,
    )


def _pageable(g: GroupAnalysis):
    b = g.busy
    copied = sum(st.bytes or 0 for n, st in b.engines.items() if n != "memset")
    if b.pageable_count == 0 or copied <= 0 or b.pageable_bytes < PAGEABLE_BYTES_FRACTION * copied:
        return None
    return (
        f"{b.pageable_count:,} cop{'ies' if b.pageable_count != 1 else 'y'} ({b.pageable_bytes:,} bytes) move pageable host memory: the driver "
        f"stages them through its own pinned buffer ({U.pct(b.pageable_bytes / copied, 0)} of the bytes copied), so "
        "they run below the link rate and cudaMemcpyAsync on them blocks the host like a synchronous copy.",
        b.pageable_bytes / copied,
    )


def _starvation(g: GroupAnalysis):
    gp, t = g.gaps, g.throughput
    loop = ~gp.setup_mask()
    n = int(loop.sum())
    frac = gp.loop_ns / t.steady_ns if t.steady_ns > 0 else 0.0
    if g.roofline.engine is None or n == 0 or frac < GAP_FRACTION:
        return None
    by = {}
    for k in range(len(GAP_CAUSES)):
        m = loop & (gp.cause == k)
        if m.any():
            by[GAP_CAUSES[k]] = int(gp.lengths_ns[m].sum())
    top = max(by, key=by.get)
    mostly = {
        "host": "the launching threads were running host code, so the next batch was not queued in time: move host work "
        "(I/O, preparation) off the threads that launch",
        "sync": "the launching threads waited in a synchronize while nothing was queued: queue the next batch before "
        "waiting, and wait on per-buffer events",
        "unknown": "the trace has no CUDA API rows to say what the host did",
    }[top]
    i = gp.longest(setup=False)
    without = " without set-up gaps" if gp.setup_ns else ""
    return (
        f"the GPU starves in the loop: {n:,} idle gap{'s' if n != 1 else ''} of at least {U.ms(GAP_NS, 1)} "
        f"{'add' if n != 1 else 'adds'} up to {U.pct(frac, 0)} of the window{without} (the longest: {gap_where(g, i)}); in most "
        f"of that time {mostly}.",
        frac,
    )


def _low_utilization(g: GroupAnalysis):
    idle = _steady_idle(g)
    if g.roofline.engine is None or idle < IDLE_FRACTION:
        return None
    whole = _frac(g.busy.idle_ns, g)
    extra = f" ({U.pct(whole, 0)} with the set-up gaps)" if g.gaps.setup_ns else ""
    return f"the GPU is idle {U.pct(idle, 0)} of the window without set-up gaps{extra} (no engine busy).", idle


def _implausible(g: GroupAnalysis):
    bad = [st for st in g.busy.engines.values() if st.implausible_count]
    if not bad:
        return None
    parts = "; ".join(
        f"{st.engine}: {st.implausible_count:,} records, {st.implausible_bytes:,} bytes, up to "
        f"{U.gbps(st.implausible_max_gbps)} against a ceiling of {U.gbps(st.implausible_limit_gbps)}"
        for st in bad
    )
    return (
        f"records whose bytes over time exceed any physical rate ({parts}) were left out of busy time, bytes, "
        "GB/s and the roofline.",
        float(sum(st.implausible_count for st in bad)),
    )


def _efficiency(g: GroupAnalysis):
    r, t = g.roofline, g.throughput
    if t.efficiency is None or t.measured_us_per_frame is None or r.us_per_frame is None:
        return None
    text = (f"measured {U.us_per_frame(t.measured_us_per_frame, 2)} over the window against a roofline of "
            f"{U.us_per_frame(r.us_per_frame, 2)}: {U.pct(t.efficiency, 0)} of what the tallest bar allows")  # fmt: skip
    if g.gaps.setup_ns and t.steady_efficiency is not None and t.steady_us_per_frame is not None:
        text += f"; without the set-up gaps {U.us_per_frame(t.steady_us_per_frame, 2)}, {U.pct(t.steady_efficiency, 0)}"
    return text + ".", t.efficiency


RULES: tuple[Rule, ...] = (
    Rule("no_activity", "no GPU activity in the window", None, None, "no record inside the window",
         "Check --window, or leave it out to use the probe's pass range or the activity span.", _no_activity),
    Rule("work_not_traced", "the GPU's work is not in the trace", None, 0.10,
         "the launching threads wait in a synchronize through idle gaps >= 1 ms adding up to >= 10 % of the window",
         "", _work_not_traced),
    Rule("graph_level", "graph-level CUDA graph trace", None, None, "any graph-trace record inside the window",
         "", _graph_level),
    Rule("setup_gaps", "set-up inside the window", None, SETUP_FRACTION,
         "set-up gaps (module_load, alloc, profiler, hand-overs between threads) >= 1 % of the window",
         "Warm up before the part you measure (compile and load the kernels, allocate the buffers), or pick a window "
         "without them (--window).", _setup_gaps),
    Rule("binds", "the binding engine", None, None,
         "the tallest bar applies (critical_path: it fills >= 90 % of the loop, or the resources overlap or partly "
         "overlap; the tallest bar, engines and launching threads' work)", "", _binds),
    Rule("critical_path", "the critical path", None, None,
         "a critical path was walked (CUDA API rows with correlation ids): which view binds (the tallest bar when it fills "
         ">= 90 % of the loop, or the loop lies within a third of the way from it to the sum of the bars and its resource "
         "holds >= 50 % of the path; the path when the loop lies two thirds of the way or more; both otherwise)",
         "", _critical_path),
    Rule("host_binds", "a launching thread binds", None, HOST_WAIT_FRACTION,
         "a launching thread's work is the tallest bar (it says a faster GPU does not help only when the thread waits "
         "for the GPU, in waits and blocked calls, < 10 % of its time)",
         "Issue less per frame (several frames per launch and copy, or a CUDA graph per batch), move host work off the "
         "launching threads, or feed the GPU from more threads.", _host_binds),
    Rule("kernel_hidden", "kernel below the tallest bar", None, None,
         "kernel busy > 0, a copy engine binds, and the tallest bar applies (critical_path)", "", _kernel_hidden),
    Rule("compute_binds", "kernel or graph is the tallest bar", None, None, "kernel or graph binds", "",
         _compute_binds),
    Rule("serialized_one_stream", "engines take turns on one stream", None, NO_OVERLAP_SERIALIZATION,
         "serialization < 1.05 with 2+ engines busy, the sum of the GPU bars >= 1.05 x the tallest bar (an engine's or a "
         "launching thread's), all work on 1 stream (a stream counts with >= 1 % of the GPU time)",
         "Spread the batches over several streams, with cudaMemcpyAsync into pinned host memory, so one batch's "
         "copies run under another batch's kernel.", _one_stream),
    Rule("serialized_streams", "engines take turns across streams", None, NO_OVERLAP_SERIALIZATION,
         "serialization < 1.05 with 2+ engines busy, the sum of the GPU bars >= 1.05 x the tallest bar (an engine's or a "
         "launching thread's), work on 2+ streams",
         "Look for a synchronize per batch, cudaStreamWaitEvent chains, pageable host buffers, or work on the "
         "legacy default stream, which waits for every other stream.", _streams_serialized),
    Rule("overlap", "engines overlap", None, NO_OVERLAP_SERIALIZATION,
         "serialization >= 1.05 with 2+ engines busy and a GPU engine binding",
         "", _overlap),
    Rule("sync_drains", "host sync drains the GPU", "cuda_api_sync", HOST_SYNC_FRACTION,
         "host sync >= 20 % of the window, idle >= 10 % of it without set-up gaps, and at least half of that idle time "
         "in the idle stretches where the waits end",
         "Wait on per-buffer events instead, with more batches in flight.", _sync_drains),
    Rule("sync_ahead", "host sync while the GPU is busy", "cuda_api_sync", HOST_SYNC_FRACTION,
         "host sync >= 20 % of the window and idle < 10 % of it without set-up gaps", "", _sync_ahead),
    Rule("blocked_launch", "launches held by the GPU", None, BLOCKED_FRACTION,
         "kernel and graph launches held by the GPU (a full queue, the GPU behind, a graph launch that returns with its "
         "graph, a first launch that loads its module) for >= 1 % of the window",
         "", _blocked_launch),
    Rule("pageable_blocks", "pageable copies hold the thread", "cuda_memcpy_async", BLOCKED_FRACTION,
         "copies from pageable host memory held the launching threads >= 1 % of the window",
         "Copy from pinned host memory (cudaHostAlloc, cudaHostRegister, cupy.cuda.alloc_pinned_memory).", _pageable_blocks),
    Rule("sync_memcpy", "synchronous copies", "cuda_memcpy_sync", SYNC_COPY_FRACTION,
         "synchronous copy calls (cudaMemcpy, cuMemcpy*) >= 1 % of the window",
         "Use cudaMemcpyAsync on a created stream into pinned memory, and wait on an event only where the result "
         "is needed.", _sync_copies),
    Rule("pageable_memcpy", "copies of pageable memory", "cuda_memcpy_async", PAGEABLE_BYTES_FRACTION,
         "copies with pageable host memory (srcKind/dstKind 0) carry >= 1 % of the bytes copied in the window",
         "Allocate the host buffers pinned (cudaHostAlloc, cupy.cuda.alloc_pinned_memory).", _pageable),
    Rule("gpu_starvation", "GPU starvation gaps in the loop", "gpu_gaps", GAP_FRACTION,
         "the loop's idle gaps (>= 0.1 ms; causes sync, host, unknown; no hand-over) add up to >= 5 % of the window "
         "without set-up gaps",
         "Keep more batches in flight (streams, buffers).", _starvation),
    Rule("low_utilization", "low GPU utilization", "gpu_time_util", IDLE_FRACTION,
         "idle >= 10 % of the window without set-up gaps",
         "Feed it faster: look for launch gaps, host-side work and synchronous calls between batches.",
         _low_utilization),
    Rule("implausible_rate", "physically impossible copy rates", None, None,
         "bytes / duration above the engine's ceiling (see Implausible rates)", "", _implausible),
    Rule("efficiency", "measured against the roofline", None, None, "frames known", "", _efficiency),
)  # fmt: skip

_BY_CODE = {r.code: r for r in RULES}
_WHEN_NOT_TRACED = ("work_not_traced", "graph_level", "implausible_rate")


def evaluate(g: GroupAnalysis) -> tuple[Finding, ...]:
    """The rules that fire on ``g``, in RULES order."""
    if g.roofline.engine is None:
        found = _BY_CODE["no_activity"].fire(g)
        return (found,) if found else ()
    codes = _WHEN_NOT_TRACED if g.work_not_traced is not None else tuple(r.code for r in RULES[1:])
    out = []
    for code in codes:
        f = _BY_CODE[code].fire(g)
        if f is not None:
            out.append(f)
    return tuple(out)
