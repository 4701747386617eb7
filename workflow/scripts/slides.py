"""The lecture slides: one reveal.js deck per session of docs/teaching.md (``make slides``).

    python workflow/scripts/slides.py [--out build/slides]

The sessions are read from docs/teaching.md: each ``### Session N — title`` heading opens a session,
and each row of its table is a part: "Lecture" rows name their notebook (``{doc}`notebooks/NN_name```,
or a section of one, ``{ref}`target` (notebook NN)``), "Lab" and "Wrap-up" rows follow. A deck opens
with the agenda (every row with its minutes) and holds, per lecture part, a title slide and then what
the notebook marks for slides with jupytext's ``slideshow`` cell metadata
(``# %% [markdown] slideshow={"slide_type": "slide"}``), in notebook order:

* a marked **markdown** cell gives one slide with only what a lecturer shows: its first heading
  (or its bold lead-in, or the section heading above it) as the title, then, up to a second
  heading, its lists, its display math (``$$ ... $$``) and its short paragraphs that hold math
  (:data:`SHORT` characters at most); other prose stays in the notebook. MyST roles are reduced
  to their text, directive fences (```` ```{exercise} ````) to their body.
* a marked **code** cell gives the slides of the committed figures it writes
  (``savefig(fig, "NAME")`` or ``show(fig, "NAME")`` with ``figures/NAME.png`` committed): one slide
  per panel that docs/_slides/lectures.toml cuts from the PNG (``[figure.NAME]``), each with its
  title and a one-line takeaway, sized for the slide; a panel shown under :data:`MIN_FIGURE_HEIGHT`
  px, or holding text of the figure's own (tick labels, axis labels, legends, titles, annotations,
  heat-map cells: what ``plotting.savefig`` measured in the PNG) under :data:`MIN_FIGURE_TEXT_PX`
  px at the slide's scale, is an error. The slides never execute a notebook and never change
  ``figures/``.

docs/_slides/lectures.toml also holds the slides no notebook has (the paper's definitions and
theorems, numbered as the paper numbers them), each placed after the slide it names, and the
speaker notes of every slide with its minutes (``<aside class="notes">``; ``s`` opens reveal.js's
speaker view); a marked slide without notes is an error. Then the part's self-check questions
(``notebooks/questions/NN_name.json``, the ones the notebook shows with jupyterquiz), one slide
each, the answer and its why as a fragment revealed on click, the notes naming the wrong answer the
room is likely to pick (the question's ``likely_wrong`` and ``discuss``); they are at most
:data:`QUIZ_SHARE` of a deck. Each lab (a "Lab" row, or the exercises of a "Lecture + lab" row done in
class) gets a slide with its exercises, numbered as the student edition numbers them, and its minutes;
the deck ends with the wrap-up its session schedules and the session's homework.

The words on a slide are checked before anything renders (:func:`check_words`): a slide that shows a
LaTeX label (``eq:...``, ``thm:...``, or a label of the paper where its number belongs), TeX outside
``$...$`` or math in ASCII (``u*_j``, ``Σ_j p_j``) is refused. The paper's equations are cited by label,
``Eq. {eq}`eq:partition-gap```, and shown with the number gpac_utils/paper/data/paper_numbering.csv gives
them, "Eq. (5)"; a label written beside a statement's number ("Theorem 4.2 (`thm:known-grouping`)") is
dropped on a slide.

nbconvert's ``SlidesExporter`` renders each deck with the template ``docs/_slides/templates/gpac_reveal``
(nbconvert's reveal template without any CDN) and ``--SlidesExporter.reveal_url_prefix=reveal.js``.
The decks are 16:9, 1280 x 720, body text and code 32 px (the template's CSS; a code size under
:data:`MIN_CODE_PX` is an error). The output folder is self-contained and works
offline: ``session-N.html``, ``reveal.js/`` (the npm package pinned in docs/_slides/package-lock.json),
``mathjax/`` (docs/_mathjax's), ``figures/`` (the panels the decks show) and ``slides.json`` (the
slide count of each deck).
"""

from __future__ import annotations

import argparse
import functools
import html
import json
import re
import shutil
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import nbformat

from gpac_utils.quiz import ANSWER_LETTERS, read_questions

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO_ROOT / "notebooks"
QUESTIONS = NOTEBOOKS / "questions"
FIGURES = REPO_ROOT / "figures"
TEACHING = REPO_ROOT / "docs" / "teaching.md"
SLIDES_SRC = REPO_ROOT / "docs" / "_slides"
REVEAL = SLIDES_SRC / "node_modules" / "reveal.js"
MATHJAX = REPO_ROOT / "docs" / "_mathjax" / "node_modules" / "mathjax" / "es5"
TEMPLATE = "gpac_reveal"
LECTURES = SLIDES_SRC / "lectures.toml"

_SESSION = re.compile(r"^###\s+Session\s+(\d+)\s+[—-]+\s+(.+?)(?:\s+\(about[^)]*\))?\s*$")
#: A row of a session's table: part, time, notebook, exercises.
_ROW = re.compile(r"^\|\s*((?:Lecture|Lab|Wrap-up)[^|]*?)\s*\|\s*(\d+)\s*min\s*\|\s*([^|]*?)\s*\|\s*([^|]*?)\s*\|")
_DOC = re.compile(r"\{doc\}`notebooks/(\d\d_[a-z0-9_]+)`")
#: A part that is a section of a notebook: ``{ref}`selection-lesson` (notebook 13)``.
_SECTION = re.compile(r"\{ref\}`([\w-]+)`\s*\(notebook (\d\d)\)")
#: An exercise of the exercises column: ``{ref}`ex-a <ex-a>` (derive, 15 min)``, maybe after "*homework*:".
_EXERCISE = re.compile(r"(\*homework\*:\s*)?\{ref\}`(?:[^`<]*<)?(ex-[a-z0-9-]+)>?`(?:\s*\(([^)]*)\))?")
_ROLE = re.compile(r"\{(?:term|ref|doc|numref|eq)\}`([^`<]*?)\s*(?:<[^>]*>)?`")
_FIGURE_CALL = re.compile(r"""\b(?:savefig|show)\(\s*\w+\s*,\s*["']([A-Za-z0-9_\-]+)["']""")
_LEAD = re.compile(r"^\*\*([^*]+?)\.?\*\*")  # a markdown cell's bold lead-in: **The mechanism.**
_TARGET = re.compile(r"^\([^)]+\)=\s*$")


