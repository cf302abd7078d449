"""Results dirs: ``results/<YYYY-MM-DD>_<f32|f64>[_tag]/`` with env.json, probes.csv and traces.

``probes.csv`` holds one row per config label. Re-running one config replaces its own row
and keeps the others. Every write goes to a temporary file in the same dir, is fsynced,
and is renamed over the old file (``os.replace`` is atomic on POSIX), all under an
exclusive ``fcntl.flock`` on ``.probes.lock``: two writers never interleave, and a crash
or Ctrl-C at any point leaves either the old complete file or the new complete file.
Temporary files are named ``.probes.csv.*.tmp``; nothing reads them, and the next writer
(holding the lock, so no one else is writing) deletes any a crashed writer left behind.

Values are written so that they read back exactly: floats as ``repr(float(x))`` (the
shortest text that round-trips), ints as ints, ``None`` ("not measured") as an empty cell.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import fcntl
import io
import json
import math
import numbers
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Iterator, Mapping

from clusterbench.model import records
from clusterbench.errors import InputError

# env.json format version: records.ENV_SCHEMA_VERSION, with its history. 1 (clusterbench 0.1.0):
# first version; 2: adds probes_csv_version, workloads, and per config workload/command/finder.
# Version 1 dirs still load (records.ENV_VERSIONS_READ); new keys are only additive.
ENV_SCHEMA_VERSION = records.ENV_SCHEMA_VERSION
PROBES_CSV_VERSION = records.PROBES_CSV_VERSION

PROBES_CSV = "probes.csv"
ENV_JSON = "env.json"
LOCK_NAME = ".probes.lock"
_TMP_PREFIX = ".probes.csv."
_ENV_TMP_PREFIX = ".env.json."
_TMP_SUFFIX = ".tmp"

# The probes.csv columns, in order: the fields of records.ProbeRecord (its docstring gives the
# units). The first 11 are the contract every row carries. Version 2 added workload and finder.
PROBE_COLUMNS: tuple[str, ...] = records.PROBE_COLUMNS
REQUIRED_COLUMNS: tuple[str, ...] = records.REQUIRED_COLUMNS
INT_COLUMNS = records.INT_COLUMNS
TEXT_COLUMNS = records.TEXT_COLUMNS
SPREAD_SUFFIX = "_spread"

# env.json keys that clusterbench itself reads (compare). The probe writes these and more
# (cuda, cupy, nsys_version, gpu_uuid, guard, clocks, host, ...).
ENV_KEYS_READ = ("gpu_name", "driver", "pedestal_dtype", "pedestal", "git_rev", "git_dirty", "session_id")

_TAG_RE = re.compile(r"^[A-Za-z0-9._-]+$")
_DTYPE_TAGS = {"f32": "f32", "f64": "f64", "float32": "f32", "float64": "f64"}


def results_dir_for(root: Path, date: datetime.date, dtype_tag: str, tag: str | None = None) -> Path:
    """``root/<YYYY-MM-DD>_<f32|f64>[_tag]``. Accepts f32/f64 or float32/float64."""
    short = _DTYPE_TAGS.get(dtype_tag)
    if short is None:
        raise InputError(
            f"pedestal dtype tag must be f32 or f64, got {dtype_tag!r}",
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


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class ProbeRow:
    """One probes.csv row with typed values: int/float for numbers, str for text, None when empty."""

    values: Mapping[str, object]

    @property
    def label(self) -> str:
        return str(self.values["label"])

    def get(self, column: str, default: object = None) -> object:
        return self.values.get(column, default)

    def number(self, column: str) -> float | None:
        """A numeric column as float, or None when absent or not measured."""
        v = self.values.get(column)
        return None if v is None or isinstance(v, str) else float(v)  # type: ignore[arg-type]

    def __getitem__(self, column: str) -> object:
        return self.values[column]

    def as_dict(self) -> dict[str, object]:
        return dict(self.values)


@dataclass(frozen=True, slots=True)
class ResultsDir:
    """A loaded results dir: its env.json and its probes.csv rows, in file order.

    ``format`` is FORMAT_CLUSTERBENCH or FORMAT_LEGACY (the original aare probe scripts' dirs,
    see :func:`env_format`). ``samples`` holds per-repeat values where the dir records them:
    ``samples[label]["sustained_fps"]`` is the tuple of untraced FPS readings whose median is
    the row's ``sustained_fps``. ``notes`` are things noticed while reading (for warnings).
    """

    path: Path
    env: dict
    columns: tuple[str, ...]
    rows: tuple[ProbeRow, ...]
    format: str = "clusterbench"
    samples: Mapping[str, Mapping[str, tuple[float, ...]]] = field(default_factory=lambda: MappingProxyType({}))
    notes: tuple[str, ...] = ()

    @property
    def legacy(self) -> bool:
        return self.format == FORMAT_LEGACY

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(r.label for r in self.rows)

    def row(self, label: str) -> ProbeRow | None:
        for r in self.rows:
            if r.label == label:
                return r
        return None


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


def _remove_stale_temps(directory: Path, prefix: str) -> None:
    """Delete temp files a crashed writer left. Call only under the lock."""
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


def _read_raw(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """probes.csv as (header, rows of raw strings). Raises InputError on a malformed file."""
    try:
        # utf-8-sig: a probes.csv saved by a spreadsheet with a UTF-8 byte-order mark reads the same
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"probes.csv is not UTF-8 text: {path} ({exc.reason} at byte {exc.start})") from None
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
        raise InputError(f"probes.csv has duplicate columns {', '.join(dups)}: {path}")
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


def upsert_probe_row(directory: Path, row: records.ProbeRecord | Mapping[str, object]) -> None:
    """Replace the row with ``row['label']`` in ``directory/probes.csv``, or append it.

    Other rows keep their text and their order; new labels go last. Keys outside
    PROBE_COLUMNS become extra columns after them (existing extras keep their order).
    The read-modify-write runs under an exclusive lock and lands with an atomic rename.
    """
    if isinstance(row, records.ProbeRecord):
        row = row.to_json()
    label = row.get("label")
    if not isinstance(label, str) or not label:
        raise ValueError(f"a probe row needs a non-empty str label, got {label!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    new_cells = {str(k): format_cell(v) for k, v in row.items()}
    path = directory / PROBES_CSV
    with _locked(directory):
        _remove_stale_temps(directory, _TMP_PREFIX)
        header, rows = _read_raw(path) if path.exists() else ([], [])
        extras = [c for c in header if c not in PROBE_COLUMNS]
        extras += [c for c in new_cells if c not in PROBE_COLUMNS and c not in extras]
        columns = list(PROBE_COLUMNS) + extras
        for i, old in enumerate(rows):
            if old.get("label") == label:
                rows[i] = new_cells
                break
        else:
            rows.append(new_cells)
        buf = io.StringIO(newline="")
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        for r in rows:
            writer.writerow([r.get(c, "") for c in columns])
        _atomic_write_text(path, buf.getvalue(), _TMP_PREFIX)


def save_env(directory: Path, env: records.EnvRecord | Mapping[str, object]) -> None:
    """Write env.json atomically: sorted keys, indent 2, with ``schema_version``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    data = env.to_json() if isinstance(env, records.EnvRecord) else dict(env)
    data["schema_version"] = ENV_SCHEMA_VERSION
    text = json.dumps(data, sort_keys=True, indent=2, allow_nan=False) + "\n"
    with _locked(directory):
        _remove_stale_temps(directory, _ENV_TMP_PREFIX)
        _atomic_write_text(directory / ENV_JSON, text, _ENV_TMP_PREFIX)


