"""Where analyze spends its time and memory on one export: per phase and per analyzer, CPU and wall
seconds, and the process's resident memory (sampled every 5 ms by a thread reading /proc/self/statm)
at the end of each step and its peak during it.

    python benchmarks/profile_analyze.py benchmarks/out/big_1000000.sqlite [--cprofile N] [--tracemalloc] [--chain]

``--cprofile N`` prints the N functions with the most own time over the whole run; ``--tracemalloc``
also gives each step's peak of Python-allocated memory (NumPy arrays included; slower). ``--chain`` runs
every job the analysis starts on a thread beside the main one (analyzers/beside.py) at once, on the main
thread, and prints each job's time and the analysis's wall less them: the dependent chain, what the
analysis would take with a free core for every job (as long as each job ends before the chain needs it).
The analyzers are timed by wrapping the module functions the facade calls (analysis._group calls
them by module attribute), so the figures are those of the real call sequence. Several run on threads
at once (analysis._group): their CPU figures are the whole process's over their span, and their wall
figures overlap; the ANALYZE line gives the analysis as a whole.

``--timeline`` also notes when each read job (an activity, API, synchronization or event chunk, the small
tables) and each of the read's main-thread steps ran, and each analysis job started beside the chain, in
seconds from the read's start: per kind, how many, the first start, the last end and their summed time, so
that what the read's wall waits for on a many-core host can be read off (which jobs still run when the
main thread's steps end, and how long the API chunks wait for the plan).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import pstats
import sys
import threading
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PAGE = os.sysconf("SC_PAGE_SIZE")


class Rss:
    """The resident set size, sampled by a daemon thread; ``mark()`` starts a new step's peak."""

    def __init__(self, every_s: float = 0.005) -> None:
        self.every = every_s
        self.peak = self.now()
        self.step_peak = self.peak
        self._stop = False
        threading.Thread(target=self._run, daemon=True).start()

    @staticmethod
    def now() -> int:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * PAGE

    def _run(self) -> None:
        while not self._stop:
            r = self.now()
            self.peak = max(self.peak, r)
            self.step_peak = max(self.step_peak, r)
            time.sleep(self.every)

    def mark(self) -> int:
        p = max(self.step_peak, self.now())
        self.step_peak = self.now()
        return p


ROWS: list[tuple[str, float, float, float, float, float | None]] = []