class SlidesError(ValueError):
    """A deck that cannot be built as declared (a marked cell with nothing to show, a missing figure)."""


@dataclass
class Part:
    """One row of a session's table in docs/teaching.md: a lecture part (its notebook, or the section
    of a notebook that starts at the MyST target ``start``), a lab or the wrap-up."""

    title: str
    notebook: str
    where: str = ""
    minutes: int = 0
    exercises: str = ""
    start: str = ""

    @property
    def kind(self) -> str:
        """``"lecture"`` (a "Lecture" or "Lecture + lab" row), ``"lab"`` or ``"wrap-up"``."""
        return self.title.split(":")[0].split()[0].lower()

    @property
    def has_lab(self) -> bool:
        """Whether the part's time holds a lab: a "Lab" row, or a "Lecture + lab" row with exercises in class."""
        return self.kind == "lab" or (self.title.startswith("Lecture + lab") and bool(in_class(self.exercises)))


@dataclass
class Session:
    number: int
    title: str
    rows: list[Part] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"session-{self.number}"

    @property
    def parts(self) -> list[Part]:
        """The lecture parts (rows that begin with "Lecture" and name a notebook)."""
        return [p for p in self.rows if p.kind == "lecture" and p.notebook]

    @property
    def minutes(self) -> int:
        return sum(p.minutes for p in self.rows)


def sessions(teaching: Path = TEACHING) -> list[Session]:
    """The sessions of docs/teaching.md with every row of their tables: lectures, labs, the wrap-up."""
    found: list[Session] = []
    for line in teaching.read_text(encoding="utf-8").splitlines():
        if m := _SESSION.match(line):
            found.append(Session(int(m[1]), m[2].strip()))
        elif found and (m := _ROW.match(line)):
            notebook, where, start = "", "", ""
            if doc := _DOC.search(m[3]):
                notebook, where = doc[1], m[3][doc.end() :].strip()
            elif section := _SECTION.search(m[3]):
                notebook, start = _notebook_named(section[2]), section[1]
            found[-1].rows.append(Part(m[1], notebook, where, int(m[2]), m[4].strip(), start))
    if not found or not all(s.parts for s in found):
        raise SlidesError(f"teaching={teaching}: no session with a 'Lecture' row naming a notebook")
    return found


def _notebook_named(number: str) -> str:
    """The notebook ``NN_name`` whose number is ``number``."""
    found = sorted(NOTEBOOKS.glob(f"{number}_*.py"))
    if len(found) != 1:
        raise SlidesError(f"{TEACHING.name}: no single notebook numbered {number}")
    return found[0].stem


def in_class(exercises: str) -> list[tuple[str, str, bool]]:
    """The exercises of a row done in class (those before "*homework*:")."""
    return [e for e in exercises_of(exercises) if not e[2]]


def exercises_of(exercises: str) -> list[tuple[str, str, bool]]:
    """Every exercise of a row's exercises column, in class and homework: (label, note, homework?)."""
    out, homework = [], False
    for m in _EXERCISE.finditer(exercises):
        homework = homework or bool(m[1])
        out.append((m[2], (m[3] or "").strip(), homework))
    return out


_DIRECTIVE = re.compile(r"^\s*(`{3,}|:{3,})\{[\w-]+\}")
_OPTION = re.compile(r"^\s*:[\w-]+:")


def plain(markdown: str) -> str:
    """MyST markup a slide does not render, reduced to text: roles to their text, targets dropped,
    directive fences (```{exercise}, :::{note}) and their options dropped, their body kept."""
    lines, fences = [], []
    for line in markdown.split("\n"):
        if _TARGET.match(line):
            continue
        if m := _DIRECTIVE.match(line):
            fences.append(m[1])
            continue
        if fences and line.strip() == fences[-1]:
            fences.pop()
            continue
        if fences and _OPTION.match(line):
            continue
        lines.append(line)
    return _ROLE.sub(lambda m: _readable(m[1]), numbered("\n".join(lines)))


#: An equation cited by its label in the paper's LaTeX, ``{eq}`eq:partition-gap```: the slide shows "(5)".
_EQ_ROLE = re.compile(r"\{eq\}`([^`]+)`")
#: A label of the paper's LaTeX written in backticks beside its number: "Theorem 4.2 (`thm:known-grouping`)".
_LABEL_ASIDE = re.compile(r"(?<=\d)\s*\(`(?:thm|prop|def|assump|alg|app|sec|eq|fig|tab|table|remark):[^`]+`\)")
NUMBERING = REPO_ROOT / "gpac_utils" / "paper" / "data" / "paper_numbering.csv"


@functools.cache
def paper_labels() -> dict[str, tuple[str, str]]:
    """The paper's LaTeX labels -> (kind, number), from gpac_utils/paper/data/paper_numbering.csv."""
    import csv

    with NUMBERING.open(encoding="utf-8", newline="") as f:
        return {row["label"]: (row["kind"], row["number"]) for row in csv.DictReader(f) if row["label"]}


