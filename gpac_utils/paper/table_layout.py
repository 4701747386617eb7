"""Our summaries beside the paper's numbers: a long table (CSV) and the paper's layout (Markdown).

:func:`side_by_side` attaches the transcribed numbers (:mod:`gpac_utils.paper.reference`) to the
rows run with the paper's recipe; :func:`report_table` gives the saved long table its display
column names; :func:`paper_layout` arranges cells ``ours (paper)`` as the paper prints them;
:func:`save_tables` writes both.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from . import plotting
from .reference import GROUPING_LABELS, PAPER_METRICS, SCORE_LABELS, TITLES, paper_long

#: Rows of the paper layout: (summary column, label).
LAYOUT_ROWS = (
    ("Error", "Error (%)"),
    ("Error_Gap", "Error_Gap (%)"),
    ("STP", "STP (%)"),
    ("Max_group_violation", "Violation (%)"),
)
#: Display names of the saved long table's columns.
REPORT_COLUMNS = {
    "dataset": "Dataset",
    "grouping": "Clustering",
    "score": "Score",
    "method": "Method",
    "setting": "Setting",
    "bound": "Bound",
    "sampling": "Sampling",
    "rule": "Rule",
    "eps": "eps",
    "Error": "Error (%)",
    "paper_Error": "Error paper (%)",
    "Error_Gap": "Error_Gap (%)",
    "paper_Error_Gap": "Error_Gap paper (%)",
    "STP": "STP (%)",
    "paper_STP": "STP paper (%)",
    "Routed_share": "Routed share (%)",
    "Violation": "Violation any group (%)",
    "Max_group_violation": "Max group violation (%)",
    "Max_group_violation_mcse": "Max group violation MCSE (%)",
    "most_violated_group": "Most violated group",
    "worst_group": "Worst group (test error)",
    "trials": "Trials",
}
_KEYS = ["dataset", "grouping", "score", "method"]


def side_by_side(summary: pd.DataFrame, name: str | None) -> pd.DataFrame:
    """Our summary (percent) beside the paper's numbers.

    Parameters
    ----------
    summary : pandas.DataFrame
        Output of :func:`~gpac_utils.paper.results_tables.summarize_results`.
    name : str or None
        The paper table (``None``: no paper numbers).

    Returns
    -------
    pandas.DataFrame
        ``summary`` plus ``paper_Error``, ``paper_Error_Gap``, ``paper_STP`` (on rows run with
        the paper's recipe only; NaN elsewhere) and ``diff_*`` = ours - paper.
    """
    need = {"dataset", "grouping", "score", "method", "setting", *PAPER_METRICS}
    missing = sorted(need - set(summary.columns))
    if missing:
        raise ValueError(f"summary lacks column(s) {missing}")
    out = summary.copy()
    for m in PAPER_METRICS:
        out[f"paper_{m}"] = np.nan
    if name is not None:
        wide = paper_long(name).pivot_table(index=_KEYS, columns="metric", values="paper").reset_index()
        wide = wide.rename(columns={m: f"paper_{m}" for m in PAPER_METRICS})
        wide["setting"] = "paper"
        out = out.drop(columns=[f"paper_{m}" for m in PAPER_METRICS]).merge(wide, on=_KEYS + ["setting"], how="left")
    for m in PAPER_METRICS:
        out[f"diff_{m}"] = out[m] - out[f"paper_{m}"]
    return out


def report_table(side: pd.DataFrame, paper_columns: bool = True) -> pd.DataFrame:
    """The saved long table: display column names, one row per method and recipe.

    Parameters
    ----------
    side : pandas.DataFrame
        Output of :func:`side_by_side`.
    paper_columns : bool, default True
        Keep the ``… paper (%)`` columns (``False``: ours alone).

    Returns
    -------
    pandas.DataFrame
    """
    keep = [c for c in REPORT_COLUMNS if c in side.columns and (paper_columns or not c.startswith("paper_"))]
    out = side[keep].rename(columns=REPORT_COLUMNS)
    out["Dataset"] = out["Dataset"].map(lambda b: TITLES.get(b, b))
    out["Clustering"] = out["Clustering"].map(lambda c: GROUPING_LABELS.get(c, c))
    out["Score"] = out["Score"].map(lambda s: SCORE_LABELS.get(s, s))
    return out


def _cell(ours, paper) -> str:
    if pd.isna(ours):
        return ""
    return f"{ours:.2f}" if pd.isna(paper) else f"{ours:.2f} ({paper:.2f})"


def paper_layout(
    side: pd.DataFrame, valid_bound: str | None = None, rows: Sequence[tuple[str, str]] = LAYOUT_ROWS
) -> pd.DataFrame:
    """The paper's layout: rows (dataset, grouping, metric), columns (score, method).

    Cells read ``ours (paper)`` in percent. Besides the paper's PAC and G-PAC/C-PAC columns
    there is one per score for the group method with the valid recipe of ``valid_bound`` (or
    the first valid bound present).

    Parameters
    ----------
    side : pandas.DataFrame
        Output of :func:`side_by_side`.
    valid_bound : str, optional
        The valid bound shown.
    rows : sequence of (str, str)
        (summary column, label) pairs, e.g. add ``("Routed_share", "Routed share (%)")``.

    Returns
    -------
    pandas.DataFrame
    """
    out = []
    paper = side[side.setting == "paper"]
    valid = side[side.setting == "valid"]
    if valid_bound is None and not valid.empty:
        valid_bound = str(valid["bound"].iloc[0])
    valid = valid[valid.bound == valid_bound] if valid_bound is not None else valid
    for (dataset, grouping), df in side.groupby(["dataset", "grouping"], sort=False):
        for metric, label in rows:
            row = {
                "Dataset": TITLES.get(dataset, dataset),
                "Clustering": GROUPING_LABELS.get(grouping, grouping),
                "Metric": label,
            }
            for score in dict.fromkeys(df["score"]):
                in_cell = (paper.dataset == dataset) & (paper.grouping == grouping) & (paper.score == score)
                p = paper[in_cell]
                for method in dict.fromkeys(p["method"]):
                    r = p[p.method == method].iloc[0]
                    ref = r.get(f"paper_{metric}", np.nan) if metric in PAPER_METRICS else np.nan
                    row[f"{SCORE_LABELS.get(score, score)} {method}"] = _cell(r[metric], ref)
                v = valid[(valid.dataset == dataset) & (valid.grouping == grouping) & (valid.score == score)]
                if not v.empty:
                    r = v.iloc[0]
                    row[f"{SCORE_LABELS.get(score, score)} {r['method']} valid"] = _cell(r[metric], np.nan)
            out.append(row)
    return pd.DataFrame(out).fillna("")


def save_tables(
    summary: pd.DataFrame,
    name: str | None,
    valid_bound: str | None,
    file_name: str | None = None,
    layout_suffix: str = "_paper_layout",
    rows: Sequence[tuple[str, str]] = LAYOUT_ROWS,
    paper_columns: bool | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write the long table ``<file>.csv|.md`` and the layout ``<file><suffix>.csv|.md``.

    Parameters
    ----------
    summary : pandas.DataFrame
        Output of :func:`~gpac_utils.paper.results_tables.summarize_results`.
    name : str or None
        The paper table (``None`` for tables with no paper numbers).
    valid_bound : str or None
        The valid bound shown in the layout.
    file_name : str, optional
        File stem (default: ``name``).
    layout_suffix : str, default "_paper_layout"
        Suffix of the layout's file stem.
    rows : sequence of (str, str)
        Rows of the layout.
    paper_columns : bool, optional
        Keep the ``… paper (%)`` columns in the long table (default: only with a paper table).

    Returns
    -------
    side : pandas.DataFrame
        :func:`side_by_side`.
    layout : pandas.DataFrame
        :func:`paper_layout`.
    """
    file_name = file_name or name
    if file_name is None:
        raise ValueError("file_name: give a file name for a table without paper numbers")
    side = side_by_side(summary, name)
    paper_columns = name is not None if paper_columns is None else paper_columns
    plotting.save_table(report_table(side, paper_columns), file_name)
    layout = paper_layout(side, valid_bound, rows=rows)
    plotting.save_table(layout, f"{file_name}{layout_suffix}")
    return side, layout
