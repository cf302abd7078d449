"""model/unit.py and model/processes.py: the unit record and the processes of a sustained figure (pure).
Every expected value is worked out in the comments."""

from __future__ import annotations

import json

import pytest

from clusterbench.model.measurement import Measurement
from clusterbench.model.processes import (ProcessRun, process_clock, process_measurement, process_spread,
                                          processes_of, steady_summary, throttle_reasons)
from clusterbench.model.steady import Run, SteadyRule, judge
from clusterbench.model.unit import (LinkRate, LinkRates, NumaPlacement, PcieLink, UnitClocks, UnitRecord, boot_id,
                                     buffer_nodes, cpu_model, link_floor_us, rate_of, sysfs_bus_id)


def _link(h2d: float = 54.7, d2h: float = 54.5, dh2d: float = 33.9, dd2h: float = 40.0) -> LinkRates:
    return LinkRates(LinkRate("h2d", False, (h2d,)), LinkRate("d2h", False, (d2h,)), LinkRate("h2d", True, (dh2d,)),
                     LinkRate("d2h", True, (dd2h,)), 1 << 25, 4, "test")


# ----------------------------------------------------------------------------- the unit


def test_rates_from_copy_times() -> None:
    # 4 copies of 32 MiB = 134,217,728 B in 2.45 ms: 54.78 GB/s (1e9 B/s)
    assert rate_of(134_217_728, [0.00245])[0] == pytest.approx(134_217_728 / 0.00245 / 1e9)
    with pytest.raises(ValueError, match="at least 1e-06 s"):
        rate_of(1024, [0.0])
    r = LinkRate("d2h", True, (40.0, 41.0, 39.5))
    assert (r.gbps, r.spread_gbps, r.name) == (40.0, 0.75, "d2h (both at once)")
    with pytest.raises(ValueError, match="direction"):
        LinkRate("p2p", False, (1.0,))


def test_the_link_floor_takes_both_directions_at_once_where_a_config_moves_both() -> None:
    link = _link()
    # 9x9 f32, cap 1700: 320,000 B in, 557,604 B out per frame. One direction at a time: in 320,000 / 54.7e3 =
    # 5.850 µs, out 557,604 / 54.5e3 = 10.231 µs: 10.231 µs. Both at once: in / 33.9e3 = 9.440, out / 40.0e3 =
    # 13.940 µs: 13.940 µs; zero-copy (no slot copied back): the frame in alone, 5.850 µs
    assert link_floor_us(320_000, 557_604, link, False) == pytest.approx(557_604 / 54.5e3)
    assert link_floor_us(320_000, 557_604, link, True) == pytest.approx(557_604 / 40.0e3)
    assert link_floor_us(320_000, None, link, True) == pytest.approx(320_000 / 33.9e3)
    assert link.duplex_gbps == pytest.approx(73.9)


def test_the_unit_record_round_trips_and_names_its_unit() -> None:
    u = UnitRecord("GPU-8c1f2a3b-1111", "NVIDIA H100 80GB HBM3", "node7", "3f2a1b9c-aaaa-bbbb", "00000000:18:00.0",
                   "Intel Xeon (2 logical CPUs)", PcieLink(5, 5, 16, 16), NumaPlacement(0, (0,), "numa_maps", "0-7"),
                   UnitClocks(1980, 2619, 1980, 2619), _link(), None, "2026-12-03T10:00:00Z")
    doc = json.loads(json.dumps(u.to_json()))
    assert UnitRecord.from_json(doc) == u
    assert doc["unit_id"] == u.unit_id == "GPU-8c1f2a3b-1111@node7#3f2a1b9c"
    assert u.short == "GPU-8c1f2a3b (host node7, boot 3f2a1b9c)"
    with pytest.raises(ValueError, match="not a version-1 clusterbench.unit block"):
        UnitRecord.from_json({**doc, "version": 2})
    with pytest.raises(ValueError, match=r"unit.link.h2d: a link rate's samples must be GB/s > 0"):
        UnitRecord.from_json({**doc, "link": {**doc["link"], "h2d": {"direction": "h2d", "duplex": False,
                                                                     "samples_gbps": [-1.0]}}})


def test_one_unit_is_one_gpu_on_one_host_and_boot() -> None:
    a = UnitRecord("GPU-1", host="n1", boot_id="b1")
    assert a.same_unit(UnitRecord("GPU-1", host="n1", boot_id="b1")) is True
    assert a.same_unit(UnitRecord("GPU-1", host="n1", boot_id="b2")) is False  # a reboot
    assert a.same_unit(UnitRecord("GPU-2", host="n1", boot_id="b1")) is False
    assert a.same_unit(UnitRecord("GPU-1")) is True  # the other names no host or boot: the UUID decides
    assert a.same_unit(UnitRecord(None)) is None


