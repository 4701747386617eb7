"""Feasibility before calibration: the smallest group that can certify anything, per bound, against brute force."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from gpac_utils import GPAC, GroupWarning, Recipe, Settings, threshold
from gpac_utils.bounds import BOUNDS
from gpac_utils.calibrate import NO_FEASIBLE, TOO_FEW
from gpac_utils.checks import ParameterError
from gpac_utils.feasibility import best_case_ucb, expected_labels, feasibility, min_items, min_terms, terms_of


def brute_min_terms(bound, eps, alpha, term_range, upto=3000):
    """The first m whose all-zero bound is <= eps, by evaluating the library's bound at m = 1, 2, ..."""
    for m in range(1, upto):
        if best_case_ucb(bound, m, alpha, term_range) <= eps:
            return m
    raise AssertionError("not found")


SETTINGS = [(0.05, 0.05, 1.0), (0.1, 0.05, 1.0), (0.05, 0.01, 1.0), (0.1, 0.1, 2.0), (0.2, 0.05, 4.0)]


@pytest.mark.parametrize("bound", sorted(BOUNDS))
@pytest.mark.parametrize("eps,alpha,r", SETTINGS)
def test_min_terms_equals_brute_force(bound, eps, alpha, r):
    if bound == "hoeffding" and r > 1:  # hundreds of thousands of terms: the closed form is checked below
        pytest.skip("too large for a linear scan")
    assert min_terms(bound, eps, alpha, r) == brute_min_terms(bound, eps, alpha, r)


@pytest.mark.parametrize("eps,alpha,r", SETTINGS)
def test_closed_forms(eps, alpha, r):
    """The formulas of FORMULAS, written out independently."""
    binomial = math.ceil(math.log(alpha) / math.log(1 - eps / r))
    assert min_terms("hoeffding_bentkus", eps, alpha, r) == binomial
    assert min_terms("clopper_pearson", eps, alpha, r) == binomial
    assert (1 - eps / r) ** binomial <= alpha < (1 - eps / r) ** (binomial - 1)
    assert min_terms("empirical_bernstein", eps, alpha, r) == math.ceil(1 + 7 * r * math.log(2 / alpha) / (3 * eps))
    assert min_terms("hoeffding", eps, alpha, r) == math.ceil(r * r * math.log(2 / alpha) / (2 * eps * eps))
    assert min_terms("clt", eps, alpha, r) == 2


def test_the_compendiums_59():
    assert min_items(0.05, 0.05) == 59 and min_terms("hoeffding_bentkus", 0.05, 0.05) == 59


def test_wsr_feasible_set_is_upward_closed():
    ok = [best_case_ucb("wsr", m, 0.05) <= 0.05 for m in range(1, 200)]
    first = ok.index(True)
    assert all(ok[first:]) and not any(ok[:first]) and first + 1 == min_terms("wsr", 0.05, 0.05)


@pytest.mark.parametrize(
    "recipe",
    [
        Recipe(),
        Recipe(sampling="bernoulli", label_prob=0.5),
        Recipe(sampling="bernoulli", label_prob=0.25),
        Recipe(bound="wsr", sampling="bernoulli", label_prob=0.5),
        Recipe(bound="empirical_bernstein"),
        Recipe(bound="clopper_pearson", sampling="bernoulli", label_prob=0.5),
    ],
    ids=lambda r: f"{r.bound}-{r.sampling}-{r.label_prob}",
)
def test_min_items_is_where_the_calibrator_starts_to_certify(recipe):
    """Brute force through the calibration itself: zero losses, n - 1 items certify nothing, n items do."""
    eps, alpha = 0.1, 0.05
    n = min_items(eps, alpha, recipe)
    for size, expected in ((n - 1, False), (n, True)):
        u = np.linspace(0, 1, size)
        got = np.isfinite(threshold(u, np.zeros(size), eps=eps, alpha=alpha, recipe=recipe, rng=0))
        assert bool(got) == expected, (size, recipe)


def test_resample_terms_and_labels():
    paper = Recipe(bound="hoeffding", sampling="resample", label_prob=0.5, rule="max")
    n = min_items(0.1, 0.05, paper)
    m = min_terms("hoeffding", 0.1, 0.05, 2.0)
    assert terms_of(n, paper) >= m > terms_of(n - 1, paper)
    assert expected_labels(100, Recipe(sampling="bernoulli", label_prob=0.3)) == pytest.approx(30)


