"""The learned ranker: its shipped weights, the order it gives, and where it hands back to fusion."""

from __future__ import annotations

import numpy as np
import pytest

from toolsearch.catalogs.catalog import Catalog
from toolsearch.search.embedder import load_configured_embedder
from toolsearch.search.hybrid import HybridIndex, fuse
from toolsearch.search.index import make_indexer
from toolsearch.search.lexical import LexicalIndex
from toolsearch.search.rerank import FEATURES, RankedIndex, load_weights, order
from toolsearch.search.text import tokenize_query
from toolsearch.search.wording import query_words, word_pairs

TOOLS = [
    {"name": "calendar_create_event", "description": "Create an event in a calendar."},
    {"name": "calendar_list_events", "description": "List the events of a calendar between two dates."},
    {"name": "email_create_draft", "description": "Create a draft email."},
    {"name": "weather_get_forecast", "description": "The weather forecast for a city."},
    {"name": "github_create_issue", "description": "Open an issue in a GitHub repository."},
]


@pytest.fixture(scope="module")
def embedder():
    return load_configured_embedder("model2vec")


def names(catalog, hits):
    return [catalog.tools[hit.position].name for hit in hits]


def test_the_shipped_weights_load_and_name_every_feature():
    weights = load_weights()
    assert weights is not None
    for linear in (weights.hybrid, weights.lexical):
        assert linear.weights.shape == linear.mean.shape == linear.scale.shape == (len(FEATURES),)
        assert np.all(np.isfinite(linear.weights)) and np.all(linear.scale > 0)
    # BM25 alone never sees a cosine: its weights for the embedding's features are zero.
    cosine = [i for i, name in enumerate(FEATURES) if "cosine" in name or name == "semantic_rank"]
    assert not np.any(weights.lexical.weights[cosine])


@pytest.mark.parametrize("with_model", [True, False])
def test_the_tool_that_holds_the_query_comes_first(embedder, with_model):
    catalog = Catalog.from_definitions(TOOLS)
    index = make_indexer(embedder if with_model else None)(catalog)
    assert isinstance(index, RankedIndex)
    hits = index.search(["create a calendar event", "open a github issue", "list calendar events"], 3)
    assert [names(catalog, row)[0] for row in hits] == [
        "calendar_create_event",
        "github_create_issue",
        "calendar_list_events",
    ]
    assert all(len(row) <= 3 for row in hits)


def test_fusion_is_still_there_when_asked_for(embedder):
    catalog = Catalog.from_definitions(TOOLS)
    assert isinstance(make_indexer(embedder, ranker="fusion")(catalog), HybridIndex)
    assert isinstance(make_indexer(None, ranker="fusion")(catalog), LexicalIndex)


def test_a_query_whose_words_reach_no_tool_is_ranked_too_and_the_guard_still_works(embedder):
    catalog = Catalog.from_definitions(TOOLS)
    ranked = make_indexer(embedder)(catalog)
    query = "umbrella tomorrow?"  # no word of any tool: only the embedding can answer
    found = ranked.find(query)
    assert found.matrix[:, FEATURES.index("query_terms_held")].max(initial=0.0) == 0.0
    expected = order(found.matrix, found.positions, ranked.ranker, 3)
    assert ranked.search([query], 3)[0] == expected  # the guard is off by default
    guarded = RankedIndex(
        ranked.lexical, ranked.fields, load_weights(), ranked.semantic, embedder, words_threshold=0.15
    )
    fused = fuse(found.lexical_hits, found.semantic_hits, 3, guarded.fusion)
    assert guarded.search([query], 3)[0] == fused
    assert names(catalog, fused)[0] == "weather_get_forecast"


