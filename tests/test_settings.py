"""Settings declared once: the calibrators, calibrator(), ExperimentConfig and the JSON read the same object."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from gpac_utils import CPAC, GPAC, PAC, ExperimentConfig, Settings, from_json
from gpac_utils.calibrate import CALIBRATORS, calibrator
from gpac_utils.checks import ParameterError
from gpac_utils.partition import ScorePartitioner
from gpac_utils.settings import CORRECTIONS, Correction


def _data(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.choice(["a", "b", "c"], size=n)
    u = rng.uniform(size=n)
    loss = (rng.uniform(size=n) < np.where(g == "c", 0.4, 0.1) * u).astype(float)
    return u, loss, g


def test_experiment_config_extends_settings_with_the_same_fields():
    names = [f.name for f in dataclasses.fields(Settings)]
    assert [f.name for f in dataclasses.fields(ExperimentConfig)][: len(names)] == names
    cfg = ExperimentConfig(eps=0.1, correction="bonferroni", mode="joint", methods=("G-PAC", "C-PAC"), n_trials=3)
    assert cfg.as_settings() == Settings(eps=0.1, correction="bonferroni", mode="joint")
    assert cfg.recipes == (cfg.recipe,)


@pytest.mark.parametrize(
    "changes, name",
    [
        (dict(mode="joint"), "mode"),  # only C-PAC reads it
        (dict(methods=("PAC",), correction="bonferroni"), "correction"),  # PAC has one group
        (dict(recipe="paper", recipes=("valid",)), "recipe"),  # recipes= replaces it
    ],
)
def test_experiment_config_refuses_a_setting_no_method_reads(changes, name):
    with pytest.raises(ParameterError, match=f"^{name}: none of the methods"):
        ExperimentConfig(eps=0.1, n_trials=3, **changes)


@pytest.mark.parametrize("name", list(CALIBRATORS))
def test_calibrator_from_settings_equals_the_class_with_keywords(name):
    u, loss, g = _data()
    settings = Settings(eps=0.1, alpha=0.1, recipe="valid-bernoulli", seed=4, correction="bonferroni")
    entry = CALIBRATORS[name]
    groups = g if entry.groups == "known" else None
    a = calibrator(name, settings).fit(u, loss, groups)
    b = entry.cls(0.1, 0.1, "valid-bernoulli", **{k: getattr(settings, k) for k in entry.cls.OPTIONS[3:]})
    assert a.thresholds_ == b.fit(u, loss, groups).thresholds_
    assert from_json(a.to_json()).settings == a.settings


def test_bonferroni_is_alpha_over_k_and_a_third_correction_is_one_entry():
    u, loss, g = _data()
    bonf = GPAC(0.1, correction="bonferroni").fit(u, loss, g)
    by_hand = {x: GPAC(0.1, alpha=0.05 / 3).fit(u[g == x], loss[g == x], g[g == x]).thresholds_[x] for x in "abc"}
    assert bonf.thresholds_ == by_hand
    sidak = Correction("sidak", lambda alpha, k: 1 - (1 - alpha) ** (1 / k), "all groups at once (Sidak)")
    with CORRECTIONS.registered(sidak):
        s = GPAC(0.1, correction="sidak").fit(u, loss, g)
        assert all(s.thresholds_[x] >= bonf.thresholds_[x] for x in "abc")  # Sidak's level is the larger
    assert "sidak" not in CORRECTIONS
    with pytest.raises(ValueError, match=r"correction: unknown 'sidak'"):
        Settings(eps=0.1, correction="sidak")


def test_older_json_with_simultaneous_reads_back_as_bonferroni():
    u, loss, g = _data()
    fitted = GPAC(0.1, correction="bonferroni").fit(u, loss, g)
    payload = json.loads(fitted.to_json())
    payload["settings"].pop("correction")
    payload["settings"]["simultaneous"] = True
    old = from_json(json.dumps(payload))
    assert old.config.correction == "bonferroni" and old.thresholds_ == fitted.thresholds_


def test_each_calibrator_refuses_settings_it_does_not_read():
    with pytest.raises(TypeError, match=r"^PAC: unknown setting\(s\) \['mode'\]"):
        PAC(0.1, mode="joint")
    with pytest.raises(TypeError, match=r"^GPAC: unknown setting\(s\) \['partitioner'\]"):
        GPAC(0.1, partitioner=ScorePartitioner(k=2))
    assert CPAC(0.1, partitioner=ScorePartitioner(k=2), mode="joint").settings["k"] == 2
