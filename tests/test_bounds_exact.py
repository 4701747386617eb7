"""The fast WSR climb and the shared-prefix-sum entry point give exactly (bit for bit) the old results.

``_rowwise_wsr`` is the previous row-by-row implementation, kept here as the reference.
"""

import math

import numpy as np
import pytest

from gpac_utils import bounds, sampling, selection
from gpac_utils.paper.theory import populations


def _rowwise_upper(x, alpha, tol=1e-7, max_iter=100):
    c = math.log(1 / alpha)
    nu = bounds.wsr_bets(x, alpha)
    B = x.shape[0]
    mu = x.mean(axis=1)
    out = np.ones(B)
    done = np.zeros(B, dtype=bool)
    stepped = np.zeros(B, dtype=bool)
    for _ in range(max_iter):
        act = np.flatnonzero(~done)
        if act.size == 0:
            break
        xa, na, ma = x[act], nu[act], mu[act]
        with np.errstate(divide="ignore", invalid="ignore"):
            a = xa - ma[:, None]
            a *= -na
            a += 1.0
            S = np.cumsum(np.log(a), axis=1)
            np.divide(na, a, out=a)
            dS = np.cumsum(a, axis=1)
            too_high = S.max(axis=1) >= c
            S -= c
            np.negative(S, out=S)
            S /= dS
            step = np.nanmin(S, axis=1)
        accept_now = too_high & stepped[act]
        out[act[accept_now]] = ma[accept_now]
        done[act[accept_now]] = True
        restart = too_high & ~stepped[act]
        mu[act[restart]] = ma[restart] * 0.1
        ok = ~too_high
        stepped[act[ok]] = True
        new = np.minimum(ma[ok] + np.maximum(step[ok], 0.0), 1.0)
        mu[act[ok]] = new
        conv = (step[ok] <= tol * np.maximum(new, 1e-9)) | (new >= 1.0)
        if conv.any():
            rows = act[ok][conv]
            hi = np.minimum(mu[rows] * (1 + 2 * tol) + 1e-15, 1.0)
            accept = (bounds.wsr_log_capital(x[rows], nu[rows], hi) >= c) | (hi >= 1.0)
            out[rows[accept]] = hi[accept]
            done[rows[accept]] = True
            mu[rows[~accept]] = hi[~accept]
    else:
        out[~done] = 1.0
    return out


def _rowwise_wsr(z, scores, cand, alpha, R):
    z, scores = np.asarray(z, float), np.asarray(scores, float)
    cand = np.broadcast_to(np.asarray(cand, float), z.shape[:-1] + np.shape(cand)[-1:])
    B, K = cand.shape
    R = np.asarray(R, float).reshape(-1, 1) if np.ndim(R) else float(R)
    x = z / R
    rows = np.repeat(np.arange(B), K)
    xk = np.where(scores[rows] <= cand.reshape(-1)[:, None], x[rows], 0.0)
    return R * _rowwise_upper(xk, alpha).reshape(B, K)


def _cases():
    rng = np.random.default_rng(2024)
    for m in (1, 2, 3, 7, 8, 9, 64, 129, 300):
        B = int(rng.integers(1, 30))
        z = rng.random((B, m)) * (rng.random((B, m)) < rng.random())
        if m % 2:
            z = np.round(z)
        u = rng.random((B, m))
        cand = np.sort(rng.random((B, int(rng.integers(1, 20)))), axis=1)
        yield z, u, cand, float(rng.choice([0.01, 0.05, 0.2])), 1.0
        R = 1 + rng.random(B)
        yield z * R[:, None], u, np.sort(u, axis=1), 0.05, R
    yield np.zeros((3, 50)), rng.random((3, 50)), np.array([0.2, 0.5, 1.0]), 0.05, 1.0
    yield np.ones((3, 50)), rng.random((3, 50)), np.array([0.2, 0.5, 1.0]), 0.05, 1.0
    pop = populations.AUDIT_POPULATION
    for n, (scheme, pi) in [(100, ("resample", 0.1)), (300, ("bernoulli", 0.5)), (80, ("full", 1.0))]:
        data = [pop.group(g).sample((20, n), rng) for g in pop.names]
        loss, u = np.concatenate([d[0] for d in data]), np.concatenate([d[1] for d in data])
        d = sampling.draw(loss, u, scheme, pi, rng)
        yield d.z, d.scores, selection.candidate_grid(u, "auto", "wsr"), 0.05, d.value_range


