"""benchmarks/unit_verdicts.py on hand-made units (dirs written through the real store and named as
scripts/device_verdicts.sh names them): which pairs it makes, what each must read, and its two counts.

Expected verdicts by the rule (docs/compare.md): three processes a side whose medians spread 0.2 %, so the
noise is the 1 % minimum effect within one unit; across two units also the across-units floor of the
default bounds (no floors file for this model), so a 20 % drop reads SLOWER either way and a 0.1 %
difference SAME.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from results_data import unit, write

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "unit_verdicts.py"


def _dir(folder: Path, step: str, uuid: str, fps: float, session: str) -> None:
    # process medians fps, fps x 1.001, fps x 0.999: a spread of 0.2 %
    row = {"label": "3x3_s1", "cluster": 3, "cap": 3000, "streams": 1, "batch": 200, "frames": 8000,
           "kernel_us": 0.45, "h2d_us": 5.8, "d2h_us": 2.2, "roofline_us": 5.8, "binds": "h2d",
           "pedestal_dtype": "float32", "pedestal": "frozen", "transfer": "copy", "tracer": "nsys",
           "processes": [[fps], [fps * 1.001], [fps * 0.999]]}
    write(folder / f"2026-12-07_f32_{step}_{uuid}", [row],
          {"gpu_name": "NVIDIA Test GPU", "driver": "580", "git_dirty": False, "git_rev": "abc1234",
           "session_id": session, "gpu_uuid": uuid, "unit": unit(uuid)})


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_the_pairs_and_their_counts(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _dir(a, "aa1", "GPU-aaaa", 117_300.0, "A1")
    _dir(a, "aa2", "GPU-aaaa", 117_400.0, "A2")     # +0.085 %: SAME
    _dir(a, "base20", "GPU-aaaa", 117_300.0, "A3")
    _dir(a, "delay20", "GPU-aaaa", 97_800.0, "A4")  # -16.62 %: SLOWER, --gate 3 exit 3
    _dir(b, "aa1", "GPU-bbbb", 117_200.0, "B1")     # against a's aa1: -0.085 %, SAME
    _dir(b, "base5", "GPU-bbbb", 117_200.0, "B2")
    _dir(b, "delay5", "GPU-bbbb", 116_900.0, "B3")  # -0.26 %: within the 1 % minimum effect: a missed delay
    res = _run(str(a), str(b))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "A/A, GPU-aaaa (aa1 -> aa2): --gate 3 exit" in out
    assert "delay 20 %, GPU-aaaa (base20 -> delay20): --gate 3 exit 3" in out
    assert "A/A across units, GPU-aaaa -> GPU-bbbb (aa1 -> aa1)" in out
    assert "A/A across units, GPU-bbbb -> GPU-aaaa (aa1 -> aa1)" in out
    assert "delay 5 %, GPU-bbbb (base5 -> delay5)" in out
    # no base20 on b and no delay20 on b: the 20 % delay across units is a's base20 -> nothing, b's -> a's delay20
    assert "delay 20 % across units, GPU-bbbb -> GPU-aaaa" not in out  # b has no base20
    assert "delay 20 % across units, GPU-aaaa -> GPU-bbbb" not in out  # b has no delay20
    lines = out.splitlines()
    assert "A/A figures that read FASTER or SLOWER: 0" in lines
    assert "delays that did not read SLOWER on sustained FPS with --gate exit 3: 1" in lines
    assert any(x.strip().startswith("delay 5 %, GPU-bbbb: sustained not SLOWER") for x in lines)
    slower = next(x for x in lines[lines.index("delay 20 %, GPU-aaaa (base20 -> delay20): --gate 3 exit 3") + 1:]
                  if x.strip().startswith("3x3_s1"))
    assert "sustained SLOWER -16.62 %" in slower  # (97,800 - 117,300) / 117,300 = -16.624 %


def test_a_folder_without_unit_dirs_is_one_error(tmp_path: Path) -> None:
    res = _run(str(tmp_path))
    assert res.returncode == 2 and res.stderr.startswith("Error: ") and "Traceback" not in res.stderr
    res = _run(str(tmp_path / "missing"))
    assert res.returncode == 2 and res.stderr.startswith("Error: ") and "Traceback" not in res.stderr
