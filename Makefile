# Two commands on a fresh machine: `make run` (the demo campaign end to end) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install lint serve server clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python -c "from campaign.sim.compiled import warm; warm()"  # compile the simulator once (Numba cache)
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	PREFECT_SERVER_ANALYTICS_ENABLED=false $(BIN)/campaign run configs/campaigns/demo.yaml --workspace workspace/demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check campaign flows tasks data_checks tests

# A real Prefect server with the UI on http://127.0.0.1:4200 (SQLite under ~/.prefect).
server: $(STAMP)
	PREFECT_SERVER_ANALYTICS_ENABLED=false $(BIN)/prefect server start --host 127.0.0.1 --port 4200

# Serve every stage as a deployment from this process (needs `make server` running).
serve: $(STAMP)
	PREFECT_API_URL=http://127.0.0.1:4200/api $(BIN)/python -m deployments.serve

clean:
	rm -rf workspace
