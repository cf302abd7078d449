# clusterbench: two commands for a newcomer.
#   make run   sets up and runs the main job (a probe when a GPU is present, else analyze
#              on a bundled real H200 trace, saying so)
#   make test  sets up and runs the tests
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
FRAMES ?= 2000
BUNDLED_TRACE := tests/data/h200/dev_5x5_s2_b500.sqlite

.PHONY: run test smoke sweep bench clean help

help:
	@echo "make run    - probe on the GPU (2000 frames) or, without a GPU, analyze a bundled H200 trace"
	@echo "make test   - create $(VENV), install .[test], run pytest (GPU tests skip without a GPU)"
	@echo "make smoke  - probe every config at $(FRAMES) frames"
	@echo "make sweep  - probe every config at its full frames (the reference campaign)"
	@echo "make bench  - the analyze speed benchmark (1M activity records)"

# The venv. Online: an isolated venv with .[test] from the package index. Offline (a GPU
# machine that already has typer, rich, sqlite-utils and numpy, and no index to reach): a venv
# that sees the system packages, with clusterbench installed without fetching anything.
$(STAMP): pyproject.toml
	@if $(PYTHON) -c "import typer, rich, sqlite_utils, numpy, pytest, setuptools" 2>/dev/null && \
	   ! $(PYTHON) -m pip download --no-deps -q -d /tmp/cb-pip-probe --timeout 5 --retries 0 typer >/dev/null 2>&1; then \
	  echo "make: no package index reachable; using the system packages (offline venv)" >&2; \
	  $(PYTHON) -m venv --system-site-packages $(VENV) && \
	  $(PY) -m pip install -q --no-deps --no-build-isolation --no-index -e . ; \
	else \
	  $(PYTHON) -m venv $(VENV) && \
	  $(PY) -m pip install -q --upgrade pip && \
	  $(PY) -m pip install -q -e '.[test]' ; \
	fi
	@touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

run: $(STAMP)
	@if $(PY) -c "from clusterbench.guards import gpu_present; raise SystemExit(0 if gpu_present() else 1)" 2>/dev/null; then \
	  echo "make run: GPU found: clusterbench probe --frames $(FRAMES)" >&2; \
	  $(VENV)/bin/clusterbench probe --frames $(FRAMES); \
	else \
	  echo "make run: no usable GPU here, so this runs analyze on a bundled real H200 nsys export:" >&2; \
	  echo "make run:   $(BUNDLED_TRACE)" >&2; \
	  $(VENV)/bin/clusterbench analyze $(BUNDLED_TRACE); \
	fi

smoke: $(STAMP)
	$(VENV)/bin/clusterbench probe --frames $(FRAMES)

sweep: $(STAMP)
	$(VENV)/bin/clusterbench probe

bench: $(STAMP)
	$(PY) benchmarks/bench_analyze.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
