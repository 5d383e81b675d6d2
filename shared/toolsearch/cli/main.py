"""The `toolsearch` command: serve, catalog, explain, docs, eval, fetch-model, fine-tune."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from toolsearch import __version__
from toolsearch import settings as settings_module
from toolsearch.cli.catalog import add_catalog_arguments, run_catalog
from toolsearch.cli.explain import add_explain_arguments, run_explain, run_lint
from toolsearch.search import Embedder

DOCS_PATH = Path("docs/configuration.md")
DEFAULT_TRAINING_SET = Path(".cache/devmodel-tool/training-set.json")


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from toolsearch.app import build_proxy
    from toolsearch.ops.logs import configure_logging
    from toolsearch.search.embedder import load_configured_embedder
    from toolsearch.server.local_server import served_app, uvicorn_options

    config = settings_module.from_args(args)
    if args.demo:
        config = config.replace(upstream="")
    configure_logging(config.server.log_level)
    embedder = load_configured_embedder(config.search.embedder, config.search.model_dir)
    proxy = build_proxy(config, embedder=embedder)
    upstream = config.upstream.url or "the built-in demo upstream"
    search = "hybrid (BM25 + embeddings)" if embedder is not None else "lexical only (BM25; no model)"
    print(
        f"mcp-toolsearch-proxy {__version__}\n"
        f"  upstream: {upstream}\n"
        f"  search:   {search}\n"
        f"  MCP endpoint for your client: http://{config.server.host}:{config.server.port}/mcp",
        file=sys.stderr,
        flush=True,
    )
    app = served_app(proxy.app, config)
    uvicorn.run(app, host=config.server.host, port=config.server.port, **uvicorn_options(config))
    return 0


def _docs(args: argparse.Namespace) -> int:
    text = settings_module.render_markdown() + "\n"
    path = Path(args.output)
    if args.check:
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            print(f"{path} is stale: run `toolsearch docs`", file=sys.stderr)
            return 1
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)
    return 0


def _eval(args: argparse.Namespace) -> int:
    from toolsearch.cli import evaluation
    from toolsearch.search.embedder import load_configured_embedder
    from toolsearch.search.hybrid import Fusion

    config = settings_module.from_args(args)
    embedder = load_configured_embedder(config.search.embedder, config.search.model_dir)
    fusions = {"fused": Fusion(lexical_weight=config.search.lexical_weight)}
    if args.fusion == "all":
        fusions = {
            "hybrid rrf": Fusion(method="rrf"),
            **{f"hybrid w={w:.1f}": Fusion(lexical_weight=w) for w in (0.2, 0.4, 0.6, 0.7, 0.8, 0.9)},
        }
    search = config.search
    model = "no model" if embedder is None else f"model {search.model_dir or 'default'} ({embedder.dim} dims)"
    if args.bench in ("public", "all"):
        status = _eval_public(embedder, search.ranker, Fusion(lexical_weight=search.lexical_weight), model)
        if status or args.bench == "public":
            return status
        print()
    figures = evaluation.evaluate(embedder, fusions, config.search.ranker)
    print(f"evaluation set (our own made-up catalog), {model}")
    print(evaluation.render(figures, len(evaluation.evaluation_catalog())))
    others = {folder: _load_other(folder) for folder in args.compare or []}
    if others:
        rows = {model: figures} | {
            f"model {folder}": evaluation.evaluate(other, fusions) for folder, other in others.items()
        }
        print()
        print(evaluation.render_comparison(rows))
    if args.by_domain and embedder is not None:
        print()
        domains = {model: evaluation.recall_by_domain(embedder)}
        domains |= {f"model {folder}": evaluation.recall_by_domain(other) for folder, other in others.items()}
        print(evaluation.render_domains(domains))
    if args.json:
        Path(args.json).write_text(evaluation.to_json(figures) + "\n", encoding="utf-8")
    return 0


def _eval_public(embedder: Embedder | None, ranker: str, fusion: Any, model: str) -> int:
    """The public benchmark (tools/searchbench), which lives in the repository, not the package."""
    sys.path.insert(0, str(Path.cwd()))
    try:
        from tools.searchbench.benchset import load_sources
        from tools.searchbench.run import evaluate, render, with_pools
    except ImportError:
        print("the public benchmark is in the repository: run this from its checkout", file=sys.stderr)
        return 2
    finally:
        sys.path.pop(0)
    sources = load_sources("all")
    print(f"public benchmark (tools/searchbench: real catalogs, requests written by others), {model}")
    print(render(with_pools(evaluate(sources, embedder, fusion, ranker))))
    return 0


def _load_other(folder: str) -> Embedder:
    from toolsearch.model.load import load_embedder

    return load_embedder(folder)


def _fine_tune(args: argparse.Namespace) -> int:
    from dataclasses import fields

    from toolsearch.model.build.finetune import FineTuneConfig, TrainingSet, fine_tune
    from toolsearch.model.load import ModelLoadError

    recipe = FineTuneConfig(**{f.name: getattr(args, f.name) for f in fields(FineTuneConfig)})
    out = args.out or f"{str(args.base).rstrip('/')}-tools"
    try:
        training = TrainingSet.read(args.data)
        report = fine_tune(args.base, out, training, recipe, log=lambda line: print(line, file=sys.stderr))
    except ModelLoadError as exc:
        print(f"toolsearch fine-tune: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=1))
    print(f"fine-tuned model in {out}", file=sys.stderr)
    return 0


def _fetch_model(args: argparse.Namespace) -> int:
    from toolsearch.model.build.fetch import ModelFetchError, fetch_model

    config = settings_module.from_env()
    try:
        folder = fetch_model(
            args.model_dir,
            endpoint=args.hub_endpoint or config.model.hub_endpoint,
            revision=args.revision,
            quantize="int8" if args.int8 else None,
            dims=args.dims,
            update_lock=args.update_lock,
            progress=not args.no_progress,
        )
    except ModelFetchError as exc:
        print(f"toolsearch fetch-model: {exc}", file=sys.stderr)
        return 1
    print(f"model ready in {folder}", file=sys.stderr)
    return 0


def _catalog(args: argparse.Namespace) -> int:
    if args.lint:
        return run_lint(args)
    if args.catalog:
        print("toolsearch catalog: --catalog FILE goes with --lint", file=sys.stderr)
        return 2
    return run_catalog(args)


def _add_recipe_arguments(parser: argparse.ArgumentParser) -> None:
    from dataclasses import fields

    from toolsearch.model.build.finetune import FineTuneConfig

    for f in fields(FineTuneConfig):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolsearch",
        description="An MCP server that lets a model search and call thousands of tools through five.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser(
        "serve", help="Run the proxy over HTTP (the built-in demo upstream by default)."
    )
    serve.add_argument(
        "--demo", action="store_true", help="Use the built-in demo upstream, whatever --upstream says."
    )
    settings_module.add_arguments(serve)
    serve.set_defaults(run=_serve)

    evaluate = commands.add_parser(
        "eval", help="Print recall@1/5/10 and MRR on the evaluation set, lexical and hybrid, per language."
    )
    evaluate.add_argument(
        "--fusion", choices=("default", "all"), default="default", help="all: compare fusions"
    )
    evaluate.add_argument(
        "--bench",
        choices=("own", "public", "all"),
        default="own",
        help="own: the evaluation set; public: tools/searchbench (from a checkout); all: both",
    )
    evaluate.add_argument("--json", metavar="PATH", help="Also write the evaluation set's figures as JSON.")
    evaluate.add_argument(
        "--compare",
        metavar="DIR",
        action="append",
        help="Also evaluate the model in DIR and print both side by side (repeatable).",
    )
    evaluate.add_argument(
        "--by-domain", action="store_true", help="Also print hybrid recall@5 per domain (users' words)."
    )
    settings_module.add_arguments(evaluate)
    evaluate.set_defaults(run=_eval)

    catalog = commands.add_parser(
        "catalog",
        help="List the tools a running proxy offers your token (GET /catalog), or refresh them.",
    )
    add_catalog_arguments(catalog)
    catalog.add_argument(
        "--lint", action="store_true", help="Check the catalog for what keeps search from finding tools."
    )
    catalog.add_argument("--catalog", metavar="FILE", help="With --lint: check this catalog file offline.")
    catalog.set_defaults(run=_catalog)

    explain = commands.add_parser(
        "explain",
        help="Why a query does (not) find a tool: its rank, scores, matched words and hints.",
    )
    add_explain_arguments(explain)
    explain.set_defaults(run=run_explain)

    fetch = commands.add_parser(
        "fetch-model",
        help="Download potion-multilingual-128M at the pinned revision, verify it, prepare it for Lambda.",
    )
    fetch.add_argument(
        "--model-dir",
        default="model",
        help="Folder to write the model into (default ./model, as the layer expects).",
    )
    fetch.add_argument(
        "--hub-endpoint", help="Hugging Face hub endpoint (default: the hub_endpoint setting)."
    )
    fetch.add_argument("--revision", help="Model revision (default: the one pinned in the lock file).")
    fetch.add_argument("--int8", action="store_true", help="Quantize to int8 (128 MB instead of 512 MB).")
    fetch.add_argument("--dims", type=int, help="Keep this many dimensions (PCA).")
    fetch.add_argument(
        "--update-lock", action="store_true", help="Record the verified digests in the lock file."
    )
    fetch.add_argument("--no-progress", action="store_true", help="No progress bar.")
    fetch.set_defaults(run=_fetch_model)

    tune = commands.add_parser(
        "fine-tune",
        help="Train a model2vec model's vectors for tool retrieval (the development model's recipe).",
    )
    tune.add_argument("--base", required=True, help="The model folder to start from (e.g. ./model).")
    tune.add_argument(
        "--data",
        default=str(DEFAULT_TRAINING_SET),
        help="The training set tools/devmodel writes (default: %(default)s).",
    )
    tune.add_argument("--out", help="Where the fine-tuned model goes (default: BASE-tools).")
    _add_recipe_arguments(tune)
    tune.set_defaults(run=_fine_tune)

    docs = commands.add_parser("docs", help="Write docs/configuration.md from the settings' definitions.")
    docs.add_argument("--output", default=str(DOCS_PATH))
    docs.add_argument("--check", action="store_true", help="Exit 1 when the file is stale, writing nothing.")
    docs.set_defaults(run=_docs)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except ValueError as exc:  # a bad setting value
        print(f"toolsearch: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
