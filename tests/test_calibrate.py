"""Calibrators, clustering, metrics and the experiment runner."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from gpac_utils import Recipe, ScorePartitioner, experiment, from_json, metrics
from gpac_utils import partition as cluster
from gpac_utils.calibrate import CPAC, GPAC, PAC, GroupWarning, factorize_groups
from gpac_utils.checks import ParameterError
from gpac_utils.experiment import ExperimentConfig

HB_FULL = Recipe("hoeffding_bentkus", "full")


def population(n=900, seed=0):
    rng = np.random.default_rng(seed)
    g = np.repeat(np.array(["easy", "mid", "hard"]), n // 3)
    rate = {"easy": 0.05, "mid": 0.2, "hard": 0.6}
    u = rng.random(n)
    loss = (rng.random(n) < np.array([rate[x] for x in g]) * u).astype(float)
    return u, loss, g


def test_pac_by_hand_full_labels():
    # Full labels, CLT, max rule: hand-computed. Losses at u = 0.5 and 0.9.
    u = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    loss = np.array([0, 0, 0, 0, 1, 0, 0, 0, 1, 0], float)
    cal = PAC(eps=0.3, alpha=0.05, recipe=Recipe("clt", "full", rule="max"), min_group_size=1).fit(u, loss)
    # UCB at u < 0.5 is 0; at u in [0.5, 0.9): mean 0.1, sd sqrt(0.1 * 0.9 * 10 / 9); 1.645 * sd / sqrt(10)
    ucb_mid = 0.1 + 1.6448536 * math.sqrt(0.1) / math.sqrt(10)
    assert ucb_mid < 0.3
    ucb_top = 0.2 + 1.6448536 * math.sqrt(0.2 * 0.8 * 10 / 9) / math.sqrt(10)
    assert ucb_top > 0.3
    assert cal.thresholds_["__all__"] == 0.8


def test_gpac_thresholds_follow_group_difficulty_and_route():
    u, loss, g = population()
    cal = GPAC(eps=0.05, recipe=HB_FULL).fit(u, loss, g)
    t = cal.thresholds_
    assert t["easy"] > t["mid"] > t["hard"]
    routed = cal.route(u, g)
    assert routed.dtype == bool
    np.testing.assert_array_equal(routed, u <= np.array([t[x] for x in g]))


def test_simultaneous_is_more_conservative():
    u, loss, g = population(seed=3)
    a = GPAC(eps=0.05, recipe=HB_FULL).fit(u, loss, g)
    b = GPAC(eps=0.05, recipe=HB_FULL, correction="bonferroni").fit(u, loss, g)
    assert all(b.thresholds_[k] <= a.thresholds_[k] for k in a.thresholds_)


def test_small_and_unseen_groups_always_think():
    u, loss, g = population(seed=4)
    g = g.copy()
    g[:5] = "tiny"
    with pytest.warns(GroupWarning, match="tiny"):
        cal = GPAC(eps=0.1, recipe=Recipe(sampling="full"), min_group_size=10).fit(u, loss, g)
    assert cal.thresholds_["tiny"] == -math.inf
    with pytest.warns(GroupWarning, match="not seen"):
        r = cal.route([0.0, 0.0], ["tiny", "brand-new"])
    assert not r.any()


@pytest.mark.parametrize("mode", ["split", "joint"])
@pytest.mark.parametrize("method", ["kmeans", "quantile"])
def test_cpac_learns_groups(mode, method):
    u, loss, _ = population(seed=5)
    cal = CPAC(
        eps=0.05, recipe=Recipe("wsr", "bernoulli", 0.5), partitioner=ScorePartitioner(3, method), mode=mode
    ).fit(u, loss)
    assert cal.partition_.k == 3
    labels = cal.assign(u)
    assert set(labels) == {"c0", "c1", "c2"}
    # Labels are ordered by score.
    means = [u[labels == f"c{j}"].mean() for j in range(3)]
    assert means == sorted(means)


@pytest.mark.parametrize(
    "cls,kw",
    [(PAC, {}), (GPAC, {"correction": "bonferroni"}), (CPAC, {"partitioner": ScorePartitioner(k=2), "mode": "joint"})],
)
def test_json_round_trip(cls, kw):
    u, loss, g = population(seed=6)
    cal = cls(eps=0.08, recipe=Recipe("hoeffding_bentkus", "bernoulli", 0.5), **kw)
    cal.fit(u, loss, g if cls is GPAC else None)
    text = cal.to_json()
    payload = json.loads(text)
    assert payload["settings"]["bound"] == "hoeffding_bentkus" and payload["method"] == cls.name
    back = from_json(text)
    grp = g if cls is GPAC else None
    np.testing.assert_array_equal(back.route(u, grp), cal.route(u, grp))
    assert back.thresholds_ == cal.thresholds_


def test_json_writes_minus_infinity_as_null():
    u = np.linspace(0, 1, 20)
    cal = PAC(eps=0.01, recipe=Recipe(sampling="full"), min_group_size=1).fit(u, np.ones(20))
    assert json.loads(cal.to_json())["thresholds"]["__all__"] is None
    assert from_json(cal.to_json()).thresholds_["__all__"] == -math.inf


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(scores=[0.1, 1.5], loss=[0, 0]), "score"),
        (dict(scores=[0.1, np.nan], loss=[0, 0]), "score"),
        (dict(scores=[0.1, 0.2], loss=[0, 2.0]), "loss"),
        (dict(scores=[0.1, 0.2], loss=[0]), "equal length"),
    ],
)
def test_calibrator_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        PAC(eps=0.1).fit(kw["scores"], kw["loss"])
    with pytest.raises(ValueError, match="bound"):
        PAC(eps=0.1, recipe=Recipe(bound="magic"))
    with pytest.raises(ValueError, match="group"):
        GPAC(eps=0.1).fit([0.1, 0.2], [0, 0])


def test_partition_assign_and_ties():
    s = np.array([0.0, 0.01, 0.02, 0.5, 0.51, 0.9, 0.95, 1.0])
    p = cluster.ScorePartitioner(3, "kmeans").fit(s)
    np.testing.assert_array_equal(p.assign(s), [0, 0, 0, 1, 1, 2, 2, 2])
    np.testing.assert_allclose(p.boundaries, [(0.02 + 0.5) / 2, (0.51 + 0.9) / 2])
    q = cluster.ScorePartitioner(3, "quantile").fit(np.repeat([0.1, 0.2], 10))
    assert q.k <= 2  # fewer distinct scores than groups: fewer groups, none empty
    with pytest.raises(ValueError):
        cluster.ScorePartitioner(2).fit([0.1, np.nan])


def test_metrics_by_hand():
    route = np.array([True, True, False, False])
    loss = np.array([1.0, 0.0, 1.0, 0.0])
    think = np.array([100.0, 200.0, 100.0, 400.0])
    nothink = np.array([10.0, 20.0, 50.0, 40.0])
    assert metrics.error(route, loss) == 0.25
    assert metrics.group_errors(route, loss, ["a", "a", "b", "b"]) == {"a": 0.5, "b": 0.0}
    # cascade: 1 - (l_n + 1{think} l_t) / l_t
    cascade = np.mean([1 - 0.1, 1 - 0.1, 1 - (50 + 100) / 100, 1 - (40 + 400) / 400])
    router = np.mean([1 - 0.1, 1 - 0.1, 0.0, 0.0])
    assert metrics.stp(route, think, nothink, "cascade") == pytest.approx(cascade)
    assert metrics.stp(route, think, nothink, "router") == pytest.approx(router)
    assert metrics.error_gap({"a": 0.07, "b": 0.02, "c": 0.06}, 0.05) == pytest.approx(0.03)
    np.testing.assert_allclose(metrics.violation_rate([[0.1, 0.0], [0.0, 0.0]], 0.05), [0.5, 0.0])
    with pytest.raises(ValueError, match="think_tokens"):
        metrics.stp(route, [0, 1, 1, 1], nothink)


@pytest.mark.parametrize(
    "route,think,nothink,message",
    [
        ([[True, False]], [100, 100], [25, 25], "route: must be 1-D"),
        (["yes", "no"], [100, 100], [25, 25], "route: must be numbers"),
        ([1, 2], [100, 100], [25, 25], "route: values must lie in"),
        ([True, False], [100, np.nan], [25, 25], "think_tokens: must be finite"),
        ([True, False], [100, 100], [25, np.nan], "nothink_tokens: must be finite"),
        ([True, False, True], [100, 100], [25, 25], "think_tokens: need one value per item of route"),
    ],
)
def test_stp_refuses_a_students_mistakes_naming_the_argument(route, think, nothink, message):
    with pytest.raises(ParameterError, match=message):
        metrics.stp(route, think, nothink)


def _table(n=600, seed=0):
    u, loss, g = population(n, seed)
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "item_id": np.arange(n),
            "group": g,
            "loss": loss,
            "score_a": u,
            "score_b": np.clip(u + 0.1 * rng.standard_normal(n), 0, 1),
            "think_tokens": 1000.0,
            "nothink_tokens": 100.0,
        }
    )


def test_experiment_layout_and_summary():
    t = _table()
    cfg = ExperimentConfig(
        eps=0.05,
        methods=("pac", "gpac"),
        n_trials=4,
        recipes=[Recipe("clt", "resample", 0.5, "max"), Recipe("wsr", "bernoulli", 0.5)],
    )
    res = experiment.run_experiment(t, cfg)
    assert set(res.method) == {"PAC", "G-PAC"} and set(res.score) == {"score_a", "score_b"}
    assert set(res.group) == {"__all__", "easy", "mid", "hard"}
    assert len(res) == 4 * 2 * 2 * 2 * 4
    s = experiment.summarize(res, 0.05)
    assert len(s) == 8
    assert {"Error", "Error_Gap", "STP", "violation_any_group", "violation_max_group"} <= set(s.columns)
    assert (s["violation_max_group"] <= s["violation_any_group"]).all()
    # The same split is used for every method within a trial.
    a = res[(res.group == "__all__") & (res.trial == 0)]
    assert a.n_test.nunique() == 1
    # Reproducible.
    res2 = experiment.run_experiment(t, cfg)
    pd.testing.assert_frame_equal(res, res2)


def test_experiment_cpac_uses_learned_groups():
    t = _table().drop(columns=["group"])
    cfg = ExperimentConfig(
        eps=0.05, methods=("pac", "cpac"), scores=["score_a"], n_trials=3, mode="joint", eval_groups="learned"
    )
    res = experiment.run_experiment(t, cfg)
    assert set(res.group) == {"__all__", "c0", "c1", "c2"}
    with pytest.raises(ValueError, match="group"):
        experiment.run_experiment(t, ExperimentConfig(eps=0.05, methods=("gpac",), n_trials=1, eval_groups="learned"))


def test_gpac_removes_the_gap_pac_leaves():
    """On a heterogeneous population PAC overshoots eps in the hard group; G-PAC does not."""
    t = _table(n=1800, seed=11)
    cfg = ExperimentConfig(eps=0.05, methods=("pac", "gpac"), scores=["score_a"], n_trials=30, recipes=[HB_FULL])
    res = experiment.run_experiment(t, cfg)
    s = experiment.summarize(res, 0.05).set_index("method")
    assert s.loc["PAC", "Error_Gap"] > 0.01
    assert s.loc["G-PAC", "Error_Gap"] == 0.0


def test_summary_names_per_group_and_any_group_violations_apart():
    """14 groups, each violated in about 1 trial of 20: every group is fine (max rate 1/20 + noise),
    while the share of trials with *some* violated group is large. The two are reported apart."""
    rows = []
    for trial in range(20):
        for j in range(14):
            violated = (trial + j) % 20 == 0
            rows.append(
                {
                    "trial": trial,
                    "method": "G-PAC",
                    "score": "s",
                    "risk": "joint",
                    "bound": "wsr",
                    "sampling": "full",
                    "label_prob": 1.0,
                    "rule": "first-crossing",
                    "candidates": "auto",
                    "group": f"g{j}",
                    "n_test": 5,
                    "error": 0.0,
                    "routed_share": 1.0,
                    "pop_risk": 0.1 if violated else 0.0,
                    "threshold": 0.5,
                    "stp": 0.0,
                }
            )
        rows.append({**rows[-1], "group": "__all__", "pop_risk": 0.0})
    s = experiment.summarize(pd.DataFrame(rows), 0.05).iloc[0]
    assert s["violation_max_group"] == pytest.approx(1 / 20)
    assert s["violation_max_group_mcse"] == pytest.approx(np.sqrt(0.05 * 0.95 / 20))
    assert s["violation_any_group"] == pytest.approx(14 / 20)
    gv = experiment.group_violations(pd.DataFrame(rows), 0.05)
    assert len(gv) == 14 and (gv["violation_rate"] == 1 / 20).all()


def test_experiment_honours_each_recipes_pi_and_simultaneous():
    """Every setting of a recipe reaches the calibrators: pi = 0.1 routes less than pi = 0.5
    (fewer labels), and Bonferroni (simultaneous) routes no more than per-group calibration."""
    t = _table(n=1500, seed=4)
    recipes = [Recipe("hoeffding_bentkus", "bernoulli", 0.1), Recipe("hoeffding_bentkus", "bernoulli", 0.5)]
    res = experiment.run_experiment(
        t, ExperimentConfig(eps=0.1, methods=("gpac",), scores=["score_a"], n_trials=5, recipes=recipes)
    )
    assert set(res["label_prob"]) == {0.1, 0.5}
    share = res[res.group == "__all__"].groupby("label_prob")["routed_share"].mean()
    assert share[0.1] < share[0.5]
    cfg = ExperimentConfig(eps=0.1, methods=("gpac",), scores=["score_a"], n_trials=5, recipes=[HB_FULL])
    plain = experiment.run_experiment(t, cfg)
    bonf = experiment.run_experiment(t, cfg.replace(correction="bonferroni"))
    a = plain[plain.group == "__all__"]["routed_share"].mean()
    b = bonf[bonf.group == "__all__"]["routed_share"].mean()
    assert b < a


def test_evaluation_groups_do_not_depend_on_the_methods():
    """G-PAC's rows are judged on the known groups whether or not C-PAC runs beside it."""
    t = _table(n=900, seed=2)
    cfg = ExperimentConfig(eps=0.1, methods=("gpac",), scores=["score_a"], n_trials=3, recipes=[HB_FULL])
    alone = experiment.run_experiment(t, cfg)
    with_cpac = experiment.run_experiment(t, cfg.replace(methods=("gpac", "cpac")))
    g = with_cpac[with_cpac.method == "G-PAC"].reset_index(drop=True)
    pd.testing.assert_frame_equal(alone.reset_index(drop=True), g)
    assert set(with_cpac.group) == {"__all__", "easy", "mid", "hard"}


