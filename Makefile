# Two entry points, both self-contained on a fresh machine (python3 + pip only):
#   make demo   install, investigate the bundled demo data offline (report in drilldown-demo/)
#   make test   install with test extras and run the test suite (the slow end-to-end cases aside)
#   make test-slow  the slow end-to-end cases (CI runs both)
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DB ?= demo.duckdb
export PREFECT_SERVER_ANALYTICS_ENABLED := false

.PHONY: install install-test demo test test-slow clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .

install-test: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'

demo: install
	$(BIN)/drilldown demo --out drilldown-demo

test: install-test
	$(BIN)/python -m pytest -q -m "not slow" --durations=10

test-slow: install-test
	$(BIN)/python -m pytest -q -m slow --durations=10

clean:
	rm -rf $(VENV) $(DB) drilldown-demo *.egg-info
