"""``probe --what-binds``: what binds a program when nothing is watching (docs/probe.md, "The untraced frame").

For one config of a program probed as it is, after its trace and sustained runs:

1. the delay test (:mod:`clusterbench.run.delay`) in P fresh processes per point, through the injection
   library: its baseline runs give the untraced frame and each thread's own time per frame (the measured
   untraced host bar), in the same processes;
2. the latency program (:mod:`clusterbench.run.latency`) on the frame's own op sequence, with the
   program's schedule flag, untraced and under nsys: the unit's latency between dependent work, the
   round trip at a synchronize, and what the profiler adds to each;
3. from the config's trace: the critical path's structure per frame, the untraced split and the causes
   of ``idle`` (:mod:`clusterbench.analyzers.untraced`).

What cannot be measured (no toolkit to build the tools, a frames definition that cannot be marked at a
call) is said in the record's notes and the probe's warnings; the traced row is never lost to it.
Nothing here prints or exits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from clusterbench.errors import ClusterbenchError, ConfigError, InputError
from clusterbench.model.untraced import UntracedRecord

PHASE = "what-binds"
# Marks before the loop's figures start: a tenth of the traced frames, at most 100 (the first frames of
# a program load modules and fill caches), none for a program of fewer than 20 frames (asyncAPI has one).
WARMUP_SHARE = 0.1
WARMUP_MAX = 100
WARMUP_MIN_FRAMES = 20


@dataclass(frozen=True, slots=True)
class WhatBindsOptions:
    """``--delay-processes`` (P per point), ``--delay-us`` (None: half the untraced frame) and which CUPTI
    callback domains the library subscribes to."""

    processes: int = 3
    k_us: float | None = None
    domains: str | None = None  # None: from the trace (domains_for)


# The CUPTI callback domains the injection library subscribes to. Every driver callback costs about as much
# as a runtime one, and a runtime call makes driver calls of its own: on an H100 (2026-12-06) the zoo's
# daq_loop ran 1.5 % slower with the runtime domain alone and 27 % slower with both at 4 streams (0.6 % and
# 2.0 % at 1 stream; scripts/device_untraced.sh's cost step). The driver domain is needed only where the
# program itself calls the driver API (CuPy, NVRTC-based loaders): nsys files such calls beside the runtime's,
# under their cu* names.
RUNTIME_ONLY = "runtime"
# The driver calls that issue or wait for GPU work (the ones the library times, marks frames at or delays
# in); others, such as cuKernelGetName or cuLibraryLoadData, the runtime makes itself and nsys files them too.
_DRIVER_WORK = " OR ".join(f"s.value GLOB '{g}'" for g in ("cuLaunch*", "cuMemcpy*", "cuMemset*", "cuGraphLaunch*",
                                                          "cu*Synchronize*", "cuEventRecord*", "cuStreamWait*"))
BOTH_DOMAINS = "runtime,driver"


def domains_for(trace: Path | None) -> tuple[str, str]:
    """The callback domains for a program from its trace (``trace``: its SQLite export; None: not traced) and
    why, in words: the runtime domain alone where the program made no driver API call of its own, else both."""
    import sqlite3

    from clusterbench.io.nsys.reader import connect_read_only

    if trace is None:
        return BOTH_DOMAINS, "both callback domains (no trace tells whether the program calls the driver API)"
    try:
        conn = connect_read_only(trace)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            found = None
            for table in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
                if table in tables and "StringIds" in tables:
                    found = conn.execute(
                        f"SELECT s.value FROM [{table}] a JOIN StringIds s ON s.id = a.nameId "
                        f"WHERE s.value NOT GLOB 'cuda*' AND ({_DRIVER_WORK}) LIMIT 1").fetchone()
                    if found:
                        break
        finally:
            conn.close()
    except (sqlite3.Error, ClusterbenchError):
        return BOTH_DOMAINS, "both callback domains (the trace could not be read for the driver calls)"
    if found:
        return BOTH_DOMAINS, f"both callback domains (the program calls the driver API itself: {found[0]})"
    return RUNTIME_ONLY, "the runtime callback domain alone (the program makes no driver API call of its own)"


def config_problem(cfg: Any) -> str | None:
    """Why ``--what-binds`` cannot run on ``cfg`` (a ProbeConfig), or None (pure; checked before any GPU
    work)."""
    from clusterbench.run.inject import mark_of

    if cfg.exec is None:
        return ("--what-binds runs a program as it is (workload = \"exec\", or after --): its frames are marked "
                "where it launches them, and its delays are injected into its own calls")
    _, why = mark_of(cfg.exec.analysis_frames)
    return why


def options_from_request(request: Any, configs: tuple[Any, ...]) -> WhatBindsOptions | None:
    """--what-binds and its options (``request``: a run.probe.ProbeRequest) checked against the configs
    (ConfigError/InputError, exit 2, before any GPU work), or None where it was not asked."""
    from clusterbench.run.delay import K_MAX_US, MAX_PROCESSES

    if not request.what_binds:
        if request.delay_us is not None:
            raise InputError("--delay-us sets the delay test's delay, which only --what-binds runs",
                             hint="add --what-binds, or drop --delay-us")
        return None
    if not isinstance(request.delay_processes, int) or not 2 <= request.delay_processes <= MAX_PROCESSES:
        raise InputError(f"--delay-processes must be an integer from 2 to {MAX_PROCESSES}, got {request.delay_processes!r}",
                         hint="use --delay-processes 3 (the default): a slope's spread needs two processes a point")
    if request.delay_us is not None and not (isinstance(request.delay_us, (int, float)) and math.isfinite(request.delay_us)
                                             and 0 < request.delay_us <= K_MAX_US):
        raise InputError(f"--delay-us must be a number of µs above 0 and at most {K_MAX_US:g}, got {request.delay_us!r}",
                         hint="leave it out: the delay is then half the untraced frame")
    if request.gpus is not None:
        raise InputError("--what-binds runs on one GPU; --gpus runs every config on several",
                         hint="drop --gpus (or --what-binds)")
    for c in configs:
        problem = config_problem(c)
        if problem:
            raise ConfigError(f"config {c.label!r}: {problem}", hint="docs/probe.md, \"The untraced frame\"")
    return WhatBindsOptions(processes=request.delay_processes, k_us=request.delay_us)


def plan_words(cfg: Any, options: WhatBindsOptions, nsys: str | None) -> str:
    """What --what-binds would run for ``cfg``, in words (pure)."""
    from clusterbench.run.inject import INJECTION_ENV, mark_of

    mark, _ = mark_of(cfg.exec.analysis_frames if cfg.exec is not None else None)
    k = "half the untraced frame (at least 2 µs)" if options.k_us is None else f"{options.k_us:g} µs"
    bare = ", and without it (the library's cost, by the program's own rate)" if cfg.exec is not None and cfg.exec.rate else ""
    return (f"the program again with {INJECTION_ENV} (clusterbench's injection library, built here with nvcc; "
            f"frames marked at {mark}), {options.processes} processes at each point: no delay, the host +k, the GPU "
            f"+0 and +k, the link +0 and +k, k {k}{bare}; then the latency program on the frame's ops, untraced"
            + (f" and under {nsys}" if nsys else "") + "; then the untraced split of the trace's critical path, and the same delays replayed on the trace")


def warmup_for(frames: int | None) -> int:
    """Marks per thread to leave out before the loop's figures (pure)."""
    if not frames or frames < WARMUP_MIN_FRAMES:
        return 0
    return min(WARMUP_MAX, int(frames * WARMUP_SHARE))


