r"""Upper confidence bounds on the thresholded risk :math:`R(u) = E[Z\,\mathbf 1\{U \le u\}]`.

Every bound takes the per-sample terms ``z`` (in ``[0, value_range]``) with their scores and
returns, for *all* candidate thresholds at once, an upper confidence bound at level
``1 - alpha``. Inputs may carry leading batch dimensions (many calibrations at once).

Two families, named in :data:`BOUNDS`:

``paper`` — what the paper uses (App. A):
    * ``clt`` — Algorithm 1: :math:`\hat\mu + z_{1-\alpha}\hat\sigma/\sqrt m` (asymptotic only);
    * ``hoeffding`` — :math:`\hat\mu + R\sqrt{\log(2/\alpha)/(2m)}` with range ``R = B/pi_min``.

``valid`` — finite-sample valid for i.i.d. terms (the ``bernoulli`` and ``full`` schemes):
    * ``hoeffding_bentkus`` — Bates et al. (2021, RCPS) HB bound on ``z / R``;
    * ``empirical_bernstein`` — Maurer & Pontil (2009), Theorem 4;
    * ``wsr`` — Waudby-Smith & Ramdas (2023) betting bound, one-sided capital process with the
      predictable plug-in bets of Bates et al., running maximum (Ville), upper end found by a
      monotone Newton root search (no grid); :func:`wsr_upper` is the definition, computed by the
      bit-identical fast path :mod:`gpac_utils.wsr_fast`;
    * ``clopper_pearson`` — exact binomial bound; only when every ``z / R`` is 0 or 1.

The bounds that depend on the data only through prefix sums (all but ``wsr``) are computed
from cumulative sums over the score-sorted sample: ``O(m log m + K log m)`` per calibration, and
the inversions run once per *distinct* prefix sum.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from . import wsr_fast

BOUNDS: dict[str, str] = {
    "clt": "paper",
    "hoeffding": "paper",
    "hoeffding_bentkus": "valid",
    "empirical_bernstein": "valid",
    "wsr": "valid",
    "clopper_pearson": "valid",
}
PAPER_BOUNDS = tuple(b for b, kind in BOUNDS.items() if kind == "paper")
VALID_BOUNDS = tuple(b for b, kind in BOUNDS.items() if kind == "valid")
#: Bounds whose value can only grow when items are added to the thresholded set, so that any
#: (even data-dependent) candidate grid keeps first-crossing selection exactly valid.
MONOTONE_BOUNDS = ("hoeffding", "hoeffding_bentkus", "clopper_pearson")


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


# --- bounds from prefix sums -----------------------------------------------------------------


def _clt(s1, s2, m, alpha, R):
    mean = s1 / m
    if m < 2:
        return np.full_like(mean, np.inf)
    var = np.maximum(s2 - s1 * s1 / m, 0.0) / (m - 1)
    return mean + stats.norm.ppf(1 - alpha) * np.sqrt(var / m)


def _hoeffding(s1, s2, m, alpha, R):
    return s1 / m + R * math.sqrt(math.log(2 / alpha) / (2 * m))


def _empirical_bernstein(s1, s2, m, alpha, R):
    if m < 2:
        return np.full_like(np.asarray(s1, float), np.inf)
    x1, x2 = s1 / R, s2 / (R * R)
    var = np.maximum(x2 - x1 * x1 / m, 0.0) / (m - 1)
    log_term = math.log(2 / alpha)
    ub = x1 / m + np.sqrt(2 * var * log_term / m) + 7 * log_term / (3 * (m - 1))
    return R * ub


def _kl_bernoulli(p, q):
    """Bernoulli KL divergence h1(p, q) with 0 log 0 = 0 (vectorised)."""
    p = np.asarray(p, float)
    with np.errstate(divide="ignore", invalid="ignore"):
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
    c = math.log(1 / alpha) / m
    mu = np.asarray(mu, dtype=float)
    top = 1.0 - 1e-15
    lo = mu.copy()
    hi = np.minimum(mu + math.sqrt(c / 2) + 1e-12, top)
    none_below_one = _kl_bernoulli(mu, hi) < c  # only possible when hi was clipped at 1
    for _ in range(12):
        mid = 0.5 * (lo + hi)
        over = _kl_bernoulli(mu, mid) >= c
        hi = np.where(over, mid, hi)
        lo = np.where(over, lo, mid)
    t = hi
    act = ~none_below_one & (t > mu)
    for _ in range(iters):
        if not act.any():
            break
        ta, ma = t[act], mu[act]
        step = (_kl_bernoulli(ma, ta) - c) * ta * (1 - ta) / (ta - ma)
        t[act] = ta - step
        act[act] = step > tol * ta
    return np.where(none_below_one, 1.0, np.maximum(t, mu))


def _unique_apply(values, fn):
    """Apply ``fn`` to the distinct entries of ``values`` only, and scatter back."""
    flat = np.asarray(values).ravel()
    uniq, inverse = np.unique(flat, return_inverse=True)
    return np.asarray(fn(uniq)).reshape(-1)[inverse].reshape(np.shape(values))


def _hoeffding_bentkus(s1, s2, m, alpha, R):
    mu = np.clip(s1 / (R * m), 0.0, 1.0)
    t_h = _unique_apply(mu, lambda v: _hoeffding_root(v, m, alpha))
    k = np.ceil(np.clip(s1 / R, 0, m))  # the binomial tail is evaluated at ceil(m * mu)
    return R * np.minimum(t_h, _unique_apply(k, lambda kk: _binomial_upper(kk, m, alpha / math.e)))


def _binomial_upper(k, m, level):
    """The ``t`` with ``P(Bin(m, t) <= k) = level`` (1 where ``k = m``), for each ``k``."""
    out = np.ones_like(k)
    inside = k < m
    # P(Bin(m, t) <= k) = level  <=>  t = I^{-1}_{1 - level}(k + 1, m - k)
    out[inside] = special.betaincinv(k[inside] + 1, m - k[inside], 1 - level)
    return out


def _clopper_pearson(s1, s2, m, alpha, R):
    return R * _unique_apply(np.rint(s1 / R), lambda k: _binomial_upper(k, m, alpha))


_FROM_SUMS = {
    "clt": _clt,
    "hoeffding": _hoeffding,
    "hoeffding_bentkus": _hoeffding_bentkus,
    "empirical_bernstein": _empirical_bernstein,
    "clopper_pearson": _clopper_pearson,
}


# --- betting (WSR) ---------------------------------------------------------------------------


def wsr_bets(x, alpha):
    """Predictable bets nu_t of Bates et al. (2021) for the one-sided WSR capital process.

    ``x`` has shape (..., m) with values in [0, 1]; ``nu_t`` uses only ``x_1..x_{t-1}``:
    ``nu_t = min(1, sqrt(2 log(1/alpha) / (m sigma2_{t-1})))`` with the regularised running
    mean and variance ``muhat_t = (1/2 + sum x) / (t + 1)``, ``sigma2_t = (1/4 + sum (x - muhat)^2) / (t + 1)``.

    Parameters
    ----------
    x : numpy.ndarray, shape (..., m)
        The terms scaled to ``[0, 1]`` (``z / R``), in their sequential order.
    alpha : float
        Miscoverage level, in ``(0, 1)``.

    Returns
    -------
    numpy.ndarray, shape (..., m)
        The bets ``nu_t``, in ``(0, 1]``.
    """
    m = x.shape[-1]
    t = np.arange(2, m + 2, dtype=float)  # t + 1 for t = 1..m
    muhat = (np.cumsum(x, axis=-1) + 0.5) / t
    sig2 = (np.cumsum((x - muhat) ** 2, axis=-1) + 0.25) / t
    prev = np.concatenate([np.full(x.shape[:-1] + (1,), 0.25), sig2[..., :-1]], axis=-1)  # sigma2_{t-1}
    return np.minimum(np.sqrt(1.0 / prev * (2 * math.log(1 / alpha) / m)), 1.0)


def _log_capital(x, nu, mu, c):
    """Per row: ``max_t S_t(mu)`` and the smallest Newton target ``min_t (c - S_t(mu)) / S_t'(mu)``.

    ``S_t(mu) = sum_{s<=t} log(1 - nu_s (x_s - mu))`` is the log capital at ``mu`` (``-inf`` where a
    capital factor is zero); ``mu`` lies above the upper bound when ``max_t S_t(mu)`` reaches ``c``.
    NaN Newton targets (a zero factor) are skipped.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = 1.0 - nu * (x - mu[:, None])
        S = np.cumsum(np.log(factor), axis=1)
        dS = np.cumsum(nu / factor, axis=1)  # dS_t / dmu
        return S.max(axis=1), np.fmin.reduce((c - S) / dS, axis=1)


