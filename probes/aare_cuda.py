"""aare's ClusterFinderCUDA as a clusterbench workload (docs/workloads.md, docs/aare-cuda.md).

    python probes/aare_cuda.py --params-json JSON --result PATH [--mode pass|sustained] [--repeat R]

configs/aare_cuda.toml runs it as ``workload = "command"``. It takes the same parameter record
as clusterbench's own finder and builds the same frames (clusterbench.workloads.synth: the
synthetic generator with the config's seed, occupancy and pool, or the ``data`` .npy), then:

1. creates the finder: cluster -> cluster_size (k, k), cap -> max_clusters_per_frame,
   streams -> n_streams, nsigma -> n_sigma, pedestal_dtype -> the cluster value type;
2. warms up, outside every range: the pedestal, then two full batches of dark frames through
   both of aare's output slots (its pinned output buffers and event pools grow on first use);
3. pass mode: clears the pedestal and pushes the dark frames again inside the NVTX range
   ``clusterbench:pedestal`` (so the warm-up leaves no trace in it), then one batched pass of
   ``frames`` frames through ``submit_batch``/``collect`` (two batches in flight) inside
   ``clusterbench:pass frames=N``; sustained mode: ``repeat`` such passes untraced, the pedestal
   pushed afresh (untimed) before each;
4. writes the result record to ``--result``, with aare's own kernel time per frame from its CUDA
   events as ``extra.kernel_us_per_frame``, which probe sets against the trace's kernel bar.

What it adds over probing aare's own harness as it is (docs/aare-cuda.md, "aare as it is"): the same
frames and parameters as clusterbench's finder, config for config, so that compare can put the two
side by side; a pass of exactly the config's frames, streams and batch; and the kernel-time check.

Input: the data frames sit in one registered (pinned) host array of pool + batch frames, frame g
of the pass at ``ring[g % pool]``, so every batch is one contiguous slice and the pass has no
host-side copy: the same footing as clusterbench's pipeline, which copies from a pinned pool.

aare is the user's own install (docs/aare-cuda.md, "Getting aare"): found where ``import aare`` works, or in
the folder $CLUSTERBENCH_AARE_PYTHON names.

Exit codes: 0 success; 1 aare or the GPU missing; 2 a parameter aare cannot honour (a message
says which). aare's own CUDA errors end the process with its exit status 1 and its message.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AARE_ENV = "CLUSTERBENCH_AARE_PYTHON"
# aare's Pedestal has a fixed sample count of 1000 and its kernel divides the sums by 1000.
AARE_PEDESTAL_SAMPLES = 1000
AARE_CLUSTER_SIZES = (3, 5, 7, 9)
FINDER = "aare ClusterFinderCUDA (feature/cuda_clusterfinder 5922c73)"
NEEDS = "needs aare with its CUDA module (installed by aare's own instructions) and an NVIDIA GPU"


class Refused(Exception):
    """A parameter aare cannot honour (exit 2)."""


def _where(path: Path) -> str:
    """``path`` relative to the checkout ("<checkout>/build/...") when it lies inside it: result records
    are committed, and a machine's absolute paths do not belong in them."""
    root = Path(__file__).resolve().parent.parent
    try:
        return "<checkout>/" + str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


def check_params(p) -> None:
    if p.cluster not in AARE_CLUSTER_SIZES:
        raise Refused(f"cluster {p.cluster}: aare's ClusterFinderCUDA has {', '.join(map(str, AARE_CLUSTER_SIZES))} only")
    if p.pedestal != "tracking":
        raise Refused(f"pedestal {p.pedestal!r}: aare's CUDA pedestal always tracks (every stream updates its own "
                      "float32 copy after each frame); set pedestal = \"tracking\"")
    if p.transfer != "copy":
        raise Refused(f"transfer {p.transfer!r}: aare copies every frame and its whole output slot; use \"copy\"")
    if p.pedestal_frames != AARE_PEDESTAL_SAMPLES:
        raise Refused(f"pedestal_frames {p.pedestal_frames}: aare's pedestal keeps exactly {AARE_PEDESTAL_SAMPLES} "
                      "samples and its kernel divides by that number; use pedestal_frames = 1000")


def import_aare():
    for extra in (os.environ.get(AARE_ENV),):
        try:
            import aare  # noqa: F401

            break
        except ImportError:
            if extra and Path(extra).is_dir() and extra not in sys.path:
                sys.path.insert(0, extra)
    import aare

    if not aare._cuda_available():
        raise ImportError(f"{aare.__file__} was built without its CUDA module (_aare_cuda)")
    return aare


def nvtx_ranges():
    """(push, pop) for NVTX ranges: CuPy's NVTX, else the nvtx package; None when neither exists."""
    try:
        from cupy.cuda import nvtx as cnvtx

        return cnvtx.RangePush, cnvtx.RangePop
    except Exception:
        pass
    try:
        import nvtx

        return (lambda text: nvtx.push_range(text)), (lambda: nvtx.pop_range())
    except Exception:
        return None


def make_ring(pool, batch: int):
    """pool + batch frames with ring[j] = pool[j % len(pool)]: any batch of the cyclic pass is one slice."""
    import numpy as np

    n = len(pool)
    ring = np.empty((n + batch,) + pool.shape[1:], np.uint16)
    for j in range(0, n + batch, n):
        m = min(n, n + batch - j)
        ring[j:j + m] = pool[:m]
    return ring


