"""The guards: idle GPUs and a fresh build, checked before every probe (and by ``clusterbench guard``).

Collect, then judge. ``read_nvml`` is the only NVML I/O and returns a frozen ``NvmlReading`` of
one GPU; the ``check_*`` functions turn readings and build facts into ``GuardCheck`` records;
:func:`judge`, the one judge, turns the readings of 1..N GPUs and the host checks into one
:class:`GuardVerdict` (status, reason code, message, every GPU's part), which the probe stores in
env.json. :func:`run_guards` reads each GPU once and judges; :func:`require_guard_pass` turns a
refusal into exit 3. No GPU or no driver is an ``EnvironmentFailure`` (exit 1).

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
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from clusterbench.errors import CheckFailed, EnvironmentFailure, InputError
from clusterbench.model import units as U

if TYPE_CHECKING:
    from clusterbench.run.config import ConfigFile

# The reference campaign's driver aborted above 5 % GPU utilization (docs/facts.md, "Reading rules").
DEFAULT_MAX_UTIL_PCT = 5.0
DEFAULT_WINDOW_S = 1.0
DEFAULT_INTERVAL_S = 0.05
MAX_WINDOW_S = 60.0

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

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> NvmlReading:
        """The reading back from :meth:`to_json` (its derived max and mean are recomputed)."""
        return cls(index=int(doc["index"]), name=str(doc["name"]), uuid=str(doc["uuid"]),
                   driver_version=str(doc["driver_version"]), cuda_driver_version=doc.get("cuda_driver_version"),
                   util_pct=tuple(float(u) for u in doc["util_pct"]),
                   memory_used_bytes=int(doc["memory_used_bytes"]), memory_total_bytes=int(doc["memory_total_bytes"]),
                   sm_clock_mhz=doc.get("sm_clock_mhz"), max_sm_clock_mhz=doc.get("max_sm_clock_mhz"),
                   throttle_reasons=tuple(doc.get("throttle_reasons") or ()),
                   compute_processes=tuple((int(p["pid"]), str(p["name"]), p.get("used_bytes"))
                                           for p in doc.get("compute_processes") or ()),
                   window_s=float(doc.get("window_s", DEFAULT_WINDOW_S)))


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

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> GuardCheck:
        return cls(str(doc["name"]), Status(doc["status"]), str(doc["message"]), doc.get("hint"),
                   dict(doc.get("details") or {}))


class GpuStatus(str, enum.Enum):
    """One GPU's part in the run the verdict allows."""

    PASS = "pass"  # its checks passed: it runs (unless the run is refused)
    REFUSED = "refused"  # a check failed: without --force it refuses the run; with --force it alone is left out
    FORCED = "forced"  # a check failed and --force ran it anyway: every GPU failed (plain --force on one GPU)

    def __str__(self) -> str:
        return self.value


class VerdictStatus(str, enum.Enum):
    PASS = "pass"  # no check failed
    FORCED = "forced"  # a check failed and --force overrode it
    REFUSED = "refused"  # a check failed and nothing overrode it: exit 3

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class GpuVerdict:
    """One GPU's reading, its own checks (idle, clocks) and its part in the run."""

    reading: NvmlReading
    status: GpuStatus
    checks: tuple[GuardCheck, ...]

    @property
    def index(self) -> int:
        return self.reading.index

    @property
    def failed(self) -> tuple[GuardCheck, ...]:
        return tuple(c for c in self.checks if c.status is Status.FAIL)

    @property
    def reason(self) -> str:
        """``idle``, or the names of its failed checks."""
        return ",".join(c.name for c in self.failed) or "idle"

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "uuid": self.reading.uuid, "status": self.status.value, "reason": self.reason,
                "reading": self.reading.to_json(), "checks": [c.to_json() for c in self.checks]}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> GpuVerdict:
        return cls(NvmlReading.from_json(doc["reading"]), GpuStatus(doc["status"]),
                   tuple(GuardCheck.from_json(c) for c in doc["checks"]))


