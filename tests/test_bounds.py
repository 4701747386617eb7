"""Every bound against an independent brute-force or closed-form computation."""

import math

import numpy as np
import pytest
from scipy import optimize, stats

from gpac_utils import bounds

ALPHA = 0.1


def _sample(seed, m=40, R=2.0, binary=True):
    rng = np.random.default_rng(seed)
    u = np.round(rng.random(m), 1)  # coarse scores: many exact ties
    if binary:
        z = R * (rng.random(m) < 0.3 + 0.5 * u)
    else:
        z = R * rng.random(m) * (rng.random(m) < 0.6)
    cand = np.unique(np.concatenate([u, [-1.0, 0.05, 2.0]]))
    return z.astype(float), u, cand, R


def _terms(z, u, c):
    """The thresholded terms Z_t 1{U_t <= c}, computed directly."""
    return np.where(u <= c, z, 0.0)


# --- independent references ------------------------------------------------------------------


def ref_clt(x, alpha, R):
    return x.mean() + stats.norm.ppf(1 - alpha) * x.std(ddof=1) / math.sqrt(len(x))


def ref_hoeffding(x, alpha, R):
    return x.mean() + math.sqrt(R**2 * math.log(2 / alpha) / (2 * len(x)))


def ref_eb(x, alpha, R):
    y = x / R
    n = len(y)
    L = math.log(2 / alpha)
    return R * (y.mean() + math.sqrt(2 * y.var(ddof=1) * L / n) + 7 * L / (3 * (n - 1)))


def ref_cp(x, alpha, R):
    k, n = int(round((x / R).sum())), len(x)
    return R * (1.0 if k == n else stats.beta.ppf(1 - alpha, k + 1, n - k))


def ref_hb(x, alpha, R):
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


def ref_wsr(x, alpha, R):
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


REFS = {
    "clt": ref_clt,
    "hoeffding": ref_hoeffding,
    "empirical_bernstein": ref_eb,
    "clopper_pearson": ref_cp,
    "hoeffding_bentkus": ref_hb,
    "wsr": ref_wsr,
}
TOL = {"hoeffding_bentkus": 2e-5, "wsr": 1e-6}


@pytest.mark.parametrize("name", sorted(REFS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bound_matches_reference(name, seed):
    z, u, cand, R = _sample(seed, binary=True)
    got = bounds.ucb(name, z, u, cand, ALPHA, R)
    want = np.array([REFS[name](_terms(z, u, c), ALPHA, R) for c in cand])
    tol = TOL.get(name, 1e-10)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * R)
    if name == "wsr":
        assert np.all(got >= want - 1e-12), "WSR must err on the conservative side"


@pytest.mark.parametrize("name", ["clt", "hoeffding", "empirical_bernstein", "hoeffding_bentkus", "wsr"])
def test_bound_matches_reference_nonbinary(name):
    z, u, cand, R = _sample(7, binary=False)
    got = bounds.ucb(name, z, u, cand, ALPHA, R)
    want = np.array([REFS[name](_terms(z, u, c), ALPHA, R) for c in cand])
    tol = TOL.get(name, 1e-10)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * R)


def test_batch_equals_loop():
    rng = np.random.default_rng(3)
    z = 2.0 * (rng.random((5, 30)) < 0.3)
    u = rng.random((5, 30))
    cand = np.sort(u, axis=1)
    for name in bounds.BOUNDS:
        got = bounds.ucb(name, z, u, cand, 0.05, 2.0)
        for b in range(5):
            np.testing.assert_allclose(got[b], bounds.ucb(name, z[b], u[b], cand[b], 0.05, 2.0))


def test_closed_forms_at_zero_losses():
    m, alpha = 50, 0.05
    z, u = np.zeros(m), np.linspace(0, 1, m)
    c = np.array([0.5])
    # Clopper-Pearson with k = 0: 1 - alpha^(1/m); HB's Hoeffding part has the same closed form.
    assert bounds.ucb("clopper_pearson", z, u, c, alpha, 1.0)[0] == pytest.approx(1 - alpha ** (1 / m))
    hb = bounds.ucb("hoeffding_bentkus", z, u, c, alpha, 1.0)[0]
    bentkus = stats.beta.ppf(1 - alpha / math.e, 1, m)
    assert hb == pytest.approx(min(1 - alpha ** (1 / m), bentkus), rel=1e-9)
    assert bounds.ucb("clt", z, u, c, alpha, 1.0)[0] == 0.0
    assert bounds.ucb("hoeffding", z, u, c, alpha, 1.0)[0] == pytest.approx(math.sqrt(math.log(2 / alpha) / (2 * m)))


def test_wsr_all_ones_is_trivial_and_monotone_bounds_grow():
    z, u = np.ones(20), np.linspace(0, 1, 20)
    assert bounds.ucb("wsr", z, u, [1.0], 0.05, 1.0)[0] == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    z = 1.0 * (rng.random(200) < 0.2)
    u = rng.random(200)
    cand = np.unique(u)
    for name in bounds.MONOTONE_BOUNDS:
        assert np.all(np.diff(bounds.ucb(name, z, u, cand, 0.05, 1.0)) >= -1e-12), name


def test_clopper_pearson_rejects_nonbinary_terms():
    with pytest.raises(ValueError, match="clopper_pearson"):
        bounds.ucb("clopper_pearson", [0.0, 0.5], [0.1, 0.2], [0.2], 0.05, 1.0)


@pytest.mark.parametrize("bad", [dict(bound="nope"), dict(alpha=0.0), dict(alpha=1.0), dict(term_range=0.0)])
def test_bad_arguments(bad):
    kw = dict(bound="clt", z=[0.0, 1.0], scores=[0.1, 0.2], candidates=[0.2], alpha=0.05, term_range=1.0)
    kw.update(bad)
    with pytest.raises(ValueError):
        bounds.ucb(**kw)


def test_out_of_range_terms_and_unsorted_candidates():
    with pytest.raises(ValueError, match="term_range"):
        bounds.ucb("clt", [0.0, 3.0], [0.1, 0.2], [0.2], 0.05, 2.0)
    with pytest.raises(ValueError, match="ascending"):
        bounds.ucb("clt", [0.0, 1.0], [0.1, 0.2], [0.2, 0.1], 0.05, 2.0)


def test_registry_kinds():
    assert set(bounds.PAPER_BOUNDS) == {"clt", "hoeffding"}
    assert set(bounds.VALID_BOUNDS) == {"hoeffding_bentkus", "empirical_bernstein", "wsr", "clopper_pearson"}


@pytest.mark.parametrize("m", [100, 200, 400])
def test_wsr_all_zero_terms_match_reference(m):
    """Regression: an iterate landing on the root within rounding must be accepted, not restarted."""
    z, u = np.zeros(m), np.linspace(0, 1, m)
    got = bounds.ucb("wsr", z, u, [0.5], 0.05, 1.0)[0]
    want = ref_wsr(z, 0.05, 1.0)
    assert want < 0.05
    assert got == pytest.approx(want, rel=1e-6) and got >= want * (1 - 1e-9)


def test_wsr_never_returns_the_trivial_bound_when_data_are_informative():
    rng = np.random.default_rng(5)
    z = 2.0 * (rng.random((300, 100)) < 0.02)
    u = rng.random((300, 100))
    cand = np.sort(u, axis=1)[:, ::10]
    got = bounds.ucb("wsr", z, u, cand, 0.05, 2.0)
    assert np.all(got < 2.0)
