r"""Upper confidence bounds on the thresholded risk :math:`R(u) = E[Z\,\mathbf 1\{U \le u\}]`.

Every bound takes the per-sample terms ``z`` (in ``[0, term_range]``) with their scores and
returns, for *all* candidate thresholds at once, an upper confidence bound at level
``1 - alpha``. Inputs may carry leading batch dimensions (many calibrations at once).

Every bound is an entry of the registry :data:`BOUNDS` (a :class:`Bound`), which carries its
properties: whether it is finite-sample ``valid``, ``sequential`` (order-dependent), needs
``binary_terms``, is ``monotone`` in each term, its function and the independent ``reference``
(:mod:`gpac_utils.bound_references`) it is tested against, its minimum-items rule
(:meth:`Bound.fewest_terms`: how many terms a loss-free group needs to certify anything,
:mod:`gpac_utils.feasibility`) and, where it has one, its p-value for the routed risk
(:attr:`Bound.pvalue`, :mod:`gpac_utils.risks`). Callers ask the entry; a new bound is one
:meth:`~gpac_utils.registry.Registry.register` call (``docs/extending.md``).

Two families:

``paper`` — what the paper uses (App. A):
    * ``clt`` — Algorithm 1: :math:`\hat\mu + z_{1-\alpha}\hat\sigma/\sqrt m` (asymptotic only);
    * ``hoeffding`` — :math:`\hat\mu + R\sqrt{\log(2/\alpha)/(2m)}` with ``R`` the ``term_range``
      (``loss_bound / pi_min`` for importance-weighted terms).

``valid`` — finite-sample valid for i.i.d. terms (the ``bernoulli`` and ``full`` schemes):
    * ``hoeffding_bentkus`` — Bates et al. (2021, RCPS) HB bound on ``z / term_range``;
    * ``empirical_bernstein`` — Maurer & Pontil (2009), Theorem 4;
    * ``wsr`` — Waudby-Smith & Ramdas (2023) betting bound, one-sided capital process with the
      predictable plug-in bets of Bates et al., running maximum (Ville), upper end found by a
      monotone Newton root search (no grid); the climb is :func:`gpac_utils.wsr.wsr_upper`, run by the
      fast path :mod:`gpac_utils.wsr_fast`, bit for bit the plain climb per calibration (its test's);
    * ``clopper_pearson`` — exact binomial bound; only when every ``z / term_range`` is 0 or 1.

The bounds that depend on the data only through prefix sums (the non-``sequential`` ones) are computed
from cumulative sums over the score-sorted sample: ``O(m log m + K log m)`` per calibration, and
the inversions run once per *distinct* prefix sum.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from . import bound_references, wsr_fast
from .checks import ParameterError
from .registry import Registry, removed

__all__ = ["Bound", "BOUNDS", "MAX_TERMS", "prefix_sums", "pvalue_bounds", "smallest_count", "ucb", "ucb_many"]

#: The largest number of terms a minimum-items search goes to (:meth:`Bound.fewest_terms`).
MAX_TERMS = 10**7


def _as_batch(z, scores, candidates):
    z = np.asarray(z, dtype=float)
    scores = np.asarray(scores, dtype=float)
    if z.shape != scores.shape:
        raise ValueError(f"z and scores must have the same shape, got {z.shape} and {scores.shape}")
    if z.ndim == 0 or z.shape[-1] == 0:
        raise ValueError("need at least one sample (z has no last-axis entries)")
    batch = z.shape[:-1]
    cand = np.atleast_1d(np.asarray(candidates, dtype=float))
    cand = np.broadcast_to(cand, batch + cand.shape[-1:])
    if np.any(np.diff(cand, axis=-1) < 0):
        raise ValueError("candidates must be sorted ascending along the last axis")
    m = z.shape[-1]
    return (z.reshape(-1, m), scores.reshape(-1, m), cand.reshape(-1, cand.shape[-1]), batch)


def prefix_sums(z, scores, candidates):
    """``S1[..., k] = sum_t z_t 1{U_t <= c_k}`` and ``S2`` (same with ``z_t**2``); ties included exactly.

    Parameters
    ----------
    z : array_like, shape (..., m)
        The terms.
    scores : array_like, shape (..., m)
        The score of each term's item.
    candidates : array_like, shape (..., K) or (K,)
        Candidate thresholds, ascending along the last axis.

    Returns
    -------
    S1, S2 : numpy.ndarray, shape (..., K)
        The sums of ``z`` and of ``z**2`` over the terms whose score is at most each candidate.

    Raises
    ------
    ValueError
        When ``z`` and ``scores`` differ in shape, there is no term, or the candidates are not
        ascending.
    """
    z2, s2d, cand, batch = _as_batch(z, scores, candidates)
    order = np.argsort(s2d, axis=1)
    sorted_scores = np.take_along_axis(s2d, order, axis=1)
    zs = np.take_along_axis(z2, order, axis=1)
    zero = np.zeros((zs.shape[0], 1))
    idx = np.empty(cand.shape, dtype=np.intp)
    for b in range(cand.shape[0]):  # the terms whose score is <= each candidate, ties included
        idx[b] = np.searchsorted(sorted_scores[b], cand[b], side="right")
    sums = (np.concatenate([zero, np.cumsum(v, axis=1)], axis=1) for v in (zs, zs * zs))
    return tuple(np.take_along_axis(c, idx, axis=1).reshape(batch + cand.shape[-1:]) for c in sums)


def _curve_at_scores(bound: Bound, z: np.ndarray, scores: np.ndarray, alpha: float, term_range: float):
    """One calibration's candidates ``"all"`` (its sorted scores) and a non-``sequential`` bound at each.

    The calibrators' path (:func:`gpac_utils.calibrate.threshold` and the fits), on checked terms
    ``z`` that carry the calibration ``scores`` in their order: the one sort of the scores gives
    both the candidates and the prefix sums. Bit for bit :func:`~gpac_utils.selection.candidate_grid`
    then :func:`ucb`.
    """
    order = np.argsort(scores)
    cand = scores[order]
    ends = np.append(np.flatnonzero(cand[1:] != cand[:-1]) + 1, cand.size)  # the end of each run of ties
    return cand, _curve(bound, z[order], np.repeat(ends, np.diff(ends, prepend=0)), z.size, alpha, term_range)


def _curve_of_nonzero(
    bound: Bound, z: np.ndarray, term_scores: np.ndarray, scores: np.ndarray, alpha: float, term_range
):
    """:func:`_curve_at_scores` for any terms of one calibration (``term_scores``: each term's score; terms
    drawn with replacement too), from its nonzero terms alone; ``None`` where that could change a bit.

    A zero term leaves every prefix sum as it is (``x + 0.0 == x``), and the sums are read only at the
    end of each run of equal scores, so the nonzero terms sorted by score give the prefix sums of
    :func:`prefix_sums` bit for bit, unless a run of equal scores holds unequal nonzero terms (their
    order would then matter) or a term is ``-0.0``. Under Bernoulli labelling most terms are zero.
    """
    nonzero = np.flatnonzero(z)
    if np.signbit(z).any():
        return None
    at = term_scores[nonzero]
    order = np.argsort(at)
    at, zs = at[order], z[nonzero][order]
    tied = at[1:] == at[:-1]
    if tied.any() and (zs[1:][tied] != zs[:-1][tied]).any():
        return None
    cand = np.sort(scores)
    # the nonzero terms scored at most each candidate: each term counts from the first candidate >= its score
    ends = np.cumsum(np.bincount(np.searchsorted(cand, at), minlength=cand.size))[: cand.size]
    return cand, _curve(bound, zs, ends, z.size, alpha, term_range)


def _curve(bound: Bound, zs: np.ndarray, ends: np.ndarray, m: int, alpha: float, term_range):
    """The bound of ``m`` terms at each candidate, from the terms sorted by score (zero terms may be left
    out) and the count of them scored at most each candidate."""
    c1 = np.concatenate(([0.0], np.cumsum(zs)))
    c2 = np.concatenate(([0.0], np.cumsum(zs * zs)))
    out = bound.function(c1[ends][None], c2[ends][None], m, alpha, term_range)
    return np.asarray(out, dtype=float).reshape(ends.shape)


# --- bounds from prefix sums -----------------------------------------------------------------


def _clt(s1, s2, m, alpha, term_range):
    mean = s1 / m
    if m < 2:
        return np.full_like(mean, np.inf)
    var = np.maximum(s2 - s1 * s1 / m, 0.0) / (m - 1)
    return mean + _normal_quantile(1 - alpha) * np.sqrt(var / m)


@functools.lru_cache(maxsize=256)
def _normal_quantile(level: float) -> float:
    """``scipy.stats.norm.ppf(level)``, once per level (its dispatch costs more than the curve at n = 1e4)."""
    return float(stats.norm.ppf(level))


def _hoeffding(s1, s2, m, alpha, term_range):
    return s1 / m + term_range * math.sqrt(math.log(2 / alpha) / (2 * m))


def _empirical_bernstein(s1, s2, m, alpha, term_range):
    if m < 2:
        return np.full_like(np.asarray(s1, float), np.inf)
    x1, x2 = s1 / term_range, s2 / (term_range * term_range)
    var = np.maximum(x2 - x1 * x1 / m, 0.0) / (m - 1)
    log_term = math.log(2 / alpha)
    ub = x1 / m + np.sqrt(2 * var * log_term / m) + 7 * log_term / (3 * (m - 1))
    return term_range * ub


def _kl(p, q):
    """Bernoulli KL divergence h1(p, q) with 0 log 0 = 0 (vectorised), inside the caller's ``np.errstate``."""
    a = np.where(p > 0, p * np.log(p / q), 0.0)
    b = np.where(p < 1, (1 - p) * np.log((1 - p) / (1 - q)), 0.0)
    return a + b


