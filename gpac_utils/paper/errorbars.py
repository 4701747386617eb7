"""fig:errorbar_category: the test error per group, PAC against the group method.

:func:`category_errors` aggregates the trials of a results table; :func:`plot_category_errorbars`
draws one panel per (benchmark, score) with eps as a red dashed line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..calibrate import ALL
from .reference import SCORE_LABELS, TITLES


def category_errors(results: pd.DataFrame, setting: str = "paper") -> pd.DataFrame:
    """Mean and standard deviation over trials of the test error per group (fractions).

    Parameters
    ----------
    results : pandas.DataFrame
        Rows of :func:`~gpac_utils.paper.results_tables.run_results`.
    setting : {"paper", "valid"}
        Which recipe's rows.

    Returns
    -------
    pandas.DataFrame
        Columns ``dataset, grouping, score, method, group, mean, std, count``; the whole test set
        is the group ``"Overall"``.
    """
    r = results[results.setting == setting]
    g = r.groupby(["dataset", "grouping", "score", "method", "group"], sort=False)["error"]
    out = g.agg(["mean", "std", "count"]).reset_index()
    out["group"] = out["group"].replace({ALL: "Overall"})
    return out


def plot_category_errorbars(
    cat: pd.DataFrame,
    eps: Mapping[str, float],
    *,
    colors: Mapping[str, str],
    scores: Sequence[str] | None = None,
    title: str = "",
):
    """One panel per (benchmark, score): bars per group and method (mean test error ± 1 sd).

    Parameters
    ----------
    cat : pandas.DataFrame
        Output of :func:`category_errors`.
    eps : Mapping[str, float]
        eps per dataset (the red dashed line).
    colors : Mapping[str, str]
        Colour per method.
    scores : sequence of str, optional
        Score columns (default: those in ``cat``).
    title : str
        Figure title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    datasets = list(dict.fromkeys(cat["dataset"]))
    scores = list(scores) if scores is not None else list(dict.fromkeys(cat["score"]))
    fig, axes = plt.subplots(
        len(datasets), len(scores), figsize=(4.6 * len(scores), 3.1 * len(datasets)), squeeze=False
    )
    for i, b in enumerate(datasets):
        for j, s in enumerate(scores):
            ax = axes[i, j]
            sub = cat[(cat.dataset == b) & (cat.score == s)]
            groups = ["Overall"] + sorted(g for g in dict.fromkeys(sub["group"]) if g != "Overall")
            methods = list(dict.fromkeys(sub["method"]))
            width = 0.8 / max(1, len(methods))
            x = np.arange(len(groups))
            for mi, m in enumerate(methods):
                mm = sub[sub.method == m].set_index("group").reindex(groups)
                sd = mm["std"].fillna(0).to_numpy()
                lower = np.minimum(sd, mm["mean"].to_numpy())  # errors cannot go below 0
                left = x + (mi - (len(methods) - 1) / 2) * width
                yerr = 100 * np.vstack([lower, sd])
                style = {"capsize": 2, "color": colors.get(m), "label": m, "error_kw": {"elinewidth": 0.8}}
                ax.bar(left, 100 * mm["mean"], width, yerr=yerr, **style)
            ax.axhline(100 * eps[b], color="red", ls="--", lw=1.2, label=r"$\varepsilon$")
            # a long group name is cut to 12 characters, with a final dot
            ax.set_xticks(x, [g if len(g) <= 12 else g[:11] + "." for g in groups], rotation=35, ha="right", fontsize=7)
            ax.set_title(f"{TITLES.get(b, b)} — {SCORE_LABELS.get(s, s)}", fontsize=9)
            if j == 0:
                ax.set_ylabel("test error (%)")
            if i == 0 and j == 0:
                ax.legend(fontsize=7, loc="upper left")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
