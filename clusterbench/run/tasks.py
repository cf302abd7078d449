"""The records of a campaign (docs/scaling.md): one task per config (or per config x GPU type), what
each task did, and campaign.json, which both the submitting process and the merge read.
Nothing here prints, exits, or imports typer, rich or CuPy.
"""

from __future__ import annotations

import enum
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from clusterbench.errors import InputError
from clusterbench.run.probe import ProbeRequest
from clusterbench.run.rows import utc_now

PYTHON = "{python}"  # in a task's argv: the interpreter the task runs under (the venv on the shared filesystem)
TASK_JSON = "task.json"
TASK_LOG = "task.log"
REQUEST_JSON = "request.json"  # the task's probe request, written into its dir before it runs
CAMPAIGN_JSON = "campaign.json"
# campaign.json and env.json's ``campaign`` block. History: 1: first version; 2: each task holds its
# probe request (the task runs clusterbench probe --request <task dir>/request.json).
CAMPAIGN_VERSION = 2
READABLE_CAMPAIGN_VERSIONS = (1, 2)  # a version-1 task has no request: its argv says everything
DEFAULT_TIMEOUT_MIN = 60


MERGE_WHY = ("merged by one process: fcntl/flock locks are not trustworthy across hosts on NFS, so each task "
             "wrote only its own dir and only the parent wrote this one")


@dataclass(frozen=True, slots=True)
class ExecutorOptions:
    """How tasks are submitted: ``kind`` local|slurm, submitit's folder, the partitions (one per GPU
    type; several make one task per config x partition), GPUs per task, array parallelism (None:
    submitit's default on Slurm, 1 locally), the time limit, CPUs per task."""

    kind: str
    folder: Path
    partitions: tuple[str, ...] = ()
    gpus_per_task: int = 1
    array_parallelism: int | None = None
    timeout_min: int = DEFAULT_TIMEOUT_MIN
    cpus_per_task: int | None = None
    slurm_extra: Mapping[str, str] = field(default_factory=dict)  # sbatch options submitit has no name for

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "folder": str(self.folder), "partitions": list(self.partitions),
                "gpus_per_task": self.gpus_per_task, "array_parallelism": self.array_parallelism,
                "timeout_min": self.timeout_min, "cpus_per_task": self.cpus_per_task,
                "slurm_extra": dict(self.slurm_extra)}


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """One array task: a config (and the partition it runs on), its own dir on the shared filesystem,
    the probe request it runs (written to ``<task_dir>/request.json``) and the argv that runs it.
    Small, frozen and picklable: it travels to the node through submitit."""

    index: int
    label: str
    task_dir: str
    argv: tuple[str, ...]
    partition: str | None = None
    variant: str | None = None  # set when a campaign spans several partitions: the merged labels carry it
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    timeout_s: float | None = None
    request: ProbeRequest | None = None

    @property
    def request_path(self) -> Path:
        return Path(self.task_dir) / REQUEST_JSON

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "label": self.label, "task_dir": self.task_dir, "argv": list(self.argv),
                "partition": self.partition, "variant": self.variant, "env": [list(kv) for kv in self.env],
                "cwd": self.cwd, "timeout_s": self.timeout_s,
                "request": None if self.request is None else self.request.to_json()}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "TaskSpec":
        request = doc.get("request")
        return cls(index=int(doc["index"]), label=str(doc["label"]), task_dir=str(doc["task_dir"]),
                   argv=tuple(doc["argv"]), partition=doc.get("partition"), variant=doc.get("variant"),
                   env=tuple((str(k), str(v)) for k, v in doc.get("env") or ()), cwd=doc.get("cwd"),
                   timeout_s=doc.get("timeout_s"),
                   request=None if request is None else ProbeRequest.from_json(request, f"task {doc['index']}"))


class TaskState(str, enum.Enum):
    DONE = "done"  # the probe exited 0
    FAILED = "failed"  # the probe ran and exited non-zero (its finished rows are still merged)
    LOST = "lost"  # the job itself did not finish (killed, node failure, time limit): submitit said so

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class TaskResult:
    """What one task did, where. ``message``: the log's last lines when it failed, the reason when lost."""

    index: int
    label: str
    state: TaskState
    host: str | None = None
    returncode: int | None = None
    message: str = ""
    started_utc: str | None = None
    wall_s: float | None = None
    job_id: str | None = None
    variant: str | None = None

    @property
    def ok(self) -> bool:
        return self.state is TaskState.DONE

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "label": self.label, "state": self.state.value, "host": self.host,
                "returncode": self.returncode, "message": self.message, "started_utc": self.started_utc,
                "wall_s": self.wall_s, "job_id": self.job_id, "variant": self.variant}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "TaskResult":
        return cls(index=int(doc["index"]), label=str(doc["label"]), state=TaskState(doc["state"]),
                   host=doc.get("host"), returncode=doc.get("returncode"), message=str(doc.get("message") or ""),
                   started_utc=doc.get("started_utc"), wall_s=doc.get("wall_s"), job_id=doc.get("job_id"),
                   variant=doc.get("variant"))


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def save_campaign(campaign_dir: Path, specs: Sequence[TaskSpec], options: ExecutorOptions, target_dir: Path,
                  argv: Sequence[str] = (), campaign_id: str | None = None) -> dict[str, Any]:
    """campaign.json: what was submitted, so that :func:`merge_campaign` can merge later (after Ctrl-C,
    or once Slurm finished the tasks the parent stopped waiting for)."""
    doc = {"schema": "clusterbench.campaign", "version": CAMPAIGN_VERSION,
           "campaign_id": campaign_id or uuid.uuid4().hex, "created_utc": utc_now(), "argv": list(argv),
           "target_dir": str(Path(target_dir).resolve()), "executor": options.to_json(),
           "tasks": [s.to_json() for s in specs]}
    Path(campaign_dir).mkdir(parents=True, exist_ok=True)
    _write_json(Path(campaign_dir) / CAMPAIGN_JSON, doc)
    return doc


def load_campaign(campaign_dir: Path) -> dict[str, Any]:
    """campaign.json; InputError (exit 2) when missing, malformed or of an unknown version."""
    path = Path(campaign_dir) / CAMPAIGN_JSON
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"no {CAMPAIGN_JSON} in {campaign_dir}", hint="point at the dir a campaign was planned in") \
            from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} is not readable JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema") != "clusterbench.campaign" or doc.get("version") not in \
            READABLE_CAMPAIGN_VERSIONS:
        got = doc.get("version") if isinstance(doc, dict) else None
        raise InputError(f"{path} is not a clusterbench campaign of version "
                         f"{' or '.join(map(str, READABLE_CAMPAIGN_VERSIONS))} (version {got!r})",
                         hint="use the clusterbench version that wrote it")
    return doc