@np.errstate(divide="ignore", invalid="ignore")
def _hoeffding_root(mu, m, alpha, iters=50, tol=1e-13):
    """Smallest t >= mu with h1(mu, t) = c = log(1/alpha)/m (``1`` when there is none below 1).

    ``h1(mu, .)`` is convex and increasing on ``[mu, 1)``. The root is bracketed in
    ``[mu, mu + sqrt(c/2)]`` (Pinsker: ``h1 >= 2 (t - mu)^2``), the bracket narrowed by a few
    bisection steps, then Newton steps from its right end decrease monotonically to the root
    without crossing it: every iterate is a valid (conservative) upper end.
    """
    mu, c = np.asarray(mu, dtype=float), math.log(1 / alpha) / m
    top = 1.0 - 1e-15
    lo = mu.copy()
    hi = np.minimum(mu + math.sqrt(c / 2) + 1e-12, top)
    none_below_one = _kl(mu, hi) < c  # only possible when hi was clipped at 1
    for _ in range(12):
        mid = 0.5 * (lo + hi)
        over = _kl(mu, mid) >= c
        hi = np.where(over, mid, hi)
        lo = np.where(over, lo, mid)
    t = hi
    act = ~none_below_one & (t > mu)
    for _ in range(iters):
        if not act.any():
            break
        ta, ma = t[act], mu[act]
        step = (_kl(ma, ta) - c) * ta * (1 - ta) / (ta - ma)
        t[act] = ta - step
        act[act] = step > tol * ta
    return np.where(none_below_one, 1.0, np.maximum(t, mu))


