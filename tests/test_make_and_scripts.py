"""What the Makefile, the scripts and the README promise a newcomer.

- No make target or script builds a third party's code: aare is installed by its users (docs/aare-cuda.md);
  no build kit, no harness compiled from aare's sources, no cmake; nvcc builds only our own programs.
- ``make clean`` leaves the checkout as a fresh clone has it: no .venv, no caches, no history database made by a
  first ``history LABEL``; tracked files stay.
- The README's commands table has a row for every command, and says what ``make bench`` exits with.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from clusterbench.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
BUILD_FILES = [ROOT / "Makefile", *sorted((ROOT / "scripts").rglob("*")), *sorted((ROOT / ".ci").rglob("*"))]
BANNED = re.compile(r"\.device/peers|AARE_KIT|aare_harness\.sh|ClusterFinderCUDA\.test\.cu|make aare-cuda|build/aare-cuda")


def test_no_recipe_builds_third_party_code() -> None:
    for f in (p for p in BUILD_FILES if p.is_file()):
        text = f.read_text(errors="replace")
        assert not BANNED.search(text), f"{f.relative_to(ROOT)}: {BANNED.search(text).group(0)}"
        assert not re.search(r"\bcmake\b", text), f"{f.relative_to(ROOT)} runs cmake"
        # nvcc builds only our own sources (tests/zoo, clusterbench/run/native): never one of aare's
        assert not re.search(r"aare[^\n]*\.(cu|cpp|cuh|hpp)\b", text), f"{f.relative_to(ROOT)} names aare's sources"
    assert not (ROOT / "scripts" / "aare_harness.sh").exists()
    make = (ROOT / "Makefile").read_text()
    assert "aare" not in make.lower()


def test_aare_is_found_where_its_users_put_it() -> None:
    probe = (ROOT / "probes" / "aare_cuda.py").read_text()
    assert "CLUSTERBENCH_AARE_PYTHON" in probe and "build/aare-cuda" not in probe and '"build"' not in probe
    doc = (ROOT / "docs" / "aare-cuda.md").read_text()
    assert "https://github.com/slsdetectorgroup/aare" in doc and "feature/cuda_clusterfinder" in doc
    assert "CLUSTERBENCH_AARE_PYTHON" in doc and "_cuda_available()" in doc
    assert not BANNED.search(doc)
    config = (ROOT / "configs" / "aare_cuda.toml").read_text()
    assert "[build]" not in config and ".device" not in config


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_clean_leaves_a_fresh_clone(tmp_path: Path) -> None:
    shutil.copyfile(ROOT / "Makefile", tmp_path / "Makefile")
    made = [".venv/bin/python", "clusterbench.egg-info/PKG-INFO", ".pytest_cache/v/x", "benchmarks/out/a.json",
            "results/history.db", "results/history.db-journal", "clusterbench/__pycache__/a.pyc",
            "tests/io/__pycache__/b.pyc"]
    kept = ["results/2026-12-01_f32/probes.csv", "clusterbench/a.py", "tests/io/test_b.py", "README.md"]
    for rel in made + kept:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    p = subprocess.run(["make", "clean"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    left = sorted(str(f.relative_to(tmp_path)) for f in tmp_path.rglob("*") if f.is_file())
    assert left == sorted(kept + ["Makefile"])
    assert not list(tmp_path.rglob("__pycache__"))


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_help_says_how_bench_exits() -> None:
    p = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0
    bench = next(ln for ln in p.stdout.splitlines() if ln.startswith("make bench"))
    assert "make exits 2" in bench and "exits 3" in bench
    assert "aare" not in p.stdout


def test_the_readme_has_a_row_for_every_command_and_says_how_make_bench_exits() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## The commands"):]
    table = table[: table.index("\n## ")]
    rows = [ln for ln in table.splitlines() if ln.startswith("| `clusterbench ")]
    for name in COMMANDS:
        assert any(ln.startswith(f"| `clusterbench {name}") for ln in rows), name
    baseline = next(ln for ln in rows if ln.startswith("| `clusterbench baseline"))
    assert "`clusterbench baseline set NAME DIR`" in baseline and "compare baseline:NAME" in baseline
    history = next(ln for ln in rows if ln.startswith("| `clusterbench history"))
    assert "baseline set" not in history  # `history baseline set` is no command
    codes = readme[readme.index("## Exit codes"):]
    three = next(ln for ln in codes.splitlines() if ln.startswith("| 3 |"))
    assert "`python benchmarks/bench_analyze.py` missed a limit" in three and "`make bench` then exits 2" in three


def test_the_device_scripts_step_runner_times_logs_and_counts_failures(tmp_path):
    """scripts/lib/gpu_script.sh's run: each step's output in OUT/NAME.log, a row NAME|exit|seconds, a line in
    OUT/steps.txt, failed=1 after a failing step, and the step's own exit status returned."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    script = (f'out={tmp_path}; . {root}/scripts/lib/gpu_script.sh; gpu_steps_start; run ok echo hello; '
              'run bad sh -c "echo oops; exit 3"; rc=$?; echo "rows=${#rows[@]} failed=$failed rc=$rc ${rows[1]%|*}"')
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "rows=2 failed=1 rc=3 bad|3"
    assert (tmp_path / "ok.log").read_text() == "hello\n" and (tmp_path / "bad.log").read_text() == "oops\n"
    lines = (tmp_path / "steps.txt").read_text().splitlines()
    assert [ln.split()[:3] for ln in lines] == [["ok", "exit", "0"], ["bad", "exit", "3"]]
