"""The lecture slides (``make slides``, workflow/scripts/slides.py), built and read in Chromium.

The decks are built into a scratch folder from the notebooks' ``slideshow`` cell metadata and the
sessions of docs/teaching.md, then Playwright drives Debian's Chromium (``/usr/bin/chromium``, no
browser download) over them on loopback, as tests/test_book.py does for the book: each deck has the
slide count the build reports (reveal.js counts them), MathJax renders its math without an error,
every image loads, and no slide's content is taller than the slide. A screenshot of the first
slide of each lecture part goes to ``build/slides-test/``. The teaching page links every deck with
its slide and question counts.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import threading

import pytest
import repo_scripts

from gpac_utils.workflow.paths import BUILD, REPO_ROOT

SCRIPT = REPO_ROOT / "workflow" / "scripts" / "slides.py"
SCREENSHOTS = BUILD / "slides-test"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]

slides = repo_scripts.load(SCRIPT)


def test_sessions_come_from_the_teaching_page():
    sessions = slides.sessions()
    assert [s.number for s in sessions] == [1, 2, 3]
    lectures = {s.number: [p.notebook for p in s.parts] for s in sessions}
    assert lectures[1] == ["00_quickstart", "10_oracle_partition"], lectures
    assert set(lectures[2]) >= {"11_partition_gap", "12_finite_sample", "13_validity_audit"}, lectures
    assert lectures[3] == ["31_realdata_case_study", "32_label_budget", "33_online_gpac"], lectures


def test_a_slide_keeps_headings_lists_and_math_not_prose():
    source = (
        "## 1. Routing\n\nA paragraph of prose only.\n\n$$\\hat f(x) = 1$$\n\nThe risk $R(u)$ it controls.\n\n"
        "- a {term}`risk` bullet\n- another {ref}`text <label>`\n\n(target)=\nMore prose."
    )
    text = slides.slide_markdown(source, "unused")
    shown = "$$\\hat f(x) = 1$$\n\nThe risk $R(u)$ it controls.\n\n- a risk bullet\n- another text"
    assert text == f"## 1. Routing\n\n{shown}"
    assert slides.slide_markdown("Prose with $x$.", "Section") == "## Section\n\nProse with $x$."
    assert slides.slide_markdown("**Aims.** You can\n- a", "S") == "## Aims\n\nYou can\n- a"
    assert slides.slide_markdown("Long prose with $x$ " * 20 + "\n\n- item", "S") == "## S\n\n- item"
    assert slides.slide_markdown("## A\n\n- a\n\n## B\n\n- b", "S") == "## A\n\n- a"
    assert slides.plain("(exercise {ref}`ex-partition-gap-by-hand`)") == "(exercise “partition gap by hand”)"


def test_every_lecture_part_has_formulas_or_figures_and_questions():
    for session in slides.sessions():
        for part in session.parts:
            cells = slides.notebook_slides(part.notebook)
            assert len(cells) >= 3, (part.notebook, len(cells))
            shown = "\n".join(c.source for c in cells)
            assert "$" in shown or "](figures/" in shown, part.notebook
            assert len(slides.question_slides(part.notebook)) >= 2, part.notebook


def test_a_marked_cell_with_nothing_to_show_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "99_x.py").write_text(
        '# %% [markdown] slideshow={"slide_type": "slide"}\n# ## Title\n#\n# Prose only.\n\n'
        '# %% slideshow={"slide_type": "slide"}\nx = 1\n'
    )
    monkeypatch.setattr(slides, "NOTEBOOKS", tmp_path)
    with pytest.raises(slides.SlidesError, match=r"99_x.py: cell 0 is marked for slides but has no list or math"):
        slides.notebook_slides("99_x")
    (tmp_path / "99_x.py").write_text('# %% slideshow={"slide_type": "slide"}\nx = 1\n')
    with pytest.raises(slides.SlidesError, match=r"code cell 0 is marked for slides but writes no committed figure"):
        slides.notebook_slides("99_x")


def test_directive_fences_are_dropped_and_their_body_kept():
    source = "## Exercise\n\n```{exercise}\n:label: ex-x\n\nCompute $N_j$ for\n- a case\n```\n\n```python\nx = 1\n```"
    text = slides.plain(source)
    assert "```{exercise}" not in text and ":label:" not in text and "Compute $N_j$ for" in text
    assert text.count("```") == 2, text  # the code fence stays, the directive's closing fence goes
    shown = slides.slide_markdown(source, "S")
    assert "```" not in shown and "ex-x" not in shown, shown


def test_every_slide_has_notes_and_every_figure_slide_a_takeaway():
    for session in slides.sessions():
        nb = slides.deck(session)
        for cell in nb.cells:
            if cell.metadata["slideshow"]["slide_type"] == "slide":
                assert re.search(r'<aside class="notes"><p><b>[\d.]+ min\.</b> \S', cell.source), cell.source[:80]
            if 'class="gpac-figure"' in cell.source:
                assert re.search(r'<p class="gpac-takeaway">[^<]{20,}</p>', cell.source), cell.source[:80]
        assert slides.quiz_count(nb) <= slides.QUIZ_SHARE * slides.slide_count(nb), session.name
        # the notes' minutes fit the time docs/teaching.md gives the session's lecture parts
        minutes = sum(float(m) for m in re.findall(r"<b>([\d.]+) min\.</b>", "\n".join(c.source for c in nb.cells)))
        assert 0 < minutes <= sum(p.minutes for p in session.parts), (session.name, minutes)


def test_the_paper_s_statements_are_on_the_slides():
    shown = "\n".join(c.source for s in slides.sessions() for c in slides.deck(s).cells)
    for statement in (
        "Definition 2.1",
        "Definition 3.1",
        "Assumption 4.1",
        "Theorem 4.2",
        "Theorem 4.3",
        "Definition 4.4",
        "Proposition 4.5",
        "Theorem 4.6",
        "Fixed-sequence testing",
        "The wealth process",
        "Ville's inequality",
    ):
        assert statement in shown, statement
    assert "R(u) = \\mathbb E" in shown and "C-PAC" in shown


def test_a_figure_too_small_to_read_is_refused(monkeypatch):
    panel = slides.panels("validity_audit_summary")[0]
    monkeypatch.setattr(slides, "FIGURE_BOX", (400, 480))  # the whole panel squeezed into 400 px
    with pytest.raises(slides.SlidesError, match=r"validity_audit_summary panel 1 is \d+ px tall on the slide"):
        slides.figure_slide(panel)
    w, h, scale = slides.Panel(**{**panel.__dict__, "boxes": []}).shown()
    assert scale < 1 and h < 300


def _planted(folder, cell_pt: float):
    """A figure saved as the notebooks save theirs: a heat map whose cell text is ``cell_pt`` points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from gpac_utils.paper import plotting

    plotting.apply_style(projected=True)
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    axes[0].plot([0, 1], [0, 1], label="a line")
    axes[0].legend()
    axes[1].imshow(np.eye(3), cmap="RdBu_r")
    for (i, j), v in np.ndenumerate(np.eye(3)):
        axes[1].text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=cell_pt, color=plotting.text_color("#b2182b"))
    plotting.savefig(fig, "planted", folder)
    plt.close(fig)


