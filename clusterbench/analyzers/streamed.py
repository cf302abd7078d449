"""analyze over time slabs: the same TraceAnalysis as analysis.analyze, in memory that grows only with the
trace's idle holes of at least 0.1 ms, not with its rows (pure, but for the critical path's temporary file).

Two passes over the export's slabs (io.nsys.slabs):
1. the groups, each group's union of records (its span and idle holes), the calls in the holes, every
   thread's issuing span and each process's correlation-id range: the window and its idle gaps with
   their causes (analyzers.stream.window_and_gaps's accumulator);
2. over the window: busy time, kernels, copies, frame events, the host, the held calls and the critical
   path (analyzers.stream, stream_held, stream_path), all at once.
The records are then those of the whole-array analyzers, assembled by analysis.assemble and
analysis.finish. :class:`Fallback` says where this path does not apply (device-launched rows, a stream
whose rows break issue order, ``--by-stream``): the caller then reads the trace whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import threading
from collections.abc import Callable

import numpy as np

from clusterbench.analyzers import assembly as A
from clusterbench.analyzers import busy as busy_mod
from clusterbench.analyzers import gaps as gaps_mod
from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers import stream as ST
from clusterbench.analyzers import stream_held as SH
from clusterbench.analyzers import stream_path as SP
from clusterbench.analyzers import window as window_mod
from clusterbench.analyzers.model import HOLE_NS, GroupTrace
from clusterbench.errors import InputError
from clusterbench.io.nsys import reader as R
from clusterbench.io.nsys import schema as S
from clusterbench.io.nsys import slabs as B

LAGS = (1, 4, 16, 64, 256, 1024)  # slabs of look-ahead tried in turn for the held calls (rows issued before, run later)
# both passes' accumulators on threads beside the main one (_Lanes); CLUSTERBENCH_SLAB_LANES=0 feeds them in line
LANES = os.environ.get("CLUSTERBENCH_SLAB_LANES", "1") != "0"


class Fallback(Exception):
    """The slab path does not apply to this trace or request (the reason); read it whole."""


class _NewGroup(Exception):
    def __init__(self, groups: list[tuple[int, int]]) -> None:
        self.groups = groups


def analyze_slabs(path, req: A.Request, trace_label: str, on_progress: Callable[[str, int, int], None] | None = None,  # noqa: ANN001
                  rows: int | None = None) -> A.TraceAnalysis:  # fmt: skip
    """The analysis of the export at ``path`` (an SQLite file) under ``req``, over its time slabs."""
    if req.by_stream:
        raise Fallback("--by-stream (per-stream tables) reads the trace whole")
    R._fixed_mmap_threshold()  # freed arrays go back to the system (see reader)
    data = R.read_shell(path, range_prefixes=req.range_prefixes(), kernel_names="mangled" if req.mangled else "short")
    if req.frames is not None and req.frames.kind == "graph" and data.graph_trace == "node":
        data = dataclasses.replace(data, graph_runs=R.graph_runs(path))
    spill = B.Spill(path)
    try:
        return _two_passes(path, req, trace_label, on_progress, rows, data, spill)
    finally:
        spill.close()


def _two_passes(path, req: A.Request, trace_label: str, on_progress, rows: int | None, data: R.TraceData,  # noqa: ANN001
                spill: B.Spill) -> A.TraceAnalysis:  # fmt: skip
    groups: list[tuple[int, int]] = []
    while True:
        try:
            readers: list = []
            # pass 1 keeps its slabs for pass 2 (then it reads every column pass 2 needs); without, it reads less
            first = B.run(path, lambda slabs: _pass_a(spill.tee(slabs), data, req, groups, on_progress, readers), rows=rows,
                          kernel_names=data.kernel_name_kind, reader_out=readers, span_only=not spill.enabled)  # fmt: skip
            break
        except _NewGroup as more:
            groups = more.groups
    accs, rd_a, corr_ranges, api_known, regions = first
    del first
    all_groups = sorted(accs)
    wanted = [(p, d) for p, d in all_groups if (req.pid is None or p == req.pid) and (req.device is None or d == req.device)]
    if not wanted:
        have = "; ".join(f"pid {p} device {d}" for p, d in all_groups)
        asked = " ".join(x for x in (f"--pid {req.pid}" if req.pid is not None else "",
                                     f"--device {req.device}" if req.device is not None else "") if x)  # fmt: skip
        raise InputError(f"no GPU activity for {asked}; the trace has: {have}", hint="pick one of the groups listed")
    # the window and its gaps, per group, from pass 1
    threads_a = tuple(R.Thread(int(k) >> 24, int(k) & 0xFFFFFF, data.thread_names.get(int(k))) for k in rd_a.threads_map.keys)
    parts = _windows_and_gaps(accs, wanted, rd_a, threads_a, data, req)
    R.heap_trim()
    # pass 2, with a longer look-ahead while the held calls need one
    for lag in LAGS:
        try:
            if spill.usable:  # pass 1's slabs again, and its names and threads, which are all the trace's
                second = _pass_b(spill.replay(), data, req, parts, corr_ranges, api_known, regions, lag, on_progress, [rd_a])
            else:
                readers = []
                second = B.run(path, lambda slabs: _pass_b(slabs, data, req, parts, corr_ranges, api_known, regions, lag,
                                                           on_progress, readers), rows=rows, kernel_names=data.kernel_name_kind,
                               reader_out=readers)  # fmt: skip
            break
        except SH.NotLocal as exc:
            if not exc.lag_too_short:
                raise Fallback(str(exc)) from None
    else:
        raise Fallback("a row ran later than the longest look-ahead after the calls issued after it")
    out, warnings = [], []
    for (p, d), res in second.items():
        w_: list[str] = []
        out.append(_group(res, parts[(p, d)], data, req, api_known, w_))
        warnings.extend(f"pid {p} device {d}: {x}" if len(wanted) > 1 else x for x in w_)
    return A.finish(out, warnings, data.graph_trace, data.nsys_version, data.schema_version, req, trace_label, data.tables)


def _windows_and_gaps(accs: dict, wanted: list[tuple[int, int]], rd_a, threads_a, data: R.TraceData,  # noqa: ANN001
                      req: A.Request) -> dict:
    """Per group: its trace without holes, its window, the ranges used and its gaps, from pass 1's accumulators,
    which are emptied as it goes: nothing of pass 1 that grows with the trace (the holes, their sums) outlives
    this function into pass 2."""
    parts = {}
    for key in wanted:
        acc = accs.pop(key)
        g, w, used = _window(acc, rd_a, threads_a, data, req, *key)
        idle = gaps_mod.idle(g, w.intervals, req.gap_ns)
        # the holes are not needed once the gaps are known (they are the window's gaps): let them go before
        # the gaps' causes are summed, the step that needs the most memory
        g = dataclasses.replace(g, holes=iv.empty())
        acc.drop_holes()
        parts[key] = (g, w, used, acc.classify(g, idle, w.start_ns, req.gap_ns))
        acc.close()
    for acc in accs.values():  # groups not asked for
        acc.close()
    accs.clear()
    return parts


def _fixed_region(data: R.TraceData, req: A.Request, pid: int, device: int) -> iv.Intervals | None:
    """The window when it is fixed before the analysis (a pass or named range, ms:), else None."""
    stub = GroupTrace(pid=pid, device=device, gpu_name=None, engines={}, implausible={}, kernel_names=(), first_ns=0,
                      last_ns=1, holes=iv.empty(), api=data.api, overhead=data.overhead, graph_trace=None, srckind_read=True)  # fmt: skip
    if req.window.kind == "ms":
        return (np.array([int(round(req.window.start_ms * 1e6))], dtype=np.int64),
                np.array([int(round(req.window.end_ms * 1e6))], dtype=np.int64))  # fmt: skip
    try:
        fx = window_mod.fixed(stub, data.ranges, req.window)
    except InputError:
        return None
    return None if fx is None else fx[0].intervals


def _pass_a(slabs, data: R.TraceData, req: A.Request, known: list[tuple[int, int]], on_progress, readers: list):  # noqa: ANN001, ANN202
    accs: dict[tuple[int, int], ST.SpanAccumulator] = {}
    regions: dict[int, iv.Intervals | None] = {}
    corr: dict[int, list[int]] = {}
    ifirst: dict[int, int] = {}
    ilast: dict[int, int] = {}
    kept_any = [False, False]  # a call kept, one with a correlation id
    span_calls: dict[int, dict] = {}  # --window span: per process, the calls that touch its span (for its id range)
    rd = None
    seen_rows = False

    def spans(item: tuple) -> None:
        """The groups' unions, holes and sums (and, for --window span, the calls that touch each span) from
        one slab: on a lane of its own beside the read and the calls' sums below (the groups as they were
        when the slab came)."""
        slab, tp, k, groups = item
        for _, acc in groups:
            acc.add(slab, tp)
        if req.window.kind == "span" and slab.api["start"].size:  # the plan keeps the calls that touch the span
            pids = tp[slab.api["thread"]]
            for (p, d), acc in groups:
                m = (pids == p) & (slab.api["corr"] > 0)
                sp = span_calls.setdefault(p, {"early": [], "lo": ST._HIGH, "tail": [], "hi": ST._LOW})
                if m.any():
                    sp["early"].append((slab.api["end"][m], slab.api["corr"][m]))
                    sp["tail"].append((slab.api["start"][m], slab.api["corr"][m]))
                _span_settle(sp, acc)
        if k % 16 == 15:
            for _, acc in groups:
                acc.compact()

    with _Lanes([spans]) as lanes:
        for k, slab in enumerate(slabs):
            if rd is None:
                rd = readers[-1]
                for g in known:
                    _new_group(g, accs, regions, data, req, rd)
            act = slab.activity
            if len(act):
                keys = np.unique(np.asarray(act.pid, dtype=np.int64) * (1 << 32) + np.asarray(act.device, dtype=np.int64))
                new = [(int(x >> 32), int(x & 0xFFFFFFFF)) for x in keys.tolist() if (int(x >> 32), int(x & 0xFFFFFFFF)) not in accs]
                if new:
                    if seen_rows:
                        raise _NewGroup(sorted(set(accs) | set(new)))
                    for g in new:
                        _new_group(g, accs, regions, data, req, rd)
                seen_rows = True
            tp = np.asarray(rd.threads_map.keys, dtype=np.int64) >> 24
            lanes.put((slab, tp, k, list(accs.items())))
            api = slab.api
            if api["start"].size:
                iss = rd.name_snapshot()[2][api["name"]]
                th = api["thread"][iss]
                st = api["start"][iss]
                for t in np.unique(th).tolist():
                    s_ = st[th == t]
                    ifirst[t] = min(ifirst.get(t, ST._HIGH), int(s_.min()))
                    ilast[t] = max(ilast.get(t, ST._LOW), int(s_.max()))
                pids = tp[api["thread"]]
                for p, reg in regions.items():
                    m = pids == p
                    if reg is not None and m.any():
                        m &= R._touches(api["start"], api["end"], reg)
                    if m.any():
                        kept_any[0] = True
                        c = api["corr"][m]
                        c = c[c > 0]
                        if c.size:
                            kept_any[1] = True
                            lo, hi = corr.get(p, [ST._HIGH, ST._LOW])
                            corr[p] = [min(lo, int(c.min())), max(hi, int(c.max()))]
            if on_progress is not None:
                on_progress("reading the trace (1 of 2)", k + 1, k + 2)
            if k % 16 == 15:
                R.heap_trim()
    for acc in accs.values():
        acc.finish()
        acc.ifirst, acc.ilast = dict(ifirst), dict(ilast)
    if req.window.kind == "span":
        for (p, d), acc in accs.items():
            if sum(1 for q, _ in accs if q == p) > 1:
                raise Fallback("--window span with several devices in one process reads the trace whole")
            sp = span_calls.get(p)
            if sp is None:
                continue
            _span_settle(sp, acc, final=True)
            if sp["lo"] <= sp["hi"]:
                corr[p] = [sp["lo"], sp["hi"]]
                kept_any[0] = kept_any[1] = True
    api_known = bool(kept_any[1]) and bool(tuple(c.table for c in rd.cursors if c.table in S.API_TABLES))
    return accs, rd, {p: (v[0], v[1]) for p, v in corr.items()}, api_known, regions


def _span_settle(sp: dict, acc: ST.SpanAccumulator, final: bool = False) -> None:
    """The least and greatest correlation id of a process's calls that touch its group's span: a call's
    end at or after the first record's start, its start at or before the last record's end (the union's
    reach so far; calls starting past it wait)."""
    if acc.first is not None and sp["early"]:
        e = np.concatenate([x for x, _ in sp["early"]])
        c = np.concatenate([y for _, y in sp["early"]])
        m = e >= acc.first
        if m.any():
            sp["lo"] = min(sp["lo"], int(c[m].min()))
        sp["early"] = [] if acc.first is not None else sp["early"]
    if sp["tail"] and (acc.carry_e is not None or final):
        st = np.concatenate([x for x, _ in sp["tail"]])
        c = np.concatenate([y for _, y in sp["tail"]])
        reach = acc.carry_e if acc.carry_e is not None else ST._LOW
        m = st <= reach
        if m.any():
            sp["hi"] = max(sp["hi"], int(c[m].max()))
        sp["tail"] = [] if final else [(st[~m], c[~m])]


def _new_group(g: tuple[int, int], accs, regions, data, req, rd) -> None:  # noqa: ANN001
    region = _fixed_region(data, req, *g) if req.window.kind != "span" else None
    accs[g] = ST.SpanAccumulator(g[0], g[1], lambda: rd.name_snapshot()[2], HOLE_NS, rd.name_snapshot, region)
    prev = regions.get(g[0], "none")
    if prev == "none":
        regions[g[0]] = region
    elif prev is not None and region is not None:
        regions[g[0]] = iv.union(np.concatenate([prev[0], region[0]]), np.concatenate([prev[1], region[1]]))
    else:
        regions[g[0]] = None


def _window(acc: ST.SpanAccumulator, rd, threads, data: R.TraceData, req: A.Request, pid: int, device: int):  # noqa: ANN001, ANN202
    keys = list(rd.threads_map.keys)
    first = np.array([acc.ifirst.get(t, -1) for t in range(len(keys))], dtype=np.int64)
    last = np.array([acc.ilast.get(t, -1) for t in range(len(keys))], dtype=np.int64)
    tables = tuple(c.table for c in rd.cursors if c.table in S.API_TABLES)
    names, cats, _ = rd.name_snapshot()
    e = np.empty(0, dtype=np.int64)
    api = R.ApiCalls(start_ns=e, end_ns=e, thread=e, name=e, correlation=e, stream=e, names=names, name_category=cats,
                     threads=threads, totals=R._empty_totals(), plan=R.KEEP_ALL, tables=tables, issue_first_ns=first,
                     issue_last_ns=last)  # fmt: skip
    s0, s1 = acc.span
    g = GroupTrace(pid=pid, device=device, gpu_name=data.gpu_name(device), engines={}, implausible={},
                   kernel_names=(), first_ns=s0, last_ns=s1, holes=acc.holes, api=api,  # pass 1 reads no names
                   overhead=data.overhead, graph_trace=data.graph_trace, srckind_read=data.srckind_read)  # fmt: skip
    fx = window_mod.fixed(g, data.ranges, req.window)
    used = None
    if fx is not None:
        w, used = fx
    else:
        w = window_mod.span(g)
        if req.window.kind == "auto":
            span_gaps = acc.classify(g, gaps_mod.idle(g, w.intervals, req.gap_ns), w.start_ns, req.gap_ns)
            w = window_mod.trim(g, span_gaps, acc.records_before, acc.first_launch_loads(span_gaps))
    return g, w, used


class _Lanes:
    """Accumulators fed on threads beside the main one (both passes): each lane is a function called with
    every slab in order on its own thread, so the lanes run at once and each accumulator sees what it saw fed
    in line (the same answers). A lane's first exception is raised in the caller, at its next ``put`` or at
    ``close``; the lane then only drains its queue. At most ``depth`` slabs wait per lane (memory). With
    ``threads`` False (CLUSTERBENCH_SLAB_LANES=0) ``put`` calls the lanes in line. As a context manager it
    closes on leaving: quietly when an exception is in flight (that one is raised)."""

    def __init__(self, lanes: list[Callable[[tuple], None]], depth: int = 4, threads: bool | None = None) -> None:
        self.err: BaseException | None = None
        self.lanes = lanes
        on = LANES if threads is None else threads
        self.queues = [queue.Queue(maxsize=depth) for _ in lanes] if on else []
        self.threads = [threading.Thread(target=self._run, args=(f, q), name=f"clusterbench-lane-{i}", daemon=True)
                        for i, (f, q) in enumerate(zip(lanes, self.queues))]  # fmt: skip
        for t in self.threads:
            t.start()

    def __enter__(self) -> _Lanes:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:  # noqa: ANN001
        self.close(quiet=exc_type is not None)

    def _run(self, f: Callable[[tuple], None], q: queue.Queue) -> None:
        while True:
            item = q.get()
            if item is None:
                return
            if self.err is None:
                try:
                    f(item)
                except BaseException as exc:  # noqa: BLE001 - raised again in the caller
                    if self.err is None:
                        self.err = exc

    def _raise(self) -> None:
        if self.err is not None:
            raise self.err

    def put(self, item: tuple) -> None:
        self._raise()
        if not self.threads:
            for f in self.lanes:
                f(item)
        for q in self.queues:
            q.put(item)

    def close(self, quiet: bool = False) -> None:
        """Wait for every lane to finish its slabs; raise a lane's exception (not when ``quiet``)."""
        for q in self.queues:
            q.put(None)
        for t in self.threads:
            t.join()
        self.queues, self.threads = [], []
        if not quiet:
            self._raise()


