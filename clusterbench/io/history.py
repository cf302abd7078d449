"""The history database: every probe row of every results dir, in one SQLite file (through sqlite-utils).

``clusterbench probe`` records each row it writes (default ``results/history.db``, ``--db PATH``);
``clusterbench history import DIR...`` adds existing results dirs. A row is recorded once: importing a dir
again adds only the rows that changed since (a row is identified by its dir, its key and a digest of its
content). Named baselines pin the rows of one dir as they were when the name was set.

Tables (schema HISTORY_SCHEMA, version in ``meta``):

- ``meta`` (key, value): ``schema``, ``version``.
- ``dirs``: one per results dir (its resolved ``path``, ``name``, the env.json stamps ``gpu_name``, ``host``,
  ``git_rev``, ``git_dirty``, ``session_id``, ``created_utc``, and ``env_json``, the latest env.json read).
- ``rows``: one per row version: ``dir_id``, the key (``config``, ``gpu_index``, ``role``, ``variant``,
  ``label``), ``session``, ``measured_utc`` (the row's timestamp, else the dir's created_utc), ``git_rev``,
  ``git_dirty``, ``gpu_name``, ``gpu_uuid``, ``host``, the config columns, ``digest`` and ``row_json`` (the
  whole row with its measurements, as samples.json keeps them).
- ``metrics``: one per numeric column or measurement of a row: ``row_id``, ``metric`` (the unit is in the
  name: ``_us`` µs per frame, ``_fps`` frames per second ...), ``value``, ``samples_json`` (the raw samples,
  or null).
- ``baselines`` (``name``, ``dir_id``, ``set_utc``) and ``baseline_rows`` (``name``, ``row_id``).

Writers take SQLite's write lock for each dir they import (``BEGIN IMMEDIATE``) and wait up to
BUSY_TIMEOUT_S for it, so concurrent probes lose nothing. History of HISTORY_VERSION:
  1: the first version.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

from clusterbench.errors import EnvironmentFailure, InputError
from clusterbench.io.outputs import refuse_inputs_as_outputs
from clusterbench.io.results import Skipped, digests_from_text, find_results_dirs, load_results
from clusterbench.model.results import VALUE_KINDS, EnvRecord, ResultRow, ResultSet

HISTORY_SCHEMA = "clusterbench.io.history"
HISTORY_VERSION = 1
DEFAULT_DB_NAME = "history.db"  # under the results root: results/history.db


def default_db(results_root: Path) -> Path:
    """The history database of a results root (``results/history.db`` for the default root)."""
    return Path(results_root) / DEFAULT_DB_NAME
BUSY_TIMEOUT_S = 120.0
BASELINE_PREFIX = "baseline:"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_CONFIG_COLUMNS = ("cluster", "cap", "streams", "batch", "frames", "binds", "tracer", "transfer", "pedestal",
                   "pedestal_dtype", "workload")
_NUMERIC = tuple(c for c, k in VALUE_KINDS.items() if k in (int, float))


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class ImportedDir:
    """What importing one results dir added."""

    path: str
    name: str
    rows_seen: int
    rows_added: int

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "name": self.name, "rows_seen": self.rows_seen, "rows_added": self.rows_added}


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """One point of a label's series: its row in one results dir (the latest version recorded), the value
    of ``metric`` (None: not measured there), and the dir's env.json."""

    dir_id: int
    dir_path: str
    dir_name: str
    label: str
    metric: str
    value: float | None
    measured_utc: str | None
    git_rev: str | None
    git_dirty: bool | None
    gpu_name: str | None
    host: str | None
    session: str | None
    row: ResultRow
    env: EnvRecord | None

    @property
    def build(self) -> tuple[str | None, bool | None]:
        return (self.git_rev, self.git_dirty)

    @property
    def samples(self) -> tuple[float, ...]:
        m = self.row.measurement(self.metric)
        return () if m is None else m.samples

    def to_json(self) -> dict[str, object]:
        return {"dir": self.dir_name, "path": self.dir_path, "label": self.label, "metric": self.metric,
                "value": self.value, "spread": self.row.number(self.metric + "_spread"),
                "samples": list(self.samples), "measured_utc": self.measured_utc, "git_rev": self.git_rev,
                "git_dirty": self.git_dirty, "gpu_name": self.gpu_name, "host": self.host,
                "session": self.session, "streams": self.row.streams}


