"""Lexical search figures: speed on generated catalogs, recall on the evaluation set.

    .venv/bin/python bench/bench_lexical.py            # speed, then recall
    .venv/bin/python bench/bench_lexical.py --speed    # speed only
    .venv/bin/python bench/bench_lexical.py --recall   # recall and the name/title weight sweep

Speed: index build (tokenizing the tools, then building the index) and one
query's search, p50/p99, at 500, 1,490, 5,000 and 10,000 generated tools, next
to rank-bm25's own get_scores for the same queries (its CPU p50).
Recall: the tools under shared/toolsearch/data/catalog as one catalog; for each
question (English and Lithuanian), hit@5 = any expected tool in the top 5,
recall@5 = share of its expected tools in the top 5.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

from rank_bm25 import BM25Okapi

from toolsearch.catalogs.catalog import Catalog, make_tool
from toolsearch.search.documents import document_tokens
from toolsearch.search.lexical import LexicalIndex
from toolsearch.search.text import tokenize_query

SIZES = (500, 1490, 5000, 10000)
DATA = Path(__file__).resolve().parent.parent / "shared" / "toolsearch" / "data"

VERBS = "get list create update delete search send archive export import sync approve cancel assign".split()  # noqa: SIM905
NOUNS = (  # noqa: SIM905
    "invoice bill payment refund customer vendor order product shipment ticket issue comment user team "
    "channel message email thread calendar event meeting file folder document page report dashboard "
    "project task sprint milestone repository branch commit deployment alert incident metric log "
    "subscription plan coupon discount account contact lead deal campaign survey form record note"
).split()
COMMON = (  # noqa: SIM905
    "the a of to for in with by from and or this that when which returns optional required list id name "
    "date time status value default page cursor limit filter sort field object string number"
).split()


def _pseudo_words(rng: random.Random, count: int) -> list[str]:
    letters = "abcdefghijklmnoprstuvz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(4, 10))) for _ in range(count)]


def generated_tools(count: int, seed: int = 7) -> list:
    """Tools shaped like real ones: service_verb_noun names, 15-60 word descriptions, 1-6 parameters."""
    rng = random.Random(seed)
    services = _pseudo_words(rng, max(20, count // 25))
    rare = _pseudo_words(rng, 4000)
    vocabulary = COMMON * 8 + NOUNS * 3 + VERBS * 2 + rare  # a skewed, Zipf-like mix

    def sentence(low: int, high: int) -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(rng.randint(low, high)))

    tools, names = [], set()
    while len(tools) < count:
        name = f"{rng.choice(services)}_{rng.choice(VERBS)}_{rng.choice(NOUNS)}"
        if name in names:
            name = f"{name}_{len(tools)}"
        names.add(name)
        properties = {
            f"{rng.choice(NOUNS)}_{rng.choice(COMMON)}": {"type": "string", "description": sentence(3, 12)}
            for _ in range(rng.randint(1, 6))
        }
        definition = {
            "name": name,
            "description": sentence(15, 60),
            "inputSchema": {"properties": properties},
        }
        tools.append(make_tool(definition))
    return tools, vocabulary, services


def generated_queries(
    rng: random.Random, vocabulary: list[str], services: list[str], count: int
) -> list[str]:
    return [
        f"{rng.choice(VERBS)} {rng.choice(NOUNS)} {rng.choice(services)} "
        + " ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 5)))
        for _ in range(count)
    ]


def _percentiles_ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e3, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e3


def bench_speed(queries_per_size: int = 400) -> None:
    """Wall-clock and CPU time: on a busy machine the CPU figures are the ones to compare."""
    print("CPU seconds for the build; search per query in ms, wall (CPU); index arrays in MB")
    print("size    tokenize_s index_s   search_p50       search_p99       rank_bm25_p50  arrays_MB")
    for size in SIZES:
        tools, vocabulary, services = generated_tools(size)
        started = time.process_time()
        documents = [document_tokens(tool) for tool in tools]
        tokenized = time.process_time()
        index = LexicalIndex(documents)
        built = time.process_time()
        rng = random.Random(size)
        queries = generated_queries(rng, vocabulary, services, queries_per_size)
        index.search(queries[:20], 10)  # warm the stem cache, as a warm Lambda has
        wall, cpu = [], []
        for query in queries:
            start, start_cpu = time.perf_counter(), time.process_time()
            index.search([query], 10)
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        reference = BM25Okapi(documents)
        reference_cpu = []
        for query in queries[:40]:
            terms = tokenize_query(query)
            start_cpu = time.process_time()
            reference.get_scores(terms)
            reference_cpu.append(time.process_time() - start_cpu)
        (p50, p99), (cpu50, cpu99) = _percentiles_ms(wall), _percentiles_ms(cpu)
        arrays = sum(a.nbytes for a in (index._positions, index._contributions, index._starts)) / 1e6
        print(
            f"{size:<7} {tokenized - started:>10.3f} {built - tokenized:>7.3f}"
            f" {p50:>7.3f} ({cpu50:.3f}) {p99:>7.3f} ({cpu99:.3f}) {_percentiles_ms(reference_cpu)[0]:>13.3f}"
            f" {arrays:>10.1f}"
        )


def evaluation_set() -> tuple[Catalog, list[dict]]:
    definitions, questions = [], []
    for path in sorted((DATA / "catalog").glob("*.json")):
        definitions += json.loads(path.read_text())
    for path in sorted((DATA / "questions").glob("*.json")):
        questions += json.loads(path.read_text())
    return Catalog.from_definitions(definitions), questions


def recall_at_5(
    catalog: Catalog, questions: list[dict], index: LexicalIndex, language: str
) -> tuple[float, float]:
    names = [tool.name for tool in catalog.tools]
    hits = recall = 0.0
    asked = [q for q in questions if q.get(language) and q.get("tools")]
    for question in asked:
        found = {names[hit.position] for hit in index.search([question[language]], 5)[0]}
        expected = set(question["tools"])
        hits += bool(found & expected)
        recall += len(found & expected) / min(len(expected), 5)
    return hits / max(len(asked), 1), recall / max(len(asked), 1)


def bench_recall() -> None:
    catalog, questions = evaluation_set()
    if not catalog.tools or not questions:
        print("no evaluation set under", DATA)
        return
    print(f"evaluation set: {len(catalog)} tools, {len(questions)} questions")
    print("name_w title_w   en_hit@5 en_recall@5   lt_hit@5 lt_recall@5")
    for name_weight, title_weight in [(1, 1), (1, 0), (2, 1), (2, 2), (3, 1), (3, 2), (4, 2), (5, 2), (6, 3)]:
        index = LexicalIndex([document_tokens(t, name_weight, title_weight) for t in catalog.tools])
        en = recall_at_5(catalog, questions, index, "en")
        lt = recall_at_5(catalog, questions, index, "lt")
        print(
            f"{name_weight:>6} {title_weight:>7} {en[0]:>10.1%} {en[1]:>11.1%} {lt[0]:>10.1%} {lt[1]:>11.1%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--speed", action="store_true", help="speed only")
    parser.add_argument("--recall", action="store_true", help="recall only")
    args = parser.parse_args()
    if not args.recall:
        bench_speed()
    if not args.speed:
        bench_recall()


if __name__ == "__main__":
    main()