def test_what_differs_between_two_units() -> None:
    a = UnitRecord("GPU-1", link=_link(dd2h=50.7), pcie=PcieLink(5, 5, 16, 16), numa=NumaPlacement(0, (0,)),
                   cpu_model="A", clocks=UnitClocks(None, None, 1980, 2619))
    b = UnitRecord("GPU-2", link=_link(dd2h=40.0, h2d=55.0), pcie=PcieLink(4, 5, 16, 16), numa=NumaPlacement(1, (0,)),
                   cpu_model="B", clocks=UnitClocks(None, None, 1980, 2619))
    # H2D 54.7 -> 55.0 is +0.55 %, under the 2 % a unit's own link wanders: not named; duplex D2H -21.10 %
    assert b.differences(b) == ()
    assert a.differences(b) == (
        "link D2H with both at once 50.70 → 40.00 GB/s (-21.10 %)",
        "PCIe Gen5 x16 (max Gen5 x16) → Gen4 x16 (max Gen5 x16)",
        "NUMA: GPU on node 0, pinned buffers on node 0 → GPU on node 1, pinned buffers on node 0",
        "CPU A → B")


MAPS = """\
55d0a0000000-55d0a0021000 r-xp 00000000 08:01 1234 /usr/bin/python3
7f2a3c000000-7f2a3e000000 rw-s 00000000 00:05 777 /dev/nvidiactl
7f2a40000000-7f2a42000000 rw-s 00000000 00:05 777 /dev/nvidiactl
7ffd1000000-7ffd1021000 rw-p 00000000 00:00 0 [stack]
"""
NUMA_MAPS = """\
55d0a0000000 default file=/usr/bin/python3 mapped=33 N0=33 kernelpagesize_kB=4
7f2a3c000000 default file=/dev/nvidiactl mapped=8192 N1=8192 kernelpagesize_kB=4
7f2a40000000 default file=/dev/nvidiactl mapped=8192 N0=10 N1=8182 kernelpagesize_kB=4
7ffd1000000 default stack anon=3 dirty=3 N0=3 kernelpagesize_kB=4
"""


def test_the_nodes_of_the_pinned_buffers_from_numa_maps() -> None:
    # the first buffer (0x7f2a3c001000) lies in the first nvidiactl mapping, all its pages on node 1; the second
    # (0x7f2a41000000) in the second, 10 pages on node 0 and 8,182 on node 1
    assert buffer_nodes(MAPS, NUMA_MAPS, [0x7f2a3c001000]) == (1,)
    assert buffer_nodes(MAPS, NUMA_MAPS, [0x7f2a3c001000, 0x7f2a41000000]) == (0, 1)
    assert buffer_nodes(MAPS, NUMA_MAPS, [0x10]) is None  # in no mapping
    assert buffer_nodes(MAPS, "", [0x7f2a3c001000]) is None  # no pages listed


def test_host_facts_from_their_files() -> None:
    assert boot_id("3f2a1b9c-4d5e-6f70-8192-a3b4c5d6e7f8\n") == "3f2a1b9c-4d5e-6f70-8192-a3b4c5d6e7f8"
    assert boot_id("") is None and boot_id("not a boot id!") is None
    x86 = "processor\t: 0\nmodel name\t: AMD EPYC 9454 48-Core Processor\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 9454 48-Core Processor\n"
    assert cpu_model(x86) == "AMD EPYC 9454 48-Core Processor (2 logical CPUs)"
    assert cpu_model("processor : 0\nCPU part : 0xd4f\n") == "0xd4f (1 logical CPU)"
    assert cpu_model("") is None
    assert sysfs_bus_id("00000000:18:00.0") == "0000:18:00.0" and sysfs_bus_id("0000000A:C1:00.0") == "000a:c1:00.0"
    assert sysfs_bus_id(None) is None and sysfs_bus_id("bogus") is None


# ----------------------------------------------------------------------------- processes


def test_throttle_reasons_by_bit() -> None:
    assert throttle_reasons(0) == ()
    assert throttle_reasons(0x1 | 0x4) == ("gpu_idle", "sw_power_cap")
    assert throttle_reasons(0x40 | 0x400) == ("hw_thermal_slowdown", "bit_0x400")  # a bit NVML may add later
    with pytest.raises(ValueError):
        throttle_reasons(-1)


