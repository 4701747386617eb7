"""Sequential labelling (issue 53, item 4): gpac_utils.sequential_labels and ``gpac plan --sequential``.

Its guarantee is audited on populations of known risk (exact risk at the stopped threshold, violation at most
alpha + 3 Monte Carlo standard errors), its cost on a loss-free group is that of docs/planning.md, and the CLI
runs a whole labelling to a certificate that says it came from the sequential mode."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from gpac_utils import feasibility, sequential_labels
from gpac_utils.checks import ParameterError
from gpac_utils.cli import main as cli_main


def _run(scores, groups, losses, **kw) -> dict:
    """Label as the mode asks until it stops; return the final state."""
    state = sequential_labels.start(scores, groups, **kw)
    sequential_labels.update(state, scores, losses)
    while sequential_labels.next_rows(state):
        sequential_labels.update(state, scores, losses)
    return state


#: Loss-free group at eps = alpha = 0.05, batches of one: labels until it certifies, per bet (docs/planning.md).
LOSS_FREE_COST = {"mixture": 86, "max": 65}


@pytest.mark.parametrize("bet", list(LOSS_FREE_COST))
def test_loss_free_cost_matches_the_planning_page(bet):
    u = np.random.default_rng(0).random(300)
    state = _run(u, np.zeros(300, int), np.zeros(300), eps=0.05, alpha=0.05, budget=300, batch_size=1, bet=bet)
    e = state["groups"]["0"]
    assert e["status"] == "certified" and e["labelled"] == LOSS_FREE_COST[bet]
    assert e["threshold"] == pytest.approx(u.max())  # loss-free: the whole grid certifies at once
    assert feasibility.min_items(0.05, 0.05) == 59  # the fixed-n route, which must fix n in advance


def test_batches_stop_at_most_one_batch_late():
    u = np.random.default_rng(1).random(300)
    state = _run(u, np.zeros(300, int), np.zeros(300), eps=0.05, alpha=0.05, budget=300, batch_size=20)
    assert state["groups"]["0"]["labelled"] == 100  # 86 rounded up to a whole batch of 20


def _risk(u, b):
    """Exact joint risk E[loss 1{U <= u}] of the population U ~ U(0, 1), P(loss | U = v) = 2 b v."""
    return b * np.clip(u, 0, 1) ** 2


def test_sequential_guarantee_holds_on_populations_of_known_risk():
    """Per group, P(risk at the stopped threshold > eps) <= alpha, for a group whose risk crosses eps mid-grid and one
    that barely exceeds it at the top: violation rate <= alpha + 3 MCSE over seeded repetitions (exact risk)."""
    eps, alpha, reps, n = 0.05, 0.2, 300, 200
    slopes = {"mid": 0.25, "edge": 0.06}  # R(1) = 0.25 (crosses eps at u = 0.45), 0.06 (at u = 0.91)
    rng = np.random.default_rng(2026)
    bad = {x: 0 for x in slopes}
    certified = {x: 0 for x in slopes}
    for r in range(reps):
        g = np.repeat(list(slopes), n)
        u = rng.random(g.size)
        loss = (rng.random(g.size) < 2 * np.vectorize(slopes.get)(g) * u).astype(float)
        state = _run(u, g, loss, eps=eps, alpha=alpha, budget=g.size, batch_size=25, grid_size=20, bet="max", seed=r)
        for x, b in slopes.items():
            t = state["groups"][x]["threshold"]
            certified[x] += t is not None
            bad[x] += t is not None and _risk(t, b) > eps
    mcse = np.sqrt(alpha * (1 - alpha) / reps)
    for x in slopes:
        assert bad[x] / reps <= alpha + 3 * mcse, (x, bad[x], certified[x])
    assert certified["mid"] > reps / 2  # the audit is not vacuous: the mid group certifies most of the time


def test_futile_group_stops_and_start_is_fixed_before_any_label():
    u = np.linspace(0, 1, 60)
    g = np.repeat(["a", "b"], 30)
    first = sequential_labels.start(u, g, eps=0.05, alpha=0.05, budget=60, seed=3)
    again = sequential_labels.start(u, g, eps=0.05, alpha=0.05, budget=60, seed=3)
    assert first == again and sequential_labels.start(u, g, eps=0.05, budget=60, seed=4) != first  # seeded
    state = _run(u, g, np.zeros(60), eps=0.05, alpha=0.05, budget=60)
    assert {e["status"] for e in state["groups"].values()} == {"futile"}  # 30 rows cannot reach 86 loss-free labels
    assert all(e["labelled"] == 0 for e in state["groups"].values())  # decided before buying a label


def test_requested_rows_need_losses():
    u = np.linspace(0, 1, 200)
    state = sequential_labels.start(u, np.zeros(200, int), eps=0.1, budget=200)
    sequential_labels.update(state, u, np.full(200, np.nan))
    rows = sequential_labels.next_rows(state)["0"]
    with pytest.raises(ParameterError, match=r"^losses: group '0' has 10 requested row\(s\) without a loss"):
        sequential_labels.update(state, u, np.full(200, np.nan))
    loss = np.full(200, np.nan)
    loss[rows] = 0.0
    sequential_labels.update(state, u, loss)
    assert state["groups"]["0"]["labelled"] == 10


def test_cli_plan_sequential_labels_to_a_certificate(tmp_path, capsys):
    rng = np.random.default_rng(5)
    n = 600
    u = rng.random(n)
    g = np.where(rng.random(n) < 0.5, "a", "b")
    truth = (rng.random(n) < np.where(g == "a", 0.02, 0.5) * u).astype(float)
    path = tmp_path / "t.csv"
    pd.DataFrame({"score": u, "group": g, "loss": np.nan}).to_csv(path, index=False)
    out = tmp_path / "next.csv"
    args = ["plan", "--sequential", "--data", str(path), "--score-col", "score", "--eps", "0.1", "--seed", "2"]
    args += ["--batch-size", "30", "--budget", "400", "-o", str(out)]
    for _ in range(30):
        assert cli_main(args) == 0
        text = capsys.readouterr().out
        if "done:" in text:
            break
        nxt = pd.read_csv(out)
        assert set(nxt.columns) == {"row", "group"} and len(nxt) > 0
        df = pd.read_csv(path)
        df.loc[nxt["row"], "loss"] = truth[nxt["row"]]  # the expert labels the requested rows
        df.to_csv(path, index=False)
    assert "done: certificate (mode sequential" in text
    cert = json.loads((tmp_path / "next_certificate.json").read_text())
    assert cert["provenance"]["mode"] == "sequential" and cert["provenance"]["sequential"]["bet"] == "mixture"
    assert cert["groups"]["a"]["status"] == "certified" and cert["thresholds"]["a"] is not None
    labelled = int(pd.read_csv(path)["loss"].notna().sum())
    assert labelled == sum(e["labelled"] for e in cert["groups"].values()) <= 400
    assert cli_main(["route", "--thresholds", str(tmp_path / "next_certificate.json"), "--data", str(path),
                     "-o", str(tmp_path / "routed.csv")]) == 0  # fmt: skip
    capsys.readouterr()
    assert cli_main(["verify", str(tmp_path / "next_certificate.json"), "--data", str(path)]) == 1
    assert "provenance.mode 'sequential'" in capsys.readouterr().err  # refused, not recomputed as G-PAC
    # a changed table is refused in one line
    pd.read_csv(path).iloc[:-1].to_csv(path, index=False)
    assert cli_main(args) == 1
    err = capsys.readouterr().err.strip()
    assert "but the --state" in err and "\n" not in err
