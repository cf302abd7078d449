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

    [[config]]                 # a program probed as it is: no NVTX ranges, no result record
    label = "smc"
    workload = "exec"
    command = ["./smc", "--streams", "{streams}"]
    streams = 4                # our finder's keys are optional here: placeholders only
    frames = "kernel:calib"    # a count, or how the analysis counts frames (docs/analyze.md)
    window = "auto"            # the analysis window; capture = "nvtx:NAME[@DOMAIN]" or "cudaProfilerApi"
    rate = 'rate: ([0-9.]+) frames/s'   # the program's own rate; sustained = "rate" | "wall" | "trace"

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from clusterbench.errors import ConfigError
from clusterbench.model import units as U
from clusterbench.model.params import (
    FIELD_NAMES,
    INT64_MAX,
    PARAM_DEFAULTS,
    PARAM_KEYS,
    WorkloadParams,
    choice_problem,
    cross_problems,
    key_hint,
    show,
    value_problem,
)
from clusterbench.workloads.protocol import (
    command_problems,
    command_shape_problem,
    template_fields,
)

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

DEFAULT_CONFIG_FILE = "configs.toml"

LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
DTYPE_TAG = {"float32": "f32", "float64": "f64"}
WORKLOAD_KINDS = ("cupy", "command", "exec")
EXEC = "exec"

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
# How a program probed as it is (workload = "exec") is measured (docs/probe.md, "A program as it is")
EXEC_KEYS = ("window", "capture", "rate", "rate_unit", "kernel_time", "kernel_time_unit", "sustained", "wall_start",
             "wall_end")
CONFIG_KEYS = ("label",) + WORKLOAD_KEYS + PARAM_KEYS + EXEC_KEYS
REQUIRED_KEYS = ("label", "cluster", "cap", "streams", "batch", "frames")
SUSTAINED_SOURCES = ("rate", "wall", "trace")
CAPTURE_PROFILER_API = "cudaProfilerApi"
CAPTURE_HINT = "use --capture nvtx:NAME[@DOMAIN] (e.g. nvtx:'event loop@zoo_daq') or --capture cudaProfilerApi"
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
        if (self.kind in ("command", EXEC)) != (self.command is not None):
            raise ConfigError("key 'command': a command or exec workload needs a command, and only they may have one",
                              hint=_key_hint("command"))


