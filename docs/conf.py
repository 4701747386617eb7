"""Sphinx configuration of the compendium's book (Sphinx + myst-nb + sphinx-book-theme).

Build it with ``make book`` (``PROFILE=fast`` for the fast profile's notebooks), which runs::

    python -m sphinx -W -b html -D book_executed=build/<profile> docs build/book/html

The notebooks are rendered from the outputs papermill stored in ``build/<profile>/NN_name.ipynb``;
nothing is executed here (``nb_execution_mode = "off"``). The table of contents is ``index.md``;
the paper's labels (``table:...``, ``fig:...``) are MyST targets in the notebooks' markdown. The
glue (copying the executed notebooks in, the papermill runtimes, the local MathJax) is the
``compendium`` extension in ``_ext/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "_ext"), str(HERE.parent)]  # the glue; the checkout's gpac_utils for autodoc

project = "G-PAC / C-PAC reasoning — a compendium"
author = "gpac-compendium contributors"
copyright = "the gpac-compendium contributors"  # noqa: A001 (Sphinx's name)

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinx.ext.githubpages",  # .nojekyll: the folder is served as it is
    "sphinx_exercise",
    "sphinx_togglebutton",
    "compendium",
]

# -- the executed notebooks: copied in from here, rendered with their stored outputs ------------
book_executed = str(HERE.parent / "build" / "paper")  # make book: -D book_executed=build/<profile>
book_notebooks = str(HERE.parent / "notebooks")  # every notebooks/NN_name.py must have been executed
nb_execution_mode = "off"
nb_merge_streams = True
nb_output_stderr = "show"
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
myst_dmath_double_inline = True
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type"]
exclude_patterns = ["_build", "_ext", "_mathjax", "_slides", "**.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]

# -- API reference ----------------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_numpy_docstring = True
napoleon_google_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True  # an "Attributes" section must not duplicate the documented properties

# -- math: MathJax 3 from npm (docs/_mathjax/package-lock.json), served by the book, no CDN -------
book_mathjax = str(HERE / "_mathjax" / "node_modules" / "mathjax" / "es5")
mathjax_path = "mathjax/tex-mml-chtml.js"
mathjax3_config = {"tex": {"tags": "ams"}, "options": {"enableMenu": False}}

# -- HTML -------------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = "G-PAC / C-PAC compendium"
html_copy_source = True
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "navigation_with_keys": False,
    # No search-engine, analytics or CDN assets: the folder must work from any static host, offline.
    "use_repository_button": False,
}
html_context = {"default_mode": "light"}
highlight_language = "text"  # unlabelled code fences (e.g. the README's layout tree) are not Python

# -- the lecture slides (make slides): the decks of build/slides/ beside the pages, linked from teaching.md
book_slides = HERE.parent / "build" / "slides"
html_extra_path = [str(book_slides)] if (book_slides / "slides.json").is_file() else []

# -- linkcheck: offline; the internal references are checked by the -W html build ---------------
linkcheck_ignore = [r"https?://"]