def test_the_cosine_gap_counts_as_much_as_the_query_words_miss(embedder):
    catalog = Catalog.from_definitions(TOOLS)
    ranked = make_indexer(embedder)(catalog)
    gap, gated = FEATURES.index("cosine_gap"), FEATURES.index("cosine_gap_when_words_miss")
    found = ranked.find("umbrella tomorrow?")  # no word held: the whole gap
    assert np.array_equal(found.matrix[:, gated], found.matrix[:, gap])
    found = ranked.find("weather forecast umbrella")  # the best candidate holds some of the terms
    held = found.matrix[:, FEATURES.index("query_terms_held")].max()
    assert 0 < held < 1
    assert np.allclose(found.matrix[:, gated], found.matrix[:, gap] * (1 - held))
    lexical = make_indexer(None)(catalog).find("weather forecast umbrella")
    assert not lexical.matrix[:, gated].any()  # no embedding, no cosine


def test_an_empty_catalog_and_an_empty_query_find_nothing(embedder):
    empty = make_indexer(embedder)(Catalog.from_definitions([]))
    assert empty.search(["anything"], 5) == [[]]
    catalog = Catalog.from_definitions(TOOLS)
    assert make_indexer(None)(catalog).search(["the of and"], 5) == [[]]  # stop words only


def test_equal_tools_are_ordered_by_position():
    twins = [{"name": f"twin_{i}", "description": "Send a message."} for i in range(4)]
    catalog = Catalog.from_definitions(twins)
    hits = make_indexer(None)(catalog).search(["send a message"], 4)[0]
    assert [hit.position for hit in hits] == [0, 1, 2, 3]


SERVERS = [
    {"name": "weread-get-weread-rank", "description": "Get the WeRead book ranking."},
    {"name": "weread-search_books", "description": "Search books on WeRead."},
    {
        "name": "notion-search_pages",
        "description": "Search pages in Notion.",
        "inputSchema": {"type": "object", "properties": {"pageSize": {"type": "integer"}}},
    },
    {"name": "notion-delete_page", "description": "Remove a page."},
    {"name": "Travel_1_FindAttractions", "description": "Attractions to visit in a city."},
]


def column(matrix, feature):
    return matrix[:, FEATURES.index(feature)]


def extra_features(query):
    from toolsearch.search.lexical import build_lexical_index
    from toolsearch.search.rerank import FieldIndex, features
    from toolsearch.search.text import tokenize_query

    catalog = Catalog.from_definitions(SERVERS)
    lexical = build_lexical_index(catalog.tools)
    fields = FieldIndex(catalog.tools, lexical)
    # In the order of SERVERS, whatever order the catalog keeps.
    candidates = np.array([[t.name for t in catalog.tools].index(d["name"]) for d in SERVERS])
    terms = tokenize_query(query)
    none = (np.zeros(0, np.int64), np.zeros(0))  # no ranking's top: no rank to place
    matrix = features(fields, lexical.scores(terms)[0], terms, candidates, none, None, none)
    extra = FEATURES[FEATURES.index("action_verb_asked") : FEATURES.index("near_duplicates") + 1]
    return {feature: column(matrix, feature) for feature in extra}


def test_the_server_prefix_is_split_off_only_when_tools_share_it():
    from toolsearch.search.fields import server_and_action

    names = [tool["name"] for tool in SERVERS]
    assert server_and_action(names) == [
        ("weread", "get-weread-rank"),
        ("weread", "search_books"),
        ("notion", "search_pages"),
        ("notion", "delete_page"),
        ("", "Travel_1_FindAttractions"),
    ]


def test_the_action_verb_after_the_server_prefix_is_matched():
    f = extra_features("delete a notion page")
    assert f["action_verb_asked"].tolist() == [0, 0, 0, 1, 0]
    # "remove" is the kind of action "delete" names; "search" is another kind.
    assert f["verb_class_agrees"].tolist() == [-1, -1, -1, 1, 0]
    assert f["server_terms_asked"].tolist() == [0, 0, 1, 1, 0]


def test_a_query_without_an_action_word_has_no_verb_agreement():
    assert extra_features("weread books")["verb_class_agrees"].tolist() == [0] * 5


