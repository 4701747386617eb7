"""Running notebooks: the thin papermill layer (gpac_utils.workflow.runner) on tiny notebooks written
into tmp_path, the Snakemake DAG of the real notebooks (dry runs), and a papermill batch over a small grid."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pandas as pd
import pytest
import yaml

from gpac_utils.workflow import runner as run
from gpac_utils.workflow.paths import REPO_ROOT

HEADER = """\
# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---
"""

TINY = (
    HEADER
    + """
# %% [markdown]
# A tiny notebook for the runner tests.

# %%
import os
import sys
import time
from pathlib import Path

# %% tags=["parameters"]
profile = "paper"
x = 1
fail = False
sleep = 0.0

# %%
print("CWD=" + os.getcwd())
print("EXE=" + sys.executable)
print(f"X={x!r} PROFILE={profile}")
print("FIG=" + str(os.environ.get("GPAC_FIGURES")))
time.sleep(sleep)
if fail:
    raise RuntimeError("planned failure")
if os.environ.get("GPAC_FIGURES"):
    tables = Path(os.environ["GPAC_FIGURES"]) / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    sq = x * x if isinstance(x, int) else None
    (tables / "t.csv").write_text(f"x,profile,sq\\n{x!r},{profile},{sq}\\n")
print("DONE")
"""
)


def write_nb(folder: Path, name: str, text: str = TINY) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(text)
    return path


def stdout_of(ipynb: Path) -> str:
    nb = nbformat.read(str(ipynb), as_version=4)
    return "".join(
        o.get("text", "") for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "stream"
    )


def printed(ipynb: Path, key: str) -> str:
    return stdout_of(ipynb).split(f"{key}=")[1].splitlines()[0]


def errors_of(ipynb: Path) -> list[str]:
    nb = nbformat.read(str(ipynb), as_version=4)
    return [o["ename"] for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]


@pytest.fixture
def tiny(tmp_path):
    return write_nb(tmp_path / "nbs", "01_tiny")


# ------------------------------------------------------------------ static helpers (no kernel)
def test_discover_and_resolve(tmp_path):
    folder = tmp_path / "nbs"
    for name in ("10_b", "02_a", "01_z", "notes", "1_bad"):
        write_nb(folder, name)
    (folder / "03_data.txt").write_text("not a notebook")
    assert [p.stem for p in run.discover(folder)] == ["01_z", "02_a", "10_b"]
    assert run.resolve_notebook("10_b", folder) == folder / "10_b.py"
    assert run.resolve_notebook("10_b.py", folder) == folder / "10_b.py"
    assert run.resolve_notebook("2", folder) == folder / "02_a.py"
    assert run.resolve_notebook(folder / "notes.py", folder) == (folder / "notes.py").resolve()
    with pytest.raises(run.RunnerError, match="'99' matches no notebook; known notebooks: 01_z, 02_a, 10_b"):
        run.resolve_notebook("99", folder)
    write_nb(folder, "10_c")
    with pytest.raises(run.RunnerError, match="ambiguous"):
        run.resolve_notebook("10", folder)


def test_declared_parameters_need_exactly_one_parameters_cell(tmp_path):
    nb = jupytext.read(write_nb(tmp_path, "01_one"))
    assert run.declared_parameters(nb) == {"profile": '"paper"', "x": "1", "fail": "False", "sleep": "0.0"}
    two = TINY.replace("# %%\nprint(", '# %% tags=["parameters"]\nprint(')
    with pytest.raises(run.RunnerError, match='one cell tagged "parameters", found 2'):
        run.declared_parameters(jupytext.read(write_nb(tmp_path, "01_two", two)), "01_two")
    none = TINY.replace('# %% tags=["parameters"]', "# %%")
    with pytest.raises(run.RunnerError, match="found 0"):
        run.declared_parameters(jupytext.read(write_nb(tmp_path, "01_none", none)), "01_none")


def test_unknown_parameter_is_a_clear_error_before_running(tmp_path, tiny):
    with pytest.raises(run.RunnerError, match=r"unknown parameter\(s\) \['epsilon'\]; it declares"):
        run.run_notebook(tiny, "fast", {"epsilon": 0.1}, out_dir=tmp_path / "out")
    assert not (tmp_path / "out" / "01_tiny.ipynb").exists()
    with pytest.raises(run.RunnerError, match="profile: unknown 'slow'"):
        run.run_notebook(tiny, "slow", out_dir=tmp_path / "out")


# Bad input to `python -m gpac_utils.workflow`, as a new user types it: one `error:` line naming the
# option, parameter or file, exit status 2, and no kernel started (each case returns in well under a second).
BAD_RUNS = [
    (["-f", "{list}", "{tiny}"], "-f {list}: expected a mapping of names to values, got [1, 2]"),
    (["-f", "{scalar}", "{tiny}"], "-f {scalar}: expected a mapping of names to values, got 3"),
    (["-f", "{broken}", "{tiny}"], "-f {broken}: cannot read it as YAML"),
    (["-f", "{missing}", "{tiny}"], "-f {missing}: no such file"),
    (["-f", "{folder}", "{tiny}"], "-f {folder}: cannot read it as YAML"),
    (["-p", "x", "abc", "{tiny}"], "01_tiny: parameter x: expected an integer, got 'abc'"),
    (["-p", "x", "1.5", "{tiny}"], "01_tiny: parameter x: expected an integer, got 1.5"),
    (["-p", "fail", "maybe", "{tiny}"], "01_tiny: parameter fail: expected true or false, got 'maybe'"),
    (["-p", "sleep", "[1]", "{tiny}"], "01_tiny: parameter sleep: expected a number, got [1]"),
    (["-p", "x", "[", "{tiny}"], "-p x '[': cannot read it as YAML"),
    (["-p", "nope", "1", "{tiny}"], "01_tiny: unknown parameter(s) ['nope']"),
    (["98_no_such_notebook"], "notebook '98_no_such_notebook' matches no notebook"),
    # the real notebooks: types from the parameters cell, the configuration file, or KNOWN_TYPES
    (["-p", "eps", "abc", "21"], "21_table_known_groups: parameter eps: expected a number, got 'abc'"),
    (["-p", "n_trials", "2.5", "21"], "21_table_known_groups: parameter n_trials: expected an integer, got 2.5"),
    (
        ["-p", "pairs", "qwen", "21"],
        "parameter pairs: expected a list, got 'qwen' (write [qwen])",
    ),
    (["-p", "data_source", "3", "21"], "21_table_known_groups: parameter data_source: expected a string, got 3"),
    (["-p", "overrides", "3", "21"], "21_table_known_groups: parameter overrides: expected a mapping, got 3"),
    (["-p", "overrides", "{alpha: x}", "21"], "parameter overrides['alpha']: expected a number, got 'x'"),
    (["-p", "overrides", "{nope: 1}", "21"], "parameter overrides: unknown setting 'nope'; known: ["),
    (
        ["-p", "regenerate", "maybe", "20"],
        "parameter regenerate: expected true or false, got 'maybe'",
    ),
    (["-p", "eps", "0.1"], "01_generate: unknown parameter(s) ['eps']"),  # all notebooks: checked before any runs
    (["-p", "eps", "1.5", "21"], "21_table_known_groups: parameter eps: must lie in (0.0, 1.0), got 1.5"),
    (["-p", "overrides", "{alpha: 2.0}", "21"], "parameter overrides['alpha']: must lie in (0.0, 1.0), got 2.0"),
]


@pytest.mark.parametrize("argv,message", BAD_RUNS)
def test_bad_input_is_one_error_line_before_any_kernel(tmp_path, tiny, capsys, monkeypatch, argv, message):
    files = {"list": "- 1\n- 2\n", "scalar": "3\n", "broken": "x: [\n"}
    names = {name: tmp_path / f"{name}.yaml" for name in files}
    for name, text in files.items():
        names[name].write_text(text)
    names.update(missing=tmp_path / "nope.yaml", folder=tmp_path, tiny=tiny)
    started = []
    monkeypatch.setattr(run.papermill, "execute_notebook", lambda *a, **k: started.append(a))

    def fill(text: str) -> str:
        for name, value in names.items():
            text = text.replace("{" + name + "}", str(value))
        return text

    argv = [fill(arg) for arg in argv]
    assert run.main(["--profile", "fast", "--build-dir", str(tmp_path / "b"), *argv]) == run.EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert fill(message) in err[0]
    assert not started and not (tmp_path / "b").exists()


def test_good_parameters_of_every_real_notebook_pass_the_type_check():
    """The defaults of every parameters cell and every profile's settings as overrides are accepted."""
    from gpac_utils.workflow import config

    for path in run.discover():
        nb = jupytext.read(path)
        declared = run.declared_parameters(nb, path.stem)
        raw = config.read_config(path.stem)
        for profile in ("fast", "paper"):
            values = {**raw["common"], **(raw["profiles"][profile] or {})}
            shared = {k: v for k, v in values.items() if k in declared and k != "overrides"}
            run.check_parameters(nb, {"profile": profile, **shared, "overrides": values}, path.stem)


