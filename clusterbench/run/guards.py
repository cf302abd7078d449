"""The guards: an idle GPU and a fresh build, checked before every probe.

Collect, then judge. ``read_nvml`` is the only NVML I/O and returns a frozen
``NvmlReading``; the ``check_*`` functions turn readings and build facts into
``GuardCheck`` records; ``run_guards`` composes them into a ``GuardReport`` that the probe
stores in env.json. A failed check is a refusal (exit 3) unless the caller forces it;
no GPU or no driver is an ``EnvironmentFailure`` (exit 1).

Nothing here imports typer, rich or CuPy; ``pynvml`` is imported only inside ``read_nvml``
and ``gpu_present``.
"""

from __future__ import annotations

import enum
import glob
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from clusterbench.errors import CheckFailed, EnvironmentFailure, InputError

if TYPE_CHECKING:
    from clusterbench.run.config import ConfigFile

# The reference campaign's driver aborted above 5 % GPU utilization (docs/facts.md, "Reading rules").
DEFAULT_MAX_UTIL_PCT = 5.0
DEFAULT_WINDOW_S = 1.0
DEFAULT_INTERVAL_S = 0.05
MAX_WINDOW_S = 60.0
MIB = 1024 * 1024

# nvmlClocksEventReasons bit masks (nvml.h; stable across driver versions, formerly "ThrottleReasons").
THROTTLE_BITS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clocks_setting"),
)
# Reasons that hold the SM clock below what a run would get on a healthy, cool, uncapped GPU.
LIMITING_REASONS = frozenset({
    "sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
})


class Status(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"

    def __str__(self) -> str:
        return self.value


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class NvmlReading:
    """One GPU as NVML saw it over a sampling window. ``None`` means "not measured"."""

    index: int
    name: str
    uuid: str
    driver_version: str
    cuda_driver_version: str | None
    util_pct: tuple[float, ...]
    memory_used_bytes: int
    memory_total_bytes: int
    sm_clock_mhz: int | None
    max_sm_clock_mhz: int | None
    throttle_reasons: tuple[str, ...]
    compute_processes: tuple[tuple[int, str, int | None], ...]  # (pid, name, used bytes)
    window_s: float = DEFAULT_WINDOW_S

    def __post_init__(self) -> None:
        if not self.util_pct:
            raise ValueError("NvmlReading needs at least one utilization sample")
        bad = [u for u in self.util_pct if not 0.0 <= u <= 100.0]
        if bad:
            raise ValueError(f"utilization samples must lie in 0..100 %, got {bad}")
        if self.memory_used_bytes < 0 or self.memory_total_bytes < 0:
            raise ValueError("memory bytes must be >= 0")

    @property
    def max_util_pct(self) -> float:
        return max(self.util_pct)

    @property
    def mean_util_pct(self) -> float:
        return sum(self.util_pct) / len(self.util_pct)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "uuid": self.uuid,
            "driver_version": self.driver_version,
            "cuda_driver_version": self.cuda_driver_version,
            "util_pct": list(self.util_pct),
            "util_max_pct": self.max_util_pct,
            "util_mean_pct": round(self.mean_util_pct, 3),
            "window_s": self.window_s,
            "memory_used_bytes": self.memory_used_bytes,
            "memory_total_bytes": self.memory_total_bytes,
            "sm_clock_mhz": self.sm_clock_mhz,
            "max_sm_clock_mhz": self.max_sm_clock_mhz,
            "throttle_reasons": list(self.throttle_reasons),
            "compute_processes": [
                {"pid": pid, "name": name, "used_bytes": used} for pid, name, used in self.compute_processes
            ],
        }


@dataclass(frozen=True, slots=True)
class GuardCheck:
    """One verdict: what was checked, the outcome, the values, and what to do about a failure."""

    name: str
    status: Status
    message: str
    hint: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status.value, "message": self.message,
                "hint": self.hint, "details": self.details}


