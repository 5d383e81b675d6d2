"""The bytes a response takes where they are counted, checked against the Lambda runtime's own serialiser.

awslambdaric (the runtime interface client of the Python managed runtimes) is a test
dependency for this: its `to_json` is what turns the handler's return value into the
invocation response that Lambda limits to 6 MB.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.responses import JSONResponse

from toolsearch.server.response_size import JsonAnswer, ResponseSize, body_text

RUNTIMES = ["AWS_Lambda_python3.13", "AWS_Lambda_python3.11", ""]

text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)


def runtime_bytes(value: Any, monkeypatch: pytest.MonkeyPatch, execution_env: str) -> int:
    """Bytes `value` adds to a response object once the runtime serialises it, body and all."""
    from awslambdaric.lambda_runtime_marshaller import to_json

    monkeypatch.setenv("AWS_EXECUTION_ENV", execution_env)
    body = JSONResponse(value).body.decode()
    envelope = {"statusCode": 200, "body": body, "isBase64Encoded": False}
    empty = {**envelope, "body": ""}
    return len(to_json(envelope).encode()) - len(to_json(empty).encode())


SAMPLES = [
    {"content": [{"type": "text", "text": 'say "hi" \\ C:\\path\\ "quoted"'}]},
    {"content": [{"type": "text", "text": "é ü ß 日本語 😀 \u2028 \x7f \x00 \n \t"}]},
    {"content": [{"type": "image", "data": "iVBORw0KGgoAAAANSUhEUgAA+/=", "mimeType": "image/png"}]},
    {"structuredContent": {"nested": {"q": '"' * 50, "b": "\\" * 50}}, "isError": False},
]


@pytest.mark.parametrize("execution_env", RUNTIMES)
@pytest.mark.parametrize("value", SAMPLES)
def test_counts_exactly_what_the_runtime_writes(monkeypatch, execution_env, value):
    assert ResponseSize.lambda_runtime(execution_env).of(value) == runtime_bytes(
        value, monkeypatch, execution_env
    )


@pytest.mark.parametrize("execution_env", RUNTIMES)
@settings(max_examples=150, deadline=None)
@given(value=json_values)
def test_counts_exactly_what_the_runtime_writes_for_any_json(execution_env, value):
    with pytest.MonkeyPatch.context() as monkeypatch:
        expected = runtime_bytes(value, monkeypatch, execution_env)
    assert ResponseSize.lambda_runtime(execution_env).of(value) == expected


@settings(max_examples=100, deadline=None)
@given(value=json_values)
def test_the_body_is_what_the_endpoint_sends_and_local_size_is_its_bytes(value):
    assert body_text(value).encode() == JSONResponse(value).body == JsonAnswer(value).body
    assert ResponseSize.local().of(value) == len(JSONResponse(value).body)


def test_the_lambda_limit_leaves_room_for_the_response_object_around_the_body():
    size = ResponseSize.lambda_runtime("AWS_Lambda_python3.13")
    assert size.limit is not None and 6_200_000 < size.limit < 6_291_456
    assert ResponseSize.local().limit is None


def test_a_lone_surrogate_is_written_as_a_replacement_of_the_same_size():
    value = {"text": "a\ud800b"}
    assert json.loads(JsonAnswer(value).body) == {"text": "a\ufffdb"}
    assert ResponseSize.local().of(value) == len(JsonAnswer(value).body)


@pytest.mark.parametrize("execution_env", RUNTIMES)
@settings(max_examples=60, deadline=None)
@given(messages=st.lists(st.text(max_size=60), min_size=1, max_size=5), token=st.text(max_size=20))
def test_a_progress_stream_counts_its_events_as_the_runtime_writes_them(execution_env, messages, token):
    import asyncio

    from awslambdaric.lambda_runtime_marshaller import to_json

    from toolsearch.server.streaming import EVENT_PREFIX, EVENT_SUFFIX, ProgressStream
    from toolsearch.service.progress import Progress

    async def stream_of() -> tuple[ProgressStream, bytes]:
        stream = ProgressStream(token, ResponseSize.lambda_runtime(execution_env))
        for step, message in enumerate(messages, 1):
            await stream.sink(Progress(step, None, message))
        return stream, b"".join(stream._pending)

    stream, events = asyncio.run(stream_of())
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("AWS_EXECUTION_ENV", execution_env)
        body = events.decode() + EVENT_PREFIX + EVENT_SUFFIX  # and the framing of the response's event
        written = len(to_json({"body": body}).encode()) - len(to_json({"body": ""}).encode())
    assert stream.room_taken == written


def _plain(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(text, json_values, max_size=4), json_values, st.integers() | text)
def test_a_structured_results_kept_json_is_written_as_encoding_it_would(data, meta, request_id):
    from toolsearch.service.results import kept_list, structured_result

    result = structured_result(data)
    result["_meta"] = {"kept": meta}  # a reply shaped for its era, after the result was made
    message = {"jsonrpc": "2.0", "id": request_id, "result": result}
    listing = {"jsonrpc": "2.0", "id": request_id, "result": {"tools": kept_list([data, meta]), "ttlMs": 1}}

    for answer in (message, listing):
        assert body_text(answer) == _plain(answer)
        assert JsonAnswer(answer).body == _plain(answer).encode()


@settings(max_examples=200, deadline=None)
@given(st.lists(json_values, max_size=4), st.integers() | text)
def test_a_text_block_written_from_its_kept_escaped_parts_is_what_encoding_it_would_write(parts, request_id):
    """A structured result's text given escaped in parts (as search_tools joins its hits'): the
    answer is the bytes of encoding it whole, lone surrogates and all."""
    from toolsearch.service.results import StructuredResult, compact_json, escaped

    parts = [*parts, '\ud800 "\\ \x1f š 💡']
    data = {"parts": parts}
    pieces = [compact_json(part) for part in parts]  # each part's JSON, then escaped apart
    text = '{"parts":[' + ",".join(pieces) + "]}"
    result = StructuredResult(data, text, escaped('{"parts":[') + ",".join(map(escaped, pieces)) + "]}")
    message = {"jsonrpc": "2.0", "id": request_id, "result": result}

    assert text == _plain(data) and result.text_json() == json.dumps(text, ensure_ascii=False)
    assert body_text(message) == _plain(message)


def test_a_kept_text_block_is_not_written_once_its_block_or_text_changed():
    from toolsearch.service.results import StructuredResult, escaped

    for change in ("text", "block", "another block"):
        result = StructuredResult({"a": 1}, '{"a":1}', escaped('{"a":1}'))
        if change == "text":
            result["content"][0]["text"] = "changed"
        elif change == "block":
            result["content"] = [{"type": "text", "text": "changed"}]
        else:
            result["content"].append({"type": "text", "text": "more"})
        message = {"jsonrpc": "2.0", "id": 1, "result": result}
        assert result.text_json() is None
        assert body_text(message) == _plain(message)


def test_the_kept_json_is_not_trusted_where_it_could_differ():
    from toolsearch.service.results import kept_list, structured_result

    hole = "\x00kept structuredContent\x00"  # where the kept JSON goes
    hole_as_id = {"jsonrpc": "2.0", "id": hole, "result": structured_result({"a": 1})}
    assert body_text(hole_as_id) == _plain(hole_as_id)  # the hole twice: encoded whole
    replaced = structured_result({"a": 1})
    replaced["structuredContent"] = {"b": 2}
    assert body_text({"jsonrpc": "2.0", "id": 1, "result": replaced}).count('"b":2') == 1
    tools = kept_list([{"name": "a"}])
    tools.append({"name": "b"})  # holds another item than its JSON: encoded as it is
    listing = {"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}
    assert body_text(listing) == _plain(listing)
    swapped = kept_list([{"name": "a"}])
    del swapped[0]  # the item freed: a new one may take its address, and must not pass for it
    swapped.append({"name": "b"})
    listing = {"jsonrpc": "2.0", "id": 1, "result": {"tools": swapped}}
    assert body_text(listing) == _plain(listing)
    with pytest.raises(ValueError):  # NaN is not JSON: refused as before
        JsonAnswer({"jsonrpc": "2.0", "id": 1, "result": structured_result({"x": float("nan")})})


@pytest.mark.parametrize("execution_env", RUNTIMES)
@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(text, json_values, max_size=3), min_size=0, max_size=3), st.integers() | text)
def test_a_fitted_results_bytes_when_shaped_are_known_exactly(execution_env, blocks, request_id):
    from toolsearch.server.endpoint import ERAS
    from toolsearch.service.results import ResultBudget

    size = ResponseSize.lambda_runtime(execution_env)
    for era in ERAS.values():
        fitted = ResultBudget(size.limit, size.of).fit({"content": blocks, "isError": False})
        shaped, known = size.shaped(era.reply, fitted)
        message = {"jsonrpc": "2.0", "id": request_id, "result": shaped}
        assert known is not None
        assert size.of({"jsonrpc": "2.0", "id": request_id, "result": {}}) - 2 + known == size.of(message)


def test_a_shaping_that_replaces_a_field_leaves_the_bytes_unknown():
    from toolsearch.server.endpoint import ERAS
    from toolsearch.service.results import ResultBudget

    size = ResponseSize.lambda_runtime("AWS_Lambda_python3.13")
    fitted = ResultBudget(size.limit, size.of).fit({"content": [], "_meta": {"upstream": 1}})
    assert size.shaped(ERAS[True].reply, fitted)[1] is None  # _meta merged with the server's identity
    assert ResponseSize.local().shaped(ERAS[True].reply, {"content": []})[1] is None  # nothing limits


def test_a_value_replaced_by_the_shaping_leaves_the_bytes_unknown():
    from toolsearch.service.results import ResultBudget

    size = ResponseSize.lambda_runtime("python3.13")

    def replacing(result: dict[str, Any]) -> dict[str, Any]:
        del result["content"]  # the old list freed: a new one may take its address
        result["content"] = [{"type": "text", "text": "longer than before " * 50}]
        return result

    for _ in range(20):
        fitted = ResultBudget(size.limit, size.of).fit({"content": [{"type": "text", "text": "short"}]})
        shaped, known = size.shaped(replacing, fitted)
        assert known is None or known >= size.of(shaped)
