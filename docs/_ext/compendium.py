"""The book's only glue: executed notebooks in, papermill runtimes shown, MathJax served locally.

* ``config-inited``: copy the executed notebooks ``<book_executed>/NN_name.ipynb`` (written by
  papermill; the book never executes anything) into ``notebooks/`` of the source folder, where the
  static table of contents in ``index.md`` expects them.
* ``doctree-read``: read each notebook's papermill metadata. The run's time goes to myst-nb's
  execution statistics (the ``{nb-exec-table}`` directive of ``runtimes.md``, as on QuantEcon's
  status page), and a note under the notebook's title gives the run and its slowest cells.
* ``build-finished``: copy the parts of MathJax 3 that the book loads (from the npm package
  installed by ``npm ci --prefix docs/_mathjax``) into ``_static/mathjax/``.
"""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime
from pathlib import Path

from docutils import nodes
from myst_nb.sphinx_ import NbMetadataCollector
from sphinx.util import logging

LOG = logging.getLogger(__name__)
NOTEBOOK = re.compile(r"^\d\d_[A-Za-z0-9_]+\.ipynb$")
#: The MathJax 3 files the book loads: the TeX/MathML -> CommonHTML component, its fonts, the TeX
#: extensions it autoloads, and the menu / accessibility components it may load.
MATHJAX_PARTS = ("tex-mml-chtml.js", "output/chtml", "input/tex/extensions", "input/mml", "ui", "a11y", "adaptors")


def copy_executed(app, config) -> None:
    """Replace ``<srcdir>/notebooks/`` by the executed notebooks (mtimes kept: unchanged ones are not re-read)."""
    executed = Path(config.book_executed)
    found = sorted(p for p in executed.glob("*.ipynb") if NOTEBOOK.match(p.name)) if executed.is_dir() else []
    sources = {p.stem for p in Path(config.book_notebooks).glob("[0-9][0-9]_*.py")}
    missing = sorted(sources - {p.stem for p in found})
    if missing or not found:  # a warning, which -W makes an error
        names = ", ".join(missing) or "any notebook"
        LOG.warning(f"book_executed={executed}: not executed: {names} (run them first: make reproduce)")
    dest = Path(app.srcdir) / "notebooks"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir()
    for path in found:
        shutil.copy2(path, dest / path.name)


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"


def papermill_runtimes(app, doctree) -> None:
    """Execution statistics of a notebook page from the metadata papermill wrote into it."""
    path = Path(app.env.doc2path(app.env.docname))
    if path.suffix != ".ipynb":
        return
    nb = json.loads(path.read_text())
    run = nb["metadata"].get("papermill")
    if not run or run.get("duration") is None:
        LOG.warning("no papermill metadata (not executed by papermill?)", location=app.env.docname)
        return
    end = datetime.fromisoformat(run["end_time"])
    errors = [out for cell in nb["cells"] for out in cell.get("outputs", []) if out["output_type"] == "error"]
    failed = bool(run.get("exception") or errors)
    if failed:  # shown as failed (a warning: -W stops a book built from a failed run)
        LOG.warning("its papermill run failed: the page stops at the failing cell", location=app.env.docname)
    NbMetadataCollector.set_exec_data(
        app.env,
        app.env.docname,
        {
            "mtime": end.timestamp(),
            "runtime": run["duration"],
            "method": "papermill",
            "succeeded": not failed,
            "error": "the run stopped at an exception" if failed else None,
        },
    )
    cells = [  # (first line of the code, seconds)
        (("".join(cell["source"]).strip() or "(empty)").splitlines()[0][:60], cell["metadata"]["papermill"]["duration"])
        for cell in nb["cells"]
        if cell["cell_type"] == "code" and (cell["metadata"].get("papermill") or {}).get("duration") is not None
    ]
    params = ", ".join(f"{k}={v!r}" for k, v in run.get("parameters", {}).items())
    para = nodes.paragraph(
        text=f"Executed by papermill on {end:%Y-%m-%d %H:%M} UTC in {_seconds(run['duration'])}"
        f" ({params or 'default parameters'})"
        + (", failed: the outputs stop at the failing cell" if failed else "")
        + ". Slowest cells: "
    )
    for i, (line, sec) in enumerate(sorted(cells, key=lambda c: -c[1])[:3]):
        para += [nodes.Text(", " if i else ""), nodes.literal(text=line), nodes.Text(f" {_seconds(sec)}")]
    para += nodes.Text(".")
    note = nodes.admonition("", nodes.title(text="This run"), para, classes=["note"])
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is not None:
        title = section.next_node(nodes.title)
        section.insert(section.index(title) + 1, note)


def copy_mathjax(app, exception) -> None:
    es5, dest = Path(app.config.book_mathjax), Path(app.outdir) / "_static" / "mathjax"
    if exception is not None or app.builder.format != "html" or not es5.is_dir():
        return
    for part in MATHJAX_PARTS:
        (dest / part).parent.mkdir(parents=True, exist_ok=True)
        if (es5 / part).is_dir():
            shutil.copytree(es5 / part, dest / part, dirs_exist_ok=True)
        else:
            shutil.copy2(es5 / part, dest / part)
    shutil.copy2(es5.parent / "LICENSE", dest / "LICENSE")


def check_mathjax(app) -> None:
    if app.builder.format == "html" and not (Path(app.config.book_mathjax) / "tex-mml-chtml.js").is_file():
        LOG.warning(f"book_mathjax={app.config.book_mathjax}: no MathJax 3 (npm ci --prefix docs/_mathjax)")


def setup(app):
    app.add_config_value("book_executed", "", "env", str)
    app.add_config_value("book_notebooks", "", "env", str)
    app.add_config_value("book_mathjax", "", "html", str)
    app.connect("config-inited", copy_executed)
    app.connect("builder-inited", check_mathjax)
    app.connect("doctree-read", papermill_runtimes)
    app.connect("build-finished", copy_mathjax)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
