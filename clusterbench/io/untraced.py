"""Reading a config's ``<label>.untraced.json`` (what ``probe --what-binds`` measured) back, for ``analyze
--untraced FILE``: InputError (exit 2) naming the file and what is wrong, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from clusterbench.errors import InputError
from clusterbench.model.untraced import UntracedRecord

HINT = "give the <label>.untraced.json that clusterbench probe --what-binds wrote into its results dir"


def load_untraced(path: str | Path) -> UntracedRecord:
    """The measured parts of an untraced record (the untraced frame, the delay test, the unit's costs)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"--untraced {p}: no such file", hint=HINT) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--untraced {p}: cannot be read ({exc})", hint=HINT) from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InputError(f"--untraced {p}: not JSON ({exc})", hint=HINT) from None
    try:
        return UntracedRecord.from_json(doc)
    except ValueError as exc:
        raise InputError(f"--untraced {p}: {exc}", hint=HINT) from None
