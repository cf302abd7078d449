"""The warm child on the GPU: it fills CuPy's kernel cache under the key the finder's own RawModule computes, so
that the next process loads the build instead of compiling it; with --wait-go it compiles only once told (needs
CuPy and a GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]

_LOAD = """
import json, os, sys, time
from clusterbench.workloads.cupy.pipeline import _main_module
t = time.perf_counter()
mod = _main_module("float32", int(sys.argv[1]), None, None, (), (400, 400))
mod.get_function("frozen_slide")
print(json.dumps({"seconds": time.perf_counter() - t}))
"""


def _cubins(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("*.cubin")}


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ, CUPY_CACHE_DIR=str(cache))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def test_warm_fills_the_cache_the_finder_reads_without_a_context(tmp_path):
    pytest.importorskip("cupy")
    cache = tmp_path / "kernel_cache"
    res = subprocess.run([sys.executable, "-m", "clusterbench.workloads.cupy.warm", "--build", "float32,7,400,400"],
                         capture_output=True, text=True, env=_env(cache), cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout.strip().splitlines()[-1])
    assert doc["build"] == "float32,7,400,400" and doc["compiled"] is True
    after_warm = _cubins(cache)
    assert after_warm
    # the finder's own path, in a new process, finds its build in the cache: no file is added
    run = subprocess.run([sys.executable, "-c", _LOAD, "7"], capture_output=True, text=True, env=_env(cache),
                         cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr
    assert _cubins(cache) == after_warm
    # and warming again, told to go on stdin, compiles nothing
    again = subprocess.run([sys.executable, "-m", "clusterbench.workloads.cupy.warm", "--wait-go", "--build",
                            "float32,7,400,400"], input="go\n", capture_output=True, text=True, env=_env(cache),
                           cwd=ROOT, timeout=300)
    assert json.loads(again.stdout.strip().splitlines()[-1])["compiled"] is False
