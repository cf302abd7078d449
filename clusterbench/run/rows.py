"""The probes.csv rows and env.json blocks a probe writes: one config's row from its trace analysis
and sustained FPS, the per-GPU and aggregate rows of a ``--gpus`` run, and env.json (pure).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import socket
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from clusterbench import __version__
from clusterbench.model import units as U
from clusterbench.model.processes import processes_of, steady_summary
from clusterbench.model.measurement import SUSTAINED_FPS, SUSTAINED_GBPS, Measurement
from clusterbench.model.results import ConfigEntry, EnvRecord, ResultRow, RowKey, RowRole
from clusterbench.model.workload import WorkloadResult
from clusterbench.run.commands import nsys_graph_trace_mode
from clusterbench.run.machine import GpuInfo, Pinning
from clusterbench.run.supervisor import GpuOutcome

if TYPE_CHECKING:
    from clusterbench.analyzers.records import TraceAnalysis
    from clusterbench.run.callcost import HostEstimate
    from clusterbench.run.config import ProbeConfig
    from clusterbench.run.guards import NvmlReading


SOLO_DEFINITION = (
    "solo: the first GPU the guards let run, in the order --gpus names them (all: the lowest index), running the same config alone, with the same "
    "pinning and repeats, immediately before the concurrent run; scaling efficiency = summed concurrent "
    "sustained FPS / (N x the solo sustained FPS)")


@dataclass(frozen=True, slots=True)
class ScalingSummary:
    """One config over N GPUs at once, against one GPU alone (``solo``; see SOLO_DEFINITION). FPS are
    medians over the repeats; ``total_fps_spread`` sums the per-GPU spreads (a bound, not a spread of
    a measured sum)."""

    gpus: tuple[int, ...]
    per_gpu_fps: tuple[float, ...]
    per_gpu_spread: tuple[float, ...]
    solo_gpu: int
    solo_fps: float
    solo_fps_spread: float
    total_fps: float
    total_fps_spread: float
    min_fps: float
    min_gpu: int
    efficiency: float  # total_fps / (N x solo_fps)

    @property
    def n(self) -> int:
        return len(self.gpus)

    def to_json(self) -> dict[str, Any]:
        return {"gpus": list(self.gpus), "per_gpu_fps": list(self.per_gpu_fps),
                "per_gpu_fps_spread": list(self.per_gpu_spread), "solo_gpu": self.solo_gpu,
                "solo_fps": self.solo_fps, "solo_fps_spread": self.solo_fps_spread, "total_fps": self.total_fps,
                "total_fps_spread": self.total_fps_spread, "min_fps": self.min_fps, "min_gpu": self.min_gpu,
                "scaling_efficiency": self.efficiency}


def scaling_summary(solo_gpu: int, solo: Measurement, concurrent: Mapping[int, Measurement]) -> ScalingSummary:
    """Summed and minimum sustained FPS over the GPUs, and the scaling efficiency against N x solo (pure)."""
    if not concurrent:
        raise ValueError("scaling_summary needs at least one GPU's concurrent figure")
    gpus = tuple(sorted(concurrent))
    fps = tuple(concurrent[i].median for i in gpus)
    spread = tuple(concurrent[i].spread for i in gpus)
    total = sum(fps)
    low = min(range(len(gpus)), key=lambda k: fps[k])
    return ScalingSummary(gpus=gpus, per_gpu_fps=fps, per_gpu_spread=spread, solo_gpu=solo_gpu,
                          solo_fps=solo.median, solo_fps_spread=solo.spread, total_fps=total,
                          total_fps_spread=sum(spread), min_fps=fps[low], min_gpu=gpus[low],
                          efficiency=total / (len(gpus) * solo.median))


def gpu_row(base: ResultRow, gpu: GpuInfo, role: RowRole, host: str, pinning: Pinning | None = None) -> ResultRow:
    """A per-GPU probes.csv row: ``base`` (a single-GPU row, e.g. ``build_row(...)`` built from this GPU's
    figures) keyed by (config, gpu, role), with the GPU's name and UUID, the host and the pinning (pure)."""
    if role is RowRole.AGGREGATE:
        raise ValueError("use aggregate_row for the aggregate row")
    return dataclasses.replace(base, key=RowKey(base.key.config, gpu.index, role, base.key.variant),
                               gpu_name=gpu.name, gpu_uuid=gpu.uuid, host=host,
                               pinning=None if pinning is None else pinning.method.value)


