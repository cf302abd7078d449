"""render.jsontext.dumps writes what json.dumps(indent=2, ensure_ascii=False) writes, byte for byte: on
documents drawn by Hypothesis (every JSON type, odd keys, any unicode, NaN and infinities both ways), and on
analyze's own JSON of a bundled trace; and it refuses what json.dumps refuses."""

from __future__ import annotations

import enum
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterbench.render.jsontext import dumps

DATA = Path(__file__).resolve().parent.parent / "data"

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text()
keys = st.text() | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False, allow_infinity=False)
docs = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5) | st.tuples(inner, inner)
                    | st.dictionaries(keys, inner, max_size=5), max_leaves=40)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(docs)
def test_the_same_text_as_json_dumps(doc: object) -> None:
    assert dumps(doc) == json.dumps(doc, indent=2, ensure_ascii=False)


@settings(max_examples=200, deadline=None)
@given(docs)
def test_out_of_range_floats_refused_as_json_refuses_them(doc: object) -> None:
    try:
        want = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False)
    except ValueError:
        with pytest.raises(ValueError):
            dumps(doc, allow_nan=False)
    else:
        assert dumps(doc, allow_nan=False) == want


class _Kind(str, enum.Enum):
    HOST = "host"


class _Code(enum.IntEnum):
    THREE = 3


def test_subclasses_written_as_json_writes_them() -> None:
    doc = {_Kind.HOST: [_Kind.HOST, _Code.THREE, 1.5e-7, -0.0, math.inf], _Code.THREE: {"é\u2028\x00": ()}}
    assert dumps(doc) == json.dumps(doc, indent=2, ensure_ascii=False)


@pytest.mark.parametrize("bad", [{1, 2}, b"bytes", {(1, 2): 3}, object()])
def test_what_json_does_not_hold_is_refused(bad: object) -> None:
    with pytest.raises(TypeError):
        json.dumps(bad, indent=2)
    with pytest.raises(TypeError):
        dumps(bad)


def test_analyze_json_of_a_bundled_trace_unchanged() -> None:
    from clusterbench.analyzers import analysis as A

    a = A.analyze_trace(DATA / "h200" / "dev_5x5_s2_b500.sqlite")
    doc = a.to_json()
    assert len(doc["gaps"]) > 0
    assert dumps(doc) == json.dumps(doc, indent=2, ensure_ascii=False)
