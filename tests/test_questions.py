"""The self-check questions of the lessons (``notebooks/questions/NN_name.json``, shown by gpac_utils.quiz).

Checked as the exercises are: every lesson has at least two questions in jupyterquiz's schema (which
gpac_utils.quiz reads; the slides read the same files), each
multiple-choice question has exactly one correct answer and every answer says why; every lesson
shows its file in a cell that the student edition keeps; the answers that are numbers agree with the
library and the formulas the notebooks compute them with; the correct answer is not given away by
being the longest option; every question names the wrong answer the room is likely to pick and what
to discuss about it (the slides' notes); its math is TeX, never ASCII. Then one question file goes the book's
way: the quiz cell of a lesson is run (in an IPython shell), its outputs rendered by Sphinx + myst-nb,
and read in Chromium, where clicking the correct answer shows its feedback (skipped without Chromium or the
local MathJax, with the reason).
"""

from __future__ import annotations

import functools
import http.server
import json
import math
import re
import shutil
import subprocess
import sys
import threading

import jupytext
import nbformat
import numpy as np
import pytest
import repo_scripts
from scipy import stats

from gpac_utils import VALID, threshold
from gpac_utils.workflow.paths import BUILD, NOTEBOOKS, REPO_ROOT

QUESTIONS = NOTEBOOKS / "questions"
LESSONS = ("00", "10", "11", "12", "13", "31", "32", "33", "36")
TYPES = {"multiple_choice", "many_choice", "numeric"}
MATHJAX = REPO_ROOT / "docs" / "_mathjax" / "node_modules" / "mathjax" / "es5"

edition = repo_scripts.load("workflow/scripts/student_edition.py")
slides = repo_scripts.load("workflow/scripts/slides.py")


def lessons() -> list[str]:
    return sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.py") if p.name[:2] in LESSONS)


def load(name: str) -> list[dict]:
    return json.loads((QUESTIONS / f"{name}.json").read_text(encoding="utf-8"))


def answer(name: str, start: str) -> dict:
    """The question of ``name`` whose text starts with ``start``, and its correct answer."""
    (q,) = [q for q in load(name) if q["question"].startswith(start)]
    (right,) = [a for a in q["answers"] if a["correct"]]
    return right


def test_every_lesson_has_its_question_file_and_no_other_file_exists():
    assert len(lessons()) == len(LESSONS)
    assert sorted(p.stem for p in QUESTIONS.glob("*.json")) == lessons()


@pytest.mark.parametrize("name", lessons())
def test_questions_follow_the_schema(name):
    questions = load(name)
    assert isinstance(questions, list) and len(questions) >= 2, name
    texts = [q["question"] for q in questions]
    assert len(set(texts)) == len(texts), f"{name}: a question twice"
    for q in questions:
        where = f"{name}: {q.get('question', '?')[:60]}"
        assert set(q) <= {
            "question",
            "type",
            "answers",
            "precision",
            "code",
            "likely_wrong",
            "discuss",
            "after_lab",
        }, where
        assert q.get("after_lab", False) in (True, False), f"{where}: after_lab is true or false"
        assert q["type"] in TYPES and q["question"].strip(), where
        answers = q["answers"]
        assert all(a.get("feedback", "").strip() for a in answers), f"{where}: an answer without its why"
        if q["type"] == "numeric":
            assert sum(a.get("correct", False) for a in answers) >= 1, where
            continue
        assert len(answers) >= 3, f"{where}: fewer than three options"
        assert all(set(a) == {"answer", "correct", "feedback"} and a["answer"].strip() for a in answers), where
        assert len({a["answer"] for a in answers}) == len(answers), f"{where}: an option twice"
        correct = sum(a["correct"] is True for a in answers)
        if q["type"] == "multiple_choice":
            assert correct == 1, f"{where}: {correct} correct answers"
        # The correct answer's feedback says it is right, every wrong one says no.
        for a in answers:
            assert a["feedback"].startswith("Right" if a["correct"] else "No"), (where, a["answer"])


def test_the_correct_answers_are_not_always_in_the_same_place():
    places = [next(i for i, a in enumerate(q["answers"]) if a["correct"]) for n in lessons() for q in load(n)]
    assert len(set(places)) == 3, places


def shown_length(text: str) -> int:
    """About the number of characters an option shows: a TeX command counts as one symbol, markup as none."""
    return len(re.sub(r"[${}^_]|\\,", "", re.sub(r"\\[A-Za-z]+", "x", text)))


