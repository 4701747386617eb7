"""The printable answer key (``make answer-key``, workflow/scripts/answer_key.py; docs/syllabus.md).

Built here as ``make answer-key`` builds it (the PDF printed by headless Chromium, offline): it holds every
self-check question's correct answer, every exercise of every lesson with its solution, and every homework
question with its solution lines; the PDF is a real multi-page PDF. Without Chromium the PDF is skipped,
saying why; the HTML is checked anyway.
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


@pytest.mark.slow
def test_make_answer_key_prints_a_pdf(tmp_path):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("no Chromium: `make test` installs Debian's chromium (apt-get, needs root); not here")
    paths = answer_key.build(tmp_path, chromium=chromium)
    pdf = paths["pdf"].read_bytes()
    assert pdf.startswith(b"%PDF-")
    pages = len(re.findall(rb"/Type\s*/Page(?!s)", pdf))
    assert pages >= 10, pages
    assert "Answer key" in paths["html"].read_text()
    makefile = (REPO_ROOT / "Makefile").read_text()
    assert re.search(r"^answer-key: .*\n\t\$\(PY\) workflow/scripts/answer_key.py", makefile, re.M)
