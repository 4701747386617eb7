"""Execute the compendium's notebooks with papermill, one by one or over a parameter grid.

The jupytext ``.py`` files under ``notebooks/`` are the single source of truth. Each one is
converted in memory (:func:`jupytext.read`) and executed by papermill with kernel ``python3``
(this interpreter's own, see :func:`ensure_kernel`), a per-cell timeout, and a scratch working
directory under ``build/`` -- never the repository root, so a notebook that silently relies
on the working directory fails here rather than on a reader's machine.

Command line::

    python -m gpac_utils.workflow.runner [--profile fast|paper] [--timeout S] [--jobs N] [NOTEBOOK ...]
    python -m gpac_utils.workflow.runner --grid notebooks/grids/example_known_groups.yaml [--jobs N]

``NOTEBOOK`` is a name (``13_validity_audit``), a number (``13``) or a path; none means every
``notebooks/NN_*.py`` in number order. Executed notebooks go to ``build/<profile>/<name>.ipynb``
(also on failure: papermill writes the failed notebook, with the error, before raising),
timings to ``build/<profile>/timings.csv``. The run stops at the first failure and exits 1;
a usage error (unknown notebook, unknown parameter, bad grid file) exits 2.

Grid files (YAML)::

    notebook: 21_table_known_groups     # name, number or path
    profile: fast                       # optional, default fast
    parameters: {alpha: 0.05}           # optional, fixed for every run
    grid:                               # parameter -> list of values; Cartesian product
      dataset: [math500, zebralogic]
      eps: [0.05, 0.1]
    output_dir: build/grid/known_groups # optional (relative to the repository root)

Each run writes ``build/grid/<notebook>/<dataset=math500__eps=0.05>.ipynb`` and one row of
``summary.csv`` (run, parameters, status, seconds, output, error).

Where figures and tables go (``GPAC_FIGURES``, read by :mod:`gpac_utils.workflow.paths`, is set for the
kernel): the ``paper`` profile writes the committed outputs in ``figures/``; any other profile
writes ``build/<profile>/figures/`` so a quick run never overwrites the paper's figures; an
explicit ``GPAC_FIGURES`` in the environment wins over both. Grid runs always give each run its
own folder, ``build/grid/<notebook>/figures/<run name>/`` -- notebooks save figures under fixed
names, so runs sharing one folder would overwrite each other (with ``--jobs > 1`` in no defined
order).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import csv
import hashlib
import itertools
import json
import math
import multiprocessing
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, as_completed, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jupytext
import nbformat
import papermill
import yaml
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from papermill.exceptions import PapermillExecutionError
from tqdm.auto import tqdm

from .config import PROFILES
from .paths import BUILD, CPUS_ENV, FIGURES_ENV, NOTEBOOKS, REPO_ROOT

#: ``NN_topic.py``: the notebooks the runner discovers.
NOTEBOOK_PATTERN = re.compile(r"^(\d{2})_[A-Za-z0-9][A-Za-z0-9_\-]*\.py$")
KERNEL_NAME = "python3"
#: Per-cell execution timeout (seconds) by profile when ``--timeout`` is not given.
DEFAULT_TIMEOUT = {"fast": 600, "paper": 4 * 3600}
#: Seconds to wait for the kernel to start (two shared cores can be slow).
START_TIMEOUT = 180
#: Notebooks numbered below this produce data the others read: always run first, in order.
PRODUCER_LIMIT = 10
#: Notebooks below :data:`PRODUCER_LIMIT` that produce nothing another notebook reads (the quickstart):
#: with ``--jobs > 1`` they run beside the others instead of before them.
NOT_PRODUCERS = frozenset({0})
#: Thread-pool variables of BLAS / OpenMP set to the notebook's share of cores: two notebooks, each with a
#: multi-threaded BLAS, on two cores would otherwise oversubscribe the machine.
THREAD_ENVS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
#: Measured paper-profile timings used to start the longest notebooks first when none were measured here.
REFERENCE_TIMINGS = REPO_ROOT / "benchmarks" / "reproduce_timings.csv"

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class RunnerError(ValueError):
    """A usage error: unknown notebook, malformed parameters cell, unknown parameter, bad grid."""


class UnknownParameterError(RunnerError):
    """A parameter was passed that the notebook's parameters cell does not declare."""


