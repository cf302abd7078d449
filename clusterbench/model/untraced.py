"""The frame without the profiler: what the injection library and the latency program measured, the delay
test's slopes, the untraced split and the causes of ``idle`` (records, pure; docs/probe.md, "The untraced
frame").

- :class:`InjectReport`: one run of a program with clusterbench's injection library (CUPTI callbacks, no
  activity records; ``clusterbench/run/native/cb_inject.cpp``): per thread and per API function its calls,
  total and largest time; the frames it marked, with the thread's time in calls, waits and injected
  delays at each; and which delays it applied.
- :class:`HostFrame`: the untraced frame one such run gives: its period and each marking thread's own
  time per frame (host code and calls, waits and delays left out).
- :class:`LatencyRun` and :class:`UntracedCosts`: the unit's latency between dependent work on one stream,
  per op, the round trip at a synchronize, without and with the profiler
  (``clusterbench/run/native/cb_latency.cu``), the synchronize's schedule flag and the CPU governor.
- :class:`DelayRun`, :class:`SlopeFit`, :class:`DelayTest`: the delay test (causal profiling): k µs more
  per frame on one resource at a time, how far the frame moved, per process.
- :class:`PathStructure`, :class:`SplitPart`, :class:`UntracedSplit`, :class:`IdleCauses`: the traced
  critical path's parts per frame, and the same parts without the profiler.

Every ``*_us`` is µs per frame unless its name says per call or per op; ``*_ns`` nanoseconds. ``None``
means not measured. The JSON of the C++ programs is checked here (ValueError naming what is wrong).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from clusterbench.model.stats import half_range, median

INJECT_SCHEMA = "clusterbench.inject-report"
# cb_inject.cpp's report. History: 1: first version.
INJECT_VERSION = 1
LATENCY_SCHEMA = "clusterbench.latency-report"
# cb_latency.cu's report. History: 1: first version; 2: idle_sync (a synchronize with nothing to wait for).
LATENCY_VERSION = 2
LATENCY_VERSIONS_READ = (1, 2)
UNTRACED_SCHEMA = "clusterbench.untraced-record"
# The per-config record probe --what-binds writes (<label>.untraced.json, and env.json's
# configs.<label>.analysis.untraced). History: 1: first version. Keys added since, each read as absent
# (None, or 0 for the held idle stretches) from a record without it, so that version-1 readers of either
# age read both: the path's held_* keys; threads[].syncs and sync_us; the latency runs' idle_sync_ns.
UNTRACED_VERSION = 1
COSTS_SCHEMA = "clusterbench.untraced-costs"
# UntracedCosts.to_json (env.json's unit block, key "untraced"). History: 1: first version (idle_sync_ns in
# its latency runs since, read as absent from older records).
COSTS_VERSION = 1

# cuCtxGetFlags' schedule bits (CU_CTX_SCHED_MASK): how a synchronize waits for the GPU.
SCHED_NAMES = {0: "auto", 1: "spin", 2: "yield", 4: "blocking"}
RESOURCES = ("host", "gpu", "link")  # what the delay test lengthens, one at a time
VERDICTS = ("binds", "shared", "slack", "not tested")


def sched_name(flags: int | None) -> str | None:
    """The schedule flag of a context's flags (cuCtxGetFlags), or None when unknown."""
    if flags is None:
        return None
    return SCHED_NAMES.get(int(flags) & 0x07, f"flags {int(flags) & 0x07}")


def _int(doc: Mapping[str, Any], key: str, where: str, *, none: bool = False, low: int | None = 0) -> int | None:
    v = doc.get(key)
    if v is None and none:
        return None
    if type(v) is not int or (low is not None and v < low):
        raise ValueError(f"{where}.{key} must be an integer{'' if low is None else f' >= {low}'}, got {v!r:.40}")
    return v


def _num(doc: Mapping[str, Any], key: str, where: str, *, none: bool = False) -> float | None:
    v = doc.get(key)
    if v is None and none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{where}.{key} must be a number, got {v!r:.40}")
    return float(v)


def _str(doc: Mapping[str, Any], key: str, where: str, *, none: bool = False) -> str | None:
    v = doc.get(key)
    if v is None and none:
        return None
    if not isinstance(v, str):
        raise ValueError(f"{where}.{key} must be text, got {v!r:.40}")
    return v


