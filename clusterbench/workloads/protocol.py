"""Workloads behind one protocol: the program a probe traces and times (docs/workloads.md).

A workload is a program that, given a config's parameters, builds the pedestal inside the NVTX
range ``clusterbench:pedestal``, runs one batched pass inside ``clusterbench:pass frames=N``,
and writes a :class:`~clusterbench.model.workload.WorkloadResult` to ``{result}``. In ``sustained``
mode it runs ``{repeat}`` timed passes untraced instead. Two kinds:

- ``cupy``: clusterbench's own CuPy finder (``python -m clusterbench.workloads.cupy.run``), the first
  implementation of the protocol; it can also be hosted in-process by the CUPTI tracer.
- ``command``: any program, ``command = ["prog", "arg", "{cluster}", ...]`` in configs.toml.
- ``exec``: any program as it is, with no NVTX ranges and no result record (docs/probe.md): only
  ``{label}``, ``{python}`` and the parameter values its config gives are placeholders.

Everything here is pure (no GPU): building argv from a template, and checking a template.
"""

from __future__ import annotations

import os
import shutil
import string
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Mapping, Protocol, Sequence

from clusterbench.model.params import FIELD_NAMES, WorkloadParams

WORKLOAD_MODULE = "clusterbench.workloads.cupy.run"
PEDESTAL_RANGE = "clusterbench:pedestal"
PASS_RANGE = "clusterbench:pass"  # the pass range's text is "clusterbench:pass frames=N"
MODES = ("pass", "sustained")

# The probe's side channels to its own finder's sustained process (docs/workloads.md, "clusterbench's finder"),
# read by the child (clusterbench.workloads.cupy.run) and written by the probe (clusterbench.run.sustained):
# a steady rule other than the default (a concurrent round's fixed plan), and a file to wait for before the runs
# (the probe starts the process while the tracer finishes, and writes "go" once the GPU is the sustained runs'
# alone; anything else written there stops the process before it measures).
STEADY_ENV = "CLUSTERBENCH_STEADY"
GO_ENV = "CLUSTERBENCH_GO_FILE"
# Where the process waits for its go: "runs" (the default: after its pedestal and warm-up pass, so that they run
# while the tracer finishes; every process of a config sets up at once and waits so) or "gpu" (after its buffers,
# kernels and pinned pool are set up, before any GPU work).
GO_BEFORE_ENV = "CLUSTERBENCH_GO_BEFORE"
GO_BEFORE = ("runs", "gpu")
READY_SUFFIX = ".ready"  # <go file>.ready: the process is set up and waits for its go
# <go file>.done: the process's runs have ended and its pipeline is closed (its GPU work synchronized, its buffers
# freed); what is left is writing its record and exiting, so the probe may give the next process its go
DONE_SUFFIX = ".done"
# A folder where ``<build>.pending`` (a build as clusterbench.workloads.cupy.warm names it) exists while the probe
# compiles that build ahead: the finder's process waits for the file to go rather than compile the build itself.
BUILDS_ENV = "CLUSTERBENCH_BUILDS_PENDING"
PENDING_SUFFIX = ".pending"
# Longest a build is compiled ahead from its go (a compile takes a few seconds): past it the probe stops the
# compiling child, and a finder process waiting for the build stops waiting and compiles it itself.
BUILD_WAIT_S = 120.0

# Placeholders a command may use, beyond every parameter of WorkloadParams.
RUN_PLACEHOLDERS: Mapping[str, str] = {
    "label": "the config's label",
    "result": "the absolute path where the program writes its result record (JSON)",
    "mode": "'pass' (pedestal and one pass, NVTX ranges) or 'sustained' ({repeat} timed passes, untraced)",
    "repeat": "timed passes in sustained mode (1 in pass mode)",
    "params_json": "every parameter as one JSON object (the WorkloadParams record)",
    "python": "this Python interpreter (so a Python program runs with clusterbench importable)",
}
PLACEHOLDERS: tuple[str, ...] = tuple(sorted(set(FIELD_NAMES) | set(RUN_PLACEHOLDERS)))
# The placeholders of the protocol itself: an exec program (no result record, no modes) takes none of them.
PROTOCOL_PLACEHOLDERS: tuple[str, ...] = ("result", "mode", "repeat", "params_json")


