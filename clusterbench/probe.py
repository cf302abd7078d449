"""The probe: validate, guard, trace each config, analyze, write its row, measure sustained FPS.

This is the library behind ``clusterbench probe``; it never prints, exits or imports a UI
or GPU library. Steps, in the order DESIGN.md gives them:

1. :func:`plan_probe` validates the config and the options (no GPU or NVML call).
2. :func:`run_probe` checks for a GPU (and nsys), runs the guards, then for each config:
3. traces one process (pedestal, one batched pass, exit) and exports SQLite;
4. analyzes the trace over the probe's pass range;
5. upserts the config's row into probes.csv (atomic, locked: :mod:`clusterbench.results`);
6. measures sustained FPS without a profiler and upserts the completed row.

Progress and warnings go to an ``on_event`` callback (the CLI draws them on stderr).
Ctrl-C keeps every finished row, deletes the interrupted config's partial trace files,
and raises :class:`ProbeInterrupted` (exit 130).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import socket
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from clusterbench import __version__
from clusterbench.errors import ClusterbenchError, ConfigError, EnvironmentFailure, InputError
from clusterbench.tracing.clocks import ClockSample, ClockVerdict, judge_clocks
from clusterbench.tracing.commands import nsys_graph_trace_mode
from clusterbench.tracing.tracers import PassRecord, SustainedResult, Tracer

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
PASS_RANGE = "clusterbench:pass"  # the workload's NVTX range around the one batched pass
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
    argv: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ProbePlan:
    """A validated request: the configs to run (with --frames applied) and where results go."""

    config_file: Any  # clusterbench.config.ConfigFile
    configs: tuple[Any, ...]  # ProbeConfig records
    results_dir: Path
    tracer: Tracer
    repeat: int
    warnings: tuple[str, ...]


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
    results_dir: Path
    session_id: str
    rows: tuple[dict, ...]
    warnings: tuple[str, ...]
    guard: Any  # clusterbench.guards.GuardReport


EventCallback = Callable[[ProbeEvent], None]


# ----------------------------------------------------------------------------- step 1: plan


def plan_probe(request: ProbeRequest, today: datetime.date | None = None) -> ProbePlan:
    """Validate everything that can be checked without a GPU. Raises ConfigError/InputError (exit 2)."""
    from clusterbench.config import config_warnings, load_configs, select, with_frames
    from clusterbench.results import results_dir_for

    try:
        tracer = Tracer(request.tracer)
    except ValueError:
        raise InputError(
            f"--tracer must be nsys, cupti or none, got {request.tracer!r}",
            hint="use --tracer nsys (default), --tracer cupti where nsys is missing, or --tracer none for FPS only",
        ) from None
    if not isinstance(request.repeat, int) or not 1 <= request.repeat <= MAX_REPEAT:
        raise InputError(f"--repeat must be an integer from 1 to {MAX_REPEAT}, got {request.repeat!r}",
                         hint="use --repeat 3 (the default) or more for a tighter spread")
    config_file = load_configs(request.config_path)
    configs = select(config_file, list(request.only))
    if not configs:
        raise ConfigError(f"{request.config_path}: no [[config]] to probe", hint="add a [[config]] table")
    if request.frames is not None:
        configs = tuple(with_frames(c, request.frames) for c in configs)
    warnings: list[str] = []
    for c in configs:
        warnings.extend(config_warnings(c))
    date = today or datetime.date.today()
    results_dir = results_dir_for(Path(request.results_root), date, configs[0].dtype_tag, request.tag)
    return ProbePlan(config_file, configs, results_dir, tracer, request.repeat, tuple(warnings))


# ----------------------------------------------------------------------------- pure pieces


def params_for(cfg: Any, params_type: type | None = None) -> Any:
    """The workload parameters for one config: every WorkloadParams field the config has."""
    if params_type is None:
        from clusterbench.workload.params import WorkloadParams as params_type
    names = [f.name for f in dataclasses.fields(params_type)]
    return params_type(**{n: getattr(cfg, n) for n in names if hasattr(cfg, n)})


def params_json_for(cfg: Any) -> str:
    data = params_for(cfg).to_json()
    return data if isinstance(data, str) else json.dumps(data)


def _engine(analysis: Any, name: str) -> Any:
    return analysis.engines.get(name) if analysis is not None else None


def _attr(obj: Any, name: str) -> Any:
    return None if obj is None else getattr(obj, name, None)


def _per_frame_us(ns: Any, frames: int | None) -> float | None:
    if ns is None or not frames:
        return None
    return ns / 1e3 / frames


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den == 0 or not math.isfinite(num) or not math.isfinite(den):
        return None
    return num / den


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def build_row(
    cfg: Any,
    analysis: Any,
    sustained: SustainedResult | None,
    pass_result: PassRecord | None,
    tracer: str,
    trace_name: str | None,
    session: str,
    timestamp: str | None = None,
) -> dict[str, object]:
    """One probes.csv row from a config, its trace analysis and its sustained FPS (pure).

    ``analysis`` (a TraceAnalysis) is None with ``--tracer none``; ``sustained`` is None
    until it is measured. Every ``*_us`` is microseconds per frame; absent means not measured.
    """
    frames = _attr(analysis, "frames") or None
    kernel, h2d, d2h = (_engine(analysis, n) for n in ("kernel", "h2d", "d2h"))
    roof = _attr(analysis, "roofline")
    roofline_fps = _attr(roof, "fps")
    measured_us = _attr(analysis, "measured_us_per_frame")
    traced_fps = 1e6 / measured_us if measured_us else None
    sustained_fps = sustained.median_fps if sustained is not None else None
    clusters = _attr(pass_result, "clusters_found")
    pass_frames = _attr(pass_result, "frames")
    return {
        "label": cfg.label, "cluster": cfg.cluster, "cap": cfg.cap, "streams": cfg.streams,
        "batch": cfg.batch, "frames": cfg.frames,
        "kernel_us": _attr(kernel, "us_per_frame"), "h2d_us": _attr(h2d, "us_per_frame"),
        "d2h_us": _attr(d2h, "us_per_frame"),
        "roofline_us": _attr(roof, "us_per_frame"), "binds": _attr(roof, "engine"),
        "roofline_fps": roofline_fps,
        "kernel_duty": _attr(kernel, "duty"), "h2d_duty": _attr(h2d, "duty"), "d2h_duty": _attr(d2h, "duty"),
        "h2d_gbps": _attr(h2d, "gbps"), "d2h_gbps": _attr(d2h, "gbps"),
        "idle_us": _per_frame_us(_attr(analysis, "idle_ns"), frames),
        "overlap_us": _per_frame_us(_attr(analysis, "overlap_ns"), frames),
        "host_sync_us": _per_frame_us(_attr(analysis, "host_sync_ns"), frames),
        "serialization": _attr(analysis, "serialization"),
        "measured_us": measured_us, "efficiency": _attr(analysis, "efficiency"),
        "sustained_fps": sustained_fps,
        "sustained_fps_spread": sustained.spread_fps if sustained is not None else None,
        "sustained_repeats": sustained.repeats if sustained is not None else None,
        "sustained_gbps": sustained.input_gbps if sustained is not None else None,
        "fps_efficiency": _ratio(sustained_fps, roofline_fps),
        "profiler_overhead": _ratio(sustained_fps, traced_fps),
        "clusters_per_frame": (_ratio(float(clusters), float(pass_frames))
                               if clusters is not None and pass_frames else None),
        "dropped_clusters": _attr(pass_result, "clusters_dropped"),
        "pedestal_dtype": cfg.pedestal_dtype, "pedestal": cfg.pedestal, "transfer": cfg.transfer,
        "tracer": str(Tracer(tracer).value), "trace": trace_name, "session": session,
        "timestamp": timestamp or utc_now(),
    }


def clock_verdict_for(samples: tuple[ClockSample, ...], max_clock_mhz: int | None, passed: PassRecord,
                      pass_end_s: float) -> ClockVerdict:
    """The clocks over the traced pass: the child wrote its result right after the pass ended."""
    start = pass_end_s - passed.wall_s if passed.wall_s is not None else None
    return judge_clocks(samples, start, pass_end_s if start is not None else None, max_clock_mhz, passed.frames)


def build_env(
    *,
    session_id: str,
    argv: tuple[str, ...],
    configs: tuple[Any, ...],
    tracer: str,
    gpu: Mapping[str, object],
    versions: Mapping[str, object],
    git: Mapping[str, object],
    guard: Mapping[str, object] | None,
    per_config: Mapping[str, Mapping[str, object]],
    previous: Mapping[str, object] | None = None,
    kernel_sources: Mapping[str, str] | None = None,
    created_utc: str | None = None,
    host: str | None = None,
) -> dict[str, object]:
    """env.json for a results dir (pure). Entries of ``previous`` for configs not re-run are kept."""
    kept: dict[str, object] = {}
    if previous and isinstance(previous.get("configs"), Mapping):
        kept.update(previous["configs"])  # type: ignore[arg-type]
    kept.update({k: dict(v) for k, v in per_config.items()})
    dtypes = sorted({c.pedestal_dtype for c in configs})
    modes = sorted({c.pedestal for c in configs})
    # the kernel sources each traced child compiled (file -> sha256), once per distinct set
    distinct = {json.dumps(v["kernel_sha256"], sort_keys=True): v["kernel_sha256"]
                for v in per_config.values() if v.get("kernel_sha256")}
    hashes = [distinct[k] for k in sorted(distinct)]
    return {
        "tool_version": __version__,
        "argv": list(argv),
        "created_utc": created_utc or utc_now(),
        "session_id": session_id,
        "host": host or socket.gethostname(),
        "git_rev": git.get("git_rev"),
        "git_dirty": git.get("git_dirty"),
        "gpu_name": gpu.get("name"),
        "gpu_uuid": gpu.get("uuid"),
        "driver": gpu.get("driver"),
        "cuda_driver": gpu.get("cuda_driver"),
        "max_sm_clock_mhz": gpu.get("max_sm_clock_mhz"),
        "cuda_runtime": versions.get("cuda_runtime"),
        "cupy": versions.get("cupy"),
        "nsys_version": versions.get("nsys"),
        # nsys's CUDA-graph trace mode for this dir's traces: 'node' (kernel nodes are kernel rows)
        # or 'graph' (one interval per graph execution); None when nsys did not trace
        "nsys_cuda_graph_trace": (nsys_graph_trace_mode(versions.get("nsys")) if tracer == "nsys" else None),
        "python": versions.get("python", sys.version.split()[0]),
        "pedestal_dtype": ",".join(dtypes),
        "pedestal": ",".join(modes),
        "tracer": tracer,
        "kernel_sha256": hashes[0] if len(hashes) == 1 else (hashes or None),
        "kernel_sources": dict(kernel_sources) if kernel_sources else None,
        "guard": dict(guard) if guard is not None else None,
        "clocks": {label: entry.get("clocks") for label, entry in kept.items() if isinstance(entry, Mapping)},
        "configs": kept,
    }


# ----------------------------------------------------------------------------- I/O helpers


def gpu_identity(reading: Any) -> dict[str, object]:
    """GPU name, UUID, driver, CUDA driver and max SM clock from the guards' NVML reading (pure)."""
    if reading is None:
        return {}
    return {"name": reading.name, "uuid": reading.uuid, "driver": reading.driver_version,
            "cuda_driver": reading.cuda_driver_version, "max_sm_clock_mhz": reading.max_sm_clock_mhz}


