"""Threshold selection on hand-computed examples, and the sampling schemes."""

import math

import numpy as np
import pytest

from gpac_utils import sampling, selection

CAND = np.array([0.1, 0.2, 0.3, 0.4, 0.5])


@pytest.mark.parametrize(
    "ucb,first,last",
    [
        ([0.01, 0.02, 0.09, 0.03, 0.2], 0.2, 0.4),  # dip after the crossing: the rules differ
        ([0.01, 0.02, 0.03, 0.04, 0.05], 0.5, 0.5),  # never crosses (0.05 <= eps counts as feasible)
        ([0.06, 0.02, 0.03, 0.04, 0.2], -math.inf, 0.4),  # the most conservative candidate fails
        ([0.06, 0.07, 0.08, 0.09, 0.2], -math.inf, -math.inf),  # nothing feasible: always think
    ],
)
def test_rules_by_hand(ucb, first, last):
    assert selection.select(CAND, ucb, 0.05, "first-crossing") == first
    assert selection.select(CAND, ucb, 0.05, "max") == last


def test_select_is_batched():
    ucb = np.array([[0.01, 0.09, 0.01, 0.01, 0.01], [0.01, 0.01, 0.01, 0.01, 0.01]])
    np.testing.assert_array_equal(selection.select(CAND, ucb, 0.05), [0.1, 0.5])
    np.testing.assert_array_equal(selection.select(CAND, ucb, 0.05, "max"), [0.5, 0.5])


def test_ties_in_scores_are_handled_exactly():
    # Two items share the score 0.3; one of them has a loss. The candidate 0.3 must include both.
    from gpac_utils import bounds

    z = np.array([0.0, 0.0, 1.0, 0.0])
    u = np.array([0.1, 0.3, 0.3, 0.6])
    ucb = bounds.ucb("clt", z, u, [0.1, 0.3, 0.6], 0.05, 1.0)
    assert ucb[0] == 0.0 and ucb[1] > 0.25
    # Selection over sorted scores with duplicates gives the same threshold as over distinct ones.
    from gpac_utils import Recipe
    from gpac_utils.calibrate import threshold

    t = threshold(u, z, eps=0.1, alpha=0.05, recipe=Recipe("clt", "full"))
    assert t == 0.1


def test_candidate_grid():
    s = np.array([0.3, 0.1, 0.1, 0.9, 0.5])
    np.testing.assert_array_equal(selection.candidate_grid(s), [0.1, 0.1, 0.3, 0.5, 0.9])
    g = selection.candidate_grid(np.linspace(0, 1, 101), 5)
    assert len(g) == 5 and set(g) <= set(np.linspace(0, 1, 101))
    with pytest.raises(ValueError):
        selection.candidate_grid(s, "some")
    with pytest.raises(ValueError):
        selection.select(CAND, np.zeros(5), 0.05, "median")


def test_resample_scheme_matches_algorithm_1():
    rng = np.random.default_rng(0)
    loss = np.array([0.0, 1.0, 1.0, 0.0])
    u = np.array([0.1, 0.2, 0.3, 0.4])
    d = sampling.draw(u, loss, "resample", 0.5, rng)
    assert d.z.shape == (8,)  # m = n / pi
    assert d.term_range == 2.0  # B / pi_min
    assert set(np.unique(d.z)) <= {0.0, 2.0}
    # Each term's score belongs to an item; a term is non-zero only for lossy items.
    for z, s in zip(d.z, d.scores):
        assert s in u and (z == 0 or loss[u == s][0] == 1)


def test_bernoulli_is_unbiased_and_full_is_exact():
    rng = np.random.default_rng(1)
    loss = rng.random((4000, 50))
    u = rng.random((4000, 50))
    d = sampling.draw(u, loss, "bernoulli", 0.25, rng)
    assert d.z.shape == (4000, 50) and np.all(d.term_range == 4.0)
    mean_z, mean_l = d.z.mean(), loss.mean()
    se = d.z.std() / math.sqrt(d.z.size)
    assert abs(mean_z - mean_l) < 4 * se
    f = sampling.draw(u[0], loss[0], "full", 0.3, rng)
    assert f.term_range == 1.0 and np.allclose(np.sort(f.z), np.sort(loss[0]))
    # Terms keep their own scores after the random reordering.
    pairs = dict(zip(u[0], loss[0]))
    assert all(pairs[s] == z for s, z in zip(f.scores, f.z))


def test_per_item_pi():
    rng = np.random.default_rng(2)
    loss = np.ones(1000)
    label_prob = np.where(np.arange(1000) < 500, 0.5, 1.0)
    d = sampling.draw(np.linspace(0, 1, 1000), loss, "bernoulli", label_prob, rng)
    assert d.term_range == 2.0
    assert set(np.unique(d.z)) <= {0.0, 1.0, 2.0}


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(scheme="bootstrap"), "scheme"),
        (dict(label_prob=0.0), "label_prob"),
        (dict(label_prob=1.5), "label_prob"),
        (dict(losses=[0.0, 2.0]), "losses"),
    ],
)
def test_sampling_bad_input(kw, match):
    args = dict(scores=[0.1, 0.2], losses=[0.0, 1.0], scheme="bernoulli", label_prob=0.5)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        sampling.draw(args["scores"], args["losses"], args["scheme"], args["label_prob"], 0)


