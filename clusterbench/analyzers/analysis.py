"""Per-engine busy time, roofline, overlap, idle and host sync for one nsys trace (pure).

``analyze(trace_data, ...)`` turns a :class:`~clusterbench.io.nsys.TraceData` into a frozen
:class:`TraceAnalysis`; ``analyze_trace(path, ...)`` reads the file first. Semantics are
docs/analyze.md, "What it measures":

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
  when they have activity in the window;
- ``graph`` is the GPU time of whole CUDA graph executions in a graph-level trace; it is an
  engine like the others (roofline, overlap, idle, headroom) and always comes with a warning;
- a copy or memset whose bytes over its duration exceed any physical rate (RATE_CEILING_GBPS)
  is left out of every figure and reported;
- the "why" notes are rules (clusterbench.analyzers.rules), each with a code and a threshold.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers import rules as R
from clusterbench.analyzers.records import (EngineStats, GroupAnalysis, Roofline, StreamStats,
                                              TraceAnalysis)
from clusterbench.errors import InputError, TraceError
from clusterbench.io.nsys import schema as S
from clusterbench.model.engines import BY_NAME, RATE_CEILING_GBPS
from clusterbench.io.nsys.reader import DEFAULT_PASS_PREFIXES, NvtxRanges, TraceData


_FRAMES_RE = re.compile(r"(?:^|[\s,;:(])frames\s*=\s*(\d+)")
# Kept for callers of version 1; the thresholds live with the rules now.
NO_OVERLAP_SERIALIZATION = R.NO_OVERLAP_SERIALIZATION
HOST_SYNC_NOTE_FRACTION = R.HOST_SYNC_FRACTION
IDLE_NOTE_FRACTION = R.IDLE_FRACTION

# per engine code; inf where records carry no bytes (kernel, graph)
_CEILING = np.array([RATE_CEILING_GBPS.get(e, np.inf) for e in S.ENGINES], dtype=np.float64)
ABSURD_US_PER_FRAME = 0.001  # 1 ns per frame: no pipeline moves or computes a frame that fast


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


def _distinct(x: np.ndarray) -> np.ndarray:
    """The distinct values of a small-range int array (bincount when the range is small)."""
    if x.size == 0:
        return x
    lo, hi = int(x.min()), int(x.max())
    if hi - lo < 1 << 20:
        return np.flatnonzero(np.bincount(x - lo)) + lo
    return np.unique(x)


def _stream_time(ids: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct stream ids of some records, and each one's summed length (ns)."""
    lo, hi = int(ids.min()), int(ids.max())
    if lo == hi:
        return np.array([lo], dtype=np.int64), np.array([float(w.sum())])
    if hi - lo < 1 << 16:
        rel = ids - lo
        per = np.bincount(rel, weights=w)
        # an id without time has no records, or only zero-length ones (still a used stream):
        # count records only then (the per-id array is small, the recount rare)
        used = np.arange(per.size) if per.all() else np.flatnonzero(np.bincount(rel))
        return used + lo, per[used]
    used, inverse = np.unique(ids, return_inverse=True)
    return used, np.bincount(inverse, weights=w, minlength=used.size)


def _working(per_stream_ns: np.ndarray) -> int:
    """Streams that carry at least rules.STREAM_SHARE of the time (all of them when the time is 0)."""
    total = float(per_stream_ns.sum())
    if total <= 0:
        return int(per_stream_ns.size)
    return int((per_stream_ns >= R.STREAM_SHARE * total).sum())


def _engine_figures(
    s: np.ndarray, e: np.ndarray, b: np.ndarray | None, window: iv.Intervals
) -> tuple[iv.Intervals, np.ndarray | None, np.ndarray | None, int | None]:
    """(busy set clipped to the window, records in the window as a mask or None for all, each
    record's length inside the window or None for e - s, bytes in the window)."""
    ps, pe, owner = iv.clip(s, e, window)
    busy = iv.union(ps, pe)  # = union(records) ∩ window
    if owner is None:  # every record lies wholly inside the window
        return busy, None, None, (int(b.sum()) if b is not None else None)
    n = s.size
    dur = e - s
    clipped = np.bincount(owner, weights=(pe - ps), minlength=n).astype(np.int64)
    inside = clipped > 0
    zero = dur <= 0
    if zero.any():
        inside = inside | (zero & iv.points_inside(s, window))
    nbytes = None
    if b is not None:
        full = inside & ((clipped == dur) | zero)
        part = inside & ~full
        nbytes = int(b[full].sum())
        if part.any():
            nbytes += int(round(float((b[part] * (clipped[part] / dur[part])).sum())))
    return busy, inside, clipped, nbytes


