"""The unit a probe ran on: one GPU (its UUID) on one host and boot, its link and its host.

Two units of one GPU model differ in their host: the same H100 card model sat behind links whose D2H ran
at 50.7 GB/s on one host and at 40.0 GB/s on another while both moved data in both directions at once,
and nothing else in the results dir said so. A :class:`UnitRecord` (env.json's ``unit`` block) keeps what a
probe measured of its unit: the pinned link one direction at a time and both at once (GB/s, with every
sample), the PCIe generation and width, where the GPU and the pinned buffers sit (NUMA nodes), the CPU
model and the clocks. compare names what differs between two units (:meth:`UnitRecord.differences`) and
judges link-bound figures as shares of each unit's link (:meth:`LinkRates.rate`).

Pure records: no I/O, no GPU, no UI. :mod:`clusterbench.run.unit` measures them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Mapping, Sequence

from clusterbench.model import units as U
from clusterbench.model.stats import half_range, median
from clusterbench.model.untraced import UntracedCosts

UNIT_SCHEMA = "clusterbench.unit"
# The unit block's version. History: 1: first version (identity, link, PCIe, NUMA, CPU model, clocks; the
# optional key untraced, what probe --what-binds measured of the unit, read where present).
UNIT_VERSION = 1

DIRECTIONS = ("h2d", "d2h")
# Two link rates of two units that differ by less than this share are not named as a difference: the
# same unit measured twice agreed within about 1 % (H100, two probes a unit, duplex D2H).
LINK_DIFFERS = 0.02
# The minimum seconds a sample must last to be a rate: a copy shorter than this is timer noise.
MIN_SAMPLE_S = 1e-6


def _opt_int(doc: Mapping[str, object], name: str, where: str) -> int | None:
    v = doc.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{where}.{name} must be an integer or null, got {v!r:.40}")
    return v


def _opt_str(doc: Mapping[str, object], name: str, where: str) -> str | None:
    v = doc.get(name)
    if v is None:
        return None
    if not isinstance(v, str):
        raise ValueError(f"{where}.{name} must be text or null, got {v!r:.40}")
    return v


def _opt_float(doc: Mapping[str, object], name: str, where: str) -> float | None:
    v = doc.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{where}.{name} must be a number or null, got {v!r:.40}")
    return float(v)


def _mapping(doc: object, where: str) -> Mapping[str, object]:
    if not isinstance(doc, Mapping):
        raise ValueError(f"{where} must be a JSON object, got {type(doc).__name__}")
    return doc


@dataclass(frozen=True, slots=True)
class LinkRate:
    """One direction of the pinned link (``direction`` h2d or d2h), alone or while the other direction
    runs too (``duplex``): each sample's GB/s (1e9 B/s), in the order taken."""

    direction: str
    duplex: bool
    samples_gbps: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"a link rate's direction must be one of {', '.join(DIRECTIONS)}, got {self.direction!r}")
        if not isinstance(self.duplex, bool):
            raise ValueError(f"a link rate's duplex must be true or false, got {self.duplex!r}")
        values = tuple(self.samples_gbps)
        if not values:
            raise ValueError(f"a link rate ({self.name}) needs at least one sample")
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"a link rate's samples must be GB/s > 0, got {v!r}")
        object.__setattr__(self, "samples_gbps", tuple(float(v) for v in values))

    @property
    def name(self) -> str:
        """``h2d``, ``d2h``, ``h2d (both at once)``."""
        return self.direction + (" (both at once)" if self.duplex else "")

    @property
    def gbps(self) -> float:
        """The median sample."""
        return median(self.samples_gbps)

    @property
    def spread_gbps(self) -> float:
        """Half the min-max range of the samples."""
        return half_range(self.samples_gbps)

    def to_json(self) -> dict[str, object]:
        return {"direction": self.direction, "duplex": self.duplex, "gbps": self.gbps,
                "samples_gbps": list(self.samples_gbps)}

    @classmethod
    def from_json(cls, doc: object, where: str = "unit.link") -> "LinkRate":
        d = _mapping(doc, where)
        samples = d.get("samples_gbps")
        if not isinstance(samples, list):
            raise ValueError(f"{where}.samples_gbps must be a list of numbers, got {samples!r:.40}")
        try:
            return cls(str(d.get("direction")), d.get("duplex"), tuple(samples))  # type: ignore[arg-type]
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None


