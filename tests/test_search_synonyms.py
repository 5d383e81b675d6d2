"""The WordNet synonym table the tool names are expanded with (search.synonyms)."""

from __future__ import annotations

from toolsearch.search.synonyms import expansion, synonym_table


def test_the_table_is_shipped_and_gives_stemmed_synonyms():
    assert len(synonym_table()) > 10_000
    assert "film" in expansion(["movie"])
    assert "purchas" in expansion(["buy"])


def test_a_plural_or_a_verb_form_is_looked_up_as_its_lemma_and_unknown_words_give_nothing():
    assert expansion(["movies"]) == expansion(["movie"])
    assert expansion(["stories"]) == expansion(["story"]) != []
    assert expansion(["zzqx"]) == []
    # A word WordNet knows as it is is not read as a plural ("news" is not "new").
    assert "new" not in expansion(["news"]) and expansion(["news"]) != expansion(["new"])
