"""The package's modules import each other one way: down its layers, with no cycle.

Every import counts, those inside functions too: a lazy import that closes a circle is still a
circle (it only runs later), and one that points up a layer still ties the lower layer to the
upper. Imports under ``TYPE_CHECKING`` never run and are not counted. Lazy imports of optional
third-party dependencies (ray, docker, wandb, ...) are not package modules, so they are not part
of the graph at all. A package-internal import that must break these rules is allowed only by
name in ``ALLOWED``, with the reason.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import NamedTuple

import sao_online

#: The package's layers, lowest first: a module may import its own layer and those below it,
#: never one above. A module belongs to the layer of the longest prefix that names it (a
#: module itself, or a package and everything in it). The root package (``sao_online``, its
#: version only) stands below them all. The learning package spans two: its math and types are
#: core, its learner and warm start stand on the models and the config.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("utilities", ("sao_online.util",)),
    (
        "core math and types",
        (
            "sao_online.learning",
            "sao_online.advantages",
            "sao_online.losses",
            "sao_online.drift_schedules",
        ),
    ),
    ("environments", ("sao_online.environments",)),
    ("config", ("sao_online.config", "sao_online.configs")),
    (
        "models, methods, rollout, learner, warm start, run folders, analysis",
        (
            "sao_online.models",
            "sao_online.algorithms",
            "sao_online.rollout",
            "sao_online.learning.learner",
            "sao_online.learning.warm_start",
            "sao_online.rundir",
            "sao_online.analysis",
        ),
    ),
    ("runtime", ("sao_online.runtime",)),
    ("jobs: the process pool, the scheduler", ("sao_online.jobs",)),
    (
        "commands and benchmark",
        ("sao_online.commands", "sao_online.benchmark", "sao_online.perf"),
    ),
    ("entry points", ("sao_online.api", "sao_online.cli")),
)

#: (importing module, imported module) -> why this import may break the rules. Empty: every
#: import follows them. An entry that no longer occurs fails the tests, so none outlives its use.
ALLOWED: dict[tuple[str, str], str] = {}

#: Packages mapped into ``sao_online`` from the repository's top level (pyproject's package-dir).
MAPPED = ("environments", "drift_schedules", "analysis", "configs")


class Import(NamedTuple):
    importer: str
    target: str
    name: str | None  # what ``from target import name`` takes (None: ``import target``)
    line: int


def _module_files() -> dict[str, Path]:
    """Dotted module name -> source file, for every module of the installed package."""
    roots = {"sao_online": Path(sao_online.__file__).parent}
    for name in MAPPED:
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


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(name: str, path: Path, modules: set[str]) -> list[Import]:
    """Every import of a package module in ``path``, at any depth (functions, classes, ``try``)
    but under ``if TYPE_CHECKING:``. ``from a import b`` imports ``a`` and, when ``a.b`` is a
    module, ``a.b`` too."""
    found = []
    pending: list[ast.AST] = [ast.parse(path.read_text())]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found += [Import(name, alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.append(Import(name, node.module, alias.name, node.lineno))
                if submodule in modules:
                    found.append(Import(name, submodule, None, node.lineno))
        pending.extend(ast.iter_child_nodes(node))
    # Importing a package's submodule runs the package's __init__ first; an __init__ that
    # re-exports its own submodules is the normal layout, not a cycle.
    return [
        item
        for item in found
        if item.target in modules and item.target != name and not name.startswith(item.target + ".")
    ]


def layer_of(module: str) -> int | None:
    """The index in ``LAYERS`` of ``module``'s layer (-1: the root package; None: no layer)."""
    if module == "sao_online":
        return -1
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[0]
            ):
                best = (len(prefix), index)
    return None if best is None else best[1]


def upward(imports: list[Import]) -> list[str]:
    """The imports that point to a higher layer than their importer's, one line each."""
    return [
        f"{item.importer}:{item.line} ({LAYERS[layer_of(item.importer)][0]}) imports "
        f"{item.target} ({LAYERS[layer_of(item.target)][0]})"
        for item in imports
        if layer_of(item.target) > layer_of(item.importer)
    ]


def package_of(module: str) -> str:
    """``sao_online.runtime.host.threads`` -> ``sao_online.runtime``; a top-level module is
    its own package."""
    return ".".join(module.split(".")[:2])