def test_outputs_of_a_non_paper_profile_never_reach_figures(monkeypatch):
    """Whatever command ran the notebook (plain papermill sets no GPAC_FIGURES), config.load with
    profile 'fast' sends figures and tables under build/fast/."""
    from gpac_utils.workflow import config, paths

    monkeypatch.delenv("GPAC_FIGURES", raising=False)
    try:
        config.load("21_table_known_groups", "fast")
        assert paths.figures_dir() == paths.BUILD / "fast" / "figures"
        assert paths.tables_dir() == paths.BUILD / "fast" / "figures" / "tables"
        config.load("21_table_known_groups", "paper")
        assert paths.figures_dir() == paths.FIGURES
        monkeypatch.setenv("GPAC_FIGURES", "/tmp/elsewhere")
        assert str(paths.figures_dir()) == "/tmp/elsewhere"
    finally:
        paths.set_profile(None)


def test_make_lab_opens_the_repository_root_with_py_notebooks_as_notebooks():
    text = (REPO_ROOT / "Makefile").read_text()
    lab = text[text.index("\nlab:") :].split("\n\n")[0]
    assert "--ServerApp.root_dir=$(CURDIR)" in lab and "notebooks" not in lab.split("root_dir=$(CURDIR)")[1]
    # the viewer setting: jupyter/lab-overrides.json, installed by make venv (tests/test_jupyterlab.py)
    assert "$(INSTALL_LAB_SETTINGS)" in lab


