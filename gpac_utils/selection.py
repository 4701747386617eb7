r"""Threshold selection from a curve of upper confidence bounds.

``first-crossing`` (default)
    scan candidates from the most conservative (smallest) upward and stop *before* the first
    ``u`` whose UCB exceeds ``eps``. Valid for any pointwise-valid UCB: R(u) is non-decreasing,
    so if the chosen threshold had risk above ``eps``, the bound failed at the fixed point
    ``u* = inf{u : R(u) > eps}`` (Bates et al. 2021, Angelopoulos et al. 2021).
``max``
    the paper's literal ``max{u : UCB(u) <= eps}`` (Eq. u^hat_j); it may jump past a crossing
    where the bound dips back below ``eps``, so it is kept for reproduction only.

No feasible candidate gives the threshold ``-inf`` (always think), as in the proof of Thm 3.1.
Candidates are distinct calibration scores by default, or a grid of score quantiles.
"""

from __future__ import annotations

import numpy as np

RULES = ("first-crossing", "max")


def candidate_grid(scores, candidates="all") -> np.ndarray:
    """Ascending candidate thresholds: every distinct score (``"all"``) or ``G`` score quantiles.

    The quantile grid uses observed scores (``inverted_cdf``), so every candidate is a score.
    """
    s = np.asarray(scores, dtype=float).ravel()
    if s.size == 0:
        raise ValueError("no scores to build candidate thresholds from")
    if isinstance(candidates, str):
        if candidates != "all":
            raise ValueError(f"candidates must be 'all' or a positive int, got {candidates!r}")
        return np.unique(s)
    size = int(candidates)
    if size < 1:
        raise ValueError(f"candidate grid size must be >= 1, got {candidates}")
    return np.unique(np.quantile(s, np.linspace(0, 1, size), method="inverted_cdf"))


def select(candidates, ucb, eps: float, rule: str = "first-crossing") -> np.ndarray:
    """Pick the threshold from ``candidates`` (..., K) given their ``ucb`` (..., K)."""
    if rule not in RULES:
        raise ValueError(f"unknown selection rule {rule!r}; choose one of {RULES}")
    cand = np.asarray(candidates, dtype=float)
    ucb = np.asarray(ucb, dtype=float)
    cand = np.broadcast_to(cand, ucb.shape)
    feasible = ucb <= eps
    K = ucb.shape[-1]
    if rule == "first-crossing":
        infeasible = ~feasible
        first_bad = np.where(infeasible.any(axis=-1), infeasible.argmax(axis=-1), K)
        pick = first_bad - 1
    else:
        last_ok = K - 1 - feasible[..., ::-1].argmax(axis=-1)
        pick = np.where(feasible.any(axis=-1), last_ok, -1)
    safe = np.clip(pick, 0, K - 1)
    chosen = np.take_along_axis(cand, safe[..., None], axis=-1)[..., 0]
    return np.where(pick >= 0, chosen, -np.inf)
