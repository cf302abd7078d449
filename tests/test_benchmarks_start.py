"""The GPU benchmarks, run where CuPy is missing, say so in one Error/Hint line and exit 1 (no traceback)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
@pytest.mark.parametrize("script", ["bench_ablate.py", "bench_workload.py", "bench_sync.py"])
def test_gpu_benchmark_without_cupy_is_one_error_line(script: str) -> None:
    proc = subprocess.run([sys.executable, str(BENCH / script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: CuPy is not importable") and "Hint:" in proc.stderr
    assert "Traceback" not in proc.stderr
