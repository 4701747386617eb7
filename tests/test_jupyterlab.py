"""The notebooks in JupyterLab, as a class opens them (issue 33, item 8; issue 50).

* Opening and saving a notebook leaves its ``.py`` file byte-identical (jupytext.toml's metadata
  filters: the header holds only stable keys), checked through jupytext's own contents manager —
  the code JupyterLab saves with — for every notebook.
* ``GPAC_PROFILE`` chooses the profile of every notebook in one place; the runner's profile wins.
* The lab settings live in ``jupyter/``: ``lab-overrides.json`` (the ``.py`` files open as notebooks) and
  ``lab-page-config.json`` (no cell toolbar, see :func:`test_the_cell_toolbar_is_off`). pyproject.toml
  ships them as data files, so every install gets them — ``make venv``, ``make venv-lesson`` and a
  student's ``pip install -e ".[lesson]"`` (setuptools' editable wheel skips data files;
  jupyter/editable_data.py puts them back; an editable wheel is built here, offline, to check).
* Every notebook that links a glossary term holds the entries as its second cell, and no ``{ref}`` points
  to a later cell (workflow/scripts/glossary_cells.py: what jupyterlab-myst can resolve while JupyterLab
  is still attaching the cells).
* A real JupyterLab — the light install's, ``.venv-lesson``, with the settings it installed and the
  windowing JupyterLab ships by default (``contentVisibility``: cells attached while the browser is
  idle) — on loopback with a token, in headless Chromium (Debian's ``/usr/bin/chromium``, driven by
  Playwright as in tests/test_book.py; no browser download). Lessons 00 and 11 each open as notebooks;
  a markdown cell JupyterLab has not attached yet is made active at once (what Run All did to the last
  cell when it threw ``TypeError ... reading 'node'``); the first glossary links rendered already point
  to their entries; Run All runs every cell with no error on the fast profile; the MyST markup renders
  (jupyterlab-myst); and the page logs no error at all (a console error or an uncaught exception fails
  the test: "Cross reference target was not found", the TypeError, jupyterquiz's script). In lesson 00
  a glossary link far down goes up to its entry (not to the top), a self-check question (gpac_utils.quiz)
  opens its answer on a click, the widget's labels are not cut, moving a slider and the recipe redraws
  the plot, and saving leaves the file unchanged. They are marked ``lesson``: ``make test-lesson`` runs
  them once ``.venv-lesson`` is built. Screenshots go to ``build/lab-test/``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import tomllib
import urllib.request
import zipfile
from pathlib import Path

import jupytext
import pytest
import repo_scripts

import gpac_utils
from gpac_utils.workflow import config, runner
from gpac_utils.workflow.paths import BUILD, NOTEBOOKS, REPO_ROOT

NOTEBOOK_FILES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
glossary_cells = repo_scripts.load("workflow/scripts/glossary_cells.py")
SCREENSHOTS = BUILD / "lab-test"
KERNEL_DISPLAY_NAME = "Python 3 (gpac)"  # what make venv installs (ipykernel install --display-name)
LAB_OVERRIDES = REPO_ROOT / "jupyter" / "lab-overrides.json"
PAGE_CONFIG = REPO_ROOT / "jupyter" / "lab-page-config.json"
#: where an install puts each file of jupyter/ (pyproject.toml's data files), relative to its prefix
INSTALLED = {
    LAB_OVERRIDES: "share/jupyter/lab/settings/overrides.d/lab-overrides.json",
    PAGE_CONFIG: "etc/jupyter/labconfig/page_config.d/lab-page-config.json",
}
CELL_TOOLBAR = "@jupyterlab/cell-toolbar-extension:plugin"
LESSON_VENV = REPO_ROOT / ".venv-lesson"  # the light install (make venv-lesson), as students have it


def _lab_save(root: Path, name: str) -> None:
    """Open ``name`` as JupyterLab does (jupytext's contents manager), mark it as a session would, save it."""
    from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
    from jupytext.async_contentsmanager import build_async_jupytext_contents_manager_class

    manager = build_async_jupytext_contents_manager_class(AsyncLargeFileManager)(root_dir=str(root))

    async def open_and_save():
        nb = (await manager.get(name, content=True, type="notebook"))["content"]
        nb["metadata"]["kernelspec"] = {"display_name": KERNEL_DISPLAY_NAME, "language": "python", "name": "python3"}
        nb["metadata"]["language_info"] = {"name": "python", "version": sys.version.split()[0]}
        nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
        for cell in nb["cells"]:
            cell["metadata"].update({"trusted": True, "collapsed": False, "editable": True})
            if cell["cell_type"] == "markdown":
                cell["metadata"]["jp-MarkdownHeadingCollapsed"] = True
        await manager.save({"type": "notebook", "content": nb, "format": "json"}, name)

    asyncio.run(open_and_save())


def test_opening_and_saving_every_notebook_in_jupyterlab_leaves_it_unchanged(tmp_path):
    shutil.copy2(REPO_ROOT / "jupytext.toml", tmp_path / "jupytext.toml")
    changed = []
    for path in NOTEBOOK_FILES:
        shutil.copy2(path, tmp_path / path.name)
        _lab_save(tmp_path, path.name)
        if (tmp_path / path.name).read_bytes() != path.read_bytes():
            changed.append(path.name)
    assert not changed, f"saving in JupyterLab rewrites {changed}: see jupytext.toml's metadata filters"


@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=lambda path: path.stem)
def test_the_glossary_cell_holds_every_linked_term_and_is_current(path):
    """JupyterLab resolves a {term} only within the notebook: its glossary cell, generated from docs/glossary.md."""
    text = path.read_text()
    glossary = glossary_cells.entries()
    assert glossary_cells.updated(text, glossary) == text, (
        f"{path.name}: its glossary cell is missing or out of date: python workflow/scripts/glossary_cells.py"
    )
    linked = glossary_cells.linked_terms(glossary_cells._strip(text))
    if linked:
        cells = jupytext.read(path).cells
        (index,) = [i for i, c in enumerate(cells) if c.source.startswith("## Terms used in this notebook")]
        cell = cells[index]
        assert cell.metadata["tags"] == ["remove-cell"]  # the book drops it: the glossary page is the one definition
        # before every cell that links a term: JupyterLab attaches the cells top first, and jupyterlab-myst
        # resolves a cell's links against the cells attached so far (glossary_cells.py's docstring)
        assert index == 1, f"{path.name}: the glossary cell is cell {index}, not the one after the title cell"
        defined = {glossary_cells._key(t) for t in re.findall(r"^([^:\s].*)\n: ", cell.source, re.M)}
        assert linked <= defined, f"{path.name}: terms linked but not in its glossary cell: {linked - defined}"


