"""One error tree: every exception class the package defines derives from `ToolsearchError`, and
`errors.py`'s docstring draws each of them, so the tree shown cannot drift from the code."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import toolsearch
from toolsearch import errors
from toolsearch.errors import ToolsearchError

PACKAGE = Path(toolsearch.__file__).parent


def exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined at module level in the package, by `module.Name`."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(toolsearch.__path__, "toolsearch."):
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            exception = inspect.isclass(value) and issubclass(value, BaseException)
            if exception and value.__module__ == module.__name__:
                found[f"{module.__name__}.{name}"] = value
    return found


def test_the_walk_finds_the_package_s_exceptions():
    found = exception_classes()
    assert len(found) > 30, "the walk found too few exception classes: the tests below would prove nothing"
    assert {"toolsearch.upstream.errors.UpstreamError", "toolsearch.refusal.CallerRefused"} <= set(found)


def test_every_exception_class_of_the_package_derives_from_the_base():
    found = exception_classes()
    outside = sorted(name for name, cls in found.items() if not issubclass(cls, ToolsearchError))
    assert not outside, f"exception classes not under ToolsearchError (errors.py): {outside}"


def test_builtin_bases_callers_rely_on_are_kept():
    from toolsearch.credentials import MalformedAuthorization
    from toolsearch.patterns import PatternError, PatternTimeout

    assert issubclass(MalformedAuthorization, ValueError)
    assert issubclass(PatternError, ValueError)
    assert issubclass(PatternTimeout, TimeoutError)


def test_the_tree_in_the_docstring_names_every_exception_class_at_its_place():
    doc = errors.__doc__ or ""
    rows = {}
    for line in doc.splitlines():
        words = line.replace("│", " ").replace("├──", " ").replace("└──", " ").split()
        if len(words) >= 2 and words[1].endswith(".py"):
            rows[words[0]] = words[1]
    assert rows, "no tree drawn in errors.py's docstring"
    missing, misplaced = [], []
    for qualified, cls in exception_classes().items():
        if cls is ToolsearchError:
            continue
        module = qualified.rsplit(".", 1)[0].removeprefix("toolsearch.").replace(".", "/") + ".py"
        if cls.__name__ not in rows:
            missing.append(qualified)
        elif rows[cls.__name__] != module:
            misplaced.append(f"{cls.__name__}: drawn in {rows[cls.__name__]}, defined in {module}")
    assert not missing, f"exception classes errors.py's tree does not draw: {missing}"
    assert not misplaced, misplaced
    drawn_but_gone = sorted(set(rows) - {cls.__name__ for cls in exception_classes().values()})
    assert not drawn_but_gone, f"errors.py's tree draws classes that do not exist: {drawn_but_gone}"


def test_no_exception_class_hides_inside_a_function():
    """The walk sees module-level classes only: a class defined in a function would escape it."""
    nested = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.ClassDef):
                    nested.append(f"{path.relative_to(PACKAGE)}:{inner.lineno} {inner.name}")
    assert not nested, f"classes defined inside functions (define them at module level): {nested}"
