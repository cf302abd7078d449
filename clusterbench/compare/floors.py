"""Floors as data: made of A/A results dirs by the floor rule, kept as one small versioned file per GPU
model, and found again by compare.

- :func:`session_spreads`: the session-to-session spread of every metric of every row found in all dirs.
- :func:`aa_floors`: the :class:`~clusterbench.compare.noise.FloorSet` of two or more A/A dirs of one GPU
  model, grouped by build (git rev): differences are taken only between dirs of one build.
- :func:`write_floors`, :func:`read_floors`, :func:`find_floors`: the file
  ``<results root>/floors/<GPU model>.json`` (spaces and other signs as ``_``: ``NVIDIA_H200.json``).

The file (``schema`` FLOORS_SCHEMA, ``version``): the GPU model, the floor rule, the drift bound, one floor
per metric and stream class with its source and the A/A difference it was made of, and the A/A sets (dir
names, git rev, sessions). History of FLOORS_VERSION:
  1: the first version: one floor per metric and stream class (read as same-unit floors).
  2: one floor per metric, stream class and scope (within one session, two sessions of one GPU unit, two
     units of the model) with its pair count and whether it is provisional; rule.min_pairs; sets[].units;
     machines (GPU UUID, host, dirs, sessions).
"""

from __future__ import annotations

import datetime
import itertools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from clusterbench import __version__
from clusterbench.compare.compare import (CONFIG_COLUMNS, config_value, params_differences, row_gpu, row_steady,
                                         row_unit, same_dirs, sustained_judged)
from clusterbench.compare.link import link_share
from clusterbench.compare.overstated import judged_range, overstated
from clusterbench.compare.noise import (ACROSS_UNITS, COMPARED_METRICS, FLOOR_MARGIN, FLOOR_MIN_PCT, FLOOR_STEP_PCT,
                                        MIN_PAIRS, SAME_UNIT, SCOPE_PAIRS, SCOPE_TEXT, SCOPES, SEED_DRIFT_SOURCE,
                                        SHARED_LINK_METRICS, TRACE_FLOOR_MIN_PCT, TRACE_METRICS,
                                        TRANSFER_METRICS, WITHIN_SESSION, AaSet, FloorSet, Machine, NoiseFloor,
                                        drift_bound_pct, seed_floors, suggest_floor_pct)
from clusterbench.errors import InputError
from clusterbench.io.outputs import atomic_write_text
from clusterbench.model import units as U
from clusterbench.model.processes import processes_of
from clusterbench.model.results import ResultRow, ResultSet

FLOORS_SCHEMA = "clusterbench.compare.floors"
FLOORS_VERSION = 2
FLOORS_DIR = "floors"  # under a results root: results/floors/<GPU model>.json


# ----------------------------------------------------------------------------- A/A spread


@dataclass(frozen=True, slots=True)
class SessionSpread:
    """One metric of one config label across several sessions (results dirs) of one build."""

    label: str
    metric: str
    streams: int | None
    dirs: tuple[str, ...]
    values: tuple[float, ...]  # one per dir, in the given order (sustained: the median of the repeats)
    max_diff_pct: float  # the largest |v_j - v_i| / v_i * 100 over pairs i < j
    within_pct: float | None  # the largest within-session half-range / median * 100 (repeats), or None
    git_rev: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"label": self.label, "metric": self.metric, "streams": self.streams, "dirs": list(self.dirs),
                "values": list(self.values), "pair_diffs_pct": list(pair_diffs_pct(self.values)),
                "max_diff_pct": self.max_diff_pct, "within_pct": self.within_pct, "git_rev": self.git_rev}


def pair_diffs_pct(values: Sequence[float]) -> tuple[float, ...]:
    """(v_j - v_i) / v_i * 100 for every pair i < j, in order (a later session against an earlier)."""
    return tuple(
        (values[j] - values[i]) / values[i] * 100.0 for i in range(len(values)) for j in range(i + 1, len(values))
    )


