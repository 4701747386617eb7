"""Suite-wide environment: headless matplotlib, and no model/dataset hub access.

Set at import, before any test module imports matplotlib or transformers; notebook kernels
started by the tests inherit these variables.
"""

import dataclasses
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

os.environ["MPLBACKEND"] = "Agg"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

# Figures and tables written during the tests (notebooks on the fast profile) go to a scratch
# folder, never over the committed paper-profile outputs in figures/.
if "GPAC_FIGURES" not in os.environ:
    import tempfile

    os.environ["GPAC_FIGURES"] = tempfile.mkdtemp(prefix="gpac-figures-")

# Nothing the suite reads may lie in ../shared beside the repository (a clone elsewhere has none), except
# the paper's LaTeX for the numbering check (workflow/scripts/paper_numbering.py, which skips without it):
# an audit hook on this process refuses the open. Notebook kernels record their reads beside the
# repository instead (gpac_utils.workflow.reads; tests/test_notebook_reads.py fails on them).
_SHARED = os.path.join(os.path.dirname(os.path.realpath(Path(__file__).parents[1])), "shared") + os.sep


def _refuse_shared(event: str, args: tuple) -> None:
    if event == "open" and args and isinstance(args[0], str | bytes | os.PathLike):
        path = os.path.abspath(os.fsdecode(args[0]))
        if path.startswith(_SHARED) and not path.startswith(_SHARED + "paper" + os.sep):
            raise PermissionError(f"{path}: the tests read ../shared, which a clone elsewhere does not have")


sys.addaudithook(_refuse_shared)

# Two xdist workers share two cores: each notebook kernel (and its BLAS) gets one.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
        os.environ.setdefault(var, "1")


# --------------------------------------------------------------------------- another CPU's arithmetic
# What an x86-64 machine without AVX-512 computes, on this one: numpy's dispatch narrowed to its AVX2
# targets (every dispatch target above X86_V3 disabled; the names are numpy's own) and OpenBLAS's
# Haswell kernels. Byte-identity tests run once natively and once like this.


def narrowed_cpu_env() -> dict[str, str]:
    """Environment variables that make numpy and OpenBLAS compute as on an AVX2-only machine."""
    import numpy as np

    dispatch = np._core._multiarray_umath.__cpu_dispatch__
    above_v3 = [f for f in dispatch if f == "X86_V4" or f.startswith("AVX512")]
    return {"NPY_DISABLE_CPU_FEATURES": " ".join(above_v3), "OPENBLAS_CORETYPE": "Haswell"}


