"""Host memory against N GPUs: pinned host <-> device copies, one thread per GPU.

    python3 benchmarks/bench_host_copy.py [--gpus all|0,2] [--mib 256] [--repeats 10] [--no-pin] [--json out.json]

The figure docs/scaling.md asks for beside a multi-GPU probe: what the host can feed when every
GPU streams at once. For each selected GPU a thread pins itself to the cores closest to that GPU
(NVML affinity, as ``probe --gpus`` does; ``--no-pin`` to compare), then allocates its pinned host
buffer there (first touch puts the pages on that node), and copies ``--repeats`` x ``--mib`` MiB
on its own stream, in three directions: h2d, d2h, and both at once (two streams, duplex).

1. solo: each GPU alone, one after another: its link's rate;
2. concurrent: every GPU at once, threads released together by a barrier: per GPU rate (CUDA
   events on its own device) and the total (all bytes over the wall time from the barrier to the
   last GPU's end, since events of different devices share no clock).

total / (sum of solo rates) is the host's scaling efficiency: 100 % while every link is the limit,
lower once host memory bandwidth (or a shared PCIe switch, or one socket's memory feeding GPUs on
both) binds. GPU-only; not run by the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

# CuPy numbers devices fastest-first by default, NVML by PCI bus: make them agree before CuPy loads.
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")

from gpu_start import gpu_only, start_gpu  # noqa: E402  (also puts the checkout on sys.path)

if TYPE_CHECKING:
    from clusterbench.run import machine

MIB = 1024 * 1024
DIRECTIONS = ("h2d", "d2h", "duplex")


def copy_once(cp, host, dev, direction: str, repeats: int, streams) -> tuple[float, int]:
    """(seconds by CUDA events, bytes moved) for ``repeats`` copies in ``direction`` on this thread's device."""
    nbytes = host[0].nbytes
    start, end = cp.cuda.Event(), cp.cuda.Event()
    s_in, s_out = streams
    start.record(s_in)
    s_out.wait_event(start)
    moved = 0
    for _ in range(repeats):
        if direction in ("h2d", "duplex"):
            dev[0].set(host[0], stream=s_in)
            moved += nbytes
        if direction in ("d2h", "duplex"):
            dev[1].get(stream=s_out, out=host[1])
            moved += nbytes
    done_out = cp.cuda.Event()
    done_out.record(s_out)
    s_in.wait_event(done_out)
    end.record(s_in)
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end) / 1e3, moved


class Worker:
    """One GPU: a thread pinned near it, its pinned host buffers, device buffers and two streams."""

    def __init__(self, cp, ordinal: int, gpu: machine.GpuInfo, nbytes: int, pin: bool) -> None:
        self.cp, self.ordinal, self.gpu, self.nbytes, self.pin = cp, ordinal, gpu, nbytes, pin
        self.pinned_to: tuple[int, ...] | None = None
        self.ready = threading.Event()
        self.error: BaseException | None = None

    def setup(self) -> None:  # runs in the worker thread
        cp = self.cp
        if self.pin and self.gpu.cpus:
            allowed = os.sched_getaffinity(0)
            cpus = {c for c in self.gpu.cpus if c in allowed}
            if cpus:
                os.sched_setaffinity(0, cpus)  # pid 0: the calling thread on Linux
                self.pinned_to = tuple(sorted(cpus))
        cp.cuda.Device(self.ordinal).use()
        import numpy as np

        def pinned() -> np.ndarray:
            mem = cp.cuda.alloc_pinned_memory(self.nbytes)
            a = np.frombuffer(mem, np.uint8, self.nbytes)
            a[:] = 1  # first touch, from the pinned thread
            return a

        self.host = (pinned(), pinned())
        self.dev = (cp.empty(self.nbytes, cp.uint8), cp.zeros(self.nbytes, cp.uint8))
        self.streams = (cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True))
        copy_once(cp, self.host, self.dev, "duplex", 1, self.streams)  # warm up


