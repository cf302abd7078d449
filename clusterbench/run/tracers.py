"""The tracers behind one protocol: nsys (subprocess), cupti (in-process, in its own child), none.

Each traced run is one workload process (pedestal, one batched pass, exit; or an exec program's
whole run) on the job's GPU alone, run through :mod:`clusterbench.run.supervisor`, within the job's
time limit. Files are written under ``<label>.partial.*`` names and renamed to ``<label>.nsys-rep`` /
``<label>.sqlite`` only when complete, so an interrupted or failed run never leaves a file that looks
finished. nsys exports the SQLite itself at the end of the profile (``--export=sqlite``); where that
left no file, ``nsys export`` runs after it. Sustained FPS is measured in separate runs without any
profiler (:mod:`clusterbench.run.sustained`).

Adding a tracer is adding a class with ``name``, ``check_workload`` and ``trace`` to ``TRACERS``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Protocol

from clusterbench.errors import EnvironmentFailure, WorkloadProtocolError
from clusterbench.io.nsys.export import nsys_export_command
from clusterbench.model.params import WorkloadParams
from clusterbench.model.workload import WorkloadResult
from clusterbench.run.clocks import ClockSample, ClockSampler
from clusterbench.run.commands import (
    child_env,
    cupti_command,
    nsys_capture_env,
    nsys_graph_trace_mode,
    nsys_profile_command,
)
from clusterbench.run.machine import GpuInfo, gpu_env
from clusterbench.run.supervisor import ChildOutcome, ChildSpec, log_tail, require_ok, run_child
from clusterbench.workloads.protocol import ExecWorkload, Workload

PARTIAL = ".partial"
PhaseCallback = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class WorkloadJob:
    """One config's workload run: which program, with which parameters (an exec program: its placeholder
    ``values``), writing where, on which GPU (None: the GPUs this process sees, e.g. in a test), within
    which time limit (``timeout_s``, None: none), under which nsys capture range (``capture``, an exec
    program's ``nvtx:NAME[@DOMAIN]`` or ``cudaProfilerApi``)."""

    label: str
    params: WorkloadParams | None
    workload: Workload | ExecWorkload
    out_dir: Path
    gpu: GpuInfo | None = None
    values: Mapping[str, Any] | None = None
    capture: str | None = None
    timeout_s: float | None = None
    base_env: Mapping[str, str] | None = None

    @property
    def is_exec(self) -> bool:
        return isinstance(self.workload, ExecWorkload)

    def argv(self, result: Path, mode: str) -> tuple[str, ...]:
        """The program's argv: a protocol workload's for ``mode`` writing ``result``; an exec program's own."""
        if isinstance(self.workload, ExecWorkload):
            return self.workload.exec_argv(self.label, self.values or {})
        assert self.params is not None
        return self.workload.argv(self.label, self.params, result, mode)

    def env(self) -> dict[str, str]:
        """The child's environment: this checkout first on PYTHONPATH, only the job's GPU visible."""
        env = child_env(self.base_env)
        return env if self.gpu is None else gpu_env(self.gpu, env)

    def clock_sampler(self) -> ClockSampler:
        """A sampler of the job's GPU's SM clock (NVML index; the first GPU without one)."""
        return ClockSampler(0 if self.gpu is None else self.gpu.index)


@dataclass(frozen=True, slots=True)
class TracedRun:
    """One traced run: its export and report, the workload's result record (None: an exec program), when
    the pass ended (time.time(); None without a record), the SM clock while it ran, its log and how its
    child ended (``child``: where its output lies in the log), the run's start and end (time.time()), and
    the CUDA-graph trace mode nsys ran with ('node' or 'graph'; None: not nsys)."""

    sqlite: Path
    report: Path | None  # the .nsys-rep; None for the cupti tracer
    result: WorkloadResult | None
    pass_end_s: float | None
    clocks: tuple[ClockSample, ...]
    max_clock_mhz: int | None
    log: Path
    child: ChildOutcome | None = None
    started_s: float | None = None
    ended_s: float | None = None
    graph_trace: str | None = None


@dataclass(frozen=True, slots=True)
class TracerSetup:
    """What a tracer may need from the machine, found before any config runs."""

    nsys: Path | None = None
    nsys_version: str | None = None


class Tracer(Protocol):
    name: ClassVar[str]

    @classmethod
    def check_workload(cls, workload: Workload) -> str | None:
        """Why this tracer cannot trace ``workload``, or None (asked before any GPU call)."""
        ...

    def trace(self, job: WorkloadJob, on_phase: PhaseCallback, graph_trace: str | None = None,
              variant: str | None = None) -> TracedRun | None:
        """Trace one pass of ``job`` (an exec program: its whole run); None for a tracer that traces nothing.
        ``graph_trace``: nsys's CUDA-graph mode instead of the tracer's; ``variant``: a suffix for the files
        (``<label>.<variant>.sqlite``)."""
        ...


# --------------------------------------------------------------------------- files and results


# The second trace of a program whose work a node-level trace lost (device-launched CUDA graphs) is
# named <label>.graph.*: both traces stay.
GRAPH_VARIANT = "graph"


def partial_paths(out_dir: Path, label: str) -> tuple[Path, ...]:
    base = out_dir / f"{label}{PARTIAL}"
    return (base.with_name(base.name + ".nsys-rep"), base.with_name(base.name + ".sqlite"),
            base.with_name(base.name + ".sqlite.tmp"), base.with_name(base.name + ".qdstrm"))


def discard_partials(out_dir: Path, label: str) -> tuple[Path, ...]:
    """Delete what an interrupted or failed trace of ``label`` (and its graph-level retrace) left; return
    what was removed."""
    removed = []
    for p in (*partial_paths(out_dir, label), *partial_paths(out_dir, f"{label}.{GRAPH_VARIANT}")):
        if p.exists():
            p.unlink()
            removed.append(p)
    return tuple(removed)


def result_hint(log: Path) -> str:
    """What a program that broke the protocol must do, and where its whole output is."""
    return f"the program must write its result record to {{result}} (docs/workloads.md); whole log: {log}"


def read_result(path: Path, label: str, log: Path, mode: str) -> tuple[WorkloadResult, float]:
    """The workload's result record and its mtime. WorkloadProtocolError names what is missing,
    with the last lines of the program's output."""
    tail = f"; last lines of {log.name}:\n{log_tail(log)}"
    hint = result_hint(log)
    try:
        st = path.stat()
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WorkloadProtocolError(f"config {label!r}: the workload wrote no result record {path.name}{tail}",
                                    hint=hint) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadProtocolError(f"config {label!r}: cannot read the result record {path.name}: {exc}{tail}",
                                    hint=hint) from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise WorkloadProtocolError(f"config {label!r}: the result record {path.name} is not JSON ({exc}){tail}",
                                    hint=hint) from None
    try:
        result = WorkloadResult.from_json(doc)
    except WorkloadProtocolError as exc:
        raise WorkloadProtocolError(f"config {label!r}: malformed {path.name}: {exc}{tail}", hint=exc.hint) from None
    if result.mode != mode:
        raise WorkloadProtocolError(f"config {label!r}: malformed {path.name}: result record: field 'mode' is "
                                    f"{result.mode!r}, the probe asked for {mode!r}{tail}", hint=hint)
    return result, st.st_mtime


def _fresh_run(out_dir: Path, label: str, kind: str) -> tuple[Path, Path]:
    """Prepare ``out_dir`` for a traced run of ``label``: no partial files and no stale result left
    from an earlier run. Returns (log, result JSON) paths; ``kind`` names the log (nsys, cupti)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    discard_partials(out_dir, label)
    result = out_dir / f"{label}.pass.json"
    result.unlink(missing_ok=True)
    return out_dir / f"{label}.{kind}.log", result


def workload_cwd(workload: Workload) -> str | None:
    """The folder a workload's process runs in (a command workload: its config file's folder)."""
    return None if workload.cwd is None else str(workload.cwd)


def _run(argv: list[str], log: Path, env: dict[str, str], what: str, hint: str, cwd: str | None = None,
         append: bool = False, timeout_s: float | None = None) -> None:
    """One tracer child through the supervisor; EnvironmentFailure with its log's tail when it fails."""
    require_ok(run_child(ChildSpec(tuple(argv), log, env=env, cwd=cwd, append=append, timeout_s=timeout_s)), what,
               hint)


