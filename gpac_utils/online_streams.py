"""Online G-PAC, B-PAC and offline G-PAC over many seeded streams at once: the comparison runners.

B-PAC (Yu et al. 2026, "Anytime Safe PAC Efficient Reasoning"): its rule as its paper describes it,
our own code (:func:`run_bpac`). One learner (one group) routes an item to the thinking model when
its score is above the current threshold and then observes its loss for free (propensity 1); an
item at or below the threshold goes to the non-thinking model and is labelled with probability
``label_prob`` (``warmup_prob`` during the first ``warmup_items`` items). The terms are the
inverse-propensity terms ``xi * loss * 1{U <= u} / p`` with the fixed range
``loss_bound / min(label_prob, warmup_prob)``, the bet of every grid point is aGRAPA,
``sum D / (sum D^2 + loss_bound^2)`` with ``D = eps - X``, clipped to ``[0, 0.9 / (range - eps)]``,
a grid point is certified once its wealth reaches ``1 / alpha`` and the threshold is the largest
certified grid prefix, updated after every item. "One B-PAC learner per group" runs that rule
separately in each group. It is written item by item (vectorised over streams only), independently
of :mod:`gpac_utils.online`.

Beside it: :func:`run_online` (online G-PAC of :mod:`gpac_utils.online`, block by block),
:func:`run_offline` (offline G-PAC calibrated on the paid labels), :func:`summary` and
:func:`head_to_head`, and a population whose per-group risk is known in closed form
(:func:`closed_form_streams`, :func:`closed_form_risk`). Notebook 33 and tests/test_online*.py use
them; ``python benchmarks/bpac.py`` prints the head-to-head.
"""

from __future__ import annotations

import math

import numpy as np

from . import online
from .calibrate import GPAC
from .checks import ParameterError, check_int

#: What B-PAC's runner reads of :class:`~gpac_utils.online.OnlineSettings` (its labelling is free and it has
#: no drift alarm: the other settings are refused, not ignored; its bet is aGRAPA, ``bet="grapa"``, and the
#: default ``"mixture"`` stands for it).
BPAC_READS = (
    "eps",
    "alpha",
    "label_prob",
    "warmup_items",
    "warmup_prob",
    "label_budget",
    "grid",
    "loss_bound",
    "bet",
    "seed",
)


def _streams(scores, settings):
    """The shared start of the runners: stream shape, observe-or-not uniforms, empty route_nothink and observe."""
    n_trials, n = scores.shape
    uniforms = np.random.default_rng(settings.seed).random((n_trials, n))
    return n_trials, n, uniforms, np.zeros((n_trials, n), bool), np.zeros((n_trials, n), bool)


def run_bpac(scores, losses, groups, n_groups, settings: online.OnlineSettings) -> dict:
    """One B-PAC learner per group over streams ``(n_trials, n)``, item by item.

    ``settings``: it reads :data:`BPAC_READS` and refuses the others away from their defaults.
    Returns ``route_nothink`` (True: the non-thinking model answers) and ``observe`` (n_trials, n) and
    ``thresholds`` (n_trials, n_groups) after the stream (B-PAC's thresholds never decrease, so these
    are also the largest in use).
    """
    st = settings.refuse("B-PAC", BPAC_READS)
    eps, label_prob, loss_bound, grid = st.eps, st.label_prob, st.loss_bound, st.points
    n_trials, n, uniforms, route_nothink, observe = _streams(scores, st)
    warm = label_prob if st.warmup_prob is None else st.warmup_prob
    cap = 0.9 / (loss_bound / min(label_prob, warm) - eps)
    budget = math.inf if st.label_budget is None else st.label_budget
    shape = (n_trials, n_groups, grid.size)
    s1, s2, log_w, cert = np.zeros(shape), np.zeros(shape), np.zeros(shape), np.zeros(shape, bool)
    seen, paid = np.zeros((n_trials, n_groups), int), np.zeros((n_trials, n_groups), int)
    thr = np.full((n_trials, n_groups), -np.inf)
    rows = np.arange(n_trials)
    for t in range(n):
        j, u = groups[:, t], scores[:, t]
        nothink_t = u <= thr[rows, j]  # this item of every stream
        rate = np.where(seen[rows, j] < st.warmup_items, warm, label_prob)
        rate = np.where(paid[rows, j] < budget, rate, 0.0)
        obs = (rate > 0) & (~nothink_t | (uniforms[:, t] < rate))
        x = np.where(obs, losses[:, t] / np.where(nothink_t, np.maximum(rate, 1e-300), 1.0), 0.0)
        d = np.where((rate > 0)[:, None], eps - x[:, None] * (u[:, None] <= grid), 0.0)
        a, b = s1[rows, j], s2[rows, j]
        lam = np.clip(a / (b + loss_bound**2), 0.0, cap)
        log_w[rows, j] += np.log1p(lam * d)
        s1[rows, j], s2[rows, j] = a + d, b + d * d
        cert[rows, j] |= log_w[rows, j] >= math.log(1 / st.alpha)
        count = np.logical_and.accumulate(cert[rows, j], axis=-1).sum(-1)
        thr[rows, j] = np.where(count > 0, grid[np.maximum(count - 1, 0)], -np.inf)
        seen[rows, j] += 1
        paid[rows, j] += obs & nothink_t
        route_nothink[:, t], observe[:, t] = nothink_t, obs
    return {"route_nothink": route_nothink, "observe": observe, "thresholds": thr}