def test_the_correct_answer_is_not_the_longest_option():
    questions = [q for n in lessons() for q in load(n) if q["type"] == "multiple_choice"]
    longest = []
    for q in questions:
        lengths = [shown_length(a["answer"]) for a in q["answers"]]
        right = next(i for i, a in enumerate(q["answers"]) if a["correct"])
        if lengths[right] == max(lengths) and lengths.count(max(lengths)) == 1:
            longest.append(q["question"][:50])
    assert len(longest) <= len(questions) / 3, longest
    assert shown_length(r"$\kappa = 2$") == len("κ = 2") and shown_length("59") == 2


def test_every_question_names_the_likely_wrong_answer_to_discuss():
    notes = []
    for name in lessons():
        for q in load(name):
            where = f"{name}: {q['question'][:50]}"
            wrong = q.get("likely_wrong")
            assert isinstance(wrong, int) and 0 <= wrong < len(q["answers"]), where
            assert not q["answers"][wrong]["correct"], f"{where}: likely_wrong is the correct answer"
            discuss = q.get("discuss", "")
            assert len(discuss) >= 60 and not re.search(r"let the room vote|hands or cards", discuss, re.I), where
            notes.append(slides.quiz_notes(q))
            assert f"Likely wrong answer: {'ABC'[wrong]} ({q['answers'][wrong]['answer']})" in notes[-1], where
    assert len(set(notes)) == len(notes)  # no generic note shared by two questions


def test_the_questions_write_their_math_in_tex():
    for name in lessons():
        for q in load(name):
            for text in [q["question"], *(a[k] for a in q["answers"] for k in ("answer", "feedback"))]:
                assert slides.leaks(*slides.visible(text)) == [], (name, text)
    assert slides.leaks(*slides.visible("R(u) = Σ_j p_j R(u | G_j)"))  # the ASCII form is caught


@pytest.mark.parametrize("name", lessons())
def test_every_lesson_shows_its_questions_and_the_student_edition_keeps_them(name):
    path = NOTEBOOKS / f"{name}.py"
    call = f'display_quiz(NOTEBOOKS / "questions" / "{name}.json")'
    cells = [c for c in jupytext.read(path).cells if call in c.source]
    assert len(cells) == 1 and "solution" not in cells[0].metadata.get("tags", []), name
    assert any(call in c.source for c in edition.student_notebook(path).cells), name


def test_the_numbers_in_the_answers_are_the_computed_ones():
    # 32: the minimum label count at eps = alpha = 0.05, as the library certifies it.
    n_min = math.ceil(math.log(1 / 0.05) / -math.log(1 - 0.05))
    zero = lambda n: threshold(np.linspace(0, 1, n), np.zeros(n), eps=0.05, alpha=0.05, recipe=VALID)  # noqa: E731
    assert np.isfinite(zero(n_min)) and not np.isfinite(zero(n_min - 1))
    assert n_min == 59
    # 32 asks what 40 clean labels certify (the 59 itself is in two slides' titles): nothing, the bound
    # of n loss-free labels, 1 - alpha^(1/n), is still above eps; 40 clean labels happen with
    # probability 0.95^40 > alpha at risk exactly eps.
    right = answer("32_label_budget", r"With $\varepsilon = \alpha = 0.05$ and every label")["answer"]
    assert not np.isfinite(zero(40)) and 40 < n_min
    assert f"{1 - 0.05 ** (1 / 40):.3f}" == "0.072" and "\\approx 0.072 > \\varepsilon" in right
    assert round(0.95**40, 2) == 0.13 and 0.95**40 > 0.05
    # 12: halving the slack t keeps exp(-2 N t^2) only with 4 times the test items (the lab's own
    # exercise, the smallest N at t = 0.05, is not asked here: its answer comes after the lab).
    n, t = 600, 0.05
    assert math.exp(-2 * (4 * n) * (t / 2) ** 2) == pytest.approx(math.exp(-2 * n * t**2))
    assert answer("12_finite_sample", "Theorem 4.3's slack term")["answer"] == "Four times as many"
    assert not any(a["answer"] == "600" for q in load("12_finite_sample") for a in q["answers"])
    # 13: kappa(R, pi) = 1 + (1 - R) / (1 - pi R) is 2 at pi = 1, and the predicted miss rate at alpha = 5 %.
    kappa = lambda r, pi: 1 + (1 - r) / (1 - pi * r)  # noqa: E731
    assert all(kappa(r, 1.0) == pytest.approx(2.0) for r in (0.05, 0.1, 0.3))
    assert answer("13_validity_audit", "With every resampled draw")["answer"] == "2"
    miss = stats.norm.cdf(-stats.norm.ppf(0.95) / math.sqrt(2))
    assert answer("13_validity_audit", r"With $\kappa = 2$")["answer"] == f"{100 * miss:.0f} %" == "12 %"
    # the slides' note of G-PAC against PAC: two independent groups each violated with probability 0.05
    assert 1 - (1 - 0.05) ** 2 == pytest.approx(0.0975)


