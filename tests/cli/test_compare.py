"""clusterbench compare through the CLI: outputs, the gate, and one clear line per bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.cli import app
from clusterbench.results import save_env, upsert_probe_row

DATA = Path(__file__).resolve().parents[1] / "data" / "compare"
BEFORE = DATA / "2026-09-10_f32_before"
AFTER = DATA / "2026-09-10_f32_after"

runner = CliRunner()


def _run(*args: object):
    return runner.invoke(app, ["compare", *map(str, args)])


def _error_lines(result) -> list[str]:
    return [ln for ln in result.stderr.splitlines() if ln.startswith("Error:")]


def test_table_to_stdout_warnings_to_stderr() -> None:
    r = _run(BEFORE, AFTER)
    assert r.exit_code == 0, r.output
    out = r.stdout
    row = out[out.index("3x3_s1_uncont"):out.index("3x3_s4")]  # the first row, its four lines
    assert "4.32" in row and "→ 4.65" in row and "+7.64 %" in row and "SLOWER" in row and "invisible" in row
    assert "→ 15.29" in out and "-35.76 %" in out
    assert "binding engine changed: kernel -> D2H" in out
    assert "invisible end to end (binds: H2D)" in out
    assert "beyond ±1 %: trace figures reproduce to about 1 % across sessions; no repeats measured" in out
    assert "Warning:" not in out
    assert "not comparable across sessions" in r.stderr


def test_json_is_only_json() -> None:
    r = _run(BEFORE, AFTER, "--json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    rows = {row["label"]: row for row in doc["rows"]}
    k = rows["3x3_s1_uncontended"]["metrics"]["kernel_us"]
    assert (k["before"], k["after"]) == (4.32, 4.65)
    assert k["delta_pct"] == pytest.approx((4.65 - 4.32) / 4.32 * 100)
    assert rows["9x9_s1_uncontended"]["binds"] == {"before": "kernel", "after": "d2h", "changed": True}
    assert rows["3x3_s4"]["metrics"]["h2d_us"]["verdict"] == "NOT_COMPARABLE"
    assert any("not comparable" in w["message"] for w in doc["warnings"])


def test_markdown() -> None:
    r = _run(BEFORE, AFTER, "--markdown")
    assert r.exit_code == 0
    assert "| 9x9, 4 streams | 24.72 | 15.59 | -36.93 % | 25.39 | 25.39 | D2H |" in r.stdout


def test_json_and_markdown_are_exclusive() -> None:
    r = _run(BEFORE, AFTER, "--json", "--markdown")
    assert r.exit_code == 2 and _error_lines(r) == ["Error: --json and --markdown cannot be combined"]


def test_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "cmp.png"
    r = _run(BEFORE, AFTER, "--json", "--plot", png)
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:4] == b"\x89PNG"
    json.loads(r.stdout)  # the plot note went to stderr
    assert f"Wrote {png}" in r.stderr


def _pair(tmp_path: Path, roof_after: float) -> tuple[Path, Path]:
    def row(h2d: float) -> dict:
        return {"label": "3x3_s1", "cluster": 3, "cap": 3000, "streams": 1, "batch": 2000, "frames": 20000,
                "kernel_us": 4.0, "h2d_us": h2d, "d2h_us": 3.0, "roofline_us": h2d, "binds": "h2d"}  # fmt: skip

    env = {"gpu_name": "NVIDIA H200", "driver": "580.65", "session_id": "S", "git_dirty": False}
    a, b = tmp_path / "a", tmp_path / "b"
    upsert_probe_row(a, row(10.0))
    upsert_probe_row(b, row(roof_after))
    save_env(a, env)
    save_env(b, env)
    return a, b


def test_gate_trips_with_exit_3(tmp_path: Path) -> None:
    a, b = _pair(tmp_path, 10.8)  # +8 %
    r = _run(a, b, "--gate", "5")
    assert r.exit_code == 3
    assert _error_lines(r) == ["Error: roofline got worse by more than 5 %: 3x3_s1 10.00 -> 10.80 µs/frame (+8.00 %)"]
    assert _run(a, b, "--gate", "10").exit_code == 0
    doc = json.loads(_run(a, b, "--gate", "5", "--json").stdout)
    assert doc["gate"]["passed"] is False and doc["gate"]["failures"][0]["label"] == "3x3_s1"


def test_different_gpu_refused_then_allowed(tmp_path: Path) -> None:
    r = _run(BEFORE, AFTER)
    assert r.exit_code == 0
    other = tmp_path / "h200"
    shutil.copytree(AFTER, other)
    env = json.loads((other / "env.json").read_text())
    env["gpu_name"] = "NVIDIA H200"
    save_env(other, env)
    r = _run(BEFORE, other)
    assert r.exit_code == 2 and "different GPUs" in _error_lines(r)[0]
    assert "--allow-different-gpu" in r.stderr
    r = _run(BEFORE, other, "--allow-different-gpu")
    assert r.exit_code == 0 and "different GPUs" in r.stderr


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
    elif what == "no env.json":
        env_path.unlink()
    elif what == "malformed env.json":
        env_path.write_text(env_path.read_text().replace('"driver": "595.71.05",', '"driver": 595.71.05,'))
    return d


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("no probes.csv", "Error: no probes.csv in results dir: "),
        ("ragged probes.csv", "Error: probes.csv is malformed: "),
        ("missing columns", "Error: probes.csv lacks required column(s) binds: "),
        ("non-numeric", "Error: probes.csv row '9x9_s1_uncontended' column kernel_us: expected a finite number, got 'fast'"),
        ("no env.json", "Error: no env.json in results dir: "),
        ("malformed env.json", "Error: env.json is not valid JSON: "),
    ],
)  # fmt: skip
def test_bad_input_is_one_clear_line_and_exit_2(tmp_path: Path, what: str, message: str) -> None:
    r = _run(BEFORE, _broken(tmp_path, what))
    assert r.exit_code == 2, r.output
    errors = _error_lines(r)
    assert len(errors) == 1 and errors[0].startswith(message), r.stderr
    assert "Traceback" not in r.output
    assert r.stdout == ""


def test_missing_dir(tmp_path: Path) -> None:
    r = _run(tmp_path / "nope", AFTER)
    assert r.exit_code == 2
    assert _error_lines(r) == [f"Error: results dir does not exist: {tmp_path / 'nope'}"]


def test_help_documents_verdicts_and_exit_codes() -> None:
    r = runner.invoke(app, ["compare", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    for text in ("noise unknown", "SAME", "NOT COMPARABLE", "--gate", "Exit codes", "--allow-different-gpu"):
        assert text in r.output
