"""`python -m tools.searchbench`: search quality on public data (see README.md).

python -m tools.searchbench                 # every source, dev and test, the bundled model
python -m tools.searchbench --split dev     # the split choices are made on
python -m tools.searchbench --model-dir DIR --lexical-weight 0.5 --json out.json
python -m tools.searchbench build           # rebuild data/ from the pinned public sources
python -m tools.searchbench merge-queries --queries FILE.jsonl  # a model's first queries
python -m tools.searchbench train-ranker --source-model msc-bench=DIR ...  # cross-fitted cosines
python -m tools.searchbench weak --split dev  # how often the weak-match signal fires, and wrongly
python -m tools.searchbench loso            # the ranker trained on all dev, and leave-one-source-out
python -m tools.searchbench loso --ranks A.jsonl; ... loso --against A.jsonl  # which requests moved
python -m tools.searchbench phrasings --split dev --queries A.jsonl --queries B.jsonl  # query sets compared
python -m tools.searchbench proxy --split dev  # through a real upstream and the proxy, beside in process
"""

from __future__ import annotations

import argparse
import datetime
import platform
import subprocess
import sys
from pathlib import Path

from toolsearch.search.hybrid import DEFAULT_FUSION, Fusion

from .benchset import DATA, Source, load_sources, read_queries
from .run import evaluate, render, to_json, with_pools


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _chosen_sources(args: argparse.Namespace) -> list[Source]:
    """The split's sources, only those `--source` names when it is given."""
    sources = load_sources(args.split, Path(args.data))
    return [s for s in sources if s.name in args.source] if args.source else sources


def _run(args: argparse.Namespace) -> int:
    from toolsearch.search.embedder import load_configured_embedder

    sources = _chosen_sources(args)
    if not sources:
        print(f"no sources in {args.data} for split {args.split}", file=sys.stderr)
        return 1
    embedder = load_configured_embedder(args.embedder, args.model_dir)
    fusion = Fusion(
        method=args.fusion,
        lexical_weight=DEFAULT_FUSION.lexical_weight if args.lexical_weight is None else args.lexical_weight,
    )
    figures = with_pools(evaluate(sources, embedder, fusion, args.ranker))
    print(
        f"public benchmark: {len(sources)} sources, {sum(len(s.requests) for s in sources)} requests; "
        f"ranker {args.ranker}; fusion {fusion.method} lexical_weight {fusion.lexical_weight}; "
        f"model {args.model_dir or 'bundled'}"
    )
    print(render(figures))
    if args.json:
        meta = {
            "date": datetime.date.today().isoformat(),
            "commit": _commit(),
            "python": platform.python_version(),
            "ranker": args.ranker,
            "fusion": {"method": fusion.method, "lexical_weight": fusion.lexical_weight},
            "model_dir": args.model_dir or "bundled",
        }
        Path(args.json).write_text(to_json(figures, meta) + "\n", encoding="utf-8")
    return 0


def _build(args: argparse.Namespace) -> int:
    from .build import build_all

    return build_all(Path(args.data), args.source or None)


def _merge_queries(args: argparse.Namespace) -> int:
    from .build import merge_model_queries

    if not args.queries:
        print("merge-queries needs --queries PATH (JSON lines: source, key, queries)", file=sys.stderr)
        return 2
    for path in args.queries:
        merge_model_queries(Path(args.data), Path(path))
    return 0


def _train_ranker(args: argparse.Namespace) -> int:
    from toolsearch.search.embedder import load_configured_embedder

    from . import ranker

    sources = load_sources("dev", Path(args.data))
    embedder = load_configured_embedder(args.embedder, args.model_dir)
    per_source = {}
    for item in args.source_model or []:
        name, _, folder = item.partition("=")
        if name not in {s.name for s in sources} or not folder:
            print(f"--source-model {item}: not SOURCE=DIR of a dev source", file=sys.stderr)
            return 2
        model = load_configured_embedder("model2vec", folder)
        assert model is not None  # model2vec raises when the folder cannot be loaded
        per_source[name] = model
    weights = ranker.train(sources, embedder, per_source)
    ranker.write(weights)
    print(f"wrote {ranker.WEIGHTS} from {', '.join(weights['trained_on'])}")  # type: ignore[arg-type]
    return 0


