"""The fast WSR path gives exactly (bit for bit) the plain definition; so does the shared-prefix-sum entry point."""

import numpy as np
import pytest

from gpac_utils import bounds, sampling, selection, wsr, wsr_fast
from gpac_utils.paper.theory import populations


def _cases():
    rng = np.random.default_rng(2024)
    for m in (1, 2, 3, 7, 8, 9, 64, 129, 300):
        n_calibrations = int(rng.integers(1, 30))
        z = rng.random((n_calibrations, m)) * (rng.random((n_calibrations, m)) < rng.random())
        if m % 2:
            z = np.round(z)
        u = rng.random((n_calibrations, m))
        cand = np.sort(rng.random((n_calibrations, int(rng.integers(1, 20)))), axis=1)
        yield z, u, cand, float(rng.choice([0.01, 0.05, 0.2])), 1.0
        term_range = 1 + rng.random(n_calibrations)
        yield z * term_range[:, None], u, np.sort(u, axis=1), 0.05, term_range
    yield np.zeros((3, 50)), rng.random((3, 50)), np.array([0.2, 0.5, 1.0]), 0.05, 1.0
    yield np.ones((3, 50)), rng.random((3, 50)), np.array([0.2, 0.5, 1.0]), 0.05, 1.0
    pop = populations.AUDIT_POPULATION
    for n, (scheme, label_prob) in [(100, ("resample", 0.1)), (300, ("bernoulli", 0.5)), (80, ("full", 1.0))]:
        data = [pop.group(g).sample((20, n), rng) for g in pop.names]
        loss, u = np.concatenate([d[0] for d in data]), np.concatenate([d[1] for d in data])
        d = sampling.draw(u, loss, scheme, label_prob, rng)
        yield d.z, d.scores, selection.candidate_grid(u, "auto", "wsr"), 0.05, d.term_range


def plain_wsr(z, scores, cand, alpha, term_range):
    """The plain climb: WSR at every (calibration, candidate) pair, one :func:`wsr.wsr_upper` per calibration
    (terms scored above a candidate set to 0); the fast path (:mod:`gpac_utils.wsr_fast`) is it, bit for bit."""
    x = z / term_range
    out = np.empty(cand.shape)
    for b in range(cand.shape[0]):
        out[b] = wsr.wsr_upper(np.where(scores[b] <= cand[b][:, None], x[b], 0.0), alpha)
    return term_range * out


def _plain_wsr(z, u, cand, alpha, term_range):
    z2, s2, c2, batch = bounds._as_batch(z, u, cand)
    term_range2 = np.asarray(term_range, float).reshape(-1, 1) if np.ndim(term_range) else float(term_range)
    return plain_wsr(z2, s2, c2, alpha, term_range2).reshape(batch + c2.shape[-1:])


@pytest.mark.parametrize("case", list(_cases()))
def test_fast_wsr_is_bit_identical_to_the_plain_climb(case):
    z, u, cand, alpha, term_range = case
    assert np.array_equal(bounds.ucb("wsr", z, u, cand, alpha, term_range), _plain_wsr(z, u, cand, alpha, term_range))


def test_wsr_chunking_does_not_change_bits():
    z, u, cand, alpha, term_range = list(_cases())[-3]
    z2, s2, c2, _ = bounds._as_batch(z, u, cand)
    term_range2 = np.asarray(term_range).reshape(-1, 1)
    want = plain_wsr(z2, s2, c2, alpha, term_range2)
    for max_pairs in (1, 7, 100):
        assert np.array_equal(wsr_fast.wsr(z2, s2, c2, alpha, term_range2, max_pairs=max_pairs), want)


def test_ucb_many_equals_ucb_per_bound():
    rng = np.random.default_rng(3)
    loss, u = (rng.random((40, 120)) < 0.3).astype(float), rng.random((40, 120))
    d = sampling.draw(u, loss, "resample", 0.5, rng)
    cand = np.sort(u, axis=1)
    names = list(bounds.BOUNDS)
    many = bounds.ucb_many(names, d.z, d.scores, cand, 0.05, d.term_range)
    for name in names:
        assert np.array_equal(many[name], bounds.ucb(name, d.z, d.scores, cand, 0.05, d.term_range))


@pytest.mark.parametrize("m,n_calibrations", [(500, 3), (60, 40)])
def test_running_sum_paths_give_the_same_bits(monkeypatch, m, n_calibrations):
    """The per-step row additions and the blockwise np.cumsum add in the same order: same WSR bits."""
    rng = np.random.default_rng(11)
    z = (rng.random((n_calibrations, m)) < 0.3) * rng.random((n_calibrations, m))
    u = rng.random((n_calibrations, m))
    cand = np.sort(rng.random((n_calibrations, 16)), axis=1)
    monkeypatch.setattr(wsr_fast, "ROWWISE_MIN_COLUMNS", 0)
    rowwise = bounds.ucb("wsr", z, u, cand, 0.05, 1.0)
    monkeypatch.setattr(wsr_fast, "ROWWISE_MIN_COLUMNS", 1 << 30)
    blockwise = bounds.ucb("wsr", z, u, cand, 0.05, 1.0)
    assert np.array_equal(rowwise, blockwise)


@pytest.mark.parametrize("rowwise_min", [0, 1 << 30])
@pytest.mark.parametrize("n_columns,m", [(1, 5), (3, 700), (300, 450), (700, 97)])
def test_time_major_bets_are_the_bets(monkeypatch, rowwise_min, n_columns, m):
    """The fast path's bets, by blocks of time steps (several blocks here), are ``wsr.wsr_bets`` bit for bit."""
    monkeypatch.setattr(wsr_fast, "ROWWISE_MIN_COLUMNS", rowwise_min)
    rng = np.random.default_rng(m)
    x = (rng.random((n_columns, m)) < 0.2) * rng.random((n_columns, m))
    for alpha in (0.01, 0.05, 0.3):
        want = wsr.wsr_bets(x, alpha).T
        assert np.array_equal(wsr_fast._bets(np.ascontiguousarray(x.T), alpha), want), alpha


@pytest.mark.parametrize("m", [1, 7, 8, 9, 128, 129, 300, 1000, 8193, 10000])
def test_time_major_means_are_the_row_means(m):
    """The climb's starts on the time-major layout (numpy's pairwise order) are ``x.mean(axis=1)`` bit for bit."""
    rng = np.random.default_rng(m)
    x = (rng.random((5, m)) < 0.3) * rng.random((5, m)) * 10.0 ** rng.integers(-6, 6, (5, m))
    assert np.array_equal(wsr_fast._column_means(np.ascontiguousarray(x.T)), x.mean(axis=1))