def run_online(scores, losses, groups, n_groups, settings: online.OnlineSettings, *, every=20) -> dict:
    """Online G-PAC (:mod:`gpac_utils.online`) over streams ``(n_trials, n)``: decide a block of
    ``every`` items with the thresholds in use, then learn from it (``settings`` whole, as
    :class:`~gpac_utils.online.OnlineGPAC` takes it).

    Returns ``route_nothink``, ``observe`` (n_trials, n), ``thresholds`` (n_trials, n_blocks, n_groups): the
    threshold in use during each block, and ``alarms`` (n_trials, n_groups): the stream position of
    each group's first drift alarm (``-1``: none).
    """
    if not isinstance(settings, online.OnlineSettings):
        raise ParameterError(f"settings: must be an OnlineSettings, got {type(settings).__name__}")
    n_trials, n, uniforms, route_nothink, observe = _streams(scores, settings)
    grid = settings.points
    states = [online.new_state((n_trials,), grid.size, settings.bet) for _ in range(n_groups)]
    starts = range(0, n, check_int("every", every, 1))
    thresholds = np.full((n_trials, len(starts), n_groups), -np.inf)
    alarms = np.full((n_trials, n_groups), -1)
    for b, t0 in enumerate(starts):
        block = slice(t0, t0 + every)
        u, loss, g = scores[:, block], losses[:, block], groups[:, block]
        for j in range(n_groups):
            member = g == j
            d = online.decide(states[j], u, member, uniforms[:, block], settings)
            thresholds[:, b, j] = online.threshold_of(states[j], grid)
            route_nothink[:, block] |= d.route_nothink
            observe[:, block] |= d.observe & member
            states[j], first = online.learn(states[j], u, np.where(d.observe, loss, np.nan), member, d, settings)
            new = (first >= 0) & (alarms[:, j] < 0)
            alarms[:, j] = np.where(new, t0 + first, alarms[:, j])
    return {"route_nothink": route_nothink, "observe": observe, "thresholds": thresholds, "alarms": alarms}


def run_offline(scores, losses, groups, n_groups, paid, *, eps, alpha) -> dict:
    """Offline G-PAC (valid recipe) calibrated on the first ``paid[s]`` items of stream ``s``, all
    labelled (each a thinking call), then routing the rest with those thresholds."""
    route_nothink, observe, thresholds = np.zeros(scores.shape, bool), np.zeros(scores.shape, bool), []
    for s, n_cal in enumerate(np.asarray(paid, int)):
        names = groups[s].astype(str)
        fitted = GPAC(eps, alpha, "valid").fit(scores[s, :n_cal], losses[s, :n_cal], names[:n_cal])
        route_nothink[s, :n_cal] = observe[s, :n_cal] = True  # calibration items: paid labels
        route_nothink[s, n_cal:] = fitted.route(scores[s, n_cal:], names[n_cal:])
        thresholds.append([fitted.thresholds_.get(str(j), -np.inf) for j in range(n_groups)])
    return {"route_nothink": route_nothink, "observe": observe, "thresholds": np.array(thresholds)}


