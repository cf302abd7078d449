"""The finder's kernels compiled while the probe measures the unit and starts its first traced process, so that a
fresh machine's first process of each build does not compile them itself
(:mod:`clusterbench.workloads.cupy.warm` says how).

One child per build, all started with the guards: each imports CuPy meanwhile and waits for its go on stdin,
because a compile through CuPy makes a CUDA context, which the idle-GPU guard would see and which must not be
made while the unit's link is measured. The probe gives the go once the link is measured (:meth:`go`); each
child then compiles (NVRTC, one core each) while the first config's traced process starts under the profiler.
A finder process that needs a build still compiling waits for it (``BUILDS_ENV``: a folder where
``<build>.pending`` exists until the child compiling that build has ended, whatever its outcome) rather than
compile it a second time; a build whose compile failed is compiled by the run, as before. What each child
printed goes to ``precompile.log`` in the results dir.

Nothing here prints, exits, or imports typer, rich or CuPy.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterable

from clusterbench.run.commands import child_env
from clusterbench.workloads.protocol import BUILD_WAIT_S as WAIT_S  # past it a child is stopped: the runs compile
from clusterbench.workloads.protocol import BUILDS_ENV, PENDING_SUFFIX

WARM_MODULE = "clusterbench.workloads.cupy.warm"


def finder_builds(configs: Iterable[Any]) -> tuple[Any, ...]:
    """The distinct builds of the configs our finder runs (workload ``cupy``, not a program probed as it is)."""
    from clusterbench.workloads.cupy.warm import builds_of

    return builds_of(c.params for c in configs
                     if c.exec is None and c.workload.kind == "cupy" and c.params is not None)


class Precompile:
    """The children compiling ``builds``, each waiting for :meth:`go`; :meth:`wait` for them all, :meth:`stop` on
    the way out (it also removes the pending folder). With no builds it starts nothing."""

    def __init__(self, builds: Iterable[Any], env: dict[str, str] | None = None) -> None:
        self.procs: list[tuple[str, subprocess.Popen[str]]] = []
        self.outputs: list[str] = []
        self.folder: Path | None = None
        self._threads: list[threading.Thread] = []
        self._t_go: float | None = None
        builds = tuple(builds)
        if not builds:
            return
        self.folder = Path(tempfile.mkdtemp(prefix="clusterbench-builds-"))
        for b in builds:
            argv = [sys.executable, "-m", WARM_MODULE, "--wait-go", "--build", b.arg()]
            try:
                p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env if env is not None else child_env())
            except OSError as exc:
                self.outputs.append(f"{b.arg()}: not started: {exc}")
                continue
            (self.folder / f"{b.arg()}{PENDING_SUFFIX}").write_text("compiling\n")
            self.procs.append((b.arg(), p))

    def child_env(self) -> dict[str, str]:
        """What the finder's processes need to find the builds still compiling (empty with no builds)."""
        return {BUILDS_ENV: str(self.folder)} if self.folder is not None else {}

    def go(self) -> None:
        """Let every child compile now; each build's pending file goes when its child has ended."""
        self._t_go = time.perf_counter()
        for arg, p in self.procs:
            t = threading.Thread(target=self._finish, args=(arg, p), name=f"clusterbench-precompile-{arg}",
                                 daemon=True)
            t.start()
            self._threads.append(t)

    def _finish(self, arg: str, p: subprocess.Popen[str]) -> None:
        try:
            out, _ = p.communicate(input="go\n", timeout=WAIT_S)
            took = time.perf_counter() - (self._t_go or time.perf_counter())
            self.outputs.append(f"{arg}: exit {p.returncode} {took:.2f} s after the go: {out.strip()}")
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            self.outputs.append(f"{arg}: stopped after {WAIT_S:g} s (the runs compile it): {out.strip()}")
        finally:
            if self.folder is not None:
                (self.folder / f"{arg}{PENDING_SUFFIX}").unlink(missing_ok=True)

    def wait(self) -> None:
        """Wait for every child given its go (each ends within WAIT_S of it)."""
        for t in self._threads:
            t.join()

    def stop(self) -> None:
        """Stop every child still running (never given its go, or still compiling) and remove the pending
        folder."""
        for _, p in self.procs:
            if p.poll() is None:
                p.kill()
        for t in self._threads:
            t.join()
        for _, p in self.procs:
            if p.returncode is None:
                try:
                    p.communicate(timeout=10)
                except (subprocess.TimeoutExpired, ValueError, OSError):
                    pass
        self.procs = []
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def keep_log(self, out_dir: Path) -> None:
        """``precompile.log`` in the results dir: what each child printed, its exit and when it ended."""
        if not self.outputs:
            return
        head = "the finder's kernels compiled ahead, one child per build (its exit, and when it ended):\n"
        (Path(out_dir) / "precompile.log").write_text(head + "\n".join(sorted(self.outputs)) + "\n")
