"""Child processes: the one supervisor for every process clusterbench starts.

A tracer's child (nsys, the CUPTI tracer), each GPU's sustained-FPS child and a campaign's task all
run through :func:`run_children`:

- the child's output (stdout and stderr) goes to a log that starts with a header line (what runs)
  and the command line;
- it runs in a session and process group of its own (``start_new_session``), so that the whole
  group (nsys and the workload it starts, a probe and its children) can be ended at once;
- each child may have a time limit; on a timeout, or on Ctrl-C (or any error) in this process, the
  group of every child still running gets SIGTERM, then SIGKILL after a grace period, so no orphan
  keeps a GPU busy;
- the outcome (:class:`ChildOutcome`) says whether it started, its exit status, whether it ran
  past its time limit, its log's last lines, and where in the log its own output lies;
- a child may have lines to watch for (``watch``: regexes): its output then passes through a pipe,
  line by line, and the outcome gives the times at which each pattern matched (a program's own
  markers around the part it times).

A GPU's child (:func:`plan_gpu_children`) is a child with only that GPU visible, pinned near it.
Nothing here prints, exits, or imports typer, rich or CuPy.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Mapping, Sequence

from clusterbench.errors import EnvironmentFailure, InputError
from clusterbench.model.workload import WorkloadResult
from clusterbench.run.machine import (
    GpuInfo,
    PinMethod,
    Pinning,
    PinTools,
    gpu_env,
    plan_pinning,
)

LOG_TAIL_LINES = 15  # the lines of a log an error quotes
STOP_GRACE_S = 10.0  # between SIGTERM and SIGKILL when a child's group is ended
POLL_S = 0.01


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` non-empty lines of a log ("(no log)" when it cannot be read)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return "(no log)"
    tail = [ln for ln in text.splitlines() if ln.strip()][-lines:]
    return "\n".join(tail) if tail else "(empty log)"


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """One child to run: its argv, its log, and how it runs.

    ``env`` None: this process's environment. ``cpus``: cores to pin it to with sched_setaffinity
    before exec (empty: not pinned that way). ``timeout_s`` None: no time limit. ``append``: add to
    the log rather than start it afresh. ``watch``: regexes whose matching output lines are timed."""

    argv: tuple[str, ...]
    log_path: Path
    header: str | None = None
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    cpus: tuple[int, ...] = ()
    timeout_s: float | None = None
    grace_s: float = STOP_GRACE_S
    append: bool = False
    watch: tuple[str, ...] = ()

    @property
    def command_line(self) -> str:
        """The argv as a shell would take it back (the log's ``$`` line)."""
        return shlex.join(self.argv)


# ChildOutcome.to_json. History: 1: first version. 2: adds output_start, output_end (where the child's own
# output lies in its log) and marks (the times its watched lines appeared); version 1 reads with none.
CHILD_OUTCOME_VERSION = 2
MAX_MARKS = 10_000  # times kept per watched pattern


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    """What one child did. ``returncode`` None: it never started (``start_error`` says why); negative:
    ended by that signal. ``started_s``/``ended_s``: seconds since :func:`run_children` began.
    ``tail``: the log's last lines. ``output_start``/``output_end``: the byte range of the log that holds
    the child's own output (after the header and ``$`` lines). ``marks``: per watched pattern, the times
    (seconds since the child started) of its matching lines."""

    argv: tuple[str, ...]
    log_path: Path
    returncode: int | None
    started_s: float
    ended_s: float
    timeout_s: float | None = None
    timed_out: bool = False
    start_error: str | None = None
    tail: str = ""
    output_start: int = 0
    output_end: int | None = None
    marks: tuple[tuple[float, ...], ...] = ()

    @property
    def ok(self) -> bool:
        return self.start_error is None and not self.timed_out and self.returncode == 0

    @property
    def status_text(self) -> str:
        """How it ended, in a few words: ``exit status 3``, ``ended by signal SIGKILL``, ..."""
        if self.start_error is not None:
            return self.start_error
        if self.timed_out:
            return f"stopped at its time limit of {self.timeout_s:g} s"
        rc = self.returncode
        if rc is not None and rc < 0:
            return f"ended by signal {_signal_name(-rc)}"
        return f"exit status {rc}"

    def describe(self, what: str) -> str:
        """``what`` (e.g. "nsys profile of config 'a'") and how it failed, with the log's last lines."""
        if self.start_error is not None:
            return f"{what} did not start: {self.start_error}"
        if self.timed_out:
            head = (f"{what} was still running at its time limit of {self.timeout_s:g} s: its process group "
                    "was ended")
        elif self.returncode is not None and self.returncode < 0:
            head = f"{what} was ended by signal {_signal_name(-self.returncode)}"
        else:
            head = f"{what} failed with exit status {self.returncode}"
        return f"{head}; last lines of {self.log_path.name}:\n{self.tail}"

    def to_json(self) -> dict[str, Any]:
        return {"version": CHILD_OUTCOME_VERSION, "argv": list(self.argv), "log_path": str(self.log_path),
                "returncode": self.returncode, "started_s": self.started_s, "ended_s": self.ended_s,
                "timeout_s": self.timeout_s, "timed_out": self.timed_out, "start_error": self.start_error,
                "tail": self.tail, "output_start": self.output_start, "output_end": self.output_end,
                "marks": [list(m) for m in self.marks]}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ChildOutcome:
        if doc.get("version") not in (1, CHILD_OUTCOME_VERSION):
            raise InputError(f"child outcome: version {doc.get('version')!r}, this clusterbench reads versions 1 "
                             f"and {CHILD_OUTCOME_VERSION}", hint="read it with the clusterbench version that wrote it")
        end = doc.get("output_end")
        return cls(argv=tuple(str(a) for a in doc["argv"]), log_path=Path(doc["log_path"]),
                   returncode=doc["returncode"], started_s=float(doc["started_s"]), ended_s=float(doc["ended_s"]),
                   timeout_s=doc.get("timeout_s"), timed_out=bool(doc.get("timed_out")),
                   start_error=doc.get("start_error"), tail=str(doc.get("tail") or ""),
                   output_start=int(doc.get("output_start") or 0), output_end=None if end is None else int(end),
                   marks=tuple(tuple(float(t) for t in m) for m in doc.get("marks") or ()))

    def output(self) -> str:
        """The child's own output (stdout and stderr, as its log holds them), without the header lines."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(self.output_start)
                data = fh.read() if self.output_end is None else fh.read(max(0, self.output_end - self.output_start))
        except OSError:
            return ""
        return data.decode(errors="replace")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


@dataclass(frozen=True, slots=True)
class ChildEvent:
    """Progress: kind ``started`` or ``finished`` (with the exit status); ``index`` in the specs given."""

    kind: str
    index: int
    returncode: int | None = None


class _Running:
    """One started child (internal, mutable while it runs)."""

    def __init__(self, spec: ChildSpec, t0: float) -> None:
        self.spec = spec
        self.started_s = time.monotonic() - t0
        self.ended_s: float | None = None
        self.timed_out = False
        self.error: str | None = None
        self.proc: subprocess.Popen | None = None
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log: IO[str] = open(spec.log_path, "a" if spec.append else "w")
        if spec.header:
            self.log.write(f"# {spec.header}\n")
        self.log.write(f"$ {spec.command_line}\n")
        self.log.flush()
        self.output_start = self.log.tell()
        self.patterns = [re.compile(p) for p in spec.watch]
        self.marks: list[list[float]] = [[] for _ in self.patterns]
        self.reader: threading.Thread | None = None
        preexec = functools.partial(os.sched_setaffinity, 0, set(spec.cpus)) if spec.cpus else None
        try:
            self.proc = subprocess.Popen(list(spec.argv), stdout=subprocess.PIPE if self.patterns else self.log,
                                         stderr=subprocess.STDOUT, env=None if spec.env is None else dict(spec.env),
                                         cwd=spec.cwd, start_new_session=True, preexec_fn=preexec)
        except (OSError, subprocess.SubprocessError) as exc:  # the latter: sched_setaffinity failed in the child
            self.error = f"cannot start {spec.argv[0]}: {exc}"
            self.log.write(self.error + "\n")
            self.ended_s = self.started_s
            return
        self.t_child = time.monotonic()
        if self.patterns:
            self.reader = threading.Thread(target=self._read, name="clusterbench-watch", daemon=True)
            self.reader.start()

    def _read(self) -> None:
        """Copy the child's output into its log line by line, timing the watched lines."""
        assert self.proc is not None and self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            t = time.monotonic() - self.t_child
            line = raw.decode(errors="replace")
            self.log.write(line)
            self.log.flush()
            for k, rx in enumerate(self.patterns):
                if len(self.marks[k]) < MAX_MARKS and rx.search(line):
                    self.marks[k].append(t)

    def finish_output(self) -> None:
        """Wait (briefly) for the watched output to reach the log after the child has gone."""
        if self.reader is not None:
            self.reader.join(timeout=5.0)
            if self.proc is not None and self.proc.stdout is not None and not self.reader.is_alive():
                self.proc.stdout.close()

    def outcome(self) -> ChildOutcome:
        rc = None if self.proc is None else self.proc.returncode
        try:
            end: int | None = os.path.getsize(self.spec.log_path)
        except OSError:
            end = None
        return ChildOutcome(self.spec.argv, self.spec.log_path, rc, self.started_s,
                            self.started_s if self.ended_s is None else self.ended_s, self.spec.timeout_s,
                            self.timed_out, self.error, log_tail(self.spec.log_path), self.output_start, end,
                            tuple(tuple(m) for m in self.marks))


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # the child leads its own group (start_new_session)
    except ProcessLookupError:
        pass


def end_groups(procs: Sequence[subprocess.Popen], grace_s: float = STOP_GRACE_S) -> None:
    """End the process group of every child still running: SIGTERM, then SIGKILL for any group whose
    leader has not exited ``grace_s`` later (at once on a second Ctrl-C)."""
    live = [p for p in procs if p.poll() is None]
    for p in live:
        _signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    try:
        for p in live:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:  # also on a second Ctrl-C while waiting: nothing is left behind
        for p in live:
            if p.poll() is None:
                _signal_group(p, signal.SIGKILL)
                p.wait()


def run_children(specs: Sequence[ChildSpec], *,
                 on_event: Callable[[ChildEvent], None] | None = None) -> tuple[ChildOutcome, ...]:
    """Start every child at once, wait for all, and return what each did, in the order given.

    A child that cannot start, fails or runs past its time limit gives an outcome that says so (the
    others still count). On Ctrl-C, or any other exception here, every child's group still running
    is ended before the exception goes on."""
    emit = on_event or (lambda e: None)
    t0 = time.monotonic()
    running: list[_Running] = []
    try:
        for i, spec in enumerate(specs):
            r = _Running(spec, t0)
            running.append(r)
            if r.proc is not None:
                emit(ChildEvent("started", i))
        while True:
            pending = [(i, r) for i, r in enumerate(running) if r.ended_s is None]
            if not pending:
                break
            expired: list[tuple[int, _Running]] = []
            for i, r in pending:
                assert r.proc is not None
                rc = r.proc.poll()
                now = time.monotonic() - t0
                if rc is not None:
                    r.ended_s = now
                    emit(ChildEvent("finished", i, rc))
                elif r.spec.timeout_s is not None and now - r.started_s >= r.spec.timeout_s:
                    expired.append((i, r))
            if expired:
                end_groups([r.proc for _, r in expired if r.proc is not None],
                           max(r.spec.grace_s for _, r in expired))
                for i, r in expired:
                    r.timed_out = True
                    r.ended_s = time.monotonic() - t0
                    emit(ChildEvent("finished", i, None if r.proc is None else r.proc.returncode))
            elif len(pending) > 0:
                time.sleep(POLL_S)
    except BaseException:
        live = [r for r in running if r.proc is not None and r.ended_s is None]
        end_groups([r.proc for r in live if r.proc is not None],
                   max((r.spec.grace_s for r in live), default=STOP_GRACE_S))
        raise
    finally:
        for r in running:
            r.finish_output()
            r.log.close()
    return tuple(r.outcome() for r in running)


def run_child(spec: ChildSpec) -> ChildOutcome:
    """One child, run to its end (or its time limit): :func:`run_children` of one."""
    return run_children([spec])[0]


def require_ok(outcome: ChildOutcome, what: str, hint: str | None = None) -> None:
    """EnvironmentFailure (exit 1) when the child did not start, failed or ran past its time limit:
    ``what`` and how, with its log's last lines."""
    if not outcome.ok:
        raise EnvironmentFailure(outcome.describe(what), hint=hint or f"read the whole log: {outcome.log_path}")


# --------------------------------------------------------------------------- one child per GPU


@dataclass(frozen=True, slots=True)
class GpuChild:
    """One GPU's process: the child to run (pinning prefix in its argv, only its GPU visible) and the
    result record it writes."""

    gpu: GpuInfo
    pinning: Pinning
    spec: ChildSpec
    result_path: Path


def plan_gpu_children(gpus: Sequence[GpuInfo], tools: PinTools,
                      command: Callable[[GpuInfo, Path], Sequence[str]], out_dir: Path, stem: str,
                      base_env: Mapping[str, str], cwd: str | None = None,
                      timeout_s: float | None = None, watch: tuple[str, ...] = ()) -> tuple[GpuChild, ...]:
    """One child per GPU (pure). ``command(gpu, result_path)`` gives the workload's argv, e.g.
    ``lambda g, r: workload.argv(label, params, r, "sustained", repeat)``; files are
    ``<out_dir>/<stem>.gpu<index>.json`` and ``.log``."""
    children = []
    for g in gpus:
        pin = plan_pinning(g, tools)
        result = Path(out_dir) / f"{stem}.gpu{g.index}.json"
        argv = (*pin.argv_prefix, *map(str, command(g, result.resolve())))
        cpus = pin.cpus if pin.method is PinMethod.SCHED_SETAFFINITY else ()
        spec = ChildSpec(argv, Path(out_dir) / f"{stem}.gpu{g.index}.log",
                         header=f"GPU {g.key}; pinning: {pin.message}", env=gpu_env(g, base_env), cwd=cwd,
                         cpus=cpus, timeout_s=timeout_s, watch=watch)
        children.append(GpuChild(g, pin, spec, result))
    return tuple(children)


@dataclass(frozen=True, slots=True)
class GpuOutcome:
    """What one GPU's child did: the result record it wrote (a protocol workload) and ``values``, the
    figures it gave (its timed passes' FPS; an exec program's figure read from its output), in the unit of
    ``metric``. ``error``: why it gives no figure (the child's failure with its log's last lines, or its
    record or output missing what was asked, then ``protocol_error``)."""

    gpu: GpuInfo
    pinning: Pinning
    child: ChildOutcome
    result: WorkloadResult | None
    error: str | None = None
    protocol_error: bool = False
    values: tuple[float, ...] = ()
    metric: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)  # how a figure read from the output was read

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.values)


def overlap_s(outcomes: Sequence[GpuOutcome]) -> float:
    """How long every child ran at the same time: earliest end minus latest start (<= 0: they did not overlap)."""
    if not outcomes:
        return 0.0
    return min(o.child.ended_s for o in outcomes) - max(o.child.started_s for o in outcomes)
