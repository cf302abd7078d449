"""The options several commands share are one definition each, with the core's defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.main import get_command

from clusterbench.cli import app
from clusterbench.run.guards import DEFAULT_MAX_UTIL_PCT, DEFAULT_WINDOW_S
from clusterbench.compare.noise import DEFAULT_MIN_EFFECT_PCT
from clusterbench.run.probe import DEFAULT_PROCESSES, DEFAULT_REPEAT, DEFAULT_RESULTS_ROOT, DEFAULT_TRACER

COMMANDS = {name: cmd for name, cmd in get_command(app).commands.items()}


def _params(option: str, commands: set[str] | None = None) -> dict[str, object]:
    return {name: p for name, cmd in COMMANDS.items() for p in cmd.params if option in getattr(p, "opts", ())
            and (commands is None or name in commands)}


# Options that one command means another thing by (a word the issue or the user named): command: what it does.
OTHER_MEANING = {"--force": {"floors": "replace an existing floors file"}}


@pytest.mark.parametrize("option, commands, default", [
    ("--json", {"analyze", "compare", "guard", "probe", "floors", "history"}, False),
    ("--config", {"guard", "probe"}, None),
    ("--max-util", {"guard", "probe"}, DEFAULT_MAX_UTIL_PCT),
    ("--force", {"guard", "probe"}, False),
    ("--require-clean", {"guard", "probe"}, False),
    ("--gpus", {"guard", "probe"}, None),
    ("--sample-window", {"guard"}, DEFAULT_WINDOW_S),  # guard's: seconds of NVML samples
    ("--window", {"analyze", "probe", "compare"}, None),  # the trace window, as analyze takes it
    ("--range", {"analyze", "compare"}, None),
    ("--results-dir", {"probe", "floors"}, Path(DEFAULT_RESULTS_ROOT)),
    ("--db", {"compare", "history", "probe"}, None),
    ("--repeat", {"probe"}, DEFAULT_REPEAT),
    ("--processes", {"probe"}, DEFAULT_PROCESSES),
    ("--min-effect", {"compare"}, DEFAULT_MIN_EFFECT_PCT),
    ("--tracer", {"probe"}, DEFAULT_TRACER),
])
def test_a_shared_option_is_one_definition_with_the_cores_default(option: str, commands: set[str],
                                                                  default: object) -> None:
    params = _params(option, commands)
    assert set(params) == commands
    # no command outside these defines it, but for one that means another thing by it, said here
    assert set(_params(option)) - commands == set(OTHER_MEANING.get(option, {}))
    assert {p.help for p in params.values()} == {next(iter(params.values())).help}  # one help text
    assert all(p.default == default for p in params.values()), {n: p.default for n, p in params.items()}



def test_an_option_with_another_meaning_says_it() -> None:
    for option, where in OTHER_MEANING.items():
        for name in where:
            (p,) = _params(option, {name}).values()
            assert "replace" in p.help.lower() and p.default is False