def session_spreads(dirs: Sequence[ResultSet], metrics: Sequence[str] = COMPARED_METRICS) -> tuple[SessionSpread, ...]:
    """The session-to-session spread of every metric of every row (by key) found in all ``dirs``."""
    if len(dirs) < 2:
        raise ValueError("the session spread needs at least two results dirs")
    out: list[SessionSpread] = []
    git_rev = dirs[0].env.git_rev if dirs[0].env is not None else None
    for key in dirs[0].keys:
        rows = [d.row(key) for d in dirs]
        if any(r is None for r in rows):
            continue
        streams = rows[0].streams  # type: ignore[union-attr]
        for m in metrics:
            vals = [r.number(m) for r in rows]  # type: ignore[union-attr]
            if any(v is None for v in vals):
                continue
            values = tuple(float(v) for v in vals)  # type: ignore[arg-type]
            within: float | None = None
            for r in rows:
                measured = r.measurement(m)  # type: ignore[union-attr]
                if measured is not None and measured.repeats > 1:
                    w = measured.spread / measured.median * 100.0
                    within = w if within is None else max(within, w)
            diffs = pair_diffs_pct(values)
            out.append(SessionSpread(key.label, m, streams, tuple(d.name for d in dirs), values,
                                     max(abs(x) for x in diffs), within, git_rev))  # fmt: skip
    return tuple(out)


# ----------------------------------------------------------------------------- floors of A/A dirs


@dataclass(frozen=True, slots=True)
class PairDiff:
    """One A/A difference: one metric of one config label between two dirs of one build, and the scope of
    that pair of rows (noise.SCOPES). ``pair``: what the pair is a pair of at its scope (two dirs of one
    session, two sessions of one unit, two units), sorted: the pair count counts distinct ones."""

    label: str
    metric: str
    multi_stream: bool
    scope: str
    before: str  # dir names, in the order given
    after: str
    diff_pct: float  # (after - before) / before * 100; ``linked``: as shares of each unit's link, as compare judges
    pair: tuple[str, str]
    git_rev: str
    linked: bool = False

    def to_json(self) -> dict[str, object]:
        return {"label": self.label, "metric": self.metric, "multi_stream": self.multi_stream, "scope": self.scope,
                "before": self.before, "after": self.after, "diff_pct": self.diff_pct, "pair": list(self.pair),
                "git_rev": self.git_rev, "linked": self.linked}


@dataclass(frozen=True, slots=True)
class FloorsOutcome:
    """What :func:`aa_floors` made: the floors, the spreads and differences behind them, and what the user
    should know."""

    floors: FloorSet
    spreads: tuple[SessionSpread, ...]
    warnings: tuple[str, ...] = ()
    diffs: tuple[PairDiff, ...] = ()

    @property
    def provisional(self) -> bool:
        """Every floor measured here is provisional (fewer than MIN_PAIRS pairs): the file would hold no
        floor that enough pairs back."""
        measured = [f for f in self.floors.floors if f.pairs is not None]
        return not measured or all(f.provisional for f in measured)


def _gpu_model(res: ResultSet) -> str | None:
    names = {row_gpu(res, r).name for r in res.rows}
    if len(names) > 1:
        raise InputError(f"{res.name} holds rows of several GPU models ({', '.join(sorted(map(str, names)))}): "
                         "floors are per GPU model", hint="give A/A dirs of one GPU model")
    return next(iter(names), None)


def _build_groups(dirs: Sequence[ResultSet]) -> dict[str, list[ResultSet]]:
    groups: dict[str, list[ResultSet]] = {}
    for d in dirs:
        env = d.env
        rev = env.git_rev if env is not None else None
        if not rev:
            raise InputError(f"{d.name} records no git rev: A/A dirs must say which build they measured",
                             hint="give dirs that clusterbench probe wrote from a git checkout")
        if env is not None and env.git_dirty:
            raise InputError(f"{d.name} was measured from a dirty tree at {rev[:12]}: not one known build",
                             hint="commit, then probe the A/A sweeps again")
        groups.setdefault(rev, []).append(d)
    alone = [g[0].name for g in groups.values() if len(g) < 2]
    if alone:
        raise InputError(f"no A/A partner for {', '.join(alone)}: every build needs two or more dirs",
                         hint="give two or more results dirs of each build (probe the same build again, "
                              "e.g. --tag aa2)")
    return groups


