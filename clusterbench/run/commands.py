"""Command lines for the processes a probe starts, built by pure functions.

Every traced or timed run is its own process: the workload (its argv comes from
:mod:`clusterbench.workloads`), under nsys, under the CUPTI tracer, or bare for sustained FPS.
The child gets a PYTHONPATH that puts this checkout first, so a Python workload imports the same
clusterbench as the parent. nsys itself is found by :func:`clusterbench.io.nsys.find_nsys`, and its
export command built by :func:`clusterbench.io.nsys.export.nsys_export_command`, the ones analyze and
probe share.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Mapping, Sequence

CUPTI_MODULE = "clusterbench.run.cupti_run"


def package_root() -> Path:
    """The directory that holds the ``clusterbench`` package (the checkout)."""
    import clusterbench

    return Path(clusterbench.__file__).resolve().parent.parent


def child_env(base: Mapping[str, str] | None = None, root: Path | None = None) -> dict[str, str]:
    """The parent's environment with this checkout first on PYTHONPATH and unbuffered output."""
    env = dict(os.environ if base is None else base)
    first = str(root if root is not None else package_root())
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != first]
    env["PYTHONPATH"] = os.pathsep.join([first, *rest])
    env["PYTHONUNBUFFERED"] = "1"
    return env


# nsys traces a CUDA graph launch as one interval per graph execution by default
# (--cuda-graph-trace=graph); from 2023.3 on, --cuda-graph-trace=node records every kernel node
# as a kernel row, which is what per-engine figures need (docs/analyze.md, "CUDA graphs").
GRAPH_TRACE_NODE_SINCE = (2023, 3)
_NSYS_VERSION_RE = re.compile(r"(\d{4})\.(\d+)(?:\.(\d+))?")


def parse_nsys_version(text: str | None) -> tuple[int, ...] | None:
    """(year, minor[, micro]) from ``nsys --version`` output, e.g. 'NVIDIA Nsight Systems version
    2025.3.2.474-253236389321v0' -> (2025, 3, 2); None when no version is in the text (pure)."""
    if not text:
        return None
    m = _NSYS_VERSION_RE.search(text)
    if not m:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def nsys_graph_trace_mode(version_text: str | None) -> str:
    """'node' where this nsys takes --cuda-graph-trace=node (2023.3 on), else 'graph' (its only mode) (pure).

    An unreadable version is treated as old: the flag is left out rather than risk a refused run."""
    v = parse_nsys_version(version_text)
    return "node" if v is not None and v[:2] >= GRAPH_TRACE_NODE_SINCE else "graph"


def nsys_profile_command(nsys: Path | str, out_base: Path, child: Sequence[str], graph_trace: str = "node",
                         capture: tuple[str, str | None] | None = None, export_sqlite: bool = False) -> list[str]:
    """nsys traces CUDA and NVTX only: no CPU sampling, no context switches (they cost and we never read them).

    ``out_base`` is the report path without extension; nsys adds ``.nsys-rep``. ``graph_trace``
    'node' adds ``--cuda-graph-trace=node`` so that graph kernel nodes are kernel rows; 'graph'
    leaves nsys at its default (one row per graph execution, for nsys before 2023.3).
    ``capture`` (``clusterbench.run.config.parse_capture``): trace only inside an NVTX range
    (``("nvtx", "NAME[@DOMAIN]")``) or between cudaProfilerStart and Stop (``("cudaProfilerApi", None)``),
    then let the program run on to its end (``--capture-range-end=stop``). ``export_sqlite``: nsys writes
    ``<out_base>.sqlite`` itself at the end of the profile (one nsys run instead of profile, then export).
    """
    if graph_trace not in ("node", "graph"):
        raise ValueError(f"graph_trace must be 'node' or 'graph', got {graph_trace!r}")
    graph = ["--cuda-graph-trace=node"] if graph_trace == "node" else []
    window: list[str] = []
    if capture is not None:
        kind, name = capture
        window = ([f"--capture-range={kind}"] + ([f"--nvtx-capture={name}"] if kind == "nvtx" else [])
                  + ["--capture-range-end=stop"])
    export = ["--export=sqlite"] if export_sqlite else []
    return [str(nsys), "profile", "-t", "cuda,nvtx", "-s", "none", "--cpuctxsw=none", *graph, *window, *export,
            "--force-overwrite=true", "-o", str(out_base), *child]


def nsys_capture_env(capture: tuple[str, str | None] | None) -> dict[str, str]:
    """What nsys's environment needs for ``capture``: an NVTX capture range on a string the program did not
    register (nvtxDomainRegisterString) is only seen with NSYS_NVTX_PROFILER_REGISTER_ONLY=0."""
    return {"NSYS_NVTX_PROFILER_REGISTER_ONLY": "0"} if capture is not None and capture[0] == "nvtx" else {}


def cupti_command(params_json: str, sqlite_out: Path, result_json: Path, *, python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", CUPTI_MODULE, "--params-json", params_json,
            "--out", str(sqlite_out), "--result-json", str(result_json)]
