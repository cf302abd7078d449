"""A config's sustained FPS from P fresh processes: which command runs, when each process starts, and what
the probe keeps of them.

One process's repeats agree more closely than two processes do (on the H200, repeats inside one process
agreed within about 1 % while processes of one unit differed by up to 14.6 % at 3x3 on 4 streams). So the
probe measures sustained FPS in ``--processes P`` fresh processes (default DEFAULT_PROCESSES), each with its
warm-ups and its steady runs (:mod:`clusterbench.model.steady`), and keeps every process
(:class:`~clusterbench.model.processes.ProcessRun`: its counted runs and median, its verdict, its SM clock and
throttle reasons); the figure is the median of the process medians, and compare's noise for two probes is their
spread.

- **Our finder** (workload ``cupy``): every process starts once the traced pass has written its record, so
  that their set-up (interpreter, CuPy, buffers, kernels, pedestal, a warm-up pass) runs while the tracer
  finishes (:class:`EarlySustained`); each waits at its own gate before its runs. The first gets its go once
  the probe's go came and every process is set up, each later one once the one before has ended
  (:func:`clusterbench.run.sustained.measure_sustained`): no set-up runs beside a measured run.
- **Another protocol workload** that takes ``{mode}``: P processes of R passes each, one after the other.
- **A program run whole** (a program probed as it is, ``--rate``, ``--sustained wall``; or a workload without
  ``{mode}``): each run is a process; runs until the last P agree within its rule, at most P + 2.

With ``--gpus`` the solo GPU runs the P processes; the concurrent round, one process per GPU, runs the last
one's plan.

Nothing here prints, exits, or imports typer, rich or CuPy.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from clusterbench.model import units as U
from clusterbench.model.measurement import SUSTAINED_FPS, Measurement
from clusterbench.model.processes import PROCESSES_KEY, processes_of

# Fresh processes per sustained figure: 3 give compare a spread on each side (docs/compare.md: with a change of
# 1.5 x the larger side's range of process medians, two probes of one build read a change about 1.6 % of the time
# where that spread sets the noise) and fit make run's 30 s (docs/probe.md, "Time to an answer"); pyperf spawns 20,
# asv 2.
DEFAULT_PROCESSES = 3
MAX_PROCESSES = 50


def check_processes(value: object) -> str | None:
    """Why ``value`` is not a process count (an integer from 1 to MAX_PROCESSES), or None (pure)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PROCESSES:
        return f"--processes must be an integer from 1 to {MAX_PROCESSES}, got {value!r}"
    return None


def steady_plan(command: Any, processes: int = 1) -> str:
    """When a config's sustained runs stop, in words (``command``: a sustained.SustainedCommand) (pure)."""
    rule = command.rule
    if command.whole_runs:
        return (f"each run is the whole program, a fresh process; runs until the last {rule.counted} agree within "
                f"{U.pct(rule.spread)} (range over median), {rule.max_runs} runs at most")
    many = (f"in {processes} fresh processes, one after the other" if processes > 1 else "in one process")
    if command.own_steady:
        later = (": all set up at once, and each runs once the one before has ended" if processes > 1 else "")
        return (f"{many}{later}; in each: {rule.min_warmups} warm-up run of one pass that sets the passes per run "
                f"(runs of at least {U.seconds(rule.target_s)}), then runs until the last {rule.counted} agree within "
                f"{U.pct(rule.spread)}, at most {rule.max_runs} runs"
                + (f" or {U.seconds(rule.max_s)} of runs" if rule.max_s is not None else ""))
    return f"{many}; in each: {rule.counted} timed passes, judged steady when they agree within {U.pct(rule.spread)}"


def sustained_block(m: Measurement) -> dict[str, object]:
    """env.json's ``configs.<label>.sustained``: where the figure came from and how, the steady verdict without
    its runs, and each process's median, verdict and clock without its runs (samples.json keeps them) (pure)."""
    out: dict[str, object] = {"source": m.metadata.get("source") or "result"}
    out.update({k: v for k, v in m.metadata.items() if k not in ("steady", PROCESSES_KEY)})
    steady = m.metadata.get("steady")
    if isinstance(steady, Mapping):
        out["steady"] = {k: v for k, v in steady.items() if k != "runs"}
        runs = steady.get("runs")
        out["steady"]["runs"] = len(runs) if isinstance(runs, list) else None  # type: ignore[index]
    procs = processes_of(m)
    if procs:
        out["processes"] = [{"median": p.median, "counted": len(p.values), "steady": p.settled,
                             "warmups": None if p.steady is None else p.steady.warmups,
                             "seconds": p.seconds, "clock": None if p.clock is None else p.clock.to_json()}
                            for p in procs]
    return out