@dataclass(frozen=True, slots=True)
class GuardReport:
    """All checks of one guard run. ``forced``: some check failed and ``--force`` overrode it."""

    checks: tuple[GuardCheck, ...]
    forced: bool = False
    reading: NvmlReading | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def failed(self) -> tuple[GuardCheck, ...]:
        return tuple(c for c in self.checks if c.status is Status.FAIL)

    @property
    def warnings(self) -> tuple[GuardCheck, ...]:
        return tuple(c for c in self.checks if c.status is Status.WARN)

    def check(self, name: str) -> GuardCheck | None:
        return next((c for c in self.checks if c.name == name), None)

    def _detail(self, check: str, key: str) -> Any:
        c = self.check(check)
        return None if c is None else c.details.get(key)

    @property
    def git_rev(self) -> str | None:
        return self._detail("git", "rev")

    @property
    def git_dirty(self) -> bool | None:
        return self._detail("git", "dirty")

    @property
    def kernel_sources(self) -> dict[str, str] | None:
        """File name -> sha256 of the kernel sources the run compiles."""
        return self._detail("kernel_sources", "sha256")

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the ``guard`` block of env.json and ``clusterbench guard --json``)."""
        return {
            "ok": self.ok,
            "forced": self.forced,
            "failed": [c.name for c in self.failed],
            "settings": dict(self.settings),
            "gpu": None if self.reading is None else self.reading.to_json(),
            "checks": [c.to_json() for c in self.checks],
        }


# --------------------------------------------------------------------------- NVML I/O


def _no_gpu(reason: str) -> EnvironmentFailure:
    return EnvironmentFailure(
        f"no NVIDIA GPU/driver found: {reason}",
        hint="Run on a machine with an NVIDIA GPU and driver; `clusterbench analyze` works without one.",
    )


def _text(x: Any) -> str:
    return x.decode(errors="replace") if isinstance(x, bytes) else str(x)


def _nvidia_smi_gpus() -> list[str] | None:
    """GPU lines from ``nvidia-smi -L``; None when nvidia-smi is absent or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return [line for line in out.stdout.splitlines() if line.startswith("GPU ")]


def _import_pynvml() -> Any:
    try:
        import pynvml  # the nvidia-ml-py package
    except ImportError:
        gpus = _nvidia_smi_gpus()
        if gpus:
            raise EnvironmentFailure(
                f"the NVML Python bindings are missing (module pynvml), though nvidia-smi sees "
                f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}",
                hint="Install them: pip install nvidia-ml-py (or pip install -e '.[gpu]').",
            ) from None
        smi = "nvidia-smi is not installed" if gpus is None else "nvidia-smi lists no GPU"
        raise _no_gpu(f"the NVML bindings (pynvml, package nvidia-ml-py) are not installed and {smi}") from None
    return pynvml


def _nvml_init(pynvml: Any) -> None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise _no_gpu(f"NVML did not initialise ({_text(exc)}); is the NVIDIA driver loaded?") from None
    except OSError as exc:  # a broken libnvidia-ml
        raise _no_gpu(f"libnvidia-ml could not be loaded ({exc})") from None


def _decode_throttle(mask: int) -> tuple[str, ...]:
    return tuple(name for bit, name in THROTTLE_BITS if mask & bit)


def _optional(fn: Any, *args: Any) -> Any:
    """Call an NVML getter that a GPU or driver may not support; None when it fails."""
    try:
        return fn(*args)
    except Exception:  # NVMLError_NotSupported, NoPermission, a missing symbol
        return None


