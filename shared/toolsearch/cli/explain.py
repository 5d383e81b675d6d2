"""`toolsearch explain` and `toolsearch catalog --lint`: offline on a catalog file, or asking a proxy.

A catalog file is what `toolsearch catalog --json` writes (one tool row per line: no input
schemas nor annotations, so parameters are not searched and a missing annotation cannot be
seen), or MCP tool definitions: a JSON list of them, a tools/list result (`{"tools": [...]}`), or
the proxy's stored catalog. The file is bounded as an upstream's listing is (max_catalog_bytes,
max_catalog_tools). Against a proxy, the operator's own token asks `POST /catalog/explain` and
`GET /catalog/lint`, as `toolsearch catalog` asks GET /catalog.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from toolsearch import settings as settings_module
from toolsearch.catalogs.catalog import Catalog
from toolsearch.catalogs.printable import printable
from toolsearch.cli.catalog import (
    CatalogCliError,
    add_catalog_arguments,
    answer_body,
    authorization,
    base_url,
)
from toolsearch.errors import ToolsearchError
from toolsearch.ops.files import read_at_most

SHOWN_FEATURES = 6  # the ones that moved the score most; --json has them all


class CatalogFileError(ToolsearchError):
    pass


def _from_rows(lines: list[str]) -> list[dict[str, Any]]:
    definitions = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise CatalogFileError(f"line {number} is not JSON") from exc
        if not isinstance(row, dict) or not isinstance(row.get("name"), str):
            raise CatalogFileError(f"line {number} is not a tool row")
        definitions.append(
            {
                "name": row["name"],
                "title": row.get("title") or "",
                "description": row.get("description") or "",
                "annotations": {"readOnlyHint": row.get("readOnly") is True},
            }
        )
    return definitions


def load_catalog_file(path: str, max_bytes: int, max_tools: int) -> tuple[Catalog, bool]:
    """The catalog in `path`, and whether it is a `catalog --json` listing (rows, not definitions)."""
    try:
        data = read_at_most(path, max_bytes)
    except OSError as exc:
        raise CatalogFileError(f"cannot read {path}: {exc.strerror}") from exc
    if data is None:
        raise CatalogFileError(f"{path} is over {max_bytes} bytes (max_catalog_bytes)")
    text = data.decode("utf-8", errors="replace")
    rows = False
    try:
        parsed: Any = json.loads(text)
    except (ValueError, RecursionError):
        parsed, rows = _from_rows(text.splitlines()), True
    if isinstance(parsed, dict) and isinstance(parsed.get("tools"), list):
        parsed = parsed["tools"]
    elif isinstance(parsed, dict) and isinstance(parsed.get("name"), str):  # a one-line listing
        parsed, rows = _from_rows([text]), True
    if not isinstance(parsed, list) or not all(
        isinstance(d, dict) and isinstance(d.get("name"), str) for d in parsed
    ):
        raise CatalogFileError(f"{path} holds no list of tools with names")
    if len(parsed) > max_tools:
        raise CatalogFileError(f"{path} holds {len(parsed)} tools, over {max_tools} (max_catalog_tools)")
    return Catalog.from_definitions(parsed), rows


def add_explain_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--query", required=True, help="The query that did not find the tool.")
    parser.add_argument("--tool", required=True, help="The tool's exact name.")
    parser.add_argument("--catalog", metavar="FILE", help="Explain offline against this catalog file.")
    parser.add_argument(
        "--above", type=int, default=10, help="How many of the best tools ranked above it to show (0 to 50)."
    )
    add_catalog_arguments(parser)
    settings_module.add_arguments(parser)  # offline: the same search settings as `serve`


def offline_index(config: settings_module.Settings, catalog: Catalog) -> Any:
    from toolsearch.search.embedder import load_configured_embedder
    from toolsearch.search.hybrid import Fusion
    from toolsearch.search.index import make_indexer

    embedder = load_configured_embedder(config.embedder, config.model_dir)
    indexer = make_indexer(
        embedder, fusion=Fusion(lexical_weight=config.lexical_weight), ranker=config.ranker
    )
    return indexer(catalog)


def render_explanation(answer: dict[str, Any]) -> str:
    if "error" in answer:
        similar = ", ".join(printable(name) for name in answer.get("similar") or []) or "none"
        return f"no tool named {printable(answer.get('tool'))} in this catalog (closest: {similar})"
    rank = answer["rank"]
    place = f"rank {rank} of {answer['total']}" if rank is not None else f"not ranked (of {answer['total']})"
    lines = [f"{printable(answer['tool'])}: {place}, by {answer['method']}"]
    if "score" in answer:
        lines[0] += f" (score {answer['score']})"
    lines.append(f"query terms (stemmed): {' '.join(printable(t) for t in answer['queryTerms']) or '(none)'}")
    for field, terms in answer["matched"].items():
        lines.append(f"  matched in {field + ':':<12} {' '.join(printable(t) for t in terms) or '-'}")
    if bm25 := answer.get("bm25"):
        where = f"BM25 rank {bm25['rank']}" if bm25["rank"] is not None else "holds no query term"
        lines.append(f"BM25 score {bm25['score']} ({where})")
    if cosine := answer.get("cosine"):
        lines.append(f"cosine similarity {cosine['similarity']} (embedding rank {cosine['rank']})")
    if fallback := answer.get("fallback"):
        state = "applied" if fallback["applied"] else "not applied"
        lines.append(
            f"fused fallback {state}: best share of query terms held {fallback['queryTermsHeld']}, "
            f"threshold {fallback['threshold']}"
        )
    if ranker := answer.get("ranker"):
        seen = "" if ranker["candidate"] else " (not a candidate: as if it were one)"
        lines.append(f"learned ranker score {ranker['score']}{seen}; per feature (value -> adds):")
        ranked = sorted(ranker["features"].items(), key=lambda item: -abs(item[1]["adds"]))
        lines += [f"  {name:<24} {f['value']:>8} -> {f['adds']:+.4f}" for name, f in ranked[:SHOWN_FEATURES]]
        if len(ranked) > SHOWN_FEATURES:
            lines.append(f"  … {len(ranked) - SHOWN_FEATURES} more with --json")
    if answer["above"]:
        lines.append("ranked above it:")
        lines += [f"  {row['rank']:>3}. {printable(row['name'])} ({row['score']})" for row in answer["above"]]
    lines += [f"hint: {printable(hint)}" for hint in answer["hints"]]
    return "\n".join(lines)


def _ask_proxy(
    args: argparse.Namespace, method: str, path: str, body: dict[str, Any] | None
) -> dict[str, Any]:
    import httpx

    base = base_url(args.url)
    header = authorization(args.token_env)
    headers = {"Authorization": header} if header else {}
    try:
        with httpx.Client(headers=headers, timeout=60) as http:
            reply = http.request(method, base + path, json=body)
    except httpx.HTTPError as exc:
        raise CatalogCliError(f"cannot reach {base}: {type(exc).__name__}") from exc
    return answer_body(reply, args.token_env)


def run_explain(args: argparse.Namespace) -> int:
    above = max(0, min(args.above, 50))
    try:
        if args.catalog:
            config = settings_module.from_args(args)
            from toolsearch.search.explain import explain
            from toolsearch.service.finding import cut_query

            catalog, rows = load_catalog_file(
                args.catalog, config.max_catalog_bytes, config.max_catalog_tools
            )
            if rows:
                print("toolsearch explain: a catalog --json listing holds no input schemas", file=sys.stderr)
            query = cut_query(args.query, config.max_query_chars)
            answer = explain(catalog, offline_index(config, catalog), query, args.tool, above)
        else:
            answer = _ask_proxy(
                args, "POST", "/catalog/explain", {"query": args.query, "tool": args.tool, "above": above}
            )
    except (CatalogCliError, CatalogFileError) as exc:
        print(f"toolsearch explain: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(printable(json.dumps(answer, ensure_ascii=False)))
    else:
        print(render_explanation(answer))
    return 1 if "error" in answer else 0


def run_lint(args: argparse.Namespace) -> int:
    """`toolsearch catalog --lint`: exit 1 when a fault is found, so a script can gate on it."""
    from toolsearch.catalogs.lint import Finding, lint, render_findings

    try:
        if args.catalog:
            config = settings_module.from_env()
            catalog, rows = load_catalog_file(
                args.catalog, config.max_catalog_bytes, config.max_catalog_tools
            )
            if rows:
                print(
                    "toolsearch catalog: a --json listing holds no annotations: not checked", file=sys.stderr
                )
            findings, total = lint(catalog), len(catalog)
            if rows:
                findings = [f for f in findings if f.check != "annotations_missing"]
        else:
            body = _ask_proxy(args, "GET", "/catalog/lint", None)
            total = int(body.get("total") or 0)
            findings = [
                Finding(
                    str(f.get("check")), str(f.get("message")), tuple(str(n) for n in f.get("tools") or [])
                )
                for f in body.get("findings") or []
                if isinstance(f, dict)
            ]
    except (CatalogCliError, CatalogFileError) as exc:
        print(f"toolsearch catalog: {exc}", file=sys.stderr)
        return 1
    if args.json:
        for finding in findings:
            print(printable(json.dumps(finding.as_dict(), ensure_ascii=False)))
    else:
        print(render_findings(findings, total))
    print(f"{len(findings)} kinds of fault in {total} tools", file=sys.stderr)
    return 1 if findings else 0
