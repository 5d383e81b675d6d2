"""Argument checks against input schemas, and what counts as a clear typo of a tool's name.

The checks' bounds are asserted through the check's own deadline (`timeout=`): a check that
answers within it finished; one that needed longer would have raised `Uncheckable`.
"""

from __future__ import annotations

import json
import math
import threading
from typing import Any

import pytest

from toolsearch.validation import patterns
from toolsearch.validation.arguments import (
    MAX_MESSAGE_CHARS,
    SchemaUnusable,
    Uncheckable,
    Validators,
    _errors,
    argument_errors,
    check_arguments,
    clear_typo_of,
    closest_names,
    edit_distance,
)
from toolsearch.validation.nesting import MAX_DEPTH, deeper_than
from toolsearch.validation.schema_keywords import Check

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


# -- bounded checks: hostile schemas and arguments


def nested(levels: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


BACKTRACKING = "^(a+)+$"  # exponential for a backtracking engine on "aaa…a!"
HOSTILE_NAME = "a" * 40 + "!"
DRAFT_2019 = "https://json-schema.org/draft/2019-09/schema"
DRAFT_7 = "http://json-schema.org/draft-07/schema#"


@pytest.mark.parametrize(
    ("schema", "hostile", "fits"),
    [
        ({"properties": {"s": {"pattern": BACKTRACKING}}}, {"s": HOSTILE_NAME}, {"s": "aaa"}),
        ({"propertyNames": {"pattern": BACKTRACKING}}, {HOSTILE_NAME: 1}, {"aaa": 1}),
        (
            {"patternProperties": {BACKTRACKING: {"type": "string"}}},
            {"aaa": 1},
            {"aaa": "x", HOSTILE_NAME: 1},
        ),
        (
            {"patternProperties": {BACKTRACKING: {}}, "additionalProperties": False},
            {HOSTILE_NAME: 1},
            {"aaa": 1},
        ),
        (
            {"$schema": DRAFT_7, "patternProperties": {BACKTRACKING: {}}, "additionalProperties": False},
            {HOSTILE_NAME: 1},
            {"aaa": 1},
        ),
        (
            {"patternProperties": {BACKTRACKING: {}}, "unevaluatedProperties": False},
            {HOSTILE_NAME: 1},
            {"aaa": 1},
        ),
        (
            {"$schema": DRAFT_2019, "patternProperties": {BACKTRACKING: {}}, "unevaluatedProperties": False},
            {HOSTILE_NAME: 1},
            {"aaa": 1},
        ),
        (
            {"allOf": [{"patternProperties": {BACKTRACKING: {}}}], "unevaluatedProperties": False},
            {HOSTILE_NAME: 1},
            {"aaa": 1},
        ),
    ],
)
def test_every_keyword_matching_patterns_finishes_well_within_its_deadline(schema, hostile, fits):
    # A backtracking engine needs days for 40 `a`s; within the deadline the check gives its answer.
    assert argument_errors(schema, hostile, timeout=30) != []
    assert argument_errors(schema, fits, timeout=30) == []


def test_a_pattern_only_backtracking_can_match_is_cut_at_the_deadline():
    schema = {"properties": {"s": {"pattern": "^(a|a)+(?=b)"}}}  # lookahead: not RE2's
    assert patterns.engine("^(a|a)+(?=b)") == "regex"
    with pytest.raises(Uncheckable) as refused:
        argument_errors(schema, {"s": HOSTILE_NAME}, timeout=0.2)
    assert refused.value.reason == "timeout"
    assert argument_errors(schema, {"s": "aab"}, timeout=30) == []
    assert argument_errors(schema, {"s": "aa!"}, timeout=30) != []


def test_patterns_read_as_ecma_262_where_python_differs():
    # Named groups in ECMA syntax, and `$` at the very end only: Python's re rejects or bends both.
    assert argument_errors({"pattern": "^(?<word>[a-z]+)$"}, "UPPER") != []
    assert argument_errors({"pattern": "^(?<word>[a-z]+)$"}, "lower") == []
    assert argument_errors({"pattern": "^a$"}, "a\n") != []
    # A lone surrogate (valid JSON: "\ud800") is matched, not a crash.
    assert argument_errors({"pattern": "^x"}, "\ud800") != []
    with pytest.raises(SchemaUnusable):
        argument_errors({"pattern": "[^]"}, "x")  # ECMA "any character": neither engine has it


def test_unique_items_keeps_json_equality_and_takes_linear_time():
    schema = {"uniqueItems": True}
    assert argument_errors(schema, [1, True]) == []
    assert argument_errors(schema, [0, False, None, "0", [0], {"0": 0}]) == []
    assert argument_errors(schema, [1, 1.0]) != []
    assert argument_errors(schema, [{"a": 1, "b": [1, 2]}, {"b": [1.0, 2], "a": 1}]) != []
    assert argument_errors(schema, [[1, 2], [2, 1]]) == []
    distinct = [{"id": n} for n in range(100_000)]  # all pairs compared: hours
    assert argument_errors(schema, distinct, timeout=30) == []
    assert "items 0 and 100000 are equal" in argument_errors(schema, [*distinct, {"id": 0}], timeout=30)[0]


def test_unevaluated_items_and_properties_keep_their_meaning_and_take_linear_time():
    items = {"prefixItems": [{"type": "integer"}], "unevaluatedItems": False}
    assert argument_errors(items, [1]) == []
    assert "Unevaluated items are not allowed" in argument_errors(items, [1, 2])[0]
    properties = {"allOf": [{"properties": {"a": {}}}], "$ref": "#/$defs/b", "unevaluatedProperties": False}
    properties["$defs"] = {"b": {"properties": {"b": {}}}}
    assert argument_errors(properties, {"a": 1, "b": 2}) == []
    assert "'c'" in argument_errors(properties, {"a": 1, "c": 3})[0]
    typed = {"properties": {"a": {}}, "unevaluatedProperties": {"type": "string"}}
    assert argument_errors(typed, {"a": 1, "b": "x"}) == []
    assert "'c'" in argument_errors(typed, {"a": 1, "c": 3})[0]
    # Every index or key against every other: hours at these sizes.
    every_item = {"items": {"type": "integer"}, "unevaluatedItems": False}
    assert argument_errors(every_item, [0] * 200_000, timeout=30) == []
    every_key = {"additionalProperties": True, "unevaluatedProperties": False}
    assert argument_errors(every_key, {f"k{n}": 0 for n in range(50_000)}, timeout=30) == []


def test_long_schema_values_and_arguments_are_shortened_in_messages():
    # enum and const compare as JSON does: 1 is 1.0, true is not 1, key order does not count.
    assert argument_errors({"enum": [1, "a", [1]]}, 1.0) == [] and argument_errors({"enum": [1]}, True) != []
    assert argument_errors({"enum": [{"a": [1], "b": None}]}, {"b": None, "a": [1.0]}) == []
    assert argument_errors({"enum": [[1]]}, [True]) != [] and argument_errors({"enum": [None]}, 0) != []
    assert argument_errors({"const": False}, 0) != [] and argument_errors({"const": 0}, 0.0) == []
    enum = {"items": {"enum": list(range(100_000))}}
    problems = argument_errors(enum, ["a"] * 100)
    assert problems[0].startswith("arguments[0]: 'a' is not one of [0, 1, 2")
    assert problems[-1] == "… and more"  # 100 errors: the first 64 were gathered, 8 shown
    assert all(len(problem) <= MAX_MESSAGE_CHARS for problem in problems)
    const = {"items": {"const": "x" * 1_000_000}}
    assert all(len(problem) <= MAX_MESSAGE_CHARS for problem in argument_errors(const, ["y"] * 10))
    long_value = argument_errors({"type": "integer"}, "y" * 1_000_000)
    assert len(long_value[0]) <= MAX_MESSAGE_CHARS and long_value[0].endswith("is not of type 'integer'")


def test_arguments_deeper_than_the_bound_are_not_checked_but_refused():
    assert argument_errors({"type": "object"}, nested(MAX_DEPTH)) == []
    with pytest.raises(Uncheckable) as refused:
        argument_errors({"type": "object"}, nested(MAX_DEPTH + 1))
    assert refused.value.reason == "too_deep"
    assert str(refused.value) == f"the arguments nest more than {MAX_DEPTH} levels deep"


def test_references_that_recurse_without_end_cannot_be_checked():
    loop = {
        "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
        "properties": {"x": {"$ref": "#/$defs/a"}},
    }
    assert argument_errors(loop, {"y": 1}) == []
    with pytest.raises(Uncheckable) as refused:
        argument_errors(loop, {"x": 1})
    assert refused.value.reason == "too_complex"


SHAPES = {
    "properties": lambda s: {"type": "object", "properties": {"a": s}},
    "items": lambda s: {"type": "array", "items": s},
    "anyOf": lambda s: {"anyOf": [s]},
    "not": lambda s: {"not": {"not": s}},
    "if": lambda s: {"if": {"type": "object"}, "then": s},
}


@pytest.mark.parametrize("dialect", [None, DRAFT_2019, DRAFT_7])
@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_a_schema_as_deep_as_a_listed_tool_may_be_is_built_and_checked(dialect, shape):
    # A tool nests its inputSchema one level down: the schema may be MAX_DEPTH - 1 deep. Each shape
    # costs jsonschema up to 10 Python frames a level, in the worker thread that checks.
    schema: Any = {"type": "integer"}
    while not deeper_than(SHAPES[shape](schema), MAX_DEPTH - 1):
        schema = SHAPES[shape](schema)
    schema = {"$schema": dialect, **schema} if dialect else schema
    assert deeper_than({"name": "deepest", "inputSchema": schema}, MAX_DEPTH) is False
    assert isinstance(await check_arguments(schema, 5, timeout=30, validators=Validators()), list)
    assert isinstance(await check_arguments(schema, nested(20), timeout=30, validators=Validators()), list)


def test_a_cancelled_check_stops_at_its_next_keyword():
    branches = [{"type": "object", "required": [f"k{n}"]} for n in range(200)]
    schema = {"items": {"anyOf": branches}}
    rows = [{"k199": 1}] * 20_000  # about a minute of checking, every row valid
    check = Check(math.inf)
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(_errors(schema, rows, MAX_DEPTH, check, Validators()))
        except Uncheckable as exc:
            outcome.append(exc.reason)

    worker = threading.Thread(target=run)
    worker.start()
    check.cancel()
    worker.join(timeout=120)
    assert outcome == ["timeout"]


def test_depth_is_measured_without_recursion():
    assert deeper_than("x", 0) is False and deeper_than({}, 0) is True and deeper_than([], 1) is False
    assert deeper_than({"a": [1, {"b": {}}]}, 3) is True and deeper_than({"a": [1, {"b": 2}]}, 3) is False
    assert deeper_than(json.loads("[" * 9000 + "]" * 9000), 8999) is True
