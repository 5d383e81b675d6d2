"""Shrink a model2vec model to fit AWS Lambda: int8 rows and fewer dimensions.

A Lambda function and its layers hold at most 250 MB unzipped. The production
model, 500,353 tokens x 256 dimensions, is 512 MB as float32 and 128 MB as
int8, so only int8 fits beside the code.

int8 here is per row: each token's vector is divided by its own scale
(max |value| / 127) and rounded, and the scales are stored as model2vec's
per-token `weights` tensor, which model2vec multiplies back in when pooling.
The folder therefore stays a plain model2vec model (`StaticModel.from_pretrained`
reads it correctly) while keeping the precision of short vectors: model2vec's
own `quantize_to="int8"` uses one scale for the whole matrix, so a token whose
vector is much shorter than the longest one keeps only a few levels.

Fewer dimensions: `dims_method="pca"` (default) rotates the matrix onto the
principal axes of its uncentred second moment (the subspace that best keeps
the dot products mean pooling and cosine similarity are made of) and keeps the
leading `dims`; `"truncate"` keeps the first `dims` columns as they are.
model2vec distils through PCA, so its leading columns already carry most of
the variance, but training after distillation (potion models are trained
further with tokenlearn) loosens that order; `prepare_model` records the share
of the energy kept either way (`variance_kept` in the manifest).

Not offered: model2vec's vocabulary quantization (`quantize_model(...,
vocabulary_quantization=k)`: k k-means centroids, a token -> centroid mapping
and per-token weights; the loader reads such a model). It costs recall,
Lithuanian most (tokens of both languages share centroids, undoing the
cross-lingual alignment), its k-means takes minutes and needs scikit-learn, and
it shrinks the matrix only, which int8 already fits in a layer. The figures are
in tools/devmodel/base/README.md ("Vocabulary quantization: measured, not offered").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from toolsearch.model.build.manifest import read_manifest, remove_manifest, write_atomic, write_manifest
from toolsearch.model.load import ModelLoadError, read_safetensors_header, read_tensor

COPIED_FILES = ("tokenizer.json", "README.md", "LICENSE", "modules.json")
_ROWS_PER_BLOCK = 65_536


class PrepareError(ModelLoadError):
    """The model cannot be prepared as asked."""


def principal_axes(embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (descending) and axes of E^T E, accumulated in blocks to bound memory."""
    dim = embeddings.shape[1]
    moment = np.zeros((dim, dim), np.float64)
    for start in range(0, len(embeddings), _ROWS_PER_BLOCK):
        block = np.asarray(embeddings[start : start + _ROWS_PER_BLOCK], np.float64)
        moment += block.T @ block
    values, vectors = np.linalg.eigh(moment)
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    # Fix each axis's sign so the same model always prepares to the same bytes.
    signs = np.sign(vectors[np.argmax(np.abs(vectors), axis=0), np.arange(dim)])
    return values, vectors * np.where(signs == 0, 1.0, signs)


def energy_by_column(embeddings: np.ndarray) -> np.ndarray:
    """Sum of squares per column, as a share of the total."""
    energy = np.zeros(embeddings.shape[1], np.float64)
    for start in range(0, len(embeddings), _ROWS_PER_BLOCK):
        block = np.asarray(embeddings[start : start + _ROWS_PER_BLOCK], np.float64)
        energy += (block * block).sum(axis=0)
    return energy / energy.sum()


def reduce_dims(embeddings: np.ndarray, dims: int, method: str) -> tuple[np.ndarray, float]:
    """The matrix with `dims` columns, and the share of energy (sum of squares) kept."""
    if method == "truncate":
        kept = float(energy_by_column(embeddings)[:dims].sum())
        return np.ascontiguousarray(embeddings[:, :dims], np.float32), kept
    if method != "pca":
        raise PrepareError(f"dims_method must be pca or truncate, not {method!r}")
    values, axes = principal_axes(embeddings)
    kept = float(values[:dims].sum() / values.sum())
    projection = axes[:, :dims].astype(np.float32)
    out = np.empty((len(embeddings), dims), np.float32)
    for start in range(0, len(embeddings), _ROWS_PER_BLOCK):
        block = np.asarray(embeddings[start : start + _ROWS_PER_BLOCK], np.float32)
        out[start : start + len(block)] = block @ projection
    return out, kept


