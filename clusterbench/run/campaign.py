"""Campaigns through submitit: ``clusterbench probe --executor slurm|local`` (docs/scaling.md).

One array task per config (or per config x GPU type: one partition per type), each running
``clusterbench probe --request <its own task dir>/request.json`` on whatever node the scheduler gives
it: the parent's :class:`~clusterbench.run.probe.ProbeRequest` for that one config, into the task's
own dir (:func:`task_request`). The parent waits (progress through a callback), then merges every
task's results dir into one through the store (:func:`clusterbench.io.results.merge_results`), each
row carrying its host and GPU.

Why the merge happens in one process: the store's lock is ``fcntl.flock``, which holds between
processes of one host but is not trustworthy across hosts on NFS (older clients and servers do not
carry flock to the server at all; others emulate it with POSIX locks that a lost lease drops).
So no two hosts ever write the same file: each task writes only inside its own task dir, and
only the parent writes the merged dir.

Nothing here schedules: submitit's ``AutoExecutor`` submits (``map_array``: one Slurm job array
per partition, ``--array=0-N%K`` for ``--array-parallelism K``) and ``submitit.helpers.as_completed``
waits. The one exception: submitit's ``LocalExecutor`` starts every job at once and has no array
parallelism, and local tasks share this machine's GPUs, so local tasks go in waves of K (default 1).

submitit is an optional extra (``pip install clusterbench[slurm]``), imported only when a campaign
runs. Nothing here prints, exits, or imports typer, rich or CuPy.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from clusterbench.errors import CampaignInterrupted, EnvironmentFailure, InputError
from clusterbench.model.results import KEY_SEPARATOR
from clusterbench.run.merge import MergeReport, merge_task_dirs
from clusterbench.run.probe import ProbeRequest
from clusterbench.run.rows import utc_now
from clusterbench.run.supervisor import ChildSpec, run_child
from clusterbench.run.tasks import (PYTHON, TASK_JSON, TASK_LOG, ExecutorOptions, TaskResult,
                                    TaskSpec, TaskState, _write_json, save_campaign)

EXECUTORS = ("local", "slurm")
DEFAULT_POLL_S = 10.0  # submitit's own default poll frequency for as_completed
TASK_STOP_GRACE_S = 30.0  # a task's probe gets this long to write env.json and stop its children
REQUEST = "{request}"  # in a task's command: its request file
# What a task runs: the probe, given its request as a file (PYTHON: the interpreter on the node).
TASK_COMMAND: tuple[str, ...] = (PYTHON, "-m", "clusterbench", "probe", "--request", REQUEST)


# --------------------------------------------------------------------------- records


def check_executor_options(opts: ExecutorOptions) -> ExecutorOptions:
    """Validate before anything is submitted. InputError (exit 2)."""
    if opts.kind not in EXECUTORS:
        raise InputError(f"--executor must be local or slurm, got {opts.kind!r}",
                         hint="--executor slurm --partition P submits to Slurm; --executor local runs here")
    if opts.kind == "slurm" and not opts.partitions:
        raise InputError("--executor slurm needs --partition P (repeat it for one task per config and GPU type)",
                         hint="list partitions with sinfo -s")
    if opts.kind == "local" and opts.partitions:
        raise InputError(f"--partition {', '.join(opts.partitions)} applies to --executor slurm only",
                         hint="drop --partition, or use --executor slurm")
    if len(set(opts.partitions)) != len(opts.partitions):
        raise InputError(f"--partition names a partition twice: {', '.join(opts.partitions)}")
    bad = [p for p in opts.partitions if not p or KEY_SEPARATOR in p or "," in p]
    if bad:
        raise InputError(f"--partition {bad[0]!r} is not a partition name", hint="list partitions with sinfo -s")
    low = 1 if opts.kind == "slurm" else 0
    if type(opts.gpus_per_task) is not int or opts.gpus_per_task < low:
        raise InputError(f"--gpus-per-task must be an integer >= {low}, got {opts.gpus_per_task!r}",
                         hint="use --gpus-per-task 1 (the default); more with --gpus all inside each task")
    if opts.array_parallelism is not None and (type(opts.array_parallelism) is not int or opts.array_parallelism < 1):
        raise InputError(f"--array-parallelism must be an integer >= 1, got {opts.array_parallelism!r}",
                         hint="--array-parallelism K runs at most K tasks at once")
    if type(opts.timeout_min) is not int or opts.timeout_min < 1:
        raise InputError(f"the task time limit must be whole minutes >= 1, got {opts.timeout_min!r}")
    return opts


def executor_options_for(kind: str | None, folder: Path, partitions: Sequence[str] = (),
                         gpus_per_task: int | None = None, array_parallelism: int | None = None
                         ) -> ExecutorOptions | None:
    """The probe's ``--executor``, ``--partition``, ``--gpus-per-task``, ``--array-parallelism`` as
    checked options, or None without ``--executor`` (pure). InputError (exit 2): a campaign option
    without ``--executor``, or any option :func:`check_executor_options` refuses."""
    if kind is None:
        given = [name for name, value in (("--partition", tuple(partitions)), ("--gpus-per-task", gpus_per_task),
                                          ("--array-parallelism", array_parallelism)) if value not in ((), None)]
        if given:
            raise InputError(f"{', '.join(given)} applies to a campaign only: add --executor slurm or --executor local",
                             hint="without --executor, probe runs here; --gpus all uses every GPU of this node")
        return None
    return check_executor_options(ExecutorOptions(
        kind=kind, folder=Path(folder), partitions=tuple(partitions),
        gpus_per_task=1 if gpus_per_task is None else gpus_per_task, array_parallelism=array_parallelism))


@dataclass(frozen=True, slots=True)
class CampaignProgress:
    """One progress report: ``kind`` submitted | task (one finished) | merged."""

    kind: str
    done: int
    total: int
    failed: int = 0
    task: TaskResult | None = None
    message: str = ""


ProgressCallback = Callable[[CampaignProgress], None]


# --------------------------------------------------------------------------- the task (runs on the node)


def _last_error(log: Path) -> str:
    """The last ``Error:`` message of a log (the CLI's error, its wrapped lines joined), else its last
    non-empty line."""
    try:
        lines = [ln.rstrip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log)"
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Error:")]
    if not starts:
        return lines[-1].strip() if lines else "(empty log)"
    i = starts[-1]
    parts = [lines[i]]
    for ln in lines[i + 1:]:
        if not ln[:1].isspace():  # the error's wrapped lines are indented; the next message is not
            break
        parts.append(ln.strip())
    return " ".join(parts)


def run_task(spec: TaskSpec) -> TaskResult:
    """The array task: write its probe request, run ``spec.argv`` through the supervisor (output in
    ``<task_dir>/task.log``, its process group ended at ``spec.timeout_s``), write ``task.json``.

    Top-level and picklable, as submitit needs. A probe that fails is a FAILED result, not an
    exception, so the parent still learns the host and merges the rows the probe finished.
    """
    task_dir = Path(spec.task_dir)
    task_dir.mkdir(parents=True, exist_ok=True)
    if spec.request is not None:
        _write_json(spec.request_path, spec.request.to_json())
    log = task_dir / TASK_LOG
    argv = tuple(sys.executable if a == PYTHON else a for a in spec.argv)
    host = socket.gethostname()
    started = utc_now()
    t0 = time.monotonic()
    outcome = run_child(ChildSpec(argv, log, header=f"task {spec.index} ({spec.label}) on {host}, {started}",
                                  env={**os.environ, **dict(spec.env)}, cwd=spec.cwd, timeout_s=spec.timeout_s,
                                  grace_s=TASK_STOP_GRACE_S))
    message = ""
    if not outcome.ok:
        # first line: how it ended and what went wrong, in the probe's own words (its Error: line); then the tail
        message = f"{outcome.status_text}: {_last_error(log)}\nlast lines of {log}:\n{outcome.tail}"
    result = TaskResult(spec.index, spec.label, TaskState.DONE if outcome.ok else TaskState.FAILED, host,
                        outcome.returncode, message, started, time.monotonic() - t0, variant=spec.variant)
    _write_json(task_dir / TASK_JSON, result.to_json())
    return result


# --------------------------------------------------------------------------- planning (pure)


def task_dir_name(index: int, label: str, variant: str | None) -> str:
    return f"{index:03d}-{label}" + (f"{KEY_SEPARATOR}{variant}" if variant else "")


def task_request(request: ProbeRequest, label: str, task_root: Path) -> ProbeRequest:
    """The probe one task runs: ``request`` for config ``label`` alone, into the task's own results
    root. Paths are made absolute: the task runs on another node, in another working directory."""
    return dataclasses.replace(request, only=(label,), results_root=Path(task_root).resolve(),
                               config_path=Path(request.config_path).resolve(),
                               data=None if request.data is None else Path(request.data).resolve())


def plan_campaign(request: ProbeRequest, labels: Sequence[str], options: ExecutorOptions, campaign_dir: Path, *,
                  env: Mapping[str, str] | None = None, cwd: str | None = None,
                  command: Sequence[str] | None = None) -> tuple[TaskSpec, ...]:
    """One task per config, or per config x partition when several partitions are given (pure).

    Each task holds its :func:`task_request` and runs ``command`` (default :data:`TASK_COMMAND`, looked
    up when called), ``{request}`` being its request file. Task dirs are
    ``<campaign_dir>/tasks/<index>-<label>[@partition]``."""
    if not labels:
        raise InputError("no config to submit", hint="check --only against configs.toml")
    template = tuple(TASK_COMMAND if command is None else command)
    partitions: Sequence[str | None] = options.partitions or (None,)
    several = len(partitions) > 1
    specs = []
    for part in partitions:
        for label in labels:
            index = len(specs)
            variant = part if several else None
            root = Path(campaign_dir).resolve() / "tasks" / task_dir_name(index, label, variant)
            spec = TaskSpec(index=index, label=label, task_dir=str(root), argv=(), partition=part, variant=variant,
                            env=tuple(sorted((env or {}).items())), cwd=cwd,
                            request=task_request(request, label, root))
            argv = tuple(str(spec.request_path) if a == REQUEST else a for a in template)
            specs.append(dataclasses.replace(spec, argv=argv))
    return tuple(specs)


# --------------------------------------------------------------------------- submitting and waiting


def import_submitit() -> Any:
    try:
        import submitit
    except ImportError:
        raise EnvironmentFailure("--executor needs submitit, which is not installed",
                                 hint="pip install 'clusterbench[slurm]' (or pip install submitit)") from None
    return submitit


def check_submit_host(options: ExecutorOptions) -> Any:
    """submitit importable and, for slurm, sbatch and srun on PATH; returns submitit. EnvironmentFailure (exit 1)."""
    submitit = import_submitit()
    if options.kind == "slurm" and (shutil.which("sbatch") is None or shutil.which("srun") is None):
        raise EnvironmentFailure("--executor slurm: sbatch/srun not found on PATH: this is not a Slurm submit host",
                                 hint="run on the cluster's login node, or use --executor local")
    return submitit


def make_executor(options: ExecutorOptions, partition: str | None = None, submitit: Any = None) -> Any:
    """A submitit ``AutoExecutor`` for one partition (slurm) or this machine (local)."""
    checked = check_submit_host(options)
    submitit = submitit or checked
    folder = Path(options.folder) / "submitit"
    if options.kind == "slurm":
        ex = submitit.AutoExecutor(folder=folder, cluster="slurm")
        params: dict[str, Any] = {"timeout_min": options.timeout_min, "name": "clusterbench",
                                  "slurm_partition": partition, "slurm_gpus_per_task": options.gpus_per_task}
        if options.array_parallelism is not None:
            params["slurm_array_parallelism"] = options.array_parallelism
        if options.cpus_per_task is not None:
            params["cpus_per_task"] = options.cpus_per_task
        if options.slurm_extra:
            params["slurm_additional_parameters"] = dict(options.slurm_extra)
    else:
        ex = submitit.AutoExecutor(folder=folder, cluster="local")
        params = {"timeout_min": options.timeout_min, "gpus_per_node": options.gpus_per_task}
    ex.update_parameters(**params)
    return ex


def _result_of(job: Any, spec: TaskSpec) -> TaskResult:
    job_id = str(getattr(job, "job_id", "") or "") or None
    try:
        got = job.result()
    except Exception as exc:  # submitit's UncompletedJobError / FailedJobError: the job itself died
        host = None
        try:
            host = TaskResult.from_json(json.loads((Path(spec.task_dir) / TASK_JSON).read_text())).host
        except (OSError, ValueError, KeyError):
            pass
        text = str(exc).strip().splitlines()  # submitit quotes the job's whole stderr: keep its ends
        brief = "\n".join(text[:3] + ["..."] + text[-3:] if len(text) > 6 else text)
        return TaskResult(spec.index, spec.label, TaskState.LOST, host, None,
                          f"job {job_id} did not finish: {type(exc).__name__}: {brief}", job_id=job_id,
                          variant=spec.variant)
    if not isinstance(got, TaskResult):
        return TaskResult(spec.index, spec.label, TaskState.LOST, None, None,
                          f"job {job_id} returned {type(got).__name__}, not a TaskResult", job_id=job_id,
                          variant=spec.variant)
    return dataclasses.replace(got, job_id=job_id)


def run_tasks(specs: Sequence[TaskSpec], options: ExecutorOptions, on_progress: ProgressCallback | None = None,
              *, poll_s: float = DEFAULT_POLL_S, submitit: Any = None) -> tuple[TaskResult, ...]:
    """Submit every task (one ``map_array`` per partition) and wait for all; results in task order.

    Ctrl-C: local jobs are cancelled, Slurm jobs keep running (merge them later with
    :func:`merge_campaign`); CampaignInterrupted (exit 130) says how many had finished.
    """
    check_executor_options(options)
    submitit = submitit or import_submitit()
    emit = on_progress or (lambda p: None)
    total = len(specs)
    results: dict[int, TaskResult] = {}
    live: list[Any] = []

    def collect(pairs: Sequence[tuple[Any, TaskSpec]]) -> None:
        spec_of = {id(job): spec for job, spec in pairs}
        for job in submitit.helpers.as_completed([job for job, _ in pairs], poll_frequency=poll_s):
            res = _result_of(job, spec_of[id(job)])
            results[res.index] = res
            emit(CampaignProgress("task", len(results), total, sum(not r.ok for r in results.values()), res))

    try:
        if options.kind == "slurm":
            pairs: list[tuple[Any, TaskSpec]] = []
            for part in dict.fromkeys(s.partition for s in specs):
                group = [s for s in specs if s.partition == part]
                jobs = make_executor(options, part, submitit).map_array(run_task, group)
                live.extend(jobs)
                pairs.extend(zip(jobs, group))
            emit(CampaignProgress("submitted", 0, total, message=f"{total} task(s) submitted to Slurm "
                                  f"({', '.join(p or '' for p in dict.fromkeys(s.partition for s in specs))})"))
            collect(pairs)
        else:
            k = options.array_parallelism or 1
            ex = make_executor(options, None, submitit)
            emit(CampaignProgress("submitted", 0, total, message=f"{total} local task(s), {k} at a time"))
            for start in range(0, total, k):
                group = list(specs[start:start + k])
                jobs = ex.map_array(run_task, group)
                live = list(jobs)
                collect(list(zip(jobs, group)))
    except KeyboardInterrupt:
        if options.kind == "local":
            for job in live:
                try:
                    job.cancel(check=False)
                except Exception:
                    pass
        raise CampaignInterrupted(
            f"interrupted with {len(results)} of {total} task(s) finished",
            hint=("Slurm keeps running the submitted tasks: merge them later with merge_campaign"
                  if options.kind == "slurm" else "re-run the configs that did not finish with --only")) from None
    return tuple(results[s.index] for s in specs if s.index in results)


# --------------------------------------------------------------------------- merging (one process)


@dataclass(frozen=True, slots=True)
class CampaignOutcome:
    target: Path
    campaign_dir: Path
    results: tuple[TaskResult, ...]
    merge: MergeReport

    @property
    def failed(self) -> tuple[TaskResult, ...]:
        return tuple(r for r in self.results if not r.ok)


def run_campaign(specs: Sequence[TaskSpec], options: ExecutorOptions, target: Path, campaign_dir: Path, *,
                 argv: Sequence[str] = (), on_progress: ProgressCallback | None = None,
                 poll_s: float = DEFAULT_POLL_S, submitit: Any = None) -> CampaignOutcome:
    """Plan saved, tasks submitted and awaited, task dirs merged into ``target``. A failed task does not
    stop the others; :func:`require_all_tasks_ok` turns failures into exit 1 after the merge. Ctrl-C
    merges what finished, then raises CampaignInterrupted (exit 130)."""
    check_executor_options(options)
    submitit = submitit or check_submit_host(options)  # before anything is written
    doc = save_campaign(campaign_dir, specs, options, target, argv)
    emit = on_progress or (lambda p: None)
    try:
        results = run_tasks(specs, options, on_progress, poll_s=poll_s, submitit=submitit)
    except CampaignInterrupted:
        merge_task_dirs(target, specs, campaign=doc)
        raise
    merge = merge_task_dirs(target, specs, {r.index: r for r in results}, campaign=doc)
    emit(CampaignProgress("merged", len(results), len(specs), sum(not r.ok for r in results),
                          message=f"{len(merge.labels)} row(s) merged into {target}"))
    return CampaignOutcome(Path(target), Path(campaign_dir), results, merge)


def require_all_tasks_ok(outcome: CampaignOutcome) -> None:
    """EnvironmentFailure (exit 1) naming each failed or lost task; the merged rows are already written."""
    bad = outcome.failed
    missing = len(outcome.merge.tasks) - len(outcome.results)
    if not bad and missing <= 0:
        return
    lines = [f"task {r.index} ({r.label}) {r.state.value} on {r.host or 'an unknown host'}: "
             f"{r.message.splitlines()[0] if r.message else ''}" for r in bad]
    raise EnvironmentFailure(
        f"{len(bad)} of {len(outcome.merge.tasks)} campaign task(s) did not finish; their finished rows are kept "
        f"in {outcome.target}:\n" + "\n".join(lines),
        hint=f"read each task's {TASK_LOG} under {outcome.campaign_dir / 'tasks'}; re-run those configs with --only")
