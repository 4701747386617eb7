# A papermill batch: one notebook over a grid of parameters, the runs in parallel, one combined table.
# `make batch GRID=notebooks/grids/known_groups_eps_score.yaml` runs, from the repository root:
#
#   snakemake -s workflow/batch.smk --cores 2 --config grid=notebooks/grids/known_groups_eps_score.yaml
#
# The grid file (YAML) names the notebook, the profile (default fast), fixed `parameters`, the `grid`
# (parameter -> list of values; every combination is one run) and the `table` each run writes (a path
# under the run's figures folder). Under build/batch/<grid file name>/ (or --config out=DIR):
#   <notebook>.ipynb             the jupytext notebook as .ipynb (jupytext --to ipynb)
#   <run>/params.yaml            the run's papermill parameter file (<run>: e.g. eps=0.05__scores=score_logits)
#   <run>/<notebook>.ipynb       the executed run: papermill <notebook>.ipynb ... -f <run>/params.yaml
#   <run>/figures/               its figures and tables (GPAC_FIGURES: runs never share a folder)
#   combined.csv                 every run's table stacked, the run and its parameters in front
# A run is rerun only when its parameters, the notebook, its configuration or the package changed.
import os
import sys
from pathlib import Path

import yaml

BASEDIR = workflow.basedir
sys.path.insert(0, BASEDIR)
from batch_grid import read_grid  # noqa: E402 (workflow/batch_grid.py)

from gpac_utils.workflow.runner import RunnerError

PYTHON = sys.executable
try:
    if not config.get("grid"):
        raise RunnerError("grid: no grid file; make batch GRID=FILE (snakemake ... --config grid=FILE)")
    GRID_FILE = Path(config["grid"])
    SPEC, NOTEBOOK_PY, FIXED, RUNS = read_grid(GRID_FILE)
except RunnerError as exc:  # one line, exit status 2, before anything runs
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(2)
NOTEBOOK = NOTEBOOK_PY.stem
CONFIG = [p for p in [f"notebooks/config/{NOTEBOOK}.yaml"] if Path(p).exists()]
OUT = os.path.abspath(config.get("out", f"build/batch/{GRID_FILE.stem}"))
PACKAGE = sorted(str(p) for p in Path("gpac_utils").rglob("*.py"))

# On a cluster only the papermill runs are jobs; the bookkeeping rules run where Snakemake runs
# (measured on the one-node test cluster: the same grid in 57 s instead of 91 s).
# No rule is a `run:` block: Snakemake would start a whole Snakemake process (parsing this file again) for
# each such job, seconds apiece; the parameter files are written by the shell, the table by batch_combine.py.
localrules: combined, ipynb, parameters


rule combined:
    input:
        expand(f"{OUT}/{{run}}/{NOTEBOOK}.ipynb", run=RUNS),
    output:
        f"{OUT}/combined.csv",
    params:
        table=SPEC["table"],
        runs=yaml.safe_dump(RUNS, sort_keys=False),
    shell:
        "{PYTHON} {BASEDIR}/batch_combine.py {OUT:q} {params.table:q} {params.runs:q} {output:q}"


rule ipynb:
    input:
        NOTEBOOK_PY,
    output:
        f"{OUT}/{NOTEBOOK}.ipynb",
    shell:
        "{PYTHON} -m jupytext --quiet --to ipynb --output {output} {input}"


rule parameters:
    output:
        f"{OUT}/{{run}}/params.yaml",
    params:
        values=lambda w: yaml.safe_dump({**FIXED, **RUNS[w.run]}, sort_keys=False),
    shell:
        "printf '%s' {params.values:q} > {output}"


rule papermill:
    input:
        notebook=f"{OUT}/{NOTEBOOK}.ipynb",
        parameters=f"{OUT}/{{run}}/params.yaml",
        config=CONFIG,
        package=PACKAGE,
    output:
        f"{OUT}/{{run}}/{NOTEBOOK}.ipynb",
    log:
        f"{OUT}/{{run}}/papermill.log",
    threads: 1
    shell:
        # The kernel runs in an empty temporary folder; its figures and tables go to the run's folder.
        "GPAC_FIGURES={OUT}/{wildcards.run}/figures {PYTHON} -m papermill"
        " {input.notebook} {output} -f {input.parameters} -k python3 --cwd $(mktemp -d) --no-progress-bar"
        " > {log} 2>&1"
