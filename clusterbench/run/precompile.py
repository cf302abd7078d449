"""The finder's kernels compiled while the guards sample the GPU, so that a fresh machine's first traced pass
of each build does not compile them (:mod:`clusterbench.workloads.cupy.warm` says how, without a CUDA context).

One child per build, all at once (NVRTC runs on one core each), started with the guards and waited for before
the first config runs: on a machine whose CuPy kernel cache already holds the builds each child ends in about
half a second (importing CuPy). A child that fails costs nothing but its time: the run compiles the build itself,
as it did before. What each child printed goes to ``precompile.log`` in the results dir.

Nothing here prints, exits, or imports typer, rich or CuPy.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable

from clusterbench.run.commands import child_env

WARM_MODULE = "clusterbench.workloads.cupy.warm"
# Longest wait for the children before the first config (a compile takes a few seconds; a hung child must not
# hold the probe): past it they are stopped and the runs compile for themselves.
WAIT_S = 120.0


def finder_builds(configs: Iterable[Any]) -> tuple[Any, ...]:
    """The distinct builds of the configs our finder runs (workload ``cupy``, not a program probed as it is)."""
    from clusterbench.workloads.cupy.warm import builds_of

    return builds_of(c.params for c in configs
                     if c.exec is None and c.workload.kind == "cupy" and c.params is not None)


class Precompile:
    """The children compiling ``builds``; :meth:`wait` before the GPU is used for runs, :meth:`stop` on the way
    out. With no builds it starts nothing."""

    def __init__(self, builds: Iterable[Any], env: dict[str, str] | None = None) -> None:
        self.procs: list[tuple[str, subprocess.Popen[str]]] = []
        self.outputs: list[str] = []
        self.seconds: float | None = None
        self._t0 = time.perf_counter()
        for b in builds:
            argv = [sys.executable, "-m", WARM_MODULE, "--build", b.arg()]
            try:
                p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=env if env is not None else child_env())
            except OSError as exc:
                self.outputs.append(f"{b.arg()}: not started: {exc}")
                continue
            self.procs.append((b.arg(), p))

    def wait(self, timeout_s: float = WAIT_S) -> None:
        """Wait for every child (at most ``timeout_s`` in all; those left then are stopped)."""
        deadline = time.perf_counter() + timeout_s
        for arg, p in self.procs:
            try:
                out, _ = p.communicate(timeout=max(0.0, deadline - time.perf_counter()))
                self.outputs.append(f"{arg}: exit {p.returncode}: {out.strip()}")
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
                self.outputs.append(f"{arg}: stopped after {timeout_s:g} s (the runs compile it): {out.strip()}")
        self.procs = []
        self.seconds = time.perf_counter() - self._t0

    def stop(self) -> None:
        """Stop every child still running (the guards refused, or the probe stops)."""
        for _, p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
        self.procs = []

    def keep_log(self, out_dir: Path) -> None:
        """``precompile.log`` in the results dir: what each child printed, and the wait in all."""
        if not self.outputs:
            return
        head = f"kernels compiled ahead in {self.seconds:.2f} s\n" if self.seconds is not None else ""
        (Path(out_dir) / "precompile.log").write_text(head + "\n".join(self.outputs) + "\n")