@dataclass(frozen=True, slots=True)
class ExecOptions:
    """How a program probed as it is is measured, as the user says it (configs.toml keys, or probe's
    options; None: not said): the frames definition (``frames_spec``, as analyze takes it), the analysis
    ``window``, an nsys ``capture`` range, its own ``rate`` line and unit, a ``kernel_time`` line and unit,
    the ``sustained`` source, and the ``wall_start``/``wall_end`` markers."""

    frames_spec: str | None = None
    window: str | None = None
    capture: str | None = None
    rate: str | None = None
    rate_unit: str | None = None
    kernel_time: str | None = None
    kernel_time_unit: str | None = None
    sustained: str | None = None
    wall_start: str | None = None
    wall_end: str | None = None

    def given(self) -> dict[str, str]:
        """The options said, by field name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(ExecOptions)
                if getattr(self, f.name) is not None}

    def to_json(self) -> dict[str, str | None]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(ExecOptions)}

    @classmethod
    def from_json(cls, doc: object) -> "ExecOptions":
        """ValueError naming the first bad key (the reader of a request file turns it into an input error)."""
        names = [f.name for f in dataclasses.fields(ExecOptions)]
        if not isinstance(doc, Mapping) or set(doc) != set(names):
            raise ValueError(f"must be an object with the keys {', '.join(names)}")
        bad = next((k for k in names if doc[k] is not None and not isinstance(doc[k], str)), None)
        if bad is not None:
            raise ValueError(f"key {bad!r} must be a string or null, got {doc[bad]!r}")
        return cls(**{k: doc[k] for k in names})


@dataclass(frozen=True, slots=True)
class ExecSpec(ExecOptions):
    """How a program probed as it is (``workload = "exec"``) is measured (its :class:`ExecOptions`), with
    the placeholder values its config gives (our finder's keys, optional: ``values``, as WorkloadParams
    fields) and its frame count ``frames`` (also ``{frames}``; a ``frames_spec``, where given, is what the
    analysis counts by). Checked when built."""

    values: Mapping[str, Any] = field(default_factory=dict)
    frames: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", dict(self.values))
        problems = exec_problems(self)
        if problems:
            key, problem = problems[0]
            raise ConfigError(f"key {key!r}: {problem}", hint=_key_hint(key))

    @property
    def source(self) -> str:
        """Where the sustained figure comes from: ``sustained`` when set, else ``rate`` with a rate line, else
        ``trace``."""
        return self.sustained or ("rate" if self.rate else "trace")

    @property
    def analysis_frames(self) -> str | None:
        """The frames as analyze takes them (``--frames``): the definition, else the count, else None."""
        return self.frames_spec if self.frames_spec is not None else (
            None if self.frames is None else str(self.frames))

    def placeholder_values(self) -> dict[str, Any]:
        """Every placeholder this config gives a value (``{frames}`` only for a count)."""
        out = dict(self.values)
        if self.frames is not None:
            out["frames"] = self.frames
        return out

    def to_json(self) -> dict[str, Any]:
        return {**ExecOptions.to_json(self), "values": dict(self.values), "frames": self.frames}


def parse_capture(text: str | None) -> tuple[str, str | None] | None:
    """``nvtx:NAME[@DOMAIN]`` -> ("nvtx", "NAME[@DOMAIN]"); ``cudaProfilerApi`` -> ("cudaProfilerApi", None);
    None -> None. ValueError (the problem) for anything else."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"must be a string, got {show(text)}")
    t = text.strip()
    if t.lower() == CAPTURE_PROFILER_API.lower():
        return CAPTURE_PROFILER_API, None
    kind, sep, rest = t.partition(":")
    if sep and kind == "nvtx":
        name = rest.rpartition("@")[0] if "@" in rest else rest
        if not name.strip():
            raise ValueError(f"{text!r}: nvtx:NAME[@DOMAIN] needs a range name")
        return "nvtx", rest
    raise ValueError(f"{text!r} is not a capture range")


def exec_problems(spec: ExecSpec) -> list[tuple[str, str]]:
    """Every (key, problem) of an exec config's measuring keys (pure; the window and frames are parsed as
    analyze parses them)."""
    from clusterbench.analyzers.frames import parse as parse_frames
    from clusterbench.analyzers.window import parse as parse_window
    from clusterbench.errors import InputError
    from clusterbench.run.rates import TIME_UNITS, check_unit, compile_pattern

    out: list[tuple[str, str]] = []
    for key, value in spec.values.items():
        if key not in FIELD_NAMES:
            out.append((key, f"is not a placeholder value (one of {', '.join(FIELD_NAMES)})"))
            continue
        problem = value_problem(key, value) if key not in ("rows", "cols") else value_problem(
            "detector", [value, value])
        if problem:
            out.append((key, problem))
    if spec.frames is not None and (type(spec.frames) is not int or not 1 <= spec.frames <= INT64_MAX):
        out.append(("frames", f"must be a positive number of frames (at most {INT64_MAX:,}, a 64-bit integer) or "
                              f"a definition, got {show(spec.frames)}"))
    for key, parse in (("frames", lambda t: parse_frames(t)), ("window", lambda t: parse_window(t))):
        text = spec.frames_spec if key == "frames" else spec.window
        if text is None:
            continue
        try:
            parse(text)
        except InputError as exc:
            out.append((key, str(exc)))
    try:
        parse_capture(spec.capture)
    except ValueError as exc:
        out.append(("capture", str(exc)))
    for key, option in (("rate", "--rate"), ("kernel_time", "--kernel-time"), ("wall_start", "--wall-start"),
                        ("wall_end", "--wall-end")):
        value = getattr(spec, key)
        if value is not None:
            try:
                compile_pattern(value, option)
            except InputError as exc:
                out.append((key, str(exc)))
    for key, allowed in (("rate_unit", None), ("kernel_time_unit", TIME_UNITS)):
        try:
            check_unit(getattr(spec, key), f"--{key.replace('_', '-')}", *(() if allowed is None else (allowed,)))
        except InputError as exc:
            out.append((key, str(exc)))
    if spec.rate_unit is not None and spec.rate is None:
        out.append(("rate_unit", "goes with rate = REGEX (the line it reads the unit of)"))
    if spec.kernel_time_unit is not None and spec.kernel_time is None:
        out.append(("kernel_time_unit", "goes with kernel_time = REGEX"))
    if spec.sustained is not None and spec.sustained not in SUSTAINED_SOURCES:
        out.append(("sustained", choice_problem(spec.sustained, SUSTAINED_SOURCES) or ""))
    source = spec.source
    if source == "rate" and spec.rate is None:
        out.append(("sustained", "sustained = \"rate\" reads the program's own rate: give rate = REGEX (--rate)"))
    if source == "wall" and spec.frames is None:
        out.append(("sustained", "sustained = \"wall\" divides frames by the program's wall time: give a frame "
                                 "count, frames = N (--frames N)"))
    if (spec.wall_start is None) != (spec.wall_end is None):
        out.append(("wall_start", "give both markers, wall_start and wall_end, or neither (the whole run)"))
    elif spec.wall_start is not None and source != "wall":
        out.append(("wall_start", "the markers time the program for sustained = \"wall\" only"))
    return out


