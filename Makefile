# Two commands on a fresh machine: `make run` (the demo campaign end to end) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-fast install lint serve server ui stop clean

$(BIN)/python:
	@echo "install: creating the virtual environment $(VENV)"
	$(PYTHON) -m venv $(VENV)

# Each step says what it does; the installer's hundreds of lines become a few (scripts/install_progress.py).
# uv installs the packages (pip installs uv): it resolves the same versions as pip from the same index, and
# downloads and compiles the bytecode of the 195 packages on every core, 21 s where pip took 54
# (benchmarks/results/2026-12-06-tests.md). If uv cannot be installed or fails, pip installs them as before.
$(STAMP): pyproject.toml | $(BIN)/python
	@echo "install [1/3]: installing uv, the package installer, in $(VENV)"
	@$(BIN)/python -m pip install --quiet 'uv>=0.9,<1' || echo "install: uv could not be installed; pip will install the packages"
	@echo "install [2/3]: the project and its dependencies"
	@if [ -x $(BIN)/uv ]; then \
		$(PYTHON) scripts/install_progress.py $(BIN)/uv pip install --python $(BIN)/python --compile-bytecode -e '.[dev]' \
		|| { echo "install: uv failed (its lines are above); installing with pip instead (minutes)"; \
		$(PYTHON) scripts/install_progress.py $(BIN)/python -m pip install --progress-bar off -e '.[dev]'; }; \
	else $(PYTHON) scripts/install_progress.py $(BIN)/python -m pip install --progress-bar off -e '.[dev]'; fi
	@# megatron-core's own reader checks the training shards in the tests; its metadata asks for torch, which the
	@# reader does not need, so it comes without its dependencies (tests/helpers/megatron_index.py).
	@$(BIN)/python -m pip install --quiet --no-deps 'megatron-core>=0.16,<0.17'
	@# The two compile on one core each, side by side: 18 s and 5 s one after the other on 2 cores.
	@echo "install [3/3]: compiling the simulator's and prepare's kernels side by side, once per install (Numba cache, about 20 s)"
	@$(PYTHON) scripts/heartbeat.py "compiling prepare's word, language and n-gram kernels" $(BIN)/python -c "from campaign.data.filters import decontaminate, kernels, language; kernels.warm(); language.warm(); decontaminate.warm()" & prepare=$$!; \
	$(PYTHON) scripts/heartbeat.py "compiling the simulator's kernels" $(BIN)/python -c "from campaign.sim.compiled import warm; warm()"; simulator=$$?; \
	wait $$prepare && [ $$simulator -eq 0 ]
	@touch $(STAMP)
	@echo "install: done"

install: $(STAMP)

run: $(STAMP)
	PREFECT_SERVER_ANALYTICS_ENABLED=false $(BIN)/campaign run configs/campaigns/demo.yaml --workspace workspace/demo

# Every tier (unit, reference, flows, e2e; markers in pyproject.toml), the 25 slowest tests listed at the end.
# Four workers, whole files each (module-scoped workspaces stay in one worker): most flow and e2e tests wait on
# subprocesses, servers, browsers and Slurm, so on 2 cores two workers keep them only about 60 % busy
# (benchmarks/results/2026-12-05-tests.md: 650 s with three, 600 s with four; 2026-12-06-tests.md: 705 s with six).
# Python may write bytecode even where PYTHONDONTWRITEBYTECODE is set: each worker and the processes the tests start
# then import the project and the test modules compiled once, not each from source (4 x 6 CPU-s in collection alone).
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n 4 --dist loadfile --durations=25

# The fast tiers only: unit and reference (no Prefect flow, no server, no JAX trainer), each Hypothesis property on
# a quarter of its examples (tests/helpers/examples.py).
test-fast: $(STAMP)
	CAMPAIGN_HYPOTHESIS=fast $(BIN)/python -m pytest -q -n 2 -m "unit or reference" --durations=10 tests/unit tests/reference

# ruff (rules and formatting) over the whole tree, mypy over the modules listed in pyproject.toml.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The team's control room: a local Prefect server (SQLite under workspace/.prefect-ui/), the `campaign` process work
# pool, every deployment of deployments/prefect.yaml with its automations, and a worker; prints the UI address.
# `make stop` stops exactly what this checkout's `make ui` started (pid files in its workspace/.prefect-ui/), and the
# local Prefect servers that CLI commands keep for this checkout's workspaces (`campaign server stop` here); another
# checkout's servers, and the one commands without a workspace share, keep running (`campaign server stop --all`).
UI_PORT ?= 4200
UI_DIR := $(CURDIR)/workspace/.prefect-ui
ui: $(STAMP)
	$(BIN)/python -m deployments.ui start --port $(UI_PORT) --dir $(UI_DIR)

stop:
	$(BIN)/python -m deployments.ui stop --dir $(UI_DIR)
	$(BIN)/campaign server stop

# A bare Prefect server with the UI on http://127.0.0.1:4200 (SQLite under ~/.prefect); `make ui` does more.
server: $(STAMP)
	PREFECT_SERVER_ANALYTICS_ENABLED=false $(BIN)/prefect server start --host 127.0.0.1 --port 4200

# Serve every deployment of deployments/prefect.yaml from this process (needs `make server` running).
serve: $(STAMP)
	PREFECT_API_URL=http://127.0.0.1:4200/api $(BIN)/python -m deployments.serve

clean:
	rm -rf workspace
