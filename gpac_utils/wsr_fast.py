"""The fast path of the WSR bound: same bits as :func:`gpac_utils.bounds.wsr_upper`, many times faster.

:func:`gpac_utils.bounds.wsr_upper` is the definition: a Newton climb on every row of terms at once,
each row a full ``np.cumsum``. The validity audit (notebook 13) calibrates thousands of small groups and
single calibrations reach 10^6 terms, and there the plain climb is slow and memory-bound
(``benchmarks/bench_calibration.py`` prints both). This module computes the same numbers faster:

* each distinct row of terms is solved once (:func:`_distinct_pairs`: candidates that keep the same
  terms give the same row);
* the climb runs on *time-major* arrays (terms along axis 0, calibration-candidate pairs along axis 1)
  in blocks of a few time steps, so that every running sum is one vectorised addition per time step
  across all pairs, in cache.

Each pair's running sums add the same terms in the same order as ``np.cumsum`` along a row, and every
other operation is elementwise (or an exact max/min), so the bound is bit for bit the plain one
(``tests/test_bounds_exact.py``).
"""

from __future__ import annotations

import math

import numpy as np

#: Time steps per block of the time-major climb (the block of all pairs stays in cache).
BLOCK_ELEMENTS = 1 << 16


#: Below this many columns a block's running sum is one ``np.cumsum`` along time; from it on, one vectorised
#: addition per time step (contiguous rows). Both add in the same order, so the bits are the same.
ROWWISE_MIN_COLUMNS = 256


def _running_sum(block, n, carry):
    """In-place running sum over the first ``n`` time steps (rows) of ``block``, continuing from ``carry``
    (None: the first block), in the order of ``np.cumsum``: ``row_t += row_{t-1}``, sequentially."""
    if carry is not None:
        np.add(carry, block[0], out=block[0])
    if block.shape[1] < ROWWISE_MIN_COLUMNS:  # few columns: Python overhead per step would dominate
        np.cumsum(block[:n], axis=0, out=block[:n])
        return
    add = np.add
    prev = block[0]
    for t in range(1, n):
        row = block[t]
        add(prev, row, row)
        prev = row


def _bets(X, alpha):
    """:func:`wsr_bets` of every column of the time-major ``X`` (shape (m, P)), same bits."""
    m, P = X.shape
    NU = np.empty_like(X)
    T = max(4, BLOCK_ELEMENTS // max(P, 1))
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


def _evaluate(X, NU, mu, c):
    """For every column: ``max_t S_t(mu)`` and the smallest Newton target ``min_t (c - S_t) / S'_t`` (NaN-skipping).

    ``S_t(mu) = sum_{s<=t} log(1 - nu_s (x_s - mu))``; time-major ``X``, ``NU`` of shape (m, P).
    """
    m, P = X.shape
    T = max(4, BLOCK_ELEMENTS // max(P, 1))
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


def _climb(X, mu, alpha, tol=1e-7, max_iter=100):
    """The bound of every column of the time-major ``X`` (shape (m, P), values in [0, 1]), from start ``mu``.

    The smallest root of ``max_t S_t(mu) = log(1/alpha)``, where ``S_t(mu) = sum_{s<=t} log(1 - nu_s (x_s - mu))``.
    Each ``S_t`` is concave and increasing in ``mu``, so a Newton step from the left never passes the root of any
    ``S_t``; stepping to the smallest Newton target over ``t`` climbs monotonically to the smallest root (3–5 steps
    in practice). Convergence is certified by checking that ``mu (1 + 2 tol)`` is rejected, and that point is
    returned: conservative by at most ``2 tol`` relative. The certification is one more evaluation of the climb
    at that point; when it does not reject, that same evaluation is the next climb step.
    """
    c = math.log(1 / alpha)
    NU = _bets(X, alpha)
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
        smax, step = _evaluate(X, NU, mu[cols], c)
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


def _upper(x, alpha, tol=1e-7, max_iter=100):
    """Upper bound for the mean of each row of ``x`` (shape (B, m), values in [0, 1]); see :func:`_climb`."""
    mu = x.mean(axis=1)  # start at the sample mean, which is (almost always) below the root
    return _climb(np.ascontiguousarray(x.T), mu, alpha, tol, max_iter)


def _distinct_pairs(x, scores, cand):
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


def wsr(z, scores, cand, alpha, R, max_elements=1 << 24, max_pairs=2048):
    """WSR bound at every (calibration, candidate) pair; sequence order = the given (random) order.

    Each distinct row of terms is solved once (:func:`_distinct_pairs`); the rows are solved in
    chunks of up to ``max_pairs`` pairs and ``max_elements`` terms, each chunk one vectorised Newton
    climb, so many small calibrations cost as little as one large one.
    """
    B, m = z.shape
    K = cand.shape[1]
    x = z / R
    if np.any(np.signbit(x)):  # a -0.0 term: rows that differ only in it are kept apart (never in practice)
        start, empty = np.broadcast_to(np.arange(K), (B, K)), np.zeros((B, K), dtype=bool)
    else:
        start, empty = _distinct_pairs(x, scores, cand)
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
        vals[p0 : p0 + chunk] = _upper(xk, alpha)
    full = np.empty(B * K)
    full[pairs] = vals
    full = full.reshape(B, K)
    out = np.take_along_axis(full, start, axis=1)
    if empty.any():
        out[empty] = full.reshape(-1)[np.argmax(empty)]
    return R * out
