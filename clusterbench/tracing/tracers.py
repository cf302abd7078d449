"""The tracers behind one interface: nsys (subprocess), cupti (in-process, in its own child), none.

Each traced run is one process (pedestal, one batched pass, exit). Files are written under
``<label>.partial.*`` names and renamed to ``<label>.nsys-rep`` / ``<label>.sqlite`` only when
complete, so an interrupted or failed run never leaves a file that looks finished.
Sustained FPS is measured in a separate child without any profiler.
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Callable, Mapping

from clusterbench.errors import EnvironmentFailure
from clusterbench.tracing.clocks import ClockSample, ClockSampler
from clusterbench.tracing.commands import (
    child_env,
    cupti_command,
    nsys_export_command,
    nsys_profile_command,
    workload_command,
)
from clusterbench.tracing.process import run_logged

PARTIAL = ".partial"


class Tracer(str, Enum):
    NSYS = "nsys"
    CUPTI = "cupti"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class PassRecord:
    """What the traced child reports about its one batched pass (its --result-json)."""

    frames: int
    clusters_found: int | None
    clusters_dropped: int | None
    wall_s: float | None
    fps: float | None
    kernel_sha256: Mapping[str, str] | str | None  # kernel file -> sha256, as the child compiled them


@dataclass(frozen=True, slots=True)
class TracedRun:
    sqlite: Path | None
    report: Path | None  # the .nsys-rep; None for the cupti tracer
    passed: PassRecord
    pass_end_s: float  # time.time() when the child wrote its result (the pass had just ended)
    clocks: tuple[ClockSample, ...]
    max_clock_mhz: int | None
    log: Path


@dataclass(frozen=True, slots=True)
class SustainedResult:
    """Untraced FPS over R repeats: median, and spread = half the min-max range."""

    fps: tuple[float, ...]
    median_fps: float
    spread_fps: float
    repeats: int
    input_gbps: float | None  # median FPS x input bytes per frame


def partial_paths(out_dir: Path, label: str) -> tuple[Path, ...]:
    base = out_dir / f"{label}{PARTIAL}"
    return (base.with_name(base.name + ".nsys-rep"), base.with_name(base.name + ".sqlite"),
            base.with_name(base.name + ".sqlite.tmp"), base.with_name(base.name + ".qdstrm"))


def discard_partials(out_dir: Path, label: str) -> tuple[Path, ...]:
    """Delete what an interrupted or failed trace of ``label`` left; return what was removed."""
    removed = []
    for p in partial_paths(out_dir, label):
        if p.exists():
            p.unlink()
            removed.append(p)
    return tuple(removed)


def read_pass_result(data: dict) -> PassRecord:
    """Parse the child's result JSON (pure)."""
    try:
        frames = int(data["frames"])
    except (KeyError, TypeError, ValueError):
        raise EnvironmentFailure(
            f"the workload's result JSON has no frames count: {sorted(data)}",
            hint="the workload child and this probe disagree on the result format; rerun from one checkout",
        ) from None

    def opt(key: str, cast):
        v = data.get(key)
        return None if v is None else cast(v)

    sha = data.get("kernel_sha256")
    sha = {str(k): str(v) for k, v in sha.items()} if isinstance(sha, Mapping) else (None if sha is None else str(sha))
    return PassRecord(frames, opt("clusters_found", int), opt("clusters_dropped", int), opt("wall_s", float),
                      opt("fps", float), sha)


def read_sustained(data: dict, input_bytes_per_frame: int | None = None) -> SustainedResult:
    """Parse the sustained child's JSON (pure). Median and spread are recomputed from the list."""
    fps = tuple(float(v) for v in data.get("fps") or ())
    if not fps:
        raise EnvironmentFailure(
            f"the sustained-FPS run reported no FPS values: {data!r:.200}",
            hint="run the workload by hand with --sustained 1 and read its output",
        )
    med = float(statistics.median(fps))
    spread = (max(fps) - min(fps)) / 2.0
    gbps = med * input_bytes_per_frame / 1e9 if input_bytes_per_frame else None
    return SustainedResult(fps, med, spread, len(fps), gbps)


def _load_json(path: Path, what: str, log: Path) -> tuple[dict, float]:
    try:
        st = path.stat()
        return json.loads(path.read_text()), st.st_mtime
    except (OSError, ValueError) as exc:
        raise EnvironmentFailure(
            f"{what} wrote no readable result ({path.name}: {exc})", hint=f"read the log: {log}"
        ) from None


