"""What in a catalog keeps search from finding its tools, or makes the proxy treat them as writes.

Each check names the tools at fault, so an operator can fix the catalog where the fault is
(usually the upstream's tool definitions): one finding per check, empty checks left out.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from toolsearch.catalogs.catalog import Catalog, Tool
from toolsearch.catalogs.printable import printable
from toolsearch.search.documents import document_tokens, name_words
from toolsearch.search.explain import SHORT_DESCRIPTION_WORDS

__all__ = ["Finding", "lint", "render_findings"]

SHOWN_NAMES = 12  # per line; the count says how many there are


@dataclass(frozen=True)
class Finding:
    check: str  # a stable key, for scripts
    message: str  # what is wrong and what it costs
    names: tuple[str, ...]  # the tools at fault (for groups, each group's names joined by " = ")

    def as_dict(self) -> dict[str, object]:
        return {
            "check": self.check,
            "count": len(self.names),
            "message": self.message,
            "tools": list(self.names),
        }


def _groups(tools: Iterable[Tool], key: Callable[[Tool], str]) -> list[list[str]]:
    by: dict[str, list[str]] = defaultdict(list)
    for tool in tools:
        value = key(tool)
        if value:
            by[value].append(tool.name)
    return [names for names in by.values() if len(names) > 1]


def _description_key(tool: Tool) -> str:
    return " ".join(tool.description.casefold().split())


def _name_key(tool: Tool) -> str:
    return "".join(name_words(tool.name).split())  # "createEvent", "create_event", "Create-Event" alike


def _isolated(catalog: Catalog) -> list[str]:
    """Tools none of whose search terms any other tool holds (a catalog of one has none)."""
    if len(catalog) < 2:
        return []
    terms = [set(document_tokens(tool)) for tool in catalog.tools]
    frequency = Counter(term for held in terms for term in held)
    return [
        tool.name
        for tool, held in zip(catalog.tools, terms, strict=True)
        if all(frequency[t] == 1 for t in held)
    ]


def _unannotated(tool: Tool) -> bool:
    annotations = tool.definition.get("annotations")
    hinted = isinstance(annotations, dict) and isinstance(annotations.get("readOnlyHint"), bool)
    return not hinted and not tool.read_only  # an operator's read_tools override settles it


def lint(catalog: Catalog) -> list[Finding]:
    tools = catalog.tools
    findings = []
    empty = [t.name for t in tools if not t.description.strip()]
    short = [t.name for t in tools if 0 < len(t.description.split()) < SHORT_DESCRIPTION_WORDS]
    duplicated = _groups(tools, _description_key)
    alike = _groups(tools, _name_key)
    isolated = _isolated(catalog)
    unannotated = [t.name for t in tools if _unannotated(t)]
    checks = [
        ("empty_description", "no description: search has only the name to go on", empty),
        (
            "short_description",
            f"description under {SHORT_DESCRIPTION_WORDS} words: too little for search to find the tool by",
            short,
        ),
        (
            "duplicate_description",
            "the same description as another tool: search cannot tell them apart but by name",
            [" = ".join(group) for group in duplicated],
        ),
        (
            "names_alike",
            "names that differ only by case or separators: one word list for search, easily confused",
            [" = ".join(group) for group in alike],
        ),
        (
            "no_shared_word",
            "text that shares no word with any other tool: the catalog gives no context for it",
            isolated,
        ),
        (
            "annotations_missing",
            "no readOnlyHint annotation: counted as a write (call_write_tool) unless read_tools names it",
            unannotated,
        ),
    ]
    for check, message, names in checks:
        if names:
            findings.append(Finding(check, message, tuple(names)))
    return findings


def render_findings(findings: list[Finding], total: int) -> str:
    """One line per finding: its count, what is wrong, then the first names (escaped for a terminal)."""
    lines = []
    for finding in findings:
        names = ", ".join(printable(name) for name in finding.names[:SHOWN_NAMES])
        more = len(finding.names) - SHOWN_NAMES
        if more > 0:
            names += f", … and {more} more"
        lines.append(f"{len(finding.names):>5}  {finding.check}: {finding.message}: {names}")
    if not findings:
        lines.append(f"no faults found in {total} tools")
    return "\n".join(lines)
