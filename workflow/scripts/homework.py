"""The graded homework (``make homework``, ``make grade``): otter-grader's student notebook, autograder and grades.

    python workflow/scripts/homework.py [--out build/homework]
    python workflow/scripts/homework.py grade SUBMISSIONS [--autograder ...] [--out build/homework]

The first form reads the assignment source ``notebooks/homework/gpac_homework.py`` (a jupytext notebook
in otter-grader's assignment format: questions, solutions and tests; docs/teaching.md), writes it as
``<out>/source/gpac_homework.ipynb`` and runs ``otter assign`` on it, which checks that the solutions
pass every test and writes

* ``<out>/student/``: the notebook to hand out (solutions replaced by ``...``; its public checks, which
  ``grader.check`` runs, catch the typical mistakes) — hand out the whole folder;
* ``<out>/autograder.zip``: the autograder, with the hidden tests that check the answers' values;
* ``<out>/solution/gpac_homework.ipynb``: the notebook with its solutions (a full-marks submission).

The second form grades every ``SUBMISSIONS/*.ipynb`` with ``otter run`` (locally, no Docker), each in
``<out>/results/NAME/`` (otter's ``results.json`` and ``feedback.md``: the points per question and, for
each failed check, its hint — never the expected value), and writes the class table
``<out>/grades.csv``: one row per student (the file name), the points of each question and the total.

The hints come in two steps (:func:`feedback`): the form check's (each question's first) always; the
others — the public checks' (``grader.check`` runs them, and they too pass silently while the form check
fails) and the hidden checks', which come near the solution — only for an answer that passes its
question's form check, so never for a blank one.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jupytext
import nbformat
import yaml

from gpac_utils.workflow.paths import folder_error

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE = REPO_ROOT / "notebooks" / "homework" / "gpac_homework.py"
#: a failed check's hint in otter's output (its ``failure_message``); a passed check has none
HINT = re.compile(r"^\s*(q\d+) - (\d+) message: (.*)$", re.M)
#: the test config of one check in the assignment source (a docstring opening the test's cell)
_TEST_CONFIG = re.compile(r'^""" # BEGIN TEST CONFIG\n(.*?)"""\s+# END TEST CONFIG', re.S)
#: a question's lesson exercise, for maintainers, in the question's config cell (which otter drops)
_EXERCISE = re.compile(r"^# exercise: (\S+)", re.M)
#: in the text the student reads: a reference to a lesson exercise as the student edition numbers it
EXERCISE_REF = re.compile(r"Exercise (\d+) in notebook `(\d\d_\w+)`")
#: the one line of feedback that stands for the withheld hints of a question whose form check failed
WITHHELD = "the hints on the values come once the answer passes the first check (a blank answer gets none)"


def questions(source: Path = SOURCE) -> dict[str, dict]:
    """Each question of the assignment source: ``{name: {"exercise": label, "checks": [check, ...]}}``.

    A check is ``{"number": k, "hidden": bool, "message": failure_message}``, numbered from 1 in the
    question's order as otter numbers them in its output (``q2 - 3 message: ...``); the first is the
    form check. ``exercise`` is the label of the lesson exercise the question grades (its config's
    ``# exercise:`` comment), or None.
    """
    found: dict[str, dict] = {}
    current = None
    for cell in jupytext.read(source).cells:
        text = cell.source.strip()
        if cell.cell_type == "raw" and text.startswith("# BEGIN QUESTION"):
            config = yaml.safe_load(text) or {}
            current = found.setdefault(config["name"], {"exercise": None, "checks": []})
            current["exercise"] = next(iter(_EXERCISE.findall(text)), None)
        elif cell.cell_type == "raw" and text == "# END QUESTION":
            current = None
        elif cell.cell_type == "code" and current is not None and (m := _TEST_CONFIG.match(text)):
            config = yaml.safe_load(m.group(1)) or {}
            current["checks"].append(
                {
                    "number": len(current["checks"]) + 1,
                    "hidden": bool(config.get("hidden", False)),
                    "message": config.get("failure_message", ""),
                }
            )
    return found