# ------------------------------------------------------------------ executions (one kernel each)
def test_run_notebook_success_outside_repo_root(tmp_path, tiny, monkeypatch):
    monkeypatch.delenv("GPAC_FIGURES", raising=False)
    figures = tmp_path / "out" / "figures"
    out = run.run_notebook(tiny, "fast", {"x": 42}, tmp_path / "out", 120, figures_dir=figures, progress_bar=False)
    assert out == tmp_path / "out" / "01_tiny.ipynb"
    assert "X=42 PROFILE=fast" in stdout_of(out) and "DONE" in stdout_of(out)
    assert Path(printed(out, "CWD")).resolve() != REPO_ROOT.resolve()
    assert Path(printed(out, "EXE")).absolute() == Path(sys.executable).absolute()
    nb = nbformat.read(str(out), as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "x = 42" in injected[0].source
    # the measured runtime the book shows
    assert nb.metadata.papermill.duration > 0 and run.duration(out) == nb.metadata.papermill.duration
    # figures_dir reaches the kernel as GPAC_FIGURES
    assert printed(out, "FIG") == str(figures)
    assert (tmp_path / "out" / "figures" / "tables" / "t.csv").exists()
    assert "GPAC_FIGURES" not in os.environ  # restored after the run


def test_paper_profile_keeps_figures_and_explicit_setting_wins(tmp_path, tiny, monkeypatch):
    monkeypatch.delenv("GPAC_FIGURES", raising=False)
    out = run.run_notebook(tiny, "paper", out_dir=tmp_path / "p", timeout=120, progress_bar=False)
    assert printed(out, "FIG") == "None"  # left alone: gpac_utils.workflow.paths decides (config.load's profile)
    monkeypatch.setenv("GPAC_FIGURES", str(tmp_path / "mine"))
    out = run.run_notebook(tiny, "fast", out_dir=tmp_path / "f", timeout=120, progress_bar=False)
    assert printed(out, "FIG") == str(tmp_path / "mine")


def test_failure_and_cell_timeout_keep_the_notebook(tmp_path, tiny):
    with pytest.raises(run.NotebookFailed, match="RuntimeError: planned failure") as info:
        run.run_notebook(tiny, "fast", {"fail": True}, out_dir=tmp_path / "out", timeout=120, progress_bar=False)
    assert info.value.output == tmp_path / "out" / "01_tiny.ipynb"
    assert errors_of(info.value.output) == ["RuntimeError"] and "DONE" not in stdout_of(info.value.output)
    with pytest.raises(run.NotebookFailed, match="Timeout") as info:
        run.run_notebook(tiny, "fast", {"sleep": 60.0}, out_dir=tmp_path / "t", timeout=3, progress_bar=False)
    assert info.value.output.exists() and "DONE" not in stdout_of(info.value.output)


def test_cli_parameters_from_flags_and_file_reach_the_notebook(tmp_path, tiny, capsys):
    params = tmp_path / "params.yaml"
    params.write_text("x: 7\nsleep: 0.1\n")
    build = ["--build-dir", str(tmp_path / "build"), "--no-progress-bar"]
    assert run.main(["--profile", "fast", *build, "-f", str(params), str(tiny)]) == run.EXIT_OK
    assert "X=7 PROFILE=fast" in stdout_of(tmp_path / "build" / "fast" / "01_tiny.ipynb")
    assert run.main(["--profile", "fast", *build, "-f", str(params), "-p", "x", "12", str(tiny)]) == run.EXIT_OK
    assert "X=12 PROFILE=fast" in stdout_of(tmp_path / "build" / "fast" / "01_tiny.ipynb")
    assert run.main(["--profile", "fast", *build, "-p", "fail", "true", str(tiny)]) == run.EXIT_FAILED
    assert "planned failure" in capsys.readouterr().err
    assert run.main(["--profile", "fast", *build, "-p", "nope", "1", str(tiny)]) == run.EXIT_USAGE
    assert "unknown parameter(s) ['nope']" in capsys.readouterr().err
    assert run.main(["--profile", "fast", *build, "98_no_such_notebook"]) == run.EXIT_USAGE


# ------------------------------------------------------------------ the Snakemake workflow
NOTEBOOKS_YAML = yaml.safe_load((REPO_ROOT / "workflow" / "notebooks.yaml").read_text())


def snakemake(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "snakemake", "--nolock", *args]
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.fixture
def checkout(tmp_path):
    """A folder that looks like the repository (links to its sources and data), so that Snakemake's
    bookkeeping (.snakemake/) and outputs stay in tmp_path; figures/ is empty."""
    for name in ("notebooks", "gpac_utils", "data", "workflow"):
        (tmp_path / name).symlink_to(REPO_ROOT / name)
    return tmp_path


def summary(checkout: Path, profile: str = "paper") -> pd.DataFrame:
    """Snakemake's --summary: one row per output file (its rule, status, plan)."""
    text = snakemake("-s", "workflow/Snakefile", "--summary", "--config", f"profile={profile}", cwd=checkout).stdout
    rows = [line.split("\t") for line in text.splitlines() if "\t" in line]
    return pd.DataFrame(rows[1:], columns=rows[0])


def test_every_committed_figure_and_table_has_one_notebook_writing_it():
    declared = []
    for spec in NOTEBOOKS_YAML.values():
        for name in spec.get("writes", []):
            suffixes = (".csv", ".md") if name.startswith("tables/") else (".png", ".pdf")
            declared += [f"figures/{name}{suffix}" for suffix in suffixes]
    assert len(declared) == len(set(declared)), "a file is declared by two notebooks"
    committed = sorted(str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "figures").rglob("*") if p.is_file())
    assert sorted(declared) == committed
    assert set(NOTEBOOKS_YAML) == {p.stem for p in run.discover()}