def _check_one_config(group: Sequence[ResultSet]) -> None:
    for label in group[0].labels:
        for col in CONFIG_COLUMNS:
            vals = {str(config_value(r, col)) for d in group if (r := d.row(label)) is not None}
            if len(vals) > 1:
                raise InputError(f"not an A/A of one build: {label} {col} differs ({', '.join(sorted(vals))})",
                                 hint="give dirs that ran the same configs.toml")
    for other in group[1:]:
        differ = params_differences(group[0], other)
        if differ:
            raise InputError(f"not an A/A of one build: {group[0].name} and {other.name} ran different work "
                             f"({'; '.join(differ)})", hint="give dirs that ran the same configs.toml")


def _row_where(res: ResultSet, row: ResultRow) -> tuple[str | None, str | None, str | None]:
    """(session, GPU UUID, host) of one row: its own columns, else its dir's env.json."""
    gpu = row_gpu(res, row)
    env = res.env
    session = row.session if row.session is not None else (env.session_id if env is not None else None)
    return session, gpu.uuid, gpu.host


def _unit(res: ResultSet, row: ResultRow) -> str:
    """A row's GPU unit: its UUID, else a dir of its own (a dir that names no unit shares none)."""
    _, uuid, _ = _row_where(res, row)
    return uuid or f"unknown unit of {res.name}"


def pair_scope(res_a: ResultSet, row_a: ResultRow, res_b: ResultSet, row_b: ResultRow) -> tuple[str, tuple[str, str]]:
    """The scope of a pair of rows (noise.SCOPES) and what it is a pair of, as pair_diffs counts it: two
    units (UUIDs, both known and different; also within one campaign session), else one session (two dirs),
    else two sessions of one unit; a pair whose unit is unknown on a side counts as two units."""
    sa, ua, _ = _row_where(res_a, row_a)
    sb, ub, _ = _row_where(res_b, row_b)
    if ua and ub and ua != ub:
        return ACROSS_UNITS, tuple(sorted((ua, ub)))  # type: ignore[return-value]
    if sa is not None and sa == sb:
        return WITHIN_SESSION, tuple(sorted((str(res_a.path or res_a.name), str(res_b.path or res_b.name))))  # type: ignore[return-value]
    if ua and ua == ub:
        return SAME_UNIT, tuple(sorted((str(sa), str(sb))))  # type: ignore[return-value]
    return ACROSS_UNITS, tuple(sorted((_unit(res_a, row_a), _unit(res_b, row_b))))  # type: ignore[return-value]


def pair_diffs(group: Sequence[ResultSet], metrics: Sequence[str] = COMPARED_METRICS) -> tuple[PairDiff, ...]:
    """Every A/A difference among the dirs of one build: each pair of dirs (in the order given), each label
    found in both, each metric measured in both, with the scope of that pair of rows. Sustained FPS of a row
    whose runs did not reach steady state (``sustained_steady`` false) is left out, as compare leaves it."""
    out: list[PairDiff] = []
    rev = str(group[0].env.git_rev) if group[0].env is not None else ""
    for i, j in itertools.combinations(range(len(group)), 2):
        a, b = group[i], group[j]
        for key in a.keys:
            ra, rb = a.row(key), b.row(key)
            if ra is None or rb is None:
                continue
            scope, pair = pair_scope(a, ra, b, rb)
            multi = ra.streams is None or ra.streams > 1
            streams = None if ra.streams is None or rb.streams is None else max(ra.streams, rb.streams)
            units = (row_unit(a, ra), row_unit(b, rb)) if scope in (ACROSS_UNITS, SAME_UNIT) else None
            unsteady = not sustained_judged(ra, rb)
            for m in metrics:
                if m == "sustained_fps" and unsteady:
                    continue  # still moving and no process spread: compare does not judge it, so no floor either
                va, vb = ra.number(m), rb.number(m)
                if va is None or vb is None or va == 0:
                    continue
                # across two units whose links were measured, a link-bound figure is the change compare judges:
                # as shares of each unit's link (compare/link.py), so that the bound is of what it is held to
                # and a bar that overstates its cost on a side is judged over its range (compare/overstated.py)
                share = link_share(m, streams, ra.binds, rb.binds, *units, same_unit=scope == SAME_UNIT
                                   ) if units is not None else None
                over = overstated(m, ra, rb)
                diff = ((judged_range(va, vb, share, over)[2] - 1.0) * 100.0 if share is not None or over is not None
                        else (vb - va) / va * 100.0)
                out.append(PairDiff(key.label, m, multi, scope, a.name, b.name, diff, pair, rev, share is not None))
    return tuple(out)


