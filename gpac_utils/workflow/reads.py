"""Record the repository files a notebook's kernel opens for reading (the check of workflow/notebooks.yaml's ``reads``).

Set ``GPAC_RECORD_READS`` to a folder and every notebook the runner (:func:`gpac_utils.workflow.runner.run_notebook`)
executes records, in ``<folder>/<notebook>.txt``, each repository file its kernel opened for reading (one
path from the repository root per line, appended, so several runs of a notebook add up). The kernel
runs :data:`STARTUP` first (ipykernel runs the file named by ``PYTHONSTARTUP``), which installs
:func:`install`'s audit hook (:func:`sys.addaudithook`, the interpreter's own ``open`` event: every
``open``, ``io.open_code`` and ``os.open``, whichever library calls it). The test suite sets it
(tests/conftest.py) and tests/test_notebook_reads.py compares the record with the declared reads, so
the declaration cannot drift from what the notebooks do. One reader bypasses Python's ``open``: pyarrow
opens parquet files in C++ (pandas hands it the path), so :func:`install` also has
``pyarrow.parquet.read_table`` (pandas' parquet reader calls it) raise the event :data:`EVENT` with
the path first.

Not recorded: files under ``.git``, ``.venv*``, ``build`` or ``.snakemake``, opens for writing, and
files outside the repository, except those in the folder that holds it (``../<anything>``, e.g. a
``../shared`` that a clone elsewhere does not have): those are recorded as ``../…``, so that the check
fails on them too; but not the temporary files beside a clone in the system's temporary folder
(``tempfile.gettempdir()``, e.g. a clone in ``/tmp``: the kernel's working folder, the test session's
outputs). Other files opened by compiled code that bypasses Python's ``open`` would not be
seen (pandas opens CSV and JSON files in Python, and so do yaml, numpy and Python's imports).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from .paths import REPO_ROOT

#: Environment variable: the folder that receives one ``<notebook>.txt`` per recorded notebook.
ENV = "GPAC_RECORD_READS"
#: Environment variable set for one kernel: the file it appends its reads to.
LOG_ENV = "GPAC_RECORD_READS_LOG"
#: The kernel's startup file (it calls :func:`install`).
STARTUP = Path(__file__).with_name("_record_reads.py")
#: Audit event raised with a path before pyarrow reads it (:func:`install`).
EVENT = "gpac_utils.read"
#: Folders of the repository whose reads are not the notebook's inputs.
IGNORED = (".git", ".venv", ".venv-vllm", "build", ".snakemake")
_WRITE_MODES = set("wax+")


def kernel_env(notebook: str) -> dict[str, str]:
    """Environment variables for the kernel of ``notebook``: empty unless ``$GPAC_RECORD_READS`` is set."""
    folder = os.environ.get(ENV)
    if not folder:
        return {}
    Path(folder).mkdir(parents=True, exist_ok=True)
    return {"PYTHONSTARTUP": str(STARTUP), LOG_ENV: str(Path(folder) / f"{notebook}.txt")}


def recorded(notebook: str, folder: str | Path | None = None) -> set[str]:
    """The repository files (paths from the root) recorded for ``notebook`` so far."""
    log = Path(folder or os.environ[ENV]) / f"{notebook}.txt"
    return set(log.read_text().split("\n")) - {""} if log.is_file() else set()


def install(log: str | Path | None = None, root: str | Path = REPO_ROOT) -> None:
    """Append every file under ``root`` (the repository) this process opens for reading, once, to ``log``
    (default ``$GPAC_RECORD_READS_LOG``; neither: nothing is installed)."""
    log = log or os.environ.get(LOG_ENV)
    if not log:
        return
    root = os.path.realpath(root)
    beside = os.path.dirname(root) + os.sep
    skip = tuple(os.path.join(root, name) + os.sep for name in IGNORED)
    # what is recorded lies beside the repository (``../…``), or in it for a clone in the temporary folder: the
    # temporary files beside that clone are none of its inputs
    inside = root + os.sep if beside == os.path.realpath(tempfile.gettempdir()) + os.sep else beside
    out = open(log, "a", buffering=1, encoding="utf-8")  # opened before the hook
    seen: set[str] = set()

    def hook(event: str, args: tuple) -> None:
        if event not in ("open", EVENT):
            return
        try:
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            if isinstance(path, int) or path is None:  # a file descriptor
                return
            if isinstance(mode, str) and _WRITE_MODES & set(mode):
                return
            if mode is None and isinstance(flags, int) and flags & os.O_ACCMODE != os.O_RDONLY:
                return
            real = os.path.realpath(os.fsdecode(path))
            if real in seen or not real.startswith(inside) or real.startswith(skip):
                return
            seen.add(real)
            out.write(os.path.relpath(real, root) + "\n")
        except Exception:  # never let the record break the notebook
            return

    sys.addaudithook(hook)
    # pyarrow opens parquet files in C++: its read_table (pandas' parquet reader calls it) raises EVENT with the path
    import pyarrow.parquet as pq

    read_table = pq.read_table

    def announced(source, *args, **kwargs):
        if isinstance(source, str | os.PathLike):
            sys.audit(EVENT, os.fspath(source), "rb", 0)
        return read_table(source, *args, **kwargs)

    pq.read_table = announced
