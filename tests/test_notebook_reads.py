"""Every repository file a notebook reads is an input of its rule in the workflow (issue 30, item 3).

The suite records, for every notebook it executes, the repository files the kernel opens for reading
(:mod:`gpac_utils.workflow.reads`: an audit hook on the interpreter's ``open`` event, installed in the
kernel by its startup file; tests/conftest.py turns it on for the whole session). Each notebook's
record is compared with what workflow/Snakefile gives its rule as inputs: the notebook, its
configuration, its self-check questions, every file of the package, and the ``reads`` of
workflow/notebooks.yaml. Files that git ignores (outputs such as ``data/generations/``, which 01
writes and reads back) are not repository files and are not inputs. The
executions are the suite's own fast-profile runs (tests/test_notebooks.py), not a second pass.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys

import pytest
import yaml

from gpac_utils.workflow import reads
from gpac_utils.workflow import runner as run
from gpac_utils.workflow.paths import REPO_ROOT

NOTEBOOKS = run.discover()
IDS = [p.stem for p in NOTEBOOKS]
SPEC = yaml.safe_load((REPO_ROOT / "workflow" / "notebooks.yaml").read_text())


def undeclared(stem: str, files: set[str]) -> list[str]:
    """The files of ``files`` (paths from the repository root) that are not inputs of ``stem``'s rule."""
    declared = SPEC[stem].get("reads", [])

    def is_input(f: str) -> bool:
        return (
            f in (f"notebooks/{stem}.py", f"notebooks/config/{stem}.yaml", f"notebooks/questions/{stem}.json")
            or f.startswith("gpac_utils/")  # the package: every file of it (Snakefile's PACKAGE)
            or any(fnmatch.fnmatchcase(f, pattern) for pattern in declared)
        )

    ignored = git_ignored(files)
    return sorted(f for f in files if not is_input(f) and f not in ignored)


def git_ignored(files) -> set[str]:
    """The paths of ``files`` that git ignores (``git check-ignore``)."""
    inside = sorted(f for f in files if not f.startswith(".."))
    out = subprocess.run(
        ["git", "check-ignore", "--stdin"], input="\n".join(inside), cwd=REPO_ROOT, capture_output=True, text=True
    )
    return set(out.stdout.split("\n")) - {""}


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_a_notebook_reads_only_declared_repository_files(path, fast_notebook):
    fast_notebook(path.stem)
    got = reads.recorded(path.stem)
    assert f"notebooks/config/{path.stem}.yaml" in got, f"{path.stem}: no record of its own configuration: {got}"
    outside = sorted(f for f in got if f.startswith(".."))
    assert not outside, f"{path.stem} reads {outside}, beside the repository: a clone elsewhere has none of it"
    missing = undeclared(path.stem, got)
    assert not missing, f"{path.stem} reads {missing}: declare them in workflow/notebooks.yaml `reads`"


def test_the_check_finds_an_undeclared_read():
    stem = "34_real_generations"
    assert undeclared(stem, {"notebooks/config/21_table_known_groups.yaml", "gpac_utils/paper/data/x.csv"}) == []
    assert undeclared(stem, {"notebooks/config/22_table_cpac.yaml", "benchmarks/bpac.py"}) == [
        "benchmarks/bpac.py",
        "notebooks/config/22_table_cpac.yaml",
    ]


def test_the_hook_records_reads_under_the_root_only(tmp_path):
    root, log = tmp_path / "repo", tmp_path / "reads.txt"
    (root / "data").mkdir(parents=True)
    (root / "data" / "a.csv").write_text("x")
    (root / "b.yaml").write_text("x")
    (root / ".venv").mkdir()
    (root / ".venv" / "c.py").write_text("x")
    code = (
        f"from gpac_utils.workflow import reads; reads.install({str(log)!r}, {str(root)!r}); import os\n"
        "open('data/a.csv').read(); open('data/a.csv', 'rb').read()\n"  # read twice: recorded once
        "os.close(os.open('b.yaml', os.O_RDONLY))\n"  # os.open too
        "open('.venv/c.py').read(); open('new.txt', 'w').close(); open('b.yaml', 'a').close()\n"  # not recorded
        f"open({str(REPO_ROOT / 'pyproject.toml')!r}).read()\n"  # elsewhere: not recorded
        "open('../shared/x.csv').read()\n"  # beside the root: recorded as such
        "import pandas as pd; pd.DataFrame({'a': [1]}).to_parquet('data/d.parquet')\n"  # a write: not recorded
        "pd.read_parquet('data/d.parquet')\n"  # pyarrow opens it in C++: announced
    )
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "x.csv").write_text("x")
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True, timeout=120)
    assert log.read_text().splitlines() == ["data/a.csv", "b.yaml", "../shared/x.csv", "data/d.parquet"]


def test_a_clone_in_the_temporary_folder_does_not_record_the_temporary_files_beside_it(tmp_path):
    """A clone in /tmp: the kernel's working folder and the session's outputs beside it are not its inputs."""
    root, log = tmp_path / "repo", tmp_path / "reads.txt"
    root.mkdir()
    (root / "b.yaml").write_text("x")
    (tmp_path / "kernel-cwd").mkdir()
    (tmp_path / "kernel-cwd" / "x.png").write_text("x")
    code = (
        f"from gpac_utils.workflow import reads; reads.install({str(log)!r}, {str(root)!r})\n"
        "open('b.yaml').read(); open('../kernel-cwd/x.png').read()\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the clone's folder is the temporary folder
    subprocess.run([sys.executable, "-c", code], cwd=root, env=env, check=True, timeout=120)
    assert log.read_text().splitlines() == ["b.yaml"]