def test_parameter_names_phrase_and_near_duplicates():
    f = extra_features("search pages with page size")
    assert f["parameter_names_asked"][2] > 0 and f["parameter_names_asked"][0] == 0
    assert f["name_phrase"].tolist() == [0, 0, 1, 0, 0]
    assert extra_features("travel 1 find attractions")["name_phrase"].tolist() == [0, 0, 0, 0, 1]
    assert extra_features("x")["near_duplicates"].tolist() == [0] * 5


def test_the_idf_weighted_name_share_favours_rare_terms():
    f = extra_features("weread rank")
    assert f["name_idf_share"][0] == pytest.approx(1.0)
    assert 0 < f["name_idf_share"][1] < 1


def test_the_server_features_group_the_candidates_by_server_prefix():
    from toolsearch.search.features import server_features
    from toolsearch.search.lexical import build_lexical_index
    from toolsearch.search.rerank import FieldIndex

    catalog = Catalog.from_definitions(SERVERS)
    fields = FieldIndex(catalog.tools, build_lexical_index(catalog.tools))
    candidates = np.array([[t.name for t in catalog.tools].index(d["name"]) for d in SERVERS])
    bm25 = np.array([0.2, 0.6, 1.0, 0.0, 0.2])
    cosine = np.array([0.5, 0.1, 0.3, 0.2, 0.7])
    rows = np.zeros((len(FEATURES), len(candidates)))
    server_features(rows, fields, bm25, cosine, fields.sums(["x"], candidates))
    named = ("server_candidates", "server_best_bm25", "server_bm25_share", "server_best_cosine_gap")
    count, best, share, best_cosine = (rows[FEATURES.index(feature)] for feature in named)
    # weread: the first two; notion: the next two; Travel_1_FindAttractions: alone.
    assert np.exp(count).round().tolist() == [2, 2, 2, 2, 1]
    assert best.tolist() == [0.6, 0.6, 1.0, 1.0, 0.2]
    assert share == pytest.approx([0.8 / 2, 0.8 / 2, 1.0 / 2, 1.0 / 2, 0.2 / 2])
    assert best_cosine == pytest.approx([-0.2, -0.2, -0.4, -0.4, 0.0])


def test_the_field_sums_are_each_fields_own_bm25_and_matches():
    from toolsearch.search.lexical import build_lexical_index
    from toolsearch.search.rerank import FieldIndex
    from toolsearch.search.text import tokenize_query

    catalog = Catalog.from_definitions(TOOLS + SERVERS)
    fields = FieldIndex(catalog.tools, build_lexical_index(catalog.tools))
    candidates = np.array([5, 0, 3, len(catalog.tools) - 1, 2])  # any order
    for query in ("create a calendar event event", "search notion pages with page size", "zzqx", ""):
        terms = tokenize_query(query)
        distinct = list(dict.fromkeys(terms))
        pairs = word_pairs(query_words(query))  # gathered with the terms, summed in their own field
        gathered = fields.gather([*terms, *pairs])
        sums = fields.sums(terms, candidates, gathered)
        scores, matched = fields.scores(gathered)  # the candidates' BM25, from the same gather
        whole_scores, whole_matched = fields.whole.scores(terms)
        assert np.array_equal(scores, whole_scores) and np.array_equal(matched, whole_matched)
        for row, index in enumerate((fields.whole, fields.name, fields.description, fields.parameters)):
            assert np.array_equal(sums.bm25[row], index.term_scores(terms)[candidates])  # the same sums
        assert np.array_equal(sums.bm25[4], fields.pairs.term_scores(pairs)[candidates])
        assert gathered.idf_total == fields.gather(terms).idf_total  # a pair is no term of the whole tool
        counted = (fields.whole, fields.name, fields.action, fields.server, fields.parameter_names)
        counted += (fields.verb, fields.action_verb)  # one term each: 1 when the query asks it
        counted += (fields.synonyms,)
        assert len(sums.held) == len(counted)
        for row, index in enumerate(counted):
            assert np.array_equal(sums.held[row], index.term_matches(distinct)[candidates])
        df = fields.whole.document_frequencies()  # IDF: log(1 + N / df) over the whole tool's text
        idf = [np.log1p(len(catalog.tools) / df[t]) if t in df else 0.0 for t in distinct]
        assert np.array_equal(sums.name_idf, fields.name.term_matches(distinct, idf)[candidates])
        # Server-specific: each held term's IDF x (1 - the share of the tool's server's other tools
        # that hold it too), 0 for a tool alone on its server.
        servers = fields.server_ids
        expected = np.zeros(len(candidates))
        for slot, position in enumerate(candidates.tolist()):
            siblings = [
                p for p in range(len(catalog.tools)) if servers[p] == servers[position] and p != position
            ]
            for term, weight in zip(distinct, idf, strict=True):
                held = fields.whole.term_matches([term])
                if held[position] and siblings:
                    expected[slot] += weight * (1 - sum(held[p] for p in siblings) / len(siblings))
        assert sums.server_idf == pytest.approx(expected)