def _lanes_of(st: dict) -> list[Callable[[tuple], None]]:
    """One group's accumulators in three lanes: the held calls (with the critical path's batches and the
    blocked time they feed), the host and the frame events, the engines' busy time, kernels and copies."""

    def engines(item: tuple) -> None:
        slab = item[0]
        st["busy"].add(slab)
        st["kern"].add(slab)
        st["copies"].add(slab)

    def host(item: tuple) -> None:
        slab, tp, names, cats = item
        st["ev"].add(slab, tp, cats)
        st["host"].add(slab, tp, cats, names)

    lanes = [engines, host]
    if st["held"] is not None:
        lanes.insert(0, lambda item: st["held"].add(item[0], item[1]))
    return lanes


def _pass_b(slabs, data: R.TraceData, req: A.Request, parts: dict, corr_ranges: dict, api_known: bool, regions: dict,  # noqa: ANN001
            lag: int, on_progress, readers: list):  # noqa: ANN001, ANN202
    rd = None
    state = {}
    with contextlib.ExitStack() as stack:  # the lanes, made at the first slab, closed on leaving
        for k, slab in enumerate(slabs):
            if rd is None:
                rd = readers[-1]
                for (p, d), (_, w, _, gp) in parts.items():
                    state[(p, d)] = _accumulators(p, d, w, gp, data, req, corr_ranges, api_known, regions, lag, rd)
                lanes = stack.enter_context(_Lanes([f for st in state.values() for f in _lanes_of(st)]))
            tp = np.asarray(rd.threads_map.keys, dtype=np.int64) >> 24
            names, cats, _ = rd.name_snapshot()
            lanes.put((slab, tp, names, cats))
            if on_progress is not None:
                on_progress("analysing the trace (2 of 2)", k + 1, k + 2)
            if k % 16 == 15:
                R.heap_trim()
    for st in state.values():
        if st["held"] is not None:
            st["held"].finish()
        st["rd"] = rd
    return state


