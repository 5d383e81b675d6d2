"""Fine-tune a model2vec model's token vectors for tool retrieval: `toolsearch fine-tune`.

A static model embeds a text as the normalised mean of its token vectors, so the
vectors themselves are the only parameters, and their gradient is short enough
to write by hand: numpy alone, no torch, minutes on two cores.

The recipe (`FineTuneConfig` holds its numbers):

- Pairs of (request, tool text): a user's request and the text the proxy embeds
  for the tool that answers it (`embedding_text`: name as words, title,
  description). Loss: InfoNCE over the batch's tools (in-batch negatives) plus
  `hard_negatives` tools per request drawn from the same server (the tools a
  search must tell apart).
- English-Lithuanian sentence pairs (Debian's gettext catalogs) as a second
  InfoNCE term, weighted `align_weight`, so Lithuanian stays aligned with
  English while the English side moves; English paraphrase pairs (WordNet:
  a definition and its words, synonyms) as a third, `lexicon_weight`.
- Optionally an L2 pull of every trained row towards its starting vector
  (`anchor`; off by default: it holds the vectors back from the gain; the
  measurement is in tools/devmodel/README.md).
- Row-sparse Adam: only rows of tokens in the batch move.
- Servers, not requests, are held out when `held_out_fraction` > 0 (chosen by a hash of the
  server's name): after each epoch their requests rank every tool of the training set by cosine,
  and the epoch with the best recall@5 (mean of the languages) is kept. That is how the numbers
  here were chosen; the default then trains on every server for the chosen number of epochs and
  keeps the last. Nothing here reads the proxy's evaluation set.

Only rows of tokens that occur in the training texts are trained; the model is
written back as it came (per-row int8 with scales as `weights`, or float32),
same tokenizer, same loader.

One module on purpose, past 400 lines: the loss terms share the pooling and its
hand-written gradient, which must be read together to be checked.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from toolsearch.model.build.prepare import quantize_rows_int8
from toolsearch.model.load import ModelLoadError, load_embedder, read_safetensors_header, read_tensor

LOG = logging.getLogger(__name__)
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")


class FineTuneError(ModelLoadError):
    """The base model or the training set cannot be used as asked."""


@dataclass(frozen=True)
class FineTuneConfig:
    epochs: int = 4  # the best held-out epoch with rounds 1-3 of tools/devmodel's data
    steps_per_epoch: int = 0  # request batches per epoch (0: one pass over the requests)
    lr: float = 0.03  # Adam, in units of the trained rows' mean |coordinate|
    batch: int = 64
    temperature: float = 0.05
    hard_negatives: int = 3  # per request, from the same server
    align_weight: float = 0.5  # English-Lithuanian translation pairs
    lexicon_weight: float = 0.5  # English paraphrase pairs (word and definition, synonyms)
    pair_batch: int = 64  # translation and paraphrase pairs per step, each
    anchor: float = 0.0  # L2 pull towards the starting vectors (off: it held training back)
    held_out_fraction: float = 0.0  # of the servers; 0.15 is how the numbers here were chosen
    max_tokens: int = 64  # longer texts are cut (tool descriptions)
    seed: int = 0


@dataclass
class TrainingSet:
    """Tools by key (their embedded text and server), requests for them, and translation pairs."""

    tools: dict[str, str]  # key -> the text the proxy embeds for the tool
    servers: dict[str, str]  # key -> server (held out as a whole; hard negatives come from it)
    pairs: list[tuple[str, str, str]]  # (request, tool key, language)
    align: list[tuple[str, str]] = field(default_factory=list)  # (english, lithuanian)
    lexicon: list[tuple[str, str]] = field(default_factory=list)  # (text, text meaning the same)

    @classmethod
    def read(cls, path: str | Path) -> TrainingSet:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            tools = {key: item["text"] for key, item in data["tools"].items()}
            servers = {key: item["server"] for key, item in data["tools"].items()}
            pairs = [(q, key, lang) for q, key, lang in data["pairs"]]
            align = [(en, lt) for en, lt in data.get("align", [])]
            lexicon = [(a, b) for a, b in data.get("lexicon", [])]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise FineTuneError(f"{path}: not a training set: {exc}") from exc
        unknown = sorted({key for _, key, _ in pairs} - set(tools))
        if unknown:
            raise FineTuneError(f"{path}: requests for tools it does not define: {unknown[:5]}")
        return cls(tools, servers, pairs, align, lexicon)

    def write(self, path: str | Path) -> None:
        data = {
            "tools": {
                key: {"text": self.tools[key], "server": self.servers[key]} for key in sorted(self.tools)
            },
            "pairs": [list(p) for p in self.pairs],
            "align": [list(p) for p in self.align],
            "lexicon": [list(p) for p in self.lexicon],
        }
        Path(path).write_text(json.dumps(data, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")

    def held_out_servers(self, fraction: float) -> set[str]:
        """Servers whose hash falls below `fraction`: stable whatever else the set holds."""

        def share(server: str) -> float:
            return int(hashlib.sha256(server.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF

        return {s for s in set(self.servers.values()) if share(s) < fraction}


# -- the model as trainable rows


@dataclass
class Rows:
    """The float32 rows of the tokens the training texts use, and how texts map onto them."""

    vectors: np.ndarray  # (active tokens, dim), trained in place
    start: np.ndarray  # the same rows before training
    token_of_row: np.ndarray  # row -> token id in the model

    def encode(self, texts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Unit vectors of texts given as row indices; also their raw norms (for the gradient)."""
        lengths = np.array([len(t) for t in texts])
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        raw = np.add.reduceat(self.vectors[np.concatenate(texts)], starts, axis=0) / lengths[:, None]
        norms = np.maximum(np.linalg.norm(raw, axis=1), 1e-8)
        return raw / norms[:, None], norms, lengths