def numbered(text: str) -> str:
    """``text`` as the paper numbers it: ``{eq}`label``` as the equation's number "(5)", and a LaTeX
    label in backticks beside a statement's number dropped (the number stays)."""

    def number(m: re.Match) -> str:
        kind, n = paper_labels().get(m[1], ("", ""))
        if kind != "Equation" or not n:
            raise SlidesError(f"{LECTURES.name}: {m[0]} is not a numbered equation of the paper")
        return f"({n})"

    return _LABEL_ASIDE.sub("", _EQ_ROLE.sub(number, text))


def _readable(text: str) -> str:
    """A role's text as a slide shows it: an exercise label (``ex-partition-gap-by-hand``) as words."""
    return f"“{text[3:].replace('-', ' ')}”" if re.fullmatch(r"ex-[a-z0-9-]+", text) else text


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


def _read(path: Path) -> nbformat.NotebookNode:
    """A notebook as jupytext reads it, parsed once per text (the slides only read it)."""
    return _parse(path.read_text(encoding="utf-8"), path.suffix[1:])


@functools.cache
def _parse(text: str, ext: str) -> nbformat.NotebookNode:
    return jupytext.reads(text, fmt=ext)


@functools.cache
def lectures() -> dict:
    """The slide-only material of docs/_slides/lectures.toml: theory slides, figure panels, notes."""
    return tomllib.loads(LECTURES.read_text(encoding="utf-8"))


def notes(text: str, minutes: float) -> str:
    """A slide's speaker notes (reveal.js ``<aside class="notes">``, ``s`` opens the speaker view)."""
    return f'<aside class="notes"><p><b>{minutes:g} min.</b> {html.escape(text.strip())}</p></aside>'


def _notes_of(key: str) -> dict:
    entry = lectures().get("notes", {}).get(key)
    if not entry or not entry.get("notes") or not entry.get("minutes"):
        raise SlidesError(f'{LECTURES.name}: no [notes."{key}"] with notes and minutes for this slide')
    return entry


def _cell(source: str, slide_type: str, title: str = "") -> nbformat.NotebookNode:
    meta = {"slideshow": {"slide_type": slide_type}}
    if title:
        meta["gpac"] = {"title": title}
    return nbformat.v4.new_markdown_cell(source, metadata=meta)


def _heading(source: str) -> str | None:
    for line in plain(source).split("\n"):
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return None


@dataclass
class Panel:
    """One figure slide: a part of a committed figure (one or more boxes, stacked), re-laid for the slide."""

    figure: str
    index: int
    boxes: list[list[int]]
    stack: str
    title: str
    takeaway: str
    notes: str
    minutes: float

    @property
    def file(self) -> str:
        return f"{self.figure}--{self.index}.png"

    def image(self):
        """The panel's pixels, cut from ``figures/NAME.png`` (nothing is re-plotted or resampled)."""
        from PIL import Image

        with Image.open(FIGURES / f"{self.figure}.png") as full:
            full = full.convert("RGB")
            parts = [full.crop(tuple(b)) for b in self.boxes] if self.boxes else [full]
        if len(parts) == 1:  # stacked boxes keep their edges, so that their axes line up
            return _trim(parts[0])
        gap, horizontal = PANEL_GAP, self.stack == "h"
        w = sum(p.width for p in parts) + gap * (len(parts) - 1) if horizontal else max(p.width for p in parts)
        h = max(p.height for p in parts) if horizontal else sum(p.height for p in parts) + gap * (len(parts) - 1)
        canvas, at = Image.new("RGB", (w, h), "white"), 0
        for p in parts:
            canvas.paste(p, (at, 0) if horizontal else (0, at))
            at += (p.width if horizontal else p.height) + gap
        return canvas

    def shown(self) -> tuple[int, int, float]:
        """Its width and height on the slide (slide pixels) and the scale from the PNG's pixels."""
        w, h = self.image().size
        scale = min(FIGURE_BOX[0] / w, FIGURE_BOX[1] / h, MAX_UPSCALE)
        return round(w * scale), round(h * scale), scale


def _trim(image, pad: int = 4):
    """``image`` without its white margins (``pad`` pixels of white kept)."""
    box = image.convert("L").point(lambda v: 255 if v < 245 else 0).getbbox()  # the non-white pixels
    if box is None:
        return image
    left, top, right, bottom = box
    return image.crop(
        (max(left - pad, 0), max(top - pad, 0), min(right + pad, image.width), min(bottom + pad, image.height))
    )


#: The figure area of a slide (slide pixels, below the title and the takeaway line), the largest
#: enlargement of a panel's pixels, and the white gap between stacked boxes (PNG pixels).
FIGURE_BOX = (1200, 480)
MAX_UPSCALE = 1.6
PANEL_GAP = 12
#: The smallest figure on a slide (slide pixels).
MIN_FIGURE_HEIGHT = 300
#: The smallest text of a figure on a slide, in slide pixels: a figure's own text (tick labels, axis
#: labels, legends, titles, annotations, heat-map cells), read from the measurements
#: ``plotting.savefig`` writes into the PNG, times the scale at which the slide shows the panel.
MIN_FIGURE_TEXT_PX = 20


def figure_text(figure: str) -> list[dict]:
    """The text drawn in ``figures/NAME.png`` as ``plotting.savefig`` measured it (PNG pixels)."""
    from gpac_utils.checks import DataError
    from gpac_utils.paper.plotting import figure_text as measured

    try:
        text = measured(FIGURES / f"{figure}.png")
    except DataError as err:
        raise SlidesError(f"{err}: rerun the notebook that writes it") from None
    if text is None:
        raise SlidesError(
            f"figures/{figure}.png holds no measurements of its text: rerun the notebook that writes it "
            "(plotting.savefig records them)"
        )
    return text["texts"]


