"""The notebook runner (gpac_utils.workflow.runner) on tiny notebooks written into tmp_path."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import nbformat
import pytest

from gpac_utils.workflow import runner as run
from gpac_utils.workflow.paths import REPO_ROOT

HEADER = """\
# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
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
    found = run.discover(folder)
    assert [p.stem for p in found] == ["01_z", "02_a", "10_b"]
    assert run.resolve_notebook("10_b", folder) == folder / "10_b.py"
    assert run.resolve_notebook("10_b.py", folder) == folder / "10_b.py"
    assert run.resolve_notebook("2", folder) == folder / "02_a.py"
    assert run.resolve_notebook(folder / "notes.py", folder) == (folder / "notes.py").resolve()
    with pytest.raises(run.RunnerError, match="no notebook '99'"):
        run.resolve_notebook("99", folder)
    write_nb(folder, "10_c")
    with pytest.raises(run.RunnerError, match="ambiguous"):
        run.resolve_notebook("10", folder)


def test_parse_parameters_accepts_only_literals():
    got = run.parse_parameters('profile = "paper"\nseed: int = 3\neps = [0.05, 0.1]\nn = None\nneg = -1e-3')
    assert got == {"profile": "paper", "seed": 3, "eps": [0.05, 0.1], "n": None, "neg": -1e-3}
    for bad, what in [
        ("import numpy", "only `name = <literal>`"),
        ("x = f(1)", "not a literal"),
        ("a = b = 1", "only `name = <literal>`"),
        ("x += 1", "only `name = <literal>`"),
        ("x = [i for i in range(3)]", "not a literal"),
        ("x = ", "not valid Python"),
    ]:
        with pytest.raises(run.RunnerError, match=what.replace("`", ".").replace("<", ".").replace(">", ".")):
            run.parse_parameters(bad)


def test_notebook_must_have_exactly_one_parameters_cell(tmp_path):
    two = TINY.replace("# %%\nprint(", '# %% tags=["parameters"]\nprint(')
    nb = run.read_notebook(write_nb(tmp_path, "01_two", two))
    with pytest.raises(run.RunnerError, match="exactly one cell tagged 'parameters', found 2"):
        run.notebook_parameters(nb, "01_two")
    none = TINY.replace('# %% tags=["parameters"]', "# %%")
    nb = run.read_notebook(write_nb(tmp_path, "01_none", none))
    with pytest.raises(run.RunnerError, match="found 0"):
        run.notebook_parameters(nb, "01_none")


def test_run_name_is_filesystem_safe_and_keeps_grid_order():
    assert run.run_name({"dataset": "math500", "eps": 0.05}) == "dataset=math500__eps=0.05"
    assert run.run_name({"eps": 0.05, "dataset": "math500"}) == "eps=0.05__dataset=math500"
    name = run.run_name({"path": "a/b c:d", "flag": True, "k": [1, 2], "none": None})
    assert name == "path=a_b_c_d__flag=True__k=1-2__none=None"
    assert "/" not in name and " " not in name
    long = run.run_name({"x": "y" * 500})
    assert len(long) <= 150 and long != run.run_name({"x": "y" * 499})


def test_grid_expansion(tmp_path, tiny):
    grid_file = tmp_path / "grid.yaml"
    grid_file.write_text(
        f"notebook: {tiny}\nprofile: fast\nparameters: {{sleep: 0.0}}\ngrid:\n  x: [1, 2, 3]\n  fail: [false, true]\n"
    )
    grid = run.load_grid(grid_file, build_dir=tmp_path / "build")
    runs = grid.runs()
    assert len(runs) == 6
    assert runs[0] == {"x": 1, "fail": False} and runs[1] == {"x": 1, "fail": True}
    assert {run.run_name(r) for r in runs} == {f"x={x}__fail={f}" for x in (1, 2, 3) for f in (False, True)}
    assert grid.fixed == {"sleep": 0.0}
    assert grid.output_dir == tmp_path / "build" / "grid" / "01_tiny"