def test_every_calibrator_satisfies_the_protocol():
    from gpac_utils.calibrate import Calibrator

    u, loss, g = population()
    for cal, groups in ((PAC(0.1), None), (GPAC(0.1), g), (CPAC(0.1), None)):
        assert isinstance(cal, Calibrator)
        fitted = cal.fit(u, loss, groups)
        assert fitted is cal and isinstance(fitted, Calibrator)
        assert isinstance(cal.thresholds_, dict) and cal.thresholds_
        routed = cal.route(u, groups)
        assert routed.dtype == bool and routed.shape == u.shape
    assert not isinstance(object(), Calibrator)
    assert not isinstance(ScorePartitioner(), Calibrator)


def test_cpac_is_gpac_calibrated_on_its_learned_groups():
    u, loss, _ = population()
    cpac = CPAC(0.1, recipe=HB_FULL, mode="joint", seed=3).fit(u, loss)
    gpac = GPAC(0.1, recipe=HB_FULL, seed=3).calibrate(u, loss, cpac.assign(u), np.random.default_rng(3))
    assert gpac.thresholds_ == cpac.thresholds_ and len(gpac.thresholds_) == 3


def test_trial_split_and_calibrator_seed_reproduce_a_trial_of_the_runner():
    t = _table()
    bern = Recipe("hoeffding_bentkus", "bernoulli", 0.5)  # the seed matters
    cfg = ExperimentConfig(eps=0.1, methods=("pac", "gpac"), scores=["score_a", "score_b"], n_trials=2, recipes=[bern])
    res = experiment.run_experiment(t, cfg)
    cal, test = experiment.trial_split(len(t), cfg.cal_ratio, cfg.seed, trial=1)
    assert len(cal) == round(cfg.cal_ratio * len(t)) and len(set(cal) | set(test)) == len(t)
    part = t.iloc[cal]
    seed = experiment.calibrator_seed(cfg.seed, 1, score_index=1, method_index=1)
    by_hand = GPAC(0.1, recipe=bern, seed=seed).fit(part["score_b"], part["loss"], part["group"]).thresholds_
    rows = res.query("trial == 1 and score == 'score_b' and method == 'G-PAC' and group != '__all__'")
    assert rows.set_index("group")["threshold"].to_dict() == by_hand
    assert (
        by_hand != GPAC(0.1, recipe=bern, seed=seed + 1).fit(part["score_b"], part["loss"], part["group"]).thresholds_
    )


