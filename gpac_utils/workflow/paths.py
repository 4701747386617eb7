"""Paths resolved from the repository root, whatever the working directory is."""

from __future__ import annotations

import os
from pathlib import Path

#: The repository root (the folder holding ``pyproject.toml`` and ``gpac_utils/``).
REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT / "data"
SIMULATED = DATA / "simulated"
#: Real per-item outputs of real models, committed with a data card and their checksums (``SHA256SUMS``).
REALDATA = DATA / "real"
#: The committed outputs: paper-profile figures, and their tables under ``tables/``.
FIGURES = REPO_ROOT / "figures"
NOTEBOOKS = REPO_ROOT / "notebooks"
BUILD = REPO_ROOT / "build"
#: Environment variable that sends figures and tables elsewhere (the test suite, grid runs).
FIGURES_ENV = "GPAC_FIGURES"
_profile: str | None = None


def set_profile(profile: str | None) -> None:
    """Record the run profile of this process (``config.load`` does): it decides where outputs go."""
    global _profile
    _profile = profile


def figures_dir() -> Path:
    """Where figures are written, decided at write time.

    ``$GPAC_FIGURES`` if set (a relative path: from the repository root); else
    ``build/<profile>/figures`` for any profile but ``paper``
    (so a quick run, by whatever command, never overwrites the committed outputs); else
    ``figures/``.
    """
    if os.environ.get(FIGURES_ENV):
        return REPO_ROOT / os.environ[FIGURES_ENV]  # an absolute path stays as it is
    if _profile is not None and _profile != "paper":
        return BUILD / _profile / "figures"
    return FIGURES


def tables_dir() -> Path:
    """Where tables are written: ``tables/`` under :func:`figures_dir`."""
    return figures_dir() / "tables"


def from_root(path: str | Path) -> Path:
    """``path`` with ``~`` expanded, a relative one taken from the repository root (notebooks run in a scratch
    folder)."""
    path = Path(path).expanduser()
    return path if path.is_absolute() else REPO_ROOT / path


def as_shown(path: Path) -> Path:
    """``path`` as messages show it: relative to the repository root when it lies under it, else as it is."""
    return path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path


def ensure(path: Path) -> Path:
    """Create ``path`` (a folder) if missing and return it."""
    path.mkdir(parents=True, exist_ok=True)
    return path


def folder_error(option: str, path: Path) -> str | None:
    """The one-line usage error (exit 2) for an output folder that cannot be one: ``path`` or a parent
    of it is a file; ``None`` when it can be created. Checked before any work."""
    path = Path(path)
    blocked = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
    if blocked is None:
        return None
    what = "it is a file" if blocked == path else f"{blocked} is a file"
    return f"{option} {path}: must be a folder ({what}); give a folder"