def _loso(args: argparse.Namespace) -> int:
    from toolsearch.search.embedder import load_configured_embedder

    from . import loso, ranker

    sources = load_sources("dev", Path(args.data))
    embedder = load_configured_embedder(args.embedder, args.model_dir)
    print(
        "dev: trained on every dev source but those measured only"
        f" ({', '.join(sorted(ranker.MEASURED_ONLY))}); out: each source by the ranker trained on the others"
    )
    judged = loso.judge(loso.collect(sources, embedder))
    print(loso.render(judged))
    if args.against:
        print(loso.render_moves(loso.read_ranks(Path(args.against)), judged))
    if args.ranks:
        loso.write_ranks(judged, Path(args.ranks))
    return 0


def _phrasings(args: argparse.Namespace) -> int:
    from toolsearch.search.embedder import load_configured_embedder

    from . import phrasings

    if not args.queries:
        print("phrasings needs --queries PATH (JSON lines: source, key, queries) per set", file=sys.stderr)
        return 2
    sources = load_sources(args.split, Path(args.data))
    embedder = load_configured_embedder(args.embedder, args.model_dir)
    sets = {Path(path).stem: read_queries(Path(path)) for path in args.queries}
    print(phrasings.render(phrasings.search_sets(sources, sets, embedder)))
    return 0


def _weak(args: argparse.Namespace) -> int:
    from toolsearch.search.embedder import load_configured_embedder
    from toolsearch.search.weak import WEAK_COSINE, WEAK_WORDS

    from . import weak

    sources = _chosen_sources(args)
    embedder = load_configured_embedder(args.embedder, args.model_dir)
    print(weak.render(weak.observe(sources, embedder, args.ranker), WEAK_WORDS, WEAK_COSINE))
    return 0


def _proxy(args: argparse.Namespace) -> int:
    import time

    from toolsearch.search.embedder import load_configured_embedder

    from . import proxy_report, through_proxy

    if args.split == "all":
        print("proxy: name the split (--split dev)", file=sys.stderr)
        return 2
    sources = _chosen_sources(args)
    if not sources:
        print(f"no sources in {args.data} for split {args.split}", file=sys.stderr)
        return 1
    # The proxy runs on default settings (the bundled model); so does the in-process side.
    embedder = load_configured_embedder("auto", "")
    started = time.perf_counter()
    runs = through_proxy.run(sources, embedder)
    print(proxy_report.render(runs))
    asking = sum(r.seconds for r in runs)
    print(f"\nrun time {time.perf_counter() - started:.0f} s ({asking:.0f} s asking the proxy)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.searchbench", description=__doc__.split("\n")[0])
    parser.add_argument(
        "command",
        nargs="?",
        default="run",
        choices=("run", "build", "train-ranker", "weak", "merge-queries", "loso", "phrasings", "proxy"),
    )
    parser.add_argument("--split", default="all", choices=("dev", "test", "all"))
    parser.add_argument("--source", action="append", help="only this source (repeatable)")
    parser.add_argument("--data", default=str(DATA), help="the folder of source files")
    parser.add_argument("--embedder", default="auto", choices=("auto", "model2vec", "none"))
    parser.add_argument("--model-dir", default="", help="a model2vec folder (default: the bundled model)")
    parser.add_argument("--fusion", default=DEFAULT_FUSION.method, choices=("weighted", "rrf"))
    parser.add_argument("--lexical-weight", type=float, default=None)
    parser.add_argument("--ranker", default="learned", choices=("learned", "fusion"))
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument(
        "--source-model",
        action="append",
        metavar="SOURCE=DIR",
        help="train-ranker: this source's cosines from this model (cross-fitting; repeatable)",
    )
    parser.add_argument(
        "--queries",
        metavar="PATH",
        action="append",
        help="merge-queries, phrasings: a model's first queries, JSON lines (phrasings: repeat to compare)",
    )
    parser.add_argument("--ranks", metavar="PATH", help="loso: write each request's best ranks")
    parser.add_argument("--against", metavar="PATH", help="loso: the requests moved since that --ranks file")
    args = parser.parse_args(argv)
    commands = {
        "run": _run,
        "build": _build,
        "train-ranker": _train_ranker,
        "weak": _weak,
        "merge-queries": _merge_queries,
        "loso": _loso,
        "phrasings": _phrasings,
        "proxy": _proxy,
    }
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
