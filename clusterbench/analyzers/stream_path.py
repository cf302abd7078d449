"""The critical path over time slabs (pure, but for a temporary file): critical_path's definitions, with
memory that does not grow with the trace.

Forward, batch by batch in the slab-wise held calls' contexts (stream_held.HeldStream): every row's
predecessor, release and launch call (critical_path.predecessors run on the context, with the held calls
of the batch and, from before, the calls at which the walk can still leave each thread), and for each
window interval that ends in the batch's slab, its candidates for the first node (the row ending last by
its end, and per thread the call ending last by it). A row's predecessor ended (or started) by the row's
start, so every row it can be has come by the time the row's batch is answered.
Each row's node is written to a temporary file per engine, in its index order (its start order).

Backward, interval by interval from the last: the walk from the first node to its predecessors, reading
the files back a chunk at a time (a predecessor starts no later than its row); a plain Python loop only
follows the predecessors, and every batch of nodes is cut into segments as critical_path.walk cuts them
and summed with NumPy: per resource, per kernel name, and inside the set-up gaps.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from dataclasses import dataclass

import numpy as np

from clusterbench.analyzers import critical_path as P
from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.held import Held
from clusterbench.analyzers.links import NONE, Links
from clusterbench.io.nsys import schema as S

_NEG = P._NEG
_FIELDS = (("start", np.int64), ("kname", np.int64), ("peng", np.int64), ("pgid", np.int64), ("rel", np.int64),
           ("vstart", np.int64), ("vthread", np.int64))  # fmt: skip
INTERVAL_BLOCK = 1 << 10  # window intervals walked at a time (their nodes within RANGE_CAP, in the benchmark's traces)
CHUNK = 1 << 13  # nodes read back at a time from an engine's files (for the walk, 3 arrays: about 200 KB)


class PathStream:
    """Collects the forward pass (hooked into a HeldStream) and walks at the end."""

    def __init__(self, window: iv.Intervals) -> None:
        self.window = window
        self.dir = tempfile.TemporaryDirectory(prefix="clusterbench-path-")
        self.files: dict[tuple[int, str], object] = {}
        self.count: dict[int, int] = {}
        # retained exits: (thread, call seq, call start, call end, row engine, row gid, row end, release)
        self.exits: list[tuple[int, int, int, int, int, int, int, int]] = []
        # per interval its first node's candidates: [interval, engine, index, end] of the row ending last by its end,
        # and per thread [interval, thread, call end, call seq, row engine, row index, head_lo]
        self.start_rows: list[np.ndarray] = []
        self.start_calls: list[np.ndarray] = []
        self.done_intervals = 0
        self.kept_calls: set[int] = set()  # call seqs the next contexts need (calls ending last by an interval end)
        self.kept_rows: dict[int, set[int]] = {}
        # cudaStreamWaitEvent: per target row (eng, gid), its source (end, wait's call seq, (eng, gid)); and per stream
        # the waits whose target has not come yet: (wait's corr, its call seq, source (eng, gid), source end)
        self.edges: dict[tuple[int, int], tuple[int, int, tuple[int, int]]] = {}
        self.unresolved: dict[int, list[tuple[int, int, tuple[int, int], int]]] = {}

    # ------------------------------------------------------------------ forward

    def _write(self, code: int, cols: dict[str, np.ndarray]) -> None:
        for name, dt in _FIELDS:
            f = self.files.get((code, name))
            if f is None:
                f = self.files[(code, name)] = open(os.path.join(self.dir.name, f"{code}_{name}.bin"), "ab")  # noqa: SIM115
            np.asarray(cols[name], dtype=dt).tofile(f)
        self.count[code] = self.count.get(code, 0) + int(cols["start"].size)

    def event_sources(self, g, links: Links, gids: dict[int, np.ndarray], seq: np.ndarray, c_lo: int, c_hi: int) -> np.ndarray:  # noqa: ANN001
        """Per row of the context ``links``, the row it waits for through cudaStreamWaitEvent (-1: none), with
        the waits of this batch noted (the first step of a batch; it needs no held calls, so the rows' own
        predecessors can be made from it while they are found)."""
        self._seq = seq
        self._event_edges(links, gids, g, c_lo, c_hi)
        src = self._src = np.full(links.n_rows, NONE, dtype=np.int64)
        for key, (_, _, xkey) in self.edges.items():
            j = _local_row(links, gids, *key)
            if j is not None:
                x = _local_row(links, gids, *xkey)
                if x is None:
                    raise AssertionError("an event's source row is not in the context")
                src[j] = x
        return src

    def batch(self, hs, g, links: Links, held: Held, gids: dict[int, np.ndarray], seq: np.ndarray, c_lo: int, c_hi: int,  # noqa: ANN001
              t0: int, t1: int, row_preds: tuple[np.ndarray, np.ndarray] | None = None) -> None:  # fmt: skip
        """One batch: the rows starting in [t0, t1) of the context ``links`` (held: the context's held.find),
        after :meth:`event_sources`; ``row_preds``: critical_path.row_predecessors of the same links and sources,
        when the caller made them (else made here)."""
        # the held calls the rows of this batch can leave a thread at: the batch's, and those kept from before
        pick = (held.call >= c_lo) & (held.call < c_hi)
        ex_call, ex_row, ex_rel = [], [], []
        for th, cs, cstart, cend, reng, rgid, rend, rel in self.exits:
            i = int(np.searchsorted(seq, cs))
            j = _local_row(links, gids, reng, rgid)
            if i >= seq.size or int(seq[i]) != cs or j is None:
                raise AssertionError("a kept exit is not in the context")
            ex_call.append(i)
            ex_row.append(j)
            ex_rel.append(rel)
        calls = np.concatenate([held.call[pick], np.asarray(ex_call, dtype=np.int64)])
        rows = np.concatenate([held.row[pick], np.asarray(ex_row, dtype=np.int64)])
        release = np.concatenate([held.release[pick], np.asarray(ex_rel, dtype=np.int64)])
        o = np.argsort(calls, kind="stable")
        n = calls.size
        hcp = Held(calls[o], rows[o], release[o], np.zeros(n, bool), np.zeros(n, np.int8), np.zeros(n, np.int64), np.zeros(n, np.int64))
        if row_preds is None:
            row_preds = P.row_predecessors(links, g.syncs, g.events, self._src)
        gr = P.predecessors(links, hcp, g.syncs, g.events, rows=row_preds)
        del row_preds
        gid_of = _gid_table(links, gids)
        # the rows of this batch: their nodes, per engine in index order
        for code in range(len(S.ENGINES)):
            lo, hi = int(links.engine_lo[code]), int(links.engine_hi[code])
            if hi == lo:
                continue
            r = np.arange(lo, hi)
            mine = (links.start[r] >= t0) & (links.start[r] < t1)
            r = r[mine]
            if r.size == 0:
                continue
            pr = gr.pred[r].astype(np.int64)
            has = pr >= 0
            peng = np.where(has, links.engine[np.maximum(pr, 0)], -1).astype(np.int64)
            pgid = np.where(has, gid_of[np.maximum(pr, 0)], -1)
            v = gr.via[r].astype(np.int64)
            hv = v >= 0
            vstart = np.where(hv, links.cstart[np.maximum(v, 0)], 0) if links.n_calls else np.zeros(r.size, np.int64)
            vthread = np.where(hv, links.cthread[np.maximum(v, 0)].astype(np.int64), -1) if links.n_calls else np.full(r.size, -1)
            gid = gids[code][r - lo]
            if gid.size and int(gid[0]) != self.count.get(code, 0):
                raise AssertionError("the rows of an engine must come in index order")
            self._write(code, {"start": links.start[r], "kname": links.kname[r].astype(np.int64), "peng": peng, "pgid": pgid,
                               "rel": gr.rel[r], "vstart": vstart, "vthread": vthread})  # fmt: skip
        self.edges = {k: v for k, v in self.edges.items() if not _in_batch(links, gids, k, t0, t1)}
        # the intervals ending in [t0, t1): their first node's candidates
        ws, we = self.window
        k0 = int(np.searchsorted(we, t0, side="left"))
        k1 = int(np.searchsorted(we, t1, side="left"))
        if k1 > max(k0, self.done_intervals):
            self._start_candidates(links, gid_of, gr.threads, seq, np.arange(max(k0, self.done_intervals), k1), we)
        self.done_intervals = max(self.done_intervals, k1)
        # exits kept for later batches: per thread the latest-starting one released by t1, and those after it not yet released
        ex = P._exit_calls(links, hcp)
        keep: list[tuple] = []
        th_of = links.cthread[ex[0]].astype(np.int64) if ex[0].size else np.empty(0, np.int64)
        for t in iv.distinct(th_of):
            m = np.flatnonzero(th_of == t)
            cs = links.cstart[ex[0][m]]
            o = m[np.argsort(cs, kind="stable")]
            rel = np.minimum(links.end[ex[1][o]], links.cend[ex[0][o]])
            fits = np.flatnonzero(rel <= t1)
            first = int(fits[-1]) if fits.size else 0
            for j in range(first, o.size):
                if j != first and rel[j] <= t1:
                    continue
                c, rw = int(ex[0][o[j]]), int(ex[1][o[j]])
                keep.append((t, int(seq[c]), int(links.cstart[c]), int(links.cend[c]), int(links.engine[rw]), _gid(links, gids, rw),
                             int(links.end[rw]), int(rel[j])))  # fmt: skip
        self.exits = keep
        # the next contexts keep these calls and rows; and per thread the calls that can end last by a later interval end
        self.kept_calls = {e[1] for e in keep}
        self.kept_rows = {}
        for e in keep:
            self.kept_rows.setdefault(e[4], set()).add(e[5])
        for _, _, xkey in self.edges.values():
            self.kept_rows.setdefault(xkey[0], set()).add(xkey[1])
        for waits in self.unresolved.values():
            for _, _, xkey, _ in waits:
                self.kept_rows.setdefault(xkey[0], set()).add(xkey[1])
        if links.n_calls:
            later = links.cend > t1
            self.kept_calls.update(seq[later].tolist())
            for t in iv.distinct(links.cthread):
                m = np.flatnonzero(links.cthread == t)
                done = m[~later[m]]
                if done.size:
                    e = links.cend[done]
                    self.kept_calls.add(int(seq[done[np.flatnonzero(e == e.max())[-1]]]))

    def _edge(self, target: tuple[int, int], xend: int, wseq: int, xkey: tuple[int, int]) -> None:
        """The latest-ending source wins a target (ties: the later wait), as critical_path._event_edges."""
        cur = self.edges.get(target)
        if cur is None or (xend, wseq) >= (cur[0], cur[1]):
            self.edges[target] = (xend, wseq, xkey)

    def _event_edges(self, links: Links, gids, g, c_lo: int, c_hi: int) -> None:  # noqa: ANN001
        """critical_path._event_edges for the waits of this batch: each source with its target when the
        target is in the context, else kept until the target row comes (rows_arrived)."""
        waits = np.flatnonzero(P._names_mask(links, P.STREAM_WAIT_EVENT_CALLS))
        waits = waits[(waits >= c_lo) & (waits < c_hi)]
        if waits.size == 0:
            return
        ev = P._call_events(links, waits, g.syncs)
        _, x = P._event_sources(links, ev, links.ccorr[waits], g.events)
        rank = links.rank_of(links.cstream[waits])
        target = links.first_on_stream_after(rank, links.ccorr[waits])
        seq_of = self._seq
        for w, xi, tg, r in zip(waits.tolist(), x.tolist(), target.tolist(), rank.tolist()):
            if xi < 0:
                continue
            xkey = (int(links.engine[xi]), _gid(links, gids, xi))
            if tg >= 0:
                self._edge((int(links.engine[tg]), _gid(links, gids, tg)), int(links.end[xi]), int(seq_of[w]), xkey)
            elif r >= 0:
                sid = int(links.streams[r])
                self.unresolved.setdefault(sid, []).append((int(links.ccorr[w]), int(seq_of[w]), xkey, int(links.end[xi])))

    def rows_arrived(self, stream: np.ndarray, corr: np.ndarray, eng: np.ndarray, gid: np.ndarray) -> None:
        """New rows (in start order): the first on a stream after a wait whose target had not come is its target."""
        if not self.unresolved:
            return
        for sid in list(self.unresolved):
            m = np.flatnonzero(stream == sid)
            if m.size == 0:
                continue
            left = []
            for wc, wseq, xkey, xend in self.unresolved[sid]:
                k = m[np.flatnonzero(corr[m] > wc)]
                if k.size:
                    self._edge((int(eng[k[0]]), int(gid[k[0]])), xend, wseq, xkey)
                else:
                    left.append((wc, wseq, xkey, xend))
            if left:
                self.unresolved[sid] = left
            else:
                del self.unresolved[sid]

    def _start_candidates(self, links: Links, gid_of: np.ndarray, th, seq: np.ndarray, ks: np.ndarray, we: np.ndarray) -> None:  # noqa: ANN001
        """For the intervals ``ks``: the row ending last by each one's end (critical_path._start_nodes), and per
        thread its call ending last by it (ties: the later call) with the row that released its last held call;
        kept as arrays (a few numbers per interval)."""
        w = we[ks].astype(np.int64)
        rows = np.full((ks.size, 4), -1, dtype=np.int64)  # interval, engine, index, end
        rows[:, 0] = ks
        rows[:, 3] = _NEG
        if links.n_rows:
            kr = links.end_rank(w) - 1
            ok = kr >= 0
            r0 = links.by_end[np.maximum(kr, 0)]
            rows[ok, 1] = links.engine[r0[ok]]
            rows[ok, 2] = gid_of[r0[ok]]
            rows[ok, 3] = links.end[r0[ok]]
        self.start_rows.append(rows)
        if links.n_calls:
            for t in iv.distinct(links.cthread):
                m = np.flatnonzero(links.cthread == t)
                o = m[np.lexsort((m, links.cend[m]))]  # by end, ties by call order
                e = links.cend[o]
                k = np.searchsorted(e, w, side="right") - 1
                has = np.flatnonzero(k >= 0)
                if has.size == 0:
                    continue
                c0 = o[k[has]]
                cend = links.cend[c0]
                call, rw = th.before(np.full(has.size, t, dtype=np.int64), cend)
                out = np.full((has.size, 7), -1, dtype=np.int64)  # interval, thread, call end, call seq, row engine, row index, head_lo
                out[:, 0] = ks[has]
                out[:, 1] = t
                out[:, 2] = cend
                out[:, 3] = seq[c0]
                hit = rw >= 0
                out[hit, 4] = links.engine[rw[hit]]
                out[hit, 5] = gid_of[rw[hit]]
                out[:, 6] = _NEG
                out[hit, 6] = np.minimum(links.end[rw[hit]], links.cend[call[hit]])
                self.start_calls.append(out)

    # ------------------------------------------------------------------ backward

    def walk(self, launching: set[int], setup: iv.Intervals, n_threads: int, n_kernels: int) -> _Summed:
        """The walk of every interval and its parts (as critical_path.walk gives them), summed per resource,
        per kernel name and inside the set-up gaps. A block of intervals at a time, from the last: each
        interval's first node and its own segments in NumPy; the walks step together in NumPy over the
        nodes read back per engine around them (_Ranges) while FRONTIER_MIN or more are still going and the
        nodes they reach stay within RANGE_CAP; the rest go on in a plain loop that only follows the
        predecessors (each node's position among the chunks read back). The nodes' stretches are cut and
        summed with NumPy (_Sums), the plain loop's every BATCH nodes."""
        for f in self.files.values():
            f.close()
        ws, we = self.window
        nodes = _Nodes(self.dir.name, self.count)
        sums = _Sums(nodes, setup, P.HOST0 + max(n_threads, 1), max(n_kernels, 1))
        complete = True
        limit = sum(self.count.values()) + 1
        lasts: list[tuple[int, int]] = []  # per walk cut short: (its interval's start, the last node's lo)
        sr = np.concatenate(self.start_rows) if self.start_rows else np.empty((0, 4), dtype=np.int64)
        sc = np.concatenate(self.start_calls) if self.start_calls else np.empty((0, 7), dtype=np.int64)
        self.start_rows = self.start_calls = []
        if sc.size:
            lm = np.isin(sc[:, 1], list(launching))
            sc = sc[lm]
            sc = sc[np.lexsort((sc[:, 3], sc[:, 2], sc[:, 0]))]  # per interval, the last is the latest end (ties: the later call)
        sr = sr[np.argsort(sr[:, 0], kind="stable")]
        call_last = np.searchsorted(sc[:, 0], np.arange(ws.size), side="right") - 1 if sc.size else None

        pos, runs = sums.pos, sums.runs
        add = pos.append
        cs, load = nodes.cs, nodes.load

        def plain(eng: int, gid: int, top: int, w0: int) -> tuple[int, bool]:
            """Follow one walk from node (eng, gid), entered at ``top``, in the interval starting at ``w0``:
            the last release seen, and False when it went round (a cycle: correlation ids out of issue order)."""
            r = top
            runs.append((len(pos), top, w0))  # as sums.run
            left = limit
            while True:
                k = min(left, BATCH - len(pos))
                for _ in range(k):
                    lo, n, base, crel, cpe, cpg = cs[eng]
                    j = gid - lo
                    if j < 0 or j >= n:  # not in the engine's chunk: the one that holds it
                        lo, n, base, crel, cpe, cpg = load(eng, gid)
                        j = gid - lo
                    add(base + j)
                    r = crel[j]
                    if r <= w0:
                        return r, True
                    eng = cpe[j]
                    gid = cpg[j]
                left -= k
                if left <= 0:
                    return r, False
                sums.flush(r, w0)

        for b_hi in range(ws.size, 0, -INTERVAL_BLOCK):
            b_lo = max(0, b_hi - INTERVAL_BLOCK)
            h = _heads(sr, sc, call_last, b_lo, b_hi, ws, we)
            sums.segments(h.seg_a, h.seg_b, h.seg_code)  # each interval's own: after its first node, and its head
            go = np.flatnonzero(h.go)
            if go.size == 0:
                continue
            rest, ok = _walk_together(nodes, sums, h.eng[go], h.gid[go], h.top0[go], h.w0[go], limit, lasts)
            complete &= ok
            for eng, gid, top, w0 in sorted(rest, key=lambda x: -x[3]):  # back in time, as the chunks are read
                r, ok = plain(eng, gid, top, w0)
                if not ok:
                    complete = False
                    lasts.append((w0, max(w0, r)))
            sums.flush(None, 0)
        sums.flush(None, 0)
        if not complete:  # a walk cut short: the rest of each interval walked is idle
            if lasts:
                x = np.array(lasts, dtype=np.int64).reshape(-1, 2)
                sums.segments(x[:, 0], x[:, 1], np.full(x.shape[0], P.IDLE, dtype=np.int64))
        self.dir.cleanup()
        return _Summed(sums.per, sums.kern[:n_kernels], sums.inset, sums.steps, complete)


@dataclass(frozen=True, slots=True, eq=False)
class _Heads:
    """A block of intervals: each one's first node (eng, gid; -1 for none), the top it is entered at, the
    interval's start, whether it is walked, and the intervals' own segments [seg_a, seg_b) with their
    resource codes (after the first node: idle; before it, when the walk began at a call: the thread's host
    time)."""

    eng: np.ndarray
    gid: np.ndarray
    top0: np.ndarray
    w0: np.ndarray
    go: np.ndarray
    seg_a: np.ndarray
    seg_b: np.ndarray
    seg_code: np.ndarray


def _heads(sr: np.ndarray, sc: np.ndarray, call_last: np.ndarray | None, lo: int, hi: int, ws: np.ndarray,
           we: np.ndarray) -> _Heads:  # fmt: skip
    """critical_path.walk's start of each interval lo..hi-1, from the row ending last by its end (``sr``:
    [interval, engine, index, end]) and the launching threads' call ending last by it (``sc``: [interval,
    thread, call end, call seq, row engine, row index, head_lo]; ``call_last``: per interval its last row
    in ``sc``, or -1)."""
    idx = np.arange(lo, hi)
    n = idx.size
    w0 = ws[lo:hi].astype(np.int64)
    w1 = we[lo:hi].astype(np.int64)
    r_eng = np.full(n, -1, dtype=np.int64)
    r_gid = np.full(n, -1, dtype=np.int64)
    r_end = np.full(n, _NEG, dtype=np.int64)
    if sr.size:
        kr = np.searchsorted(sr[:, 0], idx)
        has_row = kr < sr.shape[0]
        has_row[has_row] = (sr[kr[has_row], 0] == idx[has_row]) & (sr[kr[has_row], 1] >= 0)
        x = sr[kr[has_row]]
        r_eng[has_row], r_gid[has_row], r_end[has_row] = x[:, 1], x[:, 2], x[:, 3]
    else:
        has_row = np.zeros(n, dtype=bool)
    has_call = np.zeros(n, dtype=bool)
    c_end = c_thread = c_eng = c_gid = c_head = np.zeros(n, dtype=np.int64)
    if call_last is not None:
        cl = call_last[lo:hi]
        has_call = cl >= 0
        has_call[has_call] = sc[cl[has_call], 0] == idx[has_call]
        x = sc[np.maximum(cl, 0)]
        c_thread, c_end, c_eng, c_gid, c_head = x[:, 1], x[:, 2], x[:, 4], x[:, 5], x[:, 6]
    use_call = has_call & (c_end > r_end)
    first_end = np.where(use_call, c_end, r_end)
    eng = np.where(use_call, c_eng, r_eng)
    gid = np.where(use_call, c_gid, r_gid)
    has_start = np.where(use_call, c_eng >= 0, has_row)
    head_lo = np.where(use_call, c_head, _NEG)
    head_res = np.where(use_call, P.HOST0 + c_thread, P.IDLE)
    top0 = np.where(use_call, head_lo, first_end)
    fe = np.minimum(np.maximum(first_end, w0), w1)
    he = np.where(use_call, fe, w0)
    seg_a = np.concatenate([fe, np.minimum(np.maximum(head_lo, w0), he)])
    seg_b = np.concatenate([w1, he])
    seg_code = np.concatenate([np.full(n, P.IDLE, dtype=np.int64), head_res.astype(np.int64)])
    return _Heads(eng=eng, gid=gid, top0=top0, w0=w0, go=has_start & (top0 > w0), seg_a=seg_a, seg_b=seg_b,
                  seg_code=seg_code)  # fmt: skip


FRONTIER_MIN = P.FRONTIER_MIN  # with this many walks or more still going, they step together (as critical_path.follow)
RANGE_CAP = 1 << 18  # nodes held at once (over every engine) for the walks stepping together: 7 columns, 14 MB
_RANGE_COLS = ("rel", "peng", "pgid", "start", "kname", "vstart", "vthread")  # the walk's, then the rest the sums read


class _Ranges:
    """Per engine a range of its nodes [lo, hi) read back from the files, every column the walk and its sums
    read, and the ranges of every engine laid end to end (``flat``), so that one gather serves every engine."""

    def __init__(self, nodes: _Nodes, cap: int) -> None:
        self.nodes, self.cap = nodes, cap
        e = len(S.ENGINES)
        self.lo = np.zeros(e, dtype=np.int64)
        self.hi = np.zeros(e, dtype=np.int64)
        self.cols: list[dict[str, np.ndarray] | None] = [None] * e
        self.off = np.zeros(e, dtype=np.int64)
        self.flat: dict[str, np.ndarray] = {}

    def held(self) -> int:
        return int((self.hi - self.lo).sum())

    def cover(self, eng: np.ndarray, gid: np.ndarray) -> np.ndarray:
        """Widen the ranges to hold the nodes (eng, gid) where RANGE_CAP allows; per node, whether it is held."""
        inside = (self.lo[eng] <= gid) & (gid < self.hi[eng])
        if inside.all():
            return inside
        grew = False
        for e in iv.distinct(eng[~inside]):
            g = gid[(eng == e) & ~inside]
            a, b = int(g.min()), int(g.max()) + 1
            lo, hi = int(self.lo[e]), int(self.hi[e])
            have = self.cols[e] is not None
            if have:
                a, b = min(a, lo), max(b, hi)
            room = self.cap - (self.held() - (hi - lo))
            if b - a > room:
                continue  # left out: those walks go on in the plain loop
            if have:  # grow back by up to the range held as well (fewer reads as the walks go back)
                a = max(0, a - min(hi - lo, room - (b - a)))
                self.cols[e] = {c: np.concatenate([self.nodes._read(e, c, a, lo), self.cols[e][c], self.nodes._read(e, c, hi, b)])
                                for c in _RANGE_COLS}  # fmt: skip
            else:
                self.cols[e] = {c: self.nodes._read(e, c, a, b) for c in _RANGE_COLS}
            self.lo[e], self.hi[e] = a, b
            grew = True
        if grew:
            parts = [(e, c) for e, c in enumerate(self.cols) if c is not None]
            sizes = np.zeros(len(S.ENGINES), dtype=np.int64)
            for e, c in parts:
                sizes[e] = c["rel"].size
            self.off = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
            self.flat = {c: np.concatenate([x[c] for _, x in parts]) for c in _RANGE_COLS}
        return (self.lo[eng] <= gid) & (gid < self.hi[eng])

    def at(self, eng: np.ndarray, gid: np.ndarray) -> np.ndarray:
        """The places in ``flat`` of nodes held."""
        return self.off[eng] + gid - self.lo[eng]


def _walk_together(nodes: _Nodes, sums: _Sums, eng: np.ndarray, gid: np.ndarray, top0: np.ndarray, w0: np.ndarray,
                   limit: int, lasts: list) -> tuple[list[tuple[int, int, int, int]], bool]:  # fmt: skip
    """Walks from their first nodes (eng, gid), entered at ``top0``, in intervals starting at ``w0``, one
    NumPy step for all of them while FRONTIER_MIN or more are still going and the nodes they reach are held
    within RANGE_CAP; their nodes summed. Returns the walks left, as (eng, gid, top, w0) for the plain loop,
    and False when one went round."""
    alive = np.arange(eng.size)
    ce, cg, top = eng.astype(np.int64), gid.astype(np.int64), top0.astype(np.int64)
    out_e, out_g, out_w, out_s = [], [], [], []
    rg = _Ranges(nodes, RANGE_CAP)
    complete = True
    step = 0
    parked: list[np.ndarray] = []  # walks whose next node lies past the cap: the plain loop's
    while alive.size >= FRONTIER_MIN:
        e, g = ce[alive], cg[alive]
        held = rg.cover(e, g)
        if not held.all():
            parked.append(alive[~held])
            alive, e, g = alive[held], e[held], g[held]
            if alive.size == 0:
                break
        f = rg.at(e, g)
        out_e.append(e)
        out_g.append(g)
        out_w.append(alive)
        out_s.append(np.full(alive.size, step, dtype=np.int64))
        rel = rg.flat["rel"][f]
        pe = rg.flat["peng"][f]
        go = (rel > w0[alive]) & (pe >= 0)
        top[alive] = rel
        nxt = alive[go]
        ce[nxt] = pe[go]
        cg[nxt] = rg.flat["pgid"][f[go]]
        alive = nxt
        step += 1
        if step >= limit:  # a cycle: correlation ids out of issue order
            complete = False
            for a in alive.tolist():
                lasts.append((int(w0[a]), max(int(w0[a]), int(top[a]))))
            alive = alive[:0]
    if out_e:
        ne, ng, nw, ns = (np.concatenate(x) for x in (out_e, out_g, out_w, out_s))
        o = np.lexsort((ns, nw))  # each walk's nodes in walk order, the walks one after the other
        ne, ng, nw = ne[o], ng[o], nw[o]
        first = np.flatnonzero(np.r_[True, nw[1:] != nw[:-1]])
        walked = nw[first]
        rg.cover(ne, ng)  # every node taken is held (the ranges only grew)
        f = rg.at(ne, ng)
        cols = {c: rg.flat[c][f] for c in _SUMMED}
        sums.add_nodes(ne.copy(), cols, first, top0[walked].astype(np.int64), w0[walked].astype(np.int64))
    left = np.concatenate([alive, *parked]) if parked else alive
    return [(int(ce[a]), int(cg[a]), int(top[a]), int(w0[a])) for a in left.tolist()], complete


BATCH = 1 << 15  # nodes summed per NumPy step of the walk
_SUMMED = ("start", "kname", "rel", "vstart", "vthread")  # the columns the sums read


class _Summed:
    """A walk's sums in the shape critical_path.summarize reads (totals, inside)."""

    def __init__(self, per: np.ndarray, kern: np.ndarray, inset: np.ndarray, steps: int, complete: bool) -> None:
        self.per, self.kern, self.inset, self.steps, self.complete = per, kern, inset, steps, complete

    def totals(self, n_threads: int, n_kernels: int) -> tuple[np.ndarray, np.ndarray]:
        return self.per[: P.HOST0 + n_threads], self.kern

    def inside(self, zone: iv.Intervals, size: int) -> np.ndarray:
        return self.inset[:size]


class _Nodes:
    """The nodes of every engine read back from their files, a chunk at a time (the walk goes backwards):
    for the walk their release and predecessor; each node read since the last ``take`` at a position, its
    chunk's base plus its place in the chunk."""

    def __init__(self, folder: str, count: dict[int, int]) -> None:
        self.folder, self.count = folder, count
        # per engine code its latest chunk: (lo, hi - lo, base, rel, peng, pgid), the last three as memoryviews
        # (index: node - lo); (0, 0, ...) for none
        self.cs: list[tuple] = [(0, 0, 0, None, None, None)] * len(S.ENGINES)
        self.held: list[tuple[int, int, int]] = []  # (engine, lo, base) of the chunks given positions, by base
        self.size = 0  # positions given out since the last take

    def _read(self, eng: int, name: str, lo: int, hi: int) -> np.ndarray:
        """Column ``name`` of engine ``eng``'s nodes lo to hi (not included)."""
        with open(os.path.join(self.folder, f"{eng}_{name}.bin"), "rb") as fh:
            return np.fromfile(fh, dtype=np.int64, count=hi - lo, offset=lo * 8)

    def load(self, eng: int, gid: int) -> tuple[int, int, int, memoryview, memoryview, memoryview]:
        """Read the chunk of engine ``eng`` that holds node ``gid``: its ``cs`` entry."""
        lo = max(0, gid - CHUNK + 16)
        hi = min(self.count[eng], lo + CHUNK)
        cols = [memoryview(self._read(eng, name, lo, hi)) for name in ("rel", "peng", "pgid")]
        return self._hold(eng, lo, hi - lo, *cols)

    def _hold(self, eng: int, lo: int, n: int, rel: memoryview, peng: memoryview, pgid: memoryview) -> tuple:
        """Make the chunk of ``n`` nodes from ``lo`` engine ``eng``'s latest, at the next positions: its ``cs`` entry."""
        c = self.cs[eng] = (lo, n, self.size, rel, peng, pgid)
        self.held.append((eng, lo, self.size))
        self.size += n
        return c

    def take(self, p: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The engine and the summed columns of the nodes at positions ``p`` (read back chunk by chunk, each
        over the nodes it holds); then the latest chunk of each engine takes new positions."""
        out = {name: np.empty(p.size, dtype=np.int64) for name in _SUMMED}
        eng = np.empty(p.size, dtype=np.int64)
        if p.size:
            which = np.searchsorted(np.array([h[2] for h in self.held], dtype=np.int64), p, side="right") - 1
            order = np.argsort(which, kind="stable")
            cuts = np.searchsorted(which[order], np.arange(len(self.held) + 1))
            for k, (e, lo, base) in enumerate(self.held):
                sel = order[cuts[k] : cuts[k + 1]]
                if sel.size == 0:
                    continue
                at = p[sel] - base
                a, b = int(at.min()), int(at.max()) + 1
                at -= a
                for name in _SUMMED:
                    out[name][sel] = self._read(e, name, lo + a, lo + b)[at]
                eng[sel] = e
        self.held.clear()
        self.size = 0
        for e, c in enumerate(self.cs):
            if c[3] is not None:
                self._hold(e, c[0], c[1], *c[3:])
        return eng, out


class _Sums:
    """The walk's sums, per resource code, per kernel name and inside the set-up gaps: the nodes' positions
    (``pos``, in walk order, in runs: one per interval walked, from its first node) cut into segments as
    critical_path.walk cuts them, with NumPy, every flush."""

    def __init__(self, nodes: _Nodes, setup: iv.Intervals, size: int, n_kernels: int) -> None:
        self.nodes, self.setup = nodes, setup
        self.per = np.zeros(size, dtype=np.int64)
        self.kern = np.zeros(n_kernels, dtype=np.int64)
        self.inset = np.zeros(size, dtype=np.int64)
        self.pos = array("q")
        self.runs: list[tuple[int, int, int]] = []  # (first node's index in pos, its top, the interval's start)
        self.steps = 0

    def run(self, top: int, w0: int) -> None:
        """A walk starts at the next node: entered at ``top``, in the interval starting at ``w0``."""
        self.runs.append((len(self.pos), top, w0))

    def flush(self, top: int | None, w0: int) -> None:
        """Sum the nodes so far; ``top``: when a walk goes on, the top of its next node."""
        runs = self.runs
        p = np.array(self.pos, dtype=np.int64)
        del self.pos[:]
        eng, cols = self.nodes.take(p)
        if p.size:
            first = np.array([r[0] for r in runs], dtype=np.int64)
            tops = np.array([r[1] for r in runs], dtype=np.int64)
            w0r = np.array([r[2] for r in runs], dtype=np.int64)
            del p
            self.add_nodes(eng, cols, first, tops, w0r)
        runs.clear()
        if top is not None:
            self.run(top, w0)

    def add_nodes(self, eng: np.ndarray, cols: dict[str, np.ndarray], first: np.ndarray, tops: np.ndarray,
                  w0r: np.ndarray) -> None:  # fmt: skip
        """Sum nodes in walk order (``eng``: their engine codes, taken over; ``cols``: their _SUMMED columns,
        taken over), in runs: run k starts at node ``first[k]``, entered at ``tops[k]``, in the interval
        starting at ``w0r[k]`` (a run may hold no node)."""
        n = eng.size
        count = np.diff(np.append(first, n))
        ok = count > 0
        w0s = np.repeat(w0r, count)
        rel = cols["rel"]
        tp = np.empty(n, dtype=np.int64)
        tp[1:] = rel[:-1]
        tp[first[ok]] = tops[ok]
        # each node's stretch [lo, tp): [mid, tp) the row itself; [lo, mid) its predecessor's gap, split at
        # its launch call's start (cut; when the row waited for it) into the thread's host time and the delay
        np.maximum(tp, w0s, out=tp)
        lo = np.maximum(rel, w0s, out=rel)
        del w0s
        mid = np.minimum(np.maximum(cols["start"], lo), tp)
        vt = cols["vthread"]
        has_via = vt >= 0
        cut = np.where(has_via, np.minimum(np.maximum(cols["vstart"], lo), mid), lo)
        kn = cols["kname"]
        m = (kn >= 0) & (tp > mid)
        np.add.at(self.kern, kn[m], (tp - mid)[m])
        meets = None
        zs, ze = self.setup
        if zs.size:  # the stretch meets a set-up gap: the first gap ending after lo starts before tp
            k = np.searchsorted(ze, lo, side="right")
            meets = k < zs.size
            meets[meets] = zs[k[meets]] < tp[meets]
            del k
        eng += P.ENGINE0
        self._add(mid, tp, eng, meets)
        self._add(cut, mid, np.where(has_via, P.LAUNCH, P.IDLE), meets)
        self._add(lo, cut, np.where(has_via, P.HOST0 + vt, P.IDLE), meets)
        self.steps += n

    def segments(self, a: np.ndarray, b: np.ndarray, code: np.ndarray) -> None:
        """Segments [a, b) (none when b <= a) to ``code``, outside any node (the intervals' own)."""
        if a.size:
            self._add(a.astype(np.int64), b.astype(np.int64), code.astype(np.int64), None)

    def _add(self, a: np.ndarray, b: np.ndarray, code: np.ndarray, check: np.ndarray | None) -> None:
        """Segments [a, b) (none when b <= a) to ``code``; inside the set-up gaps only those ``check`` marks
        (None: all)."""
        np.add.at(self.per, code, np.maximum(b - a, 0))
        if self.setup[0].size:
            if check is None:
                inside_sums(a, b, code, self.setup, self.inset)
            elif check.any():
                inside_sums(a[check], b[check], code[check], self.setup, self.inset)


def inside_sums(a: np.ndarray, b: np.ndarray, code: np.ndarray, zone: iv.Intervals, out: np.ndarray) -> None:
    """Add to ``out[code]`` the part of each segment [a, b) (none when b <= a) inside the disjoint
    ``zone``: each segment against the zone intervals it meets, found by binary search (as
    critical_path.Walk.inside), in exact integers."""
    zs, ze = zone
    if zs.size == 0 or a.size == 0:
        return
    k0 = np.searchsorted(ze, a, side="right")  # the first zone interval ending after the segment starts
    k1 = np.searchsorted(zs, b, side="left")  # past the last one starting before it ends
    n = np.maximum(k1 - k0, 0)
    hit = np.flatnonzero(n)
    if hit.size == 0:
        return
    n = n[hit]
    rep = np.repeat(hit, n)
    k = k0[rep] + (np.arange(rep.size) - np.repeat(np.cumsum(n) - n, n))
    inner = np.minimum(b[rep], ze[k]) - np.maximum(a[rep], zs[k])
    m = inner > 0
    np.add.at(out, code[rep[m]], inner[m])


def _gid_table(links: Links, gids: dict[int, np.ndarray]) -> np.ndarray:
    """Per row of the context: its index among its engine's rows of the whole trace."""
    out = np.full(links.n_rows, -1, dtype=np.int64)
    for code, g in gids.items():
        lo = int(links.engine_lo[code])
        out[lo : lo + g.size] = g
    return out


def _gid(links: Links, gids: dict[int, np.ndarray], row: int) -> int:
    eng = int(links.engine[row])
    return int(gids[eng][row - int(links.engine_lo[eng])])


def _in_batch(links: Links, gids: dict[int, np.ndarray], key: tuple[int, int], t0: int, t1: int) -> bool:
    j = _local_row(links, gids, *key)
    return j is not None and t0 <= int(links.start[j]) < t1


def _local_row(links: Links, gids: dict[int, np.ndarray], eng: int, gid: int) -> int | None:
    g = gids.get(eng)
    if g is None:
        return None
    k = int(np.searchsorted(g, gid))
    if k < g.size and int(g[k]) == gid:
        return int(links.engine_lo[eng]) + k
    return None


class _Names:
    def __init__(self, kernel_names: tuple[str, ...]) -> None:
        self.kernel_names = kernel_names


def measure(ps: PathStream, launching: set[int], window: iv.Intervals, setup: iv.Intervals, frames: int | None, threads: tuple,
            kernel_names: tuple[str, ...]):  # noqa: ANN201
    """critical_path.measure's CriticalPath from the forward pass collected in ``ps`` (``launching``: the
    launching threads' indices into ``threads``)."""
    w = ps.walk(launching, setup, len(threads), len(kernel_names))
    return P.summarize(w, _Names(kernel_names), window, setup, frames, threads)
