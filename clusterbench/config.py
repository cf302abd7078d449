"""configs.toml -> validated, frozen ProbeConfig records.

The format (see docs/guards.md, "configs.toml")::

    [defaults]                 # every [[config]] inherits these unless it overrides them
    detector = [400, 400]      # rows, cols
    pedestal_frames = 1000
    nsigma = 5.0
    pedestal_dtype = "float32" # or "float64"
    pedestal = "frozen"        # or "tracking"
    transfer = "copy"          # or "zerocopy"

    [[config]]
    label = "3x3_s4"
    cluster = 3                # odd, 3..11
    cap = 3000
    streams = 4
    batch = 2000
    frames = 20000

    [build]                    # optional: an external build the guards check for freshness
    artifact = "build/finder"
    sources = ["src/*.cu", "src/*.cuh"]

Validation is pure (no GPU, no NVML) and reports every problem it finds at once, each
naming the file, the line where known, the config label and the key. Decisions:

- ``batch > frames`` is rejected in the file (that launch could never happen);
  ``with_frames`` clips ``batch`` to a shorter ``--frames`` so the recorded batch is the
  one launched.
- ``frames`` need not be a multiple of ``batch`` (the last launch is partial), and
  ``frames < batch * streams`` is allowed (some streams stay idle); ``config_warnings``
  says so, for the CLI to print.
- One file may hold float32 and float64 configs, but one probe run may not mix them,
  since the results dir is named by dtype: ``select`` refuses a mixed selection.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from clusterbench.errors import ConfigError
from clusterbench.workload import layout

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

DEFAULT_CONFIG_FILE = "configs.toml"

CLUSTER_MIN = 3
CLUSTER_MAX = 11
# The cluster record stores x and y as uint16, so no detector side may exceed 2**16 pixels.
DETECTOR_SIDE_MAX = 65536
# The pedestal std of one dark frame is 0 (every pixel would fire); two is the least that means anything.
PEDESTAL_FRAMES_MIN = 2
LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

DTYPES = ("float32", "float64")
PEDESTAL_MODES = ("frozen", "tracking")
TRANSFERS = ("copy", "zerocopy")
DTYPE_TAG = {"float32": "f32", "float64": "f64"}

# Built-in fallbacks for a file without [defaults]: the reference campaign's settings.
BUILTIN_DEFAULTS: dict[str, Any] = {
    "detector": [400, 400],
    "pedestal_frames": 1000,
    "nsigma": 5.0,
    "pedestal_dtype": "float32",
    "pedestal": "frozen",
    "transfer": "copy",
}
CONFIG_KEYS = (
    "label", "cluster", "cap", "streams", "batch", "frames",
    "detector", "pedestal_frames", "nsigma", "pedestal_dtype", "pedestal", "transfer",
)
REQUIRED_KEYS = ("label", "cluster", "cap", "streams", "batch", "frames")
DEFAULTS_KEYS = tuple(k for k in CONFIG_KEYS if k != "label")
BUILD_KEYS = ("artifact", "sources")
TOP_KEYS = ("defaults", "config", "build")


@dataclass(frozen=True, slots=True)
class ProbeConfig:
    """One probe: a cluster finder setting traced as one process. Rejects impossible values."""

    label: str
    cluster: int
    cap: int
    streams: int
    batch: int
    frames: int
    rows: int = 400
    cols: int = 400
    pedestal_frames: int = 1000
    nsigma: float = 5.0
    pedestal_dtype: str = "float32"
    pedestal: str = "frozen"
    transfer: str = "copy"

    def __post_init__(self) -> None:
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values["detector"] = [values.pop("rows"), values.pop("cols")]
        for key in CONFIG_KEYS:
            problem = _value_problem(key, values[key])
            if problem:
                raise ConfigError(f"config {self.label!r}: key {key!r}: {problem}", hint=_key_hint(key))
        for key, problem in _cross_problems(values):
            raise ConfigError(f"config {self.label!r}: key {key!r}: {problem}", hint=_key_hint(key))

    @property
    def dtype_tag(self) -> str:
        """``f32`` or ``f64``: names the results dir."""
        return DTYPE_TAG[self.pedestal_dtype]

    @property
    def itemsize(self) -> int:
        """Bytes per stored cluster value (4 for float32, 8 for float64)."""
        return layout.itemsize(self.pedestal_dtype)

    @property
    def cluster_bytes(self) -> int:
        """sizeof(cluster): uint16 x and y, then k*k values (40 bytes at 3x3 f32)."""
        return layout.cluster_bytes(self.cluster, self.pedestal_dtype)

    @property
    def slot_bytes(self) -> int:
        """The per-frame D2H slot, copied whole: a 4-byte count, then cap clusters."""
        return layout.slot_bytes(self.cap, self.cluster, self.pedestal_dtype)

    @property
    def frame_bytes(self) -> int:
        """One uint16 detector frame (the per-frame H2D copy)."""
        return layout.frame_bytes(self.rows, self.cols)

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True, slots=True)
class BuildSpec:
    """An external build named by ``[build]``: the artifact must be newer than every source.

    Paths are absolute, resolved against the config file's folder; ``sources`` may hold glob
    patterns, expanded when the guard runs.
    """

    artifact: Path
    sources: tuple[Path, ...]


@dataclass(frozen=True, slots=True)
class ConfigFile:
    path: Path
    configs: tuple[ProbeConfig, ...]
    build: BuildSpec | None = None

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(c.label for c in self.configs)


# --------------------------------------------------------------------------- value checks


def _is_int(x: Any) -> bool:
    return type(x) is int  # bool is not an int here


def _is_number(x: Any) -> bool:
    return type(x) in (int, float)


def _type_name(x: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a float", str: "a string",
            list: "an array", dict: "a table"}.get(type(x), type(x).__name__)


def _show(x: Any) -> str:
    return repr(x) if isinstance(x, str) else str(x).lower() if isinstance(x, bool) else str(x)


def _choice_problem(value: Any, choices: tuple[str, ...]) -> str | None:
    if not isinstance(value, str):
        return f"must be one of {', '.join(map(repr, choices))}, got {_type_name(value)} {_show(value)}"
    if value in choices:
        return None
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.5)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    return f"must be one of {', '.join(map(repr, choices))}, got {value!r}{guess}"


def _positive_int_problem(value: Any, minimum: int = 1) -> str | None:
    if not _is_int(value):
        return f"must be an integer, got {_type_name(value)} {_show(value)}"
    if value < minimum:
        return f"must be >= {minimum}, got {value}"
    return None


def _value_problem(key: str, value: Any) -> str | None:
    """What is wrong with one key's value on its own, or None."""
    if key == "label":
        if not isinstance(value, str):
            return f"must be a string, got {_type_name(value)} {_show(value)}"
        if not LABEL_RE.match(value):
            return (f"must be letters, digits, '.', '_' or '-' (it names trace files), "
                    f"starting with a letter or digit, got {value!r}")
        return None
    if key == "cluster":
        if not _is_int(value):
            return f"must be an integer, got {_type_name(value)} {_show(value)}"
        if value % 2 == 0:
            return f"must be odd (the window is centred on a pixel), got {value}"
        if not CLUSTER_MIN <= value <= CLUSTER_MAX:
            return f"must be between {CLUSTER_MIN} and {CLUSTER_MAX}, got {value}"
        return None
    if key in ("cap", "streams", "batch", "frames"):
        return _positive_int_problem(value)
    if key == "pedestal_frames":
        return _positive_int_problem(value, PEDESTAL_FRAMES_MIN)
    if key == "nsigma":
        if not _is_number(value):
            return f"must be a number, got {_type_name(value)} {_show(value)}"
        if not math.isfinite(value) or value <= 0:
            return f"must be a finite number > 0, got {value}"
        return None
    if key == "detector":
        if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(_is_int(v) for v in value):
            return f"must be [rows, cols], two integers, got {_show(value)}"
        rows, cols = value
        if not (1 <= rows <= DETECTOR_SIDE_MAX and 1 <= cols <= DETECTOR_SIDE_MAX):
            return (f"rows and cols must be between 1 and {DETECTOR_SIDE_MAX} "
                    f"(clusters store x, y as uint16), got [{rows}, {cols}]")
        return None
    if key == "pedestal_dtype":
        return _choice_problem(value, DTYPES)
    if key == "pedestal":
        return _choice_problem(value, PEDESTAL_MODES)
    if key == "transfer":
        return _choice_problem(value, TRANSFERS)
    raise AssertionError(f"no check for key {key!r}")  # a bug: every key has a check


