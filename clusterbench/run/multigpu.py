"""Every GPU of one node at once: the planning behind ``clusterbench probe --gpus all|0,2,...``.

docs/scaling.md says what to expect and how to read the rows. Collect, then judge:

- :func:`parse_gpu_selection` reads ``--gpus`` (pure; InputError, exit 2, before any NVML call);
- :func:`read_gpu_topology` is the NVML I/O: per GPU its index, UUID, name, PCI bus id, the CPU
  cores and memory nodes closest to it (``nvmlDeviceGetCpuAffinity`` and
  ``nvmlDeviceGetMemoryAffinity``; sysfs where NVML cannot say; every gap is stated);
- :func:`resolve_selection` picks the GPUs (InputError for an unknown index);
- :func:`plan_pinning` and :func:`plan_gpu_children`: one process per GPU with its own
  ``CUDA_VISIBLE_DEVICES=<uuid>``, pinned with numactl, else ``os.sched_setaffinity`` in the child,
  else not at all, and the :class:`Pinning` record says which;
- :func:`check_gpus` guards every GPU on its own with :func:`clusterbench.run.guards.check_idle_gpu`;
- :func:`run_gpu_children` starts the per-GPU processes at once and collects their result records;
- :func:`scaling_summary`, :func:`gpu_row` and :func:`aggregate_row` turn the figures into
  probes.csv rows keyed by (label, gpu), and :func:`multi_gpu_env` into env.json's ``multi_gpu``.

Progress goes to an ``on_event`` callback. Nothing here prints, exits, or imports typer, rich or
CuPy; ``pynvml`` is imported only inside :func:`read_gpu_topology`.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from clusterbench.errors import CheckFailed, EnvironmentFailure, InputError, WorkloadProtocolError
from clusterbench.run.guards import GuardCheck, NvmlReading, Status, check_clocks, check_idle_gpu
from clusterbench.model.records import SustainedFps, WorkloadResult

# The multi_gpu block of env.json. History: 1: first version (selection, gpus with affinity and
# pinning, per-GPU guard verdicts, the solo definition, per config the scaling summary).
MULTI_GPU_ENV_VERSION = 1

ROW_KEY_SEPARATOR = "@"  # not allowed in a config label (config.py), so a row key never collides
AGGREGATE_GPU = "all"  # the gpu column of the aggregate row
SOLO_DEFINITION = (
    "solo: the first GPU the guards let run, in the order --gpus names them (all: the lowest index), running the same config alone, with the same "
    "pinning and repeats, immediately before the concurrent run; scaling efficiency = summed concurrent "
    "sustained FPS / (N x the solo sustained FPS)")
_NVML_WORD_BITS = 64  # pynvml returns affinity masks as arrays of c_ulonglong
NVML_AFFINITY_SCOPE_NODE = 0  # nvmlAffinityScope_t: NUMA node (nvml.h)
DEFAULT_SYSFS_PCI = Path("/sys/bus/pci/devices")


# --------------------------------------------------------------------------- --gpus


@dataclass(frozen=True, slots=True)
class GpuSelection:
    """What ``--gpus`` asked for: every GPU, or these NVML indices in this order."""

    text: str
    all: bool
    indices: tuple[int, ...] = ()


def parse_gpu_selection(text: str) -> GpuSelection:
    """``all`` or comma-separated NVML indices (``0,2``). InputError (exit 2): empty, not an
    integer, negative, duplicated."""
    hint = "Use --gpus all, or NVML indices as nvidia-smi -L lists them: --gpus 0,2"
    raw = (text or "").strip()
    if not raw:
        raise InputError("--gpus is empty: name the GPUs to run on", hint=hint)
    if raw.lower() == "all":
        return GpuSelection(text=raw, all=True)
    parts = [p.strip() for p in raw.split(",")]
    if any(not p for p in parts):
        raise InputError(f"--gpus {raw!r} has an empty entry", hint=hint)
    indices: list[int] = []
    for p in parts:
        if not p.isdigit():
            what = "negative" if p.startswith("-") and p[1:].isdigit() else "not a GPU index"
            raise InputError(f"--gpus {raw!r}: {p!r} is {what} (GPU indices are integers from 0)", hint=hint)
        indices.append(int(p))
    dups = sorted({i for i in indices if indices.count(i) > 1})
    if dups:
        raise InputError(f"--gpus {raw!r} names GPU {', '.join(map(str, dups))} twice: each GPU runs one process",
                         hint=hint)
    return GpuSelection(text=raw, all=False, indices=tuple(indices))


# --------------------------------------------------------------------------- topology


class AffinitySource(str, enum.Enum):
    NVML = "nvml"
    SYSFS = "sysfs"
    NONE = "none"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One GPU as NVML enumerates it (PCI bus order), with the CPUs and memory nodes closest to it.

    ``cpus``/``mem_nodes`` are None when they could not be read; ``notes`` say why."""

    index: int
    uuid: str
    name: str
    pci_bus_id: str | None = None
    cpus: tuple[int, ...] | None = None
    mem_nodes: tuple[int, ...] | None = None
    cpu_source: AffinitySource = AffinitySource.NONE
    mem_source: AffinitySource = AffinitySource.NONE
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.index < 0:
            raise ValueError(f"GPU index must be >= 0, got {self.index}")
        if not self.uuid:
            raise ValueError(f"GPU {self.index} needs a UUID")

    @property
    def key(self) -> str:
        """The ``gpu`` column: index and UUID."""
        return f"{self.index}:{self.uuid}"

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "uuid": self.uuid, "name": self.name, "pci_bus_id": self.pci_bus_id,
                "cpus": None if self.cpus is None else format_cpulist(self.cpus),
                "mem_nodes": None if self.mem_nodes is None else list(self.mem_nodes),
                "cpu_source": self.cpu_source.value, "mem_source": self.mem_source.value,
                "notes": list(self.notes)}


def decode_mask(words: Iterable[int], word_bits: int = _NVML_WORD_BITS) -> tuple[int, ...]:
    """The set bits of an NVML affinity mask (word 0 holds bits 0..63), in order."""
    out: list[int] = []
    for w, word in enumerate(words):
        word = int(word)
        for b in range(word_bits):
            if word >> b & 1:
                out.append(w * word_bits + b)
    return tuple(out)


