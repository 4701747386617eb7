"""The student edition of the lesson notebooks: every cell tagged ``solution`` removed (``make student``).

    python workflow/scripts/student_edition.py [--out build/student] [NOTEBOOK ...]

writes ``build/student/NN_name.ipynb`` for each lesson notebook (default: :data:`LESSONS` that
exist), unexecuted, ready to hand out. The convention (docs/teaching.md): an exercise is a markdown
cell holding a sphinx-exercise ``{exercise}`` directive with a ``:label:``; its solution is the run
of cells from the markdown cell that opens with ``{solution-start} <label>`` to the markdown cell
holding ``{solution-end}`` (a solution in prose only: one markdown cell holding a ``{solution} <label>``
directive), and every cell of that run carries the cell tag ``solution``
(``# %% [markdown] tags=["solution"]``, ``# %% tags=["solution"]``). Here the tagged cells go, as
nbconvert's ``TagRemovePreprocessor`` with ``remove_cell_tags={"solution"}`` would remove them, and
each removed run becomes one empty code cell under "Your solution"; the exercise directive becomes
plain markdown ("**Exercise.**"), which JupyterLab renders. A solution marker outside a tagged cell,
or a tagged cell outside a solution, is an error: the edition must never leak a solution.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import jupytext
import nbformat

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO_ROOT / "notebooks"
#: The lesson notebooks (issue 25): the ones a course hands out.
LESSONS = ("00", "10", "11", "12", "13", "31", "32", "33")
TAG = "solution"
_DIRECTIVE = re.compile(r"^(?::::+|```+)\{exercise\}.*$")
_OPTION = re.compile(r"^:(?:label|class|nonumber|hidden):.*$")


class EditionError(ValueError):
    """A notebook whose solution markup is inconsistent (a solution would leak or be lost)."""


def lessons(folder: Path = NOTEBOOKS) -> list[Path]:
    """The lesson notebooks that exist, in number order."""
    return sorted(path for path in folder.glob("[0-9][0-9]_*.py") if path.name[:2] in LESSONS)


def _plain_exercise(source: str) -> str:
    """A sphinx-exercise ``{exercise}`` directive as plain markdown for JupyterLab."""
    lines, out, inside = source.split("\n"), [], False
    for line in lines:
        if _DIRECTIVE.match(line):
            inside = True
            out.append("**Exercise.**")
        elif inside and _OPTION.match(line):
            continue
        elif inside and re.fullmatch(r":::+|```+", line.strip()):
            inside = False
        else:
            out.append(line)
    return "\n".join(out)


def student_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path`` with its solutions removed (see the module docstring)."""
    nb = jupytext.read(path)
    cells, inside = [], False
    for index, cell in enumerate(nb.cells):
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
        if not tagged:
            if cell.cell_type == "markdown" and "{exercise}" in cell.source:
                cell.source = _plain_exercise(cell.source)
            cells.append(cell)
    if inside:
        raise EditionError(f"{path.name}: a solution-start without its solution-end")
    nb.cells = cells
    return nb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="student_edition.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*", type=Path, help="notebooks/NN_name.py (default: the lessons)")
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "student")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        for path in args.notebooks or lessons():
            out = args.out / f"{path.stem}.ipynb"
            nbformat.write(student_notebook(path), out)
            print(f"wrote {out}")
    except (EditionError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
