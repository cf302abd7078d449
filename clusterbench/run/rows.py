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
from clusterbench.model.measurement import Measurement
from clusterbench.model.results import ConfigEntry, EnvRecord, ResultRow, RowKey, RowRole
from clusterbench.model.workload import WorkloadResult
from clusterbench.run.commands import nsys_graph_trace_mode
from clusterbench.run.machine import GpuInfo, Pinning
from clusterbench.run.supervisor import GpuOutcome

if TYPE_CHECKING:
    from clusterbench.analyzers.records import EngineStats, TraceAnalysis
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
    names = sorted({g.name for g in gpus if g.index in summary.gpus})
    return ResultRow(
        key=RowKey(base.key.config, role=RowRole.AGGREGATE, variant=base.key.variant), cluster=base.cluster,
        cap=base.cap, streams=base.streams, batch=base.batch, frames=base.frames,
        sustained_fps=summary.total_fps, sustained_fps_spread=summary.total_fps_spread,
        sustained_repeats=base.sustained_repeats,
        sustained_gbps=None if per_fps_gbps is None else summary.total_fps * per_fps_gbps,
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


def _per_frame_us(ns: int | None, frames: int | None) -> float | None:
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
    cfg: ProbeConfig,
    analysis: TraceAnalysis | None,
    sustained: Measurement | None,
    result: WorkloadResult | None,
    tracer: str,
    trace_name: str | None,
    session: str,
    timestamp: str | None = None,
) -> ResultRow:
    """One probes.csv row from a config, its trace analysis, its pass result and its sustained FPS (pure).

    ``analysis`` is None with ``--tracer none``; ``sustained`` (the row keeps its samples) is None until
    it is measured;
    ``result`` is the traced pass's result record (None without a trace). Every ``*_us`` is
    microseconds per frame; absent means not measured.
    """
    p = cfg.params
    trace_figures: dict[str, object] = {}
    g = analysis.primary if analysis is not None else None
    if g is not None:
        engines = g.busy.engines
        roof = g.roofline
        frames = g.frames.count or None

        def stat(name: str) -> EngineStats | None:
            return engines.get(name)

        kernel, h2d, d2h = stat("kernel"), stat("h2d"), stat("d2h")
        trace_figures = {
            "kernel_us": kernel.us_per_frame if kernel else None, "h2d_us": h2d.us_per_frame if h2d else None,
            "d2h_us": d2h.us_per_frame if d2h else None,
            "roofline_us": roof.us_per_frame, "binds": roof.engine, "roofline_fps": roof.fps,
            "kernel_duty": kernel.duty if kernel else None, "h2d_duty": h2d.duty if h2d else None,
            "d2h_duty": d2h.duty if d2h else None,
            "h2d_gbps": h2d.gbps if h2d else None, "d2h_gbps": d2h.gbps if d2h else None,
            "idle_us": _per_frame_us(g.busy.idle_ns, frames),
            "overlap_us": _per_frame_us(g.busy.overlap_ns, frames),
            "host_sync_us": _per_frame_us(g.host.host_sync_ns, frames),
            "serialization": g.busy.serialization, "measured_us": g.throughput.measured_us_per_frame,
            "efficiency": g.throughput.efficiency,
        }
    measured = g.throughput.measured_us_per_frame if g is not None else None
    traced_fps = 1e6 / measured if measured else None
    roofline_fps = g.roofline.fps if g is not None else None
    sustained_fps = sustained.median if sustained is not None else None
    return ResultRow(
        key=RowKey(cfg.label), cluster=p.cluster, cap=p.cap, streams=p.streams, batch=p.batch, frames=p.frames,
        **trace_figures,  # type: ignore[arg-type]
        sustained_fps=sustained_fps,
        sustained_fps_spread=sustained.spread if sustained is not None else None,
        sustained_repeats=sustained.repeats if sustained is not None else None,
        sustained_gbps=sustained.input_gbps if sustained is not None else None,
        fps_efficiency=_ratio(sustained_fps, roofline_fps),
        profiler_overhead=_ratio(sustained_fps, traced_fps),
        clusters_per_frame=result.clusters_found / result.frames if result is not None else None,
        dropped_clusters=result.clusters_dropped if result is not None else None,
        pedestal_dtype=p.pedestal_dtype, pedestal=p.pedestal, transfer=p.transfer,
        workload=cfg.workload.kind, finder=result.finder if result is not None else None,
        tracer=tracer, trace=trace_name, session=session, timestamp=timestamp or utc_now(),
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
) -> EnvRecord:
    """env.json of a probe (pure): ``per_config`` holds the entries of the configs it ran, by label. Merged
    into a results dir (:meth:`clusterbench.model.results.ResultSet.merge`), it keeps every other entry."""
    dtypes = sorted({c.params.pedestal_dtype for c in configs})
    modes = sorted({c.params.pedestal for c in configs})
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
        pedestal_dtype=",".join(dtypes), pedestal=",".join(modes), tracer=tracer, workloads=",".join(kinds),
        kernel_sha256=hashes[0] if len(hashes) == 1 else (hashes or None),
        kernel_sources=dict(kernel_sources) if kernel_sources else None,
        guard=dict(guard) if guard is not None else None,
        configs={RowKey(label): entry for label, entry in per_config.items()},
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
