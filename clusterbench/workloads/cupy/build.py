"""Kernel sources and their compilation (CuPy RawModule over the real .cu files in kernels/).

``kernel_sources()`` needs no CuPy: the fresh-build guard hashes the sources on any machine.
Compilation happens on first use, per (pedestal type, cluster size), with ``--fmad=false`` so that
no multiply-add is fused and float64 results match the NumPy reference bit for bit.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent / "kernels"
KERNEL_FILE = "cluster_finder.cu"
# --fmad=false: every multiply and add rounds on its own, as in NumPy (bit-identical results).
NVRTC_OPTIONS = ("--fmad=false", "-std=c++17")
THREADS_PER_BLOCK = 512  # NT in cluster_finder.cu
SMEM_BUDGET_BYTES = 72 * 1024  # per block: three blocks fit an H100/H200 SM's 227 KiB
SMEM_MAX_BYTES = 227 * 1024  # opt-in dynamic shared memory limit of sm_90
STATIC_SMEM_MAX_BYTES = 48 * 1024  # static __shared__ limit per block (the two-phase kernels use static)

# The frozen-mode kernels: "strip" (one block per frame walking strips, ordered emission per round) and
# "twophase" (frozen_classify writes an emit bitmask per frame, frozen_compact ranks and writes them).
FROZEN_KERNELS = ("strip", "twophase")
DEFAULT_FROZEN_KERNEL = "twophase"
# Two-phase geometry; passed to the compiler as -D macros, so this file is the one source of truth.
CLASSIFY_TILE_COLS = 32  # one warp across, one 32-bit mask word per tile row (fixed in the kernel)
CLASSIFY_WARPS = 8  # CB_BY: 256 threads per classify block
CLASSIFY_FRAMES_PER_BLOCK = 32  # most frames a classify block walks, reusing its mean tile and thresholds
CLASSIFY_BLOCKS_PER_SM = 8  # ...but a launch keeps at least this many classify blocks per SM (2 waves of 4)
COMPACT_THREADS = 256  # CB_NT2
COMPACT_WORDS_PER_THREAD = 24  # CB_WPT: a chunk of 6144 mask words covers a 400x400 frame (5200 words)
COMPACT_LIST = 2048  # CB_LIST: emitters ranked per window before their records are written


def kernel_dir() -> Path:
    """The directory that holds the kernel sources (*.cu, *.cuh)."""
    return KERNEL_DIR


KERNEL_SUFFIXES = (".cu", ".cuh")


def hash_kernel_sources(folder: Path) -> dict[str, str]:
    """Path (relative to ``folder``, posix) -> sha256 hex of every .cu/.cuh below it; {} when absent.
    The one kernel hasher: the guards hash the checkout's folder with it, the workload its own."""
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.suffix in KERNEL_SUFFIXES}


_LOCAL_INCLUDE = re.compile(r'^#include "([A-Za-z0-9_]+\.cuh)"[^\n]*$', re.MULTILINE)


def kernel_source(name: str) -> str:
    """The text of kernel file ``name`` as it is compiled: each ``#include "x.cuh"`` of a header in the
    kernel folder replaced by that header's text (once per include). NVRTC then needs no include path,
    and CuPy's kernel cache, keyed by the source text, sees a change to a header too."""
    def splice(m: re.Match) -> str:
        return f"// ---- {m.group(1)} ----\n" + (KERNEL_DIR / m.group(1)).read_text() + f"// ---- end of {m.group(1)} ----"

    return _LOCAL_INCLUDE.sub(splice, (KERNEL_DIR / name).read_text())


def kernel_sources() -> dict[str, str]:
    """File name -> sha256 hex of every kernel source the imported clusterbench compiles."""
    return hash_kernel_sources(KERNEL_DIR)


def classify_tile_rows(pedestal_dtype: str) -> int:
    """Output rows per classify tile: 32 in float32; 16 in float64, to stay in 48 KiB of static shared memory."""
    return 32 if pedestal_dtype == "float32" else 16


def classify_shared_bytes(tile_rows: int, cluster: int, itemsize: int) -> int:
    """Static shared memory of frozen_classify: two corrected tiles, the mean tile, the row maxima."""
    halo = cluster // 2
    trows, tcols = tile_rows + 2 * halo, CLASSIFY_TILE_COLS + 2 * halo
    return (3 * trows * tcols + trows * CLASSIFY_TILE_COLS) * itemsize


def classify_frames_per_block(n_frames: int, tiles: int, sm_count: int) -> int:
    """Frames per classify block for a launch of ``n_frames``: up to CLASSIFY_FRAMES_PER_BLOCK (the fixed
    cost of a block, loading its mean tile and thresholds, is paid once per group), but never so many that
    the launch has fewer than CLASSIFY_BLOCKS_PER_SM blocks per SM. The result is exact for any value >= 1.
    On the H200 (2026-11-29, 3x3 f32, batch 2000, 8 tile rows per warp) 2, 8 and 32 frames per block gave
    1.73, 1.23 and 1.13 µs per frame, byte-identical output."""
    by_occupancy = (n_frames * tiles) // max(1, sm_count * CLASSIFY_BLOCKS_PER_SM)
    return max(1, min(CLASSIFY_FRAMES_PER_BLOCK, by_occupancy))


def mask_words(rows: int, cols: int) -> int:
    """32-bit words of one frame's emit bitmask: per row, one word per 32 columns (row-major pixel order)."""
    return rows * -(-cols // CLASSIFY_TILE_COLS)


def compile_options(pedestal_dtype: str, cluster: int, tile_rows: int | None = None) -> tuple[str, ...]:
    ctype = "float" if pedestal_dtype == "float32" else "double"
    th = classify_tile_rows(pedestal_dtype) if tile_rows is None else tile_rows
    return NVRTC_OPTIONS + (f"-DCB_T={ctype}", f"-DCB_K={cluster}", f"-DCB_TH={th}", f"-DCB_BY={CLASSIFY_WARPS}",
                            f"-DCB_NT2={COMPACT_THREADS}", f"-DCB_WPT={COMPACT_WORDS_PER_THREAD}",
                            f"-DCB_LIST={COMPACT_LIST}")


def strip_rows(rows: int, cols: int, cluster: int, itemsize: int, budget: int = SMEM_BUDGET_BYTES) -> int:
    """Image rows per strip so that tile + row-max buffers fit the shared-memory budget."""
    halo = cluster // 2
    per_row = ((cols + 2 * halo) + cols) * itemsize
    strip = max(1, budget // per_row - 2 * halo)
    return min(strip, rows)


def shared_bytes(strip: int, cols: int, cluster: int, itemsize: int) -> int:
    halo = cluster // 2
    return (strip + 2 * halo) * ((cols + 2 * halo) + cols) * itemsize