def rate_of(nbytes: int, seconds: Sequence[float]) -> tuple[float, ...]:
    """GB/s of copies of ``nbytes`` bytes that took ``seconds`` each (pure). ValueError for a time that
    is not a positive number (at least MIN_SAMPLE_S)."""
    if type(nbytes) is not int or nbytes < 1:
        raise ValueError(f"bytes per copy must be an integer >= 1, got {nbytes!r}")
    out = []
    for s in seconds:
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or s < MIN_SAMPLE_S:
            raise ValueError(f"a copy's time must be at least {MIN_SAMPLE_S} s, got {s!r}")
        out.append(nbytes / s / 1e9)
    return tuple(out)



@dataclass(frozen=True, slots=True)
class LinkRates:
    """The unit's pinned link as a probe measured it: H2D alone, D2H alone, and both at once (two streams, one
    copy each way at the same time, each direction timed by its own events). ``bytes_per_copy``: the size of
    each copy; ``copies``: copies per sample; ``method``: how, in words."""

    h2d: LinkRate
    d2h: LinkRate
    duplex_h2d: LinkRate
    duplex_d2h: LinkRate
    bytes_per_copy: int
    copies: int
    method: str

    def __post_init__(self) -> None:
        for name, direction, duplex in (("h2d", "h2d", False), ("d2h", "d2h", False),
                                        ("duplex_h2d", "h2d", True), ("duplex_d2h", "d2h", True)):
            r = getattr(self, name)
            if not isinstance(r, LinkRate) or r.direction != direction or r.duplex is not duplex:
                raise ValueError(f"link.{name} must be the {direction}{' (both at once)' if duplex else ''} rate")
        for name in ("bytes_per_copy", "copies"):
            v = getattr(self, name)
            if type(v) is not int or v < 1:
                raise ValueError(f"link.{name} must be an integer >= 1, got {v!r}")

    def rate(self, direction: str, duplex: bool) -> LinkRate:
        """The rate of ``direction`` (h2d, d2h), alone or with both directions at once."""
        if direction not in DIRECTIONS:
            raise ValueError(f"no link rate for {direction!r}")
        return (self.duplex_h2d if direction == "h2d" else self.duplex_d2h) if duplex else (
            self.h2d if direction == "h2d" else self.d2h)

    @property
    def duplex_gbps(self) -> float:
        """Both directions together, GB/s (the sum of the two medians)."""
        return self.duplex_h2d.gbps + self.duplex_d2h.gbps

    @property
    def text(self) -> str:
        """``H2D 54.7, D2H 54.5 GB/s; both at once H2D 33.9 + D2H 40.0 GB/s``."""
        return (f"H2D {U.gbps(self.h2d.gbps, unit=False)}, D2H {U.gbps(self.d2h.gbps)}; both at once H2D "
                f"{U.gbps(self.duplex_h2d.gbps, unit=False)} + D2H {U.gbps(self.duplex_d2h.gbps)}")

    def to_json(self) -> dict[str, object]:
        return {"h2d": self.h2d.to_json(), "d2h": self.d2h.to_json(), "duplex_h2d": self.duplex_h2d.to_json(),
                "duplex_d2h": self.duplex_d2h.to_json(), "bytes_per_copy": self.bytes_per_copy,
                "copies": self.copies, "method": self.method}

    @classmethod
    def from_json(cls, doc: object, where: str = "unit.link") -> "LinkRates":
        d = _mapping(doc, where)
        rates = {n: LinkRate.from_json(d.get(n), f"{where}.{n}") for n in ("h2d", "d2h", "duplex_h2d", "duplex_d2h")}
        try:
            return cls(**rates, bytes_per_copy=d.get("bytes_per_copy"), copies=d.get("copies"),  # type: ignore[arg-type]
                       method=str(d.get("method") or ""))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None


def link_floor_us(frame_bytes: int, slot_bytes: int | None, link: LinkRates, both: bool) -> float:
    """The link's floor on a frame, µs per frame (pure): the taller of the frame's bytes in over the H2D
    rate and its slot out over the D2H rate (``slot_bytes`` None: nothing comes back by copy, as in zero-copy
    mode), with the rates of both directions at once where the config moves both at the same time (``both``:
    several streams, copies each way), else each direction alone."""
    in_us = frame_bytes / (link.rate("h2d", both).gbps * 1e3)
    if not slot_bytes:
        return in_us
    return max(in_us, slot_bytes / (link.rate("d2h", both).gbps * 1e3))


