"""Align the distilled static model across English and Lithuanian (multilingual distillation).

Reimers & Gurevych (2020) applied to a static model: the token vectors of the full float32 model
(``static-full-f32``) are fine-tuned so that student(english) ~ target(english) and
student(lithuanian translation) ~ target(english), where the target is the teacher transformer's
embedding of the *English* sentence. Lithuanian pieces so move towards the meaning of their English
counterparts, and the English side keeps its place.

Data: English -> Lithuanian message pairs from the gettext catalogs of pinned Debian packages
(``tools/devmodel/gettext-packages.lock``: name=version and the .deb's SHA-256), read with
``gettext``. Nothing from the evaluation set is used.

Target space: the student lives in model2vec's 256-d PCA space (with SIF weights folded in), which
the distillation does not keep. A linear map from the teacher's 384-d sentence vectors to the
student's 256-d sentence vectors is fitted by least squares on the training English sentences
(what the student already approximates), then frozen; targets are the mapped teacher vectors.

Run inside the build venv (``build_dev_model.sh`` runs it as step 5 unless ``--no-align``). Steps
cache into --cache-dir.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

# The pairs are read by the new pipeline's module (tools/devmodel), shared with steps 5 and 7 here.
from tools.devmodel.gettext_pairs import load_pairs

LOG = logging.getLogger("align_dev_model")
HERE = Path(__file__).resolve().parent
PREFIX = "query: "
ALIGNED_NAME = "static-aligned-f32"
SEED = 0

# --------------------------------------------------------------------------- teacher


def teacher_vectors(transformer_dir: Path, texts: list[str], batch: int = 64) -> np.ndarray:
    """multilingual-e5-small sentence vectors (mean pooling, L2-normalised), PREFIX added."""
    import torch
    from transformers import AutoTokenizer, BertModel

    torch.manual_seed(SEED)
    tokenizer = AutoTokenizer.from_pretrained(str(transformer_dir))
    model = BertModel.from_pretrained(str(transformer_dir)).eval()
    order = np.argsort([len(t) for t in texts], kind="stable")
    out = np.zeros((len(texts), model.config.hidden_size), np.float32)
    with torch.inference_mode():
        for first in range(0, len(texts), batch):
            idx = order[first : first + batch]
            enc = tokenizer(
                [PREFIX + texts[i] for i in idx],
                padding=True,
                truncation=True,
                max_length=128,
                return_tensors="pt",
            )
            hidden = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).float()
            pooled = (hidden * mask).sum(1) / mask.sum(1)
            out[idx] = torch.nn.functional.normalize(pooled, dim=-1).numpy()
    return out


def cached_teacher_vectors(transformer_dir: Path, en: list[str], cache_dir: Path) -> np.ndarray:
    key = hashlib.sha256("\n".join([PREFIX, *en]).encode()).hexdigest()[:16]
    cache = cache_dir / f"align-teacher-{key}.npy"
    if cache.exists():
        return np.load(cache)
    started = time.monotonic()
    teacher = teacher_vectors(transformer_dir, en)
    np.save(cache, teacher)
    LOG.info("teacher: %d sentences in %.0f s", len(en), time.monotonic() - started)
    return teacher


# --------------------------------------------------------------------------- student


def token_ids(tokenizer, unk_id: int, texts: list[str]) -> list[list[int]]:
    """model2vec's tokenization: no special tokens, unknown dropped."""
    return [
        [i for i in e.ids if i != unk_id] for e in tokenizer.encode_batch(texts, add_special_tokens=False)
    ]


def bag(ids: list[list[int]]):
    import torch

    flat = torch.tensor([i for row in ids for i in row], dtype=torch.long)
    offsets = torch.tensor(np.cumsum([0, *[len(r) for r in ids[:-1]]]), dtype=torch.long)
    return flat, offsets


