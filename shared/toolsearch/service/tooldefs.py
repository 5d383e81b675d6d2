"""The five tools the model sees: names, descriptions, input and output schemas, annotations.

The descriptions say which sibling to use when, what happens to unknown names,
that results come live from the upstream, and that writes are approved one by
one. What that costs in tokens: docs/benchmarks.md ("Tokens: what a client loads").
"""

from __future__ import annotations

from typing import Any

SEARCH_TOOLS = "search_tools"
DESCRIBE_TOOL = "describe_tool"
CALL_READ_TOOL = "call_read_tool"
CALL_READ_TOOLS = "call_read_tools"
CALL_WRITE_TOOL = "call_write_tool"

MAX_QUERIES = 5
MAX_LIMIT = 25
DEFAULT_LIMIT = 8
MAX_DESCRIBE = 10
# MCP says tool names SHOULD be at most 128 characters; twice that leaves room for upstreams that stray.
MAX_NAME_CHARS = 256

_NAME = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_NAME_CHARS,
    "description": "The tool's name, exactly as search_tools gave it.",
}
_ARGUMENTS = {
    "type": "object",
    "description": "The tool's arguments, shaped by its input schema; omit for a tool that takes none.",
}

_HIT_REF = {"$ref": "#/$defs/hit"}  # defined once in search_tools' output schema
# Only when it fires (finding.WEAK_NOTE says what to do): absent, it costs no tokens.
_MATCH = {
    "type": "string",
    "enum": ["weak"],
    "description": "Present when no result shares a word with the query or is close in meaning.",
}
# A failed call's structuredContent (isError: true). Declared, so that every result fits the output
# schema: clients that check it (the Inspector does, on errors too) then show the message.
_ERROR = {
    "type": "object",
    "description": "Instead of the results, when the call failed (isError).",
    "properties": {"kind": {"type": "string"}, "message": {"type": "string"}},
    "required": ["kind", "message"],
}
_HIT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "description": {
            "type": "string",
            "description": "The first sentence or so of the tool's description.",
        },
        "readOnly": {
            "type": "boolean",
            "description": "True: call with call_read_tool(s). False: call_write_tool.",
        },
        "inputSchema": {"type": "object", "description": "Present for the best few matches."},
    },
    "required": ["name", "description", "readOnly"],
}


def _success_or_error(required: str) -> dict[str, Any]:
    """Results carry `required`; a failed call carries `error` instead."""
    return {"anyOf": [{"required": [required]}, {"required": ["error"]}]}


def _search_tools(max_query_chars: int) -> dict[str, Any]:
    # No maxLength: a longer query is searched on its first max_query_chars characters, and the
    # answer says so (`note`), rather than refused; the body limit bounds what a request can carry.
    query = {"type": "string", "minLength": 1}
    return {
        "name": SEARCH_TOOLS,
        "title": "Search tools",
        "description": (
            "Find the tools that can do what you describe, among all the tools you may use here (only"
            " these five are loaded; the rest are found with this). Returns matches best first, each with"
            " its name, a short description and readOnly, plus the input schemas of the best few, so a"
            " call can follow at once; get any other's schema with describe_tool. Use queries instead of"
            " query to look for several things in one call (say, a tool for the task and one to look up a"
            " value the user did not give): each query gets its own result list, in the order asked. No"
            " match is not an error: rephrase, or search for a broader task."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {
                    **query,
                    # Naming the service the user names, and keeping their words, was chosen on the public
                    # benchmark's dev requests (tools/searchbench/README.md, "What the query's description
                    # makes a model write").
                    "description": "What you want to do, in any language: the action and what it acts on,"
                    " keeping the user's own key words and the app, service or product they name, if any"
                    " (say, 'github create issue' or 'weather forecast for a city'); a few words do best"
                    f" (past {max_query_chars} characters, only the first {max_query_chars} are searched).",
                },
                "queries": {
                    "type": "array",
                    "items": query,
                    "minItems": 1,
                    "maxItems": MAX_QUERIES,
                    "description": f"Instead of query, 1 to {MAX_QUERIES} needs, each written as query says,"
                    " each with its own results.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "default": DEFAULT_LIMIT,
                    "description": f"Matches per query, 1 to {MAX_LIMIT}; {DEFAULT_LIMIT} when omitted.",
                },
                "schemas": {
                    "type": "boolean",
                    "default": True,
                    "description": "Include the input schemas of the best matches; true when omitted.",
                },
            },
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "tools": {
                    "type": "array",
                    "items": _HIT_REF,
                    "description": "With query: its matches, best first.",
                },
                "results": {
                    "type": "array",
                    "description": "With queries: one entry per query, in the order asked.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "query": {"type": "string"},
                            "tools": {"type": "array", "items": _HIT_REF},
                            "match": _MATCH,
                            "note": {"type": "string", "description": "What to do about a weak match."},
                        },
                        "required": ["query", "tools"],
                    },
                },
                "total": {"type": "integer", "description": "How many tools the catalog holds in all."},
                "match": _MATCH,
                "note": {
                    "type": "string",
                    "description": "Which queries were cut, when any was; what to do about a weak match.",
                },
                "error": _ERROR,
            },
            **_success_or_error("total"),
            "$defs": {"hit": _HIT},
        },
        "annotations": {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    }