def test_snakefile_dag_paper_profile(checkout):
    table = summary(checkout)
    outputs = dict(zip(table["output_file"], table["rule"]))
    assert outputs["build/paper/21_table_known_groups.ipynb"] == "nb_21_table_known_groups"
    assert outputs["figures/tables/01_results_known.csv"] == "nb_21_table_known_groups"
    assert outputs["figures/validity_audit.png"] == "nb_13_validity_audit"
    assert {f"build/paper/{p.stem}.ipynb" for p in run.discover()} <= set(outputs)
    assert set(table["plan"]) == {"update pending"}  # nothing built in this checkout yet
    dag = snakemake("-s", "workflow/Snakefile", "--dag", cwd=checkout).stdout
    assert dag.count("->") == 1 + len(NOTEBOOKS_YAML)  # 01 -> 02, and every notebook -> all


def test_fast_profile_declares_nothing_under_figures(checkout):
    table = summary(checkout, "fast")
    assert len(table) == len(NOTEBOOKS_YAML)
    assert all(f.startswith("build/fast/") and f.endswith(".ipynb") for f in table["output_file"])


def test_snakemake_reruns_only_the_notebook_that_changed(checkout):
    """Mark every fast-profile notebook as built (stand-in executed notebooks, then --touch), then make
    one notebook newer than its executed copy: Snakemake plans that notebook alone."""
    (checkout / "build" / "fast").mkdir(parents=True)
    for name in NOTEBOOKS_YAML:
        (checkout / "build" / "fast" / f"{name}.ipynb").write_text("{}")
    snakemake("-s", "workflow/Snakefile", "--touch", "--cores", "1", "--config", "profile=fast", cwd=checkout)
    assert set(summary(checkout, "fast")["plan"]) == {"no update"}
    executed = checkout / "build" / "fast" / "21_table_known_groups.ipynb"
    old = (REPO_ROOT / "notebooks" / "21_table_known_groups.py").stat().st_mtime - 3600  # whatever the clone's age
    os.utime(executed, (old, old))  # now older than notebooks/21_table_known_groups.py
    table = summary(checkout, "fast")
    assert table.loc[table["plan"] != "no update", "rule"].tolist() == ["nb_21_table_known_groups"]