def _cross_problems(values: dict[str, Any]) -> list[tuple[str, str]]:
    """Problems between keys of one merged config whose keys are each valid."""
    out: list[tuple[str, str]] = []
    if values["batch"] > values["frames"]:
        out.append(("batch", f"batch {values['batch']} exceeds frames {values['frames']}: "
                             "that launch could never happen"))
    rows, cols = values["detector"]
    if values["cap"] > rows * cols:
        out.append(("cap", f"cap {values['cap']} exceeds the {rows}x{cols} = {rows * cols} pixels "
                           "per frame: the D2H slot would carry clusters that cannot exist"))
    return out


_KEY_HINTS = {
    "label": "Use a short name such as 3x3_s4; every label must be unique.",
    "cluster": f"Use an odd cluster size from {CLUSTER_MIN} to {CLUSTER_MAX}, e.g. cluster = 3.",
    "cap": "cap is the clusters kept per frame, e.g. cap = 3000 at 3x3, 1700 at 9x9.",
    "streams": "streams is the number of CUDA streams, e.g. streams = 4.",
    "batch": "batch is frames per launch and may not exceed frames, e.g. batch = 2000.",
    "frames": "frames is the data frames per probe, e.g. frames = 20000.",
    "detector": "Write detector = [rows, cols], e.g. detector = [400, 400].",
    "pedestal_frames": f"Use at least {PEDESTAL_FRAMES_MIN} dark frames, e.g. pedestal_frames = 1000.",
    "nsigma": "nsigma is the threshold in pedestal sigmas, e.g. nsigma = 5.0.",
    "pedestal_dtype": 'Write pedestal_dtype = "float32" or "float64".',
    "pedestal": 'Write pedestal = "frozen" or "tracking".',
    "transfer": 'Write transfer = "copy" or "zerocopy".',
    "artifact": 'Write artifact = "path/to/binary", relative to the config file.',
    "sources": 'Write sources = ["src/*.cu"], paths or globs relative to the config file.',
}


