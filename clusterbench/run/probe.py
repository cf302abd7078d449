"""The probe: validate, guard, trace each config, analyze, write its row, measure sustained FPS.

This is the library behind ``clusterbench probe``; it never prints, exits or imports a UI
or GPU library. Every config's workload (clusterbench's CuPy finder, any program that speaks
the protocol of docs/workloads.md, or any program as it is: ``workload = "exec"``) goes through the
same steps:

1. :func:`plan_probe` validates the configs and the options (no GPU or NVML call), applies
   ``--frames``, the exec options, ``--data`` and ``--scan``; :func:`clusterbench.run.dryrun.dry_run` describes what would run.
2. :func:`run_probe` checks for a GPU (and nsys), picks the GPUs and guards them with one verdict
   (:func:`clusterbench.run.gpus.plan_gpus`), then for each config:
3. traces one process on the solo GPU and exports SQLite (a program whose device-launched CUDA graphs a
   node-level trace loses is traced again at graph level);
4. analyzes the trace: a protocol workload over its pass range, an exec program over its ``--window``
   with its ``--frames``; sets the program's own rate and kernel time against the trace;
5. upserts the config's row into probes.csv (atomic, locked: :mod:`clusterbench.io.results`);
6. measures sustained FPS without a profiler (:mod:`clusterbench.run.sustained`; an exec program: its
   own rate, or frames over its wall time, or the traced window) and upserts the completed row.

A config that fails (a time limit, an exit status, a broken protocol, a frames definition that
counts nothing) gets its row marked failed with why, and the others go on; ``outcome.failures`` holds
them and :func:`require_no_failures` raises (exit 1) once every config has run.

One flow for 1..N GPUs: without ``--gpus`` the run is on one GPU (the first this process may use);
``ProbeRequest.gpus`` (``--gpus all|0,2``) selects several, and step 6 then runs solo, then on every
GPU at once. With ``--gpus`` the solo, per-GPU and aggregate rows and env.json's ``multi_gpu``
block are written too (docs/scaling.md), for N = 1 as well.

Progress and warnings go to an ``on_event`` callback (the CLI draws them on stderr).
Ctrl-C keeps every finished row, deletes the interrupted config's partial trace files,
and raises :class:`ProbeInterrupted` (exit 130).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from clusterbench.errors import (EXIT_INTERRUPTED, ClusterbenchError, ConfigError, EnvironmentFailure, InputError,
                                 WorkloadProtocolError)
from clusterbench.model.measurement import SUSTAINED_FPS, Measurement
from clusterbench.model import units as U
from clusterbench.model.results import ConfigEntry, ResultRow, ResultSet, RowKey
from clusterbench.model.workload import WorkloadResult
from clusterbench.io.history import record_probe
from clusterbench.run.clocks import ClockSample, ClockVerdict, clock_summary, judge_clocks
from clusterbench.run.config import DEFAULT_CONFIG_FILE, EXEC, ConfigFile, ExecOptions, ProbeConfig
from clusterbench.run.guards import DEFAULT_MAX_UTIL_PCT
from clusterbench.model.steady import STEADY_HINT
from clusterbench.run.callcost import CallCosts
from clusterbench.run.rows import build_env, build_row, config_rows, gpu_identity, trace_figures
from clusterbench.run.above import above_roofline
from clusterbench.run.precompile import Precompile, finder_builds
from clusterbench.run.processes import (DEFAULT_PROCESSES, EarlySustained, check_processes, early_applies,
                                        measure_config, sustained_block, sustained_command, traced_sustained)
from clusterbench.run.sustained import steadiness_of
from clusterbench.run.tracers import TRACERS, GRAPH_VARIANT, NsysTracer, TracedRun, Tracer, TracerSetup, WorkloadJob
from clusterbench.workloads.protocol import PASS_RANGE, Workload, pass_range_text, workload_for

if TYPE_CHECKING:
    from clusterbench.analyzers.records import TraceAnalysis
    from clusterbench.run.checks import FigureCheck
    from clusterbench.run.guards import GuardVerdict
    from clusterbench.run.gpus import GpuPlan
    from clusterbench.run.machine import GpuSelection
    from clusterbench.run.rows import MultiGpuSustained
    from clusterbench.run.scan import Scan

PHASES = ("guard", "trace", "export", "analyze", "sustained")
# --repeat: the runs that count in each sustained process (the last R, once they agree within the noise); 3 give
# each process a median and a steady verdict at 3 x 100 ms, and the processes give the spread (--processes,
# run/processes.py; docs/probe.md)
DEFAULT_REPEAT = 3
MAX_REPEAT = 100
DEFAULT_TRACER = "nsys"
DEFAULT_RESULTS_ROOT = "results"
# Every run of a config's program (traced or not) may take this long before its process group is ended:
# generous, since a long pass or a slow program start is legitimate; --timeout S sets it.
DEFAULT_TIMEOUT_S = 1800.0
# With at least this many CPUs to this process, the analysis of a trace runs while the config's sustained
# runs go (it is CPU work in this process, beside one pinned child); with fewer, after them.
OVERLAP_MIN_CPUS = 8
# The synthetic frames our finder's processes build are kept here for the probe's other processes
# (clusterbench.workloads.synth.FRAME_CACHE_ENV), in a temporary folder removed when the probe ends.
FRAME_CACHE_PREFIX = "clusterbench-frames-"


class ProbeInterrupted(ClusterbenchError):
    """Ctrl-C during a sweep: finished rows are kept (exit 130)."""

    exit_code = EXIT_INTERRUPTED


REQUEST_SCHEMA = "clusterbench.probe-request"
# ProbeRequest.to_json (a campaign task's request file). History: 1: first version. 2: adds program, label,
# measure (the ExecOptions of a program probed as it is), timeout_s and scan. 3: adds processes,
# what_binds, delay_processes and delay_us.
REQUEST_VERSION = 3


@dataclass(frozen=True, slots=True)
class ProbeRequest:
    """What the user asked for (the CLI's options, as values). Crosses to a campaign's tasks as JSON
    (:meth:`to_json`; ``clusterbench probe --request FILE``). ``program``: a program given on the command
    line (``-- PROGRAM ARGS...``) instead of configs.toml, named ``label``; ``measure`` (--window,
    --frames DEFINITION, --capture, --rate ...) applies to every exec config."""

    config_path: Path = Path(DEFAULT_CONFIG_FILE)
    only: tuple[str, ...] = ()
    frames: int | None = None
    tag: str | None = None
    tracer: str = DEFAULT_TRACER
    repeat: int = DEFAULT_REPEAT
    results_root: Path = Path(DEFAULT_RESULTS_ROOT)
    max_util_pct: float = DEFAULT_MAX_UTIL_PCT
    require_clean: bool = False
    force: bool = False
    data: Path | None = None
    argv: tuple[str, ...] = ()
    gpus: str | None = None  # --gpus all|0,2: each config on these GPUs at once (docs/scaling.md)
    program: tuple[str, ...] = ()
    label: str | None = None
    measure: ExecOptions = ExecOptions()
    timeout_s: float = DEFAULT_TIMEOUT_S
    scan: tuple[str, ...] = ()
    session: str | None = None  # --session NAME: join this probe to a named session (else a fresh id)
    history_db: Path | None = None  # --db PATH: record every row written in this history database
    processes: int = DEFAULT_PROCESSES  # --processes P: fresh processes per sustained figure
    what_binds: bool = False  # --what-binds: the delay test and the untraced split (clusterbench.run.whatbinds)
    delay_processes: int = 3  # --delay-processes P: processes per point of the delay test
    delay_us: float | None = None  # --delay-us K: the delay per frame (None: half the untraced frame)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"schema": REQUEST_SCHEMA, "version": REQUEST_VERSION}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple)
                           else v.to_json() if isinstance(v, ExecOptions) else v)
        return out

    @classmethod
    def from_json(cls, doc: object, source: str = "probe request") -> "ProbeRequest":
        """The request back from :meth:`to_json`. InputError (exit 2) naming the first bad field."""
        hint = "write the request with clusterbench probe --executor (or ProbeRequest.to_json)"
        if not isinstance(doc, Mapping):
            raise InputError(f"{source}: a probe request is a JSON object, got {type(doc).__name__}", hint=hint)
        if doc.get("schema") != REQUEST_SCHEMA or doc.get("version") != REQUEST_VERSION:
            raise InputError(f"{source}: not a version-{REQUEST_VERSION} {REQUEST_SCHEMA} (schema "
                             f"{doc.get('schema')!r}, version {doc.get('version')!r})", hint=hint)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(doc) - names - {"schema", "version"})
        missing = sorted(names - set(doc))
        if unknown or missing:
            what = f"unknown field {unknown[0]!r}" if unknown else f"missing field {missing[0]!r}"
            raise InputError(f"{source}: {what}", hint=hint)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            v, kind = doc[f.name], _FIELD_KINDS[f.name]
            optional = kind.endswith("?")
            kind = kind.rstrip("?")
            if v is None and optional:
                values[f.name] = None
            elif kind == "strings" and isinstance(v, list) and all(isinstance(x, str) for x in v):
                values[f.name] = tuple(v)
            elif kind == "path" and isinstance(v, str):
                values[f.name] = Path(v)
            elif kind == "number" and type(v) in (int, float):
                values[f.name] = float(v)
            elif kind in ("str", "int", "bool") and type(v) is {"str": str, "int": int, "bool": bool}[kind]:
                values[f.name] = v
            elif kind == "options":
                try:
                    values[f.name] = ExecOptions.from_json(v)
                except ValueError as exc:
                    raise InputError(f"{source}: field {f.name!r} {exc}", hint=hint) from None
            else:
                want = {"strings": "a list of strings", "path": "a path string", "number": "a number"}.get(kind, kind)
                raise InputError(f"{source}: field {f.name!r} must be {want}{' or null' if optional else ''}, "
                                 f"got {v!r}", hint=hint)
        return cls(**values)


# ProbeRequest's fields and their JSON kinds ("?": may be null), for from_json.
_FIELD_KINDS = {"config_path": "path", "only": "strings", "frames": "int?", "tag": "str?", "tracer": "str",
                "repeat": "int", "results_root": "path", "max_util_pct": "number", "require_clean": "bool",
                "force": "bool", "data": "path?", "argv": "strings", "gpus": "str?", "program": "strings",
                "label": "str?", "measure": "options", "timeout_s": "number", "scan": "strings",
                "session": "str?", "history_db": "path?", "processes": "int", "what_binds": "bool",
                "delay_processes": "int", "delay_us": "number?"}


@dataclass(frozen=True, slots=True)
class ProbePlan:
    """A validated request: the configs to run (with --frames, the exec options, --data and --scan
    applied) and where results go."""

    config_file: ConfigFile
    configs: tuple[ProbeConfig, ...]
    results_dir: Path
    tracer: str  # a key of tracing.tracers.TRACERS
    repeat: int
    warnings: tuple[str, ...]
    gpus: GpuSelection | None = None  # None: no --gpus (one GPU: the first this process may use)
    timeout_s: float = DEFAULT_TIMEOUT_S
    scans: tuple[Scan, ...] = ()
    existing: ExistingRows | None = None  # the results dir exists already: what it holds that this probe replaces
    processes: int = DEFAULT_PROCESSES  # fresh processes per sustained figure
    what_binds: Any = None  # --what-binds: a run.whatbinds.WhatBindsOptions (None: not asked)


@dataclass(frozen=True, slots=True)
class ReplacedRow:
    """A row of the results dir that a probe writes again: its key, and when and in which session it was
    measured (as the row says; None where it does not)."""

    key: RowKey
    timestamp: str | None
    session: str | None

    def to_json(self) -> dict[str, object]:
        return {**self.key.to_json(), "label": self.key.label, "timestamp": self.timestamp, "session": self.session}


@dataclass(frozen=True, slots=True)
class ExistingRows:
    """A results dir that exists before the probe: how many rows it holds, those the probe replaces (every
    other row is kept), or why its rows could not be read (``problem``)."""

    path: Path
    rows: int
    replaced: tuple[ReplacedRow, ...]
    problem: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"path": str(self.path), "rows": self.rows, "replaced": [r.to_json() for r in self.replaced],
                "problem": self.problem}

    def notice(self, dry_run: bool = False) -> str:
        """What the probe does to the dir, in words (pure)."""
        would = "would replace" if dry_run else "replaces"
        if self.problem is not None:
            return f"results dir {self.path} exists, and its rows cannot be read ({self.problem})"
        if not self.replaced:
            keeps = f"its {self.rows} row(s) are kept" if self.rows else "it holds no rows yet"
            return f"results dir {self.path} exists: this probe adds its rows; {keeps}"
        listed = "; ".join(f"{r.key.label}" + (f" (measured {r.timestamp})" if r.timestamp else "")
                           for r in self.replaced)
        kept = self.rows - len(self.replaced)
        return (f"results dir {self.path} exists and holds {self.rows} row(s): this probe {would} "
                f"{len(self.replaced)} of them: {listed}" + (f"; the other {kept} are kept" if kept else ""))


@dataclass(frozen=True, slots=True)
class ProbeEvent:
    """One progress report. kind: "start" (a config begins), "phase", "warning", "row" (a row was written),
    "failed" (a config failed: its row says why; the others go on)."""

    kind: str
    label: str | None = None
    phase: str | None = None
    index: int = 0
    total: int = 0
    message: str | None = None
    hint: str | None = None
    row: ResultRow | None = None


@dataclass(frozen=True, slots=True)
class ConfigFailure:
    """A config that failed: its label, the phase it failed in, and the error (its message and hint)."""

    label: str
    phase: str
    error: ClusterbenchError

    @property
    def message(self) -> str:
        return str(self.error)

    def to_json(self) -> dict[str, object]:
        return {"label": self.label, "phase": self.phase, "message": str(self.error), "hint": self.error.hint,
                "exit_code": self.error.exit_code}


@dataclass(frozen=True, slots=True)
class ProbeOutcome:
    """What a probe wrote. ``rows``: per config its plain row, then (with --gpus) its solo,
    per-GPU and aggregate rows, as written to probes.csv. ``failures``: the configs that failed (their
    rows are marked failed)."""

    results_dir: Path
    session_id: str
    rows: tuple[ResultRow, ...]
    warnings: tuple[str, ...]
    guard: GuardVerdict
    failures: tuple[ConfigFailure, ...] = ()
    checks: Mapping[str, tuple[FigureCheck, ...]] = field(default_factory=dict)  # per config label
    unit: Any = None  # the unit the probe ran on (model.unit.UnitRecord), as env.json's unit block holds it
    untraced: Mapping[str, Any] = field(default_factory=dict)  # --what-binds: per config label, its UntracedRecord


EventCallback = Callable[[ProbeEvent], None]


def require_no_failures(outcome: ProbeOutcome) -> None:
    """Raise once every config has run, when any failed: the one failure's own error (its exit code and
    hint), or an EnvironmentFailure (exit 1) naming each."""
    if not outcome.failures:
        return
    if len(outcome.failures) == 1:
        raise outcome.failures[0].error
    lines = "\n".join(f"{f.label} ({f.phase}): {f.message.splitlines()[0]}" for f in outcome.failures)
    raise EnvironmentFailure(f"{len(outcome.failures)} of the configs failed (their rows say why):\n{lines}",
                             hint=f"read their logs in {outcome.results_dir}, and env.json's configs.<label>.error")


# ----------------------------------------------------------------------------- step 1: plan

_PROGRAM_LABEL = re.compile(r"[^A-Za-z0-9._-]+")


_INTERPRETERS = re.compile(r"^(python[0-9.]*|bash|sh|env|perl|ruby|node|mpirun|mpiexec|srun)$")


def program_label(argv: tuple[str, ...] | list[str] | str) -> str:
    """A config label from a program's command line: the program's file name (the script's, where the
    program is an interpreter or launcher such as python or mpirun), with any other character than letters,
    digits, '.', '_' and '-' made '-' (pure)."""
    args = [argv] if isinstance(argv, str) else list(argv)
    name = Path(args[0]).name if args else ""
    if _INTERPRETERS.match(name):
        script = next((a for a in args[1:] if not a.startswith("-") and "{" not in a), None)
        name = Path(script).name if script else name
    name = _PROGRAM_LABEL.sub("-", name).lstrip("._-")
    return name or "program"


def _base_label(name: str, labels: tuple[str, ...] | list[str]) -> str:
    """The config a ``--only`` name picks: a label, or the label a scan point's name starts with."""
    if name in labels:
        return name
    bases = [label for label in labels if name.startswith(label + ".")]
    return max(bases, key=len) if bases else name