#: a MyST reference to a label, ``{ref}`label``` or ``{ref}`text <label>``` (and {numref}, {eq})
REFERENCE = re.compile(r"\{(?:ref|numref|eq)\}`(?:[^`<]*<)?([^`>]+?)>?`")
#: a label a notebook defines: a directive's ``:label:`` or a MyST target ``(label)=``
LABEL = re.compile(r"^(?::label:\s*(\S+)|\((\S+)\)=)\s*$", re.M)


@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=lambda path: path.stem)
def test_every_reference_points_to_an_earlier_cell_of_its_notebook(path):
    """jupyterlab-myst sees one notebook, and of it the cells attached so far: a {ref} to another file never
    resolves, one to a later cell logs "Cross reference target was not found" until that cell is attached."""
    cells = [c for c in jupytext.read(path).cells if c.cell_type == "markdown"]
    defined: set[str] = set()
    for index, cell in enumerate(cells):
        defined |= {a or b for a, b in LABEL.findall(cell.source)}
        missing = [label for label in REFERENCE.findall(cell.source) if label not in defined]
        assert not missing, f"{path.name}: markdown cell {index} refers to {missing}, not defined above it"


def test_a_reference_to_a_later_cell_is_caught():
    later = "# %% [markdown]\n# See {ref}`the exercise <ex-a>`.\n\n# %% [markdown]\n# :::{exercise}\n# :label: ex-a\n"
    cells = jupytext.reads(later, fmt="py:percent").cells
    assert REFERENCE.findall(cells[0].source) == ["ex-a"] and LABEL.findall(cells[1].source) == [("ex-a", "")]


