"""Build the compendium as a static HTML book from the executed notebooks.

Command line::

    python -m gpac_utils.workflow.book [--profile paper|fast] [--executed DIR] [--out DIR] [--no-run]
                                       [--figures DIR] [--strict] [NOTEBOOK ...]

``make book`` runs it on the paper profile: the executed notebooks ``build/paper/<name>.ipynb``
(notebooks missing there are first executed by the runner, :mod:`gpac_utils.workflow.runner`),
rendered with Sphinx + myst-nb + sphinx-book-theme into ``build/book/html/``. Sphinx never executes
a notebook (``nb_execution_mode = "off"``): the book shows exactly the outputs the runner stored.

Steps:

1. **Stage** (:func:`stage`): copy ``docs/`` (configuration, hand-written pages, the
   ``paper_labels`` extension) into ``build/book-src/``, the executed notebooks into its
   ``notebooks/``, and write the generated pages -- the landing page's notebook -> paper-artefact
   table and chapters (one per stage: 0x generation and scoring, 1x theory, 2x paper tables and
   figures, 3x audits and case studies), the paper-artefact index, the figure gallery (each figure
   with its caption and the notebook that wrote it) and the architecture page (the README's
   ``<!-- architecture:start -->`` ... ``<!-- architecture:end -->`` section). A notebook that was not
   executed becomes a page that says so (with its header text), and the build warns; one that failed
   is shown with a warning at its top. The ``docs/`` tree itself is never written to.
2. **Build** (:func:`build_html`): ``python -m sphinx -b html`` in a subprocess.
3. **Check** (:func:`check_links`): every ``href``/``src`` of every HTML page that points inside
   the book must name an existing file, and its ``#fragment`` an existing id.

MathJax is served from the book itself (``_static/mathjax/``): the npm package ``mathjax`` 3.2.2,
fetched once with ``npm pack`` into ``build/cache/`` and checked against its registry integrity
hash (:func:`ensure_mathjax`); ``GPAC_MATHJAX_DIR`` may point at an unpacked copy (the package's
``es5/`` folder) instead. Version 3's ``es5/`` bundle is self-contained (fonts included), where
MathJax 4 loads its fonts from a second package at run time; Sphinx's default is a CDN, which a
book read offline cannot reach.

Publishing: the output folder (``build/book/html/``) uses relative links only and has a
``.nojekyll`` file; copy it to any static host as it is (``--out DIR`` writes it elsewhere).
"""

from __future__ import annotations

import argparse
import ast
import base64
import hashlib
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from .paths import BUILD, REPO_ROOT
from .runner import discover

#: The repository root (computed here, independent of the working directory).
DOCS = REPO_ROOT / "docs"
README = REPO_ROOT / "README.md"

#: One chapter (toctree caption) per stage, by the notebook number's first digit.
CHAPTERS = {
    0: "Generation and scoring",
    1: "Theory",
    2: "Paper tables and figures",
    3: "Audits and case studies",
}
#: Backticked paper labels in the notebooks' markdown.
LABEL = re.compile(r"`((?:table|fig):[A-Za-z0-9][A-Za-z0-9_.\-]*)`")
#: Words before a label that make it a pointer to another notebook's artefact, not this one's.
REFERS_TO = re.compile(r"(?:\bas in|\bsee|\bcf\.|\blike|\bof)\s*\(?$", re.IGNORECASE)
ARCH_START, ARCH_END = "<!-- architecture:start -->", "<!-- architecture:end -->"

MATHJAX_VERSION = "3.2.2"
#: ``npm view mathjax@3.2.2 dist.integrity``: the tarball is checked against it.
MATHJAX_INTEGRITY = "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw=="
#: The parts of MathJax's ``es5/`` folder the book needs: the combined TeX/MathML -> CommonHTML
#: component, its fonts, the TeX extensions it autoloads, the UI and a11y components it may load.
MATHJAX_PARTS = ("tex-mml-chtml.js", "output/chtml", "input/tex/extensions", "input/mml", "ui", "a11y", "adaptors")


class BookError(RuntimeError):
    """The book could not be built (Sphinx failed, or a required page is missing)."""