def _machines(dirs: Sequence[ResultSet]) -> tuple[Machine, ...]:
    """The GPU units (UUID, host) that measured ``dirs``: which dirs and sessions each."""
    seen: dict[tuple[str | None, str | None], tuple[list[str], list[str]]] = {}
    for d in dirs:
        for r in d.rows:
            session, uuid, host = _row_where(d, r)
            names, sessions = seen.setdefault((uuid, host), ([], []))
            if d.name not in names:
                names.append(d.name)
            if session is not None and session not in sessions:
                sessions.append(session)
    return tuple(Machine(u, h, tuple(n), tuple(s)) for (u, h), (n, s) in seen.items())


def _floor_of(metric: str, multi: bool, scope: str, cands: Sequence[PairDiff], min_pairs: int) -> NoiseFloor:
    worst = max(cands, key=lambda d: abs(d.diff_pct))
    size = abs(worst.diff_pct)
    pct = suggest_floor_pct(metric, size)
    pairs = len({d.pair for d in cands})
    link = f"as {worst.metric} (one shared link): " if worst.metric != metric else ""
    share = " as shares of each unit's link" if worst.linked else ""
    src = (f"{link}A/A {worst.before} / {worst.after} (git {worst.git_rev[:12]}): {worst.label} {worst.metric} "
           f"{U.pct_of(size, 2)}{share} -> {FLOOR_MARGIN:g} x {U.pct_of(size, 2, unit=False)} = "
           f"{U.pct_of(FLOOR_MARGIN * size, 2, unit=False)} -> {U.pct_of(pct, None)}; "
           f"{pairs} pair{'' if pairs == 1 else 's'} of {SCOPE_PAIRS[scope]}, {len(cands)} differences")
    return NoiseFloor(metric, multi, pct, src, size, scope, pairs, len(cands), pairs < min_pairs)


def _resolved(res: ResultSet) -> Path | None:
    try:
        return None if res.path is None else Path(res.path).resolve()
    except OSError:
        return None