def test_the_glossary_cell_moves_after_the_title_cell():
    """A notebook whose glossary cell is last (as before) gets it after its title cell, and back is a no-op."""
    glossary = glossary_cells.entries()
    title = "# %% [markdown]\n# # A title\n"
    body = "# %% [markdown]\n# The {term}`risk` of a threshold.\n\n# %%\nx = 1\n"
    old = title + "\n" + body + "\n" + glossary_cells.cell(title + body, glossary)
    new = glossary_cells.updated(old, glossary)
    assert new == title + "\n" + glossary_cells.cell(title + body, glossary) + "\n" + body
    assert glossary_cells.updated(new, glossary) == new
    assert [c.source.split("\n")[0] for c in jupytext.reads(new, fmt="py:percent").cells] == [
        "# A title",
        "## Terms used in this notebook",
        "The {term}`risk` of a threshold.",
        "x = 1",
    ]


def test_a_term_missing_from_the_glossary_is_refused():
    with pytest.raises(ValueError, match="not an entry"):
        glossary_cells.cell("# A {term}`no such term` here.\n", glossary_cells.entries())


@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=lambda path: path.stem)
def test_the_header_holds_only_stable_keys(path):
    header = path.read_text().split("\n# ---\n", 1)[0]
    for volatile in ("jupytext_version", "format_version", "metadata_filter"):
        assert volatile not in header, f"{path.name}: the header holds {volatile}"
    assert jupytext.read(path).metadata["kernelspec"]["display_name"] == KERNEL_DISPLAY_NAME
    assert f'--display-name "{KERNEL_DISPLAY_NAME}"' in (REPO_ROOT / "Makefile").read_text()


# ------------------------------------------------------------------ the profile of a class, in one place
def test_gpac_profile_chooses_the_profile_of_every_notebook(monkeypatch):
    try:
        monkeypatch.setenv(config.PROFILE_ENV, "fast")
        cfg = config.load("21_table_known_groups", "paper")
        assert cfg.profile == "fast"
        assert cfg.n_trials == config.read_config("21_table_known_groups")["profiles"]["fast"]["n_trials"]
        monkeypatch.setenv(config.PROFILE_ENV, "quick")
        with pytest.raises(config.ConfigError, match=r"^GPAC_PROFILE: unknown profile 'quick'; choose one of"):
            config.load("21_table_known_groups", "paper")
        monkeypatch.setenv(config.PROFILE_ENV, "")  # empty: the parameter decides
        assert config.load("21_table_known_groups", "paper").profile == "paper"
    finally:
        from gpac_utils.workflow import paths

        paths.set_profile(None)


def test_the_runner_profile_wins_over_gpac_profile(tmp_path, monkeypatch):
    """A GPAC_PROFILE left in the shell never changes what ``make reproduce`` or the tests run."""
    nb = tmp_path / "01_env.py"
    nb.write_text(
        '# %%\nimport os\n\n# %% tags=["parameters"]\nprofile = "paper"\n\n'
        '# %%\nprint("ENV=" + os.environ.get("GPAC_PROFILE", "unset"))\n'
    )
    monkeypatch.setenv(config.PROFILE_ENV, "paper")
    out = runner.run_notebook(nb, "fast", out_dir=tmp_path / "out", timeout=120, progress_bar=False)
    assert "ENV=fast" in out.read_text()
    assert os.environ[config.PROFILE_ENV] == "paper"  # restored after the run


# ------------------------------------------------------------------ JupyterLab's settings and make lab
def _data_files() -> dict[str, list[str]]:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]


