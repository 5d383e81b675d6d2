"""A call's arguments against the tool's JSON Schema, in bounded time."""