@pytest.mark.parametrize(
    "body, message",
    [
        ("grid:\n  x: [1]\n", "needs 'notebook' and 'grid'"),
        ("notebook: NB\ngrid:\n  x: 1\n", "must be a non-empty list"),
        ("notebook: NB\ngrid: {}\n", "non-empty mapping"),
        ("notebook: NB\nparameters: {x: 1}\ngrid:\n  x: [1]\n", "both fixed and in the grid"),
        ("notebook: NB\nprofile: slow\ngrid:\n  x: [1]\n", "unknown profile"),
        ("notebook: NB\ngrid:\n  x: [1]\njobs: 3\n", "unknown key"),
        ("notebook: 77_missing\ngrid:\n  x: [1]\n", "no notebook"),
    ],
)
def test_grid_file_errors(tmp_path, tiny, body, message):
    grid_file = tmp_path / "grid.yaml"
    grid_file.write_text(body.replace("NB", str(tiny)))
    with pytest.raises(run.RunnerError, match=message):
        run.load_grid(grid_file, build_dir=tmp_path / "build")


def test_example_grid_file_is_well_formed():
    import yaml

    spec = yaml.safe_load((REPO_ROOT / "notebooks" / "grids" / "example_known_groups.yaml").read_text())
    assert spec["notebook"] == "21_table_known_groups"
    assert list(spec["grid"]) == ["pairs", "scores", "eps"]
    assert all(isinstance(v, list) and v for v in spec["grid"].values())
    path = REPO_ROOT / "notebooks" / "21_table_known_groups.py"
    if path.exists():  # once notebook 21 lands, every grid/fixed key must be one of its parameters
        grid = run.load_grid(REPO_ROOT / "notebooks" / "grids" / "example_known_groups.yaml")
        run.check_parameters(run.read_notebook(path), {**grid.fixed, **grid.grid}, path.stem)


def test_kernel_python3_is_this_interpreter():
    from jupyter_client.kernelspec import KernelSpecManager

    run.ensure_kernel()
    spec = KernelSpecManager().get_kernel_spec(run.KERNEL_NAME)
    assert run._is_this_python(spec.argv[0]), spec.argv


