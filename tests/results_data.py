"""Results dirs for tests, written through the real store from plain values.

``row(values)``: a :class:`ResultRow` from probes.csv-like values, where ``label`` gives the key the way
probes.csv before version 3 packed it (``3x3_s1@gpu0.solo``), ``samples`` ({metric: [values]}) the
row's measurements, and ``processes`` (a list, one item per process: its counted runs' FPS, or
{"values": [...], "settled": False}) a sustained FPS measured in several processes (its ``sustained_fps`` and
``sustained_processes`` are set from them). ``env(values)``: an :class:`EnvRecord` from env.json-like values,
``configs`` keyed by label, ``unit`` a unit block (:func:`unit`). ``write(path, rows, env)``: both merged into
a dir with :func:`merge_results`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

from clusterbench.io.results import merge_results
from clusterbench.model.measurement import Measurement
from clusterbench.model.processes import ProcessRun, process_measurement
from clusterbench.model.results import EnvRecord, ResultRow, ResultSet, RowKey
from clusterbench.model.steady import Run, SteadyRule, judge
from clusterbench.model.unit import LinkRate, LinkRates, UnitRecord


def processes(items: Iterable[object]) -> Measurement:
    """A sustained FPS measurement of several processes: each item its counted runs' FPS, or {"values": [...],
    "settled": False} for a process whose runs did not settle (judged as the steady rule judges them)."""
    procs = []
    for i, item in enumerate(items):
        values = list(item["values"] if isinstance(item, Mapping) else item)  # type: ignore[index]
        steady = None
        if isinstance(item, Mapping):
            rule = SteadyRule(counted=len(values), min_warmups=0)
            steady = judge([Run(v, 0.1, 1, 0.1 * k) for k, v in enumerate(values)], rule,
                           "steady" if item.get("settled", True) else "max_s")
        procs.append(ProcessRun(i, tuple(values), steady))
    return process_measurement("sustained_fps", procs, metadata={"source": "result"})


def row(values: Mapping[str, object]) -> ResultRow:
    doc = {k: v for k, v in values.items() if k not in ("label", "role", "gpu", "samples", "processes")}
    key = RowKey.from_label(str(values["label"]), values.get("variant"))  # type: ignore[arg-type]
    samples = values.get("samples") or {}
    doc["measurements"] = [Measurement(m, tuple(v)).to_json() for m, v in samples.items()]  # type: ignore[union-attr]
    if values.get("processes") is not None:
        m = processes(values["processes"])  # type: ignore[arg-type]
        doc["measurements"].append(m.to_json())
        doc["sustained_fps"], doc["sustained_processes"] = m.median, m.repeats
    return ResultRow.from_json({**doc, **key.to_json()})


def unit(uuid: str, host: str = "node1", boot: str = "boot-a", *, h2d: float = 55.0, d2h: float = 55.0,
         duplex_h2d: float = 40.0, duplex_d2h: float = 45.0) -> dict:
    """A unit block (env.json ``unit``) with the link rates given (GB/s, one sample each)."""
    link = LinkRates(LinkRate("h2d", False, (h2d,)), LinkRate("d2h", False, (d2h,)),
                     LinkRate("h2d", True, (duplex_h2d,)), LinkRate("d2h", True, (duplex_d2h,)), 1 << 25, 4, "test")
    return UnitRecord(uuid, "NVIDIA H200", host, boot, link=link).to_json()


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
