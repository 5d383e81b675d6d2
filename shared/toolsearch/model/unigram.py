"""A Unigram tokenizer that loads in a fraction of the time and memory `tokenizers` needs.

`tokenizers` builds a byte trie of every piece when it loads a Unigram model: for the
production model's 500,353 pieces that is most of a cold start's time and memory
(docs/benchmarks.md, "Cold start"). Yet a text can only ever be cut into pieces that occur in
it. So this tokenizer looks up which pieces occur in the texts of a call (every substring of
every pre-tokenized word, up to the longest piece) and hands exactly those, with their scores,
to a `tokenizers` Unigram model built for the call. The cutting itself (normalizer,
pre-tokenizer, added tokens, Viterbi, unknown-token handling, truncation) is still
`tokenizers`' own code, so the ids are those of the full tokenizer; the vocabulary's
lowest-scoring piece is always included, because the unknown-token penalty is counted from the
lowest score.

The vocabulary is memory-mapped from a sidecar file, `tokenizer.unigram`, written beside
tokenizer.json when a model is prepared (`toolsearch fetch-model`) and when the Lambda layer is
built (layers/model/Makefile runs this file as a script, with the standard library alone).
Pieces are grouped by their first two characters; a group is decoded into a dict the first
time a text needs it, so a cold start reads a small header, and memory grows with the
languages the catalog and the queries use, not with the vocabulary. Without a sidecar (or with
one written for another tokenizer.json) the vocabulary is read from tokenizer.json itself:
slower, the same ids.

    python shared/toolsearch/model/unigram.py MODEL_DIR    # write MODEL_DIR/tokenizer.unigram
"""

from __future__ import annotations

import array
import hashlib
import json
import mmap
import os
import struct
import sys
from pathlib import Path
from typing import Any

try:
    from ..errors import ToolsearchError
except ImportError:  # run as a script (the layer's build): no package, the standard library alone
    ToolsearchError = Exception  # type: ignore[misc,assignment]

SIDECAR_NAME = "tokenizer.unigram"
_MAGIC = b"toolsearch-unigram-2\n"
_EDGE = 1 << 20  # bytes of tokenizer.json's start and end that identify it
_WORD_CACHE_LIMIT = 200_000


class NotUnigram(ToolsearchError):
    """The tokenizer is not a Unigram model (or the sidecar cannot describe it)."""


def fingerprint(tokenizer_json: Path) -> str:
    """Size and the SHA-256 of the first and last MiB: cheap, and enough to spot another file."""
    size = tokenizer_json.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with open(tokenizer_json, "rb") as f:
        digest.update(f.read(_EDGE))
        f.seek(max(0, size - _EDGE))
        digest.update(f.read(_EDGE))
    return digest.hexdigest()


def split_tokenizer_json(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[float]]:
    """(the tokenizer's JSON without its vocabulary, pieces, scores); NotUnigram otherwise."""
    model = raw.get("model") or {}
    if model.get("type") != "Unigram" or not isinstance(model.get("vocab"), list):
        raise NotUnigram(f"model type {model.get('type')!r}")
    pieces = [str(entry[0]) for entry in model["vocab"]]
    scores = [float(entry[1]) for entry in model["vocab"]]
    skeleton = dict(raw, model={k: v for k, v in model.items() if k != "vocab"})
    return skeleton, pieces, scores


def bucket_key(piece: str) -> str:
    """Pieces are grouped by their first two characters: a lookup reads one small group."""
    return piece[:2]


def _pad(out: Any, position: int) -> int:
    gap = -position % 8
    out.write(b"\0" * gap)
    return position + gap


