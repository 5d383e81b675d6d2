"""The packages' import rules (`[tool.importlinter]` in pyproject.toml) hold, and each one catches a
planted import: `lint-imports` runs on the package and on a copy with one violation per rule."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "shared" / "toolsearch"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

# (file under the package, the import planted in it, the contract it breaks)
PLANTED = [
    ("ops/tasks.py", "from toolsearch.service import tooldefs", "ops/ imports nothing of the package"),
    ("mcp/jsonrpc.py", "from toolsearch.catalogs import catalog", "mcp/ imports only ops/"),
    ("server/endpoint.py", "from toolsearch.upstream import errors", "server/ never imports upstream/"),
    ("upstream/sse.py", "from toolsearch.server import streaming", "upstream/ never imports server/"),
    (
        "catalogs/catalog.py",
        "import starlette.responses",
        "Starlette only in server/, aws/ and the composition root (app.py)",
    ),
]


def lint_imports(path_root: Path) -> subprocess.CompletedProcess[str]:
    if not LINT_IMPORTS.is_file():
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    env = {**os.environ, "PYTHONPATH": str(path_root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(ROOT / "pyproject.toml")],
        cwd=path_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_package_keeps_every_rule():
    result = lint_imports(ROOT / "shared")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(PLANTED)} kept, 0 broken" in result.stdout


def test_each_rule_fails_on_a_planted_import(tmp_path):
    copy = tmp_path / "toolsearch"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("data", "__pycache__", "*.json"))
    for relative, line, _ in PLANTED:
        module = copy / relative
        module.write_text(module.read_text(encoding="utf-8") + f"\n{line}  # planted\n", encoding="utf-8")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    for _, _, contract in PLANTED:
        assert f"{contract} BROKEN" in result.stdout, result.stdout
    assert f"0 kept, {len(PLANTED)} broken" in result.stdout
