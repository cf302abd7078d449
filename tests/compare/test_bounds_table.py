"""scripts/bounds_table.py recomputes compare/bounds.py's H200 rows from the committed A/A dirs they were made of."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from clusterbench.compare import bounds

ROOT = Path(__file__).resolve().parents[2]
DIRS = sorted(str(p) for p in (ROOT / "results").glob("2026-12-02_f32_aa_m*")) + [
    str(ROOT / "results" / n) for n in ("2026-12-01_f32_aa1", "2026-12-01_f32_aa2", "2026-12-01_f32_aa3",
                                         "2026-12-01_f32_slide", "2026-12-01_f32_slide_aa")]


def test_the_h200_rows_are_the_floor_rule_of_the_committed_a_a_dirs() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "bounds_table.py"), *DIRS], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    rows = ast.literal_eval(out[out.index("_ROWS = ") + len("_ROWS = "):])
    assert sorted(rows) == sorted(bounds._H200_ROWS) and len(rows) == 30
    assert out.startswith("# NVIDIA H200: the floor rule of 19 A/A dirs")
