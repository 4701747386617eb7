"""The student edition of every notebook with exercises: its solutions and maintainer cells removed (``make student``).

    python workflow/scripts/student_edition.py [--out build/student] [NOTEBOOK ...]

writes ``build/student/NN_name.ipynb`` for each notebook (default: every ``notebooks/NN_name.py``
holding an exercise, found by :func:`with_exercises` in the notebooks themselves: the lessons and
any other notebook a session assigns, such as 21), unexecuted, ready to hand out. The convention
(docs/teaching.md): an exercise is a markdown
cell holding a sphinx-exercise ``{exercise}`` directive with a ``:label:``; its solution is the run
of cells from the markdown cell that opens with ``{solution-start} <label>`` to the markdown cell
holding ``{solution-end}`` (a solution in prose only: one markdown cell holding a ``{solution} <label>``
directive), and every cell of that run carries the cell tag ``solution``
(``# %% [markdown] tags=["solution"]``, ``# %% tags=["solution"]``). Here the tagged cells go, as
nbconvert's ``TagRemovePreprocessor`` with ``remove_cell_tags={"solution"}`` would remove them, and
each removed run becomes one empty code cell under "Your solution"; the exercise directive becomes
plain markdown numbered in the notebook's order ("**Exercise 2.**"), which JupyterLab renders with or
without jupyterlab-myst, and every ``{ref}`` to an exercise label (whose target is gone with the
directive) becomes that number ("Exercise 2", or the reference's own text). A solution marker
outside a tagged cell, a tagged cell outside a solution, or kept prose referring to a label that
only a removed solution defines, is an error: the edition must never leak a solution nor leave a
dangling reference.

Maintainer material goes too: every cell tagged ``maintainer`` (``# %% [markdown] tags=["maintainer"]``)
— what the book and the instructor keep but a student does not need: how a number is made
independent of the BLAS, which test file checks a claim, a cost or complexity note, the cells that
generate the README's paragraph or re-check the run. A kept markdown cell that still holds such
material (:data:`MAINTAINER_MATERIAL`: a test-file path, ``fsum``, BLAS or "complexity") is an error,
as is a maintainer-tagged cell that holds an exercise or a solution.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import jupytext
import nbformat

from gpac_utils.workflow.paths import folder_error

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO_ROOT / "notebooks"
TAG = "solution"
#: The tag of the cells only the book and the instructor keep (docs/teaching.md).
MAINTAINER_TAG = "maintainer"
#: What marks maintainer prose in a kept markdown cell: a test-file path, exactly rounded sums, the BLAS,
#: a complexity note. (Not big-O notation: a rate such as O(n^-1/2) is statistics a student needs.)
MAINTAINER_MATERIAL = re.compile(r"\btests/\w+\.py|\bfsum\b|\bBLAS\b|\bcomplexity\b", re.IGNORECASE)
_DIRECTIVE = re.compile(r"^(?::::+|```+)\{exercise\}.*$")
_OPTION = re.compile(r"^:(?:label|class|nonumber|hidden):.*$")
#: An exercise's label: the ``:label:`` option right under its directive.
_EXERCISE_LABEL = re.compile(r"^(?::::+|```+)\{exercise\}[^\n]*\n:label: (\S+)", re.MULTILINE)
#: A label defined in a cell: a directive's ``:label:`` option or a MyST target ``(name)=``.
_LABEL = re.compile(r"^:label: (\S+)|^\(([\w.-]+)\)=\s*$", re.MULTILINE)
#: A MyST reference, ``{ref}`label``` or ``{ref}`text <label>```, with the word "exercise" before it if any.
_REF = re.compile(r"(\b[Ee]xercise\s+)?\{ref\}`(?:([^`<]*?)\s*<([^`>]+)>|([^`<>]+))`")


class EditionError(ValueError):
    """A notebook whose solution markup is inconsistent (a solution would leak or be lost)."""


def exercise_labels(path: Path) -> list[str]:
    """The labels of the exercises of the notebook at ``path``, in order."""
    cells = jupytext.read(path).cells
    return [label for cell in cells if cell.cell_type == "markdown" for label in _EXERCISE_LABEL.findall(cell.source)]


def with_exercises(folder: Path = NOTEBOOKS) -> list[Path]:
    """The notebooks ``NN_name.py`` of ``folder`` that hold at least one exercise, in number order."""
    return [path for path in sorted(folder.glob("[0-9][0-9]_*.py")) if exercise_labels(path)]


def maintainer_material(source: str) -> list[str]:
    """The pieces of ``source`` that mark maintainer material (:data:`MAINTAINER_MATERIAL`), in order."""
    return [match[0] for match in MAINTAINER_MATERIAL.finditer(source)]


def _plain_exercise(source: str, number: int) -> str:
    """A sphinx-exercise ``{exercise}`` directive as plain markdown for JupyterLab: "**Exercise <number>.**"."""
    lines, out, inside = source.split("\n"), [], False
    for line in lines:
        if _DIRECTIVE.match(line):
            inside = True
            out.append(f"**Exercise {number}.**")
        elif inside and _OPTION.match(line):
            continue
        elif inside and re.fullmatch(r":::+|```+", line.strip()):
            inside = False
        else:
            out.append(line)
    return "\n".join(out)


def _resolve_refs(source: str, numbers: dict[str, int], removed: set[str], name: str) -> str:
    """``source`` with each ``{ref}`` to an exercise label written as its number (see the module docstring)."""

    def plain(match: re.Match) -> str:
        text, label = (match[2], match[3]) if match[3] else (None, match[4].strip())
        if label in numbers:  # "exercise {ref}`ex-a`" reads "Exercise 2", not "exercise Exercise 2"
            return (match[1] or "") + text if text else f"Exercise {numbers[label]}"
        if label in removed:
            raise EditionError(f"{name}: a kept cell refers to {label!r}, which only a removed cell defines")
        return match[0]

    return _REF.sub(plain, source)


def student_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path`` with its solutions and maintainer material removed (see the module docstring)."""
    nb = jupytext.read(path)
    numbers = {label: k for k, label in enumerate(exercise_labels(path), start=1)}
    cells, inside, removed, n_seen = [], False, set(), 0
    for index, cell in enumerate(nb.cells):
        if MAINTAINER_TAG in cell.metadata.get("tags", []):
            if "{exercise}" in cell.source or "{solution" in cell.source or TAG in cell.metadata["tags"]:
                raise EditionError(f"{path.name}: cell {index} is tagged {MAINTAINER_TAG!r} but holds an exercise")
            if cell.cell_type == "markdown":
                removed.update(a or b for a, b in _LABEL.findall(cell.source))
            continue
        tagged = TAG in cell.metadata.get("tags", [])
        whole = "{solution}" in cell.source  # a solution in prose only: one directive, one cell
        starts, ends = "{solution-start}" in cell.source or whole, "{solution-end}" in cell.source or whole
        if (starts or ends or inside) and not tagged:
            raise EditionError(f"{path.name}: cell {index} is part of a solution but lacks the tag {TAG!r}")
        if tagged and not (starts or inside):
            raise EditionError(f"{path.name}: cell {index} is tagged {TAG!r} but no solution-start opens it")
        if starts:
            inside = True
            cells += [
                nbformat.v4.new_markdown_cell(
                    "**Your solution.** (Worked solution: the book, or the instructor's edition.)"
                ),
                nbformat.v4.new_code_cell(""),
            ]
        if tagged and ends:
            inside = False
        if tagged:
            removed.update(a or b for a, b in _LABEL.findall(cell.source) if cell.cell_type == "markdown")
        else:
            if cell.cell_type == "markdown" and "{exercise}" in cell.source:
                n_seen += 1
                cell.source = _plain_exercise(cell.source, n_seen)
            cells.append(cell)
    if inside:
        raise EditionError(f"{path.name}: a solution-start without its solution-end")
    for cell in cells:
        if cell.cell_type == "markdown":
            cell.source = _resolve_refs(cell.source, numbers, removed - set(numbers), path.name)
            found = maintainer_material(cell.source)
            if found:
                raise EditionError(
                    f"{path.name}: a kept markdown cell holds maintainer material {found[0]!r}: "
                    f"tag it {MAINTAINER_TAG!r} or move it to the docs"
                )
    nb.cells = cells
    return nb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="student_edition.py", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "notebooks", nargs="*", type=Path, help="notebooks/NN_name.py (default: every notebook with exercises)"
    )
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "student")
    args = ap.parse_args(argv)
    problem = folder_error("--out", args.out)
    if problem:  # a usage error (exit 2), before any notebook is read
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        for path in args.notebooks or with_exercises():
            out = args.out / f"{path.stem}.ipynb"
            nbformat.write(student_notebook(path), out)
            print(f"wrote {out}")
    except (EditionError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
