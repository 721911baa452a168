"""The import graph of ``autorec`` has no cycle, lazy imports included.

Data flows one way (cli -> study -> strategy -> ArchSpec -> model -> trainer): a lower module never
imports a higher one, not even inside a function, where a circle would only hide until the call.
The graph is read from the source with ``ast`` (nothing is imported) and checked with networkx,
once between modules and once between rooms (``autorec.<first level>``). Imports under
``if TYPE_CHECKING:`` do not run and are left out.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "autorec"


def _module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, inside functions too, except under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]))
        else:
            yield from _imports(node)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        prefix = ".".join([*base, node.module] if node.module else base)
    else:
        prefix = node.module or ""
    return [prefix, *(f"{prefix}.{alias.name}" for alias in node.names)]


def import_graph(package: Path = PACKAGE) -> nx.DiGraph:
    """Modules of ``package`` as nodes, an edge ``a -> b`` where ``a`` imports ``b``."""
    files = {_module_name(path, package): path for path in package.rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(files)
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in _imports(tree):
            for target in _targets(node, module, path.name == "__init__.py"):
                while target and target not in files:  # `from pkg.mod import name` -> pkg.mod
                    target = target.rpartition(".")[0]
                if target.startswith(package.name) and target != module:
                    graph.add_edge(module, target)
    return graph


def room_graph(graph: nx.DiGraph) -> nx.DiGraph:
    """The module graph collapsed to rooms: ``autorec.<first level>``."""
    def room(module: str) -> str:
        return ".".join(module.split(".")[:2])

    rooms = nx.DiGraph()
    rooms.add_nodes_from(room(m) for m in graph)
    rooms.add_edges_from((room(a), room(b)) for a, b in graph.edges if room(a) != room(b))
    return rooms


def _describe(graph: nx.DiGraph) -> list[str]:
    """Per circle (strongly connected group), its members and one cycle through them."""
    lines = []
    for group in nx.strongly_connected_components(graph):
        if len(group) > 1:
            cycle = nx.find_cycle(graph.subgraph(group))
            lines.append(f"{len(group)} modules: {', '.join(sorted(group))}\n    e.g. "
                         + " -> ".join([a for a, _ in cycle] + [cycle[0][0]]))
    return lines


def test_the_graph_sees_lazy_imports_and_skips_type_checking(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def f():\n    from pkg import high\n")
    (package / "high.py").write_text(
        "from typing import TYPE_CHECKING\nfrom . import low\nif TYPE_CHECKING:\n    from pkg import other\n")
    (package / "other.py").write_text("import pkg.high\n")
    graph = import_graph(package)
    assert graph.has_edge("pkg.low", "pkg.high")  # inside a function
    assert graph.has_edge("pkg.high", "pkg.low")  # relative
    assert not graph.has_edge("pkg.high", "pkg.other")  # TYPE_CHECKING only
    assert not nx.is_directed_acyclic_graph(graph)


@pytest.mark.parametrize("level", ["module", "room"])
def test_no_import_cycle(level: str) -> None:
    graph = import_graph()
    if level == "room":
        graph = room_graph(graph)
    assert nx.is_directed_acyclic_graph(graph), f"{level} import cycles:\n" + "\n".join(_describe(graph))


def test_configuration_types_import_no_torch() -> None:
    """ArchSpec and the config models sit at the bottom: reading a study or arch.json needs no torch."""
    code = ("import sys, autorec.arch, autorec.config\n"
            "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('autorec'))")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=PACKAGE.parent)
