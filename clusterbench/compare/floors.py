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
  1: the first version.
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from clusterbench import __version__
from clusterbench.compare.compare import CONFIG_COLUMNS, config_value, row_gpu
from clusterbench.compare.noise import (COMPARED_METRICS, FLOOR_MARGIN, FLOOR_MIN_PCT, FLOOR_STEP_PCT,
                                        SEED_DRIFT_SOURCE, SEED_SOURCE, SHARED_LINK_METRICS, TRACE_FLOOR_MIN_PCT,
                                        TRACE_METRICS, TRANSFER_METRICS, AaSet, FloorSet, NoiseFloor,
                                        drift_bound_pct, seed_floors, suggest_floor_pct)
from clusterbench.errors import InputError
from clusterbench.io.results import _atomic_write_text
from clusterbench.model.results import ResultSet
from clusterbench.model import units as U

FLOORS_SCHEMA = "clusterbench.compare.floors"
FLOORS_VERSION = 1
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
class FloorsOutcome:
    """What :func:`aa_floors` made: the floors, the spreads behind them, and what the user should know."""

    floors: FloorSet
    spreads: tuple[SessionSpread, ...]
    warnings: tuple[str, ...] = ()


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


def aa_floors(dirs: Sequence[ResultSet], now: Callable[[], str] | None = None) -> FloorsOutcome:
    """The floors of two or more A/A dirs of one GPU model: the floor rule applied, per metric and stream
    class, to the largest difference between two dirs of one build. On several streams H2D, D2H and the
    roofline share one link and take the worst of the three. A stream class the dirs never measured keeps
    the seed's floor (trace figures) or none (sustained FPS). InputError for dirs that are not an A/A."""
    if len(dirs) < 2:
        raise InputError("floors needs two or more A/A results dirs of one build",
                         hint="clusterbench floors results/DATE_f32_aa1 results/DATE_f32_aa2 [...]")
    models = {d.name: _gpu_model(d) for d in dirs}
    known = {m for m in models.values() if m is not None}
    if len(known) != 1:
        what = ", ".join(f"{n}: {m or 'GPU unknown'}" for n, m in models.items())
        raise InputError(f"floors are per GPU model, and these dirs are not of one: {what}",
                         hint="give the A/A dirs of one GPU model (env.json gpu_name)")
    gpu = known.pop()
    warnings = [f"{n} names no GPU: taken as {gpu}" for n, m in models.items() if m is None]
    spreads: list[SessionSpread] = []
    sets: list[AaSet] = []
    for rev, group in _build_groups(dirs).items():
        _check_one_config(group)
        sessions = tuple(str(d.env.session_id) if d.env is not None else "" for d in group)
        if len(set(sessions)) < len(sessions):
            warnings.append(f"{', '.join(d.name for d in group)} share a session: their differences are not "
                            "session to session, so the floors may be too low")
        spreads.extend(session_spreads(group))
        sets.append(AaSet(rev, tuple(d.name for d in group), sessions))
    worst: dict[tuple[str, bool], SessionSpread] = {}
    for s in spreads:
        k = (s.metric, s.streams is None or s.streams > 1)
        if k not in worst or s.max_diff_pct > worst[k].max_diff_pct:
            worst[k] = s
    floors: list[NoiseFloor] = []
    for metric in COMPARED_METRICS:
        for multi in (False, True):
            shared = multi and metric in SHARED_LINK_METRICS
            cands = [worst[(m, multi)] for m in (SHARED_LINK_METRICS if shared else (metric,)) if (m, multi) in worst]
            if not cands:
                if metric in TRACE_METRICS:
                    floors.append(NoiseFloor(metric, multi, TRACE_FLOOR_MIN_PCT,
                                             f"{SEED_SOURCE}: the A/A dirs have no {'multi' if multi else '1'}-stream "
                                             f"{metric}"))
                continue
            s = max(cands, key=lambda x: x.max_diff_pct)
            pct = suggest_floor_pct(metric, s.max_diff_pct)
            link = f"as {s.metric} (one shared link): " if s.metric != metric else ""
            src = (f"{link}A/A {' / '.join(s.dirs)} (git {str(s.git_rev)[:12]}): {s.label} {s.metric} "
                   f"{U.pct_of(s.max_diff_pct, 2)} -> {FLOOR_MARGIN:g} x {U.pct_of(s.max_diff_pct, 2, unit=False)} = "
                   f"{U.pct_of(FLOOR_MARGIN * s.max_diff_pct, 2, unit=False)} -> {U.pct_of(pct, None)}")
            floors.append(NoiseFloor(metric, multi, pct, src, s.max_diff_pct))
    drift_worst = max((worst[(m, True)].max_diff_pct for m in TRANSFER_METRICS if (m, True) in worst), default=None)
    bound = drift_bound_pct(drift_worst)
    bound_src = SEED_DRIFT_SOURCE if drift_worst is None or bound == drift_bound_pct(None) else (
        f"the floor rule of the largest multi-stream transfer A/A difference, {U.pct_of(drift_worst, 2)}")
    created = now() if now is not None else datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    fs = FloorSet(gpu, tuple(floors), bound, bound_src, sets=tuple(sets), created_utc=created,
                  tool_version=__version__)
    return FloorsOutcome(fs, tuple(spreads), tuple(warnings))


# ----------------------------------------------------------------------------- the file


def floors_to_json(fs: FloorSet) -> dict[str, object]:
    return {"schema": FLOORS_SCHEMA, "version": FLOORS_VERSION, "gpu_name": fs.gpu_name,
            "created_utc": fs.created_utc, "tool_version": fs.tool_version,
            "rule": {"margin": FLOOR_MARGIN, "step_pct": FLOOR_STEP_PCT, "min_pct": FLOOR_MIN_PCT,
                     "trace_min_pct": TRACE_FLOOR_MIN_PCT},
            "drift_bound_pct": fs.drift_bound_pct, "drift_bound_source": fs.drift_bound_source,
            "floors": [f.to_json() for f in fs.floors], "sets": [s.to_json() for s in fs.sets]}


def _floors_v1(doc: Mapping[str, object], path: str) -> FloorSet:
    gpu = doc.get("gpu_name")
    bound = doc.get("drift_bound_pct")
    if not isinstance(gpu, str) or not gpu:
        raise ValueError("gpu_name must name the GPU model")
    if isinstance(bound, bool) or not isinstance(bound, (int, float)) or bound <= 0:
        raise ValueError(f"drift_bound_pct must be a number > 0, got {bound!r}")
    floors = tuple(NoiseFloor.from_json(f) for f in doc.get("floors") or ())  # type: ignore[union-attr]
    if len({(f.metric, f.multi_stream) for f in floors}) != len(floors):
        raise ValueError("two floors for one metric and stream class")
    return FloorSet(gpu, floors, float(bound), str(doc.get("drift_bound_source") or ""), path=path,
                    sets=tuple(AaSet.from_json(s) for s in doc.get("sets") or ()),  # type: ignore[union-attr]
                    created_utc=doc.get("created_utc"), tool_version=doc.get("tool_version"))  # type: ignore[arg-type]


_READERS: dict[int, Callable[[Mapping[str, object], str], FloorSet]] = {1: _floors_v1}


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


def write_floors(fs: FloorSet, path: Path) -> Path:
    """Write ``fs`` to ``path`` (atomic: a temp file renamed over it), creating its folder."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"cannot write the floors: {path} is a directory", hint="pass --out FILE.json")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write_text(path, json.dumps(floors_to_json(fs), indent=2, allow_nan=False) + "\n", ".floors.")
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
