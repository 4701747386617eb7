"""Our summaries beside the paper's numbers: a long table (CSV) and the paper's layout (Markdown).

:func:`side_by_side` attaches the transcribed numbers (:mod:`gpac_utils.paper.reference`) to the
rows run with the paper's recipe; :func:`report_table` gives the saved long table its display
column names; :func:`paper_layout` arranges cells ``ours (paper)`` as the paper prints them;
and :func:`~gpac_utils.paper.results_tables.build_table` writes both.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .reference import GROUPING_LABELS, PAPER_METRICS, REPORT_COLUMNS, SCORE_LABELS, TITLES, paper_long

#: Rows of the paper layout: (summary column, label).
LAYOUT_ROWS = (
    ("Error", "Error (%)"),
    ("Error_Gap", "Error_Gap (%)"),
    ("STP", "STP (%)"),
    ("violation_max_group", "Violation (%)"),
)
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
        the paper's recipe only; NaN elsewhere).
    """
    need = {"dataset", "grouping", "score", "method", "setting", *PAPER_METRICS}
    missing = sorted(need - set(summary.columns))
    if missing:
        raise ValueError(f"summary lacks column(s) {missing}")
    if name is None:
        return summary.assign(**{f"paper_{m}": np.nan for m in PAPER_METRICS})
    wide = paper_long(name).pivot_table(index=_KEYS, columns="metric", values="paper").reset_index()
    wide = wide.rename(columns={m: f"paper_{m}" for m in PAPER_METRICS}).assign(setting="paper")
    return summary.merge(wide, on=_KEYS + ["setting"], how="left")


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
    there is one per score for the group method with the valid recipe of ``valid_bound``.

    Parameters
    ----------
    side : pandas.DataFrame
        Output of :func:`side_by_side`.
    valid_bound : str, optional
        The valid bound shown (``None``: no valid column).
    rows : sequence of (str, str)
        (summary column, label) pairs, e.g. add ``("routed_share", "Routed share (%)")``.

    Returns
    -------
    pandas.DataFrame
    """
    shown = side[(side.setting == "paper") | ((side.setting == "valid") & (side.bound == valid_bound))]
    out = []
    for (dataset, grouping), df in shown.groupby(["dataset", "grouping"], sort=False):
        for metric, label in rows:
            row = {
                "Dataset": TITLES.get(dataset, dataset),
                "Clustering": GROUPING_LABELS.get(grouping, grouping),
                "Metric": label,
            }
            for score, cell in df.groupby("score", sort=False):
                # paper rows first (PAC, then the group method), then the valid one; no paper number beside it
                for (setting, method), r in cell.groupby(["setting", "method"], sort=False):
                    first = r.iloc[0]
                    column = f"{SCORE_LABELS.get(score, score)} {method}" + (" valid" if setting == "valid" else "")
                    row[column] = _cell(first[metric], first.get(f"paper_{metric}", np.nan))
            out.append(row)
    return pd.DataFrame(out).fillna("")
