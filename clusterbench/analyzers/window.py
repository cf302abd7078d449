"""The window: which part of the trace the figures cover (pure).

``--window`` takes:
- ``auto`` (the default): the probe's pass range when the trace has one (text ``clusterbench:pass``,
  else ``pass``, alone or followed by a non-word character); else the GPU activity span with the
  leading and trailing set-up cut off (``trim``);
- ``span``: the GPU activity span, first record to last, uncut;
- ``range:NAME[@DOMAIN][#N]``: every NVTX range whose text starts with NAME (push/pop or start/end,
  registered string or not), only in the domain named DOMAIN when given; ``#N`` picks the N-th of
  them in time order (1 = the first); the window is their union;
- ``ms:A-B``: from A to B ms on the trace's clock (nsys's timeline: ms since the session started).

Ranges of the group's own process are used when it has any; otherwise matching ranges of any process.

Trimming: the span is cut into segments at its separating gaps: set-up gaps (module_load, alloc,
profiler, hand-overs between threads), and host gaps of at least SEPARATOR_HOST_NS that are at least SEPARATOR_FACTOR times the
(lower) median of the span's other loop gaps. Leading segments are cut off while they hold less than
TRIM_SHARE of the span's records in all; trailing ones likewise. What is cut is said with the window.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from clusterbench.analyzers import intervals as iv
from clusterbench.analyzers.gaps import first_launch_loads
from clusterbench.analyzers.model import GroupTrace
from clusterbench.analyzers.records import GAP_CAUSES, Gaps, Window
from clusterbench.errors import InputError, TraceError
from clusterbench.model import units as U
from clusterbench.io.nsys.reader import DEFAULT_PASS_PREFIXES, NvtxRanges

TRIM_SHARE = 0.10  # leading or trailing segments holding less than this share of the records are set-up
SEPARATOR_HOST_NS = 1_000_000  # a host gap this long can separate set-up from the loop ...
SEPARATOR_FACTOR = 10.0  # ... when it is this many times the loop's typical gap

WINDOW_HINT = "use auto, span, range:NAME[@DOMAIN][#N] or ms:A-B (e.g. range:pass, range:event loop@zoo_daq#2, ms:120-480)"


@dataclass(frozen=True, slots=True)
class WindowSpec:
    kind: str  # "auto", "span", "range", "ms"
    name: str | None = None  # range: the text prefix
    domain: str | None = None  # range: the domain's name
    instance: int | None = None  # range: 1-based
    start_ms: float | None = None  # ms
    end_ms: float | None = None

    def describe(self) -> str:
        if self.kind == "range":
            return f"range:{self.name}" + (f"@{self.domain}" if self.domain else "") + (f"#{self.instance}" if self.instance else "")
        if self.kind == "ms":
            return f"ms:{self.start_ms:g}-{self.end_ms:g}"
        return self.kind


_RANGE_RE = re.compile(r"^(?P<name>.*?)(?:@(?P<domain>[^@#]+))?(?:#(?P<n>\d+))?$", re.DOTALL)
_MS_RE = re.compile(r"^\s*(?P<a>[0-9]*\.?[0-9]+)\s*-\s*(?P<b>[0-9]*\.?[0-9]+)\s*$")


def parse(text: str | None, range_name: str | None = None) -> WindowSpec:
    """``--window`` (and its alias ``--range NAME`` = ``--window range:NAME``); InputError when malformed."""
    if range_name is not None:
        if text not in (None, "auto"):
            raise InputError("--range and --window cannot be combined", hint="--range NAME is --window range:NAME; give one")
        if range_name == "":
            raise InputError("--range needs a non-empty NVTX range name", hint="e.g. --range pass")
        return WindowSpec("range", name=range_name)
    if text is None or text.strip() == "auto":
        return WindowSpec("auto")
    t = text.strip()
    if t == "span":
        return WindowSpec("span")
    kind, sep, rest = t.partition(":")
    if sep and kind == "range":
        m = _RANGE_RE.match(rest)
        if not m or not m.group("name"):
            raise InputError(f"--window {text!r}: range:NAME needs a range name", hint=WINDOW_HINT)
        n = int(m.group("n")) if m.group("n") else None
        if n is not None and n < 1:
            raise InputError(f"--window {text!r}: #N counts from 1", hint=WINDOW_HINT)
        return WindowSpec("range", name=m.group("name"), domain=m.group("domain"), instance=n)
    if sep and kind == "ms":
        m = _MS_RE.match(rest)
        if not m:
            raise InputError(f"--window {text!r}: ms:A-B needs two numbers of ms, A below B", hint=WINDOW_HINT)
        a, b = float(m.group("a")), float(m.group("b"))
        if not b > a:
            raise InputError(f"--window {text!r}: the end ({b:g} ms) must come after the start ({a:g} ms)", hint=WINDOW_HINT)
        return WindowSpec("ms", start_ms=a, end_ms=b)
    raise InputError(f"--window {text!r} is not a window", hint=WINDOW_HINT)


def range_prefixes(spec: WindowSpec) -> tuple[str, ...]:
    """The NVTX texts the reader must fetch for this window."""
    if spec.kind == "auto":
        return DEFAULT_PASS_PREFIXES
    if spec.kind == "range" and spec.name:
        return (spec.name,)
    return ()


def _word_prefix(text: str, prefix: str) -> bool:
    """``text`` is ``prefix`` or starts with it followed by a non-word character."""
    if not text.startswith(prefix):
        return False
    return len(text) == len(prefix) or not (text[len(prefix)].isalnum() or text[len(prefix)] == "_")


def select_ranges(ranges: NvtxRanges, pid: int, accept, domain: str | None = None) -> tuple[NvtxRanges, bool]:
    """The ranges whose text ``accept`` takes (and in ``domain``, when given), of process ``pid``
    when it has any, else of every process; and whether they are the process's own."""
    if len(ranges) == 0:
        return ranges, True
    ok = np.array([accept(t) for t in ranges.texts], dtype=bool)[ranges.text_index]
    if domain is not None:
        ids = [d for d, name in ranges.domains.items() if name == domain]
        ok &= np.isin(ranges.domain, ids)
    found = ranges.select(ok)
    own = found.pid == pid
    if own.any():
        return found.select(own), True
    return found, not len(found)


