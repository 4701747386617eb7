"""The student edition (``make student``, workflow/scripts/student_edition.py; issue 25, item 4).

Every exercise in the notebooks has a solution marked as docs/teaching.md says (sphinx-exercise's
``solution-start``/``solution-end`` around cells tagged ``solution``); the student edition covers
every notebook that has exercises (found in the notebooks, not listed by hand), holds no solution
and no reference to a label it removed. That it still executes on the fast profile (no cell after an
exercise depends on what its solution computed) is checked where students run it: in the light install,
``tests/test_lesson_install.py``.

It carries no maintainer material either (issue 50): no cell tagged ``maintainer``, and no prose that
names a test file, ``fsum``, the BLAS or "complexity" — the cells that say how a
number is made BLAS-independent, which test checks a claim, or that write the README's paragraph.
"""

from __future__ import annotations

import re

import jupytext
import nbformat
import pytest
import repo_scripts

from gpac_utils.workflow.paths import NOTEBOOKS

edition = repo_scripts.load("workflow/scripts/student_edition.py")

NOTEBOOK_FILES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
WITH_EXERCISES = edition.with_exercises()
EXERCISE_LABEL = re.compile(r"^(?::::+|```+)\{exercise\}[^\n]*\n:label: (\S+)", re.MULTILINE)
SOLUTION_START = re.compile(r"\{solution(?:-start)?\} (\S+)")


def _markdown(path) -> str:
    return "\n\n".join(cell.source for cell in jupytext.read(path).cells if cell.cell_type == "markdown")


def test_every_notebook_with_an_exercise_gets_a_student_edition():
    by_hand = [path for path in NOTEBOOK_FILES if "{exercise}" in _markdown(path)]
    assert WITH_EXERCISES == by_hand
    # the eight lessons and notebook 21, whose exercises Session 2 assigns (docs/teaching.md)
    assert {"00", "10", "11", "12", "13", "21", "31", "32", "33", "36"} <= {path.name[:2] for path in WITH_EXERCISES}


@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=lambda path: path.stem)
def test_every_exercise_has_one_marked_solution(path):
    text = _markdown(path)
    exercises, solutions = EXERCISE_LABEL.findall(text), SOLUTION_START.findall(text)
    assert sorted(exercises) == sorted(solutions), f"{path.name}: exercises {exercises} vs solutions {solutions}"
    assert len(set(exercises)) == len(exercises), f"{path.name}: an exercise label is used twice"
    edition.student_notebook(path)  # raises when a solution cell lacks the tag, or a tag has no solution


def test_an_out_that_is_a_file_is_a_usage_error(tmp_path, capsys):
    taken = tmp_path / "student.txt"
    taken.write_text("mine")
    for out in (taken, taken / "sub"):
        assert edition.main(["--out", str(out)]) == 2
        [line] = capsys.readouterr().err.strip().splitlines()
        assert line.startswith(f"error: --out {out}: must be a folder")
    assert taken.read_text() == "mine"


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


def test_a_reference_to_an_exercise_becomes_its_number(tmp_path):
    nb = tmp_path / "97_refs.py"
    nb.write_text(
        "# %% [markdown]\n# See {ref}`ex-two` and {ref}`the first one <ex-one>`; {term}`PAC` stays (exercise\n"
        "# {ref}`ex-one`).\n\n"
        + "".join(
            f"# %% [markdown]\n# :::{{exercise}}\n# :label: {label}\n# Why?\n# :::\n\n"
            f'# %% [markdown] tags=["solution"]\n# ```{{solution}} {label}\n# Because.\n# ```\n\n'
            for label in ("ex-one", "ex-two")
        )
    )
    cells = [cell.source for cell in edition.student_notebook(nb).cells]
    assert cells[0] == "See Exercise 2 and the first one; {term}`PAC` stays (Exercise 1)."
    assert [cell.split("\n")[0] for cell in cells if cell.startswith("**Exercise")] == [
        "**Exercise 1.**",
        "**Exercise 2.**",
    ]
    # prose that refers to a target only a solution defines would dangle: refused
    nb.write_text(
        "# %% [markdown]\n# See {ref}`sol-table`.\n\n"
        "# %% [markdown]\n# :::{exercise}\n# :label: ex-one\n# Why?\n# :::\n\n"
        '# %% [markdown] tags=["solution"]\n# ```{solution} ex-one\n# (sol-table)=\n# Because.\n# ```\n'
    )
    with pytest.raises(edition.EditionError, match="sol-table"):
        edition.student_notebook(nb)


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda path: path.stem)
def test_no_solution_survives_in_the_student_edition(path, tmp_path):
    assert edition.main([str(path), "--out", str(tmp_path)]) == 0
    nb = nbformat.read(tmp_path / f"{path.stem}.ipynb", as_version=4)
    text = "\n".join(cell.source for cell in nb.cells)
    for marker in ("solution-start", "solution-end", "{exercise}"):
        assert marker not in text, f"{path.name}: {marker!r} survives in the student edition"
    assert not any(edition.TAG in cell.metadata.get("tags", []) for cell in nb.cells)
    labels = EXERCISE_LABEL.findall(_markdown(path))
    for number in range(1, len(labels) + 1):
        assert text.count(f"**Exercise {number}.**") == 1, (path.name, number)
    assert text.count("**Your solution.**") == len(labels)
    dangling = [label for label in labels if re.search(rf"\{{ref\}}`[^`]*{re.escape(label)}>?`", text)]
    assert not dangling, f"{path.name}: references to removed exercise labels {dangling}"
    solution_code = [c.source for c in jupytext.read(path).cells if edition.TAG in c.metadata.get("tags", [])]
    code = {cell.source for cell in nb.cells if cell.cell_type == "code" and cell.source.strip()}
    assert not code & {source for source in solution_code if source.strip()}


