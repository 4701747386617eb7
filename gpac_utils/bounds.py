r"""Upper confidence bounds on the thresholded risk :math:`R(u) = E[Z\,\mathbf 1\{U \le u\}]`.

Every bound takes the per-sample terms ``z`` (in ``[0, term_range]``) with their scores and
returns, for *all* candidate thresholds at once, an upper confidence bound at level
``1 - alpha``. Inputs may carry leading batch dimensions (many calibrations at once).

Every bound is an entry of the registry :data:`BOUNDS` (a :class:`Bound`), which carries its
properties: whether it is finite-sample ``valid``, ``sequential`` (order-dependent), needs
``binary_terms``, is ``monotone`` in each term, its function and the independent ``reference``
(:mod:`gpac_utils.bound_references`) it is tested against. Callers ask the entry; a new bound is
one :meth:`~gpac_utils.registry.Registry.register` call (``docs/extending.md``).

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
      monotone Newton root search (no grid); the climb is :func:`gpac_utils.wsr.wsr_upper`, run
      per calibration by the plain path here and by the bit-identical fast path :mod:`gpac_utils.wsr_fast`;
    * ``clopper_pearson`` — exact binomial bound; only when every ``z / term_range`` is 0 or 1.

The bounds that depend on the data only through prefix sums (the non-``sequential`` ones) are computed
from cumulative sums over the score-sorted sample: ``O(m log m + K log m)`` per calibration, and
the inversions run once per *distinct* prefix sum.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from . import bound_references, wsr, wsr_fast
from .registry import Registry, removed

__all__ = ["Bound", "BOUNDS", "prefix_sums", "ucb", "ucb_many"]


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
    c1 = np.concatenate([zero, np.cumsum(zs, axis=1)], axis=1)
    c2 = np.concatenate([zero, np.cumsum(zs * zs, axis=1)], axis=1)
    idx = np.empty(cand.shape, dtype=np.intp)
    for b in range(cand.shape[0]):  # the terms whose score is <= each candidate, ties included
        idx[b] = np.searchsorted(sorted_scores[b], cand[b], side="right")
    s1 = np.take_along_axis(c1, idx, axis=1)
    s2 = np.take_along_axis(c2, idx, axis=1)
    k = cand.shape[-1]
    return s1.reshape(batch + (k,)), s2.reshape(batch + (k,))


def _curve_at_scores(bound: Bound, z: np.ndarray, scores: np.ndarray, alpha: float, term_range: float):
    """One calibration's candidates ``"all"`` (its sorted scores) and a non-``sequential`` bound at each.

    The calibrators' path (:func:`gpac_utils.calibrate.threshold` and the fits), on checked terms
    ``z`` that carry the calibration ``scores`` in their order: the one sort of the scores gives
    both the candidates and the prefix sums. Bit for bit :func:`~gpac_utils.selection.candidate_grid`
    then :func:`ucb`.
    """
    order = np.argsort(scores)
    cand = scores[order]
    zs = z[order]
    c1 = np.concatenate(([0.0], np.cumsum(zs)))
    c2 = np.concatenate(([0.0], np.cumsum(zs * zs)))
    idx = np.searchsorted(cand, cand, side="right")  # the terms scored at most each candidate, ties included
    out = bound.function(c1[idx][None], c2[idx][None], z.size, alpha, term_range)
    return cand, np.asarray(out, dtype=float).reshape(cand.shape)


# --- bounds from prefix sums -----------------------------------------------------------------


def _clt(s1, s2, m, alpha, term_range):
    mean = s1 / m
    if m < 2:
        return np.full_like(mean, np.inf)
    var = np.maximum(s2 - s1 * s1 / m, 0.0) / (m - 1)
    return mean + stats.norm.ppf(1 - alpha) * np.sqrt(var / m)


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


def _kl_bernoulli(p, q):
    """Bernoulli KL divergence h1(p, q) with 0 log 0 = 0 (vectorised)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _kl(np.asarray(p, float), q)


def _kl(p, q):
    """:func:`_kl_bernoulli` inside the caller's ``np.errstate`` (the root search's loop)."""
    a = np.where(p > 0, p * np.log(p / q), 0.0)
    b = np.where(p < 1, (1 - p) * np.log((1 - p) / (1 - q)), 0.0)
    return a + b


