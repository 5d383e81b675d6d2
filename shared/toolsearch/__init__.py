"""mcp-toolsearch-proxy: five MCP tools in front of an upstream with far too many."""

__version__ = "0.1.0"