@dataclass(frozen=True, slots=True)
class Baseline:
    name: str
    dir_path: str
    dir_name: str
    set_utc: str
    labels: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "dir": self.dir_name, "path": self.dir_path, "set_utc": self.set_utc,
                "labels": list(self.labels)}


# ----------------------------------------------------------------------------- the database


def _utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _create_schema(db) -> None:  # noqa: ANN001
    db["meta"].create({"key": str, "value": str}, pk="key", if_not_exists=True)
    db["dirs"].create({"id": int, "path": str, "name": str, "gpu_name": str, "host": str, "git_rev": str,
                       "git_dirty": int, "session_id": str, "created_utc": str, "env_json": str,
                       "imported_utc": str}, pk="id", not_null={"path", "name"}, if_not_exists=True)
    db["dirs"].create_index(["path"], unique=True, if_not_exists=True)
    db["rows"].create({"id": int, "dir_id": int, "config": str, "gpu_index": int, "role": str, "variant": str,
                       "label": str, "session": str, "measured_utc": str, "git_rev": str, "git_dirty": int,
                       "gpu_name": str, "gpu_uuid": str, "host": str, "cluster": int, "cap": int, "streams": int,
                       "batch": int, "frames": int, "binds": str, "tracer": str, "transfer": str, "pedestal": str,
                       "pedestal_dtype": str, "workload": str, "digest": str, "row_json": str,
                       "imported_utc": str},
                      pk="id", foreign_keys=[("dir_id", "dirs", "id")], not_null={"dir_id", "label", "digest"},
                      if_not_exists=True)
    db["rows"].create_index(["dir_id", "label", "digest"], unique=True, if_not_exists=True)
    db["rows"].create_index(["label"], if_not_exists=True)
    db["metrics"].create({"row_id": int, "metric": str, "value": float, "samples_json": str},
                         pk=("row_id", "metric"), foreign_keys=[("row_id", "rows", "id")], if_not_exists=True)
    db["baselines"].create({"name": str, "dir_id": int, "set_utc": str}, pk="name",
                           foreign_keys=[("dir_id", "dirs", "id")], if_not_exists=True)
    db["baseline_rows"].create({"name": str, "row_id": int}, pk=("name", "row_id"),
                               foreign_keys=[("name", "baselines", "name"), ("row_id", "rows", "id")],
                               if_not_exists=True)
    db["meta"].insert_all([{"key": "schema", "value": HISTORY_SCHEMA},
                           {"key": "version", "value": str(HISTORY_VERSION)}], ignore=True)


def _check_schema(db, path: Path) -> None:  # noqa: ANN001
    meta = {r["key"]: r["value"] for r in db.query("SELECT key, value FROM meta")}
    if meta.get("schema") != HISTORY_SCHEMA or meta.get("version") != str(HISTORY_VERSION):
        raise InputError(f"{path} is history schema {meta.get('schema')!r} version {meta.get('version')!r}; this "
                         f"clusterbench reads {HISTORY_SCHEMA!r} version {HISTORY_VERSION}",
                         hint="use the clusterbench version that wrote it, or pass --db NEW.db")


_SQLITE_MAGIC = b"SQLite format 3\x00"
_NOT_HISTORY_HINT = "pass --db with a clusterbench history database, or a new file name (one is made there)"