@pytest.mark.notebook
def test_batch_runs_a_small_grid_and_combines_one_table(tmp_path):
    """A 2 x 2 grid of the tiny notebook through workflow/batch.smk: four papermill runs with
    parameter files, each with its own figures folder, stacked into combined.csv."""
    notebook = write_nb(tmp_path / "nbs", "07_tiny")
    grid = tmp_path / "grid.yaml"
    grid.write_text(
        f"notebook: {notebook}\nprofile: fast\nparameters: {{fail: false}}\n"
        "grid:\n  x: [2, 3]\n  sleep: [0.0, 0.1]\ntable: tables/t.csv\n"
    )
    out = tmp_path / "batch"
    args = ["-s", str(REPO_ROOT / "workflow" / "batch.smk"), "--cores", "2", "--config", f"grid={grid}", f"out={out}"]
    snakemake(*args, cwd=REPO_ROOT)
    combined = pd.read_csv(out / "combined.csv")
    runs = ["x=2__sleep=0.0", "x=2__sleep=0.1", "x=3__sleep=0.0", "x=3__sleep=0.1"]
    assert combined["run"].tolist() == runs
    # the grid's columns in front; "x" is also a column of the runs' table
    assert combined.columns[:3].tolist() == ["run", "x (grid)", "sleep"]
    assert combined[["x (grid)", "sleep"]].values.tolist() == [[2, 0.0], [2, 0.1], [3, 0.0], [3, 0.1]]
    assert combined["x"].tolist() == [2, 2, 3, 3]
    assert combined["sq"].tolist() == [4, 4, 9, 9]  # computed inside each run from its parameters
    assert set(combined["profile"]) == {"fast"}
    assert yaml.safe_load((out / runs[2] / "params.yaml").read_text()) == {
        "profile": "fast",
        "fail": False,
        "x": 3,
        "sleep": 0.0,
    }
    assert printed(out / runs[1] / "07_tiny.ipynb", "FIG") == str(out / runs[1] / "figures")