class CountingEmbedder:
    """The real model, counting the texts it is asked to embed."""

    def __init__(self, inner):
        self.inner = inner
        self.dim = inner.dim
        self.texts: list[str] = []

    def encode(self, texts):
        self.texts += list(texts)
        return self.inner.encode(texts)


def test_the_weak_check_reuses_the_search_and_gives_what_it_gave_alone(embedder):
    from toolsearch.search.weak import strength

    counting = CountingEmbedder(embedder)
    catalog = Catalog.from_definitions(TOOLS)
    ranked = make_indexer(counting)(catalog)
    assert isinstance(ranked, RankedIndex)
    for query in ("plan a meeting on my calendar", "kur nusipirkti bilietus", "zzqx"):
        counting.texts.clear()
        hits = ranked.search([query], 3)[0]
        found = strength(ranked, query, [hit.position for hit in hits], cosine=True)
        assert counting.texts == [query]  # embedded by the search only
        recalled = ranked.recall(query)
        assert recalled is not None and recalled.terms == tuple(tokenize_query(query))
        ranked._recent.clear()  # forgotten: the check works it out alone, to the same figures
        assert strength(ranked, query, [hit.position for hit in hits], cosine=True) == found
        assert counting.texts == [query, query]


def test_the_weak_check_reads_the_share_of_terms_held_only_for_candidates():
    from toolsearch.search.weak import strength

    catalog = Catalog.from_definitions(TOOLS)
    ranked = make_indexer(None)(catalog)
    assert isinstance(ranked, RankedIndex)
    weather = [t.name for t in catalog.tools].index("weather_get_forecast")
    query = "create a calendar event"
    hits = [hit.position for hit in ranked.search([query], 3)[0]]
    assert weather not in ranked.recall(query).candidates.tolist()
    for positions in (hits, [weather, *hits], [weather], hits[1:]):
        found = strength(ranked, query, positions)
        ranked._recent.clear()  # forgotten: the share is counted over the catalog again
        assert strength(ranked, query, positions) == found
        ranked.search([query], 3)
    assert strength(ranked, query, [weather]).words_held == 0.0  # the forecast holds none of them


def test_the_recalled_queries_stay_bounded(embedder):
    from toolsearch.search.rerank import RECALLED_QUERIES

    ranked = make_indexer(embedder)(Catalog.from_definitions(TOOLS))
    for i in range(RECALLED_QUERIES + 10):
        ranked.search([f"calendar {i}"], 3)
    assert len(ranked._recent) == RECALLED_QUERIES
    assert ranked.recall("calendar 0") is None and ranked.recall(f"calendar {RECALLED_QUERIES + 9}")


