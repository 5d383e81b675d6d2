"""An upstream MCP server with the tools the conformance suite's tools-call scenarios call.

The proxy itself shows only its five tools, so the suite's `test_*` tools are unknown to it.
Put this server behind the proxy and pin these tools (`--pinned-tools`), and those scenarios
then measure what the proxy adds on the way: whether content, errors and schemas arrive intact.

Run: .venv/bin/python scripts/conformance_upstream.py PORT  (binds 127.0.0.1 only; official SDK)
"""

from __future__ import annotations

import asyncio
import base64
import sys
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError

# A 1x1 PNG and a tiny WAV: the scenarios check type and mimeType, not the pixels or samples.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c63f8cfc0f01f0005000201ff0bbd1d"
        "0d0000000049454e44ae426082"
    )
).decode()
WAV = base64.b64encode(
    b"RIFF" + (36 + 2).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
    + bytes.fromhex("01000100401f0000803e00000200100064617461") + (2).to_bytes(4, "little") + b"\x00\x00"
).decode()  # fmt: skip

JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

NO_ARGUMENTS = {"type": "object", "properties": {}}
TOOLS: dict[str, dict[str, Any]] = {
    "test_simple_text": {"description": "Returns one text block.", "inputSchema": NO_ARGUMENTS},
    "test_image_content": {"description": "Returns a PNG image.", "inputSchema": NO_ARGUMENTS},
    "test_audio_content": {"description": "Returns a WAV clip.", "inputSchema": NO_ARGUMENTS},
    "test_embedded_resource": {"description": "Returns an embedded resource.", "inputSchema": NO_ARGUMENTS},
    "test_multiple_content_types": {
        "description": "Returns text, an image and a resource.",
        "inputSchema": NO_ARGUMENTS,
    },
    "test_error_handling": {"description": "Always fails as a tool error.", "inputSchema": NO_ARGUMENTS},
    "test_tool_with_progress": {"description": "Reports progress three times.", "inputSchema": NO_ARGUMENTS},
    "test_header_param": {
        "description": "Echoes a region the client mirrors into Mcp-Param-Region.",
        "inputSchema": {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            "required": ["region"],
        },
    },
    "json_schema_2020_12_tool": {
        "description": "Tool with JSON Schema 2020-12 features",
        "inputSchema": JSON_SCHEMA_2020_12,
    },
}


def _text(text: str) -> types.TextContent:
    return types.TextContent(type="text", text=text)


def _resource(uri: str, mime_type: str, text: str) -> types.EmbeddedResource:
    contents = types.TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    return types.EmbeddedResource(type="resource", resource=contents)


async def _call(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    name = params.name
    if name == "test_simple_text":
        return types.CallToolResult(content=[_text("This is a simple text response for testing.")])
    if name == "test_image_content":
        return types.CallToolResult(
            content=[types.ImageContent(type="image", data=PNG, mime_type="image/png")]
        )
    if name == "test_audio_content":
        return types.CallToolResult(
            content=[types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")]
        )
    if name == "test_embedded_resource":
        resource = _resource(
            "test://embedded-resource", "text/plain", "This is an embedded resource content."
        )
        return types.CallToolResult(content=[resource])
    if name == "test_multiple_content_types":
        return types.CallToolResult(
            content=[
                _text("Multiple content types test:"),
                types.ImageContent(type="image", data=PNG, mime_type="image/png"),
                _resource("test://mixed-content-resource", "application/json", '{"test":"data","value":123}'),
            ]
        )
    if name == "test_error_handling":
        return types.CallToolResult(
            content=[_text("This tool intentionally returns an error for testing")], is_error=True
        )
    if name == "test_tool_with_progress":
        meta: Any = params.meta or {}
        token = meta.get("progress_token", meta.get("progressToken"))
        for step in (0, 50, 100):
            if token is not None:
                await ctx.session.send_progress_notification(
                    progress_token=token, progress=step, total=100, related_request_id=ctx.request_id
                )
            await asyncio.sleep(0.05)
        return types.CallToolResult(content=[_text("Progress reported.")])
    if name == "test_header_param":
        return types.CallToolResult(content=[_text(f"region: {(params.arguments or {}).get('region')}")])
    raise MCPError(-32602, f"Unknown tool: {name}")


async def _list(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[types.Tool.model_validate({"name": n, **t}) for n, t in TOOLS.items()]
    )


def build_app() -> Any:
    server = Server("conformance-fixture-upstream", version="1.0.0", on_list_tools=_list, on_call_tool=_call)
    return server.streamable_http_app(
        stateless_http=True,
        json_response=False,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )


if __name__ == "__main__":
    uvicorn.run(build_app(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
