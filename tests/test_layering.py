"""hapref's layers: no module imports a higher layer, and no hapref modules import each other in a circle.

Imports are read from the source (``ast``), wherever they sit in a module (top level or inside a function; not
the doctests, which are strings, nor ``if TYPE_CHECKING:`` blocks). Each top-level unit of the package
(``hapref.<unit>``) has a layer in :data:`LAYERS`; a module may import its own unit or a lower layer, never a
higher one and never another unit of its own layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "hapref"

#: The package's layers, lowest first: helpers, then the pieces the methods are built from, the networks,
#: the figures, the training pipelines, and what runs whole pipelines.
LAYERS: list[set[str]] = [
    {"hapref", "__version__", "utils", "validation", "stats", "files", "extras", "distributed"},
    {"search", "similarity", "data"},
    {"metrics", "losses"},
    {"radial_theory", "features"},
    {"models"},
    {"plotting"},
    {"train"},
    {"evaluation", "detection"},
]
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(test)


def _imports(tree: ast.AST):
    """Every Import / ImportFrom node outside ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if _type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def import_graph(root: Path) -> dict[str, set[str]]:
    """``{module: {imported modules of the package}}``; ``from a.b import c`` names ``a.b.c`` where that is a
    module, else ``a.b``."""
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name.split(".")[0] == root.name}
            elif node.level == 0 and node.module and node.module.split(".")[0] == root.name:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    edges.add(full if full in modules else node.module)
            elif node.level:
                raise AssertionError(f"{name}: relative import (level {node.level}); hapref imports absolutely")
        graph[name] = {e for e in edges if e != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_violations(graph: dict[str, set[str]], rank: dict[str, int]) -> list[str]:
    out = []
    for module, imported in sorted(graph.items()):
        a = unit(module)
        for target in sorted(imported):
            b = unit(target)
            if a == b:
                continue
            if a not in rank or b not in rank:
                out.append(f"{module} -> {target}: unit {(a if a not in rank else b)!r} has no layer in LAYERS")
            elif rank[b] > rank[a]:
                out.append(f"{module} (layer {rank[a]}) imports {target} (layer {rank[b]}, higher)")
            elif rank[b] == rank[a]:
                out.append(f"{module} imports {target}: two units of layer {rank[a]} import each other's side")
    return out


def test_no_module_imports_a_higher_layer() -> None:
    assert layer_violations(import_graph(PACKAGE), RANK) == []


def test_no_import_cycles_among_hapref_modules() -> None:
    assert cycles(import_graph(PACKAGE)) == []


def test_every_unit_has_a_layer() -> None:
    units = {unit(m) for m in import_graph(PACKAGE)}
    assert units <= set(RANK), sorted(units - set(RANK))


def test_the_checks_catch_a_cycle_and_an_upward_import(tmp_path) -> None:
    """A toy package: ``low.a`` imports ``high.b`` (upward, inside a function) and ``high.b`` imports
    ``low.a`` back (a cycle); a ``TYPE_CHECKING`` import and a doctest's import count for neither."""
    root = tmp_path / "toy"
    for folder in ("low", "high"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "low" / "a.py").write_text("def f():\n    from toy.high import b\n    return b\n")
    (root / "high" / "b.py").write_text("from toy.low.a import f\n")
    (root / "low" / "c.py").write_text('"""\n>>> from toy.high import b\n"""\nfrom typing import TYPE_CHECKING\n'
                                       "if TYPE_CHECKING:\n    from toy.high.b import f\n")
    graph = import_graph(root)
    assert graph["toy.low.a"] == {"toy.high.b"} and graph["toy.low.c"] == set()
    assert cycles(graph) == [["toy.high.b", "toy.low.a"]]
    violations = layer_violations(graph, {"low": 0, "high": 1, "toy": 0})
    assert violations == ["toy.low.a (layer 0) imports toy.high.b (layer 1, higher)"]