def _range_source(used: NvtxRanges, name: str, own: bool, spec: WindowSpec | None = None) -> str:
    texts = sorted({used.texts[i] for i in np.unique(used.text_index).tolist()})
    dom = used.domain_of(0) if len(used) else None
    where = "" if own else " (from other processes: this one has none)"
    in_dom = f" in domain {dom}" if dom else ""
    if len(used) == 1:
        nth = f" (#{spec.instance})" if spec is not None and spec.instance else ""
        return f"NVTX range '{texts[0]}'{in_dom}{nth}{where}"
    return f"{len(used)} NVTX ranges starting with '{name}'{in_dom}{where}"


def fixed(g: GroupTrace, ranges: NvtxRanges, spec: WindowSpec) -> tuple[Window, NvtxRanges | None] | None:
    """The window when it does not depend on the gaps (pass range, range:, ms:), with the NVTX ranges
    that form it; None for the span (``span`` always, ``auto`` without a pass range)."""
    if spec.kind == "ms":
        a, b = int(round(spec.start_ms * 1e6)), int(round(spec.end_ms * 1e6))
        s0, s1 = g.span
        if b <= s0 or a >= s1:
            raise InputError(
                f"--window ms:{spec.start_ms:g}-{spec.end_ms:g} holds no GPU activity of pid {g.pid} device {g.device}: "
                f"its GPU activity runs from {U.ms(s0, unit=False)} to {U.ms(s1)} on the trace's clock",
                hint="times are ms on nsys's timeline (since the session started), as the nsys GUI shows them",
            )
        return Window("ms", f"ms {spec.start_ms:g} to {spec.end_ms:g} on the trace's clock",
                      np.array([a], dtype=np.int64), np.array([b], dtype=np.int64), span_start_ns=s0, span_end_ns=s1), None  # fmt: skip
    if spec.kind == "range":
        used, own = select_ranges(ranges, g.pid, lambda t: t.startswith(spec.name), spec.domain)
        if not len(used):
            dom = f" in domain {spec.domain!r}" if spec.domain else ""
            raise TraceError(
                f"no NVTX range starts with {spec.name!r}{dom} in the trace",
                hint="list the ranges with: sqlite3 TRACE \"SELECT DISTINCT text FROM NVTX_EVENTS\"; or leave --window "
                "out to use the probe's pass range or the GPU activity span",
            )
        if spec.instance is not None:
            order = np.argsort(used.start_ns, kind="stable")
            if spec.instance > len(used):
                raise InputError(f"--window {spec.describe()}: the trace has {len(used)} such range(s)",
                                 hint=f"pick #1 to #{len(used)}")  # fmt: skip
            pick = np.zeros(len(used), dtype=bool)
            pick[order[spec.instance - 1]] = True
            used = used.select(pick)
        s, e = iv.union(used.start_ns, used.end_ns)
        if s.size == 0:  # only zero-length ranges
            s, e = used.start_ns[:1], used.end_ns[:1] + 1
        s0, s1 = g.span
        return Window("range", _range_source(used, spec.name, own, spec), s, e, ranges=len(used), span_start_ns=s0,
                      span_end_ns=s1), used  # fmt: skip
    if spec.kind == "auto":
        for prefix in DEFAULT_PASS_PREFIXES:
            used, own = select_ranges(ranges, g.pid, lambda t, p=prefix: _word_prefix(t, p))
            if len(used):
                s, e = iv.union(used.start_ns, used.end_ns)
                s0, s1 = g.span
                return Window("pass-range", _range_source(used, prefix, own), s, e, ranges=len(used), span_start_ns=s0,
                              span_end_ns=s1), used  # fmt: skip
    return None