def check_history_file(path: Path) -> None:
    """InputError unless ``path`` is free for a history database or holds one: it does not exist, it is empty
    (0 bytes: an empty SQLite database), it is an SQLite database without tables, or its ``meta`` table names
    HISTORY_SCHEMA. Anything else (an nsys export, another program's database, a text file) is refused,
    naming what it holds; it is opened read-only, and nothing in it changes."""
    import urllib.parse

    p = Path(path)
    if not p.exists():
        return
    if p.is_dir():
        raise InputError(f"--db {p} is a folder, not a database file", hint=_NOT_HISTORY_HINT)
    try:
        size = p.stat().st_size
        with open(p, "rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise InputError(f"cannot read the history database {p}: {exc.strerror or exc}", hint=_NOT_HISTORY_HINT) from None
    if size == 0:
        return
    if head != _SQLITE_MAGIC:
        raise InputError(f"--db {p} is not a clusterbench history database: it is not an SQLite file",
                         hint=_NOT_HISTORY_HINT)
    try:
        conn = sqlite3.connect(f"file:{urllib.parse.quote(str(p.resolve()))}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise InputError(f"cannot open the history database {p}: {exc}", hint=_NOT_HISTORY_HINT) from None
    try:
        tables = sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                        if not r[0].startswith("sqlite_"))
        if not tables:
            return
        meta: dict[str, object] = {}
        if "meta" in tables:
            try:
                meta = {str(k): v for k, v in conn.execute("SELECT key, value FROM meta")}
            except sqlite3.Error:
                meta = {}
    except sqlite3.DatabaseError as exc:
        raise InputError(f"--db {p} cannot be read as SQLite: {exc}", hint=_NOT_HISTORY_HINT) from None
    finally:
        conn.close()
    if meta.get("schema") != HISTORY_SCHEMA:
        nsys = any(t.startswith(("CUPTI_ACTIVITY_KIND_", "TARGET_INFO_")) or t == "StringIds" for t in tables)
        shown = ", ".join(tables[:6]) + (f" and {len(tables) - 6} more" if len(tables) > 6 else "")
        raise InputError(f"--db {p} is not a clusterbench history database"
                         + (" (it is an nsys export)" if nsys else "") + f": it holds the tables {shown}"
                         + ("" if "meta" in tables else " and no meta table") + "; nothing was written to it",
                         hint=_NOT_HISTORY_HINT)
    if str(meta.get("version")) != str(HISTORY_VERSION):
        raise InputError(f"{p} is history schema {meta.get('schema')!r} version {meta.get('version')!r}; this "
                         f"clusterbench reads {HISTORY_SCHEMA!r} version {HISTORY_VERSION}",
                         hint="use the clusterbench version that wrote it, or pass --db NEW.db")


@contextlib.contextmanager
def open_history(path: Path, *, write: bool = False) -> Iterator[object]:
    """The history database at ``path`` as a sqlite-utils Database. ``write``: inside one write transaction
    (``BEGIN IMMEDIATE``: SQLite's write lock, waited for up to BUSY_TIMEOUT_S), committed at the end, the
    schema created on first use. InputError for a file that is not a history database; a reader of a
    database that does not exist gets InputError too."""
    import sqlite_utils

    path = Path(path)
    if not write and not path.is_file():
        raise InputError(f"no history database at {path}",
                         hint="clusterbench probe records every row there; clusterbench history import FOLDER adds "
                              "the results dirs you have (clusterbench history import results)")
    check_history_file(path)  # read-only: a file that is not a history is refused before anything is written
    if write:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create the history database {path}: {exc.strerror or exc}",
                             hint="pass --db PATH in a writable directory") from None
    try:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as exc:
        raise InputError(f"cannot open the history database {path}: {exc}",
                         hint="pass --db PATH in a writable directory") from None
    db = sqlite_utils.Database(conn)
    try:
        if write:
            conn.execute("BEGIN IMMEDIATE")
            _create_schema(db)
        elif not db["meta"].exists():
            raise InputError(f"{path} is not a clusterbench history database (no meta table)",
                             hint="pass --db PATH of a history database")
        _check_schema(db, path)
        yield db
        if write:
            conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            raise EnvironmentFailure(f"the history database {path} stayed locked for {BUSY_TIMEOUT_S:g} s",
                                     hint="another process holds it; try again") from None
        raise InputError(f"the history database {path} cannot be used: {exc}",
                         hint="pass --db NEW.db, or move the damaged file away") from None
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    finally:
        conn.close()


# ----------------------------------------------------------------------------- writing


def _digest(row_json: str) -> str:
    return hashlib.sha256(row_json.encode("utf-8")).hexdigest()