def write_sidecar(folder: str | Path) -> Path | None:
    """Write `tokenizer.unigram` for the folder's tokenizer.json; None when it is not Unigram.

    Layout (little-endian): magic; header length; the JSON header (fingerprint, skeleton,
    counts, the lowest-scoring piece); then, each 8-byte aligned: bucket keys (NUL-separated),
    per bucket (offset, length, first position) as uint64, the pieces grouped by bucket
    (NUL-separated UTF-8), their ids in that order as uint32, and the scores by id as float64.
    """
    folder = Path(folder)
    source = folder / "tokenizer.json"
    try:
        skeleton, pieces, scores = split_tokenizer_json(json.loads(source.read_bytes()))
    except NotUnigram:
        return None
    if not pieces or any("\0" in piece for piece in pieces):
        return None  # NUL is the separator: such a vocabulary is read from tokenizer.json
    groups: dict[str, list[int]] = {}
    for i, piece in enumerate(pieces):
        groups.setdefault(bucket_key(piece), []).append(i)
    keys = list(groups)
    table, blocks, ids = array.array("Q"), [], array.array("I")
    offset = 0
    for key in keys:
        block = "\0".join(pieces[i] for i in groups[key]).encode("utf-8")
        table.extend((offset, len(block), len(ids)))
        blocks.append(block)
        ids.extend(groups[key])
        offset += len(block)
    values = array.array("d", scores)
    for numbers in (table, ids, values):
        if sys.byteorder != "little":
            numbers.byteswap()
    floor = values.index(min(values))
    header = {
        "fingerprint": fingerprint(source),
        "skeleton": skeleton,
        "count": len(pieces),
        "buckets": len(keys),
        "longest": max(map(len, pieces)),
        "floor": floor,
        "floor_piece": pieces[floor],
        "unk_piece": _unk_piece(skeleton, pieces),
        "keys_bytes": 0,
        "blob_bytes": offset,
    }
    keys_block = "\0".join(keys).encode("utf-8")
    header["keys_bytes"] = len(keys_block)
    encoded = json.dumps(header).encode()
    target = folder / SIDECAR_NAME
    part = target.with_name(target.name + ".part")
    with open(part, "wb") as out:
        position = out.write(_MAGIC + struct.pack("<Q", len(encoded)) + encoded)
        for chunk in (keys_block, table.tobytes(), b"".join(blocks), ids.tobytes(), values.tobytes()):
            position = _pad(out, position)
            position += out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    os.replace(part, target)
    return target


class _MappedVocabulary:
    """The sidecar, memory-mapped: a group of pieces is decoded into a dict when first looked up."""

    def __init__(self, folder: Path):
        path = folder / SIDECAR_NAME
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        view = memoryview(self._map)
        if bytes(view[: len(_MAGIC)]) != _MAGIC:
            raise ValueError("not a sidecar of this version")
        position = len(_MAGIC)
        (header_len,) = struct.unpack_from("<Q", view, position)
        position += 8
        self.header: dict[str, Any] = json.loads(bytes(view[position : position + header_len]))
        position += header_len

        def region(size: int) -> memoryview:
            nonlocal position
            position += -position % 8
            part = view[position : position + size]
            position += size
            return part

        count, buckets = self.header["count"], self.header["buckets"]
        keys = bytes(region(self.header["keys_bytes"])).decode("utf-8").split("\0")
        self._table = region(24 * buckets).cast("Q")
        self._blob = region(self.header["blob_bytes"])
        self._ids = region(4 * count).cast("I")
        self.scores = region(8 * count).cast("d")
        if sys.byteorder != "little" or len(keys) != buckets or len(self.scores) != count:
            raise ValueError("sidecar does not match its header")
        self._slots = dict(zip(keys, range(buckets), strict=True))
        self._groups: dict[int, dict[str, int]] = {}

    def group(self, key: str) -> dict[str, int] | None:
        slot = self._slots.get(key)
        if slot is None:
            return None
        found = self._groups.get(slot)
        if found is None:
            offset, size, first = self._table[3 * slot : 3 * slot + 3]
            names = bytes(self._blob[offset : offset + size]).decode("utf-8").split("\0")
            found = dict(zip(names, self._ids[first : first + len(names)], strict=True))
            self._groups[slot] = found
        return found


