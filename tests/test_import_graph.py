"""The package's modules import each other one way: no cycle among module-level imports.

Imports inside functions (lazy imports of optional dependencies) and under ``TYPE_CHECKING`` are
not part of the graph: they run after every module involved has finished importing.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import sao_online

SUBPACKAGES = (
    "algorithms",
    "models",
    "runtime",
    "environments",
    "drift_schedules",
    "analysis",
    "configs",
)


def _module_files() -> dict[str, Path]:
    """Dotted module name -> source file, for every module of the installed package."""
    roots = {"sao_online": Path(sao_online.__file__).parent}
    for name in SUBPACKAGES:
        spec = importlib.util.find_spec(f"sao_online.{name}")
        if spec is not None and spec.origin:
            roots[f"sao_online.{name}"] = Path(spec.origin).parent
    files = {}
    for package, folder in roots.items():
        for path in folder.rglob("*.py"):
            relative = path.relative_to(folder).with_suffix("").parts
            if any(part.startswith((".", "_")) and part != "__init__" for part in relative):
                continue
            parts = [package, *relative]
            if parts[-1] == "__init__":
                parts.pop()
            files.setdefault(".".join(parts), path)
    return files


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_imports(path: Path, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports when it is imported (not inside functions)."""
    found: set[str] = set()
    pending = list(ast.parse(path.read_text()).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and not _is_type_checking(node):
            pending.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            pending.extend(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                pending.extend(handler.body)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name in modules}


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_finds_a_planted_cycle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_module_level_imports_skip_functions_and_type_checking(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import pkg.a\n"
        "from pkg import b\n"
        "if TYPE_CHECKING:\n    import pkg.c\n"
        "def f():\n    import pkg.d\n"
    )
    modules = {"pkg.a", "pkg.b", "pkg.c", "pkg.d"}
    assert _module_level_imports(source, modules) == {"pkg.a", "pkg.b"}


def test_no_import_cycle_between_package_modules():
    files = _module_files()
    assert "sao_online.runtime.scheduling.async_runtime" in files and "sao_online.analysis" in files
    modules = set(files)
    graph = {}
    for name, path in files.items():
        imported = _module_level_imports(path, modules)
        # Importing a package's submodule runs the package's __init__ first; an __init__ that
        # re-exports its own submodules is the normal layout, not a cycle.
        graph[name] = {target for target in imported if not name.startswith(target + ".")}
    cycle = _find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
