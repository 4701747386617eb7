"""The combined table of a papermill batch (workflow/batch.smk, rule ``combined``): every run's table
stacked, the run and its grid parameters in front.

    python workflow/batch_combine.py OUT TABLE RUNS OUTPUT

``OUT``: the batch folder (a run's table is ``OUT/<run>/figures/TABLE``); ``RUNS``: YAML text, run name ->
its grid parameters (in the grid's order). A plain script, not a ``run:`` block: Snakemake starts a whole
Snakemake process (and parses the workflow again) for each ``run:`` job, this one needs pandas alone.
"""

from __future__ import annotations

import sys

import pandas as pd
import yaml


def combine(out: str, table_name: str, runs: dict[str, dict]) -> pd.DataFrame:
    """Every run's table, with ``run`` and its grid parameters in front (lists as YAML text; a parameter
    whose name the table has too gets `` (grid)``)."""
    frames = []
    for run_name, combo in runs.items():
        table = pd.read_csv(f"{out}/{run_name}/figures/{table_name}")
        front = {"run": run_name}
        for key, value in combo.items():
            text = value if isinstance(value, (int, float, str)) else yaml.safe_dump(value, default_flow_style=True)
            front[f"{key} (grid)" if key in table.columns else key] = text.strip() if isinstance(text, str) else text
        frames.append(pd.concat([pd.DataFrame([front] * len(table)), table], axis=1))
    return pd.concat(frames, ignore_index=True)


if __name__ == "__main__":
    out, table_name, runs_text, output = sys.argv[1:]
    runs = yaml.safe_load(runs_text)
    combine(out, table_name, runs).to_csv(output, index=False)
    print(f"combined table of {len(runs)} runs: {output}")
