"""Results dirs: ``results/<YYYY-MM-DD>_<f32|f64>[_tag]/`` with env.json, probes.csv, samples.json and traces.

The store of :class:`~clusterbench.model.results.ResultSet`: :func:`load_results` reads a dir of any
format version (the one dispatch, ``_READERS``); :func:`merge_results` is the one write: it merges a
set into a dir with :meth:`ResultSet.merge` (a row replaces the dir's row of the same key, every other
row and every env.json block stays) and writes the whole dir in the current version.

Every write happens under an exclusive ``fcntl.flock`` on ``.probes.lock`` for the whole
read-merge-write, so two writers never interleave. Each file goes to a temporary file in the same dir,
is fsynced, and is renamed over the old one (``os.replace`` is atomic on POSIX): a crash or Ctrl-C at
any point leaves either the old complete file or the new complete one. Temporary files are named
``.probes.csv.*.tmp`` (``.env.json.*``, ``.samples.json.*``); nothing reads them, and the next writer
(holding the lock, so no one else is writing) deletes any a crashed writer left behind. samples.json is
written first and each of its entries names the session and timestamp of its row, so samples are only
ever attached to the row they were measured for.

Values are written so that they read back exactly: floats as ``repr(float(x))`` (the shortest text
that round-trips), ints as ints, ``None`` ("not measured") as an empty cell.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import dataclasses
import datetime
import fcntl
import io
import json
import math
import numbers
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

from clusterbench.errors import InputError
from clusterbench.model.measurement import SUSTAINED_FPS, Measurement
from clusterbench.model.jsontypes import check_json, json_value_words
from clusterbench.model.results import (COLUMN_KINDS, COLUMNS, KEY_COLUMNS, LEGACY_VERSION, REQUIRED_COLUMNS,
                                        SPREAD_SUFFIX, ConfigEntry, EnvRecord, ResultRow, ResultSet, RowKey,
                                        RowRole, RowValueError)
from clusterbench.model.stats import median

PROBES_CSV = "probes.csv"
ENV_JSON = "env.json"
SAMPLES_JSON = "samples.json"
LOCK_NAME = ".probes.lock"
_TMP_PREFIX = ".probes.csv."
_ENV_TMP_PREFIX = ".env.json."
_SAMPLES_TMP_PREFIX = ".samples.json."
_TMP_SUFFIX = ".tmp"

RESULTS_SCHEMA = "clusterbench.results"
SAMPLES_SCHEMA = "clusterbench.samples"
# The format version of a results dir: env.json's "version" (beside "schema": RESULTS_SCHEMA); its
# probes.csv and samples.json are of the same version. load_results reads every version below
# through _READERS and refuses any other; merge_results writes RESULTS_VERSION. History:
#   0 legacy aare-perf (the original aare probe scripts, 2026-09 and before): env.json without a
#     version, holding gpu, driver, pedestal_dtype, git_rev, dirty; probes.csv with the 11 contract
#     columns; no samples.
#   1 (clusterbench 0.1.0): env.json "schema_version": 1; probes.csv of 38 columns, label .. timestamp;
#     the sustained FPS repeats in env.json configs.<label>.sustained_fps (and "fps" of
#     <label>.sustained.json), found for a row by matching its median.
#   2: env.json "schema_version": 2 adds probes_csv_version, workloads, and per config workload, command
#     and finder; probes.csv adds workload and finder after transfer. --gpus probes and campaign merges
#     pack the row key into the label (3x3@gpu0.solo@h100) and add columns config_label, gpu, gpu_index,
#     role, variant, gpu_name, gpu_uuid, host, pinning, gpus, gpu_min_fps, gpu_min_index, solo_gpu,
#     solo_fps, scaling_efficiency, task, source_dir as needed.
#   3: env.json "schema" + "version"; blocks it does not know are kept. probes.csv: the key columns
#     config, gpu (an index), role, variant after binds, then the per-GPU and campaign columns, every
#     row with every column; label is derived from the key. samples.json holds every row's raw samples
#     keyed by row key; env.json drops configs.<label>.sustained_fps, the derived top-level clocks and
#     probes_csv_version, and its configs entries name their config and variant.
#   4: probes.csv adds serial_us, sustained_source, rate_check, kernel_check, processes and error, and a row of
#     an exec workload (a program probed as it is) may leave cluster, cap, streams, batch and frames empty;
#     binds may be "host"; env.json configs entries add analysis, sustained, checks, error and phase_s.
#     A version-3 dir reads as it is (its rows lack the new columns: not measured).
#   5: sustained FPS from several fresh processes: probes.csv adds sustained_processes; samples.json's
#     sustained measurement holds the process medians as its samples and every process under
#     metadata.processes; env.json adds the unit block (the GPU on its host and boot, its link, PCIe, NUMA,
#     CPU and clocks). A version-4 dir reads as it is (one process per figure, no unit).
RESULTS_VERSION = 5

# The config columns a row that lacks them takes from env.json (older and hand-written dirs): its config
# entry, else the dir's value. A clusterbench dir that names no workload ran the CuPy workload.
FILLED_COLUMNS = ("tracer", "transfer", "pedestal", "pedestal_dtype", "workload")
DEFAULT_WORKLOAD = "cupy"

# The largest magnitude of a figure in probes.csv: far above any µs per frame, FPS, GB/s or count a probe
# writes (the committed dirs stay below 2e5), far below where a difference or a percentage of two figures
# overflows a float. Integers (frames, bytes) are held to 64 bits.
MAX_FIGURE = 1e15
INT64_MAX = 2**63 - 1

_TAG_RE = re.compile(r"^[A-Za-z0-9._-]+$")
_DTYPE_TAGS = {"f32": "f32", "f64": "f64", "float32": "f32", "float64": "f64", "exec": "exec"}
# The hints of a results file that cannot be read as it is
_FIX_BLOCK = ("fix that block by hand (docs/results-format.md lists each block and its type), or re-run "
              "clusterbench probe into a fresh dir")
_FIX_FILE = "fix the file by hand, or re-run clusterbench probe into a fresh dir"


# A campaign's folder (``<results dir>.campaign``) holds this plan and its tasks' own results dirs, which the
# campaign merged into its results dir (clusterbench.run.tasks.CAMPAIGN_JSON): a search for results dirs
# leaves it out, so that no row is found twice.
CAMPAIGN_PLAN = "campaign.json"


@dataclass(frozen=True, slots=True)
class Skipped:
    """A path a search for results dirs left out, and why (for the user)."""

    path: Path
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"path": str(self.path), "reason": self.reason}


@dataclass(frozen=True, slots=True)
class FoundDirs:
    """The results dirs among some paths and under them: ``named`` those given themselves (the others were
    found in a folder), ``skipped`` what was left out and why."""

    dirs: tuple[Path, ...]
    named: frozenset[Path]
    skipped: tuple[Skipped, ...]


def find_results_dirs(paths: Sequence[Path]) -> FoundDirs:
    """The results dirs (folders holding probes.csv) among ``paths`` and under them at any depth, in path
    order. A results dir is not searched further; a campaign's folder (its tasks' dirs are in the results
    dir it merged them into) and hidden folders are not searched. Skipped, each with why: a file, a folder
    with no probes.csv in it or below (the topmost such folder: ``results/floors``, an empty folder), one
    that cannot be read. InputError for a path that does not exist (before anything is read)."""
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise InputError(f"no such file or folder: {', '.join(map(str, missing))}",
                         hint="give results dirs, or folders that hold them (clusterbench history import results)")
    dirs: list[Path] = []
    named: set[Path] = set()
    skipped: list[Skipped] = []
    for path in map(Path, paths):
        if not path.is_dir():
            skipped.append(Skipped(path, "a file, not a folder"))
            continue
        if (path / PROBES_CSV).is_file():
            dirs.append(path)
            named.add(path)
            continue
        found, inner, why = _search(path)
        dirs += found
        skipped += inner if why is None else [Skipped(path, why)]
    return FoundDirs(tuple(dict.fromkeys(dirs)), frozenset(named), tuple(skipped))


def _search(folder: Path) -> tuple[list[Path], list[Skipped], str | None]:
    """The results dirs under ``folder``, what was skipped inside it, and why ``folder`` itself is skipped
    (None when it holds a results dir at some depth)."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        return [], [], f"cannot be read ({exc.strerror or exc})"
    names = {e.name for e in entries}
    if PROBES_CSV in names and (folder / PROBES_CSV).is_file():
        return [folder], [], None
    if CAMPAIGN_PLAN in names:
        return [], [], "a campaign's folder (its tasks' rows are in the results dir the campaign merged them into)"
    found: list[Path] = []
    inner: list[Skipped] = []
    files: list[str] = []
    empty_folders = 0
    for e in entries:
        try:
            is_dir = e.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if not is_dir:
            files.append(e.name)
            continue
        sub = folder / e.name
        if e.name.startswith("."):
            inner.append(Skipped(sub, "a hidden folder, not searched"))
            continue
        f, s, why = _search(sub)
        found += f
        if why is None:
            inner += s
        else:
            empty_folders += 1
            inner.append(Skipped(sub, why))
    if found:
        return found, inner, None
    if not entries:
        return [], [], "empty"
    held = []
    if files:
        held.append(", ".join(files[:3]) + (f" and {len(files) - 3} more file(s)" if len(files) > 3 else ""))
    if empty_folders:
        held.append(f"{empty_folders} folder(s) without one")
    hidden = sum(1 for s in inner if s.reason.startswith("a hidden"))
    if hidden:
        held.append(f"{hidden} hidden folder(s)")
    return [], [], "no probes.csv in it or below" + (f" (it holds {'; '.join(held)})" if held else "")


