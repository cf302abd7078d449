# clusterbench: two commands for a newcomer.
#   make run   sets up and runs the main job: a probe when a GPU is present, else analyze on a
#              bundled real H200 trace (and it says which)
#   make test  sets up and runs the tests (GPU tests skip cleanly without a GPU)
SHELL := /bin/bash
BUNDLED_TRACE := tests/data/h200/dev_5x5_s2_b500.sqlite
# make run / make smoke on a GPU: the reference labels at 8,000 frames in batches of 200, so that every
# stream of a 4-stream config gets 10 launches (configs/smoke.toml says why)
SMOKE_CONFIG := configs/smoke.toml
# The interpreter comes from scripts/bootstrap.sh (a .venv online, python3 itself offline);
# the checkout goes first on PYTHONPATH so both cases import this clusterbench.
WITH_PY = set -eo pipefail; py=$$(sh scripts/bootstrap.sh); export PYTHONPATH="$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH}";

.PHONY: help run test smoke sweep bench clean

help:
	@echo "make run    - probe the four configs of $(SMOKE_CONFIG) on the GPU, or without a GPU analyze a bundled H200 trace"
	@echo "make test   - set up (scripts/bootstrap.sh: .venv with .[test], or python3 offline) and run pytest; GPU tests skip without a GPU"
	@echo "make smoke  - probe the four configs of $(SMOKE_CONFIG) (8,000 frames, batch 200) into results/<date>_f32_smoke"
	@echo "make sweep  - probe every config at its full frames into results/<date>_<f32|f64> (the reference campaign)"
	@echo "make bench  - analyze's speed and memory limits at 1M, 5M and 10M records and on a host-bound loop at 1M and 10M (benchmarks/out; no GPU needed; it says which way each size was read and which limit was missed): make exits 2 when a limit is missed (GNU make's status for any failed recipe; python benchmarks/bench_analyze.py itself exits 3)"
	@echo "make clean  - remove .venv, *.egg-info, .pytest_cache, __pycache__, benchmarks/out and results/history.db (clusterbench history import results makes it again; named baselines go with it)"

test:
	@$(WITH_PY) $$py -m pytest -q

run:
	@$(WITH_PY) if $$py -c "from clusterbench.run.guards import gpu_present; raise SystemExit(0 if gpu_present() else 1)" 2>/dev/null; then \
	  echo "make run: GPU found: clusterbench probe --config $(SMOKE_CONFIG) --tag smoke" >&2; \
	  $$py -m clusterbench probe --config $(SMOKE_CONFIG) --tag smoke; \
	else \
	  echo "make run: no usable NVIDIA GPU here, so this runs analyze on a bundled real H200 nsys export:" >&2; \
	  echo "make run:   clusterbench analyze $(BUNDLED_TRACE)" >&2; \
	  $$py -m clusterbench analyze $(BUNDLED_TRACE); \
	fi

smoke:
	@$(WITH_PY) $$py -m clusterbench probe --config $(SMOKE_CONFIG) --tag smoke

sweep:
	@$(WITH_PY) $$py -m clusterbench probe

bench:
	@$(WITH_PY) $$py benchmarks/bench_analyze.py

clean:
	rm -rf .venv *.egg-info .pytest_cache benchmarks/out results/history.db results/history.db-journal
	find . -path ./.git -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

