"""Child processes: start one per GPU at once (pinned, logged), wait with a time limit, stop them
(terminate, then kill), read each one's result record, and quote a log's last lines.

Nothing here prints, exits, or imports typer, rich or CuPy.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from clusterbench.errors import EnvironmentFailure, WorkloadProtocolError
from clusterbench.model.workload import WorkloadResult
from clusterbench.run.machine import GpuInfo, Pinning, PinMethod, PinTools, gpu_env, plan_pinning


@dataclass(frozen=True, slots=True)
class GpuChild:
    """One GPU's process: its full argv (pinning prefix included), environment, result and log files."""

    gpu: GpuInfo
    pinning: Pinning
    argv: tuple[str, ...]
    env: Mapping[str, str]
    result_path: Path
    log_path: Path
    cwd: str | None = None


def plan_gpu_children(gpus: Sequence[GpuInfo], tools: PinTools,
                      command: Callable[[GpuInfo, Path], Sequence[str]], out_dir: Path, stem: str,
                      base_env: Mapping[str, str], cwd: str | None = None) -> tuple[GpuChild, ...]:
    """One child per GPU (pure). ``command(gpu, result_path)`` gives the workload's argv, e.g.
    ``lambda g, r: workload.argv(label, params, r, "sustained", repeat)``; files are
    ``<out_dir>/<stem>.gpu<index>.json`` and ``.log``."""
    children = []
    for g in gpus:
        pin = plan_pinning(g, tools)
        result = Path(out_dir) / f"{stem}.gpu{g.index}.json"
        argv = (*pin.argv_prefix, *map(str, command(g, result.resolve())))
        children.append(GpuChild(g, pin, argv, gpu_env(g, base_env), result, Path(out_dir) / f"{stem}.gpu{g.index}.log",
                                 cwd))
    return tuple(children)


@dataclass(frozen=True, slots=True)
class GpuChildEvent:
    """Progress of a round: kind ``started`` or ``finished`` (with the exit status)."""

    kind: str
    gpu: int
    returncode: int | None = None
    phase: str = ""  # "solo" or "concurrent" in measure_sustained_gpus
    round: int = 0


@dataclass(frozen=True, slots=True)
class GpuOutcome:
    """What one GPU's child did. ``started_s``/``ended_s``: seconds since the round began."""

    gpu: GpuInfo
    pinning: Pinning
    returncode: int | None
    result: WorkloadResult | None
    error: str | None
    log_path: Path
    started_s: float
    ended_s: float

    @property
    def ok(self) -> bool:
        return self.error is None and self.result is not None


def overlap_s(outcomes: Sequence[GpuOutcome]) -> float:
    """How long every child ran at the same time: earliest end minus latest start (<= 0: they did not overlap)."""
    if not outcomes:
        return 0.0
    return min(o.ended_s for o in outcomes) - max(o.started_s for o in outcomes)


def _log_tail(path: Path, lines: int = 10) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    tail = [ln for ln in text.splitlines() if ln.strip()][-lines:]
    return "\n".join(tail) if tail else "(empty log)"


def _stop(procs: Iterable[subprocess.Popen]) -> None:
    live = [p for p in procs if p.poll() is None]
    for p in live:
        p.terminate()
    deadline = time.monotonic() + 10
    for p in live:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_gpu_children(children: Sequence[GpuChild], *, timeout_s: float | None = None,
                     on_event: Callable[[GpuChildEvent], None] | None = None) -> tuple[GpuOutcome, ...]:
    """Start every child at once (one process per GPU), wait for all, read each result record.

    A child that fails, times out or writes no valid result gives an outcome with ``error`` (its
    log's last lines); the others still count. Ctrl-C stops every child before it goes on, so no
    orphan keeps a GPU busy. Pinning with sched_setaffinity happens in the child before exec.
    """
    emit = on_event or (lambda e: None)
    t0 = time.monotonic()
    procs: list[subprocess.Popen | None] = []
    starts: list[float] = []
    start_errors: list[str | None] = []
    handles = []
    try:
        for c in children:
            c.result_path.unlink(missing_ok=True)
            fh, p, err = _start_child(c, "GPU")
            handles.append(fh)
            procs.append(p)
            start_errors.append(err)
            starts.append(time.monotonic() - t0)
            emit(GpuChildEvent("started", c.gpu.index))
        ends: list[float] = [0.0] * len(children)
        rcs: list[int | None] = [None] * len(children)
        timed_out = [False] * len(children)
        deadline = None if timeout_s is None else t0 + timeout_s
        pending = {i for i, p in enumerate(procs) if p is not None}
        for i, p in enumerate(procs):
            if p is None:
                ends[i] = starts[i]
        while pending:
            for i in sorted(pending):
                rc = procs[i].poll()  # type: ignore[union-attr]
                if rc is not None:
                    rcs[i] = rc
                    ends[i] = time.monotonic() - t0
                    pending.discard(i)
                    emit(GpuChildEvent("finished", children[i].gpu.index, rc))
            if pending and deadline is not None and time.monotonic() > deadline:
                _stop(procs[i] for i in pending)  # type: ignore[misc]
                for i in pending:
                    timed_out[i] = True
                    rcs[i] = procs[i].returncode  # type: ignore[union-attr]
                    ends[i] = time.monotonic() - t0
                    emit(GpuChildEvent("finished", children[i].gpu.index, rcs[i]))
                pending.clear()
            if pending:
                time.sleep(0.01)
    except KeyboardInterrupt:
        _stop(p for p in procs if p is not None)
        raise
    finally:
        for fh in handles:
            fh.close()
    outcomes = []
    for i, c in enumerate(children):
        error = start_errors[i]
        result: WorkloadResult | None = None
        if error is None and timed_out[i]:
            error = f"GPU {c.gpu.index}: still running after {timeout_s:g} s: stopped"
        elif error is None and rcs[i] != 0:
            error = f"GPU {c.gpu.index}: the child exited with status {rcs[i]}; last lines of {c.log_path.name}:\n" \
                    f"{_log_tail(c.log_path)}"
        elif error is None:
            try:
                result = WorkloadResult.from_json(json.loads(c.result_path.read_text(encoding="utf-8")))
            except (OSError, ValueError) as exc:
                error = f"GPU {c.gpu.index}: no readable result record {c.result_path.name} ({exc})"
            except WorkloadProtocolError as exc:
                error = f"GPU {c.gpu.index}: {exc}"
        outcomes.append(GpuOutcome(c.gpu, c.pinning, rcs[i], result, error, c.log_path, starts[i], ends[i]))
    return tuple(outcomes)


