"""Online G-PAC (gpac_utils.online): arguments, routing, an independent per-item oracle, and the
anytime validity per group on populations whose per-group risk is known in closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpac_utils import online as O
from gpac_utils.checks import ParameterError
from gpac_utils.online import OnlineGPAC, draw_labels


# --------------------------------------------------------------------------- populations
# Group j: U ~ Uniform(0, 1), loss ~ Bernoulli(a_j U^k_j), so R_j(u) = E[loss 1{U <= u}] = a_j u^(k_j+1) / (k_j+1).
def true_risk(u, a, k):
    u = np.clip(np.where(np.isfinite(u), u, 0.0), 0.0, 1.0)  # -inf (always think): risk 0
    return a * u ** (k + 1) / (k + 1)


def draw_stream(rng, shape, probs, a, k, rho):
    g = rng.choice(len(probs), size=shape, p=probs)
    u = rng.uniform(size=shape)
    loss = (rng.uniform(size=shape) < np.asarray(a)[g] * u ** np.asarray(k)[g]).astype(float)
    return g, u, loss, rng.random(shape) < rho


def checked_thresholds(g, u, loss, lab, members, *, eps, alpha, rho, grid, bet, every):
    """Thresholds of the process fed the items of ``members`` (streams x checks), vectorised over streams.

    Each stream's member items are moved to the front (arrival order kept), so the work is over the
    group's items only; the threshold at check time t is the one after the group's N(t)-th item.
    """
    streams, n = g.shape
    order = np.argsort(~members, axis=1, kind="stable")
    count = members.sum(axis=1)
    width = max(int(count.max()), 1)
    take = order[:, :width]
    pick = lambda a: np.take_along_axis(a, take, axis=1)  # noqa: E731
    x = O.terms(pick(u), pick(loss), pick(lab), grid, rho)
    valid = np.arange(width)[None, :] < count[:, None]
    cert, _ = O.certify(x, eps, alpha, 1 / rho, bet, member=valid)
    thr = O.prefix_thresholds(cert, grid)  # (streams, width): after the group's 1st, 2nd, ... item
    seen = np.cumsum(members, axis=1)[:, every - 1 :: every]  # group items by each check time
    at = np.take_along_axis(thr, np.maximum(seen - 1, 0), axis=1)
    return np.where(seen > 0, at, -np.inf)


def violation_rates(probs, a, k, *, eps, alpha, rho, streams, n, marginal=False, bet="mixture", every=20, seed=0):
    """Per group: the share of streams with R_j(u_hat_{j,t}) > eps at some checked t, and the mean
    threshold (-inf counted as 0) at each checked t (groups x checks)."""
    grid = O.grid_points(101)
    hits, mean_thr = np.zeros(len(probs)), np.zeros((len(probs), n // every))
    chunk = 25
    for c0 in range(0, streams, chunk):
        rng = np.random.default_rng([seed, c0])
        g, u, loss, lab = draw_stream(rng, (chunk, n), probs, a, k, rho)
        kw = dict(eps=eps, alpha=alpha, rho=rho, grid=grid, bet=bet, every=every)
        shared = checked_thresholds(g, u, loss, lab, np.ones_like(lab), **kw) if marginal else None
        for j in range(len(probs)):
            thr = shared if marginal else checked_thresholds(g, u, loss, lab, g == j, **kw)
            hits[j] += np.sum((true_risk(thr, a[j], k[j]) > eps).any(axis=1))
            mean_thr[j] += np.maximum(thr, 0.0).sum(axis=0)
    return hits / streams, mean_thr / streams


def mcse(p, n):
    return math.sqrt(p * (1 - p) / n)


# Three groups with different risk curves (u* = 0.82, 0.58, 0.67 at eps = 0.1).
VALIDITY = dict(probs=(0.5, 0.3, 0.2), a=(0.3, 0.6, 1.0), k=(1, 1, 2))
# 80 % easy traffic (R = 0.05 u^2) hides a hard group (R = 0.3 u^3, u* = 0.69): the marginal risk
# 0.04 u^2 + 0.06 u^3 stays below 0.1 up to u = 0.91.
HIDDEN = dict(probs=(0.8, 0.2), a=(0.1, 0.9), k=(1, 2))
STREAMS, N, EPS, ALPHA, RHO = 300, 2000, 0.1, 0.05, 0.5


# --------------------------------------------------------------------------- validity
@pytest.mark.slow
@pytest.mark.parametrize("bet", O.BETS)
def test_anytime_valid_per_group(bet):
    rates, _ = violation_rates(**VALIDITY, eps=EPS, alpha=ALPHA, rho=RHO, streams=STREAMS, n=N, bet=bet)
    limit = ALPHA + 3 * mcse(ALPHA, STREAMS)
    assert np.all(rates <= limit), (bet, rates.tolist(), limit)


@pytest.mark.slow
def test_marginal_online_pac_violates_a_hidden_group_online_gpac_does_not():
    limit = ALPHA + 3 * mcse(ALPHA, STREAMS)
    marginal, _ = violation_rates(**HIDDEN, eps=EPS, alpha=ALPHA, rho=RHO, streams=STREAMS, n=N, marginal=True)
    grouped, thr = violation_rates(**HIDDEN, eps=EPS, alpha=ALPHA, rho=RHO, streams=STREAMS, n=N)
    assert marginal[1] > 0.5, marginal  # the hard group, under one marginal threshold
    assert np.all(grouped <= limit), (grouped, limit)
    assert thr[0, -1] > thr[1, -1]  # the easy group is let through further


@pytest.mark.slow
def test_mixture_bet_trades_a_slower_start_for_more_certification_later():
    one = dict(probs=(1.0,), a=(0.3,), k=(1,), eps=EPS, alpha=ALPHA, rho=RHO, streams=100, n=N, every=100, seed=1)
    _, grapa = violation_rates(**one, bet="grapa")
    _, mix = violation_rates(**one, bet="mixture")
    assert grapa[0, 0] > mix[0, 0]  # after 100 items
    assert np.all(mix[0, 5:] > grapa[0, 5:])  # from 600 items on


def test_vectorised_streams_match_the_class():
    rng = np.random.default_rng(5)
    g, u, loss, lab = draw_stream(rng, (3, 400), **VALIDITY, rho=RHO)
    grid = O.grid_points(101)
    for s in range(3):
        router = OnlineGPAC(EPS, ALPHA, label_rate=RHO)
        got = []
        for t0 in range(0, 400, 20):
            sl = slice(t0, t0 + 20)
            router.partial_fit(u[s, sl], g[s, sl], loss[s, sl], lab[s, sl])
            got.append([router.thresholds_.get(str(j), -np.inf) for j in range(3)])
        one = [a[s : s + 1] for a in (g, u, loss, lab)]
        for j in range(3):
            kw = dict(eps=EPS, alpha=ALPHA, rho=RHO, grid=grid, bet="mixture", every=20)
            want = checked_thresholds(*one, one[0] == j, **kw)
            np.testing.assert_array_equal(np.array(got)[:, j], want[0])


# --------------------------------------------------------------------------- an independent oracle
def oracle_online_pac(u, loss, lab, *, eps, alpha, rho, grid, beta=1.0, clip=0.9, bet="mixture"):
    """Online PAC item by item, straight from the formulas (B-PAC's update with fixed propensity)."""
    m = 1 / rho
    cap = clip / (m - eps)
    s1, s2 = np.zeros(len(grid)), np.zeros(len(grid))
    w_grapa, w_const = np.ones(len(grid)), np.ones(len(grid))
    certified = np.zeros(len(grid), bool)
    out = []
    for i in range(len(u)):
        x = (loss[i] / rho if lab[i] else 0.0) * (u[i] <= np.asarray(grid))
        d = eps - x
        lam = np.clip(s1 / (s2 + beta), 0, cap)
        w_grapa = w_grapa * (1 + lam * d)
        w_const = w_const * (1 + 0.5 * cap * d)
        s1, s2 = s1 + d, s2 + d * d
        wealth = w_grapa if bet == "grapa" else (w_grapa + w_const) / 2
        certified |= wealth >= 1 / alpha * (1 - 1e-12)
        k = int(np.argmin(certified)) if not certified.all() else len(grid)
        out.append(grid[k - 1] if k else -np.inf)
    return np.array(out)


@pytest.mark.parametrize("bet", O.BETS)
def test_single_group_is_online_pac_item_by_item(bet):
    rng = np.random.default_rng(3)
    n, grid = 600, np.linspace(0, 1, 11)
    u = rng.uniform(size=n)
    loss = (rng.uniform(size=n) < 0.2 * u).astype(float)
    lab = draw_labels(n, RHO, seed=4)
    want = oracle_online_pac(u, loss, lab, eps=EPS, alpha=ALPHA, rho=RHO, grid=grid, bet=bet)
    assert want[0] == -np.inf and want[-1] >= 0.5  # the thresholds move: the test has something to compare
    router = OnlineGPAC(EPS, ALPHA, label_rate=RHO, grid=grid, bet=bet)
    got = []
    for i in range(n):  # one item at a time: the threshold after every item
        router.partial_fit(u[i : i + 1], ["all"], loss[i : i + 1], lab[i : i + 1])
        got.append(router.thresholds_["all"])
    np.testing.assert_array_equal(got, want)


def test_chunking_does_not_change_the_state_and_groups_are_independent():
    rng = np.random.default_rng(8)
    g, u, loss, lab = draw_stream(rng, 1500, **VALIDITY, rho=RHO)
    whole = OnlineGPAC(EPS, label_rate=RHO).partial_fit(u, g, loss, lab)
    chunked = OnlineGPAC(EPS, label_rate=RHO)
    for sl in np.array_split(np.arange(1500), [7, 8, 300, 999]):
        chunked.partial_fit(u[sl], g[sl], loss[sl], lab[sl])
    for j in ("0", "1", "2"):
        for key, v in whole._states[j].items():
            np.testing.assert_array_equal(v, chunked._states[j][key], err_msg=key)
        m = g == int(j)
        alone = OnlineGPAC(EPS, label_rate=RHO).partial_fit(u[m], np.full(m.sum(), "x"), loss[m], lab[m])
        assert alone.thresholds_["x"] == whole.thresholds_[j]
    assert whole.thresholds_ == chunked.thresholds_
    assert sum(whole.n_seen_.values()) == 1500 and sum(whole.n_labelled_.values()) == int(lab.sum())


# --------------------------------------------------------------------------- routing
def test_route_semantics_and_unseen_groups_think():
    router = OnlineGPAC(EPS, label_rate=1.0, grid=[0.2, 0.5, 0.8])
    assert not router.route([0.0, 0.5], ["a", "b"]).any()  # nothing certified yet: everything thinks
    n = 400  # group a: never a loss, so every grid point is certified
    router.partial_fit(np.full(n, 0.5), ["a"] * n, np.zeros(n), np.ones(n, bool))
    assert router.thresholds_ == {"a": 0.8}
    routed = router.route([0.0, 0.8, 0.8000001, 0.1], ["a", "a", "a", "never seen"])
    assert routed.tolist() == [True, True, False, False]  # U <= threshold; unseen groups think
    # a group with a loss on every labelled item certifies nothing: -inf, always think
    router.partial_fit(np.full(50, 0.1), ["b"] * 50, np.ones(50), np.ones(50, bool))
    assert router.thresholds_["b"] == -np.inf
    assert not router.route([0.0], ["b"]).any()


def test_unlabelled_losses_are_ignored():
    rng = np.random.default_rng(2)
    u, lab = rng.uniform(size=500), draw_labels(500, 0.3, seed=9)
    loss = (rng.uniform(size=500) < 0.1).astype(float)
    a = OnlineGPAC(EPS, label_rate=0.3).partial_fit(u, ["g"] * 500, np.where(lab, loss, np.nan), lab)
    b = OnlineGPAC(EPS, label_rate=0.3).partial_fit(u, ["g"] * 500, np.where(lab, loss, 1.0), lab)
    assert a.thresholds_ == b.thresholds_ and np.isfinite(a.thresholds_["g"])


def test_draw_labels_is_seeded_with_the_rate():
    a, b = draw_labels(20000, 0.2, seed=1), draw_labels(20000, 0.2, seed=1)
    assert a.dtype == bool and np.array_equal(a, b)
    assert abs(a.mean() - 0.2) < 4 * mcse(0.2, a.size)


# --------------------------------------------------------------------------- bad arguments
@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(eps=0.0), "eps"),
        (dict(eps=1.5), "eps"),
        (dict(alpha=1.0), "alpha"),
        (dict(label_rate=0.0), "label_rate"),
        (dict(label_rate=1.5), "label_rate"),
        (dict(grid=0), "grid"),
        (dict(grid=[0.5, 0.2]), "grid"),
        (dict(grid=[0.2, 1.5]), "grid"),
        (dict(grid=[[0.1, 0.2]]), "grid"),
        (dict(loss_bound=-1.0), "loss_bound"),
        (dict(bet="kelly"), "bet"),
    ],
)
def test_bad_constructor_arguments(kwargs, name):
    args = dict(eps=0.1, alpha=0.05, label_rate=0.5) | kwargs
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
        (dict(losses=[0.0, np.nan, 0.0]), "losses"),
        (dict(labelled=[True, False]), "labelled"),
        (dict(labelled=[0, 2, 1]), "labelled"),
    ],
)
def test_bad_partial_fit_arguments(change, name):
    args = dict(scores=[0.1, 0.2, 0.3], groups=["a", "b", "a"], losses=[0.0, 1.0, 0.0], labelled=[True, True, False])
    with pytest.raises(ValueError) as err:
        OnlineGPAC(0.1, label_rate=0.5).partial_fit(**(args | change))
    msg = str(err.value)
    assert msg.startswith(f"{name}:") and "\n" not in msg