# --------------------------------------------------------------------------- notebooks
@dataclass
class Notebook:
    """One ``notebooks/NN_name.py`` and what the runner left for it."""

    source: Path
    executed: Path | None
    status: str  # ok | failed | missing
    error: str = ""
    title: str = ""
    header: str = ""
    labels: list[str] = field(default_factory=list)
    reproduces: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.source.stem

    @property
    def number(self) -> int:
        return int(self.name[:2])

    @property
    def docname(self) -> str:
        return f"notebooks/{self.name}"


def _read_nb(path: Path):
    import jupytext
    import nbformat

    if path.suffix == ".ipynb":
        return nbformat.read(str(path), as_version=4)
    return jupytext.read(str(path))


def _error_of(nb) -> str:
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"
    exc = nb.metadata.get("papermill", {}).get("exception")
    return "the run stopped with an exception" if exc else ""


def _title_and_header(nb, fallback: str) -> tuple[str, str]:
    first = next(
        (c for c in nb.cells if c.cell_type == "markdown" and c.source.strip() and not _is_papermill_banner(c)), None
    )
    if first is None:
        return fallback, ""
    match = re.search(r"^#\s+(.+)$", first.source, re.MULTILINE)
    return (match.group(1).strip() if match else fallback), first.source


def inspect_notebook(source: Path, executed_dir: Path) -> Notebook:
    """The executed notebook of ``source`` in ``executed_dir``, its status, title and paper labels."""
    executed = executed_dir / f"{source.stem}.ipynb"
    status, error, nb = "missing", "", None
    if executed.is_file():
        try:
            nb = _read_nb(executed)
        except Exception as exc:  # an unreadable file is as good as missing
            error = f"unreadable executed notebook: {exc}"
        else:
            error = _error_of(nb)
            status = "failed" if error else "ok"
    if nb is None:
        nb = _read_nb(source)
    title, header = _title_and_header(nb, source.stem)
    labels, reproduces = [], []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for label in LABEL.findall(cell.source):
            if label not in labels:
                labels.append(label)
    # The header's "**Reproduces** ..." paragraph names what this notebook owns.
    # A label it only points at ("eps as in `table:...`", "see `fig:...`") is not one it reproduces.
    for para in re.split(r"\n\s*\n", header):
        if para.lstrip().startswith("**Reproduces**"):
            for match in LABEL.finditer(para):
                before = para[max(0, match.start() - 12) : match.start()]
                if not REFERS_TO.search(before) and match.group(1) not in reproduces:
                    reproduces.append(match.group(1))
    return Notebook(
        source,
        executed if status != "missing" else None,
        status,
        error,
        title,
        header,
        labels,
        reproduces,
    )


# --------------------------------------------------------------------------- labels and figures
def anchor_id(label: str) -> str:
    """``table:01_results_known`` -> ``table-01_results_known`` (the id the book gives the label)."""
    return label.replace(":", "-")


def _headings(nb_path: Path | None, source: Path) -> list[str]:
    nb = _read_nb(nb_path or source)
    found = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found += [h.strip() for h in re.findall(r"^#{1,6}\s+(.+)$", cell.source, re.MULTILINE)]
    return found


def label_owners(notebooks: Sequence[Notebook]) -> dict[str, dict]:
    """Which page owns each paper label: the notebook that **Reproduces** it, else one with a
    section named after it, else the first that mentions it."""
    owners: dict[str, dict] = {}
    headings = {nb.name: _headings(nb.executed, nb.source) for nb in notebooks}
    every = [lab for nb in notebooks for lab in nb.labels]
    for label in dict.fromkeys(every):
        owner = (
            next((nb for nb in notebooks if label in nb.reproduces), None)
            or next((nb for nb in notebooks if label in headings[nb.name]), None)
            or next(nb for nb in notebooks if label in nb.labels)
        )
        owners[label] = {"doc": owner.docname, "notebook": owner.name, "title": label, "id": anchor_id(label)}
    return owners


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _saved_names(nb) -> list[tuple[int, str, bool]]:
    """(cell index, name or f-string regex, is_regex) for every figure name a code cell saves under:
    the string arguments of ``savefig(...)`` calls and of the notebook's own functions that call it."""
    trees = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        src = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            trees.append((i, ast.parse(src)))
        except SyntaxError:
            continue
    savers = {"savefig"}
    for _, tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(
                isinstance(n, ast.Call) and _call_name(n) == "savefig" for n in ast.walk(node)
            ):
                savers.add(node.name)
    found = []
    for i, tree in trees:
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and _call_name(call) in savers):
                continue
            for arg in [*call.args, *(kw.value for kw in call.keywords)]:
                for node in ast.walk(arg):
                    if isinstance(node, ast.Constant) and isinstance(node.value, str):
                        found.append((i, node.value, False))
                    elif isinstance(node, ast.JoinedStr):
                        parts = [re.escape(v.value) if isinstance(v, ast.Constant) else ".+" for v in node.values]
                        if any(isinstance(v, ast.Constant) and v.value.strip("_-") for v in node.values):
                            found.append((i, "".join(parts), True))
    return found


