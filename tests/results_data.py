"""Results dirs for tests, written through the real store from plain values.

``row(values)``: a :class:`ResultRow` from probes.csv-like values, where ``label`` gives the key the way
probes.csv before version 3 packed it (``3x3_s1@gpu0.solo``) and ``samples`` ({metric: [values]}) the
row's measurements. ``env(values)``: an :class:`EnvRecord` from env.json-like values, ``configs`` keyed
by label. ``write(path, rows, env)``: both merged into a dir with :func:`merge_results`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

from clusterbench.io.results import merge_results
from clusterbench.model.measurement import Measurement
from clusterbench.model.results import EnvRecord, ResultRow, ResultSet, RowKey


def row(values: Mapping[str, object]) -> ResultRow:
    doc = {k: v for k, v in values.items() if k not in ("label", "role", "gpu", "samples")}
    key = RowKey.from_label(str(values["label"]), values.get("variant"))  # type: ignore[arg-type]
    samples = values.get("samples") or {}
    doc["measurements"] = [Measurement(m, tuple(v)).to_json() for m, v in samples.items()]  # type: ignore[union-attr]
    return ResultRow.from_json({**doc, **key.to_json()})


def env(values: Mapping[str, object]) -> EnvRecord:
    doc = dict(values)
    configs = doc.pop("configs", None) or {}
    doc["configs"] = {}
    for label, entry in configs.items():  # type: ignore[union-attr]
        key = RowKey.from_label(label).config_key
        doc["configs"][key.label] = {**entry, "config": key.config, "variant": key.variant}  # type: ignore[index]
    return EnvRecord.from_json(doc)


def write(path: Path, rows: Iterable[Mapping[str, object]] = (), env_values: Mapping[str, object] | None = None
          ) -> Path:
    merge_results(Path(path), ResultSet(None if env_values is None else env(env_values), tuple(map(row, rows))))
    return Path(path)