def answer_lines(mistakes: dict[str, str] | None = None, source: Path = SOURCE) -> dict[str, str]:
    """The solution's answer lines, ``{left-hand side: whole line}`` (``x =`` or ``return``), ``mistakes`` applied.

    The lines of ``source`` that end in ``  # SOLUTION``; ``mistakes`` maps a solution line to the line
    that replaces it. :func:`fill_in` writes them into the student's notebook.
    """
    mistakes = mistakes or {}
    raw = source.read_text().splitlines()
    lines = [line.removesuffix("  # SOLUTION").strip() for line in raw if line.endswith("  # SOLUTION")]
    return {re.match(r"(return|\w+ =) ", line).group(1): mistakes.get(line, line) for line in lines}


def fill_in(nb: nbformat.NotebookNode, answers: dict[str, str]) -> nbformat.NotebookNode:
    """The student's notebook ``nb`` with each ``...`` replaced by its answer line (as a student fills it in).

    otter shows ``x = ...`` for an assigned answer and a bare ``...`` for a ``return``.
    """
    for cell in nb.cells:
        for lhs, line in answers.items():
            pattern = r"^(\s*)\.\.\.$" if lhs == "return" else rf"^(\s*){re.escape(lhs)} \.\.\.$"
            cell.source = re.sub(pattern, lambda m, line=line: m.group(1) + line, cell.source, flags=re.M)
    return nb


