"""What we rely on in an nsys SQLite export, across export versions (2020.3 to 2026.x).

Facts (docs/facts.md, "nsys SQLite exports across versions"):
- tables exist only when they have rows, so absent and empty mean the same thing;
- the metadata table is absent up to 2021.x, ``EXPORT_META_DATA`` 2022.1-2023.1, then
  ``META_DATA_EXPORT`` (``name``, ``value``);
- ``ENUM_*`` tables are often missing, so copyKind is decoded with the built-in table below;
- columns get added over time (``mangledName``, ``greenContextId``, ``copyCount``, ``graphId``);
  we select only the stable core, checked against ``PRAGMA table_info``.
"""

from __future__ import annotations

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
# One row per execution of a CUDA graph on one stream, when nsys traces graphs at graph level
# (--cuda-graph-trace=graph, its default): the graph's kernels then have no kernel rows.
GRAPH_TRACE_TABLE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
# Present in node-level graph traces (--cuda-graph-trace=node): every kernel node is a kernel row.
GRAPH_NODE_EVENTS_TABLE = "CUDA_GRAPH_NODE_EVENTS"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
# Some exports keep driver API calls in a table of their own, with the runtime table's columns.
DRIVER_TABLE = "CUPTI_ACTIVITY_KIND_DRIVER"
API_TABLES = (RUNTIME_TABLE, DRIVER_TABLE)
# What each synchronizing call waited on (start, end, deviceId, streamId, correlationId of the call,
# globalPid, syncType or deprecatedSyncType, eventId), and one row per cudaEventRecord (deviceId,
# streamId, correlationId of the record call, globalPid, eventId).
SYNC_TABLE = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
CUDA_EVENT_TABLE = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
# CUPTI writes "none" in an unsigned 32-bit id column (streamId, eventId) as its largest value.
NO_ID = 4294967295
# CUpti_ActivitySynchronizationType (the export's ENUM_CUPTI_SYNC_TYPE).
SYNC_UNKNOWN = 0
SYNC_EVENT = 1  # cudaEventSynchronize (nsys also writes it for a cudaEventQuery)
SYNC_STREAM_WAIT_EVENT = 2  # cudaStreamWaitEvent
SYNC_STREAM = 3  # cudaStreamSynchronize
SYNC_CONTEXT = 4  # cudaDeviceSynchronize, cudaCtxSynchronize (and cudaProfilerStop in nsys 2025.3)
# One row per CUDA stream: processId, streamId, flag (CUpti_ActivityStreamFlag: 1 a blocking stream, 2 a
# non-blocking one, 3 the legacy default stream).
STREAM_INFO_TABLE = "TARGET_INFO_CUDA_STREAM"
STREAM_BLOCKING, STREAM_NULL = 1, 3
# Time nsys itself spent on a thread (CUPTI buffer flushes, profiler initialisation): start, end,
# globalTid, nameId.
PROFILER_OVERHEAD_TABLE = "PROFILER_OVERHEAD"
THREAD_NAMES_TABLE = "ThreadNames"  # nameId (into StringIds), priority, globalTid
NVTX_TABLE = "NVTX_EVENTS"
STRINGS_TABLE = "StringIds"
GPU_INFO_TABLES = ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU")  # the latter holds the name in 2020.x
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")

ACTIVITY_TABLES = (KERNEL_TABLE, GRAPH_TRACE_TABLE, MEMCPY_TABLE, MEMSET_TABLE)

# Tables that every nsys export carries in some version; an SQLite file with none of
# them (and no CUPTI/NVTX table) is not an nsys export.
NSYS_MARKER_TABLES = frozenset(
    {
        STRINGS_TABLE,
        "META_DATA_EXPORT",
        "EXPORT_META_DATA",
        "META_DATA_CAPTURE",
        "TARGET_INFO_SESSION_START_TIME",
        "TARGET_INFO_SYSTEM_ENV",
        "ThreadNames",
        "PROCESSES",
        "TARGET_INFO_GPU",
        "TARGET_INFO_CUDA_GPU",
    }
)

# Core columns per activity table: if one is missing the table cannot be used.
CORE_COLUMNS = {
    KERNEL_TABLE: ("start", "end", "deviceId", "streamId", "globalPid"),
    MEMCPY_TABLE: ("start", "end", "deviceId", "streamId", "globalPid", "copyKind", "bytes"),
    MEMSET_TABLE: ("start", "end", "deviceId", "streamId", "globalPid", "bytes"),
    GRAPH_TRACE_TABLE: ("start", "end", "deviceId", "streamId", "globalPid"),
    RUNTIME_TABLE: ("start", "end", "globalTid", "nameId"),
    DRIVER_TABLE: ("start", "end", "globalTid", "nameId"),
    PROFILER_OVERHEAD_TABLE: ("start", "end", "globalTid"),
    NVTX_TABLE: ("start", "end"),
    SYNC_TABLE: ("start", "end", "deviceId", "streamId"),
    CUDA_EVENT_TABLE: ("deviceId", "streamId"),
}

# NVTX_EVENTS.eventType: ranges (push/pop, start/end) and the row that names a domain.
NVTX_PUSH_POP = 59
NVTX_START_END = 60
NVTX_DOMAIN_CREATE = 75
NVTX_RANGE_TYPES = (NVTX_PUSH_POP, NVTX_START_END)

