"""The endpoint's indexed request headers answer every look-up as Starlette's own `Headers` do."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.datastructures import Headers

from toolsearch.server.request_headers import IndexedHeaders

NAMES = ["accept", "mcp-method", "mcp-name", "origin", "content-length", "x-other"]
raw_headers = st.lists(
    st.tuples(
        st.sampled_from(NAMES).map(str.encode),
        st.text(alphabet=st.characters(min_codepoint=0x09, max_codepoint=0xFF), max_size=12).map(
            lambda text: text.encode("latin-1")
        ),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(raw_headers)
def test_each_look_up_answers_as_starlettes_headers(raw):
    starlette = Headers(scope={"headers": list(raw)})
    indexed = IndexedHeaders({"headers": list(raw)})

    for name in [*NAMES, "Mcp-Method", "MCP-NAME", "absent"]:
        assert indexed.getlist(name) == starlette.getlist(name)
        assert indexed.get(name) == starlette.get(name)
        assert (name in indexed) == (name in starlette)
    assert indexed.raw == starlette.raw and list(indexed.items()) == list(starlette.items())
