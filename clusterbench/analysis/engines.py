"""Per-engine busy time, roofline, overlap, idle and host sync for one nsys trace (pure).

``analyze(trace_data, ...)`` turns a :class:`~clusterbench.trace.TraceData` into a frozen
:class:`TraceAnalysis`; ``analyze_trace(path, ...)`` reads the file first. Semantics are
DESIGN.md's "Analysis semantics":

- busy time is an interval union per engine, grouped by (pid, device), clipped to the window;
- the window is every NVTX range starting with ``--range NAME``; by default the probe's
  pass range (text ``clusterbench:pass ...``, else ``pass ...``), else the group's GPU
  activity span. Ranges from the group's own process are preferred; when that process has
  none, matching ranges from any process are used;
- frames come from the caller, else ``frames=N`` in the range text (summed over the ranges
  used, when every one carries it), else per-frame figures are None;
- copies cut by a window edge count their bytes in proportion to the part inside, so GB/s
  stays bytes over busy time;
- kernel, h2d and d2h are always reported (zeros when absent); other engines appear only
  when they have activity in the window.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from clusterbench import __version__
from clusterbench.analysis import intervals as iv
from clusterbench.errors import InputError, TraceError
from clusterbench.trace import schema as S
from clusterbench.trace.reader import DEFAULT_PASS_PREFIXES, NvtxRanges, TraceData

JSON_VERSION = 1  # history: 1 = first release (DESIGN.md JSON contract plus extra keys)

_FRAMES_RE = re.compile(r"(?:^|[\s,;:(])frames\s*=\s*(\d+)")
# Reading thresholds for the notes (judgement calls, stated in the notes themselves).
NO_OVERLAP_SERIALIZATION = 1.05  # below this, engines practically take turns
HOST_SYNC_NOTE_FRACTION = 0.20
IDLE_NOTE_FRACTION = 0.10


@dataclass(frozen=True, slots=True)
class EngineStats:
    engine: str
    busy_ns: int
    count: int
    duty: float | None  # busy / window; None when the window is empty
    us_per_frame: float | None  # None when frames are unknown
    bytes: int | None = None  # copies and memsets only
    gbps: float | None = None  # bytes / busy_ns = GB/s (1e9 bytes/s)
    headroom: float | None = None  # (roofline busy - busy) / busy; None for the roofline engine
    headroom_us_per_frame: float | None = None

    def to_json(self) -> dict:
        out: dict = {"busy_ns": self.busy_ns, "count": self.count, "us_per_frame": self.us_per_frame, "duty": self.duty}
        if self.bytes is not None:
            out["bytes"] = self.bytes
            out["gbps"] = self.gbps
        out["headroom"] = self.headroom
        out["headroom_us_per_frame"] = self.headroom_us_per_frame
        return out


@dataclass(frozen=True, slots=True)
class Roofline:
    engine: str | None  # None when nothing ran inside the window
    busy_ns: int
    us_per_frame: float | None
    fps: float | None

    def to_json(self) -> dict:
        return {"engine": self.engine, "busy_ns": self.busy_ns, "us_per_frame": self.us_per_frame, "fps": self.fps}


@dataclass(frozen=True, slots=True)
class StreamStats:
    stream: int
    engines: dict[str, EngineStats]
    any_busy_ns: int

    def to_json(self) -> dict:
        return {
            "stream": self.stream,
            "any_busy_ns": self.any_busy_ns,
            "engines": {k: v.to_json() for k, v in self.engines.items()},
        }


@dataclass(frozen=True, slots=True)
class GroupAnalysis:
    """Everything measured for one (process, device) group."""

    pid: int
    device: int
    gpu_name: str | None
    frames: int | None
    frames_source: str | None
    window_ns: int
    window_source: str
    window_ranges: int  # NVTX ranges used (0 = activity span)
    engines: dict[str, EngineStats]
    roofline: Roofline
    any_busy_ns: int
    idle_ns: int
    overlap_ns: int
    host_sync_ns: int
    host_sync_calls: tuple[str, ...]
    serialization: float | None  # sum of engine busy / any busy; 1.0 = nothing overlapped
    measured_us_per_frame: float | None  # window / frames
    efficiency: float | None  # roofline us_per_frame / measured us_per_frame
    streams: tuple[StreamStats, ...] | None = None
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out = {
            "pid": self.pid,
            "device": self.device,
            "gpu_name": self.gpu_name,
            "frames": self.frames,
            "frames_source": self.frames_source,
            "window_ns": self.window_ns,
            "window_source": self.window_source,
            "window_ranges": self.window_ranges,
            "engines": {k: v.to_json() for k, v in self.engines.items()},
            "roofline": self.roofline.to_json(),
            "any_busy_ns": self.any_busy_ns,
            "idle_ns": self.idle_ns,
            "overlap_ns": self.overlap_ns,
            "host_sync_ns": self.host_sync_ns,
            "host_sync_calls": list(self.host_sync_calls),
            "serialization": self.serialization,
            "measured_us_per_frame": self.measured_us_per_frame,
            "efficiency": self.efficiency,
            "notes": list(self.notes),
        }
        if self.streams is not None:
            out["streams"] = [s.to_json() for s in self.streams]
        return out


@dataclass(frozen=True, slots=True)
class TraceAnalysis:
    """The analysis of one trace. Attributes below ``primary`` describe the primary group."""

    trace: str
    nsys_version: str | None
    schema_version: str | None
    groups: tuple[GroupAnalysis, ...]
    primary: GroupAnalysis
    warnings: tuple[str, ...] = field(default=())

    # The primary group's figures, for callers that want one group (the probe).
    @property
    def pid(self) -> int:
        return self.primary.pid

    @property
    def device(self) -> int:
        return self.primary.device

    @property
    def gpu_name(self) -> str | None:
        return self.primary.gpu_name

    @property
    def frames(self) -> int | None:
        return self.primary.frames

    @property
    def frames_source(self) -> str | None:
        return self.primary.frames_source

    @property
    def window_ns(self) -> int:
        return self.primary.window_ns

    @property
    def window_source(self) -> str:
        return self.primary.window_source

    @property
    def engines(self) -> dict[str, EngineStats]:
        return self.primary.engines

    @property
    def roofline(self) -> Roofline:
        return self.primary.roofline

    @property
    def any_busy_ns(self) -> int:
        return self.primary.any_busy_ns

    @property
    def idle_ns(self) -> int:
        return self.primary.idle_ns

    @property
    def overlap_ns(self) -> int:
        return self.primary.overlap_ns

    @property
    def host_sync_ns(self) -> int:
        return self.primary.host_sync_ns

    @property
    def serialization(self) -> float | None:
        return self.primary.serialization

    @property
    def measured_us_per_frame(self) -> float | None:
        return self.primary.measured_us_per_frame

    @property
    def efficiency(self) -> float | None:
        return self.primary.efficiency

    @property
    def streams(self) -> tuple[StreamStats, ...] | None:
        return self.primary.streams

    @property
    def notes(self) -> tuple[str, ...]:
        return self.primary.notes

    def to_json(self) -> dict:
        out = {
            "version": JSON_VERSION,
            "tool": f"clusterbench {__version__}",
            "trace": self.trace,
            "nsys_version": self.nsys_version,
            "export_schema_version": self.schema_version,
        }
        out.update(self.primary.to_json())
        if len(self.groups) > 1:
            out["groups"] = [g.to_json() for g in self.groups]
        out["warnings"] = list(self.warnings)
        return out


# --------------------------------------------------------------------------- windows


def _word_prefix(text: str, prefix: str) -> bool:
    """``text`` is ``prefix`` or starts with it followed by a non-word character."""
    if not text.startswith(prefix):
        return False
    return len(text) == len(prefix) or not (text[len(prefix)].isalnum() or text[len(prefix)] == "_")


def _choose_ranges(ranges: NvtxRanges, pid: int, range_name: str | None) -> tuple[NvtxRanges, str | None]:
    """The ranges that form the window for process ``pid``, and the name they matched."""
    if len(ranges) == 0:
        return ranges, None
    if range_name is not None:
        candidates = [(range_name, lambda t: t.startswith(range_name))]
    else:
        candidates = [(p, lambda t, p=p: _word_prefix(t, p)) for p in DEFAULT_PASS_PREFIXES]
    for name, accept in candidates:
        ok = np.array([accept(t) for t in ranges.texts], dtype=bool)  # per distinct text
        found = ranges.select(ok[ranges.text_index])
        if len(found):
            own = found.pid == pid
            return (found.select(own) if own.any() else found), name
    return ranges.select(np.zeros(len(ranges), dtype=bool)), None


def _frames_from_ranges(used: NvtxRanges) -> tuple[int | None, str | None, str | None]:
    """(frames, source, warning) from ``frames=N`` in the range texts."""
    per_text = []
    for t in used.texts:
        m = _FRAMES_RE.search(t)
        per_text.append(int(m.group(1)) if m else -1)
    values = np.array(per_text, dtype=np.int64)[used.text_index]
    n_found = int((values >= 0).sum())
    if n_found == 0:
        return None, None, None
    if n_found < len(used):
        return None, None, f"only {n_found} of {len(used)} NVTX ranges carry frames=N, so frames are unknown; pass FRAMES"
    texts = sorted({used.texts[i] for i in np.unique(used.text_index).tolist()})
    shown = f"'{texts[0]}'" + (f" and {len(texts) - 1} other text(s)" if len(texts) > 1 else "")
    if len(used) == 1:
        return int(values[0]), f"NVTX range text {shown}", None
    return int(values.sum()), f"sum of frames= over {len(used)} NVTX ranges ({shown})", None


# --------------------------------------------------------------------------- per group


def _engine_figures(
    s: np.ndarray, e: np.ndarray, b: np.ndarray | None, window: iv.Intervals
) -> tuple[iv.Intervals, int, int | None]:
    """(busy set clipped to the window, records in the window, bytes in the window)."""
    ps, pe, owner = iv.clip(s, e, window)
    busy = iv.union(ps, pe)  # = union(records) ∩ window
    if owner is None:  # every record lies wholly inside the window
        return busy, int(s.size), (int(b.sum()) if b is not None else None)
    n = s.size
    dur = e - s
    clipped = np.bincount(owner, weights=(pe - ps), minlength=n).astype(np.int64)
    inside = clipped > 0
    zero = dur <= 0
    if zero.any():
        inside = inside | (zero & iv.points_inside(s, window))
    count = int(inside.sum())
    nbytes = None
    if b is not None:
        full = inside & ((clipped == dur) | zero)
        part = inside & ~full
        nbytes = int(b[full].sum())
        if part.any():
            nbytes += int(round(float((b[part] * (clipped[part] / dur[part])).sum())))
    return busy, count, nbytes


def _stats(
    name: str, busy_ns: int, count: int, nbytes: int | None, window_ns: int, frames: int | None
) -> EngineStats:
    is_copy = name != "kernel"
    return EngineStats(
        engine=name,
        busy_ns=busy_ns,
        count=count,
        duty=(busy_ns / window_ns) if window_ns > 0 else None,
        us_per_frame=(busy_ns / 1000.0 / frames) if frames else None,
        bytes=(nbytes or 0) if is_copy else None,
        gbps=((nbytes or 0) / busy_ns if busy_ns > 0 else None) if is_copy else None,
    )


def _with_headroom(stats: dict[str, EngineStats], roof: Roofline, frames: int | None) -> dict[str, EngineStats]:
    out = {}
    for name, st in stats.items():
        if roof.engine is None or name == roof.engine or st.busy_ns == 0:
            out[name] = st
            continue
        gap = roof.busy_ns - st.busy_ns
        out[name] = EngineStats(
            engine=st.engine,
            busy_ns=st.busy_ns,
            count=st.count,
            duty=st.duty,
            us_per_frame=st.us_per_frame,
            bytes=st.bytes,
            gbps=st.gbps,
            headroom=gap / st.busy_ns,
            headroom_us_per_frame=(gap / 1000.0 / frames) if frames else None,
        )
    return out


def _engine_table(
    s: np.ndarray,
    e: np.ndarray,
    eng: np.ndarray,
    b: np.ndarray,
    window: iv.Intervals,
    window_ns: int,
    frames: int | None,
) -> tuple[dict[str, EngineStats], list[iv.Intervals]]:
    stats: dict[str, EngineStats] = {}
    busy_sets: list[iv.Intervals] = []
    counts = np.bincount(eng, minlength=len(S.ENGINES))
    for code, name in enumerate(S.ENGINES):
        if counts[code] == 0:
            if name in S.ALWAYS_REPORTED:
                stats[name] = _stats(name, 0, 0, 0, window_ns, frames)
            continue
        if counts[code] == eng.size:
            es, ee, eb = s, e, b
        else:
            m = eng == code
            es, ee, eb = s[m], e[m], b[m]
        busy, count, nbytes = _engine_figures(es, ee, eb if name != "kernel" else None, window)
        if count == 0 and name not in S.ALWAYS_REPORTED:
            continue
        busy_sets.append(busy)
        stats[name] = _stats(name, iv.length(busy), count, nbytes, window_ns, frames)
    return stats, busy_sets


def _notes(g: GroupAnalysis) -> tuple[str, ...]:
    notes: list[str] = []
    roof = g.roofline
    if roof.engine is None:
        return ("no GPU activity inside the window: check --range",)
    eng = g.engines
    pf = g.frames is not None

    def per_frame(name: str) -> str:
        st = eng[name]
        return f"{st.us_per_frame:.2f} µs/frame" if pf and st.us_per_frame is not None else f"{st.busy_ns / 1e6:.3f} ms"

    notes.append(f"{roof.engine} binds: the tallest bar at {per_frame(roof.engine)} ({(eng[roof.engine].duty or 0):.0%} of the window).")
    k = eng.get("kernel")
    if roof.engine != "kernel" and k is not None and k.busy_ns > 0:
        notes.append(
            f"the kernel ({per_frame('kernel')}) sits below the {roof.engine} bar: a faster kernel does not raise "
            f"throughput until it is the tallest bar; shrink the {roof.engine} traffic instead."
        )
    elif roof.engine == "kernel":
        notes.append("the kernel is the tallest bar: kernel speed-ups pay off end to end.")
    active = [n for n, st in eng.items() if st.busy_ns > 0]
    if len(active) >= 2 and g.serialization is not None:
        if g.serialization < NO_OVERLAP_SERIALIZATION:
            notes.append(
                f"engines take turns (serialization {g.serialization:.2f}x, overlap {g.overlap_ns / 1e6:.3f} ms): "
                "the frame time is the sum of the bars, not the tallest one. Overlap needs copies and kernels on "
                "several streams, cudaMemcpyAsync into pinned host memory, and no per-batch stream or device sync."
            )
        else:
            notes.append(
                f"engines overlap for {g.overlap_ns / 1e6:.3f} ms (serialization {g.serialization:.2f}x): part of the "
                "shorter bars hides behind the others."
            )
    if g.window_ns > 0:
        sync_frac = g.host_sync_ns / g.window_ns
        idle_frac = g.idle_ns / g.window_ns
        if sync_frac >= HOST_SYNC_NOTE_FRACTION:
            calls = ", ".join(g.host_sync_calls) or "synchronize calls"
            if idle_frac >= IDLE_NOTE_FRACTION:
                notes.append(
                    f"the host waits in {calls} for {sync_frac:.0%} of the window and the GPU is idle "
                    f"{idle_frac:.0%} of it: each wait drains the pipeline, so the next copy cannot start under "
                    "the current kernel. Wait on per-buffer events instead, with more batches in flight."
                )
            else:
                # A host that waits while every engine stays busy is only ahead of the GPU (for example one
                # synchronize at the end of an asynchronous pass): the wait costs nothing.
                notes.append(
                    f"the host waits in {calls} for {sync_frac:.0%} of the window, but the GPU stays busy (idle "
                    f"{idle_frac:.1%}): the host is ahead of the GPU, and the waits cost no throughput."
                )
        if idle_frac >= IDLE_NOTE_FRACTION:
            notes.append(
                f"the GPU is idle {idle_frac:.0%} of the window (no engine busy): the host does not feed it fast "
                "enough (launch gaps, host-side work, synchronous calls)."
            )
    if g.efficiency is not None and g.measured_us_per_frame is not None and roof.us_per_frame is not None:
        notes.append(
            f"measured {g.measured_us_per_frame:.2f} µs/frame over the window against a roofline of "
            f"{roof.us_per_frame:.2f} µs/frame: {g.efficiency:.0%} of what the tallest bar allows."
        )
    return tuple(notes)


def _analyze_group(
    data: TraceData,
    idx: np.ndarray | slice,
    pid: int,
    device: int,
    frames_arg: int | None,
    range_name: str | None,
    by_stream: bool,
) -> tuple[GroupAnalysis, list[str]]:
    warnings: list[str] = []
    act = data.activity
    s, e, eng, b = act.start_ns[idx], act.end_ns[idx], act.engine[idx], act.bytes[idx]

    used, matched = _choose_ranges(data.ranges, pid, range_name)
    if len(used):
        window = iv.union(used.start_ns, used.end_ns)
        texts = sorted({used.texts[i] for i in np.unique(used.text_index).tolist()})
        where = "" if bool((used.pid == pid).all()) else " (from other processes: this one has none)"
        window_source = (
            f"NVTX range '{texts[0]}'" if len(used) == 1 else f"{len(used)} NVTX ranges starting with '{matched}'"
        ) + where
    else:
        window = (np.array([s.min()]), np.array([e.max()]))
        window_source = "GPU activity span (first to last GPU record; no NVTX pass range)"
    window_ns = iv.length(window)

    frames, frames_source = None, None
    if frames_arg is not None:
        frames, frames_source = frames_arg, "FRAMES argument"
    elif len(used):
        frames, frames_source, warn = _frames_from_ranges(used)
        if warn:
            warnings.append(warn)

    stats, busy_sets = _engine_table(s, e, eng, b, window, window_ns, frames)
    any_busy_ns, overlap_ns = iv.coverage_lengths(busy_sets, 2)
    total_busy = sum(st.busy_ns for st in stats.values())

    roof_name = None
    roof_busy = 0
    for name, st in stats.items():  # dict order is ENGINES order: ties go to the earlier engine
        if st.busy_ns > roof_busy:
            roof_name, roof_busy = name, st.busy_ns
    roof = Roofline(
        engine=roof_name,
        busy_ns=roof_busy,
        us_per_frame=(roof_busy / 1000.0 / frames) if (frames and roof_name) else None,
        fps=(1e9 * frames / roof_busy) if (frames and roof_busy > 0) else None,
    )
    stats = _with_headroom(stats, roof, frames)

    hs = data.host_sync
    hm = hs.pid == pid
    host_sync_ns = iv.length(iv.intersect(iv.union(hs.start_ns[hm], hs.end_ns[hm]), window)) if hm.any() else 0

    streams = None
    if by_stream and act.stream is not None:
        st_ids = act.stream[idx]
        out = []
        for sid in np.unique(st_ids).tolist():
            m = st_ids == sid
            sstats, ssets = _engine_table(s[m], e[m], eng[m], b[m], window, window_ns, frames)
            sstats = {k: v for k, v in sstats.items() if v.count > 0}
            if not sstats:
                continue  # the stream has no activity inside the window
            out.append(StreamStats(int(sid), sstats, iv.coverage_lengths(ssets, 1)[0]))
        streams = tuple(out)

    g = GroupAnalysis(
        pid=pid,
        device=device,
        gpu_name=data.gpu_name(device),
        frames=frames,
        frames_source=frames_source,
        window_ns=window_ns,
        window_source=window_source,
        window_ranges=len(used),
        engines=stats,
        roofline=roof,
        any_busy_ns=any_busy_ns,
        idle_ns=window_ns - any_busy_ns,
        overlap_ns=overlap_ns,
        host_sync_ns=host_sync_ns,
        host_sync_calls=hs.names,
        serialization=(total_busy / any_busy_ns) if any_busy_ns > 0 else None,
        measured_us_per_frame=(window_ns / 1000.0 / frames) if frames else None,
        efficiency=(roof_busy / window_ns) if (window_ns > 0 and roof_name) else None,
        streams=streams,
    )
    return dataclasses.replace(g, notes=_notes(g)), warnings


# --------------------------------------------------------------------------- entry points


def analyze(
    data: TraceData,
    frames: int | None = None,
    range_name: str | None = None,
    device: int | None = None,
    pid: int | None = None,
    by_stream: bool = False,
    trace_label: str | None = None,
) -> TraceAnalysis:
    """Analyze already-read trace data (pure). See the module docstring for the semantics."""
    if frames is not None and frames <= 0:
        raise InputError(f"FRAMES must be a positive number of frames, got {frames}", hint="pass the frames the traced pass processed, e.g. 10000")
    if range_name is not None and range_name == "":
        raise InputError("--range needs a non-empty NVTX range name", hint="e.g. --range pass")
    if range_name is not None and not any(t.startswith(range_name) for t in data.ranges.texts):
        raise TraceError(
            f"no NVTX range starts with {range_name!r} in {data.path.name}",
            hint="list the ranges with: sqlite3 TRACE \"SELECT DISTINCT text FROM NVTX_EVENTS\"; or leave --range out "
            "to use the probe's pass range or the GPU activity span",
        )
    act = data.activity
    single = len(act) > 0 and bool((act.pid == act.pid[0]).all() and (act.device == act.device[0]).all())
    if single:
        uniq, inverse = np.array([int(act.pid[0]) * (1 << 32) + int(act.device[0])]), None
    else:
        uniq, inverse = np.unique(act.pid * (1 << 32) + act.device, return_inverse=True)
    all_groups = [(int(k >> 32), int(k & 0xFFFFFFFF)) for k in uniq.tolist()]
    wanted = [
        i for i, (p, d) in enumerate(all_groups) if (pid is None or p == pid) and (device is None or d == device)
    ]
    if not wanted:
        have = "; ".join(f"pid {p} device {d}" for p, d in all_groups)
        asked = " ".join(x for x in (f"--pid {pid}" if pid is not None else "", f"--device {device}" if device is not None else "") if x)
        raise InputError(f"no GPU activity for {asked}; the trace has: {have}", hint="pick one of the groups listed")

    groups: list[GroupAnalysis] = []
    warnings: list[str] = []
    if inverse is not None:
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
    for gi in wanted:
        idx = slice(None) if inverse is None else np.sort(order[bounds[gi] : bounds[gi + 1]])
        p, d = all_groups[gi]
        g, w = _analyze_group(data, idx, p, d, frames, range_name, by_stream)
        groups.append(g)
        warnings.extend(f"pid {p} device {d}: {x}" if len(wanted) > 1 else x for x in w)

    primary = max(groups, key=lambda g: g.any_busy_ns)
    if len(groups) > 1:
        warnings.insert(
            0,
            f"the trace has {len(groups)} (process, device) groups; the top level reports pid {primary.pid} "
            f"device {primary.device} (most GPU busy time); every group is under 'groups'. "
            "Pick one with --pid/--device.",
        )
    return TraceAnalysis(
        trace=trace_label if trace_label is not None else str(data.path),
        nsys_version=data.nsys_version,
        schema_version=data.schema_version,
        groups=tuple(groups),
        primary=primary,
        warnings=tuple(warnings),
    )


def analyze_trace(
    path: str | os.PathLike[str],
    frames: int | None = None,
    range_name: str | None = None,
    device: int | None = None,
    pid: int | None = None,
    by_stream: bool = False,
) -> TraceAnalysis:
    """Read ``path`` (an nsys SQLite export, or a .nsys-rep exported through nsys) and analyze it."""
    from clusterbench.trace import read_trace, resolve_trace

    sqlite_path = resolve_trace(path)
    prefixes = (range_name,) if range_name else DEFAULT_PASS_PREFIXES
    data = read_trace(sqlite_path, range_prefixes=prefixes, by_stream=by_stream)
    return analyze(data, frames, range_name, device, pid, by_stream, trace_label=str(Path(path)))
