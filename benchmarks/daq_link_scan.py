"""What one more byte of H2D costs the zoo's daq_loop per frame, untraced, at 1, 2 and 4 streams: the link's
delay of the delay test (docs/probe.md, "The untraced frame") without the injection library.

    python3 benchmarks/daq_link_scan.py ZOO_DIR [--streams 1 2 4] [--d2h 120000 4] [--reps 3] [--inject] [--json]

ZOO_DIR holds daq_loop, built by ``bash tests/zoo/build.sh ZOO_DIR daq_loop``. For each stream count and D2H
size, daq_loop runs (``--no-timing``, 5,000 frames) at H2D sizes from 320,000 to 1,000,000 bytes, ``--reps``
times each in turn; the frame time is 1 / its printed rate. A least-squares line through every run gives the
frame's microseconds per extra byte; its inverse is the rate at which the extra bytes cost the frame (GB/s).
Where the link binds alone, that rate is the link's; where a D2H of another frame overlaps the H2D, it is
the link's rate with both directions at once; where the link has slack, the line is flatter (a higher
rate) or flat. Beside it, the unit's pinned link as a probe measures it (H2D alone, D2H alone, both at
once; ``clusterbench.workloads.cupy.link.measure_link``, where CuPy and a GPU are there), and what the
delay test's slope would read for a copy sized at the H2D-alone rate: that rate over the scan's.

GPU only: needs an NVIDIA GPU (daq_loop runs on it). Exit codes: 0 done; 1 no GPU, or daq_loop failed;
2 a bad argument (ZOO_DIR without daq_loop).

With --inject, the same fit for the delay test's own link delay: daq_loop at its 320,000 bytes, with the
injection library (clusterbench/run/native/cb_inject.cpp, built as probe builds it) adding an H2D copy of
B bytes in the frame's stream at each zoo_calib launch (CB_INJECT_LINK_BYTES), B from 4 bytes (the test's
baseline copy) to 524,288, subscribed to the runtime callback domain alone (as probe --what-binds is for a
program that calls no driver API itself); the frame time bare, with the library and no delay, and with a
copy of 4 bytes, against the line through the others, gives what the library and a copy cost the frame
beyond its bytes.

The spread of a slope is half the difference of the slopes through the runs of the first and the second
half of the sizes (a line through each half): how straight the frame's growth is.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SIZES = (320_000, 400_000, 480_000, 640_000, 826_000, 1_000_000)
INJECT_SIZES = (4, 65_536, 131_072, 262_144, 393_216, 524_288)
RATE = re.compile(r"^rate: ([0-9.]+) frames/s", re.M)


def frame_us(binary: Path, streams: int, h2d: int, d2h: int, frames: int, env: dict[str, str] | None = None) -> float:
    """daq_loop's frame time (µs) at these sizes: 1e6 over its printed rate."""
    out = subprocess.run([str(binary), "--frames", str(frames), "--streams", str(streams), "--h2d-bytes", str(h2d),
                          "--d2h-bytes", str(d2h), "--no-timing"], capture_output=True, text=True, timeout=120,
                         env=None if env is None else {**os.environ, **env})  # fmt: skip
    m = RATE.search(out.stdout)
    if out.returncode != 0 or m is None:
        print(f"Error: daq_loop failed (exit {out.returncode}): {(out.stderr.strip() or out.stdout.strip())[-300:]}",
              file=sys.stderr)
        print("Hint: run it by hand with the same arguments to see why", file=sys.stderr)
        raise SystemExit(1)
    return 1e6 / float(m.group(1))


def line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares slope and intercept of ys over xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return slope, my - slope * mx