def _add_dir(db, res: ResultSet, now: str) -> ImportedDir:  # noqa: ANN001
    assert res.path is not None
    path = str(Path(res.path).resolve())
    env = res.env
    stamp = {"path": path, "name": res.name, "gpu_name": env.gpu_name if env else None,
             "host": env.host if env else None, "git_rev": env.git_rev if env else None,
             "git_dirty": None if env is None or env.git_dirty is None else int(env.git_dirty),
             "session_id": env.session_id if env else None, "created_utc": env.created_utc if env else None,
             "env_json": json.dumps(env.to_json(), sort_keys=True) if env else None, "imported_utc": now}
    db["dirs"].insert(stamp, ignore=True)
    dir_id = next(db.query("SELECT id FROM dirs WHERE path = ?", [path]))["id"]
    db["dirs"].update(dir_id, {k: v for k, v in stamp.items() if k not in ("path", "imported_utc")})
    added = 0
    for r in res.rows:
        row_json = json.dumps(r.to_json(), sort_keys=True, allow_nan=False)
        digest = _digest(row_json)
        key = r.key
        record = {"dir_id": dir_id, "config": key.config, "gpu_index": key.gpu,
                  "role": None if key.role is None else key.role.value, "variant": key.variant, "label": r.label,
                  "session": r.session or (env.session_id if env else None),
                  "measured_utc": r.timestamp or (env.created_utc if env else None),
                  "git_rev": env.git_rev if env else None, "git_dirty": stamp["git_dirty"],
                  "gpu_name": r.gpu_name or (env.gpu_name if env else None), "gpu_uuid": r.gpu_uuid,
                  "host": r.host or (env.host if env else None),
                  **{c: r.value(c) for c in _CONFIG_COLUMNS}, "digest": digest, "row_json": row_json,
                  "imported_utc": now}
        if next(db.query("SELECT id FROM rows WHERE dir_id = ? AND label = ? AND digest = ?",
                         [dir_id, r.label, digest]), None) is not None:
            continue  # recorded before (the write lock is held: no one adds it meanwhile)
        row_id = db["rows"].insert(record).last_pk
        added += 1
        samples = {m.metric: list(m.samples) for m in r.measurements}
        values = {c: r.number(c) for c in _NUMERIC if r.number(c) is not None}
        values.update({m: None for m in samples if m not in values})
        db["metrics"].insert_all([{"row_id": row_id, "metric": m, "value": v,
                                   "samples_json": json.dumps(samples[m]) if m in samples else None}
                                  for m, v in values.items()], ignore=True)
    return ImportedDir(path, res.name, len(res.rows), added)


@dataclass(frozen=True, slots=True)
class ImportOutcome:
    """What ``history import`` did: the dirs it recorded, and what it left out and why."""

    imported: tuple[ImportedDir, ...]
    skipped: tuple[Skipped, ...]

    @property
    def rows_added(self) -> int:
        return sum(d.rows_added for d in self.imported)


def import_folders(db_path: Path, paths: Sequence[Path],
                   on_dir: Callable[[ImportedDir], None] | None = None) -> ImportOutcome:
    """``history import PATH...``: every results dir among ``paths`` and under them, at any depth
    (:func:`~clusterbench.io.results.find_results_dirs`), with what was skipped and why (files, folders
    without a results dir, folders that cannot be listed). Every results dir is read before anything is
    written: one that cannot be read is bad input (InputError naming its file, nothing written). InputError
    too when there is no results dir at all, naming what was skipped. ``on_dir`` hears of each dir as it
    is recorded (progress)."""
    found = find_results_dirs(paths)
    refuse_inputs_as_outputs([("--db", db_path)], [("results dir", d) for d in found.dirs])
    check_history_file(db_path)  # before any dir is read: a database that is not a history is refused
    sets = []
    skipped = list(found.skipped)
    for d in found.dirs:
        try:
            sets.append(load_results(d))
        except InputError as exc:  # named and left out; the others are imported
            skipped.append(Skipped(d, f"cannot be read: {exc}"))
    if not sets:
        said = "; ".join(f"{s.path}: {s.reason}" for s in skipped)
        raise InputError(f"no results dir to import in {', '.join(map(str, paths))}" + (f" ({said})" if said else ""),
                         hint="a results dir is a folder holding probes.csv and env.json, as clusterbench probe "
                              "writes under results/: clusterbench history import results")
    out = []
    for res in sets:
        with open_history(db_path, write=True) as db:
            out.append(_add_dir(db, res, _utc_now()))
        if on_dir is not None:
            on_dir(out[-1])
    return ImportOutcome(tuple(out), tuple(skipped))