@pytest.mark.parametrize("case", list(_cases()))
def test_wsr_is_bit_identical_to_the_rowwise_climb(case):
    z, u, cand, alpha, R = case
    assert np.array_equal(bounds.ucb("wsr", z, u, cand, alpha, R), _rowwise_wsr(z, u, cand, alpha, R))


def test_wsr_chunking_does_not_change_bits():
    z, u, cand, alpha, R = list(_cases())[-3]
    z2, s2, c2, _ = bounds._as_batch(z, u, cand)
    R2 = np.asarray(R).reshape(-1, 1)
    want = bounds._wsr(z2, s2, c2, alpha, R2)
    for max_pairs in (1, 7, 100):
        assert np.array_equal(bounds._wsr(z2, s2, c2, alpha, R2, max_pairs=max_pairs), want)


def test_ucb_many_equals_ucb_per_bound():
    rng = np.random.default_rng(3)
    loss, u = (rng.random((40, 120)) < 0.3).astype(float), rng.random((40, 120))
    d = sampling.draw(loss, u, "resample", 0.5, rng)
    cand = np.sort(u, axis=1)
    names = list(bounds.BOUNDS)
    many = bounds.ucb_many(names, d.z, d.scores, cand, 0.05, d.value_range)
    for name in names:
        assert np.array_equal(many[name], bounds.ucb(name, d.z, d.scores, cand, 0.05, d.value_range))


def test_hoeffding_bentkus_memo_reuses_exactly_what_a_fresh_call_computes():
    rng = np.random.default_rng(11)
    z, u = (rng.random((6, 90)) < 0.3).astype(float), rng.random((6, 90))
    cand = np.sort(u, axis=1)
    bounds._HB_MEMO.clear()
    fresh = bounds.ucb("hoeffding_bentkus", z, u, cand, 0.05, 1.0)
    for _ in range(3):  # other calls at the same m fill the memo with other values
        z2 = (rng.random((4, 90)) < rng.random()).astype(float)
        bounds.ucb("hoeffding_bentkus", z2, rng.random((4, 90)), cand[:4], 0.05, 1.0)
    assert np.array_equal(bounds.ucb("hoeffding_bentkus", z, u, cand, 0.05, 1.0), fresh)
    mu = np.unique(np.clip(bounds.prefix_sums(z, u, cand)[0] / 90, 0, 1))
    assert np.array_equal(bounds._memo_apply("hoeffding", 90, 0.05, mu, None), bounds._hoeffding_root(mu, 90, 0.05))


@pytest.mark.parametrize("m,B", [(500, 3), (60, 40)])
def test_running_sum_paths_give_the_same_bits(monkeypatch, m, B):
    """The per-step row additions and the blockwise np.cumsum add in the same order: same WSR bits."""
    rng = np.random.default_rng(11)
    z = (rng.random((B, m)) < 0.3) * rng.random((B, m))
    u = rng.random((B, m))
    cand = np.sort(rng.random((B, 16)), axis=1)
    monkeypatch.setattr(bounds, "_WSR_ROWWISE_MIN_COLUMNS", 0)
    rowwise = bounds.ucb("wsr", z, u, cand, 0.05, 1.0)
    monkeypatch.setattr(bounds, "_WSR_ROWWISE_MIN_COLUMNS", 1 << 30)
    blockwise = bounds.ucb("wsr", z, u, cand, 0.05, 1.0)
    assert np.array_equal(rowwise, blockwise)
