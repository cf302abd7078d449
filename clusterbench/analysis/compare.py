"""Compare two results dirs: before and after, with noise, session drift and the roofline.

Pure functions over loaded :class:`~clusterbench.results.ResultsDir` records; no printing.

Verdict rules (also in ``clusterbench compare --help`` and docs/compare.md):

* ``delta_pct = (after - before) / before * 100`` per metric.
* Noise is the larger of the two sides' ``<metric>_spread`` (half the min-max range over
  repeats, in the metric's unit); when only one side has a spread, that one. A change
  whose size ``|after - before|`` is at most the noise is SAME ("within noise ±x");
  beyond it, FASTER or SLOWER (times: lower is better; FPS: higher is better).
* Without any spread, the trace figures (kernel_us, h2d_us, d2h_us, roofline_us) take the
  reference campaign's reproducibility as their noise: ±1 % of the before value (1-stream
  kernel and transfer numbers reproduce across sessions to about 1 %). Any other metric
  without spread has unknown noise: a nonzero change is still called FASTER or SLOWER by its
  sign, with the reason "no repeats: noise unknown"; identical values are SAME.
* Rows with more than one stream from different sessions: h2d and d2h are NOT_COMPARABLE
  (multi-stream transfer columns drift up to 20 % between sessions), and so is the
  roofline when it binds on a transfer on either side.
* Kernel changes are quoted from 1-stream rows; an s>1 kernel delta carries a note.
* End to end: a kernel change beyond noise is INVISIBLE when the kernel sits below the
  tallest transfer bar both before and after, or when the roofline did not move (SAME).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Mapping

from clusterbench.errors import InputError
from clusterbench.results import SPREAD_SUFFIX, ProbeRow, ResultsDir

# DESIGN.md, "Reading rules": 4-stream transfer columns drift up to 20 % between sessions.
MULTI_STREAM_DRIFT_REASON = "multi-stream transfer columns drift up to 20 % between sessions"
NO_NOISE_REASON = "no repeats: noise unknown"
# DESIGN.md, "Reading rules": 1-stream kernel and transfer numbers reproduce across sessions to about
# 1 %. Trace figures (*_us) without repeats take that as their noise floor rather than none at all.
TRACE_REPRO_PCT = 1.0
REPRO_REASON = "trace figures reproduce to about 1 % across sessions; no repeats measured"

TIME_METRICS: tuple[str, ...] = ("kernel_us", "h2d_us", "d2h_us", "roofline_us")
TRANSFER_METRICS = frozenset({"h2d_us", "d2h_us"})
TRANSFER_ENGINES = frozenset({"h2d", "d2h"})
# sustained_fps joins the comparison when either dir measured it (higher is better).
OPTIONAL_METRICS: tuple[str, ...] = ("sustained_fps",)
HIGHER_IS_BETTER = frozenset({"sustained_fps"})
CONFIG_COLUMNS: tuple[str, ...] = ("cluster", "cap", "streams", "batch")


class Verdict(str, Enum):
    SAME = "SAME"
    FASTER = "FASTER"
    SLOWER = "SLOWER"
    NOT_COMPARABLE = "NOT_COMPARABLE"
    MISSING = "MISSING"  # not measured on one side (or the label is on one side only)


class Presence(str, Enum):
    BOTH = "both"
    BEFORE_ONLY = "before_only"
    AFTER_ONLY = "after_only"


class EndToEnd(str, Enum):
    VISIBLE = "visible"  # the kernel moved and so did the roofline
    INVISIBLE = "invisible"  # the kernel moved, the roofline did not
    KERNEL_UNCHANGED = "kernel_unchanged"
    UNKNOWN = "unknown"  # a side or a column is missing


@dataclass(frozen=True, slots=True)
class MetricDelta:
    name: str
    unit: str
    before: float | None
    after: float | None
    delta_pct: float | None
    noise: float | None  # in the metric's unit; None = unknown
    verdict: Verdict
    reason: str
    note: str | None = None


@dataclass(frozen=True, slots=True)
class RowComparison:
    label: str
    presence: Presence
    streams: int | None
    cluster: int | None
    same_session: bool
    metrics: tuple[MetricDelta, ...]
    binds_before: str | None  # lower-case engine name: kernel, h2d, d2h, ...
    binds_after: str | None
    end_to_end: EndToEnd
    end_to_end_reason: str
    notes: tuple[str, ...] = ()

    @property
    def binds_changed(self) -> bool:
        return self.binds_before is not None and self.binds_after is not None and self.binds_before != self.binds_after

    def metric(self, name: str) -> MetricDelta:
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class CompareWarning:
    message: str
    hint: str | None = None


@dataclass(frozen=True, slots=True)
class SideInfo:
    path: str
    name: str
    gpu_name: str | None
    driver: str | None
    session_id: str | None
    git_rev: str | None
    git_dirty: bool | None


@dataclass(frozen=True, slots=True)
class Comparison:
    before: SideInfo
    after: SideInfo
    metric_names: tuple[str, ...]
    rows: tuple[RowComparison, ...]
    warnings: tuple[CompareWarning, ...]

    @property
    def same_session(self) -> bool:
        return self.before.session_id is not None and self.before.session_id == self.after.session_id

    def row(self, label: str) -> RowComparison:
        for r in self.rows:
            if r.label == label:
                return r
        raise KeyError(label)


@dataclass(frozen=True, slots=True)
class GateFailure:
    label: str
    before_us: float
    after_us: float
    delta_pct: float
    noise_us: float | None


# ----------------------------------------------------------------------------- one metric


def metric_unit(name: str) -> str:
    if name.endswith("_us"):
        return "µs/frame"
    if name.endswith("_fps"):
        return "FPS"
    if name.endswith("_gbps"):
        return "GB/s"
    return ""


def noise_of(spread_before: float | None, spread_after: float | None) -> float | None:
    """The larger of the two spreads; the one present when only one is; None when neither."""
    present = [s for s in (spread_before, spread_after) if s is not None]
    return max(present) if present else None


def compare_metric(
    name: str,
    before: float | None,
    after: float | None,
    *,
    spread_before: float | None = None,
    spread_after: float | None = None,
    not_comparable_reason: str | None = None,
    note: str | None = None,
) -> MetricDelta:
    """One metric's delta and verdict (see the module docstring for the rules)."""
    unit = metric_unit(name)
    noise = noise_of(spread_before, spread_after)
    if before is None or after is None:
        side = "before" if before is None else "after"
        if before is None and after is None:
            side = "either dir"
        return MetricDelta(name, unit, before, after, None, noise, Verdict.MISSING, f"not measured in {side}", note)
    delta_pct = (after - before) / before * 100.0 if before != 0 else None
    if not_comparable_reason is not None:
        return MetricDelta(name, unit, before, after, delta_pct, noise, Verdict.NOT_COMPARABLE, not_comparable_reason, note)
    diff = after - before
    better = diff > 0 if name in HIGHER_IS_BETTER else diff < 0
    moved = Verdict.FASTER if better else Verdict.SLOWER
    if noise is None and name in TIME_METRICS and diff != 0:
        floor = abs(before) * TRACE_REPRO_PCT / 100.0
        if abs(diff) <= floor:
            return MetricDelta(name, unit, before, after, delta_pct, floor, Verdict.SAME,
                               f"within ±{TRACE_REPRO_PCT:g} %: {REPRO_REASON}", note)
        return MetricDelta(name, unit, before, after, delta_pct, floor, moved,
                           f"beyond ±{TRACE_REPRO_PCT:g} %: {REPRO_REASON}", note)
    if noise is not None:
        # a relative 1e-9 absorbs float rounding of decimal inputs (10.3 - 10.0 > 0.3 in binary)
        if abs(diff) <= noise + 1e-9 * max(abs(before), abs(after)):
            return MetricDelta(name, unit, before, after, delta_pct, noise, Verdict.SAME, f"within noise ±{noise:.3g} {unit}", note)
        return MetricDelta(name, unit, before, after, delta_pct, noise, moved, f"beyond noise ±{noise:.3g} {unit}", note)
    if diff == 0:
        return MetricDelta(name, unit, before, after, delta_pct, None, Verdict.SAME, "identical values", note)
    return MetricDelta(name, unit, before, after, delta_pct, None, moved, NO_NOISE_REASON, note)


