"""Log lines are constant sentences; their figures and names are structured fields (`ops/logs.py`).

A line's message says what happened; the tool, the outcome, the status, the milliseconds, the
counts and the sizes are `extra` fields, which the Powertools formatter prints as JSON keys (and
CloudWatch Logs Insights can filter and aggregate). The first test reads every logger call in the
package, so a formatted message cannot come back; the second reads the JSON lines of real requests.
"""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from fixtures.logs import LogCapture, capture_logs
from fixtures.mcp_wire import call
from toolsearch.app import build_proxy
from toolsearch.settings import Settings

PACKAGE = Path(__file__).resolve().parent.parent / "shared" / "toolsearch"
LEVELS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal"}

# What an `extra` key must not be: a LogRecord attribute (logging raises, or the field is lost) or a
# key the Powertools formatter writes itself (the field would overwrite it).
RESERVED = set(vars(logging.LogRecord("n", logging.INFO, "p", 1, "m", None, None))) | {
    "message",
    "asctime",
    "level",
    "location",
    "timestamp",
    "service",
    "sampling_rate",
    "xray_trace_id",
    "cold_start",
    "function_name",
    "function_memory_size",
    "function_arn",
    "function_request_id",
}


@dataclass(frozen=True)
class LogCall:
    where: str
    node: ast.Call
    message: ast.expr | None
    rest: list[ast.expr]  # positional arguments after the message: lazy %-formatting


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """Module-level `NAME = "text"`: a constant sentence a logger call may name."""
    found: dict[str, str] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant):
            for target in statement.targets:
                if isinstance(target, ast.Name) and isinstance(statement.value.value, str):
                    found[target.id] = statement.value.value
    return found