# ----------------------------------------------------------------------------- reading


# env.json versions this reader accepts: 1, and 2 (version 1 plus keys such as workload, command,
# nsys_cuda_graph_trace, probes_csv_version), whatever version the writer stamps today.
ENV_SCHEMA_VERSIONS_READ = frozenset({1, 2, ENV_SCHEMA_VERSION})
FORMAT_CLUSTERBENCH = "clusterbench"
# The original aare probe scripts' results dirs (2026-09 and before): probes.csv with the 11
# contract columns, env.json with exactly these stamp keys and no schema_version (docs/compare.md).
FORMAT_LEGACY = "legacy aare-perf"
LEGACY_ENV_KEYS: tuple[str, ...] = ("gpu", "driver", "pedestal_dtype", "git_rev", "dirty")


def env_format(data: Mapping[str, object], path: Path) -> str:
    """FORMAT_CLUSTERBENCH for a known schema_version, FORMAT_LEGACY for an aare-perf stamp
    (no schema_version, every LEGACY_ENV_KEYS key present). InputError for anything else,
    naming what is missing or which version it has."""
    if "schema_version" not in data:
        missing = [k for k in LEGACY_ENV_KEYS if k not in data]
        if not missing:
            return FORMAT_LEGACY
        raise InputError(
            f"env.json has no schema_version and is not a legacy aare-perf stamp either "
            f"(that needs {', '.join(LEGACY_ENV_KEYS)}): it lacks {', '.join(missing)}: {path}",
            hint="a clusterbench env.json carries schema_version; a legacy aare-perf one carries "
            + ", ".join(LEGACY_ENV_KEYS),
        )
    version = data.get("schema_version")
    if isinstance(version, bool) or version not in ENV_SCHEMA_VERSIONS_READ:
        readable = " and ".join(str(v) for v in sorted(ENV_SCHEMA_VERSIONS_READ))
        raise InputError(
            f"env.json has schema_version {version!r}; this clusterbench reads {readable} "
            f"(and legacy aare-perf dirs, which have none): {path}",
            hint="use the clusterbench version that wrote it, or re-run clusterbench probe",
        )
    return FORMAT_CLUSTERBENCH


