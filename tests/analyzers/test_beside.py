"""Work beside the caller (analyzers.beside): in a forked process its answer, or its exception, comes back as
on a thread; a process that cannot answer leaves the work to this one; and the analysis gives the same JSON
with its analyzers in processes apart as on threads, on bundled traces of several shapes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from clusterbench.analyzers import analysis as A
from clusterbench.analyzers import beside as B
from clusterbench.render.analyze import render_json

DATA = Path(__file__).resolve().parent.parent / "data"
linux = pytest.mark.skipif(not (sys.platform == "linux" and hasattr(os, "fork")), reason="processes apart need fork (Linux)")


@pytest.fixture
def forking(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(B, "APART", True)


def _pid_and_sum(x: np.ndarray) -> tuple[int, int]:
    return os.getpid(), int(x.sum())


def _raises(why: str) -> None:
    raise ValueError(why)


class _TwoArgs(Exception):
    def __init__(self, why: str, code: int) -> None:
        super().__init__(why)  # pickles with one argument: unpickling it fails
        self.code = code


def _raises_two(why: str, code: int) -> None:
    raise _TwoArgs(why, code)


def _unpicklable() -> object:
    import threading

    return threading.Lock()  # a lock does not pickle


def _dies_in_child() -> int:
    if B._in_child:
        os._exit(3)  # a child that ends with no answer (killed, out of memory)
    return os.getpid()


def _nested() -> tuple[int, int]:
    # in the child the pool's threads are not there: beside runs the work in line
    return B.beside(_pid_and_sum, np.arange(5)).result()


@linux
def test_the_answer_comes_from_another_process(forking: None) -> None:
    x = np.arange(1_000_000, dtype=np.int64)
    pid, total = B.apart(_pid_and_sum, x).result()
    assert pid != os.getpid()
    assert total == 1_000_000 * 999_999 // 2  # n (n - 1) / 2


@linux
def test_an_exception_in_the_child_is_raised_here(forking: None) -> None:
    with pytest.raises(ValueError, match="no frames in the window"):
        B.apart(_raises, "no frames in the window").result()


@linux
def test_an_exception_that_does_not_come_back_is_raised_by_the_work_done_here(forking: None) -> None:
    with pytest.raises(_TwoArgs, match="bad trace") as got:
        B.apart(_raises_two, "bad trace", 7).result()
    assert got.value.code == 7


@linux
def test_an_answer_that_does_not_pickle_is_worked_out_here(forking: None) -> None:
    got = B.apart(_unpicklable).result()
    assert hasattr(got, "acquire")


@linux
def test_a_child_that_ends_without_an_answer_leaves_the_work_here(forking: None) -> None:
    assert B.apart(_dies_in_child).result() == os.getpid()


@linux
def test_work_beside_in_the_child_runs_in_line(forking: None) -> None:
    pid, total = B.apart(_nested).result()
    assert pid != os.getpid() and total == 10


def test_without_fork_the_work_runs_on_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(B, "APART", False)
    pid, total = B.apart(_pid_and_sum, np.arange(4)).result()
    assert pid == os.getpid() and total == 6


def test_the_default_follows_the_setting_and_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    if not (sys.platform == "linux" and hasattr(os, "fork")):
        assert B._apart_default() is False
        return
    monkeypatch.setenv("CLUSTERBENCH_APART", "0")
    assert B._apart_default() is False
    monkeypatch.setenv("CLUSTERBENCH_APART", "1")
    assert B._apart_default() is True
    monkeypatch.delenv("CLUSTERBENCH_APART")
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(2)))
    assert B._apart_default() is False
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(16)))
    assert B._apart_default() is True


# a device-bound pipeline with NVTX, a host-bound loop, two threads, graphs, a trace without NVTX
SHAPES = ("h200/dev_5x5_s2_b500.sqlite", "zoo/zoo_host_bound.sqlite", "zoo/zoo_two_threads.sqlite",
          "h200/tracking_3x3_s1_b500_f2000_graph.sqlite", "zoo/zoo_no_nvtx.sqlite")  # fmt: skip


@linux
@pytest.mark.parametrize("name", SHAPES)
def test_processes_apart_give_the_threads_json(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = DATA / name
    out = {}
    for apart in (False, True):
        monkeypatch.setattr(B, "APART", apart)
        req = A.request()
        cache: dict = {}
        out[apart] = render_json(A.analyze(A.load_trace(path, req=req, cache=cache), req=req, trace_label=name, cache=cache))
    assert out[True] == out[False]