def aa_floors(dirs: Sequence[ResultSet], now: Callable[[], str] | None = None,
              min_pairs: int = MIN_PAIRS) -> FloorsOutcome:
    """The floors of two or more A/A dirs of one GPU model. Differences are taken only between dirs of one
    build; each pair of rows has a scope (:func:`pair_scope`: one session, two sessions of one unit, two units),
    and per metric, stream class (1 stream, several) and scope the floor rule is applied to the largest
    difference of that scope, with the number of pairs it saw (provisional below ``min_pairs``). On several
    streams H2D, D2H and the roofline share one link and take the worst of the three. A trace figure no A/A
    measured keeps the seed's floor; a scope no pair had gets no floor (compare then uses the nearest one and
    says so). InputError for dirs that are not an A/A, and for a dir given twice (its path, or a copy of it)."""
    if len(dirs) < 2:
        raise InputError("floors needs two or more A/A results dirs of one build",
                         hint="clusterbench floors results/DATE_f32_aa1 results/DATE_f32_aa2 [...]")
    for i, j in itertools.combinations(range(len(dirs)), 2):
        if same_dirs(dirs[i], dirs[j]):
            a, b = dirs[i], dirs[j]
            how = ("the same path" if a.path is not None and b.path is not None and _resolved(a) == _resolved(b)
                   else "a copy: the same session and the same rows")
            raise InputError(f"{a.name} and {b.name} are one results dir ({how}): a dir paired with itself differs "
                             "by nothing and would make a floor of no noise",
                             hint="give each A/A dir once: probes of one build taken again (--tag aa1, --tag aa2, ...)")
    models = {d.name: _gpu_model(d) for d in dirs}
    known = {m for m in models.values() if m is not None}
    if len(known) != 1:
        what = ", ".join(f"{n}: {m or 'GPU unknown'}" for n, m in models.items())
        raise InputError(f"floors are per GPU model, and these dirs are not of one: {what}",
                         hint="give the A/A dirs of one GPU model (env.json gpu_name)")
    gpu = known.pop()
    warnings = [f"{n} names no GPU: taken as {gpu}" for n, m in models.items() if m is None]
    warnings += [f"{d.name} names no GPU unit (UUID): its pairs count as pairs of two units" for d in dirs
                 if any(_row_where(d, r)[1] is None for r in d.rows)]
    unsteady = [f"{d.name} {r.label}" for d in dirs for r in d.rows
                if row_steady(r) is False and processes_of(r.measurement("sustained_fps")) is None]
    if unsteady:
        warnings.append(f"sustained FPS not steady, left out of the floors: {', '.join(unsteady)}")
    spreads: list[SessionSpread] = []
    diffs: list[PairDiff] = []
    sets: list[AaSet] = []
    for rev, group in _build_groups(dirs).items():
        _check_one_config(group)
        sessions = tuple(str(d.env.session_id) if d.env is not None else "" for d in group)
        units = tuple(str((d.env.gpu_uuid if d.env is not None else None) or "") for d in group)
        spreads.extend(session_spreads(group))
        diffs.extend(pair_diffs(group))
        sets.append(AaSet(rev, tuple(d.name for d in group), sessions, units))
    floors: list[NoiseFloor] = []
    for metric in COMPARED_METRICS:
        for multi in (False, True):
            shared = multi and metric in SHARED_LINK_METRICS
            names = SHARED_LINK_METRICS if shared else (metric,)
            measured = False
            for scope in SCOPES:
                cands = [d for d in diffs if d.metric in names and d.multi_stream == multi and d.scope == scope]
                if cands:
                    floors.append(_floor_of(metric, multi, scope, cands, min_pairs))
                    measured = True
            if not measured and metric in TRACE_METRICS:
                floors.append(NoiseFloor(metric, multi, TRACE_FLOOR_MIN_PCT,
                                         f"the seed's 1 % rule: the A/A dirs have no {'multi' if multi else '1'}-stream "
                                         f"{metric}", scope=SAME_UNIT))
    cross = [abs(d.diff_pct) for d in diffs if d.multi_stream and d.metric in TRANSFER_METRICS
             and d.scope != WITHIN_SESSION]
    drift_worst = max(cross, default=None)
    bound = drift_bound_pct(drift_worst)
    bound_src = SEED_DRIFT_SOURCE if drift_worst is None or bound == drift_bound_pct(None) else (
        f"the floor rule of the largest multi-stream transfer A/A difference across sessions, {U.pct_of(drift_worst, 2)}")
    created = now() if now is not None else datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    fs = FloorSet(gpu, tuple(floors), bound, bound_src, sets=tuple(sets), created_utc=created,
                  tool_version=__version__, version=FLOORS_VERSION, machines=_machines(dirs))
    short = [f for f in floors if f.provisional]
    if short:
        scopes = sorted({(SCOPES.index(f.scope), f.scope, f.pairs) for f in short})
        warnings.append("provisional floors (fewer than {} pairs): {}".format(
            min_pairs, ", ".join(f"{SCOPE_TEXT[sc]} ({n} pair{'' if n == 1 else 's'} of {SCOPE_PAIRS[sc]})"
                                 for _, sc, n in scopes)))
    return FloorsOutcome(fs, tuple(spreads), tuple(warnings), tuple(diffs))


