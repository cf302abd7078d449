"""compare TRACE_A TRACE_B: two nsys SQLite exports (written by the real writer, read by the real reader),
per engine and per kernel name, with values worked out here by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.cli import app
from clusterbench.compare.compare import Reason, Verdict
from clusterbench.compare.traces import analyze_for_compare, compare_traces, is_trace, kernel_times
from clusterbench.errors import InputError
from clusterbench.io.nsys.writer import CopyRecord, GpuRecord, KernelRecord, RangeRecord, write_trace_sqlite

FRAMES = 10
H200 = GpuRecord(0, "NVIDIA H200")


def _trace(path: Path, find_ns: int, ped_ns: int, h2d_ns: int, d2h_ns: int, *, streams: int = 1,
           gpu: GpuRecord = H200, frames: int | None = FRAMES) -> Path:
    """One pass window [0, 100 000) ns: per frame, on stream 7 (and the next streams round robin) the
    pedestal kernel, an H2D copy, the find_clusters kernel and a D2H copy, back to back in that order."""
    kernels, copies = [], []
    t = 1000
    for f in range(FRAMES):
        s = 7 + f % streams
        kernels.append(KernelRecord(t, t + ped_ns, 0, 1, s, 1, 100, "subtract_pedestal"))
        t += ped_ns
        copies.append(CopyRecord(t, t + h2d_ns, 0, 1, s, 2, 100, 1 << 20, 1))
        t += h2d_ns
        kernels.append(KernelRecord(t, t + find_ns, 0, 1, s, 3, 100, "find_clusters"))
        t += find_ns
        copies.append(CopyRecord(t, t + d2h_ns, 0, 1, s, 4, 100, 1 << 19, 2))
        t += d2h_ns
    assert t < 100_000
    text = f"clusterbench:pass frames={frames}" if frames else "clusterbench:pass"
    return write_trace_sqlite(path, kernels, copies, ranges=[RangeRecord(0, 100_000, text, 100, 100)], gpu=gpu)


def test_two_traces_per_engine_and_per_kernel(tmp_path: Path) -> None:
    # before: pedestal 500 ns, H2D 2000, find 3000, D2H 1000 per frame; after: find 1500 (half), the rest the same
    a = _trace(tmp_path / "a.sqlite", 3000, 500, 2000, 1000)
    b = _trace(tmp_path / "b.sqlite", 1500, 500, 2000, 1000)
    ta, tb = analyze_for_compare(a), analyze_for_compare(b)
    ka, kb = kernel_times(ta.primary), kernel_times(tb.primary)
    assert ka == pytest.approx({"find_clusters": 3.0, "subtract_pedestal": 0.5})  # µs per frame: ns / 1000
    assert kb == pytest.approx({"find_clusters": 1.5, "subtract_pedestal": 0.5})
    tc = compare_traces(ta, tb, ka, kb)
    e = {m.name: m for m in tc.engines}
    # kernel engine: (3000 + 500) ns -> (1500 + 500) ns per frame = 3.5 -> 2.0 µs/frame, -42.86 %
    k = e["kernel_us"]
    assert (k.before, k.after) == (pytest.approx(3.5), pytest.approx(2.0))
    assert k.delta_pct == pytest.approx((2.0 - 3.5) / 3.5 * 100)
    assert (k.verdict, k.code, k.floor_pct) == (Verdict.FASTER, Reason.BEYOND_NOISE, 1.0)
    assert k.noise == pytest.approx(0.035)  # the 1 % rule: 1 % of 3.5 µs/frame
    assert (e["h2d_us"].verdict, e["h2d_us"].code) == (Verdict.SAME, Reason.IDENTICAL)
    assert e["h2d_us"].before == pytest.approx(2.0) and e["d2h_us"].before == pytest.approx(1.0)
    # the roofline: kernel 3.5 binds before; after, the kernel 2.0 ties H2D 2.0
    roof = e["roofline_us"]
    assert roof.before == pytest.approx(3.5) and roof.after == pytest.approx(2.0)
    assert tc.before.binds == "kernel"
    names = [m.name for m in tc.kernels]
    assert names == ["find_clusters", "subtract_pedestal"]  # the busiest first
    find = tc.kernels[0]
    assert find.delta_pct == pytest.approx(-50.0) and find.verdict is Verdict.FASTER
    assert tc.kernels[1].code is Reason.IDENTICAL
    assert tc.before.frames == tc.after.frames == FRAMES and tc.warnings == ()


def test_multi_stream_transfers_of_two_traces_are_held_to_the_drift_bound(tmp_path: Path) -> None:
    # 4 streams; H2D 2000 -> 2300 ns per frame (+15 %): within the 20 % bound, NOT COMPARABLE;
    # D2H 1000 -> 1300 (+30 %): beyond, SLOWER, marked cross-session; the kernel keeps the 1 % rule
    a = _trace(tmp_path / "a.sqlite", 3000, 500, 2000, 1000, streams=4)
    b = _trace(tmp_path / "b.sqlite", 3000, 500, 2300, 1300, streams=4)
    tc = compare_traces(analyze_for_compare(a), analyze_for_compare(b))
    e = {m.name: m for m in tc.engines}
    assert tc.before.streams == 4
    h2d, d2h = e["h2d_us"], e["d2h_us"]
    assert (h2d.verdict, h2d.code, h2d.bound_pct) == (Verdict.NOT_COMPARABLE, Reason.SESSION_DRIFT, 20.0)
    assert h2d.delta_pct == pytest.approx(15.0) and h2d.noise == pytest.approx(0.4)  # 20 % of 2.0 µs/frame
    assert (d2h.verdict, d2h.code, d2h.cross_session) == (Verdict.SLOWER, Reason.BEYOND_DRIFT, True)
    assert d2h.delta_pct == pytest.approx(30.0)
    assert e["kernel_us"].code is Reason.IDENTICAL
    assert any("drift bound" in w for w in tc.warnings)


def test_what_cannot_be_compared(tmp_path: Path) -> None:
    a = _trace(tmp_path / "a.sqlite", 3000, 500, 2000, 1000)
    other = _trace(tmp_path / "o.sqlite", 3000, 500, 2000, 1000, gpu=GpuRecord(0, "NVIDIA H100 80GB HBM3"))
    with pytest.raises(InputError, match="different GPUs"):
        compare_traces(analyze_for_compare(a), analyze_for_compare(other))
    assert compare_traces(analyze_for_compare(a), analyze_for_compare(other), allow_different_gpu=True).warnings
    nofr = _trace(tmp_path / "n.sqlite", 3000, 500, 2000, 1000, frames=None)
    with pytest.raises(InputError, match="frames unknown"):
        compare_traces(analyze_for_compare(a), analyze_for_compare(nofr))
    t = compare_traces(analyze_for_compare(a, frames="10"), analyze_for_compare(nofr, frames="10"))
    assert t.after.frames == 10
    with pytest.raises(InputError, match="--frames .ten. is not a frame count or definition"):
        analyze_for_compare(a, frames="ten")
    assert is_trace(a) and not is_trace(tmp_path)


def test_cli_two_traces(tmp_path: Path) -> None:
    a = _trace(tmp_path / "a.sqlite", 3000, 500, 2000, 1000)
    b = _trace(tmp_path / "b.sqlite", 1500, 500, 2000, 1000)
    r = CliRunner().invoke(app, ["compare", str(a), str(b)], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert all(len(ln) <= 80 for ln in lines)
    kernel = next(ln for ln in lines if ln.startswith("  kernel "))
    assert kernel.split() == ["kernel", "3.50", "→", "2.00", "-42.86", "%", "FASTER", "beyond_noise"]
    find = next(ln for ln in lines if ln.startswith("  find_clusters"))
    assert find.split()[1:] == ["3.00", "→", "1.50", "-50.00", "%", "FASTER", "beyond_noise"]
    assert "engines (µs/frame), binds kernel" in r.stdout
    doc = json.loads(CliRunner().invoke(app, ["compare", str(a), str(b), "--json"]).stdout)
    assert doc["kind"] == "traces" and doc["engines"]["kernel_us"]["verdict"] == "FASTER"
    assert doc["kernels"][0]["name"] == "find_clusters" and doc["kernels"][0]["after"] == pytest.approx(1.5)
    assert doc["floors"]["drift_bound_pct"] == 20.0
    # a trace and a dir, a missing trace, a format two traces do not have: one Error line, exit 2
    for args, text in (([str(a), str(tmp_path)], "two traces or two results dirs"),
                       ([str(a), str(tmp_path / "x.sqlite")], "trace does not exist"),
                       ([str(a), str(b), "--markdown"], "--json or the text layout only"),
                       ([str(a), str(b), "--window", "0:10ms"], "--window")):
        r = CliRunner().invoke(app, ["compare", *args])
        assert r.exit_code == 2 and text in r.stderr and "Traceback" not in r.output, (args, r.output)


def test_a_roofline_on_the_host_bar_of_two_traces_is_not_judged() -> None:
    # two host-bound programs of the zoo (real H200 exports): each roofline binds on the launching thread's bar,
    # whose noise from one trace to the next no A/A measured; the engines are judged as ever
    zoo = Path(__file__).resolve().parents[1] / "data" / "zoo"
    turns = analyze_for_compare(zoo / "zoo_turns.sqlite", frames="1000")
    host = analyze_for_compare(zoo / "zoo_host_bound.sqlite", frames="1000")
    c = compare_traces(turns, host)
    assert (c.before.binds, c.after.binds) == ("host", "host")
    roof = next(m for m in c.engines if m.name == "roofline_us")
    assert roof.verdict is Verdict.NOT_COMPARABLE and roof.code is Reason.HOST_BOUND
    assert "sustained FPS" in roof.reason
    assert next(m for m in c.engines if m.name == "kernel_us").verdict is Verdict.FASTER
    # a trace against itself stays identical
    same = compare_traces(turns, turns).engines
    assert next(m for m in same if m.name == "roofline_us").code is Reason.IDENTICAL