@dataclass(frozen=True, slots=True)
class PcieLink:
    """The GPU's PCIe link (NVML): generation and width now (read right after the link's copies, since an
    idle link trains down) and the most the GPU and its slot allow."""

    gen_current: int | None = None
    gen_max: int | None = None
    width_current: int | None = None
    width_max: int | None = None

    @property
    def text(self) -> str:
        """``Gen5 x16 (max Gen5 x16)``; unknown parts as ``?``."""
        def part(g: int | None, w: int | None) -> str:
            return f"Gen{g if g is not None else '?'} x{w if w is not None else '?'}"

        return f"{part(self.gen_current, self.width_current)} (max {part(self.gen_max, self.width_max)})"

    def to_json(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, doc: object, where: str = "unit.pcie") -> "PcieLink":
        d = _mapping(doc, where)
        return cls(**{f.name: _opt_int(d, f.name, where) for f in fields(cls)})


@dataclass(frozen=True, slots=True)
class NumaPlacement:
    """Where the GPU and the link's pinned buffers sit: the GPU's NUMA node (sysfs; None: the platform
    says none, or not known), the nodes that hold the pinned buffers' pages and how that was read
    (``method``: ``numa_maps``, the child's /proc/self/numa_maps), and the CPUs the measuring process was
    pinned to."""

    gpu_node: int | None = None
    buffer_nodes: tuple[int, ...] | None = None
    method: str | None = None
    cpus: str | None = None

    @property
    def text(self) -> str:
        gpu = "?" if self.gpu_node is None else str(self.gpu_node)
        buf = "?" if not self.buffer_nodes else ",".join(map(str, self.buffer_nodes))
        return f"GPU on node {gpu}, pinned buffers on node {buf}"

    def to_json(self) -> dict[str, object]:
        return {"gpu_node": self.gpu_node, "buffer_nodes": None if self.buffer_nodes is None
                else list(self.buffer_nodes), "method": self.method, "cpus": self.cpus}

    @classmethod
    def from_json(cls, doc: object, where: str = "unit.numa") -> "NumaPlacement":
        d = _mapping(doc, where)
        nodes = d.get("buffer_nodes")
        if nodes is not None and (not isinstance(nodes, list) or any(
                isinstance(n, bool) or not isinstance(n, int) for n in nodes)):
            raise ValueError(f"{where}.buffer_nodes must be a list of integers or null, got {nodes!r:.40}")
        return cls(_opt_int(d, "gpu_node", where), None if nodes is None else tuple(nodes),
                   _opt_str(d, "method", where), _opt_str(d, "cpus", where))


@dataclass(frozen=True, slots=True)
class UnitClocks:
    """The GPU's clocks (NVML, MHz): SM and memory right after the link's copies, and their maxima."""

    sm_mhz: int | None = None
    mem_mhz: int | None = None
    max_sm_mhz: int | None = None
    max_mem_mhz: int | None = None

    @property
    def text(self) -> str:
        def mhz(v: int | None) -> str:
            return "?" if v is None else f"{v:,}"

        return (f"SM {mhz(self.sm_mhz)} of {mhz(self.max_sm_mhz)} MHz, memory {mhz(self.mem_mhz)} of "
                f"{mhz(self.max_mem_mhz)} MHz")

    def to_json(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, doc: object, where: str = "unit.clocks") -> "UnitClocks":
        d = _mapping(doc, where)
        return cls(**{f.name: _opt_int(d, f.name, where) for f in fields(cls)})


