"""The scan's bounds compare like with like: an untraced FPS against the roofline without the profiler, and a
point above both bounds says why (values worked out by hand)."""

from __future__ import annotations

import dataclasses

import pytest

from rich.console import Console

from clusterbench.model.measurement import SUSTAINED_FPS, Measurement
from clusterbench.model.results import ResultRow, RowKey
from clusterbench.render.probe import render_scan, render_summary
from clusterbench.run.config import ProbeConfig
from clusterbench.run.scan import Scan, scan_points


def _row(label: str, fps: float, **kw) -> ResultRow:
    m = Measurement(SUSTAINED_FPS, (fps, fps))
    return ResultRow(key=RowKey(label), cluster=3, cap=100, streams=1, batch=1, frames=4000, sustained_fps=fps,
                     measurements=(m,), **kw)


def _cfg(label: str, streams: str) -> ProbeConfig:
    from clusterbench.model.params import WorkloadParams

    return ProbeConfig(label=label, params=WorkloadParams(cluster=3, cap=100, streams=int(streams), batch=1,
                                                          frames=4000, rows=32, cols=32),
                       scanned_from="hb", point=(("streams", streams),))


def test_a_host_bound_point_is_set_against_its_untraced_host_bar() -> None:
    # host bar 12 µs traced (83,333 FPS), 8 µs untraced (125,000 FPS); GPU bars 2 + 3 + 1 = 6 µs (166,667 FPS)
    row = _row("hb.streams1", 120_000.0, kernel_us=2.0, h2d_us=3.0, d2h_us=1.0, roofline_us=12.0, binds="host",
               roofline_fps=1e6 / 12, serial_us=6.0, host_us=12.0, host_untraced_us=8.0, host_estimate="calibrated",
               roofline_untraced_us=8.0, roofline_note="the profiler's inflation of the host bar")
    (p,) = scan_points([row], [_cfg("hb.streams1", "1")])
    # the roofline: 125,000 FPS; the bars added up cannot be faster than the tallest: max(6, 8) = 8 µs
    assert p.roofline_fps == 125_000.0 and p.serial_fps == 125_000.0
    assert p.nearer == "roofline" and not p.above_both  # 120,000 is below both: no "sum" for a faster point
    text = _render(render_scan([p], [Scan("streams", ("1",))]))
    assert "roofline*" in text and "hb.streams1: * the profiler's inflation of the host bar" in text


def test_a_point_above_both_bounds_says_so_and_why() -> None:
    # no estimate (the host bar as traced, 12 µs: 83,333 FPS) and 120,000 FPS: 44 % above both bounds
    row = _row("hb.streams4", 120_000.0, kernel_us=2.0, roofline_us=12.0, binds="host", roofline_fps=1e6 / 12,
               serial_us=6.0, host_us=12.0, roofline_untraced_us=12.0,
               roofline_note="sustained 120,000 FPS is 44.0 % above the roofline without the profiler")
    (p,) = scan_points([row], [_cfg("hb.streams4", "4")])
    assert p.above_both and p.nearer == "above both" and "44.0 %" in p.note
    bare = _row("x", 120_000.0, roofline_us=12.0, binds="host", roofline_fps=1e6 / 12, serial_us=6.0)
    (q,) = scan_points([bare], [_cfg("x", "1")])
    assert q.nearer == "above both" and "a bar of the trace overstates its cost" in q.note  # never bare


def test_the_summary_marks_a_row_above_a_roofline_and_says_how_far_the_estimate_is_from_the_rate() -> None:
    row = _row("hb", 120_000.0, kernel_us=2.0, h2d_us=3.0, d2h_us=1.0, roofline_us=12.0, binds="host",
               roofline_fps=1e6 / 12, host_us=12.0, host_untraced_us=8.0, host_estimate="calibrated",
               roofline_untraced_us=8.0, fps_efficiency=120_000 / 125_000,
               roofline_note="the profiler's inflation of the host bar")
    text = _render(render_summary([row], width=80))
    assert "125,000" in text and "96*" in text  # the untraced roofline and 96 %, not 144 %
    # the untraced frame: 10^6 / 120,000 = 8.33 µs; the estimate, 8 µs, is 4.0 % below it: within 10 %
    assert ("hb: host bar 12.00 µs/frame under nsys, 8.00 µs/frame without it (calibrated); the untraced rate is "
            "8.33 µs/frame: the host bar is -4.0 % from it: the host's own work is the frame") in text