def test_py_files_open_as_notebooks_wherever_jupyter_lab_starts():
    settings = json.loads(LAB_OVERRIDES.read_text())
    assert settings["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]["python"] == "Jupytext Notebook"
    # an install (make venv, make venv-lesson, pip install [-e] ".[lesson]") puts each file where JupyterLab reads it:
    # every overrides.d/*.json of its application settings (jupyterlab_server's _get_overrides) and every
    # labconfig/page_config.d/*.json of the Jupyter config path (its page config)
    installed = {f"{folder}/{Path(f).name}": f for folder, files in _data_files().items() for f in files}
    assert installed == {target: source.relative_to(REPO_ROOT).as_posix() for source, target in INSTALLED.items()}
    makefile = (REPO_ROOT / "Makefile").read_text()
    stamp_recipe = makefile[makefile.index("$(STAMP):") :].split("\n\n")[0]
    assert "$(INSTALL_LAB_SETTINGS)" in stamp_recipe, "make venv installs the lab settings"
    # make lab refreshes the very files pip installed (not a copy of its own that a stale one would override)
    for var, source in (("LAB_SETTINGS", LAB_OVERRIDES), ("LAB_PAGE_CONFIG", PAGE_CONFIG)):
        target = re.search(rf"^{var} := \$\(VENV\)/(.*)$", makefile, re.MULTILINE)[1]
        assert target == INSTALLED[source]
        assert f"cp {source.relative_to(REPO_ROOT).as_posix()} $({var})" in makefile
    for stamp in ("$(STAMP):", "$(LESSON_STAMP):"):  # an edit of the settings reinstalls them
        assert "$(LAB_CONFIG)" in makefile[makefile.index(stamp) :].split("\n")[0], stamp
    lab_config = re.search(r"^LAB_CONFIG := (.*)$", makefile, re.MULTILINE)[1].split()
    assert lab_config == [source.relative_to(REPO_ROOT).as_posix() for source in INSTALLED]


def test_the_cell_toolbar_is_off():
    """The cell toolbar's overlap check reads a rendered markdown cell's output synchronously; jupyterlab-myst
    renders it asynchronously, after the cell is attached: a cell made active in between (Run All makes the
    last cell active while JupyterLab still attaches the cells) threw ``TypeError: Cannot read properties of
    undefined (reading 'node')`` (celltoolbartracker.ts, _markdownOverlapsToolbar). Its setting
    ``showToolbar`` reaches only the notebooks open when the settings load, so the page config disables the
    plugin; the browser test below makes that cell active and fails on the error."""
    page_config = json.loads(PAGE_CONFIG.read_text())
    assert page_config == {"disabledExtensions": {CELL_TOOLBAR: True}}


def _build(kind: str, project: Path, out: Path) -> dict[str, bytes]:
    """{name: bytes} of what setuptools builds from ``project`` (``kind``: "wheel", "editable" or "sdist"), offline."""
    code = f"from setuptools import build_meta; print(build_meta.build_{kind}({str(out)!r}))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = out / proc.stdout.split()[-1]
    if kind == "sdist":
        with tarfile.open(built) as sdist:
            sdist.extractall(out, filter="data")
        return {"root": str(out / built.name.removesuffix(".tar.gz")).encode()}
    with zipfile.ZipFile(built) as wheel:
        return {name: wheel.read(name) for name in wheel.namelist()}


def test_an_editable_install_carries_the_lab_settings(tmp_path):
    """``pip install -e ".[lesson]"`` (the syllabus) and make venv-lesson install the wheel setuptools builds
    for ``-e``: it carries both files as data files (jupyter/editable_data.py), as the plain wheel does."""
    project = tmp_path / "project"
    sources = ["pyproject.toml", "README.md", "MANIFEST.in", "gpac_utils/__init__.py", "jupyter/editable_data.py"]
    for name in [*sources, *(s.relative_to(REPO_ROOT) for s in INSTALLED)]:
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, project / name)
    data = f"gpac_utils-{gpac_utils.__version__}.data/data/"
    # and the wheel built from the sdist (as `python -m build` does): the sdist holds the command (MANIFEST.in)
    unpacked = Path(_build("sdist", project, tmp_path / "sdist")["root"].decode())
    for kind, where in (("editable", project), ("wheel", project), ("wheel", unpacked)):
        files = _build(kind, where, tmp_path / f"{kind}-{where.name}")
        for source, target in INSTALLED.items():
            assert files.get(data + target) == source.read_bytes(), f"the {kind} wheel of {where.name} lacks {target}"
    # without the command, setuptools' editable wheel has none (if it starts to, jupyter/editable_data.py can go)
    text = (project / "pyproject.toml").read_text()
    (project / "pyproject.toml").write_text(text.replace('editable_wheel = "jupyter.editable_data.EditableWheel"', ""))
    assert not [name for name in _build("editable", project, tmp_path / "plain") if ".data/" in name]


