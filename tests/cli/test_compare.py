"""clusterbench compare through the CLI: outputs, widths, the gate, and one clear line per bad input."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from cli_output import messages
from typer.testing import CliRunner

from clusterbench.cli import app

from results_data import write

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "compare"
BEFORE = DATA / "2026-09-10_f32_before"
AFTER = DATA / "2026-09-10_f32_after"
LEGACY_BEFORE = DATA / "legacy_2026-09-10_before"
LEGACY_AFTER = DATA / "legacy_2026-09-10_after"
F32 = ROOT / "tests" / "data" / "results" / "2026-11-29_f32"
F64 = ROOT / "tests" / "data" / "results" / "2026-11-29_f64"
CUPTI = ROOT / "tests" / "data" / "results" / "2026-11-29_f32_cupti"

runner = CliRunner()


def _run(*args: object, columns: str | None = "80"):
    return runner.invoke(app, ["compare", *map(str, args)], env={"COLUMNS": columns})


def _error_lines(result) -> list[str]:
    return [m for m in messages(result.stderr) if m.startswith("Error:")]


# ----------------------------------------------------------------------------- outputs


def test_table_to_stdout_warnings_to_stderr() -> None:
    r = _run(BEFORE, AFTER)
    assert r.exit_code == 0, r.output
    out = r.stdout
    block = out[out.index("3x3_s1_uncontended (3x3, 1 stream)"):out.index("3x3_s4 (3x3, 4 streams)")]
    kernel = next(ln for ln in block.splitlines() if ln.startswith("  kernel µs"))
    # † provisional: no floors file for the RTX 4090, so a default bound judged
    assert kernel.split() == ["kernel", "µs", "4.32", "→", "4.65", "+7.64", "%", "SLOWER†", "beyond_noise"]
    assert "kernel change +7.64 % SLOWER invisible end to end (binds: H2D)" in " ".join(block.split())
    assert "-35.76 %" in out and "binding engine changed: kernel -> D2H" in out
    assert "Warning:" not in out
    assert "no floors file for NVIDIA GeForce RTX 4090" in " ".join(r.stderr.split())


@pytest.mark.parametrize("pair", [(BEFORE, AFTER), (F32, F64), (F32, CUPTI), (LEGACY_BEFORE, LEGACY_AFTER)])
def test_every_line_fits_80_columns_and_verdicts_stay_whole(pair) -> None:
    r = _run(*pair)
    assert r.exit_code == 0, r.output
    for stream in (r.stdout, r.stderr):
        for ln in stream.splitlines():
            assert len(ln) <= 80, ln
    assert "COMPARAB…" not in r.stdout and "…" not in r.stdout
    verdict_lines = [ln for ln in r.stdout.splitlines() if ln.startswith("  ") and " → " in ln]
    assert verdict_lines
    for ln in verdict_lines:
        assert any(v in ln for v in ("SAME", "FASTER", "SLOWER", "NOT COMPARABLE", " - ")), ln


def test_piped_output_honours_columns() -> None:
    wide = _run(F32, F64, columns="120")
    assert wide.exit_code == 0
    assert max(len(ln) for ln in wide.stdout.splitlines()) > 80  # the prose takes the room it is given
    assert all(len(ln) <= 120 for ln in wide.stdout.splitlines())
    unset = _run(F32, F64, columns=None)  # no COLUMNS: 80, as a terminal would
    assert max(len(ln) for ln in unset.stdout.splitlines()) <= 80
    narrow = _run(F32, F64, columns="72")  # below 80 the reason-code column goes, the verdicts stay
    assert all(len(ln) <= 72 for ln in narrow.stdout.splitlines())
    assert "NOT COMPARABLE" in narrow.stdout and "session_drift" not in narrow.stdout.split("end to end")[0]


def test_wide_table() -> None:
    r = _run(F32, F64, "--wide", columns="200")
    assert r.exit_code == 0
    assert "sustained" in r.stdout and "NOT" in r.stdout and "COMPARABLE" in r.stdout


def test_f32_against_f64_reads_across_the_dtype_and_is_not_invisible() -> None:
    r = _run(F32, F64, "--json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["across"] == ["pedestal_dtype"]
    rows = {row["label"]: row for row in doc["rows"]}
    r9 = rows["9x9_s1_uncontended"]
    roof = r9["metrics"]["roofline_us"]
    assert roof["delta_pct"] == pytest.approx((roof["after"] - roof["before"]) / roof["before"] * 100)
    assert (roof["verdict"], roof["across"]) == ("SLOWER", ["pedestal_dtype"])
    assert r9["end_to_end"]["verdict"] == "slower" and r9["end_to_end"]["kernel_invisible"] is False
    assert "invisible" not in r9["end_to_end"]["reason"]
    assert r9["mismatches"] == [{"column": "pedestal_dtype", "before": "float32", "after": "float64",
                                 "affects": ["kernel_us", "h2d_us", "d2h_us", "roofline_us", "sustained_fps"],
                                 "across": True}]  # fmt: skip
    assert "comparing across pedestal_dtype: float32 → float64 (every row)" in " ".join(r.stderr.split())


def test_json_is_only_json_with_reason_codes() -> None:
    r = _run(BEFORE, AFTER, "--json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    rows = {row["label"]: row for row in doc["rows"]}
    k = rows["3x3_s1_uncontended"]["metrics"]["kernel_us"]
    assert (k["before"], k["after"], k["reason_code"]) == (4.32, 4.65, "beyond_noise")
    assert k["delta_pct"] == pytest.approx((4.65 - 4.32) / 4.32 * 100)
    # the 4-stream transfers are the same numbers before and after: identical
    assert rows["3x3_s4"]["metrics"]["h2d_us"]["reason_code"] == "identical"
    assert any(w["message"].startswith("no floors file") for w in doc["warnings"])


def test_sustained_test_in_json() -> None:
    doc = json.loads(_run(F32, CUPTI, "--json").stdout)
    s = next(r for r in doc["rows"] if r["label"] == "9x9_s1_uncontended")["metrics"]["sustained_fps"]
    # repeats before [57,025.1, 57,324.9, 57,104.2] and after [57,331.7, 57,336.2, 57,004.7] FPS (env.json): 3 a
    # side, so the 95 % interval is [min(after) / max(before), max(after) / min(before)], which holds 1
    t = s["test"]
    assert t["name"] == "bootstrap-ratio-of-medians" and (t["n_before"], t["n_after"]) == (3, 3)
    assert t["low"] == pytest.approx(57_004.66708040238 / 57_324.909097810894)
    assert t["high"] == pytest.approx(57_336.19413420432 / 57_025.113318165066)
    assert t["ratio"] == pytest.approx(57_331.72898898405 / 57_104.18374230134)
    assert (t["level"], t["resamples"], t["excludes_one"]) == (0.95, 10_000, False)
    assert (s["verdict"], s["reason_code"]) == ("SAME", "not_significant") and s["across"] == []
    assert doc["level"] == 0.95 and doc["schema"] == "clusterbench.compare/5"


def test_markdown() -> None:
    r = _run(BEFORE, AFTER, "--markdown")
    assert r.exit_code == 0
    assert "| 9x9, 4 streams | 24.72 | 15.59 | -36.93 % | 25.39 | 25.39 | D2H |" in r.stdout


def test_legacy_markdown_reproduces_the_reference_table() -> None:
    r = _run(LEGACY_BEFORE, LEGACY_AFTER, "--markdown")
    assert r.exit_code == 0, r.output
    for line in ("| 3x3, 1 stream | 4.32 | 4.65 | +7.64 % | 13.13 | 13.13 | H2D |",
                 "| 3x3, 4 streams | 5.00 | 5.64 | +12.80 % | 16.35 | 16.35 | H2D |",
                 "| 9x9, 1 stream | 23.80 | 15.29 | -35.76 % | 23.80 | 22.00 | kernel -> D2H |",
                 "| 9x9, 4 streams | 24.72 | 15.59 | -36.93 % | 25.39 | 25.39 | D2H |"):  # fmt: skip
        assert line in r.stdout
    assert " ".join(r.stderr.split()).count("is a legacy aare-perf results dir") == 2


def test_output_formats_are_exclusive() -> None:
    r = _run(BEFORE, AFTER, "--json", "--markdown")
    assert r.exit_code == 2 and _error_lines(r) == ["Error: --json, --markdown and --wide cannot be combined"]
    assert _run(BEFORE, AFTER, "--json", "--wide").exit_code == 2


def test_across_an_unknown_column() -> None:
    r = _run(BEFORE, AFTER, "--across", "colour")
    assert r.exit_code == 2 and _error_lines(r) == ["Error: --across colour: not a config column"]


# ----------------------------------------------------------------------------- plot


@pytest.mark.parametrize(("suffix", "magic"), [(".png", b"\x89PNG"), (".svg", b"<?xml"), (".pdf", b"%PDF")])
def test_plot_by_extension(tmp_path: Path, suffix: str, magic: bytes) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / f"cmp{suffix}"
    r = _run(BEFORE, AFTER, "--json", "--plot", out)
    assert r.exit_code == 0, r.output
    assert out.read_bytes()[: len(magic)] == magic
    json.loads(r.stdout)  # the plot note went to stderr
    assert f"Wrote {out}" in r.stderr


def _plot_fails(target: Path | str, expect: str) -> None:
    r = _run(BEFORE, AFTER, "--plot", target)
    assert r.exit_code == 2, r.output
    errors = _error_lines(r)
    assert len(errors) == 1 and errors[0].startswith(expect), r.stderr
    assert r.stdout == ""  # checked before the table is printed
    assert "Traceback" not in r.output


def test_plot_refuses_an_unknown_extension(tmp_path: Path) -> None:
    _plot_fails(tmp_path / "cmp.jpg", "Error: --plot writes .png, .svg or .pdf, not .jpg")
    _plot_fails(tmp_path / "cmp", "Error: --plot writes .png, .svg or .pdf, not no extension")
    assert not (tmp_path / "cmp.jpg").exists()


def test_plot_into_a_directory(tmp_path: Path) -> None:
    _plot_fails(tmp_path, f"Error: cannot write the plot: {tmp_path} is a directory")  # the issue's --plot /tmp
    d = tmp_path / "x.png"
    d.mkdir()
    _plot_fails(d, f"Error: cannot write the plot: {d} is a directory")


def test_plot_under_a_missing_or_special_directory(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    _plot_fails(tmp_path / "nope" / "x.png", f"Error: cannot write the plot {tmp_path / 'nope' / 'x.png'}: directory")
    _plot_fails("/proc/x.png", "Error: cannot write the plot /proc/x.png: ")


def test_plot_into_a_read_only_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.geteuid() != 0:  # root writes anyway: there, simulate the refusal the kernel would give
            _plot_fails(ro / "x.png", f"Error: cannot write the plot {ro / 'x.png'}: Permission denied")
        real_open = os.open

        def deny(path, flags, *a, **kw):
            if str(path).startswith(str(ro)):
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, flags, *a, **kw)

        monkeypatch.setattr(os, "open", deny)
        _plot_fails(ro / "x.png", f"Error: cannot write the plot {ro / 'x.png'}: Permission denied")
    finally:
        ro.chmod(0o755)
    assert not (ro / "x.png").exists()


# ----------------------------------------------------------------------------- gate


def _pair(tmp_path: Path, roof_after: float, label_b: str = "3x3_s1") -> tuple[Path, Path]:
    def row(label: str, h2d: float) -> dict:
        return {"label": label, "cluster": 3, "cap": 3000, "streams": 1, "batch": 2000, "frames": 20000,
                "kernel_us": 4.0, "h2d_us": h2d, "d2h_us": 3.0, "roofline_us": h2d, "binds": "h2d"}  # fmt: skip

    env = {"gpu_name": "NVIDIA H200", "driver": "580.65", "session_id": "S", "git_dirty": False}
    a, b = tmp_path / "a", tmp_path / "b"
    return write(a, [row("3x3_s1", 10.0)], env), write(b, [row(label_b, roof_after)], env)


def test_gate_trips_with_exit_3(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, 10.8)  # +8 %, beyond the 1 % floor
    r = _run(a, b, "--gate", "5")
    assert r.exit_code == 3
    assert _error_lines(r) == ["Error: roofline got worse by more than 5 %: 3x3_s1 roofline 10.000 -> "
                               "10.800 µs/frame (+8.00 %)"]
    assert _run(a, b, "--gate", "10").exit_code == 0
    doc = json.loads(_run(a, b, "--gate", "5", "--json").stdout)
    assert doc["gate"]["passed"] is False and doc["gate"]["failures"][0]["label"] == "3x3_s1"
    assert doc["gate"]["failures"][0]["metric"] == "roofline_us"
    # these dirs measured no sustained FPS: the gate judged the roofline alone, and said so
    assert doc["gate"]["metrics"] == ["roofline_us"] and doc["gate"]["not_measured"] == ["sustained_fps"]
    assert "sustained FPS not measured in either dir: not gated" in " ".join(r.stderr.split())


H200_FLOORS_FILE = ROOT / "tests" / "data" / "results" / "floors" / "NVIDIA_H200.json"


def _fps_pair(tmp_path: Path, before: list[float], after: list[float], **after_cols: object) -> tuple[Path, Path]:
    """One 1-stream row per side, one session, the roofline unchanged (10 µs/frame): only sustained FPS moves."""
    def row(samples: list[float], **cols: object) -> dict:
        return {"label": "3x3_s1", "cluster": 3, "cap": 3000, "streams": 1, "batch": 2000, "frames": 20000,
                "kernel_us": 4.0, "h2d_us": 10.0, "d2h_us": 3.0, "roofline_us": 10.0, "binds": "h2d",
                "sustained_fps": sorted(samples)[1], "samples": {"sustained_fps": samples}, **cols}

    env = {"gpu_name": "NVIDIA H200", "driver": "580.65", "session_id": "S", "git_dirty": False}
    return write(tmp_path / "a", [row(before)], env), write(tmp_path / "b", [row(after, **after_cols)], env)


def test_gate_fails_on_a_sustained_drop_with_an_unchanged_roofline(tmp_path: Path) -> None:
    # the issue: a significant -8.09 % drop in sustained FPS passed --gate 5, which judged the roofline alone.
    # By hand: medians 100,000 -> 91,910 FPS, -8.09 %; every after repeat below every before repeat, so the
    # bootstrap interval of the ratio of medians is [91,700 / 100,200, 92,100 / 99,800] = [0.915, 0.923], which
    # excludes 1; the noise is max(0.5 % floor of 100,000 = 500 FPS, the 1 % minimum effect = 1,000 FPS, spreads
    # 200 and 200) = 1,000 FPS < 8,090.
    a, b = _fps_pair(tmp_path, [99_800.0, 100_000.0, 100_200.0], [91_700.0, 91_910.0, 92_100.0])
    r = _run(a, b, "--gate", "5", "--floors", H200_FLOORS_FILE)
    assert r.exit_code == 3, r.output
    assert _error_lines(r) == ["Error: sustained FPS got worse by more than 5 %: 3x3_s1 sustained FPS 100,000 -> "
                               "91,910 FPS (-8.09 %)"]
    doc = json.loads(_run(a, b, "--gate", "5", "--floors", H200_FLOORS_FILE, "--json").stdout)
    m = doc["rows"][0]["metrics"]
    assert m["roofline_us"]["verdict"] == "SAME" and m["sustained_fps"]["verdict"] == "SLOWER"
    f = doc["gate"]["failures"]
    assert [(x["metric"], x["before"], x["after"]) for x in f] == [("sustained_fps", 100_000.0, 91_910.0)]
    assert f[0]["worse_pct"] == pytest.approx(8.09) and f[0]["noise"] == pytest.approx(1_000.0)
    # --gate-metric picks one figure: the roofline alone passes, sustained FPS alone fails; 10 % passes both
    assert _run(a, b, "--gate", "5", "--gate-metric", "roofline", "--floors", H200_FLOORS_FILE).exit_code == 0
    assert _run(a, b, "--gate", "5", "--gate-metric", "sustained", "--floors", H200_FLOORS_FILE).exit_code == 3
    assert _run(a, b, "--gate", "10", "--floors", H200_FLOORS_FILE).exit_code == 0


def test_gate_metric_is_checked_before_any_work(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"  # a dir that does not exist: the name is refused first
    r = _run(missing, missing, "--gate", "5", "--gate-metric", "latency")
    assert r.exit_code == 2
    assert _error_lines(r) == ["Error: --gate-metric latency: not a figure compare judges"]
    assert "Hint: pick one of roofline, sustained, kernel, h2d, d2h" in " ".join(r.stderr.split())
    r = _run(missing, missing, "--gate-metric", "sustained")
    assert r.exit_code == 2 and _error_lines(r)[0].startswith("Error: --gate-metric picks the figure --gate judges")
    r = runner.invoke(app, ["compare", "--help"], env={"COLUMNS": "200"})
    assert "--gate-metric" in r.stdout and "roofline, sustained, kernel, h2d, d2h" in " ".join(r.stdout.split())


def test_an_unsteady_side_is_not_a_change_and_not_gated(tmp_path: Path) -> None:
    # the same -8.09 % drop, but the after side's sustained runs never reached steady state
    a, b = _fps_pair(tmp_path, [99_800.0, 100_000.0, 100_200.0], [91_700.0, 91_910.0, 92_100.0],
                     sustained_steady=False, sustained_warmups=5, sustained_warmup_s=2.5)
    doc = json.loads(_run(a, b, "--floors", H200_FLOORS_FILE, "--json").stdout)
    m = doc["rows"][0]["metrics"]["sustained_fps"]
    assert (m["verdict"], m["reason_code"]) == ("NOT_COMPARABLE", "unsteady")
    assert "after (b after 5 warm-up runs, 2.5 s) did not reach steady state" in m["reason"]
    # the roofline (SAME) was judged; the unsteady figure could not be: the gate cannot pass (exit 4), naming it
    r = _run(a, b, "--gate", "5", "--floors", H200_FLOORS_FILE)
    assert r.exit_code == 4, r.output
    assert _error_lines(r) == ["Error: --gate 5 could not judge 1 gated figure: 3x3_s1 sustained FPS (unsteady)"]
    assert "NOT COMPARABLE  unsteady" in r.stdout
    assert "end to end: NOT COMPARABLE" in r.stdout
    # --gate-unjudged pass keeps the old behaviour: a warning, exit 0
    r = _run(a, b, "--gate", "5", "--floors", H200_FLOORS_FILE, "--gate-unjudged", "pass")
    assert r.exit_code == 0, r.output
    assert "--gate did not judge: 3x3_s1 sustained FPS (unsteady)" in " ".join(r.stderr.split())


def test_gate_with_nothing_comparable_exits_4(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, 10.0, label_b="other")  # no label in common
    r = _run(a, b, "--gate", "5")
    assert r.exit_code == 4
    errors = _error_lines(r)
    assert len(errors) == 1 and errors[0].startswith("Error: --gate 5 judged nothing: no roofline was comparable")
    assert "3x3_s1 roofline (only in before (a))" in errors[0] and "other roofline (only in after (b))" in errors[0]
    doc = json.loads(_run(a, b, "--gate", "5", "--json").stdout)
    assert doc["gate"]["nothing_comparable"] is True and doc["gate"]["passed"] is False
    # --gate-unjudged pass: a gate that judged nothing still does not pass (exit 3, as before)
    assert _run(a, b, "--gate", "5", "--gate-unjudged", "pass").exit_code == 3


def test_gate_across_tracer_judges_sustained_fps_only(tmp_path: Path) -> None:
    # the issue: f32 against f32_cupti --gate 1 called the roofline SLOWER (+1.34 %) and exited 3 as a regression.
    # The trace figures are across the tracer and not gated; sustained FPS runs untraced and is gated like for
    # like: 3x3 s1 111,282.69 -> 111,581.14 FPS (+0.27 %), 9x9 s1 57,104.2 -> 57,331.7 (+0.40 %), both SAME.
    # the rooflines across the tracer cannot be judged like for like: exit 4 names them; --gate-unjudged pass
    # judges what it can (sustained FPS, SAME) and passes
    r = _run(F32, CUPTI, "--gate", "1")
    assert r.exit_code == 4, r.output
    assert "3x3_s1_uncontended roofline (across tracer)" in " ".join(r.stderr.split())
    r = _run(F32, CUPTI, "--gate", "1", "--gate-unjudged", "pass")
    assert r.exit_code == 0, r.output
    assert "roofline got worse" not in r.stderr
    text = " ".join(r.stderr.split())
    assert "comparing across tracer: nsys → cupti" in text
    assert "--gate did not judge:" in text and "3x3_s1_uncontended roofline (across tracer)" in text
    doc = json.loads(_run(F32, CUPTI, "--gate", "1", "--json").stdout)
    assert [(j["label"], j["metric"]) for j in doc["gate"]["judged"]] == [
        ("3x3_s1_uncontended", "sustained_fps"), ("9x9_s1_uncontended", "sustained_fps")]


def test_aa_fixture_fails_no_gate_but_a_tight_one_cannot_judge() -> None:
    # an A/A pair: nothing got worse; but the 4-stream rooflines of two sessions (drift) and figures whose noise is
    # above 0.5 % cannot be judged at 0.5 %: exit 4; told to pass what it cannot judge, exit 0
    aa = DATA / "aa"
    r = _run(aa / "2026-12-01_f32_aa1", aa / "2026-12-01_f32_aa2", "--gate", "0.5")
    assert r.exit_code == 4, r.output
    assert "FASTER" not in r.stdout and "SLOWER" not in r.stdout
    assert "3x3_s4 roofline (session_drift)" in " ".join(r.stderr.split())
    assert _run(aa / "2026-12-01_f32_aa1", aa / "2026-12-01_f32_aa2", "--gate", "0.5",
                "--gate-unjudged", "pass").exit_code == 0


# ----------------------------------------------------------------------------- GPUs, legacy


def test_different_gpu_refused_then_allowed(tmp_path: Path) -> None:
    other = tmp_path / "h200"
    shutil.copytree(AFTER, other)
    env = json.loads((other / "env.json").read_text())
    env["gpu_name"] = "NVIDIA H200"
    (other / "env.json").write_text(json.dumps(env))
    r = _run(BEFORE, other)
    assert r.exit_code == 2 and "different GPUs" in _error_lines(r)[0]
    assert "--allow-different-gpu" in r.stderr
    r = _run(BEFORE, other, "--allow-different-gpu")
    assert r.exit_code == 0 and "different GPUs" in r.stderr


def test_legacy_against_h200_refused_then_allowed() -> None:
    r = _run(LEGACY_AFTER, F32)
    assert r.exit_code == 2
    assert _error_lines(r) == [
        "Error: the two results dirs come from different GPUs: 'NVIDIA GeForce RTX 4090' "
        "(legacy_2026-09-10_after) vs 'NVIDIA H200' (2026-11-29_f32)"
    ]
    assert _run(LEGACY_AFTER, F32, "--allow-different-gpu").exit_code == 0


# ----------------------------------------------------------------------------- bad input


def _broken(tmp_path: Path, what: str) -> Path:
    d = tmp_path / "broken"
    shutil.copytree(AFTER, d)
    csv_path, env_path = d / "probes.csv", d / "env.json"
    if what == "no probes.csv":
        csv_path.unlink()
    elif what == "ragged probes.csv":
        csv_path.write_text(csv_path.read_text().replace("3x3_s4,3,", "3x3_s4,3,3,", 1))
    elif what == "missing columns":
        lines = [ln.rsplit(",", 4)[0] for ln in csv_path.read_text().splitlines()]  # drop binds.. session
        csv_path.write_text("\n".join(lines) + "\n")
    elif what == "non-numeric":
        csv_path.write_text(csv_path.read_text().replace(",15.29,", ",fast,"))
    elif what == "negative time":
        csv_path.write_text(csv_path.read_text().replace(",15.29,", ",-1.0,"))
    elif what == "zero time":
        csv_path.write_text(csv_path.read_text().replace(",15.29,", ",0.0,"))
    elif what == "binds banana":
        csv_path.write_text(csv_path.read_text().replace(",d2h,float32,frozen,rtx4090-after\n9x9_s4", ",banana,float32,frozen,rtx4090-after\n9x9_s4"))
    elif what == "no env.json":
        env_path.unlink()
    elif what == "malformed env.json":
        env_path.write_text(env_path.read_text().replace('"driver": "595.71.05",', '"driver": 595.71.05,'))
    elif what == "unknown version":
        env_path.write_text(env_path.read_text().replace('"schema_version": 1', '"schema_version": 7'))
    elif what == "no version, not legacy":
        env_path.write_text(env_path.read_text().replace('"schema_version": 1,', '').replace(',\n  "schema_version": 1', ''))
    return d


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("no probes.csv", "Error: no probes.csv in results dir: "),
        ("ragged probes.csv", "Error: probes.csv is malformed: "),
        ("missing columns", "Error: probes.csv lacks required column(s) binds: "),
        ("non-numeric", "Error: probes.csv row '9x9_s1_uncontended' column kernel_us: expected a finite number, got 'fast'"),
        ("negative time", "Error: probes.csv row '9x9_s1_uncontended' column kernel_us: a time must be > 0, got -1.0 µs/frame"),
        ("zero time", "Error: probes.csv row '9x9_s1_uncontended' column kernel_us: a time must be > 0, got 0.0 µs/frame"),
        ("binds banana", "Error: probes.csv row '9x9_s1_uncontended' column binds: 'banana' is not an engine"),
        ("no env.json", "Error: no env.json in results dir: "),
        ("malformed env.json", "Error: env.json is not valid JSON: "),
        ("unknown version", "Error: env.json has schema_version 7; this clusterbench reads versions 5, 4, 3, 2 and 1"),
        ("no version, not legacy", "Error: env.json has no version and is not a legacy aare-perf stamp either"),
    ],
)  # fmt: skip
def test_bad_input_is_one_clear_line_and_exit_2(tmp_path: Path, what: str, message: str) -> None:
    r = _run(BEFORE, _broken(tmp_path, what))
    assert r.exit_code == 2, r.output
    errors = _error_lines(r)
    assert len(errors) == 1 and errors[0].startswith(message), r.stderr
    assert "Traceback" not in r.output
    assert r.stdout == ""


def test_bom_csv_is_read(tmp_path: Path) -> None:
    d = tmp_path / "bom"
    shutil.copytree(AFTER, d)
    (d / "probes.csv").write_bytes(b"\xef\xbb\xbf" + (d / "probes.csv").read_bytes())
    r = _run(BEFORE, d, "--json")
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)["rows"]) == 4


def test_missing_dir(tmp_path: Path) -> None:
    r = _run(tmp_path / "nope", AFTER)
    assert r.exit_code == 2
    assert _error_lines(r) == [f"Error: results dir does not exist: {tmp_path / 'nope'}"]


def test_help_documents_verdicts_and_exit_codes() -> None:
    r = runner.invoke(app, ["compare", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    for text in ("bootstrap", "ratio of medians", "SAME", "NOT COMPARABLE", "--gate", "--across", "--wide", "Exit codes",
                 "--allow-different-gpu", "legacy aare-perf", "exits 4", "--gate-unjudged", "--min-effect",
                 "could not be judged", "several fresh processes", "provisional"):  # fmt: skip
        assert text in r.output


# ----------------------------------------------------------------------------- merged multi-host dirs


def _merged_dir(path: Path, rows: list[tuple[str, str, str, str, float]]) -> Path:
    """(label, host, gpu_name, gpu_uuid, kernel µs): rows as a merged campaign writes them."""
    names = ",".join(dict.fromkeys(r[2] for r in rows))
    hosts = sorted({r[1] for r in rows})
    return write(path, [{"label": label, "cluster": 3, "cap": 3000, "streams": 1, "batch": 2000, "frames": 20000,
                         "kernel_us": kernel, "h2d_us": 5.8, "d2h_us": 2.2, "roofline_us": 5.8, "binds": "h2d",
                         "host": host, "gpu_name": gpu, "gpu_uuid": uuid, "task": 0, "source_dir": "tasks/000"}
                        for label, host, gpu, uuid, kernel in rows],
                 {"gpu_name": names, "hosts": hosts, "host": ",".join(hosts), "driver": "580.65",
                  "session_id": "S", "git_dirty": False})


def test_merged_dirs_refuse_a_row_pair_of_two_gpus_then_state_it_per_row(tmp_path: Path) -> None:
    a = _merged_dir(tmp_path / "a", [("3x3_s1", "n1", "NVIDIA H200", "GPU-aaaa0000", 1.02),
                                     ("3x3_s1@gpu1", "n1", "NVIDIA H200", "GPU-bbbb1111", 1.02)])
    b = _merged_dir(tmp_path / "b", [("3x3_s1", "n1", "NVIDIA H200", "GPU-aaaa0000", 1.02),
                                     ("3x3_s1@gpu1", "n9", "NVIDIA H100 80GB HBM3", "GPU-ffff9999", 1.53)])
    r = _run(a, b)
    assert r.exit_code == 2 and r.stdout == ""
    assert _error_lines(r) == ["Error: 1 row pair(s) come from different GPUs: 3x3_s1@gpu1: NVIDIA H200 "
                               "(GPU-bbbb1111, host n1) before, NVIDIA H100 80GB HBM3 (GPU-ffff9999, host n9) after"]
    assert "--allow-different-gpu" in r.stderr
    r = _run(a, b, "--allow-different-gpu")
    assert r.exit_code == 0, r.stderr
    assert all(len(ln) <= 80 for ln in r.stdout.splitlines())
    out = r.stdout
    block = out[out.index("\n3x3_s1@gpu1, binds H2D"):]
    kernel = next(ln for ln in block.splitlines() if ln.startswith("  kernel µs"))
    # 1.02 -> 1.53: +50.00 %, beyond the 1 % floor: SLOWER, marked across the GPU
    assert kernel.split() == ["kernel", "µs", "1.02", "→", "1.53", "+50.00", "%", "SLOWER*", "beyond_noise"]
    text = " ".join(block.split())
    assert ("* different GPUs: NVIDIA H200 (GPU-bbbb1111, host n1) before, NVIDIA H100 80GB HBM3 "
            "(GPU-ffff9999, host n9) after (--allow-different-gpu)") in text
    first = out[out.index("\n3x3_s1, binds H2D"):out.index("\n3x3_s1@gpu1, binds H2D")]
    assert "*" not in first and "different GPUs" not in first  # the like-for-like pair is not marked
    assert "different GPUs: 1 row pair(s)" in " ".join(r.stderr.split())
    doc = json.loads(_run(a, b, "--allow-different-gpu", "--json").stdout)
    rows = {row["label"]: row for row in doc["rows"]}
    assert rows["3x3_s1@gpu1"]["gpu"]["differs"] is True
    assert rows["3x3_s1@gpu1"]["gpu"]["after"] == {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-ffff9999",
                                                    "host": "n9", "source": "row"}
    assert rows["3x3_s1"]["gpu"]["differs"] is False
    assert rows["3x3_s1@gpu1"]["metrics"]["kernel_us"]["across"] == ["gpu"]
    # the gate judges the like-for-like row only
    # the gate judges the like-for-like row only: the row across GPUs is named, and exit 4 says it was not judged
    r = _run(a, b, "--allow-different-gpu", "--gate", "5")
    assert r.exit_code == 4 and "3x3_s1@gpu1 roofline (across gpu)" in " ".join(r.stderr.split())
    r = _run(a, b, "--allow-different-gpu", "--gate", "5", "--gate-unjudged", "pass")
    assert r.exit_code == 0 and "3x3_s1@gpu1 roofline (across gpu)" in " ".join(r.stderr.split())


# ----------------------------------------------------------------------------- the drift bound, floors, --wide

TRACKING_AARE = DATA / "tracking_aare"


def _metric_line(out: str, label: str, metric: str) -> list[str]:
    block = out[out.index(f"\n{label} "):]
    return next(ln for ln in block.splitlines() if ln.startswith(f"  {metric}")).split()


def test_a_doubling_across_sessions_reads_slower_not_drift() -> None:
    # f32 -> f64, 9x9_s4 D2H 10.73 -> 20.98 µs/frame: +95.5 %, far beyond the 20 % drift bound
    r = _run(F32, F64)
    assert r.exit_code == 0, r.output
    rows = {}
    with open(F32 / "probes.csv") as fb, open(F64 / "probes.csv") as fa:
        import csv

        b = {x["label"]: x for x in csv.DictReader(fb)}
        a = {x["label"]: x for x in csv.DictReader(fa)}
    for label in ("9x9_s4", "3x3_s4"):
        vb, va = float(b[label]["d2h_us"]), float(a[label]["d2h_us"])
        rows[label] = (va - vb) / vb * 100
        assert rows[label] > 20
        line = _metric_line(r.stdout, label, "D2H µs")
        assert line[-2:] == ["SLOWER*~", "beyond_drift"] and line[-4] == f"{rows[label]:+.2f}"
    assert "floors: floors of NVIDIA H200 from" in r.stdout and "NVIDIA_H200.json" in r.stdout
    doc = json.loads(_run(F32, F64, "--json").stdout)
    d2h = {x["label"]: x for x in doc["rows"]}["9x9_s4"]["metrics"]["d2h_us"]
    assert (d2h["verdict"], d2h["reason_code"], d2h["cross_session"]) == ("SLOWER", "beyond_drift", True)
    assert (d2h["bound_pct"], d2h["floor_pct"], d2h["noise_from"]) == (20.0, None, "drift_bound")
    assert d2h["noise"] == pytest.approx(0.2 * float(b["9x9_s4"]["d2h_us"]))
    assert "20 %" in d2h["reason"] and f"±{d2h['noise']:.3g} µs/frame" in d2h["reason"]  # the JSON's figures
    assert doc["floors"][0]["path"].endswith("floors/NVIDIA_H200.json") and doc["floors"][0]["seed"] is False


def test_our_finder_against_aare_reads_slower_beyond_the_bound() -> None:
    before, after = TRACKING_AARE / "2026-12-01_f32_tracking", TRACKING_AARE / "2026-12-01_f32_aare-cuda"
    r = _run(before, after, "--floors", ROOT / "tests" / "data" / "results" / "floors" / "NVIDIA_H200.json")
    assert r.exit_code == 0, r.output
    import csv

    with open(before / "probes.csv") as fb, open(after / "probes.csv") as fa:
        b = {x["label"]: x for x in csv.DictReader(fb)}
        a = {x["label"]: x for x in csv.DictReader(fa)}
    for metric, name in (("h2d_us", "H2D µs"), ("d2h_us", "D2H µs")):
        vb, va = float(b["9x9_s4"][metric]), float(a["9x9_s4"][metric])
        pct = (va - vb) / vb * 100
        assert pct > 20  # H2D 7.41 -> 10.23 (+38 %), D2H 10.83 -> 14.71 (+36 %)
        line = _metric_line(r.stdout, "9x9_s4", name)
        assert line[-2:] == ["SLOWER*~", "beyond_drift"] and line[-4] == f"{pct:+.2f}"
    assert "comparing across workload: cupy → command" in " ".join(r.stderr.split())


def test_rtx4090_legacy_pair_says_which_floors() -> None:
    r = _run(LEGACY_BEFORE, LEGACY_AFTER)
    assert r.exit_code == 0
    text = " ".join(r.stdout.split())
    assert ("floors: no floors file for NVIDIA GeForce RTX 4090: the default bounds (measured on NVIDIA H200; "
            "verdicts they judge are provisional)") in text
    assert "Warning: no floors file for NVIDIA GeForce RTX 4090" in " ".join(r.stderr.split())
    doc = json.loads(_run(LEGACY_BEFORE, LEGACY_AFTER, "--json").stdout)
    assert doc["floors"][0]["seed"] is True and doc["floors"][0]["gpu_name"] == "NVIDIA GeForce RTX 4090"


def test_an_explicit_floors_file_of_another_gpu_is_refused() -> None:
    r = _run(LEGACY_BEFORE, LEGACY_AFTER, "--floors", ROOT / "tests" / "data" / "results" / "floors" / "NVIDIA_H200.json")
    assert r.exit_code == 2 and "holds the floors of NVIDIA H200" in _error_lines(r)[0]


@pytest.mark.parametrize("columns", ["80", "60", "200"])
def test_wide_keeps_the_config_column_at_any_width(columns: str) -> None:
    r = _run(F32, F64, "--wide", columns=columns)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert "…" not in r.stdout
    tables = [i for i, ln in enumerate(lines) if ln.lstrip().startswith("config ")]
    assert tables  # every table starts with the config column
    labels = ("3x3_s4", "3x3_s1_uncontended", "9x9_s4", "9x9_s1_uncontended")
    for label in labels:
        assert sum(ln.startswith((f" {label} ", f"{label} ")) for ln in lines) == len(tables)
    for code in ("beyond_drift", "session_drift", "significant"):
        assert code in r.stdout  # whole cells, never "session_dr…"
    if columns != "200":
        table_lines = [ln for ln in lines if ln.startswith((" ", "config"))]
        assert max(len(ln) for ln in table_lines) <= int(columns) or columns == "60"


def test_floors_command(tmp_path: Path) -> None:
    aa = sorted((DATA / "aa").iterdir()) + sorted((DATA / "aa_slide").iterdir())
    r = runner.invoke(app, ["floors", *map(str, aa), "--results-dir", str(tmp_path)], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    assert all(len(ln) <= 80 for ln in r.stdout.splitlines())
    written = tmp_path / "floors" / "NVIDIA_H200.json"
    assert f"Wrote {written}" in " ".join(r.stdout.split())
    doc = json.loads(written.read_text())
    # the figures of the version 1 file the command wrote from these dirs before floors had scopes
    committed = json.loads((ROOT / "tests" / "data" / "results" / "floors" / "NVIDIA_H200.json").read_text())
    keys = ("metric", "multi_stream", "pct", "aa_max_diff_pct")
    assert [{k: f[k] for k in keys} for f in doc["floors"]] == [{k: f[k] for k in keys} for f in committed["floors"]]
    assert doc["version"] == 2 and {(f["scope"], f["pairs"]) for f in doc["floors"]} == {("same_unit", 4)}
    line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("H2D µs/frame") and "s>1" in ln)
    assert line.split()[3:10] == ["same-unit", "4", "2.97", "%", "4.5", "%", "–"]
    # never replaced without --force: the file stays as it was, and the refusal comes before anything is printed
    before = written.read_text()
    r = runner.invoke(app, ["floors", *map(str, aa), "--results-dir", str(tmp_path)], env={"COLUMNS": "80"})
    assert r.exit_code == 2 and r.stdout == "" and written.read_text() == before
    assert _error_lines(r) == [f"Error: {written} exists: floors writes a new file and never replaces one without "
                               "--force"]
    r = runner.invoke(app, ["floors", *map(str, aa), "--results-dir", str(tmp_path), "--force"],
                      env={"COLUMNS": "80"})
    assert r.exit_code == 0 and f"Replaced {written}" in " ".join(r.stdout.split())
    line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("H2D µs/frame") and "s>1" in ln)
    assert line.split()[-2:] == ["4.5", "%"]  # was: what the replaced file held
    # an --out file that exists is refused before a dir is read
    other = tmp_path / "other.json"
    other.write_text("{}")
    r = runner.invoke(app, ["floors", str(tmp_path / "nowhere"), str(tmp_path / "nowhere2"), "--out", str(other)])
    assert r.exit_code == 2 and _error_lines(r)[0].startswith(f"Error: {other} exists") and other.read_text() == "{}"
    # a dir alone has no A/A partner; one dir is not enough; --dry-run writes nothing
    r = runner.invoke(app, ["floors", str(aa[0]), str(aa[3])])
    assert r.exit_code == 2 and "no A/A partner" in r.stderr
    r = runner.invoke(app, ["floors", str(aa[0])])
    assert r.exit_code == 2 and "two or more" in r.stderr
    r = runner.invoke(app, ["floors", *map(str, aa[:3]), "--out", str(tmp_path / "x.json"), "--dry-run", "--json"])
    assert r.exit_code == 0 and not (tmp_path / "x.json").exists()
    doc = json.loads(r.stdout)
    assert doc["floors_file"]["gpu_name"] == "NVIDIA H200" and doc["path"] is None
    assert doc["target"] == str(tmp_path / "x.json")


def test_floors_refuse_too_few_pairs(tmp_path: Path) -> None:
    # the slide pair alone: two sessions on one GPU unit make 1 pair of sessions, and a floor needs 4
    pair = sorted((DATA / "aa_slide").iterdir())
    r = runner.invoke(app, ["floors", *map(str, pair), "--results-dir", str(tmp_path)], env={"COLUMNS": "80"})
    assert r.exit_code == 2 and r.stdout == "" and not (tmp_path / "floors").exists()
    assert _error_lines(r) == ["Error: every floor would be provisional: these A/A dirs make 1 pair of sessions on "
                               "one GPU unit, and a floor needs 4 pairs of its scope (the largest of n A/A differences "
                               "is exceeded by the next one 1 time in n + 1)"]
    assert "--provisional" in r.stderr
    # --dry-run shows them, and says it would not write them
    r = runner.invoke(app, ["floors", *map(str, pair), "--results-dir", str(tmp_path), "--dry-run"],
                      env={"COLUMNS": "80"})
    assert r.exit_code == 0 and not (tmp_path / "floors").exists()
    flat = "".join(r.stdout.split())  # a long path may be broken across lines
    assert ("--dry-run:wouldnotwrite" + str(tmp_path / "floors" / "NVIDIA_H200.json").replace(" ", "")
            + ":everyflooris" "provisional(--provisionalwritesthem)") in flat
    r = runner.invoke(app, ["floors", *map(str, pair), "--results-dir", str(tmp_path), "--dry-run", "--provisional"])
    flat = "".join(r.stdout.split())
    assert "--dry-run:wouldwrite" + str(tmp_path / "floors" / "NVIDIA_H200.json").replace(" ", "") in flat
    # the triple: 3 pairs of sessions, still fewer than 4
    triple = sorted((DATA / "aa").iterdir())
    r = runner.invoke(app, ["floors", *map(str, triple), "--results-dir", str(tmp_path)])
    assert r.exit_code == 2 and "make 3 pairs of sessions on one GPU unit" in " ".join(r.stderr.split())
    # --provisional writes them, marked, and compare names them
    r = runner.invoke(app, ["floors", *map(str, pair), "--results-dir", str(tmp_path), "--provisional"],
                      env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "floors" / "NVIDIA_H200.json").read_text())
    assert {(f["scope"], f["pairs"], f["provisional"]) for f in doc["floors"]} == {("same_unit", 1, True)}
    assert "prov." in r.stdout and "Warning: provisional floors (fewer than 4 pairs)" in r.stderr
    r = _run(pair[0], pair[1], "--floors", tmp_path / "floors" / "NVIDIA_H200.json")
    assert r.exit_code == 0 and "provisional: 1 pair" in " ".join(r.stdout.split())
    assert "provisional floors judged (same-unit" in " ".join(r.stderr.split())


# ----------------------------------------------------------------------------- identity, processes, exit 4


def test_a_dir_compared_with_itself_reads_same_identical() -> None:
    r = _run(F32, F32, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    codes = {(m["verdict"], m["reason_code"]) for row in doc["rows"] for m in row["metrics"].values()}
    assert codes == {("SAME", "identical")}
    assert all(row["end_to_end"]["verdict"] == "same" for row in doc["rows"])
    assert doc["warnings"][0]["message"].startswith("2026-11-29_f32 and 2026-11-29_f32 are one results dir (the same path)")
    # identical figures have no noise to hide behind: even a 0 % gate passes
    assert _run(F32, F32, "--gate", "0").exit_code == 0


def test_a_copy_of_a_dir_is_one_dir_too(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(F32, copy)
    r = _run(F32, copy)
    assert r.exit_code == 0 and "(the same rows)" in " ".join(r.stderr.split())


def test_a_trace_compared_with_itself_reads_same_identical() -> None:
    trace = ROOT / "tests" / "data" / "h200" / "dev_7x7_s3_b250_async.sqlite"
    r = _run(trace, trace, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert {(m["verdict"], m["reason_code"]) for m in doc["engines"].values()} == {("SAME", "identical")}
    assert {(k["verdict"], k["reason_code"]) for k in doc["kernels"]} == {("SAME", "identical")}
    assert any("compared with itself" in w["message"] for w in doc["warnings"])
    assert not any("drift bound" in w["message"] for w in doc["warnings"])


def _proc_dirs(tmp_path: Path, after: list[list[float]], unit_b: str = "GPU-1111", unit_a: str = "GPU-1111"):
    from results_data import unit

    def row(procs: list[list[float]]) -> dict:
        return {"label": "3x3_s1", "cluster": 3, "cap": 3000, "streams": 1, "batch": 200, "frames": 8000,
                "kernel_us": 0.45, "h2d_us": 5.8, "d2h_us": 2.2, "roofline_us": 5.8, "binds": "h2d",
                "processes": procs}

    env = {"gpu_name": "NVIDIA H100 80GB HBM3", "driver": "580.65", "git_dirty": False}
    b = write(tmp_path / "before", [row([[117_292.0], [117_500.0], [117_100.0]])],
              {**env, "session_id": "S1", "gpu_uuid": unit_b, "unit": unit(unit_b, boot="b1")})
    a = write(tmp_path / "after", [row(after)],
              {**env, "session_id": "S2", "gpu_uuid": unit_a, "unit": unit(unit_a, boot="b1" if unit_a == unit_b
                                                                          else "b2")})
    return b, a


def test_a_5_pct_drop_of_an_h100_without_floors_fails_the_gate(tmp_path: Path) -> None:
    # the issue: 117,292 -> 111,764 FPS (-4.7 %) on one H100, no floors file, read SAME end to end and passed
    # --gate 3. Now: three processes a side, one unit, noise max(1 %, 1.5 x 0.341 %) = 1 %: SLOWER, exit 3
    b, a = _proc_dirs(tmp_path, [[111_764.0], [111_900.0], [111_650.0]])
    r = _run(b, a, "--gate", "3")
    assert r.exit_code == 3, r.output
    assert _error_lines(r) == ["Error: sustained FPS got worse by more than 3 %: 3x3_s1 sustained FPS 117,292 -> "
                               "111,764 FPS (-4.71 %)"]
    assert "end to end: SLOWER" in r.stdout
    # --min-effect 5: the 4.7 % drop is within it, SAME: a change under the minimum effect is not a change, so a
    # gate finer than it gates at the minimum effect (exit 0)
    r = _run(b, a, "--gate", "3", "--min-effect", "5")
    assert r.exit_code == 0, r.output
    assert "sustained FPS   117,292 →   111,764   -4.71 % SAME            within_noise" in r.stdout


def test_a_noisy_process_spread_reads_same_but_exits_4_at_a_tighter_gate(tmp_path: Path) -> None:
    # after medians 115,000, 112,000, 117,000: range 5,000 / 115,000 = 4.348 %; 1.5 x = 6.52 %; -1.95 % is SAME,
    # but a 3 % gate cannot see through ±6.52 %
    b, a = _proc_dirs(tmp_path, [[115_000.0], [112_000.0], [117_000.0]])
    r = _run(b, a, "--gate", "3")
    assert r.exit_code == 4, r.output
    assert _error_lines(r)[0] == ("Error: --gate 3 could not judge 1 gated figure: 3x3_s1 sustained FPS (noise "
                                  "±6.52 % above the gate's 3 %)")
    assert _run(b, a, "--gate", "7").exit_code == 0
    assert _run(b, a, "--gate", "3", "--gate-unjudged", "pass").exit_code == 0


def test_bad_min_effect_and_gate_unjudged_are_refused_before_any_work(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    r = _run(missing, missing, "--min-effect", "-1")
    assert r.exit_code == 2 and _error_lines(r) == ["Error: --min-effect must be a percentage >= 0, got -1.0"]
    r = _run(missing, missing, "--gate", "3", "--gate-unjudged", "maybe")
    assert r.exit_code == 2 and _error_lines(r) == ["Error: --gate-unjudged must be fail or pass, got 'maybe'"]


def test_floors_refuse_a_dir_paired_with_itself(tmp_path: Path) -> None:
    r = runner.invoke(app, ["floors", str(F32), str(F32), "--provisional", "--out", str(tmp_path / "f.json")],
                      env={"COLUMNS": "80"})
    assert r.exit_code == 2, r.output
    errors = [m for m in messages(r.stderr) if m.startswith("Error:")]
    assert errors == ["Error: 2026-11-29_f32 and 2026-11-29_f32 are one results dir (the same path): a dir paired "
                      "with itself differs by nothing and would make a floor of no noise"]
    copy = tmp_path / "copy"
    shutil.copytree(F32, copy)
    r = runner.invoke(app, ["floors", str(F32), str(copy), "--provisional", "--out", str(tmp_path / "g.json")],
                      env={"COLUMNS": "80"})
    assert r.exit_code == 2 and "(a copy: the same session and the same rows)" in " ".join(r.stderr.split())
    assert not (tmp_path / "f.json").exists() and not (tmp_path / "g.json").exists()