def test_example_grid_declares_parameters_of_its_notebook():
    for path in (REPO_ROOT / "notebooks" / "grids").glob("*.yaml"):
        spec = yaml.safe_load(path.read_text())
        assert set(spec) <= {"notebook", "profile", "parameters", "grid", "table"}, path.name
        assert spec["grid"] and all(isinstance(v, list) and v for v in spec["grid"].values()), path.name
        notebook = run.resolve_notebook(spec["notebook"])
        nb = jupytext.read(notebook)
        for values in itertools.product(*spec["grid"].values()):  # every run's parameters, types included
            run.check_parameters(nb, {**spec.get("parameters", {}), **dict(zip(spec["grid"], values))}, notebook.stem)


BAD_GRIDS = [
    ("notebook: 21\ngrid: {eps: [0.05]}\ntable: tables/x.csv\nextra: 1\n", "unknown key(s) ['extra']"),
    ("notebook: 21\ntable: tables/x.csv\n", "missing key(s) ['grid']"),
    ("- a\n", "expected a mapping of names to values, got ['a']"),
    ("notebook: [\n", "cannot read it as YAML"),
    ("notebook: 21\nprofile: slow\ngrid: {eps: [0.1]}\ntable: tables/x.csv\n", "profile: unknown 'slow'"),
    (
        "notebook: 21\ngrid: {eps: 0.1}\ntable: tables/x.csv\n",
        "grid: eps: expected a non-empty list of values, got 0.1",
    ),
    ("notebook: 21\ngrid: [eps]\ntable: tables/x.csv\n", "grid: expected a mapping of parameter names to values"),
    ("notebook: 21\ngrid: {eps: [abc]}\ntable: tables/x.csv\n", "parameter eps: expected a number, got 'abc'"),
    ("notebook: 21\ngrid: {epsx: [0.1]}\ntable: tables/x.csv\n", "unknown parameter(s) ['epsx']"),
    ("notebook: 99\ngrid: {eps: [0.1]}\ntable: tables/x.csv\n", "notebook: notebook '99' matches no notebook"),
    ("notebook: 21\ngrid: {eps: [0.1]}\ntable: tables/x.md\n", "table: expected a CSV"),
    (
        "notebook: 21\nparameters: {eps: 0.1}\ngrid: {eps: [0.1]}\ntable: tables/x.csv\n",
        "both in parameters and in grid",
    ),
    ("notebook: 21\ngrid: {pairs: [[a b], [a-b]]}\ntable: tables/x.csv\n", "two runs of the grid get the same name"),
    (None, "no such file"),
]


@pytest.fixture(scope="module")
def batch_grid():
    sys.path.insert(0, str(REPO_ROOT / "workflow"))
    import batch_grid  # workflow/batch_grid.py: what workflow/batch.smk reads a grid file with

    return batch_grid


@pytest.mark.parametrize("text,message", BAD_GRIDS)
def test_bad_grid_file_names_the_file_and_the_key(tmp_path, batch_grid, text, message):
    grid = tmp_path / "grid.yaml"
    if text is not None:
        grid.write_text(text)
    with pytest.raises(run.RunnerError) as info:
        batch_grid.read_grid(grid)
    assert str(info.value).startswith(f"grid={grid}: ") and message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("text", [BAD_GRIDS[7][0], None])
def test_make_batch_with_a_bad_grid_is_one_error_line_exit_2(tmp_path, text):
    """A bad grid file (or none) stops `make batch` before any run: one `error:` line, exit status 2."""
    grid = tmp_path / "grid.yaml"
    if text is not None:
        grid.write_text(text)
    cmd = [sys.executable, "-m", "snakemake", "--nolock", "-n", "-s", str(REPO_ROOT / "workflow" / "batch.smk")]
    cmd += ["--config", f"out={tmp_path / 'out'}"] + ([f"grid={grid}"] if text is not None else [])
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: grid"), lines


