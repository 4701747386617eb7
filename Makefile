# gpac-compendium — two commands on a fresh machine:
#   make reproduce   create .venv, install, run every notebook (paper profile) on the embedded data
#   make test        create .venv if needed, install, run the test suite
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
EXTRAS ?= notebooks,generate,test
PROFILE ?= paper
JOBS ?= 2
PYTEST_ARGS ?=

.PHONY: help venv reproduce test test-fast bench lab clean

help:
	@echo "make reproduce | test | test-fast | bench | lab | clean"

$(PY):
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (Python >= 3.11)"; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e ".[$(EXTRAS)]"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (gpac)"
	touch $(STAMP)

venv: $(STAMP)

reproduce: $(STAMP)
	$(PY) -m gpac_utils.run --profile $(PROFILE) --jobs $(JOBS)

test: $(STAMP)
	$(PY) -m pytest -n 2 --durations=15 $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest -n 2 -m "not slow and not notebook" $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) benchmarks/bench_calibration.py

lab: $(STAMP)
	$(PY) -m jupyter lab --ServerApp.root_dir=$(CURDIR) notebooks

clean:
	rm -rf build .pytest_cache
