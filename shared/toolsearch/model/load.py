"""Load a model2vec model folder as an `Embedder`: texts in, unit vectors out.

Two loaders share one interface:

- `load_embedder(dir)` (the default) memory-maps the embedding matrix straight
  out of `model.safetensors` and tokenizes with the folder's `tokenizer.json`
  through `tokenizers`. Nothing is copied: rows are paged in when a token is
  first used, so a cold start does not read the whole matrix. A Unigram
  tokenizer (potion's) is held as a plain vocabulary (`unigram.py`), which
  loads in a fraction of the time and memory of `tokenizers`' own and gives
  the same ids.
- `load_embedder(dir, mmap=False)` is model2vec's own `StaticModel.from_pretrained`,
  kept as the reference the fast path is tested against.

For the production shape (500,353 tokens) `StaticModel` costs seconds beyond
reading the files: its constructor deep-copies the tokenizer, sorts the whole
vocabulary and serialises the tokenizer to JSON to find the unknown token
(`bench/bench_model_load.py` prints the figures; docs/benchmarks.md, "Cold
start", quotes them). The fast path does none of that and computes the same
vectors: model2vec's tokenization (no special tokens, unknown tokens dropped, at
most `max_length` tokens) and mean pooling, with the optional per-token
`weights` and `mapping` tensors. The one difference: model2vec first cuts a text
at `max_length` x the vocabulary's median token length in characters, which
needs the sorted vocabulary; here a text is cut at `max_length` x 16 characters
(a guard against huge inputs) and then at `max_length` tokens, so the two agree
on any text shorter than that.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from toolsearch.search import Embedder

from ..errors import ToolsearchError

BUNDLED_MODEL_DIR = Path(__file__).resolve().parent.parent / "data" / "model"
LAMBDA_MODEL_DIR = Path("/opt/model")
DEFAULT_MAX_LENGTH = 512
_CHARS_PER_TOKEN_GUARD = 16
_TOKENS_PER_BLOCK = 4096

SAFETENSORS_DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
}


class ModelLoadError(ToolsearchError):
    """The folder is not a loadable model2vec model; the message says what is wrong."""


def resolve_model_dir(configured: str | Path = "") -> Path | None:
    """The model folder to use: the setting, else the Lambda layer's /opt/model, else the bundled one."""
    if str(configured):
        return Path(configured)
    for candidate in (LAMBDA_MODEL_DIR, BUNDLED_MODEL_DIR):
        if (candidate / "model.safetensors").is_file():
            return candidate
    return None


# -- safetensors, read by hand so the matrix can be memory-mapped


@dataclass(frozen=True)
class TensorInfo:
    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int  # from the start of the file
    nbytes: int


def read_safetensors_header(path: Path) -> dict[str, TensorInfo]:
    """The tensors in a safetensors file: 8-byte little-endian header length, JSON header, then data."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            if header_len > min(size - 8, 100_000_000):
                raise ModelLoadError(f"{path.name}: header length {header_len} does not fit the file")
            header = json.loads(f.read(header_len))
    except (OSError, struct.error, ValueError) as exc:
        raise ModelLoadError(f"{path.name}: not a safetensors file: {exc}") from exc
    data_start = 8 + header_len
    tensors: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = SAFETENSORS_DTYPES[entry["dtype"]]
            shape = tuple(int(d) for d in entry["shape"])
            begin, end = (int(x) for x in entry["data_offsets"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelLoadError(f"{path.name}: tensor {name!r}: unsupported entry {entry!r}") from exc
        nbytes = math.prod(shape) * dtype.itemsize
        if end - begin != nbytes or begin < 0 or data_start + end > size:
            raise ModelLoadError(f"{path.name}: tensor {name!r}: offsets {begin}..{end} do not fit {shape}")
        tensors[name] = TensorInfo(dtype, shape, data_start + begin, nbytes)
    return tensors


def map_tensor(path: Path, info: TensorInfo) -> np.ndarray:
    """A read-only view of the tensor's bytes in the file (paged in on use)."""
    if info.nbytes == 0:
        return np.zeros(info.shape, info.dtype)
    return np.memmap(path, dtype=info.dtype, mode="r", offset=info.offset, shape=info.shape)


def read_tensor(path: Path, info: TensorInfo) -> np.ndarray:
    return np.array(map_tensor(path, info))


# -- the fast embedder


_UNK_ID = re.compile(rb'"unk_id"\s*:\s*(null|\d+)')


def _unk_token_id(tokenizer: Any, tokenizer_path: Path) -> int | None:
    """The id model2vec drops from every text (the unknown token), found without re-serialising."""
    model = tokenizer.model
    if hasattr(model, "unk_token"):  # WordPiece, BPE, WordLevel
        token = model.unk_token
        return None if token is None else tokenizer.token_to_id(token)
    # Unigram keeps it as `model.unk_id` in tokenizer.json; the first match is that key (inside
    # a JSON string the quotes would be escaped).
    found = _UNK_ID.search(tokenizer_path.read_bytes())
    if found is None or found.group(1) == b"null":
        return None
    return int(found.group(1))


