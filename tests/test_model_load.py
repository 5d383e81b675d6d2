"""The model loader and preparation, checked against model2vec's own StaticModel."""

from __future__ import annotations

import json

import numpy as np
import pytest
from model2vec import StaticModel
from model2vec.quantization import DType, quantize_embeddings
from safetensors.numpy import save_file

from fixtures.model_helpers import make_model, make_tokenizer
from toolsearch.model import load as load_module
from toolsearch.model.build.manifest import read_manifest
from toolsearch.model.build.prepare import PrepareError, prepare_model, quantize_rows_int8
from toolsearch.model.load import (
    Model2VecEmbedder,
    ModelLoadError,
    StaticEmbedder,
    load_embedder,
    read_safetensors_header,
    resolve_model_dir,
)

TEXTS = [
    "create a calendar event",
    "delete the customer order",
    "send email message to user",
    "sąskaita klientui",
    "Kalendorius: naujas įvykis rytas",
    "",  # no tokens at all
    "qqq xxx",  # unknown pieces, dropped
    "list " * 40,
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_model(tmp_path_factory.mktemp("m") / "tiny", dim=16)


def reference(folder) -> np.ndarray:
    model = StaticModel.from_pretrained(folder, normalize=True)
    return np.asarray(model.encode(TEXTS, use_multiprocessing=False), np.float32)


def test_fast_loader_matches_model2vec(model_dir):
    embedder = load_embedder(model_dir)
    assert isinstance(embedder, StaticEmbedder)
    assert isinstance(embedder.embeddings, np.memmap)  # mapped, not copied

    vectors = embedder.encode(TEXTS)

    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 16)
    np.testing.assert_allclose(vectors, reference(model_dir), atol=1e-5)
    norms = np.linalg.norm(vectors, axis=1)
    assert np.allclose(norms[[0, 1, 2, 3, 4, 7]], 1.0, atol=1e-5)
    assert not vectors[5].any()  # no tokens: a zero row, not NaN


def test_reference_loader_has_the_same_interface(model_dir):
    embedder = load_embedder(model_dir, mmap=False)
    assert isinstance(embedder, Model2VecEmbedder) and embedder.dim == 16
    np.testing.assert_allclose(embedder.encode(TEXTS), load_embedder(model_dir).encode(TEXTS), atol=1e-5)
    assert embedder.encode([]).shape == (0, 16)


def test_encode_refuses_a_bare_string(model_dir):
    with pytest.raises(TypeError):
        load_embedder(model_dir).encode("create event")


def test_tokens_beyond_max_length_are_ignored(tmp_path):
    folder = make_model(tmp_path / "short")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"max_length": 2}))
    embedder = load_embedder(folder)
    a, b = embedder.encode(["create event", "create event delete user invoice"])
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_int8_prepared_model_is_close_and_model2vec_reads_it_the_same_way(model_dir, tmp_path):
    out = prepare_model(model_dir, tmp_path / "int8", quantize="int8")

    tensors = read_safetensors_header(out / "model.safetensors")
    assert tensors["embeddings"].dtype == np.int8
    assert tensors["weights"].shape == (tensors["embeddings"].shape[0],)
    assert json.loads((out / "config.json").read_text())["embedding_dtype"] == "int8"
    assert read_manifest(out)["prepared"] == {"quantize": "int8", "dims": None}
    full = load_embedder(model_dir).encode(TEXTS)
    small = load_embedder(out).encode(TEXTS)
    cosines = (full * small).sum(axis=1)
    assert cosines[[0, 1, 2, 3, 4, 7]].min() > 0.999
    np.testing.assert_allclose(small, reference(out), atol=1e-5)


def test_per_row_int8_keeps_short_vectors_better_than_one_global_scale():
    rng = np.random.default_rng(1)
    matrix = (rng.normal(size=(2000, 64)) * rng.uniform(0.02, 5.0, size=(2000, 1))).astype(np.float32)

    values, scales = quantize_rows_int8(matrix)
    per_row = values.astype(np.float32) * scales[:, None]
    global_q = quantize_embeddings(matrix, DType.Int8).astype(np.float32)

    def worst_cosine(approx: np.ndarray) -> float:
        dots = (matrix * approx).sum(axis=1)
        return float((dots / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(approx, axis=1) + 1e-30)).min())

    assert worst_cosine(per_row) > 0.999
    assert worst_cosine(global_q) < worst_cosine(per_row)