def wsr_upper(x, alpha, tol=1e-7, max_iter=100, evaluate=None):
    """The WSR upper confidence bound for the mean of each row of ``x`` (shape (B, m), values in [0, 1]).

    The bound is the smallest ``mu`` at which the log capital ``S_t(mu) = sum_{s<=t} log(1 - nu_s (x_s - mu))``
    reaches ``c = log(1/alpha)`` at some ``t`` (Ville's inequality on the running maximum). Each ``S_t`` is
    concave and increasing in ``mu``, so a Newton step from the left never passes the root of any ``S_t``:
    stepping to the smallest Newton target over ``t`` climbs monotonically to the smallest root (3–5 steps in
    practice). Convergence is certified by checking that ``mu (1 + 2 tol)`` is rejected, and that point is
    returned: conservative by at most ``2 tol`` relative. The certification is one more evaluation at that
    point; when it does not reject, the climb goes on from there.

    Parameters
    ----------
    x : numpy.ndarray, shape (B, m)
        The terms scaled to ``[0, 1]``, in their sequential order.
    alpha : float
        Miscoverage level, in ``(0, 1)``.
    tol : float, default 1e-7
        Relative tolerance of the root.
    max_iter : int, default 100
        Evaluations per row; a row that does not converge gets the trivial bound 1.
    evaluate : callable, optional
        ``evaluate(mu, rows)``: ``max_t S_t(mu)`` and the smallest Newton target of the given rows. Default:
        ``_log_capital`` on the rows of ``x`` with the bets :func:`wsr_bets`; the fast path
        :mod:`gpac_utils.wsr_fast` passes the same computation laid out by time step (same bits).

    Returns
    -------
    numpy.ndarray, shape (B,)
        The upper bounds, in ``[0, 1]``.
    """
    c = math.log(1 / alpha)
    if evaluate is None:
        nu = wsr_bets(x, alpha)

        def evaluate(mu, rows):
            return _log_capital(x[rows], nu[rows], mu, c)

    n = x.shape[0]
    mu = x.mean(axis=1)  # start at the sample mean, which is (almost always) below the root
    out = np.ones(n)
    done, stepped, certifying = np.zeros((3, n), dtype=bool)
    evals = np.zeros(n, dtype=np.intp)
    while not done.all():
        act = np.flatnonzero(~done)
        ma = mu[act]
        smax, step = evaluate(ma, act)
        too_high = smax >= c
        # A rejected point after a Newton step (or a certification) is a root up to rounding: a valid
        # (conservative) upper end, accept it. A rejected *start* (rare) restarts from a tenth of the way down.
        accept = too_high & stepped[act]
        out[act[accept]], done[act[accept]] = ma[accept], True
        restart = too_high & ~stepped[act]
        mu[act[restart]] = ma[restart] * 0.1
        certifying[act] = False
        evals[act] += 1
        ok = ~too_high
        over = ok & (evals[act] > max_iter)  # only a pending certification gets here: the trivial bound 1
        done[act[over]] = True
        ok &= ~over
        stepped[act[ok]] = True
        new = np.minimum(ma[ok] + np.maximum(step[ok], 0.0), 1.0)
        mu[act[ok]] = new
        conv = (step[ok] <= tol * np.maximum(new, 1e-9)) | (new >= 1.0)
        rows = act[ok][conv]
        hi = np.minimum(mu[rows] * (1 + 2 * tol) + 1e-15, 1.0)
        top = hi >= 1.0
        done[rows[top]] = True  # the trivial bound 1
        mu[rows[~top]], certifying[rows[~top]] = hi[~top], True
        spent = ~done[act] & ~certifying[act] & (evals[act] >= max_iter)
        done[act[spent]] = True  # the trivial bound 1
    return out


