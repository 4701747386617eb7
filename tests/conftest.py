"""Suite-wide environment: headless matplotlib, and no model/dataset hub access.

Set at import, before any test module imports matplotlib or transformers; notebook kernels
started by the tests inherit these variables.
"""

import dataclasses
import os
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
def fast_run(tmp_path_factory, worker_id):
    """``fast_run(name, parameters=None, tag=None) -> Executed``: run once, share the result."""
    from gpac_utils.workflow import runner

    base = tmp_path_factory.getbasetemp()
    root = (base.parent if worker_id != "master" else base) / "fast-notebooks"
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
                    runner.run_notebook(
                        path, "fast", parameters, out_dir, timeout=600, figures_dir=figures, progress_bar=False
                    )
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