def parse_cpulist(text: str) -> tuple[int, ...]:
    """A Linux cpulist (``0-3,8,10-11``) as sorted ids; ValueError when malformed."""
    out: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = (int(x) for x in part.split("-", 1))
            if hi < lo:
                raise ValueError(f"bad cpulist range {part!r}")
            out.update(range(lo, hi + 1))
        else:
            out.add(int(part))
    return tuple(sorted(out))


def format_cpulist(ids: Iterable[int]) -> str:
    """Sorted ids as a compact cpulist: (0, 1, 2, 3, 8) -> ``0-3,8``."""
    s = sorted(set(ids))
    parts: list[str] = []
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        parts.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(parts)


def sysfs_pci_path(pci_bus_id: str, root: Path = DEFAULT_SYSFS_PCI) -> Path:
    """NVML's ``00000000:17:00.0`` (8-digit domain) as sysfs's ``0000:17:00.0``."""
    domain, _, rest = pci_bus_id.strip().lower().partition(":")
    return Path(root) / f"{domain[-4:].rjust(4, '0')}:{rest}"


def read_sysfs_affinity(pci_bus_id: str, root: Path = DEFAULT_SYSFS_PCI) -> tuple[tuple[int, ...] | None,
                                                                                 tuple[int, ...] | None]:
    """(CPUs, memory nodes) of a PCI device from sysfs ``local_cpulist``/``numa_node``; None where absent
    (``numa_node`` -1 means the platform does not say)."""
    dev = sysfs_pci_path(pci_bus_id, root)
    cpus: tuple[int, ...] | None = None
    nodes: tuple[int, ...] | None = None
    try:
        cpus = parse_cpulist((dev / "local_cpulist").read_text()) or None
    except (OSError, ValueError):
        cpus = None
    try:
        node = int((dev / "numa_node").read_text().strip())
        nodes = (node,) if node >= 0 else None
    except (OSError, ValueError):
        nodes = None
    return cpus, nodes


def _text(x: Any) -> str:
    return x.decode(errors="replace") if isinstance(x, bytes) else str(x)