def backprop(
    grad: np.ndarray,
    texts: list[np.ndarray],
    units: np.ndarray,
    norms: np.ndarray,
    lengths: np.ndarray,
    g_units: np.ndarray,
) -> None:
    """Add d loss / d rows into `grad`, given d loss / d unit vectors of the texts."""
    g_raw = (g_units - (g_units * units).sum(1, keepdims=True) * units) / norms[:, None]
    g_token = np.repeat(g_raw / lengths[:, None], lengths, axis=0)
    # Summed per row by sorting (much faster than np.add.at's unbuffered scatter).
    flat = np.concatenate(texts)
    order = np.argsort(flat, kind="stable")
    rows, first = np.unique(flat[order], return_index=True)
    grad[rows] += np.add.reduceat(g_token[order], first, axis=0)


def info_nce(
    queries: np.ndarray, candidates: np.ndarray, targets: np.ndarray, temperature: float
) -> tuple[float, np.ndarray, np.ndarray]:
    """Cross-entropy of each query's target among the candidates; gradients for both sides."""
    logits = queries @ candidates.T / temperature
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    n = len(queries)
    loss = float(-np.log(probs[np.arange(n), targets] + 1e-12).mean())
    probs[np.arange(n), targets] -= 1.0
    probs /= n * temperature
    return loss, probs @ candidates, probs.T @ queries


class SparseAdam:
    """Adam whose moments and steps touch only the rows given."""

    def __init__(
        self, shape: tuple[int, int], lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
    ) -> None:
        self.m = np.zeros(shape, np.float32)
        self.v = np.zeros(shape, np.float32)
        self.lr, self.b1, self.b2, self.eps = lr, betas[0], betas[1], eps
        self.t = 0

    def step(self, params: np.ndarray, rows: np.ndarray, grad_rows: np.ndarray) -> None:
        self.t += 1
        self.m[rows] = self.b1 * self.m[rows] + (1 - self.b1) * grad_rows
        self.v[rows] = self.b2 * self.v[rows] + (1 - self.b2) * grad_rows**2
        m_hat = self.m[rows] / (1 - self.b1**self.t)
        v_hat = self.v[rows] / (1 - self.b2**self.t)
        params[rows] -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


# -- reading and writing the model


def read_base(model_dir: Path) -> tuple[np.ndarray, bool]:
    """The base model's effective token vectors (int8 times per-row weights) and whether it was int8."""
    path = model_dir / "model.safetensors"
    tensors = read_safetensors_header(path)
    if "embeddings" not in tensors:
        raise FineTuneError(f"{path}: no 'embeddings' tensor")
    if "mapping" in tensors:
        raise FineTuneError(f"{model_dir}: vocabulary-quantized models (a token mapping) are not supported")
    embeddings = read_tensor(path, tensors["embeddings"])
    vectors = embeddings.astype(np.float32)
    if "weights" in tensors:
        vectors *= read_tensor(path, tensors["weights"]).astype(np.float32)[:, None]
    return vectors, embeddings.dtype == np.int8


def write_model(base_dir: Path, out_dir: Path, vectors: np.ndarray, as_int8: bool, note: dict) -> None:
    """The base folder with new vectors: same tokenizer and config, per-row int8 when the base was."""
    from safetensors.numpy import save_file

    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if as_int8:
        values, scales = quantize_rows_int8(vectors)
        save_file({"embeddings": values, "weights": scales}, str(tmp / "model.safetensors"))
    else:
        save_file({"embeddings": np.ascontiguousarray(vectors, np.float32)}, str(tmp / "model.safetensors"))
    config = json.loads((base_dir / "config.json").read_text(encoding="utf-8"))
    config["embedding_dtype"] = "int8" if as_int8 else "float32"
    config["fine_tuned"] = note
    (tmp / "config.json").write_text(json.dumps(config, indent=4) + "\n", encoding="utf-8")
    shutil.copyfile(base_dir / "tokenizer.json", tmp / "tokenizer.json")
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:  # other files already in out_dir (README.md, LICENSE) stay
        (tmp / name).chmod(0o644)  # safetensors writes 0600; Lambda and CI read as others
        shutil.move(str(tmp / name), out_dir / name)
    shutil.rmtree(tmp)