class NotebookFailed(RuntimeError):
    """A notebook raised (or timed out) while executing; ``output`` is the failed notebook."""

    def __init__(self, notebook: str, output: Path, message: str):
        super().__init__(f"notebook {notebook} failed: {message}\n  failed notebook kept at {output}")
        self.notebook = notebook
        self.output = output
        self.reason = message


# --------------------------------------------------------------------------- discovery
def discover(folder: Path | None = None) -> list[Path]:
    """Every ``NN_*.py`` notebook in ``folder`` (default ``notebooks/``), sorted by number then name."""
    folder = Path(folder) if folder is not None else NOTEBOOKS
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_file() and NOTEBOOK_PATTERN.match(p.name)]
    return sorted(found, key=lambda p: (int(p.name[:2]), p.name))


def resolve_notebook(spec: str | Path, folder: Path | None = None) -> Path:
    """A notebook from a path, a name (``13_validity_audit`` or ``13_validity_audit.py``) or a number (``13``)."""
    folder = Path(folder) if folder is not None else NOTEBOOKS
    text = str(spec)
    path = Path(text)
    if path.suffix == ".py" and path.is_file():
        return path.resolve()
    known = discover(folder)
    stem = path.name[:-3] if path.name.endswith(".py") else path.name
    by_name = [p for p in known if p.stem == stem]
    if by_name:
        return by_name[0]
    if re.fullmatch(r"\d{1,2}", stem):
        by_number = [p for p in known if int(p.name[:2]) == int(stem)]
        if len(by_number) == 1:
            return by_number[0]
        if len(by_number) > 1:
            raise RunnerError(f"notebook number {stem!r} is ambiguous: {[p.stem for p in by_number]}")
    names = ", ".join(p.stem for p in known) or "(none)"
    raise RunnerError(
        f"no notebook {text!r} (not a .py file, and not a name or number in {folder}); known notebooks: {names}"
    )


# --------------------------------------------------------------------------- notebook reading
def read_notebook(path: Path):
    """Convert a jupytext ``.py`` file (or read an ``.ipynb``) into an nbformat notebook, in memory."""

    return jupytext.read(str(path))


def parameters_cells(nb) -> list[int]:
    """Indices of the cells tagged ``parameters``."""
    return [i for i, cell in enumerate(nb.cells) if "parameters" in cell.get("metadata", {}).get("tags", [])]