def read_gpu_topology(pynvml: Any = None, cpu_count: int | None = None,
                      sysfs_root: Path = DEFAULT_SYSFS_PCI) -> tuple[GpuInfo, ...]:
    """Every GPU NVML sees, in NVML (PCI bus) order, with its CPU and memory-node affinity.

    ``pynvml`` is the module (imported here when None; tests pass a stand-in). CPU affinity comes
    from ``nvmlDeviceGetCpuAffinity``, memory affinity from ``nvmlDeviceGetMemoryAffinity`` (scope
    NUMA node; missing from older bindings and drivers); either falls back to sysfs, and a GPU whose
    affinity neither gives says so in ``notes``. EnvironmentFailure (exit 1) without NVML or a GPU.
    """
    from clusterbench.run import guards

    if pynvml is None:
        pynvml = guards._import_pynvml()
    guards._nvml_init(pynvml)
    ncpu = cpu_count or os.cpu_count() or 1
    cpu_words = max(1, -(-ncpu // _NVML_WORD_BITS))
    node_words = 1  # 64 NUMA nodes
    gpus: list[GpuInfo] = []
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count < 1:
            raise guards._no_gpu("NVML sees 0 devices")
        for i in range(count):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = _text(pynvml.nvmlDeviceGetName(h))
            uuid = _text(pynvml.nvmlDeviceGetUUID(h))
            pci = guards._optional(pynvml.nvmlDeviceGetPciInfo, h)
            bus = _text(getattr(pci, "busId", "")) if pci is not None else ""
            bus_id = bus or None
            notes: list[str] = []
            cpus: tuple[int, ...] | None = None
            cpu_src = AffinitySource.NONE
            try:
                cpus = decode_mask(pynvml.nvmlDeviceGetCpuAffinity(h, cpu_words)) or None
                cpu_src = AffinitySource.NVML if cpus else AffinitySource.NONE
                if cpus is None:
                    notes.append("NVML returned an empty CPU affinity mask")
            except Exception as exc:  # NVMLError_NotSupported, a missing symbol
                notes.append(f"nvmlDeviceGetCpuAffinity failed ({_text(exc) or type(exc).__name__})")
            nodes: tuple[int, ...] | None = None
            mem_src = AffinitySource.NONE
            fn = getattr(pynvml, "nvmlDeviceGetMemoryAffinity", None)
            if fn is None:
                notes.append("these NVML bindings lack nvmlDeviceGetMemoryAffinity")
            else:
                try:
                    scope = getattr(pynvml, "NVML_AFFINITY_SCOPE_NODE", NVML_AFFINITY_SCOPE_NODE)
                    nodes = decode_mask(fn(h, node_words, scope)) or None
                    mem_src = AffinitySource.NVML if nodes else AffinitySource.NONE
                    if nodes is None:
                        notes.append("NVML returned an empty memory affinity mask")
                except Exception as exc:
                    notes.append(f"nvmlDeviceGetMemoryAffinity failed ({_text(exc) or type(exc).__name__})")
            if (cpus is None or nodes is None) and bus_id:
                s_cpus, s_nodes = read_sysfs_affinity(bus_id, sysfs_root)
                if cpus is None and s_cpus:
                    cpus, cpu_src = s_cpus, AffinitySource.SYSFS
                if nodes is None and s_nodes:
                    nodes, mem_src = s_nodes, AffinitySource.SYSFS
            if cpus is None:
                notes.append("CPU affinity unknown: the child is not pinned to cores")
            if nodes is None:
                notes.append("memory node unknown: host memory is not bound to a node")
            gpus.append(GpuInfo(index=i, uuid=uuid, name=name, pci_bus_id=bus_id, cpus=cpus, mem_nodes=nodes,
                                cpu_source=cpu_src, mem_source=mem_src, notes=tuple(notes)))
    except pynvml.NVMLError as exc:
        raise EnvironmentFailure(f"NVML query failed while listing GPUs: {_text(exc)}",
                                 hint="Check the driver with nvidia-smi.") from None
    finally:
        guards._optional(pynvml.nvmlShutdown)
    return tuple(gpus)


def resolve_selection(selection: GpuSelection, gpus: Sequence[GpuInfo]) -> tuple[GpuInfo, ...]:
    """The selected GPUs, in the order asked. InputError (exit 2) for an index NVML does not list."""
    by_index = {g.index: g for g in gpus}
    if selection.all:
        return tuple(sorted(gpus, key=lambda g: g.index))
    unknown = [i for i in selection.indices if i not in by_index]
    if unknown:
        have = ", ".join(str(i) for i in sorted(by_index)) or "none"
        raise InputError(
            f"--gpus {selection.text!r}: GPU {', '.join(map(str, unknown))} does not exist; NVML lists {have}",
            hint="Pick indices from nvidia-smi -L, or use --gpus all.")
    return tuple(by_index[i] for i in selection.indices)


def visible_gpus(gpus: Sequence[GpuInfo], cuda_visible_devices: str | None) -> tuple[GpuInfo, ...]:
    """The GPUs this process may use: all when ``CUDA_VISIBLE_DEVICES`` is unset, else those it names.

    NVML ignores ``CUDA_VISIBLE_DEVICES``, so inside a Slurm allocation (which sets it) ``--gpus all``
    must mean the allocated GPUs, not the node's. Entries are UUIDs (``GPU-...``, a unique prefix
    is enough) or integers, read as NVML indices (PCI bus order: what Slurm's integers mean).
    EnvironmentFailure (exit 1) when it names no GPU, a GPU NVML does not list, or a MIG device."""
    if cuda_visible_devices is None:
        return tuple(gpus)
    hint = "Unset CUDA_VISIBLE_DEVICES, or name GPUs by UUID (nvidia-smi -L)"
    entries = [e.strip() for e in cuda_visible_devices.split(",") if e.strip()]
    if not entries:
        raise EnvironmentFailure("CUDA_VISIBLE_DEVICES is empty: no GPU is visible to this process", hint=hint)
    out: list[GpuInfo] = []
    for e in entries:
        if e.upper().startswith("MIG-"):
            raise EnvironmentFailure(f"CUDA_VISIBLE_DEVICES names a MIG instance ({e}): --gpus needs whole GPUs",
                                     hint=hint)
        if e.isdigit():
            hits = [g for g in gpus if g.index == int(e)]
        else:
            hits = [g for g in gpus if g.uuid.lower().startswith(e.lower())]
        if len(hits) != 1:
            what = "matches no GPU" if not hits else f"matches {len(hits)} GPUs"
            raise EnvironmentFailure(f"CUDA_VISIBLE_DEVICES entry {e!r} {what} that NVML lists "
                                     f"({', '.join(g.key for g in gpus)})", hint=hint)
        if hits[0] not in out:
            out.append(hits[0])
    return tuple(out)


# --------------------------------------------------------------------------- pinning


class PinMethod(str, enum.Enum):
    NUMACTL = "numactl"  # numactl --physcpubind=<cpus> [--membind=<nodes>] <child>
    SCHED_SETAFFINITY = "sched_setaffinity"  # os.sched_setaffinity in the child before exec; memory not bound
    NONE = "none"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class PinTools:
    """What this machine offers to pin a child: numactl's path, sched_setaffinity, the CPUs this process
    may use (its cpuset: a Slurm allocation or a container narrows it; None when unknown)."""

    numactl: str | None
    can_setaffinity: bool
    allowed_cpus: tuple[int, ...] | None


def find_pin_tools() -> PinTools:
    """The pinning tools of this machine (I/O: PATH, the process's affinity)."""
    allowed: tuple[int, ...] | None
    try:
        allowed = tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        allowed = None
    return PinTools(numactl=shutil.which("numactl"), can_setaffinity=hasattr(os, "sched_setaffinity"),
                    allowed_cpus=allowed)


@dataclass(frozen=True, slots=True)
class Pinning:
    """How one GPU's child is pinned. ``reason`` is a code; ``message`` says it in words.

    reasons: ``numactl`` (cores and memory node), ``numactl_cpus_only`` (memory node unknown),
    ``sched_setaffinity`` (cores only: no numactl), ``no_cpu_affinity`` (NVML and sysfs gave none),
    ``outside_allowed`` (the GPU's cores are all outside this process's cpuset), ``no_tool``."""

    method: PinMethod
    reason: str
    message: str
    cpus: tuple[int, ...] = ()
    mem_nodes: tuple[int, ...] = ()
    argv_prefix: tuple[str, ...] = ()

    @property
    def applied(self) -> bool:
        return self.method is not PinMethod.NONE

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method.value, "reason": self.reason, "message": self.message,
                "cpus": format_cpulist(self.cpus) if self.cpus else None, "mem_nodes": list(self.mem_nodes),
                "argv_prefix": list(self.argv_prefix)}


def plan_pinning(gpu: GpuInfo, tools: PinTools) -> Pinning:
    """Pin a GPU's child to the cores (and memory node) closest to the GPU, with what this machine has (pure)."""
    who = f"GPU {gpu.index}"
    if not gpu.cpus:
        why = "; ".join(gpu.notes) or "no CPU affinity reported"
        return Pinning(PinMethod.NONE, "no_cpu_affinity", f"{who}: not pinned: {why}")
    cpus = tuple(sorted(gpu.cpus))
    if tools.allowed_cpus is not None:
        inside = tuple(c for c in cpus if c in set(tools.allowed_cpus))
        if not inside:
            return Pinning(PinMethod.NONE, "outside_allowed",
                           f"{who}: not pinned: its nearest CPUs ({format_cpulist(cpus)}) are all outside this "
                           f"process's allowed CPUs ({format_cpulist(tools.allowed_cpus)}); ask the scheduler "
                           "for cores on the GPU's socket (Slurm: --gpu-bind=closest or --cpus-per-gpu)")
        cpus = inside
    cpulist = format_cpulist(cpus)
    nodes = tuple(sorted(gpu.mem_nodes)) if gpu.mem_nodes else ()
    if tools.numactl:
        prefix = [tools.numactl, f"--physcpubind={cpulist}"]
        if nodes:
            prefix.append(f"--membind={','.join(map(str, nodes))}")
            return Pinning(PinMethod.NUMACTL, "numactl",
                           f"{who}: numactl, CPUs {cpulist}, memory node {','.join(map(str, nodes))}",
                           cpus, nodes, tuple(prefix))
        return Pinning(PinMethod.NUMACTL, "numactl_cpus_only",
                       f"{who}: numactl, CPUs {cpulist}; memory node unknown, so host memory is not bound",
                       cpus, (), tuple(prefix))
    if tools.can_setaffinity:
        return Pinning(PinMethod.SCHED_SETAFFINITY, "sched_setaffinity",
                       f"{who}: CPUs {cpulist} through sched_setaffinity; memory node not bound (numactl not "
                       "found): host allocations follow first touch on the pinned cores' node",
                       cpus, ())
    return Pinning(PinMethod.NONE, "no_tool", f"{who}: not pinned: neither numactl nor sched_setaffinity exists")


# --------------------------------------------------------------------------- children


@dataclass(frozen=True, slots=True)
class GpuChild:
    """One GPU's process: its full argv (pinning prefix included), environment, result and log files."""

    gpu: GpuInfo
    pinning: Pinning
    argv: tuple[str, ...]
    env: Mapping[str, str]
    result_path: Path
    log_path: Path
    cwd: str | None = None


def gpu_env(gpu: GpuInfo, base: Mapping[str, str]) -> dict[str, str]:
    """``base`` with only this GPU visible to CUDA, named by UUID: NVML numbers GPUs in PCI bus order,
    CUDA by default fastest first, so an index could name another GPU; a UUID cannot."""
    env = dict(base)
    env["CUDA_VISIBLE_DEVICES"] = gpu.uuid
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return env


def plan_gpu_children(gpus: Sequence[GpuInfo], tools: PinTools,
                      command: Callable[[GpuInfo, Path], Sequence[str]], out_dir: Path, stem: str,
                      base_env: Mapping[str, str], cwd: str | None = None) -> tuple[GpuChild, ...]:
    """One child per GPU (pure). ``command(gpu, result_path)`` gives the workload's argv, e.g.
    ``lambda g, r: workload.argv(label, params, r, "sustained", repeat)``; files are
    ``<out_dir>/<stem>.gpu<index>.json`` and ``.log``."""
    children = []
    for g in gpus:
        pin = plan_pinning(g, tools)
        result = Path(out_dir) / f"{stem}.gpu{g.index}.json"
        argv = (*pin.argv_prefix, *map(str, command(g, result.resolve())))
        children.append(GpuChild(g, pin, argv, gpu_env(g, base_env), result, Path(out_dir) / f"{stem}.gpu{g.index}.log",
                                 cwd))
    return tuple(children)


@dataclass(frozen=True, slots=True)
class GpuChildEvent:
    """Progress of a round: kind ``started`` or ``finished`` (with the exit status)."""

    kind: str
    gpu: int
    returncode: int | None = None
    phase: str = ""  # "solo" or "concurrent" in measure_sustained_gpus
    round: int = 0


@dataclass(frozen=True, slots=True)
class GpuOutcome:
    """What one GPU's child did. ``started_s``/``ended_s``: seconds since the round began."""

    gpu: GpuInfo
    pinning: Pinning
    returncode: int | None
    result: WorkloadResult | None
    error: str | None
    log_path: Path
    started_s: float
    ended_s: float

    @property
    def ok(self) -> bool:
        return self.error is None and self.result is not None


def overlap_s(outcomes: Sequence[GpuOutcome]) -> float:
    """How long every child ran at the same time: earliest end minus latest start (<= 0: they did not overlap)."""
    if not outcomes:
        return 0.0
    return min(o.ended_s for o in outcomes) - max(o.started_s for o in outcomes)


def _log_tail(path: Path, lines: int = 10) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    tail = [ln for ln in text.splitlines() if ln.strip()][-lines:]
    return "\n".join(tail) if tail else "(empty log)"


def _stop(procs: Iterable[subprocess.Popen]) -> None:
    live = [p for p in procs if p.poll() is None]
    for p in live:
        p.terminate()
    deadline = time.monotonic() + 10
    for p in live:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_gpu_children(children: Sequence[GpuChild], *, timeout_s: float | None = None,
                     on_event: Callable[[GpuChildEvent], None] | None = None) -> tuple[GpuOutcome, ...]:
    """Start every child at once (one process per GPU), wait for all, read each result record.

    A child that fails, times out or writes no valid result gives an outcome with ``error`` (its
    log's last lines); the others still count. Ctrl-C stops every child before it goes on, so no
    orphan keeps a GPU busy. Pinning with sched_setaffinity happens in the child before exec.
    """
    emit = on_event or (lambda e: None)
    t0 = time.monotonic()
    procs: list[subprocess.Popen | None] = []
    starts: list[float] = []
    start_errors: list[str | None] = []
    handles = []
    try:
        for c in children:
            c.result_path.unlink(missing_ok=True)
            fh, p, err = _start_child(c, "GPU")
            handles.append(fh)
            procs.append(p)
            start_errors.append(err)
            starts.append(time.monotonic() - t0)
            emit(GpuChildEvent("started", c.gpu.index))
        ends: list[float] = [0.0] * len(children)
        rcs: list[int | None] = [None] * len(children)
        timed_out = [False] * len(children)
        deadline = None if timeout_s is None else t0 + timeout_s
        pending = {i for i, p in enumerate(procs) if p is not None}
        for i, p in enumerate(procs):
            if p is None:
                ends[i] = starts[i]
        while pending:
            for i in sorted(pending):
                rc = procs[i].poll()  # type: ignore[union-attr]
                if rc is not None:
                    rcs[i] = rc
                    ends[i] = time.monotonic() - t0
                    pending.discard(i)
                    emit(GpuChildEvent("finished", children[i].gpu.index, rc))
            if pending and deadline is not None and time.monotonic() > deadline:
                _stop(procs[i] for i in pending)  # type: ignore[misc]
                for i in pending:
                    timed_out[i] = True
                    rcs[i] = procs[i].returncode  # type: ignore[union-attr]
                    ends[i] = time.monotonic() - t0
                    emit(GpuChildEvent("finished", children[i].gpu.index, rcs[i]))
                pending.clear()
            if pending:
                time.sleep(0.01)
    except KeyboardInterrupt:
        _stop(p for p in procs if p is not None)
        raise
    finally:
        for fh in handles:
            fh.close()
    outcomes = []
    for i, c in enumerate(children):
        error = start_errors[i]
        result: WorkloadResult | None = None
        if error is None and timed_out[i]:
            error = f"GPU {c.gpu.index}: still running after {timeout_s:g} s: stopped"
        elif error is None and rcs[i] != 0:
            error = f"GPU {c.gpu.index}: the child exited with status {rcs[i]}; last lines of {c.log_path.name}:\n" \
                    f"{_log_tail(c.log_path)}"
        elif error is None:
            try:
                result = WorkloadResult.from_json(json.loads(c.result_path.read_text(encoding="utf-8")))
            except (OSError, ValueError) as exc:
                error = f"GPU {c.gpu.index}: no readable result record {c.result_path.name} ({exc})"
            except WorkloadProtocolError as exc:
                error = f"GPU {c.gpu.index}: {exc}"
        outcomes.append(GpuOutcome(c.gpu, c.pinning, rcs[i], result, error, c.log_path, starts[i], ends[i]))
    return tuple(outcomes)


def require_all_ok(outcomes: Sequence[GpuOutcome], what: str) -> None:
    """EnvironmentFailure (exit 1) naming every GPU whose child failed."""
    bad = [o for o in outcomes if not o.ok]
    if bad:
        raise EnvironmentFailure(f"{what}: {len(bad)} of {len(outcomes)} GPU processes failed:\n" +
                                 "\n".join(o.error or "" for o in bad),
                                 hint="read the logs: " + ", ".join(str(o.log_path) for o in bad))


def sustained_by_gpu(rounds: Sequence[Sequence[GpuOutcome]],
                     input_bytes_per_frame: int | None = None) -> dict[int, SustainedFps]:
    """Per GPU, the FPS of every timed pass over one or more rounds (a ``sustained`` child reports R
    passes in one round; a pass-only workload runs R rounds), summarised (pure)."""
    fps: dict[int, list[float]] = {}
    for outcomes in rounds:
        for o in outcomes:
            if o.result is not None:
                fps.setdefault(o.gpu.index, []).extend(o.result.fps)
    return {i: SustainedFps.from_fps(v, input_bytes_per_frame) for i, v in sorted(fps.items())}


def workload_command(workload: Any, label: str, params: Any, repeat: int
                     ) -> tuple[Callable[[GpuInfo, Path], Sequence[str]], int]:
    """(command, rounds) for :func:`measure_sustained_gpus` from a workload of
    :mod:`clusterbench.workloads` (its ``argv`` and ``runs_sustained``): one ``sustained`` process of
    ``repeat`` passes per GPU, or ``repeat`` rounds of one ``pass`` each for a program without ``{mode}``."""
    if workload.runs_sustained:
        return (lambda g, result: workload.argv(label, params, result, "sustained", repeat)), 1
    return (lambda g, result: workload.argv(label, params, result, "pass")), repeat


@dataclass(frozen=True, slots=True)
class MultiGpuSustained:
    """One config's sustained FPS on the solo GPU alone, then on every selected GPU at once."""

    solo_gpu: int
    solo: SustainedFps
    concurrent: Mapping[int, SustainedFps]
    summary: ScalingSummary
    overlap_s: float  # the shortest time all children of a concurrent round ran together
    solo_outcomes: tuple[tuple[GpuOutcome, ...], ...] = ()
    concurrent_outcomes: tuple[tuple[GpuOutcome, ...], ...] = ()


def measure_sustained_gpus(gpus: Sequence[GpuInfo], tools: PinTools,
                           command: Callable[[GpuInfo, Path], Sequence[str]], out_dir: Path, stem: str,
                           base_env: Mapping[str, str], *, rounds: int = 1,
                           input_bytes_per_frame: int | None = None, cwd: str | None = None,
                           timeout_s: float | None = None,
                           on_event: Callable[[GpuChildEvent], None] | None = None) -> MultiGpuSustained:
    """The solo figure, then the concurrent one (SOLO_DEFINITION), with the same command and pinning.

    ``rounds``: 1 for a workload that runs R timed passes in one process (``sustained`` mode), R for
    one that runs one pass per process. Any failed child: EnvironmentFailure (exit 1) naming it,
    since a sum with a missing GPU says nothing about the node. Works for N = 1.
    """
    if not gpus:
        raise ValueError("measure_sustained_gpus needs at least one GPU")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    emit = on_event or (lambda e: None)
    solo_gpu = gpus[0]

    def run(phase: str, selected: Sequence[GpuInfo]) -> tuple[tuple[GpuOutcome, ...], ...]:
        out = []
        for k in range(rounds):
            name = f"{stem}.{phase}" + (f".r{k}" if rounds > 1 else "")
            children = plan_gpu_children(selected, tools, command, out_dir, name, base_env, cwd)
            outcomes = run_gpu_children(children, timeout_s=timeout_s, on_event=lambda e, _k=k: emit(
                GpuChildEvent(e.kind, e.gpu, e.returncode, phase, _k)))
            require_all_ok(outcomes, f"the {phase} sustained-FPS run of {stem!r}")
            out.append(outcomes)
        return tuple(out)

    solo_rounds = run("solo", [solo_gpu])
    conc_rounds = run("concurrent", gpus)
    solo = sustained_by_gpu(solo_rounds, input_bytes_per_frame)[solo_gpu.index]
    concurrent = sustained_by_gpu(conc_rounds, input_bytes_per_frame)
    return MultiGpuSustained(solo_gpu.index, solo, concurrent, scaling_summary(solo_gpu.index, solo, concurrent),
                             min(overlap_s(r) for r in conc_rounds), solo_rounds, conc_rounds)


@dataclass(frozen=True, slots=True)
class BackgroundOutcome:
    """A GPU that streamed while another was traced. ``covered``: it was still running when the
    traced run ended, so it loaded the node for the whole trace."""

    gpu: GpuInfo
    pinning: Pinning
    returncode: int | None
    covered: bool
    log_path: Path


def _start_child(c: GpuChild, what: str) -> tuple[Any, subprocess.Popen | None, str | None]:
    """Open the child's log (a header naming ``what`` runs, its GPU, pinning and command line) and start
    it, pinned with sched_setaffinity before exec where that is the method. Returns (the open log,
    the process or None, why it did not start or None); the caller closes the log."""
    c.log_path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(c.log_path, "w")
    fh.write(f"# {what} {c.gpu.key}; pinning: {c.pinning.message}\n$ " + " ".join(c.argv) + "\n")
    fh.flush()
    preexec = None
    if c.pinning.method is PinMethod.SCHED_SETAFFINITY:
        preexec = functools.partial(os.sched_setaffinity, 0, set(c.pinning.cpus))
    try:
        return fh, subprocess.Popen(list(c.argv), stdout=fh, stderr=subprocess.STDOUT, env=dict(c.env), cwd=c.cwd,
                                    preexec_fn=preexec), None
    except (OSError, subprocess.SubprocessError) as exc:  # the latter: sched_setaffinity failed in the child
        return fh, None, f"cannot start {c.argv[0]}: {exc}"


def stream_in_background(children: Sequence[GpuChild], foreground: Callable[[], Any], *,
                         settle_s: float = 1.0) -> tuple[Any, tuple[BackgroundOutcome, ...]]:
    """The tracing variant: start ``children`` (the other GPUs, in sustained mode with enough repeats
    to outlast the trace), let them settle ``settle_s``, call ``foreground()`` (trace the one GPU),
    then stop them. Returns what ``foreground`` returned and whether each child covered it.

    A child that ended before the trace did is ``covered=False``: give it more repeats. The
    children are always stopped (Ctrl-C and errors included), so none keeps a GPU busy."""
    procs: list[subprocess.Popen | None] = []
    handles = []
    try:
        for c in children:
            fh, p, err = _start_child(c, "background GPU")
            handles.append(fh)
            procs.append(p)
            if err is not None:
                fh.write(err + "\n")
        time.sleep(settle_s)
        value = foreground()
        alive = [p is not None and p.poll() is None for p in procs]
    finally:
        _stop(p for p in procs if p is not None)
        for fh in handles:
            fh.close()
    return value, tuple(BackgroundOutcome(c.gpu, c.pinning, None if p is None else p.returncode, a, c.log_path)
                        for c, p, a in zip(children, procs, alive))


@contextlib.contextmanager
def only_gpu_visible(gpu: GpuInfo) -> Iterator[dict[str, str]]:
    """Within the block, child processes started from this one see only ``gpu`` (by UUID), as a
    tracer's child needs when it takes its environment from ``os.environ``. Safe only in a process
    that has no CUDA context of its own (the probe never imports CuPy). Restores the old values."""
    keys = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
    old = {k: os.environ.get(k) for k in keys}
    os.environ.update(gpu_env(gpu, {}))
    try:
        yield {k: os.environ[k] for k in keys}
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# --------------------------------------------------------------------------- guards


class GpuGuardStatus(str, enum.Enum):
    PASS = "pass"  # its checks passed: it runs (unless the run is refused)
    REFUSED = "refused"  # a check failed: without --force it refuses the run; with --force it alone is left out
    FORCED = "forced"  # a check failed and --force ran it anyway: every GPU failed, as plain --force on one GPU

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class GpuGuard:
    """One GPU's verdict. ``reason``: ``idle`` or the failed check names (``idle_gpu``)."""

    index: int
    uuid: str
    status: GpuGuardStatus
    reason: str
    checks: tuple[GuardCheck, ...]

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "uuid": self.uuid, "status": self.status.value, "reason": self.reason,
                "checks": [c.to_json() for c in self.checks]}


