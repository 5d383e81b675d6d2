"""Tool results the proxy composes itself: errors as data, and size limits.

An error goes back as a tool result with `isError: true`: its text says what
went wrong and how to fix it, in sentences (most clients show a failed call's
model only the text), and `structuredContent.error` holds the same as data
(kind, message, details) for programs; the output schemas of search_tools and
describe_tool declare that shape, so every result fits the schema its tool
declares (docs/clients.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

from toolsearch.mcp.protocol import text_content
from toolsearch.upstream.errors import UpstreamError
from toolsearch.validation.nesting import MAX_RELAYED_DEPTH, deeper_than

# The upstream's own error data, in the text, is cut here; structuredContent.error has all of it.
MAX_DATA_CHARS = 1_000


def error_result(kind: str, message: str, **details: Any) -> dict[str, Any]:
    error = {"kind": kind, "message": message, **{k: v for k, v in details.items() if v is not None}}
    return {
        "content": [text_content(error_text(error))],
        "structuredContent": {"error": error},
        "isError": True,
    }


def upstream_failure(exc: UpstreamError, **fields: Any) -> dict[str, Any]:
    """An upstream failure as a tool result: its kind, its message, `fields` (the tool's name), then
    its details. The one place an `UpstreamError` becomes a tool result; a refusal of the caller
    (401/403) never does (`callers/refusal.py`)."""
    return error_result(exc.kind, exc.message, **fields, **upstream_details(exc))


def upstream_details(exc: UpstreamError) -> dict[str, Any]:
    """An upstream failure's details for a tool result: status, code, data, retryAfterSeconds."""
    details = {k: v for k, v in exc.to_data().items() if k not in ("error", "message")}
    if deeper_than(details.get("data"), MAX_RELAYED_DEPTH):
        # An upstream's error data is passed on as it is, unless it could not be written back as JSON.
        details["data"] = f"(left out: nested more than {MAX_RELAYED_DEPTH} levels deep)"
    return details


def error_text(error: Mapping[str, Any]) -> str:
    """The error in words: its message, then each detail the message does not already say.

    The input schema stays in the text, after a label: a model that sees only the text (most clients
    show a failed call's text alone) needs it to fix the arguments.
    """
    message = str(error["message"]).strip()
    tool = error.get("tool")
    if isinstance(tool, str) and tool not in message:
        # An upstream's message (e.g. "the upstream did not answer within 5 s") does not name the tool.
        lowered = message[:1].lower() + message[1:] if message[1:2].islower() else message
        message = f"{tool} failed: {lowered}"
    message = _sentence(message)
    text = " ".join([message, *_details_in_words(error, message)])
    if "inputSchema" in error:
        text += "\nThe input schema the arguments must fit: " + compact_json(error["inputSchema"])
    return text


def _details_in_words(error: Mapping[str, Any], message: str) -> list[str]:
    said: list[str] = []
    problems = error.get("problems")
    if isinstance(problems, list) and not all(str(p) in message for p in problems):
        said.append("What does not fit: " + "; ".join(str(p) for p in problems) + ".")
    meant, read_only = error.get("didYouMean"), error.get("readOnly")
    if isinstance(meant, str) and meant not in message:
        said.append(f"Did you mean {meant}?")
    if isinstance(meant, str) and read_only is True:
        said.append(f"{meant} only reads: call it with call_read_tool.")
    elif isinstance(meant, str) and read_only is False:
        said.append(f"{meant} may change things: call it with call_write_tool, with the user's approval.")
    similar = error.get("similar")
    if isinstance(similar, list) and similar:
        said.append("Tools with similar names: " + ", ".join(str(name) for name in similar) + ".")
    status, code, retry = error.get("status"), error.get("code"), error.get("retryAfterSeconds")
    if status is not None and f"HTTP {status}" not in message:
        said.append(f"The upstream answered HTTP {status}.")
    if code is not None and str(code) not in message:
        said.append(f"Its JSON-RPC error code was {code}.")
    if isinstance(retry, int | float):
        said.append(f"Try again in {retry:g} s.")
    if "data" in error:
        data = compact_json(error["data"])
        cut = "…" if len(data) > MAX_DATA_CHARS else ""
        said.append(f"The upstream's error data: {data[:MAX_DATA_CHARS]}{cut}")
    return said


def _sentence(text: str) -> str:
    """`text` ending as a sentence; an upstream's message ("the upstream did not answer") starting as one."""
    if not text:
        return "The call failed."
    if text.startswith("the "):
        text = "T" + text[1:]
    return text if text[-1] in ".?!" else text + "."


def compact_json(value: Any) -> str:
    """The compact JSON the proxy writes results in (non-ASCII kept)."""
    return COMPACT.encode(value)


# json.dumps(value, ensure_ascii=False, separators=(",", ":")) as one encoder made once: dumps makes
# a new one for each call given options (a microsecond or two, a few times a request). An encoder
# holds only its options, so one serves every thread.
COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def holds_constant(text: str) -> bool:
    """Whether JSON text may hold NaN or Infinity, which an encoder refusing them raises on: found
    anywhere, even inside a string, only a sign that the value is to be encoded whole, to see."""
    return "NaN" in text or "Infinity" in text


def escaped(text: str) -> str:
    """`text` as it is written inside a JSON string by `compact_json`, less the quotes: the encoder's
    own escaping, which goes character by character, so the escaped parts of a text joined are the
    escaped text."""
    return encode_basestring(text)[1:-1]  # what json.dumps(ensure_ascii=False) escapes with


# The most bytes one character of an answer's compact JSON takes, in every count `limit_result` is
# given (response_size.py): 4 in UTF-8, 12 on a runtime writing an astral character as two \uXXXX.
_MOST_BYTES_PER_CHAR = 12
_MOST_CHARS_AROUND = 100  # the JSON around a structured result's text and its data


class StructuredResult(dict[str, Any]):
    """A structured result that keeps the JSON text of its data (the text block's, as written).

    Its size has a bound read from that text without serialising it again: a text block writes each
    character of it as at most 6, and structuredContent is the text itself. `limit_result` uses it.
    Given the text `escaped` too (joined from parts escaped once), the answer writes its text block
    from that rather than escaping the text again (`text_json`); given whether the text holds a
    constant (`holds_constant`, known of its parts), the answer need not look through it for one.
    """

    __slots__ = ("_block", "_constant", "_escaped", "data", "text")

    def __init__(
        self, data: dict[str, Any], text: str, escaped: str | None = None, constant: bool | None = None
    ) -> None:
        self._block = text_content(text)
        super().__init__(content=[self._block], structuredContent=data, isError=False)
        self.data, self.text, self._escaped, self._constant = data, text, escaped, constant

    def holds_constant(self) -> bool:
        """`holds_constant` of its text, found once."""
        if self._constant is None:
            self._constant = holds_constant(self.text)
        return self._constant

    def data_text(self) -> str | None:
        """The compact JSON of its structuredContent, kept (None once that is another object)."""
        return self.text if self.get("structuredContent") is self.data else None

    def most_chars(self) -> int | None:
        """At most how many characters its compact JSON takes; None once it no longer holds just that."""
        content = self.get("content")
        if len(self) != 3 or not isinstance(content, list) or len(content) != 1:
            return None
        if content[0].get("text") is not self.text or len(content[0]) != 2:
            return None
        return 7 * len(self.text) + _MOST_CHARS_AROUND

    def text_json(self) -> str | None:
        """The JSON string of its text block's text, kept; None when not given, or once the block is
        another object or its text another string."""
        content = self.get("content")
        if self._escaped is None or not isinstance(content, list) or len(content) != 1:
            return None
        if content[0] is not self._block or self._block.get("text") is not self.text:
            return None
        return f'"{self._escaped}"'


class KeptList(list[Any]):
    """A list that keeps its compact JSON text (the five tools' definitions, the same every tools/list)
    and whether that holds a constant (`holds_constant`), given or found once."""

    __slots__ = ("_items", "constant", "text")

    def __init__(self, items: list[Any], text: str, constant: bool | None = None) -> None:
        super().__init__(items)
        self._items, self.text = tuple(items), text  # the items themselves: an id alone can be reused
        self.constant = holds_constant(text) if constant is None else constant

    def kept_text(self) -> str | None:
        """Its JSON, kept; None once it holds other items than it was made with."""
        same = len(self) == len(self._items) and all(a is b for a, b in zip(self, self._items, strict=True))
        return self.text if same else None


def kept_list(items: list[Any]) -> KeptList:
    return KeptList(items, compact_json(items))


def structured_result(data: dict[str, Any]) -> dict[str, Any]:
    return StructuredResult(data, compact_json(data))


def json_size(value: Any) -> int:
    return len(COMPACT.encode(value).encode())


class Fitted(dict[str, Any]):
    """A tool result a `ResultBudget` held to its bytes, as it is (a copy of its top level) or cut.

    `measured` is the bytes it took as `size` counts them (at most: a batch's combined answer is
    given the sum of its parts' figures and its labels, `batch_bound`), or None when that is not
    known (a cut result: its kept blocks are measured, its note and `_meta` are not); `cut` says
    whether it was cut. A later budget of the same count trusts `bound()` instead of serialising it
    again.
    """

    __slots__ = ("_shape", "cut", "measured", "size")

    def __init__(
        self, result: dict[str, Any], measured: int | None, size: Callable[[Any], int], cut: bool
    ) -> None:
        super().__init__(result)
        self.measured, self.size, self.cut = measured, size, cut
        self._shape = tuple(self.items())  # the values themselves: a replaced one's id could be reused

    def bound(self) -> int | None:
        """Its measured bytes while it holds what was measured (its keys and their values, as they
        were: a reply shaped for its era adds fields in place); None once changed."""
        return self.measured if same_items(tuple(self.items()), self._shape) else None


def same_items(now: Sequence[tuple[str, Any]], then: Sequence[tuple[str, Any]]) -> bool:
    """Whether a dict's items are still those it had: the same keys, in order, and the same objects."""
    return len(now) == len(then) and all(k == j and v is w for (k, v), (j, w) in zip(now, then, strict=True))


@dataclass(frozen=True, slots=True)
class ResultBudget:
    """How many bytes a tool result may take in the answer, as `size` counts them (server/response_size.py).

    Decided once for an answer: the proxy's `max_result_bytes` for one of the five tools' answers,
    a `share` of it for each call of a batch, what the response has room for on Lambda. `fit` is the
    one function that holds a result to a budget; a result some budget of the same count already
    measured, or a structured result whose bound says it fits, is passed on without being measured.
    """

    max_bytes: int
    size: Callable[[Any], int] = json_size

    def share(self, parts: int, beside: int) -> ResultBudget:
        """The budget of each of `parts` results of one answer, each beside a line of `beside` bytes."""
        count = max(1, parts)
        return ResultBudget(max(1, (self.max_bytes - beside * count) // count), self.size)

    def bound(self, result: dict[str, Any]) -> int | None:
        """At most how many bytes `result` takes, when that is known without serialising it."""
        if isinstance(result, Fitted):
            return result.bound() if result.size == self.size else None
        if isinstance(result, StructuredResult):
            most = result.most_chars()
            return None if most is None else most * _MOST_BYTES_PER_CHAR
        return None

    def fits(self, result: dict[str, Any]) -> bool:
        """Whether `result` is known to fit without being measured."""
        bound = self.bound(result)
        return bound is not None and bound <= self.max_bytes

    def fit(self, result: dict[str, Any]) -> dict[str, Any]:
        """`result` within the budget: as it is when it fits, else cut with a note (`limit_result`).

        What it returns is marked (`Fitted`), so the next budget need not measure it again; a
        structured result stays itself (its own bound is cheaper to read than a copy).
        """
        if self.fits(result):
            return result
        total = self.size(result)
        if total <= self.max_bytes:
            if isinstance(result, StructuredResult):
                return result
            return Fitted(result, total, self.size, was_cut(result))
        return Fitted(_cut_result(result, total, self.max_bytes, self.size), None, self.size, True)


def batch_bound(budget: ResultBudget, labels: list[dict[str, Any]], parts: list[list[dict[str, Any]]]) -> int:
    """At most how many bytes a batch's combined answer takes (`{"content": [...], "isError": ...}`),
    as `budget` counts them, without serialising it: the empty answer, each label block and the
    comma before it, and each part, a call's result, by what its budget knew of it (the whole
    result's bytes hold its blocks and a comma before each) or, unknown, its blocks measured."""
    total = budget.size({"content": [], "isError": False})  # "false": never shorter than "true"
    for label in labels:
        total += budget.size(label) + 1
    for part in parts:
        total += part_bound(budget, part)
    return total


def part_bound(budget: ResultBudget, part: Any) -> int:
    known = budget.bound(part) if isinstance(part, dict) else None
    return known if known is not None else budget.size(part)


def was_cut(result: dict[str, Any]) -> bool:
    """Whether a budget cut `result` (`ResultBudget.fit`), this one or one before it."""
    return isinstance(result, Fitted) and result.cut


def limit_result(
    result: dict[str, Any], max_bytes: int, size: Callable[[Any], int] = json_size
) -> dict[str, Any]:
    """The upstream's result unchanged when it fits; otherwise cut, with a note saying so.

    A cut result has no structuredContent, so one that had it is marked isError: a client that checks
    the tool's outputSchema refuses a success without it, which would hide the note.
    `size` counts bytes as the answer carries them: the JSON body locally, the runtime's
    serialisation on Lambda (server/response_size.py), whose response holds at most 6 MB; it counts at
    most 12 bytes per character of the compact JSON, so a structured result far under the limit is
    passed on without being serialised to be measured. (`ResultBudget.fit` is the same cut, marked.)
    """
    if ResultBudget(max_bytes, size).fits(result):  # most answers of the five: far under the limit
        return result
    total = size(result)
    if total <= max_bytes:
        return result
    return _cut_result(result, total, max_bytes, size)


def _cut_result(
    result: dict[str, Any], total: int, max_bytes: int, size: Callable[[Any], int]
) -> dict[str, Any]:
    """`result`, of `total` bytes, cut to `max_bytes` with a note saying so."""
    budget = max(1_000, max_bytes - 2_000)
    kept: list[dict[str, Any]] = []
    used = 0
    for block in result.get("content") or []:
        block_size = size(block)
        if used + block_size <= budget:
            kept.append(block)
            used += block_size
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            room = max(0, budget - used - 200)
            kept.append({**block, "text": _cut(block, room, size)})
        break
    note = (
        f"[The result was {total:,} bytes, more than the {max_bytes:,} the proxy passes on; it was cut."
        " Ask for less, e.g. with a filter or a smaller page.]"
    )
    kept.append(text_content(note))
    limited = {
        "content": kept,
        "isError": bool(result.get("isError", False)) or "structuredContent" in result,
    }
    for key in ("resultType", "_meta"):
        if key in result:
            limited[key] = result[key]
    return limited


def _cut(block: dict[str, Any], room: int, size: Callable[[Any], int]) -> str:
    """The longest start of a text block whose block fits in `room` bytes, as `size` counts them.

    Characters cost 1 to 12 bytes each depending on the count, so the cut is found by shrinking in
    proportion to the overshoot; each step is shorter than the last.
    """
    text: str = block["text"]
    length = len(text)
    while length > 0:
        cost = size({**block, "text": text[:length]})
        if cost <= room:
            return text[:length]
        length = min(length - 1, length * room // cost)
    return ""
