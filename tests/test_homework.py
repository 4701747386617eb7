"""The graded homework (``make homework``, ``make grade``; workflow/scripts/homework.py; issues 33 and 38).

otter-grader builds the student notebook and the autograder from notebooks/homework/gpac_homework.py
(``otter assign``, which also checks that the solutions pass every test), and ``otter run`` grades a
submission locally, without Docker. Here:

* the commands of docs/teaching.md's grading section (and the Makefile's by-hand line) run verbatim, in
  a copy of the repository without ``build/``, on two submissions: the solution gets full marks, four
  typical mistakes keep exactly the points of the answers that are right, and the class table has one
  row per student and the points per question;
* the public checks in the student's notebook flag each of the four mistakes before submission (none
  of them says "All test cases passed!");
* no feedback (``feedback.md``, ``results.json``, otter's output) shows an expected value.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import numpy as np
import pandas as pd
import pytest
import repo_scripts
from scipy import stats

from gpac_utils.workflow.paths import REPO_ROOT

homework = repo_scripts.load("workflow/scripts/homework.py")

#: The points of each question (the assignment's question configs).
FULL = {"q1": 2, "q2": 3, "q3": 2, "q4": 2, "q5": 1}
#: Four typical mistakes (solution line -> wrong line); the points the submission keeps per question.
MISTAKES = {
    # q1: the resampled bound taken as wide as the full-label one (its variance R(1 - R) / n)
    "half_width_resampled = z * np.sqrt(r_hat * (1 - label_prob * r_hat) / n_items)": (
        "half_width_resampled = z * np.sqrt(r_hat * (1 - r_hat) / n_items)"
    ),
    # q3: the CLT bound believed to miss at rate alpha
    "miss_upper = stats.norm.cdf(-stats.norm.ppf(1 - 0.10) / np.sqrt(2))": "miss_upper = 0.10",
    # q4: every trial above eps (the mean then exceeds eps: Error_Gap > 0)
    "max_violation_rate = (n_trials - 1) / n_trials": "max_violation_rate = 1.0",
    "risks = np.array([eps_gap + eps_gap / (2 * (n_trials - 1))] * (n_trials - 1) + [0.0])": (
        "risks = np.full(n_trials, 1.01 * eps_gap)"
    ),
    # q5: the range 1/pi of the terms forgotten (the bound 1 - alpha^(1/n) of pi = 1)
    "n_min = int(np.ceil(np.log(0.1) / np.log(1 - 0.25 * 0.1)))": "n_min = int(np.ceil(np.log(0.1) / np.log(1 - 0.1)))",
}
WRONG = {"q1": 1, "q2": 3, "q3": 1, "q4": 0, "q5": 0}
#: The expected values, as a feedback would print them: none may appear in what a student gets back.
EXPECTED_VALUES = {
    "q1": stats.norm.ppf(0.95) * np.sqrt(0.06 * (1 - 0.4 * 0.06) / 500),
    "q2": 0.2 * 0.6 / 0.8,
    "q3": stats.norm.cdf(-stats.norm.ppf(0.90) / np.sqrt(2)),
    "q4": 0.975,
    "q5": 91,
}


def test_the_hidden_values_are_the_lessons_answers():
    """The hidden tests compute the expected values from the lessons' formulas with numbers of their own: no
    graded value is one a lesson's solution prints (a student with the repository could copy it); the library
    agrees."""
    from gpac_utils import bounds

    source = homework.SOURCE.read_text()
    assert "stats.norm.cdf(-stats.norm.ppf(0.90) / np.sqrt(2))" in source
    assert abs(EXPECTED_VALUES["q3"] - 0.1824) < 5e-5  # alpha = 0.10; the lesson's 12.24 % is at alpha = 0.05
    lessons = {  # the homework's former values, the lessons' numbers (Q2-Q5: what their solutions print)
        "q1": stats.norm.ppf(0.95) * np.sqrt(0.04 * 0.98 / 400),
        "q2": 0.05 / 0.9,
        "q3": stats.norm.cdf(-stats.norm.ppf(0.95) / np.sqrt(2)),
        "q4": 0.99,
        "q5": 59,
    }
    assert not any(np.isclose(EXPECTED_VALUES[q], v, rtol=1e-2) for q, v in lessons.items())
    # q5, new numbers (pi = 0.25, eps = alpha = 0.1): the library's Hoeffding-Bentkus bound of n loss-free
    # terms of range 1/pi = 4 first reaches eps at 91 (not the 59 of the lessons)
    assert "expected = int(np.ceil(np.log(0.1) / np.log(1 - 0.25 * 0.1)))" in source
    assert int(np.ceil(np.log(0.1) / np.log(1 - 0.25 * 0.1))) == EXPECTED_VALUES["q5"]
    hb = {
        n: bounds.ucb("hoeffding_bentkus", np.zeros(n), np.linspace(0, 1, n), np.ones(1), 0.1, 4.0)[0] for n in (90, 91)
    }
    assert hb[90] > 0.1 >= hb[91]
    assert "59" not in source


def _shown_text(source) -> str:
    """What a student reads of the assignment source: its markdown and code cells (otter drops the raw ones)."""
    return "\n".join(c.source for c in jupytext.read(source).cells if c.cell_type != "raw")


def test_the_homework_names_each_exercise_as_the_student_edition_shows_it():
    """'Exercise 3 in notebook `00_quickstart`' is the exercise the question grades, numbered as the student
    edition numbers it (its cell there opens with "**Exercise 3.**"); the labels stay in the config cells."""
    edition = repo_scripts.load("workflow/scripts/student_edition.py")
    found = homework.questions()
    assert list(found) == list(FULL) and all(q["exercise"] for q in found.values())
    cells = [c.source for c in jupytext.read(homework.SOURCE).cells if c.cell_type == "markdown"]
    intro = next(c for c in cells if "| Question |" in c)
    teaching = (REPO_ROOT / "docs" / "teaching.md").read_text().split("\n## Graded homework\n", 1)[1]
    for number, (name, question) in enumerate(found.items(), 1):
        (text,) = [c for c in cells if c.startswith(f"**Question {number} ")]
        (ref,) = homework.EXERCISE_REF.findall(text)
        row = next(line for line in intro.splitlines() if line.startswith(f"| {number} |"))
        assert homework.EXERCISE_REF.findall(row) == [ref], (name, row)
        taught = next(line for line in teaching.splitlines() if line.startswith(f"| {number}: "))
        assert homework.EXERCISE_REF.findall(taught) == [ref], (name, taught)
        path = REPO_ROOT / "notebooks" / f"{ref[1]}.py"
        assert edition.exercise_labels(path).index(question["exercise"]) + 1 == int(ref[0]), (name, ref)
        (source,) = [c.source for c in jupytext.read(path).cells if f":label: {question['exercise']}\n" in c.source]
        shown = [c.source for c in edition.student_notebook(path).cells if c.cell_type == "markdown"]
        assert edition._plain_exercise(source, int(ref[0])) in shown, (name, ref)
        assert f"**Exercise {ref[0]}.**" in edition._plain_exercise(source, int(ref[0]))
    text = _shown_text(homework.SOURCE)
    assert not re.search(r"\bex-[a-z]", text), re.findall(r"\bex-[\w-]+", text)
    assert len(homework.EXERCISE_REF.findall(text)) == 2 * len(FULL)  # the intro's table and each question


def _otter_output(name: str, failed: dict[int, str]) -> str:
    """otter's output for one question (results.json) whose checks ``failed`` ({number: hint}) failed."""
    return f"{name} results:\n" + "".join(
        f"    {name} - {k} message: {hint}\n\n    {name} - {k} result:\n        ❌ Test case failed\n\n"
        for k, hint in failed.items()
    )