def _accumulators(p: int, d: int, w, gp, data: R.TraceData, req: A.Request, corr_ranges: dict, api_known: bool,  # noqa: ANN001
                  regions: dict, lag: int, rd) -> dict:  # noqa: ANN001
    """Pass 2's accumulators of one group, over its window."""
    setup = gp.setup_mask()
    setup_iv = (gp.starts_ns[setup], gp.starts_ns[setup] + gp.lengths_ns[setup])
    host = ST.HostAccumulator(p, d, w.intervals, setup_iv, None)
    blocked = ST.BlockedAccumulator(host.steady)
    ps = SP.PathStream(w.intervals) if api_known else None
    hs = None
    if api_known:
        region = regions.get(p) if req.window.kind != "span" else w.intervals
        hs = SH.HeldStream(p, d, w.intervals, region, data.event_records, p,
                           {sid: f for (q, sid), f in data.stream_flags.items() if q == p}, corr_ranges.get(p), rd,
                           blocked.add, lag=lag, path=ps)  # fmt: skip
    frx = req.frames.pattern if req.frames is not None and req.frames.kind == "kernel" else None
    return {
        "busy": ST.BusyAccumulator(p, d, w.intervals, None, data.srckind_read),
        "kern": ST.KernelAccumulator(p, d, w.intervals, None), "copies": ST.CopyAccumulator(p, d, w.intervals, None),
        "ev": ST.EventAccumulator(p, d, w, frx, S.API_CODE["graph_launch"]), "host": host, "blocked": blocked,
        "held": hs, "path": ps, "setup": setup_iv,
    }  # fmt: skip


