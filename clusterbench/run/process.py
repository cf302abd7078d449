"""Run one child process with its output in a log file; stop it cleanly on Ctrl-C."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from clusterbench.errors import EnvironmentFailure

LOG_TAIL_LINES = 15


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "(no log)"
    tail = [ln for ln in text.splitlines() if ln.strip()][-lines:]
    return "\n".join(tail) if tail else "(empty log)"


def run_logged(
    cmd: Sequence[str],
    log: Path,
    *,
    env: Mapping[str, str] | None = None,
    what: str,
    hint: str | None = None,
    append: bool = False,
    cwd: str | None = None,
) -> None:
    """Run ``cmd`` with stdout and stderr into ``log``; raise EnvironmentFailure if it fails.

    ``cwd`` is the folder the child runs in (a command workload runs in its config file's folder).
    On KeyboardInterrupt the child is terminated (then killed) before the interrupt goes on,
    so no orphan keeps the GPU busy.
    """
    with open(log, "a" if append else "w") as fh:
        fh.write("$ " + " ".join(str(c) for c in cmd) + "\n")
        fh.flush()
        try:
            proc = subprocess.Popen(list(cmd), stdout=fh, stderr=subprocess.STDOUT, env=dict(env) if env else None,
                                    cwd=cwd)
        except OSError as exc:
            raise EnvironmentFailure(f"{what}: cannot start {cmd[0]}: {exc}", hint=hint) from None
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise
    if rc != 0:
        raise EnvironmentFailure(
            f"{what} failed with exit status {rc}; last lines of {log.name}:\n{log_tail(log)}",
            hint=hint or f"read the whole log: {log}",
        )