def test_a_blank_answer_gets_the_public_hints_and_not_the_near_solution_ones():
    """Feedback gives the form check's hint always; the other checks' hints (the public ones assume an answer of
    the right form, the hidden ones come near the solution) only once the answer passes the form check (a blank
    one never does: a blank Q4 once got 'the mean of your risks is above eps')."""
    found = homework.questions()
    for name, question in found.items():
        checks = question["checks"]
        assert not checks[0]["hidden"] and any(c["hidden"] for c in checks), name  # the form check is public
    # a blank submission fails every check (as otter grades the notebook handed out: every answer ...)
    blank = {
        "tests": [
            {
                "name": name,
                "score": 0,
                "max_score": FULL[name],
                "output": _otter_output(name, {c["number"]: c["message"] for c in q["checks"]}),
            }
            for name, q in found.items()
        ]
    }
    text = homework.feedback("carol", blank)
    assert "0 of 10 points." in text and text.count(homework.WITHHELD) == len(FULL)
    teaching = re.sub(r"\s+", " ", (REPO_ROOT / "docs" / "teaching.md").read_text())
    assert f'the line "{homework.WITHHELD.split(" (")[0]}"' in teaching  # the page quotes the line
    for question in found.values():  # the form check's hint alone, public or hidden the others wait (issue 50)
        for number, check in enumerate(question["checks"], 1):
            assert (check["message"] in text) is (number == 1), check
    for section, question in zip(text.split("\n## ")[1:], found.values()):  # the form check's hint comes first
        assert section.split("\n")[1:3] == [f"* {question['checks'][0]['message']}", f"* {homework.WITHHELD}"]
    # the same failures but the form check passed (a wrong answer of the right form): every hint comes
    for test in blank["tests"]:
        checks = found[test["name"]]["checks"]
        test["output"] = _otter_output(test["name"], {c["number"]: c["message"] for c in checks[1:]})
    text = homework.feedback("dave", blank)
    assert homework.WITHHELD not in text
    assert all(c["message"] in text for q in found.values() for c in q["checks"][1:])
    assert not any(q["checks"][0]["message"] in text for q in found.values())


