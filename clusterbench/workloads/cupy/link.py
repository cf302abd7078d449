"""The unit's pinned link, measured in a few hundred ms: H2D alone, D2H alone, both at once.

    python -m clusterbench.workloads.cupy.link --result PATH [--go-file FILE]

The probe starts this process while its guards sample the GPU (so that the interpreter and CuPy are imported
by then, without a CUDA context that the guards would see as another compute process), and writes into
``--go-file`` a JSON object ``{"go": true, "uuid": "GPU-...", "cpus": [...], "wait_measure": true}`` once the
guards passed: the process then makes only that GPU visible, pins itself to those CPUs, makes its context and
buffers, and (with ``wait_measure``) waits for ``<go-file>.measure`` before the timed copies, which the probe
writes once its own host work is done (drawing the configs' frames: 3.3 s of one core of the development
machine and 360 MB written, for make run's; the guards take 1 s, so the copies could run beside it. One H100
unit's second probe read its link 8 to 24 % below its first, with the same sustained FPS). It measures
(:func:`measure_link`):

- two pinned host buffers and two device buffers of LINK_BYTES each, every page touched;
- per sample, COPIES copies back to back on one stream, timed by CUDA events around them: H2D alone, then D2H
  alone, then both at once (H2D on one stream and D2H on another, issued together, each direction timed by its
  own events), SAMPLES samples each, after one warm-up copy each way;
- right after the copies, what NVML says of the link now (PCIe generation and width: an idle link trains down)
  and of the clocks, and on which NUMA nodes the pinned buffers' pages sit (/proc/self/maps and
  /proc/self/numa_maps; get_mempolicy where numa_maps shows no pages).

It writes one JSON object to ``--result`` (:func:`main`); anything else written to the go file stops it before
it measures. Exit codes: 0 success; 1 no GPU / CUDA failure; 2 bad input.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from clusterbench.errors import ClusterbenchError, EnvironmentFailure, InputError
from clusterbench.model.unit import LinkRate, LinkRates, buffer_nodes, rate_of, sysfs_bus_id
from clusterbench.workloads.protocol import child_error

# 32 MiB a copy: long enough (about 0.6 ms at 55 GB/s) that the launch and event costs are a small part of it,
# short enough that 3 x 5 samples x 4 copies take about 0.1 s of link time.
LINK_BYTES = 32 * 1024 * 1024
COPIES = 4
SAMPLES = 5
LINK_SCHEMA = "clusterbench.link-result"
# The link child's result. History: 1: first version.
LINK_VERSION = 1
GO_POLL_S = 0.002
METHOD = (f"{COPIES} pinned copies of {LINK_BYTES // (1024 * 1024)} MiB back to back per sample, CUDA events, "
          f"{SAMPLES} samples each: H2D alone, D2H alone, both at once on two streams")


def _stopped(text: str) -> InputError:
    return InputError(f"the probe asked this process to stop before it measured ({text[:80]})",
                      hint="nothing to do: the probe says why")


def _gone() -> InputError:
    return InputError("the probe that started this process is gone", hint="run it again")


def wait_for_unit_go(path: str | None, poll_s: float = GO_POLL_S) -> dict[str, Any]:
    """The probe's go (a JSON object with "go": true); {} without a go file. InputError when it writes
    anything else, or when the probe is gone."""
    if not path:
        return {}
    parent = os.getppid()
    go = Path(path)
    while True:
        try:
            text = go.read_text().strip()
        except FileNotFoundError:
            if os.getppid() != parent:
                raise _gone() from None
            time.sleep(poll_s)
            continue
        if not text:
            time.sleep(poll_s)
            continue
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and doc.get("go") is True:
            return doc
        raise _stopped(text)


MEASURE_SUFFIX = ".measure"


def wait_for_unit_measure(path: str | None, poll_s: float = GO_POLL_S) -> None:
    """Wait until the probe writes ``<path>.measure`` (it does once nothing else of its own runs on the host:
    the frames drawn); at once without a go file. InputError when the probe writes a stop into the go file
    meanwhile, or when the probe is gone."""
    if not path:
        return
    parent = os.getppid()
    go, measure = Path(path), Path(f"{path}{MEASURE_SUFFIX}")
    while not measure.exists():
        try:
            text = go.read_text().strip()
        except FileNotFoundError:
            text = ""
        if text.startswith("stop"):
            raise _stopped(text)
        if os.getppid() != parent:
            raise _gone()
        time.sleep(poll_s)


def measure_link(cp: Any, nbytes: int = LINK_BYTES, copies: int = COPIES, samples: int = SAMPLES,
                 ready: Callable[[], None] | None = None) -> tuple[LinkRates, tuple[int, ...]]:
    """The four rates (LinkRates) and the pinned buffers' host addresses. ``ready``: called once the buffers
    are set up and warmed, right before the timed copies (the probe's word to measure)."""
    from clusterbench.workloads.cupy.pipeline import HostBuffer

    rt = cp.cuda.runtime
    h_in, h_out = HostBuffer(nbytes), HostBuffer(nbytes)
    try:
        h_in.array[:] = 1  # every page touched: where the pages sit is then settled
        h_out.array[:] = 0
        d_in, d_out = cp.empty(nbytes, cp.uint8), cp.empty(nbytes, cp.uint8)
        s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)

        def h2d(stream: Any) -> None:
            rt.memcpyAsync(d_in.data.ptr, h_in.ptr, nbytes, 1, stream.ptr)

        def d2h(stream: Any) -> None:
            rt.memcpyAsync(h_out.ptr, d_out.data.ptr, nbytes, 2, stream.ptr)

        def timed(jobs: list[tuple[Any, Any]]) -> list[float]:
            """Seconds each (copy, stream) job's ``copies`` copies took, all issued together."""
            marks = []
            for fn, stream in jobs:
                start, end = cp.cuda.Event(), cp.cuda.Event()
                start.record(stream)
                marks.append((fn, stream, start, end))
            for _ in range(copies):
                for fn, stream, _, _ in marks:
                    fn(stream)
            for _, stream, _, end in marks:
                end.record(stream)
            for _, _, _, end in marks:
                end.synchronize()
            return [cp.cuda.get_elapsed_time(start, end) / 1e3 for _, _, start, end in marks]

        h2d(s1)
        d2h(s2)
        cp.cuda.Device().synchronize()
        if ready is not None:
            ready()
        alone_in = [timed([(h2d, s1)])[0] for _ in range(samples)]
        alone_out = [timed([(d2h, s2)])[0] for _ in range(samples)]
        both = [timed([(h2d, s1), (d2h, s2)]) for _ in range(samples)]
        per = nbytes * copies
        link = LinkRates(LinkRate("h2d", False, rate_of(per, alone_in)), LinkRate("d2h", False, rate_of(per, alone_out)),
                         LinkRate("h2d", True, rate_of(per, [b[0] for b in both])),
                         LinkRate("d2h", True, rate_of(per, [b[1] for b in both])), nbytes, copies, METHOD)
        return link, (h_in.ptr, h_out.ptr)
    finally:
        cp.cuda.Device().synchronize()
        h_in.close()
        h_out.close()


