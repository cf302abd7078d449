"""Every concrete command the README shows runs as written on a fresh clone.

analyze and compare commands run here, through the CLI, on the files they name (committed
traces and result dirs). probe and guard need a GPU; for those, every config file they name must
load and every --only label must exist, so the command would start as written on a GPU machine.
Synopses (TRACE, DIR_A, [--json|--csv], ...) are not concrete commands and are skipped.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.cli import app
from clusterbench.run.config import load_configs

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _commands() -> list[str]:
    spans = re.findall(r"`(clusterbench [^`]+)`", README, flags=re.S)
    blocks = re.findall(r"```[a-z]*\n(.*?)```", README, flags=re.S)
    lines = [ln.strip() for b in blocks for ln in b.splitlines() if ln.strip().startswith("clusterbench ")]
    out = []
    for c in [" ".join(s.split()) for s in spans] + lines:
        if "#" in c:
            c = c.split("#", 1)[0].strip()
        # a synopsis: placeholders in capitals, optional parts in brackets, alternatives with |
        if re.search(r"\[|\||\b[A-Z_]{3,}\b|«|\.\.\.", c):
            continue
        if c.split()[1].endswith(":"):  # a line of output ("clusterbench probe: results/..."), not a command
            continue
        if c not in out:
            out.append(c)
    return out


COMMANDS = _commands()


def test_the_readme_shows_commands_of_every_kind() -> None:
    verbs = {c.split()[1] for c in COMMANDS if len(c.split()) > 1}
    assert {"analyze", "compare", "probe"} <= verbs, COMMANDS


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.split()[1:2] in (["analyze"], ["compare"])
                                     and len(c.split()) > 2])
def test_analyze_and_compare_examples_run_as_written(command: str, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)
    argv = shlex.split(command)[1:]
    if "--plot" in argv:  # write the picture somewhere harmless, with the extension the README gave
        i = argv.index("--plot")
        argv[i + 1] = str(tmp_path / Path(argv[i + 1]).name)
    res = CliRunner().invoke(app, argv)
    want = {0, 3} if "--gate" in argv else {0}
    assert res.exit_code in want, f"{command}\n{res.output}"


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.split()[1:2] in (["probe"], ["guard"])])
def test_gpu_examples_name_configs_and_labels_that_exist(command: str) -> None:
    argv = shlex.split(command)[1:]
    config = argv[argv.index("--config") + 1] if "--config" in argv else "configs.toml"
    cf = load_configs(ROOT / config)  # raises ConfigError for a missing or broken file
    labels = {c.label for c in cf.configs}
    only = [argv[i + 1] for i, a in enumerate(argv) if a == "--only"]
    assert set(only) <= labels, (command, only, labels)
