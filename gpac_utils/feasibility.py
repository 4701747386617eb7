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
range ``B / pi``. The smallest ``m`` with a best-case bound ``<= eps``, per bound (each
:class:`~gpac_utils.bounds.Bound` entry owns its rule: :attr:`~gpac_utils.bounds.Bound.closed_form`,
:attr:`~gpac_utils.bounds.Bound.formula`, :meth:`~gpac_utils.bounds.Bound.fewest_terms`):

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

**The risk decides the rule.** The above is the joint risk's (the paper's). The routed risk
(``risk="routed"``, :mod:`gpac_utils.risks`) tests its first point at level ``alpha / 64``, so a
loss-free group needs the fewest ``m`` whose p-value of ``m`` zero terms reaches ``alpha / 64``:
``m >= log(alpha/64) / log(1 - eps/R)``, 140 at ``eps = alpha = 0.05``. Each
:class:`~gpac_utils.risks.Risk` entry owns its rule (:attr:`~gpac_utils.risks.Risk.fewest_terms`);
:func:`min_items` and :func:`feasibility` take ``risk=``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import pandas as pd

from .bounds import BOUNDS
from .checks import ParameterError, check_int
from .recipe import VALID, Recipe, as_recipe
from .risks import get_risk
from .settings import Settings, check_risk, declarations, takes_settings

__all__ = ["best_case_ucb", "min_terms", "terms_of", "min_items", "expected_labels", "SETTINGS_READ", "feasibility"]


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
    return BOUNDS[BOUNDS.check(bound, "bound")].best_case(check_int("m", m, 1), alpha, term_range)


def min_terms(bound: str, eps: float, alpha: float, term_range: float = 1.0, *, risk: str = "joint") -> int:
    """The smallest number of terms ``m`` with which a loss-free group certifies anything.

    Parameters
    ----------
    bound : str
        A name in :data:`gpac_utils.bounds.BOUNDS`.
    eps, alpha : float
        Target risk and miscoverage level.
    term_range : float, default 1.0
        The range ``R`` of the terms.
    risk : str, default "joint"
        What is certified (:data:`gpac_utils.risks.RISKS`): its entry's rule
        (:attr:`~gpac_utils.risks.Risk.fewest_terms`). The joint risk's is the bound's best case
        (all terms zero) ``<= eps``.

    Returns
    -------
    int or float
        The bound's closed form checked against the bound itself, or a numerical search;
        ``math.inf`` when more than :data:`gpac_utils.bounds.MAX_TERMS` would be needed.

    Raises
    ------
    ValueError
        For an unknown bound or risk.

    Examples
    --------
    >>> min_terms("hoeffding_bentkus", 0.05, 0.05), min_terms("empirical_bernstein", 0.05, 0.05)
    (59, 174)
    >>> min_terms("hoeffding_bentkus", 0.05, 0.05, risk="routed")  # first test at alpha / 64
    140
    """
    entry = BOUNDS[BOUNDS.check(bound, "bound")]
    return get_risk(risk).fewest_terms(entry, eps, alpha, term_range)


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


def min_items(
    eps: float, alpha: float, recipe: Recipe | str = VALID, *, loss_bound: float = 1.0, risk: str = "joint"
) -> int:
    """The fewest calibration items with which a group can certify any threshold (module description).

    Parameters
    ----------
    eps, alpha : float
        Target risk and miscoverage level (``alpha / k`` for a simultaneous guarantee over ``k`` groups).
    recipe : Recipe or str, default ``"valid"``
        Its bound, sampling and ``label_prob`` decide the terms.
    loss_bound : float, default 1.0
        The loss bound ``B``.
    risk : str, default "joint"
        What is certified (:data:`gpac_utils.risks.RISKS`; ``"routed"`` needs more: module description).

    Returns
    -------
    int

    Examples
    --------
    >>> min_items(0.05, 0.05), min_items(0.05, 0.05, "valid-bernoulli")  # pi = 0.5: terms of range 2
    (59, 119)
    >>> min_items(0.05, 0.05, risk="routed"), min_items(0.1, 0.05, risk="routed")
    (140, 68)
    """
    eps, alpha, loss_bound = check_risk(eps, alpha, loss_bound)
    return _min_items(eps, alpha, as_recipe(recipe), loss_bound, get_risk(risk).name)


@functools.lru_cache(maxsize=1024)
def _min_items(eps: float, alpha: float, recipe: Recipe, loss_bound: float, risk: str) -> int:
    """:func:`min_items` on checked arguments, cached (every ``fit`` asks it once)."""
    m = min_terms(recipe.bound, eps, alpha, loss_bound / recipe.label_prob, risk=risk)
    if recipe.sampling != "resample" or not math.isfinite(m):
        return m
    n = max(1, int(math.floor(recipe.label_prob * (m - 1))))
    while terms_of(n, recipe) < m:
        n += 1
    return n


