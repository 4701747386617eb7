"""The lessons' self-check questions (``notebooks/questions/NN_name.json``) as plain HTML, with no script.

``display_quiz(path)`` shows each multiple-choice question with its answers; clicking an answer opens
it (an HTML ``<details>`` element) and shows whether it is right and why. No JavaScript runs, so it
behaves the same in JupyterLab, in the book, in an exported HTML file and offline; it replaces
jupyterquiz, whose script reads ``MathJax.version`` (absent in JupyterLab 4, so it threw an error on
display and on every click) and fetched MathJax from a CDN when it found none.

The file keeps jupyterquiz's schema (``question``, ``type`` = ``multiple_choice``, ``answers`` with
``answer``, ``correct`` and ``feedback``): the slides (workflow/scripts/slides.py) read the same files.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from gpac_utils.checks import ParameterError

#: the keys a question and an answer must have (jupyterquiz's schema for a multiple-choice question)
QUESTION_KEYS = ("question", "type", "answers")
ANSWER_KEYS = ("answer", "correct", "feedback")
#: the answers' letters, as the notebooks and the slides both show them (a lecturer says "B", the room finds it)
ANSWER_LETTERS = "ABCDEFGH"

_STYLE = (
    "<style>"
    ".gpac-quiz{border-left:4px solid #4a6fa5;padding:0.2em 0 0.2em 1em;margin:1em 0;max-width:48em}"
    ".gpac-quiz details{border:1px solid #c8d3e6;border-radius:6px;margin:0.3em 0;padding:0.35em 0.7em}"
    ".gpac-quiz summary{cursor:pointer}"
    ".gpac-quiz details[open].right{background:#e8f5e9;border-color:#66bb6a}"
    ".gpac-quiz details[open].wrong{background:#fdecea;border-color:#e57373}"
    ".gpac-quiz .why{margin:0.4em 0 0.1em 0}"
    "</style>"
)


def read_questions(path) -> list[dict]:
    """The questions of ``path``, checked: every key there, multiple choice, exactly one correct answer."""
    path = Path(path)
    questions = json.loads(path.read_text())
    if not isinstance(questions, list) or not questions:
        raise ParameterError(f"path: {path.name} must hold a non-empty list of questions")
    for i, q in enumerate(questions):
        missing = [k for k in QUESTION_KEYS if k not in q] + [
            f"answers[{j}].{k}" for j, a in enumerate(q.get("answers", [])) for k in ANSWER_KEYS if k not in a
        ]
        if missing:
            raise ParameterError(f"path: question {i} of {path.name} lacks {', '.join(missing)}")
        if q["type"] != "multiple_choice":
            raise ParameterError(f"path: question {i} of {path.name} has type {q['type']!r}, not 'multiple_choice'")
        if not 2 <= len(q["answers"]) <= len(ANSWER_LETTERS):
            raise ParameterError(f"path: question {i} of {path.name} must have 2 to {len(ANSWER_LETTERS)} answers")
        if sum(bool(a["correct"]) for a in q["answers"]) != 1:
            raise ParameterError(f"path: question {i} of {path.name} must have exactly one correct answer")
    return questions


def _text(text: str) -> str:
    """A question's text as HTML: escaped, its TeX ``$...$`` written ``\\(...\\)``, the delimiters that
    JupyterLab's MathJax and the book's both typeset in an output (the slides read the ``$`` form); the
    block's class ``mathjax_process`` lets the book's MathJax into it (myst marks its sections ignored)."""
    return re.sub(r"\$([^$]+)\$", r"\\(\1\\)", html.escape(text, quote=False))


class Quiz:
    """A set of questions that displays as HTML (``_repr_html_``) or as text."""

    def __init__(self, path):
        self.questions = read_questions(path)

    def _repr_html_(self) -> str:
        """The questions as one HTML block: each answer a ``<details>`` that opens on a click to say why."""
        parts = [_STYLE]
        for number, q in enumerate(self.questions, 1):
            parts.append(
                f'<div class="gpac-quiz mathjax_process"><p><b>Question {number}.</b> {_text(q["question"])}</p>'
            )
            for letter, a in zip(ANSWER_LETTERS, q["answers"]):
                verdict, mark = ("right", "✔") if a["correct"] else ("wrong", "✘")
                parts.append(
                    f'<details class="{verdict}"><summary><b>{letter}.</b> {_text(a["answer"])}</summary>'
                    f'<p class="why">{mark} {_text(a["feedback"])}</p></details>'
                )
            parts.append("</div>")
        return "".join(parts)

    def __repr__(self) -> str:
        """The questions and their answers without the verdicts (what a plain-text front end shows)."""
        lines = []
        for number, q in enumerate(self.questions, 1):
            lines.append(f"Question {number}. {q['question']}")
            lines += [f"  {letter}. {a['answer']}" for letter, a in zip(ANSWER_LETTERS, q["answers"])]
        return "\n".join(lines)


def display_quiz(path) -> None:
    """Display the questions of ``path`` (a ``notebooks/questions/*.json`` file) in the notebook."""
    from IPython.display import display

    display(Quiz(path))
