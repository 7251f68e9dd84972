"""campaign's imports as a graph: between modules (wherever an import is written) and between packages, the
circles in it, and the package graph as docs/design.md draws it.

    python -m tests.helpers.import_graph            # print the package graph's drawing
    python -m tests.helpers.import_graph --write    # redraw it in docs/design.md
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DESIGN = REPO / "docs" / "design.md"
BEGIN, END = "<!-- package-graph -->\n", "<!-- /package-graph -->"


def campaign_imports_at_any_depth() -> dict[str, dict[str, list[str]]]:
    """Every import between campaign's modules, wherever it is written: at module level, inside a function (it
    runs later, but still ties the two modules together) or under `if TYPE_CHECKING:`. module -> target ->
    the places ("file:line") that import it. Relative imports are resolved; `from package import name` points at
    the submodule when `name` is one, and at the package (whose __init__ runs first) in every case."""
    files = {}
    for path in (REPO / "campaign").rglob("*.py"):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        files[name.removesuffix(".__init__")] = path
    graph: dict[str, dict[str, list[str]]] = {name: {} for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                module = node.module
                if node.level:
                    parts = package.split(".")
                    module = ".".join([*parts[: len(parts) - node.level + 1], node.module])
                # `from package import submodule` runs the package's __init__ first: an edge to both
                targets = [
                    *(f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in files),
                    module,
                ]
            else:
                continue
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    place = f"{path.relative_to(REPO).as_posix()}:{node.lineno}"
                    graph[name].setdefault(target, []).append(place)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def package_of(module: str) -> str:
    """A module's package inside campaign (`campaign.sim.kernel` -> `campaign.sim`; `campaign.errors` stays)."""
    return ".".join(module.split(".")[:2])


def package_graph() -> dict[str, set[str]]:
    """campaign's packages and top-level modules (without the `campaign.` prefix) -> those they import, at any
    depth; the package `campaign` itself (its __init__) left out."""
    graph: dict[str, set[str]] = {}
    for module, targets in campaign_imports_at_any_depth().items():
        a = package_of(module)
        if a == "campaign":
            continue
        graph.setdefault(a.removeprefix("campaign."), set())
        for target in targets:
            b = package_of(target)
            if b not in (a, "campaign"):
                graph[a.removeprefix("campaign.")].add(b.removeprefix("campaign."))
    return graph


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each package's floor: 0 for one that imports none of the others, else one above the highest it imports."""

    @functools.cache
    def floor(name: str) -> int:
        return 1 + max((floor(b) for b in graph[name]), default=-1)

    return {name: floor(name) for name in graph}


def render_package_graph(graph: dict[str, set[str]]) -> str:
    """The drawing docs/design.md holds: a Mermaid graph (every arrow points at what is imported), then the same
    arrows floor by floor as a table."""
    level = floors(graph)
    order = sorted(graph, key=lambda name: (-level[name], name))
    lines = ["```mermaid", "flowchart TD"]
    for name in order:
        for target in sorted(graph[name], key=lambda t: (-level[t], t)):
            lines.append(f"  {name} --> {target}")
    lines += ["```", "", "| floor | package or module | imports |", "| --- | --- | --- |"]
    for name in order:
        imports = (
            ", ".join(f"`{t}`" for t in sorted(graph[name], key=lambda t: (-level[t], t)))
            or "nothing of campaign"
        )
        lines.append(f"| {level[name]} | `{name}` | {imports} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    drawing = render_package_graph(package_graph())
    if "--write" not in argv:
        sys.stdout.write(drawing)
        return 0
    text = DESIGN.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DESIGN.write_text(head + BEGIN + drawing + END + tail, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
