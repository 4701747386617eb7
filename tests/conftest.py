"""Suite-wide environment: headless matplotlib, and no model/dataset hub access.

Set at import, before any test module imports matplotlib or transformers; notebook kernels
started by the tests inherit these variables.
"""

import contextlib
import dataclasses
import functools
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock, Timeout

os.environ["MPLBACKEND"] = "Agg"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
# jsonschema (under nbformat and jupytext) would import its optional IRI format checker, rfc3987_syntax, which
# builds a grammar at import: about 1 s of CPU in every worker. The notebooks' schemas check no IRI; the runner
# goes without it for the same reason (gpac_utils.workflow.runner).
sys.modules.setdefault("rfc3987_syntax", None)

# Figures and tables written during the tests (notebooks on the fast profile) go to a scratch
# folder, never over the committed paper-profile outputs in figures/.
# Made by the process that starts the session (xdist's workers inherit it), removed when that process ends.
if "GPAC_FIGURES" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["GPAC_FIGURES"] = tempfile.mkdtemp(prefix="gpac-figures-")
    atexit.register(shutil.rmtree, os.environ["GPAC_FIGURES"], ignore_errors=True)

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


@pytest.fixture(scope="session")
def narrowing_changes_nothing() -> bool:
    """Whether this CPU computes as :func:`narrowed_cpu_env` makes it anyway: no AVX-512, OpenBLAS on Haswell."""
    import numpy as np
    from threadpoolctl import threadpool_info

    features = np._core._multiarray_umath.__cpu_features__
    cores = {i.get("architecture") for i in threadpool_info() if i.get("internal_api") == "openblas"}
    no_avx512 = not any(on for name, on in features.items() if name == "X86_V4" or name.startswith("AVX512"))
    return no_avx512 and cores == {"Haswell"}


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
# even across pytest-xdist workers (a file lock per execution in the session's shared temporary folder).
# The executions the collected tests will ask for are known after collection (:func:`wanted_executions`): a
# worker that would wait for an execution another worker is running runs a wanted one that nobody has
# started meanwhile, so the notebooks spread over both workers instead of running one after another on
# whichever worker asked first (the book asks for all of them, one by one).


@dataclasses.dataclass(frozen=True)
class Executed:
    """An executed notebook (``nb``) and the folder its figures and tables went to (``figures``)."""

    nb: Path
    figures: Path

    @property
    def tables(self) -> Path:
        return self.figures / "tables"


class Executions:
    """Named executions of this session, each run once by whichever worker claims it first (its lock).

    ``jobs``: name -> work of the executions a waiting worker may run for the others, in the order it tries
    them (``work()`` returns ``"ok"`` or ``"failed: why"``, recorded as the execution's status for every worker).
    """

    def __init__(self, root: Path, jobs: dict[str, Callable[[], str]]):
        self.root = root
        self.jobs = jobs
        root.mkdir(parents=True, exist_ok=True)

    def status(self, name: str) -> Path:
        return self.root / f"{name}.STATUS"

    def ensure(self, name: str, work: Callable[[], str]) -> str:
        """Run ``work`` once for ``name`` (or wait for the worker running it, meanwhile running other jobs)."""
        lock = FileLock(str(self.root / f"{name}.lock"))
        while not self.status(name).exists():
            try:
                lock.acquire(blocking=False)
            except Timeout:  # another worker runs it: run another job meanwhile, else wait
                if not self._steal():
                    with lock:
                        pass
                continue
            try:
                self._run(name, work)
            finally:
                lock.release()
        return self.status(name).read_text()

    def _run(self, name: str, work: Callable[[], str]) -> None:
        if self.status(name).exists():
            return
        try:
            text = work()
        except Exception as exc:  # recorded for every worker, each then fails with it
            text = f"failed: {type(exc).__name__}: {exc}"
        tmp = self.root / f"{name}.STATUS.tmp"
        tmp.write_text(text)
        tmp.replace(self.status(name))  # whole, never half-written, for a worker reading it without the lock

    def _steal(self) -> bool:
        """Run one job nobody has started; False when there is none."""
        for name, work in self.jobs.items():
            if self.status(name).exists():
                continue
            lock = FileLock(str(self.root / f"{name}.lock"))
            try:
                lock.acquire(blocking=False)
            except Timeout:
                continue
            try:
                self._run(name, work)
            finally:
                lock.release()
            return True
        return False


#: Where :func:`pytest_collection_finish` leaves :func:`wanted_executions` for the ``executions`` fixture.
_WANTED = pytest.StashKey[list]()


@pytest.fixture(scope="session")
def executions(shared_root, pytestconfig) -> Executions:
    """The session's :class:`Executions` (one folder for all workers); its jobs: the executions the collected
    tests ask for (:func:`wanted_executions`), the walk first (the longest)."""
    root = shared_root / "fast-notebooks"
    wanted = pytestconfig.stash.get(_WANTED, [])
    jobs = {name: functools.partial(_run_fast, root, name, None, name) for name in wanted if name != WALK}
    if WALK in wanted:
        jobs = {WALK: functools.partial(_run_walk, root / WALK), **jobs}
    return Executions(root, jobs)


