"""fig:results_calibration_ratio_*: PAC against G-PAC as the calibration share varies.

:func:`run_calibration_ratio` runs the experiment at every ratio of ``cfg["ratios"]`` with the
paper's recipe (``cfg["recipe"]``, ``cfg["pi"]``); :func:`plot_calibration_ratio` draws Error,
Error_Gap and STP against the ratio, one row of panels per benchmark.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import pandas as pd

from ..experiment import ExperimentConfig, summarize
from .reference import SCORE_LABELS, TITLES
from .results_tables import paper_recipe, quiet_run

# Summary columns reported in percent.
_PERCENT_COLUMNS = (
    "Error", "Error_Gap", "STP", "routed_share", "violation_max_group", "violation_any_group", "worst_group_error",
)  # fmt: skip
#: Marker and line style per score.
SCORE_STYLES = {"score_logits": ("o", "-"), "score_verbalized": ("s", "--"), "score_router": ("^", ":")}


def run_calibration_ratio(tables: Mapping[str, pd.DataFrame], eps: Mapping[str, float], cfg: Mapping) -> pd.DataFrame:
    """PAC vs G-PAC (known groups) at every calibration ratio of ``cfg["ratios"]``.

    Parameters
    ----------
    tables : Mapping[str, pandas.DataFrame]
        One table per benchmark.
    eps : Mapping[str, float]
        eps per benchmark.
    cfg : Mapping
        ``ratios, scores, alpha, pi, trials, recipe, seed``.

    Returns
    -------
    pandas.DataFrame
        One summary row (percent) per (dataset, cal_ratio, method, score).
    """
    missing = [b for b in tables if b not in eps]
    if missing:
        raise ValueError(f"eps: no value for benchmark(s) {missing}")
    rows = []
    for b, df in tables.items():
        for ratio in cfg["ratios"]:
            exp = ExperimentConfig(
                eps=eps[b],
                alpha=cfg["alpha"],
                methods=("PAC", "G-PAC"),
                recipes=(paper_recipe(cfg),),
                scores=tuple(cfg["scores"]),
                trials=cfg["trials"],
                cal_ratio=float(ratio),
                seed=cfg["seed"],
            )
            s = summarize(quiet_run(df, exp), eps[b])
            s.insert(0, "cal_ratio", float(ratio))
            s.insert(0, "dataset", b)
            s["eps"] = eps[b]
            rows.append(s)
    out = pd.concat(rows, ignore_index=True)
    for c in _PERCENT_COLUMNS:
        out[c] = 100 * out[c]
    return out


def plot_calibration_ratio(summary: pd.DataFrame, *, colors: Mapping[str, str]):
    """Rows: benchmarks; columns: Error, Error_Gap, STP against the calibration ratio.

    Parameters
    ----------
    summary : pandas.DataFrame
        Output of :func:`run_calibration_ratio`.
    colors : Mapping[str, str]
        Colour per method (marker and line style: per score).

    Returns
    -------
    matplotlib.figure.Figure
    """
    datasets = list(dict.fromkeys(summary["dataset"]))
    fig, axes = plt.subplots(len(datasets), 3, figsize=(13, 3.2 * len(datasets)), squeeze=False)
    for i, b in enumerate(datasets):
        sub = summary[summary.dataset == b]
        for j, (metric, label) in enumerate(
            (("Error", "Error (%)"), ("Error_Gap", r"Error$_{Gap}$ (%)"), ("STP", "STP (%)"))
        ):
            ax = axes[i, j]
            for (m, s), d in sub.groupby(["method", "score"], sort=False):
                mk, ls = SCORE_STYLES.get(s, ("o", "-"))
                d = d.sort_values("cal_ratio")
                ax.plot(
                    d["cal_ratio"],
                    d[metric],
                    marker=mk,
                    ls=ls,
                    color=colors.get(m),
                    ms=4,
                    label=f"{m} / {SCORE_LABELS.get(s, s)}",
                )
            if metric == "Error":
                ax.axhline(100 * float(sub["eps"].iloc[0]), color="red", ls="--", lw=1.2, label=r"$\varepsilon$")
            ax.set_xlabel("calibration ratio")
            ax.set_ylabel(label)
            ax.set_title(f"{TITLES.get(b, b)}: {label}", fontsize=9)
            if i == 0 and j == 2:
                ax.legend(fontsize=6, ncol=2, loc="best")
    fig.tight_layout()
    return fig