def _unique_apply(values, fn):
    """Apply ``fn`` to the distinct entries of ``values`` only, and scatter back."""
    flat = np.asarray(values).ravel()
    ints = _small_counts(flat)
    if ints is not None:  # counts 0..m (binomial bounds): their distinct values by counting, not sorting
        present = np.bincount(ints) > 0
        uniq, inverse = np.flatnonzero(present).astype(flat.dtype), (np.cumsum(present) - 1)[ints]
    elif flat.size > 1 and not (flat[1:] >= flat[:-1]).all():
        uniq, inverse = np.unique(flat, return_inverse=True)
    else:  # ascending already (one calibration's prefix sums): its distinct values without a sort
        new = np.empty(flat.size, bool)
        new[:1] = True
        np.not_equal(flat[1:], flat[:-1], out=new[1:])
        uniq, inverse = flat[new], np.cumsum(new) - 1
    return np.asarray(fn(uniq)).reshape(-1)[inverse].reshape(np.shape(values))


def _small_counts(flat: np.ndarray) -> np.ndarray | None:
    """``flat`` as integers when it holds many whole numbers in ``[0, flat.size]`` (float counts), else None."""
    if flat.size < 1024 or flat.dtype.kind != "f":
        return None
    with np.errstate(invalid="ignore"):  # NaN or inf: cast to some integer, then refused below
        ints = flat.astype(np.int64)
    if ints.min() < 0 or ints.max() > flat.size or not np.array_equal(ints, flat):
        return None
    return ints


