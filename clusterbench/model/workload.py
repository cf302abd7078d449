"""The workload result: what any workload process (ours or a command) writes to ``{result}`` and the
probe reads back. Versioned JSON (``schema``, ``version``); docs/workloads.md lists its fields.

Pure: no I/O, no GPU, no UI.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Mapping

from clusterbench.errors import WorkloadProtocolError

JsonValue = object  # a value json.dumps accepts

RESULT_SCHEMA = "clusterbench.workload-result"
# The workload result record's version. History:
#   1 (clusterbench 0.1): the CuPy child's own JSON, "kind" pass|sustained, wall_s / fps lists; no schema key.
#   2: one record for every workload (schema, version, mode, frames, pass_s, clusters_found,
#      clusters_dropped, pedestal_s, finder, kernel_sha256, data_source, extra).
RESULT_VERSION = 2
RESULT_MODES = ("pass", "sustained")
RESULT_REQUIRED = ("schema", "version", "mode", "frames", "pass_s", "clusters_found")


def _is_int(x: object) -> bool:
    return type(x) is int


def _is_number(x: object) -> bool:
    return type(x) in (int, float) and math.isfinite(x)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class WorkloadResult:
    """One workload run: ``frames`` per timed pass and each pass's seconds (one in ``pass`` mode).

    ``clusters_found``/``clusters_dropped`` are of the last timed pass; ``clusters_dropped`` is None
    when the finder cannot tell (aare drops clusters beyond its cap silently)."""

    mode: str
    frames: int
    pass_s: tuple[float, ...]
    clusters_found: int
    clusters_dropped: int | None = None
    pedestal_s: float | None = None
    finder: str | None = None
    kernel_sha256: Mapping[str, str] | None = None
    data_source: str | None = None
    extra: Mapping[str, JsonValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problem = _result_problem(self)
        if problem:
            raise WorkloadProtocolError(f"result record: {problem}",
                                        hint="docs/workloads.md lists the result record's fields")

    @property
    def fps(self) -> tuple[float, ...]:
        """Frames per second of each timed pass."""
        return tuple(self.frames / s for s in self.pass_s)

    def to_json(self) -> dict[str, JsonValue]:
        return {"schema": RESULT_SCHEMA, "version": RESULT_VERSION, "mode": self.mode, "frames": self.frames,
                "pass_s": list(self.pass_s), "clusters_found": self.clusters_found,
                "clusters_dropped": self.clusters_dropped, "pedestal_s": self.pedestal_s, "finder": self.finder,
                "kernel_sha256": None if self.kernel_sha256 is None else dict(self.kernel_sha256),
                "data_source": self.data_source, "extra": dict(self.extra)}

    @classmethod
    def from_json(cls, doc: object) -> "WorkloadResult":
        """Parse a result record; WorkloadProtocolError names the first missing or bad field."""
        def bad(problem: str) -> WorkloadProtocolError:
            return WorkloadProtocolError(f"result record: {problem}",
                                         hint="docs/workloads.md lists the result record's fields")

        if not isinstance(doc, Mapping):
            raise bad(f"must be a JSON object, got {type(doc).__name__}")
        missing = [k for k in RESULT_REQUIRED if k not in doc]
        if missing:
            raise bad(f"missing field{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}")
        if doc["schema"] != RESULT_SCHEMA:
            raise bad(f"field 'schema' must be {RESULT_SCHEMA!r}, got {doc['schema']!r}")
        if doc["version"] != RESULT_VERSION:
            raise bad(f"field 'version' is {doc['version']!r}; this clusterbench reads version {RESULT_VERSION}")
        unknown = sorted(set(doc) - {f.name for f in dataclasses.fields(cls)} - {"schema", "version"})
        if unknown:
            raise bad(f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                      "(put your own values under 'extra')")
        pass_s = doc["pass_s"]
        if not isinstance(pass_s, list):
            raise bad(f"field 'pass_s' must be a list of seconds, got {pass_s!r:.60}")
        sha = doc.get("kernel_sha256")
        if sha is not None and not (isinstance(sha, Mapping) and all(isinstance(v, str) for v in sha.values())):
            raise bad(f"field 'kernel_sha256' must map file names to sha256 strings, got {sha!r:.60}")
        extra = doc.get("extra") or {}
        if not isinstance(extra, Mapping):
            raise bad(f"field 'extra' must be an object, got {extra!r:.60}")
        return cls(mode=doc["mode"], frames=doc["frames"], pass_s=tuple(pass_s),  # type: ignore[arg-type]
                   clusters_found=doc["clusters_found"], clusters_dropped=doc.get("clusters_dropped"),  # type: ignore[arg-type]
                   pedestal_s=doc.get("pedestal_s"), finder=doc.get("finder"),  # type: ignore[arg-type]
                   kernel_sha256=None if sha is None else {str(k): str(v) for k, v in sha.items()},
                   data_source=doc.get("data_source"), extra=dict(extra))  # type: ignore[arg-type]


def _result_problem(r: WorkloadResult) -> str | None:
    if r.mode not in RESULT_MODES:
        return f"field 'mode' must be 'pass' or 'sustained', got {r.mode!r}"
    if not _is_int(r.frames) or r.frames < 1:
        return f"field 'frames' must be an integer >= 1, got {r.frames!r}"
    if not r.pass_s or not all(_is_number(s) and s > 0 for s in r.pass_s):
        return f"field 'pass_s' must list one or more pass times in seconds > 0, got {list(r.pass_s)!r:.80}"
    if r.mode == "pass" and len(r.pass_s) != 1:
        return f"field 'pass_s' must hold exactly one time in 'pass' mode, got {len(r.pass_s)}"
    if not _is_int(r.clusters_found) or r.clusters_found < 0:
        return f"field 'clusters_found' must be an integer >= 0, got {r.clusters_found!r}"
    if r.clusters_dropped is not None and (not _is_int(r.clusters_dropped) or r.clusters_dropped < 0):
        return f"field 'clusters_dropped' must be an integer >= 0 or null, got {r.clusters_dropped!r}"
    if r.pedestal_s is not None and not (_is_number(r.pedestal_s) and r.pedestal_s >= 0):
        return f"field 'pedestal_s' must be seconds >= 0 or null, got {r.pedestal_s!r}"
    for name in ("finder", "data_source"):
        v = getattr(r, name)
        if v is not None and not isinstance(v, str):
            return f"field {name!r} must be a string or null, got {v!r:.60}"
    return None