def _map(doc: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise ValueError(f"{where} must be an object, got {type(doc).__name__}")
    return doc


def _list(doc: Mapping[str, Any], key: str, where: str) -> list[Any]:
    v = doc.get(key)
    if not isinstance(v, list):
        raise ValueError(f"{where}.{key} must be a list, got {v!r:.40}")
    return v


def _ints(values: list[Any], where: str) -> tuple[int, ...]:
    if not all(type(x) is int for x in values):
        raise ValueError(f"{where} must hold integers")
    return tuple(values)


# --------------------------------------------------------------------------- the injection library's report


@dataclass(frozen=True, slots=True)
class InjectMark:
    """A frame mark: when (CLOCK_MONOTONIC ns), and the thread's time in calls, waits and injected delays
    so far (ns)."""

    t_ns: int
    call_ns: int
    wait_ns: int
    delay_ns: int

    @classmethod
    def from_json(cls, doc: Any, where: str) -> "InjectMark":
        d = _map(doc, where)
        return cls(*(_int(d, k, where, low=None) for k in ("t_ns", "call_ns", "wait_ns", "delay_ns")))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class ApiTime:
    """One API function on one thread: calls, their total and largest time (ns), its category (launch,
    graph_launch, copy, wait, other) and domain (runtime, driver)."""

    api: str
    domain: str
    category: str
    n: int
    total_ns: int
    max_ns: int

    @property
    def mean_us(self) -> float:
        return self.total_ns / self.n / 1e3 if self.n else 0.0

    @classmethod
    def from_json(cls, doc: Any, where: str) -> "ApiTime":
        d = _map(doc, where)
        domain = _str(d, "domain", where)
        if domain not in ("runtime", "driver"):
            raise ValueError(f"{where}.domain must be runtime or driver, got {domain!r}")
        return cls(_str(d, "api", where), domain, _str(d, "category", where), _int(d, "n", where, low=1),  # type: ignore[arg-type]
                   _int(d, "total_ns", where), _int(d, "max_ns", where))  # type: ignore[arg-type]

    def to_json(self) -> dict[str, object]:
        return {"api": self.api, "domain": self.domain, "category": self.category, "n": self.n,
                "total_ns": self.total_ns, "max_ns": self.max_ns}


@dataclass(frozen=True, slots=True)
class InjectThread:
    """One thread of an injected run: its calls (outermost only) and their time, its time waiting, its
    injected delays, the time from each wait's return to its next issuing call (``after_wait_ns`` over
    ``after_wait_n``), its marks (``marks_total``; the first ``len(marks)`` kept one by one; ``warm_mark``
    the one the loop's per-API counts start at, ``last_mark`` the last), and its API functions over the
    whole run (``apis``) and from the warm mark on (``loop_apis``)."""

    tid: int
    name: str
    calls: int
    call_ns: int
    wait_ns: int
    delay_ns: int
    after_wait_ns: int
    after_wait_n: int
    marks_total: int
    warm_mark: InjectMark | None
    last_mark: InjectMark | None
    marks: tuple[InjectMark, ...]
    apis: tuple[ApiTime, ...]
    loop_apis: tuple[ApiTime, ...]

    @classmethod
    def from_json(cls, doc: Any, where: str) -> "InjectThread":
        d = _map(doc, where)
        cols = _map(d.get("marks"), f"{where}.marks")
        arrays = [_ints(_list(cols, k, f"{where}.marks"), f"{where}.marks.{k}")
                  for k in ("t_ns", "call_ns", "wait_ns", "delay_ns")]
        if len({len(a) for a in arrays}) != 1:
            raise ValueError(f"{where}.marks: its four columns differ in length")
        marks = tuple(InjectMark(*row) for row in zip(*arrays))
        total = _int(d, "marks_total", where)
        if len(marks) > total:  # type: ignore[operator]
            raise ValueError(f"{where}: {len(marks)} marks kept but marks_total is {total}")
        warm = None if d.get("warm_mark") is None else InjectMark.from_json(d["warm_mark"], f"{where}.warm_mark")
        last = None if d.get("last_mark") is None else InjectMark.from_json(d["last_mark"], f"{where}.last_mark")
        if total and last is None:
            raise ValueError(f"{where}: {total} marks and no last_mark")
        return cls(_int(d, "tid", where), _str(d, "name", where), _int(d, "calls", where), _int(d, "call_ns", where),  # type: ignore[arg-type]
                   _int(d, "wait_ns", where), _int(d, "delay_ns", where), _int(d, "after_wait_ns", where),  # type: ignore[arg-type]
                   _int(d, "after_wait_n", where), total, warm, last, marks,  # type: ignore[arg-type]
                   tuple(ApiTime.from_json(a, f"{where}.apis[{i}]") for i, a in enumerate(_list(d, "apis", where))),
                   tuple(ApiTime.from_json(a, f"{where}.loop_apis[{i}]")
                         for i, a in enumerate(_list(d, "loop_apis", where))))


@dataclass(frozen=True, slots=True)
class InjectReport:
    """One program run with the injection library: its settings (``mark``: kernel:REGEX or api:NAMES;
    ``warmup``: marks per thread before the loop's per-API counts; the delays asked for, None where none),
    the context's flags (``ctx_flags``, cuCtxGetFlags; its schedule flag is :attr:`sched`), the delays it
    applied or skipped (a stream being captured into a graph is never touched) and why a GPU or link delay
    could not be tested (``not_tested``), and its threads. ``error``: what failed at set-up."""

    pid: int
    argv: tuple[str, ...]
    mark: str
    warmup: int
    host_us: float
    gpu_us: float | None
    link_bytes: int | None
    error: str | None
    ctx_flags: int | None
    gpu_applied: int
    gpu_skipped: int
    link_applied: int
    link_skipped: int
    delay_failed: int
    not_tested: str | None
    threads: tuple[InjectThread, ...]
    version: int = INJECT_VERSION

    @property
    def sched(self) -> str | None:
        return sched_name(self.ctx_flags)

    @property
    def marks_total(self) -> int:
        return sum(t.marks_total for t in self.threads)

    @classmethod
    def from_json(cls, doc: Any) -> "InjectReport":
        """ValueError naming the first thing that is wrong."""
        d = _map(doc, "the report")
        if d.get("schema") != INJECT_SCHEMA:
            raise ValueError(f"not a {INJECT_SCHEMA} (schema {d.get('schema')!r})")
        if d.get("version") != INJECT_VERSION:
            raise ValueError(f"version {d.get('version')!r}; this clusterbench reads version {INJECT_VERSION}")
        s = _map(d.get("settings"), "settings")
        delays = _map(d.get("delays"), "delays")
        argv = _list(d, "argv", "the report")
        if not all(isinstance(a, str) for a in argv):
            raise ValueError("argv must be a list of strings")
        return cls(
            pid=_int(d, "pid", "the report"), argv=tuple(argv), mark=_str(s, "mark", "settings"),  # type: ignore[arg-type]
            warmup=_int(s, "warmup", "settings"), host_us=_num(s, "host_us", "settings"),  # type: ignore[arg-type]
            gpu_us=_num(s, "gpu_us", "settings", none=True),
            link_bytes=_int(s, "link_bytes", "settings", none=True), error=_str(d, "error", "the report", none=True),
            ctx_flags=_int(d, "ctx_flags", "the report", none=True),
            gpu_applied=_int(delays, "gpu_applied", "delays"), gpu_skipped=_int(delays, "gpu_skipped_capturing", "delays"),  # type: ignore[arg-type]
            link_applied=_int(delays, "link_applied", "delays"),  # type: ignore[arg-type]
            link_skipped=_int(delays, "link_skipped_capturing", "delays"), delay_failed=_int(delays, "failed", "delays"),  # type: ignore[arg-type]
            not_tested=_str(delays, "not_tested", "delays", none=True),
            threads=tuple(InjectThread.from_json(t, f"threads[{i}]") for i, t in enumerate(_list(d, "threads", "the report"))),
        )


@dataclass(frozen=True, slots=True)
class ThreadBar:
    """One marking thread's own time per frame of the process, untraced (µs): ``busy_us`` host code and
    calls (waits and injected delays left out: the library's bar), ``call_us`` its time in CUDA calls
    (waits included), ``wait_us`` of that in waits, ``delay_us`` injected; ``after_wait_us`` the host's time from a wait's return to its next
    issuing call (per wait, None without waits); over ``frames`` of its own marks. ``syncs`` its
    synchronize calls (stream, event, device or context) per frame of the process, ``sync_us`` their mean
    µs per call (None in records written before they were kept, and ``sync_us`` without synchronizes)."""

    tid: int
    name: str
    frames: int
    busy_us: float
    call_us: float
    wait_us: float
    delay_us: float
    after_wait_us: float | None
    syncs: float | None = None
    sync_us: float | None = None

    def to_json(self) -> dict[str, object]:
        return {"tid": self.tid, "name": self.name, "frames": self.frames, "busy_us": self.busy_us,
                "call_us": self.call_us, "wait_us": self.wait_us, "delay_us": self.delay_us,
                "after_wait_us": self.after_wait_us, "syncs": self.syncs, "sync_us": self.sync_us}

    @classmethod
    def from_json(cls, doc: Any, where: str = "thread") -> "ThreadBar":
        d = _map(doc, where)
        return cls(_int(d, "tid", where), _str(d, "name", where), _int(d, "frames", where),  # type: ignore[arg-type]
                   _num(d, "busy_us", where), _num(d, "call_us", where), _num(d, "wait_us", where),  # type: ignore[arg-type]
                   _num(d, "delay_us", where), _num(d, "after_wait_us", where, none=True),  # type: ignore[arg-type]
                   _num(d, "syncs", where, none=True), _num(d, "sync_us", where, none=True))


@dataclass(frozen=True, slots=True)
class HostFrame:
    """The untraced frame of one injected run: ``frames`` (marks past the warm-up, every thread's), the
    frame period (``period_us``: the loop's wall time over its frames) with the 10th and 90th percentile of
    the single frames' periods (from the marks kept one by one; None with fewer than 3), the busiest
    marking thread's own time per frame (``host_us``: the measured untraced host bar) and every marking
    thread's (``threads``), the schedule flag of its synchronizes (``sched``), and the API functions of
    the loop with their calls per frame and µs per call (``calls``)."""

    frames: int
    period_us: float
    period_p10_us: float | None
    period_p90_us: float | None
    host_us: float
    threads: tuple[ThreadBar, ...]
    sched: str | None
    calls: tuple[tuple[str, float, float], ...] = ()  # (api, calls per frame, µs per call)

    def to_json(self) -> dict[str, object]:
        return {"frames": self.frames, "period_us": self.period_us, "period_p10_us": self.period_p10_us,
                "period_p90_us": self.period_p90_us, "host_us": self.host_us,
                "threads": [t.to_json() for t in self.threads], "sched": self.sched,
                "calls": [{"api": a, "per_frame": n, "us_per_call": u} for a, n, u in self.calls]}

    @classmethod
    def from_json(cls, doc: Any, where: str = "host") -> "HostFrame":
        d = _map(doc, where)
        calls = []
        for i, c in enumerate(_list(d, "calls", where)):
            c = _map(c, f"{where}.calls[{i}]")
            calls.append((_str(c, "api", where), _num(c, "per_frame", where), _num(c, "us_per_call", where)))
        return cls(_int(d, "frames", where), _num(d, "period_us", where), _num(d, "period_p10_us", where, none=True),  # type: ignore[arg-type]
                   _num(d, "period_p90_us", where, none=True), _num(d, "host_us", where),  # type: ignore[arg-type]
                   tuple(ThreadBar.from_json(t, f"{where}.threads[{i}]") for i, t in enumerate(_list(d, "threads", where))),
                   _str(d, "sched", where, none=True), tuple(calls))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the latency program's report


@dataclass(frozen=True, slots=True)
class LatencyChain:
    """Copies of ``ops`` queued back to back on one stream behind a gate: the GPU's time per copy (ns, the
    median over batches, and half their range), and for a lone kernel op the median gap from one kernel's
    end to the next one's start (ns, its own stamps). ``whole``: ``ops`` is the frame's whole sequence."""

    ops: str
    whole: bool
    n: int
    period_ns: float | None
    spread_ns: float | None
    kernel_gap_ns: float | None
    gate_timeouts: int

    def to_json(self) -> dict[str, object]:
        return {"ops": self.ops, "whole": self.whole, "n": self.n, "period_ns": self.period_ns,
                "spread_ns": self.spread_ns, "kernel_gap_ns": self.kernel_gap_ns, "gate_timeouts": self.gate_timeouts}

    @classmethod
    def from_json(cls, doc: Any, where: str = "chain") -> "LatencyChain":
        d = _map(doc, where)
        return cls(_str(d, "ops", where), bool(d.get("whole")), _int(d, "n", where),  # type: ignore[arg-type]
                   _num(d, "period_ns", where, none=True), _num(d, "spread_ns", where, none=True),
                   _num(d, "kernel_gap_ns", where, none=True), _int(d, "gate_timeouts", where))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class LatencyRun:
    """One run of the latency program (``under``: "none" untraced, or the profiler's name): the schedule
    flag it ran with, the op sequence, the GPU clock's step (its resolution, ns), each chain, and the round
    trip at a synchronize (medians, ns): ``gap_ns`` from one kernel's end to the next one's start
    (GPU clock), split by the clocks' offset into ``wake_ns`` (the kernel's end to the synchronize's
    return), ``host_ns`` (the return to the next launch call) and ``launch_ns`` (the call to the kernel's
    start); ``sync_call_ns`` a launch-and-synchronize on the host; ``sync_loop_ns`` the frame of a loop of
    the sequence that synchronizes every frame; ``idle_sync_ns`` a cudaStreamSynchronize on a stream whose
    work has ended (its own cost; None from a version-1 report, which did not measure it)."""

    under: str
    sched: str
    device: str
    seq: str
    globaltimer_step_ns: int
    chains: tuple[LatencyChain, ...]
    gap_ns: float | None
    wake_ns: float | None
    host_ns: float | None
    launch_ns: float | None
    sync_call_ns: float | None
    sync_loop_ns: float | None
    idle_sync_ns: float | None = None

    def chain(self, ops: str) -> LatencyChain | None:
        return next((c for c in self.chains if c.ops == ops), None)

    @property
    def sequence(self) -> LatencyChain | None:
        return next((c for c in self.chains if c.whole), None)

    def to_json(self) -> dict[str, object]:
        return {"under": self.under, "sched": self.sched, "device": self.device, "seq": self.seq,
                "globaltimer_step_ns": self.globaltimer_step_ns, "chains": [c.to_json() for c in self.chains],
                "gap_ns": self.gap_ns, "wake_ns": self.wake_ns, "host_ns": self.host_ns, "launch_ns": self.launch_ns,
                "sync_call_ns": self.sync_call_ns, "sync_loop_ns": self.sync_loop_ns, "idle_sync_ns": self.idle_sync_ns}

    @classmethod
    def from_json(cls, doc: Any, where: str = "latency") -> "LatencyRun":
        d = _map(doc, where)
        return cls(_str(d, "under", where), _str(d, "sched", where), _str(d, "device", where), _str(d, "seq", where),  # type: ignore[arg-type]
                   _int(d, "globaltimer_step_ns", where),  # type: ignore[arg-type]
                   tuple(LatencyChain.from_json(c, f"{where}.chains[{i}]") for i, c in enumerate(_list(d, "chains", where))),
                   *(_num(d, k, where, none=True) for k in ("gap_ns", "wake_ns", "host_ns", "launch_ns",
                                                             "sync_call_ns", "sync_loop_ns", "idle_sync_ns")))

    @classmethod
    def from_report(cls, doc: Any, under: str) -> "LatencyRun":
        """From cb_latency's own JSON: medians of its raw samples. ValueError naming what is wrong."""
        d = _map(doc, "the report")
        if d.get("schema") != LATENCY_SCHEMA:
            raise ValueError(f"not a {LATENCY_SCHEMA} (schema {d.get('schema')!r})")
        if d.get("version") not in LATENCY_VERSIONS_READ:
            raise ValueError(f"version {d.get('version')!r}; this clusterbench reads versions "
                             f"{', '.join(map(str, LATENCY_VERSIONS_READ))}")
        chains = []
        for i, c in enumerate(_list(d, "chains", "the report")):
            c = _map(c, f"chains[{i}]")
            per = [float(x) for x in _list(c, "ns_per", f"chains[{i}]") if isinstance(x, (int, float))]
            gaps = _ints(_list(c, "kernel_gap_ns", f"chains[{i}]"), f"chains[{i}].kernel_gap_ns")
            chains.append(LatencyChain(_str(c, "ops", f"chains[{i}]"), bool(c.get("whole")), _int(c, "n", f"chains[{i}]"),  # type: ignore[arg-type]
                                       median(per) if per else None, half_range(per) if per else None,
                                       median([float(g) for g in gaps]) if gaps else None,
                                       _int(c, "gate_timeouts", f"chains[{i}]")))  # type: ignore[arg-type]
        rt = _map(d.get("round_trip"), "round_trip")

        def med(m: Mapping[str, Any], key: str, where: str) -> float | None:
            v = _ints(_list(m, key, where), f"{where}.{key}")
            return median([float(x) for x in v]) if v else None

        loop = _map(d.get("sync_loop"), "sync_loop")
        idle = _map(d.get("idle_sync"), "idle_sync") if d.get("version") >= 2 else None
        return cls(under, _str(d, "sched", "the report"), _str(d, "device", "the report"), _str(d, "seq", "the report"),  # type: ignore[arg-type]
                   _int(d, "globaltimer_step_ns", "the report"), tuple(chains),  # type: ignore[arg-type]
                   med(rt, "gap_ns", "round_trip"), med(rt, "wake_ns", "round_trip"), med(rt, "host_ns", "round_trip"),
                   med(rt, "launch_ns", "round_trip"), med(rt, "sync_call_ns", "round_trip"),
                   med(loop, "frame_ns", "sync_loop"), None if idle is None else med(idle, "call_ns", "idle_sync"))


@dataclass(frozen=True, slots=True)
class UntracedCosts:
    """One unit's untraced costs (a per-unit record: env.json's unit block, key ``untraced``): the latency
    program without the profiler (``untraced``) and under it (``traced``, None where it was not run), the
    schedule flag the program's synchronizes use (``sched``, from its context), the CPU frequency
    governor (``governor``: one name, or "mixed: a, b"), and the host's own µs per call of each API
    function the probed program made, untraced (``call_us``: the injection library's loop figures)."""

    untraced: LatencyRun
    traced: LatencyRun | None
    sched: str | None
    governor: str | None
    call_us: Mapping[str, float] = field(default_factory=dict)
    version: int = COSTS_VERSION

    def to_json(self) -> dict[str, object]:
        return {"schema": COSTS_SCHEMA, "version": self.version, "untraced": self.untraced.to_json(),
                "traced": None if self.traced is None else self.traced.to_json(), "sched": self.sched,
                "governor": self.governor, "call_us": dict(self.call_us)}

    @classmethod
    def from_json(cls, doc: Any) -> "UntracedCosts":
        d = _map(doc, "untraced costs")
        if d.get("schema") != COSTS_SCHEMA or d.get("version") != COSTS_VERSION:
            raise ValueError(f"not a version-{COSTS_VERSION} {COSTS_SCHEMA} record")
        calls = _map(d.get("call_us") or {}, "call_us")
        return cls(LatencyRun.from_json(d.get("untraced"), "untraced"),
                   None if d.get("traced") is None else LatencyRun.from_json(d["traced"], "traced"),
                   _str(d, "sched", "untraced costs", none=True), _str(d, "governor", "untraced costs", none=True),
                   {str(k): float(v) for k, v in calls.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})


# --------------------------------------------------------------------------- the delay test


@dataclass(frozen=True, slots=True)
class DelayRun:
    """One process of the delay test: the resource delayed ("none": the baseline with the library and no
    delay; "bare": without the library; "gpu" and "link" with ``k_us`` 0: their baselines, the spin kernel
    of no time and a 4-byte copy), the delay asked per frame (µs; link: the bytes too), which process of
    the round it was, and what it measured: the untraced frame (µs: the injection library's marks; None
    where the run gave none), the busiest thread's own time per frame, the frame by the program's own rate;
    ``note`` says why a run gave nothing, or what it skipped."""

    resource: str
    k_us: float
    process: int
    frame_us: float | None
    host_us: float | None = None
    link_bytes: int | None = None
    own_us: float | None = None  # the frame by the program's own printed rate, where it prints one
    note: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"resource": self.resource, "k_us": self.k_us, "process": self.process, "frame_us": self.frame_us,
                "host_us": self.host_us, "link_bytes": self.link_bytes, "own_us": self.own_us, "note": self.note}

    @classmethod
    def from_json(cls, doc: Any, where: str = "run") -> "DelayRun":
        d = _map(doc, where)
        return cls(_str(d, "resource", where), _num(d, "k_us", where), _int(d, "process", where),  # type: ignore[arg-type]
                   _num(d, "frame_us", where, none=True), _num(d, "host_us", where, none=True),
                   _int(d, "link_bytes", where, none=True), _num(d, "own_us", where, none=True),
                   _str(d, "note", where, none=True))


