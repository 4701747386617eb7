"""Every notebooks/NN_*.py: static checks (fast, no kernel) and a full execution on the fast profile.

Notebooks are discovered at collection time, so notebooks added later are picked up
automatically. Executions write into a temporary build folder (figures and tables still go to
figures/, as the notebooks themselves decide).
"""

from __future__ import annotations

import ast
import re

import jupytext
import nbformat
import pytest

from gpac_utils.workflow import config
from gpac_utils.workflow import runner as run

NOTEBOOKS = run.discover()
IDS = [p.stem for p in NOTEBOOKS]
#: At most this many papermill parameters per notebook (profile, a few overrides, ``overrides``).
MAX_PARAMETERS = 7
#: Per-cell timeout of a notebook execution in the test suite (seconds).
CELL_TIMEOUT = 600
#: Text a notebook must not contain: path hacks, installs, working-directory changes.
FORBIDDEN = {
    "sys.path": re.compile(r"\bsys\.path\b"),
    "!pip": re.compile(r"!\s*pip\b"),
    "%pip": re.compile(r"%\s*pip\b"),
    "os.chdir": re.compile(r"\bos\.chdir\b"),
    "%cd": re.compile(r"^\s*#?\s*%cd\b", re.MULTILINE),
}


def test_notebooks_are_discovered():
    assert NOTEBOOKS, "no notebooks/NN_*.py found"
    numbers = [p.name[:2] for p in NOTEBOOKS]
    assert numbers == sorted(numbers)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_static(path):
    text = path.read_text()
    for what, pattern in FORBIDDEN.items():
        hit = pattern.search(text)
        assert hit is None, f"{path.name} contains {what!r} at character {hit.start() if hit else ''}"
    nb = jupytext.read(path)
    spec = nb.metadata.get("kernelspec", {})
    assert spec.get("name") == "python3", f"{path.name}: kernelspec name is {spec.get('name')!r}, not 'python3'"
    assert spec.get("language", "python") == "python"
    assert nb.cells and nb.cells[0].cell_type == "markdown", f"{path.name}: the first cell must be markdown"
    assert nb.cells[0].source.strip(), f"{path.name}: the first markdown cell is empty"
    # exactly one parameters cell (papermill's parser), literals only
    declared = {name: ast.literal_eval(value) for name, value in run.declared_parameters(nb, path.name).items()}
    assert "profile" in declared, f"{path.name}: the parameters cell must declare `profile`"
    assert declared["profile"] == "paper", f"{path.name}: `profile` must default to 'paper'"
    assert len(declared) <= MAX_PARAMETERS, f"{path.name}: {len(declared)} parameters; keep the rest in its config file"
    assert "overrides" in declared and declared["overrides"] == {}, f"{path.name}: declare `overrides = {{}}`"
    # one configuration source: notebooks/config/<stem>.yaml with both profiles
    raw = config.read_config(path.stem)
    assert set(raw["profiles"]) >= {"fast", "paper"}
    assert re.search(rf'config\.load\(\s*"{path.stem}"', text), (
        f'{path.name}: build cfg with config.load("{path.stem}", ...)'
    )
    first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    (params_at,) = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert params_at > first_code, f"{path.name}: imports come before the parameters cell"
    assert nb.cells[params_at].cell_type == "code"


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_executes_on_fast_profile(path, fast_notebook):
    out = fast_notebook(path.stem)  # the fast profile of 01/02 is the CPU walk: the suite runs it once
    nb = nbformat.read(str(out), as_version=4)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
    assert "IProgress not found" not in out.read_text(), f"{path.name}: progress bars do not render (ipywidgets)"
    if "config.in_batch()" in path.read_text():  # its controls are skipped in a batch (progress bars stay)
        assert "application/vnd.jupyter.widget-view+json" not in out.read_text(), f"{path.name}: widgets in a batch"
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and 'profile = "fast"' in injected[0].source
