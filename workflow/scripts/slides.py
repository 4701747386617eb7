"""The lecture slides: one reveal.js deck per session of docs/teaching.md (``make slides``).

    python workflow/scripts/slides.py [--out build/slides]

The sessions and their lecture parts are read from docs/teaching.md: each ``### Session N — title``
heading opens a session, and each table row whose part begins with "Lecture" names its notebook
(``{doc}`notebooks/NN_name```). A deck holds, per lecture part, a title slide and then what the
notebook marks for slides with jupytext's ``slideshow`` cell metadata
(``# %% [markdown] slideshow={"slide_type": "slide"}``), in notebook order:

* a marked **markdown** cell gives one slide with only what a lecturer shows: its first heading
  (or its bold lead-in, or the section heading above it) as the title, then, up to a second
  heading, its lists, its display math (``$$ ... $$``) and its short paragraphs that hold math
  (:data:`SHORT` characters at most); other prose stays in the notebook. MyST roles are reduced
  to their text.
* a marked **code** cell gives one slide with the committed figure it writes
  (``savefig(fig, "NAME")`` or ``show(fig, "NAME")`` with ``figures/NAME.png`` committed), under
  the section heading above it (and the bold lead-in of the markdown cell just above, if any): the
  slides never execute a notebook.

Then the part's self-check questions (``notebooks/questions/NN_name.json``, the ones the notebook
shows with jupyterquiz), one slide each, the answer and its why as a fragment revealed on click.

nbconvert's ``SlidesExporter`` renders each deck with the template ``docs/_slides/templates/gpac_reveal``
(nbconvert's reveal template without any CDN) and ``--SlidesExporter.reveal_url_prefix=reveal.js``.
The output folder is self-contained and works offline: ``session-N.html``, ``reveal.js/`` (the npm
package pinned in docs/_slides/package-lock.json), ``mathjax/`` (docs/_mathjax's) and ``figures/``
(the PNGs the decks show), and ``slides.json`` (the slide count of each deck).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import nbformat

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO_ROOT / "notebooks"
QUESTIONS = NOTEBOOKS / "questions"
FIGURES = REPO_ROOT / "figures"
TEACHING = REPO_ROOT / "docs" / "teaching.md"
SLIDES_SRC = REPO_ROOT / "docs" / "_slides"
REVEAL = SLIDES_SRC / "node_modules" / "reveal.js"
MATHJAX = REPO_ROOT / "docs" / "_mathjax" / "node_modules" / "mathjax" / "es5"
TEMPLATE = "gpac_reveal"

_SESSION = re.compile(r"^###\s+Session\s+(\d+)\s+[—-]+\s+(.+?)(?:\s+\(about[^)]*\))?\s*$")
_ROW = re.compile(r"^\|\s*(Lecture[^|]*?)\s*\|[^|]*\|\s*([^|]*?)\s*\|")
_DOC = re.compile(r"\{doc\}`notebooks/(\d\d_[a-z0-9_]+)`")
_ROLE = re.compile(r"\{(?:term|ref|doc|numref|eq)\}`([^`<]*?)\s*(?:<[^>]*>)?`")
_FIGURE_CALL = re.compile(r"""\b(?:savefig|show)\(\s*\w+\s*,\s*["']([A-Za-z0-9_\-]+)["']""")
_LEAD = re.compile(r"^\*\*([^*]+?)\.?\*\*")  # a markdown cell's bold lead-in: **The mechanism.**
_TARGET = re.compile(r"^\([^)]+\)=\s*$")


class SlidesError(ValueError):
    """A deck that cannot be built as declared (a marked cell with nothing to show, a missing figure)."""


@dataclass
class Part:
    """One lecture part of a session: its row text in docs/teaching.md and its notebook."""

    title: str
    notebook: str
    where: str = ""


@dataclass
class Session:
    number: int
    title: str
    parts: list[Part] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"session-{self.number}"


def sessions(teaching: Path = TEACHING) -> list[Session]:
    """The sessions of docs/teaching.md with their lecture parts (rows that begin with "Lecture")."""
    found: list[Session] = []
    for line in teaching.read_text(encoding="utf-8").splitlines():
        if m := _SESSION.match(line):
            found.append(Session(int(m[1]), m[2].strip()))
        elif found and (m := _ROW.match(line)) and (doc := _DOC.search(m[2])):
            found[-1].parts.append(Part(m[1], doc[1], m[2][doc.end() :].strip()))
    if not found or not all(s.parts for s in found):
        raise SlidesError(f"teaching={teaching}: no session with a 'Lecture' row naming a notebook")
    return found


def plain(markdown: str) -> str:
    """MyST markup a slide does not render, reduced to text: roles to their text, targets dropped."""
    lines = [line for line in markdown.split("\n") if not _TARGET.match(line)]
    return _ROLE.sub(lambda m: m[1], "\n".join(lines))


def _blocks(source: str) -> list[str]:
    return [b.strip("\n") for b in re.split(r"\n\s*\n", source) if b.strip()]


def _is_list(block: str) -> bool:
    """A block holding a list (its lead-in line, if any, comes with it)."""
    return any(re.match(r"^\s{0,3}(?:[-*+]|\d+\.)\s", line) for line in block.split("\n"))


def _is_display_math(block: str) -> bool:
    return block.lstrip().startswith("$$")


#: The longest paragraph a slide keeps (a statement with its formula, not an explanation).
SHORT = 240


def _shown(block: str) -> bool:
    """What a slide keeps of a marked cell: lists, display math and short paragraphs that hold math."""
    return _is_list(block) or _is_display_math(block) or ("$" in block and len(block) <= SHORT)


def slide_markdown(source: str, heading: str) -> str:
    """The slide of a marked markdown cell: its first heading as the title (``heading`` without one),
    then its lists, display math and paragraphs holding math, up to a second heading."""
    keep, titled = [], False
    for block in _blocks(plain(source)):
        first, _, rest = block.partition("\n")
        if first.startswith("#"):
            if titled:
                break  # one slide, one section: what follows a second heading stays in the notebook
            keep.append("## " + first.lstrip("#").strip())
            titled = True
            block = rest
        if block.strip() and _shown(block):
            keep.append(block)
    if not titled:
        lead = _LEAD.match(source)
        if lead and keep and keep[0].startswith(lead[0]):  # the lead-in becomes the title
            keep[0] = keep[0][len(lead[0]) :].lstrip()
        keep.insert(0, f"## {lead[1] if lead else heading}")
    return "\n\n".join(keep)


def figure_names(source: str) -> list[str]:
    """The committed figures a code cell writes (``savefig(fig, "NAME")``, ``show(fig, "NAME")``)."""
    return [name for name in _FIGURE_CALL.findall(source) if (FIGURES / f"{name}.png").is_file()]


def _cell(source: str, slide_type: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(source, metadata={"slideshow": {"slide_type": slide_type}})


def _heading(source: str) -> str | None:
    for line in plain(source).split("\n"):
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return None


def notebook_slides(name: str) -> list[nbformat.NotebookNode]:
    """The slides a notebook marks (``slideshow`` metadata), as markdown cells of the deck."""
    path = NOTEBOOKS / f"{name}.py"
    nb = jupytext.read(path)
    heading, lead, out = name, "", []
    for index, cell in enumerate(nb.cells):
        marked = cell.metadata.get("slideshow", {}).get("slide_type") in {"slide", "subslide"}
        if cell.cell_type == "markdown":
            if marked:
                text = slide_markdown(cell.source, heading)
                if len(_blocks(text)) < 2:
                    raise SlidesError(f"{path.name}: cell {index} is marked for slides but has no list or math")
                out.append(_cell(text, "slide"))
            heading = _heading(cell.source) or heading
            lead = m[1] if (m := _LEAD.match(cell.source)) else ""
        elif marked:
            names = figure_names(cell.source)
            if not names:
                raise SlidesError(f"{path.name}: code cell {index} is marked for slides but writes no committed figure")
            images = "\n\n".join(f"![{n}](figures/{n}.png)" for n in names)
            title = f"{heading} — {lead}" if lead else heading
            out.append(_cell(f"## {title}\n\n{images}", "slide"))
        if cell.cell_type == "code":
            lead = ""
    return out


def questions(name: str) -> list[dict]:
    """The self-check questions of a notebook (notebooks/questions/NN_name.json), [] without a file."""
    path = QUESTIONS / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []


def question_slides(name: str) -> list[nbformat.NotebookNode]:
    """One slide per multiple-choice question; the correct answer and its why as a fragment."""
    out = []
    for q in questions(name):
        letters = "ABCDEFGH"
        options = "\n".join(f"- **{letters[i]}.** {a['answer']}" for i, a in enumerate(q["answers"]))
        right = next(i for i, a in enumerate(q["answers"]) if a["correct"])
        why = q["answers"][right]["feedback"]
        out.append(_cell(f"## Check yourself\n\n{q['question']}\n\n{options}", "slide"))
        answer = f'<p class="gpac-answer"><b>Answer {letters[right]}.</b> {why}</p>'
        out.append(_cell(answer, "fragment"))
    return out


def deck(session: Session) -> nbformat.NotebookNode:
    """The deck of one session as a notebook of markdown cells with reveal.js slide metadata."""
    parts = "\n".join(f"- {p.title} (notebook {p.notebook})" for p in session.parts)
    cells = [_cell(f"# Session {session.number} — {session.title}\n\n{parts}", "slide")]
    for part in session.parts:
        nb_title = _heading(jupytext.read(NOTEBOOKS / f"{part.notebook}.py").cells[0].source) or part.notebook
        where = f" ({part.where})" if part.where else ""
        cells.append(_cell(f"# {part.title}\n\n{plain(nb_title)}{where}", "slide"))
        cells += notebook_slides(part.notebook)
        cells += question_slides(part.notebook)
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["title"] = f"Session {session.number} — {session.title}"
    return nb


def slide_count(nb: nbformat.NotebookNode) -> int:
    """The number of slides of a deck (cells that open a slide or a subslide)."""
    return sum(c.metadata["slideshow"]["slide_type"] in {"slide", "subslide"} for c in nb.cells)


def render(nb: nbformat.NotebookNode) -> str:
    """The deck's HTML: nbconvert's SlidesExporter with the offline template."""
    from nbconvert import SlidesExporter
    from traitlets.config import Config

    config = Config()
    config.SlidesExporter.reveal_url_prefix = "reveal.js"
    config.SlidesExporter.reveal_theme = "white"
    config.SlidesExporter.reveal_transition = "none"
    config.SlidesExporter.mathjax_url = "mathjax/tex-mml-chtml.js"
    config.SlidesExporter.embed_images = False
    exporter = SlidesExporter(
        config=config, extra_template_basedirs=[str(SLIDES_SRC / "templates")], template_name=TEMPLATE
    )
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": nb.metadata["title"]}})
    return body


def build(out: Path) -> dict[str, int]:
    """Every session's deck under ``out`` with its assets; returns the slide count per deck."""
    for what, path in (("reveal.js", REVEAL / "dist" / "reveal.js"), ("MathJax", MATHJAX / "tex-mml-chtml.js")):
        if not path.is_file():
            raise SlidesError(f"{what} is not installed ({path}): make slides installs it with npm ci")
    out.mkdir(parents=True, exist_ok=True)
    for sub, src in (("reveal.js/dist", REVEAL / "dist"), ("reveal.js/plugin/notes", REVEAL / "plugin" / "notes")):
        shutil.copytree(src, out / sub, dirs_exist_ok=True)
    shutil.copytree(MATHJAX, out / "mathjax", dirs_exist_ok=True)
    counts = {}
    for session in sessions():
        nb = deck(session)
        for name in re.findall(r"\(figures/([^)]+\.png)\)", "\n".join(c.source for c in nb.cells)):
            (out / "figures").mkdir(exist_ok=True)
            shutil.copy2(FIGURES / name, out / "figures" / name)
        (out / f"{session.name}.html").write_text(render(nb), encoding="utf-8")
        counts[session.name] = slide_count(nb)
    (out / "slides.json").write_text(json.dumps(counts, indent=1) + "\n", encoding="utf-8")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "slides", help="output folder")
    args = parser.parse_args(argv)
    try:
        counts = build(args.out)
    except SlidesError as err:
        print(f"slides: {err}", file=sys.stderr)
        return 1
    for name, n in counts.items():
        print(f"{args.out / name}.html: {n} slides")
    return 0


if __name__ == "__main__":
    sys.exit(main())