@pytest.mark.parametrize("bound", ["hoeffding_bentkus", "empirical_bernstein", "clopper_pearson", "hoeffding"])
def test_batched_per_calibration_label_prob_does_not_leak(bound):
    """One calibration's labelling rate never widens another's bound (range per batch row)."""
    from gpac_utils import Recipe
    from gpac_utils.calibrate import batch_threshold, threshold

    rng = np.random.default_rng(3)
    u = rng.random((2, 500))
    loss = (rng.random((2, 500)) < u**3).astype(float)
    label_prob = np.stack([np.full(500, 0.9), np.full(500, 0.1)])
    recipe = Recipe(bound, "bernoulli", 0.5)
    batched = batch_threshold(u, loss, eps=0.1, alpha=0.05, recipe=recipe, label_prob=label_prob, rng=1)
    alone = threshold(u[0], loss[0], eps=0.1, alpha=0.05, recipe=recipe, label_prob=0.9, rng=1)
    assert batched[0] == alone


def test_first_crossing_scans_the_monotone_envelope():
    """wsr's bound dips below eps after a crossing; first-crossing stops at the envelope's crossing,
    the paper's max rule jumps past it."""
    from gpac_utils import Recipe
    from gpac_utils.calibrate import risk_curve

    rng = np.random.default_rng(7)
    u = rng.random(300)
    loss = (rng.random(300) < 0.2 * (u > 0.5)).astype(float)
    curve = risk_curve(u, loss, eps=0.05, alpha=0.1, recipe=Recipe("wsr", "bernoulli", 0.5), rng=3)
    env = curve["envelope"].to_numpy()
    assert np.all(np.diff(env) >= 0) and np.all(env >= curve["ucb"].to_numpy())
    chosen = curve.loc[curve.selected, "u"]
    if len(chosen):
        assert env[curve.selected.to_numpy()][0] <= 0.05
        later = curve["u"].to_numpy() > chosen.iloc[0]
        assert later.sum() == 0 or env[later][0] > 0.05
    ucb = np.array([0.01, 0.2, 0.03, 0.5])
    assert selection.select([0.1, 0.2, 0.3, 0.4], ucb, 0.05) == 0.1
    assert selection.select([0.1, 0.2, 0.3, 0.4], ucb, 0.05, "max") == 0.3


# --- issue 38, item 11: both rules of notebook 13's selection lesson must read one wsr curve ----------


def _lesson_population(reps: int, n: int = 200, seed: int = 40):
    """Notebook 13's selection population: loss probability 0.02 below 0.5, 1 on (0.5, 0.59], 0.01 above."""
    rng = np.random.default_rng(seed)
    u = rng.random((reps, n))
    p = np.where(u <= 0.5, 0.02, np.where(u <= 0.59, 1.0, 0.01))
    return u, (rng.random((reps, n)) < p).astype(float)


def test_one_seed_gives_both_rules_one_wsr_curve():
    from gpac_utils import Recipe, threshold
    from gpac_utils.calibrate import risk_curve

    u, loss = _lesson_population(12)
    recipes = {r: Recipe(bound="wsr", sampling="full", rule=r) for r in selection.RULES}
    for i in range(len(u)):
        seed = [0, 41, i]
        curves = {r: risk_curve(u[i], loss[i], eps=0.1, alpha=0.05, recipe=recipes[r], rng=seed) for r in recipes}
        np.testing.assert_array_equal(curves["max"]["ucb"], curves["first-crossing"]["ucb"])  # one curve
        for r, curve in curves.items():  # and each rule's threshold is read off that curve
            chosen = curve.loc[curve["selected"], "u"].tolist() or [-math.inf]
            assert float(threshold(u[i], loss[i], eps=0.1, alpha=0.05, recipe=recipes[r], rng=seed)) == chosen[0]
    # The order of wsr's terms matters: two seeds give two curves, which is why both rules need the same one.
    other = risk_curve(u[0], loss[0], eps=0.1, alpha=0.05, recipe=recipes["max"], rng=[0, 42, 0])
    first = risk_curve(u[0], loss[0], eps=0.1, alpha=0.05, recipe=recipes["max"], rng=[0, 41, 0])
    assert not np.array_equal(other["ucb"], first["ucb"])


def test_the_lessons_wsr_row_is_reproducible():
    """The batched calls of notebook 13 (one seed for both rules) give the same thresholds run after run,
    and the two rules then differ in few calibrations (with unshared draws they differed in about half)."""
    from gpac_utils import Recipe, batch_threshold

    u, loss = _lesson_population(400)
    seed = [0, 41]
    runs = [
        {
            r: batch_threshold(u, loss, eps=0.1, alpha=0.05, recipe=Recipe("wsr", "full", rule=r), rng=seed)
            for r in selection.RULES
        }
        for _ in range(2)
    ]
    for r in selection.RULES:
        np.testing.assert_array_equal(runs[0][r], runs[1][r])
    shared = float(np.mean(runs[0]["max"] != runs[0]["first-crossing"]))
    unshared = {
        r: batch_threshold(u, loss, eps=0.1, alpha=0.05, recipe=Recipe("wsr", "full", rule=r), rng=[1, k])
        for k, r in enumerate(selection.RULES)
    }
    apart = float(np.mean(unshared["max"] != unshared["first-crossing"]))
    assert shared < 0.05 < apart, (shared, apart)


def test_notebook_13_passes_a_seed_to_every_threshold_call():
    """Without ``rng`` each call reshuffles wsr's terms from fresh entropy: the rules see different curves."""
    import ast

    from gpac_utils.workflow.paths import NOTEBOOKS

    tree = ast.parse((NOTEBOOKS / "13_validity_audit.py").read_text(encoding="utf-8"))
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None)) in ("threshold", "batch_threshold")
    ]
    assert calls and all(any(k.arg == "rng" for k in call.keywords) for call in calls), [c.lineno for c in calls]