def _stats(
    name: str, busy_ns: int, count: int, nbytes: int | None, window_ns: int, frames: int | None, streams: int = 0
) -> EngineStats:
    has_bytes = name in S.BYTE_ENGINES
    return EngineStats(
        engine=name,
        busy_ns=busy_ns,
        count=count,
        duty=(busy_ns / window_ns) if window_ns > 0 else None,
        us_per_frame=(busy_ns / 1000.0 / frames) if frames else None,
        bytes=(nbytes or 0) if has_bytes else None,
        gbps=((nbytes or 0) / busy_ns if busy_ns > 0 else None) if has_bytes else None,
        streams=streams,
    )


def _with_headroom(stats: dict[str, EngineStats], roof: Roofline, frames: int | None) -> dict[str, EngineStats]:
    out = {}
    for name, st in stats.items():
        if roof.engine is None or name == roof.engine or st.busy_ns == 0:
            out[name] = st
            continue
        gap = roof.busy_ns - st.busy_ns
        out[name] = dataclasses.replace(
            st, headroom=gap / st.busy_ns, headroom_us_per_frame=(gap / 1000.0 / frames) if frames else None
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
    st_ids: np.ndarray | None = None,
) -> tuple[dict[str, EngineStats], list[iv.Intervals], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Per engine: its figures, its busy set, and (with ``st_ids``) the streams it used in the
    window with each one's time (the sum of its records' lengths inside the window)."""
    stats: dict[str, EngineStats] = {}
    busy_sets: list[iv.Intervals] = []
    used_streams: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    counts = np.bincount(eng, minlength=len(S.ENGINES))
    for code, name in enumerate(S.ENGINES):
        if counts[code] == 0:
            if name in S.ALWAYS_REPORTED:
                stats[name] = _stats(name, 0, 0, 0, window_ns, frames)
            continue
        if counts[code] == eng.size:
            m = None
            es, ee, eb = s, e, b
        else:
            m = eng == code
            es, ee, eb = s[m], e[m], b[m]
        busy, inside, lengths, nbytes = _engine_figures(es, ee, eb if name in S.BYTE_ENGINES else None, window)
        count = int(es.size) if inside is None else int(inside.sum())
        if count == 0 and name not in S.ALWAYS_REPORTED:
            continue
        n_streams = 0
        if st_ids is not None and count:
            ids = st_ids if m is None else st_ids[m]
            w = (ee - es) if lengths is None else lengths
            if inside is not None:
                ids, w = ids[inside], w[inside]
            used_streams[name] = _stream_time(ids, w)
            n_streams = _working(used_streams[name][1])
        busy_sets.append(busy)
        stats[name] = _stats(name, iv.length(busy), count, nbytes, window_ns, frames, n_streams)
    return stats, busy_sets, used_streams


def _implausible(
    s: np.ndarray, e: np.ndarray, eng: np.ndarray, b: np.ndarray, window: iv.Intervals
) -> tuple[np.ndarray | None, dict[str, tuple[int, int, float]]]:
    """Records whose bytes over duration exceed their engine's ceiling: the mask (None when there
    are none) and, per engine, (records in the window, their bytes, the highest rate in GB/s)."""
    dur = np.maximum(e - s, 1)  # a zero-length record is taken as 1 ns, the timer's resolution
    bad = b > _CEILING[eng] * dur
    if not bad.any():
        return None, {}
    idx = np.flatnonzero(bad)
    inside = (iv.clipped_lengths(s[idx], e[idx], window) > 0) | iv.points_inside(s[idx], window)
    out: dict[str, tuple[int, int, float]] = {}
    for code in np.unique(eng[idx]).tolist():
        sel = idx[(eng[idx] == code) & inside]
        if sel.size:
            out[S.ENGINES[code]] = (int(sel.size), int(b[sel].sum()), float((b[sel] / dur[sel]).max()))
    return bad, out


def _frames_of(
    frames_arg: int | None, used: NvtxRanges, warnings: list[str]
) -> tuple[int | None, str | None]:
    if not len(used):
        return (frames_arg, "FRAMES argument") if frames_arg is not None else (None, None)
    in_text, text_source, warn = _frames_from_ranges(used)
    if frames_arg is None:
        if warn:
            warnings.append(warn)
        return in_text, text_source
    if in_text is not None and in_text != frames_arg:
        warnings.append(
            f"the FRAMES argument ({frames_arg:,}) contradicts frames={in_text:,} in the {text_source}; "
            f"used the FRAMES argument ({frames_arg:,}). Leave FRAMES out to use the range text."
        )
    return frames_arg, "FRAMES argument"


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
    st_ids, pageable = act.stream[idx], act.pageable[idx]

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
    frames, frames_source = _frames_of(frames_arg, used, warnings)

    bad, implausible = _implausible(s, e, eng, b, window)
    if bad is not None:
        keep = ~bad
        s, e, eng, b, st_ids, pageable = s[keep], e[keep], eng[keep], b[keep], st_ids[keep], pageable[keep]
        for name, (n, nbytes, top) in implausible.items():
            warnings.append(
                f"{name}: {n:,} record(s) of {nbytes:,} bytes in total report up to {top:,.0f} GB/s, above the "
                f"{RATE_CEILING_GBPS[name]:,.0f} GB/s that no {BY_NAME[name].link} "
                "reaches: the record's bytes or times are wrong. They are left out of busy time, bytes, GB/s and the roofline."
            )

    stats, busy_sets, used_streams = _engine_table(s, e, eng, b, window, window_ns, frames, st_ids)
    for name, (n, nbytes, top) in implausible.items():
        base = stats.get(name) or _stats(name, 0, 0, 0, window_ns, frames)
        stats[name] = dataclasses.replace(
            base, implausible_count=n, implausible_bytes=nbytes, implausible_max_gbps=top,
            implausible_limit_gbps=RATE_CEILING_GBPS[name],
        )  # fmt: skip
    stats = {n: stats[n] for n in S.ENGINES if n in stats}  # display order, also for added engines
    (any_busy_ns, overlap_ns), gap_len = iv.coverage_and_gaps(busy_sets, window, 2)
    total_busy = sum(st.busy_ns for st in stats.values())
    long_gaps = gap_len[gap_len >= R.GAP_NS]

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
    if roof.us_per_frame is not None and roof.us_per_frame < ABSURD_US_PER_FRAME:
        warnings.append(
            f"the result is absurd: {roof.us_per_frame * 1000:.3g} ns per frame for the tallest bar ({roof_name}), "
            f"below the {ABSURD_US_PER_FRAME * 1000:.0f} ns that no GPU pipeline reaches: frames ({frames:,}, from "
            f"{frames_source}) is likely wrong; it must count the frames processed inside the window"
        )

    hs = data.host_sync
    hm = hs.pid == pid
    host_sync_ns = iv.length(iv.intersect(iv.union(hs.start_ns[hm], hs.end_ns[hm]), window)) if hm.any() else 0
    sync_copy_ns, sync_copy_calls, sync_copy_names = 0, 0, ()
    cm = hm & hs.is_call(S.SYNC_COPY_CALLS) if hm.any() else hm
    if cm.any():
        cs, ce = hs.start_ns[cm], hs.end_ns[cm]
        sync_copy_ns = iv.length(iv.intersect(iv.union(cs, ce), window))
        in_window = (iv.clipped_lengths(cs, ce, window) > 0) | iv.points_inside(cs, window)
        sync_copy_calls = int(in_window.sum())
        copy_names = tuple(n for n in hs.names if n in S.SYNC_COPY_CALLS)
        if len(copy_names) == len(hs.names):  # only copy calls: the reader kept no per-call name
            sync_copy_names = copy_names
        else:
            sync_copy_names = tuple(sorted({hs.names[i] for i in np.unique(hs.name_index[cm][in_window]).tolist()}))

    pageable_count = pageable_bytes = 0
    if pageable.any():
        pi = np.flatnonzero(pageable)
        inside = (iv.clipped_lengths(s[pi], e[pi], window) > 0) | iv.points_inside(s[pi], window)
        pageable_count, pageable_bytes = int(inside.sum()), int(b[pi][inside].sum())

    streams = None
    if by_stream:
        out = []
        for sid in _distinct(st_ids).tolist():
            m = st_ids == sid
            sstats, ssets, _ = _engine_table(s[m], e[m], eng[m], b[m], window, window_ns, frames)
            sstats = {k: v for k, v in sstats.items() if v.count > 0}
            if not sstats:
                continue  # the stream has no activity inside the window
            out.append(StreamStats(int(sid), sstats, iv.coverage_lengths(ssets, 1)[0]))
        streams = tuple(out)

    per_stream: dict[int, float] = {}
    for ids, per in used_streams.values():
        for sid, t in zip(ids.tolist(), per.tolist()):
            per_stream[sid] = per_stream.get(sid, 0.0) + t
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
        n_streams=_working(np.array(list(per_stream.values()), dtype=np.float64)) if per_stream else 0,
        engine_streams={n: _working(per) for n, (_, per) in used_streams.items()},
        sync_copy_ns=sync_copy_ns,
        sync_copy_calls=sync_copy_calls,
        sync_copy_names=sync_copy_names,
        pageable_count=pageable_count,
        pageable_bytes=pageable_bytes,
        pageable_known=data.srckind_read,
        idle_gap_count=int(long_gaps.size),
        idle_gap_ns=int(long_gaps.sum()),
        longest_idle_ns=int(gap_len.max()) if gap_len.size else 0,
        graph_trace=data.graph_trace,
        window_intervals=window,
    )
    findings = R.evaluate(g)
    return dataclasses.replace(g, findings=findings, notes=tuple(f.message for f in findings)), warnings


# --------------------------------------------------------------------------- entry points


def analyze(
    data: TraceData,
    frames: int | None = None,
    range_name: str | None = None,
    device: int | None = None,
    pid: int | None = None,
    by_stream: bool = False,
    trace_label: str | None = None,
    what_if: tuple[Any, ...] = (),
) -> TraceAnalysis:
    """Analyze already-read trace data (pure). See the module docstring for the semantics.

    ``what_if`` takes whatif.Change records (whatif.parse_changes parses ``--what-if``); the
    result for the primary group is ``TraceAnalysis.what_if``.
    """
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
    graph_warning = None
    if data.graph_trace == "graph" and bool((act.engine == S.ENGINE_CODE["graph"]).any()):
        graph_warning = R.GRAPH_WARNING
        warnings.insert(0, graph_warning)
    wif = None
    if what_if:
        from clusterbench.analyzers.whatif import what_if as _what_if

        wif = _what_if(primary, tuple(what_if))
    return TraceAnalysis(
        trace=trace_label if trace_label is not None else str(data.path),
        nsys_version=data.nsys_version,
        schema_version=data.schema_version,
        groups=tuple(groups),
        primary=primary,
        warnings=tuple(warnings),
        graph_warning=graph_warning,
        what_if=wif,
    )


def load_trace(path: str | os.PathLike[str], range_name: str | None = None) -> TraceData:
    """Read ``path`` (an nsys SQLite export, or a .nsys-rep/.qdrep exported through nsys) for ``analyze``."""
    from clusterbench.io.nsys import read_trace, resolve_trace

    sqlite_path = resolve_trace(path)
    prefixes = (range_name,) if range_name else DEFAULT_PASS_PREFIXES
    return read_trace(sqlite_path, range_prefixes=prefixes)


def analyze_trace(
    path: str | os.PathLike[str],
    frames: int | None = None,
    range_name: str | None = None,
    device: int | None = None,
    pid: int | None = None,
    by_stream: bool = False,
    what_if: tuple[Any, ...] = (),
) -> TraceAnalysis:
    """Read ``path`` (an nsys SQLite export, or a .nsys-rep exported through nsys) and analyze it."""
    data = load_trace(path, range_name)
    return analyze(data, frames, range_name, device, pid, by_stream, trace_label=str(Path(path)), what_if=what_if)