def summary(result, risk, eps, n_groups) -> dict:
    """Share answered without any thinking call, paid labels per stream, worst per-group anytime
    violation rate and its MCSE. ``risk(thresholds) -> (..., n_groups)`` population risks."""
    thr = result["thresholds"]
    worst = thr if thr.ndim == 2 else thr.max(axis=1)  # thresholds in use only grow without alarms
    violated = risk(worst) > eps
    rate = violated.mean(axis=0)
    n_trials = violated.shape[0]
    no_think = (result["route_nothink"] & ~result["observe"]).mean(axis=1)
    return {
        "no_thinking_call": float(no_think.mean()),
        "no_thinking_call_sd": float(no_think.std(ddof=1)) if n_trials > 1 else 0.0,
        "paid_labels": float((result["route_nothink"] & result["observe"]).sum(axis=1).mean()),
        "worst_violation_rate": float(rate.max()),
        "worst_violation_mcse": float(math.sqrt(max(rate.max() * (1 - rate.max()), 0.0) / n_trials)),
    }


def closed_form_streams(n_trials, n, probs, a, k, seed):
    """Group j: U ~ Uniform(0, 1), loss ~ Bernoulli(a_j U^k_j), so R_j(u) = a_j u^(k_j+1) / (k_j+1)."""
    rng = np.random.default_rng(seed)
    g = rng.choice(len(probs), size=(n_trials, n), p=probs)
    u = rng.uniform(size=(n_trials, n))
    loss = (rng.uniform(size=(n_trials, n)) < np.asarray(a)[g] * u ** np.asarray(k)[g]).astype(float)
    return u, loss, g


def closed_form_risk(a, k):
    def risk(thr):
        t = np.clip(np.where(np.isfinite(thr), thr, 0.0), 0.0, 1.0)
        return np.asarray(a) * t ** (np.asarray(k) + 1) / (np.asarray(k) + 1)

    return risk


def matched_bpac(u, loss, g, n_groups, paid, settings: online.OnlineSettings, *, tries=4):
    """B-PAC with its labelling probability raised from ``settings.label_prob`` until its mean paid labels
    reach ``paid`` (at least equal paid labels: a comparison that favours B-PAC). Returns (result, label_prob)."""
    prob = settings.label_prob
    for _ in range(tries):
        res = run_bpac(u, loss, g, n_groups, settings.replace(label_prob=prob))
        got = (res["route_nothink"] & res["observe"]).sum(axis=1).mean()
        if got >= paid or prob >= 1:
            break
        prob = min(1.0, prob * 1.02 * paid / max(got, 1.0))
    return res, prob


def head_to_head(u, loss, g, n_groups, risk, settings: online.OnlineSettings, *, every=20) -> dict:
    """Online G-PAC (free labels; fixed rate), one B-PAC learner per group and offline G-PAC on the
    same streams, B-PAC given at least and offline G-PAC exactly the paid labels of online G-PAC
    with free labels (``settings``: the free-label one; its ``eps``, ``alpha``, ``label_prob``, grid and seed)."""
    eps, alpha = settings.eps, settings.alpha
    free = run_online(u, loss, g, n_groups, settings, every=every)
    fixed = run_online(u, loss, g, n_groups, settings.replace(labelling="fixed-rate"), every=every)
    paid = (free["route_nothink"] & free["observe"]).sum(axis=1)  # per stream
    bpac, prob = matched_bpac(u, loss, g, n_groups, paid.mean(), settings)
    offline = run_offline(u, loss, g, n_groups, paid, eps=eps, alpha=alpha)
    runs = {
        "online G-PAC, free labels": free,
        "online G-PAC, fixed rate": fixed,
        "B-PAC per group": bpac,
        "offline G-PAC, equal paid labels": offline,
    }
    out = {name: summary(res, risk, eps, n_groups) for name, res in runs.items()}
    out["B-PAC per group"]["label_prob"] = prob
    diff = (free["route_nothink"] & ~free["observe"]).mean(axis=1) - (bpac["route_nothink"] & ~bpac["observe"]).mean(
        axis=1
    )
    out["online G-PAC, free labels"] |= {
        "minus_bpac": float(diff.mean()),
        "minus_bpac_se": float(diff.std(ddof=1) / math.sqrt(diff.size)),
    }
    return out
