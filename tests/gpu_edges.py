"""The machine's outermost edges for CPU tests of probe and guard: NVML's list of GPUs (the topology)
and each GPU's reading, the GPU check, the child that asks CuPy and nsys their versions, and the child that
measures the unit's link (:class:`FakeUnitProbe`: a fixed unit record). The host checks (import location,
kernel hashes, git, an external build) run for real."""

from __future__ import annotations

import os

import pytest

from clusterbench.run import guards, machine
from clusterbench.run import probe as probe_mod

MIB = 1024 * 1024


def reading(index: int, util: float = 0.0, procs: tuple = ()) -> guards.NvmlReading:
    """GPU ``index`` as NVML would read it: an H200 at ``util`` % over the whole window."""
    return guards.NvmlReading(index=index, name="NVIDIA H200", uuid=f"GPU-{index:04d}", driver_version="580.1",
                              cuda_driver_version="13.0", util_pct=(util,), memory_used_bytes=600 * MIB,
                              memory_total_bytes=143_771 * MIB, sm_clock_mhz=345, max_sm_clock_mhz=1980,
                              throttle_reasons=("gpu_idle",), compute_processes=procs)


def topology(n: int) -> tuple[machine.GpuInfo, ...]:
    """``n`` GPUs whose nearest cores are the ones this process may use, all on memory node 0."""
    allowed = tuple(sorted(os.sched_getaffinity(0)))
    return tuple(machine.GpuInfo(i, f"GPU-{i:04d}", "NVIDIA H200", cpus=allowed, mem_nodes=(0,),
                                 cpu_source=machine.AffinitySource.NVML, mem_source=machine.AffinitySource.NVML)
                 for i in range(n))


# The link the fake unit reports, GB/s: H2D and D2H alone, then each direction with both at once
FAKE_LINK = (54.7, 54.5, 33.9, 40.0)


class FakeUnitProbe:
    """The link child's stand-in: what it was told (``calls``), and a fixed unit record for the GPU it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def go(self, uuid, name=None, cpus=None) -> None:  # noqa: ANN001
        self.calls.append(("go", uuid, name))
        self.uuid, self.name = uuid, name

    def stop(self, why: str) -> None:
        self.calls.append(("stop", why))

    def measure(self) -> None:
        self.calls.append(("measure",))

    def result(self, static=None):  # noqa: ANN001, ANN201
        from clusterbench.model.unit import LinkRate, LinkRates, UnitRecord

        h2d, d2h, dh2d, dd2h = FAKE_LINK
        link = LinkRates(LinkRate("h2d", False, (h2d,)), LinkRate("d2h", False, (d2h,)),
                         LinkRate("h2d", True, (dh2d,)), LinkRate("d2h", True, (dd2h,)), 1 << 25, 4, "fake")
        self.calls.append(("result",))
        return UnitRecord(self.uuid, self.name, "fakehost", "fake-boot", link=link)

    def keep_log(self, folder) -> None:  # noqa: ANN001
        (folder / "unit.log").write_text("the fake unit probe\n")


class FakeMachine:
    """``n`` GPUs; those in ``busy`` at 80 % utilization. ``sampled`` lists every GPU index read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, n: int = 1, busy: tuple[int, ...] = (),
                 versions: dict | None = None) -> None:
        self.sampled: list[int] = []
        self.busy = busy
        gpus = topology(n)
        monkeypatch.setattr(machine, "read_gpu_topology", lambda: gpus)
        monkeypatch.setattr(guards, "read_nvml", self.read_nvml)
        monkeypatch.setattr(guards, "gpu_present", lambda: True)
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        monkeypatch.setattr(probe_mod, "read_child_versions", lambda nsys: dict(
            versions if versions is not None else {"cupy": "13.6.0", "nsys": "2025.3.2"}))
        self.unit = FakeUnitProbe()
        monkeypatch.setattr(probe_mod, "start_unit_probe", lambda: self.unit)

    def read_nvml(self, device_index: int = 0, window_s: float = guards.DEFAULT_WINDOW_S) -> guards.NvmlReading:
        self.sampled.append(device_index)
        return reading(device_index, 80.0 if device_index in self.busy else 0.0)