@dataclass(frozen=True, slots=True)
class MultiGpuGuard:
    """Every GPU's verdict and the host-wide checks (fresh build, git), judged together.

    ``reason`` codes: ``pass``; ``gpu_failed`` / ``host_failed`` (refused, no --force);
    ``forced_dropped`` (--force: the failing GPUs left out, the others run); ``forced_all``
    (--force, no GPU passed: all run, recorded); ``host_forced`` (--force over a host check)."""

    gpus: tuple[GpuGuard, ...]
    host_checks: tuple[GuardCheck, ...]
    force: bool
    run_refused: bool
    reason: str
    message: str
    host_forced: bool = False

    @property
    def run_indices(self) -> tuple[int, ...]:
        if self.run_refused:
            return ()
        return tuple(g.index for g in self.gpus if g.status is not GpuGuardStatus.REFUSED)

    @property
    def refused(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus if g.status is GpuGuardStatus.REFUSED)

    @property
    def forced(self) -> tuple[int, ...]:
        return tuple(g.index for g in self.gpus if g.status is GpuGuardStatus.FORCED)

    def to_json(self) -> dict[str, Any]:
        return {"run_refused": self.run_refused, "reason": self.reason, "message": self.message,
                "force": self.force, "host_forced": self.host_forced, "run": list(self.run_indices),
                "refused": list(self.refused), "forced": list(self.forced),
                "gpus": [g.to_json() for g in self.gpus],
                "host_checks": [c.to_json() for c in self.host_checks]}