def n_needed(settings: Settings, k: int) -> int | float:
    """The fewest calibration items with which a group certifies anything, as calibration counts them.

    The larger of ``min_group_size`` and the recipe's minimum (:func:`min_items`) for the risk at the level each of
    ``k`` groups is calibrated at (the :data:`~gpac_utils.settings.CORRECTIONS` entry's); ``math.inf`` where no
    number of items is enough. Public as :func:`gpac_utils.prediction.n_needed` (the planner's).
    """
    level = settings.alpha_per_group(max(1, int(k)))
    need = _min_items(settings.eps, level, settings.recipe, settings.loss_bound, get_risk(settings.risk).name)
    return max(need, settings.min_group_size)


def expected_labels(n_items: int, recipe: Recipe | str = VALID) -> float:
    """Expected number of expert labels the recipe uses on ``n_items`` items (``pi n`` under Bernoulli; ``inf`` for
    ``inf`` items: :func:`n_needed` where nothing is enough).

    Examples
    --------
    >>> expected_labels(119, "valid-bernoulli")
    59.5
    """
    recipe = as_recipe(recipe)
    return float(recipe.label_prob * terms_of(n_items, recipe)) if math.isfinite(n_items) else math.inf


#: The :class:`~gpac_utils.settings.Settings` fields :func:`feasibility` reads (it refuses the others away
#: from their defaults: they would not change its answer).
SETTINGS_READ = ("eps", "alpha", "recipe", "loss_bound", "min_group_size", "correction", "risk")


@takes_settings([declarations()[name] for name in SETTINGS_READ])
def feasibility(group_sizes: Mapping[str, int], settings: Settings) -> pd.DataFrame:
    """Per group: can any threshold be certified with the items available, and how many are needed?

    Parameters
    ----------
    group_sizes : mapping of str to int
        Calibration items per group (all items of a table, or a pilot's pool).
    settings : Settings, optional
        The calibrator's settings, whole; it reads :data:`SETTINGS_READ` (``alpha`` shared across the groups
        by ``correction``; ``min_group_size``: a smaller group always thinks whatever the bound;
        ``risk``: its minimum-items rule) and refuses a setting it would ignore. Or:
    eps, alpha, recipe, loss_bound, min_group_size, correction, risk : optional
        The settings of :data:`SETTINGS_READ` as explicit keywords, each with its declared default
        (``eps`` has none): they build the settings (not beside ``settings``: refused, naming them).

    Returns
    -------
    pandas.DataFrame
        One row per group: ``group``, ``n``, ``expected_labelled`` (``pi n``), ``n_needed`` (the
        larger of :func:`min_items` and ``min_group_size``), ``labels_needed`` (expected labels at
        ``n_needed``), ``feasible`` (``n >= n_needed``), ``bound`` and ``formula`` (the risk's rule
        for the bound).

    Examples
    --------
    >>> from gpac_utils import Settings
    >>> table = feasibility({"a": 40, "b": 300}, Settings(eps=0.05))
    >>> table[["group", "n_needed", "feasible"]].to_dict("list")
    {'group': ['a', 'b'], 'n_needed': [59, 59], 'feasible': [False, True]}
    """
    if not isinstance(settings, Settings):
        kind = type(settings).__name__
        raise ParameterError(f"settings: must be a Settings (checked once, passed whole), got {kind}")
    for name in settings.ignored(SETTINGS_READ)[:1]:
        value = getattr(settings, name)
        raise ParameterError(f"settings: feasibility does not read {name}={value!r}; it reads {list(SETTINGS_READ)}")
    recipe, entry = settings.recipe, get_risk(settings.risk)
    group_sizes = {g: check_int(f"group_sizes[{g!r}]", n, 0) for g, n in group_sizes.items()}
    need = n_needed(settings, len(group_sizes))
    rows = [
        {
            "group": str(g),
            "n": int(n),
            "expected_labelled": expected_labels(int(n), recipe),
            "n_needed": need,
            "labels_needed": expected_labels(need, recipe),
            "feasible": int(n) >= need,
            "bound": recipe.bound,
            "formula": entry.formula(BOUNDS[recipe.bound]),
        }
        for g, n in group_sizes.items()
    ]
    cols = ["group", "n", "expected_labelled", "n_needed", "labels_needed", "feasible", "bound", "formula"]
    return pd.DataFrame(rows, columns=cols)
