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
import itertools
import os
import re
import sys
from pathlib import Path

import jupytext
import pandas as pd
import yaml

from gpac_utils.workflow.config import PROFILES
from gpac_utils.workflow.runner import RunnerError, check_parameters, read_yaml, resolve_notebook

PYTHON = sys.executable
KEYS = ("notebook", "profile", "parameters", "grid", "table")


def read_grid(path):
    """The grid file and its notebook, checked before anything runs (RunnerError naming the key)."""
    what = f"grid={path}"
    spec = read_yaml(Path(path), what, mapping=True)
    unknown, missing = sorted(set(spec) - set(KEYS)), [k for k in ("notebook", "grid", "table") if k not in spec]
    if unknown or missing:
        found = f"unknown key(s) {unknown}" if unknown else f"missing key(s) {missing}"
        raise RunnerError(f"{what}: {found}; a grid file has {', '.join(KEYS)} (profile and parameters optional)")
    if spec.get("profile", "fast") not in PROFILES:
        raise RunnerError(f"{what}: profile: unknown {spec['profile']!r}; choose one of {list(PROFILES)}")
    for key in ("parameters", "grid"):
        if not isinstance(spec.get(key) or {}, dict):
            raise RunnerError(f"{what}: {key}: expected a mapping of parameter names to values, got {spec[key]!r}")
    if not spec["grid"]:
        raise RunnerError(f"{what}: grid: empty; give each parameter to vary a list of values")
    for key, values in spec["grid"].items():
        if not (isinstance(values, list) and values):
            raise RunnerError(f"{what}: grid: {key}: expected a non-empty list of values, got {values!r}")
    both = sorted(set(spec.get("parameters") or {}) & set(spec["grid"]))
    if both:
        raise RunnerError(f"{what}: parameter(s) {both} both in parameters and in grid; keep one")
    if not (isinstance(spec["table"], str) and spec["table"].endswith(".csv")):
        raise RunnerError(f"{what}: table: expected a CSV under each run's figures folder, e.g. tables/NAME.csv")
    try:
        return spec, resolve_notebook(str(spec["notebook"]))
    except RunnerError as exc:
        raise RunnerError(f"{what}: notebook: {exc}") from None


try:
    if not config.get("grid"):
        raise RunnerError("grid: no grid file; make batch GRID=FILE (snakemake ... --config grid=FILE)")
    GRID_FILE = Path(config["grid"])
    SPEC, NOTEBOOK_PY = read_grid(GRID_FILE)  # the notebook: a name, a number or a path
    NOTEBOOK = NOTEBOOK_PY.stem
    FIXED = {"profile": SPEC.get("profile", "fast"), **(SPEC.get("parameters") or {})}
    COMBOS = [dict(zip(SPEC["grid"], values)) for values in itertools.product(*SPEC["grid"].values())]
    # A run's name comes from its parameters (eps=0.05__scores=score_logits): adding a value to the grid
    # adds runs and leaves the others' names, parameter files and results as they are.
    RUNS = {
        "__".join(f"{k}={re.sub(r'[^A-Za-z0-9._+-]+', '-', str(v)).strip('-')}" for k, v in c.items()): c for c in COMBOS
    }
    if len(RUNS) < len(COMBOS):
        raise RunnerError(f"grid={GRID_FILE}: two runs of the grid get the same name; use distinguishable values")
    # Fail before anything runs on a parameter the notebook does not declare (papermill would only
    # warn) or a value of the wrong type (checked against its parameters cell and configuration file).
    nb = jupytext.read(NOTEBOOK_PY)
    for combo in COMBOS:
        try:
            check_parameters(nb, {**FIXED, **combo}, NOTEBOOK)
        except RunnerError as exc:
            raise RunnerError(f"grid={GRID_FILE}: {exc}") from None
except RunnerError as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(2)
CONFIG = [p for p in [f"notebooks/config/{NOTEBOOK}.yaml"] if Path(p).exists()]
OUT = os.path.abspath(config.get("out", f"build/batch/{GRID_FILE.stem}"))
PACKAGE = sorted(str(p) for p in Path("gpac_utils").rglob("*.py"))

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


rule parameters:
    output:
        f"{OUT}/{{run}}/params.yaml",
    params:
        values=lambda w: {**FIXED, **RUNS[w.run]},
    run:
        Path(output[0]).write_text(yaml.safe_dump(params.values, sort_keys=False))


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