def sustained_command(cfg: Any, argv_pass: Any, workload: Any, repeat: int, processes: int) -> Any:
    """The untraced command of a config (``cfg``: a ProbeConfig): an exec program's whole runs, counted
    ``processes`` (``argv_pass``: its argv, the traced run's), else its workload's (our finder, another
    protocol workload) with ``repeat`` counted runs a process; None for an exec program whose figure is its
    trace's."""
    from clusterbench.run.sustained import exec_command, workload_command

    if cfg.exec is not None:
        if cfg.exec.source == "trace":
            return None
        return exec_command(argv_pass, cfg.exec, processes)
    return workload_command(workload, cfg.label, cfg.params, repeat, processes)


def measure_config(cfg: Any, command: Any, run_gpus: Any, tools: Any, out_dir: Path, *, env: Mapping[str, str],
                   cwd: str | None, timeout_s: float, processes: int,
                   on_round: Callable[[str, int], None] | None = None, go_file: Path | None = None) -> Any:
    """A config's sustained runs (``command`` from :func:`sustained_command`) on ``run_gpus``: a
    sustained.SustainedRun. ``go_file``: the first process waits for it before its runs (:class:`EarlySustained`)."""
    from clusterbench.run.sustained import measure_sustained

    return measure_sustained(run_gpus, tools, command, out_dir, cfg.label,
                             input_bytes_per_frame=None if cfg.params is None else cfg.params.frame_bytes,
                             base_env=env, cwd=cwd, timeout_s=timeout_s, on_round=on_round, go_file=go_file,
                             processes=processes)


def traced_sustained(cfg: Any, figures: Any) -> Measurement | None:
    """An exec program's sustained figure from its trace (``figures``: the analysis's trace figures): the window's
    frames over its length, under the profiler; None where it does not apply or the frames are unknown."""
    if cfg.exec is None or cfg.exec.source != "trace" or figures is None or not figures.measured_us:
        return None
    return Measurement(SUSTAINED_FPS, (U.fps_of_us(figures.measured_us),), metadata={
        "source": "trace", "under_profiler": True, "frames": figures.frames, "window_ns": figures.window_ns,
        "note": "frames over the traced window, under the profiler: the profiler's own cost is in it"})


def early_applies(cfg: Any, tracer: str, multi_gpu: bool, run_gpus: Any) -> bool:
    """Our finder's first sustained process can start while the tracer finishes: our finder, one GPU, a trace."""
    return cfg.exec is None and cfg.workload.kind == "cupy" and not multi_gpu and tracer != "none" and len(run_gpus) == 1


class EarlySustained:
    """Our finder's first sustained process, started while the tracer finishes (nsys flushes and exports for a
    second or two after the traced program's pass): a thread waits until the traced pass has written its
    result record, then starts the sustained runs (``start(go_file)``), whose first process sets up and waits for
    ``go_file``. :meth:`go` writes "go" once the GPU is the sustained runs' alone and returns what they
    measured; :meth:`stop` tells the process to stop before it measures. Where the record never appeared
    before :meth:`go`, nothing was started and :meth:`go` returns None (the caller starts it then)."""

    POLL_S = 0.005

    def __init__(self, start: Callable[[Path], Any], result_path: Path, go_file: Path) -> None:
        self.go_file = go_file
        go_file.unlink(missing_ok=True)
        result_path.unlink(missing_ok=True)  # a record an earlier probe left must not start it early
        self._lock = threading.Lock()
        self._abandoned = False
        self._started = False
        self._box: dict[str, Any] = {}

        def watch() -> None:
            while True:
                with self._lock:
                    if self._abandoned:
                        return
                    if result_path.exists():
                        self._started = True
                        break
                time.sleep(self.POLL_S)
            try:
                self._box["value"] = start(go_file)
            except BaseException as exc:  # noqa: BLE001 - handed to go() or dropped by stop()
                self._box["error"] = exc

        self._thread = threading.Thread(target=watch, name="clusterbench-early-sustained", daemon=True)
        self._thread.start()

    def _settle(self) -> bool:
        with self._lock:
            self._abandoned = True
            return self._started

    def go(self) -> Any:
        """Let the runs start; what they measured (their error is raised), or None when nothing was started."""
        if not self._settle():
            self._thread.join()
            return None
        self.go_file.write_text("go\n")
        self._thread.join()
        self.go_file.unlink(missing_ok=True)
        if "error" in self._box:
            raise self._box["error"]
        return self._box.get("value")

    def stop(self, why: str) -> None:
        """Tell a started process to stop before it measures, and wait for it; its outcome is dropped."""
        if self._settle() and self._thread.is_alive():
            try:
                self.go_file.write_text(f"stop: {why}\n")
            except OSError:
                pass
            self._thread.join()
        self.go_file.unlink(missing_ok=True)