def _wsr(z, scores, cand, alpha, R):
    """WSR bound at every (calibration, candidate) pair; sequence order = the given (random) order.

    The terms of pair ``(b, k)`` are ``x_b = z_b / R`` with every term scored above ``c_k`` set to 0.
    """
    x = z / R
    out = np.empty(cand.shape)
    for b in range(cand.shape[0]):
        xk = np.where(scores[b] <= cand[b][:, None], x[b], 0.0)  # (K, m): one row per candidate
        out[b] = wsr_upper(xk, alpha)
    return R * out


# --- public entry point ----------------------------------------------------------------------


def ucb(bound: str, z, scores, candidates, alpha: float, value_range: float) -> np.ndarray:
    """Upper confidence bounds on ``E[Z 1{U <= c}]`` for every candidate ``c``.

    Parameters
    ----------
    bound : str
        A name in :data:`BOUNDS`.
    z : array_like, shape (..., m)
        The terms, in ``[0, value_range]``.
    scores : array_like, shape (..., m)
        The score of each term's item.
    candidates : array_like, shape (..., K) or (K,)
        Candidate thresholds, ascending along the last axis.
    alpha : float
        Miscoverage level, in ``(0, 1)``.
    value_range : float or array_like
        The range ``R`` of ``z`` (``B / pi_min`` for importance-weighted terms); a float, or one
        value per calibration (shape of the batch dimensions).

    Returns
    -------
    numpy.ndarray, shape (..., K)
        The upper confidence bound at level ``1 - alpha`` at each candidate.

    Raises
    ------
    ValueError
        For an unknown bound, ``alpha`` outside ``(0, 1)``, mismatched shapes, candidates not
        ascending, a non-positive ``value_range``, terms outside ``[0, value_range]``, or
        non-binary terms for ``clopper_pearson``.
    """
    return ucb_many([bound], z, scores, candidates, alpha, value_range)[bound]