def _unk_piece(skeleton: dict[str, Any], pieces: list[str]) -> str | None:
    unk_id = skeleton["model"].get("unk_id")
    return None if unk_id is None else pieces[unk_id]


class _LoadedVocabulary:
    """The same lookups over a vocabulary read from tokenizer.json (no sidecar)."""

    def __init__(self, skeleton: dict[str, Any], pieces: list[str], scores: list[float]):
        self.scores = scores
        self._groups: dict[str, dict[str, int]] = {}
        for i, piece in enumerate(pieces):
            self._groups.setdefault(bucket_key(piece), {})[piece] = i
        floor = scores.index(min(scores))
        self.header: dict[str, Any] = {
            "count": len(pieces),
            "longest": max(map(len, pieces)),
            "floor": floor,
            "floor_piece": pieces[floor],
            "unk_piece": _unk_piece(skeleton, pieces),
        }

    def group(self, key: str) -> dict[str, int] | None:
        return self._groups.get(key)


def read_sidecar(folder: Path) -> tuple[dict[str, Any], _MappedVocabulary] | None:
    """(skeleton, vocabulary) from a sidecar that matches tokenizer.json; None otherwise."""
    try:
        vocabulary = _MappedVocabulary(folder)
    except (OSError, ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError):
        return None
    if vocabulary.header.get("fingerprint") != fingerprint(folder / "tokenizer.json"):
        return None  # written for another tokenizer.json
    return vocabulary.header["skeleton"], vocabulary


class _Encoding:
    __slots__ = ("ids",)

    def __init__(self, ids: list[int]):
        self.ids = ids