def pass_range_text(frames: int) -> str:
    return f"{PASS_RANGE} frames={frames}"


# --------------------------------------------------------------------------- templates


def template_fields(arg: str) -> tuple[str, ...]:
    """The placeholder names in one argument; ValueError for a malformed brace."""
    names = []
    for _literal, name, spec, conv in string.Formatter().parse(arg):
        if name is None:
            continue
        if spec or conv:
            raise ValueError(f"placeholder {{{name}{'!' + conv if conv else ''}{':' + spec if spec else ''}}} "
                             "takes no format spec or conversion")
        names.append(name)
    return tuple(names)


def command_shape_problem(value: object) -> str | None:
    """A command must be a non-empty array of strings."""
    if not isinstance(value, (list, tuple)):
        return f"must be an array of strings, e.g. [\"prog\", \"{{cluster}}\"], got {value!r:.60}"
    if not value:
        return "must name a program: the array is empty"
    bad = [v for v in value if not isinstance(v, str)]
    if bad:
        return f"must be an array of strings; {bad[0]!r} is not a string (quote numbers: \"3\")"
    if not value[0]:
        return "must name a program: the first element is empty"
    return None


def command_problems(command: Sequence[str], base_dir: Path, kind: str = "command") -> list[str]:
    """Problems of a command template: unknown or malformed placeholders, a program not found.
    Relative program paths resolve against ``base_dir`` (the config file's folder, where it runs). An
    ``exec`` command may use no placeholder of the protocol (``{result}``, ``{mode}`` ...)."""
    out: list[str] = []
    for arg in command:
        try:
            names = template_fields(arg)
        except ValueError as exc:
            out.append(f"argument {arg!r}: {exc} (write {{{{ and }}}} for literal braces)")
            continue
        for name in names:
            if name not in PLACEHOLDERS:
                import difflib

                close = difflib.get_close_matches(name, PLACEHOLDERS, n=1, cutoff=0.6)
                guess = f" (did you mean {{{close[0]}}}?)" if close else ""
                out.append(f"unknown placeholder {{{name}}} in {arg!r}{guess}; known: "
                           + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS))
            elif kind == "exec" and name in PROTOCOL_PLACEHOLDERS:
                out.append(f"{{{name}}} in {arg!r} belongs to the result-record protocol: a program probed as it "
                           "is (workload = \"exec\") writes no result record and has no modes; use workload = "
                           "\"command\" for a program that speaks the protocol (docs/workloads.md)")
    if out:
        return out
    problem = program_problem(command, base_dir)
    return [problem] if problem else []


def program_problem(command: Sequence[str], base_dir: Path) -> str | None:
    """Is the program there? ``{python}`` is this interpreter; then a script it runs must exist."""
    prog = command[0]
    if prog == "{python}":
        if len(command) > 1 and command[1].endswith(".py") and not template_fields(command[1]):
            script = base_dir / command[1]
            if not script.is_file():
                return f"program not found: script {command[1]!r} (looked at {script})"
        return None
    if template_fields(prog):
        return f"the program {prog!r} may hold no placeholder other than {{python}}"
    if "/" in prog:
        path = base_dir / prog
        if not path.is_file():
            return f"program not found: {prog!r} (looked at {path})"
        if not os.access(path, os.X_OK):
            return f"program {prog!r} is not executable ({path}): chmod +x it, or run it through an interpreter"
        return None
    if shutil.which(prog) is None:
        return f"program not found: {prog!r} is not on PATH"
    return None


def expand(template: Sequence[str], values: Mapping[str, str]) -> tuple[str, ...]:
    """argv from a checked template (pure)."""
    return tuple(arg.format_map(values) for arg in template)


def placeholder_values(label: str, params: WorkloadParams, result: Path, mode: str, repeat: int,
                       python: str | None = None) -> dict[str, str]:
    import json

    values = {name: "" if value is None else str(value) for name, value in params.to_json().items()}
    values.update(label=label, result=str(result), mode=mode, repeat=str(repeat),
                  params_json=json.dumps(params.to_json(), sort_keys=True), python=python or sys.executable)
    return values


