"""No library module over 400 lines without its reason in CONTRIBUTING.md ("Modules over 400 lines")."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "shared" / "toolsearch"
LIMIT = 400


def listed() -> dict[str, str]:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("### Modules over 400 lines", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+\.py)` \| (\d+) \| (.+) \|$", section, flags=re.MULTILINE)
    return {module: why for module, _, why in rows}


def long_modules() -> dict[str, int]:
    sizes = {}
    for path in PACKAGE.rglob("*.py"):
        if "data" in path.relative_to(PACKAGE).parts:
            continue
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > LIMIT:
            sizes[str(path.relative_to(PACKAGE))] = lines
    return sizes


def test_every_long_module_has_its_reason():
    reasons = listed()
    assert reasons, "no list found in CONTRIBUTING.md: the test would prove nothing"
    unlisted = sorted(set(long_modules()) - set(reasons))
    assert not unlisted, f"over {LIMIT} lines with no reason in CONTRIBUTING.md (split, or a row): {unlisted}"


def test_the_list_names_only_long_modules():
    stale = sorted(set(listed()) - set(long_modules()))
    assert not stale, f"CONTRIBUTING.md lists modules no longer over {LIMIT} lines (drop the row): {stale}"
