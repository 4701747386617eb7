"""Online G-PAC (gpac_utils.online): decisions, free labels, the labelling schedule, an independent
per-item oracle, and anytime validity per group for every labelling mode on populations whose
per-group risk is known in closed form. The drift alarm is tested in tests/test_online_drift.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpac_utils import online
from gpac_utils import online_streams as streams
from gpac_utils.checks import ParameterError
from gpac_utils.online import OnlineGPAC, OnlineSettings

EPS, ALPHA = 0.1, 0.05
GRID = online.grid_points(51)
# Three groups with different risk curves R_j(u) = a_j u^(k_j+1) / (k_j+1) (u* = 0.82, 0.58, 0.67 at eps = 0.1).
VALIDITY = dict(probs=(0.5, 0.3, 0.2), a=(0.3, 0.6, 1.0), k=(1, 1, 2))


def mcse(p, n):
    return math.sqrt(p * (1 - p) / n)


def compact(u, loss, g, j):
    """Group j's items of every stream moved to the front (arrival order kept); padding is group -1.

    Groups are independent processes, so a group can be simulated on its own items only."""
    order = np.argsort(g != j, axis=1, kind="stable")
    width = int((g == j).sum(axis=1).max())
    take = lambda a: np.take_along_axis(a, order[:, :width], axis=1)  # noqa: E731
    return take(u), take(loss), np.where(take(g) == j, 0, -1)


def per_group_violations(mode, n_trials=300, n=2000, every=10, seed=0):
    """Per group: the share of streams in which the threshold in use ever had risk above eps."""
    u, loss, g = streams.closed_form_streams(n_trials, n, VALIDITY["probs"], VALIDITY["a"], VALIDITY["k"], seed)
    rates, final = [], []
    for j, (a, k) in enumerate(zip(VALIDITY["a"], VALIDITY["k"])):
        settings = OnlineSettings(eps=EPS, alpha=ALPHA, grid=GRID, seed=j, **mode)
        res = streams.run_online(*compact(u, loss, g, j), 1, settings, every=every)
        thr = res["thresholds"][..., 0]
        rates.append(np.mean((streams.closed_form_risk(a, k)(thr) > EPS).any(axis=1)))
        final.append(np.maximum(thr[:, -1], 0).mean())
    return np.array(rates), np.array(final)


MODES = {
    "fixed rate": dict(label_prob=0.5, labelling="fixed-rate"),
    "free labels": dict(label_prob=0.2),
    "free labels, warm-up": dict(label_prob=0.1, warmup_items=200, warmup_prob=0.5),
    "free labels, budget, grapa": dict(label_prob=0.3, label_budget=60, bet="grapa"),
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_anytime_valid_per_group_in_every_labelling_mode(mode):
    rates, final = per_group_violations(MODES[mode])
    limit = ALPHA + 3 * mcse(ALPHA, 300)
    assert np.all(rates <= limit), (mode, rates.tolist(), limit)
    assert np.all(final > 0.2), final  # the thresholds moved: the check has something to catch


@pytest.mark.slow
def test_marginal_online_pac_violates_a_hidden_group_online_gpac_does_not():
    # 80 % easy traffic (R = 0.05 u^2) hides a hard group (R = 0.3 u^3, u* = 0.69): the marginal
    # risk 0.04 u^2 + 0.06 u^3 stays below 0.1 up to u = 0.91.
    probs, a, k = (0.8, 0.2), (0.1, 0.9), (1, 2)
    u, loss, g = streams.closed_form_streams(300, 2000, probs, a, k, seed=4)
    settings = OnlineSettings(eps=EPS, alpha=ALPHA, label_prob=0.2, grid=GRID)
    marginal = streams.run_online(u, loss, np.zeros_like(g), 1, settings, every=10)["thresholds"][..., 0]
    hard = streams.run_online(*compact(u, loss, g, 1), 1, settings, every=10)["thresholds"][..., 0]
    risk = streams.closed_form_risk(a[1], k[1])
    assert np.mean((risk(marginal) > EPS).any(axis=1)) > 0.5  # the hard group, under one marginal threshold
    assert np.mean((risk(hard) > EPS).any(axis=1)) <= ALPHA + 3 * mcse(ALPHA, 300)


def test_free_labels_certify_faster_than_the_fixed_rate_at_fewer_paid_labels():
    u, loss, g = streams.closed_form_streams(40, 1500, (1.0,), (0.3,), (1,), seed=3)
    settings = OnlineSettings(eps=EPS, alpha=ALPHA, label_prob=0.2, grid=GRID)
    free = streams.run_online(u, loss, g, 1, settings, every=10)
    fixed = streams.run_online(u, loss, g, 1, settings.replace(labelling="fixed-rate"), every=10)
    paid = [(r["route_nothink"] & r["observe"]).sum() for r in (free, fixed)]
    thr = [np.maximum(r["thresholds"][:, 10, 0], 0).mean() for r in (free, fixed)]  # after 100 items
    assert thr[0] > thr[1] + 0.1, thr
    assert np.maximum(free["thresholds"][:, -1, 0], 0).mean() > np.maximum(fixed["thresholds"][:, -1, 0], 0).mean()
    assert paid[0] < 1.5 * paid[1], paid


# --------------------------------------------------------------------------- decisions
def test_decisions_free_labels_schedule_and_budget():
    router = OnlineGPAC(EPS, label_prob=0.25, warmup_items=30, warmup_prob=1.0, label_budget=40, grid=[0.2, 0.5])
    d = router.decide(np.full(10, 0.1), ["a"] * 10)
    assert not d.route_nothink.any() and d.observe.all() and np.all(d.propensity == 1)  # always think: free labels
    router._states["a"] = online.new_state((), 2) | {"certified": np.array([True, True])}
    router.thresholds_["a"] = 0.5
    u = np.tile([0.1, 0.9], 200)
    d = router.decide(u, ["a"] * 400)
    cheap = u <= 0.5
    assert np.array_equal(d.route_nothink, cheap) and np.all(d.threshold == 0.5)
    paid = np.cumsum(d.observe & cheap)
    live = d.rate > 0
    assert d.observe[~cheap & live].all() and np.all(d.propensity[~cheap & live] == 1)  # thinking-routed: free
    assert d.observe[:30][cheap[:30]].all() and np.all(d.rate[:30] == 1.0)  # warm-up: every item
    assert paid[-1] == 40 and np.all(d.rate[np.argmax(paid == 40) + 1 :] == 0)  # the budget, exactly
    assert not d.observe[np.argmax(paid == 40) + 1 :].any()  # spent: the group stops learning
    middle = cheap & (np.arange(400) >= 30) & (d.rate > 0)
    assert np.all(d.propensity[middle] == 0.25) and 0 < d.observe[middle].mean() < 1


def test_fixed_rate_mode_observes_at_the_rate_whatever_the_route():
    router = OnlineGPAC(EPS, label_prob=0.3, labelling="fixed-rate", grid=[0.5], seed=4)
    d = router.decide(np.random.default_rng(1).uniform(size=20000), ["g"] * 20000)
    assert np.all(d.propensity == 0.3) and not d.route_nothink.any()
    assert abs(d.observe.mean() - 0.3) < 4 * mcse(0.3, 20000)


def test_the_class_matches_the_block_runner():
    u, loss, g = streams.closed_form_streams(1, 1200, **VALIDITY, seed=5)
    settings = OnlineSettings(eps=EPS, alpha=ALPHA, label_prob=0.3, grid=GRID, seed=7, drift_alpha=0.01)
    want = streams.run_online(u, loss, g, 3, settings, every=40)
    router = OnlineGPAC(EPS, ALPHA, label_prob=0.3, grid=GRID, seed=7, drift_alpha=0.01)
    names = np.array(["0", "1", "2"])[g[0]]
    for b, t0 in enumerate(range(0, 1200, 40)):
        block = slice(t0, t0 + 40)
        assert [router.thresholds_.get(str(j), -np.inf) for j in range(3)] == want["thresholds"][0, b].tolist()
        d = router.decide(u[0, block], names[block])
        assert np.array_equal(d.route_nothink, want["route_nothink"][0, block]) and np.array_equal(
            d.observe, want["observe"][0, block]
        )
        router.update(u[0, block], np.where(d.observe, loss[0, block], np.nan), names[block], d)
    assert np.isfinite(want["thresholds"][0, -1, 1:]).all()  # certified, and drift_alpha = 0.01 raised alarms:
    assert sorted(router.alarms_) == [str(j) for j in np.flatnonzero(want["alarms"][0] >= 0)] == ["0"]
    assert sum(router.n_seen_.values()) == 1200
    assert sum(router.n_paid_.values()) == int((want["route_nothink"] & want["observe"]).sum())


def test_fit_is_one_block_of_a_deployment_and_losses_are_read_only_where_observed():
    rng = np.random.default_rng(2)
    u = rng.uniform(size=3000)
    loss = (rng.uniform(size=3000) < 0.1).astype(float)
    a, b = OnlineGPAC(EPS, label_prob=0.3, seed=1), OnlineGPAC(EPS, label_prob=0.3, seed=1)
    for block in np.array_split(np.arange(3000), 30):
        a.fit(u[block], loss[block], ["g"] * block.size)
        d = b.decide(u[block], ["g"] * block.size)
        b.update(u[block], np.where(d.observe, loss[block], np.nan), ["g"] * block.size, d)
    assert a.thresholds_ == b.thresholds_ and a.thresholds_["g"] > 0.3
    assert a.n_paid_ == b.n_paid_ and 0 < a.n_paid_["g"] < 0.3 * a.n_seen_["g"]


# --------------------------------------------------------------------------- an independent oracle
def oracle_online_pac(u, loss, lab, *, eps, alpha, rate, grid, beta=1.0, clip=0.9, bet="mixture"):
    """Fixed-rate online PAC item by item, straight from the formulas (constant propensity ``rate``)."""
    cap = clip / (1 / rate - eps)
    s1, s2 = np.zeros(len(grid)), np.zeros(len(grid))
    w_grapa, w_const = np.ones(len(grid)), np.ones(len(grid))
    certified = np.zeros(len(grid), bool)
    out = []
    for i in range(len(u)):
        d = eps - (loss[i] / rate if lab[i] else 0.0) * (u[i] <= np.asarray(grid))
        lam = np.clip(s1 / (s2 + beta), 0, cap)
        w_grapa, w_const = w_grapa * (1 + lam * d), w_const * (1 + 0.5 * cap * d)
        s1, s2 = s1 + d, s2 + d * d
        wealth = w_grapa if bet == "grapa" else (w_grapa + w_const) / 2
        certified |= wealth >= 1 / alpha * (1 - 1e-12)
        k = int(np.argmin(certified)) if not certified.all() else len(grid)
        out.append(grid[k - 1] if k else -np.inf)
    return np.array(out)


@pytest.mark.parametrize("bet", online.BETS)
def test_fixed_rate_mode_is_online_pac_item_by_item(bet):
    rng = np.random.default_rng(3)
    n, grid = 600, np.linspace(0, 1, 11)
    u = rng.uniform(size=n)
    loss = (rng.uniform(size=n) < 0.2 * u).astype(float)
    router = OnlineGPAC(EPS, ALPHA, label_prob=0.5, labelling="fixed-rate", grid=grid, bet=bet, seed=4)
    got, lab = [], []
    for i in range(n):  # one item at a time: the threshold after every item
        d = router.decide(u[i : i + 1], ["all"])
        router.update(u[i : i + 1], loss[i : i + 1], ["all"], d)
        got.append(router.thresholds_["all"])
        lab.append(bool(d.observe[0]))
    want = oracle_online_pac(u, loss, lab, eps=EPS, alpha=ALPHA, rate=0.5, grid=grid, bet=bet)
    assert want[0] == -np.inf and want[-1] >= 0.5  # the thresholds move: the test has something to compare
    np.testing.assert_array_equal(got, want)


def test_block_size_does_not_change_the_learning_and_groups_are_independent():
    u, loss, g = streams.closed_form_streams(1, 1500, **VALIDITY, seed=8)
    names = g[0].astype(str)
    whole, chunked = (OnlineGPAC(EPS, label_prob=0.4, labelling="fixed-rate") for _ in range(2))
    dec = whole.decide(u[0], names)  # fixed rate: decided up front, the same draws for both routers
    whole.update(u[0], loss[0], names, dec)
    mine = chunked.decide(u[0], names)
    assert all(np.array_equal(a, b) for a, b in zip(dec[:5], mine[:5]))
    for sl in np.array_split(np.arange(1500), [7, 8, 300, 999]):  # one block fed in parts, each row once
        chunked.update(u[0, sl], loss[0, sl], names[sl], online.Decisions(*(f[sl] for f in mine)))
    for j in ("0", "1", "2"):
        for key, v in whole._states[j].items():
            np.testing.assert_array_equal(v, chunked._states[j][key], err_msg=key)
    assert whole.thresholds_ == chunked.thresholds_ and min(whole.thresholds_.values()) > 0


def test_route_semantics_and_unseen_groups_think():
    router = OnlineGPAC(EPS, label_prob=1.0, grid=[0.2, 0.5, 0.8])
    assert not router.route([0.0, 0.5], ["a", "b"]).any()  # nothing certified yet: everything thinks
    for _ in range(4):  # group a: never a loss, so every grid point is certified
        router.fit(np.full(100, 0.5), np.zeros(100), ["a"] * 100)
    assert router.thresholds_ == {"a": 0.8}
    routed = router.route([0.0, 0.8, 0.8000001, 0.1], ["a", "a", "a", "never seen"])
    assert routed.tolist() == [True, True, False, False]  # U <= threshold; unseen groups think
    router.fit(np.full(50, 0.1), np.ones(50), ["b"] * 50)  # a loss on every item: nothing certified
    assert router.thresholds_["b"] == -np.inf and not router.route([0.0], ["b"]).any()


# --------------------------------------------------------------------------- bad arguments
@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(eps=0.0), "eps"),
        (dict(eps=1.5), "eps"),
        (dict(alpha=1.0), "alpha"),
        (dict(label_prob=0.0), "label_prob"),
        (dict(label_prob=1.5), "label_prob"),
        (dict(warmup_items=-1), "warmup_items"),
        (dict(warmup_prob=0.0), "warmup_prob"),
        (dict(label_budget=-1), "label_budget"),
        (dict(drift_alpha=1.0), "drift_alpha"),
        (dict(grid=0), "grid"),
        (dict(grid=[0.5, 0.2]), "grid"),
        (dict(grid=[0.2, 1.5]), "grid"),
        (dict(grid=[[0.1, 0.2]]), "grid"),
        (dict(loss_bound=-1.0), "loss_bound"),
        (dict(bet="kelly"), "bet"),
    ],
)
def test_bad_constructor_arguments(kwargs, name):
    args = dict(eps=0.1, alpha=0.05, label_prob=0.5) | kwargs
    with pytest.raises(ParameterError) as err:
        OnlineGPAC(args.pop("eps"), args.pop("alpha"), **args)
    msg = str(err.value)
    assert msg.startswith(f"{name}:") and "\n" not in msg


@pytest.mark.parametrize(
    "change, name",
    [
        (dict(scores=[0.1, 1.2, 0.3]), "scores"),
        (dict(groups=["a", "b"]), "groups"),
        (dict(groups=["a", None, "b"]), "groups"),
        (dict(losses=[0.0, 1.0]), "losses"),
        (dict(losses=[0.0, 2.0, 0.0]), "losses"),
        (dict(losses=[np.nan, 0.0, 0.0]), "losses"),
        (dict(decisions="short"), "decisions"),
    ],
)
def test_bad_update_arguments(change, name):
    router = OnlineGPAC(0.1, label_prob=0.5)
    args = dict(scores=[0.1, 0.2, 0.3], losses=[0.0, 1.0, 0.0], groups=["a", "b", "a"])
    args["decisions"] = router.decide(args["scores"], args["groups"])
    if change.get("decisions") == "short":
        change = {"decisions": online.Decisions(*(f[:2] for f in args["decisions"]))}
    with pytest.raises(ValueError) as err:
        router.update(**(args | change))
    msg = str(err.value)
    assert msg.startswith(f"{name}:") and "\n" not in msg


# --------------------------------------------------------------------------- B-PAC and notebook 33
@pytest.mark.slow
def test_free_labels_beat_one_bpac_learner_per_group_at_equal_paid_labels():
    u, loss, g = streams.closed_form_streams(40, 3000, **VALIDITY, seed=9)
    risk = streams.closed_form_risk(VALIDITY["a"], VALIDITY["k"])
    out = streams.head_to_head(u, loss, g, 3, risk, OnlineSettings(eps=EPS, alpha=ALPHA, label_prob=0.1, grid=GRID))
    ours, theirs = out["online G-PAC, free labels"], out["B-PAC per group"]
    assert theirs["paid_labels"] >= ours["paid_labels"] and theirs["label_prob"] > 0.1  # B-PAC got more
    assert ours["minus_bpac"] > 2 * ours["minus_bpac_se"], ours
    assert out["online G-PAC, fixed rate"]["no_thinking_call"] < ours["no_thinking_call"]


@pytest.mark.slow
@pytest.mark.notebook
def test_notebook_33_writes_its_comparison_and_group_tables(fast_run):
    import pandas as pd

    tables = fast_run("33_online_gpac").tables
    savings = pd.read_csv(tables / "online_gpac_savings.csv").set_index("method")
    assert savings.index.tolist() == [
        "online G-PAC, free labels",
        "online G-PAC, fixed rate",
        "B-PAC per group",
        "offline G-PAC, equal paid labels",
        "online PAC (one group), free labels",
        "B-PAC (one group)",
    ]
    paid = savings["paid_labels"]
    assert paid["B-PAC per group"] >= paid["online G-PAC, free labels"]  # at least equal paid labels
    assert paid["B-PAC (one group)"] >= paid["online PAC (one group), free labels"]
    assert savings["no_thinking_call"].between(0, 1).all()
    groups = pd.read_csv(tables / "online_gpac_groups.csv")
    assert len(groups) == 4 * 7 and np.allclose(groups["traffic"].groupby(groups["method"]).sum(), 1, atol=1e-3)
    assert (tables.parent / "online_gpac_stream.png").exists() and (tables.parent / "online_gpac_drift.pdf").exists()


def test_online_gpac_is_a_calibrator():
    from gpac_utils.calibrate import Calibrator

    router = OnlineGPAC(EPS, label_prob=0.5)
    assert isinstance(router, Calibrator)
    assert router.fit([0.2, 0.4], [0.0, 1.0], ["a", "b"]) is router and set(router.thresholds_) == {"a", "b"}


def test_pandas_inputs_whose_indexes_differ_are_refused():
    """As G-PAC does: two Series with different indexes are never paired by position."""
    import pandas as pd

    router = OnlineGPAC(EPS, label_prob=0.5)
    scores = pd.Series([0.1, 0.2, 0.3], index=[2, 1, 0])
    groups = pd.Series(["a", "b", "a"], index=[0, 1, 2])
    for call in (router.route, router.decide):
        with pytest.raises(ParameterError, match="^groups: its pandas index differs from that of scores"):
            call(scores, groups)
    d = router.decide(scores.to_numpy(), groups.to_numpy())
    with pytest.raises(ParameterError, match="^losses: its pandas index differs"):
        router.update(scores, pd.Series([0.0, 1.0, 0.0]), groups.set_axis(scores.index), d)


def test_decisions_of_other_rows_than_the_call_name_the_rows():
    router = OnlineGPAC(EPS, label_prob=0.5)
    d = router.decide([0.1, 0.2, 0.3], ["a", "b", "a"])
    part = online.Decisions(*(f[:2] for f in d[:5]), block=d.block)  # the block's identity, 3 rows
    with pytest.raises(ParameterError, match="^decisions: cover 3 rows of block 0, but scores") as err:
        router.update([0.1, 0.2], [0.0, 1.0], ["a", "b"], part)
    assert "another router" not in str(err.value)


def test_online_settings_travel_whole_and_refuse_what_is_ignored():
    s = OnlineSettings(eps=EPS, label_prob=0.3, grid=11, seed=3)
    router = OnlineGPAC(settings=s)
    assert router.settings is s and router.grid.size == 11
    with pytest.raises(ParameterError, match="^warmup_prob: applies to a group's first warmup_items"):
        OnlineGPAC(EPS, label_prob=0.3, warmup_prob=1.0)
    with pytest.raises(ParameterError, match="^settings: given with"):
        OnlineGPAC(settings=s, label_prob=0.5)
    with pytest.raises(TypeError, match="^free_labels: replaced by labelling='free'.*goes in gpac_utils 0.4"):
        OnlineGPAC(EPS, label_prob=0.3, free_labels=True)
    u, loss, g = streams.closed_form_streams(2, 50, **VALIDITY, seed=1)
    with pytest.raises(ParameterError, match="^drift_alpha: B-PAC does not read it"):
        streams.run_bpac(u, loss, g, 3, s.replace(drift_alpha=0.01))