def ucb_many(bounds, z, scores, candidates, alpha: float, value_range: float) -> dict[str, np.ndarray]:
    """:func:`ucb` of several bounds on the same terms and candidates, sharing the prefix sums.

    Each curve is exactly (bit for bit) what :func:`ucb` returns for that bound; the inputs are
    checked once (``clopper_pearson`` among ``bounds`` checks that the terms are binary).

    Parameters
    ----------
    bounds : sequence of str
        Names in :data:`BOUNDS`.
    z, scores, candidates, alpha, value_range
        As for :func:`ucb`.

    Returns
    -------
    dict of str to numpy.ndarray
        One curve per bound, shape ``(..., K)``.
    """
    bounds = list(dict.fromkeys(bounds))
    for bound in bounds:
        if bound not in BOUNDS:
            raise ValueError(f"unknown bound {bound!r}; choose one of {list(BOUNDS)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    z2, s2d, cand, batch = _as_batch(z, scores, candidates)
    vr = np.asarray(value_range, dtype=float)
    if not (np.all(np.isfinite(vr)) and np.all(vr > 0)):
        raise ValueError(f"value_range must be > 0, got {value_range}")
    if vr.ndim:
        value_range = np.broadcast_to(vr, batch).reshape(-1, 1)  # one range per calibration row
    else:
        value_range = float(vr)
    if not np.all(np.isfinite(z2)) or z2.min() < 0 or np.any(z2 > value_range * (1 + 1e-12)):
        raise ValueError("z must lie in [0, value_range] and be finite")
    if "clopper_pearson" in bounds:
        x = z2 / value_range
        if not np.all((x == 0) | (np.abs(x - 1) <= 1e-12)):
            raise ValueError(
                "clopper_pearson needs every z / value_range to be 0 or 1 (binary loss "
                "with a constant sampling weight); use hoeffding_bentkus or wsr otherwise"
            )
    m = z2.shape[1]
    sums = None
    curves = {}
    for bound in bounds:
        if bound == "wsr":  # the fast path: bit for bit _wsr, which is too slow for audits and n = 1e6
            out = wsr_fast.wsr(z2, s2d, cand, alpha, value_range)
        else:
            if sums is None:
                sums = prefix_sums(z2, s2d, cand)
            out = _FROM_SUMS[bound](sums[0], sums[1], m, alpha, value_range)
        curves[bound] = np.asarray(out, dtype=float).reshape(batch + cand.shape[-1:])
    return curves
