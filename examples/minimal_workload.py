"""The smallest program that speaks clusterbench's workload protocol (docs/workloads.md).

    clusterbench probe --config examples/minimal_workload.toml

A toy GPU "finder" in CuPy: per batch it copies the frames in, marks pixels more than nsigma
pedestal sigmas above the pedestal that are the maximum of their 3x3 window, and copies one
count per frame back. It is not clusterbench's finder; it shows the protocol, nothing more:

1. everything slow (data, pinned buffers, compilation, a warm-up batch) before the first range;
2. the pedestal inside the NVTX range ``clusterbench:pedestal``;
3. one batched pass inside ``clusterbench:pass frames=N``, the range closed after a synchronize;
4. the result record (schema clusterbench.workload-result, version 2) written to ``--result``;
5. ``--mode sustained --repeat R``: R timed passes, no ranges needed (nothing traces them).

Exit codes: 0 success; 1 no GPU or CuPy; 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] + " GPU only: needs CuPy and an NVIDIA GPU.")
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--cols", type=int, required=True)
    ap.add_argument("--frames", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--pedestal-frames", type=int, required=True)
    ap.add_argument("--nsigma", type=float, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--result", required=True)
    ap.add_argument("--mode", choices=("pass", "sustained"), default="pass")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args(argv)
    try:
        import cupy as cp
        import numpy as np

        cp.cuda.runtime.getDeviceCount()
    except Exception as exc:
        print(f"Error: examples/minimal_workload.py needs CuPy and an NVIDIA GPU: {exc}", file=sys.stderr)
        print("Hint: run it on a machine with an NVIDIA GPU and CuPy (pip install -e '.[gpu]'), through "
              "clusterbench probe --config examples/minimal_workload.toml", file=sys.stderr)
        return 1

    # 1. data and buffers, outside every range: 64 distinct frames, reused cyclically
    rng = np.random.default_rng(a.seed)
    ped = rng.normal(2000, 100, (a.rows, a.cols))
    noise = rng.uniform(8, 20, (a.rows, a.cols))
    dark = (ped + noise * rng.standard_normal((a.pedestal_frames, a.rows, a.cols))).astype(np.uint16)
    pool = (ped + noise * rng.standard_normal((64, a.rows, a.cols))).astype(np.uint16)
    pool[:, ::37, ::41] += 250  # a few "photons"
    host = cp.cuda.alloc_pinned_memory(a.batch * a.rows * a.cols * 2)
    frames_h = np.frombuffer(host, np.uint16, a.batch * a.rows * a.cols).reshape(a.batch, a.rows, a.cols)
    frames_h[:] = pool[np.arange(a.batch) % len(pool)]
    counts_h = np.zeros(a.batch, np.int32)

    def find(d_frames, mean, thr):
        v = d_frames.astype(cp.float32) - mean
        pad = cp.pad(v, ((0, 0), (1, 1), (1, 1)), constant_values=-cp.inf)
        wmax = cp.max(cp.stack([pad[:, 1 + dy:1 + dy + a.rows, 1 + dx:1 + dx + a.cols]
                                for dy in (-1, 0, 1) for dx in (-1, 0, 1)]), axis=0)
        return ((v == wmax) & (v > thr)).sum(axis=(1, 2), dtype=cp.int32)

    def one_pass(mean, thr) -> tuple[float, int]:
        found = 0
        t0 = time.perf_counter()
        for start in range(0, a.frames, a.batch):
            n = min(a.batch, a.frames - start)
            d = cp.asarray(frames_h[:n])  # H2D from pinned memory
            cp.asnumpy(find(d, mean, thr), out=counts_h[:n])  # kernel, D2H
            found += int(counts_h[:n].sum())
        cp.cuda.Device().synchronize()
        return time.perf_counter() - t0, found

    def pedestal():
        d = cp.asarray(dark).astype(cp.float64)
        mean = d.mean(axis=0)
        return mean.astype(cp.float32), (d.std(axis=0) * a.nsigma).astype(cp.float32)

    mean, thr = pedestal()
    cp.asnumpy(find(cp.asarray(frames_h[:a.batch]), mean, thr))  # warm-up: compile the kernels, one batch
    cp.cuda.Device().synchronize()
    nvtx = cp.cuda.nvtx
    seconds, pedestal_s = [], None
    if a.mode == "pass":
        nvtx.RangePush("clusterbench:pedestal")  # 2.
        t0 = time.perf_counter()
        mean, thr = pedestal()
        cp.cuda.Device().synchronize()
        pedestal_s = time.perf_counter() - t0
        nvtx.RangePop()
        nvtx.RangePush(f"clusterbench:pass frames={a.frames}")  # 3.
        s, found = one_pass(mean, thr)
        nvtx.RangePop()
        seconds.append(s)
    else:  # 5.
        for _ in range(a.repeat):
            s, found = one_pass(mean, thr)
            seconds.append(s)
    record = {"schema": "clusterbench.workload-result", "version": 2, "mode": a.mode, "frames": a.frames,
              "pass_s": seconds, "clusters_found": found, "clusters_dropped": 0, "pedestal_s": pedestal_s,
              "finder": "examples/minimal_workload.py (toy local-maximum counter)",
              "data_source": f"64 synthetic frames, seed {a.seed}", "extra": {}}
    with open(a.result, "w") as fh:  # 4.
        json.dump(record, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
