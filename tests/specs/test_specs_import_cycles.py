"""The modules of ``torchx_core.specs`` import each other one way only (AST scan, no cycle).

Every import that runs counts: module level and inside functions. Imports under
``if TYPE_CHECKING:`` never run, so they are left out. The facades ``torchx_core.specs``
(``__init__``) and ``torchx_core.specs.api`` re-export the private modules and are imported by
none of them, so they are left out too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import torchx_core.specs

SPECS = Path(torchx_core.specs.__file__).parent  # the installed package (a wheel in the matrix)
PREFIX = "torchx_core.specs."
FACADES = {"__init__", "api"}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(node: ast.AST) -> set[str]:
    names: set[str] = set()
    if isinstance(node, ast.Import):
        names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
        names.add(node.module)
        names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def run_time_imports(source: str) -> set[str]:
    """Dotted names imported by ``source``, ``if TYPE_CHECKING:`` bodies excluded."""
    found: set[str] = set()
    stack: list[ast.AST] = [ast.parse(source)]
    while stack:
        node = stack.pop()
        found |= _imported(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
            else:
                stack.append(child)
    return found


def specs_graph() -> dict[str, set[str]]:
    """``{module: specs modules it imports}`` over the specs modules but the facades."""
    modules = {p.stem for p in SPECS.glob("*.py")} - FACADES
    graph: dict[str, set[str]] = {}
    for mod in sorted(modules):
        names = run_time_imports((SPECS / f"{mod}.py").read_text(encoding="utf-8"))
        graph[mod] = {
            n[len(PREFIX) :].split(".")[0]
            for n in names
            if n.startswith(PREFIX) and n[len(PREFIX) :].split(".")[0] in modules
        } - {mod}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` as ``[a, b, ..., a]``, or ``[]`` if there is none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(mod: str) -> list[str]:
        if mod in path:
            return [*path[path.index(mod) :], mod]
        if mod in done:
            return []
        path.append(mod)
        for dep in sorted(graph.get(mod, ())):
            cycle = visit(dep)
            if cycle:
                return cycle
        path.pop()
        done.add(mod)
        return []

    for mod in sorted(graph):
        cycle = visit(mod)
        if cycle:
            return cycle
    return []


def test_specs_modules_form_no_import_cycle() -> None:
    graph = specs_graph()
    assert {"_app", "_serde", "_status", "register", "_mounts"} <= set(graph)
    cycle = find_cycle(graph)
    assert not cycle, "specs modules import each other: " + " -> ".join(cycle)


def test_serde_is_at_the_bottom_and_app_is_pure_data() -> None:
    graph = specs_graph()
    assert graph["_serde"] <= {"errors"}, graph["_serde"]
    assert "register" not in graph["_app"], "resource() belongs beside the registry"
    assert "_app" in graph["register"]


def test_the_scan_sees_function_level_imports_and_skips_type_checking() -> None:
    source = (
        "TYPE_CHECKING = False\n"
        "if TYPE_CHECKING:\n"
        "    from torchx_core.specs._status import AppStatus\n"
        "def f():\n"
        "    from torchx_core.specs.register import get_named_resources\n"
    )
    names = run_time_imports(source)
    assert "torchx_core.specs.register" in names
    assert "torchx_core.specs._status" not in names
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []
