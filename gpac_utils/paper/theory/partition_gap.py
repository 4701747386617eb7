r"""Learned partitions of the U axis (notebook 11): the partition gap and Theorem 3.4.

:func:`partition_gap` takes a confusion matrix ``C[i, j] = P(g_hat = i, g_star = j)`` and returns
:math:`\delta = \min_\sigma P(\hat g \ne \sigma(g^*))` (an assignment problem, Eq. partition-gap);
:func:`interval_confusion` builds ``C`` for two partitions of the ``U`` axis given by boundaries.
:func:`gap_summary` and :func:`coverage_summary` summarize notebook 11's runs: δ and the
routed-share loss of learned partitions, the per-learned-group violation rate of C-PAC.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from scipy import optimize

from ...metrics import mcse
from .populations import Population, sup_feasible


def interval_edges(boundaries) -> np.ndarray:
    """``[-inf, b_1, ..., b_{k-1}, +inf]`` for a partition ``b_{j-1} < U <= b_j`` (batch dims lead)."""
    b = np.asarray(boundaries, dtype=float)
    b = b[None] if b.ndim == 0 else b
    if np.any(np.diff(b, axis=-1) < 0):
        raise ValueError(f"partition boundaries must be ascending, got {b}")
    pad = np.ones(b.shape[:-1] + (1,))
    return np.concatenate([-np.inf * pad, b, np.inf * pad], axis=-1)


def _clipped(boundaries):
    """The intervals ``(lo_j, hi_j]`` of a partition, clipped to the score range [0, 1]."""
    e = interval_edges(boundaries)
    return np.maximum(e[..., :-1], 0.0), np.minimum(e[..., 1:], 1.0)


def interval_confusion(pop: Population, learned_boundaries, oracle_boundaries) -> np.ndarray:
    """``C[i, j] = P(learned group i, oracle group j)`` for two interval partitions (square, zero-padded)."""
    e1, e2 = interval_edges(learned_boundaries), interval_edges(oracle_boundaries)
    k = max(len(e1), len(e2)) - 1
    C = np.zeros((k, k))
    lo = np.maximum.outer(e1[:-1], e2[:-1])  # the overlap of learned group i and oracle group j
    hi = np.minimum.outer(e1[1:], e2[1:])
    C[: len(e1) - 1, : len(e2) - 1] = np.where(hi > lo, pop.mass(lo, hi), 0.0)
    return C


def partition_gap(confusion) -> float:
    r""":math:`\delta = \min_{\sigma \in S_k} P(\hat g \ne \sigma(g^*)) = 1 - \max_\sigma \sum_i C[i, \sigma(i)]`."""
    C = np.asarray(confusion, dtype=float)
    if C.ndim != 2 or C.shape[0] != C.shape[1]:
        raise ValueError(f"confusion must be a square matrix, got shape {C.shape}")
    rows, cols = optimize.linear_sum_assignment(C, maximize=True)
    return float(C.sum() - C[rows, cols].sum())


def partition_gap_from_labels(learned, oracle, k: int | None = None) -> float:
    """δ estimated from per-item labels (integers in ``[0, k)``), each item weighted equally."""
    learned = np.asarray(learned, dtype=int)
    oracle = np.asarray(oracle, dtype=int)
    if learned.shape != oracle.shape:
        raise ValueError(f"label arrays differ in shape: {learned.shape} vs {oracle.shape}")
    k = int(max(learned.max(), oracle.max()) + 1) if k is None else int(k)
    C = np.zeros((k, k))
    np.add.at(C, (learned, oracle), 1.0 / learned.size)
    return partition_gap(C)


def interval_thresholds(pop: Population, boundaries, eps) -> np.ndarray:
    """PAC-optimal threshold of every interval group ``b_{j-1} < U <= b_j`` (``+inf``: route all).

    ``boundaries`` of shape ``(..., k - 1)`` give thresholds of shape ``(..., k)``: many partitions
    at once. An empty group routes nothing and risks nothing (``+inf``).
    """
    lo, hi = _clipped(boundaries)
    empty = (hi <= lo) | (pop.mass(lo, hi) <= 0)
    u = sup_feasible(lambda u: pop.interval_risk(u, lo, hi), eps, lo=lo, hi=hi)
    return np.where(empty, np.inf, u)


def interval_partition_routed_share(pop: Population, boundaries, eps, thresholds=None):
    """``sum_j P(b_{j-1} < U <= min(u_j, b_j))`` with ``u_j`` PAC-optimal unless ``thresholds`` given.

    Vectorised over leading dimensions of ``boundaries`` (one routed share per partition).
    """
    lo, hi = _clipped(boundaries)
    u = interval_thresholds(pop, boundaries, eps) if thresholds is None else np.asarray(thresholds, float)
    top = np.minimum(np.maximum(u, lo), hi)
    routed = np.where(top > lo, pop.mass(lo, top), 0.0)
    total = 0.0
    for j in range(routed.shape[-1]):  # group by group, left to right
        total = total + routed[..., j]
    return total if np.ndim(total) else float(total)


def interval_group_risks(pop: Population, boundaries, thresholds) -> np.ndarray:
    r""":math:`R(u_j \mid \hat G_j)` of every interval group at the given thresholds (one partition)."""
    out = []
    for lo, hi, t in zip(*_clipped(boundaries), np.asarray(thresholds, dtype=float)):
        out.append(float(pop.interval_risk(t, lo, hi)) if hi > lo else 0.0)
    return np.array(out)


def fit_power_law(n, delta):
    """Least-squares fit of ``delta = C n^{-beta}`` on the log scale: returns ``(C, beta)``.

    The closed form of the two-parameter regression with correctly rounded sums (:func:`math.fsum`), so the
    fitted numbers do not depend on the BLAS (``np.polyfit`` solves it by an SVD whose last digits do).
    """
    n = np.asarray(n, dtype=float)
    d = np.asarray(delta, dtype=float)
    ok = d > 0
    if ok.sum() < 2:
        raise ValueError("need at least two positive gaps to fit a rate")
    x = [math.log(v) for v in n[ok].tolist()]
    y = [math.log(v) for v in d[ok].tolist()]
    mx, my = math.fsum(x) / len(x), math.fsum(y) / len(y)
    sxx = math.fsum((a - mx) * (a - mx) for a in x)
    if sxx == 0:
        raise ValueError("need at least two distinct sample sizes to fit a rate")
    slope = math.fsum((a - mx) * (b - my) for a, b in zip(x, y)) / sxx
    return float(math.exp(my - slope * mx)), float(-slope)


def gap_summary(gap: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, tuple[float, float]]]:
    """Mean δ per (algorithm, n) with the fitted rate ``δ ≈ C n^-β`` and the share within ``2δ``.

    Parameters
    ----------
    gap : pandas.DataFrame
        Rows ``n, algorithm, delta, routed_share_loss, bound_2delta`` (one per learned partition).

    Returns
    -------
    summary : pandas.DataFrame
        Per (algorithm, n): ``delta_mean, delta_se, routed_share_loss_mean, routed_share_loss_max,
        share_within_2delta, fitted_C, fitted_beta``.
    rates : dict of str to (float, float)
        ``(C, beta)`` per algorithm.
    """
    agg = (
        gap.groupby(["algorithm", "n"])
        .agg(
            delta_mean=("delta", "mean"),
            delta_se=("delta", "sem"),
            routed_share_loss_mean=("routed_share_loss", "mean"),
            routed_share_loss_max=("routed_share_loss", "max"),
        )
        .reset_index()
    )
    agg["share_within_2delta"] = [
        float((g["routed_share_loss"] <= g["bound_2delta"] + 1e-12).mean()) for _, g in gap.groupby(["algorithm", "n"])
    ]
    rates = {m: fit_power_law(a["n"], a["delta_mean"]) for m, a in agg.groupby("algorithm")}
    agg["fitted_C"] = agg["algorithm"].map(lambda m: rates[m][0])
    agg["fitted_beta"] = agg["algorithm"].map(lambda m: rates[m][1])
    return agg, rates


def coverage_summary(cov: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """Violation rate per (mode, n, learned group), with an MCSE floored at ``alpha``.

    Parameters
    ----------
    cov : pandas.DataFrame
        Rows ``mode, n, group, violated, delta, risk`` (one per calibration and learned group).
    alpha : float
        Nominal miscoverage (the MCSE uses ``max(rate, alpha)``).

    Returns
    -------
    pandas.DataFrame
    """
    out = (
        cov.groupby(["mode", "n", "group"])
        .agg(
            violation_rate=("violated", "mean"),
            calibrations=("violated", "size"),
            mean_delta=("delta", "mean"),
            mean_risk=("risk", "mean"),
        )
        .reset_index()
    )
    out["mcse"] = mcse(out["violation_rate"].clip(lower=alpha), out["calibrations"])
    return out


def best_interval_partition(pop: Population, eps: float, grid: int = 40, k: int = 3):
    """Best ``k``-interval partition of [0, 1] on a grid of boundaries, by population routed share.

    Parameters
    ----------
    pop : Population
        The population.
    eps : float
        Target risk.
    grid : int, default 40
        Boundaries are searched on ``j / grid``.
    k : int, default 3
        Number of intervals.

    Returns
    -------
    boundaries : tuple of float
    routed_share : float
    """
    pts = np.linspace(0, 1, int(grid) + 1)[1:-1]
    combos = np.array(list(itertools.combinations(pts, k - 1)))
    share = interval_partition_routed_share(pop, combos, eps)
    best = int(np.argmax(share))  # the first of equals, in the order of the grid
    return tuple(combos[best]), float(share[best])