def panel_text(panel: Panel) -> list[dict]:
    """The figure's texts a panel shows: those whose centre lies in one of its boxes (all without boxes)."""
    texts = figure_text(panel.figure)
    if not panel.boxes:
        return texts

    def inside(t, box):
        x, y = (t["box"][0] + t["box"][2]) / 2, (t["box"][1] + t["box"][3]) / 2
        return box[0] <= x < box[2] and box[1] <= y < box[3]

    return [t for t in texts if any(inside(t, box) for box in panel.boxes)]


def small_figure_text(panel: Panel, scale: float) -> list[str]:
    """The panel's texts under :data:`MIN_FIGURE_TEXT_PX` on the slide at ``scale``, one line each."""
    return [
        f"{t['role']} {t['text']!r} {t['px'] * scale:.1f} px"
        for t in panel_text(panel)
        if t["px"] * scale < MIN_FIGURE_TEXT_PX - 1e-9
    ]


def check_figure_text(panel: Panel, scale: float) -> None:
    """Refuse a panel whose own text is under :data:`MIN_FIGURE_TEXT_PX` on the slide at ``scale``."""
    small = small_figure_text(panel, scale)
    if small:
        shown = "; ".join(small[:4]) + (f"; and {len(small) - 4} more" if len(small) > 4 else "")
        raise SlidesError(
            f"{LECTURES.name}: figure {panel.figure} panel {panel.index} shows text under {MIN_FIGURE_TEXT_PX} px "
            f"on the slide (scale {scale:.2f}): {shown}; enlarge it in the notebook's figure, or cut smaller panels"
        )


#: The smallest code on a slide (slide pixels), inline or in a block: the template's CSS sets it.
MIN_CODE_PX = 32
_CSS_RULE = re.compile(r"([^{}]+)\{([^}]*)\}")
_FONT_SIZE = re.compile(r"font-size:\s*([\d.]+)px")


def check_code_size(template: Path | None = None) -> None:
    """Refuse a template whose CSS sets a code size (a rule whose selector names ``code``) under
    :data:`MIN_CODE_PX`; the browser test measures what Chromium computes."""
    template = template or SLIDES_SRC / "templates" / TEMPLATE / "index.html.j2"
    css = "\n".join(re.findall(r"<style[^>]*>(.*?)</style>", template.read_text(encoding="utf-8"), re.S))
    for selector, body in _CSS_RULE.findall(re.sub(r"/\*.*?\*/", "", css, flags=re.S)):
        if re.search(r"\bcode\b", selector) and (size := _FONT_SIZE.search(body)) and float(size[1]) < MIN_CODE_PX:
            raise SlidesError(
                f"{template.relative_to(REPO_ROOT) if template.is_relative_to(REPO_ROOT) else template}: "
                f"code at {size[1]} px ({' '.join(selector.split())}); at least {MIN_CODE_PX} px"
            )


def panels(figure: str) -> list[Panel]:
    """The figure slides of a committed figure, as docs/_slides/lectures.toml lays them out."""
    spec = lectures().get("figure", {}).get(figure)
    if spec is None:
        raise SlidesError(f"{LECTURES.name}: no [figure.{figure}] saying how the slides show figures/{figure}.png")
    out = []
    for index, p in enumerate(spec.get("panel", []), start=1):
        boxes = p.get("boxes", [p["box"]] if "box" in p else [])
        if "axes" in p:  # boxes by the figure's axes, as plotting.savefig measured them
            boxes = axes_boxes(figure, p["axes"])
        out.append(
            Panel(figure, index, boxes, p.get("stack", "v"), p["title"], p["takeaway"], p["notes"], p["minutes"])
        )
    return out


#: The white margin kept around a panel cut by its axes (PNG pixels).
AXES_PAD = 8


def axes_boxes(figure: str, axes: list) -> list[list[int]]:
    """The boxes of a panel given by the indices of the figure's axes (``fig.axes`` order), each with
    its tick labels, axis labels, title and legend: ``[0, 1]`` one box around axes 0 and 1,
    ``[[0], [3]]`` two boxes, stacked."""
    figure_text(figure)  # refuses a PNG without measurements, or changed since
    from gpac_utils.paper.plotting import figure_text as measured

    text = measured(FIGURES / f"{figure}.png")
    if text is None:
        raise SlidesError(f"figures/{figure}.png holds no measurements of its axes: rerun the notebook that writes it")
    width, height = text["size"]
    out = []
    for group in axes if axes and isinstance(axes[0], list) else [axes]:
        try:
            found = [text["axes"][i] for i in group]
        except (IndexError, TypeError):
            found = [None]
        if not group or None in found:
            raise SlidesError(
                f"{LECTURES.name}: [figure.{figure}] axes = {axes}: figures/{figure}.png has no axes {group}"
            )
        left, top = min(b[0] for b in found) - AXES_PAD, min(b[1] for b in found) - AXES_PAD
        right, bottom = max(b[2] for b in found) + AXES_PAD, max(b[3] for b in found) + AXES_PAD
        out.append([max(left, 0), max(top, 0), min(right, width), min(bottom, height)])
    return out


