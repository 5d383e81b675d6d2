"""A catalog: read-only only when the upstream says so, robust to malformed upstream tools."""

from __future__ import annotations

import pytest

from toolsearch.catalogs.catalog import Catalog, is_read_only
from toolsearch.search import Hit
from toolsearch.search.hybrid import fuse


def test_read_only_needs_the_upstreams_word_and_operators_can_override_both_ways():
    read = {"name": "r", "annotations": {"readOnlyHint": True}}
    unmarked = {"name": "u"}
    assert is_read_only(read) and not is_read_only(unmarked)
    assert not is_read_only({"name": "x", "annotations": {"readOnlyHint": "true"}})  # not a boolean
    assert not is_read_only(read, write_tools=["r"])
    assert is_read_only(unmarked, read_tools=["u"])


def test_malformed_tools_do_not_break_a_catalog():
    catalog = Catalog.from_definitions(
        [
            {"name": "a", "annotations": ["readOnlyHint"], "title": 7, "description": None},
            {"name": "b", "inputSchema": "not a schema", "description": {"x": 1}},
        ]
    )
    a, b = catalog.get("a"), catalog.get("b")
    assert a is not None and b is not None
    assert (a.read_only, a.title, a.description) == (False, "", "")
    assert b.input_schema == {"type": "object"} and b.description == ""


def test_catalog_round_trips_through_json_and_refuses_garbage():
    catalog = Catalog.from_definitions([{"name": "z"}, {"name": "a"}], instructions="hi", fetched_at=5.0)
    again = Catalog.from_json(catalog.to_json())
    assert (
        [t.name for t in again.tools] == ["a", "z"] and again.instructions == "hi" and again.fetched_at == 5.0
    )
    for garbage in (b"", b"[]", b'{"v": 2, "tools": []}', b'{"v": 1, "tools": [{"x": 1}]}', b"\xff"):
        try:
            Catalog.from_json(garbage)
        except ValueError:
            continue
        raise AssertionError(f"accepted {garbage!r}")


def test_fusion_keeps_the_best_lexical_match_first_even_with_negative_scores():
    lexical = [Hit(0, -0.1), Hit(1, -0.5), Hit(2, -0.9)]
    assert [hit.position for hit in fuse(lexical, [], 3)] == [0, 1, 2]
    semantic = [Hit(2, 0.9), Hit(1, 0.5), Hit(0, 0.1)]
    assert [hit.position for hit in fuse([], semantic, 3)] == [2, 1, 0]


def test_short_descriptions_end_at_the_first_real_sentence():
    from toolsearch.catalogs.catalog import short_description

    assert short_description("Revoke a dynamic secret lease (e.g. database creds). Returns nothing.") == (
        "Revoke a dynamic secret lease (e.g. database creds)."
    )
    assert short_description("List events. Paginated.") == "List events."
    assert (
        short_description("Version 2.5 of the API is used. Then more.") == "Version 2.5 of the API is used."
    )
    assert short_description("word " * 100).endswith("…") and len(short_description("word " * 100)) <= 200


def test_a_stored_catalog_nested_past_what_json_can_read_is_garbage_not_a_crash():
    deep = b"[" * 20_000 + b"]" * 20_000
    with pytest.raises(ValueError, match="not JSON"):
        Catalog.from_json(b'{"v": 1, "tools": [{"name": "x", "inputSchema": ' + deep + b"}]}")