def parse_parameters(source: str, where: str = "parameters cell") -> dict[str, Any]:
    """Names and literal values of a parameters cell; raises unless every statement is ``name = <literal>``."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise RunnerError(f"{where}: not valid Python ({exc.msg}, line {exc.lineno})") from exc
    values: dict[str, Any] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            name, node = stmt.targets[0].id, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            name, node = stmt.target.id, stmt.value
        else:
            raise RunnerError(
                f"{where}, line {stmt.lineno}: only `name = <literal>` assignments are allowed, "
                f"got {ast.unparse(stmt)!r}"
            )
        try:
            values[name] = ast.literal_eval(node)
        except ValueError as exc:
            raise RunnerError(
                f"{where}, line {stmt.lineno}: the value of {name!r} is not a literal: {ast.unparse(node)!r}"
            ) from exc
    return values


def notebook_parameters(nb, name: str = "notebook") -> dict[str, Any]:
    """The declared parameters (name -> default) of a notebook with exactly one parameters cell."""
    cells = parameters_cells(nb)
    if len(cells) != 1:
        raise RunnerError(
            f"{name}: expected exactly one cell tagged 'parameters', found {len(cells)} "
            '(jupytext percent format: `# %% tags=["parameters"]`)'
        )
    return parse_parameters(nb.cells[cells[0]].source, f"{name}: parameters cell")


def check_parameters(nb, parameters: Mapping[str, Any], name: str = "notebook") -> dict[str, Any]:
    """Raise :class:`UnknownParameterError` if ``parameters`` names anything the notebook does not declare."""
    declared = notebook_parameters(nb, name)
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        raise UnknownParameterError(
            f"{name}: unknown parameter(s) {unknown}; its parameters cell declares {sorted(declared)}"
        )
    return declared


# --------------------------------------------------------------------------- kernel
def _is_this_python(argv0: str) -> bool:
    # jupyter_client replaces a bare python / python3 / python3.X by sys.executable at launch.
    bare = {"python", f"python{sys.version_info[0]}", f"python{sys.version_info[0]}.{sys.version_info[1]}"}
    if argv0 in bare:
        return True
    # Compare without resolving symlinks: a venv's python is a symlink to the base interpreter,
    # which would run without the venv's site-packages.
    return os.path.normpath(os.path.abspath(argv0)) == os.path.normpath(os.path.abspath(sys.executable))


def ensure_kernel(scratch: Path | None = None) -> Path | None:
    """Make kernel name ``python3`` start *this* interpreter (``sys.executable``).

    If the ``python3`` kernel spec that jupyter_client finds (JUPYTER_PATH, then user, then
    environment directories) launches another interpreter -- or there is none -- write a spec
    for ``sys.executable`` under ``<scratch>/jupyter/kernels/python3`` and put that folder first
    on ``JUPYTER_PATH`` for this process and its kernels. Returns that folder, or ``None`` when
    the found spec is already right (the usual case: ipykernel's spec says ``python``, which
    jupyter_client replaces by ``sys.executable``).
    """

    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
        if spec.argv and _is_this_python(spec.argv[0]):
            return None
    except NoSuchKernel:
        pass
    root = Path(scratch if scratch is not None else BUILD) / "jupyter"
    kdir = root / "kernels" / KERNEL_NAME
    kdir.mkdir(parents=True, exist_ok=True)
    spec_json = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (gpac runner)",
        "language": "python",
        "metadata": {"debugger": True},
    }
    tmp = kdir / f"kernel.json.{os.getpid()}"
    tmp.write_text(json.dumps(spec_json, indent=1))
    os.replace(tmp, kdir / "kernel.json")
    current = os.environ.get("JUPYTER_PATH", "")
    if str(root) not in current.split(os.pathsep):
        os.environ["JUPYTER_PATH"] = os.pathsep.join([str(root)] + ([current] if current else []))
    return root


# --------------------------------------------------------------------------- execution
def cpu_share(jobs: int) -> int:
    """Cores each of ``jobs`` concurrent notebooks may use (at least 1)."""
    return max(1, (os.cpu_count() or 1) // max(1, int(jobs)))


def thread_environment(cpus: int) -> dict[str, str]:
    """Environment for a kernel allowed ``cpus`` cores: ``GPAC_CPUS`` and the BLAS/OpenMP thread counts.

    Values already set by the user win.
    """
    env = {CPUS_ENV: str(cpus)}
    env.update({k: str(cpus) for k in THREAD_ENVS})
    return {k: v for k, v in env.items() if k not in os.environ}


class Interrupted(KeyboardInterrupt):
    """SIGTERM turned into an exception so that ``finally`` blocks shut kernels down."""


def _raise_interrupt(signum, frame):  # pragma: no cover - exercised through a subprocess test
    raise Interrupted(f"signal {signum}")


def handle_termination() -> None:
    """Turn SIGTERM into :class:`Interrupted` (SIGINT already raises KeyboardInterrupt) in this process."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)


