"""The options several commands share, each defined once, with its default taken from the core."""

from __future__ import annotations

from pathlib import Path

import typer

from clusterbench.cli import common
from clusterbench.io.history import DEFAULT_DB_NAME
from clusterbench.run.config import DEFAULT_CONFIG_FILE
from clusterbench.run.guards import DEFAULT_MAX_UTIL_PCT, DEFAULT_WINDOW_S, MAX_WINDOW_S
from clusterbench.run.probe import DEFAULT_REPEAT, DEFAULT_RESULTS_ROOT, DEFAULT_TRACER, MAX_REPEAT
from clusterbench.run.processes import DEFAULT_PROCESSES, MAX_PROCESSES

JSON = common.JSON  # defined in common: analyze takes it without the imports above

CONFIG = typer.Option(
    None, "--config", metavar="FILE",
    help=f"The configs file (default: ./{DEFAULT_CONFIG_FILE}; guard reads it only when present). It is "
         "validated before any GPU call, and its \\[build] table is checked by the guards.")

MAX_UTIL = typer.Option(
    DEFAULT_MAX_UTIL_PCT, "--max-util", metavar="PCT",
    help="Guard: refuse a GPU when any utilization sample exceeds PCT %.")

# --window names the trace window (analyze, compare, probe); the guard's sampling time is its own option
SAMPLE_WINDOW = typer.Option(
    DEFAULT_WINDOW_S, "--sample-window", metavar="S",
    help=f"Guard: seconds to sample each GPU's utilization over (at most {MAX_WINDOW_S:g}).")

REQUIRE_CLEAN = typer.Option(False, "--require-clean", help="Guard: refuse a dirty git checkout.")

FORCE = typer.Option(
    False, "--force",
    help="Go on when a guard check fails; the override is recorded (env.json, --json). With several GPUs a "
         "failing GPU is left out while another passes.")

GPUS = typer.Option(
    None, "--gpus", metavar="all|0,2,...",
    help="The GPUs: 'all' (inside a Slurm allocation: the GPUs it grants) or NVML indices as nvidia-smi -L "
         "lists them, e.g. 0,2; each is read and judged by the guards once. Default: the first GPU this "
         "process may use (GPU 0, or the first CUDA_VISIBLE_DEVICES names).")

RESULTS_DIR = typer.Option(
    Path(DEFAULT_RESULTS_ROOT), "--results-dir", metavar="DIR",
    help="The results root: where the results/<date>_... dirs, floors/ and history.db go.")

DB = typer.Option(
    None, "--db", metavar="PATH",
    help=f"The history database (SQLite) of every probe row (default: {DEFAULT_DB_NAME} in the results root, "
         f"{DEFAULT_RESULTS_ROOT}/ unless --results-dir names another): clusterbench history.")

REPEAT = typer.Option(
    DEFAULT_REPEAT, "--repeat", metavar="R",
    help=f"Untraced sustained-FPS runs that count in each process, 1 to {MAX_REPEAT}: warm-up runs first, then runs "
         "until the last R agree within 1.5 %, or a cap; the process's figure is the median of the last R. A "
         "process whose runs never agreed is kept, marked unsteady.")

PROCESSES = typer.Option(
    DEFAULT_PROCESSES, "--processes", metavar="P",
    help=f"Fresh processes per sustained figure, 1 to {MAX_PROCESSES}: the figure is the median of their medians, "
         "and their spread is the noise compare judges two probes by. A program run whole: each run is a process, "
         "until the last P agree within 2 % (at most P + 2).")

TRACER = typer.Option(
    DEFAULT_TRACER, "--tracer",
    help="nsys (Nsight Systems), cupti (in-process, no nsys needed) or none (sustained FPS only).")

# the trace options: defined in common, so that analyze takes them without the imports above
TRACE_WINDOW, TRACE_FRAMES, TRACE_RANGE = common.TRACE_WINDOW, common.TRACE_FRAMES, common.TRACE_RANGE