def measure(cfg: Any, argv: tuple[str, ...], cwd: str | None, env: Mapping[str, str], out_dir: Path,
            analysis: Any, trace: Path | None, nsys: Path | None, options: WhatBindsOptions, timeout_s: float,
            say: Callable[[str], None] | None = None, unit_h2d_gbps: float | None = None) -> UntracedRecord:
    """Steps 1-3 for one config. ``analysis``: the config's TraceAnalysis (None: not traced; then no split);
    ``trace``: its SQLite export; ``nsys``: the latency program also runs under it (None: untraced only);
    ``unit_h2d_gbps``: the unit's pinned H2D rate alone (None: not measured), which sizes the link's delay:
    one copy of k µs runs at it, where the trace's own copies (smaller) may run slower."""
    from clusterbench.analyzers.replay import replay_group
    from clusterbench.analyzers.untraced import (group_links, idle_causes, median_frame, path_structure, sequence_of,
                                                 untraced_split)
    from clusterbench.run import inject
    from clusterbench.run.delay import DelayRequest, run_delay_test
    from clusterbench.run.latency import read_governors, run_latency, unit_costs
    from clusterbench.run.rows import trace_figures

    tell = say or (lambda text: None)
    notes: list[str] = []
    mark, why = inject.mark_of(cfg.exec.analysis_frames if cfg.exec is not None else None)
    if mark is None:
        return UntracedRecord(None, None, None, notes=(why or "no frame mark",))
    try:
        tell("building the injection library")
        lib = inject.build(inject.INJECT_LIB, environ=env)
    except ClusterbenchError as exc:
        return UntracedRecord(None, None, None, notes=(f"the injection library: {exc}" + (f" ({exc.hint})" if exc.hint else ""),))
    group = analysis.primary if analysis is not None else None
    figs = trace_figures(analysis) if analysis is not None else None
    h2d = figs.engines.get("h2d") if figs is not None else None
    spec = cfg.exec
    link_gbps, link_from = link_rate(unit_h2d_gbps, None if h2d is None or not h2d.gbps else float(h2d.gbps))
    domains, domain_words = (options.domains, f"the {options.domains} callback domains (asked)") if options.domains \
        else domains_for(trace)
    req = DelayRequest(argv=tuple(argv), mark=mark, out_dir=out_dir, stem=cfg.label, cwd=cwd, base_env=env,
                       warmup=warmup_for(group.frames.count if group is not None else None),
                       processes=options.processes, k_us=options.k_us,
                       link_gbps=link_gbps, link_rate_from=link_from,
                       rate=spec.rate, rate_unit=spec.rate_unit, timeout_s=timeout_s, domains=domains)
    delay = run_delay_test(req, lib, on_run=lambda what: tell(f"delay test: {what}"))
    notes.append(f"the injection library subscribed to {domain_words}")
    notes.extend(delay.notes)
    host = median_frame(delay.baselines)
    if host is None:
        notes.append("no baseline run marked frames: no untraced frame")
    costs = None
    if group is not None:
        try:
            tell("the latency program")
            binary = inject.build(inject.LATENCY_BIN, environ=env)
            seq = sequence_of(group, host)
            untraced, traced = run_latency(binary, seq, host.sched if host is not None else None, out_dir, cfg.label,
                                           nsys=nsys, env=env, timeout_s=min(timeout_s, 300.0))
            call_us = {api: us for api, _, us in host.calls} if host is not None else {}
            costs = unit_costs(untraced, traced, host.sched if host is not None else None, read_governors(), call_us)
        except ClusterbenchError as exc:
            notes.append(f"the latency program: {str(exc).splitlines()[0]}")
    path = split = idle = None
    replayed: tuple = ()
    if group is not None and trace is not None:
        try:
            from clusterbench.analyzers.analysis import load_trace, request

            tell("the untraced split")
            data = load_trace(trace, req=request(window=spec.window, frames_spec=spec.analysis_frames))
            built = group_links(data, group)
            path = path_structure(data, group, built)
        except ClusterbenchError as exc:
            notes.append(f"the trace's critical path: {str(exc).splitlines()[0]}")
        if path is not None:
            split = untraced_split(path, host, costs)
            idle = idle_causes(path, costs)
            replayed = replay_group(data, group, mark, delay.test.k_us, built)
        else:
            notes.append("the trace has no critical path with frames: no untraced split")
    return UntracedRecord(host, delay.test, costs, path, split, idle, tuple(notes), replay=replayed)