@pytest.mark.parametrize("host_untraced, fps, said", [
    # a one-stream loop on an H100 (daq_loop): 12.04 µs of host work in a 36.92 µs frame (27,086 FPS): -67.4 %
    (12.04, 27_086.0, "36.92 µs/frame: the host bar is -67.4 % from it: the frame is longer than every bar, so the "
                      "resources take turns, at least in part, or wait on each other"),
    # 12 µs of host work in a 10 µs frame (100,000 FPS): +20.0 %, which no thread's own work can be
    (12.0, 100_000.0, "10.00 µs/frame: the host bar is +20.0 % from it, longer than the frame, which cannot be: "
                      "the measured bar overstates the host's own time"),
    # 9.2 µs in a 10 µs frame: -8.0 %, within 10 %
    (9.2, 100_000.0, "10.00 µs/frame: the host bar is -8.0 % from it: the host's own work is the frame"),
])
def test_the_host_bar_is_set_against_the_untraced_frame(host_untraced: float, fps: float, said: str) -> None:
    row = _row("loop", fps, kernel_us=1.5, h2d_us=8.5, d2h_us=3.7, roofline_us=16.59, binds="host",
               roofline_fps=1e6 / 16.59, host_us=16.59, host_untraced_us=host_untraced, host_estimate="measured",
               roofline_untraced_us=host_untraced)
    assert f"the untraced rate is {said}" in " ".join(_render(render_summary([row], width=200)).split())


def _render(renderable) -> str:
    con = Console(width=200, record=True, file=open("/dev/null", "w"))
    con.print(renderable)
    return con.export_text()


