"""analysis.compare: deltas, noise verdicts, sessions, binds, end to end, the gate; render and plot.

The RTX 4090 reference (DESIGN.md): kernel µs/frame before -> after 4.32 -> 4.65 (3x3 s1),
5.00 -> 5.64 (3x3 s4), 23.80 -> 15.29 (9x9 s1), 24.72 -> 15.59 (9x9 s4); roofline after and
binds after 13.13 H2D, 16.35 H2D, 22.00 D2H, 25.39 D2H. The table gives no transfer figures,
so tests/data/compare/ chooses them, identical before and after (the change touched the
kernel only): h2d/d2h = 13.13/6.20, 16.35/7.80, 13.40/22.00, 16.60/25.39 µs/frame. Hence the
before rooflines: 13.13 H2D, 16.35 H2D, 23.80 *kernel* (23.80 > 22.00 D2H), 25.39 D2H.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from clusterbench.analysis.compare import (
    MULTI_STREAM_DRIFT_REASON,
    NO_NOISE_REASON,
    EndToEnd,
    Presence,
    Verdict,
    compare_metric,
    compare_results,
    gate_failures,
    gate_not_checked,
    noise_of,
)
from clusterbench.errors import EnvironmentFailure, InputError
from clusterbench.results import load_results, save_env, upsert_probe_row

DATA = Path(__file__).resolve().parents[1] / "data" / "compare"
BEFORE = DATA / "2026-09-10_f32_before"
AFTER = DATA / "2026-09-10_f32_after"


@pytest.fixture(scope="module")
def rtx():
    return compare_results(load_results(BEFORE), load_results(AFTER))


# ----------------------------------------------------------------------------- RTX 4090 reference


def test_rtx4090_kernel_deltas_by_hand(rtx) -> None:
    # delta % = (after - before) / before * 100, worked out from the published figures
    expected = {
        "3x3_s1_uncontended": (4.32, 4.65, 0.33 / 4.32 * 100),  # +7.64 %
        "3x3_s4": (5.00, 5.64, 0.64 / 5.00 * 100),  # +12.80 %
        "9x9_s1_uncontended": (23.80, 15.29, -8.51 / 23.80 * 100),  # -35.76 %
        "9x9_s4": (24.72, 15.59, -9.13 / 24.72 * 100),  # -36.93 %
    }
    assert [r.label for r in rtx.rows] == list(expected)
    for label, (b, a, pct) in expected.items():
        k = rtx.row(label).metric("kernel_us")
        assert (k.before, k.after) == (b, a)
        assert k.delta_pct == pytest.approx(pct, abs=1e-9)
    assert round(rtx.row("3x3_s1_uncontended").metric("kernel_us").delta_pct, 2) == 7.64
    assert round(rtx.row("9x9_s4").metric("kernel_us").delta_pct, 2) == -36.93


def test_rtx4090_verdicts_without_repeats_use_the_1pct_reproducibility_floor(rtx) -> None:
    k = rtx.row("3x3_s1_uncontended").metric("kernel_us")
    # no spread columns: the noise is 1 % of the before value, 0.01 * 4.32 = 0.0432 µs; +0.33 µs is beyond it
    assert k.verdict is Verdict.SLOWER and k.noise == pytest.approx(0.0432)
    assert k.reason.startswith("beyond ±1 %") and "no repeats measured" in k.reason
    assert rtx.row("9x9_s1_uncontended").metric("kernel_us").verdict is Verdict.FASTER
    # identical transfer figures are SAME even without repeats
    assert rtx.row("3x3_s1_uncontended").metric("h2d_us").verdict is Verdict.SAME


def test_trace_metric_change_within_1pct_is_same_without_repeats() -> None:
    # 10.000 -> 10.050 µs is +0.5 %, inside the 1 % floor (0.1 µs); 10.000 -> 10.150 is +1.5 %, outside
    same = compare_metric("d2h_us", 10.0, 10.05)
    assert same.verdict is Verdict.SAME and same.noise == pytest.approx(0.1) and same.reason.startswith("within ±1 %")
    assert compare_metric("d2h_us", 10.0, 10.15).verdict is Verdict.SLOWER
    assert compare_metric("kernel_us", 10.0, 9.85).verdict is Verdict.FASTER
    # a metric outside the trace figures still has unknown noise without repeats
    fps = compare_metric("sustained_fps", 100.0, 100.5)
    assert fps.verdict is Verdict.FASTER and fps.reason == NO_NOISE_REASON and fps.noise is None


def test_rtx4090_binds_change_and_end_to_end(rtx) -> None:
    r = rtx.row("9x9_s1_uncontended")
    assert (r.binds_before, r.binds_after, r.binds_changed) == ("kernel", "d2h", True)
    roof = r.metric("roofline_us")
    assert roof.delta_pct == pytest.approx((22.00 - 23.80) / 23.80 * 100)  # -7.56 %
    assert roof.verdict is Verdict.FASTER
    assert r.end_to_end is EndToEnd.VISIBLE and "now binds D2H" in r.end_to_end_reason
    assert any("kernel -> D2H" in n for n in r.notes)
    for label, binds in (("3x3_s1_uncontended", "H2D"), ("3x3_s4", "H2D"), ("9x9_s4", "D2H")):
        row = rtx.row(label)
        assert not row.binds_changed
        assert row.end_to_end is EndToEnd.INVISIBLE
        assert row.end_to_end_reason.startswith(f"invisible end to end (binds: {binds})")


def test_rtx4090_multi_stream_rows_across_sessions(rtx) -> None:
    assert not rtx.same_session
    s4 = rtx.row("3x3_s4")
    for name in ("h2d_us", "d2h_us", "roofline_us"):
        m = s4.metric(name)
        assert m.verdict is Verdict.NOT_COMPARABLE and MULTI_STREAM_DRIFT_REASON in m.reason
    assert s4.metric("kernel_us").verdict is Verdict.SLOWER
    assert "quote kernel changes from the 1-stream row (3x3_s1_uncontended)" in s4.metric("kernel_us").note
    s1 = rtx.row("3x3_s1_uncontended")
    assert s1.metric("h2d_us").verdict is Verdict.SAME and s1.metric("kernel_us").note is None
    assert any("3x3_s4, 9x9_s4" in w.message and "not comparable" in w.message for w in rtx.warnings)
    assert gate_not_checked(rtx) == ("3x3_s4", "9x9_s4")


# ----------------------------------------------------------------------------- one metric


def test_noise_is_the_larger_spread() -> None:
    assert noise_of(0.1, 0.3) == 0.3
    assert noise_of(None, 0.2) == 0.2
    assert noise_of(0.2, None) == 0.2
    assert noise_of(None, None) is None


@pytest.mark.parametrize(
    ("before", "after", "sb", "sa", "verdict"),
    [
        (10.0, 10.25, 0.1, 0.3, Verdict.SAME),  # |0.25| <= max(0.1, 0.3)
        (10.0, 10.3, 0.1, 0.3, Verdict.SAME),  # boundary: equal to the noise is within it
        (10.0, 10.5, 0.1, 0.3, Verdict.SLOWER),
        (10.0, 9.5, 0.1, 0.3, Verdict.FASTER),
        (10.0, 9.9, None, 0.05, Verdict.FASTER),  # one side's spread is the noise
        (10.0, 9.96, None, 0.05, Verdict.SAME),
    ],
)  # fmt: skip
def test_time_metric_verdicts_with_noise(before, after, sb, sa, verdict) -> None:
    m = compare_metric("kernel_us", before, after, spread_before=sb, spread_after=sa)
    assert m.verdict is verdict
    assert m.delta_pct == pytest.approx((after - before) / before * 100)
    word = "within" if verdict is Verdict.SAME else "beyond"
    assert m.reason.startswith(f"{word} noise ±") and m.reason.endswith("µs/frame")


def test_fps_higher_is_better() -> None:
    assert compare_metric("sustained_fps", 61400.0, 65000.0).verdict is Verdict.FASTER
    assert compare_metric("sustained_fps", 61400.0, 60000.0, spread_after=500.0).verdict is Verdict.SLOWER
    assert compare_metric("sustained_fps", 61400.0, 61000.0, spread_after=500.0).verdict is Verdict.SAME


def test_missing_and_zero() -> None:
    m = compare_metric("h2d_us", None, 3.0)
    assert m.verdict is Verdict.MISSING and m.reason == "not measured in before" and m.delta_pct is None
    z = compare_metric("d2h_us", 0.0, 1.0)
    assert z.delta_pct is None and z.verdict is Verdict.SLOWER


# ----------------------------------------------------------------------------- built dirs


def _row(label: str, kernel: float, h2d: float, d2h: float, *, streams: int = 1, cluster: int = 3,
         frames: int = 20000, **extra: object) -> dict:
    roof = max(kernel, h2d, d2h)
    binds = "kernel" if roof == kernel else ("h2d" if roof == h2d else "d2h")
    return {"label": label, "cluster": cluster, "cap": 3000, "streams": streams, "batch": 2000, "frames": frames,
            "kernel_us": kernel, "h2d_us": h2d, "d2h_us": d2h, "roofline_us": roof, "binds": binds,
            "pedestal_dtype": "float32", "pedestal": "frozen", **extra}  # fmt: skip


def _make(path: Path, rows: list[dict], **env: object) -> Path:
    base = {"gpu_name": "NVIDIA H200", "driver": "580.65", "session_id": "S", "git_dirty": False,
            "git_rev": "abc1234", "pedestal_dtype": "float32", "pedestal": "frozen"}  # fmt: skip
    base.update(env)
    for r in rows:
        upsert_probe_row(path, r)
    save_env(path, base)
    return path


def _cmp(tmp_path: Path, rows_a: list[dict], rows_b: list[dict], env_a: dict | None = None,
         env_b: dict | None = None, **kw):
    a = _make(tmp_path / "a", rows_a, **(env_a or {}))
    b = _make(tmp_path / "b", rows_b, **(env_b or {}))
    return compare_results(load_results(a), load_results(b), **kw)


def test_same_session_multi_stream_transfers_are_compared(tmp_path: Path) -> None:
    c = _cmp(tmp_path, [_row("s4", 5.0, 10.0, 4.0, streams=4)], [_row("s4", 5.0, 12.0, 4.0, streams=4)])
    m = c.row("s4").metric("h2d_us")
    assert c.same_session and m.verdict is Verdict.SLOWER and m.delta_pct == pytest.approx(20.0)


def test_row_session_column_overrides_env(tmp_path: Path) -> None:
    # same env session, but the after row was re-run in another session
    c = _cmp(tmp_path, [_row("s4", 5.0, 10.0, 4.0, streams=4, session="S")],
             [_row("s4", 5.0, 12.0, 4.0, streams=4, session="T")])  # fmt: skip
    assert c.row("s4").metric("h2d_us").verdict is Verdict.NOT_COMPARABLE


def test_one_sided_labels_are_kept(tmp_path: Path) -> None:
    c = _cmp(tmp_path, [_row("both", 4.0, 10.0, 3.0), _row("old", 4.0, 10.0, 3.0)],
             [_row("new", 5.0, 9.0, 3.0), _row("both", 4.0, 10.0, 3.0)])  # fmt: skip
    assert [(r.label, r.presence) for r in c.rows] == [
        ("both", Presence.BOTH), ("old", Presence.BEFORE_ONLY), ("new", Presence.AFTER_ONLY),
    ]  # fmt: skip
    old = c.row("old").metric("kernel_us")
    assert (old.before, old.after, old.verdict) == (4.0, None, Verdict.MISSING)
    new = c.row("new").metric("h2d_us")
    assert (new.before, new.after) == (None, 9.0) and "only in after (b)" == new.reason
    assert any("old, new" in w.message for w in c.warnings)


def test_kernel_change_within_noise_is_unchanged(tmp_path: Path) -> None:
    c = _cmp(tmp_path, [_row("a", 20.0, 10.0, 3.0, kernel_us_spread=0.5)], [_row("a", 20.3, 10.0, 3.0)])
    r = c.row("a")
    assert r.metric("kernel_us").verdict is Verdict.SAME and r.metric("kernel_us").noise == 0.5
    assert r.end_to_end is EndToEnd.KERNEL_UNCHANGED


def test_kernel_change_invisible_when_roofline_within_noise(tmp_path: Path) -> None:
    # kernel binds both times (not below a transfer bar), but the roofline move is within its noise
    c = _cmp(tmp_path, [_row("a", 20.0, 10.0, 3.0, kernel_us_spread=0.01, roofline_us_spread=0.5)],
             [_row("a", 20.2, 10.0, 3.0)])  # fmt: skip
    r = c.row("a")
    assert r.metric("kernel_us").verdict is Verdict.SLOWER
    assert r.metric("roofline_us").verdict is Verdict.SAME
    assert r.end_to_end is EndToEnd.INVISIBLE and "roofline within noise" in r.end_to_end_reason


def test_gpu_mismatch_refused_unless_allowed(tmp_path: Path) -> None:
    rows = [_row("a", 4.0, 10.0, 3.0)]
    with pytest.raises(InputError, match="different GPUs: 'NVIDIA H200' .* 'NVIDIA GeForce RTX 4090'") as exc:
        _cmp(tmp_path, rows, rows, env_b={"gpu_name": "NVIDIA GeForce RTX 4090"})
    assert "--allow-different-gpu" in exc.value.hint
    c = compare_results(load_results(tmp_path / "a"), load_results(tmp_path / "b"), allow_different_gpu=True)
    assert any("different GPUs" in w.message for w in c.warnings)


def test_environment_warnings(tmp_path: Path) -> None:
    c = _cmp(tmp_path, [_row("a", 4.0, 10.0, 3.0, frames=2000)],
             [_row("a", 4.0, 10.0, 3.0, pedestal_dtype="float64")],
             env_b={"driver": "590.1", "git_dirty": True})  # fmt: skip
    text = "\n".join(w.message for w in c.warnings)
    assert "driver differs: 580.65 before, 590.1 after" in text
    assert "pedestal dtype differs: float32 before, float64 after" in text
    assert "b was measured from a dirty tree at abc1234" in text
    assert "frames differ for a" in text
    assert any("frames differs: 2000 before, 20000 after" in n for n in c.row("a").notes)


def test_no_warnings_for_a_clean_same_session_pair(tmp_path: Path) -> None:
    c = _cmp(tmp_path, [_row("a", 4.0, 10.0, 3.0)], [_row("a", 4.1, 10.0, 3.0)])
    assert c.warnings == ()


def test_gate(tmp_path: Path) -> None:
    # roofline 10.0 -> 11.0 (+10 %), noise unknown; roofline 10.0 -> 10.4 (+4 %)
    c = _cmp(tmp_path, [_row("a", 4.0, 10.0, 3.0), _row("b", 4.0, 10.0, 3.0)],
             [_row("a", 4.0, 11.0, 3.0), _row("b", 4.0, 10.4, 3.0)])  # fmt: skip
    fails = gate_failures(c, 5.0)
    assert [(f.label, f.before_us, f.after_us) for f in fails] == [("a", 10.0, 11.0)]
    assert fails[0].delta_pct == pytest.approx(10.0)
    assert [f.label for f in gate_failures(c, 3.0)] == ["a", "b"]
    assert gate_failures(c, 10.0) == ()  # "more than PCT": exactly 10 % does not trip


def test_gate_respects_known_noise(tmp_path: Path) -> None:
    # +10 % but the roofline spread is 1.5 µs/frame: within noise, does not trip
    c = _cmp(tmp_path, [_row("a", 4.0, 10.0, 3.0, roofline_us_spread=1.5)], [_row("a", 4.0, 11.0, 3.0)])
    assert c.row("a").metric("roofline_us").verdict is Verdict.SAME
    assert gate_failures(c, 5.0) == ()


def test_sustained_fps_joins_when_measured(tmp_path: Path) -> None:
    c = _cmp(tmp_path, [_row("a", 4.0, 10.0, 3.0, sustained_fps=61400.0, sustained_fps_spread=300.0)],
             [_row("a", 4.0, 10.0, 3.0, sustained_fps=62000.0, sustained_fps_spread=200.0)])  # fmt: skip
    assert "sustained_fps" in c.metric_names
    m = c.row("a").metric("sustained_fps")
    assert m.verdict is Verdict.FASTER and m.noise == 300.0  # |600| > max(300, 200)


# ----------------------------------------------------------------------------- render


def test_markdown_reference_layout(rtx) -> None:
    from clusterbench.render.compare import render_compare_markdown

    md = render_compare_markdown(rtx)
    assert "| config | kernel before (µs/frame) | kernel after (µs/frame) | kernel delta |" in md
    assert "| 3x3, 1 stream | 4.32 | 4.65 | +7.64 % | 13.13 | 13.13 | H2D |" in md
    assert "| 3x3, 4 streams | 5.00 | 5.64 | +12.80 % | 16.35 | 16.35 | H2D |" in md
    assert "| 9x9, 1 stream | 23.80 | 15.29 | -35.76 % | 23.80 | 22.00 | kernel -> D2H |" in md
    assert "| 9x9, 4 streams | 24.72 | 15.59 | -36.93 % | 25.39 | 25.39 | D2H |" in md


def test_json_shape(rtx) -> None:
    from clusterbench.render.compare import render_compare_json

    doc = json.loads(json.dumps(render_compare_json(rtx)))
    row = doc["rows"][2]
    assert row["label"] == "9x9_s1_uncontended"
    assert row["metrics"]["kernel_us"]["before"] == 23.80 and row["metrics"]["kernel_us"]["after"] == 15.29
    assert row["binds"] == {"before": "kernel", "after": "d2h", "changed": True}
    assert set(row["metrics"]) == {"kernel_us", "h2d_us", "d2h_us", "roofline_us"}
    assert doc["warnings"] and "gate" not in doc


def test_plot_writes_a_png(rtx, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from clusterbench.render.plot import render_compare_plot

    out = render_compare_plot(rtx, tmp_path / "cmp.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # six bars per group, four groups, legend, labels


def test_plot_without_matplotlib_says_so(rtx, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clusterbench.render.plot import render_compare_plot

    for mod in list(sys.modules):
        if mod == "matplotlib" or mod.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(EnvironmentFailure, match="needs matplotlib") as exc:
        render_compare_plot(rtx, tmp_path / "x.png")
    assert "clusterbench[plot]" in exc.value.hint
    assert not (tmp_path / "x.png").exists()
