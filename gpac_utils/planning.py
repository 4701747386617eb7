r"""Label planning: how many expert labels each group needs, and how to spend a label budget.

A group-conditional guarantee needs enough *labelled* calibration items in every group: with
a valid bound, a group with too few labels certifies nothing and always thinks. Labels (a
thinking-model answer plus a grade) are the expensive part, so before calibrating G-PAC one
wants to know, per group ``j`` and per number of labels ``n_j``, the share of that group's
traffic the calibrated router will send to the cheap model.

This module predicts it from a small labelled **pilot** and the (free) unlabelled scores:

1. :func:`predict` — for each group and each ``n`` of a grid, draw ``R`` synthetic calibration
   sets of ``n`` labels from a model of the group fitted on the pilot, calibrate all ``R`` at
   once with the library's batched :func:`~gpac_utils.calibrate.threshold` (exactly as
   :class:`~gpac_utils.calibrate.GPAC` does), and read each threshold's routed share off the
   group's unlabelled scores. The result, :class:`PlanCurves`, holds the distribution of the
   routed share (mean, 10–90 % band) and ``P(certify anything)`` per group and ``n``.
2. :func:`allocate` — choose ``n_j`` on the grid to maximise the expected routed share of all
   traffic, ``sum_j p_j E[share_j(n_j)]``, subject to ``sum_j n_j <= L``. The objective is
   separable, so a dynamic programme over the budget is **exact on the grid**; a greedy on
   marginal gains is offered for comparison and is only right when the curves are concave,
   which they usually are not: with a valid bound nothing certifies until ``n`` reaches a
   group-dependent minimum, so each curve starts with a step (:attr:`PlanCurves.concave`).
3. :func:`plan` — both, plus the two baselines: the **uniform** allocation ``L / k`` labels per
   group, and the paper's **pi = 0.5** (label a random half of each group's available
   calibration items, ``Bernoulli(0.5)`` sampling).

What the prediction is, honestly
--------------------------------
It is an *estimate*, not a guarantee. The pilot stands in for the unknown population:

* ``pilot_model="bootstrap"`` resamples the group's own pilot ``(score, loss)`` pairs to size ``n``.
  Resampling a pilot of ``m`` items to ``n > m`` cannot invent score–loss structure the pilot
  does not show; in particular a pilot with no loss among its lowest scores predicts that the
  low scores are loss-free.
* ``pilot_uncertainty=True`` (default) draws each resample from a **Bayesian bootstrap** of the
  pilot (Dirichlet(1, …, 1) weights on the pilot items, new weights per resample), so the band
  also reflects how little a small pilot says about the population, not only the calibration
  noise at size ``n``. With ``False`` the band is conditional on the pilot being the population
  and is too narrow for small pilots.
* ``pilot_model="smoothed"`` (used by ``"auto"`` for groups whose pilot has fewer than ``min_pilot``
  items, and always when the pilot has no group labels) draws the scores from the group's
  unlabelled scores and each loss from pilot items in the same score bin: from the group's own
  pilot items with probability ``m_gb / (m_gb + shrinkage)``, else from the pooled pilot. This
  borrows strength across groups and is biased when groups differ at equal scores; within a bin
  the loss is taken as unrelated to the score.

Labels vs items. With ``recipe.sampling == "full"`` ``n`` labels are ``n`` calibration items.
With ``"bernoulli"`` / ``"resample"`` and a rate ``pi``, ``n`` *expected* labels come from
``ceil(n / pi)`` calibration items, unless ``pool`` fixes the items available per group, in
which case the rate is ``n / pool_j`` (planning over the labelling rate ``pi_j``).

Examples
--------
>>> import numpy as np
>>> from gpac_utils import planning
>>> rng = np.random.default_rng(0)
>>> g = np.repeat(["easy", "hard"], 2000)
>>> u = rng.uniform(size=4000)
>>> loss = (rng.uniform(size=4000) < np.where(g == "easy", 0.05, 0.4) * u).astype(float)
>>> pilot = rng.choice(4000, 600, replace=False)
>>> curves = planning.predict(u, g, u[pilot], loss[pilot], g[pilot], eps=0.05, alpha=0.05,
...                           n_grid=[100, 400, 1000], resamples=50, seed=0)
>>> curves.summary().columns.tolist()[:4]
['group', 'n_labels', 'n_items', 'share_mean']
>>> alloc = planning.allocate(curves, budget=1100)
>>> int(sum(alloc.n.values())) <= 1100
True
"""

from __future__ import annotations

import argparse
import importlib.util
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .calibrate import threshold
from .checks import DataError, ParameterError
from .data import read_frame
from .recipe import VALID, Recipe, as_recipe

__all__ = [
    "PlanCurves",
    "Allocation",
    "Plan",
    "predict",
    "allocate",
    "uniform_allocation",
    "uniform_levels",
    "labels_needed",
    "plan",
    "calibrate_repeatedly",
    "routed_share",
    "default_grid",
    "add_cli",
    "cli_main",
]

PILOT_MODELS = ("auto", "bootstrap", "smoothed")
#: Quantiles of the routed share reported as the prediction band.
BAND = (0.10, 0.90)


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------


def _check_level(name: str, value: float, hi: float = 1.0) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a number in (0, {hi}), got {value!r}") from None
    if not (math.isfinite(v) and 0 < v < hi):
        raise ValueError(f"{name}: must lie in (0, {hi}), got {value}")
    return v


def _as_1d(name: str, x, lo: float | None = None, hi: float | None = None) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"{name}: must be 1-D, got shape {a.shape}")
    bad = ~np.isfinite(a)
    if lo is not None:
        bad |= a < lo
    if hi is not None:
        bad |= a > hi
    if bad.any():
        raise ValueError(
            f"{name}: values must be finite and in [{lo}, {hi}]; bad at rows {np.flatnonzero(bad)[:5].tolist()}"
        )
    return a


def _labels(name: str, g, n: int) -> np.ndarray:
    a = np.asarray(g)
    if a.shape != (n,):
        raise ValueError(f"{name}: need one label per item ({n}), got shape {a.shape}")
    if pd.isna(a).any():
        raise ValueError(f"{name}: missing labels at rows {np.flatnonzero(pd.isna(a))[:5].tolist()}")
    return a.astype(str)


