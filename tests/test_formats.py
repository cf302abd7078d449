"""One formatter: no module outside clusterbench/model/units.py formats FPS, percentages, µs/frame or
ms from ns inline, derives a per-frame time as ``ns / 1000 / frames`` or a rate as ``1e6 / us``, or
shows "not measured" as "-" or "n/a". Each of those goes through model/units.py (``units.fps``,
``units.pct``, ``units.us_per_frame``, ``units.ms``, ``units.us_per_frame_of``, ``units.fps_of_us``,
``units.NOT_MEASURED``), so that one figure reads the same in every table, note and message.

The scan is a regex over the source lines of clusterbench/; what it lets through is listed in ALLOWED,
each with its reason, and an entry that no longer matches anything fails too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "clusterbench"
FORMATTER = ROOT / "model" / "units.py"

_SPEC = r"\{[^{}]*:[^{}]*\}"  # an f-string field with a format spec
INLINE = {
    "FPS formatted inline (units.fps)": re.compile(_SPEC + r"\s*FPS\b"),
    "percentage formatted inline (units.pct, pct_of, signed_pct)": re.compile(_SPEC + r"\s*%|\{[^{}]*:[^{}]*%\}"),
    "µs/frame formatted inline (units.us_per_frame)": re.compile(_SPEC + r"\s*µs/frame"),
    "ns shown in µs or ms inline (units.us, units.ms)": re.compile(r"\{[^{}:]*/[^{}]*:[^{}]*\}\s*(µs|ms)\b"),
    "GB/s formatted inline (units.gbps)": re.compile(_SPEC + r"\s*GB/s"),
    "per-frame time derived inline (units.us_per_frame_of)": re.compile(r"/\s*(1000(\.0)?|1e3|1_000)\s*/"),
    "rate derived from µs inline (units.fps_of_us)": re.compile(r"1e6\s*/\s*\(?[\w.]*_us\b"),
    "not measured shown as '-' or 'n/a' (units.NOT_MEASURED)": re.compile(
        r'(\belse|\breturn|\bor)\s+"(-|n/a)"|"(-|n/a)"\s+if\b'),
}

# (path under clusterbench/, a piece of the line, why it may stay)
ALLOWED: tuple[tuple[str, str, str], ...] = (
    ("analyzers/whatif.py", 'return f"{self.engine} at {self.gbps:g} GB/s"',
     "echoes the user's --what-if ENGINE_gbps=RATE as it was typed, not a measured figure"),
)


def violations(text: str) -> list[tuple[int, str, str]]:
    """(line number, what, line) for every inline format in ``text`` (comments skipped)."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for what, rx in INLINE.items():
            if rx.search(line):
                out.append((n, what, line.strip()))
    return out


def _allowed(rel: str, line: str) -> bool:
    return any(rel == path and piece in line for path, piece, _ in ALLOWED)


def _scan() -> list[tuple[str, int, str, str]]:
    found = []
    for p in sorted(ROOT.rglob("*.py")):
        if p == FORMATTER:
            continue
        rel = p.relative_to(ROOT).as_posix()
        found += [(rel, n, what, line) for n, what, line in violations(p.read_text(encoding="utf-8"))]
    return found


def test_no_number_with_a_unit_is_formatted_outside_units() -> None:
    bad = [f"clusterbench/{rel}:{n}: {what}: {line}" for rel, n, what, line in _scan() if not _allowed(rel, line)]
    assert not bad, "format these through clusterbench/model/units.py:\n" + "\n".join(bad)


def test_every_allowed_line_still_exists() -> None:
    found = _scan()
    for path, piece, why in ALLOWED:
        assert why
        assert any(rel == path and piece in line for rel, _, _, line in found), (path, piece)


@pytest.mark.parametrize("line", [
    'print(f"binds at {fps:,.0f} FPS")',
    'f"{r.roofline_fps:,} FPS"',
    'f"idle {100 * x:.1f} %"',
    'f"{delta:+.2f}%"',
    'f"waits {share:.0%} of its time"',
    'f"{t.measured_us_per_frame:.3f} µs/frame"',
    'f"{busy_ns / 1e6:,.3f} ms"',
    'f"{k.min_ns / 1000:,.1f} µs"',
    'f"{rate:,.2f} GB/s"',
    "us = busy / 1000 / frames",
    "us = (busy / 1000.0 / frames) if frames else None",
    "us = ns / 1e3 / n",
    "fps = 1e6 / r.serial_us if r.serial_us else None",
    "fps = 1e6 / (kernel_us)",
    'return "-" if v is None else str(v)',
    'cell = text or "-"',
    'return "n/a"',
])
def test_a_planted_inline_format_is_caught(line: str) -> None:
    assert violations(line), line


@pytest.mark.parametrize("line", [
    'f"binds at {U.fps(fps)}"',
    'f"idle {U.pct(x)}"',
    "us = U.us_per_frame_of(busy, frames)",
    'f"{n:,} frames over {U.ms(window_ns)}"',
    'f"{len(gp):,} gaps"',
    'f"got {raw!r:.60}"',
    '"-" in part',
    'name.replace("_", "-")',
    "# a comment that says ns / 1000 / frames",
    'f"sustained {fps:,.0f} frames"',
])
def test_the_scan_lets_formatter_calls_and_other_text_through(line: str) -> None:
    assert not violations(line), line
