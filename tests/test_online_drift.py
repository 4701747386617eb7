"""The per-group drift alarm of online G-PAC (gpac_utils.online): false alarms on stationary
streams within the stated bound, detection of a step in one group's risk, and the validity of the
threshold re-certified after the alarm. Groups are independent processes, so each group's items
are simulated as a stream of their own (tests/test_online.py checks the independence)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpac_utils import online
from gpac_utils import online_streams as streams

EPS, ALPHA = 0.1, 0.05


def mcse(p, n):
    return math.sqrt(p * (1 - p) / n)


def group_stream(n_trials, n, a, k, seed, change=None, after=None):
    """One group's items: U ~ Uniform(0, 1), loss ~ Bernoulli(a U^k) (from item ``change`` on: ``after`` = (a, k))."""
    u, loss, g = streams.closed_form_streams(n_trials, n, (1.0,), (a,), (k,), seed)
    if change is not None:
        rng = np.random.default_rng([seed, 1])
        new = (rng.uniform(size=(n_trials, n - change)) < after[0] * u[:, change:] ** after[1]).astype(float)
        loss[:, change:] = new
    return u, loss, g


def first_alarms(res):
    return res["alarms"][:, 0]


@pytest.mark.slow
def test_false_alarms_at_the_worst_null_stay_within_the_shiryaev_roberts_bound():
    # R(u) = 0.2 u, the threshold held at u = 0.5 where R = eps exactly; P(alarm by H) <= drift_alpha E[min(tau, H)]
    n_trials, horizon, drift_alpha = 2000, 400, 1e-3
    u, _, g = streams.closed_form_streams(n_trials, horizon, (1.0,), (1.0,), (0,), seed=11)
    loss = (np.random.default_rng(12).uniform(size=u.shape) < 0.2).astype(float)
    grid = np.array([0.5])
    state = online.new_state((n_trials,), 1) | {"certified": np.ones((n_trials, 1), bool)}
    settings = online.OnlineSettings(eps=EPS, alpha=ALPHA, label_prob=0.3, grid=tuple(grid), drift_alpha=drift_alpha)
    uniforms = np.random.default_rng(13).random(u.shape)
    alarm = np.full(n_trials, -1)
    for t0 in range(0, horizon, 10):
        block = slice(t0, t0 + 10)
        member = np.ones_like(u[:, block], bool)
        d = online.decide(state, u[:, block], member, uniforms[:, block], settings)
        assert np.all(d.threshold[alarm < 0] == 0.5)
        state, first = online.learn(state, u[:, block], loss[:, block], member, d, settings)
        alarm = np.where((alarm < 0) & (first >= 0), t0 + first, alarm)
        state["certified"][:] = True  # hold the threshold: the detector alone is under test
    rate = np.mean(alarm >= 0)
    bound = drift_alpha * np.mean(np.where(alarm >= 0, alarm + 1, horizon))
    assert 0.05 < rate <= bound + 3 * mcse(bound, n_trials), (rate, bound)  # the alarm is live at the null


