"""Every `toolsearch …` command line in the docs parses with the real argument parser.

A renamed flag must not leave a dead command in a guide (docs/deploy.md's first command once
said `--quantize int8` for a flag named `--int8`). The commands are taken from code: fenced
blocks (in a block with `$ ` prompts, only the prompted lines) and inline `code` spans of the
Markdown files, and ``code`` spans or command lines of the docstrings in bench/, examples/,
layers/ and tools/devmodel/base/ (the development model's base, once in layers/model/). A command
is a simple shell command whose program is `toolsearch` (any path to it), after environment
assignments; pipes, redirections, `&&` and comments end it.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from fixtures.doc_commands import markdown_snippets, python_snippets, toolsearch_argvs
from toolsearch.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN = [
    ROOT / "README.md",
    ROOT / "ARCHITECTURE.md",
    ROOT / "CONTRIBUTING.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "layers").rglob("*.md")),
    *sorted((ROOT / "tools" / "devmodel" / "base").rglob("*.md")),
]
PY_FOLDERS = ("bench", "examples", "layers", "tools/devmodel/base")
PYTHON = [p for folder in PY_FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]


def documented_commands() -> list[tuple[str, list[str]]]:
    found = []
    for path in MARKDOWN + PYTHON:
        text = path.read_text(encoding="utf-8")
        snippets = markdown_snippets(text) if path.suffix == ".md" else python_snippets(text)
        for snippet in snippets:
            for argv in toolsearch_argvs(snippet):
                found.append((str(path.relative_to(ROOT)), argv))
    return found


def parse_error(argv: list[str]) -> str | None:
    """None when the parser accepts argv; its message otherwise."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as exc:
        if exc.code not in (0, None):
            return stderr.getvalue().strip().splitlines()[-1]
    return None


COMMANDS = documented_commands()


def test_the_docs_hold_the_commands_a_user_runs():
    # The extractor finds the guide's commands; an empty list would make the test below vacuous.
    seen = {(where, argv[0]) for where, argv in COMMANDS}
    assert ("docs/deploy.md", "fetch-model") in seen
    assert ("README.md", "serve") in seen
    assert ("docs/clients.md", "catalog") in seen
    assert len(COMMANDS) >= 20


@pytest.mark.parametrize(("where", "argv"), COMMANDS, ids=[f"{w}:{' '.join(a)}" for w, a in COMMANDS])
def test_every_documented_toolsearch_command_parses(where, argv):
    error = parse_error(argv)
    assert error is None, f"{where}: `toolsearch {' '.join(argv)}`: {error}"


def test_a_renamed_flag_is_caught():
    # The defect this test exists for, kept as a case: the parser refuses it.
    assert parse_error(["fetch-model", "--quantize", "int8"]) is not None
    assert toolsearch_argvs("TOOLSEARCH_TOKEN=x .venv/bin/toolsearch catalog --url U | head -2") == [
        ["catalog", "--url", "U"]
    ]
    assert toolsearch_argvs("claude mcp add --transport http toolsearch http://h/mcp") == []


def test_the_readme_set_up_is_the_two_commands_ci_runs():
    # The README's set-up is the promise to a new user: one command serves, one tests. CI runs the
    # second (.ci/run), and the Makefile must still have both targets.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme.split("\n## Set-up\n", 1)[1].split("\n## ", 1)[0]
    assert "make serve" in setup and "make test" in setup
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "\nserve:" in makefile and "\ntest:" in makefile
