"""configs.toml -> validated, frozen ProbeConfig records: a label, a workload, one parameter record.

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

    workload = "cupy"          # or "command", with command = ["prog", "{cluster}", "{result}", ...]
                               # (any key except label may sit in [defaults]; docs/workloads.md)

    [build]                    # optional: an external build the guards check for freshness
    artifact = "build/finder"
    sources = ["src/*.cu", "src/*.cuh"]

Validation is pure (no GPU, no NVML) and reports every problem it finds at once, each
naming the file, the line where known, the config label and the key. Parameter values are
checked by :func:`clusterbench.model.params.param_problems`, the one validator that the
workload processes use too; a command is checked by :func:`clusterbench.workloads.command_problems`
(shape, placeholders, the program exists). Decisions:

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
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from clusterbench.errors import ConfigError
from clusterbench.model.params import (
    PARAM_DEFAULTS,
    PARAM_KEYS,
    WorkloadParams,
    choice_problem,
    cross_problems,
    key_hint,
    show,
    value_problem,
)
from clusterbench.workloads.protocol import command_problems, command_shape_problem

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

DEFAULT_CONFIG_FILE = "configs.toml"

LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
DTYPE_TAG = {"float32": "f32", "float64": "f64"}
WORKLOAD_KINDS = ("cupy", "command")

# Built-in fallbacks for a file without [defaults]: the reference campaign's settings.
BUILTIN_DEFAULTS: dict[str, Any] = {
    "detector": [400, 400],
    "pedestal_frames": 1000,
    "nsigma": 5.0,
    "pedestal_dtype": "float32",
    "pedestal": "frozen",
    "transfer": "copy",
    "workload": "cupy",
}
WORKLOAD_KEYS = ("workload", "command")
CONFIG_KEYS = ("label",) + WORKLOAD_KEYS + PARAM_KEYS
REQUIRED_KEYS = ("label", "cluster", "cap", "streams", "batch", "frames")
DEFAULTS_KEYS = tuple(k for k in CONFIG_KEYS if k != "label")
BUILD_KEYS = ("artifact", "sources")
TOP_KEYS = ("defaults", "config", "build")


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """Which program runs a config: ``cupy`` (clusterbench's own finder) or ``command`` (any program
    that speaks the protocol of docs/workloads.md; ``command`` holds its argv with placeholders,
    ``base_dir`` the config file's folder, where it runs)."""

    kind: str = "cupy"
    command: tuple[str, ...] | None = None
    base_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.kind not in WORKLOAD_KINDS:
            raise ConfigError(f"key 'workload': {choice_problem(self.kind, WORKLOAD_KINDS)}",
                              hint=_key_hint("workload"))
        if (self.kind == "command") != (self.command is not None):
            raise ConfigError("key 'command': a command workload needs a command, and only it may have one",
                              hint=_key_hint("command"))


@dataclass(frozen=True, slots=True)
class ProbeConfig:
    """One probe: a label, the workload that runs it, and its parameters (validated when built)."""

    label: str
    params: WorkloadParams
    workload: WorkloadSpec = WorkloadSpec()

    def __post_init__(self) -> None:
        problem = _label_problem(self.label)
        if problem:
            raise ConfigError(f"config {self.label!r}: key 'label': {problem}", hint=_key_hint("label"))

    @property
    def dtype_tag(self) -> str:
        """``f32`` or ``f64``: names the results dir."""
        return DTYPE_TAG[self.params.pedestal_dtype]

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "workload": self.workload.kind,
                "command": None if self.workload.command is None else list(self.workload.command),
                "params": self.params.to_json()}


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


