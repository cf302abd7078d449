"""Kernel sources and their compilation (CuPy RawModule over the real .cu files in kernels/).

``kernel_sources()`` needs no CuPy: the fresh-build guard hashes the sources on any machine.
Compilation happens on first use, per (pedestal type, cluster size), with ``--fmad=false`` so that
no multiply-add is fused and float64 results match the NumPy reference bit for bit.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

KERNEL_DIR = Path(__file__).resolve().parent / "kernels"
KERNEL_FILE = "cluster_finder.cu"
# --fmad=false: every multiply and add rounds on its own, as in NumPy (bit-identical results).
NVRTC_OPTIONS = ("--fmad=false", "-std=c++17")
THREADS_PER_BLOCK = 512  # NT in cluster_finder.cu
SMEM_BUDGET_BYTES = 72 * 1024  # per block: three blocks fit an H100/H200 SM's 227 KiB
SMEM_MAX_BYTES = 227 * 1024  # opt-in dynamic shared memory limit of sm_90


def kernel_dir() -> Path:
    """The directory that holds the kernel sources (*.cu, *.cuh)."""
    return KERNEL_DIR


def kernel_sources() -> dict[str, str]:
    """File name -> sha256 hex of every kernel source, for the fresh-build guard."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(KERNEL_DIR.iterdir())
        if p.suffix in (".cu", ".cuh")
    }


def compile_options(pedestal_dtype: str, cluster: int) -> tuple[str, ...]:
    ctype = "float" if pedestal_dtype == "float32" else "double"
    return NVRTC_OPTIONS + (f"-DCB_T={ctype}", f"-DCB_K={cluster}")


def strip_rows(rows: int, cols: int, cluster: int, itemsize: int, budget: int = SMEM_BUDGET_BYTES) -> int:
    """Image rows per strip so that tile + row-max buffers fit the shared-memory budget."""
    halo = cluster // 2
    per_row = ((cols + 2 * halo) + cols) * itemsize
    strip = max(1, budget // per_row - 2 * halo)
    return min(strip, rows)


def shared_bytes(strip: int, cols: int, cluster: int, itemsize: int) -> int:
    halo = cluster // 2
    return (strip + 2 * halo) * ((cols + 2 * halo) + cols) * itemsize


@functools.lru_cache(maxsize=None)
def load_module(pedestal_dtype: str, cluster: int) -> Any:
    """The compiled cupy.RawModule for one (pedestal type, cluster size)."""
    import cupy

    source = (KERNEL_DIR / KERNEL_FILE).read_text()
    return cupy.RawModule(code=source, options=compile_options(pedestal_dtype, cluster))
