"""The probe: validate, guard, trace each config, analyze, write its row, measure sustained FPS.

This is the library behind ``clusterbench probe``; it never prints, exits or imports a UI
or GPU library. Every config's workload (clusterbench's CuPy finder, or any program that speaks
the protocol of docs/workloads.md) goes through the same steps:

1. :func:`plan_probe` validates the config and the options (no GPU or NVML call).
2. :func:`run_probe` checks for a GPU (and nsys), runs the guards, then for each config:
3. traces one process (pedestal, one batched pass, exit) and exports SQLite;
4. analyzes the trace over the probe's pass range;
5. upserts the config's row into probes.csv (atomic, locked: :mod:`clusterbench.io.results`);
6. measures sustained FPS without a profiler and upserts the completed row.

With ``ProbeRequest.gpus`` (``--gpus all|0,2``) every selected GPU is guarded on its own, the trace
runs on the solo GPU, and step 6 runs solo then on every GPU at once
(:mod:`clusterbench.run.multigpu`), adding the (label, gpu) and aggregate rows and env.json's
``multi_gpu`` block (docs/scaling.md); N = 1 runs the same path.

Progress and warnings go to an ``on_event`` callback (the CLI draws them on stderr).
Ctrl-C keeps every finished row, deletes the interrupted config's partial trace files,
and raises :class:`ProbeInterrupted` (exit 130).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import socket
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from clusterbench.run.config import ConfigFile, ProbeConfig
from clusterbench.errors import (EXIT_INTERRUPTED, ClusterbenchError, ConfigError, EnvironmentFailure, InputError,
                                 WorkloadProtocolError)
from clusterbench.model.records import ConfigEntry, EnvRecord, ProbeRecord, SustainedFps, WorkloadResult
from clusterbench.run.clocks import ClockSample, ClockVerdict, judge_clocks
from clusterbench.run.rows import build_env, build_row, config_rows, gpu_identity
from clusterbench.run.tracers import TRACERS, TracedRun, Tracer, TracerSetup, WorkloadJob
from clusterbench.workloads.protocol import PASS_RANGE, Workload, pass_range_text, workload_for

if TYPE_CHECKING:
    from clusterbench.analyzers.records import TraceAnalysis
    from clusterbench.run.machine import GpuSelection
    from clusterbench.run.multigpu import MultiGpuPlan
    from clusterbench.run.rows import MultiGpuSustained
    from clusterbench.run.guards import GuardReport, NvmlReading

PHASES = ("guard", "trace", "export", "analyze", "sustained")
DEFAULT_REPEAT = 3
MAX_REPEAT = 100


class ProbeInterrupted(ClusterbenchError):
    """Ctrl-C during a sweep: finished rows are kept (exit 130)."""

    exit_code = EXIT_INTERRUPTED


@dataclass(frozen=True, slots=True)
class ProbeRequest:
    """What the user asked for (the CLI's options, as values)."""

    config_path: Path = Path("configs.toml")
    only: tuple[str, ...] = ()
    frames: int | None = None
    tag: str | None = None
    tracer: str = "nsys"
    repeat: int = DEFAULT_REPEAT
    results_root: Path = Path("results")
    max_util_pct: float = 5.0
    require_clean: bool = False
    force: bool = False
    data: Path | None = None
    argv: tuple[str, ...] = ()
    gpus: str | None = None  # --gpus all|0,2: each config on these GPUs at once (docs/scaling.md)


@dataclass(frozen=True, slots=True)
class ProbePlan:
    """A validated request: the configs to run (with --frames and --data applied) and where results go."""

    config_file: ConfigFile
    configs: tuple[ProbeConfig, ...]
    results_dir: Path
    tracer: str  # a key of tracing.tracers.TRACERS
    repeat: int
    warnings: tuple[str, ...]
    gpus: GpuSelection | None = None  # None: one GPU (device 0), as always


@dataclass(frozen=True, slots=True)
class ProbeEvent:
    """One progress report. kind: "start" (a config begins), "phase", "warning", "row" (a row was written)."""

    kind: str
    label: str | None = None
    phase: str | None = None
    index: int = 0
    total: int = 0
    message: str | None = None
    hint: str | None = None
    row: Mapping[str, object] | None = None


@dataclass(frozen=True, slots=True)
class ProbeOutcome:
    """What a probe wrote. ``rows``: per config its plain row, then (with --gpus) its solo,
    per-GPU and aggregate rows, as written to probes.csv."""

    results_dir: Path
    session_id: str
    rows: tuple[dict[str, object], ...]
    warnings: tuple[str, ...]
    guard: GuardReport


EventCallback = Callable[[ProbeEvent], None]


# ----------------------------------------------------------------------------- step 1: plan


def plan_probe(request: ProbeRequest, today: datetime.date | None = None) -> ProbePlan:
    """Validate everything that can be checked without a GPU. Raises ConfigError/InputError (exit 2)."""
    from clusterbench.run.config import config_warnings, load_configs, select, with_data, with_frames
    from clusterbench.io.results import results_dir_for

    if request.tracer not in TRACERS:
        raise InputError(
            f"--tracer must be {', '.join(list(TRACERS)[:-1])} or {list(TRACERS)[-1]}, got {request.tracer!r}",
            hint="use --tracer nsys (default), --tracer cupti where nsys is missing, or --tracer none for FPS only",
        )
    if not isinstance(request.repeat, int) or not 1 <= request.repeat <= MAX_REPEAT:
        raise InputError(f"--repeat must be an integer from 1 to {MAX_REPEAT}, got {request.repeat!r}",
                         hint="use --repeat 3 (the default) or more for a tighter spread")
    config_file = load_configs(request.config_path)
    configs = select(config_file, list(request.only))
    if not configs:
        raise ConfigError(f"{request.config_path}: no [[config]] to probe", hint="add a [[config]] table")
    if request.frames is not None:
        configs = tuple(with_frames(c, request.frames) for c in configs)
    if request.data is not None:
        configs = tuple(with_data(c, request.data) for c in configs)
    tracer_cls = TRACERS[request.tracer]
    for c in configs:
        problem = tracer_cls.check_workload(workload_of(c))
        if problem:
            raise ConfigError(f"config {c.label!r}: key 'workload': {problem}",
                              hint="use --tracer nsys, or --tracer none for sustained FPS only")
    warnings: list[str] = []
    for c in configs:
        warnings.extend(config_warnings(c))
    date = today or datetime.date.today()
    results_dir = results_dir_for(Path(request.results_root), date, configs[0].dtype_tag, request.tag)
    gpus: GpuSelection | None = None
    if request.gpus is not None:
        from clusterbench.run.machine import parse_gpu_selection

        gpus = parse_gpu_selection(request.gpus)  # InputError (exit 2), before any NVML call
    return ProbePlan(config_file, configs, results_dir, request.tracer, request.repeat, tuple(warnings), gpus)


# ----------------------------------------------------------------------------- pure pieces


def workload_of(cfg: ProbeConfig) -> Workload:
    return workload_for(cfg.workload.kind, cfg.workload.command, cfg.workload.base_dir)


def params_json_for(cfg: ProbeConfig) -> str:
    """The config's parameters as the JSON the CuPy workload takes (``--params-json``)."""
    return json.dumps(cfg.params.to_json())


def clock_verdict_for(samples: tuple[ClockSample, ...], max_clock_mhz: int | None, result: WorkloadResult,
                      pass_end_s: float) -> ClockVerdict:
    """The clocks over the traced pass: the workload wrote its result right after the pass ended."""
    start = pass_end_s - result.pass_s[0]
    return judge_clocks(samples, start, pass_end_s, max_clock_mhz, result.frames)


# ----------------------------------------------------------------------------- I/O helpers


_VERSIONS_CODE = (
    "import json, cupy\n"
    "v = cupy.cuda.runtime.runtimeGetVersion()\n"
    "print(json.dumps({'cupy': cupy.__version__, 'cuda_runtime': f'{v // 1000}.{v % 1000 // 10}'}))\n"
)


def read_child_versions(nsys: Path | None) -> dict[str, object]:
    """CuPy and CUDA runtime versions (asked of a child, so this process never imports CuPy), nsys version."""
    from clusterbench.run.commands import child_env

    out: dict[str, object] = {"python": sys.version.split()[0], "cupy": None, "cuda_runtime": None, "nsys": None}
    try:
        res = subprocess.run([sys.executable, "-c", _VERSIONS_CODE], capture_output=True, text=True, timeout=120,
                             env=child_env())
        if res.returncode == 0:
            out.update(json.loads(res.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        pass
    if nsys is not None:
        try:
            res = subprocess.run([str(nsys), "--version"], capture_output=True, text=True, timeout=60)
            if res.returncode == 0 and res.stdout.strip():
                out["nsys"] = res.stdout.strip().splitlines()[-1]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return out


def _guard_json(report: GuardReport) -> dict[str, object]:
    from clusterbench.run.guards import find_checkout

    data = report.to_json()
    root = find_checkout(Path(__file__).parent)
    return _without_prefix(data, str(root), "<checkout>") if root is not None else data


def _without_prefix(value: object, prefix: str, name: str) -> object:
    """``value`` with the machine's checkout path replaced by ``name`` in every string (pure).

    env.json is meant to be committed and shared: it says where the code came from by git rev,
    not by a path on one machine."""
    if isinstance(value, str):
        return value.replace(prefix, name)
    if isinstance(value, Mapping):
        return {k: _without_prefix(v, prefix, name) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_prefix(v, prefix, name) for v in value]
    return value


def _previous_env(out_dir: Path) -> EnvRecord | None:
    from clusterbench.io.results import ENV_JSON

    path = out_dir / ENV_JSON
    if not path.is_file():
        return None
    try:
        return EnvRecord.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, InputError):
        return None  # unreadable: start afresh (the new env.json replaces it)


# ----------------------------------------------------------------------------- steps 2-6


_UNSET: Path = Path("\0unset")


def preflight(plan: ProbePlan) -> Path | None:
    """Is there a GPU, and (for --tracer nsys) an nsys? Returns the nsys path. Raises EnvironmentFailure (exit 1)."""
    from clusterbench.run import guards
    from clusterbench.io.nsys import export as nsys_export

    if not guards.gpu_present():
        raise EnvironmentFailure(
            "no NVIDIA GPU found (NVML reports no usable device): probe needs one",
            hint="run probe on the GPU machine; here, clusterbench analyze TRACE reads an existing nsys export",
        )
    if plan.tracer != "nsys":
        return None
    nsys = nsys_export.find_nsys()
    if nsys is None:
        raise EnvironmentFailure(
            f"nsys not found: not in ${nsys_export.NSYS_ENV}, on PATH, or in {', '.join(nsys_export.NSYS_GLOBS)}",
            hint="put nsys on PATH (source .device/env.sh on the GPU machine), or use --tracer cupti",
        )
    return nsys


def run_probe(plan: ProbePlan, request: ProbeRequest, on_event: EventCallback | None = None,
              nsys: Path | None = _UNSET) -> ProbeOutcome:
    """Run the planned probe (steps 2-6). ``nsys`` is :func:`preflight`'s answer; it is asked when not given.

    Raises EnvironmentFailure (exit 1; WorkloadProtocolError when a workload breaks the protocol),
    CheckFailed (exit 3), ProbeInterrupted (exit 130).
    """
    from clusterbench.run.guards import require_pass, run_guards
    from clusterbench.io.results import save_env, upsert_probe_row
    from clusterbench.run.tracers import discard_partials

    emit = on_event or (lambda event: None)
    warnings: list[str] = list(plan.warnings)

    def warn(message: str, hint: str | None = None, label: str | None = None) -> None:
        warnings.append(message)
        emit(ProbeEvent("warning", label=label, message=message, hint=hint))

    for w in plan.warnings:
        emit(ProbeEvent("warning", message=w))

    nsys = preflight(plan) if nsys is _UNSET else nsys

    emit(ProbeEvent("phase", phase="guard", total=len(plan.configs)))
    mplan: MultiGpuPlan | None = None
    try:
        if plan.gpus is None:
            report = run_guards(plan.config_file, max_util_pct=request.max_util_pct,
                                require_clean=request.require_clean, force=request.force)
        else:
            mplan, report = _guard_gpus(plan, request)
    except KeyboardInterrupt:
        raise ProbeInterrupted("interrupted during the guards, before any config ran: nothing was written") from None
    if mplan is not None:
        from clusterbench.run.multigpu import require_gpus_pass

        require_gpus_pass(mplan.guard)  # CheckFailed (exit 3): a busy GPU or a stale build, without --force
        if mplan.guard.reason not in ("pass", "host_forced"):
            warn(mplan.guard.message, "env.json records which GPUs were refused or forced (multi_gpu.guard)")
    require_pass(report)  # CheckFailed (exit 3) unless --force overrode it
    if report.forced:
        warn("guards failed but --force overrode them: " + "; ".join(c.message for c in report.failed),
             "env.json records the override; do not quote these figures")

    session_id = uuid.uuid4().hex
    out_dir = plan.results_dir
    rows: list[dict[str, object]] = []
    total = len(plan.configs)
    label: str | None = None
    phase = "setup"
    write_env: Callable[[], None] | None = None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        previous = _previous_env(out_dir)
        gpu = gpu_identity(report.reading)
        versions = read_child_versions(nsys)
        git = {"git_rev": report.git_rev, "git_dirty": report.git_dirty}
        guard_json = _guard_json(report)
        per_config: dict[str, ConfigEntry] = {}
        nsys_version = versions.get("nsys")
        tracer = TRACERS[plan.tracer](TracerSetup(nsys=nsys, nsys_version=None if nsys_version is None
                                                  else str(nsys_version)))
        gpu_runs: dict[str, MultiGpuSustained] = {}
        kept_multi = _previous_multi_gpu_configs(out_dir, {c.label for c in plan.configs})

        def write_env() -> None:
            env = build_env(session_id=session_id, argv=request.argv, configs=plan.configs,
                            tracer=plan.tracer, gpu=gpu, versions=versions, git=git,
                            guard=guard_json, per_config=per_config, previous=previous,
                            kernel_sources=report.kernel_sources)
            if mplan is None:
                save_env(out_dir, env)
                return
            block = mplan.env_block({k: r.summary for k, r in gpu_runs.items()},
                                    {k: r.overlap_s for k, r in gpu_runs.items()})
            block["configs"] = {**kept_multi, **block["configs"]}  # configs not re-run keep their summary
            save_env(out_dir, {**env.to_json(), "multi_gpu": block})

        write_env()
        for index, cfg in enumerate(plan.configs):
            label = cfg.label

            def on_phase(p: str, _label: str = cfg.label, _index: int = index) -> None:
                nonlocal phase
                phase = p
                emit(ProbeEvent("phase", label=_label, phase=p, index=_index, total=total))

            emit(ProbeEvent("start", label=label, index=index, total=total))
            record, gpu_rows, gpu_run = _probe_one(cfg, plan, tracer, out_dir, session_id, on_phase, warn,
                                                   per_config, mplan)
            upsert_probe_row(out_dir, record)
            if gpu_run is not None:
                gpu_runs[cfg.label] = gpu_run
            write_env()
            row = record.to_json()
            emit(ProbeEvent("row", label=label, index=index, total=total, row=row))
            rows.append(row)
            rows.extend(gpu_rows)
    except KeyboardInterrupt:
        removed = discard_partials(out_dir, label) if label else ()
        if write_env is not None:
            try:
                write_env()
            except (OSError, KeyboardInterrupt):
                pass
        gone = f"; removed its partial files ({', '.join(p.name for p in removed)})" if removed else ""
        if phase == "sustained" and plan.tracer != "none":
            gone += f"; {label}'s traced row is kept without sustained FPS"
        raise ProbeInterrupted(
            f"interrupted during {phase} of {label or 'the sweep'!r}: kept {len(rows)} finished row(s) "
            f"in {out_dir / 'probes.csv'}{gone}",
            hint=f"rerun with --only {label} (and the labels after it) to finish the sweep" if label else None,
        ) from None
    except ClusterbenchError:
        if label:
            discard_partials(out_dir, label)
        raise
    return ProbeOutcome(out_dir, session_id, tuple(rows), tuple(warnings), report)


def _guard_gpus(plan: ProbePlan, request: ProbeRequest) -> tuple[MultiGpuPlan, GuardReport]:
    """``--gpus``: sample every selected GPU once (NVML), run the host-wide guards once, and judge
    each GPU on its own reading (:func:`clusterbench.run.multigpu.check_gpus`). The report's GPU is the
    solo GPU (the first one the guards let run): its identity goes to env.json, as with one GPU.
    InputError (exit 2) for an index NVML does not list."""
    from clusterbench.run import guards
    from clusterbench.run import multigpu as mg

    assert plan.gpus is not None
    readings: dict[int, NvmlReading] = {}

    def read(device_index: int, window_s: float) -> NvmlReading:
        readings[device_index] = guards.read_nvml(device_index=device_index, window_s=window_s)
        return readings[device_index]

    mplan = mg.plan_multi_gpu(plan.gpus, max_util_pct=request.max_util_pct, window_s=guards.DEFAULT_WINDOW_S,
                              force=request.force, read_reading=read)
    # a refused run (no --force) still needs a report; any GPU stands in, require_gpus_pass raises first
    solo = mplan.run_gpus[0].index if mplan.run_gpus else mplan.gpus[0].index
    report = guards.run_guards(plan.config_file, max_util_pct=request.max_util_pct,
                               require_clean=request.require_clean, force=request.force, device_index=solo,
                               reading=readings[solo])
    # judge again with the host checks (build, git) so multi_gpu.guard records them too
    guard = mg.check_gpus([readings[g.index] for g in mplan.gpus], mg.host_checks_of(report.checks),
                          max_util_pct=request.max_util_pct, force=request.force, own_pid=os.getpid())
    return dataclasses.replace(mplan, guard=guard), report


def _previous_multi_gpu_configs(out_dir: Path, rerun: set[str]) -> dict[str, object]:
    """env.json's ``multi_gpu.configs`` entries of configs this probe does not re-run (kept, as their rows are)."""
    from clusterbench.io.results import ENV_JSON

    try:
        doc = json.loads((out_dir / ENV_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    block = doc.get("multi_gpu") if isinstance(doc, dict) else None
    configs = block.get("configs") if isinstance(block, dict) else None
    if not isinstance(configs, dict):
        return {}
    return {k: v for k, v in configs.items() if k not in rerun}


def analyze_pass(traced: TracedRun, cfg: ProbeConfig) -> TraceAnalysis:
    """The trace analyzed over the workload's pass range. A trace without that range is the
    workload breaking the protocol: WorkloadProtocolError, with the program's output tail."""
    from clusterbench.analyzers import analyze_trace
    from clusterbench.errors import TraceError
    from clusterbench.run.process import log_tail

    try:
        return analyze_trace(traced.sqlite, frames=cfg.params.frames, range_name=PASS_RANGE)
    except TraceError as exc:
        if "no NVTX range" not in str(exc):
            raise
        raise WorkloadProtocolError(
            f"config {cfg.label!r}: the workload's trace {traced.sqlite.name} has no NVTX pass range: no range "
            f"starts with {PASS_RANGE!r} (expected {pass_range_text(cfg.params.frames)!r}); last lines of "
            f"{traced.log.name}:\n{log_tail(traced.log)}",
            hint="push the range clusterbench:pass frames=N around the one batched pass (docs/workloads.md)",
        ) from None


def _probe_one(cfg: ProbeConfig, plan: ProbePlan, tracer: Tracer, out_dir: Path, session_id: str,
               on_phase: Callable[[str], None], warn: Callable[..., None],
               per_config: dict[str, ConfigEntry], mplan: MultiGpuPlan | None = None
               ) -> tuple[ProbeRecord, tuple[dict[str, object], ...], MultiGpuSustained | None]:
    """One config: trace, analyze, sustained FPS. Returns the plain row and, with ``--gpus``, the
    solo, per-GPU and aggregate rows (already written) and the run they came from."""
    from clusterbench.io.results import upsert_probe_row
    from clusterbench.run.tracers import measure_sustained

    job = WorkloadJob(cfg.label, cfg.params, workload_of(cfg), out_dir)
    entry = ConfigEntry(session=session_id, tracer=plan.tracer, frames=cfg.params.frames, params=cfg.params.to_json(),
                        workload=cfg.workload.kind, command=cfg.workload.command)
    per_config[cfg.label] = entry
    analysis: TraceAnalysis | None = None
    if mplan is None:
        traced = tracer.trace(job, on_phase)
    else:
        from clusterbench.run.machine import only_gpu_visible

        with only_gpu_visible(mplan.run_gpus[0]):  # the trace runs on the solo GPU alone
            traced = tracer.trace(job, on_phase)
    if traced is not None:
        verdict = clock_verdict_for(traced.clocks, traced.max_clock_mhz, traced.result, traced.pass_end_s)
        entry = dataclasses.replace(entry, clocks=verdict.to_json(), kernel_sha256=traced.result.kernel_sha256,
                                    trace=traced.sqlite.name, finder=traced.result.finder)
        per_config[cfg.label] = entry
        if verdict.warning:
            warn(f"{cfg.label}: {verdict.warning}", verdict.hint, cfg.label)
        on_phase("analyze")
        analysis = analyze_pass(traced, cfg)
        for w in analysis.warnings:
            warn(f"{cfg.label}: {w}", label=cfg.label)
        if traced.result.frames != cfg.params.frames:
            warn(f"{cfg.label}: the workload reports {traced.result.frames} frames in its pass, "
                 f"the config asked for {cfg.params.frames}; per-frame figures use {cfg.params.frames}",
                 label=cfg.label)
        row = build_row(cfg, analysis, None, traced.result, plan.tracer, traced.sqlite.name, session_id)
        upsert_probe_row(out_dir, row)  # step 5: the traced figures are safe before the long untraced run

    on_phase("sustained")
    if mplan is not None:
        return _sustained_on_gpus(cfg, plan, job, traced, analysis, mplan, out_dir, session_id, per_config, entry)
    sustained = measure_sustained(job, plan.repeat)
    entry = dataclasses.replace(entry, sustained_fps=sustained.fps.fps,
                                finder=entry.finder or sustained.results[-1].finder)
    if traced is None and sustained.clocks:
        # no trace: judge the clocks over the whole untraced run instead
        samples = sustained.clocks
        verdict = judge_clocks(samples, samples[0].t_s, samples[-1].t_s, sustained.max_clock_mhz, cfg.params.frames)
        entry = dataclasses.replace(entry, clocks=verdict.to_json())
    per_config[cfg.label] = entry
    result = traced.result if traced is not None else sustained.results[-1]
    record = build_row(cfg, analysis, sustained.fps, result, plan.tracer, traced.sqlite.name if traced else None,
                       session_id)
    return record, (), None


def _sustained_on_gpus(cfg: ProbeConfig, plan: ProbePlan, job: WorkloadJob, traced: TracedRun | None,
                       analysis: TraceAnalysis | None, mplan: MultiGpuPlan, out_dir: Path, session_id: str,
                       per_config: dict[str, ConfigEntry], entry: ConfigEntry
                       ) -> tuple[ProbeRecord, tuple[dict[str, object], ...], MultiGpuSustained]:
    """``--gpus``: sustained FPS on the solo GPU alone, then on every GPU at once (docs/scaling.md).
    Writes the solo, per-GPU and aggregate rows; returns the plain row (the solo GPU's trace and its
    solo sustained FPS: what a plain probe writes), those rows and the run. Works for N = 1."""
    from clusterbench.run import multigpu as mg
    from clusterbench.io.results import upsert_probe_row
    from clusterbench.run.commands import child_env

    command, rounds = mg.workload_command(job.workload, cfg.label, cfg.params, plan.repeat)
    cwd = job.workload.cwd
    run = mg.measure_sustained_gpus(mplan.run_gpus, mplan.tools, command, out_dir, cfg.label, child_env(),
                                    rounds=rounds, input_bytes_per_frame=cfg.params.frame_bytes,
                                    cwd=None if cwd is None else str(cwd))
    result = traced.result if traced is not None else run.solo_outcomes[-1][0].result
    trace_name = traced.sqlite.name if traced is not None else None

    def base(s: SustainedFps) -> dict[str, object]:
        return build_row(cfg, analysis, s, result, plan.tracer, trace_name, session_id).to_json()

    gpu_rows = config_rows(base, run, mplan.gpus, socket.gethostname())
    for row in gpu_rows:
        upsert_probe_row(out_dir, row)
    per_config[cfg.label] = dataclasses.replace(entry, sustained_fps=run.solo.fps,
                                                finder=entry.finder or (result.finder if result else None))
    return build_row(cfg, analysis, run.solo, result, plan.tracer, trace_name, session_id), gpu_rows, run
