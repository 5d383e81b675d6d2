"""One error tree: every exception class the package defines derives from `ToolsearchError`, and
`errors.py`'s docstring draws each of them, so the tree shown cannot drift from the code."""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import toolsearch
from toolsearch import errors
from toolsearch.errors import ToolsearchError
from toolsearch.upstream import UpstreamError, answer_by

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
    assert {"toolsearch.upstream.errors.UpstreamError", "toolsearch.callers.refusal.CallerRefused"} <= set(
        found
    )


def test_every_exception_class_of_the_package_derives_from_the_base():
    found = exception_classes()
    outside = sorted(name for name, cls in found.items() if not issubclass(cls, ToolsearchError))
    assert not outside, f"exception classes not under ToolsearchError (errors.py): {outside}"


def test_builtin_bases_callers_rely_on_are_kept():
    from toolsearch.callers.credentials import MalformedAuthorization
    from toolsearch.validation.patterns import PatternError, PatternTimeout

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


def package_sources() -> dict[str, str]:
    return {
        str(path.relative_to(PACKAGE)): path.read_text(encoding="utf-8") for path in PACKAGE.rglob("*.py")
    }


# -- one place per boundary, where a grep can say so


def test_a_timeout_becomes_an_upstream_error_in_one_place():
    made = re.compile(r'UpstreamError\(\s*"timeout"')
    places = sorted(name for name, text in package_sources().items() for _ in made.finditer(text))
    assert places == ["upstream/errors.py"], places  # timed_out; every deadline goes through it


async def test_a_deadline_that_passes_is_the_upstream_s_timeout_with_its_sentence():
    loop = asyncio.get_running_loop()
    never = asyncio.Event()
    with pytest.raises(UpstreamError) as caught:
        async with answer_by(loop.time(), "the upstream did not answer within %.3g s", 2.5):
            await never.wait()
    assert caught.value.kind == "timeout"
    assert caught.value.message == "the upstream did not answer within 2.5 s"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


async def test_a_timeout_error_that_is_not_the_deadline_s_passes_through():
    loop = asyncio.get_running_loop()
    with pytest.raises(TimeoutError):
        async with answer_by(loop.time() + 3600, "never %s", "said"):
            raise TimeoutError
    async with answer_by(loop.time() + 3600, "never"):
        pass  # in time: nothing raised


def test_the_caller_s_catalog_is_dropped_for_a_refusal_in_one_place():
    calls = sorted(
        name
        for name, text in package_sources().items()
        for _ in re.finditer(r"\.forget\(caller|self\.forget\(", text)
    )
    assert calls == ["catalogs/store.py"], calls  # CatalogStore.drop_refused


def test_the_service_meets_the_upstream_s_failures_in_one_catch_site():
    service = package_sources()["service/tool_service.py"]
    assert len(re.findall(r"except\s*\(?[^:\n]*UpstreamError", service)) == 1  # ToolService._or_failure


def test_an_upstream_failure_becomes_a_tool_result_in_one_place():
    made = re.compile(r"error_result\(\s*exc\.kind")
    places = sorted(name for name, text in package_sources().items() for _ in made.finditer(text))
    assert places == ["service/results.py"], places  # upstream_failure


def test_our_errors_become_an_http_answer_at_the_edge_alone():
    """The routes hand every failure to `HttpEdge.answer_for`: none answers a refusal itself."""
    sources = package_sources()
    for route in ("server/endpoint.py", "server/catalog_routes.py"):
        text = sources[route]
        assert "answer_for(" in text, route
        assert not re.search(r"except\s*\(?[^:\n]*(CallerRefused|UpstreamError|UnknownTool)", text), route
        assert "edge.refusal(" not in text, route
