"""The risk registry (gpac_utils.risks): the routed risk E[loss | U <= u] against brute force on the routed
subset, the fallback procedure against its definition, validity on a non-monotone population with a closed-form
routed risk, the option on the calibrators, JSON and the CLI; split C-PAC's wsr grid over the group's interval."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from gpac_utils import CPAC, GPAC, PAC, ScorePartitioner, bounds, calibrate, from_json, risks, selection
from gpac_utils.checks import ParameterError
from gpac_utils.cli import main
from gpac_utils.paper.theory.conditional import StepGroup, routed_oracle, routed_risk
from gpac_utils.recipe import Recipe

DIP = StepGroup("dip", (0.0, 0.1, 0.6, 1.0), (0.3, 0.02, 0.4))  # routed risk high, then low, then high


def test_hoeffding_bentkus_pvalue_rejects_exactly_where_the_bound_on_the_routed_subset_is_below_eps():
    rng = np.random.default_rng(0)
    u = rng.uniform(size=400)
    z = (rng.uniform(size=400) < 0.3 * u).astype(float) * rng.choice([1.0, 0.5], size=400)  # not binary
    grid = np.linspace(0.05, 1.0, 20)
    p, m = risks.routed_pvalues(z, u, grid, 0.1, 1.0)
    for k, g in enumerate(grid):
        routed = z[u <= g]
        assert m[k] == routed.size
        for level in (0.01, 0.05, 0.2):  # brute force: the HB bound of the routed items' mean alone
            ucb = bounds.ucb("hoeffding_bentkus", routed, np.zeros_like(routed), [1.0], level, 1.0)[0]
            assert (p[k] <= level) == (ucb <= 0.1), (g, level, p[k], ucb)


def test_binomial_pvalue_is_the_binomial_tail_of_the_routed_count():
    rng = np.random.default_rng(1)
    u = rng.uniform(size=300)
    z = (rng.uniform(size=300) < 0.1).astype(float)
    grid = np.array([0.2, 0.5, 1.0])
    p, _ = risks.routed_pvalues(z, u, grid, 0.15, 1.0, bound="clopper_pearson")
    for k, g in enumerate(grid):
        m, s = int((u <= g).sum()), int(z[u <= g].sum())
        brute = sum(math.comb(m, j) * 0.15**j * 0.85 ** (m - j) for j in range(s + 1))
        assert p[k] == pytest.approx(brute, rel=1e-9)
    assert risks.routed_pvalues(z, u, [0.0], 0.15, 1.0)[0][0] == 1.0  # nothing routed


def test_fallback_procedure_matches_its_definition_and_controls_the_family_wise_error():
    rng = np.random.default_rng(2)
    p = rng.uniform(size=(200, 12)) ** 3
    got = risks.fallback_reject(p, 0.1)
    for row, rej in zip(p, got):
        level, carried = [], 0.0
        for pk in row:
            a = 0.1 / 12 + carried
            level.append(pk <= a)
            carried = a if pk <= a else 0.0
        assert rej.tolist() == level
    # every hypothesis true, p-values uniform and dependent (one common draw): FWER <= alpha
    n = 20000
    common = rng.uniform(size=(n, 1))
    p_null = np.concatenate([common, rng.uniform(size=(n, 11))], axis=1)
    fwer = risks.fallback_reject(p_null, 0.1).any(axis=1).mean()
    assert fwer <= 0.1 + 3 * math.sqrt(0.1 * 0.9 / n), fwer


def test_routed_risk_is_valid_on_a_non_monotone_population_and_the_multiplicity_step_is_needed():
    eps, alpha, trials, n = 0.08, 0.1, 600, 400
    loss, u = DIP.sample((trials, n), np.random.default_rng(3))
    thr = calibrate.batch_threshold(u, loss, eps=eps, alpha=alpha, risk="routed")
    rate = np.mean(routed_risk(DIP, thr) > eps)
    assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials), rate
    # a flat group just above eps: every hypothesis is true. The exact binomial p-values, each point tested at
    # alpha with no multiplicity step, reject somewhere far more often than alpha; the fallback procedure does not
    flat = StepGroup("flat", (0.0, 1.0), (0.1,))
    loss, u = flat.sample((trials, n), np.random.default_rng(4))
    p, _ = risks.routed_pvalues(loss, u, risks.routed_grid(), 0.095, 1.0, bound="clopper_pearson")
    limit = alpha + 3 * math.sqrt(alpha * (1 - alpha) / trials)
    assert (p <= alpha).any(axis=1).mean() > limit
    assert risks.fallback_reject(p, alpha).any(axis=1).mean() <= limit
    # eps = 0.08 is feasible (the routed risk dips to 0.067 at u = 0.6): the oracle exists
    assert 0.6 <= routed_oracle(DIP, eps) < 0.7


def test_the_option_on_the_calibrators_json_and_errors():
    rng = np.random.default_rng(4)
    u = rng.uniform(size=3000)
    loss = (rng.uniform(size=3000) < 0.4 * u**2).astype(float)
    joint = PAC(eps=0.1).fit(u, loss)
    routed = PAC(eps=0.1, risk="routed").fit(u, loss)
    direct = calibrate.routed_threshold(u, loss, eps=0.1, alpha=0.05, rng=np.random.default_rng(0))
    assert routed.thresholds_["__all__"] == float(direct)
    assert routed.thresholds_["__all__"] < joint.thresholds_["__all__"]  # the stronger guarantee routes less
    kept = loss[u <= routed.thresholds_["__all__"]]
    assert kept.mean() <= 0.1  # and its routed items' error is within eps on the calibration data too
    back = from_json(routed.to_json())
    assert back.risk == "routed" and back.thresholds_ == routed.thresholds_
    assert json.loads(joint.to_json())["settings"]["risk"] == "joint"
    groups = np.where(u < 0.5, "a", "b")
    g = GPAC(eps=0.1, risk="routed").fit(u, loss, groups)
    assert set(g.thresholds_) == {"a", "b"}
    c = CPAC(eps=0.1, risk="routed", partitioner=ScorePartitioner(k=2)).fit(u, loss)
    assert c.risk == "routed" and json.loads(c.to_json())["settings"]["risk"] == "routed"
    with pytest.raises(ParameterError, match=r"^risk: unknown"):
        PAC(eps=0.1, risk="conditional")
    with pytest.raises(ParameterError, match=r"^risk: 'routed' needs"):
        PAC(eps=0.1, recipe="paper", risk="routed")
    with pytest.raises(ParameterError, match=r"^risk: 'routed' needs"):
        PAC(eps=0.1, recipe=Recipe(bound="wsr"), risk="routed")


def test_cli_calibrate_risk_routed(tmp_path, capsys):
    rng = np.random.default_rng(5)
    u = rng.uniform(size=1500)
    table = pd.DataFrame({"item_id": range(1500), "u": u, "loss": (rng.uniform(size=1500) < 0.3 * u).astype(float)})
    table.to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "thr.json"
    assert (
        main(
            [
                "calibrate",
                "--data",
                str(tmp_path / "t.csv"),
                "--score-col",
                "u",
                "--eps",
                "0.1",
                "--risk",
                "routed",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    payload = json.loads(out.read_text())
    assert payload["settings"]["risk"] == "routed"
    assert payload["thresholds"]["__all__"] == float(
        PAC(eps=0.1, risk="routed").fit(u, table["loss"]).thresholds_["__all__"]
    )
    code = main(
        [
            "calibrate",
            "--data",
            str(tmp_path / "t.csv"),
            "--score-col",
            "u",
            "--eps",
            "0.1",
            "--risk",
            "routed",
            "--recipe",
            "paper",
            "-o",
            str(out),
        ]
    )
    assert code == 2 and "--risk: 'routed' needs" in capsys.readouterr().err


def test_split_cpac_wsr_grid_spans_each_groups_interval_and_joint_keeps_the_unit_grid():
    assert np.array_equal(selection.candidate_grid(np.zeros(100), "auto", "wsr"), np.linspace(0, 1, 64))
    rng = np.random.default_rng(6)
    u = np.concatenate([rng.uniform(0.0, 0.3, 1500), rng.uniform(0.6, 1.0, 1500)])
    loss = (rng.uniform(size=3000) < 0.2 * u).astype(float)
    for mode in ("split", "joint"):
        c = CPAC(eps=0.05, recipe=Recipe(bound="wsr"), partitioner=ScorePartitioner(k=2), mode=mode).fit(u, loss)
        for g, (lo, hi) in c.intervals().items():
            t = c.thresholds_[g]
            grid = np.linspace(lo, hi, 64) if mode == "split" else np.linspace(0, 1, 64)
            assert not np.isfinite(t) or np.isclose(grid, t, rtol=0, atol=1e-15).any(), (mode, g, t)
        assert np.isfinite(list(c.thresholds_.values())).all()  # both groups certified something


@pytest.mark.parametrize("risk", ["joint", "routed"])
def test_threshold_is_one_group_and_batch_threshold_the_batch(risk):
    """An (n, 1) column is not n one-item calibrations: threshold() refuses it, naming scores; the batch
    entry says it is a batch, refuses a 1-D array, and gives each row the threshold of that row alone."""
    rng = np.random.default_rng(11)
    u = rng.random((3, 400))
    loss = (rng.random((3, 400)) < 0.1 * u).astype(float)
    kw = dict(eps=0.2, alpha=0.05, risk=risk)
    with pytest.raises(ParameterError, match=r"^scores: must be 1-D") as err:
        calibrate.threshold(u[0][:, None], loss[0][:, None], **kw)
    assert "\n" not in str(err.value)
    with pytest.raises(ParameterError, match=r"^scores: .*threshold\(\) for one group"):
        calibrate.batch_threshold(u[0], loss[0], **kw)
    batched = calibrate.batch_threshold(u, loss, rng=5, **kw)
    assert batched.shape == (3,)
    alone = calibrate.threshold(u[0], loss[0], rng=5, **kw)
    assert batched[0] == alone and np.isfinite(alone)  # the first row draws first from the same generator


def test_threshold_takes_the_settings_whole_and_refuses_a_field_it_would_ignore():
    from gpac_utils.settings import Settings

    u = np.linspace(0, 1, 500)
    loss = (u > 0.8).astype(float)
    given = Settings(eps=0.05, recipe="valid-bernoulli")
    assert calibrate.threshold(u, loss, given, rng=3) == calibrate.threshold(
        u, loss, eps=0.05, recipe="valid-bernoulli", rng=3
    )
    assert calibrate.threshold(u, loss, given, rng=3, eps=0.2) == calibrate.threshold(
        u, loss, Settings(eps=0.2, recipe="valid-bernoulli"), rng=3
    )
    with pytest.raises(ParameterError, match=r"^seed: threshold\(\) does not read it"):
        calibrate.threshold(u, loss, Settings(eps=0.05, seed=4))
    with pytest.raises(ParameterError, match=r"^settings: must be a Settings"):
        calibrate.threshold(u, loss, 0.05)