# -- training


def recall_at(ranked: np.ndarray, targets: np.ndarray, k: int) -> float:
    return float((ranked[:, :k] == targets[:, None]).any(axis=1).mean()) if len(targets) else 0.0


def request_batches(n: int, config: FineTuneConfig, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Batches of request indices, a new shuffle for every pass over them, endlessly."""
    while True:
        order = rng.permutation(n)
        for first in range(0, n, config.batch):
            yield order[first : first + config.batch]


def contrast(
    rows: Rows,
    grad: np.ndarray,
    queries: list[np.ndarray],
    candidates: list[np.ndarray],
    targets: np.ndarray,
    config: FineTuneConfig,
    weight: float = 1.0,
) -> tuple[float, list[np.ndarray]]:
    """One InfoNCE term: its loss, its gradient added into `grad`, and the texts it touched."""
    q_units, q_norms, q_lens = rows.encode(queries)
    c_units, c_norms, c_lens = rows.encode(candidates)
    loss, g_q, g_c = info_nce(q_units, c_units, targets, config.temperature)
    backprop(grad, queries, q_units, q_norms, q_lens, g_q * weight)
    backprop(grad, candidates, c_units, c_norms, c_lens, g_c * weight)
    return loss * weight, [*queries, *candidates]


class PairTerm:
    """Sentence pairs that should land together (a translation, a paraphrase): InfoNCE in batches.

    Every 20th pair is held out and scored (first -> second top-1 among the held-out pairs).
    """

    def __init__(
        self,
        name: str,
        first: list[np.ndarray],
        second: list[np.ndarray],
        weight: float,
        rng: np.random.Generator,
    ) -> None:
        usable = [k for k in range(len(first)) if len(first[k]) and len(second[k])]
        self.name, self.first, self.second, self.weight = name, first, second, weight
        self.held = usable[::20] if len(usable) >= 40 else []
        held = set(self.held)
        self.train = rng.permutation([k for k in usable if k not in held]) if weight else np.zeros(0, int)
        self.cursor = 0

    def held_out(self, rows: Rows) -> dict[str, float]:
        if not self.held:
            return {}
        a = rows.encode([self.first[k] for k in self.held])[0]
        b = rows.encode([self.second[k] for k in self.held])[0]
        return {f"{self.name}_top1": round(float(((a @ b.T).argmax(1) == np.arange(len(a))).mean()), 4)}

    def step(self, rows: Rows, grad: np.ndarray, config: FineTuneConfig) -> tuple[float, list[np.ndarray]]:
        if not len(self.train):
            return 0.0, []
        picked = [self.train[(self.cursor + j) % len(self.train)] for j in range(config.pair_batch)]
        picked = list(dict.fromkeys(picked))
        self.cursor += config.pair_batch
        first, second = [self.first[k] for k in picked], [self.second[k] for k in picked]
        return contrast(rows, grad, first, second, np.arange(len(picked)), config, self.weight)


def fine_tune(
    base_dir: str | Path,
    out_dir: str | Path,
    training: TrainingSet,
    config: FineTuneConfig = FineTuneConfig(),
    log: Callable[[str], None] = LOG.info,
) -> dict[str, Any]:
    """Train `base_dir`'s vectors on `training`, write the best epoch to `out_dir`; returns a report."""
    base_dir, out_dir = Path(base_dir), Path(out_dir)
    started = time.monotonic()
    rng = np.random.default_rng(config.seed)
    embedder = load_embedder(base_dir)
    all_vectors, as_int8 = read_base(base_dir)

    def ids(texts: Sequence[str]) -> list[list[int]]:
        return [row[: config.max_tokens] for row in embedder.token_ids(list(texts))]  # type: ignore[attr-defined]

    keys = sorted(training.tools)
    tool_ids = ids([training.tools[k] for k in keys])
    query_ids = ids([q for q, _, _ in training.pairs])
    pair_sets = {"align": training.align, "lexicon": training.lexicon}
    pair_ids = {name: (ids([a for a, _ in p]), ids([b for _, b in p])) for name, p in pair_sets.items()}

    every_text = [*tool_ids, *query_ids, *(t for a, b in pair_ids.values() for t in (*a, *b))]
    token_of_row = np.unique(np.array([t for text in every_text for t in text], np.int64))
    row_of_token = {int(t): r for r, t in enumerate(token_of_row)}

    def as_rows(token_lists: list[list[int]]) -> list[np.ndarray]:
        return [np.array([row_of_token[t] for t in toks], np.int64) for toks in token_lists]

    tools_r, queries_r = as_rows(tool_ids), as_rows(query_ids)
    terms = [
        PairTerm(name, as_rows(a), as_rows(b), weight, rng)
        for (name, (a, b)), weight in zip(
            pair_ids.items(), (config.align_weight, config.lexicon_weight), strict=True
        )
    ]
    # Trained in units of the rows' mean |coordinate|, so that `lr` and `anchor` mean the same for
    # models of any scale (cosines do not change with it).
    scale = float(np.abs(all_vectors[token_of_row]).mean()) or 1.0
    start = all_vectors[token_of_row] / scale
    rows = Rows(start.copy(), start, token_of_row)

    position = {k: i for i, k in enumerate(keys)}
    held_servers = training.held_out_servers(config.held_out_fraction)
    by_server: dict[str, list[int]] = defaultdict(list)
    for k in keys:
        if len(tools_r[position[k]]):
            by_server[training.servers[k]].append(position[k])
    usable = [
        (i, position[key], lang)
        for i, (_, key, lang) in enumerate(training.pairs)
        if len(queries_r[i]) and len(tools_r[position[key]])
    ]
    train = [u for u in usable if training.servers[keys[u[1]]] not in held_servers]
    held = [u for u in usable if training.servers[keys[u[1]]] in held_servers]
    rankable = [i for i in range(len(keys)) if len(tools_r[i])]
    languages = sorted({lang for _, _, lang in held})

    def held_out_report() -> dict[str, Any]:
        tool_units = rows.encode([tools_r[i] for i in rankable])[0]
        report: dict[str, Any] = {}
        for lang in languages:
            mine = [u for u in held if u[2] == lang]
            units = rows.encode([queries_r[u[0]] for u in mine])[0]
            order = np.argsort(-(units @ tool_units.T), axis=1, kind="stable")[:, :10]
            ranked = np.array(rankable)[order]
            report[f"r5_{lang}"] = round(recall_at(ranked, np.array([u[1] for u in mine]), 5), 4)
        for term in terms:
            report |= term.held_out(rows)
        return report

    def score(report: dict[str, Any]) -> float:
        values = [report[f"r5_{lang}"] for lang in languages]
        return float(np.mean(values)) if values else 0.0

    log(
        f"{len(keys)} tools, {len(train)} training requests, {len(held)} held out"
        f" ({len(held_servers)} servers), "
        + ", ".join(f"{len(t.train)} {t.name} pairs" for t in terms)
        + f", {len(token_of_row)} rows trained"
    )
    best = held_out_report() | {"epoch": 0}
    log(f"before training: {best}")
    best_vectors = rows.vectors.copy()
    optimizer = SparseAdam(rows.vectors.shape, config.lr)
    grad = np.zeros_like(rows.vectors)
    batches = request_batches(len(train), config, rng)
    for epoch in range(1, config.epochs + 1):
        losses = []
        for _ in range(config.steps_per_epoch or -(-len(train) // config.batch)):
            batch = [train[j] for j in next(batches)]
            candidates = list(dict.fromkeys(tool for _, tool, _ in batch))
            for _, tool, _ in batch:
                pool = [t for t in by_server[training.servers[keys[tool]]] if t != tool]
                if pool and config.hard_negatives:
                    picks = rng.choice(len(pool), size=min(config.hard_negatives, len(pool)), replace=False)
                    candidates.extend(pool[p] for p in picks)
            candidates = list(dict.fromkeys(candidates))
            column = {t: c for c, t in enumerate(candidates)}
            targets = np.array([column[t] for _, t, _ in batch])
            loss, touched = contrast(
                rows,
                grad,
                [queries_r[i] for i, _, _ in batch],
                [tools_r[t] for t in candidates],
                targets,
                config,
            )
            for term in terms:
                term_loss, term_touched = term.step(rows, grad, config)
                loss += term_loss
                touched += term_touched
            changed = np.unique(np.concatenate(touched))
            g = grad[changed] + config.anchor * (rows.vectors[changed] - rows.start[changed])
            optimizer.step(rows.vectors, changed, g)
            grad[changed] = 0.0
            losses.append(loss)
        report = held_out_report() | {"epoch": epoch, "loss": round(float(np.mean(losses)), 4)}
        log(f"epoch {epoch}: {report}")
        if score(report) > score(best) or not held:  # nothing held out: the last epoch
            best, best_vectors = report, rows.vectors.copy()

    all_vectors[token_of_row] = best_vectors * scale
    note = {"recipe": asdict(config), "held_out": best, "rows_trained": len(token_of_row)}
    write_model(base_dir, out_dir, all_vectors, as_int8, note)
    return note | {"seconds": round(time.monotonic() - started, 1), "train": len(train), "held": len(held)}
