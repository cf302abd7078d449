"""The "why" notes as data: each is a rule with a code, a threshold and an advice text (pure).

A rule looks at one (process, device) group's figures and either stays silent or fires with a
message built from the trace's own numbers. Every rule checks what its text claims: a rule that
says "work ran on one stream" fires only when it did. ``evaluate(group)`` returns the fired rules
as :class:`Finding` records, in the order of :data:`RULES`; the notes printed under "why:" are
their texts. docs/analyze.md lists every rule with its threshold; a test checks that it does.

The anchor is the expert-system rules of ``nsys analyze`` (GPU gaps, GPU utilization, synchronous
memcpy, pageable memcpy, synchronization APIs), cut down to what an export's kernel, memcpy,
memset, graph and runtime tables can show.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from clusterbench.analyzers.records import Finding, GroupAnalysis

# Thresholds (judgement calls; each is printed in the docs table and in the finding).
NO_OVERLAP_SERIALIZATION = 1.05  # serialization below this: the engines practically take turns
HOST_SYNC_FRACTION = 0.20  # host in synchronize calls for at least this share of the window
IDLE_FRACTION = 0.10  # no engine busy for at least this share of the window
GAP_NS = 100_000  # an idle gap this long (0.1 ms) is a starvation gap: ~10 frames at 10 µs/frame
GAP_FRACTION = 0.05  # starvation gaps adding up to at least this share of the window
SYNC_COPY_FRACTION = 0.01  # synchronous copy calls blocking the host this share of the window
PAGEABLE_BYTES_FRACTION = 0.01  # pageable copies carry at least this share of the copied bytes
STREAM_SHARE = 0.01  # a stream counts as carrying work when it has this share of the GPU time

GRAPH_WARNING = (
    "graph-level CUDA graph trace: the `graph` engine is the GPU time of whole graph executions "
    "(CUPTI_ACTIVITY_KIND_GRAPH_TRACE), which includes any copy and memset nodes of the graph and the "
    "gaps between its nodes; the kernel, h2d, d2h and memset bars leave out the work inside graphs. "
    "Per-engine figures need: nsys profile --cuda-graph-trace=node"
)


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


def _bar(g: GroupAnalysis, name: str) -> str:
    st = g.engines[name]
    if g.frames is not None and st.us_per_frame is not None:
        return f"{st.us_per_frame:.2f} µs/frame"
    return f"{st.busy_ns / 1e6:.3f} ms"


def _active(g: GroupAnalysis) -> list[str]:
    return [n for n, st in g.engines.items() if st.busy_ns > 0]


def _frac(ns: int, g: GroupAnalysis) -> float:
    return ns / g.window_ns if g.window_ns > 0 else 0.0


def _sum_of_bars(g: GroupAnalysis) -> str:
    total = sum(st.busy_ns for st in g.engines.values())
    if g.frames:
        return f"{total / 1000 / g.frames:.2f} µs/frame"
    return f"{total / 1e6:.3f} ms"


# --------------------------------------------------------------------------- checks


def _no_activity(g: GroupAnalysis):
    return ("no GPU activity inside the window.", None) if g.roofline.engine is None else None


def _graph_level(g: GroupAnalysis):
    st = g.engines.get("graph")
    if st is None or st.count == 0:
        return None
    return GRAPH_WARNING + ".", float(st.busy_ns)


def _binds(g: GroupAnalysis):
    r = g.roofline
    if r.engine is None:
        return None
    duty = g.engines[r.engine].duty or 0.0
    return f"{r.engine} binds: the tallest bar at {_bar(g, r.engine)} ({duty:.0%} of the window).", duty


def _kernel_hidden(g: GroupAnalysis):
    r = g.roofline
    k = g.engines.get("kernel")
    if r.engine is None or r.engine in ("kernel", "graph") or k is None or k.busy_ns == 0:
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


def _serialized(g: GroupAnalysis) -> bool:
    return len(_active(g)) >= 2 and g.serialization is not None and g.serialization < NO_OVERLAP_SERIALIZATION


def _one_stream(g: GroupAnalysis):
    if not _serialized(g) or g.n_streams != 1:
        return None
    return (
        f"engines take turns (serialization {g.serialization:.2f}x, overlap {g.overlap_ns / 1e6:.3f} ms): all GPU "
        "work ran on one stream, and one stream runs its work in order, so the frame time is the sum of the bars "
        f"({_sum_of_bars(g)}), not the tallest one.",
        g.serialization,
    )


def _streams_serialized(g: GroupAnalysis):
    if not _serialized(g) or g.n_streams < 2:
        return None
    per = ", ".join(f"{n} on {c}" for n, c in g.engine_streams.items() if c)
    return (
        f"engines take turns (serialization {g.serialization:.2f}x, overlap {g.overlap_ns / 1e6:.3f} ms) although "
        f"GPU work ran on {g.n_streams} streams ({per}): something orders the streams, so the frame time is the sum "
        f"of the bars ({_sum_of_bars(g)}).",
        g.serialization,
    )


def _overlap(g: GroupAnalysis):
    if len(_active(g)) < 2 or g.serialization is None or g.serialization < NO_OVERLAP_SERIALIZATION:
        return None
    return (
        f"engines overlap for {g.overlap_ns / 1e6:.3f} ms (serialization {g.serialization:.2f}x): part of the "
        "shorter bars hides behind the others.",
        g.serialization,
    )


def _calls(g: GroupAnalysis) -> str:
    return ", ".join(g.host_sync_calls) or "synchronize calls"


def _sync_drains(g: GroupAnalysis):
    sync, idle = _frac(g.host_sync_ns, g), _frac(g.idle_ns, g)
    if g.roofline.engine is None or sync < HOST_SYNC_FRACTION or idle < IDLE_FRACTION:
        return None
    copies = any(st.busy_ns > 0 for n, st in g.engines.items() if n in ("h2d", "d2h", "um_h2d", "um_d2h"))
    computes = any(g.engines[n].busy_ns > 0 for n in ("kernel", "graph") if n in g.engines)
    effect = (
        "so the next copy cannot start under the current kernel" if copies and computes
        else "so the GPU waits for the host's next launch"
    )
    return (
        f"the host waits in {_calls(g)} for {sync:.0%} of the window and the GPU is idle {idle:.0%} of it: each "
        f"wait drains the pipeline, {effect}.",
        sync,
    )


def _sync_ahead(g: GroupAnalysis):
    sync, idle = _frac(g.host_sync_ns, g), _frac(g.idle_ns, g)
    if g.roofline.engine is None or sync < HOST_SYNC_FRACTION or idle >= IDLE_FRACTION:
        return None
    # A host that waits while the engines stay busy is only ahead of the GPU (for example one
    # synchronize at the end of an asynchronous pass): the wait costs nothing.
    return (
        f"the host waits in {_calls(g)} for {sync:.0%} of the window, but the GPU stays busy (idle {idle:.1%}): "
        "the host is ahead of the GPU, and the waits cost no throughput.",
        sync,
    )


def _sync_copies(g: GroupAnalysis):
    frac = _frac(g.sync_copy_ns, g)
    if g.sync_copy_calls == 0 or frac < SYNC_COPY_FRACTION:
        return None
    return (
        f"{g.sync_copy_calls:,} synchronous copy call{'s' if g.sync_copy_calls != 1 else ''} ({', '.join(g.sync_copy_names)}) block the host for "
        f"{g.sync_copy_ns / 1e6:.3f} ms ({frac:.0%} of the window): while one runs, the host queues no other work.",
        frac,
    )


def _pageable(g: GroupAnalysis):
    copied = sum(st.bytes or 0 for n, st in g.engines.items() if n != "memset")
    if g.pageable_count == 0 or copied <= 0 or g.pageable_bytes < PAGEABLE_BYTES_FRACTION * copied:
        return None
    return (
        f"{g.pageable_count:,} cop{'ies' if g.pageable_count != 1 else 'y'} ({g.pageable_bytes / 1e6:,.1f} MB) move pageable host memory: the driver "
        f"stages them through its own pinned buffer ({g.pageable_bytes / copied:.0%} of the bytes copied), so "
        "they run below the link rate and cudaMemcpyAsync on them blocks the host like a synchronous copy.",
        g.pageable_bytes / copied,
    )


def _starvation(g: GroupAnalysis):
    frac = _frac(g.idle_gap_ns, g)
    if g.roofline.engine is None or g.idle_gap_count == 0 or frac < GAP_FRACTION:
        return None
    return (
        f"the GPU starves: {g.idle_gap_count:,} idle gap{'s' if g.idle_gap_count != 1 else ''} of at least {GAP_NS / 1e6:.1f} ms (longest "
        f"{g.longest_idle_ns / 1e6:.3f} ms) {'add' if g.idle_gap_count != 1 else 'adds'} up to {frac:.0%} of the window.",
        frac,
    )


def _low_utilization(g: GroupAnalysis):
    idle = _frac(g.idle_ns, g)
    if g.roofline.engine is None or idle < IDLE_FRACTION:
        return None
    return f"the GPU is idle {idle:.0%} of the window (no engine busy).", idle


def _implausible(g: GroupAnalysis):
    bad = [st for st in g.engines.values() if st.implausible_count]
    if not bad:
        return None
    parts = "; ".join(
        f"{st.engine}: {st.implausible_count:,} records, {st.implausible_bytes:,} bytes, up to "
        f"{st.implausible_max_gbps:,.0f} GB/s against a ceiling of {st.implausible_limit_gbps:,.0f} GB/s"
        for st in bad
    )
    return (
        f"records whose bytes over time exceed any physical rate ({parts}) were left out of busy time, bytes, "
        "GB/s and the roofline.",
        float(sum(st.implausible_count for st in bad)),
    )


def _efficiency(g: GroupAnalysis):
    r = g.roofline
    if g.efficiency is None or g.measured_us_per_frame is None or r.us_per_frame is None:
        return None
    return (
        f"measured {g.measured_us_per_frame:.2f} µs/frame over the window against a roofline of "
        f"{r.us_per_frame:.2f} µs/frame: {g.efficiency:.0%} of what the tallest bar allows.",
        g.efficiency,
    )


RULES: tuple[Rule, ...] = (
    Rule("no_activity", "no GPU activity in the window", None, None, "no record inside the window",
         "Check --range, or leave it out to use the probe's pass range or the activity span.", _no_activity),
    Rule("graph_level", "graph-level CUDA graph trace", None, None, "any graph-trace record inside the window",
         "", _graph_level),
    Rule("binds", "the binding engine", None, None, "always (the tallest bar)", "", _binds),
    Rule("kernel_hidden", "kernel below the tallest bar", None, None, "kernel busy > 0 and a copy engine binds",
         "", _kernel_hidden),
    Rule("compute_binds", "kernel or graph is the tallest bar", None, None, "kernel or graph binds", "",
         _compute_binds),
    Rule("serialized_one_stream", "engines take turns on one stream", None, NO_OVERLAP_SERIALIZATION,
         "serialization < 1.05 with 2+ engines busy, all work on 1 stream (a stream counts with >= 1 % of the GPU time)",
         "Spread the batches over several streams, with cudaMemcpyAsync into pinned host memory, so one batch's "
         "copies run under another batch's kernel.", _one_stream),
    Rule("serialized_streams", "engines take turns across streams", None, NO_OVERLAP_SERIALIZATION,
         "serialization < 1.05 with 2+ engines busy, work on 2+ streams",
         "Look for a synchronize per batch, cudaStreamWaitEvent chains, pageable host buffers, or work on the "
         "legacy default stream, which waits for every other stream.", _streams_serialized),
    Rule("overlap", "engines overlap", None, NO_OVERLAP_SERIALIZATION, "serialization >= 1.05 with 2+ engines busy",
         "", _overlap),
    Rule("sync_drains", "host sync drains the GPU", "cuda_api_sync", HOST_SYNC_FRACTION,
         "host sync >= 20 % and idle >= 10 % of the window",
         "Wait on per-buffer events instead, with more batches in flight.", _sync_drains),
    Rule("sync_ahead", "host sync while the GPU is busy", "cuda_api_sync", HOST_SYNC_FRACTION,
         "host sync >= 20 % and idle < 10 % of the window", "", _sync_ahead),
    Rule("sync_memcpy", "synchronous copies", "cuda_memcpy_sync", SYNC_COPY_FRACTION,
         "synchronous copy calls (cudaMemcpy, cuMemcpy*) >= 1 % of the window",
         "Use cudaMemcpyAsync on a created stream into pinned memory, and wait on an event only where the result "
         "is needed.", _sync_copies),
    Rule("pageable_memcpy", "copies of pageable memory", "cuda_memcpy_async", PAGEABLE_BYTES_FRACTION,
         "copies with pageable host memory (srcKind/dstKind 0) carry >= 1 % of the bytes copied in the window",
         "Allocate the host buffers pinned (cudaHostAlloc, cupy.cuda.alloc_pinned_memory).", _pageable),
    Rule("gpu_starvation", "GPU starvation gaps", "gpu_gaps", GAP_FRACTION,
         "idle gaps >= 0.1 ms adding up to >= 5 % of the window",
         "The next batch was not queued in time: keep more batches in flight (streams, buffers) and move host work "
         "(I/O, preparation) off the thread that launches.", _starvation),
    Rule("low_utilization", "low GPU utilization", "gpu_time_util", IDLE_FRACTION, "idle >= 10 % of the window",
         "Feed it faster: look for launch gaps, host-side work and synchronous calls between batches.",
         _low_utilization),
    Rule("implausible_rate", "physically impossible copy rates", None, None,
         "bytes / duration above the engine's ceiling (see Implausible rates)", "", _implausible),
    Rule("efficiency", "measured against the roofline", None, None, "frames known", "", _efficiency),
)  # fmt: skip

RULE_CODES = tuple(r.code for r in RULES)


def evaluate(g: GroupAnalysis) -> tuple[Finding, ...]:
    """The rules that fire on ``g``, in RULES order."""
    if g.roofline.engine is None:
        found = RULES[0].fire(g)
        return (found,) if found else ()
    out = []
    for rule in RULES[1:]:
        f = rule.fire(g)
        if f is not None:
            out.append(f)
    return tuple(out)