def default_grid(max_labels: int, size: int = 16, min_labels: int = 10) -> np.ndarray:
    """A roughly geometric grid of label counts from ``min_labels`` to ``max_labels``.

    Parameters
    ----------
    max_labels : int
        Largest number of labels.
    size : int, default 16
        Number of grid points (fewer if rounding merges some).
    min_labels : int, default 10
        Smallest positive number of labels.

    Returns
    -------
    numpy.ndarray of int
        Sorted distinct label counts.

    Examples
    --------
    >>> default_grid(100, size=5).tolist()
    [10, 18, 32, 56, 100]
    """
    if int(max_labels) < 1:
        raise ValueError(f"max_labels: must be >= 1, got {max_labels}")
    if int(size) < 1:
        raise ValueError(f"size: must be >= 1, got {size}")
    lo = max(1, min(int(min_labels), int(max_labels)))
    return np.unique(np.round(np.geomspace(lo, int(max_labels), int(size))).astype(int))


def routed_share(thresholds, scores) -> np.ndarray:
    """Share of ``scores`` at or below each threshold (the routed share of that traffic).

    Parameters
    ----------
    thresholds : array_like, any shape
        Thresholds (``-inf``: always think).
    scores : array_like, shape (m,)
        The traffic's scores.

    Returns
    -------
    numpy.ndarray, shape of ``thresholds``

    Examples
    --------
    >>> routed_share([-np.inf, 0.5, 1.0], [0.1, 0.6, 0.9, 0.2]).tolist()
    [0.0, 0.5, 1.0]
    """
    s = np.sort(np.asarray(scores, dtype=float))
    t = np.asarray(thresholds, dtype=float)
    return np.searchsorted(s, t, side="right") / max(s.size, 1)


