"""HTTP: the `/mcp` endpoint, its edge and refusals, streaming, answer sizes, `/catalog`, OAuth
metadata, the local server. With `aws/`, the only package that imports Starlette.
"""
