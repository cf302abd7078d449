"""Merging a campaign's task dirs into one results dir, in one process (docs/scaling.md).

Why one process: the store's lock is ``fcntl.flock``, which holds between processes of one host
but is not trustworthy across hosts on NFS. So each task writes only inside its own task dir, and
only the parent writes the merged dir.
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from clusterbench.errors import InputError
from clusterbench.model.results import ConfigEntry, EnvRecord, ResultRow, ResultSet, RowKey
from clusterbench.run.rows import utc_now
from clusterbench.run.tasks import MERGE_WHY, TASK_JSON, TaskResult, TaskSpec, load_campaign


@dataclass(frozen=True, slots=True)
class MergedTask:
    """What the merge took from one task: its results dirs, the labels it wrote, what went wrong."""

    index: int
    label: str
    state: str  # the TaskState, or "unknown" when the parent never heard back
    host: str | None
    source_dirs: tuple[str, ...]
    labels: tuple[str, ...]
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MergeReport:
    target: Path
    tasks: tuple[MergedTask, ...]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(lab for t in self.tasks for lab in t.labels)

    @property
    def problems(self) -> tuple[str, ...]:
        return tuple(p for t in self.tasks for p in t.problems)


def find_results_dirs(task_dir: Path) -> tuple[Path, ...]:
    """The results dirs a probe wrote under a task's ``--results-dir`` (dirs holding probes.csv)."""
    root = Path(task_dir)
    if not root.is_dir():
        return ()
    return tuple(sorted(p.parent for p in root.glob("*/probes.csv")))


def _distinct(values: Iterable[Any]) -> Any:
    """One value when all agree, else the distinct values comma-joined (as env.json does for dtypes)."""
    seen = list(dict.fromkeys(str(v) for v in values if v is not None and v != ""))
    if not seen:
        return None
    return seen[0] if len(seen) == 1 else ",".join(seen)


# env.json's campaign block, what a campaign merge records. History:
#   1: merge (why one process merges), executor, tasks (each its spec, result, source dirs, labels, problems).
#   2: schema and version (was version alone); each task also keeps its results dir's multi_gpu block.
CAMPAIGN_BLOCK_SCHEMA = "clusterbench.campaign-merge"
CAMPAIGN_BLOCK_VERSION = 2
# The stamps of the merged env.json: one value where every task agrees, else the values comma-joined.
_JOINED_STAMPS = ("tool_version", "gpu_name", "gpu_uuid", "driver", "cuda_driver", "cuda_runtime", "cupy",
                  "nsys_version", "python", "pedestal_dtype", "pedestal", "tracer", "workloads")


def merge_task_dirs(target: Path, specs: Sequence[TaskSpec], results: Mapping[int, TaskResult] | None = None, *,
                    campaign: Mapping[str, Any] | None = None) -> MergeReport:
    """Merge every task's results dir into ``target`` through the store (:func:`merge_results`).

    Every row gets ``host``, ``gpu_name``, ``gpu_uuid`` (from the row when it has them, as ``--gpus``
    rows do, else from its task's env.json), ``task`` and ``source_dir``; a campaign over several
    partitions sets each row key's ``variant`` to its partition. Rows a failed task finished are kept.
    Rows and env.json entries of configs no task ran stay; re-merging replaces each row by its own key.
    """
    from clusterbench.io.results import load_results, merge_results

    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    results = results or {}
    merged: list[MergedTask] = []
    envs: list[EnvRecord] = []
    configs: dict[RowKey, ConfigEntry] = {}
    rows: dict[RowKey, ResultRow] = {}
    owner: dict[RowKey, int] = {}
    task_docs: list[dict[str, Any]] = []
    for spec in specs:
        res = results.get(spec.index)
        if res is None:
            try:
                res = TaskResult.from_json(json.loads((Path(spec.task_dir) / TASK_JSON).read_text()))
            except (OSError, ValueError, KeyError):
                res = None
        problems: list[str] = []
        labels: list[str] = []
        multi_gpu: list[Any] = []
        sources = find_results_dirs(Path(spec.task_dir))
        if not sources:
            problems.append(f"task {spec.index} ({spec.label}): no results dir under {spec.task_dir}")
        for src in sources:
            try:
                loaded = load_results(src)
            except InputError as exc:
                problems.append(f"task {spec.index} ({spec.label}): {src} not merged: {exc}")
                continue
            env = loaded.env
            assert env is not None  # load_results refuses a dir without env.json
            envs.append(env)
            multi_gpu.append(env.multi_gpu)
            host = (res.host if res is not None else None) or env.host
            rel = os.path.relpath(src, target)
            for row in loaded.rows:
                key = dataclasses.replace(row.key, variant=spec.variant) if spec.variant else row.key
                if key in owner and owner[key] != spec.index:
                    problems.append(f"task {spec.index}: row {key.label!r} also came from task {owner[key]}: "
                                    "kept the first")
                    continue
                owner[key] = spec.index
                rows[key] = dataclasses.replace(row, key=key, host=row.host or host,
                                                gpu_name=row.gpu_name or env.gpu_name,
                                                gpu_uuid=row.gpu_uuid or env.gpu_uuid, task=spec.index,
                                                source_dir=rel)
                labels.append(key.label)
            for ckey, entry in env.configs.items():
                configs[dataclasses.replace(ckey, variant=spec.variant) if spec.variant else ckey] = entry
        state = res.state.value if res is not None else "unknown"
        if res is not None and not res.ok:
            first = res.message.splitlines()[0] if res.message else ""
            problems.insert(0, f"task {spec.index} ({spec.label}) {state}: {first}")
        merged.append(MergedTask(spec.index, spec.label, state, res.host if res else None,
                                 tuple(str(s) for s in sources), tuple(labels), tuple(problems)))
        task_docs.append({**spec.to_json(), "result": None if res is None else res.to_json(),
                          "source_dirs": [os.path.relpath(s, target) for s in sources], "labels": labels,
                          "problems": problems, "multi_gpu": [b for b in multi_gpu if b is not None] or None})
    hosts = sorted({t.host for t in merged if t.host})
    dirty = [e.git_dirty for e in envs]
    env = EnvRecord(
        session_id=(campaign or {}).get("campaign_id") or uuid.uuid4().hex, created_utc=utc_now(),
        argv=tuple((campaign or {}).get("argv") or ()), host=_distinct(hosts), hosts=tuple(hosts),
        git_rev=_distinct(e.git_rev for e in envs),
        git_dirty=True if any(d is True for d in dirty) else (False if dirty and all(d is False for d in dirty)
                                                              else None),
        configs=configs,
        campaign={"schema": CAMPAIGN_BLOCK_SCHEMA, "version": CAMPAIGN_BLOCK_VERSION, "merge": MERGE_WHY,
                  "executor": (campaign or {}).get("executor"), "tasks": task_docs},
        **{name: _distinct(getattr(e, name) for e in envs) for name in _JOINED_STAMPS})
    merge_results(target, ResultSet(env, tuple(rows.values())))
    return MergeReport(target, tuple(merged))


def merge_campaign(campaign_dir: Path, target: Path | None = None) -> MergeReport:
    """Merge a planned campaign's task dirs as they are now (from campaign.json and each task.json)."""
    doc = load_campaign(campaign_dir)
    specs = [TaskSpec.from_json(t) for t in doc["tasks"]]
    return merge_task_dirs(Path(target or doc["target_dir"]), specs, campaign=doc)
