r"""Label planning, step 1: predict each group's routed share from a pilot, per number of labels.

A group-conditional guarantee needs enough *labelled* calibration items in every group: with
a valid bound, a group with too few labels certifies nothing and always thinks. Labels (a
thinking-model answer plus a grade) are the expensive part, so before calibrating G-PAC one
wants to know, per group ``j`` and per number of labels ``n_j``, the share of that group's
traffic the calibrated router will send to the cheap model.

This module predicts it from a small labelled **pilot** and the (free) unlabelled scores:

1. :func:`predict`: for each group and each ``n`` of a grid, draw ``n_resamples`` synthetic calibration
   sets of ``n`` labels from a model of the group fitted on the pilot, calibrate all ``n_resamples`` at
   once with the library's :func:`~gpac_utils.calibrate.batch_threshold` (exactly as
   :class:`~gpac_utils.calibrate.GPAC` does with the same :class:`~gpac_utils.settings.Settings`: its
   ``risk``, the level its ``correction`` gives each group, its ``min_group_size``), and read each
   threshold's routed share off the group's unlabelled scores. The result, :class:`PlanCurves`, holds
   the distribution of the routed share (mean, 10–90 % band) and ``P(certify anything)`` per group and ``n``.
2. :func:`gpac_utils.allocation.allocate` (step 2) spends a label budget on the groups.

**When the pilot is too small to predict from** (:class:`PilotWarning`): when it has fewer than
``min_pilot`` (default 30) labelled items in all, or fewer than :data:`MIN_POSITIVE` (5) items
with a positive loss. The predicted threshold is where the pilot's risk reaches ``eps``, and that
risk is carried by the positive losses: with ``k`` of them its relative standard error is about
``1 / sqrt(k)`` (Poisson), 45 % at ``k = 5``; with none the pilot shows every score loss-free and
predicts a routed share near 100 % whatever ``eps``. (Per group, ``"auto"`` already borrows from
the pooled pilot below ``min_pilot`` items: the ``smoothed`` model below.)

Notebook 32 and ``tests/test_planning.py`` check predictions against their realised counterpart:
calibrating for real on random subsets of a labelled pool.

What the prediction is, honestly
--------------------------------
It is an *estimate*, not a guarantee. The pilot stands in for the unknown population:

* ``PilotModel(kind="posterior")`` (default) draws each synthetic set from a hierarchical posterior
  predictive model: scores from the group's unlabelled scores (distinct rows outside the pilot, without
  replacement, where ``cap`` counts them: :func:`_outside_pilot`), and the loss rate per score region as the
  pooled pilot's rate (a projection posterior: Jeffreys per region, made non-decreasing in the score) times the
  group's own odds ratio (a shift and a slope in the score, plus a deviation per region), whose spreads across
  groups have their own posterior (:func:`_spread_posterior`), all drawn anew per synthetic set
  (:func:`_draw_posterior`; ``docs/planning.md`` says what its band is and how often it covers, measured). An
  unseen loss is not a zero loss: a region the pilot saw little of keeps a rate spread away from 0.
* ``PilotModel(kind="bootstrap")`` resamples the group's own pilot ``(score, loss)`` pairs to size ``n``.
  Resampling a pilot of ``m`` items to ``n > m`` cannot invent score–loss structure the pilot
  does not show; in particular a pilot with no loss among its lowest scores predicts that the
  low scores are loss-free.
* ``PilotModel(uncertainty=True)`` (default; ``bootstrap`` and ``smoothed``) draws each resample from a
  **Bayesian bootstrap** of the pilot (Dirichlet(1, …, 1) weights on the pilot items, new weights per
  resample), so the band also reflects how little a small pilot says about the population, not only the calibration
  noise at size ``n``. With ``False`` the band is conditional on the pilot being the population
  and is too narrow for small pilots.
* ``PilotModel(kind="smoothed")`` (used by ``"auto"`` for groups whose pilot has fewer than ``min_pilot``
  items, and always when the pilot has no group labels) draws the scores from the group's
  unlabelled scores and each loss from pilot items in the same score bin: from the group's own
  pilot items with probability ``m_gb / (m_gb + shrinkage)``, else from the pooled pilot. This
  borrows strength across groups and is biased when groups differ at equal scores; within a bin
  the loss is taken as unrelated to the score.

Labels vs items. With ``recipe.sampling == "full"`` ``n`` labels are ``n`` calibration items.
With ``"bernoulli"`` / ``"resample"`` and a labelling probability ``label_prob``, ``n`` *expected*
labels come from ``ceil(n / label_prob)`` calibration items, unless ``pool`` fixes the items available per group, in
which case the rate is ``n / pool_j`` (planning over the per-group labelling probability).

Examples
--------
>>> import numpy as np
>>> from gpac_utils import allocation, prediction
>>> rng = np.random.default_rng(0)
>>> g = np.repeat(["easy", "hard"], 2000)
>>> u = rng.uniform(size=4000)
>>> loss = (rng.uniform(size=4000) < np.where(g == "easy", 0.05, 0.4) * u).astype(float)
>>> pilot = rng.choice(4000, 600, replace=False)
>>> from gpac_utils.settings import Settings
>>> curves = prediction.predict(u, g, u[pilot], loss[pilot], g[pilot], settings=Settings(eps=0.05),
...                             spec=prediction.PlanSpec(n_grid=[100, 400, 1000], n_resamples=50))
>>> curves.summary().columns.tolist()[:4]
['group', 'n_labels', 'n_items', 'routed_share_mean']
>>> alloc = allocation.allocate(curves, budget=1100)
>>> int(sum(alloc.n.values())) <= 1100
True
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import calibrate as _calibrate
from . import feasibility as _feasibility
from .checks import (
    ParameterError,
    check_array,
    check_bool,
    check_choice,
    check_groups,
    check_int,
    check_range,
    check_same_index,
)
from .recipe import Recipe
from .settings import Settings, takes_settings

__all__ = [
    "PlanCurves",
    "PilotModel",
    "PlanSpec",
    "PLANNED_SETTINGS",
    "n_needed",
    "PilotWarning",
    "predict",
    "labels_needed",
    "default_grid",
    "PILOT_MODELS",
    "BAND",
    "mid_quantiles",
    "MIN_POSITIVE",
    "THIN_PILOT",
    "THIN_PILOT_GAP",
]
#: Fewest pilot items with a positive loss to predict from (module description).
MIN_POSITIVE = 5
#: A pilot is *thin* for the total when the planned groups' pilots average fewer items than this: on the real
#: tables (``benchmarks/plan_realdata.csv``) every setting that missed the 5-point goal on the total was this thin,
#: and none thicker did (``docs/planning.md``, *Which goals fail, and where*).
THIN_PILOT = 20
#: How far the predicted routed share of all traffic may be off for a thin pilot: the largest gap measured on the
#: real tables of ``data/real`` with such pilots, rounded up (``tests/test_docs_numbers.py`` checks it); a smaller
#: held-out table showed more (``docs/planning.md``), so ``gpac plan`` calls it a lower bound.
THIN_PILOT_GAP = 0.10


def pooled_groups(curves) -> dict:
    """Per group: whether its prediction is *pooled* (its pilot has fewer than :data:`THIN_PILOT` labelled items,
    so its curve and deviations come mostly from the spreads all groups support, not from its own counts)."""
    return {g: int(n) < THIN_PILOT for g, n in curves.pilot_sizes.items()}


def worst_rate(pilot_scores, pilot_losses, group_scores, loss_bound: float = 1.0, level: float = 0.95) -> float:
    """The worst low-score loss rate a group's pilot cannot rule out: the one-sided Clopper–Pearson upper bound at
    ``level`` of the share of positive losses among its pilot items scored at most the median of its scores (the
    half that routes first; all its pilot items where none is that low).

    Examples
    --------
    >>> round(worst_rate([0.1] * 9, [0.0] * 9, [0.1, 0.9]), 3)  # 9 clean items cannot rule out 28 %
    0.283
    """
    from scipy.stats import beta

    ps, pl = np.asarray(pilot_scores, float), np.asarray(pilot_losses, float)
    low = ps <= np.median(np.asarray(group_scores, float))
    if not low.any():
        low = np.ones(ps.size, bool)
    k, m = int(np.sum(pl[low] > 0)), int(low.sum())
    return 1.0 if k >= m else float(beta.ppf(level, k + 1, m - k))


def cautious_p_certify(group_scores, rate: float, n: int, settings: Settings, level: float, *, resamples=200, seed=0):
    """A cautious ``p_certify`` for a group at ``n`` labels: the share of ``resamples`` calibrations (the library's,
    at ``level``) that certify when the group's scores are its unlabelled ones and every item's loss is positive
    with probability ``rate`` (:func:`worst_rate`) whatever its score. ``0`` below ``min_group_size``."""
    n = int(n)
    if n < max(1, settings.min_group_size) or n <= 0:
        return 0.0
    rng = np.random.default_rng([seed, n, 53])
    u = np.asarray(group_scores, float)[rng.integers(0, len(group_scores), (resamples, n))]
    loss = (rng.random((resamples, n)) < rate) * settings.loss_bound
    t = _calibrate.batch_threshold(
        u,
        loss,
        eps=settings.eps,
        alpha=level,
        recipe=settings.recipe,
        loss_bound=settings.loss_bound,
        rng=rng,
        risk=settings.risk,
    )
    return float(np.mean(np.isfinite(t)))


class PilotWarning(UserWarning):
    """The pilot is too small to predict from (module description: the rule)."""


def pilot_problem(pilot_losses, min_pilot: int = 30) -> str | None:
    """Why a pilot is too small to predict from, or ``None`` (the rule of the module description).

    Parameters
    ----------
    pilot_losses : numpy.ndarray
        The pilot's losses.
    min_pilot : int, default 30
        Fewest pilot items.

    Returns
    -------
    str or None

    Examples
    --------
    >>> pilot_problem(np.zeros(1))
    'the pilot has 1 labelled item(s) (< 30) and 0 with a positive loss (< 5): too small to predict from; label more'
    """
    n, k = int(np.size(pilot_losses)), int(np.sum(np.asarray(pilot_losses) > 0))
    if n >= min_pilot and k >= MIN_POSITIVE:
        return None
    return (
        f"the pilot has {n} labelled item(s) ({'<' if n < min_pilot else '>='} {min_pilot}) and {k} with a positive "
        f"loss ({'<' if k < MIN_POSITIVE else '>='} {MIN_POSITIVE}): too small to predict from; label more"
    )


PILOT_MODELS = ("posterior", "auto", "bootstrap", "smoothed")
#: Quantiles of the routed share reported as the prediction band.
BAND = (0.10, 0.90)


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
    max_labels, size = check_int("max_labels", int(max_labels), 1), check_int("size", int(size), 1)
    lo = max(1, min(int(min_labels), max_labels))
    return np.unique(np.round(np.geomspace(lo, max_labels, size)).astype(int))


def _weighted_choice(weights: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Per row ``r`` of ``weights`` (n_resamples, m), ``size`` indices drawn with probabilities ``weights[r]``."""
    n_resamples, m = weights.shape
    cw = np.cumsum(weights, axis=1)
    cw /= cw[:, -1:]
    offs = np.arange(n_resamples, dtype=float)[:, None]
    flat = (cw + offs).ravel()
    u = rng.random((n_resamples, size)) + offs
    starts = (np.arange(n_resamples) * m)[:, None]
    idx = np.searchsorted(flat, u.ravel(), side="right").reshape(n_resamples, size) - starts
    return np.clip(idx, 0, m - 1)


