"""Settings declared once: the calibrators, calibrator(), ExperimentConfig and the JSON read the same object."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re

import numpy as np
import pytest

from gpac_utils import (
    CPAC,
    GPAC,
    PAC,
    ExperimentConfig,
    Settings,
    feasibility,
    from_json,
    prediction,
    thresholds_schema,
)
from gpac_utils.bounds import BOUNDS
from gpac_utils.calibrate import CALIBRATORS, ROUTING, STATUSES, Method, calibrator
from gpac_utils.checks import ParameterError
from gpac_utils.online import OnlineGPAC, OnlineSettings
from gpac_utils.partition import ScorePartitioner
from gpac_utils.recipe import VALID, Recipe
from gpac_utils.settings import COMMON, CORRECTIONS, REQUIRED, Correction, Interval, Options, Setting, declarations
from gpac_utils.workflow.paths import REPO_ROOT


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
    groups = g if entry.needs_groups else None
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
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'mode'"):
        PAC(0.1, mode="joint")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'partitioner'"):
        GPAC(0.1, partitioner=ScorePartitioner(k=2))
    assert CPAC(0.1, partitioner=ScorePartitioner(k=2), mode="joint").settings["k"] == 2


def _documented(cls) -> set[str]:
    """The parameter names a class docstring's numpydoc ``Parameters`` section lists."""
    section = inspect.getdoc(cls).split("Parameters\n----------\n", 1)[1]
    section = re.split(r"\n\n[A-Z][a-z]+\n-+\n", section, maxsplit=1)[0]
    heads = [re.match(r"([a-z_][a-z_0-9]*(?:, [a-z_][a-z_0-9]*)*)( : |$)", line) for line in section.splitlines()]
    return {name for head in heads if head for name in head.group(1).split(", ")}


@pytest.mark.parametrize("name", list(CALIBRATORS))
def test_each_calibrators_signature_is_its_declared_settings_and_its_docstring_lists_them(name):
    """help(), inspect.signature and tab completion show every setting (no **options), as declared once."""
    cls = CALIBRATORS[name].cls
    params = list(inspect.signature(cls).parameters.values())
    assert [p.name for p in params] == [s.name for s in cls.SETTINGS]
    for p, s in zip(params, cls.SETTINGS, strict=True):
        assert p.default == (p.empty if s.default is REQUIRED else s.default), p.name
        assert p.kind is (p.KEYWORD_ONLY if params.index(p) >= 3 else p.POSITIONAL_OR_KEYWORD), p.name
    assert cls.SETTINGS[: len(COMMON)] == COMMON
    if cls.__doc__ and "Parameters" in cls.__doc__ and cls.__module__ == "gpac_utils.calibrate":
        assert _documented(cls) == set(cls.OPTIONS), name  # GPAC's lacked risk


def test_online_gpacs_signature_is_its_settings():
    params = inspect.signature(OnlineGPAC).parameters
    fields = dataclasses.fields(OnlineSettings)
    assert list(params) == [f.name for f in fields] + ["settings"]
    for f in fields:
        default = None if f.default is dataclasses.MISSING else f.default
        assert params[f.name].default == default, f.name
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values())
    assert set(params) <= _documented(OnlineGPAC)  # its docstring lists every parameter
    router = OnlineGPAC(0.1, label_prob=0.5, grid=11, drift_alpha=0.01)
    assert router.settings == OnlineSettings(eps=0.1, label_prob=0.5, grid=11, drift_alpha=0.01)
    with pytest.raises(ParameterError, match=r"^settings: given with \['grid'\]"):
        OnlineGPAC(settings=router.settings, grid=21)


def test_a_calibrator_whose_signature_drifts_from_its_declarations_is_refused():
    class Hidden(GPAC):
        def __init__(self, eps, alpha=0.05, recipe=VALID, **options):
            super().__init__(eps, alpha, recipe, **options)

    class Positional(GPAC):
        def __init__(self, eps, alpha=0.05, recipe=VALID, loss_bound=1.0, *, min_group_size=10, seed=0,
                     risk="joint", correction="none"):  # fmt: skip
            pass

    class Renamed(GPAC):
        name = "G-PAC-renamed"

    with pytest.raises(ValueError, match=r"Hidden.__init__ has \*\*options \(variadic keyword\) where its declara"):
        Method("G-PAC", Hidden, "known")
    with pytest.raises(ValueError, match=r"has loss_bound=1.0 \(positional or keyword\) where .* \(keyword-only\)"):
        Method("G-PAC", Positional, "known")
    with pytest.raises(ValueError, match=r"Renamed.name is 'G-PAC-renamed'; the entry's name must be the class's"):
        Method("G-PAC-other", Renamed, "known")
    assert Method("G-PAC-renamed", Renamed, "known").cls is Renamed


