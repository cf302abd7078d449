"""clusterbench's CuPy finder as a workload process: the protocol's first implementation.

    python -m clusterbench.workloads.cupy.run --params-json '<json>' --result PATH [--mode pass|sustained]
                                        [--repeat R] [--no-nvtx]

``--mode pass`` (the default; the process probe traces): data, buffers, kernel compilation and a
warm-up launch first; then the pedestal inside the NVTX range ``clusterbench:pedestal`` and one
batched pass inside ``clusterbench:pass frames=N``, each range closed after a device synchronize
so that it covers the GPU work. ``--mode sustained``: untraced runs after a warm-up until the last R
agree (:mod:`clusterbench.model.steady`; :func:`sustained_passes`).
Either way it writes one :class:`~clusterbench.model.workload.WorkloadResult` (docs/workloads.md),
whose ``extra.timings_s`` says where the process's time went (frames, pipeline set-up, warm-up,
pedestal, passes; ``imports`` from the interpreter's start), for benchmarks/bench_probe_time.py.

Exit codes: 0 success; 1 no GPU / CUDA failure; 2 bad input (params, data file).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

_T_IMPORT = time.perf_counter()
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from clusterbench.errors import ClusterbenchError, EnvironmentFailure, InputError
from clusterbench.model.measurement import SUSTAINED_FPS, Measurement
from clusterbench.model.workload import WorkloadResult
from clusterbench.workloads.cupy.build import kernel_sources
from clusterbench.model.params import WorkloadParams
from clusterbench.model.steady import SteadyRule, run_until_steady
from clusterbench.workloads.synth import FrameSet
from clusterbench.workloads.protocol import PASS_RANGE as PASS_RANGE_PREFIX
from clusterbench.workloads.protocol import (BUILD_WAIT_S, BUILDS_ENV, DONE_SUFFIX, GO_BEFORE, GO_BEFORE_ENV, GO_ENV,
                                             PEDESTAL_RANGE, PENDING_SUFFIX, READY_SUFFIX, STEADY_ENV, child_error,
                                             pass_range_text)

if TYPE_CHECKING:
    from clusterbench.workloads.cupy.pipeline import Pipeline

FINDER = "clusterbench CuPy"

RangeCallback = Callable[[str, str], None]

__all__ = ["PASS_RANGE_PREFIX", "PEDESTAL_RANGE", "pass_range_text", "run_config", "sustained_passes",
           "measure_sustained", "main"]


def _frames_for(params: WorkloadParams):
    from clusterbench.workloads.synth import build_frames

    return build_frames(params)


def _warm_up(pipe: Pipeline) -> None:
    """Compile and run every kernel once, outside the ranges (module load, first-launch costs)."""
    p = pipe.p
    # tracking: capture every stream's batch graph now, not inside the pass
    n = min(p.frames, p.streams * p.batch) if p.pedestal == "tracking" else min(p.batch, p.streams * 2, p.frames)
    pipe.compute_pedestal()
    pipe.run_pass(n)
    pipe.cp.cuda.Device().synchronize()


def run_config(params: WorkloadParams, *, nvtx: bool = True, on_range: RangeCallback | None = None,
               frames: FrameSet | None = None) -> WorkloadResult:
    """Pedestal (NVTX ``clusterbench:pedestal``), then one batched pass (``clusterbench:pass frames=N``).

    ``on_range(kind, text)`` is called with ("push", text) right after each range is pushed and
    ("pop", text) right before it is popped, after a device synchronize."""
    from clusterbench.workloads.cupy.pipeline import Pipeline, require_cupy

    timings: dict[str, float] = {}
    t = time.perf_counter()
    cp = require_cupy()
    timings["import_cupy"] = time.perf_counter() - t
    t = time.perf_counter()
    frameset = frames if frames is not None else _frames_for(params)
    timings["frames"] = time.perf_counter() - t
    timings["wait_build"] = wait_for_build(params)
    t = time.perf_counter()
    with Pipeline(params, frameset) as pipe:
        timings["pipeline"] = time.perf_counter() - t
        t = time.perf_counter()
        _warm_up(pipe)
        timings["warm_up"] = time.perf_counter() - t

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
        t = time.perf_counter()
        push(text)
        out = pipe.run_pass(params.frames)
        pop(text)
        timings["pedestal"], timings["pass"] = pedestal_s, time.perf_counter() - t
        pool = pipe.pool_n
    return WorkloadResult(mode="pass", frames=out.frames, pass_s=(out.wall_s,), clusters_found=out.clusters_found,
                          clusters_dropped=out.clusters_dropped, pedestal_s=pedestal_s,
                          finder=f"{FINDER} ({_kernel_name(pipe, params)})",
                          kernel_sha256=kernel_sources(), data_source=frameset.source,
                          extra={"params": params.to_json(), "pool_frames": pool, "timings_s": _rounded(timings)})


def _rounded(timings: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in timings.items()}


def _kernel_name(pipe: Any, params: WorkloadParams) -> str:
    """The kernel that ran: 'twophase', 'slide', ... in frozen mode; 'tracking graph', 'tracking coop', ..."""
    return pipe.frozen_kernel if params.pedestal == "frozen" else f"tracking {pipe.tracking_kernel}"


GO_POLL_S = 0.002


def _steady_rule(repeats: int) -> SteadyRule:
    """The rule of this process's runs: ``repeats`` counted runs, or the probe's rule (STEADY_ENV)."""
    import os

    text = os.environ.get(STEADY_ENV)
    if not text:
        return SteadyRule(counted=repeats)
    try:
        return SteadyRule.from_json({**json.loads(text), "counted": repeats})
    except (ValueError, TypeError) as exc:
        raise InputError(f"{STEADY_ENV} is not a steady rule: {exc}", hint="leave it to clusterbench probe") from None


def wait_for_go(path: str | None, poll_s: float = GO_POLL_S) -> float:
    """Wait until the probe writes ``go`` to ``path`` (None: do not wait); seconds waited. ``<path>.ready`` is
    written first, to say the process is waiting. InputError when the probe writes anything else (the probe's
    trace failed, or it was interrupted) or when the probe is gone."""
    import os

    if not path:
        return 0.0
    t0, parent = time.perf_counter(), os.getppid()
    go = Path(path)
    try:  # tell the probe this process is set up and waiting (it holds the first go until every process is)
        Path(f"{path}{READY_SUFFIX}").write_text("ready\n")
    except OSError:
        pass
    while True:
        try:
            word = go.read_text().strip()
        except FileNotFoundError:
            if os.getppid() != parent:
                raise InputError("the probe that started this process is gone", hint="run it again") from None
            time.sleep(poll_s)
            continue
        if word == "go":
            return time.perf_counter() - t0
        if word:
            raise InputError(f"the probe asked this process to stop before it measured ({word})",
                             hint="nothing to do: the probe says why")
        time.sleep(poll_s)


def wait_for_build(params: WorkloadParams, wait_s: float = BUILD_WAIT_S, poll_s: float = 0.01) -> float:
    """Wait while the probe still compiles this process's build ahead (BUILDS_ENV's ``<build>.pending``), so that
    the pipeline loads it from CuPy's cache instead of compiling it a second time; seconds waited (0 when the
    probe compiles nothing, or it is done). Past ``wait_s`` the pipeline compiles it itself."""
    import os

    from clusterbench.workloads.cupy.warm import Build

    folder = os.environ.get(BUILDS_ENV)
    if not folder:
        return 0.0
    pending = Path(folder) / f"{Build(params.pedestal_dtype, params.cluster, params.rows, params.cols).arg()}{PENDING_SUFFIX}"
    t0 = time.perf_counter()
    while pending.exists() and time.perf_counter() - t0 < wait_s:
        time.sleep(poll_s)
    return time.perf_counter() - t0


def signal_done(path: str | None) -> None:
    """Tell the probe that this process's runs have ended and its pipeline is closed (``<path>.done``), so that
    the next process may start its runs while this one writes its record and exits (None: nobody waits)."""
    if not path:
        return
    try:
        Path(f"{path}{DONE_SUFFIX}").write_text("done\n")
    except OSError:
        pass  # the probe then waits for this process to end, as without the file


def sustained_passes(params: WorkloadParams, repeats: int = 5, frames: FrameSet | None = None,
                     frozen_kernel: str | None = None, rule: SteadyRule | None = None,
                     go_file: str | None = None, go_before: str = "runs") -> WorkloadResult:
    """Untraced runs, in-process, no profiler, until they are steady: the protocol's ``sustained`` mode.

    Not timed: data generation, allocation, compilation, the pedestal, and one warm-up pass of
    min(frames, 2 * streams * batch) frames (module loads, first launches). Then runs of one or more passes
    of ``params.frames`` frames each (issue-to-synchronize; tracking mode restores the pedestal before each
    pass, untimed), as :mod:`clusterbench.model.steady` says: the first run of one pass is a warm-up that
    calibrates the passes per run (at least 100 ms a run), and runs follow until the last ``repeats`` agree,
    or a cap. ``pass_s`` holds the counted runs' seconds per pass (so ``fps`` is their FPS); ``extra.steady``
    every run, the warm-ups and the verdict. ``frozen_kernel`` ("strip" or "twophase", default the latter)
    is for the benchmark's side-by-side runs; ``go_file``: wait for the probe's go before the runs
    (``go_before`` "runs"), or before the pedestal and warm-up (``go_before`` "gpu")."""
    from clusterbench.workloads.cupy.pipeline import Pipeline

    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise InputError(f"repeats must be a positive integer, got {repeats!r}", hint="use e.g. --repeat 5")
    if go_before not in GO_BEFORE:
        raise InputError(f"{GO_BEFORE_ENV} must be one of {', '.join(GO_BEFORE)}, got {go_before!r}",
                         hint="leave it to clusterbench probe")
    rule = rule or SteadyRule(counted=repeats)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    frameset = frames if frames is not None else _frames_for(params)
    timings["frames"] = time.perf_counter() - t
    timings["wait_build"] = wait_for_build(params)
    t = time.perf_counter()
    with Pipeline(params, frameset, frozen_kernel=frozen_kernel) as pipe:
        timings["pipeline"] = time.perf_counter() - t
        if go_before == "gpu":
            timings["wait_go"] = wait_for_go(go_file)
        t = time.perf_counter()
        pipe.compute_pedestal()
        pipe.run_pass(min(params.frames, 2 * params.streams * params.batch))
        timings["warm_up"] = time.perf_counter() - t
        if go_before == "runs":
            timings["wait_go"] = wait_for_go(go_file)

        last: list[Any] = []

        def run_passes(n: int) -> float:
            seconds = 0.0
            for _ in range(n):
                pipe.reset_pedestal()
                out = pipe.run_pass(params.frames)
                seconds += out.wall_s
            last[:] = [out]
            return seconds

        t0 = time.perf_counter()
        verdict = run_until_steady(run_passes, params.frames, rule, time.perf_counter)
        timings["passes"] = time.perf_counter() - t0
        kernel = _kernel_name(pipe, params)
        out = last[0]
    signal_done(go_file)
    counted = verdict.runs[len(verdict.runs) - len(verdict.values):]
    return WorkloadResult(mode="sustained", frames=params.frames, pass_s=tuple(r.seconds / r.passes for r in counted),
                          clusters_found=out.clusters_found, clusters_dropped=out.clusters_dropped,
                          finder=f"{FINDER} ({kernel})", kernel_sha256=kernel_sources(),
                          data_source=frameset.source,
                          extra={"params": params.to_json(), "timings_s": _rounded(timings), "steady": verdict.to_json()})


def measure_sustained(params: WorkloadParams, repeats: int = 5, frames: FrameSet | None = None,
                      frozen_kernel: str | None = None) -> Measurement:
    """:func:`sustained_passes`, summarised: the counted runs' FPS (median, spread), input GB/s (the
    benchmarks' view)."""
    result = sustained_passes(params, repeats, frames, frozen_kernel)
    return Measurement(SUSTAINED_FPS, result.fps, params.frame_bytes)


