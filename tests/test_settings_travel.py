"""Settings travel whole: built and checked once per call, and few functions with many parameters (issue 37.2)."""

from __future__ import annotations

import ast
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import gpac_utils
from gpac_utils import settings
from gpac_utils.calibrate import GPAC, GroupWarning, calibrator
from gpac_utils.checks import SettingWarning
from gpac_utils.cli import main

PACKAGE = Path(gpac_utils.__file__).parent
#: At most this many functions or methods of gpac_utils take 8 or more parameters.
MOST_WITH_MANY = 8


def _walk(node, where: str, limit: int, found: list, cls: str | None = None) -> None:
    for n in ast.iter_child_nodes(node):
        if isinstance(n, ast.ClassDef):
            _walk(n, where, limit, found, n.name)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef):
            a = n.args
            names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
            count = len(names) + (a.vararg is not None) + (a.kwarg is not None)
            if cls and names and names[0] in ("self", "cls"):
                count -= 1
            if count >= limit:
                found.append(f"{where}:{n.lineno} {cls + '.' if cls else ''}{n.name} ({count})")
            _walk(n, where, limit, found)


def many_parameter_functions(limit: int = 8) -> list[str]:
    """Functions and methods with ``limit`` or more parameters (``self``/``cls`` of a method not counted;
    private functions, keyword-only parameters and ``*args``/``**kwargs`` counted, one each)."""
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        _walk(ast.parse(path.read_text()), str(path.relative_to(PACKAGE.parent)), 8, found)
    return found


def test_the_counter_counts_as_the_issue_says():
    src = "def f(a, b, *c, d, **e): pass\nclass K:\n    def m(self, a, b, c, d, e, f, g, h): pass\n"
    tree = ast.parse(src)
    f, k = tree.body
    assert len(f.args.args) + len(f.args.kwonlyargs) + 2 == 5 and len(k.body[0].args.args) - 1 == 8


def test_few_functions_have_eight_or_more_parameters():
    found = many_parameter_functions()
    assert len(found) <= MOST_WITH_MANY, "\n".join(found)


def test_online_and_experiment_entries_take_settings_whole():
    """``OnlineGPAC.__init__`` is exempt: its parameters are its declared settings (issue 52.4)."""
    found = " ".join(many_parameter_functions())
    for name in ("run_online", "run_bpac", " learn ", "head_to_head", "matched_bpac", "_rows"):
        assert name not in found, name


def test_one_gpac_calibrate_builds_settings_once_and_checks_eps_once(tmp_path):
    """Counted by the code objects called (every module imports check_risk by name)."""
    p = tmp_path / "t.csv"
    rng = np.random.default_rng(0)
    u = rng.uniform(size=400)
    g = rng.choice(["a", "b"], size=400)
    loss = (rng.uniform(size=400) < 0.1 * u).astype(float)
    pd.DataFrame({"item_id": range(400), "u": u, "loss": loss, "group": g}).to_csv(p, index=False)
    counted = {settings.check_risk.__code__: 0, settings.Settings.__post_init__.__code__: 0}

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in counted:
            counted[frame.f_code] += 1

    argv = ["calibrate", "--data", str(p), "--score-col", "u", "--group-col", "group", "--eps", "0.1"]
    sys.setprofile(profile)
    try:
        status = main([*argv, "-o", str(tmp_path / "o.json")])
    finally:
        sys.setprofile(None)
    assert status == 0 and list(counted.values()) == [1, 1]


def test_a_calibrator_keeps_the_settings_it_is_given():
    s = settings.Settings(eps=0.1, correction="bonferroni")
    assert calibrator("gpac", s).config is s


def test_alpha_that_looks_wrong_warns_naming_it():
    with pytest.warns(SettingWarning, match="alpha=0.9"):
        GPAC(0.1, alpha=0.9)
    with pytest.warns(SettingWarning, match="eps=0.05, alpha=0.3: they look swapped"):
        GPAC(0.05, 0.3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SettingWarning)
        GPAC(0.1, 0.05)  # an ordinary pair: no warning


def test_the_python_api_warns_on_a_group_that_cannot_be_certified():
    """As the CLI does ("could not be certified at eps"): a group with enough items, all lossy."""
    g = np.repeat(["fine", "lossy"], 300)
    u = np.where(g == "lossy", 0.5, np.tile(np.linspace(0, 1, 300), 2))
    loss = np.where(g == "lossy", 1.0, 0.0)
    with pytest.warns(GroupWarning, match=r"\['lossy'\] could not be certified at eps=0.05"):
        GPAC(0.05).fit(u, loss, g)
