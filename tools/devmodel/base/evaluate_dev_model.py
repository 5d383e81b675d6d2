"""Compare model2vec model folders on the evaluation set, by embedding alone.

Each tool of the demo catalog is embedded as the proxy embeds it (`embedding_text`: name as words,
title, description); each question, in English and in Lithuanian, is ranked against them by cosine.
A question counts as found when any of its tools is in the top 5 (as in `toolsearch.cli.evaluation`).
Prints a Markdown table: variant, size on disk, recall@5 and MRR@10 en/lt, median query embed time.

Run with the project's venv (model2vec without torch), offline:

    HF_HUB_OFFLINE=1 .venv/bin/python tools/devmodel/base/evaluate_dev_model.py \
        shared/toolsearch/data/model .cache/devmodel/static-*-int8
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
from model2vec import StaticModel

from toolsearch.cli.evaluation import LANGUAGES, CosineSearch, evaluation_catalog, load_questions, measure
from toolsearch.search.embedding import embedding_text


def size_on_disk(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.iterdir() if path.is_file())


def evaluate(folder: Path) -> dict[str, object]:
    model = StaticModel.from_pretrained(str(folder))
    catalog = evaluation_catalog()
    questions = load_questions()
    timings: list[float] = []

    def encode_queries(texts: list[str]) -> np.ndarray:
        started = time.perf_counter()
        vectors = model.encode(texts)
        timings.append(time.perf_counter() - started)
        return vectors

    index = CosineSearch(model.encode([embedding_text(tool) for tool in catalog.tools]), encode_queries)
    row: dict[str, object] = {
        "variant": folder.name,
        "shape": "x".join(str(n) for n in np.asarray(model.embedding).shape),
        "dtype": str(np.asarray(model.embedding).dtype),
        "mb": size_on_disk(folder) / 1e6,
        "questions": len(questions),
        "tools": len(catalog),
    }
    for language in LANGUAGES:
        figures = measure(folder.name, index, catalog, questions, language)  # MRR over the top 10
        row[f"recall5_{language}"] = figures.recall_at_5
        row[f"mrr_{language}"] = figures.mrr
    row["query_ms"] = statistics.median(timings) * 1000
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args()
    print("| variant | shape | dtype | MB on disk | recall@5 en | recall@5 lt", end="")
    print(" | MRR@10 en | MRR@10 lt | query ms |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for folder in args.folders:
        r = evaluate(folder)
        print(
            f"| {r['variant']} | {r['shape']} | {r['dtype']} | {r['mb']:.1f} | {r['recall5_en']:.3f} "
            f"| {r['recall5_lt']:.3f} | {r['mrr_en']:.3f} | {r['mrr_lt']:.3f} | {r['query_ms']:.3f} |"
        )
    print(f"\n{r['questions']} questions, {r['tools']} tools, embedding only.")


if __name__ == "__main__":
    main()
