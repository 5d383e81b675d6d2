"""Explain and lint: a tool's rank for a query is the rank search gives, with its reasons; the
catalog check finds each fault it names. Offline (the demo catalog, the bundled model) and behind
the catalog routes of a proxy in front of the SDK fixture upstream, called with the SDK's client.
"""

from __future__ import annotations

import json
import random

import httpx
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from fixtures.logs import capture_logs
from fixtures.servers import serve_in_thread
from toolsearch.app import build_proxy
from toolsearch.catalogs.catalog import Catalog
from toolsearch.catalogs.lint import lint
from toolsearch.cli.main import main
from toolsearch.search.embedder import load_configured_embedder
from toolsearch.search.explain import CANDIDATES, explain
from toolsearch.search.index import make_indexer
from toolsearch.search.lexical import LexicalIndex
from toolsearch.search.rerank import RankedIndex, load_weights
from toolsearch.server.demo import demo_tools
from toolsearch.settings import Settings


@pytest.fixture(scope="module")
def demo():
    return Catalog.from_definitions(demo_tools())


@pytest.fixture(scope="module")
def embedder():
    return load_configured_embedder("model2vec")


def queries(catalog: Catalog, count: int, seed: int = 26) -> list[str]:
    """Queries made of the catalog's own words, mixed with words no tool holds."""
    rng = random.Random(seed)
    words = sorted({w for tool in catalog.tools for w in tool.description.lower().split() if w.isalpha()})
    strangers = ["zanzibar", "pelican", "quarterly", "bonjour", "réunion", "会议", "susitikimas"]
    made = []
    for _ in range(count):
        picked = rng.sample(words, rng.randint(1, 4)) + rng.sample(strangers, rng.randint(0, 2))
        rng.shuffle(picked)
        made.append(" ".join(picked))
    return [*made, "book a meeting with Anna", "zanzibar pelican", "", "会议 日程"]


def names_of(catalog, hits):
    return [catalog.tools[hit.position].name for hit in hits]


def guarded(index: RankedIndex, embedder) -> RankedIndex:
    """The same index with the words guard on (off by default): weakly matched queries fused."""
    return RankedIndex(
        index.lexical, index.fields, load_weights(), index.semantic, embedder, words_threshold=0.15
    )


@pytest.mark.parametrize("mode", ["guarded+model", "learned+model", "learned", "fusion+model", "fusion"])
def test_explain_gives_the_rank_search_gives(demo, embedder, mode):
    ranker = "fusion" if mode.startswith("fusion") else "learned"
    index = make_indexer(embedder if "model" in mode else None, ranker=ranker)(demo)
    if mode.startswith("guarded"):
        assert isinstance(index, RankedIndex)
        index = guarded(index, embedder)
    rng = random.Random(mode)
    methods = set()
    for query in queries(demo, 40):
        found = names_of(demo, index.search([query], CANDIDATES)[0])
        picked = {found[i] for i in (0, 4, 24, len(found) - 1) if 0 <= i < len(found)}
        picked |= {rng.choice(demo.tools).name for _ in range(3)}
        for name in picked:
            answer = explain(demo, index, query, name, above=CANDIDATES)
            expected = found.index(name) + 1 if name in found else None
            assert answer["rank"] == expected, (query, name)
            if expected is not None:  # the tools above it are search's, in search's order
                assert [row["name"] for row in answer["above"]] == found[: expected - 1]
            methods.add(answer["method"])
    if mode == "guarded+model":  # both paths of the learned ranker were exercised
        assert methods == {"learned", "fused"}
    if mode == "learned+model":  # the guard is off by default: the ranker orders every query
        assert methods == {"learned"}


def test_explain_says_what_matched_and_why_not(demo, embedder):
    index = make_indexer(embedder)(demo)
    assert isinstance(index, RankedIndex)
    answer = explain(demo, index, "book a meeting with Anna", "gcal_create_event")
    assert answer["queryTerms"][:2] == ["book", "meet"]
    assert answer["matched"]["name"] == [] and "meet" in answer["matched"]["description"]
    assert answer["rank"] > 1 and len(answer["above"]) == min(10, answer["rank"] - 1)
    assert 0 < answer["cosine"]["similarity"] < 1 and answer["bm25"]["rank"] >= 1
    ranker = answer["ranker"]
    assert ranker["candidate"] is True
    assert sum(f["adds"] for f in ranker["features"].values()) == pytest.approx(ranker["score"], abs=1e-3)
    assert answer["score"] == pytest.approx(ranker["score"], abs=1e-3)
    assert answer["fallback"]["applied"] is False
    assert explain(demo, index, "zanzibar pelican", "gcal_create_event")["fallback"]["applied"] is False
    index = guarded(index, embedder)
    stranger = explain(demo, index, "zanzibar pelican", "gcal_create_event")
    assert stranger["fallback"]["applied"] is True and stranger["method"] == "fused"
    assert any("no word of the query appears" in hint for hint in stranger["hints"])
    assert any("ranked by the fused" in hint for hint in stranger["hints"])