def _label_problem(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, got {show(value)}"
    if not LABEL_RE.match(value):
        return (f"must be letters, digits, '.', '_' or '-' (it names trace files), "
                f"starting with a letter or digit, got {value!r}")
    return None


def _value_problem(key: str, value: Any) -> str | None:
    """What is wrong with one key's value on its own, or None."""
    if key == "label":
        return _label_problem(value)
    if key == "workload":
        return choice_problem(value, WORKLOAD_KINDS)
    if key == "command":
        return command_shape_problem(value)
    return value_problem(key, value)


_KEY_HINTS = {
    "label": "Use a short name such as 3x3_s4; every label must be unique.",
    "workload": 'Write workload = "cupy" (clusterbench\'s finder) or "command" (see docs/workloads.md).',
    "command": 'Write command = ["prog", "--cluster", "{cluster}", "--result", "{result}"] (docs/workloads.md).',
    "artifact": 'Write artifact = "path/to/binary", relative to the config file.',
    "sources": 'Write sources = ["src/*.cu"], paths or globs relative to the config file.',
}


def _key_hint(key: str) -> str | None:
    return _KEY_HINTS.get(key) or key_hint(key)


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
                         f"config must be an array of tables ([[config]]), got an array holding {show(raw)}")
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
        param_values = {k: merged[k] for k in PARAM_KEYS if k in merged}
        for key, problem in cross_problems({**PARAM_DEFAULTS, **param_values}):
            from_defaults = key not in raw
            problems.add(where + (" (from [defaults])" if from_defaults else ""),
                         table if not from_defaults else dtable, key, problem)
            bad = True
        base = path.resolve().parent
        kind, command = merged["workload"], merged.get("command")
        wtable = table if ("workload" in raw or "command" in raw) else dtable
        if kind == "command" and command is None:
            problems.add(where, wtable, "command", 'workload = "command" needs a command, '
                         'e.g. command = ["prog", "{cluster}", "--result", "{result}"]')
            bad = True
        elif kind == "cupy" and command is not None:
            problems.add(where, wtable, "command", 'a command is only for workload = "command"; '
                         'workload is "cupy" (clusterbench\'s own finder)',
                         hint='Add workload = "command", or drop the command.')
            bad = True
        elif kind == "command":
            for problem in command_problems(command, base):
                problems.add(where, table if "command" in raw else dtable, "command", problem)
                bad = True
        if bad:
            continue
        if param_values.get("data") is not None:
            param_values["data"] = str((base / param_values["data"]).resolve())
        params = WorkloadParams.from_json(param_values)
        spec = (WorkloadSpec("command", tuple(command), base) if kind == "command" else WorkloadSpec())
        configs.append(ProbeConfig(label=merged["label"], params=params, workload=spec))

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
        problems.add("[build]", table, "artifact", f"must be a non-empty string, got {show(artifact)}")
        ok = False
    if sources is None:
        problems.add("[build]", table, None, "missing key 'sources'", hint=_key_hint("sources"))
        ok = False
    elif (not isinstance(sources, list) or not sources
          or not all(isinstance(s, str) and s for s in sources)):
        problems.add("[build]", table, "sources", f"must be a non-empty array of strings, got {show(sources)}")
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
    dtypes = {c.params.pedestal_dtype for c in chosen}
    if len(dtypes) > 1:
        by = {d: next(c.label for c in chosen if c.params.pedestal_dtype == d) for d in sorted(dtypes)}
        shown = ", ".join(f"{lab!r} is {d}" for d, lab in by.items())
        raise ConfigError(f"the selected configs mix pedestal_dtype float32 and float64 ({shown}); "
                          "one results dir holds one dtype",
                          hint="Probe each dtype separately with --only LABEL ...")
    return chosen


def with_frames(cfg: ProbeConfig, frames: int) -> ProbeConfig:
    """``cfg`` with ``frames`` data frames (``--frames``); batch is clipped to frames."""
    if type(frames) is not int or frames < 1:
        raise ConfigError(f"--frames must be a positive integer, got {frames!r}",
                          hint="Use e.g. --frames 2000 for a smoke run.")
    return dataclasses.replace(cfg, params=cfg.params.replace(frames=frames, batch=min(cfg.params.batch, frames)))


def with_data(cfg: ProbeConfig, data: Path) -> ProbeConfig:
    """``cfg`` reading its frames from one .npy (``--data``) instead of the synthetic generator."""
    p = Path(data)
    if not p.is_file():
        raise ConfigError(f"--data {data}: no such file", hint="Pass a .npy of uint16 (frames, rows, cols).")
    return dataclasses.replace(cfg, params=cfg.params.replace(data=str(p.resolve())))


def config_warnings(cfg: ProbeConfig) -> tuple[str, ...]:
    """Legal but noteworthy settings, for the CLI to print on stderr."""
    out: list[str] = []
    p = cfg.params
    launches = -(-p.frames // p.batch)
    if p.frames % p.batch:
        out.append(f"config {cfg.label!r}: frames {p.frames} is not a multiple of batch {p.batch}: "
                   f"the last of {launches} launches carries {p.frames % p.batch} frames")
    if launches < p.streams:
        idle = p.streams - launches
        out.append(f"config {cfg.label!r}: {p.frames} frames make {launches} launch"
                   f"{'es' if launches != 1 else ''} of batch {p.batch} for {p.streams} streams: "
                   f"{idle} stream{'s stay' if idle != 1 else ' stays'} idle")
    return tuple(out)