def test_ensure_kernel_overrides_a_foreign_python3(tmp_path, monkeypatch):
    from jupyter_client.kernelspec import KernelSpecManager

    foreign = tmp_path / "foreign" / "kernels" / "python3"
    foreign.mkdir(parents=True)
    (foreign / "kernel.json").write_text(
        json.dumps(
            {
                "argv": ["/opt/other/bin/python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "other",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "foreign"))
    assert KernelSpecManager().get_kernel_spec("python3").argv[0] == "/opt/other/bin/python"
    root = run.ensure_kernel(tmp_path / "scratch")
    assert root == tmp_path / "scratch" / "jupyter"
    assert KernelSpecManager().get_kernel_spec("python3").argv[0] == sys.executable
    assert run.ensure_kernel(tmp_path / "scratch") is None  # now it is right: nothing to do


# ------------------------------------------------------------------ executions (one kernel each)
def fig_of(ipynb: Path) -> str:
    return stdout_of(ipynb).split("FIG=")[1].splitlines()[0]


def test_run_notebook_success_outside_repo_root(tmp_path, tiny, monkeypatch):
    monkeypatch.delenv("GPAC_FIGURES", raising=False)
    out = run.run_notebook(tiny, "fast", {"x": 42}, out_dir=tmp_path / "out", timeout=120, progress_bar=False)
    assert out == tmp_path / "out" / "01_tiny.ipynb" and out.exists()
    text = stdout_of(out)
    assert "X=42 PROFILE=fast" in text and "DONE" in text
    cwd = Path(text.split("CWD=")[1].splitlines()[0])
    assert cwd.resolve() != REPO_ROOT.resolve()
    assert cwd.resolve() == (tmp_path / "out" / "_scratch" / "01_tiny").resolve()
    exe = text.split("EXE=")[1].splitlines()[0]
    assert Path(exe).absolute() == Path(sys.executable).absolute()
    nb = nbformat.read(str(out), as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and "x = 42" in injected[0].source
    # a non-paper profile writes figures under the build folder, not over the committed ones
    assert fig_of(out) == str(tmp_path / "out" / "figures")
    assert "GPAC_FIGURES" not in __import__("os").environ  # restored after the run
    # the notebook left its scratch working folder empty: nothing stays behind
    assert not (tmp_path / "out" / "_scratch").exists()


def test_paper_profile_keeps_figures_and_explicit_setting_wins(tmp_path, tiny, monkeypatch):
    monkeypatch.delenv("GPAC_FIGURES", raising=False)
    out = run.run_notebook(tiny, "paper", out_dir=tmp_path / "p", timeout=120, progress_bar=False)
    assert fig_of(out) == "None"  # paper profile: gpac_utils.workflow.paths uses figures/
    monkeypatch.setenv("GPAC_FIGURES", str(tmp_path / "mine"))
    out = run.run_notebook(tiny, "fast", out_dir=tmp_path / "f", timeout=120, progress_bar=False)
    assert fig_of(out) == str(tmp_path / "mine")


def test_run_notebook_failure_keeps_notebook(tmp_path, tiny):
    with pytest.raises(run.NotebookFailed, match="RuntimeError: planned failure") as info:
        run.run_notebook(tiny, "fast", {"fail": True}, out_dir=tmp_path / "out", timeout=120, progress_bar=False)
    assert info.value.output == tmp_path / "out" / "01_tiny.ipynb"
    assert info.value.output.exists()
    assert errors_of(info.value.output) == ["RuntimeError"]
    assert "DONE" not in stdout_of(info.value.output)


def test_cell_timeout_fails_and_keeps_notebook(tmp_path, tiny):
    with pytest.raises(run.NotebookFailed) as info:
        run.run_notebook(tiny, "fast", {"sleep": 60.0}, out_dir=tmp_path / "out", timeout=3, progress_bar=False)
    assert info.value.output.exists()
    assert "DONE" not in stdout_of(info.value.output)


def test_unknown_parameter_is_a_clear_error_before_running(tmp_path, tiny):
    with pytest.raises(run.UnknownParameterError, match=r"unknown parameter\(s\) \['epsilon'\].*declares"):
        run.run_notebook(tiny, "fast", {"epsilon": 0.1}, out_dir=tmp_path / "out")
    assert not (tmp_path / "out" / "01_tiny.ipynb").exists()
    with pytest.raises(run.RunnerError, match="unknown profile"):
        run.run_notebook(tiny, "slow", out_dir=tmp_path / "out")


def test_cli_stops_at_first_failure(tmp_path, capsys):
    folder = tmp_path / "nbs"
    first = write_nb(folder, "01_ok")
    bad = write_nb(folder, "02_bad", TINY.replace("fail = False", "fail = True"))
    never = write_nb(folder, "03_never")
    build = tmp_path / "build"
    code = run.main(
        ["--profile", "fast", "--timeout", "120", "--build-dir", str(build), str(first), str(bad), str(never)]
    )
    assert code == run.EXIT_FAILED
    printed = capsys.readouterr().out
    assert "02_bad" in printed and "failed" in printed and "not run" in printed
    assert (build / "fast" / "01_ok.ipynb").exists()
    assert errors_of(build / "fast" / "02_bad.ipynb") == ["RuntimeError"]
    assert not (build / "fast" / "03_never.ipynb").exists()
    with (build / "fast" / "timings.csv").open() as fh:
        rows = {r["notebook"]: r for r in csv.DictReader(fh)}
    assert rows["01_ok"]["status"] == "ok" and rows["02_bad"]["status"] == "failed"
    assert "03_never" not in rows and float(rows["01_ok"]["seconds"]) > 0


def test_cli_usage_errors_exit_2(tmp_path, tiny, capsys):
    build = ["--build-dir", str(tmp_path / "build")]
    assert run.main(["--profile", "fast", *build, str(tiny), "-p", "nope=1"]) == run.EXIT_USAGE
    assert "unknown parameter(s) ['nope']" in capsys.readouterr().err
    assert run.main(["--profile", "fast", *build, "98_no_such_notebook"]) == run.EXIT_USAGE
    assert not (tmp_path / "build" / "fast" / "01_tiny.ipynb").exists()


def test_cli_grid_runs_product_reports_failures(tmp_path, tiny, capsys):
    grid_file = tmp_path / "grid.yaml"
    grid_file.write_text(f"notebook: {tiny}\nprofile: fast\ngrid:\n  x: [1, 'a b']\n  fail: [false, true]\n")
    code = run.main(
        ["--grid", str(grid_file), "--jobs", "2", "--timeout", "120", "--build-dir", str(tmp_path / "build")]
    )
    assert code == run.EXIT_FAILED
    out_dir = tmp_path / "build" / "grid" / "01_tiny"
    with (out_dir / "summary.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["run"] for r in rows] == ["x=1__fail=False", "x=1__fail=True", "x=a_b__fail=False", "x=a_b__fail=True"]
    assert [r["status"] for r in rows] == ["ok", "failed", "ok", "failed"]
    assert rows[2]["x"] == "a b" and rows[1]["fail"] == "True"
    assert "planned failure" in rows[3]["error"]
    for r in rows:
        assert Path(r["output"]).exists()
    assert "X='a b' PROFILE=fast" in stdout_of(out_dir / "x=a_b__fail=False.ipynb")
    assert fig_of(out_dir / "x=a_b__fail=False.ipynb") == str(out_dir / "figures" / "x=a_b__fail=False")
    captured = capsys.readouterr()
    assert "FAILED x=1__fail=True" in captured.out + captured.err


def test_grid_rejects_unknown_parameter_before_running(tmp_path, tiny):
    grid_file = tmp_path / "grid.yaml"
    grid_file.write_text(f"notebook: {tiny}\ngrid:\n  eps: [0.1]\n")
    assert run.main(["--grid", str(grid_file), "--build-dir", str(tmp_path / "build")]) == run.EXIT_USAGE
    assert not (tmp_path / "build" / "grid" / "01_tiny" / "summary.csv").exists()


def test_pipeline_parallel_stage(tmp_path):
    folder = tmp_path / "nbs"
    paths = [write_nb(folder, n) for n in ("01_producer", "11_a", "12_b")]
    results = run.run_pipeline(paths, "fast", timeout=120, jobs=2, build_dir=tmp_path / "build")
    assert [(r.notebook, r.status) for r in results] == [("01_producer", "ok"), ("11_a", "ok"), ("12_b", "ok")]
    assert all((tmp_path / "build" / "fast" / f"{p.stem}.ipynb").exists() for p in paths)


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
def test_sigterm_stops_kernels_and_workers(tmp_path, jobs):
    """An interrupted runner (SIGTERM, as from `timeout`) leaves no kernel or worker behind."""
    import signal
    import subprocess
    import time

    import psutil

    folder = tmp_path / "nbs"
    folder.mkdir()
    # Two notebooks numbered >= 10 so that jobs=2 runs them in worker processes.
    paths = [write_nb(folder, f"{n}_sleepy.py") for n in (21, 22)]
    script = (
        "import sys\n"
        "from gpac_utils.workflow import runner as run\n"
        f"paths = [run.Path(p) for p in {[str(p) for p in paths]!r}]\n"
        f"run.run_pipeline(paths, 'fast', jobs={jobs}, build_dir=run.Path({str(tmp_path / 'build')!r}),\n"
        "                  parameters={'sleep': 120.0})\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path)
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + 120
    kernels: list[psutil.Process] = []
    while time.monotonic() < deadline and len(kernels) < jobs:
        time.sleep(0.5)
        kernels = [c for c in parent.children(recursive=True) if "ipykernel" in " ".join(c.cmdline())]
    assert len(kernels) >= 1, "no kernel started within 120 s"
    time.sleep(3)  # let the kernels reach the sleeping cell
    family = parent.children(recursive=True)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    gone, alive = psutil.wait_procs(family, timeout=30)
    assert not alive, f"left running after SIGTERM: {[p.cmdline() for p in alive]}"


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
    assert '"defaultViewers": {"python": "Jupytext Notebook"}' in lab
