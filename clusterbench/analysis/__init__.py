"""Pure analysis over parsed traces: interval unions, roofline, overlap, idle, host sync.

``from clusterbench.analysis import analyze_trace`` is the entry point the CLI and the probe
use. Names load lazily so that importing the package stays cheap.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "analyze": "clusterbench.analysis.engines",
    "analyze_trace": "clusterbench.analysis.engines",
    "load_trace": "clusterbench.analysis.engines",
    "Finding": "clusterbench.analysis.rules",
    "RULES": "clusterbench.analysis.rules",
    "WhatIf": "clusterbench.analysis.whatif",
    "parse_changes": "clusterbench.analysis.whatif",
    "EngineStats": "clusterbench.analysis.engines",
    "GroupAnalysis": "clusterbench.analysis.engines",
    "Roofline": "clusterbench.analysis.engines",
    "StreamStats": "clusterbench.analysis.engines",
    "TraceAnalysis": "clusterbench.analysis.engines",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'clusterbench.analysis' has no attribute {name!r}")