def test_grader_check_passes_nothing_on_a_blank_answer():
    """grader.check on a blank answer (``...``, as handed out): every public check fails, none shows a green tick
    (issue 50); the form check (each question's first) with its hint, the others saying that they wait for it
    (their hints state what the answer must satisfy, true of a blank one too); on the solution's answers every
    public check passes."""
    import inspect

    cells = [c.source for c in jupytext.read(homework.SOURCE).cells if c.cell_type == "code"]
    tests: dict[str, list] = {}
    for source in cells:
        if "def test_q" in source and "hidden: true" not in source:
            space: dict = {}
            exec(source, space)
            (fn,) = [v for k, v in space.items() if k.startswith("test_q")]
            tests.setdefault(fn.__name__.split("_")[1], []).append(fn)
    solution: dict = {}
    exec("\n".join(c for c in cells if "def test_q" not in c and "grader" not in c), solution)
    assert set(tests) == set(FULL)
    for name, (form, *others) in tests.items():
        assert others, name  # every question has a public check beside its form check
        blank = lambda fn: fn(**dict.fromkeys(inspect.signature(fn).parameters, ...))  # noqa: E731
        with pytest.raises((AssertionError, TypeError)):  # a blank answer is not of the right form
            blank(form)
        for fn in others:
            with pytest.raises(AssertionError, match=rf"^waits for {name} - 1 \(the form check\)"):
                blank(fn)
        for fn in (form, *others):
            fn(**{k: solution[k] for k in inspect.signature(fn).parameters})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    pytest.importorskip("otter", reason="otter-grader is missing: the `homework` extra (make test installs it)")
    # otter's own run of the tests on the solutions is skipped: the documented commands below run it
    return homework.build(tmp_path_factory.mktemp("homework"), check_solutions=False)