def _logger_names(tree: ast.Module) -> set[str]:
    """`logging` itself and every name bound to `logging.getLogger(...)` anywhere in the module."""
    names = {"logging"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            function = node.value.func
            if isinstance(function, ast.Attribute) and function.attr == "getLogger":
                names |= {ast.unparse(target) for target in node.targets}
    return names


def calls_in(tree: ast.Module, name: str) -> Iterator[LogCall]:
    """Every logger call of a module: `logger.info(...)`, `log.log(level, ...)`, `logging.warning(...)`."""
    loggers = _logger_names(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if ast.unparse(node.func.value) not in loggers:
            continue
        method = node.func.attr
        if method == "log":
            args = node.args[1:]
        elif method in LEVELS:
            args = node.args
        else:
            continue
        yield LogCall(f"{name}:{node.lineno}", node, args[0] if args else None, list(args[1:]))


def log_calls() -> Iterator[tuple[LogCall, dict[str, str]]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        strings = _module_strings(tree)
        for found in calls_in(tree, str(path.relative_to(PACKAGE.parent))):
            yield found, strings


def formatted(found: LogCall, strings: dict[str, str]) -> bool:
    return bool(found.rest) or _constant_sentences(found.message, strings) is None


def _constant_sentences(message: ast.expr | None, strings: dict[str, str]) -> list[str] | None:
    """The sentences a message can be, or None when it is built from values."""
    if isinstance(message, ast.Constant) and isinstance(message.value, str):
        return [message.value]
    if isinstance(message, ast.Name) and message.id in strings:
        return [strings[message.id]]
    if isinstance(message, ast.IfExp):  # one of two sentences, both written at the call site
        body, orelse = (
            _constant_sentences(message.body, strings),
            _constant_sentences(message.orelse, strings),
        )
        return body + orelse if body is not None and orelse is not None else None
    return None


def constant_messages() -> set[str]:
    return {
        sentence
        for found, strings in log_calls()
        for sentence in _constant_sentences(found.message, strings) or []
    }


def test_every_log_message_in_the_package_is_a_constant_sentence():
    calls = list(log_calls())
    assert len(calls) > 40, "the walk found too few logger calls: it would prove nothing"
    offending = [
        f"{found.where}: {ast.unparse(found.node)}" for found, strings in calls if formatted(found, strings)
    ]
    assert not offending, (
        "these log calls build their message from values (f-string, %, .format, arguments);"
        " pass the values as extra={...} fields and keep the message a constant sentence:\n"
        + "\n".join(offending)
    )


def test_no_log_field_overwrites_a_record_attribute_or_a_formatter_key():
    clashes = []
    for found, _ in log_calls():
        for keyword in found.node.keywords:
            if keyword.arg == "extra" and isinstance(keyword.value, ast.Dict):
                for key in keyword.value.keys:
                    if isinstance(key, ast.Constant) and key.value in RESERVED:
                        clashes.append(f"{found.where}: {key.value!r}")
    assert not clashes, "\n".join(clashes)


def test_the_walk_sees_a_formatted_message():
    """The check itself: each way of formatting a message is caught."""
    source = (
        "import logging\n"
        "log = logging.getLogger(__name__)\n"
        "log.info(f'listed {n} tools')\n"
        "log.info('listed %d tools', n)\n"
        "log.info('listed {} tools'.format(n))\n"
        "log.info('listed ' + str(n))\n"
        "log.log(20, 'listed %d' % n)\n"
        "log.info('listed tools', extra={'tools': n})\n"
    )
    tree = ast.parse(source)
    verdicts = [formatted(found, _module_strings(tree)) for found in calls_in(tree, "example.py")]
    assert verdicts == [True, True, True, True, True, False]


# -- the JSON lines, as the Powertools formatter writes them (Lambda's, locally too)


class OursOnly(LogCapture):
    """The proxy's own records (`toolsearch.*`), each as the Powertools formatter writes it."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("toolsearch"):
            super().emit(record)


@pytest.fixture
def json_lines():
    with capture_logs(OursOnly()) as handler:
        yield handler


async def test_a_json_log_line_carries_its_figures_as_fields(json_lines):
    proxy = build_proxy(Settings())
    transport = httpx.ASGITransport(app=proxy.app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://t", headers={"Authorization": "Bearer t"}
    ) as c:
        found = await c.post("/mcp", **call("search_tools", {"query": "calendar event"}))
        called = await c.post(
            "/mcp", **call("call_read_tool", {"name": "gcal_get_event", "arguments": {"event_id": "e1"}})
        )
    assert found.status_code == 200 and called.status_code == 200
    assert called.json()["result"].get("isError") is not True

    lines = [json.loads(line) for line in json_lines.lines]
    by_message: dict[str, list[dict]] = {}
    for line in lines:
        by_message.setdefault(line["message"], []).append(line)

    # Every message is one of the package's constant sentences: no figure inside it.
    assert set(by_message) <= constant_messages(), set(by_message) - constant_messages()

    (listed,) = by_message["upstream tools/list ok"]
    assert listed["tools"] > 0 and listed["dropped"] == 0 and listed["era"] in ("modern", "legacy")
    assert isinstance(listed["ms"], int | float)
    (loaded,) = by_message["catalog loaded"]
    assert loaded["tools"] == listed["tools"] and isinstance(loaded["ms"], int | float)
    (upstream_call,) = by_message["upstream tools/call"]
    assert upstream_call["tool"] == "gcal_get_event" and upstream_call["outcome"] == "ok"
    assert isinstance(upstream_call["ms"], int | float) and "progress_relayed" not in upstream_call
    # The same call, as the proxy saw it (service/upstream_calls.py): two lines for one call sent upstream.
    (tool_call,) = by_message["tool call"]
    assert tool_call["tool"] == "gcal_get_event" and tool_call["outcome"] == "ok"
    assert isinstance(tool_call["ms"], int | float) and tool_call["ms"] >= upstream_call["ms"] - 1
    # Never the query, nor the argument: the fields are names, outcomes and figures.
    assert "calendar event" not in json_lines.text() and '"e1"' not in json_lines.text()
