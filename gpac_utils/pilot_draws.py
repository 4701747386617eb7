"""The pilot models' draws of the planner (:mod:`gpac_utils.prediction`): synthetic calibration sets.

Each model draws the scores and losses a group's calibration set could hold, from the labelled pilot
and the unlabelled traffic: ``bootstrap`` resamples the pilot, ``smoothed`` borrows the pooled
loss-given-score, and ``posterior`` draws each group's loss rates from a hierarchical posterior over
score regions (:class:`~gpac_utils.prediction.PilotModel` names them; ``docs/planning.md`` describes them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def _weighted_choice(weights: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """Per row ``r`` of ``weights`` (n_resamples, m), ``size`` indices drawn with probabilities ``weights[r]``."""
    n_resamples, m = weights.shape
    cw = np.cumsum(weights, axis=1)
    cw /= cw[:, -1:]
    offs = np.arange(n_resamples, dtype=float)[:, None]
    flat = (cw + offs).ravel()
    u = rng.random((n_resamples, size)) + offs
    starts = (np.arange(n_resamples) * m)[:, None]
    idx = np.searchsorted(flat, u.ravel(), side="right").reshape(n_resamples, size) - starts
    return np.clip(idx, 0, m - 1)


@dataclass(frozen=True)
class _Source:
    """What one group's synthetic calibration sets are drawn from (:func:`_draw_bootstrap`, :func:`_draw_smoothed`,
    :func:`_draw_posterior`).

    ``unl``: the group's unlabelled scores, sorted; ``pilot``: all pilot scores, losses and which items are the
    group's; ``edges``: inner edges of the score regions; ``population``: the group's scores outside the pilot
    (:func:`_outside_pilot`) or ``None``; ``spread``: what the group reads of the groups' posterior (its entry of
    :func:`_spread_posterior`) or ``None`` (no spread: the group is the pool); ``shrinkage``: the ``smoothed``
    model's pull to the pool.
    """

    unl: np.ndarray
    pilot: tuple
    edges: np.ndarray
    model: object  # the PilotModel (gpac_utils.prediction)
    loss_bound: float = 1.0
    population: np.ndarray | None = None
    spread: tuple | None = None
    shrinkage: float = math.inf


def _draw_bootstrap(src: _Source, shape, rng):
    """The group's own pilot items resampled, with Bayesian-bootstrap weights where the model has ``uncertainty``."""
    (ps, pl, in_group), (n_resamples, n_items) = src.pilot, shape
    m = int(in_group.sum())
    if src.model.uncertainty:
        idx = _weighted_choice(rng.dirichlet(np.ones(m), size=n_resamples), n_items, rng)
    else:
        idx = rng.integers(0, m, size=(n_resamples, n_items))
    return ps[in_group][idx], pl[in_group][idx]


def _draw_smoothed(src: _Source, shape, rng):
    """Scores from the group's unlabelled scores; losses from the same score bin of the pilot."""
    (ps, pl, in_group), edges, unl = src.pilot, src.edges, src.unl
    n_resamples, n_items = shape
    s = unl[rng.integers(0, unl.size, size=(n_resamples, n_items))]
    b = np.searchsorted(edges, s, side="right")
    pb = np.searchsorted(edges, ps, side="right")
    w = rng.dirichlet(np.ones(ps.size), size=n_resamples) if src.model.uncertainty else np.ones((n_resamples, ps.size))
    loss = np.zeros((n_resamples, n_items))
    for bin_ in np.unique(b):
        mask = b == bin_
        pooled = np.flatnonzero(pb == bin_)
        if pooled.size == 0:  # an empty pilot bin: borrow from the nearest non-empty one
            near = np.argmin(np.abs(pb - bin_))
            pooled = np.flatnonzero(pb == pb[near])
        own = pooled[in_group[pooled]]
        draw = pl[pooled][_weighted_choice(w[:, pooled], n_items, rng)]
        if own.size and math.isfinite(src.shrinkage):
            lam = own.size / (own.size + src.shrinkage)
            own_draw = pl[own][_weighted_choice(w[:, own], n_items, rng)]
            draw = np.where(rng.random((n_resamples, n_items)) < lam, own_draw, draw)
        loss[mask] = draw[mask]
    return s, loss


#: Scores with at most this many distinct values get one region per value (``posterior``).
DISCRETE = 32


