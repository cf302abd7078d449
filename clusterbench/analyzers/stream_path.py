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
the files back a chunk at a time (a predecessor starts no later than its row), with each node's segments
summed as critical_path.walk cuts them: per resource, per kernel name, and inside the set-up gaps.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from clusterbench.analyzers import critical_path as P
from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.held import Held
from clusterbench.analyzers.links import NONE, Links
from clusterbench.io.nsys import schema as S

_NEG = P._NEG
_FIELDS = (("start", np.int64), ("kname", np.int64), ("peng", np.int64), ("pgid", np.int64), ("rel", np.int64),
           ("vstart", np.int64), ("vthread", np.int64))  # fmt: skip
CHUNK = 1 << 13  # nodes read back per step of the walk (as plain values: about 2.5 MB an engine)


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

    def batch(self, hs, g, links: Links, held: Held, gids: dict[int, np.ndarray], seq: np.ndarray, c_lo: int, c_hi: int,  # noqa: ANN001
              t0: int, t1: int) -> None:  # fmt: skip
        """One batch: the rows starting in [t0, t1) of the context ``links`` (held: the context's held.find)."""
        self._seq = seq
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
        self._event_edges(links, gids, g, c_lo, c_hi)
        src = np.full(links.n_rows, NONE, dtype=np.int64)
        for key, (_, _, xkey) in self.edges.items():
            j = _local_row(links, gids, *key)
            if j is not None:
                x = _local_row(links, gids, *xkey)
                if x is None:
                    raise AssertionError("an event's source row is not in the context")
                src[j] = x
        gr = P.predecessors(links, hcp, g.syncs, g.events, event_src=src)
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
        for t in np.unique(th_of).tolist():
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
            for t in np.unique(links.cthread).tolist():
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
            for t in np.unique(links.cthread).tolist():
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
        per kernel name and inside the set-up gaps; one plain Python step per node."""
        for f in self.files.values():
            f.close()
        ws, we = self.window
        nodes = _Nodes(self.dir.name, self.count)
        size = P.HOST0 + max(n_threads, 1)
        per = [0] * size
        kern = [0] * max(n_kernels, 1)
        inset = [0] * size
        zs, ze = (setup[0].tolist(), setup[1].tolist())
        steps = 0
        complete = True
        limit = sum(self.count.values()) + 1
        firsts: list[tuple[int, int]] = []  # per walked interval: (its start, the last node's lo)
        IDLE, LAUNCH, ENGINE0, HOST0 = P.IDLE, P.LAUNCH, P.ENGINE0, P.HOST0

        def inside(a: int, b: int, code: int) -> None:
            """Add the part of [a, b) inside the set-up gaps (few) to ``code``."""
            k = _bisect_right(ze, a)
            while k < len(zs) and zs[k] < b:
                x = min(b, ze[k]) - max(a, zs[k])
                if x > 0:
                    inset[code] += x
                k += 1

        check = [False]  # whether the current node's stretch meets a set-up gap

        def add(a: int, b: int, code: int) -> None:
            if b > a:
                per[code] += b - a
                if check[0]:
                    inside(a, b, code)

        def meets(a: int, b: int) -> bool:
            if not zs:
                return False
            k = _bisect_right(ze, a)
            return k < len(zs) and zs[k] < b

        sr = np.concatenate(self.start_rows) if self.start_rows else np.empty((0, 4), dtype=np.int64)
        sc = np.concatenate(self.start_calls) if self.start_calls else np.empty((0, 7), dtype=np.int64)
        self.start_rows = self.start_calls = []
        if sc.size:
            lm = np.isin(sc[:, 1], list(launching))
            sc = sc[lm]
            sc = sc[np.lexsort((sc[:, 3], sc[:, 2], sc[:, 0]))]  # per interval, the last is the latest end (ties: the later call)
        sr = sr[np.argsort(sr[:, 0], kind="stable")]
        call_last = np.searchsorted(sc[:, 0], np.arange(ws.size), side="right") - 1 if sc.size else None
        for i in range(ws.size - 1, -1, -1):
            w0, w1 = int(ws[i]), int(we[i])
            kk = int(np.searchsorted(sr[:, 0], i)) if sr.size else 0
            row = None
            if kk < sr.shape[0] and int(sr[kk, 0]) == i and int(sr[kk, 1]) >= 0:
                row = (int(sr[kk, 1]), int(sr[kk, 2]), int(sr[kk, 3]))
            r0_end = row[2] if row is not None else _NEG
            best = None
            if call_last is not None and call_last[i] >= 0 and int(sc[call_last[i], 0]) == i:
                c = sc[call_last[i]].tolist()
                best = (c[2], c[3], (c[4], c[5]) if c[4] >= 0 else None, c[6], c[1])
            use_call = best is not None and best[0] > r0_end
            first_end = best[0] if use_call else r0_end
            start = (best[2] if use_call else (row[:2] if row is not None else None))
            head_lo = best[3] if use_call else _NEG
            head_res = HOST0 + best[4] if use_call else IDLE
            top0 = head_lo if use_call else first_end
            check[0] = bool(zs)
            add(min(max(first_end, w0), w1), w1, IDLE)
            he = min(max(first_end, w0), w1) if use_call else w0
            add(min(max(head_lo, w0), he), he, head_res)
            if start is None or not top0 > w0:
                continue
            top = top0
            eng, gid = start
            lo = w0
            for _ in range(limit):
                st, kn, pe, pg, rel, vs, vt = nodes.get(eng, gid)
                steps += 1
                tp = top if top > w0 else w0
                lo = rel if rel > w0 else w0
                check[0] = meets(lo, tp) if zs else False
                mid = st if st > lo else lo
                if mid > tp:
                    mid = tp
                if vt >= 0:
                    cut = vs if vs > lo else lo
                    if cut > mid:
                        cut = mid
                    if mid > cut:
                        add(cut, mid, LAUNCH)
                    if cut > lo:
                        add(lo, cut, HOST0 + vt)
                elif mid > lo:
                    add(lo, mid, IDLE)
                if tp > mid:
                    add(mid, tp, ENGINE0 + eng)
                    if kn >= 0:
                        kern[kn] += tp - mid
                if rel <= w0:
                    break
                top = rel
                eng, gid = pe, pg
            else:
                complete = False
            firsts.append((w0, lo))
        if not complete:
            check[0] = bool(zs)
            for w0, lo in firsts:
                add(w0, lo, IDLE)
        self.dir.cleanup()
        return _Summed(np.array(per, dtype=np.int64), np.array(kern[:n_kernels], dtype=np.int64), np.array(inset, dtype=np.int64),
                       steps, complete)  # fmt: skip


class _Summed:
    """A walk's sums in the shape critical_path.summarize reads (totals, inside)."""

    def __init__(self, per: np.ndarray, kern: np.ndarray, inset: np.ndarray, steps: int, complete: bool) -> None:
        self.per, self.kern, self.inset, self.steps, self.complete = per, kern, inset, steps, complete

    def totals(self, n_threads: int, n_kernels: int) -> tuple[np.ndarray, np.ndarray]:
        return self.per[: P.HOST0 + n_threads], self.kern

    def inside(self, zone: iv.Intervals, size: int) -> np.ndarray:
        return self.inset[:size]


def _bisect_right(a: list[int], x: int) -> int:
    import bisect

    return bisect.bisect_right(a, x)


class _Nodes:
    """The nodes of one engine read back from their file, a chunk at a time (the walk goes backwards)."""

    def __init__(self, folder: str, count: dict[int, int]) -> None:
        self.folder, self.count = folder, count
        self.cache: dict[int, tuple[int, int, dict[str, np.ndarray]]] = {}

    def get(self, eng: int, gid: int) -> tuple[int, ...]:
        c = self.cache.get(eng)
        if c is None or not (c[0] <= gid < c[1]):
            lo = max(0, gid - CHUNK + 16)
            hi = min(self.count[eng], lo + CHUNK)
            cols = {}
            for name, dt in _FIELDS:
                with open(os.path.join(self.folder, f"{eng}_{name}.bin"), "rb") as fh:
                    cols[name] = np.fromfile(fh, dtype=dt, count=hi - lo, offset=lo * np.dtype(dt).itemsize)
            rows = list(zip(*(cols[name].tolist() for name, _ in _FIELDS)))
            c = self.cache[eng] = (lo, hi, rows)
        return c[2][gid - c[0]]


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
