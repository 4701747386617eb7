"""The graded homework (``make homework``, workflow/scripts/homework.py; issue 33, item 7).

otter-grader builds the student notebook and the autograder from notebooks/homework/gpac_homework.py
(``otter assign``, which also checks that the solutions pass every test), and ``otter run`` grades a
submission locally, without Docker, as docs/teaching.md tells the teacher. A correct submission gets
full marks; a submission with three typical mistakes gets exactly the points of the answers it
got right: the hidden tests check the values, not that a cell ran.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys

import jupytext
import nbformat
import numpy as np
import pytest
from scipy import stats

from gpac_utils.workflow.paths import REPO_ROOT

_spec = importlib.util.spec_from_file_location("homework", REPO_ROOT / "workflow" / "scripts" / "homework.py")
homework = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(homework)

#: The points of each question (the assignment's question configs).
FULL = {"q1": 2, "q2": 3, "q3": 2, "q4": 2, "q5": 1}
#: Three typical mistakes (solution line -> wrong line) and the points the submission keeps per question.
MISTAKES = {
    # q1: the resampled bound taken as wide as the full-label one (its variance R(1 - R) / n)
    "half_width_resampled = z * np.sqrt(r_hat * (1 - label_prob * r_hat) / n_items)": (
        "half_width_resampled = z * np.sqrt(r_hat * (1 - r_hat) / n_items)"
    ),
    # q3: the CLT bound believed to miss at rate alpha
    "miss_upper = stats.norm.cdf(-stats.norm.ppf(1 - 0.05) / np.sqrt(2))": "miss_upper = 0.05",
    # q4: every trial above eps (the mean then exceeds eps: Error_Gap > 0)
    "max_violation_rate = (n_trials - 1) / n_trials": "max_violation_rate = 1.0",
    "risks = np.array([eps_gap + eps_gap / (2 * (n_trials - 1))] * (n_trials - 1) + [0.0])": (
        "risks = np.full(n_trials, 1.01 * eps_gap)"
    ),
}
WRONG = {"q1": 1, "q2": 3, "q3": 1, "q4": 0, "q5": 1}


def test_the_hidden_values_are_the_lessons_answers():
    """The constants of the hidden tests, derived again (the lessons' formulas and the library)."""
    from gpac_utils import bounds

    source = homework.SOURCE.read_text()
    z = stats.norm.ppf(0.95)
    assert "1.6448536" in source and abs(z - 1.6448536) < 1e-7
    assert "0.1224" in source and abs(stats.norm.cdf(-z / np.sqrt(2)) - 0.1224) < 5e-5
    # q5: the library's Hoeffding-Bentkus bound of n loss-free terms of range 1/pi = 2 first reaches eps = 0.1 at 59
    assert "n_min == 59" in source
    hb = {
        n: bounds.ucb("hoeffding_bentkus", np.zeros(n), np.linspace(0, 1, n), np.ones(1), 0.05, 2.0)[0]
        for n in (58, 59)
    }
    assert hb[58] > 0.1 >= hb[59]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    pytest.importorskip("otter", reason="otter-grader is missing: the `homework` extra (make test installs it)")
    # otter's own run of the tests on the solutions is skipped: the test below grades the solution notebook
    return homework.build(tmp_path_factory.mktemp("homework"), check_solutions=False)


def _submission(built, folder, mistakes=None):
    nb = nbformat.read(built["solution"], as_version=4)
    for old, new in (mistakes or {}).items():
        cells = [cell for cell in nb.cells if cell.cell_type == "code" and old in cell.source]
        assert len(cells) == 1, f"the solution line {old!r} is not in one cell"
        cells[0].source = cells[0].source.replace(old, new)
    folder.mkdir()
    nbformat.write(nb, folder / built["solution"].name)
    return folder / built["solution"].name


def test_the_student_notebook_holds_no_solution_and_no_hidden_test(built):
    text = built["student"].read_text()
    for solution_or_test in [*MISTAKES, "0.05 / 0.9", "0.1224", "== 59", "# SOLUTION", "BEGIN QUESTION"]:
        assert solution_or_test not in text, f"the student notebook shows {solution_or_test!r}"
    nb = nbformat.read(built["student"], as_version=4)
    checks = [cell.source for cell in nb.cells if cell.cell_type == "code" and cell.source.startswith("grader.check")]
    assert checks == [f'grader.check("{name}")' for name in FULL]  # each question's public test, for the student
    assert jupytext.read(homework.SOURCE).metadata["kernelspec"]["name"] == "python3"


def test_otter_run_grades_a_correct_and_a_wrong_submission(built, tmp_path):
    submissions = {
        "correct": _submission(built, tmp_path / "correct"),
        "wrong": _submission(built, tmp_path / "wrong", MISTAKES),
    }
    otter_run = [sys.executable, "-m", "otter", "run", "--no-logo", "-a", str(built["autograder"])]
    runs = {  # the two submissions graded side by side, each in a kernel of its own, as a teacher runs it
        name: subprocess.Popen(
            [*otter_run, "-o", str(path.parent), str(path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for name, path in submissions.items()
    }
    scores = {}
    for name, proc in runs.items():
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out[-3000:]
        results = json.loads((submissions[name].parent / "results.json").read_text())
        scores[name] = {t["name"]: t["score"] for t in results["tests"] if t["name"] in FULL}
        assert {t["name"]: t["max_score"] for t in results["tests"] if t["name"] in FULL} == FULL
    assert scores["correct"] == FULL
    assert scores["wrong"] == WRONG
    assert sum(scores["wrong"].values()) == 6 and sum(FULL.values()) == 10


def test_the_teaching_page_states_the_points_and_scores_graded_here():
    page = re.sub(r"\s+", " ", (REPO_ROOT / "docs" / "teaching.md").read_text())
    rows = dict(re.findall(r"\| (\d): [^|]+ \| (\d) \| \d \|", page))
    assert {f"q{k}": int(v) for k, v in rows.items()} == FULL
    total, kept = sum(FULL.values()), sum(WRONG.values())
    assert f"({total} of {total} points)" in page and f"which keeps exactly {kept} of {total}" in page
    assert "notebooks/homework/gpac_homework.py" in page and "make homework" in page