def read_nvml(device_index: int = 0, window_s: float = DEFAULT_WINDOW_S,
              interval_s: float = DEFAULT_INTERVAL_S) -> NvmlReading:
    """Sample one GPU through NVML for ``window_s`` seconds.

    Utilization is read every ``interval_s`` (the first sample at once, the last at the end
    of the window). Raises EnvironmentFailure when pynvml or the driver is missing or there
    is no GPU at ``device_index``.
    """
    if not 0 < window_s <= MAX_WINDOW_S:
        raise InputError(f"--window must be in (0, {MAX_WINDOW_S:g}] s, got {window_s:g} s",
                         hint=f"Use e.g. --window {DEFAULT_WINDOW_S:g} (the default).")
    pynvml = _import_pynvml()
    _nvml_init(pynvml)
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count < 1:
            raise _no_gpu("NVML sees 0 devices")
        if not 0 <= device_index < count:
            raise EnvironmentFailure(
                f"GPU index {device_index} does not exist: NVML sees {count} device{'s' if count != 1 else ''}",
                hint=f"Pick a GPU index from 0 to {count - 1}.")
        h = pynvml.nvmlDeviceGetHandleByIndex(device_index)
        name = _text(pynvml.nvmlDeviceGetName(h))
        uuid = _text(pynvml.nvmlDeviceGetUUID(h))
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda_int = _optional(pynvml.nvmlSystemGetCudaDriverVersion)
        cuda = None if cuda_int is None else f"{cuda_int // 1000}.{(cuda_int % 1000) // 10}"

        samples: list[float] = []
        start = time.monotonic()
        while True:
            samples.append(float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu))
            elapsed = time.monotonic() - start
            if elapsed >= window_s:
                break
            time.sleep(min(interval_s, window_s - elapsed))

        mem = pynvml.nvmlDeviceGetMemoryInfo(h)
        clock_sm = getattr(pynvml, "NVML_CLOCK_SM", 1)
        sm = _optional(pynvml.nvmlDeviceGetClockInfo, h, clock_sm)
        sm_max = _optional(pynvml.nvmlDeviceGetMaxClockInfo, h, clock_sm)
        reasons_fn = (getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                      or getattr(pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
        mask = _optional(reasons_fn, h) if reasons_fn else None
        procs = []
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h) or ():
            used = getattr(p, "usedGpuMemory", None)
            if used is not None and used >= 2**63:  # NVML_VALUE_NOT_AVAILABLE
                used = None
            pname = _optional(pynvml.nvmlSystemGetProcessName, p.pid)
            procs.append((int(p.pid), _text(pname) if pname else _proc_name(int(p.pid)), used))
    except pynvml.NVMLError as exc:
        raise EnvironmentFailure(f"NVML query failed on GPU {device_index}: {_text(exc)}",
                                 hint="Check the driver with nvidia-smi.") from None
    finally:
        _optional(pynvml.nvmlShutdown)
    return NvmlReading(
        index=device_index, name=name, uuid=uuid, driver_version=driver, cuda_driver_version=cuda,
        util_pct=tuple(samples), memory_used_bytes=int(mem.used), memory_total_bytes=int(mem.total),
        sm_clock_mhz=sm, max_sm_clock_mhz=sm_max,
        throttle_reasons=_decode_throttle(mask) if mask is not None else (),
        compute_processes=tuple(procs), window_s=window_s,
    )


def _proc_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() or "?"
    except OSError:
        return "?"  # another container's pid, or no /proc


def gpu_present() -> bool:
    """True when NVML initialises and sees a GPU (else ``nvidia-smi -L`` lists one). Never raises."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount() > 0
        finally:
            _optional(pynvml.nvmlShutdown)
    except Exception:
        pass
    try:
        return bool(_nvidia_smi_gpus())
    except Exception:
        return False


# --------------------------------------------------------------------------- pure checks


def _mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / MIB:.0f} MiB"


def check_idle_gpu(reading: NvmlReading, max_util_pct: float = DEFAULT_MAX_UTIL_PCT,
                   own_pid: int | None = None) -> GuardCheck:
    """Fail when any utilization sample exceeds ``max_util_pct`` or another process holds a context."""
    others = tuple(p for p in reading.compute_processes if p[0] != own_pid)
    peak = reading.max_util_pct
    over = [u for u in reading.util_pct if u > max_util_pct]
    util_text = (f"utilization max {peak:g} % (mean {reading.mean_util_pct:.1f} %, "
                 f"{len(reading.util_pct)} samples over {reading.window_s:g} s, limit {max_util_pct:g} %)")
    mem_text = f"memory used {_mib(reading.memory_used_bytes)} of {_mib(reading.memory_total_bytes)}"
    proc_text = "; ".join(f"pid {pid} {pname} ({_mib(used)})" for pid, pname, used in others)
    details = {
        "max_util_pct": max_util_pct,
        "util_max_pct": peak,
        "util_mean_pct": round(reading.mean_util_pct, 3),
        "samples_over": len(over),
        "samples": len(reading.util_pct),
        "window_s": reading.window_s,
        "memory_used_bytes": reading.memory_used_bytes,
        "memory_total_bytes": reading.memory_total_bytes,
        "other_processes": [{"pid": pid, "name": n, "used_bytes": u} for pid, n, u in others],
    }
    gpu = f"GPU {reading.index} ({reading.name})"
    problems = []
    if over:
        problems.append(f"{util_text}, {len(over)} of {len(reading.util_pct)} samples over the limit")
    if others:
        problems.append(f"{len(others)} other process{'es' if len(others) != 1 else ''} "
                        f"hold{'s' if len(others) == 1 else ''} a compute context: {proc_text}")
    if problems:
        return GuardCheck(
            "idle_gpu", Status.FAIL, f"{gpu} is busy: " + "; ".join(problems) + f"; {mem_text}",
            hint=("Wait for the other work to finish or stop it (nvidia-smi lists it), or pick an "
                  "idle GPU; a competing process ruins duty cycles and rooflines."),
            details=details)
    return GuardCheck("idle_gpu", Status.PASS,
                      f"{gpu} is idle: {util_text}; no other compute process; {mem_text}",
                      details=details)


def check_clocks(reading: NvmlReading) -> GuardCheck:
    """Report the SM clock and throttle reasons; warn when power, thermal or HW limits cap the clock."""
    limiting = tuple(r for r in reading.throttle_reasons if r in LIMITING_REASONS)
    clock = (f"SM clock {reading.sm_clock_mhz} MHz of {reading.max_sm_clock_mhz} MHz max"
             if reading.sm_clock_mhz is not None else "SM clock not readable")
    reasons = ", ".join(reading.throttle_reasons) or "none"
    details = {"sm_clock_mhz": reading.sm_clock_mhz, "max_sm_clock_mhz": reading.max_sm_clock_mhz,
               "throttle_reasons": list(reading.throttle_reasons)}
    if limiting:
        return GuardCheck(
            "clocks", Status.WARN, f"{clock}; throttle reasons: {reasons}",
            hint=("Power, thermal or hardware limits hold the clock down: let the GPU cool, check the "
                  "power cap (nvidia-smi -q -d PERFORMANCE), and compare only runs made alike."),
            details=details)
    note = " (an idle GPU clocks down; clocks ramp during the run)" if "gpu_idle" in reading.throttle_reasons else ""
    return GuardCheck("clocks", Status.PASS, f"{clock}; throttle reasons: {reasons}{note}", details=details)


def check_kernel_sources(expected: Mapping[str, str] | None, actual: Mapping[str, str]) -> GuardCheck:
    """The kernels the run compiles (``actual``) must match this checkout's (``expected``).

    ``expected`` is None when there is no checkout to compare with: the hashes are then only
    recorded. An empty ``actual`` fails: the run would have nothing to compile.
    """
    details: dict[str, Any] = {"sha256": dict(sorted(actual.items())),
                               "expected_sha256": None if expected is None else dict(sorted(expected.items()))}
    if not actual:
        return GuardCheck("kernel_sources", Status.FAIL, "no kernel sources (.cu/.cuh) found for the run to compile",
                          hint=("The workload's .cu/.cuh files belong in clusterbench/workloads/cupy/kernels/; if "
                                "clusterbench is installed, reinstall it from the checkout (pip install -e .)."),
                          details=details)
    n = len(actual)
    if expected is None:
        return GuardCheck("kernel_sources", Status.PASS,
                          f"{n} kernel source{'s' if n != 1 else ''} hashed (sha256 recorded); "
                          "no checkout to compare with", details=details)
    changed = sorted(k for k in actual if k in expected and actual[k] != expected[k])
    missing = sorted(k for k in expected if k not in actual)
    extra = sorted(k for k in actual if k not in expected)
    if changed or missing or extra:
        parts = []
        if changed:
            parts.append(f"differ: {', '.join(changed)}")
        if missing:
            parts.append(f"only in the checkout: {', '.join(missing)}")
        if extra:
            parts.append(f"only in the imported copy: {', '.join(extra)}")
        return GuardCheck("kernel_sources", Status.FAIL,
                          "the kernels the run would compile are not this checkout's: " + "; ".join(parts),
                          hint="Install the checkout (pip install -e .) or run its own venv, then re-run.",
                          details=details)
    return GuardCheck("kernel_sources", Status.PASS,
                      f"{n} kernel source{'s' if n != 1 else ''} match the checkout (sha256 recorded)",
                      details=details)


def check_import_location(module_file: str | Path, repo_root: Path | None) -> GuardCheck:
    """The imported clusterbench must be this checkout's, not a stale installed copy."""
    pkg = Path(module_file).resolve().parent
    details: dict[str, Any] = {"imported_from": str(pkg), "repo_root": None if repo_root is None else str(repo_root)}
    if repo_root is None:
        return GuardCheck("import_location", Status.SKIP,
                          f"not run from a clusterbench checkout; clusterbench imported from {pkg}",
                          details=details)
    want = (Path(repo_root) / "clusterbench").resolve()
    if pkg == want:
        return GuardCheck("import_location", Status.PASS, f"clusterbench imported from this checkout ({pkg})",
                          details=details)
    return GuardCheck(
        "import_location", Status.FAIL,
        f"clusterbench imported from {pkg}, not from this checkout {want}: a stale installed copy would run",
        hint=("Install the checkout in editable mode (pip install -e .) or run its own venv "
              "(.venv/bin/clusterbench)."),
        details=details)


def _expand(patterns: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    """(files found, patterns that matched nothing)."""
    found: list[Path] = []
    empty: list[Path] = []
    for pat in patterns:
        s = str(pat)
        if any(ch in s for ch in "*?["):
            hits = sorted(Path(p) for p in glob.glob(s, recursive=True) if Path(p).is_file())
        else:
            hits = [pat] if pat.is_file() else []
        if hits:
            found.extend(hits)
        else:
            empty.append(pat)
    return found, empty


def check_external_build(artifact: Path, sources: Iterable[Path]) -> GuardCheck:
    """An external build is fresh when its artifact exists and is newer than every source."""
    artifact = Path(artifact)
    pattern = artifact
    if any(ch in str(artifact) for ch in "*?["):  # e.g. a Python extension's ABI-tagged name
        hits = sorted((Path(p) for p in glob.glob(str(artifact)) if Path(p).is_file()),
                      key=lambda p: p.stat().st_mtime_ns)
        artifact = hits[-1] if hits else artifact  # the newest build is the one that runs
    files, empty = _expand(Path(s) for s in sources)
    details: dict[str, Any] = {"artifact": str(artifact), "sources": [str(f) for f in files]}
    if not artifact.is_file():
        return GuardCheck("external_build", Status.FAIL, f"build artifact not found: {pattern}",
                          hint="Build it first (for aare: make aare-cuda), or fix [build] artifact in the config.",
                          details=details)
    if empty:
        return GuardCheck("external_build", Status.FAIL,
                          f"build sources not found: {', '.join(map(str, empty))}",
                          hint="Fix [build] sources in the config (paths and globs are relative to it).",
                          details=details)
    art_ns = artifact.stat().st_mtime_ns
    details["artifact_mtime_ns"] = art_ns
    newer = sorted(((f.stat().st_mtime_ns, f) for f in files if f.stat().st_mtime_ns > art_ns), reverse=True)
    if newer:
        mt, newest = newer[0]
        ahead_s = (mt - art_ns) / 1e9
        return GuardCheck(
            "external_build", Status.FAIL,
            f"build artifact {artifact.name} is older than {len(newer)} of its {len(files)} sources "
            f"(newest: {newest}, {ahead_s:.1f} s newer)",
            hint="Rebuild the artifact, then re-run.",
            details={**details, "newer_sources": [str(f) for _, f in newer]})
    return GuardCheck("external_build", Status.PASS,
                      f"build artifact {artifact.name} is newer than all {len(files)} sources",
                      details=details)


def _git(repo_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo_root), *args], capture_output=True, text=True, timeout=30)