def results_dir_for(root: Path, date: datetime.date, dtype_tag: str, tag: str | None = None) -> Path:
    """``root/<YYYY-MM-DD>_<f32|f64|exec>[_tag]``. Accepts f32/f64, float32/float64, or exec (programs
    probed as they are, which have no pedestal type)."""
    short = _DTYPE_TAGS.get(dtype_tag)
    if short is None:
        raise InputError(
            f"pedestal dtype tag must be f32 or f64 (or exec), got {dtype_tag!r}",
            hint="set pedestal_dtype to float32 or float64 in configs.toml",
        )
    name = f"{date.isoformat()}_{short}"
    if tag is not None:
        if not _TAG_RE.match(tag) or tag in (".", ".."):
            raise InputError(
                f"results tag may hold only letters, digits, '-', '_' and '.': got {tag!r}",
                hint="pick a tag such as --tag after-unroll",
            )
        name += f"_{tag}"
    return Path(root) / name


# ----------------------------------------------------------------------------- writing


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Exclusive flock on ``directory/.probes.lock`` for the whole read-modify-write."""
    fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _atomic_write_text(path: Path, text: str, tmp_prefix: str) -> None:
    """Write ``text`` to a temp file beside ``path``, fsync, rename over ``path``, fsync the dir."""
    fd, tmp_name = tempfile.mkstemp(prefix=tmp_prefix, suffix=_TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_name, path)
    except BaseException:  # Ctrl-C included: never leave our own temp file behind
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _remove_stale_temps(directory: Path) -> None:
    """Delete temp files a crashed writer left. Call only under the lock."""
    for prefix in (_TMP_PREFIX, _ENV_TMP_PREFIX, _SAMPLES_TMP_PREFIX):
        for p in directory.glob(f"{prefix}*{_TMP_SUFFIX}"):
            with contextlib.suppress(OSError):
                p.unlink()


def format_cell(value: object) -> str:
    """One CSV cell: '' for None, shortest round-trip text for floats."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        f = float(value)
        if not math.isfinite(f):
            raise ValueError(f"probes.csv values must be finite numbers, got {f!r}; use None for not measured")
        return repr(f)
    return str(value)


