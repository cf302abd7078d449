"""The GPU benchmarks' common start: CuPy and the GPU's name, or one ``Error:`` line with a ``Hint:``
on stderr (no CuPy, no CUDA device), never a traceback. Also puts the checkout on sys.path, so that
``python3 benchmarks/<script>.py`` imports this checkout's clusterbench."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def start_gpu(device: int = 0) -> tuple[Any, str] | None:
    """(cupy, the name of CUDA device ``device``), or None after the error line: the caller exits 1."""
    from clusterbench.errors import ClusterbenchError
    from clusterbench.workloads.cupy.pipeline import require_cupy

    try:
        cp = require_cupy()
    except ClusterbenchError as exc:
        print(f"Error: {exc}" + (f"\n  Hint: {exc.hint}" if exc.hint else ""), file=sys.stderr)
        return None
    name = cp.cuda.runtime.getDeviceProperties(device)["name"]
    return cp, name.decode() if isinstance(name, bytes) else str(name)
