r"""What a calibrator certifies: the risk definitions, by name (``risk=`` of PAC, G-PAC and C-PAC).

``"joint"`` (default: the paper's)
    :math:`R(u \mid G_j) = E[\ell\,\mathbf 1\{U \le u\} \mid G_j]`, the error the routing adds to
    the *whole* group (paper Section 4). It is non-decreasing in ``u``, and a threshold is read off
    an upper confidence bound curve (:func:`gpac_utils.calibrate.threshold`,
    :mod:`gpac_utils.selection`).
``"routed"``
    :math:`R_c(u \mid G_j) = E[\ell \mid U \le u, G_j]`, the error *among the items routed to the
    non-thinking model*; the guarantee is
    :math:`P\big(R_c(\hat u_j \mid G_j) \le \varepsilon\big) \ge 1 - \alpha` per group (no routed
    item, :math:`\hat u = -\infty`, counts as no violation). As :math:`R = R_c \cdot F` with
    :math:`F(u) = P(U \le u \mid G_j) \le 1`, a threshold with :math:`R_c \le \varepsilon` has
    :math:`R \le \varepsilon`: the routed risk is the stronger guarantee and typically routes less
    (the population's feasible thresholds are nested; estimated thresholds need not be)
    (:func:`gpac_utils.calibrate.routed_threshold`).

**Why the routed risk needs its own selection.** :math:`R_c` is not monotone in ``u`` (a group
whose most confident items are wrong has a high :math:`R_c` at small ``u``, lower further up), so
the first-crossing argument of :mod:`gpac_utils.selection`, which passes the *smallest* grid point
with risk above ``eps``, does not apply: a violation at the chosen threshold says nothing about
the points below it. :func:`~gpac_utils.calibrate.routed_threshold` is a Learn-then-Test procedure (Angelopoulos, Bates,
Candès, Jordan & Lei 2021): one hypothesis per grid point, a family-wise error control that needs
no monotonicity.

1. *Grid, ordered in advance.* ``K =`` :data:`ROUTED_GRID` evenly spaced points
   ``u_1 < ... < u_K`` of ``[lo, hi]`` (``[0, 1]``, or a split C-PAC group's interval, learned on
   the other half). ``H_k: R_c(u_k) > eps``.
2. *A valid p-value per point, conditional on the routed count.* Let ``N_k`` be the number of
   calibration items with ``U <= u_k``. Given ``N_k = m``, those ``m`` items are i.i.d. from the
   law of ``(U, loss)`` given ``U <= u_k`` (a binomial thinning of an i.i.d. sample), and so are
   their terms ``Z = xi * loss / pi`` (``bernoulli`` labelling; ``Z = loss`` for ``full``), with
   mean :math:`R_c(u_k)`. A p-value for ``mean <= eps`` of ``m`` i.i.d. terms in
   ``[0, term_range]`` (Hoeffding–Bentkus, or exact binomial for binary terms; ``m = 0`` gives 1)
   is then valid given ``N_k``, hence unconditionally: :math:`P(p_k \le a) \le a` under ``H_k``.
3. *Fallback procedure* (Wiens 2003), weights ``w_k = 1/K``: test ``H_1`` at level
   ``a_1 = alpha w_1``, then ``H_k`` at ``a_k = alpha w_k + a_{k-1} 1{H_{k-1} rejected}``: a
   rejection passes its level on, a non-rejection loses it, and the scan never stops.
4. *Selection.* ``u_hat`` is the largest rejected ``u_k`` (``-inf``: none, always think).

*Validity.* ``R_c(u_hat) > eps`` means the true ``H`` at ``u_hat`` was rejected, so it suffices
that the probability of rejecting *any* true ``H_k`` is at most ``alpha``. Let ``k_1 < k_2 < ...``
be the true hypotheses (a fixed set: the grid is fixed). If ``k_i`` is the first of them rejected,
``k_{i-1}`` was not, so the level carried to ``k_i`` started after ``k_{i-1}``:
``a_{k_i} <= alpha W_i`` with the fixed ``W_i = sum of w_k over k_{i-1} < k <= k_i``. Hence
:math:`P(\text{some true } H \text{ rejected}) \le \sum_i P(p_{k_i} \le \alpha W_i) \le \alpha
\sum_i W_i \le \alpha`, with any dependence between the p-values and with no monotonicity. Pure
fixed-sequence testing (``w_1 = 1``) is the special case that stops at the first non-rejection;
from the smallest ``u`` up it would stop at once, since the first points route too few items to
certify anything; the fallback's weights let the scan start where the data allow. The
recipe's ``rule`` and ``candidates`` are not used (the procedure above is the rule); its
``sampling`` must be ``full`` or ``bernoulli`` (``resample``'s terms are not i.i.d. given the
count), its ``bound`` one with a p-value (:attr:`gpac_utils.bounds.Bound.pvalue`).

*How many items.* The first rejection of the scan is tested at ``alpha / K`` (a level is carried
only from a rejection), so a group certifies anything only if some point's p-value reaches
``alpha / K``; at best every item is routed and loss-free, so a group needs the fewest ``m`` whose
p-value of ``m`` zero terms is at most ``alpha / K``: ``m >= log(alpha/64) / log(1 - eps/R)``,
140 at ``eps = alpha = 0.05`` against the joint risk's 59 (:attr:`Risk.fewest_terms`,
:func:`gpac_utils.feasibility.min_items`).

A new risk is one :meth:`~gpac_utils.registry.Registry.register` of a :class:`Risk` on
:data:`RISKS` (``docs/extending.md``): its step (:attr:`Risk.certify`), how it is evaluated on
routed items (:attr:`Risk.evaluate`) and its minimum-items rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from . import sampling as _sampling
from .bounds import BOUNDS, Bound, prefix_sums, pvalue_bounds
from .checks import ParameterError
from .recipe import Recipe
from .registry import Registry
from .selection import largest_rejected

__all__ = [
    "ROUTED_GRID",
    "Risk",
    "RISKS",
    "register_risk",
    "get_risk",
    "check_risk_recipe",
    "Problem",
    "routed_grid",
    "routed_pvalues",
    "fallback_reject",
    "largest_rejected",
    "routed_certify",
    "terms",
]

#: Grid points of the routed risk's selection (evenly spaced in ``[lo, hi]``, fixed in advance).
ROUTED_GRID = 64


def _joint_risk(losses: np.ndarray, routed: np.ndarray) -> float:
    """``mean(loss * routed)``: the error routing adds to the whole group."""
    return float(np.mean(losses * routed)) if losses.size else float("nan")


def _routed_risk(losses: np.ndarray, routed: np.ndarray) -> float:
    """``mean(loss | routed)``; 0 where nothing is routed (always think: no violation)."""
    return float(np.mean(losses[routed])) if routed.any() else 0.0


@dataclass(frozen=True, eq=False)
class Problem:
    """One calibration as a risk's step sees it (:attr:`Risk.certify`), its values checked.

    Parameters
    ----------
    eps : float
        Target risk.
    alpha : float
        The level of this calibration (a group's share after a correction).
    recipe : Recipe
        Bound, sampling, labelling probability, rule and candidates.
    loss_bound : float, default 1.0
        Upper end of the loss range.
    label_prob : float or numpy.ndarray or None, default None
        Labelling probabilities broadcastable to the losses (``None``: the recipe's).
    interval : (float, float), default (0.0, 1.0)
        The span of the evenly spaced grids (a split C-PAC group's interval).
    """

    eps: float
    alpha: float
    recipe: Recipe
    loss_bound: float = 1.0
    label_prob: float | np.ndarray | None = None
    interval: tuple[float, float] = (0.0, 1.0)

    @property
    def probs(self):
        """The labelling probabilities the sampling uses: ``label_prob``, else the recipe's."""
        return self.recipe.label_prob if self.label_prob is None else self.label_prob


@dataclass(frozen=True)
class Risk:
    """A risk definition: what a calibrator certifies per group.

    Parameters
    ----------
    name : str
        Its name (the value of ``risk=`` and ``--risk``).
    summary : str
        One line: the risk as a formula, and what it means.
    certify : callable or None
        The calibrators' step for one group, ``certify(scores, losses, problem, rng)`` as
        :func:`routed_certify` (checked 1-D arrays, a :class:`Problem`, a generator): returns
        ``(threshold, labelled, bound)``, the expert labels drawn and the certified upper bound at
        the threshold (``None`` where the risk certifies by tests, not by a bound). ``None`` until
        registered (the joint risk's is in :mod:`gpac_utils.calibrate`, which registers itself).
    evaluate : callable
        ``evaluate(losses, routed) -> float``: the risk of a routing on items whose losses are known
        (a test split, or a whole table taken as the population): what :func:`gpac_utils.experiment.run_experiment`
        reports as ``pop_risk`` and compares with ``eps``.
    threshold : callable or None, default None
        :attr:`certify` for a batch (leading axes), ``threshold(scores, losses, problem, rng)``,
        returning the thresholds only (:func:`gpac_utils.calibrate.batch_threshold`); ``None``: ``certify``'s threshold,
        one calibration at a time.
    samplings : tuple of str, or None, default None
        The label sampling schemes its selection is valid with (``None``: any).
    pvalue : bool, default False
        It tests with the bound's p-value (:attr:`gpac_utils.bounds.Bound.pvalue`): a bound without
        one is refused.
    fewest_terms : callable, default: the bound's own minimum
        ``fewest_terms(bound, eps, alpha, R)``: the fewest terms of range ``R`` with which a loss-free
        group certifies anything (:func:`gpac_utils.feasibility.min_items`; ``bound`` a
        :class:`~gpac_utils.bounds.Bound`).
    formula : callable, default: the bound's formula
        ``formula(bound)``: that rule as text.
    conditional : bool, default False
        Whether the risk is conditional on the route, i.e. averaged over the items routed to the
        non-thinking model only (``gpac audit`` tests it given their number), not over the group.
    """

    name: str
    summary: str
    certify: Callable[..., tuple] | None
    evaluate: Callable[[np.ndarray, np.ndarray], float]
    threshold: Callable[..., np.ndarray] | None = None
    samplings: tuple[str, ...] | None = None
    pvalue: bool = False
    fewest_terms: Callable[[Bound, float, float, float], int | float] = Bound.fewest_terms
    formula: Callable[[Bound], str] = attrgetter("formula")
    conditional: bool = False


#: The risk definitions, by name ("joint" first: the default).
RISKS: Registry[Risk] = Registry("risk")


def register_risk(name: str, summary: str, certify, evaluate, **properties) -> Risk:
    """Add (or replace) a risk definition under ``name`` (the value of ``risk=`` and ``--risk``); returns it."""
    return RISKS.register(Risk(name, summary, certify, evaluate, **properties), replace=True)


def get_risk(name: str) -> Risk:
    """The risk definition called ``name`` (a one-line ``ParameterError`` naming ``risk`` otherwise).

    Examples
    --------
    >>> get_risk("routed").name
    'routed'
    """
    return RISKS[RISKS.check(name, "risk")]


def check_risk_recipe(risk: str, recipe: Recipe) -> None:
    """Refuse a recipe the risk cannot certify with (one-line ``ParameterError`` naming ``risk``)."""
    entry = get_risk(risk)
    sampling_ok = entry.samplings is None or recipe.sampling in entry.samplings
    if not (sampling_ok and (not entry.pvalue or BOUNDS[recipe.bound].pvalue is not None)):
        bounds = pvalue_bounds() if entry.pvalue else ["any"]
        raise ParameterError(
            f"risk: {risk!r} needs sampling one of {list(entry.samplings or ['any'])} and bound one of "
            f"{bounds}, got {recipe.sampling!r} and {recipe.bound!r}"
        )


def routed_grid(interval=(0.0, 1.0), size: int = ROUTED_GRID) -> np.ndarray:
    """The routed risk's grid: ``size`` evenly spaced points of ``[lo, hi]``, ascending.

    Examples
    --------
    >>> routed_grid((0.0, 1.0), 5).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    lo, hi = (float(v) for v in interval)
    if not 0.0 <= lo <= hi <= 1.0:
        raise ParameterError(f"interval: must satisfy 0 <= lo <= hi <= 1, got {interval!r}")
    return np.linspace(lo, hi, int(size))


def routed_pvalues(z, scores, grid, eps: float, term_range, bound: str = "hoeffding_bentkus"):
    """Per grid point, the p-value of ``H: E[Z | U <= u] > eps`` from the routed items' terms.

    Parameters
    ----------
    z, scores : array_like, shape (..., n)
        The terms (in ``[0, term_range]``) and their items' scores.
    grid : array_like, shape (K,) or (..., K)
        Ascending thresholds.
    eps : float
        The target of the routed risk.
    term_range : float or array_like
        The range of the terms (one per calibration for a batch).
    bound : str, default "hoeffding_bentkus"
        A bound with a p-value (:attr:`gpac_utils.bounds.Bound.pvalue`). Hoeffding–Bentkus p-value
        (Bates et al. 2021): ``min(exp(-m h1(min(mu, e), e)),
        e * P(Bin(m, e) <= ceil(m mu)))`` with ``mu`` the routed terms' mean and ``e = eps /
        term_range``; or the exact binomial ``P(Bin(m, e) <= k)`` (binary terms only).

    Returns
    -------
    pvalues : numpy.ndarray, shape (..., K)
        In ``[0, 1]``; 1 where no item is routed.
    routed : numpy.ndarray, shape (..., K)
        The routed count ``m`` at each point.
    """
    pvalue = BOUNDS[bound].pvalue
    if pvalue is None:
        raise ParameterError(f"bound: risk='routed' tests with one of {pvalue_bounds()}, got {bound!r}")
    s1, _ = prefix_sums(z, scores, grid)
    m = np.rint(prefix_sums(np.ones(np.shape(z)), scores, grid)[0])  # the routed count at each point
    tr = np.asarray(term_range, dtype=float)
    tr = tr[..., None] if tr.ndim else float(tr)
    e = np.broadcast_to(eps / tr, m.shape)
    if np.any(e >= 1):
        raise ParameterError(f"eps: the routed risk needs eps < term_range, got eps={eps}")
    k = s1 / tr  # the sum of the terms in units of term_range
    p = pvalue(k, np.maximum(m, 1), e)
    return np.where(m > 0, np.minimum(p, 1.0), 1.0), m.astype(int)


def fallback_reject(pvalues, alpha: float, weights=None) -> np.ndarray:
    """The fallback procedure over the last axis (order as given): which hypotheses are rejected.

    ``H_k`` is tested at ``alpha w_k`` plus the level of ``H_{k-1}`` if that was rejected
    (module description); the family-wise error is at most ``alpha`` for any dependence.

    Parameters
    ----------
    pvalues : array_like, shape (..., K)
        One p-value per hypothesis, in the order fixed in advance.
    alpha : float
        Family-wise error level.
    weights : array_like, shape (K,), optional
        Non-negative, summing to at most 1; default ``1/K`` each. ``(1, 0, ..., 0)`` is pure
        fixed-sequence testing.

    Returns
    -------
    numpy.ndarray of bool, shape (..., K)

    Examples
    --------
    >>> fallback_reject([0.9, 0.01, 0.02, 0.5], 0.1).tolist()  # levels 0.025, 0.025, 0.05, 0.075
    [False, True, True, False]
    >>> fallback_reject([0.9, 0.01, 0.02, 0.5], 0.1, weights=[1, 0, 0, 0]).tolist()  # fixed sequence
    [False, False, False, False]
    """
    p = np.asarray(pvalues, dtype=float)
    K = p.shape[-1]
    w = np.full(K, 1.0 / K) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != (K,) or np.any(w < 0) or w.sum() > 1 + 1e-12:
        raise ParameterError(f"weights: need {K} non-negative weights summing to at most 1")
    out = np.zeros(p.shape, bool)
    carried = np.zeros(p.shape[:-1])
    for k in range(K):
        level = alpha * w[k] + carried
        out[..., k] = p[..., k] <= level
        carried = np.where(out[..., k], level, 0.0)
    return out


def terms(scores, losses, problem: Problem, rng):
    """The routed risk's label terms of one calibration, in input order (its recipe checked first)."""
    check_risk_recipe("routed", problem.recipe)
    recipe = problem.recipe
    return _sampling.draw(scores, losses, recipe.sampling, problem.probs, rng, problem.loss_bound, shuffle=False)


def routed_certify(scores, losses, problem: Problem, rng):
    """:func:`~gpac_utils.calibrate.routed_threshold`'s step (:attr:`Risk.certify`) on checked arguments,
    with what the calibrators record: ``(threshold, labelled, None)`` (the routed risk certifies by
    tests, so no upper bound is recorded at the threshold)."""
    d = terms(scores, losses, problem, rng)
    grid = routed_grid(problem.interval)
    p, _ = routed_pvalues(d.z, d.scores, grid, problem.eps, d.term_range, problem.recipe.bound)
    return largest_rejected(grid, fallback_reject(p, problem.alpha)), np.asarray(d.n_queried), None


def _routed_minimum(bound: Bound, eps: float, alpha: float, term_range: float) -> int | float:
    """The routed risk's minimum: the first rejection is tested at ``alpha / ROUTED_GRID`` (a
    rejection before it would carry its level on), so a loss-free group of ``m`` items certifies
    anything only when the bound's p-value of ``m`` zero terms is at most ``alpha / ROUTED_GRID``:
    ``m >= log(alpha/64) / log(1 - eps/R)``, 140 at ``eps = alpha = 0.05``."""
    return bound.fewest_routed_terms(eps, alpha / ROUTED_GRID, term_range)


def _routed_formula(bound: Bound) -> str:
    return bound.pvalue_formula.format(level=f"alpha/{ROUTED_GRID}")


# "joint" is certified by gpac_utils.calibrate, which registers its step here (calibrate imports this
# module, not the other way round); "joint" is listed first, as the default.
register_risk("joint", "E[loss 1{U <= u}]: the error routing adds to the whole group (the paper's)", None, _joint_risk)
register_risk(
    "routed",
    "E[loss | U <= u]: the error among the items routed to the non-thinking model",
    routed_certify,
    _routed_risk,
    samplings=("full", "bernoulli"),
    pvalue=True,
    fewest_terms=_routed_minimum,
    formula=_routed_formula,
    conditional=True,
)
