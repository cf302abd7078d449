"""Every GPU of one node at once: the judging and composition behind ``clusterbench probe --gpus``.

docs/scaling.md says what to expect and how to read the rows. Collect, then judge:
:func:`check_gpus` guards every GPU on its own with :func:`clusterbench.run.guards.check_idle_gpu`;
:func:`plan_multi_gpu` lists the GPUs (:mod:`clusterbench.run.machine`), samples and judges them and
plans the pinning; :func:`measure_sustained_gpus` runs one child per GPU
(:mod:`clusterbench.run.supervisor`), solo then concurrent; :mod:`clusterbench.run.rows` turns the
figures into probes.csv rows, :func:`multi_gpu_env` into env.json's ``multi_gpu`` block.

Progress goes to an ``on_event`` callback. Nothing here prints, exits, or imports typer, rich or CuPy.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from clusterbench.errors import CheckFailed
from clusterbench.run.guards import GuardCheck, NvmlReading, Status, check_clocks, check_idle_gpu
from clusterbench.model.measurement import SUSTAINED_FPS, Measurement
from clusterbench.run.machine import (GpuInfo, GpuSelection, Pinning, PinTools, find_pin_tools, plan_pinning,
                                      read_gpu_topology, resolve_selection, visible_gpus)
from clusterbench.run.rows import SOLO_DEFINITION, MultiGpuSustained, ScalingSummary, scaling_summary
from clusterbench.run.supervisor import (GpuChildEvent, GpuOutcome, overlap_s, plan_gpu_children, require_all_ok,
                                         run_gpu_children)


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


def workload_command(workload: Any, label: str, params: Any, repeat: int
                     ) -> tuple[Callable[[GpuInfo, Path], Sequence[str]], int]:
    """(command, rounds) for :func:`measure_sustained_gpus` from a workload of
    :mod:`clusterbench.workloads` (its ``argv`` and ``runs_sustained``): one ``sustained`` process of
    ``repeat`` passes per GPU, or ``repeat`` rounds of one ``pass`` each for a program without ``{mode}``."""
    if workload.runs_sustained:
        return (lambda g, result: workload.argv(label, params, result, "sustained", repeat)), 1
    return (lambda g, result: workload.argv(label, params, result, "pass")), repeat


def measure_sustained_gpus(gpus: Sequence[GpuInfo], tools: PinTools,
                           command: Callable[[GpuInfo, Path], Sequence[str]], out_dir: Path, stem: str,
                           base_env: Mapping[str, str], *, rounds: int = 1,
                           input_bytes_per_frame: int | None = None, cwd: str | None = None,
                           timeout_s: float | None = None,
                           on_event: Callable[[GpuChildEvent], None] | None = None) -> MultiGpuSustained:
    """The solo figure, then the concurrent one (SOLO_DEFINITION), with the same command and pinning.

    ``rounds``: 1 for a workload that runs R timed passes in one process (``sustained`` mode), R for
    one that runs one pass per process. Any failed child: EnvironmentFailure (exit 1) naming it,
    since a sum with a missing GPU says nothing about the node. Works for N = 1.
    """
    if not gpus:
        raise ValueError("measure_sustained_gpus needs at least one GPU")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    emit = on_event or (lambda e: None)
    solo_gpu = gpus[0]

    def run(phase: str, selected: Sequence[GpuInfo]) -> tuple[tuple[GpuOutcome, ...], ...]:
        out = []
        for k in range(rounds):
            name = f"{stem}.{phase}" + (f".r{k}" if rounds > 1 else "")
            children = plan_gpu_children(selected, tools, command, out_dir, name, base_env, cwd)
            outcomes = run_gpu_children(children, timeout_s=timeout_s, on_event=lambda e, _k=k: emit(
                GpuChildEvent(e.kind, e.gpu, e.returncode, phase, _k)))
            require_all_ok(outcomes, f"the {phase} sustained-FPS run of {stem!r}")
            out.append(outcomes)
        return tuple(out)

    solo_rounds = run("solo", [solo_gpu])
    conc_rounds = run("concurrent", gpus)
    solo = sustained_by_gpu(solo_rounds, input_bytes_per_frame)[solo_gpu.index]
    concurrent = sustained_by_gpu(conc_rounds, input_bytes_per_frame)
    return MultiGpuSustained(solo_gpu.index, solo, concurrent, scaling_summary(solo_gpu.index, solo, concurrent),
                             min(overlap_s(r) for r in conc_rounds), solo_rounds, conc_rounds)


# --------------------------------------------------------------------------- guards


class GpuGuardStatus(str, enum.Enum):
    PASS = "pass"  # its checks passed: it runs (unless the run is refused)
    REFUSED = "refused"  # a check failed: without --force it refuses the run; with --force it alone is left out
    FORCED = "forced"  # a check failed and --force ran it anyway: every GPU failed, as plain --force on one GPU

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class GpuGuard:
    """One GPU's verdict. ``reason``: ``idle`` or the failed check names (``idle_gpu``)."""

    index: int
    uuid: str
    status: GpuGuardStatus
    reason: str
    checks: tuple[GuardCheck, ...]

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "uuid": self.uuid, "status": self.status.value, "reason": self.reason,
                "checks": [c.to_json() for c in self.checks]}