_VERSIONS_CODE = (
    "import json, cupy\n"
    "v = cupy.cuda.runtime.runtimeGetVersion()\n"
    "print(json.dumps({'cupy': cupy.__version__, 'cuda_runtime': f'{v // 1000}.{v % 1000 // 10}'}))\n"
)


def read_child_versions(nsys: Path | None) -> dict[str, object]:
    """CuPy and CUDA runtime versions (asked of a child, so this process never imports CuPy), nsys version."""
    from clusterbench.tracing.commands import child_env

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


def _guard_json(report: Any) -> dict[str, object] | None:
    to_json = getattr(report, "to_json", None)
    if not callable(to_json):
        return None
    data = to_json()
    data = json.loads(data) if isinstance(data, str) else dict(data)
    from clusterbench.guards import find_checkout

    root = find_checkout(Path(__file__).parent)
    return _without_prefix(data, str(root), "<checkout>") if root is not None else data


def _without_prefix(value: Any, prefix: str, name: str) -> Any:
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


_UNSET: Any = object()


def preflight(plan: ProbePlan) -> Path | None:
    """Is there a GPU, and (for --tracer nsys) an nsys? Returns the nsys path. Raises EnvironmentFailure (exit 1)."""
    from clusterbench.guards import gpu_present
    from clusterbench.tracing.commands import find_nsys

    if not gpu_present():
        raise EnvironmentFailure(
            "no NVIDIA GPU found (NVML reports no usable device): probe needs one",
            hint="run probe on the GPU machine; here, clusterbench analyze TRACE reads an existing nsys export",
        )
    if plan.tracer is not Tracer.NSYS:
        return None
    nsys = find_nsys()
    if nsys is None:
        raise EnvironmentFailure(
            "nsys not found on PATH, in /opt/nvidia/nsight-systems/*/bin, "
            "/opt/nvidia/nsight-compute/*/host/target-linux-x64 or /usr/local/cuda/bin",
            hint="put nsys on PATH (source .device/env.sh on the GPU machine), or use --tracer cupti",
        )
    return nsys