def private_across_packages(imports: list[Import]) -> list[str]:
    """``from a import _name`` where ``a`` is in another package than the importer."""
    return [
        f"{item.importer}:{item.line} imports {item.name} from {item.target}"
        for item in imports
        if item.name
        and item.name.startswith("_")
        and not item.name.startswith("__")
        and package_of(item.target) != package_of(item.importer)
    ]


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
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


def _package_imports() -> tuple[dict[str, Path], list[Import]]:
    """Every module's file, and every import between modules but those ``ALLOWED``."""
    files = _module_files()
    modules = set(files)
    imports = [item for name, path in files.items() for item in imports_of(name, path, modules)]
    occurring = {(item.importer, item.target) for item in imports}
    assert set(ALLOWED) <= occurring, "ALLOWED names imports that no longer occur"
    return files, [item for item in imports if (item.importer, item.target) not in ALLOWED]


def test_find_cycle_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_imports_inside_functions_count_and_type_checking_ones_do_not(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import pkg.a\n"
        "from pkg import b\n"
        "if TYPE_CHECKING:\n    import pkg.c\n"
        "def f():\n    import pkg.d\n"
        "class C:\n    def g(self):\n        try:\n            from pkg.e import _x\n"
        "        except ImportError:\n            pass\n"
    )
    modules = {"pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.d", "pkg.e", "pkg.m"}
    found = imports_of("pkg.m", source, modules)
    assert {item.target for item in found} == {"pkg.a", "pkg.b", "pkg.d", "pkg.e"}
    assert Import("pkg.m", "pkg.e", "_x", 11) in found


def test_a_module_takes_the_layer_of_its_longest_prefix_and_upward_imports_are_named():
    assert layer_of("sao_online.runtime.host.threads") == layer_of("sao_online.runtime")
    assert layer_of("sao_online.learning.losses.policy") == layer_of("sao_online.learning")
    assert layer_of("sao_online.learning.learner") > layer_of("sao_online.learning")
    assert layer_of("sao_online.cli") > layer_of("sao_online.jobs.pool")
    assert layer_of("sao_online.nowhere") is None
    planted = Import("sao_online.runtime.launch", "sao_online.jobs.pool", "run_one", 7)
    assert upward([planted]) == [
        "sao_online.runtime.launch:7 (runtime) imports sao_online.jobs.pool "
        "(jobs: the process pool, the scheduler)"
    ]
    assert upward([planted._replace(importer="sao_online.cli")]) == []


def test_a_private_name_from_another_package_is_named():
    planted = Import("sao_online.benchmark.execute", "sao_online.commands.compare", "_run_one", 3)
    assert private_across_packages([planted]) == [
        "sao_online.benchmark.execute:3 imports _run_one from sao_online.commands.compare"
    ]
    assert private_across_packages([planted._replace(importer="sao_online.commands.x")]) == []


def test_every_module_has_a_layer():
    files, _ = _package_imports()
    assert "sao_online.runtime.scheduling.async_runtime" in files and "sao_online.analysis" in files
    assert [name for name in sorted(files) if layer_of(name) is None] == []


def test_no_import_cycle_between_package_modules():
    files, imports = _package_imports()
    graph: dict[str, set[str]] = {name: set() for name in files}
    for item in imports:
        graph[item.importer].add(item.target)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_import_points_down_the_layers():
    _, imports = _package_imports()
    assert upward(imports) == []


def test_no_private_name_is_imported_from_another_package():
    _, imports = _package_imports()
    assert private_across_packages(imports) == []


#: At most this many modules directly in ``sao_online/`` (``__init__.py`` counted): the rest
#: lives in the packages of the layers above.
TOP_LEVEL_MODULES = 8


def test_the_top_level_holds_few_modules():
    top = sorted(path.name for path in Path(sao_online.__file__).parent.glob("*.py"))
    assert len(top) <= TOP_LEVEL_MODULES, top


def test_the_documented_public_paths_import_the_learning_core():
    """DESIGN.md's imports: the math keeps its public paths after moving into the learning core."""
    import sao_online.advantages as advantages
    import sao_online.learning.advantages as learning_advantages
    import sao_online.learning.losses as learning_losses
    import sao_online.losses as losses

    assert advantages.__all__ == learning_advantages.__all__
    assert losses.__all__ == learning_losses.__all__
    for public, home in ((advantages, learning_advantages), (losses, learning_losses)):
        assert all(getattr(public, name) is getattr(home, name) for name in home.__all__)
    from sao_online.advantages import group_advantages, skip_observation_gae  # noqa: F401
    from sao_online.losses import dis_policy_loss, ppo_clip_loss, value_loss  # noqa: F401
