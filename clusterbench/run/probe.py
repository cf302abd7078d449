"""The probe: validate, guard, trace each config, analyze, write its row, measure sustained FPS.

This is the library behind ``clusterbench probe``; it never prints, exits or imports a UI
or GPU library. Every config's workload (clusterbench's CuPy finder, or any program that speaks
the protocol of docs/workloads.md) goes through the same steps:

1. :func:`plan_probe` validates the config and the options (no GPU or NVML call).
2. :func:`run_probe` checks for a GPU (and nsys), picks the GPUs and guards them with one verdict
   (:func:`clusterbench.run.gpus.plan_gpus`), then for each config:
3. traces one process (pedestal, one batched pass, exit) on the solo GPU and exports SQLite;
4. analyzes the trace over the probe's pass range;
5. upserts the config's row into probes.csv (atomic, locked: :mod:`clusterbench.io.results`);
6. measures sustained FPS without a profiler (:mod:`clusterbench.run.sustained`) and upserts the
   completed row.

One flow for 1..N GPUs: without ``--gpus`` the run is on one GPU (the first this process may use);
``ProbeRequest.gpus`` (``--gpus all|0,2``) selects several, and step 6 then runs solo, then on every
GPU at once. With ``--gpus`` the solo, per-GPU and aggregate rows and env.json's ``multi_gpu``
block are written too (docs/scaling.md), for N = 1 as well.

Progress and warnings go to an ``on_event`` callback (the CLI draws them on stderr).
Ctrl-C keeps every finished row, deletes the interrupted config's partial trace files,
and raises :class:`ProbeInterrupted` (exit 130).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import socket
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from clusterbench.errors import (EXIT_INTERRUPTED, ClusterbenchError, ConfigError, EnvironmentFailure, InputError,
                                 WorkloadProtocolError)
from clusterbench.model.measurement import Measurement
from clusterbench.model.results import ConfigEntry, ResultRow, ResultSet
from clusterbench.model.workload import WorkloadResult
from clusterbench.run.clocks import ClockSample, ClockVerdict, judge_clocks
from clusterbench.run.config import DEFAULT_CONFIG_FILE, ConfigFile, ProbeConfig
from clusterbench.run.guards import DEFAULT_MAX_UTIL_PCT
from clusterbench.run.rows import build_env, build_row, config_rows, gpu_identity
from clusterbench.run.tracers import TRACERS, TracedRun, Tracer, TracerSetup, WorkloadJob
from clusterbench.workloads.protocol import PASS_RANGE, Workload, pass_range_text, workload_for

if TYPE_CHECKING:
    from clusterbench.analyzers.records import TraceAnalysis
    from clusterbench.run.guards import GuardVerdict
    from clusterbench.run.gpus import GpuPlan
    from clusterbench.run.machine import GpuSelection
    from clusterbench.run.rows import MultiGpuSustained

PHASES = ("guard", "trace", "export", "analyze", "sustained")
DEFAULT_REPEAT = 3
MAX_REPEAT = 100
DEFAULT_TRACER = "nsys"
DEFAULT_RESULTS_ROOT = "results"


class ProbeInterrupted(ClusterbenchError):
    """Ctrl-C during a sweep: finished rows are kept (exit 130)."""

    exit_code = EXIT_INTERRUPTED


REQUEST_SCHEMA = "clusterbench.probe-request"
# ProbeRequest.to_json (a campaign task's request file). History: 1: first version.
REQUEST_VERSION = 1


@dataclass(frozen=True, slots=True)
class ProbeRequest:
    """What the user asked for (the CLI's options, as values). Crosses to a campaign's tasks as JSON
    (:meth:`to_json`; ``clusterbench probe --request FILE``)."""

    config_path: Path = Path(DEFAULT_CONFIG_FILE)
    only: tuple[str, ...] = ()
    frames: int | None = None
    tag: str | None = None
    tracer: str = DEFAULT_TRACER
    repeat: int = DEFAULT_REPEAT
    results_root: Path = Path(DEFAULT_RESULTS_ROOT)
    max_util_pct: float = DEFAULT_MAX_UTIL_PCT
    require_clean: bool = False
    force: bool = False
    data: Path | None = None
    argv: tuple[str, ...] = ()
    gpus: str | None = None  # --gpus all|0,2: each config on these GPUs at once (docs/scaling.md)

    def to_json(self) -> dict[str, object]:
        return {"schema": REQUEST_SCHEMA, "version": REQUEST_VERSION, "config_path": str(self.config_path),
                "only": list(self.only), "frames": self.frames, "tag": self.tag, "tracer": self.tracer,
                "repeat": self.repeat, "results_root": str(self.results_root), "max_util_pct": self.max_util_pct,
                "require_clean": self.require_clean, "force": self.force,
                "data": None if self.data is None else str(self.data), "argv": list(self.argv), "gpus": self.gpus}

    @classmethod
    def from_json(cls, doc: object, source: str = "probe request") -> "ProbeRequest":
        """The request back from :meth:`to_json`. InputError (exit 2) naming the first bad field."""
        hint = "write the request with clusterbench probe --executor (or ProbeRequest.to_json)"
        if not isinstance(doc, Mapping):
            raise InputError(f"{source}: a probe request is a JSON object, got {type(doc).__name__}", hint=hint)
        if doc.get("schema") != REQUEST_SCHEMA or doc.get("version") != REQUEST_VERSION:
            raise InputError(f"{source}: not a version-{REQUEST_VERSION} {REQUEST_SCHEMA} (schema "
                             f"{doc.get('schema')!r}, version {doc.get('version')!r})", hint=hint)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(doc) - names - {"schema", "version"})
        missing = sorted(names - set(doc))
        if unknown or missing:
            what = f"unknown field {unknown[0]!r}" if unknown else f"missing field {missing[0]!r}"
            raise InputError(f"{source}: {what}", hint=hint)

        def value(name: str, kinds: tuple[type, ...], optional: bool = False) -> Any:
            v = doc[name]
            if (v is None and optional) or type(v) in kinds:
                return v
            want = " or ".join(k.__name__ for k in kinds) + (" or null" if optional else "")
            raise InputError(f"{source}: field {name!r} must be {want}, got {v!r}", hint=hint)

        def strings(name: str) -> tuple[str, ...]:
            v = doc[name]
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise InputError(f"{source}: field {name!r} must be a list of strings, got {v!r}", hint=hint)
            return tuple(v)

        data = value("data", (str,), optional=True)
        return cls(config_path=Path(value("config_path", (str,))), only=strings("only"),
                   frames=value("frames", (int,), optional=True), tag=value("tag", (str,), optional=True),
                   tracer=value("tracer", (str,)), repeat=value("repeat", (int,)),
                   results_root=Path(value("results_root", (str,))),
                   max_util_pct=float(value("max_util_pct", (int, float))),
                   require_clean=value("require_clean", (bool,)), force=value("force", (bool,)),
                   data=None if data is None else Path(data), argv=strings("argv"),
                   gpus=value("gpus", (str,), optional=True))


@dataclass(frozen=True, slots=True)
class ProbePlan:
    """A validated request: the configs to run (with --frames and --data applied) and where results go."""

    config_file: ConfigFile
    configs: tuple[ProbeConfig, ...]
    results_dir: Path
    tracer: str  # a key of tracing.tracers.TRACERS
    repeat: int
    warnings: tuple[str, ...]
    gpus: GpuSelection | None = None  # None: no --gpus (one GPU: the first this process may use)


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
    row: ResultRow | None = None


@dataclass(frozen=True, slots=True)
class ProbeOutcome:
    """What a probe wrote. ``rows``: per config its plain row, then (with --gpus) its solo,
    per-GPU and aggregate rows, as written to probes.csv."""

    results_dir: Path
    session_id: str
    rows: tuple[ResultRow, ...]
    warnings: tuple[str, ...]
    guard: GuardVerdict


EventCallback = Callable[[ProbeEvent], None]


# ----------------------------------------------------------------------------- step 1: plan


def plan_probe(request: ProbeRequest, today: datetime.date | None = None) -> ProbePlan:
    """Validate everything that can be checked without a GPU. Raises ConfigError/InputError (exit 2)."""
    from clusterbench.io.results import results_dir_for
    from clusterbench.run.config import config_warnings, load_configs, select, with_data, with_frames
    from clusterbench.run.guards import check_settings

    if request.tracer not in TRACERS:
        raise InputError(
            f"--tracer must be {', '.join(list(TRACERS)[:-1])} or {list(TRACERS)[-1]}, got {request.tracer!r}",
            hint="use --tracer nsys (default), --tracer cupti where nsys is missing, or --tracer none for FPS only",
        )
    if not isinstance(request.repeat, int) or not 1 <= request.repeat <= MAX_REPEAT:
        raise InputError(f"--repeat must be an integer from 1 to {MAX_REPEAT}, got {request.repeat!r}",
                         hint=f"use --repeat {DEFAULT_REPEAT} (the default) or more for a tighter spread")
    check_settings(request.max_util_pct)
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


def _guard_json(verdict: GuardVerdict) -> dict[str, object]:
    from clusterbench.run.guards import find_checkout

    data = verdict.to_json()
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

    Raises InputError (exit 2: a ``--gpus`` index NVML does not list), EnvironmentFailure (exit 1;
    WorkloadProtocolError when a workload breaks the protocol), CheckFailed (exit 3),
    ProbeInterrupted (exit 130).
    """
    from clusterbench.io.results import merge_results
    from clusterbench.run.gpus import plan_gpus
    from clusterbench.run.guards import DEFAULT_WINDOW_S, require_guard_pass
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
    try:
        gpu_plan = plan_gpus(plan.gpus, plan.config_file, max_util_pct=request.max_util_pct,
                             window_s=DEFAULT_WINDOW_S, require_clean=request.require_clean, force=request.force)
    except KeyboardInterrupt:
        raise ProbeInterrupted("interrupted during the guards, before any config ran: nothing was written") from None
    verdict = gpu_plan.verdict
    require_guard_pass(verdict)  # CheckFailed (exit 3): a busy GPU or a stale build, without --force
    if verdict.forced:
        warn(verdict.message, verdict.hint)

    session_id = uuid.uuid4().hex
    out_dir = plan.results_dir
    rows: list[ResultRow] = []
    total = len(plan.configs)
    label: str | None = None
    phase = "setup"
    write_env: Callable[[], None] | None = None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        gpu = gpu_identity(verdict.reading)
        versions = read_child_versions(nsys)
        git = {"git_rev": verdict.git_rev, "git_dirty": verdict.git_dirty}
        guard_json = _guard_json(verdict)
        per_config: dict[str, ConfigEntry] = {}
        nsys_version = versions.get("nsys")
        tracer = TRACERS[plan.tracer](TracerSetup(nsys=nsys, nsys_version=None if nsys_version is None
                                                  else str(nsys_version)))
        gpu_runs: dict[str, MultiGpuSustained] = {}

        def write_env() -> None:
            # merged into the dir: the entries, rows and blocks of configs this probe does not run stay
            env = build_env(session_id=session_id, argv=request.argv, configs=plan.configs,
                            tracer=plan.tracer, gpu=gpu, versions=versions, git=git,
                            guard=guard_json, per_config=per_config, kernel_sources=verdict.kernel_sources)
            if plan.gpus is not None:
                env = dataclasses.replace(env, multi_gpu=gpu_plan.env_block(
                    {k: r.summary for k, r in gpu_runs.items()}, {k: r.overlap_s for k, r in gpu_runs.items()}))
            merge_results(out_dir, ResultSet(env))

        write_env()
        for index, cfg in enumerate(plan.configs):
            label = cfg.label

            def on_phase(p: str, detail: str | None = None, _label: str = cfg.label, _index: int = index) -> None:
                nonlocal phase
                phase = p
                emit(ProbeEvent("phase", label=_label, phase=p, index=_index, total=total, message=detail))

            emit(ProbeEvent("start", label=label, index=index, total=total))
            record, gpu_rows, figures = _run_config(cfg, plan, gpu_plan, tracer, out_dir, session_id, on_phase, warn,
                                                    per_config)
            merge_results(out_dir, ResultSet(rows=(record,)))
            gpu_runs[cfg.label] = figures
            write_env()
            emit(ProbeEvent("row", label=label, index=index, total=total, row=record))
            rows.append(record)
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
    return ProbeOutcome(out_dir, session_id, tuple(rows), tuple(warnings), verdict)


def analyze_pass(traced: TracedRun, cfg: ProbeConfig) -> TraceAnalysis:
    """The trace analyzed over the workload's pass range. A trace without that range is the
    workload breaking the protocol: WorkloadProtocolError, with the program's output tail."""
    from clusterbench.analyzers import analyze_trace
    from clusterbench.errors import TraceError
    from clusterbench.run.supervisor import log_tail

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


def _run_config(cfg: ProbeConfig, plan: ProbePlan, gpu_plan: GpuPlan, tracer: Tracer, out_dir: Path,
                session_id: str, on_phase: Callable[..., None], warn: Callable[..., None],
                per_config: dict[str, ConfigEntry]
                ) -> tuple[ResultRow, tuple[ResultRow, ...], MultiGpuSustained]:
    """One config: trace on the solo GPU, analyze, sustained FPS on the GPUs the guards let run. Returns
    the plain row (the solo GPU's trace and its solo sustained FPS), with ``--gpus`` the solo, per-GPU
    and aggregate rows (already written), and the sustained figures."""
    from clusterbench.io.results import merge_results
    from clusterbench.run.sustained import measure_sustained, workload_command
    from clusterbench.run.tracers import workload_cwd

    run_gpus = gpu_plan.run_gpus
    job = WorkloadJob(cfg.label, cfg.params, workload_of(cfg), out_dir, run_gpus[0])
    entry = ConfigEntry(session=session_id, tracer=plan.tracer, frames=cfg.params.frames, params=cfg.params.to_json(),
                        workload=cfg.workload.kind, command=cfg.workload.command)
    per_config[cfg.label] = entry
    analysis: TraceAnalysis | None = None
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
        merge_results(out_dir, ResultSet(rows=(row,)))  # step 5: the traced figures are safe before the untraced run

    on_phase("sustained")
    sustained = measure_sustained(run_gpus, gpu_plan.tools, workload_command(job.workload, cfg.label, cfg.params,
                                                                              plan.repeat),
                                  out_dir, cfg.label, input_bytes_per_frame=cfg.params.frame_bytes,
                                  cwd=workload_cwd(job.workload),
                                  on_round=lambda p, k: on_phase("sustained", None if p == "sustained" else p))
    figures = sustained.figures
    result = traced.result if traced is not None else sustained.last_result
    entry = dataclasses.replace(entry, finder=entry.finder or result.finder)
    if traced is None and sustained.clocks:
        # no trace: judge the clocks over the whole untraced run instead
        samples = sustained.clocks
        verdict = judge_clocks(samples, samples[0].t_s, samples[-1].t_s, sustained.max_clock_mhz, cfg.params.frames)
        entry = dataclasses.replace(entry, clocks=verdict.to_json())
    per_config[cfg.label] = entry
    trace_name = traced.sqlite.name if traced is not None else None

    def row_for(s: Measurement) -> ResultRow:
        return build_row(cfg, analysis, s, result, plan.tracer, trace_name, session_id)

    gpu_rows: tuple[ResultRow, ...] = ()
    if plan.gpus is not None:
        gpu_rows = config_rows(row_for, figures, gpu_plan.gpus, socket.gethostname())
        merge_results(out_dir, ResultSet(rows=gpu_rows))
    return row_for(figures.solo), gpu_rows, figures