class SubVocabularyTokenizer:
    """The subset of `tokenizers.Tokenizer` the embedder uses, for a Unigram vocabulary held as a
    dict; each call tokenizes with a Unigram model of just the pieces its texts contain."""

    def __init__(self, skeleton: dict[str, Any], vocabulary: _MappedVocabulary | _LoadedVocabulary):
        from tokenizers import Tokenizer

        model = skeleton["model"]
        self.vocabulary, self.scores = vocabulary, vocabulary.scores
        header = vocabulary.header
        self.count, self.longest = header["count"], header["longest"]
        self.floor = (header["floor"], header["floor_piece"])
        self.unk_id: int | None = model.get("unk_id")
        self.unk_piece: str | None = header["unk_piece"]
        self.byte_fallback = bool(model.get("byte_fallback", False))
        self.added = {token["content"]: token["id"] for token in skeleton.get("added_tokens") or []}
        # The pipeline around the model (normalizer, pre-tokenizer, added tokens) from the real
        # JSON, with a one-piece vocabulary; the model itself is made per call.
        small = dict(skeleton, padding=None, truncation=None)
        small["model"] = dict(model, vocab=[[self.floor[1], self.scores[self.floor[0]]]], unk_id=None)
        self._pipeline = Tokenizer.from_str(json.dumps(small))
        self._added_tokens = list(self._pipeline.get_added_tokens_decoder().values())
        self._truncation: int | None = None
        self._words: dict[str, tuple[tuple[int, str], ...]] = {}

    @classmethod
    def from_folder(cls, folder: str | Path) -> SubVocabularyTokenizer:
        """From the sidecar when it matches, else from tokenizer.json; NotUnigram for other models."""
        folder = Path(folder)
        found = read_sidecar(folder)
        if found is not None:
            return cls(*found)
        skeleton, pieces, scores = split_tokenizer_json(json.loads((folder / "tokenizer.json").read_bytes()))
        return cls(skeleton, _LoadedVocabulary(skeleton, pieces, scores))

    # -- what StaticEmbedder calls

    def no_padding(self) -> None:
        pass  # never pads: each text is encoded on its own

    def no_truncation(self) -> None:
        self._truncation = None

    def enable_truncation(self, max_length: int) -> None:
        self._truncation = max_length

    def get_vocab_size(self) -> int:
        return self.count + sum(1 for i in self.added.values() if i >= self.count)

    def encode_batch_fast(self, texts: list[str], add_special_tokens: bool = False) -> list[_Encoding]:
        from tokenizers import Tokenizer, models

        needed: dict[int, str] = {self.floor[0]: self.floor[1]}
        for text in texts:
            needed.update(self._pieces_in(text))
        order = sorted(needed)
        if self.unk_id is not None:
            needed.pop(self.unk_id, None)
            order = [self.unk_id, *sorted(needed)]
            needed[self.unk_id] = self.unk_piece or ""
        model = models.Unigram(
            [(needed[i], float(self.scores[i])) for i in order],
            0 if self.unk_id is not None else None,
            self.byte_fallback,
        )
        tokenizer = Tokenizer(model)
        tokenizer.normalizer = self._pipeline.normalizer
        tokenizer.pre_tokenizer = self._pipeline.pre_tokenizer
        special = [t for t in self._added_tokens if t.special]
        plain = [t for t in self._added_tokens if not t.special]
        if special:
            tokenizer.add_special_tokens(special)
        if plain:
            tokenizer.add_tokens(plain)
        if self._truncation is not None:
            tokenizer.enable_truncation(self._truncation)
        # Ids of the call's model back to the vocabulary's; added tokens by their content.
        to_full: list[int] = list(order)
        for call_id, token in sorted(tokenizer.get_added_tokens_decoder().items()):
            if call_id >= len(to_full):
                to_full.extend([-1] * (call_id + 1 - len(to_full)))
                to_full[call_id] = self.added[token.content]
        encodings = tokenizer.encode_batch_fast(list(texts), add_special_tokens=add_special_tokens)
        return [_Encoding([to_full[i] for i in e.ids]) for e in encodings]

    # -- finding the pieces

    def _segments(self, text: str) -> list[str]:
        """The text, and its parts between added tokens (tokenizers normalizes each on its own)."""
        segments = [text]
        for content in self.added:
            if content and content in text:
                for part in text.split(content):
                    segments += [part, part.strip()]
        return segments

    def _pieces_in(self, text: str) -> dict[int, str]:
        normalizer, pre_tokenizer = self._pipeline.normalizer, self._pipeline.pre_tokenizer
        found: dict[int, str] = {}
        for segment in self._segments(text):
            normalized = normalizer.normalize_str(segment) if normalizer is not None else segment
            words = (
                [w for w, _ in pre_tokenizer.pre_tokenize_str(normalized)]
                if pre_tokenizer is not None
                else [normalized]
            )
            for word in words:
                found.update(self._pieces_of_word(word))
        return found

    def _pieces_of_word(self, word: str) -> tuple[tuple[int, str], ...]:
        """(id, piece) of every piece that occurs in `word`."""
        cached = self._words.get(word)
        if cached is not None:
            return cached
        group, longest, size = self.vocabulary.group, self.longest, len(word)
        found = []
        for start in range(size):
            single = group(word[start])
            if single is not None and (i := single.get(word[start])) is not None:
                found.append((i, word[start]))
            longer = group(word[start : start + 2]) if start + 1 < size else None
            if longer is None:
                continue  # no piece of two or more characters starts here
            for end in range(start + 2, min(size, start + longest) + 1):
                piece = word[start:end]
                if (i := longer.get(piece)) is not None:
                    found.append((i, piece))
        result = tuple(found)
        if len(self._words) >= _WORD_CACHE_LIMIT:
            self._words.clear()
        self._words[word] = result
        return result


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    written = write_sidecar(sys.argv[1])
    print(f"{written}" if written else f"{sys.argv[1]}: not a Unigram tokenizer, no sidecar needed")
