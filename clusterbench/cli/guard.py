"""clusterbench guard: the idle-GPU and fresh-build checks on their own."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from clusterbench.cli import options
from clusterbench.cli.common import boundary, stdout_console, warn

HELP = (
    "Check that the GPU is idle and the build is fresh, as every probe does first.\n\n"
    "Idle GPU (NVML): utilization sampled over --window seconds must stay at or under "
    "--max-util %, and no other process may hold a compute context; memory used, SM clocks "
    "and throttle reasons are reported. Fresh build: the imported clusterbench is this "
    "checkout, its kernel sources are hashed, the artifact of the config's build table is "
    "newer than its sources, and the git rev and dirty flag are recorded. Without --config, ./configs.toml "
    "is read when present; a broken config is reported before any GPU call."
)


@boundary
def guard(
    max_util: float = options.MAX_UTIL,
    window: float = options.WINDOW,
    config: Optional[Path] = options.CONFIG,
    require_clean: bool = options.REQUIRE_CLEAN,
    force: bool = options.FORCE,
    as_json: bool = options.JSON,
) -> None:
    from clusterbench.run.config import DEFAULT_CONFIG_FILE, load_configs
    from clusterbench.run.guards import require_pass, run_guards
    from clusterbench.render.guard import render_guard_json, render_guard_table

    if config is None and Path(DEFAULT_CONFIG_FILE).is_file():
        config = Path(DEFAULT_CONFIG_FILE)
    config_file = load_configs(config) if config is not None else None  # before any NVML call
    report = run_guards(config_file, max_util_pct=max_util, window_s=window,
                        require_clean=require_clean, force=force)
    if as_json:
        typer.echo(render_guard_json(report))
    else:
        stdout_console().print(render_guard_table(report))
    if report.forced:
        warn(f"proceeding despite failed checks ({', '.join(c.name for c in report.failed)}) because of --force",
             hint="Fix them before a run you want to cite.")
    require_pass(report)