@pytest.mark.lesson
def test_the_lesson_venv_holds_the_lab_settings():
    """What make venv-lesson installed is what jupyter/ holds (the browser test below runs that JupyterLab)."""
    if not (LESSON_VENV / ".installed").exists():
        pytest.skip(".venv-lesson is not built: `make venv-lesson` (make test builds it before make test-lesson)")
    for source, target in INSTALLED.items():
        installed = LESSON_VENV / target
        assert installed.is_file() and installed.read_bytes() == source.read_bytes(), (
            f"{installed} is missing or differs from {source.relative_to(REPO_ROOT)}: make venv-lesson"
        )


def test_make_lab_runs_as_root():
    dry = subprocess.run(["make", "-n", "-o", ".venv/.installed", "lab"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    command = dry.stdout.replace("\\\n", " ")
    assert "jupyter lab --ServerApp.root_dir=" in command
    assert ("--allow-root" in command) == (os.getuid() == 0)
    assert re.search(r"--ServerApp\.open_browser=(True|False)", command)


# ------------------------------------------------------------------ a real JupyterLab in Chromium
#: the lessons the browser test opens: the quickstart (its widget, its quiz, saving) and a theory lesson
LAB_LESSONS = ("00_quickstart", "11_partition_gap")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The light install's JupyterLab (``.venv-lesson``: its settings as installed, the windowing it ships by
    default) on loopback with a token over a copy of the lessons, as a student starts it."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("no Chromium: `make test` installs Debian's chromium (apt-get, needs root); not here")
    if not (LESSON_VENV / ".installed").exists():
        pytest.skip(".venv-lesson is not built: `make venv-lesson` (make test builds it before make test-lesson)")
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "repo"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy2(REPO_ROOT / "jupytext.toml", root / "jupytext.toml")
    for lesson in LAB_LESSONS:
        shutil.copy2(NOTEBOOKS / f"{lesson}.py", root / "notebooks" / f"{lesson}.py")
    port, token = _free_port(), "gpac-lab-test"
    # none of the machine user's Jupyter settings, config, kernels or paths: only what the venv installed
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("JUPYTER") and k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    env |= {
        config.PROFILE_ENV: "fast",  # the class's choice; figures go to the suite's GPAC_FIGURES folder
        "PYTHONPATH": str(REPO_ROOT),  # this checkout's package, for the kernel too
        "JUPYTERLAB_SETTINGS_DIR": str(tmp / "user-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_DATA_DIR": str(tmp / "data"),
    }
    cmd = [str(LESSON_VENV / "bin" / "python"), "-m", "jupyter", "lab", f"--ServerApp.root_dir={root}"]
    cmd += ["--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", f"--IdentityProvider.token={token}"]
    cmd += ["--ServerApp.open_browser=False", "--LabApp.expose_app_in_browser=True"]
    cmd += ["--allow-root"] if os.getuid() == 0 else []
    log = (tmp / "lab.log").open("w")
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not start:\n{(tmp / 'lab.log').read_text()[-3000:]}")
                time.sleep(0.5)
        yield {"base": base, "token": token, "root": root, "chromium": chromium}
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture
def page(lab):
    """A page of headless Chromium that records every console error and uncaught exception (``page.errors``)."""
    from playwright.sync_api import sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=lab["chromium"], headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.errors = []
        page.on("pageerror", lambda exc: page.errors.append(f"{exc} @ {getattr(exc, 'stack', '')}"[:1500]))
        page.on("console", lambda msg: page.errors.append(msg.text[:1500]) if msg.type == "error" else None)
        yield page
        browser.close()


_CELL_ERRORS = """() => {
    const nb = window.jupyterapp.shell.currentWidget.content;
    const errors = [];
    for (let i = 0; i < nb.model.cells.length; i++) {
        const cell = nb.model.cells.get(i).toJSON();
        for (const out of cell.outputs || []) {
            if (out.output_type === 'error') errors.push(`cell ${i}: ${out.ename}: ${out.evalue}`);
        }
    }
    return errors;
}"""

#: make active the first markdown cell JupyterLab has not attached yet (it attaches the cells while idle, top
#: first); its index, -1 if none is left. What Run All does to the last cell, and a click while it loads.
_ACTIVATE_UNATTACHED_MARKDOWN = """() => {
    const nb = window.jupyterapp.shell.currentWidget.content;
    const i = nb.widgets.findIndex(cell => cell.model.type === 'markdown' && !cell.inputArea);
    if (i >= 0) nb.activeCellIndex = i;
    return i;
}"""
_RENDERED = """i => { const cell = window.jupyterapp.shell.currentWidget.content.widgets[i];
    return !!cell.inputArea && !!cell.inputArea.renderedInput; }"""
_ALL_MARKDOWN_RENDERED = """() => window.jupyterapp.shell.currentWidget.content.widgets.every(
    c => c.model.type !== 'markdown' || (c.inputArea && c.inputArea.renderedInput))"""
_LINKS = "() => Array.from(document.querySelectorAll('.jp-MarkdownCell a.hover-link')).map(a => a.getAttribute('href'))"


def _idle(page) -> None:
    """Wait until what JupyterLab defers to idle time (the cell toolbar's overlap check did) has run."""
    for _ in range(2):
        page.evaluate("() => new Promise(done => requestIdleCallback(() => done(true), {timeout: 3000}))")


def _open_and_run(page, lab, lesson: str) -> None:
    """Open ``lesson``, make an unattached markdown cell active at once, Run All, and check what a student sees."""
    # a workspace of its own: the server's default one would reopen the lesson an earlier test opened
    page.goto(f"{lab['base']}/lab/workspaces/{lesson}/tree/notebooks/{lesson}.py?token={lab['token']}")
    # opened as a notebook (the Jupytext Notebook viewer), not as a text file
    page.locator(".jp-NotebookPanel").first.wait_for(state="visible", timeout=60_000)
    page.wait_for_function(
        "() => { const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
        f" return !!panel && panel.context.path === 'notebooks/{lesson}.py' && panel.context.isReady"
        " && panel.content.widgets.length > 0"
        " && panel.content.widgets.length === panel.content.model.cells.length; }",
        timeout=60_000,
    )
    active = page.evaluate(_ACTIVATE_UNATTACHED_MARKDOWN)
    # the first links rendered already point to their entries (the glossary cell is attached before them)
    page.wait_for_function(f"() => ({_LINKS})().length > 0", timeout=60_000)
    first = page.evaluate(_LINKS)
    assert "#" not in first, f"{lesson}: {first.count('#')} of the first {len(first)} glossary links go nowhere"
    # that cell stays active while JupyterLab attaches it and jupyterlab-myst renders it
    page.wait_for_function(_RENDERED, arg=active, timeout=120_000)
    _idle(page)
    assert page.evaluate("() => window.jupyterapp.shell.currentWidget.content.activeCellIndex") == active
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.sessionContext.session"
        " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel",
        timeout=60_000,
    )
    # Run All, its promise not awaited (a page.evaluate has no timeout): it resolves once every cell ran
    page.evaluate(
        "() => { window.gpacRan = undefined; window.jupyterapp.commands.execute('notebook:run-all-cells')"
        ".then(ran => { window.gpacRan = ran; }, error => { window.gpacRan = String(error); }); }"
    )
    page.wait_for_function("() => window.gpacRan !== undefined", timeout=180_000)
    ran = page.evaluate("() => window.gpacRan")
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'"
        " && !Array.from(document.querySelectorAll('.jp-InputPrompt')).some(p => p.textContent.includes('*'))",
        timeout=120_000,
    )
    _idle(page)
    page.screenshot(path=str(SCREENSHOTS / f"{lesson}_run.png"))
    assert ran is True, f"{lesson}: Run All returned {ran}"
    assert page.evaluate(_CELL_ERRORS) == [], f"a cell of {lesson} failed in JupyterLab"
    assert active >= 0, f"{lesson}: every cell was attached already: the test made no unrendered cell active"
    # MyST markup renders (jupyterlab-myst): no raw roles or directives in the rendered markdown
    rendered = page.evaluate(
        "() => Array.from(document.querySelectorAll('.jp-MarkdownOutput')).map(e => e.textContent).join('\\n')"
    )
    for raw in ("{term}", "{ref}", "{py:", ":::{exercise}", ":class: dropdown", "{solution-start}"):
        assert raw not in rendered, f"{lesson}: {raw!r} shows as raw text in JupyterLab"
    hrefs = page.evaluate(_LINKS)
    assert len(hrefs) >= 10 and "#" not in hrefs, f"{lesson}: unresolved links in JupyterLab: {hrefs.count('#')}"
    assert not page.errors, f"{lesson}: the page logged {len(page.errors)} errors, the first: {page.errors[0]}"
    assert not page.evaluate(f"() => window.jupyterapp.isPluginActivated('{CELL_TOOLBAR}')"), "the cell toolbar is on"