def _items_for(n_labels: int, recipe: Recipe, pool: int | None) -> tuple[int, float | None]:
    """Calibration items and labelling rate giving ``n_labels`` (expected) labels."""
    if recipe.sampling == "full":
        return int(n_labels), None
    if pool is not None:
        return int(pool), min(1.0, n_labels / pool)
    return int(math.ceil(n_labels / recipe.label_prob - 1e-9)), None


@dataclass
class PlanCurves:
    """Predicted routed share per group and number of labels (output of :func:`predict`).

    Attributes
    ----------
    groups : list of str
        Group names, sorted.
    n_grid : numpy.ndarray, shape (K,)
        Label counts (``0`` is implied: no labels, nothing routed).
    routed_shares : numpy.ndarray, shape (G, K, n_resamples)
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
        eps, alpha, recipe, n_resamples, seed, ... and ``n_needed`` (the fewest items that certify anything).
    certified : numpy.ndarray of bool, shape (G, K, n_resamples), optional
        Whether each resample's calibration certified a threshold; default ``routed_shares > 0``.
    """

    groups: list
    n_grid: np.ndarray
    routed_shares: np.ndarray
    traffic: np.ndarray
    cap: np.ndarray
    n_items: np.ndarray
    pilot_sizes: dict
    pilot_models: dict
    settings: dict = field(default_factory=dict)
    certified: np.ndarray | None = None

    @property
    def mean(self) -> np.ndarray:
        """Expected routed share, shape (G, K) (``nan`` above the cap)."""
        ok = np.isfinite(self.routed_shares)
        total = np.where(ok, self.routed_shares, 0.0).sum(axis=-1)
        count = ok.sum(axis=-1)
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)

    @property
    def p_certify(self) -> np.ndarray:
        """Probability that the group certifies a threshold, shape (G, K).

        Exactly 0 below the fewest items that can certify anything (``settings["n_needed"]``); above it the
        posterior-predictive share of certifying resamples as ``(c + 1/2) / (R + 1)``: never exactly 0 or
        1, since ``R`` resamples cannot show certainty (and a group above the minimum can always fail).
        """
        cert = self.routed_shares > 0 if self.certified is None else self.certified
        R = cert.shape[-1]
        p = (cert.sum(axis=-1) + 0.5) / (R + 1)
        p = np.where(self.n_items < self.settings.get("n_needed", 0), 0.0, p)
        return np.where(np.isnan(self.routed_shares[..., 0]), np.nan, p)

    def band(self, q=BAND) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper **mid-quantiles** of the routed share, each of shape (G, K) (:func:`mid_quantiles`)."""
        lo, hi = mid_quantiles(self.routed_shares, q)
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
            slope = np.diff(v) / np.diff(n)
            out[g] = n.size < 3 or bool(np.all(np.diff(slope) <= 1e-4 / max(1.0, float(np.mean(np.diff(n))))))
        return out

    def summary(self) -> pd.DataFrame:
        """Long table: one row per group and ``n`` (n_labels, n_items, mean, band, P(certify))."""
        lo, hi = self.band()
        j, k = np.nonzero(np.isfinite(self.mean))  # the (group, n) pairs within the cap
        groups = np.asarray(self.groups, dtype=object)[j]
        return pd.DataFrame(
            {
                "group": groups,
                "n_labels": self.n_grid[k].astype(int),
                "n_items": self.n_items[j, k].astype(int),
                "routed_share_mean": self.mean[j, k],
                "routed_share_q10": lo[j, k],
                "routed_share_q90": hi[j, k],
                "p_certify": self.p_certify[j, k],
                "traffic": self.traffic[j].astype(float),
                "pilot_n": [int(self.pilot_sizes[g]) for g in groups],
                "pilot_model": [self.pilot_models[g] for g in groups],
            }
        )


def mid_quantiles(draws: np.ndarray, q) -> np.ndarray:
    """Quantiles ``q`` of each row of ``draws`` (..., R) from the **mid-distribution function**
    ``F(x) - P(X = x) / 2`` (Parzen 2004), interpolated linearly between the distinct values; ``nan`` rows stay
    ``nan``. Shape (len(q), ...).

    The routed share of one calibration takes few values (a discrete score, or a group planned onto nearly all its
    rows), so its ordinary quantiles sit on those values, and a band between them excludes any mean of two of them
    (the realised mean routed share over calibrations is one). The mid-quantiles interpolate between the values
    by their probabilities; for draws without ties they are the sample quantiles at ``(i + 1/2) / R``.

    Examples
    --------
    >>> mid_quantiles(np.array([0.0] * 6 + [0.5] * 4), [0.1, 0.9]).round(3).tolist()
    [0.0, 0.5]
    >>> mid_quantiles(np.array([0.2] * 9 + [0.5]), [0.9]).round(3).tolist()  # ordinary quantile: 0.2
    [0.47]
    """
    x = np.asarray(draws, float)
    q = np.atleast_1d(np.asarray(q, float))
    flat = x.reshape(-1, x.shape[-1])
    out = np.full((q.size, flat.shape[0]), np.nan)
    for i, row in enumerate(flat):
        if np.isnan(row).any():
            continue
        v, c = np.unique(row, return_counts=True)
        p = c / row.size
        out[:, i] = np.interp(q, np.cumsum(p) - p / 2, v)
    return out.reshape((q.size, *x.shape[:-1]))


def _draw_bootstrap(ps, pl, n_items, n_resamples, rng, bayes):
    m = ps.size
    if bayes:
        idx = _weighted_choice(rng.dirichlet(np.ones(m), size=n_resamples), n_items, rng)
    else:
        idx = rng.integers(0, m, size=(n_resamples, n_items))
    return ps[idx], pl[idx]


@dataclass(frozen=True)
class _Source:
    """What one group's synthetic calibration sets are drawn from (:func:`_draw_smoothed`, :func:`_draw_posterior`).

    ``unl``: the group's unlabelled scores, sorted; ``pilot``: all pilot scores, losses and which items are the
    group's; ``edges``: inner edges of the score regions; ``population``: the group's scores outside the pilot
    (:func:`_outside_pilot`) or ``None``; ``spread``: what the group reads of the groups' posterior
    (:meth:`_Spread.of`) or ``None`` (no spread: the group is the pool); ``shrinkage``: the ``smoothed`` model's
    pull to the pool.
    """

    unl: np.ndarray
    pilot: tuple
    edges: np.ndarray
    model: PilotModel
    loss_bound: float = 1.0
    population: np.ndarray | None = None
    spread: tuple | None = None
    shrinkage: float = math.inf


def _draw_smoothed(src: _Source, shape, rng):
    """Scores from the group's unlabelled scores; losses from the same score bin of the pilot."""
    (ps, pl, in_group), edges, unl = src.pilot, src.edges, src.unl
    n_resamples, n_items = shape
    s = unl[rng.integers(0, unl.size, size=(n_resamples, n_items))]
    b = np.searchsorted(edges, s, side="right")
    pb = np.searchsorted(edges, ps, side="right")
    M = ps.size
    w = rng.dirichlet(np.ones(M), size=n_resamples) if src.model.uncertainty else np.ones((n_resamples, M))
    loss = np.zeros((n_resamples, n_items))
    for bin_ in np.unique(b):
        mask = b == bin_
        pooled = np.flatnonzero(pb == bin_)
        if pooled.size == 0:  # an empty pilot bin: borrow from the nearest non-empty one
            near = np.argmin(np.abs(pb - bin_))
            pooled = np.flatnonzero(pb == pb[near])
        own = pooled[in_group[pooled]]
        draw = pl[pooled][_weighted_choice(w[:, pooled], n_items, rng)]
        if own.size and math.isfinite(src.shrinkage):
            lam = own.size / (own.size + src.shrinkage)
            own_draw = pl[own][_weighted_choice(w[:, own], n_items, rng)]
            draw = np.where(rng.random((n_resamples, n_items)) < lam, own_draw, draw)
        loss[mask] = draw[mask]
    return s, loss