# ----------------------------------------------------------------------------- env helpers


def _env_get(env: Mapping, *paths: str) -> object:
    """First present value among dotted key paths (``gpu_name``, ``gpu.name``)."""
    for p in paths:
        cur: object = env
        for key in p.split("."):
            if not isinstance(cur, Mapping) or key not in cur:
                cur = None
                break
            cur = cur[key]
        if cur is not None and not isinstance(cur, Mapping):
            return cur
    return None


def _as_str(v: object) -> str | None:
    return None if v is None else str(v)


def _as_bool(v: object) -> bool | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "dirty")
    return bool(v)


def side_info(res: ResultsDir) -> SideInfo:
    env = res.env
    return SideInfo(
        path=str(res.path),
        name=res.name,
        gpu_name=_as_str(_env_get(env, "gpu_name", "gpu.name")),
        driver=_as_str(_env_get(env, "driver", "driver_version", "gpu.driver")),
        session_id=_as_str(_env_get(env, "session_id", "session")),
        git_rev=_as_str(_env_get(env, "git_rev", "git.rev")),
        git_dirty=_as_bool(_env_get(env, "git_dirty", "dirty", "git.dirty")),
    )


def display_engine(engine: str | None) -> str:
    """h2d -> H2D, d2h -> D2H (as in the DESIGN.md reference table); kernel stays kernel."""
    if engine is None:
        return "-"
    return engine.upper() if engine in ("h2d", "d2h", "d2d", "p2p") else engine