def quantize_rows_int8(embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row symmetric int8: (values, scales) with row ~= values * scale."""
    peak = np.abs(embeddings).max(axis=1)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    values = np.clip(np.rint(embeddings / scales[:, None]), -127, 127).astype(np.int8)
    return values, scales


def prepare_model(
    source_dir: str | Path,
    out_dir: str | Path,
    *,
    quantize: str | None = None,
    dims: int | None = None,
    dims_method: str = "pca",
) -> Path:
    """Write a prepared copy of the model in `source_dir` to `out_dir`; its manifest is written last."""
    source, out = Path(source_dir), Path(out_dir)
    if quantize not in (None, "int8"):
        raise PrepareError(f"quantize must be int8 or nothing, not {quantize!r}")
    weights_path = source / "model.safetensors"
    tensors = read_safetensors_header(weights_path)
    if "embeddings" not in tensors:
        raise PrepareError(f"{weights_path}: no 'embeddings' tensor")
    if "mapping" in tensors:
        raise PrepareError(f"{source}: vocabulary-quantized models (with a token mapping) are not supported")
    embeddings = read_tensor(weights_path, tensors["embeddings"]).astype(np.float32, copy=False)
    weights = read_tensor(weights_path, tensors["weights"]) if "weights" in tensors else None
    full_dim = embeddings.shape[1]
    if dims is not None and not 1 <= dims <= full_dim:
        raise PrepareError(f"dims must be between 1 and {full_dim}, not {dims}")

    stats: dict[str, Any] = {}
    if dims is not None and dims < full_dim:
        embeddings, stats["variance_kept"] = reduce_dims(embeddings, dims, dims_method)
        stats["dims_method"] = dims_method
    tensors_out: dict[str, np.ndarray] = {}
    if quantize == "int8":
        values, scales = quantize_rows_int8(embeddings)
        tensors_out["embeddings"] = values
        tensors_out["weights"] = scales if weights is None else (scales * weights).astype(np.float32)
    else:
        tensors_out["embeddings"] = np.ascontiguousarray(embeddings, np.float32)
        if weights is not None:
            tensors_out["weights"] = weights

    out.mkdir(parents=True, exist_ok=True)
    remove_manifest(out)
    from safetensors.numpy import save

    write_atomic(out / "model.safetensors", save(tensors_out))
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    config["hidden_dim"] = int(tensors_out["embeddings"].shape[1])
    config["embedding_dtype"] = tensors_out["embeddings"].dtype.name
    write_atomic(out / "config.json", (json.dumps(config, indent=4) + "\n").encode())
    for name in COPIED_FILES:
        if (source / name).is_file():
            write_atomic(out / name, (source / name).read_bytes())
    # The vocabulary as the loader maps it (unigram.py), so a cold start never builds the whole trie.
    from toolsearch.model.unigram import write_sidecar

    write_sidecar(out)

    from toolsearch.model.build.lock import file_sha256

    origin = read_manifest(source) or {}
    write_manifest(
        out,
        {
            "repo": origin.get("repo"),
            "revision": origin.get("revision"),
            "license": origin.get("license"),
            "prepared": {"quantize": quantize, "dims": dims},
            "prepare_stats": stats,
            "source": origin.get("files", {}),
            "files": {
                p.name: {"sha256": file_sha256(p), "size": p.stat().st_size}
                for p in sorted(out.iterdir())
                if p.is_file() and not p.name.endswith(".part") and p.name != "toolsearch-model.json"
            },
        },
    )
    return out


def energy_report(model_dir: str | Path, dims: tuple[int, ...] = (4, 8, 32, 64, 128, 192)) -> str:
    """How much of the matrix's energy the leading columns keep, as they are and after PCA."""
    path = Path(model_dir) / "model.safetensors"
    tensors = read_safetensors_header(path)
    embeddings = read_tensor(path, tensors["embeddings"]).astype(np.float32, copy=False)
    if "weights" in tensors and "mapping" not in tensors:
        embeddings = embeddings * read_tensor(path, tensors["weights"]).astype(np.float32)[:, None]
    by_column = np.cumsum(energy_by_column(embeddings))
    values, _ = principal_axes(embeddings)
    by_axis = np.cumsum(values) / values.sum()
    lines = [f"{path}: {embeddings.shape[0]} x {embeddings.shape[1]}", "dims  truncate  pca"]
    for d in (d for d in dims if d < embeddings.shape[1]):
        lines.append(f"{d:4d}  {by_column[d - 1]:8.4f}  {by_axis[d - 1]:.4f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """python -m toolsearch.model.build.prepare SOURCE [OUT] [--int8] [--dims N]
    [--dims-method pca|truncate]"""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m toolsearch.model.build.prepare", description=main.__doc__
    )
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path, nargs="?", help="omit to only print the energy report")
    parser.add_argument("--int8", action="store_true")
    parser.add_argument("--dims", type=int)
    parser.add_argument("--dims-method", choices=("pca", "truncate"), default="pca")
    args = parser.parse_args(argv)
    print(energy_report(args.source))
    if args.out:
        prepare_model(
            args.source,
            args.out,
            quantize="int8" if args.int8 else None,
            dims=args.dims,
            dims_method=args.dims_method,
        )
        print(json.dumps(read_manifest(args.out), indent=2))


if __name__ == "__main__":
    main()
