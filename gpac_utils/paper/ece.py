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


# --------------------------------------------------------------------------- per-item tables (02_scores)
def embedded_tables(folder=None) -> list:
    """The embedded per-item tables (``data/simulated/<benchmark>__<pair>.parquet``), sorted."""
    from pathlib import Path

    from ..workflow.paths import SIMULATED

    return sorted(Path(folder or SIMULATED).glob("*__*.parquet"))


def summarize_table(df: pd.DataFrame, name: str, n_bins: int = 10) -> dict:
    """One summary row: size, groups, accuracies, loss, tokens, and ECE of each score."""
    row = {
        "table": name,
        "n": len(df),
        "groups": df[D.GROUP].nunique() if D.GROUP in df.columns else 0,
        "mean_loss": float(df[D.LOSS].mean()),
        "max_loss": float(df[D.LOSS].max()),
    }
    for col in D.CORRECTNESS:
        row[f"acc_{col.split('_')[0]}"] = float(df[col].mean()) if col in df.columns else np.nan
    for col in D.TOKENS:
        row[f"mean_{col}"] = float(df[col].mean()) if col in df.columns else np.nan
    for col in D.score_columns(df):
        row[f"ece_{col[len(D.SCORE_PREFIX) :]}"] = (
            expected_calibration_error(1 - df[col].to_numpy(float), df[D.NOTHINK_CORRECT], n_bins)
            if D.NOTHINK_CORRECT in df.columns
            else np.nan
        )
    return row


def plot_score_panels(df: pd.DataFrame, title: str, n_bins: int = 10):
    """Top row: histogram of each score per group; bottom row: reliability diagram of ``1 - U``
    against non-thinking correctness (when the table has it), with its ECE."""
    cols = D.score_columns(df)
    has_correct = D.NOTHINK_CORRECT in df.columns
    nrows = 2 if has_correct else 1
    fig, axes = plt.subplots(nrows, len(cols), figsize=(4 * len(cols), 3.3 * nrows), squeeze=False)
    groups = sorted(df[D.GROUP].unique()) if D.GROUP in df.columns else [None]
    edges = np.linspace(0, 1, 21)
    for j, col in enumerate(cols):
        ax = axes[0, j]
        for g in groups:
            v = df[col] if g is None else df.loc[df[D.GROUP] == g, col]
            ax.hist(v, bins=edges, histtype="step", density=True, linewidth=1.3, label=g or "all")
        ax.set(title=col, xlabel="U (uncertainty)", ylabel="density" if j == 0 else None)
        if has_correct:
            conf = 1 - df[col].to_numpy(float)
            curve = reliability_curve(conf, df[D.NOTHINK_CORRECT], n_bins)
            ece = expected_calibration_error(conf, df[D.NOTHINK_CORRECT], n_bins)
            ax2 = axes[1, j]
            filled = curve["n"] > 0
            ax2.bar(
                curve["bin_lo"][filled],
                curve["accuracy"][filled],
                width=1 / n_bins,
                align="edge",
                edgecolor="black",
                alpha=0.7,
                label="accuracy",
            )
            ax2.plot([0, 1], [0, 1], "k--", linewidth=1, label="calibrated")
            ax2.set(
                xlim=(0, 1),
                ylim=(0, 1),
                xlabel="confidence 1 - U",
                title=f"ECE = {ece:.3f}",
                ylabel="non-thinking accuracy" if j == 0 else None,
            )
    axes[0, -1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(title)
    fig.tight_layout()
    return fig
