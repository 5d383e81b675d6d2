"""`python -m tools.searchbench proxy`: ranks read through a real upstream and the proxy, beside in process.

One tiny source, served once: the official SDK's server lists its catalog, `toolsearch serve`
runs in front, the SDK's client asks. One tool's input schema is nested past the proxy's bound,
so the proxy drops it at listing: the request that needs it must show up as differing, with the
rule that dropped it, and so must the request past the proxy's 500 characters, with its cut; the
request that neither touches ranks the same on both sides.
"""

from __future__ import annotations

import pytest

from tools.searchbench.benchset import Request, Source
from tools.searchbench.proxy_report import render
from tools.searchbench.through_proxy import MAX_QUERY_CHARS, InProcess, compare_source, search_arguments
from toolsearch.search.embedder import load_configured_embedder
from toolsearch.search.embedding import VectorCache
from toolsearch.service.finding import cut_query
from toolsearch.validation.nesting import MAX_DEPTH


def _nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"inner": schema}}
    return schema


def _tool(name: str, description: str, schema: dict | None = None) -> dict:
    return {"name": name, "description": description, "inputSchema": schema or {"type": "object"}}


TOOLS = [
    _tool("weather-get_forecast", "Get the weather forecast for a city: temperature, rain and wind by day."),
    _tool("mail-send_email", "Send an email message to one or more recipients."),
    _tool("calendar-create_event", "Create a calendar event with a title, start and end time."),
    _tool(
        "records-archive_records",
        "Archive old records of a ledger so they no longer show in reports.",
        {"type": "object", "properties": {"filter": _nested(MAX_DEPTH + 2)}},
    ),
]
FORECAST = Request(
    "forecast",
    "Will it rain in Vilnius tomorrow? I need the weather forecast.",
    (("weather-get_forecast",),),
    ("weather forecast for a city",),
)
ARCHIVE = Request(
    "archive",
    "Please archive the old ledger records so reports stop showing them.",
    (("records-archive_records",),),
    ("archive old ledger records", "send an email"),
)
# Past the proxy's 500 characters, with the task's words at the end: the proxy searches the start only.
LONG = Request(
    "long",
    "I plan my week and keep lists of what to do, who to see and what to bring. " * 8
    + "Now send an email to the team.",
    (("mail-send_email",),),
    ("send an email",),
)
EMBEDDER = load_configured_embedder("auto", "")  # the bundled model, as the proxy loads it
SOURCE = Source("tiny", "dev", "MIT", "made up here", "this test", TOOLS, [FORECAST, ARCHIVE, LONG])


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    return compare_source(SOURCE, EMBEDDER, tmp_path_factory.mktemp("proxy"))


def test_search_arguments_are_a_query_or_queries_as_a_client_sends_them():
    assert search_arguments(["a"]) == {"query": "a", "limit": 10, "schemas": False}
    assert search_arguments(["a", "b"]) == {"queries": ["a", "b"], "limit": 10, "schemas": False}


def test_ranks_through_the_proxy_equal_the_in_process_ones(compared):
    rows = {(row.key, row.phrasing): row for row in compared.rows}
    assert set(rows) == {(k, p) for k in ("forecast", "archive", "long") for p in ("raw", "model")}
    for phrasing in ("raw", "model"):
        row = rows[("forecast", phrasing)]
        assert (row.in_process, row.through_proxy) == (1, 1)
        assert not row.differs and row.cause == ""


def test_a_tool_dropped_at_listing_shows_up_as_a_differing_request_with_its_rule(compared):
    assert compared.listed == 4 and compared.kept == 3
    assert compared.dropped == {"records-archive_records": f"nested more than {MAX_DEPTH} levels deep"}
    for phrasing in ("raw", "model"):
        row = next(r for r in compared.rows if (r.key, r.phrasing) == ("archive", phrasing))
        assert row.in_process == 1 and row.through_proxy is None and row.differs
        assert "records-archive_records" in row.cause and f"nested more than {MAX_DEPTH}" in row.cause
        assert not row.cause.startswith("unexplained")


def test_a_long_query_is_read_as_cut_and_ranks_as_its_start_does_in_process(compared):
    assert len(LONG.text) > MAX_QUERY_CHARS
    row = next(r for r in compared.rows if (r.key, r.phrasing) == ("long", "raw"))
    assert row.cut and not any(r.cut for r in compared.rows if r is not row)
    # The proxy's catalog lacks the dropped tool: in process over what it kept, on the text's start.
    kept = InProcess([t for t in TOOLS if t["name"] != "records-archive_records"], EMBEDDER, VectorCache())
    assert row.through_proxy == kept.rank(LONG, [cut_query(LONG.text, MAX_QUERY_CHARS)])
    # Whole, the text ends on the task's words; cut, it does not: the ranks differ, for that cause.
    assert row.in_process == 1 and row.through_proxy != 1
    assert f"query cut at {MAX_QUERY_CHARS} characters (was {len(LONG.text)})" in row.cause
    assert not row.cause.startswith("unexplained")


def test_neither_the_report_nor_the_proxy_log_holds_a_request_or_query(compared):
    assert compared.log_lines > 0 and compared.log_leaks == 0
    report = render([compared])
    for request in SOURCE.requests:
        for text in (request.text, *request.model_queries):
            assert text not in report
    assert "tiny archive model 1 -> -: needed tool not in the proxy's catalog" in report
