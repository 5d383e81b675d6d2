"""Step 7 of the build: move the development model into all-MiniLM-L6-v2's sentence space.

Why: in users' own words, all-MiniLM-L6-v2 (Apache-2.0; English only) finds more of the evaluation
set's requests than multilingual-e5-small, the transformer the vectors were distilled from (46.0%
against 38.5% at 5; ``evaluate_teachers.py``). This step keeps the multilingual vocabulary and its
Lithuanian alignment, and teaches the token vectors MiniLM's geometry instead of e5's:

1. Teacher: MiniLM's vector of the English side of every alignment pair (``align_dev_model.py``'s
   Debian gettext pairs; nothing from the evaluation set), cached by the pairs' digest.
2. Map: a least-squares linear map from the model's mean-pooled English sentence vectors (256-d)
   to the teacher's (384-d), fitted on the training pairs; every token vector is mapped through it.
3. Train: the mapped token vectors are fine-tuned (mean pooling, cosine loss) so that an English
   sentence and its Lithuanian translation both land on the teacher's vector of the English one.
   SparseAdam, lr 0.003, batch 64, ``EPOCHS`` epochs; the epoch with the best held-out
   cos(English) + cos(Lithuanian) to the teacher is kept (5% of the pairs held out). The evaluation
   set plays no part in any choice here.
4. Written as ``toolsearch fetch-model`` prepares a model: PCA (uncentred) to 256 dimensions,
   per-row int8 with the scales as model2vec's per-token ``weights``.

Tokens that no pair uses keep the mapped vector of step 2. Deterministic: same inputs, same bytes.
Run by ``build_dev_model.py`` (or alone: ``venv.sh retarget_dev_model.py SOURCE OUT``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
from pathlib import Path

import numpy as np

LOG = logging.getLogger("retarget_dev_model")
SEED = 0
EPOCHS = 30
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def teacher_vectors(english: list[str], cache_dir: Path) -> np.ndarray:
    import minilm

    digest = hashlib.sha256("\n".join(english).encode()).hexdigest()[:16]
    path = cache_dir / f"teacher-minilm-{digest}.npy"
    if path.exists():
        return np.load(path)
    LOG.info("embedding %d English sentences with all-MiniLM-L6-v2", len(english))
    vectors = minilm.MiniLM().encode(english).astype(np.float32)
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.save(path.with_suffix(".tmp.npy"), vectors)
    path.with_suffix(".tmp.npy").rename(path)
    return vectors


def dequantized(source: Path) -> np.ndarray:
    """The source's token vectors as float32 (int8 times its per-row scales, when it has them)."""
    from safetensors.numpy import load_file

    tensors = load_file(str(source / "model.safetensors"))
    vectors = tensors["embeddings"].astype(np.float32)
    if "weights" in tensors:
        vectors *= tensors["weights"].astype(np.float32)[:, None]
    return vectors


def retarget(
    source: Path, out: Path, pairs: list[tuple[str, str]], cache_dir: Path, epochs: int = EPOCHS
) -> dict:
    import torch
    from align_dev_model import split_pairs, token_ids, train_towards
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer

    from toolsearch.model.build.prepare import quantize_rows_int8, reduce_dims

    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    rng = np.random.default_rng(SEED)
    spec = json.loads((source / "tokenizer.json").read_text())
    tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
    vectors = dequantized(source)
    dims = vectors.shape[1]

    english, lithuanian = [p[0] for p in pairs], [p[1] for p in pairs]
    en_ids = token_ids(tokenizer, spec["model"]["unk_id"], english)
    lt_ids = token_ids(tokenizer, spec["model"]["unk_id"], lithuanian)
    held, train = split_pairs(en_ids, lt_ids, rng)
    targets = torch.from_numpy(teacher_vectors(english, cache_dir))

    # Step 2: the map from this model's sentence space to the teacher's, applied to every token.
    pooled = np.vstack([vectors[en_ids[k]].mean(axis=0) for k in train])
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    mapping, *_ = np.linalg.lstsq(pooled, targets.numpy()[train], rcond=None)
    table = torch.nn.EmbeddingBag.from_pretrained(
        torch.from_numpy((vectors @ mapping).astype(np.float32)), freeze=False, mode="mean", sparse=True
    )

    best, best_vectors = train_towards(
        table,
        en_ids,
        lt_ids,
        targets,
        train,
        held,
        rng,
        epochs=epochs,
        lr=0.003,
        score=lambda report: report["cos_en"] + report["cos_lt"],
    )

    # Step 4: back to `dims` columns, per-row int8.
    reduced, kept = reduce_dims(best_vectors.numpy(), dims, "pca")
    values, scales = quantize_rows_int8(reduced)
    tmp = out.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file({"embeddings": values, "weights": scales}, str(tmp / "model.safetensors"))
    config = json.loads((source / "config.json").read_text())
    config |= {"hidden_dim": dims, "apply_pca": dims, "embedding_dtype": "int8"}
    config["base_model"] = "retargeted at sentence-transformers/all-MiniLM-L6-v2 (retarget_dev_model.py)"
    (tmp / "config.json").write_text(json.dumps(config, indent=4) + "\n")
    shutil.copyfile(source / "tokenizer.json", tmp / "tokenizer.json")
    out.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:  # README.md and LICENSE in out are left alone
        shutil.copyfile(tmp / name, out / name)
        (out / name).chmod(0o644)  # safetensors writes 0600; CI and Lambda read as others
    shutil.rmtree(tmp)
    return best | {"variance_kept": round(kept, 4), "train": len(train), "held": len(held)}


def main() -> None:
    import align_dev_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="the model to retarget (a variant folder)")
    parser.add_argument("out", type=Path)
    default_cache = Path(__file__).resolve().parents[3] / ".cache" / "devmodel"
    parser.add_argument("--cache-dir", type=Path, default=default_cache)
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    pairs = align_dev_model.load_pairs(args.cache_dir)
    LOG.info("retargeted: %s", retarget(args.source, args.out, pairs, args.cache_dir, args.epochs))


if __name__ == "__main__":
    main()