#: Scores with at most this many distinct values get one region per value (``posterior``).
DISCRETE = 32


def _regions(scores, bins: int) -> np.ndarray:
    """Inner edges of the ``posterior`` model's score regions: one per distinct value for a score with at
    most :data:`DISCRETE` values, else ``bins`` quantile regions of all (unlabelled) scores."""
    values = np.unique(scores)
    if values.size <= DISCRETE:
        return (values[1:] + values[:-1]) / 2
    return np.unique(np.quantile(scores, np.linspace(0, 1, max(1, int(bins)) + 1)[1:-1]))


def _isotonic(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Non-decreasing weighted least-squares fit of ``y`` (pool-adjacent-violators); ``w > 0``."""
    blocks = []  # [value, weight, size]
    for v, wt in zip(y.tolist(), w.tolist()):
        blocks.append([v, wt, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    return np.repeat([b[0] for b in blocks], [b[2] for b in blocks])


def _region_x(ps: np.ndarray, pb: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Each region's score: the mean of its pilot scores, else the middle of its edges (0 and 1 outside)."""
    n_bins = edges.size + 1
    m = np.bincount(pb, minlength=n_bins)
    bounds = np.r_[0.0, edges, 1.0]
    mid = (bounds[:-1] + bounds[1:]) / 2
    return np.where(m > 0, np.bincount(pb, ps, n_bins) / np.maximum(m, 1), mid)


def _monotone(theta: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted isotonic regression of each row of ``theta`` (R, B) with weights ``w`` (B,), vectorised over rows:
    the max-min formula ``fit_b = max_{i <= b} min_{j >= b} mean_w(theta_i..theta_j)`` of isotonic regression
    (Robertson, Wright and Dykstra 1988; tests/test_planning.py checks it against pool-adjacent-violators)."""
    cw = np.r_[0.0, np.cumsum(w)]
    ct = np.concatenate([np.zeros((theta.shape[0], 1)), np.cumsum(theta * w, axis=1)], axis=1)
    B = w.size
    i, j = np.triu_indices(B)
    avg = np.full((theta.shape[0], B, B), np.inf)
    avg[:, i, j] = (ct[:, j + 1] - ct[:, i]) / (cw[j + 1] - cw[i])  # mean over regions i..j (i <= j)
    low = np.minimum.accumulate(avg[:, :, ::-1], axis=2)[:, :, ::-1]  # [r, i, b] = min over j >= b
    low = np.where(np.arange(B)[:, None] <= np.arange(B)[None, :], low, -np.inf)  # only i <= b
    return low.max(axis=1)


def _pooled_logit(k: np.ndarray, m: np.ndarray, n_draws: int | None = None, rng=None) -> np.ndarray:
    """The log odds of the pooled loss rate per region (``posterior``), from ``k`` positive losses in ``m`` pilot items
    per region: a **projection posterior** (Chakraborty and Ghosal 2021). Each region's rate is drawn from its own
    Jeffreys posterior ``Beta(1/2 + k_b, 1/2 + m_b - k_b)``, and each draw is projected onto the non-decreasing
    curves (a larger score means less trust) by weighted isotonic regression, weights ``m_b + 1``
    (:func:`_monotone`). With ``n_draws``: draws, shape (n_draws, B); without: the centre, the projection of the
    posterior means ``(k_b + 1/2) / (m_b + 1)``, shape (B,).

    A region where the pilot saw few items and no loss draws a rate spread over (0, 1) on its own (an unseen loss
    is not a zero loss), and the projection pools it with its neighbours wherever the draw contradicts the order,
    so the better-seen regions above it bound it: no fixed floor, and no rate pinned at the pilot's zero.
    """
    w = m + 1.0
    if n_draws is None:
        return _logit(np.clip(_isotonic((k + 0.5) / w, w), 1e-6, 1 - 1e-6))
    raw = rng.beta(0.5 + k, 0.5 + m - k, size=(n_draws, k.size))
    return _logit(np.clip(_monotone(raw, w), 1e-9, 1 - 1e-9))


def _outside_pilot(unl: np.ndarray, pilot_scores: np.ndarray, cap: float) -> np.ndarray | None:
    """The group's scores outside its pilot (the rows its calibration labels are drawn from), or ``None``.

    Known when the pilot's rows are among the group's scores and ``cap`` is the number left: the multiset
    difference of the two. Otherwise (no cap, or a pilot that is not part of ``scores``) the population is
    taken as infinite: items drawn with replacement from the group's scores."""
    if not math.isfinite(cap):
        return None
    values, counts = np.unique(unl, return_counts=True)
    pv, pc = np.unique(pilot_scores, return_counts=True)
    at = np.searchsorted(values, pv)
    if np.any(at >= values.size) or np.any(values[np.minimum(at, values.size - 1)] != pv):
        return None
    left = counts.copy()
    left[at] -= pc
    if np.any(left < 0) or int(left.sum()) != int(cap):
        return None
    return np.repeat(values, left)


#: The grid of the group effect ``u`` (log odds to the pool) and of the groups' spread ``tau`` (``posterior``).
_U_GRID = np.linspace(-8.0, 8.0, 161)
_TAU_GRID = np.linspace(0.05, 4.0, 80)


def _logit(p):
    return np.log(p) - np.log1p(-p)


def _log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def _cell_loglik(l0, k, m) -> np.ndarray:
    """Log-likelihood of ``k`` positive losses in ``m`` pilot items per region at the log odds ``l0 + v``, for each
    ``v`` of :data:`_U_GRID`; ``l0``, ``k``, ``m`` broadcast to (..., B), the result has shape (..., B, U)."""
    l0 = np.asarray(l0)
    k, m = np.broadcast_to(k, l0.shape), np.broadcast_to(m, l0.shape)
    z = l0[..., None] + _U_GRID
    out = np.zeros(z.shape)  # a term whose count is 0 adds nothing: only the others are computed
    hit, miss = k > 0, m - k > 0
    out[hit] = k[hit][:, None] * _log_sigmoid(z[hit])
    out[miss] += (m - k)[miss][:, None] * _log_sigmoid(-z[miss])
    return out


def _lse(a: np.ndarray, axis: int) -> np.ndarray:
    top = a.max(axis=axis, keepdims=True)
    return np.squeeze(top, axis) + np.log(np.exp(a - top).sum(axis=axis))


#: The grids of a group's shared effect ``a_j`` (log odds to the pool at the pilot's mean score), of its slope
#: ``c_j`` (log odds per unit of score) and of their spreads across groups (``posterior``).
_A_GRID = np.linspace(-6.0, 6.0, 61)
_C_GRID = np.linspace(-8.0, 8.0, 41)
_S_GRID = np.linspace(0.05, 4.0, 20)


@dataclass(frozen=True)
class _Spread:
    """The posterior of the groups' curves around the pool (:func:`_spread_posterior`).

    ``tau``: the weights of the per-region spread on :data:`_TAU_GRID`; ``dx``: each region's score minus the pilot's
    mean; ``effect``: per group, the posterior weights (:data:`_A_GRID`, :data:`_C_GRID`) of its shift and slope.
    """

    tau: np.ndarray
    dx: np.ndarray
    effect: dict

    def of(self, group) -> tuple:
        """What :func:`_draw_posterior` reads for ``group``: (tau weights, dx, its (shift, slope) weights)."""
        return self.tau, self.dx, self.effect[group]


def _gauss(grid: np.ndarray, spread: np.ndarray, centre) -> np.ndarray:
    """Log weights (len(spread), len(grid)) of ``N(centre(s), s^2)`` for each spread ``s``, normalised over ``grid``."""
    s = np.asarray(spread, float)[:, None]
    logw = -0.5 * ((grid[None, :] - centre(s)) / s) ** 2
    return logw - _lse(logw, axis=1)[:, None]


def _spread_posterior(pilot, edges) -> _Spread:
    """The posterior of the groups' curves around the pool (``posterior``).

    The loss rate of group ``j`` in region ``b`` has the log odds ``l_b + a_j + c_j dx_b + v_jb`` (``l_b``: the
    pool's, :func:`_pooled_logit`; ``dx_b``: the region's score minus the pilot's mean): a **shift** ``a_j ~
    N(-sigma^2 / 2, sigma^2)`` and a **slope** ``c_j ~ N(0, kappa^2)`` (a group better or worse than the pool, by
    an amount that may change with the score: all its pilot items inform both), plus independent per-region
    deviations ``v_jb ~ N(-tau^2 / 2, tau^2)`` (mean-preserving: the pool's odds are the groups' mean). ``sigma``,
    ``kappa`` and ``tau`` have half-Cauchy(0, 1) priors (heavy-tailed: outlying groups may pull them up).
    ``(sigma, kappa)``'s likelihood is every group's pilot counts with its ``(a_j, c_j)`` integrated out (on
    :data:`_A_GRID` x :data:`_C_GRID`); each group's ``(a_j, c_j)`` posterior mixes over it; ``tau``'s likelihood is
    every (group, region) cell's counts with ``v_jb`` integrated out around the group's curve at its posterior mean.
    A thin pilot leaves the spreads near their priors: groups may differ much.
    """
    ps, pl, pg = pilot
    pb = np.searchsorted(edges, ps, side="right")
    n_bins, pos = edges.size + 1, pl > 0
    x = _region_x(ps, pb, edges)
    dx = x - float(np.mean(ps))
    l0 = _pooled_logit(np.bincount(pb, pos, n_bins), np.bincount(pb, minlength=n_bins))
    z = l0[None, None, :] + _A_GRID[:, None, None] + _C_GRID[None, :, None] * dx[None, None, :]  # (A, C, B)
    hc = -np.log1p(_S_GRID**2)  # half-Cauchy(0, 1)
    prior_a = _gauss(_A_GRID, _S_GRID, lambda s: -0.5 * s**2)  # (S, A)
    prior_c = _gauss(_C_GRID, _S_GRID, lambda s: 0.0 * s)  # (S, C)
    counts, lik = {}, {}
    log_sk = hc[:, None] + hc[None, :]  # (sigma, kappa)
    up, down = _log_sigmoid(z), _log_sigmoid(-z)  # the same for every group: computed once
    for name in np.unique(pg):
        own = pg == name
        k, m = np.bincount(pb[own], pos[own], n_bins), np.bincount(pb[own], minlength=n_bins)
        counts[name] = k, m
        lik[name] = (k * up + (m - k) * down).sum(axis=2)  # (A, C)
        per_c = _lse(prior_a[:, :, None] + lik[name][None], axis=1)  # (sigma, C)
        log_sk = log_sk + _lse(per_c[:, None, :] + prior_c[None, :, :], axis=2)
    w_sk = np.exp(log_sk - log_sk.max())
    w_sk /= w_sk.sum()
    mix = np.exp(prior_a).T @ w_sk @ np.exp(prior_c)  # (A, C): the shift and slope prior, spreads integrated out
    prior_t = _gauss(_U_GRID, _TAU_GRID, lambda s: -0.5 * s**2)  # (T, U): N(-tau^2 / 2, tau^2)
    log_tau, effect = -np.log1p(_TAU_GRID**2), {}
    for name, (k, m) in counts.items():
        post = np.log(np.maximum(mix, 1e-300)) + lik[name]
        post = np.exp(post - post.max())
        effect[name] = post / post.sum()
        a_hat = float(np.sum(effect[name].sum(axis=1) * _A_GRID))
        c_hat = float(np.sum(effect[name].sum(axis=0) * _C_GRID))
        seen = m > 0
        ll = _cell_loglik((l0 + a_hat + c_hat * dx)[seen], k[seen], m[seen])  # (cells, U)
        log_tau = log_tau + _lse(prior_t[:, None, :] + ll[None], axis=2).sum(axis=1)
    w_tau = np.exp(log_tau - log_tau.max())
    return _Spread(w_tau / w_tau.sum(), dx, effect)


def _draw_grid(logw: np.ndarray, grid: np.ndarray, rng) -> np.ndarray:
    """Per row of ``logw`` (rows, len(grid)): one point of ``grid`` drawn with weights ``exp(logw)``, jittered
    uniformly within its grid cell."""
    w = np.exp(logw - logw.max(axis=1, keepdims=True))
    idx = _weighted_choice(w, 1, rng)[:, 0]
    step = grid[1] - grid[0]
    return grid[idx] + (rng.random(idx.size) - 0.5) * step


def _draw_posterior(src: _Source, shape, rng):
    """Posterior-predictive calibration sets (module description, ``posterior``).

    In each score region ``b`` the probability of a positive loss is drawn once per posterior draw: first
    the pooled rate ``theta0_b`` of all pilot items, a projection-posterior draw (:func:`_pooled_logit`: Jeffreys
    per region, made non-decreasing in the score); then the group's shift ``a_j`` and slope ``c_j`` (its curve's
    log odds to the pool, ``a_j + c_j dx_b``) from their posterior (:func:`_spread_posterior`, :class:`_Spread`);
    then the groups' per-region spread ``tau`` from its posterior; then the group's deviation in the region,
    ``v_jb``, from its posterior on :data:`_U_GRID`: the prior ``N(-tau^2 / 2, tau^2)`` (mean-preserving: the
    pool's odds are the groups' mean) times the likelihood of the group's ``k_jb`` positive losses in its ``m_jb``
    pilot items of the region at the rate ``theta_jb = expit(logit theta0_b + a_j + c_j dx_b + v_jb)``. Where the
    group's pilot is thin, its curve and ``v_jb`` keep the whole spread of the groups (an outlying group is
    possible until its pilot rules it out); where it is large, its
    own counts pin it. A positive loss takes the value of a positive pilot loss of the region (the group's own
    if any, else the pool's, else ``loss_bound``): 1 for binary losses.

    With a finite ``population`` (the group's scores outside the pilot, :func:`_outside_pilot`), a calibration
    set holds distinct rows of it, drawn **without replacement** as calibration draws them: a group planned
    onto all its rows calibrates on exactly those rows' scores, and only the posterior varies.
    """
    (ps, pl, in_group), edges, unl, model = src.pilot, src.edges, src.unl, src.model
    n_resamples, n_items = shape
    pb = np.searchsorted(edges, ps, side="right")
    n_bins = edges.size + 1
    pos = pl > 0
    k_all, m_all = np.bincount(pb, pos, n_bins), np.bincount(pb, minlength=n_bins).astype(float)
    k_own, m_own = np.bincount(pb[in_group], pos[in_group], n_bins), np.bincount(pb[in_group], minlength=n_bins)
    l0 = _pooled_logit(k_all, m_all, n_resamples, rng)
    if src.spread is None:
        theta = 1.0 / (1.0 + np.exp(-l0))
    else:
        tau_w, dx, effect = src.spread
        cell = rng.choice(effect.size, size=n_resamples, p=effect.ravel())
        ia, ic = np.divmod(cell, _C_GRID.size)
        a = _A_GRID[ia] + (rng.random(n_resamples) - 0.5) * (_A_GRID[1] - _A_GRID[0])
        c = _C_GRID[ic] + (rng.random(n_resamples) - 0.5) * (_C_GRID[1] - _C_GRID[0])
        l0 = l0 + a[:, None] + c[:, None] * dx[None, :]  # the group's curve
        seen = m_own > 0
        tau = np.maximum(_draw_grid(np.log(np.broadcast_to(tau_w, (n_resamples, tau_w.size))), _TAU_GRID, rng), 1e-3)
        centre = -0.5 * tau[:, None, None] ** 2  # mean-preserving: E[exp(v)] = 1, the pool's odds are the groups' mean
        loglik = np.zeros((n_resamples, n_bins, _U_GRID.size))  # a region without pilot items adds nothing
        loglik[:, seen] = _cell_loglik(l0[:, seen], k_own[seen], m_own[seen])
        logw = -0.5 * ((_U_GRID - centre) / tau[:, None, None]) ** 2 + loglik  # (R, B, U)
        v = _draw_grid(logw.reshape(-1, _U_GRID.size), _U_GRID, rng).reshape(n_resamples, n_bins)
        theta = 1.0 / (1.0 + np.exp(-(l0 + v)))

    population = src.population
    if population is None or n_items > population.size:
        s = unl[rng.integers(0, unl.size, size=(n_resamples, n_items))]
    else:  # distinct rows outside the pilot, without replacement (each set has its own posterior draw, so
        # the losses of the rows it does not hold never matter)
        s = population[np.stack([rng.choice(population.size, n_items, replace=False) for _ in range(n_resamples)])]
    b = np.searchsorted(edges, s, side="right")
    hit = rng.random((n_resamples, n_items)) < np.take_along_axis(theta, b, axis=1)
    loss = np.zeros((n_resamples, n_items))
    at = np.flatnonzero(hit)  # the hits in row-major order, as ``loss[hit]`` visits them
    hit_bins = b.ravel()[at]
    values = np.full(at.size, float(src.loss_bound))
    for bin_ in np.unique(hit_bins):
        here = hit_bins == bin_
        own = pl[pos & in_group & (pb == bin_)]
        pick = own if own.size else pl[pos & (pb == bin_)]
        pick = pick if pick.size else pl[pos]
        if pick.size:
            values[here] = pick[rng.integers(0, pick.size, int(here.sum()))]
    loss.ravel()[at] = values
    if model.mix is None or not in_group.any():
        return s, loss
    # the Dirichlet-process posterior: the group's own pilot items (Bayesian-bootstrap weights) with the
    # weight m_j / (m_j + mix) in expectation, the region model above (the base measure) with the rest
    m = int(in_group.sum())
    w = rng.dirichlet(np.r_[np.ones(m), float(model.mix)], size=n_resamples)
    idx = _weighted_choice(w, n_items, rng)
    own = idx < m
    gs, gl = ps[in_group], pl[in_group]
    pick = np.minimum(idx, m - 1)
    return np.where(own, gs[pick], s), np.where(own, gl[pick], loss)


@dataclass(frozen=True, kw_only=True)
class PilotModel:
    """How a group's synthetic calibration sets are drawn from the pilot (module description).

    Parameters
    ----------
    kind : {"posterior", "auto", "bootstrap", "smoothed"}, default "posterior"
        ``posterior``: the hierarchical posterior of :func:`_draw_posterior`; ``auto``: ``bootstrap`` for groups
        with at least ``min_pilot`` pilot items, ``smoothed`` otherwise.
    uncertainty : bool, default True
        Bayesian-bootstrap weights on the pilot, new per resample (propagates pilot noise).
    min_pilot : int, default 30
        Smallest per-group pilot for ``bootstrap`` under ``auto``.
    bins : int, default 5
        Score bins of the ``smoothed`` model (quantiles of the pooled pilot scores).
    shrinkage : float, default 20
        Pseudo-count pulling a group's per-bin losses toward the pooled pilot (``smoothed``).
    mix : float or None, default None
        ``posterior``: ``None`` draws every synthetic item from the region model; a number ``a`` draws it
        from a Dirichlet-process posterior instead: one of the group's ``m`` pilot items (Bayesian-bootstrap
        weights, keeping the pilot's score–loss structure) with weight ``m / (m + a)`` in expectation, the
        region model with the rest.
    """

    kind: str = "posterior"
    uncertainty: bool = True
    min_pilot: int = 30
    bins: int = 5
    shrinkage: float = 20.0
    mix: float | None = None

    def __post_init__(self) -> None:
        check_choice("pilot", self.kind, PILOT_MODELS)
        check_bool("uncertainty", self.uncertainty)
        check_int("min_pilot", self.min_pilot, 1), check_int("bins", self.bins, 1)
        shrinkage = self.shrinkage
        if isinstance(shrinkage, bool) or not (isinstance(shrinkage, int | float) and shrinkage >= 0):
            raise ParameterError(f"shrinkage: must be a number >= 0 (inf: pooled), got {shrinkage!r}")
        mix = self.mix
        if mix is not None and (isinstance(mix, bool) or not (isinstance(mix, int | float) and 0 < mix < math.inf)):
            raise ParameterError(f"mix: must be None or a finite number > 0, got {mix!r}")


@dataclass(frozen=True, kw_only=True)
class PlanSpec:
    """What is planned, besides the calibration settings (:func:`predict`).

    Parameters
    ----------
    n_grid : array_like of int, optional
        Candidate label counts; default :func:`default_grid` up to ``max(cap)`` (or ``4 N``).
    n_resamples : int, default 200
        Synthetic calibration sets per group and ``n`` (calibrated in one batched call).
    traffic : dict or array_like, optional
        Each group's share of traffic; default the groups' shares of ``scores``.
    cap : dict, int or array_like, optional
        Most labels per group: the items it has **outside the pilot** (pilot items are not reused in
        calibration: ``docs/planning.md``); default no cap. Where the pilot's rows are among ``scores`` and
        the cap counts the rest, the ``posterior`` model draws calibration sets from those rows without
        replacement (a finite population); otherwise with replacement from all the group's scores.
    pool : dict, int or array_like, optional
        Calibration items available per group for ``bernoulli`` / ``resample`` recipes: then
        ``n`` labels mean the labelling probability ``n / pool_j`` on ``pool_j`` items.
    model : PilotModel or str, default ``PilotModel()``
        The pilot model (or its ``kind``).
    """

    n_grid: object = None
    n_resamples: int = 200
    traffic: object = None
    cap: object = None
    pool: object = None
    model: PilotModel | str = field(default_factory=PilotModel)

    def __post_init__(self) -> None:
        check_int("n_resamples", self.n_resamples, 2)
        if not isinstance(self.model, PilotModel):
            object.__setattr__(self, "model", PilotModel(kind=self.model))  # checked there


#: The settings the planner reads: G-PAC's (a calibrator's own, such as C-PAC's, must keep their defaults).
PLANNED_SETTINGS = _calibrate.GPAC.OPTIONS


def _check_settings(settings) -> Settings:
    """The planner's settings, refusing the ones it cannot honour (one line naming the setting)."""
    if not isinstance(settings, Settings):
        raise ParameterError(f"settings: must be a Settings (gpac_utils.settings), got {type(settings).__name__}")
    for name in settings.ignored(PLANNED_SETTINGS)[:1]:
        raise ParameterError(
            f"settings.{name}: the planner plans known groups (G-PAC) and cannot honour "
            f"{name}={getattr(settings, name)!r}; leave it at its default"
        )
    return settings


def n_needed(settings: Settings, k: int) -> int:
    """The fewest calibration items with which a group certifies anything, as calibration counts them.

    The larger of ``min_group_size`` and the recipe's minimum for the risk at the level each of ``k``
    groups is calibrated at (the :data:`~gpac_utils.settings.CORRECTIONS` entry's).
    """
    level = settings.alpha_per_group(max(1, int(k)))
    need = _feasibility.min_items(
        settings.eps, level, settings.recipe, loss_bound=settings.loss_bound, risk=settings.risk
    )
    return int(max(need, settings.min_group_size))


def _check_pilot(ps, pl, pg, names, min_pilot):
    """One-line errors / warnings naming a pilot group with no labelled row or no positive loss."""
    problem = pilot_problem(pl, min_pilot)
    if problem:
        warnings.warn(problem, PilotWarning, stacklevel=4)
    if pg is None:
        return
    missing = [x for x in names if not np.any(pg == x)]
    if missing:
        raise ParameterError(
            f"pilot_groups: group(s) {missing} have no labelled pilot row; label a few of their items "
            "(the planner would predict their routed share from other groups only)"
        )
    lossless = [x for x in names if not np.any(pl[pg == x] > 0)]
    if lossless:
        warnings.warn(
            f"pilot_groups: group(s) {lossless} show no positive loss in the pilot; their losses are predicted "
            "from the prior (the pooled pilot), and the band is wide",
            PilotWarning,
            stacklevel=4,
        )


def _per_group(name, value, names, default):
    if value is None:
        return np.full(len(names), default, dtype=float)
    if isinstance(value, dict):
        missing = [x for x in names if x not in value]
        if missing:
            raise ParameterError(f"{name}: no value for group(s) {missing}")
        return np.array([float(value[x]) for x in names])
    return np.broadcast_to(np.asarray(value, dtype=float), (len(names),)).copy()


def _grid(spec, cap_arr, n_scores) -> np.ndarray:
    n_grid = spec.n_grid
    if n_grid is None:
        finite = cap_arr[np.isfinite(cap_arr)]
        n_grid = default_grid(int(max(finite.max() if finite.size else 4 * n_scores, 1)))
    grid = np.asarray(n_grid)
    if grid.ndim != 1 or grid.size == 0 or np.any(grid < 1) or np.any(grid != np.round(grid)):
        raise ParameterError(f"n_grid: must be a non-empty list of positive integers, got {n_grid!r}")
    return np.unique(grid.astype(int))


#: predict()'s former pilot keywords: the PilotModel field each became.
_PILOT_MOVED = {
    "pilot_model": "kind",
    "pilot_uncertainty": "uncertainty",
    "min_pilot": "min_pilot",
    "bins": "bins",
    "shrinkage": "shrinkage",
}

#: predict()'s former keywords: where each went (a one-line TypeError; the old spellings were removed in 0.2.0).
_MOVED = {
    **{k: f"spec=PlanSpec({k}=...)" for k in ("n_grid", "n_resamples", "traffic", "cap", "pool")},
    "pilot": "spec=PlanSpec(model=...)",
    **{k: f"spec=PlanSpec(model=PilotModel({v}=...))" for k, v in _PILOT_MOVED.items()},
}


def _refuse_moved(func):
    """Wrap ``predict`` so that a former keyword is a one-line TypeError naming its new place."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        for old in kwargs:
            if old in _MOVED:
                raise TypeError(f"{old}: replaced by {_MOVED[old]} (removed in 0.2.0)")
        return func(*args, **kwargs)

    return wrapper


@_refuse_moved
@takes_settings(_calibrate.GPAC.SETTINGS)
def predict(scores, groups, pilot_scores, pilot_losses, pilot_groups=None, *, settings, spec=None) -> PlanCurves:
    """Predict each group's routed share as a function of its number of labels.

    Each synthetic calibration set is calibrated exactly as :class:`~gpac_utils.calibrate.GPAC` calibrates
    a group: a group with fewer items than ``min_group_size`` always thinks; the others go through the
    risk's own procedure (``settings.risk``: :data:`gpac_utils.risks.RISKS`) at the level
    ``settings.correction`` gives each of the groups.

    Parameters
    ----------
    scores : array_like, shape (N,)
        Unlabelled scores in ``[0, 1]`` of the traffic (free to collect).
    groups : array_like, shape (N,)
        Group of each unlabelled item.
    pilot_scores, pilot_losses : array_like, shape (M,)
        The labelled pilot: scores and losses in ``[0, loss_bound]``.
    pilot_groups : array_like, shape (M,), optional
        Group of each pilot item (every group needs at least one); ``None``: a pooled pilot (the
        pilot model becomes ``smoothed``: every group borrows the pooled loss-given-score).
    eps, alpha, recipe, loss_bound, min_group_size, seed, risk, correction : optional
        How each group will be calibrated: G-PAC's settings (:data:`PLANNED_SETTINGS`), each an explicit
        keyword with its declared default (:class:`~gpac_utils.settings.Settings`; ``eps`` has none), or
    settings : Settings, optional
        all of them at once (then give none of them: one away from its default beside it is refused,
        naming it); C-PAC's settings are refused (one line naming the setting).
    spec : PlanSpec, optional
        The label grid, resamples, traffic, caps, pool and pilot model (:class:`PlanSpec`).

    Returns
    -------
    PlanCurves

    Examples
    --------
    >>> import numpy as np
    >>> from gpac_utils.settings import Settings
    >>> rng = np.random.default_rng(1)
    >>> u = rng.uniform(size=1000)
    >>> loss = (rng.uniform(size=1000) < 0.05 * u).astype(float)
    >>> c = predict(u, np.zeros(1000), u[:300], loss[:300], np.zeros(300), settings=Settings(eps=0.05),
    ...             spec=PlanSpec(n_grid=[20, 200], n_resamples=40))
    >>> c.p_certify[0].tolist()[1] > c.p_certify[0].tolist()[0]
    True
    """
    settings = _check_settings(settings)
    spec = PlanSpec() if spec is None else spec
    if not isinstance(spec, PlanSpec):
        raise ParameterError(f"spec: must be a PlanSpec, got {type(spec).__name__}")
    eps, alpha, recipe, loss_bound, seed = (
        getattr(settings, k) for k in ("eps", "alpha", "recipe", "loss_bound", "seed")
    )
    model, n_resamples = spec.model, spec.n_resamples
    check_same_index(scores=scores, groups=groups)
    check_same_index(pilot_scores=pilot_scores, pilot_losses=pilot_losses, pilot_groups=pilot_groups)
    s = check_array("scores", scores, 0.0, 1.0, allow_bool=False)
    g = check_groups("groups", groups, s.size)
    ps = check_array("pilot_scores", pilot_scores, 0.0, 1.0, allow_bool=False)
    pl = check_array("pilot_losses", pilot_losses, 0.0, float(loss_bound))
    if pl.size != ps.size:
        raise ParameterError(f"pilot_losses: need one loss per pilot score ({ps.size}), got {pl.size}")
    if ps.size == 0:
        raise ParameterError("pilot_scores: the pilot is empty; label a few items first")
    names = sorted(set(g.tolist()))
    if not names:
        raise ParameterError("scores: no unlabelled items")
    pooled = pilot_groups is None
    pg = np.full(ps.size, "") if pooled else check_groups("pilot_groups", pilot_groups, ps.size)
    _check_pilot(ps, pl, None if pooled else pg, names, model.min_pilot)

    cap_arr = _per_group("cap", spec.cap, names, np.inf)
    if np.any(cap_arr < 0):
        raise ParameterError(f"cap: must be >= 0, got {cap_arr.tolist()}")
    pool_arr = _per_group("pool", spec.pool, names, np.nan)
    if spec.traffic is None:
        traffic_arr = np.array([np.mean(g == x) for x in names])
    else:
        traffic_arr = _per_group("traffic", spec.traffic, names, np.nan)
        if np.any(~np.isfinite(traffic_arr)) or np.any(traffic_arr < 0) or traffic_arr.sum() <= 0:
            raise ParameterError(f"traffic: must be non-negative shares, got {traffic_arr.tolist()}")
        traffic_arr = traffic_arr / traffic_arr.sum()
    grid = _grid(spec, cap_arr, s.size)

    G, K = len(names), grid.size
    level = settings.alpha_per_group(G)  # every planned group is calibrated (module description)
    need = n_needed(settings, G)
    # score regions: inner quantiles of the pilot scores (smoothed) or of all scores (posterior)
    edges = np.unique(np.quantile(ps, np.linspace(0, 1, max(1, int(model.bins)) + 1)[1:-1]))
    regions = _regions(s, model.bins)
    spread = None if pooled or model.kind != "posterior" else _spread_posterior((ps, pl, pg), regions)
    routed_shares = np.full((G, K, n_resamples), np.nan)
    certified = np.zeros((G, K, n_resamples), bool)
    n_items = np.zeros((G, K), dtype=int)
    pilot_models, pilot_sizes = {}, {}
    for j, name in enumerate(names):
        unl = np.sort(s[g == name])
        in_group = pg == name
        pilot_sizes[name] = int(in_group.sum())
        use = model.kind
        if pooled:
            use = "smoothed"
        elif use == "auto":
            use = "bootstrap" if pilot_sizes[name] >= model.min_pilot else "smoothed"
        pilot_models[name] = use
        shrink = math.inf if pooled else float(model.shrinkage)
        grs = np.random.default_rng([seed, j])  # per-group stream: adding a group changes no other
        population = _outside_pilot(unl, ps[in_group], cap_arr[j]) if use == "posterior" else None
        post_src = _Source(
            unl, (ps, pl, in_group), regions, model, loss_bound, population, None if spread is None else spread.of(name)
        )
        smooth_src = _Source(unl, (ps, pl, in_group), edges, model, shrinkage=shrink)
        for k, n in enumerate(grid):
            pj = pool_arr[j] if np.isfinite(pool_arr[j]) else None
            if n > cap_arr[j] or (pj is not None and recipe.sampling != "full" and n > pj):
                continue
            m_items, rate = _items_for(int(n), recipe, pj)
            n_items[j, k] = m_items
            if m_items < settings.min_group_size:  # as calibration: too few items, always think
                routed_shares[j, k] = 0.0
                continue
            if use == "bootstrap":
                cs, cl = _draw_bootstrap(ps[in_group], pl[in_group], m_items, n_resamples, grs, model.uncertainty)
            elif use == "posterior":
                cs, cl = _draw_posterior(post_src, (n_resamples, m_items), grs)
            else:
                cs, cl = _draw_smoothed(smooth_src, (n_resamples, m_items), grs)
            t = _calibrate.batch_threshold(  # the library's own procedure, on all resamples at once
                cs,
                cl,
                eps=eps,
                alpha=level,
                recipe=recipe,
                loss_bound=loss_bound,
                rng=grs,
                label_prob=rate,
                risk=settings.risk,
            )
            certified[j, k] = np.isfinite(t)
            routed_shares[j, k] = np.searchsorted(unl, t, side="right") / unl.size  # share of U <= t
    record = {
        **settings.to_dict(PLANNED_SETTINGS),
        "alpha_per_group": level,
        "n_needed": need,
        "labels_needed": _feasibility.expected_labels(need, recipe),
        "n_resamples": n_resamples,
        "pilot_model": model.kind,
        "pilot_uncertainty": bool(model.uncertainty),
    }
    return PlanCurves(
        names, grid, routed_shares, traffic_arr, cap_arr, n_items, pilot_sizes, pilot_models, record, certified
    )


def labels_needed(curves: PlanCurves, target: float, stat: str = "mean") -> pd.Series:
    """Smallest ``n`` on the grid whose predicted routed share reaches ``target``, per group.

    Parameters
    ----------
    curves : PlanCurves
    target : float
        Routed share of the group's traffic, in (0, 1].
    stat : {"mean", "q10"}, default "mean"
        ``q10``: reached in at least 90 % of the resamples.

    Returns
    -------
    pandas.Series of float
        Per group; ``nan`` when no grid point reaches the target (more labels than the grid, or
        never: the group's loss is too high among its low scores).
    """
    target = check_range("target", target, closed_right=True)
    if stat not in ("mean", "q10"):
        raise ValueError(f"stat: unknown {stat!r}; choose 'mean' or 'q10'")
    v = curves.mean if stat == "mean" else curves.band()[0]
    out = {}
    for j, g in enumerate(curves.groups):
        hit = np.flatnonzero(np.nan_to_num(v[j], nan=-1.0) >= target)
        out[g] = float(curves.n_grid[hit[0]]) if hit.size else math.nan
    return pd.Series(out, name=f"labels_for_{target:g}_{stat}")
