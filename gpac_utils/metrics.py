r"""Evaluation metrics of paper App. F (all as fractions; tables show percentages).

* ``error``: :math:`\frac1N\sum_i \ell_i \mathbf 1\{\text{routed to non-thinking}\}` on a test set;
* ``group_errors``: the same within each group, :math:`E_j`;
* ``error_gap``: :math:`\sum_j (\bar E_j - \varepsilon)_+` with :math:`\bar E_j` averaged over trials;
* ``stp``: saved token percentage, cascade form (the non-thinking answer is always generated,
  logits/verbalized scores) or router form (it is generated only when routed there);
* ``efficiency``: share of items routed to the non-thinking model;
* ``violation_rate``: share of trials whose group risk exceeds ``eps``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

STP_FORMS = ("cascade", "router")


def error(route, loss) -> float:
    """Empirical risk of the routed test set."""
    r = np.asarray(route, dtype=bool)
    l = np.asarray(loss, dtype=float)
    return float(np.mean(l * r)) if r.size else float("nan")


def group_errors(route, loss, groups) -> dict[str, float]:
    """Per-group empirical risk ``E_j``."""
    r = np.asarray(route, dtype=bool)
    l = np.asarray(loss, dtype=float)
    g = np.asarray(groups).astype(str)
    return {k: error(r[g == k], l[g == k]) for k in sorted(set(g.tolist()))}


def efficiency(route) -> float:
    """Share of items routed to the non-thinking model."""
    r = np.asarray(route, dtype=bool)
    return float(r.mean()) if r.size else float("nan")


def stp(route, think_tokens, nothink_tokens, form: str = "cascade") -> float:
    """Saved token percentage (App. F) as a fraction; negative when routing costs more."""
    if form not in STP_FORMS:
        raise ValueError(f"unknown STP form {form!r}; choose one of {STP_FORMS}")
    r = np.asarray(route, dtype=bool)
    lt = np.asarray(think_tokens, dtype=float)
    ln = np.asarray(nothink_tokens, dtype=float)
    bad = ~(lt > 0)
    if bad.any():
        raise ValueError(f"think_tokens must be > 0 for STP; bad at rows {np.flatnonzero(bad)[:5].tolist()}")
    if form == "cascade":
        cost = ln + (~r) * lt
    else:
        cost = r * ln + (~r) * lt
    return float(np.mean(1.0 - cost / lt))


def error_gap(mean_group_errors: Mapping[str, float], eps: float) -> float:
    """``sum_j (Ebar_j - eps)_+`` over groups (the paper's Error_Gap)."""
    v = np.asarray(list(mean_group_errors.values()), dtype=float)
    return float(np.sum(np.clip(v - eps, 0.0, None)))


def violation_rate(group_risks, eps: float) -> np.ndarray:
    """Share of trials whose risk exceeds ``eps`` (per column for a (T, k) array)."""
    r = np.asarray(group_risks, dtype=float)
    return np.mean(r > eps, axis=0)


def mcse(rate, trials: int):
    """Monte Carlo standard error of a proportion estimated from ``trials`` repetitions."""
    rate = np.asarray(rate, dtype=float)
    return np.sqrt(rate * (1 - rate) / trials)
