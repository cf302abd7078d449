"""The GPU pipeline: pinned host buffers, S streams, batches of B frames.

Frozen mode runs one of three kernels (``frozen_kernel``): "twophase" (the default: frozen_classify
then frozen_compact), "slide" (frozen_slide, a register sliding window with no block barrier per frame,
then frozen_compact) or "strip" (find_frozen, the original one-launch kernel).

Per batch b (on stream b % S): H2D of its frames from the pinned pool into that stream's device
buffer, the kernel, then (``copy`` mode) one D2H of the batch's slots, copied whole. In ``zerocopy``
mode the output slots live in mapped pinned host memory and the kernel writes the clusters it finds
straight into them (no D2H copy). Buffers are per stream, so stream order alone makes their reuse
safe; the host never synchronizes inside the pass unless the caller asks for the clusters back
(``collect=True``), and then only on an event recorded S batches earlier. Totals (clusters found,
dropped over the cap) are counted on the GPU.

``delay_us_per_frame`` (a test tool, default 0) adds a spin kernel after each batch's kernels on its
stream: frames x the delay on the GPU's clock, touching no memory (docs/workload.md).

Tracking mode has two paths (``tracking_kernel``). "graph" (the default) launches one kernel per
frame, replayed from a CUDA graph per batch. "coop" and "flags" launch one persistent kernel per
batch (kernels/tracking_persistent.cu: one resident block per tile, the tracking state in registers,
one dependency step per frame: a cooperative grid.sync() or per-tile flags between neighbours), then
frozen_compact writes the slots from the per-frame emit masks and per-frame means. In both paths a
batch's tracking work waits on an event after the previous batch's, so copies still overlap.
"""

from __future__ import annotations

import ctypes
import functools
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from clusterbench.errors import EnvironmentFailure, InputError
from clusterbench.workloads.cupy import build
from clusterbench.model import params as params_mod
from clusterbench.model.layout import FrameClusters, read_slots, value_dtype
from clusterbench.model.params import WorkloadParams
from clusterbench.workloads.synth import FrameSet

_H2D = 1  # cudaMemcpyHostToDevice
_D2H = 2  # cudaMemcpyDeviceToHost
_HOST_ALLOC_PORTABLE = 1  # cudaHostAllocPortable
_HOST_ALLOC_MAPPED = 2  # cudaHostAllocMapped
PEDESTAL_CHUNK = 100  # dark frames uploaded per pedestal step

# Tracking-mode kernels: "graph" (one launch per frame from a CUDA graph, strip blocks, last-block gather),
# "coop" (one persistent cooperative launch per batch, grid.sync() per frame) and "flags" (the same
# kernel, with per-tile flags between neighbouring blocks instead of the grid-wide barrier).
TRACKING_KERNELS = params_mod.TRACKING_KERNELS  # ("graph", "coop", "flags"): the params record validates them
# The default where the persistent kernel's tiles can all be resident (else "graph"): on the H200,
# 2026-12-01, coop took 3.86 µs/frame at 3x3 f32 against graph's 12.48, 8.69 against 23.39 at 9x9, and
# matched graph byte for byte in both precisions (docs/workload.md, "Tracking at the link: measured").
DEFAULT_TRACKING_KERNEL = "coop"
TRACK_KERNEL_FILE = "tracking_persistent.cu"
SPIN_KERNEL_FILE = "spin_delay.cu"  # delay_us_per_frame: a deliberate delay for testing compare
TRACK_TILE_COLS = 32  # one warp across a persistent tile (fixed in the kernel)
TRACK_PIXELS_PER_THREAD = 2  # own pixels of one column per thread: a block has tile_rows / 2 warps (CB_PBY)
# CB_PTH default: 13 x 20 = 260 tiles of 10 warps on 400x400, 2 resident blocks per SM on 132 SMs. On the H200,
# 2026-12-01 (benchmarks/bench_ablate.py), 20-row tiles beat 16-row ones in every case measured: 3.15 against
# 3.40 µs/frame at 3x3 f32, 4.16 against 4.59 at 9x9 f32 (docs/workload.md, "Step 5").
TRACK_TILE_ROWS = 20
TRACK_MAX_TILE_ROWS = 64  # 32 warps, 1024 threads per block
TRACK_MAX_THREADS_PER_SM = 1024  # resident persistent threads per SM at most: 64 registers each (the kernel needs 48-80)


