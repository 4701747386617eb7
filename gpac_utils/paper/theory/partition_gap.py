r"""Learned partitions of the U axis (notebook 11): the partition gap and Theorem 4.6.

:func:`partition_gap` takes a confusion matrix ``C[i, j] = P(g_hat = i, g_star = j)`` and returns
:math:`\delta = \min_\sigma P(\hat g \ne \sigma(g^*))` (an assignment problem, Eq. partition-gap);
:func:`interval_confusion` builds ``C`` for two partitions of the ``U`` axis given by boundaries;
:func:`interval_thresholds` and :func:`interval_partition_routed_share` give the PAC-optimal
thresholds and routed share of interval partitions, many at once. Notebook 11 summarizes its runs.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize

from .populations import Population, sup_feasible


def interval_edges(boundaries) -> np.ndarray:
    """``[-inf, b_1, ..., b_{k-1}, +inf]`` for a partition ``b_{j-1} < U <= b_j`` (batch dims lead)."""
    b = np.atleast_1d(np.asarray(boundaries, dtype=float))
    if np.any(np.diff(b, axis=-1) < 0):
        raise ValueError(f"partition boundaries must be ascending, got {b}")
    pad = np.ones(b.shape[:-1] + (1,))
    return np.concatenate([-np.inf * pad, b, np.inf * pad], axis=-1)


def interval_bounds(boundaries):
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


def interval_thresholds(pop: Population, boundaries, eps) -> np.ndarray:
    """PAC-optimal threshold of every interval group ``b_{j-1} < U <= b_j`` (``+inf``: route all).

    ``boundaries`` of shape ``(..., k - 1)`` give thresholds of shape ``(..., k)``: many partitions
    at once. An empty group routes nothing and risks nothing (``+inf``).
    """
    lo, hi = interval_bounds(boundaries)
    empty = (hi <= lo) | (pop.mass(lo, hi) <= 0)
    u = sup_feasible(lambda u: pop.interval_risk(u, lo, hi), eps, lo=lo, hi=hi)
    return np.where(empty, np.inf, u)


def interval_partition_routed_share(pop: Population, boundaries, eps):
    """``sum_j P(b_{j-1} < U <= min(u_j, b_j))`` with ``u_j`` the PAC-optimal thresholds.

    Vectorised over leading dimensions of ``boundaries`` (one routed share per partition).
    """
    lo, hi = interval_bounds(boundaries)
    u = interval_thresholds(pop, boundaries, eps)
    top = np.minimum(np.maximum(u, lo), hi)
    routed = np.where(top > lo, pop.mass(lo, top), 0.0)
    total = 0.0
    for j in range(routed.shape[-1]):  # group by group, left to right
        total = total + routed[..., j]
    return total if np.ndim(total) else float(total)