def test_bernoulli_needs_more_labels_than_full():
    """pi * n_min(pi) >= n_min(1): Bernoulli labelling never needs fewer labels (notebook 32's exercise)."""
    full = min_items(0.05, 0.05)
    for pi in (0.1, 0.25, 0.5, 0.9):
        rec = Recipe(sampling="bernoulli", label_prob=pi)
        assert expected_labels(min_items(0.05, 0.05, rec), rec) >= full - 1


def test_feasibility_table_and_simultaneous():
    t = feasibility({"a": 58, "b": 59}, Settings(eps=0.05))
    assert t["feasible"].tolist() == [False, True] and t["n_needed"].tolist() == [59, 59]
    s = feasibility({"a": 58, "b": 59}, Settings(eps=0.05, correction="bonferroni"))
    assert s["n_needed"].iloc[0] == min_items(0.05, 0.025) > 59
    m = feasibility({"a": 70}, Settings(eps=0.05, min_group_size=80))
    assert not m["feasible"].iloc[0] and m["n_needed"].iloc[0] == 80
    with pytest.raises(ParameterError, match="^settings: must be a Settings"):
        feasibility({"a": 1}, 0.05)
    with pytest.raises(ParameterError, match="^settings: feasibility does not read mode='joint'"):
        feasibility({"a": 1}, Settings(eps=0.05, mode="joint"))


