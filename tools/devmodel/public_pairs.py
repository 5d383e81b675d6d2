"""The public benchmark's dev requests as fine-tuning pairs: `python -m tools.devmodel.public_pairs`.

Reads `tools/searchbench/data/*.json` (the dev split only: a test request is never read past its
split) and writes a training-set file (`TrainingSet`'s format, without translation or paraphrase
pairs) that `python -m tools.devmodel --public-pairs FILE` adds to the synthetic requests:

- tools: every tool of a dev server (the benchmark's server of the tool: MSC-Bench's MCP server,
  StableToolBench's RapidAPI, AgentDojo's suite and tau-bench's domain, each the name's prefix
  before the first `-`; Seal-Tools' top-level field; ToolTalk's plugin; RestBench TMDB one
  server), as the proxy embeds it (`embedding_text`),
  keyed `searchbench:<source>:<server>/<name>`, so its hard negatives are its own server's tools;
- pairs: each dev request's own text with every tool it needs (each alternative of a need), and
  each of a model's queries for it with the need whose tools share the most of its words (the
  first need on a tie; a request of one need: that need), all as English.

Seal-Tools' fields and ToolTalk's plugins are not in the benchmark's files: they are read from the
pinned repositories (`tools/searchbench/sources.lock`, as `python -m tools.searchbench build` reads
them). `--exclude SOURCE` leaves a source out (to score it on a model that never saw it).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from tools.searchbench.benchset import DATA, Request, Source, load_sources
from toolsearch.catalogs.catalog import Catalog
from toolsearch.model.build.finetune import TrainingSet
from toolsearch.search.embedding import embedding_text

HERE = Path(__file__).resolve().parent
OUT = HERE / "data" / "public-dev-pairs.json"
_WORD = re.compile(r"[a-z0-9]+")
# Sources whose tools are named `server-tool` (AgentDojo's suite, tau-bench's domain likewise).
_PREFIXED = ("msc-bench", "stabletoolbench", "agentdojo", "tau-bench")


def seal_fields() -> dict[str, str]:
    """Seal-Tools: each tool's top-level field, its server in the benchmark's split."""
    from tools.searchbench.build import Repo, read_lock

    repo = Repo(read_lock()["seal-tools"])
    out = {}
    for line in repo.read("Seal-Tools_Dataset/tool.jsonl").splitlines():
        entry = json.loads(line)
        out[entry["api_name"]] = entry["field"].split("/")[0]
    return out


def tooltalk_plugins() -> dict[str, str]:
    """ToolTalk: each API class's plugin (the module it is defined in)."""
    import ast

    from tools.searchbench.build import Repo, read_lock

    repo = Repo(read_lock()["tooltalk"])
    out = {}
    for path in repo.files("src/tooltalk/apis"):
        for node in ast.parse(repo.read(path)).body:
            if isinstance(node, ast.ClassDef):
                out[node.name] = Path(path).stem
    return out


def server_of(source: str, name: str, lookup: dict[str, dict[str, str]]) -> str:
    if source in _PREFIXED:
        return name.split("-", 1)[0]
    if source in lookup:
        return lookup[source][name]
    return source  # one server (RestBench TMDB)


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def need_of(query: str, request: Request, texts: dict[str, str]) -> tuple[str, ...]:
    """The need a model's query asks for: the one whose tools share the most of its words."""
    if len(request.needs) == 1:
        return request.needs[0]
    asked = words(query)
    shared = [max(len(asked & words(texts[t])) for t in need) for need in request.needs]
    return request.needs[shared.index(max(shared))]


def build(sources: Sequence[Source], lookup: dict[str, dict[str, str]]) -> TrainingSet:
    tools: dict[str, str] = {}
    servers: dict[str, str] = {}
    pairs: list[tuple[str, str, str]] = []
    for source in sources:
        if source.split != "dev":
            continue
        catalog = Catalog.from_definitions(source.tools)
        texts = {tool.name: embedding_text(tool) for tool in catalog.tools}
        server = {name: server_of(source.name, name, lookup) for name in texts}
        dev_servers = {server[t] for r in source.requests for t in r.tools}
        key = {name: f"searchbench:{source.name}:{server[name]}/{name}" for name in texts}
        for name, text in texts.items():
            if server[name] in dev_servers:
                tools[key[name]], servers[key[name]] = text, f"searchbench:{source.name}:{server[name]}"
        for request in source.requests:
            for name in sorted(request.tools):
                pairs.append((request.text, key[name], "en"))
            for query in request.model_queries:
                for name in need_of(query, request, texts):
                    pairs.append((query, key[name], "en"))
    return TrainingSet(tools, servers, pairs)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.devmodel.public_pairs", description=__doc__)
    parser.add_argument("--data", type=Path, default=DATA, help="the benchmark's source files")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--exclude", action="append", default=[], help="leave this source out")
    args = parser.parse_args(list(argv) if argv is not None else None)
    sources = [s for s in load_sources("dev", args.data) if s.name not in args.exclude]
    names = {s.name for s in sources}
    lookup = {}
    if "seal-tools" in names:
        lookup["seal-tools"] = seal_fields()
    if "tooltalk" in names:
        lookup["tooltalk"] = tooltalk_plugins()
    training = build(sources, lookup)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    training.write(args.out)
    print(
        f"{args.out}: {len(training.pairs)} pairs for {len({k for _, k, _ in training.pairs})} tools, "
        f"{len(training.tools)} tools of {len(set(training.servers.values()))} dev servers "
        f"({', '.join(sorted(names))})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
