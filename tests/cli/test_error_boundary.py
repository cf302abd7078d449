"""The error boundary prints user text verbatim: brackets in a message are not rich markup."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from clusterbench.cli import app


def test_error_text_with_brackets_is_shown_verbatim(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[defaults]\nnsigma = 5.0\n[[config]]\nlabel = "a"\ncluster = 3\ncap = 10\nbatch = 10\nframes = 100\n')
    res = CliRunner().invoke(app, ["probe", "--config", str(cfg)])
    assert res.exit_code == 2
    assert "missing key 'streams' (set it here or in [defaults])" in res.stderr
    assert "Traceback" not in res.output