@contextlib.contextmanager
def _environ(values: Mapping[str, str]):
    """Set environment variables (inherited by the kernel process) for the duration of a block."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_notebook(
    path: str | Path,
    profile: str = "fast",
    parameters: Mapping[str, Any] | None = None,
    out_dir: str | Path | None = None,
    timeout: float | None = None,
    *,
    out_name: str | None = None,
    cwd: str | Path | None = None,
    figures_dir: str | Path | None = None,
    progress_bar: bool = True,
    log_output: bool = False,
    cpus: int | None = None,
) -> Path:
    """Execute one notebook with papermill and return the executed notebook's path.

    ``profile`` and ``parameters`` are injected after the parameters cell (each must be declared
    there, else :class:`UnknownParameterError` before anything runs). ``out_dir`` defaults to
    ``build/<profile>``; the scratch working directory (emptied first) defaults to
    ``<out_dir>/_scratch/<name>``. ``timeout`` is per cell (default by profile, see
    :data:`DEFAULT_TIMEOUT`). ``figures_dir`` sets ``GPAC_FIGURES`` for the kernel; by default
    it is left alone on the ``paper`` profile or when already set, else ``<out_dir>/figures``.
    ``cpus`` (default: every core) sets the kernel's thread budget (:func:`thread_environment`).
    On failure raises :class:`NotebookFailed`; the failed notebook is kept at the returned location.
    An interrupt (SIGINT, or SIGTERM via :func:`handle_termination`) shuts the kernel down before
    it propagates.
    """

    path = Path(path)
    if profile not in PROFILES:
        raise RunnerError(f"unknown profile {profile!r}; choose one of {list(PROFILES)}")
    name = path.stem
    nb = read_notebook(path)
    injected = {"profile": profile, **dict(parameters or {})}
    check_parameters(nb, injected, name)
    out_dir = Path(out_dir) if out_dir is not None else BUILD / profile
    out_dir.mkdir(parents=True, exist_ok=True)
    out_path = out_dir / f"{out_name or name}.ipynb"
    work = Path(cwd) if cwd is not None else out_dir / "_scratch" / (out_name or name)
    if cwd is None:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    if work.resolve() == REPO_ROOT.resolve():
        raise RunnerError("the working directory of a notebook run must not be the repository root")
    ensure_kernel(out_dir)
    timeout = DEFAULT_TIMEOUT[profile] if timeout is None else timeout
    if figures_dir is None and profile != "paper" and FIGURES_ENV not in os.environ:
        figures_dir = out_dir / "figures"
    env = thread_environment(cpus or (os.cpu_count() or 1))
    if figures_dir is not None:
        env[FIGURES_ENV] = str(figures_dir)
    try:
        with _environ(env):
            papermill.execute_notebook(
                nb,
                str(out_path),
                parameters=injected,
                kernel_name=KERNEL_NAME,
                language="python",
                execution_timeout=timeout,
                start_timeout=START_TIMEOUT,
                progress_bar=progress_bar,
                log_output=log_output,
                cwd=str(work),
            )
    except PapermillExecutionError as exc:
        raise NotebookFailed(name, out_path, f"cell {exc.cell_index}: {exc.ename}: {exc.evalue}") from exc
    except Exception as exc:  # timeouts, dead kernels: papermill may not have marked the notebook
        if not out_path.exists():
            nbformat.write(nb, str(out_path))
        raise NotebookFailed(name, out_path, f"{type(exc).__name__}: {exc}") from exc
    finally:
        if cwd is None:
            _remove_if_empty(work)
    return out_path


def _remove_if_empty(work: Path) -> None:
    """Remove a scratch folder the notebook left empty, and ``_scratch/`` itself once empty."""
    for folder in (work, work.parent):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only succeeds when empty


@dataclass
class Result:
    notebook: str
    status: str  # ok | failed | not run
    seconds: float = float("nan")
    output: Path | None = None
    error: str = ""
    parameters: dict = field(default_factory=dict)


def _timed_run(
    path: Path,
    profile: str,
    parameters: Mapping[str, Any] | None,
    out_dir: Path,
    timeout: float | None,
    out_name: str | None = None,
    progress_bar: bool = True,
    figures_dir: Path | None = None,
    cpus: int | None = None,
) -> Result:
    start = time.perf_counter()
    name = out_name or path.stem
    try:
        out = run_notebook(
            path,
            profile,
            parameters,
            out_dir,
            timeout,
            out_name=out_name,
            progress_bar=progress_bar,
            figures_dir=figures_dir,
            cpus=cpus,
        )
        return Result(name, "ok", time.perf_counter() - start, out, parameters=dict(parameters or {}))
    except NotebookFailed as exc:
        return Result(
            name, "failed", time.perf_counter() - start, exc.output, exc.reason, parameters=dict(parameters or {})
        )
    except RunnerError as exc:
        return Result(name, "error", time.perf_counter() - start, None, str(exc), parameters=dict(parameters or {}))


#: Worker processes are spawned, not forked: the parent may hold zmq/kernel threads.
_SPAWN = multiprocessing.get_context("spawn")


def _init_worker() -> None:
    # Workers ignore SIGINT (the parent decides) and turn SIGTERM into an exception, so that an
    # interrupted run still shuts its kernel down (nbclient cleans up in a ``finally``).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _raise_interrupt)


def _worker(args) -> Result:
    # Top-level for pickling; each process gets its own working directory via papermill's chdir.
    return _timed_run(*args)


def _stop_pool(pool: ProcessPoolExecutor, grace: float = 20.0) -> None:
    """Terminate the workers (SIGTERM: each shuts its kernel down), then kill what is left."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + grace
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            proc.kill()
    pool.shutdown(wait=False, cancel_futures=True)


def expected_seconds(notebooks: Sequence[Path], timings_csv: Path) -> dict[str, float]:
    """Last measured seconds per notebook (this machine's ``timings.csv``, else the committed reference)."""
    out: dict[str, float] = {}
    for path in (REFERENCE_TIMINGS, timings_csv):
        if path.exists():
            with path.open(newline="") as fh:
                for row in csv.DictReader(fh):
                    with contextlib.suppress(KeyError, ValueError):
                        out[row["notebook"]] = float(row["seconds"])
    return {p.stem: out.get(p.stem, 0.0) for p in notebooks}


