"""The facade: read a trace and run every analyzer over each (process, device) group (pure).

``analyze_trace(path, ...)`` reads and analyzes; ``load_trace(path, ...)`` then ``analyze(data, ...)``
does the same in two steps (the picture and the trace export need the read data). The analyzers
(docs/analyze.md says what each measures):
- model: one group's records, engine by engine;
- window: which part of the trace (auto, span, range:NAME[@DOMAIN][#N], ms:A-B);
- frames: how many frames the window holds, from the program's own work;
- busy: per-engine busy time, overlap, streams, and the roofline;
- gaps: the idle gaps and their causes; whether the GPU's work is missing from the trace;
- kernels: kernels by name, copies by size class;
- host: the launching threads, their time in CUDA calls and their busy time;
- pacing: the intervals between frame completions;
- rules: the "why" notes.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from clusterbench.analyzers import busy as busy_mod
from clusterbench.analyzers import critical_path as path_mod
from clusterbench.analyzers import frames as frames_mod
from clusterbench.analyzers import gaps as gaps_mod
from clusterbench.analyzers import held as held_mod
from clusterbench.analyzers import host as host_mod
from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers import kernels as kernels_mod
from clusterbench.analyzers import links as links_mod
from clusterbench.analyzers import model as model_mod
from clusterbench.analyzers import pacing as pacing_mod
from clusterbench.analyzers import window as window_mod
from clusterbench.analyzers.beside import beside
from clusterbench.analyzers.assembly import (  # noqa: F401  (re-exported: the facade's names)
    ABSURD_US_PER_FRAME,
    Request,
    assemble,
    finish,
    implausible_warnings,
    no_kernel_table_warning,
    request,
)
from clusterbench.analyzers.records import GroupAnalysis, TraceAnalysis
from clusterbench.errors import InputError, TraceError
from clusterbench.model import units as U
from clusterbench.io.nsys.reader import EVERYTHING, ApiPlan, TraceData



# --------------------------------------------------------------------------- reading


def _wanted(data: TraceData, req: Request) -> list[tuple[int, int]]:
    groups = model_mod.groups_of(data)
    wanted = [(p, d) for p, d in groups if (req.pid is None or p == req.pid) and (req.device is None or d == req.device)]
    if not wanted:
        have = "; ".join(f"pid {p} device {d}" for p, d in groups)
        asked = " ".join(x for x in (f"--pid {req.pid}" if req.pid is not None else "",
                                     f"--device {req.device}" if req.device is not None else "") if x)  # fmt: skip
        raise InputError(f"no GPU activity for {asked}; the trace has: {have}", hint="pick one of the groups listed")
    return wanted


def api_plan(req: Request, cache: dict | None = None):
    """The reader's plan for the API calls under ``req``: per process, every call that touches the
    analysis region, one by one. The region is the window when it is fixed before the analysis (a pass
    or named range, ``ms:``), the GPU activity span for ``--window span``, and the whole trace for the
    auto window without a pass range (its edges are found from the gaps, after the read).
    ``cache`` keeps the groups it builds for :func:`analyze`."""

    def plan(data: TraceData) -> ApiPlan:
        region: dict[int, iv.Intervals] = {}
        for p, d in _wanted(data, req):
            g = model_mod.build(data, p, d, cache)
            fx = window_mod.fixed(g, data.ranges, req.window)
            if fx is not None:
                w = fx[0].intervals
            elif req.window.kind == "auto":
                w = EVERYTHING
            else:
                w = window_mod.span(g).intervals
            region[p] = _merge(region.get(p), w)
        return ApiPlan(region=region)

    return plan


def _merge(a: iv.Intervals | None, b: iv.Intervals) -> iv.Intervals:
    if a is None:
        return b
    return iv.union(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))


def _check_ranges(path: Path, req: Request) -> None:
    """An unknown range name is bad input: say so before the slow read."""
    from clusterbench.io.nsys.reader import nvtx_ranges, range_texts

    wanted = []
    if req.window.kind == "range":
        wanted.append((req.window.name, req.window.domain))
    if req.frames is not None and req.frames.kind == "range":
        wanted.append((req.frames.pattern, req.frames.domain))
    for name, domain in wanted:
        ranges = nvtx_ranges(path, (name,))
        ok = np.array([t.startswith(name) for t in ranges.texts], dtype=bool)[ranges.text_index] if len(ranges) else np.zeros(0, dtype=bool)
        if domain is not None and len(ranges):
            ok &= np.isin(ranges.domain, [k for k, v in ranges.domains.items() if v == domain])
        if not ok.any():
            dom = f" in domain {domain!r}" if domain else ""
            have = range_texts(path)
            raise TraceError(
                f"no NVTX range starts with {name!r}{dom} in {path.name}",
                hint=("ranges in the trace (text@domain): " + ", ".join(have) if have else "the trace has no NVTX ranges")
                + "; or leave the option out to use the probe's pass range or the GPU activity span",
            )


def load_trace(path: str | os.PathLike[str], range_name: str | None = None, req: Request | None = None,
               on_progress: Callable[[str, int, int], None] | None = None, cache: dict | None = None) -> TraceData:  # fmt: skip
    """Read ``path`` (an nsys SQLite export, or a .nsys-rep/.qdrep exported through nsys) for ``analyze``
    under ``req`` (the options; by default the window is auto, or ``--range range_name``)."""
    from clusterbench.io.nsys import check_sqlite_file, read_trace, resolve_trace

    req = req if req is not None else request(range_name=range_name)
    sqlite_path = resolve_trace(path)
    check_sqlite_file(sqlite_path)
    _check_ranges(sqlite_path, req)
    data = read_trace(sqlite_path, range_prefixes=req.range_prefixes(), kernel_names="mangled" if req.mangled else "short",
                      api_plan=api_plan(req, cache), on_progress=on_progress)  # fmt: skip
    if req.frames is not None and req.frames.kind == "graph" and data.graph_trace == "node":
        from clusterbench.io.nsys.reader import graph_runs

        data = dataclasses.replace(data, graph_runs=graph_runs(sqlite_path))
    return data


# --------------------------------------------------------------------------- analysis


ANALYSIS_STEPS = 6  # the steps of one group that report progress (_group's tick calls)


def _group(data: TraceData, g: model_mod.GroupTrace, req: Request, warnings: list[str],
           tick: Callable[[], None] = lambda: None) -> GroupAnalysis:  # fmt: skip
    fx = window_mod.fixed(g, data.ranges, req.window)
    used = None
    if fx is not None:
        w, used = fx
    else:
        w = window_mod.span(g)
        if req.window.kind == "auto":
            span_gaps = gaps_mod.classify(g, gaps_mod.idle(g, w.intervals, req.gap_ns), w.start_ns, req.gap_ns)
            w = window_mod.trim(g, span_gaps)
    h2d = g.engines.get("h2d")
    h2d_bytes = None
    if req.frames is not None and req.frames.kind == "h2d-bytes" and h2d is not None:
        h2d_bytes = busy_mod.clip_records(h2d.start_ns, h2d.end_ns, h2d.bytes, w.intervals).nbytes
    frames = frames_mod.count(g, req.frames, w, used, data.ranges, h2d_bytes, warnings, data.graph_runs)
    n = frames.count
    # The analyzers run on threads as far as they do not wait for each other: NumPy gives up the GIL in
    # its loops, so they take other cores. This thread works through the dependent chain (the links, the
    # held calls, their blocked time on the threads, the critical path); beside it the gaps (then the
    # host's calls, which need the set-up gaps, and the pacing), busy time with kernels and copies, and
    # the rows' own predecessors on the path. The answers are those of one thread.
    gaps_job = beside(_gaps_host_pacing, g, w.intervals, w.start_ns, req.gap_ns, frames)
    busy_job = beside(_busy_and_kernels, g, w.intervals, n, req.by_stream)
    links = links_mod.build(g)
    rows_job = beside(path_mod.row_predecessors, links, g.syncs, g.events) if links.api_known and links.n_rows else None
    tick()
    held = held_mod.find(links, w.intervals, g.syncs, g.events)
    tick()
    gp, setup_iv, calls, pacing, pacing_note = gaps_job.result()
    del gaps_job  # the calls go once the host has them
    tick()
    host = host_mod.with_blocked(calls, links, held)
    del calls
    tick()
    path = None
    rows = rows_job.result() if rows_job is not None else None
    del rows_job
    if links.api_known and host.threads:
        graph = path_mod.predecessors(links, held, g.syncs, g.events, rows=rows)
        del rows
        path = path_mod.measure(links, held, w.intervals, setup_iv, host_mod.launching_mask(g, host), n, g.api.threads,
                                g.syncs, g.events, graph)  # fmt: skip
        del graph
    tick()
    busy, kernels, copies = busy_job.result()
    implausible_warnings(busy, warnings)
    tick()
    roof, busy = busy_mod.roofline(busy, host.threads, n)
    return assemble(g, w, frames, busy, roof, gp, host, path, kernels, copies, pacing, pacing_note, warnings)


def _gaps_host_pacing(g: model_mod.GroupTrace, window: iv.Intervals, start_ns: int, gap_ns: int, frames):  # noqa: ANN001, ANN202
    """The idle gaps of ``window`` with their causes, the set-up gaps as intervals, the host analyzer's
    part from the calls alone (over the window less the set-up gaps), and the pacing of ``frames``."""
    gp = gaps_mod.classify(g, gaps_mod.idle(g, window, gap_ns), start_ns, gap_ns)
    setup = gp.setup_mask()
    setup_iv = (gp.starts_ns[setup], gp.starts_ns[setup] + gp.lengths_ns[setup])
    calls = host_mod.calls(g, window, setup_iv, frames.count)
    pacing, pacing_note = pacing_mod.measure(g, frames, window, gp)
    return gp, setup_iv, calls, pacing, pacing_note


def _busy_and_kernels(g: model_mod.GroupTrace, window: iv.Intervals, n: int | None, by_stream: bool):  # noqa: ANN202
    """Busy time per engine (the roofline leaves each engine's busy time as it is), kernels by name, and
    the copies by size class."""
    busy = busy_mod.measure(g, window, n, by_stream)
    kernel_busy = busy.engines["kernel"].busy_ns if "kernel" in busy.engines else 0
    kernels = kernels_mod.by_name(g, window, n, kernel_busy)
    return busy, kernels, kernels_mod.copy_classes(g, window, n)


def analyze(data: TraceData, req: Request | None = None, trace_label: str | None = None, cache: dict | None = None,
            on_progress: Callable[[str, int, int], None] | None = None, **options: Any) -> TraceAnalysis:  # fmt: skip
    """Analyze already-read trace data (pure). ``req`` (from :func:`request`) holds the options, or
    ``options`` are :func:`request`'s keywords; ``cache`` is the one :func:`load_trace` filled, if any.
    ``on_progress("analysis", done, total)`` is called as each step of each group ends.
    ``what_if`` takes whatif.Change records (whatif.parse_changes parses ``--what-if``); the result
    for the primary group is ``TraceAnalysis.what_if``."""
    if req is None:
        req = request(**options)
    wanted = _wanted(data, req)
    groups: list[GroupAnalysis] = []
    warnings: list[str] = []
    total, done = ANALYSIS_STEPS * len(wanted), [0]

    def tick() -> None:
        done[0] += 1
        if on_progress is not None:
            on_progress("analysis", min(done[0], total), total)

    for p, d in wanted:
        w: list[str] = []
        groups.append(_group(data, model_mod.build(data, p, d, cache), req, w, tick))
        warnings.extend(f"pid {p} device {d}: {x}" if len(wanted) > 1 else x for x in w)
    return finish(groups, warnings, data.graph_trace, data.nsys_version, data.schema_version, req,
                  trace_label if trace_label is not None else str(data.path), data.tables)


def analyze_trace(path: str | os.PathLike[str], **options: Any) -> TraceAnalysis:
    """Read ``path`` (an nsys SQLite export, or a .nsys-rep exported through nsys) and analyze it;
    ``options`` are :func:`request`'s keywords (frames, range_name, window, frames_spec, device, pid,
    by_stream, mangled, what_if)."""
    return analyze_file(path, request(**options))


# Which way analyze_file reads (docs/analyze.md, "Which way a trace is read"). Reading whole is the faster
# way; its peak memory grows with the rows it keeps one by one (activity, CUDA API and synchronization rows:
# about 63 MB + 66 bytes a row, start-up included, on both shapes of the benchmark's traces), so that
# WHOLE_ROWS_LIMIT rows keep it at about 325 MB (the analyzers on threads, in _group, add 8 to 17 MB at 1M records),
# within the 400 MB limit with a margin. Past it the trace
# is read in time slabs, in memory that does not grow with the trace. CLUSTERBENCH_ANALYZE_PATH=whole or
# slabs sets the way for every trace (the tests run both); auto, or unset, chooses by size.
PATH_ENV = "CLUSTERBENCH_ANALYZE_PATH"
PATH_CHOICES = ("auto", "whole", "slabs")
WHOLE_ROWS_LIMIT = 4_000_000


@dataclasses.dataclass(frozen=True, slots=True)
class ReadChoice:
    """How analyze_file reads a trace: ``path`` "whole" or "slabs"; ``rows`` its activity, CUDA API and
    synchronization rows (reader.table_rows: counted without a scan); ``limit`` the rows read whole at most
    under auto; ``setting`` the CLUSTERBENCH_ANALYZE_PATH that decided ("auto" when unset)."""

    path: str
    rows: int
    limit: int
    setting: str


def path_setting(environ: dict[str, str] | None = None) -> str:
    """CLUSTERBENCH_ANALYZE_PATH (auto, whole or slabs; auto when unset or empty); InputError otherwise."""
    env = os.environ if environ is None else environ
    value = env.get(PATH_ENV, "").strip().lower() or "auto"
    if value not in PATH_CHOICES:
        raise InputError(f"{PATH_ENV}={env.get(PATH_ENV)!r} is not one of {', '.join(PATH_CHOICES)}",
                         hint=f"unset it, or set auto (read whole up to {WHOLE_ROWS_LIMIT:,} activity, API and "
                         "synchronization rows, in time slabs past that), whole or slabs")  # fmt: skip
    return value


def read_choice(sqlite_path: str | os.PathLike[str], environ: dict[str, str] | None = None) -> ReadChoice:
    """How :func:`analyze_file` reads the export at ``sqlite_path``: whole when its activity, CUDA API and
    synchronization rows are at most WHOLE_ROWS_LIMIT, else in time slabs; CLUSTERBENCH_ANALYZE_PATH
    (``environ``, by default the process's) set to whole or slabs decides instead."""
    from clusterbench.io.nsys.reader import table_rows

    setting = path_setting(environ)
    rows = sum(table_rows(sqlite_path).values())
    path = setting if setting != "auto" else ("whole" if rows <= WHOLE_ROWS_LIMIT else "slabs")
    return ReadChoice(path=path, rows=rows, limit=WHOLE_ROWS_LIMIT, setting=setting)


# the peak resident memory of a trace read whole, start-up included: about 63 MB + 66 bytes per activity, CUDA API
# and synchronization row (docs/analyze.md, "Which way a trace is read": both shapes of the benchmark's traces)
WHOLE_BASE_BYTES = 63_000_000
WHOLE_ROW_BYTES = 66


@dataclasses.dataclass(frozen=True, slots=True)
class WholeRead:
    """What reading a trace whole would take: its activity, CUDA API and synchronization ``rows``, the
    ``limit`` read whole under auto, the predicted ``peak_bytes`` (WHOLE_BASE_BYTES + WHOLE_ROW_BYTES a row),
    the memory the system has ``available_bytes`` (MemAvailable; None where not known) and the
    CLUSTERBENCH_ANALYZE_PATH ``setting``."""

    rows: int
    limit: int
    peak_bytes: int
    available_bytes: int | None
    setting: str

    @property
    def over_limit(self) -> bool:
        """More rows than a whole read takes within the memory limit: analyze alone reads such a trace in slabs."""
        return self.rows > self.limit

    @property
    def fits(self) -> bool:
        """The predicted peak within the memory available (True where that is not known)."""
        return self.available_bytes is None or self.peak_bytes <= self.available_bytes

    @property
    def refused(self) -> bool:
        """Too big for the memory available, and the whole read not asked for by CLUSTERBENCH_ANALYZE_PATH."""
        return not self.fits and self.setting != "whole"

    def words(self) -> str:
        """What the read takes, in words: its rows and the predicted peak, with the rule it comes from."""
        return (f"{self.rows:,} activity, API and synchronization rows, about {U.size(self.peak_bytes)} of memory at "
                f"the peak ({WHOLE_BASE_BYTES / 1e6:.0f} MB + {WHOLE_ROW_BYTES} bytes a row)")

    def beyond(self) -> str:
        """``more than the N available`` where the peak is over the memory available, else empty."""
        return "" if self.fits else f"more than the {U.size(self.available_bytes)} this machine has available"

    @classmethod
    def of(cls, choice: ReadChoice) -> WholeRead:
        """What reading whole takes for a trace of ``choice``'s rows, on this machine now."""
        return cls(choice.rows, choice.limit, WHOLE_BASE_BYTES + WHOLE_ROW_BYTES * choice.rows, available_memory(),
                   choice.setting)


def available_memory(meminfo: str | os.PathLike[str] = "/proc/meminfo", proc_cgroup: str | os.PathLike[str] = "/proc/self/cgroup",
                     cgroup_root: str | os.PathLike[str] = "/sys/fs/cgroup") -> int | None:  # fmt: skip
    """The memory a new process can take without swapping or being killed (bytes): Linux's MemAvailable,
    and no more than the room left under the process's memory cgroup limit (a container's), where it has
    one (:func:`cgroup_room`); None where neither can be read (another system)."""
    free = None
    try:
        with open(meminfo, encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    parts = line.split()
                    free = int(parts[1]) * (1024 if len(parts) > 2 and parts[2].lower() == "kb" else 1)
                    break
    except (OSError, ValueError, IndexError):
        free = None
    room = cgroup_room(proc_cgroup, cgroup_root)
    if room is None:
        return free
    return room if free is None else min(free, room)


_NO_LIMIT = 1 << 60  # cgroup v1 writes a limit near 2**63 for none


def cgroup_room(proc_cgroup: str | os.PathLike[str] = "/proc/self/cgroup",
                cgroup_root: str | os.PathLike[str] = "/sys/fs/cgroup") -> int | None:  # fmt: skip
    """The room under the process's memory cgroup limits (bytes): per cgroup from the process's own up to
    the mount's root (a container sees its own cgroup there; a batch system such as Slurm sets the limit on
    the job's cgroup and none on the step's or task's below it), its limit less its working set (the usage
    less the inactive file cache, which the kernel gives back before it kills: the figure container
    runtimes enforce), the least of them; cgroup v2 or v1. None without a limit or where none can be read."""
    try:
        lines = Path(proc_cgroup).read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    root = Path(cgroup_root)
    rooms: list[int] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hid, controllers, rel = parts[0], parts[1], parts[2].strip("/")
        if hid == "0" and controllers == "":  # cgroup v2
            base, files = root, ("memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):  # cgroup v1
            base, files = root / "memory", ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        else:
            continue
        names = [n for n in rel.split("/") if n and n != ".."]
        for depth in range(len(names), -1, -1):  # the process's own cgroup first, then each one above it
            room = _room_in(base.joinpath(*names[:depth]), *files)
            if room is not None:
                rooms.append(room)
    return min(rooms) if rooms else None


def _room_in(folder: Path, limit_file: str, usage_file: str, inactive_key: str) -> int | None:
    """One cgroup's room (bytes): its limit less its working set; None where it has no limit or its files
    cannot be read."""
    try:
        limit_text = (folder / limit_file).read_text(encoding="ascii").strip()
        usage = int((folder / usage_file).read_text(encoding="ascii").strip())
        limit = int(limit_text)
    except (OSError, ValueError, UnicodeDecodeError):  # no such cgroup, or "max": no limit
        return None
    if limit >= _NO_LIMIT:
        return None
    inactive = 0
    try:
        for stat in (folder / "memory.stat").read_text(encoding="ascii").splitlines():
            key, _, value = stat.partition(" ")
            if key == inactive_key:
                inactive = int(value)
                break
    except (OSError, ValueError, UnicodeDecodeError):
        inactive = 0
    return max(0, limit - max(0, usage - inactive))


def whole_read(path: str | os.PathLike[str], environ: dict[str, str] | None = None, req: Request | None = None) -> WholeRead:
    """What reading the trace at ``path`` whole would take (:class:`WholeRead`): counted without a scan,
    before any slow work, for the options that need the rows at hand (the picture, the trace export, the
    untraced split), which read any trace whole. With ``req``, its range names are checked first, as
    load_trace checks them (bad input is named before the trace's size)."""
    from clusterbench.io.nsys import check_sqlite_file, resolve_trace

    sqlite_path = resolve_trace(path)
    check_sqlite_file(sqlite_path)
    if req is not None:
        _check_ranges(sqlite_path, req)
    return WholeRead.of(read_choice(sqlite_path, environ))


def analyze_file(path: str | os.PathLike[str], req: Request, on_progress: Callable[[str, int, int], None] | None = None,
                 trace_label: str | None = None, on_note: Callable[[str], None] | None = None) -> TraceAnalysis:  # fmt: skip
    """Analyze the trace at ``path`` under ``req``: read whole (load_trace, analyze), the faster way, when
    it fits the memory limit (:func:`read_choice`), else over its time slabs (analyzers.streamed), in memory
    that does not grow with the trace; where the slabs do not apply (device-launched rows, --by-stream),
    read whole. The same TraceAnalysis either way. ``on_note(message)`` hears when the slabs are used, and
    when they were chosen but the trace is read whole after all."""
    from clusterbench.io.nsys import check_sqlite_file, resolve_trace
    from clusterbench.io.nsys.reader import VALUE_ERRORS, analysis_heap, typed_problem

    label = trace_label if trace_label is not None else str(Path(path))
    sqlite_path = resolve_trace(path)
    check_sqlite_file(sqlite_path)
    _check_ranges(sqlite_path, req)
    choice = read_choice(sqlite_path)
    note = on_note if on_note is not None else (lambda message: None)
    if choice.path == "slabs":
        why = (f"{choice.rows:,} activity, API and synchronization rows, over the {choice.limit:,} read whole "
               "within the memory limit" if choice.setting == "auto" else f"{PATH_ENV}=slabs")  # fmt: skip
        note(f"{why}: reading in time slabs (bounded memory; slower than reading whole)")
        from clusterbench.analyzers import streamed  # only here: a trace read whole needs none of it

        try:
            return streamed.analyze_slabs(sqlite_path, req, label, on_progress)
        except streamed.Fallback as exc:
            need = WholeRead.of(choice)
            if need.refused:
                raise InputError(f"the time slabs do not apply ({exc}), and reading whole takes {need.words()}, "
                                 f"{need.beyond()}",
                                 hint=f"run it where more memory is free, or set {PATH_ENV}=whole to read it whole "
                                      "all the same")  # fmt: skip
            note(f"the time slabs do not apply ({exc}): reading whole, {need.words()}; memory grows with the trace")
        except VALUE_ERRORS as exc:
            # a value of the wrong type that the slabs did not check where they read it: name it (as reading
            # whole does), else a bug
            problem = typed_problem(sqlite_path)
            if problem is None:
                raise
            raise problem from exc
    cache: dict = {}
    data = load_trace(sqlite_path, req=req, on_progress=on_progress, cache=cache)
    analysis_heap()  # the analysis's temporaries reused from the heap, not mapped one by one
    return analyze(data, req=req, trace_label=label, cache=cache, on_progress=on_progress)


def critical_path_walk(data: TraceData, group: GroupAnalysis) -> path_mod.Walk | None:
    """The segments of ``group``'s critical path (a GroupAnalysis of ``data``), for the picture and the
    trace export; None when it has none (no CUDA API rows, or no launching thread)."""
    if group.critical_path is None:
        return None
    g = model_mod.build(data, group.pid, group.device)
    links = links_mod.build(g)
    held = held_mod.find(links, group.window.intervals, g.syncs, g.events)
    return path_mod.walk(links, held, group.window.intervals, host_mod.launching_mask(g, group.host), g.syncs, g.events)