def import_dirs(db_path: Path, dirs: Sequence[Path]) -> tuple[ImportedDir, ...]:
    """Add results dirs to the history (each read first: InputError for a bad one, before anything is
    written); each dir in one transaction. Idempotent: what is already recorded is not added again."""
    refuse_inputs_as_outputs([("--db", db_path)], [("results dir", d) for d in dirs])
    sets = [load_results(d) for d in dirs]
    out = []
    for res in sets:
        with open_history(db_path, write=True) as db:
            out.append(_add_dir(db, res, _utc_now()))
    return tuple(out)


def record_probe(db_path: Path | None, results_dir: Path) -> str | None:
    """The probe's call: record what ``results_dir`` holds now. Returns a warning to show when the history
    could not be written (the results dir itself is safe); None when recorded or when ``db_path`` is None."""
    if db_path is None:
        return None
    try:
        import_dirs(db_path, [results_dir])
    except (InputError, EnvironmentFailure, OSError) as exc:
        return f"the row is in {results_dir}, but not in the history database {db_path}: {exc}"
    return None


# ----------------------------------------------------------------------------- reading


def _point(r: dict, metric: str) -> HistoryPoint:
    row = ResultRow.from_json(json.loads(r["row_json"]))
    # an env.json recorded from a dir of version 1 may hold its kernel digests as text
    env = EnvRecord.from_json(digests_from_text(json.loads(r["env_json"]))) if r["env_json"] else None
    return HistoryPoint(r["dir_id"], r["path"], r["name"], row.label, metric, row.number(metric) if metric else None,
                        r["measured_utc"], r["git_rev"], None if r["git_dirty"] is None else bool(r["git_dirty"]),
                        r["gpu_name"], r["host"], r["session"], row, env)


# the latest row version of each (dir, label): the one imported last
_LATEST = """
SELECT rows.*, dirs.path, dirs.name, dirs.env_json FROM rows JOIN dirs ON dirs.id = rows.dir_id
WHERE rows.id IN (SELECT max(id) FROM rows GROUP BY dir_id, label) {where}
ORDER BY rows.measured_utc, rows.id
"""


def series(db_path: Path, label: str, metric: str, gpu: str | None = None,
           since: str | None = None) -> tuple[HistoryPoint, ...]:
    """One point per results dir holding ``label``, in the order measured: the value of ``metric`` in the
    latest version of its row. ``gpu``: only rows whose GPU name contains it (any case); ``since``: only
    rows measured on or after that ISO date."""
    where, args = ["AND rows.label = ?"], [label]
    if gpu:
        where.append("AND lower(rows.gpu_name) LIKE ?")
        args.append(f"%{gpu.lower()}%")
    if since:
        where.append("AND rows.measured_utc >= ?")
        args.append(since)
    with open_history(db_path) as db:
        found = list(db.query(_LATEST.format(where=" ".join(where)), args))
    return tuple(_point(r, metric) for r in found)


