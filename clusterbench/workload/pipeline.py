"""The GPU pipeline: pinned host buffers, S streams, batches of B frames.

Per batch b (on stream b % S): H2D of its frames from the pinned pool into that stream's device
buffer, the kernel, then (``copy`` mode) one D2H of the batch's slots, copied whole. In ``zerocopy``
mode the output slots live in mapped pinned host memory and the kernel writes the clusters it finds
straight into them (no D2H copy). Buffers are per stream, so stream order alone makes their reuse
safe; the host never synchronizes inside the pass unless the caller asks for the clusters back
(``collect=True``), and then only on an event recorded S batches earlier. Totals (clusters found,
dropped over the cap) are counted on the GPU.

Tracking mode launches one kernel per frame (the frames depend on each other); a batch's first
launch waits on an event after the previous batch's last launch, so copies still overlap.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from clusterbench.errors import EnvironmentFailure, InputError
from clusterbench.workload import build
from clusterbench.workload.layout import FrameClusters, read_slots, value_dtype
from clusterbench.workload.params import WorkloadParams
from clusterbench.workload.synth import FrameSet

_H2D = 1  # cudaMemcpyHostToDevice
_D2H = 2  # cudaMemcpyDeviceToHost
_HOST_ALLOC_PORTABLE = 1  # cudaHostAllocPortable
_HOST_ALLOC_MAPPED = 2  # cudaHostAllocMapped
PEDESTAL_CHUNK = 100  # dark frames uploaded per pedestal step


class HostBuffer:
    """Pinned (optionally mapped) host memory with a NumPy view; freed explicitly by close()."""

    def __init__(self, nbytes: int, mapped: bool = False) -> None:
        import cupy

        rt = cupy.cuda.runtime
        flags = _HOST_ALLOC_PORTABLE | (_HOST_ALLOC_MAPPED if mapped else 0)
        self.nbytes = int(nbytes)
        self.ptr = int(rt.hostAlloc(max(self.nbytes, 1), flags))
        self.device_ptr = 0
        if mapped:
            try:
                self.device_ptr = int(rt.hostGetDevicePointer(self.ptr, 0))
            except AttributeError:  # with unified addressing the mapped pointer is the host pointer
                self.device_ptr = self.ptr
        self.array = np.ctypeslib.as_array((ctypes.c_uint8 * max(self.nbytes, 1)).from_address(self.ptr))[: self.nbytes]

    def close(self) -> None:
        if self.ptr:
            import cupy

            cupy.cuda.runtime.freeHost(self.ptr)
            self.ptr = 0


@dataclass(frozen=True, slots=True)
class PassOutput:
    frames: int
    clusters_found: int
    clusters_dropped: int
    wall_s: float
    clusters: tuple[FrameClusters, ...] | None  # per frame, only with collect=True


def _cupy() -> Any:
    try:
        import cupy
    except Exception as exc:  # ImportError or a CUDA library load failure
        raise EnvironmentFailure(f"CuPy is not importable: {exc}",
                                 hint="install the gpu extra (pip install -e '.[gpu]') on a machine with CUDA") from None
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        raise EnvironmentFailure(f"no CUDA device: {exc}", hint="run on a machine with an NVIDIA GPU and driver") from None
    if n < 1:
        raise EnvironmentFailure("no CUDA device found", hint="run on a machine with an NVIDIA GPU and driver")
    return cupy


def _allow_shared(kernel: Any, nbytes: int) -> None:
    """Opt in to more than 48 KiB of dynamic shared memory for a kernel."""
    try:
        kernel.max_dynamic_shared_size_bytes = nbytes
    except AttributeError:
        import cupy

        cupy.cuda.driver.funcSetAttribute(kernel.kernel.ptr, 8, nbytes)  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


class Pipeline:
    """GPU resources for one WorkloadParams: buffers, streams, compiled kernels, pedestal state."""

    def __init__(self, params: WorkloadParams, frames: FrameSet, strip: int | None = None,
                 frozen_kernel: str | None = None, tile_rows: int | None = None) -> None:
        """``strip`` (tests) forces the strip height; ``frozen_kernel`` picks "strip" or "twophase" for
        frozen mode (internal: tests and the benchmark run both); ``tile_rows`` overrides the two-phase
        classify tile height (benchmark)."""
        kernel = build.DEFAULT_FROZEN_KERNEL if frozen_kernel is None else frozen_kernel
        if kernel not in build.FROZEN_KERNELS:
            raise InputError(f"unknown frozen kernel {kernel!r}", hint=f"use one of {', '.join(build.FROZEN_KERNELS)}")
        if tile_rows is not None and (tile_rows < build.CLASSIFY_WARPS or tile_rows % build.CLASSIFY_WARPS):
            raise InputError(f"classify tile rows must be a positive multiple of {build.CLASSIFY_WARPS}, got {tile_rows}",
                             hint="use e.g. 16 or 32")
        self.frozen_kernel = kernel
        self.twophase = params.pedestal == "frozen" and kernel == "twophase"
        cp = _cupy()
        self.cp = cp
        self.p = params
        self.frames = frames
        self.T = value_dtype(params.pedestal_dtype)
        self.npix = params.rows * params.cols
        self.fb = params.frame_bytes
        self.slot_bytes = params.slot_bytes
        self.pool_n = len(frames.pool)
        if self.pool_n < 1:
            raise InputError("the frame pool is empty", hint="pass more data frames")
        itemsize = self.T.itemsize
        self.tile_rows = build.classify_tile_rows(params.pedestal_dtype) if tile_rows is None else tile_rows
        if self.twophase:
            cls_smem = build.classify_shared_bytes(self.tile_rows, params.cluster, itemsize)
            if cls_smem > build.STATIC_SMEM_MAX_BYTES:
                raise InputError(f"a classify tile of {self.tile_rows} rows needs {cls_smem} B of shared memory at "
                                 f"{params.cluster}x{params.cluster} {params.pedestal_dtype}, over "
                                 f"{build.STATIC_SMEM_MAX_BYTES} B", hint="use fewer tile rows")
        self._host: list[HostBuffer] = []
        # The pool must be pinned for asynchronous H2D: copy it unless it already is.
        self.pool_buf = self._pinned(self.pool_n * self.fb)
        pool_view = self.pool_buf.array.view(np.uint16).reshape(self.pool_n, params.rows, params.cols)
        pool_view[...] = frames.pool
        self.pool = pool_view

        mod = build.load_module(params.pedestal_dtype, params.cluster, tile_rows)
        self.k_acc = mod.get_function("pedestal_accumulate")
        self.k_fin = mod.get_function("pedestal_finish")
        self.k_frozen = mod.get_function("find_frozen")
        self.k_track = mod.get_function("find_tracking")
        self.k_classify = mod.get_function("frozen_classify")
        self.k_compact = mod.get_function("frozen_compact")
        if strip is not None:  # tests: force several strips on a small detector
            self.strip = min(strip, params.rows)
        elif params.pedestal == "frozen":
            self.strip = build.strip_rows(params.rows, params.cols, params.cluster, itemsize)
        else:  # small strips: one block per strip, enough blocks to fill the GPU for one frame
            self.strip = min(params.rows, max(1, 1600 // params.cols))
        self.smem = build.shared_bytes(self.strip, params.cols, params.cluster, itemsize)
        if not self.twophase and self.smem > build.SMEM_MAX_BYTES:
            raise InputError(
                f"a {params.cols}-column detector needs {self.smem} B of shared memory per block at "
                f"{params.cluster}x{params.cluster} {params.pedestal_dtype}, over the {build.SMEM_MAX_BYTES} B limit",
                hint="use fewer columns, a smaller cluster or a float32 pedestal")
        if not self.twophase and self.smem > 48 * 1024:
            for k in (self.k_frozen, self.k_track):
                _allow_shared(k, self.smem)
        # two-phase geometry: mask words per row, classify tiles per frame
        self.wpr = -(-params.cols // build.CLASSIFY_TILE_COLS)
        self.mask_words = build.mask_words(params.rows, params.cols)
        self.tiles = self.wpr * -(-params.rows // self.tile_rows)
        self.fpb: int | None = None  # None: build.classify_frames_per_block per launch; the benchmark may pin one
        self.sm_count = cp.cuda.Device().attributes["MultiProcessorCount"]
        groups = params.batch  # the worst case, one frame per block
        if self.twophase and self.tiles * groups >= 2**31:
            raise InputError(f"{self.tiles} tiles x {groups} frame groups exceed the CUDA grid limit",
                             hint="use a smaller batch")

        B, S = params.batch, params.streams
        self.streams = [cp.cuda.Stream(non_blocking=True) for _ in range(S)]
        self.d_in = [cp.empty((B, params.rows, params.cols), cp.uint16) for _ in range(S)]
        zerocopy = params.transfer == "zerocopy"
        self.h_out = [self._pinned(B * self.slot_bytes, mapped=zerocopy) for _ in range(S)]
        self.d_out = None if zerocopy else [cp.empty(B * self.slot_bytes, cp.uint8) for _ in range(S)]
        self.d_mask = [cp.empty(B * self.mask_words, cp.uint32) for _ in range(S)] if self.twophase else None
        self.totals = cp.zeros(2, cp.uint64)
        self.sum = cp.zeros(self.npix, cp.float64)
        self.sum2 = cp.zeros(self.npix, cp.float64)
        self.mean = [cp.zeros(self.npix, self.T), cp.zeros(self.npix, self.T)]
        self.thr = cp.zeros(self.npix, self.T)
        self.inv = np.float64(1.0) / np.float64(params.pedestal_frames)
        if params.pedestal == "tracking":
            self.nstrips = -(-params.rows // self.strip)
            self.strip_cap = min(params.cap, self.strip * params.cols)
            self.scratch = cp.empty(self.nstrips * self.strip_cap * params.cluster_bytes, cp.uint8)
            self.strip_counts = cp.zeros(self.nstrips, cp.uint32)
            self.done = cp.zeros(1, cp.uint32)
            if 4 * (2 * self.nstrips + 1) > self.smem:  # the gather keeps counts and offsets in the tile
                raise InputError(f"{self.nstrips} strips of {self.strip} rows are too many for the tracking gather",
                                 hint="use fewer rows")
        self._saved_sums: tuple[Any, Any] | None = None
        self._graphs: dict[tuple[int, int, int], Any] = {}
        self.mean_index = 0  # which of self.mean holds the current mean (tracking ping-pong)

    # -- memory ---------------------------------------------------------------------------------
    def _pinned(self, nbytes: int, mapped: bool = False) -> HostBuffer:
        buf = HostBuffer(nbytes, mapped=mapped)
        self._host.append(buf)
        return buf

    def close(self) -> None:
        self.cp.cuda.Device().synchronize()
        for buf in self._host:
            buf.close()
        self._host.clear()

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- pedestal ---------------------------------------------------------------------------------
    def compute_pedestal(self) -> None:
        """sum/sum2 of the dark frames (float64, on the GPU), then mean and threshold."""
        cp, p = self.cp, self.p
        self.sum.fill(0)
        self.sum2.fill(0)
        grid = (-(-self.npix // 256),)
        dark = self.frames.dark
        for start in range(0, len(dark), PEDESTAL_CHUNK):
            chunk = cp.asarray(np.ascontiguousarray(dark[start:start + PEDESTAL_CHUNK]))
            self.k_acc(grid, (256,), (chunk, np.int32(len(chunk)), np.int32(self.npix), self.sum, self.sum2))
        self._saved_sums = (self.sum.copy(), self.sum2.copy())
        self._finish_pedestal()

    def _finish_pedestal(self) -> None:
        grid = (-(-self.npix // 256),)
        self.k_fin(grid, (256,), (self.sum, self.sum2, np.int32(self.p.pedestal_frames), np.float64(self.p.nsigma),
                                  np.int32(self.npix), self.mean[0], self.thr))
        self.mean_index = 0

    def reset_pedestal(self) -> None:
        """Back to the state right after compute_pedestal() (tracking mode changes it)."""
        if self._saved_sums is None:
            raise RuntimeError("compute_pedestal() first")
        self.sum[...] = self._saved_sums[0]
        self.sum2[...] = self._saved_sums[1]
        self._finish_pedestal()

    def pedestal_host(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(sum, sum2, mean, thr) of the current state, as host arrays shaped like a frame."""
        shape = (self.p.rows, self.p.cols)
        return (self.sum.get().reshape(shape), self.sum2.get().reshape(shape),
                self.mean[self.mean_index].get().reshape(shape), self.thr.get().reshape(shape))

    # -- the pass ---------------------------------------------------------------------------------
    def _h2d(self, s: int, start: int, n: int) -> None:
        """Frames start..start+n (global numbering, pool reused cyclically) into d_in[s]."""
        rt = self.cp.cuda.runtime
        dst = self.d_in[s].data.ptr
        done = 0
        while done < n:
            src_idx = (start + done) % self.pool_n
            cnt = min(n - done, self.pool_n - src_idx)
            rt.memcpyAsync(dst + done * self.fb, self.pool_buf.ptr + src_idx * self.fb, cnt * self.fb, _H2D,
                           self.streams[s].ptr)
            done += cnt

    def _slots_ptr(self, s: int) -> int:
        return self.h_out[s].device_ptr if self.d_out is None else self.d_out[s].data.ptr

    def _launch(self, s: int, n: int, start: int) -> None:
        p = self.p
        stream = self.streams[s]
        with stream:
            if self.twophase:
                fpb = self.fpb or build.classify_frames_per_block(n, self.tiles, self.sm_count)
                self.k_classify((self.tiles * -(-n // fpb),), (build.CLASSIFY_TILE_COLS, build.CLASSIFY_WARPS),
                                (self.d_in[s], np.int32(n), np.int32(fpb), self.mean[0], self.thr, self.d_mask[s],
                                 np.int32(p.rows), np.int32(p.cols), np.int32(self.wpr), np.int32(self.tiles)))
                self.k_compact((n,), (build.COMPACT_THREADS,),
                               (self.d_mask[s], self.d_in[s], np.int32(n), self.mean[0],
                                np.uint64(self._slots_ptr(s)), np.int64(self.slot_bytes), self.totals,
                                np.int32(p.rows), np.int32(p.cols), np.int32(self.wpr), np.int32(p.cap)))
                return
            if p.pedestal == "frozen":
                self.k_frozen((n,), (build.THREADS_PER_BLOCK,),
                              (self.d_in[s], np.int32(n), self.mean[0], self.thr,
                               np.uint64(self._slots_ptr(s)), np.int64(self.slot_bytes), self.totals,
                               np.int32(p.rows), np.int32(p.cols), np.int32(self.strip), np.int32(p.cap)),
                              shared_mem=self.smem)
                return
        # Tracking: one launch per frame. Issued from Python they cost ~45 µs each, so a batch's
        # launches are captured once into a CUDA graph per (stream, frames, mean parity) and replayed.
        key = (s, n, self.mean_index)
        graph = self._graphs.get(key)
        if graph is None:
            parity = self.mean_index
            stream.begin_capture()
            try:
                self._track_frames(s, n)
            finally:
                graph = stream.end_capture()
            self.mean_index = parity
            self._graphs[key] = graph
        graph.launch(stream)
        self.mean_index = (self.mean_index + n) % 2

    def _track_frames(self, s: int, n: int) -> None:
        p = self.p
        with self.streams[s]:
            in_ptr = self.d_in[s].data.ptr
            out_ptr = self._slots_ptr(s)
            for i in range(n):
                cur = self.mean[self.mean_index]
                nxt = self.mean[1 - self.mean_index]
                self.k_track((self.nstrips,), (build.THREADS_PER_BLOCK,),
                             (np.uint64(in_ptr + i * self.fb), cur, nxt, self.sum, self.sum2, self.thr, self.inv,
                              self.scratch, self.strip_counts, self.done, np.int32(self.strip_cap),
                              np.uint64(out_ptr + i * self.slot_bytes), self.totals,
                              np.int32(p.rows), np.int32(p.cols), np.int32(self.strip), np.int32(p.cap)),
                             shared_mem=self.smem)
                self.mean_index = 1 - self.mean_index

    def run_pass(self, n_frames: int | None = None, collect: bool = False) -> PassOutput:
        """Issue every batch, wait once at the end. ``collect`` parses each frame's slot (tests)."""
        cp, p = self.cp, self.p
        rt = cp.cuda.runtime
        F = p.frames if n_frames is None else n_frames
        B, S = p.batch, p.streams
        tracking = p.pedestal == "tracking"
        self.totals.fill(0)
        pending: list[tuple[Any, int, int] | None] = [None] * S
        collected: list[FrameClusters] = []
        prev_kernel = None
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for b, start in enumerate(range(0, F, B)):
            n = min(B, F - start)
            s = b % S
            stream = self.streams[s]
            if pending[s] is not None:  # collect only: recycle this stream's host slots
                collected.extend(self._drain(s, pending[s]))
                pending[s] = None
            self._h2d(s, start, n)
            if tracking and prev_kernel is not None:
                stream.wait_event(prev_kernel)
            self._launch(s, n, start)
            if tracking:
                prev_kernel = cp.cuda.Event(disable_timing=True)
                prev_kernel.record(stream)
            if self.d_out is not None:
                rt.memcpyAsync(self.h_out[s].ptr, self.d_out[s].data.ptr, n * self.slot_bytes, _D2H, stream.ptr)
            if collect:
                ev = cp.cuda.Event(disable_timing=True)
                ev.record(stream)
                pending[s] = (ev, start, n)
        cp.cuda.Device().synchronize()
        wall = time.perf_counter() - t0
        if collect:
            for _start, i in sorted((q[1], i) for i, q in enumerate(pending) if q is not None):
                collected.extend(self._drain(i, pending[i]))
        found, dropped = (int(v) for v in self.totals.get())
        return PassOutput(frames=F, clusters_found=found, clusters_dropped=dropped, wall_s=wall,
                          clusters=tuple(collected) if collect else None)

    def _drain(self, s: int, item: tuple[Any, int, int]) -> tuple[FrameClusters, ...]:
        ev, _start, n = item
        ev.synchronize()
        return read_slots(self.h_out[s].array, n, self.p.cluster, self.p.cap, self.p.pedestal_dtype)

    # -- kernel timing (benchmark) ------------------------------------------------------------------
    def time_kernel(self, n_frames: int, repeats: int = 5) -> float:
        """Median kernel-only µs per frame over ``repeats`` launches of n_frames (<= batch) on stream 0,
        timed with CUDA events; the frames are loaded once beforehand. Tracking restores its pedestal."""
        cp = self.cp
        n = min(n_frames, self.p.batch)
        self._h2d(0, 0, n)
        stream = self.streams[0]
        self._launch(0, n, 0)  # warm-up
        times = []
        for _ in range(repeats):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record(stream)
            self._launch(0, n, 0)
            e1.record(stream)
            e1.synchronize()
            times.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3 / n)
        if self.p.pedestal == "tracking":
            self.reset_pedestal()
        cp.cuda.Device().synchronize()
        return float(np.median(times))