def run_probe(plan: ProbePlan, request: ProbeRequest, on_event: EventCallback | None = None,
              nsys: Path | None = _UNSET) -> ProbeOutcome:
    """Run the planned probe (steps 2-6). ``nsys`` is :func:`preflight`'s answer; it is asked when not given.

    Raises EnvironmentFailure (exit 1), CheckFailed (exit 3), ProbeInterrupted (exit 130).
    """
    from clusterbench.guards import require_pass, run_guards
    from clusterbench.results import load_env, save_env, upsert_probe_row

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
        report = run_guards(plan.config_file, max_util_pct=request.max_util_pct,
                            require_clean=request.require_clean, force=request.force)
    except KeyboardInterrupt:
        raise ProbeInterrupted("interrupted during the guards, before any config ran: nothing was written") from None
    require_pass(report)  # CheckFailed (exit 3) unless --force overrode it
    if report.forced:
        warn("guards failed but --force overrode them: " + "; ".join(c.message for c in report.failed),
             "env.json records the override; do not quote these figures")

    session_id = uuid.uuid4().hex
    out_dir = plan.results_dir
    rows: list[dict] = []
    total = len(plan.configs)
    label = None
    phase = "setup"
    write_env: Callable[[], None] | None = None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        try:
            previous = load_env(out_dir) if (out_dir / "env.json").exists() else None
        except InputError:
            previous = None
        gpu = gpu_identity(report.reading)
        versions = read_child_versions(nsys)
        git = {"git_rev": report.git_rev, "git_dirty": report.git_dirty}
        guard_json = _guard_json(report)
        per_config: dict[str, dict[str, object]] = {}

        def write_env() -> None:
            save_env(out_dir, build_env(session_id=session_id, argv=request.argv, configs=plan.configs,
                                        tracer=plan.tracer.value, gpu=gpu, versions=versions, git=git,
                                        guard=guard_json, per_config=per_config, previous=previous,
                                        kernel_sources=report.kernel_sources))

        write_env()
        for index, cfg in enumerate(plan.configs):
            label = cfg.label

            def on_phase(p: str, _label: str = cfg.label, _index: int = index) -> None:
                nonlocal phase
                phase = p
                emit(ProbeEvent("phase", label=_label, phase=p, index=_index, total=total))

            emit(ProbeEvent("start", label=label, index=index, total=total))
            row = _probe_one(cfg, plan, nsys, out_dir, session_id, on_phase, warn, per_config,
                             graph_trace=nsys_graph_trace_mode(versions.get("nsys")))
            upsert_probe_row(out_dir, row)
            write_env()
            emit(ProbeEvent("row", label=label, index=index, total=total, row=row))
            rows.append(row)
    except KeyboardInterrupt:
        from clusterbench.tracing.tracers import discard_partials

        removed = discard_partials(out_dir, label) if label else ()
        if write_env is not None:
            try:
                write_env()
            except (OSError, KeyboardInterrupt):
                pass
        gone = f"; removed its partial files ({', '.join(p.name for p in removed)})" if removed else ""
        if phase == "sustained" and plan.tracer is not Tracer.NONE:
            gone += f"; {label}'s traced row is kept without sustained FPS"
        raise ProbeInterrupted(
            f"interrupted during {phase} of {label or 'the sweep'!r}: kept {len(rows)} finished row(s) "
            f"in {out_dir / 'probes.csv'}{gone}",
            hint=f"rerun with --only {label} (and the labels after it) to finish the sweep" if label else None,
        ) from None
    except ClusterbenchError:
        from clusterbench.tracing.tracers import discard_partials

        if label:
            discard_partials(out_dir, label)
        raise
    return ProbeOutcome(out_dir, session_id, tuple(rows), tuple(warnings), report)