def program_config(request: ProbeRequest, cwd: Path | None = None) -> ConfigFile:
    """The one exec config of a program given on the command line (``-- PROGRAM ARGS...``), run in the
    current folder. ConfigError (exit 2) for a program that is not found or a bad placeholder."""
    from clusterbench.run.config import ExecSpec, WorkloadSpec
    from clusterbench.workloads.protocol import command_problems

    base = (cwd or Path.cwd()).resolve()
    command = tuple(request.program)
    problems = command_problems(command, base, kind=EXEC)
    if problems:
        raise ConfigError(f"the program {command[0]!r}: {problems[0]}",
                          hint="give the program as a path (./prog) or a name on PATH, after --; write {{ and }} for "
                               "literal braces in its arguments")
    label = request.label if request.label is not None else program_label(command)
    cfg = ProbeConfig(label=label, params=None, workload=WorkloadSpec(EXEC, command, base), exec=ExecSpec())
    return ConfigFile(path=base / "<command line>", configs=(cfg,))


def _check_results_root(root: Path) -> None:
    """The results root must be a folder, or creatable as one (InputError, exit 2, before any GPU call)."""
    p = Path(root)
    if p.exists() and not p.is_dir():
        raise InputError(f"--results-dir {root}: is a file, not a folder",
                         hint="give a folder (created when missing), e.g. --results-dir results")
    ancestor = p
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if ancestor.exists() and not ancestor.is_dir():
        raise InputError(f"--results-dir {root}: {ancestor} is a file, so the folder cannot be made",
                         hint="give a folder under an existing folder")
    if ancestor.exists() and not os.access(ancestor, os.W_OK | os.X_OK):
        raise InputError(f"--results-dir {root}: {ancestor} is not writable", hint="give a folder you may write to")