@dataclass(frozen=True, slots=True)
class ProbeConfig:
    """One probe: a label, the workload that runs it, and its parameters (validated when built). A
    program probed as it is (``workload = "exec"``) has no WorkloadParams (``params`` None) but an
    :class:`ExecSpec`."""

    label: str
    params: WorkloadParams | None
    workload: WorkloadSpec = WorkloadSpec()
    exec: ExecSpec | None = None
    # a point of a --scan: the config it expands, and the placeholder values of the point (as given)
    scanned_from: str | None = None
    point: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        problem = _label_problem(self.label)
        if problem:
            raise ConfigError(f"config {self.label!r}: key 'label': {problem}", hint=_key_hint("label"))
        if (self.workload.kind == EXEC) != (self.exec is not None) or (self.params is None) != (self.exec is not None):
            raise ConfigError(f"config {self.label!r}: an exec workload has an exec spec and no parameters, "
                              "any other workload parameters and no exec spec", hint=_key_hint("workload"))

    @property
    def is_exec(self) -> bool:
        return self.exec is not None

    @property
    def dtype_tag(self) -> str:
        """``f32`` or ``f64`` (``exec`` for a program probed as it is): names the results dir."""
        return EXEC if self.params is None else DTYPE_TAG[self.params.pedestal_dtype]

    @property
    def frames(self) -> int | None:
        """The frames per pass (our finder's, a protocol program's), or an exec config's frame count."""
        return self.params.frames if self.params is not None else (self.exec.frames if self.exec else None)

    def placeholders(self) -> dict[str, Any]:
        """The values its command's placeholders take from the config (parameters, or an exec config's values)."""
        if self.exec is not None:
            return self.exec.placeholder_values()
        assert self.params is not None
        return self.params.to_json()

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "workload": self.workload.kind,
                "command": None if self.workload.command is None else list(self.workload.command),
                "params": None if self.params is None else self.params.to_json(),
                "exec": None if self.exec is None else self.exec.to_json(),
                "scanned_from": self.scanned_from, "point": [list(p) for p in self.point]}


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
    if key in EXEC_KEYS:
        return None if isinstance(value, str) and value else f"must be a non-empty string, got {show(value)}"
    if key == "frames" and isinstance(value, str):
        return None  # an exec config's frames definition: checked with the config (exec_problems)
    return value_problem(key, value)


