"""Know the unit: the GPU a probe runs on, on its host and boot, with its link, PCIe, NUMA, CPU and clocks.

A probe measures its unit once (env.json's ``unit`` block, :class:`~clusterbench.model.unit.UnitRecord`):

- this process reads what needs no GPU work: the boot's id (/proc/sys/kernel/random/boot_id), the host name,
  the CPU model (/proc/cpuinfo), the GPU's PCI bus id, its most PCIe generation and width and its most SM and
  memory clocks (NVML), and the GPU's NUMA node (/sys/bus/pci/devices/<bus id>/numa_node);
- a child (:mod:`clusterbench.workloads.cupy.link`) measures the link: started while the guards sample the
  GPU, it imports CuPy and waits, without a CUDA context; once the guards passed, :meth:`UnitProbe.go` names
  the GPU and its CPUs, and it makes its context and buffers; once the probe's own host work is done
  (:meth:`UnitProbe.measure`), it measures H2D alone, D2H alone and both at once, then reads the PCIe link
  and the clocks as they are right after the copies and where its pinned buffers' pages sit.

Nothing here prints, exits, or imports typer, rich or CuPy. A link that could not be measured (no CuPy, a
CUDA failure) leaves the record's ``link`` empty with ``link_problem`` saying why; the probe goes on.
"""

from __future__ import annotations

import datetime
import json
import socket
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from clusterbench.model.unit import (LinkRates, NumaPlacement, PcieLink, UnitClocks, UnitRecord, boot_id, cpu_model,
                                     sysfs_bus_id)

BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")
CPUINFO_PATH = Path("/proc/cpuinfo")
SYSFS_PCI = Path("/sys/bus/pci/devices")
# The link child may take this long (interpreter, CuPy, context, copies) before it is given up on.
UNIT_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class UnitStatic:
    """What this process reads of the unit without GPU work (see the module docstring)."""

    gpu_uuid: str | None
    gpu_name: str | None
    host: str | None
    boot_id: str | None
    pci_bus_id: str | None
    cpu_model: str | None
    gpu_numa_node: int | None
    pcie_gen_max: int | None
    pcie_width_max: int | None
    max_sm_mhz: int | None
    max_mem_mhz: int | None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def numa_node_of(bus_id: str | None, root: Path = SYSFS_PCI) -> int | None:
    """The NUMA node sysfs gives the PCI device ``bus_id`` (NVML's form); None where it says none (-1) or
    cannot be read."""
    name = sysfs_bus_id(bus_id)
    text = _read(root / name / "numa_node") if name else None
    try:
        node = int((text or "").strip())
    except ValueError:
        return None
    return node if node >= 0 else None


def read_static(gpu_uuid: str | None, gpu_name: str | None = None) -> UnitStatic:
    """The unit as this process reads it (no GPU work; NVML where it is, else those parts unknown)."""
    bus = gen = width = sm = mem = None
    name = gpu_name
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            h = (pynvml.nvmlDeviceGetHandleByUUID(gpu_uuid) if gpu_uuid else pynvml.nvmlDeviceGetHandleByIndex(0))
            bus = _call(lambda: pynvml.nvmlDeviceGetPciInfo(h).busId)
            if isinstance(bus, bytes):
                bus = bus.decode()
            gen = _call(lambda: int(pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h)))
            width = _call(lambda: int(pynvml.nvmlDeviceGetMaxPcieLinkWidth(h)))
            sm = _call(lambda: int(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)))
            mem = _call(lambda: int(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM)))
            if name is None:
                n = _call(lambda: pynvml.nvmlDeviceGetName(h))
                name = n.decode() if isinstance(n, bytes) else n
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # NVML missing: those parts stay unknown
        pass
    return UnitStatic(gpu_uuid, name, socket.gethostname(), boot_id(_read(BOOT_ID_PATH) or ""),
                      bus if isinstance(bus, str) else None, cpu_model(_read(CPUINFO_PATH) or ""), numa_node_of(bus),
                      gen, width, sm, mem)


def _call(fn: Any) -> Any:
    try:
        return fn()
    except Exception:
        return None


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def unit_record(static: UnitStatic, child: Mapping[str, Any] | None, problem: str | None = None,
                measured_utc: str | None = None) -> UnitRecord:
    """The unit block from what this process read and what the link child wrote (``child``; None: it gave no
    result, ``problem`` says why) (pure). A child result that cannot be read is a problem, not an error."""
    link = pcie_now = clocks_now = numa_child = None
    if child is not None:
        try:
            link = LinkRates.from_json(child.get("link"))
            pcie_now = child.get("pcie") or {}
            clocks_now = child.get("clocks") or {}
            numa_child = child.get("numa") or {}
        except (ValueError, TypeError, AttributeError) as exc:
            link, problem = None, f"the link child's result cannot be read: {exc}"
    pcie = PcieLink(_int(pcie_now, "gen_current"), static.pcie_gen_max, _int(pcie_now, "width_current"),
                    static.pcie_width_max)
    clocks = UnitClocks(_int(clocks_now, "sm_mhz"), _int(clocks_now, "mem_mhz"), static.max_sm_mhz, static.max_mem_mhz)
    nodes = (numa_child or {}).get("buffer_nodes")
    numa = NumaPlacement(static.gpu_numa_node,
                         tuple(int(n) for n in nodes) if isinstance(nodes, list) and nodes else None,
                         (numa_child or {}).get("method") if isinstance((numa_child or {}).get("method"), str) else None,
                         (numa_child or {}).get("cpus") if isinstance((numa_child or {}).get("cpus"), str) else None)
    return UnitRecord(static.gpu_uuid, static.gpu_name, static.host, static.boot_id, static.pci_bus_id,
                      static.cpu_model, pcie, numa, clocks, link, None if link is not None else (problem or "not measured"),
                      measured_utc or _utc_now())