PER_GPU_CHECKS = ("idle_gpu", "clocks")  # the checks guards.run_guards makes on its one GPU's reading


def host_checks_of(checks: Iterable[GuardCheck]) -> tuple[GuardCheck, ...]:
    """The host-wide checks of a :func:`clusterbench.run.guards.run_guards` report (build, git, import
    location), without the ones about its one GPU."""
    return tuple(c for c in checks if c.name not in PER_GPU_CHECKS)


def check_gpus(readings: Sequence[NvmlReading], host_checks: Sequence[GuardCheck] = (), *,
               max_util_pct: float, force: bool, own_pid: int | None = None) -> MultiGpuGuard:
    """Guard every GPU on its own (idle, clocks) and judge the run (pure).

    Without ``force`` one failing GPU, or a failing host check, refuses the whole run. With
    ``force`` a failing GPU refuses only itself while another GPU passes; when none passes they all
    run and are recorded ``forced`` (so ``--gpus 0 --force`` does what plain ``--force`` does).
    """
    if not readings:
        raise ValueError("check_gpus needs at least one GPU reading")
    verdicts: list[tuple[NvmlReading, tuple[GuardCheck, ...], bool]] = []
    for r in readings:
        checks = (check_idle_gpu(r, max_util_pct, own_pid=own_pid), check_clocks(r))
        verdicts.append((r, checks, any(c.status is Status.FAIL for c in checks)))
    host = tuple(host_checks)
    host_failed = [c for c in host if c.status is Status.FAIL]
    failing = [r.index for r, _, bad in verdicts if bad]
    passing = [r.index for r, _, bad in verdicts if not bad]

    def reason_of(checks: tuple[GuardCheck, ...]) -> str:
        return ",".join(c.name for c in checks if c.status is Status.FAIL) or "idle"

    if not force and (failing or host_failed):
        gpus = tuple(GpuGuard(r.index, r.uuid, GpuGuardStatus.REFUSED if bad else GpuGuardStatus.PASS,
                              reason_of(ch), ch) for r, ch, bad in verdicts)
        if failing:
            first = next(c for _, ch, bad in verdicts if bad for c in ch if c.status is Status.FAIL)
            msg = (f"guard refused: GPU {', '.join(map(str, failing))} failed: {first.message}")
            reason = "gpu_failed"
        else:
            msg = f"guard refused: {host_failed[0].message}"
            reason = "host_failed"
        return MultiGpuGuard(gpus, host, force, True, reason, msg)
    all_failed = bool(failing) and not passing
    gpus = tuple(GpuGuard(r.index, r.uuid,
                          GpuGuardStatus.PASS if not bad else GpuGuardStatus.FORCED if all_failed
                          else GpuGuardStatus.REFUSED, reason_of(ch), ch) for r, ch, bad in verdicts)
    host_forced = bool(host_failed)
    if all_failed:
        reason, msg = "forced_all", (f"--force: every GPU failed its guard ({', '.join(map(str, failing))}); "
                                     "all run anyway, recorded as forced: do not quote these figures")
    elif failing:
        reason, msg = "forced_dropped", (f"--force: GPU {', '.join(map(str, failing))} failed its guard and is "
                                         f"left out; running on GPU {', '.join(map(str, passing))}")
    elif host_forced:
        reason, msg = "host_forced", ("--force overrode " + ", ".join(c.name for c in host_failed) +
                                      ": recorded in env.json")
    else:
        reason, msg = "pass", f"every GPU idle ({', '.join(map(str, passing))})"
    return MultiGpuGuard(gpus, host, force, False, reason, msg, host_forced)