def _regions(scores, bins: int) -> np.ndarray:
    """Inner edges of the ``posterior`` model's score regions: one per distinct value for a score with at
    most :data:`DISCRETE` values, else ``bins`` quantile regions of all (unlabelled) scores."""
    values = np.unique(scores)
    if values.size <= DISCRETE:
        return (values[1:] + values[:-1]) / 2
    return np.unique(np.quantile(scores, np.linspace(0, 1, max(1, int(bins)) + 1)[1:-1]))


def _isotonic(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Non-decreasing weighted least-squares fit of ``y`` (pool-adjacent-violators); ``w > 0``."""
    blocks = []  # [value, weight, size]
    for v, wt in zip(y.tolist(), w.tolist()):
        blocks.append([v, wt, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    return np.repeat([b[0] for b in blocks], [b[2] for b in blocks])


def _monotone(theta: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted isotonic regression of each row of ``theta`` (R, B) with weights ``w`` (B,), vectorised over rows:
    the max-min formula ``fit_b = max_{i <= b} min_{j >= b} mean_w(theta_i..theta_j)`` of isotonic regression
    (Robertson, Wright and Dykstra 1988; tests/test_planning.py checks it against pool-adjacent-violators)."""
    cw = np.r_[0.0, np.cumsum(w)]
    ct = np.concatenate([np.zeros((theta.shape[0], 1)), np.cumsum(theta * w, axis=1)], axis=1)
    B = w.size
    i, j = np.triu_indices(B)
    avg = np.full((theta.shape[0], B, B), np.inf)
    avg[:, i, j] = (ct[:, j + 1] - ct[:, i]) / (cw[j + 1] - cw[i])  # mean over regions i..j (i <= j)
    low = np.minimum.accumulate(avg[:, :, ::-1], axis=2)[:, :, ::-1]  # [r, i, b] = min over j >= b
    low = np.where(np.arange(B)[:, None] <= np.arange(B)[None, :], low, -np.inf)  # only i <= b
    return low.max(axis=1)


def _pooled_logit(k: np.ndarray, m: np.ndarray, n_draws: int | None = None, rng=None) -> np.ndarray:
    """The log odds of the pooled loss rate per region (``posterior``), from ``k`` positive losses in ``m`` pilot items
    per region: a **projection posterior** (Chakraborty and Ghosal 2021). Each region's rate is drawn from its own
    Jeffreys posterior ``Beta(1/2 + k_b, 1/2 + m_b - k_b)``, and each draw is projected onto the non-decreasing
    curves (a larger score means less trust) by weighted isotonic regression, weights ``m_b + 1``
    (:func:`_monotone`). With ``n_draws``: draws, shape (n_draws, B); without: the centre, the projection of the
    posterior means ``(k_b + 1/2) / (m_b + 1)``, shape (B,).

    A region where the pilot saw few items and no loss draws a rate spread over (0, 1) on its own (an unseen loss
    is not a zero loss), and the projection pools it with its neighbours wherever the draw contradicts the order,
    so the better-seen regions above it bound it: no fixed floor, and no rate pinned at the pilot's zero.
    """
    w = m + 1.0
    if n_draws is None:
        return _logit(np.clip(_isotonic((k + 0.5) / w, w), 1e-6, 1 - 1e-6))
    raw = rng.beta(0.5 + k, 0.5 + m - k, size=(n_draws, k.size))
    return _logit(np.clip(_monotone(raw, w), 1e-9, 1 - 1e-9))


def _outside_pilot(unl: np.ndarray, pilot_scores: np.ndarray, cap: float) -> np.ndarray | None:
    """The group's scores outside its pilot (the rows its calibration labels are drawn from), or ``None``.

    Known when the pilot's rows are among the group's scores and ``cap`` is the number left: the multiset
    difference of the two. Otherwise (no cap, or a pilot that is not part of ``scores``) the population is
    taken as infinite: items drawn with replacement from the group's scores."""
    if not math.isfinite(cap):
        return None
    values, counts = np.unique(unl, return_counts=True)
    pv, pc = np.unique(pilot_scores, return_counts=True)
    at = np.searchsorted(values, pv)
    if np.any(at >= values.size) or np.any(values[np.minimum(at, values.size - 1)] != pv):
        return None
    left = counts.copy()
    left[at] -= pc
    if np.any(left < 0) or int(left.sum()) != int(cap):
        return None
    return np.repeat(values, left)


#: The grid of the group effect ``u`` (log odds to the pool) and of the groups' spread ``tau`` (``posterior``).
_U_GRID = np.linspace(-8.0, 8.0, 161)
_TAU_GRID = np.linspace(0.05, 4.0, 80)


def _logit(p):
    return np.log(p) - np.log1p(-p)


def _log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def _cell_loglik(l0, k, m) -> np.ndarray:
    """Log-likelihood of ``k`` positive losses in ``m`` pilot items per region at the log odds ``l0 + v``, for each
    ``v`` of :data:`_U_GRID`; ``l0``, ``k``, ``m`` broadcast to (..., B), the result has shape (..., B, U)."""
    l0 = np.asarray(l0)
    k, m = np.broadcast_to(k, l0.shape), np.broadcast_to(m, l0.shape)
    z = l0[..., None] + _U_GRID
    out = np.zeros(z.shape)  # a term whose count is 0 adds nothing: only the others are computed
    hit, miss = k > 0, m - k > 0
    out[hit] = k[hit][:, None] * _log_sigmoid(z[hit])
    out[miss] += (m - k)[miss][:, None] * _log_sigmoid(-z[miss])
    return out


def _lse(a: np.ndarray, axis: int) -> np.ndarray:
    top = a.max(axis=axis, keepdims=True)
    return np.squeeze(top, axis) + np.log(np.exp(a - top).sum(axis=axis))


#: The grids of a group's shared effect ``a_j`` (log odds to the pool at the pilot's mean score), of its slope
#: ``c_j`` (log odds per unit of score) and of their spreads across groups (``posterior``).
_A_GRID = np.linspace(-6.0, 6.0, 61)
_C_GRID = np.linspace(-8.0, 8.0, 41)
_S_GRID = np.linspace(0.05, 4.0, 20)


def _gauss(grid: np.ndarray, spread: np.ndarray, centre) -> np.ndarray:
    """Log weights (len(spread), len(grid)) of ``N(centre(s), s^2)`` for each spread ``s``, normalised over ``grid``."""
    s = np.asarray(spread, float)[:, None]
    logw = -0.5 * ((grid[None, :] - centre(s)) / s) ** 2
    return logw - _lse(logw, axis=1)[:, None]


def _spread_posterior(pilot, edges) -> dict:
    """The posterior of the groups' curves around the pool (``posterior``): per group, what :func:`_draw_posterior`
    reads of it, ``(tau, dx, effect)``: the weights of the per-region spread on :data:`_TAU_GRID`, each region's score
    minus the pilot's mean, and the posterior weights (:data:`_A_GRID`, :data:`_C_GRID`) of the group's shift and slope.

    The loss rate of group ``j`` in region ``b`` has the log odds ``l_b + a_j + c_j dx_b + v_jb`` (``l_b``: the
    pool's, :func:`_pooled_logit`; ``dx_b``: the region's score minus the pilot's mean): a **shift** ``a_j ~
    N(-sigma^2 / 2, sigma^2)`` and a **slope** ``c_j ~ N(0, kappa^2)`` (a group better or worse than the pool, by
    an amount that may change with the score: all its pilot items inform both), plus independent per-region
    deviations ``v_jb ~ N(-tau^2 / 2, tau^2)`` (mean-preserving: the pool's odds are the groups' mean). ``sigma``,
    ``kappa`` and ``tau`` have half-Cauchy(0, 1) priors (heavy-tailed: outlying groups may pull them up).
    ``(sigma, kappa)``'s likelihood is every group's pilot counts with its ``(a_j, c_j)`` integrated out (on
    :data:`_A_GRID` x :data:`_C_GRID`); each group's ``(a_j, c_j)`` posterior mixes over it; ``tau``'s likelihood is
    every (group, region) cell's counts with ``v_jb`` integrated out around the group's curve at its posterior mean.
    A thin pilot leaves the spreads near their priors: groups may differ much.
    """
    ps, pl, pg = pilot
    pb = np.searchsorted(edges, ps, side="right")
    n_bins, pos = edges.size + 1, pl > 0
    m_all = np.bincount(pb, minlength=n_bins)
    bounds = np.r_[0.0, edges, 1.0]  # each region's score: the mean of its pilot scores, else the middle of its edges
    x = np.where(m_all > 0, np.bincount(pb, ps, n_bins) / np.maximum(m_all, 1), (bounds[:-1] + bounds[1:]) / 2)
    dx = x - float(np.mean(ps))
    l0 = _pooled_logit(np.bincount(pb, pos, n_bins), m_all)
    z = l0[None, None, :] + _A_GRID[:, None, None] + _C_GRID[None, :, None] * dx[None, None, :]  # (A, C, B)
    hc = -np.log1p(_S_GRID**2)  # half-Cauchy(0, 1)
    prior_a = _gauss(_A_GRID, _S_GRID, lambda s: -0.5 * s**2)  # (S, A)
    prior_c = _gauss(_C_GRID, _S_GRID, lambda s: 0.0 * s)  # (S, C)
    counts, lik = {}, {}
    log_sk = hc[:, None] + hc[None, :]  # (sigma, kappa)
    up, down = _log_sigmoid(z), _log_sigmoid(-z)  # the same for every group: computed once
    for name in np.unique(pg):
        own = pg == name
        k, m = np.bincount(pb[own], pos[own], n_bins), np.bincount(pb[own], minlength=n_bins)
        counts[name] = k, m
        lik[name] = (k * up + (m - k) * down).sum(axis=2)  # (A, C)
        per_c = _lse(prior_a[:, :, None] + lik[name][None], axis=1)  # (sigma, C)
        log_sk = log_sk + _lse(per_c[:, None, :] + prior_c[None, :, :], axis=2)
    w_sk = np.exp(log_sk - log_sk.max())
    w_sk /= w_sk.sum()
    mix = np.exp(prior_a).T @ w_sk @ np.exp(prior_c)  # (A, C): the shift and slope prior, spreads integrated out
    prior_t = _gauss(_U_GRID, _TAU_GRID, lambda s: -0.5 * s**2)  # (T, U): N(-tau^2 / 2, tau^2)
    log_tau, effect = -np.log1p(_TAU_GRID**2), {}
    for name, (k, m) in counts.items():
        post = np.log(np.maximum(mix, 1e-300)) + lik[name]
        post = np.exp(post - post.max())
        effect[name] = post / post.sum()
        a_hat = float(np.sum(effect[name].sum(axis=1) * _A_GRID))
        c_hat = float(np.sum(effect[name].sum(axis=0) * _C_GRID))
        seen = m > 0
        ll = _cell_loglik((l0 + a_hat + c_hat * dx)[seen], k[seen], m[seen])  # (cells, U)
        log_tau = log_tau + _lse(prior_t[:, None, :] + ll[None], axis=2).sum(axis=1)
    w_tau = np.exp(log_tau - log_tau.max())
    return {name: (w_tau / w_tau.sum(), dx, weights) for name, weights in effect.items()}


def _draw_grid(logw: np.ndarray, grid: np.ndarray, rng) -> np.ndarray:
    """Per row of ``logw`` (rows, len(grid)): one point of ``grid`` drawn with weights ``exp(logw)``, jittered
    uniformly within its grid cell."""
    w = np.exp(logw - logw.max(axis=1, keepdims=True))
    idx = _weighted_choice(w, 1, rng)[:, 0]
    step = grid[1] - grid[0]
    return grid[idx] + (rng.random(idx.size) - 0.5) * step


def _draw_posterior(src: _Source, shape, rng):
    """Posterior-predictive calibration sets (module description, ``posterior``).

    In each score region ``b`` the probability of a positive loss is drawn once per posterior draw: first
    the pooled rate ``theta0_b`` of all pilot items, a projection-posterior draw (:func:`_pooled_logit`: Jeffreys
    per region, made non-decreasing in the score); then the group's shift ``a_j`` and slope ``c_j`` (its curve's
    log odds to the pool, ``a_j + c_j dx_b``) from their posterior (:func:`_spread_posterior`);
    then the groups' per-region spread ``tau`` from its posterior; then the group's deviation in the region,
    ``v_jb``, from its posterior on :data:`_U_GRID`: the prior ``N(-tau^2 / 2, tau^2)`` (mean-preserving: the
    pool's odds are the groups' mean) times the likelihood of the group's ``k_jb`` positive losses in its ``m_jb``
    pilot items of the region at the rate ``theta_jb = expit(logit theta0_b + a_j + c_j dx_b + v_jb)``. Where the
    group's pilot is thin, its curve and ``v_jb`` keep the whole spread of the groups (an outlying group is
    possible until its pilot rules it out); where it is large, its
    own counts pin it. A positive loss takes the value of a positive pilot loss of the region (the group's own
    if any, else the pool's, else ``loss_bound``): 1 for binary losses.

    With a finite ``population`` (the group's scores outside the pilot, :func:`_outside_pilot`), a calibration
    set holds distinct rows of it, drawn **without replacement** as calibration draws them: a group planned
    onto all its rows calibrates on exactly those rows' scores, and only the posterior varies.
    """
    (ps, pl, in_group), edges, unl, model = src.pilot, src.edges, src.unl, src.model
    n_resamples, n_items = shape
    pb = np.searchsorted(edges, ps, side="right")
    n_bins = edges.size + 1
    pos = pl > 0
    k_all, m_all = np.bincount(pb, pos, n_bins), np.bincount(pb, minlength=n_bins).astype(float)
    k_own, m_own = np.bincount(pb[in_group], pos[in_group], n_bins), np.bincount(pb[in_group], minlength=n_bins)
    l0 = _pooled_logit(k_all, m_all, n_resamples, rng)
    if src.spread is None:
        theta = 1.0 / (1.0 + np.exp(-l0))
    else:
        tau_w, dx, effect = src.spread
        cell = rng.choice(effect.size, size=n_resamples, p=effect.ravel())
        ia, ic = np.divmod(cell, _C_GRID.size)
        a = _A_GRID[ia] + (rng.random(n_resamples) - 0.5) * (_A_GRID[1] - _A_GRID[0])
        c = _C_GRID[ic] + (rng.random(n_resamples) - 0.5) * (_C_GRID[1] - _C_GRID[0])
        l0 = l0 + a[:, None] + c[:, None] * dx[None, :]  # the group's curve
        seen = m_own > 0
        tau = np.maximum(_draw_grid(np.log(np.broadcast_to(tau_w, (n_resamples, tau_w.size))), _TAU_GRID, rng), 1e-3)
        centre = -0.5 * tau[:, None, None] ** 2  # mean-preserving: E[exp(v)] = 1, the pool's odds are the groups' mean
        loglik = np.zeros((n_resamples, n_bins, _U_GRID.size))  # a region without pilot items adds nothing
        loglik[:, seen] = _cell_loglik(l0[:, seen], k_own[seen], m_own[seen])
        logw = -0.5 * ((_U_GRID - centre) / tau[:, None, None]) ** 2 + loglik  # (R, B, U)
        v = _draw_grid(logw.reshape(-1, _U_GRID.size), _U_GRID, rng).reshape(n_resamples, n_bins)
        theta = 1.0 / (1.0 + np.exp(-(l0 + v)))

    population = src.population
    if population is None or n_items > population.size:
        s = unl[rng.integers(0, unl.size, size=(n_resamples, n_items))]
    else:  # distinct rows outside the pilot, without replacement (each set has its own posterior draw, so
        # the losses of the rows it does not hold never matter)
        s = population[np.stack([rng.choice(population.size, n_items, replace=False) for _ in range(n_resamples)])]
    b = np.searchsorted(edges, s, side="right")
    hit = rng.random((n_resamples, n_items)) < np.take_along_axis(theta, b, axis=1)
    loss = np.zeros((n_resamples, n_items))
    at = np.flatnonzero(hit)  # the hits in row-major order, as ``loss[hit]`` visits them
    hit_bins = b.ravel()[at]
    values = np.full(at.size, float(src.loss_bound))
    for bin_ in np.unique(hit_bins):
        here = hit_bins == bin_
        own = pl[pos & in_group & (pb == bin_)]
        pick = own if own.size else pl[pos & (pb == bin_)]
        pick = pick if pick.size else pl[pos]
        if pick.size:
            values[here] = pick[rng.integers(0, pick.size, int(here.sum()))]
    loss.ravel()[at] = values
    if model.mix is None or not in_group.any():
        return s, loss
    # the Dirichlet-process posterior: the group's own pilot items (Bayesian-bootstrap weights) with the
    # weight m_j / (m_j + mix) in expectation, the region model above (the base measure) with the rest
    m = int(in_group.sum())
    w = rng.dirichlet(np.r_[np.ones(m), float(model.mix)], size=n_resamples)
    idx = _weighted_choice(w, n_items, rng)
    own = idx < m
    gs, gl = ps[in_group], pl[in_group]
    pick = np.minimum(idx, m - 1)
    return np.where(own, gs[pick], s), np.where(own, gl[pick], loss)


#: The pilot models' draws by name (:class:`~gpac_utils.prediction.PilotModel`'s kinds but ``auto``).
DRAWS = {"bootstrap": _draw_bootstrap, "posterior": _draw_posterior, "smoothed": _draw_smoothed}
