"""Sustained FPS without any profiler: the one runner for 1..N GPUs.

The first GPU (the solo GPU) runs the config alone; with more than one GPU, every GPU then runs it
at once, one process per GPU (SOLO_DEFINITION, docs/scaling.md). With one GPU there is one round:
the GPU alone is all the GPUs at once. Every process runs through
:mod:`clusterbench.run.supervisor` with only its GPU visible and pinned near it, and writes a result
record (docs/workloads.md) whose timed passes give the FPS. A workload whose command takes
``{mode}`` runs all R repeats in one ``sustained`` process; any other runs R rounds of one ``pass``.
A program probed as it is (``exec``) writes no record: each of its R runs gives one figure read from
its output (its own rate, or frames over its wall time: :func:`exec_command`).

Files: ``<stem>.<phase>[.r<k>].gpu<index>.json`` and ``.log``, phase ``sustained`` (one GPU) or
``solo`` and ``concurrent``. Nothing here prints, exits, or imports typer, rich or CuPy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from clusterbench.errors import EnvironmentFailure, WorkloadProtocolError
from clusterbench.model.measurement import SUSTAINED_FPS, SUSTAINED_GBPS, Measurement
from clusterbench.model.workload import WorkloadResult
from clusterbench.run.clocks import ClockSample, ClockSampler
from clusterbench.run.commands import child_env
from clusterbench.run.machine import GpuInfo, PinTools
from clusterbench.run.rows import MultiGpuSustained, scaling_summary
from clusterbench.run.supervisor import (
    ChildOutcome,
    GpuChild,
    GpuOutcome,
    overlap_s,
    plan_gpu_children,
    run_children,
)
from clusterbench.run.tracers import read_result, result_hint


# An exec run's figure from its output: (metric, values) or ValueError with the user's message.
OutputReader = Callable[[ChildOutcome], tuple[str, tuple[float, ...]]]


@dataclass(frozen=True, slots=True)
class SustainedCommand:
    """How a workload runs untraced: ``argv(gpu, result_path)``, the rounds it takes for R repeats, and
    the mode its result records must state; or, for a program without result records (``mode`` None),
    ``reader``: its figure from its output, with the lines to ``watch``. ``metadata``: how the figure is
    made, kept with the measurement; ``hint``: what to check when a run gives no figure."""

    argv: Callable[[GpuInfo, Path], Sequence[str]]
    rounds: int = 1
    mode: str | None = "sustained"
    reader: OutputReader | None = None
    watch: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    hint: str | None = None


def workload_command(workload: Any, label: str, params: Any, repeat: int) -> SustainedCommand:
    """The untraced command of a workload of :mod:`clusterbench.workloads` (its ``argv`` and
    ``runs_sustained``): one ``sustained`` process of ``repeat`` passes per GPU, or ``repeat`` rounds
    of one ``pass`` each for a program without ``{mode}``."""
    meta = {"source": "result"}
    if workload.runs_sustained:
        return SustainedCommand(lambda g, result: workload.argv(label, params, result, "sustained", repeat), 1,
                                "sustained", metadata=meta)
    return SustainedCommand(lambda g, result: workload.argv(label, params, result, "pass"), repeat, "pass",
                            metadata=meta)


def exec_command(argv: Sequence[str], spec: Any, repeat: int) -> SustainedCommand:
    """The untraced runs of a program probed as it is (``spec``: its config's ExecSpec): ``repeat`` runs,
    each one figure: its own rate (the last line ``spec.rate`` matches, in its unit), or ``spec.frames``
    over its wall time between the ``wall_start`` and ``wall_end`` lines (or over its whole run, start-up
    included)."""
    from clusterbench.run.rates import compile_pattern, read_figure, wall_between

    source = spec.source
    if source == "rate":
        rx = compile_pattern(spec.rate, "--rate")

        def read_rate(child: ChildOutcome) -> tuple[str, tuple[float, ...]]:
            reading = read_figure(child.output(), rx, spec.rate_unit)
            if reading is None:
                raise ValueError(f"no line of its output matches --rate {spec.rate!r}")
            return (SUSTAINED_GBPS if reading.metric == "GB/s" else SUSTAINED_FPS), (reading.converted,)

        return SustainedCommand(lambda g, r: tuple(argv), repeat, None, read_rate,
                                metadata={"source": "rate", "rate": spec.rate, "unit": spec.rate_unit},
                                hint=f"check --rate {spec.rate!r} against the program's output in the log")
    if source != "wall":
        raise ValueError(f"sustained source {source!r} runs nothing untraced")
    frames = spec.frames
    markers = (spec.wall_start, spec.wall_end) if spec.wall_start is not None else ()

    def read_wall(child: ChildOutcome) -> tuple[str, tuple[float, ...]]:
        if markers:
            seconds = wall_between(*child.marks) if len(child.marks) == 2 else None
            if seconds is None:
                raise ValueError(f"its output has no line matching --wall-start {markers[0]!r} followed by one "
                                 f"matching --wall-end {markers[1]!r}")
        else:
            seconds = child.ended_s - child.started_s
        return SUSTAINED_FPS, (frames / seconds,)

    meta = ({"source": "wall", "frames": frames, "wall_start": markers[0], "wall_end": markers[1]} if markers else
            {"source": "wall-run", "frames": frames, "includes": "the whole run, start-up included"})
    return SustainedCommand(lambda g, r: tuple(argv), repeat, None, read_wall, watch=tuple(markers), metadata=meta,
                            hint="check --wall-start and --wall-end against the program's output in the log")


@dataclass(frozen=True, slots=True)
class SustainedRun:
    """What the runner measured: the figures (solo, per GPU, summary, every GPU's outcome) and the solo
    GPU's SM clock over the whole run (NVML; empty where NVML is missing)."""

    figures: MultiGpuSustained
    clocks: tuple[ClockSample, ...]
    max_clock_mhz: int | None

    @property
    def last_result(self) -> WorkloadResult | None:
        """The solo GPU's last result record (finder, clusters found); None for an exec program."""
        return self.figures.solo_outcomes[-1][0].result


def sustained_by_gpu(rounds: Sequence[Sequence[GpuOutcome]], input_bytes_per_frame: int | None = None,
                     metadata: Mapping[str, Any] | None = None) -> dict[int, Measurement]:
    """Per GPU, every figure over one or more rounds (a ``sustained`` child reports R passes in one round;
    a pass-only workload or an exec program runs R rounds), summarised (pure). ValueError when the runs
    gave figures of different metrics."""
    values: dict[int, list[float]] = {}
    metrics = {o.metric or SUSTAINED_FPS for outcomes in rounds for o in outcomes if o.values}
    if len(metrics) > 1:
        raise ValueError(f"the runs gave figures in different units ({', '.join(sorted(metrics))})")
    metric = metrics.pop() if metrics else SUSTAINED_FPS
    for outcomes in rounds:
        for o in outcomes:
            values.setdefault(o.gpu.index, []).extend(o.values)
    per_frame = input_bytes_per_frame if metric == SUSTAINED_FPS else None
    return {i: Measurement(metric, tuple(v), per_frame, dict(metadata or {})) for i, v in sorted(values.items()) if v}


def run_round(children: Sequence[GpuChild], label: str, mode: str | None,
              reader: OutputReader | None = None) -> tuple[GpuOutcome, ...]:
    """Start every GPU's child at once, wait for all, and read each one's figures: its result record
    (``mode``), or with ``reader`` its output. A child that fails, breaks the protocol or prints no
    figure gives an outcome with ``error``; the others still count."""
    for c in children:
        c.result_path.unlink(missing_ok=True)  # never read a record an earlier run left
    outcomes = []
    for c, child in zip(children, run_children([c.spec for c in children])):
        if not child.ok:
            outcomes.append(GpuOutcome(c.gpu, c.pinning, child, None, child.describe(f"GPU {c.gpu.index}")))
            continue
        if reader is not None:
            try:
                metric, values = reader(child)
            except ValueError as exc:
                outcomes.append(GpuOutcome(c.gpu, c.pinning, child, None,
                                           f"config {label!r} on GPU {c.gpu.index}: {exc}; last lines of "
                                           f"{child.log_path.name}:\n{child.tail}", protocol_error=True))
                continue
            outcomes.append(GpuOutcome(c.gpu, c.pinning, child, None, values=values, metric=metric))
            continue
        assert mode is not None
        try:
            result = read_result(c.result_path, label, c.spec.log_path, mode)[0]
        except WorkloadProtocolError as exc:
            outcomes.append(GpuOutcome(c.gpu, c.pinning, child, None, str(exc), protocol_error=True))
            continue
        outcomes.append(GpuOutcome(c.gpu, c.pinning, child, result, values=result.fps, metric=SUSTAINED_FPS))
    return tuple(outcomes)


def require_all_ok(outcomes: Sequence[GpuOutcome], what: str, hint: str | None = None) -> None:
    """Raise naming every GPU whose child failed: WorkloadProtocolError when each broke the workload
    protocol, else EnvironmentFailure (both exit 1), since a figure with a GPU missing says nothing."""
    bad = [o for o in outcomes if not o.ok]
    if not bad:
        return
    protocol = all(o.protocol_error for o in bad)
    if len(outcomes) == 1:
        o = bad[0]
        message = (o.error or "") if o.protocol_error else o.child.describe(f"{what} on GPU {o.gpu.index}")
    else:
        message = f"{what}: {len(bad)} of {len(outcomes)} GPU processes failed:\n" + "\n".join(
            f"GPU {o.gpu.index}: {o.error}" if o.protocol_error else (o.error or "") for o in bad)
    if protocol:
        raise WorkloadProtocolError(message, hint=(f"{hint}: {bad[0].child.log_path}" if hint
                                                   else result_hint(bad[0].child.log_path)))
    logs = ", ".join(str(o.child.log_path) for o in bad)
    raise EnvironmentFailure(message, hint=f"read the whole log{'s' if len(bad) > 1 else ''}: {logs}")


def _what(phase: str, label: str, round_index: int, rounds: int) -> str:
    which = {"sustained": "", "solo": "solo ", "concurrent": "concurrent "}[phase]
    of = f" (round {round_index + 1} of {rounds})" if rounds > 1 else ""
    return f"the {which}sustained-FPS run of config {label!r}{of}"


def measure_sustained(gpus: Sequence[GpuInfo], tools: PinTools, command: SustainedCommand, out_dir: Path,
                      label: str, *, input_bytes_per_frame: int | None = None,
                      base_env: Mapping[str, str] | None = None, cwd: str | None = None,
                      timeout_s: float | None = None,
                      on_round: Callable[[str, int], None] | None = None) -> SustainedRun:
    """Sustained FPS of config ``label`` on ``gpus`` (the first is the solo GPU): one round on it alone
    with one GPU; with several, the solo round, then every GPU at once, with the same command and
    pinning. ``on_round(phase, k)`` reports each round as it starts. A failed child: EnvironmentFailure
    or WorkloadProtocolError (exit 1) naming its GPU, with its log's last lines."""
    if not gpus:
        raise ValueError("measure_sustained needs at least one GPU")
    if command.rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {command.rounds}")
    emit = on_round or (lambda phase, k: None)
    env = child_env() if base_env is None else base_env
    solo_gpu = gpus[0]
    phases = [("sustained", (solo_gpu,))] if len(gpus) == 1 else [("solo", (solo_gpu,)), ("concurrent", tuple(gpus))]
    by_phase: dict[str, tuple[tuple[GpuOutcome, ...], ...]] = {}
    with ClockSampler(solo_gpu.index) as clocks:
        for phase, selected in phases:
            rounds = []
            for k in range(command.rounds):
                emit(phase, k)
                stem = f"{label}.{phase}" + (f".r{k}" if command.rounds > 1 else "")
                children = plan_gpu_children(selected, tools, command.argv, out_dir, stem, env, cwd, timeout_s,
                                             command.watch)
                outcomes = run_round(children, label, command.mode, command.reader)
                require_all_ok(outcomes, _what(phase, label, k, command.rounds), command.hint)
                rounds.append(outcomes)
            by_phase[phase] = tuple(rounds)
    solo_rounds = by_phase.get("solo", by_phase.get("sustained", ()))
    together = by_phase.get("concurrent", solo_rounds)
    try:
        solo = sustained_by_gpu(solo_rounds, input_bytes_per_frame, command.metadata)[solo_gpu.index]
        concurrent = sustained_by_gpu(together, input_bytes_per_frame, command.metadata)
    except ValueError as exc:
        raise EnvironmentFailure(f"the sustained runs of config {label!r}: {exc}",
                                 hint=command.hint or "read the logs of the runs") from None
    figures = MultiGpuSustained(solo_gpu.index, solo, concurrent, scaling_summary(solo_gpu.index, solo, concurrent),
                                min(overlap_s(r) for r in together), solo_rounds, together)
    return SustainedRun(figures, clocks.snapshot(), clocks.max_clock_mhz)
