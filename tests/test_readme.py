"""Every command the README (and docs/results.md) shows runs as written on a fresh clone.

A command is a code span, or a line of a code block, that starts with ``clusterbench``, ``make``,
``python``/``python3`` or ``bash``. Each must sit on one line (a span wrapped over two lines
cannot be copied), and every file it names must exist in the checkout. Then, as written:
- analyze and compare run here, through the CLI, on the committed traces and results dirs: exit 0;
- probe and guard need a GPU: their config files load and their --only labels exist, and on a
  machine without a GPU they exit 1 (environment failure) and write nothing, as documented;
- make targets exist (``make -n``);
- python scripts that need no GPU run and exit 0; GPU-only ones are checked by test_scripts.py.
Synopses (TRACE, DIR_A, [--json|--csv], ...) are not concrete commands: only their one-line form
is checked. The README also stays the product's page: at most 300 lines, and no words about how
the work was organised, in it or in docs/*.md.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clusterbench.cli import app
from clusterbench.run.config import load_configs

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("README.md", "docs/results.md")
TEXT = {page: (ROOT / page).read_text() for page in PAGES}
README = TEXT["README.md"]
STARTS = ("clusterbench", "make", "python", "python3", "bash")
# program names quoted as such, not commands
NAMES = {"clusterbench", "python", "python3", "python3 -m clusterbench", "python -m clusterbench"}
OUTPUT_ARGS = {"--plot", "--json", "--out", "-o", "--result"}  # the file after these is written, not read
GPU_SCRIPTS = {"benchmarks/bench_workload.py", "benchmarks/bench_ablate.py", "benchmarks/bench_sync.py",
               "benchmarks/ab_sustained.py", "benchmarks/bench_host_copy.py", "probes/aare_cuda.py",
               "examples/minimal_workload.py", "scripts/device_campaign.sh", "scripts/zoo_trace.sh",
               "scripts/device_probe_checks.sh", "benchmarks/bench_probe_time.py"}
SLOW_SCRIPTS = {"benchmarks/bench_analyze.py"}  # minutes of work: `make bench`, not a test


def _strip_fences(text: str) -> tuple[str, list[str]]:
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)
    return re.sub(r"^```[a-z]*\n.*?^```", "", text, flags=re.S | re.M), blocks


def _raw_commands(text: str) -> list[str]:
    """Every command as written, newlines kept (a span may wrap: that is what the one-line test catches)."""
    prose, blocks = _strip_fences(text)
    spans = [s for s in re.findall(r"`([^`]+)`", prose) if s.split() and s.split()[0] in STARTS]
    lines = [ln.strip() for b in blocks for ln in b.splitlines() if ln.strip().split()[:1] and
             ln.strip().split()[0] in STARTS]
    return spans + lines


def _is_synopsis(c: str) -> bool:
    return bool(re.search(r"\[|\||\b[A-Z_]{3,}\b|«|\.\.\.|<", c))


def _commands(text: str) -> list[str]:
    out = []
    for c in _raw_commands(text):
        c = " ".join(c.split())
        if "#" in c:
            c = c.split("#", 1)[0].strip()
        if c in NAMES or _is_synopsis(c):
            continue
        if len(c.split()) > 1 and c.split()[1].endswith(":"):  # output ("clusterbench probe: results/..."), not a command
            continue
        if c not in out:
            out.append(c)
    return out


COMMANDS = [c for page in PAGES for c in _commands(TEXT[page])]
COMMANDS = list(dict.fromkeys(COMMANDS))


def _verb(c: str) -> str:
    return c.split()[1] if len(c.split()) > 1 else ""


def _no_gpu_here() -> bool:
    return importlib.util.find_spec("cupy") is None and shutil.which("nvidia-smi") is None


def test_the_readme_shows_commands_of_every_kind() -> None:
    readme = _commands(README)
    verbs = {_verb(c) for c in readme if c.startswith("clusterbench ")}
    assert {"analyze", "compare", "probe", "guard"} <= verbs, readme
    assert "make run" in readme and "make test" in readme


@pytest.mark.parametrize("page", PAGES)
def test_every_command_sits_on_one_line(page: str) -> None:
    wrapped = [c for c in _raw_commands(TEXT[page]) if "\n" in c]
    assert not wrapped, f"{page}: commands wrapped over two lines (copying them fails): {wrapped}"


def _named_files(command: str) -> list[str]:
    argv = shlex.split(command)
    files = []
    for i, a in enumerate(argv[1:], 1):
        if argv[i - 1] in OUTPUT_ARGS or a.startswith("-") or "=" in a:
            continue
        if "/" in a or re.search(r"\.(toml|sqlite|py|sh|png|csv|json)$", a):
            files.append(a.rstrip("/"))
    return list(dict.fromkeys(files))


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_names_files_that_exist(command: str) -> None:
    missing = [f for f in _named_files(command) if not (ROOT / f).exists()]
    assert not missing, f"{command}: no such file in the checkout: {missing}"


def test_the_file_check_can_fail() -> None:
    assert _named_files("clusterbench analyze tests/data/h200/nope.sqlite --plot out/run.png") == [
        "tests/data/h200/nope.sqlite"]
    assert _named_files("python3 benchmarks/bench_workload.py --grid") == ["benchmarks/bench_workload.py"]
    assert _raw_commands("`clusterbench compare results/a\nresults/b`") == ["clusterbench compare results/a\nresults/b"]


@pytest.mark.parametrize("command", [c for c in COMMANDS if _verb(c) in ("analyze", "compare")
                                     and c.startswith("clusterbench ") and len(c.split()) > 2])
def test_analyze_and_compare_examples_run_as_written(command: str, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)
    argv = shlex.split(command)[1:]
    if "--plot" in argv:  # write the picture somewhere harmless, with the extension the page gave
        if importlib.util.find_spec("matplotlib") is None:
            pytest.skip("--plot needs matplotlib (pip install 'clusterbench[plot]')")
        i = argv.index("--plot")
        argv[i + 1] = str(tmp_path / Path(argv[i + 1]).name)
    res = CliRunner().invoke(app, argv)
    want = {0, 3} if "--gate" in argv else {0}
    assert res.exit_code in want, f"{command}\n{res.output}"


def test_the_analyze_example_shows_what_the_command_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's analyze output is the real output of the command above it, at 80 columns."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", "80")
    block = README.split("`clusterbench analyze tests/data/h200/dev_5x5_s2_b500.sqlite`", 1)[1]
    shown = block.split("```\n", 2)[1].rstrip("\n").splitlines()
    res = subprocess.run([sys.executable, "-m", "clusterbench", "analyze", "tests/data/h200/dev_5x5_s2_b500.sqlite"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**__import__("os").environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr
    assert [ln.rstrip() for ln in res.stdout.rstrip("\n").splitlines()] == shown


GPU_COMMANDS = [c for c in COMMANDS if c.startswith("clusterbench ") and _verb(c) in ("probe", "guard")]


@pytest.mark.parametrize("command", GPU_COMMANDS)
def test_gpu_examples_name_configs_and_labels_that_exist(command: str) -> None:
    argv = shlex.split(command)[1:]
    config = argv[argv.index("--config") + 1] if "--config" in argv else "configs.toml"
    cf = load_configs(ROOT / config)  # raises ConfigError for a missing or broken file
    labels = {c.label for c in cf.configs}
    only = [argv[i + 1] for i, a in enumerate(argv) if a == "--only"]
    assert set(only) <= labels, (command, only, labels)


@pytest.mark.skipif(not _no_gpu_here(), reason="a GPU may be present: the command would run")
@pytest.mark.parametrize("command", GPU_COMMANDS)
def test_gpu_examples_without_a_gpu_exit_1_and_write_nothing(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    before = sorted(p.name for p in (ROOT / "results").iterdir())
    res = CliRunner().invoke(app, shlex.split(command)[1:])
    assert res.exit_code == 1, f"{command}\n{res.output}"
    assert sorted(p.name for p in (ROOT / "results").iterdir()) == before


HISTORY_COMMANDS = [c for c in COMMANDS if c.startswith("clusterbench history ")]


def test_history_examples_run_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The history commands write results/history.db: they run, in the order shown, in a copy of the
    checkout's results/ (as on a fresh clone: no database yet), and exit 0."""
    assert any(" import " in c for c in HISTORY_COMMANDS), HISTORY_COMMANDS
    shutil.copytree(ROOT / "results", tmp_path / "results", ignore=shutil.ignore_patterns("history.db*", "*.log"))
    monkeypatch.chdir(tmp_path)
    for command in HISTORY_COMMANDS:
        res = CliRunner().invoke(app, shlex.split(command)[1:])
        assert res.exit_code == 0, f"{command}\n{res.output}"


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.startswith("make ")])
def test_make_targets_exist(command: str) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    res = subprocess.run(["make", "-n", *shlex.split(command)[1:]], capture_output=True, text=True, cwd=ROOT,
                         timeout=60)
    assert res.returncode == 0, f"{command}: {res.stderr}"


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.split()[0] in ("python", "python3", "bash")])
def test_cpu_scripts_run_as_written(command: str) -> None:
    argv = shlex.split(command)
    script = argv[1]
    if script in GPU_SCRIPTS or script in SLOW_SCRIPTS:
        pytest.skip(f"{script}: GPU-only or slow; tests/test_scripts.py runs its --help")
    res = subprocess.run([sys.executable if argv[0].startswith("python") else argv[0], *argv[1:]],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0, f"{command}\n{res.stderr}"


def test_the_readme_is_a_product_page_of_at_most_300_lines() -> None:
    assert len(README.splitlines()) <= 300


ORGANISATION = re.compile(r"(first|second|third|fourth) session|another session.s|session.s machine|other engineers"
                          r"|(call|campaign) [A-I][0-9]|\bissues? #?[0-9]+", re.I)


def test_no_words_about_how_the_work_was_organised() -> None:
    hits = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for n, line in enumerate(page.read_text().splitlines(), 1):
            if ORGANISATION.search(line):
                hits.append(f"{page.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not hits, "\n".join(hits)


# docs/analyze.md and docs/results-format.md are written alongside analyze and the results model
OWN_DOCS = [ROOT / "README.md"] + [p for p in sorted((ROOT / "docs").glob("*.md"))
                                   if p.name not in ("analyze.md", "results-format.md")]


@pytest.mark.parametrize("page", OWN_DOCS, ids=lambda p: p.name)
def test_docs_commands_sit_on_one_line(page: Path) -> None:
    wrapped = [c for c in _raw_commands(page.read_text()) if "\n" in c]
    assert not wrapped, f"{page.name}: commands wrapped over two lines: {wrapped}"


def test_docs_name_files_that_exist() -> None:
    """Repository paths named in the README and the docs (tests, scripts, logs, results dirs) exist."""
    missing = []
    for page in OWN_DOCS:
        text = page.read_text()
        for path in set(re.findall(r"(?<![\w/.])((?:tests|scripts|benchmarks|probes|examples|configs|results|docs/measurements|docs/img)"
                                   r"/[\w./-]*[\w/])", text)):
            if "<" in path or "*" in path or ".campaign" in path:  # placeholders; a dir probe would write
                continue
            if not (ROOT / path).exists() and not list(ROOT.glob(path + "*")):
                missing.append(f"{page.name}: {path}")
    assert not missing, "\n".join(sorted(missing))


def test_docs_name_modules_that_exist() -> None:
    """Module paths named in the README and the docs this page set owns resolve in the current layout."""
    missing = []
    for page in OWN_DOCS:
        text = page.read_text()
        for path in set(re.findall(r"\bclusterbench/[\w/]+\.(?:py|cu|cuh)\b", text)):
            if not (ROOT / path).exists():
                missing.append(f"{page.name}: {path}")
        for mod in set(re.findall(r"\bclusterbench(?:\.[a-z_]+)+(?![-\w/])", text)):
            parts = mod.split(".")
            # a module, or an attribute of one (clusterbench.run.config.load_configs)
            if not any((ROOT.joinpath(*parts[:k]).with_suffix(".py")).exists() or (ROOT.joinpath(*parts[:k])).is_dir()
                       for k in range(len(parts), 1, -1)):
                missing.append(f"{page.name}: {mod}")
    assert not missing, "\n".join(sorted(missing))