def is_producer(path: Path) -> bool:
    """Whether a notebook writes data that others read (runs before the parallel phase)."""
    number = int(path.name[:2])
    return number < PRODUCER_LIMIT and number not in NOT_PRODUCERS


def write_timings(results: Sequence[Result], csv_path: Path, profile: str) -> Path:
    """Update ``timings.csv``: rows of this run replace earlier rows of the same notebooks."""
    rows: dict[str, dict] = {}
    if csv_path.exists():
        with csv_path.open(newline="") as fh:
            rows = {r["notebook"]: r for r in csv.DictReader(fh)}
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for r in results:
        if r.status == "not run":
            continue
        rows[r.notebook] = {
            "notebook": r.notebook,
            "profile": profile,
            "seconds": f"{r.seconds:.1f}",
            "status": r.status,
            "finished_utc": stamp,
        }
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, ["notebook", "profile", "seconds", "status", "finished_utc"], lineterminator="\n")
        writer.writeheader()
        for key in sorted(rows):
            writer.writerow(rows[key])
    return csv_path


def format_summary(results: Sequence[Result], first: str = "notebook") -> str:
    """A plain-text table: name, seconds, status (and the error of failed runs)."""
    width = max([len(first)] + [len(r.notebook) for r in results])
    lines = [f"{first:<{width}}  {'seconds':>8}  status", f"{'-' * width}  {'-' * 8}  {'-' * 6}"]
    for r in results:
        secs = "" if math.isnan(r.seconds) else f"{r.seconds:8.1f}"
        lines.append(f"{r.notebook:<{width}}  {secs:>8}  {r.status}")
    for r in results:
        if r.error:
            lines.append(f"{r.notebook}: {r.error}")
    return "\n".join(lines)


def run_pipeline(
    notebooks: Sequence[Path],
    profile: str = "fast",
    timeout: float | None = None,
    jobs: int = 1,
    build_dir: Path | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> list[Result]:
    """Run notebooks in order, stopping at the first failure; returns one :class:`Result` each.

    With ``jobs > 1`` the data producers (:func:`is_producer`) still run one by one, first; the
    other notebooks then run ``jobs`` at a time, longest first (by the last measured timings),
    each with its share of the cores (no new one starts after a failure).
    SIGINT / SIGTERM stop the workers and their kernels, then re-raise.
    """
    out_dir = Path(build_dir if build_dir is not None else BUILD) / profile
    # Fail fast on usage errors before anything runs.
    for path in notebooks:
        check_parameters(read_notebook(path), {"profile": profile, **dict(parameters or {})}, path.stem)
    ensure_kernel(out_dir)
    results = {p: Result(p.stem, "not run") for p in notebooks}
    serial = list(notebooks) if jobs <= 1 else [p for p in notebooks if is_producer(p)]
    parallel = [p for p in notebooks if p not in serial]
    if parallel:
        expected = expected_seconds(parallel, out_dir / "timings.csv")
        parallel.sort(key=lambda p: -expected[p.stem])  # longest first: the shortest makespan
    share = cpu_share(jobs)
    handle_termination()
    failed = False
    for path in serial:
        print(f"== {path.stem} ({profile})", flush=True)
        results[path] = _timed_run(path, profile, parameters, out_dir, timeout)
        if results[path].status != "ok":
            failed = True
            break
    if parallel and not failed:
        pending = list(parallel)
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=_SPAWN, initializer=_init_worker)
        try:
            running = {}
            while pending or running:
                while pending and len(running) < jobs and not failed:
                    path = pending.pop(0)
                    print(f"== {path.stem} ({profile}) started", flush=True)
                    task = (path, profile, parameters, out_dir, timeout, None, False, None, share)
                    running[pool.submit(_worker, task)] = path
                if not running:
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    path = running.pop(fut)
                    results[path] = fut.result()
                    print(f"== {path.stem}: {results[path].status} ({results[path].seconds:.1f} s)", flush=True)
                    failed |= results[path].status != "ok"
        except BaseException:
            _stop_pool(pool)
            raise
        pool.shutdown(wait=True)
    ordered = [results[p] for p in notebooks]
    write_timings(ordered, out_dir / "timings.csv", profile)
    return ordered