def split_pairs(
    en_ids: list[list[int]], lt_ids: list[list[int]], rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(held, train) pair indices: 5% (at least 200) of the pairs with tokens on both sides held out."""
    usable = [k for k in range(len(en_ids)) if en_ids[k] and lt_ids[k]]
    order = rng.permutation(usable)
    n_held = max(200, len(order) // 20)
    return np.sort(order[:n_held]), np.sort(order[n_held:])


def mean_pool(table, ids: list[list[int]]):
    """Unit sentence vectors: the mean of each sentence's token rows in `table` (an EmbeddingBag)."""
    import torch

    flat, offsets = bag(ids)
    return torch.nn.functional.normalize(table(flat, offsets), dim=-1)


def train_towards(
    table,
    en_ids: list[list[int]],
    lt_ids: list[list[int]],
    targets,
    train: np.ndarray,
    held: np.ndarray,
    rng: np.random.Generator,
    *,
    epochs: int,
    lr: float,
    score: Callable[[dict], float],
    batch: int = 64,
    en_weight: float = 1.0,
    frozen=None,
    patience: int | None = None,
) -> tuple[dict, object]:
    """Fine-tune the token vectors of `table` (a mean EmbeddingBag) so that each pair's English and
    Lithuanian sentences land on its target: loss (1 - cos), English side times `en_weight`.

    After each epoch the held-out pairs are scored; the epoch with the highest `score(report)` is
    kept (its vectors are returned), and training stops after `patience` epochs without a better
    one. Rows in `frozen` are put back after every step.
    """
    import torch

    def student(ids: list[list[int]]):
        return mean_pool(table, ids)

    def held_out() -> dict:
        with torch.no_grad():
            se, sl = student([en_ids[k] for k in held]), student([lt_ids[k] for k in held])
            goal = targets[held]
            lt2en = ((sl @ se.T).argmax(1) == torch.arange(len(held))).float().mean()
            return {
                "cos_en": round(float((se * goal).sum(1).mean()), 4),
                "cos_lt": round(float((sl * goal).sum(1).mean()), 4),
                "lt2en_top1": round(float(lt2en), 4),  # Lithuanian -> English retrieval among held-out pairs
            }

    frozen_rows = table.weight.detach()[frozen].clone() if frozen is not None and len(frozen) else None
    best = held_out() | {"epoch": 0}
    LOG.info("before training: %s", best)
    best_weights = table.weight.detach().clone()
    optimizer = torch.optim.SparseAdam(table.parameters(), lr=lr)
    for epoch in range(1, epochs + 1):
        order = rng.permutation(train)
        for first in range(0, len(order), batch):
            idx = order[first : first + batch]
            goal = targets[idx]
            loss = (1 - (student([en_ids[k] for k in idx]) * goal).sum(1)).mean() * en_weight
            loss = loss + (1 - (student([lt_ids[k] for k in idx]) * goal).sum(1)).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if frozen_rows is not None:
                with torch.no_grad():
                    table.weight[frozen] = frozen_rows
        report = held_out() | {"epoch": epoch}
        LOG.info("epoch %d: %s", epoch, report)
        if score(report) > score(best):
            best, best_weights = report, table.weight.detach().clone()
        elif patience is not None and epoch - best["epoch"] >= patience:
            break
    return best, best_weights


def align(full_dir: Path, out_dir: Path, transformer_dir: Path, pairs: list[tuple[str, str]], args) -> dict:
    import torch
    from safetensors.numpy import load_file, save_file
    from tokenizers import Tokenizer

    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    rng = np.random.default_rng(SEED)
    spec = json.loads((full_dir / "tokenizer.json").read_text())
    tokenizer = Tokenizer.from_file(str(full_dir / "tokenizer.json"))
    unk_id = spec["model"]["unk_id"]
    weights = load_file(str(full_dir / "model.safetensors"))["embeddings"]

    en = [p[0] for p in pairs]
    lt = [p[1] for p in pairs]
    en_ids, lt_ids = token_ids(tokenizer, unk_id, en), token_ids(tokenizer, unk_id, lt)
    usable = [k for k in range(len(pairs)) if en_ids[k] and lt_ids[k]]
    held, train = split_pairs(en_ids, lt_ids, rng)

    table = torch.nn.EmbeddingBag.from_pretrained(
        torch.from_numpy(weights.copy()), freeze=False, mode="mean", sparse=True
    )
    original = torch.from_numpy(weights.copy())

    if args.target == "student":  # the distilled model's own English vector: English stays put
        with torch.no_grad():
            targets = torch.zeros(len(en), weights.shape[1])
            targets[usable] = mean_pool(table, [en_ids[k] for k in usable])
    else:
        teacher = cached_teacher_vectors(transformer_dir, en, out_dir.parent)
        # Frozen least-squares map teacher(384) -> student(256), fitted on the training English side.
        with torch.no_grad():
            s_en = mean_pool(table, [en_ids[k] for k in train]).numpy()
        t = teacher[train]
        mapping, *_ = np.linalg.lstsq(np.c_[t, np.ones(len(t))], s_en, rcond=None)
        mapped = np.c_[teacher, np.ones(len(teacher))] @ mapping
        mapped /= np.linalg.norm(mapped, axis=1, keepdims=True)
        targets = torch.from_numpy(mapped.astype(np.float32))

    # Frozen rows stay as distilled so English embeddings barely move: "english" freezes every piece
    # the English side uses, "english-majority" only those English uses at least as often as
    # Lithuanian (short pieces both languages share may still learn for Lithuanian).
    en_count = np.bincount([i for k in train for i in en_ids[k]], minlength=len(weights))
    lt_count = np.bincount([i for k in train for i in lt_ids[k]], minlength=len(weights))
    if args.freeze == "english":
        frozen_mask = en_count > 0
    elif args.freeze == "english-majority":  # pieces Lithuanian uses more often may still learn
        frozen_mask = (en_count > 0) & (en_count >= lt_count)
    else:
        frozen_mask = np.zeros(len(weights), bool)
    frozen = torch.from_numpy(np.flatnonzero(frozen_mask))
    LOG.info("%d rows frozen", len(frozen))

    best, best_weights = train_towards(
        table,
        en_ids,
        lt_ids,
        targets,
        train,
        held,
        rng,
        epochs=args.epochs,
        lr=args.lr,
        batch=args.batch,
        en_weight=args.en_weight,
        frozen=frozen,
        score=lambda report: report["lt2en_top1"],
        patience=2,
    )
    moved = (best_weights - original).norm(dim=1)
    LOG.info("kept epoch %d; %d rows moved", best["epoch"], int((moved > 0).sum()))

    tmp = out_dir.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(full_dir, tmp)
    save_file({"embeddings": best_weights.numpy()}, str(tmp / "model.safetensors"))
    (tmp / "model.safetensors").chmod(0o644)
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return best | {"pairs": len(pairs), "train": len(train), "held": len(held)}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache-dir", type=Path, default=HERE.parents[2] / ".cache" / "devmodel")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.003)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--en-weight", type=float, default=1.0, help="weight of the English side's loss")
    p.add_argument("--target", choices=("teacher", "student"), default="student", help="see the docstring")
    p.add_argument("--freeze", choices=("english", "english-majority", "none"), default="english-majority")
    p.add_argument("--out-name", default=ALIGNED_NAME)
    return p


def ensure_aligned(
    cache: Path,
    *,
    force: bool = False,
    argv: list[str] | None = None,
    pairs: list[tuple[str, str]] | None = None,
) -> Path:
    """The aligned full model in cache (built once with the default settings; cached)."""
    args = parser().parse_args([*(argv or []), "--cache-dir", str(cache)])
    out = cache / args.out_name
    if force or not (out / "model.safetensors").exists():
        pairs = load_pairs(cache) if pairs is None else pairs
        report = align(cache / "static-full-f32", out, cache / "e5-small-f32", pairs, args)
        LOG.info("aligned: %s", report)
    return out


def main() -> None:
    import sys

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    ensure_aligned(parser().parse_args().cache_dir, force=True, argv=sys.argv[1:])


if __name__ == "__main__":
    main()
