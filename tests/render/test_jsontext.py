"""render.jsontext.dumps gives json.dumps(indent=2, ensure_ascii=False)'s text, through orjson or without it:
byte for byte on documents drawn by Hypothesis whose floats are finite and 0 or at least 1e-4 in size (the
two things orjson writes otherwise), the same values read back on every document drawn and on analyze's own
JSON of bundled traces, line for line; what neither writes is refused."""

from __future__ import annotations

import enum
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterbench.render import jsontext

DATA = Path(__file__).resolve().parent.parent / "data"
orjson = pytest.importorskip("orjson")


def _std(doc: object) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False)


def _plain(x: float) -> bool:
    return math.isfinite(x) and (x == 0 or abs(x) >= 1e-4)  # json writes 1e-05, orjson 1e-5


ints = st.integers(min_value=-(2**63), max_value=2**64 - 1)  # what orjson writes as a number
plain_floats = st.floats(allow_nan=False, allow_infinity=False).filter(_plain)
scalars = st.none() | st.booleans() | ints | plain_floats | st.text()
keys = st.text() | ints | st.booleans() | st.none()
docs = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5) | st.tuples(inner, inner)
                    | st.dictionaries(keys, inner, max_size=5), max_leaves=40)  # fmt: skip
any_floats = st.floats(allow_nan=False, allow_infinity=False)
any_docs = st.recursive(st.none() | st.booleans() | ints | any_floats | st.text(),
                        lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
                        max_leaves=40)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(docs)
def test_the_same_text_as_json_dumps(doc: object) -> None:
    assert jsontext.dumps(doc) == _std(doc)


@settings(max_examples=300, deadline=None)
@given(any_docs)
def test_every_document_reads_back_the_same(doc: object) -> None:
    assert json.loads(jsontext.dumps(doc)) == json.loads(_std(doc))


def test_the_two_differences_orjson_makes() -> None:
    assert jsontext.dumps([1e-07, 1e-5]) == "[\n  1e-7,\n  0.00001\n]"  # json: 1e-07, 1e-05 (the same values)
    assert jsontext.dumps({"x": math.nan, "y": -math.inf}) == '{\n  "x": null,\n  "y": null\n}'


def test_past_64_bits_written_by_the_standard_library() -> None:
    doc = {"big": 2**70, "small": -(2**70)}
    assert jsontext.dumps(doc) == _std(doc)


class _Kind(str, enum.Enum):
    HOST = "host"


class _Code(enum.IntEnum):
    THREE = 3


def test_enums_written_as_json_writes_them() -> None:
    doc = {_Kind.HOST: [_Kind.HOST, _Code.THREE, -0.0], "é\u2028\x00": ()}
    assert jsontext.dumps(doc) == _std(doc)


@pytest.mark.parametrize("bad", [{1, 2}, b"bytes", {(1, 2): 3}, object()])
def test_what_json_does_not_hold_is_refused(bad: object) -> None:
    with pytest.raises(TypeError):
        jsontext.dumps(bad)


def test_without_orjson_the_standard_library(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsontext, "orjson", None)
    assert jsontext.dumps([1e-07, {"a": math.nan}]) == '[\n  1e-07,\n  {\n    "a": NaN\n  }\n]'


@pytest.mark.parametrize("name", ["h200/dev_5x5_s2_b500.sqlite", "zoo/zoo_host_bound.sqlite", "h200/tracking_3x3_s1_b500_f2000_graph.sqlite"])
def test_analyze_json_of_bundled_traces_reads_back_the_same(name: str) -> None:
    from clusterbench.analyzers import analysis as A

    doc = A.analyze_trace(DATA / name).to_json()
    assert len(doc["gaps"]) > 0
    text = jsontext.dumps(doc)
    assert json.loads(text) == json.loads(_std(doc))
    assert text.count("\n") == _std(doc).count("\n")  # the same layout, line for line