# --------------------------------------------------------------------------- grids
_UNSAFE = re.compile(r"[^A-Za-z0-9._+\-]+")


def _fmt_value(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "-".join(_fmt_value(v) for v in value)
    if isinstance(value, dict):
        return "-".join(f"{k}_{_fmt_value(v)}" for k, v in value.items())
    return str(value)


def run_name(params: Mapping[str, Any], max_len: int = 150) -> str:
    """A filesystem-safe name for a run: ``dataset=math500__eps=0.05`` (grid order kept)."""
    parts = []
    for key, value in params.items():
        text = _UNSAFE.sub("_", _fmt_value(value)).strip("_") or "_"
        parts.append(f"{_UNSAFE.sub('_', str(key))}={text}")
    name = "__".join(parts) or "default"
    if len(name) > max_len:
        digest = hashlib.sha1(json.dumps(dict(params), sort_keys=True, default=str).encode()).hexdigest()[:10]
        name = f"{name[: max_len - 12]}__{digest}"
    return name


@dataclass
class Grid:
    notebook: Path
    profile: str
    fixed: dict
    grid: dict
    output_dir: Path

    def runs(self) -> list[dict]:
        """The Cartesian product of the grid, in the file's key order (last key varies fastest)."""
        keys = list(self.grid)
        return [dict(zip(keys, combo)) for combo in itertools.product(*(self.grid[k] for k in keys))]


def load_grid(path: str | Path, build_dir: Path | None = None, folder: Path | None = None) -> Grid:
    """Read and check a grid YAML file (see the module docstring)."""

    path = Path(path)
    if not path.is_file():
        raise RunnerError(f"no grid file {path}")
    try:
        spec = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise RunnerError(f"grid file {path}: not valid YAML: {exc}") from exc
    if not isinstance(spec, dict):
        raise RunnerError(f"grid file {path}: expected a mapping at the top level")
    allowed = {"notebook", "profile", "parameters", "grid", "output_dir"}
    extra = sorted(set(spec) - allowed)
    if extra:
        raise RunnerError(f"grid file {path}: unknown key(s) {extra}; allowed: {sorted(allowed)}")
    if "notebook" not in spec or "grid" not in spec:
        raise RunnerError(f"grid file {path}: needs 'notebook' and 'grid'")
    nb_spec = str(spec["notebook"])
    candidate = path.parent / nb_spec
    notebook = resolve_notebook(candidate if candidate.suffix == ".py" and candidate.is_file() else nb_spec, folder)
    profile = spec.get("profile", "fast")
    if profile not in PROFILES:
        raise RunnerError(f"grid file {path}: unknown profile {profile!r}; choose one of {list(PROFILES)}")
    fixed = spec.get("parameters") or {}
    grid = spec["grid"]
    if not isinstance(fixed, dict):
        raise RunnerError(f"grid file {path}: 'parameters' must be a mapping")
    if not isinstance(grid, dict) or not grid:
        raise RunnerError(f"grid file {path}: 'grid' must be a non-empty mapping parameter -> list")
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise RunnerError(f"grid file {path}: grid[{key!r}] must be a non-empty list, got {values!r}")
    both = sorted(set(fixed) & set(grid))
    if both:
        raise RunnerError(f"grid file {path}: parameter(s) {both} are both fixed and in the grid")
    if "profile" in fixed or "profile" in grid:
        raise RunnerError(f"grid file {path}: set the profile with the top-level 'profile' key")
    base = Path(build_dir if build_dir is not None else BUILD)
    out = spec.get("output_dir")
    output_dir = (
        (REPO_ROOT / out)
        if out and not Path(out).is_absolute()
        else Path(out)
        if out
        else base / "grid" / notebook.stem
    )
    return Grid(notebook, profile, dict(fixed), dict(grid), output_dir)


def run_grid(grid: Grid, jobs: int | None = None, timeout: float | None = None) -> list[Result]:
    """Run every combination of ``grid`` in ``jobs`` processes; write ``summary.csv``; return the results."""

    jobs = jobs or min(2, os.cpu_count() or 1)
    nb = read_notebook(grid.notebook)
    combos = grid.runs()
    names = [run_name(c) for c in combos]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise RunnerError(f"grid runs get the same file name after making it filesystem-safe: {clash}")
    check_parameters(nb, {"profile": grid.profile, **grid.fixed, **grid.grid}, grid.notebook.stem)
    grid.output_dir.mkdir(parents=True, exist_ok=True)
    ensure_kernel(grid.output_dir)
    tasks = []
    share = cpu_share(jobs)
    for combo, name in zip(combos, names):
        params = {**grid.fixed, **combo}
        figures = grid.output_dir / "figures" / name
        tasks.append((grid.notebook, grid.profile, params, grid.output_dir, timeout, name, False, figures, share))
    results: dict[str, Result] = {}
    handle_termination()
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=_SPAWN, initializer=_init_worker)
    try:
        with tqdm(total=len(tasks), desc=f"grid {grid.notebook.stem}", unit="run") as bar:
            futures = {pool.submit(_worker, t): t[5] for t in tasks}
            for fut in as_completed(futures):
                res = fut.result()
                results[futures[fut]] = res
                bar.update(1)
                if res.status != "ok":
                    bar.write(f"FAILED {res.notebook}: {res.error}")
    except BaseException:
        _stop_pool(pool)
        raise
    pool.shutdown(wait=True)
    ordered = [results[n] for n in names]
    for res, combo in zip(ordered, combos):
        res.parameters = combo
    write_grid_summary(ordered, grid, grid.output_dir / "summary.csv")
    return ordered


