r"""Feasibility before calibration: can a group certify anything with the items it has?

A group of ``n`` calibration items certifies a threshold ``u`` when the upper confidence bound on
its risk at ``u`` is at most ``eps``. The *best case* is a group with no loss at all: every term
``z_i 1{U_i <= u}`` is then 0, at every candidate ``u`` (the lowest one included), so the bound is
the same at every candidate and equals the bound of ``m`` zero terms of range ``R``.

**Feasible** (at ``eps``, ``alpha``, the recipe's bound, sampling and ``label_prob``) means: with
``n`` items, *some* candidate threshold has a bound ``<= eps`` in this best case. It is a necessary
condition: a group below it always thinks, whatever its losses (status *always think: too few
items*); a group above it certifies when its losses are small enough, which the calibration
decides. The smallest such ``n`` is :func:`min_items`.

The number of terms and their range come from the sampling scheme (:mod:`gpac_utils.sampling`):
``full`` gives ``m = n`` terms of range ``R = B`` (the loss bound); ``bernoulli`` at rate ``pi``
gives ``m = n`` terms of range ``R = B / pi`` (an unlabelled item is a zero term), of which
``pi n`` are labelled in expectation; the paper's ``resample`` gives ``m = ceil(n / pi)`` terms of
range ``B / pi``. The smallest ``m`` with a best-case bound ``<= eps``, per bound
(:data:`FORMULAS`):

``hoeffding_bentkus`` (Bates et al. 2021) and ``clopper_pearson``
    both reduce at zero losses to the binomial tail: ``P(Bin(m, t) = 0) = (1 - t)^m = alpha``
    gives the bound ``R (1 - alpha^{1/m})`` (HB's Bentkus half, ``1 - (alpha/e)^{1/m}``, is
    larger), so ``m >= log(alpha) / log(1 - eps / R)``: 59 at ``eps = alpha = 0.05``, ``R = 1``
    (notebook ``32_label_budget`` derives it).
``empirical_bernstein`` (Maurer & Pontil (2009), Theorem 4)
    zero variance leaves ``R * 7 log(2/alpha) / (3 (m - 1))``, so
    ``m >= 1 + 7 R log(2/alpha) / (3 eps)``: 174 at ``eps = alpha = 0.05``, ``R = 1``.
``wsr`` (Waudby-Smith & Ramdas 2023)
    no closed form (predictable plug-in bets): the smallest ``m`` is found by evaluating the
    library's own bound on ``m`` zero terms (doubling, then bisection).
``hoeffding`` (the paper's)
    ``R sqrt(log(2/alpha) / (2m)) <= eps``, so ``m >= R^2 log(2/alpha) / (2 eps^2)``.
``clt`` (the paper's, asymptotic)
    zero variance gives a zero bound from ``m = 2``: no minimum, which is why it undercovers on
    small groups.

Every closed form is checked against the library's bound at ``m`` and ``m - 1`` (and moved by one
where floating point puts it on the wrong side), so :func:`min_terms` is exactly the smallest ``m``
at which :func:`gpac_utils.bounds.ucb` of ``m`` zero terms is ``<= eps``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from . import bounds as _bounds
from .checks import check_int, check_risk
from .recipe import VALID, Recipe, as_recipe
from .settings import CORRECTIONS

__all__ = ["FORMULAS", "best_case_ucb", "min_terms", "terms_of", "min_items", "expected_labels", "feasibility"]

#: The closed form of the smallest number of terms ``m`` per bound (``R``: the terms' range).
FORMULAS: dict[str, str] = {
    "hoeffding_bentkus": "m >= log(alpha) / log(1 - eps/R)",
    "clopper_pearson": "m >= log(alpha) / log(1 - eps/R)",
    "empirical_bernstein": "m >= 1 + 7 R log(2/alpha) / (3 eps)",
    "wsr": "numerical (no closed form)",
    "hoeffding": "m >= R^2 log(2/alpha) / (2 eps^2)",
    "clt": "m >= 2 (no minimum: asymptotic)",
}
#: The largest number of terms searched for a bound without a closed form.
MAX_TERMS = 10**7


def best_case_ucb(bound: str, m: int, alpha: float, term_range: float = 1.0) -> float:
    """The library's bound on ``m`` zero terms of range ``term_range``: the lowest any data can give.

    Parameters
    ----------
    bound : str
        A name in :data:`gpac_utils.bounds.BOUNDS`.
    m : int
        Number of terms, ``>= 1``.
    alpha : float
        Miscoverage level.
    term_range : float, default 1.0
        The range of the terms (``loss_bound / label_prob`` under Bernoulli labelling).

    Returns
    -------
    float

    Examples
    --------
    >>> round(best_case_ucb("hoeffding_bentkus", 59, 0.05), 4)  # 1 - 0.05 ** (1 / 59)
    0.0495
    """
    m = check_int("m", m, 1)
    z = np.zeros(m)
    return float(_bounds.ucb(bound, z, z, np.array([0.5]), alpha, term_range)[0])


def _binomial_tail(eps: float, alpha: float, r: float) -> float:
    if eps >= r:
        return 1.0
    step = math.log1p(-eps / r)  # 0 when eps / r underflows: no number of terms is enough
    return math.log(alpha) / step if step < 0 else math.inf


#: The closed form of each bound that has one (:data:`FORMULAS`): ``m(eps, alpha, R)``. A bound absent
#: here (``wsr``) is searched numerically; a new bound needs no entry.
CLOSED_FORMS = {
    "hoeffding_bentkus": _binomial_tail,
    "clopper_pearson": _binomial_tail,
    "empirical_bernstein": lambda eps, alpha, r: 1 + 7 * r * math.log(2 / alpha) / (3 * eps),
    "hoeffding": lambda eps, alpha, r: r * r * math.log(2 / alpha) / (2 * eps * eps),
    "clt": lambda eps, alpha, r: 2.0,
}


def min_terms(bound: str, eps: float, alpha: float, term_range: float = 1.0) -> int:
    """The smallest number of terms ``m`` whose best case (all zero) has a bound ``<= eps``.

    Parameters
    ----------
    bound : str
        A name in :data:`gpac_utils.bounds.BOUNDS`.
    eps, alpha : float
        Target risk and miscoverage level.
    term_range : float, default 1.0
        The range ``R`` of the terms.

    Returns
    -------
    int or float
        The closed form of :data:`FORMULAS`, checked against the library's bound; for ``wsr`` a
        numerical search; ``math.inf`` when more than :data:`MAX_TERMS` would be needed.

    Raises
    ------
    ValueError
        For an unknown bound.

    Examples
    --------
    >>> min_terms("hoeffding_bentkus", 0.05, 0.05), min_terms("empirical_bernstein", 0.05, 0.05)
    (59, 174)
    """
    if bound not in _bounds.BOUNDS:
        raise ValueError(f"bound: unknown {bound!r}; choose one of {list(_bounds.BOUNDS)}")

    def ok(m: int) -> bool:
        return best_case_ucb(bound, m, alpha, term_range) <= eps

    closed = CLOSED_FORMS.get(bound)
    with np.errstate(over="ignore"):
        m = None if closed is None else float(closed(eps, alpha, term_range))
    if m is not None and not m <= MAX_TERMS:  # overflow, or more terms than any calibration has
        return math.inf
    if m is None:  # wsr: double until feasible, then bisect (the zero-term bound falls with m)
        hi = 1
        while not ok(hi):
            hi *= 2
            if hi > MAX_TERMS:
                return math.inf
        lo = hi // 2  # not ok (or 0)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if ok(mid) else (mid, hi)
        return hi
    m = max(1, math.ceil(m))
    while not ok(m):  # floating point on the wrong side of the closed form
        m += 1
    while m > 1 and ok(m - 1):
        m -= 1
    return m


def terms_of(n_items: int, recipe: Recipe | str = VALID) -> int:
    """The number of terms a recipe's sampling draws from ``n_items`` items (``n / pi`` for ``resample``).

    Examples
    --------
    >>> terms_of(100, "paper"), terms_of(100, "valid-bernoulli")
    (200, 100)
    """
    recipe = as_recipe(recipe)
    if recipe.sampling == "resample":
        return int(math.ceil(n_items / recipe.label_prob - 1e-9))
    return int(n_items)


def min_items(eps: float, alpha: float, recipe: Recipe | str = VALID, *, loss_bound: float = 1.0) -> int:
    """The fewest calibration items with which a group can certify any threshold (module description).

    Parameters
    ----------
    eps, alpha : float
        Target risk and miscoverage level (``alpha / k`` for a simultaneous guarantee over ``k`` groups).
    recipe : Recipe or str, default ``"valid"``
        Its bound, sampling and ``label_prob`` decide the terms.
    loss_bound : float, default 1.0
        The loss bound ``B``.

    Returns
    -------
    int

    Examples
    --------
    >>> min_items(0.05, 0.05), min_items(0.05, 0.05, "valid-bernoulli")  # pi = 0.5: terms of range 2
    (59, 119)
    """
    eps, alpha, loss_bound = check_risk(eps, alpha, loss_bound)
    return _min_items(eps, alpha, as_recipe(recipe), loss_bound)


@functools.lru_cache(maxsize=1024)
def _min_items(eps: float, alpha: float, recipe: Recipe, loss_bound: float) -> int:
    """:func:`min_items` on checked arguments, cached (every ``fit`` asks it once)."""
    m = min_terms(recipe.bound, eps, alpha, loss_bound / recipe.label_prob)
    if recipe.sampling != "resample" or not math.isfinite(m):
        return m
    n = max(1, int(math.floor(recipe.label_prob * (m - 1))))
    while terms_of(n, recipe) < m:
        n += 1
    return n


def expected_labels(n_items: int, recipe: Recipe | str = VALID) -> float:
    """Expected number of expert labels the recipe uses on ``n_items`` items (``pi n`` under Bernoulli).

    Examples
    --------
    >>> expected_labels(119, "valid-bernoulli")
    59.5
    """
    recipe = as_recipe(recipe)
    return float(recipe.label_prob * terms_of(n_items, recipe))


def feasibility(
    group_sizes: Mapping[str, int],
    eps: float,
    alpha: float,
    recipe: Recipe | str = VALID,
    *,
    loss_bound: float = 1.0,
    min_group_size: int = 1,
    correction: str = "none",
) -> pd.DataFrame:
    """Per group: can any threshold be certified with the items available, and how many are needed?

    Parameters
    ----------
    group_sizes : mapping of str to int
        Calibration items per group (all items of a table, or a pilot's pool).
    eps, alpha, recipe, loss_bound
        As for :class:`~gpac_utils.calibrate.GPAC`.
    min_group_size : int, default 1
        The calibrator's own minimum (a smaller group always thinks whatever the bound).
    correction : str, default "none"
        How ``alpha`` is shared across the groups (:data:`gpac_utils.settings.CORRECTIONS`;
        ``"bonferroni"``: each is calibrated at ``alpha / k``).

    Returns
    -------
    pandas.DataFrame
        One row per group: ``group``, ``n``, ``expected_labelled`` (``pi n``), ``n_needed`` (the
        larger of :func:`min_items` and ``min_group_size``), ``labels_needed`` (expected labels at
        ``n_needed``), ``feasible`` (``n >= n_needed``), ``bound`` and ``formula``.

    Examples
    --------
    >>> feasibility({"a": 40, "b": 300}, 0.05, 0.05)[["group", "n_needed", "feasible"]].to_dict("list")
    {'group': ['a', 'b'], 'n_needed': [59, 59], 'feasible': [False, True]}
    """
    eps, alpha, loss_bound = check_risk(eps, alpha, loss_bound)
    recipe = as_recipe(recipe)
    group_sizes = {g: check_int(f"group_sizes[{g!r}]", n, 0) for g, n in group_sizes.items()}
    level = CORRECTIONS[CORRECTIONS.check(correction, "correction")].per_group(alpha, max(1, len(group_sizes)))
    need = max(min_items(eps, level, recipe, loss_bound=loss_bound), check_int("min_group_size", min_group_size, 1))
    rows = [
        {
            "group": str(g),
            "n": int(n),
            "expected_labelled": expected_labels(int(n), recipe),
            "n_needed": need,
            "labels_needed": expected_labels(need, recipe),
            "feasible": int(n) >= need,
            "bound": recipe.bound,
            "formula": FORMULAS.get(recipe.bound, "numerical (no closed form)"),
        }
        for g, n in group_sizes.items()
    ]
    cols = ["group", "n", "expected_labelled", "n_needed", "labels_needed", "feasible", "bound", "formula"]
    return pd.DataFrame(rows, columns=cols)
