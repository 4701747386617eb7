"""Independent references for the bounds: each computes one candidate's bound the slow, direct way.

A reference takes the thresholded terms ``x`` (``z_t 1{U_t <= c}`` for one candidate ``c``), the
level ``alpha`` and the term range ``R``, and returns the upper confidence bound at that
candidate. They share no code with :mod:`gpac_utils.bounds` (grid scans and scipy's root finders
instead of the package's Newton searches and prefix sums); every entry of
:data:`gpac_utils.bounds.BOUNDS` names its reference, and ``tests/test_bounds.py`` checks each
registered bound against it.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, stats

__all__ = [
    "clt_reference",
    "hoeffding_reference",
    "empirical_bernstein_reference",
    "clopper_pearson_reference",
    "hoeffding_bentkus_reference",
    "wsr_reference",
]


def clt_reference(x, alpha, R):
    """Mean plus the normal quantile times the standard error (sample standard deviation)."""
    return x.mean() + stats.norm.ppf(1 - alpha) * x.std(ddof=1) / math.sqrt(len(x))


def hoeffding_reference(x, alpha, R):
    """Mean plus ``R sqrt(log(2/alpha) / (2 n))``."""
    return x.mean() + math.sqrt(R**2 * math.log(2 / alpha) / (2 * len(x)))


def empirical_bernstein_reference(x, alpha, R):
    """Maurer & Pontil (2009), Theorem 4, on ``x / R``."""
    y = x / R
    n = len(y)
    L = math.log(2 / alpha)
    return R * (y.mean() + math.sqrt(2 * y.var(ddof=1) * L / n) + 7 * L / (3 * (n - 1)))


def clopper_pearson_reference(x, alpha, R):
    """The exact binomial upper bound from scipy's beta quantile."""
    k, n = int(round((x / R).sum())), len(x)
    return R * (1.0 if k == n else stats.beta.ppf(1 - alpha, k + 1, n - k))


def hoeffding_bentkus_reference(x, alpha, R):
    """Bates et al. (2021) HB p-value, inverted by a fine grid scan (independent of the code's root finders)."""
    y = x / R
    n, mu = len(y), y.mean()
    t = np.linspace(0, 1, 200_001)[1:-1]
    t = t[t >= mu]

    def h1(a, b):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.nan_to_num(a * np.log(a / b)) + np.nan_to_num((1 - a) * np.log((1 - a) / (1 - b)))

    p = np.minimum(np.exp(-n * h1(np.minimum(mu, t), t)), math.e * stats.binom.cdf(math.ceil(n * mu), n, t))
    rejected = t[p <= alpha]
    return R * (rejected[0] if rejected.size else 1.0)


def wsr_reference(x, alpha, R):
    """Bates et al.'s WSR_mu_plus, with scipy's brentq (independent of the code's Newton search)."""
    y = x / R
    n = len(y)
    muhat = (np.cumsum(y) + 0.5) / (1 + np.arange(1, n + 1))
    sigma2hat = (np.cumsum((y - muhat) ** 2) + 0.25) / (1 + np.arange(1, n + 1))
    sigma2hat[1:] = sigma2hat[:-1]
    sigma2hat[0] = 0.25
    nu = np.minimum(np.sqrt(2 * np.log(1 / alpha) / n / sigma2hat), 1)

    def kn(mu):
        with np.errstate(divide="ignore"):
            return np.max(np.cumsum(np.log(1 - nu * (y - mu)))) + np.log(alpha)

    if kn(1.0) < 0:
        return R
    return R * optimize.brentq(kn, 1e-12, 1.0, xtol=1e-13, rtol=1e-13)
