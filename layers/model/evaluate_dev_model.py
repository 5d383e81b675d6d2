"""Compare model2vec model folders on the evaluation set, by embedding alone.

Each tool of the demo catalog is embedded as the proxy embeds it (`embedding_text`: name as words,
title, description); each question, in English and in Lithuanian, is ranked against them by cosine.
A question counts as found when any of its tools is in the top 5 (as in `toolsearch.evaluation`).
Prints a Markdown table: variant, size on disk, recall@5 and MRR@10 en/lt, median query embed time.

Run with the project's venv (model2vec without torch), offline:

    HF_HUB_OFFLINE=1 .venv/bin/python layers/model/evaluate_dev_model.py \
        shared/toolsearch/data/model .cache/devmodel/static-*-int8
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
from model2vec import StaticModel

from toolsearch.evaluation import LANGUAGES, evaluation_catalog, load_questions
from toolsearch.search.embedding import embedding_text

TOP_K = 5
MRR_DEPTH = 10  # MRR@10: less noisy than recall@5 for telling close variants apart


def size_on_disk(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.iterdir() if path.is_file())


def evaluate(folder: Path) -> dict[str, object]:
    model = StaticModel.from_pretrained(str(folder))
    catalog = evaluation_catalog()
    names = [tool.name for tool in catalog.tools]
    tool_vectors = model.encode([embedding_text(tool) for tool in catalog.tools])
    questions = load_questions()
    row: dict[str, object] = {
        "variant": folder.name,
        "shape": "x".join(str(n) for n in np.asarray(model.embedding).shape),
        "dtype": str(np.asarray(model.embedding).dtype),
        "mb": size_on_disk(folder) / 1e6,
        "questions": len(questions),
        "tools": len(names),
    }
    timings = []
    for language in LANGUAGES:
        asked = [q for q in questions if language in q.text]
        found, reciprocal = 0, 0.0
        for question in asked:
            started = time.perf_counter()
            query = model.encode([question.text[language]])
            timings.append(time.perf_counter() - started)
            top = np.argsort(-(tool_vectors @ query[0]), kind="stable")[:MRR_DEPTH]
            ranks = [rank for rank, i in enumerate(top, start=1) if names[i] in question.tools]
            found += bool(ranks) and ranks[0] <= TOP_K
            reciprocal += 1 / ranks[0] if ranks else 0.0
        row[f"recall5_{language}"] = found / len(asked)
        row[f"mrr_{language}"] = reciprocal / len(asked)
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