def test_fit_warns_and_records_the_two_always_think_statuses():
    rng = np.random.default_rng(0)
    g = np.repeat(["small", "lossy", "fine"], [40, 300, 300])
    # every item of "lossy" is lost and all share one score: the lowest candidate already has risk 1
    u = np.where(g == "lossy", 0.5, rng.uniform(size=g.size))
    loss = np.where(g == "lossy", 1.0, 0.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = GPAC(0.05).fit(u, loss, g)
    msgs = [str(w.message) for w in caught if issubclass(w.category, GroupWarning)]
    assert any("'small'" in m and "fewer than 59" in m for m in msgs), msgs
    assert cal.groups_["small"].status == TOO_FEW and cal.groups_["small"].n == 40
    assert cal.groups_["lossy"].status == NO_FEASIBLE
    fine = cal.groups_["fine"]
    assert fine.status == "certified" and fine.labelled == 300 and 0 < fine.ucb <= 0.05


def test_gpac_plan_reports_feasibility(tmp_path, capsys):
    from gpac_utils.cli import main

    rng = np.random.default_rng(0)
    g = np.repeat(["big", "small"], [300, 30])
    u = rng.uniform(size=g.size)
    loss = (rng.uniform(size=g.size) < 0.1 * u).astype(float)
    path = tmp_path / "t.csv"
    import pandas as pd

    pd.DataFrame({"group": g, "u": u, "loss": loss}).to_csv(path, index=False)
    out = tmp_path / "plan.csv"
    # a 10 % pilot: the calibration labels come from the rows outside it (270 and 27)
    args = ["plan", "--data", str(path), "--score-col", "u", "--eps", "0.05", "--n-resamples", "5"]
    args += ["--pilot-fraction", "0.1"]
    assert main([*args, "--grid", "20,59,100", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "certifies nothing with fewer than 59 items (59 labels expected)" in captured.out
    assert "1 group(s) have too few items to certify any threshold" in captured.err and "'small'" in captured.err
    t = pd.read_csv(out).query("allocation == 'planned'").set_index("group")
    assert t.loc["big", "feasible"] == True and t.loc["small", "feasible"] == False  # noqa: E712 (read back from CSV)
    assert t.loc["small", "n_needed"] == 59 and t.loc["big", "labels_needed"] == 59
    # --risk routed: the routed risk's minimum (140) in the feasibility lines and columns
    assert main([*args, "--grid", "20,59,100,140", "--risk", "routed", "--budget", "150", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "risk routed, m >= log(alpha/64)" in captured.out
    assert "certifies nothing with fewer than 140 items (140 labels expected)" in captured.out
    t = pd.read_csv(out).query("allocation == 'planned'").set_index("group")
    assert t.loc["big", "feasible"] == True and t.loc["big", "n_needed"] == 140  # noqa: E712
    assert main([*args, "--risk", "routed", "--bound", "wsr", "-o", str(out)]) == 2  # no p-value: refused
    assert "--risk: 'routed' needs" in capsys.readouterr().err


def test_the_deploying_page_quotes_the_minimum():
    from gpac_utils.workflow.paths import REPO_ROOT

    text = (REPO_ROOT / "docs" / "deploying.md").read_text()
    assert f"At ε = α = 0.05 with every item labelled, Hoeffding–Bentkus needs {min_items(0.05, 0.05)} items" in text
    half = Recipe(sampling="bernoulli", label_prob=0.5)
    assert 1.9 < min_items(0.05, 0.05, half) / min_items(0.05, 0.05) < 2.1  # "about twice the items"
    assert abs(expected_labels(min_items(0.05, 0.05, half), half) - min_items(0.05, 0.05)) <= 1  # "same labels"


# --- the routed risk (issue 37.4): its first point is tested at alpha / ROUTED_GRID -----------------


@pytest.mark.parametrize("eps,alpha,expected", [(0.05, 0.05, 140), (0.1, 0.05, 68)])
def test_routed_minimum_is_the_closed_form(eps, alpha, expected):
    from gpac_utils.risks import ROUTED_GRID

    closed = math.ceil(math.log(alpha / ROUTED_GRID) / math.log(1 - eps))
    assert min_items(eps, alpha, risk="routed") == closed == expected
    assert min_terms("clopper_pearson", eps, alpha, risk="routed") == closed


@pytest.mark.parametrize(
    "recipe",
    [Recipe(), Recipe(sampling="bernoulli", label_prob=0.5), Recipe(bound="clopper_pearson")],
    ids=lambda r: f"{r.bound}-{r.sampling}",
)
def test_routed_minimum_is_where_the_library_procedure_starts_to_certify(recipe):
    """A loss-free group of m - 1 items gets -inf from the library's own procedure, m items a threshold."""
    from gpac_utils.calibrate import routed_threshold

    eps, alpha = 0.05, 0.05
    m = min_items(eps, alpha, recipe, risk="routed")
    for size, expected in ((m - 1, False), (m, True)):
        u = np.linspace(0, 1, size)
        t = routed_threshold(u, np.zeros(size), eps=eps, alpha=alpha, recipe=recipe, rng=0)
        assert bool(np.isfinite(t)) == expected, (size, recipe)
    if recipe == Recipe():
        assert m == 140


def test_routed_statuses_warnings_and_table():
    u = np.concatenate([np.linspace(0, 1, 139), np.linspace(0, 1, 140)])
    g = np.repeat(["small", "big"], [139, 140])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cal = GPAC(0.05, risk="routed", min_group_size=1).fit(u, np.zeros(u.size), g)
    msgs = [str(w.message) for w in caught if issubclass(w.category, GroupWarning)]
    assert any("'small'" in m and "fewer than 140" in m and "routed" in m for m in msgs), msgs
    assert cal.groups_["small"].status == TOO_FEW and np.isneginf(cal.thresholds_["small"])
    assert cal.groups_["big"].status == "certified"
    t = feasibility({"small": 139, "big": 140}, Settings(eps=0.05, risk="routed"))
    assert t["feasible"].tolist() == [False, True] and t["n_needed"].tolist() == [140, 140]
    assert "alpha/64" in t["formula"].iloc[0]
    with pytest.raises(ValueError, match="risk"):
        Settings(eps=0.05, risk="nope")


def test_the_deploying_page_quotes_the_routed_minimum():
    """``risk="routed"``: the first rejection of its fallback procedure needs (1 - eps/R)^m <= alpha / K."""
    from gpac_utils.calibrate import routed_threshold
    from gpac_utils.risks import ROUTED_GRID
    from gpac_utils.workflow.paths import REPO_ROOT

    n = math.ceil(math.log(0.05 / ROUTED_GRID) / math.log(1 - 0.05))
    for size, certified in ((n - 1, False), (n, True)):  # zero losses: the best case, by brute force
        t = routed_threshold(np.linspace(0, 1, size), np.zeros(size), eps=0.05, alpha=0.05)
        assert bool(np.isfinite(t)) == certified, (size, t)
    text = " ".join((REPO_ROOT / "docs" / "deploying.md").read_text().split())
    assert f"⌈log(α/{ROUTED_GRID})/log(1 − ε/R)⌉" in text and f"{n} at ε = α = 0.05 with every item labelled" in text
    assert f"each of its {ROUTED_GRID} grid points at α/{ROUTED_GRID}" in text


def test_a_setting_no_number_of_items_can_certify_needs_inf_items():
    """eps = alpha = 1e-6 with the valid recipe needs more than MAX_TERMS items: min_items is inf, and so are the
    planner's n_needed and feasibility's n_needed and labels_needed (both raised OverflowError: int(inf))."""
    from gpac_utils import prediction

    settings = Settings(eps=1e-6, alpha=1e-6)
    assert min_items(1e-6, 1e-6) == math.inf and prediction.n_needed(settings, 2) == math.inf
    assert expected_labels(math.inf) == math.inf
    t = feasibility({"a": 10, "b": 10**6}, settings)
    assert (t["n_needed"] == math.inf).all() and (t["labels_needed"] == math.inf).all() and not t["feasible"].any()
