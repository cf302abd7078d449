"""The GPUs a probe runs on: selected, guarded with one verdict, pinned; and env.json's ``multi_gpu`` block.

:func:`plan_gpus` is the I/O and judging before any run, for one GPU or many: list the GPUs
(NVML, :func:`clusterbench.run.machine.read_gpu_topology`), keep those ``CUDA_VISIBLE_DEVICES``
allows, pick the selection (``--gpus all|0,2``; without it the first GPU this process may use),
read and judge each GPU once with the host checks (:func:`clusterbench.run.guards.run_guards`),
and plan each GPU's pinning. docs/scaling.md says how the pieces fit.

Nothing here prints, exits, or imports typer, rich or CuPy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from clusterbench.run import guards, machine
from clusterbench.run.guards import (
    DEFAULT_MAX_UTIL_PCT,
    DEFAULT_WINDOW_S,
    GuardVerdict,
    NvmlReading,
)
from clusterbench.run.machine import GpuInfo, GpuSelection, Pinning, PinTools
from clusterbench.run.rows import SOLO_DEFINITION, ScalingSummary

if TYPE_CHECKING:
    from clusterbench.run.config import ConfigFile


@dataclass(frozen=True, slots=True)
class GpuPlan:
    """The GPUs of one run, judged: every selected GPU, the guard verdict over them all, and how each
    GPU's processes are pinned. ``selection`` None: no ``--gpus`` (the first GPU this process may use)."""

    selection: GpuSelection | None
    gpus: tuple[GpuInfo, ...]
    verdict: GuardVerdict
    tools: PinTools
    pinnings: Mapping[int, Pinning]

    @property
    def run_gpus(self) -> tuple[GpuInfo, ...]:
        """The GPUs the verdict lets run, in the order selected: the first is the solo GPU."""
        run = set(self.verdict.run_indices)
        return tuple(g for g in self.gpus if g.index in run)

    def env_block(self, summaries: Mapping[str, ScalingSummary] | None = None,
                  overlaps_s: Mapping[str, float] | None = None) -> dict[str, Any]:
        return multi_gpu_env(self.selection, self.gpus, self.pinnings, summaries, overlaps_s)


def select_gpus(selection: GpuSelection | None, environ: Mapping[str, str] | None = None,
                read_topology: Callable[[], Sequence[GpuInfo]] | None = None) -> tuple[GpuInfo, ...]:
    """The GPUs to run on: those ``--gpus`` names among the ones ``CUDA_VISIBLE_DEVICES`` allows, or
    without ``--gpus`` the first of those. InputError (exit 2) for an index NVML does not list;
    EnvironmentFailure (exit 1) without a GPU or for a ``CUDA_VISIBLE_DEVICES`` that names none."""
    env = os.environ if environ is None else environ
    topology = tuple((read_topology or machine.read_gpu_topology)())
    visible = machine.visible_gpus(topology, env.get("CUDA_VISIBLE_DEVICES"))
    if selection is None:
        return visible[:1]
    return machine.resolve_selection(selection, visible)


def plan_gpus(selection: GpuSelection | None, config_file: ConfigFile | None = None, *,
              max_util_pct: float = DEFAULT_MAX_UTIL_PCT, window_s: float = DEFAULT_WINDOW_S,
              require_clean: bool = False, force: bool = False, environ: Mapping[str, str] | None = None,
              read_topology: Callable[[], Sequence[GpuInfo]] | None = None,
              readings: Sequence[NvmlReading] | None = None, tools: PinTools | None = None,
              repo_root: Path | None = None, own_pid: int | None = None) -> GpuPlan:
    """Select the GPUs (:func:`select_gpus`), read and judge each once with the host checks, and plan
    the pinning. The limits are checked before any NVML call (InputError, exit 2). Raise with
    :func:`clusterbench.run.guards.require_guard_pass` afterwards (exit 3 when refused).
    ``read_topology``, ``readings`` and ``tools`` replace the machine's answers (tests)."""
    guards.check_settings(max_util_pct, window_s)
    gpus = select_gpus(selection, environ, read_topology)
    verdict = guards.run_guards(config_file, [g.index for g in gpus], max_util_pct=max_util_pct, window_s=window_s,
                                require_clean=require_clean, force=force, readings=readings, repo_root=repo_root,
                                own_pid=own_pid)
    tools = tools or machine.find_pin_tools()
    return GpuPlan(selection, gpus, verdict, tools, {g.index: machine.plan_pinning(g, tools) for g in gpus})


# The multi_gpu block of env.json (written by a probe with --gpus). History: 1: first version (selection,
# gpus with affinity and pinning, per-GPU guard verdicts, the solo definition, per config the scaling
# summary); 2: the guard verdicts left it: env.json's guard block is the one verdict over every GPU.
MULTI_GPU_ENV_VERSION = 2


def multi_gpu_env(selection: GpuSelection | None, gpus: Sequence[GpuInfo], pinnings: Mapping[int, Pinning],
                  summaries: Mapping[str, ScalingSummary] | None = None,
                  overlaps_s: Mapping[str, float] | None = None) -> dict[str, Any]:
    """env.json's ``multi_gpu`` block (pure): the selection, every GPU's affinity and pinning, the solo
    definition, per config the scaling summary."""
    configs: dict[str, Any] = {}
    for label, s in (summaries or {}).items():
        configs[label] = {**s.to_json(), "concurrent_overlap_s": (overlaps_s or {}).get(label)}
    return {"version": MULTI_GPU_ENV_VERSION, "selection": None if selection is None else selection.text,
            "gpus": [{**g.to_json(), "pinning": pinnings[g.index].to_json() if g.index in pinnings else None}
                     for g in gpus],
            "solo_definition": SOLO_DEFINITION, "configs": configs,
            "pinning_applied": {str(i): p.applied for i, p in sorted(pinnings.items())}}