@dataclass(frozen=True, slots=True)
class MultiGpuGuard:
    """Every GPU's verdict and the host-wide checks (fresh build, git), judged together.

    ``reason`` codes: ``pass``; ``gpu_failed`` / ``host_failed`` (refused, no --force);
    ``forced_dropped`` (--force: the failing GPUs left out, the others run); ``forced_all``
    (--force, no GPU passed: all run, recorded); ``host_forced`` (--force over a host check)."""

    gpus: tuple[GpuGuard, ...]
    host_checks: tuple[GuardCheck, ...]
    force: bool
    run_refused: bool
    reason: str
    message: str
    host_forced: bool = False

    @property
    def run_indices(self) -> tuple[int, ...]:
        if self.run_refused:
            return ()
        return tuple(g.index for g in self.gpus if g.status is not GpuGuardStatus.REFUSED)

    @property
    def refused(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus if g.status is GpuGuardStatus.REFUSED)

    @property
    def forced(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus if g.status is GpuGuardStatus.FORCED)

    def to_json(self) -> dict[str, Any]:
        return {"run_refused": self.run_refused, "reason": self.reason, "message": self.message,
                "force": self.force, "host_forced": self.host_forced, "run": list(self.run_indices),
                "refused": list(self.refused), "forced": list(self.forced),
                "gpus": [g.to_json() for g in self.gpus],
                "host_checks": [c.to_json() for c in self.host_checks]}


PER_GPU_CHECKS = ("idle_gpu", "clocks")  # the checks guards.run_guards makes on its one GPU's reading


def host_checks_of(checks: Iterable[GuardCheck]) -> tuple[GuardCheck, ...]:
    """The host-wide checks of a :func:`clusterbench.run.guards.run_guards` report (build, git, import
    location), without the ones about its one GPU."""
    return tuple(c for c in checks if c.name not in PER_GPU_CHECKS)


def check_gpus(readings: Sequence[NvmlReading], host_checks: Sequence[GuardCheck] = (), *,
               max_util_pct: float, force: bool, own_pid: int | None = None) -> MultiGpuGuard:
    """Guard every GPU on its own (idle, clocks) and judge the run (pure).

    Without ``force`` one failing GPU, or a failing host check, refuses the whole run. With
    ``force`` a failing GPU refuses only itself while another GPU passes; when none passes they all
    run and are recorded ``forced`` (so ``--gpus 0 --force`` does what plain ``--force`` does).
    """
    if not readings:
        raise ValueError("check_gpus needs at least one GPU reading")
    verdicts: list[tuple[NvmlReading, tuple[GuardCheck, ...], bool]] = []
    for r in readings:
        checks = (check_idle_gpu(r, max_util_pct, own_pid=own_pid), check_clocks(r))
        verdicts.append((r, checks, any(c.status is Status.FAIL for c in checks)))
    host = tuple(host_checks)
    host_failed = [c for c in host if c.status is Status.FAIL]
    failing = [r.index for r, _, bad in verdicts if bad]
    passing = [r.index for r, _, bad in verdicts if not bad]

    def reason_of(checks: tuple[GuardCheck, ...]) -> str:
        return ",".join(c.name for c in checks if c.status is Status.FAIL) or "idle"

    if not force and (failing or host_failed):
        gpus = tuple(GpuGuard(r.index, r.uuid, GpuGuardStatus.REFUSED if bad else GpuGuardStatus.PASS,
                              reason_of(ch), ch) for r, ch, bad in verdicts)
        if failing:
            first = next(c for _, ch, bad in verdicts if bad for c in ch if c.status is Status.FAIL)
            msg = (f"guard refused: GPU {', '.join(map(str, failing))} failed: {first.message}")
            reason = "gpu_failed"
        else:
            msg = f"guard refused: {host_failed[0].message}"
            reason = "host_failed"
        return MultiGpuGuard(gpus, host, force, True, reason, msg)
    all_failed = bool(failing) and not passing
    gpus = tuple(GpuGuard(r.index, r.uuid,
                          GpuGuardStatus.PASS if not bad else GpuGuardStatus.FORCED if all_failed
                          else GpuGuardStatus.REFUSED, reason_of(ch), ch) for r, ch, bad in verdicts)
    host_forced = bool(host_failed)
    if all_failed:
        reason, msg = "forced_all", (f"--force: every GPU failed its guard ({', '.join(map(str, failing))}); "
                                     "all run anyway, recorded as forced: do not quote these figures")
    elif failing:
        reason, msg = "forced_dropped", (f"--force: GPU {', '.join(map(str, failing))} failed its guard and is "
                                         f"left out; running on GPU {', '.join(map(str, passing))}")
    elif host_forced:
        reason, msg = "host_forced", ("--force overrode " + ", ".join(c.name for c in host_failed) +
                                      ": recorded in env.json")
    else:
        reason, msg = "pass", f"every GPU idle ({', '.join(map(str, passing))})"
    return MultiGpuGuard(gpus, host, force, False, reason, msg, host_forced)