def span(g: GroupTrace) -> Window:
    s0, s1 = g.span
    return Window("span", "GPU activity span (first to last GPU record)", np.array([s0], dtype=np.int64),
                  np.array([s1], dtype=np.int64), span_start_ns=s0, span_end_ns=s1)  # fmt: skip


def separators(gaps: Gaps, first_launch: np.ndarray | None = None) -> np.ndarray:
    """Which of the span's gaps separate set-up from the loop (see the module docstring);
    ``first_launch``: the gaps that only a kernel's first launch made (gaps.first_launch_loads)."""
    # nsys's own overhead and a kernel's first launch are set-up, but mark no boundary between phases;
    # a hand-over between threads always does
    setup = gaps.setup_mask() & (gaps.cause != GAP_CAUSES.index("profiler"))
    if first_launch is not None:
        setup &= ~first_launch
    if gaps.between is not None:
        setup |= gaps.between
    host = gaps.cause == GAP_CAUSES.index("host")
    loop = ~setup
    others = gaps.lengths_ns[loop]
    typical = 0.0 if others.size < 2 else float(np.percentile(others, 50, method="lower"))
    outlier = host & (gaps.lengths_ns >= SEPARATOR_HOST_NS) & (gaps.lengths_ns >= SEPARATOR_FACTOR * typical)
    return setup | outlier


def edge_zones(g: GroupTrace) -> tuple[int, int]:
    """(z0, z1): every trim cuts at or before z0 and at or after z1 (the starts of the records of rank
    TRIM_SHARE from either end), so the span's middle [z0, z1] always stays in the window."""
    starts = g.all_starts()
    n = starts.size
    if n == 0:
        return 0, 0
    k = min(n - 1, math.ceil(TRIM_SHARE * n))
    z0 = int(np.partition(starts, k)[k])
    j = max(0, n - 1 - k)
    z1 = int(np.partition(starts, j)[j])
    return z0, z1