def _key_hint(key: str) -> str | None:
    return _KEY_HINTS.get(key)


# --------------------------------------------------------------------------- line locator


def _locate_lines(text: str) -> dict[tuple[str, int], dict[str, int]]:
    """Map (table, index) -> {key: line, "": header line} for simple TOML layouts.

    Tables: ("", 0) top level, ("defaults", 0), ("config", i) for the i-th [[config]],
    ("build", 0). Used only to put line numbers on messages; missing entries just mean
    "line unknown".
    """
    out: dict[tuple[str, int], dict[str, int]] = {("", 0): {}}
    current = ("", 0)
    config_count = -1
    header = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?\s*(#.*)?$")
    keyline = re.compile(r"^\s*([A-Za-z0-9_\-]+|\"[^\"]*\"|'[^']*')\s*=")
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = header.match(line)
        if m:
            name = m.group(2).strip().strip("\"'")
            if m.group(1) == "[[" and name == "config":
                config_count += 1
                current = ("config", config_count)
            else:
                current = (name, 0)
            out.setdefault(current, {}).setdefault("", lineno)
            continue
        k = keyline.match(line)
        if k:
            out.setdefault(current, {}).setdefault(k.group(1).strip("\"'"), lineno)
    return out


# --------------------------------------------------------------------------- loading


class _Problems:
    """Collects messages; raises one ConfigError listing them all."""

    def __init__(self, path: Path, lines: dict[tuple[str, int], dict[str, int]]) -> None:
        self.path = path
        self.lines = lines
        self.items: list[tuple[str, str | None]] = []

    def add(self, where: str, table: tuple[str, int], key: str | None, problem: str,
            hint: str | None = None) -> None:
        table_lines = self.lines.get(table, {})
        line = table_lines.get(key or "", None) if key else None
        if line is None:
            line = table_lines.get("")
        loc = f"{self.path}:{line}" if line else f"{self.path}"
        keypart = f": key {key!r}" if key else ""
        self.items.append((f"{loc}: {where}{keypart}: {problem}", hint if hint else _key_hint(key or "")))

    def raise_if_any(self) -> None:
        if not self.items:
            return
        first_msg, first_hint = self.items[0]
        msg = first_msg
        if len(self.items) > 1:
            msg += f"\n  ({len(self.items) - 1} more problem{'s' if len(self.items) > 2 else ''}:)"
            msg += "".join(f"\n  {m}" for m, _ in self.items[1:])
        raise ConfigError(msg, hint=first_hint or "See docs/guards.md, section configs.toml.")


def _unknown_key_problem(key: str, known: Iterable[str]) -> str:
    known = tuple(known)
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown key {key!r}{guess}; known keys: {', '.join(known)}"


def load_configs(path: Path | str) -> ConfigFile:
    """Read and validate a configs.toml. Raises ConfigError (exit 2) listing every problem."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file not found: {path}",
                          hint=f"Pass --config PATH, or run from the checkout that has {DEFAULT_CONFIG_FILE}.")
    if not path.is_file():
        raise ConfigError(f"config path is not a file: {path}", hint="Pass --config with a .toml file.")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})",
                          hint="Save the config file as UTF-8.") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}",
                          hint="Check the file's permissions.") from None
    return parse_configs(text, path)


def parse_configs(text: str, path: Path | str = Path(DEFAULT_CONFIG_FILE)) -> ConfigFile:
    """Validate configs.toml text; ``path`` names it in messages and anchors [build] paths."""
    path = Path(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        if m:
            line = int(m.group(1))
            src = text.splitlines()[line - 1] if 0 < line <= len(text.splitlines()) else ""
            shown = f": {src.strip()!r}" if src.strip() else ""
            raise ConfigError(f"{path}:{line}: TOML syntax error: {msg}{shown}",
                              hint="Fix the TOML syntax on that line (strings need quotes, arrays [a, b]).") from None
        raise ConfigError(f"{path}: TOML syntax error: {msg}", hint="Fix the TOML syntax.") from None

    problems = _Problems(path, _locate_lines(text))
    top = ("", 0)
    for key in doc:
        if key not in TOP_KEYS:
            where_table = (key, 0) if (key, 0) in problems.lines else top  # [table] or key = ...
            problems.add("top level", where_table, key, _unknown_key_problem(key, TOP_KEYS),
                         hint="The file holds [defaults], [[config]] tables and an optional [build].")

    defaults: dict[str, Any] = dict(BUILTIN_DEFAULTS)
    raw_defaults = doc.get("defaults", {})
    dtable = ("defaults", 0)
    if not isinstance(raw_defaults, dict):
        problems.add("[defaults]", dtable, None, "must be a table: write [defaults], not [[defaults]]")
        raw_defaults = {}
    for key, value in raw_defaults.items():
        if key not in DEFAULTS_KEYS:
            problems.add("[defaults]", dtable, key, _unknown_key_problem(key, DEFAULTS_KEYS),
                         hint="label belongs in each [[config]]." if key == "label" else None)
            continue
        problem = _value_problem(key, value)
        if problem:
            problems.add("[defaults]", dtable, key, problem)
        else:
            defaults[key] = value

    raw_configs = doc.get("config", [])
    if not isinstance(raw_configs, list):
        problems.add("top level", ("config", 0), None, "config must be an array of tables: write [[config]], not [config]")
        raw_configs = []
    elif not raw_configs:
        problems.add("top level", top, None, "no [[config]] tables: nothing to probe",
                     hint="Add a [[config]] table with label, cluster, cap, streams, batch and frames.")

    configs: list[ProbeConfig] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_configs):
        table = ("config", i)
        if not isinstance(raw, dict):
            problems.add("top level", ("config", 0), None,
                         f"config must be an array of tables ([[config]]), got an array holding {_show(raw)}")
            continue
        label = raw.get("label")
        where = (f"config {label!r}" if isinstance(label, str) and label
                 else f"[[config]] #{i + 1} (no label)")
        merged = dict(defaults)
        bad = False
        for key, value in raw.items():
            if key not in CONFIG_KEYS:
                problems.add(where, table, key, _unknown_key_problem(key, CONFIG_KEYS))
                bad = True
                continue
            problem = _value_problem(key, value)
            if problem:
                problems.add(where, table, key, problem)
                bad = True
            merged[key] = value
        for key in REQUIRED_KEYS:
            if key not in merged:
                problems.add(where, table, None, f"missing key {key!r} (set it here or in [defaults])",
                             hint=_key_hint(key))
                bad = True
        if isinstance(label, str) and label:
            if label in seen:
                problems.add(where, table, "label",
                             f"duplicate label {label!r}: [[config]] #{seen[label] + 1} has it too",
                             hint="Give every [[config]] its own label (it names its row and trace).")
                bad = True
            else:
                seen[label] = i
        if bad:
            continue
        for key, problem in _cross_problems(merged):
            from_defaults = key not in raw
            problems.add(where + (" (from [defaults])" if from_defaults else ""),
                         table if not from_defaults else dtable, key, problem)
            bad = True
        if bad:
            continue
        rows, cols = merged["detector"]
        configs.append(ProbeConfig(
            label=merged["label"], cluster=merged["cluster"], cap=merged["cap"],
            streams=merged["streams"], batch=merged["batch"], frames=merged["frames"],
            rows=rows, cols=cols, pedestal_frames=merged["pedestal_frames"],
            nsigma=float(merged["nsigma"]), pedestal_dtype=merged["pedestal_dtype"],
            pedestal=merged["pedestal"], transfer=merged["transfer"],
        ))

    build = _parse_build(doc.get("build"), path, problems)
    problems.raise_if_any()
    return ConfigFile(path=path, configs=tuple(configs), build=build)


def _parse_build(raw: Any, path: Path, problems: _Problems) -> BuildSpec | None:
    if raw is None:
        return None
    table = ("build", 0)
    if not isinstance(raw, dict):
        problems.add("[build]", table, None, "must be a table: write [build], not [[build]]")
        return None
    ok = True
    for key in raw:
        if key not in BUILD_KEYS:
            problems.add("[build]", table, key, _unknown_key_problem(key, BUILD_KEYS))
            ok = False
    artifact = raw.get("artifact")
    sources = raw.get("sources")
    if artifact is None:
        problems.add("[build]", table, None, "missing key 'artifact'", hint=_key_hint("artifact"))
        ok = False
    elif not isinstance(artifact, str) or not artifact:
        problems.add("[build]", table, "artifact", f"must be a non-empty string, got {_show(artifact)}")
        ok = False
    if sources is None:
        problems.add("[build]", table, None, "missing key 'sources'", hint=_key_hint("sources"))
        ok = False
    elif (not isinstance(sources, list) or not sources
          or not all(isinstance(s, str) and s for s in sources)):
        problems.add("[build]", table, "sources", f"must be a non-empty array of strings, got {_show(sources)}")
        ok = False
    if not ok:
        return None
    base = path.resolve().parent
    return BuildSpec(artifact=base / artifact, sources=tuple(base / s for s in sources))


# --------------------------------------------------------------------------- selection


def select(configs: Iterable[ProbeConfig] | ConfigFile, only: Iterable[str] | None = None) -> tuple[ProbeConfig, ...]:
    """The configs named by ``only`` (all when empty), in file order.

    Raises ConfigError for an unknown label (suggesting the closest) and for a selection
    that mixes float32 and float64, since one results dir holds one dtype.
    """
    pool = configs.configs if isinstance(configs, ConfigFile) else tuple(configs)
    wanted = list(only or ())
    labels = [c.label for c in pool]
    for name in wanted:
        if name not in labels:
            close = difflib.get_close_matches(name, labels, n=1, cutoff=0.5)
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"--only {name!r}: no config has that label{guess}",
                              hint=f"Known labels: {', '.join(labels)}.")
    chosen = tuple(c for c in pool if not wanted or c.label in wanted)
    dtypes = {c.pedestal_dtype for c in chosen}
    if len(dtypes) > 1:
        by = {d: next(c.label for c in chosen if c.pedestal_dtype == d) for d in sorted(dtypes)}
        shown = ", ".join(f"{lab!r} is {d}" for d, lab in by.items())
        raise ConfigError(f"the selected configs mix pedestal_dtype float32 and float64 ({shown}); "
                          "one results dir holds one dtype",
                          hint="Probe each dtype separately with --only LABEL ...")
    return chosen


def with_frames(cfg: ProbeConfig, frames: int) -> ProbeConfig:
    """``cfg`` with ``frames`` data frames (``--frames``); batch is clipped to frames."""
    if not _is_int(frames) or frames < 1:
        raise ConfigError(f"--frames must be a positive integer, got {frames!r}",
                          hint="Use e.g. --frames 2000 for a smoke run.")
    return dataclasses.replace(cfg, frames=frames, batch=min(cfg.batch, frames))


def config_warnings(cfg: ProbeConfig) -> tuple[str, ...]:
    """Legal but noteworthy settings, for the CLI to print on stderr."""
    out: list[str] = []
    launches = -(-cfg.frames // cfg.batch)
    if cfg.frames % cfg.batch:
        out.append(f"config {cfg.label!r}: frames {cfg.frames} is not a multiple of batch {cfg.batch}: "
                   f"the last of {launches} launches carries {cfg.frames % cfg.batch} frames")
    if launches < cfg.streams:
        idle = cfg.streams - launches
        out.append(f"config {cfg.label!r}: {cfg.frames} frames make {launches} launch"
                   f"{'es' if launches != 1 else ''} of batch {cfg.batch} for {cfg.streams} streams: "
                   f"{idle} stream{'s stay' if idle != 1 else ' stays'} idle")
    return tuple(out)
