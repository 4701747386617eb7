"""The fast path of the WSR bound: the climb of :func:`gpac_utils.wsr.wsr_upper`, same bits, many times faster.

:func:`gpac_utils.wsr.wsr_upper` is the definition: a Newton climb on every row of terms at once,
each row a full ``np.cumsum``. The validity audit (notebook 13) calibrates thousands of small groups and
single calibrations reach 10^6 terms, and there the plain climb is slow and memory-bound
(``benchmarks/bench_calibration.py`` prints both). This module runs the same climb faster:

* each distinct row of terms is solved once (candidates that keep the same terms give the same row),
  and the rows of many calibrations are solved together;
* the kept terms are built time-major directly (:func:`_kept_terms`, one broadcast per run of a
  calibration's candidates; no transpose), and each climb starts at its row's mean summed in numpy's
  pairwise order on that layout (:func:`_column_means`);
* the bets (:func:`_bets`) and the climb's evaluations (:func:`_evaluate`) run on *time-major* arrays
  (terms along axis 0, rows along axis 1) in blocks of a few time steps, so that every running sum is one
  vectorised addition per time step across all rows, in cache.

Each row's running sums add the same terms in the same order as ``np.cumsum`` along a row, and every
other operation is elementwise (or an exact max/min), so the bound is bit for bit the plain one
(``tests/test_bounds_exact.py``).
"""

from __future__ import annotations

import math

import numpy as np

from .wsr import wsr_upper

#: Time steps per block of the time-major evaluation (the block of all rows stays in cache).
BLOCK_ELEMENTS = 1 << 16


#: Below this many columns a block's running sum is one ``np.cumsum`` along time; from it on, one vectorised
#: addition per time step (contiguous rows). Both add in the same order, so the bits are the same.
ROWWISE_MIN_COLUMNS = 256


def _running_sum(block, n, carry):
    """In-place running sum over the first ``n`` time steps (rows) of ``block``, continuing from ``carry``
    (None: the first block), in the order of ``np.cumsum``: ``row_t += row_{t-1}``, sequentially. Returns
    the carry of the next block (a copy of the last sum)."""
    if carry is not None:
        np.add(carry, block[0], out=block[0])
    if block.shape[1] < ROWWISE_MIN_COLUMNS:  # few columns: Python overhead per step would dominate
        np.cumsum(block[:n], axis=0, out=block[:n])
        return block[n - 1].copy()
    add = np.add
    prev = block[0]
    for t in range(1, n):
        row = block[t]
        add(prev, row, row)
        prev = row
    return prev.copy()


