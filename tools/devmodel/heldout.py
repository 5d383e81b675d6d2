"""Search figures on the training set's held-out servers, as the proxy searches (BM25, embedding, hybrid).

    .venv/bin/python -m tools.devmodel.heldout MODEL_DIR [--cache-dir .cache/devmodel-tool]

MODEL_DIR should be a model trained with those servers held out (`python -m tools.devmodel --no-out
--held-out-fraction 0.15`). Every tool of the training set makes the catalog (its name, title and
description; the first of two tools with the same name is kept); each held-out request is asked as
the evaluation asks (terse queries as a model's query, the rest as users' words) and found when its
tool is in the top k. This is where the fusion weight can be chosen without the evaluation set.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from toolsearch.catalogs.catalog import Catalog
from toolsearch.cli import evaluation
from toolsearch.model.build.finetune import TrainingSet
from toolsearch.model.load import load_embedder
from toolsearch.search.hybrid import Fusion

from .config import BuildConfig
from .requests import read_requests

WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def newest(cache: Path, pattern: str) -> Path:
    return max(cache.glob(pattern), key=lambda p: p.stat().st_mtime)


def held_out_questions(
    training: TrainingSet, fraction: float, names: dict[str, str], terse: set[str]
) -> list:
    """Held-out requests as evaluation questions: terse ones as a model's query, others as users' words."""
    held = training.held_out_servers(fraction)
    questions = []
    for number, (text, key, lang) in enumerate(training.pairs):
        if training.servers[key] not in held or key not in names:
            continue
        asked = {lang: text}
        model_query = text in terse
        question = evaluation.Question(
            f"{training.servers[key]}-{number}",
            {} if model_query else asked,
            (names[key],),
            asked if model_query else {},
        )
        questions.append(question)
    return questions


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--cache-dir", type=Path, default=BuildConfig().cache_dir)
    parser.add_argument("--held-out-fraction", type=float, default=0.15)
    parser.add_argument("--requests-dir", type=Path, default=BuildConfig().requests_dir)
    args = parser.parse_args(argv)

    training = TrainingSet.read(newest(args.cache_dir, "training-set-*/training-set.json"))
    servers = json.loads(newest(args.cache_dir, "tools-*/tools.json").read_text())
    definitions, names = [], {}
    for server, entry in sorted(servers.items()):
        for tool in entry["tools"]:
            key = f"{server}/{tool['name']}"
            if key in training.tools and tool["name"] not in {d["name"] for d in definitions}:
                definitions.append(
                    {"name": tool["name"], "title": tool.get("title") or "", "inputSchema": {}}
                )
                definitions[-1]["description"] = tool["description"]
                names[key] = tool["name"]
    catalog = Catalog.from_definitions(definitions)
    terse = {r.text for r in read_requests(args.requests_dir) if r.kind == "terse"}
    questions = held_out_questions(training, args.held_out_fraction, names, terse)
    embedder = load_embedder(args.model_dir)
    fusions = {f"hybrid w={w:.1f}": Fusion(lexical_weight=w) for w in WEIGHTS}
    indexes = evaluation.build_indexes(catalog, embedder, fusions, ranker="fusion")
    print(f"held-out servers: {len(questions)} requests; catalog: {len(catalog)} tools")
    figures = [
        evaluation.measure(label, index, catalog, questions, language, phrasing)
        for phrasing in evaluation.PHRASINGS
        for language in evaluation.LANGUAGES
        for label, index in indexes.items()
    ]
    print(evaluation.render([f for f in figures if f.questions], len(catalog)))


if __name__ == "__main__":
    main()