def _group(st: dict, part: tuple, data: R.TraceData, req: A.Request, api_known: bool, warnings: list[str]):  # noqa: ANN202
    g, w, used, gp = part
    rd = st["rd"]
    # pass 1 read no kernel names (io.nsys.slabs span_only): the group's are pass 2's
    g = dataclasses.replace(g, kernel_names=tuple(rd.kernel_names))
    busy_acc = st["busy"]
    h2d = busy_acc.nbytes("h2d") if "h2d" in busy_acc.eng and busy_acc.eng["h2d"].rows else None
    if req.frames is not None and req.frames.kind == "h2d-bytes" and h2d is None:
        h2d = None
    frames = ST.frames_over(st["ev"], req.frames, w, used, data.ranges, g.pid, h2d, warnings, data.graph_runs)
    n = frames.count
    busy_acc.frames = n
    busy = busy_acc.result()
    A.implausible_warnings(busy, warnings)
    threads = tuple(R.Thread(int(k) >> 24, int(k) & 0xFFFFFF, data.thread_names.get(int(k))) for k in rd.threads_map.keys)
    names = tuple(rd.names.names)
    host_acc = st["host"]
    host_acc.frames = n
    if not g.api.tables:
        from clusterbench.analyzers.records import Host

        host = Host(False, (), 0, ())
    else:
        host = host_acc.result(threads, names, st["blocked"])
    path = None
    if api_known and host.threads:
        want = {(t.thread.pid, t.thread.tid) for t in host.threads}
        launching = {i for i, t in enumerate(threads) if (t.pid, t.tid) in want}
        path = SP.measure(st["path"], launching, w.intervals, st["setup"], n, threads, tuple(rd.kernel_names))
    roof, busy = busy_mod.roofline(busy, host.threads, n)
    kernel_busy = busy.engines["kernel"].busy_ns if "kernel" in busy.engines else 0
    st["kern"].frames = n
    kernels = st["kern"].result(kernel_busy)
    st["copies"].frames = n
    copies = st["copies"].result()
    pacing, note = ST.pacing_over(st["ev"], frames, w, gp)
    return A.assemble(g, w, frames, busy, roof, gp, host, path, kernels, copies, pacing, note, warnings)