# ----------------------------------------------------------------------------- rows


def _row_session(row: ProbeRow, side: SideInfo) -> str | None:
    s = row.get("session")
    return str(s) if s is not None else side.session_id


def _binds(row: ProbeRow | None) -> str | None:
    if row is None:
        return None
    b = row.get("binds")
    return str(b).strip().lower() if b is not None else None


def _int(row: ProbeRow | None, column: str) -> int | None:
    if row is None:
        return None
    v = row.get(column)
    return int(v) if isinstance(v, (int, float)) else None


def _tallest_transfer(row: ProbeRow) -> tuple[str, float] | None:
    bars = [(e, row.number(f"{e}_us")) for e in ("h2d", "d2h")]
    bars = [(e, v) for e, v in bars if v is not None]
    return max(bars, key=lambda ev: ev[1]) if bars else None  # type: ignore[arg-type,return-value]


def _one_stream_sibling(label: str, row: ProbeRow, before: ResultsDir, after: ResultsDir) -> str | None:
    """The label of a 1-stream row with the same cluster and cap, present in both dirs."""
    key = (row.get("cluster"), row.get("cap"))
    for cand in before.rows:
        if cand.label == label or _int(cand, "streams") != 1:
            continue
        if (cand.get("cluster"), cand.get("cap")) == key and after.row(cand.label) is not None:
            return cand.label
    return None


def _end_to_end(kernel: MetricDelta, roof: MetricDelta, rb: ProbeRow, ra: ProbeRow, binds_after: str | None) -> tuple[EndToEnd, str]:
    if kernel.verdict is Verdict.MISSING:
        return EndToEnd.UNKNOWN, "kernel not measured on both sides"
    if kernel.verdict is Verdict.SAME:
        return EndToEnd.KERNEL_UNCHANGED, f"kernel unchanged ({kernel.reason})"
    tb, ta = _tallest_transfer(rb), _tallest_transfer(ra)
    assert kernel.before is not None and kernel.after is not None
    binds = display_engine(binds_after)
    if tb is not None and ta is not None and kernel.before < tb[1] and kernel.after < ta[1]:
        return EndToEnd.INVISIBLE, (
            f"invisible end to end (binds: {binds}): kernel below the tallest transfer bar before "
            f"({kernel.before:.2f} < {display_engine(tb[0])} {tb[1]:.2f} µs/frame) and after "
            f"({kernel.after:.2f} < {display_engine(ta[0])} {ta[1]:.2f} µs/frame)"
        )
    if roof.verdict is Verdict.SAME:
        return EndToEnd.INVISIBLE, f"invisible end to end (binds: {binds}): roofline {roof.reason}"
    if roof.verdict is Verdict.MISSING:
        return EndToEnd.UNKNOWN, "roofline not measured on both sides"
    moved = f"{roof.delta_pct:+.2f} %" if roof.delta_pct is not None else "moved"
    reason = f"visible end to end: roofline {moved}"
    if binds_after in TRANSFER_ENGINES:
        reason += f"; now binds {binds}: further kernel work pays only once the kernel is the tallest bar"
    return EndToEnd.VISIBLE, reason


