"""`python -m tools.searchbench weak`: the two cases it counts, on a small made source.

Removed: the request's tools are taken out of the catalog before searching, so a query only they
answer is weak there; intact: counted only when a needed tool is in the query's top five.
"""

from __future__ import annotations

from tools.searchbench.benchset import Request, Source
from tools.searchbench.weak import observe, rates, render
from toolsearch.search.weak import WEAK_COSINE, WEAK_WORDS


def tool(name: str, description: str) -> dict:
    return {"name": name, "description": description, "inputSchema": {"type": "object"}}


SOURCE = Source(
    name="made",
    split="dev",
    licence="none",
    origin="here",
    writer="a test",
    tools=[
        tool("bake_bread", "Bake a sourdough loaf in the oven."),
        tool("notes_get", "Get a note by its id."),
        tool("notes_search", "Search the notes for words."),
    ],
    requests=[
        Request("1", "bake a sourdough loaf", (("bake_bread",),), ("sourdough loaf",)),
        Request("2", "get my note", (("notes_get",),), ("get note",)),
    ],
)


def test_a_query_only_the_removed_tool_answers_fires_and_an_intact_one_does_not():
    observations = observe([SOURCE], None)  # BM25 alone: weak when nothing shares a word
    table = rates(observations, WEAK_WORDS, WEAK_COSINE)

    # Request 1's words reach only bake_bread: removed, nothing shares a word. Request 2's "get"
    # and "note" reach notes_search too. Intact, both find their tool in the top five.
    assert table[("dev", "raw", "removed")] == (2, 0.5)
    assert table[("dev", "model", "removed")] == (2, 0.5)
    assert table[("dev", "raw", "intact")] == (2, 0.0)
    assert "fires wrongly" in render(observations, WEAK_WORDS, WEAK_COSINE)