def _hoeffding_bentkus(s1, s2, m, alpha, term_range):
    mu = np.clip(s1 / (term_range * m), 0.0, 1.0)
    t_h = _unique_apply(mu, lambda v: _hoeffding_root(v, m, alpha))
    k = np.ceil(np.clip(s1 / term_range, 0, m))  # the binomial tail is evaluated at ceil(m * mu)
    return term_range * np.minimum(t_h, _unique_apply(k, lambda kk: _binomial_upper(kk, m, alpha / math.e)))


def _binomial_upper(k, m, level):
    """The ``t`` with ``P(Bin(m, t) <= k) = level`` (1 where ``k = m``), for each ``k``."""
    out = np.ones_like(k)
    inside = k < m
    # P(Bin(m, t) <= k) = level  <=>  t = I^{-1}_{1 - level}(k + 1, m - k)
    out[inside] = special.betaincinv(k[inside] + 1, m - k[inside], 1 - level)
    return out


def _clopper_pearson(s1, s2, m, alpha, term_range):
    return term_range * _unique_apply(np.rint(s1 / term_range), lambda k: _binomial_upper(k, m, alpha))


# --- minimum items and p-values ---------------------------------------------------------------


def _binomial_tail(eps: float, alpha: float, r: float) -> float:
    """``log(alpha) / log(1 - eps/R)``: zero terms give ``P(Bin(m, eps/R) = 0) = (1 - eps/R)^m``."""
    if eps >= r:
        return 1.0
    step = math.log1p(-eps / r)  # 0 when eps / r underflows: no number of terms is enough
    return math.log(alpha) / step if step < 0 else math.inf


def _bernstein_terms(eps: float, alpha: float, r: float) -> float:
    return 1 + 7 * r * math.log(2 / alpha) / (3 * eps)


def _hoeffding_terms(eps: float, alpha: float, r: float) -> float:
    return r * r * math.log(2 / alpha) / (2 * eps * eps)


def _two_terms(eps: float, alpha: float, r: float) -> float:
    return 2.0


def _binomial_pvalue(k, m, e):
    """Exact ``P(Bin(m, e) <= k)`` (binary terms: ``k`` whole)."""
    if not np.allclose(k, np.rint(k), atol=1e-9):
        raise ParameterError("bound: clopper_pearson needs binary terms; use hoeffding_bentkus")
    return stats.binom.cdf(np.rint(k), m, e)


