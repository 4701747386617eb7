"""The book (gpac_utils.workflow.book): built from fast-profile executed notebooks, read in a real browser.

The fast test checks the pieces without Sphinx (label owners, figure mapping, the link checker).
The slow one executes notebook 21 on the fast profile (or reuses ``build/fast/`` when it is up
to date, or the folder named by ``GPAC_BOOK_EXECUTED``), builds the whole book from them -- the
other notebooks become "not executed" pages -- and opens the landing page and notebook 21 in
headless Chromium (Debian's ``chromium``, installed by ``make test``), driven over the DevTools
protocol with ``websocket-client``. It asserts that every image loaded, that MathJax rendered the
math, and that no internal link of the whole build is broken. Screenshots: ``build/book-test/``.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from gpac_utils.workflow import book

#: The pages the browser test needs: the landing page and a notebook page with figures and math.
NEEDED = ("21_table_known_groups",)
SCREENSHOTS = book.BUILD / "book-test"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
    "--window-size=1280,900",
]


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


# --------------------------------------------------------------------------- no Sphinx
def test_link_checker_finds_missing_files_and_anchors(tmp_path):
    (tmp_path / "a.html").write_text(
        '<a href="b.html#here">ok</a><a href="b.html#gone">x</a><a href="c.html">x</a>'
        '<img src="img.png"><a href="https://example.org/">ext</a><a href="#top">self</a><p id="top"></p>'
    )
    (tmp_path / "b.html").write_text('<h1 id="here">b</h1>')
    broken = book.check_links(tmp_path)
    assert sorted(broken) == [
        "a.html: b.html#gone (no id 'gone')",
        "a.html: c.html (no such file)",
        "a.html: img.png (no such file)",
    ]


def test_brace_patterns_expand_like_a_shell():
    assert book.expand_braces("errorbar_category{,_llama}.{png,pdf}") == [
        "errorbar_category.png",
        "errorbar_category.pdf",
        "errorbar_category_llama.png",
        "errorbar_category_llama.pdf",
    ]
    assert book.expand_braces("plain.png") == ["plain.png"]


def test_readme_links_are_made_to_work_inside_the_book():
    text = (
        "[21](notebooks/21_table_known_groups.py), [t](build/book/html/notebooks/21_x.html#table-a), "
        "[`data`](gpac_utils/data.py), [sec](#the-method), [web](https://example.org/), ![f](figures/a.png)"
    )
    assert book.readme_for_book(text) == (
        '<a href="notebooks/21_table_known_groups.html">21</a>, <a href="notebooks/21_x.html#table-a">t</a>, '
        "`data`, sec, [web](https://example.org/), "
    )


def test_labels_and_figures_are_mapped_to_their_notebooks(tmp_path):
    notebooks = [book.inspect_notebook(p, tmp_path) for p in book.discover()]
    assert notebooks, "no notebooks found"
    owners = book.label_owners(notebooks)
    by_name = {nb.name: nb for nb in notebooks}
    for label, info in owners.items():
        # The owner is the first notebook (in number order) whose header says it reproduces the label.
        first = next((nb.name for nb in notebooks if label in nb.reproduces), None)
        if first is not None:
            assert info["notebook"] == first, (label, info)
    if "21_table_known_groups" in by_name and "table:01_results_known" in owners:
        assert owners["table:01_results_known"]["id"] == "table-01_results_known"
        assert owners["table:01_results_known"]["notebook"] == "21_table_known_groups"
    # Figures: names the notebooks save under map back to them (a fake figures folder).
    figs = tmp_path / "figures"
    figs.mkdir()
    for stem in ("errorbar_category", "quickstart_risk_vs_eps", "unknown_figure"):
        (figs / f"{stem}.png").write_bytes(b"")
    mapped = {f.path.stem: f for f in book.map_figures(figs, notebooks, owners)}
    assert mapped["unknown_figure"].notebook is None
    if "21_table_known_groups" in by_name:
        assert mapped["errorbar_category"].notebook.name == "21_table_known_groups"
        assert mapped["errorbar_category"].label == "fig:errorbar_category"
    if "00_quickstart" in by_name:
        assert mapped["quickstart_risk_vs_eps"].notebook.name == "00_quickstart"


# --------------------------------------------------------------------------- browser
class CDP:
    """A minimal Chrome DevTools protocol client for one page target."""

    def __init__(self, ws_url: str):
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method: str, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, ev in enumerate(self.events):
                if ev.get("method") == method:
                    return self.events.pop(i)
            self.events.append(json.loads(self.ws.recv()))
        raise TimeoutError(method)

    def evaluate(self, expression: str, await_promise: bool = False):
        res = self.call("Runtime.evaluate", expression=expression, awaitPromise=await_promise, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression[:80]}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def close(self):
        self.ws.close()


class Browser:
    """Headless Chromium with a fresh profile, and its DevTools endpoint."""

    def __init__(self, executable: str, workdir: Path):
        self.profile = Path(tempfile.mkdtemp(prefix="chromium-", dir=workdir))
        self.proc = subprocess.Popen(
            [executable, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.is_file() and port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.proc.stderr.read().decode(errors="replace")[-2000:] if self.proc.stderr else ""
                self.close()
                raise RuntimeError(f"chromium did not start: {err}")
            time.sleep(0.1)
        self.port = int(port_file.read_text().split()[0])

    def page(self) -> CDP:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(req, timeout=30) as resp:
            target = json.load(resp)
        return CDP(target["webSocketDebuggerUrl"])

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def _serve(folder: Path):
    """A static HTTP server on loopback for ``folder`` (as a static host would serve the book)."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def inspect_page(cdp: CDP, url: str, screenshot: Path, scroll_to: str | None = None) -> dict:
    """Load ``url``; wait for images and MathJax; screenshot; what the page shows."""
    cdp.call("Page.enable")
    cdp.call("Runtime.enable")
    cdp.call("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False)
    cdp.call("Page.navigate", url=url)
    cdp.wait_event("Page.loadEventFired", timeout=90)
    images = cdp.evaluate(
        """Promise.all(Array.from(document.images).map(img => {
               img.loading = 'eager';
               return img.decode().then(() => 0, () => 0).then(() => ({
                   src: img.getAttribute('src'), width: img.naturalWidth, complete: img.complete}));
           }))""",
        await_promise=True,
    )
    math = cdp.evaluate(
        """(window.MathJax && MathJax.startup && MathJax.startup.promise
              ? MathJax.startup.promise : Promise.reject('no MathJax')).then(() => ({
               containers: document.querySelectorAll('mjx-container').length,
               errors: document.querySelectorAll('mjx-merror').length,
               raw: document.querySelectorAll('.math:not(:has(mjx-container))').length}),
               e => ({containers: 0, errors: 0, raw: -1, reason: String(e)}))""",
        await_promise=True,
    )
    if scroll_to:
        cdp.evaluate(f"(document.querySelector({json.dumps(scroll_to)}) || document.body).scrollIntoView(true)")
        cdp.evaluate("window.scrollBy(0, -120)")
        time.sleep(0.3)
    shot = cdp.call("Page.captureScreenshot", format="png")
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    screenshot.write_bytes(base64.b64decode(shot["data"]))
    title = cdp.evaluate("document.title")
    return {"images": images, "math": math, "title": title}


def _executed_fast(fast_run) -> Path:
    """A folder of fast-profile executed notebooks holding :data:`NEEDED` (``GPAC_BOOK_EXECUTED`` wins)."""
    env_dir = os.environ.get("GPAC_BOOK_EXECUTED")
    if env_dir:
        return Path(env_dir)
    (name,) = NEEDED  # the suite's shared execution (conftest.fast_run): one folder per notebook
    return fast_run(name).nb.parent


@pytest.mark.slow
@pytest.mark.notebook
def test_book_builds_and_reads_in_a_browser(tmp_path, fast_run):
    executable = _chromium()
    if executable is None:
        pytest.skip(
            "no Chromium: `make test` installs Debian's chromium (apt-get); without apt and root it cannot, "
            "so the browser check is skipped here"
        )
    missing = [n for n in NEEDED if n not in {p.stem for p in book.discover()}]
    assert not missing, f"notebooks the book test needs are gone: {missing}"
    executed = _executed_fast(fast_run)
    out = tmp_path / "book"
    result = book.build_book(executed, out, figures_dir=executed / "figures")
    html_dir = result.html
    status = {nb.name: nb.status for nb in result.notebooks}
    assert all(status[n] == "ok" for n in NEEDED), status

    # The pages exist, and the whole build has no broken internal link.
    for page in ("index.html", "architecture.html", "glossary.html", "artefacts.html", "figures.html"):
        assert (html_dir / page).is_file(), page
    for name in NEEDED:
        assert (html_dir / "notebooks" / f"{name}.html").is_file(), name
    assert (html_dir / ".nojekyll").is_file()
    assert not result.broken_links, "\n".join(result.broken_links)
    # Paper labels are anchors on the page that reproduces them, and the index links there.
    page21 = (html_dir / "notebooks" / "21_table_known_groups.html").read_text()
    assert 'id="table-01_results_known"' in page21
    assert "notebooks/21_table_known_groups.html#table-01_results_known" in (html_dir / "artefacts.html").read_text()
    # The figure gallery shows the figures the notebooks wrote, each with the notebook that made it.
    gallery = (html_dir / "figures.html").read_text()
    assert "_images/" in gallery and "notebooks/21_table_known_groups.html" in gallery
    # MathJax is served by the book itself, not a CDN.
    assert (html_dir / "_static" / "mathjax" / "tex-mml-chtml.js").is_file()
    assert "cdn.jsdelivr" not in (html_dir / "index.html").read_text()

    server = _serve(html_dir)
    browser = Browser(executable, tmp_path)
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        pages = {
            "landing": (f"{base}/index.html", None),
            "notebook": (f"{base}/notebooks/21_table_known_groups.html", "div.cell_output img"),
        }
        seen = {}
        for key, (url, scroll) in pages.items():
            cdp = browser.page()
            try:
                seen[key] = inspect_page(cdp, url, SCREENSHOTS / f"{key}.png", scroll)
            finally:
                cdp.close()
    finally:
        browser.close()
        server.shutdown()

    for key, info in seen.items():
        bad = [img for img in info["images"] if not img["width"]]
        assert not bad, f"{key}: images that did not load: {bad}"
        assert info["math"]["containers"] > 0, f"{key}: no rendered math: {info['math']}"
        assert info["math"]["errors"] == 0, f"{key}: MathJax errors: {info['math']}"
    figures = [img for img in seen["notebook"]["images"] if "_images/" in (img["src"] or "")]
    assert figures, f"the notebook page shows no figure: {seen['notebook']['images']}"
    for key in pages:
        assert (SCREENSHOTS / f"{key}.png").stat().st_size > 10_000