def _caption_before(cells, index: int) -> tuple[str, str]:
    """(heading, first paragraph) of the nearest markdown cell before ``cells[index]``."""
    for cell in reversed(cells[:index]):
        if cell.cell_type != "markdown":
            continue
        text = cell.source.strip()
        heading = ""
        lines = text.splitlines()
        if lines and lines[0].startswith("#"):
            heading, text = lines[0].lstrip("#").strip(), "\n".join(lines[1:]).strip()
        para = re.split(r"\n\s*\n", text)[0].strip() if text else ""
        return heading, para
    return "", ""


@dataclass
class Figure:
    path: Path
    notebook: Notebook | None
    heading: str = ""
    caption: str = ""
    label: str = ""


def expand_braces(text: str) -> list[str]:
    """``errorbar_category{,_llama}.{png,pdf}`` -> the four names (shell-style brace expansion)."""
    match = re.search(r"\{([^{}]*,[^{}]*)\}", text)
    if match is None:
        return [text]
    head, tail = text[: match.start()], text[match.end() :]
    return [name for alt in match.group(1).split(",") for name in expand_braces(head + alt + tail)]


def _written_figures(content) -> set[str]:
    """Figure stems a notebook's markdown says it writes: backticked ``figures/<name>.png`` paths."""
    stems = set()
    for cell in content.cells:
        if cell.cell_type != "markdown":
            continue
        for path in re.findall(r"`(?:[\w./-]*/)?figures/([^`\s/]+)`", cell.source):
            for name in expand_braces(path):
                if name.endswith(".png") or not Path(name).suffix:
                    stems.add(Path(name).stem if name.endswith(".png") else name)
    return stems


def _caption_for(content, stem: str, label: str) -> tuple[str, str]:
    """(heading, paragraph) of the notebook section about a figure: the one titled with its paper
    label, else the first later markdown cell that names the figure."""
    cells = content.cells
    for i, cell in enumerate(cells):
        if cell.cell_type != "markdown" or not label:
            continue
        if re.search(rf"^#+\s+{re.escape(label)}\s*$", cell.source, re.MULTILINE):
            heading, para = _caption_before(cells, i + 1)
            if not para:
                para = next(
                    (
                        _caption_before(cells, j + 1)[1]
                        for j in range(i + 1, len(cells))
                        if cells[j].cell_type == "markdown"
                    ),
                    "",
                )
            return heading, para
    for i, cell in enumerate(cells[1:], start=1):
        if cell.cell_type == "markdown" and stem in cell.source:
            return _caption_before(cells, i + 1)
    return "", ""


def map_figures(figures_dir: Path, notebooks: Sequence[Notebook], labels: dict[str, dict]) -> list[Figure]:
    """Every ``figures_dir/*.png`` with the notebook that wrote it and a caption from its text.

    The notebook is found, in this order, by the names its code saves under (string arguments of
    ``savefig`` calls), by the ``figures/<name>.png`` paths its markdown says it writes (brace
    patterns expanded), by the notebook owning the paper label ``fig:<name>``, and by f-string
    patterns of its ``savefig`` calls."""
    pngs = sorted(figures_dir.glob("*.png")) if figures_dir.is_dir() else []
    parsed = []
    for nb in notebooks:
        content = _read_nb(nb.executed or nb.source)
        parsed.append((nb, content, _saved_names(content), _written_figures(content)))
    by_name = {nb.name: (nb, content) for nb, content, _, _ in parsed}
    figures = []
    for png in pngs:
        stem = png.stem
        label = f"fig:{stem}" if f"fig:{stem}" in labels else ""
        hit, index = None, None
        for nb, content, strings, _ in parsed:
            index = next((i for i, v, rx in strings if not rx and v in (stem, f"{stem}.png")), None)
            if index is not None:
                hit = (nb, content)
                break
        if hit is None:
            hit = next(((nb, content) for nb, content, _, written in parsed if stem in written), None)
        if hit is None and label:
            hit = by_name.get(labels[label]["notebook"])
        if hit is None:
            for nb, content, strings, _ in parsed:
                index = next((i for i, v, rx in strings if rx and re.fullmatch(v, stem)), None)
                if index is not None:
                    hit = (nb, content)
                    break
        if hit is None:
            figures.append(Figure(png, None, label=label))
            continue
        nb, content = hit
        heading, caption = _caption_before(content.cells, index + 1) if index is not None else ("", "")
        if not caption:
            heading, caption = _caption_for(content, stem, label)
        figures.append(Figure(png, nb, heading, caption, label))
    return figures