def test_the_student_notebook_holds_no_solution_and_no_hidden_test(built):
    text = built["student"].read_text()
    labels = [q["exercise"] for q in homework.questions().values()]
    for solution_or_test in [*MISTAKES, "expected =", "hidden=True", "# SOLUTION", "BEGIN QUESTION", *labels]:
        assert solution_or_test not in text, f"the student notebook shows {solution_or_test!r}"
    nb = nbformat.read(built["student"], as_version=4)
    checks = [cell.source for cell in nb.cells if cell.cell_type == "code" and cell.source.startswith("grader.check")]
    assert checks == [f'grader.check("{name}")' for name in FULL]  # each question's public checks, for the student
    assert jupytext.read(homework.SOURCE).metadata["kernelspec"]["name"] == "python3"


@pytest.mark.slow
def test_the_public_checks_catch_the_typical_mistakes_before_submission(built, tmp_path):
    """The student's notebook, filled in with the four mistakes and run: grader.check flags exactly those."""
    from nbclient import NotebookClient

    nb = homework.fill_in(nbformat.read(built["student"], as_version=4), homework.answer_lines(MISTAKES))
    assert "..." not in "".join(c.source for c in nb.cells if c.cell_type == "code")
    shutil.copytree(built["student"].parent, tmp_path / "student")
    path = tmp_path / "student" / built["student"].name
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    shown = {}
    for cell in nb.cells:
        m = re.fullmatch(r'grader.check\("(q\d)"\)', cell.source)
        if m:
            shown[m.group(1)] = "".join(
                o.get("data", {}).get("text/plain", "") + o.get("text", "") for o in cell.outputs
            )
    assert set(shown) == set(FULL)
    for q, text in shown.items():
        passed = "All test cases passed!" in text
        assert passed == (WRONG[q] == FULL[q]), f"{q}: the public checks {'pass' if passed else 'fail'}:\n{text}"
        if not passed:
            assert "message:" in text, f"{q}: a failed public check gives no hint:\n{text}"


@pytest.mark.parametrize("first_error", [homework.KERNEL_TIMEOUT + " 60 seconds", "SyntaxError: invalid syntax"])
def test_a_kernel_that_did_not_start_is_graded_again_once_and_other_failures_are_not(
    first_error, tmp_path, monkeypatch, capsys
):
    """otter run's kernel start timing out on a busy machine: one more try, said so; any other failure: an error."""
    calls = []

    def run(cmd, **kwargs):
        calls.append(cmd)
        if len(calls) == 1:
            return subprocess.CompletedProcess(cmd, 1, "", f"Traceback ...\nRuntimeError: {first_error}\n")
        (tmp_path / "out" / "results.json").write_text('{"tests": []}')
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(homework.subprocess, "run", run)
    if first_error.startswith(homework.KERNEL_TIMEOUT):
        assert homework._otter_run(tmp_path / "bob.ipynb", tmp_path / "a.zip", tmp_path / "out") == {"tests": []}
        assert len(calls) == 2 and calls[0] == calls[1]
        assert "bob.ipynb: its kernel did not start in 60 s" in capsys.readouterr().err
    else:
        with pytest.raises(RuntimeError, match="otter run failed on bob.ipynb"):
            homework._otter_run(tmp_path / "bob.ipynb", tmp_path / "a.zip", tmp_path / "out")
        assert len(calls) == 1


# ---- the documented commands, verbatim ---------------------------------------------------------------------


