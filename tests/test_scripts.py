"""Every script in scripts/, benchmarks/, probes/ and examples/ answers --help, and a GPU-only one says so.

Each script runs here as a user runs it, in a fresh process (python3 SCRIPT or bash SCRIPT):
- ``--help`` exits 0 within seconds and prints a usage text, on a machine without a GPU;
- a GPU-only script, run plainly where CuPy and a GPU are missing, exits 1 within seconds with
  one ``Error:`` line that says what it needs, then a ``Hint:`` line, and no traceback: it does
  no work first (no frames built, no logs written);
- the scripts that need no GPU (the results-dir helpers) run on committed results dirs.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT_DIRS = ("scripts", "benchmarks", "probes", "examples")
SCRIPTS = sorted(str(p.relative_to(ROOT)) for d in SCRIPT_DIRS for p in (ROOT / d).glob("*")
                 if p.suffix in (".py", ".sh"))
# GPU-only scripts, run plainly here (protocol programs get the arguments probe would give them),
# and the words their one-line reason must contain.
GPU_ONLY = {
    "benchmarks/ab_sustained.py": ([], "needs CuPy and an NVIDIA GPU"),
    "benchmarks/bench_ablate.py": ([], "needs CuPy and an NVIDIA GPU"),
    "benchmarks/bench_host_copy.py": ([], "needs CuPy and an NVIDIA GPU"),
    "benchmarks/bench_sync.py": ([], "needs CuPy and an NVIDIA GPU"),
    "benchmarks/bench_workload.py": ([], "needs CuPy and an NVIDIA GPU"),
    "benchmarks/daq_link_scan.py": (["{tmp}/zoo"], "needs an NVIDIA GPU"),
    "benchmarks/callback_cost.py": (["{tmp}/out"], "needs an NVIDIA GPU"),
    "examples/minimal_workload.py": (["--rows", "40", "--cols", "40", "--frames", "10", "--batch", "5",
                                      "--pedestal-frames", "10", "--nsigma", "5", "--result", "{tmp}/r.json"],
                                     "needs CuPy and an NVIDIA GPU"),
    "probes/aare_cuda.py": (["--params-json", '{"pedestal": "tracking"}', "--result", "{tmp}/r.json"],
                            "needs aare with its CUDA module (installed by aare's own instructions) and an NVIDIA GPU"),
    "scripts/device_campaign.sh": ([], "needs an NVIDIA GPU, CuPy and Nsight Systems"),
    "scripts/zoo_trace.sh": (["{tmp}/zoo"], "needs an NVIDIA GPU and Nsight Systems"),
    "scripts/aa_floors_probe.sh": (["{tmp}/zoo"], "needs an NVIDIA GPU and Nsight Systems"),
    "scripts/device_probe_checks.sh": (["{tmp}/zoo"], "needs an NVIDIA GPU and Nsight Systems"),
    "benchmarks/bench_probe_time.py": ([], "needs an NVIDIA GPU and Nsight Systems"),
    "scripts/device_steady.sh": (["{tmp}/out"], "needs an NVIDIA GPU and Nsight Systems"),
    "scripts/device_verdicts.sh": (["{tmp}/out"], "needs an NVIDIA GPU and Nsight Systems"),
    "scripts/device_untraced.sh": (["{tmp}/out"], "needs an NVIDIA GPU and Nsight Systems"),
    "scripts/steady_series.py": (["{tmp}/out"], "needs CuPy and an NVIDIA GPU"),
    "scripts/nsys_call_cost.py": ([], "needs an NVIDIA GPU, CuPy and Nsight Systems"),
}
FAST_S = 15  # --help and the GPU refusal: no heavy import, no work before the arguments are parsed


def _argv(script: str) -> list[str]:
    return (["bash"] if script.endswith(".sh") else [sys.executable]) + [str(ROOT / script)]


def _run(argv: list[str], cwd: Path = ROOT, env: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=cwd, env=env)
    return proc, time.monotonic() - t0


def _no_gpu_here() -> bool:
    return importlib.util.find_spec("cupy") is None and shutil.which("nvidia-smi") is None


def test_the_lists_cover_every_script() -> None:
    assert len(SCRIPTS) >= 15, SCRIPTS
    assert set(GPU_ONLY) <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_exits_0_fast_with_a_usage_text(script: str, tmp_path: Path) -> None:
    before = sorted(p.name for p in ROOT.iterdir())
    proc, took = _run(_argv(script) + ["--help"], cwd=ROOT)
    assert proc.returncode == 0, f"{script} --help: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert took < FAST_S, f"{script} --help took {took:.1f} s"
    assert "Traceback" not in proc.stderr, proc.stderr
    out = proc.stdout
    assert re.search(r"usage", out, re.I), out[:300]
    assert len(out.strip().splitlines()) >= 3, out
    if script in GPU_ONLY:  # --help says that it is GPU-only
        assert re.search(r"GPU only|needs .*GPU", out), out[:400]
    assert sorted(p.name for p in ROOT.iterdir()) == before, "--help left files in the checkout"


@pytest.mark.skipif(not _no_gpu_here(), reason="CuPy or an NVIDIA driver is present: the script would run")
@pytest.mark.parametrize("script", sorted(GPU_ONLY))
def test_gpu_only_script_refuses_fast_in_one_line(script: str, tmp_path: Path) -> None:
    args, needs = GPU_ONLY[script]
    env = {k: v for k, v in os.environ.items() if k not in ("OUT",)}
    env["OUT"] = str(tmp_path / "out")  # device_campaign.sh would write here, were it to start
    before = sorted(p.name for p in ROOT.iterdir())
    proc, took = _run(_argv(script) + [a.replace("{tmp}", str(tmp_path)) for a in args], env=env)
    assert proc.returncode == 1, f"{script}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert took < FAST_S, f"{script} took {took:.1f} s before refusing"
    lines = proc.stderr.strip().splitlines()
    assert lines and lines[0].startswith("Error: ") and needs in lines[0], proc.stderr
    assert any(ln.startswith("Hint: ") for ln in lines[1:]), proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "zoo").exists(), "work before the refusal"
    assert sorted(p.name for p in ROOT.iterdir()) == before, "files left in the checkout"


def _fake_gpu_path(tmp_path: Path) -> dict:
    """A PATH with nvidia-smi and nsys that succeed, and an importable 'cupy': the GPU check passes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("nvidia-smi", "nsys"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / name).chmod(0o755)
    (tmp_path / "py" / "cupy").mkdir(parents=True)
    (tmp_path / "py" / "cupy" / "__init__.py").write_text("")
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", OUT=str(tmp_path / "out"))
    env["PYTHONPATH"] = f"{tmp_path / 'py'}:{env.get('PYTHONPATH', '')}"
    return env