def test_hints_name_a_short_description_and_a_crowded_name():
    crowd = [
        {"name": f"crm_list_contacts_{i}", "description": f"Lists contacts of region {i}, newest first."}
        for i in range(12)
    ]
    catalog = Catalog.from_definitions([*crowd, {"name": "tiny", "description": "Does a thing."}])
    index = make_indexer(None)(catalog)
    assert isinstance(index, RankedIndex)
    crowded = explain(catalog, index, "contacts", "crm_list_contacts_3")
    assert '12 tools share its first three name words ("crm list contacts")' in crowded["hints"]
    assert any("lexical only" in hint for hint in crowded["hints"])
    tiny = explain(catalog, index, "contacts", "tiny")
    assert "its description is 3 words" in tiny["hints"] and tiny["rank"] is None
    assert any("cannot return it" in hint for hint in tiny["hints"])
    assert tiny["ranker"]["candidate"] is False
    unknown = explain(catalog, index, "contacts", "Tiny")
    assert unknown["error"] == "unknown_tool" and unknown["similar"][0] == "tiny"


def test_explain_works_on_bm25_alone():
    catalog = Catalog.from_definitions(demo_tools())
    index = make_indexer(None, ranker="fusion")(catalog)
    assert isinstance(index, LexicalIndex)
    answer = explain(catalog, index, "calendar event", "gcal_create_event")
    assert answer["method"] == "bm25" and answer["score"] == answer["bm25"]["score"]
    assert answer["rank"] == answer["bm25"]["rank"]


# -- the catalog check


CRAFTED = [
    {"name": "empty_one", "annotations": {"readOnlyHint": True}},
    {"name": "short_one", "description": "Gets it.", "annotations": {"readOnlyHint": True}},
    {
        "name": "report_a",
        "description": "Builds the weekly sales report for a team.",
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "report_b",
        "description": "Builds the  weekly sales report for a team.",
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "createEvent",
        "description": "Creates an event in the team calendar for a date.",
        "annotations": {"readOnlyHint": False},
    },
    {
        "name": "create-event",
        "description": "Adds a new event to the sales calendar on a date.",
        "annotations": {"readOnlyHint": False},
    },
    {
        "name": "xyzzy_plugh",
        "description": "Frobnicates quuxes thoroughly across gribble lattices every night.",
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "send_team_report",
        "description": "Sends the weekly report to the whole team by email.",
        "annotations": {},
    },
]


def test_lint_finds_each_fault_it_names_and_nothing_else():
    found = {f.check: f.names for f in lint(Catalog.from_definitions(CRAFTED))}
    assert found == {
        "empty_description": ("empty_one",),
        "short_description": ("short_one",),
        "duplicate_description": ("report_a = report_b",),
        "names_alike": ("create-event = createEvent",),
        "no_shared_word": ("xyzzy_plugh",),
        "annotations_missing": ("send_team_report",),
    }
    clean = [CRAFTED[i] for i in (2, 4, 7)]
    clean[2] = {**clean[2], "annotations": {"readOnlyHint": False}}
    assert lint(Catalog.from_definitions(clean)) == []


def test_catalog_lint_offline_prints_one_line_per_fault_escaped(tmp_path, capsys):
    hostile = {"name": "evil\x1b[2Jtool", "description": "x"}
    path = tmp_path / "tools.json"
    path.write_text(json.dumps({"tools": [*CRAFTED, hostile]}))
    assert main(["catalog", "--lint", "--catalog", str(path)]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 6 and "\x1b" not in out and "evil\\u001b[2Jtool" in out
    assert lines[1].split()[:2] == ["2", "short_description:"]
    assert "6 kinds of fault in 9 tools" in err
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps([CRAFTED[2]]))
    assert main(["catalog", "--lint", "--catalog", str(clean)]) == 0
    assert "no faults found in 1 tools" in capsys.readouterr().out