def unit_link() -> dict[str, float] | None:
    """The unit's pinned link rates (GB/s), measured as a probe does; None without CuPy or a GPU."""
    try:
        import cupy as cp

        from clusterbench.workloads.cupy.link import measure_link

        rates, _ = measure_link(cp)
    except Exception as exc:  # noqa: BLE001 - any failure means: not measured here
        print(f"the unit's link: not measured ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None
    return {"h2d": rates.h2d.gbps, "d2h": rates.d2h.gbps, "duplex_h2d": rates.duplex_h2d.gbps, "duplex_d2h": rates.duplex_d2h.gbps}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("zoo", type=Path, help="the folder that holds the built daq_loop")
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--d2h", type=int, nargs="+", default=[120_000, 4], help="D2H bytes per frame (default 120000 4)")
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="H2D bytes per frame")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--frames", type=int, default=5000)
    ap.add_argument("--inject", action="store_true", help="also scan the injection library's extra H2D copy")
    ap.add_argument("--json", action="store_true", help="print the runs and fits as JSON instead of a table")
    args = ap.parse_args()
    smi = shutil.which("nvidia-smi")
    if smi is None or subprocess.run([smi, "-L"], capture_output=True).returncode != 0:
        print("Error: daq_link_scan.py needs an NVIDIA GPU: no GPU or driver (nvidia-smi -L failed)", file=sys.stderr)
        print("Hint: run it on the GPU machine, after: bash tests/zoo/build.sh ZOO_DIR daq_loop", file=sys.stderr)
        return 1
    binary = args.zoo / "daq_loop"
    if not binary.is_file():
        print(f"Error: {binary} not found", file=sys.stderr)
        print(f"Hint: build it with: bash tests/zoo/build.sh {args.zoo} daq_loop", file=sys.stderr)
        return 2
    if len(set(args.sizes)) < 4 or args.reps < 1 or min(args.sizes) < 4 or min(args.d2h) < 4:
        print("Error: --sizes needs at least 4 different sizes, every size and --d2h at least 4 bytes, and --reps "
              "at least 1", file=sys.stderr)  # fmt: skip
        print("Hint: leave them out for the defaults", file=sys.stderr)
        return 2
    link = unit_link()
    sizes = sorted(set(args.sizes))
    fits, injected = [], []
    if args.inject:
        from clusterbench.run import inject

        lib = inject.build(inject.INJECT_LIB)
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp) / "report.json"
            for s in args.streams:
                # the runtime callback domain alone, as probe --what-binds subscribes for a program that
                # calls no driver API itself (daq_loop): the library's own cost is then a few per cent
                runs = [(b, frame_us(binary, s, SIZES[0], args.d2h[0], args.frames,
                                     inject.inject_env(lib, report, "kernel:zoo_calib", link_bytes=b, domains="runtime")))
                        for _ in range(args.reps) for b in INJECT_SIZES]  # fmt: skip
                bare = [frame_us(binary, s, SIZES[0], args.d2h[0], args.frames) for _ in range(args.reps)]
                quiet = [frame_us(binary, s, SIZES[0], args.d2h[0], args.frames,
                                  inject.inject_env(lib, report, "kernel:zoo_calib", domains="runtime")) for _ in range(args.reps)]
                big = [(b, f) for b, f in runs if b > INJECT_SIZES[0]]
                slope, icept = line([b for b, _ in big], [f for _, f in big])
                base = statistics.median(f for b, f in runs if b == INJECT_SIZES[0])
                fit = {"streams": s, "d2h_bytes": args.d2h[0], "us_per_mb": slope * 1e6, "gbps": (1e-3 / slope) if slope > 0 else None,
                       "frame_us_bare": statistics.median(bare), "frame_us_library": statistics.median(quiet), "frame_us_copy4": base, "step_us": icept - base,
                       "frame_us_at": {str(b): statistics.median(f for x, f in runs if x == b) for b in INJECT_SIZES}, "runs": runs}  # fmt: skip
                injected.append(fit)
                print(f"injected copy, streams {s}: done", file=sys.stderr)
    for d2h in args.d2h:
        for s in args.streams:
            runs = [(b, frame_us(binary, s, b, d2h, args.frames)) for _ in range(args.reps) for b in sizes]
            slope, icept = line([b for b, _ in runs], [f for _, f in runs])
            half = len(sizes) // 2
            lo = [(b, f) for b, f in runs if b in sizes[: half + 1]]
            hi = [(b, f) for b, f in runs if b in sizes[half:]]
            s_lo, s_hi = line([b for b, _ in lo], [f for _, f in lo])[0], line([b for b, _ in hi], [f for _, f in hi])[0]
            fit = {"streams": s, "d2h_bytes": d2h, "us_per_mb": slope * 1e6, "spread_us_per_mb": abs(s_hi - s_lo) / 2 * 1e6,
                   "gbps": (1e-3 / slope) if slope > 0 else None, "frame_us_at": {str(b): statistics.median(f for x, f in runs if x == b) for b in sizes},
                   "intercept_us": icept, "runs": runs}  # fmt: skip
            if link is not None and slope > 0:
                fit["delay_slope_at_h2d_rate"] = link["h2d"] / fit["gbps"]
            fits.append(fit)
            print(f"streams {s} d2h {d2h}: done", file=sys.stderr)
    if args.json:
        print(json.dumps({"unit_link_gbps": link, "fits": fits, "injected": injected}, indent=1))
        return 0
    if link is not None:
        print(f"the unit's link: H2D {link['h2d']:.2f} GB/s alone, D2H {link['d2h']:.2f} GB/s alone; both at once "
              f"{link['duplex_h2d']:.2f} / {link['duplex_d2h']:.2f} GB/s")  # fmt: skip
    print(f"{'streams':>7} {'D2H B':>7} {'frame µs at ' + str(sizes[0]) + ' B':>22} {'at ' + str(sizes[-1]) + ' B':>12} "
          f"{'µs/MB':>7} {'±':>5} {'GB/s':>6} {'slope at H2D rate':>18}")  # fmt: skip
    for f in fits:
        gb = "-" if f["gbps"] is None else f"{f['gbps']:.2f}"
        ds = f.get("delay_slope_at_h2d_rate")
        print(f"{f['streams']:>7} {f['d2h_bytes']:>7} {f['frame_us_at'][str(sizes[0])]:>22.2f} {f['frame_us_at'][str(sizes[-1])]:>12.2f} "
              f"{f['us_per_mb']:>7.2f} {f['spread_us_per_mb']:>5.2f} {gb:>6} {'-' if ds is None else f'{ds:.2f}':>18}")  # fmt: skip
    if injected:
        print("the injection library's extra H2D copy at each zoo_calib launch (daq_loop at 320,000 bytes):")
        print(f"{'streams':>7} {'bare µs':>8} {'library µs':>10} {'copy 4 B µs':>12} {'line at 0 B':>12} {'step µs':>8} "
              f"{'µs/MB':>7} {'GB/s':>6}")  # fmt: skip
        for f in injected:
            gb = "-" if f["gbps"] is None else f"{f['gbps']:.2f}"
            print(f"{f['streams']:>7} {f['frame_us_bare']:>8.2f} {f['frame_us_library']:>10.2f} {f['frame_us_copy4']:>12.2f} "
                  f"{f['frame_us_copy4'] + f['step_us']:>12.2f} {f['step_us']:>8.2f} {f['us_per_mb']:>7.2f} {gb:>6}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