def test_a_what_binds_scan_shows_the_trace_and_the_delay_test_side_by_side() -> None:
    # an H100's daq_loop (one thread) at 1 and 4 streams: the traced host bar is the tallest (16.59 and 16.24 µs),
    # untraced 12.04 and 11.61 µs; the GPU bars 1.54 + 8.53 + 3.68 = 13.75 and 2.93 + 9.19 + 5.67 = 17.79 µs.
    # 1 stream: 27,086 FPS (36.92 µs) against the roofline 10^6 / 12.04 = 83,056 FPS and the sum of the bars
    # 10^6 / (13.75 + 12.04) = 38,775 FPS: nearer the sum (ln 83,056 / 27,086 = 1.12 > ln 38,775 / 27,086 = 0.36):
    # the resources take turns; the delay test: GPU and link bind (0.95, 0.78), the host 0.53.
    # 4 streams: 59,374 FPS against 10^6 / 11.61 = 86,133 and the bars' sum max(17.79 + 11.61, 11.61) = 29.40 µs,
    # 34,014 FPS: ln(86,133 / 59,374) = 0.372 < ln(59,374 / 34,014) = 0.557: nearer the roofline, they overlap;
    # the delay test: no slope at 0.75 or above, host 0.65 and link 0.34 in between: shared.
    rows = [_row("daq.streams1", 27_086.0, kernel_us=1.54, h2d_us=8.53, d2h_us=3.68, roofline_us=16.59, binds="host",
                 roofline_fps=1e6 / 16.59, serial_us=13.75 + 12.04, host_us=16.59, host_untraced_us=12.04,
                 host_estimate="measured", roofline_untraced_us=12.04, delay_binds="gpu+link", delay_slope_host=0.53,
                 delay_slope_gpu=0.95, delay_slope_link=0.78),
            _row("daq.streams4", 59_374.0, kernel_us=2.93, h2d_us=9.19, d2h_us=5.67, roofline_us=16.24, binds="host",
                 roofline_fps=1e6 / 16.24, serial_us=17.79 + 11.61, host_us=16.24, host_untraced_us=11.61,
                 host_estimate="measured", roofline_untraced_us=11.61, delay_binds="shared", delay_slope_host=0.65,
                 delay_slope_gpu=0.05, delay_slope_link=0.34)]
    points = scan_points(rows, [_cfg("daq.streams1", "1"), _cfg("daq.streams4", "4")])
    assert [p.nearer for p in points] == ["sum", "roofline"]
    assert points[0].to_json()["delay_slopes"] == {"host": 0.53, "gpu": 0.95, "link": 0.78}
    text = _render(render_scan(points, [Scan("streams", ("1", "4"))], width=80))
    lines = text.splitlines()
    assert any(ln.startswith("what binds, point by point") for ln in lines)
    row1 = next(ln for ln in lines if ln.split()[:2] == ["hb", "1"] and "gpu+link" in ln)
    assert row1.split()[2:] == ["host", "gpu+link", "0.53", "0.95", "0.78"]
    row4 = next(ln for ln in lines if ln.split()[:2] == ["hb", "4"] and "shared" in ln)
    assert row4.split()[2:] == ["host", "shared", "0.65", "0.05", "0.34"]
    con = Console(width=80, record=True, file=open("/dev/null", "w"))
    con.print(render_scan(points, [Scan("streams", ("1", "4"))], width=80))
    narrow = con.export_text().splitlines()
    assert max(len(ln.rstrip()) for ln in narrow) <= 80
    assert any(ln.split()[:2] == ["hb", "4"] and "shared" in ln for ln in narrow)  # the table fits whole
    # a scan without the delay test has no such table
    bare = scan_points([dataclasses.replace(r, delay_binds=None) for r in rows],
                       [_cfg("daq.streams1", "1"), _cfg("daq.streams4", "4")])
    assert "point by point" not in _render(render_scan(bare, [Scan("streams", ("1", "4"))], width=80))


