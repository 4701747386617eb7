"""The betting e-processes (gpac_utils.eprocess, issue 49): valid at every look under the null (seeded
Monte Carlo, Ville's inequality), powerful under an alternative, the same bits as OnlineGPAC's
certification and drift alarm, and a state that is fed in batches and read back from JSON exactly."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gpac_utils import eprocess, online
from gpac_utils.checks import ParameterError
from gpac_utils.eprocess import BETTING, EDetector, EProcess

EPS, LEVEL, REPS, N = 0.1, 0.05, 4000, 400


def mcse(p, n):
    return math.sqrt(p * (1 - p) / n)


def bernoulli(p, shape, seed):
    return (np.random.default_rng(seed).uniform(size=shape) < p).astype(float)


@pytest.mark.parametrize("bet", BETTING)
@pytest.mark.parametrize("direction", eprocess.DIRECTIONS)
def test_false_rejections_at_any_look_stay_below_the_level(direction, bet):
    # The null's boundary (mean exactly eps) is its hardest case; the sup over all N looks is tested.
    x = bernoulli(EPS, (REPS, N), seed=1 + eprocess.DIRECTIONS.index(direction))
    ep = EProcess(EPS, direction, bet=bet, shape=REPS).update(x)
    rate = float(ep.rejects(LEVEL).mean())
    assert rate <= LEVEL + 3 * mcse(LEVEL, REPS), (direction, bet, rate)
    assert np.all(ep.max_e_value >= ep.e_value) and np.all(ep.n == N)


@pytest.mark.parametrize("bet", BETTING)
def test_power_against_an_alternative_in_each_direction(bet):
    below = EProcess(EPS, "below", bet=bet, shape=500).update(bernoulli(EPS / 4, (500, N), seed=4))
    assert below.rejects(LEVEL).mean() > 0.5, below.rejects(LEVEL).mean()
    # and not the wrong way round: no evidence that a mean of 3 eps is below eps
    wrong = EProcess(EPS, "below", bet=bet, shape=500).update(bernoulli(3 * EPS, (500, N), seed=3))
    assert not wrong.rejects(LEVEL).any()
    above = EProcess(EPS, "above", bet=bet, shape=500).update(bernoulli(3 * EPS, (500, N), seed=3))
    if bet == "max":  # the cap above is 0.9 / eps: each clean term keeps a tenth of the wealth
        assert above.rejects(LEVEL).mean() < 0.5
    else:
        assert above.rejects(LEVEL).mean() > 0.9, above.rejects(LEVEL).mean()


def test_loss_free_terms_certify_after_the_documented_counts():
    counts = {b: int(EProcess(0.05, "below", bet=b).update(np.zeros(200)).first_crossing(0.05)) for b in BETTING}
    assert counts == {"grapa": 75, "mixture": 86, "max": 65}  # issue 53: 86 mixture, 65 capped maximal
    assert math.ceil(math.log(0.05) / math.log(1 - 0.05)) == 59  # the fixed-n binomial route


@pytest.mark.parametrize("bet", online.BETS)
def test_the_same_bits_as_online_gpac_certification(bet):
    rng = np.random.default_rng(5)
    n, k = 700, 3
    u = rng.uniform(size=n)
    p = np.where(rng.uniform(size=n) < 0.5, 0.4, 1.0)  # a propensity known before each term
    x = (rng.uniform(size=n) < 0.15 * u) / p * (rng.uniform(size=n) < p)
    grid = np.array([0.3, 0.6, 1.0])
    terms = x[:, None] * (u[:, None] <= grid)
    settings = online.OnlineSettings(eps=EPS, alpha=LEVEL, label_prob=0.4, grid=tuple(grid), bet=bet)
    state = online.new_state((), k, bet)
    for part in np.array_split(np.arange(n), 7):
        state = state | online.certify(state, terms[part], np.ones(part.size, bool), 1.0 / p[part], settings)
    for j in range(k):
        ep = EProcess(EPS, "below", bet=bet)
        for part in np.array_split(np.arange(n), 3):  # other batches, the same bits
            ep.update(terms[part, j], term_range=1.0 / p[part])
        for key in BETTING[bet].keys:
            assert ep.state[key][0].tobytes() == state[key][j].tobytes(), key
        assert bool(ep.rejects(LEVEL)) == bool(state["certified"][j])
    assert state["certified"].any() and not state["certified"].all()  # both outcomes compared


def test_the_detector_alarms_where_online_gpac_alarms():
    rng = np.random.default_rng(6)
    x = (rng.uniform(size=(50, 600)) < np.where(np.arange(600) < 300, 0.05, 0.4)).astype(float)
    sr_online = online._detector(np.full((50, 10), -np.inf), x, np.ones(x.shape, bool), EPS)
    det = EDetector(EPS, shape=50).update(x)
    assert det.state["log_sr"].tobytes() == sr_online[:, -1, :].tobytes()
    over = np.logaddexp.reduce(sr_online, axis=-1) >= math.log(10 / 1e-3)
    assert np.array_equal(det.alarms(1e-3), over.any(-1)) and det.alarms(1e-3).mean() > 0.9
    parts = EDetector(EPS, shape=50)
    for part in np.array_split(np.arange(600), 4):  # other batches: the same up to rounding
        parts.update(x[:, part])
    np.testing.assert_allclose(parts.state["log_sr"], det.state["log_sr"], rtol=1e-12)
    assert not det.reset().alarms(1e-3).any() and np.all(det.n == 0)


@pytest.mark.parametrize("cls", [EProcess, EDetector])
def test_a_state_read_back_from_json_continues_with_the_same_bits(cls):
    x = bernoulli(0.2, (3, 240), seed=7)
    make = (lambda: cls(EPS, "above", bound=1.0, shape=3)) if cls is EProcess else (lambda: cls(EPS, shape=3))
    kept = make().update(x[:, :100]).update(x[:, 100:170]).update(x[:, 170:])
    text = make().update(x[:, :100]).to_json()
    assert json.loads(text)["state"] and "Infinity" not in text and "NaN" not in text  # strict JSON
    again = cls.from_json(text).update(x[:, 100:170])
    again = cls.from_dict(json.loads(again.to_json())).update(x[:, 170:])
    assert again.to_json() == kept.to_json()
    if cls is EProcess:  # its running sums are cumsums continued from the state: any batches, the same bits
        assert make().update(x).to_json() == kept.to_json()


@pytest.mark.parametrize("bet", BETTING)
def test_an_empty_batch_changes_nothing(bet):
    """Zero terms (a look with no new trial) leave the state as it was, crossing nothing (they raised IndexError)."""
    ep = EProcess(EPS, "above", bet=bet, shape=2).update(bernoulli(0.5, (2, 30), seed=8))
    kept = ep.to_json()
    assert ep.update(np.zeros((2, 0))).to_json() == kept and ep.first_crossing(LEVEL).tolist() == [-1, -1]
    assert EProcess(EPS, bet=bet).update([]).to_json() == EProcess(EPS, bet=bet).to_json()


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: EProcess(0.0, "above"), "eps"),
        (lambda: EProcess(0.5, "above", bound=0.4), "eps"),
        (lambda: EProcess(0.1, "sideways"), "direction"),
        (lambda: EProcess(0.1, bet="kelly"), "bet"),
        (lambda: EProcess(0.1).update([0.2, 1.5]), "terms"),
        (lambda: EProcess(0.1).update([0.2, np.nan]), "terms"),
        (lambda: EProcess(0.1, shape=2).update([0.2, 0.1]), "terms"),
        (lambda: EProcess(0.1).update([0.02], term_range=0.05), "term_range"),
        (lambda: EProcess(0.1).update([0.2], term_range=0.15), "terms"),
        (lambda: EProcess.from_json("{"), "state"),
        (lambda: EProcess.from_dict({"format": "something else"}), "state"),
        (lambda: EProcess.from_dict(EDetector(0.1).to_dict()), "state"),
        (lambda: EProcess(0.1).first_crossing(0.05), "first_crossing"),
    ],
)
def test_bad_arguments_are_one_line_naming_them(call, name):
    with pytest.raises(ParameterError) as err:
        call()
    msg = str(err.value)
    assert msg.startswith(f"{name}:") and "\n" not in msg