@dataclass(frozen=True, slots=True)
class UnitRecord:
    """One unit (env.json ``unit``): the GPU (UUID, model, PCI bus id) on one host and boot, and what a probe
    measured of it. ``link`` None: not measured (``link_problem`` says why). ``measured_utc``: when."""

    gpu_uuid: str | None
    gpu_name: str | None = None
    host: str | None = None
    boot_id: str | None = None
    pci_bus_id: str | None = None
    cpu_model: str | None = None
    pcie: PcieLink | None = None
    numa: NumaPlacement | None = None
    clocks: UnitClocks | None = None
    link: LinkRates | None = None
    link_problem: str | None = None
    measured_utc: str | None = None
    # what the unit costs a pipeline untraced, measured by probe --what-binds (None: not measured)
    untraced: UntracedCosts | None = None
    version: int = UNIT_VERSION

    def __post_init__(self) -> None:
        for name in ("gpu_uuid", "gpu_name", "host", "boot_id", "pci_bus_id", "cpu_model", "link_problem",
                     "measured_utc"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, str):
                raise ValueError(f"unit.{name} must be text or null, got {v!r:.40}")
        for name, kind in (("pcie", PcieLink), ("numa", NumaPlacement), ("clocks", UnitClocks), ("link", LinkRates),
                           ("untraced", UntracedCosts)):
            v = getattr(self, name)
            if v is not None and not isinstance(v, kind):
                raise ValueError(f"unit.{name} must be a {kind.__name__} or None, got {type(v).__name__}")
        if self.version != UNIT_VERSION:
            raise ValueError(f"unit block version {self.version!r}: this clusterbench reads version {UNIT_VERSION}")

    @property
    def unit_id(self) -> str | None:
        """``GPU-8c1f2a3b...@node7#3f2a1b9c``: the GPU's UUID on its host and boot (None: UUID unknown). The
        boot's id is its first 8 characters."""
        if not self.gpu_uuid:
            return None
        return f"{self.gpu_uuid}@{self.host or '?'}#{(self.boot_id or '?')[:8]}"

    @property
    def short(self) -> str:
        """``GPU-8c1f2a3b (host node7, boot 3f2a1b9c)``."""
        return (f"{(self.gpu_uuid or 'GPU ?')[:12]} (host {self.host or '?'}, boot "
                f"{(self.boot_id or '?')[:8]})")

    def same_unit(self, other: "UnitRecord") -> bool | None:
        """One GPU on one host and one boot: True or False where both say, else None (the UUIDs decide
        alone where a side names no host or boot)."""
        if not self.gpu_uuid or not other.gpu_uuid:
            return None
        if self.gpu_uuid != other.gpu_uuid:
            return False
        for a, b in ((self.host, other.host), (self.boot_id, other.boot_id)):
            if a and b and a != b:
                return False
        return True

    def differences(self, other: "UnitRecord") -> tuple[str, ...]:
        """What differs between this unit and ``other``, in words, one item each (pure): each link rate that
        differs by more than LINK_DIFFERS, the PCIe link, the NUMA placement, the CPU model and the clocks.
        Parts a side did not measure are not compared."""
        out: list[str] = []
        if self.link is not None and other.link is not None:
            for direction in DIRECTIONS:
                for duplex in (False, True):
                    a, b = self.link.rate(direction, duplex), other.link.rate(direction, duplex)
                    if abs(b.gbps - a.gbps) > LINK_DIFFERS * a.gbps:
                        out.append(f"link {direction.upper()}{' with both at once' if duplex else ''} "
                                   f"{U.gbps(a.gbps, unit=False)} → {U.gbps(b.gbps)} "
                                   f"({U.signed_pct((b.gbps / a.gbps - 1) * 100)})")
        if self.pcie is not None and other.pcie is not None and self.pcie != other.pcie:
            out.append(f"PCIe {self.pcie.text} → {other.pcie.text}")
        if self.numa is not None and other.numa is not None and (
                (self.numa.gpu_node, self.numa.buffer_nodes) != (other.numa.gpu_node, other.numa.buffer_nodes)):
            out.append(f"NUMA: {self.numa.text} → {other.numa.text}")
        if self.cpu_model and other.cpu_model and self.cpu_model != other.cpu_model:
            out.append(f"CPU {self.cpu_model} → {other.cpu_model}")
        if self.clocks is not None and other.clocks is not None:
            a, b = self.clocks, other.clocks
            if (a.max_sm_mhz, a.max_mem_mhz) != (b.max_sm_mhz, b.max_mem_mhz) and None not in (
                    a.max_sm_mhz, b.max_sm_mhz):
                out.append(f"clocks: {a.text} → {b.text}")
        return tuple(out)

    def to_json(self) -> dict[str, object]:
        return {"schema": UNIT_SCHEMA, "version": self.version, "unit_id": self.unit_id,
                "gpu_uuid": self.gpu_uuid, "gpu_name": self.gpu_name, "host": self.host, "boot_id": self.boot_id,
                "pci_bus_id": self.pci_bus_id, "cpu_model": self.cpu_model,
                "pcie": None if self.pcie is None else self.pcie.to_json(),
                "numa": None if self.numa is None else self.numa.to_json(),
                "clocks": None if self.clocks is None else self.clocks.to_json(),
                "link": None if self.link is None else self.link.to_json(), "link_problem": self.link_problem,
                "measured_utc": self.measured_utc,
                "untraced": None if self.untraced is None else self.untraced.to_json()}

    @classmethod
    def from_json(cls, doc: object, where: str = "unit") -> "UnitRecord":
        """The block back from :meth:`to_json`. ValueError names what is wrong; a version this
        clusterbench does not read is refused by name."""
        d = _mapping(doc, where)
        if d.get("schema") != UNIT_SCHEMA or d.get("version") != UNIT_VERSION:
            raise ValueError(f"{where} is not a version-{UNIT_VERSION} {UNIT_SCHEMA} block (schema "
                             f"{d.get('schema')!r}, version {d.get('version')!r})")
        subs: dict[str, object] = {}
        for name, kind in (("pcie", PcieLink), ("numa", NumaPlacement), ("clocks", UnitClocks), ("link", LinkRates)):
            v = d.get(name)
            subs[name] = None if v is None else kind.from_json(v, f"{where}.{name}")  # type: ignore[attr-defined]
        if d.get("untraced") is not None:
            try:
                subs["untraced"] = UntracedCosts.from_json(d["untraced"])
            except ValueError as exc:
                raise ValueError(f"{where}.untraced: {exc}") from None
        return cls(**{n: _opt_str(d, n, where) for n in ("gpu_uuid", "gpu_name", "host", "boot_id", "pci_bus_id",
                                                          "cpu_model", "link_problem", "measured_utc")},
                   **subs)  # type: ignore[arg-type]