def test_recipe_label_prob_is_one_for_full_labels_and_old_json_still_reads():
    assert Recipe().label_prob == 1.0 and Recipe(label_prob=1).label_prob == 1.0
    with pytest.raises(ValueError, match="^label_prob:"):
        Recipe(sampling="full", label_prob=0.5)
    with pytest.raises(ValueError, match="^label_prob:"):
        Recipe(sampling="bernoulli")
    u, loss, g = population()
    cal = GPAC(0.1, recipe=Recipe("wsr", "bernoulli", 0.5)).fit(u, loss, g)
    payload = json.loads(cal.to_json())
    assert payload["settings"]["label_prob"] == 0.5 and "pi" not in payload["settings"]
    payload["settings"]["pi"] = payload["settings"].pop("label_prob")  # written before the rename
    assert from_json(json.dumps(payload)).recipe == cal.recipe


@pytest.mark.parametrize(
    "labels",
    [
        np.random.default_rng(0).integers(0, 100, 10_000).astype(str),  # packed exactly into one integer
        np.array(["Algebra", "Counting & Probability", "a\x00b", "ab", "b", "é", "日本"] * 1000),  # hashed
        np.array(["x"] * 5000),
        np.array(["b", "a"] * 100),  # below the size of the fast path: pandas
    ],
    ids=["digits", "long-unicode", "one-label", "small"],
)
def test_factorize_groups_gives_pandas_codes_and_sorted_names(labels):
    codes, names = factorize_groups(labels)
    want_codes, want_names = pd.factorize(labels.astype(object), sort=True)
    assert codes.tolist() == want_codes.tolist() and names.tolist() == list(want_names)
    assert names[codes].tolist() == labels.tolist()
