"""The WSR climb: Waudby-Smith & Ramdas (2023) upper confidence bound of a mean by betting.

The one-sided capital process with the predictable plug-in bets of Bates et al. (2021)
(:func:`wsr_bets`) and a monotone Newton climb to the smallest mean the capital rejects
(:func:`wsr_upper`). Two paths use it: the plain one of :func:`gpac_utils.bounds.ucb` (one climb
per calibration, the definition) and the fast one of :mod:`gpac_utils.wsr_fast` (same climb, its
evaluations laid out by time step; same bits).
"""

from __future__ import annotations

import math

import numpy as np


def wsr_bets(x, alpha):
    """Predictable bets nu_t of Bates et al. (2021) for the one-sided WSR capital process.

    ``x`` has shape (..., m) with values in [0, 1]; ``nu_t`` uses only ``x_1..x_{t-1}``:
    ``nu_t = min(1, sqrt(2 log(1/alpha) / (m sigma2_{t-1})))`` with the regularised running
    mean and variance ``muhat_t = (1/2 + sum x) / (t + 1)``, ``sigma2_t = (1/4 + sum (x - muhat)^2) / (t + 1)``.

    Parameters
    ----------
    x : numpy.ndarray, shape (..., m)
        The terms scaled to ``[0, 1]`` (``z / term_range``), in their sequential order.
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


def wsr_upper(x, alpha, tol=1e-7, max_iter=100, evaluate=None, start=None):
    """The WSR upper confidence bound for the mean of each row of ``x`` (shape (n_rows, m), values in [0, 1]).

    The bound is the smallest ``mu`` at which the log capital ``S_t(mu) = sum_{s<=t} log(1 - nu_s (x_s - mu))``
    reaches ``c = log(1/alpha)`` at some ``t`` (Ville's inequality on the running maximum). Each ``S_t`` is
    concave and increasing in ``mu``, so a Newton step from the left never passes the root of any ``S_t``:
    stepping to the smallest Newton target over ``t`` climbs monotonically to the smallest root (3–5 steps in
    practice). Convergence is certified by checking that ``mu (1 + 2 tol)`` is rejected, and that point is
    returned: conservative by at most ``2 tol`` relative. The certification is one more evaluation at that
    point; when it does not reject, the climb goes on from there.

    Parameters
    ----------
    x : numpy.ndarray, shape (n_rows, m)
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
    start : numpy.ndarray, shape (n_rows,), optional
        Where each row's climb starts: its sample mean, ``x.mean(axis=1)`` by default (the fast path passes
        the same means, computed on its time-major layout).

    Returns
    -------
    numpy.ndarray, shape (n_rows,)
        The upper bounds, in ``[0, 1]``.
    """
    c = math.log(1 / alpha)
    if evaluate is None:
        nu = wsr_bets(x, alpha)

        def evaluate(mu, rows):
            return _log_capital(x[rows], nu[rows], mu, c)

    n = x.shape[0]
    # start at the sample mean, which is (almost always) below the root
    mu = x.mean(axis=1) if start is None else np.array(start, dtype=float)
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
        spending = evals[act] >= max_iter  # the rows out of evaluations (rare: skipped when there is none)
        ok = ~too_high
        if spending.any():
            over = ok & (evals[act] > max_iter)  # only a pending certification gets here: the trivial bound 1
            done[act[over]] = True
            ok &= ~over
        moved, step = act[ok], step[ok]
        stepped[moved] = True
        new = np.minimum(ma[ok] + np.maximum(step, 0.0), 1.0)
        mu[moved] = new
        rows = moved[(step <= tol * np.maximum(new, 1e-9)) | (new >= 1.0)]  # converged: certify
        hi = np.minimum(mu[rows] * (1 + 2 * tol) + 1e-15, 1.0)
        top = hi >= 1.0
        done[rows[top]] = True  # the trivial bound 1
        below = ~top
        mu[rows[below]], certifying[rows[below]] = hi[below], True
        if spending.any():
            spent = ~done[act] & ~certifying[act] & spending
            done[act[spent]] = True  # the trivial bound 1
    return out