def test_the_candidates_arrays_hold_what_the_hit_lists_say(embedder):
    ranked = make_indexer(embedder)(Catalog.from_definitions(TOOLS))
    found = ranked.find("create a calendar event")
    terms = tokenize_query("create a calendar event")
    assert found.lexical_hits == ranked.lexical.search_terms(terms, 50)
    cosines = ranked.semantic.scores(embedder.encode(["create a calendar event"]))[0]
    assert found.semantic_hits == ranked.semantic.rank(cosines, 50)
    assert found.positions.tolist() == sorted(
        {h.position for h in found.lexical_hits} | {h.position for h in found.semantic_hits}
    )
    # The features from the arrays are those from the Hit lists.
    from toolsearch.search.rerank import features

    scores, _ = ranked.lexical.scores(terms)

    def arrays(hits):
        return np.array([h.position for h in hits]), np.array([h.score for h in hits])

    lexical, semantic = arrays(found.lexical_hits), arrays(found.semantic_hits)
    words = query_words("create a calendar event")
    args = (ranked.fields, scores, terms, found.positions, lexical, cosines, semantic)
    assert np.array_equal(features(*args, words=words), found.matrix)


def test_an_empty_catalog_ranks_to_nothing(embedder):
    ranked = make_indexer(embedder)(Catalog.from_definitions([]))
    assert ranked.search(["anything at all"], 5) == [[]]


def _ranked_features(tools, query):
    catalog = Catalog.from_definitions(tools)
    index = make_indexer(None)(catalog)
    assert isinstance(index, RankedIndex)
    positions, matrix = index.candidates(query)
    names = [catalog.tools[p].name for p in positions.tolist()]
    return {
        name: dict(zip(FEATURES, row.tolist(), strict=True)) for name, row in zip(names, matrix, strict=True)
    }


def test_the_query_terms_a_tool_holds_and_its_server_siblings_lack_are_counted_by_idf():
    tools = [
        {"name": "bank-list_transactions", "description": "List transactions."},
        {"name": "bank-list_monthly_transactions", "description": "List transactions of a month."},
        {"name": "weather_get_forecast", "description": "The weather forecast for a city."},
    ]
    f = _ranked_features(tools, "list monthly transactions")
    # "list" and "transactions" are both bank tools': only "monthly" sets one apart.
    idf = {"list": np.log1p(3 / 2), "month": np.log1p(3 / 1), "transact": np.log1p(3 / 2)}
    assert f["bank-list_transactions"]["server_specific_idf"] == 0
    assert f["bank-list_monthly_transactions"]["server_specific_idf"] == pytest.approx(
        idf["month"] / sum(idf.values())
    )
    # A tool alone on its server has no siblings to stand apart from.
    assert _ranked_features(tools, "weather forecast")["weather_get_forecast"]["server_specific_idf"] == 0


def test_a_query_term_found_only_among_the_action_words_synonyms_is_counted():
    tools = [
        {"name": "cinema-find_movie", "description": "Find a movie by its title."},
        {"name": "cinema-find_showtimes", "description": "Showtimes of a theater."},
        {"name": "library-find_book", "description": "Find a book about film."},
        {"name": "library-find_author", "description": "Find an author."},
    ]
    f = _ranked_features(tools, "find a film")  # terms: find, film
    # WordNet's "movie" is also a "film": half the query's terms, found only there.
    assert f["cinema-find_movie"]["synonyms_asked"] == pytest.approx(0.5)
    # The book's own description holds "film": a synonym adds nothing to what the tool holds.
    assert f["library-find_book"]["synonyms_asked"] == 0
    assert f["cinema-find_showtimes"]["synonyms_asked"] == 0