def test_savefig_records_each_text_where_the_png_draws_it(tmp_path):
    from PIL import Image

    from gpac_utils.paper import plotting

    _planted(tmp_path, 6)
    text = plotting.figure_text(tmp_path / "planted.png")
    with Image.open(tmp_path / "planted.png") as image:
        assert text["size"] == list(image.size) and text["dpi"] == plotting.DPI
        pixels = image.convert("RGB")
    cells = [t for t in text["texts"] if t["role"] == "text"]
    assert len(cells) == 9 and {t["px"] for t in cells} == {6 * plotting.DPI / 72}
    assert {t["role"] for t in text["texts"]} >= {"tick label", "legend"}
    assert [t["text"] for t in text["texts"] if t["role"] == "legend"] == ["a line"]
    # the top-left cell's "1", white on dark red: its white pixels lie inside its recorded box
    left, top, right, bottom = cells[0]["box"]
    ax_left, ax_top, ax_right, ax_bottom = text["axes"][1]
    assert ax_left <= left < right <= ax_right and ax_top <= top < bottom <= ax_bottom
    inside = [pixels.getpixel((x, y)) for x in range(left, right) for y in range(top, bottom)]
    assert any(min(p) > 200 for p in inside), "no white glyph pixel inside the recorded box"
    assert plotting.text_color("#053061") == "white" and plotting.text_color("#f7f7f7") == "black"


