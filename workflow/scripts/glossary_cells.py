"""Each notebook's glossary cell, for JupyterLab: the entries of docs/glossary.md that the notebook links.

    python workflow/scripts/glossary_cells.py           # rewrite the cells
    python workflow/scripts/glossary_cells.py --check   # exit 1 if a cell is missing or out of date

The notebooks link a term as the book does, ``{term}`risk```. Sphinx resolves it to the glossary page;
jupyterlab-myst sees one notebook at a time, so a term defined in another file is an unresolved
reference, which it renders as ``<a href="#">``: the link goes nowhere and clicking it jumps the notebook
to the top. So every notebook that links a term holds one markdown cell, tagged ``remove-cell`` (the
book drops it: myst-nb skips such cells, and the glossary page stays the one definition), holding a
MyST ``glossary`` of the entries it links (and the entries those link), copied from docs/glossary.md: in
JupyterLab each term then shows its definition on hover and jumps to its entry on a click.

The cell is the notebook's second, right after its title cell, not its last. JupyterLab (4.1 and later)
attaches the cells of a notebook to the page one after another, top first, while the browser is idle
(its default ``windowingMode``, ``contentVisibility``), and jupyterlab-myst resolves a cell's references
against the cells attached so far: with the entries at the end, every cell that links a term was
rendered before its targets existed, logged "Cross reference target was not found" and showed links to
``#`` until the last cell was attached (seconds for a long lesson). Before the cells that link, the
entries are there when those cells render; a ``{ref}`` to a later cell of the notebook has the same
problem, and ``tests/test_jupyterlab.py`` refuses one. ``tests/test_jupyterlab.py`` checks that the
cells are current and that the links resolve in JupyterLab as it ships (with windowing).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = REPO_ROOT / "docs" / "glossary.md"
NOTEBOOKS = REPO_ROOT / "notebooks"
TAG = "remove-cell"
HEADER = f'# %% [markdown] tags=["{TAG}"]\n# ## Terms used in this notebook\n'
INTRO = (
    "The glossary entries this notebook links (copied from `docs/glossary.md` by\n"
    "`workflow/scripts/glossary_cells.py`; edit them there). Below, hover over a linked term for its\n"
    "definition; a click brings you here.\n"
)
#: a cell of a jupytext percent notebook starts with this line
CELL = "# %%"
TERM = re.compile(r"\{term\}`(?:[^`<]*<)?([^`>]+)>?`", re.S)
#: other roles in a definition (a {ref} to another notebook, {py:data} to the API pages: neither resolves
#: here): their text is kept, as inline code for the ``py:`` roles
OTHER_ROLE = re.compile(r"\{(?!term\})([a-z]+(?::[a-z]+)?)\}`(?:([^`<]*?)\s*<[^`>]+>|([^`]+))`")


def entries(glossary: Path | str = GLOSSARY) -> dict[str, str]:
    """{term: definition (its lines, indentation removed)} of the glossary directive, in its order
    (``glossary``: the page, or its text)."""
    text = glossary.read_text() if isinstance(glossary, Path) else glossary
    block = re.search(r"^```\{glossary\}\n(.*?)^```$", text, re.S | re.M).group(1)
    found: dict[str, list[str]] = {}
    term = None
    for line in block.splitlines():
        if line and not line.startswith(" "):
            term = line.strip()
            found[term] = []
        elif term is not None:
            found[term].append(line[2:] if line.startswith("  ") else line.strip())
    return {t: "\n".join(lines).strip() for t, lines in found.items()}


def _key(term: str) -> str:
    return " ".join(term.lower().split())


def linked_terms(text: str) -> set[str]:
    """The glossary terms ``text`` links (normalised: lower case, single spaces)."""
    return {_key(re.sub(r"\n#\s*", " ", m.group(1))) for m in TERM.finditer(text)}


def cell(notebook_text: str, glossary: dict[str, str]) -> str:
    """The glossary cell of a notebook (jupytext percent format); empty when it links no term."""
    by_key = {_key(t): t for t in glossary}
    wanted, todo = set(), linked_terms(notebook_text)
    while todo:  # the entries the linked entries link, too
        key = todo.pop()
        if key not in by_key:
            raise ValueError(f"{{term}}`{key}` is not an entry of {GLOSSARY.relative_to(REPO_ROOT)}")
        wanted.add(key)
        todo |= linked_terms(glossary[by_key[key]]) - wanted
    if not wanted:
        return ""
    lines = [*INTRO.splitlines(), "", ":::{glossary}"]
    for term in glossary:
        if _key(term) in wanted:
            body = OTHER_ROLE.sub(_role_text, glossary[term]).splitlines()
            lines += [term, f": {body[0]}", *[f"  {line}" if line else "" for line in body[1:]], ""]
    lines[-1] = ":::"
    return HEADER + "#\n" + "".join(f"# {line}\n" if line else "#\n" for line in lines)


def _role_text(match: re.Match) -> str:
    text = match.group(2) or match.group(3)
    return f"`{text}`" if match.group(1).startswith("py:") else text


def _cell_starts(text: str) -> list[int]:
    """The offsets of the cell markers (``# %%`` at a line start) of a percent-format notebook."""
    return [m.start() for m in re.finditer(rf"^{re.escape(CELL)}", text, re.M)]


def _strip(text: str) -> str:
    """The notebook without its glossary cell (wherever it is: after the title cell, or last as before)."""
    start = text.find("\n\n" + HEADER)
    if start < 0:
        return text
    later = [i for i in _cell_starts(text) if i > start + 2]
    if not later:
        return text[:start] + "\n"
    return text[:start] + "\n\n" + text[later[0] :]


def updated(text: str, glossary: dict[str, str]) -> str:
    """``text`` with its glossary cell current and in place: the second cell, right after the title cell."""
    body = _strip(text)
    new = cell(body, glossary)
    if not new:
        return body
    starts = _cell_starts(body)
    if not starts:
        raise ValueError("not a percent-format notebook: no cell starts with '# %%'")
    if len(starts) == 1:
        return body + "\n" + new
    at = starts[1]
    return body[:at] + new + "\n" + body[at:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="glossary_cells.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only report the notebooks whose cell is not current")
    args = ap.parse_args(argv)
    glossary = entries()
    stale = []
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py")):
        text = path.read_text()
        new = updated(text, glossary)
        if new != text:
            stale.append(path.name)
            if not args.check:
                path.write_text(new)
    verb = "out of date" if args.check else "rewritten"
    print(f"glossary cells {verb}: {', '.join(stale) or 'none'}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