def link_rate(unit_gbps: float | None, trace_gbps: float | None) -> tuple[float | None, str]:
    """The rate that sizes the link's delay, and where it came from (pure): the unit's pinned H2D rate where
    it was measured (one copy of k µs runs near it), else the trace's H2D rate (its own copies' bytes over
    their time: smaller copies, often slower, so a copy sized by it takes less than k)."""
    if unit_gbps is not None and unit_gbps > 0:
        return float(unit_gbps), "unit"
    return trace_gbps, "trace"


def row_columns(record: UntracedRecord | None) -> dict[str, object]:
    """The probes.csv columns of a record (pure): the untraced frame, host bar and split's sum, what binds and
    each slope, the library's cost; empty (None) where not measured."""
    if record is None:
        return {}
    d = record.delay
    slope = (lambda r: None if d is None or d.slope(r) is None else d.slope(r).slope)  # type: ignore[union-attr]
    from clusterbench.analyzers.untraced import host_bar

    bar = None if record.host is None or not record.host.host_us else host_bar(record.host, record.costs).bar_us
    return {"untraced_frame_us": None if record.host is None else record.host.period_us,
            "untraced_host_us": bar,
            "untraced_split_us": None if record.split is None else record.split.untraced_sum_us,
            "delay_binds": None if d is None else d.binds,
            "delay_slope_host": slope("host"), "delay_slope_gpu": slope("gpu"), "delay_slope_link": slope("link"),
            "inject_cost": None if d is None else d.cost}


def measured_host(record: UntracedRecord | None, traced_us: float | None) -> Any:
    """The host bar without the profiler as measured (a callcost.HostEstimate with method ``measured``), in
    place of the estimate: the busiest thread's own time per frame in the baseline process of median
    frame, its synchronizes' own cost included (analyzers.untraced.host_bar), its band the baseline
    processes' range (each with the same synchronizes' part); None where it was not measured (pure)."""
    from clusterbench.analyzers.untraced import host_bar
    from clusterbench.model import units as U
    from clusterbench.run.callcost import HostEstimate

    if record is None or record.host is None or not record.host.host_us or traced_us is None:
        return None
    hb = host_bar(record.host, record.costs)
    extra = hb.sync_us or 0.0
    bars = [r.host_us + extra for r in (record.delay.runs if record.delay is not None else ())
            if r.resource == "none" and r.host_us]
    low, high = (min(bars), max(bars)) if bars else (hb.bar_us, hb.bar_us)
    sync = "" if hb.sync_us is None else f", {U.us(hb.sync_us, 2)} of it the synchronizes' own cost"
    return HostEstimate(traced_us, hb.bar_us, min(low, hb.bar_us), max(high, hb.bar_us),
                        "measured", {}, f"measured: the busiest thread's own time per frame without the profiler "
                        f"(the injection library, {len(bars) or 1} process(es): {U.us(low, 2)} to {U.us(high, 2)}{sync})")