def _nvml_now(uuid: str | None) -> dict[str, Any]:
    """The link's PCIe generation and width and the SM and memory clocks now (NVML); {} without NVML."""
    out: dict[str, Any] = {}
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return out
    try:
        h = pynvml.nvmlDeviceGetHandleByUUID(uuid) if uuid else pynvml.nvmlDeviceGetHandleByIndex(0)
        for key, fn in (("gen_current", pynvml.nvmlDeviceGetCurrPcieLinkGeneration),
                        ("width_current", pynvml.nvmlDeviceGetCurrPcieLinkWidth)):
            try:
                out[key] = int(fn(h))
            except Exception:
                out[key] = None
        for key, clock in (("sm_mhz", pynvml.NVML_CLOCK_SM), ("mem_mhz", pynvml.NVML_CLOCK_MEM)):
            try:
                out[key] = int(pynvml.nvmlDeviceGetClockInfo(h, clock))
            except Exception:
                out[key] = None
    except Exception:
        pass
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return out


def _nvml_bus(uuid: str | None) -> str | None:
    """The PCI bus id NVML gives the GPU of ``uuid`` (None without NVML or a UUID)."""
    if not uuid:
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            bus = pynvml.nvmlDeviceGetPciInfo(pynvml.nvmlDeviceGetHandleByUUID(uuid)).busId
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None
    return bus.decode() if isinstance(bus, bytes) else str(bus)


def _cuda_bus(cp: Any) -> str | None:
    """The PCI bus id of CUDA device 0 of this process (None where CuPy cannot say)."""
    try:
        return str(cp.cuda.runtime.deviceGetPCIBusId(0))
    except Exception:
        return None


MPOL_F_NODE = 1
MPOL_F_ADDR = 2


