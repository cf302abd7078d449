"""A/B of untraced sustained FPS in copy mode: strip kernel, two-phase at 8 frames per classify block,
two-phase at the adaptive default (up to 32), interleaved over several rounds so that drift between
runs and over time hits every variant alike.

    python3 benchmarks/ab_sustained.py [--rounds 2] [--frames 20000]

Why: on 2026-11-29 the benchmark read 9x9 copy S4 B200 at 76,002 FPS (min 73,026, max 86,720) with the
two-phase kernel at 32 frames per block, against 90,553 with the strip kernel and 90,009 with two-phase at
8 frames per block in an earlier run. The kernel (1.6 µs/frame) sits far below the D2H bar
(10.3 µs/frame), so the kernel variant should not move sustained FPS: this run tells noise from cause.
"""

from __future__ import annotations

import argparse
import statistics

from gpu_start import gpu_only, start_gpu  # also puts the checkout on sys.path


def main() -> int:
    ap = argparse.ArgumentParser(description=gpu_only("A/B of untraced sustained FPS in copy mode: the strip kernel against two-phase at 8 and at up to 32 frames per block, interleaved"))
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds over the three variants (default 2)")
    ap.add_argument("--frames", type=int, default=20000, help="data frames per untraced pass (default 20000)")
    args = ap.parse_args()
    if start_gpu() is None:  # no CuPy or no GPU: one line and a hint, before any frames are built
        return 1
    from clusterbench.workloads.cupy import build
    from clusterbench.model.params import WorkloadParams
    from clusterbench.workloads.cupy.run import _frames_for, measure_sustained

    cases = [("9x9 S4 B200", WorkloadParams(cluster=9, cap=1700, streams=4, batch=200, frames=args.frames)),
             ("3x3 S2 B200", WorkloadParams(cluster=3, cap=3000, streams=2, batch=200, frames=args.frames))]
    variants = [("strip", "strip", None), ("twophase fpb8", "twophase", 8), ("twophase fpb<=32", "twophase", 32)]
    default_cap = build.CLASSIFY_FRAMES_PER_BLOCK
    for name, params in cases:
        frames = _frames_for(params)
        got: dict[str, list[float]] = {v[0]: [] for v in variants}
        for _ in range(args.rounds):
            for vname, kernel, cap in variants:
                build.CLASSIFY_FRAMES_PER_BLOCK = cap or default_cap
                r = measure_sustained(params, repeats=3, frames=frames, frozen_kernel=kernel)
                got[vname].extend(r.samples)
        build.CLASSIFY_FRAMES_PER_BLOCK = default_cap
        for vname, fps in got.items():
            print(f"ab {name} {vname}: median {statistics.median(fps):,.0f} FPS, min {min(fps):,.0f}, "
                  f"max {max(fps):,.0f} over {len(fps)} untraced passes of {params.frames} frames", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