# The engines and their codes: the engine table (clusterbench.model.engines).
from clusterbench.model.engines import (  # noqa: F401
    ALWAYS_REPORTED,
    BYTE_ENGINES,
    COPY_ENGINES,
    ENGINE_CODE,
    ENGINES,
)

# CUPTI copyKind (CUpti_ActivityMemcpyKind); ENUM_CUDA_MEMCPY_OPER is missing before 2022.4.
COPY_KIND_LABELS = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "UM HtoD",
    12: "UM DtoH",
    13: "UM DtoD",
}
COPY_KIND_ENGINE = {1: "h2d", 2: "d2h", 8: "d2d", 10: "p2p", 11: "um_h2d", 12: "um_d2h", 13: "um_d2d"}
MAX_COPY_KIND = 31  # copy kinds are packed into 5 bits when read; larger ones count as `other`


def copy_kind_to_engine_code() -> tuple[int, ...]:
    """Lookup table: copyKind (0..MAX_COPY_KIND) -> engine code."""
    other = ENGINE_CODE["other"]
    return tuple(ENGINE_CODE[COPY_KIND_ENGINE[k]] if k in COPY_KIND_ENGINE else other for k in range(MAX_COPY_KIND + 1))


# Runtime/driver API calls that block the host until the GPU catches up. Names in StringIds
# carry version suffixes (cudaStreamSynchronize_v3020, cuMemcpyHtoD_v2, ..._ptsz); we match
# the base name.
HOST_SYNC_CALLS = frozenset(
    {
        "cudaStreamSynchronize",
        "cudaDeviceSynchronize",
        "cudaEventSynchronize",
        "cudaThreadSynchronize",
        "cudaMemcpy",  # synchronous; cudaMemcpyAsync is not a host sync
        "cudaMemcpy2D",
        "cudaMemcpy3D",
        "cuStreamSynchronize",
        "cuCtxSynchronize",
        "cuEventSynchronize",
        "cuMemcpy",
        "cuMemcpyHtoD",
        "cuMemcpyDtoH",
    }
)

# CUPTI memory kinds (srcKind/dstKind of a memcpy; ENUM_CUDA_MEM_KIND): 0 pageable, 1 pinned,
# 2 device, 3 array, 4 managed, 5 device static, 6 managed static, 7 unknown.
MEM_KIND_PAGEABLE = 0

# Synchronous copy calls (the host waits until the copy is done), a subset of HOST_SYNC_CALLS.
SYNC_COPY_CALLS = frozenset({"cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cuMemcpy", "cuMemcpyHtoD", "cuMemcpyDtoH"})

# What a CUDA API call does, by its base name (docs/analyze.md, "The host"). The order is the
# category code; a name matches the first rule that fits it.
API_CATEGORIES = ("launch", "graph_launch", "copy", "wait", "alloc", "module_load", "other")
API_CODE = {name: i for i, name in enumerate(API_CATEGORIES)}
GRAPH_LAUNCH_CALLS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})
LAUNCH_PREFIXES = ("cudaLaunchKernel", "cudaLaunchCooperativeKernel", "cudaLaunchHostFunc", "cuLaunchKernel",
                   "cuLaunchCooperativeKernel", "cuLaunchHostFunc", "cuLaunchGrid")
LAUNCH_CALLS = frozenset({"cudaLaunch", "cuLaunch"})
COPY_PREFIXES = ("cudaMemcpy", "cuMemcpy", "cudaMemset", "cuMemset", "cudaMemPrefetch", "cuMemPrefetch")
ALLOC_PREFIXES = ("cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaHostRegister", "cudaHostUnregister",
                  "cuMemAlloc", "cuMemFree", "cuMemHostAlloc", "cuMemHostRegister", "cuMemHostUnregister",
                  "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemAddressReserve", "cuMemAddressFree",
                  "cudaMemPoolTrimTo", "cuMemPoolTrimTo")
# Loading device code: the module (or library) load that ends a JIT compile. NVRTC and the PTX JIT run
# on the host before it and are not traced.
MODULE_LOAD_PREFIXES = ("cuModuleLoad", "cuLibraryLoad", "cudaLibraryLoad", "cuLinkComplete", "cuLinkAddData",
                        "cuLinkAddFile", "cuLinkCreate")


def api_category(base: str) -> str:
    """The category of one API call, from its base name (cudaStreamSynchronize, cuModuleLoadData, ...)."""
    if base in HOST_SYNC_CALLS:
        return "wait"
    if base in GRAPH_LAUNCH_CALLS:
        return "graph_launch"
    if base in LAUNCH_CALLS or base.startswith(LAUNCH_PREFIXES):
        return "launch"
    if base.startswith(COPY_PREFIXES):
        return "copy"
    if base.startswith(ALLOC_PREFIXES):
        return "alloc"
    if base.startswith(MODULE_LOAD_PREFIXES):
        return "module_load"
    return "other"


# Calls that issue GPU work: a thread that makes one is a launching thread.
ISSUE_CATEGORIES = frozenset({"launch", "graph_launch", "copy"})

# globalPid / globalTid pack the pid in bits 24..47.
PID_SHIFT = 24
PID_MASK = 0xFFFFFF
