"""Chunked reads and block-wise analysis give the answers of one piece.

- Every bundled export (tests/data: the H200 dev and probe traces, the zoo, NVIDIA's samples) read whole
  (CLUSTERBENCH_ANALYZE_PATH=whole) with 64-row read chunks and 64-interval analysis blocks
  (CLUSTERBENCH_CHUNK_ROWS=64; the largest holds 14,809 rows, so each crosses dozens to hundreds of chunk
  edges) gives the JSON of the default setting, in which each of them is one chunk: byte for byte, with
  the frames the zoo's and the samples' own counts use (pacing, kernels by name and the critical path
  included). The time slabs are checked against the same JSON on every bundled export, in 64-row chunks
  and 50-row slabs, in test_streamed.
- The setting reaches the CLI through the environment.
- An export whose rows are stored out of time order (every activity, API and synchronization table
  rewritten in a shuffled rowid order) gives the same JSON, read whole and in time slabs: the reader does
  not rely on rowid order.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from clusterbench.analyzers import analysis as A
from clusterbench.analyzers import intervals as iv
from clusterbench.io.nsys import reader as R
from clusterbench.render.analyze import render_json

ROOT = Path(__file__).resolve().parent.parent.parent
DATA = ROOT / "tests" / "data"
TRACES = sorted(DATA.rglob("*.sqlite"))
# the frames the zoo programs and the samples count (docs/analyze.md, "Blocked time and the critical path")
FRAMES = {
    "zoo_device_graph_graph": "graph", "zoo_device_graph_host_graph": "graph", "zoo_device_graph_host_node": "graph",
    "zoo_device_graph_node": "graph", "zoo_graph_block_h2d_graph": "graph", "zoo_queue_fill": "kernel:zoo_spin", "zoo_no_nvtx": "kernel:zoo_calib_jit",
}  # fmt: skip


def _frames(p: Path) -> str | None:
    name = p.stem
    if name in FRAMES:
        return FRAMES[name]
    return "kernel:zoo_calib" if name.startswith("zoo_") else None


def _json(p: Path) -> str:
    return render_json(A.analyze_trace(p, frames_spec=_frames(p)))


def test_every_bundled_trace_is_checked() -> None:
    assert len(TRACES) >= 30
    biggest = 0
    for p in TRACES:
        con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME"):
            if t in have:
                biggest = max(biggest, con.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
        con.close()
    assert biggest > 64 * 100  # the 64-row setting cuts the largest table into more than 100 chunks


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_64_row_chunks_give_the_whole_answer(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(A.PATH_ENV, "whole")
    whole = _json(path)
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 64)
    monkeypatch.setattr(R, "READ_THREADS", 3)  # several chunks in flight, finishing out of order
    monkeypatch.setattr(iv, "BLOCK", 64)
    assert _json(path) == whole


def _cli(path: Path, env_extra: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k not in (R.CHUNK_ENV, A.PATH_ENV)}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(env_extra)
    out = subprocess.run([sys.executable, "-m", "clusterbench", "analyze", str(path), "--json"], capture_output=True,
                         text=True, env=env, cwd=ROOT, check=True)  # fmt: skip
    return out.stdout


def test_the_setting_reaches_the_cli() -> None:
    path = DATA / "h200" / "dev_7x7_s3_b250_async.sqlite"
    probe = [sys.executable, "-c", "from clusterbench.io.nsys import reader as R; from clusterbench.analyzers import "
             "intervals as iv; print(R.ROWS_PER_CHUNK, iv.BLOCK)"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{R.CHUNK_ENV: "64"})
    assert subprocess.run(probe, capture_output=True, text=True, env=env, check=True).stdout.split() == ["64", "64"]
    assert _cli(path, {R.CHUNK_ENV: "64"}) == _cli(path, {})


SHUFFLED = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
            "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")  # fmt: skip


def _shuffle_rowids(src: Path, dst: Path) -> int:
    """Copy ``src`` with the rows of each table of SHUFFLED stored in a random rowid order; the number of
    rows moved."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    moved = 0
    for t in SHUFFLED:
        if t not in have:
            continue
        top = con.execute(f"SELECT ifnull(max(rowid), 0) FROM {t}").fetchone()[0]
        # the rows again, after the old ones, in a random order (a fixed seed: abs(random()) is SQLite's own)
        con.execute(f"INSERT INTO {t} SELECT * FROM {t} ORDER BY (rowid * 7919) % 1009, rowid")
        moved += con.execute(f"DELETE FROM {t} WHERE rowid <= ?", (top,)).rowcount
    con.commit()
    con.close()
    return moved


@pytest.mark.parametrize("way", ["whole", "slabs"])
@pytest.mark.parametrize("name", ["dev_7x7_s3_b250_async", "zoo_two_threads", "zoo_pageable", "sample_simpleHyperQ"])
def test_rows_out_of_rowid_order_give_the_same_answer(name: str, way: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = next(DATA.rglob(f"{name}.sqlite"))
    dst = tmp_path / f"{name}.sqlite"
    assert _shuffle_rowids(src, dst) > 100
    con = sqlite3.connect(f"file:{dst}?mode=ro", uri=True)
    starts = [r[0] for r in con.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY rowid")]
    con.close()
    assert any(b < a for a, b in zip(starts, starts[1:]))  # start no longer grows with rowid
    monkeypatch.setenv(A.PATH_ENV, "whole")
    want = _json(src).replace(str(src), str(dst))
    monkeypatch.setenv(A.PATH_ENV, way)
    assert _json(dst) == want
    monkeypatch.setattr(R, "ROWS_PER_CHUNK", 64)
    monkeypatch.setattr(iv, "BLOCK", 64)
    assert _json(dst) == want
