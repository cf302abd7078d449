"""run/unit.py: the unit record from what the probe reads and what the link child writes; the link child on
a machine without CuPy; and (GPU) the link itself."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from clusterbench.run.unit import UnitProbe, UnitStatic, numa_node_of, read_static, unit_record

STATIC = UnitStatic("GPU-1111", "NVIDIA H100 80GB HBM3", "node7", "3f2a1b9c-aaaa", "00000000:18:00.0",
                    "AMD EPYC 9454 (96 logical CPUs)", 0, 5, 16, 1980, 2619)
CHILD = {"schema": "clusterbench.link-result", "version": 1,
         "link": {name: {"direction": d, "duplex": dup, "samples_gbps": [g, g + 0.2]}
                  for name, d, dup, g in (("h2d", "h2d", False, 54.7), ("d2h", "d2h", False, 54.5),
                                          ("duplex_h2d", "h2d", True, 33.9), ("duplex_d2h", "d2h", True, 40.0))}
         | {"bytes_per_copy": 33_554_432, "copies": 4, "method": "test"},
         "pcie": {"gen_current": 5, "width_current": 16}, "clocks": {"sm_mhz": 1755, "mem_mhz": 2619},
         "numa": {"buffer_nodes": [0], "method": "numa_maps", "cpus": "0-7"}}


def test_the_record_from_what_the_probe_read_and_the_child_wrote() -> None:
    u = unit_record(STATIC, CHILD, measured_utc="2026-12-03T10:00:00Z")
    assert u.unit_id == "GPU-1111@node7#3f2a1b9c" and u.link_problem is None
    # the medians of two samples each: 54.8, 54.6, 34.0, 40.1 GB/s
    assert [u.link.rate(d, dup).gbps for d, dup in (("h2d", False), ("d2h", False), ("h2d", True), ("d2h", True))] \
        == pytest.approx([54.8, 54.6, 34.0, 40.1])
    assert (u.pcie.gen_current, u.pcie.gen_max, u.pcie.width_current, u.pcie.width_max) == (5, 5, 16, 16)
    assert (u.clocks.sm_mhz, u.clocks.max_sm_mhz, u.clocks.mem_mhz) == (1755, 1980, 2619)
    assert (u.numa.gpu_node, u.numa.buffer_nodes, u.numa.method, u.numa.cpus) == (0, (0,), "numa_maps", "0-7")


def test_a_child_that_gave_nothing_leaves_the_link_empty_and_says_why() -> None:
    u = unit_record(STATIC, None, "the link child failed (exit status 1): CuPy is not importable")
    assert u.link is None and u.link_problem.startswith("the link child failed")
    assert u.pcie.gen_max == 5 and u.pcie.gen_current is None  # what the probe read is kept
    u = unit_record(STATIC, {"link": {"h2d": 5}})
    assert u.link is None and u.link_problem.startswith("the link child's result cannot be read")


def test_the_gpus_numa_node_from_sysfs(tmp_path: Path) -> None:
    dev = tmp_path / "0000:18:00.0"
    dev.mkdir()
    (dev / "numa_node").write_text("1\n")
    assert numa_node_of("00000000:18:00.0", tmp_path) == 1
    (dev / "numa_node").write_text("-1\n")  # the platform says none
    assert numa_node_of("00000000:18:00.0", tmp_path) is None
    assert numa_node_of("00000000:99:00.0", tmp_path) is None and numa_node_of(None, tmp_path) is None


def test_what_needs_no_gpu_is_read_anywhere() -> None:
    s = read_static(None)
    assert s.host and s.gpu_uuid is None
    assert s.boot_id is None or len(s.boot_id) >= 8  # Linux gives one


HAS_CUPY = importlib.util.find_spec("cupy") is not None


@pytest.mark.skipif(HAS_CUPY, reason="checks the machine without CuPy")
def test_without_cupy_the_link_child_says_so_and_the_probe_goes_on(tmp_path: Path) -> None:
    probe = UnitProbe().start()
    probe.go("GPU-1111", "NVIDIA H100 80GB HBM3", ())
    u = probe.result(STATIC)
    assert u.link is None and "CuPy is not importable" in (u.link_problem or "")
    probe.keep_log(tmp_path)
    assert "clusterbench.workloads.cupy.link" in (tmp_path / "unit.log").read_text()
    assert not probe.folder.exists()  # its temporary folder is gone


def test_a_stopped_link_child_measures_nothing(tmp_path: Path) -> None:
    probe = UnitProbe().start()
    probe.stop("the guards refused")
    probe.keep_log(tmp_path)
    log = (tmp_path / "unit.log").read_text()
    assert "stop before it measured (stop: the guards refused)" in log or "CuPy is not importable" in log
    assert not probe.folder.exists()


@pytest.mark.gpu
def test_the_link_on_a_gpu() -> None:
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("GPU test: no CUDA device")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"GPU test: no CUDA device ({exc})")
    from clusterbench.workloads.cupy.link import measure_link, placement

    link, addresses = measure_link(cp, nbytes=8 * 1024 * 1024, copies=2, samples=3)
    for d in ("h2d", "d2h"):
        alone, both = link.rate(d, False), link.rate(d, True)
        assert len(alone.samples_gbps) == len(both.samples_gbps) == 3
        assert 1.0 < alone.gbps < 1000.0 and 1.0 < both.gbps < 1000.0
    # both directions together move at least as much as one alone (a duplex link), within timing noise
    assert link.duplex_gbps > 0.9 * max(link.h2d.gbps, link.d2h.gbps)
    where = placement(addresses)
    assert where["method"] in ("numa_maps", "get_mempolicy", None)
    print(json.dumps(link.to_json()))


def test_the_link_child_times_its_copies_only_when_told(tmp_path: Path) -> None:
    # the child's second wait: set up, then hold the timed copies until the probe writes <go>.measure
    import threading
    import time

    from clusterbench.workloads.cupy.link import MEASURE_SUFFIX, wait_for_unit_measure

    go = tmp_path / "go"
    go.write_text(json.dumps({"go": True, "uuid": "GPU-1", "cpus": [], "wait_measure": True}))
    done: list[float] = []
    t = threading.Thread(target=lambda: (wait_for_unit_measure(str(go), poll_s=0.001), done.append(time.perf_counter())))
    t.start()
    time.sleep(0.05)
    assert not done  # still waiting
    told = time.perf_counter()
    Path(f"{go}{MEASURE_SUFFIX}").write_text("measure\n")
    t.join(timeout=5)
    assert done and done[0] >= told
    wait_for_unit_measure(None)  # no go file: nothing to wait for


def test_a_stop_while_the_link_child_waits_to_measure(tmp_path: Path) -> None:
    from clusterbench.errors import InputError
    from clusterbench.workloads.cupy.link import wait_for_unit_measure

    go = tmp_path / "go"
    go.write_text("stop: interrupted\n")
    with pytest.raises(InputError, match="stop before it measured"):
        wait_for_unit_measure(str(go), poll_s=0.001)


def test_the_probe_tells_the_link_child_to_measure(tmp_path: Path) -> None:
    # UnitProbe.go asks the child to wait; measure() (or result(), at the latest) writes the word
    probe = UnitProbe()
    probe.go("GPU-1111", "NVIDIA H100 80GB HBM3", (0, 1))
    doc = json.loads(probe.go_file.read_text())
    assert doc == {"go": True, "uuid": "GPU-1111", "cpus": [0, 1], "wait_measure": True}
    probe.measure()
    assert (probe.folder / "go.measure").read_text() == "measure\n"
    probe._cleanup()