# --------------------------------------------------------------------------- the tracers


class NsysTracer:
    """Nsight Systems: profile the workload process, then export its report to SQLite."""

    name: ClassVar[str] = "nsys"

    def __init__(self, setup: TracerSetup) -> None:
        if setup.nsys is None:
            raise EnvironmentFailure("nsys not found", hint="put nsys on PATH, or use --tracer cupti")
        self.nsys = setup.nsys
        # nsys's CUDA-graph trace mode ('node' from nsys 2023.3 on): commands.nsys_graph_trace_mode
        self.graph_trace = nsys_graph_trace_mode(setup.nsys_version)

    @classmethod
    def check_workload(cls, workload: Workload) -> str | None:
        return None

    def trace(self, job: WorkloadJob, on_phase: PhaseCallback, graph_trace: str | None = None,
              variant: str | None = None) -> TracedRun:
        from clusterbench.run.config import parse_capture

        out_dir, label = job.out_dir, job.label
        name = label if variant is None else f"{label}.{variant}"
        log, result = _fresh_run(out_dir, label, "nsys" if variant is None else f"nsys.{variant}")
        base = out_dir / f"{name}{PARTIAL}"
        rep_partial, sqlite_partial = partial_paths(out_dir, name)[:2]
        capture = parse_capture(job.capture)
        env = {**job.env(), **nsys_capture_env(capture)}
        hint = "check that nsys runs here (source .device/env.sh on the GPU machine), or use --tracer cupti"
        on_phase("trace")
        mode = graph_trace or self.graph_trace
        command = nsys_profile_command(self.nsys, base.resolve(), job.argv(result.resolve(), "pass"), mode,
                                       capture=capture, export_sqlite=True)
        started = time.time()
        with job.clock_sampler() as clocks:
            child = run_child(ChildSpec(tuple(command), log, env=env, cwd=workload_cwd(job.workload),
                                        timeout_s=job.timeout_s))
        ended_run = time.time()
        require_ok(child, f"nsys profile of config {label!r}", hint if not child.timed_out else
                   f"the program did not finish within --timeout {job.timeout_s:g} s; read its output: {log}")
        if not rep_partial.exists():
            raise EnvironmentFailure(f"nsys profile wrote no report {rep_partial.name}; see {log}", hint=hint)
        passed, ended = (None, None) if job.is_exec else read_result(result, label, log, "pass")
        if not sqlite_partial.exists():  # this nsys did not export at the end of the profile: export it now
            on_phase("export")
            _run(nsys_export_command(self.nsys, rep_partial, sqlite_partial), log, env, "nsys export", hint,
                 append=True)
        if not sqlite_partial.exists():
            raise EnvironmentFailure(f"nsys export wrote no {sqlite_partial.name}; see {log}", hint=hint)
        report, sqlite = out_dir / f"{name}.nsys-rep", out_dir / f"{name}.sqlite"
        os.replace(rep_partial, report)
        os.replace(sqlite_partial, sqlite)
        return TracedRun(sqlite, report, passed, ended, clocks.snapshot(), clocks.max_clock_mhz, log, child,
                         started, ended_run, mode)