@dataclass(frozen=True, slots=True)
class SlopeFit:
    """One resource's slope: how much the frame grew per µs of delay (Δframe / k), from the median frame of
    the delayed processes against the median of its baseline's, with its spread (half the range of each
    side, added, over k); ``verdict``: binds (about 1: the frame grows by the delay), slack (about 0), shared
    (between), or not tested (``note`` says why)."""

    resource: str
    k_us: float
    slope: float | None
    spread: float | None
    base_us: float | None
    delayed_us: float | None
    processes: int
    verdict: str
    note: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"resource": self.resource, "k_us": self.k_us, "slope": self.slope, "spread": self.spread,
                "base_us": self.base_us, "delayed_us": self.delayed_us, "processes": self.processes,
                "verdict": self.verdict, "note": self.note}

    @classmethod
    def from_json(cls, doc: Any, where: str = "slope") -> "SlopeFit":
        d = _map(doc, where)
        verdict = _str(d, "verdict", where)
        if verdict not in VERDICTS:
            raise ValueError(f"{where}.verdict must be one of {', '.join(VERDICTS)}, got {verdict!r}")
        return cls(_str(d, "resource", where), _num(d, "k_us", where), _num(d, "slope", where, none=True),  # type: ignore[arg-type]
                   _num(d, "spread", where, none=True), _num(d, "base_us", where, none=True),
                   _num(d, "delayed_us", where, none=True), _int(d, "processes", where), verdict,  # type: ignore[arg-type]
                   _str(d, "note", where, none=True))


def cost_frames(runs: Sequence[DelayRun]) -> tuple[list[float], list[float]]:
    """The processes behind the injection library's cost (pure): the baseline's frames with the library, by
    the program's own rate, and the bare runs' frames (µs)."""
    with_lib = [r.own_us for r in runs if r.resource == "none" and r.own_us is not None]
    bare = [r.frame_us for r in runs if r.resource == "bare" and r.frame_us is not None]
    return with_lib, bare  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class DelayTest:
    """The delay test of one config: ``processes`` per point, the delay ``k_us`` per frame (the link's as
    ``link_bytes`` at ``link_gbps``), every run, each resource's slope, what binds in words (``binds``), the
    frame without the library (``bare_us``, from the program's own rate; None without one) and the
    library's own cost (``cost``: the baseline's frame over the bare one, less 1)."""

    processes: int
    k_us: float
    link_bytes: int | None
    link_gbps: float | None
    runs: tuple[DelayRun, ...]
    slopes: tuple[SlopeFit, ...]
    binds: str
    bare_us: float | None = None
    cost: float | None = None
    # where link_gbps came from: "unit" (the unit's pinned H2D rate alone, env.json's unit block), or "trace"
    # (the trace's H2D rate: the copies the program makes, often smaller and slower than one of k µs)
    link_rate_from: str = "trace"

    def slope(self, resource: str) -> SlopeFit | None:
        return next((s for s in self.slopes if s.resource == resource), None)

    def to_json(self) -> dict[str, object]:
        return {"processes": self.processes, "k_us": self.k_us, "link_bytes": self.link_bytes,
                "link_gbps": self.link_gbps, "runs": [r.to_json() for r in self.runs],
                "slopes": [s.to_json() for s in self.slopes], "binds": self.binds, "bare_us": self.bare_us,
                "cost": self.cost, "link_rate_from": self.link_rate_from}

    @classmethod
    def from_json(cls, doc: Any, where: str = "delay_test") -> "DelayTest":
        d = _map(doc, where)
        return cls(_int(d, "processes", where), _num(d, "k_us", where), _int(d, "link_bytes", where, none=True),  # type: ignore[arg-type]
                   _num(d, "link_gbps", where, none=True),
                   tuple(DelayRun.from_json(r, f"{where}.runs[{i}]") for i, r in enumerate(_list(d, "runs", where))),
                   tuple(SlopeFit.from_json(s, f"{where}.slopes[{i}]") for i, s in enumerate(_list(d, "slopes", where))),
                   _str(d, "binds", where), _num(d, "bare_us", where, none=True), _num(d, "cost", where, none=True),  # type: ignore[arg-type]
                   _str(d, "link_rate_from", where) if "link_rate_from" in d else "trace")


