"""The delay test replayed on the trace (analyzers/replay.py) on hand-made traces whose shifts are worked
out by hand in the comments, event by event, from the module's rules; and on the zoo's programs, against
what each program was written to be bound by. Times are µs (U ns)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.analyzers import analysis as A
from clusterbench.analyzers import replay as R
from clusterbench.analyzers.untraced import binds_code

from fake_nsys import Api, Copy, Kernel, Sync, Trace, build

U = 1000
DATA = Path(__file__).resolve().parent.parent / "data" / "zoo"


def api(start: float, end: float, name: str, corr: int) -> Api:
    return Api(int(start * U), int(end * U), name, corr=corr)


def slopes(tmp_path: Path, t: Trace, k_us: float, frames: int, mark: str = "kernel:^k$") -> dict[str, float | None]:
    path = build(tmp_path / "t.sqlite", t)
    req = A.request(window="span", frames=frames)
    data = A.load_trace(path, req=req)
    group = A.analyze(data, req=req).primary
    return {s.resource: s.slope for s in R.replay_group(data, group, mark, k_us)}


def _turns(frames: int) -> Trace:
    """Frames 100 µs apart on stream 7, one thread: H2D issued [0,5] runs [10,30]; the kernel "k" launched
    [6,10] runs [32,52]; D2H issued [11,15] runs [54,64]; a stream synchronize [16,70], released by the
    D2H; then 30 µs of host code."""
    t = Trace()
    for f in range(frames):
        o, c = 100 * f, 10 * f
        t.api += [api(o + 0, o + 5, "cudaMemcpyAsync_v3020", c + 1), api(o + 6, o + 10, "cudaLaunchKernel_v7000", c + 2),
                  api(o + 11, o + 15, "cudaMemcpyAsync_v3020", c + 3),
                  api(o + 16, o + 70, "cudaStreamSynchronize_v3020", c + 4)]  # fmt: skip
        t.syncs.append(Sync(int((o + 16) * U), int((o + 70) * U), stream=7, corr=c + 4))
        t.copies += [Copy(int((o + 10) * U), int((o + 30) * U), 1, 1_000_000, stream=7, corr=c + 1),
                     Copy(int((o + 54) * U), int((o + 64) * U), 2, 1_000_000, stream=7, corr=c + 3)]
        t.kernels.append(Kernel(int((o + 32) * U), int((o + 52) * U), stream=7, name="k", corr=c + 2))
    return t


def test_the_host_keeps_its_slack_at_the_mark_and_loses_what_is_past_it(tmp_path: Path) -> None:
    # The mark is the launch call at o+6. Its kernel waits for the H2D (ended o+30, the stream's release,
    # the binding one); the launch call's start (o+6) releases it 24 µs before that.
    # k 20: the call starts at o+26, still before o+30: the kernel, the D2H (released by the kernel at o+52,
    # its issue at o+11+20 before it) and the sync's release keep their times. The sync starts at o+36 and
    # ends with the D2H (its own floor: no stream synchronize ended unheld, so 0): the thread goes on at
    # o+70 as traced. Growth 0: slope 0.
    assert slopes(tmp_path, _turns(6), 20, 6)["host"] == pytest.approx(0.0)
    # k 60: the launch call's start o+66 passes the H2D's release by 36: the kernel moves 36 (the binding
    # stream's 2 µs lag kept from the new release), the D2H 36 (its issue, o+71, is still before the
    # kernel's end o+88), the sync ends with it, 36 late, and the thread with it. The next frame's H2D is
    # issued 36 late, and so on: every frame 36 µs more. Slope 36 / 60.
    (tmp_path / "b").mkdir()
    assert slopes(tmp_path / "b", _turns(6), 60, 6)["host"] == pytest.approx(0.6)


def test_the_gpu_and_the_link_are_on_the_path_of_a_frame_that_takes_turns(tmp_path: Path) -> None:
    # The lags: the kernel and the D2H were bound by their stream (2 µs after the row before), the H2Ds by
    # their launch (10 µs after the call's start). The op ahead of the kernel starts at max(o+6 + 10,
    # o+30 + 2) = o+32 and ends k later; the kernel 2 µs after it: k + 2 late, and the D2H, the sync and
    # the thread with it. With k 0 that is 2 µs a frame; with k 20, 22. Slope (22 - 2) / 20 = 1. The link's
    # copy also waits for the H2D engine (free since o+30): the same.
    got = slopes(tmp_path, _turns(6), 20, 6)
    assert got["gpu"] == pytest.approx(1.0) and got["link"] == pytest.approx(1.0)


def _host_bound(frames: int) -> Trace:
    """Frames 100 µs apart: the kernel "k" launched [0,5] runs [10,20]; no synchronize; host code between."""
    t = Trace()
    for f in range(frames):
        o = 100 * f
        t.api.append(api(o, o + 5, "cudaLaunchKernel_v7000", f + 1))
        t.kernels.append(Kernel(int((o + 10) * U), int((o + 20) * U), stream=7, name="k", corr=f + 1))
    return t


def test_a_gpu_with_slack_keeps_the_frame_and_the_host_moves_it(tmp_path: Path) -> None:
    # The host's k moves every later call: each frame k later, slope 1. The GPU's op (after the launch's
    # 10 µs lag, k long) moves each kernel by k, but nothing waits for a kernel: the marks keep their
    # times, slope 0.
    got = slopes(tmp_path, _host_bound(8), 20, 8)
    assert got["host"] == pytest.approx(1.0) and got["gpu"] == pytest.approx(0.0)


def test_too_few_marked_frames_are_not_tested(tmp_path: Path) -> None:
    path = build(tmp_path / "t.sqlite", _host_bound(3))
    req = A.request(window="span", frames=3)
    data = A.load_trace(path, req=req)
    group = A.analyze(data, req=req).primary
    got = R.replay_group(data, group, "kernel:^nothing_matches$", 20)
    assert [s.verdict for s in got] == ["not tested"] * 3 and "0 marked frame(s)" in got[0].note


@pytest.mark.parametrize(("program", "window", "expect"), [
    # each program's own "binds" (its ZOO line): the host spins 40 µs a frame and syncs every 32 frames
    ("host_bound", None, "host"),
    # 30 µs of host spin then the GPU's frame, every frame: both on the path, turn by turn
    ("turns", "range:loop", "host+gpu+link"),
    # the H2D copies are the tallest bar with the engines overlapping: only the link moves the frame
    ("pipeline", None, "link"),
])  # fmt: skip
def test_the_zoo_programs_read_as_they_were_written(program: str, window: str | None, expect: str) -> None:
    req = A.request(window=window, frames_spec="kernel:zoo_calib")
    data = A.load_trace(DATA / f"zoo_{program}.sqlite", req=req)
    group = A.analyze(data, req=req).primary
    ws, we = group.window.intervals
    k = 0.5 * float((we - ws).sum()) / group.frames.count / 1e3  # half the traced frame, as the delay test takes it
    assert binds_code(R.replay_group(data, group, "kernel:zoo_calib", k)) == expect
