"""The registries are the one source of every list a reader sees (README, glossary, CLI, notebook configs)."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml

from gpac_utils import bounds, cli
from gpac_utils.registry import Registry, UnknownName
from gpac_utils.workflow.paths import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()
GLOSSARY = (REPO_ROOT / "docs" / "glossary.md").read_text()
CONFIGS = {p.stem: yaml.safe_load(p.read_text()) for p in sorted((REPO_ROOT / "notebooks" / "config").glob("*.yaml"))}


def _ticked(text: str) -> list[str]:
    return re.findall(r"`([a-z_]+)`", text)


def _settings(cfg: dict):
    """Every (profile, values) of a notebook config: common, then each profile over it."""
    yield "common", cfg["common"]
    for name, values in (cfg.get("profiles") or {}).items():
        yield name, {**cfg["common"], **(values or {})}


def _subparser(name: str):
    parser = cli._parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices[name]


def _choices(parser, option: str) -> list:
    return list(next(a for a in parser._actions if option in a.option_strings).choices)


# --------------------------------------------------------------------------- the mechanism
def test_unknown_name_is_one_line_listing_the_known_ones():
    reg = Registry("thing", [bounds.BOUNDS["clt"]])
    with pytest.raises(UnknownName, match=r"^thing: unknown 'x'; choose one of \['clt'\]$") as info:
        reg["x"]
    assert isinstance(info.value, ValueError) and isinstance(info.value, KeyError)
    assert "x" not in reg and 3 not in reg and [] not in reg


def test_registered_restores_the_registry_even_on_error():
    reg = Registry("thing", [bounds.BOUNDS["clt"]])
    with pytest.raises(RuntimeError), reg.registered(bounds.BOUNDS["wsr"]):
        assert list(reg) == ["clt", "wsr"]
        raise RuntimeError
    assert list(reg) == ["clt"]
    reg.register(bounds.BOUNDS["wsr"])
    assert reg.unregister("wsr").name == "wsr" and list(reg) == ["clt"]


# --------------------------------------------------------------------------- bounds
def test_readme_and_glossary_bounds_are_generated_from_the_registry():
    """The README's bound table and the glossary's UCB entry are generated (tests/test_generated_docs.py)."""
    rows = README.split("<!-- bounds:start", 1)[1].split("<!-- bounds:end", 1)[0]
    assert re.findall(r"^\| `([a-z_]+)` \|", rows, flags=re.M) == list(bounds.BOUNDS)
    entry = GLOSSARY.split("\nUCB\n", 1)[1].split(".. glossary-ucb:end", 1)[0]
    assert _ticked(entry) == list(bounds.BOUNDS)


def test_cli_bound_choices_are_the_registry():
    assert _choices(_subparser("calibrate"), "--bound") == list(bounds.BOUNDS)


def test_notebook_13_audits_every_registered_bound():
    """13's config does not type the list: "all" is the registry's (a list of names narrows it)."""
    for profile, values in _settings(CONFIGS["13_validity_audit"]):
        assert values["bounds"] == "all", profile


@pytest.mark.parametrize("notebook", sorted(CONFIGS))
def test_config_bounds_are_registered(notebook):
    for profile, values in _settings(CONFIGS[notebook]):
        for key in ("valid_bounds",):
            for name in values.get(key) or ():
                assert bounds.BOUNDS[name].valid, (notebook, profile, key, name)
        recipe = values.get("recipe")
        if isinstance(recipe, dict) and "bound" in recipe:
            assert recipe["bound"] in bounds.BOUNDS, (notebook, profile)


# --------------------------------------------------------------------------- scores, roles, calibrators, modes
from gpac_utils import online  # noqa: E402
from gpac_utils.calibrate import CALIBRATORS  # noqa: E402
from gpac_utils.scores import ROLES, SCORES  # noqa: E402
from gpac_utils.settings import CORRECTIONS  # noqa: E402


@pytest.mark.parametrize("notebook", sorted(CONFIGS))
def test_config_score_lists_are_registered(notebook):
    for profile, values in _settings(CONFIGS[notebook]):
        for key in ("scores", "sim_scores"):
            for column in values.get(key) or ():
                assert column in SCORES, (notebook, profile, key, column)


def test_table_configs_list_the_registrys_paper_scores():
    for notebook in ("21_table_known_groups", "22_table_cpac", "23_table_arena", "24_calibration_ratio"):
        assert CONFIGS[notebook]["common"]["scores"] == SCORES.names(paper=True), notebook


def test_every_score_names_a_registered_role_and_cost_form():
    for score in SCORES.values():
        assert score.role is None or score.role in ROLES
        assert score.cost_form in ("cascade", "router")


def test_cli_method_correction_and_mode_choices_are_the_registries():
    calibrate = _subparser("calibrate")
    assert _choices(calibrate, "--method") == [m.cli_name for m in CALIBRATORS.values()]
    assert _choices(calibrate, "--correction") == list(CORRECTIONS)


def test_labelling_modes_give_propensities_in_0_1():
    import numpy as np

    rate = np.array([0.2, 0.5, 1.0])
    for mode in online.LABELLING.values():
        for cheap in (np.zeros(3, bool), np.ones(3, bool)):
            p = mode.propensity(cheap, rate)
            assert np.all((p > 0) & (p <= 1)), mode.name
        assert np.all(mode.min_propensity(np.zeros(3, bool), rate) <= 1)


def test_renamed_keywords_are_one_line_errors():
    from gpac_utils import GPAC, ExperimentConfig

    for build in (lambda: GPAC(0.1, simultaneous=True), lambda: ExperimentConfig(eps=0.1, simultaneous=True)):
        with pytest.raises(TypeError, match=r"^simultaneous: replaced by correction='bonferroni'"):
            build()
    from gpac_utils import prediction

    with pytest.raises(TypeError, match=r"^pilot_model: replaced by spec=PlanSpec\(model=PilotModel\(kind=...\)\)"):
        prediction.predict([0.5], [0], [0.5], [0.0], pilot_model="bootstrap")
    with pytest.raises(TypeError, match=r"^free_labels: replaced by labelling="):
        online.OnlineGPAC(0.1, label_prob=0.5, free_labels=False)
    assert (
        cli.main(["calibrate", "--data", "x.csv", "--score-col", "s", "--eps", "0.1", "--simultaneous", "-o", "o"]) == 2
    )


def test_glossary_score_entry_lists_the_paper_scores():
    line = next(x for x in GLOSSARY.splitlines() if "`score_*` columns" in x)
    assert re.findall(r"`(score_[a-z]+)`", line) == SCORES.names(paper=True)


def test_readme_describes_the_default_calibrators_and_the_glossary_lists_every_one():
    """The README's prose describes the paper's calibrators, the default of each kind of grouping; a calibrator
    registered beside them is listed by the glossary's generated method entry, not typed into the README."""
    assert re.findall(r"^\* \*\*([A-Za-z-]+)\*\*", README, flags=re.M) == CALIBRATORS.names(default=True)
    cls = type("Extra", (CALIBRATORS["G-PAC"].cls,), {"name": "G-PAC-extra"})  # the entry's name is the class's
    extra = dataclasses.replace(CALIBRATORS["G-PAC"], name="G-PAC-extra", cls=cls, default=False)
    with CALIBRATORS.registered(extra):  # tests/test_generated_docs.py: the glossary lists it
        assert CALIBRATORS.names(default=True) == ["PAC", "G-PAC", "C-PAC", "Shift-G-PAC"]


def test_cli_plan_help_lists_the_registries():
    from gpac_utils.recipe import RECIPES

    plan = _subparser("plan")
    helps = {a.option_strings[0]: a.help for a in plan._actions if a.option_strings}
    assert helps["--bound"].endswith(": " + ", ".join(bounds.BOUNDS))
    assert helps["--recipe"].endswith(": " + ", ".join(RECIPES))


def test_benchmark_and_grader_tables_list_the_registries():
    from gpac_utils.llm import benchmarks, generation, grading

    def table_rows(doc):  # the first column of the module docstring's table (between its last two rules)
        body = re.split(r"^=+ .*$", doc, flags=re.M)[2]
        return re.findall(r"^``([a-z_0-9]+)``", body, flags=re.M)

    assert table_rows(benchmarks.__doc__) == list(benchmarks.BENCHMARKS)
    graded = table_rows(grading.__doc__)
    assert set(graded) <= set(grading.GRADERS) and set(grading.GRADERS) <= set(benchmarks.BENCHMARKS)
    assert generation.WALK_SAMPLING.keys() <= set(ROLES)