def require_gpus_pass(guard: MultiGpuGuard) -> None:
    """CheckFailed (exit 3) when the guard refused the run."""
    if not guard.run_refused:
        return
    failed = [c for g in guard.gpus for c in g.checks if c.status is Status.FAIL] + \
        [c for c in guard.host_checks if c.status is Status.FAIL]
    first_hint = next((c.hint for c in failed if c.hint), None)
    hint = (first_hint + " " if first_hint else "") + (
        "Or pick idle GPUs with --gpus, or pass --force: a failing GPU is then left out while another passes "
        "(recorded in env.json).")
    raise CheckFailed(guard.message, hint=hint)


# --------------------------------------------------------------------------- figures and rows


@dataclass(frozen=True, slots=True)
class ScalingSummary:
    """One config over N GPUs at once, against one GPU alone (``solo``; see SOLO_DEFINITION). FPS are
    medians over the repeats; ``total_fps_spread`` sums the per-GPU spreads (a bound, not a spread of
    a measured sum)."""

    gpus: tuple[int, ...]
    per_gpu_fps: tuple[float, ...]
    per_gpu_spread: tuple[float, ...]
    solo_gpu: int
    solo_fps: float
    solo_fps_spread: float
    total_fps: float
    total_fps_spread: float
    min_fps: float
    min_gpu: int
    efficiency: float  # total_fps / (N x solo_fps)

    @property
    def n(self) -> int:
        return len(self.gpus)

    def to_json(self) -> dict[str, Any]:
        return {"gpus": list(self.gpus), "per_gpu_fps": list(self.per_gpu_fps),
                "per_gpu_fps_spread": list(self.per_gpu_spread), "solo_gpu": self.solo_gpu,
                "solo_fps": self.solo_fps, "solo_fps_spread": self.solo_fps_spread, "total_fps": self.total_fps,
                "total_fps_spread": self.total_fps_spread, "min_fps": self.min_fps, "min_gpu": self.min_gpu,
                "scaling_efficiency": self.efficiency}