# Frozen-mode kernels: build.FROZEN_KERNELS ("strip", "twophase") plus "slide", the register sliding window
# (frozen_slide in cluster_finder.cu: no block barrier per frame; two columns per lane, mask words of about
# 32 - H columns, slide_geometry).
FROZEN_KERNELS = params_mod.FROZEN_KERNELS  # build.FROZEN_KERNELS plus "slide"
assert FROZEN_KERNELS == tuple(build.FROZEN_KERNELS) + ("slide",)
DEFAULT_FROZEN_KERNEL = build.DEFAULT_FROZEN_KERNEL  # "twophase": float64's default from 5x5 up


def default_frozen_kernel(pedestal_dtype: str, cluster: int) -> str:
    """The measured default frozen kernel (docs/workload.md, "Step 6"; one H200, 1 stream, CUDA events):
    "slide" for a float32 pedestal (3x3 0.42 µs per frame against twophase's 1.09, 9x9 0.76 against 1.75)
    and for float64 at 3x3 (0.69 against 1.35); twophase for float64 from 5x5 up (5x5: 2.27 against 1.81)."""
    return DEFAULT_FROZEN_KERNEL if pedestal_dtype == "float64" and cluster > 3 else "slide"


SLIDE_WARPS = 8  # CB_SNW up to 5x5: warps per frozen_slide block, each walking its own frames of the block's tile
SLIDE_MAX_FRAMES_PER_BLOCK = 32  # the tile's mean and thresholds are loaded once for these frames
SLIDE_TILE_ROWS = 16  # CB_STH: output rows per frozen_slide tile (docs/workload.md, "Step 4" to "Step 6")


def slide_tile_rows(cluster: int) -> int:
    """CB_STH: output rows per frozen_slide tile (16: a 7x7-and-up warp keeps its 16 + 2H rows of values
    in shared memory, 48 KiB of static shared memory per block at most)."""
    return SLIDE_TILE_ROWS


def slide_warps(pedestal_dtype: str, cluster: int) -> int:
    """CB_SNW: warps per frozen_slide block. From 7x7 up each warp keeps (16 + 2H) x 64 values in shared
    memory, so fewer warps fit the 48 KiB of static shared memory: 4 in float32, 1 in float64."""
    if cluster <= 5:
        return SLIDE_WARPS
    return 4 if pedestal_dtype == "float32" else 1