def test_device_campaign_refuses_an_unknown_part_before_any_work(tmp_path: Path) -> None:
    proc, _ = _run(["bash", str(ROOT / "scripts/device_campaign.sh"), "A"], env=_fake_gpu_path(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("Error: unknown part 'A'") and "reference-sweep" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_device_campaign_parts_are_named_and_each_is_run() -> None:
    text = (ROOT / "scripts/device_campaign.sh").read_text()
    parts = re.search(r'PARTS="([^"]+)"', text).group(1).split()
    assert len(parts) == len(set(parts)) >= 15
    for part in parts:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", part), part  # descriptive names, no letters
        assert re.search(rf"^#   {re.escape(part)} ", text, re.M), f"{part} is not described in the header"
        assert re.search(rf'"\$part" = {re.escape(part)}\b|\b{re.escape(part)}[|)]', text), f"{part} runs nothing"
    help_text = subprocess.run(["bash", str(ROOT / "scripts/device_campaign.sh"), "--help"], capture_output=True,
                               text=True, timeout=30).stdout
    assert all(part in help_text for part in parts)


def test_shell_scripts_parse() -> None:
    for script in (s for s in SCRIPTS if s.endswith(".sh")):
        proc = subprocess.run(["bash", "-n", str(ROOT / script)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}: {proc.stderr}"


def test_results_helpers_run_on_committed_results_dirs() -> None:
    proc, _ = _run([sys.executable, str(ROOT / "scripts/side_by_side.py"), "results/2026-12-01_f32",
                    "results/2026-12-01_f32_aare-cuda"])
    assert proc.returncode == 0, proc.stderr
    assert "| 9x9_s1_uncontended | aare ClusterFinderCUDA" in proc.stdout
    # committed results dirs keep no traces: verify_probes says so in one line, not in four mismatches
    proc, _ = _run([sys.executable, str(ROOT / "scripts/verify_probes.py"), "results/2026-12-01_f32"])
    assert proc.returncode == 2 and proc.stderr.startswith("Error: ") and "Hint: " in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_device_probe_checks_refuses_a_zoo_dir_that_is_not_built_before_any_work(tmp_path: Path) -> None:
    env = _fake_gpu_path(tmp_path)
    (tmp_path / "zoo").mkdir()
    proc, _ = _run(["bash", str(ROOT / "scripts/device_probe_checks.sh"), str(tmp_path / "zoo")], env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"Error: {tmp_path / 'zoo'}/no_nvtx is not there") and "tests/zoo/build.sh" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_device_probe_checks_probes_every_zoo_program_with_its_frames() -> None:
    """Each zoo program of tests/zoo/README.md is probed as it is, with a frames definition, and every step
    prints its command first (the run function)."""
    text = (ROOT / "scripts/device_probe_checks.sh").read_text()
    for prog in ("no_nvtx", "nvtx_domain", "multi_kernel", "threads", "device_graph", "host_bound"):
        assert re.search(rf'-- "\$zoo/{prog}"', text), prog
    assert text.count("--frames ") >= 12 and "--scan streams=1,2,4" in text and "--capture cudaProfilerApi" in text
    assert "printf '$'; printf ' %q' \"$@\"" in text  # the command, before it runs


@pytest.mark.parametrize("arg, message", [("no_such.sqlite", "Error: trace not found"),
                                          ("README.md", "Error: not an SQLite database")])
def test_bench_read_refuses_a_bad_trace_in_one_error(arg: str, message: str) -> None:
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_read.py"), arg], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stderr.startswith(message) and "Traceback" not in res.stderr


def test_profile_analyze_chain_runs_every_job_started_beside_the_chain_on_its_own_thread() -> None:
    # the four jobs analysis._group and held.find start beside the dependent chain, each timed on the main thread
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "profile_analyze.py"),
                          str(ROOT / "tests" / "data" / "h200" / "dev_5x5_s2_b500.sqlite"), "--chain"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    chain = [line for line in res.stdout.splitlines() if line.startswith("chain: ")]
    assert len(chain) == 1
    jobs = {part.split()[0] for part in chain[0].split("beside it (s): ")[1].split(", ")}
    assert jobs == {"_gaps_host_pacing", "_busy_and_kernels", "row_predecessors", "_all_wait_rows"}
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "profile_analyze.py"), "no_such.sqlite"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith("Error: trace not found") and "Traceback" not in bad.stderr
