"""The CUPTI tracer's child process: ``python -m clusterbench.run.cupti_run``.

For machines without nsys. It enables CUPTI activity records (concurrent kernels, copies,
memsets, runtime and driver API), runs the probe's workload in this process
(``run_config(params, nvtx=False, on_range=...)``), records the probe's ranges on CUPTI's own
clock (``cupti.get_timestamp()``, the clock of the activity records), flushes, and writes an
SQLite file with the tables and columns ``clusterbench analyze`` reads from an nsys export.

Usage: python -m clusterbench.run.cupti_run --params-json JSON --out TRACE.sqlite [--result-json PATH]
Exit status: 0 done; 1 CUPTI or the GPU failed (the message says which); 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path

from clusterbench.io.nsys.writer import (
    ApiRecord,
    CopyRecord,
    GpuRecord,
    KernelRecord,
    MemsetRecord,
    RangeRecord,
    write_trace_sqlite,
)

BUFFER_BYTES = 8 * 1024 * 1024  # per CUPTI activity buffer (the cupti-python samples' size)


class Collector:
    """Copies CUPTI activity records into plain records as buffers complete.

    The activity objects point into CUPTI's buffer, which is recycled after the callback, so
    every field is copied out inside the callback.
    """

    def __init__(self, cupti, pid: int) -> None:
        self.cupti = cupti
        self.pid = pid
        self.kernels: list[KernelRecord] = []
        self.memcpys: list[CopyRecord] = []
        self.memsets: list[MemsetRecord] = []
        self.api: list[ApiRecord] = []
        self._names: dict[tuple[int, int], str] = {}
        self._lock = threading.Lock()

    def _api_name(self, driver: bool, cbid: int) -> str:
        key = (1 if driver else 0, cbid)
        name = self._names.get(key)
        if name is None:
            c = self.cupti
            domain = c.CallbackDomain.DRIVER_API if driver else c.CallbackDomain.RUNTIME_API
            try:
                name = str(c.get_callback_name(domain, cbid))
            except Exception:
                name = f"{'driver' if driver else 'runtime'}_cbid_{cbid}"
            self._names[key] = name
        return name

    def buffer_requested(self):
        return BUFFER_BYTES, 0

    def buffer_completed(self, activities) -> None:
        c = self.cupti
        kind = c.ActivityKind
        with self._lock:
            for a in activities:
                k = a.kind
                if k in (kind.CONCURRENT_KERNEL, kind.KERNEL):
                    self.kernels.append(KernelRecord(int(a.start), int(a.end), int(a.device_id), int(a.context_id),
                                                     int(a.stream_id), int(a.correlation_id), self.pid, str(a.name)))
                elif k == kind.MEMCPY:
                    self.memcpys.append(CopyRecord(int(a.start), int(a.end), int(a.device_id), int(a.context_id),
                                                   int(a.stream_id), int(a.correlation_id), self.pid, int(a.bytes),
                                                   int(a.copy_kind)))
                elif k == kind.MEMSET:
                    self.memsets.append(MemsetRecord(int(a.start), int(a.end), int(a.device_id), int(a.context_id),
                                                     int(a.stream_id), int(a.correlation_id), self.pid, int(a.bytes),
                                                     int(a.value)))
                elif k in (kind.RUNTIME, kind.DRIVER):
                    driver = k == kind.DRIVER
                    self.api.append(ApiRecord(int(a.start), int(a.end), int(a.process_id) or self.pid,
                                              int(a.thread_id), int(a.correlation_id),
                                              self._api_name(driver, int(a.cbid)), int(a.return_value), driver))


class RangeClock:
    """The ``on_range`` hook: pairs push/pop calls into ranges on CUPTI's clock."""

    def __init__(self, now, pid: int, tid: int) -> None:
        self.now = now
        self.pid = pid
        self.tid = tid
        self.open: list[tuple[str, int]] = []
        self.ranges: list[RangeRecord] = []

    def __call__(self, kind: str, text: str) -> None:
        t = int(self.now())
        if kind == "push":
            self.open.append((text, t))
        elif kind == "pop":
            if not self.open:
                return
            opened, start = self.open.pop()
            self.ranges.append(RangeRecord(start, t, opened, self.pid, self.tid))


def _gpu_record() -> GpuRecord | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        name, uuid = pynvml.nvmlDeviceGetName(h), pynvml.nvmlDeviceGetUUID(h)
        name = name.decode() if isinstance(name, bytes) else str(name)
        uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        return GpuRecord(0, name, uuid)
    except Exception:
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m clusterbench.run.cupti_run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--params-json", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--result-json", type=Path)
    args = ap.parse_args(argv)

    from clusterbench.model.params import WorkloadParams

    from clusterbench.errors import ClusterbenchError

    try:
        params = WorkloadParams.from_json(json.loads(args.params_json))
    except (ValueError, ClusterbenchError) as exc:
        print(f"Error: --params-json: {exc}", file=sys.stderr)
        return 2
    try:
        from cupti import cupti
    except Exception as exc:  # ImportError, or libcupti not loadable
        print(f"cupti_run: cannot import cupti-python: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1

    from clusterbench.workloads.cupy.run import run_config

    pid, tid = os.getpid(), threading.get_native_id()
    collector = Collector(cupti, pid)
    kinds = [cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET,
             cupti.ActivityKind.RUNTIME, cupti.ActivityKind.DRIVER]
    try:
        for k in kinds:
            cupti.activity_enable(k)
        cupti.activity_register_callbacks(collector.buffer_requested, collector.buffer_completed)
    except Exception as exc:
        print(f"cupti_run: CUPTI refused to enable activity tracing: {exc}", file=sys.stderr)
        return 1

    ranges = RangeClock(cupti.get_timestamp, pid, tid)
    result = run_config(params, nvtx=False, on_range=ranges)
    # the result first: its mtime marks the end of the pass for the parent's clock window
    if args.result_json is not None:
        args.result_json.write_text(json.dumps(result.to_json(), indent=2) + "\n")
    cupti.activity_flush_all(1)
    for k in kinds:
        try:
            cupti.activity_disable(k)
        except Exception:
            pass
    cupti.activity_flush_all(1)

    write_trace_sqlite(args.out, collector.kernels, collector.memcpys, collector.memsets, collector.api,
                       ranges.ranges, _gpu_record(),
                       meta={"EXPORT_PARAM_OUTPUT_FILE": args.out.name})
    print(f"cupti_run: {len(collector.kernels)} kernels, {len(collector.memcpys)} copies, "
          f"{len(collector.memsets)} memsets, {len(collector.api)} API calls, {len(ranges.ranges)} ranges "
          f"-> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
