"""Merging a campaign's task dirs into one results dir, in one process (docs/scaling.md).

Why one process: the store's lock is ``fcntl.flock``, which holds between processes of one host
but is not trustworthy across hosts on NFS. So each task writes only inside its own task dir, and
only the parent writes the merged dir.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from clusterbench.errors import InputError
from clusterbench.run.rows import utc_now
from clusterbench.run.tasks import (CAMPAIGN_VERSION, MERGE_WHY, TASK_JSON, VARIANT_SEPARATOR, TaskResult, TaskSpec,
                                    load_campaign)


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


def merged_label(label: str, variant: str | None) -> str:
    return f"{label}{VARIANT_SEPARATOR}{variant}" if variant else label


def _distinct(values: Iterable[Any]) -> Any:
    """One value when all agree, else the distinct values comma-joined (as env.json does for dtypes)."""
    seen = list(dict.fromkeys(str(v) for v in values if v is not None and v != ""))
    if not seen:
        return None
    return seen[0] if len(seen) == 1 else ",".join(seen)


def merge_task_dirs(target: Path, specs: Sequence[TaskSpec], results: Mapping[int, TaskResult] | None = None, *,
                    campaign: Mapping[str, Any] | None = None) -> MergeReport:
    """Merge every task's results dir into ``target`` through the store; write the merged env.json.

    Every row gets ``host``, ``gpu_name``, ``gpu_uuid`` (from the row when it has them, as
    ``--gpus`` rows do, else from its task's env.json), ``task`` and ``source_dir``; a campaign over
    several partitions keys rows ``<label>@<partition>``. Rows a failed task finished are kept. Call it
    from one process only (module docstring). Re-merging replaces each row by its own key.
    """
    from clusterbench.io.results import ENV_JSON, load_env, load_results, save_env, upsert_probe_row

    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    results = results or {}
    merged: list[MergedTask] = []
    envs: list[Mapping[str, Any]] = []
    config_entries: dict[str, Any] = {}
    owner: dict[str, int] = {}
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
            envs.append(env)
            host = (res.host if res is not None else None) or env.get("host")
            rel = os.path.relpath(src, target)
            for row in loaded.rows:
                values = row.as_dict()
                key = merged_label(row.label, spec.variant)
                if key in owner and owner[key] != spec.index:
                    problems.append(f"task {spec.index}: row {key!r} also came from task {owner[key]}: kept the first")
                    continue
                owner[key] = spec.index
                values["label"] = key
                if spec.variant:
                    values["config_label"] = values.get("config_label") or row.label
                    values["variant"] = spec.variant
                values["host"] = values.get("host") or host
                values["gpu_name"] = values.get("gpu_name") or env.get("gpu_name")
                values["gpu_uuid"] = values.get("gpu_uuid") or env.get("gpu_uuid")
                values["task"] = spec.index
                values["source_dir"] = rel
                upsert_probe_row(target, values)
                labels.append(key)
            for label, entry in (env.get("configs") or {}).items():
                if isinstance(entry, Mapping):
                    config_entries[merged_label(label, spec.variant)] = {
                        **entry, "host": host, "gpu_name": env.get("gpu_name"), "gpu_uuid": env.get("gpu_uuid"),
                        "driver": env.get("driver"), "task": spec.index, "source_dir": rel}
        state = res.state.value if res is not None else "unknown"
        if res is not None and not res.ok:
            first = res.message.splitlines()[0] if res.message else ""
            problems.insert(0, f"task {spec.index} ({spec.label}) {state}: {first}")
        merged.append(MergedTask(spec.index, spec.label, state, res.host if res else None,
                                 tuple(str(s) for s in sources), tuple(labels), tuple(problems)))
        task_docs.append({**spec.to_json(), "result": None if res is None else res.to_json(),
                          "source_dirs": [os.path.relpath(s, target) for s in sources], "labels": labels,
                          "problems": problems})
    previous: Mapping[str, Any] = {}
    if (target / ENV_JSON).is_file():
        try:
            previous = load_env(target)
        except InputError:
            previous = {}
    configs = {k: v for k, v in (previous.get("configs") or {}).items() if k not in config_entries}
    configs.update(config_entries)
    hosts = sorted({t.host for t in merged if t.host})
    dirty = [e.get("git_dirty") for e in envs]
    env_doc: dict[str, Any] = {
        "tool_version": _distinct(e.get("tool_version") for e in envs),
        "session_id": (campaign or {}).get("campaign_id") or uuid.uuid4().hex,
        "created_utc": utc_now(),
        "argv": list((campaign or {}).get("argv") or ()),
        "host": _distinct(hosts), "hosts": hosts,
        "git_rev": _distinct(e.get("git_rev") for e in envs),
        "git_dirty": True if any(d is True for d in dirty) else (False if dirty and all(d is False for d in dirty)
                                                                 else None),
        "configs": configs,
        "campaign": {"version": CAMPAIGN_VERSION, "merge": MERGE_WHY,
                     "executor": (campaign or {}).get("executor"), "tasks": task_docs},
    }
    for key in ("gpu_name", "gpu_uuid", "driver", "cuda_driver", "cuda_runtime", "cupy", "nsys_version", "python",
                "pedestal_dtype", "pedestal", "tracer", "workloads", "probes_csv_version"):
        env_doc[key] = _distinct(e.get(key) for e in envs)
    if isinstance(env_doc["probes_csv_version"], str) and env_doc["probes_csv_version"].isdigit():
        env_doc["probes_csv_version"] = int(env_doc["probes_csv_version"])
    save_env(target, env_doc)
    return MergeReport(target, tuple(merged))


def merge_campaign(campaign_dir: Path, target: Path | None = None) -> MergeReport:
    """Merge a planned campaign's task dirs as they are now (from campaign.json and each task.json)."""
    doc = load_campaign(campaign_dir)
    specs = [TaskSpec.from_json(t) for t in doc["tasks"]]
    return merge_task_dirs(Path(target or doc["target_dir"]), specs, campaign=doc)
