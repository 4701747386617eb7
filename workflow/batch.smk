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

import pandas as pd
import yaml

sys.path.insert(0, workflow.basedir)
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
localrules: combined, ipynb, parameters


rule combined:
    input:
        expand(f"{OUT}/{{run}}/{NOTEBOOK}.ipynb", run=RUNS),
    output:
        f"{OUT}/combined.csv",
    run:
        frames = []
        for run_name, combo in RUNS.items():
            table = pd.read_csv(f"{OUT}/{run_name}/figures/{SPEC['table']}")
            front = {"run": run_name}
            for key, value in combo.items():  # lists as YAML text; a name the table has too gets " (grid)"
                text = value if isinstance(value, (int, float, str)) else yaml.safe_dump(value, default_flow_style=True)
                front[f"{key} (grid)" if key in table.columns else key] = text.strip() if isinstance(text, str) else text
            frames.append(pd.concat([pd.DataFrame([front] * len(table)), table], axis=1))
        pd.concat(frames, ignore_index=True).to_csv(output[0], index=False)
        print(f"combined table of {len(RUNS)} runs: {output[0]}")


rule ipynb:
    input:
        NOTEBOOK_PY,
    output:
        f"{OUT}/{NOTEBOOK}.ipynb",
    shell:
        "{PYTHON} -m jupytext --quiet --to ipynb --output {output} {input}"


# A shell rule, not `run:`: Snakemake runs each `run:` job in a Python process of its own that reads this
# file again (papermill, pandas and the package imported: seconds per run); printf is instant.
rule parameters:
    output:
        f"{OUT}/{{run}}/params.yaml",
    params:
        text=lambda w: yaml.safe_dump({**FIXED, **RUNS[w.run]}, sort_keys=False),
    shell:
        "printf '%s' {params.text:q} > {output}"


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