def test_a_process_clock_over_its_window() -> None:
    samples = [(0.0, 345, 0x1), (1.0, 1980, 0x0), (1.5, 1965, 0x4), (2.0, 1980, None), (3.0, 345, 0x1)]
    c = process_clock(samples, 1.0, 2.0)  # three reads: 1980, 1965, 1980; a power cap seen once
    assert (c.samples, c.median_mhz, c.min_mhz, c.max_mhz, c.throttle) == (3, 1980, 1965, 1980, ("sw_power_cap",))
    assert c.slowed == ("sw_power_cap",)
    assert process_clock(samples, 5.0, 6.0).samples == 0


def _proc(i: int, values: list[float], settled: bool | None = True) -> ProcessRun:
    steady = None
    if settled is not None:
        runs = [Run(v, 0.1, 1, 0.1 * k) for k, v in enumerate(values)]
        steady = judge(runs, SteadyRule(counted=len(values), min_warmups=0), "steady" if settled else "max_s")
    return ProcessRun(i, tuple(values), steady)


def test_the_processes_of_a_measurement() -> None:
    procs = [_proc(0, [100.0, 100.4, 99.9]), _proc(1, [102.0, 102.1, 101.9]), _proc(2, [99.0, 99.1, 98.9])]
    m = process_measurement("sustained_fps", procs, 320_000, {"source": "result"})
    # medians 100.0, 102.0, 99.0: the samples in process order; the figure their median, 100.0
    assert m.samples == (100.0, 102.0, 99.0) and m.median == 100.0 and m.metadata["source"] == "result"
    back = processes_of(Measurement.from_json(json.loads(json.dumps(m.to_json()))))
    assert back is not None and [p.values for p in back] == [p.values for p in procs]
    s = process_spread(back)
    assert (s.n, s.median, s.spread, s.unsettled) == (3, 100.0, pytest.approx(0.03), 0)  # (102 - 99) / 100
    assert s.text == "3 processes spread 3.00 %"
    # a measurement whose samples are not its processes' medians is read as one without processes
    assert processes_of(Measurement("sustained_fps", (1.0, 2.0, 3.0), metadata=m.metadata)) is None
    assert processes_of(Measurement("sustained_fps", (100.0,))) is None


def test_a_process_that_did_not_settle() -> None:
    # runs 90, 95, 99: range 9 over the median 95 = 9.47 % > 1.5 %: unsettled. The median (95) stands on 95
    # and 99 once 90, the farthest from it (5 against 4), is set aside: 4 / 95
    procs = [_proc(0, [100.0, 100.2, 99.9]), _proc(1, [90.0, 95.0, 99.0], settled=False)]
    s = process_spread(procs)
    assert s.unsettled == 1 and s.unsettled_spread == pytest.approx(4 / 95)
    assert procs[1].run_spread == pytest.approx(9 / 95)
    assert steady_summary(procs) == {"steady": False, "warmups": 0, "warmup_s": 0.0}
    assert steady_summary([_proc(0, [100.0, 100.2, 99.9])])["steady"] is True
    assert steady_summary([_proc(0, [100.0], settled=None)])["steady"] is None


def test_one_held_up_run_does_not_become_the_noise() -> None:
    # GPU-24707a35, make run's second probe, 3x3 on 4 streams (docs/measurements/2026-12-06_h100-floors-units):
    # a process's counted runs 154,125.7, 155,683.9 and 102,629.4 FPS (a 0.1 s run held up by a third): its
    # median 154,125.7 stands on 154,125.7 and 155,683.9, 1.01 %; the third process's 150,485.7, 156,711.0 and
    # 102,844.7: 102,844.7 set aside, (156,711.0 - 150,485.7) / 150,485.7 = 4.14 %. The whole range, 35.8 %,
    # was the noise before: a 20 % drop would have read SAME.
    p0 = _proc(0, [154125.7394194333, 155683.88837947417, 102629.40776148022], settled=False)
    p2 = _proc(2, [150485.70672651127, 156711.04880279492, 102844.68461934887], settled=False)
    assert p0.median_spread == pytest.approx((155683.88837947417 - 154125.7394194333) / 154125.7394194333)
    assert p2.median_spread == pytest.approx((156711.04880279492 - 150485.70672651127) / 150485.70672651127)
    assert p2.run_spread == pytest.approx((156711.04880279492 - 102844.68461934887) / 150485.70672651127)
    s = process_spread([p0, _proc(1, [156271.2, 156700.8, 156808.2]), p2])
    assert s.unsettled == 2 and s.unsettled_spread == pytest.approx(0.04137, abs=1e-4)
    # two runs: nothing to set aside
    assert _proc(3, [100.0, 90.0], settled=False).median_spread == pytest.approx(10 / 95)

