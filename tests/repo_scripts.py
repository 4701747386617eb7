"""The repository's scripts (``workflow/scripts/*.py``, ``benchmarks/*.py``, test fixtures) as modules, for tests.

They are scripts, not part of the package: :func:`load` imports one from its path, once per session, and
registers it in ``sys.modules`` under its file's stem (a dataclass in it looks its module up there).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from gpac_utils.workflow.paths import REPO_ROOT


def load(path: str | Path):
    """The script at ``path`` (relative to the repository root, or absolute) as a module, loaded once."""
    path = REPO_ROOT / path
    name = path.stem
    if name not in sys.modules or getattr(sys.modules[name], "__file__", None) != str(path):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]
