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
      monotone Newton root search (no grid);
    * ``clopper_pearson`` — exact binomial bound; only when every ``z / R`` is 0 or 1.

The bounds that depend on the data only through prefix sums (all but ``wsr``) are computed
from cumulative sums over the score-sorted sample: ``O(m log m + K)`` per calibration, and the
expensive inversions run once per *distinct* prefix sum.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

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
    cand = np.asarray(candidates, dtype=float)
    if cand.ndim == 0:
        cand = cand[None]
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
    order = np.argsort(s2d, axis=1)  # tie order is irrelevant: candidates include all ties
    sorted_scores = np.take_along_axis(s2d, order, axis=1)
    zs = np.take_along_axis(z2, order, axis=1)
    zero = np.zeros((zs.shape[0], 1))
    c1 = np.concatenate([zero, np.cumsum(zs, axis=1)], axis=1)
    c2 = np.concatenate([zero, np.cumsum(zs * zs, axis=1)], axis=1)
    if np.array_equal(cand, sorted_scores):
        # candidates = the sorted scores themselves ("all"): the count of scores <= s_k is one past the
        # last score equal to s_k, read off the sorted rows in O(m) (what searchsorted(side="right") returns)
        m = sorted_scores.shape[1]
        last = np.ones(sorted_scores.shape, dtype=bool)
        last[:, :-1] = sorted_scores[:, 1:] != sorted_scores[:, :-1]
        idx = np.where(last, np.arange(1, m + 1), m)
        idx = np.minimum.accumulate(idx[:, ::-1], axis=1)[:, ::-1]
    else:
        idx = np.empty(cand.shape, dtype=np.intp)
        for b in range(cand.shape[0]):  # exact ties: searchsorted per row (cheap, O(K log m))
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


#: Hoeffding-Bentkus inversions already computed, per (kind, m, alpha): value -> root. Every root depends
#: only on its own value (elementwise arithmetic, per-element stopping), so a stored one is the one a new
#: call would compute; calibrations repeated at the same ``m`` (audits, planning, C-PAC) reuse them.
_HB_MEMO: dict = {}
_HB_MEMO_MAX = 2_000_000


def _memo_apply(kind, m, alpha, uniq, fn):
    """``fn(uniq)`` with the results of earlier calls (same ``kind, m, alpha``) reused."""
    key = (kind, m, float(alpha))
    memo = _HB_MEMO.get(key)
    if memo is None:
        if sum(len(v) for v in _HB_MEMO.values()) > _HB_MEMO_MAX:
            _HB_MEMO.clear()
        memo = _HB_MEMO[key] = {}
    vals = uniq.tolist()
    missing = [v for v in vals if v not in memo]
    if missing:
        memo.update(zip(missing, np.asarray(fn(np.array(missing, dtype=float))).reshape(-1).tolist()))
    return np.array([memo[v] for v in vals], dtype=float)


def _hoeffding_bentkus(s1, s2, m, alpha, R):
    mu = np.clip(s1 / (R * m), 0.0, 1.0)
    t_h = _unique_apply(mu, lambda u: _memo_apply("hoeffding", m, alpha, u, lambda v: _hoeffding_root(v, m, alpha)))
    k = np.ceil(np.clip(s1 / R, 0, m))  # the binomial tail is evaluated at ceil(m * mu)

    def bentkus(kk):
        out = np.ones_like(kk)
        inside = kk < m
        # P(Bin(m, t) <= k) = alpha / e  <=>  t = I^{-1}_{1 - alpha/e}(k + 1, m - k)
        out[inside] = special.betaincinv(kk[inside] + 1, m - kk[inside], 1 - alpha / math.e)
        return out

    t_b = _unique_apply(k, lambda kk: _memo_apply("bentkus", m, alpha, kk, bentkus))
    return R * np.minimum(t_h, t_b)


def _clopper_pearson(s1, s2, m, alpha, R):
    k = np.rint(s1 / R)

    def cp(kk):
        out = np.ones_like(kk)
        inside = kk < m
        out[inside] = special.betaincinv(kk[inside] + 1, m - kk[inside], 1 - alpha)
        return out

    return R * _unique_apply(k, cp)


_FROM_SUMS = {
    "clt": _clt,
    "hoeffding": _hoeffding,
    "hoeffding_bentkus": _hoeffding_bentkus,
    "empirical_bernstein": _empirical_bernstein,
    "clopper_pearson": _clopper_pearson,
}


