"""Shared fixtures. GPU tests (@pytest.mark.gpu) skip cleanly where CuPy or a GPU is absent."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

# the shared test helpers (fake_nsys.py: synthetic nsys exports; protocol_programs.py: tiny workload
# programs) live in tests/ and are imported by name from every test folder
TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
DATA = TESTS / "data"
H200_TRACES = sorted((DATA / "h200").glob("*.sqlite"))


@functools.lru_cache(maxsize=1)
def _gpu_reason() -> str | None:
    """None when CuPy sees a CUDA device, else why GPU tests are skipped."""
    try:
        import cupy  # noqa: F401
    except Exception as exc:  # ImportError, or a CUDA library load failure
        return f"CuPy not importable ({type(exc).__name__})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"no CUDA device ({exc})"
    return None if n > 0 else "no CUDA device"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [i for i in items if i.get_closest_marker("gpu")]
    if not gpu_items:
        return
    reason = _gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"GPU test: {reason}")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture
def data_dir() -> Path:
    return DATA
