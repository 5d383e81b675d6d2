"""Argument checks against input schemas, and what counts as a clear typo of a tool's name."""

from __future__ import annotations

import pytest

from toolsearch.validation import SchemaUnusable, argument_errors, clear_typo_of, closest_names, edit_distance

NAMES = ["github_get_issue", "github_create_issue", "github_list_issues", "gcal_get_event", "jira_get_issue"]


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("github_get_isue", "github_get_issue"),  # a letter dropped
        ("github_get_isseu", "github_get_issue"),  # two letters swapped
        ("GitHub-Get-Issue", "github_get_issue"),  # case and separators
        ("gcal_get_evnet", "gcal_get_event"),
    ],
)
def test_clear_typos_name_the_tool(typed, meant):
    assert clear_typo_of(typed, NAMES) == meant


@pytest.mark.parametrize("typed", ["github_fetch_issue", "get_issue", "github_issue", "slack_post"])
def test_a_different_word_is_not_a_typo(typed):
    assert clear_typo_of(typed, NAMES) is None


def test_a_different_verb_is_not_a_typo_however_alike():
    assert clear_typo_of("github_get_issue", ["github_create_issue"]) is None


def test_equally_close_tools_are_not_clear():
    assert clear_typo_of("jira_get_issuex", ["jira_get_issue", "jira_get_issues"]) is None


def test_edit_distance():
    assert edit_distance("abc", "abc") == 0
    assert edit_distance("abc", "acb") == 1
    assert edit_distance("abc", "abxc") == 1
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("a" * 20, "b" * 20, bound=2) == 3


def test_closest_names_for_unknown_ones():
    assert closest_names("github_get_isue", NAMES)[0] == "github_get_issue"


SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "kind": {"enum": ["a", "b"]}, "n": {"$ref": "#/$defs/count"}},
    "required": ["id"],
    "$defs": {"count": {"type": "integer", "minimum": 0}},
}


def test_arguments_that_fit_have_no_errors():
    assert argument_errors(SCHEMA, {"id": "x", "kind": "a", "n": 3}) == []


def test_each_problem_is_named_with_its_place():
    problems = argument_errors(SCHEMA, {"kind": "c", "n": -1})
    text = " ".join(problems)
    assert "'id' is a required property" in text
    assert "arguments.kind" in text and "arguments.n" in text


def test_other_dialects_are_honoured():
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "required": ["a"]}
    assert argument_errors(draft7, {}) == ["arguments: 'a' is a required property"]


def test_unusable_schemas_are_reported_not_raised_as_crashes():
    with pytest.raises(SchemaUnusable):
        argument_errors({"type": 5}, {})
    with pytest.raises(SchemaUnusable):
        argument_errors({"$ref": "https://example.com/schema.json"}, {})
