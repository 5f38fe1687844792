"""The import graph of reynd/ and reynctl/, read from the source (issue 23, docs/design.md).

Every import counts: at module level, inside functions, and under
`if TYPE_CHECKING:` (a type-only import is still a dependency a reader must
follow, and a circle through one is a circle in the design). Each is
resolved to the module it names: `from pkg import name` to `pkg.name` when
that is a module of ours, else to `pkg` itself.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("reynd", "reynctl")
DAEMON = "reynd.daemon"


def _modules() -> dict[str, Path]:
    """Every module of ours by dotted name (a package by its own name, from __init__.py)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _base(module: str, node: ast.ImportFrom) -> str:
    """The absolute name `from ... import` reads from, relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _ours(name: str) -> str | None:
    """`name`, or the nearest enclosing module of ours (`pkg.mod.attr` -> `pkg.mod`)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str) -> Iterator[str]:
    """The modules of ours that `module` imports, anywhere in its source."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, node)
            targets = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            resolved = _ours(target)
            if resolved is not None and resolved != module:
                yield resolved


GRAPH = {module: sorted(set(_imports(module))) for module in MODULES}


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """One named cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
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
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_in(graph, set(c)) for c in components]


def _cycle_in(graph: dict[str, list[str]], component: set[str]) -> list[str]:
    """A closed path through the first module of `component`, staying inside it (BFS)."""
    start = min(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in graph[v]:
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if w in component and w not in came_from:
                    came_from[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")  # a component always has one


def test_the_graph_is_read_from_every_module() -> None:
    """The resolver sees the imports it must (guards against a test that cannot fail)."""
    assert "reynd.daemon.app" in MODULES and "reynctl.client" in MODULES
    assert "reynd.protocol.methods" in GRAPH["reynd.daemon.rpc"]  # from-import of a name
    assert "reynd.daemon.systemd" in GRAPH["reynd.daemon.main"]  # from-import of a module
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": []}) == [["a", "b", "c", "a"]]


def test_no_import_cycle_between_modules() -> None:
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles (type-checking imports included), one per circle:\n" + (
        "\n".join(" -> ".join(cycle) for cycle in cycles)
    )


def test_nothing_below_the_daemon_imports_it() -> None:
    """The daemon composes the layers below it; none of them reaches back up (docs/design.md)."""
    outside = [
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if not (module == DAEMON or module.startswith(f"{DAEMON}."))
        for target in targets
        if target == DAEMON or target.startswith(f"{DAEMON}.")
    ]
    assert not outside, "imports of reynd.daemon from outside it:\n" + "\n".join(outside)