# --------------------------------------------------------------------------- the split


@dataclass(frozen=True, slots=True)
class PathHost:
    """One launching thread on the traced critical path, per frame (µs): its time there (``path_us``), of
    which ``wake_us`` lies between a held wait's release and the wait's return (the host waking from a
    synchronize, ``wakes`` of them per frame), and ``after_wait_us`` from such a return to the thread's next
    call that issues GPU work, where the path goes on at that call (``after_waits`` of them per frame: the
    host's own part of a turn); the thread's own bar as traced (``work_us``), and its time inside calls
    the GPU held while it ran their work (``blocked_us``: a graph launch that returns once its graph has
    run), which the bar leaves out and a timer of calls from entry to exit does not (None: not recorded);
    and the GPU's idle stretches inside those held calls (not a pageable copy's or a module load's, whose
    idle time is the host's own work): ``held_leads`` a frame from a call's start to the GPU's first work
    for it (its launch, ``held_lead_us`` in all) and ``held_gaps`` between its dependent work
    (``held_gap_us``), which the bar as traced holds and which the untraced split prices as launch and
    GPU latency."""

    tid: int
    name: str | None
    path_us: float
    wake_us: float
    wakes: float
    work_us: float | None
    after_wait_us: float = 0.0
    after_waits: float = 0.0
    blocked_us: float | None = None
    held_lead_us: float = 0.0
    held_leads: float = 0.0
    held_gap_us: float = 0.0
    held_gaps: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {"tid": self.tid, "name": self.name, "path_us": self.path_us, "wake_us": self.wake_us,
                "wakes": self.wakes, "work_us": self.work_us, "after_wait_us": self.after_wait_us,
                "after_waits": self.after_waits, "blocked_us": self.blocked_us, "held_lead_us": self.held_lead_us,
                "held_leads": self.held_leads, "held_gap_us": self.held_gap_us, "held_gaps": self.held_gaps}

    @classmethod
    def from_json(cls, doc: Any, where: str = "path.hosts") -> "PathHost":
        d = _map(doc, where)
        return cls(_int(d, "tid", where, low=None), _str(d, "name", where, none=True), _num(d, "path_us", where),  # type: ignore[arg-type]
                   _num(d, "wake_us", where), _num(d, "wakes", where), _num(d, "work_us", where, none=True),  # type: ignore[arg-type]
                   _num(d, "after_wait_us", where) if "after_wait_us" in d else 0.0,  # type: ignore[arg-type]
                   _num(d, "after_waits", where) if "after_waits" in d else 0.0,  # type: ignore[arg-type]
                   _num(d, "blocked_us", where, none=True) if "blocked_us" in d else None,  # type: ignore[arg-type]
                   *(_num(d, k, where) if k in d else 0.0  # type: ignore[misc]
                     for k in ("held_lead_us", "held_leads", "held_gap_us", "held_gaps")))


