"""clusterbench guard: the idle-GPU and fresh-build checks on their own."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from clusterbench.cli import options
from clusterbench.cli.common import boundary, stdout_console, warn

HELP = (
    "Check that the GPUs are idle and the build is fresh, as every probe does first.\n\n"
    "Idle GPU (NVML), for each GPU (--gpus; default the first this process may use): utilization "
    "sampled over --sample-window seconds must stay at or under --max-util %, and no other process may hold a "
    "compute context; memory used, SM clocks and throttle reasons are reported. Fresh build: the imported "
    "clusterbench is this checkout, its kernel sources are hashed, the artifact of the config's build "
    "table is newer than its sources, and the git rev and dirty flag are recorded. One verdict covers "
    "every GPU: PASS, FORCED (--force overrode a failure) or REFUSED, with its reason. A broken config "
    "is reported before any GPU call."
)


@boundary
def guard(
    max_util: float = options.MAX_UTIL,
    window: float = options.SAMPLE_WINDOW,
    config: Optional[Path] = options.CONFIG,
    gpus: Optional[str] = options.GPUS,
    require_clean: bool = options.REQUIRE_CLEAN,
    force: bool = options.FORCE,
    as_json: bool = options.JSON,
) -> None:
    from clusterbench.render.guard import render_guard_json, render_guard_table
    from clusterbench.run.config import DEFAULT_CONFIG_FILE, load_configs
    from clusterbench.run.gpus import plan_gpus
    from clusterbench.run.guards import require_guard_pass
    from clusterbench.run.machine import parse_gpu_selection

    from clusterbench.io.outputs import refuse_stdout_as_input

    if config is None and Path(DEFAULT_CONFIG_FILE).is_file():
        config = Path(DEFAULT_CONFIG_FILE)
    refuse_stdout_as_input([("--config", config)], "--json" if as_json else "the table")
    config_file = load_configs(config) if config is not None else None  # before any NVML call
    selection = None if gpus is None else parse_gpu_selection(gpus)
    verdict = plan_gpus(selection, config_file, max_util_pct=max_util, window_s=window,
                        require_clean=require_clean, force=force).verdict
    if as_json:
        typer.echo(render_guard_json(verdict))
    else:
        stdout_console().print(render_guard_table(verdict))
    if verdict.forced:
        warn(verdict.message, hint=verdict.hint)
    require_guard_pass(verdict)