def require_gpus_pass(guard: MultiGpuGuard) -> None:
    """CheckFailed (exit 3) when the guard refused the run."""
    if not guard.run_refused:
        return
    failed = [c for g in guard.gpus for c in g.checks if c.status is Status.FAIL] + \
        [c for c in guard.host_checks if c.status is Status.FAIL]
    first_hint = next((c.hint for c in failed if c.hint), None)
    hint = (first_hint + " " if first_hint else "") + (
        "Or pick idle GPUs with --gpus, or pass --force: a failing GPU is then left out while another passes "
        "(recorded in env.json).")
    raise CheckFailed(guard.message, hint=hint)


# --------------------------------------------------------------------------- figures and rows


# --------------------------------------------------------------------------- composition


@dataclass(frozen=True, slots=True)
class MultiGpuPlan:
    """A guarded ``--gpus`` run: the GPUs that run (guard verdicts applied), how each is pinned."""

    selection: GpuSelection
    gpus: tuple[GpuInfo, ...]  # every selected GPU
    guard: MultiGpuGuard
    tools: PinTools
    pinnings: Mapping[int, Pinning]

    @property
    def run_gpus(self) -> tuple[GpuInfo, ...]:
        run = set(self.guard.run_indices)
        return tuple(g for g in self.gpus if g.index in run)

    def env_block(self, summaries: Mapping[str, ScalingSummary] | None = None,
                  overlaps_s: Mapping[str, float] | None = None) -> dict[str, Any]:
        return multi_gpu_env(self.selection, self.gpus, self.pinnings, self.guard, summaries, overlaps_s)


def plan_multi_gpu(selection: GpuSelection, *, max_util_pct: float, window_s: float, force: bool,
                   host_checks: Sequence[GuardCheck] = (), own_pid: int | None = None,
                   environ: Mapping[str, str] | None = None,
                   read_topology: Callable[[], Sequence[GpuInfo]] | None = None,
                   read_reading: Callable[..., NvmlReading] | None = None,
                   tools: PinTools | None = None) -> MultiGpuPlan:
    """The I/O and judging before a ``--gpus`` run: list the GPUs (NVML), keep those
    ``CUDA_VISIBLE_DEVICES`` allows, resolve ``--gpus`` (InputError, exit 2), sample each GPU
    (``guards.read_nvml``, one window each), judge them (:func:`check_gpus`) and plan the pinning.
    ``read_topology`` defaults to :func:`read_gpu_topology`, ``read_reading`` to ``guards.read_nvml``
    (both looked up at call time, so a test can replace them at the edge).
    Raise with :func:`require_gpus_pass` afterwards (exit 3 when refused)."""
    from clusterbench.run import guards

    env = os.environ if environ is None else environ
    topology = tuple((read_topology or read_gpu_topology)())
    gpus = resolve_selection(selection, visible_gpus(topology, env.get("CUDA_VISIBLE_DEVICES")))
    read = read_reading or guards.read_nvml
    readings = [read(device_index=g.index, window_s=window_s) for g in gpus]
    guard = check_gpus(readings, host_checks, max_util_pct=max_util_pct, force=force,
                       own_pid=os.getpid() if own_pid is None else own_pid)
    tools = tools or find_pin_tools()
    return MultiGpuPlan(selection, gpus, guard, tools, {g.index: plan_pinning(g, tools) for g in gpus})


# The multi_gpu block of env.json. History: 1: first version (selection, gpus with affinity and
# pinning, per-GPU guard verdicts, the solo definition, per config the scaling summary).
MULTI_GPU_ENV_VERSION = 1


def multi_gpu_env(selection: GpuSelection, gpus: Sequence[GpuInfo], pinnings: Mapping[int, Pinning],
                  guard: MultiGpuGuard, summaries: Mapping[str, ScalingSummary] | None = None,
                  overlaps_s: Mapping[str, float] | None = None) -> dict[str, Any]:
    """env.json's ``multi_gpu`` block (pure): the selection, every GPU's affinity and pinning, the
    guard verdicts (which were refused or forced), the solo definition, per config the summary."""
    configs: dict[str, Any] = {}
    for label, s in (summaries or {}).items():
        configs[label] = {**s.to_json(), "concurrent_overlap_s": (overlaps_s or {}).get(label)}
    return {"version": MULTI_GPU_ENV_VERSION, "selection": selection.text,
            "gpus": [{**g.to_json(), "pinning": pinnings[g.index].to_json() if g.index in pinnings else None}
                     for g in gpus],
            "guard": guard.to_json(), "solo_definition": SOLO_DEFINITION, "configs": configs,
            "pinning_applied": {str(i): p.applied for i, p in sorted(pinnings.items())}}