@dataclass(frozen=True, slots=True)
class PathStructure:
    """The traced critical path per frame (µs, outside the set-up gaps): each engine's time on it, its
    ``idle`` (the GPU waiting between dependent work, with ``idle_gaps`` gaps per frame), its ``launch``
    (a row waiting for its launch call, ``launches`` per frame, ``launches_after_wake`` of them, taking
    ``launch_after_wake_us``, right after a host part that holds a wait's wake), each launching thread's
    time, and each engine's mean op duration in the window (``op_us``, µs per op)."""

    frames: int
    path_us: float
    engines_us: Mapping[str, float]
    idle_us: float
    idle_gaps: float
    launch_us: float
    launches: float
    launches_after_wake: float
    hosts: tuple[PathHost, ...]
    op_us: Mapping[str, float] = field(default_factory=dict)
    launch_after_wake_us: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {"frames": self.frames, "path_us": self.path_us, "engines_us": dict(self.engines_us),
                "idle_us": self.idle_us, "idle_gaps": self.idle_gaps, "launch_us": self.launch_us,
                "launches": self.launches, "launches_after_wake": self.launches_after_wake,
                "launch_after_wake_us": self.launch_after_wake_us,
                "hosts": [h.to_json() for h in self.hosts], "op_us": dict(self.op_us)}

    @classmethod
    def from_json(cls, doc: Any, where: str = "path") -> "PathStructure":
        """The stored path back (a record's ``path``), so that its split can be priced again without the
        trace. ValueError naming what is wrong."""
        d = _map(doc, where)

        def floats(key: str) -> dict[str, float]:
            m = _map(d.get(key, {}), f"{where}.{key}")
            return {str(k): float(_num(m, k, f"{where}.{key}")) for k in m}  # type: ignore[arg-type]

        return cls(_int(d, "frames", where), _num(d, "path_us", where), floats("engines_us"),  # type: ignore[arg-type]
                   _num(d, "idle_us", where), _num(d, "idle_gaps", where), _num(d, "launch_us", where),  # type: ignore[arg-type]
                   _num(d, "launches", where), _num(d, "launches_after_wake", where),  # type: ignore[arg-type]
                   tuple(PathHost.from_json(h, f"{where}.hosts[{i}]") for i, h in enumerate(_list(d, "hosts", where))),
                   floats("op_us"),
                   _num(d, "launch_after_wake_us", where) if "launch_after_wake_us" in d else 0.0)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class SplitPart:
    """One part of the frame: ``resource`` (``host:<tid>``, an engine, ``launch``, ``gpu_latency``,
    ``round_trip``, ``gpu_held``), its µs per frame on the traced path and without the profiler, and how the untraced
    figure was measured (``how``)."""

    resource: str
    traced_us: float
    untraced_us: float | None
    how: str

    @property
    def profiler_us(self) -> float | None:
        """What the profiler added to this part (traced less untraced)."""
        return None if self.untraced_us is None else self.traced_us - self.untraced_us

    def to_json(self) -> dict[str, object]:
        return {"resource": self.resource, "traced_us": self.traced_us, "untraced_us": self.untraced_us,
                "profiler_us": self.profiler_us, "how": self.how}