def test_explain_offline_on_a_catalog_listing(tmp_path, capsys, demo):
    rows = [
        {"name": t.name, "readOnly": t.read_only, "title": t.title, "description": t.description}
        for t in demo.tools
    ]
    path = tmp_path / "catalog.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows))
    argv = ["explain", "--catalog", str(path), "--query", "book a meeting", "--tool", "gcal_create_event"]
    assert main([*argv, "--embedder", "none"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("gcal_create_event: rank ") and "matched in description: meet" in out
    assert "holds no input schemas" in err
    assert main([*argv[:-1], "no_such_tool", "--embedder", "none"]) == 1
    assert "no tool named no_such_tool" in capsys.readouterr().out
    big = tmp_path / "big.json"
    big.write_text(json.dumps([{"name": f"t{i}"} for i in range(30)]))
    assert (
        main(["explain", "--catalog", str(big), "--query", "q", "--tool", "t1", "--max-catalog-tools", "20"])
        == 1
    )
    assert "over 20 (max_catalog_tools)" in capsys.readouterr().err


# -- behind the proxy


@pytest.fixture(scope="module")
def proxy(sdk_upstream):
    built = build_proxy(
        Settings(upstream=sdk_upstream.url, embedder="none", catalog_ttl=3600.0, max_query_chars=60)
    )
    with serve_in_thread(built.app) as base:
        yield built, base


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_route_rank_equals_what_search_tools_lists(proxy):
    _, base = proxy
    transport = streamable_http_client(
        base + "/mcp", http_client=httpx2.AsyncClient(headers=bearer("alice"), timeout=30)
    )
    async with Client(transport, mode="2026-07-28") as client, httpx.AsyncClient(timeout=30) as http:
        for query in ("list contacts", "delete a contact in crm", "echo arguments", "only tool can see"):
            found = await client.call_tool("search_tools", {"query": query, "limit": 25})
            listed = [tool["name"] for tool in found.structured_content["tools"]]
            for name in (listed[0], listed[-1], "alice_only_tool"):
                reply = await http.post(
                    base + "/catalog/explain", json={"query": query, "tool": name}, headers=bearer("alice")
                )
                assert reply.status_code == 200 and reply.headers["cache-control"] == "private, no-store"
                rank = reply.json()["rank"]
                if name in listed:
                    assert rank == listed.index(name) + 1, (query, name)
                else:  # below search_tools' most (25), or not ranked at all
                    assert rank is None or rank > 25, (query, name)


async def test_route_is_authorized_and_origin_checked_as_catalog_is(proxy):
    _, base = proxy
    body = {"query": "contacts", "tool": "alice_only_tool"}
    async with httpx.AsyncClient(timeout=30) as http:
        missing = await http.post(base + "/catalog/explain", json=body)
        denied = await http.post(base + "/catalog/explain", json=body, headers=bearer("denied"))
        evil = await http.post(
            base + "/catalog/explain",
            json=body,
            headers={**bearer("alice"), "Origin": "https://evil.example"},
        )
        bob = await http.post(base + "/catalog/explain", json=body, headers=bearer("bob"))
        lint_missing = await http.get(base + "/catalog/lint")
        lint_evil = await http.get(
            base + "/catalog/lint", headers={**bearer("alice"), "Origin": "https://evil.example"}
        )
        bad = await http.post(base + "/catalog/explain", json={"query": 3}, headers=bearer("alice"))
        huge = await http.post(base + "/catalog/explain", content=b"x" * 20_000, headers=bearer("alice"))
    assert missing.status_code == lint_missing.status_code == 401
    assert "resource_metadata" in missing.headers["www-authenticate"]
    assert denied.status_code == 403 and 'scope="tools"' in denied.headers["www-authenticate"]
    assert evil.status_code == lint_evil.status_code == 403
    assert bob.json()["error"] == "unknown_tool"  # bob's catalog has no alice_only_tool: his token, his tools
    assert bad.status_code == 400 and huge.status_code == 413


async def test_route_cuts_the_query_as_search_does(proxy):
    _, base = proxy
    query = "word " * 20 + "contacts"  # "contacts" is past max_query_chars (60)
    async with httpx.AsyncClient(timeout=30) as http:
        reply = await http.post(
            base + "/catalog/explain",
            json={"query": query, "tool": "crm_list_contacts"},
            headers=bearer("alice"),
        )
    assert reply.status_code == 200
    assert "word" in reply.json()["queryTerms"] and "contact" not in reply.json()["queryTerms"]


def test_cli_explains_and_lints_against_the_proxy_with_the_operators_token(proxy, monkeypatch, capsys):
    _, base = proxy
    monkeypatch.setenv("TOOLSEARCH_TOKEN", "alice")
    assert main(["explain", "--url", base, "--query", "list contacts", "--tool", "crm_list_contacts"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("crm_list_contacts: rank ") and "matched in name:" in out
    main(["catalog", "--lint", "--url", base + "/mcp"])
    out, err = capsys.readouterr()
    assert "kinds of fault in" in err and "toolsearch catalog:" not in err
    monkeypatch.delenv("TOOLSEARCH_TOKEN")
    assert main(["explain", "--url", base, "--query", "q", "--tool", "echo"]) == 1
    assert "(HTTP 401)" in capsys.readouterr().err


async def test_nothing_of_the_query_is_logged(proxy):
    built, base = proxy
    secret = "zanzibar-pelican-quarterly"
    with capture_logs() as captured:
        async with httpx.AsyncClient(timeout=30) as http:
            for tool in ("crm_list_contacts", secret):
                reply = await http.post(
                    base + "/catalog/explain", json={"query": secret, "tool": tool}, headers=bearer("alice")
                )
                assert reply.status_code == 200
            await http.get(base + "/catalog/lint", headers=bearer("alice"))
    assert any("catalog_explain" in line for line in captured.lines), (
        "nothing logged: the test proves nothing"
    )
    assert any("catalog_lint" in line for line in captured.lines)
    for line in captured.lines:
        assert secret not in line and "zanzibar" not in line
    assert "zanzibar" not in repr(built.telemetry.counts)