def test_grid_runs_are_named_after_their_parameters(batch_grid):
    spec, notebook, fixed, runs = batch_grid.read_grid(
        REPO_ROOT / "notebooks" / "grids" / "known_groups_eps_score.yaml"
    )
    assert notebook.stem == "21_table_known_groups" and fixed == {"profile": "fast", "pairs": ["qwen"], "n_trials": 5}
    assert len(runs) == 9 and runs["eps=0.1__scores=score_router"] == {"eps": 0.1, "scores": ["score_router"]}


def test_a_run_prints_no_warning_and_the_kernel_talks_over_ipc(tmp_path, tiny):
    """ipykernel warns "running over TCP without encryption" on every run over TCP: the runner's kernels
    use IPC sockets (run.kernel_config), so the command prints its two lines and nothing else."""
    cmd = [sys.executable, "-m", "gpac_utils.workflow", "--profile", "fast", "--no-progress-bar"]
    cmd += ["--build-dir", str(tmp_path / "build"), str(tiny)]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    config = run.kernel_config(tmp_path).KernelManager
    assert config.transport == "tcp" if os.name == "nt" else config.ip == str(tmp_path.resolve() / "kernel")
    assert "without encryption" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
    first, last = done.stdout.splitlines()
    assert first == "== 01_tiny (fast)" and re.fullmatch(r"\s+\S+01_tiny\.ipynb: [\d.]+ s", last), done.stdout


STUB_PYTHON = """#!/bin/sh
# Stands in for the interpreter: "-m gpac_utils.workflow ... --build-dir BUILD NAME" writes BUILD/fast/NAME.ipynb.
for a; do last=$a; done
echo "the runner's own output: into the log" >&2
[ "$last" = 12_finite_sample ] && exit 1
mkdir -p build/fast && echo '{}' > "build/fast/$last.ipynb"
"""


def test_the_workflow_prints_a_line_as_each_notebook_starts_and_ends_and_the_total(checkout):
    """What `make reproduce` shows (Snakemake's own messages quieted): two lines per notebook, then the total;
    a failed notebook names its log; no traceback. The notebooks' interpreter is a stub (no kernel)."""
    stub = checkout / "python-stub"
    stub.write_text(STUB_PYTHON)
    stub.chmod(0o755)
    quiet = ["-s", "workflow/Snakefile", "--quiet", "rules", "progress", "host", "--cores", "2"]

    def workflow(*names):
        config = ["--config", "profile=fast", f"python={stub}", f"notebooks=[{','.join(names)}]"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
        cmd = [sys.executable, "-m", "snakemake", "--nolock", *quiet, *config]
        return subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, timeout=300)

    done = workflow("00_quickstart", "26_concept_figure")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    expected = {f"{n}: started" for n in ("00_quickstart", "26_concept_figure")}
    assert {line for line in lines if line.endswith("started")} == expected and len(lines) == 5, lines
    done_lines = [line for line in lines[:-1] if not line.endswith("started")]  # the two jobs may interleave
    assert len(done_lines) == 2, lines
    assert all(re.fullmatch(r"(00_quickstart|26_concept_figure): done in \d+ s", line) for line in done_lines), lines
    assert re.fullmatch(r"fast profile: done, \d+ s in total", lines[-1]), lines
    assert "input:" not in done.stdout + done.stderr and "Traceback" not in done.stdout + done.stderr
    failed = workflow("12_finite_sample")
    assert failed.returncode == 1
    lines = failed.stdout.splitlines()
    assert lines[0] == "12_finite_sample: started"
    assert re.fullmatch(r"12_finite_sample: FAILED after \d+ s, see build/fast/logs/12_finite_sample\.log", lines[1])
    assert lines[2].startswith("fast profile: stopped after") and len(lines) == 3
    assert "Traceback" not in failed.stdout + failed.stderr