def test_the_scan_puts_the_trace_replayed_beside_the_delay_test() -> None:
    # GPU-24707a35's daq_loop at 1 and 4 streams (docs/measurements/2026-12-07_h100-untraced-replay): the delay
    # test host+gpu (0.78, 1.25, 0.68) and host (0.91, -0.25, 0.40); the replay 0.71 / 0.95 / 0.95 (GPU and
    # link at or above 0.75: gpu+link) and 0.99 / 0.05 / 0.47 (host alone at or above 0.75: host)
    from clusterbench.analyzers.untraced import binds_code, judge
    from clusterbench.model.untraced import DelayTest, SlopeFit, UntracedRecord

    def record(host: float, gpu: float, link: float, test: tuple[tuple[float, float], ...]) -> UntracedRecord:
        fits = tuple(SlopeFit(r, 8.0, s, None, 20.0, 20.0 + 8.0 * s, 0, judge(s), "replayed from the trace")
                     for r, s in (("host", host), ("gpu", gpu), ("link", link)))
        measured = tuple(SlopeFit(r, 8.0, s, sp, 20.0, 20.0 + 8.0 * s, 2, judge(s))
                         for r, (s, sp) in zip(("host", "gpu", "link"), test))
        return UntracedRecord(None, DelayTest(2, 8.0, None, None, (), measured, binds_code(measured)), None,
                              replay=fits)

    rows = [_row("daq.streams1", 26_000.0, kernel_us=1.5, h2d_us=8.5, d2h_us=3.7, roofline_us=16.6, binds="host",
                 roofline_fps=1e6 / 16.6, serial_us=25.8, delay_binds="host+gpu", delay_slope_host=0.78,
                 delay_slope_gpu=1.25, delay_slope_link=0.68),
            _row("daq.streams4", 60_000.0, kernel_us=2.9, h2d_us=9.2, d2h_us=5.7, roofline_us=16.2, binds="host",
                 roofline_fps=1e6 / 16.2, serial_us=29.4, delay_binds="host", delay_slope_host=0.91,
                 delay_slope_gpu=-0.25, delay_slope_link=0.40)]
    # the test's spreads as measured there: 1 stream ± 0.08, 0.07, 0.10 (the replay's GPU 0.95 lies 0.30 from
    # 1.25: beyond); 4 streams ± 0.09, 0.69, 0.56
    untraced = {"daq.streams1": record(0.71, 0.95, 0.95, ((0.78, 0.08), (1.25, 0.07), (0.68, 0.10))),
                "daq.streams4": record(0.99, 0.05, 0.47, ((0.91, 0.09), (-0.25, 0.69), (0.40, 0.56)))}
    points = scan_points(rows, [_cfg("daq.streams1", "1"), _cfg("daq.streams4", "4")], untraced)
    assert [(p.trace_binds, p.agree, p.within_spread) for p in points] == [("gpu+link", False, False),
                                                                            ("host", True, True)]
    # 2 streams there: the test host 0.76 ± 0.47 (binds), the replay 0.74 (shared): other words, one slope
    row2 = dataclasses.replace(rows[0], key=dataclasses.replace(rows[0].key, config="daq.streams2"),
                               delay_binds="host", delay_slope_host=0.76, delay_slope_gpu=0.55, delay_slope_link=0.58)
    (near,) = scan_points([row2], [_cfg("daq.streams2", "2")],
                          {"daq.streams2": record(0.74, 0.47, 0.51, ((0.76, 0.47), (0.55, 0.19), (0.58, 0.35)))})
    assert (near.agree, near.within_spread) == (False, True)
    assert points[1].to_json()["trace_slopes"] == {"host": 0.99, "gpu": 0.05, "link": 0.47}
    con = Console(width=80, record=True, file=open("/dev/null", "w"))
    con.print(render_scan(points, [Scan("streams", ("1", "4"))], width=80))
    text = con.export_text()
    assert max(len(ln.rstrip()) for ln in text.splitlines()) <= 80
    assert "replayed" in text and "gpu+link ≠" in text and "(0.99)" in text and "(0.05)" in text
    # without the replay the table keeps its columns as before
    assert scan_points(rows, [_cfg("daq.streams1", "1")])[0].agree is None