def test_a_figure_whose_own_text_is_too_small_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(slides, "FIGURES", tmp_path)
    _planted(tmp_path, 6)  # 6-pt cell text: 12.5 px in the PNG
    heat = slides.Panel("planted", 1, slides.axes_boxes("planted", [1]), "v", "t", "takeaway", "notes", 1)
    line = slides.Panel("planted", 2, slides.axes_boxes("planted", [0]), "v", "t", "takeaway", "notes", 1)
    with pytest.raises(
        slides.SlidesError, match=r"figure planted panel 1 shows text under 20 px on the slide.*text '1'"
    ):
        slides.figure_slide(heat)
    assert "gpac-figure" in slides.figure_slide(line).source  # the other axes' text is large enough
    _planted(tmp_path, 14)
    w, h, scale = heat.shown()
    assert slides.small_figure_text(heat, scale) == [] and 14 * 150 / 72 * scale >= slides.MIN_FIGURE_TEXT_PX
    assert 'data-text-px="' in slides.figure_slide(heat).source
    from PIL import Image

    Image.new("RGB", (400, 400), "white").save(tmp_path / "bare.png")  # a PNG not saved by plotting.savefig
    bare = slides.Panel("bare", 1, [], "v", "t", "takeaway", "notes", 1)
    with pytest.raises(slides.SlidesError, match=r"figures/bare.png holds no measurements of its text"):
        slides.figure_slide(bare)
    with pytest.raises(slides.SlidesError, match=r"planted.png has no axes \[5\]"):
        slides.axes_boxes("planted", [5])


def test_every_figure_on_the_slides_is_readable_from_the_back():
    """Every panel the decks show: its own text at least 20 px on the slide (what the build refuses)."""
    for figure in slides.lectures()["figure"]:
        for panel in slides.panels(figure):
            w, h, scale = panel.shown()
            assert slides.panel_text(panel), (figure, panel.index)
            assert slides.small_figure_text(panel, scale) == [], (figure, panel.index)
            assert h >= slides.MIN_FIGURE_HEIGHT, (figure, panel.index)


def test_code_under_32_px_is_refused(tmp_path):
    slides.check_code_size()  # the template as committed
    template = (slides.SLIDES_SRC / "templates" / slides.TEMPLATE / "index.html.j2").read_text()
    planted = tmp_path / "index.html.j2"
    planted.write_text(
        template.replace("</style>", ".reveal .jp-RenderedHTMLCommon code { font-size: 28px; }\n</style>")
    )
    with pytest.raises(
        slides.SlidesError, match=r"code at 28 px \(\.reveal \.jp-RenderedHTMLCommon code\); at least 32"
    ):
        slides.check_code_size(planted)


@pytest.fixture(scope="module")
def decks(tmp_path_factory):
    """The decks built into a scratch folder: (folder, slide count per deck)."""
    for what, path in (("reveal.js", slides.REVEAL), ("MathJax", slides.MATHJAX)):
        if not path.is_dir():
            pytest.skip(f"no local {what}: `make slides` installs it with npm ci; npm is missing here")
    out = tmp_path_factory.mktemp("slides")
    counts = slides.build(out)
    assert json.loads((out / "slides.json").read_text()) == counts
    return out, counts


def test_the_decks_are_offline(decks):
    out, counts = decks
    for name in counts:
        html = (out / f"{name}.html").read_text()
        remote = re.findall(r"""(?:src|href)=["'](https?:[^"']+)""", html)
        assert remote == [], (name, remote)
        assert 'src="reveal.js/dist/reveal.js"' in html and 'src="mathjax/tex-mml-chtml.js"' in html


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def served(decks):
    out, counts = decks
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(out)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", counts
    server.shutdown()


@pytest.fixture
def page():
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("no Chromium: `make test` installs Debian's chromium (apt-get, needs root); not here")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        yield browser.new_page(viewport={"width": 1280, "height": 720})
        browser.close()


#: Per slide, measured on the current slide as reveal.js lays it out at 1280 x 720 (slide pixels):
#: its content height, its smallest body-text size, its code sizes, its figures' heights, scales and
#: smallest text (PNG pixels, ``data-text-px``), whether it has
#: speaker notes and whether it is a question.
MEASURE = """i => {
    Reveal.slide(i);
    const s = Reveal.getCurrentSlide();
    const text = Array.from(s.querySelectorAll('.jp-RenderedHTMLCommon p, .jp-RenderedHTMLCommon li'))
        .filter(e => !e.closest('aside') && e.textContent.trim())
        .map(e => parseFloat(getComputedStyle(e).fontSize));
    const figures = Array.from(s.querySelectorAll('img')).map(img => ({
        height: img.getBoundingClientRect().height / Reveal.getScale(), natural: img.naturalHeight,
        scale: parseFloat(img.dataset.scale || '0'), textPx: parseFloat(img.dataset.textPx || '0')}));
    const code = Array.from(s.querySelectorAll('code')).filter(e => !e.closest('aside') && e.textContent.trim())
        .map(e => parseFloat(getComputedStyle(e).fontSize));
    const notes = s.querySelector('aside.notes');
    const shown = Array.from(s.querySelectorAll('*')).filter(e => !e.closest('aside')
        && (e.tagName === 'MJX-CONTAINER' || !e.parentElement.closest('mjx-container'))
        && e.getClientRects().length > 0);  // a formula by its box, not by its glyphs' parts
    const box = s.getBoundingClientRect(), k = Reveal.getScale();
    const bottom = Math.max(0, ...shown.map(e => (e.getBoundingClientRect().bottom - box.top) / k));
    const right = Math.max(0, ...shown.map(e => (e.getBoundingClientRect().right - box.left) / k));
    return {height: bottom, width: right, text: text, figures: figures, code: code,
            notes: notes ? notes.textContent.trim() : '', title: (s.querySelector('h1, h2') || {}).textContent || '',
            quiz: (s.querySelector('h2') || {}).textContent === 'Check yourself'};
}"""


