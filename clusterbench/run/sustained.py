"""Sustained FPS without any profiler: the one runner for 1..N GPUs, runs until they are steady.

The first GPU (the solo GPU) runs the config alone; with more than one GPU, every GPU then runs it
at once, one process per GPU (SOLO_DEFINITION, docs/scaling.md). With one GPU there is one round:
the GPU alone is all the GPUs at once. Every process runs through
:mod:`clusterbench.run.supervisor` with only its GPU visible and pinned near it, and writes a result
record (docs/workloads.md) whose timed passes give the FPS.

When runs stop is :mod:`clusterbench.model.steady`'s rule: warm-up runs that do not count, then runs until
the last R (``--repeat``) agree within the noise, or a cap. Our finder runs the rule itself in its one
``sustained`` process (runs of one or more passes, at least 100 ms each) and says in its record which runs
counted; another workload whose command takes ``{mode}`` gives R passes in one process, judged by the same
rule; a workload without ``{mode}`` and a program probed as it is (``exec``) run whole, one figure per run,
until the last R agree or R + 2 runs were made (each run is a whole program run). A concurrent round
(``--gpus``) runs a fixed plan, the solo round's, so that the GPUs run together. Every run is kept with
the measurement (``metadata["steady"]``: its figure, time, passes, start), and so is the verdict.

Files: ``<stem>.<phase>[.r<k>].gpu<index>.json`` and ``.log``, phase ``sustained`` (one GPU) or
``solo`` and ``concurrent``, ``.r<k>`` for the k-th run of a program run whole. Nothing here prints,
exits, or imports typer, rich or CuPy.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from clusterbench.errors import EnvironmentFailure, WorkloadProtocolError
from clusterbench.model.measurement import SUSTAINED_FPS, SUSTAINED_GBPS, Measurement
from clusterbench.model.processes import ProcessRun, process_clock, process_measurement, processes_of
from clusterbench.model.steady import Run, Steadiness, SteadyRule, judge, stop_reason, whole_runs_rule
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

# Our finder's side channels (clusterbench.workloads.cupy.run, which this module must not import: it is the
# child's): the steady rule of a concurrent round, and the file it waits on before its runs.
STEADY_ENV = "CLUSTERBENCH_STEADY"
GO_ENV = "CLUSTERBENCH_GO_FILE"
GO_BEFORE_ENV = "CLUSTERBENCH_GO_BEFORE"  # "runs" (after its set-up) or "gpu" (before any GPU work)
READY_SUFFIX = ".ready"  # <go file>.ready: the process is set up and waits for its go (our finder writes it)
GO_POLL_S = 0.005
# A process's runs end this long before its parent sees it end, at most (its record written, its exit): the clock
# window of its runs is widened by it.
RUN_END_SLACK_S = 0.1

# An exec run's figure from its output: (metric, value, how it was read) or ValueError with the user's message.
OutputReader = Callable[[ChildOutcome], tuple[str, float, Mapping[str, Any]]]


@dataclass(frozen=True, slots=True)
class SustainedCommand:
    """How a workload runs untraced: ``argv(gpu, result_path)`` and ``rule``, when its runs stop.

    ``mode``: what its result records must state (None: a program without result records, whose figure
    ``reader`` reads from its output, with the lines to ``watch``). ``whole_runs``: each process is one run
    (rounds until the rule stops them); else one process gives every run. ``own_steady``: the process runs
    the rule itself and its record says which runs counted (our finder); ``go``: it waits for the probe's
    go before its runs (GO_ENV). ``metadata``: how the figure is made, kept with the measurement;
    ``hint``: what to check when a run gives no figure."""

    argv: Callable[[GpuInfo, Path], Sequence[str]]
    rule: SteadyRule = field(default_factory=SteadyRule)
    mode: str | None = "sustained"
    whole_runs: bool = False
    reader: OutputReader | None = None
    watch: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    hint: str | None = None
    own_steady: bool = False
    go: bool = False


def workload_command(workload: Any, label: str, params: Any, repeat: int, processes: int | None = None
                     ) -> SustainedCommand:
    """The untraced command of a workload of :mod:`clusterbench.workloads` (its ``argv``, ``kind`` and
    ``runs_sustained``): our finder's ``sustained`` process that runs until steady (``repeat`` counted runs);
    another program's ``sustained`` process of ``repeat`` passes; or, for a program without ``{mode}``, one
    ``pass`` per process until the last ``processes`` (default ``repeat``) agree."""
    meta = {"source": "result"}
    if workload.runs_sustained:
        ours = getattr(workload, "kind", None) == "cupy"
        rule = SteadyRule(counted=repeat) if ours else SteadyRule(counted=repeat, min_warmups=0, max_runs=repeat)
        return SustainedCommand(lambda g, result: workload.argv(label, params, result, "sustained", repeat), rule,
                                "sustained", metadata=meta, own_steady=ours, go=ours)
    return SustainedCommand(lambda g, result: workload.argv(label, params, result, "pass"),
                            whole_runs_rule(repeat if processes is None else processes), "pass", whole_runs=True,
                            metadata=meta)


def exec_command(argv: Sequence[str], spec: Any, repeat: int) -> SustainedCommand:
    """The untraced runs of a program probed as it is (``spec``: its config's ExecSpec): whole runs until the
    last ``repeat`` agree (at most ``repeat`` + 2), each one figure: its own rate (the last line ``spec.rate``
    matches, in its unit), or ``spec.frames`` over its wall time between the ``wall_start`` and ``wall_end``
    lines (or over its whole run, start-up included)."""
    from clusterbench.run.rates import compile_pattern, read_figure, wall_between

    source = spec.source
    rule = whole_runs_rule(repeat)
    if source == "rate":
        rx = compile_pattern(spec.rate, "--rate")

        def read_rate(child: ChildOutcome) -> tuple[str, float, Mapping[str, Any]]:
            reading = read_figure(child.output(), rx, spec.rate_unit)
            if reading is None:
                raise ValueError(f"no line of its output matches --rate {spec.rate!r}")
            info = {"line": reading.line, "value": reading.value, "unit": reading.unit}
            if reading.conversion:
                info["conversion"] = reading.conversion
            return (SUSTAINED_GBPS if reading.metric == "GB/s" else SUSTAINED_FPS), reading.converted, info

        return SustainedCommand(lambda g, r: tuple(argv), rule, None, True, read_rate,
                                metadata={"source": "rate", "rate": spec.rate, "unit": spec.rate_unit},
                                hint=f"check --rate {spec.rate!r} against the program's output in the log")
    if source != "wall":
        raise ValueError(f"sustained source {source!r} runs nothing untraced")
    frames = spec.frames
    markers = (spec.wall_start, spec.wall_end) if spec.wall_start is not None else ()

    def read_wall(child: ChildOutcome) -> tuple[str, float, Mapping[str, Any]]:
        if markers:
            seconds = wall_between(*child.marks) if len(child.marks) == 2 else None
            if seconds is None:
                raise ValueError(f"its output has no line matching --wall-start {markers[0]!r} followed by one "
                                 f"matching --wall-end {markers[1]!r}")
        else:
            seconds = child.ended_s - child.started_s
        return SUSTAINED_FPS, frames / seconds, {"wall_s": seconds}

    meta = ({"source": "wall", "frames": frames, "wall_start": markers[0], "wall_end": markers[1]} if markers else
            {"source": "wall-run", "frames": frames, "includes": "the whole run, start-up included"})
    return SustainedCommand(lambda g, r: tuple(argv), rule, None, True, read_wall, watch=tuple(markers), metadata=meta,
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

    @property
    def steadiness(self) -> Steadiness | None:
        """The solo GPU's verdict: did its runs reach a steady state."""
        return steadiness_of(self.figures.solo)


def steadiness_of(m: Measurement | None) -> Steadiness | None:
    """The verdict a sustained measurement carries (``metadata["steady"]``; for several processes, the last
    process's), or None."""
    procs = processes_of(m)
    if procs and (m is None or "steady" not in m.metadata):
        return procs[-1].steady
    doc = None if m is None else m.metadata.get("steady")
    if not isinstance(doc, Mapping):
        return None
    try:
        return Steadiness.from_json(doc)
    except (ValueError, TypeError):
        return None


def outcome_runs(o: GpuOutcome, offset_s: float = 0.0) -> tuple[tuple[Run, ...], Steadiness | None]:
    """The runs of one GPU's child, started ``offset_s`` after the measurement began, and its own verdict
    where its record gives one (our finder's ``extra.steady``, re-judged from its runs)."""
    if o.result is not None:
        doc = o.result.extra.get("steady")
        if isinstance(doc, Mapping):
            verdict = Steadiness.from_json(doc)
            runs = tuple(dataclasses.replace(r, started_s=r.started_s + offset_s) for r in verdict.runs)
            return runs, dataclasses.replace(verdict, runs=runs)
        return tuple(Run(f, s, 1, offset_s) for f, s in zip(o.result.fps, o.result.pass_s)), None
    return tuple(Run(v, None, 1, offset_s + o.child.started_s, o.meta) for v in o.values), None


def sustained_by_gpu(rounds: Sequence[Sequence[GpuOutcome]], input_bytes_per_frame: int | None = None,
                     metadata: Mapping[str, Any] | None = None, rule: SteadyRule | None = None,
                     offsets: Sequence[float] | None = None, reason: str | None = None) -> dict[int, Measurement]:
    """Per GPU, its runs over one or more rounds (our finder gives every run in one round, with its own
    verdict; a program run whole gives one run per round), judged by ``rule`` (pure): the counted runs are
    the measurement's samples, and every run with the verdict is its ``metadata["steady"]``. ValueError when
    the runs gave figures of different metrics, or a record's steady block is malformed."""
    metrics = {o.metric or SUSTAINED_FPS for outcomes in rounds for o in outcomes if o.values}
    if len(metrics) > 1:
        raise ValueError(f"the runs gave figures in different units ({', '.join(sorted(metrics))})")
    metric = metrics.pop() if metrics else SUSTAINED_FPS
    runs: dict[int, list[Run]] = {}
    own: dict[int, Steadiness] = {}
    for k, outcomes in enumerate(rounds):
        for o in outcomes:
            got, verdict = outcome_runs(o, offsets[k] if offsets else 0.0)
            runs.setdefault(o.gpu.index, []).extend(got)
            if verdict is not None:
                own[o.gpu.index] = verdict
    per_frame = input_bytes_per_frame if metric == SUSTAINED_FPS else None
    rule = rule or SteadyRule(counted=max(1, max((len(r) for r in runs.values()), default=1)), min_warmups=0)
    out = {}
    for i, r in sorted(runs.items()):
        if not r:
            continue
        verdict = own.get(i) or judge(r, rule, reason)
        out[i] = Measurement(metric, verdict.values, per_frame, {**dict(metadata or {}), "steady": verdict.to_json()})
    return out


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
                metric, value, meta = reader(child)
            except ValueError as exc:
                outcomes.append(GpuOutcome(c.gpu, c.pinning, child, None,
                                           f"config {label!r} on GPU {c.gpu.index}: {exc}; last lines of "
                                           f"{child.log_path.name}:\n{child.tail}", protocol_error=True))
                continue
            outcomes.append(GpuOutcome(c.gpu, c.pinning, child, None, values=(value,), metric=metric, meta=meta))
            continue
        assert mode is not None
        try:
            result = read_result(c.result_path, label, c.spec.log_path, mode)[0]
            steady = result.extra.get("steady")
            if steady is not None:  # our finder: its counted runs are its figures
                values = Steadiness.from_json(steady).values  # type: ignore[arg-type]
            else:
                values = result.fps
        except WorkloadProtocolError as exc:
            outcomes.append(GpuOutcome(c.gpu, c.pinning, child, None, str(exc), protocol_error=True))
            continue
        except (ValueError, TypeError) as exc:
            outcomes.append(GpuOutcome(c.gpu, c.pinning, child, None,
                                       f"config {label!r}: its result record {c.result_path.name}: extra.steady: "
                                       f"{exc}", protocol_error=True))
            continue
        outcomes.append(GpuOutcome(c.gpu, c.pinning, child, result, values=values, metric=SUSTAINED_FPS))
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


def _what(phase: str, label: str, round_index: int, whole_runs: bool, several: bool = False) -> str:
    which = {"sustained": "", "solo": "solo ", "concurrent": "concurrent "}[phase]
    of = f" (run {round_index + 1})" if whole_runs else (f" (process {round_index + 1})" if several else "")
    return f"the {which}sustained-FPS run of config {label!r}{of}"


def concurrent_rule(command: SustainedCommand, solo: Measurement) -> SteadyRule:
    """A concurrent round's plan: the solo round's, fixed (as many warm-ups, passes per run and counted runs),
    so that every GPU runs for as long as the others (pure)."""
    verdict = steadiness_of(solo)
    rule = command.rule
    if verdict is None or not command.own_steady:
        return dataclasses.replace(rule, fixed=True)
    passes = verdict.runs[-1].passes if verdict.runs else None
    return dataclasses.replace(rule, fixed=True, min_warmups=max(rule.min_warmups, verdict.warmups), passes=passes)


def measure_sustained(gpus: Sequence[GpuInfo], tools: PinTools, command: SustainedCommand, out_dir: Path,
                      label: str, *, input_bytes_per_frame: int | None = None,
                      base_env: Mapping[str, str] | None = None, cwd: str | None = None,
                      timeout_s: float | None = None,
                      on_round: Callable[[str, int], None] | None = None,
                      go_file: Path | None = None, processes: int = 1) -> SustainedRun:
    """Sustained FPS of config ``label`` on ``gpus`` (the first is the solo GPU): its runs on it alone, in
    ``processes`` fresh processes (a command run whole: until its rule stops, each run a process), each until
    the command's rule stops its runs; with several GPUs, then on every GPU at once with the solo round's plan.
    ``on_round(phase, k)`` reports each process round as it starts. A command that waits for a go
    (``command.go``, our finder) starts every process at once, so that each sets up while the tracer finishes,
    and gives them their go one at a time (:class:`_ProcessChain`): the first once ``go_file`` says go (the
    caller writes it once the GPU is the runs' alone; no file: at once) and every process is set up, each later
    one once the one before has ended. A failed child: EnvironmentFailure or WorkloadProtocolError (exit 1)
    naming its GPU, with its log's last lines."""
    if not gpus:
        raise ValueError("measure_sustained needs at least one GPU")
    if type(processes) is not int or processes < 1:
        raise ValueError(f"processes must be an integer >= 1, got {processes!r}")
    emit = on_round or (lambda phase, k: None)
    env = dict(child_env() if base_env is None else base_env)
    solo_gpu = gpus[0]
    phases = [("sustained", (solo_gpu,))] if len(gpus) == 1 else [("solo", (solo_gpu,)), ("concurrent", tuple(gpus))]
    by_phase: dict[str, tuple[tuple[GpuOutcome, ...], ...]] = {}
    offsets: dict[str, list[float]] = {}
    reasons: dict[str, str | None] = {}
    rules: dict[str, SteadyRule] = {}
    windows: list[tuple[float, float, float]] = []  # per solo process: its go and end (time.time()), and its start
    solo: Measurement | None = None

    def figures_of(phase: str) -> dict[int, Measurement]:
        try:
            return sustained_by_gpu(by_phase[phase], input_bytes_per_frame, command.metadata, rules[phase],
                                    offsets[phase], reasons[phase])
        except ValueError as exc:
            raise EnvironmentFailure(f"the sustained runs of config {label!r}: {exc}",
                                     hint=command.hint or "read the logs of the runs") from None

    def run_phase(phase: str, selected: tuple[GpuInfo, ...], rule: SteadyRule, phase_env: dict[str, str]) -> None:
        rounds: list[tuple[GpuOutcome, ...]] = []
        starts: list[float] = []
        t0 = time.monotonic()
        reason = None
        if command.whole_runs:
            runs: list[Run] = []
            k = 0
            while True:
                emit(phase, k)
                starts.append(time.monotonic() - t0)
                t_wall = time.time()
                children = plan_gpu_children(selected, tools, command.argv, out_dir, f"{label}.{phase}.r{k}",
                                             phase_env, cwd, timeout_s, command.watch)
                outcomes = run_round(children, label, command.mode, command.reader)
                require_all_ok(outcomes, _what(phase, label, k, True), command.hint)
                rounds.append(outcomes)
                windows.append((t_wall, time.time(), starts[-1]))
                runs.extend(outcome_runs(outcomes[0], starts[-1])[0])
                reason = stop_reason(runs, time.monotonic() - t0, rule)
                if reason is not None:
                    break
                k += 1
        else:
            n = processes if phase != "concurrent" else 1
            gated = phase != "concurrent"
            chain = _ProcessChain(dataclasses.replace(command, go=command.go and gated), selected, tools, out_dir,
                                  label, phase, phase_env, cwd, timeout_s, go_file if gated else None, n)
            chain.start_all()  # our finder: every process sets up at once, each then waits for its go
            try:
                for k in range(n):
                    emit(phase, k)
                    starts.append(time.monotonic() - t0)
                    t_go = chain.open(k)
                    outcomes = chain.join(k)
                    require_all_ok(outcomes, _what(phase, label, k, False, n > 1), command.hint)
                    rounds.append(outcomes)
                    windows.append((t_go, time.time(), starts[-1]))
            finally:
                chain.close("the process before it failed")
        by_phase[phase], offsets[phase], reasons[phase] = tuple(rounds), starts, reason

    with ClockSampler(solo_gpu.index) as clocks:
        for phase, selected in phases:
            rule = command.rule if phase != "concurrent" or solo is None else concurrent_rule(command, solo)
            rules[phase] = rule
            phase_env = dict(env)
            if phase == "concurrent" and command.own_steady:
                phase_env[STEADY_ENV] = json.dumps(rule.to_json())
            run_phase(phase, selected, rule, phase_env)
            if phase != "concurrent":
                solo = _solo_measurement(figures_of(phase)[solo_gpu.index], by_phase[phase], offsets[phase],
                                         windows, clocks.snapshot(), command, rule, processes, input_bytes_per_frame)
    solo_phase = "solo" if "solo" in by_phase else "sustained"
    solo_rounds = by_phase[solo_phase]
    together = by_phase.get("concurrent", solo_rounds)
    assert solo is not None
    concurrent = figures_of("concurrent") if "concurrent" in by_phase else {solo_gpu.index: solo}
    figures = MultiGpuSustained(solo_gpu.index, solo, concurrent, scaling_summary(solo_gpu.index, solo, concurrent),
                                min(overlap_s(r) for r in together), solo_rounds, together)
    return SustainedRun(figures, clocks.snapshot(), clocks.max_clock_mhz)


def _solo_measurement(base: Measurement, rounds: Sequence[Sequence[GpuOutcome]], offsets: Sequence[float],
                      windows: Sequence[tuple[float, float, float]], clocks: Sequence[ClockSample],
                      command: SustainedCommand, rule: SteadyRule, processes: int,
                      input_bytes_per_frame: int | None) -> Measurement:
    """The solo GPU's measurement: as :func:`sustained_by_gpu` made it (``base``) for one process; for several,
    one :class:`~clusterbench.model.processes.ProcessRun` per process (a command run whole: per counted run),
    each with its runs, verdict and clock (:func:`~clusterbench.model.processes.process_clock`), the process
    medians its samples."""
    if processes < 2:
        return base
    samples = [(c.t_s, c.sm_mhz, c.throttle) for c in clocks]
    procs: list[ProcessRun] = []
    if command.whole_runs:
        counted = len(base.samples)
        firsts = len(rounds) - counted
        for i, k in enumerate(range(firsts, len(rounds))):
            t_go, t_end, start = windows[k]
            procs.append(ProcessRun(i, (base.samples[i],), None, start, t_end - t_go,
                                    process_clock(samples, t_go, t_end)))
        meta = dict(base.metadata)  # its "steady": every whole run, warm-ups too, and the verdict
        return process_measurement(base.metric, procs, input_bytes_per_frame if base.metric == SUSTAINED_FPS
                                   else None, meta)
    for k, outcomes in enumerate(rounds):
        runs, verdict = outcome_runs(outcomes[0], offsets[k])
        if verdict is None:
            verdict = judge(runs, rule)
        t_go, t_end, start = windows[k]
        # the clock over its runs: they end as the process does, and last from the first run's start to the last's
        # end (a later process's pedestal and warm-up, and the first's wait for its go, are left out)
        span = (verdict.runs[-1].started_s - verdict.runs[0].started_s + (verdict.runs[-1].seconds or 0.0)
                if verdict.runs else t_end - t_go)
        clock = process_clock(samples, max(t_go, t_end - span - RUN_END_SLACK_S), t_end)
        procs.append(ProcessRun(k, verdict.values, verdict, start, t_end - t_go, clock))
    meta = {key: v for key, v in base.metadata.items() if key != "steady"}
    return process_measurement(base.metric, procs, base.input_bytes_per_frame, meta)


class _ProcessChain:
    """The solo processes of one config, one after the other on the GPU. Process k's child has its own files
    (``<label>.<phase>.p<k>``; the first keeps ``<label>.<phase>``). For a command that waits for a go
    (our finder), every process is started at once (:meth:`start_all`): each sets up (imports, buffers, kernels,
    pedestal, a warm-up pass) while the tracer finishes, and waits at its own gate (``<stem>.go``) before its
    runs, saying so in ``<gate>.ready``; :meth:`open` gives process k its go: the first once the caller's go
    file says go (or at once without one) and every process is waiting or has ended, each later one once the
    one before it has ended. Another command's processes start one at a time, when opened. :meth:`join`
    waits for a process's outcome; :meth:`close` stops a process never given its go and waits for the rest."""

    def __init__(self, command: SustainedCommand, selected: tuple[GpuInfo, ...], tools: PinTools, out_dir: Path,
                 label: str, phase: str, env: Mapping[str, str], cwd: str | None, timeout_s: float | None,
                 go_file: Path | None, n: int) -> None:
        self.command, self.selected, self.tools, self.out_dir = command, selected, tools, out_dir
        self.label, self.phase, self.env, self.cwd, self.timeout_s = label, phase, dict(env), cwd, timeout_s
        self.go_file, self.n = go_file, n
        self.gated = command.go
        self.started: dict[int, tuple[threading.Thread, dict[str, Any], Path | None]] = {}
        self.opened: set[int] = set()

    def _gate(self, k: int) -> Path:
        return self.out_dir / f"{self.label}.{self.phase}.p{k}.go"

    def _start(self, k: int) -> None:
        env = dict(self.env)
        gate: Path | None = None
        if self.gated:
            gate = self._gate(k)
            for f in (gate, Path(f"{gate}{READY_SUFFIX}")):
                f.unlink(missing_ok=True)
            env[GO_ENV] = str(gate)
            env[GO_BEFORE_ENV] = "runs"
        stem = f"{self.label}.{self.phase}" + (f".p{k}" if k else "")
        children = plan_gpu_children(self.selected, self.tools, self.command.argv, self.out_dir, stem, env, self.cwd,
                                     self.timeout_s, self.command.watch)
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = run_round(children, self.label, self.command.mode, self.command.reader)
            except BaseException as exc:  # noqa: BLE001 - handed to join()
                box["error"] = exc

        t = threading.Thread(target=target, name=f"clusterbench-process-{k}", daemon=True)
        t.start()
        self.started[k] = (t, box, gate)

    def start_all(self) -> None:
        """Start every process now (a command that waits for a go), else nothing before it is opened."""
        if self.gated:
            for k in range(self.n):
                if k not in self.started:
                    self._start(k)

    def _waiting(self, k: int) -> bool:
        t, _, gate = self.started[k]
        return not t.is_alive() or (gate is not None and Path(f"{gate}{READY_SUFFIX}").exists())

    def open(self, k: int) -> float:
        """Give process ``k`` its go (starting it if it was not started); the time.time() of that go."""
        if k not in self.started:
            self._start(k)
        gate = self.started[k][2]
        if gate is not None:
            if k == 0:
                while not (self._go_given() and all(self._waiting(j) for j in self.started)):
                    if not self.started[0][0].is_alive():
                        break  # it ended (or failed) before its go: join() says how
                    time.sleep(GO_POLL_S)
            gate.write_text("go\n")
        self.opened.add(k)
        return time.time()

    def _go_given(self) -> bool:
        """The caller's go file says go (always, without one). Anything else written there stops every process."""
        if self.go_file is None:
            return True
        try:
            word = self.go_file.read_text().strip()
        except FileNotFoundError:
            return False
        if word and word != "go":
            self.close(word)  # the caller stops the probe before the runs: stop them all
            return True
        return word == "go"

    def join(self, k: int) -> tuple[GpuOutcome, ...]:
        t, box, gate = self.started[k]
        t.join()
        for f in ((gate, Path(f"{gate}{READY_SUFFIX}")) if gate is not None else ()):
            f.unlink(missing_ok=True)
        if "error" in box:
            raise box["error"]
        return box["value"]

    def close(self, why: str) -> None:
        """Stop every process started but not given its go, and wait for every process still running (one given
        its go ends with its runs' cap): none is left on the GPU."""
        for k, (t, _, gate) in list(self.started.items()):
            if k not in self.opened and gate is not None:
                try:
                    gate.write_text(f"stop: {why}\n")
                except OSError:
                    pass
                self.opened.add(k)  # told: it stops before it measures
        for k, (t, _, gate) in list(self.started.items()):
            t.join()
            for f in ((gate, Path(f"{gate}{READY_SUFFIX}")) if gate is not None else ()):
                f.unlink(missing_ok=True)