def scaling_summary(solo_gpu: int, solo: SustainedFps, concurrent: Mapping[int, SustainedFps]) -> ScalingSummary:
    """Summed and minimum sustained FPS over the GPUs, and the scaling efficiency against N x solo (pure)."""
    if not concurrent:
        raise ValueError("scaling_summary needs at least one GPU's concurrent figure")
    if solo.median_fps <= 0:
        raise ValueError(f"solo sustained FPS must be > 0, got {solo.median_fps!r}")
    gpus = tuple(sorted(concurrent))
    fps = tuple(concurrent[i].median_fps for i in gpus)
    spread = tuple(concurrent[i].spread_fps for i in gpus)
    total = sum(fps)
    low = min(range(len(gpus)), key=lambda k: fps[k])
    return ScalingSummary(gpus=gpus, per_gpu_fps=fps, per_gpu_spread=spread, solo_gpu=solo_gpu,
                          solo_fps=solo.median_fps, solo_fps_spread=solo.spread_fps, total_fps=total,
                          total_fps_spread=sum(spread), min_fps=fps[low], min_gpu=gpus[low],
                          efficiency=total / (len(gpus) * solo.median_fps))


class RowRole(str, enum.Enum):
    SOLO = "solo"  # one GPU alone, before the concurrent run
    CONCURRENT = "concurrent"  # one GPU while all the selected GPUs run
    AGGREGATE = "aggregate"  # the node: all selected GPUs summed

    def __str__(self) -> str:
        return self.value


def row_label(config_label: str, gpu: str) -> str:
    """The probes.csv key for (label, gpu): ``3x3_s4@gpu1``, ``3x3_s4@gpu0.solo``, ``3x3_s4@all``.

    The store keys rows by one ``label`` cell; ``@`` cannot occur in a config label, so the
    composite never collides with another config's row."""
    return f"{config_label}{ROW_KEY_SEPARATOR}{gpu}"


def gpu_row(base: Mapping[str, object], gpu: GpuInfo, role: RowRole, host: str,
            pinning: Pinning | None = None) -> dict[str, object]:
    """A per-GPU probes.csv row: ``base`` (a single-GPU row, e.g. ``probe.build_row(...).to_json()``
    built from this GPU's figures) keyed by (label, gpu), with gpu, host and pinning columns (pure)."""
    if role is RowRole.AGGREGATE:
        raise ValueError("use aggregate_row for the aggregate row")
    label = str(base["label"])
    key = f"gpu{gpu.index}" + (".solo" if role is RowRole.SOLO else "")
    row = dict(base)
    row.update(label=row_label(label, key), config_label=label, gpu=gpu.key, gpu_index=gpu.index,
               gpu_uuid=gpu.uuid, gpu_name=gpu.name, role=role.value, host=host,
               pinning=None if pinning is None else pinning.method.value)
    return row


# Columns an aggregate row keeps from its base: what the config is and how it ran. Every other
# column of the base (trace figures: per-GPU quantities, not sums) is left empty (not measured).
_AGGREGATE_KEEP = frozenset({"label", "cluster", "cap", "streams", "batch", "frames", "pedestal_dtype", "pedestal",
                             "transfer", "workload", "finder", "tracer", "session", "timestamp", "sustained_repeats"})


