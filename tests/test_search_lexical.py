"""The text pipeline, the indexed documents and the BM25 index."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from toolsearch.catalogs.catalog import Tool, make_tool
from toolsearch.search import Hit
from toolsearch.search.documents import document_text, document_tokens, name_words, schema_text
from toolsearch.search.lexical import LexicalIndex, build_lexical_index
from toolsearch.search.text import fold_diacritics, split_camel_case, tokenize, tokenize_query


def tool(name: str, description: str = "", schema: dict | None = None, title: str | None = None):
    definition = {"name": name, "description": description, "inputSchema": schema or {"type": "object"}}
    if title:
        definition["title"] = title
    return make_tool(definition)


def shares_term(a: str, b: str) -> bool:
    return bool(set(tokenize(a)) & set(tokenize(b)))


# -- text


@pytest.mark.parametrize("a, b", [("creating", "create"), ("issues", "issue"), ("Deleted", "delete")])
def test_english_forms_share_a_stem(a, b):
    assert shares_term(a, b)


@pytest.mark.parametrize("a, b", [("sąskaitos", "sąskaita"), ("sąskaitą", "sąskaitų")])
def test_lithuanian_forms_share_a_stem(a, b):
    assert shares_term(a, b)


@pytest.mark.parametrize(
    "document, query", [("sąskaitos", "saskaitos"), ("sąskaitą", "saskaita"), ("įvykį", "ivyki")]
)
def test_query_without_diacritics_finds_lithuanian_document(document, query):
    assert set(tokenize(document)) & set(tokenize_query(query))


def test_a_text_is_stemmed_the_lithuanian_way_only_when_it_looks_lithuanian():
    # "time" has two stems ("time", "tim"); an English text keeps one, so the word does not count twice.
    english = tokenize("Create an event in the shared calendar for Rūta at this time")
    assert english == ["creat", "event", "share", "calendar", "rut", "time"]
    assert tokenize("Gauti sąskaitą") == ["gauti", "gaut", "saskait"]
    assert tokenize("time", lithuanian=True) == ["time", "tim"]
    assert tokenize_query("saskaitos") == ["saskaito", "saskait"]


def test_diacritics_fold():
    assert fold_diacritics("žinutė") == "zinute"
    assert fold_diacritics("Łódź") == "Lodz"
    assert shares_term("žinutė", "zinute")
    assert shares_term("žinučių", "zinutes")
    assert all(term.isascii() for term in tokenize("Sukurti sąskaitą faktūrą ir išsiųsti žinutę"))


def test_unrelated_words_stay_apart():
    assert not shares_term("invoice", "calendar")
    assert not shares_term("sąskaita", "žinutė")


def test_cjk_runs_become_bigrams_and_lone_characters_unigrams():
    assert tokenize("创建日历事件") == ["创建", "建日", "日历", "历事", "事件"]
    mixed = tokenize("用 Python 写")
    assert mixed[0] == "用" and mixed[-1] == "写" and "python" in mixed
    assert tokenize("캘린더 일정") == ["캘린", "린더", "일정"]
    # Japanese kana keep their voicing marks: diacritic folding is for Latin-like scripts only.
    assert tokenize("ガイド") == ["ガイ", "イド"]


def test_camel_case_splits():
    assert split_camel_case("createEvent") == ["create", "Event"]
    assert split_camel_case("HTTPServer") == ["HTTP", "Server"]
    assert split_camel_case("getHTTPResponse") == ["get", "HTTP", "Response"]
    assert split_camel_case("oauth2Token") == ["oauth2", "Token"]
    assert split_camel_case("lower") == ["lower"]
    # Both spellings of a compound word match each other.
    assert shares_term("GitHub", "github")
    assert shares_term("GitHub", "git hub")


def test_stop_words_are_dropped_in_both_languages():
    assert tokenize("the of and to with") == []
    assert tokenize("ir ar kad iš į už") == []
    assert tokenize("is i uz") == []  # folded spellings too
    assert tokenize("the calendar") == tokenize("calendar")


def test_nfkc_and_case():
    assert tokenize("ＣＡＬＥＮＤＡＲ") == tokenize("calendar")
    assert tokenize("Straße") == tokenize("strasse")


def test_numbers_and_separators():
    assert tokenize("list_users v2") == ["list", "user", "v2"]
    assert tokenize("") == []
    assert tokenize("—, !!! ...") == []


# -- documents


def test_name_words():
    assert name_words("gcal.createEvent") == "gcal create event"
    assert name_words("github/list-pull_requests") == "github list pull requests"
    assert name_words("__") == ""


SCHEMA = {
    "type": "object",
    "properties": {
        "calendarId": {"type": "string", "description": "Which calendar"},
        "priority": {"enum": ["low", "high"]},
        "country": {"enum": [f"c{i}" for i in range(30)]},
        "attendee": {"type": "object", "properties": {"emailAddress": {"description": "Where to write"}}},
        "reminders": {"type": "array", "items": {"properties": {"minutesBefore": {"type": "integer"}}}},
        "deep": {"properties": {"inner": {"properties": {"tooDeep": {"description": "buried"}}}}},
    },
}


def test_schema_text_takes_top_level_and_one_nested_level():
    text = " ".join(schema_text(SCHEMA))
    expected = ["calendar id", "Which calendar", "low high", "email address", "Where to write"]
    expected.append("minutes before")
    assert all(part in text for part in expected)
    assert "c29" not in text  # a long enum is skipped
    assert "inner" in text and "too deep" not in text and "buried" not in text


@pytest.mark.parametrize(
    "schema",
    [None, [], "x", {"properties": []}, {"properties": {"a": 1, "b": {"description": 7, "enum": "x"}}}],
)
def test_malformed_schemas_are_skipped_not_raised(schema):
    assert isinstance(schema_text(schema), list)


@pytest.mark.parametrize("extra", [{"title": 5}, {"annotations": ["x"]}, {"annotations": {"title": None}}])
def test_odd_titles_are_skipped_not_raised(extra):
    definition = {"name": "odd_tool", "description": "Does things."} | extra
    odd = Tool(
        name="odd_tool", description="Does things.", input_schema={}, read_only=False, definition=definition
    )
    assert document_text(odd).endswith("Does things.")


def test_document_weights_name_over_description():
    t = tool("gcal.createEvent", "Adds an entry.", SCHEMA, title="New meeting")
    text = document_text(t, name_weight=3, title_weight=2)
    assert text.count("gcal create event") == 3
    assert text.count("New meeting") == 2
    tokens = document_tokens(t, name_weight=1, title_weight=1)
    assert tokens.count("gcal") == 1 and "entri" in tokens and "attende" in tokens


# -- index


CATALOG = [
    tool("calendar_create_event", "Create an event in a calendar.", {"properties": {"title": {}}}),
    tool("calendar_list_events", "List upcoming calendar events."),
    tool("github_create_issue", "Open a new issue in a GitHub repository."),
    tool("invoices_get", "Gauti sąskaitą faktūrą pagal numerį."),
    tool("send_message", "Išsiųsti žinutę vartotojui."),
    tool("weather_forecast", "获取指定城市的天气预报"),
    tool("translate_text", "将文本翻译成另一种语言"),
]


def names(index: LexicalIndex, query: str, limit: int = 3) -> list[str]:
    return [CATALOG[hit.position].name for hit in index.search([query], limit)[0]]


@pytest.fixture(scope="module")
def index() -> LexicalIndex:
    return build_lexical_index(CATALOG)


def test_finds_by_word_form(index):
    assert names(index, "creating events")[0] == "calendar_create_event"
    assert names(index, "open issues on github")[0] == "github_create_issue"


def test_finds_lithuanian_with_and_without_diacritics(index):
    assert names(index, "sąskaitos")[0] == "invoices_get"
    assert names(index, "saskaitos faktura")[0] == "invoices_get"
    assert names(index, "zinute")[0] == "send_message"


def test_chinese_query_finds_the_tool_described_in_chinese(index):
    assert names(index, "天气预报") == ["weather_forecast"]
    assert names(index, "翻译文本")[0] == "translate_text"


def test_non_matching_documents_are_not_hits(index):
    hits = index.search(["github"], 10)[0]
    assert [CATALOG[h.position].name for h in hits] == ["github_create_issue"]
    assert all(h.score > 0 for h in hits)


@pytest.mark.parametrize("query", ["", "   ", "the of and", "ir kad", "zzzunknownzzz"])
def test_empty_or_stop_word_queries_give_no_hits(index, query):
    assert index.search([query], 5) == [[]]


def test_one_result_list_per_query_in_order(index):
    results = index.search(["github", "", "weather forecast"], 2)
    assert len(results) == 3 and results[1] == []
    assert CATALOG[results[0][0].position].name == "github_create_issue"
    assert CATALOG[results[2][0].position].name == "weather_forecast"


def test_limit(index):
    assert len(index.search(["calendar event create"], 1)[0]) == 1
    assert index.search(["calendar"], 0) == [[]]
    assert index.search(["calendar"], -1) == [[]]


def test_ties_are_broken_by_position():
    docs = [["x"], ["a", "b"], ["a", "b"], ["y"], ["a", "b"], ["a", "b"]]
    index = LexicalIndex(docs)
    first = index.search_terms(["a"], 10)
    assert [h.position for h in first] == [1, 2, 4, 5]
    assert len({h.score for h in first}) == 1
    assert [h.position for h in index.search_terms(["a"], 3)] == [1, 2, 4]
    assert index.search_terms(["a"], 3) == index.search_terms(["a"], 3)


def test_empty_catalogs():
    assert LexicalIndex([]).search(["anything"], 5) == [[]]
    assert LexicalIndex([[], []]).search(["anything"], 5) == [[]]
    assert build_lexical_index([]).search(["x"], 5) == [[]]


def test_tiny_catalog_still_finds_a_match():
    # rank-bm25 gives a term in every document a negative idf; the match must still be found.
    index = build_lexical_index([tool("only_tool", "Does one thing.")])
    assert [h.position for h in index.search(["only tool"], 5)[0]] == [0]
    two = LexicalIndex([["a"], ["b"]])  # idf is exactly zero for a term in half the documents
    assert [h.position for h in two.search_terms(["a"], 5)] == [0]


WORDS = st.sampled_from([f"w{i}" for i in range(40)])
CORPORA = st.lists(st.lists(WORDS, max_size=25), min_size=1, max_size=40).filter(lambda docs: any(docs))
QUERIES = st.lists(st.one_of(WORDS, st.just("absent")), max_size=8)


@settings(max_examples=300, deadline=None)
@given(docs=CORPORA, query=QUERIES)
def test_fast_path_scores_equal_rank_bm25(docs, query):
    scores, matched = LexicalIndex(docs).scores(query)
    assert np.allclose(scores, BM25Okapi(docs).get_scores(query))
    assert matched.tolist() == [any(term in doc for term in query) for doc in docs]


@settings(max_examples=200, deadline=None)
@given(docs=CORPORA, query=QUERIES, limit=st.integers(1, 12))
def test_hits_are_the_full_ranking_cut_at_limit(docs, query, limit):
    reference = BM25Okapi(docs).get_scores(query)
    ranked = sorted(
        (i for i, doc in enumerate(docs) if set(query) & set(doc)), key=lambda i: (-reference[i], i)
    )
    hits = LexicalIndex(docs).search_terms(query, limit)
    assert [h.position for h in hits] == ranked[:limit]
    assert all(isinstance(h, Hit) for h in hits)


def test_fast_path_equals_rank_bm25_on_tokenized_tools():
    documents = [document_tokens(t) for t in CATALOG]
    reference = BM25Okapi(documents)
    index = LexicalIndex(documents)
    for query in ["create calendar events", "sąskaita faktūra", "天气预报", "issue issue github"]:
        terms = tokenize_query(query)
        assert np.allclose(index.scores(terms)[0], reference.get_scores(terms))


def test_plain_non_ascii_text_splits_into_the_same_words_as_the_full_pattern():
    from toolsearch.search import text

    samples = ["Rūta šiandien 3x_y", "naïve café — ąčę", "Kalendorius: įvykis", "日本語 text", "ok"]
    for sample in samples:
        if text._SPECIAL.search(sample) is None:  # the shortcut's case: the same words, in order
            assert text._PLAIN_WORD.findall(sample) == [w for _, w in text._TOKEN.findall(sample)]
