"""The printable answer key (``make answer-key``): quiz answers, exercise solutions and homework solutions, as a PDF.

    python workflow/scripts/answer_key.py [--out build/answer-key]

writes ``<out>/answer-key.html`` and prints it to ``<out>/answer-key.pdf`` with headless Chromium
(Debian's ``/usr/bin/chromium`` driven by Playwright's ``page.pdf``, as the book's tests drive it; no
browser download, nothing fetched: the page is a local file, its math typeset by the book's local
MathJax when ``docs/_mathjax`` is installed, else left as TeX). MathJax's script and the web fonts its
CHTML output loads (``output/chtml/fonts/woff-v2/``, beside the script) are copied to ``<out>/mathjax/``;
the print waits for every font and refuses (an error naming them) any request that fails or answers an
error status, and any error the page logs: without its fonts MathJax draws a square root's bar on the
line above and a hat beside its letter. Its three parts, read from the sources:

1. every self-check question (``notebooks/questions/NN_name.json``) with its correct answer and why;
2. every exercise of the lessons (the notebooks with exercises, as ``make student`` finds them) with
   its solution: the cells tagged ``solution``, prose and code, each code cell followed by its result as
   the executed notebook printed it (``build/paper/NN.ipynb``, else ``build/fast/NN.ipynb``, the cell
   with the same source; a lesson neither holds with every solution's source is first run on the fast profile
   into ``build/fast/``, saying so: :func:`execute_missing`);
3. every homework question (``notebooks/homework/gpac_homework.py``) with its solution lines, each
   followed by the values they compute (the solution cells run here, in order, numpy and scipy only).
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import jupytext
import numpy as np
from markdown_it import MarkdownIt

from gpac_utils.workflow.paths import folder_error
from gpac_utils.workflow.runner import NotebookFailed, run_notebook

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO_ROOT / "notebooks"
QUESTIONS = NOTEBOOKS / "questions"
HOMEWORK = NOTEBOOKS / "homework" / "gpac_homework.py"
MATHJAX = REPO_ROOT / "docs" / "_mathjax" / "node_modules" / "mathjax" / "es5" / "tex-mml-chtml.js"
#: what the page loads of MathJax, relative to its es5 folder: the script and the fonts of its CHTML output
#: (MathJax finds them beside the script: its fontURL is ``[mathjax]/output/chtml/fonts/woff-v2``)
MATHJAX_FILES = ["tex-mml-chtml.js", "output/chtml/fonts/woff-v2"]
#: where the executed lessons are read from, the first that holds a notebook (the workflow's profiles)
EXECUTED = [REPO_ROOT / "build" / "paper", REPO_ROOT / "build" / "fast"]

_spec = importlib.util.spec_from_file_location("student_edition", Path(__file__).with_name("student_edition.py"))
edition = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(edition)

#: a MyST role, ``{term}`risk``` or ``{ref}`text <label>```: its text is kept
_ROLE = re.compile(r"\{[a-z-]+\}`(?:([^`<]*?)\s*<[^`>]+>|([^`]+))`")
#: the fences of a directive (``:::{exercise}``, ```` ```{solution-start} label````) and its options
_FENCE = re.compile(r"^(?::::+|```+)(\{[a-z-]+\}.*)?$|^:[a-z-]+:.*$", re.M)
_MD = MarkdownIt("commonmark").enable("table")
_STYLE = """
body { font-family: "DejaVu Serif", Georgia, serif; font-size: 10.5pt; line-height: 1.4; margin: 0 1.5em; }
h1 { font-size: 20pt; } h2 { font-size: 15pt; border-bottom: 1px solid #999; margin-top: 1.6em; }
h3 { font-size: 12pt; margin: 1.2em 0 0.3em; break-after: avoid; }
pre { background: #f4f4f4; padding: 0.5em; font-size: 8.5pt; white-space: pre-wrap; break-inside: avoid; }
.item { break-inside: avoid; margin-bottom: 0.8em; }
.answer { border-left: 3px solid #2e7d32; padding-left: 0.7em; }
.label { color: #555; font-family: monospace; font-size: 9pt; }
.result { border-left: 3px solid #1565c0; padding-left: 0.7em; background: #eef4fb; }
"""


def _markdown(source: str) -> str:
    text = _FENCE.sub("", _ROLE.sub(lambda m: m.group(1) or m.group(2), source))
    # keep math away from markdown's emphasis and escapes: each $...$ / $$...$$ span is rendered as is
    spans: list[str] = []

    def hold(m: re.Match) -> str:
        spans.append(html.escape(m.group(0)))
        return f"MATHSPAN{len(spans) - 1}X"

    text = re.sub(r"\$\$.+?\$\$|\$[^$\n]+?\$", hold, text, flags=re.S)
    out = _MD.render(text)
    return re.sub(r"MATHSPAN(\d+)X", lambda m: spans[int(m.group(1))], out)


def quiz_part() -> str:
    parts = ["<h2>1. Self-check questions</h2>"]
    for path in sorted(QUESTIONS.glob("[0-9][0-9]_*.json")):
        parts.append(f"<h3>Notebook {path.stem}</h3>")
        for number, q in enumerate(json.loads(path.read_text()), 1):
            (right,) = [a for a in q["answers"] if a["correct"]]
            parts.append(
                f'<div class="item"><p><b>Q{number}.</b> {html.escape(q["question"])}</p>'
                f'<p class="answer"><b>Answer:</b> {html.escape(right["answer"])}<br>'
                f"<i>Why:</i> {html.escape(right['feedback'])}</p></div>"
            )
    return "\n".join(parts)


def _output_text(cell: dict) -> str:
    """What a code cell printed: its standard output and its results (markdown, else plain text), in order;
    not its warnings (standard error)."""
    texts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            text = out.get("text") if out.get("name") == "stdout" else None
        else:
            data = out.get("data", {})
            text = data.get("text/markdown") or data.get("text/plain")
        if text:
            texts.append(text if isinstance(text, str) else "".join(text))
    return "".join(t if t.endswith("\n") else t + "\n" for t in texts).rstrip("\n")


def executed_outputs(stem: str, folders: list[Path] | None = None) -> tuple[Path | None, dict[str, tuple[str, str]]]:
    """The executed notebook ``stem`` (the first of ``folders``, default :data:`EXECUTED`, that holds it) and
    what each code cell printed with the folder it came from (its profile: ``paper`` or ``fast``), by the cell's
    source, from the first of the folders whose copy has a cell of that source (a stale paper-profile copy does
    not hide a current fast one); ``(None, {})`` where none holds it."""
    first, outputs = None, {}
    for folder in EXECUTED if folders is None else folders:
        path = Path(folder) / f"{stem}.ipynb"
        if path.is_file():
            first = first or path
            cells = json.loads(path.read_text())["cells"]
            for c in cells:
                if c["cell_type"] == "code":
                    outputs.setdefault("".join(c["source"]), (_output_text(c), Path(folder).name))
    return first, outputs


def _result(text: str, profile: str | None = None) -> str:
    """A printed result; ``profile``: the workflow profile whose run printed it (its numbers differ by profile)."""
    label = f"Result ({profile} profile)" if profile else "Result"
    return f'<pre class="result">{label}:\n{html.escape(text)}</pre>'


def _solution_sources(path: Path) -> list[str]:
    """The sources of the lesson's solution code cells, whose results the key prints."""
    cells = jupytext.read(path).cells
    return [c.source for c in cells if c.cell_type == "code" and "solution" in c.metadata.get("tags", [])]


def without_results(folders: list[Path] | None = None) -> list[Path]:
    """The lessons with a solution code cell that no executed notebook (``folders``, default :data:`EXECUTED`)
    printed with that very source: their results would be missing from the key."""
    lessons = edition.with_exercises(NOTEBOOKS)
    return [p for p in lessons if not set(_solution_sources(p)) <= set(executed_outputs(p.stem, folders)[1])]


def execute_missing(folders: list[Path] | None = None, run=None) -> list[str]:
    """Run every lesson :func:`without_results` on the fast profile into the last of ``folders`` (default
    ``build/fast/``, its figures under ``build/fast/figures/``, never the committed ``figures/``), so that the key
    prints every result (``make reproduce`` gives the paper profile's, which the key prefers); returns their names.
    ``run`` stands for :func:`gpac_utils.workflow.runner.run_notebook` (tests)."""
    folders, run = (EXECUTED if folders is None else folders), (run or run_notebook)
    missing = without_results(folders)
    for path in missing:
        print(f"answer key: running {path.stem} on the fast profile for its results", file=sys.stderr)
        run(path, "fast", out_dir=folders[-1], figures_dir=folders[-1] / "figures", progress_bar=False)
    return [p.stem for p in missing]


def exercise_part(folders: list[Path] | None = None) -> str:
    parts = ["<h2>2. Exercises and their solutions</h2>"]
    for path in edition.with_exercises(NOTEBOOKS):
        parts.append(f"<h3>Notebook {path.stem}</h3>")
        executed, outputs = executed_outputs(path.stem, folders)
        number, current = 0, None
        for cell in jupytext.read(path).cells:
            labels = edition._EXERCISE_LABEL.findall(cell.source) if cell.cell_type == "markdown" else []
            if labels:
                number += 1
                current = labels[0]
                parts.append(
                    f'<div class="item"><p><b>Exercise {number}</b> <span class="label">{labels[0]}</span></p>'
                    f"{_markdown(cell.source)}</div>"
                )
            elif "solution" in cell.metadata.get("tags", []) and current is not None:
                if cell.cell_type == "code":
                    parts.append(f'<pre class="answer">{html.escape(cell.source)}</pre>')
                    if cell.source in outputs:
                        text, profile = outputs[cell.source]
                        parts.append(_result(text or "(the cell prints nothing: its asserts passed)", profile))
                    else:  # never a stale result: the executed cell must have this very source
                        where = executed or REPO_ROOT / "build" / "paper" / f"{path.stem}.ipynb"
                        where = where.relative_to(REPO_ROOT) if where.is_relative_to(REPO_ROOT) else where
                        parts.append(
                            f'<p class="result">Result: not in {where} ({"missing" if not executed else "older"});'
                            f" run the notebook (make reproduce) and build the key again.</p>"
                        )
                elif _FENCE.sub("", cell.source).strip():
                    parts.append(f'<div class="answer">{_markdown(cell.source)}</div>')
    return "\n".join(parts)


def homework_part() -> str:
    parts = ["<h2>3. Homework solutions</h2>"]
    cells = jupytext.read(HOMEWORK).cells
    in_solution, space = False, {}
    for cell in cells:
        source = cell.source.strip()
        if cell.cell_type == "raw":
            in_solution = {"# BEGIN SOLUTION": True, "# END SOLUTION": False}.get(source, in_solution)
        elif cell.cell_type == "markdown" and source.startswith("**Question"):
            parts.append(f'<div class="item">{_markdown(source)}</div>')
        elif cell.cell_type == "code" and in_solution:
            parts.append(f'<pre class="answer">{html.escape(cell.source.replace("  # SOLUTION", ""))}</pre>')
            exec(cell.source, space)
            parts.append(_result(_values(cell.source, space)))
            parts.append(
                '<p class="why">Why: the derivation is the solution of the lesson exercise the question names '
                "(part 2 of this key), with this question's numbers.</p>"
            )
        elif cell.cell_type == "code" and "BEGIN TEST CONFIG" not in source:  # the set-up (imports)
            exec(cell.source, space)
    return "\n".join(parts)


def _values(source: str, space: dict) -> str:
    """The values of the names a homework solution's ``# SOLUTION`` lines assign (a function is left out)."""
    lines = []
    for name in re.findall(r"^(\w+) = .*# SOLUTION$", source, re.M):
        value = space[name]
        if callable(value):
            continue
        if np.ndim(value):
            array = np.asarray(value)
            value = (
                f"array of shape {array.shape}: mean {array.mean():.4g}, min {array.min():.4g}, max {array.max():.4g}"
            )
        elif isinstance(value, int | np.integer):
            value = f"{int(value)}"
        else:
            value = f"{float(value):.4g}"
        lines.append(f"{name} = {value}")
    return "\n".join(dict.fromkeys(lines))


def page(mathjax: Path | None) -> str:
    script = ""
    if mathjax is not None:
        script = (
            "<script>window.MathJax = {tex: {inlineMath: [['$', '$']], displayMath: [['$$', '$$']]},"
            " startup: {typeset: true}};</script>"
            f'<script src="mathjax/{mathjax.name}"></script>'
        )
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Answer key</title>'
        f"<style>{_STYLE}</style>{script}</head><body>"
        "<h1>Answer key — G-PAC / C-PAC reasoning</h1>"
        "<p>The teacher's copy: the answers of the self-check questions, the solutions of the lesson "
        "exercises and of the graded homework (docs/syllabus.md). Generated from the notebooks by "
        "<code>make answer-key</code>; do not hand it out before the homework is graded.</p>"
        f"{quiz_part()}{exercise_part()}{homework_part()}</body></html>"
    )


def copy_mathjax(out: Path, mathjax: Path = MATHJAX) -> Path:
    """Copy MathJax's script and fonts (:data:`MATHJAX_FILES`) to ``out/mathjax/``; the folder."""
    target = Path(out) / "mathjax"
    if target.exists():
        shutil.rmtree(target)
    for rel in MATHJAX_FILES:
        src = mathjax.parent / rel
        if src.is_dir():
            shutil.copytree(src, target / rel)
        else:
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target / rel)
    return target


def build(out: Path, chromium: str | None = None, loaded: list[str] | None = None) -> dict[str, Path]:
    """Write ``out/answer-key.html`` and print it to ``out/answer-key.pdf``; their paths.

    Refuses (``OSError``, naming them) a print during which a request failed or answered a status of 400
    or more, or the page logged an error: a missing MathJax font prints garbled mathematics. ``loaded``,
    a list: the URL of every request that finished is appended to it.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    mathjax = MATHJAX if MATHJAX.is_file() else None
    if mathjax is not None:
        copy_mathjax(out, mathjax)
    html_path, pdf_path = out / "answer-key.html", out / "answer-key.pdf"
    html_path.write_text(page(mathjax))
    chromium = chromium or shutil.which("chromium")
    if chromium is None:
        raise OSError("no Chromium to print the PDF with: `make test` installs Debian's chromium (apt-get, needs root)")
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu"])
        tab = browser.new_page()
        tab.on("requestfailed", lambda r: problems.append(f"{_short(r.url, out)}: {r.failure}"))
        tab.on("response", lambda r: r.status >= 400 and problems.append(f"{_short(r.url, out)}: status {r.status}"))
        tab.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
        tab.on("pageerror", lambda err: problems.append(f"page error: {err}"))
        if loaded is not None:
            tab.on("requestfinished", lambda r: loaded.append(r.url))
        tab.goto(html_path.resolve().as_uri())
        if mathjax is not None:
            tab.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=30_000)
            tab.evaluate("() => MathJax.startup.promise")
        tab.evaluate("() => document.fonts.ready.then(() => true)")  # every web font loaded (or failed)
        tab.pdf(
            path=str(pdf_path), format="A4", margin={"top": "18mm", "bottom": "18mm", "left": "15mm", "right": "15mm"}
        )
        browser.close()
    if problems:
        raise OSError(f"printing {html_path.name}: {len(problems)} failed loads or errors: {'; '.join(problems[:12])}")
    return {"html": html_path, "pdf": pdf_path}


def _short(url: str, out: Path) -> str:
    """A request's URL, relative to the output folder where it lies in it."""
    return url.removeprefix(out.resolve().as_uri() + "/")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="answer_key.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "answer-key")
    args = ap.parse_args(argv)
    if problem := folder_error("--out", args.out):  # a usage error (exit 2), before any build
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        execute_missing()
        pdf = build(args.out)["pdf"]
    except NotebookFailed as exc:
        print(f"answer key: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"answer key: {exc}", file=sys.stderr)
        return 1
    print(f"answer key: {pdf} ({pdf.stat().st_size // 1024} KiB; the page it was printed from beside it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