def plan_probe(request: ProbeRequest, today: datetime.date | None = None) -> ProbePlan:
    """Validate everything that can be checked without a GPU. Raises ConfigError/InputError (exit 2)."""
    from clusterbench.io.results import results_dir_for
    from clusterbench.run.config import (config_warnings, exec_placeholder_problems, load_configs, resource_problems,
                                         run_time_warning, select, with_data, with_exec, with_frames)
    from clusterbench.run.guards import check_settings
    from clusterbench.run.scan import expand, parse_scans

    if request.tracer not in TRACERS:
        raise InputError(
            f"--tracer must be {', '.join(list(TRACERS)[:-1])} or {list(TRACERS)[-1]}, got {request.tracer!r}",
            hint="use --tracer nsys (default), --tracer cupti where nsys is missing, or --tracer none for FPS only",
        )
    if not isinstance(request.repeat, int) or not 1 <= request.repeat <= MAX_REPEAT:
        raise InputError(f"--repeat must be an integer from 1 to {MAX_REPEAT}, got {request.repeat!r}",
                         hint=f"use --repeat {DEFAULT_REPEAT} (the default) or more for a tighter spread")
    problem = check_processes(request.processes)
    if problem is not None:
        raise InputError(problem, hint=f"use --processes {DEFAULT_PROCESSES} (the default): fresh processes per "
                                       "sustained figure, whose spread is compare's noise")
    if not isinstance(request.timeout_s, (int, float)) or not math.isfinite(request.timeout_s) or request.timeout_s <= 0:
        raise InputError(f"--timeout must be a number of seconds > 0, got {request.timeout_s!r}",
                         hint=f"use --timeout {DEFAULT_TIMEOUT_S:g} (the default) or what one run may take")
    check_settings(request.max_util_pct)
    _check_results_root(request.results_root)
    scans = parse_scans(request.scan)
    if request.program:
        config_file = program_config(request)
        label = config_file.configs[0].label
        if any(_base_label(n, (label,)) != label for n in request.only):
            raise InputError("--only picks configs of configs.toml; a program given after -- is the one config",
                             hint="drop --only, or drop the program and use --config")
        configs = config_file.configs
    else:
        if request.label is not None:
            raise InputError("--label names a program given on the command line (clusterbench probe [options] -- "
                             "PROGRAM ARGS...); configs.toml's configs have their own labels",
                             hint="drop --label, or give the program after --")
        config_file = load_configs(request.config_path)
        configs = select(config_file, [_base_label(n, config_file.labels) for n in request.only])
    if not configs:
        raise ConfigError(f"{request.config_path}: no [[config]] to probe", hint="add a [[config]] table")
    if request.frames is not None:
        configs = tuple(with_frames(c, request.frames) for c in configs)
    configs = tuple(with_exec(c, request.measure) for c in configs)
    if request.data is not None:
        configs = tuple(with_data(c, request.data) for c in configs)
    configs = expand(configs, scans)
    points = {n for n in request.only if n not in {c.scanned_from or c.label for c in configs}}
    if points:  # --only names points of a scan (a campaign's task runs one): those points alone
        every = configs
        configs = tuple(c for c in every if c.label in points or (c.scanned_from or c.label) in request.only)
        missing = sorted(points - {c.label for c in configs})
        if missing:
            raise ConfigError(f"--only {missing[0]!r}: no point of the scan has that label",
                              hint="the points: " + ", ".join(c.label for c in every))
    tracer_cls = TRACERS[request.tracer]
    for c in configs:
        for problem in exec_placeholder_problems(c):
            raise ConfigError(f"config {c.label!r}: {problem}", hint="docs/probe.md, \"A program as it is\"")
        problem = tracer_cls.check_workload(workload_of(c))
        if problem:
            raise ConfigError(f"config {c.label!r}: key 'workload': {problem}",
                              hint="use --tracer nsys, or --tracer none for sustained FPS only")
        if c.exec is not None and c.exec.source == "trace" and request.tracer == "none":
            raise ConfigError(f"config {c.label!r}: --tracer none traces nothing, and this program's sustained figure "
                              "would come from its trace",
                              hint="give the program's own rate (--rate REGEX) or time it (--sustained wall with "
                                   "--frames N), or trace it (--tracer nsys)")
        if c.exec is not None and c.exec.source == "trace" and request.gpus is not None:
            raise ConfigError(f"config {c.label!r}: --gpus runs the sustained figure on every GPU at once, untraced; "
                              "this program's comes from its trace",
                              hint="give the program's own rate (--rate REGEX) or time it (--sustained wall)")
    from clusterbench.run.whatbinds import options_from_request

    what_binds = options_from_request(request, configs)
    problems = resource_problems(configs, request.timeout_s)  # without a GPU to ask (docs/probe.md, "Bounds")
    if problems:
        raise ConfigError("\n".join(problems), hint=RESOURCE_HINT)
    warnings: list[str] = []
    for c in configs:
        warnings.extend(config_warnings(c))
    long_run = run_time_warning(configs)
    if long_run is not None:
        warnings.append(long_run)
    date = today or datetime.date.today()
    results_dir = results_dir_for(Path(request.results_root), date, configs[0].dtype_tag, request.tag)
    gpus: GpuSelection | None = None
    if request.gpus is not None:
        from clusterbench.run.machine import parse_gpu_selection

        gpus = parse_gpu_selection(request.gpus)  # InputError (exit 2), before any NVML call
    return ProbePlan(config_file, configs, results_dir, request.tracer, request.repeat, tuple(warnings), gpus,
                     float(request.timeout_s), scans, existing_rows(results_dir, configs, gpus), request.processes,
                     what_binds)