# A checkout copied without its .git (a GPU machine that receives only the working tree) can state
# its revision here: "<sha>" or "<sha>-dirty", written by whoever copied it (git rev-parse HEAD).
GIT_REV_ENV = "CLUSTERBENCH_GIT_REV"
_REV_RE = re.compile(r"^([0-9a-f]{7,40})(-dirty)?$")


def _check_git_from_env(repo_root: Path, require_clean: bool, details: dict[str, Any]) -> GuardCheck | None:
    """The revision stated in CLUSTERBENCH_GIT_REV, for a copy without .git; None when unset."""
    value = os.environ.get(GIT_REV_ENV, "").strip()
    if not value:
        return None
    m = _REV_RE.match(value)
    if m is None:
        return GuardCheck("git", Status.WARN, f"{GIT_REV_ENV}={value!r} is not '<sha>' or '<sha>-dirty': ignored",
                          hint="Set it from the source checkout: git rev-parse HEAD", details=details)
    sha, dirty = m.group(1), m.group(2) is not None
    details.update(rev=sha, dirty=dirty, source=GIT_REV_ENV)
    msg = f"git {sha[:12]}{', dirty' if dirty else ', clean'} (from {GIT_REV_ENV}: {repo_root} has no .git)"
    if dirty and require_clean:
        return GuardCheck("git", Status.FAIL, msg + "; --require-clean refuses a dirty tree",
                          hint="Commit the changes in the source checkout, copy it again, or drop --require-clean.",
                          details=details)
    return GuardCheck("git", Status.WARN if dirty else Status.PASS, msg, details=details)


