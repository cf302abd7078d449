"""Pure analysis over parsed traces: one analyzer per module over one trace model (analyzers.model),
and the facade that runs them (analyzers.analysis).

``from clusterbench.analyzers import analyze_trace`` is the entry point the CLI and the probe
use. Names load lazily so that importing the package stays cheap.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "analyze": "clusterbench.analyzers.analysis",
    "analyze_trace": "clusterbench.analyzers.analysis",
    "load_trace": "clusterbench.analyzers.analysis",
    "request": "clusterbench.analyzers.analysis",
    "Request": "clusterbench.analyzers.analysis",
    "Finding": "clusterbench.analyzers.records",
    "RULES": "clusterbench.analyzers.rules",
    "WhatIf": "clusterbench.analyzers.whatif",
    "parse_changes": "clusterbench.analyzers.whatif",
    "EngineStats": "clusterbench.analyzers.records",
    "GroupAnalysis": "clusterbench.analyzers.records",
    "Roofline": "clusterbench.analyzers.records",
    "StreamStats": "clusterbench.analyzers.records",
    "TraceAnalysis": "clusterbench.analyzers.records",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'clusterbench.analyzers' has no attribute {name!r}")
