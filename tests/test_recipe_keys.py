"""Recipe identity in one place (issue 30, item 4): the summary keys are the recipe's own fields.

``experiment.KEYS`` is ``method``, ``score`` and the fields of :class:`gpac_utils.recipe.Recipe`,
derived from the class; two recipes that differ in any single field give two summary rows (and two
sets of per-group violation rows), never one merged row.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from gpac_utils import experiment
from gpac_utils.experiment import ExperimentConfig, group_violations, run_experiment, summarize
from gpac_utils.recipe import Recipe

FIELDS = [f.name for f in dataclasses.fields(Recipe)]
#: One recipe, and for each of its fields another value (every other field kept). A field added to
#: Recipe without an entry here fails test_every_field_has_a_variant.
BASE = Recipe(bound="hoeffding_bentkus", sampling="bernoulli", label_prob=0.5, rule="first-crossing", candidates="auto")
OTHER = {"bound": "clt", "sampling": "resample", "label_prob": 0.8, "rule": "max", "candidates": 16}


def table(n=240, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    u = rng.uniform(size=n)
    return pd.DataFrame(
        {
            "item_id": np.arange(n),
            "group": np.where(u < 0.5, "a", "b"),
            "loss": (rng.uniform(size=n) < 0.4 * u).astype(float),
            "score_u": u,
        }
    )


def test_the_keys_are_method_score_risk_and_the_recipes_fields():
    assert experiment.KEYS == ["method", "score", "risk", *FIELDS]
    assert "candidates" in experiment.KEYS


def test_every_field_has_a_variant():
    assert set(OTHER) == set(FIELDS)


@pytest.mark.parametrize("name", FIELDS)
def test_recipes_differing_in_one_field_never_merge(name):
    other = dataclasses.replace(BASE, **{name: OTHER[name]})
    assert [f for f in FIELDS if getattr(other, f) != getattr(BASE, f)] == [name]
    cfg = ExperimentConfig(eps=0.2, alpha=0.1, methods=("PAC", "G-PAC"), recipes=(BASE, other), n_trials=3)
    results = run_experiment(table(), cfg)
    summary = summarize(results, cfg.eps)
    assert len(summary) == 4  # 2 methods x 2 recipes
    assert sorted(summary[name].astype(str).unique()) == sorted({str(getattr(BASE, name)), str(OTHER[name])})
    assert summary["trials"].tolist() == [3] * 4  # no row holds the trials of two recipes
    per_group = group_violations(results, cfg.eps)
    assert len(per_group) == 4 * 2 and (per_group["trials"] == 3).all()  # 2 groups each