def _probe_one(cfg: Any, plan: ProbePlan, nsys: Path | None, out_dir: Path, session_id: str,
               on_phase: Callable[[str], None], warn: Callable[..., None],
               per_config: dict[str, dict[str, object]], graph_trace: str = "node") -> dict[str, object]:
    from clusterbench.results import upsert_probe_row
    from clusterbench.tracing.clocks import judge_clocks
    from clusterbench.tracing.tracers import measure_sustained, trace_cupti, trace_nsys

    params_json = params_json_for(cfg)
    analysis = traced = None
    trace_name = None
    entry: dict[str, object] = {"session": session_id, "tracer": plan.tracer.value, "frames": cfg.frames,
                                "params": json.loads(params_json)}
    per_config[cfg.label] = entry
    if plan.tracer is not Tracer.NONE:
        if plan.tracer is Tracer.NSYS:
            assert nsys is not None
            traced = trace_nsys(nsys, params_json, out_dir, cfg.label, on_phase,
                                graph_trace=graph_trace)
        else:
            traced = trace_cupti(params_json, out_dir, cfg.label, on_phase)
        trace_name = traced.sqlite.name if traced.sqlite else None
        verdict = clock_verdict_for(traced.clocks, traced.max_clock_mhz, traced.passed, traced.pass_end_s)
        entry["clocks"] = verdict.to_json()
        entry["kernel_sha256"] = traced.passed.kernel_sha256
        entry["trace"] = trace_name
        if verdict.warning:
            warn(f"{cfg.label}: {verdict.warning}", verdict.hint, cfg.label)
        on_phase("analyze")
        from clusterbench.analysis import analyze_trace

        analysis = analyze_trace(traced.sqlite, frames=cfg.frames, range_name=PASS_RANGE)
        for w in getattr(analysis, "warnings", ()) or ():
            warn(f"{cfg.label}: {w}", label=cfg.label)
        if traced.passed.frames != cfg.frames:
            warn(f"{cfg.label}: the workload reports {traced.passed.frames} frames in its pass, "
                 f"the config asked for {cfg.frames}; per-frame figures use {cfg.frames}", label=cfg.label)
        row = build_row(cfg, analysis, None, traced.passed, plan.tracer.value, trace_name, session_id)
        upsert_probe_row(out_dir, row)  # step 5: the traced figures are safe before the long untraced run

    on_phase("sustained")
    sustained, samples, max_mhz = measure_sustained(params_json, out_dir, cfg.label, plan.repeat, cfg.frame_bytes)
    entry["sustained_fps"] = list(sustained.fps)
    if traced is None:
        # no trace: judge the clocks over the whole untraced run instead
        if samples:
            verdict = judge_clocks(samples, samples[0].t_s, samples[-1].t_s, max_mhz, cfg.frames)
            entry["clocks"] = verdict.to_json()
    return build_row(cfg, analysis, sustained, traced.passed if traced else None, plan.tracer.value, trace_name,
                     session_id)