def figure_slide(panel: Panel) -> nbformat.NotebookNode:
    """One figure slide: its title, what to see (one line), the panel, its notes."""
    w, h, scale = panel.shown()
    if h < MIN_FIGURE_HEIGHT:
        raise SlidesError(
            f"{LECTURES.name}: figure {panel.figure} panel {panel.index} is {h} px tall on the slide "
            f"(at least {MIN_FIGURE_HEIGHT}): cut it into smaller panels"
        )
    check_figure_text(panel, scale)
    smallest = min((t["px"] for t in panel_text(panel)), default=0)
    img = (
        f'<img class="gpac-figure" src="figures/{panel.file}" width="{w}" height="{h}" '
        f'data-scale="{scale:.4f}" data-text-px="{smallest:g}" alt="{html.escape(panel.title)}">'
    )
    text = f'## {panel.title}\n\n<p class="gpac-takeaway">{panel.takeaway}</p>\n\n{img}\n\n'
    cell = _cell(text + notes(panel.notes, panel.minutes), "slide", panel.title)
    cell.metadata["gpac"]["panel"] = [panel.figure, panel.index]
    return cell


def theory_slides(name: str) -> dict[str, list[nbformat.NotebookNode]]:
    """The slide-only slides of a notebook's part, keyed by the title of the notebook slide they follow."""
    out: dict[str, list[nbformat.NotebookNode]] = {}
    for s in lectures().get("slide", []):
        if s["notebook"] == name:
            text = f"## {s['title']}\n\n{numbered(s['body'].strip())}\n\n{notes(s['notes'], s['minutes'])}"
            out.setdefault(s["after"], []).append(_cell(text, "slide", s["title"]))
    return out


def notebook_slides(name: str) -> list[nbformat.NotebookNode]:
    """The slides a notebook marks (``slideshow`` metadata), as markdown cells of the deck, each with
    its notes, and the slide-only slides of docs/_slides/lectures.toml after the one they name. Each
    slide records the index of the notebook cell it comes from (``metadata.gpac.at``; a slide-only
    slide, that of the slide it follows)."""
    path = NOTEBOOKS / f"{name}.py"
    nb = _read(path)
    heading, out = name, []
    extra = theory_slides(name)

    def following(title: str) -> list[nbformat.NotebookNode]:  # the slides after `title`, chained
        cells = extra.pop(title, [])
        return [c for cell in cells for c in (cell, *following(cell.metadata["gpac"]["title"]))]

    for index, cell in enumerate(nb.cells):
        before = len(out)
        marked = cell.metadata.get("slideshow", {}).get("slide_type") in {"slide", "subslide"}
        if cell.cell_type == "markdown":
            if marked:
                text = slide_markdown(cell.source, heading)
                if len(_blocks(text)) < 2:
                    raise SlidesError(f"{path.name}: cell {index} is marked for slides but has no list or math")
                title = text.split("\n", 1)[0][3:]
                entry = _notes_of(f"{name}/{title}")
                if "body" in entry:  # the slide's own text, where the notebook's would not project
                    text = f"## {title}\n\n{numbered(entry['body'].strip())}"
                if "title" in entry:  # the slide's own title (the key keeps the notebook's)
                    text = f"## {entry['title']}\n\n" + text.split("\n", 1)[1].lstrip("\n")
                text += "\n\n" + notes(entry["notes"], entry["minutes"])
                out.append(_cell(text, "slide", title))
                out += following(title)
            heading = _heading(cell.source) or heading
        elif marked:
            names = figure_names(cell.source)
            if not names:
                raise SlidesError(f"{path.name}: code cell {index} is marked for slides but writes no committed figure")
            for figure in names:
                for panel in panels(figure):
                    out.append(figure_slide(panel))
                    out += following(panel.title)
        for c in out[before:]:
            c.metadata.setdefault("gpac", {})["at"] = index
    if extra:
        raise SlidesError(f"{LECTURES.name}: slides of {name} follow no slide of it: after = {sorted(extra)}")
    return out


def section_slides(part: Part, parts: list[Part]) -> list[nbformat.NotebookNode]:
    """The slides of a lecture part. A part that starts at a MyST target ``(start)=`` has the slides of
    its notebook from the cell holding the target up to the next cell that opens a section (``## ``);
    a part without one has the rest of its notebook (what no such section of ``parts`` takes)."""
    path = NOTEBOOKS / f"{part.notebook}.py"
    cells = _read(path).cells

    def section(label: str) -> range:
        found = [i for i, c in enumerate(cells) if re.search(rf"^\({re.escape(label)}\)=\s*$", c.source, re.M)]
        if not found:
            raise SlidesError(f"{path.name}: no cell holds the target ({label})= that {TEACHING.name} names")
        after = [
            i
            for i in range(found[0] + 1, len(cells))
            if cells[i].cell_type == "markdown" and re.match(r"^## ", plain(cells[i].source).lstrip())
        ]
        return range(found[0], min(after, default=len(cells)))

    if part.start:
        keep = set(section(part.start))
    else:
        taken = {i for p in parts if p.notebook == part.notebook and p.start for i in section(p.start)}
        keep = set(range(len(cells))) - taken
    return [c for c in notebook_slides(part.notebook) if c.metadata["gpac"]["at"] in keep]


def questions(name: str) -> list[dict]:
    """The self-check questions of a notebook (notebooks/questions/NN_name.json), [] without a file."""
    path = QUESTIONS / f"{name}.json"
    return read_questions(path) if path.is_file() else []


def quiz_notes(q: dict) -> str:
    """The notes of a question slide: the wrong answer the room is likely to pick (the question's
    ``likely_wrong``, an index of its answers) and what to discuss about it (its ``discuss``)."""
    where = f"{QUESTIONS.name}: {q['question'][:50]}"
    wrong = q.get("likely_wrong")
    if not isinstance(wrong, int) or not 0 <= wrong < len(q["answers"]) or q["answers"][wrong]["correct"]:
        raise SlidesError(f"{where}: likely_wrong must be the index of a wrong answer")
    if not q.get("discuss", "").strip():
        raise SlidesError(f"{where}: no discuss note saying what to discuss about the likely wrong answer")
    letter = ANSWER_LETTERS[wrong]
    return (
        f"Likely wrong answer: {letter} ({q['answers'][wrong]['answer']}). {q['discuss'].strip()} "
        "Take the votes before the click."
    )