# ----------------------------------------------------------------------------- the file


def floors_to_json(fs: FloorSet) -> dict[str, object]:
    """The file of FLOORS_VERSION (always the current version, whatever ``fs`` was read from)."""
    return {"schema": FLOORS_SCHEMA, "version": FLOORS_VERSION, "gpu_name": fs.gpu_name,
            "created_utc": fs.created_utc, "tool_version": fs.tool_version,
            "rule": {"margin": FLOOR_MARGIN, "step_pct": FLOOR_STEP_PCT, "min_pct": FLOOR_MIN_PCT,
                     "trace_min_pct": TRACE_FLOOR_MIN_PCT, "min_pairs": MIN_PAIRS},
            "drift_bound_pct": fs.drift_bound_pct, "drift_bound_source": fs.drift_bound_source,
            "floors": [f.to_json() for f in fs.floors], "sets": [s.to_json() for s in fs.sets],
            "machines": [m.to_json() for m in fs.machines]}


def _list(doc: Mapping[str, object], key: str) -> list:
    v = doc.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise ValueError(f"{key} must be a list, got {type(v).__name__}")
    return v


def _floor_set(doc: Mapping[str, object], path: str, version: int) -> FloorSet:
    gpu = doc.get("gpu_name")
    bound = doc.get("drift_bound_pct")
    if not isinstance(gpu, str) or not gpu:
        raise ValueError("gpu_name must name the GPU model")
    if isinstance(bound, bool) or not isinstance(bound, (int, float)) or bound <= 0:
        raise ValueError(f"drift_bound_pct must be a number > 0, got {bound!r}")
    floors = tuple(NoiseFloor.from_json(f, scoped=version >= 2) for f in _list(doc, "floors"))
    if len({(f.metric, f.multi_stream, f.scope) for f in floors}) != len(floors):
        raise ValueError("two floors for one metric, stream class and scope")
    for key in ("created_utc", "tool_version", "drift_bound_source"):
        if doc.get(key) is not None and not isinstance(doc.get(key), str):
            raise ValueError(f"{key} must be text, got {doc.get(key)!r:.40}")
    return FloorSet(gpu, floors, float(bound), str(doc.get("drift_bound_source") or ""), path=path,
                    sets=tuple(AaSet.from_json(s) for s in _list(doc, "sets")),
                    created_utc=doc.get("created_utc"), tool_version=doc.get("tool_version"),  # type: ignore[arg-type]
                    version=version, machines=tuple(Machine.from_json(m) for m in _list(doc, "machines")))


def _floors_v1(doc: Mapping[str, object], path: str) -> FloorSet:
    """Version 1: one floor per metric and stream class, measured across the sessions of A/A dirs that were
    each on one unit: read as same-unit floors, their pair counts not recorded."""
    return _floor_set(doc, path, 1)


def _floors_v2(doc: Mapping[str, object], path: str) -> FloorSet:
    return _floor_set(doc, path, 2)


# The one version map: every version this clusterbench reads, and how.
_READERS: dict[int, Callable[[Mapping[str, object], str], FloorSet]] = {1: _floors_v1, 2: _floors_v2}


def floors_file(root: Path, gpu_name: str) -> Path:
    """``<root>/floors/<GPU model>.json``, the model's spaces and signs as ``_``."""
    slug = re.sub(r"[^A-Za-z0-9.-]+", "_", gpu_name).strip("_") or "GPU"
    return Path(root) / FLOORS_DIR / f"{slug}.json"


