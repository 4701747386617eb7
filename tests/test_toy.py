"""The quickstart's synthetic population (gpac_utils.paper.toy)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpac_utils import GPAC, PAC, PAPER, data
from gpac_utils.paper import toy

N = 40_000


def marginal_risk(t):
    """The population's risk of threshold ``t``: the group risks weighted by the group shares."""
    total = sum(v[0] for v in toy.TOY_GROUPS.values())
    return sum(v[0] / total * toy.toy_group_risk(t, g) for g, v in toy.TOY_GROUPS.items())


@pytest.fixture(scope="module")
def pop():
    return toy.toy_population(N, seed=11)


def test_schema_and_determinism(pop):
    assert list(pop.columns) == [
        "item_id",
        "group",
        "loss",
        "think_correct",
        "nothink_correct",
        "think_tokens",
        "nothink_tokens",
        "score_logits",
    ]
    data.validate(pop, require_group=True, require_tokens=True)
    assert pop["item_id"].is_unique and set(pop["group"]) == set(toy.TOY_GROUPS)
    small = toy.toy_population(500, seed=3)
    pd.testing.assert_frame_equal(small, toy.toy_population(500, seed=3))
    assert not small["score_logits"].equals(toy.toy_population(500, seed=4)["score_logits"])


def test_loss_is_the_binary_loss_of_the_correctness_flags(pop):
    np.testing.assert_array_equal(
        pop["loss"].to_numpy(), data.binary_loss(pop["think_correct"], pop["nothink_correct"])
    )


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "10"])
def test_bad_size_raises(bad):
    with pytest.raises(ValueError, match=r"^n: must be an integer >= 1, got "):
        toy.toy_population(bad)


def test_group_shares_match_within_mcse(pop):
    total = sum(v[0] for v in toy.TOY_GROUPS.values())
    for g, spec in toy.TOY_GROUPS.items():
        p = spec[0] / total
        got = np.mean(pop["group"] == g)
        mcse = np.sqrt(p * (1 - p) / N)
        assert abs(got - p) < 4 * mcse, (g, got, p)


@pytest.mark.parametrize("t", [0.2, 0.45, 0.7, 1.0])
def test_empirical_group_risk_matches_exact_risk(pop, t):
    for g in toy.TOY_GROUPS:
        sub = pop[pop["group"] == g]
        z = sub["loss"].to_numpy() * (sub["score_logits"].to_numpy() <= t)
        mcse = z.std(ddof=1) / np.sqrt(len(z))
        assert abs(z.mean() - toy.toy_group_risk(t, g)) < 4 * mcse + 1e-12, (g, t)
    z = pop["loss"].to_numpy() * (pop["score_logits"].to_numpy() <= t)
    assert abs(z.mean() - marginal_risk(t)) < 4 * z.std(ddof=1) / np.sqrt(N) + 1e-12


def test_exact_risk_limits_and_heterogeneity():
    for g, (_, a, b, c, s, _) in toy.TOY_GROUPS.items():
        assert toy.toy_group_risk(-np.inf, g) == 0.0 and toy.toy_group_risk(0.0, g) == 0.0
        assert toy.toy_group_risk(1.0, g) == pytest.approx(c + s * a / (a + b))
        assert toy.toy_group_risk(np.inf, g) == pytest.approx(c + s * a / (a + b))
    # The point of the toy: at the marginal oracle threshold for eps = 0.1 the hard group is over eps.
    grid = np.linspace(0, 1, 2001)
    t_marg = max(t for t in grid if marginal_risk(t) <= 0.1)
    assert toy.toy_group_risk(t_marg, "hard") > 0.15
    assert toy.toy_group_risk(t_marg, "easy") < 0.1
    with pytest.raises(KeyError, match="unknown toy group"):
        toy.toy_group_risk(0.5, "nope")


# ------------------------------------------------------------------ the quickstart's point
def test_pac_fails_in_hard_group_gpac_does_not():
    """Exact population risk of calibrated thresholds over 12 calibration sets (mean ± MCSE).

    The quickstart (notebook 00) fits, routes and measures the calibrators on this population; its
    own asserts check the measurements, this test checks the exact risks of the thresholds."""
    eps, pac_hard, gpac_hard = 0.1, [], []
    recipe = PAPER  # the recipe of the quickstart's sections 5-7
    for t in range(12):
        cal = toy.toy_population(3000, seed=100 + t)
        u, loss = cal["score_logits"].to_numpy(float), cal["loss"].to_numpy(float)
        pac = PAC(eps, 0.05, recipe, seed=t * 1000).fit(u, loss)
        gpac = GPAC(eps, 0.05, recipe, seed=t * 1000 + 1).fit(u, loss, cal["group"].to_numpy())
        pac_hard.append(toy.toy_group_risk(pac.thresholds_["__all__"], "hard"))
        gpac_hard.append(toy.toy_group_risk(gpac.thresholds_["hard"], "hard"))
    # PAC: mean hard-group risk significantly above eps. G-PAC: consistent with <= eps (the
    # paper's CLT bound is approximate, so we only require that "above eps" is not significant).
    pac_mean, pac_se = np.mean(pac_hard), np.std(pac_hard, ddof=1) / np.sqrt(len(pac_hard))
    gpac_mean, gpac_se = np.mean(gpac_hard), np.std(gpac_hard, ddof=1) / np.sqrt(len(gpac_hard))
    assert pac_mean - 4 * pac_se > eps, (pac_mean, pac_se)
    assert gpac_mean - 4 * gpac_se < eps, (gpac_mean, gpac_se)
    assert gpac_mean + 4 * gpac_se < pac_mean - 4 * pac_se
