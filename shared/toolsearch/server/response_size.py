"""How many bytes an answer takes where its size is limited, and the limit.

A local server sends the JSON body as it is: its size is its UTF-8 bytes. On
Lambda the body is not what is counted: the handler returns it as a string
inside the response object, and the runtime serialises that object as JSON
again, so every quote and backslash in the body takes two bytes (a quote inside
a string of the result: four), and the invocation response may hold at most
6 MB (6,291,456 bytes) of that. A body well under 6 MB can therefore become a
response Lambda refuses, which the caller sees as a bare 502 (measured cases:
docs/deploy.md, "6 MB of response").

The runtime of Python 3.12 and later (awslambdaric) writes non-ASCII characters
as they are (UTF-8); older ones wrote `\\uXXXX`. `ResponseSize.lambda_runtime`
counts what the runtime in use writes, exactly, without encoding twice.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse

from toolsearch.service.results import COMPACT, KeptList, ResultBudget, StructuredResult, same_items

LAMBDA_RESPONSE_BYTES = 6_291_456  # a synchronous invocation's response, serialised
# Room for what surrounds the body in the response object: status, headers, flags.
LAMBDA_ENVELOPE_BYTES = 8_192
# Runtimes whose serialiser keeps non-ASCII characters as UTF-8 (ensure_ascii=False).
_UTF8_RUNTIMES = ("python3.12", "python3.13", "python3.14", "python3.15")


def body_text(value: Any, allow_nan: bool = True) -> str:
    """The JSON text of a response body, as the endpoint writes it (compact, non-ASCII kept).

    A result's parts that keep their JSON (a structured result's structuredContent, the five tools'
    definitions in tools/list) are written in as that text, not encoded a second time.
    """
    result = value.get("result") if type(value) is dict else None
    if isinstance(result, dict) and (kept := _kept_parts(result)):
        text = _with_kept_json(value, result, kept, allow_nan)
        if text is not None:
            return text
    return (COMPACT if allow_nan else _COMPACT_NO_NAN).encode(value)


# As json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")), made once (COMPACT).
_COMPACT_NO_NAN = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _kept_parts(result: dict[str, Any]) -> dict[str, tuple[Any, str, bool]]:
    """By key of the result: its value with a hole where kept JSON goes, that JSON, and whether that
    may hold a constant (`holds_constant`: a text block's text, a JSON string, holds none)."""
    kept: dict[str, tuple[Any, str, bool]] = {}
    if isinstance(result, StructuredResult):
        if (text := result.data_text()) is not None:
            kept["structuredContent"] = (_hole("structuredContent"), text, result.holds_constant())
        if (written := result.text_json()) is not None:  # the block as it is, its text the hole
            kept["content"] = ([{**result["content"][0], "text": _hole("content")}], written, False)
    for key, value in result.items():
        if isinstance(value, KeptList) and (text := value.kept_text()) is not None:
            kept[key] = (_hole(key), text, value.constant)
    return kept


def _hole(key: str) -> str:
    return f"\x00kept {key}\x00"


@functools.lru_cache(maxsize=64)
def _written_hole(key: str) -> str:
    return json.dumps(_hole(key))


def _with_kept_json(
    message: dict[str, Any], result: dict[str, Any], kept: dict[str, tuple[Any, str, bool]], allow_nan: bool
) -> str | None:
    """The message encoded with a hole where each kept part goes, then the parts written in. A hole
    is a string JSON writes only escaped; found exactly once, it is the one put there (found again
    anywhere, an id say, the message is encoded whole instead, as is one a constant JSON lacks
    could be in: encoded whole, it fails as it always did)."""
    if not allow_nan and any(constant for _, _, constant in kept.values()):
        return None
    holed = {**message, "result": {**result, **{key: value for key, (value, _, _) in kept.items()}}}
    text = (COMPACT if allow_nan else _COMPACT_NO_NAN).encode(holed)
    spots = []
    for key, (_, part, _) in kept.items():
        written = _written_hole(key)
        at = text.find(written)
        if at < 0 or text.find(written, at + 1) >= 0:
            return None
        spots.append((at, at + len(written), part))
    parts, done = [], 0
    for start, end, part in sorted(spots):
        parts += [text[done:start], part]
        done = end
    parts.append(text[done:])
    return "".join(parts)


class JsonAnswer(JSONResponse):
    """A JSON response that can always be written: the text of `body_text`, as UTF-8.

    A string from the upstream may hold a lone surrogate (`"\\ud800"` is valid JSON but not
    Unicode), which UTF-8 cannot carry; it becomes U+FFFD, so the rest of the answer still gets
    through instead of a 500. (Same byte count: the size measures stay exact.)
    """

    def render(self, content: Any) -> bytes:
        text = body_text(content, allow_nan=False)
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


@dataclass(frozen=True)
class ResponseSize:
    """Counts the bytes a value takes in the answer; `limit` is the most one answer may take."""

    limit: int | None = None  # None: nothing limits a whole answer (a local server)
    serialised_again: bool = False  # the body travels as a JSON string inside another JSON object
    ascii_only: bool = False  # ...whose serialiser writes every non-ASCII character as \uXXXX

    @classmethod
    def local(cls) -> ResponseSize:
        return cls()

    @classmethod
    def lambda_runtime(cls, execution_env: str | None = None) -> ResponseSize:
        """What the Lambda runtime named by AWS_EXECUTION_ENV counts, and its response limit."""
        env = os.environ.get("AWS_EXECUTION_ENV", "") if execution_env is None else execution_env
        utf8 = any(env == f"AWS_Lambda_{runtime}" for runtime in _UTF8_RUNTIMES)
        return cls(
            limit=LAMBDA_RESPONSE_BYTES - LAMBDA_ENVELOPE_BYTES, serialised_again=True, ascii_only=not utf8
        )

    def of_text(self, text: str) -> int:
        """Bytes `text` adds when written into the body as it is (an SSE event's framing), not as JSON."""
        if not self.serialised_again:
            return len(text.encode("utf-8", "surrogatepass"))
        return len(json.dumps(text, ensure_ascii=self.ascii_only)) - 2  # escaped as the runtime does

    def of(self, value: Any) -> int:
        """Bytes `value` adds to the answer when written into the body."""
        text = body_text(value)
        if not self.serialised_again:
            return len(text.encode("utf-8", "surrogatepass"))
        # The body has no raw control characters (JSON escaped them); quotes and backslashes get one more.
        escaped = text.count('"') + text.count("\\")
        if not self.ascii_only:
            return len(text.encode("utf-8", "surrogatepass")) + escaped
        # Every character outside space..~ becomes \uXXXX (6 bytes), or a surrogate pair of them (12).
        outside = len(text) - len(text.encode("ascii", "ignore")) + text.count("\x7f")
        astral = len(text.encode("utf-16-le", "surrogatepass")) // 2 - len(text)
        return len(text) + escaped + 5 * outside + 6 * astral

    def shaped(
        self, reply: Callable[[dict[str, Any]], dict[str, Any]], result: dict[str, Any]
    ) -> tuple[dict[str, Any], int | None]:
        """`reply(result)` (a result shaped as its era carries it), and at most how many bytes that
        takes in the answer when it is known without serialising it, else None. Known: what a
        budget of this count knew of the result (`ResultBudget.bound`: measured, or a structured
        result's bound), read before the shaping, plus the bytes of the fields the shaping added
        after the result's own, counted exactly. A field replaced or dropped leaves it unknown."""
        known = None if self.limit is None else ResultBudget(self.limit, self.of).bound(result)
        if known is None:
            return reply(result), None
        before = list(result.items())  # the values themselves: a replaced one's id could be reused
        shaped = reply(result)  # in place (2026-07-28) or a copy (handshake)
        after = list(shaped.items())
        if not same_items(after[: len(before)], before):
            return shaped, None
        added = dict(after[len(before) :])
        if not added:
            return shaped, known
        # The added fields' JSON is a dict of them less its braces, after a comma if the result had
        # fields of its own: a brace and a comma take one byte in every count.
        return shaped, known + self.of(added) - 2 + (1 if before else 0)
