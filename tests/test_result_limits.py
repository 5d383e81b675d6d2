"""A structured result's size bound (results.StructuredResult): never under what the answer takes."""

from __future__ import annotations

import json

import pytest

from toolsearch.server.response_size import ResponseSize
from toolsearch.service.results import StructuredResult, limit_result, structured_result

# What each count makes expensive: quotes, backslashes, controls, DEL, non-ASCII, astral, a surrogate.
HOSTILE = 'a"b\\c\x00\x1f\n\x7fé中😀\ud800 '
COUNTS = {
    "local": ResponseSize.local(),
    "lambda utf-8": ResponseSize.lambda_runtime("AWS_Lambda_python3.13"),
    "lambda ascii": ResponseSize.lambda_runtime("AWS_Lambda_python3.11"),
}


@pytest.mark.parametrize("count", COUNTS.values(), ids=list(COUNTS))
@pytest.mark.parametrize("text", ["plain words", HOSTILE, "😀" * 50, '"' * 50, "\x00" * 50])
def test_the_bound_is_never_under_the_size(count: ResponseSize, text: str) -> None:
    result = structured_result({"hits": [{"name": text, "description": text * 3}], "note": text})
    assert isinstance(result, StructuredResult)
    most = result.most_chars()
    assert most is not None
    assert count.of(result) <= most * 12


def test_a_result_that_fits_is_passed_on_unchanged_and_written_as_before() -> None:
    data = {"hits": [{"name": "jira_get_issue", "description": HOSTILE}]}
    result = structured_result(data)
    assert limit_result(result, 5_000_000, ResponseSize.local().of) is result
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    expected = {"content": [{"type": "text", "text": text}], "structuredContent": data, "isError": False}
    assert result == expected
    assert json.dumps(result) == json.dumps(dict(result))


def test_over_the_bound_the_size_is_measured_exactly() -> None:
    size = ResponseSize.local().of
    result = structured_result({"text": "x" * 10_000})
    exact = size(result)
    assert limit_result(result, exact, size) is result  # the bound says no, the exact count says yes
    cut = limit_result(result, exact - 1, size)
    assert "structuredContent" not in cut and cut["isError"] is True
    assert "it was cut" in cut["content"][-1]["text"]


def test_a_changed_result_is_measured_exactly() -> None:
    size = ResponseSize.local().of
    result = structured_result({"text": "x"})
    result["_meta"] = {"padding": "y" * 10_000}
    assert result.most_chars() is None
    assert limit_result(result, 5_000, size) is not result