def aggregate_row(base: ResultRow, summary: ScalingSummary, host: str, gpus: Sequence[GpuInfo] = ()) -> ResultRow:
    """The config's aggregate row, keyed (config, aggregate): what the config is and how it ran, the
    summed sustained FPS, the per-GPU minimum, the solo figure and the scaling efficiency (pure). The
    trace figures (per-GPU quantities, not sums) stay empty; ``sustained_gbps`` scales with the sum when
    ``base`` has it."""
    per_fps_gbps = (base.sustained_gbps / base.sustained_fps
                    if base.sustained_fps and base.sustained_gbps is not None else None)
    in_gbps = base.sustained_fps is None and base.sustained_gbps is not None  # a program that reports GB/s only
    names = sorted({g.name for g in gpus if g.index in summary.gpus})
    return ResultRow(
        key=RowKey(base.key.config, role=RowRole.AGGREGATE, variant=base.key.variant), cluster=base.cluster,
        cap=base.cap, streams=base.streams, batch=base.batch, frames=base.frames,
        sustained_fps=None if in_gbps else summary.total_fps,
        sustained_fps_spread=None if in_gbps else summary.total_fps_spread,
        sustained_repeats=base.sustained_repeats, sustained_source=base.sustained_source,
        sustained_gbps=summary.total_fps if in_gbps else (None if per_fps_gbps is None
                                                           else summary.total_fps * per_fps_gbps),
        pedestal_dtype=base.pedestal_dtype, pedestal=base.pedestal, transfer=base.transfer, workload=base.workload,
        finder=base.finder, tracer=base.tracer, session=base.session, timestamp=base.timestamp,
        gpu_name=", ".join(names) or None, host=host, gpus=summary.n, gpu_min_fps=summary.min_fps,
        gpu_min_index=summary.min_gpu, solo_gpu=summary.solo_gpu, solo_fps=summary.solo_fps,
        scaling_efficiency=summary.efficiency)


def config_rows(base_for: Callable[[Measurement], ResultRow], run: MultiGpuSustained,
                gpus: Sequence[GpuInfo], host: str) -> tuple[ResultRow, ...]:
    """The probes.csv rows of one config over N GPUs: solo, one per GPU, aggregate (pure).

    ``base_for(sustained)`` builds the single-GPU row for a sustained measurement, e.g.
    ``lambda s: probe.build_row(cfg, analysis, s, result, tracer, trace, session)``."""
    by_index = {g.index: g for g in gpus}
    pins = {o.gpu.index: o.pinning for rounds in (run.solo_outcomes, run.concurrent_outcomes)
            for outcomes in rounds for o in outcomes}
    solo_base = base_for(run.solo)
    rows = [gpu_row(solo_base, by_index[run.solo_gpu], RowRole.SOLO, host, pins.get(run.solo_gpu))]
    for i, fps in sorted(run.concurrent.items()):
        rows.append(gpu_row(base_for(fps), by_index[i], RowRole.CONCURRENT, host, pins.get(i)))
    rows.append(aggregate_row(solo_base, run.summary, host, gpus))
    return tuple(rows)


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den == 0 or not math.isfinite(num) or not math.isfinite(den):
        return None
    return num / den


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class EngineFigure:
    """One engine over the window: busy ns, bytes (copies), and per frame, duty and GB/s."""

    busy_ns: int
    bytes: int | None
    us_per_frame: float | None
    duty: float | None
    gbps: float | None