@pytest.mark.slow
def test_stationary_groups_raise_false_alarms_within_the_bound():
    n_trials, n, drift_alpha = 300, 2000, 1e-4
    grid = online.grid_points(51)
    for j, (a, k) in enumerate([(0.3, 1), (0.6, 1), (1.0, 2)]):
        u, loss, g = group_stream(n_trials, n, a, k, seed=20 + j)
        settings = online.OnlineSettings(
            eps=EPS, alpha=ALPHA, label_prob=0.2, grid=tuple(grid), drift_alpha=drift_alpha, seed=j
        )
        res = streams.run_online(u, loss, g, 1, settings, every=10)
        alarm = first_alarms(res)
        thr = res["thresholds"][:, :, 0]
        at = thr[np.arange(n_trials), np.maximum(alarm, 0) // 10]
        false = (alarm >= 0) & (streams.closed_form_risk(a, k)(at) <= EPS)  # the threshold in use was fine
        monitored = np.isfinite(thr).sum(axis=1) * 10  # items seen with a threshold in use (an upper bound)
        bound = drift_alpha * monitored.mean()
        assert false.mean() <= bound + 3 * mcse(bound, n_trials), (j, false.mean(), bound)
        assert np.isfinite(thr[:, -1]).mean() > 0.9  # the groups were certified, hence monitored


@pytest.mark.slow
def test_a_step_in_one_groups_risk_is_detected_and_the_recertified_threshold_is_valid():
    # before: R(u) = 0.15 u^2 (u* = 0.82); from item 1500 on: R(u) = 0.45 u^2 (u* = 0.47)
    n_trials, n, change, drift_alpha = 300, 4000, 1500, 1e-4
    grid = online.grid_points(51)
    u, loss, g = group_stream(n_trials, n, 0.3, 1, seed=31, change=change, after=(0.9, 1))
    settings = online.OnlineSettings(
        eps=EPS, alpha=ALPHA, label_prob=0.2, grid=tuple(grid), drift_alpha=drift_alpha, seed=3
    )
    res = streams.run_online(u, loss, g, 1, settings, every=10)
    thr = res["thresholds"][:, :, 0]
    risk_after = streams.closed_form_risk(0.9, 1)
    alarm = first_alarms(res)
    assert np.mean((alarm >= 0) & (alarm < change)) <= drift_alpha * change + 3 * mcse(drift_alpha * change, n_trials)
    at_change = thr[:, change // 10]
    assert np.mean(risk_after(at_change) > EPS) > 0.9  # the step made the certified thresholds unsafe
    detected = alarm >= change
    delay = alarm[detected] - change
    assert detected.mean() >= 0.9, detected.mean()
    assert np.median(delay) < 800, np.percentile(delay, [10, 50, 90])
    # after the alarm: always think, then certify again from the new data only
    blocks = np.arange(thr.shape[1]) * 10
    after = blocks[None, :] > alarm[:, None]
    assert np.all(np.isneginf(thr[after & (blocks[None, :] <= alarm[:, None] + 10) & detected[:, None]]))
    recert = after & detected[:, None]
    violated = (risk_after(np.where(recert, thr, -np.inf)) > EPS).any(axis=1)[detected]
    assert violated.mean() <= ALPHA + 3 * mcse(ALPHA, detected.sum()), violated.mean()
    assert np.isfinite(thr[detected, -1]).mean() > 0.9 and np.maximum(thr[detected, -1], 0).mean() > 0.25


def held_null_alarms(n_streams, horizon, level, seed):
    """First alarm of each stream (-1: none) with the threshold held at u = 0.5, where R = eps exactly."""
    rng = np.random.default_rng(seed)
    u = rng.uniform(size=(n_streams, horizon))
    loss = (rng.uniform(size=u.shape) < 0.2).astype(float)
    grid = np.array([0.5])
    state = online.new_state((n_streams,), 1) | {"certified": np.ones((n_streams, 1), bool)}
    uniforms = rng.random(u.shape)
    alarm = np.full(n_streams, -1)
    settings = online.OnlineSettings(eps=EPS, alpha=ALPHA, label_prob=0.3, grid=tuple(grid), drift_alpha=level)
    for t0 in range(0, horizon, 10):
        block = slice(t0, t0 + 10)
        member = np.ones_like(u[:, block], bool)
        d = online.decide(state, u[:, block], member, uniforms[:, block], settings)
        state, first = online.learn(state, u[:, block], loss[:, block], member, d, settings)
        alarm = np.where((alarm < 0) & (first >= 0), t0 + first, alarm)
        state["certified"][:] = True
    return alarm


def test_any_groups_false_alarm_needs_the_split_level_and_stays_within_the_bound_with_it():
    # k groups, each a stationary stream at the worst null for H monitored items (groups are independent processes)
    k, n_trials, horizon, drift_alpha = 10, 300, 400, 2.5e-4
    limit = horizon * drift_alpha  # what the per-group statement promises one group within H of its items
    rates = {}
    for scope in online.DRIFT_SCOPES:
        level = online.drift_level(drift_alpha, scope, k)
        alarm = held_null_alarms(n_trials * k, horizon, level, seed=40).reshape(n_trials, k)
        rates[scope] = any_rate = float((alarm >= 0).any(axis=1).mean())
        # the bound across groups in stream time: level * E[monitored items of all groups before the first alarm]
        monitored = np.where(alarm >= 0, alarm + 1, horizon).sum(axis=1).mean()
        assert any_rate <= level * monitored + 3 * mcse(level * monitored, n_trials), (scope, any_rate)
    assert rates["any_group"] <= limit + 3 * mcse(limit, n_trials), rates  # the split bounds the union by H * alpha
    assert rates["group"] > limit + 3 * mcse(limit, n_trials), rates  # without it the union exceeds that bound


def test_drift_scope_on_the_router():
    assert online.OnlineGPAC(0.1, label_prob=0.5, drift_alpha=1e-3).drift_level_ == 1e-3
    router = online.OnlineGPAC(0.1, label_prob=0.5, drift_alpha=1e-3, drift_scope="any_group", n_groups=4)
    assert router.drift_level_ == 2.5e-4 and online.OnlineGPAC(0.1, label_prob=0.5).drift_level_ is None
    rng = np.random.default_rng(0)
    u, g = rng.uniform(size=3000), rng.choice(["a", "b"], size=3000)
    loss = (rng.uniform(size=3000) < np.where(g == "a", 0.1, 0.3) * u).astype(float)
    split = online.OnlineGPAC(0.1, label_prob=0.5, drift_alpha=0.02, drift_scope="any_group", n_groups=2, grid=11)
    plain = online.OnlineGPAC(0.1, label_prob=0.5, drift_alpha=0.01, grid=11)
    for block in np.array_split(np.arange(3000), 30):  # any_group at 0.02 / 2 is the per-group detector at 0.01
        split.fit(u[block], loss[block], g[block])
        plain.fit(u[block], loss[block], g[block])
    assert split.thresholds_ == plain.thresholds_ and split.alarms_ == plain.alarms_
    with pytest.raises(ValueError, match=r"^groups: drift_scope='any_group' was set for n_groups=2; saw 3"):
        split.fit(u[:10], loss[:10], ["c"] * 10)
    with pytest.raises(ValueError, match=r"^n_groups: drift_scope='any_group' needs"):
        online.OnlineGPAC(0.1, label_prob=0.5, drift_alpha=1e-3, drift_scope="any_group")
    with pytest.raises(ValueError, match=r"^drift_scope: unknown"):
        online.OnlineGPAC(0.1, label_prob=0.5, drift_scope="all")