def slide_geometry(rows: int, cols: int, cluster: int, tile_rows: int | None = None) -> tuple[int, int, int]:
    """(columns per mask word, mask words per row, tiles) of frozen_slide. A warp spans 64 columns, two
    per lane: 2 * ow output columns (two mask words) and H halo columns on each side, H + 1 for an odd H
    (so that each lane's pair is one aligned 32-bit load). ``tile_rows`` overrides CB_STH (benchmark)."""
    h = cluster // 2
    ow = 32 - h - (h & 1)
    tiles_x = -(-cols // (2 * ow))
    return ow, 2 * tiles_x, tiles_x * -(-rows // (tile_rows or slide_tile_rows(cluster)))


def slide_frames_per_block(n_frames: int, tiles: int, sm_count: int) -> int:
    """Frames per frozen_slide block: up to SLIDE_MAX_FRAMES_PER_BLOCK, but at least 8 blocks per SM in a
    launch when the batch allows it (any value >= 1 is exact)."""
    by_occupancy = (n_frames * tiles) // max(1, sm_count * 8)
    return max(1, min(SLIDE_MAX_FRAMES_PER_BLOCK, by_occupancy))


def main_compile_options(pedestal_dtype: str, cluster: int, tile_rows: int | None = None,
                         slide_rows: int | None = None, frame: tuple[int, int] | None = None) -> tuple[str, ...]:
    """cluster_finder.cu's options: build.compile_options plus frozen_slide's tile height and warps, and the
    frame's (rows, cols) when given, so that frozen_slide's row offsets are immediates (and an even width
    reads a lane's two columns in one 32-bit load)."""
    shape = (f"-DCB_SROWS={frame[0]}", f"-DCB_SCOLS={frame[1]}") if frame else ()
    return build.compile_options(pedestal_dtype, cluster, tile_rows) + (
        f"-DCB_STH={slide_rows or slide_tile_rows(cluster)}", f"-DCB_SNW={slide_warps(pedestal_dtype, cluster)}") + shape


def check_defines(defines: tuple[str, ...]) -> tuple[str, ...]:
    """Extra -D macros for the benchmark's kernel variants (register caps, leave-one-out timings): only
    ``-DCB_NAME=integer`` is accepted, so nothing else can reach the compiler."""
    for d in defines:
        name, _, value = d[2:].partition("=") if d.startswith("-D") else ("", "", "")
        if not (name.startswith("CB_") and name[3:].replace("_", "").isalnum() and value.lstrip("-").isdigit()):
            raise InputError(f"bad kernel define {d!r}", hint="use -DCB_NAME=integer")
    return tuple(defines)


@functools.lru_cache(maxsize=None)
def _main_module(pedestal_dtype: str, cluster: int, tile_rows: int | None = None, slide_rows: int | None = None,
                 defines: tuple[str, ...] = (), frame: tuple[int, int] | None = None) -> Any:
    import cupy

    source = build.kernel_source(build.KERNEL_FILE)
    return cupy.RawModule(code=source, options=main_compile_options(pedestal_dtype, cluster, tile_rows, slide_rows,
                                                                    frame) + defines)


def persistent_warps(tile_rows: int) -> int:
    """Warps per persistent block (CB_PBY): each thread owns TRACK_PIXELS_PER_THREAD pixels of one column."""
    return tile_rows // TRACK_PIXELS_PER_THREAD


def persistent_geometry(rows: int, cols: int, tile_rows: int = TRACK_TILE_ROWS) -> tuple[int, int, int]:
    """(tiles per row, tile rows, tiles) of the persistent tracking kernel: one block per tile of
    TRACK_TILE_COLS x tile_rows own pixels. Every block must be resident at once."""
    if not (TRACK_PIXELS_PER_THREAD <= tile_rows <= TRACK_MAX_TILE_ROWS) or tile_rows % TRACK_PIXELS_PER_THREAD:
        raise InputError(f"persistent tracking tile rows must be an even number from {TRACK_PIXELS_PER_THREAD} to "
                         f"{TRACK_MAX_TILE_ROWS}, got {tile_rows}", hint="use 16 or 20")
    wpr = -(-cols // TRACK_TILE_COLS)
    trows = -(-rows // tile_rows)
    return wpr, trows, wpr * trows


def persistent_min_blocks(tiles: int, sm_count: int) -> int:
    """CB_PMINB: the resident blocks per SM the register allocation must allow so that every tile is
    resident at once (400x400 on 132 SMs: 325 tiles of 16 rows need 3, 260 of 20 rows 2, 130 of 40 rows 1)."""
    return max(1, -(-tiles // max(1, sm_count)))


def persistent_fits(tiles: int, tile_rows: int, sm_count: int) -> bool:
    """Whether every tile can be resident: at most TRACK_MAX_THREADS_PER_SM persistent threads per SM."""
    return persistent_min_blocks(tiles, sm_count) * 32 * persistent_warps(tile_rows) <= TRACK_MAX_THREADS_PER_SM


def persistent_shared_bytes(pedestal_dtype: str, cluster: int, tile_rows: int = TRACK_TILE_ROWS) -> int:
    """Static shared memory of track_persistent with its default options: the values of the tile with halo,
    the row maxima (not at 3x3 f32, CB_PDIRECT), the row sums and absolute row sums (from 5x5 up, CB_PSEP)
    and the raw values of the own pixels."""
    item = 4 if pedestal_dtype == "float32" else 8
    h = cluster // 2
    trows, tcols = tile_rows + 2 * h, TRACK_TILE_COLS + 2 * h
    psep = cluster >= 5
    pdirect = cluster <= 3 and item == 4 and not psep
    # the one-row placeholders of the arrays a build does not use are removed by the compiler
    return (trows * tcols + (0 if pdirect else trows) * TRACK_TILE_COLS
            + 2 * (trows if psep else 0) * TRACK_TILE_COLS) * item + tile_rows * TRACK_TILE_COLS * 2


def check_persistent_shared(pedestal_dtype: str, cluster: int, tile_rows: int) -> None:
    """InputError, not a compiler traceback, when a tile height needs more than 48 KiB of static shared
    memory (float64 9x9 at 40 rows needs 54,784 B)."""
    need = persistent_shared_bytes(pedestal_dtype, cluster, tile_rows)
    if need > build.STATIC_SMEM_MAX_BYTES:
        raise InputError(f"persistent tracking tiles of {tile_rows} rows need {need:,} B of shared memory at "
                         f"{cluster}x{cluster} {pedestal_dtype}, over {build.STATIC_SMEM_MAX_BYTES:,} B",
                         hint=f"use the default {TRACK_TILE_ROWS}-row tiles or fewer rows")


def persistent_compile_options(pedestal_dtype: str, cluster: int, tile_rows: int = TRACK_TILE_ROWS,
                               min_blocks: int = 1) -> tuple[str, ...]:
    """NVRTC options of tracking_persistent.cu: the workload's options (-DCB_T, -DCB_K, --fmad=false)
    plus its own geometry and register bound."""
    return build.compile_options(pedestal_dtype, cluster) + (
        f"-DCB_PTH={tile_rows}", f"-DCB_PBY={persistent_warps(tile_rows)}", f"-DCB_PMINB={min_blocks}")


def persistent_mean_bytes(batch: int, rows: int, cols: int, itemsize: int) -> int:
    """Per stream: one mean per frame of the batch (frame i's values are frame - M_i, read by the compaction)."""
    return batch * rows * cols * itemsize


def choose_kernels(params: WorkloadParams, sm_count: int, frozen_kernel: str | None = None,
                   tracking_kernel: str | None = None, track_tile_rows: int | None = None) -> tuple[str, str]:
    """(frozen kernel, tracking kernel) for a run (pure): an explicit argument, else the params record's
    choice, else the measured default for the pedestal dtype and cluster size (frozen) or "coop" when every persistent tile fits
    resident (persistent_fits), and "graph" when it does not."""
    fk = frozen_kernel or params.frozen_kernel or default_frozen_kernel(params.pedestal_dtype, params.cluster)
    tk = tracking_kernel or params.tracking_kernel
    if tk is None:
        tk = DEFAULT_TRACKING_KERNEL
        if tk != "graph":
            rows = TRACK_TILE_ROWS if track_tile_rows is None else int(track_tile_rows)
            tiles = persistent_geometry(params.rows, params.cols, rows)[2]
            if not persistent_fits(tiles, rows, sm_count):
                tk = "graph"
    return fk, tk


def check_coresident(tiles: int, blocks_per_sm: int, sm_count: int) -> None:
    """The persistent kernel waits on other blocks: all of them must be resident together."""
    if tiles > blocks_per_sm * sm_count:
        raise InputError(f"the persistent tracking kernel needs {tiles} resident blocks, the GPU holds "
                         f"{blocks_per_sm} per SM x {sm_count} SMs = {blocks_per_sm * sm_count}",
                         hint="use taller tiles (track_tile_rows=32) or tracking_kernel=\"graph\" for a detector this large")


@functools.lru_cache(maxsize=None)
def _persistent_kernel(pedestal_dtype: str, cluster: int, tile_rows: int, min_blocks: int,
                       defines: tuple[str, ...] = ()) -> Any:
    """track_persistent as a cooperative RawKernel (CuPy launches it with cuLaunchCooperativeKernel)."""
    import cupy

    source = build.kernel_source(TRACK_KERNEL_FILE)
    return cupy.RawKernel(source, "track_persistent",
                          options=persistent_compile_options(pedestal_dtype, cluster, tile_rows, min_blocks) + defines,
                          enable_cooperative_groups=True)


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


def require_cupy() -> Any:
    """CuPy with at least one CUDA device, or an EnvironmentFailure that says what is missing."""
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
                 frozen_kernel: str | None = None, tile_rows: int | None = None,
                 tracking_kernel: str | None = None, track_tile_rows: int | None = None,
                 slide_rows: int | None = None, defines: tuple[str, ...] = ()) -> None:
        """``strip`` (tests) forces the strip height; ``frozen_kernel`` picks "strip", "twophase" or "slide" for
        frozen mode (internal: tests and the benchmark run both); ``tile_rows`` overrides the two-phase
        classify tile height (benchmark); ``tracking_kernel`` picks "graph", "coop" or "flags" for tracking
        mode; ``track_tile_rows`` the persistent kernel's tile height. Unset, each comes from the params
        record, else from :func:`choose_kernels` (the measured defaults). ``slide_rows`` (frozen_slide's
        CB_STH) and ``defines`` (extra -DCB_*=int macros for both kernel files) are for the benchmark's
        variants only."""
        for name, given, known in (("tracking", tracking_kernel, TRACKING_KERNELS), ("frozen", frozen_kernel, FROZEN_KERNELS)):
            if given is not None and given not in known:  # refused before any GPU call
                raise InputError(f"unknown {name} kernel {given!r}", hint=f"use one of {', '.join(known)}")
        if tile_rows is not None and (tile_rows < build.CLASSIFY_WARPS or tile_rows % build.CLASSIFY_WARPS):
            raise InputError(f"classify tile rows must be a positive multiple of {build.CLASSIFY_WARPS}, got {tile_rows}",
                             hint="use e.g. 16 or 32")
        self.defines = check_defines(tuple(defines))
        if slide_rows is not None and not 1 <= slide_rows <= 32:
            raise InputError(f"slide tile rows must be 1..32, got {slide_rows}", hint="use e.g. 8 or 16")
        self._with_compact = True  # time_kernel(compact=False) times the find kernel alone (benchmark)
        cp = require_cupy()
        fk, tk = choose_kernels(params, cp.cuda.Device().attributes["MultiProcessorCount"], frozen_kernel,
                                tracking_kernel, track_tile_rows)
        if tk not in TRACKING_KERNELS:
            raise InputError(f"unknown tracking kernel {tk!r}", hint=f"use one of {', '.join(TRACKING_KERNELS)}")
        self.tracking_kernel = tk
        self.persistent = params.pedestal == "tracking" and tk != "graph"
        self.track_tile_rows = TRACK_TILE_ROWS if track_tile_rows is None else int(track_tile_rows)
        kernel = fk
        if kernel not in FROZEN_KERNELS:
            raise InputError(f"unknown frozen kernel {kernel!r}", hint=f"use one of {', '.join(FROZEN_KERNELS)}")
        self.frozen_kernel = kernel
        self.twophase = params.pedestal == "frozen" and kernel == "twophase"
        self.slide = params.pedestal == "frozen" and kernel == "slide"
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

        mod = _main_module(params.pedestal_dtype, params.cluster, tile_rows, slide_rows, self.defines,
                           (params.rows, params.cols))
        self.k_acc = mod.get_function("pedestal_accumulate")
        self.k_fin = mod.get_function("pedestal_finish")
        self.k_frozen = mod.get_function("find_frozen")
        self.k_track = mod.get_function("find_tracking")
        self.k_classify = mod.get_function("frozen_classify")
        self.k_compact = mod.get_function("frozen_compact")
        self.k_slide = mod.get_function("frozen_slide")
        if strip is not None:  # tests: force several strips on a small detector
            self.strip = min(strip, params.rows)
        elif params.pedestal == "frozen":
            self.strip = build.strip_rows(params.rows, params.cols, params.cluster, itemsize)
        else:  # small strips: one block per strip, enough blocks to fill the GPU for one frame
            self.strip = min(params.rows, max(1, 1600 // params.cols))
        self.smem = build.shared_bytes(self.strip, params.cols, params.cluster, itemsize)
        if not (self.twophase or self.slide or self.persistent) and self.smem > build.SMEM_MAX_BYTES:
            raise InputError(
                f"a {params.cols}-column detector needs {self.smem} B of shared memory per block at "
                f"{params.cluster}x{params.cluster} {params.pedestal_dtype}, over the {build.SMEM_MAX_BYTES} B limit",
                hint="use fewer columns, a smaller cluster or a float32 pedestal")
        if not (self.twophase or self.slide or self.persistent) and self.smem > 48 * 1024:
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
        # frozen_slide: mask words of s_ow columns, s_wpr per row
        self.s_ow, self.s_wpr, self.s_tiles = slide_geometry(params.rows, params.cols, params.cluster, slide_rows)
        mask_words = params.rows * self.s_wpr if self.slide else self.mask_words
        if self.slide and self.s_tiles * groups >= 2**31:
            raise InputError(f"{self.s_tiles} tiles x {groups} frame groups exceed the CUDA grid limit",
                             hint="use a smaller batch")
        self.d_mask = ([cp.empty(B * mask_words, cp.uint32) for _ in range(S)]
                       if (self.twophase or self.slide) else None)
        self.totals = cp.zeros(2, cp.uint64)
        self.sum = cp.zeros(self.npix, cp.float64)
        self.sum2 = cp.zeros(self.npix, cp.float64)
        self.mean = [cp.zeros(self.npix, self.T), cp.zeros(self.npix, self.T)]
        self.thr = cp.zeros(self.npix, self.T)
        self.inv = np.float64(1.0) / np.float64(params.pedestal_frames)
        self._track_event: Any = None  # recorded after a batch's tracking work (the next batch waits on it)
        # delay_us_per_frame: a spin kernel after each batch's kernels (run_pass only, not time_kernel)
        self.delay_ns_per_frame = params.delay_us_per_frame * 1000.0
        self.k_spin: Any = None
        if self.persistent:
            self._init_persistent(cp, params, B, S)
        elif params.pedestal == "tracking":
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

    def _init_persistent(self, cp: Any, params: WorkloadParams, B: int, S: int) -> None:
        self.p_wpr, self.p_trows, self.p_tiles = persistent_geometry(params.rows, params.cols, self.track_tile_rows)
        if not self.defines:  # kernel variants (benchmark -D macros) may lay out shared memory differently
            check_persistent_shared(params.pedestal_dtype, params.cluster, self.track_tile_rows)
        min_blocks = persistent_min_blocks(self.p_tiles, self.sm_count)
        self.p_warps = persistent_warps(self.track_tile_rows)
        self.k_persist = _persistent_kernel(params.pedestal_dtype, params.cluster, self.track_tile_rows, min_blocks,
                                            self.defines)
        threads = TRACK_TILE_COLS * self.p_warps
        try:
            per_sm = int(cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(self.k_persist.kernel.ptr, threads, 0))
        except Exception:  # the occupancy query needs the compiled function; if it fails, trust CB_PMINB
            per_sm = min_blocks
        check_coresident(self.p_tiles, per_sm, self.sm_count)
        # CuPy's cooperative launch would shrink a too-large grid with only a warning: the check above
        # makes that impossible, since a missing tile would silently lose its pixels.
        self.p_wpr_mask = -(-params.cols // build.CLASSIFY_TILE_COLS)
        assert self.p_wpr_mask == self.p_wpr  # both kernels use one 32-bit mask word per 32 columns
        if self.d_mask is None:
            self.d_mask = [cp.empty(B * self.mask_words, cp.uint32) for _ in range(S)]
        self.p_means = [cp.empty(B * self.npix, self.T) for _ in range(S)]
        self.p_flags = cp.zeros(self.p_tiles, cp.uint32)
        self.p_flag_base = 0  # flags only grow: batch i waits for base + f + 1, no reset between launches

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
        cp = self.cp
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
                self._compact(s, n, self.mean[0], 0, self.wpr, build.CLASSIFY_TILE_COLS)
                return
            if self.slide:
                fpb = self.fpb or slide_frames_per_block(n, self.s_tiles, self.sm_count)
                self.k_slide((self.s_tiles * -(-n // fpb),), (32 * slide_warps(p.pedestal_dtype, p.cluster),),
                             (self.d_in[s], np.int32(n), np.int32(fpb), self.mean[0], self.thr, self.d_mask[s],
                              np.int32(p.rows), np.int32(p.cols), np.int32(self.s_wpr), np.int32(self.s_tiles)))
                self._compact(s, n, self.mean[0], 0, self.s_wpr, self.s_ow)
                return
            if p.pedestal == "frozen":
                self.k_frozen((n,), (build.THREADS_PER_BLOCK,),
                              (self.d_in[s], np.int32(n), self.mean[0], self.thr,
                               np.uint64(self._slots_ptr(s)), np.int64(self.slot_bytes), self.totals,
                               np.int32(p.rows), np.int32(p.cols), np.int32(self.strip), np.int32(p.cap)),
                              shared_mem=self.smem)
                return
        if self.persistent:
            self._launch_persistent(s, n)
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
        self._track_event = self.cp.cuda.Event(disable_timing=True)
        self._track_event.record(stream)

    def _spin(self, s: int, n: int) -> None:
        """The deliberate delay (``delay_us_per_frame``): one thread spins on the GPU's clock for n frames'
        worth after the batch's kernels, on its stream, touching no memory."""
        if self.k_spin is None:
            self.k_spin = self.cp.RawKernel(build.kernel_source(SPIN_KERNEL_FILE), "spin_delay")
        with self.streams[s]:
            self.k_spin((1,), (1,), (np.uint64(round(n * self.delay_ns_per_frame)),))

    def _launch_persistent(self, s: int, n: int) -> None:
        """One persistent launch for the batch's n frames, then frozen_compact over its masks and means.
        The mean is ping-ponged per batch: read mean[i], the last frame's update goes to mean[1 - i]."""
        p = self.p
        stream = self.streams[s]
        cur, nxt = self.mean[self.mean_index], self.mean[1 - self.mean_index]
        sync_mode = 0 if self.tracking_kernel == "coop" else 1
        with stream:
            self.k_persist((self.p_tiles,), (TRACK_TILE_COLS, self.p_warps),
                           (self.d_in[s], np.int32(n), cur, nxt, self.p_means[s], self.sum, self.sum2, self.thr,
                            self.inv, self.d_mask[s], np.int32(p.rows), np.int32(p.cols), np.int32(self.p_wpr),
                            np.int32(self.p_trows), self.p_flags, np.uint32(self.p_flag_base % 2**32),
                            np.int32(sync_mode)))
            self.p_flag_base += n + 1
            self.mean_index = 1 - self.mean_index
            # the next batch's tracking waits for this event only, not for the compaction below
            self._track_event = self.cp.cuda.Event(disable_timing=True)
            self._track_event.record(stream)
            self._compact(s, n, self.p_means[s], self.npix, self.wpr, build.CLASSIFY_TILE_COLS)

    def _compact(self, s: int, n: int, means: Any, mean_stride: int, wpr: int, ow: int) -> None:
        """frozen_compact over stream s's n mask frames (words of ``ow`` columns, ``wpr`` per row) into the
        slots: frame f's values use ``means`` + f * ``mean_stride`` (0: one mean for all; the persistent
        tracking kernel's per-frame means: the frame size). Left out while time_kernel(compact=False) runs."""
        if not self._with_compact:
            return
        p = self.p
        self.k_compact((n,), (build.COMPACT_THREADS,),
                       (self.d_mask[s], self.d_in[s], np.int32(n), means, np.int64(mean_stride),
                        np.uint64(self._slots_ptr(s)), np.int64(self.slot_bytes), self.totals,
                        np.int32(p.rows), np.int32(p.cols), np.int32(wpr), np.int32(ow), np.int32(p.cap)))

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
            if self.delay_ns_per_frame:
                self._spin(s, n)
            if tracking:
                prev_kernel = self._track_event
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
    def time_kernel(self, n_frames: int, repeats: int = 5, compact: bool = True) -> float:
        """Median kernel-only µs per frame over ``repeats`` launches of n_frames (<= batch) on stream 0,
        timed with CUDA events; the frames are loaded once beforehand. Tracking restores its pedestal.
        ``compact=False`` leaves frozen_compact out (two-phase, slide and persistent kernels): the find
        kernel alone, so that the benchmark can split the figure; the slots are then not written."""
        cp = self.cp
        n = min(n_frames, self.p.batch)
        self._h2d(0, 0, n)
        stream = self.streams[0]
        times = []
        self._with_compact = compact
        try:
            self._launch(0, n, 0)  # warm-up
            for _ in range(repeats):
                e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                e0.record(stream)
                self._launch(0, n, 0)
                e1.record(stream)
                e1.synchronize()
                times.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3 / n)
        finally:
            self._with_compact = True
        if self.p.pedestal == "tracking":
            self.reset_pedestal()
        cp.cuda.Device().synchronize()
        return float(np.median(times))