@dataclass(frozen=True, slots=True)
class TraceFigures:
    """What a row takes from a trace analysis: one (process, device) group's figures, or, where the trace
    has several (MPI ranks, one process per GPU), all of them summed: frames and engine busy times add up,
    per-frame figures are totals over total frames, the roofline FPS is the groups' roofline FPS added
    (each runs beside the others), the binding engine that of the slowest group, and the measured time
    per frame is the span of all windows over the total frames."""

    groups: int
    frames: int | None
    window_ns: int
    engines: Mapping[str, EngineFigure]
    binds: str | None
    roofline_fps: float | None
    roofline_us: float | None
    idle_ns: int
    overlap_ns: int
    host_sync_ns: int
    serialization: float | None
    measured_us: float | None
    h2d_bytes: int | None
    idle_share: float | None

    @property
    def serial_us(self) -> float | None:
        """The sum of the engines' bars per frame: what a pipeline whose engines take turns pays."""
        bars = [e.us_per_frame for e in self.engines.values() if e.us_per_frame]
        return sum(bars) if bars and self.frames else None

    @property
    def efficiency(self) -> float | None:
        """Roofline time per frame over the measured time per frame."""
        return _ratio(self.roofline_us, self.measured_us)

    def engine_us(self, name: str) -> float | None:
        e = self.engines.get(name)
        return None if e is None else e.us_per_frame


def trace_figures(analysis: TraceAnalysis) -> TraceFigures:
    """The figures of every (process, device) group of ``analysis``, summed where there are several (pure)."""
    groups = tuple(analysis.groups) or (analysis.primary,)
    counts = [g.frames.count for g in groups]
    frames = sum(counts) if all(counts) else None  # type: ignore[arg-type]
    windows = [g.window for g in groups]
    window_ns = sum(w.length_ns for w in windows)
    names = list(dict.fromkeys(n for g in groups for n in g.busy.engines))
    engines: dict[str, EngineFigure] = {}
    for name in names:
        stats = [g.busy.engines[name] for g in groups if name in g.busy.engines]
        busy = sum(st.busy_ns for st in stats)
        nbytes = [st.bytes for st in stats if st.bytes is not None]
        total_bytes = sum(nbytes) if nbytes else None
        if len(groups) == 1:
            st = stats[0]
            engines[name] = EngineFigure(busy, st.bytes, st.us_per_frame, st.duty, st.gbps)
        else:
            engines[name] = EngineFigure(busy, total_bytes, U.us_per_frame_of(busy, frames), _ratio(busy, window_ns),
                                         _ratio(total_bytes, busy) if total_bytes else None)
    if len(groups) == 1:
        g = groups[0]
        roof = g.roofline
        binds, roof_fps, roof_us = roof.engine, roof.fps, roof.us_per_frame
        measured = g.throughput.measured_us_per_frame
        serialization = g.busy.serialization
    else:
        fps = [g.roofline.fps for g in groups]
        roof_fps = sum(fps) if all(fps) else None  # type: ignore[arg-type]
        roof_us = 1e6 / roof_fps if roof_fps else None
        slowest = min(groups, key=lambda g: g.roofline.fps or 0.0)
        binds = slowest.roofline.engine
        span = max(w.end_ns for w in windows) - min(w.start_ns for w in windows)
        measured = U.us_per_frame_of(span, frames)
        total_busy = sum(st.busy_ns for g in groups for st in g.busy.engines.values())
        any_busy = sum(g.busy.any_busy_ns for g in groups)
        serialization = _ratio(total_busy, any_busy)
    idle = sum(g.busy.idle_ns for g in groups)
    h2d = engines.get("h2d")
    return TraceFigures(
        groups=len(groups), frames=frames or None, window_ns=window_ns, engines=engines, binds=binds,
        roofline_fps=roof_fps, roofline_us=roof_us, idle_ns=idle, overlap_ns=sum(g.busy.overlap_ns for g in groups),
        host_sync_ns=sum(g.host.host_sync_ns for g in groups), serialization=serialization, measured_us=measured,
        h2d_bytes=None if h2d is None else h2d.bytes, idle_share=_ratio(idle, window_ns))


