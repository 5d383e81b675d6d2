"""`surely_fits` never says yes where the validator would find something wrong.

Schemas built from the keywords it reads (and some it does not), instances of every JSON type:
whenever it says the arguments fit, jsonschema's 2020-12 validator agrees. It does say so for
the five tools' usual arguments, so their checks skip the validator.
"""

from __future__ import annotations

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolsearch.service.tooldefs import proxy_tools
from toolsearch.validation.arguments import Validators, argument_errors
from toolsearch.validation.quick import MAX_NODES, surely_fits

NAMES = st.sampled_from(["a", "b", "query", "limit"])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-5, 5, allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=12,
)
TYPES = st.sampled_from(["object", "array", "string", "boolean", "null", "number", "integer"])
KEYWORD_VALUES = {
    "type": TYPES | st.lists(TYPES, min_size=1, max_size=2, unique=True),
    "minLength": st.integers(0, 3),
    "maxLength": st.integers(0, 3),
    "minItems": st.integers(0, 2),
    "maxItems": st.integers(0, 2),
    "minimum": st.integers(-3, 3) | st.floats(-3, 3),
    "maximum": st.integers(-3, 3) | st.floats(-3, 3),
    "required": st.lists(NAMES, max_size=2, unique=True),
    "description": st.text(max_size=3),
    "format": st.sampled_from(["date", "email"]),
    "enum": st.lists(JSON, min_size=1, max_size=2),
    "additionalProperties": st.booleans(),
}


def _schemas() -> st.SearchStrategy:
    plain = st.fixed_dictionaries({}, optional=KEYWORD_VALUES)
    return st.recursive(
        plain | st.booleans(),
        lambda inner: st.builds(
            lambda base, properties, items: {
                **base,
                **({"properties": properties} if properties is not None else {}),
                **({"items": items} if items is not None else {}),
            },
            plain,
            st.none() | st.dictionaries(NAMES, inner, max_size=3),
            st.none() | inner,
        ),
        max_leaves=6,
    )


@settings(max_examples=1_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_schemas(), JSON)
def test_a_yes_is_the_validators_yes(schema, instance):
    if surely_fits(schema, instance):
        assert jsonschema.Draft202012Validator(schema).is_valid(instance)


def test_the_five_tools_usual_arguments_surely_fit():
    schemas = {tool["name"]: tool["inputSchema"] for tool in proxy_tools(10, 500)}
    usual = {
        "search_tools": [
            {"query": "read a jira issue"},
            {"queries": ["a", "b"], "limit": 3, "schemas": False},
        ],
        "describe_tool": [{"names": ["jira_get_issue"]}],
        "call_read_tool": [{"name": "jira_get_issue", "arguments": {"issue_key": "WEB-42", "deep": [{}]}}],
        "call_read_tools": [{"calls": [{"name": "a", "arguments": {}}, {"name": "b"}]}],
        "call_write_tool": [{"name": "jira_create_issue", "arguments": {"summary": "x"}}],
    }
    for name, cases in usual.items():
        for arguments in cases:
            assert surely_fits(schemas[name], arguments), (name, arguments)
            assert argument_errors(schemas[name], arguments, validators=Validators()) == []


def test_what_it_does_not_know_is_left_to_the_validator():
    assert not surely_fits({"type": "integer"}, 1.0)  # an integer to JSON Schema, not sure here
    assert not surely_fits({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"}, {})
    assert not surely_fits({"type": "object", "additionalProperties": False}, {})
    walked = {"type": "array", "items": {"type": "integer"}}  # each item is one more value walked
    assert not surely_fits(walked, list(range(MAX_NODES)))  # past its bound: the validator's
    assert surely_fits(walked, list(range(MAX_NODES - 1)))
    errors = argument_errors({"type": "integer", "maximum": 3}, 5, validators=Validators())
    assert errors == ["arguments: 5 is greater than the maximum of 3"]
