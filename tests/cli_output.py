"""Reading a command's stderr back in the tests: its ``Error:``, ``Warning:`` and ``Hint:`` messages,
each wrapped at the output width with its following lines indented under it (cli/common.py)."""

from __future__ import annotations

LABELS = ("Error:", "Warning:", "Hint:")


def messages(stderr: str) -> list[str]:
    """Each message as one line: its label, then its wrapped lines joined with single spaces. Lines that
    are neither a message nor indented under one (progress, the footer) are left out."""
    out: list[str] = []
    inside = False
    for line in stderr.splitlines():
        if line.startswith(LABELS):
            out.append(line.rstrip())
            inside = True
        elif inside and line[:1] == " " and line.strip():
            out[-1] += " " + line.strip()
        else:
            inside = False
    return out