def _hoeffding_root(mu, m, alpha, iters=50, tol=1e-13):
    """Smallest t >= mu with h1(mu, t) = log(1/alpha)/m (``1`` when there is none below 1).

    ``h1(mu, .)`` is convex and increasing on ``[mu, 1)``. The root is bracketed in
    ``[mu, mu + sqrt(c/2)]`` (Pinsker: ``h1 >= 2 (t - mu)^2``), the bracket narrowed by a few
    bisection steps, then Newton steps from its right end decrease monotonically to the root
    without crossing it: every iterate is a valid (conservative) upper end.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return _root(np.asarray(mu, dtype=float), math.log(1 / alpha) / m, iters, tol)


def _root(mu, c, iters, tol):
    """:func:`_hoeffding_root` at level ``c = log(1/alpha)/m``, inside its ``np.errstate``."""
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
    if flat.size > 1 and not (flat[1:] >= flat[:-1]).all():
        uniq, inverse = np.unique(flat, return_inverse=True)
    else:  # ascending already (one calibration's prefix sums): its distinct values without a sort
        new = np.empty(flat.size, bool)
        new[:1] = True
        np.not_equal(flat[1:], flat[:-1], out=new[1:])
        uniq, inverse = flat[new], np.cumsum(new) - 1
    return np.asarray(fn(uniq)).reshape(-1)[inverse].reshape(np.shape(values))


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


# --- betting (WSR) ---------------------------------------------------------------------------


def _wsr(z, scores, cand, alpha, term_range):
    """WSR bound at every (calibration, candidate) pair; sequence order = the given (random) order.

    The terms of pair ``(b, k)`` are ``x_b = z_b / term_range`` with every term scored above ``c_k`` set to 0.
    """
    x = z / term_range
    out = np.empty(cand.shape)
    for b in range(cand.shape[0]):
        xk = np.where(scores[b] <= cand[b][:, None], x[b], 0.0)  # (K, m): one row per candidate
        out[b] = wsr.wsr_upper(xk, alpha)
    return term_range * out


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
        first-crossing selection exactly valid.
    binary_terms : bool, default False
        Needs every ``z / term_range`` to be 0 or 1.
    tolerance : float, default 1e-10
        Relative agreement with ``reference`` that the tests ask for.
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

    @property
    def kind(self) -> str:
        """``"valid"`` (finite-sample guarantee) or ``"paper"`` (as the paper uses it)."""
        return "valid" if self.valid else "paper"


#: Every bound, by name. The fast path of ``wsr`` (:mod:`gpac_utils.wsr_fast`) is bit for bit
#: the plain climb ``_wsr``, which is too slow for the audits and n = 1e6.
BOUNDS: Registry[Bound] = Registry(
    "bound",
    [
        Bound("clt", _clt, False, bound_references.clt_reference, "paper, Algorithm 1 (asymptotic)"),
        Bound("hoeffding", _hoeffding, False, bound_references.hoeffding_reference, "paper, App. A", monotone=True),
        Bound(
            "hoeffding_bentkus",
            _hoeffding_bentkus,
            True,
            bound_references.hoeffding_bentkus_reference,
            "Bates et al. (2021), RCPS",
            monotone=True,
            tolerance=2e-5,
        ),
        Bound(
            "empirical_bernstein",
            _empirical_bernstein,
            True,
            bound_references.empirical_bernstein_reference,
            "Maurer & Pontil (2009), Theorem 4",
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
        ),
    ],
)

__getattr__ = removed(
    __name__,
    {
        "PAPER_BOUNDS": "BOUNDS.names(valid=False)",
        "VALID_BOUNDS": "BOUNDS.names(valid=True)",
        "MONOTONE_BOUNDS": "BOUNDS.names(monotone=True)",
        "_FROM_SUMS": "BOUNDS[name].function",
    },
)


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
    m = z2.shape[1]
    sums = None
    curves = {}
    for bound in entries:
        if bound.sequential:  # the terms in their order
            out = bound.function(z2, s2d, cand, alpha, term_range)
        else:
            if sums is None:
                sums = prefix_sums(z2, s2d, cand)
            out = bound.function(sums[0], sums[1], m, alpha, term_range)
        curves[bound.name] = np.asarray(out, dtype=float).reshape(batch + cand.shape[-1:])
    return curves