def one_pass(cf, ring, pool_n: int, frames: int, batch: int, cap: int) -> tuple[float, int, int]:
    """One batched pass over ``frames`` frames, two batches in flight. (seconds, clusters, frames at the cap)."""
    found = at_cap = 0
    t0 = time.perf_counter()
    starts = range(0, frames, batch)
    tok = None
    for start in starts:
        n = min(batch, frames - start)
        off = start % pool_n
        nxt = cf.submit_batch(ring[off:off + n], first_frame=start)
        if tok is not None:
            for cv in cf.collect(tok):
                found += cv.size
                at_cap += cv.size >= cap
        tok = nxt
    for cv in cf.collect(tok):
        found += cv.size
        at_cap += cv.size >= cap
    return time.perf_counter() - t0, found, at_cap


def push_pedestal(cf, dark) -> float:
    t0 = time.perf_counter()
    cf.clear_pedestal()
    for f in dark:
        cf.push_pedestal_frame(f)
    return time.perf_counter() - t0


def run(args) -> dict:
    import numpy as np

    from clusterbench.model.workload import WorkloadResult
    from clusterbench.model.params import WorkloadParams
    from clusterbench.workloads.synth import build_frames

    params = WorkloadParams.from_json(json.loads(args.params_json))
    check_params(params)
    aare = import_aare()
    ranges = nvtx_ranges()
    if args.mode == "pass" and ranges is None:
        print("aare_cuda: no NVTX library (CuPy or the nvtx package): the pass range cannot be pushed",
              file=sys.stderr)
    push, pop = ranges if ranges is not None else ((lambda text: None), (lambda: None))

    fs = build_frames(params)  # the same frames as clusterbench's own finder for these parameters
    dark = np.ascontiguousarray(fs.dark)
    ring = make_ring(np.asarray(fs.pool), params.batch)
    value_type = np.float32 if params.pedestal_dtype == "float32" else np.float64
    cf = aare.ClusterFinderCUDA((params.rows, params.cols), cluster_size=(params.cluster, params.cluster),
                                n_sigma=params.nsigma, dtype=value_type, max_clusters_per_frame=params.cap,
                                n_streams=params.streams)
    cf.register_input_buffer(ring)
    # the warm-up batches are pageable copies of dark frames: they are not timed
    warm = np.ascontiguousarray(dark[np.resize(np.arange(len(dark)), 2 * params.batch)])
    push_pedestal(cf, dark)
    t1 = cf.submit_batch(warm[:params.batch], first_frame=0)
    t2 = cf.submit_batch(warm[params.batch:], first_frame=params.batch)
    cf.collect(t1)
    cf.collect(t2)
    del warm

    seconds: list[float] = []
    pedestal_s = None
    found = at_cap = 0
    if args.mode == "pass":
        push("clusterbench:pedestal")
        pedestal_s = push_pedestal(cf, dark)
        pop()
        cf.reset_timers()
        push(f"clusterbench:pass frames={params.frames}")
        s, found, at_cap = one_pass(cf, ring, len(fs.pool), params.frames, params.batch, params.cap)
        pop()
        seconds.append(s)
    else:
        for _ in range(args.repeat):
            push_pedestal(cf, dark)
            cf.reset_timers()
            s, found, at_cap = one_pass(cf, ring, len(fs.pool), params.frames, params.batch, params.cap)
            seconds.append(s)
    kernel_ms = cf.avg_kernel_time_ms()
    cf.unregister_input_buffer()
    result = WorkloadResult(
        mode=args.mode, frames=params.frames, pass_s=tuple(seconds), clusters_found=int(found),
        clusters_dropped=None,  # aare drops clusters beyond its cap silently and does not count them
        pedestal_s=pedestal_s, finder=FINDER, data_source=fs.source,
        extra={"aare": _where(Path(aare.__file__).parent), "class": type(cf).__name__,
               "frames_at_cap": int(at_cap),  # frames whose count reached the cap: possibly truncated
               # aare's own kernel time per frame (CUDA-event pairs): probe sets it against the kernel bar
               "kernel_us_per_frame": kernel_ms * 1000.0,
               "input": f"registered pinned ring of {len(ring)} frames (pool {len(fs.pool)} + batch "
                        f"{params.batch}); no host copy inside the pass",
               "warm_up": f"pedestal, then {2 * params.batch} dark frames through both output slots; "
                          "the pedestal is pushed afresh before every timed pass",
               "params": params.to_json()})
    return result.to_json()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="probes/aare_cuda.py", description=" ".join(__doc__.split("\n\n")[0].split())
                                 + f" GPU only: {NEEDS}.")
    ap.add_argument("--params-json", required=True, help="the config's parameters ({params_json})")
    ap.add_argument("--result", required=True, help="where the result record goes ({result})")
    ap.add_argument("--mode", choices=("pass", "sustained"), default="pass")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    try:
        doc = run(args)
    except Refused as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"Error: probes/aare_cuda.py {NEEDS}: aare is not importable: {exc}", file=sys.stderr)
        print(f"Hint: install aare with its CUDA cluster finder (https://github.com/slsdetectorgroup/aare, branch "
              f"feature/cuda_clusterfinder) where this Python imports it, or set {AARE_ENV} to the folder that holds "
              "its built aare package (docs/aare-cuda.md)", file=sys.stderr)
        return 1
    except Exception as exc:  # clusterbench's own errors (bad params, data file) carry a message
        from clusterbench.errors import ClusterbenchError

        if not isinstance(exc, ClusterbenchError):
            raise
        print(f"Error: {exc}", file=sys.stderr)
        return exc.exit_code
    Path(args.result).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