@pytest.fixture
def narrowed_env() -> dict[str, str]:
    """:func:`narrowed_cpu_env` (the test skips where it is not defined: not x86-64)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("narrowed CPU dispatch is defined for x86-64 only")
    return narrowed_cpu_env()


@pytest.fixture
def run_narrowed(narrowed_env):
    """``run_narrowed(argv)``: run a command under :func:`narrowed_cpu_env`; fails with its stderr."""

    def run(argv, **kwargs):
        env = {**os.environ, **narrowed_env}
        r = subprocess.run(argv, env=env, capture_output=True, text=True, **kwargs)
        assert r.returncode == 0, f"{argv} failed under {narrowed_env}:\n{r.stderr[-3000:]}"
        return r

    return run


# --------------------------------------------------------------------------- notebook executions
# Each notebook is executed on the fast profile once per test session, whichever tests need it,
# even across pytest-xdist workers (a file lock in the session's shared temporary folder).


@dataclasses.dataclass(frozen=True)
class Executed:
    """An executed notebook (``nb``) and the folder its figures and tables went to (``figures``)."""

    nb: Path
    figures: Path

    @property
    def tables(self) -> Path:
        return self.figures / "tables"


@pytest.fixture(scope="session")
def fast_run(shared_root):
    """``fast_run(name, parameters=None, tag=None) -> Executed``: run once, share the result."""
    from gpac_utils.workflow import runner

    root = shared_root / "fast-notebooks"
    root.mkdir(parents=True, exist_ok=True)

    def run(name: str, parameters: dict | None = None, tag: str | None = None) -> Executed:
        key = tag or name
        out_dir = root / key
        figures = out_dir / "figures"
        with FileLock(str(root / f"{key}.lock")):
            status = out_dir / "STATUS"
            if not status.exists():
                out_dir.mkdir(parents=True, exist_ok=True)
                path = runner.resolve_notebook(name)
                # Kernels use their inline backend, as in a real run (figures shown in the notebook).
                backend = os.environ.pop("MPLBACKEND", None)
                try:
                    runner.run_notebook(path, "fast", parameters, out_dir, 600, figures_dir=figures, progress_bar=False)
                    status.write_text("ok")
                except runner.NotebookFailed as exc:
                    status.write_text(f"failed: {exc.reason}")
                finally:
                    if backend is not None:
                        os.environ["MPLBACKEND"] = backend
            text = status.read_text()
        if text != "ok":
            pytest.fail(f"{key}: {text}")
        return Executed(out_dir / f"{runner.resolve_notebook(name).stem}.ipynb", figures)

    return run


#: Notebooks whose fast-profile execution is the suite's CPU walk (``walked``), not a ``fast_run`` of their own.
WALKED = ("01_generate", "02_scores")


@pytest.fixture(scope="session")
def fast_notebook(fast_run, request):
    """``fast_notebook(name) -> Path``: the notebook's one fast-profile execution of this session: the walk's
    for :data:`WALKED`, ``fast_run``'s for every other (each executed once, whichever test asks first)."""

    def get(name: str) -> Path:
        return request.getfixturevalue("walked").notebooks[name] if name in WALKED else fast_run(name).nb

    return get


@pytest.fixture(scope="session")
def shared_root(tmp_path_factory, worker_id) -> Path:
    """A folder shared by every xdist worker of this session."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if worker_id != "master" else base


@pytest.fixture(scope="session", autouse=True)
def record_notebook_reads(shared_root):
    """Every notebook kernel started in this session records the repository files it reads
    (gpac_utils.workflow.reads; checked by tests/test_notebook_reads.py), in one folder for all workers."""
    from gpac_utils.workflow import reads

    os.environ.setdefault(reads.ENV, str(shared_root / "notebook-reads"))


@pytest.fixture(scope="session")
def walked(shared_root):
    """The CPU walk (01 -> 02 -> 21 -> 25 on the fast profile, 24 of its 48 items), run once per session."""
    from gpac_utils.workflow import paths, walk

    out = shared_root / "walk"
    with FileLock(str(shared_root / "walk.lock")):
        status = shared_root / "walk.STATUS"
        if not status.exists():
            before = {p: p.stat().st_mtime_ns for p in paths.FIGURES.rglob("*") if p.is_file()}
            backend = os.environ.pop("MPLBACKEND", None)
            try:
                walk.run_walk(out, n_items=WALK_ITEMS)
                after = {p: p.stat().st_mtime_ns for p in paths.FIGURES.rglob("*") if p.is_file()}
                status.write_text("ok" if after == before else "failed: the walk touched the committed figures/")
            except Exception as exc:  # recorded for every worker, each then fails with it
                status.write_text(f"failed: {type(exc).__name__}: {exc}")
            finally:
                if backend is not None:
                    os.environ["MPLBACKEND"] = backend
        text = status.read_text()
    if text != "ok":
        pytest.fail(f"the walk: {text}")
    benchmark, pair = walk.walk_target()
    result = walk.WalkResult(out, benchmark, pair)
    result.notebooks.update({stem: out / f"{stem}.ipynb" for stem in walk.WALK_NOTEBOOKS})
    return result


#: Items of the shared walk (a seeded subset of the shipped 48).
WALK_ITEMS = 24