def build(out: Path, source: Path = SOURCE, check_solutions: bool = True) -> dict[str, Path]:
    """Run ``otter assign`` on ``source`` into ``out``; the paths of the student notebook, autograder and solution.

    ``check_solutions=False`` skips otter's run of the tests on the solutions (``--no-run-tests``), for a
    caller that grades the solution notebook itself (tests/test_homework.py).
    """
    out = Path(out).resolve()
    if out.exists():
        shutil.rmtree(out)
    (out / "source").mkdir(parents=True)
    master = out / "source" / f"{source.stem}.ipynb"
    nbformat.write(jupytext.read(source), master)
    with tempfile.TemporaryDirectory(prefix="otter-assign-") as tmp:
        dist = Path(tmp) / "dist"
        proc = subprocess.run(
            [sys.executable, "-m", "otter", "assign", "--no-pdfs", *([] if check_solutions else ["--no-run-tests"])]
            + [str(master), str(dist)],
            capture_output=True,
            text=True,
            cwd=master.parent,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"otter assign failed on {source.name}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        (zip_file,) = (dist / "autograder").glob("*.zip")
        shutil.copytree(dist / "student", out / "student")
        shutil.copy2(zip_file, out / "autograder.zip")
        (out / "solution").mkdir()
        shutil.copy2(dist / "autograder" / master.name, out / "solution" / master.name)
    return {
        "student": out / "student" / master.name,
        "autograder": out / "autograder.zip",
        "solution": out / "solution" / master.name,
    }


#: nbclient's message when a kernel does not start within its 60 s (otter run has no option to wait longer)
KERNEL_TIMEOUT = "Kernel didn't respond in"


def _otter_run(submission: Path, autograder: Path, results: Path) -> dict:
    """Grade one submission into ``results`` (created) with ``otter run``; its ``results.json``.

    A kernel that did not start within nbclient's 60 s (a busy machine: a grading beside other work) is
    started again, once, and said so on stderr; any other failure is an error at once."""
    results.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "otter", "run", "--no-logo", "-a", str(autograder), "-o", str(results)]
    proc = subprocess.run([*cmd, str(submission)], capture_output=True, text=True)
    if proc.returncode != 0 and KERNEL_TIMEOUT in proc.stderr:
        print(
            f"note: {submission.name}: its kernel did not start in 60 s (a busy machine); grading it again",
            file=sys.stderr,
        )
        proc = subprocess.run([*cmd, str(submission)], capture_output=True, text=True)
    if proc.returncode != 0 or not (results / "results.json").exists():
        raise RuntimeError(f"otter run failed on {submission.name}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return json.loads((results / "results.json").read_text())


def feedback(student: str, results: dict, checks: dict[str, dict] | None = None) -> str:
    """A student's feedback (markdown): the points per question and the hints of its failed checks.

    The hint of a failed form check (a question's first, public) is always given; those of its other
    failed checks — the public ones, which assume an answer of the right form, and the hidden ones, which
    come near the solution — only where the form check passed (a blank answer fails it), else one line,
    :data:`WITHHELD`, stands for them. ``checks``:
    :func:`questions` of the assignment (default: of ``notebooks/homework/gpac_homework.py``).
    """
    checks = questions() if checks is None else checks
    graded = [t for t in results["tests"] if re.fullmatch(r"q\d+", t["name"])]
    got, possible = sum(t["score"] for t in graded), sum(t["max_score"] for t in graded)
    lines = [f"# Homework feedback: {student}", "", f"{got:g} of {possible:g} points.", ""]
    for t in graded:
        lines.append(f"## {t['name']}: {t['score']:g} of {t['max_score']:g}")
        hidden = {c["number"] for c in checks.get(t["name"], {}).get("checks", []) if c["hidden"]}
        failed = {int(k): hint for q, k, hint in HINT.findall(t.get("output", "")) if q == t["name"]}
        if 1 in failed:  # the form check's hint alone: the others assume an answer of the right form
            hints = [f"* {failed[1]}"] + ([f"* {WITHHELD}"] if set(failed) - {1} else [])
        else:  # the public checks' hints first, then the hidden ones'
            hints = [f"* {failed[k]}" for k in sorted(failed, key=lambda k: (k in hidden, k))]
        lines += hints or ["* every check passed"]
        lines.append("")
    return "\n".join(lines)


def grade(submissions: Path, autograder: Path, out: Path, jobs: int = 2):
    """Grade every ``submissions/*.ipynb`` into ``out/results/NAME/``; the class table, also ``out/grades.csv``."""
    import pandas as pd

    submissions, autograder, out = Path(submissions), Path(autograder), Path(out)
    if not submissions.is_dir():
        raise OSError(f"submissions: {submissions} is not a folder (one NAME.ipynb per student)")
    if not autograder.is_file():
        raise OSError(f"autograder: {autograder} does not exist; run `make homework` first")
    files = sorted(submissions.glob("*.ipynb"))
    if not files:
        raise OSError(f"submissions: no .ipynb file in {submissions}")
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        graded = list(pool.map(lambda f: _otter_run(f, autograder, out / "results" / f.stem), files))
    rows = []
    for path, results in zip(files, graded):
        (out / "results" / path.stem / "feedback.md").write_text(feedback(path.stem, results))
        points = {t["name"]: t["score"] for t in results["tests"] if re.fullmatch(r"q\d+", t["name"])}
        rows.append({"student": path.stem, **points, "total": sum(points.values())})
    table = pd.DataFrame(rows)
    table.to_csv(out / "grades.csv", index=False)
    return table


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(prog="homework.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "homework")
    if argv[:1] == ["grade"]:
        ap.prog += " grade"
        ap.add_argument("submissions", type=Path, help="a folder of submitted notebooks, NAME.ipynb each")
        ap.add_argument("--autograder", type=Path, help="default: OUT/autograder.zip (make homework)")
        ap.add_argument("--jobs", type=int, default=2, help="submissions graded at a time")
        args = ap.parse_args(argv[1:])
        if problem := folder_error("--out", args.out):  # a usage error (exit 2), before any grading
            print(f"error: {problem}", file=sys.stderr)
            return 2
        try:
            table = grade(args.submissions, args.autograder or args.out / "autograder.zip", args.out, args.jobs)
        except (RuntimeError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(table.to_string(index=False))
        print(f"grades: {args.out / 'grades.csv'}; feedback: {args.out / 'results'}/NAME/feedback.md")
        return 0
    args = ap.parse_args(argv)
    if problem := folder_error("--out", args.out):  # a usage error (exit 2), before any build
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        paths = build(args.out)
    except (RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for what, path in paths.items():
        print(f"{what}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
