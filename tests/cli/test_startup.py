"""Start-up: `clusterbench analyze` builds its own command alone, so that the modules of the other
commands (the probe's, history's, the guards') are never imported by it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TRACE = Path(__file__).resolve().parents[1] / "data" / "h200" / "dev_5x5_s2_b500.sqlite"
OTHERS = ("clusterbench.run.probe", "clusterbench.io.history", "clusterbench.run.guards", "clusterbench.cli.options",
          "clusterbench.cli.probe", "clusterbench.cli.compare")  # fmt: skip


def test_analyze_imports_no_other_command() -> None:
    code = (
        "import contextlib, io, sys\n"
        f"sys.argv = ['clusterbench', 'analyze', {str(TRACE)!r}, '--json']\n"
        "from clusterbench.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit as e:\n"
        "        assert not e.code, e.code\n"
        "assert out.getvalue().lstrip().startswith('{')\n"
        f"print(','.join(m for m in {OTHERS!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"analyze imported {out.stdout.strip()}"


def test_app_still_has_every_command() -> None:
    from clusterbench.cli import COMMANDS, app, build_app

    names = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    assert names == set(COMMANDS)
    one = build_app("analyze")
    assert [c.name for c in one.registered_commands] == ["analyze"] and not one.registered_groups
