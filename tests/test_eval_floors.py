"""Ranking is held to the evaluation set's figures: a change that lowers them fails here.

Floors are the figures measured with `toolsearch eval` (bundled development model, default
ranker and `lexical_weight`) less about one question's worth (1/252 = 0.4 points), so a change that loses even
two questions fails. Raise them when ranking improves. "embedding" is the model alone (cosine).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from toolsearch.cli import evaluation
from toolsearch.search.embedder import load_configured_embedder

FLOORS = {
    # (search, asked, language): (recall@1, recall@5, recall@10, MRR)
    # "hybrid" is the default: the learned ranker (search/rerank.py), chosen on the public benchmark's
    # dev split (tools/searchbench), where it gains; here it loses to "fused" (hybrid by the weighted sum
    # it replaced) in users' own words, which avoid the tools' words by design. Both are held.
    # Moved with the ranker's third round (four server features, trained on the larger public dev:
    # Seal-Tools and ToolTalk added, every query weighed the same); public dev BM25 alone gained.
    # Sixth round (two features: server_specific_idf, synonyms_asked; public dev left out R@1
    # 0.881/0.827 -> 0.884/0.831, R@5 0.966/0.945 -> 0.967/0.945): BM25 alone's users' words en R@5
    # 40.1 -> 39.3 (2 questions; R@1 19.4 -> 19.0), lowered here; hybrid's figures held or gained.
    ("lexical", "user", "en"): (0.186, 0.389, 0.468, 0.273),
    ("lexical", "user", "lt"): (0.039, 0.142, 0.178, 0.085),
    ("lexical", "model", "en"): (0.861, 0.956, 0.972, 0.904),
    ("lexical", "model", "lt"): (0.853, 0.976, 0.988, 0.903),
    ("embedding", "user", "en"): (0.321, 0.587, 0.678, 0.434),
    ("embedding", "user", "lt"): (0.238, 0.499, 0.595, 0.345),
    ("embedding", "model", "en"): (0.849, 0.972, 0.992, 0.903),
    ("embedding", "model", "lt"): (0.841, 0.976, 0.988, 0.904),
    ("fused", "user", "en"): (0.325, 0.619, 0.730, 0.457),
    ("fused", "user", "lt"): (0.265, 0.515, 0.611, 0.373),
    ("fused", "model", "en"): (0.876, 0.972, 0.984, 0.921),
    ("fused", "model", "lt"): (0.916, 0.988, 0.992, 0.947),
    # Users' words lowered when the 15% guard was dropped: it lost on the public dev split, and by
    # the rule a choice that gains only on this made-up set is not taken (searchbench README).
    # Third round (four server features; public dev grown by Seal-Tools and ToolTalk, every query
    # weighed the same): public dev (five sources) R@1 models'/raw 0.885/0.826 -> 0.884/0.835;
    # here users' words R@5 en 48.8 -> 48.8, lt 43.3 -> 42.1 (3 questions), models' R@5 unchanged.
    # Fourth round (a 28th feature, cosine_gap x the share of the query's terms its best candidate
    # misses; every request weighed the same in training): public dev R@1 0.884/0.835 -> 0.885/0.835,
    # left-out-source 0.877/0.822 -> 0.881/0.827; here users' words R@5 en 48.8 -> 50.8, lt 42.1 ->
    # 45.2, models' R@5 unchanged, but models' lt R@1 89.7 -> 88.9 (2 questions) and MRR lowered.
    # Seventh round (word_pairs, rarest_terms_held; public dev left out R@1 0.884/0.831 -> 0.886/0.839,
    # R@5 0.967/0.945 -> 0.968/0.945): here users' words R@5 en 50.8 -> 54.4, lt 45.2 -> 45.2, models'
    # en 96.8 -> 97.2, lt 98.0 -> 98.0, but models' lt R@1 89.3 -> 87.3 (5 questions), MRR 0.933 -> 0.922.
    ("hybrid", "user", "en"): (0.238, 0.504, 0.627, 0.353),
    ("hybrid", "user", "lt"): (0.190, 0.448, 0.559, 0.302),
    ("hybrid", "model", "en"): (0.877, 0.964, 0.984, 0.920),
    ("hybrid", "model", "lt"): (0.869, 0.976, 0.992, 0.918),
}


@pytest.fixture(scope="module")
def figures():
    embedder = load_configured_embedder("model2vec")
    results = evaluation.evaluate(embedder)
    return {(f.search, f.phrasing, f.language): f for f in results}


def test_the_set_is_big_enough_to_mean_something():
    questions = evaluation.load_questions()
    catalog = evaluation.evaluation_catalog()
    assert len(catalog) >= 500 and len(questions) >= 200
    assert len({tool.name.split("_")[0] for tool in catalog.tools}) >= 25  # servers across many domains
    assert all({"en", "lt"} <= set(q.text) for q in questions)
    assert all({"en", "lt"} <= set(q.model_query) for q in questions)
    names = set(catalog.by_name)
    assert all(set(q.tools) <= names for q in questions)


@pytest.mark.parametrize("key", sorted(FLOORS))
def test_figures_hold_their_floors(figures, key):
    got = figures[key]
    r1, r5, r10, mrr = FLOORS[key]
    assert got.recall_at_1 >= r1
    assert got.recall_at_5 >= r5
    assert got.recall_at_10 >= r10
    assert got.mrr >= mrr


@pytest.mark.parametrize("asked", evaluation.PHRASINGS)
@pytest.mark.parametrize("language", evaluation.LANGUAGES)
def test_hybrid_is_never_worse_than_words_alone(figures, asked, language):
    lexical, hybrid = figures[("lexical", asked, language)], figures[("hybrid", asked, language)]
    assert hybrid.recall_at_5 >= lexical.recall_at_5
    assert hybrid.mrr >= lexical.mrr


def test_eval_command_prints_every_row_and_writes_json(tmp_path, capsys):
    from toolsearch.cli.main import main

    out = tmp_path / "figures.json"
    assert main(["eval", "--embedder", "none", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = [line.split()[:3] for line in printed.splitlines() if line.startswith("lexical")]
    assert rows == [
        ["lexical", asked, lang] for asked in evaluation.PHRASINGS for lang in evaluation.LANGUAGES
    ]
    saved = json.loads(out.read_text())
    assert {(f["phrasing"], f["language"]) for f in saved} == {
        (asked, lang) for asked in evaluation.PHRASINGS for lang in evaluation.LANGUAGES
    }
    assert all(f["questions"] == len(evaluation.load_questions()) for f in saved)


def test_cosine_search_ranks_tools_by_cosine_alone():
    tools = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]], np.float32)
    index = evaluation.CosineSearch(tools, lambda queries: np.array([[0.0, 1.0]] * len(queries), np.float32))
    hits = index.search(["anything", "else"], 2)
    assert [[hit.position for hit in row] for row in hits] == [[2, 1], [2, 1]]
    assert hits[0][0].score == pytest.approx(1.0)


def test_eval_prints_models_side_by_side_and_recall_per_domain(tmp_path, capsys):
    from fixtures.model_helpers import make_model
    from toolsearch.cli.main import main

    new, old = make_model(tmp_path / "new", seed=1), make_model(tmp_path / "old", seed=2)
    assert main(["eval", "--model-dir", str(new), "--compare", str(old), "--by-domain"]) == 0
    printed = capsys.readouterr().out
    table = printed.split("R@5 and MRR per model")[1].split("hybrid recall@5 per domain")[0]
    rows = [line.split() for line in table.splitlines()[2:] if line.strip()]
    expected = {
        (search, asked, lang)
        for search in ("lexical", "embedding", "fused", "hybrid")
        for asked in evaluation.PHRASINGS
        for lang in evaluation.LANGUAGES
    }
    assert {tuple(row[:3]) for row in rows} == expected
    assert all(len(row) == 3 + 4 for row in rows)  # R@5 and MRR for each of the two models
    lexical = [row for row in rows if row[0] == "lexical"]
    assert all(row[3:5] == row[5:7] for row in lexical)  # words alone do not depend on the model
    domains = printed.split("hybrid recall@5 per domain")[1].splitlines()[2:]
    names = {q.id.rsplit("-", 1)[0] for q in evaluation.load_questions()}
    assert {line.split()[0] for line in domains if line.strip()} == names
