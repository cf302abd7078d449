"""The process that probe traces: build data, pedestal, one batched pass, exit.

    python -m clusterbench.workload.run --params-json '<json>' [--result-json PATH] [--no-nvtx]
    python -m clusterbench.workload.run --params-json '<json>' --sustained R --result-json PATH

The pedestal runs inside the NVTX range ``clusterbench:pedestal`` and the pass inside
``clusterbench:pass frames=N``; each range is closed after a device synchronize, so it covers the GPU
work. Data generation, buffer allocation, kernel compilation and a warm-up launch happen before the
first range. ``--sustained R`` instead measures untraced throughput R times (after a warm-up pass).

Exit codes: 0 success; 1 no GPU / CUDA failure; 2 bad input (params, data file).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from clusterbench.errors import ClusterbenchError, EnvironmentFailure, InputError
from clusterbench.workload.build import kernel_sources
from clusterbench.workload.params import WorkloadParams

PEDESTAL_RANGE = "clusterbench:pedestal"
PASS_RANGE_PREFIX = "clusterbench:pass"
RESULT_VERSION = 1  # 1: first version (pass and sustained results)

RangeCallback = Callable[[str, str], None]


def pass_range_text(frames: int) -> str:
    return f"{PASS_RANGE_PREFIX} frames={frames}"


@dataclass(frozen=True, slots=True)
class PassResult:
    """One traced-style pass: pedestal, then `frames` frames through the pipeline."""

    frames: int
    clusters_found: int
    clusters_dropped: int
    wall_s: float  # the pass only, issue to final synchronize
    fps: float
    pedestal_s: float
    kernel_sha256: dict[str, str]
    params: dict[str, Any]
    data_source: str
    pool_frames: int

    def to_json(self) -> dict[str, Any]:
        return {"version": RESULT_VERSION, "kind": "pass", "frames": self.frames,
                "clusters_found": self.clusters_found, "clusters_dropped": self.clusters_dropped,
                "wall_s": self.wall_s, "fps": self.fps, "pedestal_s": self.pedestal_s,
                "kernel_sha256": dict(self.kernel_sha256), "params": dict(self.params),
                "data_source": self.data_source, "pool_frames": self.pool_frames}


@dataclass(frozen=True, slots=True)
class SustainedResult:
    """Untraced throughput of the pass alone (no pedestal, pipeline warmed up), repeated.

    Spread is given as min and max over the repeats."""

    frames: int
    fps: tuple[float, ...]  # one per repeat
    median_fps: float
    min_fps: float
    max_fps: float
    input_gbps: float  # frames * rows * cols * 2 bytes / median pass time, in 1e9 B/s
    clusters_found: int  # of the last repeat
    clusters_dropped: int
    kernel_sha256: dict[str, str]
    params: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"version": RESULT_VERSION, "kind": "sustained", "frames": self.frames, "fps": list(self.fps),
                "median_fps": self.median_fps, "min_fps": self.min_fps, "max_fps": self.max_fps,
                "spread": "min/max over repeats", "input_gbps": self.input_gbps,
                "clusters_found": self.clusters_found, "clusters_dropped": self.clusters_dropped,
                "kernel_sha256": dict(self.kernel_sha256), "params": dict(self.params)}


def _frames_for(params: WorkloadParams):
    from clusterbench.workload.synth import build_frames

    return build_frames(params)


def _warm_up(pipe: Any) -> None:
    """Compile and run every kernel once, outside the ranges (module load, first-launch costs)."""
    p = pipe.p
    # tracking: capture every stream's batch graph now, not inside the pass
    n = min(p.frames, p.streams * p.batch) if p.pedestal == "tracking" else min(p.batch, p.streams * 2, p.frames)
    pipe.compute_pedestal()
    pipe.run_pass(n)
    pipe.cp.cuda.Device().synchronize()


def run_config(params: WorkloadParams, *, nvtx: bool = True, on_range: RangeCallback | None = None,
               frames: Any = None) -> PassResult:
    """Pedestal (NVTX ``clusterbench:pedestal``), then one batched pass (``clusterbench:pass frames=N``).

    ``on_range(kind, text)`` is called with ("push", text) right after each range is pushed and
    ("pop", text) right before it is popped, after a device synchronize."""
    from clusterbench.workload.pipeline import Pipeline, _cupy

    cp = _cupy()
    frameset = frames if frames is not None else _frames_for(params)
    with Pipeline(params, frameset) as pipe:
        _warm_up(pipe)

        def push(text: str) -> None:
            cp.cuda.Device().synchronize()
            if nvtx:
                cp.cuda.nvtx.RangePush(text)
            if on_range is not None:
                on_range("push", text)

        def pop(text: str) -> None:
            cp.cuda.Device().synchronize()
            if on_range is not None:
                on_range("pop", text)
            if nvtx:
                cp.cuda.nvtx.RangePop()

        push(PEDESTAL_RANGE)
        t0 = time.perf_counter()
        pipe.compute_pedestal()
        cp.cuda.Device().synchronize()
        pedestal_s = time.perf_counter() - t0
        pop(PEDESTAL_RANGE)

        text = pass_range_text(params.frames)
        push(text)
        out = pipe.run_pass(params.frames)
        pop(text)
        pool = pipe.pool_n
    return PassResult(frames=out.frames, clusters_found=out.clusters_found, clusters_dropped=out.clusters_dropped,
                      wall_s=out.wall_s, fps=out.frames / out.wall_s if out.wall_s > 0 else float("nan"),
                      pedestal_s=pedestal_s, kernel_sha256=kernel_sources(), params=params.to_json(),
                      data_source=frameset.source, pool_frames=pool)


def measure_sustained(params: WorkloadParams, repeats: int = 3, frames: Any = None,
                      frozen_kernel: str | None = None) -> SustainedResult:
    """Untraced sustained FPS of the pass alone, in-process, no profiler.

    Not timed: data generation, allocation, compilation, the pedestal, and one warm-up pass of
    min(frames, 2 * streams * batch) frames. Each repeat times issue-to-synchronize of a full pass of
    ``params.frames`` frames; tracking mode restores the pedestal before each repeat (untimed).
    ``frozen_kernel`` ("strip" or "twophase", default the latter) is for the benchmark's side-by-side runs."""
    from clusterbench.workload.pipeline import Pipeline

    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise InputError(f"repeats must be a positive integer, got {repeats!r}", hint="use e.g. --sustained 3")
    frameset = frames if frames is not None else _frames_for(params)
    fps: list[float] = []
    with Pipeline(params, frameset, frozen_kernel=frozen_kernel) as pipe:
        pipe.compute_pedestal()
        pipe.run_pass(min(params.frames, 2 * params.streams * params.batch))
        for _ in range(repeats):
            pipe.reset_pedestal()
            out = pipe.run_pass(params.frames)
            fps.append(out.frames / out.wall_s)
    med = statistics.median(fps)
    return SustainedResult(frames=params.frames, fps=tuple(fps), median_fps=med, min_fps=min(fps), max_fps=max(fps),
                           input_gbps=med * params.frame_bytes / 1e9, clusters_found=out.clusters_found,
                           clusters_dropped=out.clusters_dropped, kernel_sha256=kernel_sources(),
                           params=params.to_json())


