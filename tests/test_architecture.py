"""Imports point one way: cli -> everything else -> models and errors.

The core must load without typer, rich or CuPy, so that `analyze` and `--help` work on a
machine without a GPU and so the library can be used from plain Python.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

CORE_MODULES = [
    "clusterbench.analysis",
    "clusterbench.trace",
    "clusterbench.config",
    "clusterbench.results",
    "clusterbench.guards",
    "clusterbench.analysis.compare",
    "clusterbench.probe",
]
FORBIDDEN = ("typer", "rich", "cupy", "click")


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_imports_no_ui_or_gpu_library(module: str) -> None:
    code = (
        "import sys, importlib\n"
        f"importlib.import_module({module!r})\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} pulled in {out.stdout.strip()}"


def test_cli_help_does_not_import_cupy() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from clusterbench.cli import app\n"
        "r = CliRunner().invoke(app, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print('cupy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


COMMANDS = ("analyze", "probe", "compare", "guard")


def test_every_command_is_documented() -> None:
    from clusterbench.cli import app

    runner = CliRunner()
    top = runner.invoke(app, ["--help"])
    assert top.exit_code == 0
    for name in COMMANDS:
        assert name in top.output
        res = runner.invoke(app, [name, "--help"])
        assert res.exit_code == 0, res.output
        # every command documents what it answers and its exit codes
        assert "Exit codes" in res.output, f"{name} --help lacks the exit codes"
        assert "not built yet" not in res.output


def test_python_dash_m_works() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "clusterbench", "--version"], capture_output=True, text=True, check=True
    )
    from clusterbench import __version__

    assert out.stdout.strip() == f"clusterbench {__version__}"