@pytest.mark.lesson
@pytest.mark.slow
@pytest.mark.notebook
def test_a_lesson_runs_in_jupyterlab_and_its_widget_redraws(lab, page):
    lesson = "00_quickstart"
    source = lab["root"] / "notebooks" / f"{lesson}.py"
    before = source.read_bytes()
    _open_and_run(page, lab, lesson)

    # a glossary link far down goes up to its entry (in the glossary cell, the second), not to the top
    scroller = "document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer')"
    term = page.locator(".jp-MarkdownCell a.hover-link[href^='#term-violation']").last
    target = term.get_attribute("href")[1:]
    term.scroll_into_view_if_needed()
    top = page.evaluate(f"() => {scroller}.scrollTop")
    term.click()
    in_view = (
        "id => { const e = document.getElementById(id); const r = e && e.getBoundingClientRect();"
        " return !!r && r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; }"
    )
    page.wait_for_function(in_view, arg=target, timeout=15_000)  # it scrolls smoothly
    after = page.evaluate(f"() => {scroller}.scrollTop")
    assert after < top - 1000 and after > 300, (top, after)  # up, and not to the top (the title cell is above)
    assert page.evaluate("id => document.getElementById(id).innerText", target).strip().lower() == "violation rate"
    page.screenshot(path=str(SCREENSHOTS / f"{lesson}_glossary.png"))

    # the self-check questions: an answer opens on a click and says whether it is right
    answer = page.locator(".gpac-quiz details.right").first
    answer.scroll_into_view_if_needed()
    answer.locator("summary").click()
    answer.locator(".why").wait_for(state="visible", timeout=10_000)
    assert answer.locator(".why").inner_text().startswith("✔ Right")

    # the widget: labels not cut, a slider and the recipe redraw the plot with no error
    widget = page.locator(".widget-interact").first
    widget.scroll_into_view_if_needed()
    labels = widget.locator(".widget-label")
    assert labels.count() >= 5
    cut = [
        text
        for text, (scroll, client) in zip(
            labels.all_inner_texts(),
            labels.evaluate_all("ls => ls.map(l => [l.scrollWidth, l.clientWidth])"),
            strict=True,
        )
        if scroll > client + 1
    ]
    assert not cut, f"widget labels cut: {cut}"
    image = widget.locator(".widget-output img").first
    image.wait_for(state="visible", timeout=30_000)
    first = image.get_attribute("src")
    readout = widget.locator(".widget-hslider", has_text="ε (target)").locator(".widget-readout").first
    readout.click()
    page.keyboard.press("Control+A")
    page.keyboard.type("0.2")
    page.keyboard.press("Enter")
    page.wait_for_function(
        "src => { const img = document.querySelector('.widget-interact .widget-output img');"
        " return img && img.getAttribute('src') !== src; }",
        arg=first,
        timeout=30_000,
    )
    second = image.get_attribute("src")
    widget.locator("select").first.select_option(label="paper (CLT, resample, max)")
    page.wait_for_function(
        "src => { const img = document.querySelector('.widget-interact .widget-output img');"
        " return img && img.getAttribute('src') !== src; }",
        arg=second,
        timeout=30_000,
    )
    widget.screenshot(path=str(SCREENSHOTS / f"{lesson}_widget.png"))
    assert page.evaluate(_CELL_ERRORS) == []

    # saving writes the same file: the tab is clean and so is `git status`
    page.evaluate("() => { window.jupyterapp.commands.execute('docmanager:save'); }")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
    assert not page.errors, page.errors[:1]  # none left out: the quiz runs no script
    assert source.read_bytes() == before, "saving the lesson in JupyterLab changed its .py file"


@pytest.mark.lesson
@pytest.mark.slow
@pytest.mark.notebook
def test_a_theory_lesson_runs_in_jupyterlab(lab, page):
    _open_and_run(page, lab, LAB_LESSONS[1])
