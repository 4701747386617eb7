"""Sphinx configuration of the compendium's book.

This file is copied with the rest of ``docs/`` into the staging source folder
(``build/book-src/`` by default) by :mod:`gpac_utils.workflow.book`, which also writes the
generated pages (landing page, paper-artefact index, figure gallery, architecture page) and the
executed notebooks there. Build the book with ``make book`` or
``python -m gpac_utils.workflow.book``, not with ``sphinx-build`` on ``docs/`` directly.

Nothing is executed here: the notebooks were executed by the runner
(:mod:`gpac_utils.workflow.runner`) and are rendered with their stored outputs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
GENERATED = HERE / "_generated"
SETTINGS = json.loads((GENERATED / "settings.json").read_text()) if (GENERATED / "settings.json").exists() else {}

project = "G-PAC / C-PAC reasoning — a compendium"
author = "gpac-compendium contributors"
copyright = "the gpac-compendium contributors"  # noqa: A001 (Sphinx's name)
release = SETTINGS.get("release", "")

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "paper_labels",
]

# -- notebooks: rendered from their stored outputs, never executed again -------------------
nb_execution_mode = "off"
nb_merge_streams = True
nb_output_stderr = "show"
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
myst_dmath_double_inline = True
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type"]

exclude_patterns = ["_build", "_generated", "_ext", "_include", "**.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]

# -- API reference -------------------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_numpy_docstring = True
napoleon_google_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True  # an "Attributes" section must not duplicate the documented properties

# -- math: a local copy of MathJax (the book must render offline, no CDN) ------------------
# gpac_utils.workflow.book copies MathJax 3 into _static/mathjax/ (see its module docstring).
if (HERE / "_static" / "mathjax" / "tex-mml-chtml.js").exists():
    mathjax_path = "mathjax/tex-mml-chtml.js"
mathjax3_config = {"tex": {"tags": "ams"}, "options": {"enableMenu": False}}

# -- HTML ----------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = "G-PAC / C-PAC compendium"
html_static_path = ["_static"]
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

# -- paper labels --------------------------------------------------------------------------
paper_labels_file = str(GENERATED / "labels.json")

highlight_language = "text"  # unlabelled code fences (e.g. the README's layout tree) are not Python

nitpicky = False
if os.environ.get("GPAC_BOOK_NITPICKY"):
    nitpicky = True