def _compare_row(
    label: str,
    rb: ProbeRow | None,
    ra: ProbeRow | None,
    before: ResultsDir,
    after: ResultsDir,
    sides: tuple[SideInfo, SideInfo],
    metric_names: tuple[str, ...],
) -> RowComparison:
    presence = Presence.BOTH if rb is not None and ra is not None else (
        Presence.BEFORE_ONLY if rb is not None else Presence.AFTER_ONLY
    )
    either = rb if rb is not None else ra
    assert either is not None
    streams = _int(either, "streams")
    cluster = _int(either, "cluster")
    binds_before, binds_after = _binds(rb), _binds(ra)
    if presence is not Presence.BOTH:
        where = "before" if presence is Presence.BEFORE_ONLY else "after"
        gone = f"only in {where} ({(sides[0] if rb is not None else sides[1]).name})"
        metrics = tuple(
            MetricDelta(n, metric_unit(n), rb.number(n) if rb else None, ra.number(n) if ra else None,
                        None, None, Verdict.MISSING, gone)
            for n in metric_names
        )  # fmt: skip
        return RowComparison(label, presence, streams, cluster, False, metrics, binds_before, binds_after,
                             EndToEnd.UNKNOWN, gone, (gone,))  # fmt: skip
    assert rb is not None and ra is not None
    sb, sa = _row_session(rb, sides[0]), _row_session(ra, sides[1])
    same_session = sb is not None and sb == sa
    multi = (streams or 1) > 1 or (_int(ra, "streams") or 1) > 1
    notes: list[str] = []
    for col in CONFIG_COLUMNS + ("frames",):
        vb, va = rb.get(col), ra.get(col)
        if vb is not None and va is not None and vb != va:
            notes.append(f"{col} differs: {vb} before, {va} after")
    kernel_note = None
    if multi:
        sib = _one_stream_sibling(label, rb, before, after)
        kernel_note = f"{streams} streams: quote kernel changes from the 1-stream row" + (f" ({sib})" if sib else "")
    metrics: list[MetricDelta] = []
    for n in metric_names:
        ncr = None
        if multi and not same_session:
            session_txt = "different sessions" if sb is not None and sa is not None else "session unknown"
            if n in TRANSFER_METRICS:
                ncr = f"{MULTI_STREAM_DRIFT_REASON} ({session_txt})"
            elif n == "roofline_us" and (binds_before in TRANSFER_ENGINES or binds_after in TRANSFER_ENGINES):
                ncr = f"binds on a transfer engine; {MULTI_STREAM_DRIFT_REASON} ({session_txt})"
        metrics.append(
            compare_metric(
                n, rb.number(n), ra.number(n),
                spread_before=rb.number(n + SPREAD_SUFFIX), spread_after=ra.number(n + SPREAD_SUFFIX),
                not_comparable_reason=ncr, note=kernel_note if n == "kernel_us" else None,
            )
        )  # fmt: skip
    mt = tuple(metrics)
    by_name = {m.name: m for m in mt}
    if binds_before is not None and binds_after is not None and binds_before != binds_after:
        notes.append(f"binding engine changed: {display_engine(binds_before)} -> {display_engine(binds_after)}")
    if "kernel_us" in by_name and "roofline_us" in by_name:
        e2e, why = _end_to_end(by_name["kernel_us"], by_name["roofline_us"], rb, ra, binds_after)
    else:
        e2e, why = EndToEnd.UNKNOWN, "kernel_us or roofline_us not compared"
    return RowComparison(label, presence, streams, cluster, same_session, mt, binds_before, binds_after, e2e, why,
                         tuple(notes))  # fmt: skip


# ----------------------------------------------------------------------------- the whole


def _env_warnings(before: ResultsDir, after: ResultsDir, a: SideInfo, b: SideInfo, allow_different_gpu: bool) -> list[CompareWarning]:
    out: list[CompareWarning] = []
    if a.gpu_name is not None and b.gpu_name is not None and a.gpu_name != b.gpu_name:
        if not allow_different_gpu:
            raise InputError(
                f"the two results dirs come from different GPUs: {a.gpu_name!r} ({a.name}) vs {b.gpu_name!r} ({b.name})",
                hint="pass --allow-different-gpu to compare them anyway",
            )
        out.append(CompareWarning(f"different GPUs: {a.gpu_name!r} before, {b.gpu_name!r} after",
                                  "per-engine times of different GPUs measure the GPUs as much as the change"))  # fmt: skip
    for side in (a, b):
        if side.gpu_name is None:
            out.append(CompareWarning(f"env.json of {side.name} names no GPU (gpu_name): cannot check it matches"))
    if a.driver is not None and b.driver is not None and a.driver != b.driver:
        out.append(CompareWarning(f"driver differs: {a.driver} before, {b.driver} after",
                                  "re-run both on one driver to compare the code alone"))  # fmt: skip
    for key, what in (("pedestal_dtype", "pedestal dtype"), ("pedestal", "pedestal mode")):
        vb = _pedestal_values(before, key)
        va = _pedestal_values(after, key)
        if vb and va and vb != va:
            out.append(CompareWarning(f"{what} differs: {'/'.join(sorted(vb))} before, {'/'.join(sorted(va))} after",
                                      "cluster records and work differ between float32 and float64, frozen and tracking"))  # fmt: skip
    for side in (a, b):
        if side.git_dirty:
            rev = f" at {side.git_rev}" if side.git_rev else ""
            out.append(CompareWarning(f"{side.name} was measured from a dirty tree{rev}: the code is not exactly known",
                                      "commit, then re-run clusterbench probe"))  # fmt: skip
    return out