def question_slides(name: str, after_lab: bool | None = None) -> list[nbformat.NotebookNode]:
    """One slide per multiple-choice question; the correct answer and its why as a fragment. With
    ``after_lab`` only the questions asked before the lab (``False``) or after it (``True``: those
    marked ``"after_lab": true``, whose answer would give the lab away)."""
    out = []
    for q in questions(name):
        if after_lab is not None and bool(q.get("after_lab")) != after_lab:
            continue
        options = "\n".join(f"- **{letter}.** {a['answer']}" for letter, a in zip(ANSWER_LETTERS, q["answers"]))
        right = next(i for i, a in enumerate(q["answers"]) if a["correct"])
        why = q["answers"][right]["feedback"]
        text = f"## Check yourself\n\n{q['question']}\n\n{options}\n\n{notes(quiz_notes(q), 1)}"
        out.append(_cell(text, "slide", "Check yourself"))
        answer = f'<p class="gpac-answer"><b>Answer {ANSWER_LETTERS[right]}.</b> {why}</p>'
        out.append(_cell(answer, "fragment"))
    return out


_EXERCISE_LABEL = re.compile(r"^(?::::+|```+)\{exercise\}[^\n]*\n:label: (\S+)", re.M)


@functools.cache
def exercise_numbers() -> dict[str, tuple[str, int]]:
    """Every exercise label of the notebooks -> (notebook, its number there), as the student edition
    numbers them (workflow/scripts/student_edition.py: "Exercise N", in the notebook's order)."""
    out = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py")):
        cells = [c for c in _read(path).cells if c.cell_type == "markdown"]
        labels = [label for c in cells for label in _EXERCISE_LABEL.findall(c.source)]
        out |= {label: (path.stem, k) for k, label in enumerate(labels, start=1)}
    return out


def _exercise_line(label: str, note: str, notebook: str) -> str:
    """One exercise as a lab slide lists it: its number as the student edition shows it, its time, what it asks."""
    if label not in exercise_numbers():
        raise SlidesError(f"{TEACHING.name}: no notebook has the exercise {label}")
    where, number = exercise_numbers()[label]
    title = lectures().get("exercise", {}).get(label)
    if not title:
        raise SlidesError(f'{LECTURES.name}: no [exercise] "{label}" = "what it asks, in a few words"')
    name = f"Exercise {number}" if where == notebook else f"notebook {where[:2]}, Exercise {number}"
    return f"**{name}**{f' ({note})' if note else ''}: {title}"


def lab_minutes(part: Part) -> float:
    """The minutes of a part's lab: a "Lab" row's time, else the sum of its exercises' in-class minutes."""
    if part.kind == "lab":
        return part.minutes
    return sum(float(m) for _, note, _ in in_class(part.exercises) for m in re.findall(r"(\d+) min", note))


def _lab_key(part: Part) -> str:
    return f"{part.notebook}/{part.start}" if part.start else part.notebook


def lab_slide(part: Part, debrief: float = 0) -> nbformat.NotebookNode:
    """The slide that opens a lab: its time, its notebook, its exercises as the student edition numbers
    them (in class, then homework), and its notes (``[lab."NOTEBOOK"]`` in docs/_slides/lectures.toml).
    ``debrief``: the minutes of the questions asked after it within the lab's time (a "Lab" row's), which
    its notes leave to them."""
    entry = lectures().get("lab", {}).get(_lab_key(part))
    if not entry or not entry.get("notes"):
        raise SlidesError(f'{LECTURES.name}: no [lab."{_lab_key(part)}"] with the notes of its lab')
    minutes = lab_minutes(part)
    what = part.title.split(":", 1)[1].split(" — ")[0].strip()
    lines = [
        f"- {'homework, ' if homework else ''}{_exercise_line(label, note, part.notebook)}"
        + (f" (**graded: {graded()[label][0]}**)" if homework and label in graded() else "")
        for label, note, homework in exercises_of(part.exercises)
    ]
    title = f"Lab, {minutes:g} min: {what}"
    text = (
        f"## {title}\n\nNotebook {part.notebook[:2]}, student edition\n\n"
        + "\n".join(lines)
        + "\n\n"
        + notes(
            entry["notes"] + (f" The lab's last {debrief:g} min: the questions after it." if debrief else ""),
            minutes - debrief,
        )
    )
    cell = _cell(text, "slide", title)
    cell.metadata["gpac"]["lab"] = True
    return cell


HOMEWORK = NOTEBOOKS / "homework" / "gpac_homework.py"
_GRADED = re.compile(r"^# name: (q\d+)\n# points: \[([^\]]*)\]\n# # exercise: (ex-[a-z0-9-]+)", re.M)


@functools.cache
def graded() -> dict[str, tuple[str, int]]:
    """The exercises the graded homework (notebooks/homework/gpac_homework.py) grades: label ->
    (its question, "Q1", and its points)."""
    found = _GRADED.findall(HOMEWORK.read_text(encoding="utf-8"))
    if not found:
        raise SlidesError(f"{HOMEWORK.relative_to(REPO_ROOT)}: no question naming the exercise it is built on")
    return {label: (name.upper(), sum(int(p) for p in points.split(","))) for name, points, label in found}


def session_homework(session: Session) -> list[tuple[str, str]]:
    """Every exercise a session assigns as homework, in the order of its rows: (label, its note)."""
    return [(label, note) for part in session.rows for label, note, home in exercises_of(part.exercises) if home]


