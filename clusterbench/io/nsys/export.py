"""Find nsys and turn a .nsys-rep (or an older .qdrep) into an SQLite export (cached next to the report).

A ``.qdrep`` is the report format of nsys before 2021.4; current nsys versions still export it
(``nsys export --type sqlite -o OUT.sqlite REPORT.qdrep``), so it is handled like a ``.nsys-rep``.

The cache never overwrites a user's file: a sibling ``<name>.sqlite`` that is at least as
new as the report is used as it is; otherwise the export goes to
``.clusterbench-cache/<name>.sqlite`` beside the report and is reused while it is newer
than the report.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

from clusterbench.errors import EnvironmentFailure, TraceError

REP_SUFFIX = ".nsys-rep"
REP_SUFFIXES = (REP_SUFFIX, ".qdrep")  # .qdrep: the report format of nsys before 2021.4
CACHE_DIR = ".clusterbench-cache"
NSYS_ENV = "CLUSTERBENCH_NSYS"  # an explicit nsys binary wins over every search
# Where NVIDIA installs nsys (the H200 machine has it inside nsight-compute).
NSYS_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems/*/target-linux-x64/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
    "/usr/local/cuda/bin/nsys",
    "/usr/local/cuda-*/bin/nsys",
)
EXPORT_TIMEOUT_S = 1800
NO_NSYS_HINT = (
    "install Nsight Systems or put nsys on PATH (or set CLUSTERBENCH_NSYS), or export on a machine "
    "that has it: nsys export --type sqlite -o {out} {rep}  and analyze the .sqlite"
)


def _version_key(path: str) -> tuple:
    parts = []
    for chunk in Path(path).parts:
        for piece in chunk.replace("-", ".").split("."):
            parts.append((0, int(piece), "") if piece.isdigit() else (1, 0, piece))
    return tuple(parts)


def find_nsys() -> Path | None:
    """The nsys binary: $CLUSTERBENCH_NSYS, then PATH, then NVIDIA's install folders (newest first)."""
    explicit = os.environ.get(NSYS_ENV)
    if explicit:
        p = Path(explicit)
        return p if p.is_file() and os.access(p, os.X_OK) else None
    on_path = shutil.which("nsys")
    if on_path:
        return Path(on_path)
    found = [m for pattern in NSYS_GLOBS for m in glob.glob(pattern) if os.access(m, os.X_OK) and Path(m).is_file()]
    if not found:
        return None
    return Path(max(found, key=_version_key))


def nsys_export_command(nsys: Path | str, report: Path, sqlite_out: Path) -> list[str]:
    """``nsys export`` of ``report`` to the SQLite file ``sqlite_out`` (overwritten): the one command line
    for both the probe's traces and analyze's cache."""
    return [str(nsys), "export", "--type", "sqlite", "--force-overwrite=true", "-o", str(sqlite_out), str(report)]


def cached_export_path(rep: Path) -> Path:
    """Where the SQLite export of ``rep`` lives (or will): sibling if fresh, else the cache folder."""
    suffix = next(s for s in REP_SUFFIXES if rep.name.endswith(s))
    sibling = rep.with_name(rep.name[: -len(suffix)] + ".sqlite")
    if sibling.is_file() and sibling.stat().st_mtime >= rep.stat().st_mtime:
        return sibling
    return rep.parent / CACHE_DIR / sibling.name


def export_sqlite(rep: str | os.PathLike[str], nsys: Path | None = None) -> Path:
    """Return an SQLite export of ``rep``, running ``nsys export`` only when no fresh one exists."""
    rep = Path(rep)
    if not rep.is_file():
        raise TraceError(f"report not found: {rep}", hint="check the path to the .nsys-rep or .qdrep")
    out = cached_export_path(rep)
    if out.is_file() and out.stat().st_mtime >= rep.stat().st_mtime:
        return out
    nsys = nsys or find_nsys()
    if nsys is None:
        kind = "an older nsys report (.qdrep, nsys before 2021.4)" if rep.name.endswith(".qdrep") else "an nsys report"
        raise TraceError(
            f"cannot read {rep.name}: it is {kind}, and nsys was not found to export it "
            f"(searched PATH, ${NSYS_ENV}, {', '.join(NSYS_GLOBS)})",
            hint=NO_NSYS_HINT.format(out=out.name, rep=rep),
        )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentFailure(
            f"cannot create the export cache {out.parent}: {exc.strerror}",
            hint=f"export it yourself: {nsys} export --type sqlite -o OUT.sqlite {rep}",
        ) from None
    tmp = out.with_name(f".{out.stem}.partial.sqlite")  # ends in .sqlite so nsys adds no extension
    cmd = nsys_export_command(nsys, rep, tmp)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvironmentFailure(f"nsys export failed to run: {exc}", hint=f"run it by hand: {' '.join(cmd)}") from None
    if proc.returncode != 0 or not tmp.is_file():
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:] or ["no output"]
        raise EnvironmentFailure(
            f"nsys export exited {proc.returncode} on {rep.name}: {tail[0]}",
            hint=f"run it by hand to see why: {' '.join(cmd)}",
        )
    os.replace(tmp, out)
    return out


def resolve_trace(path: str | os.PathLike[str]) -> Path:
    """A path analyze can read: the SQLite file itself, or the export of a .nsys-rep or .qdrep."""
    path = Path(path)
    if path.name.endswith(REP_SUFFIXES) and not path.is_dir():
        return export_sqlite(path)
    return path