@pytest.mark.slow
def test_every_deck_projects_at_1280_by_720(served, page):
    """Every slide of every deck, at 1280 x 720: 16:9, body text and code at least 32 px, figures at
    least 300 px tall with their own smallest text (as plotting.savefig measured it) at least 20 px
    as Chromium shows them, speaker notes with minutes on every slide, nothing outside the slide, at
    most a quarter questions; each slide photographed into build/slides-test/."""
    url, counts = served
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for old in SCREENSHOTS.glob("*.png"):
        old.unlink()
    errors, problems = [], []
    page.on("pageerror", lambda err: errors.append(str(err)))
    for name, expected in counts.items():
        page.goto(f"{url}/{name}.html")
        page.wait_for_function("() => window.Reveal && Reveal.isReady()")
        math = page.evaluate(
            """() => MathJax.startup.promise.then(() => ({
                   rendered: document.querySelectorAll('.reveal mjx-container').length,
                   errors: document.querySelectorAll('mjx-merror').length}))"""
        )
        assert page.evaluate("() => Reveal.getTotalSlides()") == expected, name
        assert page.evaluate("() => [Reveal.getConfig().width, Reveal.getConfig().height]") == [1280, 720], name
        assert math["rendered"] > 0 and math["errors"] == 0, (name, math)
        images = page.evaluate(
            """() => Promise.all(Array.from(document.querySelectorAll('.reveal img')).map(img =>
                   img.decode().then(() => 0, () => 0).then(() => ({src: img.getAttribute('src'),
                                                                    width: img.naturalWidth}))))"""
        )
        assert images and all(img["width"] > 0 for img in images), (name, images)
        quiz = 0
        for i in range(expected):
            m = page.evaluate(MEASURE, i)
            page.screenshot(path=str(SCREENSHOTS / f"{name}-{i + 1:02d}.png"))
            where = f"{name} slide {i + 1} ({m['title'][:40]})"
            quiz += m["quiz"]
            if m["height"] > 720 + 2 or m["width"] > 1280 + 2:
                problems.append(f"{where}: content {m['width']:.0f} x {m['height']:.0f} px outside 1280 x 720")
            if m["text"] and min(m["text"]) < 32:
                problems.append(f"{where}: body text {min(m['text'])} px (at least 32)")
            if m["code"] and min(m["code"]) < slides.MIN_CODE_PX:
                problems.append(f"{where}: code {min(m['code'])} px (at least {slides.MIN_CODE_PX})")
            if not re.match(r"^[\d.]+ min\. \S", m["notes"]):
                problems.append(f"{where}: no speaker notes with their minutes")
            if m["title"].strip() == "Figure":
                problems.append(f"{where}: a slide whose heading is only 'Figure'")
            for fig in m["figures"]:
                shown = fig["height"] / fig["natural"]
                if fig["height"] < slides.MIN_FIGURE_HEIGHT - 1:
                    problems.append(f"{where}: a figure {fig['height']:.0f} px tall (at least 300)")
                if abs(shown - fig["scale"]) > 0.02 or fig["textPx"] * shown < slides.MIN_FIGURE_TEXT_PX - 0.05:
                    problems.append(f"{where}: figure text {fig['textPx'] * shown:.1f} px on screen (at least 20)")
        if quiz > slides.QUIZ_SHARE * expected:
            problems.append(f"{name}: {quiz} of {expected} slides are questions")
    assert problems == [], "\n".join(problems)
    assert errors == [], errors


def test_the_teaching_page_links_every_deck_with_its_counts(decks):
    _, counts = decks
    text = slides.TEACHING.read_text()
    rows = re.findall(r'^\| (\d+) \| <a href="(session-\d+\.html)">[^<]+</a> \| (\d+) \| (\d+) \|$', text, re.M)
    assert [r[1] for r in rows] == [f"{name}.html" for name in counts], rows
    for (number, page, n_slides, n_questions), session in zip(rows, slides.sessions(), strict=True):
        assert (int(number), int(n_slides)) == (session.number, counts[session.name]), page
        assert int(n_questions) == sum(len(slides.questions(p.notebook)) for p in session.parts), page