# -- the command line ----------------------------------------------------------------------------------
def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m clusterbench.workloads.cupy.run",
                                 description="Pedestal then one batched pass of the CuPy cluster finder "
                                             "(the process clusterbench probe traces), or R untraced timed passes.",
                                 epilog="Exit codes: 0 success; 1 no GPU or CUDA failure; 2 bad input.")
    ap.add_argument("--params-json", required=True, help="WorkloadParams as a JSON object (or @file.json)")
    ap.add_argument("--result", "--result-json", dest="result",
                    help="write the result record here (default: stdout)")
    ap.add_argument("--mode", choices=("pass", "sustained"), default="pass")
    ap.add_argument("--repeat", type=int, default=1, metavar="R",
                    help="sustained mode: the runs that count (the last R, once they agree within 1 %%; "
                         "warm-up runs before them do not count)")
    ap.add_argument("--no-nvtx", action="store_true", help="do not push NVTX ranges")
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


def _process_start() -> float:
    """When this process started, on time.perf_counter's clock (Linux: /proc/self/stat), else now."""
    try:
        import os

        ticks = os.sysconf("SC_CLK_TCK")
        start = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / ticks
        uptime = float(open("/proc/uptime").read().split()[0])
        return time.perf_counter() - (uptime - start)
    except (OSError, ValueError, IndexError):
        return time.perf_counter()


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
            if args.mode == "sustained":
                import os

                result = sustained_passes(params, repeats=args.repeat, rule=_steady_rule(args.repeat),
                                          go_file=os.environ.get(GO_ENV),
                                          go_before=os.environ.get(GO_BEFORE_ENV) or "runs")
            else:
                result = run_config(params, nvtx=not args.no_nvtx)
            timings = dict(result.extra.get("timings_s") or {})  # type: ignore[call-overload]
            timings["imports"] = round(_T_IMPORT - _process_start(), 4)
            result = dataclasses.replace(result, extra={**result.extra, "timings_s": timings})
        except _cuda_errors() as exc:
            raise EnvironmentFailure(f"CUDA failure: {exc}", hint="check that the GPU is idle and healthy (nvidia-smi)") from None
        doc = json.dumps(result.to_json(), indent=2)
        if args.result:
            try:
                Path(args.result).write_text(doc + "\n")
            except OSError as exc:
                raise InputError(f"cannot write {args.result}: {exc.strerror}", hint="check the path") from None
        else:
            print(doc)
    except ClusterbenchError as err:
        return child_error(err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