def starts_before(g: GroupTrace, t: np.ndarray) -> np.ndarray:
    """Per time of ``t`` (sorted): the group's records that start before it."""
    out = np.zeros(t.size, dtype=np.int64)
    for r in g.engines.values():
        out += np.searchsorted(r.start_ns, t, side="left") if iv.is_sorted(r.start_ns) else np.searchsorted(np.sort(r.start_ns), t, side="left")
    return out


def trim(g: GroupTrace, gaps: Gaps, records_before=None, first_launch: np.ndarray | None = None) -> Window:  # noqa: ANN001
    """The span with its leading and trailing set-up cut off (``gaps``: the span's gaps, classified;
    ``records_before(t)``: per time, the group's records that start before it, and ``first_launch``: the
    gaps only a kernel's first launch made, when the group's records and calls are not at hand)."""
    s0, s1 = g.span
    sep = np.flatnonzero(separators(gaps, first_launch_loads(g, gaps) if first_launch is None else first_launch))
    if sep.size == 0:
        w = span(g)
        return Window("trimmed-span", "GPU activity span (no gap separates set-up from the loop)", w.starts_ns, w.ends_ns,
                      span_start_ns=s0, span_end_ns=s1)  # fmt: skip
    sep_s = gaps.starts_ns[sep]
    sep_e = sep_s + gaps.lengths_ns[sep]
    # records per segment: those starting before each separator's start, less those before the last one
    before = (records_before or (lambda t: starts_before(g, t)))(np.concatenate([sep_s, [np.iinfo(np.int64).max]]))
    counts = np.diff(np.concatenate([[0], before]))
    total = int(counts.sum())
    limit = TRIM_SHARE * total
    lead = 0  # separators cut at the front: segments 0..lead-1 go
    while lead < sep.size and counts[: lead + 1].sum() < limit:
        lead += 1
    tail = 0
    while tail < sep.size - lead and counts[sep.size - tail :].sum() < limit:
        tail += 1
    a = int(sep_e[lead - 1]) if lead else s0
    b = int(sep_s[sep.size - tail]) if tail else s1
    if lead == 0 and tail == 0:
        return Window("trimmed-span", "GPU activity span (no set-up at its ends to cut)", np.array([s0], dtype=np.int64),
                      np.array([s1], dtype=np.int64), span_start_ns=s0, span_end_ns=s1)  # fmt: skip

    def what(ns: int, side: str, idx: np.ndarray, records: int) -> str:
        causes: dict[str, int] = {}
        for i in idx.tolist():
            c = "hand-over" if gaps.between is not None and gaps.between[int(i)] else gaps.cause_of(int(i))
            causes[c] = causes.get(c, 0) + 1
        shown = ", ".join(f"{n} {c}" for c, n in causes.items())
        return (f"{U.ms(ns)} {side}: {len(idx)} separating gap{'s' if len(idx) != 1 else ''} ({shown}) and "
                f"{records:,} GPU record{'s' if records != 1 else ''}")  # fmt: skip

    notes = []
    if lead:
        notes.append(what(a - s0, "before", sep[:lead], int(counts[:lead].sum())))
    if tail:
        notes.append(what(s1 - b, "after", sep[sep.size - tail:], int(counts[sep.size - tail + 1:].sum())))
    return Window(
        "trimmed-span", "GPU activity span with its set-up cut off", np.array([a], dtype=np.int64), np.array([b], dtype=np.int64),
        span_start_ns=s0, span_end_ns=s1, cut_before_ns=a - s0, cut_after_ns=s1 - b, cut_note="; ".join(notes),
    )  # fmt: skip