# --------------------------------------------------------------------------- MathJax
def _npm() -> str | None:
    return shutil.which("npm")


def ensure_mathjax(cache: Path) -> Path | None:
    """An unpacked MathJax 3 ``es5/`` folder: ``GPAC_MATHJAX_DIR``, the cache, or ``npm pack`` into it.

    Returns None (and warns) when none can be had; the book then has no math rendering.
    """
    env = os.environ.get("GPAC_MATHJAX_DIR")
    if env:
        path = Path(env)
        if (path / "tex-mml-chtml.js").is_file():
            return path
        warnings.warn(f"GPAC_MATHJAX_DIR={env} has no tex-mml-chtml.js; ignoring it", stacklevel=2)
    target = cache / f"mathjax-{MATHJAX_VERSION}" / "es5"
    if (target / "tex-mml-chtml.js").is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    tarball = cache / f"mathjax-{MATHJAX_VERSION}.tgz"
    if not tarball.is_file():
        npm = _npm()
        if npm is None:
            warnings.warn("npm not found: MathJax cannot be fetched, math stays as TeX source", stacklevel=2)
            return None
        proc = subprocess.run(
            [npm, "pack", f"mathjax@{MATHJAX_VERSION}", "--pack-destination", str(cache), "--silent"],
            capture_output=True,
            text=True,
            cwd=cache,
        )
        if proc.returncode != 0 or not tarball.is_file():
            warnings.warn(f"npm pack mathjax@{MATHJAX_VERSION} failed: {proc.stderr.strip()[-500:]}", stacklevel=2)
            return None
    algo, _, expected = MATHJAX_INTEGRITY.partition("-")
    digest = base64.b64encode(hashlib.new(algo, tarball.read_bytes()).digest()).decode()
    if digest != expected:
        tarball.unlink()
        raise BookError(f"{tarball.name}: integrity check failed (got {algo}-{digest})")
    tmp = target.parent.with_name(target.parent.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(tarball) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith("package/")]
        for m in members:
            m.name = m.name[len("package/") :]
        tar.extractall(tmp, members=members, filter="data")
    shutil.rmtree(target.parent, ignore_errors=True)
    tmp.rename(target.parent)
    return target


def copy_mathjax(es5: Path, static: Path) -> Path:
    """Copy the parts of MathJax the book uses into ``static/mathjax`` (with its licence)."""
    dest = static / "mathjax"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for part in MATHJAX_PARTS:
        src = es5 / part
        if src.is_dir():
            shutil.copytree(src, dest / part)
        elif src.is_file():
            (dest / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / part)
    licence = es5.parent / "LICENSE"
    if licence.is_file():
        shutil.copy2(licence, dest / "LICENSE")
    return dest


# --------------------------------------------------------------------------- staging
def _md_escape_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _ref(label: str) -> str:
    return f"{{ref}}`{label} <{label.lower()}>`"


def artefact_table(notebooks: Sequence[Notebook], owners: dict[str, dict]) -> str:
    lines = ["| notebook | paper artefacts (LaTeX labels) | executed |", "|---|---|---|"]
    status = {"ok": "yes", "failed": "**failed**", "missing": "**not executed**"}
    for nb in notebooks:
        own = [lab for lab, info in owners.items() if info["notebook"] == nb.name]
        cell = ", ".join(_ref(lab) for lab in own) or "—"
        lines.append(f"| {{doc}}`{_md_escape_cell(nb.title)} <{nb.docname}>` | {cell} | {status[nb.status]} |")
    return "\n".join(lines)