def load_env(directory: Path) -> dict:
    """env.json as a dict. InputError for a missing, malformed or unknown-version file.

    Accepts schema_version 1 and 2, and a legacy aare-perf stamp (see :func:`env_format`)."""
    path = Path(directory) / ENV_JSON
    if not path.is_file():
        raise InputError(
            f"no env.json in results dir: {directory}",
            hint="a results dir is written by clusterbench probe; point at one of results/<date>_<f32|f64>*/",
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(
            f"env.json is not valid JSON: {path} line {exc.lineno} column {exc.colno}: {exc.msg}",
            hint="fix the file by hand or re-run clusterbench probe into a fresh dir",
        ) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"env.json is not UTF-8 text: {path} ({exc.reason})") from None
    if not isinstance(data, dict):
        raise InputError(f"env.json must hold a JSON object, got {type(data).__name__}: {path}")
    env_format(data, path)
    return data


def _parse_cell(text: str, column: str, label: str, path: Path) -> object:
    s = text.strip()
    if column in TEXT_COLUMNS:
        return s if s else None
    if s == "":
        return None
    numeric = column in PROBE_COLUMNS or column.endswith(SPREAD_SUFFIX)
    try:
        f = float(s)
        if not math.isfinite(f):
            raise ValueError(s)
        if column in INT_COLUMNS:
            if not f.is_integer():
                raise ValueError(s)
            return int(f)
    except ValueError:
        if not numeric:
            return s  # an unknown extra column holding text: keep it as text
        kind = "an integer" if column in INT_COLUMNS else "a finite number"
        raise InputError(
            f"probes.csv row {label!r} column {column}: expected {kind}, got {s!r}: {path}",
            hint="fix the value by hand, or re-run clusterbench probe --only " + label,
        ) from None
    if column in PROBE_COLUMNS or column.endswith(SPREAD_SUFFIX):
        return f
    return int(s) if re.fullmatch(r"[+-]?\d+", s) else f


def load_results(directory: Path) -> ResultsDir:
    """Load a results dir: env.json plus typed probes.csv rows. InputError on any bad input."""
    directory = Path(directory)
    if not directory.exists():
        raise InputError(
            f"results dir does not exist: {directory}",
            hint="check the path; clusterbench probe writes results/<date>_<f32|f64>[_tag]/",
        )
    if not directory.is_dir():
        raise InputError(f"not a directory: {directory}", hint="pass a results dir, not a file inside it")
    path = directory / PROBES_CSV
    if not path.is_file():
        raise InputError(
            f"no probes.csv in results dir: {directory}",
            hint="run clusterbench probe to fill it, or point at another results dir",
        )
    header, raw = _read_raw(path)
    rows: list[ProbeRow] = []
    seen: set[str] = set()
    for lineno, cells in enumerate(raw, start=2):
        label = cells["label"].strip()
        if not label:
            raise InputError(f"probes.csv data row {lineno} has an empty label: {path}")
        if label in seen:
            raise InputError(f"probes.csv has label {label!r} twice: {path}", hint="keep one row per config label")
        seen.add(label)
        typed = {c: _parse_cell(cells[c], c, label, path) for c in header}
        _check_values(typed, label, path)
        rows.append(ProbeRow(MappingProxyType(typed)))
    env = load_env(directory)
    fmt = env_format(env, directory / ENV_JSON)
    samples: dict[str, Mapping[str, tuple[float, ...]]] = {}
    notes: list[str] = []
    for r in rows:
        fps = _sustained_samples(directory, r, env, notes)
        if fps is not None:
            samples[r.label] = MappingProxyType({"sustained_fps": fps})
    return ResultsDir(path=directory, env=env, columns=tuple(header), rows=tuple(rows), format=fmt,
                      samples=MappingProxyType(samples), notes=tuple(notes))  # fmt: skip