def _evaluate(X, NU, mu, c):
    """``gpac_utils.wsr._log_capital`` of every column of the time-major ``X``, ``NU`` (shape (m, P)).

    For every column: ``max_t S_t(mu)`` and the smallest Newton target ``min_t (c - S_t) / S'_t`` (NaN-skipping).
    """
    m, n_columns = X.shape
    block_steps = max(4, BLOCK_ELEMENTS // max(n_columns, 1))
    a_buf, s_buf = np.empty((min(block_steps, m), n_columns)), np.empty((min(block_steps, m), n_columns))
    smax = np.full(n_columns, -np.inf)
    step = np.full(n_columns, np.nan)
    cs = cd = None
    with np.errstate(divide="ignore", invalid="ignore"):
        for t0 in range(0, m, block_steps):
            t1 = min(m, t0 + block_steps)
            a, s = a_buf[: t1 - t0], s_buf[: t1 - t0]
            nb = NU[t0:t1]
            np.subtract(X[t0:t1], mu, out=a)  # 1 - nu (x - mu), as fl(1 + fl((x - mu) * -nu))
            a *= nb
            np.subtract(1.0, a, out=a)
            np.log(a, out=s)
            cs = _running_sum(s, t1 - t0, cs)
            np.maximum(smax, s.max(axis=0), out=smax)
            np.divide(nb, a, out=a)  # S'_t terms nu / (1 - nu (x - mu))
            cd = _running_sum(a, t1 - t0, cd)
            np.subtract(c, s, out=s)  # fl(c - S) == -fl(S - c)
            s /= a
            np.fmin(step, np.fmin.reduce(s, axis=0), out=step)
    return smax, step


def _bets(X, alpha):
    """:func:`gpac_utils.wsr.wsr_bets` of every column of the time-major ``X`` (shape (m, P)), same bits.

    The same operations in the same order, by blocks of time steps: each running sum adds a column's terms
    in ``np.cumsum``'s order (:func:`_running_sum`), every other operation is elementwise.
    """
    m, n_columns = X.shape
    t = np.arange(2, m + 2, dtype=float)[:, None]  # t + 1 for t = 1..m
    scale = 2 * math.log(1 / alpha) / m
    NU = np.empty((m, n_columns))
    block_steps = max(4, BLOCK_ELEMENTS // max(n_columns, 1))
    muhat, sig2 = np.empty((2, min(block_steps, m), n_columns))
    cx = cq = None
    last = np.full(n_columns, 0.25)  # sigma2_0
    for t0 in range(0, m, block_steps):
        t1 = min(m, t0 + block_steps)
        mb, sb, xb, tb, nb = muhat[: t1 - t0], sig2[: t1 - t0], X[t0:t1], t[t0:t1], NU[t0:t1]
        np.copyto(mb, xb)
        cx = _running_sum(mb, t1 - t0, cx)
        mb += 0.5
        mb /= tb  # muhat_t = (1/2 + sum x) / (t + 1)
        np.subtract(xb, mb, out=sb)
        np.square(sb, out=sb)  # (x - muhat) ** 2
        cq = _running_sum(sb, t1 - t0, cq)
        sb += 0.25
        sb /= tb  # sigma2_t
        np.divide(1.0, last, out=nb[0])  # the bet at t uses sigma2_{t-1}
        np.divide(1.0, sb[:-1], out=nb[1:])
        last = sb[-1].copy()
        nb *= scale
        np.sqrt(nb, out=nb)
        np.minimum(nb, 1.0, out=nb)
    return NU


def _pairwise_sum(X, lo, n):
    """The sum of the time steps ``lo .. lo + n - 1`` of every column of the time-major ``X``, added as
    ``np.add.reduce`` adds a contiguous row (numpy's pairwise summation: blocks of at most 128 terms,
    each summed by 8 interleaved accumulators, halves split at a multiple of 8), so the same bits."""
    if n < 8:
        total = np.zeros(X.shape[1])
        for t in range(lo, lo + n):
            total += X[t]
        return total
    if n <= 128:
        acc = X[lo : lo + 8].copy()
        end = lo + n - n % 8
        for t in range(lo + 8, end, 8):
            acc += X[t : t + 8]
        total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
        for t in range(end, lo + n):
            total += X[t]
        return total
    half = n // 2 - (n // 2) % 8
    return _pairwise_sum(X, lo, half) + _pairwise_sum(X, lo + half, n - half)


def _column_means(X):
    """``X.T.mean(axis=1)`` of the time-major ``X`` (shape (m, P)) with the bits of a row-major mean."""
    return (0.0 + _pairwise_sum(X, 0, X.shape[0])) / X.shape[0]


def _upper(X, alpha):
    """:func:`gpac_utils.wsr.wsr_upper` of every column of the time-major ``X`` (shape (m, P))."""
    c = math.log(1 / alpha)
    NU = _bets(X, alpha)
    held = np.arange(X.shape[1])  # the rows whose terms X and NU hold

    def evaluate(mu, rows):
        nonlocal X, NU, held
        pos = np.searchsorted(held, rows)
        if rows.size < 0.75 * held.size:  # drop finished rows from the arrays
            X, NU, held, pos = X[:, pos], NU[:, pos], rows, np.arange(rows.size)
        mu_held = np.zeros(held.size)
        mu_held[pos] = mu
        smax, step = _evaluate(X, NU, mu_held, c)
        return smax[pos], step[pos]

    return wsr_upper(X.T, alpha, evaluate=evaluate, start=_column_means(X))


def _kept_terms(x, scores, rows, cand):
    """The time-major terms of the pairs ``(rows[j], cand[j])``: column ``j`` is ``x[rows[j]]`` with every
    term scored above ``cand[j]`` set to 0 (shape (m, P)). ``rows`` come in runs of one calibration, each
    run filled from its row at once."""
    out = np.zeros((x.shape[1], rows.size))  # every term dropped, then the kept ones copied in: one masked pass
    starts = np.flatnonzero(np.diff(rows, prepend=-1))
    for j0, j1 in zip(starts, [*starts[1:], rows.size]):
        b = rows[j0]
        np.copyto(out[:, j0:j1], x[b][:, None], where=scores[b][:, None] <= cand[j0:j1])
    return out


def wsr(z, scores, cand, alpha, term_range, max_elements=1 << 24, max_pairs=2048):
    """WSR bound at every (calibration, candidate) pair; sequence order = the given (random) order.

    The terms of pair ``(b, k)`` are ``x_b = z_b / term_range`` with every term scored above ``c_k`` set to 0.
    Candidates are ascending, so the kept sets are nested in ``k``: two candidates of a calibration give
    the same row iff they keep the same number of nonzero terms, and every pair keeping none gives the
    all-zero row. Each distinct row is solved once, in chunks of up to ``max_pairs`` rows and
    ``max_elements`` terms, each chunk one vectorised climb, so many small calibrations cost as little
    as one large one.
    """
    n_calibrations, m = z.shape
    n_candidates = cand.shape[1]
    x = z / term_range
    nonzero = (x != 0) | np.signbit(x)  # a -0.0 term keeps its row apart too
    kept = np.stack(
        [np.searchsorted(np.sort(scores[b][nonzero[b]]), cand[b], side="right") for b in range(n_calibrations)]
    )
    key = np.where(kept == 0, -1, np.arange(n_calibrations)[:, None] * (m + 1) + kept)  # -1: the all-zero row
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    rows, cols = np.divmod(first, n_candidates)
    vals = np.empty(first.size)
    chunk = int(min(max_pairs, max(1, max_elements // m)))
    for p0 in range(0, first.size, chunk):
        r = rows[p0 : p0 + chunk]
        c = cand[r, cols[p0 : p0 + chunk]]
        vals[p0 : p0 + chunk] = _upper(_kept_terms(x, scores, r, c), alpha)
    return term_range * vals[inverse.reshape(n_calibrations, n_candidates)]