def test_pca_with_all_dimensions_is_a_rotation(model_dir, tmp_path):
    out = prepare_model(model_dir, tmp_path / "rot", dims=16)
    before, after = load_embedder(model_dir).encode(TEXTS), load_embedder(out).encode(TEXTS)
    np.testing.assert_allclose(before @ before.T, after @ after.T, atol=1e-5)


def test_fewer_dimensions_pca_keeps_at_least_the_energy_of_truncation(model_dir, tmp_path):
    pca = prepare_model(model_dir, tmp_path / "pca", dims=6, dims_method="pca")
    cut = prepare_model(model_dir, tmp_path / "cut", dims=6, dims_method="truncate")

    kept_pca = read_manifest(pca)["prepare_stats"]["variance_kept"]
    kept_cut = read_manifest(cut)["prepare_stats"]["variance_kept"]
    assert 0 < kept_cut <= kept_pca + 1e-9 < 1
    for folder in (pca, cut):
        vectors = load_embedder(folder).encode(TEXTS)
        assert vectors.shape == (len(TEXTS), 6)


def test_int8_and_fewer_dims_together_load_in_model2vec_too(model_dir, tmp_path):
    out = prepare_model(model_dir, tmp_path / "both", quantize="int8", dims=8)
    ours = load_embedder(out).encode(TEXTS)
    assert ours.shape == (len(TEXTS), 8)
    np.testing.assert_allclose(ours, reference(out), atol=1e-5)


def test_prepare_refuses_bad_requests(model_dir, tmp_path):
    with pytest.raises(PrepareError):
        prepare_model(model_dir, tmp_path / "x", dims=17)
    with pytest.raises(PrepareError):
        prepare_model(model_dir, tmp_path / "x", quantize="int4")


def test_vocabulary_quantized_models_load_with_mapping_and_weights(tmp_path):
    tokenizer = make_tokenizer()
    vocab = tokenizer.get_vocab_size()
    rng = np.random.default_rng(3)
    folder = tmp_path / "vq"
    folder.mkdir()
    save_file(
        {
            "embeddings": rng.normal(size=(7, 12)).astype(np.float32),
            "mapping": rng.integers(0, 7, size=vocab).astype(np.int64),
            "weights": rng.uniform(0.1, 2.0, size=vocab).astype(np.float32),
        },
        folder / "model.safetensors",
    )
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "config.json").write_text(json.dumps({"normalize": True, "hidden_dim": 12}))

    np.testing.assert_allclose(load_embedder(folder).encode(TEXTS), reference(folder), atol=1e-5)
    with pytest.raises(PrepareError, match="mapping"):
        prepare_model(folder, tmp_path / "vq8", quantize="int8")


def test_broken_folders_are_clear_errors(model_dir, tmp_path):
    with pytest.raises(ModelLoadError, match=r"no model\.safetensors"):
        load_embedder(tmp_path)

    short = tmp_path / "short"
    short.mkdir()
    for name in ("tokenizer.json", "config.json"):
        (short / name).write_bytes((model_dir / name).read_bytes())
    (short / "model.safetensors").write_bytes((model_dir / "model.safetensors").read_bytes()[:-100])
    with pytest.raises(ModelLoadError, match="do not fit"):
        load_embedder(short)

    (short / "model.safetensors").write_bytes(b"\x01\x00")
    with pytest.raises(ModelLoadError, match="not a safetensors file"):
        load_embedder(short)

    save_file({"embeddings": np.zeros((3, 4), np.float32)}, short / "model.safetensors")
    with pytest.raises(ModelLoadError, match="vectors for"):
        load_embedder(short)


def test_model_dir_resolution_order(tmp_path, monkeypatch):
    layer, bundled = tmp_path / "opt-model", tmp_path / "bundled"
    monkeypatch.setattr(load_module, "LAMBDA_MODEL_DIR", layer)
    monkeypatch.setattr(load_module, "BUNDLED_MODEL_DIR", bundled)

    assert resolve_model_dir("") is None
    make_model(bundled)
    assert resolve_model_dir("") == bundled
    make_model(layer)
    assert resolve_model_dir("") == layer
    assert resolve_model_dir(str(tmp_path / "mine")) == tmp_path / "mine"


def test_prepare_command_reports_energy_and_writes_the_folder(model_dir, tmp_path, capsys):
    from toolsearch.model.build.prepare import main

    main([str(model_dir), str(tmp_path / "cli"), "--int8", "--dims", "8"])

    printed = capsys.readouterr().out
    assert "dims  truncate  pca" in printed
    assert read_manifest(tmp_path / "cli")["prepared"] == {"quantize": "int8", "dims": 8}
    assert load_embedder(tmp_path / "cli").dim == 8