def _weighted_choice(weights: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Per row ``r`` of ``weights`` (R, m), ``size`` indices drawn with probabilities ``weights[r]``."""
    R, m = weights.shape
    cw = np.cumsum(weights, axis=1)
    cw /= cw[:, -1:]
    offs = np.arange(R, dtype=float)[:, None]
    flat = (cw + offs).ravel()
    u = rng.random((R, size)) + offs
    idx = np.searchsorted(flat, u.ravel(), side="right").reshape(R, size) - (np.arange(R) * m)[:, None]
    return np.clip(idx, 0, m - 1)


def _items_for(n_labels: int, recipe: Recipe, pool: int | None) -> tuple[int, float | None]:
    """Calibration items and labelling rate giving ``n_labels`` (expected) labels."""
    if recipe.sampling == "full":
        return int(n_labels), None
    if pool is not None:
        return int(pool), min(1.0, n_labels / pool)
    return int(math.ceil(n_labels / recipe.label_rate - 1e-9)), None


# --------------------------------------------------------------------------------------------
# prediction
# --------------------------------------------------------------------------------------------


@dataclass
class PlanCurves:
    """Predicted routed share per group and number of labels (output of :func:`predict`).

    Attributes
    ----------
    groups : list of str
        Group names, sorted.
    n_grid : numpy.ndarray, shape (K,)
        Label counts (``0`` is implied: no labels, nothing routed).
    shares : numpy.ndarray, shape (G, K, R)
        Routed share of the group's traffic for each resample; ``nan`` where ``n`` exceeds the
        group's ``cap``.
    traffic : numpy.ndarray, shape (G,)
        Each group's share of all traffic (from the unlabelled scores, or given).
    cap : numpy.ndarray, shape (G,)
        Most labels a group can get (``inf``: no cap).
    n_items : numpy.ndarray, shape (G, K)
        Calibration items behind ``n`` labels (differs from ``n`` for ``bernoulli`` sampling).
    pilot_sizes : dict of str to int
        Pilot items per group.
    pilot_models : dict of str to str
        The pilot model used per group (``bootstrap`` / ``smoothed``).
    settings : dict
        eps, alpha, recipe, resamples, seed, ...
    """

    groups: list
    n_grid: np.ndarray
    shares: np.ndarray
    traffic: np.ndarray
    cap: np.ndarray
    n_items: np.ndarray
    pilot_sizes: dict
    pilot_models: dict
    settings: dict = field(default_factory=dict)

    @property
    def mean(self) -> np.ndarray:
        """Expected routed share, shape (G, K) (``nan`` above the cap)."""
        ok = np.isfinite(self.shares)
        total = np.where(ok, self.shares, 0.0).sum(axis=-1)
        count = ok.sum(axis=-1)
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)

    @property
    def p_certify(self) -> np.ndarray:
        """Probability that the group certifies a threshold (routes anything), shape (G, K)."""
        p = (self.shares > 0).mean(axis=-1)
        return np.where(np.isnan(self.shares[..., 0]), np.nan, p)

    def band(self, q=BAND) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper quantiles of the routed share, each of shape (G, K)."""
        lo, hi = np.quantile(self.shares, q, axis=-1)
        return lo, hi

    @property
    def concave(self) -> dict:
        """Per group: whether the expected-share curve (with ``n = 0``) is concave on the grid.

        A valid bound certifies nothing below a minimum ``n``, so curves typically start flat
        and then jump: not concave, and greedy allocation on marginal gains can then stop short.
        """
        out = {}
        for j, g in enumerate(self.groups):
            ok = np.isfinite(self.mean[j])
            n = np.concatenate([[0], self.n_grid[ok]])
            v = np.concatenate([[0.0], self.mean[j][ok]])
            if n.size < 3:
                out[g] = True
                continue
            slope = np.diff(v) / np.diff(n)
            out[g] = bool(np.all(np.diff(slope) <= 1e-4 / max(1.0, float(np.mean(np.diff(n))))))
        return out

    def summary(self) -> pd.DataFrame:
        """Long table: one row per group and ``n`` (n_labels, n_items, mean, band, P(certify))."""
        lo, hi = self.band()
        mean, pc = self.mean, self.p_certify
        rows = []
        for j, g in enumerate(self.groups):
            for k, n in enumerate(self.n_grid):
                if not np.isfinite(mean[j, k]):
                    continue
                rows.append(
                    {
                        "group": g,
                        "n_labels": int(n),
                        "n_items": int(self.n_items[j, k]),
                        "share_mean": float(mean[j, k]),
                        "share_q10": float(lo[j, k]),
                        "share_q90": float(hi[j, k]),
                        "p_certify": float(pc[j, k]),
                        "traffic": float(self.traffic[j]),
                        "pilot_n": int(self.pilot_sizes[g]),
                        "pilot_model": self.pilot_models[g],
                    }
                )
        return pd.DataFrame(rows)


def _bin_edges(pilot_scores: np.ndarray, bins: int) -> np.ndarray:
    inner = np.quantile(pilot_scores, np.linspace(0, 1, bins + 1)[1:-1])
    return np.unique(inner)


def _draw_bootstrap(ps, pl, n_items, R, rng, bayes):
    m = ps.size
    if bayes:
        idx = _weighted_choice(rng.dirichlet(np.ones(m), size=R), n_items, rng)
    else:
        idx = rng.integers(0, m, size=(R, n_items))
    return ps[idx], pl[idx]


def _draw_smoothed(unl, ps, pl, in_group, edges, n_items, R, rng, bayes, shrinkage):
    """Scores from the group's unlabelled scores; losses from the same score bin of the pilot."""
    s = unl[rng.integers(0, unl.size, size=(R, n_items))]
    b = np.searchsorted(edges, s, side="right")
    pb = np.searchsorted(edges, ps, side="right")
    M = ps.size
    w = rng.dirichlet(np.ones(M), size=R) if bayes else np.ones((R, M))
    loss = np.zeros((R, n_items))
    for bin_ in np.unique(b):
        mask = b == bin_
        pooled = np.flatnonzero(pb == bin_)
        if pooled.size == 0:  # an empty pilot bin: borrow from the nearest non-empty one
            near = np.argmin(np.abs(pb - bin_))
            pooled = np.flatnonzero(pb == pb[near])
        own = pooled[in_group[pooled]]
        draw = pl[pooled][_weighted_choice(w[:, pooled], n_items, rng)]
        if own.size and math.isfinite(shrinkage):
            lam = own.size / (own.size + shrinkage)
            own_draw = pl[own][_weighted_choice(w[:, own], n_items, rng)]
            draw = np.where(rng.random((R, n_items)) < lam, own_draw, draw)
        loss[mask] = draw[mask]
    return s, loss


def predict(
    scores,
    groups,
    pilot_scores,
    pilot_loss,
    pilot_groups=None,
    *,
    eps: float,
    alpha: float = 0.05,
    recipe: Recipe | str = VALID,
    n_grid=None,
    resamples: int = 200,
    pilot_model: str = "auto",
    pilot_uncertainty: bool = True,
    traffic=None,
    cap=None,
    pool=None,
    min_pilot: int = 30,
    bins: int = 5,
    shrinkage: float = 20.0,
    loss_bound: float = 1.0,
    seed: int = 0,
) -> PlanCurves:
    """Predict each group's routed share as a function of its number of labels.

    Parameters
    ----------
    scores : array_like, shape (N,)
        Unlabelled scores in ``[0, 1]`` of the traffic (free to collect).
    groups : array_like, shape (N,)
        Group of each unlabelled item.
    pilot_scores, pilot_loss : array_like, shape (M,)
        The labelled pilot: scores and losses in ``[0, loss_bound]``.
    pilot_groups : array_like, shape (M,), optional
        Group of each pilot item; ``None``: a pooled pilot (``pilot_model`` becomes ``smoothed`` and
        every group borrows the pooled loss-given-score).
    eps : float
        Target risk.
    alpha : float, default 0.05
        Miscoverage level.
    recipe : Recipe or str, default ``"valid"``
        How each group is calibrated (as in :class:`~gpac_utils.calibrate.GPAC`).
    n_grid : array_like of int, optional
        Candidate label counts; default :func:`default_grid` up to ``max(cap)`` (or ``4 N``).
    resamples : int, default 200
        Synthetic calibration sets per group and ``n`` (calibrated in one batched call).
    pilot_model : {"auto", "bootstrap", "smoothed"}, default "auto"
        Pilot model (see the module docstring); ``auto``: ``bootstrap`` for groups with at
        least ``min_pilot`` pilot items, ``smoothed`` otherwise.
    pilot_uncertainty : bool, default True
        Bayesian-bootstrap weights on the pilot, new per resample (propagates pilot noise).
    traffic : dict or array_like, optional
        Each group's share of traffic; default the groups' shares of ``scores``.
    cap : dict, int or array_like, optional
        Most labels per group (e.g. the items available to label); default no cap.
    pool : dict, int or array_like, optional
        Calibration items available per group for ``bernoulli`` / ``resample`` recipes: then
        ``n`` labels mean the rate ``pi_j = n / pool_j`` on ``pool_j`` items.
    min_pilot : int, default 30
        Smallest per-group pilot for ``bootstrap`` under ``auto``.
    bins : int, default 5
        Score bins of the ``smoothed`` model (quantiles of the pooled pilot scores).
    shrinkage : float, default 20
        Pseudo-count pulling a group's per-bin losses toward the pooled pilot (``smoothed``).
    loss_bound : float, default 1.0
        Upper end of the loss range.
    seed : int, default 0
        Seed of every draw.

    Returns
    -------
    PlanCurves

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> u = rng.uniform(size=1000)
    >>> loss = (rng.uniform(size=1000) < 0.05 * u).astype(float)
    >>> c = predict(u, np.zeros(1000), u[:300], loss[:300], np.zeros(300), eps=0.05,
    ...             n_grid=[20, 200], resamples=40)
    >>> c.p_certify[0].tolist()[1] > c.p_certify[0].tolist()[0]
    True
    """
    eps = _check_level("eps", eps, hi=float(loss_bound))
    alpha = _check_level("alpha", alpha)
    recipe = as_recipe(recipe)
    if pilot_model not in PILOT_MODELS:
        raise ValueError(f"pilot_model: unknown {pilot_model!r}; choose one of {list(PILOT_MODELS)}")
    if isinstance(resamples, bool) or int(resamples) != resamples or int(resamples) < 2:
        raise ValueError(f"resamples: must be an integer >= 2, got {resamples!r}")
    resamples = int(resamples)
    s = _as_1d("scores", scores, 0.0, 1.0)
    g = _labels("groups", groups, s.size)
    ps = _as_1d("pilot_scores", pilot_scores, 0.0, 1.0)
    pl = _as_1d("pilot_loss", pilot_loss, 0.0, float(loss_bound))
    if pl.size != ps.size:
        raise ValueError(f"pilot_loss: need one loss per pilot score ({ps.size}), got {pl.size}")
    if ps.size == 0:
        raise ValueError("pilot_scores: the pilot is empty; label a few items first")
    pooled = pilot_groups is None
    pg = np.full(ps.size, "") if pooled else _labels("pilot_groups", pilot_groups, ps.size)
    names = sorted(set(g.tolist()))
    if not names:
        raise ValueError("scores: no unlabelled items")

    def per_group(name, value, default):
        if value is None:
            return np.full(len(names), default, dtype=float)
        if isinstance(value, dict):
            missing = [x for x in names if x not in value]
            if missing:
                raise ValueError(f"{name}: no value for group(s) {missing}")
            return np.array([float(value[x]) for x in names])
        arr = np.broadcast_to(np.asarray(value, dtype=float), (len(names),)).copy()
        return arr

    cap_arr = per_group("cap", cap, np.inf)
    if np.any(cap_arr < 0):
        raise ValueError(f"cap: must be >= 0, got {cap_arr.tolist()}")
    pool_arr = per_group("pool", pool, np.nan)
    if traffic is None:
        traffic_arr = np.array([np.mean(g == x) for x in names])
    else:
        traffic_arr = per_group("traffic", traffic, np.nan)
        if np.any(~np.isfinite(traffic_arr)) or np.any(traffic_arr < 0) or traffic_arr.sum() <= 0:
            raise ValueError(f"traffic: must be non-negative shares, got {traffic_arr.tolist()}")
        traffic_arr = traffic_arr / traffic_arr.sum()
    if n_grid is None:
        top = np.nanmax(np.where(np.isfinite(cap_arr), cap_arr, np.nan)) if np.isfinite(cap_arr).any() else 4 * s.size
        n_grid = default_grid(int(max(top, 1)))
    grid = np.asarray(n_grid)
    if grid.ndim != 1 or grid.size == 0 or np.any(grid < 1) or np.any(grid != np.round(grid)):
        raise ValueError(f"n_grid: must be a non-empty list of positive integers, got {n_grid!r}")
    grid = np.unique(grid.astype(int))

    rng = np.random.default_rng(seed)
    edges = _bin_edges(ps, max(1, int(bins)))
    G, K = len(names), grid.size
    shares = np.full((G, K, resamples), np.nan)
    n_items = np.zeros((G, K), dtype=int)
    pilot_models, pilot_sizes = {}, {}
    for j, name in enumerate(names):
        unl = np.sort(s[g == name])
        in_group = pg == name
        pilot_sizes[name] = int(in_group.sum())
        use = pilot_model
        if pooled:
            use = "smoothed"
        elif pilot_model == "auto":
            use = "bootstrap" if pilot_sizes[name] >= min_pilot else "smoothed"
        if use == "bootstrap" and pilot_sizes[name] == 0:
            raise ValueError(f"pilot_model: 'bootstrap' needs pilot items in group {name!r}; use 'smoothed'")
        pilot_models[name] = use
        shrink = math.inf if pooled else float(shrinkage)
        grs = np.random.default_rng([seed, j])  # per-group stream: adding a group changes no other
        for k, n in enumerate(grid):
            if n > cap_arr[j]:
                continue
            pj = pool_arr[j] if np.isfinite(pool_arr[j]) else None
            if pj is not None and recipe.sampling != "full" and n > pj:
                continue
            m_items, rate = _items_for(int(n), recipe, pj)
            n_items[j, k] = m_items
            if use == "bootstrap":
                cs, cl = _draw_bootstrap(ps[in_group], pl[in_group], m_items, resamples, grs, pilot_uncertainty)
            else:
                cs, cl = _draw_smoothed(
                    unl, ps, pl, in_group, edges, m_items, resamples, grs, pilot_uncertainty, shrink
                )
            t = threshold(cl, cs, eps=eps, alpha=alpha, recipe=recipe, loss_bound=loss_bound, rng=grs, pi=rate)
            shares[j, k] = routed_share(t, unl)
    del rng
    settings = {
        "eps": eps,
        "alpha": alpha,
        **{f"recipe_{k}": v for k, v in recipe.to_dict().items()},
        "resamples": resamples,
        "pilot_model": pilot_model,
        "pilot_uncertainty": bool(pilot_uncertainty),
        "seed": int(seed),
        "loss_bound": float(loss_bound),
    }
    return PlanCurves(names, grid, shares, traffic_arr, cap_arr, n_items, pilot_sizes, pilot_models, settings)


# --------------------------------------------------------------------------------------------
# allocation
# --------------------------------------------------------------------------------------------


@dataclass
class Allocation:
    """Labels per group and the predicted routed share they buy.

    Attributes
    ----------
    name : str
        ``planned``, ``greedy``, ``uniform``, ``pi=0.5``, ...
    n : dict of str to int
        Labels per group (expected labels for Bernoulli sampling).
    share : dict of str to float
        Predicted expected routed share of each group's traffic.
    total : float
        Predicted expected routed share of all traffic, ``sum_j p_j share_j``.
    """

    name: str
    n: dict
    share: dict
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
    B = budget // unit
    V = np.zeros(B + 1)
    choice = np.zeros((len(opts), B + 1), dtype=int)
    for j, (n, v) in enumerate(opts):
        best = np.full(B + 1, -np.inf)
        arg = np.zeros(B + 1, dtype=int)
        for k, (c, val) in enumerate(zip(n // unit, v)):
            if c > B:
                continue
            cand = np.full(B + 1, -np.inf)
            cand[c:] = V[: B + 1 - c] + val
            better = cand > best + 1e-15
            best = np.where(better, cand, best)
            arg = np.where(better, k, arg)
        V, choice[j] = best, arg
    picks, b = [], B
    for j in range(len(opts) - 1, -1, -1):
        k = choice[j, b]
        picks.append(k)
        b -= opts[j][0][k] // unit
    return picks[::-1], float(V[B])


def _greedy(opts, budget: int):
    """Greedy on the best gain per label among all jumps up the grid (upper-hull greedy)."""
    level = [0] * len(opts)
    spent = 0
    while True:
        best = None
        for j, (n, v) in enumerate(opts):
            k0 = level[j]
            for k in range(k0 + 1, n.size):
                cost = n[k] - n[k0]
                if spent + cost > budget or v[k] <= v[k0]:
                    continue
                rate = (v[k] - v[k0]) / cost
                if best is None or rate > best[0]:
                    best = (rate, j, k, cost)
        if best is None:
            break
        _, j, k, cost = best
        level[j], spent = k, spent + cost
    return level, float(sum(o[1][k] for o, k in zip(opts, level)))


def _check_budget(budget) -> int:
    if isinstance(budget, bool) or not isinstance(budget, int | float | np.integer | np.floating):
        raise ValueError(f"budget: must be a non-negative number of labels, got {budget!r}")
    if not (math.isfinite(budget) and budget >= 0):
        raise ValueError(f"budget: must be a non-negative number of labels, got {budget}")
    return int(budget)


def _alloc_from_levels(curves, opts, levels, name) -> Allocation:
    n = {g: int(opts[j][0][k]) for j, (g, k) in enumerate(zip(curves.groups, levels))}
    share = {}
    for j, g in enumerate(curves.groups):
        k = levels[j]
        share[g] = float(opts[j][1][k] / curves.traffic[j]) if curves.traffic[j] > 0 else 0.0
    total = float(sum(opts[j][1][k] for j, k in enumerate(levels)))
    return Allocation(name, n, share, total)


def allocate(curves: PlanCurves, budget, *, algorithm: str = "dp") -> Allocation:
    """Choose labels per group on the grid to maximise the expected routed share of all traffic.

    Parameters
    ----------
    curves : PlanCurves
        From :func:`predict`.
    budget : int
        Total labels ``L``; the allocation satisfies ``sum_j n_j <= L``.
    algorithm : {"dp", "greedy"}, default "dp"
        ``dp``: exact dynamic programme over the budget (the objective is separable, so this is
        the optimum on the grid whatever the curves' shape). ``greedy``: repeatedly buy the
        jump up some group's grid with the best gain per label; optimal for concave curves,
        possibly short of the optimum at the steps where a group first certifies.

    Returns
    -------
    Allocation

    Examples
    --------
    >>> import numpy as np
    >>> c = PlanCurves(["a", "b"], np.array([10, 20]), np.array([[[0.1] * 4, [0.5] * 4], [[0.3] * 4, [0.35] * 4]]),
    ...                np.array([0.5, 0.5]), np.array([np.inf, np.inf]), np.array([[10, 20], [10, 20]]),
    ...                {"a": 0, "b": 0}, {"a": "bootstrap", "b": "bootstrap"})
    >>> allocate(c, 30).n
    {'a': 20, 'b': 10}
    """
    if algorithm not in ("dp", "greedy"):
        raise ValueError(f"algorithm: unknown {algorithm!r}; choose 'dp' or 'greedy'")
    budget = _check_budget(budget)
    opts = [_options(curves, j) for j in range(len(curves.groups))]
    if algorithm == "dp":
        levels, _ = _dp(opts, budget)
        return _alloc_from_levels(curves, opts, levels, "planned")
    levels, _ = _greedy(opts, budget)
    return _alloc_from_levels(curves, opts, levels, "greedy")


def uniform_levels(budget, cap) -> np.ndarray:
    """Equal labels per group spending ``budget``: ``n_j = min(cap_j, lam)`` (water-filling).

    Labels a capped group cannot use go to the other groups equally; rounded down to integers.

    Parameters
    ----------
    budget : int or float
        Total labels, >= 0 (a float is rounded down).
    cap : array_like, shape (G,)
        The most labels each group can use (``inf``: no cap).

    Returns
    -------
    numpy.ndarray of int, shape (G,)
        Labels per group; they sum to at most ``budget``.

    Raises
    ------
    ValueError
        When ``budget`` is not a non-negative number.

    Examples
    --------
    >>> uniform_levels(100, [10, 1000, 1000]).tolist()
    [10, 45, 45]
    """
    cap = np.asarray(cap, dtype=float)
    budget = _check_budget(budget)
    order = np.sort(cap)
    left, k, lam = float(budget), cap.size, 0.0
    for i, c in enumerate(order):
        share = left / (k - i)
        if c >= share:
            lam = share
            break
        left -= c
    else:
        lam = float(order[-1]) if order.size else 0.0
    return np.floor(np.minimum(cap, lam) + 1e-9).astype(int)


def uniform_allocation(curves: PlanCurves, budget) -> Allocation:
    """The uniform baseline: equal labels per group (:func:`uniform_levels`), down to the grid.

    :func:`plan` puts these label counts on the grid, so that nothing is lost to rounding.

    Parameters
    ----------
    curves : PlanCurves
        The predicted curves (:func:`predict`).
    budget : int or float
        Total labels, >= 0.

    Returns
    -------
    Allocation
        The allocation named ``"uniform"``: per group, the largest grid count at most its
        uniform level.

    Raises
    ------
    ValueError
        When ``budget`` is not a non-negative number.
    """
    budget = _check_budget(budget)
    target = uniform_levels(budget, curves.cap)
    opts = [_options(curves, j) for j in range(len(curves.groups))]
    levels = [int(np.flatnonzero(o[0] <= t)[-1]) for o, t in zip(opts, target)]
    return _alloc_from_levels(curves, opts, levels, "uniform")


def labels_needed(curves: PlanCurves, target: float, stat: str = "mean") -> pd.Series:
    """Smallest ``n`` on the grid whose predicted routed share reaches ``target``, per group.

    Parameters
    ----------
    curves : PlanCurves
    target : float
        Routed share of the group's traffic, in (0, 1].
    stat : {"mean", "q10", "median"}, default "mean"
        ``q10``: reached in at least 90 % of the resamples.

    Returns
    -------
    pandas.Series of float
        Per group; ``nan`` when no grid point reaches the target (more labels than the grid, or
        never: the group's loss is too high among its low scores).
    """
    target = float(target)
    if not 0 < target <= 1:
        raise ValueError(f"target: must lie in (0, 1], got {target}")
    if stat == "mean":
        v = curves.mean
    elif stat == "q10":
        v = curves.band()[0]
    elif stat == "median":
        v = np.quantile(curves.shares, 0.5, axis=-1)
    else:
        raise ValueError(f"stat: unknown {stat!r}; choose 'mean', 'q10' or 'median'")
    out = {}
    for j, g in enumerate(curves.groups):
        hit = np.flatnonzero(np.nan_to_num(v[j], nan=-1.0) >= target)
        out[g] = float(curves.n_grid[hit[0]]) if hit.size else math.nan
    return pd.Series(out, name=f"labels_for_{target:g}_{stat}")


# --------------------------------------------------------------------------------------------
# the plan (prediction + allocation + baselines)
# --------------------------------------------------------------------------------------------


@dataclass
class Plan:
    """A label plan: the curves, the planned allocation and the baselines.

    Attributes
    ----------
    curves : PlanCurves
    allocations : dict of str to Allocation
        ``planned`` (exact DP), ``greedy``, ``uniform`` and, when the pool is known, ``pi=0.5``.
    budget : int
    pi_half : dict
        Predicted share distribution under the paper's pi = 0.5 (per group: labels, mean, band,
        P(certify)); empty when no pool is known.
    """

    curves: PlanCurves
    allocations: dict
    budget: int
    pi_half: dict

    def table(self) -> pd.DataFrame:
        """One row per allocation and group (plus ``ALL``): labels, predicted mean, 10–90 % band, P(certify)."""
        c = self.curves
        lo, hi = c.band()
        rows = []
        for name, a in self.allocations.items():
            for j, g in enumerate(c.groups):
                if name == "pi=0.5":
                    d = self.pi_half[g]
                    rows.append({"allocation": name, "group": g, "traffic": c.traffic[j], **d})
                    continue
                n = a.n[g]
                if n == 0:
                    d = {"n_labels": 0, "share_mean": 0.0, "share_q10": 0.0, "share_q90": 0.0, "p_certify": 0.0}
                else:
                    k = int(np.flatnonzero(c.n_grid == n)[0])
                    d = {
                        "n_labels": n,
                        "share_mean": float(c.mean[j, k]),
                        "share_q10": float(lo[j, k]),
                        "share_q90": float(hi[j, k]),
                        "p_certify": float(c.p_certify[j, k]),
                    }
                rows.append({"allocation": name, "group": g, "traffic": c.traffic[j], **d})
            part = [r for r in rows if r["allocation"] == name]
            rows.append(
                {
                    "allocation": name,
                    "group": "ALL",
                    "traffic": 1.0,
                    "n_labels": int(round(sum(r["n_labels"] for r in part))),
                    "share_mean": float(sum(r["traffic"] * r["share_mean"] for r in part)),
                    "share_q10": math.nan,
                    "share_q90": math.nan,
                    "p_certify": math.nan,
                }
            )
        return pd.DataFrame(rows)


def _pi_half(scores, groups, pilot_scores, pilot_loss, pilot_groups, pool: dict, kw: dict) -> dict:
    """The paper's pi = 0.5 on each group's ``pool`` items (Bernoulli(0.5) labelling, same bound and rule)."""
    rec = as_recipe(kw["recipe"])
    rec = Recipe(bound=rec.bound, sampling="bernoulli", pi=0.5, rule=rec.rule, candidates=rec.candidates)
    rest = {k: v for k, v in kw.items() if k not in ("recipe", "cap", "traffic", "n_grid")}
    s = np.asarray(scores, dtype=float)
    g = np.asarray(groups).astype(str)
    out = {}
    for name in sorted(set(g.tolist())):
        n_pool = int(pool[name])
        if n_pool < 1:
            out[name] = {"n_labels": 0.0, "share_mean": 0.0, "share_q10": 0.0, "share_q90": 0.0, "p_certify": 0.0}
            continue
        mask = g == name
        c = predict(
            s[mask], g[mask], pilot_scores, pilot_loss, pilot_groups, recipe=rec,
            n_grid=[max(1, int(round(n_pool / 2)))], pool={name: n_pool}, **rest,
        )  # fmt: skip
        lo, hi = c.band()
        out[name] = {
            "n_labels": n_pool / 2,
            "share_mean": float(c.mean[0, 0]),
            "share_q10": float(lo[0, 0]),
            "share_q90": float(hi[0, 0]),
            "p_certify": float(c.p_certify[0, 0]),
        }
    return out


def plan(
    scores,
    groups,
    pilot_scores,
    pilot_loss,
    pilot_groups=None,
    *,
    budget=None,
    pool=None,
    eps: float,
    alpha: float = 0.05,
    recipe: Recipe | str = VALID,
    n_grid=None,
    cap=None,
    **kw,
) -> Plan:
    """Predict the curves, allocate a budget, and put the baselines beside the plan.

    Parameters
    ----------
    scores, groups, pilot_scores, pilot_loss, pilot_groups
        As for :func:`predict`.
    budget : int, optional
        Total labels ``L``; default the pi = 0.5 budget ``sum_j pool_j / 2`` (needs ``pool``).
    pool : dict or int, optional
        Calibration items available per group (labelled or not). Used for the pi = 0.5 baseline
        and, when ``cap`` is not given, as the cap on each group's labels.
    eps, alpha, recipe, n_grid, cap
        As for :func:`predict`.
    **kw
        Further keywords of :func:`predict` (``resamples``, ``pilot_model``, ``seed``, ...).

    Returns
    -------
    Plan
        With allocations ``planned`` (exact DP), ``greedy``, ``uniform`` and ``pi=0.5``.
    """
    names = sorted(set(np.asarray(groups).astype(str).tolist()))
    if pool is not None and not isinstance(pool, dict):
        pool = dict(zip(names, np.broadcast_to(np.asarray(pool, dtype=float), (len(names),)).tolist()))
    if pool is not None:
        missing = [g for g in names if g not in pool]
        if missing:
            raise ValueError(f"pool: no value for group(s) {missing}")
    if cap is None and pool is not None:
        cap = pool
    if budget is None:
        if pool is None:
            raise ValueError("budget: give a label budget, or pool (then the budget is the pi = 0.5 one)")
        budget = sum(pool[g] for g in names) / 2
    budget = _check_budget(budget)
    if n_grid is None:
        top = max(pool.values()) if pool is not None else max(budget, 1)
        n_grid = default_grid(int(max(top, 1)))
    cap_arr = np.array([(cap[g] if isinstance(cap, dict) else (np.inf if cap is None else cap)) for g in names], float)
    n_grid = np.union1d(np.asarray(n_grid, dtype=int), uniform_levels(budget, cap_arr))
    n_grid = n_grid[(n_grid >= 1) & (n_grid <= (np.max(cap_arr) if np.isfinite(cap_arr).all() else np.inf))]
    common = dict(eps=eps, alpha=alpha, recipe=recipe, **kw)
    curves = predict(scores, groups, pilot_scores, pilot_loss, pilot_groups, n_grid=n_grid, cap=cap, **common)
    allocs = {
        "planned": allocate(curves, budget, algorithm="dp"),
        "greedy": allocate(curves, budget, algorithm="greedy"),
        "uniform": uniform_allocation(curves, budget),
    }
    pi_half = {}
    if pool is not None:
        pi_half = _pi_half(scores, groups, pilot_scores, pilot_loss, pilot_groups, pool, common)
        total = float(sum(curves.traffic[j] * pi_half[g]["share_mean"] for j, g in enumerate(curves.groups)))
        allocs["pi=0.5"] = Allocation(
            "pi=0.5",
            {g: pi_half[g]["n_labels"] for g in curves.groups},
            {g: pi_half[g]["share_mean"] for g in curves.groups},
            total,
        )
    return Plan(curves, allocs, budget, pi_half)


# --------------------------------------------------------------------------------------------
# checking a plan: calibrate for real, repeatedly
# --------------------------------------------------------------------------------------------


def calibrate_repeatedly(
    pool_scores,
    pool_loss,
    n_items: int,
    *,
    eps: float,
    alpha: float = 0.05,
    recipe: Recipe | str = VALID,
    repeats: int = 100,
    eval_scores=None,
    eval_loss=None,
    pi=None,
    loss_bound: float = 1.0,
    seed: int = 0,
) -> dict:
    """Calibrate one group ``repeats`` times on random ``n_items``-subsets of a labelled pool.

    The realised counterpart of :func:`predict`: each repeat draws ``n_items`` calibration items
    *without replacement* from the pool, calibrates them (all repeats in one batched call), and
    evaluates the threshold on ``eval_scores`` / ``eval_loss`` (default: the pool itself).

    Parameters
    ----------
    pool_scores, pool_loss : array_like, shape (m,)
        The labelled items to draw calibration sets from.
    n_items : int
        Calibration items per repeat (``<= m``; ``0``: nothing routed).
    eps, alpha, recipe, loss_bound
        As for :func:`~gpac_utils.calibrate.threshold`.
    repeats : int, default 100
    eval_scores, eval_loss : array_like, optional
        Held-out traffic for the routed share and the realised risk ``mean(loss 1{U <= t})``.
    pi : float, optional
        Labelling rate (overrides ``recipe.pi``), for ``bernoulli`` recipes.
    seed : int, default 0

    Returns
    -------
    dict
        ``thresholds``, ``share`` (routed share of the eval traffic) and, with a loss, ``risk``
        (each of shape ``(repeats,)``).
    """
    ps = _as_1d("pool_scores", pool_scores, 0.0, 1.0)
    pl = _as_1d("pool_loss", pool_loss, 0.0, float(loss_bound))
    if pl.size != ps.size:
        raise ValueError(f"pool_loss: need one loss per pool score ({ps.size}), got {pl.size}")
    n_items = int(n_items)
    if not 0 <= n_items <= ps.size:
        raise ValueError(f"n_items: must lie in [0, {ps.size}] (the pool size), got {n_items}")
    es = ps if eval_scores is None else _as_1d("eval_scores", eval_scores, 0.0, 1.0)
    el = (pl if eval_scores is None else None) if eval_loss is None else _as_1d("eval_loss", eval_loss, 0.0, loss_bound)
    rng = np.random.default_rng(seed)
    if n_items == 0:
        t = np.full(int(repeats), -np.inf)
    else:
        idx = rng.permuted(np.broadcast_to(np.arange(ps.size), (int(repeats), ps.size)), axis=-1)[:, :n_items]
        t = threshold(pl[idx], ps[idx], eps=eps, alpha=alpha, recipe=recipe, loss_bound=loss_bound, rng=rng, pi=pi)
    out = {"thresholds": t, "share": routed_share(t, es)}
    if el is not None:
        order = np.argsort(es, kind="stable")
        cum = np.concatenate([[0.0], np.cumsum(el[order])])
        k = np.searchsorted(es[order], t, side="right")
        out["risk"] = cum[k] / max(es.size, 1)
    return out


# --------------------------------------------------------------------------------------------
# command line: gpac plan
# --------------------------------------------------------------------------------------------

CLI_HELP = "plan how many expert labels each group needs, from a labelled pilot"


def add_cli(subparsers) -> argparse.ArgumentParser:
    """Add the ``plan`` sub-command to an :mod:`argparse` sub-parser collection.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        What :meth:`argparse.ArgumentParser.add_subparsers` returned.

    Returns
    -------
    argparse.ArgumentParser
        The ``plan`` sub-parser, its options added.
    """
    p = subparsers.add_parser("plan", help=CLI_HELP, description=CLI_HELP)
    p.add_argument("--data", required=True, type=Path, help="table (.csv or .parquet), one row per item")
    p.add_argument("--score-col", required=True)
    p.add_argument("--loss-col", default="loss", help="losses; rows without one are unlabelled")
    p.add_argument("--group-col", default="group")
    p.add_argument(
        "--pilot-fraction", type=float, default=None,
        help="label a random share of the rows as the pilot (default: the rows with a loss)",
    )  # fmt: skip
    p.add_argument("--eps", type=float, required=True)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--recipe", default="valid", help="valid (default), valid-bernoulli or paper")
    p.add_argument("--bound", default=None, help="override the recipe's bound")
    p.add_argument("--budget", type=float, default=None, help="total labels (default: pi = 0.5 of every row)")
    p.add_argument("--grid", default=None, help="comma-separated label counts (default: geometric to the group size)")
    p.add_argument("--no-cap", action="store_true", help="allow more labels than a group has rows")
    p.add_argument("--resamples", type=int, default=200)
    p.add_argument("--pilot-model", choices=list(PILOT_MODELS), default="auto")
    p.add_argument("--target", type=float, default=None, help="also report the labels needed to route this share")
    p.add_argument("--loss-bound", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", required=True, type=Path, help="CSV of the plan (curves go to <stem>_curves.csv)")
    p.add_argument("--plot", type=Path, default=None, help="PNG of the curves (needs matplotlib)")
    return p


def _fail(msg: str):
    """A bad option value: exit status 2 through :func:`gpac_utils.cli.main`."""
    raise ParameterError(msg)


def _data_fail(msg: str):
    """A bad file, column or row: exit status 1 through :func:`gpac_utils.cli.main`."""
    raise DataError(msg)


def _read_cli_table(a):
    try:
        df = read_frame(a.data)
    except FileNotFoundError as exc:
        _data_fail(str(exc))
    for opt, col in (("--score-col", a.score_col), ("--group-col", a.group_col), ("--loss-col", a.loss_col)):
        if col not in df.columns:
            _data_fail(f"{opt}: column {col!r} not in {a.data} (columns: {list(df.columns)})")
    return df


def plot_curves(the_plan: Plan, path=None, target: float | None = None):
    """Plot each group's predicted routed share against labels, with the band and the allocations.

    Imports matplotlib lazily (it is in the ``notebooks`` extra, not a core dependency).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib

    if path is not None and matplotlib.get_backend().lower() not in ("agg", "pdf", "svg"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    c = the_plan.curves
    lo, hi = c.band()
    G = len(c.groups)
    cols = min(G, 4)
    rows = int(math.ceil(G / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), sharey=True, squeeze=False)
    marks = {"planned": ("o", "C3"), "uniform": ("s", "C0"), "pi=0.5": ("^", "C2")}
    for j, g in enumerate(c.groups):
        ax = axes.flat[j]
        ok = np.isfinite(c.mean[j])
        ax.fill_between(c.n_grid[ok], lo[j, ok], hi[j, ok], color="0.8", label="10-90 %")
        ax.plot(c.n_grid[ok], c.mean[j, ok], color="k", lw=1.2, label="mean")
        ax.plot(c.n_grid[ok], c.p_certify[j, ok], color="0.5", lw=0.8, ls=":", label="P(certify)")
        for name, (m, col) in marks.items():
            a = the_plan.allocations.get(name)
            if a is None:
                continue
            if a.n[g] > 0:  # zero labels (always think) is off the log axis
                ax.plot([a.n[g]], [a.share[g]], marker=m, color=col, ls="none", label=name)
        if target is not None:
            ax.axhline(target, color="C1", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f"{x:g}"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_title(f"{g} ({c.traffic[j]:.0%})", fontsize=9)
        ax.set_xlabel("labels")
    for ax in axes.flat[G:]:
        ax.axis("off")
    axes[0, 0].set_ylabel("routed share")
    axes[0, 0].legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120, metadata={"Software": None})
    return fig


def cli_main(a) -> int:
    """Run ``gpac plan`` with parsed arguments ``a`` (see :func:`add_cli`).

    Writes the plan CSV, the curves CSV next to it and, with ``--plot``, a PNG.

    Parameters
    ----------
    a : argparse.Namespace
        The parsed ``gpac plan`` arguments.

    Returns
    -------
    int
        The exit status, 0.

    Raises
    ------
    ParameterError
        For a bad option value (exit status 2 through :func:`gpac_utils.cli.main`).
    DataError
        For a missing file, a missing column or a bad row (exit status 1).
    gpac_utils.data.SchemaError
        For a file that cannot be read as its suffix says (exit status 1).
    """
    for name, v, hi in (("--eps", a.eps, a.loss_bound), ("--alpha", a.alpha, 1.0)):
        if not (math.isfinite(v) and 0 < v < hi):
            _fail(f"{name}: must lie in (0, {hi}), got {v}")
    if a.pilot_fraction is not None and not 0 < a.pilot_fraction <= 1:
        _fail(f"--pilot-fraction: must lie in (0, 1], got {a.pilot_fraction}")
    if a.resamples < 2:
        _fail(f"--resamples: must be >= 2, got {a.resamples}")
    if a.budget is not None and not (math.isfinite(a.budget) and a.budget >= 0):
        _fail(f"--budget: must be a non-negative number of labels, got {a.budget}")
    if a.target is not None and not 0 < a.target <= 1:
        _fail(f"--target: must lie in (0, 1], got {a.target}")
    try:
        recipe = as_recipe(a.recipe)
        if a.bound is not None:
            recipe = recipe.replace(bound=a.bound)
    except ValueError as exc:
        _fail(f"--recipe/--bound: {exc}")
    grid = None
    if a.grid is not None:
        try:
            grid = [int(x) for x in a.grid.split(",") if x.strip()]
        except ValueError:
            _fail(f"--grid: expected comma-separated integers, got {a.grid!r}")
        if not grid or min(grid) < 1:
            _fail(f"--grid: label counts must be positive integers, got {a.grid!r}")
    df = _read_cli_table(a)
    s = pd.to_numeric(df[a.score_col], errors="coerce").to_numpy(float)
    bad = ~np.isfinite(s) | (s < 0) | (s > 1)
    if bad.any():
        _data_fail(f"--score-col: {a.score_col!r} must lie in [0, 1]; bad rows {np.flatnonzero(bad)[:5].tolist()}")
    missing = np.flatnonzero(df[a.group_col].isna().to_numpy())
    if missing.size:
        _data_fail(f"--group-col: {a.group_col!r} has missing labels at rows {missing[:5].tolist()}")
    g = df[a.group_col].astype(str).to_numpy()
    loss = pd.to_numeric(df[a.loss_col], errors="coerce").to_numpy(float)
    if a.pilot_fraction is not None:
        rng = np.random.default_rng(a.seed)
        labelled = np.isfinite(loss)
        pilot = np.zeros(len(df), bool)
        pick = rng.permutation(np.flatnonzero(labelled))[: int(round(a.pilot_fraction * labelled.sum()))]
        pilot[pick] = True
    else:
        pilot = np.isfinite(loss)
    if not pilot.any():
        _data_fail(f"--loss-col: no labelled rows in {a.loss_col!r} (give losses, or --pilot-fraction)")
    badl = (loss[pilot] < 0) | (loss[pilot] > a.loss_bound)
    if badl.any():
        _data_fail(
            f"--loss-col: losses must lie in [0, {a.loss_bound}]; bad rows {np.flatnonzero(pilot)[badl][:5].tolist()}"
        )
    names = sorted(set(g.tolist()))
    pool = {x: int(np.sum(g == x)) for x in names}
    try:
        the_plan = plan(
            s, g, s[pilot], loss[pilot], g[pilot], budget=a.budget, pool=pool, eps=a.eps, alpha=a.alpha,
            recipe=recipe, n_grid=grid, cap=({x: np.inf for x in names} if a.no_cap else None),
            resamples=a.resamples, pilot_model=a.pilot_model, loss_bound=a.loss_bound, seed=a.seed,
        )  # fmt: skip
    except ValueError as exc:
        _fail(str(exc))
    table = the_plan.table()
    if a.target is not None:
        need = labels_needed(the_plan.curves, a.target)
        table[f"labels_for_{a.target:g}"] = table["group"].map(need.to_dict())
    a.output.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(a.output, index=False, lineterminator="\n")
    curves_path = a.output.with_name(a.output.stem + "_curves.csv")
    the_plan.curves.summary().to_csv(curves_path, index=False, lineterminator="\n")
    tot = {k: v.total for k, v in the_plan.allocations.items()}
    print(
        f"budget {the_plan.budget} labels; predicted routed share of all traffic: "
        + ", ".join(f"{k} {v:.1%}" for k, v in tot.items())
        + f" -> {a.output}, {curves_path}"
    )
    non_concave = [x for x, ok in the_plan.curves.concave.items() if not ok]
    if non_concave:
        print(f"non-concave curves (the DP plan is exact on the grid; greedy may fall short): {non_concave}")
    if a.plot is not None:
        if importlib.util.find_spec("matplotlib") is None:
            print("--plot: matplotlib is not installed (pip install 'gpac-utils[notebooks]'); no plot written")
        else:
            plot_curves(the_plan, a.plot, a.target)
            print(f"plot -> {a.plot}")
    return 0
