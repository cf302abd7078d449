"""Sustained FPS without any profiler: the one runner for 1..N GPUs.

The first GPU (the solo GPU) runs the config alone; with more than one GPU, every GPU then runs it
at once, one process per GPU (SOLO_DEFINITION, docs/scaling.md). With one GPU there is one round:
the GPU alone is all the GPUs at once. Every process runs through
:mod:`clusterbench.run.supervisor` with only its GPU visible and pinned near it, and writes a result
record (docs/workloads.md) whose timed passes give the FPS. A workload whose command takes
``{mode}`` runs all R repeats in one ``sustained`` process; any other runs R rounds of one ``pass``.

Files: ``<stem>.<phase>[.r<k>].gpu<index>.json`` and ``.log``, phase ``sustained`` (one GPU) or
``solo`` and ``concurrent``. Nothing here prints, exits, or imports typer, rich or CuPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from clusterbench.errors import EnvironmentFailure, WorkloadProtocolError
from clusterbench.model.measurement import SUSTAINED_FPS, Measurement
from clusterbench.model.workload import WorkloadResult
from clusterbench.run.clocks import ClockSample, ClockSampler
from clusterbench.run.commands import child_env
from clusterbench.run.machine import GpuInfo, PinTools
from clusterbench.run.rows import MultiGpuSustained, scaling_summary
from clusterbench.run.supervisor import (
    GpuChild,
    GpuOutcome,
    overlap_s,
    plan_gpu_children,
    run_children,
)
from clusterbench.run.tracers import read_result, result_hint


@dataclass(frozen=True, slots=True)
class SustainedCommand:
    """How a workload runs untraced: ``argv(gpu, result_path)``, the rounds it takes for R repeats, and
    the mode its result records must state."""

    argv: Callable[[GpuInfo, Path], Sequence[str]]
    rounds: int = 1
    mode: str = "sustained"


def workload_command(workload: Any, label: str, params: Any, repeat: int) -> SustainedCommand:
    """The untraced command of a workload of :mod:`clusterbench.workloads` (its ``argv`` and
    ``runs_sustained``): one ``sustained`` process of ``repeat`` passes per GPU, or ``repeat`` rounds
    of one ``pass`` each for a program without ``{mode}``."""
    if workload.runs_sustained:
        return SustainedCommand(lambda g, result: workload.argv(label, params, result, "sustained", repeat), 1,
                                "sustained")
    return SustainedCommand(lambda g, result: workload.argv(label, params, result, "pass"), repeat, "pass")


@dataclass(frozen=True, slots=True)
class SustainedRun:
    """What the runner measured: the figures (solo, per GPU, summary, every GPU's outcome) and the solo
    GPU's SM clock over the whole run (NVML; empty where NVML is missing)."""

    figures: MultiGpuSustained
    clocks: tuple[ClockSample, ...]
    max_clock_mhz: int | None

    @property
    def last_result(self) -> WorkloadResult:
        """The solo GPU's last result record (finder, clusters found)."""
        result = self.figures.solo_outcomes[-1][0].result
        assert result is not None  # every outcome was checked
        return result


def sustained_by_gpu(rounds: Sequence[Sequence[GpuOutcome]],
                     input_bytes_per_frame: int | None = None) -> dict[int, Measurement]:
    """Per GPU, the FPS of every timed pass over one or more rounds (a ``sustained`` child reports R
    passes in one round; a pass-only workload runs R rounds), summarised (pure)."""
    fps: dict[int, list[float]] = {}
    for outcomes in rounds:
        for o in outcomes:
            if o.result is not None:
                fps.setdefault(o.gpu.index, []).extend(o.result.fps)
    return {i: Measurement(SUSTAINED_FPS, tuple(v), input_bytes_per_frame) for i, v in sorted(fps.items())}


def run_round(children: Sequence[GpuChild], label: str, mode: str) -> tuple[GpuOutcome, ...]:
    """Start every GPU's child at once, wait for all, and read each one's result record. A child that
    fails or breaks the protocol gives an outcome with ``error``; the others still count."""
    for c in children:
        c.result_path.unlink(missing_ok=True)  # never read a record an earlier run left
    outcomes = []
    for c, child in zip(children, run_children([c.spec for c in children])):
        if not child.ok:
            outcomes.append(GpuOutcome(c.gpu, c.pinning, child, None, child.describe(f"GPU {c.gpu.index}")))
            continue
        try:
            result = read_result(c.result_path, label, c.spec.log_path, mode)[0]
        except WorkloadProtocolError as exc:
            outcomes.append(GpuOutcome(c.gpu, c.pinning, child, None, str(exc), protocol_error=True))
            continue
        outcomes.append(GpuOutcome(c.gpu, c.pinning, child, result))
    return tuple(outcomes)


def require_all_ok(outcomes: Sequence[GpuOutcome], what: str) -> None:
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
        raise WorkloadProtocolError(message, hint=result_hint(bad[0].child.log_path))
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
                children = plan_gpu_children(selected, tools, command.argv, out_dir, stem, env, cwd, timeout_s)
                outcomes = run_round(children, label, command.mode)
                require_all_ok(outcomes, _what(phase, label, k, command.rounds))
                rounds.append(outcomes)
            by_phase[phase] = tuple(rounds)
    solo_rounds = by_phase.get("solo", by_phase.get("sustained", ()))
    together = by_phase.get("concurrent", solo_rounds)
    solo = sustained_by_gpu(solo_rounds, input_bytes_per_frame)[solo_gpu.index]
    concurrent = sustained_by_gpu(together, input_bytes_per_frame)
    figures = MultiGpuSustained(solo_gpu.index, solo, concurrent, scaling_summary(solo_gpu.index, solo, concurrent),
                                min(overlap_s(r) for r in together), solo_rounds, together)
    return SustainedRun(figures, clocks.snapshot(), clocks.max_clock_mhz)