class StaticEmbedder:
    """Mean of (optionally weighted) token vectors from a memory-mapped matrix, L2-normalised."""

    def __init__(
        self,
        embeddings: np.ndarray,
        tokenizer: Any,
        *,
        unk_id: int | None,
        weights: np.ndarray | None = None,
        mapping: np.ndarray | None = None,
        max_length: int | None = DEFAULT_MAX_LENGTH,
    ):
        self.embeddings = embeddings
        self.weights = None if weights is None else weights.astype(np.float32)
        self.mapping = mapping
        self.tokenizer = tokenizer
        self.unk_id = unk_id
        self.max_length = max_length
        self.dim = int(embeddings.shape[1])
        tokenizer.no_padding()
        if max_length is None:
            tokenizer.no_truncation()
        else:
            tokenizer.enable_truncation(max_length)

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        if self.max_length is not None:
            limit = self.max_length * _CHARS_PER_TOKEN_GUARD
            texts = [t[:limit] for t in texts]
        encodings = self.tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        if self.unk_id is None:
            return [e.ids for e in encodings]
        return [[i for i in e.ids if i != self.unk_id] for e in encodings]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("encode takes a list of texts, not one string")
        out = np.zeros((len(texts), self.dim), np.float32)
        if not texts:
            return out
        ids = self.token_ids(texts)
        # Texts with the same number of tokens pool as one (texts, tokens, dim) block, a few
        # thousand tokens at a time so the gathered rows stay small.
        by_length: dict[int, list[int]] = defaultdict(list)
        for position, token_list in enumerate(ids):
            if token_list:
                by_length[len(token_list)].append(position)
        for length, members in by_length.items():
            step = max(1, _TOKENS_PER_BLOCK // length)
            for first in range(0, len(members), step):
                chunk = members[first : first + step]
                token_matrix = np.array([ids[m] for m in chunk], np.int64)
                rows = token_matrix if self.mapping is None else self.mapping[token_matrix]
                vectors = self.embeddings[rows].astype(np.float32)
                if self.weights is not None:
                    vectors *= self.weights[token_matrix][..., None]
                out[chunk] = vectors.mean(axis=1)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


class Model2VecEmbedder:
    """model2vec's own StaticModel behind the same interface (the reference; slower to load)."""

    def __init__(self, model: Any):
        self.model = model
        self.dim = int(model.dim)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("encode takes a list of texts, not one string")
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        # No multiprocessing: Lambda has no /dev/shm, and batches here are small.
        vectors = self.model.encode(list(texts), normalize=True, use_multiprocessing=False)
        return np.asarray(vectors, np.float32)


def _load_tokenizer(tokenizer_path: Path) -> tuple[Any, int | None]:
    """The folder's tokenizer and its unknown token's id: a Unigram one as a plain vocabulary,
    any other through `tokenizers`. Raises ModelLoadError when it cannot be read."""
    from toolsearch.model.unigram import NotUnigram, SubVocabularyTokenizer

    try:
        sub = SubVocabularyTokenizer.from_folder(tokenizer_path.parent)
        return sub, sub.unk_id
    except NotUnigram:
        pass
    except Exception as exc:  # bad JSON, or tokenizers refusing the pipeline
        raise ModelLoadError(f"{tokenizer_path}: {exc}") from exc
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
    except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
        raise ModelLoadError(f"{tokenizer_path}: {exc}") from exc
    return tokenizer, _unk_token_id(tokenizer, tokenizer_path)


def _read_config(folder: Path) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path}: {exc}") from exc
    return config if isinstance(config, dict) else {}


def load_embedder(model_dir: str | Path, *, mmap: bool = True) -> Embedder:
    """Load the model2vec model in `model_dir`. Raises ModelLoadError when it is not loadable."""
    folder = Path(model_dir)
    weights_path, tokenizer_path = folder / "model.safetensors", folder / "tokenizer.json"
    for needed in (weights_path, tokenizer_path):
        if not needed.is_file():
            raise ModelLoadError(f"{folder}: no {needed.name}")
    config = _read_config(folder)
    max_length = config.get("max_length", DEFAULT_MAX_LENGTH)

    if not mmap:
        from model2vec import StaticModel

        try:
            return Model2VecEmbedder(StaticModel.from_pretrained(folder, normalize=True))
        except Exception as exc:  # model2vec raises many kinds; the caller needs one
            raise ModelLoadError(f"{folder}: model2vec could not load it: {exc}") from exc

    tensors = read_safetensors_header(weights_path)
    if "embeddings" not in tensors:
        raise ModelLoadError(f"{weights_path}: no 'embeddings' tensor (found {sorted(tensors)})")
    info = tensors["embeddings"]
    if len(info.shape) != 2 or info.dtype.kind not in "fi":
        raise ModelLoadError(f"{weights_path}: embeddings must be a 2-D float or int8 matrix")
    embeddings = map_tensor(weights_path, info)
    weights = read_tensor(weights_path, tensors["weights"]) if "weights" in tensors else None
    mapping = read_tensor(weights_path, tensors["mapping"]) if "mapping" in tensors else None
    tokenizer, unk_id = _load_tokenizer(tokenizer_path)
    vocab = tokenizer.get_vocab_size()
    rows_needed = vocab if mapping is None else len(mapping)
    if mapping is None and info.shape[0] != vocab:
        raise ModelLoadError(f"{folder}: {info.shape[0]} vectors for {vocab} tokens")
    if mapping is not None and (len(mapping) != vocab or int(mapping.max(initial=0)) >= info.shape[0]):
        raise ModelLoadError(f"{folder}: token mapping does not fit {vocab} tokens and {info.shape[0]} rows")
    if weights is not None and len(weights) != rows_needed:
        raise ModelLoadError(f"{folder}: {len(weights)} weights for {rows_needed} tokens")
    return StaticEmbedder(
        embeddings,
        tokenizer,
        unk_id=unk_id,
        weights=weights,
        mapping=mapping,
        max_length=max_length,
    )
