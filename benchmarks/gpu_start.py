"""The GPU benchmarks' common start (a helper module, not a benchmark: it runs nothing by itself).

``start_gpu()`` returns CuPy and the GPU's name, or prints one ``Error:`` line that names the script
and says it needs CuPy and an NVIDIA GPU, with a ``Hint:`` line, on stderr (no CuPy, no CUDA device),
never a traceback; the caller then exits 1. Importing this module also puts the checkout on
sys.path, so that ``python3 benchmarks/<script>.py`` imports this checkout's clusterbench.

usage: python3 benchmarks/gpu_start.py [--help]   (prints this text)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NEEDS = "needs CuPy and an NVIDIA GPU"


def gpu_only(first_line: str) -> str:
    """An argparse description that says, on its first line, that the script is GPU-only."""
    return f"{first_line.rstrip('.')}. GPU only: {NEEDS}."


def start_gpu(device: int = 0) -> tuple[Any, str] | None:
    """(cupy, the name of CUDA device ``device``), or None after the error line: the caller exits 1."""
    from clusterbench.errors import ClusterbenchError
    from clusterbench.workloads.cupy.pipeline import require_cupy

    try:
        cp = require_cupy()
    except ClusterbenchError as exc:
        script = Path(sys.argv[0]).name or "this benchmark"
        print(f"Error: {script} {NEEDS}: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"Hint: {exc.hint}", file=sys.stderr)
        return None
    name = cp.cuda.runtime.getDeviceProperties(device)["name"]
    return cp, name.decode() if isinstance(name, bytes) else str(name)


if __name__ == "__main__":
    print(__doc__)
