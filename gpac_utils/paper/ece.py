"""fig:expected_error_uncertainty: how calibrated the uncertainty scores are.

Confidence is ``1 - U``, the outcome the non-thinking model's correctness; ECE and reliability
curves use equal-width bins (:func:`gpac_utils.metrics.expected_calibration_error`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .. import data as D
from ..metrics import expected_calibration_error, reliability_curve
from .reference import SCORE_LABELS, TITLES


def _confidence(df: pd.DataFrame, dataset: str, score: str) -> tuple[np.ndarray, np.ndarray]:
    if D.NOTHINK_CORRECT not in df.columns:
        raise ValueError(f"{dataset}: ECE needs column {D.NOTHINK_CORRECT!r}")
    if score not in df.columns:
        raise ValueError(f"scores: {dataset} has no column {score!r}")
    return 1.0 - df[score].to_numpy(float), df[D.NOTHINK_CORRECT].to_numpy(float)


def ece_table(tables: Mapping[str, pd.DataFrame], scores: Sequence[str], n_bins: int = 10) -> pd.DataFrame:
    """ECE (%) of the confidence ``1 - U`` against ``nothink_correct``, per benchmark and score.

    Parameters
    ----------
    tables : Mapping[str, pandas.DataFrame]
        One table per benchmark.
    scores : sequence of str
        Score columns.
    n_bins : int, default 10
        Equal-width bins.

    Returns
    -------
    pandas.DataFrame
        Columns ``dataset, score, n, ECE, mean_confidence, accuracy`` (percent).
    """
    rows = []
    for b, df in tables.items():
        for s in scores:
            conf, correct = _confidence(df, b, s)
            rows.append(
                {
                    "dataset": b,
                    "score": s,
                    "n": len(df),
                    "ECE": 100 * expected_calibration_error(conf, correct, n_bins),
                    "mean_confidence": 100 * conf.mean(),
                    "accuracy": 100 * df[D.NOTHINK_CORRECT].mean(),
                }
            )
    return pd.DataFrame(rows)


def plot_reliability_grid(tables: Mapping[str, pd.DataFrame], scores: Sequence[str], n_bins: int = 10):
    """One reliability diagram per (benchmark, score), the ECE in each title.

    Bars: accuracy of the non-thinking model per confidence bin; hatched: the gap to the bin's
    mean confidence; dashed: perfect calibration.

    Parameters
    ----------
    tables, scores, n_bins
        As for :func:`ece_table`.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig, axes = plt.subplots(len(tables), len(scores), figsize=(3.4 * len(scores), 3.2 * len(tables)), squeeze=False)
    for i, (b, df) in enumerate(tables.items()):
        for j, s in enumerate(scores):
            ax = axes[i, j]
            conf, correct = _confidence(df, b, s)
            curve = reliability_curve(conf, correct, n_bins)
            ece = expected_calibration_error(conf, correct, n_bins)
            width = 1.0 / n_bins
            c = curve[curve["n"] > 0]
            ax.bar(
                c["bin_lo"],
                c["accuracy"],
                width=width,
                align="edge",
                color="#2a9d8f",
                edgecolor="white",
                label="accuracy",
            )
            ax.bar(
                c["bin_lo"],
                (c["mean_confidence"] - c["accuracy"]).abs(),
                bottom=np.minimum(c["accuracy"], c["mean_confidence"]),
                width=width,
                align="edge",
                color="none",
                edgecolor="#e76f51",
                hatch="///",
                lw=0.8,
                label="gap to mean confidence",
            )
            ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1)
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
            ax.set_title(f"{TITLES.get(b, b)} ({SCORE_LABELS.get(s, s)}): ECE = {100 * ece:.1f}%", fontsize=8)
            ax.set_xlabel("confidence 1 - U")
            if j == 0:
                ax.set_ylabel("accuracy (non-thinking)")
            if i == 0 and j == 0:
                ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    return fig
