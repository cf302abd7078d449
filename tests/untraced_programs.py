"""Stand-ins for clusterbench's native tools, for the CPU tests of the delay test and probe --what-binds:
a program that writes what the injection library would (its frame a known function of the delays asked for),
and a latency program that writes a hand-written report (tests/data/untraced)."""

from __future__ import annotations

import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "untraced"

# A stand-in for a program run with the injection library: 30 frames (FAKE_MARKS); its frame is 20 µs
# (FAKE_PERIOD) plus the host delay times HOST_SLOPE plus the GPU delay times GPU_SLOPE (the link adds
# nothing); it prints its rate. Without CB_INJECT_OUT (no library) its frame is 0.1 µs shorter. With
# FAKE_SYNC_NS it makes one cudaStreamSynchronize a frame of that many ns, in its waits.
FAKE = r'''
import json, os, sys
out = os.environ.get("CB_INJECT_OUT")
host = float(os.environ.get("CB_INJECT_HOST_US", "0") or 0)
gpu = os.environ.get("CB_INJECT_GPU_US")
link = os.environ.get("CB_INJECT_LINK_BYTES")
refuse_gpu = os.environ.get("FAKE_REFUSE_GPU") == "1"
hs, gs = float(os.environ.get("HOST_SLOPE", "1")), float(os.environ.get("GPU_SLOPE", "0"))
base = float(os.environ.get("FAKE_PERIOD", "20"))
period = base + hs * host + (0 if (gpu is None or refuse_gpu) else gs * float(gpu)) if out else base - 0.1
print(f"rate: {1e6 / period:.3f} frames/s")
if out:
    n = int(os.environ.get("FAKE_MARKS", "30"))
    t = [int(1000 + i * period * 1000) for i in range(n)]
    zero = [0] * n
    delay = [int(i * host * 1000) for i in range(n)]
    sync = int(os.environ.get("FAKE_SYNC_NS", "0"))
    wait = [i * sync for i in range(n)]
    w = int(os.environ["CB_INJECT_WARMUP"])
    loop = [] if not sync else [{"api": "cudaStreamSynchronize", "domain": "runtime", "category": "wait",
                                 "n": n - 1 - w, "total_ns": (n - 1 - w) * sync, "max_ns": sync}]
    mark = lambda i: {"t_ns": t[i], "call_ns": wait[i], "wait_ns": wait[i], "delay_ns": delay[i]}
    rep = {"schema": "clusterbench.inject-report", "version": 1, "pid": os.getpid(), "argv": sys.argv,
           "settings": {"mark": os.environ["CB_INJECT_MARK"], "warmup": int(os.environ["CB_INJECT_WARMUP"]),
                        "max_marks": 100000, "runtime": True, "driver": True, "host_us": host,
                        "gpu_us": None if gpu is None else float(gpu), "link_bytes": None if link is None else int(link)},
           "error": None, "ctx_flags": 1,
           "delays": {"gpu_applied": 0 if (gpu is None or refuse_gpu) else n, "gpu_skipped_capturing": 0,
                      "link_applied": 0 if link is None else n, "link_skipped_capturing": 0, "failed": 0,
                      "not_tested": "no stream to delay" if refuse_gpu and gpu is not None else None},
           "threads": [{"tid": 5, "name": "fake", "calls": n, "call_ns": wait[-1], "wait_ns": wait[-1], "delay_ns": delay[-1],
                        "first_call_ns": 0, "last_call_ns": t[-1], "after_wait_ns": 0, "after_wait_n": 0,
                        "marks_total": n, "warm_mark": mark(int(os.environ["CB_INJECT_WARMUP"])), "last_mark": mark(n - 1),
                        "marks": {"t_ns": t, "call_ns": wait, "wait_ns": wait, "delay_ns": delay},
                        "apis": loop, "loop_apis": loop}]}
    open(out, "w").write(json.dumps(rep))
'''



# A stand-in for cb_latency: writes the hand-written untraced report (or, under the stand-in nsys, the
# nsys one) to --out, with the --seq and --sched it was given; with FAKE_IDLE_SYNC_NS, as version 2 with a
# synchronize with nothing to wait for of that many ns.
LATENCY = r'''
import json, os, sys
args = sys.argv[1:]
out = args[args.index("--out") + 1]
name = "latency_nsys.json" if os.environ.get("FAKE_NSYS_TRACED") == "1" else "latency_untraced.json"
doc = json.load(open(os.path.join(DATA, name)))
if "--seq" in args:
    doc["seq"] = args[args.index("--seq") + 1]
doc["sched"] = args[args.index("--sched") + 1]
if os.environ.get("FAKE_IDLE_SYNC_NS"):
    doc["version"] = 2
    doc["idle_sync"] = {"call_ns": [int(os.environ["FAKE_IDLE_SYNC_NS"])] * 3}
open(out, "w").write(json.dumps(doc))
'''


def write_fake_program(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fake_injected.py"
    path.write_text(FAKE)
    return path


def write_fake_latency(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "cb_latency"
    path.write_text(f"#!{sys.executable}\nDATA = {str(DATA)!r}\n" + LATENCY)
    path.chmod(0o755)
    return path
