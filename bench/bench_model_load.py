"""Load time and peak memory of the production-shaped model: memory-mapped loader vs model2vec.

    .venv/bin/python bench/bench_model_load.py [--tokenizer PATH] [--rows 500353] [--dim 256]

Builds (once, under --work, default /tmp/toolsearch-bench-model) a model of the
production shape in model2vec's layout: per-row int8 embeddings plus per-token
scales (what `toolsearch fetch-model --int8` produces) and a float32
copy. The tokenizer is --tokenizer if given (its vocabulary sets the row count),
else the development model's (shared/toolsearch/data/model/tokenizer.json) when
it has the production vocabulary, else a synthetic Unigram tokenizer with
--rows tokens, built like potion's (Metaspace words, NFKC).

Each variant loads in a fresh process and prints: seconds to load, seconds for
the first query, peak RSS (VmHWM) and seconds to embed 5,000 tool-like
texts. Files are in the page cache (just written), so the figures are a warm
start; a Lambda cold start also reads the touched pages from the layer.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

from benchlib import peak_rss_mib

ROOT = Path(__file__).resolve().parents[1]
DEV_TOKENIZER = ROOT / "shared" / "toolsearch" / "data" / "model" / "tokenizer.json"
QUERY = "create a calendar event for tomorrow's meeting"
WORDS = [
    "create",
    "list",
    "delete",
    "update",
    "calendar",
    "event",
    "ticket",
    "user",
    "invoice",
    "order",
    "sąskaita",
    "įvykis",
    "klientas",
]


def synthetic_tokenizer(rows: int, path: Path) -> None:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyząčęėįšųūž"
    vocab, seen = [("<unk>", 0.0)], {"<unk>"}
    for ch in letters:
        for piece in (ch, "▁" + ch):
            vocab.append((piece, -10.0))
            seen.add(piece)
    while len(vocab) < rows:
        word = ("▁" if rng.random() < 0.5 else "") + "".join(
            rng.choice(letters) for _ in range(rng.randint(2, 9))
        )
        if word not in seen:
            seen.add(word)
            vocab.append((word, -rng.uniform(5, 20)))
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=0, byte_fallback=False))
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.save(str(path))


def build(work: Path, tokenizer_path: Path | None, rows: int, dim: int) -> dict[str, Path]:
    import numpy as np
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer

    from toolsearch.model.build.prepare import quantize_rows_int8

    folders = {"int8": work / "int8", "float32": work / "float32"}
    if all((f / "model.safetensors").is_file() for f in folders.values()):
        return folders
    work.mkdir(parents=True, exist_ok=True)
    source = work / "tokenizer.json"
    if tokenizer_path is None:
        synthetic_tokenizer(rows, source)
    else:
        source.write_bytes(tokenizer_path.read_bytes())
    vocab = Tokenizer.from_file(str(source)).get_vocab_size()
    rng = np.random.default_rng(0)
    matrix = (rng.standard_normal((vocab, dim), np.float32) * rng.uniform(0.3, 3, (vocab, 1))).astype(
        np.float32
    )
    values, scales = quantize_rows_int8(matrix)
    config = {"model_type": "model2vec", "normalize": True, "hidden_dim": dim}
    for kind, tensors in (
        ("int8", {"embeddings": values, "weights": scales}),
        ("float32", {"embeddings": matrix}),
    ):
        folder = folders[kind]
        folder.mkdir(exist_ok=True)
        save_file(tensors, folder / "model.safetensors")
        (folder / "tokenizer.json").write_bytes(source.read_bytes())
        (folder / "config.json").write_text(json.dumps(config | {"embedding_dtype": kind}))
    return folders


def measure(folder: str, mmap: bool) -> None:
    """Runs in a child process: one load, printed as JSON."""
    started = time.perf_counter()
    from toolsearch.model.load import load_embedder

    embedder = load_embedder(folder, mmap=mmap)
    loaded = time.perf_counter()
    embedder.encode([QUERY])
    first = time.perf_counter()
    rng = random.Random(1)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) for _ in range(5000)]
    t = time.perf_counter()
    embedder.encode(texts)
    batch = time.perf_counter() - t
    peak_mib = peak_rss_mib()
    print(
        json.dumps(
            {
                "load_s": loaded - started,
                "first_query_s": first - loaded,
                "peak_rss_mib": peak_mib,
                "encode_5000_s": batch,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokenizer", type=Path, default=None)
    parser.add_argument("--rows", type=int, default=500_353)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--work", type=Path, default=Path("/tmp/toolsearch-bench-model"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("FOLDER", "MMAP"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        measure(args.child[0], args.child[1] == "1")
        return

    tokenizer = args.tokenizer
    if tokenizer is None and DEV_TOKENIZER.is_file():
        from tokenizers import Tokenizer

        if Tokenizer.from_file(str(DEV_TOKENIZER)).get_vocab_size() >= args.rows:
            tokenizer = DEV_TOKENIZER
    folders = build(args.work, tokenizer, args.rows, args.dim)
    size = {k: (f / "model.safetensors").stat().st_size / 2**20 for k, f in folders.items()}
    tok_mib = (folders["int8"] / "tokenizer.json").stat().st_size / 2**20
    print(f"tokenizer: {tokenizer or 'synthetic Unigram'} ({tok_mib:.1f} MiB)")
    print(f"{'variant':34} {'load s':>7} {'1st query s':>11} {'peak RSS MiB':>12} {'5000 texts s':>12}")
    for kind in ("int8", "float32"):
        for mmap in (True, False):
            label = f"{kind} ({size[kind]:.0f} MiB) " + ("mmap (load.py)" if mmap else "model2vec")
            runs = []
            for _ in range(args.repeat):
                out = subprocess.run(
                    [sys.executable, __file__, "--child", str(folders[kind]), "1" if mmap else "0"],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                runs.append(json.loads(out.strip().splitlines()[-1]))
            best = {k: min(r[k] for r in runs) for k in runs[0]}
            print(
                f"{label:34} {best['load_s']:7.2f} {best['first_query_s']:11.4f} "
                f"{best['peak_rss_mib']:12.0f} {best['encode_5000_s']:12.3f}"
            )
    print(f"(best of {args.repeat} fresh processes each)")


if __name__ == "__main__":
    main()
