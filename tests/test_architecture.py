"""The layering: the core (top-level ``gpac_utils`` modules) imports nothing from the paper, LLM or
workflow sub-packages, and no public name is defined twice with different meanings."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections import defaultdict
from pathlib import Path

import pytest

import gpac_utils

PACKAGE = Path(gpac_utils.__file__).parent
LAYERS = ("paper", "llm", "workflow")
CORE = sorted(p for p in PACKAGE.glob("*.py"))


def _imported_modules(path: Path) -> list[str]:
    """Absolute names of every module imported by ``path`` (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    package = list(rel.parts[:-1])
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append(mod)
            out.extend(f"{mod}.{a.name}" for a in node.names)
    return out


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.name)
def test_core_imports_no_outer_layer(path):
    bad = [m for m in _imported_modules(path) if any(m.startswith(f"gpac_utils.{layer}") for layer in LAYERS)]
    assert not bad, f"core module {path.name} imports from an outer layer: {sorted(set(bad))}"


def test_boundary_check_catches_a_violation(tmp_path):
    # The checker itself: a relative import of the paper layer from a core module is found.
    fake = PACKAGE / "_boundary_probe.py"
    fake.write_text("from .paper import tables\nfrom . import data\n")
    try:
        found = _imported_modules(fake)
    finally:
        fake.unlink()
    assert "gpac_utils.paper" in found and "gpac_utils.data" in found


def _public_definitions() -> dict[str, list[str]]:
    defined = defaultdict(list)
    for info in pkgutil.walk_packages(gpac_utils.__path__, "gpac_utils."):
        if info.name.endswith("__main__"):
            continue
        mod = importlib.import_module(info.name)
        src = getattr(mod, "__file__", None)
        if not src or src.endswith("__init__.py"):
            continue
        tree = ast.parse(Path(src).read_text())
        for node in tree.body:
            names = []
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            for n in names:
                if not n.startswith("_") and n not in {"main", "logger"}:
                    defined[n].append(info.name)
    return defined


def test_no_public_name_defined_twice():
    twice = {n: mods for n, mods in _public_definitions().items() if len(mods) > 1}
    assert not twice, f"public names defined in more than one module: {twice}"
