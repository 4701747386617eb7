"""The Examples sections of the core API run and give what they show (doctest)."""

from __future__ import annotations

import doctest
import importlib

import pytest

CORE = [
    "gpac_utils",
    "gpac_utils.recipe",
    "gpac_utils.calibrate",
    "gpac_utils.partition",
    "gpac_utils.selection",
    "gpac_utils.data",
    "gpac_utils.metrics",
    "gpac_utils.sampling",
    "gpac_utils.online",
    "gpac_utils.registry",
    "gpac_utils.settings",
    "gpac_utils.scores",
    "gpac_utils.checks",
    "gpac_utils.thresholds_schema",
    "gpac_utils.feasibility",
    "gpac_utils.bounds",
    "gpac_utils.risks",
    "gpac_utils.certificate",
]


@pytest.mark.parametrize("name", CORE)
def test_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no Examples to run"
    assert result.failed == 0, f"{result.failed} doctest example(s) failed in {name}"