def aggregate_row(base: Mapping[str, object], summary: ScalingSummary, host: str,
                  gpus: Sequence[GpuInfo] = ()) -> dict[str, object]:
    """The config's aggregate row, keyed (label, all): summed sustained FPS, the per-GPU minimum, the solo
    figure and the scaling efficiency (pure). ``sustained_gbps`` scales with the sum when ``base`` has it."""
    label = str(base["label"])
    row: dict[str, object] = {k: (v if k in _AGGREGATE_KEEP else None) for k, v in base.items()}
    fps, gbps = base.get("sustained_fps"), base.get("sustained_gbps")
    per_fps_gbps = (float(gbps) / float(fps)) if isinstance(fps, (int, float)) and fps and \
        isinstance(gbps, (int, float)) else None  # type: ignore[arg-type]
    names = sorted({g.name for g in gpus if g.index in summary.gpus})
    row.update(label=row_label(label, AGGREGATE_GPU), config_label=label, gpu=AGGREGATE_GPU, gpu_index=None,
               gpu_uuid=None, gpu_name=", ".join(names) or None, role=RowRole.AGGREGATE.value, host=host,
               trace=None, sustained_fps=summary.total_fps, sustained_fps_spread=summary.total_fps_spread,
               sustained_gbps=None if per_fps_gbps is None else summary.total_fps * per_fps_gbps,
               gpus=summary.n, gpu_min_fps=summary.min_fps, gpu_min_index=summary.min_gpu,
               solo_gpu=summary.solo_gpu, solo_fps=summary.solo_fps, scaling_efficiency=summary.efficiency)
    return row


def multi_gpu_env(selection: GpuSelection, gpus: Sequence[GpuInfo], pinnings: Mapping[int, Pinning],
                  guard: MultiGpuGuard, summaries: Mapping[str, ScalingSummary] | None = None,
                  overlaps_s: Mapping[str, float] | None = None) -> dict[str, Any]:
    """env.json's ``multi_gpu`` block (pure): the selection, every GPU's affinity and pinning, the
    guard verdicts (which were refused or forced), the solo definition, per config the summary."""
    configs: dict[str, Any] = {}
    for label, s in (summaries or {}).items():
        configs[label] = {**s.to_json(), "concurrent_overlap_s": (overlaps_s or {}).get(label)}
    return {"version": MULTI_GPU_ENV_VERSION, "selection": selection.text,
            "gpus": [{**g.to_json(), "pinning": pinnings[g.index].to_json() if g.index in pinnings else None}
                     for g in gpus],
            "guard": guard.to_json(), "solo_definition": SOLO_DEFINITION, "configs": configs,
            "pinning_applied": {str(i): p.applied for i, p in sorted(pinnings.items())}}


# --------------------------------------------------------------------------- composition


@dataclass(frozen=True, slots=True)
class MultiGpuPlan:
    """A guarded ``--gpus`` run: the GPUs that run (guard verdicts applied), how each is pinned."""

    selection: GpuSelection
    gpus: tuple[GpuInfo, ...]  # every selected GPU
    guard: MultiGpuGuard
    tools: PinTools
    pinnings: Mapping[int, Pinning]

    @property
    def run_gpus(self) -> tuple[GpuInfo, ...]:
        run = set(self.guard.run_indices)
        return tuple(g for g in self.gpus if g.index in run)

    def env_block(self, summaries: Mapping[str, ScalingSummary] | None = None,
                  overlaps_s: Mapping[str, float] | None = None) -> dict[str, Any]:
        return multi_gpu_env(self.selection, self.gpus, self.pinnings, self.guard, summaries, overlaps_s)


def plan_multi_gpu(selection: GpuSelection, *, max_util_pct: float, window_s: float, force: bool,
                   host_checks: Sequence[GuardCheck] = (), own_pid: int | None = None,
                   environ: Mapping[str, str] | None = None,
                   read_topology: Callable[[], Sequence[GpuInfo]] | None = None,
                   read_reading: Callable[..., NvmlReading] | None = None,
                   tools: PinTools | None = None) -> MultiGpuPlan:
    """The I/O and judging before a ``--gpus`` run: list the GPUs (NVML), keep those
    ``CUDA_VISIBLE_DEVICES`` allows, resolve ``--gpus`` (InputError, exit 2), sample each GPU
    (``guards.read_nvml``, one window each), judge them (:func:`check_gpus`) and plan the pinning.
    ``read_topology`` defaults to :func:`read_gpu_topology`, ``read_reading`` to ``guards.read_nvml``
    (both looked up at call time, so a test can replace them at the edge).
    Raise with :func:`require_gpus_pass` afterwards (exit 3 when refused)."""
    from clusterbench.run import guards

    env = os.environ if environ is None else environ
    topology = tuple((read_topology or read_gpu_topology)())
    gpus = resolve_selection(selection, visible_gpus(topology, env.get("CUDA_VISIBLE_DEVICES")))
    read = read_reading or guards.read_nvml
    readings = [read(device_index=g.index, window_s=window_s) for g in gpus]
    guard = check_gpus(readings, host_checks, max_util_pct=max_util_pct, force=force,
                       own_pid=os.getpid() if own_pid is None else own_pid)
    tools = tools or find_pin_tools()
    return MultiGpuPlan(selection, gpus, guard, tools, {g.index: plan_pinning(g, tools) for g in gpus})


def config_rows(base_for: Callable[[SustainedFps], Mapping[str, object]], run: MultiGpuSustained,
                gpus: Sequence[GpuInfo], host: str) -> tuple[dict[str, object], ...]:
    """The probes.csv rows of one config over N GPUs: solo, one per GPU, aggregate (pure).

    ``base_for(sustained)`` builds the single-GPU row for a sustained figure, e.g.
    ``lambda s: probe.build_row(cfg, analysis, s, result, tracer, trace, session).to_json()``."""
    by_index = {g.index: g for g in gpus}
    pins = {o.gpu.index: o.pinning for rounds in (run.solo_outcomes, run.concurrent_outcomes)
            for outcomes in rounds for o in outcomes}
    solo_base = base_for(run.solo)
    rows = [gpu_row(solo_base, by_index[run.solo_gpu], RowRole.SOLO, host, pins.get(run.solo_gpu))]
    for i, fps in sorted(run.concurrent.items()):
        rows.append(gpu_row(base_for(fps), by_index[i], RowRole.CONCURRENT, host, pins.get(i)))
    rows.append(aggregate_row(solo_base, run.summary, host, gpus))
    return tuple(rows)
