"""Every test the docs name as proof exists: a renamed test must not leave a doc citing nothing.

A citation is `tests/<file>.py::test_name`, or `::test_name` after one (the same file). A
parametrised id (`[...]`) is not checked, only the function.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ROOT / "README.md",
    ROOT / "ARCHITECTURE.md",
    ROOT / "CONTRIBUTING.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "tools").rglob("*.md")),
]
CITATION = re.compile(r"(tests/[\w/]+\.py)?::(test_\w+)")


def citations(text: str) -> list[tuple[str, str]]:
    found, current = [], None
    for match in CITATION.finditer(text):
        current = match.group(1) or current
        if current is not None:
            found.append((current, match.group(2)))
    return found


def defined_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_test_the_docs_cite_exists():
    missing, checked = [], 0
    for doc in DOCS:
        for file, name in citations(doc.read_text()):
            checked += 1
            path = ROOT / file
            if not path.exists() or name not in defined_functions(path):
                missing.append(f"{doc.relative_to(ROOT)}: {file}::{name}")
    assert checked > 50  # the docs do cite tests: a broken pattern must not pass silently
    assert not missing, missing


def test_a_citation_after_a_file_names_that_file():
    text = "see `tests/test_a.py::test_one`, `::test_two` and tests/test_b.py::test_three"
    assert citations(text) == [
        ("tests/test_a.py", "test_one"),
        ("tests/test_a.py", "test_two"),
        ("tests/test_b.py", "test_three"),
    ]