# GuardVerdict.to_json: env.json's ``guard`` block and ``clusterbench guard --json``. History: 1: first
# version (one verdict for one or many GPUs; replaces the single-GPU report of schema clusterbench.guard/1).
GUARD_VERDICT_VERSION = 1


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    """The one verdict of the guards over 1..N GPUs and the host: ``status``, a ``reason`` code and a
    ``message`` (with the values), every GPU's own verdict, the host-wide checks (build, git, import
    location) and the settings they ran with.

    ``reason`` codes: ``pass``; ``gpu_failed`` / ``host_failed`` (refused: no --force);
    ``forced_dropped`` (--force: the failing GPUs left out, the others run); ``forced_all`` (--force,
    no GPU passed: all run, recorded); ``host_forced`` (--force over a host check only)."""

    status: VerdictStatus
    reason: str
    message: str
    hint: str | None
    gpus: tuple[GpuVerdict, ...]
    host_checks: tuple[GuardCheck, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No check failed (warnings allowed)."""
        return not self.failed

    @property
    def refused(self) -> bool:
        return self.status is VerdictStatus.REFUSED

    @property
    def forced(self) -> bool:
        return self.status is VerdictStatus.FORCED

    @property
    def run_indices(self) -> tuple[int, ...]:
        """The GPUs that run, in the order judged; none when the run is refused."""
        if self.refused:
            return ()
        return tuple(g.index for g in self.gpus if g.status is not GpuStatus.REFUSED)

    @property
    def refused_indices(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus if g.status is GpuStatus.REFUSED)

    @property
    def forced_indices(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus if g.status is GpuStatus.FORCED)

    @property
    def host_forced(self) -> bool:
        """--force overrode a failed host check."""
        return not self.refused and any(c.status is Status.FAIL for c in self.host_checks)

    @property
    def checks(self) -> tuple[GuardCheck, ...]:
        """Every check: each GPU's, then the host's."""
        return tuple(c for g in self.gpus for c in g.checks) + self.host_checks

    @property
    def failed(self) -> tuple[GuardCheck, ...]:
        return tuple(c for c in self.checks if c.status is Status.FAIL)

    @property
    def warnings(self) -> tuple[GuardCheck, ...]:
        return tuple(c for c in self.checks if c.status is Status.WARN)

    @property
    def reading(self) -> NvmlReading | None:
        """The reading of the first GPU that runs (the solo GPU), else of the first GPU judged."""
        run = self.run_indices
        first = next((g for g in self.gpus if g.index in run), self.gpus[0] if self.gpus else None)
        return None if first is None else first.reading

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
        """env.json's ``guard`` block and ``clusterbench guard --json``."""
        return {"version": GUARD_VERDICT_VERSION, "status": self.status.value, "reason": self.reason,
                "message": self.message, "hint": self.hint, "run": list(self.run_indices),
                "refused": list(self.refused_indices), "forced": list(self.forced_indices),
                "host_forced": self.host_forced, "gpus": [g.to_json() for g in self.gpus],
                "host_checks": [c.to_json() for c in self.host_checks], "settings": dict(self.settings)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> GuardVerdict:
        if not isinstance(doc, Mapping) or doc.get("version") != GUARD_VERDICT_VERSION:
            got = doc.get("version") if isinstance(doc, Mapping) else type(doc).__name__
            raise InputError(f"guard verdict: version {got!r}, this clusterbench reads version "
                             f"{GUARD_VERDICT_VERSION}", hint="read it with the clusterbench version that wrote it")
        return cls(VerdictStatus(doc["status"]), str(doc["reason"]), str(doc["message"]), doc.get("hint"),
                   tuple(GpuVerdict.from_json(g) for g in doc["gpus"]),
                   tuple(GuardCheck.from_json(c) for c in doc.get("host_checks") or ()),
                   dict(doc.get("settings") or {}))


# --------------------------------------------------------------------------- NVML I/O


INSTALL_GPU_EXTRAS = "pip install -e '.[gpu]' (nvidia-ml-py, cupy), or pip install nvidia-ml-py"


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
        raise no_bindings(gpus) from None
    return pynvml


def no_bindings(gpus: list[str] | None) -> EnvironmentFailure:
    """The NVML Python bindings are missing: what nvidia-smi says of the GPUs (``gpus``: its lines, None
    without nvidia-smi), and the fix."""
    if gpus:
        return EnvironmentFailure(
            f"the NVML Python bindings are missing (module pynvml, package nvidia-ml-py), though nvidia-smi sees "
            f"{len(gpus)} GPU{'s' if len(gpus) != 1 else ''}",
            hint=f"Install them: {INSTALL_GPU_EXTRAS}.")
    smi = "nvidia-smi is not installed either" if gpus is None else "nvidia-smi lists no GPU"
    return EnvironmentFailure(
        f"the NVML Python bindings are missing (module pynvml, package nvidia-ml-py), and {smi}",
        hint=f"On the GPU machine, install them: {INSTALL_GPU_EXTRAS}. Here, clusterbench analyze TRACE reads an "
             "nsys export, and probe --dry-run shows what a probe would run.")


def no_gpu_failure(what: str = "probe") -> EnvironmentFailure:
    """Why there is no usable GPU, as one failure that names the cause and its fix: the NVML bindings
    missing, the driver missing or not loaded, or NVML seeing no device (exit 1). ``what`` needs the GPU."""
    try:
        import pynvml  # the nvidia-ml-py package
    except ImportError:
        return no_bindings(_nvidia_smi_gpus())
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, a broken libnvidia-ml
        return EnvironmentFailure(
            f"no NVIDIA driver: NVML did not initialise ({_text(exc)}): {what} needs an NVIDIA GPU and its driver",
            hint="Install or load the NVIDIA driver (nvidia-smi must list the GPU); in a container, run it with the "
                 "GPU passed through (docker --gpus all). Here, clusterbench analyze TRACE reads an nsys export.")
    try:
        count = pynvml.nvmlDeviceGetCount()
    except Exception as exc:
        count, why = 0, f" ({_text(exc)})"
    else:
        why = ""
    finally:
        _optional(pynvml.nvmlShutdown)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    limit = f"; CUDA_VISIBLE_DEVICES={visible!r} may hide it" if visible is not None and count else ""
    return EnvironmentFailure(
        f"no NVIDIA GPU: the driver is loaded but NVML sees {count} device{'s' if count != 1 else ''}{why}{limit}: "
        f"{what} needs one",
        hint="Run on the GPU machine (nvidia-smi -L lists its GPUs); here, clusterbench analyze TRACE reads an nsys "
             "export, and probe --dry-run shows what a probe would run.")


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
    _check_window(window_s)
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


def gpu_memory_totals() -> tuple[int, ...]:
    """The memory of every GPU NVML sees, in bytes; () where NVML cannot tell (no GPU, no bindings). Never
    raises: a bound to check configs against, before any GPU work."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return tuple(int(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).total)
                         for i in range(pynvml.nvmlDeviceGetCount()))
        finally:
            _optional(pynvml.nvmlShutdown)
    except Exception:
        return ()


# --------------------------------------------------------------------------- pure checks


def check_idle_gpu(reading: NvmlReading, max_util_pct: float = DEFAULT_MAX_UTIL_PCT,
                   own_pid: int | None = None) -> GuardCheck:
    """Fail when any utilization sample exceeds ``max_util_pct`` or another process holds a context."""
    others = tuple(p for p in reading.compute_processes if p[0] != own_pid)
    peak = reading.max_util_pct
    over = [u for u in reading.util_pct if u > max_util_pct]
    util_text = (f"utilization max {U.pct_of(peak, None)} (mean {U.pct_of(reading.mean_util_pct)}, "
                 f"{len(reading.util_pct)} samples over {reading.window_s:g} s, limit {U.pct_of(max_util_pct, None)})")
    mem_text = f"memory used {U.mib(reading.memory_used_bytes)} of {U.mib(reading.memory_total_bytes)}"
    proc_text = "; ".join(f"pid {pid} {pname} ({U.mib(used)})" for pid, pname, used in others)
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
                          hint="Build it first, or fix [build] artifact in the config.",
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


def _check_window(window_s: float) -> None:
    if not 0 < window_s <= MAX_WINDOW_S:
        raise InputError(f"--sample-window must be in (0, {MAX_WINDOW_S:g}] s, got {window_s:g} s",
                         hint=f"Use e.g. --sample-window {DEFAULT_WINDOW_S:g} (the default).")


def check_settings(max_util_pct: float, window_s: float = DEFAULT_WINDOW_S) -> None:
    """The guards' limits, before any NVML call: InputError (exit 2) outside their ranges."""
    if not 0.0 <= max_util_pct <= 100.0:
        raise InputError(f"--max-util must be between 0 and 100 %, got {U.pct_of(max_util_pct, None)}",
                         hint=f"Use e.g. --max-util {DEFAULT_MAX_UTIL_PCT:g} (the default).")
    _check_window(window_s)


def checkout_for(config_file: ConfigFile | None) -> Path | None:
    """The checkout holding the config file, else the one holding the working directory, else None."""
    start = Path(config_file.path).resolve().parent if config_file is not None else Path.cwd()
    return find_checkout(start) or find_checkout(Path.cwd())


def host_checks(config_file: ConfigFile | None, repo_root: Path | None, *,
                require_clean: bool = False) -> tuple[GuardCheck, ...]:
    """The host-wide checks (I/O: files and git): import location, kernel sources, git, and the config's
    external build, against the checkout ``repo_root`` (None: not run from a checkout)."""
    import clusterbench
    from clusterbench.workloads.cupy.build import hash_kernel_sources, kernel_dir

    package_parent = Path(clusterbench.__file__).resolve().parent.parent
    checkout_kernels = (hash_kernel_sources(Path(repo_root) / kernel_dir().relative_to(package_parent))
                        if repo_root is not None else None)
    checks = [
        check_import_location(clusterbench.__file__, repo_root),
        check_kernel_sources(checkout_kernels, compiled_kernel_sources()),
        check_git(repo_root, require_clean),
    ]
    build = getattr(config_file, "build", None)
    if build is not None:
        checks.append(check_external_build(build.artifact, build.sources))
    return tuple(checks)


def _gpu_list(indices: Sequence[int]) -> str:
    return ", ".join(map(str, indices))


def _failures(gpu_verdicts: Sequence[tuple[NvmlReading, tuple[GuardCheck, ...]]],
              host: Sequence[GuardCheck]) -> list[tuple[str, GuardCheck]]:
    """(name, check) of every failed check: a GPU's named with its index."""
    out = [(f"{c.name} on GPU {r.index}", c) for r, checks in gpu_verdicts for c in checks
           if c.status is Status.FAIL]
    return out + [(c.name, c) for c in host if c.status is Status.FAIL]


def judge(readings: Sequence[NvmlReading], host: Sequence[GuardCheck] = (), *,
          max_util_pct: float = DEFAULT_MAX_UTIL_PCT, force: bool = False, own_pid: int | None = None,
          settings: Mapping[str, Any] | None = None) -> GuardVerdict:
    """The one guard judge (pure): every GPU on its own reading (idle, clocks), the host checks once,
    and the run they allow.

    Without ``force`` any failed check, of any GPU or of the host, refuses the whole run. With
    ``force`` a failing GPU is left out while another passes; when none passes they all run, recorded
    ``forced`` (so one GPU with --force runs as before); a failed host check is overridden, recorded.
    ``own_pid``: this process, whose own compute context is no competition.
    """
    if not readings:
        raise ValueError("judge needs at least one GPU reading")
    per_gpu = [(r, (check_idle_gpu(r, max_util_pct, own_pid=own_pid), check_clocks(r))) for r in readings]
    host = tuple(host)
    failing = [r.index for r, checks in per_gpu if any(c.status is Status.FAIL for c in checks)]
    passing = [r.index for r, checks in per_gpu if r.index not in failing]
    failures = _failures(per_gpu, host)
    settings = {**(settings or {}), "max_util_pct": max_util_pct, "force": force}

    def verdicts(status_of_failing: GpuStatus) -> tuple[GpuVerdict, ...]:
        return tuple(GpuVerdict(r, status_of_failing if r.index in failing else GpuStatus.PASS, checks)
                     for r, checks in per_gpu)

    if not failures:
        return GuardVerdict(VerdictStatus.PASS, "pass", f"every check passed on GPU {_gpu_list(passing)}", None,
                            verdicts(GpuStatus.PASS), host, settings)
    first = failures[0][1]
    names = [n for n, _ in failures]
    details = "; ".join(c.message for _, c in failures)
    if not force:
        more = f" (and {len(names) - 1} more failed check(s): {', '.join(names[1:])})" if len(names) > 1 else ""
        hint = ((first.hint + " ") if first.hint else "") + (
            "Or pass --force to run anyway, recorded in env.json (with several GPUs, --force leaves a failing "
            "GPU out while another passes).")
        return GuardVerdict(VerdictStatus.REFUSED, "gpu_failed" if failing else "host_failed",
                            f"{first.message}{more}", hint, verdicts(GpuStatus.REFUSED), host,
                            settings)
    host_names = [c.name for c in host if c.status is Status.FAIL]
    also = f"; --force also overrides {', '.join(host_names)}" if host_names and failing else ""
    if failing and not passing:
        reason, gpu_status = "forced_all", GpuStatus.FORCED
        message = (f"--force overrides the failed guard of every GPU ({_gpu_list(failing)}): {details}{also}; "
                   "the run is recorded as forced: do not quote its figures")
    elif failing:
        reason, gpu_status = "forced_dropped", GpuStatus.REFUSED
        message = (f"--force leaves out GPU {_gpu_list(failing)} ({details}){also}; the run goes on on GPU "
                   f"{_gpu_list(passing)}")
    else:
        reason, gpu_status = "host_forced", GpuStatus.PASS
        message = (f"--force overrides {', '.join(host_names)} ({details}): the run is recorded as forced: "
                   "do not quote its figures")
    return GuardVerdict(VerdictStatus.FORCED, reason, message,
                        "a probe records the override in env.json (its guard block); fix the failed checks before "
                        "a run you want to cite", verdicts(gpu_status), host, settings)


def run_guards(config_file: ConfigFile | None = None, device_indices: Sequence[int] = (0,), *,
               max_util_pct: float = DEFAULT_MAX_UTIL_PCT, window_s: float = DEFAULT_WINDOW_S,
               require_clean: bool = False, force: bool = False, readings: Sequence[NvmlReading] | None = None,
               repo_root: Path | None = None, own_pid: int | None = None) -> GuardVerdict:
    """Read every GPU of ``device_indices`` once (NVML, ``window_s`` each), run the host checks once, and
    :func:`judge` them; raise with :func:`require_guard_pass`.

    ``config_file`` is a loaded ``clusterbench.run.config.ConfigFile`` (validated before any GPU call)
    or None. ``readings`` replaces the NVML reading (tests). ``repo_root``: the checkout to check
    against (default: :func:`checkout_for`). Call this before the process creates a
    CUDA context, or pass ``own_pid`` (default: this process) so that its own context is no
    competition. Raises InputError (exit 2) for bad limits, EnvironmentFailure (exit 1) without a GPU.
    """
    check_settings(max_util_pct, window_s)
    if readings is None:
        readings = [read_nvml(device_index=i, window_s=window_s) for i in device_indices]
    root = checkout_for(config_file) if repo_root is None else repo_root
    host = host_checks(config_file, root, require_clean=require_clean)
    settings = {"window_s": window_s, "require_clean": require_clean, "gpus": [r.index for r in readings],
                "config": None if config_file is None else str(config_file.path),
                "repo_root": None if root is None else str(root)}
    return judge(readings, host, max_util_pct=max_util_pct, force=force,
                 own_pid=os.getpid() if own_pid is None else own_pid, settings=settings)


def require_guard_pass(verdict: GuardVerdict) -> None:
    """CheckFailed (exit 3), ``guard refused: <why>``, when the verdict refuses the run."""
    if verdict.refused:
        raise CheckFailed(f"guard refused: {verdict.message}", hint=verdict.hint)