def _mempolicy_node(address: int) -> int | None:
    """The NUMA node of the page at ``address`` (get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR)), or None."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        node = ctypes.c_int(-1)
        rc = libc.get_mempolicy(ctypes.byref(node), None, ctypes.c_ulong(0), ctypes.c_void_p(address),
                                ctypes.c_ulong(MPOL_F_NODE | MPOL_F_ADDR))
    except (OSError, AttributeError):
        return None
    return int(node.value) if rc == 0 and node.value >= 0 else None


def placement(addresses: tuple[int, ...]) -> dict[str, Any]:
    """Where the pinned buffers' pages sit: from /proc/self/numa_maps (``numa_maps``), else get_mempolicy."""
    try:
        maps = Path("/proc/self/maps").read_text()
        numa = Path("/proc/self/numa_maps").read_text()
        nodes = buffer_nodes(maps, numa, addresses)
    except OSError:
        nodes = None
    if nodes:
        return {"buffer_nodes": list(nodes), "method": "numa_maps"}
    found = sorted({n for n in (_mempolicy_node(a) for a in addresses) if n is not None})
    if found:
        return {"buffer_nodes": found, "method": "get_mempolicy"}
    return {"buffer_nodes": None, "method": None}


def run(go_file: str | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    go = wait_for_unit_go(go_file)
    waited = time.perf_counter() - t0
    uuid = go.get("uuid")
    if uuid:  # before any CUDA call: the driver reads these at its start
        os.environ["CUDA_VISIBLE_DEVICES"] = str(uuid)
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    cpus = go.get("cpus")
    if isinstance(cpus, list) and cpus:
        try:
            os.sched_setaffinity(0, [int(c) for c in cpus])
        except (OSError, ValueError, AttributeError):
            pass
    from clusterbench.workloads.cupy.pipeline import require_cupy

    cp = require_cupy()
    t1 = time.perf_counter()
    cp.cuda.Device(0).use()
    want, got = _nvml_bus(uuid), _cuda_bus(cp)
    if want and got and sysfs_bus_id(want) != sysfs_bus_id(got):
        raise EnvironmentFailure(f"the link child sees the GPU at {got}, not {uuid} at {want}: CUDA had started "
                                 "before it could be told which GPU", hint="probe with that GPU alone visible "
                                                                           "(CUDA_VISIBLE_DEVICES)")
    cp.cuda.runtime.free(cp.cuda.runtime.malloc(1))  # the context, timed apart from the copies
    t2 = time.perf_counter()
    held: list[float] = []

    def ready() -> None:  # the probe says when: once its own host work (drawing the frames) is done
        t = time.perf_counter()
        if go.get("wait_measure") is True:
            wait_for_unit_measure(go_file)
        held.append(time.perf_counter() - t)

    link, addresses = measure_link(cp, ready=ready)
    t3 = time.perf_counter()
    now = _nvml_now(uuid)
    where = placement(addresses)
    try:
        pinned = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    except (OSError, AttributeError):
        pinned = None
    return {"schema": LINK_SCHEMA, "version": LINK_VERSION, "link": link.to_json(),
            "pcie": {"gen_current": now.get("gen_current"), "width_current": now.get("width_current")},
            "clocks": {"sm_mhz": now.get("sm_mhz"), "mem_mhz": now.get("mem_mhz")},
            "numa": {**where, "cpus": pinned},
            "timings_s": {"wait_go": round(waited, 4), "context": round(t2 - t1, 4), "wait_measure": round(held[0], 4) if held else None,
                          "copies": round(t3 - t2 - (held[0] if held else 0.0), 4),
                          "after": round(time.perf_counter() - t3, 4)}}


def _cuda_errors() -> tuple[type[BaseException], ...]:
    try:
        import cupy
    except Exception:
        return ()
    return (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError, cupy.cuda.memory.OutOfMemoryError)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m clusterbench.workloads.cupy.link",
                                 description="The pinned link: H2D alone, D2H alone, both at once (GB/s).",
                                 epilog="Exit codes: 0 success; 1 no GPU or CUDA failure; 2 bad input.")
    ap.add_argument("--result", required=True, help="write the result here (JSON)")
    ap.add_argument("--go-file", help="wait for the probe's go in this file before measuring")
    args = ap.parse_args(argv)
    try:
        try:
            doc = run(args.go_file)
        except _cuda_errors() as exc:
            raise EnvironmentFailure(f"CUDA failure: {exc}", hint="check that the GPU is idle and healthy") from None
        try:
            Path(args.result).write_text(json.dumps(doc) + "\n")
        except OSError as exc:
            raise InputError(f"cannot write {args.result}: {exc.strerror}", hint="check the path") from None
    except ClusterbenchError as err:
        return child_error(err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