RESOURCE_HINT = ("use fewer streams, a smaller batch, cap or detector, or fewer frames (--frames N); --timeout S "
                 "allows a longer pass")
REPLACE_HINT = "give --tag T (or another --results-dir) to keep them, or --only LABEL to probe fewer configs"


def replace_notice(plan: ProbePlan) -> str | None:
    """Which rows of an existing results dir the probe replaces (or that they cannot be read), in words;
    None when it replaces none: said on stderr before any GPU work."""
    existing = plan.existing
    if existing is None or not (existing.replaced or existing.problem):
        return None
    return existing.notice()


def replaces(key: RowKey, labels: frozenset[str], gpus: GpuSelection | None) -> bool:
    """Whether a probe of the configs ``labels`` (with ``--gpus`` selection ``gpus``) writes the row of ``key``
    again (pure): each config's plain row; with ``--gpus`` also its aggregate row and its rows of the
    selected GPUs (with ``all``: of any GPU). Rows of a campaign's variants are never a probe's."""
    if key.config not in labels or key.variant is not None:
        return False
    if key.role is None:
        return True
    if gpus is None:
        return False
    return key.gpu is None or gpus.all or key.gpu in gpus.indices


def existing_rows(results_dir: Path, configs: tuple[ProbeConfig, ...], gpus: GpuSelection | None) -> ExistingRows | None:
    """What ``results_dir`` already holds that a probe of ``configs`` would replace; None when it does not
    exist (reads its files, touches no GPU)."""
    from clusterbench.io.results import existing_results

    if not results_dir.is_dir():
        return None
    held = existing_results(results_dir)  # the rows go into it: one this clusterbench cannot read is refused now
    if held is None:
        return ExistingRows(results_dir, 0, ())
    labels = frozenset(c.label for c in configs)
    replaced = tuple(ReplacedRow(r.key, r.timestamp, r.session) for r in held.rows if replaces(r.key, labels, gpus))
    return ExistingRows(results_dir, len(held.rows), replaced)


# ----------------------------------------------------------------------------- pure pieces


def workload_of(cfg: ProbeConfig) -> Workload:
    return workload_for(cfg.workload.kind, cfg.workload.command, cfg.workload.base_dir)  # type: ignore[return-value]


def clock_verdict_for(samples: tuple[ClockSample, ...], max_clock_mhz: int | None, result: WorkloadResult,
                      pass_end_s: float) -> ClockVerdict:
    """The clocks over the traced pass: the workload wrote its result right after the pass ended."""
    start = pass_end_s - result.pass_s[0]
    return judge_clocks(samples, start, pass_end_s, max_clock_mhz, result.frames)


def job_for(cfg: ProbeConfig, out_dir: Path, gpu: Any = None, timeout_s: float | None = None,
            base_env: Mapping[str, str] | None = None) -> WorkloadJob:
    """The traced run of ``cfg`` (pure)."""
    spec = cfg.exec
    return WorkloadJob(cfg.label, cfg.params, workload_of(cfg), out_dir, gpu,
                       values=None if spec is None else spec.placeholder_values(),
                       capture=None if spec is None else spec.capture, timeout_s=timeout_s, base_env=base_env)


# ----------------------------------------------------------------------------- I/O helpers


_VERSIONS_CODE = (
    "import json, cupy\n"
    "v = cupy.cuda.runtime.runtimeGetVersion()\n"
    "print(json.dumps({'cupy': cupy.__version__, 'cuda_runtime': f'{v // 1000}.{v % 1000 // 10}'}))\n"
)


