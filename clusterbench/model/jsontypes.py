"""The JSON type of a record's blocks, checked where a file is read (pure).

A record read from a file (env.json, samples.json) checks every block it knows against the type of its
field before it is built: a wrong type is a ValueError naming the file, the block and what it should hold
(the store adds the file's path). The types are the fields' own annotations, so the record is the one
table of them. JSON null is "not recorded" and fits every block; a ``tuple[X, ...]`` field is a JSON list
of X, a ``Mapping[str, X]`` field a JSON object of X.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import math
import types
import typing
from typing import Mapping


def _members(hint: object) -> tuple[object, ...]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _container(hint: object) -> tuple[str, object] | None:
    """("list", item type) or ("object", value type) for a list or mapping type; None for a scalar."""
    origin = typing.get_origin(hint)
    if origin in (tuple, list):
        return "list", typing.get_args(hint)[0]
    if origin in (Mapping, dict, collections.abc.Mapping):
        return "object", typing.get_args(hint)[1]
    return None


def json_fits(value: object, hint: object) -> bool:
    """Whether a parsed JSON value fits a field's type (null fits any: not recorded)."""
    if value is None or hint is object:
        return True
    members = _members(hint)
    if len(members) > 1:
        return any(m is not type(None) and json_fits(value, m) for m in members)
    if hint is str:
        return isinstance(value, str)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return type(value) is int
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    shape = _container(hint)
    if shape is None:
        return False
    kind, item = shape
    if kind == "list":
        return isinstance(value, list) and all(x is not None and json_fits(x, item) for x in value)
    return isinstance(value, Mapping) and all(json_fits(x, item) for x in value.values())


_SCALAR_WORDS = {str: ("text", "text"), int: ("an integer", "integers"), float: ("a number", "numbers"),
                 bool: ("true or false", "true or false values"), object: ("any value", "values")}


def json_type_words(hint: object, plural: bool = False) -> str:
    """A field's JSON type in words: ``text``, ``an object of numbers``, ``a list of text``."""
    words = []
    for m in (m for m in _members(hint) if m is not type(None)):
        if m in _SCALAR_WORDS:
            words.append(_SCALAR_WORDS[m][plural])
            continue
        shape = _container(m)
        if shape is None:
            words.append(getattr(m, "__name__", str(m)))
            continue
        kind, item = shape
        head = ("lists" if plural else "a list") if kind == "list" else ("objects" if plural else "an object")
        words.append(head if item is object else f"{head} of {json_type_words(item, True)}")
    return " or ".join(words)


def json_value_words(value: object) -> str:
    """What a parsed JSON value is, in words, with a short excerpt: ``text 'abc'``, ``a list of 2 items``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"text {value[:40]!r}" + ("..." if len(value) > 40 else "")
    if isinstance(value, list):
        return f"a list of {len(value)} item(s)"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def check_json(file: str, block: str, value: object, hint: object, nullable: bool = True) -> None:
    """ValueError ``<file> block '<block>' must be <type>, got <value>`` when ``value`` does not fit
    ``hint`` (``nullable``: null fits). In a list or object of the right kind, the first item that does
    not fit is named (``configs.3x3_s1.frames``, ``argv[2]``); a list holds no nulls."""
    if (value is not None or nullable) and json_fits(value, hint):
        return
    for m in _members(hint):
        shape = _container(m)
        if shape is None:
            continue
        kind, item = shape
        if kind == "list" and isinstance(value, list):
            for i, x in enumerate(value):
                check_json(file, f"{block}[{i}]", x, item, nullable=False)
        if kind == "object" and isinstance(value, Mapping):
            for k, x in value.items():
                check_json(file, f"{block}.{k}", x, item)
    null = " or null" if nullable else ""
    raise ValueError(f"{file} block '{block}' must be {json_type_words(hint)}{null}, got {json_value_words(value)}")


def json_types(cls: type, skip: tuple[str, ...] = ()) -> dict[str, object]:
    """The JSON type of every field of a record (its annotation), but those in ``skip``."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name not in skip}
