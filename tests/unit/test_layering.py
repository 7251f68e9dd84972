"""The dependency rule (docs/design.md, "Layer rules"): `campaign` imports without Prefect or Great Expectations, and imports run one way."""

import ast
import subprocess
import sys
from pathlib import Path

from tests.helpers.import_graph import campaign_imports_at_any_depth as _campaign_imports_at_any_depth
from tests.helpers.import_graph import circles as _circles
from tests.helpers.import_graph import package_graph, render_package_graph
from tests.helpers.import_graph import package_of as _unit

REPO = Path(__file__).resolve().parents[2]

BLOCK = """
import importlib, pkgutil, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('prefect', 'great_expectations'):
            raise ImportError(f'{name} is blocked: campaign must not import it')
sys.meta_path.insert(0, Block())
import campaign
for module in pkgutil.walk_packages(campaign.__path__, 'campaign.'):
    importlib.import_module(module.name)
print('ok')
"""


def test_campaign_imports_without_prefect_or_great_expectations():
    result = subprocess.run(
        [sys.executable, "-c", BLOCK], cwd=REPO, capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


# What each layer may not import: campaign_cli -> flows -> tasks -> campaign, and tasks -> data_checks -> campaign.
# benchmarks and deployments sit beside the stack; they may use the runner's pieces but never the command itself.
FORBIDDEN = {
    "campaign": ("campaign_cli", "flows", "tasks", "data_checks", "deployments", "benchmarks"),
    "data_checks": ("campaign_cli", "flows", "tasks"),
    "tasks": ("campaign_cli", "flows"),
    "flows": ("campaign_cli",),
    "deployments": ("campaign_cli.cli", "campaign_cli.commands"),
    "benchmarks": ("campaign_cli.cli", "campaign_cli.commands"),
}


def _is_main_block(node: ast.AST) -> bool:
    """`if __name__ == "__main__":`: a module's command-line entry point, run only as `python -m`."""
    test = getattr(node, "test", None)
    return (
        isinstance(node, ast.If)
        and isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _imports_of(path: Path) -> set[str]:
    """Every module a file imports, at any depth except inside its `if __name__ == "__main__":` block (a flow's
    `python -m flows.<stage>` entry point imports the terminal runner there, never at module level)."""
    names: set[str] = set()
    stack: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"), filename=str(path))]
    while stack:
        node = stack.pop()
        if _is_main_block(node):
            continue
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
        stack.extend(ast.iter_child_nodes(node))
    return names


def test_imports_run_one_way():
    """No layer imports one above it (docs/design.md); nothing below the command imports campaign_cli."""
    offenders = []
    for package, above in FORBIDDEN.items():
        for path in sorted((REPO / package).rglob("*.py")):
            bad = sorted(n for n in _imports_of(path) if any(n == a or n.startswith(f"{a}.") for a in above))
            if bad:
                offenders.append(f"{path.relative_to(REPO).as_posix()}: {', '.join(bad)}")
    assert offenders == [], "these import a layer above them:\n" + "\n".join(offenders)


PACKAGES = ("campaign", "data_checks", "tasks", "flows", "campaign_cli", "deployments")


def _module_graph() -> dict[str, set[str]]:
    """Module-level imports between the project's modules. `from package import name` points at the submodule
    when `name` is one, else at the package; imports inside functions are left out (they run later)."""
    files = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts)
            files[name.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [
                    f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in files else node.module
                    for alias in node.names
                ]
            else:
                continue
            graph[name].update(t for t in targets if t in files and t != name)
    return graph


def test_no_import_cycle():
    """A cycle makes the import order matter and hides a layer inside another: none among the project's modules."""
    graph = _module_graph()
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    cycles: list[list[str]] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


# Imports between campaign's packages that may close a circle, each with the reason it is needed. Empty: every
# idea lives below the ideas that use it.
ALLOWED_PACKAGE_CIRCLE_EDGES: dict[tuple[str, str], str] = {}


def test_no_import_circle_among_campaign_modules_at_any_depth():
    """An import inside a function or under TYPE_CHECKING that closes a circle hides an idea in the wrong place:
    no circle among campaign's modules, wherever the import is written."""
    graph = _campaign_imports_at_any_depth()
    circles = _circles({m: set(targets) for m, targets in graph.items()})
    lines = [
        f"{' <-> '.join(c)}: "
        + "; ".join(f"{a} -> {b} ({graph[a][b][0]})" for a in c for b in c if b in graph[a])
        for c in circles
    ]
    assert not lines, "import circles among campaign's modules:\n" + "\n".join(lines)


def test_no_package_of_campaign_reaches_up():
    """Campaign's packages (config, data, plan, sim, calendar, analysis, ...) form layers: no import, at any depth,
    goes from a package to one that (directly or not) imports it back."""
    graph = _campaign_imports_at_any_depth()
    units: dict[str, set[str]] = {}
    places: dict[tuple[str, str], str] = {}
    for module, targets in graph.items():
        for target, where in targets.items():
            a, b = _unit(module), _unit(target)
            if a == b or b == "campaign" or (a, b) in ALLOWED_PACKAGE_CIRCLE_EDGES:
                continue
            units.setdefault(a, set()).add(b)
            places.setdefault((a, b), where[0])
    circles = _circles(units)
    lines = [
        f"{' <-> '.join(c)}: "
        + "; ".join(f"{a} -> {b} ({places[a, b]})" for a in c for b in c if (a, b) in places)
        for c in circles
    ]
    assert not lines, "packages of campaign that import each other (one reaches up):\n" + "\n".join(lines)


def test_design_draws_the_package_graph_as_it_is():
    """docs/design.md draws campaign's packages and every arrow between them; the drawing is the imports' own
    (`python -m tests.helpers.import_graph --write` redraws it)."""
    design = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    drawn = design.split("<!-- package-graph -->\n", 1)[1].split("<!-- /package-graph -->", 1)[0]
    assert drawn == render_package_graph(package_graph()), (
        "redraw: python -m tests.helpers.import_graph --write"
    )