def read_child_versions(nsys: Path | None) -> dict[str, object]:
    """CuPy and CUDA runtime versions (asked of a child, so this process never imports CuPy), nsys version."""
    from clusterbench.run.commands import child_env

    out: dict[str, object] = {"python": sys.version.split()[0], "cupy": None, "cuda_runtime": None, "nsys": None}
    try:
        res = subprocess.run([sys.executable, "-c", _VERSIONS_CODE], capture_output=True, text=True, timeout=120,
                             env=child_env())
        if res.returncode == 0:
            out.update(json.loads(res.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        pass
    if nsys is not None:
        try:
            res = subprocess.run([str(nsys), "--version"], capture_output=True, text=True, timeout=60)
            if res.returncode == 0 and res.stdout.strip():
                out["nsys"] = res.stdout.strip().splitlines()[-1]
        except (OSError, subprocess.SubprocessError):
            pass
    return out


def _guard_json(verdict: GuardVerdict) -> dict[str, object]:
    from clusterbench.run.guards import find_checkout

    data = verdict.to_json()
    root = find_checkout(Path(__file__).parent)
    return _without_prefix(data, str(root), "<checkout>") if root is not None else data


def _without_prefix(value: object, prefix: str, name: str) -> object:
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


_UNSET: Path = Path("\0unset")


def preflight(plan: ProbePlan) -> Path | None:
    """Is there a GPU, and (for --tracer nsys) an nsys? Returns the nsys path. Raises EnvironmentFailure (exit 1)
    naming the real cause: no NVML bindings, no driver, no device; or no nsys."""
    from clusterbench.run import guards
    from clusterbench.io.nsys import export as nsys_export

    if not guards.gpu_present():
        raise guards.no_gpu_failure("probe")
    if plan.tracer != "nsys":
        return None
    nsys = nsys_export.find_nsys()
    if nsys is None:
        raise EnvironmentFailure(
            f"nsys not found: not in ${nsys_export.NSYS_ENV}, on PATH, or in {', '.join(nsys_export.NSYS_GLOBS)}",
            hint="put nsys on PATH (source .device/env.sh on the GPU machine), or use --tracer cupti",
        )
    return nsys


def _start(fn: Callable[..., Any], *args: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``fn(*args)`` in a thread; the dict gets its ``value`` or ``error``."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    t = threading.Thread(target=target, name="clusterbench-probe", daemon=True)
    t.start()
    return t, box


def _joined(t: threading.Thread, box: dict[str, Any]) -> Any:
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def run_probe(plan: ProbePlan, request: ProbeRequest, on_event: EventCallback | None = None,
              nsys: Path | None = _UNSET) -> ProbeOutcome:
    """Run the planned probe (steps 2-6). ``nsys`` is :func:`preflight`'s answer; it is asked when not given.

    A config that fails gets a failed row and its failure in ``outcome.failures``; the others go on
    (:func:`require_no_failures` raises once all have run). Raises InputError (exit 2: a ``--gpus`` index
    NVML does not list), CheckFailed (exit 3), ProbeInterrupted (exit 130).
    """
    from clusterbench.io.results import merge_results
    from clusterbench.run.gpus import plan_gpus
    from clusterbench.run.guards import DEFAULT_WINDOW_S, require_guard_pass
    from clusterbench.run.tracers import discard_partials

    emit = on_event or (lambda event: None)
    warnings: list[str] = list(plan.warnings)

    def warn(message: str, hint: str | None = None, label: str | None = None) -> None:
        warnings.append(message)
        emit(ProbeEvent("warning", label=label, message=message, hint=hint))

    notice = replace_notice(plan)
    if notice is not None:
        warn(notice, REPLACE_HINT)
    for w in plan.warnings:
        emit(ProbeEvent("warning", message=w))

    nsys = preflight(plan) if nsys is _UNSET else nsys

    emit(ProbeEvent("phase", phase="guard", total=len(plan.configs)))
    versions_job = _start(read_child_versions, nsys)  # a child asks CuPy while the guards sample the GPU
    unit_probe = start_unit_probe()  # and another imports CuPy to measure the link once the guards passed
    frame_cache = _frame_cache(plan)
    frames_job = _start(_build_frames, plan, frame_cache)  # and the configs' frames are drawn meanwhile
    precompile = Precompile(finder_builds(plan.configs))  # and our finder's compilers import CuPy, waiting for go
    try:
        gpu_plan = plan_gpus(plan.gpus, plan.config_file, max_util_pct=request.max_util_pct,
                             window_s=DEFAULT_WINDOW_S, require_clean=request.require_clean, force=request.force)
    except BaseException as exc:
        unit_probe.stop("the guards did not finish")
        precompile.stop()
        if frame_cache is not None:
            shutil.rmtree(frame_cache, ignore_errors=True)
        if isinstance(exc, KeyboardInterrupt):
            raise ProbeInterrupted("interrupted during the guards, before any config ran: nothing was written") from None
        raise
    verdict = gpu_plan.verdict
    if verdict.refused:
        unit_probe.stop("the guards refused")
        precompile.stop()
        if frame_cache is not None:
            shutil.rmtree(frame_cache, ignore_errors=True)
    require_guard_pass(verdict)  # CheckFailed (exit 3): a busy GPU or a stale build, without --force
    solo = gpu_plan.run_gpus[0]
    unit_probe.go(solo.uuid, solo.name, solo.cpus)
    if verdict.forced:
        warn(verdict.message, verdict.hint)

    session_id = request.session or uuid.uuid4().hex
    out_dir = plan.results_dir
    rows: list[ResultRow] = []
    failures: list[ConfigFailure] = []
    checks: dict[str, tuple[FigureCheck, ...]] = {}
    untraced: dict[str, Any] = {}
    total = len(plan.configs)
    label: str | None = None
    phase = "setup"
    write_env: Callable[[], None] | None = None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        gpu = gpu_identity(verdict.reading)
        versions = _joined(*versions_job)
        _joined(*frames_job)  # the frames drawn: nothing of the probe's own loads the host while the link is timed
        unit_probe.measure()
        unit = unit_probe.result()  # before the first config: the GPU is the link child's alone meanwhile
        unit_probe.keep_log(out_dir)
        if unit.link is None:
            warn(f"the unit's link was not measured: {unit.link_problem}",
                 "compare then judges link-bound figures across units as measured; read unit.log in the results dir")
        git = {"git_rev": verdict.git_rev, "git_dirty": verdict.git_dirty}
        guard_json = _guard_json(verdict)
        per_config: dict[str, ConfigEntry] = {}
        nsys_version = versions.get("nsys")
        tracer = TRACERS[plan.tracer](TracerSetup(nsys=nsys, nsys_version=None if nsys_version is None
                                                  else str(nsys_version)))
        gpu_runs: dict[str, MultiGpuSustained] = {}
        precompile.go()  # the link is measured: the kernels compile while the first traced process starts
        env = {**_child_env(frame_cache), **precompile.child_env()}  # a finder process waits for its build
        from clusterbench.run.callcost import machine_key

        call_costs = CallCosts(nsys if plan.tracer == "nsys" else None,
                               machine_key(gpu.get("uuid"), gpu.get("driver"), None if nsys_version is None  # type: ignore[arg-type]
                                           else str(nsys_version)), env, versions.get("cupy") is not None)

        unit_costs: Any = None  # --what-binds: the unit's untraced costs (model.untraced.UntracedCosts; unit.untraced)

        def write_env() -> None:
            # merged into the dir: the entries, rows and blocks of configs this probe does not run stay
            env_record = build_env(session_id=session_id, argv=request.argv, configs=plan.configs,
                                   tracer=plan.tracer, gpu=gpu, versions=versions, git=git,
                                   guard=guard_json, per_config=per_config, kernel_sources=verdict.kernel_sources,
                                   unit=unit if unit_costs is None else dataclasses.replace(unit, untraced=unit_costs))
            if plan.gpus is not None:
                env_record = dataclasses.replace(env_record, multi_gpu=gpu_plan.env_block(
                    {k: r.summary for k, r in gpu_runs.items()}, {k: r.overlap_s for k, r in gpu_runs.items()}))
            merge_results(out_dir, ResultSet(env_record))

        write_env()
        for index, cfg in enumerate(plan.configs):
            label = cfg.label
            phase = "setup"

            def on_phase(p: str, detail: str | None = None, _label: str = cfg.label, _index: int = index) -> None:
                nonlocal phase
                phase = p
                emit(ProbeEvent("phase", label=_label, phase=p, index=_index, total=total, message=detail))

            emit(ProbeEvent("start", label=label, index=index, total=total))
            run = ConfigRun(cfg, plan, gpu_plan, tracer, out_dir, session_id, on_phase, warn, per_config, env,
                            call_costs, unit_h2d_gbps=unit.link.h2d.gbps if unit.link is not None else None)
            try:
                record, gpu_rows, figures = run.run()
            except ProbeInterrupted:
                raise
            except ClusterbenchError as exc:
                failure = ConfigFailure(cfg.label, phase, exc)
                failures.append(failure)
                discard_partials(out_dir, cfg.label)
                record = run.failed_row(failure)
                merge_results(out_dir, ResultSet(rows=(record,)))
                write_env()
                emit(ProbeEvent("failed", label=label, index=index, total=total, row=record, message=str(exc),
                                hint=exc.hint))
                rows.append(record)
                checks[cfg.label] = run.checks
                continue
            merge_results(out_dir, ResultSet(rows=(record,)))
            if run.untraced is not None:
                untraced[cfg.label] = run.untraced
                if run.untraced.costs is not None:
                    unit_costs = run.untraced.costs
            if figures is not None:
                gpu_runs[cfg.label] = figures
            checks[cfg.label] = run.checks
            write_env()
            emit(ProbeEvent("row", label=label, index=index, total=total, row=record))
            if (problem := record_probe(request.history_db, out_dir)) is not None:
                warn(problem, "clusterbench history import DIR records it later", label)
            rows.append(record)
            rows.extend(gpu_rows)
        precompile.wait()
        precompile.keep_log(out_dir)
    except KeyboardInterrupt:
        removed = discard_partials(out_dir, label) if label else ()
        if write_env is not None:
            try:
                write_env()
            except (OSError, KeyboardInterrupt):
                pass
        gone = f"; removed its partial files ({', '.join(p.name for p in removed)})" if removed else ""
        if phase == "sustained" and plan.tracer != "none":
            gone += f"; {label}'s traced row is kept without sustained FPS"
        raise ProbeInterrupted(
            f"interrupted during {phase} of {label or 'the sweep'!r}: kept {len(rows)} finished row(s) "
            f"in {out_dir / 'probes.csv'}{gone}",
            hint=f"rerun with --only {label} (and the labels after it) to finish the sweep" if label else None,
        ) from None
    except ClusterbenchError:
        if label:
            discard_partials(out_dir, label)
        raise
    finally:
        precompile.stop()
        if frame_cache is not None:
            shutil.rmtree(frame_cache, ignore_errors=True)
    return ProbeOutcome(out_dir, session_id, tuple(rows), tuple(warnings), verdict, tuple(failures), checks,
                        unit, untraced)


def start_unit_probe() -> Any:
    """The link child of :mod:`clusterbench.run.unit`, started now (it imports CuPy while the guards run)."""
    from clusterbench.run.unit import UnitProbe

    return UnitProbe().start()


def _frame_cache(plan: ProbePlan) -> Path | None:
    """A temporary folder where our finder's processes leave the synthetic frames they built for the
    probe's next process of the same frames (None: no config of ours builds frames)."""
    if not any(c.params is not None and c.params.data is None for c in plan.configs):
        return None
    try:
        return Path(tempfile.mkdtemp(prefix=FRAME_CACHE_PREFIX))
    except OSError:
        return None


def _build_frames(plan: ProbePlan, cache: Path | None) -> None:
    """Draw the synthetic frames of every config of our finder into the frame cache, so that none of its
    processes draws them (pure CPU work, while the guards sample the GPU; a protocol program that builds
    the same frames, such as probes/aare_cuda.py, fills the cache from its first process). A failure here
    only leaves the cache empty: each process then draws its own."""
    from clusterbench.workloads.synth import build_frames

    if cache is None:
        return
    seen: set[tuple[object, ...]] = set()
    for c in plan.configs:
        p = c.params
        if p is None or p.data is not None or c.workload.kind != "cupy":
            continue
        key = (p.rows, p.cols, p.pedestal_frames, min(p.pool, p.frames), p.occupancy, p.seed)
        if key in seen:
            continue
        seen.add(key)
        try:
            build_frames(p, cache_dir=cache)
        except (OSError, MemoryError, ValueError):
            return


def _child_env(frame_cache: Path | None) -> dict[str, str]:
    """The children's environment: this checkout first on PYTHONPATH, and the frame cache."""
    from clusterbench.run.commands import child_env
    from clusterbench.workloads.synth import FRAME_CACHE_ENV

    env = child_env()
    if frame_cache is not None:
        env[FRAME_CACHE_ENV] = str(frame_cache)
    return env


def analyze_pass(traced: TracedRun, cfg: ProbeConfig) -> TraceAnalysis:
    """The trace analyzed over the workload's pass range. A trace without that range is the
    workload breaking the protocol: WorkloadProtocolError, with the program's output tail."""
    from clusterbench.analyzers import analyze_trace
    from clusterbench.errors import TraceError
    from clusterbench.run.supervisor import log_tail

    try:
        return analyze_trace(traced.sqlite, frames=cfg.frames, range_name=PASS_RANGE)
    except TraceError as exc:
        if "no NVTX range" not in str(exc):
            raise
        raise WorkloadProtocolError(
            f"config {cfg.label!r}: the workload's trace {traced.sqlite.name} has no NVTX pass range: no range "
            f"starts with {PASS_RANGE!r} (expected {pass_range_text(cfg.frames or 0)!r}); last lines of "
            f"{traced.log.name}:\n{log_tail(traced.log)}",
            hint="push the range clusterbench:pass frames=N around the one batched pass (docs/workloads.md)",
        ) from None


def analyze_exec(traced: TracedRun, cfg: ProbeConfig) -> TraceAnalysis:
    """An exec program's trace over its window (``--window``, default auto) with its frames (``--frames``)."""
    from clusterbench.analyzers import analyze_trace

    assert cfg.exec is not None
    return analyze_trace(traced.sqlite, window=cfg.exec.window, frames_spec=cfg.exec.analysis_frames)


def work_not_traced(analysis: TraceAnalysis) -> Any:
    """The first group whose work the trace does not show (analyze's ``work_not_traced``), or None."""
    return next((g.work_not_traced for g in analysis.groups if g.work_not_traced is not None), None)


def _busy_ns(analysis: TraceAnalysis) -> int:
    return sum(g.busy.any_busy_ns for g in analysis.groups)


class ConfigRun:
    """One config's steps 3-6: trace, analyze (and trace again at graph level where a node-level trace
    lost the work), set the program's own figures against the trace, measure sustained FPS, and build its
    rows; or, when a step fails, its failed row (:meth:`failed_row`) with whatever was measured before."""

    def __init__(self, cfg: ProbeConfig, plan: ProbePlan, gpu_plan: GpuPlan, tracer: Tracer, out_dir: Path,
                 session_id: str, on_phase: Callable[..., None], warn: Callable[..., None],
                 per_config: dict[str, ConfigEntry], env: Mapping[str, str], call_costs: CallCosts | None = None,
                 unit_h2d_gbps: float | None = None) -> None:
        self.cfg, self.plan, self.gpu_plan, self.tracer = cfg, plan, gpu_plan, tracer
        self.out_dir, self.session_id, self.warn, self.per_config, self.env = out_dir, session_id, warn, per_config, env
        self._on_phase = on_phase
        self.phase_s: dict[str, float] = {}
        self._phase: tuple[str, float] | None = None
        self.traced: TracedRun | None = None
        self.analysis: TraceAnalysis | None = None
        self.result: WorkloadResult | None = None
        self.checks: tuple[FigureCheck, ...] = ()
        self.graph_reason: str | None = None
        self._pending: tuple[threading.Thread, dict[str, Any]] | None = None
        self.host: Any = None  # the host bar estimated without the profiler (callcost.HostEstimate)
        self.untraced: Any = None  # --what-binds: model.untraced.UntracedRecord
        self.unit_h2d_gbps = unit_h2d_gbps  # the unit's pinned H2D rate alone (sizes the delay test's link copy)
        self.roofline_note: str | None = None
        self.call_costs = call_costs or CallCosts(None, {}, {}, False)
        self.entry = ConfigEntry(session=session_id, tracer=plan.tracer, frames=cfg.frames,
                                 params=cfg.params.to_json() if cfg.params is not None else dict(cfg.placeholders()),
                                 workload=cfg.workload.kind, command=cfg.workload.command)
        self._save()

    # -- bookkeeping

    def phase(self, name: str, detail: str | None = None) -> None:
        """Report a phase, and time the one before it (``phase_s``)."""
        now = time.monotonic()
        if self._phase is not None and self._phase[0] != name:
            prev, since = self._phase
            self.phase_s[prev] = round(self.phase_s.get(prev, 0.0) + now - since, 3)
        if self._phase is None or self._phase[0] != name:
            self._phase = (name, now)
        self._on_phase(name, detail)

    def _close_phase(self) -> None:
        """Time the last phase (nothing is reported)."""
        if self._phase is not None:
            name, since = self._phase
            self.phase_s[name] = round(self.phase_s.get(name, 0.0) + time.monotonic() - since, 3)
            self._phase = None

    def _save(self, **changes: Any) -> None:
        self.entry = dataclasses.replace(self.entry, **changes)
        self.per_config[self.cfg.label] = self.entry

    @property
    def trace_name(self) -> str | None:
        return None if self.traced is None else self.traced.sqlite.name

    def _row(self, sustained: Measurement | None, error: str | None = None, overhead: float | None = None) -> ResultRow:
        return build_row(self.cfg, self.analysis, sustained, self.result, self.plan.tracer, self.trace_name,
                         self.session_id, checks={c.what: c.status for c in self.checks}, error=error,
                         profiler_overhead=overhead, host=self.host, roofline_note=self.roofline_note,
                         untraced=_untraced_columns(self.untraced))

    def _host_estimate(self, sustained: Measurement | None) -> Any:
        """The busiest launching thread's bar without the profiler: calibrated from nsys's cost per call on
        this machine (:mod:`clusterbench.run.callcost`), or, where the host binds and no calibration is to be
        had, scaled by the program's own untraced / traced rate; None where neither applies."""
        from clusterbench.run.callcost import calls_per_frame, estimate_calibrated, estimate_rate_scaled
        from clusterbench.run.rows import host_bar, trace_figures

        thread, traced_us = host_bar(self.analysis)
        if thread is None or traced_us is None or self.plan.tracer != "nsys" or self.analysis is None:
            return None
        figs = trace_figures(self.analysis)
        host_binds = self.analysis.primary.roofline.engine == "host"
        cost = self.call_costs.get(need=host_binds, on_phase=lambda: self.phase("analyze", "nsys's cost per call"))
        if cost is None and host_binds and self.call_costs.problem:
            self.warn(f"{self.cfg.label}: {self.call_costs.problem}", "python3 scripts/nsys_call_cost.py --save on "
                      "this machine calibrates it", label=self.cfg.label)
            self.call_costs.problem = None  # said once
        if cost is not None and figs.frames:
            est = estimate_calibrated(traced_us, calls_per_frame(thread, figs.frames), cost)
            if est is not None:
                return est
            self.warn(f"{self.cfg.label}: nsys's calibrated cost per call ({cost.summary()}) is more than the host "
                      f"bar itself ({U.us_per_frame(traced_us, 2)}): its calls are not like the calibration's; "
                      "the bar is not estimated that way", label=self.cfg.label)
        if not host_binds or sustained is None:
            return None
        overhead = self._row(sustained).profiler_overhead
        if overhead is None:
            return None
        return estimate_rate_scaled(traced_us, overhead, sustained.spread / sustained.median)

    # -- the steps

    def run(self) -> tuple[ResultRow, tuple[ResultRow, ...], MultiGpuSustained | None]:
        from clusterbench.io.results import merge_results

        cfg, plan = self.cfg, self.plan
        run_gpus = self.gpu_plan.run_gpus
        job = job_for(cfg, self.out_dir, run_gpus[0], plan.timeout_s, self.env)
        early = self._early_sustained(job, run_gpus)
        try:
            traced = self.tracer.trace(job, self.phase)
        except BaseException:
            if early is not None:
                early.stop("the trace failed")
            raise
        overlap = False
        if traced is not None:
            self.traced = traced
            self.result = traced.result
            self._clocks(traced)
            self.phase("analyze")
            overlap = cfg.exec is None and _cpus() >= OVERLAP_MIN_CPUS
            if overlap:  # the analysis runs while the sustained runs go: the row is written after them
                self._pending = _start(analyze_pass, traced, cfg)
            else:
                self._analyzed(self._analyze(traced), job)
                merge_results(self.out_dir, ResultSet(rows=(self._row(None),)))  # the traced figures are safe
        try:
            self.phase("sustained")
            sustained_run = early.go() if early is not None else None
            if sustained_run is None:
                sustained_run = self._sustained(job, run_gpus)
        except BaseException:
            if early is not None:
                early.stop("the probe stopped")
            if self._pending is not None:  # the traced row is kept, as when the analysis came first
                try:
                    self._analyzed(_joined(*self._pending), job, retrace=False)
                    merge_results(self.out_dir, ResultSet(rows=(self._row(None),)))
                except ClusterbenchError:
                    pass
                self._pending = None
            raise
        if self._pending is not None:
            self.phase("analyze")
            pending, self._pending = self._pending, None
            self._analyzed(_joined(*pending), job)
        figures = sustained_run.figures if sustained_run is not None else None
        if self.result is None and sustained_run is not None:
            self.result = sustained_run.last_result
        if traced is None and sustained_run is not None and sustained_run.clocks:
            samples = sustained_run.clocks  # no trace: the clocks over the whole untraced run
            verdict = judge_clocks(samples, samples[0].t_s, samples[-1].t_s, sustained_run.max_clock_mhz, cfg.frames)
            self._save(clocks=verdict.to_json())
        if self.result is not None:
            self._save(finder=self.entry.finder or self.result.finder)
        solo = figures.solo if figures is not None else self._traced_sustained()
        self.checks = self._figure_checks(solo)
        for c in self.checks:
            if c.status == "disagree":
                self.warn(f"{cfg.label}: {c.message}", label=cfg.label)
        self._close_phase()
        self._save(checks={c.what: c.to_json() for c in self.checks} or None, phase_s=dict(self.phase_s),
                   sustained=None if solo is None else sustained_block(solo))
        verdict = steadiness_of(solo)
        if verdict is not None and verdict.steady is False:
            self.warn(f"{cfg.label}: {verdict.message('its sustained FPS')}", STEADY_HINT, label=cfg.label)

        if plan.what_binds is not None:
            self._what_binds(job)
        measured = self._measured_host()
        self.host = measured if measured is not None else self._host_estimate(solo)

        def row_for(s: Measurement) -> ResultRow:
            return self._row(s)

        gpu_rows: tuple[ResultRow, ...] = ()
        if plan.gpus is not None and figures is not None:
            gpu_rows = config_rows(row_for, figures, self.gpu_plan.gpus, socket.gethostname())
            merge_results(self.out_dir, ResultSet(rows=gpu_rows))
        row = self._row(solo)
        above = above_roofline(row, solo, self.host)
        if above is not None:
            self.roofline_note = above.note
            row = self._row(solo)
            if above.impossible:
                self.warn(f"{cfg.label}: {above.note}", "probe the config again: if it repeats, the trace's bars "
                          "are upper bounds (compare the profiler × column)", label=cfg.label)
        if self.host is not None:
            self._save(analysis={**dict(self.entry.analysis or {}), "host": self.host.to_json()})
        return row, gpu_rows, figures

    def _what_binds(self, job: WorkloadJob) -> None:
        """--what-binds: the delay test, the unit's untraced costs and the untraced split
        (:mod:`clusterbench.run.whatbinds`); its record goes to ``<label>.untraced.json`` and env.json."""
        from clusterbench.run.tracers import workload_cwd
        from clusterbench.run.whatbinds import PHASE, measure

        self.phase(PHASE)
        nsys = getattr(self.tracer, "nsys", None)
        record = measure(self.cfg, job.argv(self.out_dir / "unused", "pass"), workload_cwd(job.workload), job.env(),
                         self.out_dir, self.analysis, None if self.traced is None else self.traced.sqlite, nsys,
                         self.plan.what_binds, self.plan.timeout_s, say=lambda text: self.phase(PHASE, text),
                         unit_h2d_gbps=self.unit_h2d_gbps)
        self.untraced = record
        doc = record.to_json()
        (self.out_dir / f"{self.cfg.label}.untraced.json").write_text(json.dumps(doc, indent=2) + "\n")
        for note in record.notes:
            self.warn(f"{self.cfg.label}: what binds: {note}", label=self.cfg.label)
        if record.split is not None and record.split.agrees is False:
            self.warn(f"{self.cfg.label}: the untraced split: {record.split.note}", label=self.cfg.label)
        self._close_phase()
        self._save(analysis={**dict(self.entry.analysis or {}), "untraced": doc}, phase_s=dict(self.phase_s))

    def _measured_host(self) -> Any:
        """--what-binds: the host bar without the profiler as measured, in place of the estimate (None: not
        measured)."""
        from clusterbench.run.rows import host_bar
        from clusterbench.run.whatbinds import measured_host

        return measured_host(self.untraced, host_bar(self.analysis)[1]) if self.untraced is not None else None

    def _analyze(self, traced: TracedRun) -> TraceAnalysis:
        return analyze_exec(traced, self.cfg) if self.cfg.exec is not None else analyze_pass(traced, self.cfg)

    def _analyzed(self, analysis: TraceAnalysis, job: WorkloadJob, retrace: bool = True) -> None:
        """Keep the analysis; trace again at graph level where a node-level trace lost the GPU's work."""
        cfg = self.cfg
        assert self.traced is not None
        lost = work_not_traced(analysis)
        if (retrace and lost is not None and isinstance(self.tracer, NsysTracer) and self.traced.graph_trace == "node"
                and "graph" in lost.why):
            first = self.traced
            self.warn(f"{cfg.label}: the node-level trace (--cuda-graph-trace=node) shows the GPU idle while the "
                      f"launching threads waited {U.pct(lost.share, 0)} of the window: {lost.why}. Tracing it again at graph "
                      "level.", label=cfg.label)
            again = self.tracer.trace(job, self.phase, graph_trace="graph", variant=GRAPH_VARIANT)
            self.phase("analyze")
            second = self._analyze(again)
            if work_not_traced(second) is None or _busy_ns(second) > _busy_ns(analysis):
                self.graph_reason = (f"the node-level trace {first.sqlite.name} left the GPU's work out ({lost.why}; "
                                     f"the launching threads waited {U.pct(lost.share, 0)} of its window); the graph-level "
                                     f"trace {again.sqlite.name} shows it")
                self.warn(f"{cfg.label}: used the graph-level trace {again.sqlite.name}: at node level the work of "
                          "graphs launched from the device is not in the trace; at graph level each graph execution "
                          "is one row (its kernels are not told apart)", label=cfg.label)
                self.traced, analysis = again, second
                if self.result is None or cfg.exec is None:
                    self.result = again.result if again.result is not None else self.result
            else:
                self.warn(f"{cfg.label}: the graph-level trace {again.sqlite.name} does not show the work either; "
                          f"the figures are from {first.sqlite.name}, where the GPU's work is missing: "
                          f"{lost.hint}", label=cfg.label)
        self.analysis = analysis
        for w in analysis.warnings:
            self.warn(f"{cfg.label}: {w}", label=cfg.label)
        result = self.traced.result
        if result is not None and cfg.frames is not None and result.frames != cfg.frames:
            self.warn(f"{cfg.label}: the workload reports {result.frames} frames in its pass, "
                      f"the config asked for {cfg.frames}; per-frame figures use {cfg.frames}", label=cfg.label)
        if cfg.exec is not None and analysis.primary.frames.count is None:
            hint = analysis.primary.frames.hint
            self.warn(f"{cfg.label}: the window's frames are unknown, so there are no per-frame figures"
                      + (f" ({hint})" if hint else ""), "give --frames N or a frames definition (--frames kernel:REGEX)",
                      label=cfg.label)
        self._save(trace=self.traced.sqlite.name, analysis=self._analysis_json(analysis),
                   kernel_sha256=result.kernel_sha256 if result is not None else None,
                   finder=result.finder if result is not None else self.entry.finder)

    def _analysis_json(self, analysis: TraceAnalysis) -> dict[str, object]:
        assert self.traced is not None
        p = analysis.primary
        figs = trace_figures(analysis)
        return {"trace": self.traced.sqlite.name, "graph_trace": self.traced.graph_trace,
                "graph_trace_reason": self.graph_reason, "window": p.window.to_json(), "frames": p.frames.to_json(),
                "capture": None if self.cfg.exec is None else self.cfg.exec.capture, "processes": figs.groups,
                # as analyze takes them: clusterbench analyze TRACE --window W --frames F gives the row's figures
                "window_spec": None if self.cfg.exec is None else (self.cfg.exec.window or "auto"),
                "frames_spec": None if self.cfg.exec is None else self.cfg.exec.analysis_frames,
                "groups": [{"pid": g.pid, "device": g.device, "frames": g.frames.count,
                            "window_ns": g.window.length_ns, "binds": g.roofline.engine,
                            "roofline_fps": g.roofline.fps, "measured_us": g.throughput.measured_us_per_frame,
                            "engines_us": {n: st.us_per_frame for n, st in g.busy.engines.items()},
                            "work_not_traced": None if g.work_not_traced is None else g.work_not_traced.to_json()}
                           for g in analysis.groups]}

    def _clocks(self, traced: TracedRun) -> None:
        cfg = self.cfg
        if traced.result is not None and traced.pass_end_s is not None:
            verdict = clock_verdict_for(traced.clocks, traced.max_clock_mhz, traced.result, traced.pass_end_s)
            if verdict.warning:
                self.warn(f"{cfg.label}: {verdict.warning}", verdict.hint, cfg.label)
        else:  # a program without a pass record: the clocks over its whole run, without a verdict
            verdict = clock_summary(traced.clocks, traced.started_s, traced.ended_s, traced.max_clock_mhz)
        self._save(clocks=verdict.to_json())

    def _early_sustained(self, job: WorkloadJob, run_gpus: Any) -> EarlySustained | None:
        """Our finder's first sustained process, started once the traced pass has written its record
        (:mod:`clusterbench.run.processes`); None where it does not apply."""
        cfg = self.cfg
        if not early_applies(cfg, self.plan.tracer, self.plan.gpus is not None, run_gpus):
            return None
        go_file = self.out_dir / f"{cfg.label}.sustained.go"
        return EarlySustained(lambda go: self._sustained(job, run_gpus, go_file=go, report=False),
                              self.out_dir / f"{cfg.label}.pass.json", go_file)

    def _sustained(self, job: WorkloadJob, run_gpus: Any, go_file: Path | None = None, report: bool = True) -> Any:
        """The untraced runs in the plan's processes, or None (an exec program whose figure is its trace's).
        ``go_file``: the first process's runs wait for it; ``report``: report each process as a phase (not
        from another thread)."""
        from clusterbench.run.tracers import workload_cwd

        cfg, plan = self.cfg, self.plan
        command = sustained_command(cfg, job.argv(self.out_dir / "unused", "pass"), job.workload, plan.repeat,
                                    plan.processes)
        if command is None:
            return None
        return measure_config(cfg, command, run_gpus, self.gpu_plan.tools, self.out_dir, env=self.env,
                              cwd=workload_cwd(job.workload), timeout_s=plan.timeout_s, processes=plan.processes,
                              on_round=(lambda p, k: self.phase("sustained", None if p == "sustained" and k == 0 else
                                                                f"process {k + 1}" if p == "sustained" else p))
                              if report else None, go_file=go_file)

    def _traced_sustained(self) -> Measurement | None:
        """An exec program's sustained figure from its trace (None: nothing traced, or the frames are unknown)."""
        if self.cfg.exec is None or self.cfg.exec.source != "trace" or self.analysis is None:
            return None
        out = traced_sustained(self.cfg, trace_figures(self.analysis))
        if out is None:
            self.warn(f"{self.cfg.label}: no sustained figure: the traced window's frames are unknown",
                      "give --frames N or a frames definition, or the program's own rate (--rate REGEX)",
                      label=self.cfg.label)
        return out

    def _figure_checks(self, sustained: Measurement | None) -> tuple[FigureCheck, ...]:
        """The program's own rate and kernel time against the trace."""
        from clusterbench.run.checks import TraceRate, check_kernel_time, check_rate
        from clusterbench.run.rates import UNIT_HINT, compile_pattern, parse_unit, read_figure

        cfg, traced, analysis = self.cfg, self.traced, self.analysis
        figs = trace_figures(analysis) if analysis is not None else None
        output = traced.child.output() if traced is not None and traced.child is not None else ""
        out: list[FigureCheck] = []
        spec = cfg.exec
        if spec is not None and spec.rate is not None:
            try:
                printed = read_figure(output, compile_pattern(spec.rate, "--rate"), spec.rate_unit) if output else None
            except ValueError as exc:
                self.warn(f"{cfg.label}: the traced run's rate line: {exc}", UNIT_HINT, label=cfg.label)
                printed = None
            untraced = (sustained.samples if sustained is not None and sustained.metadata.get("source") == "rate"
                        else ())
            given = parse_unit(spec.rate_unit) if spec.rate_unit is not None else None
            metric = ("GB/s" if (printed is not None and printed.metric == "GB/s")
                      or (given is not None and given.metric == "GB/s")
                      or (sustained is not None and sustained.metric != SUSTAINED_FPS) else "fps")
            trace = None
            if figs is not None and analysis is not None:
                p = analysis.primary
                trace = TraceRate(figs.frames, p.frames.source, figs.window_ns, p.window.source, figs.h2d_bytes,
                                  figs.idle_share, figs.groups)
            out.append(check_rate(printed, untraced, metric, trace))
        kernel_us = figs.engine_us("kernel") if figs is not None else None
        if spec is not None and spec.kernel_time is not None:
            program_us, source = None, "its output"
            try:
                reading = read_figure(output, compile_pattern(spec.kernel_time, "--kernel-time"),
                                      spec.kernel_time_unit) if output else None
                if reading is not None:
                    program_us, source = reading.us_per_frame, f"its line {reading.line!r}"
            except ValueError as exc:
                source = f"its output ({exc})"
            out.append(check_kernel_time(program_us, source, kernel_us))
        elif self.result is not None and "kernel_us_per_frame" in self.result.extra:
            value = self.result.extra["kernel_us_per_frame"]
            program_us = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
            out.append(check_kernel_time(program_us, "its result record's extra.kernel_us_per_frame", kernel_us))
        return tuple(out)

    def failed_row(self, failure: ConfigFailure) -> ResultRow:
        """The config's row marked failed: why in one line, with whatever was measured before."""
        if self._pending is not None:
            try:
                self.analysis = _joined(*self._pending)
            except BaseException:  # noqa: BLE001 - the failure already says what went wrong
                pass
            self._pending = None
        self._close_phase()
        lines = [ln for ln in failure.message.splitlines() if ln.strip()]
        first = lines[0] if lines else type(failure.error).__name__
        tail = "\n".join(lines[1:])
        self._save(error={"phase": failure.phase, "message": first, "hint": failure.error.hint, "tail": tail or None,
                          "exit_code": failure.error.exit_code}, phase_s=dict(self.phase_s))
        return self._row(None, error=f"{failure.phase}: {first}")


def _untraced_columns(record: Any) -> dict[str, object]:
    from clusterbench.run.whatbinds import row_columns

    return row_columns(record)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