# The untraced split's parts must add up to the measured untraced frame within this share (the issue's
# bar: a split that misses the frame by more leaves something unmeasured).
SPLIT_TOLERANCE = 0.10


@dataclass(frozen=True, slots=True)
class UntracedSplit:
    """The frame split by resource as traced and without the profiler: the parts, their sums
    (``traced_us`` is the traced path per frame; ``untraced_sum_us`` the untraced parts'), the measured
    untraced frame (``frame_us``, the same processes' period), and whether the untraced parts add up to
    it within :data:`SPLIT_TOLERANCE` (``agrees``; None where a part or the frame was not measured)."""

    parts: tuple[SplitPart, ...]
    traced_us: float
    untraced_sum_us: float | None
    frame_us: float | None
    agrees: bool | None
    note: str

    @property
    def profiler_us(self) -> float | None:
        """What the profiler added, summed over the parts: the traced path less the untraced parts."""
        return None if self.untraced_sum_us is None else self.traced_us - self.untraced_sum_us

    @property
    def miss(self) -> float | None:
        """The untraced parts' sum over the measured frame, less 1."""
        if self.untraced_sum_us is None or not self.frame_us:
            return None
        return self.untraced_sum_us / self.frame_us - 1

    def to_json(self) -> dict[str, object]:
        return {"parts": [p.to_json() for p in self.parts], "traced_us": self.traced_us,
                "untraced_sum_us": self.untraced_sum_us, "profiler_us": self.profiler_us, "frame_us": self.frame_us,
                "miss": self.miss, "agrees": self.agrees, "tolerance": SPLIT_TOLERANCE, "note": self.note}


