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
from dataclasses import dataclass, field, replace

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
from .feasibility import n_needed
from .pilot_draws import DRAWS, _outside_pilot, _regions, _Source, _spread_posterior
from .recipe import Recipe
from .settings import Settings, refusing, takes_settings

__all__ = [
    "PlanCurves",
    "PilotModel",
    "PlanSpec",
    "PLANNED_SETTINGS",
    "n_needed",
    "one_loss_items",
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
    return float(np.mean(np.isfinite(_thresholds(u, loss, settings, level, rng))))


def one_loss_items(settings: Settings, level: float) -> int | float:
    """The fewest calibration items with which a group certifies anything though its lowest-scored item has the
    largest loss (``loss_bound``) and no other item has any, calibrated at ``level``.

    From :func:`n_needed` up to this count, **one loss decides**: a loss of ``loss_bound`` (any positive loss, for
    binary losses) on a calibration set's lowest-scored label denies certification, so ``p_certify`` there is the
    pilot's estimate of the probability that that label is loss-free, which it sees only through its own few
    lowest-scored items (:attr:`PlanCurves.one_loss_decides`;
    ``docs/planning.md`` measures what that does). Found with the library's own calibration (:func:`_thresholds`)
    by bisection from :func:`n_needed` up to 64 times it (``math.inf`` beyond). A recipe that labels at random
    counts one *labelled* loss, a term of range ``loss_bound / label_prob`` among the recipe's terms: the count is
    the full-labelling one of that range, in the recipe's items.

    Examples
    --------
    >>> from gpac_utils.settings import Settings
    >>> settings = Settings(eps=0.1, alpha=0.1)
    >>> one_loss_items(settings, 0.1), int(n_needed(settings, 1))  # one loss needs about twice the items
    (47, 22)
    """
    if not isinstance(settings, Settings):
        raise ParameterError(f"settings: must be a Settings, got {type(settings).__name__}")
    return _one_loss_items(settings, check_range("level", level))


@functools.lru_cache(maxsize=256)
def _one_loss_items(settings: Settings, level: float) -> int | float:
    """:func:`one_loss_items` on checked arguments, cached (every :func:`predict` asks it once)."""
    recipe = settings.recipe
    if recipe.sampling != "full":  # a labelled loss is one term of range B / label_prob among the recipe's terms
        full = settings.replace(recipe=replace(recipe, sampling="full", label_prob=None))
        terms = _one_loss_items(full.replace(loss_bound=settings.loss_bound / recipe.label_prob), level)
        if not math.isfinite(terms):
            return math.inf
        n = int(terms) if recipe.sampling == "bernoulli" else max(1, int(recipe.label_prob * (terms - 1)))
        while _feasibility.terms_of(n, recipe) < terms:
            n += 1
        return max(n, settings.min_group_size)
    fields = {"recipe": recipe, "loss_bound": settings.loss_bound, "risk": settings.risk}
    lo = max(_feasibility.min_items(settings.eps, level, **fields), settings.min_group_size, 1)
    if not math.isfinite(lo):
        return math.inf

    def certifies(m: int) -> bool:
        u = np.linspace(0.0, 1.0, m)[None, :]
        loss = np.zeros_like(u)
        loss[:, 0] = settings.loss_bound
        t = _thresholds(u, loss, settings, level, np.random.default_rng([53, m]))
        return bool(np.isfinite(t).all())

    hi = 64 * int(lo)
    if not certifies(hi):
        return math.inf
    lo = int(lo) - 1  # below the fewest items that certify anything: certifies nothing
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if certifies(mid) else (mid, hi)
    return hi


def _thresholds(u, loss, settings: Settings, level: float, rng, label_prob=None) -> np.ndarray:
    """The library's thresholds of a batch of calibration sets, each calibrated as G-PAC calibrates a group at
    ``level`` (:func:`~gpac_utils.calibrate.batch_threshold`)."""
    fields = {k: getattr(settings, k) for k in ("eps", "recipe", "loss_bound", "risk")}
    return _calibrate.batch_threshold(u, loss, rng=rng, label_prob=label_prob, alpha=level, **fields)


class PilotWarning(UserWarning):
    """The pilot is too small to predict from (module description: the rule)."""


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
        """Expected routed share, shape (G, K) (``nan`` above the cap, where every resample is ``nan``)."""
        return self.routed_shares.mean(axis=-1)

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

    @property
    def one_loss_decides(self) -> np.ndarray:
        """Whether one loss decides the group's certification at ``n``, shape (G, K): from the fewest items that
        certify anything (``settings["n_needed"]``) to below :func:`one_loss_items` (``settings["n_one_loss"]``),
        within the cap. There one positive loss on the calibration set's lowest-scored label denies certification,
        and ``p_certify`` is the pilot's estimate of how often that label is loss-free."""
        lo, hi = self.settings.get("n_needed", 0), self.settings.get("n_one_loss", 0)
        return (self.n_items >= lo) & (self.n_items < hi) & ~np.isnan(self.routed_shares[..., 0])

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
                "one_loss_decides": self.one_loss_decides[j, k],
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
        if isinstance(self.shrinkage, bool) or not (isinstance(self.shrinkage, int | float) and self.shrinkage >= 0):
            raise ParameterError(f"shrinkage: must be a number >= 0 (inf: pooled), got {self.shrinkage!r}")
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


def _check_pilot(pl, pg, names, min_pilot):
    """A one-line warning for a pilot too small to predict from (the rule of the module description); one-line errors
    / warnings naming a pilot group with no labelled row or no positive loss."""
    n, k = int(np.size(pl)), int(np.sum(pl > 0))
    if n < min_pilot or k < MIN_POSITIVE:
        sign = {True: "<", False: ">="}
        problem = (
            f"the pilot has {n} labelled item(s) ({sign[n < min_pilot]} {min_pilot}) and {k} with a positive loss "
            f"({sign[k < MIN_POSITIVE]} {MIN_POSITIVE}): too small to predict from; label more"
        )
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


#: predict()'s former keywords: where each went (a one-line TypeError; the old spellings were removed in 0.2.0).
_MOVED_TO = {
    **{k: f"spec=PlanSpec({k}=...)" for k in ("n_grid", "n_resamples", "traffic", "cap", "pool")},
    "pilot": "spec=PlanSpec(model=...)",
    "pilot_model": "spec=PlanSpec(model=PilotModel(kind=...))",
    "pilot_uncertainty": "spec=PlanSpec(model=PilotModel(uncertainty=...))",
    **{k: f"spec=PlanSpec(model=PilotModel({k}=...))" for k in ("min_pilot", "bins", "shrinkage")},
}
_MOVED = {old: f"{old}: replaced by {new} (removed in 0.2.0)" for old, new in _MOVED_TO.items()}


@refusing(_MOVED)
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
    recipe, loss_bound = settings.recipe, settings.loss_bound
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
    _check_pilot(pl, None if pooled else pg, names, model.min_pilot)

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
    shrink = math.inf if pooled else float(model.shrinkage)  # smoothed: the pull to the pooled pilot
    for j, name in enumerate(names):
        unl = np.sort(s[g == name])
        in_group = pg == name
        pilot_sizes[name] = int(in_group.sum())
        use = "smoothed" if pooled else model.kind
        if use == "auto":
            use = "bootstrap" if pilot_sizes[name] >= model.min_pilot else "smoothed"
        pilot_models[name] = use
        grs = np.random.default_rng([settings.seed, j])  # per-group stream: adding a group changes no other
        if use == "posterior":
            population = _outside_pilot(unl, ps[in_group], cap_arr[j])
            group_spread = None if spread is None else spread[name]
            src = _Source(unl, (ps, pl, in_group), regions, model, loss_bound, population, group_spread)
        else:
            src = _Source(unl, (ps, pl, in_group), edges, model, shrinkage=shrink)
        for k, n in enumerate(grid):
            pj = pool_arr[j] if np.isfinite(pool_arr[j]) else None
            if n > cap_arr[j] or (pj is not None and recipe.sampling != "full" and n > pj):
                continue
            m_items, rate = _items_for(int(n), recipe, pj)
            n_items[j, k] = m_items
            if m_items < settings.min_group_size:  # as calibration: too few items, always think
                routed_shares[j, k] = 0.0
                continue
            cs, cl = DRAWS[use](src, (n_resamples, m_items), grs)
            t = _thresholds(cs, cl, settings, level, grs, rate)  # the library's own procedure, all resamples at once
            certified[j, k] = np.isfinite(t)
            routed_shares[j, k] = np.searchsorted(unl, t, side="right") / unl.size  # share of U <= t
    record = {
        **settings.to_dict(PLANNED_SETTINGS),
        "alpha_per_group": level,
        "n_needed": need,
        "n_one_loss": one_loss_items(settings, level),
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