_KEY_HINTS = {
    "label": "Use a short name such as 3x3_s4; every label must be unique.",
    "workload": 'Write workload = "cupy" (clusterbench\'s finder), "command" (a program that speaks the protocol '
                'of docs/workloads.md) or "exec" (any program, as it is: docs/probe.md).',
    "window": 'Write window = "auto", "span", "range:NAME[@DOMAIN][#N]" or "ms:A-B" (docs/analyze.md).',
    "frames": 'Write frames = N, or for an exec config a definition: "kernel:REGEX", "range:NAME[@DOMAIN]", '
              '"graph" or "h2d-bytes:N" (docs/analyze.md).',
    "capture": 'Write capture = "nvtx:NAME[@DOMAIN]" or "cudaProfilerApi" (an nsys capture range).',
    "rate": "Write rate = 'rate: ([0-9.]+) frames/s': a regex whose first group is the program's own figure.",
    "rate_unit": 'Write rate_unit = "fps", "kHz", "k frames/s", "MB/s", "GB/s", "GiB/s", "ms/frame", "us/frame" or '
                 'another unit docs/probe.md lists.',
    "kernel_time": "Write kernel_time = 'kernel: ([0-9.]+) us/frame': the program's per-frame kernel time.",
    "kernel_time_unit": 'Write kernel_time_unit = "ms/frame" or "us/frame".',
    "sustained": 'Write sustained = "rate" (the program\'s own rate), "wall" (frames over its wall time) or '
                 '"trace" (frames over the traced window).',
    "wall_start": "Write wall_start = 'REGEX' and wall_end = 'REGEX': the lines that start and end the timed part.",
    "wall_end": "Write wall_start = 'REGEX' and wall_end = 'REGEX': the lines that start and end the timed part.",
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
    except RecursionError:  # arrays or tables nested thousands deep: the parser's stack runs out
        raise ConfigError(f"{path}: arrays or tables nested too deep to read (TOML)",
                          hint="A configs file holds [defaults], [[config]] tables and [build], a level or two "
                               "deep.") from None

    problems = _Problems(path, _locate_lines(text))
    top = ("", 0)
    for key in doc:
        if key not in TOP_KEYS:
            where_table = (key, 0) if (key, 0) in problems.lines else top  # [table] or key = ...
            problems.add("top level", where_table, key, _unknown_key_problem(key, TOP_KEYS),
                         hint="The file holds [defaults], [[config]] tables and an optional [build].")

    defaults: dict[str, Any] = dict(BUILTIN_DEFAULTS)
    file_defaults: dict[str, Any] = {}  # what the file's [defaults] gives (an exec config's placeholder values)
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
            file_defaults[key] = value

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
        is_exec = merged.get("workload") == EXEC
        for key in (("label",) if is_exec else REQUIRED_KEYS):
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
        base = path.resolve().parent
        if is_exec:
            cfg = _exec_config({**file_defaults, **raw}, base, where, table, dtable, raw, problems)
            if cfg is not None:
                configs.append(cfg)
            continue
        stray = [k for k in EXEC_KEYS if k in merged] + (["frames"] if isinstance(merged.get("frames"), str) else [])
        if stray:
            key = stray[0]
            problems.add(where, table if key in raw else dtable, key,
                         f'{key} = {show(merged[key])} is for a program probed as it is (workload = "exec"); '
                         f'this config\'s workload is {merged["workload"]!r}, whose pass range gives its window '
                         "and frames",
                         hint='Add workload = "exec" (a program without the protocol), or drop the key.')
            continue
        param_values = {k: merged[k] for k in PARAM_KEYS if k in merged}
        for key, problem in cross_problems({**PARAM_DEFAULTS, **param_values}):
            from_defaults = key not in raw
            problems.add(where + (" (from [defaults])" if from_defaults else ""),
                         table if not from_defaults else dtable, key, problem)
            bad = True
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
            data_path = Path(param_values["data"])
            problem = "no such file" if not data_path.is_file() else npy_problem(data_path)
            if problem:
                problems.add(where, table if "data" in raw else dtable, "data", f"{data_path}: {problem}",
                             hint="Give a .npy of uint16 (frames, rows, cols), dark frames first, relative to the "
                                  "config file.")
                continue
        params = WorkloadParams.from_json(param_values)
        spec = (WorkloadSpec("command", tuple(command), base) if kind == "command" else WorkloadSpec())
        configs.append(ProbeConfig(label=merged["label"], params=params, workload=spec))

    build = _parse_build(doc.get("build"), path, problems)
    problems.raise_if_any()
    return ConfigFile(path=path, configs=tuple(configs), build=build)


def _exec_config(given: Mapping[str, Any], base: Path, where: str, table: tuple[str, int],
                 dtable: tuple[str, int], raw: Mapping[str, Any], problems: _Problems) -> ProbeConfig | None:
    """An exec config from its keys (the file's [defaults] and its own table), or None after adding its
    problems. Our finder's keys are only placeholder values here."""
    command = given.get("command")
    at = table if "command" in raw else dtable
    if command is None:
        problems.add(where, at, "command", 'workload = "exec" needs a command, e.g. command = ["./finder", '
                     '"--streams", "{streams}"]')
        return None
    bad = False
    for problem in command_problems(command, base, kind=EXEC):
        problems.add(where, at, "command", problem)
        bad = True
    values: dict[str, Any] = {}
    for key, value in given.items():
        if key not in PARAM_KEYS or key == "frames":
            continue
        if key == "detector":
            values["rows"], values["cols"] = value
        elif key == "data":
            values[key] = str((base / value).resolve())
        else:
            values[key] = value
    frames = given.get("frames")
    try:
        spec = ExecSpec(values=values, frames=frames if not isinstance(frames, str) else None,
                        frames_spec=frames if isinstance(frames, str) else None,
                        **{k: given.get(k) for k in EXEC_KEYS})
    except ConfigError as exc:
        text = str(exc)
        key = text.split("'")[1] if text.startswith("key '") else None
        problems.add(where, table if key is None or key in raw else dtable, key, text.split(": ", 1)[-1],
                     hint=exc.hint)
        return None
    if bad:
        return None
    return ProbeConfig(label=given["label"], params=None, workload=WorkloadSpec(EXEC, tuple(command), base), exec=spec)


def exec_placeholder_problems(cfg: ProbeConfig) -> list[str]:
    """The placeholders an exec config's command uses that the config gives no value (pure); a scan or
    --frames N may give them, so this is asked once the plan has applied them."""
    if cfg.exec is None or cfg.workload.command is None:
        return []
    have = set(cfg.exec.placeholder_values()) | {"label", "python"}
    out = []
    for arg in cfg.workload.command:
        for name in template_fields(arg):
            if name not in have:
                how = ("give a frame count (frames = N, --frames N)" if name == "frames"
                       else f"set {name} = ... in its config or [defaults], or scan it (--scan {name}=A,B)")
                out.append(f"its command uses {{{name}}}, which the config gives no value: {how}")
    return out


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
    tags = {c.dtype_tag for c in chosen}
    if len(tags) > 1:
        by = {t: next(c.label for c in chosen if c.dtype_tag == t) for t in sorted(tags)}
        what = {"f32": "float32", "f64": "float64", EXEC: "programs probed as they are (exec)"}
        shown = ", ".join(f"{lab!r} is {what[t]}" for t, lab in by.items())
        mixed = " and ".join(what[t] for t in sorted(tags))
        raise ConfigError(f"the selected configs mix {'pedestal_dtype ' if EXEC not in tags else ''}{mixed} ({shown}); "
                          "one results dir holds one kind (it is named by it: _f32, _f64, _exec)",
                          hint="Probe each kind separately with --only LABEL ...")
    return chosen


def with_frames(cfg: ProbeConfig, frames: int) -> ProbeConfig:
    """``cfg`` with ``frames`` data frames (``--frames``); batch is clipped to frames. An exec config
    takes it as its frame count (``{frames}``, and the frames of the analysis window)."""
    if type(frames) is not int or frames < 1:
        raise ConfigError(f"--frames must be a positive integer, got {frames!r}",
                          hint="Use e.g. --frames 2000 for a smoke run.")
    if cfg.exec is not None:
        return dataclasses.replace(cfg, exec=dataclasses.replace(cfg.exec, frames=frames, frames_spec=None))
    assert cfg.params is not None
    return dataclasses.replace(cfg, params=cfg.params.replace(frames=frames, batch=min(cfg.params.batch, frames)))


def with_exec(cfg: ProbeConfig, options: ExecOptions) -> ProbeConfig:
    """An exec config with the measuring options of the command line (``--window``, ``--frames kernel:...``,
    ``--rate`` ...) over its own; ConfigError (exit 2) for another workload, whose pass range gives them."""
    given: dict[str, Any] = dict(options.given())
    if not given:
        return cfg
    if cfg.exec is None:
        flags = ", ".join("--" + ("frames" if k == "frames_spec" else k.replace("_", "-")) for k in given)
        raise ConfigError(f"config {cfg.label!r}: {flags} {'is' if len(given) == 1 else 'are'} for a program probed "
                          f"as it is (workload = \"exec\"); this config's workload is {cfg.workload.kind!r}, "
                          "whose pass range gives its window and frames",
                          hint="drop the option, or probe the program as it is: workload = \"exec\" in its config, "
                               "or clusterbench probe [options] -- PROGRAM ARGS...")
    if "frames_spec" in given:
        given["frames"] = None
    try:
        return dataclasses.replace(cfg, exec=dataclasses.replace(cfg.exec, **given))
    except ConfigError as exc:
        key = str(exc).split("'")[1] if str(exc).startswith("key '") else ""
        raise ConfigError(f"config {cfg.label!r}: --{key.replace('_', '-')}: {str(exc).split(': ', 1)[-1]}",
                          hint=exc.hint) from None


def with_data(cfg: ProbeConfig, data: Path) -> ProbeConfig:
    """``cfg`` reading its frames from one .npy (``--data``) instead of the synthetic generator. InputError
    (exit 2) for a file that is not a uint16 (frames, rows, cols) .npy: checked from its header, before any
    GPU call. An exec config takes it as ``{data}``, which its command must use."""
    p = Path(data)
    if not p.is_file():
        raise ConfigError(f"--data {data}: no such file", hint="Pass a .npy of uint16 (frames, rows, cols).")
    problem = npy_problem(p)
    if problem:
        raise ConfigError(f"--data {data}: {problem}",
                          hint="Pass a .npy of uint16 (frames, rows, cols), dark frames first: "
                               "numpy.save(path, frames.astype(numpy.uint16)).")
    if cfg.exec is not None:
        uses = any("data" in template_fields(a) for a in cfg.workload.command or ())
        if not uses:
            raise ConfigError(f"config {cfg.label!r}: --data goes to a program probed as it is only through {{data}} "
                              "in its command, and this command has none",
                              hint="add {data} to the command where the program takes its input, or drop --data")
        values = {**cfg.exec.values, "data": str(p.resolve())}
        return dataclasses.replace(cfg, exec=dataclasses.replace(cfg.exec, values=values))
    assert cfg.params is not None
    return dataclasses.replace(cfg, params=cfg.params.replace(data=str(p.resolve())))


def npy_problem(path: Path) -> str | None:
    """What makes ``path`` not a uint16 (frames, rows, cols) .npy, from its header alone; None when it is one."""
    import numpy as np

    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _fortran, dtype = read(fh)
    except (ValueError, OSError, EOFError) as exc:
        return f"not a .npy file ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    if dtype != np.dtype(np.uint16) or len(shape) != 3:
        return f"holds {dtype} with shape {tuple(shape)}, not uint16 (frames, rows, cols)"
    return None


# Fewer launches per busy stream than this, and the pipeline's fill and drain (the first copy in and the
# last result out, which nothing overlaps) weigh on every per-frame figure: the reference campaign's
# 2000-frame passes, one launch of batch 2000, read the kernel about 7 % slow (docs/facts.md).
MIN_LAUNCHES_PER_STREAM = 2


def config_warnings(cfg: ProbeConfig) -> tuple[str, ...]:
    """Legal but noteworthy settings, for the CLI to print on stderr."""
    out: list[str] = []
    p = cfg.params
    if p is None:  # an exec program's frames and launches are its own
        return ()
    launches = -(-p.frames // p.batch)
    if p.frames % p.batch:
        out.append(f"config {cfg.label!r}: frames {p.frames} is not a multiple of batch {p.batch}: "
                   f"the last of {launches} launches carries {p.frames % p.batch} frames")
    if launches < p.streams:
        idle = p.streams - launches
        out.append(f"config {cfg.label!r}: {p.frames} frames make {launches} launch"
                   f"{'es' if launches != 1 else ''} of batch {p.batch} for {p.streams} streams: "
                   f"{idle} stream{'s stay' if idle != 1 else ' stays'} idle")
    busy = min(p.streams, launches)
    if launches < MIN_LAUNCHES_PER_STREAM * busy:
        out.append(f"config {cfg.label!r}: the pass is {launches} launch{'es' if launches != 1 else ''} of batch "
                   f"{p.batch} on {busy} stream{'s' if busy != 1 else ''} ({launches / busy:.3g} per stream): the "
                   "first copy in and the last result out overlap nothing, so per-frame figures read slow "
                   f"(about 7 % at one launch); give each stream at least {MIN_LAUNCHES_PER_STREAM} launches "
                   f"(frames >= {MIN_LAUNCHES_PER_STREAM * busy * p.batch:,}, or a smaller batch)")
    return tuple(out)


# --------------------------------------------------------------------------- what a config needs

# Every data frame crosses the host link once per pass. Its peak, per direction, on the fastest link of the
# GPUs clusterbench has measured: PCIe 5.0 x16, 64 GB/s (the H200's measured 53-55 GB/s stay under it). So a
# pass of F frames of B bytes takes at least F x B / 64 GB/s: an estimate that only errs short.
HOST_LINK_PEAK_GBPS = 64.0
# The most memory any NVIDIA GPU has (B300: 288 GB). Without a GPU to ask (--dry-run on a laptop), a config
# that needs more device memory than this cannot run on any GPU.
MAX_GPU_MEMORY_BYTES = 288 * 10**9
# The most memory one machine has (the largest servers hold 24 to 32 TB): without the machine that runs the
# probe to ask (--dry-run), a config whose frames need more host memory than this runs nowhere.
MAX_HOST_MEMORY_BYTES = 32 * 10**12
# Say so when a probe of the configs is estimated to take longer than this (it runs; the user may not expect it)
LONG_PROBE_S = 600.0


@dataclass(frozen=True, slots=True)
class MemoryNeed:
    """The memory one config's pipeline allocates (an estimate from the parameters, as the CuPy pipeline lays
    out its buffers): on the device, the frames in flight (batch x streams frames), the cluster slots out,
    the emit masks, the per-frame means of the persistent tracking kernels and the pedestal; on the host, the
    dark frames, the frame pool (generated, then copied into pinned memory) and the pinned output slots. CuPy's
    pool and the CUDA context come on top."""

    device_bytes: int
    host_bytes: int


def memory_need(p: WorkloadParams) -> MemoryNeed:
    """:class:`MemoryNeed` of clusterbench's own finder with parameters ``p`` (pure)."""
    npix, fb, slots = p.rows * p.cols, p.frame_bytes, p.streams * p.batch
    frames_in = slots * fb
    clusters_out = 0 if p.transfer == "zerocopy" else slots * p.slot_bytes
    masks = slots * 4 * p.rows * -(-p.cols // 32)  # one 32-bit word per 32 pixels of a row
    means = slots * npix * p.itemsize if p.pedestal == "tracking" and p.tracking_kernel != "graph" else 0
    pedestal = npix * (8 + 8 + 3 * p.itemsize)  # sum, sum2 (float64), two means and the threshold
    pool = min(p.pool, p.frames)
    return MemoryNeed(device_bytes=frames_in + clusters_out + masks + means + pedestal,
                      host_bytes=(p.pedestal_frames + 2 * pool) * fb + slots * p.slot_bytes)


def pass_seconds_at_least(p: WorkloadParams) -> float:
    """The least time one run of ``p`` can take: its dark frames and one pass of its frames over the host link
    at HOST_LINK_PEAK_GBPS."""
    return (p.pedestal_frames + p.frames) * p.frame_bytes / (HOST_LINK_PEAK_GBPS * 1e9)


def resource_problems(configs: Iterable[ProbeConfig], timeout_s: float, gpu_memory_bytes: int | None = None,
                      host_memory_bytes: int | None = None) -> list[str]:
    """What cannot run, per config, with the numbers (pure): device memory beyond ``gpu_memory_bytes`` (the
    GPU's, or MAX_GPU_MEMORY_BYTES without a GPU to ask), host memory beyond ``host_memory_bytes`` (this
    machine's, or MAX_HOST_MEMORY_BYTES without it), and a run that cannot end within ``timeout_s`` even at the host link's peak. Only configs with
    parameters (clusterbench's finder; the link bound also for a protocol program, whose frames cross it too)."""
    out: list[str] = []
    gpu_limit = MAX_GPU_MEMORY_BYTES if gpu_memory_bytes is None else gpu_memory_bytes
    gpu_what = ("the most any GPU has" if gpu_memory_bytes is None else "this GPU's memory")
    for c in configs:
        p = c.params
        if p is None:
            continue
        if c.workload.kind == "cupy":
            need = memory_need(p)
            if need.device_bytes > gpu_limit:
                out.append(f"config {c.label!r}: needs {U.size(need.device_bytes)} of device memory ({p.streams:,} "
                           f"streams x batch {p.batch:,} frames of {p.frame_bytes:,} B, and their cluster slots), "
                           f"more than {U.size(gpu_limit)}, {gpu_what}")
            host_limit = MAX_HOST_MEMORY_BYTES if host_memory_bytes is None else host_memory_bytes
            if need.host_bytes > host_limit:
                out.append(f"config {c.label!r}: needs {U.size(need.host_bytes)} of host memory (dark frames, the frame "
                           f"pool and the pinned cluster slots), more than "
                           + ("any machine has" if host_memory_bytes is None else "this machine's")
                           + f" ({U.size(host_limit)})")
        least = pass_seconds_at_least(p)
        if least > timeout_s:
            out.append(f"config {c.label!r}: one run of {p.pedestal_frames:,} dark and {p.frames:,} data frames of "
                       f"{p.frame_bytes:,} B takes at least {U.long_span(least)} at the host link's peak "
                       f"({U.gbps(HOST_LINK_PEAK_GBPS)}), longer than --timeout {U.seconds(timeout_s, 0)}: it would be ended before "
                       "it finished")
    return out


def run_time_warning(configs: Iterable[ProbeConfig]) -> str | None:
    """A warning, with the estimate, when probing ``configs`` takes long (pure): per config at least three
    runs (the traced one, an untraced warm-up and one counted run), each at least its dark and data frames at
    the host link's peak. None when the estimate stays under LONG_PROBE_S (or no config has parameters)."""
    per = [(c.label, pass_seconds_at_least(c.params)) for c in configs if c.params is not None]
    total = sum(s for _, s in per) * 3
    if total <= LONG_PROBE_S:
        return None
    label, longest = max(per, key=lambda t: t[1])
    return (f"the probe takes at least {U.long_span(total)}: per config a traced run, an untraced warm-up and at "
            f"least one counted run, each moving its frames at the host link's peak of {U.gbps(HOST_LINK_PEAK_GBPS)} "
            f"({label!r} alone at least {U.long_span(longest)} per run)")


def no_gpu_bounds() -> str:
    """The bounds a probe checks without a GPU to ask (``--dry-run`` on any machine), in words."""
    return (f"every integer within its type (a batch, cap, pool or pixel count in 32 bits, frames in 64); device "
            f"memory at most {U.size(MAX_GPU_MEMORY_BYTES)} (the most any GPU has; with a GPU, that GPU's memory); "
            f"host memory at most {U.size(MAX_HOST_MEMORY_BYTES)} (on the machine that probes, its own); each run's "
            f"frames within --timeout at the host link's peak of {U.gbps(HOST_LINK_PEAK_GBPS)}")