def test_the_side_by_side_table_fits_80_columns_with_the_longest_verdicts() -> None:
    # GPU-ea5b8094's daq_loop (docs/measurements/2026-12-07_h100-untraced-domain): at 2 streams the test
    # host 0.54 ± 0.19, GPU -0.02 ± 0.14, link 0.66 ± 0.09 (none at 0.75: shared), the replay 0.81 / 0.47 / 0.54
    # (host alone: host; its 0.81 lies 0.27 above 0.54 + 0.19: beyond, ≠); and a point where every resource
    # binds in the test and the replay gives GPU and link, the longest pair of verdicts (13 and 10 characters)
    from clusterbench.analyzers.untraced import binds_code, judge
    from clusterbench.model.untraced import DelayTest, SlopeFit, UntracedRecord

    def record(replay: tuple[float, ...], test: tuple[tuple[float, float], ...]) -> UntracedRecord:
        fits = tuple(SlopeFit(r, 8.0, s, None, 20.0, 20.0 + 8.0 * s, 0, judge(s), "replayed") for r, s in zip(("host", "gpu", "link"), replay))
        measured = tuple(SlopeFit(r, 8.0, s, sp, 20.0, 20.0 + 8.0 * s, 2, judge(s)) for r, (s, sp) in zip(("host", "gpu", "link"), test))
        return UntracedRecord(None, DelayTest(2, 8.0, None, None, (), measured, binds_code(measured)), None, replay=fits)

    rows = [_row("daq_loop.streams2", 55_008.0, kernel_us=0.8, h2d_us=3.7, d2h_us=1.9, roofline_us=13.6, binds="host",
                 roofline_fps=73_574.0, serial_us=16.3, delay_binds="shared", delay_slope_host=0.54,
                 delay_slope_gpu=-0.02, delay_slope_link=0.66),
            _row("daq_loop.streams4", 72_524.0, kernel_us=0.8, h2d_us=3.7, d2h_us=1.9, roofline_us=15.8, binds="host",
                 roofline_fps=63_260.0, serial_us=17.5, delay_binds="host+gpu+link", delay_slope_host=1.12,
                 delay_slope_gpu=0.95, delay_slope_link=0.96)]
    untraced = {"daq_loop.streams2": record((0.81, 0.47, 0.54), ((0.54, 0.19), (-0.02, 0.14), (0.66, 0.09))),
                "daq_loop.streams4": record((0.50, 0.90, 0.90), ((1.12, 0.24), (0.95, 0.10), (0.96, 0.10)))}
    cfgs = [dataclasses.replace(_cfg(label, n), scanned_from="daq_loop")
            for label, n in (("daq_loop.streams2", "2"), ("daq_loop.streams4", "4"))]
    points = scan_points(rows, cfgs, untraced)
    assert [(p.delay_binds, p.trace_binds, p.agree) for p in points] == [("shared", "host", False),
                                                                          ("host+gpu+link", "gpu+link", False)]
    con = Console(width=80, record=True, file=open("/dev/null", "w"))
    con.print(render_scan(points, [Scan("streams", ("2", "4"))], width=80))
    lines = con.export_text().splitlines()
    assert max(len(ln.rstrip()) for ln in lines) <= 80
    # each point's row whole on one line: its config, streams, bar, both verdicts and the three slopes
    assert any(ln.split() == ["daq_loop", "2", "host", "shared", "host", "≠", "0.54", "-0.02", "0.66"] for ln in lines)
    assert any(ln.split()[:4] == ["daq_loop", "4", "host", "host+gpu+link"] and ln.split()[4] == "gpu+link"
               and ln.split()[-3:] == ["1.12", "0.95", "0.96"] for ln in lines)


@pytest.mark.parametrize(("test", "replay", "words"), [
    # GPU-24707a35's daq_loop at 2 streams: host 0.76 ± 0.47 binds, the replay's 0.74 shared: within the spread
    (((0.76, 0.47), (0.55, 0.19), (0.58, 0.35)), (0.74, 0.47, 0.51), "the delay test found host, with every slope"),
    # at 1 stream: the GPU 1.25 ± 0.07 against the replay's 0.95, and the link 0.68 ± 0.10 against 0.95
    (((0.78, 0.08), (1.25, 0.07), (0.68, 0.10)), (0.71, 0.95, 0.95), "the delay test found host+gpu, beyond"),
    (((0.99, 0.12), (-0.37, 0.51), (-0.19, 0.24)), (1.00, 0.03, 0.03), "host, as the delay test found"),
])  # fmt: skip
def test_the_report_sets_the_replay_against_the_test(test, replay, words) -> None:
    from clusterbench.analyzers.untraced import binds_code, judge
    from clusterbench.model.untraced import DelayTest, SlopeFit, UntracedRecord
    from clusterbench.render.untraced import render_replay

    names = ("host", "gpu", "link")
    measured = tuple(SlopeFit(r, 8.0, s, sp, 20.0, 20.0 + 8.0 * s, 2, judge(s)) for r, (s, sp) in zip(names, test))
    fits = tuple(SlopeFit(r, 8.0, s, None, 20.0, 20.0 + 8.0 * s, 0, judge(s), "replayed") for r, s in zip(names, replay))
    rec = UntracedRecord(None, DelayTest(2, 8.0, None, None, (), measured, binds_code(measured)), None, replay=fits)
    lines = render_replay(rec, 80)
    assert words in " ".join(ln.strip() for ln in lines) and all(len(ln) <= 80 for ln in lines)
