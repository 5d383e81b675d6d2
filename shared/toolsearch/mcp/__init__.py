"""The MCP wire, both eras: versions, JSON-RPC, negotiation, `Mcp-Param-*` headers. No I/O."""
