"""The window: --window specs, ranges of any domain, ms windows, and set-up cut off the span.

Expected windows come from the facts the zoo fakes record while they lay out a trace (where the
loop's first copy starts, where its last copy ends), never from clusterbench.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import zoo_fakes as Z
from clusterbench.analyzers import analyze_trace
from clusterbench.analyzers.window import parse
from clusterbench.errors import InputError, TraceError

from fake_nsys import Kernel, Range, Trace, build


def bounds(r) -> tuple[int, int]:
    w = r.primary.window
    return w.start_ns, w.end_ns


@pytest.mark.parametrize("spec", ["range:", "range:x#0", "ms:5-3", "ms:x-y", "ms:3", "whole", "range"])
def test_bad_window_specs_are_input_errors(spec: str) -> None:
    with pytest.raises(InputError) as info:
        parse(spec)
    assert info.value.hint and "range:NAME" in info.value.hint


def test_window_specs() -> None:
    assert parse(None).kind == parse("auto").kind == "auto"
    w = parse("range:event loop@zoo_daq#2")
    assert (w.kind, w.name, w.domain, w.instance) == ("range", "event loop", "zoo_daq", 2)
    assert (parse("ms:1.5-20").start_ms, parse("ms:1.5-20").end_ms) == (1.5, 20.0)
    assert parse(None, range_name="pass").name == "pass"  # --range NAME is range:NAME
    with pytest.raises(InputError, match="cannot be combined"):
        parse("span", range_name="pass")


def test_no_nvtx_cuts_the_set_up_off_the_span(tmp_path: Path) -> None:
    # the first H2D is set-up: a JIT gap ending in cuModuleLoadData separates it from the loop and it
    # holds 1 of 121 records (< 10 %); the mid-loop allocation + JIT gap stays in the window
    p = Z.no_nvtx()
    f = p.facts
    r = analyze_trace(build(tmp_path / "n.sqlite", p.trace))
    w = r.primary.window
    assert w.mode == "trimmed-span" and bounds(r) == (f["loop_start"], f["loop_end"])
    assert (w.cut_before_ns, w.cut_after_ns) == (f["loop_start"] - f["first_h2d"][0], 0)
    assert w.cut_note.startswith(f"{w.cut_before_ns / 1e6:,.3f} ms before: 1 separating gap (1 module_load) and 1 GPU record")
    gp = r.primary.gaps
    assert len(gp) == 1 and gp.cause_of(0) == "module_load"
    # the mid-loop gap: from the end of the last GPU record before frame 20 to the first one after it
    assert int(gp.starts_ns[0]) == f["mid"]["gpu_idle_from"]
    assert int(gp.parts_ns[0, 1]) == 3 * Z.MS  # the 1 ms cudaMalloc and the 2 ms cudaFree
    # span: nothing cut
    s = analyze_trace(tmp_path / "n.sqlite", window="span")
    assert bounds(s) == (f["first_h2d"][0], f["loop_end"]) and len(s.primary.gaps) == 2


def test_a_long_host_sleep_separates_the_warm_up(tmp_path: Path) -> None:
    # nvtx_domain without a capture: warm-up H2D + zoo_calib, a 50 ms sleep (host: no call), the loop;
    # no pass range, so auto trims: the sleep is a host gap of >= 1 ms with no other gap to compare
    p = Z.nvtx_domain()
    r = analyze_trace(build(tmp_path / "d.sqlite", p.trace))
    assert r.primary.window.mode == "trimmed-span"
    assert bounds(r) == (p.facts["first"], p.facts["last"])
    assert "(1 host) and 2 GPU records" in r.primary.window.cut_note


def test_ranges_of_a_domain_registered_or_not(tmp_path: Path) -> None:
    p = Z.nvtx_domain()
    path = build(tmp_path / "d.sqlite", p.trace)
    # 'event loop' is an inline (not registered) string in domain zoo_daq
    r = analyze_trace(path, window="range:event loop@zoo_daq")
    assert bounds(r) == p.facts["loop"]
    assert r.primary.window.source == "NVTX range 'event loop' in domain zoo_daq"
    # 'batch' ranges are registered strings (textId); #2 is the second in time
    r2 = analyze_trace(path, window="range:batch@zoo_daq#2")
    assert bounds(r2) == p.facts["batches"][1] and r2.primary.window.ranges == 1
    # all three batches: their union
    r3 = analyze_trace(path, range_name="batch")
    assert r3.primary.window.ranges == 3 and r3.primary.window.length_ns == sum(b - a for a, b in p.facts["batches"])
    with pytest.raises(TraceError, match="no NVTX range starts with 'batch' in domain 'other'"):
        analyze_trace(path, window="range:batch@other")
    with pytest.raises(InputError, match="has 3 such range"):
        analyze_trace(path, window="range:batch#4")


def test_a_capture_holds_only_the_loop(tmp_path: Path) -> None:
    # what a cudaProfilerStart/Stop capture keeps: the loop, no set-up to cut
    p = Z.nvtx_domain(capture=True)
    r = analyze_trace(build(tmp_path / "c.sqlite", p.trace))
    assert bounds(r) == (p.facts["first"], p.facts["last"]) and r.primary.window.cut_note is None
    assert len(r.primary.gaps) == 0


def test_ms_window_on_the_trace_clock(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(1_000_000, 2_000_000), Kernel(3_000_000, 4_000_000)])
    path = build(tmp_path / "m.sqlite", t)
    r = analyze_trace(path, window="ms:1.5-3.5")
    assert bounds(r) == (1_500_000, 3_500_000)
    assert r.primary.busy.engines["kernel"].busy_ns == 1_000_000  # [1.5,2) and [3,3.5) ms
    with pytest.raises(InputError, match="holds no GPU activity"):
        analyze_trace(path, window="ms:10-20")


def test_set_up_holding_many_records_is_not_cut(tmp_path: Path) -> None:
    # 20 set-up kernels, a module-load gap, 20 loop kernels: the set-up holds 50 % of the records
    from fake_nsys import Api

    k = [Kernel(i * 1000, i * 1000 + 500) for i in range(20)] + [Kernel(10_000_000 + i * 1000, 10_000_000 + i * 1000 + 500) for i in range(20)]
    api = [Api(0, 100, "cudaLaunchKernel_v7000"), Api(9_000_000, 9_100_000, "cuModuleLoadData"), Api(9_900_000, 9_900_100, "cudaLaunchKernel_v7000")]
    r = analyze_trace(build(tmp_path / "s.sqlite", Trace(kernels=k, api=api)))
    assert bounds(r) == (0, 10_019_500) and r.primary.window.cut_note is None
    assert r.primary.gaps.cause_of(0) == "module_load"  # reported as set-up inside the window


def test_pass_range_wins_in_auto(tmp_path: Path) -> None:
    t = Trace(kernels=[Kernel(0, 10), Kernel(100, 200)], ranges=[Range(50, 250, "pass frames=2")])
    r = analyze_trace(build(tmp_path / "p.sqlite", t))
    assert r.primary.window.mode == "pass-range" and bounds(r) == (50, 250) and r.primary.frames.count == 2