PhaseCallback = Callable[[str], None]


def _fresh_run(out_dir: Path, label: str, kind: str) -> tuple[Path, Path]:
    """Prepare ``out_dir`` for a traced run of ``label``: no partial files and no stale result left
    from an earlier run. Returns (log, result JSON) paths; ``kind`` names the log (nsys, cupti)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    discard_partials(out_dir, label)
    result = out_dir / f"{label}.pass.json"
    result.unlink(missing_ok=True)
    return out_dir / f"{label}.{kind}.log", result


def trace_nsys(nsys: Path, params_json: str, out_dir: Path, label: str,
               on_phase: PhaseCallback = lambda phase: None, graph_trace: str = "node") -> TracedRun:
    """Profile one workload process under nsys, then export its report to SQLite.

    ``graph_trace`` is nsys's CUDA-graph trace mode ('node' from nsys 2023.3 on; see
    :func:`~clusterbench.tracing.commands.nsys_graph_trace_mode`)."""
    log, result = _fresh_run(out_dir, label, "nsys")
    base = out_dir / f"{label}{PARTIAL}"
    rep_partial, sqlite_partial = partial_paths(out_dir, label)[:2]
    env = child_env()
    hint = "check that nsys runs here (source .device/env.sh on the GPU machine), or use --tracer cupti"
    on_phase("trace")
    child = workload_command(params_json, result)
    with ClockSampler() as clocks:
        run_logged(nsys_profile_command(nsys, base, child, graph_trace), log, env=env, what="nsys profile", hint=hint)
    if not rep_partial.exists():
        raise EnvironmentFailure(f"nsys profile wrote no report {rep_partial.name}; see {log}", hint=hint)
    passed, ended = _load_json(result, "the traced workload", log)
    on_phase("export")
    run_logged(nsys_export_command(nsys, rep_partial, sqlite_partial), log, env=env, what="nsys export",
               hint=hint, append=True)
    if not sqlite_partial.exists():
        raise EnvironmentFailure(f"nsys export wrote no {sqlite_partial.name}; see {log}", hint=hint)
    report, sqlite = out_dir / f"{label}.nsys-rep", out_dir / f"{label}.sqlite"
    os.replace(rep_partial, report)
    os.replace(sqlite_partial, sqlite)
    return TracedRun(sqlite, report, read_pass_result(passed), ended, clocks.snapshot(), clocks.max_clock_mhz, log)


def trace_cupti(params_json: str, out_dir: Path, label: str,
                on_phase: PhaseCallback = lambda phase: None) -> TracedRun:
    """Trace one workload process with the in-process CUPTI tracer (no nsys needed)."""
    log, result = _fresh_run(out_dir, label, "cupti")
    sqlite_partial = partial_paths(out_dir, label)[1]
    on_phase("trace")
    with ClockSampler() as clocks:
        run_logged(cupti_command(params_json, sqlite_partial, result), log, env=child_env(),
                   what="the CUPTI tracer",
                   hint="install cupti-python (pip install cupti-python) where CUDA's libcupti is present, "
                        "or use --tracer nsys")
    passed, ended = _load_json(result, "the CUPTI-traced workload", log)
    if not sqlite_partial.exists():
        raise EnvironmentFailure(f"the CUPTI tracer wrote no {sqlite_partial.name}; see {log}")
    on_phase("export")
    sqlite = out_dir / f"{label}.sqlite"
    os.replace(sqlite_partial, sqlite)
    return TracedRun(sqlite, None, read_pass_result(passed), ended, clocks.snapshot(), clocks.max_clock_mhz, log)


def measure_sustained(params_json: str, out_dir: Path, label: str, repeats: int,
                      input_bytes_per_frame: int | None) -> tuple[SustainedResult, tuple[ClockSample, ...], int | None]:
    """Sustained FPS without a profiler: one child that runs the pass ``repeats`` times."""
    out_dir.mkdir(parents=True, exist_ok=True)
    log = out_dir / f"{label}.sustained.log"
    result = out_dir / f"{label}.sustained.json"
    if result.exists():
        result.unlink()
    with ClockSampler() as clocks:
        run_logged(workload_command(params_json, result, sustained=repeats, nvtx=False), log, env=child_env(),
                   what="the sustained-FPS run", hint=f"read the log: {log}")
    data, _ = _load_json(result, "the sustained-FPS run", log)
    return read_sustained(data, input_bytes_per_frame), clocks.snapshot(), clocks.max_clock_mhz
