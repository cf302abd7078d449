"""The one message formatter (cli/common.py): every Error:, Warning: and Hint: on stderr, wrapped at the
output width, never between a number and its unit, never inside a word."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from clusterbench.cli import app
from clusterbench.cli.common import format_message

INDENT = " " * len("Error: ")


def test_a_short_message_is_one_line() -> None:
    assert format_message("Error:", "config file not found: x.toml", 80) == ["Error: config file not found: x.toml"]


def test_a_number_keeps_its_unit_at_the_end_of_a_line() -> None:
    # "Error: " and 70 letters fill 77 columns; "20" would still fit in 80, its "%" would not
    text = "a" * 70 + " 20 % busy"
    assert format_message("Error:", text, 80) == ["Error: " + "a" * 70, INDENT + "20 % busy"]
    # without a unit the number stays where it fits
    assert format_message("Error:", "a" * 70 + " 20 busy", 80) == ["Error: " + "a" * 70 + " 20", INDENT + "busy"]


def test_every_unit_stays_with_its_number() -> None:
    pairs = ["5.8 µs", "1,980 MHz", "20 %", "143771 MiB", "0.01 s", "54.2 GB/s", "61,400 FPS", "1.02 ×"]
    text = "; ".join(f"value {p}" for p in pairs) * 3
    for width in range(40, 101):
        lines = format_message("Warning:", text, width)
        for line in lines:
            assert len(line) <= width, (width, line)
            words = line.split()
            assert not (words and words[0] in ("µs", "MHz", "%", "MiB", "s", "GB/s", "FPS", "×")), (width, line)
        assert " ".join(" ".join(lines).split()) == "Warning: " + " ".join(text.split())


def test_no_word_is_broken_not_even_a_long_path_or_an_option() -> None:
    path = "/very/long/path/" + "d" * 90 + "/configs.toml"  # 119 characters: wider than the line
    lines = format_message("Error:", f"config file not found: {path} (check --config-file-path)", 80)
    # the path stands whole on a line of its own, past the width; the option is not split at its hyphens
    assert lines == ["Error: config file not found:", INDENT + path, INDENT + "(check --config-file-path)"]


def test_the_lines_of_a_message_keep_their_order_under_the_label() -> None:
    lines = format_message("Error:", "the child failed with exit status 3; last lines of a.log:\n"
                                     "toy finder: CUDA error: out of memory\n  File x.py, line 3", 80)
    assert lines == ["Error: the child failed with exit status 3; last lines of a.log:",
                     INDENT + "toy finder: CUDA error: out of memory", INDENT + "  File x.py, line 3"]


def test_hints_and_warnings_indent_under_their_own_label() -> None:
    assert format_message("Hint:", "b " * 45, 80)[1].startswith(" " * len("Hint: ") + "b")
    assert format_message("Warning:", "c " * 45, 80)[1].startswith(" " * len("Warning: ") + "c")


def _env_without_columns() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    return env


def test_a_piped_run_wraps_at_80_columns(tmp_path: Path) -> None:
    missing = tmp_path / ("x" * 40) / "no-such-configs.toml"
    res = subprocess.run([sys.executable, "-m", "clusterbench", "guard", "--config", str(missing)],
                         capture_output=True, text=True, env=_env_without_columns(), cwd=tmp_path, check=False)
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert lines[0].startswith("Error: config file not found") and len(lines) >= 3
    assert all(len(line) <= 80 or line.strip() == str(missing) for line in lines), lines


def test_columns_sets_the_width_of_a_piped_run(tmp_path: Path) -> None:
    long_tag = "t" * 10
    res = CliRunner().invoke(app, ["probe", "--config", str(tmp_path / "missing.toml"), "--tag", long_tag],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 2
    assert len(res.stderr.splitlines()) == 2  # the error and its hint, each on one line at 200 columns
    narrow = CliRunner().invoke(app, ["probe", "--config", str(tmp_path / "missing.toml")], env={"COLUMNS": "40"})
    assert all(len(line) <= 40 or "/" in line for line in narrow.stderr.splitlines())
    assert len(narrow.stderr.splitlines()) > 2