# --- betting (WSR) ---------------------------------------------------------------------------
#
# The climb below is the hot loop of the validity audit. It runs on *time-major* arrays (terms along
# axis 0, calibration-candidate pairs along axis 1) in blocks of a few time steps: every running sum
# is then one vectorised addition per time step across all pairs, in cache. Each pair's running sums
# still add the same terms in the same order as ``np.cumsum`` along a row, and every other operation
# is elementwise (or an exact max/min), so the bound is bit-for-bit that of the row-by-row form
# (:func:`wsr_bets`, :func:`wsr_log_capital`).

#: Time steps per block of the time-major climb (the block of all pairs stays in cache).
_WSR_BLOCK_ELEMENTS = 1 << 16


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
    denom = np.arange(2, m + 2, dtype=float)
    muhat = np.cumsum(x, axis=-1)
    muhat += 0.5
    muhat /= denom
    np.subtract(x, muhat, out=muhat)
    np.square(muhat, out=muhat)
    sig2 = np.cumsum(muhat, axis=-1)
    sig2 += 0.25
    sig2 /= denom
    prev = np.empty_like(sig2)
    prev[..., 0] = 0.25
    prev[..., 1:] = sig2[..., :-1]
    np.reciprocal(prev, out=prev)
    prev *= 2 * math.log(1 / alpha) / m
    np.sqrt(prev, out=prev)
    return np.minimum(prev, 1.0, out=prev)


def wsr_log_capital(x, nu, mu):
    """``max_t sum_{s<=t} log(1 - nu_s (x_s - mu))`` — the running-max log capital at ``mu``.

    Parameters
    ----------
    x : numpy.ndarray, shape (..., m)
        The terms scaled to ``[0, 1]``, in their sequential order.
    nu : numpy.ndarray, shape (..., m)
        The bets (:func:`wsr_bets`).
    mu : float or array_like, shape (...)
        The candidate mean(s) at which the capital is evaluated.

    Returns
    -------
    numpy.ndarray, shape (...)
        The maximal log capital over time; ``mu`` lies above the upper bound when it reaches
        ``log(1 / alpha)`` (``-inf`` where a capital factor is zero).
    """
    mu = np.asarray(mu, float)[..., None]
    with np.errstate(divide="ignore"):
        return np.max(np.cumsum(np.log(1.0 - nu * (x - mu)), axis=-1), axis=-1)


#: Below this many columns a block's running sum is one ``np.cumsum`` along time; from it on, one vectorised
#: addition per time step (contiguous rows). Both add in the same order, so the bits are the same.
_WSR_ROWWISE_MIN_COLUMNS = 256


def _running_sum(block, n, carry):
    """In-place running sum over the first ``n`` time steps (rows) of ``block``, continuing from ``carry``
    (None: the first block), in the order of ``np.cumsum``: ``row_t += row_{t-1}``, sequentially."""
    if carry is not None:
        np.add(carry, block[0], out=block[0])
    if block.shape[1] < _WSR_ROWWISE_MIN_COLUMNS:  # few columns: Python overhead per step would dominate
        np.cumsum(block[:n], axis=0, out=block[:n])
        return
    add = np.add
    prev = block[0]
    for t in range(1, n):
        row = block[t]
        add(prev, row, row)
        prev = row