def _homework_block(session: Session) -> str:
    """The session's homework, one line per notebook, the graded exercises marked with their question."""
    by_notebook: dict[str, list[str]] = {}
    for label, _ in session_homework(session):
        if label not in exercise_numbers():
            raise SlidesError(f"{TEACHING.name}: no notebook has the exercise {label}")
        where, number = exercise_numbers()[label]
        mark = f" (**graded: {graded()[label][0]}**)" if label in graded() else ""
        by_notebook.setdefault(where, []).append((number, f"Exercise {number}{mark}"))
    return "\n".join(
        f"- notebook {where[:2]}: {', '.join(item for _, item in sorted(items))}"
        for where, items in by_notebook.items()
    )


def homework_slide(session: Session) -> nbformat.NotebookNode | None:
    """The slide that hands out the graded homework (``[homework]`` of docs/_slides/lectures.toml, in the
    session it names, before the wrap-up): the file, its questions with their exercises and points
    (from the homework notebook), and the entry's body (when it is due, how to submit)."""
    entry = lectures().get("homework", {})
    if entry.get("session") != session.number:
        return None
    rows = []
    for label, (question, points) in sorted(graded().items(), key=lambda kv: int(kv[1][0][1:])):
        where, number = exercise_numbers()[label]
        rows.append(
            f"- **{question}** ({points} point{'s' if points > 1 else ''}): notebook {where[:2]}, Exercise {number}"
        )
    total = sum(points for _, points in graded().values())
    table = "\n".join(rows)
    title = entry["title"]
    text = f"## {title}\n\n{table}\n\n{numbered(entry['body'].strip()).replace('{total}', str(total))}"
    cell = _cell(text + "\n\n" + notes(entry["notes"], entry["minutes"]), "slide", title)
    cell.metadata["gpac"]["homework"] = True
    return cell


def wrapup_slide(session: Session, part: Part, minutes: float | None = None) -> nbformat.NotebookNode:
    """The deck's last slide: the wrap-up docs/teaching.md schedules (``[wrapup."N"]`` of
    docs/_slides/lectures.toml: its body and notes), and every exercise the session assigns as
    homework (from all its rows), the graded ones marked with their question of the homework."""
    entry = lectures().get("wrapup", {}).get(str(session.number))
    if not entry or not entry.get("body") or not entry.get("notes"):
        raise SlidesError(f'{LECTURES.name}: no [wrapup."{session.number}"] with body and notes for the wrap-up')
    title = f"Wrap-up: {part.title.split(':', 1)[1].strip()}"
    text = f"## {title}\n\n{numbered(entry['body'].strip())}"
    if homework := _homework_block(session):
        text += "\n\n**Homework**\n\n" + homework
    minutes = part.minutes if minutes is None else minutes
    cell = _cell(text + "\n\n" + notes(entry["notes"], minutes), "slide", title)
    cell.metadata["gpac"]["wrapup"] = True
    return cell


def _minutes_of(cell: nbformat.NotebookNode) -> float:
    """The minutes a slide's notes give it."""
    return sum(float(m) for m in re.findall(r"<b>([\d.]+) min\.</b>", cell.source))


def _agenda_line(part: Part) -> str:
    line = f"- **{part.minutes} min** {part.title}"
    if part.has_lab and part.kind != "lab":
        line += f" (lab {lab_minutes(part):g} min)"
    return line


def deck(session: Session) -> nbformat.NotebookNode:
    """The deck of one session as a notebook of markdown cells with reveal.js slide metadata: the
    agenda (every row of the session's table with its minutes), per lecture part a title slide, its
    slides and the notebook's questions, a slide per lab with its exercises, and the wrap-up last."""
    agenda = "\n".join(_agenda_line(p) for p in session.rows)
    plan = "; ".join(f"{p.title}: {p.minutes} min" for p in session.rows)
    cells = [_cell(f"# Session {session.number} — {session.title}\n\n{agenda}\n\n{notes('Plan. ' + plan, 1)}", "slide")]
    asked, wrapup, later = set(), None, {}
    for part in session.rows:
        if part.kind == "wrap-up":
            handout = homework_slide(session)
            taken = _minutes_of(handout) if handout is not None else 0
            wrapup = ([handout] if handout is not None else []) + [wrapup_slide(session, part, part.minutes - taken)]
            continue
        if part.kind == "lab":  # a lab row of its own: the questions after it take their minutes from its time
            after = later.pop(part.notebook, [])
            cells += [lab_slide(part, debrief=sum(_minutes_of(c) for c in after)), *after]
            continue
        source = _read(NOTEBOOKS / f"{part.notebook}.py").cells
        first = next((c for c in source if part.start and re.search(rf"^\({part.start}\)=", c.source, re.M)), source[0])
        nb_title = _heading(first.source) or part.notebook
        if part.start:  # a section: its heading is the next slide's title; name the notebook it is from
            nb_title = f"A section of notebook {_heading(source[0].source) or part.notebook}"
        where = f" ({part.where})" if part.where else ""
        say = f"{part.title} ({part.minutes} min in all); the notebook is {part.notebook}{where}; open it for the lab."
        cells.append(_cell(f"# {part.title}\n\n{plain(nb_title)}{where}\n\n{notes(say, 0.5)}", "slide"))
        cells += section_slides(part, session.parts)
        if part.notebook not in asked:
            cells += question_slides(part.notebook, after_lab=False)
            later[part.notebook] = question_slides(part.notebook, after_lab=True)
            asked.add(part.notebook)
        if part.has_lab:
            cells.append(lab_slide(part))
            cells += later.pop(part.notebook, [])
    if wrapup is None:
        raise SlidesError(f"{TEACHING.name}: session {session.number} has no Wrap-up row")
    if any(later.values()):
        raise SlidesError(
            f"{session.name}: questions asked after a lab of {sorted(k for k in later if later[k])}, "
            "which has no lab in this session"
        )
    cells += wrapup
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["title"] = f"Session {session.number} — {session.title}"
    return nb


