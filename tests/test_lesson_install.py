"""The light install for students (docs/syllabus.md): ``pip install ".[lesson]"``, locked as requirements/lesson.lock.

``make venv-lesson`` builds ``.venv-lesson`` from that lock (the install step: it downloads; nothing here
does). The tests marked ``lesson`` run in ``make test-lesson`` (``make test`` runs it after building the
venv; the main suite deselects them) and skip, saying why, where ``.venv-lesson`` is not built:

* ``.venv-lesson`` holds exactly what the lock pins (and the package, editable) — none of the
  research tools (torch, Snakemake, papermill); otter-grader is there, for the homework's checks;
* every lesson's student edition (``make student``: the notebooks with exercises, their solutions taken
  out) runs there on the fast profile, in the venv's own kernel "Python 3 (gpac)", with no error: what a
  student runs, where a student runs it, and no cell after an exercise depends on what its solution
  computed. The solutions themselves run in the main suite (the book's fast-profile executions); that
  they import nothing the light install lacks is checked below, without running them;
* the handed-out homework (``make homework``'s student notebook), filled in with the solution, runs
  there and every public check (``grader.check("q1")``, ...) passes.

The unmarked tests check the extra itself: every package a lesson imports is in it.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import tomllib

import jupytext
import pytest
import repo_scripts
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from gpac_utils.workflow.paths import NOTEBOOKS, REPO_ROOT

LESSON_VENV = REPO_ROOT / ".venv-lesson"
LESSON_PY = LESSON_VENV / "bin" / "python"


def _load(name: str):
    return repo_scripts.load(f"workflow/scripts/{name}.py")


edition, lock = _load("student_edition"), _load("lock")
LESSONS = edition.with_exercises(NOTEBOOKS)
#: import name -> distribution, where they differ
DISTRIBUTION = {"sklearn": "scikit-learn", "IPython": "ipython", "yaml": "pyyaml", "mpl_toolkits": "matplotlib"}
#: what the light install leaves out (the research and build tools; Sphinx comes with otter-grader, via fica)
HEAVY = ["torch", "transformers", "snakemake", "papermill", "vllm", "jupyterquiz", "myst-nb", "litellm"]


def _imports(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_lessons_are_the_notebooks_with_exercises():
    assert [p.stem[:2] for p in LESSONS] == ["00", "10", "11", "12", "13", "21", "31", "32", "33", "36"]


def test_the_lesson_extra_holds_every_package_the_lessons_import():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    declared = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    declared |= {canonicalize_name(Requirement(r).name) for r in project["optional-dependencies"]["lesson"]}
    pinned = {
        canonicalize_name(line.split("==")[0])
        for line in lock.lock_path("lesson").read_text().splitlines()
        if "==" in line
    }
    imported = set()
    for path in LESSONS:
        code = "\n".join(c.source for c in jupytext.read(path).cells if c.cell_type == "code")
        code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))
        imported |= _imports(code)
    third_party = {m for m in imported - set(sys.stdlib_module_names) if m != "gpac_utils"}
    missing = {m for m in third_party if canonicalize_name(DISTRIBUTION.get(m, m)) not in pinned}
    assert not missing, f"the lessons import {sorted(missing)}, which requirements/lesson.lock does not pin"
    assert {"matplotlib", "jupyterlab", "jupytext", "jupyterlab-myst", "ipywidgets", "otter-grader"} <= declared
    assert not set(HEAVY) & pinned, f"the light install pins {sorted(set(HEAVY) & pinned)}"


def _lesson_venv():
    if not (LESSON_VENV / ".installed").exists():
        pytest.skip(".venv-lesson is not built: `make venv-lesson` (make test builds it before make test-lesson)")
    return LESSON_PY


@pytest.mark.lesson
def test_the_lesson_venv_holds_exactly_the_locked_versions():
    py = _lesson_venv()
    listing = subprocess.run(
        [
            str(py),
            "-c",
            "import importlib.metadata as m, json; print(json.dumps("
            "{d.metadata['Name']: d.version for d in m.distributions()}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installed = {canonicalize_name(k): v for k, v in json.loads(listing).items()}
    assert installed.pop("gpac-utils") == importlib.metadata.version("gpac-utils")
    pinned = {}
    for line in lock.lock_path("lesson").read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, version = line.split("==")
            pinned[canonicalize_name(name)] = version.split()[0].rstrip("\\").strip()
    assert installed == pinned, {
        k: (pinned.get(k), installed.get(k)) for k in set(pinned) | set(installed) if pinned.get(k) != installed.get(k)
    }


_RUN = """
import sys, jupytext, nbformat
from nbclient import NotebookClient
nb = jupytext.read(sys.argv[1])
NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": sys.argv[2]}}).execute()
errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
assert not errors, errors
print("ran", len(nb.cells), "cells")
"""


@pytest.mark.lesson
@pytest.mark.notebook
@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_lesson_s_student_edition_runs_in_the_light_install_on_the_fast_profile(path, tmp_path):
    py = _lesson_venv()
    assert edition.main([str(path), "--out", str(tmp_path / "student")]) == 0  # in .venv: make student
    student = tmp_path / "student" / f"{path.stem}.ipynb"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_PATH", "JUPYTER_DATA_DIR")
    }
    # the kernel "python3" of .venv-lesson (an empty user data folder: no kernel of the machine user wins)
    env |= {
        "GPAC_PROFILE": "fast",
        "GPAC_BATCH": "1",  # a batch, as the runner's: no widgets (config.in_batch)
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
    }
    proc = subprocess.run(
        [str(py), "-c", _RUN, str(student), str(path.parent)], env=env, capture_output=True, text=True, timeout=900
    )
    why = f"the student edition of {path.name} failed in .venv-lesson"
    assert proc.returncode == 0, f"{why}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"


_CHECKS = """
import sys, json, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": sys.argv[2]}}).execute()
def text(o):
    return o.get("data", {}).get("text/plain", "") + o.get("text", "") + "".join(o.get("traceback", []))
cells = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(("grader.check", "# Initialize Otter"))]
print(json.dumps({c.source: "".join(text(o) for o in c.outputs) for c in cells}))
"""


@pytest.mark.lesson
def test_the_homework_checks_pass_on_the_solution_in_the_light_install(tmp_path):
    """The student's homework notebook, filled in with the solution, runs in .venv-lesson: every check passes."""
    py = _lesson_venv()
    pytest.importorskip("otter", reason="otter-grader builds the homework (the `homework` extra of .venv)")
    import nbformat

    homework = _load("homework")
    built = homework.build(tmp_path / "homework", check_solutions=False)  # in .venv: otter assign
    student = nbformat.read(built["student"], as_version=4)
    homework.fill_in(student, homework.answer_lines())
    assert "..." not in "".join(c.source for c in student.cells if c.cell_type == "code")
    nbformat.write(student, built["student"])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JUPYTER_PATH")}
    env |= {"JUPYTER_DATA_DIR": str(tmp_path / "data"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    proc = subprocess.run(
        [str(py), "-c", _CHECKS, str(built["student"]), str(built["student"].parent)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"the homework failed in .venv-lesson:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    shown = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(k for k in shown if k.startswith("grader.check")) == [
        f'grader.check("{q}")' for q in homework.questions()
    ]
    for cell, output in shown.items():
        if cell.startswith("grader.check"):
            assert "All test cases passed!" in output, f"{cell} in .venv-lesson:\n{output}"
        else:  # the notebook's first cell: import otter, grader = otter.Notebook(...)
            assert "Error" not in output, output
