"""The delay test's runner and fit, on a stand-in program that writes what the injection library would (a
frame of 20 µs plus each delay the model lets through), so that every slope below is known before the run:
host 1 (the host binds), GPU 0, link 0; and the pure pieces (the delay's size, the points, the fit)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from clusterbench.model.untraced import DelayRun
from untraced_programs import FAKE

from clusterbench.run.delay import (
    K_MIN_US,
    LINK_BASE_BYTES,
    DelayRequest,
    Point,
    choose_k,
    fit,
    link_bytes_for,
    points,
    run_delay_test,
)

def _request(tmp_path: Path, **env: str) -> DelayRequest:
    prog = tmp_path / "fake.py"
    prog.write_text(FAKE)
    return DelayRequest(argv=(sys.executable, str(prog)), mark="kernel:zoo_calib", out_dir=tmp_path, stem="fake",
                        base_env={"PATH": "/usr/bin:/bin", **env}, warmup=2, processes=2, k_us=8.0, link_gbps=10.0,
                        rate=r"rate: ([0-9.]+) frames/s", timeout_s=60)


def test_the_host_binds_the_gpu_and_the_link_have_slack(tmp_path: Path) -> None:
    out = run_delay_test(_request(tmp_path), Path("/nonexistent/libcb_inject.so"))
    t = out.test
    assert (t.processes, t.k_us, t.link_bytes) == (2, 8.0, 80_000)  # 8 µs at 10 GB/s = 10,000 bytes a µs
    host, gpu, link = (t.slope(r) for r in ("host", "gpu", "link"))
    assert host.slope == pytest.approx(1.0, abs=1e-3) and host.verdict == "binds"
    assert host.base_us == pytest.approx(20.0, abs=1e-3) and host.delayed_us == pytest.approx(28.0, abs=1e-3)
    assert gpu.slope == pytest.approx(0.0, abs=1e-3) and gpu.verdict == "slack"
    assert link.slope == pytest.approx(0.0, abs=1e-3) and link.verdict == "slack"
    assert t.binds == "host"
    assert t.bare_us == pytest.approx(19.9, abs=1e-3)
    assert t.cost == pytest.approx(20.0 / 19.9 - 1, abs=1e-4)  # by the program's own rate, with against without
    # every point in both processes: none, host, gpu0, gpu, link0, link, bare
    assert sorted((r.resource, r.k_us > 0) for r in t.runs if r.process == 1) == sorted(
        [("none", False), ("host", True), ("gpu", False), ("gpu", True), ("link", False), ("link", True), ("bare", False)])
    assert len(out.baselines) == 2 and all(f.period_us == pytest.approx(20.0, abs=1e-3) for f in out.baselines)
    assert (tmp_path / "fake.delay.host.p1.json").is_file() and (tmp_path / "fake.delay.bare.p0.log").is_file()


def test_a_gpu_that_binds_and_one_that_cannot_be_delayed(tmp_path: Path) -> None:
    both = run_delay_test(_request(tmp_path, GPU_SLOPE="1"), Path("/x.so")).test
    assert both.binds == "host+gpu"
    refused = run_delay_test(_request(tmp_path, FAKE_REFUSE_GPU="1"), Path("/x.so")).test
    gpu = refused.slope("gpu")
    assert gpu.verdict == "not tested" and gpu.note == "no stream to delay"
    assert refused.binds == "host"


def test_a_program_whose_marks_give_no_period_is_delayed_by_half_its_own_frame(tmp_path: Path) -> None:
    # one mark a run (asyncAPI's shape): the library gives no frame period, the program prints 2,600 µs a frame;
    # the delay is half of that (1,300 µs), not the 10 µs of a frame not known, which its spread would swamp
    import dataclasses

    req = dataclasses.replace(_request(tmp_path, FAKE_MARKS="1", FAKE_PERIOD="2600"), k_us=None, warmup=0)
    t = run_delay_test(req, Path("/x.so")).test
    assert t.k_us == 1300.0 and t.link_bytes == 13_000_000  # 1,300 µs at 10 GB/s
    host = t.slope("host")
    assert host.base_us == pytest.approx(2600.0, abs=0.01) and host.delayed_us == pytest.approx(3900.0, abs=0.01)
    assert host.slope == pytest.approx(1.0, abs=1e-4) and host.verdict == "binds" and "own printed figure" in host.note


def test_the_delay_is_half_the_frame_within_bounds() -> None:
    assert choose_k(36.4, None) == 18.2
    assert choose_k(1.0, None) == K_MIN_US
    assert choose_k(1e6, None) == 10_000.0
    assert choose_k(36.4, 5.0) == 5.0
    assert choose_k(None, None) == K_MIN_US * 5


def test_link_bytes_and_points() -> None:
    assert link_bytes_for(10.0, 25.0) == 250_000
    assert link_bytes_for(1e-6, 1.0) == LINK_BASE_BYTES
    assert link_bytes_for(10.0, None) is None
    names = [p.name for p in points(5.0, link=True, bare=True)]
    assert names == ["none", "host", "gpu0", "gpu", "link0", "link", "bare"]
    assert [p.name for p in points(5.0, link=False, bare=False)] == ["none", "host", "gpu0", "gpu"]
    assert Point("gpu", 0.0).name == "gpu0"


def test_the_link_is_sized_by_the_units_rate_where_it_was_measured() -> None:
    from clusterbench.run.whatbinds import link_rate

    # daq_loop on GPU-24707a35: the trace's copies ran at 36.1 GB/s, one copy of k µs at the unit's 54.75
    assert link_rate(54.75, 36.1) == (54.75, "unit")
    assert link_rate(None, 36.1) == (36.1, "trace")
    assert link_rate(None, None) == (None, "trace")
    # 18.3 µs at the unit's rate: 18.3 x 54.75e3 bytes (GB/s = 1e3 bytes per µs)
    assert link_bytes_for(18.3, link_rate(54.75, 36.1)[0]) == round(18.3 * 54.75e3)


def test_fit_without_a_link_rate_says_why() -> None:
    runs = [DelayRun("none", 0, 0, 20.0), DelayRun("host", 5, 0, 25.0), DelayRun("gpu", 0, 0, 21.0),
            DelayRun("gpu", 5, 0, 21.5)]
    t = fit(runs, 5.0, 1, None, None)
    assert t.slope("host").slope == pytest.approx(1.0)
    assert t.slope("gpu").slope == pytest.approx(0.1) and t.slope("gpu").verdict == "slack"
    assert t.slope("link").verdict == "not tested" and "H2D" in t.slope("link").note
    assert t.bare_us is None and t.cost is None


def test_a_program_of_one_frame_is_timed_by_its_own_figure() -> None:
    # one mark a run (asyncAPI): no period from the marks; the program's own figure (ms/frame) is its frame
    runs = [DelayRun("none", 0, p, None, own_us=2650.0 + p) for p in range(2)]
    runs += [DelayRun("host", 100, p, None, own_us=2651.0 + p) for p in range(2)]
    runs += [DelayRun("gpu", 0, p, None, own_us=2660.0 + p) for p in range(2)]
    runs += [DelayRun("gpu", 100, p, None, own_us=2760.0 + p) for p in range(2)]
    t = fit(runs, 100.0, 2, None, None)
    host, gpu = t.slope("host"), t.slope("gpu")
    assert host.slope == pytest.approx(0.01) and host.verdict == "slack" and "own printed figure" in host.note
    assert gpu.slope == pytest.approx(1.0) and gpu.verdict == "binds"
    assert t.binds == "gpu"


# ----------------------------------------------------------------------------- callback domains from the trace


def test_domains_follow_the_programs_own_driver_calls():
    """The driver domain only where the program issues GPU work through the driver API itself: zoo no_nvtx
    launches through cuLaunchKernel (1,000 rows named so in its export's RUNTIME table); zoo host_bound's export
    holds only the runtime's own driver calls (cuKernelGetName 1,001, cuLibraryGetKernel, cuLibraryLoadData,
    cuModuleGetLoadingMode), which issue no work; no trace: both, to be safe."""
    from clusterbench.run.whatbinds import BOTH_DOMAINS, RUNTIME_ONLY, domains_for

    data = Path(__file__).resolve().parents[1] / "data" / "zoo"
    domains, why = domains_for(data / "zoo_no_nvtx.sqlite")
    assert domains == BOTH_DOMAINS and "cuLaunchKernel" in why
    assert domains_for(data / "zoo_host_bound.sqlite")[0] == RUNTIME_ONLY
    assert domains_for(None)[0] == BOTH_DOMAINS


def test_domains_of_an_unreadable_trace_are_both(tmp_path):
    from clusterbench.run.whatbinds import BOTH_DOMAINS, domains_for

    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database at all" * 10)
    domains, why = domains_for(bad)
    assert domains == BOTH_DOMAINS and "could not be read" in why
