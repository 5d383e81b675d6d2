"""ARCHITECTURE.md's module tables name every module of `shared/toolsearch/`, and only modules that exist.

A row names its modules in its first column: `server/endpoint.py`, `catalogs/cache/dynamo.py`, or a package
(`search/`), whose row then names each of its modules in backquotes (`text.py`, or `fetch` for
`model/build/fetch.py`). A module added, moved or removed without its row fails here; so does any `*.py`
path the document names anywhere that is not a file of the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "shared" / "toolsearch"
DOC = ROOT / "ARCHITECTURE.md"
QUOTED = re.compile(r"`([^`]+)`")


def module_rows() -> list[tuple[list[str], str]]:
    """(first-column names, the whole row) of each table row in the `## Modules` section."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("\n## Modules", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2 or set(cells[0]) <= {"-"} or cells[0] == "Module":
            continue
        rows.append((QUOTED.findall(cells[0]), line))
    return rows


def package_modules() -> set[str]:
    """Every module, as a path under `shared/toolsearch/` (`server/endpoint.py`, `search/text.py`)."""
    return {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name not in ("__init__.py", "__main__.py") and "data" not in path.relative_to(PACKAGE).parts
    }


def named_modules() -> tuple[set[str], list[str]]:
    """The modules the tables name, and the names that are no module."""
    named, wrong = set(), []
    for names, row in module_rows():
        for name in names:
            if name.endswith("/"):  # a package: its modules are named in its row
                folder = PACKAGE / name
                if not (folder / "__init__.py").is_file():
                    wrong.append(name)
                    continue
                quoted = set(QUOTED.findall(row))
                for module in folder.glob("*.py"):
                    if module.name != "__init__.py" and ({module.name, module.stem} & quoted):
                        named.add(name + module.name)
                for mention in quoted:
                    if mention.endswith(".py") and "/" not in mention and not (folder / mention).is_file():
                        wrong.append(f"{name}{mention}")
            elif (PACKAGE / name).is_file():
                named.add(name)
            else:
                wrong.append(name)
    return named, wrong


def test_the_module_tables_name_every_module_and_nothing_else():
    rows = module_rows()
    assert len(rows) > 20, "no module table found: the test would prove nothing"
    named, wrong = named_modules()
    assert not wrong, f"ARCHITECTURE.md names modules that do not exist: {wrong}"
    missing = sorted(package_modules() - named)
    assert not missing, (
        f"modules ARCHITECTURE.md's tables do not name (add a row, or the package's row): {missing}"
    )


def test_every_python_path_the_document_names_exists():
    """`functions/proxy/app.py`, `upstream/client.py`, `wire.py`: a file of the repo or of the package."""
    text = re.sub(r"^```.*?^```", "", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    files = {path.name for path in PACKAGE.rglob("*.py")}
    mentions = {name for line in text.splitlines() for name in QUOTED.findall(line)}
    # The diagram names modules in parentheses: (callers/refusal.py), (auth/exchanging.py, ...).
    mentions |= set(re.findall(r"[\w/]+\.py\b", DOC.read_text(encoding="utf-8").split("```")[1]))
    missing = []
    for mention in mentions:
        if not mention.endswith(".py") or " " in mention:
            continue
        if (ROOT / mention).is_file() or (PACKAGE / mention).is_file():
            continue
        if "/" not in mention and mention in files:
            continue
        missing.append(mention)
    assert not missing, f"ARCHITECTURE.md names files that do not exist: {sorted(missing)}"