def check_git(repo_root: Path | None, require_clean: bool = False) -> GuardCheck:
    """Record the git rev and dirty flag; a dirty tree fails only with ``require_clean``.

    Dirty means tracked files differ from HEAD (staged or not); untracked files do not count
    (results dirs live in the tree), but their number is recorded.
    """
    details: dict[str, Any] = {"rev": None, "dirty": None, "require_clean": require_clean}
    if repo_root is None:
        return GuardCheck("git", Status.WARN, "not run from a clusterbench checkout: no git rev to record",
                          hint="Run from the checkout so results carry the git rev.", details=details)
    if shutil.which("git") is None:
        return _check_git_from_env(repo_root, require_clean, details) or GuardCheck(
            "git", Status.WARN, "git is not installed: no git rev to record", details=details)
    try:
        rev = _git(repo_root, "rev-parse", "HEAD")
        if rev.returncode != 0:
            return _check_git_from_env(repo_root, require_clean, details) or GuardCheck(
                "git", Status.WARN, f"{repo_root} is not a git checkout (or has no commit): no git rev to record",
                hint=f"Run from a git checkout, or set {GIT_REV_ENV}=<sha>[-dirty] for a copy without .git.",
                details=details)
        status = _git(repo_root, "status", "--porcelain", "--untracked-files=normal")
    except (OSError, subprocess.SubprocessError) as exc:
        return GuardCheck("git", Status.WARN, f"git failed: {exc}", details=details)
    lines = [ln for ln in status.stdout.splitlines() if ln]
    modified = [ln[3:] for ln in lines if not ln.startswith("??")]
    untracked = [ln[3:] for ln in lines if ln.startswith("??")]
    sha = rev.stdout.strip()
    dirty = bool(modified)
    details.update(rev=sha, dirty=dirty, modified=modified[:50], untracked_count=len(untracked))
    short = sha[:12]
    if not dirty:
        return GuardCheck("git", Status.PASS, f"git {short}, clean", details=details)
    shown = ", ".join(modified[:5]) + (f" and {len(modified) - 5} more" if len(modified) > 5 else "")
    msg = f"git {short}, dirty: {len(modified)} modified file{'s' if len(modified) != 1 else ''} ({shown})"
    if require_clean:
        return GuardCheck("git", Status.FAIL, msg + "; --require-clean refuses a dirty tree",
                          hint="Commit or stash the changes, or drop --require-clean.", details=details)
    return GuardCheck("git", Status.WARN, msg + " (recorded)",
                      hint="Commit before a run you want to cite, or pass --require-clean.", details=details)