def _hoeffding_bentkus_pvalue(k, m, e):
    """``min(exp(-m h1(min(mu, e), e)), e P(Bin(m, e) <= ceil(k)))`` with ``mu = k / m`` (Bates et al. 2021)."""
    mu = np.clip(k / m, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_h = np.exp(-m * _kl(np.minimum(mu, e), e))
    p_b = math.e * stats.binom.cdf(np.ceil(np.clip(k, 0, m)), m, e)
    return np.minimum(p_h, p_b)


def smallest_count(ok: Callable[[int], bool], guess: float | None = None) -> int | float:
    """The smallest ``m >= 1`` with ``ok(m)``, for an ``ok`` that stays true once true.

    From ``guess`` (a closed form), moved by one while floating point puts it on the wrong side;
    without one, doubling then bisection. ``math.inf`` beyond :data:`MAX_TERMS`.

    Examples
    --------
    >>> smallest_count(lambda m: m * m >= 50), smallest_count(lambda m: m * m >= 50, guess=7.07)
    (8, 8)
    """
    if guess is not None:
        if not guess <= MAX_TERMS:  # overflow, or more terms than any calibration has
            return math.inf
        m = max(1, math.ceil(guess))
        while not ok(m):
            m += 1
        while m > 1 and ok(m - 1):
            m -= 1
        return m
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


# --- the registry -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Bound:
    """An upper confidence bound on ``E[Z 1{U <= c}]`` and what it is.

    Parameters
    ----------
    name : str
        Its name (``Recipe(bound=name)``, ``--bound name``).
    function : callable
        A non-``sequential`` bound gets the prefix sums, ``function(s1, s2, m, alpha, term_range)``
        with ``s1``, ``s2`` of shape ``(B, K)`` (:func:`prefix_sums`); a ``sequential`` one gets the
        terms in their order, ``function(z, scores, candidates, alpha, term_range)`` of shapes
        ``(B, m)``, ``(B, m)``, ``(B, K)``. Both return the bound, shape ``(B, K)``; ``term_range``
        is a float or an array of shape ``(B, 1)``.
    valid : bool
        A finite-sample guarantee for i.i.d. terms (``False``: as the paper uses it, asymptotic).
    reference : callable
        An independent computation at one candidate, ``reference(x, alpha, R)`` on the thresholded
        terms ``x`` (:mod:`gpac_utils.bound_references`); the tests compare ``function`` to it.
    citation : str
        Where the bound comes from.
    sequential : bool, default False
        Order-dependent (a betting bound): the labels are shuffled before it sees them, and
        ``candidates="auto"`` gives it a fixed grid (its cost grows with the grid).
    monotone : bool, default False
        Non-decreasing in every term, so that any (even data-dependent) candidate grid keeps
        first-crossing selection exactly valid: :attr:`gpac_utils.recipe.Recipe.is_valid` reads it (a
        quantile grid, an int ``candidates``, is valid only with a monotone bound).
    binary_terms : bool, default False
        Needs every ``z / term_range`` to be 0 or 1.
    tolerance : float, default 1e-10
        Relative agreement with ``reference`` that the tests ask for.
    closed_form : callable or None, default None
        Its minimum-items rule in closed form, ``closed_form(eps, alpha, R)``: the (real) number of
        zero terms of range ``R`` whose bound reaches ``eps`` (:meth:`fewest_terms` checks it against
        the bound itself); ``None``: searched numerically.
    formula : str, default "numerical (no closed form)"
        That rule as text (``gpac plan``, notebook 32).
    pvalue : callable or None, default None
        Its p-value for the routed risk (:mod:`gpac_utils.risks`), ``pvalue(k, m, e)``: the
        p-value of ``H: mean > e`` for ``m`` i.i.d. terms in ``[0, 1]`` summing to ``k``, on arrays
        ``k``, ``m``, ``e`` of one shape (every grid point of every calibration at once; ``m >= 1``: the
        caller sets 1 where nothing is routed), returning p-values in ``[0, 1]`` of that shape (the shape and
        range are checked on one small example when the entry is made; its validity is not); ``None``: the
        routed risk cannot test with this bound.
    pvalue_formula : str, default "numerical (no closed form)"
        The p-value's minimum-items rule as text, with ``{level}`` for the test's level.
    """

    name: str
    function: Callable
    valid: bool
    reference: Callable
    citation: str
    sequential: bool = False
    monotone: bool = False
    binary_terms: bool = False
    tolerance: float = 1e-10
    closed_form: Callable[[float, float, float], float] | None = None
    formula: str = "numerical (no closed form)"
    pvalue: Callable | None = None
    pvalue_formula: str = "numerical (no closed form)"

    def __post_init__(self):
        if self.pvalue is None:
            return
        k, m = np.array([[0.0, 1.0]]), np.array([[2.0, 3.0]])
        try:  # one call on arrays, as the routed risk calls it
            p = np.asarray(self.pvalue(k, m, np.full(k.shape, 0.1)), dtype=float)
            got = None if p.shape == k.shape and np.all((p >= 0) & (p <= 1)) else f"{p.tolist()!r}"
        except Exception as exc:  # noqa: BLE001 (a scalar-only function fails on arrays: said in one line)
            got = f"{type(exc).__name__}: {str(exc).partition(chr(10))[0]}"
        if got is not None:
            raise ParameterError(
                f"pvalue: bound {self.name!r}: pvalue(k, m, e) takes arrays of one shape and returns p-values in "
                f"[0, 1] of that shape; on k={k.tolist()}, m={m.tolist()}, e=0.1 it gave {got}"
            )

    @property
    def kind(self) -> str:
        """``"valid"`` (finite-sample guarantee) or ``"paper"`` (as the paper uses it)."""
        return "valid" if self.valid else "paper"

    def best_case(self, m: int, alpha: float, term_range: float = 1.0) -> float:
        """The bound on ``m`` zero terms of range ``term_range``: the lowest any data can give."""
        z = np.zeros(int(m))
        return float(ucb_many([self.name], z, z, np.array([0.5]), alpha, term_range)[self.name][0])

    def fewest_terms(self, eps: float, alpha: float, term_range: float = 1.0) -> int | float:
        """The smallest ``m`` whose best case (:meth:`best_case`) is ``<= eps`` (``inf``: beyond :data:`MAX_TERMS`).

        Examples
        --------
        >>> BOUNDS["hoeffding_bentkus"].fewest_terms(0.05, 0.05), BOUNDS["wsr"].fewest_terms(0.05, 0.05) > 59
        (59, True)
        """
        guess = None
        if self.closed_form is not None:
            with np.errstate(over="ignore"):
                guess = float(self.closed_form(eps, alpha, term_range))
        return smallest_count(lambda m: self.best_case(m, alpha, term_range) <= eps, guess)

    def fewest_routed_terms(self, eps: float, level: float, term_range: float = 1.0) -> int | float:
        """The smallest ``m`` whose p-value (:attr:`pvalue`) on ``m`` zero terms is ``<= level``.

        Examples
        --------
        >>> BOUNDS["hoeffding_bentkus"].fewest_routed_terms(0.05, 0.05 / 64)
        140
        """
        if self.pvalue is None:
            raise ParameterError(f"bound: {self.name} has no p-value; the routed risk tests with {pvalue_bounds()}")
        e = eps / term_range
        if e >= 1:
            return math.inf
        return smallest_count(lambda m: float(self.pvalue(0.0, m, e)) <= level, _binomial_tail(eps, level, term_range))


#: Every bound, by name. The fast path of ``wsr`` (:mod:`gpac_utils.wsr_fast`) is bit for bit the plain climb
#: (:func:`gpac_utils.wsr.wsr_upper` per calibration: ``tests/test_bounds_exact.py``), too slow for n = 1e6.
BOUNDS: Registry[Bound] = Registry(
    "bound",
    [
        Bound(
            "clt",
            _clt,
            False,
            bound_references.clt_reference,
            "paper, Algorithm 1 (asymptotic)",
            closed_form=_two_terms,
            formula="m >= 2 (no minimum: asymptotic)",
        ),
        Bound(
            "hoeffding",
            _hoeffding,
            False,
            bound_references.hoeffding_reference,
            "paper, App. A",
            monotone=True,
            closed_form=_hoeffding_terms,
            formula="m >= R^2 log(2/alpha) / (2 eps^2)",
        ),
        Bound(
            "hoeffding_bentkus",
            _hoeffding_bentkus,
            True,
            bound_references.hoeffding_bentkus_reference,
            "Bates et al. (2021), RCPS",
            monotone=True,
            tolerance=2e-5,
            closed_form=_binomial_tail,
            formula="m >= log(alpha) / log(1 - eps/R)",
            pvalue=_hoeffding_bentkus_pvalue,
            pvalue_formula="m >= log({level}) / log(1 - eps/R)",
        ),
        Bound(
            "empirical_bernstein",
            _empirical_bernstein,
            True,
            bound_references.empirical_bernstein_reference,
            "Maurer & Pontil (2009), Theorem 4",
            closed_form=_bernstein_terms,
            formula="m >= 1 + 7 R log(2/alpha) / (3 eps)",
        ),
        Bound(
            "wsr",
            wsr_fast.wsr,
            True,
            bound_references.wsr_reference,
            "Waudby-Smith & Ramdas (2023)",
            sequential=True,
            tolerance=1e-6,
        ),
        Bound(
            "clopper_pearson",
            _clopper_pearson,
            True,
            bound_references.clopper_pearson_reference,
            "Clopper & Pearson (1934)",
            monotone=True,
            binary_terms=True,
            closed_form=_binomial_tail,
            formula="m >= log(alpha) / log(1 - eps/R)",
            pvalue=_binomial_pvalue,
            pvalue_formula="m >= log({level}) / log(1 - eps/R)",
        ),
    ],
)


def pvalue_bounds() -> list[str]:
    """The bounds with a p-value (:attr:`Bound.pvalue`): those the routed risk can test with.

    Examples
    --------
    >>> pvalue_bounds()
    ['hoeffding_bentkus', 'clopper_pearson']
    """
    return [name for name, b in BOUNDS.items() if b.pvalue is not None]


__getattr__ = removed(__name__, {"VALID_BOUNDS": "BOUNDS.names(valid=True)"})


# --- public entry point ----------------------------------------------------------------------


def ucb(bound: str, z, scores, candidates, alpha: float, term_range: float) -> np.ndarray:
    """Upper confidence bounds on ``E[Z 1{U <= c}]`` for every candidate ``c``.

    Parameters
    ----------
    bound : str
        A name in :data:`BOUNDS`.
    z : array_like, shape (..., m)
        The terms, in ``[0, term_range]``.
    scores : array_like, shape (..., m)
        The score of each term's item.
    candidates : array_like, shape (..., K) or (K,)
        Candidate thresholds, ascending along the last axis.
    alpha : float
        Miscoverage level, in ``(0, 1)``.
    term_range : float or array_like
        The range of ``z`` (``loss_bound / pi_min`` for importance-weighted terms); a float, or one
        value per calibration (shape of the batch dimensions).

    Returns
    -------
    numpy.ndarray, shape (..., K)
        The upper confidence bound at level ``1 - alpha`` at each candidate.

    Raises
    ------
    ValueError
        For an unknown bound, ``alpha`` outside ``(0, 1)``, mismatched shapes, candidates not
        ascending, a non-positive ``term_range``, terms outside ``[0, term_range]``, or
        non-binary terms for a bound that needs binary terms (``clopper_pearson``).
    """
    return ucb_many([bound], z, scores, candidates, alpha, term_range)[bound]


def ucb_many(bounds, z, scores, candidates, alpha: float, term_range: float) -> dict[str, np.ndarray]:
    """:func:`ucb` of several bounds on the same terms and candidates, sharing the prefix sums.

    Each curve is exactly (bit for bit) what :func:`ucb` returns for that bound; the inputs are
    checked once (a ``binary_terms`` bound among ``bounds`` checks that the terms are binary).

    Parameters
    ----------
    bounds : sequence of str
        Names in :data:`BOUNDS`.
    z, scores, candidates, alpha, term_range
        As for :func:`ucb`.

    Returns
    -------
    dict of str to numpy.ndarray
        One curve per bound, shape ``(..., K)``.
    """
    entries = [BOUNDS[b] for b in dict.fromkeys(bounds)]  # an unknown name: one line listing the known ones
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    z2, s2d, cand, batch = _as_batch(z, scores, candidates)
    ranges = np.asarray(term_range, dtype=float)
    if not (np.all(np.isfinite(ranges)) and np.all(ranges > 0)):
        raise ValueError(f"term_range must be > 0, got {term_range}")
    # an array: one range per calibration row
    term_range = np.broadcast_to(ranges, batch).reshape(-1, 1) if ranges.ndim else float(ranges)
    if not np.all(np.isfinite(z2)) or z2.min() < 0 or np.any(z2 > term_range * (1 + 1e-12)):
        raise ValueError("z must lie in [0, term_range] and be finite")
    binary = [b.name for b in entries if b.binary_terms]
    if binary:
        x = z2 / term_range
        if not np.all((x == 0) | (np.abs(x - 1) <= 1e-12)):
            others = BOUNDS.names(valid=True, binary_terms=False)
            raise ValueError(
                f"{binary[0]} needs every z / term_range to be 0 or 1 (binary loss "
                f"with a constant sampling weight); use one of {others} otherwise"
            )
    shape = batch + cand.shape[-1:]
    sums = None if all(b.sequential for b in entries) else prefix_sums(z2, s2d, cand)  # shared by the others
    curves = {}
    for bound in entries:  # a sequential bound reads the terms in their order
        args = (z2, s2d, cand) if bound.sequential else (*sums, z2.shape[1])
        curves[bound.name] = np.asarray(bound.function(*args, alpha, term_range), dtype=float).reshape(shape)
    return curves
