"""analyze --plot: formats by extension, refusals before any output, write failures, no matplotlib."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.cli import app
from cli_output import messages

from fake_nsys import Copy, Graph, Kernel, Range, Trace, build  # noqa: E402

MAGIC = {".png": b"\x89PNG\r\n\x1a\n", ".pdf": b"%PDF", ".svg": b"<?xml"}


def run(*args: str):
    return CliRunner().invoke(app, ["analyze", *args])


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("plot")
    t = Trace(
        copies=[Copy(1000 * i, 1000 * i + 300, kind=1, bytes=300, stream=7 + i % 2) for i in range(8)],
        kernels=[Kernel(1000 * i + 300, 1000 * i + 800, stream=7 + i % 2) for i in range(8)],
        graphs=[Graph(8000, 8500, stream=9)],
        ranges=[Range(0, 9000, "clusterbench:pass frames=8")],
    )
    return build(d / "t.sqlite", t)


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_writes_each_format(trace: Path, tmp_path: Path, suffix: str) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / f"pic{suffix.upper() if suffix == '.png' else suffix}"  # the extension's case does not matter
    res = run(str(trace), "--plot", str(out), "--json")
    assert res.exit_code == 0, res.output
    assert out.read_bytes().startswith(MAGIC[suffix])
    assert f"wrote {out}" in res.stderr


@pytest.mark.parametrize("name", ["pic.gif", "pic", "pic.png.txt"])
def test_other_extensions_are_refused_before_any_output(tmp_path: Path, name: str) -> None:
    # the trace does not even exist: the plot name is checked first
    res = run(str(tmp_path / "missing.sqlite"), "--plot", str(tmp_path / name))
    assert res.exit_code == 2 and res.stdout == ""
    lines = messages(res.stderr)
    # one check for analyze and compare (render.plot.check_plot_path): the extension is named
    assert len(lines) == 2 and lines[0].startswith("Error: --plot writes .png, .svg or .pdf, not ")
    assert lines[1].startswith("Hint:") and ".png, FILE.svg or FILE.pdf" in lines[1]


def test_missing_directory_is_one_error_line(trace: Path, tmp_path: Path) -> None:
    res = run(str(trace), "--plot", str(tmp_path / "no" / "such" / "pic.png"))
    assert res.exit_code == 2 and res.stdout == ""
    assert messages(res.stderr)[0].startswith("Error: cannot write the plot ")
    assert "directory" in messages(res.stderr)[0] and "does not exist" in messages(res.stderr)[0]


def test_write_failure_is_one_error_line(trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    def full_disk(self, *a, **k):  # noqa: ANN001, ANN002, ANN003
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", full_disk)
    res = run(str(trace), "--plot", str(tmp_path / "pic.png"), "--json")
    assert res.exit_code == 2
    err = [m for m in messages(res.stderr) if m.startswith("Error:")]
    assert err == [f"Error: cannot write the plot {tmp_path / 'pic.png'}: No space left on device"]
    assert "Traceback" not in res.stderr


def test_without_matplotlib(trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)
    res = run(str(trace), "--plot", str(tmp_path / "pic.png"))
    assert res.exit_code == 1 and res.stdout == ""
    assert "--plot needs matplotlib" in res.stderr and "clusterbench[plot]" in res.stderr