def _json_text(doc: Mapping[str, object]) -> str:
    return json.dumps(doc, sort_keys=True, indent=2, allow_nan=False) + "\n"


def _probes_csv_text(rows: tuple[ResultRow, ...]) -> str:
    extras = list(dict.fromkeys(c for r in rows for c in r.extra))
    columns = list(COLUMNS) + extras
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for r in rows:
        cells = r.cells()
        writer.writerow([format_cell(cells.get(c)) for c in columns])
    return buf.getvalue()


def _samples_doc(rows: tuple[ResultRow, ...]) -> dict[str, object]:
    return {"schema": SAMPLES_SCHEMA, "version": RESULTS_VERSION,
            "rows": [{"key": r.key.to_json(), "session": r.session, "timestamp": r.timestamp,
                      "measurements": [m.to_json() for m in r.measurements]} for r in rows if r.measurements]}


def merge_results(directory: Path, update: ResultSet) -> ResultSet:
    """Merge ``update`` into the results dir (:meth:`ResultSet.merge`) and write it whole, in the current
    version: samples.json, probes.csv, then env.json (when the merged set has an env). Returns the
    merged set. The read-merge-write runs under an exclusive lock; each file lands with an atomic rename.
    InputError when the dir holds results this clusterbench cannot read (they are left as they are)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory):
        _remove_stale_temps(directory)
        has_rows, has_env = (directory / PROBES_CSV).is_file(), (directory / ENV_JSON).is_file()
        current = _load(directory) if has_rows or has_env else ResultSet(path=directory)
        merged = current.merge(update)
        # render every file before writing any, so a value that cannot be written changes nothing
        csv_text = _probes_csv_text(merged.rows)
        samples_text = _json_text(_samples_doc(merged.rows))
        env_text = None if merged.env is None else _json_text(
            {**merged.env.to_json(), "schema": RESULTS_SCHEMA, "version": RESULTS_VERSION})
        _atomic_write_text(directory / SAMPLES_JSON, samples_text, _SAMPLES_TMP_PREFIX)
        _atomic_write_text(directory / PROBES_CSV, csv_text, _TMP_PREFIX)
        if env_text is not None:
            _atomic_write_text(directory / ENV_JSON, env_text, _ENV_TMP_PREFIX)
    return dataclasses.replace(merged, path=directory, version_read=RESULTS_VERSION)


# ----------------------------------------------------------------------------- reading


def _read_raw(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """probes.csv as (header, rows of raw strings). Raises InputError on a malformed file."""
    try:
        # utf-8-sig: a probes.csv saved by a spreadsheet with a UTF-8 byte-order mark reads the same
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"probes.csv is not UTF-8 text: {path} ({exc.reason} at byte {exc.start})",
                         hint="save it as UTF-8, or re-run clusterbench probe into a fresh dir") from None
    except OSError as exc:
        raise InputError(f"cannot read probes.csv: {path}: {exc.strerror or exc}",
                         hint="check its permissions, or point at another results dir") from None
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        records = list(reader)
    except csv.Error as exc:
        raise InputError(
            f"probes.csv is malformed: {path} line {reader.line_num}: {exc}",
            hint="re-run clusterbench probe for the affected configs, or fix the file by hand",
        ) from None
    records = [r for r in records if r]  # csv yields [] for blank lines
    if not records:
        raise InputError(f"probes.csv is empty (no header): {path}", hint="re-run clusterbench probe")
    header = [h.strip() for h in records[0]]
    if len(set(header)) != len(header):
        dups = sorted({h for h in header if header.count(h) > 1})
        raise InputError(f"probes.csv has duplicate columns {', '.join(dups)}: {path}",
                         hint="keep one column of each name (fix the header by hand), or re-run clusterbench probe")
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise InputError(
            f"probes.csv lacks required column(s) {', '.join(missing)}: {path}",
            hint=f"a probes.csv needs at least: {', '.join(REQUIRED_COLUMNS)}",
        )
    rows: list[dict[str, str]] = []
    for lineno, rec in enumerate(records[1:], start=2):
        if len(rec) != len(header):
            raise InputError(
                f"probes.csv is malformed: {path} data row {lineno}: {len(rec)} fields, header has {len(header)}",
                hint="re-run clusterbench probe for the affected configs, or fix the file by hand",
            )
        rows.append(dict(zip(header, rec)))
    return header, rows


def _parse_cell(text: str, kind: type | None, column: str, label: str, path: Path) -> object:
    """A cell as ``kind`` (int, float, bool, str), or for a column this version does not know: a number
    when it reads as one (a ``*_spread`` column must), else text."""
    s = text.strip()
    if kind is str:
        return s if s else None
    if s == "":
        return None
    if kind is bool:  # written as true / false (format_cell)
        if s.lower() in ("true", "false"):
            return s.lower() == "true"
        raise InputError(f"probes.csv row {label!r} column {column}: expected true or false, got {s!r}: {path}",
                         hint="fix the value by hand, or re-run clusterbench probe --only " + label.split("@")[0])
    numeric = kind is not None or column.endswith(SPREAD_SUFFIX)
    try:
        f = float(s)
        if not math.isfinite(f) or abs(f) > MAX_FIGURE:
            raise ValueError(s)
        if kind is int:
            if not f.is_integer():
                raise ValueError(s)
            value = int(s) if re.fullmatch(r"[+-]?\d+", s) else int(f)
            if abs(value) > INT64_MAX:
                raise ValueError(s)
            return value
    except ValueError:
        if not numeric:
            return s  # an unknown column holding text: keep it as text
        what = "an integer" if kind is int else "a finite number"
        try:
            big = math.isfinite(float(s)) and (kind is not int or float(s).is_integer())
        except ValueError:
            big = False
        if big:  # a number, but one no probe writes
            what += (f" of at most {INT64_MAX:,} (64 bits)" if kind is int else
                     f" of at most {MAX_FIGURE:g} in magnitude")
        raise InputError(
            f"probes.csv row {label!r} column {column}: expected {what}, got {s!r}: {path}",
            hint="fix the value by hand, or re-run clusterbench probe --only " + label.split("@")[0],
        ) from None
    if kind is float or column.endswith(SPREAD_SUFFIX):
        return f
    return int(s) if re.fullmatch(r"[+-]?\d+", s) and abs(int(s)) <= INT64_MAX else f


def _read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{what} is not valid JSON: {path} line {exc.lineno} column {exc.colno}: {exc.msg}",
            hint=_FIX_FILE,
        ) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} is not UTF-8 text: {path} ({exc.reason})", hint=_FIX_FILE) from None
    except OSError as exc:
        raise InputError(f"cannot read {what}: {path}: {exc.strerror or exc}",
                         hint="check its permissions, or point at another results dir") from None
    if not isinstance(data, dict):
        raise InputError(f"{what} must hold a JSON object, got {json_value_words(data)}: {path}", hint=_FIX_FILE)
    return data


LEGACY_ENV_KEYS: tuple[str, ...] = ("gpu", "driver", "pedestal_dtype", "git_rev", "dirty")
_READABLE = "5, 4, 3, 2 and 1 (and legacy aare-perf dirs, which have none)"


def dir_version(doc: Mapping[str, object], path: Path) -> int:
    """The format version an env.json says (see RESULTS_VERSION's history): its ``version`` beside
    ``schema``, its ``schema_version`` (1, 2), or LEGACY_VERSION for an aare-perf stamp. InputError for
    anything else, naming what is missing or which version it has."""
    if "schema" in doc:
        version = doc.get("version")
        if (doc["schema"] != RESULTS_SCHEMA or type(version) is not int or version not in _READERS
                or version < 3):
            raise InputError(
                f"env.json is schema {doc['schema']!r} version {version!r}; this clusterbench reads "
                f"{RESULTS_SCHEMA!r} versions {_READABLE}: {path}",
                hint="use the clusterbench version that wrote it, or re-run clusterbench probe")
        return version  # type: ignore[return-value]
    if "schema_version" not in doc:
        missing = [k for k in LEGACY_ENV_KEYS if k not in doc]
        if not missing:
            return LEGACY_VERSION
        raise InputError(
            f"env.json has no version and is not a legacy aare-perf stamp either "
            f"(that needs {', '.join(LEGACY_ENV_KEYS)}): it lacks {', '.join(missing)}: {path}",
            hint="a clusterbench env.json carries schema and version (schema_version before version 3); "
            "a legacy aare-perf one carries " + ", ".join(LEGACY_ENV_KEYS),
        )
    version = doc.get("schema_version")
    if type(version) is not int or version not in (1, 2):
        raise InputError(
            f"env.json has schema_version {version!r}; this clusterbench reads versions {_READABLE}: {path}",
            hint="use the clusterbench version that wrote it, or re-run clusterbench probe",
        )
    return version  # type: ignore[return-value]


# --- env.json of each version, as the current record


# The JSON type of the blocks only older versions have (the current ones are EnvRecord's fields): the
# legacy aare-perf stamp, and versions 1 and 2 (a legacy stamp given a schema_version by hand keeps gpu
# and dirty; clocks and probes_csv_version are dropped, each entry's sustained_fps read as samples).
_LEGACY_ENV_JSON: dict[str, object] = {"gpu": str, "driver": str, "pedestal_dtype": str, "git_rev": str,
                                       "dirty": bool | int | str}
_V1_V2_ENV_JSON: dict[str, object] = {"gpu": str | Mapping[str, object], "dirty": bool, "probes_csv_version": int,
                                      "clocks": Mapping[str, object]}


def _check_old_blocks(doc: Mapping[str, object], types: Mapping[str, object]) -> None:
    for name, hint in types.items():
        if name in doc:
            check_json(ENV_JSON, name, doc[name], hint)


def _env_legacy(doc: Mapping[str, object]) -> EnvRecord:
    _check_old_blocks(doc, _LEGACY_ENV_JSON)
    dirty = doc.get("dirty")
    upgraded = {k: v for k, v in doc.items() if k not in LEGACY_ENV_KEYS}
    upgraded.update(gpu_name=_text(doc.get("gpu")), driver=_text(doc.get("driver")),
                    pedestal_dtype=_text(doc.get("pedestal_dtype")), git_rev=_text(doc.get("git_rev")),
                    git_dirty=dirty if isinstance(dirty, bool) or dirty is None else
                    str(dirty).strip().lower() in ("1", "true", "yes", "dirty"))
    return EnvRecord.from_json(upgraded)


def digests_from_text(doc: Mapping[str, object]) -> Mapping[str, object]:
    """clusterbench 0.1.0 wrote kernel_sha256 (top level and per config) as the Python text of the
    mapping ("{'cluster_finder.cu': '1de3...'}"): the mapping that text holds, else not recorded."""
    text = doc.get("kernel_sha256")
    if not isinstance(text, str):
        return doc
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = None
    ok = isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    return {**doc, "kernel_sha256": value if ok else None}


def _env_v1_v2(doc: Mapping[str, object]) -> EnvRecord:
    """Versions 1 and 2: configs keyed by (packed) label, each with its sustained FPS repeats (read as
    samples, not kept here); a derived top-level clocks; probes_csv_version."""
    _check_old_blocks(doc, _V1_V2_ENV_JSON)
    upgraded = {k: v for k, v in digests_from_text(doc).items()
                if k not in ("schema_version", "probes_csv_version", "clocks")}
    # a legacy stamp given a schema_version by hand keeps its GPU and dirty flag
    for old, new in (("gpu", "gpu_name"), ("dirty", "git_dirty")):
        if new not in upgraded and old in upgraded and not isinstance(upgraded[old], Mapping):
            upgraded[new] = upgraded.pop(old)
    raw = doc.get("configs")
    if raw is not None and not isinstance(raw, Mapping):
        raise ValueError("env.json block 'configs' must be an object (config label: entry) or null, got "
                         + json_value_words(raw))
    configs = {}
    for label, entry in (raw or {}).items():
        if isinstance(entry, Mapping):
            entry = digests_from_text(entry)
        # named by the label as the file has it (EnvRecord names the upgraded one)
        ConfigEntry.from_json(entry, f"configs.{label}")  # type: ignore[arg-type]
        check_json(ENV_JSON, f"configs.{label}.sustained_fps", entry.get("sustained_fps"), tuple[float, ...])
        key = RowKey.from_label(str(label)).config_key
        configs[key.label] = {**{k: v for k, v in entry.items() if k != "sustained_fps"},  # type: ignore[union-attr]
                              "config": key.config, "variant": key.variant}
    upgraded["configs"] = configs
    return EnvRecord.from_json(upgraded)


def _env_v3(doc: Mapping[str, object]) -> EnvRecord:
    return EnvRecord.from_json({k: v for k, v in doc.items() if k not in ("schema", "version")})


# --- probes.csv rows of each version


# Version-2 columns that the key of version 3 replaces (the label packs the key in version 2).
_V2_KEY_COLUMNS = ("config_label", "gpu", "gpu_index", "role", "variant")


def _key_v1_v2(cells: dict[str, object]) -> RowKey:
    variant = _text(cells.pop("variant", None))
    for c in _V2_KEY_COLUMNS:
        cells.pop(c, None)
    return RowKey.from_label(str(cells.pop("label")), variant)


def _key_v3(cells: dict[str, object]) -> RowKey:
    label = cells.pop("label", None)
    parts = [cells.pop(c, None) for c in KEY_COLUMNS]
    if parts[0] is None:  # a hand-written row without the key columns: its label is its key
        return RowKey.from_label(str(label))
    return RowKey(*parts)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class _Reader:
    """How one format version is read: env.json as the current record, the kinds of probes.csv's
    columns, a row's key from its cells, and where its samples are."""

    env: Callable[[Mapping[str, object]], EnvRecord]
    kinds: Mapping[str, type]
    key: Callable[[dict[str, object]], RowKey]
    samples: str  # "none", "matched" (versions 1, 2: found by median) or "file" (samples.json)


_OLD_KINDS = {c: k for c, k in COLUMN_KINDS.items() if c not in KEY_COLUMNS}
_READERS: dict[int, _Reader] = {
    LEGACY_VERSION: _Reader(_env_legacy, _OLD_KINDS, _key_v1_v2, "none"),
    1: _Reader(_env_v1_v2, _OLD_KINDS, _key_v1_v2, "matched"),
    2: _Reader(_env_v1_v2, _OLD_KINDS, _key_v1_v2, "matched"),
    3: _Reader(_env_v3, COLUMN_KINDS, _key_v3, "file"),
    4: _Reader(_env_v3, COLUMN_KINDS, _key_v3, "file"),
    RESULTS_VERSION: _Reader(_env_v3, COLUMN_KINDS, _key_v3, "file"),
}


def load_results(directory: Path) -> ResultSet:
    """Load a results dir of any readable version: env.json, the typed probes.csv rows and their
    samples. InputError on any bad input."""
    directory = Path(directory)
    if not directory.exists():
        raise InputError(
            f"results dir does not exist: {directory}",
            hint="check the path; clusterbench probe writes results/<date>_<f32|f64>[_tag]/",
        )
    if not directory.is_dir():
        raise InputError(f"not a directory: {directory}", hint="pass a results dir, not a file inside it")
    if not (directory / PROBES_CSV).is_file():
        raise InputError(
            f"no probes.csv in results dir: {directory}",
            hint="run clusterbench probe to fill it, or point at another results dir",
        )
    if not (directory / ENV_JSON).is_file():
        raise InputError(
            f"no env.json in results dir: {directory}",
            hint="a results dir is written by clusterbench probe; point at one of results/<date>_<f32|f64>*/",
        )
    return _load(directory)


def existing_results(directory: Path) -> ResultSet | None:
    """What a results dir a probe is about to write into holds already: None when it holds neither
    probes.csv nor env.json (a new dir); InputError for one this clusterbench cannot read, so that the
    probe refuses before any GPU work rather than after it."""
    directory = Path(directory)
    if not ((directory / PROBES_CSV).is_file() or (directory / ENV_JSON).is_file()):
        return None
    return _load(directory)


def _load(directory: Path) -> ResultSet:
    """What the dir holds (either file may be missing while a writer fills a new dir)."""
    env_path, csv_path = directory / ENV_JSON, directory / PROBES_CSV
    doc = _read_json(env_path, "env.json") if env_path.is_file() else None
    version = RESULTS_VERSION if doc is None else dir_version(doc, env_path)
    reader = _READERS[version]
    env: EnvRecord | None = None
    if doc is not None:
        try:
            env = reader.env(doc)
        except ValueError as exc:
            msg = str(exc) if str(exc).startswith("env.json") else f"env.json: {exc}"
            raise InputError(f"{msg}: {env_path}", hint=_FIX_BLOCK) from None
    notes: list[str] = []
    rows: list[ResultRow] = []
    if csv_path.is_file():
        header, raw = _read_raw(csv_path)
        seen: set[RowKey] = set()
        for lineno, cells in enumerate(raw, start=2):
            label = cells["label"].strip() or (cells.get("config") or "").strip()
            if not label:
                raise InputError(f"probes.csv data row {lineno} has an empty label: {csv_path}",
                                 hint="give the row its config label (column label), or re-run clusterbench probe")
            typed = {c: _parse_cell(cells[c], reader.kinds.get(c), c, label, csv_path) for c in header}
            if isinstance(typed.get("binds"), str):
                typed["binds"] = typed["binds"].strip().lower()  # type: ignore[union-attr]
            try:
                old_label = str(typed["label"])
                key = reader.key(typed)
                _fill_config_columns(typed, key, env, version)
                row = ResultRow.from_json({**typed, **key.to_json()})
            except RowValueError as exc:
                raise InputError(f"probes.csv row {label!r} {exc}: {csv_path}", hint=exc.hint) from None
            except ValueError as exc:
                raise InputError(f"probes.csv row {label!r}: {exc}: {csv_path}",
                                 hint="fix the row by hand, or re-run clusterbench probe") from None
            if row.key in seen:
                raise InputError(f"probes.csv has label {row.label!r} twice: {csv_path}",
                                 hint="keep one row per config (and GPU, role, variant)")
            seen.add(row.key)
            if reader.samples == "matched":
                row = _matched_samples(directory, old_label, row, doc or {}, notes)
            rows.append(row)
    if reader.samples == "file":
        rows = _attach_samples(directory, rows, notes)
    elif reader.samples == "matched":
        lacking = [r.label for r in rows if r.sustained_fps is not None and not r.measurements
                   and r.key.role is not RowRole.AGGREGATE]
        if lacking:
            notes.append(f"{directory.name}: format version {version} recorded no per-repeat sustained FPS for "
                         f"{', '.join(lacking)}: the noise floor alone judges their sustained FPS")
    return ResultSet(env, tuple(rows), directory, version, tuple(notes))


def _fill_config_columns(cells: dict[str, object], key: RowKey, env: EnvRecord | None, version: int) -> None:
    """FILLED_COLUMNS a row lacks, from its config entry in env.json, else from the dir's value."""
    entry = env.entry(key) if env is not None else None
    for column in FILLED_COLUMNS:
        if cells.get(column) is not None:
            continue
        v: object = None
        if entry is not None:
            v = entry.params.get(column) if column in entry.params else (
                entry.tracer if column == "tracer" else entry.workload if column == "workload" else None)
        if v is None and env is not None and column != "transfer" and column != "workload":
            v = getattr(env, column)
        if v is None and column == "workload" and version != LEGACY_VERSION:
            v = DEFAULT_WORKLOAD
        cells[column] = None if v is None else str(v)


def _text(v: object) -> str | None:
    return None if v is None or (isinstance(v, str) and not v.strip()) else str(v).strip()


# --- samples


_SAFE_LABEL = re.compile(r"^[A-Za-z0-9._-]+$")


def _positive_floats(v: object) -> tuple[float, ...] | None:
    if not isinstance(v, list) or not v:
        return None
    out = []
    for x in v:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
            return None
        out.append(float(x))
    return tuple(out)


def _matched_samples(directory: Path, label: str, row: ResultRow, doc: Mapping, notes: list[str]) -> ResultRow:
    """Versions 1 and 2 kept a config's sustained FPS repeats apart from its row: ``<label>.sustained.json``
    ("fps") and env.json ``configs.<label>.sustained_fps``. A list whose median is the row's sustained_fps
    (the two were written together) becomes the row's measurement; a stale one is never paired."""
    if row.sustained_fps is None:
        return row
    candidates: list[tuple[str, tuple[float, ...]]] = []
    if _SAFE_LABEL.match(label):
        f = directory / f"{label}.sustained.json"
        if f.is_file():
            try:
                data = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                data = None
            if isinstance(data, dict):
                got = _positive_floats(data.get("fps"))
                if got is not None:
                    candidates.append((f.name, got))
    configs = doc.get("configs")
    entry = configs.get(label) if isinstance(configs, Mapping) else None
    if isinstance(entry, Mapping):
        got = _positive_floats(entry.get("sustained_fps"))
        if got is not None:
            candidates.append((f"env.json configs.{label}.sustained_fps", got))
    for where, values in candidates:
        if math.isclose(median(values), row.sustained_fps, rel_tol=1e-9):
            m = Measurement(SUSTAINED_FPS, values, metadata={"read_from": where})
            return dataclasses.replace(row, measurements=(*row.measurements, m))
    if candidates:
        notes.append(f"{directory.name}: the sustained FPS repeats recorded for {row.label} do not have its "
                     f"probes.csv median {row.sustained_fps!r}: repeats ignored, the noise floor alone decides")
    return row


def _attach_samples(directory: Path, rows: list[ResultRow], notes: list[str]) -> list[ResultRow]:
    """samples.json: each entry's measurements go to the row of its key, when the entry names that row's
    session and timestamp (a crash between the two writes leaves an entry of another run: ignored). Every
    block is checked first: InputError naming the block for one of the wrong type."""
    path = directory / SAMPLES_JSON
    if not path.is_file():
        return rows
    doc = _read_json(path, SAMPLES_JSON)
    schema, version = doc.get("schema"), doc.get("version")
    if schema != SAMPLES_SCHEMA or type(version) is not int or not 3 <= version <= RESULTS_VERSION:
        raise InputError(f"{SAMPLES_JSON} blocks 'schema' and 'version' must be {SAMPLES_SCHEMA!r} and "
                         f"{RESULTS_VERSION} (or 3 to {RESULTS_VERSION - 1}), got {json_value_words(schema)} and {json_value_words(version)}: "
                         f"{path}", hint="use the clusterbench version that wrote it, or re-run clusterbench probe")
    try:
        entries = _samples_entries(doc)
    except ValueError as exc:
        raise InputError(f"{exc}: {path}", hint=_FIX_BLOCK) from None
    by_key = {r.key: i for i, r in enumerate(rows)}
    out = list(rows)
    for key, session, timestamp, measurements in entries:
        i = by_key.get(key)
        if i is None:
            continue  # its row was never written (an interrupted run): nothing to pair it with
        row = out[i]
        if (session, timestamp) != (row.session, row.timestamp):
            notes.append(f"{directory.name}: the samples recorded for {row.label} belong to another run of it "
                         f"(session {session}, {timestamp}): ignored")
            continue
        try:
            out[i] = dataclasses.replace(row, measurements=measurements)
        except RowValueError as exc:
            raise InputError(f"{SAMPLES_JSON}: row {row.label!r} {exc}: {path}",
                             hint=f"re-run clusterbench probe --only {row.key.config}") from None
    return out


# The JSON type of each part of a samples.json row key (RowKey.to_json)
_KEY_JSON: dict[str, object] = {"config": str, "gpu": int, "role": str, "variant": str}


def _samples_entries(doc: Mapping[str, object]
                     ) -> list[tuple[RowKey, str | None, str | None, tuple[Measurement, ...]]]:
    """samples.json's entries, every block checked: ValueError naming the first of the wrong type."""
    entries = doc.get("rows")
    check_json(SAMPLES_JSON, "rows", entries, tuple[Mapping[str, object], ...], nullable=False)
    out = []
    for n, entry in enumerate(entries):  # type: ignore[arg-type]
        block = f"rows[{n}]"
        check_json(SAMPLES_JSON, f"{block}.key", entry.get("key"), Mapping[str, object], nullable=False)
        for name, hint in _KEY_JSON.items():
            check_json(SAMPLES_JSON, f"{block}.key.{name}", entry["key"].get(name), hint, nullable=name != "config")
        for name in ("session", "timestamp"):
            check_json(SAMPLES_JSON, f"{block}.{name}", entry.get(name), str)
        raw = entry.get("measurements")
        check_json(SAMPLES_JSON, f"{block}.measurements", raw, tuple[Mapping[str, object], ...], nullable=False)
        try:
            key = RowKey.from_json(entry["key"])
        except ValueError as exc:
            raise ValueError(f"{SAMPLES_JSON} block '{block}.key': {exc}") from None
        measurements = tuple(Measurement.from_json(m, SAMPLES_JSON, f"{block}.measurements[{j}]")
                             for j, m in enumerate(raw))  # type: ignore[arg-type]
        out.append((key, entry.get("session"), entry.get("timestamp"), measurements))
    return out
