"""The printable answer key (``make answer-key``, workflow/scripts/answer_key.py; docs/syllabus.md).

Built here as ``make answer-key`` builds it (the PDF printed by headless Chromium, offline): it holds every
self-check question's correct answer, every exercise of every lesson with its solution, and every homework
question with its solution lines; the PDF is a real multi-page PDF, printed with every MathJax font loaded
and no failed request (the build refuses a print where a request fails or the page logs an error, and a
MathJax without its fonts is refused). Without Chromium the PDF is skipped, saying why; the HTML is checked
anyway.
"""

from __future__ import annotations

import html
import json
import re
import shutil

import pytest
import repo_scripts

from gpac_utils.workflow.paths import REPO_ROOT

answer_key = repo_scripts.load("workflow/scripts/answer_key.py")


def _text(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page)))


def test_the_key_holds_every_answer_and_solution():
    text = _text(answer_key.page(None))
    questions = sorted(answer_key.QUESTIONS.glob("[0-9][0-9]_*.json"))
    assert len(questions) >= 8
    for path in questions:
        for q in json.loads(path.read_text()):
            (right,) = [a for a in q["answers"] if a["correct"]]
            assert re.sub(r"\s+", " ", right["answer"]) in text, (path.name, right["answer"])
    for path in answer_key.edition.with_exercises(answer_key.NOTEBOOKS):
        labels = answer_key.edition.exercise_labels(path)
        for number, label in enumerate(labels, 1):
            assert f"Exercise {number} {label}" in text, label
    assert text.count("Exercise ") >= 22  # the lessons' 22 exercises
    for line in answer_key.HOMEWORK.read_text().splitlines():
        if line.endswith("  # SOLUTION"):
            assert line.removesuffix("  # SOLUTION").strip() in text, line
    assert "# SOLUTION" not in text and "{term}" not in text and ":::" not in text and "{solution-start}" not in text


def test_the_key_prints_each_solutions_result(tmp_path):
    """Issue 50: each homework solution with its values, computed from its code; each exercise solution with
    what the executed notebook printed for that very cell, and a line saying so where none holds it."""
    text = _text(answer_key.homework_part())
    for result in (
        "half_width_resampled = 0.0178 half_width_full = 0.01747",
        "a = 0.15 eff_oracle = 0.8 eff_learned = 0.2",
        "miss_upper = 0.1824",
        "max_violation_rate = 0.975",
        "n_min = 91",
    ):
        assert result in text, result
    solutions = len(re.findall(r"^# # BEGIN SOLUTION", answer_key.HOMEWORK.read_text(), re.M))
    assert text.count("Result:") == text.count("Why: the derivation is the solution") == solutions
    # an executed notebook 12 holding one solution cell (the sample-size exercise) as the workflow writes it
    import jupytext
    import nbformat

    path = answer_key.NOTEBOOKS / "12_finite_sample.py"
    (size,) = [
        c.source
        for c in jupytext.read(path).cells
        if "solution" in c.metadata.get("tags", []) and "n_needed" in c.source and c.cell_type == "code"
    ]
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(size)
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stderr", text="a warning\n"),
        nbformat.v4.new_output("execute_result", data={"text/plain": "600"}, execution_count=1),
    ]
    nb.cells = [cell]
    (tmp_path / "fast").mkdir()
    nbformat.write(nb, tmp_path / "fast" / "12_finite_sample.ipynb")
    page = _text(answer_key.exercise_part([tmp_path / "fast"]))
    section = page.split("Notebook 12_finite_sample", 1)[1].split("Notebook ", 1)[0]
    # the result says which profile's run printed it (the profiles' numbers differ)
    assert "n_needed Result (fast profile): 600" in section and "a warning" not in section
    # the notebook's other solution cells are not in that notebook: said, never a stale or made-up result
    assert "Result: not in" in section and "(older)" in section
    assert "Result: not in build/paper/13_validity_audit.ipynb (missing)" in page


def _chromium() -> str:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("no Chromium: `make test` installs Debian's chromium (apt-get, needs root); not here")
    return chromium


def _fonts(urls: list[str]) -> set[str]:
    return {url.rsplit("/", 1)[1] for url in urls if url.endswith(".woff")}


@pytest.mark.slow
def test_make_answer_key_prints_a_pdf(tmp_path):
    loaded: list[str] = []
    paths = answer_key.build(tmp_path, chromium=_chromium(), loaded=loaded)  # no failed request, no page error
    pdf = paths["pdf"].read_bytes()
    assert pdf.startswith(b"%PDF-")
    pages = len(re.findall(rb"/Type\s*/Page(?!s)", pdf))
    assert pages >= 10, pages
    if answer_key.MATHJAX.is_file():  # the maths typeset with MathJax's own fonts, loaded from beside the page
        fonts = _fonts(loaded)
        assert {"MathJax_Main-Regular.woff", "MathJax_Math-Italic.woff", "MathJax_Size1-Regular.woff"} <= fonts, fonts
        assert all(url.startswith(tmp_path.resolve().as_uri()) for url in loaded), loaded  # nothing from elsewhere
    assert "Answer key" in paths["html"].read_text()
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert re.search(r"^answer-key: .*\n\t\$\(PY\) workflow/scripts/answer_key.py", makefile, re.M)


@pytest.mark.slow
def test_a_print_with_a_font_missing_is_refused(tmp_path, monkeypatch):
    """MathJax's script without its fonts (as the key was once copied): the build names the fonts and fails."""
    if not answer_key.MATHJAX.is_file():
        pytest.skip("docs/_mathjax is not installed (npm ci --prefix docs/_mathjax; make test installs it)")
    chromium = _chromium()
    monkeypatch.setattr(answer_key, "MATHJAX_FILES", ["tex-mml-chtml.js"])
    monkeypatch.setattr(answer_key, "quiz_part", lambda: r"<p>$\sqrt{\hat R(1-\hat R)/n}$</p>")
    monkeypatch.setattr(answer_key, "exercise_part", lambda: "")
    monkeypatch.setattr(answer_key, "homework_part", lambda: "")
    with pytest.raises(OSError, match=r"mathjax/output/chtml/fonts/woff-v2/MathJax_Main-Regular\.woff: net::"):
        answer_key.build(tmp_path, chromium=chromium)


def test_lessons_without_results_are_run_on_the_fast_profile_first(tmp_path):
    """``make answer-key`` on a checkout without executed lessons runs them (fast profile, into build/fast/ and its
    figures there) instead of printing "Result: ... missing" 23 times; a current executed copy is not run again."""
    import jupytext
    import nbformat

    paper, fast = tmp_path / "paper", tmp_path / "fast"
    paper.mkdir()
    lessons = answer_key.edition.with_exercises(answer_key.NOTEBOOKS)
    current = lessons[0]  # its executed copy holds every cell's source: its results are there
    nbformat.write(jupytext.read(current), paper / f"{current.stem}.ipynb")
    calls = []
    ran = answer_key.execute_missing([paper, fast], run=lambda path, profile, **kw: calls.append((path, profile, kw)))
    assert ran == [p.stem for p in lessons[1:]] and len(calls) == len(lessons) - 1
    assert {profile for _, profile, _ in calls} == {"fast"}
    assert all(kw["out_dir"] == fast and kw["figures_dir"] == fast / "figures" for _, _, kw in calls)
    assert answer_key.without_results([paper, fast]) == lessons[1:]