def _describe_tool() -> dict[str, Any]:
    return {
        "name": DESCRIBE_TOOL,
        "title": "Describe tools",
        "description": (
            f"Return the full description, input schema and readOnly flag of up to {MAX_DESCRIBE} tools"
            " found with search_tools, to call them correctly; it runs nothing. A name no tool has is"
            " listed under unknown, with the closest names under similar."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "names": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1, "maxLength": MAX_NAME_CHARS},
                    "minItems": 1,
                    "maxItems": MAX_DESCRIBE,
                    "description": f"Tool names, as search_tools gave them; 1 to {MAX_DESCRIBE}.",
                }
            },
            "required": ["names"],
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "tools": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "title": {"type": "string"},
                            "description": {"type": "string"},
                            "readOnly": {"type": "boolean"},
                            "inputSchema": {"type": "object"},
                            "outputSchema": {"type": "object"},
                        },
                        "required": ["name", "description", "readOnly", "inputSchema"],
                    },
                },
                "unknown": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Names no tool has.",
                },
                "similar": {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": {"type": "string"}},
                    "description": "For each unknown name, the tools closest to it.",
                },
                "error": _ERROR,
            },
            **_success_or_error("tools"),
        },
        "annotations": {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    }


def _call_read_tool() -> dict[str, Any]:
    return {
        "name": CALL_READ_TOOL,
        "title": "Call a read-only tool",
        "description": (
            "Call one tool that only reads (readOnly: true in search_tools or describe_tool), with arguments"
            " that fit its input schema. Returns the tool's own result, live, so a repeat may differ. If the"
            " arguments do not fit, nothing is called and you get what is wrong and the schema, to fix and"
            " retry. Tools that may change anything are refused: use call_write_tool. For several reads at"
            " once, use call_read_tools."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {"name": _NAME, "arguments": _ARGUMENTS},
            "required": ["name"],
        },
        "annotations": {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": True,
        },
    }


def _call_read_tools(max_calls: int) -> dict[str, Any]:
    return {
        "name": CALL_READ_TOOLS,
        "title": "Call read-only tools in parallel",
        "description": (
            f"Call up to {max_calls} tools that only read (readOnly: true) at once, in parallel; each entry"
            " of calls is a name and arguments, as call_read_tool takes them. Returns one result per call,"
            " in order, each labelled with its number, its tool and whether it failed; a call that fails"
            " or is refused does not stop the others. Tools that may change anything are refused. For a"
            " single call, use call_read_tool."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "calls": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": max_calls,
                    "description": f"1 to {max_calls} calls, each a tool's name and its arguments.",
                    "items": {
                        "type": "object",
                        "properties": {"name": _NAME, "arguments": _ARGUMENTS},
                        "required": ["name"],
                    },
                }
            },
            "required": ["calls"],
        },
        "annotations": {
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": True,
        },
    }


def _call_write_tool() -> dict[str, Any]:
    return {
        "name": CALL_WRITE_TOOL,
        "title": "Call a tool that changes things",
        "description": (
            "Call one tool that may create, change or delete something (readOnly: false in search_tools or"
            " describe_tool), with arguments that fit its input schema. It acts on real systems, so confirm"
            " the user wants the change; calls are never batched, so each can be approved on its own."
            " Returns the tool's own result. If the arguments do not fit, nothing is called and you get what"
            " is wrong and the schema. For tools that only read, use call_read_tool."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {"name": _NAME, "arguments": _ARGUMENTS},
            "required": ["name"],
        },
        "annotations": {
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": False,
            "openWorldHint": True,
        },
    }


def proxy_tools(max_batch_calls: int, max_query_chars: int) -> list[dict[str, Any]]:
    """The five tools, in a fixed order (call_read_tools left out when batches are off)."""
    tools = [_search_tools(max_query_chars), _describe_tool(), _call_read_tool()]
    if max_batch_calls > 0:
        tools.append(_call_read_tools(max_batch_calls))
    tools.append(_call_write_tool())
    return tools


GUIDANCE = (
    "This server gives access to many tools through five. Find tools with search_tools (it returns the"
    " input schemas of the best matches), then call them: call_read_tool or call_read_tools for tools"
    " marked readOnly, call_write_tool for the rest. Use describe_tool for the schema of a tool found"
    " without one."
)
