#!/bin/sh
# Prints the Python interpreter that `make run` / `make test` should use, setting it up first.
# Messages go to stderr; the interpreter path is the only thing on stdout.
#  1. .venv already set up                        -> .venv/bin/python
#  2. python3 already has the deps                -> python3 itself (the checkout goes on PYTHONPATH)
#     (the GPU machine: no index, and its python3 is itself a venv that holds CuPy); asked first, since
#     it costs 0.1 s and asking a package index costs 1 to 8 s
#  3. a package index is reachable                -> create .venv, pip install -e '.[test]'
set -u
case "${1:-}" in
    -h|--help)
        cat <<'USAGE'
usage: sh scripts/bootstrap.sh [--help]

Prints the Python interpreter that `make run` and `make test` use, setting it up first
(messages on stderr, the interpreter's path alone on stdout):
  1. .venv already set up                       -> .venv/bin/python
  2. python3 already has the deps               -> python3 itself
  3. a package index is reachable               -> create .venv, pip install -e '.[test]'
Environment: PYTHON (default python3), VENV (default .venv). No GPU needed.
USAGE
        exit 0 ;;
    "") ;;
    *) echo "bootstrap: Error: unknown argument: $1" >&2; echo "bootstrap: Hint: sh scripts/bootstrap.sh --help" >&2; exit 2 ;;
esac
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
STAMP="$VENV/.installed"
if [ -f "$STAMP" ] && [ "$STAMP" -nt pyproject.toml ] && [ -x "$VENV/bin/python" ]; then
    echo "$VENV/bin/python"; exit 0
fi
if "$PYTHON" -c "import typer, rich, sqlite_utils, numpy, pytest, hypothesis" 2>/dev/null; then
    echo "bootstrap: using $("$PYTHON" -c 'import sys; print(sys.executable)'), which already has typer, rich, sqlite-utils, numpy, pytest and hypothesis" >&2
    command -v "$PYTHON"; exit 0
fi
probe_dir=$(mktemp -d)
if "$PYTHON" -m pip download --no-deps -q -d "$probe_dir" --timeout 8 --retries 1 typer >/dev/null 2>&1; then
    rm -rf "$probe_dir"
    echo "bootstrap: creating $VENV and installing clusterbench with its test extras (one time)" >&2
    "$PYTHON" -m venv "$VENV" >&2 || exit 1
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2 || exit 1
    "$VENV/bin/python" -m pip install -q -e '.[test]' >&2 || exit 1
    touch "$STAMP"
    echo "$VENV/bin/python"; exit 0
fi
rm -rf "$probe_dir"
echo "bootstrap: Error: $PYTHON lacks typer/rich/sqlite-utils/numpy/pytest/hypothesis and no package index is reachable to install them." >&2
echo "bootstrap: Hint: connect to a package index once, or install those packages for $PYTHON." >&2
exit 1
