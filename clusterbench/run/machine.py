"""The machine: which GPUs ``--gpus`` selects, each GPU's topology (NVML, sysfs), and how a GPU's
process is pinned to the cores and memory node closest to it.

- :func:`parse_gpu_selection` reads ``--gpus`` (pure; InputError, exit 2, before any NVML call);
- :func:`read_gpu_topology` is the NVML I/O: per GPU its index, UUID, name, PCI bus id, the CPU
  cores and memory nodes closest to it (``nvmlDeviceGetCpuAffinity`` and
  ``nvmlDeviceGetMemoryAffinity``; sysfs where NVML cannot say; every gap is stated);
- :func:`resolve_selection` and :func:`visible_gpus` pick the GPUs (InputError for an unknown index);
- :func:`plan_pinning`: numactl, else ``os.sched_setaffinity`` in the child, else not at all, and
  the :class:`Pinning` record says which; :func:`gpu_env` makes one GPU visible to a child.

Nothing here prints, exits, or imports typer, rich or CuPy; ``pynvml`` is imported only inside
:func:`read_gpu_topology`.
"""

from __future__ import annotations

import enum
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from clusterbench.errors import EnvironmentFailure, InputError


_NVML_WORD_BITS = 64  # pynvml returns affinity masks as arrays of c_ulonglong


NVML_AFFINITY_SCOPE_NODE = 0  # nvmlAffinityScope_t: NUMA node (nvml.h)


DEFAULT_SYSFS_PCI = Path("/sys/bus/pci/devices")


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
            name = guards._text(pynvml.nvmlDeviceGetName(h))
            uuid = guards._text(pynvml.nvmlDeviceGetUUID(h))
            pci = guards._optional(pynvml.nvmlDeviceGetPciInfo, h)
            bus = guards._text(getattr(pci, "busId", "")) if pci is not None else ""
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
                notes.append(f"nvmlDeviceGetCpuAffinity failed ({guards._text(exc) or type(exc).__name__})")
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
                    notes.append(f"nvmlDeviceGetMemoryAffinity failed ({guards._text(exc) or type(exc).__name__})")
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
        raise EnvironmentFailure(f"NVML query failed while listing GPUs: {guards._text(exc)}",
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
            raise EnvironmentFailure(f"CUDA_VISIBLE_DEVICES names a MIG instance ({e}): probe and guard need "
                                     "whole GPUs", hint=hint)
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


def gpu_env(gpu: GpuInfo, base: Mapping[str, str]) -> dict[str, str]:
    """``base`` with only this GPU visible to CUDA, named by UUID: NVML numbers GPUs in PCI bus order,
    CUDA by default fastest first, so an index could name another GPU; a UUID cannot."""
    env = dict(base)
    env["CUDA_VISIBLE_DEVICES"] = gpu.uuid
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return env