def test_bad_label_draw_arguments():
    with pytest.raises(ParameterError, match="^label_rate:"):
        draw_labels(10, 0.0, seed=0)
    with pytest.raises(ParameterError, match="^n:"):
        draw_labels(-1, 0.5, seed=0)


# --------------------------------------------------------------------------- notebook 33
@pytest.mark.slow
@pytest.mark.notebook
def test_notebook_33_writes_its_savings_and_group_tables(fast_run):
    import pandas as pd

    tables = fast_run("33_online_gpac").tables
    savings = pd.read_csv(tables / "online_gpac_savings.csv")
    assert savings["method"].tolist() == [
        "online G-PAC (mixture)", "online G-PAC (grapa)", "marginal online PAC", "offline G-PAC, equal labels",
    ]  # fmt: skip
    assert savings["labels"].nunique() == 1  # every method gets the labels online G-PAC used
    assert savings["saved_mean"].between(0, 1).all()
    groups = pd.read_csv(tables / "online_gpac_groups.csv")
    assert len(groups) == 4 * 7 and np.allclose(groups["traffic"].groupby(groups["method"]).sum(), 1, atol=1e-3)
    assert (tables.parent / "online_gpac_stream.png").exists() and (tables.parent / "online_gpac_drift.pdf").exists()