def wanted_executions(items) -> list[str]:
    """The fast-profile executions ``items`` will ask for: the notebook a test of ``fast_notebook`` or
    ``fast_run`` is parametrized with (a path or a name), every notebook for a test of ``fast_notebook``
    parametrized with none (it asks for them by name: the book), the walk for the walk's notebooks and
    the tests of ``walked``. Nothing is imported when no item asks (the vLLM tier's venv has no jupytext)."""
    if not any({"walked", "fast_notebook", "fast_run"} & set(getattr(item, "fixturenames", ())) for item in items):
        return []
    from gpac_utils.workflow import runner

    stems = [path.stem for path in runner.discover()]
    wanted: list[str] = []
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "walked" in fixtures:
            wanted.append(WALK)
        if "fast_notebook" not in fixtures and "fast_run" not in fixtures:
            continue
        params = getattr(getattr(item, "callspec", None), "params", {}).values()
        named = [Path(p).stem for p in params if isinstance(p, str | Path) and Path(p).stem in stems]
        wanted += named or (stems if "fast_notebook" in fixtures else [])
    return list(dict.fromkeys(WALK if name in WALKED else name for name in wanted))


def pytest_collection_finish(session):
    session.config.stash[_WANTED] = wanted_executions(session.items)  # the selected tests (-m, -k) only


def _run_fast(root: Path, name: str, parameters: dict | None, key: str) -> str:
    from gpac_utils.workflow import runner

    out_dir = root / key
    out_dir.mkdir(parents=True, exist_ok=True)
    # Kernels use their inline backend, as in a real run (figures shown in the notebook).
    with _inline_backend():
        try:
            path = runner.resolve_notebook(name)
            runner.run_notebook(
                path, "fast", parameters, out_dir, 600, figures_dir=out_dir / "figures", progress_bar=False
            )
        except runner.NotebookFailed as exc:
            return f"failed: {exc.reason}"
    return "ok"


def _run_walk(out: Path) -> str:
    from gpac_utils.workflow import paths, walk

    before = {p: p.stat().st_mtime_ns for p in paths.FIGURES.rglob("*") if p.is_file()}
    with _inline_backend():
        walk.run_walk(out, n_items=WALK_ITEMS, max_tokens=WALK_MAX_TOKENS)
    after = {p: p.stat().st_mtime_ns for p in paths.FIGURES.rglob("*") if p.is_file()}
    return "ok" if after == before else "failed: the walk touched the committed figures/"


@contextlib.contextmanager
def _inline_backend():
    """Without ``MPLBACKEND`` meanwhile: notebook kernels use their inline backend, as in a real run."""
    backend = os.environ.pop("MPLBACKEND", None)
    try:
        yield
    finally:
        if backend is not None:
            os.environ["MPLBACKEND"] = backend


@pytest.fixture(scope="session")
def fast_run(executions):
    """``fast_run(name, parameters=None, tag=None) -> Executed``: run once, share the result."""
    from gpac_utils.workflow import runner

    def run(name: str, parameters: dict | None = None, tag: str | None = None) -> Executed:
        key = tag or name
        text = executions.ensure(key, functools.partial(_run_fast, executions.root, name, parameters, key))
        if text != "ok":
            pytest.fail(f"{key}: {text}")
        out_dir = executions.root / key
        return Executed(out_dir / f"{runner.resolve_notebook(name).stem}.ipynb", out_dir / "figures")

    return run


#: Notebooks whose fast-profile execution is the suite's CPU walk (``walked``), not a ``fast_run`` of their own.
WALKED = ("01_generate", "02_scores")
#: The walk's name among the :class:`Executions`.
WALK = "walk"


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
def walked(executions):
    """The CPU walk (01 -> 02 -> 21 -> 25 on the fast profile, 20 of its 48: 21 needs 20), once per session."""
    from gpac_utils.workflow import walk

    text = executions.ensure(WALK, functools.partial(_run_walk, executions.root / WALK))
    if text != "ok":
        pytest.fail(f"the walk: {text}")
    benchmark, pair = walk.walk_target()
    out = executions.root / WALK
    result = walk.WalkResult(out, benchmark, pair)
    result.notebooks.update({stem: out / f"{stem}.ipynb" for stem in walk.WALK_NOTEBOOKS})
    return result


#: Items of the shared walk (a seeded subset of the shipped 48).
WALK_ITEMS = 20
#: The thinking role's tokens in the shared walk: half the fast profile's 64 (its generation is most of the walk's
#: CPU time; the tests check the pipeline, which is the same, not the answers).
WALK_MAX_TOKENS = 32
