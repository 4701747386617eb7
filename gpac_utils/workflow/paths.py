"""Paths resolved from the repository root, whatever the working directory is."""

from __future__ import annotations

import os
from pathlib import Path

#: The repository root (the folder holding ``pyproject.toml`` and ``gpac_utils/``).
REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT / "data"
SIMULATED = DATA / "simulated"
#: Where notebooks write figures and tables. ``GPAC_FIGURES`` redirects them (the test suite and
#: non-paper profiles do, so that the committed paper-profile outputs stay untouched).
FIGURES = Path(os.environ.get("GPAC_FIGURES", REPO_ROOT / "figures"))
TABLES = FIGURES / "tables"
NOTEBOOKS = REPO_ROOT / "notebooks"
BUILD = REPO_ROOT / "build"
#: ``../shared`` beside the repository (real per-item model outputs); may be absent.
SHARED = Path(os.environ.get("GPAC_SHARED", REPO_ROOT.parent / "shared"))
REALDATA = SHARED / "realdata"


def ensure(path: Path) -> Path:
    """Create ``path`` (a folder) if missing and return it."""
    path.mkdir(parents=True, exist_ok=True)
    return path