def labels(db_path: Path) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Every label recorded, with the metrics measured for it (the compared ones first), sorted."""
    with open_history(db_path) as db:
        found = list(db.query("SELECT rows.label AS label, metrics.metric AS metric FROM rows JOIN metrics "
                              "ON metrics.row_id = rows.id WHERE metrics.value IS NOT NULL GROUP BY 1, 2"))
    out: dict[str, list[str]] = {}
    for r in found:
        out.setdefault(r["label"], []).append(r["metric"])
    return tuple((lb, tuple(sorted(ms))) for lb, ms in sorted(out.items()))


def dir_results(db_path: Path, dir_path: str) -> ResultSet:
    """A results dir as the history recorded it (the latest version of each row), by its resolved path."""
    with open_history(db_path) as db:
        found = list(db.query(_LATEST.format(where="AND dirs.path = ?"), [dir_path]))
    if not found:
        raise InputError(f"the history holds no rows of {dir_path}", hint="clusterbench history import DIR")
    return _result_set([_point(r, "") for r in found], dir_path)


def _result_set(points: Sequence[HistoryPoint], dir_path: str) -> ResultSet:
    return ResultSet(points[0].env, tuple(p.row for p in points), Path(dir_path))


def check_baseline_name(name: str) -> str:
    if not _NAME_RE.match(name or ""):
        raise InputError(f"a baseline name is 1 to 64 letters, digits, '.', '_' or '-', got {name!r}",
                         hint="e.g. clusterbench baseline set release-1.2 results/2026-12-01_f32")
    return name


def set_baseline(db_path: Path, name: str, directory: Path) -> Baseline:
    """Name the rows ``directory`` holds now (imported first) as baseline ``name``; an existing name moves."""
    check_baseline_name(name)
    refuse_inputs_as_outputs([("--db", db_path)], [("DIR", directory)])
    check_history_file(db_path)
    res = load_results(directory)
    now = _utc_now()
    with open_history(db_path, write=True) as db:
        imported = _add_dir(db, res, now)
        dir_id = next(db.query("SELECT id FROM dirs WHERE path = ?", [imported.path]))["id"]
        rows = list(db.query("SELECT max(id) AS id, label FROM rows WHERE dir_id = ? GROUP BY label", [dir_id]))
        db.execute("DELETE FROM baseline_rows WHERE name = ?", [name])
        db["baselines"].upsert({"name": name, "dir_id": dir_id, "set_utc": now}, pk="name")
        db["baseline_rows"].insert_all([{"name": name, "row_id": r["id"]} for r in rows])
    return Baseline(name, imported.path, imported.name, now, tuple(sorted(r["label"] for r in rows)))


def baselines(db_path: Path) -> tuple[Baseline, ...]:
    with open_history(db_path) as db:
        found = list(db.query("SELECT b.name, b.set_utc, d.path, d.name AS dir_name, group_concat(r.label, '\n') AS labels "
                              "FROM baselines b JOIN dirs d ON d.id = b.dir_id JOIN baseline_rows br ON br.name = b.name "
                              "JOIN rows r ON r.id = br.row_id GROUP BY b.name ORDER BY b.name"))
    return tuple(Baseline(r["name"], r["path"], r["dir_name"], r["set_utc"], tuple(sorted(r["labels"].split("\n"))))
                 for r in found)


def baseline_results(db_path: Path, name: str) -> ResultSet:
    """The rows baseline ``name`` pinned, as a results set (its path: the dir it was set from)."""
    check_baseline_name(name)
    with open_history(db_path) as db:
        found = list(db.query("SELECT rows.*, dirs.path, dirs.name, dirs.env_json FROM baseline_rows br "
                              "JOIN rows ON rows.id = br.row_id JOIN dirs ON dirs.id = rows.dir_id "
                              "WHERE br.name = ? ORDER BY rows.id", [name]))
        known = [r["name"] for r in db.query("SELECT name FROM baselines ORDER BY name")]
    if not found:
        raise InputError(f"no baseline named {name!r} in {db_path}"
                         + (f" (known: {', '.join(known)})" if known else " (none set)"),
                         hint="clusterbench baseline set NAME DIR names one")
    return _result_set([_point(r, "") for r in found], found[0]["path"])


_SESSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")


def check_session_name(name: str) -> str:
    """A ``--session NAME``: 1 to 64 letters, digits, '.', '_', ':' or '-' (it goes into probes.csv)."""
    if not _SESSION_RE.match(name or ""):
        raise InputError(f"--session takes 1 to 64 letters, digits, '.', '_', ':' or '-', got {name!r}",
                         hint="e.g. --session alloc-2026-12-01")
    return name
