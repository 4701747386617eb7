"""Every lesson states its runtime, and a paper-profile runtime quoted from the measured run is that run's.

The one source of the paper-profile runtimes is ``benchmarks/reproduce_timings.csv`` (the last measured
``make reproduce``; the README's table reads it too). A lesson header that quotes it ("paper ... ≈ N s in the
last measured `make reproduce`") must quote it to within a quarter (a rerun's noise passes, a stale
number such as 91 s for a measured 68 s fails).
"""

from __future__ import annotations

import csv
import re

import pytest

from gpac_utils.workflow.paths import REPO_ROOT

LESSONS = [
    "00_quickstart",
    "10_oracle_partition",
    "11_partition_gap",
    "12_finite_sample",
    "13_validity_audit",
    "31_realdata_case_study",
    "32_label_budget",
    "33_online_gpac",
    "36_overlapping_groups",
]
QUOTED = re.compile(r"≈\s*(\d+)\s*s\s+in the last measured `make reproduce`")


def header(name: str) -> str:
    """The notebook's first markdown cell, comment markers removed, lines joined."""
    text = (REPO_ROOT / "notebooks" / f"{name}.py").read_text(encoding="utf-8")
    cell = text.split("# %% [markdown]", 1)[1].split("\n# %%", 1)[0]
    return " ".join(line.removeprefix("#").strip() for line in cell.splitlines())


def measured() -> dict[str, float]:
    with (REPO_ROOT / "benchmarks" / "reproduce_timings.csv").open() as f:
        return {r["notebook"]: float(r["seconds"]) for r in csv.DictReader(f) if r["profile"] == "paper"}


@pytest.mark.parametrize("name", LESSONS)
def test_every_lesson_states_its_runtime(name):
    text = header(name)
    assert "**Runtime**" in text, f"{name}: the header gives no runtime"
    assert re.search(r"\bfast\b", text[text.index("**Runtime**") :]), f"{name}: no fast-profile runtime"
    assert re.search(r"\bpaper\b", text[text.index("**Runtime**") :]), f"{name}: no paper-profile runtime"


@pytest.mark.parametrize("name", LESSONS)
def test_quoted_paper_runtimes_are_the_measured_ones(name):
    times = measured()
    for quoted in QUOTED.findall(header(name)):
        assert name in times, f"{name}: quotes a measured runtime that benchmarks/reproduce_timings.csv lacks"
        assert abs(int(quoted) - times[name]) <= max(2.0, 0.25 * times[name]), (name, quoted, times[name])
