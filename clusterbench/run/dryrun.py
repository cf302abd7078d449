"""What a probe would run, without running it (``clusterbench probe --dry-run``): every config's traced
command, its export, its analysis, its untraced runs and its delay test, with every placeholder filled in,
and the guards it would apply. Needs no GPU, no NVML and no child process; it looks for nsys on this
machine only to name it. Nothing here prints, exits, or imports typer or rich.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from clusterbench.model import units as U
from clusterbench.run.probe import ExistingRows, ProbePlan, ProbeRequest, job_for
from clusterbench.run.processes import DEFAULT_PROCESSES, steady_plan, sustained_command
from clusterbench.workloads.protocol import PASS_RANGE


@dataclass(frozen=True, slots=True)
class DryRunConfig:
    """What a probe would run for one config: the traced command, the export (when nsys does not export
    at the end of the profile), the analysis, the untraced runs, and the placeholders filled in."""

    label: str
    workload: str
    placeholders: Mapping[str, object]
    trace: tuple[str, ...] | None
    trace_env: Mapping[str, str]
    export: tuple[str, ...] | None
    analysis: str | None
    sustained: tuple[tuple[str, ...], ...]
    sustained_source: str
    sustained_note: str
    cwd: str | None
    what_binds: str | None = None  # --what-binds: the delay test's plan, in words

    def to_json(self) -> dict[str, object]:
        return {"label": self.label, "workload": self.workload, "placeholders": dict(self.placeholders),
                "trace": None if self.trace is None else list(self.trace), "trace_env": dict(self.trace_env),
                "export": None if self.export is None else list(self.export), "analysis": self.analysis,
                "sustained": [list(a) for a in self.sustained], "sustained_source": self.sustained_source,
                "sustained_note": self.sustained_note, "cwd": self.cwd, "what_binds": self.what_binds}


@dataclass(frozen=True, slots=True)
class DryRun:
    """A probe's plan, every command line filled in, without running anything: ``probe --dry-run``."""

    results_dir: Path
    tracer: str
    nsys: str | None  # the nsys it would run (None: none found here; 'nsys' stands in for it)
    repeat: int
    timeout_s: float
    guards: tuple[str, ...]
    configs: tuple[DryRunConfig, ...]
    warnings: tuple[str, ...]
    gpus: str | None
    existing: ExistingRows | None = None
    processes: int = DEFAULT_PROCESSES

    def to_json(self) -> dict[str, object]:
        return {"dry_run": True, "results_dir": str(self.results_dir), "processes": self.processes,
                "results_dir_exists": self.existing is not None,
                "existing": None if self.existing is None else self.existing.to_json(),
                "tracer": self.tracer, "nsys": self.nsys,
                "repeat": self.repeat, "timeout_s": self.timeout_s, "gpus": self.gpus, "guards": list(self.guards),
                "configs": [c.to_json() for c in self.configs], "warnings": list(self.warnings)}


