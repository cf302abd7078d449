"""What CUDA calls cost the calling thread on this machine: the loop probe times untraced and under nsys to
learn the profiler's cost per call (needs CuPy and a GPU).

    python -m clusterbench.workloads.cupy.calls [--calls N] [--chunks C] [--result FILE]

Three kinds of call, the ones a launching thread makes every frame: ``launch`` (an empty kernel through
CuPy's RawKernel, cuLaunchKernel), ``copy`` (cudaMemcpyAsync of 4 bytes from pinned memory to the device)
and ``event`` (cudaEventRecord). After a warm-up, each kind is called N times in C chunks on one stream;
each chunk is timed on the host (time.perf_counter around the calls only) and the stream is synchronized
between chunks, untimed, so that no queue fills. The record gives µs per call of each chunk: run under the
profiler and without it, the difference is the profiler's cost per call (:mod:`clusterbench.run.callcost`).

Exit codes: 0 success; 1 no GPU or CUDA failure; 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from clusterbench.errors import ClusterbenchError, EnvironmentFailure, InputError
from clusterbench.workloads.protocol import child_error

SCHEMA = "clusterbench.call-costs"
VERSION = 1
KINDS = ("launch", "copy", "event")
DEFAULT_CALLS = 3000  # per kind: about 10-30 ms of calls untraced
DEFAULT_CHUNKS = 6
_EMPTY = 'extern "C" __global__ void clusterbench_empty(int x) { }'


def time_calls(calls: int = DEFAULT_CALLS, chunks: int = DEFAULT_CHUNKS) -> dict[str, Any]:
    """µs per call of each kind, per chunk (the record :func:`main` writes)."""
    from clusterbench.workloads.cupy.pipeline import HostBuffer, require_cupy

    if type(calls) is not int or type(chunks) is not int or calls < chunks or chunks < 2:
        raise InputError(f"--calls must be an integer >= --chunks >= 2, got {calls!r} and {chunks!r}",
                         hint="use e.g. --calls 3000 --chunks 6")
    cp = require_cupy()
    rt = cp.cuda.runtime
    kernel = cp.RawKernel(_EMPTY, "clusterbench_empty")
    stream = cp.cuda.Stream(non_blocking=True)
    host = HostBuffer(4)
    dev = cp.empty(1, cp.int32)
    event = cp.cuda.Event(disable_timing=True)
    arg = (np.int32(0),)
    per_chunk = calls // chunks

    def launch() -> None:
        kernel((1,), (1,), arg, stream=stream)

    def copy() -> None:
        rt.memcpyAsync(dev.data.ptr, host.ptr, 4, 1, stream.ptr)  # 1: cudaMemcpyHostToDevice

    def record() -> None:
        event.record(stream)

    calls_of = {"launch": launch, "copy": copy, "event": record}
    out: dict[str, list[float]] = {k: [] for k in KINDS}
    try:
        for fn in calls_of.values():  # warm-up: module load, first calls
            for _ in range(50):
                fn()
        stream.synchronize()
        for _ in range(chunks):
            for kind in KINDS:
                fn = calls_of[kind]
                t0 = time.perf_counter()
                for _ in range(per_chunk):
                    fn()
                t1 = time.perf_counter()
                stream.synchronize()
                out[kind].append((t1 - t0) * 1e6 / per_chunk)
    finally:
        stream.synchronize()
        host.close()
    return {"schema": SCHEMA, "version": VERSION, "calls": per_chunk * chunks, "chunks": chunks,
            "us_per_call": out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m clusterbench.workloads.cupy.calls",
                                 description="Time CUDA calls (empty kernel launches, 4-byte async copies, event "
                                             "records) on the host, in chunks, for the profiler's cost per call.",
                                 epilog="Exit codes: 0 success; 1 no GPU or CUDA failure; 2 bad input.")
    ap.add_argument("--calls", type=int, default=DEFAULT_CALLS, help="calls of each kind (default %(default)s)")
    ap.add_argument("--chunks", type=int, default=DEFAULT_CHUNKS, help="timed chunks (default %(default)s)")
    ap.add_argument("--result", type=Path, help="write the record here (default: stdout)")
    args = ap.parse_args(argv)
    try:
        try:
            doc = time_calls(args.calls, args.chunks)
        except ClusterbenchError:
            raise
        except Exception as exc:  # a CUDA failure from CuPy
            raise EnvironmentFailure(f"CUDA failure: {exc}", hint="check that the GPU is idle and healthy") from None
        text = json.dumps(doc, indent=2)
        if args.result is None:
            print(text)
        else:
            args.result.write_text(text + "\n")
    except ClusterbenchError as err:
        return child_error(err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