class CuptiTracer:
    """The in-process CUPTI tracer (no nsys needed); it hosts only workloads it can run in-process."""

    name: ClassVar[str] = "cupti"

    def __init__(self, setup: TracerSetup) -> None:
        pass

    @classmethod
    def check_workload(cls, workload: Workload) -> str | None:
        if workload.cupti_hostable:
            return None
        return (f"--tracer cupti traces in-process, and a {workload.kind!r} workload runs as its own program: "
                "the CUPTI tracer cannot host it")

    def trace(self, job: WorkloadJob, on_phase: PhaseCallback, graph_trace: str | None = None,
              variant: str | None = None) -> TracedRun:
        out_dir, label = job.out_dir, job.label
        assert job.params is not None, "the CUPTI tracer hosts our finder only (check_workload)"
        log, result = _fresh_run(out_dir, label, "cupti")
        sqlite_partial = partial_paths(out_dir, label)[1]
        on_phase("trace")
        params_json = json.dumps(job.params.to_json())
        with job.clock_sampler() as clocks:
            _run(cupti_command(params_json, sqlite_partial, result), log, job.env(), "the CUPTI tracer",
                 "install cupti-python (pip install cupti-python) where CUDA's libcupti is present, "
                 "or use --tracer nsys", timeout_s=job.timeout_s)
        passed, ended = read_result(result, label, log, "pass")
        if not sqlite_partial.exists():
            raise EnvironmentFailure(f"the CUPTI tracer wrote no {sqlite_partial.name}; see {log}")
        on_phase("export")
        sqlite = out_dir / f"{label}.sqlite"
        os.replace(sqlite_partial, sqlite)
        return TracedRun(sqlite, None, passed, ended, clocks.snapshot(), clocks.max_clock_mhz, log)


class NoTracer:
    """No trace: only sustained FPS is measured."""

    name: ClassVar[str] = "none"

    def __init__(self, setup: TracerSetup) -> None:
        pass

    @classmethod
    def check_workload(cls, workload: Workload) -> str | None:
        return None

    def trace(self, job: WorkloadJob, on_phase: PhaseCallback, graph_trace: str | None = None,
              variant: str | None = None) -> None:
        return None


TRACERS: dict[str, type[NsysTracer] | type[CuptiTracer] | type[NoTracer]] = {
    NsysTracer.name: NsysTracer, CuptiTracer.name: CuptiTracer, NoTracer.name: NoTracer,
}
