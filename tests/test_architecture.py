"""Imports point one way, and no module imports itself round a cycle.

Layers, top to bottom (a layer may import only the layers below it):
  cli -> render -> run -> {analyzers, compare, workloads} -> io -> model -> errors
The core must load without typer, rich or CuPy, so that `analyze` and `--help` work on a
machine without a GPU and so the library can be used from plain Python.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

PACKAGE = Path(__file__).resolve().parents[1] / "clusterbench"
# Each package's rank; a module may import modules of a lower or equal rank (equal: inside its own
# package). analyzers, compare and workloads share a rank but must not import each other, except
# compare -> analyzers (comparing two traces analyzes both).
RANK = {"errors": 0, "model": 1, "io": 2, "analyzers": 3, "compare": 3, "workloads": 3, "run": 4, "render": 5,
        "cli": 6}
ALLOWED_SIDEWAYS = {("compare", "analyzers")}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts)
        out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every clusterbench module ``name`` imports anywhere in its file (also inside functions and
    TYPE_CHECKING blocks: a cycle there is still a cycle in the design)."""
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in modules else base)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _imports(m, p, modules) for m, p in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None. A package and its own submodules are not a cycle
    (``pkg/__init__`` re-exporting ``pkg.sub`` while ``pkg.sub`` imports a sibling is how packages work)."""
    def related(a: str, b: str) -> bool:
        return a.startswith(b + ".") or b.startswith(a + ".")

    edges = {m: sorted(w for w in ws if not related(m, w)) for m, ws in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for w in edges.get(v, ()):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state:
                found = visit(w)
                if found:
                    return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(edges):
        if v not in state:
            found = visit(v)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    # a hand-made graph: a -> b -> c -> a is a cycle; d -> a is not part of it
    assert find_cycle({"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}) == ["p.a", "p.b", "p.c", "p.a"]
    assert find_cycle({"p.a": {"p.b"}, "p.b": set()}) is None
    assert find_cycle({"p": {"p.x"}, "p.x": {"p"}}) is None  # a package and its submodule


def test_no_import_cycle_anywhere() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in RANK else None


def test_imports_point_down_the_layers() -> None:
    bad = []
    for m, imported in import_graph().items():
        lm = _layer(m)
        if lm is None:
            continue
        for w in imported:
            lw = _layer(w)
            if lw is None or lw == lm:
                continue
            if RANK[lw] > RANK[lm] or (RANK[lw] == RANK[lm] and (lm, lw) not in ALLOWED_SIDEWAYS):
                bad.append(f"{m} ({lm}) imports {w} ({lw})")
    assert not bad, "imports against the layers:\n" + "\n".join(sorted(bad))


CORE_MODULES = [
    "clusterbench.analyzers",
    "clusterbench.analyzers.analysis",
    "clusterbench.io.nsys",
    "clusterbench.io.results",
    "clusterbench.run.config",
    "clusterbench.run.guards",
    "clusterbench.run.gpus",
    "clusterbench.run.probe",
    "clusterbench.run.supervisor",
    "clusterbench.run.sustained",
    "clusterbench.run.campaign",
    "clusterbench.compare.compare",
    "clusterbench.compare.floors",
    "clusterbench.compare.history",
    "clusterbench.compare.traces",
    "clusterbench.io.history",
    "clusterbench.model.results",
    "clusterbench.model.measurement",
    "clusterbench.model.workload",
]
FORBIDDEN = ("typer", "rich", "cupy", "click")


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_imports_no_ui_or_gpu_library(module: str) -> None:
    code = (
        "import sys, importlib\n"
        f"importlib.import_module({module!r})\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} pulled in {out.stdout.strip()}"


def test_cli_help_does_not_import_cupy() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from clusterbench.cli import app\n"
        "r = CliRunner().invoke(app, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print('cupy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


COMMANDS = ("analyze", "probe", "compare", "guard", "floors", "history", "baseline")


def test_every_command_is_documented() -> None:
    from clusterbench.cli import app

    runner = CliRunner()
    top = runner.invoke(app, ["--help"])
    assert top.exit_code == 0
    for name in COMMANDS:
        assert name in top.output
        res = runner.invoke(app, [name, "--help"])
        assert res.exit_code == 0, res.output
        # every command documents what it answers and its exit codes
        assert "Exit codes" in res.output, f"{name} --help lacks the exit codes"
        assert "not built yet" not in res.output


def test_python_dash_m_works() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "clusterbench", "--version"], capture_output=True, text=True, check=True
    )
    from clusterbench import __version__

    assert out.stdout.strip() == f"clusterbench {__version__}"