def timed(name: str, fn, rss: Rss, trace_mem: bool):  # noqa: ANN001
    @functools.wraps(fn)
    def wrapper(*a, **k):
        rss.mark()
        if trace_mem:
            tracemalloc.reset_peak()
        c, w = time.process_time(), time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            dc, dw = time.process_time() - c, time.perf_counter() - w
            peak = rss.mark()
            tm = tracemalloc.get_traced_memory()[1] / 1e6 if trace_mem else None
            ROWS.append((name, dc, dw, rss.now() / 1e6, peak / 1e6, tm))

    return wrapper


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--cprofile", type=int, default=0, metavar="N")
    ap.add_argument("--tracemalloc", action="store_true")
    ap.add_argument("--json-out", action="store_true", help="also render the JSON (timed)")
    ap.add_argument("--chain", action="store_true", help="run the jobs started beside at once and give the chain left")
    ap.add_argument("--timeline", action="store_true", help="when each read job and main-thread step ran")
    args = ap.parse_args()
    from clusterbench.errors import ClusterbenchError
    from clusterbench.io.nsys import check_sqlite_file

    try:
        check_sqlite_file(Path(args.trace))
    except ClusterbenchError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        if exc.hint:
            print(f"Hint: {exc.hint}", file=sys.stderr)
        return 2
    rss = Rss()
    start_rss = rss.now()
    from clusterbench.analyzers import analysis as A
    from clusterbench.analyzers import busy, critical_path, frames, gaps, held, host, kernels, links, model, pacing, window
    from clusterbench.render import analyze as render
    from clusterbench.io.nsys import reader

    side: list[tuple[str, float]] = []
    if args.chain:
        from concurrent.futures import Future

        def eager(fn, *a, **k) -> Future:  # noqa: ANN001 - the job at once, on this thread, its time noted
            t = time.perf_counter()
            done: Future = Future()
            done.set_result(fn(*a, **k))
            side.append((getattr(fn, "__name__", "?"), time.perf_counter() - t))
            return done

        for mod in (A, held):  # the modules that start jobs beside them (each imported analyzers.beside.beside)
            mod.beside = eager

    spans: list[tuple[str, bool, float, float]] = []  # (kind, on the main thread, start, end)
    if args.timeline:
        main_ident = threading.get_ident()

        def noted(kind: str, fn):  # noqa: ANN001, ANN202
            @functools.wraps(fn)
            def wrapper(*a, **k):
                t = time.perf_counter()
                try:
                    return fn(*a, **k)
                finally:
                    spans.append((kind, threading.get_ident() == main_ident, t, time.perf_counter()))

            return wrapper

        for fn, kind in (("_activity_job", "activity chunk"), ("_api_job", "API chunk"), ("_api_keep", "API chunk cut down"),
                         ("_columns_job", "sync/event chunk"),
                         ("_read_small", "small tables"), ("_consume", "activity copied in"),
                         ("_resolve_kernel_names", "kernel names"), ("_finish_syncs", "syncs joined"),
                         ("_finish_events", "events joined"), ("_read_stream_flags", "stream flags"),
                         ("_build_api", "API joined")):  # fmt: skip
            setattr(reader, fn, noted(kind, getattr(reader, fn)))
        reader._StreamIndex.build = classmethod(noted("stream index", reader._StreamIndex.build.__func__))
        A.api_plan = lambda req, cache=None, _f=A.api_plan: noted("the plan", _f(req, cache))  # noqa: E731
        A._gaps_host_pacing = noted("job: gaps, host, pacing", A._gaps_host_pacing)
        A._busy_and_kernels = noted("job: busy, kernels", A._busy_and_kernels)
        critical_path.row_predecessors = noted("job: row predecessors", critical_path.row_predecessors)

    if args.tracemalloc:
        tracemalloc.start()
    wrap = [(busy, "measure"), (gaps, "classify"), (gaps, "idle"), (links, "build"), (held, "find"), (host, "measure"),
            (host, "calls"), (host, "with_blocked"), (critical_path, "row_predecessors"), (critical_path, "predecessors"),
            (critical_path, "measure"), (kernels, "by_name"), (kernels, "copy_classes"), (pacing, "measure"),
            (frames, "count"), (window, "trim"), (window, "fixed"), (model, "build")]  # fmt: skip
    for mod, fn in wrap:
        name = f"{mod.__name__.rsplit('.', 1)[1]}.{fn}"
        setattr(mod, fn, timed(name, getattr(mod, fn), rss, args.tracemalloc))
    prof = cProfile.Profile() if args.cprofile else None
    req = A.request()
    cache: dict = {}
    c0, w0 = time.process_time(), time.perf_counter()
    if prof:
        prof.enable()
    data = timed("READ load_trace", A.load_trace, rss, args.tracemalloc)(args.trace, req=req, cache=cache)
    reader.analysis_heap()  # as analysis.analyze_file does between the read and the analysis
    result = timed("ANALYZE analyze", A.analyze, rss, args.tracemalloc)(data, req=req, cache=cache)
    if args.json_out:
        timed("JSON render_json", render.render_json, rss, args.tracemalloc)(result)
    if prof:
        prof.disable()
    c1, w1 = time.process_time(), time.perf_counter()
    print(f"{args.trace}: {len(data.activity):,} records, {len(data.api):,} calls kept; start-up RSS {start_rss / 1e6:.0f} MB; "
          f"total CPU {c1 - c0:.2f} s, wall {w1 - w0:.2f} s, peak RSS {rss.peak / 1e6:.0f} MB")  # fmt: skip
    print(f"{'step':<26} {'CPU s':>7} {'wall s':>7} {'RSS after MB':>12} {'peak MB':>8} {'tracemalloc MB':>14}")
    for name, dc, dw, after, peak, tm in ROWS:
        print(f"{name:<26} {dc:>7.2f} {dw:>7.2f} {after:>12.0f} {peak:>8.0f} {'' if tm is None else f'{tm:>14.0f}'}")
    if args.chain:
        analysis_wall = next(dw for name, _, dw, *_ in ROWS if name == "ANALYZE analyze")
        jobs = ", ".join(f"{n} {d:.3f}" for n, d in side)
        print(f"chain: {analysis_wall - sum(d for _, d in side):.3f} s of the analysis's {analysis_wall:.3f} s; "
              f"beside it (s): {jobs}")
    if args.timeline:
        print(f"timeline, s from the read's start: {'kind':<26} {'n':>4} {'first':>7} {'last end':>9} {'summed':>8}")
        kinds: dict[tuple[str, bool], list[tuple[float, float]]] = {}
        for kind, on_main, t, e in spans:
            kinds.setdefault((kind, on_main), []).append((t - w0, e - w0))
        for (kind, on_main), ts in sorted(kinds.items(), key=lambda kv: min(t for t, _ in kv[1])):
            where = "main" if on_main else "pool"
            print(f"  {where:<4} {kind:<26} {len(ts):>4} {min(t for t, _ in ts):>7.3f} {max(e for _, e in ts):>9.3f} "
                  f"{sum(e - t for t, e in ts):>8.3f}")
        for name, _, dw, *_ in ROWS:
            if name.startswith(("READ", "ANALYZE", "JSON")):
                print(f"  {name}: {dw:.3f} s")
    if prof:
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.cprofile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
