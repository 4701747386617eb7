"""The student edition (``make student``, workflow/scripts/student_edition.py; issue 25, item 4).

Every exercise in the notebooks has a solution marked as docs/teaching.md says (sphinx-exercise's
``solution-start``/``solution-end`` around cells tagged ``solution``); the student edition of every
lesson notebook holds no solution; and it still executes on the fast profile, so no cell after an
exercise depends on what its solution computed.
"""

from __future__ import annotations

import importlib.util
import re

import jupytext
import nbformat
import pytest

from gpac_utils.workflow import runner
from gpac_utils.workflow.paths import NOTEBOOKS, REPO_ROOT

_spec = importlib.util.spec_from_file_location(
    "student_edition", REPO_ROOT / "workflow" / "scripts" / "student_edition.py"
)
edition = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(edition)

LESSONS = edition.lessons()
EXERCISE_LABEL = re.compile(r"^(?::::+|```+)\{exercise\}[^\n]*\n:label: (\S+)", re.MULTILINE)
SOLUTION_START = re.compile(r"\{solution(?:-start)?\} (\S+)")


def _markdown(path) -> str:
    return "\n\n".join(cell.source for cell in jupytext.read(path).cells if cell.cell_type == "markdown")


def _with_solutions(path) -> bool:
    return any(edition.TAG in cell.metadata.get("tags", []) for cell in jupytext.read(path).cells)


def test_the_lessons_are_found():
    assert {path.name[:2] for path in LESSONS} <= set(edition.LESSONS)
    assert any(_with_solutions(path) for path in LESSONS), "no lesson notebook has a tagged solution"


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py")), ids=lambda path: path.stem)
def test_every_exercise_has_one_marked_solution(path):
    text = _markdown(path)
    exercises, solutions = EXERCISE_LABEL.findall(text), SOLUTION_START.findall(text)
    assert sorted(exercises) == sorted(solutions), f"{path.name}: exercises {exercises} vs solutions {solutions}"
    assert len(set(exercises)) == len(exercises), f"{path.name}: an exercise label is used twice"
    edition.student_notebook(path)  # raises when a solution cell lacks the tag, or a tag has no solution


def test_a_solution_without_its_tag_is_refused(tmp_path):
    bad = tmp_path / "99_bad.py"
    bad.write_text(
        "# %% [markdown]\n# :::{exercise}\n# :label: ex-bad\n# Why?\n# :::\n\n"
        "# %% [markdown]\n# ```{solution-start} ex-bad\n# ```\n\n# %%\nanswer = 42\n\n"
        "# %% [markdown]\n# ```{solution-end}\n# ```\n"
    )
    with pytest.raises(edition.EditionError, match="lacks the tag"):
        edition.student_notebook(bad)
    prose = tmp_path / "98_prose.py"
    prose.write_text("# %% [markdown]\n# ```{solution} ex-bad\n# :class: dropdown\n# Because.\n# ```\n")
    with pytest.raises(edition.EditionError, match="lacks the tag"):
        edition.student_notebook(prose)
    prose.write_text(prose.read_text().replace("# %% [markdown]", '# %% [markdown] tags=["solution"]'))
    assert "Because" not in str(edition.student_notebook(prose).cells)


@pytest.mark.parametrize("path", LESSONS, ids=lambda path: path.stem)
def test_no_solution_survives_in_the_student_edition(path, tmp_path):
    assert edition.main([str(path), "--out", str(tmp_path)]) == 0
    nb = nbformat.read(tmp_path / f"{path.stem}.ipynb", as_version=4)
    text = "\n".join(cell.source for cell in nb.cells)
    for marker in ("solution-start", "solution-end", "{exercise}"):
        assert marker not in text, f"{path.name}: {marker!r} survives in the student edition"
    assert not any(edition.TAG in cell.metadata.get("tags", []) for cell in nb.cells)
    n_exercises = len(EXERCISE_LABEL.findall(_markdown(path)))
    assert text.count("**Exercise.**") == n_exercises
    assert text.count("**Your solution.**") == n_exercises
    solution_code = [c.source for c in jupytext.read(path).cells if edition.TAG in c.metadata.get("tags", [])]
    code = {cell.source for cell in nb.cells if cell.cell_type == "code" and cell.source.strip()}
    assert not code & {source for source in solution_code if source.strip()}


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.parametrize("path", [path for path in LESSONS if _with_solutions(path)], ids=lambda path: path.stem)
def test_the_student_edition_executes_on_the_fast_profile(path, tmp_path):
    assert edition.main([str(path), "--out", str(tmp_path / "student")]) == 0
    student = tmp_path / "student" / f"{path.stem}.ipynb"
    try:
        runner.run_notebook(
            student, "fast", None, tmp_path / "run", figures_dir=tmp_path / "figures", progress_bar=False
        )
    except runner.NotebookFailed as exc:
        pytest.fail(f"{path.name}: the student edition fails without its solutions: {exc.reason}")
