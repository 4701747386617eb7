"""gpac_utils.paper.theory: closed-form risks, oracle thresholds, Prop. 3.3, partition gap, and the
audit's plumbing (the audit is notebook 13's, executed by test_notebooks on the fast profile; its committed
paper-profile table, benchmarks/validity_audit.csv, is checked against the code here)."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from gpac_utils import bounds, calibrate, sampling, selection
from gpac_utils.checks import DataError, ParameterError
from gpac_utils.paper.theory import partition_gap as pg
from gpac_utils.paper.theory import populations
from gpac_utils.paper.theory import validity_audit as va
from gpac_utils.paper.theory.populations import Population, RiskGroup
from gpac_utils.recipe import Recipe
from gpac_utils.workflow import config

POP = Population(
    (
        RiskGroup("easy", 0.5, a=0.8, b=3.0),
        RiskGroup("flat", 0.3, a=0.5, b=0.0),
        RiskGroup("mid", 0.2, a=0.6, b=1.0, lo=0.2, hi=0.9),
    )
)


# ------------------------------------------------------------------ closed-form risk vs Monte Carlo
@pytest.mark.parametrize("name", ["easy", "flat", "mid"])
@pytest.mark.parametrize("u", [0.1, 0.35, 0.7, 1.0])
def test_group_risk_matches_monte_carlo(name, u):
    g = POP.group(name)
    n = 200_000
    loss, s = g.sample((n,), np.random.default_rng(1))
    z = loss * (s <= u)
    est, se = z.mean(), z.std(ddof=1) / math.sqrt(n)
    assert abs(est - float(g.risk(u))) <= 4 * se + 1e-12
    share = (s <= u).mean()
    assert abs(share - float(g.share(u))) <= 4 * math.sqrt(max(share * (1 - share), 1e-4) / n)


def test_marginal_and_interval_risk_match_monte_carlo():
    n = 300_000
    loss, s, gi = POP.sample(n, np.random.default_rng(2))
    counts = np.bincount(gi, minlength=3) / n
    assert np.all(np.abs(counts - POP.weights) <= 4 * np.sqrt(POP.weights * (1 - POP.weights) / n))
    for u in (0.2, 0.5, 0.9):
        z = loss * (s <= u)
        assert abs(z.mean() - float(POP.risk(u))) <= 4 * z.std(ddof=1) / math.sqrt(n)
    lo, hi, u = 0.25, 0.8, 0.6
    inside = (s > lo) & (s <= hi)
    z = (loss * (s <= u))[inside]
    assert abs(z.mean() - float(POP.interval_risk(u, lo, hi))) <= 4 * z.std(ddof=1) / math.sqrt(inside.sum())
    assert abs(inside.mean() - float(POP.mass(lo, hi))) <= 4 * math.sqrt(0.25 / n)


def test_risk_edge_cases_and_bad_groups():
    g = POP.group("easy")
    assert float(g.risk(-np.inf)) == 0.0 and float(g.share(-np.inf)) == 0.0
    assert float(g.risk(np.inf)) == pytest.approx(0.2)
    assert float(POP.group("mid").risk(0.1)) == 0.0  # below the support
    with pytest.raises(ValueError, match="loss probability"):
        RiskGroup("bad", 1.0, a=2.0, b=1.0)
    with pytest.raises(ValueError, match="lo < hi"):
        RiskGroup("bad", 1.0, a=0.1, b=1.0, lo=0.5, hi=0.5)
    with pytest.raises(KeyError, match="unknown group"):
        POP.group("nope")


# ------------------------------------------------------------------ oracle thresholds
@pytest.mark.parametrize("eps", [0.01, 0.05, 0.1, 0.15, 0.3])
def test_oracle_threshold_against_grid_search(eps):
    grid = np.linspace(0, 1, 200_001)
    for name in POP.names + [None]:
        r = POP.risk(grid, name)
        feasible = grid[r <= eps]
        u = populations.oracle_threshold(POP, eps, name)
        if r[-1] <= eps:
            assert u == np.inf
        else:
            assert abs(u - feasible.max()) <= 1e-5
            assert float(POP.risk(u, name)) <= eps + 1e-9


def test_oracle_threshold_is_the_closed_form_root():
    """For lo = 0, R(u | G) = a hi^-1 u^(b+1) / (b+1) on [0, hi]: u* = (eps (b+1) hi / a)^(1/(b+1)), +inf past hi."""
    for name in ("easy", "flat"):
        g = POP.group(name)
        for eps in (0.02, 0.1, 0.19, 0.25):
            root = (eps * (g.b + 1) * g.hi / g.a) ** (1 / (g.b + 1))
            expected = np.inf if root >= g.hi else root
            assert populations.oracle_threshold(POP, eps, name) == pytest.approx(expected, abs=1e-9)
    assert populations.oracle_threshold(POP, 0.25, "easy") == np.inf  # R(1) = 0.2 < 0.25


# ------------------------------------------------------------------ Proposition 3.3
def _random_population(rng, k=3, identical=False):
    a, b = rng.uniform(0.2, 1.0), rng.uniform(0, 4)
    groups = []
    for j in range(k):
        if not identical:
            a, b = rng.uniform(0.2, 1.0), rng.uniform(0, 4)
        groups.append(RiskGroup(f"g{j}", rng.uniform(0.1, 1), a=a, b=b))
    return Population(tuple(groups))


def test_grouping_never_hurts_against_a_common_valid_threshold():
    """Corrected Prop. 3.3: per-group thresholds >= the best single threshold valid in every group."""
    rng = np.random.default_rng(3)
    strict = 0
    for _ in range(200):
        pop = _random_population(rng)
        for eps in (0.03, 0.1):
            s = populations.oracle_summary(pop, eps)
            assert s["routed_share_grouped"] >= s["routed_share_common"] - 1e-12
            us = [s[f"u_{g}"] for g in pop.names]
            if max(us) - min(us) > 1e-6:
                assert s["routed_share_grouped"] > s["routed_share_common"]
                strict += 1
    assert strict > 300


def test_equality_when_groups_identical():
    rng = np.random.default_rng(4)
    for _ in range(50):
        pop = _random_population(rng, identical=True)
        for eps in (0.03, 0.1):
            s = populations.oracle_summary(pop, eps)
            assert s["routed_share_grouped"] == pytest.approx(s["routed_share_marginal"], abs=1e-9)
            assert s["routed_share_common"] == pytest.approx(s["routed_share_marginal"], abs=1e-9)


def test_paper_prop_3_3_counterexample():
    """Against marginal PAC (marginal constraint) grouping can lose: the paper's proof step
    "u* is feasible for the group-conditional problem" fails when R(u* | G_j) > eps."""
    pop = Population((RiskGroup("flat", 0.5, a=0.16, b=0.0), RiskGroup("late", 0.5, a=0.3, b=16.0)))
    s = populations.oracle_summary(pop, 0.1)
    assert s["routed_share_marginal"] == pytest.approx(1.0)  # marginal risk R(1) = 0.08 + 0.0088 <= 0.1
    assert s["routed_share_grouped"] == pytest.approx(0.5 * 0.625 + 0.5 * 1.0)
    assert s["max_group_risk_marginal"] > 0.1  # marginal threshold violates a group
    assert s["routed_share_grouped"] < s["routed_share_marginal"]
    assert s["routed_share_grouped"] > s["routed_share_common"]


# ------------------------------------------------------------------ partition gap
def _gap_bruteforce(C):
    """The partition gap by enumerating all k! relabelings (the independent reference)."""
    k = C.shape[0]
    return float(C.sum() - max(sum(C[i, s[i]] for i in range(k)) for s in itertools.permutations(range(k))))


def test_partition_gap_bruteforce_tiny_example():
    # three oracle groups, learned labels permuted and with two mistakes out of ten items
    reference = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 2])
    learned = np.array([2, 2, 1, 0, 0, 0, 1, 1, 1, 0])  # sigma: 0->2, 1->0, 2->1; items 2 and 9 wrong
    C = np.zeros((3, 3))
    np.add.at(C, (learned, reference), 1 / learned.size)  # the empirical confusion matrix
    assert pg.partition_gap(C) == pytest.approx(0.2)
    # hand brute force over all 3! relabelings
    best = min(np.mean(learned != np.array(p)[reference]) for p in itertools.permutations(range(3)))
    assert best == pytest.approx(0.2)
    rng = np.random.default_rng(5)
    for _ in range(30):
        C = rng.dirichlet(np.ones(16)).reshape(4, 4)
        assert pg.partition_gap(C) == pytest.approx(_gap_bruteforce(C), abs=1e-12)


def test_interval_confusion_and_gap():
    pop = Population((RiskGroup("only", 1.0, a=0.5, b=1.0),))  # U ~ Uniform(0, 1)
    C = pg.interval_confusion(pop, [0.3, 0.7], [1 / 3, 2 / 3])
    assert C.sum() == pytest.approx(1.0)
    assert pg.partition_gap(C) == pytest.approx(abs(0.3 - 1 / 3) + abs(0.7 - 2 / 3))
    assert pg.partition_gap(pg.interval_confusion(pop, [1 / 3, 2 / 3], [1 / 3, 2 / 3])) == pytest.approx(0.0)
    # fewer learned groups than oracle groups: padded, the missing group counts as misassigned
    assert pg.partition_gap(pg.interval_confusion(pop, [0.5], [1 / 3, 2 / 3])) == pytest.approx(1 / 3)


def test_interval_partition_routed_share_matches_groups_when_groups_are_intervals():
    pop = Population(
        (
            RiskGroup("a", 1, a=0.6, b=1.0, lo=0.0, hi=0.5),
            RiskGroup("b", 1, a=0.2, b=0.0, lo=0.5, hi=1.0),
        )
    )
    eps = 0.05
    u = pg.interval_thresholds(pop, [0.5], eps)
    for j, name in enumerate(pop.names):
        assert u[j] == pytest.approx(populations.oracle_threshold(pop, eps, name), abs=1e-9)
    routed = pg.interval_partition_routed_share(pop, [0.5], eps)
    assert routed == pytest.approx(populations.oracle_summary(pop, eps)["routed_share_grouped"], abs=1e-9)


# ------------------------------------------------------------------ audit plumbing
@pytest.mark.parametrize("bound", ["clt", "hoeffding_bentkus", "clopper_pearson"])
@pytest.mark.parametrize("scheme,label_prob", [("resample", 0.5), ("bernoulli", 0.5), ("full", 1.0)])
def test_shared_work_equals_calibrate_threshold(bound, scheme, label_prob):
    loss, u = populations.AUDIT_POPULATION.group("flat").sample((20, 80), np.random.default_rng(6))
    for rule in ("first-crossing", "max"):
        recipe = Recipe(bound=bound, sampling=scheme, label_prob=None if scheme == "full" else label_prob, rule=rule)
        ref = calibrate.batch_threshold(u, loss, eps=0.1, alpha=0.05, recipe=recipe, rng=np.random.default_rng(7))
        d = sampling.draw(u, loss, scheme, label_prob, np.random.default_rng(7), shuffle=False)
        cand = selection.candidate_grid(u, "auto", bound)
        got = selection.select(cand, bounds.ucb(bound, d.z, d.scores, cand, 0.05, d.term_range), 0.1, rule)
        np.testing.assert_array_equal(got, ref)


# ------------------------------------------------------------------ the committed validity audit
def _paper_settings() -> dict:
    """Notebook 13's paper-profile audit settings (read from its file: config.load would switch the profile)."""
    raw = config.read_config("13_validity_audit")
    return va.settings_of({**raw["common"], **raw["profiles"]["paper"]})


