"""The grid file of a papermill batch (workflow/batch.smk), checked before anything runs.

A grid file (YAML) names the ``notebook`` (a name, a number or a path), the ``profile`` (default
fast), fixed ``parameters``, the ``grid`` (parameter -> list of values; every combination is one
run) and the ``table`` each run writes (a CSV under the run's figures folder). Each problem is a
:class:`~gpac_utils.workflow.runner.RunnerError` naming the file and the key; batch.smk prints it
as one ``error:`` line and exits 2.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import jupytext

from gpac_utils.workflow.config import PROFILES
from gpac_utils.workflow.runner import RunnerError, check_parameters, read_yaml, resolve_notebook

KEYS = ("notebook", "profile", "parameters", "grid", "table")


def read_grid(path):
    """``(spec, notebook path, fixed parameters, run name -> its grid parameters)`` of a grid file."""
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
        notebook = resolve_notebook(str(spec["notebook"]))
    except RunnerError as exc:
        raise RunnerError(f"{what}: notebook: {exc}") from None
    fixed = {"profile": spec.get("profile", "fast"), **(spec.get("parameters") or {})}
    combos = [dict(zip(spec["grid"], values)) for values in itertools.product(*spec["grid"].values())]
    # A run's name comes from its parameters (eps=0.05__scores=score_logits): adding a value to the grid
    # adds runs and leaves the others' names, parameter files and results as they are.
    runs = {
        "__".join(f"{k}={re.sub(r'[^A-Za-z0-9._+-]+', '-', str(v)).strip('-')}" for k, v in c.items()): c
        for c in combos
    }
    if len(runs) < len(combos):
        raise RunnerError(f"{what}: two runs of the grid get the same name; use distinguishable values")
    # A parameter the notebook does not declare (papermill would only warn) or a value of the wrong
    # type (checked against its parameters cell and configuration file).
    nb = jupytext.read(notebook)
    for combo in combos:
        try:
            check_parameters(nb, {**fixed, **combo}, notebook.stem)
        except RunnerError as exc:
            raise RunnerError(f"{what}: {exc}") from None
    return spec, notebook, fixed, runs
