"""The calls the GPU held (analyzers.held) over time slabs, with state that does not grow with the trace (pure).

held.find answers each call from the rows and calls around it; this runs held.find itself on a small
*context* per batch of calls (the calls that start in one slab), so the answers are held.find's:
- the rows and calls of the batch's slab and of the LAG slabs after it (rows run after the calls that
  issue them, and a wait awaits rows issued before it that may start later: the queue), less those of
  the look-ahead that no answer of the batch can read (issued after it and starting after its calls
  returned: HeldStream._lookahead), so that each row is in about one context, not LAG + 1;
- from earlier slabs, what an answer can still come from: per stream, every row from the first one
  still running at the slab's start on, and the latest-ending row before those; per kernel name, the
  row of its first launch (the least correlation id); per event, the row its latest record before the
  batch waits for; and the launch call of every row kept.
Every relative order held.find reads (rows by engine and start, calls by start, streams by correlation
id) is the whole trace's, so ties fall the same way.

Exactness rests on facts checked as the rows come, and the pass is refused (:class:`NotLocal`) where one
fails, so that the caller falls back to the whole-array path, or tries again with a longer lag:
- the rows of each stream come in correlation order (held.find's stream order is then time order);
- no row has correlation id 0 (a row the device launched: held.find puts it first on its stream,
  ahead of every row of the whole trace); a row whose id matches no call read (its launch call lies
  outside the plan's region) is ordered by time, as held.find orders it, from the rows around it;
- no row arrives after a batch that was answered without it: a row whose correlation id is at most the
  largest of a batch already answered means the lag was too short.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from clusterbench.analyzers import critical_path as P
from clusterbench.analyzers import held as held_mod
from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers import links as links_mod
from clusterbench.analyzers.beside import beside
from clusterbench.analyzers.model import EngineRecords, GroupTrace, split_engines
from clusterbench.io.nsys import reader as R
from clusterbench.io.nsys import schema as S
from clusterbench.io.nsys.slabs import Slab

_HIGH = np.iinfo(np.int64).max


class NotLocal(Exception):
    """The trace breaks a fact the slab-wise held calls rely on (see the module docstring)."""

    def __init__(self, why: str, lag_too_short: bool = False) -> None:
        super().__init__(why)
        self.lag_too_short = lag_too_short


@dataclass(frozen=True, slots=True, eq=False)
class HeldCalls:
    """held.find's records of one batch, with the call and the row named by their place in the whole
    trace (call: its index among the process's calls in start order; row: (engine code, index among
    that engine's rows)) and what the consumers read of them."""

    call: np.ndarray  # global call index
    row_engine: np.ndarray
    row_index: np.ndarray
    release: np.ndarray
    wait: np.ndarray
    cause: np.ndarray
    blocked_ns: np.ndarray
    depth: np.ndarray
    thread: np.ndarray  # the call's thread (SlabReader's index)
    name: np.ndarray  # the call's name
    cstart: np.ndarray
    cend: np.ndarray
    own: np.ndarray  # the row is the call's own (launched by it)
    row_bytes: np.ndarray
    row_end: np.ndarray


_ROWCOLS = ("start", "end", "stream", "corr", "bytes", "pageable", "name", "gid")
_CALLCOLS = ("start", "end", "thread", "name", "corr", "seq")


def _rows_of(r: EngineRecords, gid0: int) -> dict[str, np.ndarray]:
    n = len(r)
    return {
        "start": r.start_ns, "end": r.end_ns, "stream": r.stream.astype(np.int64),
        "corr": (r.correlation if r.correlation is not None else np.zeros(n, np.int64)).astype(np.int64),
        "bytes": (r.bytes if r.bytes is not None else np.zeros(n, np.int64)).astype(np.int64),
        "pageable": r.pageable if r.pageable is not None else np.zeros(n, bool),
        "name": (r.name if r.name is not None else np.full(n, -1, np.int64)).astype(np.int64),
        "gid": np.arange(gid0, gid0 + n, dtype=np.int64),
    }  # fmt: skip


def _cat(parts: list[dict[str, np.ndarray]], keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    parts = [p for p in parts if p is not None and p[keys[0]].size]
    if not parts:
        return {k: np.empty(0, dtype=bool if k == "pageable" else np.int64) for k in keys}
    return {k: np.concatenate([p[k] for p in parts]) for k in keys}


def _take(d: dict[str, np.ndarray], m: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[m] for k, v in d.items()}


def _member(x: np.ndarray, values: np.ndarray) -> np.ndarray:
    """np.isin(x, values) for ``values`` sorted (a binary search per element, no sort of x)."""
    if values.size == 0:
        return np.zeros(x.shape, dtype=bool)
    k = np.minimum(np.searchsorted(values, x), values.size - 1)
    return values[k] == x


class HeldStream:
    """held.find over slabs (see the module docstring): ``add`` each slab, then ``finish``; the records of
    each batch come out through ``out`` (a callable taking a HeldCalls)."""

    def __init__(self, pid: int, device: int, window: iv.Intervals, region: iv.Intervals | None, records, syncs_pid: int,
                 stream_flags: dict, corr_range: tuple[int, int] | None, rd, out, lag: int = 2, path=None) -> None:  # noqa: ANN001  # fmt: skip
        self.pid, self.device, self.window, self.region = pid, device, window, region
        self.records, self.stream_flags, self.corr_range, self.rd, self.out, self.lag = records, stream_flags, corr_range, rd, out, lag
        self.rows: dict[int, dict[str, np.ndarray]] = {}  # per engine code: rows kept and pending, in start order
        self.n_rows: dict[int, int] = {}  # per engine: rows seen (the next row's index)
        self.calls = _cat([], _CALLCOLS)
        self.n_calls = 0
        self.syncs: list[tuple[int, R.SyncEvents]] = []  # (slab index, the slab's rows of this process)
        self.batches: list[tuple[int, int, int, int]] = []  # (slab index, t0, first call, past the last call)
        self.max_x = 0  # the largest correlation id of a batch answered
        self.last_corr: dict[int, int] = {}  # per stream: the correlation id of its latest row (order check)
        self.first_of_name: dict[int, tuple[int, int, int]] = {}  # kernel name -> (corr, engine, gid) of its first launch
        self.event_rows: dict[int, tuple[int, int]] = {}  # event id -> (engine, gid) of the row its latest record awaits
        self.slab_index = -1
        self.events_from = np.iinfo(np.int64).min  # records below this id have their source row noted
        self.names_cache: tuple[str, ...] = ()
        self.path = path  # a stream_path.PathStream fed each batch's context, when the critical path is wanted
        self._events_by_id = self._by_id(*self._event_source())  # _call_streams' event source: the same every batch
        # the streams of the legacy default stream's classes (by their flags), for _prune
        self._null_streams = np.array(sorted(k for k, f in (stream_flags or {}).items() if f == S.STREAM_NULL), dtype=np.int64)
        self._blocking_streams = np.array(sorted(k for k, f in (stream_flags or {}).items() if f == S.STREAM_BLOCKING), dtype=np.int64)

    # ------------------------------------------------------------------ input

    def add(self, slab: Slab, thread_pid: np.ndarray) -> None:
        self.slab_index += 1
        engines, _ = split_engines(slab.activity, self.pid, self.device)
        news = []
        for name, r in engines.items():
            code = S.ENGINE_CODE[name]
            got = _rows_of(r, self.n_rows.get(code, 0))
            self.n_rows[code] = self.n_rows.get(code, 0) + len(r)
            self.rows[code] = _cat([self.rows.get(code), got], _ROWCOLS)
            news.append(got)
        if news:
            every = _cat(news, _ROWCOLS)
            every["eng"] = np.concatenate([np.full(x["start"].size, S.ENGINE_CODE[n], np.int64) for n, x in zip(engines, news)])
            o = np.argsort(every["start"], kind="stable")
            every = _take(every, o)
            self._check(every)
            if self.path is not None:
                self.path.rows_arrived(every["stream"], every["corr"], every["eng"], every["gid"])
        api = slab.api
        n = api["start"].size
        seq = np.arange(self.n_calls, self.n_calls + n, dtype=np.int64)
        self.n_calls += n
        if n:
            mine = thread_pid[api["thread"]] == self.pid
            if self.region is not None:
                mine &= R._touches(api["start"], api["end"], self.region)
            calls = {k: api[k][mine] for k in ("start", "end", "thread", "name", "corr")}
            calls["seq"] = seq[mine]
        else:
            calls = _cat([], _CALLCOLS)
        first = int(self.calls["start"].size)
        self.calls = _cat([self.calls, calls], _CALLCOLS)
        sy = slab.syncs
        if len(sy):
            m = np.asarray(sy.pid) == self.pid
            if m.any():
                self.syncs.append((self.slab_index, R.SyncEvents(*(np.asarray(getattr(sy, f.name))[m] for f in dataclasses.fields(R.SyncEvents)))))
        self.batches.append((self.slab_index, slab.t0 if slab.t0 is not None else np.iinfo(np.int64).min, first,
                             int(self.calls["start"].size)))  # fmt: skip
        self.names_cache = slab.activity.kernel_names
        while len(self.batches) > self.lag:
            self._answer()

    def finish(self) -> None:
        while self.batches:
            self._answer()

    def _check(self, got: dict[str, np.ndarray]) -> None:
        corr = got["corr"]
        if (corr <= 0).any():
            raise NotLocal("a row without a correlation id (launched by the device)")
        if corr.size and int(corr.min()) <= self.max_x:
            raise NotLocal("a row issued before calls already answered arrived later than the lag", lag_too_short=True)
        # each stream's rows in correlation order (the rows come in start order)
        st = got["stream"]
        for s in iv.distinct(st):
            c = corr[st == s]
            prev = self.last_corr.get(s, -1)
            if (c[0] < prev) or (c.size > 1 and bool((c[1:] < c[:-1]).any())):
                raise NotLocal(f"the rows of stream {s} do not come in correlation order")
            self.last_corr[s] = int(c[-1])
        k = got["name"]
        for name in iv.distinct(k[k >= 0]):
            m = k == name
            j = int(np.argmin(np.where(m, corr, _HIGH)))
            best = self.first_of_name.get(name)
            if best is None or int(corr[j]) < best[0]:
                self.first_of_name[name] = (int(corr[j]), -1, int(got["gid"][j]))

    # ------------------------------------------------------------------ a batch

    def _lookahead(self, c_lo: int, c_hi: int, t1: int) -> tuple[dict[int, np.ndarray] | None, np.ndarray | None]:
        """The rows a batch's answer can read, per engine a mask over ``self.rows``, and the calls, a mask over
        ``self.calls`` (None: every one). Left out: the look-ahead rows that start after B, the batch's calls'
        latest end (or t1), and were issued after X, the largest correlation id of the calls up to the batch's,
        of the rows starting before t1, and of the rows before the next call (those _note_events reads), but
        for each stream the first of them (least correlation id: the target of a cudaStreamWaitEvent). Such
        a row is issued after every call answered and every row written, and runs after every one of them
        returned: no held call, blocked time, queue depth, predecessor or first node reads it. And the calls
        after the batch's that start after B, were issued after X and launched no row kept (with the plan's
        correlation-id range known: a row's device-launched mark does not hang on the calls read): they
        come after every call read by index, so the batch's indices stay."""
        c = self.calls
        if t1 == _HIGH or c_hi >= c["corr"].size:
            return None, None
        x = int(c["corr"][c_hi]) - 1
        if c_hi:
            x = max(x, int(c["corr"][:c_hi].max()))
        b = max(t1, int(c["end"][c_lo:c_hi].max())) if c_hi > c_lo else t1
        for r in self.rows.values():
            early = r["start"] < t1
            if early.any():
                x = max(x, int(r["corr"][early].max()))
        drop = {code: (r["start"] > b) & (r["corr"] > x) for code, r in self.rows.items()}
        if not any(d.any() for d in drop.values()):
            return None, None
        st = np.concatenate([r["stream"][drop[code]] for code, r in self.rows.items()])
        co = np.concatenate([r["corr"][drop[code]] for code, r in self.rows.items()])
        o = np.lexsort((co, st))
        st, co = st[o], co[o]
        first = np.r_[True, st[1:] != st[:-1]]
        fs, fc = st[first], co[first]  # per stream (sorted) its least correlation id left out
        for code, r in self.rows.items():
            d = np.flatnonzero(drop[code])
            if d.size:
                k = np.searchsorted(fs, r["stream"][d])
                drop[code][d[fc[k] == r["corr"][d]]] = False
        keep = {code: ~d for code, d in drop.items()}
        keep_c = None
        lo = max(c_hi, 1)
        if self.corr_range is not None and bool((c["corr"][:c_hi] > 0).any()):
            late = np.flatnonzero((c["start"][lo:] > b) & (c["corr"][lo:] > x)) + lo
            if late.size:
                rc = np.sort(np.concatenate([r["corr"][keep[code]] for code, r in self.rows.items()]))
                late = late[~_member(c["corr"][late], rc)]
                if late.size:
                    keep_c = np.ones(c["corr"].size, dtype=bool)
                    keep_c[late] = False
        return keep, keep_c

    def _context(self, keep: dict[int, np.ndarray] | None = None, keep_c: np.ndarray | None = None,
                 ) -> tuple[GroupTrace, dict[int, np.ndarray], np.ndarray]:  # fmt: skip
        """The batch's context: the rows and calls kept (with the masks of _lookahead, those)."""
        engines: dict[str, EngineRecords] = {}
        gids: dict[int, np.ndarray] = {}
        rows = self.rows if keep is None else {code: _take(r, keep[code]) for code, r in self.rows.items()}
        c = self.calls if keep_c is None else _take(self.calls, keep_c)
        for code in sorted(rows):
            r = rows[code]
            if r["start"].size == 0:
                continue
            name = S.ENGINES[code]
            engines[name] = EngineRecords(name, r["start"], r["end"], r["bytes"] if name in S.BYTE_ENGINES else None, r["stream"],
                                          r["pageable"] if name in S.COPY_ENGINES else None,
                                          r["name"] if name == "kernel" else None, r["corr"])  # fmt: skip
            gids[code] = r["gid"]
        rd = self.rd
        keys = list(rd.threads_map.keys)
        threads = tuple(R.Thread(int(k) >> 24, int(k) & 0xFFFFFF, None) for k in keys)
        names, cats, _ = rd.name_snapshot()
        syncs = self._sync_rows()
        api = R.ApiCalls(start_ns=c["start"], end_ns=c["end"], thread=c["thread"], name=c["name"], correlation=c["corr"],
                         stream=self._call_streams(rows, syncs, c["corr"]), names=names, name_category=cats,
                         threads=threads, totals=R._empty_totals(), plan=R.KEEP_ALL,
                         tables=tuple(x.table for x in rd.cursors if x.table in S.API_TABLES))  # fmt: skip
        g = GroupTrace(pid=self.pid, device=self.device, gpu_name=None, engines=engines, implausible={},
                       kernel_names=self.names_cache, first_ns=0, last_ns=0, holes=iv.empty(), api=api, overhead=None,
                       graph_trace=None, srckind_read=True, syncs=syncs, stream_flags=self.stream_flags, events=self.records)  # fmt: skip
        return g, gids, c["seq"]

    def _sync_rows(self) -> R.SyncEvents:
        parts = [s for _, s in self.syncs]
        if not parts:
            return R.no_syncs()
        return R.SyncEvents(*(np.concatenate([np.asarray(getattr(x, f.name)) for x in parts]) for f in dataclasses.fields(R.SyncEvents)))

    def _event_source(self) -> tuple[np.ndarray, np.ndarray]:
        ev = self.records
        if ev is None or not len(ev):
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        m = np.asarray(ev.pid) == self.pid
        return np.asarray(ev.correlation)[m], np.asarray(ev.stream)[m]

    @staticmethod
    def _by_id(sc: np.ndarray, ss: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Correlation ids and streams of one source, the named ones only, by id, then stream: the last of a run
        is the largest stream."""
        ok = (sc > 0) & (ss >= 0)
        sc, ss = sc[ok].astype(np.int64, copy=False), ss[ok].astype(np.int64, copy=False)
        o = np.lexsort((ss, sc))
        return sc[o], ss[o]

    def _call_streams(self, rows: dict[int, dict[str, np.ndarray]], sy: R.SyncEvents, c: np.ndarray) -> np.ndarray:
        """Each context call's stream as the reader names it (``c``: their correlation ids; ``rows``: the
        context's; ``sy``: its synchronization rows): its GPU rows' (the largest), else its synchronization
        row's, else its CUDA event row's; -1 for none."""
        out = np.full(c.size, -1, dtype=np.int64)
        todo = np.flatnonzero(c > 0)  # the calls not named yet: each source is searched for those alone
        rows = _cat([rows[k] for k in rows], ("corr", "stream"))
        sources = (self._by_id(rows["corr"], rows["stream"]), self._by_id(np.asarray(sy.correlation), np.asarray(sy.stream)),
                   self._events_by_id)  # fmt: skip
        for sc, ss in sources:
            if sc.size == 0 or todo.size == 0:
                continue
            cc = c[todo]
            k2 = np.searchsorted(sc, cc, side="right") - 1
            hit = (k2 >= 0) & (sc[np.maximum(k2, 0)] == cc)
            out[todo[hit]] = ss[k2[hit]]
            todo = todo[~hit]
        return out

    def _answer(self) -> None:
        slab_index, t0, c_lo, c_hi = self.batches.pop(0)
        t1 = self.batches[0][1] if self.batches else _HIGH
        g, gids, seq = self._context(*self._lookahead(c_lo, c_hi, t1))
        if self.path is not None:
            links = links_mod.build(g, self.corr_range)
            # the rows' own predecessors need no held calls: made beside held.find
            src = self.path.event_sources(g, links, gids, seq, c_lo, c_hi)
            preds = beside(P.row_predecessors, links, g.syncs, g.events, src)
            held = held_mod.find(links, self.window, g.syncs, g.events)
            self.path.batch(self, g, links, held, gids, seq, c_lo, c_hi, t0, t1, row_preds=preds.result())
            del preds, src
        if c_hi > c_lo:
            if self.path is None:
                links = links_mod.build(g, self.corr_range)
                held = held_mod.find(links, self.window, g.syncs, g.events)
            # the context's call indices are its calls in order; links keeps the process's (every one here)
            pick = (held.call >= c_lo) & (held.call < c_hi)
            if pick.any():
                hc, hr = held.call[pick], held.row[pick]
                eng = links.engine[hr].astype(np.int64)
                gid_of = np.full(links.n_rows, -1, dtype=np.int64)
                for code, gg in gids.items():
                    gid_of[int(links.engine_lo[code]) : int(links.engine_lo[code]) + gg.size] = gg
                rid = gid_of[hr]
                self.out(HeldCalls(
                    call=seq[hc], row_engine=eng, row_index=rid, release=held.release[pick], wait=held.wait[pick],
                    cause=held.cause[pick], blocked_ns=held.blocked_ns[pick], depth=held.depth[pick],
                    thread=g.api.thread[hc].astype(np.int64), name=g.api.name[hc].astype(np.int64),
                    cstart=g.api.start_ns[hc], cend=g.api.end_ns[hc], own=links.launch[hr] == hc,
                    row_bytes=links.nbytes[hr].astype(np.int64), row_end=links.end[hr],
                ))  # fmt: skip
            self.max_x = max(self.max_x, int(g.api.correlation[c_lo:c_hi].max()) if c_hi > c_lo else 0)
            self._note_events(links, gids, c_hi)
        elif self.records is not None and len(self.records):
            if self.path is None:
                links = links_mod.build(g, self.corr_range)
            self._note_events(links, gids, c_hi)
        self._prune(c_hi)

    def _note_events(self, links: links_mod.Links, gids: dict[int, np.ndarray], c_hi: int) -> None:
        """Per event, the row its latest record before the next batch awaits (held._event_sources' source),
        found now while the rows it needs are in the context."""
        ev = self.records
        if ev is None or not len(ev):
            return
        nxt = int(self.calls["corr"][c_hi]) if c_hi < self.calls["corr"].size else _HIGH
        rc = np.asarray(ev.correlation)
        m = (np.asarray(ev.pid) == self.pid) & (np.asarray(ev.device) == self.device) & (rc < nxt) & (rc >= self.events_from)
        self.events_from = nxt
        if not m.any():
            return
        e_ids, e_corr, e_stream = (np.asarray(x)[m].astype(np.int64) for x in (ev.event, ev.correlation, ev.stream))
        for e in iv.distinct(e_ids):
            k = np.flatnonzero(e_ids == e)
            k = k[np.argmax(e_corr[k])]
            src = links.last_on_stream_before(links.rank_of(np.array([e_stream[k]])), np.array([e_corr[k]]))[0]
            if src >= 0:
                eng = int(links.engine[src])
                self.event_rows[e] = (eng, int(gids[eng][src - int(links.engine_lo[eng])]))

    def _prune(self, c_hi: int) -> None:
        """Keep what later batches can need (the module docstring), drop the rest."""
        t = self.batches[0][1] if self.batches else _HIGH
        forever: dict[int, set[int]] = {}
        for corr, _, gid in self.first_of_name.values():
            forever.setdefault(S.ENGINE_CODE["kernel"], set()).add(gid)
        for eng, gid in self.event_rows.values():
            forever.setdefault(eng, set()).add(gid)
        if self.path is not None:  # the rows of the exits the path's next batches can leave a thread at
            for eng, gids in self.path.kept_rows.items():
                forever.setdefault(eng, set()).update(gids)
        keeps = {code: (r["start"] >= t) | np.isin(r["gid"], list(forever.get(code, ()))) for code, r in self.rows.items()}
        # per stream, over every engine, in stream order (correlation id, start, engine, index): from the first
        # row still running at t on, and the latest-ending row before it
        parts = [(code, np.flatnonzero(r["start"] < t)) for code, r in self.rows.items()]
        parts = [(code, idx) for code, idx in parts if idx.size]
        if parts:
            code_of = np.concatenate([np.full(idx.size, code, np.int64) for code, idx in parts])
            at = np.concatenate([idx for _, idx in parts])
            col = {k: np.concatenate([self.rows[code][k][idx] for code, idx in parts]) for k in ("stream", "corr", "start", "end", "gid")}
            order = np.lexsort((col["gid"], code_of, col["start"], col["corr"], col["stream"]))
            st = col["stream"][order]
            bounds = np.flatnonzero(np.r_[True, st[1:] != st[:-1], True])
            for b0, b1 in zip(bounds[:-1], bounds[1:]):
                o = order[b0:b1]
                running = np.flatnonzero(col["end"][o] > t)
                cut = int(running[0]) if running.size else o.size
                sel = list(o[cut:])
                if cut > 0:
                    e = col["end"][o[:cut]]
                    sel.append(o[:cut][np.flatnonzero(e == e.max())[-1]])
                for j in sel:
                    keeps[int(code_of[j])][int(at[j])] = True
        if self.path is not None:
            # per engine the latest-ending row (ties: the later), and on the legacy default stream's classes: the
            # critical path's engine and default-stream orders reach back to them
            for code, r in self.rows.items():
                drop = np.flatnonzero(~keeps[code])
                if drop.size:
                    e = r["end"][drop]
                    keeps[code][drop[np.flatnonzero(e == e.max())[-1]]] = True
                    sd = r["stream"][drop]
                    null = np.isin(sd, self._null_streams)
                    for cls in (null, null | np.isin(sd, self._blocking_streams)):
                        if cls.any():
                            d = drop[cls]
                            keeps[code][d[np.flatnonzero(r["end"][d] == r["end"][d].max())[-1]]] = True
        for code in list(self.rows):
            self.rows[code] = _take(self.rows[code], keeps[code])
        # calls: those of batches still to answer, and the launch calls of the rows kept
        c = self.calls
        keep_c = np.ones(c["start"].size, dtype=bool)  # the later calls, and of the batch's the launch calls
        rc = np.sort(np.concatenate([self.rows[k]["corr"] for k in self.rows])) if self.rows else np.empty(0, np.int64)
        keep_c[:c_hi] = _member(c["corr"][:c_hi], rc) & (c["corr"][:c_hi] > 0)
        if self.path is not None:
            kept = self.path.kept_calls
            keep_c |= np.isin(c["seq"], np.fromiter(kept, dtype=np.int64, count=len(kept)))
        self.calls = _take(c, keep_c)
        shift = int((~keep_c[:c_hi]).sum())
        self.batches = [(i, t0, lo - shift, hi - shift) for i, t0, lo, hi in self.batches]
        # synchronization rows start inside their calls: those of slabs still to answer
        first_slab = self.batches[0][0] if self.batches else self.slab_index + 1
        self.syncs = [(i, s) for i, s in self.syncs if i >= first_slab]
