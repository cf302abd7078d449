"""The seam records: round trips, derived probes.csv columns, and old versions still read."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from clusterbench.errors import InputError
from clusterbench.model.records import (
    ENV_SCHEMA_VERSION,
    INT_COLUMNS,
    PROBE_COLUMNS,
    TEXT_COLUMNS,
    ConfigEntry,
    EnvRecord,
    ProbeRecord,
)
from clusterbench.io.results import load_env, load_results, save_env, upsert_probe_row

REPO = Path(__file__).resolve().parents[2]
# a results dir written by clusterbench 0.1 (env.json schema_version 1, probes.csv of 38 columns)
V1_DIR = REPO / "results" / "2026-11-29_f32"


def full_row(**changes) -> ProbeRecord:
    values = dict(label="9x9_s1", cluster=9, cap=1700, streams=1, batch=2000, frames=20000,
                  kernel_us=1.59, h2d_us=5.79, d2h_us=10.09, roofline_us=10.09, binds="d2h", roofline_fps=99_108.0,
                  kernel_duty=0.1, h2d_duty=0.4, d2h_duty=0.7, h2d_gbps=55.2, d2h_gbps=55.3, idle_us=0.25,
                  overlap_us=0.0, host_sync_us=17.4, serialization=1.0, measured_us=17.5, efficiency=0.576,
                  sustained_fps=57_104.0, sustained_fps_spread=150.0, sustained_repeats=3, sustained_gbps=18.27,
                  fps_efficiency=0.576, profiler_overhead=1.0, clusters_per_frame=79.1, dropped_clusters=0,
                  pedestal_dtype="float32", pedestal="frozen", transfer="copy", workload="command",
                  finder="aare ClusterFinderCUDA", tracer="nsys", trace="9x9_s1.sqlite", session="s",
                  timestamp="2026-12-01T00:00:00Z")
    values.update(changes)
    return ProbeRecord(**values)


def test_the_columns_are_the_row_records_fields() -> None:
    assert PROBE_COLUMNS == tuple(f.name for f in dataclasses.fields(ProbeRecord))
    assert {"cluster", "cap", "streams", "batch", "frames", "sustained_repeats", "dropped_clusters"} == INT_COLUMNS
    assert {"label", "binds", "pedestal_dtype", "pedestal", "transfer", "workload", "finder", "tracer", "trace",
            "session", "timestamp"} == TEXT_COLUMNS


def test_a_row_rejects_impossible_values() -> None:
    with pytest.raises(ValueError, match="column cluster must be int"):
        full_row(cluster=9.0)
    with pytest.raises(ValueError, match="column kernel_us must be float"):
        full_row(kernel_us=float("nan"))
    with pytest.raises(ValueError, match="may not be empty"):
        full_row(workload=None)
    assert full_row(kernel_us=2).kernel_us == 2.0 and isinstance(full_row(kernel_us=2).kernel_us, float)


def test_a_row_round_trips_through_probes_csv(tmp_path: Path) -> None:
    row = full_row()
    upsert_probe_row(tmp_path, row)
    save_env(tmp_path, EnvRecord(tool_version="0.2", session_id="s", created_utc="t"))
    loaded = load_results(tmp_path).row("9x9_s1")
    assert ProbeRecord.from_json(loaded.values) == row


def test_an_env_record_round_trips(tmp_path: Path) -> None:
    env = EnvRecord(tool_version="0.2", session_id="s", created_utc="2026-12-01T00:00:00Z", argv=("clusterbench",),
                    gpu_name="NVIDIA H200", workloads="command", tracer="nsys", nsys_cuda_graph_trace="node",
                    configs={"a": ConfigEntry(session="s", workload="command", command=("{python}", "p.py"),
                                              finder="aare", clocks={"median_mhz": 1980.0},
                                              sustained_fps=(1.0, 2.0), params={"cluster": 3})})
    save_env(tmp_path, env)
    doc = load_env(tmp_path)
    assert doc["schema_version"] == ENV_SCHEMA_VERSION == 2 and doc["probes_csv_version"] == 2
    assert EnvRecord.from_json(doc) == env
    assert doc["clocks"] == {"a": {"median_mhz": 1980.0}}


def test_version_1_results_still_read(tmp_path: Path) -> None:
    v1 = tmp_path / "v1"
    shutil.copytree(V1_DIR, v1, ignore=shutil.ignore_patterns("*.sqlite", "*.nsys-rep"))
    raw = json.loads((v1 / "env.json").read_text())
    assert raw["schema_version"] == 1 and "workload" not in (v1 / "probes.csv").read_text().splitlines()[0]
    env = EnvRecord.from_json(raw)
    assert env.schema_version == 1 and env.probes_csv_version == 1  # version 1 did not say
    assert env.gpu_name == raw["gpu_name"] and env.configs["3x3_s4"].workload == "cupy"
    assert env.configs["3x3_s4"].sustained_fps == tuple(raw["configs"]["3x3_s4"]["sustained_fps"])
    rd = load_results(v1)
    rows = [ProbeRecord.from_json(r.values) for r in rd.rows]
    assert [r.label for r in rows][:1] == ["3x3_s4"]
    assert all(r.workload == "cupy" and r.finder is None for r in rows)  # columns version 1 lacks
    # a version-2 row joins a version-1 file: the new columns are added, the old rows keep their text
    upsert_probe_row(v1, full_row(label="aare_3x3"))
    rows = load_results(v1).rows
    assert rows[-1].get("workload") == "command" and rows[0].get("workload") is None
    assert rows[0].get("kernel_us") == ProbeRecord.from_json(rd.rows[0].values).kernel_us


def test_an_unknown_env_version_is_refused() -> None:
    with pytest.raises(InputError, match="schema_version 3; this clusterbench reads 1, 2"):
        EnvRecord.from_json({"schema_version": 3})