def dry_run(plan: ProbePlan, request: ProbeRequest) -> DryRun:
    """What :func:`run_probe` would run, with every placeholder filled in, without a GPU, NVML or any child
    (it looks for nsys on this machine only to name it)."""
    from clusterbench.io.nsys import export as nsys_export
    from clusterbench.io.nsys.export import nsys_export_command
    from clusterbench.run.commands import nsys_capture_env, nsys_profile_command
    from clusterbench.run.config import parse_capture
    from clusterbench.run.tracers import partial_paths, workload_cwd

    found = nsys_export.find_nsys() if plan.tracer == "nsys" else None
    nsys = str(found) if found is not None else "nsys"
    out = plan.results_dir
    configs = []
    for cfg in plan.configs:
        job = job_for(cfg, out, timeout_s=plan.timeout_s)
        result = (out / f"{cfg.label}.pass.json").resolve()
        child = job.argv(result, "pass")
        trace = export = None
        env: dict[str, str] = {}
        if plan.tracer == "nsys":
            capture = parse_capture(job.capture)
            base = (out / f"{cfg.label}.partial").resolve()
            trace = tuple(nsys_profile_command(nsys, base, child, "node", capture=capture, export_sqlite=True))
            rep, sqlite = partial_paths(out, cfg.label)[:2]
            export = tuple(nsys_export_command(nsys, rep, sqlite))
            env = nsys_capture_env(capture)
        elif plan.tracer == "cupti":
            trace = tuple(child)
        if plan.tracer == "none":
            analysis = None
        elif cfg.exec is not None:
            analysis = (f"analyze_trace({cfg.label}.sqlite, window={cfg.exec.window or 'auto'!r}, "
                        f"frames={cfg.exec.analysis_frames!r})")
        else:
            analysis = f"analyze_trace({cfg.label}.sqlite, frames={cfg.frames}, range_name={PASS_RANGE!r})"
        if cfg.exec is not None:
            source = cfg.exec.source
            if source == "trace":
                sustained: tuple[tuple[str, ...], ...] = ()
                note = "frames over the traced window, under the profiler (no untraced run)"
            else:
                command = sustained_command(cfg, child, job.workload, plan.repeat, plan.processes)
                sustained = tuple(tuple(command.argv(None, result)) for _ in range(command.rule.least_runs))  # type: ignore[arg-type]
                note = (f"the program's own rate: the last line matching {cfg.exec.rate!r} in each run" if source == "rate"
                        else f"{cfg.exec.frames:,} frames over each run's wall time "
                        + (f"from {cfg.exec.wall_start!r} to {cfg.exec.wall_end!r}" if cfg.exec.wall_start
                           else "(the whole run, start-up included)"))
                note += "; " + steady_plan(command, plan.processes)
        else:
            source = "result"
            command = sustained_command(cfg, child, job.workload, plan.repeat, plan.processes)
            stem = f"{cfg.label}.sustained"
            n = command.rule.least_runs if command.whole_runs else plan.processes
            sustained = tuple(tuple(command.argv(None, (out / f"{stem}{f'.r{k}' if command.whole_runs else f'.p{k}' if k else ''}.gpu<N>.json")
                                                 .resolve()))  # type: ignore[arg-type]
                              for k in range(n))
            note = ("frames / seconds of the counted runs in the result records; the figure is the median of the "
                    "processes' medians; " if plan.processes > 1 and not command.whole_runs else
                    "frames / seconds of the counted runs in the result records; ") + steady_plan(command, plan.processes)
        binds = None
        if plan.what_binds is not None:
            from clusterbench.run.whatbinds import plan_words

            binds = plan_words(cfg, plan.what_binds, nsys if plan.tracer == "nsys" else None)
        configs.append(DryRunConfig(cfg.label, cfg.workload.kind, cfg.placeholders(), trace, env,
                                    export, analysis, sustained, source, note, workload_cwd(job.workload), binds))
    g = ["idle GPU: every selected GPU's utilization over 1 s at most "
         f"{U.pct_of(request.max_util_pct, None)}, no other compute process (NVML)",
         "clocks: the SM clock and throttle reasons (NVML), reported",
         "fresh build: this checkout's kernel sources as the package hashes them"
         + (", and [build]'s artifact newer than its sources" if plan.config_file.build else ""),
         "git: the checkout's rev" + (", clean (--require-clean)" if request.require_clean else " and dirty flag")]
    g.append("the unit: the link (pinned H2D alone, D2H alone, both at once), PCIe, NUMA, CPU and clocks of the "
             "GPU, measured once after the guards (a child: python -m clusterbench.workloads.cupy.link)")
    return DryRun(plan.results_dir, plan.tracer, None if found is None else str(found), plan.repeat, plan.timeout_s,
                  tuple(g), tuple(configs), plan.warnings, request.gpus, plan.existing, plan.processes)


