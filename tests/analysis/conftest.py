"""Make the synthetic nsys export builder (tests/trace/fake_nsys.py) importable here."""

from __future__ import annotations

import sys
from pathlib import Path

_TRACE_TESTS = str(Path(__file__).resolve().parents[1] / "trace")
if _TRACE_TESTS not in sys.path:
    sys.path.insert(0, _TRACE_TESTS)
