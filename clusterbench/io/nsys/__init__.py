"""Reading nsys SQLite exports of any version into arrays (read-only)."""

from __future__ import annotations

from clusterbench.io.nsys.export import export_sqlite, find_nsys, resolve_trace
from clusterbench.io.nsys.reader import (
    DEFAULT_PASS_PREFIXES,
    EVERYTHING,
    KEEP_ALL,
    Activity,
    ApiCalls,
    ApiPlan,
    EventRecords,
    NvtxRanges,
    SyncEvents,
    TraceData,
    check_sqlite_file,
    connect_read_only,
    read_api_window,
    read_trace,
)

__all__ = [
    "DEFAULT_PASS_PREFIXES",
    "EVERYTHING",
    "KEEP_ALL",
    "Activity",
    "ApiCalls",
    "ApiPlan",
    "EventRecords",
    "NvtxRanges",
    "SyncEvents",
    "TraceData",
    "check_sqlite_file",
    "connect_read_only",
    "export_sqlite",
    "find_nsys",
    "read_api_window",
    "read_trace",
    "resolve_trace",
]
