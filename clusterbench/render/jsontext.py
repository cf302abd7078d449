"""analyze's JSON text, indented by 2 (pure): through orjson where it is installed, else the standard library.

The standard library's C encoder takes no indent, so an indented document goes through its pure-Python
encoder, a generator per container: 0.10 to 0.15 s for analyze's 2.8 MB JSON of a 1M-record trace (its
10,000 gaps). orjson (a maintained encoder in compiled code, pinned in pyproject.toml) writes the same
document in 0.005 s, and the same text byte for byte as ``json.dumps(doc, indent=2, ensure_ascii=False)``
but for two things (docs/analyze.md, "JSON through orjson"): a float under 1e-4 in size (``0.00001859``
or ``1e-7`` where json writes ``1.859e-05`` or ``1e-07``; both read back as the same number) and NaN or an
infinity, which orjson writes as ``null`` (analyze prints none: a figure that cannot be right is left out,
as None).
Integers past 64 bits, which orjson refuses, and documents orjson cannot write go through json as before.
"""

from __future__ import annotations

import json
from typing import Any

try:
    import orjson
except ImportError:  # an interpreter without it (a machine offline): the standard library, the same JSON
    orjson = None  # type: ignore[assignment]


def dumps(doc: Any) -> str:
    """``doc`` as JSON text indented by 2, non-ASCII text as it is, keys in the dict's order."""
    if orjson is not None:
        try:
            return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:  # orjson.JSONEncodeError: an integer past 64 bits, a type it does not write
            pass
    return json.dumps(doc, indent=2, ensure_ascii=False)
