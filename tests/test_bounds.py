"""Every bound against an independent brute-force or closed-form computation."""

import math

import numpy as np
import pytest
from scipy import stats

from gpac_utils import bound_references, bounds
from gpac_utils.checks import ParameterError

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


# --- every registered bound against its independent reference (gpac_utils.bound_references) ---


@pytest.mark.parametrize("name", list(bounds.BOUNDS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bound_matches_reference(name, seed):
    entry = bounds.BOUNDS[name]
    z, u, cand, R = _sample(seed, binary=True)
    got = bounds.ucb(name, z, u, cand, ALPHA, R)
    want = np.array([entry.reference(_terms(z, u, c), ALPHA, R) for c in cand])
    np.testing.assert_allclose(got, want, rtol=entry.tolerance, atol=entry.tolerance * R)


def test_wsr_errs_on_the_conservative_side():
    for seed in (0, 1, 2):
        z, u, cand, R = _sample(seed, binary=True)
        want = np.array([bound_references.wsr_reference(_terms(z, u, c), ALPHA, R) for c in cand])
        assert np.all(bounds.ucb("wsr", z, u, cand, ALPHA, R) >= want - 1e-12)


@pytest.mark.parametrize("name", bounds.BOUNDS.names(binary_terms=False))
def test_bound_matches_reference_nonbinary(name):
    entry = bounds.BOUNDS[name]
    z, u, cand, R = _sample(7, binary=False)
    got = bounds.ucb(name, z, u, cand, ALPHA, R)
    want = np.array([entry.reference(_terms(z, u, c), ALPHA, R) for c in cand])
    np.testing.assert_allclose(got, want, rtol=entry.tolerance, atol=entry.tolerance * R)


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
    for name in bounds.BOUNDS.names(monotone=True):
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


def test_registry_kinds_and_properties():
    assert bounds.BOUNDS.names(valid=False) == ["clt", "hoeffding"]
    assert set(bounds.BOUNDS.names(valid=True)) == {
        "hoeffding_bentkus",
        "empirical_bernstein",
        "wsr",
        "clopper_pearson",
    }
    assert bounds.BOUNDS.names(sequential=True) == ["wsr"]
    assert bounds.BOUNDS.names(binary_terms=True) == ["clopper_pearson"]
    assert bounds.BOUNDS["clt"].kind == "paper" and bounds.BOUNDS["wsr"].kind == "valid"


def test_non_monotone_bounds_are_flagged_honestly():
    """A bound marked non-monotone does decrease somewhere when a term is added (so the flag matters)."""
    z, u = np.ones(10), np.linspace(0, 1, 10)  # the last term shrinks the variance to 0
    cand = u
    for name in bounds.BOUNDS.names(monotone=False, sequential=False):
        assert np.any(np.diff(bounds.ucb(name, z, u, cand, 0.05, 1.0)) < -1e-9), name


def test_unknown_bound_and_removed_names_are_one_line_errors():
    with pytest.raises(ValueError, match=r"bound: unknown 'nope'; choose one of \['clt'"):
        bounds.ucb("nope", [0.0], [0.1], [0.2], 0.05, 1.0)
    with pytest.raises(AttributeError, match=r"VALID_BOUNDS was removed; use BOUNDS.names\(valid=True\)"):
        bounds.VALID_BOUNDS  # noqa: B018


def test_a_registered_bound_flows_through_ucb_and_is_removed_afterwards():
    half_hoeffding = bounds.Bound(
        "half_hoeffding",
        lambda s1, s2, m, alpha, term_range: s1 / m + term_range * math.sqrt(math.log(1 / alpha) / (2 * m)),
        True,
        lambda x, alpha, R: x.mean() + R * math.sqrt(math.log(1 / alpha) / (2 * len(x))),
        "one-sided Hoeffding",
        monotone=True,
    )
    z, u, cand, R = _sample(0)
    with bounds.BOUNDS.registered(half_hoeffding):
        got = bounds.ucb("half_hoeffding", z, u, cand, ALPHA, R)
        want = [half_hoeffding.reference(_terms(z, u, c), ALPHA, R) for c in cand]
        np.testing.assert_allclose(got, want, rtol=1e-12)
        with pytest.raises(ValueError, match="already registered"):
            bounds.BOUNDS.register(half_hoeffding)
    assert "half_hoeffding" not in bounds.BOUNDS


@pytest.mark.parametrize("m", [100, 200, 400])
def test_wsr_all_zero_terms_match_reference(m):
    """Regression: an iterate landing on the root within rounding must be accepted, not restarted."""
    z, u = np.zeros(m), np.linspace(0, 1, m)
    got = bounds.ucb("wsr", z, u, [0.5], 0.05, 1.0)[0]
    want = bound_references.wsr_reference(z, 0.05, 1.0)
    assert want < 0.05
    assert got == pytest.approx(want, rel=1e-6) and got >= want * (1 - 1e-9)


def test_wsr_never_returns_the_trivial_bound_when_data_are_informative():
    rng = np.random.default_rng(5)
    z = 2.0 * (rng.random((300, 100)) < 0.02)
    u = rng.random((300, 100))
    cand = np.sort(u, axis=1)[:, ::10]
    got = bounds.ucb("wsr", z, u, cand, 0.05, 2.0)
    assert np.all(got < 2.0)


def test_a_pvalue_that_takes_only_scalars_is_refused_when_the_bound_is_made():
    """The routed risk calls a bound's p-value on arrays (every grid point at once): a scalar-only one is one line
    at its entry, not a traceback at a calibration."""
    hb = bounds.BOUNDS["hoeffding_bentkus"]

    def scalar(k, m, e):
        return 1.0 if k > m * e else math.exp(-2 * m * (e - k / m) ** 2)  # fails on arrays: truth value ambiguous

    fields = {f: getattr(hb, f) for f in ("function", "valid", "reference", "citation")}
    with pytest.raises(ParameterError, match=r"^pvalue: bound 'scalar': pvalue\(k, m, e\) takes arrays .* ValueError"):
        bounds.Bound("scalar", **fields, pvalue=scalar)
    with pytest.raises(ParameterError, match=r"it gave \[\[2\.0, 2\.0\]\]$"):
        bounds.Bound("above_one", **fields, pvalue=lambda k, m, e: 2 + 0 * k)
    assert bounds.Bound("arrays", **fields, pvalue=hb.pvalue).pvalue is hb.pvalue
