"""The launch and synchronisation costs that bound the tracking pedestal.

Tracking makes frame t+1 depend on frame t (each pixel's running mean, and its neighbours'
corrected values), so a tracking pass pays one dependency step per frame. This measures what one
step costs on this GPU, three ways:

- a kernel launch on a stream (empty kernel, back to back), per launch;
- a CUDA graph of N empty kernel nodes in a chain, replayed, per node;
- a persistent cooperative kernel that loops ``grid.sync()``, per sync, at several grid sizes.

    python3 benchmarks/bench_sync.py [--json out.json]

Times come from CUDA events, median of repeats after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from gpu_start import gpu_only, start_gpu


def _events_us(fn, repeats: int = 7) -> float:
    import cupy as cp

    fn()  # warm-up
    cp.cuda.Device().synchronize()
    out = []
    for _ in range(repeats):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(cp.cuda.get_elapsed_time(a, b) * 1000.0)
    return statistics.median(out)


EMPTY = r'extern "C" __global__ void empty_k(int *p) { if (p && threadIdx.x == 12345) p[0] = 1; }'
COOP = r'''
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
extern "C" __global__ void sync_loop(int n, int *sink) {
    cg::grid_group g = cg::this_grid();
    int acc = 0;
    for (int i = 0; i < n; ++i) {
        acc += threadIdx.x ^ i;
        g.sync();
    }
    if (acc == 0x7fffffff) sink[0] = acc;
}
'''


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=gpu_only(__doc__.splitlines()[0]))
    ap.add_argument("--json", help="write the figures here as JSON")
    args = ap.parse_args(argv)
    started = start_gpu()
    if started is None:  # no CuPy or no GPU: one line and a hint, not a traceback
        return 1
    cp, gpu_name = started

    dev = cp.cuda.Device(0)
    sms = dev.attributes["MultiProcessorCount"]
    out: dict[str, object] = {"gpu": gpu_name, "sms": sms}
    sink = cp.zeros(1, dtype=cp.int32)
    empty = cp.RawKernel(EMPTY, "empty_k")
    stream = cp.cuda.Stream(non_blocking=True)

    n = 2000

    def launches():
        with stream:
            for _ in range(n):
                empty((1,), (32,), (sink,))
        stream.synchronize()

    # host-timed: back-to-back launches are bounded by the host's launch rate
    import time

    launches()
    t = time.perf_counter()
    launches()
    out["stream_launch_us"] = (time.perf_counter() - t) * 1e6 / n

    with stream:
        stream.begin_capture()
        for _ in range(n):
            empty((1,), (32,), (sink,))
        graph = stream.end_capture()

    def replay():
        graph.launch(stream)
        stream.synchronize()

    replay()
    t = time.perf_counter()
    reps = 5
    for _ in range(reps):
        replay()
    out["graph_node_us"] = (time.perf_counter() - t) * 1e6 / (n * reps)

    coop = cp.RawKernel(COOP, "sync_loop", enable_cooperative_groups=True)
    iters = 20000
    rows = []
    for blocks_per_sm, threads in ((1, 256), (1, 1024), (2, 512), (4, 256)):
        grid = sms * blocks_per_sm
        try:
            us = _events_us(lambda: coop((grid,), (threads,), (cp.int32(iters), sink)), repeats=5)
        except Exception as exc:  # a grid that cannot be co-resident is refused by the launch
            rows.append({"grid": grid, "threads": threads, "error": str(exc)[:120]})
            continue
        rows.append({"grid": grid, "threads": threads, "us_per_sync": us / iters})
    out["grid_sync"] = rows

    print(f"GPU: {out['gpu']} ({sms} SMs)")
    print(f"kernel launch on a stream, back to back: {out['stream_launch_us']:.2f} µs per launch (host clock)")
    print(f"graph of {n} empty kernel nodes, replayed: {out['graph_node_us']:.2f} µs per node (host clock)")
    for r in rows:
        if "error" in r:
            print(f"grid.sync() grid {r['grid']} x {r['threads']} threads: refused ({r['error']})")
        else:
            print(f"grid.sync() grid {r['grid']} x {r['threads']} threads: {r['us_per_sync']:.3f} µs per sync (events)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
