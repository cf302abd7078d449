"""The finder's kernels compiled ahead of the runs: which builds a campaign has, the warm child's command line,
and the children's life (they end, are waited for, are stopped, leave their log) on any machine."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from clusterbench.run.config import load_configs
from clusterbench.run.precompile import Precompile, finder_builds
from clusterbench.workloads.cupy.warm import Build, builds_of

ROOT = Path(__file__).resolve().parents[2]


def test_smoke_configs_have_two_builds():
    # configs/smoke.toml by hand: four float32 configs at 400x400, two at cluster 3 and two at cluster 9
    cf = load_configs(ROOT / "configs" / "smoke.toml")
    assert finder_builds(cf.configs) == (Build("float32", 3, 400, 400), Build("float32", 9, 400, 400))


def test_f64_configs_build_float64():
    cf = load_configs(ROOT / "configs" / "smoke_f64.toml")
    assert {b.pedestal_dtype for b in finder_builds(cf.configs)} == {"float64"}


def test_builds_of_keeps_first_seen_order_and_drops_repeats():
    class P:
        def __init__(self, dtype, cluster, rows=400, cols=400):
            self.pedestal_dtype, self.cluster, self.rows, self.cols = dtype, cluster, rows, cols

    got = builds_of([P("float32", 9), P("float32", 3), P("float32", 9), P("float64", 3, 256, 512)])
    assert got == (Build("float32", 9, 400, 400), Build("float32", 3, 400, 400), Build("float64", 3, 256, 512))


@pytest.mark.parametrize("text", ["float32,3,400,400", "float64,9,256,1024"])
def test_build_argument_round_trips(text):
    assert Build.parse(text).arg() == text


@pytest.mark.parametrize("text", ["float16,3,400,400", "float32,3,400", "float32,x,400,400", "float32,0,400,400",
                                  "", "float32,3,400,400,1"])
def test_warm_child_refuses_a_bad_build_with_exit_2(text):
    res = subprocess.run([sys.executable, "-m", "clusterbench.workloads.cupy.warm", "--build", text],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("Error: --build") and "\nHint: " in res.stderr
    assert "Traceback" not in res.stderr


def test_precompile_children_wait_for_their_go_then_end_and_leave_their_log(tmp_path):
    builds = (Build("float32", 3, 16, 16), Build("float32", 5, 16, 16))
    pre = Precompile(builds)
    assert len(pre.procs) == 2
    folder = Path(pre.child_env()["CLUSTERBENCH_BUILDS_PENDING"])
    assert sorted(p.name for p in folder.iterdir()) == ["float32,3,16,16.pending", "float32,5,16,16.pending"]
    time.sleep(0.5)
    # each waits for its go (CuPy imported, or still importing); where CuPy is missing its import failed: exit 1
    assert all(p.poll() in (None, 1) for _, p in pre.procs)
    pre.go()
    pre.wait()
    assert list(folder.iterdir()) == []  # every build's pending file goes when its child has ended
    pre.keep_log(tmp_path)
    lines = (tmp_path / "precompile.log").read_text().splitlines()
    assert lines[0].startswith("the finder's kernels compiled ahead")
    # one line per build, with its exit: 0 where CuPy compiles it, 1 where CuPy or a compiler is missing
    assert [ln.split(":")[0] for ln in lines[1:] if ln.startswith("float32,")] == ["float32,3,16,16",
                                                                                  "float32,5,16,16"]
    assert all(re.search(r": exit [01] \d+\.\d\d s after the go: ", ln) for ln in lines[1:] if ln.startswith("float32,"))
    pre.stop()
    assert not folder.exists()


def test_precompile_stopped_before_its_go_compiles_nothing(tmp_path):
    pre = Precompile((Build("float32", 3, 16, 16),))
    folder = pre.folder
    pre.stop()
    assert pre.procs == [] and not folder.exists()
    none = Precompile(())
    none.go()
    none.wait()
    none.keep_log(tmp_path)
    assert none.procs == [] and none.child_env() == {} and not (tmp_path / "precompile.log").exists()


def test_a_child_that_reads_no_go_exits_without_compiling():
    res = subprocess.run([sys.executable, "-m", "clusterbench.workloads.cupy.warm", "--wait-go", "--build",
                          "float32,3,16,16"], input="stop\n", capture_output=True, text=True, cwd=ROOT)
    # 0 without a line of output where CuPy imports; 1 with the import's error where it does not
    assert (res.returncode, res.stdout) == (0, "") or (res.returncode == 1 and "Error:" in res.stderr)


def test_a_finder_process_waits_while_its_build_is_pending(tmp_path, monkeypatch):
    from clusterbench.model.params import WorkloadParams
    from clusterbench.workloads.cupy.run import wait_for_build

    params = WorkloadParams(cluster=3, rows=16, cols=16, cap=100)
    assert wait_for_build(params) == 0.0 or "CLUSTERBENCH_BUILDS_PENDING" in os.environ
    monkeypatch.setenv("CLUSTERBENCH_BUILDS_PENDING", str(tmp_path))
    assert wait_for_build(params) < 0.05  # nothing pending: no wait
    pending = tmp_path / f"{params.pedestal_dtype},3,16,16.pending"
    pending.write_text("compiling\n")
    threading.Timer(0.3, pending.unlink).start()
    waited = wait_for_build(params)
    assert 0.25 < waited < 5
    pending.write_text("compiling\n")
    assert 0.2 <= wait_for_build(params, wait_s=0.2) < 1  # a build that never ends is waited for no longer


def test_cache_dir_is_cupys_rule(monkeypatch, tmp_path):
    from clusterbench.workloads.cupy.warm import cache_dir

    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    assert cache_dir() == str(tmp_path)
    monkeypatch.delenv("CUPY_CACHE_DIR")
    monkeypatch.setenv("HOME", "/home/someone")
    assert cache_dir() == "/home/someone/.cupy/kernel_cache"
