"""The graded homework (``make homework``): otter-grader's student notebook and autograder.

    python workflow/scripts/homework.py [--out build/homework]

reads the assignment source ``notebooks/homework/gpac_homework.py`` (a jupytext notebook in
otter-grader's assignment format: questions, solutions and tests; docs/teaching.md), writes it as
``<out>/source/gpac_homework.ipynb`` and runs ``otter assign`` on it, which checks that the solutions
pass every test and writes

* ``<out>/student/``: the notebook to hand out (solutions replaced by ``...``, the public tests that
  ``grader.check`` runs) — hand out the whole folder;
* ``<out>/autograder.zip``: the autograder, with the hidden tests that check the answers' values;
* ``<out>/solution/gpac_homework.ipynb``: the notebook with its solutions (a full-marks submission).

A submission is graded locally, without Docker, by ``otter run``::

    .venv/bin/otter run -a build/homework/autograder.zip -o build/homework/results submission.ipynb

which writes ``results.json`` (the score per question) under ``-o``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jupytext
import nbformat

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE = REPO_ROOT / "notebooks" / "homework" / "gpac_homework.py"


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="homework.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "homework")
    args = ap.parse_args(argv)
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