def _documented_commands() -> list[str]:
    """The bash blocks of docs/teaching.md's grading section, and the Makefile's by-hand command for NAME."""
    page = (REPO_ROOT / "docs" / "teaching.md").read_text()
    section = page.split("\n## Graded homework\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    makefile = (REPO_ROOT / "Makefile").read_text()
    by_hand = re.search(r"^# submission:\s+(mkdir -p \S+ &&)\n#\s+(\.venv/bin/otter run .*)$", makefile, re.M)
    assert len(blocks) == 3 and by_hand, "the grading section holds three bash blocks; the Makefile one command"
    return [*blocks, f"{by_hand.group(1)} {by_hand.group(2)}".replace("NAME", "alice")]


def _fresh_copy(dest: Path) -> Path:
    """The repository's files (tracked and untracked, not ignored) in ``dest``, with no build/, and a .venv
    that is this interpreter's environment (its entries linked, its stamp newer than every file)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = REPO_ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dest / rel)
    venv = dest / ".venv"
    venv.mkdir()
    for entry in Path(sys.prefix).iterdir():
        if entry.name != ".installed":
            (venv / entry.name).symlink_to(entry)
    (venv / ".installed").touch()
    return dest


# In the teaching kit's tier (make test-lesson), beside the main suite: a minute of CPU (otter's grading of a copy).
@pytest.mark.slow
@pytest.mark.lesson
def test_the_documented_grading_commands_run_verbatim(built, tmp_path):
    if shutil.which("make") is None:
        pytest.skip("no make")
    root = _fresh_copy(tmp_path / "clone")
    assert not (root / "build").exists()
    (root / "submissions").mkdir()
    shutil.copy(built["solution"], root / "submissions" / "alice.ipynb")
    nb = nbformat.read(built["solution"], as_version=4)
    for old, new in MISTAKES.items():
        (cell,) = [cell for cell in nb.cells if cell.cell_type == "code" and old in cell.source]
        cell.source = cell.source.replace(old, new)
    nbformat.write(nb, root / "submissions" / "bob.ipynb")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS", "GPAC_"))}
    for command in _documented_commands():
        # otter's loop over the folder finds bob alone (alice, graded by make grade before, is graded again by the
        # by-hand command after it): each command grades, no submission is graded twice by the same command kind
        loop = command.startswith("for f in submissions/")
        if loop:
            (root / "submissions" / "alice.ipynb").rename(root / "alice.ipynb")
            bob = root / "build" / "homework" / "results" / "bob" / "results.json"
            graded = bob.stat().st_mtime_ns
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", command], cwd=root, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, f"{command}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        if loop:
            (root / "alice.ipynb").rename(root / "submissions" / "alice.ipynb")
            assert bob.stat().st_mtime_ns != graded, "otter's loop did not grade bob again"

    results = root / "build" / "homework" / "results"
    grades = pd.read_csv(root / "build" / "homework" / "grades.csv")
    assert list(grades.columns) == ["student", *FULL, "total"]
    assert grades.set_index("student").drop(columns="total").to_dict("index") == {
        "alice": FULL,
        "bob": WRONG,
    }
    assert grades.set_index("student")["total"].to_dict() == {"alice": 10, "bob": 5}
    for name, expected in {"alice": FULL, "bob": WRONG}.items():
        scores = json.loads((results / name / "results.json").read_text())["tests"]
        assert {t["name"]: t["score"] for t in scores if t["name"] in FULL} == expected
        assert {t["name"]: t["max_score"] for t in scores if t["name"] in FULL} == FULL

    feedback = (results / "bob" / "feedback.md").read_text()
    assert "5 of 10 points." in feedback and "## q2: 3 of 3\n* every check passed" in feedback
    assert feedback.count("\n* ") - 1 == 9  # the hints of the 9 failed checks (q1: 2, q3: 2, q4: 3, q5: 2)
    returned = feedback + (results / "bob" / "results.json").read_text()
    for q, value in EXPECTED_VALUES.items():
        shown = {f"{value:.{d}f}" for d in (2, 3, 4, 5)} | {repr(value)} if isinstance(value, float) else {str(value)}
        for text in shown:
            assert text not in returned, f"the feedback shows {q}'s expected value {text}"


def test_the_teaching_page_states_the_points_and_scores_graded_here():
    page = re.sub(r"\s+", " ", (REPO_ROOT / "docs" / "teaching.md").read_text())
    rows = dict(re.findall(r"\| (\d): [^|]+ \| (\d) \| \d \|", page))
    assert {f"q{k}": int(v) for k, v in rows.items()} == FULL
    total, kept = sum(FULL.values()), sum(WRONG.values())
    assert f"({total} of {total} points)" in page and f"which keeps exactly {kept} of {total}" in page
    assert "notebooks/homework/gpac_homework.py" in page and "make homework" in page and "make grade" in page
