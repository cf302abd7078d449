"""The project stands on its own: no tracked file points at material outside the repository.

The design notes the project grew from are not part of it; the facts it relies on live in
docs/facts.md. A reference to the notes, or to a folder beside the checkout, would send a reader
to a file they do not have.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What a pointer outside the repository looks like. Built from parts so that this file itself
# does not match.
FORBIDDEN = ("DESIGN" + ".md", "../" + "shared", "STYLE" + ".md")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".cu", ".cuh", ".txt", ".json", ".csv", ""}


def _tracked_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to list the tracked files")
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True)
    files = [ROOT / p for p in out.stdout.decode().split("\0") if p]
    return [p for p in files if p.is_file() and p.suffix in TEXT_SUFFIXES]


def test_no_tracked_file_points_outside_the_repository() -> None:
    hits = []
    for path in _tracked_files():
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            for word in FORBIDDEN:
                if word in line:
                    hits.append(f"{path.relative_to(ROOT)}:{lineno}: {word}")
    assert not hits, "pointers outside the repository:\n" + "\n".join(hits[:40])


def test_the_facts_document_exists_and_has_the_cited_sections() -> None:
    text = (ROOT / "docs" / "facts.md").read_text()
    for section in ("## The cluster finder", "## Synthetic MOENCH-like data", "## nsys SQLite exports across versions",
                    "## Reading rules", "## The H200 machine"):
        assert section in text, section