def test_cluster_fraction_is_declared_by_c_pac_alone():
    """Settings' fields are the common settings; C-PAC's are its declarations, read through Settings."""
    assert "cluster_fraction" not in {f.name for f in dataclasses.fields(Settings)}
    readers = [m for m in CALIBRATORS.values() if any(s.name == "cluster_fraction" for s in m.cls.SETTINGS)]
    assert [m.name for m in readers] == ["C-PAC"]
    fraction = declarations()["cluster_fraction"]
    assert Settings(eps=0.1, cluster_fraction=0.3).cluster_fraction == 0.3 and Settings(eps=0.1).cluster_fraction == 0.5
    assert Settings(eps=0.1, cluster_fraction=0.5) == Settings(eps=0.1)  # a default is not stored
    with pytest.raises(ParameterError, match=r"^cluster_fraction: must lie in \(0.0, 1.0\), got 1.5$"):
        Settings(eps=0.1, cluster_fraction=1.5)
    field = thresholds_schema.SETTINGS["cluster_fraction"]  # the schema's check is the declaration's
    assert field.check(1.5, {}) == "must lie in (0.0, 1.0), got 1.5" and field.type == fraction.constraint.kind


def test_a_range_is_stated_once_in_the_tree():
    """No module checks a declared setting's range again (check_range("eps", ...) beside its declaration), and
    the schema declares no setting by hand: both derive from the one declaration."""
    every = declarations()
    names = [p.name for s in every.values() for p in s.flat() if isinstance(p.constraint, Interval | Options)]
    pattern = re.compile(r"""check_(?:range|int|choice)\(\s*["']({})["']""".format("|".join(names)))
    hits = []
    for path in sorted((REPO_ROOT / "gpac_utils").rglob("*.py")):
        if "llm" in path.parts:  # generation's own settings (a benchmark's seed), not a calibrator's
            continue
        text = path.read_text()
        hits += [f"{path.name}: {m.group(0)}" for m in pattern.finditer(text)]
    assert not hits, hits
    for name in names:  # every one in the schema, derived from its declaration (none typed there)
        assert thresholds_schema.SETTINGS[name].check.__qualname__.startswith("_from_declaration"), name


def test_a_calibrators_own_status_joins_the_vocabulary_while_registered():
    own = Method("G-PAC-own", type("OwnStatus", (GPAC,), {"name": "G-PAC-own"}), "known", statuses={"own": True})
    assert "own" not in STATUSES
    with CALIBRATORS.registered(own):
        assert list(STATUSES)[-1] == "own" and "own" in ROUTING
    assert "own" not in STATUSES and "own" not in ROUTING


def test_a_setting_declared_twice_differently_is_refused():
    other = Setting("mode", "x", Options(("x",)), "another mode")

    class Twice(GPAC):
        name = "twice"
        SETTINGS = (*GPAC.SETTINGS, other)

    assert list(inspect.signature(Twice).parameters)[-1] == "mode"  # generated from its declarations
    with CALIBRATORS.registered(Method("twice", Twice, "known")):
        with pytest.raises(ValueError, match=r"^method 'twice': declares 'mode' again, differently"):
            declarations()


def test_a_quantile_grid_is_valid_only_with_a_bound_monotone_in_every_term():
    """Bound.monotone is read where it matters: a grid of score quantiles (an int candidates) is outside the
    first-crossing validity argument unless the bound is non-decreasing in every term (gpac_utils.selection)."""
    monotone, other = BOUNDS.names(valid=True, monotone=True)[0], BOUNDS.names(valid=True, monotone=False)[0]
    assert Recipe(bound=monotone, candidates=20).is_valid and Recipe(bound=other).is_valid
    assert not Recipe(bound=other, candidates=20).is_valid


@pytest.mark.parametrize(
    ("function", "names"),
    [(prediction.predict, prediction.PLANNED_SETTINGS), (feasibility.feasibility, feasibility.SETTINGS_READ)],
)
def test_the_planners_signatures_are_their_declared_settings_and_their_docstrings_list_them(function, names):
    """Each setting the planner reads is an explicit keyword-only parameter with its declared default; the
    docstring lists every parameter; the keywords build the same settings as ``settings=``."""
    params = inspect.signature(function).parameters
    every = declarations()
    for name in names:
        p, s = params[name], every[name]
        assert p.kind is p.KEYWORD_ONLY and p.default == (None if s.default is REQUIRED else s.default), name
    assert not any(p.kind is p.VAR_KEYWORD for p in params.values())
    assert set(params) <= _documented(function), function.__name__
    sizes = {"a": 40, "b": 300}
    assert feasibility.feasibility(sizes, eps=0.05, risk="routed").equals(
        feasibility.feasibility(sizes, Settings(eps=0.05, risk="routed"))
    )
    with pytest.raises(ParameterError, match=r"^settings: given with \['alpha'\]"):
        feasibility.feasibility(sizes, Settings(eps=0.05), alpha=0.1)


@pytest.mark.parametrize("name", ["PAC", "GPAC", "CPAC"])
def test_a_calibrator_shows_its_settings_as_attributes(name):
    """Read from its config (one declaration), each setting is an attribute dir() lists and IPython completes."""
    import gpac_utils

    cls = getattr(gpac_utils, name)
    calibrator = cls(0.1, 0.05)
    for option in cls.OPTIONS:
        assert option in dir(calibrator) and getattr(calibrator, option) == getattr(calibrator.config, option)
    with pytest.raises(AttributeError, match="has no attribute 'epsilon'"):
        calibrator.epsilon  # noqa: B018
