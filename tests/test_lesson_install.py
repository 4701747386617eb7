"""The light install for students (docs/syllabus.md): ``pip install ".[lesson]"``, locked as requirements/lesson.lock.

``make venv-lesson`` builds ``.venv-lesson`` from that lock (the install step: it downloads; nothing here
does). The tests marked ``lesson`` run in ``make test-lesson`` (``make test`` runs it after building the
venv; the main suite deselects them) and skip, saying why, where ``.venv-lesson`` is not built:

* ``.venv-lesson`` holds exactly what the lock pins (and the package, editable) — none of the
  research tools (torch, Snakemake, Sphinx, otter-grader, papermill);
* every lesson (the notebooks with exercises, found as ``make student`` finds them) runs there on the
  fast profile, its solutions included, in the venv's own kernel "Python 3 (gpac)", with no error.

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
#: what the light install leaves out (the research and build tools)
HEAVY = ["torch", "transformers", "snakemake", "sphinx", "otter-grader", "papermill", "vllm", "jupyterquiz"]


def _imports(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_lessons_are_the_notebooks_with_exercises():
    assert [p.stem[:2] for p in LESSONS] == ["00", "10", "11", "12", "13", "21", "31", "32", "33"]


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
    assert {"matplotlib", "jupyterlab", "jupytext", "jupyterlab-myst", "ipywidgets"} <= declared
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
def test_every_lesson_runs_in_the_light_install_on_the_fast_profile(path, tmp_path):
    py = _lesson_venv()
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
        [str(py), "-c", _RUN, str(path), str(path.parent)], env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, f"{path.name} failed in .venv-lesson:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
