"""Benchmark of the CuPy cluster-finder workload.

    python3 benchmarks/bench_workload.py [--frames 20000] [--json out.json] [--sweep [--quick]]

1. The link limit, measured in the same run and the same way as a probe measures its unit
   (clusterbench.workloads.cupy.link: pinned H2D alone, D2H alone, and both at once on two streams, each
   direction timed by its own events). Bytes per frame over GB/s give the µs-per-frame floor of each config
   (model.unit.link_floor_us: copy mode, in = 320 KB per 400x400 frame, out = the whole slot; with the rates of
   both directions at once where the config moves both at the same time, copy mode on several streams; each
   direction alone on one stream and for zero-copy's frame in).
2. Kernel µs per frame, 1 stream, CUDA events around launches over frames already on the GPU: the
   frozen kernels side by side ("strip", "twophase", the two-phase kernel with the other classify
   tile height, and "slide"), 3x3 and 9x9, f32 and f64. Each variant's clusters on 400 frames are
   compared byte for byte with the strip kernel's. With --sweep, the tracking kernel too.
3. Sustained FPS, untraced (measure_sustained: pass only, warmed up, median of 3): copy mode at the
   best streams x batch found before (3x3: S2 B200, 9x9: S4 B200), for each frozen kernel. With
   --sweep, the wide streams x batch sweep in copy and zerocopy mode, and the tracking mode.
Synthetic MOENCH-like frames (130 photons/frame), a pool of 1000 distinct frames reused cyclically.

    python3 benchmarks/bench_workload.py --modes [--frames 20000] [--json out.json]

    python3 benchmarks/bench_workload.py --grid [--json out.json]

``--grid`` times only the default kernels: kernel µs per frame (1 stream, CUDA events) at batch 500 and
2000, and sustained FPS over 8 streams x batch settings per mode and config, with the best of each.

``--modes`` instead measures both pedestal modes, kernel and end to end:
1. the link, as above;
2. kernel µs per frame (1 stream, CUDA events, batch 500 already on the GPU) for every tracking
   kernel ("graph", "coop", "flags"; the persistent ones with the default 20-row tiles, "coop" in f32
   also with 16 and 40) and every frozen kernel variant, 3x3 and 9x9, f32 and f64; each variant's
   clusters on 500 frames are compared byte for byte with the first kernel's of its mode;
3. sustained FPS (untraced, median of 3 passes) over streams x batch for each mode and config, the
   tracking mode with its fastest kernel, and the best setting of each;
and prints one table last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from gpu_start import gpu_only, start_gpu  # also puts the checkout on sys.path

from clusterbench.model.params import WorkloadParams  # noqa: E402

CHECK_FRAMES = 400  # frames whose clusters each kernel variant must reproduce byte for byte


def floor_of(p, link) -> float:
    """The link's floor on a frame of params ``p``, µs per frame (model.unit.link_floor_us): its frame in and, in
    copy mode, its slot out, with both directions at once where several streams move both at the same time."""
    from clusterbench.model.unit import link_floor_us

    copy = p.transfer == "copy"
    return link_floor_us(p.frame_bytes, p.slot_bytes if copy else None, link, both=copy and p.streams > 1)


def fps_of(r) -> dict:
    """The FPS figures of a run.measure_sustained record, as sustained_fps returns them."""
    return {"median_fps": r.median, "min_fps": r.min, "max_fps": r.max, "input_gbps": r.input_gbps}


def sustained_row(config: str, mode: str, kernel: str | None, transfer: str, streams: int, batch: int, fps: dict,
                  floor_us: float, **extra) -> dict:
    """One sustained-FPS row of the report: the FPS figures, the link floor (µs per frame, and as FPS) and
    the fraction of the floor reached."""
    fps = {key: v for key, v in fps.items() if key != "kernel"}  # the row names its kernel itself
    return {"config": config, "mode": mode, "kernel": kernel, "transfer": transfer, "streams": streams,
            "batch": batch, **fps, "link_floor_us": floor_us, "link_fps": 1e6 / floor_us,
            "of_link": fps["median_fps"] * floor_us / 1e6, **extra}


def sweep(args, base, frames, link) -> list[dict]:
    """The wide streams x batch sweep (default frozen kernel), copy and zerocopy, plus tracking."""
    from clusterbench.workloads.cupy import pipeline
    from clusterbench.workloads.cupy.run import measure_sustained

    configs = [("3x3", 3, 3000), ("9x9", 9, 1700)]
    combos = [(2, 500), (4, 200), (4, 1000)] if args.quick else [(2, 200), (2, 1000), (4, 200), (4, 500), (4, 1000), (8, 250)]
    sustained = []
    for label, k, cap in configs:
        p0 = base.replace(cluster=k, cap=cap)
        for transfer in ("copy", "zerocopy"):
            best = None
            for streams, batch in combos:
                p = p0.replace(streams=streams, batch=batch, transfer=transfer)
                floor = floor_of(p, link)
                r = measure_sustained(p, repeats=3, frames=frames)
                row = sustained_row(label, "frozen", pipeline.default_frozen_kernel(p.pedestal_dtype, p.cluster),
                                    transfer, streams, batch, fps_of(r), floor, sweep=True)
                sustained.append(row)
                print(f"sustained {label} {transfer} s{streams} b{batch}: {r.median:,.0f} FPS "
                      f"(min {r.min:,.0f}, max {r.max:,.0f}); link floor {floor:.2f} µs "
                      f"= {1e6 / floor:,.0f} FPS; {100 * row['of_link']:.1f} % of link", flush=True)
                if best is None or r.median > best["median_fps"]:
                    best = row
            best["best"] = True
        pt = p0.replace(pedestal="tracking", streams=4, batch=500)
        r = measure_sustained(pt, repeats=3, frames=frames)
        row = sustained_row(label, "tracking", "tracking", "copy", 4, 500, fps_of(r), floor_of(pt, link))
        sustained.append(row)
        print(f"sustained {label} tracking s4 b500: {r.median:,.0f} FPS (min {r.min:,.0f}, "
              f"max {r.max:,.0f}); {100 * row['of_link']:.1f} % of the copy-mode link floor", flush=True)
    return sustained


def sustained_fps(params, frames, repeats: int = 3, **pipe_kwargs) -> dict:
    """Untraced sustained FPS of the pass alone (as clusterbench.workloads.cupy.run.measure_sustained, but with
    any Pipeline argument, e.g. tracking_kernel): warm-up pass, then ``repeats`` timed passes."""
    from clusterbench.workloads.cupy.pipeline import Pipeline

    fps = []
    with Pipeline(params, frames, **pipe_kwargs) as pipe:
        kernel = pipe.frozen_kernel if params.pedestal == "frozen" else pipe.tracking_kernel
        pipe.compute_pedestal()
        pipe.run_pass(min(params.frames, 2 * params.streams * params.batch))
        for _ in range(repeats):
            pipe.reset_pedestal()
            out = pipe.run_pass(params.frames)
            fps.append(out.frames / out.wall_s)
    return {"median_fps": statistics.median(fps), "min_fps": min(fps), "max_fps": max(fps), "fps": fps,
            "kernel": kernel}


def _same(a, b) -> bool:
    return len(a) == len(b) and all(g.found == r.found and g.records.tobytes() == r.records.tobytes()
                                    for g, r in zip(a, b))


def modes(args, base, frames, link, report) -> int:
    """Both pedestal modes, every kernel, streams x batch; a table last."""
    from clusterbench.workloads.cupy import pipeline
    from clusterbench.workloads.cupy.pipeline import Pipeline

    configs = [("3x3", 3, 3000), ("9x9", 9, 1700)]
    check = 500
    kern = []
    fastest_tracking: dict[str, tuple[float, dict]] = {}
    for dtype in ("float32", "float64"):
        for label, k, cap in configs:
            p = base.replace(cluster=k, cap=cap, streams=1, batch=check, pedestal_dtype=dtype)
            # tracking: (kernel, tile rows); the first is the reference for byte comparison
            # None: the default tile height (pipeline.TRACK_TILE_ROWS)
            variants = [("graph", None), ("coop", None), ("flags", None)]
            if dtype == "float32":  # other tile heights only in f32, to keep the run short
                variants += [("coop", 16), ("coop", 40)]
            ref = None
            for tk, th in variants:
                pt = p.replace(pedestal="tracking")
                try:
                    with Pipeline(pt, frames, tracking_kernel=tk, track_tile_rows=th) as pipe:
                        pipe.compute_pedestal()
                        us = pipe.time_kernel(check, repeats=5)
                        pipe.reset_pedestal()
                        got = pipe.run_pass(check, collect=True).clusters
                except Exception as exc:  # report and go on: one failing variant must not hide the others
                    print(f"kernel {label} {dtype} tracking {tk} th{th}: FAILED: {exc}", flush=True)
                    kern.append({"config": label, "dtype": dtype, "mode": "tracking", "kernel": tk, "tile_rows": th,
                                 "error": str(exc)[:300]})
                    continue
                same = None
                if ref is None:
                    ref = got
                else:
                    same = _same(got, ref)
                row = {"config": label, "dtype": dtype, "mode": "tracking", "kernel": tk, "tile_rows": th,
                       "kernel_us_per_frame": us, "same_as_ref": same}
                kern.append(row)
                name = tk if th is None else f"{tk} th{th}"
                print(f"kernel {label} {dtype} tracking {name}: {us:.3f} µs/frame (1 stream, CUDA events, "
                      f"{check} frames per timing, median of 5)"
                      + ("" if same is None else ("; clusters identical to graph" if same else "; CLUSTERS DIFFER")),
                      flush=True)
                if dtype == "float32" and same is not False and (
                        label not in fastest_tracking or us < fastest_tracking[label][0]):
                    fastest_tracking[label] = (us, {"tracking_kernel": tk, "track_tile_rows": th})
            fref = None
            for fk in (pipeline.FROZEN_KERNELS if dtype == "float32" else ("twophase", "slide")):
                with Pipeline(p, frames, frozen_kernel=fk) as pipe:
                    pipe.compute_pedestal()
                    us = pipe.time_kernel(check, repeats=5)
                    got = pipe.run_pass(check, collect=True).clusters
                same = None
                if fref is None:
                    fref = got
                else:
                    same = _same(got, fref)
                kern.append({"config": label, "dtype": dtype, "mode": "frozen", "kernel": fk, "tile_rows": None,
                             "kernel_us_per_frame": us, "same_as_ref": same})
                print(f"kernel {label} {dtype} frozen {fk}: {us:.3f} µs/frame (1 stream, CUDA events, {check} frames "
                      f"per timing, median of 5)" + ("" if same is None else ("; clusters identical to the first kernel"
                                                                             if same else "; CLUSTERS DIFFER")), flush=True)
    report["kernel"] = kern

    combos = [(1, 200), (2, 200), (2, 500), (4, 200), (4, 500), (4, 1000), (8, 250)]
    if args.quick:
        combos = [(1, 500), (2, 200), (4, 200), (4, 500)]
    rows = []
    for label, k, cap in configs:
        p0 = base.replace(cluster=k, cap=cap)
        for mode in ("frozen", "tracking"):
            # frozen: the sweep runs twophase (the float64 default), then slide (the float32 default) at its best S x B
            kw = ({"frozen_kernel": "twophase"} if mode == "frozen"
                  else dict(fastest_tracking.get(label, (0.0, {"tracking_kernel": "graph"}))[1]))
            kname = kw["frozen_kernel"] if mode == "frozen" else kw.get("tracking_kernel", "graph")
            if kw.get("track_tile_rows"):
                kname += f" th{kw['track_tile_rows']}"
            best = None
            for streams, batch in combos:
                p = p0.replace(pedestal=mode, streams=streams, batch=batch)
                floor = floor_of(p, link)
                try:
                    r = sustained_fps(p, frames, 3, **kw)
                except Exception as exc:
                    print(f"sustained {label} {mode} s{streams} b{batch}: FAILED: {exc}", flush=True)
                    continue
                row = sustained_row(label, mode, kname, "copy", streams, batch, r, floor)
                rows.append(row)
                print(f"sustained {label} {mode} ({kname}) s{streams} b{batch}: {r['median_fps']:,.0f} FPS "
                      f"(min {r['min_fps']:,.0f}, max {r['max_fps']:,.0f}); {100 * row['of_link']:.1f} % of the "
                      f"link floor {1e6 / floor:,.0f} FPS", flush=True)
                if best is None or r["median_fps"] > best["median_fps"]:
                    best = row
            if best is not None:
                best["best"] = True
            if mode == "frozen" and best is not None:  # the sliding-window kernel at the same S x B
                p = p0.replace(pedestal=mode, streams=best["streams"], batch=best["batch"])
                r = sustained_fps(p, frames, 3, frozen_kernel="slide")
                rows.append(sustained_row(label, mode, "slide", "copy", best["streams"], best["batch"], r,
                                          floor_of(p, link), variant=True))
                print(f"sustained {label} frozen (slide) s{best['streams']} b{best['batch']}: {r['median_fps']:,.0f} FPS "
                      f"(min {r['min_fps']:,.0f}, max {r['max_fps']:,.0f})", flush=True)
            if mode == "tracking" and kname != "graph":  # the old tracking path at its old best, for contrast
                p = p0.replace(pedestal=mode, streams=4, batch=500)
                r = sustained_fps(p, frames, 3, tracking_kernel="graph")
                rows.append(sustained_row(label, mode, "graph", "copy", 4, 500, r, floor_of(p, link), baseline=True))
    report["sustained"] = rows

    print("\nkernel µs per frame (1 stream, CUDA events)")
    print(f"{'config':6} {'dtype':8} {'mode':9} {'kernel':10} {'µs':>7}  same as the first kernel of its mode (ref)")
    for r in kern:
        if "error" in r:
            print(f"{r['config']:6} {r['dtype']:8} {r['mode']:9} {r['kernel']:10} {'FAILED':>7}")
            continue
        name = r["kernel"] + (f" th{r['tile_rows']}" if r["mode"] == "tracking" and r["tile_rows"] else "")
        same = r.get("same_as_ref")
        print(f"{r['config']:6} {r['dtype']:8} {r['mode']:9} {name:10} {r['kernel_us_per_frame']:>7.3f}  "
              f"{'ref' if same is None else ('yes' if same else 'NO')}")
    print("\nsustained FPS, copy mode, best streams x batch per mode (median of 3 untraced passes)")
    print(f"{'config':6} {'mode':9} {'kernel':12} {'S':>2} {'B':>5} {'FPS':>10} {'link FPS':>10} {'% link':>7}")
    for r in rows:
        if r.get("best") or r.get("baseline") or r.get("variant"):
            print(f"{r['config']:6} {r['mode']:9} {r['kernel']:12} {r['streams']:>2} {r['batch']:>5} "
                  f"{r['median_fps']:>10,.0f} {r['link_fps']:>10,.0f} {100 * r['of_link']:>6.1f}%"
                  + ("  (old tracking path)" if r.get("baseline") else "")
                  + ("  (at the best S x B of the default)" if r.get("variant") else ""))
    return 0


def grid(args, base, frames, link, report) -> int:
    """Sustained FPS of the default kernels of both modes over a finer streams x batch grid, and the
    kernel µs per frame by CUDA events at batch 500 and 2000 (the probe's batch)."""
    from clusterbench.workloads.cupy.pipeline import Pipeline

    configs = [("3x3", 3, 3000), ("9x9", 9, 1700)]
    kern = []
    for label, k, cap in configs:
        for mode in ("tracking", "frozen"):
            for batch in (500, 2000):
                p = base.replace(cluster=k, cap=cap, streams=1, batch=batch, pedestal=mode)
                with Pipeline(p, frames) as pipe:
                    pipe.compute_pedestal()
                    us = pipe.time_kernel(batch, repeats=5)
                    kname = pipe.tracking_kernel if mode == "tracking" else pipe.frozen_kernel
                kern.append({"config": label, "mode": mode, "kernel": kname, "batch": batch, "kernel_us_per_frame": us})
                print(f"kernel {label} {mode} ({kname}) batch {batch}: {us:.3f} µs/frame (1 stream, CUDA events, "
                      f"median of 5 launches)", flush=True)
    report["kernel"] = kern
    combos = [(2, 200), (2, 500), (2, 1000), (3, 200), (3, 500), (4, 200), (4, 500), (4, 1000)]
    rows = []
    for label, k, cap in configs:
        p0 = base.replace(cluster=k, cap=cap)
        for mode in ("frozen", "tracking"):
            best = None
            for streams, batch in combos:
                floor = floor_of(p0.replace(streams=streams), link)
                r = sustained_fps(p0.replace(pedestal=mode, streams=streams, batch=batch), frames, 3)
                row = sustained_row(label, mode, r.pop("kernel"), "copy", streams, batch, r, floor)
                rows.append(row)
                print(f"sustained {label} {mode} s{streams} b{batch}: {r['median_fps']:,.0f} FPS (min {r['min_fps']:,.0f}, "
                      f"max {r['max_fps']:,.0f}); {100 * row['of_link']:.1f} % of the link floor {1e6 / floor:,.0f} FPS",
                      flush=True)
                if best is None or r["median_fps"] > best["median_fps"]:
                    best = row
            best["best"] = True
    report["sustained"] = rows
    print("\nbest streams x batch per mode, default kernels (median of 3 untraced passes)")
    print(f"{'config':6} {'mode':9} {'S':>2} {'B':>5} {'FPS':>10} {'link FPS':>10} {'% link':>7}")
    for r in rows:
        if r.get("best"):
            print(f"{r['config']:6} {r['mode']:9} {r['streams']:>2} {r['batch']:>5} {r['median_fps']:>10,.0f} "
                  f"{r['link_fps']:>10,.0f} {100 * r['of_link']:>6.1f}%")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=gpu_only(__doc__.splitlines()[0]))
    ap.add_argument("--frames", type=int, default=20000)
    ap.add_argument("--json", help="write all figures here")
    ap.add_argument("--sweep", action="store_true", help="also the wide streams x batch sweep, zerocopy and tracking")
    ap.add_argument("--quick", action="store_true", help="with --sweep or --modes: fewer stream/batch combinations")
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--modes", action="store_true",
                      help="both pedestal modes, every tracking and frozen kernel, streams x batch per mode")
    what.add_argument("--grid", action="store_true",
                      help="the default kernels only: kernel µs at batch 500 and 2000, sustained FPS over 8 streams x batch")
    args = ap.parse_args()

    started = start_gpu()
    if started is None:  # no CuPy or no GPU: one line and a hint, not a traceback
        return 1
    cp, gpu_name = started

    from clusterbench.workloads.cupy import build, pipeline
    from clusterbench.workloads.cupy.pipeline import Pipeline
    from clusterbench.workloads.cupy.run import measure_sustained
    from clusterbench.workloads.synth import build_frames

    report: dict = {"device": gpu_name, "cupy": cp.__version__, "frames": args.frames}
    t0 = time.perf_counter()
    base = WorkloadParams(frames=args.frames)
    frames = build_frames(base)
    print(f"data: {frames.source}, {len(frames.dark)} dark + {len(frames.pool)} pool frames "
          f"built in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    from clusterbench.workloads.cupy.link import measure_link

    link = measure_link(cp)[0]
    report["link"] = link.to_json()
    print(f"link: {link.text} ({link.method})")

    if args.modes or args.grid:
        rc = (modes if args.modes else grid)(args, base, frames, link, report)
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        return rc

    configs = [("3x3", 3, 3000), ("9x9", 9, 1700)]
    kernels = []
    # (frozen kernel, tile): "alt" is the two-phase kernel with the other classify tile height
    variants = [("strip", None), ("twophase", None), ("twophase", "alt"), ("slide", None)]
    for dtype in ("float32", "float64"):
        itemsize = 4 if dtype == "float32" else 8
        for label, k, cap in configs:
            p = base.replace(cluster=k, cap=cap, streams=1, pedestal_dtype=dtype, batch=2000)
            strip_clusters = None
            for kernel, tile in variants:
                th = build.classify_tile_rows(dtype)
                if tile == "alt":
                    th = 16 if th == 32 else 32
                    if build.classify_shared_bytes(th, k, itemsize) > build.STATIC_SMEM_MAX_BYTES:
                        continue
                with Pipeline(p, frames, frozen_kernel=kernel, tile_rows=th if tile else None) as pipe:
                    pipe.compute_pedestal()
                    # the default two-phase variant also tries other frame-group sizes (default first)
                    fpbs = [pipe.fpb] + ([2, 8] if kernel == "twophase" and tile is None else [])
                    for fpb in fpbs:
                        pipe.fpb = fpb
                        us = pipe.time_kernel(p.batch, repeats=7)
                        got = pipe.run_pass(CHECK_FRAMES, collect=True).clusters
                        same = None
                        if kernel == "strip":
                            strip_clusters = got
                        else:
                            same = len(got) == len(strip_clusters) and all(
                                g.found == r.found and g.records.tobytes() == r.records.tobytes()
                                for g, r in zip(got, strip_clusters))
                        name = kernel if kernel in ("strip", "slide") else f"{kernel} th{th} fpb{fpb or 'auto'}"
                        kernels.append({"config": label, "dtype": dtype, "mode": "frozen", "kernel": kernel,
                                        "tile_rows": None if kernel in ("strip", "slide") else th,
                                        "frames_per_block": None if kernel == "strip" else fpb,
                                        "default": tile is None and fpb == fpbs[0],
                                        "kernel_us_per_frame": us, "same_as_strip": same})
                        check = "" if same is None else ("; clusters identical to strip" if same
                                                         else "; CLUSTERS DIFFER FROM STRIP")
                        print(f"kernel {label} {dtype} frozen {name}: {us:.3f} µs/frame (1 stream, CUDA events, "
                              f"{p.batch} frames per timing, median of 7){check}", flush=True)
            if args.sweep:
                pt = p.replace(pedestal="tracking", batch=500)
                with Pipeline(pt, frames) as pipe:
                    pipe.compute_pedestal()
                    us = pipe.time_kernel(pt.batch, repeats=5)
                kernels.append({"config": label, "dtype": dtype, "mode": "tracking", "kernel": "tracking",
                                "tile_rows": None, "kernel_us_per_frame": us, "same_as_strip": None})
                print(f"kernel {label} {dtype} tracking: {us:.3f} µs/frame (1 stream, CUDA events, 500 frames per timing)")
    report["kernel"] = kernels

    sustained = []
    best_before = {"3x3": (2, 200), "9x9": (4, 200)}  # docs/workload.md: the best copy-mode S x B
    for label, k, cap in configs:
        p0 = base.replace(cluster=k, cap=cap)
        streams, batch = best_before[label]
        floor_copy = floor_of(p0.replace(streams=streams), link)
        for kernel in pipeline.FROZEN_KERNELS:
            p = p0.replace(streams=streams, batch=batch)
            r = measure_sustained(p, repeats=3, frames=frames, frozen_kernel=kernel)
            row = sustained_row(label, "frozen", kernel, "copy", streams, batch, fps_of(r), floor_copy)
            sustained.append(row)
            print(f"sustained {label} copy {kernel} s{streams} b{batch}: {r.median:,.0f} FPS (min {r.min:,.0f}, "
                  f"max {r.max:,.0f}); link floor {floor_copy:.2f} µs = {1e6 / floor_copy:,.0f} FPS; "
                  f"{100 * row['of_link']:.1f} % of link", flush=True)
    if args.sweep:
        sustained += sweep(args, base, frames, link)
    report["sustained"] = sustained

    print("\nsummary (FPS median of 3 untraced passes; sweep rows: best streams x batch per config)")
    print(f"{'config':6} {'transfer':9} {'kernel':9} {'S':>2} {'B':>5} {'FPS':>10} {'link FPS':>10} {'% link':>7}")
    for row in sustained:
        if not row.get("sweep") or row.get("best") or row["mode"] == "tracking":
            print(f"{row['config']:6} {row['transfer']:9} {row['kernel']:9} {row['streams']:>2} {row['batch']:>5} "
                  f"{row['median_fps']:>10,.0f} {row['link_fps']:>10,.0f} {100 * row['of_link']:>6.1f}%")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