# -- the command line ----------------------------------------------------------------------------------
def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m clusterbench.workload.run",
                                 description="Pedestal then one batched pass of the CuPy cluster finder "
                                             "(the process clusterbench probe traces).",
                                 epilog="Exit codes: 0 success; 1 no GPU or CUDA failure; 2 bad input.")
    ap.add_argument("--params-json", required=True, help="WorkloadParams as a JSON object (or @file.json)")
    ap.add_argument("--result-json", help="write the result here (default: stdout)")
    ap.add_argument("--no-nvtx", action="store_true", help="do not push NVTX ranges")
    ap.add_argument("--sustained", type=int, metavar="R", help="measure untraced sustained FPS R times instead")
    return ap.parse_args(argv)


def _load_params(text: str) -> WorkloadParams:
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text()
        except OSError as exc:
            raise InputError(f"cannot read params file {text[1:]}: {exc.strerror}", hint="check the path") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"--params-json is not valid JSON: {exc}", hint='pass e.g. \'{"cluster": 3}\'') from None
    return WorkloadParams.from_json(doc)


def _cuda_errors() -> tuple[type[BaseException], ...]:
    try:
        import cupy
    except Exception:
        return ()
    errs: list[type[BaseException]] = [cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError]
    errs.append(cupy.cuda.memory.OutOfMemoryError)
    return tuple(errs)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    try:
        params = _load_params(args.params_json)
        try:
            if args.sustained is not None:
                result: Any = measure_sustained(params, repeats=args.sustained)
            else:
                result = run_config(params, nvtx=not args.no_nvtx)
        except _cuda_errors() as exc:
            raise EnvironmentFailure(f"CUDA failure: {exc}", hint="check that the GPU is idle and healthy (nvidia-smi)") from None
        doc = json.dumps(result.to_json(), indent=2)
        if args.result_json:
            try:
                Path(args.result_json).write_text(doc + "\n")
            except OSError as exc:
                raise InputError(f"cannot write {args.result_json}: {exc.strerror}", hint="check the path") from None
        else:
            print(doc)
    except ClusterbenchError as err:
        print(f"Error: {err}", file=sys.stderr)
        if err.hint:
            print(f"Hint: {err.hint}", file=sys.stderr)
        return err.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
