"""The book: ``sphinx-build -W`` (html and linkcheck) over fast-profile executed notebooks, read in Chromium.

Every notebook is executed on the fast profile once (``conftest.fast_notebook``, shared with the notebook
tests: 01 and 02 are the suite's CPU walk; ``GPAC_BOOK_EXECUTED`` names a folder of executed notebooks to
use instead), ``docs/`` is copied to a scratch folder and built with warnings as errors, exactly as ``make book`` does.
Then Playwright drives Debian's Chromium (``/usr/bin/chromium``, installed by ``make test``; no
browser download) over the built book served on loopback, and checks what a reader sees: the
images load, MathJax renders the math, an exercise's solution stays hidden until its toggle is
clicked, and every link of the paper-artefact index lands on an existing anchor.
Screenshots go to ``build/book-test/``.
"""

from __future__ import annotations

import functools
import http.server
import importlib.metadata
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpac_utils.workflow.paths import BUILD, REPO_ROOT

NOTEBOOKS = sorted(p.stem for p in (REPO_ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
MATHJAX = REPO_ROOT / "docs" / "_mathjax" / "node_modules" / "mathjax" / "es5"
SCREENSHOTS = BUILD / "book-test"
#: ``--exception-on-warning`` (stop at the first warning) exists from Sphinx 8.1 on (before it, ``-W`` stopped).
SPHINX_8_1 = tuple(int(p) for p in importlib.metadata.version("sphinx").split(".")[:2]) >= (8, 1)
#: The notebook page with the demo exercise (a gated solution holding a code cell).
EXERCISE_PAGE = "notebooks/12_finite_sample.html"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def sphinx(builder: str, src: Path, out: Path, executed: Path, keep_going: bool = True) -> subprocess.CompletedProcess:
    """``sphinx-build -W`` of ``src`` as ``make book`` runs it (doctrees shared between builders); without
    ``keep_going`` it stops at the first warning (Sphinx 8.1+: ``-W`` alone finishes the build first)."""
    stop = ["--keep-going"] if keep_going else ["--exception-on-warning"] if SPHINX_8_1 else []
    cmd = [sys.executable, "-m", "sphinx", "-W", *stop, "-q", "-b", builder]
    cmd += ["-d", str(out / "doctrees")]
    settings = {"book_executed": executed, "book_notebooks": REPO_ROOT / "notebooks", "book_mathjax": MATHJAX}
    cmd += [arg for name, value in settings.items() for arg in ("-D", f"{name}={value}")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([*cmd, str(src), str(out / builder)], capture_output=True, text=True, env=env)


def test_a_book_without_every_executed_notebook_fails_naming_them(tmp_path):
    src = tmp_path / "repo" / "docs"
    shutil.copytree(REPO_ROOT / "docs", src, ignore=shutil.ignore_patterns("notebooks", "node_modules", "_build"))
    executed = tmp_path / "executed"
    executed.mkdir()
    proc = sphinx("html", src, tmp_path / "out", executed, keep_going=False)
    assert proc.returncode != 0
    assert f"book_executed={executed}: not executed: {', '.join(NOTEBOOKS)} (" in proc.stderr, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def book(tmp_path_factory, fast_notebook) -> Path:
    """The HTML folder of the book built from every notebook's fast-profile run (``conftest.fast_notebook``)."""
    if not (MATHJAX / "tex-mml-chtml.js").is_file():
        pytest.skip("no local MathJax: `make test` installs it (npm ci --prefix docs/_mathjax), npm is missing here")
    tmp = tmp_path_factory.mktemp("book")
    executed = Path(os.environ.get("GPAC_BOOK_EXECUTED") or tmp / "executed")
    if "GPAC_BOOK_EXECUTED" not in os.environ:
        executed.mkdir()
        for name in NOTEBOOKS:
            shutil.copy2(fast_notebook(name), executed / f"{name}.ipynb")
    # A copy of docs/ (and the README its architecture page includes): the build writes its source folder.
    src = tmp / "repo" / "docs"
    shutil.copytree(REPO_ROOT / "docs", src, ignore=shutil.ignore_patterns("notebooks", "node_modules", "_build"))
    shutil.copy2(REPO_ROOT / "README.md", src.parent / "README.md")
    out = tmp / "out"
    for builder in ("html", "linkcheck"):
        proc = sphinx(builder, src, out, executed)
        assert proc.returncode == 0, f"sphinx -b {builder} -W failed:\n{proc.stderr[-6000:]}"
    return out / "html"


@pytest.mark.slow
@pytest.mark.notebook
def test_book_pages_labels_and_runtimes(book):
    for name in NOTEBOOKS:
        assert (book / "notebooks" / f"{name}.html").is_file(), name
    assert (book / ".nojekyll").is_file()
    assert (book / "_static" / "mathjax" / "tex-mml-chtml.js").is_file()
    assert "cdn.jsdelivr" not in (book / "index.html").read_text()
    # The paper labels are anchors of the notebook sections (MyST targets in the notebooks).
    page21 = (book / "notebooks" / "21_table_known_groups.html").read_text()
    assert 'id="table-01-results-known"' in page21
    assert "notebooks/21_table_known_groups.html#table-01-results-known" in (book / "artefacts.html").read_text()
    # Runtimes from papermill's metadata: the statistics table lists every notebook, and each page
    # says how long its run took.
    runtimes = (book / "runtimes.html").read_text()
    for name in NOTEBOOKS:
        assert f"notebooks/{name}.html" in runtimes, name
    assert "Executed by papermill on" in page21 and "Slowest cells: <code" in page21
    # The exercise and its solution (with its code cell) are rendered by sphinx-exercise.
    page12 = (book / EXERCISE_PAGE).read_text()
    assert 'id="ex-finite-sample-size"' in page12 and "solution" in page12 and "n_needed" in page12


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def served(book):
    """The book on a loopback HTTP server, as a static host serves it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(book)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def page():
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("no Chromium: `make test` installs Debian's chromium (apt-get, needs root); not here")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        yield browser.new_page(viewport={"width": 1280, "height": 900})
        browser.close()


def _images_and_math(page) -> tuple[list[dict], dict]:
    images = page.evaluate(
        """() => Promise.all(Array.from(document.images).map(img => {
               img.loading = 'eager';
               return img.decode().then(() => 0, () => 0).then(() => ({src: img.getAttribute('src'),
                                                                        width: img.naturalWidth}));
           }))"""
    )
    math = page.evaluate(
        """() => MathJax.startup.promise.then(() => ({
               rendered: document.querySelectorAll('mjx-container').length,
               errors: document.querySelectorAll('mjx-merror').length}))"""
    )
    return images, math


@pytest.mark.slow
@pytest.mark.notebook
def test_book_reads_in_a_browser(served, page):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for path in ("index.html", "notebooks/00_quickstart.html", "notebooks/21_table_known_groups.html"):
        page.goto(f"{served}/{path}")
        images, math = _images_and_math(page)
        page.screenshot(path=str(SCREENSHOTS / f"{Path(path).stem}.png"))
        assert all(img["width"] > 0 for img in images), (path, [i for i in images if i["width"] == 0])
        assert math["rendered"] > 0 and math["errors"] == 0, (path, math)
    assert len(images) >= 2, "notebook 21 shows its figures"

    # The exercise's solution is hidden until its toggle is clicked.
    page.goto(f"{served}/{EXERCISE_PAGE}")
    solution = page.locator("div.solution").first
    code = solution.locator("pre", has_text="n_needed").first
    solution.scroll_into_view_if_needed()
    assert page.locator("div.exercise").first.is_visible()
    assert not code.is_visible(), "the solution shows before it is asked for"
    solution.locator("button.toggle-button").click()
    code.wait_for(state="visible", timeout=10_000)
    page.screenshot(path=str(SCREENSHOTS / "exercise_solution_open.png"))

    # Every link of the paper-artefact index lands on an element with its anchor.
    page.goto(f"{served}/artefacts.html")
    links = page.eval_on_selector_all("article a.reference.internal[href*='#']", "as => as.map(a => a.href)")
    assert len(links) >= 15, links
    for link in links:
        page.goto(link)
        found = page.evaluate("() => document.getElementById(decodeURIComponent(location.hash.slice(1))) !== null")
        assert found, f"artefact link without its anchor: {link}"