def read_floors(path: Path) -> FloorSet:
    """A floors file of any readable version; InputError naming what is wrong."""
    path = Path(path)
    hint = "write it again with clusterbench floors DIR DIR [...]"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"no floors file: {path}", hint="clusterbench floors DIR DIR [...] writes one") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"floors file is not readable JSON: {path}: {exc}", hint=hint) from None
    if not isinstance(doc, dict) or doc.get("schema") != FLOORS_SCHEMA or doc.get("version") not in _READERS:
        got = (doc.get("schema"), doc.get("version")) if isinstance(doc, dict) else type(doc).__name__
        raise InputError(f"{path} is not a {FLOORS_SCHEMA!r} file of version "
                         f"{', '.join(map(str, _READERS))} (got {got})", hint=hint)
    try:
        return _READERS[doc["version"]](doc, str(path))
    except (ValueError, TypeError, AttributeError) as exc:
        raise InputError(f"floors file {path}: {exc}", hint=hint) from None


def write_floors(fs: FloorSet, path: Path, replace: bool = False) -> Path:
    """Write ``fs`` to ``path`` as a new file, creating its folder; an existing file is replaced only with
    ``replace`` (InputError otherwise: compare reads these files, so one is never lost without a word). The
    write is atomic: a temp file linked in as the new name (or renamed over the old one)."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"cannot write the floors: {path} is a directory", hint="pass --out FILE.json")
    exists = InputError(f"{path} exists: floors writes a new file and never replaces one without --force",
                        hint="pass --out FILE.json for a new file, or --force to replace it (the text output "
                             "shows what it held as 'was')")
    if path.exists() and not replace:
        raise exists
    text = json.dumps(floors_to_json(fs), indent=2, allow_nan=False) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if replace:
            atomic_write_text(path, text, "the floors")
        else:
            tmp = path.parent / f".floors.{os.getpid()}.{path.name}.tmp"
            try:
                tmp.write_text(text, encoding="utf-8")
                os.link(tmp, path)  # fails when the name exists: never over another writer's file
            finally:
                tmp.unlink(missing_ok=True)
    except FileExistsError:
        raise exists from None
    except OSError as exc:
        raise InputError(f"cannot write the floors {path}: {exc.strerror or exc}",
                         hint="pass --out FILE.json in a writable directory") from None
    return path


def find_floors(gpu_name: str | None, roots: Sequence[Path]) -> FloorSet:
    """The floors of ``gpu_name`` from the first ``<root>/floors/<model>.json`` that exists, else the seed's
    reading rules. InputError when that file is of another GPU model or unreadable."""
    if gpu_name is None:
        return seed_floors(None)
    for root in roots:
        p = floors_file(root, gpu_name)
        if p.is_file():
            fs = read_floors(p)
            if fs.gpu_name != gpu_name:
                raise InputError(f"{p} holds the floors of {fs.gpu_name}, not {gpu_name}",
                                 hint="write it again with clusterbench floors on A/A dirs of that GPU")
            return fs
    return seed_floors(gpu_name)


def floors_for(results: Sequence[ResultSet], explicit: Path | None = None,
               roots: Sequence[Path] = ()) -> dict[str, FloorSet]:
    """The floor sets compare needs for ``results``, by GPU model: ``explicit`` (a floors file given by
    the user: InputError when it is of a GPU model the rows are not), else for each model the first file
    found in ``<dir's parent>/floors/`` of each results dir, then in each of ``roots``. A model without a
    file is left out (compare then uses the seed's reading rules and says so)."""
    models = sorted({n for res in results for r in res.rows if (n := row_gpu(res, r).name) is not None})
    if explicit is not None:
        fs = read_floors(explicit)
        if models and fs.gpu_name not in models:
            raise InputError(f"{explicit} holds the floors of {fs.gpu_name}, and the rows compared are of "
                             f"{', '.join(models)}", hint="pass the floors file of the GPU compared, or leave --floors out")
        return {str(fs.gpu_name): fs}
    where = list(dict.fromkeys([*(Path(res.path).parent for res in results if res.path is not None), *roots]))
    out: dict[str, FloorSet] = {}
    for name in models:
        fs = find_floors(name, where)
        if not fs.seed:
            out[name] = fs
    return out
