"""The layering: the core (top-level ``gpac_utils`` modules) imports nothing from the paper, LLM or
workflow sub-packages, and no public name is defined twice with different meanings."""

from __future__ import annotations

import ast
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


MODULES = {
    ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
    for p in sorted(PACKAGE.rglob("*.py"))
}


def _public_definitions() -> dict[str, list[str]]:
    defined = defaultdict(list)
    for name, path in MODULES.items():  # read, not imported (importing every module took 17 s)
        if path.name in ("__init__.py", "__main__.py"):
            continue
        tree = ast.parse(path.read_text())
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
                    defined[n].append(name)
    return defined


def test_no_public_name_defined_twice():
    twice = {n: mods for n, mods in _public_definitions().items() if len(mods) > 1}
    assert not twice, f"public names defined in more than one module: {twice}"


# --------------------------------------------------------------------------- import cycles


def _import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Package module -> the package modules it imports, from every import statement anywhere in it
    (module level, inside functions and classes, under ``if``). ``from a import b`` imports the
    module ``a.b`` when there is one, else (a name defined in) ``a``."""

    def known(mod: str) -> str:
        while mod and mod not in modules:
            mod = mod.rpartition(".")[0]
        return mod

    graph = {}
    for name, path in modules.items():
        package = list(path.relative_to(PACKAGE.parent).parts[:-1])
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(known(a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - (node.level - 1)] + ([base] if base else []))
                targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else known(base) for a in node.names)
        graph[name] = targets - {"", name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_between_package_modules():
    cycles = _cycles(_import_graph(MODULES))
    assert not cycles, f"import cycles between package modules (imports inside functions count): {cycles}"


def test_cycle_check_catches_a_cycle_through_a_function_level_import():
    # The checker itself: a cycle closed by an import inside a function is found.
    a, b = PACKAGE / "_cycle_probe_a.py", PACKAGE / "_cycle_probe_b.py"
    a.write_text("from . import _cycle_probe_b\n")
    b.write_text("def f():\n    from ._cycle_probe_a import x\n    return x\n")
    try:
        probes = {"gpac_utils._cycle_probe_a": a, "gpac_utils._cycle_probe_b": b}
        cycles = _cycles(_import_graph({**MODULES, **probes}))
    finally:
        a.unlink()
        b.unlink()
    assert ["gpac_utils._cycle_probe_a", "gpac_utils._cycle_probe_b"] in cycles
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def _function_level_relative_imports(path: Path) -> list[int]:
    """Line numbers of relative imports inside a function (or method) of ``path``."""
    found = []
    for func in ast.walk(ast.parse(path.read_text())):
        if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            found += [n.lineno for n in ast.walk(func) if isinstance(n, ast.ImportFrom) and n.level]
    return sorted(set(found))


@pytest.mark.parametrize("path", sorted(MODULES.values()), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_relative_import_inside_a_function(path):
    lines = _function_level_relative_imports(path)
    assert not lines, f"{path.relative_to(PACKAGE.parent)}: relative import inside a function at line(s) {lines}"


def test_function_level_check_catches_one(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from . import data\n\n\ndef f():\n    from .data import ID\n    import json\n\n    return ID, json\n"
    )
    assert _function_level_relative_imports(probe) == [5]


def test_the_architecture_page_lists_every_module():
    """docs/architecture.md's tree names every module of the package and its sub-packages, under its folder."""
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    tree = text.split("```\n", 2)[1]
    listed, folder = set(), None
    for line in tree.splitlines():
        if line.startswith("gpac_utils/"):
            folder = line.split()[0]
        elif folder and line.startswith("  ") and line.split()[0].endswith(".py"):
            listed.add(folder + line.split()[0])
    modules = {p.relative_to(PACKAGE.parent).as_posix() for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    assert sorted(modules - listed) == [], "modules missing from docs/architecture.md"
    assert sorted(listed - modules) == [], "docs/architecture.md lists modules that do not exist"