# ---- the book's way: executed, rendered by myst-nb, read in a browser -------------------------------


@pytest.fixture(scope="module")
def quiz_page(tmp_path_factory):
    """A one-page Sphinx + myst-nb book of an executed notebook that shows 12's questions."""
    if not (MATHJAX / "tex-mml-chtml.js").is_file():
        pytest.skip("no local MathJax: `make test` installs it (npm ci --prefix docs/_mathjax), npm is missing here")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    src = tmp_path_factory.mktemp("quizbook")
    (cell,) = [c for c in jupytext.read(NOTEBOOKS / "12_finite_sample.py").cells if "display_quiz(" in c.source]
    # The cell run as a kernel runs it (an IPython shell in this process: no kernel to start), its
    # displays stored as the notebook's outputs.
    shell = InteractiveShell.instance()
    try:
        with capture_output() as captured:
            assert shell.run_cell(cell.source).success
    finally:
        InteractiveShell.clear_instance()
    cell = nbformat.v4.new_code_cell(cell.source, metadata=cell.metadata)
    cell.outputs = [nbformat.v4.new_output("display_data", data=out.data) for out in captured.outputs]
    assert [sorted(out.data) for out in captured.outputs] == [["text/html", "text/plain"]]  # HTML, no script
    # a page with math of its own, as every lesson's is: Sphinx loads MathJax only on such a page
    heading = nbformat.v4.new_markdown_cell("# Check yourself\n\nThe risk $R(u)$ of a threshold.")
    nb = nbformat.v4.new_notebook(cells=[heading, cell])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, src / "quiz.ipynb")
    (src / "conf.py").write_text(
        'extensions = ["myst_nb", "sphinx.ext.mathjax"]\nnb_execution_mode = "off"\n'
        'myst_enable_extensions = ["dollarmath"]\n'
        f'html_static_path = [{str(MATHJAX)!r}]\nmathjax_path = "tex-mml-chtml.js"\nroot_doc = "quiz"\n'
    )
    out = src / "_build"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(src), str(out)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (out / "quiz.html").read_text()
    assert 'class="gpac-quiz ' in html and "<script" not in html.split('class="gpac-quiz ', 1)[1].split("</div>")[0]
    return out


@pytest.fixture
def page():
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("no Chromium: `make test` installs Debian's chromium (apt-get, needs root); not here")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"], headless=True)
        yield browser.new_page(viewport={"width": 1280, "height": 900})
        browser.close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.mark.slow
@pytest.mark.notebook
def test_the_book_renders_the_questions_and_their_feedback(quiz_page, page):
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(quiz_page))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    try:
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/quiz.html")
        questions = load("12_finite_sample")
        answers = page.locator(".gpac-quiz details")
        answers.first.wait_for(state="visible", timeout=10_000)
        assert answers.count() == sum(len(q["answers"]) for q in questions)
        first = page.locator(".gpac-quiz").first
        why = first.locator("details.right .why")
        assert not why.is_visible()  # the verdict shows only after a click
        first.locator("details.right summary").click()
        why.wait_for(state="visible", timeout=10_000)
        shown = re.sub(r"\s+", " ", why.inner_text())
        assert shown.startswith("✔ Right"), shown
        first.locator("details.wrong summary").first.click()
        shown = re.sub(r"\s+", " ", first.locator("details.wrong[open] .why").first.inner_text())
        assert shown.startswith("✘ No"), shown
        # the questions' TeX is typeset by the book's MathJax: formulas, no dollar or backslash left
        page.wait_for_function("() => document.querySelectorAll('.gpac-quiz mjx-container').length > 0")
        text = page.evaluate(
            """() => Array.from(document.querySelectorAll('.gpac-quiz p, .gpac-quiz summary')).map(e => {
                   const c = e.cloneNode(true); c.querySelectorAll('mjx-container').forEach(m => m.remove());
                   return c.textContent; }).join(' ')"""
        )
        assert "$" not in text and "\\" not in text, text[:300]
        BUILD.mkdir(exist_ok=True)
        page.screenshot(path=str(BUILD / "questions-book.png"), full_page=True)
    finally:
        server.shutdown()
    assert errors == [], errors
