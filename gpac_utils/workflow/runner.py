"""Execute one notebook: a thin layer over jupytext (the ``.py`` file, read in memory) and papermill.

Command line (parameters as with papermill's own ``-p`` and ``-f``)::

    python -m gpac_utils.workflow [--profile fast|paper] [-p NAME VALUE ...] [-f params.yaml]
                                  [--build-dir DIR] [--no-progress-bar] [NOTEBOOK ...]

``NOTEBOOK`` is a name (``13_validity_audit``), a number (``13``) or a path; none means every
``notebooks/NN_*.py``, one after the other. The executed notebook goes to
``build/<profile>/<name>.ipynb``, also on failure (with the error); papermill records its run
time in ``metadata.papermill.duration``. A failure exits 1, a usage error (unknown notebook or
parameter) exits 2.

Everything else is Snakemake's (``workflow/Snakefile``): the order of the notebooks, running two
at a time, rebuilding only what changed (``make reproduce``), and parameter grids (``make batch``).

Where figures and tables go: ``GPAC_FIGURES`` (read by :mod:`gpac_utils.workflow.paths`) if set
or given as ``figures_dir``; else ``figures/`` on the ``paper`` profile and ``build/<profile>/figures/``
on any other (the notebook's ``config.load`` records its profile), so a quick run never overwrites
the paper's outputs.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

# jsonschema (under nbformat) imports its optional IRI format checker, rfc3987_syntax, which builds a
# grammar at import: about 1.5 s of CPU at the start of every notebook run. nbformat's schemas check no
# IRI, so the runner goes without it (an import of it here fails; jsonschema skips that one checker).
sys.modules.setdefault("rfc3987_syntax", None)

import jupytext  # noqa: E402
import papermill  # noqa: E402
import yaml  # noqa: E402
from papermill.exceptions import PapermillExecutionError  # noqa: E402
from papermill.translators import PythonTranslator  # noqa: E402
from traitlets.config import Config  # noqa: E402

from ..checks import ParameterError, check_int, check_range  # noqa: E402
from ..settings import ALPHA, EPS, RNG_SEED  # noqa: E402
from . import reads  # noqa: E402
from .config import BATCH_ENV, PROFILE_ENV, PROFILES, ConfigError, read_config  # noqa: E402
from .paths import BUILD, FIGURES_ENV, NOTEBOOKS, folder_error  # noqa: E402

#: Per-cell timeout (seconds) by profile when none is given.
DEFAULT_TIMEOUT = {"fast": 600, "paper": 4 * 3600}
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: How the kernel talks to the runner: over Unix domain sockets, not over unencrypted TCP on localhost,
#: where ipykernel warns (rightly) that other local users could connect. Windows has no IPC transport
#: in ZeroMQ: TCP there.
KERNEL_TRANSPORT = "tcp" if os.name == "nt" else "ipc"


def kernel_config(folder: str | Path) -> Config:
    """The kernel manager's settings of one run: :data:`KERNEL_TRANSPORT`, and with IPC the sockets
    ``kernel-1`` ... ``kernel-5`` in ``folder`` (the run's own temporary working folder: a short absolute
    path, as a socket's path has a limit of about 100 bytes)."""
    if KERNEL_TRANSPORT == "tcp":
        return Config({"KernelManager": {"transport": "tcp"}})
    return Config({"KernelManager": {"transport": "ipc", "ip": str(Path(folder).resolve() / "kernel")}})


class RunnerError(ValueError):
    """A usage error: unknown notebook or profile, no single parameters cell, unknown parameter."""


class NotebookFailed(RuntimeError):
    """A notebook raised or timed out; ``output`` is the executed notebook holding the error."""

    def __init__(self, notebook: str, output: Path, reason: str):
        reason = " ".join(str(reason).split())  # one line
        super().__init__(f"notebook {notebook} failed: {reason} (the failed notebook is kept at {output})")
        self.notebook, self.output, self.reason = notebook, output, reason


def discover(folder: Path | None = None) -> list[Path]:
    """Every ``NN_*.py`` notebook in ``folder`` (default ``notebooks/``), in number order."""
    return sorted(p for p in Path(folder or NOTEBOOKS).glob("[0-9][0-9]_*.py") if p.is_file())


def resolve_notebook(spec: str | Path, folder: Path | None = None) -> Path:
    """A notebook from a path, a name (``13_validity_audit``) or a number (``13``)."""
    path = Path(spec)
    if path.suffix == ".py" and path.is_file():
        return path.resolve()
    stem = path.name.removesuffix(".py")
    known = discover(folder)
    found = [p for p in known if p.stem == stem or (re.fullmatch(r"\d{1,2}", stem) and int(p.name[:2]) == int(stem))]
    if len(found) != 1:
        what = "is ambiguous" if found else "matches no notebook"
        raise RunnerError(f"notebook {str(spec)!r} {what}; known notebooks: {', '.join(p.stem for p in known)}")
    return found[0]


def declared_parameters(nb, name: str = "notebook") -> dict[str, str]:
    """Name -> default (as written) of the notebook's single cell tagged ``parameters`` (papermill's parser)."""
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    if len(cells) != 1:
        raise RunnerError(f'{name}: expected one cell tagged "parameters", found {len(cells)}')
    return {p.name: p.default for p in PythonTranslator.inspect(cells[0])}


def check_parameters(nb, parameters: Mapping[str, Any], name: str = "notebook") -> None:
    """Raise :class:`RunnerError` if ``parameters`` names anything the notebook does not declare, or
    a value of the wrong type, before any kernel starts. A parameter's type is its default's in the
    parameters cell, else that of the setting of the same name in ``notebooks/config/<name>.yaml``,
    else :data:`KNOWN_TYPES`'s; ``None`` is always allowed. The keys and values of ``overrides`` are
    checked against the configuration file's settings."""
    declared = declared_parameters(nb, name)
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        raise RunnerError(f"{name}: unknown parameter(s) {unknown}; it declares {sorted(declared)}")
    try:
        raw = read_config(name)
        values = {k: [raw["common"][k], *[(p or {}).get(k) for p in raw["profiles"].values()]] for k in raw["common"]}
        settings = {k: {type(v) for v in vs if v is not None} for k, vs in values.items()}
    except ConfigError:
        settings = {}
    for key, value in parameters.items():
        default = ast.literal_eval(declared[key]) if declared[key] else None
        types = {type(default)} if default is not None else settings.get(key) or KNOWN_TYPES.get(key, set())
        _check_type(f"{name}: parameter {key}", value, types)
    for key, value in (parameters.get("overrides") or {}).items() if settings else ():
        if key not in settings:
            raise RunnerError(f"{name}: parameter overrides: unknown setting {key!r}; known: {sorted(settings)}")
        _check_type(f"{name}: parameter overrides[{key!r}]", value, settings[key])
    loss_bound = next((v[0] for k, v in (values if settings else {}).items() if k == "loss_bound" and v[0]), 1.0)
    _check_ranges(name, "parameter ", parameters, loss_bound)
    _check_ranges(name, "parameter overrides", parameters.get("overrides") or {}, loss_bound)


#: The ranges of the parameters the validation layer knows (:mod:`gpac_utils.checks`), checked before any
#: kernel starts: a value out of range is a usage error (exit 2), not a failed notebook.
RANGES = {
    "eps": lambda v, lb: EPS.check(v, {"loss_bound": lb}),
    "alpha": lambda v, lb: ALPHA.check(v),
    "label_prob": lambda v, lb: check_range("label_prob", v, closed_right=True),
    "n_trials": lambda v, lb: check_int("n_trials", v, 1),
    "seed": lambda v, lb: RNG_SEED.check(v),
}


def _check_ranges(name: str, where: str, values: Mapping[str, Any], loss_bound: float) -> None:
    lb = values.get("loss_bound") or loss_bound
    for key, value in values.items():
        if key in RANGES and value is not None and not isinstance(value, bool):
            try:
                RANGES[key](value, lb)
            except ParameterError as exc:
                what = f"{where}{key}" if where.endswith(" ") else f"{where}[{key!r}]"
                raise RunnerError(f"{name}: {what}: {str(exc).partition(': ')[2]}") from None


#: Types of the parameters whose default and configuration value are both None.
KNOWN_TYPES = {"eps": {float}, "alpha": {float}, "n_trials": {int}, "seed": {int}}
_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string", list: "a list"}
_NAMES[dict] = "a mapping"


def _check_type(what: str, value: Any, types: set[type]) -> None:
    if value is None or not types or type(value) in types | ({int} if float in types else set()):
        return
    hint = f" (write [{value}])" if list in types and isinstance(value, str) else ""
    raise RunnerError(f"{what}: expected {' or '.join(sorted(_NAMES[t] for t in types))}, got {value!r}{hint}")


def read_yaml(text: str | Path, what: str, mapping: bool = False) -> Any:
    """YAML from a file (a ``Path``) or a string; a :class:`RunnerError` naming ``what`` if it cannot
    be read, or (``mapping=True``) is not a mapping of names to values."""
    try:
        value = yaml.safe_load(text.read_text() if isinstance(text, Path) else text)
    except FileNotFoundError:
        raise RunnerError(f"{what}: no such file") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise RunnerError(f"{what}: cannot read it as YAML ({' '.join(str(exc).split())})") from None
    if mapping and not (isinstance(value, dict) and all(isinstance(k, str) for k in value)):
        raise RunnerError(f"{what}: expected a mapping of names to values, got {value!r:.60}")
    return value


def run_notebook(
    path: str | Path,
    profile: str = "fast",
    parameters: Mapping[str, Any] | None = None,
    out_dir: str | Path | None = None,
    timeout: float | None = None,
    *,
    figures_dir: str | Path | None = None,
    progress_bar: bool = True,
) -> Path:
    """Execute one notebook with papermill and return the executed notebook (``<out_dir>/<name>.ipynb``).

    ``profile`` and ``parameters`` are injected after the parameters cell (each must be declared
    there). ``out_dir`` defaults to ``build/<profile>``; ``timeout`` is per cell (default by
    profile). The kernel runs in an empty temporary folder, never the repository root, so a
    notebook relying on its working directory fails here. ``figures_dir`` sets ``GPAC_FIGURES``
    for the kernel (default: left alone, see the module docstring). Raises :class:`NotebookFailed`
    if a cell raises or times out.
    """
    path = Path(path)
    if profile not in PROFILES:
        raise RunnerError(f"profile: unknown {profile!r}; choose one of {list(PROFILES)}")
    nb = jupytext.read(path)
    injected = {"profile": profile, **(parameters or {})}
    check_parameters(nb, injected, path.stem)
    out_dir = Path(out_dir) if out_dir is not None else BUILD / profile
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"{path.stem}.ipynb"
    env = {FIGURES_ENV: str(Path(figures_dir).resolve())} if figures_dir is not None else {}
    env[PROFILE_ENV] = profile  # the kernel's config.load follows the run, not a GPAC_PROFILE left in a shell
    env[BATCH_ENV] = "1"  # no front-end: the notebooks skip their widgets (config.in_batch)
    env |= reads.kernel_env(path.stem)  # $GPAC_RECORD_READS set: record the repository files it reads
    try:
        with mock.patch.dict(os.environ, env), tempfile.TemporaryDirectory(prefix=f"{path.stem}-") as cwd:
            papermill.execute_notebook(
                nb,
                str(out),
                parameters=injected,
                kernel_name="python3",
                language="python",
                cwd=cwd,
                execution_timeout=timeout or DEFAULT_TIMEOUT[profile],
                start_timeout=180,
                progress_bar=progress_bar,
                config=kernel_config(cwd),
            )
    except PapermillExecutionError as exc:
        raise NotebookFailed(path.stem, out, f"cell {exc.cell_index}: {exc.ename}: {exc.evalue}") from exc
    except Exception as exc:  # a cell timeout or a dead kernel
        raise NotebookFailed(path.stem, out, f"{type(exc).__name__}: {exc}") from exc
    return out


def duration(executed: Path) -> float:
    """The run time papermill recorded in an executed notebook (seconds)."""
    return float(jupytext.read(executed).metadata["papermill"]["duration"] or 0.0)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpac_utils.workflow``: run notebooks one after the other; see the module docstring."""
    ap = argparse.ArgumentParser(prog="python -m gpac_utils.workflow", description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*", metavar="NOTEBOOK", help="name, number or path (default: all)")
    ap.add_argument("--profile", choices=PROFILES, default="paper")
    ap.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    ap.add_argument("-f", "--parameters-file", type=Path, help="YAML file of parameters (as papermill -f)")
    ap.add_argument("--build-dir", type=Path, default=BUILD, help="executed notebooks go to BUILD_DIR/<profile>/")
    ap.add_argument("--no-progress-bar", dest="progress", action="store_false", help="no per-cell progress bar")
    a = ap.parse_args(argv)
    if problem := folder_error("--build-dir", a.build_dir):  # a usage error (exit 2), before any notebook runs
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        params = (read_yaml(a.parameters_file, f"-f {a.parameters_file}", True) or {}) if a.parameters_file else {}
        params.update({name: read_yaml(value, f"-p {name} {value!r}") for name, value in a.parameter})
        notebooks = [resolve_notebook(s) for s in a.notebooks] or discover()
        for path in notebooks:  # every notebook's parameters are checked before the first one runs
            check_parameters(jupytext.read(path), {"profile": a.profile, **params}, path.stem)
        for path in notebooks:
            print(f"== {path.stem} ({a.profile})", flush=True)
            out = run_notebook(path, a.profile, params, a.build_dir / a.profile, progress_bar=a.progress)
            print(f"   {out}: {duration(out):.1f} s", flush=True)
    except (RunnerError, OSError, yaml.YAMLError, NotebookFailed) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED if isinstance(exc, NotebookFailed) else EXIT_USAGE
    return EXIT_OK