# Columns that hold a measured time or rate: a value must be > 0 (an absent engine is an empty
# cell, "not measured", never 0). Every other numeric column (duty, idle, overlap, spreads,
# counts) must be >= 0.
POSITIVE_COLUMNS = frozenset(
    {"kernel_us", "h2d_us", "d2h_us", "roofline_us", "measured_us", "roofline_fps", "sustained_fps",
     "cluster", "cap", "streams", "batch", "frames"}
)  # fmt: skip


def _engine_names() -> tuple[str, ...]:
    from clusterbench.model.engines import ENGINES

    return tuple(ENGINES)


def _check_values(typed: dict[str, object], label: str, path: Path) -> None:
    """Impossible values are bad input: InputError naming the row and the column."""
    for column, v in typed.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if column in POSITIVE_COLUMNS and v <= 0:
            unit = " µs/frame" if column.endswith("_us") else (" FPS" if column.endswith("_fps") else "")
            what = "a time" if column.endswith("_us") else "a value"
            raise InputError(
                f"probes.csv row {label!r} column {column}: {what} must be > 0, got {v!r}{unit}: {path}",
                hint="an engine that was not measured is an empty cell; fix the value or re-run "
                f"clusterbench probe --only {label}",
            )
        if (column in PROBE_COLUMNS or column.endswith(SPREAD_SUFFIX)) and v < 0:
            raise InputError(
                f"probes.csv row {label!r} column {column}: must be >= 0, got {v!r}: {path}",
                hint=f"fix the value, or re-run clusterbench probe --only {label}",
            )
    binds = typed.get("binds")
    if binds is not None:
        engines = _engine_names()
        name = str(binds).strip().lower()
        if name not in engines:
            raise InputError(
                f"probes.csv row {label!r} column binds: {binds!r} is not an engine "
                f"(one of {', '.join(engines)}): {path}",
                hint=f"binds names the engine with the largest busy time; fix it or re-run clusterbench probe --only {label}",
            )
        typed["binds"] = name


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


def _sustained_samples(directory: Path, row: ProbeRow, env: Mapping, notes: list[str]) -> tuple[float, ...] | None:
    """The per-repeat sustained FPS of a row: ``<label>.sustained.json`` ("fps"), else env.json
    ``configs.<label>.sustained_fps``; only a list whose median is the row's sustained_fps
    (the two were written together), so a stale file is never paired with a newer row."""
    median = row.number("sustained_fps")
    if median is None:
        return None
    candidates: list[tuple[float, ...]] = []
    if _SAFE_LABEL.match(row.label):
        f = directory / f"{row.label}.sustained.json"
        if f.is_file():
            try:
                data = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                data = None
            if isinstance(data, dict):
                got = _positive_floats(data.get("fps"))
                if got is not None:
                    candidates.append(got)
    configs = env.get("configs")
    entry = configs.get(row.label) if isinstance(configs, Mapping) else None
    if isinstance(entry, Mapping):
        got = _positive_floats(entry.get("sustained_fps"))
        if got is not None:
            candidates.append(got)
    for c in candidates:
        s = sorted(c)
        k = len(s)
        mid = s[k // 2] if k % 2 else (s[k // 2 - 1] + s[k // 2]) / 2.0
        if math.isclose(mid, median, rel_tol=1e-9):
            return c
    if candidates:
        notes.append(f"{directory.name}: the sustained FPS repeats recorded for {row.label} do not have its "
                     f"probes.csv median {median!r}: repeats ignored, the noise floor alone decides")  # fmt: skip
    return None
