r"""Label planning, step 2: spend a label budget on the groups, from the predicted curves.

:func:`allocate` chooses ``n_j`` on the grid of :class:`~gpac_utils.prediction.PlanCurves` to
maximise the expected routed share of all traffic, ``sum_j p_j E[share_j(n_j)]``, subject to
``sum_j n_j <= L``. The objective is separable, so a dynamic programme over the budget is **exact
on the grid**, whatever the curves' shape. A greedy on marginal gains would only be right for
concave curves, which they usually are not: with a valid bound nothing certifies until ``n``
reaches a group-dependent minimum, so each curve starts with a step
(:attr:`~gpac_utils.prediction.PlanCurves.concave`). Notebook 32 shows greedy falling short, and
compares the plan with the baselines (equal labels per group, the paper's ``pi = 0.5``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .checks import ParameterError, check_budget
from .prediction import PlanCurves

__all__ = ["Allocation", "allocate", "allocation_table", "uniform_counts", "fixed", "gain", "NEGLIGIBLE"]

#: A gain over the uniform split below this share of all traffic (or below two Monte Carlo errors) is negligible.
NEGLIGIBLE = 0.01


@dataclass
class Allocation:
    """Labels per group and the predicted routed share they buy.

    Attributes
    ----------
    name : str
        ``planned`` (the exact DP) or the name of another allocation.
    n : dict of str to int
        Labels per group (expected labels for Bernoulli sampling).
    routed_share : dict of str to float
        Predicted expected routed share of each group's traffic.
    total : float
        Predicted expected routed share of all traffic, ``sum_j p_j share_j``.
    """

    name: str
    n: dict
    routed_share: dict
    total: float

    @property
    def labels(self) -> int:
        """Total labels."""
        return int(sum(self.n.values()))


def _options(curves: PlanCurves, j: int):
    """(labels, expected weighted share) options of group ``j``, ``n = 0`` first."""
    mean = curves.mean[j]
    ok = np.isfinite(mean)
    n = np.concatenate([[0], curves.n_grid[ok]]).astype(int)
    v = np.concatenate([[0.0], curves.traffic[j] * mean[ok]])
    return n, v


def _dp(opts, budget: int):
    """Exact max of ``sum_j v_j[k_j]`` s.t. ``sum_j n_j[k_j] <= budget`` (multiple-choice knapsack)."""
    all_n = np.concatenate([o[0] for o in opts] + [[budget]])
    unit = int(np.gcd.reduce(all_n[all_n > 0])) if np.any(all_n > 0) else 1
    n_units = budget // unit
    V = np.zeros(n_units + 1)
    choice = np.zeros((len(opts), n_units + 1), dtype=int)
    for j, (n, v) in enumerate(opts):
        best = np.full(n_units + 1, -np.inf)
        arg = np.zeros(n_units + 1, dtype=int)
        for k, (c, val) in enumerate(zip(n // unit, v)):
            if c > n_units:
                continue
            cand = np.full(n_units + 1, -np.inf)
            cand[c:] = V[: n_units + 1 - c] + val
            better = cand > best + 1e-15
            best = np.where(better, cand, best)
            arg = np.where(better, k, arg)
        V, choice[j] = best, arg
    picks, b = [], n_units
    for j in range(len(opts) - 1, -1, -1):
        k = choice[j, b]
        picks.append(k)
        b -= opts[j][0][k] // unit
    return picks[::-1], float(V[n_units])


def _allocation(curves, opts, levels, name) -> Allocation:
    """The allocation that takes option ``levels[j]`` of each group ``j``."""
    n, share = {}, {}
    for j, (g, k) in enumerate(zip(curves.groups, levels)):
        n[g] = int(opts[j][0][k])
        share[g] = float(opts[j][1][k] / curves.traffic[j]) if curves.traffic[j] > 0 else 0.0
    return Allocation(name, n, share, float(sum(opts[j][1][k] for j, k in enumerate(levels))))


def allocate(curves: PlanCurves, budget) -> Allocation:
    """Choose labels per group on the grid to maximise the expected routed share of all traffic.

    Parameters
    ----------
    curves : PlanCurves
        From :func:`~gpac_utils.prediction.predict`.
    budget : int
        Total labels ``L``; the allocation satisfies ``sum_j n_j <= L``. A budget above the most
        the grid can spend (each group's largest label count) gives the plan of that most.

    Returns
    -------
    Allocation
        Named ``planned``: the optimum on the grid of a dynamic programme over the budget (the
        objective is separable, so this is exact whatever the curves' shape).

    Examples
    --------
    >>> import numpy as np
    >>> c = PlanCurves(["a", "b"], np.array([10, 20]), np.array([[[0.1] * 4, [0.5] * 4], [[0.3] * 4, [0.35] * 4]]),
    ...                np.array([0.5, 0.5]), np.array([np.inf, np.inf]), np.array([[10, 20], [10, 20]]),
    ...                {"a": 0, "b": 0}, {"a": "bootstrap", "b": "bootstrap"})
    >>> allocate(c, 30).n
    {'a': 20, 'b': 10}
    """
    if not isinstance(curves, PlanCurves):
        raise ParameterError(f"curves: must be the PlanCurves of prediction.predict, got {type(curves).__name__}")
    budget = check_budget(budget)
    opts = [_options(curves, j) for j in range(len(curves.groups))]
    # A budget above what the grid can spend buys nothing more: the DP runs to that amount (same plan;
    # its memory grows with the budget, so 1e12 labels would not fit).
    most = sum(int(n.max()) for n, _ in opts)
    levels, _ = _dp(opts, min(budget, most))
    return _allocation(curves, opts, levels, "planned")


def uniform_counts(caps, budget: int) -> dict:
    """The budget split evenly over the groups, each capped at its ``caps`` value; what a cap leaves is re-spread.

    Examples
    --------
    >>> uniform_counts({"a": 10, "b": 100, "c": 100}, 90)
    {'a': 10, 'b': 40, 'c': 40}
    """
    budget = check_budget(budget)
    n = dict.fromkeys(caps, 0)
    left, open_ = budget, [x for x in caps if caps[x] > 0]
    while left > 0 and open_:
        share = max(1, left // len(open_))
        for x in list(open_):
            add = int(min(share, caps[x] - n[x], left))
            n[x], left = n[x] + add, left - add
            if n[x] >= caps[x]:
                open_.remove(x)
            if left == 0:
                break
    return n


def fixed(curves: PlanCurves, n: dict, name: str) -> Allocation:
    """The allocation of the given label counts (each on the curves' grid, or 0), e.g. :func:`uniform_counts`."""
    opts, levels = [_options(curves, j) for j in range(len(curves.groups))], []
    for (opts_n, _), g in zip(opts, curves.groups):
        k = np.flatnonzero(opts_n == int(n[g]))
        if not k.size:
            raise ParameterError(f"n: {n[g]} labels for group {g!r} is not on the plan's grid; add it to n_grid")
        levels.append(int(k[0]))
    return _allocation(curves, opts, levels, name)


def gain(curves: PlanCurves, a: Allocation, b: Allocation) -> tuple[float, float]:
    """Predicted gain of ``a`` over ``b`` in routed share of all traffic, and its Monte Carlo standard error
    (over the resamples; a gain below :data:`NEGLIGIBLE` or two standard errors is negligible)."""

    def totals(alloc):
        out = np.zeros(curves.routed_shares.shape[-1])
        for j, g in enumerate(curves.groups):
            k = np.flatnonzero(curves.n_grid == alloc.n[g])
            if k.size:
                out += curves.traffic[j] * curves.routed_shares[j, k[0]]
        return out

    d = totals(a) - totals(b)
    return float(a.total - b.total), float(d.std(ddof=1) / np.sqrt(d.size))


def allocation_table(curves: PlanCurves, allocations) -> pd.DataFrame:
    """One row per allocation and group (plus ``ALL``): labels, predicted mean, 10–90 % band, P(certify).

    Parameters
    ----------
    curves : PlanCurves
        The curves the allocations were chosen on.
    allocations : sequence of Allocation
        E.g. the planned allocation of one budget and baselines on the same grid.

    Returns
    -------
    pandas.DataFrame
        Columns ``allocation, group, traffic, n_labels, routed_share_mean, routed_share_q10,
        routed_share_q90, p_certify``; the ``ALL`` row has the total labels and the traffic-weighted mean.
    """
    lo, hi = curves.band()
    stats = {"routed_share_mean": curves.mean, "routed_share_q10": lo, "routed_share_q90": hi}
    stats["p_certify"] = curves.p_certify
    rows = []
    for a in allocations:
        for j, g in enumerate(curves.groups):
            k = np.flatnonzero(curves.n_grid == a.n[g])  # none for no labels: always think, all zero
            row = {name: v[j, k[0]] if k.size else 0.0 for name, v in stats.items()}
            rows.append({"allocation": a.name, "group": g, "traffic": curves.traffic[j], "n_labels": a.n[g], **row})
        total = {"n_labels": a.labels, "routed_share_mean": a.total}
        rows.append({"allocation": a.name, "group": "ALL", "traffic": 1.0, **total})
    return pd.DataFrame(rows)