def test_the_query_words_side_by_side_in_the_tool_are_scored_as_pairs():
    tools = [
        {"name": "bank-list_transactions", "description": "List the account's transactions."},
        {"name": "bank-transactions_list", "description": "Transactions: list them, by account."},
        {"name": "weather_get_forecast", "description": "The weather forecast for a city."},
    ]
    assert word_pairs(query_words("list my transactions")) == ["list transact"]
    f = _ranked_features(tools, "list my transactions")
    # Both hold both words; only the first holds them in the query's order, side by side.
    assert f["bank-list_transactions"]["word_pairs"] == 1
    assert f["bank-transactions_list"]["word_pairs"] == 0
    assert _ranked_features(tools, "transactions")["bank-list_transactions"]["word_pairs"] == 0  # no pair


def test_the_share_of_the_query_rarest_words_held_counts_the_two_of_most_idf():
    tools = [
        {"name": "bank-list_transactions", "description": "List transactions."},
        {"name": "bank-list_monthly_transactions", "description": "List transactions of a month."},
        {"name": "bank-list_accounts", "description": "List accounts."},
        {"name": "weather_get_forecast", "description": "The weather forecast for a city."},
    ]
    # IDF log(1 + 4 / df): month (1 tool) 1.609, transact (2) 1.099, list (3) 0.847: the rarest
    # two are month and transact. Stemmed the English way only: "monthly" -> "month".
    f = _ranked_features(tools, "list monthly transactions")
    month, transact = np.log1p(4 / 1), np.log1p(4 / 2)
    assert f["bank-list_monthly_transactions"]["rarest_terms_held"] == pytest.approx(1.0)
    assert f["bank-list_transactions"]["rarest_terms_held"] == pytest.approx(transact / (month + transact))
    assert f["bank-list_accounts"]["rarest_terms_held"] == 0  # "list" alone: not among the two
    f = _ranked_features(tools, "list accounts zzqx")  # a word no tool holds has no IDF: left out
    account, listed = np.log1p(4 / 1), np.log1p(4 / 3)
    assert f["bank-list_transactions"]["rarest_terms_held"] == pytest.approx(listed / (account + listed))


def test_of_equally_rare_words_the_first_asked_are_the_rarest_and_a_repeat_counts_once():
    tools = [
        {"name": "alpha_tool", "description": "Alpha."},
        {"name": "beta_tool", "description": "Beta."},
        {"name": "gamma_tool", "description": "Gamma."},
        {"name": "other_thing", "description": "Nothing of the kind."},
    ]
    f = _ranked_features(tools, "alpha beta gamma")  # one tool each: equal IDF, the first two asked
    assert [f[name]["rarest_terms_held"] for name in ("alpha_tool", "beta_tool", "gamma_tool")] == [
        0.5,
        0.5,
        0,
    ]
    f = _ranked_features(tools, "gamma gamma alpha beta")  # "gamma" once among the two, then "alpha"
    assert [f[name]["rarest_terms_held"] for name in ("alpha_tool", "beta_tool", "gamma_tool")] == [
        0.5,
        0,
        0.5,
    ]
    f = _ranked_features(tools, "tool beta")  # "tool" (3 tools) below "beta": each share of the sum
    beta, tool = np.log1p(4 / 1), np.log1p(4 / 3)
    assert f["beta_tool"]["rarest_terms_held"] == 1.0
    assert f["alpha_tool"]["rarest_terms_held"] == tool / (beta + tool)
    assert _ranked_features(tools, "gamma")["gamma_tool"]["rarest_terms_held"] == 1.0  # one word: all or none


@pytest.mark.parametrize(
    "query",
    [
        "list my monthly transactions",
        "createEvent on GitHub",
        "sąskaitos faktūra už mėnesį",
        "saskaitos",
        "naïve café résumé v2",
        "東京の天気 forecast",
        "",
        "Ąžuolas e\u0301vent 東京",
    ],
)
def test_the_query_is_tokenized_once_for_both_stemmings(query):
    from toolsearch.search.text import tokenize, tokenize_query_words

    assert tokenize_query_words(query) == (tokenize_query(query), query_words(query))
    assert query_words(query) == tokenize(query, lithuanian=False)