#: Maintainer material in prose, as docs/teaching.md defines it (written out here, not imported, so that
#: a change of the script's pattern cannot loosen the test).
MAINTAINER_PROSE = re.compile(r"\btests/\w+\.py|\bfsum\b|\bBLAS\b|\bcomplexity\b", re.IGNORECASE)


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda path: path.stem)
def test_no_maintainer_material_survives_in_the_student_edition(path, tmp_path):
    assert edition.main([str(path), "--out", str(tmp_path)]) == 0
    nb = nbformat.read(tmp_path / f"{path.stem}.ipynb", as_version=4)
    assert not any(edition.MAINTAINER_TAG in cell.metadata.get("tags", []) for cell in nb.cells)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found = MAINTAINER_PROSE.findall(cell.source)
            assert not found, f"{path.name}: the student edition keeps maintainer prose {found}: {cell.source[:80]!r}"
    headings = {line for cell in nb.cells if cell.cell_type == "markdown" for line in cell.source.splitlines()}
    assert not {"## The README paragraph", "## Checks"} & headings, path.name


def test_the_maintainer_cells_the_issue_names_are_tagged():
    """13's README paragraph and checks (prose and code), 11's note on the BLAS: in the book, not for students."""
    tagged = {
        path.stem: [c for c in jupytext.read(path).cells if edition.MAINTAINER_TAG in c.metadata.get("tags", [])]
        for path in (NOTEBOOKS / "11_partition_gap.py", NOTEBOOKS / "13_validity_audit.py")
    }
    assert any("BLAS" in cell.source and "fsum" in cell.source for cell in tagged["11_partition_gap"])
    audit = [cell.source for cell in tagged["13_validity_audit"]]
    for heading in ("## The README paragraph", "## Checks"):
        at = next(i for i, source in enumerate(audit) if source.startswith(heading))
        assert not audit[at + 1].startswith("#"), f"13: the code cell under {heading!r} is not tagged"


def test_maintainer_cells_go_and_maintainer_prose_is_refused(tmp_path):
    nb = tmp_path / "96_maintainer.py"
    body = (
        "# %% [markdown]\n# :::{exercise}\n# :label: ex-one\n# Why?\n# :::\n\n"
        '# %% [markdown] tags=["solution"]\n# ```{solution} ex-one\n# Because.\n# ```\n\n'
        "# %%\nx = 1\n\n"
    )
    nb.write_text(
        body + '# %% [markdown] tags=["maintainer"]\n# `tests/test_x.py` checks that, with `math.fsum`.\n\n'
        '# %% tags=["maintainer"]\nassert x == 1\n'
    )
    cells = edition.student_notebook(nb).cells
    assert [cell.source for cell in cells if cell.cell_type == "code"] == ["", "x = 1"]
    assert not any("test_x" in cell.source for cell in cells)
    # the same prose without the tag is refused, with the file and what it found
    for prose, found in (
        ("`tests/test_x.py` checks that.", "tests/test_x.py"),
        ("Summed with `math.fsum`.", "fsum"),
        ("The BLAS decides the last digits.", "BLAS"),
        ("Its complexity is linear.", "complexity"),
    ):
        nb.write_text(body + f"# %% [markdown]\n# {prose}\n")
        with pytest.raises(
            edition.EditionError,
            match=re.escape(f"96_maintainer.py: a kept markdown cell holds maintainer material {found!r}"),
        ):
            edition.student_notebook(nb)
    assert edition.main([str(nb), "--out", str(tmp_path / "out")]) == 1
    # a maintainer cell never holds an exercise, and kept prose never refers to a label only it defines
    nb.write_text('# %% [markdown] tags=["maintainer"]\n# :::{exercise}\n# :label: ex-two\n# Why?\n# :::\n')
    with pytest.raises(edition.EditionError, match="tagged 'maintainer' but holds an exercise"):
        edition.student_notebook(nb)
    note = '# %% [markdown] tags=["maintainer"]\n# (maint-note)=\n# A note.\n\n'
    nb.write_text(body + note + "# %% [markdown]\n# See {ref}`maint-note`.\n")
    with pytest.raises(edition.EditionError, match="maint-note"):
        edition.student_notebook(nb)
