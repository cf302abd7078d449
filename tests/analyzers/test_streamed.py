"""analyze over time slabs (analyzers.streamed) gives the whole analysis's JSON byte for byte on every
bundled trace it takes, in 64-row chunks and 50-row slabs: the frames the tests use on each trace, and on
a set of them the auto window and the span too; and it refuses (Fallback) the trace with device-launched
rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.analyzers import analysis as A
from clusterbench.analyzers import streamed as SD
from clusterbench.io.nsys import reader as R
from clusterbench.render.analyze import render_json

DATA = Path(__file__).resolve().parent.parent / "data"
TRACES = sorted(DATA.rglob("*.sqlite"))
FRAMES = {
    "zoo_device_graph_graph": "graph", "zoo_device_graph_host_graph": "graph", "zoo_device_graph_host_node": "graph",
    "zoo_device_graph_node": "graph", "zoo_graph_block_h2d_graph": "graph", "zoo_queue_fill": "kernel:zoo_spin",
    "zoo_no_nvtx": "kernel:zoo_calib_jit",
}  # fmt: skip


def _both(path: Path, monkeypatch: pytest.MonkeyPatch, **options) -> tuple[str, str | None]:  # noqa: ANN003
    req = A.request(**options)
    cache: dict = {}
    whole = render_json(A.analyze(A.load_trace(path, req=req, cache=cache), req=req, trace_label=str(path), cache=cache))
    with monkeypatch.context() as mp:
        mp.setattr(R, "ROWS_PER_CHUNK", 64)
        try:
            got = render_json(SD.analyze_slabs(path, req, str(path), rows=50))
        except SD.Fallback:
            got = None
    return whole, got


# the traces also run with the auto window and the span when the tests count frames on them (deep queues, graphs,
# several threads and domains, a host-bound loop, set-up gaps): every other trace runs with the options its own
# figures use (its frames, else none), to keep the suite's time
EVERY_OPTION = frozenset({"dev_5x5_s2_b500", "tracking_3x3_s1_b500_f2000_node", "sample_simpleHyperQ", "sample_asyncAPI",
                          "zoo_host_bound", "zoo_nvtx_domain", "zoo_pipeline", "zoo_queue_fill", "zoo_device_graph_host_node",
                          "zoo_no_nvtx", "zoo_two_threads"})  # fmt: skip


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_slabs_give_the_whole_json(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = FRAMES.get(path.stem, "kernel:zoo_calib" if path.stem.startswith("zoo_") else None)
    every = path.stem in EVERY_OPTION
    for options in ({} if every or not own else None, {"window": "span"} if every else None, {"frames_spec": own} if own else None):
        if options is None:
            continue
        whole, got = _both(path, monkeypatch, **options)
        if got is None:
            assert path.stem == "zoo_device_graph_graph"  # the one trace with device-launched rows
            continue
        assert got == whole, options


def test_the_slabs_fed_in_line_give_the_same_json(monkeypatch: pytest.MonkeyPatch) -> None:
    # CLUSTERBENCH_SLAB_LANES=0: pass 2's accumulators fed on the main thread, one after another
    path = next(p for p in TRACES if p.stem == "zoo_two_threads")
    monkeypatch.setattr(SD, "LANES", False)
    whole, got = _both(path, monkeypatch, frames_spec="kernel:zoo_calib")
    assert got == whole


def test_a_lanes_exception_reaches_the_caller_and_every_lane_ends() -> None:
    import threading

    seen: list[int] = []

    def ok(item: tuple) -> None:
        seen.append(item[0])

    def fails_at_3(item: tuple) -> None:
        if item[0] == 3:
            raise SD.SH.NotLocal("a row ran later than the look-ahead", lag_too_short=True)

    before = threading.active_count()
    lanes = SD._Lanes([ok, fails_at_3], depth=2)
    with pytest.raises(SD.SH.NotLocal):
        for k in range(50):
            lanes.put((k,))  # raises once the failing lane has seen slab 3
        lanes.close()
    lanes.close(quiet=True)
    assert threading.active_count() == before
    assert seen == list(range(len(seen)))  # the other lane kept its order, and stopped once one lane failed
    # no exception: close waits for every slab
    got: list[int] = []
    lanes = SD._Lanes([lambda item: got.append(item[0])])
    for k in range(100):
        lanes.put((k,))
    lanes.close()
    assert got == list(range(100))


@pytest.mark.parametrize("how", ["read twice", "spill fails"])
def test_the_second_pass_read_from_the_export_gives_the_same_json(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # pass 2 reads the export again where pass 1 kept no slabs (CLUSTERBENCH_SLAB_SPILL=0: pass 1 then reads
    # only what the window needs; or a spill that failed part-way: pass 1 read every column)
    from clusterbench.io.nsys import slabs as B

    path = next(p for p in TRACES if p.stem == "zoo_two_threads")
    if how == "read twice":
        monkeypatch.setattr(B, "SPILL", False)
    else:
        real = B.pickle.dump

        def fails(obj, fh, protocol=None) -> None:  # noqa: ANN001
            if getattr(obj, "index", 0) >= 2:
                raise OSError(28, "No space left on device")
            real(obj, fh, protocol=protocol)

        monkeypatch.setattr(B.pickle, "dump", fails)
    replays = []
    real_replay = B.Spill.replay
    monkeypatch.setattr(B.Spill, "replay", lambda self: replays.append(1) or real_replay(self))
    whole, got = _both(path, monkeypatch, frames_spec="kernel:zoo_calib")
    assert got == whole and not replays
