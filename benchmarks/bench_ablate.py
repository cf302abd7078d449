"""Where the time of the new kernels goes, and which variant is fastest.

    python3 benchmarks/bench_ablate.py [--json out.json] [--only tracking|frozen|slide] [--quick]

Kernel µs per frame, 1 stream, CUDA events, 500 frames already on the GPU, median of 5, f32 and f64,
3x3 and 9x9 (synthetic MOENCH-like frames, 130 photons/frame):

- **tracking, "coop"** (track_persistent): the default build, the window total by the exact
  row-major sum (CB_PSEP=0) and by the separable filter (CB_PSEP=1), each with and without the
  compaction; then leave-one-out variants (CB_ABL bits): no grid step (a block barrier instead), no
  per-frame halo-mean loads, no per-frame mean stores, no window total, and all three memory and sync
  stages at once; and other tile heights and register caps.
- **frozen, "slide"** (frozen_slide): with and without the compaction, at other register caps
  (CB_SMINB: resident blocks per SM the registers must allow) and tile heights (CB_STH).
- **``--only slide``**: frozen_slide in float32 at 3x3, 5x5, 7x7 and 9x9 against twophase, at 16, 24
  and 28 frames per block, with 12-row tiles and (7x7, 9x9) the tighter register bound of 5 blocks per
  SM; in float64 at 3x3 and 5x5 against twophase.

Figures and the runs that produced them: docs/workload.md, "Step 5" and "Step 6".

The leave-one-out variants compute wrong clusters by design: their figures are only time. Every
other variant's clusters on those 500 frames are compared byte for byte with the default build's,
and a variant that differs is reported as such. A difference of two timings says what the left-out
stage costs inside the running kernel (overlap included), not what it costs alone.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from gpu_start import gpu_only, start_gpu  # also puts the checkout on sys.path

from clusterbench.model.params import WorkloadParams  # noqa: E402

CHECK = 500  # frames per timing, and frames whose clusters a variant must reproduce
ABL = {1: "no grid step", 2: "no halo-mean loads", 4: "no mean stores", 8: "no window total",
       7: "no step, loads or stores"}


def _same(a, b) -> bool:
    return len(a) == len(b) and all(g.found == r.found and g.records.tobytes() == r.records.tobytes()
                                    for g, r in zip(a, b))


def _one(rows: list, frames, p, name: str, check_against=None, timing_only: bool = False, fpb: int | None = None,
         **kw) -> object:
    """Time one variant with and without the compaction; compare its clusters unless timing_only."""
    from clusterbench.workloads.cupy.pipeline import Pipeline

    row = {"config": f"{p.cluster}x{p.cluster}", "dtype": p.pedestal_dtype, "mode": p.pedestal, "variant": name,
           "options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in kw.items()}, "fpb": fpb}
    got = None
    try:
        with Pipeline(p, frames, **kw) as pipe:
            pipe.fpb = fpb  # frames per frozen block; None: the pipeline's choice
            pipe.compute_pedestal()
            row["us_with_compact"] = pipe.time_kernel(CHECK, repeats=5)
            row["us_find_only"] = pipe.time_kernel(CHECK, repeats=5, compact=False)
            if not timing_only:
                pipe.reset_pedestal()
                got = pipe.run_pass(CHECK, collect=True).clusters
    except Exception as exc:  # one failing variant (e.g. too much shared memory) must not hide the others
        row["error"] = str(exc)[:300]
        print(f"{row['config']} {row['dtype']} {row['mode']} {name}: FAILED: {row['error']}", flush=True)
        rows.append(row)
        return None
    if timing_only:
        row["same"] = None
    elif check_against is not None:
        row["same"] = _same(got, check_against)
    else:
        row["same"] = "ref"
    rows.append(row)
    same = {None: "timing only", "ref": "reference", True: "identical", False: "CLUSTERS DIFFER"}[row["same"]]
    print(f"{row['config']} {row['dtype']} {row['mode']:8} {name:34} {row['us_with_compact']:7.3f} µs "
          f"(find only {row['us_find_only']:7.3f})  {same}", flush=True)
    return got


def tracking(rows: list, frames, base, quick: bool = False) -> None:
    for dtype in ("float32", "float64"):
        for k, cap in ((3, 3000), (9, 1700)):
            p = base.replace(cluster=k, cap=cap, streams=1, batch=CHECK, pedestal_dtype=dtype, pedestal="tracking")
            ref = _one(rows, frames, p, "coop, default build", tracking_kernel="coop")
            if quick:  # tile heights, and at 3x3 the window read once per pixel (CB_PDIRECT) or the row-max pass
                for th in (16, 20, 40):
                    for direct in ((0, 1) if k == 3 else (None,)):
                        name = f"coop, {th}-row tiles" + ("" if direct is None else f", CB_PDIRECT={direct}")
                        _one(rows, frames, p, name, ref, tracking_kernel="coop", track_tile_rows=th,
                             defines=() if direct is None else (f"-DCB_PDIRECT={direct}",))
                continue
            for sep in (0, 1):
                _one(rows, frames, p, f"coop, CB_PSEP={sep}", ref, tracking_kernel="coop",
                     defines=(f"-DCB_PSEP={sep}",))
            # tile heights: 16 rows (325 tiles, 3 blocks of 8 warps per SM), 20 (260, 2 of 10 warps),
            # 40 (130, 1 of 20 warps), 32 (169, 2 of 16 warps), 8 (650, 5 of 4 warps)
            for th in (20, 40, 32, 8):
                _one(rows, frames, p, f"coop, {th}-row tiles", ref, tracking_kernel="coop", track_tile_rows=th)
            if dtype == "float64":
                continue
            _one(rows, frames, p, "flags, default build", ref, tracking_kernel="flags")
            _one(rows, frames, p, "flags, 20-row tiles", ref, tracking_kernel="flags", track_tile_rows=20)
            for bits, what in ABL.items():
                _one(rows, frames, p, f"coop, {what} (CB_ABL={bits})", timing_only=True, tracking_kernel="coop",
                     defines=(f"-DCB_ABL={bits}",))


def frozen(rows: list, frames, base, quick: bool = False) -> None:
    for dtype in ("float32", "float64"):
        for k, cap in ((3, 3000), (9, 1700)):
            p = base.replace(cluster=k, cap=cap, streams=1, batch=CHECK, pedestal_dtype=dtype, pedestal="frozen")
            ref = _one(rows, frames, p, "slide, default build", frozen_kernel="slide")
            _one(rows, frames, p, "twophase", ref, frozen_kernel="twophase")
            # (CB_STH, CB_SMINB); None: the kernel's own bound (24 warps per SM, or as many blocks as the shared
            # memory holds). ptxas (nvcc 13.0, sm_90, 400x400 frames) at 3x3 f32, 16 rows: 74 registers, no spill
            geometries = ((16, 4), (12, None), (20, None)) if quick else (
                (16, 2), (16, 4), (8, None), (12, None), (20, None), (24, None))
            for th, minb in geometries:
                name = f"slide, CB_STH={th}" + ("" if minb is None else f", CB_SMINB={minb}")
                _one(rows, frames, p, name, ref, frozen_kernel="slide", slide_rows=th,
                     defines=() if minb is None else (f"-DCB_SMINB={minb}",))


def slide(rows: list, frames, base) -> None:
    """frozen_slide: in float32 at 3x3, 5x5, 7x7 and 9x9 the default build against twophase, other frames
    per block (500 frames of 175 tiles at 3x3 make 2,800 blocks of 32 frames: 7.07 waves of 396 resident
    blocks; 28 frames make 3,150, 7.95 waves), other tile heights, and from 7x7 up the tighter register
    bound of 5 blocks per SM; in float64 at 3x3 and 5x5 the default build against twophase."""
    for k, cap in ((3, 3000), (5, 3000), (7, 2500), (9, 1700)):
        p = base.replace(cluster=k, cap=cap, streams=1, batch=CHECK, pedestal_dtype="float32", pedestal="frozen")
        ref = _one(rows, frames, p, "slide, default build", frozen_kernel="slide")
        _one(rows, frames, p, "twophase", ref, frozen_kernel="twophase")
        if k >= 7:  # the register bound before 2026-12-01's last change: 5 blocks of 4 warps (as many as fit)
            _one(rows, frames, p, "slide, CB_SMINB=5", ref, frozen_kernel="slide", defines=("-DCB_SMINB=5",))
        if k == 7:
            continue
        for fpb in (16, 24, 28):
            _one(rows, frames, p, f"slide, {fpb} frames per block", ref, frozen_kernel="slide", fpb=fpb)
        _one(rows, frames, p, "slide, CB_STH=12", ref, frozen_kernel="slide", slide_rows=12)
    for k, cap in ((3, 3000), (5, 3000)):
        p = base.replace(cluster=k, cap=cap, streams=1, batch=CHECK, pedestal_dtype="float64", pedestal="frozen")
        ref = _one(rows, frames, p, "slide, default build", frozen_kernel="slide")
        _one(rows, frames, p, "twophase", ref, frozen_kernel="twophase")


def main() -> int:
    ap = argparse.ArgumentParser(description=gpu_only(__doc__.splitlines()[0]))
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--only", choices=("tracking", "frozen", "slide"),
                    help="one mode only; slide: frozen_slide's frames per block, tile heights, f64 against twophase")
    ap.add_argument("--frames", type=int, default=2000, help="frames of the params record (the pool is reused)")
    ap.add_argument("--quick", action="store_true", help="fewer variants: tile heights, register caps, CB_PDIRECT")
    args = ap.parse_args()

    started = start_gpu()
    if started is None:  # no CuPy or no GPU: one line and a hint, not a traceback
        return 1
    cp, name = started

    from clusterbench.workloads.synth import build_frames

    t0 = time.perf_counter()
    base = WorkloadParams(frames=args.frames)
    frames = build_frames(base)
    print(f"{name}; data: {frames.source}, built in {time.perf_counter() - t0:.1f} s; kernel µs per frame, "
          f"1 stream, CUDA events, {CHECK} frames, median of 5", flush=True)
    rows: list = []
    if args.only in (None, "tracking"):
        tracking(rows, frames, base, args.quick)
    if args.only in (None, "frozen"):
        frozen(rows, frames, base, args.quick)
    if args.only == "slide":
        slide(rows, frames, base)
    if args.json:
        Path(args.json).write_text(json.dumps({"device": name, "cupy": cp.__version__, "rows": rows}, indent=2) + "\n")
    bad = [r for r in rows if r.get("same") is False]
    if bad:
        print(f"{len(bad)} variant(s) computed different clusters", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
