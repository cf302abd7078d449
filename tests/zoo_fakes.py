"""Synthetic traces of the zoo's patterns (tests/zoo/*.cu), written with fake_nsys as nsys writes them.

Each builder runs a small model of the zoo program: host threads make CUDA calls on a clock (ns),
and a simple GPU executes what they queue in stream order, each engine (kernels, H2D, D2H, memset)
one record at a time, a record starting LATENCY after the call that queued it at the earliest; a
synchronize returns WAKE after the work it waits for. It returns the Trace and the facts a test
needs (where the set-up ends, where the loop runs, which thread did what). Expected values in the
tests come from these facts by hand, or from plain-Python unions over the Trace's own rows; nothing
here calls clusterbench.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fake_nsys import Api, Copy, Graph, Kernel, Memset, Overhead, Range, Sync, Trace

US = 1_000
MS = 1_000_000
FRAME_BYTES = 320_000  # a 400x400 uint16 frame
PREVIEW_BYTES = 1_024
LATENCY = 1 * US  # from a call to the earliest start of the record it queues
WAKE = 2 * US  # from the end of the awaited work to the return of a synchronize
H2D_NS = 13 * US  # 320 kB at about 24.6 GB/s
CALIB_NS = 5 * US
REDUCE_NS = 3 * US
D2H_NS = 1 * US


@dataclass
class Program:
    """A trace under construction: host threads' clocks, the GPU's queues, and the facts."""

    trace: Trace = field(default_factory=Trace)
    facts: dict = field(default_factory=dict)
    clock: dict[int, int] = field(default_factory=dict)  # tid -> the thread's time
    engine_free: dict[str, int] = field(default_factory=dict)  # engine -> end of its last record
    stream_end: dict[int, int] = field(default_factory=dict)  # stream -> end of its last record

    def at(self, tid: int = 100) -> int:
        return self.clock.get(tid, 0)

    def host(self, ns: int, tid: int = 100) -> int:
        """Host code for ``ns`` (no CUDA call)."""
        self.clock[tid] = self.at(tid) + ns
        return self.clock[tid]

    def call(self, name: str, ns: int, tid: int = 100) -> tuple[int, int]:
        """A CUDA call of ``ns`` on thread ``tid`` (pid 100; the main thread's tid is 100)."""
        a = self.at(tid)
        self.clock[tid] = a + ns
        self.trace.api.append(Api(a, a + ns, name, pid=100, tid=None if tid == 100 else tid))
        return a, a + ns

    def _queue(self, engine: str, issued: int, ns: int, stream: int) -> tuple[int, int]:
        start = max(issued + LATENCY, self.engine_free.get(engine, 0), self.stream_end.get(stream, 0))
        self.engine_free[engine] = self.stream_end[stream] = start + ns
        return start, start + ns

    def h2d(self, nbytes: int = FRAME_BYTES, ns: int = H2D_NS, stream: int = 7, tid: int = 100, call_ns: int = 3 * US) -> None:
        a, _ = self.call("cudaMemcpyAsync_v3020", call_ns, tid)
        s, e = self._queue("h2d", a, ns, stream)
        self.trace.copies.append(Copy(s, e, 1, nbytes, stream=stream))

    def d2h(self, nbytes: int = PREVIEW_BYTES, ns: int = D2H_NS, stream: int = 7, tid: int = 100, call_ns: int = 2 * US) -> None:
        a, _ = self.call("cudaMemcpyAsync_v3020", call_ns, tid)
        s, e = self._queue("d2h", a, ns, stream)
        self.trace.copies.append(Copy(s, e, 2, nbytes, stream=stream))

    def memset(self, nbytes: int = 4, ns: int = 1 * US, stream: int = 7, tid: int = 100) -> None:
        a, _ = self.call("cudaMemsetAsync_v3020", 1 * US, tid)
        s, e = self._queue("memset", a, ns, stream)
        self.trace.memsets.append(Memset(s, e, nbytes, stream=stream))

    def kernel(self, name: str, ns: int = CALIB_NS, stream: int = 7, tid: int = 100, launch: str = "cudaLaunchKernel_v7000") -> None:
        a, _ = self.call(launch, 2 * US, tid)
        s, e = self._queue("kernel", a, ns, stream)
        self.trace.kernels.append(Kernel(s, e, stream=stream, name=name))

    def sync(self, streams: tuple[int, ...] = (7,), tid: int = 100, name: str = "cudaStreamSynchronize_v3020") -> tuple[int, int]:
        """Block until the streams' queued work is done, plus WAKE."""
        a = self.at(tid)
        done = max([self.stream_end.get(s, 0) for s in streams] + [a])
        end = max(a + 1 * US, done + WAKE)
        self.trace.api.append(Api(a, end, name, pid=100, tid=None if tid == 100 else tid))
        self.trace.syncs += [Sync(a, end - WAKE // 2, stream=s) for s in streams]  # CUPTI's own record of the wait
        self.clock[tid] = end
        return a, end

    def gpu_end(self) -> int:
        return max(self.stream_end.values())


def _setup(p: Program, tid: int = 100) -> None:
    p.call("cudaFree_v3020", 50 * US, tid)  # creates the context
    p.call("cudaHostAlloc_v3020", 100 * US, tid)
    p.call("cudaMalloc_v3020", 30 * US, tid)
    p.call("cudaStreamCreateWithFlags_v5000", 10 * US, tid)


def no_nvtx(frames: int = 40, sync_every: int = 10, jit_ns: int = 20 * MS, mid_jit_ns: int = 15 * MS) -> Program:
    """no_nvtx.cu: set-up (allocations, one H2D), NVRTC compiles zoo_calib_jit on the host for ``jit_ns``
    and cuModuleLoadData loads it; a loop of ``frames`` frames on one stream (H2D 320 kB,
    cuLaunchKernel, D2H 1 kB; cudaStreamSynchronize every ``sync_every``); at frame frames/2 a 2 GiB
    cudaMalloc + cudaFree (3 ms) and a second compile (``mid_jit_ns``) and load of zoo_calib_jit2."""
    p = Program()
    _setup(p)
    p.h2d()
    p.sync()
    first_h2d = (p.trace.copies[0].start, p.trace.copies[0].end)
    p.host(jit_ns)  # NVRTC: not traced
    load1 = p.call("cuModuleLoadData", 100 * US)
    p.call("cuModuleGetFunction", 5 * US)
    half = frames // 2
    mid = None
    for f in range(frames):
        if f == half:
            gpu_idle_from = p.gpu_end()
            alloc = (p.call("cudaMalloc_v3020", 1 * MS)[0], p.call("cudaFree_v3020", 2 * MS)[1])
            p.host(mid_jit_ns)
            load2 = p.call("cuModuleLoadData", 100 * US)
            p.call("cuModuleGetFunction", 5 * US)
            mid = {"gpu_idle_from": gpu_idle_from, "alloc": alloc, "load": load2}
        p.h2d()
        p.kernel("zoo_calib_jit" if f < half else "zoo_calib_jit2", launch="cuLaunchKernel")
        p.d2h()
        if (f + 1) % sync_every == 0:
            p.sync()
    if frames % sync_every:
        p.sync()
    p.call("cuModuleUnload", 100 * US)
    p.facts.update(first_h2d=first_h2d, load1=load1, mid=mid, half=half, frames=frames, records=3 * frames + 1,
                   loop_start=p.trace.copies[1].start, loop_end=p.gpu_end())  # fmt: skip
    return p


def nvtx_domain(frames: int = 30, batch: int = 10, sleep_ns: int = 50 * MS, capture: bool = False) -> Program:
    """nvtx_domain.cu: NVTX3 ranges in the domain zoo_daq with strings that are not registered (inline
    text): 'setup' (allocations, a warm-up H2D + zoo_calib, then a ``sleep_ns`` host sleep), 'event loop'
    (opened just after cudaProfilerStart), 'batch' start/end ranges of ``batch`` frames, each ending in a
    synchronize. ``capture``: only what a cudaProfilerStart/Stop capture holds. The 'batch' ranges use
    a registered string here (textId), to cover both."""
    p = Program()
    warmup = None
    if not capture:
        s0 = p.at()
        _setup(p)
        p.h2d()
        p.kernel("zoo_calib")
        p.sync()
        warmup = (p.trace.copies[0].start, p.trace.kernels[0].end)
        p.host(sleep_ns)
        p.trace.ranges.append(Range(s0, p.at(), "setup", domain="zoo_daq"))
    p.host(1 * MS) if capture else None
    profiler_start = p.call("cudaProfilerStart", 20 * US)
    loop0 = p.host(2 * US)
    batches = []
    for b0 in range(0, frames, batch):
        bs = p.host(1 * US)
        for _f in range(b0, min(frames, b0 + batch)):
            p.h2d()
            p.kernel("zoo_calib")
            p.d2h()
        p.sync()
        be = p.host(1 * US)
        batches.append((bs, be))
        p.trace.ranges.append(Range(bs, be, "batch", domain="zoo_daq", event_type=60, by_id=True))
    loop1 = p.host(1 * US)
    p.trace.ranges.append(Range(loop0, loop1, "event loop", domain="zoo_daq"))
    p.call("cudaProfilerStop", 30 * US)
    p.facts.update(loop=(loop0, loop1), batches=batches, frames=frames, warmup=warmup, profiler_start=profiler_start,
                   first=p.trace.copies[0 if capture else 1].start, last=p.gpu_end())  # fmt: skip
    return p


def multi_kernel(frames: int = 40, streams: int = 4) -> Program:
    """multi_kernel.cu: per frame a 4-byte memset, an H2D of 320 kB, zoo_calib, zoo_reduce and a 4-byte
    D2H on stream 7 + f % streams, from one thread; a warm-up frame on stream 7 first; one
    synchronize per stream at the end."""
    p = Program()
    _setup(p)

    def frame(s: int) -> None:
        p.memset(stream=s)
        p.h2d(stream=s)
        p.kernel("zoo_calib", stream=s)
        p.kernel("zoo_reduce", REDUCE_NS, stream=s)
        p.d2h(4, stream=s)

    frame(7)
    p.sync()
    t0 = p.at()
    for f in range(frames):
        frame(7 + f % streams)
    for s in range(streams):
        p.sync((7 + s,))
    p.facts.update(frames=frames, streams=streams, t0=t0)
    return p


def threads(frames: int = 40, n_threads: int = 2, n_streams: int = 2, sync_every: int = 10, startup_ns: int = 300 * US) -> Program:
    """threads.cu: ``n_threads`` threads named zoo-feed-0.. (tids 101..) each feed their own streams
    (thread k owns streams 7 + s with s % n_threads == k and frames f with f % n_threads == k): per frame
    H2D 320 kB, zoo_calib, D2H 1 kB, a synchronize of its streams every ``sync_every`` of its frames and
    at its end. The main thread (tid 100) sets up, warms zoo_calib up on stream 7, starts the threads
    (``startup_ns``) and joins them: it launches nothing in the loop. The threads take turns frame by
    frame (each frame's calls are made before the next frame's)."""
    p = Program()
    _setup(p)
    p.h2d()
    p.kernel("zoo_calib")
    p.sync()
    go = p.host(startup_ns)
    owned = {k: [7 + s for s in range(n_streams) if s % n_threads == k] for k in range(n_threads)}
    tids = [101 + k for k in range(n_threads)]
    for k, tid in enumerate(tids):
        p.trace.thread_names[(100, tid)] = f"zoo-feed-{k}"
        p.clock[tid] = go - 50 * US
        p.call("cudaSetDevice_v3020", 10 * US, tid)
        p.clock[tid] = go + k * US
    done = {k: 0 for k in range(n_threads)}
    for f in range(frames):
        k = f % n_threads
        tid, s = tids[k], owned[k][done[k] % len(owned[k])]
        p.h2d(stream=s, tid=tid)
        p.kernel("zoo_calib", stream=s, tid=tid)
        p.d2h(stream=s, tid=tid)
        done[k] += 1
        if done[k] % sync_every == 0:
            for st in owned[k]:
                p.sync((st,), tid=tid)
    for k, tid in enumerate(tids):
        if done[k] % sync_every:
            for st in owned[k]:
                p.sync((st,), tid=tid)
    p.clock[100] = max(p.at(t) for t in tids) + 20 * US  # joined
    p.facts.update(frames=frames, go=go, owned=owned, tids=tids, per_thread=done)
    return p


def device_graph(events: int = 200, node_level: bool = True, per_event: int = 8 * US) -> Program:
    """device_graph.cu: a graph of two kernel nodes (zoo_calib, zoo_reduce) instantiated for device
    launch, launched once from the host, then relaunched from the device (tail launch) for ``events``
    events while the host waits in cudaStreamSynchronize. At node level nsys writes only the first
    kernel rows (3 here) and nothing of the relaunches; at graph level every execution is a row of
    CUPTI_ACTIVITY_KIND_GRAPH_TRACE. Set-up uploads a 4-frame ring; the counts come back with cudaMemcpy."""
    p = Program()
    _setup(p)
    p.h2d(4 * FRAME_BYTES, 52 * US, stream=9)
    p.memset(4 * events, stream=9)
    p.sync((9,))
    p.call("cudaStreamBeginCapture_v10000", 5 * US)
    p.call("cudaStreamEndCapture_v10000", 20 * US)
    p.call("cudaGraphInstantiateWithFlags_v11040", 200 * US)
    p.call("cudaGraphUpload_v11010", 20 * US)
    launch = p.call("cudaGraphLaunch_v10000", 10 * US)
    first = launch[0] + LATENCY
    work_end = first + events * per_event
    if node_level:
        p.trace.graph_nodes = True
        # the rows nsys writes share one correlationId (on the H200: that of the one host cudaGraphLaunch)
        p.trace.kernels += [Kernel(first, first + 5 * US, stream=9, name="zoo_calib", graph_node=1, corr=1 << 30),
                            Kernel(first + 5 * US, first + 8 * US, stream=9, name="zoo_reduce", graph_node=2, corr=1 << 30),
                            Kernel(first + 8 * US, first + 13 * US, stream=9, name="zoo_calib", graph_node=1, corr=1 << 30)]  # fmt: skip
    else:
        p.trace.graphs += [Graph(first + e * per_event, first + (e + 1) * per_event - 100, stream=9) for e in range(events)]
    p.stream_end[9] = work_end
    wait = p.sync((9,))
    p.call("cudaMemcpy_v3020", 8 * US)
    p.trace.copies.append(Copy(p.at() - 6 * US, p.at() - 2 * US, 2, 16, stream=0))
    p.call("cudaMemcpy_v3020", 10 * US)
    p.trace.copies.append(Copy(p.at() - 8 * US, p.at() - 2 * US, 2, 4 * events, stream=0))
    p.facts.update(events=events, launch=launch, wait=wait, work=(first, work_end))
    return p


def host_bound(frames: int = 64, spin_ns: int = 40 * US, sync_every: int = 8) -> Program:
    """host_bound.cu: per frame the host spins ``spin_ns`` (host work, no CUDA call), then an H2D of
    65,536 bytes (3 µs), zoo_calib (2 µs) and a D2H of 1 kB on one stream; a synchronize every
    ``sync_every`` frames; a warm-up frame first."""
    p = Program()
    _setup(p)
    p.h2d(65_536, 3 * US)
    p.kernel("zoo_calib", 2 * US)
    p.sync()
    t0 = p.at()
    for f in range(frames):
        p.host(spin_ns)
        p.h2d(65_536, 3 * US)
        p.kernel("zoo_calib", 2 * US)
        p.d2h()
        if (f + 1) % sync_every == 0:
            p.sync()
    if frames % sync_every:
        p.sync()
    p.facts.update(frames=frames, t0=t0, end=p.at(), spin=spin_ns)
    return p


def with_overhead(p: Program, start: int, end: int, tid: int | None = None) -> Program:
    """Add a PROFILER_OVERHEAD row on a thread (the main thread by default)."""
    p.trace.overhead.append(Overhead(start, end, "CUDA profiling data flush", tid=tid))
    return p