@dataclass(frozen=True, slots=True)
class IdleCauses:
    """``idle`` on the traced critical path (µs per frame, ``gaps`` per frame) by cause: the GPU's own
    latency between dependent work (measured untraced), the profiler's part (the same latency under the
    profiler, less), and what neither explains (``unexplained``: the idle less both; negative when the
    unit's latency is longer than the trace's gaps). The synchronize's round trip (``round_trip_us``, per
    wait, untraced) is not idle on this path (the host's wake and the launch hold it): said in ``note``."""

    idle_us: float
    gaps: float
    gpu_own_us: float | None
    profiler_us: float | None
    unexplained_us: float | None
    round_trip_us: float | None
    note: str

    def to_json(self) -> dict[str, object]:
        return {"idle_us": self.idle_us, "gaps": self.gaps, "gpu_own_us": self.gpu_own_us,
                "profiler_us": self.profiler_us, "unexplained_us": self.unexplained_us,
                "round_trip_us": self.round_trip_us, "note": self.note}


@dataclass(frozen=True, slots=True)
class UntracedRecord:
    """What ``probe --what-binds`` measured for one config (``<label>.untraced.json``): the untraced frame
    of the baseline process of median period (``host``), the delay test, the unit's costs, and, from the
    config's trace, the path's structure, the untraced split and the causes of ``idle``; ``notes``: what
    could not be measured and why. ``analyze TRACE --untraced FILE`` reads ``host`` and ``costs`` back to
    split another trace of the program."""

    host: HostFrame | None
    delay: DelayTest | None
    costs: UntracedCosts | None
    path: PathStructure | None = None
    split: UntracedSplit | None = None
    idle: IdleCauses | None = None
    notes: tuple[str, ...] = ()
    version: int = UNTRACED_VERSION
    # the delay test read off the trace (analyzers.replay): each resource's slope with the same k, replayed
    replay: tuple[SlopeFit, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"schema": UNTRACED_SCHEMA, "version": self.version,
                "host": None if self.host is None else self.host.to_json(),
                "delay_test": None if self.delay is None else self.delay.to_json(),
                "costs": None if self.costs is None else self.costs.to_json(),
                "path": None if self.path is None else self.path.to_json(),
                "split": None if self.split is None else self.split.to_json(),
                "idle": None if self.idle is None else self.idle.to_json(), "notes": list(self.notes),
                "replay": [r.to_json() for r in self.replay]}

    @classmethod
    def from_json(cls, doc: Any) -> "UntracedRecord":
        """The measured parts back (host, delay test, costs, notes) and the traced path's structure; the
        split, idle's causes and the replay are computed again (from the path, or from a trace). ValueError
        naming what is wrong."""
        d = _map(doc, "the record")
        if d.get("schema") != UNTRACED_SCHEMA:
            raise ValueError(f"not a {UNTRACED_SCHEMA} record (schema {d.get('schema')!r})")
        if d.get("version") != UNTRACED_VERSION:
            raise ValueError(f"version {d.get('version')!r}; this clusterbench reads version {UNTRACED_VERSION}")
        notes = d.get("notes") or []
        if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
            raise ValueError("notes must be a list of strings")
        return cls(None if d.get("host") is None else HostFrame.from_json(d["host"]),
                   None if d.get("delay_test") is None else DelayTest.from_json(d["delay_test"]),
                   None if d.get("costs") is None else UntracedCosts.from_json(d["costs"]),
                   None if d.get("path") is None else PathStructure.from_json(d["path"]), notes=tuple(notes))