def host_bar(analysis: TraceAnalysis | None) -> tuple[Any, float | None]:
    """The busiest launching thread of a trace with one (process, device) group, and its bar in µs per frame
    as traced: analyze's host threads, the thread's work (host code and CUDA calls, its blocked and wait time
    left out; where analyze gives no work figure, its busy time, waits left out). (None, None) without a
    trace, threads or frames, or with several groups (pure)."""
    if analysis is None:
        return None, None
    groups = tuple(analysis.groups) or (analysis.primary,)
    if len(groups) != 1 or not groups[0].host.known:
        return None, None
    thread = groups[0].host.busiest
    if thread is None:
        return None, None
    us = getattr(thread, "work_us_per_frame", None) or thread.us_per_frame
    return (thread, us) if us else (None, None)


def tallest_gpu_bar(figs: TraceFigures) -> float | None:
    """The tallest GPU engine's bar in µs per frame (pure)."""
    bars = [e.us_per_frame for e in figs.engines.values() if e.us_per_frame]
    return max(bars) if bars else None


def build_row(
    cfg: ProbeConfig,
    analysis: TraceAnalysis | None,
    sustained: Measurement | None,
    result: WorkloadResult | None,
    tracer: str,
    trace_name: str | None,
    session: str,
    timestamp: str | None = None,
    *,
    checks: Mapping[str, str] | None = None,
    error: str | None = None,
    profiler_overhead: float | None = None,
    host: HostEstimate | None = None,
    roofline_note: str | None = None,
    untraced: Mapping[str, object] | None = None,
) -> ResultRow:
    """One probes.csv row from a config, its trace analysis, its pass result and its sustained FPS (pure).

    ``analysis`` is None with ``--tracer none``; ``sustained`` (the row keeps its samples) is None until
    it is measured; its metadata's ``source`` says where it came from (``result`` when it says nothing);
    ``result`` is the traced pass's result record (None without a trace, or for an exec program).
    ``checks``: the status of each of the program's own figures against the trace (``rate``,
    ``kernel_time``); ``error``: why the config failed. ``profiler_overhead``: the program's own untraced
    over traced rate, for a sustained figure that was itself traced. ``host``: the busiest launching
    thread's bar estimated without the profiler (:mod:`clusterbench.run.callcost`), which the roofline an
    untraced FPS is set against takes in place of the traced bar; ``roofline_note``: why the sustained FPS
    stands above a roofline; ``untraced``: the columns of ``probe --what-binds``
    (:func:`clusterbench.run.whatbinds.row_columns`). Every ``*_us`` is microseconds per frame; absent means
    not measured.
    """
    p = cfg.params
    figs = trace_figures(analysis) if analysis is not None else None
    trace_cols: dict[str, object] = {}
    if figs is not None:
        frames = figs.frames

        def eng(name: str, what: str) -> object:
            e = figs.engines.get(name)  # an engine with no work in the window is an empty cell, not 0
            return None if e is None or not e.busy_ns else getattr(e, what)

        trace_cols = {
            "kernel_us": eng("kernel", "us_per_frame"), "h2d_us": eng("h2d", "us_per_frame"),
            "d2h_us": eng("d2h", "us_per_frame"),
            "roofline_us": figs.roofline_us if frames else None, "binds": figs.binds,
            "roofline_fps": figs.roofline_fps,
            "kernel_duty": eng("kernel", "duty"), "h2d_duty": eng("h2d", "duty"), "d2h_duty": eng("d2h", "duty"),
            "h2d_gbps": eng("h2d", "gbps"), "d2h_gbps": eng("d2h", "gbps"),
            "idle_us": U.us_per_frame_of(figs.idle_ns, frames),
            "overlap_us": U.us_per_frame_of(figs.overlap_ns, frames),
            "host_sync_us": U.us_per_frame_of(figs.host_sync_ns, frames),
            "serialization": figs.serialization, "measured_us": figs.measured_us, "serial_us": figs.serial_us,
            "efficiency": figs.efficiency if frames else None, "processes": figs.groups,
        }
    measured = figs.measured_us if figs is not None else None
    traced_fps = U.fps_of_us(measured)
    roofline_fps = figs.roofline_fps if figs is not None else None
    host_us = host_bar(analysis)[1]
    untraced_roof = None
    if figs is not None and figs.frames:
        host_untraced = host.untraced_us if host is not None else host_us
        bars = [b for b in (tallest_gpu_bar(figs), host_untraced) if b]
        untraced_roof = max(bars) if bars else None
        if untraced_roof is not None:
            roofline_fps = 1e6 / untraced_roof  # an untraced FPS is set against the untraced roofline
    fps = sustained if sustained is not None and sustained.metric == SUSTAINED_FPS else None
    gbps = sustained if sustained is not None and sustained.metric == SUSTAINED_GBPS else None
    sustained_fps = fps.median if fps is not None else None
    source = None if sustained is None else str(sustained.metadata.get("source") or "result")
    if cfg.exec is not None:
        values = cfg.exec.values
        keys = {k: values.get(k) for k in ("cluster", "cap", "streams", "batch")}
        frames_col = figs.frames if figs is not None and figs.frames else cfg.exec.frames
        setup = {k: values.get(k) for k in ("pedestal_dtype", "pedestal", "transfer")}
    else:
        assert p is not None
        keys = {"cluster": p.cluster, "cap": p.cap, "streams": p.streams, "batch": p.batch}
        frames_col = p.frames
        setup = {"pedestal_dtype": p.pedestal_dtype, "pedestal": p.pedestal, "transfer": p.transfer}
    overhead = profiler_overhead if source == "trace" else _ratio(sustained_fps, traced_fps)
    steady = sustained.metadata.get("steady") if sustained is not None else None
    steady = steady if isinstance(steady, Mapping) else {}
    procs = processes_of(sustained)
    if procs and not steady:  # several processes of their own runs: steady when every one settled, unsteady when
        steady = steady_summary(procs)  # any did not (a program run whole keeps its whole runs' verdict)
    return ResultRow(
        key=RowKey(cfg.label), **keys, frames=frames_col,  # type: ignore[arg-type]
        **trace_cols,  # type: ignore[arg-type]
        sustained_fps=sustained_fps,
        sustained_fps_spread=fps.spread if fps is not None else None,
        sustained_repeats=(sum(len(p.values) for p in procs) if procs else
                           sustained.repeats if sustained is not None else None),
        sustained_processes=len(procs) if procs else None,
        sustained_gbps=fps.input_gbps if fps is not None else (gbps.median if gbps is not None else None),
        sustained_source=source,
        sustained_steady=steady.get("steady") if isinstance(steady.get("steady"), bool) else None,
        sustained_warmups=steady.get("warmups") if type(steady.get("warmups")) is int else None,
        sustained_warmup_s=(float(steady["warmup_s"]) if isinstance(steady.get("warmup_s"), (int, float))
                            and not isinstance(steady.get("warmup_s"), bool) else None),
        fps_efficiency=_ratio(sustained_fps, roofline_fps),
        profiler_overhead=overhead,
        host_us=host_us, host_untraced_us=None if host is None else host.untraced_us,
        host_estimate=None if host is None else host.method, roofline_untraced_us=untraced_roof,
        roofline_note=roofline_note, **(untraced or {}),  # type: ignore[arg-type]
        rate_check=(checks or {}).get("rate"), kernel_check=(checks or {}).get("kernel_time"),
        clusters_per_frame=result.clusters_found / result.frames if result is not None else None,
        dropped_clusters=result.clusters_dropped if result is not None else None,
        **setup,  # type: ignore[arg-type]
        workload=cfg.workload.kind, finder=result.finder if result is not None else None,
        tracer=tracer, trace=trace_name, session=session, timestamp=timestamp or utc_now(), error=error,
        measurements=() if sustained is None else (sustained,),
    )