def slide_count(nb: nbformat.NotebookNode) -> int:
    """The number of slides of a deck (cells that open a slide or a subslide)."""
    return sum(c.metadata["slideshow"]["slide_type"] in {"slide", "subslide"} for c in nb.cells)


def quiz_count(nb: nbformat.NotebookNode) -> int:
    """The number of question slides of a deck."""
    return sum(c.metadata.get("gpac", {}).get("title") == "Check yourself" for c in nb.cells)


# ---- the words on a slide: no LaTeX label, no TeX left unrendered, no ASCII math ----------------

#: A label of the paper's LaTeX (or any LaTeX label), as ``eq:u^hat_j`` or ``thm:unknown-grouping``.
_LATEX_LABEL = re.compile(r"\b(?:eq|thm|assump|sec|def|prop|alg|app|fig|tab|table|remark|lem|cor|ex):[\w^{}-]+")
#: TeX that MathJax did not render: a command, a braced sub- or superscript, a dollar left over.
_RAW_TEX = re.compile(r"\\[A-Za-z()\[\]{}]|[_^]\{|\$")
#: Math written in ASCII outside a formula: a one-letter symbol with an underscore subscript
#: (``u*_j``, ``p_j``, ``Σ_j``, ``Z_t``, ``R̂_n``), or a starred symbol (``u*``, ``g*``).
_ASCII_MATH = re.compile(r"(?<![\w.])[^\W\d_]\u0302?(?:\*?_[\w{]|\*(?!\*))")


def _label_names() -> list[str]:
    """The paper's labels without their prefix where they read as one (``pac-optimal-threshold``)."""
    names = {label.split(":", 1)[1] for label in paper_labels()}
    return sorted(n for n in names if re.search(r"[-^]", n) and len(n) > 6)


def leaks(text: str, code: str = "") -> list[str]:
    """What a slide's visible ``text`` (and its ``code``) shows that it must not: a LaTeX label, the
    name of a label of the paper where its number belongs, TeX or Markdown left unrendered, or math in
    ASCII (in ``text`` only: code may hold ``_``)."""
    found = [f"a LaTeX label {m[0]!r}" for m in _LATEX_LABEL.finditer(text + "\n" + code)]
    found += [f"the paper's label {n!r} (its number belongs there)" for n in _label_names() if n in text + code]
    found += [f"unrendered TeX {text[max(m.start() - 8, 0) : m.end() + 8]!r}" for m in _RAW_TEX.finditer(text)]
    found += [f"ASCII math {text[max(m.start() - 4, 0) : m.end() + 4]!r}" for m in _ASCII_MATH.finditer(text)]
    # a backquote shown as a character: Markdown left unrendered (inside HTML such as a takeaway's <p>)
    found += [f"unrendered Markdown {text[max(m.start() - 8, 0) : m.end() + 8]!r}" for m in re.finditer("`", text)]
    return found


def visible(markdown: str) -> tuple[str, str]:
    """The text a slide shows before MathJax runs, without its formulas, and its code, from its markdown
    (speaker notes, HTML tags and their attributes, and ``$...$`` / ``$$...$$`` left out)."""
    text = re.sub(r'<aside class="notes">.*?</aside>', " ", markdown, flags=re.S)
    code = re.findall(r"```.*?```|`[^`\n]+`", text, flags=re.S)
    text = re.sub(r"```.*?```|`[^`\n]+`", " ", text, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)
    text = re.sub(r"\$[^$]+\$", " ", text)
    return html.unescape(text), "\n".join(code)


def check_words(nb: nbformat.NotebookNode, name: str) -> None:
    """Refuse a deck whose slides show a LaTeX label, unrendered TeX or ASCII math (:func:`leaks`)."""
    problems, number, title = [], 0, ""
    for cell in nb.cells:
        if cell.metadata["slideshow"]["slide_type"] in {"slide", "subslide"}:
            number += 1
            title = cell.source.lstrip("#").split("\n", 1)[0].strip()[:50]
        problems += [f"slide {number} ({title}): {leak}" for leak in leaks(*visible(cell.source))]
    if problems:
        raise SlidesError(f"{name}: " + "; ".join(problems))


#: The largest share of a deck's slides that are questions.
QUIZ_SHARE = 0.25


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
    check_code_size()
    out.mkdir(parents=True, exist_ok=True)
    for sub, src in (("reveal.js/dist", REVEAL / "dist"), ("reveal.js/plugin/notes", REVEAL / "plugin" / "notes")):
        shutil.copytree(src, out / sub, dirs_exist_ok=True)
    shutil.copytree(MATHJAX, out / "mathjax", dirs_exist_ok=True)
    (out / "figures").mkdir(exist_ok=True)
    counts = {}
    for session in sessions():
        nb = deck(session)
        check_words(nb, session.name)
        n, quiz = slide_count(nb), quiz_count(nb)
        if quiz > QUIZ_SHARE * n:
            raise SlidesError(f"{session.name}: {quiz} of {n} slides are questions (at most {QUIZ_SHARE:.0%})")
        for figure, index in (c.metadata["gpac"]["panel"] for c in nb.cells if "panel" in c.metadata.get("gpac", {})):
            panel = panels(figure)[index - 1]
            panel.image().save(out / "figures" / panel.file)
        (out / f"{session.name}.html").write_text(render(nb), encoding="utf-8")
        counts[session.name] = n
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