def _wsr_bets_tm(X, alpha):
    """:func:`wsr_bets` of every column of the time-major ``X`` (shape (m, P)), same bits."""
    m, P = X.shape
    NU = np.empty_like(X)
    T = max(4, _WSR_BLOCK_ELEMENTS // max(P, 1))
    scale = 2 * math.log(1 / alpha) / m
    cx = cv = last = None
    h = np.empty((min(T, m), P))
    for t0 in range(0, m, T):
        t1 = min(m, t0 + T)
        n = t1 - t0
        xb, hb, nb = X[t0:t1], h[:n], NU[t0:t1]
        denom = np.arange(t0 + 2, t1 + 2, dtype=float)[:, None]
        np.copyto(hb, xb)
        _running_sum(hb, n, cx)
        cx = hb[-1].copy()
        hb += 0.5
        hb /= denom
        np.subtract(xb, hb, out=hb)
        np.square(hb, out=hb)
        _running_sum(hb, n, cv)
        cv = hb[-1].copy()
        hb += 0.25
        hb /= denom
        if last is None:
            nb[0] = 0.25
        else:
            nb[0] = last
        nb[1:] = hb[:-1]
        last = hb[-1].copy()
        np.reciprocal(nb, out=nb)
        nb *= scale
        np.sqrt(nb, out=nb)
        np.minimum(nb, 1.0, out=nb)
    return NU


def _wsr_evaluate(X, NU, mu, c):
    """For every column: ``max_t S_t(mu)`` and the smallest Newton target ``min_t (c - S_t) / S'_t`` (NaN-skipping).

    ``S_t(mu) = sum_{s<=t} log(1 - nu_s (x_s - mu))``; time-major ``X``, ``NU`` of shape (m, P).
    """
    m, P = X.shape
    T = max(4, _WSR_BLOCK_ELEMENTS // max(P, 1))
    a_buf, s_buf = np.empty((min(T, m), P)), np.empty((min(T, m), P))
    smax = np.full(P, -np.inf)
    step = np.full(P, np.nan)
    cs = cd = None
    with np.errstate(divide="ignore", invalid="ignore"):
        for t0 in range(0, m, T):
            t1 = min(m, t0 + T)
            a, s = a_buf[: t1 - t0], s_buf[: t1 - t0]
            nb = NU[t0:t1]
            np.subtract(X[t0:t1], mu, out=a)  # 1 - nu (x - mu), as fl(1 + fl((x - mu) * -nu))
            a *= nb
            np.subtract(1.0, a, out=a)
            np.log(a, out=s)
            _running_sum(s, t1 - t0, cs)
            cs = s[-1].copy()
            np.maximum(smax, s.max(axis=0), out=smax)
            np.divide(nb, a, out=a)  # S'_t terms nu / (1 - nu (x - mu))
            _running_sum(a, t1 - t0, cd)
            cd = a[-1].copy()
            np.subtract(c, s, out=s)  # fl(c - S) == -fl(S - c)
            s /= a
            np.fmin(step, np.fmin.reduce(s, axis=0), out=step)
    return smax, step


def _wsr_climb(X, mu, alpha, tol=1e-7, max_iter=100):
    """The bound of every column of the time-major ``X`` (shape (m, P), values in [0, 1]), from start ``mu``.

    The smallest root of ``max_t S_t(mu) = log(1/alpha)``, where ``S_t(mu) = sum_{s<=t} log(1 - nu_s (x_s - mu))``.
    Each ``S_t`` is concave and increasing in ``mu``, so a Newton step from the left never passes the root of any
    ``S_t``; stepping to the smallest Newton target over ``t`` climbs monotonically to the smallest root (3–5 steps
    in practice). Convergence is certified by checking that ``mu (1 + 2 tol)`` is rejected, and that point is
    returned: conservative by at most ``2 tol`` relative. The certification is one more evaluation of the climb
    at that point; when it does not reject, that same evaluation is the next climb step.
    """
    c = math.log(1 / alpha)
    NU = _wsr_bets_tm(X, alpha)
    P = X.shape[1]
    mu = np.array(mu, dtype=float)
    out = np.ones(P)
    done = np.zeros(P, dtype=bool)
    stepped = np.zeros(P, dtype=bool)
    certifying = np.zeros(P, dtype=bool)
    evals = np.zeros(P, dtype=np.intp)  # climb evaluations so far (certifications excluded)
    cols = np.arange(P)  # the pairs held in X / NU
    while True:
        live = ~done[cols]
        if not live.any():
            break
        if live.sum() < 0.75 * cols.size:  # drop finished pairs from the arrays
            keep = np.flatnonzero(live)
            X, NU, cols = X[:, keep], NU[:, keep], cols[keep]
            live = np.ones(cols.size, dtype=bool)
        smax, step = _wsr_evaluate(X, NU, mu[cols], c)
        act = cols[live]
        smax, step = smax[live], step[live]
        ma = mu[act]
        too_high = smax >= c
        # certifications: rejected point -> accept it; else the evaluation is the next climb step at it
        cert = certifying[act]
        acc = cert & too_high
        out[act[acc]] = ma[acc]
        done[act[acc]] = True
        certifying[act[cert]] = False
        climb = ~acc
        evals[act[climb]] += 1
        over = climb & (evals[act] > max_iter)
        out[act[over]] = 1.0
        done[act[over]] = True
        climb &= ~over
        # A rejected iterate after a Newton step is a root up to rounding: a valid (conservative)
        # upper end, accept it. A rejected *start* (rare) restarts from a tenth of the way down.
        accept_now = climb & too_high & stepped[act]
        out[act[accept_now]] = ma[accept_now]
        done[act[accept_now]] = True
        restart = climb & too_high & ~stepped[act]
        mu[act[restart]] = ma[restart] * 0.1
        ok = climb & ~too_high
        stepped[act[ok]] = True
        new = np.minimum(ma[ok] + np.maximum(step[ok], 0.0), 1.0)
        mu[act[ok]] = new
        conv = (step[ok] <= tol * np.maximum(new, 1e-9)) | (new >= 1.0)
        rows = act[ok][conv]
        hi = np.minimum(mu[rows] * (1 + 2 * tol) + 1e-15, 1.0)
        top = hi >= 1.0
        out[rows[top]] = hi[top]
        done[rows[top]] = True
        mu[rows[~top]] = hi[~top]
        certifying[rows[~top]] = True
        # after max_iter climb evaluations only a pending certification may still accept
        spent = ~done[act] & ~certifying[act] & (evals[act] >= max_iter)
        out[act[spent]] = 1.0
        done[act[spent]] = True
    return out


def _wsr_upper(x, alpha, tol=1e-7, max_iter=100):
    """Upper bound for the mean of each row of ``x`` (shape (B, m), values in [0, 1]); see :func:`_wsr_climb`."""
    mu = x.mean(axis=1)  # start at the sample mean, which is (almost always) below the root
    return _wsr_climb(np.ascontiguousarray(x.T), mu, alpha, tol, max_iter)


def _wsr_distinct_pairs(x, scores, cand):
    """Which (calibration, candidate) pairs have the same terms, so that each distinct row is solved once.

    The terms of pair ``(b, k)`` are ``x_b`` with every term scored above ``c_k`` set to 0. Candidates are
    ascending, so the kept sets are nested in ``k``: two candidates of a calibration give the same row iff
    they keep the same number of nonzero terms, and every pair keeping none gives the all-zero row.

    Returns ``start`` (B, K): the first candidate of each pair's run of equal rows, and ``empty`` (B, K).
    """
    B, K = cand.shape
    nonzero = x != 0
    kept = np.empty((B, K), dtype=np.intp)
    for b in range(B):
        kept[b] = np.searchsorted(np.sort(scores[b][nonzero[b]]), cand[b], side="right")
    first = np.ones((B, K), dtype=bool)
    first[:, 1:] = kept[:, 1:] != kept[:, :-1]
    start = np.maximum.accumulate(np.where(first, np.arange(K), 0), axis=1)
    return start, kept == 0


def _wsr(z, scores, cand, alpha, R, max_elements=1 << 24, max_pairs=2048):
    """WSR bound at every (calibration, candidate) pair; sequence order = the given (random) order.

    Each distinct row of terms is solved once (:func:`_wsr_distinct_pairs`); the rows are solved in
    chunks of up to ``max_pairs`` pairs and ``max_elements`` terms, each chunk one vectorised Newton
    climb, so many small calibrations cost as little as one large one.
    """
    B, m = z.shape
    K = cand.shape[1]
    x = z / R
    if np.any(np.signbit(x)):  # a -0.0 term: rows that differ only in it are kept apart (never in practice)
        start, empty = np.broadcast_to(np.arange(K), (B, K)), np.zeros((B, K), dtype=bool)
    else:
        start, empty = _wsr_distinct_pairs(x, scores, cand)
    solve = (start == np.arange(K)) & ~empty
    if empty.any():  # one all-zero row stands for all of them
        solve.reshape(-1)[np.argmax(empty)] = True
    pairs = np.flatnonzero(solve)
    rows, cvals = pairs // K, cand.reshape(-1)[pairs]
    vals = np.empty(pairs.size)
    chunk = int(min(max_pairs, max(1, max_elements // m)))
    for p0 in range(0, pairs.size, chunk):
        r, c = rows[p0 : p0 + chunk], cvals[p0 : p0 + chunk]
        xk = np.where(scores[r] <= c[:, None], x[r], 0.0)
        vals[p0 : p0 + chunk] = _wsr_upper(xk, alpha)
    full = np.empty(B * K)
    full[pairs] = vals
    full = full.reshape(B, K)
    out = np.take_along_axis(full, start, axis=1)
    if empty.any():
        out[empty] = full.reshape(-1)[np.argmax(empty)]
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
        if bound == "wsr":
            out = _wsr(z2, s2d, cand, alpha, value_range)
        else:
            if sums is None:
                sums = prefix_sums(z2, s2d, cand)
            out = _FROM_SUMS[bound](sums[0], sums[1], m, alpha, value_range)
        curves[bound] = np.asarray(out, dtype=float).reshape(batch + cand.shape[-1:])
    return curves
