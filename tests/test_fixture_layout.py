"""One import root and one registration style for test helpers and fixtures.

Helpers live in tests/fixtures and are imported as fixtures.<module> (tests/ is on the path);
shared pytest fixtures are registered once, in tests/conftest.py. A module imported under two
names (tests.fixtures.x and fixtures.x) is two modules, with two copies of its state, and a
plugin registered from a test module is registered for every test anyway, so neither is allowed.
`ruff` bans `import tests...` (TID251); this test checks the rest, reading the source.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"


def _sources() -> list[Path]:
    return sorted([*TESTS.glob("*.py"), *FIXTURES.glob("*.py"), *(ROOT / "bench").glob("*.py")])


def _imported_modules(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
    return found


def _fixture_names() -> set[str]:
    """Names of the pytest fixtures defined in tests/fixtures (decorated with pytest.fixture)."""
    names = set()
    for path in FIXTURES.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and any(
                "fixture" in ast.unparse(d) for d in node.decorator_list
            ):
                names.add(node.name)
    return names


def test_tests_holds_only_test_modules_and_the_conftest():
    helpers = [
        p.name for p in TESTS.glob("*.py") if p.name != "conftest.py" and not p.name.startswith("test_")
    ]
    assert helpers == [], "move helper modules to tests/fixtures and import them as fixtures.<module>"


def test_plugins_are_registered_only_in_the_conftest():
    registering = []
    for path in _sources():
        if path == TESTS / "conftest.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(t, ast.Name) and t.id == "pytest_plugins" for t in targets):
                registering.append(str(path.relative_to(ROOT)))
    assert registering == []


def test_the_conftest_registers_every_module_that_defines_fixtures():
    tree = ast.parse((TESTS / "conftest.py").read_text(encoding="utf-8"))
    [plugins] = [
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "pytest_plugins"
    ]
    registered = set(ast.literal_eval(plugins))
    defining = {
        f"fixtures.{path.stem}"
        for path in FIXTURES.glob("*.py")
        if "pytest.fixture" in path.read_text(encoding="utf-8")
    }
    assert defining <= registered
    assert all(name.startswith("fixtures.") for name in registered)


def test_nothing_imports_a_test_module_or_a_fixture_function():
    fixtures = _fixture_names()
    wrong = []
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for module in _imported_modules(tree):
            if module.split(".")[0].startswith("test_") or module.split(".")[0] in ("conftest", "tests"):
                wrong.append(f"{path.relative_to(ROOT)}: {module}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fixtures."):
                wrong += [f"{path.relative_to(ROOT)}: {a.name}" for a in node.names if a.name in fixtures]
    assert wrong == []