def _pedestal_values(res: ResultsDir, key: str) -> set[str]:
    vals = {str(r.get(key)) for r in res.rows if r.get(key) is not None}
    env_v = res.env.get(key)
    if not vals and env_v is not None and not isinstance(env_v, Mapping):
        vals = {str(env_v)}
    return vals


def compare_results(before: ResultsDir, after: ResultsDir, *, allow_different_gpu: bool = False) -> Comparison:
    """Compare every config label of two results dirs. Raises InputError for different GPUs
    unless ``allow_different_gpu``."""
    a, b = side_info(before), side_info(after)
    warnings = _env_warnings(before, after, a, b, allow_different_gpu)
    optional = tuple(
        n for n in OPTIONAL_METRICS if any(r.number(n) is not None for res in (before, after) for r in res.rows)
    )
    metric_names = TIME_METRICS + optional
    labels = list(before.labels) + [lb for lb in after.labels if before.row(lb) is None]
    rows = tuple(_compare_row(lb, before.row(lb), after.row(lb), before, after, (a, b), metric_names) for lb in labels)
    frames_diff = [r.label for r in rows if any(n.startswith("frames differs") for n in r.notes)]
    if frames_diff:
        warnings.append(CompareWarning(
            f"frames differ for {', '.join(frames_diff)}",
            "short runs (about 2000 frames) do not let the clocks ramp: the kernel reads about 7 % slow",
        ))  # fmt: skip
    changed = [r.label for r in rows if any(n.split(" ")[0] in CONFIG_COLUMNS and "differs" in n for n in r.notes)]
    if changed:
        warnings.append(CompareWarning(f"config differs under the same label: {', '.join(changed)}",
                                       "a label should name one configuration; see the row notes"))  # fmt: skip
    drifting = [r.label for r in rows if any(m.verdict is Verdict.NOT_COMPARABLE for m in r.metrics)]
    if drifting:
        ids = f"{a.session_id or 'unknown'} vs {b.session_id or 'unknown'}"
        warnings.append(CompareWarning(
            f"{', '.join(drifting)}: multi-stream transfer deltas are not comparable across sessions "
            f"(session {ids}); {MULTI_STREAM_DRIFT_REASON}",
            "compare s>1 rows only within one session; read them for the bottleneck, not for a percentage",
        ))  # fmt: skip
    one_sided = [r.label for r in rows if r.presence is not Presence.BOTH]
    if one_sided:
        warnings.append(CompareWarning(f"labels found in one dir only: {', '.join(one_sided)}"))
    return Comparison(a, b, metric_names, rows, tuple(warnings))


def gate_failures(comparison: Comparison, pct: float) -> tuple[GateFailure, ...]:
    """Rows whose roofline_us got worse by more than ``pct`` percent and beyond noise.

    Counts only SLOWER rooflines: within noise (SAME) never trips; with noise unknown any
    rise above ``pct`` trips; NOT_COMPARABLE rooflines (s>1 across sessions, binding on a
    transfer) and one-sided rows are not gated.
    """
    out: list[GateFailure] = []
    for r in comparison.rows:
        if "roofline_us" not in comparison.metric_names:
            break
        m = r.metric("roofline_us")
        if m.verdict is Verdict.SLOWER and m.delta_pct is not None and m.delta_pct > pct:
            assert m.before is not None and m.after is not None
            out.append(GateFailure(r.label, m.before, m.after, m.delta_pct, m.noise))
    return tuple(out)


def gate_not_checked(comparison: Comparison) -> tuple[str, ...]:
    """Labels whose roofline the gate could not judge (not comparable or one-sided)."""
    return tuple(
        r.label for r in comparison.rows
        if r.metric("roofline_us").verdict in (Verdict.NOT_COMPARABLE, Verdict.MISSING)
    )  # fmt: skip