def toc(notebooks: Sequence[Notebook]) -> str:
    blocks = []
    for digit, caption in CHAPTERS.items():
        docs = [nb.docname for nb in notebooks if nb.number // 10 == digit]
        if docs:
            blocks.append("```{toctree}\n:caption: " + caption + "\n:maxdepth: 1\n\n" + "\n".join(docs) + "\n```")
    others = [nb.docname for nb in notebooks if nb.number // 10 not in CHAPTERS]
    if others:
        blocks.append("```{toctree}\n:caption: More notebooks\n:maxdepth: 1\n\n" + "\n".join(others) + "\n```")
    blocks.append(
        "```{toctree}\n:caption: Reference\n:maxdepth: 1\n\narchitecture\nglossary\nartefacts\nfigures\napi/index\n```"
    )
    return "\n\n".join(blocks)


def artefacts_page(owners: dict[str, dict], notebooks: Sequence[Notebook]) -> str:
    titles = {nb.name: nb for nb in notebooks}
    lines = [
        "# Paper artefacts",
        "",
        "Every paper label the notebooks name, with the notebook section that reproduces it. The anchors",
        "are stable: `notebooks/<notebook>.html#table-<name>` or `#fig-<name>` (the label with `:` -> `-`).",
        "",
        "| label | reproduced in |",
        "|---|---|",
    ]
    for label in sorted(owners, key=lambda lab: (lab.split(":")[0] != "table", lab)):
        info = owners[label]
        nb = titles[info["notebook"]]
        lines.append(f"| {_ref(label)} | {{doc}}`{_md_escape_cell(nb.title)} <{nb.docname}>` |")
    return "\n".join(lines) + "\n"


def figures_page(figures: Sequence[Figure], owners: dict[str, dict]) -> str:
    out = [
        "# Figures",
        "",
        "Every figure the notebooks saved, with its caption (the notebook's own text before the code",
        "that draws it) and the notebook that made it. PDF versions sit beside the PNG files.",
        "",
    ]
    if not figures:
        out.append("*No figures were found: run the notebooks first.*")
    for fig in figures:
        name = fig.path.stem
        out.append(f"## {name}")
        out.append("")
        heading = "" if LABEL.fullmatch(f"`{fig.heading}`") else fig.heading  # a label heading says nothing
        caption = " ".join(part for part in (heading and f"**{heading}.**", fig.caption) if part)
        made = (
            f"Made by {{doc}}`{_md_escape_cell(fig.notebook.title)} <{fig.notebook.docname}>`"
            if fig.notebook
            else "Made by an unknown notebook"
        )
        if fig.label:
            made += f"; paper label {_ref(fig.label)}"
        caption = (caption + " " if caption else "") + made + "."
        out += [f"```{{figure}} _figures/{fig.path.name}", f":alt: {name}", ":width: 100%", "", caption, "```", ""]
    return "\n".join(out) + "\n"


_MD_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")
_NB_LINK = re.compile(r"^(?:.*/)?notebooks/(\d{2}_[A-Za-z0-9_\-]+)\.(?:py|ipynb|html)(#[^)\s]*)?$")


def readme_for_book(text: str) -> str:
    """The README with its links made to work inside the book: links to a notebook (its ``.py``, or
    its page of a built book, ``#fragment`` kept) go to the notebook's page; web links stay; links to
    other repository files or README sections, which the book does not have, become plain text."""
    import html as _html

    def inline(label: str) -> str:
        return re.sub(r"`([^`]+)`", r"<code>\1</code>", _html.escape(label, quote=False))

    def fix(match: re.Match) -> str:
        bang, label, target = match.groups()
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            return match.group(0)
        nb = _NB_LINK.match(target)
        if nb and not bang:
            return f'<a href="notebooks/{nb.group(1)}.html{nb.group(2) or ""}">{inline(label)}</a>'
        return "" if bang else label

    return _MD_LINK.sub(fix, text)


def architecture_page(src: Path, readme: Path = README) -> tuple[str, bool]:
    """The architecture page: the README's marked section, or a placeholder while it is absent."""
    text = readme.read_text() if readme.is_file() else ""
    if ARCH_START in text and ARCH_END in text:
        head, _, rest = text.partition(ARCH_START)
        section, _, tail = rest.partition(ARCH_END)
        # A section that opens with its own "## Architecture" heading gives the page its title:
        # its headings move up one level, and the page adds none of its own.
        first = next((line for line in section.splitlines() if line.strip()), "")
        own_title = re.match(r"^##\s", first) is not None
        if own_title:
            section = re.sub(r"^#(#+\s)", r"\1", section, flags=re.MULTILINE)
        inc = src / "_include"
        inc.mkdir(exist_ok=True)
        (inc / "README.md").write_text(readme_for_book(head + ARCH_START + section + ARCH_END + tail))
        body = (
            ("" if own_title else "# Architecture\n\n")
            + "```{include} _include/README.md\n"
            + f":start-after: {ARCH_START}\n"
            + f":end-before: {ARCH_END}\n"
            + "```\n"
        )
        return body, True
    body = (
        "# Architecture\n\n"
        "```{note}\nThe architecture section of `README.md` (between the markers "
        f"`{ARCH_START}` and `{ARCH_END}`) is not there yet; this page includes it once it is.\n```\n\n"
        "The package's layers, from its docstring:\n\n"
        "```{eval-rst}\n.. automodule:: gpac_utils\n   :no-members:\n   :no-index:\n```\n"
    )
    return body, False


def _is_papermill_banner(cell) -> bool:
    return (
        cell.cell_type == "markdown"
        and "papermill-error-cell-tag" in cell.metadata.get("tags", [])
        and "An Exception was encountered" in cell.source
    )


def _insert_under_title(content, cell) -> None:
    """Insert ``cell`` right under the notebook's ``# title`` line (splitting the header cell)."""
    import nbformat

    first = content.cells[0] if content.cells else None
    if first is not None and first.cell_type == "markdown" and first.source.lstrip().startswith("# "):
        title, _, rest = first.source.lstrip().partition("\n")
        first.source = title
        content.cells[1:1] = [cell, *([nbformat.v4.new_markdown_cell(rest.strip())] if rest.strip() else [])]
    else:
        content.cells.insert(0, cell)


def _notebook_warning(nb: Notebook) -> dict:
    import nbformat

    text = (
        f"```{{warning}}\nThis notebook **failed** when the runner executed it ({nb.error.strip()[:300]}); "
        "the outputs below stop at the failing cell.\n```"
    )
    return nbformat.v4.new_markdown_cell(text)


def stage(
    notebooks: Sequence[Notebook],
    src: Path,
    figures_dir: Path,
    mathjax: Path | None,
    profile: str,
) -> dict:
    """Write the Sphinx source folder ``src`` (erased first). Returns what was staged."""
    import nbformat

    if src.resolve() == DOCS.resolve():
        raise BookError("the staging folder must not be docs/ itself")
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(DOCS, src, ignore=shutil.ignore_patterns("__pycache__", "_build"))
    (src / "notebooks").mkdir(exist_ok=True)
    generated = src / "_generated"
    generated.mkdir(exist_ok=True)
    problems = []
    for nb in notebooks:
        dest = src / "notebooks" / f"{nb.name}.ipynb"
        if nb.status == "missing":
            problems.append(f"{nb.name}: not executed (no {nb.name}.ipynb) -- its page says so")
            warning = (
                f"```{{warning}}\nThis notebook was not executed for this build (profile `{profile}`): "
                f"no outputs to show. Run `python -m gpac_utils.workflow --profile {profile} {nb.name}` "
                "and rebuild the book.\n```\n"
            )
            title, _, rest = (nb.header.strip() or f"# {nb.name}").partition("\n")
            page = f"{title}\n\n{warning}\n{rest.strip()}\n"
            dest.with_suffix(".md").write_text(page)
            continue
        content = _read_nb(nb.executed)
        if nb.status == "failed":
            problems.append(f"{nb.name}: failed when executed ({nb.error.strip()[:200]})")
            # papermill's "An Exception was encountered" banner would become the page title: our own
            # warning goes under the title instead (papermill's marker at the failing cell stays).
            content.cells = [c for c in content.cells if not _is_papermill_banner(c)]
            _insert_under_title(content, _notebook_warning(nb))
        for cell in content.cells:
            tags = cell.metadata.get("tags", [])
            if "injected-parameters" in tags and "hide-input" not in tags:
                cell.metadata["tags"] = [*tags, "hide-input"]
        nbformat.write(content, str(dest))
    owners = label_owners(notebooks)
    figures = map_figures(figures_dir, notebooks, owners)
    (src / "_figures").mkdir(exist_ok=True)
    for fig in figures:
        shutil.copy2(fig.path, src / "_figures" / fig.path.name)
        pdf = fig.path.with_suffix(".pdf")
        if pdf.is_file():
            shutil.copy2(pdf, src / "_figures" / pdf.name)
    index = (DOCS / "index.md").read_text()
    index = index.replace("<!-- book:artefact-table -->", artefact_table(notebooks, owners))
    index = index.replace("<!-- book:toc -->", toc(notebooks))
    (src / "index.md").write_text(index)
    (src / "artefacts.md").write_text(artefacts_page(owners, notebooks))
    (src / "figures.md").write_text(figures_page(figures, owners))
    arch, has_arch = architecture_page(src)
    (src / "architecture.md").write_text(arch)
    if not has_arch:
        problems.append("README.md has no architecture markers yet: the Architecture page is a placeholder")
    (generated / "labels.json").write_text(json.dumps(owners, indent=1, sort_keys=True))
    (generated / "settings.json").write_text(json.dumps({"release": profile}))
    if mathjax is not None:
        copy_mathjax(mathjax, src / "_static")
    else:
        problems.append("no local MathJax: math is not rendered")
    return {"owners": owners, "figures": figures, "problems": problems}


# --------------------------------------------------------------------------- build
def build_html(src: Path, out: Path, strict: bool = False, jobs: int = 1) -> tuple[Path, list[str]]:
    """``sphinx -b html`` from ``src`` into ``out/html`` (doctrees in ``out/doctrees``); returns
    the HTML folder and Sphinx's warnings."""
    html_dir, doctrees = out / "html", out / "doctrees"
    shutil.rmtree(html_dir, ignore_errors=True)
    shutil.rmtree(doctrees, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    warn_file = out / "sphinx-warnings.txt"
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-E", "-q", "-j", str(jobs)]
    cmd += ["-d", str(doctrees), "-w", str(warn_file), str(src), str(html_dir)]
    if strict:
        cmd.append("-W")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    warns = [w for w in warn_file.read_text().splitlines() if w.strip()] if warn_file.is_file() else []
    if proc.returncode != 0:
        raise BookError(f"sphinx failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    (html_dir / ".nojekyll").touch()
    return html_dir, warns


class _Links(html.parser.HTMLParser):
    ATTRS = {"href", "src"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if value is None:
                continue
            if key in ("id", "name") and (key == "id" or tag == "a"):
                self.ids.add(value)
            elif key in self.ATTRS and tag != "base":
                self.links.append(value)


def check_links(html_dir: Path) -> list[str]:
    """Broken internal links of the whole book: ``"page.html: target (reason)"`` for each."""
    pages: dict[Path, _Links] = {}
    for path in sorted(html_dir.rglob("*.html")):
        if path.relative_to(html_dir).parts[0] == "_static":  # theme templates, not pages
            continue
        parser = _Links()
        parser.feed(path.read_text(errors="replace"))
        pages[path.resolve()] = parser
    broken = []
    for page, parser in pages.items():
        for link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:", "data:")):
                continue
            target = page if not parts.path else (page.parent / unquote(parts.path)).resolve()
            where = page.relative_to(html_dir.resolve())
            if not str(target).startswith(str(html_dir.resolve())):
                broken.append(f"{where}: {link} (outside the book)")
                continue
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{where}: {link} (no such file)")
                continue
            frag = unquote(parts.fragment)
            if frag and target.suffix == ".html":
                ids = pages.get(target.resolve())
                if ids is not None and frag not in ids.ids:
                    broken.append(f"{where}: {link} (no id {frag!r})")
    return broken


# --------------------------------------------------------------------------- the whole build
@dataclass
class BookResult:
    html: Path
    seconds: float
    notebooks: list[Notebook]
    warnings: list[str]
    problems: list[str]
    broken_links: list[str]


def run_missing(notebooks: Iterable[Path], profile: str, build_dir: Path) -> int:
    """Execute notebooks with the runner (a subprocess, the inline matplotlib backend so that the
    executed notebooks hold their figures). Returns the runner's exit code."""
    paths = [str(p) for p in notebooks]
    names = [Path(p).stem for p in paths]
    if not names:
        return 0
    env = dict(os.environ)
    env.pop("MPLBACKEND", None)  # a non-inline backend (the test suite's Agg) leaves no figures in outputs
    cmd = [sys.executable, "-m", "gpac_utils.workflow.runner", "--profile", profile, "--build-dir", str(build_dir)]
    print(f"book: executing {len(names)} notebook(s) first: {' '.join(names)}", flush=True)
    # One runner call per notebook (in number order): a failure leaves the others to run, and the
    # book shows the failed one as such.
    codes = [subprocess.run([*cmd, path], cwd=REPO_ROOT, env=env).returncode for path in paths]
    return max(codes)


def build_book(
    executed_dir: Path,
    out: Path,
    src: Path | None = None,
    figures_dir: Path | None = None,
    notebooks: Sequence[Path] | None = None,
    strict: bool = False,
    cache: Path | None = None,
) -> BookResult:
    """Stage and build the book from the executed notebooks in ``executed_dir`` (nothing runs)."""
    start = time.perf_counter()
    src = src or out.parent / f"{out.name}-src"
    figures_dir = figures_dir or executed_dir / "figures"
    sources = list(notebooks) if notebooks is not None else discover()
    nbs = [inspect_notebook(p, executed_dir) for p in sources]
    mathjax = ensure_mathjax(cache or BUILD / "cache")
    staged = stage(nbs, src, figures_dir, mathjax, executed_dir.name)
    for problem in staged["problems"]:
        warnings.warn(f"book: {problem}", stacklevel=2)
    html_dir, warns = build_html(src, out, strict=strict)
    broken = check_links(html_dir)
    return BookResult(html_dir, time.perf_counter() - start, nbs, warns, staged["problems"], broken)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m gpac_utils.workflow.book",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("notebooks", nargs="*", metavar="NOTEBOOK", help="names or numbers; default: every notebook")
    p.add_argument("--profile", choices=("paper", "fast"), default="paper", help="whose executed notebooks")
    p.add_argument("--executed", type=Path, default=None, help="folder of executed notebooks (default build/PROFILE)")
    p.add_argument("--figures", type=Path, default=None, help="figures folder (default: the profile's)")
    p.add_argument("--out", type=Path, default=BUILD / "book", help="output folder; the HTML goes to OUT/html")
    p.add_argument("--src", type=Path, default=None, help="staging source folder (default OUT-src)")
    p.add_argument("--no-run", action="store_true", help="do not execute missing notebooks first")
    p.add_argument("--strict", action="store_true", help="fail on any Sphinx warning or broken link")
    return p


def _select(specs: Sequence[str]) -> list[Path]:
    known = discover()
    if not specs:
        return known
    chosen = []
    for spec in specs:
        stem = Path(spec).stem
        hits = [p for p in known if p.stem == stem or (stem.isdigit() and int(p.name[:2]) == int(stem))]
        if len(hits) != 1:
            raise SystemExit(f"error: no single notebook {spec!r}; known: {', '.join(p.stem for p in known)}")
        chosen += hits
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    executed = args.executed or BUILD / args.profile
    figures = args.figures or (REPO_ROOT / "figures" if args.profile == "paper" else executed / "figures")
    chosen = _select(args.notebooks)
    if not args.no_run:
        missing = [p for p in chosen if not (executed / f"{p.stem}.ipynb").is_file()]
        if missing:
            if run_missing(missing, args.profile, executed.parent) != 0:
                print("book: some notebooks failed; building from whatever was executed", file=sys.stderr)
    try:
        result = build_book(executed, args.out, args.src, figures, chosen, strict=args.strict)
    except BookError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for line in result.warnings:
        print(f"sphinx: {line}", file=sys.stderr)
    for line in result.broken_links:
        print(f"broken link: {line}", file=sys.stderr)
    counts = {s: sum(nb.status == s for nb in result.notebooks) for s in ("ok", "failed", "missing")}
    print(
        f"book: {result.html / 'index.html'} in {result.seconds:.1f} s "
        f"({counts['ok']} notebooks executed, {counts['failed']} failed, {counts['missing']} not executed; "
        f"{len(result.warnings)} Sphinx warnings, {len(result.broken_links)} broken links)"
    )
    if result.broken_links or (args.strict and (result.warnings or result.problems)):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