def require_all_ok(outcomes: Sequence[GpuOutcome], what: str) -> None:
    """EnvironmentFailure (exit 1) naming every GPU whose child failed."""
    bad = [o for o in outcomes if not o.ok]
    if bad:
        raise EnvironmentFailure(f"{what}: {len(bad)} of {len(outcomes)} GPU processes failed:\n" +
                                 "\n".join(o.error or "" for o in bad),
                                 hint="read the logs: " + ", ".join(str(o.log_path) for o in bad))


@dataclass(frozen=True, slots=True)
class BackgroundOutcome:
    """A GPU that streamed while another was traced. ``covered``: it was still running when the
    traced run ended, so it loaded the node for the whole trace."""

    gpu: GpuInfo
    pinning: Pinning
    returncode: int | None
    covered: bool
    log_path: Path


def _start_child(c: GpuChild, what: str) -> tuple[Any, subprocess.Popen | None, str | None]:
    """Open the child's log (a header naming ``what`` runs, its GPU, pinning and command line) and start
    it, pinned with sched_setaffinity before exec where that is the method. Returns (the open log,
    the process or None, why it did not start or None); the caller closes the log."""
    c.log_path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(c.log_path, "w")
    fh.write(f"# {what} {c.gpu.key}; pinning: {c.pinning.message}\n$ " + " ".join(c.argv) + "\n")
    fh.flush()
    preexec = None
    if c.pinning.method is PinMethod.SCHED_SETAFFINITY:
        preexec = functools.partial(os.sched_setaffinity, 0, set(c.pinning.cpus))
    try:
        return fh, subprocess.Popen(list(c.argv), stdout=fh, stderr=subprocess.STDOUT, env=dict(c.env), cwd=c.cwd,
                                    preexec_fn=preexec), None
    except (OSError, subprocess.SubprocessError) as exc:  # the latter: sched_setaffinity failed in the child
        return fh, None, f"cannot start {c.argv[0]}: {exc}"


def stream_in_background(children: Sequence[GpuChild], foreground: Callable[[], Any], *,
                         settle_s: float = 1.0) -> tuple[Any, tuple[BackgroundOutcome, ...]]:
    """The tracing variant: start ``children`` (the other GPUs, in sustained mode with enough repeats
    to outlast the trace), let them settle ``settle_s``, call ``foreground()`` (trace the one GPU),
    then stop them. Returns what ``foreground`` returned and whether each child covered it.

    A child that ended before the trace did is ``covered=False``: give it more repeats. The
    children are always stopped (Ctrl-C and errors included), so none keeps a GPU busy."""
    procs: list[subprocess.Popen | None] = []
    handles = []
    try:
        for c in children:
            fh, p, err = _start_child(c, "background GPU")
            handles.append(fh)
            procs.append(p)
            if err is not None:
                fh.write(err + "\n")
        time.sleep(settle_s)
        value = foreground()
        alive = [p is not None and p.poll() is None for p in procs]
    finally:
        _stop(p for p in procs if p is not None)
        for fh in handles:
            fh.close()
    return value, tuple(BackgroundOutcome(c.gpu, c.pinning, None if p is None else p.returncode, a, c.log_path)
                        for c, p, a in zip(children, procs, alive))