# (group size index, scheme index): n = 25 with every label, n = 50 resampled at pi = 0.1 (500 terms per
# calibration: wsr's slowest kind of cell, at a small n), n = 100 with Bernoulli labels at pi = 0.5
SAMPLED_CELLS = [(0, 5), (1, 2), (2, 3)]


@pytest.mark.parametrize("ni,si", SAMPLED_CELLS)
def test_the_committed_validity_audit_holds_the_rows_the_code_computes(ni, si):
    """benchmarks/validity_audit.csv (make validity-audit), which notebook 13 reads on the paper profile: a
    sample of its cells recomputed from their own seeds, every row equal (floats to within va.RTOL). A change to a
    bound, the sampling, the population or notebook 13's settings without `make validity-audit` fails here."""
    settings = _paper_settings()
    table = va.read_audit(va.AUDIT_TABLE, settings=settings)
    assert len(table) == 1440
    n = settings["group_sizes"][ni]
    scheme, label_prob = va.audit_schemes(settings["label_probs"])[si]
    assert (n, scheme, label_prob) == [(25, "full", 1.0), (50, "resample", 0.1), (100, "bernoulli", 0.5)][
        SAMPLED_CELLS.index((ni, si))
    ]
    rows = va.audit_cell(populations.AUDIT_POPULATION, n, [settings["seed"], ni, si], scheme, label_prob, settings)
    got = va.with_pass(rows, settings["alpha"]).drop(columns=list(va.TIMING))
    cell = (table["n_group"] == n) & (table["scheme"] == scheme) & (table["pi"] == label_prob)
    want = table[cell].reset_index(drop=True)
    # floats to within RTOL: another CPU's SIMD paths may change their last bits (equal bit for bit on this one's)
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=va.RTOL, atol=0)
    assert va.same_rows(got, want)
    changed = want.assign(oracle_ratio=want["oracle_ratio"] * (1 + 1e-9))
    assert not va.same_rows(got, changed) and not va.same_rows(got, want.assign(violation_rate=want["mcse"]))


def test_the_validity_audit_table_is_refused_for_other_settings(tmp_path):
    settings = _paper_settings()
    with pytest.raises(DataError, match=r"validity_audit.csv: holds the audit of calibrations = \[1000\], not \[100\]"):
        va.read_audit(va.AUDIT_TABLE, settings={**settings, "calibrations": 100})
    with pytest.raises(DataError, match=r"group_sizes = \[25, 50, 100, 300, 1000\], not \[25, 100, 300\]"):
        va.read_audit(va.AUDIT_TABLE, settings={**settings, "group_sizes": [25, 100, 300]})
    with pytest.raises(DataError, match=r"missing.csv: no audit table; make validity-audit writes it"):
        va.read_audit(tmp_path / "missing.csv", settings=settings)


@pytest.mark.parametrize("settings", [None, ["seed"], {"seed": 0}])
def test_the_audit_refuses_settings_it_cannot_read(settings):
    with pytest.raises(ParameterError, match=r"^settings: "):
        va.validity_audit(populations.AUDIT_POPULATION, settings)
