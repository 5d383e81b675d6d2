"""Query sets side by side (`python -m tools.searchbench phrasings`): each searched, moves counted."""

from __future__ import annotations

import json

from tools.searchbench.benchset import Request, Source, read_queries
from tools.searchbench.phrasings import moves, recall, render, search_sets

TOOLS = [
    {"name": "calendar-create_event", "description": "Creates a calendar event."},
    {"name": "calendar-list_events", "description": "Lists the events of a day."},
    {"name": "mail-send_email", "description": "Sends an email to a recipient."},
    {"name": "weather-forecast", "description": "The weather forecast for a city."},
]
SOURCE = Source(
    "made",
    "dev",
    "MIT",
    "o/r@c",
    "w",
    TOOLS,
    [
        Request("1", "book a meeting", (("calendar-create_event",),)),
        Request("2", "mail Ann", (("mail-send_email",),)),
        Request("3", "rain tomorrow?", (("weather-forecast",),)),
    ],
)


def write(tmp_path, name, rows):
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_each_set_is_searched_and_the_requests_that_moved_are_counted(tmp_path):
    vague = write(
        tmp_path,
        "vague.jsonl",
        [
            {"source": "made", "key": "1", "queries": ["set something up"]},
            {"source": "made", "key": "2", "queries": ["send an email"]},
            {"source": "other", "key": "1", "queries": ["a source this run does not load"]},
        ],
    )
    named = write(
        tmp_path,
        "named.jsonl",
        [
            {"source": "made", "key": "1", "queries": ["weather forecast", "create calendar event"]},
            {"source": "made", "key": "2", "queries": ["city weather forecast"]},
            {"source": "made", "key": "3", "queries": ["weather forecast", " ", "a", "b", "c", "d", "e"]},
        ],
    )
    sets = {str(path): read_queries(path) for path in (vague, named)}
    assert sets[str(named)][("made", "3")] == ("weather forecast", "a", "b", "c", "d")  # five, blanks dropped

    before, after = search_sets([SOURCE], sets, embedder=None)
    ours_before, ours_after = before.ranks["ours"], after.ranks["ours"]
    # The vague set misses request 1 (no shared word) and finds 2; the named set finds 1 in its
    # second query's list and loses 2 (asked for the weather instead).
    assert ours_before == {("made", "1"): 0, ("made", "2"): 1}
    assert ours_after[("made", "1")] == 1 and ours_after[("made", "2")] != 1
    assert recall(ours_after, 1) == (2 / 3, 3)
    assert moves(ours_before, ours_after, 1) == (1, 1)  # request 3 is in one set only: not counted
    assert before.ranks["bm25-floor"][("made", "2")] == 1

    table = render([before, after])
    assert "+1 / -1" in table and table.splitlines()[-1].startswith("all")