def _int(doc: Mapping[str, Any] | None, key: str) -> int | None:
    v = (doc or {}).get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class UnitProbe:
    """The link child of one probe (module docstring): :meth:`start` it early, then :meth:`go` with the GPU
    once the guards passed (or :meth:`stop`), and :meth:`result` waits for the record. ``env``: the children's
    environment (this checkout on PYTHONPATH)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = dict(env) if env is not None else None
        self.folder = Path(tempfile.mkdtemp(prefix="clusterbench-unit-"))
        self.go_file = self.folder / "go"
        self.result_path = self.folder / "link.json"
        self.log_path = self.folder / "link.log"
        self._thread: threading.Thread | None = None
        self._outcome: Any = None
        self._gpu: tuple[str | None, str | None] = (None, None)
        self._log_text: str | None = None

    def start(self) -> "UnitProbe":
        from clusterbench.run.commands import child_env
        from clusterbench.run.supervisor import ChildSpec, run_children

        env = child_env(self.env)
        env.pop("CUDA_VISIBLE_DEVICES", None)  # set by the child itself, once it knows the GPU
        spec = ChildSpec((sys.executable, "-m", "clusterbench.workloads.cupy.link", "--result", str(self.result_path),
                          "--go-file", str(self.go_file)), self.log_path, header="the unit's link", env=env,
                         timeout_s=UNIT_TIMEOUT_S)

        def target() -> None:
            try:
                self._outcome = run_children([spec])[0]
            except BaseException as exc:  # noqa: BLE001 - kept as the problem
                self._outcome = exc

        self._thread = threading.Thread(target=target, name="clusterbench-unit", daemon=True)
        self._thread.start()
        return self

    def go(self, gpu_uuid: str | None, gpu_name: str | None = None, cpus: tuple[int, ...] | None = None) -> None:
        """Let the child set up on ``gpu_uuid`` (pinned to ``cpus``): its context and buffers; it times the
        copies once :meth:`measure` (or :meth:`result`) says so."""
        self._gpu = (gpu_uuid, gpu_name)
        self.go_file.write_text(json.dumps({"go": True, "uuid": gpu_uuid, "cpus": list(cpus or ()),
                                            "wait_measure": True}))

    def measure(self) -> None:
        """Let the child time its copies now (nothing else of the probe's runs on the host)."""
        from clusterbench.workloads.cupy.link import MEASURE_SUFFIX

        try:
            Path(f"{self.go_file}{MEASURE_SUFFIX}").write_text("measure\n")
        except OSError:
            pass

    def stop(self, why: str) -> None:
        """Tell the child to stop before it measures, and wait for it."""
        try:
            self.go_file.write_text(f"stop: {why}\n")
        except OSError:
            pass
        if self._thread is not None:
            self._thread.join()
        self._cleanup()

    def result(self, static: UnitStatic | None = None) -> UnitRecord:
        """Wait for the child and build the record (``static``: what this process read, else read now); the
        child is told to measure first, if it was not yet."""
        if self._thread is not None and self.go_file.exists():
            self.measure()
        if self._thread is not None:
            self._thread.join()
        static = static or read_static(*self._gpu)
        doc, problem = None, None
        out = self._outcome
        if isinstance(out, BaseException):
            problem = f"the link child could not run: {out}"
        elif out is not None and not out.ok:
            lines = [ln for ln in (out.tail or "").splitlines() if ln.strip()]
            said = next((ln[len("Error: "):] for ln in reversed(lines) if ln.startswith("Error: ")),
                        lines[-1] if lines else "")
            problem = f"the link child failed ({out.status_text}): {said}"
        else:
            try:
                doc = json.loads(self.result_path.read_text())
            except (OSError, ValueError) as exc:
                problem = f"the link child wrote no result: {exc}"
        self._cleanup()
        return unit_record(static, doc, problem)

    def keep_log(self, folder: Path) -> None:
        """Write the child's log into ``folder`` (``unit.log``), for the record."""
        text = self._log_text
        if text is None:
            try:
                text = self.log_path.read_text(errors="replace")
            except OSError:
                return
        try:
            (Path(folder) / "unit.log").write_text(text)
        except OSError:
            pass

    def _cleanup(self) -> None:
        import shutil

        if self._log_text is None:
            try:
                self._log_text = self.log_path.read_text(errors="replace")
            except OSError:
                pass
        shutil.rmtree(self.folder, ignore_errors=True)