def run_phase(workers: list[Worker], direction: str, repeats: int) -> dict:
    """All ``workers`` at once, released by a barrier; per GPU (s, bytes) and the wall time."""
    barrier = threading.Barrier(len(workers) + 1)
    out: dict[int, tuple[float, int, float]] = {}

    def go(w: Worker) -> None:
        if w.pinned_to:
            os.sched_setaffinity(0, set(w.pinned_to))  # this thread, near its GPU, as in setup
        w.cp.cuda.Device(w.ordinal).use()
        barrier.wait()
        s, moved = copy_once(w.cp, w.host, w.dev, direction, repeats, w.streams)
        out[w.gpu.index] = (s, moved, time.perf_counter())

    threads = [threading.Thread(target=go, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = max(v[2] for v in out.values()) - t0
    total = sum(v[1] for v in out.values())
    return {"per_gpu_gbps": {i: v[1] / v[0] / 1e9 for i, v in sorted(out.items())},
            "total_gbps": total / wall / 1e9, "wall_s": wall}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=gpu_only(" ".join(__doc__.split("\n\n")[0].split())))
    ap.add_argument("--gpus", default="all", help="all (default) or a list such as 0,2")
    ap.add_argument("--mib", type=int, default=256, help="MiB per copy")
    ap.add_argument("--repeats", type=int, default=10, help="copies per direction and phase")
    ap.add_argument("--trials", type=int, default=3, help="each phase is run this often; the median is shown")
    ap.add_argument("--no-pin", action="store_true", help="do not pin threads near their GPU")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if start_gpu() is None:  # no CuPy or no GPU: one line and a hint, before NVML or any copy
        return 1
    from clusterbench.run import machine

    selection = machine.parse_gpu_selection(args.gpus)
    topology = machine.read_gpu_topology()
    gpus = machine.resolve_selection(selection, topology)
    import cupy as cp

    n_cuda = cp.cuda.runtime.getDeviceCount()
    if n_cuda != len(topology):
        print(f"CUDA sees {n_cuda} devices, NVML {len(topology)}: unset CUDA_VISIBLE_DEVICES", file=sys.stderr)
        return 1
    workers = []
    for g in gpus:
        bus = cp.cuda.Device(g.index).pci_bus_id.lower()
        if g.pci_bus_id and machine.sysfs_pci_path(g.pci_bus_id, Path("/")).name != bus:
            print(f"GPU {g.index}: CUDA device {g.index} is {bus}, NVML says {g.pci_bus_id}", file=sys.stderr)
            return 1
        workers.append(Worker(cp, g.index, g, args.mib * MIB, not args.no_pin))

    def setup(w: Worker) -> None:
        try:
            w.setup()
        except BaseException as exc:  # report in the main thread
            w.error = exc

    threads = [threading.Thread(target=setup, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for w in workers:
        if w.error is not None:
            raise w.error
    report: dict = {"gpus": [g.to_json() for g in gpus], "mib": args.mib, "repeats": args.repeats,
                    "pinned": {w.gpu.index: None if w.pinned_to is None else machine.format_cpulist(w.pinned_to)
                               for w in workers}, "solo": {}, "concurrent": {}}
    for d in DIRECTIONS:
        solo = {}
        for w in workers:
            solo[w.gpu.index] = statistics.median(run_phase([w], d, args.repeats)["per_gpu_gbps"][w.gpu.index]
                                                  for _ in range(args.trials))
        trials = [run_phase(workers, d, args.repeats) for _ in range(args.trials)]
        conc = {i: statistics.median(t["per_gpu_gbps"][i] for t in trials) for i in solo}
        total = statistics.median(t["total_gbps"] for t in trials)
        report["solo"][d] = solo
        report["concurrent"][d] = {"per_gpu_gbps": conc, "total_gbps": total,
                                   "efficiency": total / sum(solo.values())}

    print(f"pinned host <-> device copies, {args.mib} MiB x {args.repeats}, median of {args.trials}; "
          f"GB/s = 1e9 B/s")
    for w in workers:
        print(f"  GPU {w.gpu.index} {w.gpu.name}: thread on CPUs "
              f"{report['pinned'][w.gpu.index] or 'not pinned'}, memory node {w.gpu.mem_nodes or 'unknown'}")
    print(f"{'direction':<9} {'GPU':>4} {'solo GB/s':>10} {'concurrent GB/s':>16} {'ratio %':>8}")
    for d in DIRECTIONS:
        for i, s in report["solo"][d].items():
            c = report["concurrent"][d]["per_gpu_gbps"][i]
            print(f"{d:<9} {i:>4} {s:>10.1f} {c:>16.1f} {100 * c / s:>8.0f}")
        cd = report["concurrent"][d]
        print(f"{d:<9} {'all':>4} {sum(report['solo'][d].values()):>10.1f} {cd['total_gbps']:>16.1f} "
              f"{100 * cd['efficiency']:>8.0f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    from clusterbench.errors import ClusterbenchError

    try:
        sys.exit(main())
    except ClusterbenchError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"Hint: {exc.hint}", file=sys.stderr)
        sys.exit(exc.exit_code)