def buffer_nodes(maps_text: str, numa_maps_text: str, addresses: Sequence[int]) -> tuple[int, ...] | None:
    """The NUMA nodes that hold pages of the mappings containing ``addresses`` (pure): each address's mapping
    from a /proc/PID/maps text (``start-end perms ...``, hex), its pages per node from the numa_maps line of
    the same start (``N<node>=<pages>``). None when no address lies in a mapping with pages on a node."""
    ranges = []
    for line in maps_text.splitlines():
        head = line.split(" ", 1)[0]
        lo, sep, hi = head.partition("-")
        try:
            ranges.append((int(lo, 16), int(hi, 16)))
        except ValueError:
            continue
    pages: dict[int, set[int]] = {}
    for line in numa_maps_text.splitlines():
        parts = line.split()
        if not parts:
            continue
        try:
            start = int(parts[0], 16)
        except ValueError:
            continue
        nodes = set()
        for tok in parts[1:]:
            if tok.startswith("N") and "=" in tok:
                node, _, count = tok[1:].partition("=")
                if node.isdigit() and count.isdigit() and int(count) > 0:
                    nodes.add(int(node))
        pages[start] = nodes
    found: set[int] = set()
    for a in addresses:
        starts = [lo for lo, hi in ranges if lo <= a < hi]
        for lo in starts:
            found |= pages.get(lo, set())
    return tuple(sorted(found)) or None


def boot_id(text: str) -> str | None:
    """The boot's id from /proc/sys/kernel/random/boot_id's text (pure): a UUID, or None."""
    t = text.strip()
    return t if t and len(t) <= 64 and all(c in "0123456789abcdef-" for c in t.lower()) else None


def cpu_model(cpuinfo_text: str) -> str | None:
    """The CPU's model name from /proc/cpuinfo's text (pure): the first ``model name`` (x86), else the first
    ``Model`` or ``CPU part`` line (Arm); with the count of such processors when they are all alike."""
    names = []
    for line in cpuinfo_text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("model name", "model", "cpu part") and value.strip():
            names.append((key.strip().lower(), value.strip()))
    if not names:
        return None
    first_key = names[0][0]
    values = [v for k, v in names if k == first_key]
    model = values[0]
    return model if len(set(values)) > 1 else f"{model} ({len(values)} logical CPU{'s' if len(values) > 1 else ''})"


def sysfs_bus_id(nvml_bus_id: str | None) -> str | None:
    """NVML's PCI bus id (``00000000:18:00.0``) as sysfs names the device (``0000:18:00.0``) (pure)."""
    if not nvml_bus_id:
        return None
    t = nvml_bus_id.strip().lower()
    domain, sep, rest = t.partition(":")
    if not sep or not rest:
        return None
    return f"{int(domain, 16):04x}:{rest}" if all(c in "0123456789abcdef" for c in domain) else None
