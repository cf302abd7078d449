"""Fill CuPy's kernel cache for the finder's builds: the compile a fresh machine would otherwise do inside the
first traced pass of each build.

On a machine whose CuPy kernel cache is empty (a fresh node, a new container), the first process of each build
(pedestal type, cluster size, frame shape) compiles ``cluster_finder.cu`` with NVRTC, about 2.5 s on a GPU
host's core, and that process is the traced pass: make run's four configs paid it twice in a row. This module
compiles each build into CuPy's on-disk cache (``CUPY_CACHE_DIR``, default ``~/.cupy/kernel_cache``) under the
key CuPy's own ``RawModule`` computes, and never loads the module; CuPy still makes a CUDA context on the way
(measured on an H100 with CuPy 14.2), so the probe gives the children their go only after the guards and the
unit's link (:mod:`clusterbench.run.precompile`).

Only the compile is done ahead. Which module a run loads, and how, is unchanged: a build whose compile fails
here (or a CuPy that changes its cache key) is compiled where it was before, in the run's own process.

``python -m clusterbench.workloads.cupy.warm --build float32,3,400,400`` compiles one build (several
``--build``: one after the other) and prints one JSON line per build: its seconds, whether CuPy's cache had
it already, and whether a CUDA context is current afterwards.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from clusterbench.errors import InputError
from clusterbench.model.params import PEDESTAL_DTYPES


@dataclass(frozen=True, slots=True)
class Build:
    """One compiled form of cluster_finder.cu, as a run of the finder asks for it by default (no tile or slide
    height of the benchmark's, no extra defines)."""

    pedestal_dtype: str
    cluster: int
    rows: int
    cols: int

    def arg(self) -> str:
        """The ``--build`` argument that names this build."""
        return f"{self.pedestal_dtype},{self.cluster},{self.rows},{self.cols}"

    @classmethod
    def parse(cls, text: str) -> "Build":
        """A ``--build`` argument back into a Build (InputError when it is not one)."""
        parts = text.split(",")
        if len(parts) != 4 or parts[0] not in PEDESTAL_DTYPES or not all(p.isdigit() for p in parts[1:]):
            raise InputError(f"--build takes DTYPE,CLUSTER,ROWS,COLS, got {text!r}",
                             hint="e.g. --build float32,3,400,400")
        cluster, rows, cols = (int(p) for p in parts[1:])
        if min(cluster, rows, cols) < 1:
            raise InputError(f"--build sizes must be positive, got {text!r}", hint="e.g. --build float32,3,400,400")
        return cls(parts[0], cluster, rows, cols)


def builds_of(params: Iterable[Any]) -> tuple[Build, ...]:
    """The distinct builds of some WorkloadParams, in first-seen order (pure)."""
    seen: dict[Build, None] = {}
    for p in params:
        seen.setdefault(Build(str(p.pedestal_dtype), int(p.cluster), int(p.rows), int(p.cols)), None)
    return tuple(seen)


class _NoLoad:
    """Stands in for ``cupy.cuda.function.Module`` while a build is compiled: CuPy's compile path ends by loading
    the module (which makes a CUDA context); here it only keeps what it is given."""

    def load(self, cubin: bytes) -> None:
        self.cubin = cubin

    def _set_mapping(self, mapping: Any) -> None:
        self.mapping = mapping


class _Function:
    """The ``function`` module as CuPy's compiler sees it during :func:`compile_build`: Module never loads, and
    each Module made is kept (one given a cubin is the build, compiled or read from the cache)."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.made: list[_NoLoad] = []

    def Module(self) -> _NoLoad:  # noqa: N802 - the name CuPy's compiler calls
        mod = _NoLoad()
        self.made.append(mod)
        return mod

    def loaded(self) -> bool:
        """Whether CuPy gave any Module made here a cubin."""
        return any(hasattr(m, "cubin") for m in self.made)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _context_current() -> bool:
    """Whether this thread has a current CUDA context (CuPy's driver binding)."""
    from cupy.cuda import driver

    try:
        return bool(driver.ctxGetCurrent())
    except Exception:  # noqa: BLE001 - a driver that cannot say: report none made
        return False


def compile_build(build: Build) -> dict[str, Any]:
    """Compile one build into CuPy's kernel cache without loading it; what happened, as a JSON-able dict."""
    from cupy.cuda import compiler

    from clusterbench.workloads.cupy.pipeline import _main_module

    cached_before = _cache_names()
    t0 = time.perf_counter()
    real = compiler.function
    shim = _Function(real)
    compiler.function = shim
    try:
        _main_module.__wrapped__(build.pedestal_dtype, build.cluster, None, None, (),
                                 (build.rows, build.cols)).compile()
    except TypeError:
        # CuPy hands the module it made back to RawModule, which takes only its own Module type: that error comes
        # after the cubin was saved (or found in the cache), so the build is in the cache when a Module got it
        if not shim.loaded():
            raise
    finally:
        compiler.function = real
    seconds = time.perf_counter() - t0
    added = _cache_names() - cached_before
    return {"build": build.arg(), "seconds": round(seconds, 3), "compiled": bool(added),
            "context": _context_current()}


def cache_dir() -> str:
    """CuPy's on-disk kernel cache: ``CUPY_CACHE_DIR``, else ``~/.cupy/kernel_cache`` (CuPy's own rule, in every
    version this runs with; CuPy 14.2 no longer has a function that says it)."""
    import os

    return os.environ.get("CUPY_CACHE_DIR") or os.path.expanduser("~/.cupy/kernel_cache")


def _cache_names() -> set[str]:
    import os

    try:
        return {n for n in os.listdir(cache_dir()) if n.endswith(".cubin")}
    except OSError:
        return set()


def main(argv: Sequence[str] | None = None) -> int:
    from clusterbench.workloads.protocol import child_error

    ap = argparse.ArgumentParser(prog="python -m clusterbench.workloads.cupy.warm",
                                 description="Compile the finder's kernels into CuPy's kernel cache without a CUDA "
                                             "context (what a fresh machine's first traced pass would compile).",
                                 epilog="Exit codes: 0 compiled (or cached already); 1 CuPy or the compiler "
                                        "failed; 2 bad input.")
    ap.add_argument("--build", action="append", required=True, metavar="DTYPE,CLUSTER,ROWS,COLS",
                    help="one build, e.g. float32,3,400,400 (repeat for several)")
    ap.add_argument("--wait-go", action="store_true",
                    help="import CuPy, then wait for a line 'go' on stdin before compiling (anything else: exit 0 "
                         "without compiling)")
    args = ap.parse_args(argv)
    try:
        builds = [Build.parse(b) for b in args.build]
        if args.wait_go:
            import cupy  # noqa: F401 - the import is the part done before the go
            from cupy.cuda import compiler  # noqa: F401

            if sys.stdin.readline().strip() != "go":
                return 0
        for b in builds:
            print(json.dumps(compile_build(b)), flush=True)
    except Exception as err:  # noqa: BLE001 - one Error/Hint for the parent's log
        return child_error(err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