def build_env(
    *,
    session_id: str,
    argv: tuple[str, ...],
    configs: tuple[ProbeConfig, ...],
    tracer: str,
    gpu: Mapping[str, object],
    versions: Mapping[str, object],
    git: Mapping[str, object],
    guard: Mapping[str, object] | None,
    per_config: Mapping[str, ConfigEntry],
    kernel_sources: Mapping[str, str] | None = None,
    created_utc: str | None = None,
    host: str | None = None,
    unit: Any = None,
) -> EnvRecord:
    """env.json of a probe (pure): ``per_config`` holds the entries of the configs it ran, by label. Merged
    into a results dir (:meth:`clusterbench.model.results.ResultSet.merge`), it keeps every other entry."""
    dtypes = sorted({c.params.pedestal_dtype for c in configs if c.params is not None})
    modes = sorted({c.params.pedestal for c in configs if c.params is not None})
    kinds = sorted({c.workload.kind for c in configs})
    # the kernel sources each traced workload compiled (file -> sha256), once per distinct set
    distinct = {json.dumps(dict(v.kernel_sha256), sort_keys=True): dict(v.kernel_sha256)
                for v in per_config.values() if v.kernel_sha256}
    hashes = [distinct[k] for k in sorted(distinct)]

    def text(value: object) -> str | None:
        return None if value is None else str(value)

    nsys = text(versions.get("nsys"))
    max_clock = gpu.get("max_sm_clock_mhz")
    return EnvRecord(
        tool_version=__version__, session_id=session_id, created_utc=created_utc or utc_now(),
        argv=tuple(argv), host=host or socket.gethostname(),
        git_rev=text(git.get("git_rev")), git_dirty=git.get("git_dirty"),  # type: ignore[arg-type]
        gpu_name=text(gpu.get("name")), gpu_uuid=text(gpu.get("uuid")), driver=text(gpu.get("driver")),
        cuda_driver=text(gpu.get("cuda_driver")),
        max_sm_clock_mhz=max_clock if isinstance(max_clock, int) else None,
        cuda_runtime=text(versions.get("cuda_runtime")), cupy=text(versions.get("cupy")), nsys_version=nsys,
        nsys_cuda_graph_trace=nsys_graph_trace_mode(nsys) if tracer == "nsys" else None,
        python=text(versions.get("python", sys.version.split()[0])),
        pedestal_dtype=",".join(dtypes) or None, pedestal=",".join(modes) or None, tracer=tracer,
        workloads=",".join(kinds),
        kernel_sha256=hashes[0] if len(hashes) == 1 else (hashes or None),
        kernel_sources=dict(kernel_sources) if kernel_sources else None,
        guard=dict(guard) if guard is not None else None,
        configs={RowKey(label): entry for label, entry in per_config.items()},
        unit=unit,
    )


def gpu_identity(reading: NvmlReading | None) -> dict[str, object]:
    """GPU name, UUID, driver, CUDA driver and max SM clock from the guards' NVML reading (pure)."""
    if reading is None:
        return {}
    return {"name": reading.name, "uuid": reading.uuid, "driver": reading.driver_version,
            "cuda_driver": reading.cuda_driver_version, "max_sm_clock_mhz": reading.max_sm_clock_mhz}


@dataclass(frozen=True, slots=True)
class MultiGpuSustained:
    """One config's sustained FPS on the solo GPU alone, then on every selected GPU at once."""

    solo_gpu: int
    solo: Measurement
    concurrent: Mapping[int, Measurement]
    summary: ScalingSummary
    overlap_s: float  # the shortest time all children of a concurrent round ran together
    solo_outcomes: tuple[tuple[GpuOutcome, ...], ...] = ()
    concurrent_outcomes: tuple[tuple[GpuOutcome, ...], ...] = ()