def write_grid_summary(results: Sequence[Result], grid: Grid, csv_path: Path) -> Path:
    """One row per run: run, each grid parameter, status, seconds, output, error."""
    keys = list(grid.grid)
    with csv_path.open("w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["run", *keys, "status", "seconds", "output", "error"])
        for r in results:
            writer.writerow(
                [
                    r.notebook,
                    *[r.parameters.get(k) for k in keys],
                    r.status,
                    f"{r.seconds:.1f}",
                    r.output or "",
                    r.error,
                ]
            )
    return csv_path


# --------------------------------------------------------------------------- command line
def _parse_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m gpac_utils.workflow.runner",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "notebooks",
        nargs="*",
        metavar="NOTEBOOK",
        help="name (13_validity_audit), number (13) or path; default: all notebooks/NN_*.py",
    )
    p.add_argument("--profile", choices=PROFILES, default="paper", help="run profile (default: paper)")
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="per-cell timeout in seconds (default: " + ", ".join(f"{k} {v}" for k, v in DEFAULT_TIMEOUT.items()) + ")",
    )
    p.add_argument(
        "--jobs", type=int, default=None, help="parallel processes (notebooks: default 1; grid: default min(2, cpus))"
    )
    p.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra parameter for every notebook (Python literal or string); repeatable",
    )
    p.add_argument("--grid", type=Path, default=None, help="YAML grid file: run a notebook over a parameter grid")
    p.add_argument("--build-dir", type=Path, default=None, help="output root instead of build/")
    p.add_argument("--list", action="store_true", help="list the notebooks that would run and exit")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.grid is not None:
            if args.notebooks:
                raise RunnerError("give either --grid or notebook names, not both")
            grid = load_grid(args.grid, args.build_dir)
            if args.list:
                for combo in grid.runs():
                    print(run_name(combo))
                return EXIT_OK
            results = run_grid(grid, args.jobs, args.timeout)
            print()
            print(format_summary(results, first="run"))
            print(f"\nsummary: {grid.output_dir / 'summary.csv'}")
            return EXIT_OK if all(r.status == "ok" for r in results) else EXIT_FAILED
        notebooks = [resolve_notebook(s) for s in args.notebooks] if args.notebooks else discover()
        if not notebooks:
            raise RunnerError(f"no notebooks found in {NOTEBOOKS}")
        if args.list:
            print("\n".join(p.stem for p in notebooks))
            return EXIT_OK
        params = {}
        for item in args.param:
            if "=" not in item:
                raise RunnerError(f"--param expects NAME=VALUE, got {item!r}")
            key, value = item.split("=", 1)
            params[key.strip()] = _parse_value(value)
        results = run_pipeline(notebooks, args.profile, args.timeout, args.jobs or 1, args.build_dir, params)
    except RunnerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        print(f"interrupted ({exc or 'SIGINT'}): kernels and workers stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    out_dir = Path(args.build_dir if args.build_dir is not None else BUILD) / args.profile
    print()
    print(format_summary(results))
    print(f"\nexecuted notebooks and timings.csv in {out_dir}")
    return EXIT_OK if all(r.status == "ok" for r in results) else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
