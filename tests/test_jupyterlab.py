"""The notebooks in JupyterLab, as a class opens them (issue 33, item 8).

* Opening and saving a notebook leaves its ``.py`` file byte-identical (jupytext.toml's metadata
  filters: the header holds only stable keys), checked through jupytext's own contents manager —
  the code JupyterLab saves with — for every notebook.
* ``GPAC_PROFILE`` chooses the profile of every notebook in one place; the runner's profile wins.
* ``.venv/bin/jupyter lab`` opens the ``.py`` files as notebooks: the setting lives in
  jupyter/lab-overrides.json, which ``make venv`` installs in the venv's lab settings.
* A real JupyterLab (loopback, a token) in headless Chromium (Debian's ``/usr/bin/chromium``, driven by
  Playwright as in tests/test_book.py; no browser download): notebook 00 opens as a notebook, runs on
  the fast profile with no error, the MyST markup renders (jupyterlab-myst), the widget's labels are
  not cut, moving a slider and the recipe redraws the plot, and saving leaves the file unchanged.
  Every glossary link resolves to its entry (the notebook's glossary cell, workflow/scripts/glossary_cells.py):
  none is ``href="#"``, and a click scrolls to the entry instead of the top. The self-check questions
  (gpac_utils.quiz) open their answer on a click. The page logs no error at all: jupyterquiz, whose
  script threw on display and on every click, is gone. Screenshots go to ``build/lab-test/``.
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
import time
import urllib.request
from pathlib import Path

import jupytext
import pytest
import repo_scripts

from gpac_utils.workflow import config, runner
from gpac_utils.workflow.paths import BUILD, NOTEBOOKS, REPO_ROOT

NOTEBOOK_FILES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
glossary_cells = repo_scripts.load("workflow/scripts/glossary_cells.py")
SCREENSHOTS = BUILD / "lab-test"
KERNEL_DISPLAY_NAME = "Python 3 (gpac)"  # what make venv installs (ipykernel install --display-name)
LAB_OVERRIDES = REPO_ROOT / "jupyter" / "lab-overrides.json"
LESSON = "00_quickstart"


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
        (cell,) = [c for c in jupytext.read(path).cells if c.source.startswith("## Terms used in this notebook")]
        assert cell.metadata["tags"] == ["remove-cell"]  # the book drops it: the glossary page is the one definition
        defined = {glossary_cells._key(t) for t in re.findall(r"^([^:\s].*)\n: ", cell.source, re.M)}
        assert linked <= defined, f"{path.name}: terms linked but not in its glossary cell: {linked - defined}"


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
def test_py_files_open_as_notebooks_wherever_jupyter_lab_starts():
    settings = json.loads(LAB_OVERRIDES.read_text())
    assert settings["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]["python"] == "Jupytext Notebook"
    makefile = (REPO_ROOT / "Makefile").read_text()
    stamp_recipe = makefile[makefile.index("$(STAMP):") :].split("\n\n")[0]
    assert "$(INSTALL_LAB_SETTINGS)" in stamp_recipe, "make venv installs the lab settings"
    install = re.search(r"^INSTALL_LAB_SETTINGS = (.*)$", makefile, re.MULTILINE)[1]
    assert "cp jupyter/lab-overrides.json $(LAB_SETTINGS)" in install
    target = re.search(r"^LAB_SETTINGS := \$\(VENV\)/(.*)$", makefile, re.MULTILINE)[1]
    # JupyterLab reads every overrides.d/*.json of its application settings folder (jupyterlab_server)
    assert target == "share/jupyter/lab/settings/overrides.d/gpac-compendium.json"


def test_make_lab_runs_as_root():
    dry = subprocess.run(["make", "-n", "-o", ".venv/.installed", "lab"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    command = dry.stdout.replace("\\\n", " ")
    assert "jupyter lab --ServerApp.root_dir=" in command
    assert ("--allow-root" in command) == (os.getuid() == 0)
    assert re.search(r"--ServerApp\.open_browser=(True|False)", command)


# ------------------------------------------------------------------ a real JupyterLab in Chromium
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    """JupyterLab on loopback with a token over a copy of notebook 00, as `.venv/bin/jupyter lab` starts it."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("no Chromium: `make test` installs Debian's chromium (apt-get, needs root); not here")
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy2(REPO_ROOT / "jupytext.toml", root / "jupytext.toml")
    shutil.copy2(NOTEBOOKS / f"{LESSON}.py", root / "notebooks" / f"{LESSON}.py")
    port, token = _free_port(), "gpac-lab-test"
    # every cell in the page (no windowing), so that the test can read the rendered markdown and the widget
    tracker = tmp_path / "user-settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    env = {
        **os.environ,
        config.PROFILE_ENV: "fast",  # the class's choice; figures go to the suite's GPAC_FIGURES folder
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "user-settings"),  # not the machine user's own settings
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
    }
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={root}", "--ServerApp.ip=127.0.0.1"]
    cmd += [f"--ServerApp.port={port}", f"--IdentityProvider.token={token}", "--ServerApp.open_browser=False"]
    cmd += ["--LabApp.expose_app_in_browser=True", *(["--allow-root"] if os.getuid() == 0 else [])]
    log = (tmp_path / "lab.log").open("w")
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
                    pytest.fail(f"jupyter lab did not start:\n{(tmp_path / 'lab.log').read_text()[-3000:]}")
                time.sleep(0.5)
        yield {"base": base, "token": token, "root": root, "chromium": chromium}
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


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