# --------------------------------------------------------------------------- composition


def find_checkout(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` that is a clusterbench source checkout."""
    start = Path(start).resolve()
    for folder in (start, *start.parents):
        pyproject = folder / "pyproject.toml"
        if (folder / "clusterbench" / "__init__.py").is_file() and pyproject.is_file():
            try:
                text = pyproject.read_text(errors="replace")
            except OSError:
                continue
            if 'name = "clusterbench"' in text:
                return folder
    return None


def compiled_kernel_sources() -> dict[str, str]:
    """File name -> sha256 of the kernel sources the imported clusterbench will compile."""
    from clusterbench.workloads.cupy.build import kernel_sources

    return kernel_sources()


def make_report(checks: Iterable[GuardCheck], *, force: bool = False, reading: NvmlReading | None = None,
                settings: Mapping[str, Any] | None = None) -> GuardReport:
    """Judge: ``forced`` is set only when ``force`` overrode at least one failed check."""
    checks = tuple(checks)
    failed = any(c.status is Status.FAIL for c in checks)
    return GuardReport(checks=checks, forced=bool(force and failed), reading=reading,
                       settings={**(settings or {}), "force": force})


def run_guards(config_file: ConfigFile | None = None, *, max_util_pct: float = DEFAULT_MAX_UTIL_PCT,
               window_s: float = DEFAULT_WINDOW_S, require_clean: bool = False, force: bool = False,
               reading: NvmlReading | None = None, device_index: int = 0,
               repo_root: Path | None = None, own_pid: int | None = None) -> GuardReport:
    """Run every guard and return the report; the caller refuses when ``not report.ok and not report.forced``.

    ``config_file`` is a loaded ``clusterbench.run.config.ConfigFile`` (validated before any GPU
    call) or None. ``reading`` is for tests; normally NVML is sampled for ``window_s``.
    ``repo_root`` defaults to the checkout holding the config file, else the one holding the
    working directory. Call this before the process creates a CUDA context, or pass
    ``own_pid`` (the default) so the process's own context is not counted as competition.
    Raises EnvironmentFailure (exit 1) when there is no GPU or driver.
    """
    if not 0.0 <= max_util_pct <= 100.0:
        raise InputError(f"--max-util must be between 0 and 100 %, got {max_util_pct:g} %",
                         hint=f"Use e.g. --max-util {DEFAULT_MAX_UTIL_PCT:g} (the default).")
    if reading is None:
        reading = read_nvml(device_index=device_index, window_s=window_s)
    if repo_root is None:
        start = Path(config_file.path).resolve().parent if config_file is not None else Path.cwd()
        repo_root = find_checkout(start) or find_checkout(Path.cwd())
    import clusterbench

    from clusterbench.workloads.cupy.build import hash_kernel_sources, kernel_dir

    package_parent = Path(clusterbench.__file__).resolve().parent.parent
    checkout_kernels = (hash_kernel_sources(Path(repo_root) / kernel_dir().relative_to(package_parent))
                        if repo_root is not None else None)
    checks = [
        check_idle_gpu(reading, max_util_pct, own_pid=os.getpid() if own_pid is None else own_pid),
        check_clocks(reading),
        check_import_location(clusterbench.__file__, repo_root),
        check_kernel_sources(checkout_kernels, compiled_kernel_sources()),
        check_git(repo_root, require_clean),
    ]
    build = getattr(config_file, "build", None)
    if build is not None:
        checks.append(check_external_build(build.artifact, build.sources))
    settings = {"max_util_pct": max_util_pct, "window_s": window_s, "require_clean": require_clean,
                "device_index": device_index,
                "config": None if config_file is None else str(config_file.path),
                "repo_root": None if repo_root is None else str(repo_root)}
    return make_report(checks, force=force, reading=reading, settings=settings)


def require_pass(report: GuardReport) -> None:
    """Raise CheckFailed (exit 3) when a check failed and ``--force`` did not override it."""
    if report.ok or report.forced:
        return
    failed = report.failed
    first = failed[0]
    names = ", ".join(c.name for c in failed)
    msg = (f"guard refused: {first.message}" if len(failed) == 1
           else f"guard refused {len(failed)} checks ({names}): {first.message}")
    hint = (first.hint + " " if first.hint else "") + \
        "Or pass --force to proceed anyway (the override is recorded in env.json)."
    raise CheckFailed(msg, hint=hint)