# --------------------------------------------------------------------------- the workload kinds


class Workload(Protocol):
    """What a probe needs of a workload: its kind, an argv per mode, where it runs, whether the
    CUPTI tracer can host it in-process."""

    kind: ClassVar[str]
    cupti_hostable: ClassVar[bool]

    @property
    def template(self) -> tuple[str, ...]: ...

    @property
    def cwd(self) -> Path | None: ...

    @property
    def runs_sustained(self) -> bool:
        """True when one process runs all ``{repeat}`` timed passes (the template has ``{mode}``)."""
        ...

    def argv(self, label: str, params: WorkloadParams, result: Path, mode: str, repeat: int = 1
             ) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True)
class _TemplateWorkload:
    template: tuple[str, ...]
    cwd: Path | None = None

    @property
    def runs_sustained(self) -> bool:
        return any("mode" in template_fields(a) for a in self.template)

    def argv(self, label: str, params: WorkloadParams, result: Path, mode: str, repeat: int = 1
             ) -> tuple[str, ...]:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        return expand(self.template, placeholder_values(label, params, result, mode, repeat))


CUPY_TEMPLATE = ("{python}", "-m", WORKLOAD_MODULE, "--params-json", "{params_json}", "--result", "{result}",
                 "--mode", "{mode}", "--repeat", "{repeat}")


@dataclass(frozen=True, slots=True)
class CupyWorkload(_TemplateWorkload):
    """clusterbench's CuPy finder, through the same protocol as any command."""

    kind: ClassVar[str] = "cupy"
    cupti_hostable: ClassVar[bool] = True
    template: tuple[str, ...] = CUPY_TEMPLATE


@dataclass(frozen=True, slots=True)
class CommandWorkload(_TemplateWorkload):
    """A program named in configs.toml; it runs in the config file's folder."""

    kind: ClassVar[str] = "command"
    cupti_hostable: ClassVar[bool] = False  # the CUPTI tracer hosts only our own finder in-process


@dataclass(frozen=True, slots=True)
class ExecWorkload:
    """A program probed as it is: its argv is its command with the config's values in the placeholders;
    it writes no result record (what it prints is all probe reads of it) and runs in the config file's
    folder (a command-line program: the current one)."""

    kind: ClassVar[str] = "exec"
    cupti_hostable: ClassVar[bool] = False
    template: tuple[str, ...]
    cwd: Path | None = None

    @property
    def runs_sustained(self) -> bool:
        return False

    def exec_argv(self, label: str, values: Mapping[str, object]) -> tuple[str, ...]:
        """The argv with ``{label}``, ``{python}`` and the config's values filled in (pure)."""
        filled = {name: "" if v is None else str(v) for name, v in values.items()}
        filled.update(label=label, python=sys.executable)
        return expand(self.template, filled)


WORKLOADS: Mapping[str, type] = {"cupy": CupyWorkload, "command": CommandWorkload, "exec": ExecWorkload}


def workload_for(kind: str, command: Sequence[str] | None = None, cwd: Path | None = None) -> Workload | ExecWorkload:
    """The workload of a config (``config.WorkloadSpec`` fields)."""
    if kind == "cupy":
        return CupyWorkload()
    if kind in ("command", "exec"):
        assert command is not None, f"a {kind} workload without a command passed validation"
        return CommandWorkload(tuple(command), cwd) if kind == "command" else ExecWorkload(tuple(command), cwd)
    raise ValueError(f"unknown workload kind {kind!r}")


def child_error(err: Exception) -> int:
    """How a workload's own child program (its ``main``) reports a ClusterbenchError before it exits: the
    ``Error:`` line and its ``Hint:`` on stderr, as the CLI does; returns the error's exit code."""
    print(f"Error: {err}", file=sys.stderr)
    hint = getattr(err, "hint", None)
    if hint:
        print(f"Hint: {hint}", file=sys.stderr)
    return int(getattr(err, "exit_code", 1))
