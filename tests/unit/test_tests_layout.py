"""The test tree's own rule: no test module imports another. What several test files share lives in
tests/helpers/, frozen reference implementations and published data in tests/oracles/."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
SHARED = ("helpers", "oracles")


def _modules_imported(path: Path) -> set[str]:
    """Absolute names of the modules `path` imports, relative imports resolved against its package."""
    package = path.relative_to(TESTS.parent).with_suffix("").parts[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.add(module)
            names |= {f"{module}.{alias.name}" for alias in node.names}
    return names


def test_no_test_module_imports_another():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        for name in sorted(_modules_imported(path)):
            parts = name.split(".")
            if parts[0] != "tests" or len(parts) < 2:
                continue
            # `tests.helpers...` and `tests.oracles...` only; `from tests import helpers` names tests.helpers too.
            if parts[1] not in SHARED and not (len(parts) == 2 and parts[1] in SHARED):
                offenders.append(f"{path.relative_to(TESTS.parent)} imports {name}")
    assert offenders == [], (
        "move what these share to tests/helpers/ (or tests/oracles/ if frozen):\n" + "\n".join(offenders)
    )


def test_shared_folders_hold_no_tests():
    for folder in SHARED:
        assert not sorted((TESTS / folder).rglob("test_*.py")), (
            f"tests/{folder}/ is for shared code, not tests"
        )