@pytest.mark.slow
@pytest.mark.notebook
def test_a_lesson_runs_in_jupyterlab_and_its_widget_redraws(lab):
    from playwright.sync_api import sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    source = lab["root"] / "notebooks" / f"{LESSON}.py"
    before = source.read_bytes()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=lab["chromium"], headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page_errors, unresolved = [], []
        page.on("pageerror", lambda exc: page_errors.append(f"{exc} @ {getattr(exc, 'stack', '')}"))
        page.on("console", lambda msg: unresolved.append(msg.text) if "target was not found" in msg.text else None)
        page.goto(f"{lab['base']}/lab/tree/notebooks/{LESSON}.py?token={lab['token']}")
        # opened as a notebook (the Jupytext Notebook viewer), not as a text file
        page.locator(".jp-NotebookPanel").first.wait_for(state="visible", timeout=60_000)
        page.wait_for_function(
            "() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
            " && window.jupyterapp.shell.currentWidget.sessionContext"
            " && window.jupyterapp.shell.currentWidget.sessionContext.session"
            " && window.jupyterapp.shell.currentWidget.sessionContext.session.kernel",
            timeout=60_000,
        )
        ran = page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.wait_for_function(
            "() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'"
            " && !Array.from(document.querySelectorAll('.jp-InputPrompt')).some(p => p.textContent.includes('*'))",
            timeout=120_000,
        )
        page.screenshot(path=str(SCREENSHOTS / "lesson_00_run.png"))
        assert ran is not False
        assert page.evaluate(_CELL_ERRORS) == [], "a cell of the lesson failed in JupyterLab"

        # MyST markup renders (jupyterlab-myst): no raw roles or directives in the rendered markdown
        rendered = page.evaluate(
            "() => Array.from(document.querySelectorAll('.jp-MarkdownOutput')).map(e => e.innerText).join('\\n')"
        )
        for raw in ("{term}", "{ref}", ":::{exercise}", ":class: dropdown", "{solution-start}"):
            assert raw not in rendered, f"{raw!r} shows as raw text in JupyterLab"

        # glossary links resolve (no href="#", no unresolved reference) and a click goes to the entry, not the top
        hrefs = page.evaluate(
            "() => Array.from(document.querySelectorAll('.jp-MarkdownCell a.hover-link'))"
            ".map(a => a.getAttribute('href'))"
        )
        assert len(hrefs) >= 10 and "#" not in hrefs, f"unresolved links in JupyterLab: {hrefs.count('#')}"
        assert not unresolved, unresolved[:1]
        scroller = "document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer')"
        term = page.locator(".jp-MarkdownCell a.hover-link[href='#term-risk']").first
        term.scroll_into_view_if_needed()
        top = page.evaluate(f"() => {scroller}.scrollTop")
        term.click()
        # the notebook scrolls (smoothly) until the entry, the last cell's, is in view
        in_view = (
            "() => { const e = document.getElementById('term-risk'); const r = e && e.getBoundingClientRect();"
            " return !!r && r.top >= 0 && r.bottom <= window.innerHeight; }"
        )
        page.wait_for_function(in_view, timeout=15_000)
        assert page.evaluate(f"() => {scroller}.scrollTop") > top + 500
        assert page.evaluate("() => document.getElementById('term-risk').innerText").strip().lower() == "risk"
        page.screenshot(path=str(SCREENSHOTS / "lesson_00_glossary.png"))

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
        widget.screenshot(path=str(SCREENSHOTS / "lesson_00_widget.png"))
        assert page.evaluate(_CELL_ERRORS) == []

        # saving writes the same file: the tab is clean and so is `git status`
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
        browser.close()
    assert not page_errors, page_errors  # none left out: the quiz runs no script
    assert source.read_bytes() == before, "saving the lesson in JupyterLab changed its .py file"
